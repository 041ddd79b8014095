//! The broker's offset checkpoint files in a log dir: what Kafka's
//! `LogManager` (recovery-point-offset-checkpoint, log-start-offset-checkpoint,
//! cleaner-offset-checkpoint via `LogCleanerManager`) and `ReplicaManager`
//! (replication-offset-checkpoint) write, each an `OffsetCheckpointFile`
//! (format and atomic replacement in `kshard_shards::log::checkpoint`).
//! They are written together, by the controller shard on a timer (on the
//! `checkpoints` thread: their fsyncs and renames held shard 0 for 26 ms
//! and more) and after every shard has closed its logs at shutdown, so a
//! clean restart needs no recovery.

use std::collections::HashMap;
use std::io;
use std::path::Path;

use kshard_shards::background::BackgroundQueue;
use kshard_shards::log::checkpoint::{
    OffsetCheckpointFile, CLEANER_OFFSET_CHECKPOINT_FILE, LOG_START_OFFSET_CHECKPOINT_FILE,
    RECOVERY_POINT_CHECKPOINT_FILE, REPLICATION_OFFSET_CHECKPOINT_FILE,
};

/// (topic, partition) -> (recovery point, log start offset), as read at start-up.
pub type StartupCheckpoints = HashMap<(String, i32), (i64, i64)>;

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

/// The recovery points and log start offsets every partition opens with
/// (Kafka's `LogManager.loadLogs`); missing files read as empty.
pub fn read_startup_checkpoints(log_dir: &Path) -> Result<StartupCheckpoints, String> {
    let rp = OffsetCheckpointFile::new(log_dir.join(RECOVERY_POINT_CHECKPOINT_FILE))
        .read()
        .map_err(|e| format!("{RECOVERY_POINT_CHECKPOINT_FILE}: {e}"))?;
    let ls = OffsetCheckpointFile::new(log_dir.join(LOG_START_OFFSET_CHECKPOINT_FILE))
        .read()
        .map_err(|e| format!("{LOG_START_OFFSET_CHECKPOINT_FILE}: {e}"))?;
    let mut map: StartupCheckpoints = HashMap::new();
    for (t, p, o) in rp {
        map.entry((t, p)).or_insert((0, 0)).0 = o;
    }
    for (t, p, o) in ls {
        map.entry((t, p)).or_insert((0, 0)).1 = o;
    }
    Ok(map)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_files_are_read_back_at_startup() {
        let dir = std::env::temp_dir().join(format!("kshard-checkpoints-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        assert!(read_startup_checkpoints(&dir).unwrap().is_empty());
        let files = CheckpointFiles {
            recovery_points: vec![("a".into(), 0, 10), ("b".into(), 1, 7)],
            log_start_offsets: vec![("a".into(), 0, 2), ("c".into(), 0, 5)],
            cleaner_offsets: vec![("b".into(), 1, 3)],
            high_watermarks: vec![("a".into(), 0, 9)],
        };
        files.write(&dir).unwrap();
        let read = read_startup_checkpoints(&dir).unwrap();
        assert_eq!(read.len(), 3);
        assert_eq!(read[&("a".to_string(), 0)], (10, 2));
        assert_eq!(read[&("b".to_string(), 1)], (7, 0));
        assert_eq!(read[&("c".to_string(), 0)], (0, 5));
        let file = |name: &str| OffsetCheckpointFile::new(dir.join(name)).read().unwrap();
        assert_eq!(file(CLEANER_OFFSET_CHECKPOINT_FILE), files.cleaner_offsets);
        assert_eq!(
            file(REPLICATION_OFFSET_CHECKPOINT_FILE),
            files.high_watermarks
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
