//! Per-partition log settings (Kafka's topic-level `LogConfig`), with Kafka's
//! defaults. Only the settings the segment log itself acts on live here.

/// How the active segment's `.log` is written (`log.io.mode`, a broker-wide
/// kshard setting, not a Kafka topic config).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum IoMode {
    /// Positional writes through the page cache, on the shard's thread.
    #[default]
    Buffered,
    /// As `Buffered` until the system's dirty pages near the kernel's
    /// writeback thresholds ([`crate::log::dirty_pages`]); from there
    /// appends are staged as direct mode's ([`crate::log::direct_write`])
    /// and written by io_uring off the shard's thread, so the kernel's
    /// dirty-page throttling holds the write, not the shard.
    BufferedOffload,
    /// O_DIRECT writes from an aligned write-behind buffer; reads stay
    /// buffered. See [`crate::log::segment::direct_io`].
    Direct,
}

/// Kafka's `LogConfig` subset used by [`crate::log::log::Log`].
#[derive(Clone, Debug, PartialEq)]
pub struct LogConfig {
    /// `segment.bytes`: roll when the active segment would exceed this.
    pub segment_bytes: u64,
    /// `segment.ms`: roll when the segment's first batch is this old.
    pub segment_ms: i64,
    /// `retention.ms`; -1 = unlimited.
    pub retention_ms: i64,
    /// `retention.bytes`; -1 = unlimited.
    pub retention_bytes: i64,
    /// `index.interval.bytes`: bytes between sparse index entries.
    pub index_interval_bytes: u32,
    /// `segment.index.bytes`: the size limit of each index file.
    pub max_index_size_bytes: u32,
    /// `flush.messages`: fsync after this many unflushed messages.
    pub flush_interval_messages: u64,
    /// `flush.ms`: fsync when the last flush is this old.
    pub flush_interval_ms: i64,
    /// `preallocate`: size new `.log` files to `segment_bytes` up front.
    pub preallocate: bool,
    /// Write path of the active segment; applies to segments that become
    /// active after it is set.
    pub io_mode: IoMode,
    /// `cleanup.policy` holds `compact`: the cleaner rewrites this log.
    pub compact: bool,
    /// `cleanup.policy` holds `delete`: time and size retention apply.
    pub delete: bool,
    /// `delete.retention.ms`: how long tombstones outlive their first cleaning.
    pub delete_retention_ms: i64,
    /// `min.cleanable.dirty.ratio`.
    pub min_cleanable_dirty_ratio: f64,
    /// `min.compaction.lag.ms`: records younger than this stay uncleaned.
    pub min_compaction_lag_ms: i64,
    /// `max.compaction.lag.ms`: dirty records older than this force a clean.
    pub max_compaction_lag_ms: i64,
    /// `file.delete.delay.ms`: how long a deleted segment's files stay,
    /// renamed `.deleted`, before they are unlinked.
    pub file_delete_delay_ms: u64,
}

pub const DEFAULT_SEGMENT_BYTES: u64 = 1024 * 1024 * 1024;
pub const DEFAULT_SEGMENT_MS: i64 = 7 * 24 * 60 * 60 * 1000;
pub const DEFAULT_RETENTION_MS: i64 = 7 * 24 * 60 * 60 * 1000;
pub const DEFAULT_INDEX_INTERVAL_BYTES: u32 = 4096;
pub const DEFAULT_MAX_INDEX_SIZE_BYTES: u32 = 10 * 1024 * 1024;
pub const DEFAULT_DELETE_RETENTION_MS: i64 = 24 * 60 * 60 * 1000;
pub const DEFAULT_MIN_CLEANABLE_DIRTY_RATIO: f64 = 0.5;
pub const DEFAULT_FILE_DELETE_DELAY_MS: u64 = 60_000;

/// Positions in the indexes are i32, so no segment may grow past this.
pub const MAX_SEGMENT_BYTES: u64 = i32::MAX as u64;

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            segment_bytes: DEFAULT_SEGMENT_BYTES,
            segment_ms: DEFAULT_SEGMENT_MS,
            retention_ms: DEFAULT_RETENTION_MS,
            retention_bytes: -1,
            index_interval_bytes: DEFAULT_INDEX_INTERVAL_BYTES,
            max_index_size_bytes: DEFAULT_MAX_INDEX_SIZE_BYTES,
            // Kafka's Long.MAX_VALUE: never flush by count.
            flush_interval_messages: u64::MAX,
            flush_interval_ms: i64::MAX,
            preallocate: false,
            io_mode: IoMode::Buffered,
            compact: false,
            delete: true,
            delete_retention_ms: DEFAULT_DELETE_RETENTION_MS,
            min_cleanable_dirty_ratio: DEFAULT_MIN_CLEANABLE_DIRTY_RATIO,
            min_compaction_lag_ms: 0,
            max_compaction_lag_ms: i64::MAX,
            file_delete_delay_ms: DEFAULT_FILE_DELETE_DELAY_MS,
        }
    }
}

impl LogConfig {
    /// `segment_bytes` clamped to what i32 index positions can address.
    pub fn effective_segment_bytes(&self) -> u64 {
        self.segment_bytes.min(MAX_SEGMENT_BYTES)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_match_kafka() {
        let c = LogConfig::default();
        assert_eq!(c.segment_bytes, 1_073_741_824);
        assert_eq!(c.segment_ms, 604_800_000);
        assert_eq!(c.retention_ms, 604_800_000);
        assert_eq!(c.retention_bytes, -1);
        assert_eq!(c.index_interval_bytes, 4096);
        assert_eq!(c.max_index_size_bytes, 10_485_760);
        assert!(!c.preallocate);
        assert_eq!(c.io_mode, IoMode::Buffered);
        assert!(!c.compact && c.delete);
        assert_eq!(c.delete_retention_ms, 86_400_000);
        assert_eq!(c.min_cleanable_dirty_ratio, 0.5);
        assert_eq!(c.min_compaction_lag_ms, 0);
        assert_eq!(c.max_compaction_lag_ms, i64::MAX);
        assert_eq!(c.file_delete_delay_ms, 60_000);
    }
}
