//! Tests of the ZooKeeper codec against the bytes Kafka 3.9's ZkData and
//! AclEntry write (and the JSON of Kafka's AclEntryTest).

use super::cache::AclSet;
use super::model::*;
use super::zk_codec::*;

fn ace(
    principal: &str,
    host: &str,
    op: AclOperation,
    perm: AclPermissionType,
) -> AccessControlEntry {
    AccessControlEntry::new(principal, host, op, perm).expect("valid entry")
}

#[test]
fn znode_paths() {
    let lit = ResourcePattern::literal(ResourceType::Topic, "foo");
    let pre = ResourcePattern::prefixed(ResourceType::TransactionalId, "tx-");
    assert_eq!(acl_znode_path(&lit).expect("path"), "/kafka-acl/Topic/foo");
    assert_eq!(
        acl_znode_path(&pre).expect("path"),
        "/kafka-acl-extended/prefixed/TransactionalId/tx-"
    );
    let cluster = ResourcePattern::literal(ResourceType::Cluster, CLUSTER_NAME);
    assert_eq!(
        acl_znode_path(&cluster).expect("path"),
        "/kafka-acl/Cluster/kafka-cluster"
    );
    let bad = ResourcePattern {
        resource_type: ResourceType::Topic,
        name: "x".into(),
        pattern_type: PatternType::Match,
    };
    assert_eq!(
        acl_znode_path(&bad).unwrap_err(),
        "Invalid pattern type: MATCH"
    );
    assert_eq!(
        acl_type_path(PatternType::Prefixed, ResourceType::DelegationToken).expect("path"),
        "/kafka-acl-extended/prefixed/DelegationToken"
    );
}

#[test]
fn paths_to_create() {
    let paths = acl_paths_to_create();
    assert_eq!(paths.len(), 16);
    assert_eq!(paths[0], "/kafka-acl");
    assert_eq!(paths[1], "/kafka-acl/Topic");
    assert_eq!(paths[6], "/kafka-acl/User");
    assert_eq!(paths[7], "/kafka-acl-extended/prefixed");
    assert_eq!(paths[14], "/kafka-acl-changes");
    assert_eq!(paths[15], "/kafka-acl-extended-changes");
    assert_eq!(parse_acl_type_dir("Topic"), Some(ResourceType::Topic));
    assert_eq!(
        parse_acl_type_dir("TRANSACTIONALID"),
        Some(ResourceType::TransactionalId)
    );
    assert_eq!(parse_acl_type_dir("Widget"), None);
    assert_eq!(parse_acl_type_dir("Any"), None);
}

#[test]
fn encode_matches_kafka_bytes() {
    let acls = [ace(
        "User:alice",
        "*",
        AclOperation::Read,
        AclPermissionType::Allow,
    )];
    assert_eq!(
        String::from_utf8(encode_acls(&acls)).expect("utf8"),
        r#"{"acls":[{"principal":"User:alice","permissionType":"Allow","host":"*","operation":"Read"}],"version":1}"#
    );
    let two = [
        ace(
            "User:bob",
            "10.0.0.1",
            AclOperation::IdempotentWrite,
            AclPermissionType::Deny,
        ),
        ace("User:*", "*", AclOperation::All, AclPermissionType::Allow),
    ];
    assert_eq!(
        String::from_utf8(encode_acls(&two)).expect("utf8"),
        concat!(
            r#"{"acls":[{"principal":"User:bob","permissionType":"Deny","host":"10.0.0.1","operation":"IdempotentWrite"},"#,
            r#"{"principal":"User:*","permissionType":"Allow","host":"*","operation":"All"}],"version":1}"#
        )
    );
    assert_eq!(encode_acls(&[]), br#"{"acls":[],"version":1}"#.to_vec());
}

#[test]
fn encode_escapes_like_jackson_and_round_trips() {
    let odd = ace(
        "User:a\"b\\c\u{1}\n/é",
        "*",
        AclOperation::DescribeConfigs,
        AclPermissionType::Allow,
    );
    let bytes = encode_acls([&odd]);
    let text = String::from_utf8(bytes.clone()).expect("utf8");
    assert!(text.contains(r#""User:a\"b\\c\u0001\n/é""#), "{text}");
    let decoded = decode_acls(&bytes).expect("decodes");
    assert_eq!(decoded, AclSet::from([odd]));
}

#[test]
fn decode_kafka_acl_entry_test_json() {
    let json = r#"{"version": 1, "acls": [{"host": "host1","permissionType": "Deny","operation": "READ", "principal": "User:alice"  },
    {  "host":  "*" ,  "permissionType": "Allow",  "operation":  "Read", "principal": "User:bob"  },
    {  "host": "host1",  "permissionType": "Deny",  "operation":   "Read" ,  "principal": "User:bob"}]}"#;
    let expected = AclSet::from([
        ace(
            "User:alice",
            "host1",
            AclOperation::Read,
            AclPermissionType::Deny,
        ),
        ace(
            "User:bob",
            "*",
            AclOperation::Read,
            AclPermissionType::Allow,
        ),
        ace(
            "User:bob",
            "host1",
            AclOperation::Read,
            AclPermissionType::Deny,
        ),
    ]);
    assert_eq!(decode_acls(json.as_bytes()).expect("decodes"), expected);
    // Older writers' key order and extra keys are fine.
    let scala = r#"{"version":1,"acls":[{"principal":"User:x","permissionType":"Allow","operation":"Write","host":"*","extra":1}]}"#;
    assert_eq!(decode_acls(scala.as_bytes()).expect("decodes").len(), 1);
    assert!(decode_acls(b"").expect("empty").is_empty());
}

#[test]
fn decode_rejects_bad_documents() {
    let bad: &[&str] = &[
        "not json",
        r#"{"version":2,"acls":[]}"#,
        r#"{"version":"1","acls":[]}"#,
        r#"{"version":1}"#,
        r#"{"version":1,"acls":[{"principal":"alice","permissionType":"Allow","operation":"Read","host":"*"}]}"#,
        r#"{"version":1,"acls":[{"principal":"User:a","permissionType":"Maybe","operation":"Read","host":"*"}]}"#,
        r#"{"version":1,"acls":[{"principal":"User:a","permissionType":"Allow","operation":"Fly","host":"*"}]}"#,
        r#"{"version":1,"acls":[{"principal":"User:a","permissionType":"Allow","operation":"Any","host":"*"}]}"#,
        r#"{"version":1,"acls":[{"principal":"User:a","permissionType":"Allow","operation":"Read"}]}"#,
        r#"{"version":1,"acls":[{"principal":"User:a","permissionType":"Allow","operation":"Read","host":7}]}"#,
        r#"[1,2]"#,
    ];
    for doc in bad {
        assert!(decode_acls(doc.as_bytes()).is_err(), "{doc}");
    }
}

#[test]
fn literal_change_notification() {
    let p = ResourcePattern::literal(ResourceType::Topic, "foo");
    let (path, data) = change_notification(&p).expect("literal");
    assert_eq!(path, "/kafka-acl-changes/acl_changes_");
    assert_eq!(data, b"TOPIC:foo".to_vec());
    assert_eq!(
        decode_change(LITERAL_CHANGE_PATH, &data).expect("decodes"),
        p
    );
    assert_eq!(
        decode_change("/kafka-acl-changes", b"Topic:foo").expect("any case"),
        p
    );
    let tx = ResourcePattern::literal(ResourceType::TransactionalId, "t:1");
    let (_, data) = change_notification(&tx).expect("literal");
    assert_eq!(data, b"TRANSACTIONAL_ID:t:1".to_vec());
    assert_eq!(
        decode_change(LITERAL_CHANGE_PATH, &data).expect("decodes"),
        tx
    );
    // Kafka's LiteralAclStoreTest.shouldDecodeResourceUsingTwoPartLogic.
    let name = "PREFIXED:this, including the PREFIXED part, is a valid two part group name";
    let g =
        decode_change(LITERAL_CHANGE_PATH, format!("GROUP:{name}").as_bytes()).expect("decodes");
    assert_eq!(g, ResourcePattern::literal(ResourceType::Group, name));
    assert_eq!(
        decode_change(LITERAL_CHANGE_PATH, b"nocolon").unwrap_err(),
        "expected a string in format ResourceType:ResourceName but got nocolon"
    );
    assert!(decode_change(LITERAL_CHANGE_PATH, b"Widget:x").is_err());
}

#[test]
fn extended_change_notification() {
    let p = ResourcePattern::prefixed(ResourceType::Topic, "foo");
    let (path, data) = change_notification(&p).expect("prefixed");
    assert_eq!(path, "/kafka-acl-extended-changes/acl_changes_");
    assert_eq!(
        String::from_utf8(data.clone()).expect("utf8"),
        r#"{"version":1,"resourceType":"TOPIC","name":"foo","patternType":"PREFIXED"}"#
    );
    assert_eq!(
        decode_change(EXTENDED_CHANGE_PATH, &data).expect("decodes"),
        p
    );
    let spaced =
        br#"{ "patternType" : "PREFIXED", "name": "a\"b", "resourceType": "group", "version": 1 }"#;
    assert_eq!(
        decode_change(EXTENDED_CHANGE_PATH, spaced).expect("decodes"),
        ResourcePattern::prefixed(ResourceType::Group, "a\"b")
    );
    let too_new = br#"{"version":2,"resourceType":"TOPIC","name":"foo","patternType":"PREFIXED"}"#;
    assert_eq!(
        decode_change(EXTENDED_CHANGE_PATH, too_new).unwrap_err(),
        "Failed to parse ACL change event: Acl change event received for unsupported version: 2"
    );
    for bad in [
        &br#"{"version":1,"resourceType":"TOPIC","name":"foo","patternType":"prefixed"}"#[..],
        br#"{"version":1,"resourceType":"ANY","name":"foo","patternType":"PREFIXED"}"#,
        br#"{"version":1,"resourceType":"TOPIC","patternType":"PREFIXED"}"#,
        b"garbage",
    ] {
        assert!(decode_change(EXTENDED_CHANGE_PATH, bad).is_err());
    }
    assert!(decode_change("/elsewhere", &data).is_err());
    let m = ResourcePattern {
        resource_type: ResourceType::Topic,
        name: "x".into(),
        pattern_type: PatternType::Any,
    };
    assert!(change_notification(&m).is_err());
}
