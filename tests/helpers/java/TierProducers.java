import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.Future;
import java.util.stream.Collectors;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;

/** The idempotent and the transactional producer checks of {@link ClientTier}. */
final class TierProducers {
    private TierProducers() {
    }

    /**
     * An idempotent producer (acks=all) sends 100 records to each of 3 partitions; facts:
     * the acknowledged offsets of each partition ("0..99" when contiguous) and what a
     * consumer reads back (count, duplicates, whether each partition is in send order).
     */
    static void idempotent(TierSupport tier) throws Exception {
        String topic = tier.name("idempotent");
        try (Admin admin = tier.admin()) {
            tier.createTopics(admin, 3, topic);
        }
        Map<Integer, List<Long>> offsets = new TreeMap<>();
        try (KafkaProducer<String, String> producer = tier.producer()) {
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            for (int i = 0; i < 300; i++) {
                sent.add(producer.send(new ProducerRecord<>(topic, i % 3, "k" + i, "v" + i)));
            }
            producer.flush();
            for (Future<RecordMetadata> future : sent) {
                RecordMetadata meta = future.get();
                offsets.computeIfAbsent(meta.partition(), p -> new ArrayList<>()).add(meta.offset());
            }
        }
        for (Map.Entry<Integer, List<Long>> entry : offsets.entrySet()) {
            TierSupport.fact("idempotent.acked.p" + entry.getKey(), span(entry.getValue()));
        }
        List<TopicPartition> partitions = List.of(
            new TopicPartition(topic, 0), new TopicPartition(topic, 1), new TopicPartition(topic, 2));
        List<ConsumerRecord<String, String>> read = tier.readAll(partitions, "read_uncommitted");
        TierSupport.fact("idempotent.read", read.size());
        TierSupport.fact("idempotent.distinct", read.stream().map(ConsumerRecord::value).distinct().count());
        boolean inOrder = true;
        Map<Integer, Integer> last = new TreeMap<>();
        for (ConsumerRecord<String, String> record : read) {
            int index = Integer.parseInt(record.value().substring(1));
            inOrder &= index % 3 == record.partition() && index > last.getOrDefault(record.partition(), -1);
            last.put(record.partition(), index);
        }
        TierSupport.fact("idempotent.in_order", inOrder);
    }

    /** "FIRST..LAST" of ascending offsets without gaps, else every offset. */
    private static String span(List<Long> offsets) {
        for (int i = 1; i < offsets.size(); i++) {
            if (offsets.get(i) != offsets.get(i - 1) + 1) {
                return offsets.toString();
            }
        }
        return offsets.get(0) + ".." + offsets.get(offsets.size() - 1);
    }

    /**
     * Consume-transform-produce with a transactional producer: 10 input records read by a
     * consumer of group PREFIX-txn-group (group.protocol PROTOCOL), transformed into the
     * output topic in three transactions, each committing the input offsets with
     * sendOffsetsToTransaction: the first (inputs 0-4) committed, the second (inputs 5-9,
     * values "a-...") aborted, the third (inputs 5-9 again) committed. Facts: the group's
     * committed offset after the abort and at the end, the values read back with
     * read_committed and read_uncommitted, and the output's end offset.
     */
    static void transactions(TierSupport tier, String protocol) throws Exception {
        String input = tier.name("txn-in");
        String output = tier.name("txn-out");
        String group = tier.name("txn-group");
        TopicPartition in = new TopicPartition(input, 0);
        TopicPartition out = new TopicPartition(output, 0);
        try (Admin admin = tier.admin()) {
            tier.createTopics(admin, 1, input, output);
        }
        try (KafkaProducer<String, String> producer = tier.producer()) {
            for (int i = 0; i < 10; i++) {
                producer.send(new ProducerRecord<>(input, 0, null, "in" + i));
            }
            producer.flush();
        }
        Properties consumerProps = tier.consumerProps(group, "read_committed");
        consumerProps.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
        Properties producerProps = tier.producerProps();
        producerProps.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, tier.name("txn-id"));
        producerProps.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, "30000");
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(consumerProps);
             KafkaProducer<String, String> producer = new KafkaProducer<>(producerProps)) {
            consumer.subscribe(List.of(input));
            List<ConsumerRecord<String, String>> inputs = new ArrayList<>();
            TierSupport.waitFor("10 input records in group " + group, () -> {
                consumer.poll(Duration.ofMillis(100)).forEach(inputs::add);
                return inputs.size() >= 10;
            });
            TierSupport.fact("txn.inputs", inputs.size());
            producer.initTransactions();
            transform(producer, consumer, inputs.subList(0, 5), output, "c-", true);
            transform(producer, consumer, inputs.subList(5, 10), output, "a-", false);
            TierSupport.fact("txn.offset_after_abort", committed(consumer, in));
            transform(producer, consumer, inputs.subList(5, 10), output, "c-", true);
            TierSupport.fact("txn.offset_final", committed(consumer, in));
        }
        TierSupport.fact("txn.read_committed", values(tier.readAll(List.of(out), "read_committed")));
        TierSupport.fact("txn.read_uncommitted", values(tier.readAll(List.of(out), "read_uncommitted")));
        try (KafkaConsumer<String, String> consumer =
                 new KafkaConsumer<>(tier.consumerProps(null, "read_committed"))) {
            TierSupport.fact("txn.end_offset", consumer.endOffsets(List.of(out)).get(out));
        }
    }

    private static void transform(KafkaProducer<String, String> producer,
                                  KafkaConsumer<String, String> consumer,
                                  List<ConsumerRecord<String, String>> inputs, String output,
                                  String tag, boolean commit) {
        producer.beginTransaction();
        for (ConsumerRecord<String, String> record : inputs) {
            producer.send(new ProducerRecord<>(output, 0, null, tag + record.value()));
        }
        producer.flush();  // written before the abort: read_uncommitted sees aborted records
        ConsumerRecord<String, String> last = inputs.get(inputs.size() - 1);
        producer.sendOffsetsToTransaction(
            Map.of(new TopicPartition(last.topic(), last.partition()), new OffsetAndMetadata(last.offset() + 1)),
            consumer.groupMetadata());
        if (commit) {
            producer.commitTransaction();
        } else {
            producer.abortTransaction();
        }
    }

    private static long committed(KafkaConsumer<String, String> consumer, TopicPartition tp) {
        OffsetAndMetadata offset = consumer.committed(Set.of(tp)).get(tp);
        return offset == null ? -1 : offset.offset();
    }

    private static String values(List<ConsumerRecord<String, String>> records) {
        return records.stream().map(ConsumerRecord::value).collect(Collectors.joining(","));
    }
}
