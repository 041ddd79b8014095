//! The watchdog thread of the stall detector (see `stall.rs`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::{now_ns, ShardSlot, StallSettings, CAPTURE_SIGNAL, FRAMES_MAX, STALL_LOG_PREFIX};

/// A stall the watchdog has seen start and not yet end.
#[derive(Debug)]
struct Ongoing {
    run_seq: u64,
    run_started_ns: u64,
    /// The shard thread's time waiting for a CPU when its run grew
    /// suspect (half the threshold old), if read then.
    runq_wait_ns: Option<u64>,
}

/// A run half the threshold old: the thread's run-queue wait then.
#[derive(Debug)]
struct Suspect {
    run_seq: u64,
    runq_wait_ns: Option<u64>,
}

/// What the watchdog knows of one shard.
#[derive(Debug, Default)]
struct ShardWatch {
    ongoing: Option<Ongoing>,
    suspect: Option<Suspect>,
    /// A run seen parked after its start: the shard is idle, not stalled,
    /// until the next run.
    idle_run_seq: Option<u64>,
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
                self.report(shard_id, &ongoing, now);
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
        if let Some(ongoing) = &self.watches[shard_id].ongoing {
            let new_run = run_seq != ongoing.run_seq;
            if new_run || is_parked(tid) {
                // The stall ended before this look: at the new run's start
                // or, when it parked, within the last tick.
                let end = if new_run {
                    run_started_ns.min(now)
                } else {
                    now
                };
                let ongoing = self.watches[shard_id].ongoing.take().expect("ongoing");
                self.report(shard_id, &ongoing, end);
                if !new_run {
                    self.watches[shard_id].idle_run_seq = Some(run_seq);
                }
            }
            return;
        }
        let age = Duration::from_nanos(now.saturating_sub(run_started_ns));
        let watch = &mut self.watches[shard_id];
        if age <= self.settings.threshold / 2 || watch.idle_run_seq == Some(run_seq) {
            return;
        }
        if watch.suspect.as_ref().map(|s| s.run_seq) != Some(run_seq) {
            watch.suspect = Some(Suspect {
                run_seq,
                runq_wait_ns: runq_wait_ns(tid),
            });
        }
        if age <= self.settings.threshold {
            return;
        }
        if is_parked(tid) {
            self.watches[shard_id].idle_run_seq = Some(run_seq);
            return;
        }
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
        let watch = &mut self.watches[shard_id];
        watch.ongoing = Some(Ongoing {
            run_seq,
            run_started_ns,
            runq_wait_ns: watch.suspect.take().and_then(|s| s.runq_wait_ns),
        });
    }

    fn report(&self, shard_id: usize, ongoing: &Ongoing, end_ns: u64) {
        let slot = &self.slots[shard_id];
        let stall = Duration::from_nanos(end_ns.saturating_sub(ongoing.run_started_ns));
        // Time the thread was runnable but not running (another process
        // had the CPU) is not the task's; the thread's exit loses it.
        let tid = slot.tid.load(Ordering::Relaxed);
        let runq_wait = match (ongoing.runq_wait_ns, runq_wait_ns(tid)) {
            (Some(start), Some(end)) => Duration::from_nanos(end.saturating_sub(start)),
            _ => Duration::ZERO,
        };
        let task = stall.saturating_sub(runq_wait);
        let totals = if task > self.settings.threshold {
            slot.stats.record(task)
        } else {
            slot.stats.totals()
        };
        let len = slot.ips_len.swap(0, Ordering::Acquire);
        slot.capture_requested.store(false, Ordering::Relaxed);
        let ips: Vec<usize> = slot.ips[..len]
            .iter()
            .map(|ip| ip.load(Ordering::Relaxed))
            .collect();
        let frames = if ips.is_empty() {
            "(not captured: the stall ended first)".to_string()
        } else {
            useful_frames(&ips).join(" <- ")
        };
        log::warn!(
            "{STALL_LOG_PREFIX} shard={shard_id} stall_ms={:.1} runq_ms={:.1} task_ms={:.1} count={} worst_ms={:.1} at: {frames}",
            stall.as_secs_f64() * 1000.0,
            runq_wait.as_secs_f64() * 1000.0,
            task.as_secs_f64() * 1000.0,
            totals.count,
            totals.worst_us as f64 / 1000.0,
        );
    }
}

/// True when thread `tid` of this process waits in `io_uring_enter` (a
/// glommio executor parked for want of work) or has exited.
fn is_parked(tid: i32) -> bool {
    let path = format!("/proc/self/task/{tid}/syscall");
    match std::fs::read_to_string(&path) {
        Ok(text) => syscall_is_io_uring_enter(&text),
        Err(e) => e.kind() == std::io::ErrorKind::NotFound,
    }
}

/// The time thread `tid` has waited on a run queue for a CPU
/// (`/proc/<tid>/schedstat`: run time, wait time, timeslices, in ns).
fn runq_wait_ns(tid: i32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat")).ok()?;
    text.split_whitespace().nth(1)?.parse().ok()
}

/// `/proc/<tid>/syscall` starts with the number of the syscall the thread
/// is blocked in, or `running` / `-1` when it is not in one.
fn syscall_is_io_uring_enter(text: &str) -> bool {
    text.split_whitespace()
        .next()
        .and_then(|n| n.parse::<i64>().ok())
        == Some(libc::SYS_io_uring_enter)
}

/// The innermost frames of kshard's own code, as `function (file:line)`,
/// innermost first; else the innermost frames of any code.
fn useful_frames(ips: &[usize]) -> Vec<String> {
    let mut all: Vec<(String, bool)> = Vec::new();
    for &ip in ips {
        backtrace::resolve(ip as *mut std::ffi::c_void, |symbol| {
            let name = symbol
                .name()
                .map(|n| format!("{n:#}"))
                .unwrap_or_else(|| format!("{ip:#x}"));
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
    let ours: Vec<String> = all
        .iter()
        .filter(|(_, ours)| *ours)
        .map(|(f, _)| f.clone())
        .collect();
    let chosen = if ours.is_empty() {
        all.into_iter().map(|(f, _)| f).collect()
    } else {
        ours
    };
    chosen.into_iter().take(FRAMES_MAX).collect()
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
        assert!(syscall_is_io_uring_enter(&format!(
            "{n} 0x5 0x0 0x1 0x1 0x0 0x8 0x7ffd 0x7f12\n"
        )));
        assert!(!syscall_is_io_uring_enter(
            "230 0x1 0x0 0x7ffd 0x0 0x0 0x0 0x7ffd 0x7f12\n"
        ));
        assert!(!syscall_is_io_uring_enter("running\n"));
        assert!(!syscall_is_io_uring_enter("-1 0x7ffd 0x55d0\n"));
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
