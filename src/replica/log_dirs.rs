//! The broker's `log.dirs` (JBOD), as Kafka's `LogManager` keeps them: the
//! live log directories, how many partition logs each holds, and where each
//! log found at start-up lives (`loadLogs`). A new log goes to the directory
//! with the fewest logs, ties to the first in `log.dirs` order
//! (`nextLogDirs`). One `LogDirs` is shared by every shard; each shard keeps
//! the directory of the logs it owns (`Partitions`), and counts here move
//! when a log is placed or deleted.

use std::collections::HashMap;
use std::io;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use kshard_shards::log::parse_partition_dir_name;

/// Which log dir (an index into `LogDirs`) holds each partition's log.
pub type LogLocations = HashMap<(String, i32), usize>;

/// Kafka's `LogFileUtils` suffixes of directories that are not a current
/// log: a log being deleted, a future replica, a stray one.
const NOT_CURRENT_LOG_SUFFIXES: &[&str] = &["-delete", "-future", "-stray"];

struct LogDir {
    path: PathBuf,
    /// Partition logs in this directory (Kafka counts `allLogs` by parent).
    partitions: AtomicUsize,
    /// Set once an I/O error hit this directory (Kafka's offline log dir);
    /// each of its partitions holds a clone and checks it before use.
    offline: Arc<AtomicBool>,
}

pub struct LogDirs {
    dirs: Vec<LogDir>,
    /// Makes choosing a directory and counting the new log there one step,
    /// so that shards placing logs at once still spread them evenly.
    placement: Mutex<()>,
    /// Directories gone offline that the broker has not yet reported
    /// (Kafka's LogDirFailureChannel); rare, so a lock is fine.
    unreported_failures: Mutex<Vec<usize>>,
}

impl LogDirs {
    /// `paths` (absolute, as Kafka prints them) with no logs counted yet.
    pub fn new(paths: Vec<PathBuf>) -> LogDirs {
        assert!(!paths.is_empty(), "log.dirs is never empty");
        LogDirs {
            dirs: paths
                .into_iter()
                .map(|path| LogDir {
                    path,
                    partitions: AtomicUsize::new(0),
                    offline: Arc::new(AtomicBool::new(false)),
                })
                .collect(),
            placement: Mutex::new(()),
            unreported_failures: Mutex::new(Vec::new()),
        }
    }

    /// One dir `dir` with no logs counted (tests, tools).
    pub fn single(dir: &Path) -> std::sync::Arc<LogDirs> {
        std::sync::Arc::new(LogDirs::new(vec![dir.to_path_buf()]))
    }

    /// Start-up (Kafka's `createAndValidateLogDirs` and `loadLogs`): each
    /// configured directory is created if missing, a directory named twice
    /// is refused, the logs an earlier run had deleted are queued for
    /// removal, and every partition directory is found. A partition found
    /// in two directories stops start-up, as Kafka does.
    pub fn load(configured: &[PathBuf]) -> Result<(LogDirs, LogLocations), String> {
        let mut paths = Vec::with_capacity(configured.len());
        let mut canonical: Vec<PathBuf> = Vec::with_capacity(configured.len());
        for dir in configured {
            let path =
                absolute_path(dir).map_err(|e| format!("log.dirs {}: {e}", dir.display()))?;
            std::fs::create_dir_all(&path)
                .map_err(|e| format!("log.dirs {}: {e}", path.display()))?;
            let real = path
                .canonicalize()
                .map_err(|e| format!("log.dirs {}: {e}", path.display()))?;
            if canonical.contains(&real) {
                let all: Vec<String> = configured.iter().map(|d| d.display().to_string()).collect();
                return Err(format!("Duplicate log directory found: {}", all.join(", ")));
            }
            canonical.push(real);
            let leftovers = kshard_shards::log::log_deleter::delete_leftover_logs(&path)
                .map_err(|e| format!("log.dirs {}: {e}", path.display()))?;
            if leftovers > 0 {
                log::info!(
                    "deleting {leftovers} log directories an earlier run had deleted in {}",
                    path.display()
                );
            }
            crate::replica::future_log::discard_future_logs(&path)
                .map_err(|e| format!("log.dirs {}: {e}", path.display()))?;
            paths.push(path);
        }
        let locations = locate_logs(&paths)?;
        let log_dirs = LogDirs::new(paths);
        for &dir in locations.values() {
            log_dirs.dirs[dir]
                .partitions
                .fetch_add(1, Ordering::Relaxed);
        }
        Ok((log_dirs, locations))
    }

    pub fn len(&self) -> usize {
        self.dirs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.dirs.is_empty()
    }

    /// The directory at `index`, absolute.
    pub fn path(&self, index: usize) -> &Path {
        &self.dirs[index].path
    }

    pub fn paths(&self) -> impl Iterator<Item = &Path> {
        self.dirs.iter().map(|d| d.path.as_path())
    }

    /// How many partition logs the directory at `index` holds.
    pub fn partition_count(&self, index: usize) -> usize {
        self.dirs[index].partitions.load(Ordering::Relaxed)
    }

    /// Kafka's `nextLogDirs().head`: the live directory with the fewest
    /// logs, ties to the first in `log.dirs` order; the new log is counted
    /// there. None when every directory is offline.
    pub fn next_log_dir(&self) -> Option<usize> {
        let _placing = self.placement.lock().expect("log dir placement");
        let chosen = (0..self.dirs.len())
            .filter(|&i| !self.is_offline(i))
            .min_by_key(|&i| self.partition_count(i))?;
        self.dirs[chosen].partitions.fetch_add(1, Ordering::Relaxed);
        Some(chosen)
    }

    pub fn is_offline(&self, index: usize) -> bool {
        self.dirs[index].offline.load(Ordering::Relaxed)
    }

    /// The flag a partition in the directory at `index` checks.
    pub fn offline_flag(&self, index: usize) -> Arc<AtomicBool> {
        self.dirs[index].offline.clone()
    }

    /// Kafka's `maybeAddOfflineLogDir`: an I/O error in the directory at
    /// `index` takes it offline, for good until a restart; its partitions
    /// answer KAFKA_STORAGE_ERROR and no new log goes there. True the
    /// first time, when the failure is queued to be reported.
    pub fn mark_offline(&self, index: usize, cause: &str) -> bool {
        if self.dirs[index].offline.swap(true, Ordering::AcqRel) {
            return false;
        }
        log::error!(
            "Stopping serving logs in dir {}: {cause}",
            self.path(index).display()
        );
        self.unreported_failures
            .lock()
            .expect("log dir failures")
            .push(index);
        true
    }

    /// The directories that went offline since the last call.
    pub fn take_unreported_failures(&self) -> Vec<usize> {
        std::mem::take(&mut *self.unreported_failures.lock().expect("log dir failures"))
    }

    /// A log was made in the directory at `index` by choice, not by
    /// `next_log_dir` (a future replica, a preferred dir).
    pub fn log_added(&self, index: usize) {
        self.dirs[index].partitions.fetch_add(1, Ordering::Relaxed);
    }

    /// A log of the directory at `index` was deleted.
    pub fn log_deleted(&self, index: usize) {
        let before = self.dirs[index].partitions.fetch_sub(1, Ordering::Relaxed);
        assert!(
            before > 0,
            "{} counted no log to delete",
            self.path(index).display()
        );
    }
}

/// `dir` made absolute against the working directory, without resolving
/// symbolic links (Java's `toAbsolutePath`); `.` parts and a trailing `/`
/// are dropped.
fn absolute_path(dir: &Path) -> io::Result<PathBuf> {
    let joined = if dir.is_absolute() {
        dir.to_path_buf()
    } else {
        std::env::current_dir()?.join(dir)
    };
    Ok(joined
        .components()
        .filter(|c| !matches!(c, Component::CurDir))
        .collect())
}

/// The partitions whose logs are in `dir`: subdirectories named
/// `<topic>-<partition>`, not `-delete`, `-future` or `-stray` ones, nor
/// anything else kept there (the metadata store, checkpoint files).
pub fn scan_log_dir(dir: &Path) -> io::Result<Vec<(String, i32)>> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let Some(name) = entry.file_name().to_str().map(str::to_string) else {
            continue;
        };
        if NOT_CURRENT_LOG_SUFFIXES.iter().any(|s| name.ends_with(s)) {
            continue;
        }
        if !entry.file_type()?.is_dir() {
            continue;
        }
        if let Some(tp) = parse_partition_dir_name(&name) {
            found.push(tp);
        }
    }
    Ok(found)
}

/// Where every partition's log is, over all `dirs` (by index).
fn locate_logs(dirs: &[PathBuf]) -> Result<LogLocations, String> {
    let mut locations = LogLocations::new();
    for (index, dir) in dirs.iter().enumerate() {
        let found = scan_log_dir(dir).map_err(|e| format!("log.dirs {}: {e}", dir.display()))?;
        for (topic, partition) in found {
            if let Some(&other) = locations.get(&(topic.clone(), partition)) {
                let name = format!("{topic}-{partition}");
                return Err(format!(
                    "Duplicate log directories for {name} are found in both {} and {}. \
                     It is likely because log directory failure happened while broker was \
                     replacing current replica with future replica. Recover broker from this \
                     failure by manually deleting one of the two directories for this partition. \
                     It is recommended to delete the partition in the log directory that is \
                     known to have failed recently.",
                    dir.join(&name).display(),
                    dirs[other].join(&name).display()
                ));
            }
            locations.insert((topic, partition), index);
        }
    }
    Ok(locations)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("kshard-logdirs-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_new_log_goes_to_the_dir_with_fewest_logs_ties_to_the_first() {
        let dirs = LogDirs::new(vec!["/a".into(), "/b".into(), "/c".into()]);
        let placed: Vec<usize> = (0..7).map(|_| dirs.next_log_dir().unwrap()).collect();
        assert_eq!(placed, vec![0, 1, 2, 0, 1, 2, 0]);
        dirs.log_deleted(1);
        dirs.log_deleted(1);
        assert_eq!(dirs.next_log_dir(), Some(1), "b holds the fewest");
        assert_eq!(
            (0..3).map(|i| dirs.partition_count(i)).collect::<Vec<_>>(),
            vec![3, 1, 2]
        );
        assert_eq!(dirs.next_log_dir(), Some(1));
        assert_eq!(
            dirs.next_log_dir(),
            Some(1),
            "b ties with c and comes first"
        );
    }

    #[test]
    fn placement_from_many_threads_stays_even() {
        let dirs = std::sync::Arc::new(LogDirs::new(vec!["/a".into(), "/b".into()]));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let dirs = dirs.clone();
                std::thread::spawn(move || {
                    for _ in 0..1000 {
                        dirs.next_log_dir().unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(
            (dirs.partition_count(0), dirs.partition_count(1)),
            (2000, 2000)
        );
    }

    #[test]
    fn scanning_finds_only_current_partition_logs() {
        let dir = temp_dir("scan");
        for name in [
            "t-0",
            "my-topic-12",
            "t-1.abc-delete",
            "t-2-future",
            "t-3.abc-stray",
            "__kshard_metadata",
            "no_partition",
            "t-x",
        ] {
            std::fs::create_dir(dir.join(name)).unwrap();
        }
        std::fs::write(dir.join("u-4"), b"a file, not a log").unwrap();
        std::fs::write(dir.join("recovery-point-offset-checkpoint"), b"0\n0\n").unwrap();
        let mut found = scan_log_dir(&dir).unwrap();
        found.sort();
        assert_eq!(
            found,
            vec![("my-topic".to_string(), 12), ("t".to_string(), 0)]
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn load_creates_dirs_counts_logs_and_refuses_duplicates() {
        let root = temp_dir("load");
        let (a, b) = (root.join("a"), root.join("b/"));
        std::fs::create_dir_all(a.join("t-0")).unwrap();
        std::fs::create_dir_all(a.join("t-1")).unwrap();
        let (dirs, locations) = LogDirs::load(&[a.clone(), b.clone()]).unwrap();
        assert!(root.join("b").is_dir(), "a missing dir is created");
        assert_eq!(dirs.path(1), root.join("b"), "no trailing separator");
        assert_eq!((dirs.partition_count(0), dirs.partition_count(1)), (2, 0));
        assert_eq!(locations[&("t".to_string(), 1)], 0);
        assert_eq!(dirs.next_log_dir(), Some(1));
        assert_eq!(dirs.next_log_dir(), Some(1));
        assert_eq!(dirs.next_log_dir(), Some(0));

        std::fs::create_dir_all(root.join("b").join("t-1")).unwrap();
        let e = LogDirs::load(&[a.clone(), b.clone()]).err().unwrap();
        assert!(
            e.starts_with("Duplicate log directories for t-1 are found in both"),
            "{e}"
        );
        assert!(e.contains(&a.join("t-1").display().to_string()), "{e}");

        let e = LogDirs::load(&[a.clone(), root.join("./a")]).err().unwrap();
        assert!(e.starts_with("Duplicate log directory found: "), "{e}");
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn an_offline_dir_takes_no_new_logs_and_is_reported_once() {
        let dirs = LogDirs::new(vec![PathBuf::from("/a"), PathBuf::from("/b")]);
        let flag = dirs.offline_flag(0);
        assert!(dirs.mark_offline(0, "No space left on device"));
        assert!(flag.load(Ordering::Relaxed) && dirs.is_offline(0));
        assert!(!dirs.mark_offline(0, "again"), "reported once");
        assert_eq!(dirs.take_unreported_failures(), vec![0]);
        assert!(dirs.take_unreported_failures().is_empty());
        assert_eq!(dirs.next_log_dir(), Some(1));
        assert_eq!(dirs.next_log_dir(), Some(1), "never the offline dir");
        dirs.mark_offline(1, "gone");
        assert_eq!(dirs.next_log_dir(), None);
    }
}
