//! EndTxn (API 26, v0-4), run by the transaction coordinator: commits or
//! aborts the producer's transaction; answered once PrepareCommit or
//! PrepareAbort is in the transaction log (the markers follow).

use std::rc::Rc;

use kafka_protocol::messages::{EndTxnRequest, EndTxnResponse};

use super::{respond, txn_coordinator, HandlerResult};
use crate::coordinator::transaction::transaction_coordinator::TransactionResult;
use crate::handlers::KafkaApis;
use crate::protocol::{decode_body, errors, Request};

/// Before v2, PRODUCER_FENCED is sent as INVALID_PRODUCER_EPOCH.
const PRODUCER_FENCED_VERSION: i16 = 2;

pub async fn handle(ctx: &Rc<KafkaApis>, req: &Request) -> HandlerResult {
    let r: EndTxnRequest = decode_body(req)?;
    let result = if r.committed {
        TransactionResult::Commit
    } else {
        TransactionResult::Abort
    };
    let mut e = txn_coordinator(ctx)?
        .handle_end_transaction(
            &r.transactional_id.0,
            r.producer_id.0,
            r.producer_epoch,
            result,
        )
        .await;
    if e == errors::PRODUCER_FENCED && req.api_version < PRODUCER_FENCED_VERSION {
        e = errors::INVALID_PRODUCER_EPOCH;
    }
    respond(req, &EndTxnResponse::default().with_error_code(e.code()))
}
