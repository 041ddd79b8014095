//! Broker configuration: Kafka's `server.properties` keys, defaults and
//! precedence rules (Kafka 3.9), plus kshard's own keys (`num.shards`,
//! `log.io.mode`, `log.io.offload.writes`, `shard.core.offset`, `shard.core.pinning`, `shard.stall.threshold.ms`). Topic-level configs live in `topic`.
//!
//! kshard departs from Kafka's defaults in three places so that `kshard`
//! with no arguments is a working single-node broker: `listeners` defaults
//! to `PLAINTEXT://127.0.0.1:9092` (Kafka: `PLAINTEXT://:9092`), `log.dir`
//! to `./data` (Kafka: `/tmp/kafka-logs`), and `broker.id = -1` (Kafka's
//! "generate") means id 0 on the embedded store (see `effective_broker_id`).

pub mod alter_ops;
pub mod defs;
pub mod dynamic;
pub mod kafka_keys;
pub mod properties;
pub mod support;
pub mod topic;

mod listeners;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

pub use defs::{broker_config_entries, ConfigEntry, ConfigType};
pub use listeners::{
    canonical_hostname, is_listener_override, parse_listeners, sasl_mechanisms_of, Endpoint,
    SERVED_SASL_MECHANISMS,
};
pub use topic::{topic_config_entries, ThrottledReplicas, TopicConfig};

/// An invalid configuration value; Display names the key, like Kafka's
/// ConfigException: "Invalid value X for configuration K: reason".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub key: String,
    pub value: String,
    pub message: String,
    /// False for errors Kafka raises as InvalidConfigurationException
    /// (an unknown key), whose text is the message alone.
    pub names_value: bool,
}

impl ConfigError {
    pub fn new(key: &str, value: &str, message: impl Into<String>) -> Self {
        ConfigError {
            key: key.to_string(),
            value: value.to_string(),
            message: message.into(),
            names_value: true,
        }
    }

    /// A key Kafka does not know for this resource.
    pub fn unknown_key(key: &str, value: &str, message: impl Into<String>) -> Self {
        ConfigError {
            names_value: false,
            ..ConfigError::new(key, value, message)
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.names_value {
            return f.write_str(&self.message);
        }
        write!(
            f,
            "Invalid value {} for configuration {}: {}",
            self.value, self.key, self.message
        )
    }
}

impl std::error::Error for ConfigError {}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogIoMode {
    /// Page-cache file I/O.
    Buffered,
    /// O_DIRECT DMA files with aligned buffers.
    Direct,
}

/// The broker's typed configuration. Every field uses Kafka's key name
/// with dots turned into underscores; derived values (`log_retention_ms`,
/// `log_roll_ms`, `log_flush_interval_ms`, `log_dirs`) already apply
/// Kafka's precedence rules.
#[derive(Debug, Clone)]
pub struct BrokerConfig {
    /// As configured; -1 means "generate" (see `effective_broker_id`).
    pub broker_id: i32,
    pub broker_id_generation_enable: bool,
    pub reserved_broker_max_id: i32,
    pub broker_rack: Option<String>,
    pub listeners: Vec<Endpoint>,
    /// `advertised.listeners`, else `listeners`; an empty host is replaced
    /// by the canonical host name, as Kafka registers it.
    pub advertised_listeners: Vec<Endpoint>,
    pub listener_security_protocol_map: BTreeMap<String, String>,
    pub inter_broker_listener_name: String,
    pub log_dirs: Vec<PathBuf>,
    pub num_partitions: i32,
    pub default_replication_factor: i32,
    pub auto_create_topics_enable: bool,
    pub delete_topic_enable: bool,
    pub log_segment_bytes: i32,
    pub log_roll_ms: i64,
    pub log_roll_jitter_ms: i64,
    /// -1 (or any negative) means unlimited.
    pub log_retention_ms: i64,
    pub log_retention_bytes: i64,
    pub log_retention_check_interval_ms: i64,
    pub log_segment_delete_delay_ms: i64,
    pub log_index_interval_bytes: i32,
    pub log_index_size_max_bytes: i32,
    pub log_flush_interval_messages: i64,
    pub log_flush_interval_ms: i64,
    pub log_flush_scheduler_interval_ms: i64,
    pub log_flush_offset_checkpoint_interval_ms: i32,
    pub log_flush_start_offset_checkpoint_interval_ms: i32,
    pub log_preallocate: bool,
    pub log_cleanup_policy: Vec<String>,
    pub log_cleaner_enable: bool,
    pub log_cleaner_backoff_ms: i64,
    pub log_cleaner_delete_retention_ms: i64,
    pub log_cleaner_min_compaction_lag_ms: i64,
    pub log_cleaner_max_compaction_lag_ms: i64,
    pub log_cleaner_min_cleanable_ratio: f64,
    pub log_message_timestamp_type: String,
    pub log_message_timestamp_before_max_ms: i64,
    pub log_message_timestamp_after_max_ms: i64,
    pub message_max_bytes: i32,
    pub socket_request_max_bytes: i32,
    pub socket_send_buffer_bytes: i32,
    pub socket_receive_buffer_bytes: i32,
    pub socket_listen_backlog_size: i32,
    /// Accepted for compatibility; kshard has no such thread pools.
    pub num_network_threads: i32,
    pub num_io_threads: i32,
    pub num_recovery_threads_per_data_dir: i32,
    pub min_insync_replicas: i32,
    pub unclean_leader_election_enable: bool,
    pub auto_leader_rebalance_enable: bool,
    pub leader_imbalance_check_interval_seconds: i64,
    pub leader_imbalance_per_broker_percentage: i32,
    pub controlled_shutdown_enable: bool,
    pub controlled_shutdown_max_retries: i32,
    pub controlled_shutdown_retry_backoff_ms: i64,
    pub controller_socket_timeout_ms: i32,
    pub replica_high_watermark_checkpoint_interval_ms: i64,
    pub compression_type: String,
    pub offsets_topic_num_partitions: i32,
    pub offsets_topic_replication_factor: i16,
    pub offsets_topic_segment_bytes: i32,
    pub offsets_retention_minutes: i32,
    pub offsets_retention_check_interval_ms: i64,
    pub offsets_commit_timeout_ms: i32,
    pub offsets_commit_required_acks: i16,
    pub transaction_state_log_num_partitions: i32,
    pub transaction_state_log_replication_factor: i16,
    pub transaction_state_log_min_isr: i32,
    pub transaction_state_log_segment_bytes: i32,
    pub transaction_max_timeout_ms: i32,
    pub transactional_id_expiration_ms: i32,
    pub transaction_abort_timed_out_transaction_cleanup_interval_ms: i32,
    pub transaction_remove_expired_transaction_cleanup_interval_ms: i32,
    pub request_timeout_ms: i32,
    pub transaction_partition_verification_enable: bool,
    pub group_initial_rebalance_delay_ms: i32,
    pub group_min_session_timeout_ms: i32,
    pub group_max_session_timeout_ms: i32,
    pub group_max_size: i32,
    /// None → the embedded metadata store.
    pub zookeeper_connect: Option<String>,
    pub zookeeper_session_timeout_ms: i32,
    /// `zookeeper.connection.timeout.ms`, else the session timeout (Kafka).
    pub zookeeper_connection_timeout_ms: i32,
    pub replica_lag_time_max_ms: i64,
    pub replica_fetch_max_bytes: i32,
    pub replica_fetch_wait_max_ms: i32,
    pub num_replica_fetchers: i32,
    pub connections_max_idle_ms: i64,
    pub producer_id_expiration_ms: i32,
    pub fetch_max_bytes: i32,
    pub max_connections: i32,
    pub queued_max_requests: i32,
    /// As configured; -1 (or 0) means kshard's own bound (see
    /// `server::request_memory::queued_max_request_bytes`).
    pub queued_max_request_bytes: i64,
    pub num_shards: usize,
    /// What `num.shards` would be if unset (CPUs the process may use).
    pub default_num_shards: usize,
    pub log_io_mode: LogIoMode,
    /// Buffered mode: leaders' appends written by io_uring off the shard.
    pub log_io_offload_writes: bool,
    pub shard_core_offset: usize,
    /// Each shard pinned to its own CPU (`shard.core.offset` onwards).
    pub shard_core_pinning: bool,
    /// A shard not polling for longer is a stall; 0: no detector.
    pub shard_stall_threshold_ms: u64,
    /// Keys not known to kshard, for the caller to warn about.
    pub unknown_keys: Vec<String>,
    originals: BTreeMap<String, String>,
}

/// `parse_args` result: the config file, if any, and the overrides in order.
pub type ParsedArgs = (Option<PathBuf>, Vec<(String, String)>);

/// Usage text for `parse_args` errors and `--help`.
pub const USAGE: &str = "usage: kshard [--config FILE | FILE] [--override key=value ...]";

/// Parses `kshard [--config FILE] [--override key=value ...]`, also
/// accepting a positional FILE as kafka-server-start does. `args` excludes
/// the program name. `--help`/`-h` returns Err(USAGE).
pub fn parse_args(mut args: impl Iterator<Item = String>) -> Result<ParsedArgs, String> {
    let mut config_path: Option<PathBuf> = None;
    let mut overrides = Vec::new();
    let set_path = |path: String, slot: &mut Option<PathBuf>| -> Result<(), String> {
        if slot.is_some() {
            return Err(format!("more than one config file given\n{USAGE}"));
        }
        *slot = Some(PathBuf::from(path));
        Ok(())
    };
    while let Some(arg) = args.next() {
        if arg == "--help" || arg == "-h" {
            return Err(USAGE.to_string());
        } else if arg == "--config" || arg == "-c" {
            let path = args
                .next()
                .ok_or_else(|| format!("--config needs a file\n{USAGE}"))?;
            set_path(path, &mut config_path)?;
        } else if let Some(path) = arg.strip_prefix("--config=") {
            set_path(path.to_string(), &mut config_path)?;
        } else if arg == "--override" {
            let pair = args
                .next()
                .ok_or_else(|| format!("--override needs key=value\n{USAGE}"))?;
            overrides.push(split_override(&pair)?);
        } else if let Some(pair) = arg.strip_prefix("--override=") {
            overrides.push(split_override(pair)?);
        } else if arg.starts_with('-') {
            return Err(format!("unknown option {arg}\n{USAGE}"));
        } else {
            set_path(arg, &mut config_path)?;
        }
    }
    Ok((config_path, overrides))
}

fn split_override(pair: &str) -> Result<(String, String), String> {
    match pair.split_once('=') {
        Some((key, value)) if !key.trim().is_empty() => {
            Ok((key.trim().to_string(), value.to_string()))
        }
        _ => Err(format!(
            "--override expects key=value, got '{pair}'\n{USAGE}"
        )),
    }
}

/// CPUs this process may run on (affinity mask aware).
pub fn available_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Kafka's KafkaConfig.populateSynonyms: `broker.id` and `node.id` name
/// the same id, so when only one is set the other is set to it.
fn populate_synonyms(map: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    let mut out = map.clone();
    match (map.get("broker.id"), map.get("node.id")) {
        (None, Some(id)) => out.insert("broker.id".to_string(), id.clone()),
        (Some(id), None) => out.insert("node.id".to_string(), id.clone()),
        _ => None,
    };
    out
}

/// Parsed, validated values of known keys, with table defaults.
struct Values {
    normalized: BTreeMap<&'static str, String>,
}

impl Values {
    fn raw(&self, name: &str) -> Option<&str> {
        debug_assert!(defs::broker_def(name).is_some(), "unknown key {name}");
        match self.normalized.get(name) {
            Some(v) => Some(v.as_str()),
            None => defs::broker_def(name).and_then(|d| d.default),
        }
    }
    fn is_set(&self, name: &str) -> bool {
        self.normalized.contains_key(name)
    }
    fn i64_opt(&self, name: &str) -> Option<i64> {
        // Values were validated as integers when normalized.
        self.raw(name).and_then(|v| v.parse().ok())
    }
    fn i64(&self, name: &str) -> i64 {
        self.i64_opt(name).unwrap_or(0)
    }
    fn i32(&self, name: &str) -> i32 {
        self.i64(name) as i32
    }
    fn bool(&self, name: &str) -> bool {
        self.raw(name) == Some("true")
    }
    fn string(&self, name: &str) -> String {
        self.raw(name).unwrap_or("").to_string()
    }
    fn string_opt(&self, name: &str) -> Option<String> {
        self.raw(name).map(str::to_string)
    }
}

impl BrokerConfig {
    /// The socket options every listener applies (Kafka's `Acceptor`).
    pub fn listener_socket_settings(&self) -> crate::util::tcp_socket::ListenerSocketSettings {
        crate::util::tcp_socket::ListenerSocketSettings {
            receive_buffer_bytes: self.socket_receive_buffer_bytes,
            send_buffer_bytes: self.socket_send_buffer_bytes,
            listen_backlog: self.socket_listen_backlog_size,
        }
    }

    /// Reads the properties file (if any), applies `overrides` on top and
    /// validates the result.
    pub fn load(
        config_path: Option<&Path>,
        overrides: &[(String, String)],
    ) -> Result<BrokerConfig, ConfigError> {
        let mut map = BTreeMap::new();
        if let Some(path) = config_path {
            let shown = path.display().to_string();
            let text = std::fs::read_to_string(path)
                .map_err(|e| ConfigError::new("config", &shown, format!("cannot read: {e}")))?;
            map = properties::parse_properties(&text)
                .map_err(|e| ConfigError::new("config", &shown, e.to_string()))?;
        }
        for (key, value) in overrides {
            map.insert(key.clone(), value.clone());
        }
        Self::from_map(&map)
    }

    /// Validates a key/value map (file contents plus overrides).
    pub fn from_map(map: &BTreeMap<String, String>) -> Result<BrokerConfig, ConfigError> {
        let map = &populate_synonyms(map);
        let mut normalized = BTreeMap::new();
        let mut unknown_keys = Vec::new();
        for (key, value) in map {
            match defs::broker_def(key) {
                Some(def) => {
                    let shown = defs::normalize_value(def, value)?;
                    normalized.insert(def.name, shown);
                }
                None => unknown_keys.push(key.clone()),
            }
        }
        support::check_refused(map)?;
        let v = Values { normalized };
        let default_num_shards = available_cpus();
        Self::build(&v, map.clone(), unknown_keys, default_num_shards)
    }

    fn build(
        v: &Values,
        originals: BTreeMap<String, String>,
        unknown_keys: Vec<String>,
        default_num_shards: usize,
    ) -> Result<BrokerConfig, ConfigError> {
        let broker_id = v.i32("broker.id");
        let generation = v.bool("broker.id.generation.enable");
        let reserved_max = v.i32("reserved.broker.max.id");
        if (generation && (broker_id < -1 || broker_id > reserved_max))
            || (!generation && broker_id < 0)
        {
            return Err(ConfigError::new(
                "broker.id",
                &broker_id.to_string(),
                format!(
                    "broker.id must be greater than or equal to -1 and not greater than reserved.broker.max.id ({reserved_max})"
                ),
            ));
        }

        let protocol_map =
            listeners::parse_protocol_map(&v.string("listener.security.protocol.map"))?;
        let listeners_value = v.string("listeners");
        let listeners = parse_listeners("listeners", &listeners_value, &protocol_map)?;
        listeners::check_unique("listeners", &listeners_value, &listeners, true)?;
        let advertised = match v.string_opt("advertised.listeners") {
            Some(text) => {
                let eps = parse_listeners("advertised.listeners", &text, &protocol_map)?;
                listeners::check_unique("advertised.listeners", &text, &eps, false)?;
                for ep in &eps {
                    if ep.host == "0.0.0.0" {
                        return Err(ConfigError::new(
                            "advertised.listeners",
                            &text,
                            "advertised.listeners cannot use the nonroutable meta-address 0.0.0.0. Use a routable IP address.",
                        ));
                    }
                }
                eps
            }
            None => listeners.clone(),
        };
        let advertised_listeners = listeners::fill_empty_hosts(advertised);
        let inter_broker_listener_name = listeners::inter_broker_listener(
            v.string_opt("inter.broker.listener.name"),
            v.is_set("security.inter.broker.protocol"),
            &v.string("security.inter.broker.protocol"),
            &advertised_listeners,
        )?;
        listeners::check_sasl_mechanisms(&originals, &listeners)?;
        let inter_broker_protocol = protocol_map
            .get(&inter_broker_listener_name)
            .map_or("PLAINTEXT", String::as_str);
        let inter_broker_mechanism = v.string("sasl.mechanism.inter.broker.protocol");
        if inter_broker_protocol.starts_with("SASL_")
            && !sasl_mechanisms_of(&originals, &inter_broker_listener_name)
                .contains(&inter_broker_mechanism)
        {
            return Err(ConfigError::new(
                "sasl.mechanism.inter.broker.protocol",
                &inter_broker_mechanism,
                "sasl.mechanism.inter.broker.protocol must be included in sasl.enabled.mechanisms when SASL is used for inter-broker communication",
            ));
        }

        let log_dirs_text = v
            .string_opt("log.dirs")
            .unwrap_or_else(|| v.string("log.dir"));
        let log_dirs: Vec<PathBuf> = log_dirs_text
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(PathBuf::from)
            .collect();
        if log_dirs.is_empty() {
            let key = if v.is_set("log.dirs") {
                "log.dirs"
            } else {
                "log.dir"
            };
            return Err(ConfigError::new(
                key,
                &log_dirs_text,
                "At least one log directory must be defined",
            ));
        }

        // Kafka: ms wins over minutes wins over hours; negative means unlimited.
        let log_retention_ms = match (
            v.i64_opt("log.retention.ms"),
            v.i64_opt("log.retention.minutes"),
        ) {
            (Some(ms), _) => ms,
            (None, Some(minutes)) => minutes.saturating_mul(60_000),
            (None, None) => v.i64("log.retention.hours").saturating_mul(3_600_000),
        };
        let log_retention_ms = if log_retention_ms < 0 {
            -1
        } else {
            log_retention_ms
        };
        let log_roll_ms = v
            .i64_opt("log.roll.ms")
            .unwrap_or_else(|| v.i64("log.roll.hours").saturating_mul(3_600_000));
        let log_roll_jitter_ms = v
            .i64_opt("log.roll.jitter.ms")
            .unwrap_or_else(|| v.i64("log.roll.jitter.hours").saturating_mul(3_600_000));
        let log_flush_scheduler_interval_ms = v.i64("log.flush.scheduler.interval.ms");
        let log_flush_interval_ms = v
            .i64_opt("log.flush.interval.ms")
            .unwrap_or(log_flush_scheduler_interval_ms);

        let num_shards = match v.i64_opt("num.shards") {
            Some(n) => usize::try_from(n).unwrap_or(1),
            None => default_num_shards,
        };
        debug_assert!(num_shards >= 1);
        let log_io_mode = if v.string("log.io.mode") == "direct" {
            LogIoMode::Direct
        } else {
            LogIoMode::Buffered
        };
        // Kafka's KafkaConfig.validateValues requirement.
        let queued_max_request_bytes = v.i64("queued.max.request.bytes");
        if queued_max_request_bytes > 0
            && queued_max_request_bytes < i64::from(v.i32("socket.request.max.bytes"))
        {
            return Err(ConfigError::new(
                "queued.max.request.bytes",
                &queued_max_request_bytes.to_string(),
                "queued.max.request.bytes must be larger or equal to socket.request.max.bytes",
            ));
        }
        let zookeeper_session_timeout_ms = v.i32("zookeeper.session.timeout.ms");
        let zookeeper_connect = v.string_opt("zookeeper.connect").filter(|s| !s.is_empty());

        Ok(BrokerConfig {
            broker_id,
            broker_id_generation_enable: generation,
            reserved_broker_max_id: reserved_max,
            broker_rack: v.string_opt("broker.rack"),
            listeners,
            advertised_listeners,
            listener_security_protocol_map: protocol_map,
            inter_broker_listener_name,
            log_dirs,
            num_partitions: v.i32("num.partitions"),
            default_replication_factor: v.i32("default.replication.factor"),
            auto_create_topics_enable: v.bool("auto.create.topics.enable"),
            delete_topic_enable: v.bool("delete.topic.enable"),
            log_segment_bytes: v.i32("log.segment.bytes"),
            log_roll_ms,
            log_roll_jitter_ms,
            log_retention_ms,
            log_retention_bytes: v.i64("log.retention.bytes"),
            log_retention_check_interval_ms: v.i64("log.retention.check.interval.ms"),
            log_segment_delete_delay_ms: v.i64("log.segment.delete.delay.ms"),
            log_index_interval_bytes: v.i32("log.index.interval.bytes"),
            log_index_size_max_bytes: v.i32("log.index.size.max.bytes"),
            log_flush_interval_messages: v.i64("log.flush.interval.messages"),
            log_flush_interval_ms,
            log_flush_scheduler_interval_ms,
            log_flush_offset_checkpoint_interval_ms: v
                .i32("log.flush.offset.checkpoint.interval.ms"),
            log_flush_start_offset_checkpoint_interval_ms: v
                .i32("log.flush.start.offset.checkpoint.interval.ms"),
            log_preallocate: v.bool("log.preallocate"),
            log_cleanup_policy: v
                .string("log.cleanup.policy")
                .split(',')
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect(),
            log_cleaner_enable: v.bool("log.cleaner.enable"),
            log_cleaner_backoff_ms: v.i64("log.cleaner.backoff.ms"),
            log_cleaner_delete_retention_ms: v.i64("log.cleaner.delete.retention.ms"),
            log_cleaner_min_compaction_lag_ms: v.i64("log.cleaner.min.compaction.lag.ms"),
            log_cleaner_max_compaction_lag_ms: v.i64("log.cleaner.max.compaction.lag.ms"),
            log_cleaner_min_cleanable_ratio: v
                .raw("log.cleaner.min.cleanable.ratio")
                .and_then(|s| s.parse().ok())
                .unwrap_or(0.5),
            log_message_timestamp_type: v.string("log.message.timestamp.type"),
            log_message_timestamp_before_max_ms: v.i64("log.message.timestamp.before.max.ms"),
            log_message_timestamp_after_max_ms: v.i64("log.message.timestamp.after.max.ms"),
            message_max_bytes: v.i32("message.max.bytes"),
            socket_request_max_bytes: v.i32("socket.request.max.bytes"),
            socket_send_buffer_bytes: v.i32("socket.send.buffer.bytes"),
            socket_receive_buffer_bytes: v.i32("socket.receive.buffer.bytes"),
            socket_listen_backlog_size: v.i32("socket.listen.backlog.size"),
            num_network_threads: v.i32("num.network.threads"),
            num_io_threads: v.i32("num.io.threads"),
            num_recovery_threads_per_data_dir: v.i32("num.recovery.threads.per.data.dir"),
            min_insync_replicas: v.i32("min.insync.replicas"),
            unclean_leader_election_enable: v.bool("unclean.leader.election.enable"),
            auto_leader_rebalance_enable: v.bool("auto.leader.rebalance.enable"),
            leader_imbalance_check_interval_seconds: v
                .i64("leader.imbalance.check.interval.seconds"),
            leader_imbalance_per_broker_percentage: v.i32("leader.imbalance.per.broker.percentage"),
            controlled_shutdown_enable: v.bool("controlled.shutdown.enable"),
            controlled_shutdown_max_retries: v.i32("controlled.shutdown.max.retries"),
            controlled_shutdown_retry_backoff_ms: v.i64("controlled.shutdown.retry.backoff.ms"),
            controller_socket_timeout_ms: v.i32("controller.socket.timeout.ms"),
            replica_high_watermark_checkpoint_interval_ms: v
                .i64("replica.high.watermark.checkpoint.interval.ms"),
            compression_type: v.string("compression.type"),
            offsets_topic_num_partitions: v.i32("offsets.topic.num.partitions"),
            offsets_topic_replication_factor: v.i64("offsets.topic.replication.factor") as i16,
            offsets_topic_segment_bytes: v.i32("offsets.topic.segment.bytes"),
            offsets_retention_minutes: v.i32("offsets.retention.minutes"),
            offsets_retention_check_interval_ms: v.i64("offsets.retention.check.interval.ms"),
            offsets_commit_timeout_ms: v.i32("offsets.commit.timeout.ms"),
            offsets_commit_required_acks: v.i64("offsets.commit.required.acks") as i16,
            transaction_state_log_num_partitions: v.i32("transaction.state.log.num.partitions"),
            transaction_state_log_replication_factor: v
                .i64("transaction.state.log.replication.factor")
                as i16,
            transaction_state_log_min_isr: v.i32("transaction.state.log.min.isr"),
            transaction_state_log_segment_bytes: v.i32("transaction.state.log.segment.bytes"),
            transaction_max_timeout_ms: v.i32("transaction.max.timeout.ms"),
            transactional_id_expiration_ms: v.i32("transactional.id.expiration.ms"),
            transaction_abort_timed_out_transaction_cleanup_interval_ms: v
                .i32("transaction.abort.timed.out.transaction.cleanup.interval.ms"),
            transaction_remove_expired_transaction_cleanup_interval_ms: v
                .i32("transaction.remove.expired.transaction.cleanup.interval.ms"),
            request_timeout_ms: v.i32("request.timeout.ms"),
            transaction_partition_verification_enable: v
                .bool("transaction.partition.verification.enable"),
            group_initial_rebalance_delay_ms: v.i32("group.initial.rebalance.delay.ms"),
            group_min_session_timeout_ms: v.i32("group.min.session.timeout.ms"),
            group_max_session_timeout_ms: v.i32("group.max.session.timeout.ms"),
            group_max_size: v.i32("group.max.size"),
            zookeeper_connect,
            zookeeper_session_timeout_ms,
            zookeeper_connection_timeout_ms: v
                .i64_opt("zookeeper.connection.timeout.ms")
                .map_or(zookeeper_session_timeout_ms, |t| t as i32),
            replica_lag_time_max_ms: v.i64("replica.lag.time.max.ms"),
            replica_fetch_max_bytes: v.i32("replica.fetch.max.bytes"),
            replica_fetch_wait_max_ms: v.i32("replica.fetch.wait.max.ms"),
            num_replica_fetchers: v.i32("num.replica.fetchers"),
            connections_max_idle_ms: v.i64("connections.max.idle.ms"),
            producer_id_expiration_ms: v.i32("producer.id.expiration.ms"),
            fetch_max_bytes: v.i32("fetch.max.bytes"),
            max_connections: v.i32("max.connections"),
            queued_max_requests: v.i32("queued.max.requests"),
            queued_max_request_bytes,
            num_shards,
            default_num_shards,
            log_io_mode,
            shard_core_offset: usize::try_from(v.i64("shard.core.offset"))
                .expect("validated at least 0"),
            shard_core_pinning: v.bool("shard.core.pinning"),
            log_io_offload_writes: v.bool("log.io.offload.writes"),
            shard_stall_threshold_ms: u64::try_from(v.i64("shard.stall.threshold.ms"))
                .expect("validated at least 0"),
            unknown_keys,
            originals,
        })
    }

    /// The key/value map as given (file plus overrides), for DescribeConfigs.
    pub fn originals(&self) -> &BTreeMap<String, String> {
        &self.originals
    }

    /// `key` as set for one listener: `listener.name.<listener>.<key>` (the
    /// name lower-cased, Kafka's ListenerName.configPrefix) wins over
    /// `<key>`; None when neither is set.
    pub fn listener_value(&self, listener_name: &str, key: &str) -> Option<&str> {
        listeners::listener_value(&self.originals, listener_name, key)
    }

    /// The id this broker runs as: `broker.id`, or 0 when it is -1 on the
    /// embedded store (a single node has nothing to generate ids against).
    pub fn effective_broker_id(&self) -> i32 {
        if self.broker_id < 0 {
            0
        } else {
            self.broker_id
        }
    }

    /// Where the embedded metadata store lives: `<first log dir>/__kshard_metadata`.
    pub fn metadata_dir(&self) -> PathBuf {
        debug_assert!(!self.log_dirs.is_empty());
        self.log_dirs[0].join("__kshard_metadata")
    }

    /// Keys set here that kshard accepts without acting on, with why
    /// (`support::SUPPORT`), for start-up log lines.
    pub fn accepted_keys(&self) -> Vec<(&str, &'static str)> {
        support::accepted_keys(&self.originals)
    }

    /// Keys that are accepted for compatibility but have no effect in
    /// kshard's architecture, for a startup log line.
    pub fn not_applicable_keys(&self) -> Vec<&str> {
        const KEYS: &[&str] = &[
            "num.network.threads",
            "num.io.threads",
            "background.threads",
        ];
        KEYS.iter()
            .copied()
            .filter(|k| self.originals.contains_key(*k))
            .collect()
    }
}

#[cfg(test)]
mod tests;
