import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.function.BooleanSupplier;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * What the checks of {@link ClientTier} share: the bootstrap, the replication factor and
 * the name prefix the test gave, client settings, "fact NAME=VALUE" output lines (the
 * pytest side asserts on them) and bounded waits.
 */
final class TierSupport {
    /** How long any wait of a check may take: well under the test's own timeout. */
    static final Duration PATIENCE = Duration.ofSeconds(40);

    final String bootstrap;
    final short replication;
    final String prefix;

    TierSupport(String bootstrap, short replication, String prefix) {
        this.bootstrap = bootstrap;
        this.replication = replication;
        this.prefix = prefix;
    }

    /** One fact the pytest side reads: "fact NAME=VALUE". */
    static void fact(String name, Object value) {
        System.out.println("fact " + name + "=" + value);
        System.out.flush();
    }

    /** Polls {@code done} until it holds; an AssertionError naming {@code what} after PATIENCE. */
    static void waitFor(String what, BooleanSupplier done) throws InterruptedException {
        long deadline = System.nanoTime() + PATIENCE.toNanos();
        while (!done.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("timed out waiting for " + what);
            }
            Thread.sleep(100);
        }
    }

    String name(String suffix) {
        return prefix + "-" + suffix;
    }

    Admin admin() {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "30000");
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "40000");
        return Admin.create(props);
    }

    /** Creates topics of {@code partitions} partitions each (this tier's replication factor). */
    void createTopics(Admin admin, int partitions, String... topics) throws Exception {
        List<NewTopic> wanted = new ArrayList<>();
        for (String topic : topics) {
            wanted.add(new NewTopic(topic, partitions, replication));
        }
        admin.createTopics(wanted).all().get();
    }

    Properties producerProps() {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.put(ProducerConfig.ACKS_CONFIG, "all");
        props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        props.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        props.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "30000");
        props.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "40000");
        props.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "40000");
        return props;
    }

    KafkaProducer<String, String> producer() {
        return new KafkaProducer<>(producerProps());
    }

    /** A consumer; {@code group} null for one without a group (assign and seek only). */
    Properties consumerProps(String group, String isolation) {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        props.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, "30000");
        props.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "40000");
        if (group != null) {
            props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        }
        return props;
    }

    /**
     * Every record of {@code partitions} from the beginning up to their end offsets (the
     * last stable offsets under read_committed), read by a consumer without a group.
     */
    List<ConsumerRecord<String, String>> readAll(Collection<TopicPartition> partitions,
                                                 String isolation) throws InterruptedException {
        List<ConsumerRecord<String, String>> got = new ArrayList<>();
        try (KafkaConsumer<String, String> consumer =
                 new KafkaConsumer<>(consumerProps(null, isolation))) {
            consumer.assign(partitions);
            consumer.seekToBeginning(partitions);
            Map<TopicPartition, Long> ends = consumer.endOffsets(partitions);
            waitFor("reading " + partitions + " to " + ends, () -> {
                for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(100))) {
                    got.add(record);
                }
                return partitions.stream().allMatch(tp -> consumer.position(tp) >= ends.get(tp));
            });
        }
        return got;
    }
}
