import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The Java producer's view of a batch refused with record errors (KIP-467), as
 * tests/integration/test_server_validation.py runs it: sends KEYS (comma separated, "-" for no key) to
 * partition 0 of TOPIC in one batch and prints, for each record in order, one line:
 * "record I ok OFFSET" or "record I EXCEPTION_CLASS MESSAGE".
 *
 * Usage: java ProduceRecordErrorsCheck BOOTSTRAP TOPIC KEYS
 */
public final class ProduceRecordErrorsCheck {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.put(ProducerConfig.LINGER_MS_CONFIG, "60000");  // one batch: flush() sends it
        props.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "120000");
        props.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "30000");
        String topic = args[1];
        String[] keys = args[2].split(",");
        List<Future<RecordMetadata>> sent = new ArrayList<>();
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
            for (int i = 0; i < keys.length; i++) {
                String key = keys[i].equals("-") ? null : keys[i];
                sent.add(producer.send(new ProducerRecord<>(topic, 0, key, "value-" + i)));
            }
            producer.flush();
            for (int i = 0; i < sent.size(); i++) {
                try {
                    System.out.println("record " + i + " ok " + sent.get(i).get().offset());
                } catch (ExecutionException e) {
                    Throwable cause = e.getCause();
                    System.out.println("record " + i + " " + cause.getClass().getName() + " " + cause.getMessage());
                }
            }
        }
    }
}
