//! Produce (API 0): splits the request by owning shard, appends on each owner
//! in request order, and merges the answers back into request order.

use std::rc::Rc;

use bytes::Bytes;
use kafka_protocol::messages::produce_request::PartitionProduceData;
use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, PartitionProduceResponse, TopicProduceResponse,
};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse};
use kafka_protocol::protocol::StrBytes;

use super::{legacy_format, respond, HandlerResult};
use crate::coordinator::transaction::TRANSACTION_STATE_TOPIC;
use crate::coordinator::OFFSETS_TOPIC;
use crate::handlers::txn_verification::{produce_needs_coordinator, verify_transactional_parts};
use crate::handlers::KafkaApis;
use crate::metadata::metadata_cache::TopicInfo;
use crate::protocol::errors::ErrorCode;
use crate::protocol::{decode_body, errors, Request, Response};
use crate::replica::{ProducePart, ProducePartResult, TxnVerification};
use crate::router::ShardGroups;
use crate::router::{ShardRequest, ShardResponse};
use crate::security::authorizer::{AclOperation, ResourceType};

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
    let (mut results, mut by_shard) = group_by_shard(ctx, req, &request);
    if let Some(txn_id) = &request.transactional_id {
        if produce_needs_coordinator(ctx, req.api_version) {
            verify_transactional_parts(
                ctx,
                &txn_id.0,
                req.api_version,
                &mut results,
                &mut by_shard,
            )
            .await;
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
        // No answer, but a throttled producer's connection is still muted.
        let throttle_ms = record_produce_quota(ctx, req);
        return Ok((throttle_ms > 0).then(|| Response {
            chunks: Vec::new(),
            throttle_ms,
        }));
    }
    let throttle_ms = record_produce_quota(ctx, req);
    let response = produce_response(req.api_version, &request, results)
        .with_throttle_time_ms(i32::try_from(throttle_ms).unwrap_or(i32::MAX));
    let mut response = respond(req, &response)?;
    if let Some(r) = response.as_mut() {
        r.throttle_ms = throttle_ms;
    }
    Ok(response)
}

/// Kafka's produce quota: the request's size is charged to the client
/// after the append (an over-quota batch is still appended); the answer
/// carries the throttle time and the connection is muted for it.
fn record_produce_quota(ctx: &KafkaApis, req: &Request) -> u32 {
    let client_id = req.header.client_id.as_deref().unwrap_or("");
    ctx.quota_caches.record_produce(
        &ctx.quotas,
        &req.principal.name,
        client_id,
        req.size_bytes,
        crate::util::monotonic_ms(),
    )
}

/// One result slot per partition, in request order: the partitions Kafka
/// fails before appending are answered, the others grouped by their owning
/// shard.
fn group_by_shard(
    ctx: &KafkaApis,
    req: &Request,
    request: &ProduceRequest,
) -> (Vec<Option<ProducePartResult>>, ShardGroups<ProducePart>) {
    let version = req.api_version;
    let image = ctx.metadata.image();
    let mut results: Vec<Option<ProducePartResult>> = Vec::new();
    let mut by_shard = ShardGroups::new(ctx.nr_shards);
    let valid_acks = matches!(request.acks, -1..=1);
    // Kafka's KafkaApis: transactional records need an authorized
    // transactional id, else every partition fails and nothing is stored.
    let refuse_all = has_transactional_records(request)
        && !request.transactional_id.as_ref().is_some_and(|id| {
            ctx.authorize(
                req,
                AclOperation::Write,
                ResourceType::TransactionalId,
                &id.0,
            )
        });
    for topic in &request.topic_data {
        let name = topic.name.0.as_str();
        let info = image.topic(name);
        // Before existence: an unauthorized client learns nothing of it.
        let authorized =
            refuse_all || ctx.authorize(req, AclOperation::Write, ResourceType::Topic, name);
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
            if !authorized {
                results[idx] = Some(ProducePartResult::failed(
                    errors::TOPIC_AUTHORIZATION_FAILED,
                ));
                continue;
            }
            match partition_records(info.map(|i| &**i), name, p, version) {
                Ok(records) => by_shard.push(
                    ctx.owner_of(name, p.index),
                    idx,
                    ProducePart {
                        topic: name.to_string(),
                        partition: p.index,
                        records,
                        txn_verification: TxnVerification::Off,
                    },
                ),
                Err(errors::NONE) => results[idx] = Some(ProducePartResult::nothing_appended()),
                Err(code) => results[idx] = Some(ProducePartResult::failed(code)),
            }
        }
    }
    (results, by_shard)
}

/// The records to append to one partition, or the error Kafka answers
/// without appending (NONE: a legacy message set with nothing to append).
fn partition_records(
    info: Option<&TopicInfo>,
    name: &str,
    p: &PartitionProduceData,
    version: i16,
) -> Result<Bytes, ErrorCode> {
    let exists = info.is_some_and(|t| p.index >= 0 && (p.index as usize) < t.partitions.len());
    if !exists {
        return Err(errors::UNKNOWN_TOPIC_OR_PARTITION);
    }
    // Kafka: "Cannot append to internal topic"; only the coordinators
    // write `__consumer_offsets` and `__transaction_state`.
    if name == OFFSETS_TOPIC || name == TRANSACTION_STATE_TOPIC {
        return Err(errors::INVALID_TOPIC_EXCEPTION);
    }
    let Some(records) = &p.records else {
        return Err(errors::CORRUPT_MESSAGE);
    };
    // Produce v0-v2 may carry magic 0/1 message sets, v3+ not.
    match info {
        Some(info) if version <= 2 => {
            match legacy_format::produce_records(info, p.index, records) {
                Ok(Some(records)) => Ok(records),
                Ok(None) => Err(errors::NONE),
                Err(code) => Err(code),
            }
        }
        _ => match legacy_format::records_error_v3(records) {
            Some(code) => Err(code),
            None => Ok(records.clone()),
        },
    }
}

/// The results, one per partition in request order, back in the request's shape.
fn produce_response(
    v: i16,
    request: &ProduceRequest,
    results: Vec<Option<ProducePartResult>>,
) -> ProduceResponse {
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
                        .with_error_code(r.error_code.code())
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
    ProduceResponse::default().with_responses(responses)
}
