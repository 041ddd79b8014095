//! Kafka 3.9's TransactionState and TransactionMetadata
//! (core/src/main/scala/kafka/coordinator/transaction/TransactionMetadata.scala):
//! one transactional id's producer id and epoch, its transaction's state and
//! partitions, and the two-step transition protocol. A `prepare_*` method
//! computes the target (`TxnTransitMetadata`) and marks it pending; the
//! caller appends the target to `__transaction_state`; once the append is
//! replicated, `complete_transition` applies it (on a failed append the
//! caller clears `pending_state`, as TransactionStateManager does).
//!
//! Where Kafka throws IllegalStateException or IllegalArgumentException (a
//! caller's broken invariant, or a state read from disk that Kafka never
//! writes), these methods return `IllegalStateError` and change nothing but
//! what Kafka changes before throwing: the caller logs it and answers
//! UNKNOWN_SERVER_ERROR, which is what Kafka's request handler makes of the
//! exception. Not panicking matters because the state comes from the log.

use std::collections::BTreeSet;
use std::fmt;

use kshard_shards::log::batch::{NO_PRODUCER_EPOCH, NO_PRODUCER_ID};

use super::txn_log_codec::TxnLogValue;
use crate::protocol::errors::{self, ErrorCode};

/// Kafka's TransactionState; `to_byte` is the TransactionStatus persisted in
/// `__transaction_state`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TransactionState {
    /// No transaction (yet): AddPartitions/AddOffsets => Ongoing.
    Empty,
    /// EndTxn commit => PrepareCommit, abort => PrepareAbort.
    Ongoing,
    /// Markers being written => CompleteCommit.
    PrepareCommit,
    /// Markers being written => CompleteAbort.
    PrepareAbort,
    CompleteCommit,
    CompleteAbort,
    /// The transactional id expired and is being removed (never persisted:
    /// its record is a tombstone).
    Dead,
    /// Bumping the epoch to fence older producers before aborting (only
    /// ever a pending state, never persisted).
    PrepareEpochFence,
}

use TransactionState::*;

impl TransactionState {
    pub const ALL: [TransactionState; 8] = [
        Empty,
        Ongoing,
        PrepareCommit,
        PrepareAbort,
        CompleteCommit,
        CompleteAbort,
        Dead,
        PrepareEpochFence,
    ];

    /// Kafka's `TransactionState.fromId`; an unknown id is an error.
    pub fn from_byte(id: i8) -> Result<TransactionState, String> {
        match usize::try_from(id).ok().and_then(|i| Self::ALL.get(i)) {
            Some(state) => Ok(*state),
            None => Err(format!(
                "Unknown transaction state id {id} from the transaction status message"
            )),
        }
    }

    pub fn to_byte(self) -> i8 {
        match self {
            Empty => 0,
            Ongoing => 1,
            PrepareCommit => 2,
            PrepareAbort => 3,
            CompleteCommit => 4,
            CompleteAbort => 5,
            Dead => 6,
            PrepareEpochFence => 7,
        }
    }

    /// The name DescribeTransactions and ListTransactions report.
    pub fn name(self) -> &'static str {
        match self {
            Empty => "Empty",
            Ongoing => "Ongoing",
            PrepareCommit => "PrepareCommit",
            PrepareAbort => "PrepareAbort",
            CompleteCommit => "CompleteCommit",
            CompleteAbort => "CompleteAbort",
            Dead => "Dead",
            PrepareEpochFence => "PrepareEpochFence",
        }
    }

    /// Kafka's `TransactionState.fromName` (ListTransactions' state filter).
    pub fn from_name(name: &str) -> Option<TransactionState> {
        Self::ALL.into_iter().find(|s| s.name() == name)
    }

    /// The states this one may be entered from.
    pub fn valid_previous_states(self) -> &'static [TransactionState] {
        match self {
            Empty => &[Empty, CompleteCommit, CompleteAbort],
            Ongoing => &[Ongoing, Empty, CompleteCommit, CompleteAbort],
            PrepareCommit => &[Ongoing],
            // From Empty or Complete*: an empty abort (transaction version 2).
            PrepareAbort => &[
                Ongoing,
                PrepareEpochFence,
                Empty,
                CompleteCommit,
                CompleteAbort,
            ],
            CompleteCommit => &[PrepareCommit],
            CompleteAbort => &[PrepareAbort],
            Dead => &[Empty, CompleteAbort, CompleteCommit],
            PrepareEpochFence => &[Ongoing],
        }
    }

    /// Whether `transactional.id.expiration.ms` may expire the id.
    pub fn is_expiration_allowed(self) -> bool {
        matches!(self, Empty | CompleteCommit | CompleteAbort)
    }
}

impl fmt::Display for TransactionState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Kafka's TopicPartition; ordered by topic, then partition.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TopicPartition {
    pub topic: String,
    pub partition: i32,
}

impl fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}

/// Kafka's IllegalStateException from a transition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IllegalStateError(pub String);

impl IllegalStateError {
    /// What Kafka's request handler answers for the exception.
    pub fn error_code(&self) -> ErrorCode {
        errors::UNKNOWN_SERVER_ERROR
    }
}

impl fmt::Display for IllegalStateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for IllegalStateError {}

/// Why `prepare_increment_producer_epoch` prepared nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TxnError {
    /// Kafka's `Left(error)`: the answer to the client.
    Code(ErrorCode),
    IllegalState(IllegalStateError),
}

impl TxnError {
    pub fn error_code(&self) -> ErrorCode {
        match self {
            TxnError::Code(code) => *code,
            TxnError::IllegalState(e) => e.error_code(),
        }
    }
}

impl From<IllegalStateError> for TxnError {
    fn from(e: IllegalStateError) -> Self {
        TxnError::IllegalState(e)
    }
}

/// The target of a transition: what is appended to `__transaction_state`
/// and, once replicated, applied by `complete_transition`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnTransitMetadata {
    pub producer_id: i64,
    pub last_producer_id: i64,
    pub producer_epoch: i16,
    pub last_producer_epoch: i16,
    pub txn_timeout_ms: i32,
    pub txn_state: TransactionState,
    pub topic_partitions: BTreeSet<TopicPartition>,
    pub txn_start_timestamp_ms: i64,
    pub txn_last_update_timestamp_ms: i64,
    pub next_producer_id: i64,
    pub client_transaction_version: i16,
}

/// Transaction version 2 (KIP-890 part 2, Kafka's `TransactionVersion.TV_2`):
/// the epoch is bumped at every transaction end, partitions are added by
/// their leaders.
pub const TRANSACTION_VERSION_2: i16 = 2;

impl TxnTransitMetadata {
    /// The record value Kafka's `TransactionLog.valueToBytes` writes (it
    /// drops the last producer id and epoch).
    pub fn to_log_value(&self) -> TxnLogValue {
        TxnLogValue {
            producer_id: self.producer_id,
            producer_epoch: self.producer_epoch,
            txn_timeout_ms: self.txn_timeout_ms,
            state: self.txn_state,
            topic_partitions: self.topic_partitions.clone(),
            txn_last_update_timestamp_ms: self.txn_last_update_timestamp_ms,
            txn_start_timestamp_ms: self.txn_start_timestamp_ms,
            client_transaction_version: self.client_transaction_version,
        }
    }

    /// Whether this end of a transaction bumps the epoch (version 2).
    fn bumps_epoch_of(&self, m: &TransactionMetadata) -> bool {
        self.client_transaction_version >= TRANSACTION_VERSION_2
            && self.producer_id == m.producer_id
            && self.producer_epoch as i32 == m.producer_epoch as i32 + 1
    }
}

/// Kafka's TransactionMetadata: guarded by the caller (Kafka's `inLock`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TransactionMetadata {
    pub transactional_id: String,
    pub producer_id: i64,
    /// The producer id before the last transition (-1 after loading: not
    /// persisted).
    pub last_producer_id: i64,
    pub producer_epoch: i16,
    /// The epoch before the last bump, for retried InitProducerId (-1 after
    /// loading or fencing).
    pub last_producer_epoch: i16,
    pub txn_timeout_ms: i32,
    pub state: TransactionState,
    pub topic_partitions: BTreeSet<TopicPartition>,
    /// When the first partition was added; -1: no transaction.
    pub txn_start_timestamp_ms: i64,
    /// Updated by every transition; drives transactional id expiration.
    pub txn_last_update_timestamp_ms: i64,
    /// The state a prepared transition goes to; blocks other transitions.
    pub pending_state: Option<TransactionState>,
    /// An epoch fence was prepared but its append failed: the bumped epoch
    /// was never returned, so the next fence does not bump again.
    pub has_failed_epoch_fence: bool,
    /// Under transaction version 2, the producer id the client continues
    /// with once this transaction's markers are written (its epoch ran
    /// out); -1 otherwise. Not persisted, as in Kafka 4.0.
    pub next_producer_id: i64,
    /// The transaction version of the client's transaction (0 or 2).
    pub client_transaction_version: i16,
}

impl TransactionMetadata {
    /// A new transactional id, as InitProducerId creates it: Empty, with no
    /// epoch yet (the first bump gives 0).
    pub fn new(
        transactional_id: String,
        producer_id: i64,
        txn_timeout_ms: i32,
        now_ms: i64,
    ) -> TransactionMetadata {
        TransactionMetadata {
            transactional_id,
            producer_id,
            last_producer_id: NO_PRODUCER_ID,
            producer_epoch: NO_PRODUCER_EPOCH,
            last_producer_epoch: NO_PRODUCER_EPOCH,
            txn_timeout_ms,
            state: Empty,
            topic_partitions: BTreeSet::new(),
            txn_start_timestamp_ms: -1,
            txn_last_update_timestamp_ms: now_ms,
            pending_state: None,
            has_failed_epoch_fence: false,
            next_producer_id: NO_PRODUCER_ID,
            client_transaction_version: 0,
        }
    }

    /// Kafka's `TransactionLog.readTxnRecordValue`.
    pub fn from_log_value(transactional_id: &str, v: &TxnLogValue) -> TransactionMetadata {
        TransactionMetadata {
            transactional_id: transactional_id.to_string(),
            producer_id: v.producer_id,
            last_producer_id: NO_PRODUCER_ID,
            producer_epoch: v.producer_epoch,
            last_producer_epoch: NO_PRODUCER_EPOCH,
            txn_timeout_ms: v.txn_timeout_ms,
            state: v.state,
            topic_partitions: v.topic_partitions.clone(),
            txn_start_timestamp_ms: v.txn_start_timestamp_ms,
            txn_last_update_timestamp_ms: v.txn_last_update_timestamp_ms,
            pending_state: None,
            has_failed_epoch_fence: false,
            next_producer_id: NO_PRODUCER_ID,
            client_transaction_version: v.client_transaction_version,
        }
    }

    /// The current state as a record value.
    pub fn to_log_value(&self) -> TxnLogValue {
        self.prepare_no_transit().to_log_value()
    }

    pub fn add_partitions(&mut self, partitions: &BTreeSet<TopicPartition>) {
        self.topic_partitions.extend(partitions.iter().cloned());
    }

    /// A partition's marker is written (TransactionMarkerChannelManager).
    pub fn remove_partition(&mut self, tp: &TopicPartition) -> Result<(), IllegalStateError> {
        if self.state != PrepareCommit && self.state != PrepareAbort {
            return Err(IllegalStateError(format!(
                "Transaction metadata's current state is {}, and its pending state is {:?} while \
                 trying to remove partitions whose txn marker has been sent, this is not expected",
                self.state, self.pending_state
            )));
        }
        self.topic_partitions.remove(tp);
        Ok(())
    }

    /// The current state as a transit, without marking anything pending.
    pub fn prepare_no_transit(&self) -> TxnTransitMetadata {
        TxnTransitMetadata {
            producer_id: self.producer_id,
            last_producer_id: self.last_producer_id,
            producer_epoch: self.producer_epoch,
            last_producer_epoch: self.last_producer_epoch,
            txn_timeout_ms: self.txn_timeout_ms,
            txn_state: self.state,
            topic_partitions: self.topic_partitions.clone(),
            txn_start_timestamp_ms: self.txn_start_timestamp_ms,
            txn_last_update_timestamp_ms: self.txn_last_update_timestamp_ms,
            next_producer_id: self.next_producer_id,
            client_transaction_version: self.client_transaction_version,
        }
    }

    /// Bumps the epoch to fence the current producer before aborting its
    /// transaction (InitProducerId during Ongoing, or a timed-out
    /// transaction). The caller then calls `prepare_abort_after_epoch_fence`.
    pub fn prepare_fence_producer_epoch(
        &mut self,
    ) -> Result<TxnTransitMetadata, IllegalStateError> {
        if self.producer_epoch == i16::MAX {
            return Err(IllegalStateError(
                "Cannot fence producer with epoch equal to Short.MaxValue since this would overflow"
                    .into(),
            ));
        }
        // The epoch of a failed fence was never returned to a client: reuse it.
        let bumped_epoch = if self.has_failed_epoch_fence {
            self.producer_epoch
        } else {
            self.producer_epoch + 1
        };
        self.prepare_transition_to(TxnTransitMetadata {
            txn_state: PrepareEpochFence,
            producer_epoch: bumped_epoch,
            last_producer_epoch: NO_PRODUCER_EPOCH,
            ..self.prepare_no_transit()
        })
    }

    /// Kafka's TransactionCoordinator.endTransaction for the abort that
    /// follows `prepare_fence_producer_epoch` (`fenced_epoch` is the transit's
    /// epoch): the pending PrepareEpochFence gives way to PrepareAbort and
    /// the bumped epoch is adopted before the abort is prepared.
    pub fn prepare_abort_after_epoch_fence(
        &mut self,
        fenced_epoch: i16,
        update_timestamp_ms: i64,
    ) -> Result<TxnTransitMetadata, IllegalStateError> {
        if self.pending_state != Some(PrepareEpochFence) {
            return Err(IllegalStateError(format!(
                "TransactionalId {} aborting after an epoch fence while its pending state is {:?}",
                self.transactional_id, self.pending_state
            )));
        }
        self.pending_state = None;
        self.producer_epoch = fenced_epoch;
        self.last_producer_epoch = NO_PRODUCER_EPOCH;
        self.prepare_abort_or_commit(PrepareAbort, update_timestamp_ms)
    }

    /// InitProducerId on Empty or Complete*: bump the epoch (or, for a retry
    /// of a bump whose answer was lost, keep it). The caller checks
    /// `is_producer_epoch_exhausted` first and rotates the producer id
    /// instead, and checks the expected producer id (`is_valid_producer_id`).
    pub fn prepare_increment_producer_epoch(
        &mut self,
        new_txn_timeout_ms: i32,
        expected_producer_epoch: Option<i16>,
        update_timestamp_ms: i64,
    ) -> Result<TxnTransitMetadata, TxnError> {
        if self.is_producer_epoch_exhausted() {
            return Err(TxnError::IllegalState(IllegalStateError(format!(
                "Cannot allocate any more producer epochs for producerId {}",
                self.producer_id
            ))));
        }
        // Not exhausted, so no overflow. A new producer goes from -1 to 0.
        let bumped_epoch = self.producer_epoch + 1;
        let (next_epoch, last_epoch) = match expected_producer_epoch {
            None => (bumped_epoch, NO_PRODUCER_EPOCH),
            // Continuing after an error, and no other producer initialized.
            Some(expected)
                if self.producer_epoch == NO_PRODUCER_EPOCH || expected == self.producer_epoch =>
            {
                (bumped_epoch, self.producer_epoch)
            }
            // A retry of a successful bump: a newer producer would have reset
            // the last epoch to -1, so this one is not fenced.
            Some(expected) if expected == self.last_producer_epoch => {
                (self.producer_epoch, self.last_producer_epoch)
            }
            Some(_) => return Err(TxnError::Code(errors::PRODUCER_FENCED)),
        };
        Ok(self.prepare_transition_to(TxnTransitMetadata {
            txn_state: Empty,
            producer_epoch: next_epoch,
            last_producer_epoch: last_epoch,
            txn_timeout_ms: new_txn_timeout_ms,
            topic_partitions: BTreeSet::new(),
            txn_start_timestamp_ms: -1,
            txn_last_update_timestamp_ms: update_timestamp_ms,
            ..self.prepare_no_transit()
        })?)
    }

    /// InitProducerId with the epoch exhausted: continue with a new producer
    /// id at epoch 0. `record_last_epoch`: the request named the expected
    /// producer id and epoch, so a retry can be recognised.
    pub fn prepare_producer_id_rotation(
        &mut self,
        new_producer_id: i64,
        new_txn_timeout_ms: i32,
        update_timestamp_ms: i64,
        record_last_epoch: bool,
    ) -> Result<TxnTransitMetadata, IllegalStateError> {
        if self.has_pending_transaction() {
            return Err(IllegalStateError(
                "Cannot rotate producer ids while a transaction is still pending".into(),
            ));
        }
        self.prepare_transition_to(TxnTransitMetadata {
            producer_id: new_producer_id,
            producer_epoch: 0,
            last_producer_epoch: if record_last_epoch {
                self.producer_epoch
            } else {
                NO_PRODUCER_EPOCH
            },
            txn_timeout_ms: new_txn_timeout_ms,
            txn_state: Empty,
            topic_partitions: BTreeSet::new(),
            txn_start_timestamp_ms: -1,
            txn_last_update_timestamp_ms: update_timestamp_ms,
            ..self.prepare_no_transit()
        })
    }

    /// AddPartitionsToTxn / AddOffsetsToTxn (or, under transaction version
    /// 2, a leader adding the partition of a Produce or TxnOffsetCommit): a
    /// new transaction starts now.
    pub fn prepare_add_partitions(
        &mut self,
        added: &BTreeSet<TopicPartition>,
        update_timestamp_ms: i64,
        client_transaction_version: i16,
    ) -> Result<TxnTransitMetadata, IllegalStateError> {
        let txn_start_timestamp_ms = match self.state {
            Empty | CompleteAbort | CompleteCommit => update_timestamp_ms,
            _ => self.txn_start_timestamp_ms,
        };
        let mut topic_partitions = self.topic_partitions.clone();
        topic_partitions.extend(added.iter().cloned());
        self.prepare_transition_to(TxnTransitMetadata {
            txn_state: Ongoing,
            topic_partitions,
            txn_start_timestamp_ms,
            txn_last_update_timestamp_ms: update_timestamp_ms,
            client_transaction_version,
            ..self.prepare_no_transit()
        })
    }

    /// EndTxn under transaction version 2 (KIP-890 part 2): the epoch is
    /// bumped at every end, so a late request of this transaction carries
    /// a stale epoch and is fenced. `next_producer_id`: the epoch ran out,
    /// and the client continues with that id at epoch 0 once the markers
    /// are written. From Empty or Complete*, an abort with no partition (an
    /// empty abort) starts and ends a transaction now.
    pub fn prepare_abort_or_commit_bumping_epoch(
        &mut self,
        new_state: TransactionState,
        next_producer_id: Option<i64>,
        update_timestamp_ms: i64,
    ) -> Result<TxnTransitMetadata, IllegalStateError> {
        if self.producer_epoch == i16::MAX {
            return Err(IllegalStateError(
                "Cannot bump the producer epoch past Short.MaxValue".into(),
            ));
        }
        let empty_abort = matches!(self.state, Empty | CompleteCommit | CompleteAbort);
        if empty_abort && new_state != PrepareAbort {
            return Err(IllegalStateError(format!(
                "Cannot go to {new_state} from {} without a transaction",
                self.state
            )));
        }
        self.prepare_transition_to(TxnTransitMetadata {
            txn_state: new_state,
            producer_epoch: self.producer_epoch + 1,
            last_producer_epoch: self.producer_epoch,
            next_producer_id: next_producer_id.unwrap_or(NO_PRODUCER_ID),
            client_transaction_version: TRANSACTION_VERSION_2,
            txn_start_timestamp_ms: if empty_abort {
                update_timestamp_ms
            } else {
                self.txn_start_timestamp_ms
            },
            txn_last_update_timestamp_ms: update_timestamp_ms,
            ..self.prepare_no_transit()
        })
    }

    /// EndTxn: `new_state` is PrepareCommit or PrepareAbort.
    pub fn prepare_abort_or_commit(
        &mut self,
        new_state: TransactionState,
        update_timestamp_ms: i64,
    ) -> Result<TxnTransitMetadata, IllegalStateError> {
        self.prepare_transition_to(TxnTransitMetadata {
            txn_state: new_state,
            txn_last_update_timestamp_ms: update_timestamp_ms,
            ..self.prepare_no_transit()
        })
    }

    /// Every marker is written: PrepareCommit => CompleteCommit, otherwise
    /// => CompleteAbort.
    pub fn prepare_complete(
        &mut self,
        update_timestamp_ms: i64,
    ) -> Result<TxnTransitMetadata, IllegalStateError> {
        let new_state = if self.state == PrepareCommit {
            CompleteCommit
        } else {
            CompleteAbort
        };
        // The PrepareAbort record of a fence was written: its epoch is safe.
        self.has_failed_epoch_fence = false;
        // Under version 2 an exhausted epoch moves to the next producer id.
        let rotate = self.client_transaction_version >= TRANSACTION_VERSION_2
            && self.next_producer_id != NO_PRODUCER_ID;
        let (producer_id, producer_epoch) = if rotate {
            (self.next_producer_id, 0)
        } else {
            (self.producer_id, self.producer_epoch)
        };
        self.prepare_transition_to(TxnTransitMetadata {
            txn_state: new_state,
            producer_id,
            producer_epoch,
            next_producer_id: NO_PRODUCER_ID,
            topic_partitions: BTreeSet::new(),
            txn_last_update_timestamp_ms: update_timestamp_ms,
            ..self.prepare_no_transit()
        })
    }

    /// The transactional id expired: its tombstone is being written.
    pub fn prepare_dead(&mut self) -> Result<TxnTransitMetadata, IllegalStateError> {
        self.prepare_transition_to(TxnTransitMetadata {
            txn_state: Dead,
            topic_partitions: BTreeSet::new(),
            ..self.prepare_no_transit()
        })
    }

    /// Kafka's `TransactionMetadata.isEpochExhausted`: a client never gets
    /// `i16::MAX`, so the coordinator can always fence it with one more bump.
    pub fn is_epoch_exhausted(producer_epoch: i16) -> bool {
        producer_epoch >= i16::MAX - 1
    }

    pub fn is_producer_epoch_exhausted(&self) -> bool {
        Self::is_epoch_exhausted(self.producer_epoch)
    }

    /// Kafka's `pendingTransitionInProgress`.
    pub fn pending_transition_in_progress(&self) -> bool {
        self.pending_state.is_some()
    }

    /// TransactionCoordinator's `isValidProducerId` for an InitProducerId
    /// naming its current producer id and epoch: the id is ours, or this is
    /// a new metadata (recovering from UNKNOWN_PRODUCER_ID), or it is our
    /// previous id with an exhausted epoch (a retry of a rotation).
    pub fn is_valid_producer_id(&self, producer_id: i64, producer_epoch: i16) -> bool {
        self.producer_epoch == NO_PRODUCER_EPOCH
            || producer_id == self.producer_id
            || (producer_id == self.last_producer_id && Self::is_epoch_exhausted(producer_epoch))
    }

    fn has_pending_transaction(&self) -> bool {
        matches!(self.state, Ongoing | PrepareAbort | PrepareCommit)
    }

    /// Kafka's `prepareTransitionTo`: validates `target` and marks its state
    /// pending. The target's last producer id is always the current one.
    fn prepare_transition_to(
        &mut self,
        mut target: TxnTransitMetadata,
    ) -> Result<TxnTransitMetadata, IllegalStateError> {
        let new_state = target.txn_state;
        if let Some(pending) = self.pending_state {
            return Err(IllegalStateError(format!(
                "Preparing transaction state transition to {new_state} while it already a pending \
                 state {pending}"
            )));
        }
        if target.producer_id < 0 {
            return Err(IllegalStateError(format!(
                "Illegal new producer id {}",
                target.producer_id
            )));
        }
        // A new metadata has epoch -1 until its first bump, and may expire so.
        if new_state != Dead && target.producer_epoch < 0 {
            return Err(IllegalStateError(format!(
                "Illegal new producer epoch {}",
                target.producer_epoch
            )));
        }
        if !new_state.valid_previous_states().contains(&self.state) {
            return Err(IllegalStateError(format!(
                "Preparing transaction state transition to {new_state} failed since the target \
                 state {new_state} is not a valid previous state of the current state {}",
                self.state
            )));
        }
        target.last_producer_id = self.producer_id;
        self.pending_state = Some(new_state);
        Ok(target)
    }

    /// Kafka's `completeTransitionTo`: applies a prepared transition once its
    /// record is replicated. On an error nothing changes (the pending state
    /// stays, as in Kafka).
    pub fn complete_transition(
        &mut self,
        transit: &TxnTransitMetadata,
    ) -> Result<(), IllegalStateError> {
        let Some(to_state) = self.pending_state else {
            return Err(IllegalStateError(format!(
                "TransactionalId {} completing transaction state transition while it does not \
                 have a pending state",
                self.transactional_id
            )));
        };
        if to_state == Dead && transit.txn_state == Dead {
            // Completing an expiration removes the metadata from the cache.
            return Err(IllegalStateError(format!(
                "TransactionalId {} is trying to complete a transition to Dead. This means that \
                 the transactionalId was being expired, and the only acceptable completion of \
                 this operation is to remove the transaction metadata from the cache, not to \
                 persist the Dead in the log.",
                self.transactional_id
            )));
        }
        if to_state != transit.txn_state || !self.is_valid_completion(to_state, transit) {
            return Err(IllegalStateError(format!(
                "TransactionalId {} failed transition to state {transit:?} due to unexpected \
                 metadata (current {self:?})",
                self.transactional_id
            )));
        }
        match to_state {
            Empty => {
                self.txn_timeout_ms = transit.txn_timeout_ms;
                self.producer_epoch = transit.producer_epoch;
                self.last_producer_epoch = transit.last_producer_epoch;
                self.producer_id = transit.producer_id;
                self.last_producer_id = transit.last_producer_id;
            }
            Ongoing => {
                self.txn_start_timestamp_ms = transit.txn_start_timestamp_ms;
                self.client_transaction_version = transit.client_transaction_version;
                self.add_partitions(&transit.topic_partitions);
            }
            PrepareAbort | PrepareCommit => {
                // Version 2 bumped the epoch (unchanged otherwise).
                self.producer_epoch = transit.producer_epoch;
                self.last_producer_epoch = transit.last_producer_epoch;
                self.next_producer_id = transit.next_producer_id;
                self.client_transaction_version = transit.client_transaction_version;
                self.txn_start_timestamp_ms = transit.txn_start_timestamp_ms;
            }
            CompleteAbort | CompleteCommit => {
                self.txn_start_timestamp_ms = transit.txn_start_timestamp_ms;
                self.topic_partitions.clear();
                if transit.producer_id != self.producer_id {
                    // Version 2 moved to the next producer id; a retried
                    // EndTxn may still name the previous one.
                    self.last_producer_id = self.producer_id;
                    self.producer_id = transit.producer_id;
                    self.producer_epoch = transit.producer_epoch;
                }
                self.next_producer_id = NO_PRODUCER_ID;
            }
            _ => {}
        }
        self.txn_last_update_timestamp_ms = transit.txn_last_update_timestamp_ms;
        self.pending_state = None;
        self.state = to_state;
        Ok(())
    }

    /// The checks of Kafka's `completeTransitionTo` for each target state.
    fn is_valid_completion(&self, to_state: TransactionState, t: &TxnTransitMetadata) -> bool {
        let same_producer =
            t.producer_epoch == self.producer_epoch && t.producer_id == self.producer_id;
        // One more epoch, or epoch 0 of a rotated producer id.
        let epoch_bump = t.producer_epoch as i32 == self.producer_epoch as i32 + 1
            || (t.producer_epoch == 0 && t.producer_id != self.producer_id);
        match to_state {
            // From InitProducerId.
            Empty => {
                (self.producer_epoch == t.producer_epoch || epoch_bump)
                    && t.topic_partitions.is_empty()
                    && t.txn_start_timestamp_ms == -1
            }
            // From AddPartitions: the partitions only grow.
            Ongoing => {
                same_producer
                    && self.topic_partitions.is_subset(&t.topic_partitions)
                    && self.txn_timeout_ms == t.txn_timeout_ms
            }
            // From EndTxn; under version 2 with the epoch bumped, and from
            // Empty or Complete* for an empty abort.
            PrepareAbort | PrepareCommit => {
                let bumped = t.bumps_epoch_of(self);
                let empty_abort = bumped && self.state != Ongoing;
                (same_producer || bumped)
                    && self.topic_partitions == t.topic_partitions
                    && self.txn_timeout_ms == t.txn_timeout_ms
                    && (empty_abort || self.txn_start_timestamp_ms == t.txn_start_timestamp_ms)
            }
            // From the markers being written (under version 2, possibly to
            // the next producer id).
            CompleteAbort | CompleteCommit => {
                let rotated = self.next_producer_id != NO_PRODUCER_ID
                    && t.producer_id == self.next_producer_id
                    && t.producer_epoch == 0;
                (same_producer || rotated)
                    && self.txn_timeout_ms == t.txn_timeout_ms
                    && t.txn_start_timestamp_ms != -1
            }
            // A fence is always followed by PrepareAbort, never completed;
            // Dead is handled by the caller.
            PrepareEpochFence | Dead => false,
        }
    }
}

#[cfg(test)]
#[path = "transaction_metadata_tests.rs"]
mod tests;
