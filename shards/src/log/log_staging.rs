//! `Log`'s side of direct mode's asynchronous appends; the cycle is
//! described in [`crate::log::direct_write`]. Everything the rest of `Log`
//! exposes (log end offset, segments, reads) covers written bytes only.

use std::io;

use super::super::config::IoMode;
use super::super::direct_write::{tail_block, StagedAppend, StagedWrite, MAX_DIRECT_WRITE_BYTES};
use super::super::patched::PatchedRecords;
use super::super::segment::NewSegmentFiles;
use super::super::FileSlice;
use super::super::LogAppendInfo;
use super::super::LogConfig;
use super::{check_append_shape, invalid_input, Log, ReadInfo};

/// What the writer of a log's staged appends does next (`begin_write`).
pub enum WriteStep {
    /// Write these appends, then `complete_write`.
    Write(StagedWrite),
    /// The first staged append needs a new segment: make its files off the
    /// shard (`NewSegmentJob::run`), hand them to `segment_prepared`, then
    /// ask again. Appends keep being staged meanwhile.
    PrepareSegment(NewSegmentJob),
    /// Nothing to write now: none staged, a write in flight, or the log
    /// failed.
    Idle,
}

/// A roll's new segment, to be made off the shard. On ext4 creating and
/// sizing its files waits for the journal while other fsyncs commit: tens
/// to hundreds of milliseconds held on the shard.
pub struct NewSegmentJob {
    dir: std::path::PathBuf,
    base_offset: i64,
    config: LogConfig,
}

impl NewSegmentJob {
    /// Creates the segment's files, indexes preallocated and mapped; blocks.
    pub fn run(&self) -> io::Result<NewSegmentFiles> {
        let mut files = NewSegmentFiles::create(&self.dir, self.base_offset, &self.config)?;
        files.map_for_appends()?;
        Ok(files)
    }
}

impl Log {
    /// The next offset to assign: the log end offset plus what is staged
    /// or being written.
    pub fn next_offset(&self) -> i64 {
        match self.staging.queue.back() {
            Some(a) => a.info.last_offset + 1,
            None => self.staging.in_flight_end.unwrap_or(self.log_end_offset),
        }
    }

    /// Appends of up to `append_bytes` go through `stage` (no failed write,
    /// and: direct mode with the active segment writable with O_DIRECT, or
    /// buffered offload near the kernel's writeback thresholds, with
    /// appends still staged, or when the append may roll the segment).
    pub fn stages_appends(&self, append_bytes: usize) -> bool {
        self.can_stage()
            && match self.config.io_mode {
                // Staged only near the kernel's writeback thresholds, or
                // while anything is staged (a synchronous append needs none
                // pending), or to make the roll's files off the shard (an
                // `open` on the shard took 26 ms under load).
                IoMode::BufferedOffload => {
                    !self.staging.is_idle()
                        || super::super::dirty_pages::offload_writes()
                        || self
                            .active()
                            .may_roll_for(&self.config, append_bytes as u64)
                }
                IoMode::Direct | IoMode::Buffered => true,
            }
    }

    /// Whether this log can take staged appends at all: its mode writes
    /// them asynchronously and no write failed. Unlike `stages_appends`, it
    /// does not read the writeback flag, which another thread may flip
    /// between the caller's choice and its `stage`.
    fn can_stage(&self) -> bool {
        let asynchronous = match self.config.io_mode {
            IoMode::Direct => self.active().is_direct(),
            IoMode::BufferedOffload => true,
            IoMode::Buffered => false,
        };
        asynchronous && self.staging.failed.is_none()
    }

    /// Staged or in-flight appends exist.
    pub fn has_staged_writes(&self) -> bool {
        !self.staging.is_idle()
    }

    /// A write is in flight (its completion will look for more).
    pub fn write_in_flight(&self) -> bool {
        self.staging.in_flight_end.is_some()
    }

    /// Identifies this log instance to the writes it plans.
    pub fn log_id(&self) -> u64 {
        self.staging.log_id
    }

    /// Planning a write failed: drop what is staged and take no more
    /// appends (the waiting produces see `write_failure`).
    pub fn fail_staged(&mut self, reason: String) {
        self.staging.queue.clear();
        self.staging.failed = Some(reason);
    }

    /// Why asynchronous writing stopped, if it did.
    pub fn write_failure(&self) -> Option<&str> {
        self.staging.failed.as_deref()
    }

    pub(super) fn require_no_staged_writes(&self, what: &str) -> io::Result<()> {
        if self.staging.is_idle() {
            return Ok(());
        }
        Err(io::Error::other(format!(
            "{}: {what} while direct writes are pending (offsets {}..{})",
            self.dir.display(),
            self.log_end_offset,
            self.next_offset()
        )))
    }

    /// Queues validated batches whose offsets start at `next_offset()`;
    /// the caller chose to with `stages_appends`.
    pub fn stage(&mut self, records: PatchedRecords, info: LogAppendInfo) -> io::Result<()> {
        if !self.can_stage() {
            return Err(invalid_input(format!(
                "{}: staged append on a log that writes synchronously",
                self.dir.display()
            )));
        }
        check_append_shape(records.len(), &info, self.next_offset());
        self.staging.queue.push_back(StagedAppend { records, info });
        Ok(())
    }

    /// `begin_write` with a new segment's files made here, on the caller's
    /// thread (tests, tools).
    pub fn begin_write_now(&mut self, now_ms: i64) -> io::Result<Option<StagedWrite>> {
        loop {
            match self.begin_write(now_ms)? {
                WriteStep::Write(write) => return Ok(Some(write)),
                WriteStep::Idle => return Ok(None),
                WriteStep::PrepareSegment(job) => self.segment_prepared(job.run()?),
            }
        }
    }

    /// The files `WriteStep::PrepareSegment` asked for: the roll they are
    /// for happens at the next `begin_write`.
    pub fn segment_prepared(&mut self, files: NewSegmentFiles) {
        assert!(
            self.staging.next_segment.is_none(),
            "one new segment at a time"
        );
        assert_eq!(
            files.base_offset(),
            self.log_end_offset,
            "nothing is written while a new segment is made"
        );
        self.staging.next_segment = Some(files);
    }

    /// Plans the next write, if none is in flight and appends are staged:
    /// rolls first if the first append needs it (asking for the new
    /// segment's files first: creating them waits on the file system), then
    /// takes the appends that fit the active segment, at most
    /// `MAX_DIRECT_WRITE_BYTES` (or one larger append).
    pub fn begin_write(&mut self, now_ms: i64) -> io::Result<WriteStep> {
        if self.staging.in_flight_end.is_some() || self.staging.failed.is_some() {
            return Ok(WriteStep::Idle);
        }
        let Some(first) = self.staging.queue.front() else {
            return Ok(WriteStep::Idle);
        };
        let (len, max_ts, last) = (
            first.records.len() as u64,
            first.info.max_timestamp,
            first.info.last_offset,
        );
        // Nothing is in flight: the first staged append continues the log.
        assert_eq!(first.info.first_offset, self.log_end_offset);
        let config = self.config.clone();
        // Files made for a roll are rolled onto even if the rule no longer
        // asks for it (the clock stepped back, the config changed): left
        // unused, they would name a segment inside the active one.
        let prepared = self.staging.next_segment.is_some();
        if prepared
            || self
                .active_mut()
                .should_roll(&config, len, max_ts, last, now_ms)
        {
            let leo = self.log_end_offset;
            let active = self.active();
            // An empty active segment at the log end stays (no roll).
            if !(active.is_empty() && active.base_offset() == leo) {
                let Some(files) = self.staging.next_segment.take() else {
                    return Ok(WriteStep::PrepareSegment(NewSegmentJob {
                        dir: self.dir.clone(),
                        base_offset: leo,
                        config,
                    }));
                };
                let rolled = self.roll_segment_with(leo, now_ms, Some(files))?;
                assert_eq!(rolled, Some(leo));
                self.staging.rolled = true;
            }
        }
        let direct = self.config.io_mode == IoMode::Direct;
        if direct && !self.active().is_direct() {
            return Err(io::Error::other(format!(
                "{}: the active segment lost its direct writer with appends staged",
                self.dir.display()
            )));
        }
        let mut appends = Vec::new();
        let (mut bytes, mut batches) = (0u64, 0u64);
        while let Some(next) = self.staging.queue.front() {
            let len = next.records.len() as u64;
            let n = next.info.batch_count as u64;
            if !appends.is_empty()
                && (bytes + len > MAX_DIRECT_WRITE_BYTES as u64
                    || !self.active().fits_after(
                        &config,
                        bytes,
                        batches,
                        len,
                        n,
                        next.info.last_offset,
                    ))
            {
                break;
            }
            bytes += len;
            batches += n;
            appends.push(self.staging.queue.pop_front().expect("peeked"));
        }
        assert!(!appends.is_empty());
        if !direct {
            return Ok(WriteStep::Write(self.plan_buffered_write(appends)));
        }
        let seg = self.active_mut();
        let position = seg.size_bytes;
        let segment_base = seg.base_offset;
        let path = seg.log.path().to_path_buf();
        let w = seg.direct.as_mut().expect("checked above");
        let (file_pos, head) = match w.plan_async(position, seg.log.file(), &path) {
            Ok(plan) => plan,
            Err(e) => {
                // Put them back: nothing was written.
                for a in appends.into_iter().rev() {
                    self.staging.queue.push_front(a);
                }
                return Err(e);
            }
        };
        assert_eq!(
            file_pos + head.len() as u64,
            position,
            "the head ends at the segment's end"
        );
        let head = head.to_vec();
        let dma = w.dma.clone();
        let end_pos = position + bytes;
        let tail = tail_block(&head, &appends, end_pos);
        let write = StagedWrite {
            log_id: self.staging.log_id,
            segment_base,
            path,
            dma,
            file_pos,
            head,
            appends,
            tail,
            written: None,
            buffered: None,
        };
        assert_eq!(write.end_pos(), end_pos);
        // One write in flight per log, and none while anything truncates:
        // the write continues the log (`complete_write` moves its end).
        assert_eq!(
            write.appends[0].info.first_offset, self.log_end_offset,
            "a direct write starts at the log end offset"
        );
        self.staging.in_flight_end = Some(write.end_offset());
        Ok(WriteStep::Write(write))
    }

    /// Buffered offload: the appends go at the segment's end as they are,
    /// through the segment's descriptor.
    fn plan_buffered_write(&mut self, appends: Vec<StagedAppend>) -> StagedWrite {
        let seg = self.active();
        let write = StagedWrite {
            log_id: self.staging.log_id,
            segment_base: seg.base_offset,
            path: seg.log.path().to_path_buf(),
            dma: None,
            file_pos: seg.size_bytes,
            head: Vec::new(),
            appends,
            tail: Vec::new(),
            written: None,
            buffered: Some(seg.log.shared()),
        };
        assert_eq!(
            write.appends[0].info.first_offset, self.log_end_offset,
            "a staged write starts at the log end offset"
        );
        self.staging.in_flight_end = Some(write.end_offset());
        write
    }

    /// The write planned by `begin_write` finished with `result`. On
    /// success its appends join the log (indexes, log end offset) and a
    /// flush due by `flush.messages` or asked for meanwhile runs. On
    /// failure the staged appends are dropped and the log takes no more
    /// (as Kafka takes a failed log directory offline); the error is
    /// returned.
    pub fn complete_write(&mut self, write: StagedWrite, result: io::Result<()>) -> io::Result<()> {
        assert_eq!(write.log_id, self.staging.log_id, "a write of another log");
        assert_eq!(self.staging.in_flight_end, Some(write.end_offset()));
        self.staging.in_flight_end = None;
        let seg = self.active_mut();
        assert_eq!(
            seg.base_offset, write.segment_base,
            "rolled with a write in flight"
        );
        if let Err(e) = result {
            if let Some(w) = seg.direct.as_mut() {
                w.invalidate();
            }
            self.staging.queue.clear();
            self.staging.pending_aborts.clear();
            self.staging.failed = Some(e.to_string());
            return Err(e);
        }
        if write.buffered.is_some() {
            return self.land_write(&write);
        }
        let w = seg.direct.as_mut().expect("a direct segment");
        w.async_written(
            write.file_pos,
            write.padded_len(),
            write.end_pos(),
            &write.tail,
        );
        if w.dma.is_none() {
            w.dma = write.dma.clone();
        }
        // The pair of `begin_write`'s checks: the writer's tail block and
        // the segment both end where the write's log bytes end.
        assert_eq!(w.logical_end(), Some(write.end_pos()));
        self.land_write(&write)
    }

    /// A write's appends join the log: indexes, log end offset, the tail
    /// cache (direct), a flush due.
    fn land_write(&mut self, write: &StagedWrite) -> io::Result<()> {
        let seg = self.active_mut();
        let position = seg.size_bytes;
        for a in &write.appends {
            seg.append_written(&a.records, &a.info)?;
        }
        assert_eq!(
            seg.size_bytes,
            write.end_pos(),
            "the segment ends where the write did"
        );
        let first_offset = self.log_end_offset;
        self.log_end_offset = write.end_offset();
        self.index_landed_aborts()?;
        if let Some(bytes) = write.written.clone() {
            self.staging.tail.push(
                write.segment_base,
                position,
                first_offset,
                self.log_end_offset,
                bytes,
            );
        }
        let unflushed = (self.log_end_offset - self.recovery_point) as u64;
        if unflushed >= self.config.flush_interval_messages || self.staging.flush_wanted {
            self.staging.flush_wanted = false;
            self.flush()?;
        }
        Ok(())
    }

    /// Direct mode: the batches at `start_offset` from the tail cache, if
    /// it holds them (see [`crate::log::tail_cache`]).
    pub(super) fn read_tail(
        &self,
        start_offset: i64,
        max_bytes: u32,
        max_offset_exclusive: i64,
        min_one_batch: bool,
    ) -> Option<ReadInfo> {
        let r =
            self.staging
                .tail
                .read(start_offset, max_bytes, max_offset_exclusive, min_one_batch)?;
        let seg = self.segments.get(&r.segment_base)?;
        // Never past the logical end: the file's zero padding is not log.
        assert!(r.position + r.bytes.len() as u64 <= seg.size_bytes());
        Some(ReadInfo {
            slice: Some(FileSlice {
                file: seg.log.shared(),
                position: r.position,
                len: r.bytes.len() as u32,
                direct: true,
                may_be_cold: false,
                cached: Some(r.bytes),
            }),
            first_batch_base_offset: r.first_batch_base_offset,
            read_size: r.read_size,
        })
    }

    /// True once per roll made by `begin_write` when nothing is staged, so
    /// a producer-state snapshot taken now matches the log exactly.
    pub fn take_snapshot_point(&mut self) -> bool {
        if self.staging.rolled && self.staging.is_idle() {
            self.staging.rolled = false;
            return true;
        }
        false
    }
}
