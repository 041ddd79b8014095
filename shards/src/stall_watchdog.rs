//! The watchdog thread of the stall detector (see `stall.rs`).

use std::collections::{HashMap, VecDeque};
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
    /// When the shard was last known not stalled: its run's start, or a
    /// later look that found it parked.
    since_ns: u64,
    /// The thread's scheduling at the last look before `since_ns`.
    before: Option<SchedSample>,
    /// Logged while still going on (see `LONG_STALL`).
    logged_ongoing: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ThreadState {
    /// Asleep in `io_uring_enter` waiting for completions (a glommio
    /// executor parked for want of work), or exited.
    Parked,
    /// Asleep in another syscall (or in `io_uring_enter` not waiting for
    /// completions: a submission that blocked).
    Blocked,
    /// Not asleep in a syscall: on a CPU or waiting for one.
    Running,
}

/// Since when a shard has gone without parking or starting a run, as the
/// watchdog knows it.
#[derive(Debug, Clone, Copy)]
struct Quiet {
    run_seq: u64,
    since_ns: u64,
    /// The sample of the look before `since_ns`.
    before: Option<SchedSample>,
    /// Found not stalled once past the threshold: idle, not looked at again
    /// until it parks or a new run starts.
    idle: bool,
}

/// What the watchdog knows of one shard.
#[derive(Debug, Default)]
struct ShardWatch {
    ongoing: Option<Ongoing>,
    /// `/proc/self/task/<tid>/schedstat` and `.../syscall`, open once, read
    /// every look.
    schedstat: Option<File>,
    syscall: Option<File>,
    last: Option<SchedSample>,
    quiet: Option<Quiet>,
}

impl ShardWatch {
    /// Where the thread is now (`/proc/<tid>/syscall` names the syscall a
    /// thread sleeps in; a thread on a CPU reads as `running`).
    fn state(&mut self, tid: i32) -> ThreadState {
        if self.syscall.is_none() {
            self.syscall = File::open(format!("/proc/self/task/{tid}/syscall")).ok();
        }
        let mut buf = [0u8; 256];
        match self.syscall.as_ref().map(|f| f.read_at(&mut buf, 0)) {
            Some(Ok(n)) => parse_syscall(std::str::from_utf8(&buf[..n]).unwrap_or("")),
            _ => ThreadState::Parked, // exited
        }
    }

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

/// A shard that has gone past the threshold without parking or starting a
/// run (since `before`, the look before that) is stalled if it is asleep
/// in a syscall other than the reactor's, or is not parked now and its
/// thread was on (or waiting for) a CPU at least half the time since.
/// Otherwise its run ended between looks and the shard is idle: it parks,
/// and wakes now and then without running a task queue (its preemption
/// timer, a cross-thread wake, io_uring's task work, glommio's
/// `membarrier` before each sleep), which on a busy 2-core VM can keep a
/// parked shard's thread scheduled more than half the time.
fn is_stalled(state: ThreadState, before: Option<SchedSample>, now: Option<SchedSample>) -> bool {
    match (state, before, now) {
        (ThreadState::Blocked, _, _) => true,
        (ThreadState::Parked, _, _) => false,
        (ThreadState::Running, Some(before), Some(now)) => {
            let scheduled = (now.cpu_ns - before.cpu_ns) + (now.runq_wait_ns - before.runq_wait_ns);
            2 * scheduled >= now.at_ns - before.at_ns
        }
        // The run started before the first look: only its state tells.
        (ThreadState::Running, _, _) => true,
    }
}

/// Times the whole process did not run: stopped (SIGSTOP; `perf/compare.py`
/// freezes the brokers not under test) or its VM paused. The watchdog finds
/// them as sleeps that overran the tick by more than its own wait for a CPU
/// explains. A shard's run that spans one is not stalled for that time: a
/// shard stopped mid-run read as a 57 s stall.
#[derive(Default)]
struct Pauses {
    recent: VecDeque<Pause>,
    /// The watchdog thread's own `schedstat`.
    own_schedstat: Option<File>,
    /// When the last look was, and the watchdog's wait for a CPU by then.
    last_look: Option<(u64, u64)>,
}

struct Pause {
    /// The look that found it; the pause lies in the tick before.
    found_ns: u64,
    len_ns: u64,
}

const PAUSES_KEPT: usize = 64;

impl Pauses {
    /// After each tick's sleep, at `now`.
    fn observe(&mut self, now: u64, tick: Duration, threshold: Duration) {
        if self.own_schedstat.is_none() {
            self.own_schedstat = File::open("/proc/thread-self/schedstat").ok();
        }
        let runq_wait_ns = self.own_schedstat.as_ref().and_then(|f| {
            let mut buf = [0u8; 128];
            let n = f.read_at(&mut buf, 0).ok()?;
            let text = std::str::from_utf8(&buf[..n]).ok()?;
            text.split_whitespace().nth(1)?.parse::<u64>().ok()
        });
        if let (Some((last_ns, last_wait_ns)), Some(wait_ns)) = (self.last_look, runq_wait_ns) {
            let missing_ns = now
                .saturating_sub(last_ns)
                .saturating_sub(tick.as_nanos() as u64)
                .saturating_sub(wait_ns.saturating_sub(last_wait_ns));
            if missing_ns > threshold.as_nanos() as u64 / 2 {
                if self.recent.len() == PAUSES_KEPT {
                    self.recent.pop_front();
                }
                self.recent.push_back(Pause {
                    found_ns: now,
                    len_ns: missing_ns,
                });
            }
        }
        self.last_look = runq_wait_ns.map(|w| (now, w));
    }

    /// Paused time of a run that started at `from` and lasted to `to`.
    fn within(&self, from: u64, to: u64) -> u64 {
        self.recent
            .iter()
            .filter(|p| from < p.found_ns && p.found_ns <= to)
            .map(|p| p.len_ns)
            .sum()
    }

    /// How long a run from `from` to `to` has really had.
    fn age_ns(&self, from: u64, to: u64) -> u64 {
        to.saturating_sub(from)
            .saturating_sub(self.within(from, to))
    }
}

pub(super) struct Watchdog {
    settings: StallSettings,
    slots: Vec<Arc<ShardSlot>>,
    watches: Vec<ShardWatch>,
    symbols: SymbolCache,
    pauses: Pauses,
}

impl Watchdog {
    pub(super) fn new(settings: StallSettings, slots: Vec<Arc<ShardSlot>>) -> Watchdog {
        let watches = slots.iter().map(|_| ShardWatch::default()).collect();
        Watchdog {
            settings,
            slots,
            watches,
            symbols: SymbolCache::default(),
            pauses: Pauses::default(),
        }
    }

    pub(super) fn run(mut self, stop: &AtomicBool) {
        let tick = self.settings.tick();
        while !stop.load(Ordering::Relaxed) {
            std::thread::sleep(tick);
            self.pauses.observe(now_ns(), tick, self.settings.threshold);
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
        let state = watch.state(tid);
        let previous = std::mem::replace(&mut watch.last, sample);
        if watch.quiet.map(|q| q.run_seq) != Some(run_seq) {
            watch.quiet = Some(Quiet {
                run_seq,
                since_ns: run_started_ns,
                before: previous,
                idle: false,
            });
        }
        if state == ThreadState::Parked {
            // Idle now: whatever comes next starts from here.
            watch.quiet = Some(Quiet {
                run_seq,
                since_ns: now,
                before: sample,
                idle: false,
            });
        }
        if let Some(ongoing) = &watch.ongoing {
            let new_run = run_seq != ongoing.run_seq;
            if new_run || state == ThreadState::Parked {
                // The stall ended before this look: at the new run's start
                // or, when it parked, within the last tick.
                let end = if new_run {
                    run_started_ns.min(now)
                } else {
                    now
                };
                let ongoing = watch.ongoing.take().expect("ongoing");
                self.report(shard_id, &ongoing, end, sample);
            } else if !ongoing.logged_ongoing
                && self.pauses.age_ns(ongoing.since_ns, now) >= LONG_STALL.as_nanos() as u64
            {
                self.log_ongoing(shard_id, now);
            }
            return;
        }
        let quiet = watch.quiet.as_mut().expect("set above");
        if quiet.idle
            || Duration::from_nanos(self.pauses.age_ns(quiet.since_ns, now))
                <= self.settings.threshold
        {
            return;
        }
        if is_stalled(state, quiet.before, sample) {
            let (since_ns, before) = (quiet.since_ns, quiet.before);
            self.start_stall(shard_id, run_seq, since_ns, before);
        } else {
            quiet.idle = true;
        }
    }

    /// Asks the stalled shard's thread for its stack, to be read when the
    /// stall ends.
    fn start_stall(
        &mut self,
        shard_id: usize,
        run_seq: u64,
        since_ns: u64,
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
            since_ns,
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
        let stall = Duration::from_nanos(self.pauses.age_ns(ongoing.since_ns, now_ns));
        let frames = match self.captured_ips(shard_id) {
            ips if ips.is_empty() => {
                "(no stack: the shard has not run its signal handler)".to_string()
            }
            ips => useful_frames(&ips, &mut self.symbols).join(" <- "),
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

    fn report(
        &mut self,
        shard_id: usize,
        ongoing: &Ongoing,
        end_ns: u64,
        after: Option<SchedSample>,
    ) {
        let slot = &self.slots[shard_id];
        let stall = Duration::from_nanos(self.pauses.age_ns(ongoing.since_ns, end_ns));
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
            useful_frames(&ips, &mut self.symbols).join(" <- ")
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

/// `/proc/<tid>/syscall` is `running` for a thread on a CPU (or waiting
/// for one), else the number and arguments of the syscall it sleeps in
/// (`-1` outside one). `io_uring_enter(fd, to_submit, min_complete, flags,
/// ..)` waiting for completions (`IORING_ENTER_GETEVENTS`) is a parked
/// executor; a submission that blocked is not.
fn parse_syscall(text: &str) -> ThreadState {
    const IORING_ENTER_GETEVENTS: u64 = 1;
    let mut fields = text.split_whitespace();
    let arg = |field: Option<&str>| {
        field
            .and_then(|f| f.strip_prefix("0x"))
            .and_then(|hex| u64::from_str_radix(hex, 16).ok())
    };
    match fields.next().and_then(|n| n.parse::<i64>().ok()) {
        Some(libc::SYS_io_uring_enter) => {
            let min_complete = arg(fields.nth(2));
            let flags = arg(fields.next());
            match (min_complete, flags) {
                (Some(min), Some(flags)) if min > 0 && flags & IORING_ENTER_GETEVENTS != 0 => {
                    ThreadState::Parked
                }
                _ => ThreadState::Blocked,
            }
        }
        Some(n) if n >= 0 => ThreadState::Blocked,
        _ => ThreadState::Running,
    }
}

/// One symbol an instruction pointer resolved to (several when inlined).
#[derive(Clone)]
struct ResolvedSymbol {
    /// `function (file:line)`.
    text: String,
    ours: bool,
    /// The stall signal's handler: everything resolved before it is its.
    signal: bool,
}

/// Symbols by instruction pointer. A stall at a place already seen (a shard
/// held by the same `pwrite` sixty times a minute) is logged without
/// parsing the binary's debug information again, which costs tens of ms of
/// CPU each time. Bounded: cleared when full.
struct SymbolCache {
    by_ip: HashMap<usize, Vec<ResolvedSymbol>>,
    /// Parses allowed now (see `PARSES_MAX`).
    parses_left: u32,
    last_refill: std::time::Instant,
}

impl Default for SymbolCache {
    fn default() -> Self {
        SymbolCache {
            by_ip: HashMap::new(),
            parses_left: PARSES_MAX,
            last_refill: std::time::Instant::now(),
        }
    }
}

impl SymbolCache {
    /// Takes a parse if one is left, after adding one per `PARSE_INTERVAL`.
    fn take_parse(&mut self) -> bool {
        let earned = self.last_refill.elapsed().as_secs() / PARSE_INTERVAL.as_secs();
        if earned > 0 {
            self.parses_left = (self.parses_left + earned as u32).min(PARSES_MAX);
            self.last_refill = std::time::Instant::now();
        }
        if self.parses_left == 0 {
            return false;
        }
        self.parses_left -= 1;
        true
    }
}

const SYMBOL_CACHE_IPS_MAX: usize = 4096;

/// Parses of the debug information: a few at once (the first stalls of a
/// run, often at new places), then one per `PARSE_INTERVAL`. A burst of
/// stalls in varying places (a copy loop's instruction pointer differs each
/// time) would otherwise cost the broker a core. Addresses not named are
/// logged as they are (`addr2line -e kshard` names them).
const PARSES_MAX: u32 = 4;
const PARSE_INTERVAL: Duration = Duration::from_secs(5);

/// Where a stall was, innermost first, as `function (file:line)`: the
/// frame the signal interrupted, then the innermost frames of kshard's own
/// code (or, with none, the next frames of any code).
///
/// Symbolizing maps and parses the binary's debug information (about 90 MiB
/// resident with kshard's); after a stall that needed it, the parse is
/// dropped and the heap trimmed, so a logged stall costs the watchdog's
/// time, not the broker's memory, and the names found are kept.
fn useful_frames(ips: &[usize], cache: &mut SymbolCache) -> Vec<String> {
    if cache.by_ip.len() + ips.len() > SYMBOL_CACHE_IPS_MAX {
        cache.by_ip.clear();
    }
    let missing = ips.iter().any(|ip| !cache.by_ip.contains_key(ip));
    if missing && cache.take_parse() {
        for &ip in ips {
            cache.by_ip.entry(ip).or_insert_with(|| resolve_ip(ip));
        }
        backtrace::clear_symbol_cache();
        // The parse went to the heap; give its pages back (the broker keeps
        // glibc from trimming on its own, see `alloc_guard`).
        // SAFETY: malloc_trim only releases free memory of glibc's arenas.
        unsafe {
            libc::malloc_trim(0);
        }
    }
    let mut all: Vec<ResolvedSymbol> = Vec::new();
    for ip in ips {
        match cache.by_ip.get(ip) {
            Some(symbols) => {
                for symbol in symbols {
                    if symbol.signal {
                        all.clear(); // everything so far was the handler's
                    } else {
                        all.push(symbol.clone());
                    }
                }
            }
            // Not named yet (PARSES_MAX): the address, kept.
            None => all.push(ResolvedSymbol {
                text: format!("{ip:#x}"),
                ours: true,
                signal: false,
            }),
        }
    }
    choose_frames(&all)
}

fn resolve_ip(ip: usize) -> Vec<ResolvedSymbol> {
    let mut resolved = Vec::new();
    backtrace::resolve(ip as *mut std::ffi::c_void, |symbol| {
        let name = symbol
            .name()
            .map(|n| format!("{n:#}"))
            .unwrap_or_else(|| format!("{ip:#x}"));
        let at = match (symbol.filename(), symbol.lineno()) {
            (Some(file), Some(line)) => {
                format!(" ({}:{line})", short_path(&file.to_string_lossy()))
            }
            _ => String::new(),
        };
        resolved.push(ResolvedSymbol {
            signal: is_signal_frame(&name),
            ours: is_kshard_frame(&name),
            text: format!("{name}{at}"),
        });
    });
    resolved
}

/// The innermost frame, then kshard's own frames (or all, with none).
fn choose_frames(all: &[ResolvedSymbol]) -> Vec<String> {
    let Some((innermost, rest)) = all.split_first() else {
        return Vec::new();
    };
    let mut chosen = vec![innermost.text.clone()];
    let ours = rest.iter().filter(|s| s.ours);
    if ours.clone().next().is_none() {
        chosen.extend(rest.iter().map(|s| s.text.clone()));
    } else {
        chosen.extend(ours.map(|s| s.text.clone()));
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
        // A submission that blocked (no completions awaited) is not idle.
        let submitting = parse_syscall(&format!("{n} 0x5 0x3 0x0 0x0 0x0 0x8 0x7ffd 0x7f12\n"));
        assert_eq!(submitting, ThreadState::Blocked);
        let sleeping = parse_syscall("230 0x1 0x0 0x7ffd 0x0 0x0 0x0 0x7ffd 0x7f12\n");
        assert_eq!(sleeping, ThreadState::Blocked);
        assert_eq!(parse_syscall("running\n"), ThreadState::Running);
        assert_eq!(parse_syscall("-1 0x7ffd 0x55d0\n"), ThreadState::Running);
    }

    #[test]
    fn a_parked_shard_is_idle_however_busy_its_thread() {
        let at = |ms: u64, cpu_ms: u64, runq_ms: u64| SchedSample {
            at_ns: ms * 1_000_000,
            cpu_ns: cpu_ms * 1_000_000,
            runq_wait_ns: runq_ms * 1_000_000,
        };
        let before = Some(at(0, 100, 50));
        // 12 ms on which the thread ran 4 and waited 4 for a CPU: a shard
        // parked now was woken for the reactor's own work, not stalled.
        let busy = Some(at(12, 104, 54));
        assert!(!is_stalled(ThreadState::Parked, before, busy));
        assert!(is_stalled(ThreadState::Running, before, busy));
        // Running, but scheduled under half the time: its run ended.
        let light = Some(at(12, 103, 52));
        assert!(!is_stalled(ThreadState::Running, before, light));
        // Asleep in a syscall other than the reactor's: stalled.
        assert!(is_stalled(ThreadState::Blocked, before, light));
        // With no sample from before the run, the state alone tells.
        assert!(is_stalled(ThreadState::Running, None, busy));
        assert!(!is_stalled(ThreadState::Parked, None, busy));
    }

    #[test]
    fn a_stall_at_a_known_place_is_named_from_the_cache() {
        let mut ips = Vec::new();
        backtrace::trace(|frame| {
            ips.push(frame.ip() as usize);
            true
        });
        let mut cache = SymbolCache::default();
        let first = useful_frames(&ips, &mut cache);
        assert!(!first.is_empty());
        let unique: std::collections::HashSet<usize> = ips.iter().copied().collect();
        assert_eq!(cache.by_ip.len(), unique.len());
        // Named again without resolving: a poisoned entry shows it is used.
        let innermost = ips[0];
        cache.by_ip.insert(
            innermost,
            vec![ResolvedSymbol {
                text: "cached_name".into(),
                ours: false,
                signal: false,
            }],
        );
        let second = useful_frames(&ips, &mut cache);
        assert_eq!(second[0], "cached_name");
        // A place not seen before, with no parse left: its address.
        cache.parses_left = 0;
        let mut unseen = vec![0x1234usize];
        unseen.extend(&ips[1..]);
        let third = useful_frames(&unseen, &mut cache);
        assert_eq!(third[0], "0x1234");
        assert!(!cache.by_ip.contains_key(&0x1234));
    }

    #[test]
    fn a_pause_of_the_process_is_not_the_shards() {
        let mut pauses = Pauses::default();
        pauses.recent.push_back(Pause {
            found_ns: 5_000,
            len_ns: 3_000,
        });
        // A run from before the pause, looked at after it: 3 µs less.
        assert_eq!(pauses.age_ns(1_000, 6_000), 2_000);
        // Runs that started after it, or stalls that ended before it found
        // it, keep their whole age.
        assert_eq!(pauses.age_ns(5_500, 9_000), 3_500);
        assert_eq!(pauses.age_ns(1_000, 4_000), 3_000);
        // The watchdog's own sleeps of one tick are no pause.
        let tick = Duration::from_millis(1);
        let mut observed = Pauses::default();
        observed.observe(now_ns(), tick, Duration::from_millis(10));
        std::thread::sleep(tick);
        observed.observe(now_ns(), tick, Duration::from_millis(10));
        assert!(observed.recent.is_empty());
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
