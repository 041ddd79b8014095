//! AlterConfigs (API 33, v0-2), run on the controller shard: each
//! resource's entries replace its whole override set (what kafka-configs
//! sends for brokers). The checks and the write are `admin::configs`;
//! ALTER_CONFIGS on the topic or the cluster is asked here, after the
//! checks Kafka's ConfigAdminManager.preprocess makes first.

use std::collections::HashMap;
use std::rc::Rc;

use kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{AlterConfigsRequest, AlterConfigsResponse};
use kafka_protocol::protocol::StrBytes;

use super::{respond, HandlerResult};
use crate::admin::configs::{
    alter_configs, AlterConfigsResource, AlterKind, RESOURCE_BROKER, RESOURCE_BROKER_LOGGER,
    RESOURCE_TOPIC,
};
use crate::admin::{AdminError, AdminResult};
use crate::config::alter_ops::{check_request_shape, AlterConfigOp};
use crate::handlers::KafkaApis;
use crate::protocol::errors;
use crate::protocol::{decode_body, Request};
use crate::security::authorizer::{AclOperation, ResourceType};

/// One resource's error code and message.
pub type Outcome = (i16, Option<StrBytes>);

pub async fn handle(ctx: &Rc<KafkaApis>, req: &Request) -> HandlerResult {
    let request: AlterConfigsRequest = decode_body(req)?;
    let resources: Vec<AlterConfigsResource> = request
        .resources
        .iter()
        .map(|r| AlterConfigsResource {
            resource_type: r.resource_type,
            name: r.resource_name.to_string(),
            ops: r
                .configs
                .iter()
                .map(|c| AlterConfigOp {
                    name: c.name.to_string(),
                    op: 0,
                    value: c.value.as_ref().map(|v| v.to_string()),
                })
                .collect(),
        })
        .collect();
    let results = alter_authorized(
        ctx,
        req,
        &resources,
        AlterKind::Legacy,
        request.validate_only,
    )
    .await;
    let responses = request
        .resources
        .iter()
        .zip(results)
        .map(|(r, (code, message))| {
            AlterConfigsResourceResponse::default()
                .with_error_code(code)
                .with_error_message(message)
                .with_resource_type(r.resource_type)
                .with_resource_name(r.resource_name.clone())
        })
        .collect();
    respond(
        req,
        &AlterConfigsResponse::default().with_responses(responses),
    )
}

/// Runs the resources the principal may alter; the others are answered
/// TOPIC_ or CLUSTER_AUTHORIZATION_FAILED without a message. One outcome
/// per resource, in request order (Kafka reassembles its response so).
pub async fn alter_authorized(
    ctx: &Rc<KafkaApis>,
    req: &Request,
    resources: &[AlterConfigsResource],
    kind: AlterKind,
    validate_only: bool,
) -> Vec<Outcome> {
    // Without an authorizer nothing is settled here.
    let settled = match &ctx.authorizer {
        Some(_) => settle(ctx, req, resources, kind).await,
        None => Vec::new(),
    };
    if settled.iter().all(Option::is_none) {
        let results = alter_configs(&ctx.admin, resources, kind, validate_only).await;
        return results.into_iter().map(outcome).collect();
    }
    let pending: Vec<AlterConfigsResource> = resources
        .iter()
        .zip(&settled)
        .filter(|(_, s)| s.is_none())
        .map(|(r, _)| r.clone())
        .collect();
    let mut results = alter_configs(&ctx.admin, &pending, kind, validate_only)
        .await
        .into_iter();
    settled
        .into_iter()
        .map(|s| {
            s.unwrap_or_else(|| {
                let missing = || Err(AdminError::new(errors::UNKNOWN_SERVER_ERROR, ""));
                outcome(results.next().unwrap_or_else(missing))
            })
        })
        .collect()
}

/// The outcome of each resource the authorization settles, None for those
/// left to `alter_configs`. Kafka asks only about the resources its
/// preprocessing passed: duplicates and bad entries are not asked about.
async fn settle(
    ctx: &Rc<KafkaApis>,
    req: &Request,
    resources: &[AlterConfigsResource],
    kind: AlterKind,
) -> Vec<Option<Outcome>> {
    let mut seen: HashMap<(i8, &str), usize> = HashMap::with_capacity(resources.len());
    for r in resources {
        *seen.entry((r.resource_type, r.name.as_str())).or_insert(0) += 1;
    }
    let mut settled = Vec::with_capacity(resources.len());
    for r in resources {
        let preprocessed = seen[&(r.resource_type, r.name.as_str())] == 1
            && check_request_shape(&r.ops, kind == AlterKind::Incremental).is_ok();
        let outcome = if preprocessed {
            settle_one(ctx, req, r, kind).await
        } else {
            None
        };
        settled.push(outcome);
    }
    settled
}

async fn settle_one(
    ctx: &Rc<KafkaApis>,
    req: &Request,
    r: &AlterConfigsResource,
    kind: AlterKind,
) -> Option<Outcome> {
    let denied = match (r.resource_type, kind) {
        (RESOURCE_TOPIC, _) => !ctx.authorize(
            req,
            AclOperation::AlterConfigs,
            ResourceType::Topic,
            &r.name,
        ),
        (RESOURCE_BROKER, _) => {
            // Preprocessing validates a broker change before the check.
            let check = alter_configs(&ctx.admin, std::slice::from_ref(r), kind, true).await;
            if let Some(Err(e)) = check.into_iter().next() {
                return Some(outcome(Err(e)));
            }
            !ctx.authorize_cluster(req, AclOperation::AlterConfigs)
        }
        // Asked in preprocessing, before the broker id is checked.
        (RESOURCE_BROKER_LOGGER, AlterKind::Incremental) => {
            !ctx.authorize_cluster(req, AclOperation::AlterConfigs)
        }
        _ => return None,
    };
    let code = match r.resource_type {
        RESOURCE_TOPIC => errors::TOPIC_AUTHORIZATION_FAILED,
        _ => errors::CLUSTER_AUTHORIZATION_FAILED,
    };
    denied.then_some((code.code(), None))
}

/// The error code and message of one resource's result, as Kafka's
/// ApiError: no message on success or for UNKNOWN_SERVER_ERROR.
pub fn outcome(result: AdminResult<()>) -> Outcome {
    match result {
        Ok(()) => (errors::NONE.code(), None),
        Err(e) if e.code == errors::UNKNOWN_SERVER_ERROR => (e.code.code(), None),
        Err(e) => (e.code.code(), Some(StrBytes::from_string(e.message))),
    }
}
