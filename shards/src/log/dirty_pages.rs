//! Whether the kernel is near throttling page-cache writers. Buffered
//! offload (`IoMode::BufferedOffload`) appends synchronously on the shard
//! (one `pwrite` in the produce: the lowest latency) while the system's
//! dirty pages are well under the background writeback threshold, and
//! stages appends for io_uring's kernel workers once they are not: before
//! the kernel's `balance_dirty_pages` pauses writers, which it starts above
//! the midpoint of the background and foreground limits.
//!
//! A sampler thread reads `/proc` every [`SAMPLE_INTERVAL`] and sets one
//! process-wide flag; until it runs the flag says "offload".
//!
//! The thresholds do not predict every slow write: right after gigabytes
//! were written (another process's, or retention's deletes) a page-cache
//! `pwrite` well under them held a shard 10-160 ms, in bursts. So a
//! synchronous write slower than [`SLOW_WRITE`] turns offload on at once,
//! and the sampler keeps it on for [`SLOW_WRITE_HOLD`] after the last one.
//! Writes each under it count too when a shard's add up to it within
//! [`SLOW_WRITE_WINDOW`]: one request's appends, a few MiB each into pages
//! the VM backs slowly, held a shard 20-60 ms with none over 5 ms.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::LazyLock;
use std::time::{Duration, Instant};

/// How often the sampler looks. At 1 GB/s of appends the dirty pages grow
/// 50 MB between looks, far under the thresholds (gigabytes on a host with
/// tens of GiB).
pub const SAMPLE_INTERVAL: Duration = Duration::from_millis(50);

/// A synchronous buffered write slower than this turns offload on: half
/// the stall detector's default threshold. A megabyte into the page cache
/// takes a few hundred microseconds here, up to 3 ms when the VM backs
/// fresh pages slowly; offload's io_uring workers copy no faster (they
/// cost a fifth more CPU in that state), so slow copies alone do not
/// trigger it, only writes that block.
pub const SLOW_WRITE: Duration = Duration::from_millis(5);

/// How long offload stays on after the last slow write.
pub const SLOW_WRITE_HOLD: Duration = Duration::from_secs(5);

/// Synchronous writes on one shard adding up to `SLOW_WRITE` within this
/// are as slow as one write of that length.
pub const SLOW_WRITE_WINDOW: Duration = Duration::from_millis(20);

/// A shard's synchronous write time since `window_start_ms`.
#[derive(Clone, Copy, Default)]
struct RecentWrites {
    window_start_ms: u64,
    write_time_us: u64,
}

impl RecentWrites {
    /// With a write of `elapsed` ending at `now_ms`; a new window starts
    /// when the current one is over.
    fn add(self, now_ms: u64, elapsed: Duration) -> RecentWrites {
        let window_ms = SLOW_WRITE_WINDOW.as_millis() as u64;
        let mut recent = self;
        if now_ms.saturating_sub(recent.window_start_ms) >= window_ms {
            recent = RecentWrites {
                window_start_ms: now_ms,
                write_time_us: 0,
            };
        }
        recent.write_time_us += elapsed.as_micros() as u64;
        recent
    }

    fn is_slow(&self) -> bool {
        self.write_time_us >= SLOW_WRITE.as_micros() as u64
    }
}

thread_local! {
    static RECENT_WRITES: std::cell::Cell<RecentWrites> =
        const { std::cell::Cell::new(RecentWrites { window_start_ms: 0, write_time_us: 0 }) };
}

static OFFLOAD: AtomicBool = AtomicBool::new(true);

/// When the last slow write ended, in milliseconds after `CLOCK_START`
/// (0: none yet).
static SLOW_WRITE_AT_MS: AtomicU64 = AtomicU64::new(0);

static CLOCK_START: LazyLock<Instant> = LazyLock::new(Instant::now);

fn clock_ms() -> u64 {
    // At least 1, so 0 stays "never".
    CLOCK_START.elapsed().as_millis() as u64 + 1
}

/// A synchronous buffered append on this shard took `elapsed`: a slow one,
/// or one that brings this shard's writes in the window to a slow one's
/// time, turns offload on for the appends after it.
pub fn note_write_time(elapsed: Duration) {
    let now_ms = clock_ms();
    let recent = RECENT_WRITES.with(|cell| {
        let recent = cell.get().add(now_ms, elapsed);
        cell.set(recent);
        recent
    });
    if recent.is_slow() {
        log::debug!(
            "buffered appends took {} us in {SLOW_WRITE_WINDOW:?}: offloading appends",
            recent.write_time_us
        );
        SLOW_WRITE_AT_MS.store(now_ms, Ordering::Relaxed);
        OFFLOAD.store(true, Ordering::Relaxed);
    }
}

/// A slow write ended within the hold.
fn slow_write_recent(now_ms: u64) -> bool {
    let at = SLOW_WRITE_AT_MS.load(Ordering::Relaxed);
    at != 0 && now_ms.saturating_sub(at) < SLOW_WRITE_HOLD.as_millis() as u64
}

/// Buffered appends should be staged for io_uring's workers now.
pub fn offload_writes() -> bool {
    #[cfg(test)]
    if let Some(forced) = tests::FORCED.with(|f| f.get()) {
        return forced;
    }
    OFFLOAD.load(Ordering::Relaxed)
}

/// Test builds: `offload_writes` answers `forced` on this thread, whatever
/// the process-wide flag says (tests run side by side in one process).
#[cfg(test)]
pub(crate) fn force_offload_writes(forced: Option<bool>) {
    tests::FORCED.with(|f| f.set(forced));
}

/// The kernel's view of dirty page-cache memory, in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DirtyState {
    /// `nr_dirty + nr_writeback` pages.
    pub dirty_bytes: u64,
    /// Where background writeback starts (`vm.dirty_background_bytes`, or
    /// `vm.dirty_background_ratio` of the dirtyable memory).
    pub background_bytes: u64,
}

impl DirtyState {
    /// Offload from half the background threshold; back inline under a
    /// quarter (the gap keeps the choice from flapping).
    pub fn offload(&self, offloading: bool) -> bool {
        let dirty = self.dirty_bytes.saturating_mul(4);
        if offloading {
            dirty >= self.background_bytes
        } else {
            dirty >= self.background_bytes.saturating_mul(2)
        }
    }
}

fn field(text: &str, name: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let rest = line.strip_prefix(name)?;
        let rest = rest.strip_prefix(':').unwrap_or(rest);
        rest.split_whitespace().next()?.parse().ok()
    })
}

/// Reads the state from `/proc/vmstat`, `/proc/meminfo` and the two
/// `vm.dirty_background_*` settings. Dirtyable memory is free plus file
/// pages, as the kernel's `global_dirtyable_memory` (without its reserve).
pub fn parse_dirty_state(
    vmstat: &str,
    meminfo: &str,
    background_ratio: u64,
    background_bytes: u64,
) -> Option<DirtyState> {
    const PAGE_BYTES: u64 = 4096;
    let pages = field(vmstat, "nr_dirty ")? + field(vmstat, "nr_writeback ")?;
    let background = if background_bytes > 0 {
        background_bytes
    } else {
        let kib = field(meminfo, "MemFree")?
            + field(meminfo, "Active(file)")?
            + field(meminfo, "Inactive(file)")?;
        kib * 1024 * background_ratio / 100
    };
    Some(DirtyState {
        dirty_bytes: pages * PAGE_BYTES,
        background_bytes: background,
    })
}

fn read_dirty_state() -> Option<DirtyState> {
    let read = |p: &str| std::fs::read_to_string(p).ok();
    let number = |p: &str| read(p).and_then(|s| s.trim().parse::<u64>().ok());
    parse_dirty_state(
        &read("/proc/vmstat")?,
        &read("/proc/meminfo")?,
        number("/proc/sys/vm/dirty_background_ratio")?,
        number("/proc/sys/vm/dirty_background_bytes").unwrap_or(0),
    )
}

/// Starts the sampler thread (once per process). Where `/proc` cannot be
/// read the flag stays at "offload".
pub fn start_sampler() -> std::io::Result<()> {
    static STARTED: AtomicBool = AtomicBool::new(false);
    if STARTED.swap(true, Ordering::AcqRel) {
        return Ok(());
    }
    std::thread::Builder::new()
        .name("dirty-pages".into())
        .spawn(|| {
            // The thresholds' own choice, with its hysteresis; a slow
            // write's hold is added on top.
            let mut near_thresholds = true;
            loop {
                if let Some(state) = read_dirty_state() {
                    near_thresholds = state.offload(near_thresholds);
                    let offload = near_thresholds || slow_write_recent(clock_ms());
                    OFFLOAD.store(offload, Ordering::Relaxed);
                }
                std::thread::sleep(SAMPLE_INTERVAL);
            }
        })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    thread_local! {
        pub(super) static FORCED: std::cell::Cell<Option<bool>> = const { std::cell::Cell::new(None) };
    }

    const VMSTAT: &str =
        "nr_free_pages 100\nnr_dirty 2500\nnr_dirty_threshold 9\nnr_writeback 500\n";
    const MEMINFO: &str =
        "MemTotal: 100 kB\nMemFree:  60000 kB\nActive(file): 30000 kB\nInactive(file): 10000 kB\n";

    #[test]
    fn parses_pages_and_the_ratio_threshold() {
        let s = parse_dirty_state(VMSTAT, MEMINFO, 10, 0).unwrap();
        assert_eq!(s.dirty_bytes, 3000 * 4096);
        assert_eq!(s.background_bytes, 100_000 * 1024 / 10);
        let s = parse_dirty_state(VMSTAT, MEMINFO, 10, 5_000_000).unwrap();
        assert_eq!(s.background_bytes, 5_000_000);
        assert!(parse_dirty_state("nr_dirty 1\n", MEMINFO, 10, 0).is_none());
    }

    #[test]
    fn a_slow_write_holds_offload_on_for_the_hold() {
        note_write_time(SLOW_WRITE);
        assert!(OFFLOAD.load(Ordering::Relaxed));
        let at = SLOW_WRITE_AT_MS.load(Ordering::Relaxed);
        assert!(at > 0);
        let hold_ms = SLOW_WRITE_HOLD.as_millis() as u64;
        assert!(slow_write_recent(at));
        assert!(slow_write_recent(at + hold_ms - 1));
        assert!(!slow_write_recent(at + hold_ms));
    }

    #[test]
    fn fast_writes_adding_up_to_a_slow_one_in_the_window_are_slow() {
        let quarter = SLOW_WRITE / 4;
        let window_ms = SLOW_WRITE_WINDOW.as_millis() as u64;
        let mut recent = RecentWrites::default();
        for i in 0..3 {
            recent = recent.add(1_000 + i, quarter);
            assert!(!recent.is_slow(), "{i} quarters");
        }
        assert!(recent.add(1_003, quarter).is_slow());
        // Spread over more than the window, the same writes are not.
        let mut recent = RecentWrites::default();
        for i in 0..4 {
            recent = recent.add(1_000 + i * window_ms, quarter);
            assert!(!recent.is_slow());
        }
        assert!(RecentWrites::default().add(1, SLOW_WRITE).is_slow());
    }

    #[test]
    fn offloads_from_half_the_threshold_and_stops_under_a_quarter() {
        let at = |dirty_bytes| DirtyState {
            dirty_bytes,
            background_bytes: 1000,
        };
        assert!(!at(499).offload(false));
        assert!(at(500).offload(false));
        assert!(
            at(300).offload(true),
            "between a quarter and a half it stays"
        );
        assert!(!at(300).offload(false));
        assert!(!at(249).offload(true));
        assert!(at(250).offload(true));
    }
}
