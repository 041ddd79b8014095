//! What one ACL decision costs a request: `AclAuthorizer::authorize` (the
//! read lock, the literal, wildcard and prefix lookups, the audit-log level
//! check) for a produce's topic, with a cache of 10, 1,000 and 100,000
//! topic patterns (a third of them prefixed) and the principal allowed,
//! refused, or a super user; and authorizeByResourceType, which scans the
//! type's ACLs (InitProducerId of an idempotent producer).

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use kafka_protocol::messages::ApiKey;
use kshard::protocol::principal::KafkaPrincipal;
use kshard::security::authorizer::{
    AccessControlEntry, AclAuthorizer, AclOperation, AclPermissionType, AuditLog, RequestContext,
    ResourcePattern, ResourceType,
};

fn authorizer(patterns: usize) -> AclAuthorizer {
    let config = kshard::config::BrokerConfig::from_map(
        &[
            (
                "authorizer.class.name".to_string(),
                "kafka.security.authorizer.AclAuthorizer".to_string(),
            ),
            ("super.users".to_string(), "User:admin".to_string()),
        ]
        .into_iter()
        .collect(),
    )
    .expect("config");
    let a = AclAuthorizer::from_config(&config)
        .expect("authorizer")
        .expect("configured");
    for i in 0..patterns {
        let entry = |user: &str, op| {
            AccessControlEntry::new(user, "*", op, AclPermissionType::Allow).expect("entry")
        };
        let set = [
            entry("User:alice", AclOperation::Write),
            entry("User:carol", AclOperation::Read),
        ]
        .into_iter()
        .collect();
        let pattern = if i % 3 == 0 {
            ResourcePattern::prefixed(ResourceType::Topic, format!("app-{i}-"))
        } else {
            ResourcePattern::literal(ResourceType::Topic, format!("topic-{i}"))
        };
        a.update(pattern, set);
    }
    a
}

fn decisions(c: &mut Criterion) {
    let mut group = c.benchmark_group("acl_authorize");
    for patterns in [10usize, 1_000, 100_000] {
        let a = authorizer(patterns);
        // A literal topic in the middle, and a name under a prefix.
        let literal = format!("topic-{}", patterns / 2 + 2);
        assert_ne!((patterns / 2 + 2) % 3, 0, "a literal pattern");
        let prefixed = format!("app-{}-orders", (patterns / 3) * 3);
        for (case, user, topic) in [
            ("allowed_literal", "alice", literal.as_str()),
            ("allowed_prefixed", "alice", prefixed.as_str()),
            ("refused", "mallory", literal.as_str()),
            ("super_user", "admin", literal.as_str()),
        ] {
            let principal = KafkaPrincipal::user(user);
            let ctx = RequestContext {
                principal: &principal,
                host: "10.1.2.3",
                api_key: ApiKey::Produce as i16,
            };
            group.bench_with_input(BenchmarkId::new(case, patterns), &topic, |b, topic| {
                b.iter(|| {
                    a.authorize(
                        ctx,
                        AclOperation::Write,
                        ResourceType::Topic,
                        black_box(topic),
                        AuditLog::BOTH,
                    )
                })
            });
        }
        let principal = KafkaPrincipal::user("alice");
        let ctx = RequestContext {
            principal: &principal,
            host: "10.1.2.3",
            api_key: ApiKey::InitProducerId as i16,
        };
        group.bench_with_input(
            BenchmarkId::new("by_resource_type", patterns),
            &(),
            |b, ()| {
                b.iter(|| {
                    a.authorize_by_resource_type(ctx, AclOperation::Write, ResourceType::Topic)
                })
            },
        );
    }
    group.finish();
}

criterion_group!(benches, decisions);
criterion_main!(benches);
