package kshard.omb;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.Random;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The workload's producers (one KafkaProducer each, as OMB's Kafka driver makes them), driven
 * by as many sender threads as the machine has processors; each thread sends through its
 * producers in turn, every send paced by the one shared {@link UniformRateLimiter} (OMB's
 * LocalWorker does the same).
 */
final class ProducerLoad implements AutoCloseable {
    private final Workload workload;
    private final Stats stats;
    private final List<KafkaProducer<String, byte[]>> producers = new ArrayList<>();
    private final List<Thread> threads = new ArrayList<>();
    private final byte[] payloadTemplate;
    private volatile boolean stopping;

    ProducerLoad(Workload workload, Stats stats) {
        this.workload = workload;
        this.stats = stats;
        this.payloadTemplate = new byte[workload.messageSizeBytes()];
        new Random().nextBytes(payloadTemplate);
        for (int i = 0; i < workload.producers(); i++) {
            producers.add(new KafkaProducer<>(config(workload)));
        }
    }

    /** OMB's driver-kafka/kafka-latency.yaml producerConfig, with its serializers. */
    static Properties config(Workload w) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, w.bootstrapServer());
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "1");
        p.put(ProducerConfig.BATCH_SIZE_CONFIG, "131072");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        return p;
    }

    void start(long startNs) {
        UniformRateLimiter limiter = new UniformRateLimiter(workload.producerRatePerS(), startNs);
        int senders = Math.min(Runtime.getRuntime().availableProcessors(), producers.size());
        for (int t = 0; t < senders; t++) {
            List<KafkaProducer<String, byte[]>> mine = new ArrayList<>();
            for (int i = t; i < producers.size(); i += senders) {
                mine.add(producers.get(i));
            }
            Thread thread = new Thread(() -> sendLoop(mine, limiter), "omb-sender-" + t);
            thread.setDaemon(true);
            threads.add(thread);
            thread.start();
        }
    }

    private void sendLoop(List<KafkaProducer<String, byte[]>> mine, UniformRateLimiter limiter) {
        while (!stopping) {
            for (KafkaProducer<String, byte[]> producer : mine) {
                long intendedNs = limiter.acquire();
                UniformRateLimiter.sleepUntil(intendedNs);
                if (stopping) {
                    return;
                }
                send(producer, intendedNs);
            }
        }
    }

    private void send(KafkaProducer<String, byte[]> producer, long intendedNs) {
        byte[] payload = payloadTemplate.clone();
        long sendNs = System.nanoTime();
        // The consumer reads both back: end-to-end latency from the send time, as OMB's
        // (which uses the record's CreateTime, set in send()), and from the intended time.
        ByteBuffer.wrap(payload).putLong(0, sendNs).putLong(8, intendedNs);
        int bytes = payload.length;
        try {
            producer.send(new ProducerRecord<>(workload.topic(), workload.keyDistributor().next(), payload),
                    (metadata, e) -> {
                        if (e != null) {
                            stats.recordSendError();
                        } else {
                            stats.recordSent(bytes, intendedNs, sendNs, System.nanoTime());
                        }
                    });
        } catch (RuntimeException e) {
            stats.recordSendError();
        }
    }

    /** Stops sending; records in flight still complete (close waits for them). */
    void stop() throws InterruptedException {
        stopping = true;
        for (Thread t : threads) {
            t.join();
        }
        for (KafkaProducer<String, byte[]> p : producers) {
            p.flush();
        }
    }

    @Override
    public void close() throws InterruptedException {
        stop();
        for (KafkaProducer<String, byte[]> p : producers) {
            p.close();
        }
    }
}
