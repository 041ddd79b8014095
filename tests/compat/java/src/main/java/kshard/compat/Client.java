package kshard.compat;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.AlterConfigsOptions;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Command-line Kafka client used by the pytest compatibility suite. Each
 * subcommand prints JSON lines on stdout that the Python test checks; the
 * record content formula matches compat_util.record() in Python.
 */
public final class Client {
    private static final int TIMEOUT_MS = 60_000;

    public static void main(String[] argv) throws Exception {
        if (argv.length < 1) {
            throw new IllegalArgumentException("usage: Client <subcommand> [--key value ...]");
        }
        Map<String, String> opts = new HashMap<>();
        List<String> rest = new ArrayList<>();
        for (int i = 1; i < argv.length; i++) {
            if (argv[i].startsWith("--")) {
                if (i + 1 >= argv.length) {
                    throw new IllegalArgumentException("missing value for " + argv[i]);
                }
                opts.put(argv[i].substring(2), argv[++i]);
            } else {
                rest.add(argv[i]);
            }
        }
        switch (argv[0]) {
            case "create-topics": createTopics(opts, rest); break;
            case "produce": produce(opts); break;
            case "consume": consume(opts); break;
            case "offsets": offsets(opts); break;
            case "delete-records": deleteRecords(opts); break;
            case "describe": describe(opts); break;
            case "group-consume": GroupHost.run(opts); break;
            case "txn-etl": Transactions.etl(opts); break;
            case "streams-count": StreamsCount.run(opts); break;
            case "incremental-alter-configs": incrementalAlterConfigs(opts, rest); break;
            case "produce-paced": producePaced(opts); break;
            default: throw new IllegalArgumentException("unknown subcommand " + argv[0]);
        }
        System.out.flush();
    }

    private static String need(Map<String, String> opts, String key) {
        String v = opts.get(key);
        if (v == null) {
            throw new IllegalArgumentException("missing --" + key);
        }
        return v;
    }

    /**
     * --client-props FILE (optional, every subcommand that builds its own
     * admin, consumer or producer here): a java.util.Properties file whose
     * entries are added last, over the defaults (security.protocol, ssl.*,
     * sasl.*, timeouts, ...).
     */
    static void clientProps(Map<String, String> opts, Properties p) throws java.io.IOException {
        String path = opts.get("client-props");
        if (path == null) return;
        Properties extra = new Properties();
        try (java.io.Reader r = java.nio.file.Files.newBufferedReader(java.nio.file.Path.of(path))) {
            extra.load(r);
        }
        p.putAll(extra);
    }

    private static Admin admin(Map<String, String> opts) throws java.io.IOException {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, need(opts, "bootstrap"));
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "30000");
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, String.valueOf(TIMEOUT_MS));
        clientProps(opts, p);
        return Admin.create(p);
    }

    private static KafkaConsumer<byte[], byte[]> consumer(Map<String, String> opts) throws java.io.IOException {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, need(opts, "bootstrap"));
        // No group.id: partitions are assigned by hand and nothing is committed.
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "2000");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        clientProps(opts, p);
        return new KafkaConsumer<>(p);
    }

    private static List<TopicPartition> partitions(Map<String, String> opts) {
        String topic = need(opts, "topic");
        int n = Integer.parseInt(need(opts, "partitions"));
        List<TopicPartition> tps = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            tps.add(new TopicPartition(topic, i));
        }
        return tps;
    }

    // --- record content shared with Python ---------------------------------

    static String key(String tag, long i) {
        return String.format("%s-k%07d", tag, i);
    }

    static String value(String tag, long i) {
        StringBuilder sb = new StringBuilder(String.format("%s-v%07d-", tag, i));
        for (long r = 0; r < i % 13; r++) {
            sb.append("abcdefghij");
        }
        return sb.toString();
    }

    // --- subcommands --------------------------------------------------------

    private static void createTopics(Map<String, String> opts, List<String> topics) throws Exception {
        int partitions = Integer.parseInt(need(opts, "partitions"));
        try (Admin admin = admin(opts)) {
            List<NewTopic> news = new ArrayList<>();
            for (String t : topics) {
                news.add(new NewTopic(t, partitions, (short) 1));
            }
            admin.createTopics(news).all().get();
            Map<String, TopicDescription> desc = describeWithRetry(admin, topics);
            StringBuilder sb = new StringBuilder("{\"topics\":{");
            boolean first = true;
            for (String t : topics) {
                TopicDescription d = desc.get(t);
                if (!first) sb.append(',');
                first = false;
                sb.append(Json.str(t)).append(":{\"partitions\":").append(d.partitions().size())
                  .append(",\"leaders\":[");
                boolean f2 = true;
                for (TopicPartitionInfo pi : d.partitions()) {
                    if (!f2) sb.append(',');
                    f2 = false;
                    sb.append(pi.leader() == null ? -1 : pi.leader().id());
                }
                sb.append("]}");
            }
            sb.append("}}");
            System.out.println(sb);
        }
    }

    private static Map<String, TopicDescription> describeWithRetry(Admin admin, Collection<String> topics)
            throws Exception {
        long deadline = System.currentTimeMillis() + TIMEOUT_MS;
        while (true) {
            try {
                Map<String, TopicDescription> d = admin.describeTopics(topics).allTopicNames().get();
                boolean leadersKnown = true;
                for (TopicDescription td : d.values()) {
                    for (TopicPartitionInfo pi : td.partitions()) {
                        if (pi.leader() == null || pi.leader().isEmpty()) leadersKnown = false;
                    }
                }
                if (leadersKnown || System.currentTimeMillis() > deadline) return d;
            } catch (Exception e) {
                if (System.currentTimeMillis() > deadline) throw e;
            }
            Thread.sleep(200);
        }
    }

    private static void produce(Map<String, String> opts) throws Exception {
        String topic = need(opts, "topic");
        String tag = opts.getOrDefault("tag", topic);
        int partitions = Integer.parseInt(need(opts, "partitions"));
        long start = Long.parseLong(opts.getOrDefault("start", "0"));
        long count = Long.parseLong(need(opts, "count"));
        long tsBase = Long.parseLong(need(opts, "ts-base"));
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, need(opts, "bootstrap"));
        p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, opts.getOrDefault("codec", "none"));
        p.put(ProducerConfig.ACKS_CONFIG, opts.getOrDefault("acks", "all"));
        if (opts.containsKey("idempotence")) {
            p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, opts.get("idempotence"));
        }
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "60000");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        clientProps(opts, p);
        List<Future<RecordMetadata>> futures = new ArrayList<>();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            for (long i = start; i < start + count; i++) {
                RecordHeaders headers = new RecordHeaders();
                headers.add("hi", Long.toString(i).getBytes(StandardCharsets.UTF_8));
                headers.add("ht", tag.getBytes(StandardCharsets.UTF_8));
                ProducerRecord<byte[], byte[]> rec = new ProducerRecord<>(topic, (int) (i % partitions),
                        tsBase + i, key(tag, i).getBytes(StandardCharsets.UTF_8),
                        value(tag, i).getBytes(StandardCharsets.UTF_8), headers);
                futures.add(producer.send(rec));
            }
            producer.flush();
            StringBuilder sb = new StringBuilder();
            long i = start;
            for (Future<RecordMetadata> f : futures) {
                RecordMetadata md = f.get();
                sb.append("{\"i\":").append(i).append(",\"p\":").append(md.partition())
                  .append(",\"o\":").append(md.hasOffset() ? md.offset() : -1).append("}\n");
                i++;
            }
            System.out.print(sb);
        }
    }

    private static void consume(Map<String, String> opts) throws Exception {
        List<TopicPartition> tps = partitions(opts);
        long deadline = System.currentTimeMillis() + Long.parseLong(opts.getOrDefault("timeout-ms", "60000"));
        StringBuilder sb = new StringBuilder();
        try (KafkaConsumer<byte[], byte[]> c = consumer(opts)) {
            c.assign(tps);
            c.seekToBeginning(tps);
            Map<TopicPartition, Long> end = c.endOffsets(tps);
            Map<TopicPartition, Long> pos = new HashMap<>();
            for (TopicPartition tp : tps) pos.put(tp, c.position(tp));
            while (!reached(pos, end)) {
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException("timed out at " + pos + " want " + end);
                }
                ConsumerRecords<byte[], byte[]> recs = c.poll(Duration.ofMillis(500));
                for (ConsumerRecord<byte[], byte[]> r : recs) {
                    sb.append("{\"p\":").append(r.partition()).append(",\"o\":").append(r.offset())
                      .append(",\"ts\":").append(r.timestamp())
                      .append(",\"tt\":").append(Json.str(r.timestampType().name))
                      .append(",\"k\":").append(Json.bytes(r.key()))
                      .append(",\"v\":").append(Json.bytes(r.value())).append(",\"h\":[");
                    boolean first = true;
                    for (Header h : r.headers()) {
                        if (!first) sb.append(',');
                        first = false;
                        sb.append('[').append(Json.str(h.key())).append(',').append(Json.bytes(h.value())).append(']');
                    }
                    sb.append("]}\n");
                }
                for (TopicPartition tp : tps) pos.put(tp, c.position(tp));
            }
        }
        System.out.print(sb);
    }

    private static boolean reached(Map<TopicPartition, Long> pos, Map<TopicPartition, Long> end) {
        for (Map.Entry<TopicPartition, Long> e : end.entrySet()) {
            if (pos.get(e.getKey()) < e.getValue()) return false;
        }
        return true;
    }

    private static void offsets(Map<String, String> opts) throws Exception {
        List<TopicPartition> tps = partitions(opts);
        List<Long> stamps = new ArrayList<>();
        for (String s : opts.getOrDefault("ts", "").split(",")) {
            if (!s.isEmpty()) stamps.add(Long.parseLong(s));
        }
        Map<String, Object> out = new LinkedHashMap<>();
        try (Admin admin = admin(opts)) {
            out.put("earliest", listOffsets(admin, tps, OffsetSpec.earliest()));
            out.put("latest", listOffsets(admin, tps, OffsetSpec.latest()));
            out.put("max_timestamp", listOffsets(admin, tps, OffsetSpec.maxTimestamp()));
            Map<String, Object> byTs = new LinkedHashMap<>();
            for (long ts : stamps) {
                byTs.put(Long.toString(ts), listOffsets(admin, tps, OffsetSpec.forTimestamp(ts)));
            }
            out.put("for_timestamp", byTs);
        }
        try (KafkaConsumer<byte[], byte[]> c = consumer(opts)) {
            Map<String, Object> byTs = new LinkedHashMap<>();
            for (long ts : stamps) {
                Map<TopicPartition, Long> q = new HashMap<>();
                for (TopicPartition tp : tps) q.put(tp, ts);
                Map<TopicPartition, OffsetAndTimestamp> r = c.offsetsForTimes(q, Duration.ofMillis(TIMEOUT_MS));
                List<Object> perPart = new ArrayList<>();
                for (TopicPartition tp : tps) {
                    OffsetAndTimestamp ot = r.get(tp);
                    perPart.add(ot == null ? null : List.of(ot.offset(), ot.timestamp()));
                }
                byTs.put(Long.toString(ts), perPart);
            }
            out.put("consumer_offsets_for_times", byTs);
            Map<TopicPartition, Long> beg = c.beginningOffsets(tps, Duration.ofMillis(TIMEOUT_MS));
            Map<TopicPartition, Long> end = c.endOffsets(tps, Duration.ofMillis(TIMEOUT_MS));
            List<Object> b = new ArrayList<>();
            List<Object> e = new ArrayList<>();
            for (TopicPartition tp : tps) {
                b.add(beg.get(tp));
                e.add(end.get(tp));
            }
            out.put("consumer_beginning", b);
            out.put("consumer_end", e);
        }
        System.out.println(Json.value(out));
    }

    private static List<Object> listOffsets(Admin admin, List<TopicPartition> tps, OffsetSpec spec)
            throws Exception {
        Map<TopicPartition, OffsetSpec> q = new HashMap<>();
        for (TopicPartition tp : tps) q.put(tp, spec);
        Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> r = admin.listOffsets(q).all().get();
        List<Object> perPart = new ArrayList<>();
        for (TopicPartition tp : tps) {
            ListOffsetsResult.ListOffsetsResultInfo info = r.get(tp);
            perPart.add(List.of(info.offset(), info.timestamp()));
        }
        return perPart;
    }

    private static void deleteRecords(Map<String, String> opts) throws Exception {
        TopicPartition tp = new TopicPartition(need(opts, "topic"), Integer.parseInt(need(opts, "partition")));
        long before = Long.parseLong(need(opts, "before"));
        try (Admin admin = admin(opts)) {
            long low = admin.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(before)))
                    .lowWatermarks().get(tp).get().lowWatermark();
            long earliest = admin.listOffsets(Map.of(tp, OffsetSpec.earliest())).all().get().get(tp).offset();
            Map<String, Object> out = new LinkedHashMap<>();
            out.put("low_watermark", low);
            out.put("earliest", earliest);
            System.out.println(Json.value(out));
        }
    }

    private static void describe(Map<String, String> opts) throws Exception {
        String topic = need(opts, "topic");
        Map<String, Object> out = new LinkedHashMap<>();
        try (Admin admin = admin(opts)) {
            DescribeClusterResult cl = admin.describeCluster();
            List<Object> nodes = new ArrayList<>();
            for (Node n : cl.nodes().get()) {
                nodes.add(List.of(n.id(), n.host(), n.port()));
            }
            out.put("cluster_id", cl.clusterId().get());
            out.put("nodes", nodes);
            Node ctrl = cl.controller().get();
            out.put("controller", ctrl == null ? null : ctrl.id());
            TopicDescription td = describeWithRetry(admin, List.of(topic)).get(topic);
            out.put("topic_partitions", td.partitions().size());
            out.put("topic_id_set", td.topicId() != null && !td.topicId().toString().isEmpty());
            List<Object> parts = new ArrayList<>();
            for (TopicPartitionInfo pi : td.partitions()) {
                parts.add(List.of(pi.partition(), pi.leader() == null ? -1 : pi.leader().id(),
                        pi.replicas().size(), pi.isr().size()));
            }
            out.put("partitions", parts);
            ConfigResource topicRes = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            String brokerId = Integer.toString(cl.nodes().get().iterator().next().id());
            ConfigResource brokerRes = new ConfigResource(ConfigResource.Type.BROKER, brokerId);
            Map<ConfigResource, Config> cfgs = admin.describeConfigs(List.of(topicRes, brokerRes)).all().get();
            Map<String, Object> topicCfg = new LinkedHashMap<>();
            for (ConfigEntry e : cfgs.get(topicRes).entries()) {
                topicCfg.put(e.name(), e.value());
            }
            out.put("topic_config", topicCfg);
            out.put("broker_config_count", cfgs.get(brokerRes).entries().size());
            ConfigEntry logDirs = cfgs.get(brokerRes).get("log.dirs");
            out.put("broker_log_dirs", logDirs == null ? null : logDirs.value());
        }
        System.out.println(Json.value(out));
    }

    /**
     * incremental-alter-configs --resource topic:NAME | broker:ID | broker:
     * (the cluster default) [--validate-only true] OP:key[=value] ...
     * (OP one of SET, DELETE, APPEND, SUBTRACT): one
     * Admin.incrementalAlterConfigs call, then a describeConfigs of the same
     * resource. Prints {"error": null or {"class", "message"}, "dynamic":
     * {name: value} of the entries whose source is the resource's own
     * dynamic level, null when the describe fails}.
     */
    private static void incrementalAlterConfigs(Map<String, String> opts, List<String> ops) throws Exception {
        String spec = need(opts, "resource");
        int colon = spec.indexOf(':');
        String kind = spec.substring(0, colon);
        String name = spec.substring(colon + 1);
        ConfigResource res;
        ConfigEntry.ConfigSource own;
        if (kind.equals("topic")) {
            res = new ConfigResource(ConfigResource.Type.TOPIC, name);
            own = ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG;
        } else if (kind.equals("broker")) {
            res = new ConfigResource(ConfigResource.Type.BROKER, name);
            own = name.isEmpty() ? ConfigEntry.ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
                    : ConfigEntry.ConfigSource.DYNAMIC_BROKER_CONFIG;
        } else {
            throw new IllegalArgumentException("bad --resource " + spec);
        }
        List<AlterConfigOp> alter = new ArrayList<>();
        for (String op : ops) {
            int c = op.indexOf(':');
            AlterConfigOp.OpType type = AlterConfigOp.OpType.valueOf(op.substring(0, c));
            String kv = op.substring(c + 1);
            int eq = kv.indexOf('=');
            String key = eq < 0 ? kv : kv.substring(0, eq);
            String value = eq < 0 ? "" : kv.substring(eq + 1);
            alter.add(new AlterConfigOp(new ConfigEntry(key, value), type));
        }
        boolean validateOnly = Boolean.parseBoolean(opts.getOrDefault("validate-only", "false"));
        Map<String, Object> out = new LinkedHashMap<>();
        try (Admin admin = admin(opts)) {
            Map<ConfigResource, Collection<AlterConfigOp>> req = new HashMap<>();
            req.put(res, alter);
            Object error = null;
            try {
                admin.incrementalAlterConfigs(req, new AlterConfigsOptions().validateOnly(validateOnly)).all().get();
            } catch (ExecutionException e) {
                Map<String, Object> err = new LinkedHashMap<>();
                err.put("class", e.getCause().getClass().getSimpleName());
                err.put("message", e.getCause().getMessage());
                error = err;
            }
            out.put("error", error);
            Map<String, Object> dynamic = new LinkedHashMap<>();
            try {
                Config cfg = admin.describeConfigs(List.of(res)).all().get().get(res);
                for (ConfigEntry e : cfg.entries()) {
                    if (e.source() == own) dynamic.put(e.name(), e.value());
                }
            } catch (ExecutionException e) {
                dynamic = null;
            }
            out.put("dynamic", dynamic);
        }
        System.out.println(Json.value(out));
    }

    /**
     * produce-paced --bootstrap B --topic T --seconds S [--interval-ms 100]
     * [--client-props FILE]: one KafkaProducer sends one record (the shared
     * key/value formula, partition 0) every interval for S seconds and waits
     * for each acknowledgement before the next send. Prints one JSON line:
     * {"acked", "errors": [first few exception strings], "offsets_in_order",
     * "metrics": {name: value} of the producer's authentication metrics
     * (successful-reauthentication-total, ...)}.
     */
    private static void producePaced(Map<String, String> opts) throws Exception {
        String topic = need(opts, "topic");
        long seconds = Long.parseLong(need(opts, "seconds"));
        long interval = Long.parseLong(opts.getOrDefault("interval-ms", "100"));
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, need(opts, "bootstrap"));
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "0");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "30000");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        clientProps(opts, p);
        long acked = 0;
        long last = -1;
        boolean inOrder = true;
        List<Object> errors = new ArrayList<>();
        Map<String, Object> metrics = new LinkedHashMap<>();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            long end = System.currentTimeMillis() + seconds * 1000;
            for (long i = 0; System.currentTimeMillis() < end; i++) {
                try {
                    RecordMetadata md = producer.send(new ProducerRecord<>(topic, 0,
                            key(topic, i).getBytes(StandardCharsets.UTF_8),
                            value(topic, i).getBytes(StandardCharsets.UTF_8))).get();
                    if (md.offset() <= last) inOrder = false;
                    last = md.offset();
                    acked++;
                } catch (ExecutionException e) {
                    if (errors.size() < 5) errors.add(e.getCause().toString());
                }
                Thread.sleep(interval);
            }
            for (Map.Entry<org.apache.kafka.common.MetricName, ? extends org.apache.kafka.common.Metric> e
                    : producer.metrics().entrySet()) {
                String name = e.getKey().name();
                if (name.contains("authentication") && e.getKey().group().equals("producer-metrics")) {
                    metrics.put(name, e.getValue().metricValue());
                }
            }
        }
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("acked", acked);
        out.put("errors", errors);
        out.put("offsets_in_order", inOrder);
        out.put("metrics", metrics);
        System.out.println(Json.value(out));
    }

    private Client() {}

    /**
     * group-consume: a pool of group members in one JVM, driven line by line
     * on stdin ("add NAME [INSTANCE]", "close NAME", "exit") by the Python test, which
     * kills the whole process with SIGKILL to simulate a crashed member.
     * Every rebalance callback, consumed offset range and acknowledged commit
     * goes to stdout as a JSON line stamped with System.nanoTime()
     * (CLOCK_MONOTONIC, the clock Python's time.monotonic_ns() reads), so
     * events from several processes can be ordered.
     */
    static final class GroupHost {
        private static final Object OUT_LOCK = new Object();

        static void emit(Map<String, Object> ev) {
            ev.put("ts", System.nanoTime());
            String line = Json.value(ev);
            synchronized (OUT_LOCK) {
                System.out.println(line);
                System.out.flush();
            }
        }

        static Map<String, Object> event(String kind, String member) {
            Map<String, Object> ev = new LinkedHashMap<>();
            ev.put("ev", kind);
            ev.put("m", member);
            return ev;
        }

        static void run(Map<String, String> opts) throws Exception {
            Map<String, Member> members = new LinkedHashMap<>();
            emit(event("host", null));
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            String line;
            while ((line = in.readLine()) != null) {
                String[] w = line.trim().split("\\s+");
                if ((w.length == 2 || w.length == 3) && w[0].equals("add")) {
                    // "add NAME INSTANCE": a static member (group.instance.id
                    // INSTANCE); --static true makes every member static with
                    // its name as instance id.
                    String instance = w.length == 3 ? w[2]
                            : "true".equals(opts.get("static")) ? w[1] : null;
                    Member m = new Member(opts, w[1], instance);
                    members.put(w[1], m);
                    m.thread.start();
                } else if (w.length == 2 && w[0].equals("close")) {
                    Member m = members.remove(w[1]);
                    if (m != null) m.stop();
                } else if (w.length == 1 && w[0].equals("exit")) {
                    break;
                } else if (!line.isBlank()) {
                    throw new IllegalArgumentException("bad command " + line);
                }
            }
            for (Member m : members.values()) m.closing = true;
            for (Member m : members.values()) m.stop();
            emit(event("exit", null));
        }
    }

    /** One group member: its own KafkaConsumer on its own thread. */
    static final class Member implements Runnable, ConsumerRebalanceListener {
        final String name;
        final String topic;
        final Thread thread;
        final KafkaConsumer<byte[], byte[]> consumer;
        volatile boolean closing;

        Member(Map<String, String> opts, String name, String groupInstanceId) {
            this.name = name;
            this.topic = need(opts, "topic");
            Properties p = new Properties();
            p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, need(opts, "bootstrap"));
            p.put(ConsumerConfig.GROUP_ID_CONFIG, need(opts, "group"));
            p.put(ConsumerConfig.CLIENT_ID_CONFIG, name);
            if (groupInstanceId != null) p.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, groupInstanceId);
            p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
            p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
            p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, opts.getOrDefault("session-timeout-ms", "6000"));
            p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, opts.getOrDefault("heartbeat-ms", "1000"));
            p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, opts.getOrDefault("max-poll-records", "500"));
            String assignor = assignorClass(opts.getOrDefault("assignor", "default"));
            if (assignor != null) p.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, assignor);
            p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
            p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
            this.consumer = new KafkaConsumer<>(p);
            this.thread = new Thread(this, "member-" + name);
        }

        static String assignorClass(String name) {
            switch (name) {
                case "default": return null;
                case "range": return "org.apache.kafka.clients.consumer.RangeAssignor";
                case "roundrobin": return "org.apache.kafka.clients.consumer.RoundRobinAssignor";
                case "sticky": return "org.apache.kafka.clients.consumer.StickyAssignor";
                case "cooperative-sticky": return "org.apache.kafka.clients.consumer.CooperativeStickyAssignor";
                default: throw new IllegalArgumentException("unknown assignor " + name);
            }
        }

        void stop() throws InterruptedException {
            closing = true;
            thread.join();
        }

        private List<Object> parts(Collection<TopicPartition> tps) {
            List<Integer> out = new ArrayList<>();
            for (TopicPartition tp : tps) {
                if (tp.topic().equals(topic)) out.add(tp.partition());
            }
            Collections.sort(out);
            return new ArrayList<Object>(out);
        }

        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> added) {
            Map<String, Object> ev = GroupHost.event("assigned", name);
            // The generation is already the new one when the callback runs.
            ev.put("gen", consumer.groupMetadata().generationId());
            ev.put("mid", consumer.groupMetadata().memberId());
            ev.put("added", parts(added));
            ev.put("owned", parts(consumer.assignment()));
            GroupHost.emit(ev);
        }

        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> revoked) {
            Map<String, Object> ev = GroupHost.event("revoked", name);
            ev.put("parts", parts(revoked));
            GroupHost.emit(ev);
        }

        @Override
        public void onPartitionsLost(Collection<TopicPartition> lost) {
            Map<String, Object> ev = GroupHost.event("lost", name);
            ev.put("parts", parts(lost));
            GroupHost.emit(ev);
        }

        @Override
        public void run() {
            try {
                consumer.subscribe(List.of(topic), this);
                while (!closing) {
                    ConsumerRecords<byte[], byte[]> recs;
                    try {
                        recs = consumer.poll(Duration.ofMillis(200));
                    } catch (KafkaException e) {
                        Map<String, Object> ev = GroupHost.event("poll_error", name);
                        ev.put("err", e.toString());
                        GroupHost.emit(ev);
                        Thread.sleep(100);
                        continue;
                    }
                    if (recs.isEmpty()) continue;
                    Map<TopicPartition, OffsetAndMetadata> commit = new HashMap<>();
                    Map<String, Object> committed = new LinkedHashMap<>();
                    for (TopicPartition tp : recs.partitions()) {
                        List<ConsumerRecord<byte[], byte[]>> rs = recs.records(tp);
                        long first = rs.get(0).offset();
                        long last = rs.get(rs.size() - 1).offset();
                        Map<String, Object> ev = GroupHost.event("consumed", name);
                        ev.put("p", tp.partition());
                        ev.put("from", first);
                        ev.put("to", last);
                        ev.put("n", rs.size());
                        GroupHost.emit(ev);
                        commit.put(tp, new OffsetAndMetadata(last + 1, "by " + name));
                        committed.put(Integer.toString(tp.partition()), last + 1);
                    }
                    try {
                        consumer.commitSync(commit, Duration.ofSeconds(30));
                        Map<String, Object> ev = GroupHost.event("commit", name);
                        ev.put("offsets", committed);
                        GroupHost.emit(ev);
                    } catch (KafkaException e) {
                        // At least once: the records come again to whoever owns them next.
                        Map<String, Object> ev = GroupHost.event("commit_failed", name);
                        ev.put("err", e.toString());
                        GroupHost.emit(ev);
                    }
                }
            } catch (Exception e) {
                Map<String, Object> ev = GroupHost.event("error", name);
                ev.put("err", e.toString());
                GroupHost.emit(ev);
            } finally {
                try {
                    consumer.close(Duration.ofSeconds(30));
                } catch (Exception e) {
                    Map<String, Object> ev = GroupHost.event("error", name);
                    ev.put("err", "close: " + e);
                    GroupHost.emit(ev);
                }
                GroupHost.emit(GroupHost.event("closed", name));
            }
        }
    }

    /** Minimal JSON writer: strings, numbers, booleans, null, lists, maps. */
    static final class Json {
        static String str(String s) {
            if (s == null) return "null";
            StringBuilder sb = new StringBuilder("\"");
            for (int i = 0; i < s.length(); i++) {
                char c = s.charAt(i);
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

        static String bytes(byte[] b) {
            return b == null ? "null" : str(new String(b, StandardCharsets.UTF_8));
        }

        @SuppressWarnings("unchecked")
        static String value(Object o) {
            if (o == null) return "null";
            if (o instanceof String) return str((String) o);
            if (o instanceof Number || o instanceof Boolean) return o.toString();
            if (o instanceof Map) {
                StringBuilder sb = new StringBuilder("{");
                boolean first = true;
                for (Map.Entry<String, Object> e : ((Map<String, Object>) o).entrySet()) {
                    if (!first) sb.append(',');
                    first = false;
                    sb.append(str(e.getKey())).append(':').append(value(e.getValue()));
                }
                return sb.append('}').toString();
            }
            if (o instanceof List) {
                StringBuilder sb = new StringBuilder("[");
                boolean first = true;
                for (Object v : (List<Object>) o) {
                    if (!first) sb.append(',');
                    first = false;
                    sb.append(value(v));
                }
                return sb.append(']').toString();
            }
            return str(o.toString());
        }
    }
}
