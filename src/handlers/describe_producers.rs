//! DescribeProducers (API 61, v0): the producers each partition's leader
//! knows (id, epoch, last sequence and timestamp, coordinator epoch, the
//! first offset of an open transaction), as `kafka-transactions.sh
//! describe-producers` and its `abort` read them. Needs READ on each
//! topic.

use std::rc::Rc;

use kafka_protocol::messages::describe_producers_response::{
    PartitionResponse, ProducerState, TopicResponse,
};
use kafka_protocol::messages::{DescribeProducersRequest, DescribeProducersResponse, ProducerId};
use kafka_protocol::protocol::StrBytes;

use super::{respond, HandlerResult};
use crate::handlers::KafkaApis;
use crate::metadata::topics::validate_topic_name;
use crate::protocol::errors::ErrorCode;
use crate::protocol::{decode_body, errors, Request};
use crate::replica::ActiveProducer;
use crate::router::{ShardGroups, ShardRequest, ShardResponse};
use crate::security::authorizer::{AclOperation, ResourceType};

fn partition_response(
    partition: i32,
    r: Result<Vec<ActiveProducer>, ErrorCode>,
) -> PartitionResponse {
    let out = PartitionResponse::default().with_partition_index(partition);
    match r {
        // Kafka's `new ApiError(TOPIC_AUTHORIZATION_FAILED)`: the default message.
        Err(e) if e == errors::TOPIC_AUTHORIZATION_FAILED => out
            .with_error_code(e.code())
            .with_error_message(Some(StrBytes::from_static_str(
                "Topic authorization failed.",
            ))),
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

/// READ on the topic, asked once per topic entry; an invalid name keeps
/// its own error, found before the check.
fn may_read(ctx: &KafkaApis, req: &Request, topic: &str) -> bool {
    validate_topic_name(topic).is_err()
        || ctx.authorize(req, AclOperation::Read, ResourceType::Topic, topic)
}

pub async fn handle(ctx: &Rc<KafkaApis>, req: &Request) -> HandlerResult {
    let r: DescribeProducersRequest = decode_body(req)?;
    let mut wanted = Vec::new();
    let mut denied = Vec::new();
    let mut groups = ShardGroups::new(ctx.nr_shards);
    for t in &r.topics {
        let allowed = may_read(ctx, req, t.name.0.as_str());
        for &p in &t.partition_indexes {
            let topic = t.name.0.to_string();
            if allowed {
                groups.push(ctx.owner_of(&topic, p), wanted.len(), (topic.clone(), p));
            } else {
                denied.push(wanted.len());
            }
            wanted.push((topic, p));
        }
    }
    let mut results: Vec<Option<Result<Vec<ActiveProducer>, ErrorCode>>> = vec![None; wanted.len()];
    for idx in denied {
        results[idx] = Some(Err(errors::TOPIC_AUTHORIZATION_FAILED));
    }
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
