//! Producer snapshot files written off the shard. A roll's snapshot is
//! made in memory on the shard (`ProducerStateManager::take_snapshot`) and
//! created, renamed into place and fsynced on the `snapshot-sync` thread:
//! creating and renaming a file waits on ext4's journal as an fsync does
//! (16 ms on a shard in one direct-mode roll run). What the shard itself
//! does to the directory's snapshots (truncation, retention, a load) holds
//! the log's `SnapshotWrites` lock, and truncation bumps its generation, so
//! a snapshot queued for offsets a truncation removed is not written after
//! it (a later restart would load producer state from a discarded history).

use std::collections::HashMap;
use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex, MutexGuard, Weak};

use super::producer_state::SNAPSHOT_SUFFIX;
use crate::background::BackgroundQueue;

/// One log's snapshot directory as the `snapshot-sync` thread sees it.
#[derive(Default)]
pub(super) struct SnapshotWrites {
    state: Mutex<SnapshotDirState>,
}

#[derive(Default)]
pub(super) struct SnapshotDirState {
    /// Bumped by truncation: queued writes of an older one are dropped.
    pub generation: u64,
    /// Snapshots below it were deleted (the log start moved): a queued
    /// one below it is not written.
    pub floor_offset: i64,
}

/// Every log directory's `SnapshotWrites` in this process, so a manager
/// made for a directory again (a partition reopened, a topic of the same
/// name created after a delete) orders itself against writes an earlier
/// one queued.
static BY_DIR: LazyLock<Mutex<HashMap<PathBuf, Weak<SnapshotWrites>>>> =
    LazyLock::new(Mutex::default);

impl SnapshotWrites {
    /// The state for `dir` and its generation, shared with any earlier
    /// manager of `dir` whose writes are still queued; the generation is
    /// bumped so those writes are dropped (the new manager loads what is on
    /// disk and takes its own snapshots).
    pub(super) fn for_dir(dir: &Path) -> (Arc<SnapshotWrites>, u64) {
        let mut by_dir = BY_DIR.lock().unwrap_or_else(|e| e.into_inner());
        let writes = match by_dir.get(dir).and_then(Weak::upgrade) {
            Some(writes) => writes,
            None => {
                // Now and then, drop the entries of managers that are gone.
                if by_dir.len() % 1024 == 1023 {
                    by_dir.retain(|_, w| w.strong_count() > 0);
                }
                let writes = Arc::new(SnapshotWrites::default());
                by_dir.insert(dir.to_path_buf(), Arc::downgrade(&writes));
                writes
            }
        };
        let generation = {
            let mut state = writes.lock();
            state.generation += 1;
            state.generation
        };
        (writes, generation)
    }

    /// Held while the shard lists or removes the directory's snapshots.
    pub(super) fn lock(&self) -> MutexGuard<'_, SnapshotDirState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Writes and fsyncs `snapshot` on the `snapshot-sync` thread unless a
    /// truncation bumped the generation since `generation` was read, or
    /// retention deleted the snapshots below it meanwhile.
    pub(super) fn queue(self: &Arc<Self>, snapshot: SnapshotFile, generation: u64) {
        let writes = Arc::clone(self);
        SNAPSHOT_SYNCS.push(move || {
            let written = {
                let state = writes.lock();
                if state.generation != generation || snapshot.offset < state.floor_offset {
                    return;
                }
                snapshot.write()
            };
            let path = snapshot.path;
            match written.and_then(|()| sync_snapshot(&path)) {
                Ok(()) => {}
                // The log was deleted meanwhile.
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => log::warn!("producer snapshot {}: {e}", path.display()),
            }
        });
    }
}

/// Snapshot writes and fsyncs, off the shards.
pub(super) static SNAPSHOT_SYNCS: BackgroundQueue = BackgroundQueue::new("snapshot-sync");

/// A producer snapshot's name and bytes (`ProducerStateManager::snapshot_file`).
pub struct SnapshotFile {
    offset: i64,
    path: PathBuf,
    bytes: Vec<u8>,
}

impl SnapshotFile {
    pub(super) fn new(dir: &Path, offset: i64, bytes: Vec<u8>) -> Self {
        SnapshotFile {
            offset,
            path: snapshot_path(dir, offset),
            bytes,
        }
    }

    /// Writes the snapshot: a tmp file, renamed into place.
    fn write(&self) -> io::Result<()> {
        let tmp = self.path.with_extension("snapshot.tmp");
        File::create(&tmp)?.write_all(&self.bytes)?;
        fs::rename(&tmp, &self.path)
    }

    /// `write`, then fsyncs the snapshot and its directory; blocks, so it
    /// runs off the shard.
    pub fn write_synced(self) -> io::Result<()> {
        self.write()?;
        sync_snapshot(&self.path)
    }
}

/// A snapshot deleted (log truncated or deleted) before its turn needs no
/// fsync.
pub(super) fn sync_snapshot(path: &Path) -> io::Result<()> {
    let synced = File::open(path).and_then(|f| f.sync_all());
    match synced {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        other => other?,
    }
    let dir = path.parent().expect("a snapshot lives in its log dir");
    File::open(dir)?.sync_all()
}

/// Waits until every snapshot written so far is fsynced (clean shutdown).
pub fn wait_for_snapshot_syncs() {
    SNAPSHOT_SYNCS.wait_idle();
}

pub fn snapshot_path(dir: &Path, offset: i64) -> PathBuf {
    dir.join(format!("{offset:020}{SNAPSHOT_SUFFIX}"))
}

pub(super) fn remove_if_exists(path: &Path) -> io::Result<()> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Snapshot files in `dir`, sorted by offset. Leftover `.snapshot.tmp` files
/// from a crash mid-write are removed. A missing dir has none.
pub(super) fn list_snapshots(dir: &Path) -> io::Result<Vec<(i64, PathBuf)>> {
    let rd = match fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut out = Vec::new();
    for ent in rd {
        let ent = ent?;
        let name = ent.file_name();
        let Some(name) = name.to_str() else { continue };
        if name.ends_with(".snapshot.tmp") {
            remove_if_exists(&ent.path())?;
            continue;
        }
        let Some(stem) = name.strip_suffix(SNAPSHOT_SUFFIX) else {
            continue;
        };
        if stem.is_empty() || !stem.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        if let Ok(offset) = stem.parse::<i64>() {
            out.push((offset, ent.path()));
        }
    }
    out.sort_unstable_by_key(|(o, _)| *o);
    Ok(out)
}
