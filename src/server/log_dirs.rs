//! The log dirs at start-up and the checkpoint files at run time: every
//! `log.dirs` entry made ready and scanned (`LogDirs::load`), the logs found
//! there with their own dir's checkpoints, handed to their owning shards,
//! and each dir's four checkpoint files written with only its logs.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use crate::config::BrokerConfig;
use crate::metadata::checkpoints::{read_startup_checkpoints, CheckpointFiles, StartupCheckpoints};
use crate::replica::{CheckpointEntry, LogDirs};

/// The configured log dirs ready to use, and every log found in them with
/// its checkpoint entries.
pub(super) fn prepare_log_dirs(
    config: &BrokerConfig,
) -> Result<(Arc<LogDirs>, StartupCheckpoints), String> {
    let (log_dirs, locations) = LogDirs::load(&config.log_dirs)?;
    let paths: Vec<PathBuf> = log_dirs.paths().map(|p| p.to_path_buf()).collect();
    let checkpoints = read_startup_checkpoints(&paths, &locations)?;
    for (i, path) in paths.iter().enumerate() {
        log::info!(
            "log dir {}: {} partition logs",
            path.display(),
            log_dirs.partition_count(i)
        );
    }
    Ok((Arc::new(log_dirs), checkpoints))
}

/// Each shard gets the start-up logs of the partitions it owns.
pub(super) fn split_by_owner(
    checkpoints: StartupCheckpoints,
    nr_shards: usize,
) -> Vec<Option<StartupCheckpoints>> {
    let mut per_shard: Vec<StartupCheckpoints> = (0..nr_shards).map(|_| HashMap::new()).collect();
    for (k, v) in checkpoints {
        let owner = kshard_shards::placement::shard_for(&k.0, k.1, nr_shards);
        per_shard[owner].insert(k, v);
    }
    per_shard.into_iter().map(Some).collect()
}

/// The checkpoint files of each of `nr_log_dirs` dirs, from the entries
/// every shard reports (each in its log's dir only).
fn checkpoint_files_by_dir(
    entries: &[CheckpointEntry],
    nr_log_dirs: usize,
) -> Vec<CheckpointFiles> {
    let mut files: Vec<CheckpointFiles> = vec![CheckpointFiles::default(); nr_log_dirs];
    for e in entries {
        let f = &mut files[e.log_dir_index];
        let key = |offset: i64| (e.topic.clone(), e.partition, offset);
        f.recovery_points.push(key(e.recovery_point));
        f.log_start_offsets.push(key(e.log_start_offset));
        if let Some(offset) = e.cleaner_offset {
            f.cleaner_offsets.push(key(offset));
        }
        f.high_watermarks.push(key(e.high_watermark));
    }
    files
}

/// Replaces every online log dir's checkpoint files (a dir with no logs
/// gets empty ones, as Kafka writes them). A dir whose files cannot be
/// written goes offline, as Kafka's checkpoint writes report an
/// IOException to the LogDirFailureChannel; the others are still written.
pub(super) fn write_checkpoints(
    log_dirs: &LogDirs,
    entries: &[CheckpointEntry],
) -> std::io::Result<()> {
    let files = checkpoint_files_by_dir(entries, log_dirs.len());
    let mut first_error = None;
    for (index, (files, dir)) in files.iter().zip(log_dirs.paths()).enumerate() {
        if log_dirs.is_offline(index) {
            continue;
        }
        if let Err(e) = files.write(dir) {
            log_dirs.mark_offline(index, &format!("writing its checkpoint files: {e}"));
            first_error.get_or_insert(e);
        }
    }
    first_error.map_or(Ok(()), Err)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(
        log_dir_index: usize,
        topic: &str,
        partition: i32,
        compacted: bool,
    ) -> CheckpointEntry {
        CheckpointEntry {
            log_dir_index,
            topic: topic.into(),
            partition,
            recovery_point: 10,
            log_start_offset: 2,
            cleaner_offset: compacted.then_some(5),
            high_watermark: 9,
        }
    }

    #[test]
    fn each_dir_lists_only_its_logs_and_reads_them_back() {
        let root =
            std::env::temp_dir().join(format!("kshard-server-logdirs-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let paths = vec![root.join("a"), root.join("b"), root.join("c")];
        let (log_dirs, _) = LogDirs::load(&paths).unwrap();
        let entries = vec![
            entry(0, "t", 0, false),
            entry(1, "t", 1, true),
            entry(0, "u", 0, false),
        ];
        let files = checkpoint_files_by_dir(&entries, 3);
        assert_eq!(
            files[0].recovery_points,
            vec![("t".into(), 0, 10), ("u".into(), 0, 10)]
        );
        assert_eq!(files[1].cleaner_offsets, vec![("t".into(), 1, 5)]);
        assert!(files[0].cleaner_offsets.is_empty());
        assert_eq!(files[2], CheckpointFiles::default());
        write_checkpoints(&log_dirs, &entries).unwrap();
        for p in &paths {
            for name in [
                "recovery-point-offset-checkpoint",
                "log-start-offset-checkpoint",
                "cleaner-offset-checkpoint",
                "replication-offset-checkpoint",
            ] {
                assert!(p.join(name).is_file(), "{}", p.join(name).display());
            }
        }
        let locations: HashMap<(String, i32), usize> = entries
            .iter()
            .map(|e| ((e.topic.clone(), e.partition), e.log_dir_index))
            .collect();
        let read = read_startup_checkpoints(&paths, &locations).unwrap();
        let t1 = &read[&("t".to_string(), 1)];
        assert_eq!(
            (
                t1.log_dir_index,
                t1.recovery_point,
                t1.cleaner_offset,
                t1.high_watermark
            ),
            (1, 10, Some(5), Some(9))
        );
        std::fs::remove_dir_all(&root).unwrap();
    }
}
