//! IncrementalAlterConfigs (API 44, v0-1), run on the controller shard:
//! SET, DELETE, APPEND and SUBTRACT applied to each resource's stored
//! overrides (what kafka-configs sends for topics and broker loggers, and
//! the Java AdminClient's `incrementalAlterConfigs`). ALTER_CONFIGS on
//! the topic or the cluster, as for AlterConfigs.

use std::rc::Rc;

use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse};

use super::alter_configs::alter_authorized;
use super::{respond, HandlerResult};
use crate::admin::configs::{AlterConfigsResource, AlterKind};
use crate::config::alter_ops::AlterConfigOp;
use crate::handlers::KafkaApis;
use crate::protocol::{decode_body, Request};

pub async fn handle(ctx: &Rc<KafkaApis>, req: &Request) -> HandlerResult {
    let request: IncrementalAlterConfigsRequest = decode_body(req)?;
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
                    op: c.config_operation,
                    value: c.value.as_ref().map(|v| v.to_string()),
                })
                .collect(),
        })
        .collect();
    let results = alter_authorized(
        ctx,
        req,
        &resources,
        AlterKind::Incremental,
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
        &IncrementalAlterConfigsResponse::default().with_responses(responses),
    )
}
