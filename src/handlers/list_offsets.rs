//! ListOffsets (API 2): earliest, latest, max timestamp and by-timestamp
//! lookups, run on each partition's owning shard. Version 0 answers with a
//! list of segment offsets instead (Kafka's `handleListOffsetRequestV0`).

use std::collections::HashSet;
use std::rc::Rc;

use kafka_protocol::messages::list_offsets_request::ListOffsetsPartition;
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};

use super::{respond, HandlerResult};
use crate::handlers::KafkaApis;
use crate::protocol::errors::ErrorCode;
use crate::protocol::legacy::{
    ListOffsetsV0PartitionResponse, ListOffsetsV0Request, ListOffsetsV0Response,
    ListOffsetsV0TopicResponse,
};
use crate::protocol::{decode_body, errors, Request};
use crate::replica::{
    LegacyListOffsetsPart, ListOffsetsPart, ListOffsetsPartResult, EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_TIMESTAMP, LATEST_TIERED_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP,
};
use crate::router::ShardGroups;
use crate::router::{ShardRequest, ShardResponse};
use crate::security::authorizer::{AclOperation, ResourceType};

/// The first version that may ask for each special (negative) timestamp.
fn timestamp_min_version(timestamp: i64) -> Option<i16> {
    match timestamp {
        EARLIEST_TIMESTAMP | LATEST_TIMESTAMP => Some(1),
        MAX_TIMESTAMP => Some(7),
        EARLIEST_LOCAL_TIMESTAMP => Some(8),
        LATEST_TIERED_TIMESTAMP => Some(9),
        _ => None,
    }
}

/// The partitions listed more than once (Kafka's `duplicatePartitions`).
fn duplicate_partitions(request: &ListOffsetsRequest) -> HashSet<(&str, i32)> {
    let mut seen = HashSet::new();
    let mut duplicates = HashSet::new();
    for t in &request.topics {
        for p in &t.partitions {
            let key = (t.name.0.as_str(), p.partition_index);
            if !seen.insert(key) {
                duplicates.insert(key);
            }
        }
    }
    duplicates
}

/// The error Kafka answers before looking at the log: a partition listed
/// twice (INVALID_REQUEST), or a special timestamp the version lacks.
fn request_error(duplicate: bool, version: i16, p: &ListOffsetsPartition) -> Option<ErrorCode> {
    if duplicate {
        return Some(errors::INVALID_REQUEST);
    }
    if p.timestamp < 0 && timestamp_min_version(p.timestamp).is_none_or(|min| version < min) {
        return Some(errors::UNSUPPORTED_VERSION);
    }
    None
}

fn failed(error_code: ErrorCode) -> ListOffsetsPartResult {
    ListOffsetsPartResult {
        error_code,
        timestamp: -1,
        offset: -1,
        leader_epoch: -1,
    }
}

pub async fn handle(ctx: &Rc<KafkaApis>, req: &Request) -> HandlerResult {
    if req.api_version == 0 {
        return handle_v0(ctx, req).await;
    }
    let request: ListOffsetsRequest = decode_body(req)?;
    let (mut results, by_shard) = group_by_shard(ctx, req, &request);
    by_shard
        .run(
            &ctx.router,
            &mut results,
            |parts| ShardRequest::ListOffsets { parts },
            |r| match r {
                ShardResponse::ListOffsets(r) => Some(r),
                _ => None,
            },
            || failed(errors::NOT_LEADER_OR_FOLLOWER),
        )
        .await;
    let response = list_offsets_response(req.api_version, &request, results);
    respond(req, &response)
}

/// One result slot per partition, in request order: the partitions Kafka
/// fails before looking at the log are answered, the others grouped by
/// their owning shard.
/// ListOffsets' isolation_level for read_committed consumers: the latest
/// offset is the last stable offset.
const READ_COMMITTED: i8 = 1;

fn group_by_shard(
    ctx: &KafkaApis,
    req: &Request,
    request: &ListOffsetsRequest,
) -> (
    Vec<Option<ListOffsetsPartResult>>,
    ShardGroups<ListOffsetsPart>,
) {
    let version = req.api_version;
    let image = ctx.metadata.image();
    let mut results: Vec<Option<ListOffsetsPartResult>> = Vec::new();
    let mut by_shard = ShardGroups::new(ctx.nr_shards);
    let duplicates = duplicate_partitions(request);
    for t in &request.topics {
        let name = t.name.0.as_str();
        let count = image.topic(name).map(|i| i.partitions.len()).unwrap_or(0);
        // DESCRIBE before anything else is looked at.
        let described = ctx.authorize(req, AclOperation::Describe, ResourceType::Topic, name);
        for p in &t.partitions {
            let idx = results.len();
            results.push(None);
            if !described {
                results[idx] = Some(failed(errors::TOPIC_AUTHORIZATION_FAILED));
                continue;
            }
            let duplicate = duplicates.contains(&(name, p.partition_index));
            let error = request_error(duplicate, version, p).or((p.partition_index < 0
                || p.partition_index as usize >= count)
                .then_some(errors::UNKNOWN_TOPIC_OR_PARTITION));
            if let Some(error_code) = error {
                results[idx] = Some(failed(error_code));
                continue;
            }
            let owner = ctx.owner_of(name, p.partition_index);
            by_shard.push(
                owner,
                idx,
                ListOffsetsPart {
                    topic: name.to_string(),
                    partition: p.partition_index,
                    timestamp: p.timestamp,
                    current_leader_epoch: p.current_leader_epoch,
                    read_committed: request.isolation_level == READ_COMMITTED,
                },
            );
        }
    }
    (results, by_shard)
}

fn list_offsets_response(
    version: i16,
    request: &ListOffsetsRequest,
    results: Vec<Option<ListOffsetsPartResult>>,
) -> ListOffsetsResponse {
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
                    ListOffsetsPartitionResponse::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(r.error_code.code())
                        .with_timestamp(r.timestamp)
                        .with_offset(r.offset)
                        .with_leader_epoch(if version >= 4 { r.leader_epoch } else { -1 })
                })
                .collect();
            ListOffsetsTopicResponse::default()
                .with_name(t.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    ListOffsetsResponse::default().with_topics(topics)
}

/// Version 0: per partition, up to `max_num_offsets` segment offsets.
async fn handle_v0(ctx: &Rc<KafkaApis>, req: &Request) -> HandlerResult {
    let request: ListOffsetsV0Request = decode_body(req)?;
    let image = ctx.metadata.image();
    let mut results: Vec<Option<Result<Vec<i64>, ErrorCode>>> = Vec::new();
    let mut by_shard = ShardGroups::new(ctx.nr_shards);
    for t in &request.topics {
        let count = image.topic(&t.name).map_or(0, |i| i.partitions.len());
        let described = ctx.authorize(req, AclOperation::Describe, ResourceType::Topic, &t.name);
        for p in &t.partitions {
            let idx = results.len();
            results.push(None);
            // v0 knows only the latest (-1) and earliest (-2) specials.
            if !described {
                results[idx] = Some(Err(errors::TOPIC_AUTHORIZATION_FAILED));
            } else if p.timestamp < EARLIEST_TIMESTAMP {
                results[idx] = Some(Err(errors::UNSUPPORTED_VERSION));
            } else if p.partition_index < 0 || p.partition_index as usize >= count {
                results[idx] = Some(Err(errors::UNKNOWN_TOPIC_OR_PARTITION));
            } else {
                let part = LegacyListOffsetsPart {
                    topic: t.name.clone(),
                    partition: p.partition_index,
                    timestamp: p.timestamp,
                    max_num_offsets: p.max_num_offsets,
                    from_consumer: request.replica_id == -1,
                };
                by_shard.push(ctx.owner_of(&t.name, p.partition_index), idx, part);
            }
        }
    }
    by_shard
        .run(
            &ctx.router,
            &mut results,
            |parts| ShardRequest::LegacyListOffsets { parts },
            |r| match r {
                ShardResponse::LegacyListOffsets(r) => Some(r),
                _ => None,
            },
            || Err(errors::NOT_LEADER_OR_FOLLOWER),
        )
        .await;
    let mut it = results.into_iter();
    let topics = request
        .topics
        .iter()
        .map(|t| ListOffsetsV0TopicResponse {
            name: t.name.clone(),
            partitions: t
                .partitions
                .iter()
                .map(|p| {
                    let r = it
                        .next()
                        .flatten()
                        .unwrap_or(Err(errors::UNKNOWN_SERVER_ERROR));
                    let (error_code, old_style_offsets) = match r {
                        Ok(offsets) => (errors::NONE, offsets),
                        Err(code) => (code, Vec::new()),
                    };
                    ListOffsetsV0PartitionResponse {
                        partition_index: p.partition_index,
                        error_code: error_code.code(),
                        old_style_offsets,
                    }
                })
                .collect(),
        })
        .collect();
    respond(req, &ListOffsetsV0Response { topics })
}
