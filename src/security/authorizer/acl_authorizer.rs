//! The broker's running AclAuthorizer: its settings from the broker config
//! (`authorizer.class.name`, `super.users`,
//! `allow.everyone.if.no.acl.found`), the ACL cache every shard reads, and
//! Kafka's audit log (`kafka.authorizer.logger`). The store I/O that fills
//! the cache is the admin layer's (`admin::acls`) and, in a cluster, the
//! change listener's (`cluster::acl_changes`). ACL changes are rare and
//! every request reads, so a read lock is uncontended.

use std::sync::{RwLock, RwLockReadGuard};

use kafka_protocol::messages::ApiKey;

use super::cache::{parse_super_users, AclCache, AclSet, PrincipalRef};
use super::model::{AclOperation, ResourcePattern, ResourceType};
use crate::config::support::AUTHORIZER_CLASSES;
use crate::config::BrokerConfig;
use crate::protocol::principal::KafkaPrincipal;

/// Kafka's audit logger name, so log filters written for Kafka apply.
pub const AUDIT_LOG_TARGET: &str = "kafka.authorizer.logger";

#[derive(Debug)]
pub struct AclAuthorizer {
    cache: RwLock<AclCache>,
}

/// Who asks, from where, in which request: AuthorizableRequestContext.
#[derive(Clone, Copy)]
pub struct RequestContext<'a> {
    pub principal: &'a KafkaPrincipal,
    /// The client's address without Kafka's leading `/`.
    pub host: &'a str,
    /// The request's API key, for the audit log (Kafka's requestType;
    /// a key, since the controller's APIs have no `ApiKey` here).
    pub api_key: i16,
}

impl<'a> RequestContext<'a> {
    fn principal_ref(&self) -> PrincipalRef<'a> {
        PrincipalRef {
            principal_type: &self.principal.principal_type,
            name: &self.principal.name,
        }
    }
}

/// Which outcomes the audit log records at its normal level (Kafka's
/// `logIfAllowed`/`logIfDenied`; the others go to trace).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct AuditLog {
    pub if_allowed: bool,
    pub if_denied: bool,
}

impl AuditLog {
    /// AuthHelper.authorize's defaults.
    pub const BOTH: AuditLog = AuditLog {
        if_allowed: true,
        if_denied: true,
    };
    /// Denials are expected (filters, fallbacks): not logged at info.
    pub const ALLOWED_ONLY: AuditLog = AuditLog {
        if_allowed: true,
        if_denied: false,
    };
    /// authorizedOperations: neither.
    pub const QUIET: AuditLog = AuditLog {
        if_allowed: false,
        if_denied: false,
    };
}

impl AclAuthorizer {
    /// The authorizer `authorizer.class.name` asks for, if any (the config
    /// layer refused other classes).
    pub fn from_config(config: &BrokerConfig) -> Result<Option<AclAuthorizer>, String> {
        let originals = config.originals();
        let class = originals
            .get("authorizer.class.name")
            .map(|s| s.trim())
            .unwrap_or("");
        if class.is_empty() {
            return Ok(None);
        }
        assert!(AUTHORIZER_CLASSES.contains(&class), "{class}");
        let super_users =
            parse_super_users(originals.get("super.users").map(|s| s.trim()).unwrap_or(""))
                .map_err(|e| format!("super.users: {e}"))?;
        // AclAuthorizer reads it with toString.trim.toBoolean.
        let allow_everyone = originals
            .get("allow.everyone.if.no.acl.found")
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
        Ok(Some(AclAuthorizer {
            cache: RwLock::new(AclCache::new(super_users, allow_everyone)),
        }))
    }

    pub fn cache(&self) -> RwLockReadGuard<'_, AclCache> {
        self.cache.read().expect("acl cache poisoned")
    }

    /// Replaces a pattern's ACLs (an empty set removes it), as stored.
    pub fn update(&self, pattern: ResourcePattern, acls: AclSet) {
        let mut cache = self.cache.write().expect("acl cache poisoned");
        if let Err(e) = cache.update(pattern, acls) {
            log::error!("ACL cache update refused: {e}");
        }
    }

    /// AclAuthorizer.authorize for one action on a literal resource, with
    /// its audit log line.
    pub fn authorize(
        &self,
        ctx: RequestContext<'_>,
        operation: AclOperation,
        resource_type: ResourceType,
        name: &str,
        audit: AuditLog,
    ) -> bool {
        let allowed = self.cache().authorize(
            ctx.principal_ref(),
            ctx.host,
            operation,
            resource_type,
            name,
        );
        log_decision(ctx, allowed, operation, resource_type, name, audit);
        allowed
    }

    /// AclAuthorizer.authorizeByResourceType: may the principal perform
    /// `operation` on some resource of this type?
    pub fn authorize_by_resource_type(
        &self,
        ctx: RequestContext<'_>,
        operation: AclOperation,
        resource_type: ResourceType,
    ) -> bool {
        let decision = self.cache().authorize_by_resource_type(
            ctx.principal_ref(),
            ctx.host,
            operation,
            resource_type,
        );
        // The arguments are the broker's own, never a client's.
        let allowed = decision.expect("authorizeByResourceType arguments");
        log_decision(ctx, allowed, operation, resource_type, "", AuditLog::QUIET);
        allowed
    }
}

/// AclAuthorizer.logAuditMessage's line, at Kafka's levels.
fn log_decision(
    ctx: RequestContext<'_>,
    allowed: bool,
    operation: AclOperation,
    resource_type: ResourceType,
    name: &str,
    audit: AuditLog,
) {
    let level = match (allowed, audit) {
        (
            true,
            AuditLog {
                if_allowed: true, ..
            },
        ) => log::Level::Debug,
        (
            false,
            AuditLog {
                if_denied: true, ..
            },
        ) => log::Level::Info,
        _ => log::Level::Trace,
    };
    if !log::log_enabled!(target: AUDIT_LOG_TARGET, level) {
        return;
    }
    log::log!(
        target: AUDIT_LOG_TARGET,
        level,
        "Principal = {} is {} Operation = {} from host = {} on resource = {}:LITERAL:{} for request = {} with resourceRefCount = 1",
        ctx.principal,
        if allowed { "Allowed" } else { "Denied" },
        operation.pascal_name(),
        ctx.host,
        resource_type.pascal_name(),
        name,
        ApiName(ctx.api_key),
    );
}

/// ApiKeys.name as Kafka's audit log prints it (`Produce`, `Metadata`).
struct ApiName(i16);

impl std::fmt::Display for ApiName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (ApiKey::try_from(self.0), self.0) {
            (Ok(key), _) => std::fmt::Debug::fmt(&key, f),
            (Err(_), 4) => f.write_str("LeaderAndIsr"),
            (Err(_), 5) => f.write_str("StopReplica"),
            (Err(_), 6) => f.write_str("UpdateMetadata"),
            (Err(_), 7) => f.write_str("ControlledShutdown"),
            (Err(_), key) => write!(f, "ApiKey({key})"),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::security::authorizer::{AccessControlEntry, AclPermissionType};

    fn authorizer(pairs: &[(&str, &str)]) -> Result<Option<AclAuthorizer>, String> {
        let map: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        AclAuthorizer::from_config(&BrokerConfig::from_map(&map).map_err(|e| e.to_string())?)
    }

    fn ask(a: &AclAuthorizer, user: &str, op: AclOperation, topic: &str) -> bool {
        let principal = KafkaPrincipal::user(user);
        let ctx = RequestContext {
            principal: &principal,
            host: "127.0.0.1",
            api_key: ApiKey::Produce as i16,
        };
        a.authorize(ctx, op, ResourceType::Topic, topic, AuditLog::BOTH)
    }

    #[test]
    fn configured_by_kafkas_keys() {
        assert!(authorizer(&[]).unwrap().is_none());
        let class = ("authorizer.class.name", AUTHORIZER_CLASSES[1]);
        let a = authorizer(&[class, ("super.users", " User:admin ; User:CN=b,O=x ")])
            .unwrap()
            .unwrap();
        assert!(ask(&a, "admin", AclOperation::Write, "t"));
        assert!(!ask(&a, "alice", AclOperation::Write, "t"));
        let b = authorizer(&[class, ("allow.everyone.if.no.acl.found", " TRUE ")])
            .unwrap()
            .unwrap();
        assert!(ask(&b, "alice", AclOperation::Write, "t"));
        assert!(authorizer(&[class, ("super.users", "admin")])
            .unwrap_err()
            .contains("principalType:principalName"));
    }

    #[test]
    fn updates_apply_to_the_next_decision() {
        let class = ("authorizer.class.name", AUTHORIZER_CLASSES[0]);
        let a = authorizer(&[class]).unwrap().unwrap();
        let pattern = ResourcePattern::literal(ResourceType::Topic, "t");
        let read = AccessControlEntry::new(
            "User:alice",
            "127.0.0.1",
            AclOperation::Read,
            AclPermissionType::Allow,
        )
        .unwrap();
        a.update(pattern.clone(), [read].into_iter().collect());
        assert!(ask(&a, "alice", AclOperation::Read, "t"));
        assert!(ask(&a, "alice", AclOperation::Describe, "t"));
        assert!(!ask(&a, "alice", AclOperation::Write, "t"));
        assert!(!ask(&a, "bob", AclOperation::Read, "t"));
        a.update(pattern, AclSet::new());
        assert!(!ask(&a, "alice", AclOperation::Read, "t"));
    }
}
