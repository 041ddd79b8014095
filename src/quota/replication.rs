//! Replication quotas, as a Kafka 3.9 broker in ZooKeeper mode keeps them
//! (`ReplicationQuotaManager` for the LeaderReplication and
//! FollowerReplication types, fed by `BrokerConfigHandler`): one manager
//! per side for the whole broker, shared by every shard, so the bound is
//! on the broker's total replication traffic of throttled partitions.
//!
//! - The bound: `leader.replication.throttled.rate` /
//!   `follower.replication.throttled.rate` (bytes/s) from this broker's
//!   dynamic configs, else the cluster default's, else `Long.MAX_VALUE`
//!   (no bound). A static server.properties value is not read (Kafka's
//!   KafkaConfig does not define these keys). Until the first broker
//!   config is applied there is no quota at all (Kafka's null quota), which
//!   is never exceeded either.
//! - The rate: Kafka's sensor with a `SimpleRate` over
//!   `replication.quota.window.num` samples of
//!   `replication.quota.window.size.seconds`: the bytes recorded in the
//!   live samples over the time since the oldest of them started, at least
//!   one window. Kept in atomics (`rate::SampledRate`): recording and
//!   measuring take no lock.
//! - `is_quota_exceeded`: the measured rate is above the bound
//!   (`Quota.upperBound(rate)`, `Sensor.checkQuotas`); `record` adds bytes
//!   whether or not that makes the rate exceed the bound.
//!
//! Which partitions are throttled is not kept here but on each partition's
//! topic config (`config::topic::ThrottledReplicas`), and the leader and
//! follower decisions are in `replica::quota`, which sees these managers
//! as `ReplicaQuota`s.

use std::sync::atomic::{AtomicU64, Ordering};

use super::rate::{RateMeasure, SampledRate};
use crate::config::dynamic::BrokerConfigState;
use crate::config::BrokerConfig;
use crate::replica::ReplicaQuota;
use crate::util::monotonic_ms;

/// QuotaConfigs.LEADER_REPLICATION_THROTTLED_RATE_CONFIG.
pub const LEADER_REPLICATION_THROTTLED_RATE: &str = "leader.replication.throttled.rate";
/// QuotaConfigs.FOLLOWER_REPLICATION_THROTTLED_RATE_CONFIG.
pub const FOLLOWER_REPLICATION_THROTTLED_RATE: &str = "follower.replication.throttled.rate";
/// QuotaConfigs.QUOTA_BYTES_PER_SECOND_DEFAULT: no bound.
pub const QUOTA_BYTES_PER_SECOND_DEFAULT: i64 = i64::MAX;
/// ReplicationConfigs.REPLICA_ALTER_LOG_DIRS_IO_MAX_BYTES_PER_SECOND_CONFIG:
/// the bound on copying replicas between log dirs (AlterReplicaLogDirs).
pub const REPLICA_ALTER_LOG_DIRS_IO_MAX_BYTES_PER_SECOND: &str =
    "replica.alter.log.dirs.io.max.bytes.per.second";

/// Kafka's QuotaType of a ReplicationQuotaManager.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplicationQuotaType {
    LeaderReplication,
    FollowerReplication,
    /// Future replicas copied between this broker's log dirs.
    AlterLogDirsReplication,
}

impl ReplicationQuotaType {
    /// Kafka's QuotaType name (the sensor's name).
    pub fn name(self) -> &'static str {
        match self {
            ReplicationQuotaType::LeaderReplication => "LeaderReplication",
            ReplicationQuotaType::FollowerReplication => "FollowerReplication",
            ReplicationQuotaType::AlterLogDirsReplication => "AlterLogDirsReplication",
        }
    }

    /// The per-broker dynamic key holding this side's rate.
    pub fn rate_key(self) -> &'static str {
        match self {
            ReplicationQuotaType::LeaderReplication => LEADER_REPLICATION_THROTTLED_RATE,
            ReplicationQuotaType::FollowerReplication => FOLLOWER_REPLICATION_THROTTLED_RATE,
            ReplicationQuotaType::AlterLogDirsReplication => {
                REPLICA_ALTER_LOG_DIRS_IO_MAX_BYTES_PER_SECOND
            }
        }
    }
}

/// Kafka's ReplicationQuotaManagerConfig: the rate's sampling.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplicationQuotaManagerConfig {
    /// `replication.quota.window.num` (default 11).
    pub num_quota_samples: u32,
    /// `replication.quota.window.size.seconds` (default 1).
    pub quota_window_size_seconds: u64,
}

impl Default for ReplicationQuotaManagerConfig {
    fn default() -> Self {
        ReplicationQuotaManagerConfig {
            num_quota_samples: 11,
            quota_window_size_seconds: 1,
        }
    }
}

impl ReplicationQuotaManagerConfig {
    /// The two read-only broker keys (at least 1 each, as Kafka validates;
    /// a value kshard cannot read keeps the default).
    pub fn from_broker(config: &BrokerConfig) -> Self {
        let positive = |key: &str, default: u64| {
            config
                .originals()
                .get(key)
                .and_then(|v| v.trim().parse::<u64>().ok())
                .filter(|v| *v >= 1)
                .unwrap_or(default)
        };
        ReplicationQuotaManagerConfig {
            num_quota_samples: positive("replication.quota.window.num", 11).min(u64::from(u32::MAX))
                as u32,
            quota_window_size_seconds: positive("replication.quota.window.size.seconds", 1),
        }
    }
}

/// The bound's bits before any quota is set (Kafka's null quota); a real
/// bound is a long, never this NaN.
const NO_QUOTA: u64 = u64::MAX;

/// Kafka's ReplicationQuotaManager, less the throttled-partition map (see
/// the module comment).
pub struct ReplicationQuotaManager {
    quota_type: ReplicationQuotaType,
    config: ReplicationQuotaManagerConfig,
    /// The bound (bytes/s) as f64 bits, or NO_QUOTA.
    bound_bits: AtomicU64,
    rate: SampledRate,
}

impl ReplicationQuotaManager {
    pub fn new(quota_type: ReplicationQuotaType, config: ReplicationQuotaManagerConfig) -> Self {
        let window_ms = config.quota_window_size_seconds.saturating_mul(1000);
        ReplicationQuotaManager {
            quota_type,
            config,
            bound_bits: AtomicU64::new(NO_QUOTA),
            rate: SampledRate::new(config.num_quota_samples, window_ms),
        }
    }

    pub fn quota_type(&self) -> ReplicationQuotaType {
        self.quota_type
    }

    pub fn config(&self) -> ReplicationQuotaManagerConfig {
        self.config
    }

    /// updateQuota(Quota.upperBound(bound)): the rate measured so far is
    /// kept.
    pub fn update_quota(&self, bound: f64) {
        self.bound_bits.store(bound.to_bits(), Ordering::Release);
    }

    fn bound(&self) -> Option<f64> {
        let bits = self.bound_bits.load(Ordering::Acquire);
        (bits != NO_QUOTA).then(|| f64::from_bits(bits))
    }

    /// Kafka's upperBound: the bound as a long, Long.MAX_VALUE without one.
    pub fn upper_bound(&self) -> i64 {
        self.bound().map_or(i64::MAX, |b| b as i64)
    }

    /// The sensor's SimpleRate at `now_ms`: bytes over the live samples.
    pub fn measure(&self, now_ms: u64) -> RateMeasure {
        self.rate.simple_measure(now_ms)
    }

    /// isQuotaExceeded: `Sensor.checkQuotas` with an upper bound, so
    /// exceeded when the measured rate is above it. Without a quota, or
    /// with Long.MAX_VALUE (which no rate reaches), nothing is measured.
    pub fn is_quota_exceeded(&self, now_ms: u64) -> bool {
        match self.bound() {
            Some(bound) if bound < QUOTA_BYTES_PER_SECOND_DEFAULT as f64 => {
                let rate = self.measure(now_ms).per_second();
                // Quota.acceptable is value <= bound (a NaN is not).
                rate > bound || rate.is_nan()
            }
            _ => false,
        }
    }

    /// record: adds `bytes` at `now_ms`, whether or not over the bound
    /// (QuotaEnforcementType.NONE).
    pub fn record(&self, bytes: u64, now_ms: u64) {
        self.rate.record(bytes as f64, now_ms);
    }

    /// BrokerConfigHandler.processConfigChanges' getOrDefault for this
    /// side: this broker's dynamic value, else the cluster default's, else
    /// Long.MAX_VALUE; both layers as applied (invalid values already
    /// dropped).
    pub fn bound_from(&self, state: &BrokerConfigState) -> i64 {
        let key = self.quota_type.rate_key();
        [&state.dynamic_broker, &state.dynamic_default]
            .into_iter()
            .find_map(|layer| layer.get(key).and_then(|v| v.trim().parse::<i64>().ok()))
            .unwrap_or(QUOTA_BYTES_PER_SECOND_DEFAULT)
    }

    /// Sets the bound from the live dynamic broker config (start-up, and
    /// every change of the cluster default or of this broker's configs).
    pub fn update_from(&self, state: &BrokerConfigState) {
        let bound = self.bound_from(state);
        if self.upper_bound() != bound || self.bound().is_none() {
            log::info!(
                "{} replication quota: {}",
                self.quota_type.name(),
                if bound == QUOTA_BYTES_PER_SECOND_DEFAULT {
                    "unbounded".to_string()
                } else {
                    format!("{bound} bytes/s")
                }
            );
        }
        self.update_quota(bound as f64);
    }
}

/// On the monotonic clock, as the client quotas.
impl ReplicaQuota for ReplicationQuotaManager {
    fn is_quota_exceeded(&self) -> bool {
        ReplicationQuotaManager::is_quota_exceeded(self, monotonic_ms())
    }

    fn record(&self, bytes: u64) {
        ReplicationQuotaManager::record(self, bytes, monotonic_ms())
    }
}

#[cfg(test)]
#[path = "replication_tests.rs"]
mod tests;
