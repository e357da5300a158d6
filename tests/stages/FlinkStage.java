import java.nio.charset.StandardCharsets;

import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.MapFunction;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.connector.base.DeliveryGuarantee;
import org.apache.flink.connector.kafka.sink.KafkaRecordSerializationSchema;
import org.apache.flink.connector.kafka.sink.KafkaSink;
import org.apache.flink.connector.kafka.source.KafkaSource;
import org.apache.flink.connector.kafka.source.enumerator.initializer.OffsetsInitializer;
import org.apache.flink.connector.kafka.source.reader.deserializer.KafkaRecordDeserializationSchema;
import org.apache.flink.runtime.state.FunctionInitializationContext;
import org.apache.flink.runtime.state.FunctionSnapshotContext;
import org.apache.flink.streaming.api.checkpoint.CheckpointedFunction;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.util.Collector;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.ProducerRecord;

/** A Flink job in a local MiniCluster: KafkaSource (read_committed) -> each value upper-cased, its key kept ->
 *  KafkaSink with DeliveryGuarantee.EXACTLY_ONCE, checkpoints to a file directory.
 *  args: BOOTSTRAP INPUT OUTPUT GROUP TXN_PREFIX CHECKPOINT_DIR DELAY_MS STALL_AFTER TXN_TIMEOUT_MS RESTORE|-
 *  At the first checkpoint after STALL_AFTER records (0: never) the map's snapshot stalls: the sink has
 *  pre-committed that checkpoint's transaction (flushed before the barrier) and the checkpoint never
 *  completes, so nothing commits it: a kill then leaves it open. RESTORE: a completed checkpoint's directory to start from.
 *  Prints `processed N`, `snapshot N` and `stalled N`. */
public class FlinkStage {
    public static void main(String[] a) throws Exception {
        Configuration conf = new Configuration();
        conf.setString("execution.checkpointing.dir", "file://" + a[5]);
        conf.setString("execution.checkpointing.externalized-checkpoint-retention", "RETAIN_ON_CANCELLATION");
        conf.setString("execution.checkpointing.num-retained", "3");
        if (!a[9].equals("-")) {
            conf.setString("execution.state-recovery.path", a[9]);
        }
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        env.setParallelism(1);
        env.enableCheckpointing(500);
        KafkaSource<Tuple2<String, String>> source = KafkaSource.<Tuple2<String, String>>builder()
            .setBootstrapServers(a[0]).setTopics(a[1]).setGroupId(a[3])
            .setStartingOffsets(OffsetsInitializer.earliest())
            .setProperty("isolation.level", "read_committed")
            .setDeserializer(new KeyValue())
            .build();
        KafkaSink<Tuple2<String, String>> sink = KafkaSink.<Tuple2<String, String>>builder()
            .setBootstrapServers(a[0])
            .setRecordSerializer(new ToTopic(a[2]))
            .setDeliveryGuarantee(DeliveryGuarantee.EXACTLY_ONCE)
            .setTransactionalIdPrefix(a[4])
            // Flink's default is 1 h, above the broker's transaction.max.timeout.ms (15 min): the job must set it.
            .setProperty("transaction.timeout.ms", a[8])
            .build();
        env.fromSource(source, WatermarkStrategy.noWatermarks(), "input")
           .map(new Upper(Long.parseLong(a[6]), Long.parseLong(a[7])))
           .sinkTo(sink);
        env.execute("eosctl-flink-stage");
    }

    static class KeyValue implements KafkaRecordDeserializationSchema<Tuple2<String, String>> {
        @Override
        public void deserialize(ConsumerRecord<byte[], byte[]> r, Collector<Tuple2<String, String>> out) {
            out.collect(Tuple2.of(new String(r.key(), StandardCharsets.UTF_8),
                                  new String(r.value(), StandardCharsets.UTF_8)));
        }

        @Override
        public TypeInformation<Tuple2<String, String>> getProducedType() {
            return Types.TUPLE(Types.STRING, Types.STRING);
        }
    }

    static class ToTopic implements KafkaRecordSerializationSchema<Tuple2<String, String>> {
        private final String topic;

        ToTopic(String topic) {
            this.topic = topic;
        }

        @Override
        public ProducerRecord<byte[], byte[]> serialize(Tuple2<String, String> e, KafkaSinkContext ctx, Long ts) {
            return new ProducerRecord<>(topic, e.f0.getBytes(StandardCharsets.UTF_8),
                                        e.f1.getBytes(StandardCharsets.UTF_8));
        }
    }

    static class Upper implements MapFunction<Tuple2<String, String>, Tuple2<String, String>>, CheckpointedFunction {
        private final long delay;
        private final long stallAfter;
        private long processed;

        Upper(long delay, long stallAfter) {
            this.delay = delay;
            this.stallAfter = stallAfter;
        }

        @Override
        public Tuple2<String, String> map(Tuple2<String, String> kv) throws Exception {
            Thread.sleep(delay);
            System.out.println("processed " + (++processed));
            return Tuple2.of(kv.f0, kv.f1.toUpperCase());
        }

        @Override
        public void snapshotState(FunctionSnapshotContext ctx) throws Exception {
            long id = ctx.getCheckpointId();
            System.out.println("snapshot " + id);
            if (stallAfter > 0 && processed >= stallAfter) {
                System.out.println("stalled " + id);
                Thread.sleep(600_000);
            }
        }

        @Override
        public void initializeState(FunctionInitializationContext ctx) {
        }
    }
}
