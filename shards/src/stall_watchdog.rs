//! The watchdog thread of the stall detector (see `stall.rs`).

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::{
    now_ns, ShardSlot, StallSettings, CAPTURE_SIGNAL, FRAMES_MAX, LONG_STALL, STALL_LOG_PREFIX,
};

/// A shard thread's scheduling at a moment (`/proc/<tid>/schedstat`).
#[derive(Debug, Clone, Copy)]
struct SchedSample {
    at_ns: u64,
    /// Time on a CPU and waiting for one (runnable, another thread ran).
    cpu_ns: u64,
    runq_wait_ns: u64,
}

/// A stall the watchdog has seen start and not yet end.
#[derive(Debug)]
struct Ongoing {
    run_seq: u64,
    run_started_ns: u64,
    /// The thread's scheduling at the last look before the run started.
    before: Option<SchedSample>,
    /// Logged while still going on (see `LONG_STALL`).
    logged_ongoing: bool,
}

#[derive(Debug, PartialEq, Eq)]
enum ThreadState {
    /// In `io_uring_enter` (a glommio executor parked for want of work),
    /// or exited.
    Parked,
    /// In another syscall.
    Blocked,
    /// Not in a syscall.
    Running,
}

/// What the watchdog knows of one shard.
#[derive(Debug, Default)]
struct ShardWatch {
    ongoing: Option<Ongoing>,
    /// A run found idle (its shard parked after it): not a stall.
    idle_run_seq: Option<u64>,
    /// `/proc/self/task/<tid>/schedstat`, open once, read every look.
    schedstat: Option<File>,
    last: Option<SchedSample>,
    /// The run last seen, and the sample of the look before it started.
    run: Option<(u64, Option<SchedSample>)>,
}

impl ShardWatch {
    fn sample(&mut self, tid: i32, now: u64) -> Option<SchedSample> {
        if self.schedstat.is_none() {
            self.schedstat = File::open(format!("/proc/self/task/{tid}/schedstat")).ok();
        }
        let mut buf = [0u8; 128];
        let n = self.schedstat.as_ref()?.read_at(&mut buf, 0).ok()?;
        let text = std::str::from_utf8(&buf[..n]).ok()?;
        let mut fields = text.split_whitespace().map(|f| f.parse::<u64>().ok());
        Some(SchedSample {
            at_ns: now,
            cpu_ns: fields.next()??,
            runq_wait_ns: fields.next()??,
        })
    }
}

/// A run past the threshold is a stall if its thread was on (or waiting
/// for) a CPU at least half the time since it started, or is blocked in a
/// syscall other than the reactor's. Otherwise the run ended and the shard
/// is idle: it parks, and wakes now and then without running a task queue
/// (its preemption timer), so no new run is stamped.
fn is_stalled(tid: i32, before: Option<SchedSample>, now: Option<SchedSample>) -> bool {
    match (before, now) {
        (Some(before), Some(now)) => {
            let scheduled = (now.cpu_ns - before.cpu_ns) + (now.runq_wait_ns - before.runq_wait_ns);
            2 * scheduled >= now.at_ns - before.at_ns || thread_state(tid) == ThreadState::Blocked
        }
        // The run started before the first look: only its state tells.
        _ => thread_state(tid) != ThreadState::Parked,
    }
}

pub(super) struct Watchdog {
    settings: StallSettings,
    slots: Vec<Arc<ShardSlot>>,
    watches: Vec<ShardWatch>,
}

impl Watchdog {
    pub(super) fn new(settings: StallSettings, slots: Vec<Arc<ShardSlot>>) -> Watchdog {
        let watches = slots.iter().map(|_| ShardWatch::default()).collect();
        Watchdog {
            settings,
            slots,
            watches,
        }
    }

    pub(super) fn run(mut self, stop: &AtomicBool) {
        let tick = self.settings.tick();
        while !stop.load(Ordering::Relaxed) {
            std::thread::sleep(tick);
            for shard_id in 0..self.slots.len() {
                self.look_at(shard_id);
            }
        }
        let now = now_ns();
        for shard_id in 0..self.slots.len() {
            if let Some(ongoing) = self.watches[shard_id].ongoing.take() {
                self.report(shard_id, &ongoing, now, None);
            }
        }
    }

    fn look_at(&mut self, shard_id: usize) {
        let slot = &self.slots[shard_id];
        let tid = slot.tid.load(Ordering::Acquire);
        if tid == 0 {
            return; // not started yet
        }
        let run_seq = slot.run_seq.load(Ordering::Acquire);
        let run_started_ns = slot.run_started_ns.load(Ordering::Relaxed);
        if slot.run_seq.load(Ordering::Acquire) != run_seq {
            return; // a run started while reading: not stalled
        }
        let now = now_ns();
        let watch = &mut self.watches[shard_id];
        let sample = watch.sample(tid, now);
        let previous = std::mem::replace(&mut watch.last, sample);
        if watch.run.map(|(seq, _)| seq) != Some(run_seq) {
            watch.run = Some((run_seq, previous));
        }
        if let Some(ongoing) = &watch.ongoing {
            let new_run = run_seq != ongoing.run_seq;
            if new_run || thread_state(tid) == ThreadState::Parked {
                // The stall ended before this look: at the new run's start
                // or, when it parked, within the last tick.
                let end = if new_run {
                    run_started_ns.min(now)
                } else {
                    now
                };
                let ongoing = watch.ongoing.take().expect("ongoing");
                if !new_run {
                    watch.idle_run_seq = Some(run_seq);
                }
                self.report(shard_id, &ongoing, end, sample);
            } else if !ongoing.logged_ongoing
                && now.saturating_sub(ongoing.run_started_ns) >= LONG_STALL.as_nanos() as u64
            {
                self.log_ongoing(shard_id, now);
            }
            return;
        }
        let age = Duration::from_nanos(now.saturating_sub(run_started_ns));
        if age <= self.settings.threshold || watch.idle_run_seq == Some(run_seq) {
            return;
        }
        let before = watch.run.and_then(|(_, before)| before);
        if is_stalled(tid, before, sample) {
            self.start_stall(shard_id, run_seq, run_started_ns, before);
        } else {
            watch.idle_run_seq = Some(run_seq);
        }
    }

    /// Asks the stalled shard's thread for its stack, to be read when the
    /// stall ends.
    fn start_stall(
        &mut self,
        shard_id: usize,
        run_seq: u64,
        run_started_ns: u64,
        before: Option<SchedSample>,
    ) {
        let slot = &self.slots[shard_id];
        slot.ips_len.store(0, Ordering::Relaxed);
        slot.capture_requested.store(true, Ordering::Release);
        // SAFETY: the pthread is alive: its shard has a run in progress and
        // the detector outlives every shard thread.
        let sent = unsafe {
            libc::pthread_kill(
                slot.pthread.load(Ordering::Relaxed) as libc::pthread_t,
                CAPTURE_SIGNAL,
            )
        };
        if sent != 0 {
            slot.capture_requested.store(false, Ordering::Relaxed);
        }
        self.watches[shard_id].ongoing = Some(Ongoing {
            run_seq,
            run_started_ns,
            before,
            logged_ongoing: false,
        });
    }

    /// Logs a long stall that has not ended, with the stack its shard
    /// captured (or that it captured none: it has not run its handler).
    fn log_ongoing(&mut self, shard_id: usize, now_ns: u64) {
        let ongoing = self.watches[shard_id]
            .ongoing
            .as_mut()
            .expect("an ongoing stall");
        ongoing.logged_ongoing = true;
        self.slots[shard_id]
            .stats
            .ongoing_logged
            .fetch_add(1, Ordering::Relaxed);
        let stall = Duration::from_nanos(now_ns.saturating_sub(ongoing.run_started_ns));
        let frames = match self.captured_ips(shard_id) {
            ips if ips.is_empty() => {
                "(no stack: the shard has not run its signal handler)".to_string()
            }
            ips => useful_frames(&ips).join(" <- "),
        };
        log::warn!(
            "{STALL_LOG_PREFIX} shard={shard_id} ongoing_ms={:.1} (still stalled) at: {frames}",
            stall.as_secs_f64() * 1000.0,
        );
    }

    /// The instruction pointers the shard's handler stored, if it has.
    fn captured_ips(&self, shard_id: usize) -> Vec<usize> {
        let slot = &self.slots[shard_id];
        let len = slot.ips_len.load(Ordering::Acquire);
        slot.ips[..len]
            .iter()
            .map(|ip| ip.load(Ordering::Relaxed))
            .collect()
    }

    fn report(&self, shard_id: usize, ongoing: &Ongoing, end_ns: u64, after: Option<SchedSample>) {
        let slot = &self.slots[shard_id];
        let stall = Duration::from_nanos(end_ns.saturating_sub(ongoing.run_started_ns));
        // Time the thread was runnable but not running (another process
        // had the CPU) is not the task's. Unknown after the thread exits.
        let runq_wait = match (ongoing.before, after) {
            (Some(before), Some(after)) => {
                Duration::from_nanos(after.runq_wait_ns - before.runq_wait_ns)
            }
            _ => Duration::ZERO,
        };
        let task = stall.saturating_sub(runq_wait);
        let totals = if task > self.settings.threshold {
            slot.stats.record(task)
        } else {
            slot.stats.totals()
        };
        let ips = self.captured_ips(shard_id);
        slot.ips_len.store(0, Ordering::Relaxed);
        slot.capture_requested.store(false, Ordering::Relaxed);
        // A stall that is the OS's (the thread waited for a CPU) only at
        // debug level: on a shared machine there are many.
        let level = if task > self.settings.threshold {
            log::Level::Warn
        } else {
            log::Level::Debug
        };
        if !log::log_enabled!(level) {
            return; // nor symbolized: that costs the broker memory (below)
        }
        let frames = if ips.is_empty() {
            "(not captured: the stall ended first)".to_string()
        } else {
            useful_frames(&ips).join(" <- ")
        };
        log::log!(
            level,
            "{STALL_LOG_PREFIX} shard={shard_id} stall_ms={:.1} runq_ms={:.1} task_ms={:.1} count={} worst_ms={:.1} at: {frames}",
            stall.as_secs_f64() * 1000.0,
            runq_wait.as_secs_f64() * 1000.0,
            task.as_secs_f64() * 1000.0,
            totals.count,
            totals.worst_us as f64 / 1000.0,
        );
    }
}

fn thread_state(tid: i32) -> ThreadState {
    match std::fs::read_to_string(format!("/proc/self/task/{tid}/syscall")) {
        Ok(text) => parse_syscall(&text),
        Err(_) => ThreadState::Parked,
    }
}

/// `/proc/<tid>/syscall` starts with the number of the syscall the thread
/// is blocked in, or `running` / `-1` when it is not in one.
fn parse_syscall(text: &str) -> ThreadState {
    match text
        .split_whitespace()
        .next()
        .and_then(|n| n.parse::<i64>().ok())
    {
        Some(libc::SYS_io_uring_enter) => ThreadState::Parked,
        Some(n) if n >= 0 => ThreadState::Blocked,
        _ => ThreadState::Running,
    }
}

/// Where a stall was, innermost first, as `function (file:line)`: the
/// frame the signal interrupted, then the innermost frames of kshard's own
/// code (or, with none, the next frames of any code).
///
/// Symbolizing maps and parses the binary's debug information (about 90 MiB
/// resident with kshard's); the cache is dropped and the heap trimmed after
/// each stall, so a logged stall costs the watchdog's time, not the
/// broker's memory.
fn useful_frames(ips: &[usize]) -> Vec<String> {
    let frames = resolve_useful_frames(ips);
    backtrace::clear_symbol_cache();
    // The parse went to the heap; give its pages back (the broker keeps
    // glibc from trimming on its own, see `alloc_guard`).
    // SAFETY: malloc_trim only releases free memory of glibc's arenas.
    unsafe {
        libc::malloc_trim(0);
    }
    frames
}

fn resolve_useful_frames(ips: &[usize]) -> Vec<String> {
    let mut all: Vec<(String, bool)> = Vec::new();
    for &ip in ips {
        backtrace::resolve(ip as *mut std::ffi::c_void, |symbol| {
            let name = symbol
                .name()
                .map(|n| format!("{n:#}"))
                .unwrap_or_else(|| format!("{ip:#x}"));
            if is_signal_frame(&name) {
                all.clear(); // everything so far was the handler's
                return;
            }
            let ours = is_kshard_frame(&name);
            let at = match (symbol.filename(), symbol.lineno()) {
                (Some(file), Some(line)) => {
                    format!(" ({}:{line})", short_path(&file.to_string_lossy()))
                }
                _ => String::new(),
            };
            all.push((format!("{name}{at}"), ours));
        });
    }
    let mut frames = all.iter();
    let Some((innermost, _)) = frames.next() else {
        return Vec::new();
    };
    let mut chosen = vec![innermost.clone()];
    let ours: Vec<String> = frames
        .clone()
        .filter(|(_, o)| *o)
        .map(|(f, _)| f.clone())
        .collect();
    if ours.is_empty() {
        chosen.extend(frames.map(|(f, _)| f.clone()));
    } else {
        chosen.extend(ours);
    }
    chosen.truncate(FRAMES_MAX);
    chosen
}

fn is_signal_frame(name: &str) -> bool {
    name.starts_with("signal_hook_registry::") || name.starts_with("__restore_rt")
}

fn is_kshard_frame(name: &str) -> bool {
    let name = name.trim_start_matches('<');
    (name.starts_with("kshard::") || name.starts_with("kshard_shards::"))
        && !name.starts_with("kshard_shards::stall")
}

/// `src/x/y.rs` (or `shards/src/x/y.rs`) from an absolute path.
fn short_path(path: &str) -> &str {
    for marker in ["/shards/src/", "/src/"] {
        if let Some(i) = path.rfind(marker) {
            return &path[i + 1..];
        }
    }
    path
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parked_is_io_uring_enter_only() {
        let n = libc::SYS_io_uring_enter;
        let parked = parse_syscall(&format!("{n} 0x5 0x0 0x1 0x1 0x0 0x8 0x7ffd 0x7f12\n"));
        assert_eq!(parked, ThreadState::Parked);
        let sleeping = parse_syscall("230 0x1 0x0 0x7ffd 0x0 0x0 0x0 0x7ffd 0x7f12\n");
        assert_eq!(sleeping, ThreadState::Blocked);
        assert_eq!(parse_syscall("running\n"), ThreadState::Running);
        assert_eq!(parse_syscall("-1 0x7ffd 0x55d0\n"), ThreadState::Running);
    }

    #[test]
    fn frames_are_named_and_trimmed() {
        assert!(is_kshard_frame("kshard::handlers::create_topics::create"));
        assert!(is_kshard_frame(
            "<kshard_shards::log::Log as core::fmt::Debug>::fmt"
        ));
        assert!(!is_kshard_frame("kshard_shards::stall::capture_stack"));
        assert!(!is_kshard_frame("glommio::executor::LocalExecutor::run"));
        assert_eq!(
            short_path("/work/x/shards/src/log/mod.rs"),
            "shards/src/log/mod.rs"
        );
        assert_eq!(short_path("/work/x/src/handlers/a.rs"), "src/handlers/a.rs");
    }
}
