//! Config definitions: name, Kafka type, default as Kafka prints it,
//! validation and a one-line doc, for every broker and topic key kshard
//! knows. DescribeConfigs answers are built from these tables.

use super::kafka_keys::KAFKA_BROKER_DEFS;
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
    /// `*` or `[partitionId]:[brokerId],...` (Kafka's
    /// ThrottledReplicaListValidator, the `*.replication.throttled.replicas`
    /// topic keys).
    ThrottledReplicaList,
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
const COMPRESSION_TYPES: &[&str] = &["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"];
const TIMESTAMP_TYPES: &[&str] = &["CreateTime", "LogAppendTime"];
const CLEANUP_POLICIES: &[&str] = &["compact", "delete"];

pub(super) const fn def(
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

/// kshard's own broker keys and the two Kafka keys whose default kshard
/// changes (`listeners`, `log.dir`; see the module doc of `config`), sorted
/// by name. Every other broker key is Kafka's (`kafka_keys.rs`, generated
/// from Kafka 3.9.1's jars); `broker_def` looks here first.
#[rustfmt::skip]
pub static KSHARD_BROKER_DEFS: &[ConfigDef] = &[
    def("listeners", T::String, Some("PLAINTEXT://127.0.0.1:9092"), V::None, true, "Listener List - Comma-separated list of URIs we will listen on and the listener names. kshard's default is PLAINTEXT://127.0.0.1:9092 (Kafka's: PLAINTEXT://:9092)."),
    def("log.dir", T::String, Some("./data"), V::None, false, "The directory in which the log data is kept (supplemental for log.dirs property). kshard's default is ./data (Kafka's: /tmp/kafka-logs)."),
    def("log.io.mode", T::String, Some("buffered"), V::OneOf(&["direct", "buffered"]), false, "kshard: segment I/O through the page cache (buffered) or with O_DIRECT (direct)."),
    def("log.io.offload.writes", T::Boolean, Some("true"), V::None, false, "kshard: with log.io.mode=buffered, leaders' appends are written by io_uring off the shard's thread once the system's dirty pages pass half the background writeback threshold (true), so the kernel's dirty-page throttling never holds a shard; below it, and with false, they are written with pwrite on the shard's thread."),
    def("num.shards", T::Int, None, V::AtLeast(1), false, "kshard: shard executors; default the CPUs the process may use."),
    def("shard.core.offset", T::Int, Some("0"), V::AtLeast(0), false, "kshard: shard i is pinned to the (offset + i)-th CPU the process may use, wrapping around."),
    def("shard.core.pinning", T::Boolean, Some("true"), V::None, false, "kshard: pin each shard to its own CPU; false leaves placement to the kernel's scheduler (see tuning.md: a VM, or clients on the broker's cores)."),
    def("shard.stall.threshold.ms", T::Long, Some("10"), V::AtLeast(0), false, "kshard: a shard not polling for longer than this is a stall, logged with its stack and counted; 0 turns the detector off. The shards' preemption slice is half of it."),
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
    def("follower.replication.throttled.replicas", T::List, Some(""), V::ThrottledReplicaList, true, "Follower replicas to throttle."),
    def("index.interval.bytes", T::Int, Some("4096"), V::AtLeast(0), true, "Bytes between offset index entries."),
    def("leader.replication.throttled.replicas", T::List, Some(""), V::ThrottledReplicaList, true, "Leader replicas to throttle."),
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
    find(KSHARD_BROKER_DEFS, name).or_else(|| find(KAFKA_BROKER_DEFS, name))
}

/// Every broker key DescribeConfigs lists: Kafka's, with kshard's own
/// keys and default changes merged in, sorted by name.
pub fn broker_defs() -> Vec<&'static ConfigDef> {
    let mut all: Vec<&'static ConfigDef> = KSHARD_BROKER_DEFS.iter().collect();
    all.extend(
        KAFKA_BROKER_DEFS
            .iter()
            .filter(|d| find(KSHARD_BROKER_DEFS, d.name).is_none()),
    );
    all.sort_by_key(|d| d.name);
    all
}

pub fn topic_def(name: &str) -> Option<&'static ConfigDef> {
    find(TOPIC_DEFS, name)
}

/// Parses and validates `raw` against `def`, returning the value as Kafka
/// prints it (trimmed, booleans lower-case, lists joined by ","), or
/// Kafka's ConfigException (a list names the offending item, as ValidList
/// does).
pub fn normalize_value(def: &ConfigDef, raw: &str) -> Result<String, super::ConfigError> {
    normalize(def, raw).map_err(|invalid| {
        super::ConfigError::new(
            def.name,
            invalid.value.as_deref().unwrap_or(raw),
            invalid.reason,
        )
    })
}

/// Why a value is invalid; `value` when the offending part is not the
/// whole value (one item of a list).
struct Invalid {
    value: Option<String>,
    reason: String,
}

impl From<String> for Invalid {
    fn from(reason: String) -> Self {
        Invalid {
            value: None,
            reason,
        }
    }
}

fn normalize(def: &ConfigDef, raw: &str) -> Result<String, Invalid> {
    let value = raw.trim();
    let normalized = match def.config_type {
        T::Boolean => match value.to_ascii_lowercase().as_str() {
            "true" => "true".to_string(),
            "false" => "false".to_string(),
            _ => {
                return Err("Expected value to be either true or false"
                    .to_string()
                    .into())
            }
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
                return Err(integer_expectation(def.config_type).into());
            }
            check_integer(def.validator, parsed)?;
            parsed.to_string()
        }
        T::Double => {
            let parsed: f64 = value.parse().map_err(|_| {
                "Expected value to be a double, but it was a java.lang.String".to_string()
            })?;
            if !parsed.is_finite() {
                return Err("Expected value to be a finite double".to_string().into());
            }
            if let V::DoubleBetween(lo, hi) = def.validator {
                // Kafka's Range prints the parsed value and its bounds as
                // declared (`between(0, 1)`: integers).
                let reason = if parsed < lo {
                    format!("Value must be at least {lo}")
                } else if parsed > hi {
                    format!("Value must be no more than {hi}")
                } else {
                    String::new()
                };
                if !reason.is_empty() {
                    return Err(Invalid {
                        value: Some(java_double(parsed)),
                        reason,
                    });
                }
            }
            java_double(parsed)
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
                        return Err(Invalid {
                            value: Some(item.to_string()),
                            reason: format!("String must be one of: {}", allowed.join(", ")),
                        });
                    }
                }
            }
            if let V::ThrottledReplicaList = def.validator {
                check_throttled_replicas(def.name, &items)?;
            }
            items.join(",")
        }
        T::String | T::Class | T::Password | T::Unknown => {
            if let V::OneOf(allowed) = def.validator {
                if !allowed.contains(&value) {
                    return Err(format!("String must be one of: {}", allowed.join(", ")).into());
                }
            }
            value.to_string()
        }
    };
    Ok(normalized)
}

/// Kafka's ThrottledReplicaListValidator.ensureValid on the parsed list:
/// every item `[0-9]+:[0-9]+` or empty, or the items joined are `*`. The
/// ConfigException names the list as Java prints it (`[a, b]`).
fn check_throttled_replicas(name: &str, items: &[&str]) -> Result<(), Invalid> {
    let replica = |item: &&str| {
        item.is_empty()
            || item.split_once(':').is_some_and(|(p, b)| {
                let digits = |s: &str| !s.is_empty() && s.bytes().all(|c| c.is_ascii_digit());
                digits(p) && digits(b)
            })
    };
    if items.iter().all(replica) || items.concat() == "*" {
        return Ok(());
    }
    Err(Invalid {
        value: Some(format!("[{}]", items.join(", "))),
        reason: format!(
            "{name} must be the literal '*' or a list of replicas in the following format: \
             [partitionId]:[brokerId],[partitionId]:[brokerId],..."
        ),
    })
}

/// A double as Java's Double.toString prints it (ConfigDef.convertToString):
/// plain between 10^-3 and 10^7, else "d.dddE<exp>".
pub fn java_double(value: f64) -> String {
    let magnitude = value.abs();
    if magnitude == 0.0 || (1e-3..1e7).contains(&magnitude) {
        return format!("{value:?}");
    }
    let sci = format!("{value:e}");
    let (mantissa, exponent) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    if mantissa.contains('.') {
        format!("{mantissa}E{exponent}")
    } else {
        format!("{mantissa}.0E{exponent}")
    }
}

fn integer_expectation(config_type: ConfigType) -> String {
    format!("Not a number of type {}", type_name(config_type))
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
    synonyms_of(cfg, name, names)
}

fn synonyms_of(
    cfg: &BrokerConfig,
    name: &str,
    names: &[&str],
) -> Vec<(String, Option<String>, i8)> {
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

/// Kafka's ListenerMechanismConfigs: set per listener and SASL mechanism.
const LISTENER_MECHANISM_CONFIGS: &[&str] = &[
    "sasl.jaas.config",
    "sasl.login.callback.handler.class",
    "sasl.login.class",
    "sasl.server.callback.handler.class",
];

/// The broker key a `listener.name.<listener>.[<mechanism>.]<key>`
/// override stands for (DynamicBrokerConfig.brokerConfigSynonyms).
pub fn listener_override_base(name: &str) -> Option<&'static ConfigDef> {
    let rest = name.strip_prefix("listener.name.")?;
    let (_, base) = rest.split_once('.')?;
    let mechanism_key = LISTENER_MECHANISM_CONFIGS
        .iter()
        .find(|k| base.ends_with(&format!(".{k}")));
    broker_def(mechanism_key.copied().unwrap_or(base))
}

/// A static synonym's value: the string as configured (Kafka's
/// staticBrokerConfigs), null for passwords.
fn display_value(def: Option<&ConfigDef>, raw: &str) -> Option<String> {
    match def {
        Some(d) if d.config_type == T::Password => None,
        _ => Some(raw.to_string()),
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

/// Every broker key (Kafka's and kshard's, then unknown keys from the
/// file) with value, source and synonyms, as Kafka's DescribeConfigs for
/// this broker's id (ConfigHelper.createBrokerConfigEntry), for a broker
/// with no dynamic configs.
pub fn broker_config_entries(cfg: &BrokerConfig) -> Vec<ConfigEntry> {
    let state = super::dynamic::BrokerConfigState::from_static(std::sync::Arc::new(cfg.clone()));
    super::dynamic::broker_entries(&state)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_sorted_and_unique() {
        for defs in [KSHARD_BROKER_DEFS, KAFKA_BROKER_DEFS, TOPIC_DEFS] {
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
        for d in broker_defs().into_iter().chain(TOPIC_DEFS) {
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
            normalize_value(seg, "13").unwrap_err().message,
            "Value must be at least 14"
        );
        assert_eq!(
            normalize_value(seg, "x").unwrap_err().to_string(),
            "Invalid value x for configuration segment.bytes: Not a number of type INT"
        );
        let policy = topic_def("cleanup.policy").unwrap();
        assert_eq!(
            normalize_value(policy, "delete,bogus").unwrap_err().to_string(),
            "Invalid value bogus for configuration cleanup.policy: String must be one of: compact, delete"
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
