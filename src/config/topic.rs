//! Topic-level configs (Kafka's LogConfig): validation of per-topic
//! overrides, defaults taken from the broker's `log.*` synonyms, and the
//! DescribeConfigs view of a topic.

use std::collections::BTreeMap;

use super::defs::{
    self, ConfigEntry, ConfigType, SOURCE_DEFAULT_CONFIG, SOURCE_TOPIC_CONFIG, TOPIC_DEFS,
};
use super::dynamic::{self, BrokerConfigState};
use super::{BrokerConfig, ConfigError};

/// Kafka's ServerTopicConfigSynonyms: the broker key that supplies a topic
/// key's default.
pub fn broker_synonym(topic_key: &str) -> Option<&'static str> {
    Some(match topic_key {
        "segment.bytes" => "log.segment.bytes",
        "segment.ms" => "log.roll.ms",
        "segment.jitter.ms" => "log.roll.jitter.ms",
        "segment.index.bytes" => "log.index.size.max.bytes",
        "flush.messages" => "log.flush.interval.messages",
        "flush.ms" => "log.flush.interval.ms",
        "retention.bytes" => "log.retention.bytes",
        "retention.ms" => "log.retention.ms",
        "max.message.bytes" => "message.max.bytes",
        "index.interval.bytes" => "log.index.interval.bytes",
        "delete.retention.ms" => "log.cleaner.delete.retention.ms",
        "min.compaction.lag.ms" => "log.cleaner.min.compaction.lag.ms",
        "max.compaction.lag.ms" => "log.cleaner.max.compaction.lag.ms",
        "file.delete.delay.ms" => "log.segment.delete.delay.ms",
        "min.cleanable.dirty.ratio" => "log.cleaner.min.cleanable.ratio",
        "cleanup.policy" => "log.cleanup.policy",
        "unclean.leader.election.enable" => "unclean.leader.election.enable",
        "min.insync.replicas" => "min.insync.replicas",
        "compression.type" => "compression.type",
        "compression.gzip.level" => "compression.gzip.level",
        "compression.lz4.level" => "compression.lz4.level",
        "compression.zstd.level" => "compression.zstd.level",
        "preallocate" => "log.preallocate",
        "message.format.version" => "log.message.format.version",
        "message.timestamp.type" => "log.message.timestamp.type",
        "message.timestamp.difference.max.ms" => "log.message.timestamp.difference.max.ms",
        "message.timestamp.before.max.ms" => "log.message.timestamp.before.max.ms",
        "message.timestamp.after.max.ms" => "log.message.timestamp.after.max.ms",
        "message.downconversion.enable" => "log.message.downconversion.enable",
        "local.retention.ms" => "log.local.retention.ms",
        "local.retention.bytes" => "log.local.retention.bytes",
        _ => return None,
    })
}

/// `leader.replication.throttled.replicas` and
/// `follower.replication.throttled.replicas`, parsed as Kafka's
/// TopicConfigHandler.parseThrottledPartitions does before it marks the
/// topic throttled on the ReplicationQuotaManager: `*` throttles every
/// replica of the topic, a list `partition:broker,...` the partitions
/// listed with a broker's own id on that broker. kshard keeps the whole
/// list and filters by broker id when asked (`is_throttled`), so the
/// topic's config on each partition is Kafka's throttled-partition map.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ThrottledReplicas {
    /// Unset or empty: nothing throttled.
    #[default]
    None,
    /// `*`: every replica on every broker.
    All,
    /// (partition, broker) pairs.
    Listed(Vec<(i32, i32)>),
}

impl ThrottledReplicas {
    /// Parses a stored value (validated by ThrottledReplicaListValidator
    /// when it was written). Items that are not `partition:broker` in the
    /// int range are skipped (Kafka's handler throws on them).
    pub fn parse(value: &str) -> ThrottledReplicas {
        let value = value.trim();
        match value {
            "" => ThrottledReplicas::None,
            "*" => ThrottledReplicas::All,
            _ => ThrottledReplicas::Listed(
                value
                    .split(',')
                    .filter_map(|item| {
                        let (p, b) = item.trim().split_once(':')?;
                        Some((p.trim().parse().ok()?, b.trim().parse().ok()?))
                    })
                    .collect(),
            ),
        }
    }

    /// Kafka's ReplicationQuotaManager.isThrottled for partition
    /// `partition` of this topic on broker `broker_id`.
    #[inline]
    pub fn is_throttled(&self, partition: i32, broker_id: i32) -> bool {
        match self {
            ThrottledReplicas::None => false,
            ThrottledReplicas::All => true,
            ThrottledReplicas::Listed(pairs) => pairs.contains(&(partition, broker_id)),
        }
    }
}

/// A topic's effective configuration (overrides over broker defaults).
#[derive(Debug, Clone, PartialEq)]
pub struct TopicConfig {
    pub cleanup_policy: Vec<String>,
    pub compression_type: String,
    pub compression_gzip_level: i32,
    pub compression_lz4_level: i32,
    pub compression_zstd_level: i32,
    pub delete_retention_ms: i64,
    pub file_delete_delay_ms: i64,
    pub flush_messages: i64,
    pub flush_ms: i64,
    pub index_interval_bytes: i32,
    pub max_message_bytes: i32,
    pub message_timestamp_type: String,
    pub message_timestamp_before_max_ms: i64,
    pub message_timestamp_after_max_ms: i64,
    pub min_cleanable_dirty_ratio: f64,
    pub min_compaction_lag_ms: i64,
    pub max_compaction_lag_ms: i64,
    pub min_insync_replicas: i32,
    pub preallocate: bool,
    /// -1 unlimited.
    pub retention_bytes: i64,
    /// -1 unlimited.
    pub retention_ms: i64,
    pub segment_bytes: i32,
    pub segment_index_bytes: i32,
    pub segment_jitter_ms: i64,
    pub segment_ms: i64,
    pub unclean_leader_election_enable: bool,
    pub message_downconversion_enable: bool,
    pub local_retention_ms: i64,
    pub local_retention_bytes: i64,
    /// The replicas a leader on this broker throttles (replication quotas).
    pub leader_replication_throttled_replicas: ThrottledReplicas,
    /// The replicas a follower on this broker throttles.
    pub follower_replication_throttled_replicas: ThrottledReplicas,
    /// The validated overrides, normalized as Kafka prints them; this is
    /// what goes into `/config/topics/<t>`.
    pub overrides: BTreeMap<String, String>,
}

impl TopicConfig {
    /// Validates `overrides` (unknown keys are errors, as CreateTopics
    /// answers INVALID_CONFIG) and resolves every key.
    pub fn from_overrides(
        broker: &BrokerConfig,
        overrides: &BTreeMap<String, String>,
    ) -> Result<TopicConfig, ConfigError> {
        let normalized = validate_overrides(overrides)?;
        let mut values = defaults(broker);
        for (k, v) in &normalized {
            values.insert(k.clone(), v.clone());
        }
        let get = |k: &str| -> &str {
            debug_assert!(defs::topic_def(k).is_some(), "unknown topic key {k}");
            values.get(k).map_or("", String::as_str)
        };
        let long = |k: &str| get(k).parse::<i64>().unwrap_or(0);
        let int = |k: &str| get(k).parse::<i32>().unwrap_or(0);
        let boolean = |k: &str| get(k) == "true";
        let cfg = TopicConfig {
            cleanup_policy: get("cleanup.policy")
                .split(',')
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect(),
            compression_type: get("compression.type").to_string(),
            compression_gzip_level: int("compression.gzip.level"),
            compression_lz4_level: int("compression.lz4.level"),
            compression_zstd_level: int("compression.zstd.level"),
            delete_retention_ms: long("delete.retention.ms"),
            file_delete_delay_ms: long("file.delete.delay.ms"),
            flush_messages: long("flush.messages"),
            flush_ms: long("flush.ms"),
            index_interval_bytes: int("index.interval.bytes"),
            max_message_bytes: int("max.message.bytes"),
            message_timestamp_type: get("message.timestamp.type").to_string(),
            message_timestamp_before_max_ms: long("message.timestamp.before.max.ms"),
            message_timestamp_after_max_ms: long("message.timestamp.after.max.ms"),
            min_cleanable_dirty_ratio: get("min.cleanable.dirty.ratio").parse().unwrap_or(0.5),
            min_compaction_lag_ms: long("min.compaction.lag.ms"),
            max_compaction_lag_ms: long("max.compaction.lag.ms"),
            min_insync_replicas: int("min.insync.replicas"),
            preallocate: boolean("preallocate"),
            retention_bytes: long("retention.bytes"),
            retention_ms: long("retention.ms"),
            segment_bytes: int("segment.bytes"),
            segment_index_bytes: int("segment.index.bytes"),
            segment_jitter_ms: long("segment.jitter.ms"),
            segment_ms: long("segment.ms"),
            unclean_leader_election_enable: boolean("unclean.leader.election.enable"),
            message_downconversion_enable: boolean("message.downconversion.enable"),
            local_retention_ms: long("local.retention.ms"),
            local_retention_bytes: long("local.retention.bytes"),
            leader_replication_throttled_replicas: ThrottledReplicas::parse(get(
                "leader.replication.throttled.replicas",
            )),
            follower_replication_throttled_replicas: ThrottledReplicas::parse(get(
                "follower.replication.throttled.replicas",
            )),
            overrides: normalized,
        };
        if cfg.min_compaction_lag_ms > cfg.max_compaction_lag_ms {
            return Err(ConfigError::new(
                "min.compaction.lag.ms",
                &cfg.min_compaction_lag_ms.to_string(),
                format!(
                    "conflict topic config setting min.compaction.lag.ms ({}) > max.compaction.lag.ms ({})",
                    cfg.min_compaction_lag_ms, cfg.max_compaction_lag_ms
                ),
            ));
        }
        Ok(cfg)
    }

    pub fn is_compacted(&self) -> bool {
        self.cleanup_policy.iter().any(|p| p == "compact")
    }

    pub fn is_delete(&self) -> bool {
        self.cleanup_policy.iter().any(|p| p == "delete")
    }
}

/// Checks each override's key and value; returns them normalized.
pub fn validate_overrides(
    overrides: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>, ConfigError> {
    let mut out = BTreeMap::new();
    for (key, value) in overrides {
        let Some(def) = defs::topic_def(key) else {
            return Err(ConfigError::unknown_key(
                key,
                value,
                format!("Unknown topic config name: {key}"),
            ));
        };
        let shown = defs::normalize_value(def, value)?;
        if key == "remote.storage.enable" && shown == "true" {
            return Err(ConfigError::new(
                key,
                value,
                "Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage.",
            ));
        }
        out.insert(key.clone(), shown);
    }
    Ok(out)
}

/// The default of every topic key on this broker, as Kafka prints it.
fn defaults(broker: &BrokerConfig) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for d in TOPIC_DEFS {
        let value = match d.name {
            // Derived broker values already apply ms/minutes/hours precedence.
            "retention.ms" => Some(broker.log_retention_ms.to_string()),
            "segment.ms" => Some(broker.log_roll_ms.to_string()),
            "segment.jitter.ms" => Some(broker.log_roll_jitter_ms.to_string()),
            "flush.ms" => Some(broker.log_flush_interval_ms.to_string()),
            _ => broker_synonym(d.name).and_then(|b| broker_value(broker, b)),
        };
        let value = value
            .or_else(|| d.default.map(str::to_string))
            .unwrap_or_default();
        out.insert(d.name.to_string(), value);
    }
    out
}

fn broker_value(broker: &BrokerConfig, key: &str) -> Option<String> {
    let def = defs::broker_def(key)?;
    match broker.originals().get(key) {
        Some(raw) => defs::normalize_value(def, raw).ok(),
        None => def.default.map(str::to_string),
    }
}

/// Every topic key with value, source and synonyms, as Kafka's
/// DescribeConfigs for a topic. `overrides` are the stored topic configs;
/// defaults and broker synonyms come from the live broker config.
pub fn topic_config_entries(
    broker: &BrokerConfigState,
    overrides: &BTreeMap<String, String>,
) -> Vec<ConfigEntry> {
    let mut values = defaults(&broker.effective);
    let mut normalized = BTreeMap::new();
    for (k, v) in overrides {
        // Stored overrides were validated on write; show them as stored if not.
        let shown = defs::topic_def(k)
            .and_then(|d| defs::normalize_value(d, v).ok())
            .unwrap_or_else(|| v.clone());
        normalized.insert(k.clone(), shown.clone());
        values.insert(k.clone(), shown);
    }
    let mut entries = Vec::with_capacity(TOPIC_DEFS.len());
    for d in TOPIC_DEFS {
        let sensitive = d.config_type == ConfigType::Password;
        let value = if sensitive {
            None
        } else {
            values.get(d.name).cloned()
        };
        let mut synonyms = Vec::new();
        if let Some(v) = normalized.get(d.name) {
            let shown = if sensitive { None } else { Some(v.clone()) };
            synonyms.push((d.name.to_string(), shown, SOURCE_TOPIC_CONFIG));
        }
        if let Some(b) = broker_synonym(d.name) {
            synonyms.extend(dynamic::broker_synonyms_of(broker, b));
        }
        let source = synonyms.first().map_or(SOURCE_DEFAULT_CONFIG, |s| s.2);
        entries.push(ConfigEntry {
            name: d.name.to_string(),
            value,
            read_only: false,
            source,
            is_sensitive: sensitive,
            synonyms,
            config_type: d.config_type as i8,
            documentation: Some(d.doc.to_string()),
        });
    }
    entries
}
