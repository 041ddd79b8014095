//! Kafka's QuotaFactory.QuotaManagers: one ClientQuotaManager per quota
//! type for the whole broker, fed by the stored user and client-id
//! entities (at start-up and on every change), plus each shard's sensor
//! caches so a request finds its sensor without a lock.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use super::entity::{parse_entity_path, EntityName};
use super::manager::{ClientQuotaManager, QuotaConfig, QuotaType, SensorCache};
use super::replication::{
    ReplicationQuotaManager, ReplicationQuotaManagerConfig, ReplicationQuotaType,
};
use crate::config::dynamic::BrokerConfigState;
use crate::config::BrokerConfig;
use crate::replica::ReplicationQuotas;
use crate::security::credential_cache::CredentialCache;

/// The principal of a connection without authentication (Kafka's
/// KafkaPrincipal.ANONYMOUS name), which user quotas match.
pub const ANONYMOUS_USER: &str = "ANONYMOUS";

pub struct QuotaManagers {
    pub produce: ClientQuotaManager,
    pub fetch: ClientQuotaManager,
    pub request: ClientQuotaManager,
    pub controller_mutation: ClientQuotaManager,
    /// Replication quotas (Kafka's QuotaManagers.leader and .follower).
    pub leader: Arc<ReplicationQuotaManager>,
    pub follower: Arc<ReplicationQuotaManager>,
    /// Kafka's QuotaManagers.alterLogDirs: copying future replicas.
    pub alter_log_dirs: Arc<ReplicationQuotaManager>,
    /// Users' SCRAM credentials, which the same user entity configs carry
    /// (Kafka's UserConfigHandler updates quotas and credentials together).
    pub credentials: Arc<CredentialCache>,
}

/// A positive integer broker key, or its default.
fn positive(config: &BrokerConfig, key: &str, default: u64) -> u64 {
    config
        .originals()
        .get(key)
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|v| *v >= 1)
        .unwrap_or(default)
}

impl QuotaManagers {
    /// `quota.window.num` windows of `quota.window.size.seconds` (the
    /// controller mutation quota has its own pair), read-only keys.
    pub fn new(config: &BrokerConfig) -> Self {
        let client = QuotaConfig {
            window_num: positive(config, "quota.window.num", 11) as u32,
            window_size_ms: positive(config, "quota.window.size.seconds", 1) * 1000,
        };
        let controller = QuotaConfig {
            window_num: positive(config, "controller.quota.window.num", 11) as u32,
            window_size_ms: positive(config, "controller.quota.window.size.seconds", 1) * 1000,
        };
        let replication = ReplicationQuotaManagerConfig::from_broker(config);
        QuotaManagers {
            produce: ClientQuotaManager::new(QuotaType::Produce, client),
            fetch: ClientQuotaManager::new(QuotaType::Fetch, client),
            request: ClientQuotaManager::new(QuotaType::Request, client),
            controller_mutation: ClientQuotaManager::new(QuotaType::ControllerMutation, controller),
            leader: Arc::new(ReplicationQuotaManager::new(
                ReplicationQuotaType::LeaderReplication,
                replication,
            )),
            follower: Arc::new(ReplicationQuotaManager::new(
                ReplicationQuotaType::FollowerReplication,
                replication,
            )),
            alter_log_dirs: Arc::new(ReplicationQuotaManager::new(
                ReplicationQuotaType::AlterLogDirsReplication,
                replication,
            )),
            credentials: Arc::new(CredentialCache::default()),
        }
    }

    /// Kafka's BrokerConfigHandler for the replication quotas: the
    /// leader and follower bounds from the live dynamic broker config (at
    /// start-up, and on every change of the cluster default or of this
    /// broker's configs).
    pub fn update_replication_quotas(&self, state: &BrokerConfigState) {
        self.leader.update_from(state);
        self.follower.update_from(state);
        self.alter_log_dirs.update_from(state);
    }

    /// The replication quotas as the replica layer holds them.
    pub fn replication_quotas(&self) -> ReplicationQuotas {
        ReplicationQuotas {
            leader: self.leader.clone(),
            follower: self.follower.clone(),
            alter_log_dirs: self.alter_log_dirs.clone(),
        }
    }

    /// A stored entity's whole config (Kafka's ClientIdConfigHandler and
    /// UserConfigHandler); returns false for a path that is not a user or
    /// client-id entity (ips have their own quota, not kept here).
    pub fn update(&self, entity_path: &str, props: &BTreeMap<String, String>) -> bool {
        let Some(entity) = parse_entity_path(entity_path) else {
            return false;
        };
        if entity.ip.is_some() {
            return false;
        }
        if let (Some(EntityName::Named(user)), None) = (&entity.user, &entity.client_id) {
            self.credentials.update_user(user, props);
        }
        for manager in [
            &self.produce,
            &self.fetch,
            &self.request,
            &self.controller_mutation,
        ] {
            manager.update_quota(&entity, props);
        }
        true
    }

    /// Drops sensors idle for an hour (Kafka's sensor expiry).
    pub fn expire_inactive(&self, now_ms: u64) {
        for manager in [
            &self.produce,
            &self.fetch,
            &self.request,
            &self.controller_mutation,
        ] {
            manager.expire_inactive(now_ms);
        }
    }
}

/// Client ids one shard keeps a sensor cache for; past it the caches start
/// over (a burst of one-off client ids must not grow a shard's memory).
const CACHED_CLIENT_IDS_MAX: usize = 10_000;

/// Sensor caches by user (the principal's name), then client id.
type SensorCaches = HashMap<String, HashMap<String, SensorCache>>;

/// One shard's sensor caches.
#[derive(Default)]
pub struct ShardQuotaCaches {
    produce: RefCell<SensorCaches>,
    fetch: RefCell<SensorCaches>,
    request: RefCell<SensorCaches>,
}

impl ShardQuotaCaches {
    /// Records the time a request's handler ran on its shard, as a
    /// percentage of one second (Kafka's request quota records handler
    /// thread time); the throttle time in ms, at most one quota window.
    pub fn record_request(
        &self,
        managers: &QuotaManagers,
        user: &str,
        client_id: &str,
        handler_nanos: u64,
        now_ms: u64,
    ) -> u32 {
        let manager = &managers.request;
        if !manager.quotas_enabled() {
            return 0;
        }
        let percentage = handler_nanos as f64 * 100.0 / 1e9;
        let mut caches = self.request.borrow_mut();
        let cache = cache_for(&mut caches, user, client_id);
        let throttle_ms = manager
            .maybe_record_and_get_throttle_time_ms(cache, user, client_id, percentage, now_ms);
        u32::try_from(throttle_ms).unwrap_or(u32::MAX)
    }

    /// Records a produce request's size; the throttle time in ms.
    pub fn record_produce(
        &self,
        managers: &QuotaManagers,
        user: &str,
        client_id: &str,
        bytes: usize,
        now_ms: u64,
    ) -> u32 {
        record(
            &self.produce,
            &managers.produce,
            user,
            client_id,
            bytes,
            now_ms,
        )
    }

    /// Records a fetch response's size; the throttle time in ms.
    pub fn record_fetch(
        &self,
        managers: &QuotaManagers,
        user: &str,
        client_id: &str,
        bytes: usize,
        now_ms: u64,
    ) -> u32 {
        let throttle_ms = record(&self.fetch, &managers.fetch, user, client_id, bytes, now_ms);
        if throttle_ms > 0 {
            // A throttled fetch is answered empty, so its bytes are taken
            // back (Kafka's unrecordQuotaSensor).
            let mut caches = self.fetch.borrow_mut();
            let cache = cache_for(&mut caches, user, client_id);
            if let Some(sensor) = cache.sensor(&managers.fetch, user, client_id) {
                sensor.record_no_throttle(-(bytes as f64), now_ms);
            }
        }
        throttle_ms
    }

    /// The most a fetch may return so one response does not exceed what
    /// the quota allows over its whole window (Kafka's
    /// getMaxValueInQuotaWindow); None without a consumer quota.
    pub fn fetch_bytes_cap(
        &self,
        managers: &QuotaManagers,
        user: &str,
        client_id: &str,
    ) -> Option<u64> {
        if !managers.fetch.quotas_enabled() {
            return None;
        }
        let mut caches = self.fetch.borrow_mut();
        let cache = cache_for(&mut caches, user, client_id);
        let sensor = cache.sensor(&managers.fetch, user, client_id)?;
        let cap = sensor.max_value_in_quota_window();
        (cap < u32::MAX as f64).then(|| cap.max(0.0) as u64)
    }
}

/// The cache of (user, client id), made on first use; a map that reached
/// its bound is emptied first (looked up without allocating when cached).
fn cache_for<'a>(caches: &'a mut SensorCaches, user: &str, client_id: &str) -> &'a mut SensorCache {
    if !caches.contains_key(user) {
        if caches.len() >= CACHED_CLIENT_IDS_MAX {
            caches.clear();
        }
        caches.insert(user.to_string(), HashMap::new());
    }
    let by_client = caches.get_mut(user).expect("just inserted");
    if !by_client.contains_key(client_id) {
        if by_client.len() >= CACHED_CLIENT_IDS_MAX {
            by_client.clear();
        }
        by_client.insert(client_id.to_string(), SensorCache::new());
    }
    by_client.get_mut(client_id).expect("just inserted")
}

fn record(
    caches: &RefCell<SensorCaches>,
    manager: &ClientQuotaManager,
    user: &str,
    client_id: &str,
    bytes: usize,
    now_ms: u64,
) -> u32 {
    // The common case: no quota of this type was ever set.
    if !manager.quotas_enabled() {
        return 0;
    }
    let mut caches = caches.borrow_mut();
    let cache = cache_for(&mut caches, user, client_id);
    let throttle_ms =
        manager.maybe_record_and_get_throttle_time_ms(cache, user, client_id, bytes as f64, now_ms);
    u32::try_from(throttle_ms).unwrap_or(u32::MAX)
}

/// One admin request's controller mutation quota (Kafka's
/// ControllerMutationQuota): strict for the request versions that can
/// carry THROTTLING_QUOTA_EXCEEDED (a mutation is refused while the bucket
/// is below zero), permissive for older ones (accepted, then throttled).
pub struct ControllerMutationQuota {
    sensor: Option<std::sync::Arc<super::manager::QuotaSensor>>,
    strict: bool,
    throttle_ms: u32,
}

impl QuotaManagers {
    pub fn controller_mutation_quota(
        &self,
        user: &str,
        client_id: &str,
        strict: bool,
    ) -> ControllerMutationQuota {
        let manager = &self.controller_mutation;
        let sensor = manager
            .quotas_enabled()
            .then(|| manager.sensor(user, client_id))
            .flatten();
        ControllerMutationQuota {
            sensor,
            strict,
            throttle_ms: 0,
        }
    }
}

impl ControllerMutationQuota {
    /// Strict only: whether a mutation is refused now; the refusal's
    /// throttle time goes to the answer.
    pub fn is_exceeded(&mut self, now_ms: u64) -> bool {
        let (Some(sensor), true) = (&self.sensor, self.strict) else {
            return false;
        };
        // A zero-sized record is refused exactly when the bucket is below zero.
        let throttle_ms = sensor.record_and_throttle_ms(0.0, now_ms);
        self.throttle_ms = self.throttle_ms.max(clamp_ms(throttle_ms));
        throttle_ms > 0
    }

    /// Charges `partitions` created, added or deleted.
    pub fn record(&mut self, partitions: usize, now_ms: u64) {
        let Some(sensor) = &self.sensor else {
            return;
        };
        if self.strict {
            sensor.record_no_throttle(partitions as f64, now_ms);
        } else {
            let throttle_ms = sensor.record_permissive_ms(partitions as f64, now_ms);
            self.throttle_ms = self.throttle_ms.max(clamp_ms(throttle_ms));
        }
    }

    pub fn throttle_ms(&self) -> u32 {
        self.throttle_ms
    }
}

fn clamp_ms(ms: u64) -> u32 {
    u32::try_from(ms).unwrap_or(u32::MAX)
}
