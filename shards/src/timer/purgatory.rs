//! Kafka's DelayedOperationPurgatory for one shard: operations (DelayedProduce,
//! DelayedFetch, DelayedJoin, ...) wait until an event on one of their watch
//! keys lets them complete, or until their deadline passes.
//!
//! Single-threaded: no locks, and the caller passes both the clock and the
//! context `C` the operations need to complete (e.g. to send responses).
//! Operations get `&C`, never the purgatory, so they cannot re-enter it; an
//! operation must not reach the purgatory through `C` either (for instance
//! through a RefCell), since the purgatory is borrowed while it runs them.
//!
//! Watch lists drop completed operations lazily, like Kafka's purgeInterval:
//! a completed operation's id goes stale (generation check) and is removed
//! when its key is next checked, or by a sweep of all lists once stale ids
//! outnumber both PURGE_MIN_STALE and the live ones (amortised O(1)).
//! Dropping the purgatory drops pending operations without completing them.

use std::collections::HashMap;
use std::hash::Hash;
use std::marker::PhantomData;

use super::timing_wheel::{TimerId, TimingWheel};

pub trait DelayedOperation<C> {
    /// Checks whether the operation can complete now; if so it completes it
    /// (e.g. sends its response) and returns true.
    fn try_complete(&mut self, ctx: &C) -> bool;
    /// Called exactly once if the deadline passes before completion; must
    /// complete the operation (e.g. respond with what it has or a timeout).
    fn on_expiration(&mut self, ctx: &C);
}

/// Stale watch entries tolerated before a full sweep (Kafka's default
/// purge.interval.requests is 1000).
const PURGE_MIN_STALE: usize = 1000;
/// Emptied watch lists kept for reuse, so a key coming and going does not
/// allocate each time; large ones are freed instead of hoarded.
const SPARE_LISTS_MAX: usize = 64;
const SPARE_LIST_CAPACITY_MAX: usize = 1024;

const NIL: u32 = u32::MAX;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct OpId {
    index: u32,
    generation: u32,
}

struct OpSlot<Op> {
    /// None once completed (slot on the free list).
    op: Option<Op>,
    timer: Option<TimerId>,
    /// Watch lists this op was added to.
    key_count: u32,
    generation: u32,
    next_free: u32,
}

/// Pending operations and their timers. Separate from the watch lists so the
/// lists can be walked while operations are completed.
struct Ops<Op> {
    slots: Vec<OpSlot<Op>>,
    free_head: u32,
    pending: usize,
    /// Sum of key_count over pending ops: the watch entries that are not stale.
    live_watch_entries: usize,
    wheel: TimingWheel<OpId>,
}

impl<Op> Ops<Op> {
    fn alloc(&mut self, op: Op) -> OpId {
        self.pending += 1;
        if self.free_head != NIL {
            let index = self.free_head;
            let slot = &mut self.slots[index as usize];
            debug_assert!(slot.op.is_none() && slot.timer.is_none());
            self.free_head = slot.next_free;
            slot.op = Some(op);
            slot.key_count = 0;
            return OpId {
                index,
                generation: slot.generation,
            };
        }
        let index = self.slots.len();
        assert!(index < NIL as usize, "purgatory full");
        self.slots.push(OpSlot {
            op: Some(op),
            timer: None,
            key_count: 0,
            generation: 0,
            next_free: NIL,
        });
        OpId {
            index: index as u32,
            generation: 0,
        }
    }

    fn get_mut(&mut self, id: OpId) -> Option<&mut Op> {
        let slot = self.slots.get_mut(id.index as usize)?;
        if slot.generation != id.generation {
            return None;
        }
        slot.op.as_mut()
    }

    /// Removes a pending op, cancelling its timer unless the timer is what
    /// fired. Its ids in watch lists become stale.
    fn release(&mut self, id: OpId, timer_fired: bool) -> Op {
        let slot = &mut self.slots[id.index as usize];
        assert_eq!(slot.generation, id.generation, "op completed twice");
        let op = slot.op.take().expect("op completed twice");
        let timer = slot.timer.take();
        if !timer_fired {
            if let Some(timer) = timer {
                let cancelled = self.wheel.cancel(timer);
                debug_assert_eq!(cancelled, Some(id), "timer of a pending op missing");
            }
        }
        self.live_watch_entries -= slot.key_count as usize;
        slot.key_count = 0;
        slot.generation = slot.generation.wrapping_add(1);
        slot.next_free = self.free_head;
        self.free_head = id.index;
        self.pending -= 1;
        op
    }
}

/// Delayed operations of one kind (e.g. produce, fetch, join) on one shard,
/// keyed by `K` (a partition, a group).
pub struct Purgatory<K: Hash + Eq + Clone, Op: DelayedOperation<C>, C> {
    name: &'static str,
    ops: Ops<Op>,
    watchers: HashMap<K, Vec<OpId>>,
    /// Ids in all watch lists, stale or not.
    watch_entries: usize,
    spare_lists: Vec<Vec<OpId>>,
    expired_scratch: Vec<OpId>,
    _ctx: PhantomData<fn(&C)>,
}

impl<K: Hash + Eq + Clone, Op: DelayedOperation<C>, C> Purgatory<K, Op, C> {
    /// `tick_ms` and `wheel_size` size the timing wheel (Kafka uses 1 and 20);
    /// `now_ms` starts its clock.
    pub fn new(name: &'static str, tick_ms: u64, wheel_size: usize, now_ms: u64) -> Self {
        Purgatory {
            name,
            ops: Ops {
                slots: Vec::new(),
                free_head: NIL,
                pending: 0,
                live_watch_entries: 0,
                wheel: TimingWheel::new(tick_ms, wheel_size, now_ms),
            },
            watchers: HashMap::new(),
            watch_entries: 0,
            spare_lists: Vec::new(),
            expired_scratch: Vec::new(),
            _ctx: PhantomData,
        }
    }

    /// Kafka's tryCompleteElseWatch: try once; if not complete, watch it under
    /// every key and arm its timer. Returns true if completed immediately.
    /// If the deadline is already due (within the current tick) the op is
    /// expired at once (on_expiration is called) and false is returned, as
    /// Kafka's timer runs an already-expired task immediately. Duplicate keys
    /// are watched once.
    pub fn try_complete_else_watch(
        &mut self,
        ctx: &C,
        mut op: Op,
        deadline_ms: u64,
        keys: &[K],
    ) -> bool {
        if op.try_complete(ctx) {
            return true;
        }
        let id = self.ops.alloc(op);
        match self.ops.wheel.insert(deadline_ms, id) {
            Ok(timer) => self.ops.slots[id.index as usize].timer = Some(timer),
            Err(_) => {
                let mut op = self.ops.release(id, true);
                op.on_expiration(ctx);
                return false;
            }
        }
        for key in keys {
            self.watch(key, id);
        }
        false
    }

    /// Kafka's checkAndComplete: try every op watching `key`; completed ops
    /// are removed from all keys and their timers cancelled. Returns how many
    /// completed.
    pub fn check_and_complete(&mut self, ctx: &C, key: &K) -> usize {
        let Some(list) = self.watchers.get_mut(key) else {
            return 0;
        };
        let ops = &mut self.ops;
        let before = list.len();
        let mut completed = 0;
        list.retain(|&id| {
            // Stale: completed through another key, expired or cancelled.
            let Some(op) = ops.get_mut(id) else {
                return false;
            };
            if !op.try_complete(ctx) {
                return true;
            }
            drop(ops.release(id, false));
            completed += 1;
            false
        });
        self.watch_entries -= before - list.len();
        if list.is_empty() {
            self.remove_key(key);
        }
        self.maybe_purge();
        completed
    }

    /// Expire due ops (calling on_expiration once each, removing them from
    /// all watch lists). Returns count expired.
    pub fn advance_clock(&mut self, ctx: &C, now_ms: u64) -> usize {
        let mut fired = std::mem::take(&mut self.expired_scratch);
        self.ops.wheel.advance_to(now_ms, &mut fired);
        let expired = fired.len();
        for id in fired.drain(..) {
            let mut op = self.ops.release(id, true);
            op.on_expiration(ctx);
        }
        self.expired_scratch = fired;
        self.maybe_purge();
        expired
    }

    /// Removes and returns the ops watching `key` without completing them
    /// (e.g. the partition was deleted); their timers are cancelled and they
    /// leave every other watch list too. The caller decides how to answer.
    pub fn cancel_for_key(&mut self, key: &K) -> Vec<Op> {
        let Some(mut list) = self.watchers.remove(key) else {
            return Vec::new();
        };
        self.watch_entries -= list.len();
        let mut cancelled = Vec::new();
        for id in list.drain(..) {
            if self.ops.get_mut(id).is_some() {
                cancelled.push(self.ops.release(id, false));
            }
        }
        self.recycle(list);
        self.maybe_purge();
        cancelled
    }

    /// Ops pending (neither completed nor expired).
    pub fn watched_count(&self) -> usize {
        self.ops.pending
    }

    /// Earliest timer bucket pending: when the shard should call
    /// advance_clock next.
    pub fn next_expiration_ms(&self) -> Option<u64> {
        self.ops.wheel.next_expiration_ms()
    }

    pub fn name(&self) -> &'static str {
        self.name
    }

    fn watch(&mut self, key: &K, id: OpId) {
        match self.watchers.get_mut(key) {
            Some(list) => {
                // This call is the only one pushing `id`, so a duplicate key
                // finds it last.
                if list.last() == Some(&id) {
                    return;
                }
                list.push(id);
            }
            None => {
                let mut list = self.spare_lists.pop().unwrap_or_default();
                list.push(id);
                self.watchers.insert(key.clone(), list);
            }
        }
        self.ops.slots[id.index as usize].key_count += 1;
        self.ops.live_watch_entries += 1;
        self.watch_entries += 1;
    }

    fn remove_key(&mut self, key: &K) {
        if let Some(list) = self.watchers.remove(key) {
            debug_assert!(list.is_empty());
            self.recycle(list);
        }
    }

    fn recycle(&mut self, list: Vec<OpId>) {
        recycle_into(&mut self.spare_lists, list);
    }

    /// Kafka's purgeInterval: sweep stale ids out of every list once they
    /// outnumber the live ones, so the sweep is paid for by the completions.
    fn maybe_purge(&mut self) {
        debug_assert!(self.watch_entries >= self.ops.live_watch_entries);
        let stale = self.watch_entries - self.ops.live_watch_entries;
        if stale <= PURGE_MIN_STALE.max(self.ops.live_watch_entries) {
            return;
        }
        let ops = &mut self.ops;
        let mut remaining = 0;
        for list in self.watchers.values_mut() {
            list.retain(|&id| ops.get_mut(id).is_some());
            remaining += list.len();
        }
        // Pending ops leave lists only when released, so only they remain.
        debug_assert_eq!(remaining, self.ops.live_watch_entries);
        let spare = &mut self.spare_lists;
        for (_, list) in self.watchers.extract_if(|_, list| list.is_empty()) {
            recycle_into(spare, list);
        }
        self.watch_entries = self.ops.live_watch_entries;
    }
}

fn recycle_into(spare: &mut Vec<Vec<OpId>>, mut list: Vec<OpId>) {
    if spare.len() < SPARE_LISTS_MAX && list.capacity() <= SPARE_LIST_CAPACITY_MAX {
        list.clear();
        spare.push(list);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::{Cell, RefCell};

    /// What the ops see: per-key high watermarks and a log of outcomes.
    #[derive(Default)]
    struct Ctx {
        hw: RefCell<HashMap<u32, u64>>,
        log: RefCell<Vec<(u32, &'static str)>>,
        tries: Cell<usize>,
    }

    impl Ctx {
        fn set_hw(&self, key: u32, hw: u64) {
            self.hw.borrow_mut().insert(key, hw);
        }
    }

    /// A DelayedProduce-like op: completes once every key's HW reaches `need`.
    struct Op {
        id: u32,
        keys: Vec<u32>,
        need: u64,
        done: bool,
    }

    impl Op {
        fn new(id: u32, keys: &[u32], need: u64) -> Self {
            Op {
                id,
                keys: keys.to_vec(),
                need,
                done: false,
            }
        }
    }

    impl DelayedOperation<Ctx> for Op {
        fn try_complete(&mut self, ctx: &Ctx) -> bool {
            assert!(!self.done, "op {} tried after completion", self.id);
            ctx.tries.set(ctx.tries.get() + 1);
            let hw = ctx.hw.borrow();
            if self
                .keys
                .iter()
                .all(|k| hw.get(k).copied().unwrap_or(0) >= self.need)
            {
                self.done = true;
                ctx.log.borrow_mut().push((self.id, "completed"));
                return true;
            }
            false
        }

        fn on_expiration(&mut self, ctx: &Ctx) {
            assert!(!self.done, "op {} expired after completion", self.id);
            self.done = true;
            ctx.log.borrow_mut().push((self.id, "expired"));
        }
    }

    type P = Purgatory<u32, Op, Ctx>;

    fn outcomes(ctx: &Ctx) -> Vec<(u32, &'static str)> {
        std::mem::take(&mut *ctx.log.borrow_mut())
    }

    #[test]
    fn completes_immediately_without_watching() {
        let ctx = Ctx::default();
        ctx.set_hw(1, 10);
        let mut p = P::new("produce", 1, 20, 0);
        assert_eq!(p.name(), "produce");
        assert!(p.try_complete_else_watch(&ctx, Op::new(1, &[1], 5), 100, &[1]));
        assert_eq!(outcomes(&ctx), vec![(1, "completed")]);
        assert_eq!(p.watched_count(), 0);
        assert_eq!(p.next_expiration_ms(), None);
        assert!(p.watchers.is_empty());
    }

    #[test]
    fn completes_on_key_event_and_cancels_timer() {
        let ctx = Ctx::default();
        let mut p = P::new("produce", 1, 20, 0);
        assert!(!p.try_complete_else_watch(&ctx, Op::new(1, &[7], 5), 100, &[7]));
        assert!(!p.try_complete_else_watch(&ctx, Op::new(2, &[7], 9), 200, &[7]));
        assert_eq!(p.watched_count(), 2);
        assert_eq!(p.next_expiration_ms(), Some(100));
        assert_eq!(p.check_and_complete(&ctx, &7), 0);
        ctx.set_hw(7, 5);
        assert_eq!(p.check_and_complete(&ctx, &7), 1);
        assert_eq!(outcomes(&ctx), vec![(1, "completed")]);
        assert_eq!(p.watched_count(), 1);
        // Op 1's timer is gone; op 2's remains.
        assert_eq!(p.next_expiration_ms(), Some(200));
        assert_eq!(p.advance_clock(&ctx, 150), 0);
        assert_eq!(p.check_and_complete(&ctx, &8), 0, "unknown key");
        ctx.set_hw(7, 9);
        assert_eq!(p.check_and_complete(&ctx, &7), 1);
        assert_eq!(p.watched_count(), 0);
        assert!(p.watchers.is_empty(), "empty list removed");
        assert_eq!(p.watch_entries, 0);
        assert_eq!(p.next_expiration_ms(), None);
        assert_eq!(p.advance_clock(&ctx, 1_000), 0);
        assert_eq!(outcomes(&ctx), vec![(2, "completed")]);
    }

    #[test]
    fn multiple_keys_complete_once_and_leave_every_list() {
        let ctx = Ctx::default();
        let mut p = P::new("fetch", 1, 20, 0);
        assert!(!p.try_complete_else_watch(&ctx, Op::new(1, &[1, 2, 3], 1), 500, &[1, 2, 3]));
        // Duplicate keys are watched once.
        assert!(!p.try_complete_else_watch(&ctx, Op::new(2, &[2], 1), 500, &[2, 2, 2]));
        assert_eq!(p.watchers[&2].len(), 2);
        ctx.set_hw(1, 1);
        ctx.set_hw(2, 1);
        ctx.set_hw(3, 1);
        let tries_before = ctx.tries.get();
        assert_eq!(p.check_and_complete(&ctx, &2), 2);
        assert_eq!(ctx.tries.get() - tries_before, 2);
        // Op 1 is stale in lists 1 and 3: not tried again, and purged there.
        assert_eq!(p.check_and_complete(&ctx, &1), 0);
        assert_eq!(p.check_and_complete(&ctx, &3), 0);
        assert_eq!(ctx.tries.get() - tries_before, 2);
        assert!(p.watchers.is_empty());
        assert_eq!(p.watch_entries, 0);
        assert_eq!(p.advance_clock(&ctx, 10_000), 0, "timers cancelled");
        assert_eq!(outcomes(&ctx), vec![(1, "completed"), (2, "completed")]);
    }

    #[test]
    fn expires_exactly_once_and_leaves_watch_lists() {
        let ctx = Ctx::default();
        let mut p = P::new("produce", 1, 20, 1_000);
        for id in 0..5u32 {
            let deadline_ms = 1_000 + 100 * u64::from(id + 1);
            assert!(!p.try_complete_else_watch(
                &ctx,
                Op::new(id, &[1, 2], 9),
                deadline_ms,
                &[1, 2]
            ));
        }
        assert_eq!(p.next_expiration_ms(), Some(1_100));
        assert_eq!(p.advance_clock(&ctx, 1_099), 0);
        assert_eq!(p.advance_clock(&ctx, 1_250), 2);
        assert_eq!(outcomes(&ctx), vec![(0, "expired"), (1, "expired")]);
        assert_eq!(p.watched_count(), 3);
        // The expired ops are not tried by key events.
        let tries_before = ctx.tries.get();
        assert_eq!(p.check_and_complete(&ctx, &1), 0);
        assert_eq!(ctx.tries.get() - tries_before, 3);
        assert_eq!(p.watchers[&1].len(), 3, "stale ids purged on check");
        assert_eq!(p.advance_clock(&ctx, 5_000), 3);
        assert_eq!(p.advance_clock(&ctx, 9_000), 0);
        assert_eq!(
            outcomes(&ctx),
            vec![(2, "expired"), (3, "expired"), (4, "expired")]
        );
        assert_eq!(p.watched_count(), 0);
    }

    #[test]
    fn already_due_deadline_expires_at_once() {
        let ctx = Ctx::default();
        let mut p = P::new("produce", 1, 20, 500);
        assert!(!p.try_complete_else_watch(&ctx, Op::new(1, &[1], 9), 400, &[1]));
        assert_eq!(outcomes(&ctx), vec![(1, "expired")]);
        assert_eq!(p.watched_count(), 0);
        assert!(p.watchers.is_empty());
    }

    #[test]
    fn cancel_for_key_returns_ops_uncompleted() {
        let ctx = Ctx::default();
        let mut p = P::new("fetch", 1, 20, 0);
        p.try_complete_else_watch(&ctx, Op::new(1, &[1], 9), 100, &[1]);
        p.try_complete_else_watch(&ctx, Op::new(2, &[1, 2], 9), 100, &[1, 2]);
        p.try_complete_else_watch(&ctx, Op::new(3, &[2], 9), 100, &[2]);
        let mut ids: Vec<u32> = p.cancel_for_key(&1).iter().map(|op| op.id).collect();
        ids.sort_unstable();
        assert_eq!(ids, vec![1, 2]);
        assert!(p.cancel_for_key(&1).is_empty());
        assert_eq!(p.watched_count(), 1);
        ctx.set_hw(2, 9);
        assert_eq!(p.check_and_complete(&ctx, &2), 1);
        assert_eq!(p.advance_clock(&ctx, 1_000), 0);
        assert_eq!(outcomes(&ctx), vec![(3, "completed")]);
        assert_eq!(p.watch_entries, 0);
    }

    #[test]
    fn stale_entries_are_purged_in_bulk() {
        let ctx = Ctx::default();
        let mut p = P::new("produce", 1, 20, 0);
        // Each op watches a hot key it completes on and a cold key never checked.
        for id in 0..5_000u32 {
            let cold = 1_000 + id % 50;
            p.try_complete_else_watch(&ctx, Op::new(id, &[0], 1), 60_000, &[0, cold]);
            if id % 10 == 9 {
                ctx.set_hw(0, 1);
                assert_eq!(p.check_and_complete(&ctx, &0), 10);
                ctx.set_hw(0, 0);
            }
            assert!(p.watch_entries <= 2 * PURGE_MIN_STALE + 2 * p.watched_count() + 2);
        }
        assert_eq!(p.watched_count(), 0);
        assert!(p.watch_entries <= PURGE_MIN_STALE + 1);
        assert!(p.watchers.len() <= 51);
        assert_eq!(outcomes(&ctx).len(), 5_000);
        // Slots are reused rather than grown.
        assert!(p.ops.slots.len() <= 10);
    }

    #[test]
    fn randomized_bookkeeping() {
        let ctx = Ctx::default();
        let mut p = P::new("mixed", 1, 8, 0);
        let mut state = 0x1234_5678_9abc_def0u64;
        let mut rnd = |n: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % n
        };
        let mut now_ms = 0;
        let mut started = 0usize;
        let mut cancelled = 0usize;
        for id in 0..20_000u32 {
            match rnd(4) {
                0 | 1 => {
                    let keys = [rnd(20) as u32, rnd(20) as u32];
                    let deadline_ms = now_ms + rnd(3_000);
                    p.try_complete_else_watch(&ctx, Op::new(id, &keys, 1), deadline_ms, &keys);
                    started += 1;
                }
                2 => {
                    let key = rnd(20) as u32;
                    ctx.set_hw(key, rnd(2));
                    p.check_and_complete(&ctx, &key);
                }
                _ if rnd(50) == 0 => cancelled += p.cancel_for_key(&(rnd(20) as u32)).len(),
                _ => {
                    now_ms += rnd(100);
                    p.advance_clock(&ctx, now_ms);
                }
            }
            let finished = ctx.log.borrow().len();
            assert_eq!(started, finished + cancelled + p.watched_count());
            assert!(p.watch_entries >= p.ops.live_watch_entries);
        }
        p.advance_clock(&ctx, u64::MAX);
        let log = outcomes(&ctx);
        assert_eq!(log.len() + cancelled, started);
        let mut ids: Vec<u32> = log.iter().map(|&(id, _)| id).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), log.len(), "an op finished twice");
        assert_eq!(p.watched_count(), 0);
    }
}
