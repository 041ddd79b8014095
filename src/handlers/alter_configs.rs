//! AlterConfigs (API 33, v0-2), run on the controller shard: each
//! resource's entries replace its whole override set (what kafka-configs
//! sends for brokers). The checks and the write are `admin::configs`.

use std::rc::Rc;

use kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{AlterConfigsRequest, AlterConfigsResponse};
use kafka_protocol::protocol::StrBytes;

use super::{respond, HandlerResult};
use crate::admin::configs::{alter_configs, AlterConfigsResource, AlterKind};
use crate::admin::AdminResult;
use crate::config::alter_ops::AlterConfigOp;
use crate::handlers::KafkaApis;
use crate::protocol::errors;
use crate::protocol::{decode_body, Request};

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
    let results = alter_configs(
        &ctx.admin,
        &resources,
        AlterKind::Legacy,
        request.validate_only,
    )
    .await;
    let responses = request
        .resources
        .iter()
        .zip(results)
        .map(|(r, result)| {
            let (code, message) = outcome(result);
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

/// The error code and message of one resource's result, as Kafka's
/// ApiError: no message on success or for UNKNOWN_SERVER_ERROR.
pub fn outcome(result: AdminResult<()>) -> (i16, Option<StrBytes>) {
    match result {
        Ok(()) => (errors::NONE.code(), None),
        Err(e) if e.code == errors::UNKNOWN_SERVER_ERROR => (e.code.code(), None),
        Err(e) => (e.code.code(), Some(StrBytes::from_string(e.message))),
    }
}
