//! ACLs in the metadata store, where Kafka's ZooKeeper-mode AclAuthorizer
//! keeps them (`/kafka-acl/<Type>/<name>`,
//! `/kafka-acl-extended/prefixed/<Type>/<name>`) and the change
//! notifications every broker follows (`/kafka-acl-changes`,
//! `/kafka-acl-extended-changes`): loading, conditional updates by znode
//! version (AclAuthorizer.updateResourceAcls) and the listener's reads.
//! Synchronous, like every store call: the ZooKeeper worker thread or the
//! embedded store's shard runs them.

use std::collections::HashMap;
use std::time::Duration;

use super::{MetadataStore, StoreError, StoreResult, ANY_VERSION};
use crate::security::authorizer::zk_codec::{
    acl_paths_to_create, acl_store_path, parse_acl_type_dir, CHANGE_PREFIX, EXTENDED_CHANGE_PATH,
    LITERAL_CHANGE_PATH,
};
use crate::security::authorizer::{
    acl_znode_path, create_acls, decode_acls, decode_change, delete_acls, AclBinding,
    AclBindingFilter, AclCache, AclSet, AclWrite, CreateAclsPlan, DeleteAclsPlan, PatternType,
    ResourcePattern, ResourceType,
};

/// AclAuthorizer.maxUpdateRetries.
const MAX_UPDATE_RETRIES: u32 = 10;
/// ZkNodeChangeNotificationListener's changeExpirationMs.
pub const CHANGE_EXPIRATION_MS: i64 = 15 * 60 * 1000;
/// The two change roots, literal first.
pub const CHANGE_PATHS: [&str; 2] = [LITERAL_CHANGE_PATH, EXTENDED_CHANGE_PATH];

/// A pattern's stored ACLs and its znode's version (None: no znode).
#[derive(Debug, Clone, Default)]
pub struct VersionedAcls {
    pub acls: AclSet,
    pub version: Option<i32>,
}

fn corrupt(path: &str, e: String) -> StoreError {
    StoreError::Corrupt(format!("{path}: {e}"))
}

/// KafkaZkClient.createAclPaths.
pub fn ensure_acl_paths(store: &mut dyn MetadataStore) -> StoreResult<()> {
    for path in acl_paths_to_create() {
        if store.exists(&path).is_none() {
            match store.create_all(&path, &[]) {
                Ok(_) | Err(StoreError::NodeExists(_)) => {}
                Err(e) => return Err(e),
            }
        }
    }
    Ok(())
}

/// KafkaZkClient.getVersionedAclsForResource.
pub fn read_acls(
    store: &dyn MetadataStore,
    pattern: &ResourcePattern,
) -> StoreResult<VersionedAcls> {
    let path = acl_znode_path(pattern).map_err(StoreError::BadArguments)?;
    match store.get(&path) {
        Ok((bytes, stat)) => Ok(VersionedAcls {
            acls: decode_acls(&bytes).map_err(|e| corrupt(&path, e))?,
            version: Some(stat.version),
        }),
        Err(StoreError::NoNode(_)) => Ok(VersionedAcls::default()),
        Err(e) => Err(e),
    }
}

/// AclAuthorizer.loadCache: every stored pattern with its ACLs; unknown
/// type directories are skipped, as Kafka skips them.
pub fn load_all(store: &dyn MetadataStore) -> StoreResult<Vec<(ResourcePattern, AclSet)>> {
    let mut out = Vec::new();
    for pattern_type in [PatternType::Literal, PatternType::Prefixed] {
        let root = acl_store_path(pattern_type).map_err(StoreError::BadArguments)?;
        let type_dirs = match store.children(&root) {
            Ok(c) => c,
            Err(StoreError::NoNode(_)) => continue,
            Err(e) => return Err(e),
        };
        for dir in type_dirs {
            let Some(resource_type) = parse_acl_type_dir(&dir) else {
                log::warn!("Ignoring unknown ResourceType: {dir}");
                continue;
            };
            load_type(store, &root, &dir, resource_type, pattern_type, &mut out)?;
        }
    }
    Ok(out)
}

fn load_type(
    store: &dyn MetadataStore,
    root: &str,
    dir: &str,
    resource_type: ResourceType,
    pattern_type: PatternType,
    out: &mut Vec<(ResourcePattern, AclSet)>,
) -> StoreResult<()> {
    let names = match store.children(&format!("{root}/{dir}")) {
        Ok(n) => n,
        Err(StoreError::NoNode(_)) => return Ok(()),
        Err(e) => return Err(e),
    };
    for name in names {
        let pattern =
            ResourcePattern::new(resource_type, name, pattern_type).map_err(StoreError::Corrupt)?;
        let stored = read_acls(store, &pattern)?;
        if !stored.acls.is_empty() {
            out.push((pattern, stored.acls));
        }
    }
    Ok(())
}

/// Whether a pattern can name a znode (the creation checks refuse the rest
/// before anything is written).
fn storable(pattern: &ResourcePattern) -> bool {
    pattern.pattern_type.is_specific()
        && !pattern.resource_type.is_unknown()
        && pattern.resource_type != ResourceType::Any
        && !pattern.name.is_empty()
        && !pattern.name.contains('/')
}

/// One conditional write of a pattern's new set (create, set or delete by
/// the version read); false when another writer got there first.
fn write_conditionally(
    store: &mut dyn MetadataStore,
    write: &AclWrite,
    version: Option<i32>,
    notify: bool,
) -> StoreResult<bool> {
    let path = write.znode_path().map_err(StoreError::BadArguments)?;
    let outcome = match (write.znode_data(), version) {
        (Some(data), Some(v)) => store.set(&path, &data, v).map(|_| ()),
        (Some(data), None) => store.create(&path, &data, false, false).map(|_| ()),
        (None, Some(v)) => match store.delete(&path, v) {
            Err(StoreError::NoNode(_)) => Ok(()),
            other => other,
        },
        (None, None) => Ok(()),
    };
    match outcome {
        Ok(()) => {}
        Err(StoreError::BadVersion(_) | StoreError::NodeExists(_) | StoreError::NoNode(_)) => {
            return Ok(false)
        }
        Err(e) => return Err(e),
    }
    if notify {
        let (prefix, data) = write.notification().map_err(StoreError::BadArguments)?;
        store.create(&prefix, &data, false, true)?;
    }
    Ok(true)
}

/// Reads the patterns a request touches into a copy of the cache, so the
/// plan starts from what is stored (another broker may have written since
/// this one's cache was updated), with the versions to write against.
fn refreshed(
    store: &dyn MetadataStore,
    cache: &AclCache,
    patterns: impl IntoIterator<Item = ResourcePattern>,
) -> StoreResult<(AclCache, HashMap<ResourcePattern, Option<i32>>)> {
    let mut copy = cache.clone();
    let mut versions = HashMap::new();
    for pattern in patterns {
        if versions.contains_key(&pattern) || !storable(&pattern) {
            continue;
        }
        let stored = read_acls(store, &pattern)?;
        copy.update(pattern.clone(), stored.acls)
            .map_err(StoreError::BadArguments)?;
        versions.insert(pattern, stored.version);
    }
    Ok((copy, versions))
}

/// Writes a plan's sets; false if one lost a race (the caller plans again).
fn write_all(
    store: &mut dyn MetadataStore,
    writes: &[AclWrite],
    versions: &HashMap<ResourcePattern, Option<i32>>,
    notify: bool,
) -> StoreResult<bool> {
    for w in writes {
        let version = versions.get(&w.pattern).copied().flatten();
        if !write_conditionally(store, w, version, notify)? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// A pause before planning again (AclAuthorizer's 100-149 ms backoff).
fn backoff(attempt: u32) {
    let jitter_ms = (crate::util::now_ms() ^ u64::from(attempt).wrapping_mul(7919)) % 50;
    std::thread::sleep(Duration::from_millis(100 + jitter_ms));
}

fn retries_exhausted(what: &str) -> StoreError {
    StoreError::Corrupt(format!(
        "Failed to update ACLs for {what} after trying a maximum of {MAX_UPDATE_RETRIES} times"
    ))
}

/// CreateAcls against the store: plans from the stored sets of the
/// patterns named, writes each changed set conditionally (with a change
/// notification when `notify`), and plans again if another writer won.
/// The caller applies the returned plan's writes to its cache.
pub fn create_in_store(
    store: &mut dyn MetadataStore,
    cache: &AclCache,
    creations: &[AclBinding],
    notify: bool,
) -> StoreResult<CreateAclsPlan> {
    for attempt in 0..=MAX_UPDATE_RETRIES {
        let patterns = creations.iter().map(|b| b.pattern.clone());
        let (copy, versions) = refreshed(store, cache, patterns)?;
        let plan = create_acls(&copy, creations);
        if write_all(store, &plan.writes, &versions, notify)? {
            return Ok(plan);
        }
        backoff(attempt);
    }
    Err(retries_exhausted("the created bindings"))
}

/// DeleteAcls against the store: the patterns are the cache's that a
/// filter matches plus each filter's exact pattern (AclAuthorizer.deleteAcls
/// covers stored patterns this broker has not seen yet that way).
pub fn delete_in_store(
    store: &mut dyn MetadataStore,
    cache: &AclCache,
    filters: &[AclBindingFilter],
    notify: bool,
) -> StoreResult<DeleteAclsPlan> {
    for attempt in 0..=MAX_UPDATE_RETRIES {
        let mut patterns: Vec<ResourcePattern> = cache
            .resources()
            .map(|(p, _)| p)
            .filter(|p| filters.iter().any(|f| f.pattern_filter.matches(p)))
            .collect();
        patterns.extend(filters.iter().filter_map(exact_pattern));
        let (copy, versions) = refreshed(store, cache, patterns)?;
        let plan = delete_acls(&copy, filters);
        if write_all(store, &plan.writes, &versions, notify)? {
            return Ok(plan);
        }
        backoff(attempt);
    }
    Err(retries_exhausted("the filtered bindings"))
}

/// The one pattern a filter can match, if it names one.
fn exact_pattern(filter: &AclBindingFilter) -> Option<ResourcePattern> {
    let f = &filter.pattern_filter;
    if !f.matches_at_most_one() {
        return None;
    }
    ResourcePattern::new(f.resource_type, f.name.clone()?, f.pattern_type).ok()
}

/// One change notification: its root, sequence and child name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AclChangeNotification {
    pub sequence: u64,
    pub path: String,
}

/// The notifications under `root` after `last_applied`, in order.
pub fn pending_changes(
    store: &dyn MetadataStore,
    root: &str,
    last_applied: Option<u64>,
) -> StoreResult<Vec<AclChangeNotification>> {
    let mut pending: Vec<AclChangeNotification> = store
        .children(root)?
        .into_iter()
        .filter_map(|c| {
            let sequence = c.strip_prefix(CHANGE_PREFIX)?.parse().ok()?;
            Some(AclChangeNotification {
                sequence,
                path: format!("{root}/{c}"),
            })
        })
        .filter(|n| last_applied.is_none_or(|last| n.sequence > last))
        .collect();
    pending.sort_by_key(|n| n.sequence);
    Ok(pending)
}

/// AclAuthorizer.processAclChangeNotification: the pattern a notification
/// names and its stored ACLs now. None if the notification is gone
/// (purged) or unreadable (logged, skipped as Kafka skips it).
pub fn read_change(
    store: &dyn MetadataStore,
    root: &str,
    change: &AclChangeNotification,
) -> StoreResult<Option<(ResourcePattern, AclSet)>> {
    let bytes = match store.get(&change.path) {
        Ok((bytes, _)) => bytes,
        Err(StoreError::NoNode(_)) => return Ok(None),
        Err(e) => return Err(e),
    };
    let pattern = match decode_change(root, &bytes) {
        Ok(p) => p,
        Err(e) => {
            log::error!("ACL change {}: {e}; skipped", change.path);
            return Ok(None);
        }
    };
    let stored = read_acls(store, &pattern)?;
    Ok(Some((pattern, stored.acls)))
}

/// Deletes notifications older than `CHANGE_EXPIRATION_MS` (best-effort,
/// as every broker does).
pub fn purge_obsolete_changes(store: &mut dyn MetadataStore, root: &str, now_ms: i64) -> usize {
    let Ok(children) = store.children(root) else {
        return 0;
    };
    let mut purged = 0;
    for child in children {
        let path = format!("{root}/{child}");
        let Some(stat) = store.exists(&path) else {
            continue;
        };
        if now_ms - stat.ctime_ms > CHANGE_EXPIRATION_MS && store.delete(&path, ANY_VERSION).is_ok()
        {
            purged += 1;
        }
    }
    purged
}

#[cfg(test)]
#[path = "acls_tests.rs"]
mod tests;
