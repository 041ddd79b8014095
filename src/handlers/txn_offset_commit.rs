//! TxnOffsetCommit (API 28, v0-5), run by the group coordinator: a
//! transactional producer's offsets for a group, written in its
//! transaction and committed or dropped with it. Partitions of unknown
//! topics get UNKNOWN_TOPIC_OR_PARTITION (Kafka's KafkaApis). v5 is
//! transaction version 2: the client sent no AddOffsetsToTxn, so the
//! group's `__consumer_offsets` partition is added to the transaction
//! first; before v5 (with `transaction.partition.verification.enable`) the
//! coordinator is asked whether it is in the transaction (INVALID_TXN_STATE
//! if not, as Kafka 3.9).

use std::rc::Rc;

use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{TxnOffsetCommitRequest, TxnOffsetCommitResponse};

use super::{group_stored, respond, HandlerResult};
use crate::coordinator::offsets::CommitPart;
use crate::coordinator::transaction::transaction_coordinator::ProducerIdAndEpoch;
use crate::coordinator::txn_offsets::TxnOffsetCommit;
use crate::handlers::add_offsets_to_txn::{offsets_partition_of, txn_group_refusal};
use crate::handlers::txn_verification::ask_coordinator;
use crate::handlers::KafkaApis;
use crate::protocol::errors::ErrorCode;
use crate::protocol::{decode_body, errors, Request};
use crate::security::authorizer::{AclOperation, ResourceType};

/// Before v2, COORDINATOR_LOAD_IN_PROGRESS is sent as COORDINATOR_NOT_AVAILABLE.
const LOAD_IN_PROGRESS_VERSION: i16 = 2;
/// From v5 the offsets partition is added to the transaction here (before,
/// only verified).
const ADDS_PARTITION_VERSION: i16 = 5;

/// Checks that the group's `__consumer_offsets` partition is in the
/// producer's transaction (KIP-890 part 1, as for Produce), or under
/// transaction version 2 (`add`) adds it, as Kafka's group coordinator asks
/// its transaction coordinator, with Kafka's mapping of the errors.
async fn verify_offsets_partition(
    ctx: &Rc<KafkaApis>,
    r: &TxnOffsetCommitRequest,
    add: bool,
) -> ErrorCode {
    let tp = offsets_partition_of(ctx, &r.group_id.0);
    let producer = ProducerIdAndEpoch {
        producer_id: r.producer_id.0,
        epoch: r.producer_epoch,
    };
    let parts = vec![(tp.topic, tp.partition)];
    let codes = ask_coordinator(ctx, &r.transactional_id.0, producer, parts, add).await;
    let code = codes
        .first()
        .copied()
        .unwrap_or(errors::COORDINATOR_NOT_AVAILABLE);
    match code {
        errors::CONCURRENT_TRANSACTIONS if add => code,
        errors::CONCURRENT_TRANSACTIONS
        | errors::COORDINATOR_LOAD_IN_PROGRESS
        | errors::NOT_COORDINATOR
        | errors::NOT_ENOUGH_REPLICAS
        | errors::REQUEST_TIMED_OUT => errors::COORDINATOR_NOT_AVAILABLE,
        errors::PRODUCER_FENCED => errors::INVALID_PRODUCER_EPOCH,
        e => e,
    }
}

pub async fn handle(ctx: &Rc<KafkaApis>, req: &Request) -> HandlerResult {
    let r: TxnOffsetCommitRequest = decode_body(req)?;
    let image = ctx.metadata.image();
    let mut parts = Vec::new();
    // Per request partition: its index in `parts`, or its error.
    let mut slots: Vec<Result<usize, ErrorCode>> = Vec::new();
    // WRITE on the transactional id, READ on the group, then on each topic.
    let whole_refusal = txn_group_refusal(ctx, req, &r.transactional_id.0, &r.group_id.0);
    for t in &r.topics {
        let topic = image.topic(&t.name.0);
        let refusal = whole_refusal.or_else(|| {
            (!ctx.authorize(req, AclOperation::Read, ResourceType::Topic, &t.name.0))
                .then_some(errors::TOPIC_AUTHORIZATION_FAILED)
        });
        for p in &t.partitions {
            if let Some(e) = refusal {
                slots.push(Err(e));
                continue;
            }
            let exists = topic.is_some_and(|t| {
                t.partitions
                    .iter()
                    .any(|q| q.partition == p.partition_index)
            });
            if !exists {
                slots.push(Err(errors::UNKNOWN_TOPIC_OR_PARTITION));
                continue;
            }
            parts.push(CommitPart {
                topic: t.name.0.to_string(),
                partition: p.partition_index,
                offset: p.committed_offset,
                leader_epoch: p.committed_leader_epoch,
                metadata: p.committed_metadata.as_ref().map(|m| m.to_string()),
            });
            slots.push(Ok(parts.len() - 1));
        }
    }
    let commit = TxnOffsetCommit {
        group_id: &r.group_id.0,
        producer_id: r.producer_id.0,
        producer_epoch: r.producer_epoch,
        generation_id: r.generation_id,
        member_id: &r.member_id,
        instance_id: r.group_instance_id.as_deref(),
        parts: &parts,
    };
    let adds = req.api_version >= ADDS_PARTITION_VERSION;
    let verifies = adds || ctx.config.transaction_partition_verification_enable;
    let added = if verifies && !parts.is_empty() {
        verify_offsets_partition(ctx, &r, adds).await
    } else {
        errors::NONE
    };
    let outcome = if parts.is_empty() || !added.is_none() {
        None
    } else {
        Some(ctx.with_coordinator(|c, log, now| c.txn_commit_offsets(log, &commit, now))?)
    };
    let mut results = Vec::new();
    if let Some(outcome) = outcome {
        let e = group_stored(ctx, outcome.stored).await;
        if !e.is_none() {
            ctx.with_coordinator(|c, _, _| c.fail_txn_commit(&outcome))?;
        }
        results = outcome
            .results
            .into_iter()
            .map(|r| if r.is_none() { e } else { r })
            .collect();
    }
    // Producers before 2.0 (v0-1) do not expect the loading error.
    let for_version = |e: ErrorCode| {
        if e == errors::COORDINATOR_LOAD_IN_PROGRESS && req.api_version < LOAD_IN_PROGRESS_VERSION {
            errors::COORDINATOR_NOT_AVAILABLE
        } else {
            e
        }
    };
    let mut slots = slots.into_iter();
    let topics = r
        .topics
        .iter()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let e = match slots.next().expect("a slot per partition") {
                        Ok(_) if !added.is_none() => added,
                        Ok(i) => results[i],
                        Err(e) => e,
                    };
                    TxnOffsetCommitResponsePartition::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(for_version(e).code())
                })
                .collect();
            TxnOffsetCommitResponseTopic::default()
                .with_name(t.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    respond(req, &TxnOffsetCommitResponse::default().with_topics(topics))
}
