package kshard.omb;

import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * One subscription: the workload's consumers in one group, each polling on its own thread,
 * 100 ms polls and an asynchronous commit of what each poll returned (OMB's
 * KafkaBenchmarkConsumer).
 */
final class ConsumerLoad implements AutoCloseable {
    private static final Duration POLL_TIMEOUT = Duration.ofMillis(100);

    private final Workload workload;
    private final Stats stats;
    private final String group;
    private final AtomicInteger assignedPartitions = new AtomicInteger();
    private final List<Thread> threads = new ArrayList<>();
    private volatile boolean closing;

    ConsumerLoad(Workload workload, Stats stats) {
        this.workload = workload;
        this.stats = stats;
        this.group = "sub-000-" + workload.topic();
    }

    /** OMB's driver-kafka/kafka-latency.yaml consumerConfig, with its deserializers. */
    private Properties config() {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, workload.bootstrapServer());
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.MAX_PARTITION_FETCH_BYTES_CONFIG, "10485760");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        return p;
    }

    void start() {
        for (int i = 0; i < workload.consumers(); i++) {
            KafkaConsumer<String, byte[]> consumer = new KafkaConsumer<>(config());
            Thread t = new Thread(() -> pollLoop(consumer), "omb-consumer-" + i);
            t.setDaemon(true);
            threads.add(t);
            t.start();
        }
    }

    /** Waits until the group's members together own every partition. */
    void awaitAssignment(long timeoutMs) throws InterruptedException {
        long deadline = System.currentTimeMillis() + timeoutMs;
        while (assignedPartitions.get() != workload.partitions()) {
            if (System.currentTimeMillis() > deadline) {
                throw new IllegalStateException("consumer group " + group + " owns " + assignedPartitions.get()
                        + " of " + workload.partitions() + " partitions after " + timeoutMs + " ms");
            }
            Thread.sleep(50);
        }
    }

    private void pollLoop(KafkaConsumer<String, byte[]> consumer) {
        consumer.subscribe(List.of(workload.topic()), new ConsumerRebalanceListener() {
            @Override
            public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                assignedPartitions.addAndGet(-partitions.size());
            }

            @Override
            public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                assignedPartitions.addAndGet(partitions.size());
            }
        });
        try (consumer) {
            while (!closing) {
                try {
                    pollOnce(consumer);
                } catch (RuntimeException e) {
                    // As OMB's consumer: say so and keep polling.
                    System.err.println("omb: consumer error: " + e);
                }
            }
        }
    }

    private void pollOnce(KafkaConsumer<String, byte[]> consumer) {
        ConsumerRecords<String, byte[]> records = consumer.poll(POLL_TIMEOUT);
        Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
        for (ConsumerRecord<String, byte[]> r : records) {
            ByteBuffer b = ByteBuffer.wrap(r.value());
            stats.recordReceived(r.value().length, b.getLong(0), b.getLong(8), System.nanoTime());
            offsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
        }
        if (!offsets.isEmpty()) {
            consumer.commitAsync(offsets, null);
        }
    }

    @Override
    public void close() throws InterruptedException {
        closing = true;
        for (Thread t : threads) {
            t.join();
        }
    }
}
