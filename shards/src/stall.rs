//! The per-shard stall detector: a task that keeps its shard from polling
//! for longer than a threshold is logged with where it was, and counted.
//!
//! glommio 0.9's own detector does not measure this. It arms a timer for
//! each run of a task queue at the queue's preemption slice *plus* a
//! threshold, and the slice is 100 ms by default: a shard could go 110 ms
//! without polling, unreported. It also resolves the backtrace on the
//! stalled shard (the first resolution reads the binary's debug info, a
//! second stall), costs two timerfd syscalls per run, and does not export
//! the type its handler receives, so a handler cannot count what it sees.
//!
//! So: glommio calls a stall handler's `threshold` each time a task queue
//! starts a run; ours stamps the time there and returns `None` (glommio arms
//! nothing). One watchdog thread for all shards looks at the stamps and at
//! each shard thread's state every tick. A shard that goes past the
//! threshold without starting a run or being seen parked in
//! `io_uring_enter` (idle after its run ended) is stalled if its thread is
//! asleep in another syscall, or runs and was scheduled at least half the
//! time: then the watchdog signals the shard's thread, whose handler
//! records the instruction pointers of its stack, and the watchdog
//! resolves them. The stall ends when a new run starts or the shard parks;
//! its length is known to a tick, and one that ends within a tick of the
//! threshold can go unseen. A parked shard is never stalled, however much
//! its thread is woken: glommio's reactor runs io_uring's task work and a
//! `membarrier` around each sleep, and with the CPUs busy a parked shard's
//! thread was scheduled more than half the time, which the watchdog used
//! to count as a 12-14 ms stall (the partitions workload, tuning.md).
//!
//! Shards also run with a preemption slice of half the threshold, which is
//! what makes `glommio::yield_if_needed` yield in time.
//!
//! Each stall logs one line (`STALL_LOG_PREFIX`, parsed by perf/compare.py
//! and perf/stalls.sh) and each shard's totals are logged when the
//! detector stops.

use std::cell::Cell;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use glommio::{LocalExecutorBuilder, StallDetectionHandler, TaskQueueHandle};

/// Starts every stall line: `shard stall: shard=N stall_ms=F runq_ms=F
/// task_ms=F count=N worst_ms=F at: frame <- frame ...` (innermost frame
/// first). `stall_ms` is the time the shard did not poll, `runq_ms` the
/// part of it its thread waited for a CPU (another process ran), `task_ms`
/// the rest: the task's. `count` and `worst_ms` count task stalls (a
/// `task_ms` over the threshold). A stall still going on after 2 s is also
/// logged then, as `shard stall: shard=N ongoing_ms=F (still stalled) at:`.
pub const STALL_LOG_PREFIX: &str = "shard stall:";
/// Starts each shard's totals line, logged when the detector stops.
pub const STALL_TOTALS_LOG_PREFIX: &str = "shard stall totals:";
/// The instruction pointers captured per stall.
const IPS_MAX: usize = 64;
/// The frames of kshard's own code a stall line shows.
const FRAMES_MAX: usize = 8;
/// A stall this long is logged while it goes on, not only when it ends: a
/// shard stuck for good (a deadlock, a syscall that never returns) would
/// otherwise never say where.
const LONG_STALL: Duration = Duration::from_secs(2);
/// The signal that asks a stalled shard for its stack.
const CAPTURE_SIGNAL: i32 = libc::SIGUSR2;

/// How the executors of shards detect stalls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StallSettings {
    /// A shard not polling for longer than this is a stall.
    pub threshold: Duration,
}

impl StallSettings {
    /// `shard.stall.threshold.ms`; 0 turns detection off (and leaves
    /// glommio's 100 ms preemption slice).
    pub fn from_threshold_ms(threshold_ms: u64) -> Option<StallSettings> {
        (threshold_ms > 0).then(|| StallSettings {
            threshold: Duration::from_millis(threshold_ms),
        })
    }

    /// The task queue's preemption slice: half the threshold, so a task
    /// that yields when asked never stalls its shard.
    pub fn preempt_slice(&self) -> Duration {
        self.threshold / 2
    }

    /// How often the watchdog looks: a quarter of the threshold, at least
    /// 1 ms. (Each look wakes the watchdog and reads a `schedstat` per
    /// shard: at a tenth of the default threshold that was 4-7% of a busy
    /// broker's CPU on a 2-core VM.)
    fn tick(&self) -> Duration {
        (self.threshold / 4).max(Duration::from_millis(1))
    }
}

/// One shard's task stalls so far (see `STALL_LOG_PREFIX`).
#[derive(Debug, Default)]
pub struct StallStats {
    count: AtomicU64,
    worst_us: AtomicU64,
    /// Stalls logged while still going on.
    ongoing_logged: AtomicU64,
}

/// A snapshot of [`StallStats`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StallTotals {
    pub count: u64,
    pub worst_us: u64,
}

impl StallStats {
    fn record(&self, stall: Duration) -> StallTotals {
        let stall_us = u64::try_from(stall.as_micros()).expect("a stall under 584,000 years");
        let count = self.count.fetch_add(1, Ordering::Relaxed) + 1;
        let worst_us = self
            .worst_us
            .fetch_max(stall_us, Ordering::Relaxed)
            .max(stall_us);
        StallTotals { count, worst_us }
    }

    pub fn totals(&self) -> StallTotals {
        StallTotals {
            count: self.count.load(Ordering::Relaxed),
            worst_us: self.worst_us.load(Ordering::Relaxed),
        }
    }
}

/// What a shard shares with the watchdog and its signal handler.
#[derive(Debug)]
struct ShardSlot {
    /// Bumped when a task queue run starts (after `run_started_ns`).
    run_seq: AtomicU64,
    run_started_ns: AtomicU64,
    /// Linux thread id (for /proc) and pthread id (to signal), 0 until the
    /// shard's thread registers.
    tid: AtomicI32,
    pthread: AtomicUsize,
    capture_requested: AtomicBool,
    ips: [AtomicUsize; IPS_MAX],
    /// Set by the signal handler once `ips` hold the stack.
    ips_len: AtomicUsize,
    stats: StallStats,
}

impl ShardSlot {
    fn new() -> ShardSlot {
        ShardSlot {
            run_seq: AtomicU64::new(0),
            run_started_ns: AtomicU64::new(now_ns()),
            tid: AtomicI32::new(0),
            pthread: AtomicUsize::new(0),
            capture_requested: AtomicBool::new(false),
            ips: std::array::from_fn(|_| AtomicUsize::new(0)),
            ips_len: AtomicUsize::new(0),
            stats: StallStats::default(),
        }
    }
}

/// Nanoseconds on the monotonic clock since the first call in the process.
fn now_ns() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    let epoch = *EPOCH.get_or_init(Instant::now);
    u64::try_from(epoch.elapsed().as_nanos()).expect("under 584 years")
}

thread_local! {
    /// The slot of the shard running on this thread, for the signal handler.
    static THIS_SHARD: Cell<*const ShardSlot> = const { Cell::new(std::ptr::null()) };
}

/// The detector of a set of shards: its watchdog thread runs until drop,
/// which logs every shard's totals.
#[derive(Debug)]
pub struct StallDetector {
    settings: StallSettings,
    slots: Vec<Arc<ShardSlot>>,
    stop: Arc<AtomicBool>,
    watchdog: Option<JoinHandle<()>>,
}

impl StallDetector {
    pub fn start(settings: StallSettings, nr_shards: usize) -> io::Result<StallDetector> {
        install_capture_handler()?;
        let slots: Vec<Arc<ShardSlot>> =
            (0..nr_shards).map(|_| Arc::new(ShardSlot::new())).collect();
        let stop = Arc::new(AtomicBool::new(false));
        let watchdog = {
            let (slots, stop) = (slots.clone(), stop.clone());
            std::thread::Builder::new()
                .name("stall-watchdog".into())
                .spawn(move || Watchdog::new(settings, slots).run(&stop))?
        };
        Ok(StallDetector {
            settings,
            slots,
            stop,
            watchdog: Some(watchdog),
        })
    }

    /// Sets `builder`'s preemption slice and the hook that stamps shard
    /// `shard_id`'s runs.
    pub fn configure(
        &self,
        builder: LocalExecutorBuilder,
        shard_id: usize,
    ) -> LocalExecutorBuilder {
        builder
            .preempt_timer(self.settings.preempt_slice())
            .detect_stalls(Some(Box::new(RunStamp {
                slot: self.slots[shard_id].clone(),
            })))
    }

    /// Called on shard `shard_id`'s executor thread before it runs tasks.
    pub fn register_current_thread(&self, shard_id: usize) {
        let slot = &self.slots[shard_id];
        // SAFETY: gettid and pthread_self cannot fail.
        let (tid, pthread) = unsafe { (libc::gettid(), libc::pthread_self()) };
        slot.pthread.store(pthread as usize, Ordering::Relaxed);
        slot.tid.store(tid, Ordering::Release);
        // The slot outlives the thread's use of it: the detector (and so
        // the Arc) is dropped only after every shard's thread has joined.
        THIS_SHARD.with(|s| s.set(Arc::as_ptr(slot)));
    }

    pub fn totals(&self, shard_id: usize) -> StallTotals {
        self.slots[shard_id].stats.totals()
    }

    #[cfg(test)]
    fn ongoing_logged(&self, shard_id: usize) -> u64 {
        self.slots[shard_id]
            .stats
            .ongoing_logged
            .load(Ordering::Relaxed)
    }
}

impl Drop for StallDetector {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(watchdog) = self.watchdog.take() {
            if watchdog.join().is_err() {
                log::error!("the stall watchdog panicked");
            }
        }
        for (shard_id, slot) in self.slots.iter().enumerate() {
            let t = slot.stats.totals();
            log::info!(
                "{STALL_TOTALS_LOG_PREFIX} shard={shard_id} count={} worst_ms={:.1}",
                t.count,
                t.worst_us as f64 / 1000.0
            );
        }
    }
}

/// glommio's stall hook, used only to stamp the start of each run.
#[derive(Debug)]
struct RunStamp {
    slot: Arc<ShardSlot>,
}

impl StallDetectionHandler for RunStamp {
    fn threshold(&self, _queue: TaskQueueHandle, _slice: Duration) -> Option<Duration> {
        self.slot.run_started_ns.store(now_ns(), Ordering::Relaxed);
        self.slot.run_seq.fetch_add(1, Ordering::Release);
        // Arm nothing: the watchdog measures.
        None
    }
}

/// Registers (once per process) the handler that writes a stalled shard's
/// stack into its slot.
fn install_capture_handler() -> io::Result<()> {
    static INSTALLED: OnceLock<Result<(), String>> = OnceLock::new();
    let installed = INSTALLED.get_or_init(|| {
        // SAFETY: the handler only reads a thread-local pointer, atomics,
        // and walks the stack without allocating (as glommio's does).
        unsafe { signal_hook_registry::register(CAPTURE_SIGNAL, capture_stack) }
            .map(drop)
            .map_err(|e| e.to_string())
    });
    installed.clone().map_err(io::Error::other)
}

fn capture_stack() {
    let slot = THIS_SHARD.with(|s| s.get());
    if slot.is_null() {
        return;
    }
    // SAFETY: set by `register_current_thread`; see there for its lifetime.
    let slot = unsafe { &*slot };
    if !slot.capture_requested.swap(false, Ordering::Acquire) {
        return;
    }
    let mut len = 0;
    // SAFETY: trace_unsynchronized races only with other unwinds on this
    // thread, and this thread is stopped in its handler.
    unsafe {
        backtrace::trace_unsynchronized(|frame| {
            slot.ips[len].store(frame.ip() as usize, Ordering::Relaxed);
            len += 1;
            len < IPS_MAX
        });
    }
    slot.ips_len.store(len, Ordering::Release);
}

#[path = "stall_watchdog.rs"]
mod watchdog;
use watchdog::Watchdog;

#[cfg(test)]
#[path = "stall_tests.rs"]
mod tests;
