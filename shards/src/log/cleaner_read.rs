//! The cleaner's reads of data not in the page cache, off the shard. A pass
//! reads its log's segments from the start (the map of the dirty section,
//! then every group it rewrites), and the old ones are often long out of
//! the page cache: each batch's `pread` then waited for the disk on the
//! shard (a 17.7 ms stall in the stall suite's compaction run after a
//! compare had filled memory). So before a step reads, it asks whether the
//! bytes the step will touch are in the page cache and ready
//! (`page_cache::range_cached`); if not, the `cleaner-reads` thread reads
//! them and a few steps more in first, and the step waits
//! (`Step::WaitingOffShard`). Where the kernel cannot say, reads go on as
//! before.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::super::page_cache::{self, ColdRange};
use super::Log;
use crate::background::BackgroundQueue;

/// Fills the page cache for the cleaners of every shard.
static CLEANER_READS: BackgroundQueue = BackgroundQueue::new("cleaner-reads");

/// Where the pass reads next: `position` in the segment at `segment`, up to
/// (not including) the segment at `end_base`.
#[derive(Clone, Copy, Debug)]
pub(super) struct ReadCursor {
    pub segment: i64,
    pub position: u64,
    pub end_base: i64,
}

/// The pass's fill in flight, if any.
#[derive(Default)]
pub(super) struct ReadAhead {
    filling: Option<Arc<AtomicBool>>,
}

impl ReadAhead {
    /// True when the step may read `step_bytes` from `cursor` now; false
    /// while those bytes are being read into the page cache off the shard
    /// (started here if they are not there). The step right after a fill
    /// reads without checking again: under memory pressure the bytes may
    /// already be gone, and it reads them itself rather than fill forever.
    pub(super) fn ready(
        &mut self,
        log: &Log,
        cursor: ReadCursor,
        step_bytes: u64,
        ahead_bytes: u64,
    ) -> bool {
        if let Some(done) = &self.filling {
            if !done.load(Ordering::Acquire) {
                return false;
            }
            self.filling = None;
            return true;
        }
        let cold = ranges(log, cursor, step_bytes)
            .iter()
            .any(|r| page_cache::range_cached(&r.file, r.position, r.len) == Some(false));
        if !cold {
            return true;
        }
        let fill = ranges(log, cursor, ahead_bytes.max(step_bytes));
        let done = Arc::new(AtomicBool::new(false));
        let done_by_thread = Arc::clone(&done);
        CLEANER_READS.push(move || {
            // An error shows again when the step reads.
            let _ = page_cache::fill_all(&fill);
            done_by_thread.store(true, Ordering::Release);
        });
        self.filling = Some(done);
        false
    }
}

/// The byte ranges of `bytes` from `cursor` on, segment by segment.
fn ranges(log: &Log, cursor: ReadCursor, bytes: u64) -> Vec<ColdRange> {
    let mut left = bytes;
    let mut position = cursor.position;
    let mut out = Vec::new();
    for seg in log
        .segments()
        .filter(|s| s.base_offset() >= cursor.segment && s.base_offset() < cursor.end_base)
    {
        if left == 0 {
            break;
        }
        if seg.base_offset() != cursor.segment {
            position = 0;
        }
        let len = seg.size_bytes().saturating_sub(position).min(left);
        if len > 0 {
            out.push(ColdRange {
                file: seg.log.shared(),
                position,
                len,
            });
            left -= len;
        }
    }
    out
}
