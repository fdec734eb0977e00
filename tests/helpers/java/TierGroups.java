import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.stream.Collectors;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.ConsumerGroupListing;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;

/**
 * The consumer group check of {@link ClientTier}: two members of one group (classic or
 * KIP-848 protocol) share a 4-partition topic, consume and commit; then the AdminClient's
 * group calls: describe while both are in it, list, offsets and delete once they left.
 */
final class TierGroups {
    private static final int PARTITIONS = 4;
    private static final int PER_PARTITION = 10;

    private TierGroups() {
    }

    /** One member: polls in its own thread (a consumer is not thread-safe), commits what it read. */
    private static final class Member implements Runnable {
        final KafkaConsumer<String, String> consumer;
        final String name;
        final Map<String, String> readBy;
        final AtomicInteger duplicates;
        final AtomicReference<Set<TopicPartition>> assignment = new AtomicReference<>(Set.of());
        final AtomicReference<Throwable> failure = new AtomicReference<>();
        volatile boolean stop;

        Member(Properties props, String name, Map<String, String> readBy, AtomicInteger duplicates) {
            this.consumer = new KafkaConsumer<>(props);
            this.name = name;
            this.readBy = readBy;
            this.duplicates = duplicates;
        }

        @Override
        public void run() {
            try {
                while (!stop) {
                    boolean any = false;
                    for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(100))) {
                        any = true;
                        if (readBy.putIfAbsent(record.value(), name) != null) {
                            duplicates.incrementAndGet();
                        }
                    }
                    if (any) {
                        consumer.commitSync();
                    }
                    assignment.set(Set.copyOf(consumer.assignment()));
                }
            } catch (Throwable e) {
                failure.set(e);
            } finally {
                consumer.close(Duration.ofSeconds(20));  // leaves the group
            }
        }
    }

    /**
     * Facts: each member's partition count once both are in, how many records were read
     * (and by how many members the second batch was), duplicates, the group as described
     * while both are in it (state, type, members, partitions), as listed after they left,
     * its committed offsets, and whether it is gone after deleteConsumerGroups.
     */
    static void groups(TierSupport tier, String protocol) throws Exception {
        String topic = tier.name("shared");
        String group = tier.name("group-" + protocol);
        try (Admin admin = tier.admin()) {
            tier.createTopics(admin, PARTITIONS, topic);
            produce(tier, topic, "first");
            Properties props = tier.consumerProps(group, "read_uncommitted");
            props.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
            if (protocol.equals("classic")) {
                // a member learns of a rebalance from a heartbeat: 0.5 s, not 3 s, to rejoin
                // (the KIP-848 consumer takes its interval from the broker)
                props.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "500");
            }
            Map<String, String> readBy = new ConcurrentHashMap<>();
            AtomicInteger duplicates = new AtomicInteger();
            List<Member> members = new ArrayList<>();
            List<Thread> threads = new ArrayList<>();
            try {
                for (String name : List.of("a", "b")) {
                    Properties own = new Properties();
                    own.putAll(props);
                    own.put(ConsumerConfig.CLIENT_ID_CONFIG, group + "-" + name);
                    Member member = new Member(own, name, readBy, duplicates);
                    members.add(member);
                    member.consumer.subscribe(List.of(topic));
                    Thread thread = new Thread(member, "member-" + name);
                    threads.add(thread);
                    thread.start();
                }
                TierSupport.waitFor("both members sharing the partitions", () -> shared(members));
                TierSupport.fact("group.assignment_sizes", members.stream()
                    .map(m -> m.assignment.get().size()).sorted().map(String::valueOf)
                    .collect(Collectors.joining(",")));
                produce(tier, topic, "second");
                TierSupport.waitFor("both batches read", () -> failed(members) || readBy.size() >= 2 * PARTITIONS * PER_PARTITION);
                describeActive(admin, group);
            } finally {
                for (Member member : members) {
                    member.stop = true;
                }
                for (Thread thread : threads) {
                    thread.join(30_000);
                }
            }
            for (Member member : members) {
                if (member.failure.get() != null) {
                    throw new AssertionError("member " + member.name + " failed", member.failure.get());
                }
            }
            TierSupport.fact("group.read", readBy.size());
            TierSupport.fact("group.duplicates", duplicates.get());
            TierSupport.fact("group.second_batch_members", readBy.entrySet().stream()
                .filter(e -> e.getKey().startsWith("second")).map(Map.Entry::getValue)
                .distinct().count());
            afterLeaving(admin, group);
        }
    }

    private static void produce(TierSupport tier, String topic, String batch) throws Exception {
        try (KafkaProducer<String, String> producer = tier.producer()) {
            for (int p = 0; p < PARTITIONS; p++) {
                for (int i = 0; i < PER_PARTITION; i++) {
                    producer.send(new ProducerRecord<>(topic, p, null, batch + "-" + p + "-" + i));
                }
            }
            producer.flush();
        }
    }

    private static boolean failed(List<Member> members) {
        return members.stream().anyMatch(m -> m.failure.get() != null);
    }

    /** Both members hold partitions, none of them twice, all of them between the two. */
    private static boolean shared(List<Member> members) {
        if (failed(members)) {
            return true;
        }
        Set<TopicPartition> union = new HashSet<>();
        int total = 0;
        for (Member member : members) {
            Set<TopicPartition> own = member.assignment.get();
            if (own.isEmpty()) {
                return false;
            }
            union.addAll(own);
            total += own.size();
        }
        return union.size() == PARTITIONS && total == PARTITIONS;
    }

    private static void describeActive(Admin admin, String group) throws Exception {
        AtomicReference<ConsumerGroupDescription> seen = new AtomicReference<>();
        TierSupport.waitFor("group " + group + " described stable with 2 members", () -> {
            try {
                ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group))
                    .describedGroups().get(group).get();
                seen.set(d);
                return d.members().size() == 2 && "STABLE".equals(d.state().name())
                    && d.members().stream().allMatch(m -> !m.assignment().topicPartitions().isEmpty());
            } catch (Exception e) {
                throw new RuntimeException(e);
            }
        });
        ConsumerGroupDescription d = seen.get();
        TierSupport.fact("group.described.state", d.state());
        TierSupport.fact("group.described.type", d.type());
        TierSupport.fact("group.described.members", d.members().size());
        TierSupport.fact("group.described.partitions", d.members().stream()
            .mapToInt(m -> m.assignment().topicPartitions().size()).sum());
        TierSupport.fact("group.described.client_ids", d.members().stream()
            .map(MemberDescription::clientId).sorted().collect(Collectors.joining(",")));
        TierSupport.fact("group.described.coordinator_known", d.coordinator() != null && d.coordinator().id() >= 0);
    }

    private static void afterLeaving(Admin admin, String group) throws Exception {
        AtomicReference<ConsumerGroupListing> listed = new AtomicReference<>();
        TierSupport.waitFor("group " + group + " listed empty", () -> {
            try {
                Collection<ConsumerGroupListing> all = admin.listConsumerGroups().all().get();
                listed.set(all.stream().filter(g -> g.groupId().equals(group)).findFirst().orElse(null));
                return listed.get() != null && listed.get().state().map(s -> s.name().equals("EMPTY")).orElse(false);
            } catch (Exception e) {
                throw new RuntimeException(e);
            }
        });
        TierSupport.fact("group.listed.state", listed.get().state().map(Object::toString).orElse("?"));
        TierSupport.fact("group.listed.type", listed.get().type().map(Object::toString).orElse("?"));
        Map<TopicPartition, OffsetAndMetadata> offsets =
            admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
        Map<Integer, Long> byPartition = new TreeMap<>();
        offsets.forEach((tp, om) -> byPartition.put(tp.partition(), om.offset()));
        TierSupport.fact("group.offsets", byPartition);
        admin.deleteConsumerGroups(List.of(group)).all().get();
        boolean stillListed = admin.listConsumerGroups().all().get().stream()
            .anyMatch(g -> g.groupId().equals(group));
        TierSupport.fact("group.listed_after_delete", stillListed);
        TierSupport.fact("group.offsets_after_delete",
            admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get().size());
    }
}
