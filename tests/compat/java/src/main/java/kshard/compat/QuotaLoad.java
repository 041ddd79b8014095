package kshard.compat;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Load generator for the client quota tests (tests/compat/test_client_quotas.py
 * and tests/cluster/test_client_quotas_cluster.py). One KafkaProducer or
 * KafkaConsumer per load, each in its own thread, all starting at the same
 * instant t0:
 *
 *   QuotaLoad produce --bootstrap B --seconds S --loads cid:topic:partition[:maxBytes[:delayMs]][,...]
 *             [--record-size 1024] [--acks 1] [--bucket-ms 100] [--buffer-memory 1048576]
 *   QuotaLoad consume --bootstrap B --seconds S --loads cid:topic:partition[:maxBytes[:delayMs]][,...]
 *             [--bucket-ms 100]
 *
 * A producer sends records of --record-size bytes (value only) as fast as
 * send() accepts them until S seconds after t0 (or, with maxBytes, until
 * that many bytes are acknowledged), then closes at once: batches still
 * buffered or in flight are abandoned ("aborted", not errors). A consumer
 * reads its partition from the beginning until S seconds after t0 (or
 * maxBytes were returned). A load with delayMs starts that long after t0
 * (its client is connected before t0 all the same). Each load prints one
 * JSON line on stdout, in the order of --loads:
 *
 *   {"client_id", "mode", "topic", "partition", "bucket_ms", "buckets": [payload bytes acknowledged
 *    (produce) or returned by poll (consume) in each bucket after t0],
 *    "records", "bytes", "errors" (failed sends before the stop), "aborted",
 *    "first_error", "end_ms" (when the load stopped, after t0),
 *    "metrics": {client metric name: value}}
 */
public final class QuotaLoad {
    static final String[] PRODUCER_METRICS = {
        "produce-throttle-time-avg", "produce-throttle-time-max", "outgoing-byte-rate", "record-send-rate",
        "request-latency-avg", "request-latency-max"};
    static final String[] CONSUMER_METRICS = {
        "fetch-throttle-time-avg", "fetch-throttle-time-max", "bytes-consumed-rate", "records-consumed-rate",
        "fetch-latency-avg", "fetch-latency-max"};

    public static void main(String[] argv) throws Exception {
        if (argv.length < 1) {
            throw new IllegalArgumentException("usage: QuotaLoad produce|consume --bootstrap B --seconds S --loads ...");
        }
        String mode = argv[0];
        Map<String, String> opts = new HashMap<>();
        for (int i = 1; i + 1 < argv.length; i += 2) {
            if (!argv[i].startsWith("--")) {
                throw new IllegalArgumentException("expected --key value, got " + argv[i]);
            }
            opts.put(argv[i].substring(2), argv[i + 1]);
        }
        String bootstrap = need(opts, "bootstrap");
        double seconds = Double.parseDouble(need(opts, "seconds"));
        int bucketMs = Integer.parseInt(opts.getOrDefault("bucket-ms", "100"));
        List<String[]> loads = new ArrayList<>();
        for (String l : need(opts, "loads").split(",")) {
            String[] parts = l.split(":");
            if (parts.length < 3 || parts.length > 5) {
                throw new IllegalArgumentException("a load is client-id:topic:partition[:maxBytes[:delayMs]], got " + l);
            }
            loads.add(parts);
        }
        if (!mode.equals("produce") && !mode.equals("consume")) {
            throw new IllegalArgumentException("unknown mode " + mode);
        }

        CyclicBarrier ready = new CyclicBarrier(loads.size());
        AtomicLong t0 = new AtomicLong(0);
        List<Thread> threads = new ArrayList<>();
        List<Runner> runners = new ArrayList<>();
        for (String[] l : loads) {
            long maxBytes = l.length >= 4 && Long.parseLong(l[3]) > 0 ? Long.parseLong(l[3]) : Long.MAX_VALUE;
            long delayMs = l.length == 5 ? Long.parseLong(l[4]) : 0;
            Runner r = new Runner(mode, bootstrap, l[0], l[1], Integer.parseInt(l[2]), maxBytes, delayMs, seconds,
                    bucketMs, opts, ready, t0);
            runners.add(r);
            Thread t = new Thread(r, "load-" + l[0]);
            threads.add(t);
            t.start();
        }
        for (Thread t : threads) {
            t.join();
        }
        for (Runner r : runners) {
            if (r.failure.get() != null) {
                throw new RuntimeException("load " + r.clientId + " failed", r.failure.get());
            }
            System.out.println(r.json());
        }
        System.out.flush();
    }

    static final class Runner implements Runnable {
        final String mode, bootstrap, clientId, topic;
        final int partition, bucketMs, buckets;
        final long maxBytes, delayMs;
        final double seconds;
        final Map<String, String> opts;
        final CyclicBarrier ready;
        final AtomicLong t0;
        final AtomicLongArray bytes;
        final AtomicLong records = new AtomicLong(), total = new AtomicLong(), errors = new AtomicLong(),
                aborted = new AtomicLong();
        volatile boolean closing;
        final AtomicReference<String> firstError = new AtomicReference<>();
        final AtomicReference<Throwable> failure = new AtomicReference<>();
        final Map<String, Double> metrics = new HashMap<>();
        volatile long endMs;

        Runner(String mode, String bootstrap, String clientId, String topic, int partition, long maxBytes,
               long delayMs, double seconds, int bucketMs, Map<String, String> opts, CyclicBarrier ready,
               AtomicLong t0) {
            this.maxBytes = maxBytes;
            this.delayMs = delayMs;
            this.mode = mode;
            this.bootstrap = bootstrap;
            this.clientId = clientId;
            this.topic = topic;
            this.partition = partition;
            this.seconds = seconds;
            this.bucketMs = bucketMs;
            this.opts = opts;
            this.ready = ready;
            this.t0 = t0;
            this.buckets = (int) ((seconds * 1000 + 10_000) / bucketMs) + 1;
            this.bytes = new AtomicLongArray(buckets);
        }

        long nowMs() {
            return (System.nanoTime() - t0.get()) / 1_000_000;
        }

        void add(long n) {
            if (closing) {
                return;
            }
            int b = (int) Math.min(buckets - 1, Math.max(0, nowMs() / bucketMs));
            bytes.addAndGet(b, n);
            total.addAndGet(n);
            records.incrementAndGet();
        }

        void start() throws Exception {
            ready.await();
            synchronized (t0) {
                if (t0.get() == 0) {
                    t0.set(System.nanoTime());
                }
            }
            if (delayMs > 0) {
                Thread.sleep(delayMs);
            }
        }

        @Override
        public void run() {
            try {
                if (mode.equals("produce")) {
                    produce();
                } else {
                    consume();
                }
            } catch (Throwable t) {
                failure.set(t);
                try {
                    ready.reset();
                } catch (Throwable ignored) {
                    // nothing else waits
                }
            }
        }

        void produce() throws Exception {
            int size = Integer.parseInt(opts.getOrDefault("record-size", "1024"));
            Properties p = new Properties();
            p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            p.put(ProducerConfig.CLIENT_ID_CONFIG, clientId);
            p.put(ProducerConfig.ACKS_CONFIG, opts.getOrDefault("acks", "1"));
            p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "false");
            p.put(ProducerConfig.LINGER_MS_CONFIG, opts.getOrDefault("linger-ms", "0"));
            p.put(ProducerConfig.BUFFER_MEMORY_CONFIG, opts.getOrDefault("buffer-memory", "1048576"));
            p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "120000");
            p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "120000");
            p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "60000");
            p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
            p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
            byte[] value = new byte[size];
            for (int i = 0; i < size; i++) {
                value[i] = (byte) ('a' + i % 26);
            }
            KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p);
            try {
                producer.partitionsFor(topic); // metadata before t0
                start();
                long stopAt = (long) (seconds * 1000);
                while (nowMs() < stopAt && total.get() < maxBytes) {
                    producer.send(new ProducerRecord<>(topic, partition, null, value), (md, e) -> {
                        if (e == null) {
                            add(size);
                        } else if (closing) {
                            aborted.incrementAndGet();
                        } else {
                            errors.incrementAndGet();
                            firstError.compareAndSet(null, e.getClass().getSimpleName() + ": " + e.getMessage());
                        }
                    });
                }
                endMs = nowMs();
                collect(producer.metrics(), "producer-metrics", PRODUCER_METRICS);
            } finally {
                closing = true;
                producer.close(Duration.ZERO);
            }
        }

        void consume() throws Exception {
            Properties p = new Properties();
            p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            p.put(ConsumerConfig.CLIENT_ID_CONFIG, clientId);
            p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
            p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
            p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
            try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p)) {
                TopicPartition tp = new TopicPartition(topic, partition);
                consumer.assign(Collections.singletonList(tp));
                consumer.seekToBeginning(Collections.singletonList(tp));
                consumer.position(tp); // the offset lookup before t0
                start();
                long stopAt = (long) (seconds * 1000);
                while (nowMs() < stopAt && total.get() < maxBytes) {
                    ConsumerRecords<byte[], byte[]> batch = consumer.poll(Duration.ofMillis(100));
                    for (ConsumerRecord<byte[], byte[]> r : batch) {
                        add(Math.max(0, r.serializedKeySize()) + Math.max(0, r.serializedValueSize()));
                    }
                }
                endMs = nowMs();
                collect(consumer.metrics(), "consumer-fetch-manager-metrics", CONSUMER_METRICS);
            }
        }

        void collect(Map<MetricName, ? extends Metric> all, String group, String[] names) {
            for (Map.Entry<MetricName, ? extends Metric> e : all.entrySet()) {
                MetricName n = e.getKey();
                if (!n.group().equals(group) || n.tags().containsKey("topic") || n.tags().containsKey("partition")) {
                    continue;
                }
                for (String want : names) {
                    if (n.name().equals(want)) {
                        Object v = e.getValue().metricValue();
                        if (v instanceof Number) {
                            double d = ((Number) v).doubleValue();
                            metrics.put(want, Double.isNaN(d) || Double.isInfinite(d) ? null : d);
                        }
                    }
                }
            }
        }

        String json() {
            int last = 0;
            for (int i = 0; i < buckets; i++) {
                if (bytes.get(i) != 0) {
                    last = i + 1;
                }
            }
            StringBuilder sb = new StringBuilder();
            sb.append("{\"client_id\":").append(str(clientId));
            sb.append(",\"mode\":").append(str(mode));
            sb.append(",\"topic\":").append(str(topic));
            sb.append(",\"partition\":").append(partition);
            sb.append(",\"bucket_ms\":").append(bucketMs);
            sb.append(",\"buckets\":[");
            for (int i = 0; i < last; i++) {
                if (i > 0) {
                    sb.append(',');
                }
                sb.append(bytes.get(i));
            }
            sb.append("],\"records\":").append(records.get());
            sb.append(",\"bytes\":").append(total.get());
            sb.append(",\"errors\":").append(errors.get());
            sb.append(",\"aborted\":").append(aborted.get());
            sb.append(",\"first_error\":").append(str(firstError.get()));
            sb.append(",\"end_ms\":").append(endMs);
            sb.append(",\"metrics\":{");
            boolean first = true;
            for (Map.Entry<String, Double> e : metrics.entrySet()) {
                if (!first) {
                    sb.append(',');
                }
                first = false;
                sb.append(str(e.getKey())).append(':').append(e.getValue() == null ? "null" : e.getValue().toString());
            }
            sb.append("}}");
            return sb.toString();
        }
    }

    static String str(String s) {
        if (s == null) {
            return "null";
        }
        StringBuilder sb = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') {
                sb.append('\\').append(c);
            } else if (c < 0x20) {
                sb.append(String.format("\\u%04x", (int) c));
            } else {
                sb.append(c);
            }
        }
        return sb.append('"').toString();
    }

    static String need(Map<String, String> opts, String key) {
        String v = opts.get(key);
        if (v == null) {
            throw new IllegalArgumentException("--" + key + " is required");
        }
        return v;
    }
}
