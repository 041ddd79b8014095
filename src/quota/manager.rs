//! Kafka's ClientQuotaManager (with its DefaultQuotaCallback), one per quota
//! type per broker, shared by all shards in an `Arc`.
//!
//! Quotas are set per entity (`users/<u>`, `users/<u>/clients/<c>`,
//! `clients/<c>` and the `<default>`s) and resolved for a connection's
//! (user, client id) with Kafka's 8-level precedence. Usage is tracked per
//! metric-tag pair (user tag, client-id tag): one sensor per pair, shared by
//! every client the pair covers (all client ids of a user under a `<user>`
//! quota) and by every shard.
//!
//! Sharing and updates: `sensor()` resolves a pair under the manager's
//! mutex and returns the pair's `Arc<QuotaSensor>`; recording on it takes
//! no lock (the rate is in atomics, the bound in an atomic). A quota change
//! rewrites the bound of every existing sensor in place and bumps a
//! generation counter; a `SensorCache` (one per connection and manager)
//! re-resolves when the generation moved, since a change can also move a
//! client to another tag pair or enable quotas. The per-request path is so:
//! an atomic load of the enabled bits and of the generation, two string
//! compares, then the lock-free record.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use super::entity::{sanitize, ClientQuotaEntity, EntityName};
use super::rate::{
    bounded_throttle_time_ms, clamp_throttle, throttle_time_ms, token_bucket_throttle_ms,
    SampledRate, TokenBucket,
};
use super::{
    parse_java_double, CONSUMER_BYTE_RATE, CONTROLLER_MUTATION_RATE, PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
};

/// ClientQuotaManagerConfig.InactiveSensorExpirationTimeSeconds.
pub const INACTIVE_SENSOR_EXPIRATION_MS: u64 = 3_600 * 1000;

/// The bound of an unlimited quota (`Quota.upperBound(Long.MaxValue)`).
pub const UNLIMITED: f64 = i64::MAX as f64;

/// QuotaTypes: which levels of quotas were ever configured (never reset).
const NO_QUOTAS: u8 = 0;
const CLIENT_ID_QUOTA_ENABLED: u8 = 1;
const USER_QUOTA_ENABLED: u8 = 2;
const USER_CLIENT_ID_QUOTA_ENABLED: u8 = 4;

/// The quota a manager enforces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QuotaType {
    Produce,
    Fetch,
    Request,
    ControllerMutation,
}

impl QuotaType {
    /// Kafka's QuotaType name: the metric group and sensor name prefix.
    pub fn name(self) -> &'static str {
        match self {
            QuotaType::Produce => "Produce",
            QuotaType::Fetch => "Fetch",
            QuotaType::Request => "Request",
            QuotaType::ControllerMutation => "ControllerMutation",
        }
    }

    /// The entity config key holding this type's quota.
    pub fn config_key(self) -> &'static str {
        match self {
            QuotaType::Produce => PRODUCER_BYTE_RATE,
            QuotaType::Fetch => CONSUMER_BYTE_RATE,
            QuotaType::Request => REQUEST_PERCENTAGE,
            QuotaType::ControllerMutation => CONTROLLER_MUTATION_RATE,
        }
    }

    /// QuotaConfigHandler's parse: byte rates `.toLong.toDouble`, the
    /// others `.toDouble`.
    fn parse_quota(self, value: &str) -> Option<f64> {
        match self {
            QuotaType::Produce | QuotaType::Fetch => value.parse::<i64>().ok().map(|v| v as f64),
            QuotaType::Request | QuotaType::ControllerMutation => parse_java_double(value),
        }
    }
}

/// The sampling of the quota's rate: `quota.window.num` samples of
/// `quota.window.size.seconds` (the `controller.quota.*` pair for
/// controller mutations).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QuotaConfig {
    pub window_num: u32,
    pub window_size_ms: u64,
}

impl Default for QuotaConfig {
    /// 10 whole windows + 1 current, of 1 s.
    fn default() -> Self {
        QuotaConfig {
            window_num: 11,
            window_size_ms: 1000,
        }
    }
}

/// A quota entity as the manager keys it (KafkaQuotaEntity): the user by
/// its sanitised name, the client id raw.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct QuotaKey {
    user: Option<EntityName>,
    client_id: Option<EntityName>,
}

fn key(user: Option<&EntityName>, client_id: Option<&EntityName>) -> QuotaKey {
    QuotaKey {
        user: user.cloned(),
        client_id: client_id.cloned(),
    }
}

fn named(name: &str) -> EntityName {
    EntityName::Named(name.to_string())
}

/// What a sensor measures with.
enum QuotaStat {
    Rate(SampledRate),
    Tokens(TokenBucket),
}

/// The quota sensor of one metric-tag pair, shared by every shard.
pub struct QuotaSensor {
    quota_type: QuotaType,
    user_tag: String,
    client_id_tag: String,
    bound_bits: AtomicU64,
    last_record_ms: AtomicU64,
    config: QuotaConfig,
    stat: QuotaStat,
}

impl QuotaSensor {
    fn new(quota_type: QuotaType, config: QuotaConfig, tags: (String, String), bound: f64) -> Self {
        let stat = match quota_type {
            QuotaType::ControllerMutation => {
                QuotaStat::Tokens(TokenBucket::new(config.window_num, config.window_size_ms))
            }
            _ => QuotaStat::Rate(SampledRate::new(config.window_num, config.window_size_ms)),
        };
        QuotaSensor {
            quota_type,
            user_tag: tags.0,
            client_id_tag: tags.1,
            bound_bits: AtomicU64::new(bound.to_bits()),
            last_record_ms: AtomicU64::new(0),
            config,
            stat,
        }
    }

    /// The metric tags (`user` sanitised, `client-id` raw; "" when the pair
    /// does not split on it).
    pub fn metric_tags(&self) -> (&str, &str) {
        (&self.user_tag, &self.client_id_tag)
    }

    /// The quota's current bound (`UNLIMITED` when none applies).
    pub fn quota_bound(&self) -> f64 {
        f64::from_bits(self.bound_bits.load(Ordering::Acquire))
    }

    fn set_bound(&self, bound: f64) {
        self.bound_bits.store(bound.to_bits(), Ordering::Release);
    }

    /// Kafka's recordAndGetThrottleTimeMs: records `value` at `now_ms` and
    /// returns the throttle time, 0 within the quota. Rates record first
    /// and then check (the value stays recorded); request quotas cap the
    /// throttle at one window. Controller mutations are strict: refused
    /// (nothing recorded) while the bucket is below zero, else recorded
    /// whole with no throttle.
    pub fn record_and_throttle_ms(&self, value: f64, now_ms: u64) -> u64 {
        self.last_record_ms.store(now_ms, Ordering::Relaxed);
        let bound = self.quota_bound();
        match &self.stat {
            QuotaStat::Rate(rate) => {
                rate.record(value, now_ms);
                self.rate_throttle_ms(rate, bound, now_ms)
            }
            QuotaStat::Tokens(bucket) => match bucket.check_and_record(value, bound, now_ms) {
                None => 0,
                Some(tokens) => clamp_throttle(token_bucket_throttle_ms(tokens, bound)),
            },
        }
    }

    /// Records then checks, for every type: a permissive controller
    /// mutation quota (older request versions, auto-creation) accepts the
    /// mutation and throttles once the bucket is below zero.
    pub fn record_permissive_ms(&self, value: f64, now_ms: u64) -> u64 {
        let QuotaStat::Tokens(bucket) = &self.stat else {
            return self.record_and_throttle_ms(value, now_ms);
        };
        self.last_record_ms.store(now_ms, Ordering::Relaxed);
        let bound = self.quota_bound();
        bucket.record(value, bound, now_ms);
        let tokens = bucket.measure(bound, now_ms);
        if tokens < 0.0 {
            clamp_throttle(token_bucket_throttle_ms(tokens, bound))
        } else {
            0
        }
    }

    /// recordNoThrottle: counts `value` without a check (a negative value
    /// takes back a throttled fetch's bytes, as unrecordQuotaSensor does).
    pub fn record_no_throttle(&self, value: f64, now_ms: u64) {
        self.last_record_ms.store(now_ms, Ordering::Relaxed);
        match &self.stat {
            QuotaStat::Rate(rate) => rate.record(value, now_ms),
            QuotaStat::Tokens(bucket) => bucket.record(value, self.quota_bound(), now_ms),
        }
    }

    /// The measured value: the rate per second, or the tokens left.
    pub fn measure(&self, now_ms: u64) -> f64 {
        match &self.stat {
            QuotaStat::Rate(rate) => rate.measure(now_ms).per_second(),
            QuotaStat::Tokens(bucket) => bucket.measure(self.quota_bound(), now_ms),
        }
    }

    /// getMaxValueInQuotaWindow: the most one record can carry without
    /// being throttled for sure (bound × the whole windows), which caps a
    /// consumer's fetch size. f64::MAX when unlimited.
    pub fn max_value_in_quota_window(&self) -> f64 {
        let bound = self.quota_bound();
        if bound >= UNLIMITED {
            return f64::MAX;
        }
        let whole_windows = f64::from(self.config.window_num.saturating_sub(1));
        bound * whole_windows * (self.config.window_size_ms as f64 / 1000.0)
    }

    fn rate_throttle_ms(&self, rate: &SampledRate, bound: f64, now_ms: u64) -> u64 {
        let measure = rate.measure(now_ms);
        let observed = measure.per_second();
        if observed <= bound {
            return 0;
        }
        let ms = match self.quota_type {
            QuotaType::Request => bounded_throttle_time_ms(
                observed,
                bound,
                measure.window_ms,
                self.config.window_size_ms,
            ),
            _ => throttle_time_ms(observed, bound, measure.window_ms),
        };
        clamp_throttle(ms)
    }
}

/// The quota overrides and the sensors, changed together under one lock.
#[derive(Default)]
struct State {
    overrides: HashMap<QuotaKey, f64>,
    sensors: HashMap<(String, String), Arc<QuotaSensor>>,
}

/// One broker's quota manager for one quota type.
pub struct ClientQuotaManager {
    quota_type: QuotaType,
    config: QuotaConfig,
    quota_types_enabled: AtomicU8,
    generation: AtomicU64,
    state: Mutex<State>,
}

impl ClientQuotaManager {
    pub fn new(quota_type: QuotaType, config: QuotaConfig) -> Self {
        ClientQuotaManager {
            quota_type,
            config,
            quota_types_enabled: AtomicU8::new(NO_QUOTAS),
            generation: AtomicU64::new(0),
            state: Mutex::new(State::default()),
        }
    }

    pub fn quota_type(&self) -> QuotaType {
        self.quota_type
    }

    /// False until any user or client-id config change reached this manager
    /// (even one without this type's key, as in Kafka), then true until
    /// restart. While false nothing is recorded and nothing throttled.
    pub fn quotas_enabled(&self) -> bool {
        self.quota_types_enabled.load(Ordering::Acquire) != NO_QUOTAS
    }

    /// Moves on every quota change; cached sensors older than it are stale.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A config change of a user / client-id entity (QuotaConfigHandler):
    /// `props` is its whole stored set; this type's key sets the quota and
    /// its absence removes it. Ip entities are not client quotas. A value
    /// that does not parse leaves this manager unchanged (Kafka's handler
    /// throws before updating it).
    pub fn update_quota(&self, entity: &ClientQuotaEntity, props: &BTreeMap<String, String>) {
        if entity.ip.is_some() || (entity.user.is_none() && entity.client_id.is_none()) {
            return;
        }
        let quota = match props.get(self.quota_type.config_key()) {
            None => None,
            Some(raw) => match self.quota_type.parse_quota(raw) {
                Some(q) => Some(q),
                None => {
                    log::warn!(
                        "{} quota of {entity:?} is not a number: {raw}",
                        self.quota_type.name()
                    );
                    return;
                }
            },
        };
        let user = entity.user.as_ref().map(|u| match u {
            EntityName::Default => EntityName::Default,
            EntityName::Named(n) => EntityName::Named(sanitize(n)),
        });
        let bit = match (&user, &entity.client_id) {
            (Some(_), Some(_)) => USER_CLIENT_ID_QUOTA_ENABLED,
            (Some(_), None) => USER_QUOTA_ENABLED,
            _ => CLIENT_ID_QUOTA_ENABLED,
        };
        let quota_key = key(user.as_ref(), entity.client_id.as_ref());
        let mut state = self.lock();
        self.quota_types_enabled.fetch_or(bit, Ordering::AcqRel);
        match quota {
            Some(q) => {
                log::info!(
                    "Changing {} quota for {quota_key:?} to {q}",
                    self.quota_type.name()
                );
                state.overrides.insert(quota_key, q);
            }
            None => {
                state.overrides.remove(&quota_key);
            }
        }
        for ((user_tag, client_tag), sensor) in &state.sensors {
            let bound = quota_limit(&state.overrides, user_tag, client_tag);
            sensor.set_bound(bound.unwrap_or(UNLIMITED));
        }
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    /// The sensor for a connection's user principal name and client id:
    /// the one of its metric-tag pair, created on first use. None while
    /// quotas are not enabled. An unlimited pair gets a sensor too (with
    /// an unlimited bound): Kafka records it, and the history counts once
    /// a quota applies. Resolve once and cache (see `SensorCache`).
    pub fn sensor(&self, user: &str, client_id: &str) -> Option<Arc<QuotaSensor>> {
        if !self.quotas_enabled() {
            return None;
        }
        let sanitized_user = sanitize(user);
        let mut state = self.lock();
        let types = self.quota_types_enabled.load(Ordering::Acquire);
        let tags = quota_metric_tags(types, &state.overrides, &sanitized_user, client_id);
        if let Some(sensor) = state.sensors.get(&tags) {
            return Some(sensor.clone());
        }
        let bound = quota_limit(&state.overrides, &tags.0, &tags.1).unwrap_or(UNLIMITED);
        let sensor = Arc::new(QuotaSensor::new(
            self.quota_type,
            self.config,
            tags.clone(),
            bound,
        ));
        state.sensors.insert(tags, sensor.clone());
        Some(sensor)
    }

    /// The quota bound that applies to (user, client id), `UNLIMITED` when
    /// none (Kafka's `quota(user, clientId).bound`), without a sensor.
    pub fn quota_bound(&self, user: &str, client_id: &str) -> f64 {
        let sanitized_user = sanitize(user);
        let state = self.lock();
        let types = self.quota_types_enabled.load(Ordering::Acquire);
        let tags = quota_metric_tags(types, &state.overrides, &sanitized_user, client_id);
        quota_limit(&state.overrides, &tags.0, &tags.1).unwrap_or(UNLIMITED)
    }

    /// maybeRecordAndGetThrottleTimeMs: 0 (nothing recorded) while quotas
    /// are not enabled, else records on the cached sensor.
    pub fn maybe_record_and_get_throttle_time_ms(
        &self,
        cache: &mut SensorCache,
        user: &str,
        client_id: &str,
        value: f64,
        now_ms: u64,
    ) -> u64 {
        if !self.quotas_enabled() {
            return 0;
        }
        cache
            .sensor(self, user, client_id)
            .map_or(0, |s| s.record_and_throttle_ms(value, now_ms))
    }

    /// Drops the sensors not recorded on for more than an hour that no
    /// connection holds, as Kafka expires idle sensors; returns how many.
    /// A held sensor stays so that a pair never has two sensors; an hour
    /// idle, its samples are all obsolete anyway, so keeping it changes no
    /// measurement. Call periodically.
    pub fn expire_inactive(&self, now_ms: u64) -> usize {
        let mut state = self.lock();
        let before = state.sensors.len();
        state.sensors.retain(|_, sensor| {
            let idle = now_ms.saturating_sub(sensor.last_record_ms.load(Ordering::Relaxed));
            Arc::strong_count(sensor) > 1 || idle <= INACTIVE_SENSOR_EXPIRATION_MS
        });
        before - state.sensors.len()
    }
}

/// DefaultQuotaCallback.quotaMetricTags: with one level of quotas ever set
/// the pair follows it; with several, the first configured level of the
/// precedence chain decides (1, 2, 4, 5 split on both; 3, 6 on the user;
/// 7, 8 and no quota on the client id).
fn quota_metric_tags(
    types: u8,
    overrides: &HashMap<QuotaKey, f64>,
    sanitized_user: &str,
    client_id: &str,
) -> (String, String) {
    let both = || (sanitized_user.to_string(), client_id.to_string());
    let user_only = || (sanitized_user.to_string(), String::new());
    let client_only = || (String::new(), client_id.to_string());
    match types {
        NO_QUOTAS | CLIENT_ID_QUOTA_ENABLED => return client_only(),
        USER_QUOTA_ENABLED => return user_only(),
        USER_CLIENT_ID_QUOTA_ENABLED => return both(),
        _ => {}
    }
    let (user, client) = (named(sanitized_user), named(client_id));
    let (default_user, default_client) = (EntityName::Default, EntityName::Default);
    let has = |u: Option<&EntityName>, c: Option<&EntityName>| overrides.contains_key(&key(u, c));
    if has(Some(&user), Some(&client)) || has(Some(&user), Some(&default_client)) {
        both()
    } else if has(Some(&user), None) {
        user_only()
    } else if has(Some(&default_user), Some(&client))
        || has(Some(&default_user), Some(&default_client))
    {
        both()
    } else if has(Some(&default_user), None) {
        user_only()
    } else {
        client_only()
    }
}

/// DefaultQuotaCallback.quotaLimit: the quota of a tag pair, looking only
/// at the levels that split the same way. A client-id-only pair falls back
/// to the static client-id default (unlimited since Kafka 3.0); a pair
/// with neither tag has no quota.
fn quota_limit(
    overrides: &HashMap<QuotaKey, f64>,
    user_tag: &str,
    client_tag: &str,
) -> Option<f64> {
    let (user, client) = (named(user_tag), named(client_tag));
    let d = EntityName::Default;
    let get = |u: Option<&EntityName>, c: Option<&EntityName>| overrides.get(&key(u, c)).copied();
    if !user_tag.is_empty() && !client_tag.is_empty() {
        get(Some(&user), Some(&client))
            .or_else(|| get(Some(&user), Some(&d)))
            .or_else(|| get(Some(&d), Some(&client)))
            .or_else(|| get(Some(&d), Some(&d)))
    } else if !user_tag.is_empty() {
        get(Some(&user), None).or_else(|| get(Some(&d), None))
    } else if !client_tag.is_empty() {
        get(None, Some(&client))
            .or_else(|| get(None, Some(&d)))
            .or(Some(UNLIMITED))
    } else {
        None
    }
}

/// A connection's resolved sensor for one manager: resolved again when the
/// manager's generation moved or the user or client id changed, otherwise
/// returned with no lock and no allocation.
#[derive(Default)]
pub struct SensorCache {
    generation: Option<u64>,
    user: String,
    client_id: String,
    sensor: Option<Arc<QuotaSensor>>,
}

impl SensorCache {
    pub fn new() -> Self {
        SensorCache::default()
    }

    pub fn sensor(
        &mut self,
        manager: &ClientQuotaManager,
        user: &str,
        client_id: &str,
    ) -> Option<&QuotaSensor> {
        // Read before resolving: a change racing the resolution is then
        // seen as a newer generation next time.
        let generation = manager.generation();
        if self.generation != Some(generation) || self.user != user || self.client_id != client_id {
            self.sensor = manager.sensor(user, client_id);
            self.generation = Some(generation);
            self.user.clear();
            self.user.push_str(user);
            self.client_id.clear();
            self.client_id.push_str(client_id);
        }
        self.sensor.as_deref()
    }
}

#[cfg(test)]
#[path = "manager_tests.rs"]
mod tests;
