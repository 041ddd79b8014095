//! The statistics quotas are measured with, shared by every shard: Kafka's
//! `Rate` over a `SampledStat` (WindowedSum) kept in atomics so recording
//! takes no lock, the `TokenBucket` of controller mutation quotas, and the
//! throttle-time formulas of QuotaUtils and ControllerMutationQuotaManager.
//!
//! The sampled rate keeps `samples + 1` slots in a ring. A record lands in
//! the current slot unless that slot's window (`window_ms` from its first
//! record) is over; then the ring advances one slot, which starts afresh at
//! the record's time. The measured rate is the sum of the slots not idle for
//! `samples` windows, over the time since the oldest of them started, never
//! less than `samples - 1` whole windows plus the current one's elapsed part.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

/// The largest throttle time: Kafka casts its long to an int; kshard
/// saturates where Kafka would wrap.
const MAX_THROTTLE_MS: u64 = i32::MAX as u64;

/// Java's `Math.round(double)`: nearest, ties toward positive infinity, NaN
/// to 0, saturating at the long range.
fn java_round(x: f64) -> i64 {
    let floor = x.floor();
    let rounded = if x - floor >= 0.5 { floor + 1.0 } else { floor };
    rounded as i64
}

/// QuotaUtils.throttleTime: with observed rate O, bound T and the rate's
/// window W (ms), the delay X that brings O*W/(W+X) down to T is
/// (O - T)/T * W, rounded. Negative when within the quota.
pub fn throttle_time_ms(observed: f64, bound: f64, window_ms: u64) -> i64 {
    java_round((observed - bound) / bound * window_ms as f64)
}

/// QuotaUtils.boundedThrottleTime: the throttle time capped at `max_ms`
/// (request quotas cap it at one window).
pub fn bounded_throttle_time_ms(observed: f64, bound: f64, window_ms: u64, max_ms: u64) -> i64 {
    throttle_time_ms(observed, bound, window_ms).min(max_ms as i64)
}

/// ControllerMutationQuotaManager.throttleTimeMs: the time the bucket needs
/// to refill from `tokens` (< 0) back to zero at `bound` tokens a second.
pub fn token_bucket_throttle_ms(tokens: f64, bound: f64) -> i64 {
    java_round(-tokens / bound * 1000.0)
}

/// Rate.windowSize given the oldest live sample's start: the time since it,
/// padded up to `samples - 1` whole windows when fewer have passed (the
/// first windows, or after an idle spell purged the others), at least 1 ms.
pub fn window_size_ms(oldest_start_ms: u64, now_ms: u64, samples: u32, window_ms: u64) -> u64 {
    let mut elapsed = now_ms.saturating_sub(oldest_start_ms);
    let full_windows = elapsed / window_ms;
    let min_full_windows = u64::from(samples.saturating_sub(1));
    if full_windows < min_full_windows {
        elapsed += (min_full_windows - full_windows) * window_ms;
    }
    elapsed.max(1)
}

/// Adds to an f64 kept as bits, lock-free.
fn add_f64(cell: &AtomicU64, delta: f64) {
    let _ = cell.fetch_update(Ordering::AcqRel, Ordering::Acquire, |bits| {
        Some((f64::from_bits(bits) + delta).to_bits())
    });
}

/// The head word: current slot index (high 16 bits) and that slot's start
/// time (low 48 bits, good until the year 10889), so the winner of an
/// advance is decided by one compare-exchange.
const START_BITS: u32 = 48;
const START_MASK: u64 = (1 << START_BITS) - 1;
/// No sample yet (Kafka creates the first one on the first record).
const EMPTY_HEAD: u64 = u64::MAX;
/// A slot never started.
const NEVER: u64 = u64::MAX;

fn pack(index: usize, start_ms: u64) -> u64 {
    ((index as u64) << START_BITS) | (start_ms & START_MASK)
}

fn unpack(head: u64) -> (usize, u64) {
    ((head >> START_BITS) as usize, head & START_MASK)
}

/// One sample of a sampled rate.
struct Slot {
    value: AtomicU64,
    start_ms: AtomicU64,
    last_event_ms: AtomicU64,
}

/// One measurement: the windowed sum and the window it is taken over.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RateMeasure {
    pub sum: f64,
    pub window_ms: u64,
}

impl RateMeasure {
    /// Rate.measure in units per second.
    pub fn per_second(&self) -> f64 {
        self.sum / (self.window_ms as f64 / 1000.0)
    }
}

/// Kafka's Rate (SECONDS) over a WindowedSum, lock-free for any number of
/// threads. Concurrent records are summed exactly; an advance of the ring
/// is won by one thread, and it clears the reused slot by subtracting the
/// value it held (so records racing into the new slot are kept).
pub struct SampledRate {
    samples: u32,
    window_ms: u64,
    head: AtomicU64,
    slots: Box<[Slot]>,
}

impl SampledRate {
    /// `samples` is `quota.window.num` (clamped to 1..=65534), `window_ms`
    /// the sample window (at least 1).
    pub fn new(samples: u32, window_ms: u64) -> Self {
        let samples = samples.clamp(1, u32::from(u16::MAX) - 1);
        let slots = (0..=samples)
            .map(|_| Slot {
                value: AtomicU64::new(0f64.to_bits()),
                start_ms: AtomicU64::new(NEVER),
                last_event_ms: AtomicU64::new(0),
            })
            .collect();
        SampledRate {
            samples,
            window_ms: window_ms.max(1),
            head: AtomicU64::new(EMPTY_HEAD),
            slots,
        }
    }

    /// SampledStat.record: into the current sample, advancing first if its
    /// window is over.
    pub fn record(&self, value: f64, now_ms: u64) {
        loop {
            let head = self.head.load(Ordering::Acquire);
            if head == EMPTY_HEAD {
                self.try_advance(head, 0, now_ms);
                continue;
            }
            let (index, start) = unpack(head);
            if now_ms.saturating_sub(start) >= self.window_ms {
                self.try_advance(head, (index + 1) % self.slots.len(), now_ms);
                continue;
            }
            let slot = &self.slots[index];
            add_f64(&slot.value, value);
            slot.last_event_ms.fetch_max(now_ms, Ordering::AcqRel);
            return;
        }
    }

    /// Moves the head from `head` to slot `next` started at `now_ms`; only
    /// the thread whose exchange succeeds resets the slot. The slot being
    /// reused has been idle for `samples` windows, so nothing writes it
    /// while its old value is read.
    fn try_advance(&self, head: u64, next: usize, now_ms: u64) {
        let slot = &self.slots[next];
        let old = f64::from_bits(slot.value.load(Ordering::Acquire));
        let new_head = pack(next, now_ms);
        if self
            .head
            .compare_exchange(head, new_head, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            slot.start_ms.store(now_ms, Ordering::Release);
            slot.last_event_ms.store(now_ms, Ordering::Release);
            add_f64(&slot.value, -old);
        }
    }

    /// Rate.measure's sum and Rate.windowSize at `now_ms`. Kafka purges
    /// samples idle for `samples` windows by resetting them to `now`; here
    /// they are skipped instead, which gives the same sum and oldest start.
    pub fn measure(&self, now_ms: u64) -> RateMeasure {
        let (sum, oldest) = self.sum_and_oldest_start(now_ms);
        RateMeasure {
            sum,
            window_ms: window_size_ms(oldest, now_ms, self.samples, self.window_ms),
        }
    }

    /// SimpleRate's measure (replication quotas): the same sum over the
    /// time since the oldest live sample started, at least one window
    /// (`SimpleRate.windowSize`; no padding to `samples - 1` windows). As
    /// Kafka's `SampledStat.oldest`, a measure before any record starts
    /// the first sample, so the first window counts from then.
    pub fn simple_measure(&self, now_ms: u64) -> RateMeasure {
        let head = self.head.load(Ordering::Acquire);
        if head == EMPTY_HEAD {
            self.try_advance(head, 0, now_ms);
        }
        let (sum, oldest) = self.sum_and_oldest_start(now_ms);
        RateMeasure {
            sum,
            window_ms: now_ms.saturating_sub(oldest).max(self.window_ms),
        }
    }

    /// The windowed sum and the oldest live sample's start (`now_ms` when
    /// none is live).
    fn sum_and_oldest_start(&self, now_ms: u64) -> (f64, u64) {
        let expire_ms = u64::from(self.samples) * self.window_ms;
        let head = self.head.load(Ordering::Acquire);
        let current = (head != EMPTY_HEAD).then(|| unpack(head));
        let mut sum = 0.0;
        let mut oldest = now_ms;
        for (i, slot) in self.slots.iter().enumerate() {
            let (start, last) = match current {
                Some((index, start)) if index == i => {
                    let last = slot.last_event_ms.load(Ordering::Acquire);
                    (start, last.max(start))
                }
                _ => (
                    slot.start_ms.load(Ordering::Acquire),
                    slot.last_event_ms.load(Ordering::Acquire),
                ),
            };
            if start == NEVER || now_ms.saturating_sub(last) >= expire_ms {
                continue;
            }
            sum += f64::from_bits(slot.value.load(Ordering::Acquire));
            oldest = oldest.min(start);
        }
        (sum, oldest)
    }
}

/// Kafka's TokenBucket: `bound` tokens a second refill a bucket of
/// `samples * window_s * bound` (the burst); a record takes its value out,
/// and the quota is exceeded while tokens are below zero. Its two fields
/// change together, so they sit under a mutex: controller mutations are
/// rare (topic creation and deletion), never on the per-request path.
pub struct TokenBucket {
    samples: u32,
    window_ms: u64,
    state: Mutex<BucketState>,
}

struct BucketState {
    tokens: f64,
    last_update_ms: u64,
}

impl TokenBucket {
    /// Starts empty at time 0, as Kafka's does: the first use refills it.
    pub fn new(samples: u32, window_ms: u64) -> Self {
        TokenBucket {
            samples,
            window_ms,
            state: Mutex::new(BucketState {
                tokens: 0.0,
                last_update_ms: 0,
            }),
        }
    }

    fn burst(&self, bound: f64) -> f64 {
        f64::from(self.samples) * (self.window_ms as f64 / 1000.0) * bound
    }

    fn refill(&self, state: &mut BucketState, bound: f64, now_ms: u64) {
        let elapsed_s = (now_ms as f64 - state.last_update_ms as f64) / 1000.0;
        state.tokens = self.burst(bound).min(state.tokens + bound * elapsed_s);
        state.last_update_ms = now_ms;
    }

    /// Refills, then takes `value` out (capped at the burst).
    pub fn record(&self, value: f64, bound: f64, now_ms: u64) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        self.refill(&mut state, bound, now_ms);
        state.tokens = self.burst(bound).min(state.tokens - value);
    }

    /// Refills and returns the tokens left.
    pub fn measure(&self, bound: f64, now_ms: u64) -> f64 {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        self.refill(&mut state, bound, now_ms);
        state.tokens
    }

    /// The strict quota's check-then-record, atomically: the tokens left
    /// when already exhausted (nothing recorded), else None once recorded.
    pub fn check_and_record(&self, value: f64, bound: f64, now_ms: u64) -> Option<f64> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        self.refill(&mut state, bound, now_ms);
        if state.tokens < 0.0 {
            return Some(state.tokens);
        }
        state.tokens = self.burst(bound).min(state.tokens - value);
        None
    }
}

/// Saturates a throttle time into the range the protocol carries.
pub(super) fn clamp_throttle(ms: i64) -> u64 {
    u64::try_from(ms).unwrap_or(0).min(MAX_THROTTLE_MS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_rounding() {
        assert_eq!(java_round(2.5), 3);
        assert_eq!(java_round(-2.5), -2);
        assert_eq!(java_round(2.4999), 2);
        assert_eq!(java_round(0.49999999999999994), 0);
        assert_eq!(java_round(f64::NAN), 0);
        assert_eq!(java_round(1e30), i64::MAX);
    }

    #[test]
    fn quota_utils_vectors() {
        // QuotaUtilsTest: a fresh rate of n samples has a window of n-1 s.
        assert_eq!(throttle_time_ms(16.5, 16.5, 9_000), 0);
        assert!(throttle_time_ms(16.5, 20.4, 9_000) < 0);
        assert_eq!(
            throttle_time_ms(100.0, 50.0, window_size_ms(0, 0, 3, 1000)),
            2000
        );
        assert_eq!(bounded_throttle_time_ms(18.2, 18.2, 9_000, 500), 0);
        assert!(bounded_throttle_time_ms(16.5, 22.4, 9_000, 500) < 0);
        assert_eq!(
            bounded_throttle_time_ms(55.0, 50.0, window_size_ms(0, 0, 2, 1000), 500),
            100
        );
        assert_eq!(bounded_throttle_time_ms(100.0, 50.0, 9_000, 500), 500);
        assert_eq!(token_bucket_throttle_ms(-80.0, 10.0), 8000);
        assert_eq!(clamp_throttle(-5), 0);
        assert_eq!(clamp_throttle(i64::MAX), i32::MAX as u64);
    }

    #[test]
    fn window_size_padding() {
        // Fewer than samples-1 whole windows: padded to 10 s plus the part.
        assert_eq!(window_size_ms(0, 500, 11, 1000), 10_500);
        assert_eq!(window_size_ms(0, 10_500, 11, 1000), 10_500);
        assert_eq!(window_size_ms(0, 12_300, 11, 1000), 12_300);
        assert_eq!(window_size_ms(0, 0, 1, 1000), 1);
        // A clock that went back counts as no time.
        assert_eq!(window_size_ms(5_000, 4_000, 11, 1000), 10_000);
    }

    #[test]
    fn sampled_rate_quota_violation_vector() {
        // ClientQuotaManagerTest.testQuotaViolation: 400 a second for 10 s,
        // then 2300 half a second later: 6300 / 10.5 s = 600 per second.
        let rate = SampledRate::new(11, 1000);
        let start = 1_000_000;
        for i in 0..10 {
            rate.record(400.0, start + i * 1000);
            assert!(rate.measure(start + i * 1000).per_second() <= 500.0);
        }
        let now = start + 10_500;
        rate.record(2300.0, now);
        let m = rate.measure(now);
        assert_eq!(
            m,
            RateMeasure {
                sum: 6300.0,
                window_ms: 10_500
            }
        );
        assert_eq!(throttle_time_ms(m.per_second(), 500.0, m.window_ms), 2100);
    }

    #[test]
    fn sampled_rate_ring_and_purge() {
        let rate = SampledRate::new(2, 1000);
        rate.record(10.0, 0);
        rate.record(10.0, 999);
        assert_eq!(
            rate.measure(999),
            RateMeasure {
                sum: 20.0,
                window_ms: 1999
            }
        );
        rate.record(5.0, 1000);
        rate.record(5.0, 2000);
        // Slots started at 0, 1000, 2000: the first idle since 999 >= 2 s.
        assert_eq!(
            rate.measure(2999),
            RateMeasure {
                sum: 10.0,
                window_ms: 1999
            }
        );
        // The fourth window reuses the first slot, whose old value is gone;
        // the slot started at 1000 has now been idle for 2 s.
        rate.record(1.0, 3000);
        assert_eq!(
            rate.measure(3000),
            RateMeasure {
                sum: 6.0,
                window_ms: 1000
            }
        );
        // After a long idle spell everything is purged.
        assert_eq!(
            rate.measure(60_000),
            RateMeasure {
                sum: 0.0,
                window_ms: 1000
            }
        );
        rate.record(7.0, 60_000);
        assert_eq!(
            rate.measure(60_000),
            RateMeasure {
                sum: 7.0,
                window_ms: 1000
            }
        );
    }

    #[test]
    fn token_bucket_vector() {
        // Rate 10 with 10 one-second samples: a burst of 100.
        let bucket = TokenBucket::new(10, 1000);
        let now = 1_000_000;
        assert_eq!(bucket.check_and_record(90.0, 10.0, now), None);
        assert_eq!(bucket.measure(10.0, now), 10.0);
        assert_eq!(bucket.check_and_record(90.0, 10.0, now), None);
        let tokens = bucket.check_and_record(1.0, 10.0, now).unwrap();
        assert_eq!(token_bucket_throttle_ms(tokens, 10.0), 8000);
        let tokens = bucket.check_and_record(1.0, 10.0, now + 5000).unwrap();
        assert_eq!(token_bucket_throttle_ms(tokens, 10.0), 3000);
        bucket.record(1000.0, 10.0, now + 5000);
        assert_eq!(bucket.measure(10.0, now + 5000), -1030.0);
    }
}
