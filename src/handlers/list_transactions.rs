//! ListTransactions (API 66, v0-1), run by the transaction coordinator:
//! the transactions of the `__transaction_state` partitions this broker
//! leads (the Admin client asks every broker), those the principal may
//! DESCRIBE only.

use std::rc::Rc;

use kafka_protocol::messages::list_transactions_response::TransactionState;
use kafka_protocol::messages::{
    ListTransactionsRequest, ListTransactionsResponse, ProducerId, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;

use super::{respond, txn_coordinator, HandlerResult};
use crate::coordinator::transaction::describe::ListFilters;
use crate::handlers::KafkaApis;
use crate::protocol::{decode_body, Request};
use crate::security::authorizer::{AclOperation, ResourceType};

pub fn handle(ctx: &Rc<KafkaApis>, req: &Request) -> HandlerResult {
    let r: ListTransactionsRequest = decode_body(req)?;
    let producer_ids: Vec<i64> = r.producer_id_filters.iter().map(|p| p.0).collect();
    let states: Vec<String> = r.state_filters.iter().map(|s| s.to_string()).collect();
    let mut listed = txn_coordinator(ctx)?.list_transactions(&ListFilters {
        producer_ids: &producer_ids,
        states: &states,
        // Decoded as -1 (no filter) from v0.
        duration_ms: r.duration_filter,
    });
    // The others are left out silently.
    listed.transactions.retain(|(id, _, _)| {
        ctx.authorize(
            req,
            AclOperation::Describe,
            ResourceType::TransactionalId,
            id,
        )
    });
    let body = ListTransactionsResponse::default()
        .with_error_code(listed.error.code())
        .with_unknown_state_filters(
            listed
                .unknown_state_filters
                .into_iter()
                .map(StrBytes::from_string)
                .collect(),
        )
        .with_transaction_states(
            listed
                .transactions
                .into_iter()
                .map(|(id, pid, state)| {
                    TransactionState::default()
                        .with_transactional_id(TransactionalId(StrBytes::from_string(id)))
                        .with_producer_id(ProducerId(pid))
                        .with_transaction_state(StrBytes::from_static_str(state))
                })
                .collect(),
        );
    respond(req, &body)
}
