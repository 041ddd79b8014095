package kshard.compat;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

/**
 * A Kafka Streams application with processing.guarantee=exactly_once_v2
 * (the `streams-count` subcommand): counts the records of --in per key
 * into a state store and writes every new count to --out. The record
 * cache is off, so each input record yields one output record: under
 * exactly-once the counts of a key read back (read_committed) are 1, 2, 3,
 * ... with no gap or repeat. Runs until its standard input closes; a
 * stream thread that dies of an error is replaced, as an application
 * would configure it.
 */
final class StreamsCount {
    private StreamsCount() {}

    static void run(Map<String, String> opts) throws Exception {
        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, opts.get("app-id"));
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, opts.get("bootstrap"));
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, "100");
        p.put(StreamsConfig.STATE_DIR_CONFIG, Files.createTempDirectory("streams-count").toString());
        p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, "1");
        p.put("statestore.cache.max.bytes", "0");
        p.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.String().getClass().getName());
        p.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.String().getClass().getName());
        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(opts.get("in"), Consumed.with(Serdes.String(), Serdes.String()))
            .groupByKey()
            .count(Materialized.as("counts"))
            .toStream()
            .mapValues(count -> Long.toString(count))
            .to(opts.get("out"), Produced.with(Serdes.String(), Serdes.String()));
        try (KafkaStreams streams = new KafkaStreams(builder.build(), p)) {
            streams.setUncaughtExceptionHandler(e -> {
                System.err.println("stream thread died, replacing it: " + e);
                return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.REPLACE_THREAD;
            });
            streams.setStateListener((now, before) -> System.err.println("streams state " + before + " -> " + now));
            streams.start();
            System.out.println("{\"started\":true}");
            System.out.flush();
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            while (in.readLine() != null) {
                // Runs until the test closes standard input.
            }
        }
    }
}
