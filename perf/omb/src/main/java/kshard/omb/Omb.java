package kshard.omb;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.common.errors.TopicExistsException;

/**
 * An OpenMessaging-Benchmark-style run of one workload against one broker, producers and
 * consumers in this JVM: create the topic, join the consumers, publish at a fixed rate, drop
 * the warm-up, then report OMB's figures over the measured window as JSON. Lines
 * OMB-MEASURE-START and OMB-MEASURE-END on stdout mark the window, so a caller can sample the
 * broker (CPU) over exactly that stretch.
 */
public final class Omb {
    private static final long SECOND_NS = 1_000_000_000L;
    private static final int PROGRESS_EVERY_S = 10;
    private static final long READY_TIMEOUT_MS = 120_000;
    private static final long DRAIN_TIMEOUT_MS = 30_000;

    private Omb() {}

    public static void main(String[] args) throws Exception {
        Workload w = Workload.parse(args);
        Properties adminConfig = new Properties();
        adminConfig.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, w.bootstrapServer());
        try (Admin admin = Admin.create(adminConfig)) {
            createTopic(admin, w);
            String json = Json.write(run(w));
            if (w.out() != null) {
                Files.writeString(Path.of(w.out()), json);
            } else {
                System.out.print(json);
            }
            System.out.flush();
            // The next workload should not share the disk with this one's data.
            try {
                admin.deleteTopics(List.of(w.topic())).all().get(60, TimeUnit.SECONDS);
            } catch (ExecutionException | java.util.concurrent.TimeoutException e) {
                System.err.println("omb: could not delete " + w.topic() + ": " + e);
            }
        }
        // Client threads (producers' senders, the admin's) are not ours to wait for.
        System.exit(0);
    }

    /** Replication factor 1: one broker. Retries while the broker is still starting. */
    private static void createTopic(Admin admin, Workload w) throws InterruptedException {
        long deadline = System.currentTimeMillis() + READY_TIMEOUT_MS;
        NewTopic topic = new NewTopic(w.topic(), w.partitions(), (short) 1);
        while (true) {
            try {
                admin.createTopics(List.of(topic)).all().get(30, TimeUnit.SECONDS);
                return;
            } catch (ExecutionException e) {
                if (e.getCause() instanceof TopicExistsException) {
                    return;
                }
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException("cannot create " + w.topic(), e.getCause());
                }
            } catch (java.util.concurrent.TimeoutException e) {
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException("cannot create " + w.topic(), e);
                }
            }
            Thread.sleep(500);
        }
    }

    private static Map<String, Object> run(Workload w) throws InterruptedException {
        Stats stats = new Stats();
        try (ConsumerLoad consumers = new ConsumerLoad(w, stats); ProducerLoad producers = new ProducerLoad(w, stats)) {
            consumers.start();
            consumers.awaitAssignment(READY_TIMEOUT_MS);
            Window window = measure(w, stats, producers);
            long backlogAtEnd = stats.backlog();
            producers.stop();
            long drainStartMs = System.currentTimeMillis();
            while (stats.backlog() > 0 && System.currentTimeMillis() - drainStartMs < DRAIN_TIMEOUT_MS) {
                Thread.sleep(50);
            }
            Map<String, Object> out = summary(w, window);
            out.put("backlog_at_end_msgs", backlogAtEnd);
            out.put("backlog_after_drain_msgs", stats.backlog());
            out.put("drain_s", (System.currentTimeMillis() - drainStartMs) / 1000.0);
            return out;
        }
    }

    /** The measured stretch: everything drained after the warm-up, and its length. */
    private record Window(Stats.Period period, long nanos) {}

    private static Window measure(Workload w, Stats stats, ProducerLoad producers) {
        long startNs = System.nanoTime();
        long warmupEndNs = startNs + w.warmupS() * SECOND_NS;
        long endNs = warmupEndNs + w.durationS() * SECOND_NS;
        Stats.Period window = new Stats.Period();
        Stats.Period progress = new Stats.Period();
        long progressStartNs = startNs;
        long windowStartNs = startNs;
        producers.start(startNs);
        if (w.warmupS() == 0) {
            System.out.println("OMB-MEASURE-START");
            System.out.flush();
        }
        for (long tick = startNs + SECOND_NS; ; tick += SECOND_NS) {
            UniformRateLimiter.sleepUntil(tick);
            Stats.Period p = stats.drain();
            long nowNs = System.nanoTime();
            if (tick > warmupEndNs) {
                window.add(p);
            }
            progress.add(p);
            long elapsedS = (tick - startNs) / SECOND_NS;
            if (tick == warmupEndNs) {
                windowStartNs = nowNs;
                System.out.println("OMB-MEASURE-START");
                System.out.flush();
            }
            if (elapsedS % PROGRESS_EVERY_S == 0 || tick >= endNs) {
                printProgress(elapsedS, tick <= warmupEndNs, progress, (tick - progressStartNs) / 1e9,
                        stats.backlog());
                progress = new Stats.Period();
                progressStartNs = tick;
            }
            if (tick >= endNs) {
                System.out.println("OMB-MEASURE-END");
                System.out.flush();
                return new Window(window, nowNs - windowStartNs);
            }
        }
    }

    private static void printProgress(long elapsedS, boolean warmup, Stats.Period p, double s, long backlog) {
        System.err.printf("omb %4ds %-7s pub %8.0f msg/s %6.1f MiB/s | cons %8.0f msg/s | backlog %7d"
                        + " | pub ms p50 %.1f p99 %.1f max %.1f | delay ms p99 %.2f max %.1f"
                        + " | e2e ms p50 %.1f p99 %.1f max %.1f | errors %d%n",
                elapsedS, warmup ? "warm-up" : "measure", p.sent / s, p.sentBytes / s / (1 << 20),
                p.received / s, backlog,
                ms(p.publishLatencyUs.getValueAtPercentile(50)), ms(p.publishLatencyUs.getValueAtPercentile(99)),
                ms(p.publishLatencyUs.getMaxValue()), ms(p.publishDelayUs.getValueAtPercentile(99)),
                ms(p.publishDelayUs.getMaxValue()), ms(p.e2eLatencyUs.getValueAtPercentile(50)),
                ms(p.e2eLatencyUs.getValueAtPercentile(99)), ms(p.e2eLatencyUs.getMaxValue()), p.sendErrors);
    }

    private static double ms(long us) {
        return us / 1000.0;
    }

    private static Map<String, Object> summary(Workload w, Window window) {
        Stats.Period p = window.period();
        double s = window.nanos() / (double) SECOND_NS;
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("workload", w.name());
        m.put("topic", w.topic());
        m.put("partitions", w.partitions());
        m.put("producers", w.producers());
        m.put("consumers", w.consumers());
        m.put("message_size_bytes", w.messageSizeBytes());
        m.put("key_distributor", w.keyDistributor().name());
        m.put("target_rate_msg_per_s", w.producerRatePerS());
        m.put("warmup_s", w.warmupS());
        m.put("measured_s", s);
        m.put("publish_rate_msg_per_s", p.sent / s);
        m.put("publish_rate_mib_per_s", p.sentBytes / s / (1 << 20));
        m.put("consume_rate_msg_per_s", p.received / s);
        m.put("consume_rate_mib_per_s", p.receivedBytes / s / (1 << 20));
        m.put("published_bytes", p.sentBytes);
        m.put("consumed_bytes", p.receivedBytes);
        m.put("publish_errors", p.sendErrors);
        m.put("publish_latency_ms", Stats.quantilesMs(p.publishLatencyUs));
        m.put("publish_delay_ms", Stats.quantilesMs(p.publishDelayUs));
        m.put("e2e_latency_ms", Stats.quantilesMs(p.e2eLatencyUs));
        m.put("e2e_from_intended_ms", Stats.quantilesMs(p.e2eFromIntendedUs));
        return m;
    }
}
