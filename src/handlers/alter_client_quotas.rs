//! AlterClientQuotas (API 49, v0-1), on the controller shard: each entry
//! on its own, with its own error (`admin::client_quotas`). Needs
//! ALTER_CONFIGS on the cluster.

use std::rc::Rc;

use kafka_protocol::messages::alter_client_quotas_request;
use kafka_protocol::messages::alter_client_quotas_response::{EntityData, EntryData};
use kafka_protocol::messages::{AlterClientQuotasRequest, AlterClientQuotasResponse};
use kafka_protocol::protocol::StrBytes;

use super::{respond, HandlerResult};
use crate::admin::client_quotas;
use crate::handlers::KafkaApis;
use crate::protocol::{decode_body, errors, Request};
use crate::quota::QuotaOp;
use crate::security::authorizer::AclOperation;

/// Errors.CLUSTER_AUTHORIZATION_FAILED.message(), which getErrorResponse
/// sets on every entry.
const CLUSTER_AUTHORIZATION_FAILED_MESSAGE: &str = "Cluster authorization failed.";

pub async fn handle(ctx: &Rc<KafkaApis>, req: &Request) -> HandlerResult {
    let request: AlterClientQuotasRequest = decode_body(req)?;
    let authorized = ctx.authorize_cluster(req, AclOperation::AlterConfigs);
    let mut entries = Vec::with_capacity(request.entries.len());
    for e in &request.entries {
        if !authorized {
            entries.push(
                EntryData::default()
                    .with_error_code(errors::CLUSTER_AUTHORIZATION_FAILED.code())
                    .with_error_message(Some(StrBytes::from_static_str(
                        CLUSTER_AUTHORIZATION_FAILED_MESSAGE,
                    )))
                    .with_entity(entity(e)),
            );
            continue;
        }
        let components: Vec<(String, Option<String>)> = e
            .entity
            .iter()
            .map(|c| {
                (
                    c.entity_type.to_string(),
                    c.entity_name.as_ref().map(|n| n.to_string()),
                )
            })
            .collect();
        let ops: Vec<QuotaOp> = e
            .ops
            .iter()
            .map(|o| QuotaOp {
                key: o.key.to_string(),
                value: o.value,
                remove: o.remove,
            })
            .collect();
        let result =
            client_quotas::alter_entry(&ctx.admin, &components, &ops, request.validate_only).await;
        let (code, message) = match result {
            Ok(()) => (errors::NONE.code(), None),
            Err(err) => (err.code, err.message),
        };
        entries.push(
            EntryData::default()
                .with_error_code(code)
                .with_error_message(message.map(StrBytes::from_string))
                .with_entity(entity(e)),
        );
    }
    respond(
        req,
        &AlterClientQuotasResponse::default().with_entries(entries),
    )
}

/// The entry's entity as the response echoes it.
fn entity(e: &alter_client_quotas_request::EntryData) -> Vec<EntityData> {
    e.entity
        .iter()
        .map(|c| {
            EntityData::default()
                .with_entity_type(c.entity_type.clone())
                .with_entity_name(c.entity_name.clone())
        })
        .collect()
}
