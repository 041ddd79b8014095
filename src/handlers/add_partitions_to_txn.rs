//! AddPartitionsToTxn (API 24, v0-5), run by the transaction coordinator.
//! v0-3 are the producer's: one transaction, its partitions added (Kafka's
//! handleAddPartitionToTxnRequest: if any partition is unknown, it gets
//! UNKNOWN_TOPIC_OR_PARTITION, the rest OPERATION_NOT_ATTEMPTED, and
//! nothing is added). v4+ are the brokers' (KIP-890): several
//! transactions, each checked (`verify_only`, part 1) or added for a
//! Produce or TxnOffsetCommit of transaction version 2 (part 2).

use std::collections::BTreeSet;
use std::rc::Rc;

use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::{AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::{respond, txn_coordinator, HandlerResult};
use crate::coordinator::transaction::transaction_metadata::{
    TopicPartition, TRANSACTION_VERSION_2,
};
use crate::coordinator::transaction::TRANSACTION_STATE_TOPIC;
use crate::coordinator::OFFSETS_TOPIC;
use crate::handlers::KafkaApis;
use crate::protocol::errors::ErrorCode;
use crate::protocol::{decode_body, errors, Request};
use crate::security::authorizer::{AclOperation, ResourceType};

/// From v4 the request batches transactions (brokers only).
const BATCHED_VERSION: i16 = 4;
/// Before v2, PRODUCER_FENCED is sent as INVALID_PRODUCER_EPOCH.
const PRODUCER_FENCED_VERSION: i16 = 2;

fn partitions_of(topics: &[AddPartitionsToTxnTopic]) -> Vec<TopicPartition> {
    topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|&p| TopicPartition {
                topic: t.name.0.to_string(),
                partition: p,
            })
        })
        .collect()
}

fn topic_results(results: &[(TopicPartition, ErrorCode)]) -> Vec<AddPartitionsToTxnTopicResult> {
    let mut out: Vec<AddPartitionsToTxnTopicResult> = Vec::new();
    for (tp, e) in results {
        let r = AddPartitionsToTxnPartitionResult::default()
            .with_partition_index(tp.partition)
            .with_partition_error_code(e.code());
        match out.iter_mut().find(|t| t.name.0.as_str() == tp.topic) {
            Some(t) => t.results_by_partition.push(r),
            None => out.push(
                AddPartitionsToTxnTopicResult::default()
                    .with_name(TopicName(StrBytes::from_string(tp.topic.clone())))
                    .with_results_by_partition(vec![r]),
            ),
        }
    }
    out
}

/// Adds (or verifies) one transaction's partitions; an error per partition.
async fn add_or_verify(
    ctx: &Rc<KafkaApis>,
    transactional_id: &str,
    producer_id: i64,
    producer_epoch: i16,
    partitions: Vec<TopicPartition>,
    verify_only: bool,
    client_transaction_version: i16,
) -> Result<Vec<(TopicPartition, ErrorCode)>, String> {
    let coordinator = txn_coordinator(ctx)?;
    if verify_only {
        let codes = coordinator.verify_partitions(
            transactional_id,
            producer_id,
            producer_epoch,
            &partitions,
        );
        return Ok(partitions.into_iter().zip(codes).collect());
    }
    let image = ctx.metadata.image();
    let exists = |tp: &TopicPartition| {
        image
            .topic(&tp.topic)
            .is_some_and(|t| t.partitions.iter().any(|p| p.partition == tp.partition))
    };
    if !partitions.iter().all(exists) {
        return Ok(partitions
            .into_iter()
            .map(|tp| {
                let e = if exists(&tp) {
                    errors::OPERATION_NOT_ATTEMPTED
                } else {
                    errors::UNKNOWN_TOPIC_OR_PARTITION
                };
                (tp, e)
            })
            .collect());
    }
    let set: BTreeSet<TopicPartition> = partitions.iter().cloned().collect();
    let e = coordinator
        .handle_add_partitions(
            transactional_id,
            producer_id,
            producer_epoch,
            set,
            client_transaction_version,
        )
        .await;
    Ok(partitions.into_iter().map(|tp| (tp, e)).collect())
}

/// A client's request (v0-3) refused by KafkaApis' checks: without WRITE
/// on the transactional id every partition fails; otherwise partitions of
/// topics without WRITE (internal topics always) fail, unknown ones too,
/// and the rest are not attempted. None: nothing refused.
fn client_refusal(
    ctx: &KafkaApis,
    req: &Request,
    r: &AddPartitionsToTxnRequest,
) -> Option<Vec<(TopicPartition, ErrorCode)>> {
    ctx.authorizer.as_ref()?;
    let partitions = partitions_of(&r.v3_and_below_topics);
    let txn_id = &r.v3_and_below_transactional_id.0;
    if !ctx.authorize(
        req,
        AclOperation::Write,
        ResourceType::TransactionalId,
        txn_id,
    ) {
        let e = errors::TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
        return Some(partitions.into_iter().map(|tp| (tp, e)).collect());
    }
    let refused: Vec<&str> = r
        .v3_and_below_topics
        .iter()
        .map(|t| t.name.0.as_str())
        .filter(|t| {
            *t == OFFSETS_TOPIC
                || *t == TRANSACTION_STATE_TOPIC
                || !ctx.authorize(req, AclOperation::Write, ResourceType::Topic, t)
        })
        .collect();
    if refused.is_empty() {
        return None;
    }
    let image = ctx.metadata.image();
    let results = partitions
        .into_iter()
        .map(|tp| {
            let exists = image
                .topic(&tp.topic)
                .is_some_and(|t| t.partitions.iter().any(|p| p.partition == tp.partition));
            let e = if refused.contains(&tp.topic.as_str()) {
                errors::TOPIC_AUTHORIZATION_FAILED
            } else if !exists {
                errors::UNKNOWN_TOPIC_OR_PARTITION
            } else {
                errors::OPERATION_NOT_ATTEMPTED
            };
            (tp, e)
        })
        .collect();
    Some(results)
}

pub async fn handle(ctx: &Rc<KafkaApis>, req: &Request) -> HandlerResult {
    let r: AddPartitionsToTxnRequest = decode_body(req)?;
    if req.api_version < BATCHED_VERSION {
        if let Some(results) = client_refusal(ctx, req, &r) {
            let body = AddPartitionsToTxnResponse::default()
                .with_results_by_topic_v3_and_below(topic_results(&results));
            return respond(req, &body);
        }
        let mut results = add_or_verify(
            ctx,
            &r.v3_and_below_transactional_id.0,
            r.v3_and_below_producer_id.0,
            r.v3_and_below_producer_epoch,
            partitions_of(&r.v3_and_below_topics),
            false,
            0,
        )
        .await?;
        if req.api_version < PRODUCER_FENCED_VERSION {
            for (_, e) in results.iter_mut() {
                if *e == errors::PRODUCER_FENCED {
                    *e = errors::INVALID_PRODUCER_EPOCH;
                }
            }
        }
        let body = AddPartitionsToTxnResponse::default()
            .with_results_by_topic_v3_and_below(topic_results(&results));
        return respond(req, &body);
    }
    // Batches come from brokers verifying their produce requests.
    if !ctx.authorize_cluster(req, AclOperation::ClusterAction) {
        let body = AddPartitionsToTxnResponse::default()
            .with_error_code(errors::CLUSTER_AUTHORIZATION_FAILED.code());
        return respond(req, &body);
    }
    let mut by_transaction = Vec::with_capacity(r.transactions.len());
    for t in &r.transactions {
        let results = add_or_verify(
            ctx,
            &t.transactional_id.0,
            t.producer_id.0,
            t.producer_epoch,
            partitions_of(&t.topics),
            t.verify_only,
            TRANSACTION_VERSION_2,
        )
        .await?;
        by_transaction.push(
            AddPartitionsToTxnResult::default()
                .with_transactional_id(t.transactional_id.clone())
                .with_topic_results(topic_results(&results)),
        );
    }
    let body = AddPartitionsToTxnResponse::default()
        .with_error_code(errors::NONE.code())
        .with_results_by_transaction(by_transaction);
    respond(req, &body)
}
