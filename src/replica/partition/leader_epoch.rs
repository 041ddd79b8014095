//! `leader-epoch-checkpoint`: each leader epoch and the first offset written
//! in it (KIP-101), Kafka's LeaderEpochFileCache. Text format:
//! `0\n<count>\n<epoch> <start offset>\n...`, replaced atomically.
//!
//! Kafka fsyncs the file in `assign` before the epoch takes any record, so
//! the checkpoint never misses an epoch a durable record belongs to. A
//! leader's path here queues the write instead
//! ([`LeaderEpochCache::assign_queued`], see `leader_epoch_writes`); the
//! caller fences the partition's appends until the write is durable, so
//! the order of Kafka's guarantee holds without the shard waiting.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use super::leader_epoch_writes::{queue_write, wait_for_queued, write_now, QueuedWrite};

pub const UNDEFINED_EPOCH: i32 = -1;
pub const UNDEFINED_EPOCH_OFFSET: i64 = -1;
const FILE_NAME: &str = "leader-epoch-checkpoint";

pub struct LeaderEpochCache {
    path: PathBuf,
    /// (epoch, start offset), both strictly increasing.
    entries: Vec<(i32, i64)>,
    /// Writes queued by `assign_queued` and not yet taken by the caller.
    queued_writes: Vec<QueuedWrite>,
    /// The last write failed: the file may not hold `entries`.
    file_stale: bool,
}

fn parse(text: &str) -> Option<Vec<(i32, i64)>> {
    let mut lines = text.lines();
    if lines.next()?.trim() != "0" {
        return None;
    }
    let count: usize = lines.next()?.trim().parse().ok()?;
    let mut entries = Vec::with_capacity(count.min(1024));
    for _ in 0..count {
        let mut parts = lines.next()?.split_whitespace();
        let epoch: i32 = parts.next()?.parse().ok()?;
        let offset: i64 = parts.next()?.parse().ok()?;
        entries.push((epoch, offset));
    }
    Some(entries)
}

impl LeaderEpochCache {
    pub fn open(dir: &Path) -> io::Result<Self> {
        let path = dir.join(FILE_NAME);
        // A reopened partition may still have writes of its file queued.
        wait_for_queued(&path);
        let entries = match fs::read_to_string(&path) {
            Ok(text) => parse(&text).unwrap_or_else(|| {
                log::warn!("{}: malformed, starting empty", path.display());
                Vec::new()
            }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(e),
        };
        Ok(LeaderEpochCache {
            path,
            entries,
            queued_writes: Vec::new(),
            file_stale: false,
        })
    }

    /// The partition's log moved to `dir` (AlterReplicaLogDirs): the
    /// entries are kept and written there, queued (not awaited: they are
    /// the same epochs the old file held).
    pub fn relocate(&mut self, dir: &Path) -> io::Result<()> {
        self.path = dir.join(FILE_NAME);
        self.write(false)?;
        drop(self.queued_writes.pop());
        Ok(())
    }

    pub fn entries(&self) -> &[(i32, i64)] {
        &self.entries
    }

    pub fn latest_epoch(&self) -> i32 {
        self.entries.last().map(|e| e.0).unwrap_or(UNDEFINED_EPOCH)
    }

    /// The epoch in which `offset` was (or will be) written.
    pub fn epoch_for_offset(&self, offset: i64) -> i32 {
        self.entries
            .iter()
            .rev()
            .find(|e| e.1 <= offset)
            .map(|e| e.0)
            .unwrap_or(UNDEFINED_EPOCH)
    }

    /// Records that `epoch` starts at `start_offset` (ignored unless newer),
    /// durably.
    pub fn assign(&mut self, epoch: i32, start_offset: i64) -> io::Result<()> {
        if self.assign_in_memory(epoch, start_offset) {
            self.write(true)?;
        }
        Ok(())
    }

    /// `assign`, the write queued: the caller must await
    /// [`Self::take_queued_writes`] before the epoch takes a record.
    pub fn assign_queued(&mut self, epoch: i32, start_offset: i64) -> io::Result<()> {
        if self.assign_in_memory(epoch, start_offset) {
            self.write(false)?;
        }
        Ok(())
    }

    /// Opening a log: drops epochs at or past its end (a truncated tail),
    /// then records `epoch` at the end; one file write, queued as in
    /// `assign_queued`.
    pub fn reset_to_log_end_queued(&mut self, epoch: i32, log_end_offset: i64) -> io::Result<()> {
        let before = self.entries.clone();
        self.entries.retain(|&(_, start)| start < log_end_offset);
        self.assign_in_memory(epoch, log_end_offset);
        // Kafka drops an epoch that starts at the end, then assigns it again.
        if self.entries != before {
            self.write(false)?;
        }
        Ok(())
    }

    /// A newer epoch starts at `start_offset`. Entries starting past it go
    /// first, as Kafka's `maybeTruncateNonMonotonicEntries` drops them: a
    /// follower records a fetched batch's epoch before the append, and may
    /// become leader before the batch is appended.
    fn assign_in_memory(&mut self, epoch: i32, start_offset: i64) -> bool {
        if self
            .entries
            .last()
            .is_some_and(|&(last_epoch, _)| epoch <= last_epoch)
        {
            return false;
        }
        while self
            .entries
            .last()
            .is_some_and(|&(_, start)| start > start_offset)
        {
            self.entries.pop();
        }
        self.entries.push((epoch, start_offset));
        true
    }

    /// The writes queued since the last call; the caller awaits them.
    pub fn take_queued_writes(&mut self) -> Vec<QueuedWrite> {
        std::mem::take(&mut self.queued_writes)
    }

    /// A follower about to append fetched batches, whose (epoch, base
    /// offset) `batches` gives, at log end offset `leo`: whether the
    /// checkpoint changes (see `follower_update`) or its last write failed.
    pub fn needs_follower_update(
        &self,
        leo: i64,
        batches: impl Iterator<Item = (i32, i64)>,
    ) -> bool {
        if self.file_stale {
            return true;
        }
        // The update keeps the entries below `leo` and puts the batches'
        // new epochs after them: a change unless those are already there.
        let kept = self.entries.partition_point(|&(_, start)| start < leo);
        let tail = &self.entries[kept..];
        let mut latest = kept
            .checked_sub(1)
            .map_or(UNDEFINED_EPOCH, |i| self.entries[i].0);
        let mut matched = 0;
        for (epoch, base_offset) in batches {
            if epoch > latest {
                if tail.get(matched) != Some(&(epoch, base_offset)) {
                    return true;
                }
                matched += 1;
                latest = epoch;
            }
        }
        matched != tail.len()
    }

    /// Kafka's follower append: epochs starting at or past `leo` go (they
    /// have no batches; the fetched ones say what is there), then each
    /// newer epoch starts at its first batch. One write, on this thread
    /// with `now`, else queued (see `assign_queued`).
    pub fn follower_update(
        &mut self,
        leo: i64,
        batches: impl Iterator<Item = (i32, i64)>,
        now: bool,
    ) -> io::Result<()> {
        self.entries.retain(|&(_, start)| start < leo);
        for (epoch, base_offset) in batches {
            if epoch >= 0 {
                self.assign_in_memory(epoch, base_offset);
            }
        }
        self.file_stale = false;
        let written = self.write(now);
        self.file_stale = written.is_err();
        written
    }

    /// A queued write failed: the next follower append writes again.
    pub fn mark_file_stale(&mut self) {
        self.file_stale = true;
    }

    /// Drops epochs that start at or after `end_offset` (log truncation).
    pub fn truncate_from_end(&mut self, end_offset: i64) -> io::Result<()> {
        let before = self.entries.len();
        self.entries.retain(|&(_, start)| start < end_offset);
        if self.entries.len() != before {
            self.write(true)?;
        }
        Ok(())
    }

    /// Kafka's endOffsetFor: the epoch at or below `requested` and the end
    /// offset of that epoch (the start of the next one, or the LEO).
    pub fn end_offset_for(&self, requested: i32, log_end_offset: i64) -> (i32, i64) {
        if requested == UNDEFINED_EPOCH || self.entries.is_empty() {
            return (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET);
        }
        if requested == self.latest_epoch() {
            return (requested, log_end_offset);
        }
        let higher = self.entries.iter().find(|e| e.0 > requested);
        match higher {
            None => (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET),
            Some(&(_, higher_start)) => {
                match self.entries.iter().rev().find(|e| e.0 <= requested) {
                    None => (requested, higher_start),
                    Some(&(floor_epoch, _)) => (floor_epoch, higher_start),
                }
            }
        }
    }

    /// Replaces the file durably: on this thread with `now`, else queued.
    fn write(&mut self, now: bool) -> io::Result<()> {
        let mut text = format!("0\n{}\n", self.entries.len());
        for (epoch, offset) in &self.entries {
            text.push_str(&format!("{epoch} {offset}\n"));
        }
        if now {
            write_now(&self.path, &text)
        } else {
            self.queued_writes
                .push(queue_write(self.path.clone(), text));
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn end_offsets_follow_kafka() {
        let dir = std::env::temp_dir().join(format!("kshard-lec-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let mut c = LeaderEpochCache::open(&dir).unwrap();
        c.assign(0, 0).unwrap();
        c.assign(2, 10).unwrap();
        c.assign(5, 30).unwrap();
        assert_eq!(c.end_offset_for(5, 42), (5, 42));
        assert_eq!(c.end_offset_for(0, 42), (0, 10));
        assert_eq!(c.end_offset_for(1, 42), (0, 10));
        assert_eq!(c.end_offset_for(3, 42), (2, 30));
        assert_eq!(
            c.end_offset_for(6, 42),
            (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
        );
        let reopened = LeaderEpochCache::open(&dir).unwrap();
        assert_eq!(reopened.entries(), &[(0, 0), (2, 10), (5, 30)]);
        c.truncate_from_end(10).unwrap();
        assert_eq!(c.entries(), &[(0, 0)]);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn queued_writes_land_in_order_and_readers_wait_for_them() {
        let dir = std::env::temp_dir().join(format!("kshard-lec-queued-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let mut c = LeaderEpochCache::open(&dir).unwrap();
        c.assign(0, 0).unwrap();
        assert!(c.take_queued_writes().is_empty(), "assign writes at once");
        c.assign_queued(2, 10).unwrap();
        c.assign_queued(1, 12).unwrap(); // older: ignored
        c.assign_queued(3, 20).unwrap();
        let writes = c.take_queued_writes();
        assert_eq!(writes.len(), 2);
        assert!(c.take_queued_writes().is_empty());
        // Opening waits for the queued writes: it sees the last one.
        assert_eq!(
            LeaderEpochCache::open(&dir).unwrap().entries(),
            &[(0, 0), (2, 10), (3, 20)]
        );
        for w in writes {
            futures_lite::future::block_on(w).unwrap().unwrap();
        }
        // Reopening a log truncated to 10: epochs 2 and 3 go, 4 starts there.
        c.reset_to_log_end_queued(4, 10).unwrap();
        assert_eq!(c.entries(), &[(0, 0), (4, 10)]);
        assert_eq!(c.take_queued_writes().len(), 1);
        // Kafka drops an epoch starting at the end and assigns it again:
        // the same entries, no write.
        c.reset_to_log_end_queued(4, 10).unwrap();
        assert!(c.take_queued_writes().is_empty());
        // An epoch recorded for batches never appended yields to a newer
        // one starting below it.
        c.assign_queued(6, 30).unwrap();
        c.assign_queued(7, 12).unwrap();
        assert_eq!(c.entries(), &[(0, 0), (4, 10), (7, 12)]);
        // A partition deleted (its directory renamed away, as `Log::delete`
        // does) before its write's turn needs none.
        c.assign_queued(8, 13).unwrap();
        let deleted = dir.with_extension("deleted");
        fs::rename(&dir, &deleted).unwrap();
        for w in c.take_queued_writes() {
            futures_lite::future::block_on(w).unwrap().unwrap();
        }
        assert!(!dir.exists());
        fs::remove_dir_all(&deleted).unwrap();
    }
}
