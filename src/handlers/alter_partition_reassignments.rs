//! AlterPartitionReassignments (API 45, v0, KIP-455): starts or cancels
//! reassignments on the active controller (other brokers answer
//! NOT_CONTROLLER). Listed only in cluster mode. Needs ALTER on the
//! cluster.

use std::rc::Rc;

use kafka_protocol::messages::alter_partition_reassignments_response::{
    ReassignablePartitionResponse, ReassignableTopicResponse,
};
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::auth_helper::not_authorized_message;
use super::{ask_active_controller, respond, HandlerResult};
use crate::controller::reassignment::{ReassignmentRequest, ReassignmentResult};
use crate::controller::ControllerRequest;
use crate::handlers::KafkaApis;
use crate::protocol::{decode_body, errors, Request};
use crate::security::authorizer::AclOperation;

/// Kafka's message for NOT_CONTROLLER (Errors.NOT_CONTROLLER.message()).
pub const NOT_CONTROLLER_MESSAGE: &str = "This is not the correct controller for this cluster.";

pub async fn handle(ctx: &Rc<KafkaApis>, req: &Request) -> HandlerResult {
    let request: AlterPartitionReassignmentsRequest = decode_body(req)?;
    if !ctx.authorize_cluster(req, AclOperation::Alter) {
        let message = StrBytes::from_string(not_authorized_message(req));
        return respond(req, &unauthorized(&request, message));
    }
    // A partition named twice counts once, the last one winning (Kafka
    // collects them into a map).
    let mut reassignments: Vec<ReassignmentRequest> = Vec::new();
    for t in &request.topics {
        for p in &t.partitions {
            let topic = t.name.0.to_string();
            reassignments.retain(|r| !(r.topic == topic && r.partition == p.partition_index));
            reassignments.push(ReassignmentRequest {
                topic,
                partition: p.partition_index,
                target: p
                    .replicas
                    .as_ref()
                    .map(|rs| rs.iter().map(|b| b.0).collect()),
            });
        }
    }
    let outcome = match &ctx.cluster {
        Some(cluster) => {
            ask_active_controller(cluster, |reply| {
                ControllerRequest::AlterPartitionReassignments {
                    reassignments,
                    reply,
                }
            })
            .await
        }
        None => Err(errors::NOT_CONTROLLER),
    };
    let body = match outcome {
        Ok(results) => AlterPartitionReassignmentsResponse::default()
            .with_error_code(errors::NONE.code())
            // Kafka's default message is "" where no error is set.
            .with_error_message(Some(StrBytes::from_static_str("")))
            .with_responses(by_topic(results)),
        Err(code) => AlterPartitionReassignmentsResponse::default()
            .with_error_code(code.code())
            .with_error_message(
                (code == errors::NOT_CONTROLLER)
                    .then(|| StrBytes::from_static_str(NOT_CONTROLLER_MESSAGE)),
            ),
    };
    respond(req, &body)
}

/// getErrorResponse for authorizeClusterOperation's exception: its code
/// and message at the top and on every partition named.
fn unauthorized(
    request: &AlterPartitionReassignmentsRequest,
    message: StrBytes,
) -> AlterPartitionReassignmentsResponse {
    let code = errors::CLUSTER_AUTHORIZATION_FAILED.code();
    let responses = request
        .topics
        .iter()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    ReassignablePartitionResponse::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(code)
                        .with_error_message(Some(message.clone()))
                })
                .collect();
            ReassignableTopicResponse::default()
                .with_name(t.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    AlterPartitionReassignmentsResponse::default()
        .with_error_code(code)
        .with_error_message(Some(message))
        .with_responses(responses)
}

fn by_topic(results: Vec<ReassignmentResult>) -> Vec<ReassignableTopicResponse> {
    let mut out: Vec<ReassignableTopicResponse> = Vec::new();
    for r in results {
        let pr = ReassignablePartitionResponse::default()
            .with_partition_index(r.partition)
            .with_error_code(r.error_code.code())
            .with_error_message(r.error_message.map(StrBytes::from_string));
        match out.iter_mut().find(|t| t.name.0.as_str() == r.topic) {
            Some(t) => t.partitions.push(pr),
            None => out.push(
                ReassignableTopicResponse::default()
                    .with_name(TopicName(StrBytes::from_string(r.topic)))
                    .with_partitions(vec![pr]),
            ),
        }
    }
    out
}
