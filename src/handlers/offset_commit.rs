//! OffsetCommit (API 8, v2-9), run by the group coordinator. Commits for
//! partitions that do not exist get UNKNOWN_TOPIC_OR_PARTITION (as in
//! Kafka's KafkaApis); the rest are written to `__consumer_offsets` and answered
//! once replicated (offsets.commit.required.acks), when OffsetFetch starts
//! returning them.

use std::rc::Rc;

use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::{OffsetCommitRequest, OffsetCommitResponse};

use super::{respond, HandlerResult};
use crate::coordinator::offsets::{CommitOutcome, CommitPart, OffsetCommit};
use crate::handlers::KafkaApis;
use crate::protocol::errors::ErrorCode;
use crate::protocol::{decode_body, errors, Request};
use crate::security::authorizer::{AclOperation, ResourceType};

/// Versions 2-4 carry a retention time (-1: the broker default).
const LAST_RETENTION_VERSION: i16 = 4;

/// Waits until the commits are replicated (Kafka's pending offset
/// commits), then makes them visible; one error per commit.
async fn replicated(ctx: &KafkaApis, outcome: CommitOutcome) -> Vec<ErrorCode> {
    let CommitOutcome {
        mut results,
        pending,
    } = outcome;
    let Some(pending) = pending else {
        return results;
    };
    let coordinator = ctx
        .coordinator
        .as_ref()
        .expect("commits ran on the coordinator's shard");
    let replicated = coordinator.replicated(Some(pending.stored)).await;
    let e = ctx
        .with_coordinator(|c, _, _| c.complete_commit(pending, replicated))
        .expect("commits ran on the coordinator's shard");
    if !e.is_none() {
        for r in results.iter_mut().filter(|r| r.is_none()) {
            *r = e;
        }
    }
    results
}

pub async fn handle(ctx: &Rc<KafkaApis>, req: &Request) -> HandlerResult {
    let r: OffsetCommitRequest = decode_body(req)?;
    let image = ctx.metadata.image();
    let mut parts = Vec::new();
    // Index into `parts` per request partition, or the error it gets.
    let mut slots: Vec<Vec<Result<usize, ErrorCode>>> = Vec::with_capacity(r.topics.len());
    // READ on the group, then on each topic, before existence.
    let group_read = ctx.authorize(req, AclOperation::Read, ResourceType::Group, &r.group_id.0);
    for t in &r.topics {
        let topic = image.topic(&t.name.0);
        let refused = if !group_read {
            Some(errors::GROUP_AUTHORIZATION_FAILED)
        } else if !ctx.authorize(req, AclOperation::Read, ResourceType::Topic, &t.name.0) {
            Some(errors::TOPIC_AUTHORIZATION_FAILED)
        } else {
            None
        };
        slots.push(
            t.partitions
                .iter()
                .map(|p| {
                    if let Some(e) = refused {
                        return Err(e);
                    }
                    let exists = topic.is_some_and(|t| {
                        t.partitions
                            .iter()
                            .any(|q| q.partition == p.partition_index)
                    });
                    if !exists {
                        return Err(errors::UNKNOWN_TOPIC_OR_PARTITION);
                    }
                    parts.push(CommitPart {
                        topic: t.name.0.to_string(),
                        partition: p.partition_index,
                        offset: p.committed_offset,
                        leader_epoch: p.committed_leader_epoch,
                        metadata: p.committed_metadata.as_ref().map(|m| m.to_string()),
                    });
                    Ok(parts.len() - 1)
                })
                .collect(),
        );
    }
    let retention_ms = if req.api_version <= LAST_RETENTION_VERSION {
        r.retention_time_ms
    } else {
        -1
    };
    // Nothing left to commit: Kafka answers without asking the coordinator.
    let outcome = if parts.is_empty() {
        CommitOutcome {
            results: Vec::new(),
            pending: None,
        }
    } else {
        let commit = OffsetCommit {
            group_id: &r.group_id.0,
            generation_id: r.generation_id_or_member_epoch,
            member_id: &r.member_id,
            instance_id: r.group_instance_id.as_deref(),
            retention_ms,
            parts: &parts,
        };
        ctx.with_coordinator(|c, log, now| c.commit_offsets(log, &commit, now))?
    };
    let results = replicated(ctx, outcome).await;
    let topics = r
        .topics
        .iter()
        .zip(slots)
        .map(|(t, slots)| {
            OffsetCommitResponseTopic::default()
                .with_name(t.name.clone())
                .with_partitions(
                    t.partitions
                        .iter()
                        .zip(slots)
                        .map(|(p, slot)| {
                            let e = match slot {
                                Ok(i) => results[i],
                                Err(e) => e,
                            };
                            OffsetCommitResponsePartition::default()
                                .with_partition_index(p.partition_index)
                                .with_error_code(e.code())
                        })
                        .collect(),
                )
        })
        .collect();
    respond(req, &OffsetCommitResponse::default().with_topics(topics))
}
