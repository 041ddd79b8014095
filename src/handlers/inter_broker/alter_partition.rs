//! AlterPartition (API 56), from partition leaders to the controller: ISR
//! changes, fenced by leader epoch and partition epoch. Only the active
//! controller answers; others say NOT_CONTROLLER. v2-3 name topics by id;
//! v0-1 (`protocol::legacy`) by name, mapped to ids through the metadata
//! image (an unknown name answers UNKNOWN_TOPIC_OR_PARTITION per
//! partition, as Kafka's ZooKeeper controller does). Needs CLUSTER_ACTION
//! on the cluster, checked before whether this is the controller.

use std::rc::Rc;

use kafka_protocol::messages::alter_partition_response::{PartitionData, TopicData};
use kafka_protocol::messages::{AlterPartitionRequest, AlterPartitionResponse, BrokerId};

use crate::controller::{ControllerRequest, IsrChangeRequest, IsrChangeResult};
use crate::handlers::KafkaApis;
use crate::handlers::{respond, HandlerResult};
use crate::protocol::errors::ErrorCode;
use crate::protocol::legacy::{
    AlterPartitionV0PartitionResponse, AlterPartitionV0Request, AlterPartitionV0Response,
    AlterPartitionV0TopicResponse,
};
use crate::protocol::{decode_body, errors, Request};
use crate::security::authorizer::AclOperation;

/// authorizeClusterOperation(CLUSTER_ACTION); a denial is answered as
/// getErrorResponse does: the top-level code only.
fn denied(ctx: &KafkaApis, req: &Request) -> Option<HandlerResult> {
    if ctx.authorize_cluster(req, AclOperation::ClusterAction) {
        return None;
    }
    let code = errors::CLUSTER_AUTHORIZATION_FAILED.code();
    Some(if req.api_version < 2 {
        let body = AlterPartitionV0Response {
            error_code: code,
            ..Default::default()
        };
        respond(req, &body)
    } else {
        respond(
            req,
            &AlterPartitionResponse::default().with_error_code(code),
        )
    })
}

pub async fn handle(ctx: &Rc<KafkaApis>, req: &Request) -> HandlerResult {
    if req.api_version < 2 {
        return handle_named(ctx, req).await;
    }
    let request: AlterPartitionRequest = decode_body(req)?;
    if let Some(denial) = denied(ctx, req) {
        return denial;
    }
    let mut changes = Vec::new();
    for t in &request.topics {
        for p in &t.partitions {
            let isr: Vec<i32> = if req.api_version >= 3 {
                p.new_isr_with_epochs
                    .iter()
                    .map(|b| b.broker_id.0)
                    .collect()
            } else {
                p.new_isr.iter().map(|b| b.0).collect()
            };
            changes.push(IsrChangeRequest {
                topic_id: t.topic_id,
                partition: p.partition_index,
                leader_epoch: p.leader_epoch,
                partition_epoch: p.partition_epoch,
                new_isr: isr,
            });
        }
    }
    let results = match alter(ctx, request.broker_id.0, changes).await? {
        Ok(results) => results,
        Err(code) => {
            return respond(
                req,
                &AlterPartitionResponse::default().with_error_code(code.code()),
            )
        }
    };
    let mut topics: Vec<TopicData> = Vec::new();
    for r in results {
        let pd = PartitionData::default()
            .with_partition_index(r.partition)
            .with_error_code(r.error_code.code())
            .with_leader_id(BrokerId(r.leader))
            .with_leader_epoch(r.leader_epoch)
            .with_isr(r.isr.iter().map(|b| BrokerId(*b)).collect())
            .with_partition_epoch(r.partition_epoch);
        match topics.iter_mut().find(|t| t.topic_id == r.topic_id) {
            Some(t) => t.partitions.push(pd),
            None => topics.push(
                TopicData::default()
                    .with_topic_id(r.topic_id)
                    .with_partitions(vec![pd]),
            ),
        }
    }
    respond(
        req,
        &AlterPartitionResponse::default()
            .with_error_code(errors::NONE.code())
            .with_topics(topics),
    )
}

/// Sends the changes to the active controller: its per-partition results,
/// or the top-level error code.
async fn alter(
    ctx: &Rc<KafkaApis>,
    broker_id: i32,
    changes: Vec<IsrChangeRequest>,
) -> Result<Result<Vec<IsrChangeResult>, ErrorCode>, String> {
    let Some(cluster) = &ctx.cluster else {
        return Err("AlterPartition on a single-broker kshard".into());
    };
    if !cluster.controller.is_active() {
        return Ok(Err(errors::NOT_CONTROLLER));
    }
    let (tx, rx) = futures_channel::oneshot::channel();
    if !cluster
        .controller
        .request(ControllerRequest::AlterPartition {
            broker_id,
            changes,
            reply: tx,
        })
    {
        return Ok(Err(errors::NOT_CONTROLLER));
    }
    Ok(match rx.await {
        Ok(result) => result,
        Err(_) => Err(errors::NOT_CONTROLLER),
    })
}

/// AlterPartition v0-1: topics by name.
async fn handle_named(ctx: &Rc<KafkaApis>, req: &Request) -> HandlerResult {
    let request: AlterPartitionV0Request = decode_body(req)?;
    if let Some(denial) = denied(ctx, req) {
        return denial;
    }
    let image = ctx.metadata.image();
    let mut changes = Vec::new();
    let mut names: Vec<(uuid::Uuid, &str)> = Vec::new();
    let mut unknown: Vec<AlterPartitionV0TopicResponse> = Vec::new();
    for t in &request.topics {
        let Some(info) = image.topic(&t.name) else {
            unknown.push(AlterPartitionV0TopicResponse {
                name: t.name.clone(),
                partitions: t
                    .partitions
                    .iter()
                    .map(|p| AlterPartitionV0PartitionResponse {
                        partition_index: p.partition_index,
                        error_code: errors::UNKNOWN_TOPIC_OR_PARTITION.code(),
                        ..Default::default()
                    })
                    .collect(),
            });
            continue;
        };
        names.push((info.topic_id, &t.name));
        for p in &t.partitions {
            changes.push(IsrChangeRequest {
                topic_id: info.topic_id,
                partition: p.partition_index,
                leader_epoch: p.leader_epoch,
                partition_epoch: p.partition_epoch,
                new_isr: p.new_isr.clone(),
            });
        }
    }
    let results = match alter(ctx, request.broker_id, changes).await? {
        Ok(results) => results,
        Err(code) => {
            let top = AlterPartitionV0Response {
                error_code: code.code(),
                ..Default::default()
            };
            return respond(req, &top);
        }
    };
    let mut topics: Vec<AlterPartitionV0TopicResponse> = Vec::new();
    for r in results {
        let name = names
            .iter()
            .find(|(id, _)| *id == r.topic_id)
            .map_or("", |(_, name)| name);
        let pd = AlterPartitionV0PartitionResponse {
            partition_index: r.partition,
            error_code: r.error_code.code(),
            leader_id: r.leader,
            leader_epoch: r.leader_epoch,
            isr: r.isr,
            leader_recovery_state: 0,
            partition_epoch: r.partition_epoch,
        };
        match topics.iter_mut().find(|t| t.name == name) {
            Some(t) => t.partitions.push(pd),
            None => topics.push(AlterPartitionV0TopicResponse {
                name: name.to_string(),
                partitions: vec![pd],
            }),
        }
    }
    topics.extend(unknown);
    let response = AlterPartitionV0Response {
        error_code: errors::NONE.code(),
        topics,
        ..Default::default()
    };
    respond(req, &response)
}
