//! Produce (API 0): splits the request by owning shard, appends on each owner
//! in request order, and merges the answers back into request order.

use std::rc::Rc;

use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, PartitionProduceResponse, TopicProduceResponse,
};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse};
use kafka_protocol::protocol::StrBytes;

use super::{legacy_format, respond, HandlerResult};
use crate::coordinator::OFFSETS_TOPIC;
use crate::handlers::KafkaApis;
use crate::protocol::{decode_body, errors, Request};
use crate::replica::{ProducePart, ProducePartResult};
use crate::router::ShardGroups;
use crate::router::{ShardRequest, ShardResponse};

/// Kafka's `RequestUtils.hasTransactionalRecords`: the first batch of any
/// partition is a magic-2 batch with the transactional attribute.
fn has_transactional_records(request: &ProduceRequest) -> bool {
    // baseOffset(8) length(4) leaderEpoch(4) magic(1) crc(4) attributes(2)
    const MAGIC_AT: usize = 16;
    const ATTRIBUTES_AT: usize = 21;
    const TRANSACTIONAL_FLAG: u16 = 0x10;
    request
        .topic_data
        .iter()
        .flat_map(|t| t.partition_data.iter())
        .filter_map(|p| p.records.as_ref())
        .any(|records| {
            records.len() >= ATTRIBUTES_AT + 2
                && records[MAGIC_AT] == 2
                && u16::from_be_bytes([records[ATTRIBUTES_AT], records[ATTRIBUTES_AT + 1]])
                    & TRANSACTIONAL_FLAG
                    != 0
        })
}

fn record_errors(errors: Vec<(i32, String)>) -> Vec<BatchIndexAndErrorMessage> {
    errors
        .into_iter()
        .map(|(index, message)| {
            BatchIndexAndErrorMessage::default()
                .with_batch_index(index)
                .with_batch_index_error_message(Some(StrBytes::from_string(message)))
        })
        .collect()
}

pub async fn handle(ctx: &Rc<KafkaApis>, req: &Request) -> HandlerResult {
    let request: ProduceRequest = decode_body(req)?;
    let acks = request.acks;
    let timeout_ms = request.timeout_ms.max(0) as u64;
    let image = ctx.metadata.image();
    // Results in request order, filled as shards answer.
    let mut results: Vec<Option<ProducePartResult>> = Vec::new();
    let mut by_shard = ShardGroups::new(ctx.nr_shards);
    let valid_acks = matches!(acks, -1..=1);
    if request.transactional_id.is_some() {
        return Err("transactional produce without a transaction coordinator".into());
    }
    // Kafka's KafkaApis: transactional records need an (authorized)
    // transactional id, else every partition fails and nothing is stored.
    let refuse_all = has_transactional_records(&request);
    for topic in &request.topic_data {
        let name = topic.name.0.as_str();
        let info = image.topic(name);
        for p in &topic.partition_data {
            let idx = results.len();
            results.push(None);
            if refuse_all {
                results[idx] = Some(ProducePartResult {
                    error_message: Some("Transactional Id authorization failed.".into()),
                    ..ProducePartResult::failed(errors::TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
                });
                continue;
            }
            if !valid_acks {
                results[idx] = Some(ProducePartResult::failed(errors::INVALID_REQUIRED_ACKS));
                continue;
            }
            let exists =
                info.is_some_and(|t| p.index >= 0 && (p.index as usize) < t.partitions.len());
            if !exists {
                results[idx] = Some(ProducePartResult::failed(
                    errors::UNKNOWN_TOPIC_OR_PARTITION,
                ));
                continue;
            }
            // Kafka: "Cannot append to internal topic"; only the group
            // coordinator writes `__consumer_offsets`.
            if name == OFFSETS_TOPIC {
                results[idx] = Some(ProducePartResult::failed(errors::INVALID_TOPIC_EXCEPTION));
                continue;
            }
            let Some(records) = &p.records else {
                results[idx] = Some(ProducePartResult::failed(errors::CORRUPT_MESSAGE));
                continue;
            };
            // Produce v0-v2 may carry magic 0/1 message sets, v3+ not.
            let records = match info {
                Some(info) if req.api_version <= 2 => {
                    match legacy_format::produce_records(info, p.index, records) {
                        Ok(Some(records)) => records,
                        Ok(None) => {
                            results[idx] = Some(ProducePartResult::nothing_appended());
                            continue;
                        }
                        Err(code) => {
                            results[idx] = Some(ProducePartResult::failed(code));
                            continue;
                        }
                    }
                }
                _ => match legacy_format::records_error_v3(records) {
                    Some(code) => {
                        results[idx] = Some(ProducePartResult::failed(code));
                        continue;
                    }
                    None => records.clone(),
                },
            };
            let owner = ctx.owner_of(name, p.index);
            by_shard.push(
                owner,
                idx,
                ProducePart {
                    topic: name.to_string(),
                    partition: p.index,
                    records,
                },
            );
        }
    }
    by_shard
        .run(
            &ctx.router,
            &mut results,
            |parts| ShardRequest::Produce {
                parts,
                acks,
                timeout_ms,
            },
            |r| match r {
                ShardResponse::Produce(r) => Some(r),
                _ => None,
            },
            || ProducePartResult::failed(errors::NOT_LEADER_OR_FOLLOWER),
        )
        .await;
    if acks == 0 {
        // Kafka closes the connection so an acks=0 producer notices failures.
        if results
            .iter()
            .flatten()
            .any(|r| r.error_code != errors::NONE)
        {
            return Err("acks=0 produce failed".into());
        }
        return Ok(None);
    }
    let v = req.api_version;
    let mut it = results.into_iter();
    let responses = request
        .topic_data
        .iter()
        .map(|topic| {
            let partition_responses = topic
                .partition_data
                .iter()
                .map(|p| {
                    let r = it.next().flatten().expect("every partition answered");
                    PartitionProduceResponse::default()
                        .with_index(p.index)
                        .with_error_code(r.error_code)
                        .with_base_offset(r.base_offset)
                        .with_log_append_time_ms(r.log_append_time_ms)
                        .with_log_start_offset(if v >= 5 { r.log_start_offset } else { -1 })
                        .with_record_errors(if v >= 8 {
                            record_errors(r.record_errors)
                        } else {
                            Vec::new()
                        })
                        .with_error_message(if v >= 8 {
                            r.error_message.map(StrBytes::from_string)
                        } else {
                            None
                        })
                })
                .collect();
            TopicProduceResponse::default()
                .with_name(topic.name.clone())
                .with_partition_responses(partition_responses)
        })
        .collect();
    respond(req, &ProduceResponse::default().with_responses(responses))
}
