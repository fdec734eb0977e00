import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicReference;
import java.util.stream.Collectors;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.CreateTopicsOptions;
import org.apache.kafka.clients.admin.CreateTopicsResult;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicCollection;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.config.ConfigResource;

/**
 * The AdminClient's topic, config, partition and record calls, in the order a tool uses
 * them, each result a fact: createTopics (and validateOnly, and again), listTopics,
 * describeTopics (by name and by id), createPartitions, listOffsets (earliest, latest,
 * max timestamp, for a timestamp), deleteRecords, describeConfigs and
 * incrementalAlterConfigs, describeCluster, deleteTopics.
 */
final class TierAdmin {
    private TierAdmin() {
    }

    static void admin(TierSupport tier) throws Exception {
        String topic = tier.name("admin");
        try (Admin admin = tier.admin()) {
            Uuid id = create(tier, admin, topic);
            describe(tier, admin, topic, id);
            partitions(admin, topic);
            records(tier, admin, new TopicPartition(topic, 0));
            configs(admin, topic);  // after records: keyless records do not go to a compacted topic
            DescribeClusterResult cluster = admin.describeCluster();
            Collection<Node> nodes = cluster.nodes().get();
            TierSupport.fact("cluster.nodes", nodes.size());
            TierSupport.fact("cluster.controller_known", cluster.controller().get() != null);
            TierSupport.fact("cluster.id_known", cluster.clusterId().get() != null);
            admin.deleteTopics(List.of(topic)).all().get();
            TierSupport.waitFor("deleted topic gone from listTopics", () -> !listed(admin, topic));
            TierSupport.fact("deleted.listed", listed(admin, topic));
            TierSupport.fact("deleted.describe", failure(() ->
                admin.describeTopics(List.of(topic)).allTopicNames().get()));
        }
    }

    private static Uuid create(TierSupport tier, Admin admin, String topic) throws Exception {
        NewTopic wanted = new NewTopic(topic, 3, tier.replication)
            .configs(Map.of("retention.ms", "3600000", "segment.bytes", "1048576"));
        CreateTopicsResult created = admin.createTopics(List.of(wanted));
        created.all().get();
        TierSupport.fact("created.partitions", created.numPartitions(topic).get());
        TierSupport.fact("created.replication", created.replicationFactor(topic).get());
        Config config = created.config(topic).get();
        for (String name : List.of("retention.ms", "segment.bytes", "cleanup.policy")) {
            ConfigEntry entry = config.get(name);
            TierSupport.fact("created.config." + name,
                entry == null ? "absent" : entry.value() + " " + entry.source());
        }
        Uuid id = created.topicId(topic).get();
        TierSupport.fact("created.topic_id_set", id != null && !Uuid.ZERO_UUID.equals(id));

        String probe = tier.name("validate-only");
        CreateTopicsResult validated = admin.createTopics(List.of(new NewTopic(probe, 2, tier.replication)),
            new CreateTopicsOptions().validateOnly(true));
        validated.all().get();
        TierSupport.fact("validate_only.partitions", validated.numPartitions(probe).get());
        TierSupport.fact("validate_only.listed", listed(admin, probe));
        TierSupport.fact("create_again", failure(() -> admin.createTopics(List.of(wanted)).all().get()));
        TierSupport.fact("listed", listed(admin, topic));
        return id;
    }

    private static void describe(TierSupport tier, Admin admin, String topic, Uuid id) throws Exception {
        AtomicReference<TopicDescription> seen = new AtomicReference<>();
        TierSupport.waitFor("every replica of " + topic + " in sync", () -> {
            TopicDescription d = described(admin, topic);
            seen.set(d);
            return d.partitions().stream().allMatch(p -> p.leader() != null && p.isr().size() == tier.replication);
        });
        TopicDescription d = seen.get();
        TierSupport.fact("describe.partitions", d.partitions().size());
        TierSupport.fact("describe.replicas", d.partitions().stream()
            .map(p -> String.valueOf(p.replicas().size())).collect(Collectors.joining(",")));
        TierSupport.fact("describe.leader_is_first_replica", d.partitions().stream()
            .allMatch(p -> p.leader().id() == p.replicas().get(0).id()));
        TierSupport.fact("describe.topic_id_matches", id.equals(d.topicId()));
        TierSupport.fact("describe.internal", d.isInternal());
        TopicDescription byId = admin.describeTopics(TopicCollection.ofTopicIds(List.of(id)))
            .allTopicIds().get().get(id);
        TierSupport.fact("describe.by_id.name", byId.name());
    }

    private static void partitions(Admin admin, String topic) throws Exception {
        admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(5))).all().get();
        TierSupport.waitFor(topic + " with 5 partitions in describeTopics",
            () -> described(admin, topic).partitions().size() == 5);
        TierSupport.fact("partitions.after_increase", described(admin, topic).partitions().size());
        TierSupport.fact("partitions.decrease", failure(() ->
            admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(2))).all().get()));
        TierSupport.fact("partitions.leaders", described(admin, topic).partitions().stream()
            .map(TopicPartitionInfo::leader).allMatch(leader -> leader != null && leader.id() >= 0));
    }

    private static void configs(Admin admin, String topic) throws Exception {
        ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
        Config before = admin.describeConfigs(List.of(resource)).all().get().get(resource);
        TierSupport.fact("config.before.retention.ms", entry(before, "retention.ms"));
        TierSupport.fact("config.before.cleanup.policy", entry(before, "cleanup.policy"));
        admin.incrementalAlterConfigs(Map.of(resource, List.of(
            new AlterConfigOp(new ConfigEntry("retention.ms", "7200000"), AlterConfigOp.OpType.SET),
            new AlterConfigOp(new ConfigEntry("segment.bytes", null), AlterConfigOp.OpType.DELETE),
            new AlterConfigOp(new ConfigEntry("cleanup.policy", "compact"), AlterConfigOp.OpType.APPEND)
        ))).all().get();
        AtomicReference<Config> after = new AtomicReference<>();
        TierSupport.waitFor("the altered configs described", () -> {
            try {
                after.set(admin.describeConfigs(List.of(resource)).all().get().get(resource));
            } catch (Exception e) {
                throw new RuntimeException(e);
            }
            return "7200000".equals(after.get().get("retention.ms").value());
        });
        for (String name : List.of("retention.ms", "segment.bytes", "cleanup.policy")) {
            TierSupport.fact("config.after." + name, entry(after.get(), name));
        }
        TierSupport.fact("config.unknown", failure(() -> admin.incrementalAlterConfigs(Map.of(resource, List.of(
            new AlterConfigOp(new ConfigEntry("no.such.config", "1"), AlterConfigOp.OpType.SET)))).all().get()));
        Node node = admin.describeCluster().nodes().get().iterator().next();
        ConfigResource broker = new ConfigResource(ConfigResource.Type.BROKER, String.valueOf(node.id()));
        Config brokerConfig = admin.describeConfigs(List.of(broker)).all().get().get(broker);
        TierSupport.fact("config.broker.has_entries", !brokerConfig.entries().isEmpty());
    }

    private static void records(TierSupport tier, Admin admin, TopicPartition tp) throws Exception {
        long base = System.currentTimeMillis() - 600_000;
        try (KafkaProducer<String, String> producer = tier.producer()) {
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            for (int i = 0; i < 10; i++) {
                long timestamp = i == 6 ? base + 500_000 : base + i * 1000L;
                sent.add(producer.send(new ProducerRecord<>(tp.topic(), tp.partition(), timestamp, null, "r" + i)));
            }
            producer.flush();
            for (Future<RecordMetadata> future : sent) {
                future.get();
            }
        }
        TierSupport.fact("offsets.earliest", offset(admin, tp, OffsetSpec.earliest()));
        TierSupport.fact("offsets.latest", offset(admin, tp, OffsetSpec.latest()));
        TierSupport.fact("offsets.max_timestamp", offset(admin, tp, OffsetSpec.maxTimestamp()));
        TierSupport.fact("offsets.for_timestamp", offset(admin, tp, OffsetSpec.forTimestamp(base + 3500)));
        long low = admin.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(4)))
            .lowWatermarks().get(tp).get().lowWatermark();
        TierSupport.fact("delete_records.low_watermark", low);
        TierSupport.fact("offsets.earliest_after_delete", offset(admin, tp, OffsetSpec.earliest()));
        try (KafkaConsumer<String, String> consumer =
                 new KafkaConsumer<>(tier.consumerProps(null, "read_uncommitted"))) {
            consumer.assign(List.of(tp));
            consumer.seekToBeginning(List.of(tp));
            TierSupport.fact("delete_records.consumer_starts_at", consumer.position(tp));
        }
    }

    private static long offset(Admin admin, TopicPartition tp, OffsetSpec spec) throws Exception {
        return admin.listOffsets(Map.of(tp, spec)).partitionResult(tp).get().offset();
    }

    private static String entry(Config config, String name) {
        ConfigEntry entry = config.get(name);
        return entry == null ? "absent" : entry.value() + " " + entry.source();
    }

    private static TopicDescription described(Admin admin, String topic) {
        try {
            return admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
        } catch (Exception e) {
            throw new RuntimeException(e);
        }
    }

    private static boolean listed(Admin admin, String topic) {
        try {
            return admin.listTopics().names().get().contains(topic);
        } catch (Exception e) {
            throw new RuntimeException(e);
        }
    }

    /** A call expected to fail: the simple name of the exception it failed with, or "none". */
    interface Call {
        void run() throws Exception;
    }

    static String failure(Call call) {
        try {
            call.run();
            return "none";
        } catch (ExecutionException e) {
            return e.getCause().getClass().getSimpleName();
        } catch (Exception e) {
            return e.getClass().getSimpleName();
        }
    }
}
