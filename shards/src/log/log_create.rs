//! A new partition's log made off the shard. Creating a directory and
//! files and sizing them are file-system metadata operations, and on ext4
//! each waits for a journal handle while other fsyncs commit the journal:
//! 0.2-1 s per call on this machine while 1,000 partitions were created at
//! once, a stall of the shard that owns them. So the directory and the
//! first segment's files (indexes preallocated and mapped, as an active
//! segment's are) are made by whichever thread calls `prepare_new_log`, and
//! the owning shard attaches them with `Log::open_new`, which makes no
//! system call that changes metadata.

use std::io;
use std::path::{Path, PathBuf};

use super::config::LogConfig;
use super::segment::NewSegmentFiles;
use crate::background::BackgroundQueue;

/// The thread that creates partition directories (`prepare_new_log`) and
/// renames deleted ones away (`Log::delete_queued`), in the order queued:
/// a topic deleted and created again gets a fresh directory.
pub static LOG_DIRS: BackgroundQueue = BackgroundQueue::new("log-dirs");

/// A new log's directory and its empty first segment, ready for the shard.
pub struct PreparedLog {
    pub(super) dir: PathBuf,
    pub(super) segment: NewSegmentFiles,
}

impl PreparedLog {
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

/// Creates `dir` and an empty segment at `start_offset` in it, laid out as
/// `Log::open` would create them. `None` when `dir` already exists: it is
/// then an existing log (or one another caller is preparing) that only
/// `Log::open` may load, so two preparations of one directory never both
/// hand out its files.
pub fn prepare_new_log(
    dir: &Path,
    config: &LogConfig,
    start_offset: i64,
) -> io::Result<Option<PreparedLog>> {
    assert!(start_offset >= 0, "negative start offset {start_offset}");
    if let Some(parent) = dir.parent() {
        std::fs::create_dir_all(parent)?;
    }
    match std::fs::create_dir(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => return Ok(None),
        Err(e) => return Err(e),
    }
    let mut segment = NewSegmentFiles::create(dir, start_offset, config)?;
    segment.map_for_appends()?;
    Ok(Some(PreparedLog {
        dir: dir.to_path_buf(),
        segment,
    }))
}
