//! DeleteRecords (API 21, v0-2): moves each partition's log start offset up
//! to the requested offset (-1: the high watermark) on the owning shard and
//! answers the new low watermark. A single broker has no followers to wait
//! for, so `timeout_ms` never expires a request. Needs DELETE on each
//! topic.

use std::collections::HashSet;
use std::rc::Rc;

use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::{DeleteRecordsRequest, DeleteRecordsResponse};

use super::auth_helper::passes;
use super::{respond, HandlerResult};
use crate::handlers::KafkaApis;
use crate::protocol::{decode_body, errors, Request};
use crate::replica::{DeleteRecordsPart, DeleteRecordsPartResult};
use crate::router::ShardGroups;
use crate::router::{ShardRequest, ShardResponse};
use crate::security::authorizer::{AclOperation, AuditLog, ResourceType};

type PartResult = DeleteRecordsPartResult;

/// The topics the principal may DELETE (None: all, no authorizer).
fn deletable_topics<'a>(
    ctx: &KafkaApis,
    req: &Request,
    request: &'a DeleteRecordsRequest,
) -> Option<HashSet<&'a str>> {
    let names = request.topics.iter().map(|t| t.name.0.as_str());
    ctx.filter_authorized(
        req,
        AclOperation::Delete,
        ResourceType::Topic,
        names,
        AuditLog::BOTH,
    )
}

pub async fn handle(ctx: &Rc<KafkaApis>, req: &Request) -> HandlerResult {
    let request: DeleteRecordsRequest = decode_body(req)?;
    let image = ctx.metadata.image();
    let authorized = deletable_topics(ctx, req, &request);
    let mut results: Vec<Option<PartResult>> = Vec::new();
    let mut by_shard = ShardGroups::new(ctx.nr_shards);
    for t in &request.topics {
        let name = t.name.0.as_str();
        let allowed = passes(&authorized, name);
        let count = image.topic(name).map_or(0, |i| i.partitions.len());
        for p in &t.partitions {
            let idx = results.len();
            results.push(None);
            // Authorization comes before existence.
            if !allowed {
                results[idx] = Some(PartResult::failed(errors::TOPIC_AUTHORIZATION_FAILED));
                continue;
            }
            if p.partition_index < 0 || p.partition_index as usize >= count {
                results[idx] = Some(PartResult::failed(errors::UNKNOWN_TOPIC_OR_PARTITION));
                continue;
            }
            let owner = ctx.owner_of(name, p.partition_index);
            by_shard.push(
                owner,
                idx,
                DeleteRecordsPart {
                    topic: name.to_string(),
                    partition: p.partition_index,
                    offset: p.offset,
                },
            );
        }
    }
    by_shard
        .run(
            &ctx.router,
            &mut results,
            |parts| ShardRequest::DeleteRecords { parts },
            |r| match r {
                ShardResponse::DeleteRecords(r) => Some(r),
                _ => None,
            },
            || PartResult::failed(errors::NOT_LEADER_OR_FOLLOWER),
        )
        .await;
    let mut it = results.into_iter();
    let topics = request
        .topics
        .iter()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let r = it.next().flatten().expect("every partition answered");
                    DeleteRecordsPartitionResult::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(r.error_code.code())
                        .with_low_watermark(r.low_watermark)
                })
                .collect();
            DeleteRecordsTopicResult::default()
                .with_name(t.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    respond(req, &DeleteRecordsResponse::default().with_topics(topics))
}
