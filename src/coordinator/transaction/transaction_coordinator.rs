//! Kafka's TransactionCoordinator on the controller shard: InitProducerId
//! for transactional ids, AddPartitionsToTxn, AddOffsetsToTxn and EndTxn,
//! the abort of timed-out transactions, and the writes of the transaction
//! log (Kafka's appendTransactionToLog). Each change is prepared on the
//! id's metadata (its pending state set, so concurrent requests get
//! CONCURRENT_TRANSACTIONS), written to `__transaction_state` and
//! completed once replicated. An EndTxn is answered once its
//! PrepareCommit/PrepareAbort is durable; `marker_channel` then writes the
//! markers and the Complete state.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::rc::Rc;

use kshard_shards::log::records::BatchBuilder;

use super::transaction_metadata::{
    IllegalStateError, TopicPartition, TransactionMetadata, TransactionState, TxnTransitMetadata,
    TRANSACTION_VERSION_2,
};
use super::transaction_state_manager::TransactionStateManager;
use super::txn_log_codec::{encode_key, encode_value};
use super::{TxnConfig, TRANSACTION_STATE_TOPIC};
use crate::admin::TopicAdmin;
use crate::protocol::errors;
use crate::protocol::errors::ErrorCode;
use crate::replica::{ProducePart, ReplicaManager, TxnVerification};
use crate::router::{Router, ShardRequest, ShardResponse, CONTROLLER_SHARD};
use crate::util::now_ms;

const NO_PRODUCER_ID: i64 = -1;
const NO_PRODUCER_EPOCH: i16 = -1;

/// A producer id and epoch (Kafka's ProducerIdAndEpoch).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProducerIdAndEpoch {
    pub producer_id: i64,
    pub epoch: i16,
}

/// InitProducerId's answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InitProducerIdResult {
    pub error: ErrorCode,
    pub producer_id: i64,
    pub producer_epoch: i16,
}

impl InitProducerIdResult {
    pub fn failed(error: ErrorCode) -> Self {
        debug_assert!(!error.is_none());
        InitProducerIdResult {
            error,
            producer_id: NO_PRODUCER_ID,
            producer_epoch: NO_PRODUCER_EPOCH,
        }
    }
}

/// EndTxn's answer: under transaction version 2 the producer id and epoch
/// the client continues with (-1 otherwise, and on an error).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EndTxnResult {
    pub error: ErrorCode,
    pub producer_id: i64,
    pub producer_epoch: i16,
}

impl EndTxnResult {
    pub fn failed(error: ErrorCode) -> Self {
        EndTxnResult {
            error,
            producer_id: NO_PRODUCER_ID,
            producer_epoch: NO_PRODUCER_EPOCH,
        }
    }
}

/// COMMIT or ABORT (Kafka's TransactionResult).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransactionResult {
    Commit,
    Abort,
}

/// Who ends a transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EndTxnOrigin {
    /// EndTxn v0-4: the epoch must match and stays.
    Client,
    /// EndTxn v5 (transaction version 2): the epoch is bumped.
    ClientVersion2,
    /// The coordinator's abort after fencing the producer (InitProducerId
    /// during a transaction, or its timeout): the fenced epoch goes out.
    Coordinator,
}

pub struct TransactionCoordinator {
    pub(super) state: RefCell<TransactionStateManager>,
    pub(super) config: TxnConfig,
    pub(super) replica_manager: Rc<ReplicaManager>,
    pub(super) admin: Rc<TopicAdmin>,
    pub(super) router: Rc<Router>,
}

/// Kafka throws IllegalStateException where a transition is impossible; the
/// request gets UNKNOWN_SERVER_ERROR, as Kafka's handler answers it.
pub(super) fn illegal_state(transactional_id: &str, e: &IllegalStateError) -> ErrorCode {
    log::error!("transactional id {transactional_id}: {}", e.0);
    e.error_code()
}

/// Kafka's mapping of a transaction-log append error (appendTransactionToLog).
fn map_append_error(code: ErrorCode) -> ErrorCode {
    match code {
        errors::UNKNOWN_TOPIC_OR_PARTITION
        | errors::NOT_ENOUGH_REPLICAS
        | errors::NOT_ENOUGH_REPLICAS_AFTER_APPEND
        | errors::REQUEST_TIMED_OUT => errors::COORDINATOR_NOT_AVAILABLE,
        errors::NOT_LEADER_OR_FOLLOWER | errors::KAFKA_STORAGE_ERROR => errors::NOT_COORDINATOR,
        errors::MESSAGE_TOO_LARGE | errors::RECORD_LIST_TOO_LARGE => errors::UNKNOWN_SERVER_ERROR,
        other => other,
    }
}

impl TransactionCoordinator {
    pub fn new(
        config: TxnConfig,
        replica_manager: Rc<ReplicaManager>,
        admin: Rc<TopicAdmin>,
        router: Rc<Router>,
    ) -> Self {
        assert_eq!(router.shard_id, CONTROLLER_SHARD);
        TransactionCoordinator {
            state: RefCell::new(TransactionStateManager::new(config.num_partitions)),
            config,
            replica_manager,
            admin,
            router,
        }
    }

    pub fn partition_for(&self, transactional_id: &str) -> i32 {
        self.state.borrow().partition_for(transactional_id)
    }

    pub(super) async fn generate_producer_id(&self) -> Result<i64, ErrorCode> {
        match self
            .router
            .run_on(CONTROLLER_SHARD, ShardRequest::AllocateProducerId)
            .await
        {
            Ok(ShardResponse::ProducerId(r)) => r,
            _ => Err(errors::COORDINATOR_NOT_AVAILABLE),
        }
    }

    /// Kafka's handleInitProducerId for a transactional id (the caller
    /// answers a missing or empty id).
    pub async fn handle_init_producer_id(
        self: &Rc<Self>,
        transactional_id: &str,
        txn_timeout_ms: i32,
        expected: Option<ProducerIdAndEpoch>,
    ) -> InitProducerIdResult {
        assert!(!transactional_id.is_empty());
        if txn_timeout_ms <= 0 || txn_timeout_ms > self.config.transaction_max_timeout_ms {
            return InitProducerIdResult::failed(errors::INVALID_TRANSACTION_TIMEOUT);
        }
        // A new id needs a producer id first; allocating it may wait.
        let known = match self.state.borrow_mut().get(transactional_id) {
            Ok(found) => found.is_some(),
            Err(e) => return InitProducerIdResult::failed(e),
        };
        if !known {
            let producer_id = match self.generate_producer_id().await {
                Ok(id) => id,
                Err(e) => return InitProducerIdResult::failed(e),
            };
            let created = TransactionMetadata::new(
                transactional_id.to_string(),
                producer_id,
                txn_timeout_ms,
                now_ms() as i64,
            );
            if let Err(e) = self.state.borrow_mut().put_if_absent(created) {
                return InitProducerIdResult::failed(e);
            }
        }
        // Epoch exhaustion needs another producer id, allocated up front.
        let needs_rotation = match self.state.borrow_mut().get(transactional_id) {
            Ok(Some((_, m))) => m.is_producer_epoch_exhausted(),
            Ok(None) => false,
            Err(e) => return InitProducerIdResult::failed(e),
        };
        let rotation_id = if needs_rotation {
            match self.generate_producer_id().await {
                Ok(id) => Some(id),
                Err(e) => return InitProducerIdResult::failed(e),
            }
        } else {
            None
        };
        let prepared =
            self.prepare_init_producer_id(transactional_id, txn_timeout_ms, expected, rotation_id);
        let (coordinator_epoch, transit) = match prepared {
            Ok(p) => p,
            Err(e) => return InitProducerIdResult::failed(e),
        };
        if transit.txn_state == TransactionState::PrepareEpochFence {
            // Abort the ongoing transaction first; the client retries and
            // gets the epoch bumped a second time.
            let e = self
                .end_transaction(
                    transactional_id,
                    transit.producer_id,
                    transit.producer_epoch,
                    TransactionResult::Abort,
                    EndTxnOrigin::Coordinator,
                )
                .await
                .error;
            let e = if e.is_none() {
                errors::CONCURRENT_TRANSACTIONS
            } else {
                e
            };
            return InitProducerIdResult::failed(e);
        }
        let (producer_id, producer_epoch) = (transit.producer_id, transit.producer_epoch);
        let e = self
            .append_transaction_to_log(transactional_id, coordinator_epoch, transit)
            .await;
        if !e.is_none() {
            return InitProducerIdResult::failed(e);
        }
        log::info!(
            "initialized transactional id {transactional_id} with producer id {producer_id} and epoch {producer_epoch} on partition {TRANSACTION_STATE_TOPIC}-{}",
            self.partition_for(transactional_id)
        );
        InitProducerIdResult {
            error: errors::NONE,
            producer_id,
            producer_epoch,
        }
    }

    /// Kafka's prepareInitProducerIdTransit.
    fn prepare_init_producer_id(
        &self,
        transactional_id: &str,
        txn_timeout_ms: i32,
        expected: Option<ProducerIdAndEpoch>,
        rotation_id: Option<i64>,
    ) -> Result<(i32, TxnTransitMetadata), ErrorCode> {
        let mut state = self.state.borrow_mut();
        let (coordinator_epoch, m) = state
            .get(transactional_id)?
            .ok_or(errors::CONCURRENT_TRANSACTIONS)?;
        let valid_expected = |p: &ProducerIdAndEpoch| {
            m.producer_epoch == NO_PRODUCER_EPOCH
                || p.producer_id == m.producer_id
                || (p.producer_id == m.last_producer_id
                    && TransactionMetadata::is_epoch_exhausted(p.epoch))
        };
        if m.pending_state.is_some() {
            return Err(errors::CONCURRENT_TRANSACTIONS);
        }
        if !expected.iter().all(valid_expected) {
            return Err(errors::PRODUCER_FENCED);
        }
        let now = now_ms() as i64;
        let transit = match m.state {
            TransactionState::PrepareAbort | TransactionState::PrepareCommit => {
                return Err(errors::CONCURRENT_TRANSACTIONS)
            }
            TransactionState::CompleteAbort
            | TransactionState::CompleteCommit
            | TransactionState::Empty => {
                let rotate = m.is_producer_epoch_exhausted()
                    && expected.is_none_or(|p| p.epoch == m.producer_epoch);
                match (rotate, rotation_id) {
                    (true, Some(new_id)) => m
                        .prepare_producer_id_rotation(
                            new_id,
                            txn_timeout_ms,
                            now,
                            expected.is_some(),
                        )
                        .map_err(|e| illegal_state(transactional_id, &e))?,
                    // The epoch ran out while the new id was allocated: retry.
                    (true, None) => return Err(errors::CONCURRENT_TRANSACTIONS),
                    (false, _) => m
                        .prepare_increment_producer_epoch(
                            txn_timeout_ms,
                            expected.map(|p| p.epoch),
                            now,
                        )
                        .map_err(|e| {
                            log::debug!("InitProducerId of {transactional_id}: {e:?}");
                            e.error_code()
                        })?,
                }
            }
            TransactionState::Ongoing => m
                .prepare_fence_producer_epoch()
                .map_err(|e| illegal_state(transactional_id, &e))?,
            TransactionState::Dead | TransactionState::PrepareEpochFence => {
                log::error!(
                    "transactional id {transactional_id} is in state {:?}, which InitProducerId never sees",
                    m.state
                );
                return Err(errors::UNKNOWN_SERVER_ERROR);
            }
        };
        Ok((coordinator_epoch, transit))
    }

    /// Kafka's handleAddPartitionsToTransaction (also AddOffsetsToTxn's
    /// `__consumer_offsets` partition, and under transaction version 2 a
    /// leader adding a Produce's or TxnOffsetCommit's partition).
    pub async fn handle_add_partitions(
        self: &Rc<Self>,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        partitions: BTreeSet<TopicPartition>,
        client_transaction_version: i16,
    ) -> ErrorCode {
        if transactional_id.is_empty() {
            return errors::INVALID_REQUEST;
        }
        let prepared = {
            let mut state = self.state.borrow_mut();
            match state.get(transactional_id) {
                Err(e) => Err(e),
                Ok(None) => Err(errors::INVALID_PRODUCER_ID_MAPPING),
                Ok(Some((coordinator_epoch, m))) => {
                    // A pending transition first: under version 2 the
                    // client may already use the next producer id.
                    if m.pending_state.is_some() {
                        Err(errors::CONCURRENT_TRANSACTIONS)
                    } else if m.producer_id != producer_id {
                        Err(errors::INVALID_PRODUCER_ID_MAPPING)
                    } else if m.producer_epoch != producer_epoch {
                        Err(errors::PRODUCER_FENCED)
                    } else if matches!(
                        m.state,
                        TransactionState::PrepareCommit | TransactionState::PrepareAbort
                    ) {
                        Err(errors::CONCURRENT_TRANSACTIONS)
                    } else if m.state == TransactionState::Ongoing
                        && partitions.is_subset(&m.topic_partitions)
                    {
                        Err(errors::NONE)
                    } else {
                        m.prepare_add_partitions(
                            &partitions,
                            now_ms() as i64,
                            client_transaction_version,
                        )
                        .map(|t| (coordinator_epoch, t))
                        .map_err(|e| illegal_state(transactional_id, &e))
                    }
                }
            }
        };
        match prepared {
            Err(e) => e,
            Ok((coordinator_epoch, transit)) => {
                self.append_transaction_to_log(transactional_id, coordinator_epoch, transit)
                    .await
            }
        }
    }

    /// AddPartitionsToTxn v4+ `verify_only` (KIP-890): whether each
    /// partition is in the producer's ongoing transaction, changing nothing.
    pub fn verify_partitions(
        &self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        partitions: &[TopicPartition],
    ) -> Vec<ErrorCode> {
        let mut state = self.state.borrow_mut();
        let found = match state.get(transactional_id) {
            Err(e) => return vec![e; partitions.len()],
            Ok(None) => return vec![errors::INVALID_PRODUCER_ID_MAPPING; partitions.len()],
            Ok(Some((_, m))) => m,
        };
        let e = if found.producer_id != producer_id {
            Some(errors::INVALID_PRODUCER_ID_MAPPING)
        } else if found.producer_epoch != producer_epoch {
            Some(errors::PRODUCER_FENCED)
        } else if found.pending_state.is_some()
            || matches!(
                found.state,
                TransactionState::PrepareCommit | TransactionState::PrepareAbort
            )
        {
            Some(errors::CONCURRENT_TRANSACTIONS)
        } else {
            None
        };
        partitions
            .iter()
            .map(|tp| match e {
                Some(e) => e,
                None if found.state == TransactionState::Ongoing
                    && found.topic_partitions.contains(tp) =>
                {
                    errors::NONE
                }
                None => errors::INVALID_TXN_STATE,
            })
            .collect()
    }

    /// Kafka's handleEndTransaction; `client_transaction_version` 2 (EndTxn
    /// v5) bumps the epoch.
    pub async fn handle_end_transaction(
        self: &Rc<Self>,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        result: TransactionResult,
        client_transaction_version: i16,
    ) -> EndTxnResult {
        let origin = if client_transaction_version >= TRANSACTION_VERSION_2 {
            EndTxnOrigin::ClientVersion2
        } else {
            EndTxnOrigin::Client
        };
        self.end_transaction(
            transactional_id,
            producer_id,
            producer_epoch,
            result,
            origin,
        )
        .await
    }

    /// Kafka's endTransaction: writes PrepareCommit/PrepareAbort, answers,
    /// then has the markers written in the background.
    pub(super) async fn end_transaction(
        self: &Rc<Self>,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        result: TransactionResult,
        origin: EndTxnOrigin,
    ) -> EndTxnResult {
        if transactional_id.is_empty() {
            return EndTxnResult::failed(errors::INVALID_REQUEST);
        }
        let prepared = match origin {
            EndTxnOrigin::ClientVersion2 => {
                self.prepare_end_transaction_v2(
                    transactional_id,
                    producer_id,
                    producer_epoch,
                    result,
                )
                .await
            }
            _ => self
                .prepare_end_transaction(
                    transactional_id,
                    producer_id,
                    producer_epoch,
                    result,
                    origin == EndTxnOrigin::Client,
                )
                .map_err(EndTxnResult::failed),
        };
        let (coordinator_epoch, transit) = match prepared {
            Ok(p) => p,
            Err(answer) => return answer,
        };
        let prepared_epoch = transit.producer_epoch;
        let e = self
            .append_transaction_to_log(transactional_id, coordinator_epoch, transit)
            .await;
        if !e.is_none() {
            log::info!(
                "not sending markers for {transactional_id}'s {result:?}: writing the transaction log failed with error {e}"
            );
            return EndTxnResult::failed(e);
        }
        // Kafka's sendTxnMarkersCallback: the Complete transition is
        // prepared now, so the id stays busy until the markers are written.
        let complete = {
            let mut state = self.state.borrow_mut();
            match state.get(transactional_id) {
                Err(e) => Err(e),
                Ok(None) => Err(errors::NOT_COORDINATOR),
                Ok(Some((epoch, _))) if epoch != coordinator_epoch => Err(errors::NOT_COORDINATOR),
                Ok(Some((_, m))) => {
                    if m.producer_id != producer_id {
                        Err(errors::INVALID_PRODUCER_ID_MAPPING)
                    } else if m.producer_epoch != prepared_epoch {
                        Err(errors::PRODUCER_FENCED)
                    } else if m.pending_state.is_some() {
                        Err(errors::CONCURRENT_TRANSACTIONS)
                    } else {
                        match (m.state, result) {
                            (TransactionState::PrepareCommit, TransactionResult::Commit)
                            | (TransactionState::PrepareAbort, TransactionResult::Abort) => {
                                let metadata = m.clone();
                                m.prepare_complete(now_ms() as i64)
                                    .map(|complete| (metadata, complete))
                                    .map_err(|e| illegal_state(transactional_id, &e))
                            }
                            _ => Err(errors::INVALID_TXN_STATE),
                        }
                    }
                }
            }
        };
        match complete {
            Err(e) => EndTxnResult::failed(e),
            Ok((metadata, complete)) => {
                let answer = EndTxnResult {
                    error: errors::NONE,
                    producer_id: complete.producer_id,
                    producer_epoch: complete.producer_epoch,
                };
                self.clone().send_markers_then_complete(
                    transactional_id.to_string(),
                    coordinator_epoch,
                    result,
                    metadata,
                    complete,
                );
                answer
            }
        }
    }

    fn prepare_end_transaction(
        &self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        result: TransactionResult,
        from_client: bool,
    ) -> Result<(i32, TxnTransitMetadata), ErrorCode> {
        let mut state = self.state.borrow_mut();
        let (coordinator_epoch, m) = state
            .get(transactional_id)?
            .ok_or(errors::INVALID_PRODUCER_ID_MAPPING)?;
        if m.producer_id != producer_id {
            return Err(errors::INVALID_PRODUCER_ID_MAPPING);
        }
        // Clients must match the epoch; the coordinator's own aborts carry
        // the fenced (bumped) epoch.
        if (from_client && producer_epoch != m.producer_epoch) || producer_epoch < m.producer_epoch
        {
            return Err(errors::PRODUCER_FENCED);
        }
        let fencing = m.pending_state == Some(TransactionState::PrepareEpochFence);
        if m.pending_state.is_some() && !fencing {
            return Err(errors::CONCURRENT_TRANSACTIONS);
        }
        let invalid = |m: &TransactionMetadata| {
            log::debug!(
                "transactional id {transactional_id} is in state {:?}; cannot {result:?}",
                m.state
            );
            Err(errors::INVALID_TXN_STATE)
        };
        match (m.state, result) {
            (TransactionState::Ongoing, _) => {
                let now = now_ms() as i64;
                let transit = match result {
                    // The fence's epoch goes out with the abort.
                    TransactionResult::Abort if fencing => {
                        m.prepare_abort_after_epoch_fence(producer_epoch, now)
                    }
                    TransactionResult::Abort => {
                        m.prepare_abort_or_commit(TransactionState::PrepareAbort, now)
                    }
                    TransactionResult::Commit => {
                        m.prepare_abort_or_commit(TransactionState::PrepareCommit, now)
                    }
                };
                transit
                    .map(|t| (coordinator_epoch, t))
                    .map_err(|e| illegal_state(transactional_id, &e))
            }
            (TransactionState::CompleteCommit, TransactionResult::Commit)
            | (TransactionState::CompleteAbort, TransactionResult::Abort) => Err(errors::NONE),
            (TransactionState::PrepareCommit, TransactionResult::Commit)
            | (TransactionState::PrepareAbort, TransactionResult::Abort) => {
                Err(errors::CONCURRENT_TRANSACTIONS)
            }
            (TransactionState::Dead | TransactionState::PrepareEpochFence, _) => {
                log::error!(
                    "transactional id {transactional_id} is in state {:?}, which EndTxn never sees",
                    m.state
                );
                Err(errors::UNKNOWN_SERVER_ERROR)
            }
            _ => invalid(m),
        }
    }

    /// Kafka's abortTimedOutTransactions: fences each timed-out producer
    /// and aborts its transaction.
    pub async fn abort_timed_out_transactions(self: &Rc<Self>) {
        let timed_out = self.state.borrow().timed_out_transactions(now_ms() as i64);
        for t in timed_out {
            let fenced = {
                let mut state = self.state.borrow_mut();
                match state.get(&t.transactional_id) {
                    Ok(Some((_, m)))
                        if m.producer_id == t.producer_id && m.pending_state.is_none() =>
                    {
                        m.prepare_fence_producer_epoch()
                            .map_err(|e| illegal_state(&t.transactional_id, &e))
                            .ok()
                    }
                    _ => None,
                }
            };
            let Some(fence) = fenced else {
                continue;
            };
            log::info!(
                "aborting transaction of {} (producer id {}, epoch {}): it passed its timeout",
                t.transactional_id,
                t.producer_id,
                t.producer_epoch
            );
            let e = self
                .end_transaction(
                    &t.transactional_id,
                    fence.producer_id,
                    fence.producer_epoch,
                    TransactionResult::Abort,
                    EndTxnOrigin::Coordinator,
                )
                .await
                .error;
            if !e.is_none() {
                // Nothing was written: the fence is dropped (Kafka keeps
                // hasFailedEpochFence; the next timeout check retries).
                if let Ok(Some((_, m))) = self.state.borrow_mut().get(&t.transactional_id) {
                    if m.pending_state == Some(TransactionState::PrepareEpochFence) {
                        m.pending_state = None;
                    }
                }
                log::warn!(
                    "aborting the timed-out transaction of {} failed: error {e}",
                    t.transactional_id
                );
            }
        }
    }

    /// Kafka's appendTransactionToLog: writes `transit` as the id's record,
    /// waits until it is replicated, then completes the transition (or
    /// clears the pending state on failure). The answer's error is Kafka's
    /// mapping of the append's.
    pub(super) async fn append_transaction_to_log(
        &self,
        transactional_id: &str,
        coordinator_epoch: i32,
        transit: TxnTransitMetadata,
    ) -> ErrorCode {
        self.append_to_log(transactional_id, coordinator_epoch, transit, false)
            .await
    }

    /// As `append_transaction_to_log`, but COORDINATOR_NOT_AVAILABLE keeps
    /// the pending state for a retry (the marker channel's completion).
    pub(super) async fn append_transaction_to_log_retrying(
        &self,
        transactional_id: &str,
        coordinator_epoch: i32,
        transit: TxnTransitMetadata,
    ) -> ErrorCode {
        self.append_to_log(transactional_id, coordinator_epoch, transit, true)
            .await
    }

    async fn append_to_log(
        &self,
        transactional_id: &str,
        coordinator_epoch: i32,
        transit: TxnTransitMetadata,
        retrying: bool,
    ) -> ErrorCode {
        let partition = self.partition_for(transactional_id);
        let key = encode_key(transactional_id);
        let value = (transit.txn_state != TransactionState::Dead)
            .then(|| encode_value(&transit.to_log_value()));
        let now = now_ms() as i64;
        let batch = BatchBuilder::new(0)
            .add(now, Some(&key), value.as_deref(), &[])
            .build();
        let part = ProducePart {
            topic: TRANSACTION_STATE_TOPIC.to_string(),
            partition,
            records: batch.into(),
            txn_verification: TxnVerification::Off,
        };
        let rm = &self.replica_manager;
        let appended = rm.append_for_coordinator(&part, coordinator_epoch, -1);
        let mut code = appended.error_code;
        if code.is_none() {
            let end_offset = rm
                .partitions()
                .partition(TRANSACTION_STATE_TOPIC, partition)
                .map(|p| p.log.next_offset())
                .expect("appended to a partition that exists");
            code = rm
                .wait_for_high_watermark(
                    TRANSACTION_STATE_TOPIC,
                    partition,
                    end_offset,
                    self.config.request_timeout_ms,
                )
                .await;
        }
        let code = map_append_error(code);
        let mut state = self.state.borrow_mut();
        match state.get(transactional_id) {
            Err(e) => e,
            Ok(None) => errors::NOT_COORDINATOR,
            Ok(Some((epoch, _))) if epoch != coordinator_epoch => errors::NOT_COORDINATOR,
            Ok(Some((_, m))) => {
                if !code.is_none() {
                    if !(retrying && code == errors::COORDINATOR_NOT_AVAILABLE) {
                        m.pending_state = None;
                    }
                    return code;
                }
                if transit.txn_state == TransactionState::Dead {
                    state.remove(transactional_id, coordinator_epoch);
                    return errors::NONE;
                }
                match m.complete_transition(&transit) {
                    Ok(()) => errors::NONE,
                    Err(e) => {
                        log::error!("transactional id {transactional_id}: {e}");
                        errors::UNKNOWN_SERVER_ERROR
                    }
                }
            }
        }
    }

    /// Kafka's removal of expired transactional ids: each idle id gets a
    /// tombstone and leaves the cache.
    pub async fn remove_expired_transactional_ids(self: &Rc<Self>) {
        let expired = self
            .state
            .borrow()
            .expired_transactional_ids(now_ms() as i64, self.config.transactional_id_expiration_ms);
        for id in expired {
            let prepared = {
                let mut state = self.state.borrow_mut();
                match state.get(&id) {
                    Ok(Some((epoch, m))) if m.pending_state.is_none() => m
                        .prepare_dead()
                        .map(|t| (epoch, t))
                        .map_err(|e| illegal_state(&id, &e))
                        .ok(),
                    _ => None,
                }
            };
            if let Some((epoch, transit)) = prepared {
                let e = self.append_transaction_to_log(&id, epoch, transit).await;
                if e.is_none() {
                    log::info!("removed expired transactional id {id}");
                }
            }
        }
    }
}
