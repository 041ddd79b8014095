//! Timing wheel vs a BinaryHeap timer with lazy cancellation, at 1e4, 1e5
//! and 1e6 pending timers (tick 1 ms, wheel size 20: Kafka's defaults).
//!
//! - insert: one timer into a timer already holding N (deadlines uniform
//!   over the next WINDOW_MS, so the wheel uses overflow levels);
//! - cancel: one pending timer out of N;
//! - expire: steady state, the clock moves STEP_MS and about N * STEP_MS /
//!   WINDOW_MS timers fire (re-armed untimed, so N stays constant); throughput
//!   is per fired timer;
//! - churn: the purgatory pattern, most timers cancelled before they fire:
//!   each iteration cancels a random pending timer and inserts a new one,
//!   and the clock moves 1 ms every CHURN_PER_MS iterations, firing (and
//!   re-arming) what is due. This charges the heap for its lazy
//!   cancellation, which the cancel figure alone does not (its dead entries
//!   are compacted untimed there).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use kshard_shards::timer::{TimerId, TimingWheel};

const TICK_MS: u64 = 1;
const WHEEL_SIZE: usize = 20;
const WINDOW_MS: u64 = 10_000;
const STEP_MS: u64 = 10;
const START_MS: u64 = 1_000_000;
const CHURN_PER_MS: u64 = 100;

/// xorshift64*, so both timers see the same deadlines.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

#[derive(Clone, Copy)]
struct HeapId {
    slot: u32,
    generation: u32,
}

struct HeapSlot<T> {
    item: Option<T>,
    generation: u32,
}

/// The usual alternative: a min-heap of (deadline, slot, generation); cancel
/// only frees the slot and the heap entry is dropped when it surfaces.
struct HeapTimer<T> {
    heap: BinaryHeap<Reverse<(u64, u32, u32)>>,
    slots: Vec<HeapSlot<T>>,
    free: Vec<u32>,
}

impl<T> HeapTimer<T> {
    fn new() -> Self {
        HeapTimer {
            heap: BinaryHeap::new(),
            slots: Vec::new(),
            free: Vec::new(),
        }
    }

    fn insert(&mut self, deadline_ms: u64, item: T) -> HeapId {
        let slot = match self.free.pop() {
            Some(slot) => {
                self.slots[slot as usize].item = Some(item);
                slot
            }
            None => {
                self.slots.push(HeapSlot {
                    item: Some(item),
                    generation: 0,
                });
                (self.slots.len() - 1) as u32
            }
        };
        let generation = self.slots[slot as usize].generation;
        self.heap.push(Reverse((deadline_ms, slot, generation)));
        HeapId { slot, generation }
    }

    fn release(&mut self, slot: u32) -> T {
        let s = &mut self.slots[slot as usize];
        s.generation = s.generation.wrapping_add(1);
        self.free.push(slot);
        s.item.take().expect("live slot")
    }

    fn cancel(&mut self, id: HeapId) -> Option<T> {
        let s = &self.slots[id.slot as usize];
        if s.generation != id.generation || s.item.is_none() {
            return None;
        }
        Some(self.release(id.slot))
    }

    fn advance_to(&mut self, now_ms: u64, expired: &mut Vec<T>) {
        while let Some(&Reverse((deadline_ms, slot, generation))) = self.heap.peek() {
            if deadline_ms > now_ms {
                break;
            }
            self.heap.pop();
            if self.slots[slot as usize].generation == generation {
                expired.push(self.release(slot));
            }
        }
    }

    /// Drops cancelled entries (untimed housekeeping between samples).
    fn compact(&mut self) {
        let slots = &self.slots;
        self.heap.retain(|&Reverse((_, slot, generation))| {
            slots[slot as usize].generation == generation
        });
    }
}

/// The operations the benchmark drives, implemented by both timers.
trait Timer {
    type Id: Copy;
    fn insert(&mut self, deadline_ms: u64, item: u64) -> Self::Id;
    fn cancel(&mut self, id: Self::Id) -> bool;
    fn advance_to(&mut self, now_ms: u64, expired: &mut Vec<u64>);
    fn housekeeping(&mut self) {}
}

impl Timer for TimingWheel<u64> {
    type Id = TimerId;
    fn insert(&mut self, deadline_ms: u64, item: u64) -> TimerId {
        TimingWheel::insert(self, deadline_ms, item).expect("deadline in the future")
    }
    fn cancel(&mut self, id: TimerId) -> bool {
        TimingWheel::cancel(self, id).is_some()
    }
    fn advance_to(&mut self, now_ms: u64, expired: &mut Vec<u64>) {
        TimingWheel::advance_to(self, now_ms, expired)
    }
}

impl Timer for HeapTimer<u64> {
    type Id = HeapId;
    fn insert(&mut self, deadline_ms: u64, item: u64) -> HeapId {
        HeapTimer::insert(self, deadline_ms, item)
    }
    fn cancel(&mut self, id: HeapId) -> bool {
        HeapTimer::cancel(self, id).is_some()
    }
    fn advance_to(&mut self, now_ms: u64, expired: &mut Vec<u64>) {
        HeapTimer::advance_to(self, now_ms, expired)
    }
    fn housekeeping(&mut self) {
        self.compact()
    }
}

/// A timer holding `pending` timers spread over the next WINDOW_MS.
struct Setup<T: Timer> {
    timer: T,
    now_ms: u64,
    rng: Rng,
    next_item: u64,
}

impl<T: Timer> Setup<T> {
    fn new(mut timer: T, pending: usize) -> Self {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        for item in 0..pending as u64 {
            timer.insert(START_MS + 1 + rng.next() % WINDOW_MS, item);
        }
        Setup {
            timer,
            now_ms: START_MS,
            rng,
            next_item: pending as u64,
        }
    }

    fn deadlines(&mut self, count: u64) -> Vec<u64> {
        (0..count)
            .map(|_| self.now_ms + 1 + self.rng.next() % WINDOW_MS)
            .collect()
    }

    fn bench_insert(&mut self, iters: u64) -> Duration {
        let deadlines = self.deadlines(iters);
        let mut ids = Vec::with_capacity(deadlines.len());
        let start = Instant::now();
        for &deadline_ms in &deadlines {
            ids.push(self.timer.insert(deadline_ms, self.next_item));
            self.next_item += 1;
        }
        let elapsed = start.elapsed();
        for id in ids {
            assert!(self.timer.cancel(id));
        }
        self.timer.housekeeping();
        elapsed
    }

    fn bench_cancel(&mut self, iters: u64) -> Duration {
        let deadlines = self.deadlines(iters);
        let ids: Vec<T::Id> = deadlines
            .iter()
            .map(|&deadline_ms| {
                self.next_item += 1;
                self.timer.insert(deadline_ms, self.next_item)
            })
            .collect();
        let start = Instant::now();
        for &id in &ids {
            black_box(self.timer.cancel(id));
        }
        let elapsed = start.elapsed();
        self.timer.housekeeping();
        elapsed
    }

    fn bench_expire(&mut self, iters: u64, expired: &mut Vec<u64>) -> Duration {
        let mut elapsed = Duration::ZERO;
        for _ in 0..iters {
            self.now_ms += STEP_MS;
            expired.clear();
            let start = Instant::now();
            self.timer.advance_to(self.now_ms, expired);
            elapsed += start.elapsed();
            // Re-arm at the far end of the window to keep N pending.
            for &item in expired.iter() {
                let deadline_ms = self.now_ms + WINDOW_MS - self.rng.next() % STEP_MS;
                self.timer.insert(deadline_ms, item);
            }
        }
        elapsed
    }
}

/// N pending timers whose items are their index in `ids`, so a fired timer
/// can be re-armed in place.
struct Churn<T: Timer> {
    timer: T,
    ids: Vec<T::Id>,
    now_ms: u64,
    rng: Rng,
    done: u64,
    expired: Vec<u64>,
}

impl<T: Timer> Churn<T> {
    fn new(mut timer: T, pending: usize) -> Self {
        let mut rng = Rng(0x2545_F491_4F6C_DD1D);
        let ids = (0..pending as u64)
            .map(|i| timer.insert(START_MS + 1 + rng.next() % WINDOW_MS, i))
            .collect();
        Churn {
            timer,
            ids,
            now_ms: START_MS,
            rng,
            done: 0,
            expired: Vec::new(),
        }
    }

    fn bench(&mut self, iters: u64) -> Duration {
        let pending = self.ids.len() as u64;
        let start = Instant::now();
        for _ in 0..iters {
            let i = (self.rng.next() % pending) as usize;
            self.timer.cancel(self.ids[i]);
            let deadline_ms = self.now_ms + 1 + self.rng.next() % WINDOW_MS;
            self.ids[i] = self.timer.insert(deadline_ms, i as u64);
            self.done += 1;
            if self.done.is_multiple_of(CHURN_PER_MS) {
                self.now_ms += 1;
                self.expired.clear();
                self.timer.advance_to(self.now_ms, &mut self.expired);
                for &item in &self.expired {
                    let deadline_ms = self.now_ms + 1 + self.rng.next() % WINDOW_MS;
                    self.ids[item as usize] = self.timer.insert(deadline_ms, item);
                }
            }
        }
        start.elapsed()
    }
}

fn bench_sizes(c: &mut Criterion) {
    for pending in [10_000usize, 100_000, 1_000_000] {
        let mut wheel = Setup::new(TimingWheel::new(TICK_MS, WHEEL_SIZE, START_MS), pending);
        let mut heap = Setup::new(HeapTimer::new(), pending);
        let mut expired = Vec::new();

        let mut group = c.benchmark_group(format!("timer/{pending}"));
        group.throughput(Throughput::Elements(1));
        group.bench_function(BenchmarkId::new("insert", "wheel"), |b| {
            b.iter_custom(|iters| wheel.bench_insert(iters))
        });
        group.bench_function(BenchmarkId::new("insert", "heap"), |b| {
            b.iter_custom(|iters| heap.bench_insert(iters))
        });
        group.bench_function(BenchmarkId::new("cancel", "wheel"), |b| {
            b.iter_custom(|iters| wheel.bench_cancel(iters))
        });
        group.bench_function(BenchmarkId::new("cancel", "heap"), |b| {
            b.iter_custom(|iters| heap.bench_cancel(iters))
        });
        let fired_per_step = (pending as u64 * STEP_MS / WINDOW_MS).max(1);
        group.throughput(Throughput::Elements(fired_per_step));
        group.bench_function(BenchmarkId::new("expire", "wheel"), |b| {
            b.iter_custom(|iters| wheel.bench_expire(iters, &mut expired))
        });
        group.bench_function(BenchmarkId::new("expire", "heap"), |b| {
            b.iter_custom(|iters| heap.bench_expire(iters, &mut expired))
        });
        drop((wheel, heap));
        let mut wheel = Churn::new(TimingWheel::new(TICK_MS, WHEEL_SIZE, START_MS), pending);
        let mut heap = Churn::new(HeapTimer::new(), pending);
        group.throughput(Throughput::Elements(1));
        group.bench_function(BenchmarkId::new("churn", "wheel"), |b| {
            b.iter_custom(|iters| wheel.bench(iters))
        });
        group.bench_function(BenchmarkId::new("churn", "heap"), |b| {
            b.iter_custom(|iters| heap.bench(iters))
        });
        group.finish();
    }
}

criterion_group!(benches, bench_sizes);
criterion_main!(benches);
