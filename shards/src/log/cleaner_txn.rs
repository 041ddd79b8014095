//! The cleaner and transactions: Kafka's `CleanedTransactionMetadata`, and
//! in its stead the last stable offset bound of Kafka's
//! `LogCleanerManager.cleanableOffsets`.
//!
//! The data batches of an aborted transaction never enter the offset map
//! and are removed when their segment is rewritten (but for the last batch
//! of an active producer, kept empty as any such batch): an aborted record
//! never becomes the value a key keeps. [`AbortedTxnWalk`] tells them
//! apart, walking the batches in offset order against the aborted
//! transactions of the transaction indexes.
//!
//! Every control batch is kept, and so is every transaction index entry.
//! Kafka drops a marker (and its entry) once a pass finds none of its
//! transaction's data left and the marker's delete horizon has passed; a
//! kept marker is one 78-byte batch per transaction, costs nothing to
//! read_committed consumers, and needs no horizon of its own.
//!
//! Kafka never cleans past the last stable offset, so the transactions it
//! sees are all decided. kshard's cleaner is not given the LSO: the map
//! phase tracks the transactions it sees start and not end ([`OpenTxns`]),
//! since such a transaction may still be open and abort later; if one
//! starts below the mapped end, the pass maps again up to its first offset
//! and, until the log rolls, cleans no further ([`TxnBound`]).

use std::collections::HashMap;

use super::{LogCleaner, Phase};
use crate::log::batch::BatchHeader;
use crate::log::transaction_index::AbortedTxn;
use crate::log::Log;

/// Kafka's `CleanedTransactionMetadata`, without marker retention: which
/// data batches belong to an aborted transaction. Batches must be given in
/// offset order.
#[derive(Default)]
pub(super) struct AbortedTxnWalk {
    /// Increasing first offsets; `next` is the first not yet reached.
    aborted: Vec<AbortedTxn>,
    next: usize,
    /// Producer id -> marker offset of its aborted transaction under way
    /// (Kafka's `ongoingAbortedTxns`).
    ongoing: HashMap<i64, i64>,
}

impl AbortedTxnWalk {
    /// A walk over `aborted` (as `Log::collect_aborted_txns` returns them:
    /// in marker order, which is not first-offset order).
    pub fn new(mut aborted: Vec<AbortedTxn>) -> AbortedTxnWalk {
        aborted.sort_unstable_by_key(|t| t.first_offset);
        AbortedTxnWalk {
            aborted,
            next: 0,
            ongoing: HashMap::new(),
        }
    }

    /// The aborted transactions overlapping the segments `bases` of `log`
    /// (a cleaned group), whose markers may lie in later segments.
    pub fn for_group(log: &Log, bases: &[i64]) -> AbortedTxnWalk {
        let last = *bases.last().expect("non-empty group");
        let end = log
            .segment_after(last)
            .map_or(log.log_end_offset(), |s| s.base_offset());
        AbortedTxnWalk::new(log.collect_aborted_txns(bases[0], end))
    }

    /// Back to the first batch.
    pub fn rewind(&mut self) {
        self.next = 0;
        self.ongoing.clear();
    }

    /// Kafka's `consumeAbortedTxnsUpTo`.
    fn consume_up_to(&mut self, offset: i64) {
        while let Some(t) = self.aborted.get(self.next) {
            if t.first_offset > offset {
                break;
            }
            self.ongoing.insert(t.producer_id, t.last_offset);
            self.next += 1;
        }
    }

    /// Kafka's `onBatchRead` and `onControlBatchRead`: true if `header` is
    /// a data batch of an aborted transaction. The range of an aborted
    /// transaction ends at its marker, known by its offset from the index
    /// entry, so the marker need not be parsed (and a bad one cannot make
    /// the producer's next transaction look aborted).
    pub fn on_batch_read(&mut self, header: &BatchHeader) -> bool {
        let last_offset = header.last_offset();
        self.consume_up_to(last_offset);
        if self.ongoing.is_empty() || !header.has_producer_id() {
            return false;
        }
        let Some(&marker_offset) = self.ongoing.get(&header.producer_id) else {
            return false;
        };
        if last_offset >= marker_offset {
            self.ongoing.remove(&header.producer_id);
            return false;
        }
        header.is_transactional() && !header.is_control()
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
    pub fn new(log: &Log, first_dirty_offset: i64, first_uncleanable_offset: i64) -> MapTxns {
        MapTxns {
            walk: AbortedTxnWalk::new(
                log.collect_aborted_txns(first_dirty_offset, first_uncleanable_offset),
            ),
            open: Some(OpenTxns::new(first_dirty_offset)),
        }
    }

    /// True if the batch is aborted data: its keys stay out of the map.
    pub fn on_batch_read(&mut self, header: &BatchHeader) -> bool {
        if let Some(open) = &mut self.open {
            open.on_batch_read(header);
        }
        self.walk.on_batch_read(header)
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
    /// The bound a previous pass put on `log`'s cleanable section, if the
    /// log has not rolled since.
    pub(super) fn txn_bound(&self, log: &Log) -> Option<i64> {
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
