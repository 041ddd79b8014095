//! A log's transactional side: the aborted transactions of each segment's
//! transaction index (appended as markers land, collected for
//! read_committed fetches as Kafka's `collectAbortedTransactions`), and the
//! replay of batches, markers included, that rebuilds producer state.

use std::io;

use super::super::batch::BatchHeader;
use super::super::control_batch::{parse_end_txn_marker, EndTxnMarker};
use super::super::producer_state::ProducerStateManager;
use super::super::segment::LogSegment;
use super::super::transaction_index::AbortedTxn;
use super::Log;

/// A control batch larger than this holds no marker Kafka writes (78
/// bytes); it is not read.
const MAX_MARKER_BATCH_BYTES: usize = 4096;

impl Log {
    /// Adds an aborted transaction to the transaction index of the segment
    /// holding its marker (`txn.last_offset`, normally the active
    /// segment), once the marker is appended or staged. A staged marker's
    /// entry waits for its write to land (`complete_write`): a roll may
    /// put the marker in a segment that does not exist yet. Entries must
    /// come in marker order.
    pub fn append_aborted_txn(&mut self, txn: AbortedTxn) -> io::Result<()> {
        assert!(
            txn.last_offset >= self.log_start_offset && txn.last_offset < self.next_offset(),
            "aborted transaction {txn:?} outside the log [{}, {})",
            self.log_start_offset,
            self.next_offset()
        );
        if txn.last_offset >= self.log_end_offset {
            let pending = &mut self.staging.pending_aborts;
            if let Some(last) = pending.last() {
                assert!(last.last_offset < txn.last_offset, "{txn:?} after {last:?}");
            }
            pending.push(txn);
            return Ok(());
        }
        let seg = self.segment_holding_mut(txn.last_offset);
        seg.txn_index.append(txn)?;
        seg.dirty = true;
        Ok(())
    }

    /// Indexes the pending aborts whose marker a landed write brought in.
    pub(super) fn index_landed_aborts(&mut self) -> io::Result<()> {
        let landed = self
            .staging
            .pending_aborts
            .partition_point(|t| t.last_offset < self.log_end_offset);
        if landed == 0 {
            return Ok(());
        }
        let txns: Vec<AbortedTxn> = self.staging.pending_aborts.drain(..landed).collect();
        for txn in txns {
            self.append_aborted_txn(txn)?;
        }
        Ok(())
    }

    /// `append_aborted_txn` for a transaction replayed after a restart
    /// (`replay_producer_state`): added unless its segment's index already
    /// has an entry at or after its marker (the entry was written before
    /// the restart). Returns whether it was added.
    pub fn recover_aborted_txn(&mut self, txn: AbortedTxn) -> io::Result<bool> {
        let seg = self.segment_holding_mut(txn.last_offset);
        if seg
            .txn_index
            .last_offset()
            .is_some_and(|last| last >= txn.last_offset)
        {
            return Ok(false);
        }
        self.append_aborted_txn(txn)?;
        Ok(true)
    }

    fn segment_holding_mut(&mut self, offset: i64) -> &mut LogSegment {
        self.segments
            .range_mut(..=offset)
            .next_back()
            .map(|(_, s)| s)
            .expect("an offset of the log lies in a segment")
    }

    /// Kafka's `collectAbortedTransactions`: the aborted transactions
    /// overlapping [fetch_offset, upper_bound_offset), from the segment
    /// holding `fetch_offset` on, until an index says no later one can
    /// hold more. Without aborts nothing is allocated.
    pub fn collect_aborted_txns(
        &self,
        fetch_offset: i64,
        upper_bound_offset: i64,
    ) -> Vec<AbortedTxn> {
        let mut out = Vec::new();
        let Some((&floor, _)) = self.segments.range(..=fetch_offset).next_back() else {
            return out;
        };
        for seg in self.segments.range(floor..).map(|(_, s)| s) {
            if seg
                .txn_index
                .collect_aborted(fetch_offset, upper_bound_offset, &mut out)
            {
                break;
            }
        }
        out
    }

    /// Calls `f` for every batch whose last offset is >= `from_offset`, in
    /// order (used to rebuild producer state after open), with the marker
    /// of a control batch. A control batch emptied by the cleaner is given
    /// None; one whose marker cannot be read (compressed, malformed) is
    /// logged and given None.
    pub fn for_each_batch_from(
        &self,
        from_offset: i64,
        mut f: impl FnMut(&BatchHeader, Option<EndTxnMarker>),
    ) -> io::Result<()> {
        let floor = self
            .segments
            .range(..=from_offset)
            .next_back()
            .map_or(i64::MIN, |(&b, _)| b);
        let mut buf = Vec::new();
        for seg in self.segments.range(floor..).map(|(_, s)| s) {
            let Some((mut pos, _)) = seg.translate_offset(from_offset)? else {
                continue;
            };
            while pos < seg.size_bytes() {
                let header = seg.read_header(pos)?;
                if header.last_offset() >= from_offset {
                    let marker = if header.is_control() {
                        read_marker(seg, pos, &header, &mut buf)?
                    } else {
                        None
                    };
                    f(&header, marker);
                }
                pos += header.total_size() as u64;
            }
        }
        Ok(())
    }

    /// Replays the log from `from_offset` (what `ProducerStateManager::load`
    /// returned) into `producers`, and adds back to the transaction indexes
    /// the aborted transactions replayed whose entry is missing at an
    /// index's end (a crash between a marker's write and its entry's).
    pub fn replay_producer_state(
        &mut self,
        producers: &mut ProducerStateManager,
        from_offset: i64,
    ) -> io::Result<()> {
        let mut aborted = Vec::new();
        self.for_each_batch_from(from_offset, |header, marker| {
            let Some(done) = producers.replay(header, marker) else {
                return;
            };
            if done.is_aborted {
                aborted.push(AbortedTxn {
                    producer_id: done.producer_id,
                    first_offset: done.first_offset,
                    last_offset: done.last_offset,
                    last_stable_offset: producers.last_stable_offset(&done),
                });
            }
        })?;
        for txn in aborted {
            if self.recover_aborted_txn(txn)? {
                log::info!(
                    "{}: restored aborted transaction {txn:?}",
                    self.dir.display()
                );
            }
        }
        Ok(())
    }
}

/// The marker of the control batch at `pos` of `seg`, read into `buf`.
fn read_marker(
    seg: &LogSegment,
    pos: u64,
    header: &BatchHeader,
    buf: &mut Vec<u8>,
) -> io::Result<Option<EndTxnMarker>> {
    if header.records_count == 0 {
        return Ok(None); // emptied by the cleaner: its transaction is gone
    }
    let size = header.total_size();
    if size > MAX_MARKER_BATCH_BYTES {
        log::warn!(
            "{}: control batch of {size} bytes at {pos} read as no marker",
            seg.log.path().display()
        );
        return Ok(None);
    }
    buf.resize(size, 0);
    seg.log.read_exact_at(buf, pos)?;
    match parse_end_txn_marker(buf) {
        Ok(marker) => Ok(Some(marker)),
        Err(e) => {
            log::warn!(
                "{}: control batch at offset {}: {e}",
                seg.log.path().display(),
                header.base_offset
            );
            Ok(None)
        }
    }
}

#[cfg(test)]
#[path = "log_txn_tests.rs"]
mod tests;
