//! Log compaction (Kafka's `LogCleaner`, `Cleaner` and `LogCleanerManager`)
//! for `cleanup.policy=compact`, run by each shard on the logs it owns.
//!
//! A pass over one log: (1) map every key of the dirty section (from the
//! cleaner checkpoint to the first uncleanable offset: never the active
//! segment, nothing younger than `min.compaction.lag.ms`) to its latest
//! offset, in a bounded [`OffsetMap`]; (2) rewrite the log from its start to
//! the end of the mapped section, in groups of segments that fit one
//! segment, keeping per key only the latest record, tombstones until their
//! batch's delete horizon; (3) move the checkpoint to the mapped end.
//! Aborted transactions' data is neither mapped nor kept, markers go a
//! delete horizon after their data, and the pass stops at the last stable
//! offset (`cleaner_txn`). The work is done in
//! [`LogCleaner::step`]s of bounded I/O so the shard never stalls produce
//! or fetch for long.
//!
//! Swap (crash safety): a group's output is written as
//! `<base>.{log,index,timeindex}.cleaned` (and `.txnindex.cleaned`, the
//! group's aborted transactions, when it has any) and fsynced off the
//! shard; the log then hands the renames to the `log-dirs` thread
//! (`cleaner_swap`): to `.swap`, the log last (the commit point), the old
//! segments' files to `.deleted` (unlinked after `file.delete.delay.ms`),
//! the `.swap` files to their final names. [`complete_interrupted_swaps`],
//! run by `Log::open` before stray files are deleted, finishes a committed
//! swap; an uncommitted one leaves only `.cleaned`/stray `.swap` files,
//! which are deleted, with the old segments whole.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};

use super::batch::{self, BatchHeader};
use super::cleaner_filter::{self, Buffers, FilterContext, LastRecordOf, Outcome, TxnFate};
use super::config::MAX_SEGMENT_BYTES;
use super::log::Log;
use super::offset_index::{OffsetIndex, OFFSET_INDEX_ENTRY_BYTES};
use super::offset_map::OffsetMap;
use super::recovery::read_header_at;
use super::segment::{
    segment_file_path, DiskFile, LogSegment, INDEX_FILE_SUFFIX, LOG_FILE_SUFFIX,
    TIME_INDEX_FILE_SUFFIX, TXN_INDEX_FILE_SUFFIX,
};
use super::time_index::{TimeIndex, TIME_INDEX_ENTRY_BYTES};
use super::transaction_index::TransactionIndex;

pub use super::cleaner_filter::{delete_horizon_ms, LastRecord};

#[path = "cleaner_read.rs"]
mod read;
#[path = "cleaner_swap.rs"]
mod swap;
#[path = "cleaner_txn.rs"]
mod txn;
use read::{ReadAhead, ReadCursor};
pub use swap::complete_interrupted_swaps;
use txn::{AbortedTxnWalk, MapTxns, TxnBound};

pub const CLEANED_SUFFIX: &str = ".cleaned";
/// Steps' worth of input read into the page cache at once when a step
/// finds its input out of it (`cleaner_read`).
const READ_AHEAD_STEPS: u64 = 8;
pub const SWAP_SUFFIX: &str = ".swap";
/// Kafka's `log.cleaner.dedupe.buffer.size` is 128 MiB for all cleaner
/// threads; each kshard shard has its own map.
pub const DEFAULT_DEDUPE_BUFFER_BYTES: usize = 16 * 1024 * 1024;
/// Input bytes one [`LogCleaner::step`] reads at most (one batch may exceed
/// it): about 2-3 ms of a shard here, mapping or rewriting. The broker runs
/// steps back to back while a pass has work, the shard serving in between.
pub const DEFAULT_STEP_BYTES: u64 = 1024 * 1024;
/// Batches larger than this are refused (corruption, not data).
const MAX_BATCH_BYTES: usize = 64 * 1024 * 1024;

#[derive(Clone, Debug)]
pub struct CleanerConfig {
    pub dedupe_buffer_bytes: usize,
    pub step_bytes: u64,
}

impl Default for CleanerConfig {
    fn default() -> Self {
        CleanerConfig {
            dedupe_buffer_bytes: DEFAULT_DEDUPE_BUFFER_BYTES,
            step_bytes: DEFAULT_STEP_BYTES,
        }
    }
}

/// Kafka's `LogToClean`: where the dirty section is and how dirty it is.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CleanableInfo {
    pub first_dirty_offset: i64,
    pub first_uncleanable_offset: i64,
    pub clean_bytes: u64,
    pub cleanable_bytes: u64,
    /// cleanable / (clean + cleanable).
    pub dirty_ratio: f64,
    /// How far past `max.compaction.lag.ms` the oldest dirty batch is.
    pub max_compaction_delay_ms: i64,
}

/// Offsets [first_dirty, first_uncleanable) and their sizes (Kafka's
/// `cleanableOffsets` and `LogToClean`).
pub fn cleanable_info(log: &Log, now_ms: i64) -> CleanableInfo {
    bounded_cleanable_info(log, now_ms, None)
}

/// `cleanable_info` with the first uncleanable offset at most `bound`
/// (a transaction not seen ending, see `cleaner_txn`).
fn bounded_cleanable_info(log: &Log, now_ms: i64, bound: Option<i64>) -> CleanableInfo {
    let config = log.config();
    let start = log.log_start_offset();
    let checkpoint = log.cleaner_checkpoint();
    let first_dirty = if checkpoint < start || checkpoint > log.log_end_offset() {
        start
    } else {
        checkpoint
    };
    let active_base = log.active_base_offset();
    let min_lag_ms = config.min_compaction_lag_ms.max(0);
    let max_lag_ms = config.max_compaction_lag_ms.max(0);
    let mut first_uncleanable = active_base.min(bound.unwrap_or(i64::MAX));
    let mut earliest_dirty_ts = i64::MAX;
    let segs: Vec<&LogSegment> = log.segments().collect();
    for (i, seg) in segs.iter().enumerate().take(segs.len() - 1) {
        let end = segs[i + 1].base_offset();
        if end <= first_dirty {
            continue;
        }
        if let Some(ts) = seg.rolling_based_timestamp.filter(|&t| t > 0) {
            earliest_dirty_ts = earliest_dirty_ts.min(ts);
        }
        if min_lag_ms > 0 {
            let largest = seg.largest_timestamp().unwrap_or(i64::MAX);
            if largest > now_ms.saturating_sub(min_lag_ms) {
                first_uncleanable = first_uncleanable.min(seg.base_offset());
                break;
            }
        }
    }
    let first_uncleanable = first_uncleanable.max(first_dirty);
    let (mut clean_bytes, mut cleanable_bytes) = (0u64, 0u64);
    for (i, seg) in segs.iter().enumerate() {
        let end = segs
            .get(i + 1)
            .map_or(log.log_end_offset(), |s| s.base_offset());
        if seg.base_offset() < first_dirty {
            clean_bytes += seg.size_bytes();
        }
        if seg.base_offset() < first_uncleanable
            && end > first_dirty
            && first_uncleanable > first_dirty
        {
            cleanable_bytes += seg.size_bytes();
        }
    }
    let total = clean_bytes + cleanable_bytes;
    let clean_until = now_ms.saturating_sub(max_lag_ms);
    CleanableInfo {
        first_dirty_offset: first_dirty,
        first_uncleanable_offset: first_uncleanable,
        clean_bytes,
        cleanable_bytes,
        dirty_ratio: if total == 0 {
            0.0
        } else {
            cleanable_bytes as f64 / total as f64
        },
        max_compaction_delay_ms: if earliest_dirty_ts < clean_until {
            clean_until - earliest_dirty_ts
        } else {
            0
        },
    }
}

/// What one pass did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CleanStats {
    pub first_dirty_offset: i64,
    /// The new cleaner checkpoint.
    pub end_offset: i64,
    pub map_entries: usize,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub records_read: u64,
    pub records_retained: u64,
    pub groups: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// No pass in progress.
    Idle,
    /// More steps needed.
    InProgress,
    /// More steps needed once work running off the shard is done (a
    /// cleaned group's fsyncs, its input read into the page cache, the
    /// dedupe map being made): step again a little later.
    WaitingOffShard,
    /// The pass finished and the checkpoint moved.
    Done(CleanStats),
}

enum Phase {
    /// Mapping the dirty section: the next batch is at (segment, position).
    BuildMap { segment: i64, position: u64 },
    /// Rewriting groups; `next_base` is the first segment not yet cleaned.
    Clean {
        next_base: i64,
        group: Option<Box<GroupWriter>>,
    },
}

struct Pass {
    dir: PathBuf,
    now_ms: i64,
    first_uncleanable: i64,
    /// One past the last mapped offset: the new checkpoint.
    mapped_end: i64,
    phase: Phase,
    stats: CleanStats,
    /// Smallest delete horizon among retained tombstones.
    min_horizon_ms: Option<i64>,
    map_txns: MapTxns,
    /// Which copied batches are aborted data and which markers may go,
    /// over every group of the pass.
    copy_txns: AbortedTxnWalk,
    read_ahead: ReadAhead,
}

impl Pass {
    /// Where the pass reads next, if it reads before its next swap.
    fn read_cursor(&self) -> Option<ReadCursor> {
        match &self.phase {
            Phase::BuildMap { segment, position } => Some(ReadCursor {
                segment: *segment,
                position: *position,
                end_base: self.first_uncleanable,
            }),
            Phase::Clean {
                next_base,
                group: None,
            } => Some(ReadCursor {
                segment: *next_base,
                position: 0,
                end_base: self.mapped_end,
            }),
            Phase::Clean { group: Some(g), .. } if g.sync.is_none() => {
                g.bases.get(g.seg_idx).map(|&segment| ReadCursor {
                    segment,
                    position: g.position,
                    end_base: self.mapped_end,
                })
            }
            Phase::Clean { .. } => None,
        }
    }
}

/// One shard's cleaner: a single offset map, one log cleaned at a time.
pub struct LogCleaner {
    config: CleanerConfig,
    map: Option<OffsetMap>,
    pass: Option<Pass>,
    bufs: Buffers,
    batch_buf: Vec<u8>,
    /// Per log dir, the earliest delete horizon left by its last pass: a
    /// pass is due when it passes even if nothing new is dirty.
    pending_horizons_ms: HashMap<PathBuf, i64>,
    /// Per log dir, where its last pass found a transaction not seen ending.
    txn_bounds: HashMap<PathBuf, TxnBound>,
}

fn other(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

impl LogCleaner {
    pub fn new(config: CleanerConfig) -> Self {
        assert!(config.step_bytes > 0);
        LogCleaner {
            config,
            map: None,
            pass: None,
            bufs: Buffers::default(),
            batch_buf: Vec::new(),
            pending_horizons_ms: HashMap::new(),
            txn_bounds: HashMap::new(),
        }
    }

    /// The dir of the log being cleaned, if a pass is in progress.
    pub fn in_progress(&self) -> Option<&Path> {
        self.pass.as_ref().map(|p| p.dir.as_path())
    }

    /// Stops the pass (the log was deleted, truncated or closed); its
    /// unfinished output files are removed. Swapped groups stay: each is
    /// a complete, valid cleaning on its own.
    pub fn abort(&mut self) {
        if let Some(pass) = self.pass.take() {
            if let Phase::Clean { group: Some(g), .. } = pass.phase {
                g.discard();
            }
        }
    }

    /// Forgets a log (deleted or moved off this shard).
    pub fn forget(&mut self, dir: &Path) {
        if self.in_progress() == Some(dir) {
            self.abort();
        }
        self.pending_horizons_ms.remove(dir);
        self.txn_bounds.remove(dir);
    }

    /// The dirty ratio if `log` is due for cleaning (Kafka's
    /// `grabFilthiestCompactedLog` filter), for picking the filthiest log.
    pub fn cleaning_priority(
        &self,
        log: &Log,
        now_ms: i64,
        last_stable_offset: Option<i64>,
    ) -> Option<f64> {
        let config = log.config();
        if !config.compact {
            return None;
        }
        let info = bounded_cleanable_info(log, now_ms, self.bound(log, last_stable_offset));
        let dirty = (info.max_compaction_delay_ms > 0 && info.cleanable_bytes > 0)
            || info.dirty_ratio > config.min_cleanable_dirty_ratio;
        let horizon_due = self
            .pending_horizons_ms
            .get(log.dir())
            .is_some_and(|&h| h <= now_ms);
        (dirty || horizon_due).then_some(info.dirty_ratio)
    }

    /// Whether the dedupe map exists (made at the first pass, or made
    /// elsewhere and installed).
    pub fn has_map(&self) -> bool {
        self.map.is_some()
    }

    /// The dedupe map this cleaner uses, for making it off the shard.
    pub fn new_map(config: &CleanerConfig) -> OffsetMap {
        OffsetMap::new(config.dedupe_buffer_bytes)
    }

    pub fn config(&self) -> &CleanerConfig {
        &self.config
    }

    /// Installs the map `new_map` made (zeroing its 16 MiB held a shard
    /// 11.5 ms).
    pub fn install_map(&mut self, map: OffsetMap) {
        assert!(self.map.is_none(), "one dedupe map per cleaner");
        self.map = Some(map);
    }

    /// Starts a pass over `log` if it is due. Returns whether it started.
    pub fn start(&mut self, log: &Log, now_ms: i64, last_stable_offset: Option<i64>) -> bool {
        if self.pass.is_some()
            || self
                .cleaning_priority(log, now_ms, last_stable_offset)
                .is_none()
        {
            return false;
        }
        let info = bounded_cleanable_info(log, now_ms, self.bound(log, last_stable_offset));
        let map = self.map.get_or_insert_with(|| Self::new_map(&self.config));
        map.clear();
        let first_segment = log
            .segment_for(info.first_dirty_offset)
            .map_or(info.first_dirty_offset, |s| s.base_offset());
        self.pending_horizons_ms.remove(log.dir());
        self.pass = Some(Pass {
            dir: log.dir().to_path_buf(),
            now_ms,
            first_uncleanable: info.first_uncleanable_offset,
            mapped_end: info.first_dirty_offset,
            phase: Phase::BuildMap {
                segment: first_segment,
                position: 0,
            },
            stats: CleanStats {
                first_dirty_offset: info.first_dirty_offset,
                end_offset: info.first_dirty_offset,
                ..CleanStats::default()
            },
            min_horizon_ms: None,
            map_txns: MapTxns::new(
                log,
                info.first_dirty_offset,
                info.first_uncleanable_offset,
                last_stable_offset.is_none(),
            ),
            copy_txns: AbortedTxnWalk::default(),
            read_ahead: ReadAhead::default(),
        });
        true
    }

    /// Does at most about `step_bytes` of the pass on `log` (which must be
    /// the log it started on). `last_record_of(producer_id)` is what the
    /// producer state knows of an active producer's last batch. On error
    /// the pass is aborted.
    pub fn step(
        &mut self,
        log: &mut Log,
        last_record_of: LastRecordOf<'_>,
        now_ms: i64,
    ) -> io::Result<Step> {
        let Some(pass) = &self.pass else {
            return Ok(Step::Idle);
        };
        if pass.dir != log.dir() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "cleaning {} but given {}",
                    pass.dir.display(),
                    log.dir().display()
                ),
            ));
        }
        match self.step_inner(log, last_record_of, now_ms) {
            Ok(step) => Ok(step),
            Err(e) => {
                self.abort();
                Err(e)
            }
        }
    }

    /// Runs a whole pass now if `log` is due (tests, tools, shutdown).
    pub fn clean_now(
        &mut self,
        log: &mut Log,
        last_record_of: LastRecordOf<'_>,
        now_ms: i64,
        last_stable_offset: Option<i64>,
    ) -> io::Result<Option<CleanStats>> {
        if !self.start(log, now_ms, last_stable_offset) {
            return Ok(None);
        }
        loop {
            match self.step(log, last_record_of, now_ms)? {
                Step::Done(stats) => return Ok(Some(stats)),
                Step::InProgress => {}
                Step::WaitingOffShard => std::thread::sleep(std::time::Duration::from_micros(100)),
                Step::Idle => return Ok(None),
            }
        }
    }

    fn step_inner(
        &mut self,
        log: &mut Log,
        last_record_of: LastRecordOf<'_>,
        now_ms: i64,
    ) -> io::Result<Step> {
        let pass = self.pass.as_mut().expect("checked");
        if log.log_end_offset() < pass.first_uncleanable
            || log.active_base_offset() < pass.first_uncleanable
        {
            self.abort();
            return Ok(Step::Idle); // truncated under us
        }
        let mut budget = self.config.step_bytes;
        while budget > 0 {
            let pass = self.pass.as_mut().expect("checked");
            if let Some(cursor) = pass.read_cursor() {
                let ahead_bytes = READ_AHEAD_STEPS * self.config.step_bytes;
                if !pass.read_ahead.ready(log, cursor, budget, ahead_bytes) {
                    return Ok(Step::WaitingOffShard);
                }
            }
            let map = self.map.as_mut().expect("made by start");
            match &mut pass.phase {
                Phase::BuildMap { segment, position } => {
                    let mapped = map_some(
                        log,
                        map,
                        pass.first_uncleanable,
                        &mut pass.mapped_end,
                        (segment, position),
                        &mut budget,
                        &mut self.bufs,
                        &mut self.batch_buf,
                        &mut pass.map_txns,
                    )?;
                    if mapped != Mapped::More {
                        if self.bound_by_open_txns(log, mapped == Mapped::Full) {
                            continue;
                        }
                        let pass = self.pass.as_mut().expect("checked");
                        let map = self.map.as_mut().expect("made by start");
                        // Everything below the mapped end is judged by the
                        // map, even when nothing was dirty (tombstone expiry).
                        map.update_latest_offset(pass.mapped_end - 1);
                        pass.stats.map_entries = map.len();
                        pass.stats.end_offset = pass.mapped_end;
                        let first = log.segments().next().expect("segment").base_offset();
                        pass.phase = Phase::Clean {
                            next_base: first,
                            group: None,
                        };
                    }
                }
                Phase::Clean { next_base, group } => {
                    // The last group's swap, on the `log-dirs` thread,
                    // completes before the next group reads the log.
                    if !log.finish_cleaner_swap(now_ms)? {
                        return Ok(Step::WaitingOffShard);
                    }
                    if group.is_none() {
                        let Some(bases) = next_group(log, *next_base, pass.mapped_end) else {
                            return Ok(self.finish(log));
                        };
                        pass.copy_txns.add_group(log, &bases);
                        *group = Some(Box::new(GroupWriter::create(log, bases)?));
                    }
                    let g = group.as_mut().expect("just set");
                    if let Some(sync) = &g.sync {
                        if !sync.is_finished() {
                            // The group's fsyncs run off the shard; look
                            // again next step.
                            return Ok(Step::WaitingOffShard);
                        }
                        let g = group.take().expect("in progress");
                        let last = *g.bases.last().expect("non-empty group");
                        *next_base = last + 1;
                        pass.stats.groups += 1;
                        g.begin_swap(log)?;
                        continue;
                    }
                    let ctx = FilterContext {
                        map,
                        map_latest_offset: map.latest_offset(),
                        now_ms: pass.now_ms,
                        delete_retention_ms: log.config().delete_retention_ms,
                        last_record_of,
                    };
                    let finished = g.copy_some(
                        log,
                        &ctx,
                        &mut budget,
                        &mut self.bufs,
                        &mut self.batch_buf,
                        &mut pass.copy_txns,
                        &mut pass.stats,
                        &mut pass.min_horizon_ms,
                    )?;
                    if finished {
                        g.start_sync()?;
                    }
                }
            }
        }
        Ok(Step::InProgress)
    }

    fn finish(&mut self, log: &mut Log) -> Step {
        let pass = self.pass.take().expect("in progress");
        log.set_cleaner_checkpoint(pass.mapped_end);
        if let Some(h) = pass.min_horizon_ms {
            self.pending_horizons_ms.insert(pass.dir, h);
        }
        Step::Done(pass.stats)
    }
}

/// Reads the batch at `pos` of `seg` into `buf`, CRC-checked.
fn read_batch<'a>(
    seg: &LogSegment,
    pos: u64,
    buf: &'a mut Vec<u8>,
) -> io::Result<(BatchHeader, &'a [u8])> {
    let header = read_header_at(&seg.log, pos, seg.size_bytes())?;
    let size = header.total_size();
    if size > MAX_BATCH_BYTES {
        return Err(other(format!("batch of {size} bytes at {pos}")));
    }
    buf.resize(size, 0);
    seg.log.read_exact_at(&mut buf[..size], pos)?;
    batch::verify_crc(&buf[..size]).map_err(|e| other(format!("batch at {pos}: {e}")))?;
    Ok((header, &buf[..size]))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mapped {
    /// The budget ran out first.
    More,
    /// The dirty section is mapped.
    Done,
    /// The map is full (Kafka stops at the batch that would not fit).
    Full,
}

/// Maps keys from the cursor on, within the budget. The keys of control
/// batches and of aborted transactions' batches are not mapped (Kafka's
/// `buildOffsetMapForSegment`).
#[allow(clippy::too_many_arguments)]
fn map_some(
    log: &Log,
    map: &mut OffsetMap,
    first_uncleanable: i64,
    mapped_end: &mut i64,
    (segment, position): (&mut i64, &mut u64),
    budget: &mut u64,
    bufs: &mut Buffers,
    batch_buf: &mut Vec<u8>,
    txns: &mut MapTxns,
) -> io::Result<Mapped> {
    while *budget > 0 {
        let Some(seg) = log.segments().find(|s| s.base_offset() >= *segment) else {
            return Ok(Mapped::Done);
        };
        if seg.base_offset() >= first_uncleanable {
            return Ok(Mapped::Done);
        }
        if seg.base_offset() != *segment {
            *segment = seg.base_offset();
            *position = 0;
        }
        if *position >= seg.size_bytes() {
            *segment = seg.base_offset() + 1;
            continue;
        }
        let (header, batch) = read_batch(seg, *position, batch_buf)?;
        if header.last_offset() >= first_uncleanable {
            return Ok(Mapped::Done); // bounded inside a segment (cleaner_txn)
        }
        *budget = budget.saturating_sub(batch.len() as u64);
        let aborted = txns.on_batch_read(&header);
        if header.last_offset() >= *mapped_end && !header.is_control() && !aborted {
            if !map.has_room_for(header.records_count.max(0) as usize) {
                if map.is_empty() {
                    return Err(other("dedupe buffer too small for one batch".into()));
                }
                return Ok(Mapped::Full);
            }
            let mut full = false;
            cleaner_filter::for_each_key(batch, &header, bufs, |offset, key| {
                if let Some(k) = key {
                    full |= !map.put(k, offset);
                }
            })
            .map_err(other)?;
            debug_assert!(!full, "room was checked");
        }
        map.update_latest_offset(header.last_offset());
        *mapped_end = (*mapped_end).max(header.last_offset() + 1);
        *position += header.total_size() as u64;
    }
    Ok(Mapped::More)
}

/// Kafka's `groupSegmentsBySize`: consecutive segments from `from` with
/// base < `end` whose sizes and index sizes fit one segment.
fn next_group(log: &Log, from: i64, end: i64) -> Option<Vec<i64>> {
    let config = log.config();
    let max_bytes = config.effective_segment_bytes();
    let max_index = config.max_index_size_bytes as u64;
    let active = log.active_base_offset();
    let mut segs = log
        .segments()
        .filter(|s| s.base_offset() >= from && s.base_offset() < end && s.base_offset() < active);
    let first = segs.next()?;
    let (mut bytes, mut oi, mut ti) = index_sizes(first);
    let mut bases = vec![first.base_offset()];
    for s in segs {
        let (b, o, t) = index_sizes(s);
        let fits_offsets = s.next_offset() - 1 - first.base_offset() <= i32::MAX as i64;
        if bytes + b > max_bytes || oi + o > max_index || ti + t > max_index || !fits_offsets {
            break;
        }
        bytes += b;
        oi += o;
        ti += t;
        bases.push(s.base_offset());
    }
    Some(bases)
}

fn index_sizes(s: &LogSegment) -> (u64, u64, u64) {
    (
        s.size_bytes(),
        (s.offset_index().entries() * OFFSET_INDEX_ENTRY_BYTES) as u64,
        (s.time_index().entries() * TIME_INDEX_ENTRY_BYTES) as u64,
    )
}

fn rename(from: &Path, to: &Path) -> io::Result<()> {
    std::fs::rename(from, to)
}

fn remove_if_exists(path: &Path) -> io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

const SEGMENT_SUFFIXES: [&str; 4] = [
    LOG_FILE_SUFFIX,
    INDEX_FILE_SUFFIX,
    TIME_INDEX_FILE_SUFFIX,
    TXN_INDEX_FILE_SUFFIX,
];

fn suffixed(dir: &Path, base: i64, suffix: &str, extra: &str) -> PathBuf {
    segment_file_path(dir, base, &format!("{suffix}{extra}"))
}

/// The cleaned replacement of one group, written as `.cleaned` files, with
/// indexes kept as `LogSegment::append` keeps them.
struct GroupWriter {
    dir: PathBuf,
    bases: Vec<i64>,
    /// Input cursor: index into `bases`, position in that segment.
    seg_idx: usize,
    position: u64,
    log: DiskFile,
    offset_index: OffsetIndex,
    time_index: TimeIndex,
    /// The group's aborted transactions that keep data, entered as their
    /// markers are copied (see `cleaner_txn`).
    txn_index: TransactionIndex,
    size_bytes: u64,
    bytes_since_last_index_entry: u64,
    index_interval_bytes: u64,
    max_timestamp: i64,
    offset_of_max_timestamp: i64,
    /// The fsync of the written files, on a thread of its own: on the
    /// shard it stalls it (tens of ms per group under write load).
    sync: Option<std::thread::JoinHandle<io::Result<()>>>,
}

impl GroupWriter {
    fn create(log: &Log, bases: Vec<i64>) -> io::Result<GroupWriter> {
        let dir = log.dir().to_path_buf();
        let base = bases[0];
        let max_index = log.config().max_index_size_bytes;
        let open = |suffix: &str| -> io::Result<DiskFile> {
            let f = DiskFile::open(&suffixed(&dir, base, suffix, CLEANED_SUFFIX), true)?;
            f.set_len(0)?;
            Ok(f)
        };
        let txn_index_path = suffixed(&dir, base, TXN_INDEX_FILE_SUFFIX, CLEANED_SUFFIX);
        remove_if_exists(&txn_index_path)?;
        let txn_index = TransactionIndex::with_path(txn_index_path, base);
        Ok(GroupWriter {
            log: open(LOG_FILE_SUFFIX)?,
            offset_index: OffsetIndex::create(open(INDEX_FILE_SUFFIX)?, base, max_index)?,
            time_index: TimeIndex::create(open(TIME_INDEX_FILE_SUFFIX)?, base, max_index)?,
            txn_index,
            dir,
            bases,
            seg_idx: 0,
            position: 0,
            size_bytes: 0,
            bytes_since_last_index_entry: 0,
            index_interval_bytes: log.config().index_interval_bytes as u64,
            max_timestamp: batch::NO_TIMESTAMP,
            offset_of_max_timestamp: base,
            sync: None,
        })
    }

    fn discard(self) {
        let base = self.bases[0];
        for suffix in SEGMENT_SUFFIXES {
            let _ = remove_if_exists(&suffixed(&self.dir, base, suffix, CLEANED_SUFFIX));
        }
    }

    fn append(&mut self, bytes: &[u8], header: &BatchHeader) -> io::Result<()> {
        if self.size_bytes + bytes.len() as u64 > MAX_SEGMENT_BYTES {
            return Err(other("cleaned segment would overflow".into()));
        }
        self.log.write_all_at(bytes, self.size_bytes)?;
        if header.max_timestamp > self.max_timestamp {
            self.max_timestamp = header.max_timestamp;
            self.offset_of_max_timestamp = header.last_offset();
        }
        if self.bytes_since_last_index_entry > self.index_interval_bytes {
            self.offset_index
                .append(header.last_offset(), self.size_bytes as u32);
            self.time_index
                .maybe_append(self.max_timestamp, self.offset_of_max_timestamp, false);
            self.bytes_since_last_index_entry = 0;
        }
        self.size_bytes += bytes.len() as u64;
        self.bytes_since_last_index_entry += bytes.len() as u64;
        Ok(())
    }

    /// Filters input batches into the output within the budget; true when
    /// the whole group is copied.
    #[allow(clippy::too_many_arguments)]
    fn copy_some(
        &mut self,
        log: &Log,
        ctx: &FilterContext<'_>,
        budget: &mut u64,
        bufs: &mut Buffers,
        batch_buf: &mut Vec<u8>,
        txns: &mut AbortedTxnWalk,
        stats: &mut CleanStats,
        min_horizon_ms: &mut Option<i64>,
    ) -> io::Result<bool> {
        while *budget > 0 {
            let Some(&base) = self.bases.get(self.seg_idx) else {
                return Ok(true);
            };
            let seg = log
                .segments()
                .find(|s| s.base_offset() == base)
                .ok_or_else(|| other(format!("segment {base} went away while cleaning")))?;
            if self.position >= seg.size_bytes() {
                self.seg_idx += 1;
                self.position = 0;
                continue;
            }
            let (header, batch) = read_batch(seg, self.position, batch_buf)?;
            let batch_len = batch.len() as u64;
            let fate = txns.on_batch_read(&header);
            let (outcome, counts) =
                cleaner_filter::filter_batch(batch, &header, fate, ctx, bufs).map_err(other)?;
            if let TxnFate::Marker {
                keeps_entry: Some(txn),
                ..
            } = fate
            {
                assert_ne!(
                    outcome,
                    Outcome::Dropped,
                    "{txn:?}: a marker with data is kept"
                );
                self.txn_index.append(txn)?;
            }
            match outcome {
                Outcome::Original => {
                    self.append(batch, &header)?;
                    stats.bytes_written += batch_len;
                }
                Outcome::Rewritten => {
                    let new_header =
                        BatchHeader::parse(&bufs.out).map_err(|e| other(e.to_string()))?;
                    self.append(&bufs.out, &new_header)?;
                    stats.bytes_written += bufs.out.len() as u64;
                }
                Outcome::Dropped => {}
            }
            if let Some(h) = counts.delete_horizon_ms {
                *min_horizon_ms = Some(min_horizon_ms.map_or(h, |m| m.min(h)));
            }
            stats.records_read += counts.records_read;
            stats.records_retained += counts.records_retained;
            stats.bytes_read += batch_len;
            *budget = budget.saturating_sub(batch_len);
            self.position += batch_len;
        }
        Ok(self.seg_idx >= self.bases.len())
    }

    /// Writes what the indexes hold back and starts the fsync of the
    /// group's three files (by path: nothing else opens them) on a thread.
    fn start_sync(&mut self) -> io::Result<()> {
        assert!(self.sync.is_none(), "one sync per group");
        if self.max_timestamp >= 0 {
            self.time_index
                .maybe_append(self.max_timestamp, self.offset_of_max_timestamp, true);
        }
        self.offset_index.flush_pending()?;
        self.time_index.flush_pending()?;
        let base = self.bases[0];
        let mut paths: Vec<PathBuf> = [INDEX_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX, LOG_FILE_SUFFIX]
            .iter()
            .map(|suffix| suffixed(&self.dir, base, suffix, CLEANED_SUFFIX))
            .collect();
        if !self.txn_index.is_empty() {
            paths.push(self.txn_index.path().to_path_buf());
        }
        let sync = std::thread::Builder::new()
            .name("cleaner-sync".into())
            .spawn(move || {
                paths
                    .iter()
                    .try_for_each(|p| std::fs::File::open(p)?.sync_data())
            })?;
        self.sync = Some(sync);
        Ok(())
    }

    /// Hands the group's swap (see the module doc) to the log once its
    /// files are synced (`start_sync`): the renames and directory fsyncs
    /// run on the `log-dirs` thread (seven renames held a shard 74 ms
    /// under write load), and the log takes the new segment in when they
    /// are done (`Log::finish_cleaner_swap`).
    fn begin_swap(mut self, log: &mut Log) -> io::Result<()> {
        let sync = self.sync.take().expect("start_sync first");
        sync.join()
            .map_err(|_| other("the cleaner's sync thread panicked".into()))??;
        // Retention or DeleteRecords may have taken some of the group while
        // its files synced: the output replaces what is no longer there.
        if let Some(&gone) = self.bases.iter().find(|&&b| !log.has_segment(b)) {
            self.discard();
            return Err(other(format!("segment {gone} went away while cleaning")));
        }
        let GroupWriter {
            dir,
            bases,
            txn_index,
            ..
        } = self;
        let delete_delay_ms = log.config().file_delete_delay_ms;
        let swapped = bases.clone();
        log.begin_cleaner_swap(bases, move || {
            swap::commit_files(&dir, &swapped, txn_index, delete_delay_ms)
        });
        Ok(())
    }
}

#[cfg(test)]
#[path = "cleaner_tests.rs"]
mod tests;
