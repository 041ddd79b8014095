//! ListPartitionReassignments (API 46, v0, KIP-455): the reassignments in
//! progress, from the active controller (other brokers answer
//! NOT_CONTROLLER). Listed only in cluster mode. Needs DESCRIBE on the
//! cluster.

use std::rc::Rc;

use kafka_protocol::messages::list_partition_reassignments_response::{
    OngoingPartitionReassignment, OngoingTopicReassignment,
};
use kafka_protocol::messages::{
    BrokerId, ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::alter_partition_reassignments::NOT_CONTROLLER_MESSAGE;
use super::auth_helper::not_authorized_message;
use super::{ask_active_controller, respond, HandlerResult};
use crate::controller::reassignment::OngoingReassignment;
use crate::controller::ControllerRequest;
use crate::handlers::KafkaApis;
use crate::protocol::{decode_body, errors, Request};
use crate::security::authorizer::AclOperation;

pub async fn handle(ctx: &Rc<KafkaApis>, req: &Request) -> HandlerResult {
    let request: ListPartitionReassignmentsRequest = decode_body(req)?;
    if !ctx.authorize_cluster(req, AclOperation::Describe) {
        let message = StrBytes::from_string(not_authorized_message(req));
        return respond(req, &unauthorized(&request, message));
    }
    let partitions: Option<Vec<(String, i32)>> = request.topics.as_ref().map(|ts| {
        ts.iter()
            .flat_map(|t| {
                t.partition_indexes
                    .iter()
                    .map(move |p| (t.name.0.to_string(), *p))
            })
            .collect()
    });
    let outcome = match &ctx.cluster {
        Some(cluster) => {
            ask_active_controller(cluster, |reply| {
                ControllerRequest::ListPartitionReassignments { partitions, reply }
            })
            .await
        }
        None => Err(errors::NOT_CONTROLLER),
    };
    let body = match outcome {
        Ok(ongoing) => ListPartitionReassignmentsResponse::default()
            .with_error_code(errors::NONE.code())
            // Kafka's default message is "" where no error is set.
            .with_error_message(Some(StrBytes::from_static_str("")))
            .with_topics(by_topic(ongoing)),
        Err(code) => ListPartitionReassignmentsResponse::default()
            .with_error_code(code.code())
            .with_error_message(
                (code == errors::NOT_CONTROLLER)
                    .then(|| StrBytes::from_static_str(NOT_CONTROLLER_MESSAGE)),
            ),
    };
    respond(req, &body)
}

/// getErrorResponse for authorizeClusterOperation's exception: its code
/// and message at the top, the partitions asked about echoed bare.
fn unauthorized(
    request: &ListPartitionReassignmentsRequest,
    message: StrBytes,
) -> ListPartitionReassignmentsResponse {
    let topics = request
        .topics
        .iter()
        .flatten()
        .map(|t| {
            let partitions = t
                .partition_indexes
                .iter()
                .map(|&p| OngoingPartitionReassignment::default().with_partition_index(p))
                .collect();
            OngoingTopicReassignment::default()
                .with_name(t.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    ListPartitionReassignmentsResponse::default()
        .with_error_code(errors::CLUSTER_AUTHORIZATION_FAILED.code())
        .with_error_message(Some(message))
        .with_topics(topics)
}

fn broker_ids(ids: &[i32]) -> Vec<BrokerId> {
    ids.iter().map(|b| BrokerId(*b)).collect()
}

fn by_topic(ongoing: Vec<OngoingReassignment>) -> Vec<OngoingTopicReassignment> {
    let mut out: Vec<OngoingTopicReassignment> = Vec::new();
    for o in ongoing {
        let pr = OngoingPartitionReassignment::default()
            .with_partition_index(o.partition)
            .with_replicas(broker_ids(&o.assignment.replicas))
            .with_adding_replicas(broker_ids(&o.assignment.adding))
            .with_removing_replicas(broker_ids(&o.assignment.removing));
        match out.iter_mut().find(|t| t.name.0.as_str() == o.topic) {
            Some(t) => t.partitions.push(pr),
            None => out.push(
                OngoingTopicReassignment::default()
                    .with_name(TopicName(StrBytes::from_string(o.topic)))
                    .with_partitions(vec![pr]),
            ),
        }
    }
    out
}
