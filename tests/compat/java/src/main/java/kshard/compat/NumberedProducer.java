package kshard.compat;

import java.io.BufferedOutputStream;
import java.io.FileOutputStream;
import java.io.FileDescriptor;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.Semaphore;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * An idempotent acks=all producer for the cluster durability tests. It
 * writes values "&lt;tag&gt;-&lt;seq&gt;" with seq = 0, 1, 2, ... to partition
 * seq % partitions, at most --rate records per second, until its stdin
 * closes (or --count records were sent). Every delivery callback prints one
 * line on stdout:
 *
 *   a &lt;partition&gt; &lt;offset&gt; &lt;seq&gt;        acknowledged
 *   e &lt;seq&gt; &lt;exception class&gt; &lt;message&gt;  failed
 *
 * and the last line is "done &lt;sent&gt; &lt;acked&gt; &lt;failed&gt;". A checker then
 * proves every acknowledged record is in the log exactly once at its offset.
 */
public final class NumberedProducer {
    public static void main(String[] argv) throws Exception {
        Map<String, String> opts = new HashMap<>();
        for (int i = 0; i + 1 < argv.length; i += 2) {
            if (!argv[i].startsWith("--")) {
                throw new IllegalArgumentException("expected --key value, got " + argv[i]);
            }
            opts.put(argv[i].substring(2), argv[i + 1]);
        }
        String bootstrap = need(opts, "bootstrap");
        String topic = need(opts, "topic");
        String tag = opts.getOrDefault("tag", "java");
        int partitions = Integer.parseInt(need(opts, "partitions"));
        double rate = Double.parseDouble(opts.getOrDefault("rate", "200"));
        long count = Long.parseLong(opts.getOrDefault("count", "-1"));
        int maxOutstanding = Integer.parseInt(opts.getOrDefault("max-outstanding", "2000"));

        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        p.put(ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION, "5");
        p.put(ProducerConfig.LINGER_MS_CONFIG, opts.getOrDefault("linger-ms", "5"));
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, opts.getOrDefault("delivery-timeout-ms", "60000"));
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, opts.getOrDefault("request-timeout-ms", "10000"));
        // Failover is driven by metadata refreshes; keep backoff short so the
        // producer finds new leaders quickly.
        p.put(ProducerConfig.RETRY_BACKOFF_MS_CONFIG, "100");
        p.put(ProducerConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, "1000");
        p.put(ProducerConfig.METADATA_MAX_AGE_CONFIG, "5000");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());

        PrintStream out = new PrintStream(new BufferedOutputStream(new FileOutputStream(FileDescriptor.out), 1 << 16),
                false, StandardCharsets.UTF_8);
        AtomicBoolean stop = new AtomicBoolean(false);
        Thread stdinWatch = new Thread(() -> {
            try {
                while (System.in.read() >= 0) {
                    // any input is ignored; end of input means stop
                }
            } catch (IOException e) {
                // a broken stdin means the driver is gone
            }
            stop.set(true);
        }, "stdin-watch");
        stdinWatch.setDaemon(true);
        stdinWatch.start();

        AtomicLong acked = new AtomicLong();
        AtomicLong failed = new AtomicLong();
        Semaphore outstanding = new Semaphore(maxOutstanding);
        long sent = 0;
        long startNs = System.nanoTime();
        long lastFlushNs = startNs;
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            while (!stop.get() && (count < 0 || sent < count)) {
                // The driver watches acknowledgements live: flush twice a second.
                if (System.nanoTime() - lastFlushNs > 500_000_000L) {
                    lastFlushNs = System.nanoTime();
                    synchronized (out) {
                        out.flush();
                    }
                }
                // Pace to `rate` records per second from the start.
                long dueNs = startNs + (long) (sent * 1e9 / rate);
                long waitNs = dueNs - System.nanoTime();
                if (waitNs > 0) {
                    Thread.sleep(waitNs / 1_000_000, (int) (waitNs % 1_000_000));
                    continue;
                }
                if (!outstanding.tryAcquire(100, java.util.concurrent.TimeUnit.MILLISECONDS)) {
                    continue;
                }
                final long seq = sent;
                ProducerRecord<byte[], byte[]> rec = new ProducerRecord<>(topic, (int) (seq % partitions), null,
                        (tag + "-" + seq).getBytes(StandardCharsets.UTF_8));
                try {
                    producer.send(rec, (md, err) -> {
                        synchronized (out) {
                            if (err == null) {
                                acked.incrementAndGet();
                                out.println("a " + md.partition() + " " + md.offset() + " " + seq);
                            } else {
                                failed.incrementAndGet();
                                String msg = String.valueOf(err.getMessage()).replace('\n', ' ');
                                out.println("e " + seq + " " + err.getClass().getName() + " " + msg);
                            }
                        }
                        outstanding.release();
                    });
                } catch (RuntimeException e) {
                    // send() itself throws only on a fatal producer state; report and stop.
                    synchronized (out) {
                        out.println("e " + seq + " " + e.getClass().getName() + " " + e.getMessage());
                        out.println("fatal " + e.getClass().getName());
                    }
                    outstanding.release();
                    sent++;
                    break;
                }
                sent++;
            }
            producer.flush();
        }
        synchronized (out) {
            out.println("done " + sent + " " + acked.get() + " " + failed.get());
            out.flush();
        }
    }

    private static String need(Map<String, String> opts, String key) {
        String v = opts.get(key);
        if (v == null) {
            throw new IllegalArgumentException("missing --" + key);
        }
        return v;
    }
}
