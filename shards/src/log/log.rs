//! One partition's log (Kafka's `UnifiedLog` + `LocalLog`, without
//! replication or tiered storage): the ordered segments of one
//! `<topic>-<partition>` directory, with append, read, roll, flush,
//! retention, DeleteRecords and truncation. Single-threaded: owned by the
//! partition's shard.
//!
//! With [`IoMode::Direct`] the active segment (only) appends through
//! O_DIRECT; reads and fetch's sendfile stay on the buffered descriptor.
//! See [`crate::log::segment::direct_io`].

// `log::log` mirrors Kafka's naming (UnifiedLog inside the log package).
#![allow(clippy::module_inception)]

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use super::config::{IoMode, LogConfig};
use super::direct_write::StagedAppend;
use super::patched::PatchedRecords;
use super::recovery::{load_segments, RecoveryStats};
use super::segment::{AppendBytes, LogSegment, NewSegmentFiles, SegmentRead};
use super::{FileSlice, LogAppendInfo};

#[path = "log_close.rs"]
mod close;
#[path = "log_cold.rs"]
mod cold;
#[path = "log_roll_sync.rs"]
mod roll_sync;
#[path = "log_staging.rs"]
mod staging;
#[path = "log_swap.rs"]
mod swap;
#[path = "log_txn.rs"]
mod txn;
pub use staging::{NewSegmentJob, WriteStep};

pub use self::roll_sync::RollSyncJob;

/// The result of [`Log::read`].
#[derive(Clone, Debug)]
pub struct ReadInfo {
    /// Whole batches of one segment; None when there is nothing to return.
    pub slice: Option<FileSlice>,
    /// Base offset of the batch holding the start offset, or -1 when no
    /// batch was found (start offset == log end offset).
    pub first_batch_base_offset: i64,
    /// What Kafka's `LogSegment.read` returns for the same read: `slice`
    /// plus the partial batch Kafka sends after the last whole one when
    /// the limit cuts a batch (kshard sends whole batches only). The
    /// fetch's byte limits are charged this, as Kafka charges its size.
    pub read_size: u32,
}

#[derive(Debug)]
pub enum ReadError {
    OffsetOutOfRange {
        log_start_offset: i64,
        log_end_offset: i64,
    },
    Io(io::Error),
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::OffsetOutOfRange {
                log_start_offset,
                log_end_offset,
            } => write!(
                f,
                "offset out of range [{log_start_offset}, {log_end_offset}]"
            ),
            ReadError::Io(e) => write!(f, "log read failed: {e}"),
        }
    }
}

impl std::error::Error for ReadError {}

impl From<io::Error> for ReadError {
    fn from(e: io::Error) -> Self {
        ReadError::Io(e)
    }
}

/// Copies a slice's bytes into memory (TLS, tests, the replica path).
pub fn read_slice_bytes(slice: &FileSlice) -> io::Result<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    if let Some(b) = &slice.cached {
        return Ok(b.to_vec());
    }
    let mut buf = vec![0u8; slice.len as usize];
    slice.file.read_exact_at(&mut buf, slice.position)?;
    Ok(buf)
}

pub struct Log {
    dir: PathBuf,
    config: LogConfig,
    /// Keyed by base offset; never empty; the last one is active.
    segments: BTreeMap<i64, LogSegment>,
    log_start_offset: i64,
    log_end_offset: i64,
    recovery_point: i64,
    last_flush_ms: i64,
    /// A segment file was created or deleted since the last dir fsync.
    dir_dirty: bool,
    /// The cleaner's first dirty offset (`cleaner-offset-checkpoint`).
    cleaner_checkpoint: i64,
    /// Direct mode's asynchronous appends (see `crate::log::direct_write`).
    staging: Staging,
    /// Rolled segments being fsynced in the background, oldest first.
    roll_syncs: std::collections::VecDeque<roll_sync::RollSync>,
    next_roll_sync_id: u64,
    /// The cleaner's swap whose file work runs off the shard.
    pending_swap: Option<swap::PendingSwap>,
}

/// Appends accepted but not yet in the file, and the write in flight.
struct Staging {
    /// Identifies this `Log` to the writes it plans.
    log_id: u64,
    queue: std::collections::VecDeque<StagedAppend>,
    /// One past the last offset of the write in flight.
    in_flight_end: Option<i64>,
    /// A flush asked for while a write was in flight; done when it lands.
    flush_wanted: bool,
    /// A segment rolled since the last producer-state snapshot was allowed.
    rolled: bool,
    /// The next roll's segment, made off the shard (`segment_prepared`).
    next_segment: Option<super::segment::NewSegmentFiles>,
    /// An asynchronous write failed: no appends until the log is reopened.
    failed: Option<String>,
    /// The last writes' bytes, for fetches of the log's tail.
    tail: super::tail_cache::TailCache,
    /// Aborted transactions whose marker is staged: indexed when it lands.
    pending_aborts: Vec<super::transaction_index::AbortedTxn>,
}

static NEXT_LOG_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

impl Staging {
    fn new() -> Staging {
        Staging {
            log_id: NEXT_LOG_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            queue: std::collections::VecDeque::new(),
            in_flight_end: None,
            flush_wanted: false,
            rolled: false,
            next_segment: None,
            failed: None,
            tail: Default::default(),
            pending_aborts: Vec::new(),
        }
    }

    fn is_idle(&self) -> bool {
        self.queue.is_empty() && self.in_flight_end.is_none()
    }
}

fn invalid_input(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

/// A leader's append of `len_bytes` described by `info` must start at
/// `next_offset` (the leader assigned its offsets from there); see
/// [`check_append_bytes`] for the rest. The leader's `Validator` assigns
/// offsets from `next_offset` and rejects empty data, so a mismatch is a
/// bug, not bad input, and stops the broker.
fn check_append_shape(len_bytes: usize, info: &LogAppendInfo, next_offset: i64) {
    assert_eq!(
        info.first_offset, next_offset,
        "append at offset {} but the next offset is {next_offset}",
        info.first_offset
    );
    check_append_bytes(len_bytes, info);
}

/// A follower's append (the leader's offsets) may start above the log end
/// offset `log_end_offset`: a compacted leader no longer has the offsets
/// between (Kafka's `appendAsFollower`). It must not start below it (the
/// follower skips what it has and restarts an empty log at a batch across
/// its start), and it must fit one segment's relative offsets (a fetch
/// reads one leader segment). The follower checks all this on the fetched
/// batches before appending.
fn check_follower_append_shape(len_bytes: usize, info: &LogAppendInfo, log_end_offset: i64) {
    assert!(
        info.first_offset >= log_end_offset,
        "follower append at offset {} below the log end offset {log_end_offset}",
        info.first_offset
    );
    check_append_bytes(len_bytes, info);
    assert!(
        info.last_offset - info.first_offset <= i32::MAX as i64,
        "follower append of offsets {}..={} spans more than a segment can index",
        info.first_offset,
        info.last_offset
    );
}

/// Non-empty, with a sane offset range and the bytes validation saw.
fn check_append_bytes(len_bytes: usize, info: &LogAppendInfo) {
    assert!(
        len_bytes > 0 && info.last_offset >= info.first_offset && len_bytes == info.valid_bytes,
        "bad append: {len_bytes} bytes, offsets {}..={}, valid_bytes {}",
        info.first_offset,
        info.last_offset,
        info.valid_bytes
    );
}

impl Log {
    /// Opens (creating if needed) the partition dir, loads and, where needed,
    /// recovers its segments (see [`load_segments`]).
    pub fn open(
        dir: &Path,
        config: LogConfig,
        recovery_point: i64,
        log_start_offset: i64,
        now_ms: i64,
    ) -> io::Result<(Log, RecoveryStats)> {
        std::fs::create_dir_all(dir)?;
        // Before stray .swap files are deleted: finish committed cleanings.
        super::cleaner::complete_interrupted_swaps(dir)?;
        let (mut segments, stats) = load_segments(dir, &config, recovery_point, now_ms)?;
        let start = log_start_offset.max(0);
        let mut dir_dirty = false;
        let end = segments
            .values()
            .next_back()
            .map_or(start, |s| s.next_offset());
        if segments.is_empty() || end < start {
            // Nothing usable, or everything below the checkpointed start
            // offset: begin afresh at the start offset, as Kafka does.
            for (_, seg) in std::mem::take(&mut segments) {
                seg.delete_files(config.file_delete_delay_ms)?;
            }
            segments.insert(start, LogSegment::create(dir, start, &config, now_ms)?);
            dir_dirty = true;
        }
        let first_base = *segments.keys().next().expect("at least one segment");
        let log_end_offset = segments.values().next_back().expect("active").next_offset();
        let mut log = Log {
            dir: dir.to_path_buf(),
            config,
            segments,
            log_start_offset: start.max(first_base),
            log_end_offset,
            recovery_point: recovery_point.clamp(0, log_end_offset),
            last_flush_ms: now_ms,
            dir_dirty,
            cleaner_checkpoint: 0,
            staging: Staging::new(),
            roll_syncs: Default::default(),
            next_roll_sync_id: 0,
            pending_swap: None,
        };
        log.apply_io_mode_to_active()?;
        Ok((log, stats))
    }

    /// A log over what `prepare_new_log` made (off the shard): no system
    /// call here creates or resizes a file.
    pub fn open_new(
        prepared: super::log_create::PreparedLog,
        config: LogConfig,
        now_ms: i64,
    ) -> io::Result<Log> {
        // The segment's indexes keep the capacity they were made with, as
        // any segment keeps its own after a config change.
        let super::log_create::PreparedLog { dir, segment } = prepared;
        let start = segment.base_offset();
        let mut segments = BTreeMap::new();
        segments.insert(start, LogSegment::from_new_files(segment, &config, now_ms));
        let mut log = Log {
            dir,
            config,
            segments,
            log_start_offset: start,
            log_end_offset: start,
            recovery_point: start,
            last_flush_ms: now_ms,
            dir_dirty: true,
            cleaner_checkpoint: 0,
            staging: Staging::new(),
            roll_syncs: Default::default(),
            next_roll_sync_id: 0,
            pending_swap: None,
        };
        log.apply_io_mode_to_active()?;
        Ok(log)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
    pub fn config(&self) -> &LogConfig {
        &self.config
    }
    /// New settings apply to later appends and to segments created later
    /// (`io_mode` too: the current active segment keeps its write path).
    pub fn set_config(&mut self, c: LogConfig) {
        self.config = c;
    }
    pub fn log_start_offset(&self) -> i64 {
        self.log_start_offset
    }
    /// The next offset to assign.
    pub fn log_end_offset(&self) -> i64 {
        self.log_end_offset
    }
    /// Offsets below this are on disk.
    pub fn recovery_point(&self) -> i64 {
        self.recovery_point
    }
    pub fn size_bytes(&self) -> u64 {
        self.segments.values().map(|s| s.size_bytes()).sum()
    }
    pub fn segment_count(&self) -> usize {
        self.segments.len()
    }
    /// Base offsets of all segments, oldest first.
    pub fn segment_base_offsets(&self) -> Vec<i64> {
        self.segments.keys().copied().collect()
    }

    fn active(&self) -> &LogSegment {
        self.segments
            .values()
            .next_back()
            .expect("log has a segment")
    }
    fn active_mut(&mut self) -> &mut LogSegment {
        self.segments
            .values_mut()
            .next_back()
            .expect("log has a segment")
    }

    /// Gives a segment that just became active its mapped indexes and the
    /// configured write path.
    fn apply_io_mode_to_active(&mut self) -> io::Result<()> {
        self.active_mut().on_become_active()?;
        match self.config.io_mode {
            IoMode::Direct => self.active_mut().enable_direct_writes(),
            IoMode::Buffered | IoMode::BufferedOffload => Ok(()),
        }
    }

    /// Appends validated batches whose offsets start at the log end offset
    /// (a leader's append: it assigned them). Rolls first if Kafka would;
    /// returns the new segment's base offset if it rolled. Flushes per
    /// `flush_interval_messages`.
    pub fn append(
        &mut self,
        records: &[u8],
        info: &LogAppendInfo,
        now_ms: i64,
    ) -> io::Result<Option<i64>> {
        self.require_no_staged_writes("append")?;
        check_append_shape(records.len(), info, self.log_end_offset);
        self.append_batches(AppendBytes::Plain(records), info, now_ms)
    }

    /// `append` for batches kept as the request sent them with the headers
    /// offset assignment rewrote beside them (see `patched`): written from
    /// the request's buffer, not a patched copy of it.
    pub fn append_patched(
        &mut self,
        records: &PatchedRecords,
        info: &LogAppendInfo,
        now_ms: i64,
    ) -> io::Result<Option<i64>> {
        self.require_no_staged_writes("append")?;
        check_append_shape(records.len(), info, self.log_end_offset);
        self.append_batches(AppendBytes::Patched(records), info, now_ms)
    }

    /// Kafka's `appendAsFollower`: appends a leader's batches as they are.
    /// Their offsets increase but may start above the log end offset and
    /// skip offsets between batches (a compacted leader dropped them); the
    /// log end offset becomes the last offset + 1. A roll starts the new
    /// segment at the first batch's base offset (Kafka's
    /// `roll(Some(firstOffset))`), so a gap wider than the active segment's
    /// relative offsets rolls instead of overflowing it.
    pub fn append_as_follower(
        &mut self,
        records: &[u8],
        info: &LogAppendInfo,
        now_ms: i64,
    ) -> io::Result<Option<i64>> {
        self.require_no_staged_writes("follower append")?;
        check_follower_append_shape(records.len(), info, self.log_end_offset);
        self.append_batches(AppendBytes::Plain(records), info, now_ms)
    }

    /// The shared half of `append` and `append_as_follower` (shape checked).
    fn append_batches(
        &mut self,
        records: AppendBytes<'_>,
        info: &LogAppendInfo,
        now_ms: i64,
    ) -> io::Result<Option<i64>> {
        // The tail cache holds staged appends only; keep it contiguous.
        self.staging.tail.clear();
        let config = self.config.clone();
        let should_roll = self.active_mut().should_roll(
            &config,
            records.len() as u64,
            info.max_timestamp,
            info.last_offset,
            now_ms,
        );
        let rolled = if should_roll {
            self.roll_segment(info.first_offset, now_ms)?
        } else {
            None
        };
        if self.config.io_mode == IoMode::BufferedOffload {
            // Its time tells the offload choice the kernel's write path is
            // slow now (dirty_pages).
            let started = std::time::Instant::now();
            self.active_mut().append_bytes(records, info)?;
            super::dirty_pages::note_write_time(started.elapsed());
        } else {
            self.active_mut().append_bytes(records, info)?;
        }
        self.log_end_offset = info.last_offset + 1;
        let unflushed = (self.log_end_offset - self.recovery_point) as u64;
        if unflushed >= self.config.flush_interval_messages {
            self.flush()?;
            self.last_flush_ms = now_ms;
        }
        Ok(rolled)
    }

    /// Reads whole batches from the one holding `start_offset`; see
    /// [`LogSegment::read`]. Only one segment is read per call, as in Kafka.
    pub fn read(
        &self,
        start_offset: i64,
        max_bytes: u32,
        max_offset_exclusive: i64,
        min_one_batch: bool,
    ) -> Result<ReadInfo, ReadError> {
        if start_offset < self.log_start_offset || start_offset > self.log_end_offset {
            return Err(ReadError::OffsetOutOfRange {
                log_start_offset: self.log_start_offset,
                log_end_offset: self.log_end_offset,
            });
        }
        let nothing = ReadInfo {
            slice: None,
            first_batch_base_offset: -1,
            read_size: 0,
        };
        if start_offset == self.log_end_offset {
            return Ok(nothing);
        }
        if let Some(info) =
            self.read_tail(start_offset, max_bytes, max_offset_exclusive, min_one_batch)
        {
            return Ok(info);
        }
        let floor = self
            .segments
            .range(..=start_offset)
            .next_back()
            .map_or(i64::MIN, |(&b, _)| b);
        let active_base = self.active().base_offset();
        for seg in self.segments.range(floor..).map(|(_, s)| s) {
            match seg.read(start_offset, max_bytes, max_offset_exclusive, min_one_batch)? {
                SegmentRead::NotInSegment => continue,
                SegmentRead::Empty {
                    first_batch_base_offset,
                    read_size,
                } => {
                    return Ok(ReadInfo {
                        slice: None,
                        first_batch_base_offset,
                        read_size,
                    })
                }
                SegmentRead::Data {
                    mut slice,
                    first_batch_base_offset,
                    read_size,
                } => {
                    // Bytes no write touches again (a closed segment's, or
                    // below a direct writer's partial tail block) go by
                    // sendfile in either mode; O_DIRECT writes left them out
                    // of the page cache, so they may be cold.
                    let end = slice.position + u64::from(slice.len);
                    let settled = seg.direct_settled_end().is_some_and(|e| end <= e);
                    slice.direct = seg.is_direct() && !settled;
                    slice.may_be_cold = seg.base_offset() != active_base || settled;
                    return Ok(ReadInfo {
                        slice: Some(slice),
                        first_batch_base_offset,
                        read_size,
                    });
                }
            }
        }
        Ok(nothing)
    }

    /// Bytes from the batch holding `from` to where `to` lies (the log
    /// end, or the batch holding `to`), as Kafka's `DelayedFetch` measures
    /// them with `LogOffsetMetadata.positionDiff`; None when `to` lies on
    /// a later segment than `from` (Kafka then answers the fetch at once).
    /// Requires `log_start_offset <= from < to <= log_end_offset`.
    pub fn bytes_between(&self, from: i64, to: i64) -> io::Result<Option<u64>> {
        let Some((from_base, from_pos)) = self.position_of(from)? else {
            return Ok(None);
        };
        let (to_base, to_pos) = if to >= self.log_end_offset {
            (self.active().base_offset(), self.active().size_bytes())
        } else {
            match self.position_of(to)? {
                Some(found) => found,
                None => return Ok(None),
            }
        };
        if to_base != from_base || to_pos < from_pos {
            return Ok(None);
        }
        Ok(Some(to_pos - from_pos))
    }

    /// (segment base, position) of the batch holding `offset`, from the
    /// tail cache when it holds it (direct mode), else the segment index.
    fn position_of(&self, offset: i64) -> io::Result<Option<(i64, u64)>> {
        if let Some(found) = self.staging.tail.position_of(offset) {
            return Ok(Some(found));
        }
        let floor = self
            .segments
            .range(..=offset)
            .next_back()
            .map_or(i64::MIN, |(&b, _)| b);
        for seg in self.segments.range(floor..).map(|(_, s)| s) {
            if let Some((pos, _)) = seg.translate_offset(offset)? {
                return Ok(Some((seg.base_offset(), pos)));
            }
        }
        Ok(None)
    }

    /// ListOffsets by timestamp (Kafka's `fetchOffsetByTimestamp` for a
    /// real timestamp): the first record at or after `timestamp_ms`, as
    /// (offset, timestamp). The special negative timestamps are the
    /// caller's. Compressed CreateTime batches are decompressed and
    /// searched record by record, as in Kafka.
    pub fn offset_for_timestamp(&self, timestamp_ms: i64) -> io::Result<Option<(i64, i64)>> {
        for seg in self.segments.values() {
            if seg.is_empty() || seg.max_timestamp_so_far() < timestamp_ms {
                continue;
            }
            if let Some(found) =
                seg.find_offset_by_timestamp(timestamp_ms, self.log_start_offset)?
            {
                return Ok(Some(found));
            }
        }
        Ok(None)
    }

    /// Kafka's MAX_TIMESTAMP (-3): (offset, timestamp) of the record with
    /// the largest timestamp (the earliest segment wins ties).
    pub fn offset_of_max_timestamp(&self) -> io::Result<Option<(i64, i64)>> {
        let mut best: Option<&LogSegment> = None;
        for seg in self.segments.values().filter(|s| !s.is_empty()) {
            if best.is_none_or(|b| seg.max_timestamp_so_far() > b.max_timestamp_so_far()) {
                best = Some(seg);
            }
        }
        match best {
            Some(seg) => seg.offset_of_max_timestamp(),
            None => Ok(None),
        }
    }

    /// Writes and fsyncs everything up to the log end offset; the recovery
    /// point becomes the log end offset.
    pub fn flush(&mut self) -> io::Result<()> {
        if self.staging.in_flight_end.is_some() {
            // The padding of a write in flight cannot be trimmed yet; the
            // write's completion flushes.
            self.staging.flush_wanted = true;
            return Ok(());
        }
        self.sync_pending_rolls()?;
        for seg in self.segments.values_mut().filter(|s| s.dirty) {
            seg.sync()?;
        }
        if self.dir_dirty {
            sync_dir(&self.dir)?;
            self.dir_dirty = false;
        }
        self.recovery_point = self.log_end_offset;
        Ok(())
    }

    /// Flushes when `flush_interval_ms` has passed since the last flush.
    pub fn maybe_flush(&mut self, now_ms: i64) -> io::Result<bool> {
        if now_ms.saturating_sub(self.last_flush_ms) < self.config.flush_interval_ms {
            return Ok(false);
        }
        self.last_flush_ms = now_ms;
        if self.recovery_point >= self.log_end_offset {
            return Ok(false);
        }
        self.flush()?;
        Ok(true)
    }

    /// Starts a new segment at the log end offset (Kafka's `roll`): the old
    /// active segment gets its final time-index entry and exact-size
    /// indexes, and its fsync is queued for a background thread (see
    /// `take_roll_syncs`); the recovery point moves up to the new base
    /// offset when that completes. Rolling an empty active segment is a
    /// no-op.
    pub fn roll(&mut self, now_ms: i64) -> io::Result<i64> {
        self.require_no_staged_writes("roll")?;
        let leo = self.log_end_offset;
        Ok(self.roll_segment(leo, now_ms)?.unwrap_or(leo))
    }

    /// Rolls to a new active segment at `new_base` (>= the log end offset;
    /// above it for a follower's batch after a gap, Kafka's
    /// `roll(expectedNextOffset)`). The log end offset moves up to
    /// `new_base`: the offsets skipped hold nothing, and a reopen would
    /// find the new segment's base as the end. An empty active segment at
    /// `new_base` stays (no roll, None); an empty one below it (a gap wider
    /// than its relative offsets) becomes inactive, as in Kafka.
    fn roll_segment(&mut self, new_base: i64, now_ms: i64) -> io::Result<Option<i64>> {
        self.roll_segment_with(new_base, now_ms, None)
    }

    /// `roll_segment` onto `files` already made for `new_base` (direct
    /// mode's writer has them made off the shard), or onto files made here.
    fn roll_segment_with(
        &mut self,
        new_base: i64,
        now_ms: i64,
        files: Option<NewSegmentFiles>,
    ) -> io::Result<Option<i64>> {
        assert!(
            new_base >= self.log_end_offset,
            "roll to {new_base} below the log end offset {}",
            self.log_end_offset
        );
        let active = self.active();
        assert!(active.next_offset() <= new_base);
        if active.is_empty() && active.base_offset() == new_base {
            return Ok(None);
        }
        self.active_mut().on_become_inactive_queued()?;
        let seg = match files {
            Some(files) => {
                assert_eq!(files.base_offset(), new_base, "files made for another roll");
                LogSegment::from_new_files(files, &self.config, now_ms)
            }
            None => LogSegment::create(&self.dir, new_base, &self.config, now_ms)?,
        };
        self.segments.insert(new_base, seg);
        self.log_end_offset = new_base;
        self.apply_io_mode_to_active()?;
        // Kafka flushes the old segment (recovered ones too) in the
        // background; the job also fsyncs the directory.
        self.dir_dirty = true;
        self.queue_roll_sync(new_base)?;
        Ok(Some(new_base))
    }

    /// Retention (Kafka's `deleteOldSegments`), oldest first and never the
    /// active segment: by `retention_ms` on each segment's largest
    /// timestamp, then by `retention_bytes` while a whole segment can go,
    /// then segments wholly below the log start offset. Returns bytes freed.
    pub fn delete_old_segments(&mut self, now_ms: i64) -> io::Result<u64> {
        let mut deletable = 0usize;
        let inactive: Vec<(i64, u64)> = self
            .segments
            .iter()
            .take(self.segments.len() - 1)
            .map(|(&b, s)| (b, s.size_bytes()))
            .collect();
        // Without `delete` in cleanup.policy only the log start offset deletes.
        if self.config.delete && self.config.retention_ms >= 0 {
            for (base, _) in &inactive {
                let largest = self.segments[base].largest_timestamp()?;
                if now_ms.saturating_sub(largest) <= self.config.retention_ms {
                    break;
                }
                deletable += 1;
            }
        }
        if self.config.delete && self.config.retention_bytes >= 0 {
            let mut excess = self.size_bytes() as i64 - self.config.retention_bytes;
            for (i, (_, size)) in inactive.iter().enumerate() {
                if i < deletable {
                    excess -= *size as i64;
                    continue;
                }
                if excess - (*size as i64) < 0 {
                    break;
                }
                excess -= *size as i64;
                deletable = i + 1;
            }
        }
        // A segment is below the start offset if the next one starts at or before it.
        let bases: Vec<i64> = self.segments.keys().copied().collect();
        while deletable < inactive.len() && bases[deletable + 1] <= self.log_start_offset {
            deletable += 1;
        }
        self.delete_first_segments(deletable)
    }

    /// DeleteRecords: raises the log start offset to `offset` (<= log end
    /// offset) and deletes segments wholly below it. Returns the new start.
    pub fn delete_records_before(&mut self, offset: i64) -> io::Result<i64> {
        if offset > self.log_end_offset {
            return Err(invalid_input(format!(
                "cannot delete records before {offset}: log end offset is {}",
                self.log_end_offset
            )));
        }
        if offset > self.log_start_offset {
            self.log_start_offset = offset;
        }
        let bases: Vec<i64> = self.segments.keys().copied().collect();
        let count = bases
            .windows(2)
            .take_while(|w| w[1] <= self.log_start_offset)
            .count();
        self.delete_first_segments(count)?;
        Ok(self.log_start_offset)
    }

    fn delete_first_segments(&mut self, count: usize) -> io::Result<u64> {
        // Segments a swap is replacing go at the next check.
        let count = self.deletable_while_swapping(count);
        assert!(
            count < self.segments.len(),
            "the active segment is never deleted"
        );
        let mut freed = 0;
        for _ in 0..count {
            let (_, seg) = self.segments.pop_first().expect("counted");
            freed += seg.size_bytes();
            seg.delete_files(self.config.file_delete_delay_ms)?;
            self.dir_dirty = true;
        }
        let first_base = *self.segments.keys().next().expect("active remains");
        self.log_start_offset = self.log_start_offset.max(first_base);
        self.recovery_point = self.recovery_point.max(self.log_start_offset);
        Ok(freed)
    }

    /// Removes all data at offsets >= `offset` (Kafka's `truncateTo`). The
    /// whole batch holding `offset` goes, so the new log end offset is that
    /// batch's base offset. Below the first segment, the log restarts empty
    /// at `offset`.
    pub fn truncate_to(&mut self, offset: i64) -> io::Result<()> {
        self.require_no_staged_writes("truncate")?;
        if offset < 0 {
            return Err(invalid_input(format!(
                "cannot truncate to negative offset {offset}"
            )));
        }
        self.staging.tail.clear();
        if offset >= self.log_end_offset {
            return Ok(());
        }
        self.wait_cleaner_swap()?;
        self.sync_pending_rolls()?;
        let now_ms = self.last_flush_ms;
        let first_base = *self.segments.keys().next().expect("segment");
        if offset < first_base {
            return self.truncate_fully_and_start_at(offset);
        }
        let doomed: Vec<i64> = self.segments.range(offset + 1..).map(|(&b, _)| b).collect();
        for base in doomed {
            let seg = self.segments.remove(&base).expect("listed");
            seg.delete_files(self.config.file_delete_delay_ms)?;
            self.dir_dirty = true;
        }
        self.active_mut().truncate_to(offset, now_ms)?;
        // A formerly inactive segment may be the active one now.
        self.apply_io_mode_to_active()?;
        self.log_end_offset = self.active().next_offset();
        self.recovery_point = self.recovery_point.min(self.log_end_offset);
        self.log_start_offset = self.log_start_offset.min(offset);
        self.cleaner_checkpoint = self.cleaner_checkpoint.min(self.log_end_offset);
        Ok(())
    }

    /// Kafka's `truncateFullyAndStartAt`: every segment goes and the log
    /// restarts empty at `offset` (a follower whose leader's log starts
    /// past this log's end).
    pub fn truncate_fully_and_start_at(&mut self, offset: i64) -> io::Result<()> {
        self.require_no_staged_writes("truncate")?;
        if offset < 0 {
            return Err(invalid_input(format!(
                "cannot restart the log at negative offset {offset}"
            )));
        }
        self.staging.tail.clear();
        self.wait_cleaner_swap()?;
        // Every segment goes: the pending rolls' syncs are moot.
        self.roll_syncs.clear();
        let now_ms = self.last_flush_ms;
        for (_, seg) in std::mem::take(&mut self.segments) {
            seg.delete_files(self.config.file_delete_delay_ms)?;
        }
        let seg = LogSegment::create(&self.dir, offset, &self.config, now_ms)?;
        self.segments.insert(offset, seg);
        self.apply_io_mode_to_active()?;
        self.log_start_offset = offset;
        self.log_end_offset = offset;
        self.recovery_point = offset;
        self.cleaner_checkpoint = offset;
        self.dir_dirty = true;
        debug_assert_eq!(self.segments.len(), 1);
        Ok(())
    }

    /// Clean close: final time-index entry, exact-size indexes, everything
    /// fsynced. Reopening with recovery point == log end offset scans nothing.
    pub fn close(mut self) -> io::Result<()> {
        self.require_no_staged_writes("close")?;
        // A reopen must not find the swap's renames still going on.
        self.wait_cleaner_swap()?;
        self.active_mut().on_become_inactive()?;
        self.active_mut().dirty = true;
        self.flush()
    }

    /// Deletes the whole partition directory: renamed away at once, its
    /// files unlinked off the shard (see `log_deleter`).
    pub fn delete(self) -> io::Result<()> {
        let dir = self.dir.clone();
        drop(self);
        super::log_deleter::delete_log_dir(&dir)
    }

    /// All segments, oldest first; the last one is active.
    pub fn segments(&self) -> impl DoubleEndedIterator<Item = &LogSegment> {
        self.segments.values()
    }
    pub fn active_base_offset(&self) -> i64 {
        self.active().base_offset()
    }
    pub fn has_segment(&self, base_offset: i64) -> bool {
        self.segments.contains_key(&base_offset)
    }
    /// The cleaner's first dirty offset; 0 until set.
    pub fn cleaner_checkpoint(&self) -> i64 {
        self.cleaner_checkpoint
    }
    pub fn set_cleaner_checkpoint(&mut self, offset: i64) {
        self.cleaner_checkpoint = offset.clamp(0, self.log_end_offset);
    }
    /// The cleaner's in-memory swap: `new` (files already renamed in place)
    /// replaces the inactive segments `old_bases`, whose files are renamed
    /// `.deleted` (`cleaner_swap`).
    fn replace_segments(&mut self, old_bases: &[i64], new: LogSegment) {
        let active = self.active().base_offset();
        assert!(
            old_bases.first() == Some(&new.base_offset()),
            "cleaned segment keeps the group's base offset"
        );
        let mut replaced = Vec::with_capacity(old_bases.len());
        for base in old_bases {
            assert!(*base < active, "the active segment is never cleaned");
            if let Some(segment) = self.segments.remove(base) {
                replaced.push(segment.into_closing(false));
            }
        }
        // The last close of an unlinked segment frees its pages (about
        // 20 ms for 64 MiB here): on the `log-dirs` thread.
        super::log_create::LOG_DIRS.push(move || drop(replaced));
        self.segments.insert(new.base_offset(), new);
        self.dir_dirty = true;
        // Cached bytes of the replaced segments no longer match the files.
        self.staging.tail.clear();
    }

    /// The segment holding `offset`, for tests and tools.
    pub fn segment_for(&self, offset: i64) -> Option<&LogSegment> {
        self.segments.range(..=offset).next_back().map(|(_, s)| s)
    }

    /// The first segment starting above `offset` (a read at `offset` stops
    /// before it).
    pub fn segment_after(&self, offset: i64) -> Option<&LogSegment> {
        let above = offset.checked_add(1)?;
        self.segments.range(above..).next().map(|(_, s)| s)
    }
}

/// fsync a directory so created, renamed and deleted entries are durable.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

#[cfg(test)]
#[path = "log_tests.rs"]
mod tests;
