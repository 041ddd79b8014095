//! Whether a read would wait for the disk (see `page_cache`): the part of
//! a segment a read at an offset would touch, found through the offset
//! index (in memory) without reading the file.

use super::super::page_cache::{range_cached, ColdRange};
use super::Log;

impl Log {
    /// The bytes a read at `offset` of at most `max_bytes` would touch, when
    /// they are not all in the page cache. A buffered log's active segment
    /// was just written through the page cache and is not looked at; a
    /// direct-mode one's bytes never entered it, but its last writes are
    /// read from the tail cache.
    pub fn cold_range(&self, offset: i64, max_bytes: u32) -> Option<ColdRange> {
        if offset >= self.log_end_offset || self.staging.tail.covers(offset) {
            return None; // nothing to read, or read from memory
        }
        let (&base, segment) = self.segments.range(..=offset).next_back()?;
        if base == self.active().base_offset() && !segment.is_direct() {
            return None;
        }
        // The read walks headers from the index entry at or below `offset`
        // to about `max_bytes` past its batch, which starts about one index
        // interval after that entry at most.
        let position = u64::from(segment.offset_index().lookup(offset).position);
        let len = (u64::from(max_bytes) + u64::from(self.config.index_interval_bytes))
            .min(segment.size_bytes().saturating_sub(position));
        let file = segment.log.shared();
        match range_cached(&file, position, len) {
            Some(false) => Some(ColdRange {
                file,
                position,
                len,
            }),
            _ => None,
        }
    }
}
