//! Tests of `Log`: appends, rolls, reads, indexes, timestamps, retention,
//! truncation, clean reopen and crash recovery.

use super::*;
use crate::log::batch::{
    BatchHeader, BatchIter, Compression, COMPRESSION_CODEC_MASK, TIMESTAMP_TYPE_MASK,
};
use crate::log::config::IoMode;
use crate::log::records::BatchBuilder;
use crate::log::segment::{
    segment_file_path, INDEX_FILE_SUFFIX, LOG_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX,
};
use crate::log::test_util::{append_info, build_batch, build_batch_with, TestRecord};
use std::cell::Cell;
use std::path::Path;

const NOW: i64 = 1_700_000_000_000;

thread_local! {
    /// The write path the current test runs with (each test has its thread).
    static MODE: Cell<IoMode> = const { Cell::new(IoMode::Buffered) };
}

fn run_in(mode: IoMode, test: fn()) {
    MODE.set(mode);
    test();
}

/// Kafka's defaults in the current test's I/O mode.
fn base_config() -> LogConfig {
    LogConfig {
        io_mode: MODE.get(),
        ..LogConfig::default()
    }
}

/// A fresh directory. Direct mode needs a filesystem with O_DIRECT, so it
/// uses the target dir (next to the test binary) rather than /tmp, which
/// may be tmpfs.
fn test_dir() -> tempfile::TempDir {
    match MODE.get() {
        IoMode::Buffered | IoMode::BufferedOffload => tempfile::tempdir().unwrap(),
        IoMode::Direct => {
            let exe = std::env::current_exe().unwrap();
            let parent = exe.parent().unwrap();
            tempfile::Builder::new()
                .prefix("kshard-direct-test-")
                .tempdir_in(parent)
                .unwrap()
        }
    }
}

/// Runs each listed test once per I/O mode: `buffered::name`, `direct::name`.
macro_rules! in_both_modes {
    ($($name:ident),* $(,)?) => {
        mod buffered {
            $(#[test] fn $name() { super::run_in(super::IoMode::Buffered, super::$name) })*
        }
        mod direct {
            $(#[test] fn $name() { super::run_in(super::IoMode::Direct, super::$name) })*
        }
    };
}

in_both_modes!(
    append_and_read_across_size_rolls,
    read_limits,
    reads_stay_within_one_segment,
    offset_index_follows_kafkas_interval_rule,
    rolls_when_index_is_full,
    rolls_by_segment_ms,
    time_index_and_offset_for_timestamp,
    timestamps_of_compressed_and_log_append_time_batches,
    retention_by_time_bytes_and_start_offset,
    delete_records_before_moves_start_offset,
    truncate_to_removes_tail_and_appends_continue,
    clean_close_reopens_without_scanning,
    recovery_cuts_half_written_batch,
    recovery_cuts_at_crc_mismatch,
    recovery_cuts_at_garbage_length,
    recovery_deletes_segments_after_a_bad_one,
    missing_or_corrupt_indexes_are_rebuilt,
    a_crashed_active_index_reads_as_its_entries,
    for_each_batch_from_visits_later_batches,
    flush_policies_move_the_recovery_point,
    patched_appends_store_what_in_place_appends_store,
);

#[path = "log_direct_tests.rs"]
mod direct_io;

#[path = "log_staging_tests.rs"]
mod staging;

#[path = "log_gap_tests.rs"]
mod gaps;

#[path = "log_create_tests.rs"]
mod create;

#[path = "log_delete_tests.rs"]
mod delete;

fn open(dir: &Path, config: LogConfig, recovery_point: i64) -> (Log, RecoveryStats) {
    Log::open(dir, config, recovery_point, 0, NOW).unwrap()
}

/// Appends one batch of `count` records stamped `ts..` at the log end.
fn append(log: &mut Log, count: usize, ts: i64, value_bytes: usize) -> (Vec<u8>, Option<i64>) {
    let batch = build_batch(log.log_end_offset(), count, ts, value_bytes);
    let rolled = log.append(&batch, &append_info(&batch), NOW).unwrap();
    (batch, rolled)
}

/// A produce's two ways into the log, over size rolls: the request's
/// batch validated in place (offsets written into a copy) and appended, or
/// kept as sent with its new header beside it (`append_patched`). Both
/// logs hold the same bytes and find the same offsets.
fn patched_appends_store_what_in_place_appends_store() {
    use crate::log::patched::PatchedRecords;
    use crate::log::validate::{ValidationConfig, Validator};
    let (dir_a, dir_b) = (test_dir(), test_dir());
    let (mut in_place, _) = open(dir_a.path(), small_config(), 0);
    let (mut patched, _) = open(dir_b.path(), small_config(), 0);
    let cfg = ValidationConfig::default();
    let mut validator = Validator::new();
    for i in 0..40 {
        // As a producer sends it: base offset 0.
        let request = bytes::Bytes::from(build_batch(0, 1 + i % 5, NOW + i as i64, 300));
        let next = in_place.log_end_offset();
        assert_eq!(patched.log_end_offset(), next);
        let mut copy = request.to_vec();
        let info = validator
            .validate_and_assign_offsets(&mut copy, next, 3, NOW, &cfg)
            .unwrap();
        in_place.append(&copy, &info, NOW).unwrap();
        let mut new_headers = Vec::new();
        let info = validator
            .validate_and_patch_headers(&request, next, 3, NOW, &cfg, &mut new_headers)
            .unwrap();
        let records = PatchedRecords::new(request.clone(), new_headers);
        patched.append_patched(&records, &info, NOW).unwrap();
        assert_eq!(records.to_vec(), copy);
    }
    assert!(patched.segments().count() > 1, "the appends rolled");
    assert_eq!(
        patched
            .segments()
            .map(|s| s.base_offset())
            .collect::<Vec<_>>(),
        in_place
            .segments()
            .map(|s| s.base_offset())
            .collect::<Vec<_>>()
    );
    for offset in 0..in_place.log_end_offset() {
        assert_eq!(
            read_all(&patched, offset),
            read_all(&in_place, offset),
            "at {offset}"
        );
    }
}

fn read_all(log: &Log, offset: i64) -> Vec<u8> {
    let info = log.read(offset, u32::MAX, i64::MAX, true).unwrap();
    info.slice
        .map(|s| read_slice_bytes(&s).unwrap())
        .unwrap_or_default()
}

fn headers(bytes: &[u8]) -> Vec<BatchHeader> {
    BatchIter::new(bytes).map(|b| b.unwrap().1).collect()
}

fn small_config() -> LogConfig {
    LogConfig {
        segment_bytes: 4096,
        index_interval_bytes: 512,
        ..base_config()
    }
}

fn append_and_read_across_size_rolls() {
    let dir = test_dir();
    let (mut log, stats) = open(dir.path(), small_config(), 0);
    assert_eq!(stats, RecoveryStats::default());
    let mut batches = Vec::new();
    let mut rolls = Vec::new();
    for i in 0..40 {
        let (b, rolled) = append(&mut log, 5, NOW + i, 100);
        batches.push(b);
        rolls.extend(rolled);
    }
    assert_eq!(log.log_end_offset(), 200);
    assert_eq!(log.segment_count(), rolls.len() + 1);
    assert!(rolls.len() >= 5, "rolled {} times", rolls.len());
    for (base, next) in log
        .segment_base_offsets()
        .iter()
        .zip(log.segment_base_offsets().iter().skip(1))
    {
        assert!(log.segments[base].size_bytes() <= 4096);
        assert!(segment_file_path(dir.path(), *base, LOG_FILE_SUFFIX).exists());
        assert_eq!(log.segments[base].next_offset(), *next);
    }
    assert!(dir.path().join("00000000000000000000.log").exists());
    // Every offset reads back the batch that holds it, whole.
    for offset in 0..200 {
        let info = log.read(offset, 1, i64::MAX, true).unwrap();
        let bytes = read_slice_bytes(&info.slice.unwrap()).unwrap();
        assert_eq!(bytes, batches[(offset / 5) as usize], "offset {offset}");
        assert_eq!(info.first_batch_base_offset, offset / 5 * 5);
    }
    assert_eq!(
        log.size_bytes(),
        batches.iter().map(|b| b.len() as u64).sum::<u64>()
    );
}

fn read_limits() {
    let dir = test_dir();
    let (mut log, _) = open(dir.path(), base_config(), 0);
    let mut batches = Vec::new();
    for i in 0..10 {
        batches.push(append(&mut log, 4, NOW + i, 50).0);
    }
    let size = batches[0].len() as u32;
    // One segment: whole batches only, never a partial one.
    let info = log.read(0, size * 2 + size / 2, i64::MAX, false).unwrap();
    let bytes = read_slice_bytes(&info.slice.unwrap()).unwrap();
    assert_eq!(headers(&bytes).len(), 2);
    assert_eq!(bytes, [batches[0].clone(), batches[1].clone()].concat());
    // Kafka's size of that read counts the partial third batch.
    assert_eq!(info.read_size, size * 2 + size / 2);
    // Too small: nothing, unless min_one_batch.
    let info = log.read(5, size - 1, i64::MAX, false).unwrap();
    assert!(info.slice.is_none());
    assert_eq!(info.first_batch_base_offset, 4);
    assert_eq!(info.read_size, size - 1);
    let info = log.read(5, size - 1, i64::MAX, true).unwrap();
    assert_eq!(info.read_size, size);
    assert_eq!(read_slice_bytes(&info.slice.unwrap()).unwrap(), batches[1]);
    let info = log.read(5, 0, i64::MAX, true).unwrap();
    assert_eq!(info.read_size, size);
    assert_eq!(info.slice.unwrap().len, size);
    // Everything up to the end: whole batches, Kafka's size the same.
    let info = log.read(0, u32::MAX, i64::MAX, false).unwrap();
    assert_eq!(info.read_size, size * 10);
    // DelayedFetch's measure: from the batch holding 5 to 12 and to the end.
    assert_eq!(log.bytes_between(5, 12).unwrap(), Some(size as u64 * 2));
    assert_eq!(log.bytes_between(0, 40).unwrap(), Some(size as u64 * 10));
    // The max offset (high watermark) excludes batches starting at or after it.
    let info = log.read(0, u32::MAX, 12, true).unwrap();
    assert_eq!(
        headers(&read_slice_bytes(&info.slice.unwrap()).unwrap()).len(),
        3
    );
    let info = log.read(0, u32::MAX, 13, true).unwrap();
    assert_eq!(
        headers(&read_slice_bytes(&info.slice.unwrap()).unwrap()).len(),
        4
    );
    let info = log.read(12, u32::MAX, 12, true).unwrap();
    assert!(info.slice.is_none());
    let info = log.read(13, u32::MAX, 12, true).unwrap();
    assert!(info.slice.is_none(), "the batch holding 13 starts at 12");
    // Exactly at the end; past the end; below the start.
    let info = log.read(40, u32::MAX, i64::MAX, true).unwrap();
    assert!(info.slice.is_none());
    assert_eq!(info.first_batch_base_offset, -1);
    assert!(matches!(
        log.read(41, 100, i64::MAX, true),
        Err(ReadError::OffsetOutOfRange {
            log_start_offset: 0,
            log_end_offset: 40
        })
    ));
    log.delete_records_before(8).unwrap();
    assert!(matches!(
        log.read(7, 100, i64::MAX, true),
        Err(ReadError::OffsetOutOfRange { .. })
    ));
    assert_eq!(read_all(&log, 8).len(), size as usize * 8);
}

fn reads_stay_within_one_segment() {
    let dir = test_dir();
    let (mut log, _) = open(dir.path(), small_config(), 0);
    while log.segment_count() < 3 {
        append(&mut log, 5, NOW, 100);
    }
    let second = log.segment_base_offsets()[1];
    let bytes = read_all(&log, 0);
    let hs = headers(&bytes);
    assert_eq!(hs.last().unwrap().last_offset() + 1, second);
    assert_eq!(
        headers(&read_all(&log, second))
            .first()
            .unwrap()
            .base_offset,
        second
    );
}

fn offset_index_follows_kafkas_interval_rule() {
    let dir = test_dir();
    let config = LogConfig {
        index_interval_bytes: 1000,
        ..base_config()
    };
    let (mut log, _) = open(dir.path(), config, 0);
    // Expected entries computed independently: check before adding the size.
    let mut expected = Vec::new();
    let (mut since, mut pos) = (0u64, 0u64);
    for i in 0..50 {
        let (b, _) = append(&mut log, 3, NOW + i, 30 + (i as usize % 7) * 40);
        let h = headers(&b)[0];
        if since > 1000 {
            expected.push((h.last_offset(), pos as u32));
            since = 0;
        }
        pos += b.len() as u64;
        since += b.len() as u64;
    }
    let seg = log.segment_for(0).unwrap();
    let idx = seg.offset_index();
    let got: Vec<(i64, u32)> = (0..idx.entries())
        .map(|n| (idx.entry(n).offset, idx.entry(n).position))
        .collect();
    assert_eq!(got, expected);
    assert!(expected.len() > 5);
    // Every lookup lands at or before the batch holding the offset.
    for offset in 0..150 {
        let (pos, h) = seg.translate_offset(offset).unwrap().unwrap();
        assert!(h.base_offset <= offset && offset <= h.last_offset());
        assert!(idx.lookup(offset).position as u64 <= pos);
    }
    // On disk without a flush once the entries queued by the appends are
    // shipped (the broker's shipper does it every few ms) and written, as
    // Kafka's mapped index: Kafka's 8-byte big-endian entries, then the
    // preallocated (zero) rest of the file.
    crate::log::index_file::ship_queued_writes();
    crate::log::index_file::wait_for_landed();
    let index_path = segment_file_path(dir.path(), 0, INDEX_FILE_SUFFIX);
    let raw = std::fs::read(&index_path).unwrap();
    assert_eq!(raw.len(), base_config().max_index_size_bytes as usize);
    let (off, pos) = expected[0];
    assert_eq!(&raw[..4], &(off as i32).to_be_bytes());
    assert_eq!(&raw[4..8], &(pos as i32).to_be_bytes());
    let (last_off, last_pos) = expected[expected.len() - 1];
    let last_at = (expected.len() - 1) * 8;
    assert_eq!(&raw[last_at..last_at + 4], &(last_off as i32).to_be_bytes());
    assert_eq!(
        &raw[last_at + 4..last_at + 8],
        &(last_pos as i32).to_be_bytes()
    );
    assert!(raw[expected.len() * 8..].iter().all(|&b| b == 0));
    // Closed, the index is trimmed to exactly its entries.
    log.close().unwrap();
    let raw = std::fs::read(&index_path).unwrap();
    assert_eq!(raw.len(), expected.len() * 8);
}

fn rolls_when_index_is_full() {
    let dir = test_dir();
    let config = LogConfig {
        index_interval_bytes: 1,
        max_index_size_bytes: 24, // 3 offset entries, 2 time entries
        ..base_config()
    };
    let (mut log, _) = open(dir.path(), config, 0);
    for i in 0..12 {
        append(&mut log, 1, NOW + i, 10);
    }
    // Batch 0 is never indexed, batches 1 and 2 fill the time index.
    assert_eq!(log.segment_base_offsets(), vec![0, 3, 6, 9]);
    for offset in 0..12 {
        assert_eq!(headers(&read_all(&log, offset))[0].base_offset, offset);
    }
}

fn rolls_by_segment_ms() {
    let dir = test_dir();
    let config = LogConfig {
        segment_ms: 1000,
        ..base_config()
    };
    let (mut log, _) = open(dir.path(), config, 0);
    assert_eq!(append(&mut log, 2, NOW, 10).1, None);
    assert_eq!(
        append(&mut log, 2, NOW + 1000, 10).1,
        None,
        "not more than segment.ms yet"
    );
    assert_eq!(append(&mut log, 2, NOW + 1001, 10).1, Some(4));
    // Without timestamps the wall clock since creation counts.
    let rec = [TestRecord {
        timestamp: -1,
        value: vec![1],
    }];
    let b = build_batch_with(6, 0, &rec);
    assert_eq!(log.append(&b, &append_info(&b), NOW + 500).unwrap(), None);
    let dir2 = test_dir();
    let (mut log2, _) = open(
        dir2.path(),
        LogConfig {
            segment_ms: 1000,
            ..base_config()
        },
        0,
    );
    let b = build_batch_with(0, 0, &rec);
    log2.append(&b, &append_info(&b), NOW).unwrap();
    let b = build_batch_with(1, 0, &rec);
    assert_eq!(
        log2.append(&b, &append_info(&b), NOW + 1001).unwrap(),
        Some(1)
    );
}

fn time_index_and_offset_for_timestamp() {
    let dir = test_dir();
    let config = LogConfig {
        index_interval_bytes: 200,
        segment_bytes: 3000,
        ..base_config()
    };
    let (mut log, _) = open(dir.path(), config, 0);
    // Batch i holds offsets 10i..10i+9 with timestamps 1000*i + 10*j.
    for i in 0..30i64 {
        let recs: Vec<TestRecord> = (0..10)
            .map(|j| TestRecord {
                timestamp: 1000 * i + 10 * j,
                value: vec![0; 20],
            })
            .collect();
        let b = build_batch_with(log.log_end_offset(), 0, &recs);
        log.append(&b, &append_info(&b), NOW).unwrap();
    }
    assert!(log.segment_count() > 2);
    assert_eq!(log.offset_for_timestamp(0).unwrap(), Some((0, 0)));
    assert_eq!(log.offset_for_timestamp(1).unwrap(), Some((1, 10)));
    assert_eq!(log.offset_for_timestamp(5030).unwrap(), Some((53, 5030)));
    assert_eq!(log.offset_for_timestamp(5031).unwrap(), Some((54, 5040)));
    assert_eq!(log.offset_for_timestamp(5091).unwrap(), Some((60, 6000)));
    assert_eq!(
        log.offset_for_timestamp(29_090).unwrap(),
        Some((299, 29_090))
    );
    assert_eq!(log.offset_for_timestamp(29_091).unwrap(), None);
    for ts in (0..29_090).step_by(337) {
        let (offset, found_ts) = log.offset_for_timestamp(ts).unwrap().unwrap();
        assert!(
            found_ts >= ts && found_ts - ts < 1000,
            "ts {ts} -> {found_ts}"
        );
        assert_eq!(found_ts, (offset / 10) * 1000 + (offset % 10) * 10);
    }
    assert_eq!(log.offset_of_max_timestamp().unwrap(), Some((299, 29_090)));
    // The time index holds increasing timestamps; rolled segments end with their max.
    let first = log.segment_for(0).unwrap();
    let ti = first.time_index();
    assert!(ti.entries() > 0);
    assert_eq!(ti.last_entry().timestamp, first.max_timestamp_so_far());
    // The start offset bounds the search.
    log.delete_records_before(55).unwrap();
    assert_eq!(log.offset_for_timestamp(5000).unwrap(), Some((55, 5050)));
}

fn timestamps_of_compressed_and_log_append_time_batches() {
    let dir = test_dir();
    let (mut log, _) = open(dir.path(), base_config(), 0);
    let recs = |base: i64| -> Vec<TestRecord> {
        (0..5)
            .map(|j| TestRecord {
                timestamp: base + [3, 9, 1, 9, 2][j],
                value: vec![7],
            })
            .collect()
    };
    for (attrs, base_ts) in [
        (0i16, 100i64),
        (1 & COMPRESSION_CODEC_MASK, 200),
        (TIMESTAMP_TYPE_MASK, 300),
    ] {
        let b = if attrs & COMPRESSION_CODEC_MASK != 0 {
            // A real gzip batch: the lookup decompresses it.
            let mut builder =
                BatchBuilder::new(log.log_end_offset()).compression(Compression::Gzip);
            for r in recs(base_ts) {
                builder.push(r.timestamp, None, Some(&r.value), &[]);
            }
            builder.build()
        } else {
            build_batch_with(log.log_end_offset(), attrs, &recs(base_ts))
        };
        log.append(&b, &append_info(&b), NOW).unwrap();
    }
    // CreateTime, compressed or not: record level (Kafka iterates the
    // records). LogAppendTime: every record carries the batch max.
    assert_eq!(log.offset_for_timestamp(104).unwrap(), Some((1, 109)));
    assert_eq!(log.offset_for_timestamp(150).unwrap(), Some((5, 203)));
    assert_eq!(log.offset_for_timestamp(205).unwrap(), Some((6, 209)));
    assert_eq!(log.offset_for_timestamp(250).unwrap(), Some((10, 309)));
    assert_eq!(log.offset_of_max_timestamp().unwrap(), Some((10, 309)));
    let dir2 = test_dir();
    let (mut log2, _) = open(dir2.path(), base_config(), 0);
    let b = build_batch_with(0, 0, &recs(100));
    log2.append(&b, &append_info(&b), NOW).unwrap();
    assert_eq!(
        log2.offset_of_max_timestamp().unwrap(),
        Some((1, 109)),
        "first record with the max"
    );
    let dir3 = test_dir();
    let (log3, _) = open(dir3.path(), base_config(), 0);
    assert_eq!(log3.offset_of_max_timestamp().unwrap(), None);
    assert_eq!(log3.offset_for_timestamp(0).unwrap(), None);
}

fn retention_by_time_bytes_and_start_offset() {
    let dir = test_dir();
    let config = LogConfig {
        segment_bytes: 2000,
        retention_ms: 10_000,
        ..base_config()
    };
    let (mut log, _) = open(dir.path(), config.clone(), 0);
    for i in 0..30 {
        // Old data first, then recent data.
        let ts = if i < 15 { NOW - 60_000 } else { NOW };
        append(&mut log, 4, ts, 80);
    }
    let segments_before = log.segment_count();
    let freed = log.delete_old_segments(NOW).unwrap();
    assert!(freed > 0);
    assert!(log.segment_count() < segments_before);
    let first = log.segment_base_offsets()[0];
    assert_eq!(log.log_start_offset(), first);
    assert!(first <= 60, "segments holding recent data stay");
    assert!(!segment_file_path(dir.path(), 0, LOG_FILE_SUFFIX).exists());
    assert_eq!(log.delete_old_segments(NOW).unwrap(), 0);
    // By bytes: keep deleting whole segments while over the limit by one.
    let mut c = config.clone();
    c.retention_ms = -1;
    c.retention_bytes = 3000;
    log.set_config(c);
    log.delete_old_segments(NOW).unwrap();
    assert!(log.size_bytes() <= 3000 + 2000);
    let sizes: Vec<u64> = log.segments.values().map(|s| s.size_bytes()).collect();
    assert!(
        log.size_bytes() - sizes[0] < 3000,
        "one more segment would go under the limit"
    );
    // Never the active segment.
    let mut c = config;
    c.retention_ms = 0;
    log.set_config(c);
    log.delete_old_segments(NOW + 1_000_000).unwrap();
    assert_eq!(log.segment_count(), 1);
    assert_eq!(log.log_start_offset(), log.segment_base_offsets()[0]);
}

fn delete_records_before_moves_start_offset() {
    let dir = test_dir();
    let (mut log, _) = open(dir.path(), small_config(), 0);
    for _ in 0..30 {
        append(&mut log, 5, NOW, 100);
    }
    let bases = log.segment_base_offsets();
    let target = bases[2] + 3;
    assert_eq!(log.delete_records_before(target).unwrap(), target);
    assert_eq!(log.segment_base_offsets()[0], bases[2]);
    assert_eq!(log.log_start_offset(), target);
    assert_eq!(
        log.delete_records_before(1).unwrap(),
        target,
        "never backwards"
    );
    assert!(log.delete_records_before(151).is_err());
    assert_eq!(log.delete_records_before(150).unwrap(), 150);
    assert_eq!(log.segment_count(), 1);
    // The retention pass also drops segments below the start offset.
    let (_, rolled) = append(&mut log, 5, NOW, 100);
    assert!(rolled.is_none() || log.segment_count() == 2);
}

fn truncate_to_removes_tail_and_appends_continue() {
    let dir = test_dir();
    let (mut log, _) = open(dir.path(), small_config(), 0);
    for i in 0..30 {
        append(&mut log, 5, NOW + i, 100);
    }
    let bases = log.segment_base_offsets();
    log.truncate_to(bases[2] + 7).unwrap();
    // The batch holding the target goes whole.
    assert_eq!(log.log_end_offset(), bases[2] + 5);
    assert_eq!(*log.segment_base_offsets().last().unwrap(), bases[2]);
    assert!(!segment_file_path(dir.path(), bases[3], LOG_FILE_SUFFIX).exists());
    let idx = log.active().offset_index();
    assert!(idx.last_entry().is_none_or(|e| e.offset < bases[2] + 5));
    append(&mut log, 5, NOW, 100);
    assert_eq!(log.log_end_offset(), bases[2] + 10);
    assert_eq!(
        headers(&read_all(&log, bases[2] + 5))[0].base_offset,
        bases[2] + 5
    );
    // At a segment's base the segment stays, empty.
    log.truncate_to(bases[1]).unwrap();
    assert_eq!(log.log_end_offset(), bases[1]);
    assert_eq!(log.segment_count(), 2);
    log.truncate_to(1000).unwrap();
    assert_eq!(log.log_end_offset(), bases[1]);
    // Below the first segment: start over.
    log.delete_records_before(bases[1]).unwrap();
    log.truncate_to(2).unwrap();
    assert_eq!(
        (
            log.log_start_offset(),
            log.log_end_offset(),
            log.segment_count()
        ),
        (2, 2, 1)
    );
}

fn clean_close_reopens_without_scanning() {
    let dir = test_dir();
    let (mut log, _) = open(dir.path(), small_config(), 0);
    for i in 0..40 {
        append(&mut log, 5, NOW + i, 100);
    }
    let before = read_all(&log, 0);
    let bases = log.segment_base_offsets();
    let leo = log.log_end_offset();
    let size = log.size_bytes();
    log.close().unwrap();
    let active_index = std::fs::read(segment_file_path(
        dir.path(),
        bases[bases.len() - 1],
        TIME_INDEX_FILE_SUFFIX,
    ))
    .unwrap();
    assert_eq!(active_index.len() % 12, 0);
    assert!(
        !active_index.is_empty(),
        "close writes the max-timestamp entry"
    );
    let (mut log, stats) = open(dir.path(), small_config(), leo);
    assert_eq!(stats.segments_scanned, 0);
    assert_eq!(log.log_end_offset(), leo);
    assert_eq!(log.recovery_point(), leo);
    assert_eq!(log.segment_base_offsets(), bases);
    assert_eq!(log.size_bytes(), size);
    assert_eq!(read_all(&log, 0), before);
    assert_eq!(
        log.offset_of_max_timestamp().unwrap(),
        Some((leo - 1, NOW + 39 + 4))
    );
    append(&mut log, 5, NOW, 100);
    assert_eq!(log.log_end_offset(), leo + 5);
    // An older recovery point rescans from the segment holding it.
    log.close().unwrap();
    let (log, stats) = open(dir.path(), small_config(), bases[bases.len() - 2] + 1);
    assert_eq!(stats.segments_scanned, 2);
    assert_eq!(stats.bytes_truncated, 0);
    assert_eq!(log.log_end_offset(), leo + 5);
}

/// Writes `n` batches over several segments and closes the log.
fn write_log(dir: &Path, n: usize) -> (Vec<i64>, i64) {
    let (mut log, _) = open(dir, small_config(), 0);
    for i in 0..n {
        append(&mut log, 5, NOW + i as i64, 100);
    }
    let bases = log.segment_base_offsets();
    let leo = log.log_end_offset();
    log.close().unwrap();
    (bases, leo)
}

/// Size of the batches `append(log, 5, _, 100)` writes.
fn batch_bytes() -> usize {
    build_batch(0, 5, NOW, 100).len()
}

fn corrupt_and_recover(
    damage: impl FnOnce(&Path, &[u8]) -> Vec<u8>,
    expect_leo: impl FnOnce(i64) -> i64,
) {
    let dir = test_dir();
    let (bases, leo) = write_log(dir.path(), 40);
    let active = *bases.last().unwrap();
    let path = segment_file_path(dir.path(), active, LOG_FILE_SUFFIX);
    let original = std::fs::read(&path).unwrap();
    let damaged = damage(&path, &original);
    std::fs::write(&path, &damaged).unwrap();
    let (mut log, stats) = open(dir.path(), small_config(), active);
    assert_eq!(stats.segments_scanned, 1);
    assert!(stats.bytes_truncated > 0);
    let want = expect_leo(leo);
    assert_eq!(log.log_end_offset(), want);
    let b = batch_bytes() as u64;
    assert_eq!(
        std::fs::metadata(&path).unwrap().len(),
        original.len() as u64 - (leo - want) as u64 / 5 * b
    );
    assert_eq!(
        read_all(&log, active).len() as u64,
        (want - active) as u64 / 5 * b
    );
    append(&mut log, 5, NOW, 100);
    assert_eq!(log.log_end_offset(), want + 5);
    assert_eq!(headers(&read_all(&log, want))[0].base_offset, want);
}

fn recovery_cuts_half_written_batch() {
    corrupt_and_recover(|_, orig| orig[..orig.len() - 50].to_vec(), |leo| leo - 5);
}

fn recovery_cuts_at_crc_mismatch() {
    corrupt_and_recover(
        |_, orig| {
            let mut d = orig.to_vec();
            let at = d.len() - 2 * batch_bytes() + 70; // inside the second-to-last batch's records
            d[at] ^= 0x40;
            d
        },
        |leo| leo - 10,
    );
}

fn recovery_cuts_at_garbage_length() {
    corrupt_and_recover(
        |_, orig| {
            let mut d = orig.to_vec();
            let at = d.len() - 3 * batch_bytes() + 8; // the length field of the third-to-last batch
            d[at..at + 4].copy_from_slice(&0x7fff_fff0i32.to_be_bytes());
            d
        },
        |leo| leo - 15,
    );
}

fn recovery_deletes_segments_after_a_bad_one() {
    let dir = test_dir();
    let (bases, _) = write_log(dir.path(), 40);
    let victim = bases[bases.len() - 3];
    let path = segment_file_path(dir.path(), victim, LOG_FILE_SUFFIX);
    let mut data = std::fs::read(&path).unwrap();
    let at = data.len() - batch_bytes() + 64;
    data[at] ^= 1;
    std::fs::write(&path, &data).unwrap();
    std::fs::write(dir.path().join("00000000000000000010.log.deleted"), b"x").unwrap();
    std::fs::write(dir.path().join("00000000000000099999.index"), b"").unwrap();
    let (log, stats) = open(dir.path(), small_config(), victim);
    assert_eq!(stats.segments_scanned, 1);
    assert_eq!(stats.bytes_truncated, batch_bytes() as u64);
    assert_eq!(*log.segment_base_offsets().last().unwrap(), victim);
    assert_eq!(log.log_end_offset(), bases[bases.len() - 2] - 5);
    for base in &bases[bases.len() - 2..] {
        assert!(!segment_file_path(dir.path(), *base, LOG_FILE_SUFFIX).exists());
        assert!(!segment_file_path(dir.path(), *base, INDEX_FILE_SUFFIX).exists());
    }
    assert!(!dir.path().join("00000000000000000010.log.deleted").exists());
    assert!(!dir.path().join("00000000000000099999.index").exists());
}

fn missing_or_corrupt_indexes_are_rebuilt() {
    let dir = test_dir();
    let (bases, leo) = write_log(dir.path(), 40);
    let read = |b: i64, s: &str| std::fs::read(segment_file_path(dir.path(), b, s)).unwrap();
    let idx1 = read(bases[1], INDEX_FILE_SUFFIX);
    let tidx1 = read(bases[1], TIME_INDEX_FILE_SUFFIX);
    let idx2 = read(bases[2], INDEX_FILE_SUFFIX);
    assert!(!idx1.is_empty());
    std::fs::remove_file(segment_file_path(dir.path(), bases[1], INDEX_FILE_SUFFIX)).unwrap();
    std::fs::remove_file(segment_file_path(
        dir.path(),
        bases[1],
        TIME_INDEX_FILE_SUFFIX,
    ))
    .unwrap();
    std::fs::write(
        segment_file_path(dir.path(), bases[2], INDEX_FILE_SUFFIX),
        vec![0u8; 16],
    )
    .unwrap();
    let (log, stats) = open(dir.path(), small_config(), leo);
    assert_eq!(stats.segments_scanned, 2);
    assert_eq!(stats.bytes_truncated, 0);
    assert_eq!(log.log_end_offset(), leo);
    log.close().unwrap();
    // Recovery indexes with its own rule (position distance), so entries may
    // differ from the append-time ones; they must be valid and sorted.
    let rebuilt = read(bases[1], INDEX_FILE_SUFFIX);
    assert!(!rebuilt.is_empty() && rebuilt.len() % 8 == 0);
    assert_eq!(read(bases[1], TIME_INDEX_FILE_SUFFIX).len() % 12, 0);
    assert!(!tidx1.is_empty());
    assert!(!read(bases[2], INDEX_FILE_SUFFIX).is_empty() && idx2.len() % 8 == 0);
    let (log, stats) = open(dir.path(), small_config(), leo);
    assert_eq!(stats.segments_scanned, 0);
    for offset in (0..leo).step_by(7) {
        assert_eq!(
            headers(&read_all(&log, offset))[0].base_offset,
            offset / 5 * 5
        );
    }
}

fn for_each_batch_from_visits_later_batches() {
    let dir = test_dir();
    let (mut log, _) = open(dir.path(), small_config(), 0);
    for _ in 0..30 {
        append(&mut log, 5, NOW, 100);
    }
    let mut seen = Vec::new();
    log.for_each_batch_from(42, |h, _| seen.push(h.base_offset))
        .unwrap();
    assert_eq!(seen, (40..150).step_by(5).collect::<Vec<i64>>());
    seen.clear();
    log.for_each_batch_from(0, |h, _| seen.push(h.base_offset))
        .unwrap();
    assert_eq!(seen.len(), 30);
    seen.clear();
    log.for_each_batch_from(150, |h, _| seen.push(h.base_offset))
        .unwrap();
    assert!(seen.is_empty());
}

fn flush_policies_move_the_recovery_point() {
    let dir = test_dir();
    let config = LogConfig {
        flush_interval_messages: 10,
        flush_interval_ms: 1000,
        ..base_config()
    };
    let (mut log, _) = open(dir.path(), config, 0);
    append(&mut log, 5, NOW, 10);
    assert_eq!(log.recovery_point(), 0);
    append(&mut log, 5, NOW, 10);
    assert_eq!(log.recovery_point(), 10);
    append(&mut log, 5, NOW, 10);
    assert!(!log.maybe_flush(NOW + 500).unwrap());
    assert!(log.maybe_flush(NOW + 1000).unwrap());
    assert_eq!(log.recovery_point(), 15);
    assert!(!log.maybe_flush(NOW + 5000).unwrap(), "nothing to flush");
    let before = log.recovery_point();
    let new_base = log.roll(NOW).unwrap();
    assert_eq!(new_base, 15);
    assert_eq!(
        log.roll(NOW).unwrap(),
        15,
        "rolling an empty segment is a no-op"
    );
    assert!(log.recovery_point() >= before);
    log.delete().unwrap();
    assert!(!dir.path().exists());
}

/// An append whose first offset is not the log end offset is a caller's
/// bug (see `check_append_shape`): it panics before touching the log.
fn append_off_the_log_end() {
    let dir = test_dir();
    let (mut log, _) = open(dir.path(), base_config(), 0);
    let b = build_batch(5, 1, NOW, 10);
    let _ = log.append(&b, &append_info(&b), NOW);
}

/// So is an append whose bytes are not the ones validation described.
fn append_of_other_bytes() {
    let dir = test_dir();
    let (mut log, _) = open(dir.path(), base_config(), 0);
    let b = build_batch(0, 1, NOW, 10);
    let mut info = append_info(&b);
    info.valid_bytes += 1;
    let _ = log.append(&b, &info, NOW);
}

#[test]
#[should_panic(expected = "append at offset 5 but the next offset is 0")]
fn buffered_append_off_the_log_end_is_a_bug() {
    run_in(IoMode::Buffered, append_off_the_log_end);
}

#[test]
#[should_panic(expected = "append at offset 5 but the next offset is 0")]
fn direct_append_off_the_log_end_is_a_bug() {
    run_in(IoMode::Direct, append_off_the_log_end);
}

#[test]
#[should_panic(expected = "bad append")]
fn buffered_append_of_other_bytes_is_a_bug() {
    run_in(IoMode::Buffered, append_of_other_bytes);
}

#[test]
#[should_panic(expected = "bad append")]
fn direct_append_of_other_bytes_is_a_bug() {
    run_in(IoMode::Direct, append_of_other_bytes);
}

#[path = "log_roll_sync_tests.rs"]
mod roll_sync;

/// Killed after a flush: the active segment's mapped index is still
/// preallocated on disk; reopening reads its entries (no rebuild, no scan)
/// and trims the zero tail.
fn a_crashed_active_index_reads_as_its_entries() {
    let dir = test_dir();
    let (mut log, _) = open(dir.path(), base_config(), 0);
    for i in 0..40 {
        append(&mut log, 3, NOW + i, 200 + (i as usize % 5) * 50);
    }
    let before: Vec<(i64, u32)> = {
        let idx = log.segment_for(0).unwrap().offset_index();
        (0..idx.entries())
            .map(|n| (idx.entry(n).offset, idx.entry(n).position))
            .collect()
    };
    assert!(before.len() > 3);
    log.flush().unwrap();
    let leo = log.log_end_offset();
    drop(log);
    let index_path = segment_file_path(dir.path(), 0, INDEX_FILE_SUFFIX);
    let on_disk = std::fs::metadata(&index_path).unwrap().len();
    assert_eq!(on_disk, base_config().max_index_size_bytes as u64);
    let (log, stats) = open(dir.path(), base_config(), leo);
    assert_eq!(stats.segments_scanned, 0);
    let idx = log.segment_for(0).unwrap().offset_index();
    let after: Vec<(i64, u32)> = (0..idx.entries())
        .map(|n| (idx.entry(n).offset, idx.entry(n).position))
        .collect();
    assert_eq!(after, before);
    log.close().unwrap();
    let on_disk = std::fs::metadata(&index_path).unwrap().len();
    assert_eq!(on_disk, before.len() as u64 * 8);
}
