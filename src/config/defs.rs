//! Config definitions: name, Kafka type, default as Kafka prints it,
//! validation and a one-line doc, for every broker and topic key kshard
//! knows. DescribeConfigs answers are built from these tables.

use super::BrokerConfig;

/// DescribeConfigs `config_type` codes (DescribeConfigsResponse.ConfigType).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i8)]
pub enum ConfigType {
    Unknown = 0,
    Boolean = 1,
    String = 2,
    Int = 3,
    Short = 4,
    Long = 5,
    Double = 6,
    List = 7,
    Class = 8,
    Password = 9,
}

/// DescribeConfigs `config_source` codes (DescribeConfigsResponse.ConfigSource).
pub const SOURCE_UNKNOWN: i8 = 0;
pub const SOURCE_TOPIC_CONFIG: i8 = 1;
pub const SOURCE_DYNAMIC_BROKER_CONFIG: i8 = 2;
pub const SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG: i8 = 3;
pub const SOURCE_STATIC_BROKER_CONFIG: i8 = 4;
pub const SOURCE_DEFAULT_CONFIG: i8 = 5;

/// Kafka's ConfigDef validators that kshard's keys use.
#[derive(Clone, Copy, Debug)]
pub enum Validator {
    None,
    AtLeast(i64),
    Between(i64, i64),
    /// Case-sensitive choice (ConfigDef.ValidString).
    OneOf(&'static [&'static str]),
    /// Every list element must be one of these (ConfigDef.ValidList).
    ListOf(&'static [&'static str]),
    DoubleBetween(f64, f64),
    /// -1, or 1..=9 (compression.gzip.level).
    GzipLevel,
}

#[derive(Clone, Copy, Debug)]
pub struct ConfigDef {
    pub name: &'static str,
    pub config_type: ConfigType,
    /// The default as Kafka's ConfigDef.convertToString prints it; None = null.
    pub default: Option<&'static str>,
    pub validator: Validator,
    /// Kafka can change it at runtime (DynamicBrokerConfig); read_only = !dynamic.
    pub dynamic: bool,
    pub doc: &'static str,
}

/// One DescribeConfigs result entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigEntry {
    pub name: String,
    pub value: Option<String>,
    pub read_only: bool,
    pub source: i8,
    pub is_sensitive: bool,
    /// (name, value, source), highest precedence first.
    pub synonyms: Vec<(String, Option<String>, i8)>,
    pub config_type: i8,
    pub documentation: Option<String>,
}

const LONG_MAX: &str = "9223372036854775807";
const INT_MAX: &str = "2147483647";
const COMPRESSION_TYPES: &[&str] = &["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"];
const TIMESTAMP_TYPES: &[&str] = &["CreateTime", "LogAppendTime"];
const CLEANUP_POLICIES: &[&str] = &["compact", "delete"];

const fn def(
    name: &'static str,
    config_type: ConfigType,
    default: Option<&'static str>,
    validator: Validator,
    dynamic: bool,
    doc: &'static str,
) -> ConfigDef {
    ConfigDef {
        name,
        config_type,
        default,
        validator,
        dynamic,
        doc,
    }
}

use ConfigType as T;
use Validator as V;

/// Broker keys, sorted by name (checked by a test; lookups binary-search).
#[rustfmt::skip]
pub static BROKER_DEFS: &[ConfigDef] = &[
    def("advertised.listeners", T::String, None, V::None, true, "Listeners published to clients; defaults to listeners."),
    def("auto.create.topics.enable", T::Boolean, Some("true"), V::None, false, "Create a topic on first metadata request or produce."),
    def("auto.leader.rebalance.enable", T::Boolean, Some("true"), V::None, false, "Move leadership back to preferred replicas."),
    def("background.threads", T::Int, Some("10"), V::AtLeast(1), true, "Threads for background tasks (accepted, not applicable)."),
    def("broker.id", T::Int, Some("-1"), V::None, false, "Broker id; -1 means generate (kshard's embedded store uses 0)."),
    def("broker.id.generation.enable", T::Boolean, Some("true"), V::None, false, "Allow the broker id to be generated."),
    def("broker.rack", T::String, None, V::None, false, "Rack of this broker for rack-aware assignment."),
    def("compression.gzip.level", T::Int, Some("-1"), V::GzipLevel, true, "Gzip level when compression.type is gzip."),
    def("compression.lz4.level", T::Int, Some("9"), V::Between(1, 17), true, "LZ4 level when compression.type is lz4."),
    def("compression.type", T::String, Some("producer"), V::OneOf(COMPRESSION_TYPES), true, "Final compression for topic data; producer keeps the producer's."),
    def("compression.zstd.level", T::Int, Some("3"), V::Between(-131072, 22), true, "Zstd level when compression.type is zstd."),
    def("connections.max.idle.ms", T::Long, Some("600000"), V::None, false, "Close connections idle longer than this."),
    def("controlled.shutdown.enable", T::Boolean, Some("true"), V::None, false, "Move leadership away before shutting down."),
    def("controlled.shutdown.max.retries", T::Int, Some("3"), V::None, false, "Controlled shutdown attempts before an unclean shutdown."),
    def("controlled.shutdown.retry.backoff.ms", T::Long, Some("5000"), V::None, false, "Wait between controlled shutdown attempts."),
    def("controller.socket.timeout.ms", T::Int, Some("30000"), V::None, false, "Controller-to-broker socket timeout."),
    def("default.replication.factor", T::Int, Some("1"), V::None, false, "Replication factor of auto-created topics."),
    def("delete.topic.enable", T::Boolean, Some("true"), V::None, false, "Allow topics to be deleted."),
    def("fetch.max.bytes", T::Int, Some("57671680"), V::AtLeast(1024), false, "Most bytes one fetch response may return."),
    def("group.initial.rebalance.delay.ms", T::Int, Some("3000"), V::None, false, "Wait for more members before the first rebalance."),
    def("group.max.session.timeout.ms", T::Int, Some("1800000"), V::None, false, "Largest session timeout a member may ask for."),
    def("group.max.size", T::Int, Some(INT_MAX), V::AtLeast(1), false, "Most members one consumer group may have."),
    def("group.min.session.timeout.ms", T::Int, Some("6000"), V::None, false, "Smallest session timeout a member may ask for."),
    def("inter.broker.listener.name", T::String, None, V::None, false, "Listener used between brokers."),
    def("inter.broker.protocol.version", T::String, Some("3.9-IV0"), V::None, false, "Inter-broker protocol version."),
    def("leader.imbalance.check.interval.seconds", T::Long, Some("300"), V::AtLeast(1), false, "How often the controller checks leader imbalance."),
    def("leader.imbalance.per.broker.percentage", T::Int, Some("10"), V::None, false, "Imbalance per broker that triggers a preferred leader election."),
    def("listener.security.protocol.map", T::String, Some("PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"), V::None, true, "Maps listener names to security protocols."),
    def("listeners", T::String, Some("PLAINTEXT://127.0.0.1:9092"), V::None, true, "Addresses to listen on (kshard default 127.0.0.1:9092)."),
    def("log.cleaner.backoff.ms", T::Long, Some("15000"), V::AtLeast(0), true, "Cleaner sleep when there is nothing to clean."),
    def("log.cleaner.dedupe.buffer.size", T::Long, Some("134217728"), V::None, true, "Memory for the cleaner's offset map."),
    def("log.cleaner.delete.retention.ms", T::Long, Some("86400000"), V::AtLeast(0), true, "How long delete tombstones are kept on compacted topics."),
    def("log.cleaner.enable", T::Boolean, Some("true"), V::None, false, "Run the log cleaner for compacted topics."),
    def("log.cleaner.max.compaction.lag.ms", T::Long, Some(LONG_MAX), V::AtLeast(1), true, "Longest a record may stay uncompacted."),
    def("log.cleaner.min.cleanable.ratio", T::Double, Some("0.5"), V::DoubleBetween(0.0, 1.0), true, "Dirty ratio that makes a log eligible for cleaning."),
    def("log.cleaner.min.compaction.lag.ms", T::Long, Some("0"), V::AtLeast(0), true, "Shortest time a record stays uncompacted."),
    def("log.cleaner.threads", T::Int, Some("1"), V::AtLeast(0), true, "Log cleaner threads."),
    def("log.cleanup.policy", T::List, Some("delete"), V::ListOf(CLEANUP_POLICIES), true, "Default cleanup policy: delete and/or compact."),
    def("log.dir", T::String, Some("./data"), V::None, false, "Data directory when log.dirs is unset (kshard default ./data)."),
    def("log.dirs", T::String, None, V::None, false, "Comma-separated data directories; overrides log.dir."),
    def("log.flush.interval.messages", T::Long, Some(LONG_MAX), V::AtLeast(1), true, "Messages appended before a forced flush."),
    def("log.flush.interval.ms", T::Long, None, V::None, true, "Time before a forced flush; unset uses log.flush.scheduler.interval.ms."),
    def("log.flush.offset.checkpoint.interval.ms", T::Int, Some("60000"), V::AtLeast(0), false, "How often the recovery point checkpoint is written."),
    def("log.flush.scheduler.interval.ms", T::Long, Some(LONG_MAX), V::None, false, "How often logs are checked for a time-based flush."),
    def("log.flush.start.offset.checkpoint.interval.ms", T::Int, Some("60000"), V::AtLeast(0), false, "How often the log start offset checkpoint is written."),
    def("log.index.interval.bytes", T::Int, Some("4096"), V::AtLeast(0), true, "Bytes between offset index entries."),
    def("log.index.size.max.bytes", T::Int, Some("10485760"), V::AtLeast(4), true, "Largest offset index file size."),
    def("log.io.mode", T::String, Some("buffered"), V::OneOf(&["direct", "buffered"]), false, "kshard: segment I/O through the page cache or direct I/O."),
    def("log.local.retention.bytes", T::Long, Some("-2"), V::AtLeast(-2), true, "Local retention size with tiered storage (-2: use retention.bytes)."),
    def("log.local.retention.ms", T::Long, Some("-2"), V::AtLeast(-2), true, "Local retention time with tiered storage (-2: use retention.ms)."),
    def("log.message.downconversion.enable", T::Boolean, Some("true"), V::None, true, "Down-convert messages for old fetch versions."),
    def("log.message.format.version", T::String, Some("3.0-IV1"), V::None, false, "Deprecated; ignored since 3.0."),
    def("log.message.timestamp.after.max.ms", T::Long, Some(LONG_MAX), V::AtLeast(0), true, "How far a CreateTime may be ahead of the broker clock."),
    def("log.message.timestamp.before.max.ms", T::Long, Some(LONG_MAX), V::AtLeast(0), true, "How far a CreateTime may be behind the broker clock."),
    def("log.message.timestamp.difference.max.ms", T::Long, Some(LONG_MAX), V::AtLeast(0), true, "Deprecated bound on timestamp skew."),
    def("log.message.timestamp.type", T::String, Some("CreateTime"), V::OneOf(TIMESTAMP_TYPES), true, "CreateTime or LogAppendTime."),
    def("log.preallocate", T::Boolean, Some("false"), V::None, true, "Preallocate segment files."),
    def("log.retention.bytes", T::Long, Some("-1"), V::None, true, "Largest partition size before old segments go; -1 unlimited."),
    def("log.retention.check.interval.ms", T::Long, Some("300000"), V::AtLeast(1), false, "How often retention is checked."),
    def("log.retention.hours", T::Int, Some("168"), V::None, false, "Retention in hours (lowest precedence)."),
    def("log.retention.minutes", T::Int, None, V::None, false, "Retention in minutes (over log.retention.hours)."),
    def("log.retention.ms", T::Long, None, V::None, true, "Retention in ms (over minutes and hours); -1 unlimited."),
    def("log.roll.hours", T::Int, Some("168"), V::AtLeast(1), false, "Segment roll time in hours."),
    def("log.roll.jitter.hours", T::Int, Some("0"), V::AtLeast(0), false, "Segment roll jitter in hours."),
    def("log.roll.jitter.ms", T::Long, None, V::None, true, "Segment roll jitter in ms (over hours)."),
    def("log.roll.ms", T::Long, None, V::None, true, "Segment roll time in ms (over log.roll.hours)."),
    def("log.segment.bytes", T::Int, Some("1073741824"), V::AtLeast(14), true, "Largest segment file size."),
    def("log.segment.delete.delay.ms", T::Long, Some("60000"), V::AtLeast(0), true, "Delay before a deleted segment's files are removed."),
    def("max.connections", T::Int, Some(INT_MAX), V::AtLeast(0), true, "Most connections the broker accepts."),
    def("max.connections.per.ip", T::Int, Some(INT_MAX), V::AtLeast(0), true, "Most connections from one address."),
    def("message.max.bytes", T::Int, Some("1048588"), V::AtLeast(0), true, "Largest record batch the broker accepts."),
    def("min.insync.replicas", T::Int, Some("1"), V::AtLeast(1), true, "Replicas that must ack an acks=all write."),
    def("num.io.threads", T::Int, Some("8"), V::AtLeast(1), true, "Request handler threads (accepted; kshard uses shards)."),
    def("num.network.threads", T::Int, Some("3"), V::AtLeast(1), true, "Network threads (accepted; kshard uses shards)."),
    def("num.partitions", T::Int, Some("1"), V::AtLeast(1), true, "Partitions of auto-created topics."),
    def("num.recovery.threads.per.data.dir", T::Int, Some("2"), V::AtLeast(1), true, "Threads per data dir for log recovery."),
    def("num.replica.fetchers", T::Int, Some("1"), V::None, true, "Replica fetcher threads per source broker."),
    def("num.shards", T::Int, None, V::AtLeast(1), false, "kshard: shard executors; default the CPUs the process may use."),
    def("offsets.commit.timeout.ms", T::Int, Some("5000"), V::AtLeast(1), false, "Offset commit wait for replication."),
    def("offsets.load.buffer.size", T::Int, Some("5242880"), V::AtLeast(1), false, "Read size when loading offsets."),
    def("offsets.retention.check.interval.ms", T::Long, Some("600000"), V::AtLeast(1), false, "How often stale offsets are checked."),
    def("offsets.retention.minutes", T::Int, Some("10080"), V::AtLeast(1), false, "How long offsets of empty groups are kept."),
    def("offsets.topic.num.partitions", T::Int, Some("50"), V::AtLeast(1), false, "Partitions of __consumer_offsets."),
    def("offsets.topic.replication.factor", T::Short, Some("3"), V::AtLeast(1), false, "Replication factor of __consumer_offsets."),
    def("offsets.topic.segment.bytes", T::Int, Some("104857600"), V::AtLeast(1), false, "Segment size of __consumer_offsets."),
    def("producer.id.expiration.check.interval.ms", T::Int, Some("600000"), V::AtLeast(1), false, "How often expired producer ids are removed."),
    def("producer.id.expiration.ms", T::Int, Some("86400000"), V::AtLeast(1), true, "Idle time before producer state expires."),
    def("queued.max.request.bytes", T::Long, Some("-1"), V::None, false, "Bytes of requests read and queued before reads stop; -1: kshard picks a bound."),
    def("queued.max.requests", T::Int, Some("500"), V::AtLeast(1), false, "Queued requests before reads stop."),
    def("replica.fetch.max.bytes", T::Int, Some("1048576"), V::AtLeast(0), false, "Bytes per partition a follower fetches."),
    def("replica.fetch.min.bytes", T::Int, Some("1"), V::None, false, "Least bytes a follower fetch waits for."),
    def("replica.fetch.response.max.bytes", T::Int, Some("10485760"), V::AtLeast(0), false, "Largest follower fetch response."),
    def("replica.fetch.wait.max.ms", T::Int, Some("500"), V::None, false, "Longest a follower fetch waits."),
    def("replica.high.watermark.checkpoint.interval.ms", T::Long, Some("5000"), V::None, false, "How often the high watermark is checkpointed."),
    def("replica.lag.time.max.ms", T::Long, Some("30000"), V::None, false, "Follower lag that drops it from the ISR."),
    def("replica.socket.timeout.ms", T::Int, Some("30000"), V::None, false, "Follower fetch socket timeout."),
    def("reserved.broker.max.id", T::Int, Some("1000"), V::AtLeast(0), false, "Highest id a user may configure."),
    def("security.inter.broker.protocol", T::String, Some("PLAINTEXT"), V::OneOf(&["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]), false, "Security protocol between brokers."),
    def("shard.core.offset", T::Int, Some("0"), V::AtLeast(0), false, "kshard: first CPU index shards are pinned to."),
    def("socket.listen.backlog.size", T::Int, Some("50"), V::AtLeast(1), false, "Listen backlog of server sockets."),
    def("socket.receive.buffer.bytes", T::Int, Some("102400"), V::None, false, "SO_RCVBUF of server sockets; -1 OS default."),
    def("socket.request.max.bytes", T::Int, Some("104857600"), V::AtLeast(1), false, "Largest request the broker reads."),
    def("socket.send.buffer.bytes", T::Int, Some("102400"), V::None, false, "SO_SNDBUF of server sockets; -1 OS default."),
    def("transaction.abort.timed.out.transaction.cleanup.interval.ms", T::Int, Some("10000"), V::AtLeast(1), false, "How often timed-out transactions are aborted."),
    def("transaction.max.timeout.ms", T::Int, Some("900000"), V::AtLeast(1), false, "Largest transaction timeout a producer may ask for."),
    def("transaction.remove.expired.transaction.cleanup.interval.ms", T::Int, Some("3600000"), V::AtLeast(1), false, "How often expired transactional ids are removed."),
    def("transaction.state.log.min.isr", T::Int, Some("2"), V::AtLeast(1), false, "min.insync.replicas of __transaction_state."),
    def("transaction.state.log.num.partitions", T::Int, Some("50"), V::AtLeast(1), false, "Partitions of __transaction_state."),
    def("transaction.state.log.replication.factor", T::Short, Some("3"), V::AtLeast(1), false, "Replication factor of __transaction_state."),
    def("transaction.state.log.segment.bytes", T::Int, Some("104857600"), V::AtLeast(1), false, "Segment size of __transaction_state."),
    def("transactional.id.expiration.ms", T::Int, Some("604800000"), V::AtLeast(1), true, "Idle time before a transactional id expires."),
    def("unclean.leader.election.enable", T::Boolean, Some("false"), V::None, true, "Allow out-of-ISR replicas to become leader."),
    def("zookeeper.connect", T::String, None, V::None, false, "ZooKeeper connect string; unset runs the embedded store."),
    def("zookeeper.connection.timeout.ms", T::Int, None, V::None, false, "Connect timeout; unset uses zookeeper.session.timeout.ms."),
    def("zookeeper.max.in.flight.requests", T::Int, Some("10"), V::AtLeast(1), false, "Unacknowledged ZooKeeper requests before blocking."),
    def("zookeeper.session.timeout.ms", T::Int, Some("18000"), V::None, false, "ZooKeeper session timeout."),
];

/// Topic keys, sorted by name. Defaults shown here apply when the broker
/// synonym is unset; `topic.rs` resolves the real default from the broker.
#[rustfmt::skip]
pub static TOPIC_DEFS: &[ConfigDef] = &[
    def("cleanup.policy", T::List, Some("delete"), V::ListOf(CLEANUP_POLICIES), true, "delete and/or compact."),
    def("compression.gzip.level", T::Int, Some("-1"), V::GzipLevel, true, "Gzip level when compression.type is gzip."),
    def("compression.lz4.level", T::Int, Some("9"), V::Between(1, 17), true, "LZ4 level when compression.type is lz4."),
    def("compression.type", T::String, Some("producer"), V::OneOf(COMPRESSION_TYPES), true, "Final compression of the topic's data."),
    def("compression.zstd.level", T::Int, Some("3"), V::Between(-131072, 22), true, "Zstd level when compression.type is zstd."),
    def("delete.retention.ms", T::Long, Some("86400000"), V::AtLeast(0), true, "How long tombstones stay on compacted topics."),
    def("file.delete.delay.ms", T::Long, Some("60000"), V::AtLeast(0), true, "Delay before deleted segment files are removed."),
    def("flush.messages", T::Long, Some(LONG_MAX), V::AtLeast(1), true, "Messages between forced flushes."),
    def("flush.ms", T::Long, Some(LONG_MAX), V::AtLeast(0), true, "Time between forced flushes."),
    def("follower.replication.throttled.replicas", T::List, Some(""), V::None, true, "Follower replicas to throttle."),
    def("index.interval.bytes", T::Int, Some("4096"), V::AtLeast(0), true, "Bytes between offset index entries."),
    def("leader.replication.throttled.replicas", T::List, Some(""), V::None, true, "Leader replicas to throttle."),
    def("local.retention.bytes", T::Long, Some("-2"), V::AtLeast(-2), true, "Local retention size with tiered storage."),
    def("local.retention.ms", T::Long, Some("-2"), V::AtLeast(-2), true, "Local retention time with tiered storage."),
    def("max.compaction.lag.ms", T::Long, Some(LONG_MAX), V::AtLeast(1), true, "Longest a record stays uncompacted."),
    def("max.message.bytes", T::Int, Some("1048588"), V::AtLeast(0), true, "Largest record batch the topic accepts."),
    def("message.downconversion.enable", T::Boolean, Some("true"), V::None, true, "Down-convert for old fetch versions."),
    def("message.format.version", T::String, Some("3.0-IV1"), V::None, true, "Deprecated; ignored since 3.0."),
    def("message.timestamp.after.max.ms", T::Long, Some(LONG_MAX), V::AtLeast(0), true, "How far CreateTime may be ahead of the broker."),
    def("message.timestamp.before.max.ms", T::Long, Some(LONG_MAX), V::AtLeast(0), true, "How far CreateTime may be behind the broker."),
    def("message.timestamp.difference.max.ms", T::Long, Some(LONG_MAX), V::AtLeast(0), true, "Deprecated bound on timestamp skew."),
    def("message.timestamp.type", T::String, Some("CreateTime"), V::OneOf(TIMESTAMP_TYPES), true, "CreateTime or LogAppendTime."),
    def("min.cleanable.dirty.ratio", T::Double, Some("0.5"), V::DoubleBetween(0.0, 1.0), true, "Dirty ratio that triggers cleaning."),
    def("min.compaction.lag.ms", T::Long, Some("0"), V::AtLeast(0), true, "Shortest time a record stays uncompacted."),
    def("min.insync.replicas", T::Int, Some("1"), V::AtLeast(1), true, "Replicas that must ack an acks=all write."),
    def("preallocate", T::Boolean, Some("false"), V::None, true, "Preallocate segment files."),
    def("remote.log.copy.disable", T::Boolean, Some("false"), V::None, true, "Stop copying to tiered storage."),
    def("remote.log.delete.on.disable", T::Boolean, Some("false"), V::None, true, "Delete tiered data when tiering is disabled."),
    def("remote.storage.enable", T::Boolean, Some("false"), V::None, true, "Tiered storage (not supported by kshard)."),
    def("retention.bytes", T::Long, Some("-1"), V::None, true, "Largest partition size before old segments go; -1 unlimited."),
    def("retention.ms", T::Long, Some("604800000"), V::AtLeast(-1), true, "How long data is kept; -1 unlimited."),
    def("segment.bytes", T::Int, Some("1073741824"), V::AtLeast(14), true, "Largest segment file size."),
    def("segment.index.bytes", T::Int, Some("10485760"), V::AtLeast(4), true, "Largest offset index file size."),
    def("segment.jitter.ms", T::Long, Some("0"), V::AtLeast(0), true, "Random jitter subtracted from segment.ms."),
    def("segment.ms", T::Long, Some("604800000"), V::AtLeast(1), true, "Time after which a segment is rolled."),
    def("unclean.leader.election.enable", T::Boolean, Some("false"), V::None, true, "Allow out-of-ISR replicas to become leader."),
];

fn find(defs: &'static [ConfigDef], name: &str) -> Option<&'static ConfigDef> {
    defs.binary_search_by(|d| d.name.cmp(name))
        .ok()
        .map(|i| &defs[i])
}

pub fn broker_def(name: &str) -> Option<&'static ConfigDef> {
    find(BROKER_DEFS, name)
}

pub fn topic_def(name: &str) -> Option<&'static ConfigDef> {
    find(TOPIC_DEFS, name)
}

/// Parses and validates `raw` against `def`, returning the value as Kafka
/// prints it (trimmed, booleans lower-case, lists joined by ","), or the
/// reason (Kafka's ConfigException wording after "Invalid value X for
/// configuration K:").
pub fn normalize_value(def: &ConfigDef, raw: &str) -> Result<String, String> {
    let value = raw.trim();
    let normalized = match def.config_type {
        T::Boolean => match value.to_ascii_lowercase().as_str() {
            "true" => "true".to_string(),
            "false" => "false".to_string(),
            _ => return Err("Expected value to be either true or false".to_string()),
        },
        T::Int | T::Short | T::Long => {
            let parsed: i64 = value
                .parse()
                .map_err(|_| integer_expectation(def.config_type))?;
            let (lo, hi) = match def.config_type {
                T::Short => (i16::MIN as i64, i16::MAX as i64),
                T::Int => (i32::MIN as i64, i32::MAX as i64),
                _ => (i64::MIN, i64::MAX),
            };
            if parsed < lo || parsed > hi {
                return Err(integer_expectation(def.config_type));
            }
            check_integer(def.validator, parsed)?;
            parsed.to_string()
        }
        T::Double => {
            let parsed: f64 = value.parse().map_err(|_| {
                "Expected value to be a double, but it was a java.lang.String".to_string()
            })?;
            if !parsed.is_finite() {
                return Err("Expected value to be a finite double".to_string());
            }
            if let V::DoubleBetween(lo, hi) = def.validator {
                if parsed < lo || parsed > hi {
                    return Err(format!("Value must be between {lo:?} and {hi:?}"));
                }
            }
            format!("{parsed:?}")
        }
        T::List => {
            let items: Vec<&str> = if value.is_empty() {
                Vec::new()
            } else {
                value.split(',').map(str::trim).collect()
            };
            if let V::ListOf(allowed) = def.validator {
                for item in &items {
                    if !allowed.contains(item) {
                        return Err(format!(
                            "Invalid value {item} for configuration {}: String must be one of: {}",
                            def.name,
                            allowed.join(", ")
                        ));
                    }
                }
            }
            items.join(",")
        }
        T::String | T::Class | T::Password | T::Unknown => {
            if let V::OneOf(allowed) = def.validator {
                if !allowed.contains(&value) {
                    return Err(format!("String must be one of: {}", allowed.join(", ")));
                }
            }
            value.to_string()
        }
    };
    Ok(normalized)
}

fn integer_expectation(config_type: ConfigType) -> String {
    let what = match config_type {
        T::Short => "a 16-bit integer (short)",
        T::Int => "a 32-bit integer",
        _ => "a 64-bit integer (long)",
    };
    format!(
        "Not a number of type {}: expected {what}",
        type_name(config_type)
    )
}

fn check_integer(validator: Validator, value: i64) -> Result<(), String> {
    match validator {
        V::AtLeast(min) if value < min => Err(format!("Value must be at least {min}")),
        V::Between(lo, hi) if value < lo || value > hi => Err(format!(
            "Value must be no less than {lo} and no more than {hi}"
        )),
        V::GzipLevel if value != -1 && !(1..=9).contains(&value) => {
            Err("Value must be one of -1 or between 1 and 9".to_string())
        }
        _ => Ok(()),
    }
}

/// Kafka's ConfigDef.Type name, for messages.
pub fn type_name(config_type: ConfigType) -> &'static str {
    match config_type {
        T::Unknown => "UNKNOWN",
        T::Boolean => "BOOLEAN",
        T::String => "STRING",
        T::Int => "INT",
        T::Short => "SHORT",
        T::Long => "LONG",
        T::Double => "DOUBLE",
        T::List => "LIST",
        T::Class => "CLASS",
        T::Password => "PASSWORD",
    }
}

/// DynamicBrokerConfig.brokerConfigSynonyms: the keys that feed one broker
/// setting, highest precedence first.
pub fn broker_synonyms(name: &str) -> &'static [&'static str] {
    const ROLL: &[&str] = &["log.roll.ms", "log.roll.hours"];
    const JITTER: &[&str] = &["log.roll.jitter.ms", "log.roll.jitter.hours"];
    const FLUSH: &[&str] = &["log.flush.interval.ms", "log.flush.scheduler.interval.ms"];
    const RETENTION: &[&str] = &[
        "log.retention.ms",
        "log.retention.minutes",
        "log.retention.hours",
    ];
    match name {
        "log.roll.ms" | "log.roll.hours" => ROLL,
        "log.roll.jitter.ms" | "log.roll.jitter.hours" => JITTER,
        "log.flush.interval.ms" => FLUSH,
        "log.retention.ms" | "log.retention.minutes" | "log.retention.hours" => RETENTION,
        _ => &[],
    }
}

/// Kafka's configSynonyms for a static-only broker: static (file/override)
/// values, then non-null defaults, dropping entries ranked above `name`.
pub fn static_synonyms(cfg: &BrokerConfig, name: &str) -> Vec<(String, Option<String>, i8)> {
    let explicit = broker_synonyms(name);
    let one = [name];
    let names: &[&str] = if explicit.is_empty() { &one } else { explicit };
    let mut all = Vec::new();
    for synonym in names {
        if let Some(value) = cfg.originals().get(*synonym) {
            let shown = display_value(broker_def(synonym), value);
            all.push((synonym.to_string(), shown, SOURCE_STATIC_BROKER_CONFIG));
        }
    }
    for synonym in names {
        if let Some(value) = broker_default(cfg, synonym) {
            all.push((synonym.to_string(), Some(value), SOURCE_DEFAULT_CONFIG));
        }
    }
    let first = all
        .iter()
        .position(|(n, _, _)| n == name)
        .unwrap_or(all.len());
    all.split_off(first)
}

fn display_value(def: Option<&ConfigDef>, raw: &str) -> Option<String> {
    match def {
        Some(d) if d.config_type == T::Password => None,
        Some(d) => Some(normalize_value(d, raw).unwrap_or_else(|_| raw.to_string())),
        None => Some(raw.to_string()),
    }
}

/// A broker key's default as DescribeConfigs shows it (None = null);
/// num.shards' default is the value computed at load.
pub fn broker_default(cfg: &BrokerConfig, name: &str) -> Option<String> {
    if name == "num.shards" {
        return Some(cfg.default_num_shards.to_string());
    }
    broker_def(name).and_then(|d| d.default.map(str::to_string))
}

/// Every broker key (known ones, then unknown keys from the file) with value,
/// source and synonyms, as Kafka's DescribeConfigs for this broker's id.
pub fn broker_config_entries(cfg: &BrokerConfig) -> Vec<ConfigEntry> {
    let mut entries = Vec::with_capacity(BROKER_DEFS.len() + cfg.unknown_keys.len());
    for d in BROKER_DEFS {
        let value = match cfg.originals().get(d.name) {
            Some(raw) => display_value(Some(d), raw),
            None if d.config_type == T::Password => None,
            None => broker_default(cfg, d.name),
        };
        let synonyms = static_synonyms(cfg, d.name);
        let source = synonyms.first().map_or(SOURCE_DEFAULT_CONFIG, |s| s.2);
        entries.push(ConfigEntry {
            name: d.name.to_string(),
            value,
            read_only: !d.dynamic,
            source,
            is_sensitive: d.config_type == T::Password,
            synonyms,
            config_type: d.config_type as i8,
            documentation: Some(d.doc.to_string()),
        });
    }
    for name in &cfg.unknown_keys {
        let value = cfg.originals().get(name).cloned();
        entries.push(ConfigEntry {
            name: name.clone(),
            value: value.clone(),
            read_only: true,
            source: SOURCE_STATIC_BROKER_CONFIG,
            is_sensitive: false,
            synonyms: vec![(name.clone(), value, SOURCE_STATIC_BROKER_CONFIG)],
            config_type: T::Unknown as i8,
            documentation: None,
        });
    }
    entries
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_sorted_and_unique() {
        for defs in [BROKER_DEFS, TOPIC_DEFS] {
            for pair in defs.windows(2) {
                assert!(
                    pair[0].name < pair[1].name,
                    "{} !< {}",
                    pair[0].name,
                    pair[1].name
                );
            }
        }
    }

    #[test]
    fn defaults_pass_their_own_validation() {
        for d in BROKER_DEFS.iter().chain(TOPIC_DEFS) {
            if let Some(default) = d.default {
                let shown =
                    normalize_value(d, default).unwrap_or_else(|e| panic!("{}: {e}", d.name));
                assert_eq!(shown, default, "{}", d.name);
            }
        }
    }

    #[test]
    fn validation_messages() {
        let seg = topic_def("segment.bytes").unwrap();
        assert_eq!(
            normalize_value(seg, "13").unwrap_err(),
            "Value must be at least 14"
        );
        assert_eq!(normalize_value(seg, " 14 ").unwrap(), "14");
        assert!(normalize_value(seg, "3000000000").is_err());
        let b = topic_def("preallocate").unwrap();
        assert_eq!(normalize_value(b, "TRUE").unwrap(), "true");
        assert!(normalize_value(b, "yes").is_err());
        let c = topic_def("cleanup.policy").unwrap();
        assert_eq!(
            normalize_value(c, "compact, delete").unwrap(),
            "compact,delete"
        );
        assert!(normalize_value(c, "compact,nope").is_err());
        let t = topic_def("compression.type").unwrap();
        assert!(normalize_value(t, "GZIP").is_err());
        let g = topic_def("compression.gzip.level").unwrap();
        assert!(normalize_value(g, "0").is_err());
        assert!(normalize_value(g, "-1").is_ok());
        let r = topic_def("min.cleanable.dirty.ratio").unwrap();
        assert_eq!(normalize_value(r, "1").unwrap(), "1.0");
        assert!(normalize_value(r, "1.5").is_err());
    }
}
