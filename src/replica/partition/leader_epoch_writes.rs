//! Writes of `leader-epoch-checkpoint` files off the shards. Replacing the
//! file durably takes an fsync of it and of its directory, and even the
//! create and rename wait for the filesystem's journal while other fsyncs
//! commit (ext4): up to 200 ms each on this machine, which held a shard
//! that led 1,000 partitions at once. So one thread writes every
//! checkpoint in the order queued (a later write of a file lands after an
//! earlier one) and reports each through a oneshot the shard awaits.
//! Synchronous readers and writers of a file first wait for its queued
//! writes, so nobody reads a checkpoint older than one already queued.

use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex};

use kshard_shards::background::BackgroundQueue;

static WRITES: BackgroundQueue = BackgroundQueue::new("epoch-checkpoint");

/// Writes queued and not yet done, per file.
static QUEUED: Mutex<BTreeMap<PathBuf, u32>> = Mutex::new(BTreeMap::new());
static WRITTEN: Condvar = Condvar::new();

/// Resolves when a queued write is durable (or failed).
pub type QueuedWrite = futures_channel::oneshot::Receiver<io::Result<()>>;

/// Queues a durable replacement of `path` with `text`. A directory deleted
/// before its turn (the partition's log deleted) needs no write.
pub fn queue_write(path: PathBuf, text: String) -> QueuedWrite {
    *QUEUED
        .lock()
        .expect("queued")
        .entry(path.clone())
        .or_default() += 1;
    let (done, queued) = futures_channel::oneshot::channel();
    WRITES.push(move || {
        let result = match write_durably(&path, &text) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            other => other,
        };
        let mut queued = QUEUED.lock().expect("queued");
        let left = queued
            .get_mut(&path)
            .expect("a queued write is counted until done");
        *left -= 1;
        if *left == 0 {
            queued.remove(&path);
        }
        drop(queued);
        WRITTEN.notify_all();
        // The shard may have stopped waiting (partition closed): fine.
        let _ = done.send(result);
    });
    queued
}

/// Blocks until no write of `path` is queued.
pub fn wait_for_queued(path: &Path) {
    let mut queued = QUEUED.lock().expect("queued");
    while queued.contains_key(path) {
        queued = WRITTEN.wait(queued).expect("queued");
    }
}

/// Replaces `path` with `text` durably on this thread, after its queued
/// writes.
pub fn write_now(path: &Path, text: &str) -> io::Result<()> {
    wait_for_queued(path);
    write_durably(path, text)
}

/// Waits until every queued write is done (clean shutdown).
pub fn wait_for_leader_epoch_writes() {
    WRITES.wait_idle();
}

/// Write a temporary, fsync it, rename it over `path`, fsync the directory.
fn write_durably(path: &Path, text: &str) -> io::Result<()> {
    let tmp = path.with_extension("tmp");
    let mut f = fs::File::create(&tmp)?;
    f.write_all(text.as_bytes())?;
    f.sync_all()?;
    fs::rename(&tmp, path)?;
    let dir = path
        .parent()
        .expect("a checkpoint lives in a partition directory");
    fs::File::open(dir)?.sync_all()
}

/// Tests: removes a partition directory once no checkpoint write, log
/// close (its producer snapshot) or dropped segment can still touch it.
#[cfg(test)]
pub fn remove_test_dir(dir: &Path) {
    wait_for_leader_epoch_writes();
    kshard_shards::log::log_create::LOG_DIRS.wait_idle();
    kshard_shards::log::producer_state::wait_for_snapshot_syncs();
    kshard_shards::log::index_file::wait_for_landed();
    fs::remove_dir_all(dir).unwrap();
}
