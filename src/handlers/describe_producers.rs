//! DescribeProducers (API 61, v0): the producers each partition's leader
//! knows (id, epoch, last sequence and timestamp, coordinator epoch, the
//! first offset of an open transaction), as `kafka-transactions.sh
//! describe-producers` and its `abort` read them.

use std::rc::Rc;

use kafka_protocol::messages::describe_producers_response::{
    PartitionResponse, ProducerState, TopicResponse,
};
use kafka_protocol::messages::{DescribeProducersRequest, DescribeProducersResponse, ProducerId};

use super::{respond, HandlerResult};
use crate::handlers::KafkaApis;
use crate::protocol::errors::ErrorCode;
use crate::protocol::{decode_body, errors, Request};
use crate::replica::ActiveProducer;
use crate::router::{ShardGroups, ShardRequest, ShardResponse};

fn partition_response(
    partition: i32,
    r: Result<Vec<ActiveProducer>, ErrorCode>,
) -> PartitionResponse {
    let out = PartitionResponse::default().with_partition_index(partition);
    match r {
        Err(e) => out.with_error_code(e.code()),
        Ok(producers) => out.with_active_producers(
            producers
                .into_iter()
                .map(|p| {
                    ProducerState::default()
                        .with_producer_id(ProducerId(p.producer_id))
                        .with_producer_epoch(i32::from(p.producer_epoch))
                        .with_last_sequence(p.last_sequence)
                        .with_last_timestamp(p.last_timestamp_ms)
                        .with_coordinator_epoch(p.coordinator_epoch)
                        .with_current_txn_start_offset(p.current_txn_start_offset)
                })
                .collect(),
        ),
    }
}

pub async fn handle(ctx: &Rc<KafkaApis>, req: &Request) -> HandlerResult {
    let r: DescribeProducersRequest = decode_body(req)?;
    let mut wanted = Vec::new();
    let mut groups = ShardGroups::new(ctx.nr_shards);
    for t in &r.topics {
        for &p in &t.partition_indexes {
            let topic = t.name.0.to_string();
            groups.push(ctx.owner_of(&topic, p), wanted.len(), (topic.clone(), p));
            wanted.push((topic, p));
        }
    }
    let mut results: Vec<Option<Result<Vec<ActiveProducer>, ErrorCode>>> = vec![None; wanted.len()];
    groups
        .run(
            &ctx.router,
            &mut results,
            |parts| ShardRequest::DescribeProducers { parts },
            |reply| match reply {
                ShardResponse::Producers(r) => Some(r),
                _ => None,
            },
            || Err(errors::NOT_LEADER_OR_FOLLOWER),
        )
        .await;
    let mut results = results.into_iter();
    let topics = r
        .topics
        .iter()
        .map(|t| {
            let partitions = t
                .partition_indexes
                .iter()
                .map(|&p| {
                    let found = results
                        .next()
                        .flatten()
                        .unwrap_or(Err(errors::UNKNOWN_SERVER_ERROR));
                    partition_response(p, found)
                })
                .collect();
            TopicResponse::default()
                .with_name(t.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    respond(
        req,
        &DescribeProducersResponse::default().with_topics(topics),
    )
}
