//! What the replica layer asks of a replication quota (Kafka's
//! `ReplicaQuota` trait), and the two throttle decisions of replication:
//! the leader's (`ReplicaManager.shouldLeaderThrottle`) and the follower's
//! (`shouldFollowerThrottle` of the fetcher). The quota managers
//! themselves live in the quota layer above (`quota::replication`, one per
//! broker for each side, shared by every shard) and are handed down by the
//! shard's root; this layer cannot import them.
//!
//! Which partitions are throttled is the topic's
//! `leader.replication.throttled.replicas` /
//! `follower.replication.throttled.replicas` config, kept parsed on each
//! partition's `TopicConfig` (`ThrottledReplicas::is_throttled`): with no
//! throttle configured a decision is one branch on the partition's config,
//! and the quota's shared state is never touched.

use std::sync::Arc;

use crate::config::topic::TopicConfig;
use crate::replica::partition::Partition;

/// Kafka's ReplicaQuota, less `isThrottled` (the partition's topic config
/// answers that). Implementations read their own clock, so a caller that
/// never gets this far never reads one.
pub trait ReplicaQuota: Send + Sync {
    /// The rate measured over the quota window is above the bound.
    fn is_quota_exceeded(&self) -> bool;
    /// Adds `bytes` to the measured rate, whether or not over the bound.
    fn record(&self, bytes: u64);
}

/// Kafka's UnboundedQuota: never exceeded, records nothing (a broker
/// without replication quota managers, and tests).
pub struct UnboundedQuota;

impl ReplicaQuota for UnboundedQuota {
    fn is_quota_exceeded(&self) -> bool {
        false
    }

    fn record(&self, _bytes: u64) {}
}

/// The broker's two replication quotas, as a shard's replica layer holds
/// them (Kafka's QuotaManagers.leader and .follower).
#[derive(Clone)]
pub struct ReplicationQuotas {
    pub leader: Arc<dyn ReplicaQuota>,
    pub follower: Arc<dyn ReplicaQuota>,
    /// Copying future replicas between log dirs (AlterReplicaLogDirs).
    pub alter_log_dirs: Arc<dyn ReplicaQuota>,
}

impl Default for ReplicationQuotas {
    fn default() -> Self {
        ReplicationQuotas {
            leader: Arc::new(UnboundedQuota),
            follower: Arc::new(UnboundedQuota),
            alter_log_dirs: Arc::new(UnboundedQuota),
        }
    }
}

/// Kafka's shouldLeaderThrottle: a leader answers a follower's fetch of
/// `p` with no records when the partition is throttled for leaders on
/// this broker, the follower is not in the ISR, and the leader quota is
/// exceeded. In-sync followers are never throttled (no ISR thrashing).
#[inline]
pub fn should_leader_throttle(quota: &dyn ReplicaQuota, p: &Partition, replica_id: i32) -> bool {
    is_leader_throttled(p) && !p.leadership.isr.contains(&replica_id) && quota.is_quota_exceeded()
}

/// The partition is in this broker's leader throttled set: the bytes it
/// sends to followers count against the leader quota.
#[inline]
pub fn is_leader_throttled(p: &Partition) -> bool {
    p.config
        .leader_replication_throttled_replicas
        .is_throttled(p.partition, p.leadership.broker_id)
}

/// The partition is in broker `broker_id`'s follower throttled set.
#[inline]
pub fn is_follower_throttled(config: &TopicConfig, partition: i32, broker_id: i32) -> bool {
    config
        .follower_replication_throttled_replicas
        .is_throttled(partition, broker_id)
}

/// Kafka's shouldFollowerThrottle: a follower leaves a partition out of
/// its next fetch when it is throttled for followers on this broker, the
/// follower's copy is not in sync (its fetch state's lag is unknown or
/// above zero), and the follower quota is exceeded.
#[inline]
pub fn should_follower_throttle(
    quota: &dyn ReplicaQuota,
    in_sync: bool,
    config: &TopicConfig,
    partition: i32,
    broker_id: i32,
) -> bool {
    !in_sync && is_follower_throttled(config, partition, broker_id) && quota.is_quota_exceeded()
}
