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
use crate::replica::{TxnMarker, TxnVerification, TxnVerifyPart};

/// A verification a leader handed to a transactional producer about to
/// start a transaction on it (Kafka's `VerificationStateEntry`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VerificationGuard {
    pub id: u64,
    pub producer_epoch: i16,
    pub supports_epoch_bump: bool,
}

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
        self.append_data_batches(records, validator, now_ms, false)
    }

    /// Kafka's maybeStartTransactionVerification: None when the producer's
    /// transaction is already under way here at its epoch (nothing to
    /// verify), else the guard an append verified with the coordinator
    /// must bring. An epoch below the producer's is fenced first (Kafka
    /// 4.1): a late batch of an ended transaction of version 2.
    pub fn maybe_start_txn_verification(
        &mut self,
        part: &TxnVerifyPart,
    ) -> Result<Option<u64>, ErrorCode> {
        let pid = part.producer_id;
        let current_epoch = self
            .producer_state
            .last_entry(pid)
            .map(|e| e.producer_epoch);
        if current_epoch.is_some_and(|e| part.producer_epoch < e) {
            return Err(errors::INVALID_PRODUCER_EPOCH);
        }
        if self.has_ongoing_txn(pid, part.producer_epoch) {
            return Ok(None);
        }
        let next = &mut self.next_verification_guard;
        let guard = self.txn_verifications.entry(pid).or_insert_with(|| {
            *next += 1;
            VerificationGuard {
                id: *next,
                producer_epoch: part.producer_epoch,
                supports_epoch_bump: part.supports_epoch_bump,
            }
        });
        guard.producer_epoch = guard.producer_epoch.max(part.producer_epoch);
        guard.supports_epoch_bump |= part.supports_epoch_bump;
        Ok(Some(guard.id))
    }

    /// Kafka's `hasOngoingTransaction(producerId, epoch)`.
    fn has_ongoing_txn(&self, producer_id: i64, producer_epoch: i16) -> bool {
        self.producer_state
            .last_entry(producer_id)
            .is_some_and(|e| {
                e.current_txn_first_offset.is_some() && e.producer_epoch == producer_epoch
            })
    }

    /// Whether a client's `records` may be appended: a transactional batch
    /// that would start its producer's transaction here needs the guard
    /// this partition handed out, still current (a marker clears it), so a
    /// late batch cannot open a transaction the coordinator never saw.
    pub fn check_txn_verification(
        &self,
        records: &[u8],
        verification: TxnVerification,
    ) -> Result<(), ErrorCode> {
        let TxnVerification::Checked { guard } = verification else {
            return Ok(());
        };
        for (_, h, _) in BatchIter::new(records).flatten() {
            if !h.is_transactional()
                || h.is_control()
                || self.has_ongoing_txn(h.producer_id, h.producer_epoch)
            {
                continue;
            }
            let current = self.txn_verifications.get(&h.producer_id).map(|g| g.id);
            if guard.is_none() || guard != current {
                return Err(errors::INVALID_TXN_STATE);
            }
        }
        Ok(())
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
        // The next transaction of the producer is verified afresh; but under
        // version 2 its first batch, at the marker's bumped epoch, may have
        // been handed its guard before this marker came (Kafka's
        // `isV2NextTransactionStarted`).
        let next_started = self
            .txn_verifications
            .get(&marker.producer_id)
            .is_some_and(|g| g.supports_epoch_bump && g.producer_epoch == marker.producer_epoch);
        if !next_started {
            self.txn_verifications.remove(&marker.producer_id);
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
            if h.records_count == 0 {
                // Emptied by the leader's cleaner: its transaction is gone.
                self.producer_state.replay(&h, None);
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

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use kshard_shards::log::records::BatchBuilder;
    use kshard_shards::log::validate::Validator;

    use super::*;
    use crate::replica::partition::follower::test_support::{follower_in, temp_dir, NOW_MS};

    const PID: i64 = 42;

    fn leader(name: &str) -> Partition {
        let mut p = follower_in(&temp_dir(name), 1, 0, &[]);
        p.become_leader_or_follower(1, true).unwrap();
        for write in p.leader_epoch_cache.take_queued_writes() {
            futures_lite::future::block_on(write).unwrap().unwrap();
        }
        p
    }

    fn txn_batch(seq: i32, count: usize) -> Bytes {
        let mut b = BatchBuilder::new(0)
            .producer(PID, 0, seq)
            .transactional(true);
        for i in 0..count {
            b.push(NOW_MS + i as i64, None, Some(b"v"), &[]);
        }
        Bytes::from(b.build())
    }

    fn marker(commit: bool) -> TxnMarker {
        TxnMarker {
            producer_id: PID,
            producer_epoch: 0,
            coordinator_epoch: 0,
            commit,
        }
    }

    #[test]
    fn an_open_transaction_holds_the_lso_until_its_marker() {
        let mut p = leader("txn-lso");
        let mut v = Validator::new();
        p.append_records_as_leader(&txn_batch(0, 3), &mut v, NOW_MS, false)
            .unwrap();
        p.maybe_increment_high_watermark();
        assert_eq!((p.high_watermark(), p.last_stable_offset()), (3, 0));
        let end = p.append_txn_marker(&marker(false), &mut v, NOW_MS).unwrap();
        assert_eq!(end, 4);
        p.maybe_increment_high_watermark();
        assert_eq!((p.high_watermark(), p.last_stable_offset()), (4, 4));
        // The abort is in the transaction index, for read_committed fetches.
        let aborted = p.aborted_transactions(0, 4);
        assert_eq!(aborted.len(), 1);
        assert_eq!((aborted[0].producer_id, aborted[0].first_offset), (PID, 0));
        let (read, listed) = p.read_committed(0, 1 << 20, true);
        assert!(read.slice.is_some() && listed == aborted);
    }

    #[test]
    fn a_transaction_starts_only_with_a_current_guard() {
        let mut p = leader("txn-guard");
        let mut v = Validator::new();
        let records = txn_batch(0, 1);
        let unverified = TxnVerification::Checked { guard: None };
        assert_eq!(
            p.check_txn_verification(&records, unverified),
            Err(errors::INVALID_TXN_STATE)
        );
        let guard = p.maybe_start_txn_verification(&verify(0, false)).unwrap();
        assert!(guard.is_some());
        // Asked again before appending: the same guard.
        assert_eq!(p.maybe_start_txn_verification(&verify(0, false)), Ok(guard));
        let checked = TxnVerification::Checked { guard };
        assert_eq!(p.check_txn_verification(&records, checked), Ok(()));
        // Verification is off for the coordinator's and old paths.
        assert_eq!(
            p.check_txn_verification(&records, TxnVerification::Off),
            Ok(())
        );
        p.append_records_as_leader(&records, &mut v, NOW_MS, false)
            .unwrap();
        // Under way: nothing more to verify for this producer here.
        assert_eq!(p.maybe_start_txn_verification(&verify(0, false)), Ok(None));
        assert_eq!(
            p.check_txn_verification(&txn_batch(1, 1), unverified),
            Ok(())
        );
        // The marker ends it and clears the guard: a late batch of the
        // ended transaction cannot open a new one with the old guard.
        p.append_txn_marker(&marker(true), &mut v, NOW_MS).unwrap();
        assert_eq!(
            p.check_txn_verification(&txn_batch(1, 1), checked),
            Err(errors::INVALID_TXN_STATE)
        );
        assert_ne!(p.maybe_start_txn_verification(&verify(0, false)), Ok(guard));
    }

    fn verify(producer_epoch: i16, supports_epoch_bump: bool) -> TxnVerifyPart {
        TxnVerifyPart {
            topic: "t".into(),
            partition: 0,
            producer_id: PID,
            producer_epoch,
            supports_epoch_bump,
        }
    }

    /// Transaction version 2: the next transaction's first batch, at the
    /// bumped epoch, may get its guard before the marker that bumps the
    /// epoch lands; the marker keeps it. A late batch of the ended
    /// transaction, at the old epoch, is fenced.
    #[test]
    fn version_2_guards_outlive_the_marker_that_bumps_the_epoch() {
        let mut p = leader("txn-v2-guard");
        let mut v = Validator::new();
        let first = p.maybe_start_txn_verification(&verify(0, true)).unwrap();
        let checked = TxnVerification::Checked { guard: first };
        p.check_txn_verification(&txn_batch(0, 1), checked).unwrap();
        p.append_records_as_leader(&txn_batch(0, 1), &mut v, NOW_MS, false)
            .unwrap();
        // The client got epoch 1 from EndTxn and starts its next transaction.
        let next = p.maybe_start_txn_verification(&verify(1, true)).unwrap();
        assert!(next.is_some());
        let mut bumped = marker(true);
        bumped.producer_epoch = 1;
        p.append_txn_marker(&bumped, &mut v, NOW_MS).unwrap();
        let mut b = BatchBuilder::new(0).producer(PID, 1, 0).transactional(true);
        b.push(NOW_MS, None, Some(b"v"), &[]);
        let next_batch = Bytes::from(b.build());
        let checked = TxnVerification::Checked { guard: next };
        assert_eq!(p.check_txn_verification(&next_batch, checked), Ok(()));
        p.append_records_as_leader(&next_batch, &mut v, NOW_MS, false)
            .unwrap();
        assert_eq!(
            p.maybe_start_txn_verification(&verify(0, true)),
            Err(errors::INVALID_PRODUCER_EPOCH),
            "a late batch of the ended transaction"
        );
    }

    #[test]
    fn a_stale_marker_epoch_is_refused() {
        let mut p = leader("txn-stale-marker");
        let mut v = Validator::new();
        let mut b = BatchBuilder::new(0).producer(PID, 3, 0).transactional(true);
        b.push(NOW_MS, None, Some(b"v"), &[]);
        p.append_records_as_leader(&Bytes::from(b.build()), &mut v, NOW_MS, false)
            .unwrap();
        let stale = TxnMarker {
            producer_epoch: 2,
            ..marker(true)
        };
        let e = p.append_txn_marker(&stale, &mut v, NOW_MS).unwrap_err();
        assert_eq!(e.error_code, errors::INVALID_PRODUCER_EPOCH);
    }
}
