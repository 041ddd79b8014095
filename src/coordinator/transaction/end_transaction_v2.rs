//! EndTxn under transaction version 2 (KIP-890 part 2, Kafka 4.0's
//! `endTransaction` for TV_2). Every end bumps the producer epoch, and the
//! client continues with the bumped one, so a late or duplicated EndTxn or
//! Produce of an ended transaction carries a stale epoch: it is fenced
//! instead of ending or joining the next transaction (the lost writes and
//! aborted reads Jepsen found under version 1, where every transaction of
//! a producer has the same epoch). A retry of an end that succeeded (its
//! epoch one below) gets the current producer id and epoch back.

use super::transaction_coordinator::{
    illegal_state, EndTxnResult, TransactionCoordinator, TransactionResult,
};
use super::transaction_metadata::{TransactionMetadata, TransactionState::*, TxnTransitMetadata};
use crate::protocol::errors;
use crate::util::now_ms;

impl TransactionCoordinator {
    /// Validates an EndTxn v5 and prepares its PrepareCommit/PrepareAbort
    /// with the epoch bumped; `Err` is the answer when nothing is to be
    /// written (an error, or a retry of an end already done).
    pub(super) async fn prepare_end_transaction_v2(
        &self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        result: TransactionResult,
    ) -> Result<(i32, TxnTransitMetadata), EndTxnResult> {
        // An exhausted epoch moves to a new producer id, allocated first.
        let exhausted = match self.state.borrow_mut().get(transactional_id) {
            Ok(found) => found.is_some_and(|(_, m)| m.is_producer_epoch_exhausted()),
            Err(e) => return Err(EndTxnResult::failed(e)),
        };
        let next_producer_id = if exhausted {
            Some(
                self.generate_producer_id()
                    .await
                    .map_err(EndTxnResult::failed)?,
            )
        } else {
            None
        };
        let mut state = self.state.borrow_mut();
        let (coordinator_epoch, m) = state
            .get(transactional_id)
            .map_err(EndTxnResult::failed)?
            .ok_or(EndTxnResult::failed(errors::INVALID_PRODUCER_ID_MAPPING))?;
        let check = check_end_v2(m, producer_id, producer_epoch, result);
        let new_state = match check {
            EndV2::Answer(answer) => return Err(answer),
            EndV2::Bump(new_state) => new_state,
        };
        m.prepare_abort_or_commit_bumping_epoch(new_state, next_producer_id, now_ms() as i64)
            .map(|t| (coordinator_epoch, t))
            .map_err(|e| EndTxnResult::failed(illegal_state(transactional_id, &e)))
    }
}

/// What an EndTxn v5 does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum EndV2 {
    /// Answer now, writing nothing.
    Answer(EndTxnResult),
    /// Prepare this state with the epoch bumped.
    Bump(super::transaction_metadata::TransactionState),
}

/// Kafka 4.0's checks, in its order: a pending transition, the producer id
/// (or the previous one, retrying across an epoch overflow), the epoch
/// (the current one, or one below for a retry of a completed end), then
/// the state.
fn check_end_v2(
    m: &TransactionMetadata,
    producer_id: i64,
    producer_epoch: i16,
    result: TransactionResult,
) -> EndV2 {
    let fail = |code| EndV2::Answer(EndTxnResult::failed(code));
    let retry_on_overflow = m.last_producer_id == producer_id
        && producer_epoch == i16::MAX - 1
        && m.producer_epoch == 0;
    let retry_on_epoch_bump = m.producer_epoch as i32 == producer_epoch as i32 + 1;
    if m.pending_state.is_some() {
        return fail(errors::CONCURRENT_TRANSACTIONS);
    }
    if m.producer_id != producer_id && !retry_on_overflow {
        return fail(errors::INVALID_PRODUCER_ID_MAPPING);
    }
    let valid_epoch = match m.state {
        Ongoing | Empty | Dead | PrepareEpochFence => producer_epoch == m.producer_epoch,
        PrepareCommit | PrepareAbort => retry_on_epoch_bump,
        CompleteCommit | CompleteAbort => {
            retry_on_epoch_bump || retry_on_overflow || producer_epoch == m.producer_epoch
        }
    };
    if !valid_epoch {
        return fail(errors::PRODUCER_FENCED);
    }
    let is_retry = retry_on_epoch_bump || retry_on_overflow;
    let current = EndV2::Answer(EndTxnResult {
        error: errors::NONE,
        producer_id: m.producer_id,
        producer_epoch: m.producer_epoch,
    });
    use TransactionResult::{Abort, Commit};
    match (m.state, result) {
        (Ongoing, Commit) => EndV2::Bump(PrepareCommit),
        (Ongoing, Abort) => EndV2::Bump(PrepareAbort),
        (CompleteCommit, Commit) | (CompleteAbort, Abort) if is_retry => current,
        // An abort with nothing sent since the last end: still a bump.
        (Empty | CompleteCommit | CompleteAbort, Abort) if !is_retry => EndV2::Bump(PrepareAbort),
        (PrepareCommit, Commit) | (PrepareAbort, Abort) => fail(errors::CONCURRENT_TRANSACTIONS),
        (Dead | PrepareEpochFence, _) => {
            log::error!(
                "transactional id {} is in state {:?}, which EndTxn never sees",
                m.transactional_id,
                m.state
            );
            fail(errors::UNKNOWN_SERVER_ERROR)
        }
        _ => fail(errors::INVALID_TXN_STATE),
    }
}

#[cfg(test)]
#[path = "end_transaction_v2_tests.rs"]
mod tests;
