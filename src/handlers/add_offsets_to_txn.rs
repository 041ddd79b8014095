//! AddOffsetsToTxn (API 25, v0-4), run by the transaction coordinator:
//! adds the group's `__consumer_offsets` partition to the transaction, so
//! the producer's TxnOffsetCommit there commits or aborts with it.

use std::collections::BTreeSet;
use std::rc::Rc;

use kafka_protocol::messages::{AddOffsetsToTxnRequest, AddOffsetsToTxnResponse};

use super::{respond, txn_coordinator, HandlerResult};
use crate::coordinator::transaction::transaction_metadata::TopicPartition;
use crate::coordinator::{partition_for, OFFSETS_TOPIC};
use crate::handlers::KafkaApis;
use crate::protocol::errors::ErrorCode;
use crate::protocol::{decode_body, errors, Request};
use crate::security::authorizer::{AclOperation, ResourceType};

/// Before v2, PRODUCER_FENCED is sent as INVALID_PRODUCER_EPOCH.
const PRODUCER_FENCED_VERSION: i16 = 2;

/// The group's `__consumer_offsets` partition, which a transaction
/// committing its offsets must include.
pub(super) fn offsets_partition_of(ctx: &KafkaApis, group_id: &str) -> TopicPartition {
    let offsets_partitions = ctx
        .metadata
        .image()
        .topic(OFFSETS_TOPIC)
        .map_or(ctx.config.offsets_topic_num_partitions, |t| {
            t.partitions.len() as i32
        })
        .max(1);
    TopicPartition {
        topic: OFFSETS_TOPIC.to_string(),
        partition: partition_for(group_id, offsets_partitions),
    }
}

/// KafkaApis' checks of the transactional offset APIs: WRITE on the
/// transactional id, then READ on the group.
pub(super) fn txn_group_refusal(
    ctx: &KafkaApis,
    req: &Request,
    transactional_id: &str,
    group_id: &str,
) -> Option<ErrorCode> {
    if !ctx.authorize(
        req,
        AclOperation::Write,
        ResourceType::TransactionalId,
        transactional_id,
    ) {
        Some(errors::TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    } else if !ctx.authorize(req, AclOperation::Read, ResourceType::Group, group_id) {
        Some(errors::GROUP_AUTHORIZATION_FAILED)
    } else {
        None
    }
}

pub async fn handle(ctx: &Rc<KafkaApis>, req: &Request) -> HandlerResult {
    let r: AddOffsetsToTxnRequest = decode_body(req)?;
    let refused = txn_group_refusal(ctx, req, &r.transactional_id.0, &r.group_id.0);
    if let Some(e) = refused {
        return respond(
            req,
            &AddOffsetsToTxnResponse::default().with_error_code(e.code()),
        );
    }
    let partition = offsets_partition_of(ctx, &r.group_id.0);
    let mut e = txn_coordinator(ctx)?
        .handle_add_partitions(
            &r.transactional_id.0,
            r.producer_id.0,
            r.producer_epoch,
            BTreeSet::from([partition]),
            0,
        )
        .await;
    if e == errors::PRODUCER_FENCED && req.api_version < PRODUCER_FENCED_VERSION {
        e = errors::INVALID_PRODUCER_EPOCH;
    }
    respond(
        req,
        &AddOffsetsToTxnResponse::default().with_error_code(e.code()),
    )
}
