package kshard.omb;

import java.util.HashMap;
import java.util.Map;
import java.util.UUID;

/**
 * One run's settings, from the command line. The names follow OMB's workload files
 * (topics: 1, partitionsPerTopic, messageSize, producersPerTopic, consumerPerSubscription,
 * producerRate, keyDistributor, warmupDurationMinutes, testDurationMinutes), in seconds here.
 */
record Workload(
        String bootstrapServer,
        String name,
        String topic,
        int partitions,
        int producers,
        int consumers,
        int messageSizeBytes,
        double producerRatePerS,
        KeyDistributor keyDistributor,
        int warmupS,
        int durationS,
        String out) {

    static final String USAGE = "usage: Omb --bootstrap-server HOST:PORT --producer-rate MSG_PER_S [--name NAME]"
            + " [--partitions 100] [--producers 4] [--consumers 4] [--message-size 1024]"
            + " [--key-distributor NO_KEY|RANDOM_NANO] [--warmup-s 60] [--duration-s 300] [--out FILE.json]";

    /** The timestamps the producer writes at the start of every payload. */
    static final int HEADER_BYTES = 16;

    static Workload parse(String[] args) {
        Map<String, String> a = new HashMap<>();
        for (int i = 0; i < args.length; i += 2) {
            if (!args[i].startsWith("--") || i + 1 >= args.length) {
                throw new IllegalArgumentException("bad argument " + args[i] + "\n" + USAGE);
            }
            a.put(args[i].substring(2), args[i + 1]);
        }
        String bootstrap = required(a, "bootstrap-server");
        double rate = Double.parseDouble(required(a, "producer-rate"));
        String name = a.getOrDefault("name", "1-topic-100-partitions-1kb-4p-4c");
        // OMB names its topics test-topic-<random>-<index>.
        String topic = a.getOrDefault("topic",
                "test-topic-" + UUID.randomUUID().toString().substring(0, 8) + "-0000");
        Workload w = new Workload(bootstrap, name, topic,
                Integer.parseInt(a.getOrDefault("partitions", "100")),
                Integer.parseInt(a.getOrDefault("producers", "4")),
                Integer.parseInt(a.getOrDefault("consumers", "4")),
                Integer.parseInt(a.getOrDefault("message-size", "1024")),
                rate,
                KeyDistributor.valueOf(a.getOrDefault("key-distributor", "NO_KEY")),
                Integer.parseInt(a.getOrDefault("warmup-s", "60")),
                Integer.parseInt(a.getOrDefault("duration-s", "300")),
                a.get("out"));
        w.check();
        return w;
    }

    private static String required(Map<String, String> a, String key) {
        String v = a.get(key);
        if (v == null) {
            throw new IllegalArgumentException("--" + key + " is required\n" + USAGE);
        }
        return v;
    }

    private void check() {
        if (partitions < 1 || producers < 1 || consumers < 1 || producerRatePerS <= 0 || durationS < 1
                || warmupS < 0) {
            throw new IllegalArgumentException("counts, rate and duration must be positive\n" + USAGE);
        }
        if (messageSizeBytes < HEADER_BYTES) {
            throw new IllegalArgumentException("--message-size must hold the " + HEADER_BYTES
                    + " timestamp bytes");
        }
    }
}
