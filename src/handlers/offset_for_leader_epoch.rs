//! OffsetForLeaderEpoch (API 23, v2-4): the end offset of a leader epoch,
//! looked up in each partition's leader-epoch cache on its owning shard.
//! Clients use it to validate their position after a leader change.
//! Followers have CLUSTER_ACTION on the cluster; clients need DESCRIBE on
//! each topic (KIP-320).

use std::collections::HashSet;
use std::rc::Rc;

use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::{OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse};

use super::auth_helper::passes;
use super::{respond, HandlerResult};
use crate::handlers::KafkaApis;
use crate::protocol::{decode_body, errors, Request};
use crate::replica::EpochQuery;
use crate::router::ShardGroups;
use crate::router::{ShardRequest, ShardResponse};
use crate::security::authorizer::{AclOperation, AuditLog, ResourceType, CLUSTER_NAME};

/// Failures carry Kafka's UNDEFINED_EPOCH and UNDEFINED_EPOCH_OFFSET (-1).
type PartResult = crate::replica::EpochEndOffset;

pub async fn handle(ctx: &Rc<KafkaApis>, req: &Request) -> HandlerResult {
    let request: OffsetForLeaderEpochRequest = decode_body(req)?;
    let image = ctx.metadata.image();
    let authorized = authorized_topics(ctx, req, &request);
    let mut results: Vec<Option<PartResult>> = Vec::new();
    let mut by_shard = ShardGroups::new(ctx.nr_shards);
    for t in &request.topics {
        let name = t.topic.0.as_str();
        let allowed = passes(&authorized, name);
        let count = image.topic(name).map_or(0, |i| i.partitions.len());
        for p in &t.partitions {
            let idx = results.len();
            results.push(None);
            if !allowed {
                results[idx] = Some(PartResult::failed(errors::TOPIC_AUTHORIZATION_FAILED));
                continue;
            }
            if p.partition < 0 || p.partition as usize >= count {
                results[idx] = Some(PartResult::failed(errors::UNKNOWN_TOPIC_OR_PARTITION));
                continue;
            }
            let owner = ctx.owner_of(name, p.partition);
            by_shard.push(
                owner,
                idx,
                EpochQuery {
                    topic: name.to_string(),
                    partition: p.partition,
                    current_leader_epoch: p.current_leader_epoch,
                    leader_epoch: p.leader_epoch,
                },
            );
        }
    }
    by_shard
        .run(
            &ctx.router,
            &mut results,
            |parts| ShardRequest::OffsetForLeaderEpoch { parts },
            |r| match r {
                ShardResponse::OffsetForLeaderEpoch(r) => Some(r),
                _ => None,
            },
            || PartResult::failed(errors::NOT_LEADER_OR_FOLLOWER),
        )
        .await;
    let mut response = epoch_end_offsets_response(&request, results);
    if authorized.is_some() {
        // Kafka answers the unauthorized topics after the others.
        let (mut topics, denied): (Vec<_>, Vec<_>) = std::mem::take(&mut response.topics)
            .into_iter()
            .partition(|t| passes(&authorized, t.topic.0.as_str()));
        topics.extend(denied);
        response.topics = topics;
    }
    respond(req, &response)
}

/// CLUSTER_ACTION on the cluster (a follower; its denial not logged) lets
/// every topic through (None, as without an authorizer); else the topics
/// the principal may DESCRIBE.
fn authorized_topics<'a>(
    ctx: &KafkaApis,
    req: &Request,
    request: &'a OffsetForLeaderEpochRequest,
) -> Option<HashSet<&'a str>> {
    let follower = ctx.authorize_logged(
        req,
        AclOperation::ClusterAction,
        ResourceType::Cluster,
        CLUSTER_NAME,
        AuditLog::ALLOWED_ONLY,
    );
    if follower {
        return None;
    }
    ctx.filter_authorized(
        req,
        AclOperation::Describe,
        ResourceType::Topic,
        request.topics.iter().map(|t| t.topic.0.as_str()),
        AuditLog::BOTH,
    )
}

/// The results, one per partition in request order, back in the request's shape.
fn epoch_end_offsets_response(
    request: &OffsetForLeaderEpochRequest,
    results: Vec<Option<PartResult>>,
) -> OffsetForLeaderEpochResponse {
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
                    EpochEndOffset::default()
                        .with_partition(p.partition)
                        .with_error_code(r.error_code.code())
                        .with_leader_epoch(r.leader_epoch)
                        .with_end_offset(r.end_offset)
                })
                .collect();
            OffsetForLeaderTopicResult::default()
                .with_topic(t.topic.clone())
                .with_partitions(partitions)
        })
        .collect();
    OffsetForLeaderEpochResponse::default().with_topics(topics)
}
