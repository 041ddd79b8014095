//! The follower side of replication, per shard (Kafka's
//! ReplicaFetcherManager / AbstractFetcherThread / ReplicaFetcherThread).
//! Each shard fetches the partitions it owns and follows: one fetcher task
//! per (leader broker, fetcher id), fetcher id = Kafka's `getFetcherId`
//! over `num.replica.fetchers`. A task keeps one connection to its leader
//! and sends full (sessionless) Fetch requests at the local log end
//! offsets; the leader's `replica.fetch.wait.max.ms` paces it.

mod process;
mod protocol;
mod task;

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;

use uuid::Uuid;

use crate::config::BrokerConfig;
use crate::replica::{ReplicaManager, ReplicaQuota, UnboundedQuota};
use crate::security::inter_broker::InterBrokerSecurity;
use crate::util::java_string_hash;

pub use process::{apply_fetched_partition, apply_out_of_range, fetch_request_for, FetchOutcome};
pub use protocol::{
    decode_fetch_response, decode_list_offsets_response, fetch_version, follower_fetch_request,
    list_offsets_request, FetchResponseParts, FetchSettings, FetchedPartition,
    PartitionFetchRequest,
};
use task::{FetcherShared, FetcherTask, PartitionState};

/// Where a leader is reached (its inter-broker listener).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaderEndpoint {
    pub broker_id: i32,
    pub host: String,
    pub port: u16,
}

/// A partition this shard follows, as LeaderAndIsr made it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FollowedPartition {
    pub topic: String,
    pub partition: i32,
    pub topic_id: Uuid,
    pub leader_epoch: i32,
}

/// Kafka's `getFetcherId`: `abs(31 * topic.hashCode + partition) % n`.
pub fn fetcher_id(topic: &str, partition: i32, num_fetchers: u32) -> u32 {
    let n = num_fetchers.max(1) as i32;
    let h = java_string_hash(topic)
        .wrapping_mul(31)
        .wrapping_add(partition);
    // Kafka's Utils.abs maps Integer.MIN_VALUE to 0.
    let abs = if h == i32::MIN { 0 } else { h.abs() };
    (abs % n) as u32
}

/// (leader broker id, fetcher id)
type FetcherKey = (i32, u32);

struct Fetcher {
    leader: LeaderEndpoint,
    shared: Rc<RefCell<FetcherShared>>,
    /// Dropping the task cancels it at its next await.
    task: Option<glommio::Task<()>>,
}

impl Fetcher {
    fn new(leader: LeaderEndpoint) -> Self {
        Fetcher {
            leader,
            shared: Rc::new(RefCell::new(FetcherShared::default())),
            task: None,
        }
    }
}

impl Drop for Fetcher {
    fn drop(&mut self) {
        let mut shared = self.shared.borrow_mut();
        shared.stopped = true;
        shared.changed();
    }
}

pub struct ReplicaFetcherManager {
    shard_id: usize,
    settings: FetchSettings,
    num_fetchers: u32,
    /// `replica.socket.timeout.ms`
    socket_timeout_ms: u64,
    /// `replica.socket.receive.buffer.bytes` (-1: the OS default)
    socket_receive_buffer_bytes: i32,
    /// The inter-broker listener's TLS and SASL.
    security: Arc<InterBrokerSecurity>,
    fetchers: HashMap<FetcherKey, Fetcher>,
    next_generation: u64,
    /// The broker's follower replication quota (Kafka's
    /// QuotaManagers.follower), shared by every task.
    quota: Arc<dyn ReplicaQuota>,
}

/// A broker setting kshard keeps only as a raw value (no typed field).
fn raw_i64(config: &BrokerConfig, key: &str, default: i64) -> i64 {
    config
        .originals()
        .get(key)
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

impl ReplicaFetcherManager {
    pub fn new(
        shard_id: usize,
        broker_id: i32,
        config: &BrokerConfig,
        security: Arc<InterBrokerSecurity>,
    ) -> Self {
        let settings = FetchSettings {
            replica_id: broker_id,
            max_wait_ms: config.replica_fetch_wait_max_ms,
            min_bytes: raw_i64(config, "replica.fetch.min.bytes", 1) as i32,
            max_bytes: raw_i64(config, "replica.fetch.response.max.bytes", 10 << 20) as i32,
            partition_max_bytes: config.replica_fetch_max_bytes,
        };
        // The socket must outlast the leader's long poll.
        let socket_timeout_ms = raw_i64(config, "replica.socket.timeout.ms", 30_000)
            .max(i64::from(settings.max_wait_ms) + 1_000)
            .max(1) as u64;
        ReplicaFetcherManager {
            shard_id,
            settings,
            num_fetchers: config.num_replica_fetchers.max(1) as u32,
            socket_timeout_ms,
            socket_receive_buffer_bytes: raw_i64(
                config,
                "replica.socket.receive.buffer.bytes",
                65_536,
            ) as i32,
            security,
            fetchers: HashMap::new(),
            next_generation: 1,
            quota: Arc::new(UnboundedQuota),
        }
    }

    /// The follower replication quota tasks started from now on check
    /// (set once, when the shard is built).
    pub fn set_quota(&mut self, quota: Arc<dyn ReplicaQuota>) {
        self.quota = quota;
    }

    /// Starts (or restarts) fetching `parts` from `leader`, each moved off
    /// any fetcher for another leader. Call on the owning shard after the
    /// partitions became followers.
    pub fn add_partitions(
        &mut self,
        replica_manager: &Rc<ReplicaManager>,
        leader: LeaderEndpoint,
        parts: Vec<FollowedPartition>,
    ) {
        let started = self.place(leader, parts);
        for key in started {
            let fetcher = self.fetchers.get_mut(&key).expect("just placed");
            let task = FetcherTask {
                replica_manager: Rc::downgrade(replica_manager),
                shared: fetcher.shared.clone(),
                leader: fetcher.leader.clone(),
                settings: self.settings.clone(),
                client_id: format!(
                    "broker-{}-fetcher-{}-shard-{}",
                    self.settings.replica_id, key.1, self.shard_id
                ),
                socket_timeout_ms: self.socket_timeout_ms,
                socket_receive_buffer_bytes: self.socket_receive_buffer_bytes,
                security: self.security.clone(),
                quota: self.quota.clone(),
            };
            log::info!(
                "shard {}: fetcher {} for leader {} at {}:{} started",
                self.shard_id,
                key.1,
                key.0,
                fetcher.leader.host,
                fetcher.leader.port
            );
            fetcher.task = Some(glommio::spawn_local(task.run()));
        }
    }

    /// The bookkeeping of `add_partitions`; returns the fetchers that need
    /// a task (new ones).
    fn place(&mut self, leader: LeaderEndpoint, parts: Vec<FollowedPartition>) -> Vec<FetcherKey> {
        let mut started = Vec::new();
        for part in parts {
            let key = (
                leader.broker_id,
                fetcher_id(&part.topic, part.partition, self.num_fetchers),
            );
            let tp = (part.topic.clone(), part.partition);
            // Off every other fetcher (another leader, or the same one at an
            // old address).
            let mut kept: Option<PartitionState> = None;
            for (k, f) in self.fetchers.iter_mut() {
                let mut shared = f.shared.borrow_mut();
                if *k == key && f.leader == leader {
                    if let Some(s) = shared.partitions.get(&tp) {
                        kept = Some(s.clone());
                    }
                    continue;
                }
                if shared.partitions.shift_remove(&tp).is_some() {
                    shared.changed();
                }
            }
            if self.fetchers.get(&key).is_some_and(|f| f.leader != leader) {
                // The leader's address changed: a new connection, and the
                // old fetcher's partitions move with it.
                let old = self.fetchers.remove(&key).expect("present");
                let moved: Vec<((String, i32), PartitionState)> =
                    old.shared.borrow_mut().partitions.drain(..).collect();
                let fresh = Fetcher::new(leader.clone());
                fresh.shared.borrow_mut().partitions.extend(moved);
                self.fetchers.insert(key, fresh);
            }
            let fetcher = self.fetchers.entry(key).or_insert_with(|| {
                started.push(key);
                Fetcher::new(leader.clone())
            });
            if fetcher.task.is_none() && !started.contains(&key) {
                started.push(key);
            }
            // The same epoch from the same leader is a resend: keep the
            // state (and the fetch in flight).
            if kept
                .as_ref()
                .is_some_and(|s| s.leader_epoch == part.leader_epoch && s.topic_id == part.topic_id)
            {
                continue;
            }
            let generation = self.next_generation;
            self.next_generation += 1;
            let mut shared = fetcher.shared.borrow_mut();
            shared.partitions.insert(
                tp,
                PartitionState {
                    topic_id: part.topic_id,
                    leader_epoch: part.leader_epoch,
                    generation,
                    delayed_until_ms: 0,
                    backoff_ms: 0,
                    lag: None,
                },
            );
            shared.changed();
        }
        self.remove_idle_fetchers();
        started.retain(|k| self.fetchers.contains_key(k));
        started
    }

    /// Stops fetching these partitions (they became leaders, or were
    /// stopped or deleted). A fetch in flight for them is dropped.
    pub fn remove_partitions(&mut self, parts: &[(String, i32)]) {
        for f in self.fetchers.values() {
            let mut shared = f.shared.borrow_mut();
            let before = shared.partitions.len();
            for tp in parts {
                shared.partitions.shift_remove(tp);
            }
            if shared.partitions.len() != before {
                shared.changed();
            }
        }
        self.remove_idle_fetchers();
    }

    /// Stops every fetcher (shard shutdown).
    pub fn shutdown(&mut self) {
        for (key, f) in self.fetchers.drain() {
            log::debug!(
                "shard {}: stopping fetcher {} for leader {}",
                self.shard_id,
                key.1,
                key.0
            );
            drop(f);
        }
    }

    /// Kafka's `shutdownIdleFetcherThreads`.
    fn remove_idle_fetchers(&mut self) {
        self.fetchers
            .retain(|_, f| !f.shared.borrow().partitions.is_empty());
    }

    /// The leader this shard fetches a partition from, if any.
    pub fn leader_of(&self, topic: &str, partition: i32) -> Option<i32> {
        let tp = (topic.to_string(), partition);
        self.fetchers
            .iter()
            .find(|(_, f)| f.shared.borrow().partitions.contains_key(&tp))
            .map(|(k, _)| k.0)
    }

    /// Partitions followed, over all fetchers.
    pub fn partition_count(&self) -> usize {
        self.fetchers
            .values()
            .map(|f| f.shared.borrow().partitions.len())
            .sum()
    }

    /// Fetcher tasks (connections) this shard runs.
    pub fn fetcher_count(&self) -> usize {
        self.fetchers.len()
    }
}

impl Drop for ReplicaFetcherManager {
    fn drop(&mut self) {
        self.shutdown();
    }
}

#[cfg(test)]
mod gap_tests;
#[cfg(test)]
mod task_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod throttle_tests;
