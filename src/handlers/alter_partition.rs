//! AlterPartition (API 56, v2-3), from partition leaders to the
//! controller: ISR changes, fenced by leader epoch and partition epoch.
//! Only the active controller answers; others say NOT_CONTROLLER.

use std::rc::Rc;

use kafka_protocol::messages::alter_partition_response::{PartitionData, TopicData};
use kafka_protocol::messages::{AlterPartitionRequest, AlterPartitionResponse, BrokerId};

use super::{respond, HandlerResult};
use crate::cluster::controller::{ControllerRequest, IsrChangeRequest};
use crate::protocol::{decode_body, errors, Request};
use crate::shard_context::ShardContext;

pub async fn handle(ctx: &Rc<ShardContext>, req: &Request) -> HandlerResult {
    let request: AlterPartitionRequest = decode_body(req)?;
    let top = |code: i16| {
        respond(
            req,
            &AlterPartitionResponse::default().with_error_code(code),
        )
    };
    let Some(cluster) = &ctx.cluster else {
        return Err("AlterPartition on a single-broker kshard".into());
    };
    if !cluster.controller.is_active() {
        return top(errors::NOT_CONTROLLER);
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
    let (tx, rx) = futures_channel::oneshot::channel();
    if !cluster
        .controller
        .request(ControllerRequest::AlterPartition {
            broker_id: request.broker_id.0,
            changes,
            reply: tx,
        })
    {
        return top(errors::NOT_CONTROLLER);
    }
    let results = match rx.await {
        Ok(Ok(r)) => r,
        Ok(Err(code)) => return top(code),
        Err(_) => return top(errors::NOT_CONTROLLER),
    };
    let mut topics: Vec<TopicData> = Vec::new();
    for r in results {
        let pd = PartitionData::default()
            .with_partition_index(r.partition)
            .with_error_code(r.error_code)
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
            .with_error_code(errors::NONE)
            .with_topics(topics),
    )
}
