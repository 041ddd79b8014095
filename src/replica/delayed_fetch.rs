//! DelayedFetch: a long-polling fetch parked in the purgatory of every
//! shard owning one of its partitions, as Kafka's DelayedFetch: it
//! completes when the bytes readable past the fetch offsets, summed over
//! all the request's partitions (on every shard), reach `min_bytes`, when a
//! partition needs an answer at once (error, truncation, diverging epoch,
//! data on an older segment), or when `max_wait_ms` passes. It only
//! signals; the fetch handler then reads the logs again and answers.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use kshard_shards::oneshot;
use kshard_shards::timer::purgatory::DelayedOperation;

use super::{FetchPart, FetchWaitCheck, Partitions};

/// Shared by the parked parts of one fetch on every shard.
pub struct FetchWaitState {
    min_bytes: u64,
    /// Bytes readable on each shard's partitions, by shard slot.
    slots: Vec<AtomicU64>,
    /// Set once any shard completed the fetch; the others then complete at
    /// their next check instead of waiting for their expiry.
    done: AtomicBool,
}

impl FetchWaitState {
    pub fn new(min_bytes: u64, nr_slots: usize) -> Arc<Self> {
        Arc::new(FetchWaitState {
            min_bytes,
            slots: (0..nr_slots).map(|_| AtomicU64::new(0)).collect(),
            done: AtomicBool::new(false),
        })
    }

    /// Records this slot's bytes and tells whether the sum reached
    /// `min_bytes`. Sequentially consistent, so of two shards updating at
    /// once at least one sees the other's bytes.
    fn update(&self, slot: usize, bytes: u64) -> bool {
        self.slots[slot].store(bytes, Ordering::SeqCst);
        let total = self
            .slots
            .iter()
            .fold(0u64, |sum, s| sum.saturating_add(s.load(Ordering::SeqCst)));
        total >= self.min_bytes
    }

    pub fn is_done(&self) -> bool {
        self.done.load(Ordering::SeqCst)
    }
}

pub struct DelayedFetch {
    /// This shard's partitions of the fetch (offsets and limits).
    pub parts: Vec<FetchPart>,
    pub state: Arc<FetchWaitState>,
    pub slot: usize,
    /// Some until completed; `true` = ready to answer, `false` = timed out.
    pub done: Option<oneshot::Sender<bool>>,
}

impl DelayedFetch {
    /// Kafka's `tryComplete`: true when the fetch should answer now.
    fn ready(&self, partitions: &Partitions) -> bool {
        if self.state.is_done() {
            return true;
        }
        let mut bytes = 0u64;
        for part in &self.parts {
            match partitions.fetch_wait_check(part) {
                FetchWaitCheck::Complete => return true,
                FetchWaitCheck::Bytes(n) => bytes = bytes.saturating_add(n),
            }
        }
        self.state.update(self.slot, bytes)
    }
}

impl DelayedOperation<Partitions> for DelayedFetch {
    fn try_complete(&mut self, partitions: &Partitions) -> bool {
        if self.ready(partitions) || partitions.is_closing() {
            self.state.done.store(true, Ordering::SeqCst);
            if let Some(tx) = self.done.take() {
                tx.send(true);
            }
            return true;
        }
        false
    }

    fn on_expiration(&mut self, _partitions: &Partitions) {
        if let Some(tx) = self.done.take() {
            tx.send(false);
        }
    }
}
