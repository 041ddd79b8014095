//! Tests of CreateAcls/DeleteAcls/DescribeAcls against Kafka 3.9's AclApis,
//! AclAuthorizer and request-parsing behaviour.

use super::apis::*;
use super::cache::{AclCache, AclSet};
use super::filter::{AccessControlEntryFilter, AclBindingFilter, ResourcePatternFilter};
use super::model::*;

use AclOperation::{Read, Write};
use AclPermissionType::{Allow, Deny};
use ResourceType::{Cluster, Group, Topic};

fn binding(
    rt: ResourceType,
    name: &str,
    pt: PatternType,
    principal: &str,
    op: AclOperation,
    perm: AclPermissionType,
) -> AclBinding {
    AclBinding {
        pattern: ResourcePattern {
            resource_type: rt,
            name: name.into(),
            pattern_type: pt,
        },
        entry: AccessControlEntry {
            principal: principal.into(),
            host: "*".into(),
            operation: op,
            permission_type: perm,
        },
    }
}

fn lit(rt: ResourceType, name: &str, principal: &str, op: AclOperation) -> AclBinding {
    binding(rt, name, PatternType::Literal, principal, op, Allow)
}

fn populated(bindings: &[AclBinding]) -> AclCache {
    let mut cache = AclCache::default();
    let plan = create_acls(&cache, bindings);
    assert!(
        plan.results.iter().all(|r| *r == ApiError::NONE),
        "{:?}",
        plan.results
    );
    apply_writes(&mut cache, &plan.writes).expect("apply");
    cache
}

#[test]
fn create_writes_groups_and_notifications() {
    let cache = AclCache::default();
    let creations = [
        lit(Topic, "foo", "User:a", Read),
        lit(Topic, "foo", "User:b", Read),
        binding(Topic, "foo", PatternType::Prefixed, "User:a", Write, Deny),
    ];
    let plan = create_acls(&cache, &creations);
    assert_eq!(plan.results, vec![ApiError::NONE; 3]);
    assert_eq!(plan.writes.len(), 2);
    let w = &plan.writes[0];
    assert_eq!(w.znode_path().expect("path"), "/kafka-acl/Topic/foo");
    assert_eq!(w.acls.len(), 2);
    assert!(w.znode_data().is_some());
    assert_eq!(w.notification().expect("note").1, b"TOPIC:foo".to_vec());
    assert_eq!(
        plan.writes[1].znode_path().expect("path"),
        "/kafka-acl-extended/prefixed/Topic/foo"
    );
    let mut cache = cache;
    apply_writes(&mut cache, &plan.writes).expect("apply");
    assert!(cache.authorize("User:a", "h", Read, Topic, "foo"));
    assert!(!cache.authorize("User:a", "h", Write, Topic, "foo-x"));
    // Creating what exists succeeds without touching ZooKeeper.
    let again = create_acls(&cache, &creations[..1]);
    assert_eq!(again.results, vec![ApiError::NONE]);
    assert!(again.writes.is_empty());
    // Adding to an existing set writes the union.
    let more = create_acls(&cache, &[lit(Topic, "foo", "User:c", Read)]);
    assert_eq!(more.writes[0].acls.len(), 3);
}

#[test]
fn create_validation_messages() {
    let cache = AclCache::default();
    let creations = [
        lit(Cluster, "my-cluster", "User:a", AclOperation::Alter),
        lit(Topic, "", "User:a", Read),
        lit(Cluster, "", "User:a", Read),
        lit(Topic, "a/b", "User:a", Read),
        lit(Topic, "ok", "User:a", Read),
        lit(Cluster, CLUSTER_NAME, "User:a", AclOperation::Alter),
    ];
    let plan = create_acls(&cache, &creations);
    let cluster =
        ApiError::invalid_request("The only valid name for the CLUSTER resource is kafka-cluster");
    assert_eq!(plan.results[0], cluster);
    assert_eq!(
        plan.results[1],
        ApiError::invalid_request("Invalid empty resource name")
    );
    assert_eq!(plan.results[2], cluster);
    assert_eq!(
        plan.results[3],
        ApiError::invalid_request("Failed to create ACL")
    );
    assert_eq!(plan.results[4], ApiError::NONE);
    assert_eq!(plan.results[5], ApiError::NONE);
    assert_eq!(plan.writes.len(), 2);
    assert_eq!(plan.results[3].code, INVALID_REQUEST);
}

#[test]
fn create_unbuildable_and_bad_principal() {
    let cache = AclCache::default();
    for bad in [
        lit(Topic, "t", "User:a", AclOperation::Any),
        binding(Topic, "t", PatternType::Match, "User:a", Read, Allow),
        binding(Topic, "t", PatternType::Any, "User:a", Read, Allow),
        lit(ResourceType::Any, "t", "User:a", Read),
        binding(
            Topic,
            "t",
            PatternType::Literal,
            "User:a",
            Read,
            AclPermissionType::Any,
        ),
    ] {
        let plan = create_acls(&cache, &[lit(Topic, "x", "User:a", Read), bad]);
        assert_eq!(plan.results, vec![ApiError::UNKNOWN_SERVER_ERROR; 2]);
        assert!(plan.writes.is_empty());
    }
    // A principal without a type fails its whole resource group only.
    let plan = create_acls(
        &cache,
        &[
            lit(Topic, "t", "alice", Read),
            lit(Topic, "t", "User:b", Read),
            lit(Topic, "u", "User:b", Read),
        ],
    );
    assert_eq!(
        plan.results,
        vec![
            ApiError::UNKNOWN_SERVER_ERROR,
            ApiError::UNKNOWN_SERVER_ERROR,
            ApiError::NONE
        ]
    );
    assert_eq!(plan.writes.len(), 1);
    assert_eq!(plan.writes[0].pattern.name, "u");
}

#[test]
fn request_parse_validation() {
    let prefixed = [binding(
        Topic,
        "t",
        PatternType::Prefixed,
        "User:a",
        Read,
        Allow,
    )];
    assert_eq!(
        validate_create_request(0, &prefixed).unwrap_err(),
        "Version 0 only supports literal resource pattern types"
    );
    assert!(validate_create_request(1, &prefixed).is_ok());
    let unknown = [lit(ResourceType::Unknown, "t", "User:a", Read)];
    assert!(validate_create_request(1, &unknown)
        .unwrap_err()
        .starts_with("CreatableAcls contain unknown elements: "));

    let mut filters = vec![AclBindingFilter::any()];
    normalize_delete_request(0, &mut filters).expect("ANY is fine in v0");
    assert_eq!(filters[0].pattern_filter.pattern_type, PatternType::Literal);
    filters[0].pattern_filter.pattern_type = PatternType::Match;
    assert_eq!(
        normalize_delete_request(0, &mut filters).unwrap_err(),
        "Version 0 does not support pattern type MATCH (only LITERAL and ANY are supported)"
    );
    assert!(normalize_delete_request(1, &mut filters).is_ok());
    filters[0].entry_filter.operation = AclOperation::Unknown;
    assert!(normalize_delete_request(1, &mut filters)
        .unwrap_err()
        .starts_with("Filters contain UNKNOWN elements, filters: "));

    let mut f = AclBindingFilter::any();
    normalize_describe_request(0, &mut f).expect("ANY is fine in v0");
    assert_eq!(f.pattern_filter.pattern_type, PatternType::Literal);
    f.pattern_filter.pattern_type = PatternType::Prefixed;
    assert_eq!(
        normalize_describe_request(0, &mut f).unwrap_err(),
        "Version 0 only supports literal resource pattern types"
    );
    f.pattern_filter.resource_type = ResourceType::Unknown;
    assert!(normalize_describe_request(2, &mut f)
        .unwrap_err()
        .starts_with("DescribeAclsRequest contains UNKNOWN elements: "));
}

fn fixture() -> AclCache {
    populated(&[
        lit(Topic, "foo", "User:a", Read),
        lit(Topic, "foo", "User:b", Write),
        lit(Topic, "*", "User:a", Read),
        binding(Topic, "fo", PatternType::Prefixed, "User:a", Read, Deny),
        binding(
            Topic,
            "foo-bar",
            PatternType::Prefixed,
            "User:a",
            Read,
            Allow,
        ),
        lit(Group, "g", "User:a", Read),
    ])
}

fn filter(
    rt: ResourceType,
    name: Option<&str>,
    pt: PatternType,
    principal: Option<&str>,
) -> AclBindingFilter {
    AclBindingFilter::new(
        ResourcePatternFilter::new(rt, name, pt),
        AccessControlEntryFilter::new(principal, None, AclOperation::Any, AclPermissionType::Any),
    )
}

#[test]
fn describe_filters_and_orders() {
    let cache = fixture();
    let all = describe_acls(&cache, &AclBindingFilter::any());
    assert_eq!(all.len(), 6);
    let names: Vec<&str> = all.iter().map(|b| b.pattern.name.as_str()).collect();
    assert_eq!(names, ["foo", "foo", "*", "foo-bar", "fo", "g"]);
    let matched = describe_acls(
        &cache,
        &filter(Topic, Some("foo"), PatternType::Match, None),
    );
    let names: Vec<&str> = matched.iter().map(|b| b.pattern.name.as_str()).collect();
    assert_eq!(names, ["foo", "foo", "*", "fo"]);
    let b_only = describe_acls(
        &cache,
        &filter(ResourceType::Any, None, PatternType::Any, Some("User:b")),
    );
    assert_eq!(b_only, vec![lit(Topic, "foo", "User:b", Write)]);
    let grouped = group_by_resource(&matched);
    assert_eq!(grouped.len(), 3);
    assert_eq!(grouped[0].1.len(), 2);
}

#[test]
fn delete_credits_first_matching_filter() {
    let cache = fixture();
    let filters = [
        filter(Topic, Some("foo"), PatternType::Literal, Some("User:b")),
        filter(Topic, Some("foo"), PatternType::Any, None),
        filter(Group, None, PatternType::Any, Some("User:nobody")),
    ];
    let plan = delete_acls(&cache, &filters);
    assert_eq!(
        plan.filter_results[0],
        vec![lit(Topic, "foo", "User:b", Write)]
    );
    assert_eq!(
        plan.filter_results[1],
        vec![lit(Topic, "foo", "User:a", Read)]
    );
    assert!(plan.filter_results[2].is_empty());
    assert_eq!(plan.writes.len(), 1);
    let w = &plan.writes[0];
    assert!(
        w.acls.is_empty() && w.znode_data().is_none(),
        "the znode is deleted"
    );
    let mut cache = cache;
    apply_writes(&mut cache, &plan.writes).expect("apply");
    assert_eq!(describe_acls(&cache, &AclBindingFilter::any()).len(), 4);
}

#[test]
fn delete_with_match_removes_every_applying_pattern() {
    let cache = fixture();
    let plan = delete_acls(
        &cache,
        &[filter(
            Topic,
            Some("foo-bar-baz"),
            PatternType::Match,
            Some("User:a"),
        )],
    );
    let names: Vec<&str> = plan.filter_results[0]
        .iter()
        .map(|b| b.pattern.name.as_str())
        .collect();
    assert_eq!(
        names,
        ["*", "foo-bar", "fo"],
        "literal foo is not foo-bar-baz"
    );
    assert_eq!(plan.writes.len(), 3);
    let kept: AclSet = plan
        .writes
        .iter()
        .flat_map(|w| w.acls.iter().cloned())
        .collect();
    assert!(kept.is_empty());
    let nothing = delete_acls(
        &cache,
        &[filter(Topic, Some("zzz"), PatternType::Literal, None)],
    );
    assert_eq!(nothing.filter_results, vec![Vec::<AclBinding>::new()]);
    assert!(nothing.writes.is_empty());
}
