//! Dynamic broker configuration (Kafka's DynamicBrokerConfig in ZooKeeper
//! mode): which keys may change at runtime and at which level, the
//! validation AlterConfigs runs on them, the live config merged from the
//! static file and the two dynamic layers (`/config/brokers/<default>` and
//! `/config/brokers/<id>`), and the DescribeConfigs views of that merge.
//!
//! Precedence: per-broker > cluster default > static > ConfigDef default.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use arc_swap::ArcSwap;

use super::defs::{
    self, def, ConfigDef, ConfigEntry, ConfigType, Validator, SOURCE_DEFAULT_CONFIG,
    SOURCE_DYNAMIC_BROKER_CONFIG, SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG,
    SOURCE_STATIC_BROKER_CONFIG,
};
use super::{BrokerConfig, ConfigError};

/// Kafka's "Dynamic Update Mode" of a broker key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UpdateMode {
    /// Only from server.properties.
    ReadOnly,
    /// Only in `/config/brokers/<id>`.
    PerBroker,
    /// At either level. Custom (unknown) keys and the replication quota
    /// keys are also accepted at either level.
    ClusterWide,
}

/// SslConfigs.RECONFIGURABLE_CONFIGS (DynamicSecurityConfigs): dynamic only
/// behind a `listener.name.<l>.` prefix.
const SSL_BASE_KEYS: &[&str] = &[
    "ssl.key.password",
    "ssl.keystore.certificate.chain",
    "ssl.keystore.key",
    "ssl.keystore.location",
    "ssl.keystore.password",
    "ssl.keystore.type",
    "ssl.truststore.certificates",
    "ssl.truststore.location",
    "ssl.truststore.password",
    "ssl.truststore.type",
];

/// Listener configs that stay cluster-wide (ClusterLevelListenerConfigs).
const CLUSTER_LEVEL_LISTENER_KEYS: &[&str] = &[
    "max.connection.creation.rate",
    "max.connections",
    "num.network.threads",
];

/// DynamicListenerConfig keys that are not ssl.* or sasl.*.
const LISTENER_KEYS: &[&str] = &[
    "advertised.listeners",
    "listener.security.protocol.map",
    "listeners",
    "principal.builder.class",
];

/// ListenerMechanismConfigs: set as `listener.name.<l>.<mechanism>.<key>`.
const LISTENER_MECHANISM_CONFIGS: &[&str] = &[
    "connections.max.reauth.ms",
    "sasl.jaas.config",
    "sasl.login.callback.handler.class",
    "sasl.login.class",
    "sasl.server.callback.handler.class",
];

/// QuotaConfigs.brokerQuotaConfigs: accepted as dynamic broker configs
/// (DynamicConfig.Broker) though not in AllDynamicConfigs, so DescribeConfigs
/// shows them read-only.
#[rustfmt::skip]
static QUOTA_DEFS: &[ConfigDef] = &[
    def("follower.replication.throttled.rate", ConfigType::Long, Some("9223372036854775807"), Validator::AtLeast(0), false, "Upper bound (bytes/sec) on replication traffic for followers enumerated in follower.replication.throttled.replicas."),
    def("leader.replication.throttled.rate", ConfigType::Long, Some("9223372036854775807"), Validator::AtLeast(0), false, "Upper bound (bytes/sec) on replication traffic for leaders enumerated in leader.replication.throttled.replicas."),
    def("replica.alter.log.dirs.io.max.bytes.per.second", ConfigType::Long, Some("9223372036854775807"), Validator::AtLeast(0), false, "Upper bound (bytes/sec) on disk IO used for moving replicas between log directories."),
];

fn quota_def(name: &str) -> Option<&'static ConfigDef> {
    QUOTA_DEFS.iter().find(|d| d.name == name)
}

/// The `<x>` of `listener.name.<l>.<x>` (Kafka's ListenerConfigRegex).
pub fn listener_base(name: &str) -> Option<&str> {
    let rest = name.strip_prefix("listener.name.")?;
    rest.split_once('.').map(|(_, base)| base)
}

/// In Kafka's AllDynamicConfigs (read_only = false in DescribeConfigs).
fn is_dynamic(name: &str) -> bool {
    defs::broker_def(name).is_some_and(|d| d.dynamic)
}

/// In Kafka's PerBrokerConfigs, or a per-broker listener override.
fn is_per_broker(name: &str) -> bool {
    if let Some(base) = listener_base(name) {
        return !CLUSTER_LEVEL_LISTENER_KEYS.contains(&base);
    }
    is_dynamic(name)
        && (name.starts_with("ssl.") || name.starts_with("sasl.") || LISTENER_KEYS.contains(&name))
}

/// Read-only: a broker key Kafka (or kshard) defines that is not dynamic.
/// Listener overrides are never read-only: Kafka matches exact names.
fn is_read_only(name: &str) -> bool {
    defs::broker_def(name).is_some_and(|d| !d.dynamic)
}

/// Where `key` may be set dynamically (DynamicBrokerConfig.dynamicConfigUpdateModes).
pub fn update_mode(key: &str) -> UpdateMode {
    if is_read_only(key) {
        UpdateMode::ReadOnly
    } else if is_per_broker(key) {
        UpdateMode::PerBroker
    } else {
        UpdateMode::ClusterWide
    }
}

/// The definition DynamicConfig.Broker validates `name` with: dynamic broker
/// keys and the quota keys; anything else is a custom key, not checked.
fn dynamic_def(name: &str) -> Option<&'static ConfigDef> {
    quota_def(name).or_else(|| defs::broker_def(name).filter(|d| d.dynamic))
}

/// A Scala Set's toString: the immutable Set1..Set4 print `Set(...)`, larger
/// sets and mutable sets print `HashSet(...)`. Names are sorted (Scala's
/// hash order cannot be reproduced).
fn scala_set(names: &[&str], mutable: bool) -> String {
    let prefix = if mutable || names.len() > 4 {
        "HashSet"
    } else {
        "Set"
    };
    format!("{prefix}({})", names.join(", "))
}

fn check_none(names: Vec<&str>, mutable: bool, message: &str) -> Result<(), String> {
    if names.is_empty() {
        return Ok(());
    }
    Err(format!("{message}: {}", scala_set(&names, mutable)))
}

fn read_only_keys(props: &BTreeMap<String, String>) -> Vec<&str> {
    props
        .keys()
        .map(String::as_str)
        .filter(|k| is_read_only(k))
        .collect()
}

fn base_security_keys(props: &BTreeMap<String, String>) -> Vec<&str> {
    props
        .keys()
        .map(String::as_str)
        .filter(|k| SSL_BASE_KEYS.contains(k))
        .collect()
}

fn per_broker_keys(props: &BTreeMap<String, String>) -> Vec<&str> {
    props
        .keys()
        .map(String::as_str)
        .filter(|k| is_per_broker(k))
        .collect()
}

/// DynamicBrokerConfig.validateConfigTypes: listener overrides are checked
/// as their base key; quota keys first (Kafka defines them first).
fn check_types(props: &BTreeMap<String, String>) -> Result<(), ConfigError> {
    let mut base = BTreeMap::new();
    for (k, v) in props {
        base.insert(listener_base(k).unwrap_or(k), v.as_str());
    }
    let quota_first = base
        .iter()
        .filter(|(k, _)| quota_def(k).is_some())
        .chain(base.iter().filter(|(k, _)| quota_def(k).is_none()));
    for (k, v) in quota_first {
        if let Some(d) = dynamic_def(k) {
            defs::normalize_value(d, v)?;
        }
    }
    Ok(())
}

/// Kafka's DynamicBrokerConfig.validateConfigs(props, perBroker): the
/// ConfigException text AlterConfigs answers with INVALID_REQUEST.
pub fn validate_dynamic(props: &BTreeMap<String, String>, per_broker: bool) -> Result<(), String> {
    check_none(
        read_only_keys(props),
        false,
        "Cannot update these configs dynamically",
    )?;
    // DynamicSecurityConfigs is a wrapped Java set, so `filter` builds a
    // mutable.HashSet (Scala 2.13).
    check_none(
        base_security_keys(props),
        true,
        "These security configs can be dynamically updated only per-listener using the listener prefix",
    )?;
    check_types(props).map_err(|e| e.to_string())?;
    if !per_broker {
        check_none(
            per_broker_keys(props),
            false,
            "Cannot update these configs at default cluster level, broker id must be specified",
        )?;
    }
    Ok(())
}

/// Kafka's fromPersistentProps: what the store holds, minus keys that are
/// invalid, read-only, base SSL keys or (at the default level) per-broker.
/// Dropped keys are logged, never an error.
pub fn from_persistent_props(
    props: &BTreeMap<String, String>,
    per_broker: bool,
) -> BTreeMap<String, String> {
    let level = if per_broker {
        "broker"
    } else {
        "default cluster"
    };
    let mut out = props.clone();
    if check_types(&out).is_err() {
        // Kafka then checks each key alone to find the culprits.
        let invalid: Vec<String> = out
            .iter()
            .filter(|(k, v)| {
                check_types(&BTreeMap::from([(k.to_string(), v.to_string())])).is_err()
            })
            .map(|(k, _)| k.clone())
            .collect();
        log::error!(
            "Dynamic {level} config contains invalid values in: {invalid:?}, these configs will be ignored"
        );
        out.retain(|k, _| !invalid.contains(k));
    }
    drop_keys(
        &mut out,
        read_only_keys,
        "Non-dynamic configs configured in ZooKeeper will be ignored",
    );
    drop_keys(
        &mut out,
        base_security_keys,
        "Security configs can be dynamically updated only using listener prefix, base configs will be ignored",
    );
    if !per_broker {
        drop_keys(
            &mut out,
            per_broker_keys,
            "Per-broker configs defined at default cluster level will be ignored",
        );
    }
    out
}

fn drop_keys(
    props: &mut BTreeMap<String, String>,
    select: fn(&BTreeMap<String, String>) -> Vec<&str>,
    message: &str,
) {
    let names: Vec<String> = select(props).into_iter().map(str::to_string).collect();
    if !names.is_empty() {
        log::error!("{message}: {names:?}");
        props.retain(|k, _| !names.contains(k));
    }
}

/// DynamicBrokerConfig.isPasswordConfig: the name ends with a dynamic
/// PASSWORD key (so listener overrides and custom keys count too).
pub fn is_password_config(name: &str) -> bool {
    defs::broker_defs()
        .iter()
        .filter(|d| d.dynamic && d.config_type == ConfigType::Password)
        .any(|d| name.ends_with(d.name))
}

/// Kafka's toPersistentProps check for a per-broker resource: a password
/// is stored encrypted, which needs `password.encoder.secret` in the static
/// config. Upstream answers INVALID_CONFIG "Invalid config value for
/// resource ...: <message>". Only when not validateOnly, as in Kafka.
pub fn check_persistable(
    props: &BTreeMap<String, String>,
    static_config: &BrokerConfig,
) -> Result<(), String> {
    check_persistable_at(props, true, static_config)
}

/// `check_persistable` for either level: at the cluster default a password
/// key (for instance a custom key ending in ssl.key.password; the real
/// ones are refused earlier as per-broker) is refused first.
pub fn check_persistable_at(
    props: &BTreeMap<String, String>,
    per_broker: bool,
    static_config: &BrokerConfig,
) -> Result<(), String> {
    if !props.keys().any(|k| is_password_config(k)) {
        return Ok(());
    }
    if !per_broker {
        return Err("Password config can be defined only at broker level".to_string());
    }
    if !static_config
        .originals()
        .contains_key("password.encoder.secret")
    {
        return Err("Password encoder secret not configured".to_string());
    }
    // Kafka stores them encrypted with that secret; kshard does not encrypt
    // yet, and a password is never written to the store in the clear.
    Err(
        "kshard does not encrypt dynamic password configs yet; set them in server.properties"
            .to_string(),
    )
}

/// The live view: static config plus the two dynamic layers.
#[derive(Debug, Clone)]
pub struct BrokerConfigState {
    /// What the broker runs with.
    pub effective: Arc<BrokerConfig>,
    /// As started (file plus overrides, with post-load changes such as a
    /// generated broker id).
    pub static_config: Arc<BrokerConfig>,
    /// `/config/brokers/<default>`, after fromPersistentProps.
    pub dynamic_default: BTreeMap<String, String>,
    /// `/config/brokers/<this id>`, after fromPersistentProps.
    pub dynamic_broker: BTreeMap<String, String>,
}

impl BrokerConfigState {
    /// No dynamic configs: the effective config is the static one.
    pub fn from_static(static_config: Arc<BrokerConfig>) -> BrokerConfigState {
        BrokerConfigState {
            effective: static_config.clone(),
            static_config,
            dynamic_default: BTreeMap::new(),
            dynamic_broker: BTreeMap::new(),
        }
    }
}

/// Shared by every shard and thread: readers take one atomic load.
pub struct DynamicBrokerConfig {
    state: ArcSwap<BrokerConfigState>,
    /// Serializes the read-modify-write of updates.
    writer: Mutex<()>,
}

impl DynamicBrokerConfig {
    /// `static_config` is the config as the broker runs it before dynamic
    /// configs (broker id resolved, port 0 listeners bound).
    pub fn new(static_config: Arc<BrokerConfig>) -> DynamicBrokerConfig {
        DynamicBrokerConfig {
            state: ArcSwap::from_pointee(BrokerConfigState::from_static(static_config)),
            writer: Mutex::new(()),
        }
    }

    /// The effective config.
    pub fn current(&self) -> Arc<BrokerConfig> {
        self.state.load().effective.clone()
    }

    pub fn state(&self) -> Arc<BrokerConfigState> {
        self.state.load_full()
    }

    /// Replaces the `<default>` layer with what the store holds (the full
    /// props, not a diff). Returns the new effective config.
    pub fn update_default(&self, props: &BTreeMap<String, String>) -> Arc<BrokerConfig> {
        self.update(props, false)
    }

    /// Replaces this broker's layer with what the store holds.
    pub fn update_broker(&self, props: &BTreeMap<String, String>) -> Arc<BrokerConfig> {
        self.update(props, true)
    }

    /// Kafka's DynamicBrokerConfig.validate: validateConfigs, then the merged
    /// config must build (kshard also refuses values it does not support
    /// here, e.g. compression.type other than producer). `props` replace the
    /// layer they are for.
    pub fn validate(
        &self,
        props: &BTreeMap<String, String>,
        per_broker: bool,
    ) -> Result<(), String> {
        validate_dynamic(props, per_broker)?;
        let state = self.state();
        let (default, broker) = if per_broker {
            (&state.dynamic_default, props)
        } else {
            (props, &state.dynamic_broker)
        };
        build_effective(&state.static_config, default, broker)
            .map(|_| ())
            .map_err(|e| e.to_string())
    }

    fn update(&self, props: &BTreeMap<String, String>, per_broker: bool) -> Arc<BrokerConfig> {
        let _writer = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
        let old = self.state.load_full();
        let mut layer = from_persistent_props(props, per_broker);
        let effective = loop {
            let (default, broker) = if per_broker {
                (&old.dynamic_default, &layer)
            } else {
                (&layer, &old.dynamic_broker)
            };
            match build_effective(&old.static_config, default, broker) {
                Ok(cfg) => break Arc::new(cfg),
                // Unlike Kafka, drop the key the broker cannot run with, so
                // the layer DescribeConfigs shows is the one in effect.
                Err(e) if layer.contains_key(&e.key) => {
                    log::error!("dynamic config {} ignored: {e}", e.key);
                    layer.remove(&e.key);
                }
                Err(e) => {
                    log::error!(
                        "dynamic configs could not be applied, keeping the current config: {e}"
                    );
                    break old.effective.clone();
                }
            }
        };
        let mut next = (*old).clone();
        next.effective = effective.clone();
        if per_broker {
            next.dynamic_broker = layer;
        } else {
            next.dynamic_default = layer;
        }
        self.state.store(Arc::new(next));
        effective
    }
}

/// Kafka's brokerConfigSynonyms(name, matchListenerOverride).
fn synonym_names(name: &str, match_listener: bool) -> Vec<&str> {
    let group = defs::broker_synonyms(name);
    if !group.is_empty() {
        return group.to_vec();
    }
    match listener_base(name) {
        Some(base) if match_listener => {
            let mechanism = LISTENER_MECHANISM_CONFIGS
                .iter()
                .find(|k| base.ends_with(*k));
            vec![name, mechanism.copied().unwrap_or(base)]
        }
        _ => vec![name],
    }
}

/// Kafka's overrideProps: each overriding key first removes its synonyms
/// (a dynamic log.retention.ms removes a static log.retention.hours).
fn override_props(props: &mut BTreeMap<String, String>, overrides: &BTreeMap<String, String>) {
    for (k, v) in overrides {
        for synonym in synonym_names(k, false) {
            props.remove(synonym);
        }
        props.insert(k.clone(), v.clone());
    }
}

/// Keys whose value decides the bound listeners.
const LISTENER_SHAPE_KEYS: &[&str] = &[
    "advertised.listeners",
    "listener.security.protocol.map",
    "listeners",
];

/// Kafka's updateCurrentConfig: static, then the default layer, then the
/// per-broker layer, parsed as one config.
fn build_effective(
    static_config: &BrokerConfig,
    default: &BTreeMap<String, String>,
    broker: &BTreeMap<String, String>,
) -> Result<BrokerConfig, ConfigError> {
    let mut merged = static_config.originals().clone();
    override_props(&mut merged, default);
    override_props(&mut merged, broker);
    let mut cfg = BrokerConfig::from_map(&merged)?;
    // Set after load, not from the map: a generated id (cluster mode).
    cfg.broker_id = static_config.broker_id;
    // Port 0 listeners were bound to real ports after load; keep them unless
    // a dynamic layer changed the listeners.
    let unchanged = LISTENER_SHAPE_KEYS
        .iter()
        .all(|k| merged.get(*k) == static_config.originals().get(*k));
    if unchanged {
        cfg.listeners = static_config.listeners.clone();
        cfg.advertised_listeners = static_config.advertised_listeners.clone();
    }
    Ok(cfg)
}

/// Kafka's configSynonyms: each name of the group found in the per-broker
/// layer, then the default layer, then static, then non-null defaults,
/// dropping entries ranked above `name`. Values are as stored.
fn config_synonyms(
    state: &BrokerConfigState,
    name: &str,
    names: &[&str],
    sensitive: bool,
) -> Vec<(String, Option<String>, i8)> {
    let shown = |v: &str| (!sensitive).then(|| v.to_string());
    let layers = [
        (&state.dynamic_broker, SOURCE_DYNAMIC_BROKER_CONFIG),
        (&state.dynamic_default, SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG),
        (state.static_config.originals(), SOURCE_STATIC_BROKER_CONFIG),
    ];
    let mut all = Vec::new();
    for (map, source) in layers {
        for n in names {
            if let Some(v) = map.get(*n) {
                all.push((n.to_string(), shown(v), source));
            }
        }
    }
    for n in names {
        if let Some(v) = defs::broker_default(&state.static_config, n) {
            all.push((n.to_string(), shown(&v), SOURCE_DEFAULT_CONFIG));
        }
    }
    let first = all.iter().position(|s| s.0 == name).unwrap_or(all.len());
    all.split_off(first)
}

/// The broker-level synonyms of a topic key's broker synonym, for topic
/// DescribeConfigs (`name` is the broker key, e.g. log.retention.ms).
pub fn broker_synonyms_of(
    state: &BrokerConfigState,
    name: &str,
) -> Vec<(String, Option<String>, i8)> {
    config_synonyms(state, name, &synonym_names(name, true), false)
}

/// KafkaConfig.configType: the key's own type, a quota key's, or the type of
/// the base key a listener override stands for.
fn describe_type(name: &str) -> Option<ConfigType> {
    defs::broker_def(name)
        .or_else(|| quota_def(name))
        .or_else(|| {
            synonym_names(name, true)
                .into_iter()
                .find_map(defs::broker_def)
        })
        .map(|d| d.config_type)
}

/// ConfigHelper.createBrokerConfigEntry for one key; `raw` is its value in
/// the map being described (None: unset, shown as the default).
fn broker_entry(
    state: &BrokerConfigState,
    name: &str,
    raw: Option<&String>,
    per_broker: bool,
) -> ConfigEntry {
    let config_type = describe_type(name);
    let sensitive = matches!(config_type, None | Some(ConfigType::Password));
    let own_def = defs::broker_def(name);
    let value = match (raw, own_def) {
        _ if sensitive => None,
        (Some(raw), Some(d)) => Some(defs::normalize_value(d, raw).unwrap_or_else(|_| raw.clone())),
        (Some(raw), None) => Some(raw.clone()),
        (None, _) => defs::broker_default(&state.effective, name),
    };
    let mut synonyms = config_synonyms(state, name, &synonym_names(name, true), sensitive);
    if !per_broker {
        synonyms.retain(|s| s.2 == SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG);
    }
    ConfigEntry {
        name: name.to_string(),
        value,
        read_only: !is_dynamic(name),
        source: synonyms.first().map_or(SOURCE_DEFAULT_CONFIG, |s| s.2),
        is_sensitive: sensitive,
        synonyms,
        config_type: config_type.unwrap_or(ConfigType::Unknown) as i8,
        documentation: own_def.map(|d| d.doc.to_string()),
    }
}

/// DescribeConfigs BROKER "<this id>": every broker key, then keys no table
/// defines (static or dynamic custom keys, listener overrides, quota keys),
/// with values from the effective config and sources from all four layers.
pub fn broker_entries(state: &BrokerConfigState) -> Vec<ConfigEntry> {
    let originals = state.effective.originals();
    let all = defs::broker_defs();
    let mut entries = Vec::with_capacity(all.len() + state.effective.unknown_keys.len());
    for d in all {
        entries.push(broker_entry(state, d.name, originals.get(d.name), true));
    }
    for name in &state.effective.unknown_keys {
        entries.push(broker_entry(state, name, originals.get(name), true));
    }
    entries
}

/// DescribeConfigs BROKER "" (cluster default): only the keys of the
/// default layer, with only default-layer synonyms.
pub fn default_broker_entries(state: &BrokerConfigState) -> Vec<ConfigEntry> {
    state
        .dynamic_default
        .iter()
        .map(|(k, v)| broker_entry(state, k, Some(v), false))
        .collect()
}

#[cfg(test)]
#[path = "dynamic_tests.rs"]
mod tests;
