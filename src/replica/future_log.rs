//! Future replicas (AlterReplicaLogDirs, Kafka's `UnifiedLog.logFutureDirName`
//! and `LogManager`'s future logs): a replica being moved to another log
//! dir of this broker is copied into `<topic>-<partition>.<32-hex uuid>-future`
//! in the target dir, next to the current log, until it has caught up and
//! is swapped in (`partitions/alter_log_dirs.rs`).
//!
//! A restart mid-move discards the future log (its directory is deleted at
//! start-up, `discard_future_logs`): the current log stays authoritative and
//! the move is not resumed, since kshard keeps no record of the request
//! (Kafka resumes it from the `-future` directory it loads).

use std::io;
use std::path::{Path, PathBuf};

use kshard_shards::log::batch::BatchIter;
use kshard_shards::log::{Log, LogAppendInfo};

/// Kafka's `LogFileUtils.FUTURE_DIR_SUFFIX`.
pub const FUTURE_DIR_SUFFIX: &str = "-future";

/// `<topic>-<partition>.<uuid without dashes>-future` (Kafka's
/// `logFutureDirName`, `logDirNameWithSuffix`).
pub fn future_dir_name(topic: &str, partition: i32, uuid: uuid::Uuid) -> String {
    format!(
        "{topic}-{partition}.{}{FUTURE_DIR_SUFFIX}",
        uuid.as_simple()
    )
}

/// The partition of a future log's directory name, if it is one.
pub fn parse_future_dir_name(name: &str) -> Option<(String, i32)> {
    let stem = name.strip_suffix(FUTURE_DIR_SUFFIX)?;
    let (tp, uuid) = stem.rsplit_once('.')?;
    if uuid.len() != 32 || !uuid.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    kshard_shards::log::parse_partition_dir_name(tp)
}

/// Start-up: every future log an earlier run left in `log_dir` is renamed
/// to a `-delete` directory and removed off the shards; returns how many.
pub fn discard_future_logs(log_dir: &Path) -> io::Result<usize> {
    let mut discarded = 0;
    for entry in std::fs::read_dir(log_dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let is_future = name
            .to_str()
            .is_some_and(|n| parse_future_dir_name(n).is_some());
        if is_future && entry.file_type()?.is_dir() {
            kshard_shards::log::log_deleter::delete_log_dir(&entry.path())?;
            discarded += 1;
        }
    }
    Ok(discarded)
}

/// A future replica on the partition's owning shard.
pub struct FutureLog {
    /// None while its close (before the swap) is on the `log-dirs` thread.
    pub log: Option<Log>,
    /// The target log dir (index into `LogDirs`).
    pub log_dir_index: usize,
    /// `<target>/<topic>-<partition>.<uuid>-future`.
    pub dir: PathBuf,
    /// Tells this future log from a later one of the same partition.
    pub id: u64,
    /// The leader epoch of the last batch copied (-1: unknown): where that
    /// epoch ends in the current log bounds what the two logs share.
    pub last_copied_epoch: i32,
    /// Its end offset when its close was queued (the swap then checks that
    /// the current log did not move meanwhile).
    pub closed_at: Option<i64>,
}

impl FutureLog {
    /// The log end offset (the closed log's while it is closing).
    pub fn log_end_offset(&self) -> i64 {
        match (&self.log, self.closed_at) {
            (Some(log), _) => log.log_end_offset(),
            (None, Some(end)) => end,
            (None, None) => 0,
        }
    }
}

/// Kafka's `analyzeAndValidateRecords` for batches read from this broker's
/// own current log (already validated when first appended): their offsets
/// and timestamps; None when there are no whole batches.
pub fn append_info_of(records: &[u8]) -> Option<(LogAppendInfo, i32)> {
    let mut info = LogAppendInfo::empty();
    let mut last_epoch = -1;
    for (pos, h, bytes) in BatchIter::new(records).map_while(Result::ok) {
        if info.batch_count == 0 {
            info.first_offset = h.base_offset;
        }
        info.last_offset = h.last_offset();
        if h.max_timestamp > info.max_timestamp {
            info.max_timestamp = h.max_timestamp;
            info.offset_of_max_timestamp = h.last_offset();
        }
        info.record_count += h.records_count.max(0) as u32;
        info.batch_count += 1;
        info.valid_bytes = pos + bytes.len();
        last_epoch = h.partition_leader_epoch;
    }
    (info.batch_count > 0).then_some((info, last_epoch))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn future_dir_names_round_trip() {
        let uuid = uuid::Uuid::from_u128(0x0123_4567_89ab_cdef_0123_4567_89ab_cdef);
        let name = future_dir_name("my-topic", 12, uuid);
        assert_eq!(name, "my-topic-12.0123456789abcdef0123456789abcdef-future");
        assert_eq!(
            parse_future_dir_name(&name),
            Some(("my-topic".to_string(), 12))
        );
        for not in [
            "t-0",
            "t-0-future",
            "t-0.abc-future",
            "t-0.0123456789abcdef0123456789abcdef-delete",
            "t.0123456789abcdef0123456789abcdef-future",
            "t-0.0123456789abcdef0123456789abcdeg-future",
        ] {
            assert_eq!(parse_future_dir_name(not), None, "{not}");
        }
    }

    #[test]
    fn start_up_discards_future_logs_only() {
        let dir = std::env::temp_dir().join(format!("kshard-future-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let future = future_dir_name("t", 0, uuid::Uuid::new_v4());
        for name in ["t-0", future.as_str(), "t-1-future"] {
            std::fs::create_dir_all(dir.join(name)).unwrap();
        }
        assert_eq!(discard_future_logs(&dir).unwrap(), 1);
        assert!(!dir.join(&future).exists());
        assert!(dir.join("t-0").is_dir() && dir.join("t-1-future").is_dir());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
