//! Background flush of rolled segments, as Kafka's `roll` schedules
//! `flushUptoOffsetExclusive` on its scheduler instead of fsyncing on the
//! request thread. An fsync of a freshly rolled segment writes out up to
//! `segment.bytes` of dirty pages (about 100 ms for 128 MiB here); done on
//! the shard it stalls every request the shard serves.
//!
//! A roll queues a [`RollSync`]; the broker takes the jobs
//! ([`Log::take_roll_syncs`]), runs them on a blocking thread and reports
//! back ([`Log::complete_roll_sync`]). The recovery point moves to a roll's
//! base offset only once that roll's sync and every earlier one finished.
//! `flush` syncs the files of pending rolls itself, so an explicit flush
//! (flush.messages, flush.ms, close) never depends on the background.

use std::fs::File;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use super::Log;

/// A rolled segment's fsync, tracked by the log until it completes.
pub(super) struct RollSync {
    id: u64,
    files: Vec<Arc<File>>,
    /// The roll's base offset: everything below is in `files` or synced.
    up_to_offset: i64,
    started: bool,
    done: bool,
}

/// One roll's fsyncs, to run off the shard (it blocks).
pub struct RollSyncJob {
    id: u64,
    files: Vec<Arc<File>>,
    dir: PathBuf,
}

impl RollSyncJob {
    pub fn id(&self) -> u64 {
        self.id
    }

    /// fdatasyncs the rolled segments' files, then the partition directory
    /// (the new segment's entry).
    pub fn run(&self) -> io::Result<()> {
        // The rolled indexes' last entries and trims were queued (and
        // shipped) by the roll: they land first.
        super::super::index_file::wait_for_landed();
        sync_files(&self.files)?;
        super::sync_dir(&self.dir)
    }
}

fn sync_files(files: &[Arc<File>]) -> io::Result<()> {
    for f in files {
        f.sync_data()?;
    }
    Ok(())
}

impl Log {
    /// Called by a roll once the new active segment starts at
    /// `up_to_offset`: every dirty segment below it is handed to a
    /// background sync.
    pub(super) fn queue_roll_sync(&mut self, up_to_offset: i64) -> io::Result<()> {
        let mut files = Vec::new();
        for (_, seg) in self
            .segments
            .range_mut(..up_to_offset)
            .filter(|(_, s)| s.dirty)
        {
            files.extend(seg.detach_sync()?);
        }
        let id = self.next_roll_sync_id;
        self.next_roll_sync_id += 1;
        debug_assert!(self
            .roll_syncs
            .back()
            .is_none_or(|r| r.up_to_offset <= up_to_offset));
        self.roll_syncs.push_back(RollSync {
            id,
            files,
            up_to_offset,
            started: false,
            done: false,
        });
        Ok(())
    }

    /// The roll syncs not yet started, marked started.
    pub fn take_roll_syncs(&mut self) -> Vec<RollSyncJob> {
        let mut jobs = Vec::new();
        for r in self.roll_syncs.iter_mut().filter(|r| !r.started) {
            r.started = true;
            jobs.push(RollSyncJob {
                id: r.id,
                files: r.files.clone(),
                dir: self.dir.clone(),
            });
        }
        jobs
    }

    /// Rolls whose sync has not completed.
    pub fn pending_roll_syncs(&self) -> usize {
        self.roll_syncs.len()
    }

    /// A background roll sync finished. On success the recovery point moves
    /// over every leading completed roll. A failed sync is retried by the
    /// next `take_roll_syncs`; the recovery point waits. Unknown ids (a
    /// flush or truncation settled them meanwhile) are ignored.
    pub fn complete_roll_sync(&mut self, id: u64, result: io::Result<()>) -> io::Result<()> {
        let Some(r) = self.roll_syncs.iter_mut().find(|r| r.id == id) else {
            return Ok(());
        };
        if let Err(e) = result {
            r.started = false;
            return Err(e);
        }
        r.done = true;
        while self.roll_syncs.front().is_some_and(|r| r.done) {
            let r = self.roll_syncs.pop_front().expect("front");
            self.recovery_point = self
                .recovery_point
                .max(r.up_to_offset.min(self.log_end_offset));
        }
        Ok(())
    }

    /// For `close_queued`: the files of every pending roll, to fsync
    /// elsewhere before the log counts as closed; the rolls are settled.
    pub(super) fn take_pending_roll_files(&mut self) -> Vec<Arc<File>> {
        self.roll_syncs.drain(..).flat_map(|r| r.files).collect()
    }

    /// For `flush` and truncation: fsyncs every pending roll's files here
    /// and now. (Truncation may rewrite offsets a pending roll covers, so
    /// its completion could no longer move the recovery point safely.)
    pub(super) fn sync_pending_rolls(&mut self) -> io::Result<()> {
        if !self.roll_syncs.is_empty() {
            // The rolled indexes' last entries and trims were queued.
            super::super::index_file::ship_queued_writes();
            super::super::index_file::wait_for_landed();
        }
        for r in &self.roll_syncs {
            sync_files(&r.files)?;
        }
        self.roll_syncs.clear();
        Ok(())
    }
}
