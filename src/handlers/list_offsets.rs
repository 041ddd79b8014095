//! ListOffsets (API 2): earliest, latest, max timestamp and by-timestamp
//! lookups, run on each partition's owning shard.

use std::rc::Rc;

use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};

use super::{respond, HandlerResult};
use crate::protocol::{decode_body, errors, Request};
use crate::replica_manager::{ListOffsetsPart, ListOffsetsPartResult};
use crate::shard_context::{ShardContext, ShardRequest, ShardResponse};
use crate::shard_handler::ShardGroups;

pub async fn handle(ctx: &Rc<ShardContext>, req: &Request) -> HandlerResult {
    let request: ListOffsetsRequest = decode_body(req)?;
    let image = ctx.metadata.image();
    let mut results: Vec<Option<ListOffsetsPartResult>> = Vec::new();
    let mut by_shard = ShardGroups::new(ctx.nr_shards);
    for t in &request.topics {
        let name = t.name.0.as_str();
        let count = image.topic(name).map(|i| i.partitions.len()).unwrap_or(0);
        for p in &t.partitions {
            let idx = results.len();
            results.push(None);
            if p.partition_index < 0 || p.partition_index as usize >= count {
                results[idx] = Some(ListOffsetsPartResult {
                    error_code: errors::UNKNOWN_TOPIC_OR_PARTITION,
                    timestamp: -1,
                    offset: -1,
                    leader_epoch: -1,
                });
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
                },
            );
        }
    }
    let isolation_level = request.isolation_level;
    by_shard
        .run(
            ctx,
            &mut results,
            |parts| ShardRequest::ListOffsets {
                parts,
                isolation_level,
            },
            |r| match r {
                ShardResponse::ListOffsets(r) => Some(r),
                _ => None,
            },
            || ListOffsetsPartResult {
                error_code: errors::NOT_LEADER_OR_FOLLOWER,
                timestamp: -1,
                offset: -1,
                leader_epoch: -1,
            },
        )
        .await;
    let v = req.api_version;
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
                        .with_error_code(r.error_code)
                        .with_timestamp(r.timestamp)
                        .with_offset(r.offset)
                        .with_leader_epoch(if v >= 4 { r.leader_epoch } else { -1 })
                })
                .collect();
            ListOffsetsTopicResponse::default()
                .with_name(t.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    respond(req, &ListOffsetsResponse::default().with_topics(topics))
}
