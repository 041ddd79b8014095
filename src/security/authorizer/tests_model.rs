//! Tests of the model and filters against Kafka's AclOperation,
//! ResourceType, ResourcePatternFilter and AccessControlEntryFilter rules.

use super::filter::{AccessControlEntryFilter, AclBindingFilter, ResourcePatternFilter};
use super::model::*;

fn ace(
    principal: &str,
    host: &str,
    op: AclOperation,
    perm: AclPermissionType,
) -> AccessControlEntry {
    AccessControlEntry::new(principal, host, op, perm).expect("valid entry")
}

#[test]
fn codes_and_names_round_trip() {
    for rt in ResourceType::VALUES {
        assert_eq!(ResourceType::from_code(rt.code()), *rt);
        assert_eq!(ResourceType::from_pascal_name(rt.pascal_name()), *rt);
        assert_eq!(ResourceType::from_java_name(rt.java_name()), *rt);
    }
    for op in AclOperation::VALUES {
        assert_eq!(AclOperation::from_code(op.code()), *op);
        assert_eq!(AclOperation::from_pascal_name(op.pascal_name()), *op);
    }
    for pt in PatternType::VALUES {
        assert_eq!(PatternType::from_code(pt.code()), *pt);
    }
    for p in AclPermissionType::VALUES {
        assert_eq!(AclPermissionType::from_code(p.code()), *p);
    }
    assert_eq!(ResourceType::TransactionalId.code(), 5);
    assert_eq!(ResourceType::User.code(), 7);
    assert_eq!(PatternType::Prefixed.code(), 4);
    assert_eq!(AclOperation::DescribeTokens.code(), 14);
    assert_eq!(AclPermissionType::Allow.code(), 3);
    assert_eq!(ResourceType::from_code(42), ResourceType::Unknown);
    assert_eq!(AclOperation::from_code(-3), AclOperation::Unknown);
}

#[test]
fn security_utils_name_lookup() {
    assert_eq!(
        AclOperation::IdempotentWrite.pascal_name(),
        "IdempotentWrite"
    );
    assert_eq!(
        ResourceType::DelegationToken.pascal_name(),
        "DelegationToken"
    );
    // Upper-cased Pascal names are accepted, the enum constant name is not.
    assert_eq!(
        AclOperation::from_pascal_name("IDEMPOTENTWRITE"),
        AclOperation::IdempotentWrite
    );
    assert_eq!(AclOperation::from_pascal_name("read"), AclOperation::Read);
    assert_eq!(
        AclOperation::from_pascal_name("IDEMPOTENT_WRITE"),
        AclOperation::Unknown
    );
    assert_eq!(
        AclPermissionType::from_pascal_name("DENY"),
        AclPermissionType::Deny
    );
    // ResourceType.fromString is the enum name in any case.
    assert_eq!(
        ResourceType::from_java_name("transactional_id"),
        ResourceType::TransactionalId
    );
    assert_eq!(
        ResourceType::from_java_name("TransactionalId"),
        ResourceType::Unknown
    );
    // PatternType.fromString is case-sensitive.
    assert_eq!(
        PatternType::from_exact_name("PREFIXED"),
        PatternType::Prefixed
    );
    assert_eq!(
        PatternType::from_exact_name("Prefixed"),
        PatternType::Unknown
    );
}

#[test]
fn constructors_reject_filter_values() {
    assert_eq!(
        ResourcePattern::new(ResourceType::Any, "x", PatternType::Literal).unwrap_err(),
        "resourceType must not be ANY"
    );
    assert_eq!(
        ResourcePattern::new(ResourceType::Topic, "x", PatternType::Match).unwrap_err(),
        "patternType must not be MATCH"
    );
    assert_eq!(
        AccessControlEntry::new("User:a", "*", AclOperation::Any, AclPermissionType::Allow)
            .unwrap_err(),
        "operation must not be ANY"
    );
    assert_eq!(
        AccessControlEntry::new("User:a", "*", AclOperation::Read, AclPermissionType::Any)
            .unwrap_err(),
        "permissionType must not be ANY"
    );
    assert_eq!(parse_principal("User:a:b"), Ok(("User", "a:b")));
    assert_eq!(
        parse_principal("alice").unwrap_err(),
        "expected a string in format principalType:principalName but got alice"
    );
    assert!(parse_principal("").is_err());
}

#[test]
fn implied_operations() {
    let d = AclOperation::Describe.implied_by();
    for op in [
        AclOperation::Read,
        AclOperation::Write,
        AclOperation::Delete,
        AclOperation::Alter,
    ] {
        assert!(d.contains(&op));
    }
    assert!(!d.contains(&AclOperation::Create));
    assert!(AclOperation::DescribeConfigs
        .implied_by()
        .contains(&AclOperation::AlterConfigs));
    assert_eq!(AclOperation::Read.implied_by(), &[AclOperation::Read]);
}

fn pf(rt: ResourceType, name: Option<&str>, pt: PatternType) -> ResourcePatternFilter {
    ResourcePatternFilter::new(rt, name, pt)
}

#[test]
fn pattern_filter_match_semantics() {
    let f = pf(ResourceType::Topic, Some("foo-bar"), PatternType::Match);
    assert!(f.matches(&ResourcePattern::literal(ResourceType::Topic, "foo-bar")));
    assert!(f.matches(&ResourcePattern::literal(ResourceType::Topic, "*")));
    assert!(f.matches(&ResourcePattern::prefixed(ResourceType::Topic, "foo-")));
    assert!(f.matches(&ResourcePattern::prefixed(ResourceType::Topic, "foo-bar")));
    assert!(!f.matches(&ResourcePattern::prefixed(
        ResourceType::Topic,
        "foo-bar-baz"
    )));
    assert!(!f.matches(&ResourcePattern::literal(ResourceType::Topic, "foo")));
    assert!(!f.matches(&ResourcePattern::literal(ResourceType::Group, "foo-bar")));
    // A literal "*" filter under MATCH still only names itself and the wildcard.
    let star = pf(ResourceType::Topic, Some("*"), PatternType::Match);
    assert!(star.matches(&ResourcePattern::literal(ResourceType::Topic, "*")));
    assert!(!star.matches(&ResourcePattern::literal(ResourceType::Topic, "foo")));
}

#[test]
fn pattern_filter_any_and_exact_semantics() {
    let any = pf(ResourceType::Topic, Some("foo"), PatternType::Any);
    assert!(any.matches(&ResourcePattern::literal(ResourceType::Topic, "foo")));
    assert!(any.matches(&ResourcePattern::prefixed(ResourceType::Topic, "foo")));
    assert!(!any.matches(&ResourcePattern::literal(ResourceType::Topic, "*")));
    assert!(!any.matches(&ResourcePattern::prefixed(ResourceType::Topic, "fo")));
    let literal = pf(ResourceType::Topic, Some("*"), PatternType::Literal);
    assert!(literal.matches(&ResourcePattern::literal(ResourceType::Topic, "*")));
    assert!(!literal.matches(&ResourcePattern::literal(ResourceType::Topic, "foo")));
    let prefixed = pf(ResourceType::Topic, Some("fo"), PatternType::Prefixed);
    assert!(prefixed.matches(&ResourcePattern::prefixed(ResourceType::Topic, "fo")));
    assert!(!prefixed.matches(&ResourcePattern::prefixed(ResourceType::Topic, "foo")));
    assert!(!prefixed.matches(&ResourcePattern::literal(ResourceType::Topic, "fo")));
    let all = ResourcePatternFilter::any();
    assert!(all.matches(&ResourcePattern::prefixed(ResourceType::User, "x")));
    let any_name = pf(ResourceType::Group, None, PatternType::Literal);
    assert!(any_name.matches(&ResourcePattern::literal(ResourceType::Group, "g")));
    assert!(!any_name.matches(&ResourcePattern::prefixed(ResourceType::Group, "g")));
}

#[test]
fn entry_filter_semantics() {
    let e = ace("User:*", "*", AclOperation::Read, AclPermissionType::Allow);
    assert!(AccessControlEntryFilter::any().matches(&e));
    let alice = AccessControlEntryFilter::new(
        Some("User:alice"),
        None,
        AclOperation::Any,
        AclPermissionType::Any,
    );
    assert!(!alice.matches(&e), "no wildcard expansion in filters");
    let star = AccessControlEntryFilter::new(
        Some("User:*"),
        Some("*"),
        AclOperation::Read,
        AclPermissionType::Allow,
    );
    assert!(star.matches(&e));
    let deny =
        AccessControlEntryFilter::new(None, None, AclOperation::Any, AclPermissionType::Deny);
    assert!(!deny.matches(&e));
    let write =
        AccessControlEntryFilter::new(None, None, AclOperation::Write, AclPermissionType::Any);
    assert!(!write.matches(&e));
}

#[test]
fn find_indefinite_field_messages() {
    let mut f = AclBindingFilter::any();
    assert_eq!(f.find_indefinite_field(), Some("Resource type is ANY."));
    f.pattern_filter.resource_type = ResourceType::Unknown;
    assert_eq!(f.find_indefinite_field(), Some("Resource type is UNKNOWN."));
    f.pattern_filter.resource_type = ResourceType::Topic;
    assert_eq!(f.find_indefinite_field(), Some("Resource name is NULL."));
    f.pattern_filter.name = Some("t".into());
    f.pattern_filter.pattern_type = PatternType::Match;
    assert_eq!(
        f.find_indefinite_field(),
        Some("Resource pattern type is MATCH.")
    );
    f.pattern_filter.pattern_type = PatternType::Unknown;
    assert_eq!(
        f.find_indefinite_field(),
        Some("Resource pattern type is UNKNOWN.")
    );
    f.pattern_filter.pattern_type = PatternType::Any;
    assert_eq!(f.find_indefinite_field(), Some("Principal is NULL"));
    f.entry_filter.principal = Some("User:a".into());
    assert_eq!(f.find_indefinite_field(), Some("Host is NULL"));
    f.entry_filter.host = Some("*".into());
    assert_eq!(f.find_indefinite_field(), Some("Operation is ANY"));
    f.entry_filter.operation = AclOperation::Unknown;
    assert_eq!(f.find_indefinite_field(), Some("Operation is UNKNOWN"));
    f.entry_filter.operation = AclOperation::Read;
    assert_eq!(f.find_indefinite_field(), Some("Permission type is ANY"));
    f.entry_filter.permission_type = AclPermissionType::Unknown;
    assert_eq!(
        f.find_indefinite_field(),
        Some("Permission type is UNKNOWN")
    );
    assert!(f.is_unknown());
    f.entry_filter.permission_type = AclPermissionType::Allow;
    assert_eq!(f.find_indefinite_field(), None);
    assert!(f.matches_at_most_one());
    let binding = AclBinding::new(
        ResourcePattern::literal(ResourceType::Topic, "t"),
        ace("User:a", "*", AclOperation::Read, AclPermissionType::Allow),
    );
    assert!(AclBindingFilter::from(&binding).matches(&binding));
    assert!(AclBindingFilter::from(&binding).matches_at_most_one());
}
