//! The cleaner and transactions: Kafka's `CleanedTransactionMetadata`, and
//! the last stable offset bound of Kafka's
//! `LogCleanerManager.cleanableOffsets`.
//!
//! The data batches of an aborted transaction never enter the offset map
//! and are removed when their segment is rewritten (but for the last batch
//! of an active producer, kept empty as any such batch): an aborted record
//! never becomes the value a key keeps. [`AbortedTxnWalk`] tells them
//! apart, walking the batches of a pass in offset order against the
//! aborted transactions of the transaction indexes.
//!
//! A marker outlives its transaction's data by a pass, as Kafka's does:
//! the pass that sees any batch of the transaction keeps the marker (and
//! an abort's `.txnindex` entry, so read_committed consumers still skip
//! what is left); a pass that sees none drops the entry and sets the
//! marker's delete horizon (`delete.retention.ms`, KIP-534), and the first
//! pass after it removes the marker, unless it is the last batch of an
//! active producer, which is kept empty.
//!
//! Kafka never cleans past the last stable offset, so the transactions a
//! pass sees are all decided; the partition gives it to the cleaner. A
//! caller that cannot (tests, tools) leaves it out, and the map phase then
//! tracks the transactions it sees start and not end ([`OpenTxns`]), since
//! such a transaction may still be open and abort later; if one starts
//! below the mapped end, the pass maps again up to its first offset and,
//! until the log rolls, cleans no further ([`TxnBound`]).

use std::collections::{HashMap, HashSet};

use super::{LogCleaner, Phase};
use crate::log::batch::BatchHeader;
use crate::log::cleaner_filter::TxnFate;
use crate::log::transaction_index::AbortedTxn;
use crate::log::Log;

/// An aborted transaction under way in the walk (Kafka's
/// `AbortedTransactionMetadata`).
#[derive(Clone, Copy, Debug)]
struct OngoingAbortedTxn {
    txn: AbortedTxn,
    data_seen: bool,
}

/// Kafka's `CleanedTransactionMetadata`: which data batches belong to an
/// aborted transaction, and which markers no data of theirs outlives.
/// Batches must be given in offset order.
#[derive(Default)]
pub(super) struct AbortedTxnWalk {
    /// Increasing first offsets; `next` is the first not yet reached.
    aborted: Vec<AbortedTxn>,
    next: usize,
    /// Producer id -> its aborted transaction under way (Kafka's
    /// `ongoingAbortedTxns`).
    ongoing_aborted: HashMap<i64, OngoingAbortedTxn>,
    /// Producers with transactional data seen and no marker yet (Kafka's
    /// `ongoingCommittedTxns`).
    ongoing_committed: HashSet<i64>,
    /// Marker offsets of every transaction in `aborted`.
    known_markers: HashSet<i64>,
}

impl AbortedTxnWalk {
    /// A walk over `aborted` (as `Log::collect_aborted_txns` returns them:
    /// in marker order, which is not first-offset order).
    pub fn new(aborted: Vec<AbortedTxn>) -> AbortedTxnWalk {
        let mut walk = AbortedTxnWalk::default();
        walk.add(aborted);
        walk
    }

    /// Adds the aborted transactions overlapping the segments `bases` of
    /// `log` (the next cleaned group), whose markers may lie in later
    /// segments. One walk serves every group of a pass, as Kafka's does, so
    /// a transaction spanning groups is seen whole.
    pub fn add_group(&mut self, log: &Log, bases: &[i64]) {
        let last = *bases.last().expect("non-empty group");
        let end = log
            .segment_after(last)
            .map_or(log.log_end_offset(), |s| s.base_offset());
        self.add(log.collect_aborted_txns(bases[0], end));
    }

    /// Adds transactions not known yet (by marker offset), keeping those not
    /// reached in first-offset order.
    fn add(&mut self, aborted: Vec<AbortedTxn>) {
        let before = self.aborted.len();
        for txn in aborted {
            if self.known_markers.insert(txn.last_offset) {
                self.aborted.push(txn);
            }
        }
        if self.aborted.len() > before {
            self.aborted[self.next..].sort_unstable_by_key(|t| t.first_offset);
        }
    }

    /// Back to the first batch.
    pub fn rewind(&mut self) {
        self.next = 0;
        self.ongoing_aborted.clear();
        self.ongoing_committed.clear();
    }

    /// Kafka's `consumeAbortedTxnsUpTo`.
    fn consume_up_to(&mut self, offset: i64) {
        while let Some(&txn) = self.aborted.get(self.next) {
            if txn.first_offset > offset {
                break;
            }
            let ongoing = OngoingAbortedTxn {
                txn,
                data_seen: false,
            };
            self.ongoing_aborted.insert(txn.producer_id, ongoing);
            self.next += 1;
        }
    }

    /// Kafka's `onBatchRead` and `onControlBatchRead`. The range of an
    /// aborted transaction ends at its marker, known by its offset from
    /// the index entry, so the marker need not be parsed: a control batch
    /// at that offset is the abort marker, any other ends a commit (and a
    /// bad marker cannot make the producer's next transaction look
    /// aborted).
    pub fn on_batch_read(&mut self, header: &BatchHeader) -> TxnFate {
        self.consume_up_to(header.last_offset());
        if header.is_control() {
            return self.on_control_batch_read(header);
        }
        if !header.has_producer_id() || !header.is_transactional() {
            return TxnFate::Data;
        }
        let pid = header.producer_id;
        if let Some(ongoing) = self.ongoing_aborted.get_mut(&pid) {
            if header.last_offset() < ongoing.txn.last_offset {
                ongoing.data_seen = true;
                return TxnFate::AbortedData;
            }
            // Past its marker, which was not read: the range ends anyway.
            self.ongoing_aborted.remove(&pid);
        }
        self.ongoing_committed.insert(pid);
        TxnFate::Data
    }

    fn on_control_batch_read(&mut self, header: &BatchHeader) -> TxnFate {
        let pid = header.producer_id;
        if header.records_count == 0 {
            // Emptied by an earlier pass (kept only as a producer's last
            // batch): nothing of it is left to keep.
            return TxnFate::Marker {
                removable: true,
                keeps_entry: None,
            };
        }
        let aborted = self
            .ongoing_aborted
            .get(&pid)
            .is_some_and(|o| o.txn.last_offset == header.base_offset);
        if aborted {
            let ongoing = self.ongoing_aborted.remove(&pid).expect("checked");
            // A commit cannot be under way inside an aborted transaction.
            self.ongoing_committed.remove(&pid);
            return TxnFate::Marker {
                removable: !ongoing.data_seen,
                keeps_entry: ongoing.data_seen.then_some(ongoing.txn),
            };
        }
        TxnFate::Marker {
            removable: !self.ongoing_committed.remove(&pid),
            keeps_entry: None,
        }
    }
}

/// Transactions the map phase saw start and not end: each producer's first
/// transactional data batch at or after `from_offset` since its last
/// control batch.
pub(super) struct OpenTxns {
    from_offset: i64,
    first_offsets: HashMap<i64, i64>,
}

impl OpenTxns {
    pub fn new(from_offset: i64) -> OpenTxns {
        OpenTxns {
            from_offset,
            first_offsets: HashMap::new(),
        }
    }

    pub fn on_batch_read(&mut self, header: &BatchHeader) {
        if !header.has_producer_id() {
            return;
        }
        if header.is_control() {
            self.first_offsets.remove(&header.producer_id);
        } else if header.is_transactional() && header.last_offset() >= self.from_offset {
            self.first_offsets
                .entry(header.producer_id)
                .or_insert(header.base_offset);
        }
    }

    fn earliest_first_offset(&self) -> Option<i64> {
        self.first_offsets.values().min().copied()
    }
}

/// The map phase's view of transactions.
pub(super) struct MapTxns {
    pub walk: AbortedTxnWalk,
    /// None once the pass is bounded by an open transaction (or mapping
    /// again for another reason): the first mapping saw every marker.
    pub open: Option<OpenTxns>,
}

impl MapTxns {
    /// `track_open`: the pass was not bounded by the last stable offset, so
    /// it must look for transactions it sees start and not end.
    pub fn new(
        log: &Log,
        first_dirty_offset: i64,
        first_uncleanable_offset: i64,
        track_open: bool,
    ) -> MapTxns {
        MapTxns {
            walk: AbortedTxnWalk::new(
                log.collect_aborted_txns(first_dirty_offset, first_uncleanable_offset),
            ),
            open: track_open.then(|| OpenTxns::new(first_dirty_offset)),
        }
    }

    /// True if the batch is aborted data: its keys stay out of the map.
    pub fn on_batch_read(&mut self, header: &BatchHeader) -> bool {
        if let Some(open) = &mut self.open {
            open.on_batch_read(header);
        }
        self.walk.on_batch_read(header) == TxnFate::AbortedData
    }
}

/// A bound the last pass over a log put on its cleanable section: a
/// transaction starting at `first_uncleanable_offset` was not seen ending.
/// Its marker can only land in the active segment, so the bound holds
/// until the log rolls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct TxnBound {
    pub active_base_offset: i64,
    pub first_uncleanable_offset: i64,
}

impl LogCleaner {
    /// Kafka's bound on the cleanable section: the last stable offset when
    /// the caller knows it, else the bound a previous pass put on it.
    pub(super) fn bound(&self, log: &Log, last_stable_offset: Option<i64>) -> Option<i64> {
        last_stable_offset.or_else(|| self.txn_bound(log))
    }

    /// The bound a previous pass put on `log`'s cleanable section, if the
    /// log has not rolled since.
    fn txn_bound(&self, log: &Log) -> Option<i64> {
        self.txn_bounds
            .get(log.dir())
            .filter(|b| b.active_base_offset == log.active_base_offset())
            .map(|b| b.first_uncleanable_offset)
    }

    /// At the end of the map phase (`map_full` if it stopped for want of
    /// room): if a transaction the pass saw start and not end starts below
    /// the mapped end, the pass maps again up to its first offset, and
    /// the log is bounded there until it rolls. Returns whether it does.
    pub(super) fn bound_by_open_txns(&mut self, log: &Log, map_full: bool) -> bool {
        let pass = self.pass.as_mut().expect("in progress");
        let Some(open) = pass.map_txns.open.take() else {
            return false;
        };
        let Some(first) = open
            .earliest_first_offset()
            .filter(|&f| f < pass.mapped_end)
        else {
            return false;
        };
        // Tracked from the first dirty offset; only a checkpoint inside a
        // batch (from disk) can put a batch's base below it.
        let first_dirty = pass.stats.first_dirty_offset;
        let first = first.max(first_dirty);
        // A full map stopped before the marker may be: the next pass,
        // starting at `first`, looks again. But when nothing can be mapped
        // the pass would only repeat itself: wait for a roll.
        if !map_full || first == first_dirty {
            let bound = TxnBound {
                active_base_offset: log.active_base_offset(),
                first_uncleanable_offset: first,
            };
            self.txn_bounds.insert(pass.dir.clone(), bound);
        }
        log::info!(
            "{}: cleaning up to offset {first}, where a transaction not seen ending starts",
            pass.dir.display()
        );
        pass.first_uncleanable = first;
        pass.mapped_end = first_dirty;
        pass.map_txns.walk.rewind();
        pass.phase = Phase::BuildMap {
            segment: log
                .segment_for(first_dirty)
                .map_or(first_dirty, |s| s.base_offset()),
            position: 0,
        };
        self.map.as_mut().expect("made by start").clear();
        true
    }
}

#[cfg(test)]
#[path = "cleaner_txn_tests.rs"]
mod tests;
