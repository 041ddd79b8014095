//! Partition verification before transactional appends (KIP-890 part 1,
//! `transaction.partition.verification.enable`, on by default as in Kafka
//! 3.9), for Produce. Each leader hands a guard to a transactional producer
//! about to start a transaction on a partition; the producer's transaction
//! coordinator is asked whether those partitions are in its ongoing
//! transaction (AddPartitionsToTxn v4 verify_only, through the controller
//! shard when this broker coordinates the id, over the network otherwise);
//! the append then needs the guard still current. So a late, retried batch
//! of a transaction that ended cannot open one the coordinator never saw
//! (a "hanging" transaction that would hold the LSO forever).
//!
//! Under transaction version 2 (Produce v12, KIP-890 part 2) the client no
//! longer sends AddPartitionsToTxn: the leader asks the coordinator to add
//! the partitions (verify_only false, whatever the verification setting),
//! retrying briefly while the previous transaction's markers are being
//! written (CONCURRENT_TRANSACTIONS), as Kafka's AddPartitionsToTxnManager.
//! The coordinator checks CLUSTER_ACTION of the asking broker; the local
//! path asks no one.

use std::rc::Rc;

use kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, ApiKey, ProducerId, TopicName,
    TransactionalId,
};
use kafka_protocol::protocol::{Decodable, StrBytes};

use kshard_shards::log::batch::BatchIter;

use crate::controller::broker_client::{round_trip, BrokerAddress};
use crate::coordinator::partition_for;
use crate::coordinator::transaction::transaction_coordinator::ProducerIdAndEpoch;
use crate::coordinator::transaction::TRANSACTION_STATE_TOPIC;
use crate::handlers::KafkaApis;
use crate::protocol::errors;
use crate::protocol::errors::ErrorCode;
use crate::replica::{ProducePart, ProducePartResult, TxnVerification, TxnVerifyPart};
use crate::router::{ShardGroups, ShardRequest, ShardResponse, CONTROLLER_SHARD};

/// The version brokers send (KIP-890).
const VERIFY_VERSION: i16 = 4;
/// Produce v12 is transaction version 2: its partitions are added.
pub const PRODUCE_ADDS_PARTITIONS_VERSION: i16 = 12;
/// Kafka's `add.partitions.to.txn.retry.backoff.ms` and its bound.
const ADD_RETRY_BACKOFF_MS: u64 = 20;
const ADD_RETRY_MAX_MS: u64 = 100;

/// Kafka's mapping of a verification failure for the producer: errors an
/// older client would not retry become NOT_ENOUGH_REPLICAS, which it
/// retries without refreshing metadata; a version-2 client retries
/// CONCURRENT_TRANSACTIONS itself. The coordinator's fencing is the
/// epoch error a Produce carries.
fn produce_error(code: ErrorCode, adds: bool) -> ErrorCode {
    match code {
        errors::CONCURRENT_TRANSACTIONS if adds => code,
        errors::CONCURRENT_TRANSACTIONS
        | errors::COORDINATOR_LOAD_IN_PROGRESS
        | errors::COORDINATOR_NOT_AVAILABLE
        | errors::NOT_COORDINATOR
        | errors::REQUEST_TIMED_OUT => errors::NOT_ENOUGH_REPLICAS,
        errors::PRODUCER_FENCED => errors::INVALID_PRODUCER_EPOCH,
        other => other,
    }
}

/// Whether a transactional Produce of `version` goes through the
/// coordinator before its append.
pub fn produce_needs_coordinator(ctx: &KafkaApis, version: i16) -> bool {
    ctx.config.transaction_partition_verification_enable
        || version >= PRODUCE_ADDS_PARTITIONS_VERSION
}

/// Verifies the transactional parts of a Produce request: each such part
/// leaves with `TxnVerification::Checked`, or is dropped with its error in
/// `results`.
pub async fn verify_transactional_parts(
    ctx: &Rc<KafkaApis>,
    transactional_id: &str,
    produce_version: i16,
    results: &mut [Option<ProducePartResult>],
    groups: &mut ShardGroups<ProducePart>,
) {
    let adds = produce_version >= PRODUCE_ADDS_PARTITIONS_VERSION;
    let mut wanted = ShardGroups::new(ctx.nr_shards);
    let mut producer = None;
    groups.retain_mut(|shard, idx, part| {
        let first = BatchIter::new(&part.records)
            .flatten()
            .next()
            .map(|(_, h, _)| h);
        if let Some(h) = first.filter(|h| h.is_transactional() && h.has_producer_id()) {
            producer.get_or_insert((h.producer_id, h.producer_epoch));
            let p = TxnVerifyPart {
                topic: part.topic.clone(),
                partition: part.partition,
                producer_id: h.producer_id,
                producer_epoch: h.producer_epoch,
                supports_epoch_bump: adds,
            };
            wanted.push(shard, idx, p);
        }
        true
    });
    let Some((producer_id, producer_epoch)) = producer else {
        return;
    };
    let mut guards: Vec<Option<Result<Option<u64>, ErrorCode>>> = vec![None; results.len()];
    wanted
        .run(
            &ctx.router,
            &mut guards,
            |parts| ShardRequest::PrepareTxnVerification { parts },
            |reply| match reply {
                ShardResponse::VerificationGuards(g) => Some(g),
                _ => None,
            },
            || Err(errors::NOT_LEADER_OR_FOLLOWER),
        )
        .await;
    // The parts that start a transaction here: asked of the coordinator.
    let mut asked: Vec<(usize, (String, i32))> = Vec::new();
    groups.retain_mut(|_, idx, part| {
        if let Some(Ok(Some(_))) = guards[idx] {
            asked.push((idx, (part.topic.clone(), part.partition)));
        }
        true
    });
    let parts: Vec<(String, i32)> = asked.iter().map(|(_, p)| p.clone()).collect();
    let codes = if parts.is_empty() {
        Vec::new()
    } else {
        let producer = ProducerIdAndEpoch {
            producer_id,
            epoch: producer_epoch,
        };
        if adds {
            add_with_retries(ctx, transactional_id, producer, parts).await
        } else {
            ask_coordinator(ctx, transactional_id, producer, parts, false).await
        }
    };
    let mut verdicts: Vec<ErrorCode> = vec![errors::NONE; results.len()];
    for ((idx, _), code) in asked.iter().zip(codes) {
        verdicts[*idx] = code;
    }
    groups.retain_mut(|_, idx, part| match guards[idx] {
        None => true,
        Some(Err(code)) => {
            results[idx] = Some(ProducePartResult::failed(code));
            false
        }
        Some(Ok(guard)) if verdicts[idx].is_none() => {
            part.txn_verification = TxnVerification::Checked { guard };
            true
        }
        Some(Ok(_)) => {
            results[idx] = Some(ProducePartResult::failed(produce_error(
                verdicts[idx],
                adds,
            )));
            false
        }
    });
}

/// Adds the parts to the transaction, asking again every 20 ms for up to
/// 100 ms while the coordinator answers CONCURRENT_TRANSACTIONS (the
/// previous transaction's markers are being written).
async fn add_with_retries(
    ctx: &Rc<KafkaApis>,
    transactional_id: &str,
    producer: ProducerIdAndEpoch,
    parts: Vec<(String, i32)>,
) -> Vec<ErrorCode> {
    let max_ms = ADD_RETRY_MAX_MS.min(ctx.config.request_timeout_ms.max(0) as u64);
    let start = std::time::Instant::now();
    loop {
        let codes = ask_coordinator(ctx, transactional_id, producer, parts.clone(), true).await;
        let concurrent = codes.contains(&errors::CONCURRENT_TRANSACTIONS);
        if !concurrent || start.elapsed().as_millis() as u64 + ADD_RETRY_BACKOFF_MS > max_ms {
            return codes;
        }
        glommio::timer::sleep(std::time::Duration::from_millis(ADD_RETRY_BACKOFF_MS)).await;
    }
}

/// AddPartitionsToTxn to the id's coordinator, verify_only unless `add`:
/// an error per part.
pub async fn ask_coordinator(
    ctx: &Rc<KafkaApis>,
    transactional_id: &str,
    producer: ProducerIdAndEpoch,
    parts: Vec<(String, i32)>,
    add: bool,
) -> Vec<ErrorCode> {
    let ProducerIdAndEpoch {
        producer_id,
        epoch: producer_epoch,
    } = producer;
    let image = ctx.metadata.image();
    let leader = image.topic(TRANSACTION_STATE_TOPIC).and_then(|t| {
        let p = partition_for(transactional_id, t.partitions.len().max(1) as i32);
        t.partitions
            .iter()
            .find(|q| q.partition == p)
            .map(|q| q.leader)
    });
    let n = parts.len();
    match leader {
        Some(l) if l == ctx.broker_id() => {
            let req = ShardRequest::VerifyTxnPartitions {
                transactional_id: transactional_id.to_string(),
                producer_id,
                producer_epoch,
                parts,
                add,
            };
            match ctx.router.run_on(CONTROLLER_SHARD, req).await {
                Ok(ShardResponse::PartitionErrors(codes)) if codes.len() == n => codes,
                _ => vec![errors::COORDINATOR_NOT_AVAILABLE; n],
            }
        }
        Some(l) if l >= 0 => match image.brokers.iter().find(|b| b.id == l) {
            Some(b) => {
                let request = add_partitions_request(
                    transactional_id,
                    producer_id,
                    producer_epoch,
                    &parts,
                    add,
                );
                let timeout_ms = ctx.config.request_timeout_ms.max(1) as u64;
                let security = ctx.replica_manager.inter_broker_security();
                let to = BrokerAddress {
                    host: &b.host,
                    port: b.port,
                    security: &security,
                };
                let answer = round_trip(
                    to,
                    ApiKey::AddPartitionsToTxn,
                    VERIFY_VERSION,
                    &request,
                    "kshard-txn-verification",
                    timeout_ms,
                )
                .await
                .and_then(|mut body| {
                    AddPartitionsToTxnResponse::decode(&mut body, VERIFY_VERSION)
                        .map_err(|e| e.to_string())
                });
                match answer {
                    Ok(r) => codes_of(&r, &parts),
                    Err(e) => {
                        log::debug!("verifying {transactional_id} with broker {l}: {e}");
                        vec![errors::COORDINATOR_NOT_AVAILABLE; n]
                    }
                }
            }
            None => vec![errors::COORDINATOR_NOT_AVAILABLE; n],
        },
        _ => vec![errors::COORDINATOR_NOT_AVAILABLE; n],
    }
}

/// AddPartitionsToTxnManager: a coordinator that refused this broker's
/// CLUSTER_ACTION must not show the producer an authorization error, so
/// the verification is reported as not done (INVALID_TXN_STATE).
fn whole_request_error(code: ErrorCode) -> ErrorCode {
    log::error!("AddPartitionsToTxn verification returned with error {code}");
    match code {
        errors::CLUSTER_AUTHORIZATION_FAILED => errors::INVALID_TXN_STATE,
        other => other,
    }
}

fn add_partitions_request(
    transactional_id: &str,
    producer_id: i64,
    producer_epoch: i16,
    parts: &[(String, i32)],
    add: bool,
) -> AddPartitionsToTxnRequest {
    let mut topics: Vec<AddPartitionsToTxnTopic> = Vec::new();
    for (topic, partition) in parts {
        match topics.iter_mut().find(|t| t.name.0.as_str() == topic) {
            Some(t) => t.partitions.push(*partition),
            None => topics.push(
                AddPartitionsToTxnTopic::default()
                    .with_name(TopicName(StrBytes::from_string(topic.clone())))
                    .with_partitions(vec![*partition]),
            ),
        }
    }
    AddPartitionsToTxnRequest::default().with_transactions(vec![
        AddPartitionsToTxnTransaction::default()
            .with_transactional_id(TransactionalId(StrBytes::from_string(
                transactional_id.to_string(),
            )))
            .with_producer_id(ProducerId(producer_id))
            .with_producer_epoch(producer_epoch)
            .with_verify_only(!add)
            .with_topics(topics),
    ])
}

/// Each part's error in the answer (the request's own error if it failed
/// whole; COORDINATOR_NOT_AVAILABLE for a part the answer leaves out).
fn codes_of(r: &AddPartitionsToTxnResponse, parts: &[(String, i32)]) -> Vec<ErrorCode> {
    if r.error_code != 0 {
        return vec![whole_request_error(ErrorCode::from_wire(r.error_code)); parts.len()];
    }
    parts
        .iter()
        .map(|(topic, partition)| {
            r.results_by_transaction
                .iter()
                .flat_map(|t| t.topic_results.iter())
                .filter(|t| t.name.0.as_str() == topic)
                .flat_map(|t| t.results_by_partition.iter())
                .find(|p| p.partition_index == *partition)
                .map_or(errors::COORDINATOR_NOT_AVAILABLE, |p| {
                    ErrorCode::from_wire(p.partition_error_code)
                })
        })
        .collect()
}
