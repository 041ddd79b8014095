//! Entity configs and their change notifications, as Kafka's AdminZkClient
//! and ZkConfigManager lay them out in ZooKeeper (and the embedded store):
//! `/config/<type>/<name>` holds `{"version":1,"config":{...}}` (the whole
//! override set, never a diff), and every change adds a persistent
//! sequential `/config/changes/config_change_<seq>` naming the entity
//! (`{"version":2,"entity_path":"topics/foo"}`). Brokers apply the
//! notifications above the last sequence they processed, re-reading the
//! entity, and delete notifications older than 15 minutes.

use std::collections::BTreeMap;

use serde_json::Value;

use super::topics::{decode_entity_config, encode_config_change, encode_entity_config};
use super::topics::{CONFIG_CHANGES_PATH, TOPIC_CONFIGS_PATH};
use super::{MetadataStore, Op, StoreError, StoreResult, ANY_VERSION};

/// Kafka's ConfigType names (the second path segment).
pub const TOPICS: &str = "topics";
pub const BROKERS: &str = "brokers";
pub const USERS: &str = "users";
pub const CLIENTS: &str = "clients";
pub const IPS: &str = "ips";
/// ZooKeeper's name for an entity's default (`ConfigEntityName.DEFAULT`).
pub const DEFAULT_ENTITY: &str = "<default>";
/// Notification child prefix (ConfigEntityChangeNotificationSequenceZNode).
pub const CHANGE_PREFIX: &str = "config_change_";
/// ZkNodeChangeNotificationListener's changeExpirationMs default.
pub const CHANGE_EXPIRATION_MS: i64 = 15 * 60 * 1000;

/// An entity path below `/config`: `topics/foo`, `brokers/<default>`,
/// `users/alice/clients/app`.
pub fn entity_config_path(entity_path: &str) -> String {
    format!("/config/{entity_path}")
}

/// `topics/<t>` for a topic.
pub fn topic_entity(topic: &str) -> String {
    debug_assert_eq!(TOPIC_CONFIGS_PATH, "/config/topics");
    format!("{TOPICS}/{topic}")
}

/// `brokers/<id>`, or `brokers/<default>` for the cluster-wide layer.
pub fn broker_entity(broker_id: Option<i32>) -> String {
    match broker_id {
        Some(id) => format!("{BROKERS}/{id}"),
        None => format!("{BROKERS}/{DEFAULT_ENTITY}"),
    }
}

/// The stored overrides of an entity; a missing znode is an empty set
/// (AdminZkClient.fetchEntityConfig).
pub fn fetch_entity_config(
    store: &dyn MetadataStore,
    entity_path: &str,
) -> StoreResult<BTreeMap<String, String>> {
    let path = entity_config_path(entity_path);
    match store.get(&path) {
        // A parent made for a child entity (`users/<u>` of
        // `users/<u>/clients/<c>`) has no data: no configs, as in Kafka.
        Ok((bytes, _)) if bytes.is_empty() => Ok(BTreeMap::new()),
        Ok((bytes, _)) => decode_entity_config(&path, &bytes),
        Err(StoreError::NoNode(_)) => Ok(BTreeMap::new()),
        Err(e) => Err(e),
    }
}

/// AdminZkClient.changeConfigs: replaces the entity's overrides (creating
/// the znode and its parents if needed) and posts a change notification,
/// in one multi so no broker sees one without the other.
pub fn change_entity_config(
    store: &mut dyn MetadataStore,
    entity_path: &str,
    configs: &BTreeMap<String, String>,
) -> StoreResult<()> {
    let path = entity_config_path(entity_path);
    if store.exists(CONFIG_CHANGES_PATH).is_none() {
        create_if_absent(store, CONFIG_CHANGES_PATH)?;
    }
    let data = encode_entity_config(configs).into_bytes();
    let write = if store.exists(&path).is_some() {
        Op::SetData {
            path,
            data,
            expected_version: ANY_VERSION,
        }
    } else {
        // `users/<u>/clients/<c>` needs its user node; create parents first.
        let parent = super::parent_of(&path).to_string();
        if store.exists(&parent).is_none() {
            create_if_absent(store, &parent)?;
        }
        Op::Create {
            path,
            data,
            ephemeral: false,
            sequential: false,
        }
    };
    let notify = Op::Create {
        path: format!("{CONFIG_CHANGES_PATH}/{CHANGE_PREFIX}"),
        data: encode_config_change(entity_path).into_bytes(),
        ephemeral: false,
        sequential: true,
    };
    store.multi(&[write, notify]).map(|_| ())
}

/// Kafka's changeConfigs for a quota entity left with no configs
/// (tryCleanQuotaNodes): the entity's znode goes if it has no children,
/// and so do a user's `clients` node and the user's own node once empty;
/// the change notification is posted all the same.
pub fn remove_quota_entity(store: &mut dyn MetadataStore, entity_path: &str) -> StoreResult<()> {
    if store.exists(CONFIG_CHANGES_PATH).is_none() {
        create_if_absent(store, CONFIG_CHANGES_PATH)?;
    }
    let mut path = entity_config_path(entity_path);
    // Up the chain `/config/users/<u>/clients/<c>` → `.../clients` → `/config/users/<u>`.
    loop {
        let is_entity = path == entity_config_path(entity_path);
        let removable = match store.children(&path) {
            // The entity's own configs are what is being removed.
            Ok(children) => children.is_empty() && (is_entity || has_no_configs(store, &path)?),
            Err(StoreError::NoNode(_)) => false,
            Err(e) => return Err(e),
        };
        if removable {
            store.delete(&path, ANY_VERSION)?;
        } else if is_entity && store.exists(&path).is_some() {
            // An entity with child entities stays, with no configs of its own.
            let empty = encode_entity_config(&BTreeMap::new());
            store.set(&path, empty.as_bytes(), ANY_VERSION)?;
        }
        let parent = super::parent_of(&path).to_string();
        let depth = parent.matches('/').count();
        // Stop at `/config/users` (and `/config/clients`): never removed.
        if !removable || depth < 3 {
            break;
        }
        path = parent;
    }
    store
        .create(
            &format!("{CONFIG_CHANGES_PATH}/{CHANGE_PREFIX}"),
            encode_config_change(entity_path).as_bytes(),
            false,
            true,
        )
        .map(|_| ())
}

/// A node with no data, or an entity node with an empty config set.
fn has_no_configs(store: &dyn MetadataStore, path: &str) -> StoreResult<bool> {
    let (bytes, _) = store.get(path)?;
    Ok(bytes.is_empty() || decode_entity_config(path, &bytes).is_ok_and(|c| c.is_empty()))
}

fn create_if_absent(store: &mut dyn MetadataStore, path: &str) -> StoreResult<()> {
    match store.create_all(path, b"") {
        Ok(_) | Err(StoreError::NodeExists(_)) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Every stored quota entity path (`users/<u>`, `users/<u>/clients/<c>`,
/// `clients/<c>`, `ips/<ip>`), for DescribeClientQuotas and start-up.
pub fn list_quota_entities(store: &dyn MetadataStore) -> StoreResult<Vec<String>> {
    let children = |path: &str| match store.children(path) {
        Ok(c) => Ok(c),
        Err(StoreError::NoNode(_)) => Ok(Vec::new()),
        Err(e) => Err(e),
    };
    let mut out = Vec::new();
    for user in children(&format!("/config/{USERS}"))? {
        out.push(format!("{USERS}/{user}"));
        for client in children(&format!("/config/{USERS}/{user}/{CLIENTS}"))? {
            out.push(format!("{USERS}/{user}/{CLIENTS}/{client}"));
        }
    }
    for client in children(&format!("/config/{CLIENTS}"))? {
        out.push(format!("{CLIENTS}/{client}"));
    }
    for ip in children(&format!("/config/{IPS}"))? {
        out.push(format!("{IPS}/{ip}"));
    }
    Ok(out)
}

/// One stored entity and its configs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredEntityConfig {
    pub entity_path: String,
    pub configs: BTreeMap<String, String>,
}

/// Every stored quota entity with its configs (start-up, and
/// DescribeClientQuotas, which reads the store as Kafka reads ZooKeeper).
pub fn read_quota_entities(store: &dyn MetadataStore) -> StoreResult<Vec<StoredEntityConfig>> {
    list_quota_entities(store)?
        .into_iter()
        .map(|entity_path| {
            let configs = fetch_entity_config(store, &entity_path)?;
            Ok(StoredEntityConfig {
                entity_path,
                configs,
            })
        })
        .collect()
}

/// The sequence number of a notification child, None for other names.
pub fn change_sequence(child: &str) -> Option<u64> {
    child.strip_prefix(CHANGE_PREFIX)?.parse().ok()
}

/// The entity a notification names: version 2's `entity_path`, or version
/// 1's `entity_type` and `entity_name` (still accepted by Kafka's reader).
pub fn parse_change_notification(bytes: &[u8]) -> Result<String, String> {
    let v: Value = serde_json::from_slice(bytes).map_err(|e| format!("not JSON: {e}"))?;
    match v.get("version").and_then(Value::as_i64) {
        Some(2) => v
            .get("entity_path")
            .and_then(Value::as_str)
            .filter(|p| p.split('/').count() >= 2)
            .map(str::to_string)
            .ok_or_else(|| "version 2 notification without a valid entity_path".to_string()),
        Some(1) => {
            let kind = v.get("entity_type").and_then(Value::as_str);
            let name = v.get("entity_name").and_then(Value::as_str);
            match (kind, name) {
                (Some(k @ (TOPICS | CLIENTS)), Some(n)) => Ok(format!("{k}/{n}")),
                _ => Err("version 1 notification without a topics/clients entity".to_string()),
            }
        }
        other => Err(format!("unsupported notification version {other:?}")),
    }
}

/// One change notification to apply, in sequence order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigChangeNotification {
    pub sequence: u64,
    pub entity_path: String,
}

/// The notifications after `last_applied` (all of them for None), sorted
/// by sequence; unreadable ones are logged and skipped, as Kafka's
/// listener skips a notification whose handler fails.
pub fn pending_notifications(
    store: &dyn MetadataStore,
    last_applied: Option<u64>,
) -> StoreResult<Vec<ConfigChangeNotification>> {
    let mut children: Vec<(u64, String)> = store
        .children(CONFIG_CHANGES_PATH)?
        .into_iter()
        .filter_map(|c| change_sequence(&c).map(|s| (s, c)))
        .filter(|(s, _)| last_applied.is_none_or(|last| *s > last))
        .collect();
    children.sort();
    let mut out = Vec::with_capacity(children.len());
    for (sequence, child) in children {
        let path = format!("{CONFIG_CHANGES_PATH}/{child}");
        match store.get(&path) {
            Ok((bytes, _)) => match parse_change_notification(&bytes) {
                Ok(entity_path) => out.push(ConfigChangeNotification {
                    sequence,
                    entity_path,
                }),
                Err(e) => log::error!("config change {path}: {e}; skipped"),
            },
            // Purged by another broker meanwhile: its entity was re-read by
            // whoever applied a later change, or is read at start-up.
            Err(StoreError::NoNode(_)) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}

/// Deletes notifications created more than `expiration_ms` before
/// `now_ms` (every broker does this; deletes are best-effort).
pub fn purge_obsolete_notifications(
    store: &mut dyn MetadataStore,
    now_ms: i64,
    expiration_ms: i64,
) -> usize {
    let Ok(children) = store.children(CONFIG_CHANGES_PATH) else {
        return 0;
    };
    let mut purged = 0;
    for child in children {
        let path = format!("{CONFIG_CHANGES_PATH}/{child}");
        let Some(stat) = store.exists(&path) else {
            continue;
        };
        if now_ms - stat.ctime_ms > expiration_ms && store.delete(&path, ANY_VERSION).is_ok() {
            purged += 1;
        }
    }
    purged
}

/// The entity a notification names, split for the handlers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigEntity {
    Topic(String),
    /// None: the cluster-wide `<default>`.
    Broker(Option<i32>),
    /// Quota and credential entities (users, clients, ips): applied by
    /// their own managers.
    Other(String),
}

/// An entity's whole stored config, read after a change notification, to
/// apply on the controller shard.
#[derive(Debug, Clone)]
pub struct EntityConfigChange {
    pub entity: ConfigEntity,
    pub props: BTreeMap<String, String>,
}

/// Classifies an entity path; a broker name that is neither `<default>`
/// nor an integer is an error, as Kafka's BrokerConfigHandler refuses it.
pub fn classify_entity(entity_path: &str) -> Result<ConfigEntity, String> {
    let (kind, name) = entity_path
        .split_once('/')
        .ok_or_else(|| format!("bad entity path {entity_path}"))?;
    match kind {
        TOPICS => Ok(ConfigEntity::Topic(name.to_string())),
        BROKERS if name == DEFAULT_ENTITY => Ok(ConfigEntity::Broker(None)),
        BROKERS => name
            .parse()
            .map(|id| ConfigEntity::Broker(Some(id)))
            .map_err(|_| format!("bad broker entity {name}")),
        _ => Ok(ConfigEntity::Other(entity_path.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::embedded::EmbeddedStore;

    /// A fresh store in its own directory, removed when dropped.
    struct TempStore(std::path::PathBuf);

    impl Drop for TempStore {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn store() -> (TempStore, EmbeddedStore) {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("kshard-configs-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let s = EmbeddedStore::open(&dir).unwrap();
        (TempStore(dir), s)
    }

    #[test]
    fn change_writes_entity_and_notification() {
        let (_d, mut s) = store();
        let cfg: BTreeMap<String, String> = [("retention.ms".into(), "1000".into())].into();
        change_entity_config(&mut s, &topic_entity("foo"), &cfg).unwrap();
        change_entity_config(&mut s, &broker_entity(None), &BTreeMap::new()).unwrap();
        let (bytes, _) = s.get("/config/topics/foo").unwrap();
        assert_eq!(bytes, br#"{"version":1,"config":{"retention.ms":"1000"}}"#);
        assert_eq!(fetch_entity_config(&s, "topics/foo").unwrap(), cfg);
        assert!(fetch_entity_config(&s, "topics/none").unwrap().is_empty());
        let pending = pending_notifications(&s, None).unwrap();
        assert_eq!(pending.len(), 2);
        assert_eq!(pending[0].entity_path, "topics/foo");
        assert_eq!(pending[1].entity_path, "brokers/<default>");
        assert!(pending[0].sequence < pending[1].sequence);
        let later = pending_notifications(&s, Some(pending[0].sequence)).unwrap();
        assert_eq!(later, pending[1..].to_vec());
        change_entity_config(&mut s, "users/alice/clients/app", &cfg).unwrap();
        assert_eq!(
            fetch_entity_config(&s, "users/alice/clients/app").unwrap(),
            cfg
        );
        // The user node made as the pair's parent holds no configs.
        assert!(fetch_entity_config(&s, "users/alice").unwrap().is_empty());
    }

    #[test]
    fn an_emptied_quota_entity_is_removed_with_its_empty_parents() {
        let (_d, mut s) = store();
        let cfg: BTreeMap<String, String> = [("producer_byte_rate".into(), "1".into())].into();
        change_entity_config(&mut s, "users/alice/clients/app", &cfg).unwrap();
        change_entity_config(&mut s, "users/bob", &cfg).unwrap();
        change_entity_config(&mut s, "users/bob/clients/x", &cfg).unwrap();
        change_entity_config(&mut s, "clients/<default>", &cfg).unwrap();
        assert_eq!(
            list_quota_entities(&s).unwrap(),
            [
                "users/alice",
                "users/alice/clients/app",
                "users/bob",
                "users/bob/clients/x",
                "clients/<default>"
            ]
        );
        remove_quota_entity(&mut s, "users/alice/clients/app").unwrap();
        assert!(s.exists("/config/users/alice").is_none());
        assert!(s.exists("/config/users").is_some());
        // A user with client entities keeps its node, emptied.
        remove_quota_entity(&mut s, "users/bob").unwrap();
        assert!(fetch_entity_config(&s, "users/bob").unwrap().is_empty());
        // Its last client takes the emptied user node with it.
        remove_quota_entity(&mut s, "users/bob/clients/x").unwrap();
        assert!(s.exists("/config/users/bob").is_none());
        remove_quota_entity(&mut s, "clients/<default>").unwrap();
        assert!(list_quota_entities(&s).unwrap().is_empty());
        assert_eq!(pending_notifications(&s, None).unwrap().len(), 8);
    }

    #[test]
    fn purge_deletes_only_old_notifications() {
        let (_d, mut s) = store();
        change_entity_config(&mut s, "topics/a", &BTreeMap::new()).unwrap();
        let now = crate::util::now_ms() as i64;
        assert_eq!(
            purge_obsolete_notifications(&mut s, now, CHANGE_EXPIRATION_MS),
            0
        );
        let later = now + CHANGE_EXPIRATION_MS + 1_000;
        assert_eq!(
            purge_obsolete_notifications(&mut s, later, CHANGE_EXPIRATION_MS),
            1
        );
        assert!(pending_notifications(&s, None).unwrap().is_empty());
    }

    #[test]
    fn notification_formats() {
        assert_eq!(
            parse_change_notification(br#"{"version":2,"entity_path":"brokers/1"}"#).unwrap(),
            "brokers/1"
        );
        assert_eq!(
            parse_change_notification(br#"{"version":1,"entity_type":"topics","entity_name":"t"}"#)
                .unwrap(),
            "topics/t"
        );
        assert!(parse_change_notification(br#"{"version":2,"entity_path":"x"}"#).is_err());
        assert!(parse_change_notification(br#"{"version":3}"#).is_err());
        assert!(parse_change_notification(b"{").is_err());
        assert_eq!(change_sequence("config_change_0000000012"), Some(12));
        assert_eq!(change_sequence("other"), None);
        assert_eq!(
            classify_entity("brokers/<default>").unwrap(),
            ConfigEntity::Broker(None)
        );
        assert_eq!(
            classify_entity("brokers/3").unwrap(),
            ConfigEntity::Broker(Some(3))
        );
        assert!(classify_entity("brokers/x").is_err());
        assert_eq!(
            classify_entity("topics/t").unwrap(),
            ConfigEntity::Topic("t".into())
        );
    }
}
