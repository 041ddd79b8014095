//! Kafka's TransactionStateManager, its cache part: the transactional ids of
//! the `__transaction_state` partitions this broker leads, each partition
//! with the coordinator epoch (its leader epoch) it was loaded at. Loading a
//! partition replays its log into a fresh map that replaces the partition's
//! entry when complete; until then requests for its ids get
//! COORDINATOR_LOAD_IN_PROGRESS, and ids of partitions not led here get
//! NOT_COORDINATOR.

use std::collections::HashMap;

use super::transaction_metadata::{TransactionMetadata, TransactionState};
use super::txn_log_codec::TxnLogValue;
use crate::coordinator::partition_for;
use crate::protocol::errors;
use crate::protocol::errors::ErrorCode;

/// One `__transaction_state` partition led here.
struct TxnPartition {
    coordinator_epoch: i32,
    /// Set while its log is replayed: the load's id and what it found so far.
    loading: Option<Loading>,
    txns: HashMap<String, TransactionMetadata>,
}

struct Loading {
    load_id: u64,
    /// The last value per id, in log order (a tombstone removes the id).
    found: HashMap<String, TxnLogValue>,
}

/// A transaction found in a prepare state when its partition loaded: the
/// coordinator must (re)send its markers (Kafka's loading callback).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingCompletion {
    pub transactional_id: String,
    pub coordinator_epoch: i32,
}

/// A transaction past its timeout, to be aborted (Kafka's TransactionalIdAndProducerIdEpoch).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TimedOutTxn {
    pub transactional_id: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
}

pub struct TransactionStateManager {
    partitions: HashMap<i32, TxnPartition>,
    /// `__transaction_state`'s partition count (partitionFor's modulus).
    pub num_partitions: i32,
    next_load_id: u64,
}

impl TransactionStateManager {
    pub fn new(num_partitions: i32) -> Self {
        assert!(num_partitions > 0);
        TransactionStateManager {
            partitions: HashMap::new(),
            num_partitions,
            next_load_id: 1,
        }
    }

    pub fn partition_for(&self, transactional_id: &str) -> i32 {
        partition_for(transactional_id, self.num_partitions)
    }

    /// Kafka's getTransactionState: the id's coordinator epoch and metadata,
    /// None if the id is unknown; NOT_COORDINATOR if its partition is not
    /// led here, COORDINATOR_LOAD_IN_PROGRESS while it loads.
    pub fn get(
        &mut self,
        transactional_id: &str,
    ) -> Result<Option<(i32, &mut TransactionMetadata)>, ErrorCode> {
        let partition = self.partition_for(transactional_id);
        let p = self
            .partitions
            .get_mut(&partition)
            .ok_or(errors::NOT_COORDINATOR)?;
        if p.loading.is_some() {
            return Err(errors::COORDINATOR_LOAD_IN_PROGRESS);
        }
        let epoch = p.coordinator_epoch;
        Ok(p.txns.get_mut(transactional_id).map(|m| (epoch, m)))
    }

    /// Kafka's putTransactionStateIfNotExists.
    pub fn put_if_absent(
        &mut self,
        metadata: TransactionMetadata,
    ) -> Result<(i32, &mut TransactionMetadata), ErrorCode> {
        let partition = self.partition_for(&metadata.transactional_id);
        let p = self
            .partitions
            .get_mut(&partition)
            .ok_or(errors::NOT_COORDINATOR)?;
        if p.loading.is_some() {
            return Err(errors::COORDINATOR_LOAD_IN_PROGRESS);
        }
        let epoch = p.coordinator_epoch;
        let m = p
            .txns
            .entry(metadata.transactional_id.clone())
            .or_insert(metadata);
        Ok((epoch, m))
    }

    /// The coordinator epoch of the id's partition, if it is loaded here.
    pub fn coordinator_epoch_of(&self, transactional_id: &str) -> Option<i32> {
        let p = self.partitions.get(&self.partition_for(transactional_id))?;
        p.loading.is_none().then_some(p.coordinator_epoch)
    }

    /// Removes an id whose removal (tombstone) was written.
    pub fn remove(&mut self, transactional_id: &str, coordinator_epoch: i32) {
        let partition = self.partition_for(transactional_id);
        if let Some(p) = self.partitions.get_mut(&partition) {
            if p.coordinator_epoch == coordinator_epoch && p.loading.is_none() {
                p.txns.remove(transactional_id);
            }
        }
    }

    /// Becoming leader of `partition` at `coordinator_epoch`: starts a load,
    /// replacing any older state. None if a load at a newer epoch exists.
    pub fn begin_loading(&mut self, partition: i32, coordinator_epoch: i32) -> Option<u64> {
        if let Some(p) = self.partitions.get(&partition) {
            if p.coordinator_epoch > coordinator_epoch {
                return None;
            }
        }
        let load_id = self.next_load_id;
        self.next_load_id += 1;
        self.partitions.insert(
            partition,
            TxnPartition {
                coordinator_epoch,
                loading: Some(Loading {
                    load_id,
                    found: HashMap::new(),
                }),
                txns: HashMap::new(),
            },
        );
        Some(load_id)
    }

    pub fn is_loading_for(&self, partition: i32, load_id: u64) -> bool {
        self.partitions
            .get(&partition)
            .and_then(|p| p.loading.as_ref())
            .is_some_and(|l| l.load_id == load_id)
    }

    /// One record of a loading partition's log.
    pub fn load_record(
        &mut self,
        partition: i32,
        load_id: u64,
        transactional_id: String,
        value: Option<TxnLogValue>,
    ) {
        let Some(loading) = self
            .partitions
            .get_mut(&partition)
            .and_then(|p| p.loading.as_mut())
            .filter(|l| l.load_id == load_id)
        else {
            return;
        };
        match value {
            Some(v) => {
                loading.found.insert(transactional_id, v);
            }
            None => {
                loading.found.remove(&transactional_id);
            }
        }
    }

    /// The load is complete: its transactions become visible. Returns those
    /// in PrepareCommit/PrepareAbort, whose markers must be sent.
    pub fn finish_loading(&mut self, partition: i32, load_id: u64) -> Vec<PendingCompletion> {
        let Some(p) = self.partitions.get_mut(&partition) else {
            return Vec::new();
        };
        if p.loading.as_ref().is_none_or(|l| l.load_id != load_id) {
            return Vec::new();
        }
        let loading = p.loading.take().expect("checked above");
        let mut pending = Vec::new();
        for (id, value) in loading.found {
            let metadata = TransactionMetadata::from_log_value(&id, &value);
            if matches!(
                metadata.state,
                TransactionState::PrepareCommit | TransactionState::PrepareAbort
            ) {
                pending.push(PendingCompletion {
                    transactional_id: id.clone(),
                    coordinator_epoch: p.coordinator_epoch,
                });
            }
            p.txns.insert(id, metadata);
        }
        pending
    }

    /// Kafka's removeTransactionsForTxnTopicPartition: drops a partition
    /// no longer led here (only at `coordinator_epoch` or older, when given).
    /// Returns how many ids were dropped, None if nothing was loaded.
    pub fn unload(&mut self, partition: i32, coordinator_epoch: Option<i32>) -> Option<usize> {
        let p = self.partitions.get(&partition)?;
        if coordinator_epoch.is_some_and(|e| p.coordinator_epoch > e) {
            return None;
        }
        self.partitions.remove(&partition).map(|p| p.txns.len())
    }

    /// Kafka's timedOutTransactions: Ongoing transactions started more than
    /// their timeout ago, with no transition pending.
    pub fn timed_out_transactions(&self, now_ms: i64) -> Vec<TimedOutTxn> {
        let mut out = Vec::new();
        for p in self.partitions.values().filter(|p| p.loading.is_none()) {
            for m in p.txns.values() {
                let expired = m.state == TransactionState::Ongoing
                    && m.pending_state.is_none()
                    && m.txn_start_timestamp_ms + i64::from(m.txn_timeout_ms) <= now_ms;
                if expired {
                    out.push(TimedOutTxn {
                        transactional_id: m.transactional_id.clone(),
                        producer_id: m.producer_id,
                        producer_epoch: m.producer_epoch,
                    });
                }
            }
        }
        out
    }

    /// Kafka's removal of expired transactional ids: ids in Empty or
    /// Complete* whose last update is older than
    /// `transactional.id.expiration.ms`, with no transition pending.
    pub fn expired_transactional_ids(&self, now_ms: i64, expiration_ms: i64) -> Vec<String> {
        let mut out = Vec::new();
        for p in self.partitions.values().filter(|p| p.loading.is_none()) {
            for m in p.txns.values() {
                let idle = matches!(
                    m.state,
                    TransactionState::Empty
                        | TransactionState::CompleteCommit
                        | TransactionState::CompleteAbort
                ) && m.pending_state.is_none()
                    && m.txn_last_update_timestamp_ms + expiration_ms <= now_ms;
                if idle {
                    out.push(m.transactional_id.clone());
                }
            }
        }
        out
    }

    /// Every loaded transaction, for ListTransactions.
    pub fn all(&self) -> impl Iterator<Item = &TransactionMetadata> {
        self.partitions
            .values()
            .filter(|p| p.loading.is_none())
            .flat_map(|p| p.txns.values())
    }

    /// Partitions still loading (ListTransactions reports them).
    pub fn any_loading(&self) -> bool {
        self.partitions.values().any(|p| p.loading.is_some())
    }
}
