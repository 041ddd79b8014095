//! Kafka's hierarchical timing wheel (kafka.utils.timer: TimingWheel,
//! TimerTaskList and the delay queue of SystemTimer), single-threaded and
//! driven by an explicit clock.
//!
//! Level 0 has `wheel_size` buckets of `tick_ms` each; level n+1 has buckets
//! of level n's interval (`tick_ms * wheel_size`) and is created only when an
//! expiration does not fit the levels below. Every bucket that holds entries
//! is armed in a min-heap by its expiration (its start time), so advancing the
//! clock only visits non-empty buckets. Flushing a higher-level bucket
//! re-inserts its entries, which cascade down or fire.
//!
//! Like Kafka, an entry fires when the clock reaches the start of its tick
//! (`expiration_ms` rounded down to `tick_ms`), so with `tick_ms > 1` an item
//! can fire up to `tick_ms - 1` ms early; with `tick_ms == 1` it is exact.
//!
//! Entries live in a slab (free list, generation-checked ids) threaded into
//! one intrusive doubly-linked list per bucket, so insert and cancel are O(1)
//! except when a bucket is newly armed (O(log buckets) heap push). Buckets are
//! fixed per level, so the heap never holds more than one entry per bucket.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Link sentinel for the slab and bucket lists.
const NIL: u32 = u32::MAX;

/// Handle of an inserted entry. The generation makes a handle that outlived
/// its entry (fired or cancelled, slot reused) harmless: cancel returns None.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TimerId {
    index: u32,
    generation: u32,
}

struct Entry<T> {
    /// None while the slot is on the free list.
    item: Option<T>,
    expiration_ms: u64,
    prev: u32,
    /// Next in the bucket list, or next free slot when free.
    next: u32,
    bucket: u32,
    /// Bumped every time the slot is freed.
    generation: u32,
}

#[derive(Clone, Copy)]
struct Bucket {
    head: u32,
    tail: u32,
    len: u32,
    /// Some(start of the bucket's tick) exactly while the bucket has one
    /// entry in the delay queue.
    expiration_ms: Option<u64>,
}

impl Bucket {
    const EMPTY: Bucket = Bucket {
        head: NIL,
        tail: NIL,
        len: 0,
        expiration_ms: None,
    };
}

struct Level {
    tick_ms: u64,
    /// tick_ms * wheel_size, in u128 so the top levels cannot overflow.
    interval_ms: u128,
    /// Rounded down to tick_ms.
    current_ms: u64,
}

/// A hierarchical timing wheel of items `T` (one per shard; not Sync).
pub struct TimingWheel<T> {
    wheel_size: usize,
    levels: Vec<Level>,
    /// Level l's slot s is `buckets[l * wheel_size + s]`.
    buckets: Vec<Bucket>,
    entries: Vec<Entry<T>>,
    free_head: u32,
    len: usize,
    /// Kafka's DelayQueue of TimerTaskLists: (bucket expiration, bucket index).
    queue: BinaryHeap<Reverse<(u64, u32)>>,
    /// Items fired for the bucket expiration being processed, with their
    /// expiration and FIFO position, sorted before they are handed out.
    fired: Vec<(u64, u32, T)>,
}

impl<T> TimingWheel<T> {
    /// A wheel whose clock starts at `start_ms` rounded down to `tick_ms`.
    /// Panics if `tick_ms` is 0 or `wheel_size` is below 2.
    pub fn new(tick_ms: u64, wheel_size: usize, start_ms: u64) -> Self {
        assert!(tick_ms >= 1, "tick_ms must be at least 1");
        // A single-slot wheel could never hold anything and overflow forever.
        assert!(wheel_size >= 2, "wheel_size must be at least 2");
        assert!(
            wheel_size < NIL as usize / 64,
            "wheel_size too large for u32 bucket ids"
        );
        let mut wheel = TimingWheel {
            wheel_size,
            levels: Vec::new(),
            buckets: Vec::new(),
            entries: Vec::new(),
            free_head: NIL,
            len: 0,
            queue: BinaryHeap::new(),
            fired: Vec::new(),
        };
        wheel.push_level(tick_ms, start_ms);
        wheel
    }

    /// Returns Err(item) if already expired (expiration_ms < current time +
    /// tick_ms), like Kafka's add() returning false, so the caller runs it now.
    pub fn insert(&mut self, expiration_ms: u64, item: T) -> Result<TimerId, T> {
        let Some(bucket) = self.place(expiration_ms) else {
            return Err(item);
        };
        let index = self.alloc(expiration_ms, item);
        self.link(index, bucket);
        self.len += 1;
        Ok(TimerId {
            index,
            generation: self.entries[index as usize].generation,
        })
    }

    /// Removes a pending entry in O(1). None if it already fired, was
    /// cancelled, or the id is stale.
    pub fn cancel(&mut self, id: TimerId) -> Option<T> {
        let entry = self.entries.get(id.index as usize)?;
        if entry.generation != id.generation || entry.item.is_none() {
            return None;
        }
        let bucket = entry.bucket;
        self.unlink(id.index);
        let item = self.release(id.index);
        if self.buckets[bucket as usize].len == 0 {
            // Keeps next_expiration_ms() pointing at a bucket with work.
            self.drop_empty_tops();
        }
        Some(item)
    }

    /// Advances to now_ms and pushes every expired item onto `expired`, in
    /// expiration order (buckets in expiration order, each sorted by exact
    /// expiration, FIFO among equal ones). A now_ms in the past is a no-op.
    pub fn advance_to(&mut self, now_ms: u64, expired: &mut Vec<T>) {
        while let Some(&Reverse((bucket_expiration_ms, _))) = self.queue.peek() {
            if bucket_expiration_ms > now_ms {
                break;
            }
            // Kafka's SystemTimer: move the clock to the bucket, then flush.
            self.advance_clocks(bucket_expiration_ms);
            // Every bucket due at the same instant (one per level at most)
            // is flushed before the fired items are sorted together.
            while let Some(&Reverse((e, bucket))) = self.queue.peek() {
                if e != bucket_expiration_ms {
                    break;
                }
                self.queue.pop();
                debug_assert_eq!(self.buckets[bucket as usize].expiration_ms, Some(e));
                self.flush(bucket);
            }
            self.fired
                .sort_unstable_by_key(|&(expiration_ms, pos, _)| (expiration_ms, pos));
            expired.extend(self.fired.drain(..).map(|(_, _, item)| item));
        }
        self.advance_clocks(now_ms);
        self.drop_empty_tops();
    }

    /// Earliest bucket expiration pending, for the shard to know when to wake
    /// up. For a higher-level bucket this is when it cascades, which may fire
    /// nothing; advancing to it is still required.
    pub fn next_expiration_ms(&self) -> Option<u64> {
        self.queue.peek().map(|&Reverse((e, _))| e)
    }

    /// Entries pending.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The wheel's clock (level 0), rounded down to tick_ms.
    pub fn current_time_ms(&self) -> u64 {
        self.levels[0].current_ms
    }

    fn push_level(&mut self, tick_ms: u64, start_ms: u64) {
        let interval_ms = u128::from(tick_ms) * self.wheel_size as u128;
        self.levels.push(Level {
            tick_ms,
            interval_ms,
            current_ms: start_ms - start_ms % tick_ms,
        });
        assert!(
            self.buckets.len() + self.wheel_size < NIL as usize,
            "too many buckets"
        );
        self.buckets
            .extend(std::iter::repeat_n(Bucket::EMPTY, self.wheel_size));
    }

    /// Kafka's TimingWheel.add placement: the bucket for `expiration_ms`, or
    /// None if it is due within the current tick. Creates overflow levels.
    fn place(&mut self, expiration_ms: u64) -> Option<u32> {
        let base = &self.levels[0];
        if expiration_ms < base.current_ms.saturating_add(base.tick_ms) {
            return None;
        }
        let mut level = 0;
        loop {
            let l = &self.levels[level];
            if u128::from(expiration_ms) < u128::from(l.current_ms) + l.interval_ms {
                let virtual_id = expiration_ms / l.tick_ms;
                let slot = (virtual_id % self.wheel_size as u64) as usize;
                return Some((level * self.wheel_size + slot) as u32);
            }
            if level + 1 == self.levels.len() {
                // Did not fit, so the interval is below expiration_ms <= u64::MAX.
                let tick_ms = u64::try_from(l.interval_ms).expect("interval fits u64");
                let start_ms = l.current_ms;
                self.push_level(tick_ms, start_ms);
            }
            level += 1;
        }
    }

    fn alloc(&mut self, expiration_ms: u64, item: T) -> u32 {
        if self.free_head != NIL {
            let index = self.free_head;
            let entry = &mut self.entries[index as usize];
            debug_assert!(entry.item.is_none());
            self.free_head = entry.next;
            entry.item = Some(item);
            entry.expiration_ms = expiration_ms;
            return index;
        }
        let index = self.entries.len();
        assert!(index < NIL as usize, "timing wheel slab full");
        self.entries.push(Entry {
            item: Some(item),
            expiration_ms,
            prev: NIL,
            next: NIL,
            bucket: NIL,
            generation: 0,
        });
        index as u32
    }

    /// Frees an unlinked slot and returns its item.
    fn release(&mut self, index: u32) -> T {
        let entry = &mut self.entries[index as usize];
        let item = entry.item.take().expect("releasing a live entry");
        entry.generation = entry.generation.wrapping_add(1);
        entry.bucket = NIL;
        entry.prev = NIL;
        entry.next = self.free_head;
        self.free_head = index;
        self.len -= 1;
        item
    }

    /// Appends entry `index` to `bucket`, arming the bucket if needed.
    fn link(&mut self, index: u32, bucket: u32) {
        let level = bucket as usize / self.wheel_size;
        let tick_ms = self.levels[level].tick_ms;
        let entry = &mut self.entries[index as usize];
        let bucket_expiration_ms = entry.expiration_ms / tick_ms * tick_ms;
        entry.bucket = bucket;
        let b = &mut self.buckets[bucket as usize];
        let tail = b.tail;
        entry.prev = tail;
        entry.next = NIL;
        if tail == NIL {
            b.head = index;
        }
        b.tail = index;
        b.len += 1;
        match b.expiration_ms {
            Some(e) => debug_assert_eq!(e, bucket_expiration_ms, "bucket reused early"),
            None => {
                // Kafka's setExpiration returning true: offer to the queue.
                b.expiration_ms = Some(bucket_expiration_ms);
                self.queue.push(Reverse((bucket_expiration_ms, bucket)));
            }
        }
        if tail != NIL {
            self.entries[tail as usize].next = index;
        }
    }

    fn unlink(&mut self, index: u32) {
        let entry = &self.entries[index as usize];
        let (prev, next, bucket) = (entry.prev, entry.next, entry.bucket);
        let b = &mut self.buckets[bucket as usize];
        if prev == NIL {
            b.head = next;
        } else {
            self.entries[prev as usize].next = next;
        }
        if next == NIL {
            b.tail = prev;
        } else {
            self.entries[next as usize].prev = prev;
        }
        debug_assert!(b.len > 0);
        b.len -= 1;
    }

    /// Kafka's TimerTaskList.flush(addTimerTaskEntry): empties the bucket and
    /// re-inserts each entry, which cascades to a lower level or fires.
    fn flush(&mut self, bucket: u32) {
        let mut index = self.buckets[bucket as usize].head;
        self.buckets[bucket as usize] = Bucket::EMPTY;
        while index != NIL {
            let next = self.entries[index as usize].next;
            let expiration_ms = self.entries[index as usize].expiration_ms;
            match self.place(expiration_ms) {
                Some(target) => {
                    debug_assert_ne!(target, bucket, "entry re-inserted into its own bucket");
                    self.link(index, target);
                }
                None => {
                    let item = self.release(index);
                    let pos = self.fired.len() as u32;
                    self.fired.push((expiration_ms, pos, item));
                }
            }
            index = next;
        }
    }

    /// Kafka's advanceClock, applied to every level (each rounds to its tick).
    fn advance_clocks(&mut self, time_ms: u64) {
        for level in &mut self.levels {
            let rounded_ms = time_ms - time_ms % level.tick_ms;
            if rounded_ms > level.current_ms {
                level.current_ms = rounded_ms;
            }
        }
    }

    /// Disarms empty buckets at the top of the delay queue, so the top is
    /// always a bucket with entries.
    fn drop_empty_tops(&mut self) {
        while let Some(&Reverse((_, bucket))) = self.queue.peek() {
            let b = &mut self.buckets[bucket as usize];
            if b.len != 0 {
                break;
            }
            b.expiration_ms = None;
            self.queue.pop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// xorshift64*: deterministic, no dependency.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    fn advance<T>(wheel: &mut TimingWheel<T>, now_ms: u64) -> Vec<T> {
        let mut out = Vec::new();
        wheel.advance_to(now_ms, &mut out);
        out
    }

    #[test]
    fn fires_in_expiration_order() {
        let mut wheel = TimingWheel::new(1, 20, 0);
        for &e in &[30u64, 5, 17, 5, 400, 1, 2] {
            wheel.insert(e, e).unwrap();
        }
        assert_eq!(wheel.len(), 7);
        assert_eq!(advance(&mut wheel, 0), Vec::<u64>::new());
        assert_eq!(advance(&mut wheel, 4), vec![1, 2]);
        assert_eq!(advance(&mut wheel, 5), vec![5, 5]);
        assert_eq!(advance(&mut wheel, 29), vec![17]);
        assert_eq!(advance(&mut wheel, 1000), vec![30, 400]);
        assert!(wheel.is_empty());
        assert_eq!(wheel.next_expiration_ms(), None);
    }

    #[test]
    fn sorts_within_a_coarse_tick_fifo_on_ties() {
        let mut wheel = TimingWheel::new(10, 8, 0);
        wheel.insert(27, "c").unwrap();
        wheel.insert(21, "a").unwrap();
        wheel.insert(27, "d").unwrap();
        wheel.insert(24, "b").unwrap();
        assert_eq!(advance(&mut wheel, 19), Vec::<&str>::new());
        // Kafka fires at the start of the tick, i.e. at 20.
        assert_eq!(advance(&mut wheel, 20), vec!["a", "b", "c", "d"]);
    }

    #[test]
    fn cascades_across_levels() {
        // Intervals: 4, 16, 64, 256, 1024.
        let mut wheel = TimingWheel::new(1, 4, 0);
        let id = wheel.insert(700, 700u64).unwrap();
        // 255: level 3 bucket 192, then level 2 (240), level 1 (252), level 0.
        wheel.insert(255, 255).unwrap();
        wheel.insert(3, 3).unwrap();
        assert_eq!(wheel.levels.len(), 5);
        let mut fired = Vec::new();
        let mut wakeups = 0;
        while let Some(next_ms) = wheel.next_expiration_ms() {
            assert!(next_ms <= 255, "255 must fire before the clock passes it");
            wheel.advance_to(next_ms, &mut fired);
            wakeups += 1;
            if fired.len() == 2 {
                break;
            }
        }
        assert_eq!(fired, vec![3, 255]);
        assert_eq!(wakeups, 5, "3, then 255 via 192, 240 and 252");
        assert_eq!(wheel.current_time_ms(), 255);
        // The id survives the cascades.
        assert_eq!(wheel.cancel(id), Some(700));
        assert!(wheel.is_empty());
        assert_eq!(wheel.next_expiration_ms(), None);
    }

    #[test]
    fn cancel_removes_and_is_idempotent() {
        let mut wheel = TimingWheel::new(1, 8, 0);
        let a = wheel.insert(10, 'a').unwrap();
        let b = wheel.insert(10, 'b').unwrap();
        let c = wheel.insert(10, 'c').unwrap();
        assert_eq!(wheel.cancel(b), Some('b'));
        assert_eq!(wheel.cancel(b), None);
        assert_eq!(wheel.len(), 2);
        assert_eq!(advance(&mut wheel, 10), vec!['a', 'c']);
        assert_eq!(wheel.cancel(a), None, "fired entries cannot be cancelled");
        assert_eq!(wheel.cancel(c), None);
    }

    #[test]
    fn reinsert_after_cancel() {
        let mut wheel = TimingWheel::new(1, 8, 0);
        let a = wheel.insert(5, 1).unwrap();
        assert_eq!(wheel.cancel(a), Some(1));
        assert_eq!(wheel.next_expiration_ms(), None, "empty bucket disarmed");
        let b = wheel.insert(5, 2).unwrap();
        assert_eq!(wheel.next_expiration_ms(), Some(5));
        assert_eq!(wheel.queue.len(), 1, "one heap entry per bucket");
        assert_eq!(advance(&mut wheel, 5), vec![2]);
        assert_eq!(wheel.cancel(b), None);
    }

    #[test]
    fn stale_id_does_not_cancel_reused_slot() {
        let mut wheel = TimingWheel::new(1, 8, 0);
        let old = wheel.insert(5, "old").unwrap();
        assert_eq!(wheel.cancel(old), Some("old"));
        let new = wheel.insert(6, "new").unwrap();
        assert_eq!(old.index, new.index, "slot reused");
        assert_ne!(old, new);
        assert_eq!(wheel.cancel(old), None);
        assert_eq!(wheel.len(), 1);
        assert_eq!(advance(&mut wheel, 6), vec!["new"]);
        // Fired slot reused again; the fired id stays dead.
        let newer = wheel.insert(20, "newer").unwrap();
        assert_eq!(newer.index, new.index);
        assert_eq!(wheel.cancel(new), None);
        assert_eq!(wheel.cancel(newer), Some("newer"));
    }

    #[test]
    fn already_expired_insert_is_returned() {
        let mut wheel = TimingWheel::new(10, 8, 105);
        assert_eq!(wheel.current_time_ms(), 100);
        assert_eq!(wheel.insert(50, 'x'), Err('x'));
        assert_eq!(wheel.insert(109, 'y'), Err('y'));
        assert!(wheel.insert(110, 'z').is_ok());
        assert_eq!(wheel.len(), 1);
        advance(&mut wheel, 1000);
        assert_eq!(wheel.insert(1009, 'w'), Err('w'));
        assert_eq!(wheel.insert(u64::MAX, 'm').map(|_| ()), Ok(()));
    }

    #[test]
    fn big_jumps_fire_everything_in_order() {
        let mut wheel = TimingWheel::new(1, 20, 1_000);
        let mut rng = Rng(7);
        let mut expected = Vec::new();
        for i in 0..5_000u64 {
            let e = 1_001 + rng.below(50_000_000);
            wheel.insert(e, (e, i)).unwrap();
            expected.push((e, i));
        }
        wheel.insert(u64::MAX - 1, (u64::MAX - 1, 9_999)).unwrap();
        expected.sort();
        let mut fired = advance(&mut wheel, 60_000_000);
        assert_eq!(fired.len(), 5_000);
        assert!(fired.windows(2).all(|w| w[0].0 <= w[1].0));
        fired.sort();
        assert_eq!(fired, expected);
        assert_eq!(wheel.current_time_ms(), 60_000_000);
        assert_eq!(advance(&mut wheel, u64::MAX), vec![(u64::MAX - 1, 9_999)]);
        assert!(wheel.is_empty());
    }

    #[test]
    fn next_expiration_tracks_earliest_nonempty_bucket() {
        let mut wheel = TimingWheel::new(1, 10, 0);
        assert_eq!(wheel.next_expiration_ms(), None);
        let late = wheel.insert(50, 50).unwrap();
        // 50 sits in level 1 (tick 10) bucket starting at 50.
        assert_eq!(wheel.next_expiration_ms(), Some(50));
        let soon = wheel.insert(7, 7).unwrap();
        assert_eq!(wheel.next_expiration_ms(), Some(7));
        assert_eq!(wheel.cancel(soon), Some(7));
        assert_eq!(wheel.next_expiration_ms(), Some(50));
        wheel.insert(125, 125).unwrap();
        assert_eq!(wheel.cancel(late), Some(50));
        // Level 2 (tick 100) bucket starts at 100.
        assert_eq!(wheel.next_expiration_ms(), Some(100));
        assert_eq!(advance(&mut wheel, 100), Vec::<u64>::new());
        assert_eq!(wheel.next_expiration_ms(), Some(120));
        assert_eq!(advance(&mut wheel, 120), Vec::<u64>::new());
        assert_eq!(wheel.next_expiration_ms(), Some(125));
        assert_eq!(advance(&mut wheel, 130), vec![125]);
        assert_eq!(wheel.next_expiration_ms(), None);
    }

    #[test]
    fn memory_is_reused_after_warm_up() {
        let mut wheel = TimingWheel::new(1, 20, 0);
        let mut out = Vec::new();
        for round in 0..50u64 {
            let now = round * 1_000;
            for i in 0..1_000u64 {
                wheel.insert(now + 1 + i % 900, i).unwrap();
            }
            wheel.advance_to(now + 1_000, &mut out);
            assert_eq!(out.len(), 1_000);
            out.clear();
        }
        assert!(
            wheel.entries.len() <= 1_000,
            "slab grew: {}",
            wheel.entries.len()
        );
        assert!(wheel.queue.len() <= wheel.buckets.len());
    }

    /// Checks the wheel against a BinaryHeap model: each item fires in the
    /// first advance whose clock reaches its tick, exactly once, and cancel
    /// and the already-expired answer agree with the model.
    fn check_against_model(seed: u64, tick_ms: u64, wheel_size: usize, steps: usize) {
        let mut rng = Rng(seed);
        let start_ms = rng.below(1_000_000);
        let mut wheel = TimingWheel::new(tick_ms, wheel_size, start_ms);
        let mut model: BinaryHeap<Reverse<(u64, u64)>> = BinaryHeap::new();
        let mut live: HashMap<u64, u64> = HashMap::new();
        let mut handles: Vec<(u64, TimerId)> = Vec::new();
        let mut now_ms = start_ms;
        let mut next_item = 0u64;
        let mut fired = Vec::new();
        let (mut fired_total, mut cancelled_total, mut rejected_total) = (0, 0, 0);
        let due = |e: u64| e - e % tick_ms;
        for _ in 0..steps {
            match rng.below(10) {
                0..=4 => {
                    let delay_ms = match rng.below(4) {
                        0 => rng.below(3 * tick_ms),
                        1 => rng.below(200),
                        2 => rng.below(50_000),
                        _ => rng.below(20_000_000),
                    };
                    let e = now_ms + delay_ms;
                    let item = next_item;
                    next_item += 1;
                    let ct = now_ms - now_ms % tick_ms;
                    match wheel.insert(e, item) {
                        Ok(id) => {
                            assert!(e >= ct + tick_ms);
                            model.push(Reverse((due(e), item)));
                            live.insert(item, e);
                            handles.push((item, id));
                        }
                        Err(back) => {
                            assert_eq!(back, item);
                            assert!(e < ct + tick_ms, "rejected {e} at {now_ms}");
                            rejected_total += 1;
                        }
                    }
                }
                5 | 6 if !handles.is_empty() => {
                    // Recent handles are mostly live, old ones mostly fired.
                    let len = handles.len() as u64;
                    let pick = if rng.below(2) == 0 {
                        len - 1 - rng.below(len.min(32))
                    } else {
                        rng.below(len)
                    } as usize;
                    let (item, id) = handles.swap_remove(pick);
                    let was_live = live.remove(&item).is_some();
                    assert_eq!(wheel.cancel(id), was_live.then_some(item));
                    cancelled_total += usize::from(was_live);
                }
                _ => {
                    now_ms += match rng.below(20) {
                        0 => rng.below(5_000_000),
                        1..=3 => rng.below(2_000),
                        _ => rng.below(3 * tick_ms),
                    };
                    if rng.below(8) == 0 {
                        // Jump straight to the wake-up time, as a shard does.
                        if let Some(next_ms) = wheel.next_expiration_ms() {
                            now_ms = now_ms.max(next_ms);
                        }
                    }
                    fired.clear();
                    wheel.advance_to(now_ms, &mut fired);
                    let mut expected = Vec::new();
                    while let Some(&Reverse((d, item))) = model.peek() {
                        if d > now_ms {
                            break;
                        }
                        model.pop();
                        if live.contains_key(&item) {
                            expected.push(item);
                        }
                    }
                    let exps: Vec<u64> = fired.iter().map(|i| live[i]).collect();
                    assert!(exps.windows(2).all(|w| w[0] <= w[1]), "order {exps:?}");
                    for (&item, &e) in fired.iter().zip(&exps) {
                        assert!(due(e) <= now_ms);
                        assert!(e < now_ms + tick_ms);
                        if tick_ms == 1 {
                            assert!(e <= now_ms);
                        }
                        assert!(live.remove(&item).is_some(), "fired twice: {item}");
                    }
                    let mut got = fired.clone();
                    got.sort_unstable();
                    expected.sort_unstable();
                    assert_eq!(got, expected, "at {now_ms}");
                    fired_total += got.len();
                }
            }
            assert_eq!(wheel.len(), live.len());
            if let Some(next_ms) = wheel.next_expiration_ms() {
                assert!(next_ms > now_ms);
                let earliest = live.values().map(|&e| due(e)).min().unwrap();
                assert!(
                    next_ms <= earliest,
                    "wake-up {next_ms} after due {earliest}"
                );
            } else {
                assert!(live.is_empty());
            }
            assert!(wheel.queue.len() <= wheel.buckets.len());
        }
        // The run must have exercised every path.
        assert!(fired_total > steps / 20, "fired {fired_total}");
        assert!(cancelled_total > steps / 100, "cancelled {cancelled_total}");
        assert!(rejected_total > 0);
        assert!(wheel.levels.len() >= 3, "levels {}", wheel.levels.len());
        // Drain: everything left fires exactly once.
        fired.clear();
        wheel.advance_to(u64::MAX, &mut fired);
        assert_eq!(fired.len(), live.len());
        for item in &fired {
            assert!(live.remove(item).is_some());
        }
        assert!(wheel.is_empty());
    }

    #[test]
    fn randomized_against_heap_model() {
        check_against_model(0x9E37_79B9_7F4A_7C15, 1, 20, 20_000);
        check_against_model(42, 1, 2, 10_000);
        check_against_model(7, 3, 8, 10_000);
        check_against_model(1234, 10, 20, 10_000);
        check_against_model(99, 1000, 4, 5_000);
    }
}
