//! The partition log: Kafka's on-disk layout (`<topic>-<partition>/` holding
//! `<20-digit base offset>.log`, `.index`, `.timeindex`, `.txnindex`), v2
//! batch parsing and validation, transaction markers, producer state,
//! checkpoints, recovery and retention.

pub mod batch;
pub mod checkpoint;
pub mod cleaner;
mod cleaner_filter;
pub mod config;
pub mod control_batch;
pub mod direct_write;
pub mod dirty_pages;
pub mod index_file;
pub mod legacy;
pub mod log;
pub mod log_create;
pub mod log_deleter;
pub mod offset_index;
pub mod offset_map;
pub mod page_cache;
pub mod patched;
pub mod read_cache;
pub mod recovery;
pub mod segment;
pub mod tail_cache;
#[cfg(test)]
pub mod test_util;
pub mod time_index;
pub mod transaction_index;

pub use self::checkpoint::{parse_partition_dir_name, partition_dir_name, OffsetCheckpointFile};
pub use self::config::LogConfig;
pub use self::log::{read_slice_bytes, Log, ReadError, ReadInfo, RollSyncJob};
pub use self::recovery::RecoveryStats;
mod producer_snapshot;
pub mod producer_state;
pub mod records;
pub mod validate;

use std::fs::File;
use std::sync::Arc;

/// What validation learned about a set of batches about to be appended, and
/// what the append needs to maintain the indexes. Offsets are absolute and
/// already written into the batches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogAppendInfo {
    pub first_offset: i64,
    pub last_offset: i64,
    /// Largest record timestamp among the batches (after LogAppendTime, if any).
    pub max_timestamp: i64,
    /// Offset of the record carrying `max_timestamp` (Kafka: shallowOffsetOfMaxTimestamp
    /// is the last offset of the batch holding it).
    pub offset_of_max_timestamp: i64,
    /// The append time stamped on the batches, or -1 for CreateTime.
    pub log_append_time_ms: i64,
    /// Records (not batches) appended.
    pub record_count: u32,
    /// Batches appended.
    pub batch_count: u32,
    /// Bytes of valid batches, i.e. bytes to append.
    pub valid_bytes: usize,
}

impl LogAppendInfo {
    /// Nothing seen yet: what a walk over batches starts from.
    pub const fn empty() -> LogAppendInfo {
        LogAppendInfo {
            first_offset: -1,
            last_offset: -1,
            max_timestamp: batch::NO_TIMESTAMP,
            offset_of_max_timestamp: -1,
            log_append_time_ms: -1,
            record_count: 0,
            batch_count: 0,
            valid_bytes: 0,
        }
    }
}

/// A byte range of one segment file, sent to a socket with sendfile(2)
/// (buffered mode) or from the read cache (direct mode).
/// The `Arc<File>` keeps the descriptor open even if the segment is deleted
/// while the fetch response is in flight.
#[derive(Clone, Debug)]
pub struct FileSlice {
    pub file: Arc<File>,
    pub position: u64,
    pub len: u32,
    /// From the active segment of a `log.io.mode=direct` log: sent through
    /// the shard's [`read_cache::ReadCache`] (DMA reads), not sendfile from
    /// the page cache.
    pub direct: bool,
    /// From a closed segment, whose pages may have left the page cache (or,
    /// in direct mode, never entered it): read in off the shard first when
    /// they are not there ([`page_cache`]).
    pub may_be_cold: bool,
    /// The slice's bytes, already in memory (a direct-mode log's
    /// [`tail_cache`]): sent as they are, the file is not read.
    pub cached: Option<bytes::Bytes>,
}
