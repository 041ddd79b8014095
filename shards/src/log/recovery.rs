//! Loading a partition directory and recovering segments after an unclean
//! shutdown (Kafka's `LogLoader` and `LogSegment.recover`). Every byte read
//! here is untrusted: headers are read into fixed stack buffers, lengths are
//! checked against the file size, and CRCs are computed by streaming through
//! a bounded scratch buffer, so garbage never causes a large allocation.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};

use super::batch::{BatchHeader, CRC_COVERAGE_START, NO_TIMESTAMP, RECORD_BATCH_OVERHEAD};
use super::config::{LogConfig, MAX_SEGMENT_BYTES};
use super::segment::{
    segment_file_path, DiskFile, LogSegment, INDEX_FILE_SUFFIX, LOG_FILE_SUFFIX,
    TIME_INDEX_FILE_SUFFIX, TXN_INDEX_FILE_SUFFIX,
};

/// Scratch buffer for streaming CRC checks and record scans.
pub const SCAN_BUFFER_BYTES: usize = 64 * 1024;

/// Kafka's suffix for a deleted segment's files awaiting `file.delete.delay.ms`.
pub const DELETED_FILE_SUFFIX: &str = ".deleted";

const STRAY_SUFFIXES: [&str; 4] = [".tmp", ".cleaned", ".swap", DELETED_FILE_SUFFIX];

/// What `Log::open` had to do.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecoveryStats {
    /// Segments whose every batch was read and CRC-checked.
    pub segments_scanned: usize,
    /// Invalid bytes cut from segment ends (later segments deleted whole
    /// are not counted).
    pub bytes_truncated: u64,
    /// Valid batches seen while scanning.
    pub batches_recovered: u64,
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

/// Reads and parses the batch header at `pos`; the batch must end by `end`.
pub fn read_header_at(file: &DiskFile, pos: u64, end: u64) -> io::Result<BatchHeader> {
    let mut buf = [0u8; RECORD_BATCH_OVERHEAD];
    let avail = end.saturating_sub(pos).min(RECORD_BATCH_OVERHEAD as u64) as usize;
    let n = file.read_at_most(&mut buf[..avail], pos)?;
    let header = BatchHeader::parse(&buf[..n]).map_err(|e| invalid(format!("at {pos}: {e}")))?;
    if header.total_size() as u64 > end - pos {
        return Err(invalid(format!(
            "batch at {pos} of {} bytes runs past {end}",
            header.total_size()
        )));
    }
    Ok(header)
}

/// Like [`read_header_at`], and also verifies the CRC32C of the whole batch
/// by streaming it through `scratch`.
pub fn read_valid_batch(
    file: &DiskFile,
    pos: u64,
    end: u64,
    scratch: &mut [u8],
) -> io::Result<BatchHeader> {
    assert!(!scratch.is_empty());
    let header = read_header_at(file, pos, end)?;
    let stop = pos + header.total_size() as u64;
    let mut at = pos + CRC_COVERAGE_START as u64;
    let mut crc = 0u32;
    while at < stop {
        let n = (stop - at).min(scratch.len() as u64) as usize;
        file.read_exact_at(&mut scratch[..n], at)?;
        crc = crc32c::crc32c_append(crc, &scratch[..n]);
        at += n as u64;
    }
    if crc != header.crc {
        return Err(invalid(format!(
            "batch at {pos}: crc mismatch, stored {:#x}, computed {crc:#x}",
            header.crc
        )));
    }
    Ok(header)
}

/// Zigzag varint of at most `max_bytes` bytes (5 for int, 10 for long).
fn read_varint(buf: &[u8], max_bytes: usize) -> Option<(i64, usize)> {
    let mut value: u64 = 0;
    for (i, &b) in buf.iter().take(max_bytes).enumerate() {
        value |= ((b & 0x7f) as u64) << (7 * i);
        if b & 0x80 == 0 {
            let decoded = ((value >> 1) as i64) ^ -((value & 1) as i64);
            return Some((decoded, i + 1));
        }
    }
    None
}

/// A bounded read window over one file region, for record scans.
struct Window<'a> {
    file: &'a DiskFile,
    buf: Vec<u8>,
    start: u64,
    len: usize,
}

impl Window<'_> {
    fn bytes(&mut self, pos: u64, want: usize, end: u64) -> io::Result<&[u8]> {
        let want = (end.saturating_sub(pos)).min(want as u64) as usize;
        if pos < self.start || pos + want as u64 > self.start + self.len as u64 {
            let n = (end - pos).min(self.buf.len() as u64) as usize;
            self.file.read_exact_at(&mut self.buf[..n], pos)?;
            self.start = pos;
            self.len = n;
        }
        let off = (pos - self.start) as usize;
        Ok(&self.buf[off..off + want])
    }
}

/// Scans the records of the uncompressed batch at `pos` and returns the first
/// (offset, timestamp) for which `pred` holds. Only the record length,
/// timestamp delta and offset delta are decoded; keys and values are skipped.
pub fn find_record(
    file: &DiskFile,
    header: &BatchHeader,
    pos: u64,
    mut pred: impl FnMut(i64, i64) -> bool,
) -> io::Result<Option<(i64, i64)>> {
    let end = pos + header.total_size() as u64;
    let mut window = Window {
        file,
        buf: vec![0u8; header.total_size().min(SCAN_BUFFER_BYTES)],
        start: 0,
        len: 0,
    };
    let mut cur = pos + RECORD_BATCH_OVERHEAD as u64;
    let mut remaining = header.records_count.max(0);
    // length(5) + attributes(1) + timestamp delta(10) + offset delta(5)
    const RECORD_PREFIX_MAX_BYTES: usize = 21;
    while remaining > 0 && cur < end {
        let bytes = window.bytes(cur, RECORD_PREFIX_MAX_BYTES, end)?;
        let bad = || invalid(format!("malformed record at {cur} in batch at {pos}"));
        let (length, n_len) = read_varint(bytes, 5).ok_or_else(bad)?;
        let mut at = n_len + 1; // skip attributes
        let (ts_delta, n) = read_varint(bytes.get(at..).ok_or_else(bad)?, 10).ok_or_else(bad)?;
        at += n;
        let (offset_delta, _) = read_varint(bytes.get(at..).ok_or_else(bad)?, 5).ok_or_else(bad)?;
        if length < 0 || cur + (n_len as u64) + (length as u64) > end {
            return Err(bad());
        }
        let offset = header.base_offset.wrapping_add(offset_delta);
        let timestamp = header.base_timestamp.wrapping_add(ts_delta);
        if pred(offset, timestamp) {
            return Ok(Some((offset, timestamp)));
        }
        cur += n_len as u64 + length as u64;
        remaining -= 1;
    }
    Ok(None)
}

/// Kafka's `LogSegment.recover`: rebuilds both indexes from the log, and cuts
/// the log at the first batch that is truncated, fails its CRC, or has
/// offsets out of order. Returns (bytes truncated, valid batches). The
/// transaction index keeps its entries for markers still in the segment
/// (Kafka rebuilds it from producer state here; kshard replays producer
/// state after the load, `Log::replay_producer_state`, which adds back
/// entries missing at its end).
pub fn recover_segment(seg: &mut LogSegment, scratch: &mut [u8]) -> io::Result<(u64, u64)> {
    seg.offset_index.reset()?;
    seg.time_index.reset()?;
    let file_len = seg.log.file_len()?;
    let scan_end = file_len.min(MAX_SEGMENT_BYTES);
    let mut max_ts = NO_TIMESTAMP;
    let mut offset_of_max_ts = seg.base_offset;
    let mut valid: u64 = 0;
    let mut last_index_entry: u64 = 0;
    let mut next_offset = seg.base_offset;
    let mut first_batch_ts = None;
    let mut batches = 0u64;
    while valid < scan_end {
        let header = match read_valid_batch(&seg.log, valid, scan_end, scratch) {
            Ok(h) => h,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::InvalidData | io::ErrorKind::UnexpectedEof
                ) =>
            {
                log::warn!(
                    "{}: invalid batch at byte {valid}: {e}",
                    seg.log.path().display()
                );
                break;
            }
            Err(e) => return Err(e),
        };
        if header.base_offset < next_offset
            || header.last_offset_delta < 0
            || !seg.offset_index.can_append_offset(header.last_offset())
        {
            log::warn!(
                "{}: batch at byte {valid} has offsets {}..={} after {next_offset}",
                seg.log.path().display(),
                header.base_offset,
                header.last_offset()
            );
            break;
        }
        if header.max_timestamp > max_ts {
            max_ts = header.max_timestamp;
            offset_of_max_ts = header.last_offset();
        }
        if valid - last_index_entry > seg.index_interval_bytes as u64 {
            seg.offset_index.append(header.last_offset(), valid as u32);
            seg.time_index.maybe_append(max_ts, offset_of_max_ts, false);
            last_index_entry = valid;
        }
        first_batch_ts.get_or_insert(header.max_timestamp);
        next_offset = header.last_offset() + 1;
        valid += header.total_size() as u64;
        batches += 1;
    }
    let truncated = file_len - valid;
    if truncated > 0 {
        seg.set_log_len(valid)?;
    }
    seg.txn_index.truncate_to(next_offset)?;
    seg.size_bytes = valid;
    seg.next_offset = next_offset;
    seg.max_timestamp_so_far = max_ts;
    seg.offset_of_max_timestamp_so_far = offset_of_max_ts;
    seg.rolling_based_timestamp = first_batch_ts;
    seg.bytes_since_last_index_entry = valid - last_index_entry;
    // As a cleanly closed segment would have: the max timestamp entry last.
    if max_ts >= 0 {
        seg.time_index.maybe_append(max_ts, offset_of_max_ts, true);
    }
    seg.offset_index.flush_pending()?;
    seg.time_index.flush_pending()?;
    seg.dirty = true;
    Ok((truncated, batches))
}

/// The base offset of a file named `<digits><suffix>`.
pub fn parse_segment_file_name(name: &str, suffix: &str) -> Option<i64> {
    let stem = name.strip_suffix(suffix)?;
    if stem.is_empty() || stem.len() > 20 || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    stem.parse::<i64>().ok()
}

fn remove_if_exists(path: &Path) -> io::Result<()> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

fn remove_segment_files(dir: &Path, base_offset: i64) -> io::Result<()> {
    for suffix in [
        LOG_FILE_SUFFIX,
        INDEX_FILE_SUFFIX,
        TIME_INDEX_FILE_SUFFIX,
        TXN_INDEX_FILE_SUFFIX,
    ] {
        remove_if_exists(&segment_file_path(dir, base_offset, suffix))?;
    }
    Ok(())
}

/// Loads every segment of a partition directory. Stray temporary files and
/// index files without a `.log` are deleted. A segment is recovered (fully
/// scanned) if it may hold offsets >= `recovery_point`, if an index is
/// missing or corrupt, or if its tail fails validation; after the first
/// segment that had bytes cut, all later segments are deleted.
pub fn load_segments(
    dir: &Path,
    config: &LogConfig,
    recovery_point: i64,
    now_ms: i64,
) -> io::Result<(BTreeMap<i64, LogSegment>, RecoveryStats)> {
    let mut log_bases = BTreeSet::new();
    let mut index_files: Vec<(i64, PathBuf)> = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if !entry.file_type()?.is_file() {
            continue;
        }
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if STRAY_SUFFIXES.iter().any(|s| name.ends_with(s)) {
            log::info!("deleting stray file {}", entry.path().display());
            remove_if_exists(&entry.path())?;
        } else if let Some(base) = parse_segment_file_name(name, LOG_FILE_SUFFIX) {
            log_bases.insert(base);
        } else if let Some(base) = [
            INDEX_FILE_SUFFIX,
            TIME_INDEX_FILE_SUFFIX,
            TXN_INDEX_FILE_SUFFIX,
        ]
        .iter()
        .find_map(|s| parse_segment_file_name(name, s))
        {
            index_files.push((base, entry.path()));
        }
    }
    for (base, path) in index_files {
        if !log_bases.contains(&base) {
            log::info!("deleting orphaned index {}", path.display());
            remove_if_exists(&path)?;
        }
    }

    let bases: Vec<i64> = log_bases.into_iter().collect();
    let mut segments = BTreeMap::new();
    let mut stats = RecoveryStats::default();
    let mut scratch = vec![0u8; SCAN_BUFFER_BYTES];
    let mut cut = false;
    for (i, &base) in bases.iter().enumerate() {
        if cut {
            log::warn!("deleting segment {base} after a truncated segment");
            remove_segment_files(dir, base)?;
            continue;
        }
        let (mut seg, indexes_ok) = LogSegment::open_existing(dir, base, config, now_ms)?;
        let next_base = bases.get(i + 1).copied();
        // A later segment never needs recovery just because an earlier one
        // did: only its own offsets, indexes and tail decide.
        let mut needs_recovery = !indexes_ok || next_base.is_some_and(|nb| nb > recovery_point);
        if !needs_recovery {
            // Only the last segment can have an unflushed tail; check its CRCs.
            match seg.scan_tail(next_base.is_none()) {
                Ok(()) => needs_recovery = seg.next_offset() > recovery_point,
                Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                    log::warn!("segment {base} tail invalid: {e}");
                    needs_recovery = true;
                }
                Err(e) => return Err(e),
            }
        }
        if needs_recovery {
            stats.segments_scanned += 1;
            let (truncated, batches) = recover_segment(&mut seg, &mut scratch)?;
            stats.bytes_truncated += truncated;
            stats.batches_recovered += batches;
            cut = truncated > 0;
        }
        segments.insert(base, seg);
    }
    Ok((segments, stats))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varint_decoding_is_bounded() {
        assert_eq!(read_varint(&[0x00], 5), Some((0, 1)));
        assert_eq!(read_varint(&[0x01], 5), Some((-1, 1)));
        assert_eq!(read_varint(&[0x02], 5), Some((1, 1)));
        assert_eq!(read_varint(&[0xac, 0x02], 5), Some((150, 2)));
        assert_eq!(read_varint(&[0x80; 10], 5), None);
        assert_eq!(read_varint(&[], 5), None);
    }

    #[test]
    fn segment_names() {
        assert_eq!(
            parse_segment_file_name("00000000000000000042.log", ".log"),
            Some(42)
        );
        assert_eq!(
            parse_segment_file_name("00000000000000000042.index", ".log"),
            None
        );
        assert_eq!(parse_segment_file_name("x.log", ".log"), None);
        assert_eq!(parse_segment_file_name(".log", ".log"), None);
        assert_eq!(
            parse_segment_file_name("99999999999999999999.log", ".log"),
            None
        );
    }
}
