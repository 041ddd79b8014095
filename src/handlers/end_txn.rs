//! EndTxn (API 26, v0-5), run by the transaction coordinator: commits or
//! aborts the producer's transaction; answered once PrepareCommit or
//! PrepareAbort is in the transaction log (the markers follow). v5 is
//! transaction version 2: the epoch is bumped, and the answer carries the
//! producer id and epoch the client continues with.

use std::rc::Rc;

use kafka_protocol::messages::{EndTxnRequest, EndTxnResponse, ProducerId};

use super::{respond, txn_coordinator, HandlerResult};
use crate::coordinator::transaction::transaction_coordinator::TransactionResult;
use crate::coordinator::transaction::transaction_metadata::TRANSACTION_VERSION_2;
use crate::handlers::KafkaApis;
use crate::protocol::{decode_body, errors, Request};
use crate::security::authorizer::{AclOperation, ResourceType};

/// Before v2, PRODUCER_FENCED is sent as INVALID_PRODUCER_EPOCH.
const PRODUCER_FENCED_VERSION: i16 = 2;
/// From v5 the transaction runs under transaction version 2.
const TRANSACTION_VERSION_2_VERSION: i16 = 5;

pub async fn handle(ctx: &Rc<KafkaApis>, req: &Request) -> HandlerResult {
    let r: EndTxnRequest = decode_body(req)?;
    if !ctx.authorize(
        req,
        AclOperation::Write,
        ResourceType::TransactionalId,
        &r.transactional_id.0,
    ) {
        let body = EndTxnResponse::default()
            .with_error_code(errors::TRANSACTIONAL_ID_AUTHORIZATION_FAILED.code());
        return respond(req, &body);
    }
    let result = if r.committed {
        TransactionResult::Commit
    } else {
        TransactionResult::Abort
    };
    let client_transaction_version = if req.api_version >= TRANSACTION_VERSION_2_VERSION {
        TRANSACTION_VERSION_2
    } else {
        0
    };
    let answer = txn_coordinator(ctx)?
        .handle_end_transaction(
            &r.transactional_id.0,
            r.producer_id.0,
            r.producer_epoch,
            result,
            client_transaction_version,
        )
        .await;
    let mut e = answer.error;
    if e == errors::PRODUCER_FENCED && req.api_version < PRODUCER_FENCED_VERSION {
        e = errors::INVALID_PRODUCER_EPOCH;
    }
    let body = EndTxnResponse::default()
        .with_error_code(e.code())
        .with_producer_id(ProducerId(answer.producer_id))
        .with_producer_epoch(answer.producer_epoch);
    respond(req, &body)
}
