//! The ACL store over the embedded store (ZooKeeper's semantics): the
//! znodes and notifications Kafka writes, conditional writes that lose a
//! race and plan again, and loading.

use std::sync::atomic::{AtomicUsize, Ordering};

use super::*;
use crate::metadata::embedded::EmbeddedStore;
use crate::metadata::MetadataStore;
use crate::security::authorizer::zk_codec::{EXTENDED_CHANGE_PATH, LITERAL_CHANGE_PATH};
use crate::security::authorizer::{
    encode_acls, AccessControlEntry, AccessControlEntryFilter, AclBinding, AclBindingFilter,
    AclCache, AclOperation, AclPermissionType, AclSet, PatternType, ResourcePattern,
    ResourcePatternFilter, ResourceType,
};

struct Store {
    dir: std::path::PathBuf,
    store: EmbeddedStore,
}

impl Drop for Store {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn store() -> Store {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("kshard-acls-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut store = EmbeddedStore::open(&dir).expect("store");
    ensure_acl_paths(&mut store).expect("paths");
    Store { dir, store }
}

fn allow(principal: &str, op: AclOperation) -> AccessControlEntry {
    AccessControlEntry::new(principal, "*", op, AclPermissionType::Allow).unwrap()
}

fn binding(pattern: &ResourcePattern, entry: AccessControlEntry) -> AclBinding {
    AclBinding::new(pattern.clone(), entry)
}

fn cache() -> AclCache {
    AclCache::new(Vec::<String>::new(), false)
}

#[test]
fn creations_write_kafkas_znodes_and_notifications() {
    let mut s = store();
    let topic = ResourcePattern::literal(ResourceType::Topic, "orders");
    let prefix = ResourcePattern::prefixed(ResourceType::Group, "app-");
    let creations = [
        binding(&topic, allow("User:alice", AclOperation::Read)),
        binding(&topic, allow("User:alice", AclOperation::Describe)),
        binding(&prefix, allow("User:bob", AclOperation::Read)),
    ];
    let plan = create_in_store(&mut s.store, &cache(), &creations, true).unwrap();
    assert!(plan.results.iter().all(|r| r.code == 0));
    assert_eq!(plan.writes.len(), 2);
    let (data, stat) = s.store.get("/kafka-acl/Topic/orders").unwrap();
    assert_eq!(stat.version, 0);
    let expected: AclSet = creations[..2].iter().map(|b| b.entry.clone()).collect();
    assert_eq!(data, encode_acls(&expected));
    assert!(s
        .store
        .exists("/kafka-acl-extended/prefixed/Group/app-")
        .is_some());
    let literal = s.store.children(LITERAL_CHANGE_PATH).unwrap();
    assert_eq!(literal, vec!["acl_changes_0000000000"]);
    let (payload, _) = s
        .store
        .get(&format!("{LITERAL_CHANGE_PATH}/{}", literal[0]))
        .unwrap();
    assert_eq!(payload, b"TOPIC:orders");
    assert_eq!(s.store.children(EXTENDED_CHANGE_PATH).unwrap().len(), 1);
    // The same ACLs again: nothing to write, no notification.
    let again = create_in_store(&mut s.store, &cache(), &creations, true).unwrap();
    assert!(again.writes.is_empty());
    assert_eq!(s.store.children(LITERAL_CHANGE_PATH).unwrap().len(), 1);
}

#[test]
fn a_stale_cache_is_refreshed_from_the_store_before_writing() {
    let mut s = store();
    let topic = ResourcePattern::literal(ResourceType::Topic, "t");
    // Another broker wrote alice's ACL; this broker's cache never saw it.
    let alice = [binding(&topic, allow("User:alice", AclOperation::Read))];
    create_in_store(&mut s.store, &cache(), &alice, false).unwrap();
    let bob = [binding(&topic, allow("User:bob", AclOperation::Write))];
    create_in_store(&mut s.store, &cache(), &bob, false).unwrap();
    let stored = read_acls(&s.store, &topic).unwrap();
    assert_eq!(stored.acls.len(), 2, "{:?}", stored.acls);
    assert_eq!(stored.version, Some(1));
}

#[test]
fn deleting_the_last_acl_removes_the_znode_but_not_its_parent() {
    let mut s = store();
    let topic = ResourcePattern::literal(ResourceType::Topic, "gone");
    let creations = [binding(&topic, allow("User:alice", AclOperation::Read))];
    create_in_store(&mut s.store, &cache(), &creations, true).unwrap();
    // An exact filter finds it even when the cache does not hold it.
    let filter = AclBindingFilter::new(
        ResourcePatternFilter::new(ResourceType::Topic, Some("gone"), PatternType::Literal),
        AccessControlEntryFilter::any(),
    );
    let plan = delete_in_store(&mut s.store, &cache(), &[filter], true).unwrap();
    assert_eq!(plan.filter_results[0].len(), 1);
    assert!(s.store.exists("/kafka-acl/Topic/gone").is_none());
    assert!(s.store.exists("/kafka-acl/Topic").is_some());
    assert_eq!(s.store.children(LITERAL_CHANGE_PATH).unwrap().len(), 2);
    assert!(load_all(&s.store).unwrap().is_empty());
}

#[test]
fn load_all_reads_both_stores_and_skips_unknown_types() {
    let mut s = store();
    let literal = ResourcePattern::literal(ResourceType::Cluster, "kafka-cluster");
    let prefixed = ResourcePattern::prefixed(ResourceType::TransactionalId, "tx-");
    let creations = [
        binding(&literal, allow("User:a", AclOperation::Alter)),
        binding(&prefixed, allow("User:a", AclOperation::Write)),
    ];
    create_in_store(&mut s.store, &cache(), &creations, false).unwrap();
    s.store
        .create("/kafka-acl/Bogus", b"", false, false)
        .unwrap();
    let mut loaded: Vec<ResourcePattern> = load_all(&s.store)
        .unwrap()
        .into_iter()
        .map(|(p, _)| p)
        .collect();
    loaded.sort();
    let mut expected = vec![literal, prefixed];
    expected.sort();
    assert_eq!(loaded, expected);
}

#[test]
fn change_notifications_are_read_in_order_and_name_their_pattern() {
    let mut s = store();
    let a = ResourcePattern::literal(ResourceType::Topic, "a:b");
    let p = ResourcePattern::prefixed(ResourceType::Topic, "p-");
    // Two changes of `a`, one of `p`; the repeat of `a` changes nothing
    // and is not notified.
    for (pattern, principal) in [
        (&a, "User:x"),
        (&p, "User:x"),
        (&a, "User:y"),
        (&a, "User:y"),
    ] {
        let creations = [binding(pattern, allow(principal, AclOperation::Read))];
        create_in_store(&mut s.store, &cache(), &creations, true).unwrap();
    }
    let literal = pending_changes(&s.store, LITERAL_CHANGE_PATH, None).unwrap();
    assert_eq!(literal.len(), 2);
    assert!(literal[0].sequence < literal[1].sequence);
    let (pattern, acls) = read_change(&s.store, LITERAL_CHANGE_PATH, &literal[0])
        .unwrap()
        .unwrap();
    assert_eq!(pattern, a);
    assert_eq!(acls.len(), 2);
    let later = pending_changes(&s.store, LITERAL_CHANGE_PATH, Some(literal[0].sequence)).unwrap();
    assert_eq!(later.len(), 1);
    let extended = pending_changes(&s.store, EXTENDED_CHANGE_PATH, None).unwrap();
    let (pattern, _) = read_change(&s.store, EXTENDED_CHANGE_PATH, &extended[0])
        .unwrap()
        .unwrap();
    assert_eq!(pattern, p);
    // Nothing is older than 15 minutes yet.
    assert_eq!(
        purge_obsolete_changes(
            &mut s.store,
            LITERAL_CHANGE_PATH,
            crate::util::now_ms() as i64
        ),
        0
    );
    let far_future = crate::util::now_ms() as i64 + CHANGE_EXPIRATION_MS + 1;
    assert_eq!(
        purge_obsolete_changes(&mut s.store, LITERAL_CHANGE_PATH, far_future),
        2
    );
}
