//! What the transaction coordinator tells operators (Kafka's
//! handleDescribeTransactions and listTransactionStates), for
//! `kafka-transactions.sh describe` and `list`.

use super::transaction_coordinator::TransactionCoordinator;
use super::transaction_metadata::{TransactionMetadata, TransactionState};
use crate::protocol::errors;
use crate::protocol::errors::ErrorCode;
use crate::util::now_ms;

/// ListTransactions' filters; empty lists and a negative duration match all.
pub struct ListFilters<'a> {
    pub producer_ids: &'a [i64],
    pub states: &'a [String],
    /// Only transactions running for longer than this (v1).
    pub duration_ms: i64,
}

/// ListTransactions' answer: (transactional id, producer id, state name).
pub struct Listed {
    pub error: ErrorCode,
    pub unknown_state_filters: Vec<String>,
    pub transactions: Vec<(String, i64, &'static str)>,
}

impl TransactionCoordinator {
    /// The id's state, or TRANSACTIONAL_ID_NOT_FOUND (also for an id being
    /// removed), INVALID_REQUEST for an empty id, or the coordinator error.
    pub fn describe_transaction(
        &self,
        transactional_id: &str,
    ) -> Result<TransactionMetadata, ErrorCode> {
        if transactional_id.is_empty() {
            return Err(errors::INVALID_REQUEST);
        }
        let mut state = self.state.borrow_mut();
        match state.get(transactional_id)? {
            Some((_, m)) if m.state != TransactionState::Dead => Ok(m.clone()),
            _ => Err(errors::TRANSACTIONAL_ID_NOT_FOUND),
        }
    }

    /// The loaded transactions matching `filters`; COORDINATOR_LOAD_IN_PROGRESS
    /// while a partition loads.
    pub fn list_transactions(&self, filters: &ListFilters) -> Listed {
        let mut out = Listed {
            error: errors::NONE,
            unknown_state_filters: Vec::new(),
            transactions: Vec::new(),
        };
        let state = self.state.borrow();
        if state.any_loading() {
            out.error = errors::COORDINATOR_LOAD_IN_PROGRESS;
            return out;
        }
        let mut wanted_states = Vec::new();
        for name in filters.states {
            match TransactionState::from_name(name) {
                Some(s) => wanted_states.push(s),
                None => out.unknown_state_filters.push(name.clone()),
            }
        }
        let now = now_ms() as i64;
        let include = |m: &TransactionMetadata| {
            m.state != TransactionState::Dead
                && (filters.producer_ids.is_empty()
                    || filters.producer_ids.contains(&m.producer_id))
                && (filters.states.is_empty() || wanted_states.contains(&m.state))
                && (filters.duration_ms < 0 || now - m.txn_start_timestamp_ms > filters.duration_ms)
        };
        out.transactions = state
            .all()
            .filter(|m| include(m))
            .map(|m| (m.transactional_id.clone(), m.producer_id, m.state.name()))
            .collect();
        out
    }
}
