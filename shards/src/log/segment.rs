//! Kafka's `LogSegment`: one `.log` file of v2 batches plus its offset and
//! time indexes and its transaction index (a `.txnindex` only once it has
//! an aborted transaction), named by the 20-digit base offset. Reads always
//! go through the buffered [`DiskFile`]; in `log.io.mode=direct` the active
//! segment's appends go through a [`DirectWriter`] instead (see
//! [`direct_io`]).

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::batch::{
    BatchHeader, BatchIter, Compression, TimestampType, NO_TIMESTAMP, RECORD_BATCH_OVERHEAD,
};
use super::config::{self, LogConfig};
use super::offset_index::OffsetIndex;
use super::page_cache;
use super::patched::PatchedRecords;
use super::recovery::{find_record, read_header_at, read_valid_batch, SCAN_BUFFER_BYTES};
use super::time_index::TimeIndex;
use super::transaction_index::{self, TransactionIndex};
use super::{FileSlice, LogAppendInfo};

#[path = "direct_io.rs"]
pub mod direct_io;
pub use self::direct_io::DirectWriter;

pub const LOG_FILE_SUFFIX: &str = ".log";
pub const INDEX_FILE_SUFFIX: &str = ".index";
pub const TIME_INDEX_FILE_SUFFIX: &str = ".timeindex";
pub const TXN_INDEX_FILE_SUFFIX: &str = ".txnindex";

/// `<dir>/<20-digit base offset><suffix>`, Kafka's `LogFileUtils` naming.
pub fn segment_file_path(dir: &Path, base_offset: i64, suffix: &str) -> PathBuf {
    debug_assert!(base_offset >= 0);
    dir.join(format!("{base_offset:020}{suffix}"))
}

/// The page-cache file backend: positional reads and writes on a shared
/// descriptor (shared so fetch slices outlive segment deletion).
pub struct DiskFile {
    file: Arc<File>,
    path: PathBuf,
}

impl DiskFile {
    /// Opens read-write; `create` makes the file if it is missing.
    pub fn open(path: &Path, create: bool) -> io::Result<DiskFile> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(create)
            .truncate(false)
            .open(path)?;
        Ok(DiskFile {
            file: Arc::new(file),
            path: path.to_path_buf(),
        })
    }
    pub fn path(&self) -> &Path {
        &self.path
    }
    pub fn shared(&self) -> Arc<File> {
        Arc::clone(&self.file)
    }
    /// The buffered descriptor (reads, and the direct writer's tail reloads).
    pub fn file(&self) -> &File {
        &self.file
    }
    pub fn file_len(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }
    pub fn set_len(&self, len: u64) -> io::Result<()> {
        self.file.set_len(len)
    }
    /// Reads as much of `buf` as the file holds from `pos`; returns the count.
    pub fn read_at_most(&self, buf: &mut [u8], pos: u64) -> io::Result<usize> {
        let mut done = 0;
        while done < buf.len() {
            match self.file.read_at(&mut buf[done..], pos + done as u64) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(done)
    }
    pub fn read_exact_at(&self, buf: &mut [u8], pos: u64) -> io::Result<()> {
        self.file.read_exact_at(buf, pos)
    }
    pub fn write_all_at(&self, buf: &[u8], pos: u64) -> io::Result<()> {
        self.file.write_all_at(buf, pos)
    }
    pub fn sync_data(&self) -> io::Result<()> {
        self.file.sync_data()
    }
    pub fn modified_ms(&self) -> io::Result<i64> {
        let modified = self.file.metadata()?.modified()?;
        let since = modified
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        Ok(since.as_millis() as i64)
    }
}

/// What one segment contributes to a read.
pub enum SegmentRead {
    /// No batch in this segment reaches `start_offset`: try the next one.
    NotInSegment,
    /// The batch holding `start_offset` exists but limits exclude it.
    Empty {
        first_batch_base_offset: i64,
        /// See [`crate::log::ReadInfo::read_size`] (a partial first batch).
        read_size: u32,
    },
    Data {
        slice: FileSlice,
        first_batch_base_offset: i64,
        /// See [`crate::log::ReadInfo::read_size`].
        read_size: u32,
    },
}

/// An empty segment's files, made (and, with `map_for_appends`, its indexes
/// preallocated and mapped) by whichever thread calls `create`: `Send`, so
/// the file-system work can run off the shard that will own the segment.
pub struct NewSegmentFiles {
    base_offset: i64,
    log: DiskFile,
    offset_index: OffsetIndex,
    time_index: TimeIndex,
    txn_index: TransactionIndex,
}

impl NewSegmentFiles {
    /// Creates (or truncates) the segment's three files, the log file
    /// preallocated when the config says so; a stale `.txnindex` of the
    /// same name goes, as Kafka's roll deletes it.
    pub fn create(dir: &Path, base_offset: i64, config: &LogConfig) -> io::Result<Self> {
        assert!(base_offset >= 0, "negative base offset {base_offset}");
        let log = DiskFile::open(&segment_file_path(dir, base_offset, LOG_FILE_SUFFIX), true)?;
        log.set_len(0)?;
        if config.preallocate {
            log.set_len(config.effective_segment_bytes())?;
        }
        let oi = DiskFile::open(
            &segment_file_path(dir, base_offset, INDEX_FILE_SUFFIX),
            true,
        )?;
        let ti = DiskFile::open(
            &segment_file_path(dir, base_offset, TIME_INDEX_FILE_SUFFIX),
            true,
        )?;
        let txn_index = TransactionIndex::new(dir, base_offset);
        match std::fs::remove_file(txn_index.path()) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        Ok(NewSegmentFiles {
            base_offset,
            log,
            offset_index: OffsetIndex::create(oi, base_offset, config.max_index_size_bytes)?,
            time_index: TimeIndex::create(ti, base_offset, config.max_index_size_bytes)?,
            txn_index,
        })
    }

    /// Preallocates and maps both indexes as an active segment's are.
    pub fn map_for_appends(&mut self) -> io::Result<()> {
        self.offset_index.map_for_appends()?;
        self.time_index.map_for_appends()
    }

    pub fn base_offset(&self) -> i64 {
        self.base_offset
    }
}

/// A segment being closed or deleted off the shard (`Log::close_queued`,
/// `Log::delete_queued`): its files, which are `Send`. Dropped as it is,
/// the files just close (`close`, `munmap`, which may wait on the file
/// system); `close` first trims and fsyncs them as a clean close must.
pub struct ClosingSegment {
    log: DiskFile,
    offset_index: OffsetIndex,
    time_index: TimeIndex,
    txn_index: TransactionIndex,
    /// The active segment's size: its indexes are unmapped and trimmed to
    /// their entries, and its log file to its batches.
    trim_to_bytes: Option<u64>,
    /// Appended to since its last fsync.
    dirty: bool,
}

impl ClosingSegment {
    /// What `on_become_inactive` and `sync` do to a closing segment's
    /// files; blocks, so it runs off the shard.
    pub fn close(mut self) -> io::Result<()> {
        // Entries and trims the shard queued (and shipped in `into_closing`)
        // land before the files are trimmed and synced here.
        if self.offset_index.written_behind() || self.time_index.written_behind() {
            super::index_file::wait_for_landed();
        }
        if let Some(size_bytes) = self.trim_to_bytes {
            self.offset_index.unmap_and_trim()?;
            self.time_index.unmap_and_trim()?;
            if self.log.file_len()? != size_bytes {
                self.log.set_len(size_bytes)?;
            }
        }
        if self.dirty {
            self.log.sync_data()?;
            self.offset_index.sync()?;
            self.time_index.sync()?;
            self.txn_index.sync()?;
        }
        Ok(())
    }
}

pub struct LogSegment {
    pub(super) base_offset: i64,
    pub(super) log: DiskFile,
    /// Bytes of valid batches (the file may be longer if preallocated).
    pub(super) size_bytes: u64,
    pub(super) offset_index: OffsetIndex,
    pub(super) time_index: TimeIndex,
    /// Aborted transactions whose marker is in this segment.
    pub(super) txn_index: TransactionIndex,
    pub(super) index_interval_bytes: u32,
    pub(super) bytes_since_last_index_entry: u64,
    /// -1 until a batch with a timestamp is seen.
    pub(super) max_timestamp_so_far: i64,
    pub(super) offset_of_max_timestamp_so_far: i64,
    /// The first batch's max timestamp, for the `segment.ms` roll rule.
    pub(super) rolling_based_timestamp: Option<i64>,
    pub(super) created_ms: i64,
    /// One past the last offset in the segment.
    pub(super) next_offset: i64,
    /// Appended since the last fsync.
    pub(super) dirty: bool,
    /// The O_DIRECT appender, only while active in direct mode.
    pub(super) direct: Option<DirectWriter>,
}

impl LogSegment {
    /// Creates an empty segment, truncating any stale files of that name.
    pub fn create(
        dir: &Path,
        base_offset: i64,
        config: &LogConfig,
        now_ms: i64,
    ) -> io::Result<Self> {
        let files = NewSegmentFiles::create(dir, base_offset, config)?;
        Ok(LogSegment::from_new_files(files, config, now_ms))
    }

    /// The segment over files `NewSegmentFiles::create` made.
    pub fn from_new_files(files: NewSegmentFiles, config: &LogConfig, now_ms: i64) -> Self {
        let NewSegmentFiles {
            base_offset,
            log,
            offset_index,
            time_index,
            txn_index,
        } = files;
        LogSegment {
            base_offset,
            log,
            size_bytes: 0,
            offset_index,
            time_index,
            txn_index,
            index_interval_bytes: config.index_interval_bytes,
            bytes_since_last_index_entry: 0,
            max_timestamp_so_far: NO_TIMESTAMP,
            offset_of_max_timestamp_so_far: base_offset,
            rolling_based_timestamp: None,
            created_ms: now_ms,
            next_offset: base_offset,
            dirty: true,
            direct: None,
        }
    }

    /// Opens an existing segment. Returns false as the second value when an
    /// index was missing or failed its sanity check (it is then empty and
    /// the caller must recover the segment). `next_offset` is provisional
    /// until [`LogSegment::scan_tail`] or recovery runs.
    pub fn open_existing(
        dir: &Path,
        base_offset: i64,
        config: &LogConfig,
        now_ms: i64,
    ) -> io::Result<(Self, bool)> {
        let log = DiskFile::open(&segment_file_path(dir, base_offset, LOG_FILE_SUFFIX), false)?;
        let size_bytes = log.file_len()?.min(config::MAX_SEGMENT_BYTES);
        let oi_path = segment_file_path(dir, base_offset, INDEX_FILE_SUFFIX);
        let ti_path = segment_file_path(dir, base_offset, TIME_INDEX_FILE_SUFFIX);
        let max_index = config.max_index_size_bytes;
        let mut indexes_ok = true;
        let offset_index = match DiskFile::open(&oi_path, false)
            .and_then(|f| OffsetIndex::load(f, base_offset, max_index, size_bytes))
        {
            Ok(idx) => idx,
            Err(e) if is_rebuildable(&e) => {
                log::warn!("rebuilding offset index {}: {e}", oi_path.display());
                indexes_ok = false;
                OffsetIndex::create(DiskFile::open(&oi_path, true)?, base_offset, max_index)?
            }
            Err(e) => return Err(e),
        };
        let time_index = match DiskFile::open(&ti_path, false)
            .and_then(|f| TimeIndex::load(f, base_offset, max_index))
        {
            Ok(idx) => idx,
            Err(e) if is_rebuildable(&e) => {
                log::warn!("rebuilding time index {}: {e}", ti_path.display());
                indexes_ok = false;
                TimeIndex::create(DiskFile::open(&ti_path, true)?, base_offset, max_index)?
            }
            Err(e) => return Err(e),
        };
        let txn_index = transaction_index::load_for_segment(dir, base_offset)?;
        let last_time = time_index.last_entry();
        let mut seg = LogSegment {
            base_offset,
            log,
            size_bytes,
            offset_index,
            time_index,
            txn_index,
            index_interval_bytes: config.index_interval_bytes,
            bytes_since_last_index_entry: 0,
            max_timestamp_so_far: last_time.timestamp,
            offset_of_max_timestamp_so_far: last_time.offset,
            rolling_based_timestamp: None,
            created_ms: now_ms,
            next_offset: base_offset,
            dirty: false,
            direct: None,
        };
        if size_bytes > 0 {
            seg.rolling_based_timestamp = seg.read_header(0).ok().map(|h| h.max_timestamp);
        }
        Ok((seg, indexes_ok))
    }

    /// The segment's files, to be closed elsewhere (`ClosingSegment`).
    /// The active segment's final time-index entry is added here, as
    /// `on_become_inactive` adds it; the direct-mode writer (bound to this
    /// shard's executor, and with no staged write left) is dropped here.
    pub fn into_closing(mut self, active: bool) -> ClosingSegment {
        if active {
            self.append_final_time_index_entry();
        }
        if self.offset_index.written_behind() || self.time_index.written_behind() {
            super::index_file::ship_queued_writes();
        }
        let LogSegment {
            log,
            offset_index,
            time_index,
            txn_index,
            direct,
            size_bytes,
            dirty,
            ..
        } = self;
        drop(direct);
        ClosingSegment {
            log,
            offset_index,
            time_index,
            txn_index,
            trim_to_bytes: active.then_some(size_bytes),
            dirty: dirty || active,
        }
    }

    pub fn base_offset(&self) -> i64 {
        self.base_offset
    }
    pub fn size_bytes(&self) -> u64 {
        self.size_bytes
    }
    pub fn next_offset(&self) -> i64 {
        self.next_offset
    }
    pub fn is_empty(&self) -> bool {
        self.size_bytes == 0
    }
    pub fn max_timestamp_so_far(&self) -> i64 {
        self.max_timestamp_so_far
    }
    pub fn offset_index(&self) -> &OffsetIndex {
        &self.offset_index
    }
    pub fn time_index(&self) -> &TimeIndex {
        &self.time_index
    }
    pub fn txn_index(&self) -> &TransactionIndex {
        &self.txn_index
    }

    /// Routes later appends through an O_DIRECT descriptor (idempotent).
    /// Fails with `Unsupported`, naming the file, where the filesystem
    /// refuses direct I/O.
    pub fn enable_direct_writes(&mut self) -> io::Result<()> {
        if self.direct.is_none() {
            self.direct = Some(DirectWriter::open(self.log.path())?);
        }
        Ok(())
    }
    /// Back to buffered appends; the zero padding of direct writes is cut.
    pub fn disable_direct_writes(&mut self) -> io::Result<()> {
        if let Some(mut w) = self.direct.take() {
            w.trim_padding()?;
        }
        Ok(())
    }
    pub fn is_direct(&self) -> bool {
        self.direct.is_some()
    }
    /// An active direct-mode segment's bytes below this are on disk and
    /// written no more (`DirectWriter::settled_end`).
    pub fn direct_settled_end(&self) -> Option<u64> {
        self.direct.as_ref().and_then(DirectWriter::settled_end)
    }

    /// ftruncate of the `.log`, telling the direct writer (if any).
    pub(super) fn set_log_len(&mut self, len_bytes: u64) -> io::Result<()> {
        self.log.set_len(len_bytes)?;
        if let Some(w) = &mut self.direct {
            w.file_resized(len_bytes);
        }
        Ok(())
    }

    /// The log file's mtime (Kafka's `LogSegment.lastModified`).
    pub fn last_modified_ms(&self) -> io::Result<i64> {
        self.log.modified_ms()
    }

    /// Kafka's `largestTimestamp`: the max record timestamp, or the file's
    /// mtime when no batch carried a timestamp.
    pub fn largest_timestamp(&self) -> io::Result<i64> {
        if self.max_timestamp_so_far >= 0 {
            return Ok(self.max_timestamp_so_far);
        }
        self.log.modified_ms()
    }

    /// The header of the batch at `position`, which must be a batch start.
    pub fn read_header(&self, position: u64) -> io::Result<BatchHeader> {
        read_header_at(&self.log, position, self.size_bytes)
    }

    /// Kafka's `translateOffset`: the position and header of the first batch
    /// whose last offset is >= `offset`, or None if the segment ends first.
    pub fn translate_offset(&self, offset: i64) -> io::Result<Option<(u64, BatchHeader)>> {
        let mut position = self.offset_index.lookup(offset).position as u64;
        while position < self.size_bytes {
            let header = self.read_header(position)?;
            if header.last_offset() >= offset {
                return Ok(Some((position, header)));
            }
            position += header.total_size() as u64;
        }
        Ok(None)
    }

    /// Kafka's `shouldRoll`.
    pub fn should_roll(
        &mut self,
        config: &LogConfig,
        messages_size_bytes: u64,
        max_timestamp_in_messages: i64,
        max_offset_in_messages: i64,
        now_ms: i64,
    ) -> bool {
        let full_by_size = self.size_bytes > 0
            && self.size_bytes + messages_size_bytes > config.effective_segment_bytes();
        let reached_roll_ms = self.size_bytes > 0
            && self.time_waited_for_roll(now_ms, max_timestamp_in_messages) > config.segment_ms;
        full_by_size
            || reached_roll_ms
            || self.offset_index.is_full()
            || self.time_index.is_full()
            || !self.offset_index.can_append_offset(max_offset_in_messages)
    }

    /// Whether appending `messages_size_bytes` may roll this segment by
    /// its size or a full index (`should_roll`'s rules that need no batch;
    /// a roll by time is not foreseen).
    pub fn may_roll_for(&self, config: &LogConfig, messages_size_bytes: u64) -> bool {
        (self.size_bytes > 0
            && self.size_bytes + messages_size_bytes > config.effective_segment_bytes())
            || self.offset_index.is_full()
            || self.time_index.is_full()
    }

    fn time_waited_for_roll(&self, now_ms: i64, message_timestamp: i64) -> i64 {
        match self.rolling_based_timestamp {
            Some(ts) if ts >= 0 => message_timestamp.saturating_sub(ts),
            _ => now_ms.saturating_sub(self.created_ms),
        }
    }

    /// Kafka's `LogSegment.append`: writes the bytes, then indexes batch by
    /// batch with the `bytesSinceLastIndexEntry > index.interval.bytes` rule.
    pub fn append(&mut self, records: &[u8], info: &LogAppendInfo) -> io::Result<()> {
        self.check_append(info)?;
        if records.is_empty() {
            return Ok(());
        }
        let position = self.size_bytes;
        match &mut self.direct {
            Some(w) => w.write_at(records, position, self.log.file(), self.log.path())?,
            None => self.log.write_all_at(records, position)?,
        }
        self.appended(records, info)
    }

    /// `append` or `append_patched`, as `records` holds its bytes.
    pub(super) fn append_bytes(
        &mut self,
        records: AppendBytes<'_>,
        info: &LogAppendInfo,
    ) -> io::Result<()> {
        match records {
            AppendBytes::Plain(bytes) => self.append(bytes, info),
            AppendBytes::Patched(patched) => self.append_patched(patched, info),
        }
    }

    /// `append` for validated batches kept as the request sent them with
    /// their new headers beside them: written with `pwritev`, no copy (a
    /// direct-mode segment, which writes through its block buffer, copies
    /// them into one buffer first).
    pub fn append_patched(
        &mut self,
        records: &PatchedRecords,
        info: &LogAppendInfo,
    ) -> io::Result<()> {
        // Checked before the write; `append_written` checks again (cheap).
        self.check_append(info)?;
        let position = self.size_bytes;
        match &mut self.direct {
            _ if records.is_empty() => {}
            Some(w) => w.write_at(
                &records.to_vec(),
                position,
                self.log.file(),
                self.log.path(),
            )?,
            None => records.write_all_at(self.log.file(), position)?,
        }
        self.append_written(records, info)
    }

    fn check_append(&self, info: &LogAppendInfo) -> io::Result<()> {
        // A follower's batches may skip offsets (a compacted leader); they
        // never go back. The log checks the exact start for leaders.
        assert!(
            info.first_offset >= self.next_offset,
            "append at offset {} below segment {}'s next offset {}",
            info.first_offset,
            self.base_offset,
            self.next_offset
        );
        if !self.offset_index.can_append_offset(info.last_offset) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "offset {} overflows segment {}",
                    info.last_offset, self.base_offset
                ),
            ));
        }
        Ok(())
    }

    /// The bookkeeping half of `append`, for bytes already in the file at
    /// the segment's end (an asynchronous direct write that landed, or
    /// `append_patched`'s).
    pub(super) fn append_written(
        &mut self,
        records: &PatchedRecords,
        info: &LogAppendInfo,
    ) -> io::Result<()> {
        self.check_append(info)?;
        if records.is_empty() {
            return Ok(());
        }
        self.index_batches(records.headers(), records.len(), info)
    }

    /// Indexes the batches just written at the end of the segment.
    fn appended(&mut self, records: &[u8], info: &LogAppendInfo) -> io::Result<()> {
        let headers = BatchIter::new(records).map(|batch| {
            batch
                .map(|(_, header, _)| header)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))
        });
        self.index_batches(headers, records.len(), info)
    }

    fn index_batches(
        &mut self,
        headers: impl Iterator<Item = io::Result<BatchHeader>>,
        len_bytes: usize,
        info: &LogAppendInfo,
    ) -> io::Result<()> {
        let mut position = self.size_bytes;
        if position == 0 {
            self.rolling_based_timestamp = Some(info.max_timestamp);
        }
        // The batches are the ones `info` describes: the first at its first
        // offset, offsets increasing (with gaps, from a compacted leader).
        let mut next_offset = info.first_offset;
        for (i, header) in headers.enumerate() {
            let header = header?;
            let in_order = if i == 0 {
                header.base_offset == next_offset
            } else {
                header.base_offset >= next_offset
            };
            assert!(
                in_order && header.last_offset_delta >= 0,
                "batch at offset {} (last offset {}) appended where offset {next_offset} is next",
                header.base_offset,
                header.last_offset()
            );
            next_offset = header.last_offset() + 1;
            if header.max_timestamp > self.max_timestamp_so_far {
                self.max_timestamp_so_far = header.max_timestamp;
                self.offset_of_max_timestamp_so_far = header.last_offset();
            }
            if self.bytes_since_last_index_entry > self.index_interval_bytes as u64 {
                self.offset_index
                    .append(header.last_offset(), position as u32);
                self.time_index.maybe_append(
                    self.max_timestamp_so_far,
                    self.offset_of_max_timestamp_so_far,
                    false,
                );
                self.bytes_since_last_index_entry = 0;
            }
            let size = header.total_size() as u64;
            position += size;
            self.bytes_since_last_index_entry += size;
        }
        assert_eq!(
            position,
            self.size_bytes + len_bytes as u64,
            "the batches cover the appended bytes"
        );
        assert_eq!(
            next_offset,
            info.last_offset + 1,
            "the batches end at the appended last offset"
        );
        self.offset_index.write_through();
        self.time_index.write_through();
        self.size_bytes = position;
        self.next_offset = info.last_offset + 1;
        self.dirty = true;
        Ok(())
    }

    /// Whether `records_len` more bytes (batches ending at `last_offset`)
    /// can follow `planned_bytes` in `planned_batches` batches already
    /// headed for this segment without a roll: the size limit, the offset
    /// range and room in both indexes (at most one entry per batch).
    pub(super) fn fits_after(
        &self,
        config: &LogConfig,
        planned_bytes: u64,
        planned_batches: u64,
        records_len: u64,
        batches: u64,
        last_offset: i64,
    ) -> bool {
        let size = self.size_bytes + planned_bytes + records_len;
        let index_entries = (planned_batches + batches) as usize;
        size <= config.effective_segment_bytes()
            && self.offset_index.can_append_offset(last_offset)
            && self.offset_index.entries() + index_entries < self.offset_index.max_entries()
            && self.time_index.entries() + index_entries < self.time_index.max_entries()
    }

    /// Whole batches from the one holding `start_offset`, at most `max_bytes`
    /// (or the first batch alone if `min_one_batch`), none with a base
    /// offset >= `max_offset_exclusive`.
    pub fn read(
        &self,
        start_offset: i64,
        max_bytes: u32,
        max_offset_exclusive: i64,
        min_one_batch: bool,
    ) -> io::Result<SegmentRead> {
        let Some((start_pos, first)) = self.translate_offset(start_offset)? else {
            return Ok(SegmentRead::NotInSegment);
        };
        let first_batch_base_offset = first.base_offset;
        if first.base_offset >= max_offset_exclusive {
            return Ok(SegmentRead::Empty {
                first_batch_base_offset,
                read_size: 0,
            });
        }
        // The position where batches at or past max_offset_exclusive start.
        let max_pos = if max_offset_exclusive >= self.next_offset {
            self.size_bytes
        } else {
            match self.translate_offset(max_offset_exclusive)? {
                Some((p, h)) if h.base_offset >= max_offset_exclusive => p,
                Some((p, h)) => p + h.total_size() as u64,
                None => self.size_bytes,
            }
        };
        let first_end = start_pos + first.total_size() as u64;
        debug_assert!(first_end <= max_pos);
        let limit = start_pos.saturating_add(max_bytes as u64).min(max_pos);
        // Kafka's size: up to the limit (or the first batch), partial batch included.
        let read_size = if first_end > limit && min_one_batch {
            first_end - start_pos
        } else {
            limit - start_pos
        } as u32;
        let end = if first_end > limit {
            if !min_one_batch {
                return Ok(SegmentRead::Empty {
                    first_batch_base_offset,
                    read_size,
                });
            }
            first_end
        } else if limit == max_pos {
            limit
        } else {
            self.last_batch_end_at_or_before(start_pos, limit)?
        };
        debug_assert!(end > start_pos && end - start_pos <= u32::MAX as u64);
        Ok(SegmentRead::Data {
            slice: FileSlice {
                file: self.log.shared(),
                position: start_pos,
                len: (end - start_pos) as u32,
                // Set by the Log, which knows its io_mode for every segment
                // (a segment knows it only while it is active).
                direct: false,
                may_be_cold: false,
                cached: None,
            },
            first_batch_base_offset,
            read_size,
        })
    }

    /// The largest batch boundary <= `limit`, walking from the nearest index
    /// entry (at most about one index interval of headers).
    fn last_batch_end_at_or_before(&self, start_pos: u64, limit: u64) -> io::Result<u64> {
        let mut pos = (self.offset_index.lookup_by_position(limit).position as u64).max(start_pos);
        while pos < self.size_bytes {
            let size = self.read_header(pos)?.total_size() as u64;
            if pos + size > limit {
                break;
            }
            pos += size;
        }
        Ok(pos)
    }

    /// Kafka's `findOffsetByTimestamp`: the first record with timestamp >=
    /// `timestamp_ms` and offset >= `starting_offset`, as (offset, timestamp).
    /// Compressed CreateTime batches are decompressed and searched record by
    /// record; LogAppendTime batches answer with their base offset.
    pub fn find_offset_by_timestamp(
        &self,
        timestamp_ms: i64,
        starting_offset: i64,
    ) -> io::Result<Option<(i64, i64)>> {
        let from = self.time_index.lookup(timestamp_ms);
        let mut pos = self
            .offset_index
            .lookup(from.offset.max(starting_offset))
            .position as u64;
        while pos < self.size_bytes {
            let header = self.read_header(pos)?;
            if header.max_timestamp >= timestamp_ms && header.last_offset() >= starting_offset {
                let found = match (header.timestamp_type(), header.compression()) {
                    (TimestampType::CreateTime, Some(Compression::None)) => {
                        find_record(&self.log, &header, pos, |offset, ts| {
                            ts >= timestamp_ms && offset >= starting_offset
                        })?
                    }
                    (TimestampType::CreateTime, Some(codec)) => {
                        find_record_compressed(&self.log, &header, pos, codec, |offset, ts| {
                            ts >= timestamp_ms && offset >= starting_offset
                        })?
                    }
                    _ => Some((
                        header.base_offset.max(starting_offset),
                        header.max_timestamp,
                    )),
                };
                if found.is_some() {
                    return Ok(found);
                }
            }
            pos += header.total_size() as u64;
        }
        Ok(None)
    }

    /// Kafka 3.9's MAX_TIMESTAMP lookup within this segment: (offset,
    /// timestamp) of the first record carrying the segment's max timestamp.
    /// For LogAppendTime batches this is the batch's base offset.
    pub fn offset_of_max_timestamp(&self) -> io::Result<Option<(i64, i64)>> {
        if self.is_empty() {
            return Ok(None);
        }
        let max_ts = self.max_timestamp_so_far;
        let mut pos = self
            .offset_index
            .lookup(self.offset_of_max_timestamp_so_far)
            .position as u64;
        while pos < self.size_bytes {
            let header = self.read_header(pos)?;
            if header.max_timestamp == max_ts {
                return match (header.timestamp_type(), header.compression()) {
                    (TimestampType::CreateTime, Some(Compression::None)) => {
                        Ok(find_record(&self.log, &header, pos, |_, ts| ts == max_ts)?
                            .map(|(offset, _)| (offset, max_ts)))
                    }
                    (TimestampType::CreateTime, Some(codec)) => {
                        Ok(
                            find_record_compressed(&self.log, &header, pos, codec, |_, ts| {
                                ts == max_ts
                            })?
                            .map(|(offset, _)| (offset, max_ts)),
                        )
                    }
                    _ => Ok(Some((header.base_offset, max_ts))),
                };
            }
            pos += header.total_size() as u64;
        }
        Ok(None)
    }

    /// Kafka's `LogSegment.truncateTo`: drops the batch holding `offset` and
    /// everything after it. Returns the bytes removed.
    pub fn truncate_to(&mut self, offset: i64, now_ms: i64) -> io::Result<u64> {
        let mapping = self.translate_offset(offset)?;
        self.offset_index.truncate_to(offset)?;
        self.time_index.truncate_to(offset)?;
        self.txn_index.truncate_to(offset)?;
        let Some((position, _)) = mapping else {
            return Ok(0);
        };
        let removed = self.size_bytes - position;
        self.set_log_len(position)?;
        self.size_bytes = position;
        if position == 0 {
            self.created_ms = now_ms;
            self.rolling_based_timestamp = None;
        }
        let last_time = self.time_index.last_entry();
        self.max_timestamp_so_far = last_time.timestamp;
        self.offset_of_max_timestamp_so_far = last_time.offset;
        self.scan_tail(false)?;
        self.dirty = true;
        Ok(removed)
    }

    /// Walks the batches after the last offset-index entry to learn the next
    /// offset, the max timestamp and the bytes since that entry. With
    /// `verify_crc` every batch's CRC is checked; any fault is `InvalidData`.
    pub fn scan_tail(&mut self, verify_crc: bool) -> io::Result<()> {
        let start = self.offset_index.last_entry();
        let start_pos = start.map_or(0, |e| e.position as u64);
        let mut pos = start_pos;
        let mut next_offset = self.base_offset;
        let mut scratch = if verify_crc {
            vec![0u8; SCAN_BUFFER_BYTES]
        } else {
            Vec::new()
        };
        while pos < self.size_bytes {
            let header = if verify_crc {
                read_valid_batch(&self.log, pos, self.size_bytes, &mut scratch)?
            } else {
                self.read_header(pos)?
            };
            let in_order = header.base_offset >= next_offset
                && header.last_offset_delta >= 0
                && self.offset_index.can_append_offset(header.last_offset());
            // The indexed batch must be the one the entry names.
            let matches_index =
                pos != start_pos || start.is_none_or(|e| e.offset == header.last_offset());
            if !in_order || !matches_index {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("batch at {pos} has unexpected offsets"),
                ));
            }
            if header.max_timestamp > self.max_timestamp_so_far {
                self.max_timestamp_so_far = header.max_timestamp;
                self.offset_of_max_timestamp_so_far = header.last_offset();
            }
            next_offset = header.last_offset() + 1;
            pos += header.total_size() as u64;
        }
        if let Some(e) = start {
            next_offset = next_offset.max(e.offset + 1);
        }
        self.bytes_since_last_index_entry = self.size_bytes - start_pos;
        self.next_offset = next_offset;
        Ok(())
    }

    /// The segment became the log's active one: its indexes are written
    /// through a mapping of their preallocated files from now on, as Kafka's
    /// are, so the files on disk stay current between flushes.
    pub fn on_become_active(&mut self) -> io::Result<()> {
        self.offset_index.map_for_appends()?;
        self.time_index.map_for_appends()
    }

    /// The segment's max timestamp as its time index's last entry, even if
    /// the index is full (Kafka's `onBecomeInactiveSegment`).
    fn append_final_time_index_entry(&mut self) {
        if self.max_timestamp_so_far >= 0 {
            self.time_index.maybe_append(
                self.max_timestamp_so_far,
                self.offset_of_max_timestamp_so_far,
                true,
            );
        }
    }

    /// Kafka's `onBecomeInactiveSegment`: final time-index entry, indexes
    /// written out exactly, a preallocated log trimmed to its data.
    pub fn on_become_inactive(&mut self) -> io::Result<()> {
        self.append_final_time_index_entry();
        self.offset_index.unmap_and_trim()?;
        self.time_index.unmap_and_trim()?;
        self.trim_log_and_drop_writer()
    }

    /// `on_become_inactive` for a roll: the indexes' last entries and trims
    /// are queued for the `index-writes` thread (the roll's fsync waits for
    /// them), so the shard makes no index system call.
    pub fn on_become_inactive_queued(&mut self) -> io::Result<()> {
        self.append_final_time_index_entry();
        self.offset_index.deactivate_queued();
        self.time_index.deactivate_queued();
        self.trim_log_and_drop_writer()
    }

    fn trim_log_and_drop_writer(&mut self) -> io::Result<()> {
        if self.log.file_len()? != self.size_bytes {
            self.set_log_len(self.size_bytes)?;
        }
        // Inactive segments are never written again: free the buffer.
        if self.direct.take().is_some() {
            // From now on fetches sendfile this file from the page cache:
            // drop any page a read cached while O_DIRECT writes went past it.
            page_cache::advise(self.log.file(), libc::POSIX_FADV_DONTNEED)?;
        }
        Ok(())
    }

    /// Writes pending index entries and fsyncs the log and the indexes.
    pub fn sync(&mut self) -> io::Result<()> {
        match &mut self.direct {
            Some(w) => w.sync_data()?,
            None => self.log.sync_data()?,
        }
        self.offset_index.sync()?;
        self.time_index.sync()?;
        self.txn_index.sync()?;
        self.dirty = false;
        Ok(())
    }

    /// Hands the fsync of an inactive segment to a background thread (see
    /// `Log::take_roll_syncs`): index entries not written behind are written
    /// out here (the job waits for the others), and the files to fdatasync
    /// are returned. The segment counts as clean from now on; the log
    /// tracks the sync until it completes.
    pub fn detach_sync(&mut self) -> io::Result<Vec<Arc<File>>> {
        assert!(
            self.direct.is_none(),
            "only inactive segments sync in the background"
        );
        self.offset_index.flush_unless_behind()?;
        self.time_index.flush_unless_behind()?;
        self.dirty = false;
        let mut files = vec![
            self.log.shared(),
            self.offset_index.file().shared(),
            self.time_index.file().shared(),
        ];
        files.extend(self.txn_index.shared_file());
        Ok(files)
    }

    /// Kafka's asynchronous segment delete: the files are renamed
    /// `<name>.deleted` at once and unlinked `delay_ms` later
    /// (`file.delete.delay.ms`), off the shard; open slices keep their
    /// descriptor. The last close of an unlinked file frees its page cache,
    /// so the descriptors and index maps are closed there too. A broker
    /// that stops first removes the `.deleted` files at its next start.
    pub fn delete_files(self, delay_ms: u64) -> io::Result<()> {
        let mut doomed = Vec::with_capacity(4);
        let txn_path = self.txn_index.path().to_path_buf();
        for path in [
            self.log.path(),
            self.offset_index.file().path(),
            self.time_index.file().path(),
            &txn_path,
        ] {
            let renamed = deleted_name(path);
            match std::fs::rename(path, &renamed) {
                Ok(()) => doomed.push(renamed),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        super::log_deleter::delete_after(
            doomed,
            DeletedFiles {
                _log: self.log,
                _offset_index: self.offset_index,
                _time_index: self.time_index,
            },
            delay_ms,
        );
        Ok(())
    }
}

/// The bytes of one append: as they are stored, or the request's bytes
/// with their stored headers beside them.
#[derive(Clone, Copy)]
pub(super) enum AppendBytes<'a> {
    Plain(&'a [u8]),
    Patched(&'a PatchedRecords),
}

impl AppendBytes<'_> {
    pub(super) fn len(&self) -> usize {
        match self {
            AppendBytes::Plain(bytes) => bytes.len(),
            AppendBytes::Patched(patched) => patched.len(),
        }
    }
}

/// Kafka's `DELETED_FILE_SUFFIX` added to a segment file's name.
pub(super) fn deleted_name(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_os_string();
    name.push(super::recovery::DELETED_FILE_SUFFIX);
    PathBuf::from(name)
}

/// A deleted segment's open files, held only to be dropped (closed and
/// unmapped) off the shard.
pub(super) struct DeletedFiles {
    _log: DiskFile,
    _offset_index: OffsetIndex,
    _time_index: TimeIndex,
}

/// Missing or failing the sanity check: the index can be rebuilt.
fn is_rebuildable(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::NotFound | io::ErrorKind::InvalidData | io::ErrorKind::UnexpectedEof
    )
}

/// Largest compressed batch (and its decompressed records) a timestamp lookup
/// will load; batches are bounded by `max.message.bytes` when written.
const LOOKUP_MAX_BATCH_BYTES: usize = 64 * 1024 * 1024;

/// `find_record` for a compressed batch: decompresses it (bounded) and scans
/// its records, as Kafka's timestamp lookup does.
fn find_record_compressed(
    file: &DiskFile,
    header: &BatchHeader,
    pos: u64,
    codec: Compression,
    mut pred: impl FnMut(i64, i64) -> bool,
) -> io::Result<Option<(i64, i64)>> {
    let size = header.total_size();
    if size > LOOKUP_MAX_BATCH_BYTES {
        return Ok(Some((header.base_offset, header.max_timestamp)));
    }
    let mut batch = vec![0u8; size];
    file.read_exact_at(&mut batch, pos)?;
    let mut records = Vec::new();
    super::records::decompress(
        codec,
        &batch[RECORD_BATCH_OVERHEAD..],
        &mut records,
        LOOKUP_MAX_BATCH_BYTES,
    )
    .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    for r in super::records::RecordIter::new(&records) {
        let r = r.map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
        let offset = header.base_offset.wrapping_add(r.offset_delta as i64);
        let timestamp = header.base_timestamp.wrapping_add(r.timestamp_delta);
        if pred(offset, timestamp) {
            return Ok(Some((offset, timestamp)));
        }
    }
    Ok(None)
}
