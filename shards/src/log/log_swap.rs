//! The log's side of a cleaned group's swap. The cleaner hands the swap's
//! file work (`cleaner_swap`) to the `log-dirs` thread; until it is done
//! the old segments stay in the log and serve reads through their open
//! descriptors, and nothing else may rename or truncate them: retention
//! leaves them for its next check, and a truncation waits for the swap.
//! A close or delete queued meanwhile runs after it on the same thread.

use std::io;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use super::super::log_create::LOG_DIRS;
use super::super::segment::LogSegment;
use super::Log;

/// A truncation waiting this long for a swap is logged.
const SWAP_WAIT_LOGGED: Duration = Duration::from_millis(10);

/// A group's swap whose file work is queued or running.
pub(super) struct PendingSwap {
    /// The old segments, oldest first; the new one has the first's base.
    bases: Vec<i64>,
    /// The file work's result, set on the `log-dirs` thread.
    done: Arc<OnceLock<io::Result<()>>>,
}

impl Log {
    /// Queues `commit` (the swap's renames and directory fsyncs) on the
    /// `log-dirs` thread; the log replaces `bases` with the segment it
    /// leaves at `bases[0]` in `finish_cleaner_swap`.
    pub(crate) fn begin_cleaner_swap(
        &mut self,
        bases: Vec<i64>,
        commit: impl FnOnce() -> io::Result<()> + Send + 'static,
    ) {
        assert!(self.pending_swap.is_none(), "one cleaner swap at a time");
        assert!(
            bases.iter().all(|b| self.segments.contains_key(b)),
            "a swap replaces segments of this log"
        );
        assert!(
            *bases.last().expect("non-empty group") < self.active().base_offset(),
            "the active segment is never cleaned"
        );
        let done = Arc::new(OnceLock::new());
        let result = Arc::clone(&done);
        LOG_DIRS.push(move || {
            let _ = result.set(commit());
        });
        self.pending_swap = Some(PendingSwap { bases, done });
    }

    /// Takes the swapped segment in if the swap's file work is done. True
    /// when no swap is pending any more.
    pub fn finish_cleaner_swap(&mut self, now_ms: i64) -> io::Result<bool> {
        let Some(pending) = &self.pending_swap else {
            return Ok(true);
        };
        if pending.done.get().is_none() {
            return Ok(false);
        }
        self.apply_cleaner_swap(now_ms)?;
        Ok(true)
    }

    /// Waits for the pending swap, if any, and takes it in: before a
    /// truncation, which must not race its renames. Truncating below the
    /// cleaned range is rare (an unclean election, a follower restarting
    /// past its leader's log start), and the wait is the swap's few
    /// renames and fsyncs plus whatever the `log-dirs` thread had queued.
    pub(super) fn wait_cleaner_swap(&mut self) -> io::Result<()> {
        let Some(pending) = &self.pending_swap else {
            return Ok(());
        };
        let started = Instant::now();
        while pending.done.get().is_none() {
            std::thread::sleep(Duration::from_micros(200));
        }
        if started.elapsed() > SWAP_WAIT_LOGGED {
            log::warn!(
                "{}: a truncation waited {:?} for the cleaner's swap",
                self.dir.display(),
                started.elapsed()
            );
        }
        self.apply_cleaner_swap(self.last_flush_ms)
    }

    /// Whether a swap's file work is queued or running.
    pub fn cleaner_swap_pending(&self) -> bool {
        self.pending_swap.is_some()
    }

    /// How many of the first `count` segments may be deleted now: none
    /// the pending swap replaces.
    pub(super) fn deletable_while_swapping(&self, count: usize) -> usize {
        match &self.pending_swap {
            None => count,
            Some(pending) => count.min(self.segments.range(..pending.bases[0]).count()),
        }
    }

    fn apply_cleaner_swap(&mut self, now_ms: i64) -> io::Result<()> {
        let pending = self.pending_swap.take().expect("a swap is pending");
        let base = pending.bases[0];
        if let Some(Err(e)) = pending.done.get() {
            // Renames done stay done; the next open completes a committed
            // swap, and the old segments serve until then.
            return Err(io::Error::new(
                e.kind(),
                format!("swapping in cleaned segment {base}: {e}"),
            ));
        }
        let (mut segment, indexes_ok) =
            LogSegment::open_existing(&self.dir, base, &self.config, now_ms)?;
        if !indexes_ok {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("cleaned segment {base}: bad index"),
            ));
        }
        segment.scan_tail(false)?;
        self.replace_segments(&pending.bases, segment);
        Ok(())
    }
}
