import java.time.Duration;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Produced;

/** A Kafka Streams stage: INPUT -> groupByKey().count() -> OUTPUT (a KTable's updates: key, 8-byte long).
 *  args: BOOTSTRAP APPLICATION_ID INPUT OUTPUT GUARANTEE DELAY_MS COMMIT_INTERVAL_MS STATE_DIR
 *  Prints `processed N` per record and `state S` on each state change; SIGTERM closes it. */
public class CountStage {
    public static void main(String[] a) throws Exception {
        Properties p = new Properties();
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, a[0]);
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, a[1]);
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, a[4]);
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, a[6]);
        p.put(StreamsConfig.STATE_DIR_CONFIG, a[7]);
        // Every update of the count is sent on (no record cache holding them back to the commit).
        p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG), 6000);
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG), 1000);
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        long delay = Long.parseLong(a[5]);
        AtomicLong processed = new AtomicLong();
        StreamsBuilder b = new StreamsBuilder();
        b.stream(a[2], Consumed.with(Serdes.String(), Serdes.String()))
         .peek((k, v) -> {
             try { Thread.sleep(delay); } catch (InterruptedException e) { Thread.currentThread().interrupt(); }
             System.out.println("processed " + processed.incrementAndGet());
         })
         .groupByKey(Grouped.with(Serdes.String(), Serdes.String()))
         .count()
         .toStream()
         .to(a[3], Produced.with(Serdes.String(), Serdes.Long()));
        KafkaStreams streams = new KafkaStreams(b.build(), p);
        streams.setStateListener((now, before) -> System.out.println("state " + now));
        Runtime.getRuntime().addShutdownHook(new Thread(() -> streams.close(Duration.ofSeconds(20))));
        streams.start();
        Thread.currentThread().join();
    }
}
