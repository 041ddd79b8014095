//! Deleted logs go as Kafka's `LogManager.asyncDelete` sends them: the
//! partition's directory is renamed to `<topic>-<partition>.<unique>-delete`
//! at once (one rename on the shard), and a `log-delete` thread unlinks its
//! files. Unlinking a large log's segments took up to 2 s of a shard when it
//! was done in place (`perf/stalls.sh`, tuning.md "Stalls"). A broker that
//! stops before the thread is done finds the renamed directories at start-up
//! (`delete_leftover_logs`). Kafka waits `file.delete.delay.ms` before
//! unlinking, for readers still holding the files; a shard's readers are
//! gone once the log is dropped, so kshard unlinks at once.

use std::ffi::OsStr;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::background::{BackgroundQueue, DelayedQueue};

/// Kafka's `LogFileUtils.DELETE_DIR_SUFFIX`.
pub const DELETE_DIR_SUFFIX: &str = "-delete";
/// The longest file name the file systems Kafka runs on allow.
const FILE_NAME_BYTES_MAX: usize = 255;

/// Renames the log directory `dir` to its `-delete` name and queues its
/// removal; the directory is gone from `dir` when this returns.
pub fn delete_log_dir(dir: &Path) -> io::Result<()> {
    let doomed = doomed_name(dir);
    std::fs::rename(dir, &doomed)?;
    queue_delete(doomed);
    Ok(())
}

/// Queues every `-delete` directory left in `log_dir` by an earlier run;
/// returns how many.
pub fn delete_leftover_logs(log_dir: &Path) -> io::Result<usize> {
    let mut queued = 0;
    for entry in std::fs::read_dir(log_dir)? {
        let entry = entry?;
        let name = entry.file_name();
        if is_doomed(&name) && entry.file_type()?.is_dir() {
            queue_delete(entry.path());
            queued += 1;
        }
    }
    Ok(queued)
}

/// True for a directory name `delete_log_dir` gives.
pub fn is_doomed(name: &OsStr) -> bool {
    name.to_str()
        .is_some_and(|n| n.ends_with(DELETE_DIR_SUFFIX) && n.contains('.'))
}

/// `<name>.<unique><suffix>`, the name cut (as Kafka cuts the topic) so the
/// whole stays within `FILE_NAME_BYTES_MAX`.
fn doomed_name(dir: &Path) -> PathBuf {
    static SEQUENCE: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let sequence = SEQUENCE.fetch_add(1, Ordering::Relaxed);
    let unique = format!("{nanos:x}{sequence:04x}{:x}", std::process::id());
    let name = dir
        .file_name()
        .and_then(OsStr::to_str)
        .expect("a log directory has a UTF-8 name");
    let name_bytes_max = FILE_NAME_BYTES_MAX - (1 + unique.len() + DELETE_DIR_SUFFIX.len());
    let mut cut = name.len().min(name_bytes_max);
    while !name.is_char_boundary(cut) {
        cut -= 1;
    }
    dir.with_file_name(format!("{}.{unique}{DELETE_DIR_SUFFIX}", &name[..cut]))
}

/// Renamed log directories are unlinked here, off the shards.
static LOG_DELETES: BackgroundQueue = BackgroundQueue::new("log-delete");

/// Deleted segments' files wait out `file.delete.delay.ms` here.
static SEGMENT_DELETES: DelayedQueue = DelayedQueue::new("segment-delete");

/// Unlinks a deleted segment's renamed files `delay_ms` from now and then
/// drops `files` (its descriptors and index maps), off the shard: the last
/// close of an unlinked file frees its page cache, which took 0.1-0.9 s of
/// a shard for a 256 MiB segment retention deleted (`perf/compare.sh`,
/// 2026-12-07).
pub(super) fn delete_after<F: Send + 'static>(paths: Vec<PathBuf>, files: F, delay_ms: u64) {
    let delete = move || {
        for path in &paths {
            match std::fs::remove_file(path) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => {
                    log::warn!("deleting {}: {e}", path.display());
                }
                _ => {}
            }
        }
        drop(files);
    };
    if delay_ms == 0 {
        LOG_DELETES.push(delete);
    } else {
        SEGMENT_DELETES.push_after(Duration::from_millis(delay_ms), delete);
    }
}

fn queue_delete(doomed: PathBuf) {
    LOG_DELETES.push(move || match std::fs::remove_dir_all(&doomed) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => {
            log::warn!("deleting log directory {}: {e}", doomed.display());
        }
        _ => {}
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn wait_gone(path: &Path) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while path.exists() {
            assert!(Instant::now() < deadline, "{} not deleted", path.display());
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn doomed_in(parent: &Path) -> Vec<PathBuf> {
        std::fs::read_dir(parent)
            .unwrap()
            .map(|e| e.unwrap())
            .filter(|e| is_doomed(&e.file_name()))
            .map(|e| e.path())
            .collect()
    }

    #[test]
    fn a_deleted_log_is_renamed_at_once_and_unlinked_later() {
        let parent = tempfile::tempdir().unwrap();
        let dir = parent.path().join("orders-3");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("00000000000000000000.log"), vec![1u8; 4096]).unwrap();
        delete_log_dir(&dir).unwrap();
        assert!(!dir.exists());
        for doomed in doomed_in(parent.path()) {
            let name = doomed.file_name().unwrap().to_str().unwrap().to_string();
            assert!(
                name.starts_with("orders-3.") && name.ends_with("-delete"),
                "{name}"
            );
            wait_gone(&doomed);
        }
    }

    #[test]
    fn leftovers_of_an_earlier_run_are_deleted() {
        let parent = tempfile::tempdir().unwrap();
        let leftover = parent.path().join("orders-0.4f2a9c-delete");
        let kept = parent.path().join("orders-1");
        std::fs::create_dir(&leftover).unwrap();
        std::fs::create_dir(&kept).unwrap();
        std::fs::write(leftover.join("x.log"), b"x").unwrap();
        assert_eq!(delete_leftover_logs(parent.path()).unwrap(), 1);
        wait_gone(&leftover);
        assert!(kept.exists());
    }

    #[test]
    fn long_names_are_cut_to_fit() {
        let topic = "t".repeat(249);
        let doomed = doomed_name(&Path::new("/logs").join(format!("{topic}-12")));
        let name = doomed.file_name().unwrap().to_str().unwrap();
        assert!(name.len() <= FILE_NAME_BYTES_MAX, "{}", name.len());
        assert!(is_doomed(doomed.file_name().unwrap()));
    }
}
