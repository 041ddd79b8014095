//! Kafka's AuthHelper: what the handlers ask the authorizer. Without
//! `authorizer.class.name` every check passes and no ACL is consulted,
//! as in Kafka. Checks are on literal resources; `filter_authorized` asks
//! once per distinct name.

use std::collections::HashSet;

use super::KafkaApis;
use crate::protocol::{ClientIdentity, Request};
use crate::security::authorizer::{
    AclOperation, AuditLog, RequestContext, ResourceType, CLUSTER_NAME,
};

/// An `authorized_operations` field nobody asked for (Int.MinValue).
pub const AUTHORIZED_OPERATIONS_OMITTED: i32 = i32::MIN;

/// AclEntry.supportedOperations, per resource type.
fn supported_operations(resource_type: ResourceType) -> &'static [AclOperation] {
    use AclOperation::*;
    match resource_type {
        ResourceType::Topic => &[
            Read,
            Write,
            Create,
            Describe,
            Delete,
            Alter,
            DescribeConfigs,
            AlterConfigs,
        ],
        ResourceType::Group => &[Read, Describe, Delete],
        ResourceType::Cluster => &[
            Create,
            ClusterAction,
            DescribeConfigs,
            AlterConfigs,
            IdempotentWrite,
            Alter,
            Describe,
        ],
        ResourceType::TransactionalId => &[Describe, Write],
        ResourceType::DelegationToken => &[Describe],
        ResourceType::User => &[CreateTokens, DescribeTokens],
        _ => &[],
    }
}

/// The request's principal and client address as the authorizer sees them.
pub fn request_context(req: &Request) -> RequestContext<'_> {
    let host = req
        .client_host
        .strip_prefix('/')
        .unwrap_or(&req.client_host);
    RequestContext {
        principal: &req.principal,
        host,
        api_key: req.api_key as i16,
    }
}

impl KafkaApis {
    /// AuthHelper.authorize on a literal resource, audit-logged both ways.
    pub fn authorize(
        &self,
        req: &Request,
        operation: AclOperation,
        resource_type: ResourceType,
        name: &str,
    ) -> bool {
        self.authorize_logged(req, operation, resource_type, name, AuditLog::BOTH)
    }

    pub fn authorize_logged(
        &self,
        req: &Request,
        operation: AclOperation,
        resource_type: ResourceType,
        name: &str,
        audit: AuditLog,
    ) -> bool {
        match &self.authorizer {
            None => true,
            Some(a) => a.authorize(request_context(req), operation, resource_type, name, audit),
        }
    }

    /// An operation on the cluster resource (`kafka-cluster`).
    pub fn authorize_cluster(&self, req: &Request, operation: AclOperation) -> bool {
        self.authorize(req, operation, ResourceType::Cluster, CLUSTER_NAME)
    }

    /// AuthHelper.authorizeByResourceType.
    pub fn authorize_by_resource_type(
        &self,
        req: &Request,
        operation: AclOperation,
        resource_type: ResourceType,
    ) -> bool {
        match &self.authorizer {
            None => true,
            Some(a) => a.authorize_by_resource_type(request_context(req), operation, resource_type),
        }
    }

    /// AuthHelper.filterByAuthorized: the names (each asked once) the
    /// principal may perform `operation` on. None when every name passes
    /// because no authorizer is configured, so callers skip the lookups.
    pub fn filter_authorized<'a>(
        &self,
        req: &Request,
        operation: AclOperation,
        resource_type: ResourceType,
        names: impl IntoIterator<Item = &'a str>,
        audit: AuditLog,
    ) -> Option<HashSet<&'a str>> {
        let authorizer = self.authorizer.as_ref()?;
        let ctx = request_context(req);
        let mut seen = HashSet::new();
        let mut allowed = HashSet::new();
        for name in names {
            if seen.insert(name) && authorizer.authorize(ctx, operation, resource_type, name, audit)
            {
                allowed.insert(name);
            }
        }
        Some(allowed)
    }

    /// AuthHelper.authorizedOperations: the bit field of the operations the
    /// principal may perform on the resource (all supported ones without an
    /// authorizer); never audit-logged.
    pub fn authorized_operations(
        &self,
        req: &Request,
        resource_type: ResourceType,
        name: &str,
    ) -> i32 {
        supported_operations(resource_type)
            .iter()
            .filter(|op| self.authorize_logged(req, **op, resource_type, name, AuditLog::QUIET))
            .fold(0, |bits, op| bits | (1 << op.code()))
    }
}

/// CLUSTER_ACTION on the cluster for a controller request (LeaderAndIsr,
/// StopReplica, UpdateMetadata, ControlledShutdown), which arrives as a
/// bare frame with its connection's identity.
pub fn authorize_cluster_action(ctx: &KafkaApis, identity: &ClientIdentity, api_key: i16) -> bool {
    let Some(authorizer) = &ctx.authorizer else {
        return true;
    };
    let host = identity
        .client_host
        .strip_prefix('/')
        .unwrap_or(&identity.client_host);
    let request = RequestContext {
        principal: &identity.principal,
        host,
        api_key,
    };
    authorizer.authorize(
        request,
        AclOperation::ClusterAction,
        ResourceType::Cluster,
        CLUSTER_NAME,
        AuditLog::BOTH,
    )
}

/// Whether a filter result (None: no authorizer) lets `name` through.
pub fn passes(allowed: &Option<HashSet<&str>>, name: &str) -> bool {
    allowed.as_ref().is_none_or(|set| set.contains(name))
}

/// The message of the ClusterAuthorizationException AuthHelper's
/// authorizeClusterOperation throws (Kafka prints its request object there;
/// this names the same session and listener).
pub fn not_authorized_message(req: &Request) -> String {
    format!(
        "Request Request(session=Session({},{}), listenerName=ListenerName({})) is not authorized.",
        req.principal, req.client_host, req.listener_name
    )
}
