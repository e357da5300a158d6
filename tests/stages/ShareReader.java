import java.time.Duration;
import java.util.*;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;

public class ShareReader {
    // args: bootstrap topic group records isolation("" keeps the group's default)
    // Sets the group's share.auto.offset.reset=earliest (and share.isolation.level), reads `records`
    // records, acknowledges them (commitSync), prints READ n, and stays a member until killed.
    public static void main(String[] a) throws Exception {
        Properties ap = new Properties();
        ap.put("bootstrap.servers", a[0]);
        try (Admin admin = Admin.create(ap)) {
            List<AlterConfigOp> ops = new ArrayList<>();
            AlterConfigOp.OpType set = AlterConfigOp.OpType.SET;
            ops.add(new AlterConfigOp(new ConfigEntry("share.auto.offset.reset", "earliest"), set));
            if (!a[4].isEmpty()) ops.add(new AlterConfigOp(new ConfigEntry("share.isolation.level", a[4]), set));
            admin.incrementalAlterConfigs(Map.of(new ConfigResource(ConfigResource.Type.GROUP, a[2]), ops)).all().get();
        }
        Properties p = new Properties();
        p.put("bootstrap.servers", a[0]);
        p.put("group.id", a[2]);
        p.put("client.id", "share-reader");
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        int want = Integer.parseInt(a[3]), got = 0;
        boolean said = false;
        try (KafkaShareConsumer<String, String> c = new KafkaShareConsumer<>(p)) {
            c.subscribe(List.of(a[1]));
            while (true) {
                ConsumerRecords<String, String> rs = c.poll(Duration.ofMillis(200));
                got += rs.count();
                if (!rs.isEmpty()) {
                    c.commitSync();
                    if (got >= want && !said) { System.out.println("READ " + got); System.out.flush(); said = true; }
                }
            }
        }
    }
}
