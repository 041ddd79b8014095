//! The transactional half of Kafka 3.9's `ProducerStateManager` and
//! `ProducerAppendInfo`: transactions open at a producer's first
//! transactional batch and end at its marker; the open ones
//! (`ongoing_txns`) and the decided ones the high watermark has not yet
//! passed (`unreplicated_txns`) hold back the last stable offset, and each
//! abort gets a transaction index entry with the LSO at its marker.

use super::super::batch::BatchHeader;
use super::super::control_batch::{ControlRecordType, EndTxnMarker};
use super::{ProducerStateEntry, ProducerStateError, ProducerStateManager, NO_PRODUCER_EPOCH};

/// A transaction its marker ended (Kafka's `CompletedTxn`): its first
/// offset and its marker's offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CompletedTxn {
    pub producer_id: i64,
    pub first_offset: i64,
    pub last_offset: i64,
    pub is_aborted: bool,
}

impl ProducerStateManager {
    /// Checks a marker batch the broker is about to append for a
    /// coordinator (Kafka's `appendEndTxnMarker` checks for the
    /// COORDINATOR origin, transaction version 0/1): a producer epoch
    /// older than the producer's is INVALID_PRODUCER_EPOCH, a coordinator
    /// epoch older than its last marker's is TRANSACTION_COORDINATOR_FENCED.
    /// An unknown producer passes, as does a batch without a producer id.
    pub fn check_marker(
        &self,
        header: &BatchHeader,
        marker: &EndTxnMarker,
    ) -> Result<(), ProducerStateError> {
        debug_assert!(header.is_control(), "markers are control batches");
        if !header.has_producer_id() {
            return Ok(());
        }
        let pid = header.producer_id;
        let entry = self.producers.get(&pid);
        let current_epoch = entry.map_or(NO_PRODUCER_EPOCH, |e| e.producer_epoch);
        if header.producer_epoch < current_epoch {
            return Err(ProducerStateError::InvalidProducerEpoch(format!(
                "epoch of producer {pid} is {}, smaller than the last seen epoch {current_epoch}",
                header.producer_epoch
            )));
        }
        let coordinator_epoch = entry.map_or(-1, |e| e.coordinator_epoch);
        if marker.coordinator_epoch < coordinator_epoch {
            return Err(ProducerStateError::TransactionCoordinatorFenced(format!(
                "invalid coordinator epoch for producer {pid}: {} (zombie), {coordinator_epoch} (current)",
                marker.coordinator_epoch
            )));
        }
        Ok(())
    }

    /// Records an appended marker batch (offsets assigned, `check_marker`
    /// passed): the producer takes the batch's epoch and the marker's
    /// coordinator epoch, its last timestamp becomes `timestamp_ms` (Kafka
    /// uses the marker record's timestamp), and its open transaction, if
    /// any, ends: it is returned (first offset, the marker's offset) and
    /// waits in `unreplicated_txns` for the high watermark. A marker for a
    /// producer without an open transaction returns None, as Kafka's: it
    /// affects neither the LSO nor the transaction index.
    pub fn update_marker(
        &mut self,
        header: &BatchHeader,
        marker: &EndTxnMarker,
        timestamp_ms: i64,
    ) -> Option<CompletedTxn> {
        debug_assert!(header.is_control(), "markers are control batches");
        self.advance_map_end(header);
        if !header.has_producer_id() {
            return None;
        }
        let pid = header.producer_id;
        let entry = self
            .producers
            .entry(pid)
            .or_insert_with(|| ProducerStateEntry::empty(pid));
        let completed = entry
            .current_txn_first_offset
            .map(|first_offset| CompletedTxn {
                producer_id: pid,
                first_offset,
                last_offset: header.base_offset,
                is_aborted: marker.control_type == ControlRecordType::Abort,
            });
        entry.maybe_update_epoch(header.producer_epoch);
        entry.current_txn_first_offset = None;
        entry.coordinator_epoch = marker.coordinator_epoch;
        entry.last_timestamp_ms = timestamp_ms;
        if let Some(txn) = completed {
            self.complete_txn(txn);
        }
        completed
    }

    /// Replays a batch read back from the log (recovery, a follower's
    /// rebuild): no checks, like Kafka's REPLICATION origin. A control
    /// batch takes its `marker` (see `Log::for_each_batch_from`); without
    /// one (an empty or unreadable control batch) only the map end offset
    /// moves, as Kafka skips an empty one. Returns the transaction a
    /// marker ended: an aborted one needs its transaction index entry.
    pub fn replay(
        &mut self,
        header: &BatchHeader,
        marker: Option<EndTxnMarker>,
    ) -> Option<CompletedTxn> {
        if !header.is_control() {
            debug_assert!(marker.is_none(), "a data batch holds no marker");
            self.apply(header, header.max_timestamp);
            return None;
        }
        match marker {
            Some(m) => self.update_marker(header, &m, header.max_timestamp),
            None => {
                self.advance_map_end(header);
                None
            }
        }
    }

    /// Kafka's `lastStableOffset(completedTxn)`: the LSO once `completed`
    /// is decided, for its transaction index entry: the first offset of
    /// the oldest transaction of another producer still open, else the
    /// offset after its marker.
    pub fn last_stable_offset(&self, completed: &CompletedTxn) -> i64 {
        self.ongoing_txns
            .iter()
            .find(|(_, &pid)| pid != completed.producer_id)
            .map_or(completed.last_offset + 1, |(&first, _)| first)
    }

    /// Kafka's `firstUnstableOffset`: the first offset of the oldest
    /// transaction open or decided above the high watermark; the LSO is
    /// this (if any) bounded by the high watermark.
    pub fn first_unstable_offset(&self) -> Option<i64> {
        let open = self.ongoing_txns.keys().next();
        let unreplicated = self.unreplicated_txns.keys().next();
        match (open, unreplicated) {
            (Some(&a), Some(&b)) => Some(a.min(b)),
            (a, b) => a.or(b).copied(),
        }
    }

    /// Kafka's `onHighWatermarkUpdated`: decided transactions whose marker
    /// is below `high_watermark` no longer hold back the LSO.
    pub fn on_high_watermark_updated(&mut self, high_watermark: i64) {
        self.remove_unreplicated_txns(high_watermark);
    }

    /// Kafka's `onLogStartOffsetIncremented`: decided transactions whose
    /// marker is below the new log start offset are forgotten, and the map
    /// end offset is at least the log start offset.
    pub fn on_log_start_offset_incremented(&mut self, log_start_offset: i64) {
        self.remove_unreplicated_txns(log_start_offset);
        self.map_end_offset = self.map_end_offset.max(log_start_offset);
    }

    fn remove_unreplicated_txns(&mut self, offset: i64) {
        if !self.unreplicated_txns.is_empty() {
            self.unreplicated_txns
                .retain(|_, t| t.last_offset >= offset);
        }
    }

    /// Open transactions as (first offset, producer id), oldest first.
    pub fn ongoing_txns(&self) -> impl Iterator<Item = (i64, i64)> + '_ {
        self.ongoing_txns.iter().map(|(&first, &pid)| (first, pid))
    }

    /// Decided transactions the high watermark has not passed, oldest first.
    pub fn unreplicated_txns(&self) -> impl Iterator<Item = &CompletedTxn> {
        self.unreplicated_txns.values()
    }

    /// `producer_id` opened a transaction at `first_offset`.
    pub(super) fn start_txn(&mut self, producer_id: i64, first_offset: i64) {
        if let Some(other) = self.ongoing_txns.insert(first_offset, producer_id) {
            // Two transactions cannot start at one offset: only a corrupt
            // snapshot gets here.
            log::warn!(
                "{}: transactions of producers {other} and {producer_id} both start at offset {first_offset}",
                self.dir.display()
            );
        }
    }

    /// Kafka's `completeTxn`: from open to decided.
    fn complete_txn(&mut self, txn: CompletedTxn) {
        match self.ongoing_txns.remove(&txn.first_offset) {
            Some(pid) if pid == txn.producer_id => {}
            other => {
                // Kafka throws; the map and the entries disagree only after
                // a corrupt snapshot (see `start_txn`), so keep going.
                log::warn!(
                    "{}: completing {txn:?}, which is not open (found {other:?})",
                    self.dir.display()
                );
                if let Some(pid) = other {
                    self.ongoing_txns.insert(txn.first_offset, pid);
                }
            }
        }
        self.unreplicated_txns.insert(txn.first_offset, txn);
    }

    /// A marker `update` was given without its contents (see `update`):
    /// the producer's transaction ends, neither committed nor aborted.
    pub(super) fn end_txn_unrecorded(&mut self, h: &BatchHeader, timestamp_ms: i64) {
        let pid = h.producer_id;
        log::warn!(
            "{}: marker of producer {pid} at offset {} recorded without its contents",
            self.dir.display(),
            h.base_offset
        );
        let entry = self
            .producers
            .entry(pid)
            .or_insert_with(|| ProducerStateEntry::empty(pid));
        entry.maybe_update_epoch(h.producer_epoch);
        entry.last_timestamp_ms = timestamp_ms;
        if let Some(first) = entry.current_txn_first_offset.take() {
            if self.ongoing_txns.get(&first) == Some(&pid) {
                self.ongoing_txns.remove(&first);
            }
        }
    }
}

#[cfg(test)]
#[path = "producer_txn_tests.rs"]
mod tests;
