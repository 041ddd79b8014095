//! A partition's transactions (Kafka's UnifiedLog and ProducerStateManager,
//! transactional part): the transaction markers the coordinator has a
//! leader write, the aborted transactions they record in the segments'
//! `.txnindex` files, and the last stable offset (LSO <= HW <= LEO) below
//! which read_committed consumers read.

use bytes::Bytes;

use kshard_shards::log::batch::{BatchHeader, BatchIter};
use kshard_shards::log::control_batch::{
    build_end_txn_marker_batch, parse_end_txn_marker, ControlRecordType, EndTxnMarker,
};
use kshard_shards::log::producer_state::CompletedTxn;
use kshard_shards::log::transaction_index::AbortedTxn;
use kshard_shards::log::validate::{ValidationConfig, Validator};

use super::{AppendError, AppendResult, Partition, PartitionRead};
use crate::protocol::errors;
use crate::protocol::errors::ErrorCode;
use crate::protocol::fetch_encoder::AbortedTransaction;
use crate::replica::TxnMarker;

impl Partition {
    /// Kafka's `lastStableOffset`: the first offset of the oldest
    /// transaction not yet decided and replicated, if below the high
    /// watermark; else the high watermark.
    pub fn last_stable_offset(&self) -> i64 {
        let hw = self.high_watermark();
        match self.producer_state.first_unstable_offset() {
            Some(offset) if offset < hw => offset,
            _ => hw,
        }
    }

    /// Appends a coordinator's batches (Kafka's origin COORDINATOR): its
    /// transactional offset commits carry a producer id whose epoch is
    /// checked, but not their sequences; written now, never staged.
    pub fn append_records_as_coordinator(
        &mut self,
        records: &Bytes,
        validator: &mut Validator,
        now_ms: i64,
    ) -> Result<AppendResult, AppendError> {
        for (_, h, _) in BatchIter::new(records).flatten() {
            let current_epoch = self
                .producer_state
                .last_entry(h.producer_id)
                .map(|e| e.producer_epoch);
            if h.has_producer_id() && current_epoch.is_some_and(|e| h.producer_epoch < e) {
                return Err(AppendError {
                    error_code: errors::INVALID_PRODUCER_EPOCH,
                    message: format!(
                        "epoch of producer {} is {}, smaller than the last seen epoch {}",
                        h.producer_id,
                        h.producer_epoch,
                        current_epoch.unwrap_or_default()
                    ),
                    record_errors: Vec::new(),
                });
            }
        }
        let validation = self.validation;
        let info = self.validate_and_append(
            records,
            validator,
            now_ms,
            false,
            &validation,
            |producers, h| {
                if h.has_producer_id() {
                    producers.update(h, now_ms);
                }
            },
        )?;
        Ok(AppendResult {
            base_offset: info.first_offset,
            log_append_time_ms: info.log_append_time_ms,
            log_start_offset: self.log.log_start_offset(),
        })
    }

    /// Appends a transaction marker as the coordinator asked (Kafka's
    /// append with origin COORDINATOR); returns the offset after it.
    pub fn append_txn_marker(
        &mut self,
        marker: &TxnMarker,
        validator: &mut Validator,
        now_ms: i64,
    ) -> Result<i64, AppendError> {
        if let Some(reason) = self.log.write_failure() {
            return Err(AppendError {
                error_code: errors::KAFKA_STORAGE_ERROR,
                message: format!("the log stopped after a failed write: {reason}"),
                record_errors: Vec::new(),
            });
        }
        let end_marker = EndTxnMarker {
            control_type: if marker.commit {
                ControlRecordType::Commit
            } else {
                ControlRecordType::Abort
            },
            coordinator_epoch: marker.coordinator_epoch,
        };
        let batch = build_end_txn_marker_batch(
            marker.producer_id,
            marker.producer_epoch,
            end_marker,
            now_ms,
        );
        let header = BatchHeader::parse(&batch).expect("a marker batch built here parses");
        if let Err(e) = self.producer_state.check_marker(&header, &end_marker) {
            return Err(AppendError {
                error_code: ErrorCode::from_wire(e.error_code()),
                message: e.to_string(),
                record_errors: Vec::new(),
            });
        }
        let validation = ValidationConfig {
            allow_control_batches: true,
            ..self.validation
        };
        let mut completed = None;
        let info = self.validate_and_append(
            &Bytes::from(batch),
            validator,
            now_ms,
            true,
            &validation,
            |producers, h| completed = producers.update_marker(h, &end_marker, now_ms),
        )?;
        if let Some(done) = completed {
            self.record_completed_txn(done)
                .map_err(|e| self.storage_error("writing the transaction index", &e))?;
        }
        Ok(info.last_offset + 1)
    }

    /// An aborted transaction goes into the transaction index with the
    /// last stable offset at its end (Kafka's updateTxnIndex).
    fn record_completed_txn(&mut self, done: CompletedTxn) -> std::io::Result<()> {
        if !done.is_aborted {
            return Ok(());
        }
        let last_stable_offset = self.producer_state.last_stable_offset(&done);
        self.log.append_aborted_txn(AbortedTxn {
            producer_id: done.producer_id,
            first_offset: done.first_offset,
            last_offset: done.last_offset,
            last_stable_offset,
        })
    }

    /// Updates the producer state with batches a follower appended (as
    /// they are, markers included).
    pub(crate) fn track_appended_batches(
        &mut self,
        appended: &[u8],
        now_ms: i64,
    ) -> std::io::Result<()> {
        for (_, h, batch) in BatchIter::new(appended).flatten() {
            if !h.has_producer_id() {
                continue;
            }
            if !h.is_control() {
                self.producer_state.update(&h, now_ms);
                continue;
            }
            match parse_end_txn_marker(batch) {
                // As Kafka's REPLICATION origin: no checks.
                Ok(marker) => {
                    if let Some(done) = self.producer_state.replay(&h, Some(marker)) {
                        self.record_completed_txn(done)?;
                    }
                }
                Err(e) => log::warn!(
                    "{}-{}: control batch at {} is not a transaction marker: {e}",
                    self.topic,
                    self.partition,
                    h.base_offset
                ),
            }
        }
        Ok(())
    }

    /// Reads for a read_committed consumer: whole batches below the last
    /// stable offset, with the aborted transactions among them.
    pub fn read_committed(
        &self,
        fetch_offset: i64,
        max_bytes: u32,
        min_one_batch: bool,
    ) -> (PartitionRead, Vec<AbortedTransaction>) {
        let lso = self.last_stable_offset();
        let read = self.read_for_consumer(fetch_offset, max_bytes, lso, min_one_batch);
        if read.slice.is_none() {
            return (read, Vec::new());
        }
        // A read returns batches of one segment: the next segment's base
        // bounds it (Kafka's fallback for fetchUpperBoundOffset).
        let upper_bound_offset = self
            .log
            .segment_after(fetch_offset)
            .map_or(lso, |s| s.base_offset().min(lso));
        (
            read,
            self.aborted_transactions(fetch_offset, upper_bound_offset),
        )
    }

    /// The aborted transactions a read_committed fetch at `fetch_offset`
    /// must be told about, up to `upper_bound_offset` (Kafka's
    /// collectAbortedTransactions), as (producer id, first offset).
    pub fn aborted_transactions(
        &self,
        fetch_offset: i64,
        upper_bound_offset: i64,
    ) -> Vec<AbortedTransaction> {
        self.log
            .collect_aborted_txns(fetch_offset, upper_bound_offset)
            .into_iter()
            .map(|t| AbortedTransaction {
                producer_id: t.producer_id,
                first_offset: t.first_offset,
            })
            .collect()
    }
}
