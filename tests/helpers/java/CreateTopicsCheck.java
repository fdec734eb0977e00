import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.CreateTopicsResult;
import org.apache.kafka.clients.admin.NewTopic;

/**
 * Java AdminClient createTopics against the log server, as tests/cluster/test_cluster_create_topics.py
 * runs it: creates TOPIC (PARTITIONS partitions, replication factor RF, cleanup.policy=compact)
 * and prints what the CreateTopics answer told the client, one fact a line:
 * "partitions N", "replication N", "config NAME=VALUE SOURCE". Any exception (the
 * NullPointerException of a success answered without configs) exits with status 1.
 *
 * Usage: java CreateTopicsCheck BOOTSTRAP TOPIC PARTITIONS RF
 */
public final class CreateTopicsCheck {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "30000");
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "60000");
        String topic = args[1];
        NewTopic wanted = new NewTopic(topic, Integer.parseInt(args[2]), Short.parseShort(args[3]))
            .configs(Collections.singletonMap("cleanup.policy", "compact"));
        try (Admin admin = Admin.create(props)) {
            CreateTopicsResult result = admin.createTopics(List.of(wanted));
            result.all().get();
            System.out.println("partitions " + result.numPartitions(topic).get());
            System.out.println("replication " + result.replicationFactor(topic).get());
            Config config = result.config(topic).get();
            Map<String, ConfigEntry> sorted = new TreeMap<>();
            for (ConfigEntry entry : config.entries()) {
                sorted.put(entry.name(), entry);
            }
            for (ConfigEntry entry : sorted.values()) {
                System.out.println("config " + entry.name() + "=" + entry.value() + " " + entry.source());
            }
        } catch (Exception e) {
            e.printStackTrace();
            System.exit(1);
        }
    }
}
