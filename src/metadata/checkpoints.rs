//! The broker's offset checkpoint files in a log dir: what Kafka's
//! `LogManager` (recovery-point-offset-checkpoint, log-start-offset-checkpoint,
//! cleaner-offset-checkpoint via `LogCleanerManager`) and `ReplicaManager`
//! (replication-offset-checkpoint) write, each an `OffsetCheckpointFile`
//! (format and atomic replacement in `kshard_shards::log::checkpoint`).
//! Each log dir has its own four files, listing only the partitions whose
//! logs it holds. They are written together, by the controller shard on a
//! timer (on the `checkpoints` thread: their fsyncs and renames held shard
//! 0 for 26 ms and more) and after every shard has closed its logs at
//! shutdown, so a clean restart needs no recovery.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};

use kshard_shards::background::BackgroundQueue;
use kshard_shards::log::checkpoint::{
    OffsetCheckpointFile, CLEANER_OFFSET_CHECKPOINT_FILE, LOG_START_OFFSET_CHECKPOINT_FILE,
    RECOVERY_POINT_CHECKPOINT_FILE, REPLICATION_OFFSET_CHECKPOINT_FILE,
};

/// What a log found at start-up opens with: its log dir (an index into
/// `log.dirs`) and that dir's checkpoint entries for it.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct StartupLog {
    pub log_dir_index: usize,
    pub recovery_point: i64,
    pub log_start_offset: i64,
    /// `cleaner-offset-checkpoint`, for compacted logs.
    pub cleaner_offset: Option<i64>,
    /// `replication-offset-checkpoint`.
    pub high_watermark: Option<i64>,
}

/// Every log found at start-up, by (topic, partition).
pub type StartupCheckpoints = HashMap<(String, i32), StartupLog>;

/// One `(topic, partition, offset)` list per checkpoint file.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct CheckpointFiles {
    pub recovery_points: Vec<(String, i32, i64)>,
    pub log_start_offsets: Vec<(String, i32, i64)>,
    /// The cleaner's first dirty offset, for compacted logs only.
    pub cleaner_offsets: Vec<(String, i32, i64)>,
    pub high_watermarks: Vec<(String, i32, i64)>,
}

impl CheckpointFiles {
    /// Replaces the four files in `log_dir`, each atomically.
    pub fn write(&self, log_dir: &Path) -> io::Result<()> {
        OffsetCheckpointFile::new(log_dir.join(REPLICATION_OFFSET_CHECKPOINT_FILE))
            .write(&self.high_watermarks)?;
        OffsetCheckpointFile::new(log_dir.join(RECOVERY_POINT_CHECKPOINT_FILE))
            .write(&self.recovery_points)?;
        OffsetCheckpointFile::new(log_dir.join(CLEANER_OFFSET_CHECKPOINT_FILE))
            .write(&self.cleaner_offsets)?;
        OffsetCheckpointFile::new(log_dir.join(LOG_START_OFFSET_CHECKPOINT_FILE))
            .write(&self.log_start_offsets)
    }
}

static CHECKPOINT_WRITES: BackgroundQueue = BackgroundQueue::new("checkpoints");

/// Runs `write` (of the checkpoint files) on the `checkpoints` thread, after
/// any write queued before it; resolves with its result.
pub async fn write_queued(
    write: impl FnOnce() -> io::Result<()> + Send + 'static,
) -> io::Result<()> {
    CHECKPOINT_WRITES
        .run(write)
        .await
        .unwrap_or_else(|| Err(io::Error::other("the checkpoints thread dropped a write")))
}

/// Waits for the queued writes, so that a final write made elsewhere is
/// not overwritten by an older one.
pub fn wait_for_queued_writes() {
    CHECKPOINT_WRITES.wait_idle();
}

/// One log dir's checkpoint files as read at start-up, by partition.
#[derive(Default)]
struct DirCheckpoints {
    recovery_points: HashMap<(String, i32), i64>,
    log_start_offsets: HashMap<(String, i32), i64>,
    cleaner_offsets: HashMap<(String, i32), i64>,
    high_watermarks: HashMap<(String, i32), i64>,
}

fn read_file(log_dir: &Path, name: &str) -> io::Result<HashMap<(String, i32), i64>> {
    let entries = OffsetCheckpointFile::new(log_dir.join(name)).read()?;
    Ok(entries.into_iter().map(|(t, p, o)| ((t, p), o)).collect())
}

/// A missing or unreadable cleaner or replication checkpoint only costs a
/// re-clean or a high watermark learned again (Kafka too starts without).
fn read_file_or_warn(log_dir: &Path, name: &str) -> HashMap<(String, i32), i64> {
    read_file(log_dir, name).unwrap_or_else(|e| {
        log::warn!("{}: {e}", log_dir.join(name).display());
        HashMap::new()
    })
}

fn read_dir_checkpoints(log_dir: &Path) -> Result<DirCheckpoints, String> {
    let fatal = |name: &str| {
        read_file(log_dir, name).map_err(|e| format!("{}: {e}", log_dir.join(name).display()))
    };
    Ok(DirCheckpoints {
        recovery_points: fatal(RECOVERY_POINT_CHECKPOINT_FILE)?,
        log_start_offsets: fatal(LOG_START_OFFSET_CHECKPOINT_FILE)?,
        cleaner_offsets: read_file_or_warn(log_dir, CLEANER_OFFSET_CHECKPOINT_FILE),
        high_watermarks: read_file_or_warn(log_dir, REPLICATION_OFFSET_CHECKPOINT_FILE),
    })
}

/// What every log found at start-up opens with (Kafka's
/// `LogManager.loadLogs`): each log dir's checkpoints, read for the logs
/// `locations` puts in that dir only; missing files read as empty.
pub fn read_startup_checkpoints(
    log_dirs: &[PathBuf],
    locations: &HashMap<(String, i32), usize>,
) -> Result<StartupCheckpoints, String> {
    let per_dir = log_dirs
        .iter()
        .map(|d| read_dir_checkpoints(d))
        .collect::<Result<Vec<_>, String>>()?;
    Ok(locations
        .iter()
        .map(|(key, &index)| {
            let dir = &per_dir[index];
            let log = StartupLog {
                log_dir_index: index,
                recovery_point: dir.recovery_points.get(key).copied().unwrap_or(0),
                log_start_offset: dir.log_start_offsets.get(key).copied().unwrap_or(0),
                cleaner_offset: dir.cleaner_offsets.get(key).copied(),
                high_watermark: dir.high_watermarks.get(key).copied(),
            };
            (key.clone(), log)
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn located(entries: &[(&str, i32, usize)]) -> HashMap<(String, i32), usize> {
        entries
            .iter()
            .map(|&(t, p, d)| ((t.to_string(), p), d))
            .collect()
    }

    #[test]
    fn each_dir_is_read_for_its_own_logs_and_merged() {
        let root = std::env::temp_dir().join(format!("kshard-checkpoints-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let dirs = vec![root.join("a"), root.join("b")];
        for d in &dirs {
            std::fs::create_dir_all(d).unwrap();
        }
        let locations = located(&[("a", 0, 0), ("b", 1, 1), ("c", 0, 1)]);
        let none = read_startup_checkpoints(&dirs, &locations).unwrap();
        assert_eq!(none.len(), 3, "a log with no entries opens from 0");
        assert_eq!(none[&("c".to_string(), 0)].log_dir_index, 1);
        CheckpointFiles {
            recovery_points: vec![("a".into(), 0, 10), ("b".into(), 1, 99)],
            log_start_offsets: vec![("a".into(), 0, 2)],
            cleaner_offsets: vec![],
            high_watermarks: vec![("a".into(), 0, 9)],
        }
        .write(&dirs[0])
        .unwrap();
        CheckpointFiles {
            recovery_points: vec![("b".into(), 1, 7)],
            log_start_offsets: vec![("c".into(), 0, 5)],
            cleaner_offsets: vec![("b".into(), 1, 3)],
            high_watermarks: vec![],
        }
        .write(&dirs[1])
        .unwrap();
        let read = read_startup_checkpoints(&dirs, &locations).unwrap();
        let log = |t: &str, p| read[&(t.to_string(), p)].clone();
        assert_eq!(
            log("a", 0),
            StartupLog {
                log_dir_index: 0,
                recovery_point: 10,
                log_start_offset: 2,
                cleaner_offset: None,
                high_watermark: Some(9),
            }
        );
        // b-1's entry in a's files is not its dir's: ignored.
        assert_eq!(
            log("b", 1),
            StartupLog {
                log_dir_index: 1,
                recovery_point: 7,
                log_start_offset: 0,
                cleaner_offset: Some(3),
                high_watermark: None,
            }
        );
        assert_eq!(
            (log("c", 0).recovery_point, log("c", 0).log_start_offset),
            (0, 5)
        );
        std::fs::remove_dir_all(&root).unwrap();
    }
}
