//! Tests of AclCache against AclAuthorizer.authorizeAction and
//! authorizeByResourceType, modelled on Kafka's AclAuthorizerTest and
//! BaseAuthorizerTest cases.

use super::cache::{parse_super_users, AclCache, AclSet};
use super::model::*;

use AclOperation::*;
use AclPermissionType::{Allow, Deny};
use ResourceType::{Cluster, Group, Topic, TransactionalId};

fn ace(
    principal: &str,
    host: &str,
    op: AclOperation,
    perm: AclPermissionType,
) -> AccessControlEntry {
    AccessControlEntry::new(principal, host, op, perm).expect("valid entry")
}

fn cache(
    acls: &[(ResourcePattern, AccessControlEntry)],
    supers: &[&str],
    everyone: bool,
) -> AclCache {
    let mut c = AclCache::new(supers.iter().copied(), everyone);
    for (pattern, entry) in acls {
        let mut set: AclSet = c.acls(pattern).cloned().unwrap_or_default();
        set.insert(entry.clone());
        c.update(pattern.clone(), set).expect("storable pattern");
    }
    c
}

fn lit(rt: ResourceType, name: &str) -> ResourcePattern {
    ResourcePattern::literal(rt, name)
}

fn pre(rt: ResourceType, name: &str) -> ResourcePattern {
    ResourcePattern::prefixed(rt, name)
}

fn fixture(everyone: bool) -> AclCache {
    cache(
        &[
            (lit(Topic, "foo"), ace("User:alice", "*", Read, Allow)),
            (lit(Topic, "foo"), ace("User:bob", "10.0.0.1", Write, Allow)),
            (lit(Topic, "foo"), ace("User:carol", "*", All, Deny)),
            (lit(Topic, "foo"), ace("User:*", "*", Describe, Allow)),
            (lit(Topic, "foo"), ace("User:frank", "10.0.0.9", Read, Deny)),
            (lit(Topic, "foo"), ace("User:frank", "*", Read, Allow)),
            (lit(Topic, "*"), ace("User:dave", "*", Read, Allow)),
            (pre(Topic, "pre-"), ace("User:erin", "*", All, Allow)),
            (pre(Topic, "pre-"), ace("User:erin", "*", Delete, Deny)),
            (pre(Topic, "pre-secret"), ace("User:*", "*", Read, Deny)),
            (pre(Topic, "té"), ace("User:gus", "*", Write, Allow)),
            (lit(Group, "g1"), ace("User:alice", "*", Read, Allow)),
            (
                lit(Cluster, CLUSTER_NAME),
                ace("User:admin", "*", AlterConfigs, Allow),
            ),
            (
                lit(Cluster, CLUSTER_NAME),
                ace("User:ops", "*", IdempotentWrite, Allow),
            ),
            (
                lit(TransactionalId, "tx"),
                ace("User:alice", "*", Write, Allow),
            ),
        ],
        &["User:root"],
        everyone,
    )
}

/// principal, host, operation, resource type, name, expected.
type Case = (
    &'static str,
    &'static str,
    AclOperation,
    ResourceType,
    &'static str,
    bool,
);

const MATRIX: &[Case] = &[
    ("User:alice", "1.2.3.4", Read, Topic, "foo", true),
    ("User:alice", "1.2.3.4", Describe, Topic, "foo", true),
    ("User:alice", "1.2.3.4", Write, Topic, "foo", false),
    ("User:alice", "1.2.3.4", Read, Topic, "bar", false),
    ("User:bob", "10.0.0.1", Write, Topic, "foo", true),
    ("User:bob", "10.0.0.2", Write, Topic, "foo", false),
    ("User:bob", "10.0.0.2", Describe, Topic, "foo", true),
    ("User:bob", "10.0.0.1", Read, Topic, "foo", false),
    ("User:carol", "1.2.3.4", Describe, Topic, "foo", false),
    ("User:carol", "1.2.3.4", Read, Topic, "foo", false),
    ("User:nobody", "1.2.3.4", Describe, Topic, "foo", true),
    ("User:nobody", "1.2.3.4", Read, Topic, "foo", false),
    ("User:frank", "10.0.0.9", Read, Topic, "foo", false),
    ("User:frank", "10.0.0.8", Read, Topic, "foo", true),
    ("User:frank", "10.0.0.9", Describe, Topic, "foo", true),
    ("User:dave", "1.2.3.4", Read, Topic, "anything", true),
    ("User:dave", "1.2.3.4", Read, Topic, "foo", true),
    ("User:dave", "1.2.3.4", Describe, Topic, "anything", true),
    ("User:dave", "1.2.3.4", Write, Topic, "anything", false),
    ("User:erin", "1.2.3.4", Read, Topic, "pre-x", true),
    ("User:erin", "1.2.3.4", Alter, Topic, "pre-x", true),
    ("User:erin", "1.2.3.4", Delete, Topic, "pre-x", false),
    ("User:erin", "1.2.3.4", Read, Topic, "pre-secret-1", false),
    ("User:erin", "1.2.3.4", Write, Topic, "pre-secret-1", true),
    ("User:erin", "1.2.3.4", Read, Topic, "pre", false),
    ("User:erin", "1.2.3.4", Read, Topic, "pre-", true),
    ("User:gus", "1.2.3.4", Write, Topic, "tést", true),
    ("User:gus", "1.2.3.4", Write, Topic, "t", false),
    ("User:alice", "1.2.3.4", Read, Group, "g1", true),
    ("User:alice", "1.2.3.4", Describe, Group, "g1", true),
    ("User:alice", "1.2.3.4", Delete, Group, "g1", false),
    ("User:zed", "1.2.3.4", Read, Group, "g1", false),
    ("User:alice", "1.2.3.4", Read, Group, "g2", false),
    (
        "User:admin",
        "1.2.3.4",
        DescribeConfigs,
        Cluster,
        CLUSTER_NAME,
        true,
    ),
    (
        "User:admin",
        "1.2.3.4",
        AlterConfigs,
        Cluster,
        CLUSTER_NAME,
        true,
    ),
    ("User:admin", "1.2.3.4", Alter, Cluster, CLUSTER_NAME, false),
    (
        "User:ops",
        "1.2.3.4",
        IdempotentWrite,
        Cluster,
        CLUSTER_NAME,
        true,
    ),
    (
        "User:ops",
        "1.2.3.4",
        ClusterAction,
        Cluster,
        CLUSTER_NAME,
        false,
    ),
    (
        "User:alice",
        "1.2.3.4",
        Describe,
        TransactionalId,
        "tx",
        true,
    ),
    (
        "User:alice",
        "1.2.3.4",
        Write,
        TransactionalId,
        "other",
        false,
    ),
    ("User:root", "1.2.3.4", Delete, Topic, "pre-x", true),
    ("User:root", "1.2.3.4", Read, Topic, "foo", true),
    ("Group:alice", "1.2.3.4", Read, Topic, "foo", false),
];

#[test]
fn authorize_matrix() {
    let c = fixture(false);
    for &(principal, host, op, rt, name, expected) in MATRIX {
        assert_eq!(
            c.authorize(principal, host, op, rt, name),
            expected,
            "{principal} from {host}: {op} on {rt} {name}"
        );
    }
}

#[test]
fn allow_everyone_if_no_acl_found() {
    let strict = fixture(false);
    let open = fixture(true);
    // No ACL at all on the group: the setting decides.
    assert!(!strict.authorize("User:x", "h", Read, Group, "g2"));
    assert!(open.authorize("User:x", "h", Read, Group, "g2"));
    // Some ACL on the resource (here: for somebody else): the setting is moot.
    assert!(!open.authorize("User:zed", "h", Read, Group, "g1"));
    // The topic wildcard and prefixes count as ACLs for every topic name.
    assert!(!open.authorize("User:x", "h", Write, Topic, "unlisted"));
    let empty = AclCache::new(Vec::<String>::new(), true);
    assert!(empty.authorize("User:x", "h", Write, Topic, "t"));
    assert!(!AclCache::default().authorize("User:x", "h", Write, Topic, "t"));
}

#[test]
fn update_replaces_and_removes() {
    let mut c = fixture(false);
    let foo = lit(Topic, "foo");
    assert_eq!(c.len(), 8);
    c.update(foo.clone(), AclSet::new()).expect("update");
    assert!(c.acls(&foo).is_none());
    assert_eq!(c.len(), 7);
    c.update(pre(Topic, "pre-secret"), AclSet::new())
        .expect("update");
    assert!(c.authorize("User:erin", "h", Read, Topic, "pre-secret-1"));
    assert!(c
        .update(
            ResourcePattern {
                resource_type: Topic,
                name: "x".into(),
                pattern_type: PatternType::Match
            },
            AclSet::new()
        )
        .is_err());
    assert!(c
        .update(lit(ResourceType::Any, "x"), AclSet::new())
        .is_err());
}

#[test]
fn resources_follow_kafka_ordering() {
    let c = fixture(false);
    let order: Vec<(ResourceType, PatternType, String)> = c
        .resources()
        .map(|(p, _)| (p.resource_type, p.pattern_type, p.name))
        .collect();
    let expected = [
        (Topic, PatternType::Literal, "foo"),
        (Topic, PatternType::Literal, "*"),
        (Topic, PatternType::Prefixed, "té"),
        (Topic, PatternType::Prefixed, "pre-secret"),
        (Topic, PatternType::Prefixed, "pre-"),
        (Group, PatternType::Literal, "g1"),
        (Cluster, PatternType::Literal, CLUSTER_NAME),
        (TransactionalId, PatternType::Literal, "tx"),
    ];
    let expected: Vec<_> = expected
        .iter()
        .map(|(r, p, n)| (*r, *p, n.to_string()))
        .collect();
    assert_eq!(order, expected);
}

#[test]
fn super_users_config() {
    let supers = parse_super_users("User:a; User:b ;Group:c").expect("valid");
    assert!(supers.contains("User:a") && supers.contains("User:b") && supers.contains("Group:c"));
    assert!(parse_super_users("").expect("empty").is_empty());
    assert_eq!(
        parse_super_users("User:a;bob").unwrap_err(),
        "expected a string in format principalType:principalName but got bob"
    );
    let c = AclCache::new(supers, false);
    assert!(c.is_super_user("User:b"));
    assert!(c.authorize("Group:c", "h", All, Topic, "t"));
}

fn by_type(c: &AclCache, principal: &str, op: AclOperation, rt: ResourceType) -> bool {
    c.authorize_by_resource_type(principal, "1.2.3.4", op, rt)
        .expect("valid arguments")
}

#[test]
fn by_resource_type_basics() {
    let empty = AclCache::default();
    assert!(!by_type(&empty, "User:a", Write, Topic));
    assert!(by_type(
        &AclCache::new(["User:root"], false),
        "User:root",
        Write,
        Topic
    ));
    assert!(by_type(
        &AclCache::new(Vec::<String>::new(), true),
        "User:a",
        Write,
        Topic
    ));
    let c = cache(
        &[(lit(Topic, "t1"), ace("User:a", "*", Write, Allow))],
        &[],
        false,
    );
    assert!(by_type(&c, "User:a", Write, Topic));
    assert!(!by_type(&c, "User:b", Write, Topic));
    assert!(
        !by_type(&c, "User:a", Describe, Topic),
        "no implied operations"
    );
    assert!(!by_type(&c, "User:a", Write, Group));
    let host = cache(
        &[(lit(Topic, "t1"), ace("User:a", "9.9.9.9", Write, Allow))],
        &[],
        false,
    );
    assert!(!by_type(&host, "User:a", Write, Topic));
    let wildcard = cache(
        &[(pre(Topic, "p"), ace("User:*", "*", All, Allow))],
        &[],
        false,
    );
    assert!(by_type(&wildcard, "User:a", IdempotentWrite, Topic));
}

#[test]
fn by_resource_type_denies() {
    let deny_all = cache(
        &[
            (lit(Topic, "t1"), ace("User:a", "*", Write, Allow)),
            (lit(Topic, "*"), ace("User:a", "*", Write, Deny)),
        ],
        &[],
        true,
    );
    assert!(
        !by_type(&deny_all, "User:a", Write, Topic),
        "literal * DENY beats allow.everyone"
    );
    let cases: &[(ResourcePattern, ResourcePattern, bool)] = &[
        (pre(Topic, "abc"), pre(Topic, "a"), false),
        (pre(Topic, "a"), pre(Topic, "abc"), true),
        (pre(Topic, "a"), pre(Topic, "a"), false),
        (lit(Topic, "abc"), lit(Topic, "abc"), false),
        (lit(Topic, "abc"), lit(Topic, "xyz"), true),
        (lit(Topic, "abc"), pre(Topic, "ab"), false),
        (lit(Topic, "*"), lit(Topic, "abc"), true),
        (lit(Topic, "*"), pre(Topic, "a"), true),
        (pre(Topic, "abc"), lit(Topic, "abc"), true),
    ];
    for (allow, deny, expected) in cases {
        let c = cache(
            &[
                (allow.clone(), ace("User:a", "*", Write, Allow)),
                (deny.clone(), ace("User:*", "*", All, Deny)),
            ],
            &[],
            false,
        );
        assert_eq!(
            by_type(&c, "User:a", Write, Topic),
            *expected,
            "allow {allow} deny {deny}"
        );
    }
    // allow.everyone grants despite narrower DENYs (Kafka checks it first).
    let narrow = cache(
        &[(pre(Topic, "a"), ace("User:a", "*", Write, Deny))],
        &[],
        true,
    );
    assert!(by_type(&narrow, "User:a", Write, Topic));
}

#[test]
fn by_resource_type_argument_errors() {
    let c = AclCache::default();
    let err = |op, rt| {
        c.authorize_by_resource_type("User:a", "h", op, rt)
            .unwrap_err()
    };
    assert_eq!(
        err(Read, ResourceType::Any),
        "Must specify a non-filter resource type for authorizeByResourceType"
    );
    assert_eq!(err(Read, ResourceType::Unknown), "Unknown resource type");
    assert_eq!(
        err(AclOperation::Any, Topic),
        "Must specify a non-filter operation type for authorizeByResourceType"
    );
    assert_eq!(err(AclOperation::Unknown, Topic), "Unknown operation type");
}

#[test]
fn prefix_walk_bound_follows_updates() {
    let allow = |name: &str| (pre(Topic, name), ace("User:a", "*", Read, Allow));
    let mut c = cache(&[allow("a"), allow("abcdef")], &[], false);
    let long = format!("abcdef{}", "x".repeat(300));
    assert!(c.authorize("User:a", "h", Read, Topic, &long));
    c.update(pre(Topic, "abcdef"), AclSet::new())
        .expect("update");
    assert!(
        c.authorize("User:a", "h", Read, Topic, &long),
        "still under prefix a"
    );
    c.update(pre(Topic, "a"), AclSet::new()).expect("update");
    assert!(!c.authorize("User:a", "h", Read, Topic, &long));
    let set: AclSet = [allow("abcdefx").1].into();
    c.update(pre(Topic, "abcdefx"), set).expect("update");
    assert!(c.authorize("User:a", "h", Read, Topic, &long));
    assert!(!c.authorize("User:a", "h", Read, Topic, "abcdef"));
    assert!(!c.authorize("User:a", "h", Read, Topic, ""));
}
