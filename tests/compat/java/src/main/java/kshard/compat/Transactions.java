package kshard.compat;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * A consume-transform-produce loop with Kafka's transactional producer
 * (the `txn-etl` subcommand): reads --in through group --group
 * (read_committed), writes "x-" + value to --out, and sends the consumed
 * offsets with each transaction; every --abort-every'th transaction is
 * aborted and its records are consumed again. Then a second producer with
 * the same transactional id fences the first, and the output is read back.
 * Prints one JSON object.
 */
final class Transactions {
    private Transactions() {}

    static void etl(Map<String, String> opts) throws Exception {
        String bootstrap = opts.get("bootstrap");
        String in = opts.get("in");
        String out = opts.get("out");
        String txnId = opts.get("txn-id");
        long count = Long.parseLong(opts.get("count"));
        int abortEvery = Integer.parseInt(opts.getOrDefault("abort-every", "3"));
        int committedTxns = 0;
        int abortedTxns = 0;
        try (KafkaProducer<byte[], byte[]> producer = producer(bootstrap, txnId);
             KafkaConsumer<byte[], byte[]> consumer = consumer(bootstrap, opts.get("group"), "read_committed")) {
            producer.initTransactions();
            consumer.subscribe(List.of(in));
            long done = 0;
            long deadline = System.currentTimeMillis() + 120_000;
            while (done < count) {
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException("timed out with " + done + " of " + count + " committed");
                }
                ConsumerRecords<byte[], byte[]> recs = consumer.poll(Duration.ofMillis(200));
                if (recs.isEmpty()) {
                    continue;
                }
                producer.beginTransaction();
                Map<TopicPartition, OffsetAndMetadata> next = new HashMap<>();
                for (ConsumerRecord<byte[], byte[]> r : recs) {
                    byte[] value = ("x-" + new String(r.value(), StandardCharsets.UTF_8)).getBytes(StandardCharsets.UTF_8);
                    producer.send(new ProducerRecord<>(out, r.key(), value));
                    next.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                }
                producer.sendOffsetsToTransaction(next, consumer.groupMetadata());
                if ((committedTxns + abortedTxns + 1) % abortEvery == 0) {
                    producer.abortTransaction();
                    abortedTxns++;
                    rewind(consumer, next.keySet());
                } else {
                    producer.commitTransaction();
                    committedTxns++;
                    done += recs.count();
                }
            }
            String fenced = fence(bootstrap, txnId, producer, out);
            StringBuilder sb = new StringBuilder();
            sb.append("{\"committed_txns\":").append(committedTxns)
              .append(",\"aborted_txns\":").append(abortedTxns)
              .append(",\"fenced\":").append(Client.Json.str(fenced))
              .append(",\"read_committed\":").append(readAll(bootstrap, out, "read_committed"))
              .append(",\"read_uncommitted\":").append(readAll(bootstrap, out, "read_uncommitted"))
              .append("}");
            System.out.println(sb);
        }
    }

    /** After an abort the consumer goes back to the group's committed offsets. */
    private static void rewind(KafkaConsumer<byte[], byte[]> consumer, Set<TopicPartition> tps) {
        Map<TopicPartition, OffsetAndMetadata> committed = consumer.committed(tps);
        for (TopicPartition tp : tps) {
            OffsetAndMetadata c = committed.get(tp);
            if (c == null) {
                consumer.seekToBeginning(List.of(tp));
            } else {
                consumer.seek(tp, c.offset());
            }
        }
    }

    /** A second producer with the same id fences `first`: returns the error class its commit got. */
    private static String fence(String bootstrap, String txnId, KafkaProducer<byte[], byte[]> first, String out) {
        try (KafkaProducer<byte[], byte[]> second = producer(bootstrap, txnId)) {
            first.beginTransaction();
            first.send(new ProducerRecord<>(out, "zombie".getBytes(StandardCharsets.UTF_8)));
            first.flush();
            second.initTransactions();
            try {
                first.commitTransaction();
                return "none";
            } catch (ProducerFencedException e) {
                return e.getClass().getSimpleName();
            } catch (KafkaException e) {
                Throwable cause = e.getCause() == null ? e : e.getCause();
                return cause.getClass().getSimpleName();
            }
        }
    }

    private static String readAll(String bootstrap, String topic, String isolation) {
        List<String> values = new ArrayList<>();
        try (KafkaConsumer<byte[], byte[]> c = consumer(bootstrap, null, isolation)) {
            List<TopicPartition> tps = new ArrayList<>();
            c.partitionsFor(topic).forEach(p -> tps.add(new TopicPartition(topic, p.partition())));
            c.assign(tps);
            c.seekToBeginning(tps);
            Map<TopicPartition, Long> end = c.endOffsets(tps);
            long deadline = System.currentTimeMillis() + 60_000;
            while (tps.stream().anyMatch(tp -> c.position(tp) < end.get(tp))) {
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException("timed out reading " + topic);
                }
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) {
                    values.add(new String(r.value(), StandardCharsets.UTF_8));
                }
            }
        }
        StringBuilder sb = new StringBuilder("[");
        for (int i = 0; i < values.size(); i++) {
            sb.append(i == 0 ? "" : ",").append(Client.Json.str(values.get(i)));
        }
        return sb.append("]").toString();
    }

    private static KafkaProducer<byte[], byte[]> producer(String bootstrap, String txnId) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        return new KafkaProducer<>(p);
    }

    private static KafkaConsumer<byte[], byte[]> consumer(String bootstrap, String group, String isolation) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        if (group != null) {
            p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        }
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "7");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        return new KafkaConsumer<>(p);
    }
}
