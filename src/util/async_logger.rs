//! The broker's logger: env_logger's filter (`RUST_LOG`) and line format,
//! written to stderr by a thread of its own. A shard that logs formats the
//! line and queues it; it never writes to stderr, where a write to a log
//! file under heavy writeback was seen to block for 43 ms while the other
//! shard waited 238 ms for stderr's lock. Queued lines are bounded; past
//! [`QUEUED_BYTES_MAX`] lines are dropped and counted, and the count is
//! logged once the writer catches up.

use std::io::Write;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, OnceLock};
use std::thread::Thread;
use std::time::{Duration, Instant};

use crossbeam_queue::SegQueue;
use log::{Log, Metadata, Record};

/// Lines queued and not yet written, in bytes, past which lines are dropped.
pub const QUEUED_BYTES_MAX: usize = 16 * 1024 * 1024;

struct Queue {
    lines: SegQueue<String>,
    queued_bytes: AtomicUsize,
    /// Lines queued since start (the writer's goal for `flush`).
    queued_lines: AtomicU64,
    dropped_lines: AtomicU64,
    writer: OnceLock<Thread>,
    /// Lines written (or dropped) since start; taken by the writer after
    /// each batch and by `flush`, never by a logging thread.
    written_lines: Mutex<u64>,
    written: Condvar,
}

static QUEUE: Queue = Queue {
    lines: SegQueue::new(),
    queued_bytes: AtomicUsize::new(0),
    queued_lines: AtomicU64::new(0),
    dropped_lines: AtomicU64::new(0),
    writer: OnceLock::new(),
    written_lines: Mutex::new(0),
    written: Condvar::new(),
};

pub struct AsyncLogger {
    filter: env_logger::Logger,
}

/// Installs the logger: `RUST_LOG` as env_logger reads it, `info` when
/// unset; starts the writer thread.
pub fn init() {
    let filter =
        env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info")).build();
    let max_level = filter.filter();
    let writer = std::thread::Builder::new()
        .name("log-writer".into())
        .spawn(|| write_lines(&QUEUE))
        .expect("starting the log writer");
    QUEUE
        .writer
        .set(writer.thread().clone())
        .expect("the logger is installed once");
    log::set_boxed_logger(Box::new(AsyncLogger { filter })).expect("the logger is installed once");
    log::set_max_level(max_level);
    // Lines queued before a panic explain it: written first (the release
    // build aborts on panic), unless the writer is what panicked.
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if std::thread::current().name() != Some("log-writer") {
            QUEUE.flush_until(Some(Instant::now() + PANIC_FLUSH_WAIT));
        }
        default_hook(info);
    }));
}

/// How long a panic waits for queued lines to be written.
const PANIC_FLUSH_WAIT: Duration = Duration::from_secs(2);

/// One line as env_logger's default format writes it without colour, with
/// millisecond timestamps.
fn format_line(record: &Record<'_>) -> String {
    format!(
        "[{:.3} {:<5} {}] {}\n",
        jiff::Timestamp::now(),
        record.level(),
        record.target(),
        record.args()
    )
}

impl Log for AsyncLogger {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        self.filter.enabled(metadata)
    }

    fn log(&self, record: &Record<'_>) {
        if !self.filter.matches(record) {
            return;
        }
        QUEUE.push(format_line(record));
    }

    /// Waits until every line queued so far is written.
    fn flush(&self) {
        QUEUE.flush_until(None);
    }
}

impl Queue {
    fn push(&self, line: String) {
        let len = line.len();
        if self.queued_bytes.fetch_add(len, Ordering::AcqRel) + len > QUEUED_BYTES_MAX {
            self.queued_bytes.fetch_sub(len, Ordering::AcqRel);
            self.dropped_lines.fetch_add(1, Ordering::Relaxed);
            return;
        }
        self.queued_lines.fetch_add(1, Ordering::AcqRel);
        self.lines.push(line);
        if let Some(writer) = self.writer.get() {
            writer.unpark();
        }
    }

    /// Waits until every line queued so far is written, or until
    /// `deadline` (or the lock is poisoned).
    fn flush_until(&self, deadline: Option<Instant>) {
        let goal = self.queued_lines.load(Ordering::Acquire);
        let Ok(mut written) = self.written_lines.lock() else {
            return;
        };
        while *written < goal {
            let waited = match deadline {
                None => self.written.wait(written).ok(),
                Some(deadline) => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return;
                    }
                    self.written
                        .wait_timeout(written, left)
                        .ok()
                        .map(|(w, _)| w)
                }
            };
            let Some(w) = waited else {
                return;
            };
            written = w;
        }
    }
}

/// What the writer gathers into one write to stderr.
const WRITE_BYTES: usize = 64 * 1024;

/// The writer thread: drains the queue into stderr, a batch per write.
fn write_lines(queue: &'static Queue) {
    let mut batch = Vec::with_capacity(WRITE_BYTES);
    loop {
        let mut lines = 0u64;
        while let Some(line) = queue.lines.pop() {
            batch.extend_from_slice(line.as_bytes());
            queue.queued_bytes.fetch_sub(line.len(), Ordering::AcqRel);
            lines += 1;
            if batch.len() >= WRITE_BYTES {
                break;
            }
        }
        if lines == 0 {
            std::thread::park();
            continue;
        }
        let dropped = queue.dropped_lines.swap(0, Ordering::Relaxed);
        if dropped > 0 {
            let note = format!(
                "[{:.3} WARN  kshard::util::async_logger] {dropped} log lines dropped: stderr fell {QUEUED_BYTES_MAX} bytes behind\n",
                jiff::Timestamp::now()
            );
            batch.extend_from_slice(note.as_bytes());
        }
        // Nothing to tell if stderr is gone.
        let _ = std::io::stderr().lock().write_all(&batch);
        batch.clear();
        *queue.written_lines.lock().expect("written lines") += lines;
        queue.written.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_keep_env_loggers_shape() {
        let line = format_line(
            &Record::builder()
                .level(log::Level::Warn)
                .target("kshard::x")
                .args(format_args!("hello {}", 7))
                .build(),
        );
        // [2026-12-07T08:54:08.394Z WARN  kshard::x] hello 7
        let (stamp, rest) = line[1..].split_once(' ').expect("a timestamp");
        assert_eq!(stamp.len(), "2026-12-07T08:54:08.394Z".len(), "{line}");
        assert!(
            stamp.ends_with('Z') && stamp.as_bytes()[10] == b'T',
            "{line}"
        );
        assert_eq!(rest, "WARN  kshard::x] hello 7\n");
    }
}
