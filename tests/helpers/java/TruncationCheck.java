import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.time.Duration;
import java.util.Collections;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.LogTruncationException;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * The Java consumer's log-truncation detection (KIP-320), as
 * tests/cluster/test_cluster_leader_epoch_validation.py runs it. Two consumers of partition 0 of
 * TOPIC, one with auto.offset.reset=none and one with earliest, each read COUNT records from
 * offset 0 and print "positioned NAME OFFSET". Then the program waits for a line on stdin
 * (the test fails the leader over meanwhile) and polls both again for up to 60 s:
 * "none truncation TOPIC-P DIVERGENT_OFFSET" when the consumer without a reset policy raises
 * LogTruncationException ("none error CLASS MESSAGE" for anything else, "none record OFFSET
 * VALUE" for a record), and "earliest record OFFSET VALUE" for each record the other reads,
 * until it has read AFTER records. Ends with "done".
 *
 * Usage: java TruncationCheck BOOTSTRAP TOPIC COUNT AFTER
 */
public final class TruncationCheck {
    private static KafkaConsumer<String, String> consumer(String bootstrap, String reset) {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, reset);
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.METADATA_MAX_AGE_CONFIG, "1000");
        props.put(ConsumerConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, "1000");
        props.put(ConsumerConfig.CLIENT_ID_CONFIG, "truncation-" + reset);
        return new KafkaConsumer<>(props);
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        TopicPartition tp = new TopicPartition(args[1], 0);
        int count = Integer.parseInt(args[2]);
        int after = Integer.parseInt(args[3]);
        try (KafkaConsumer<String, String> none = consumer(bootstrap, "none");
             KafkaConsumer<String, String> earliest = consumer(bootstrap, "earliest")) {
            for (KafkaConsumer<String, String> c : java.util.List.of(none, earliest)) {
                c.assign(Collections.singletonList(tp));
                c.seek(tp, 0);
                int read = 0;
                long deadline = System.currentTimeMillis() + 60_000;
                while (read < count && System.currentTimeMillis() < deadline) {
                    read += c.poll(Duration.ofMillis(200)).count();
                }
                String name = c == none ? "none" : "earliest";
                System.out.println("positioned " + name + " " + c.position(tp));
            }
            System.out.flush();
            new BufferedReader(new InputStreamReader(System.in)).readLine();
            boolean noneDone = false;
            int earliestRead = 0;
            long deadline = System.currentTimeMillis() + 60_000;
            while ((!noneDone || earliestRead < after) && System.currentTimeMillis() < deadline) {
                if (!noneDone) {
                    try {
                        for (ConsumerRecord<String, String> r : none.poll(Duration.ofMillis(100))) {
                            System.out.println("none record " + r.offset() + " " + r.value());
                        }
                    } catch (LogTruncationException e) {
                        for (Map.Entry<TopicPartition, OffsetAndMetadata> d : e.divergentOffsets().entrySet()) {
                            System.out.println("none truncation " + d.getKey() + " " + d.getValue().offset());
                        }
                        noneDone = true;
                    } catch (RuntimeException e) {
                        System.out.println("none error " + e.getClass().getName() + " " + e.getMessage());
                        noneDone = true;
                    }
                }
                if (earliestRead < after) {
                    for (ConsumerRecord<String, String> r : earliest.poll(Duration.ofMillis(100))) {
                        System.out.println("earliest record " + r.offset() + " " + r.value());
                        earliestRead++;
                    }
                }
                System.out.flush();
            }
            System.out.println("done");
        }
    }
}
