use super::*;
use crate::log::batch::{verify_crc, BatchIter, Compression, DELETE_HORIZON_FLAG_MASK};
use crate::log::checkpoint::{OffsetCheckpointFile, CLEANER_OFFSET_CHECKPOINT_FILE};
use crate::log::config::LogConfig;
use crate::log::producer_state::ProducerStateManager;
use crate::log::records::{decompress, BatchBuilder, RecordIter};
use crate::log::test_util::append_info;
use crate::log::{read_slice_bytes, Log};

const T0: i64 = 1_700_000_000_000;

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 16 * 1024,
        compact: true,
        delete: false,
        delete_retention_ms: 1_000,
        min_cleanable_dirty_ratio: 0.0,
        index_interval_bytes: 1024,
        ..LogConfig::default()
    }
}

fn cleaner() -> LogCleaner {
    LogCleaner::new(CleanerConfig {
        dedupe_buffer_bytes: 1024 * 1024,
        step_bytes: 32 * 1024,
    })
}

fn no_producers(_: i64) -> Option<LastRecord> {
    None
}

type Kv = (Vec<u8>, Option<Vec<u8>>);
/// (offset, key, value).
type Rec = (i64, Vec<u8>, Option<Vec<u8>>);

fn kv(k: &str, v: Option<&str>) -> Kv {
    (k.as_bytes().to_vec(), v.map(|v| v.as_bytes().to_vec()))
}

/// Appends one batch of `records` at the log end; returns its base offset.
fn append(log: &mut Log, records: &[Kv], codec: Compression, ts: i64) -> i64 {
    append_with(
        log,
        BatchBuilder::new(log.log_end_offset()).compression(codec),
        records,
        ts,
    )
}

fn append_with(log: &mut Log, mut b: BatchBuilder, records: &[Kv], ts: i64) -> i64 {
    let base = log.log_end_offset();
    for (k, v) in records {
        b.push(ts, Some(k), v.as_deref(), &[]);
    }
    let bytes = b.build();
    log.append(&bytes, &append_info(&bytes), ts).unwrap();
    base
}

/// (offset, key, value) of every record from the log start, via Log::read;
/// every batch's CRC is checked. Also returns the batch headers.
fn read_all(log: &Log) -> (Vec<Rec>, Vec<BatchHeader>) {
    let mut out = Vec::new();
    let mut headers = Vec::new();
    let mut next = log.log_start_offset();
    let mut scratch = Vec::new();
    while next < log.log_end_offset() {
        let info = log.read(next, 1 << 20, i64::MAX, true).unwrap();
        let Some(slice) = info.slice else { break };
        let bytes = read_slice_bytes(&slice).unwrap();
        for b in BatchIter::new(&bytes) {
            let (_, h, raw) = b.unwrap();
            verify_crc(raw).unwrap();
            decompress(h.compression().unwrap(), &raw[61..], &mut scratch, 64 << 20).unwrap();
            for r in RecordIter::new(&scratch) {
                let r = r.unwrap();
                out.push((
                    h.base_offset + r.offset_delta as i64,
                    r.key.unwrap_or_default().to_vec(),
                    r.value.map(|v| v.to_vec()),
                ));
            }
            next = h.last_offset() + 1;
            headers.push(h);
        }
    }
    (out, headers)
}

fn open(dir: &Path) -> Log {
    Log::open(dir, config(), 0, 0, T0).unwrap().0
}

#[test]
fn compacts_100k_updates_over_1k_keys() {
    let tmp = tempfile::tempdir().unwrap();
    let mut log = open(&tmp.path().join("t-0"));
    let mut latest = HashMap::new();
    for chunk in 0..1000 {
        let recs: Vec<Kv> = (0..100)
            .map(|j| {
                let i = chunk * 100 + j;
                kv(&format!("key-{}", i % 1000), Some(&format!("value-{i}")))
            })
            .collect();
        let base = append(&mut log, &recs, Compression::None, T0 + chunk as i64);
        for (j, (k, v)) in recs.into_iter().enumerate() {
            latest.insert(k, (base + j as i64, v));
        }
    }
    log.roll(T0).unwrap();
    let segments_before = log.segment_count();
    let size_before = log.size_bytes();
    let mut c = cleaner();
    let stats = c
        .clean_now(&mut log, &no_producers, T0, None)
        .unwrap()
        .unwrap();
    assert_eq!(stats.end_offset, 100_000);
    assert_eq!(stats.map_entries, 1000);
    assert_eq!(stats.records_read, 100_000);
    assert_eq!(stats.records_retained, 1000);
    assert_eq!(log.cleaner_checkpoint(), 100_000);
    // First pass: groups by input size, so one segment each (as Kafka).
    assert_eq!(log.segment_count(), segments_before);
    assert!(log.size_bytes() * 20 < size_before, "{}", log.size_bytes());
    let (records, _) = read_all(&log);
    assert_eq!(records.len(), 1000);
    for (offset, key, value) in &records {
        let (want_offset, want_value) = &latest[key];
        assert_eq!(offset, want_offset);
        assert_eq!(value, want_value);
    }
    // Offsets are sparse now but reads from any offset still work.
    let info = log.read(5, 1 << 20, i64::MAX, true).unwrap();
    assert_eq!(info.first_batch_base_offset, 99_000);
    // Clean now: nothing due.
    assert!(c
        .clean_now(&mut log, &no_producers, T0, None)
        .unwrap()
        .is_none());
    // The next pass merges the small cleaned segments.
    append(
        &mut log,
        &[kv("key-0", Some("newest"))],
        Compression::None,
        T0,
    );
    log.roll(T0).unwrap();
    c.clean_now(&mut log, &no_producers, T0, None)
        .unwrap()
        .unwrap();
    assert_eq!(log.segment_count(), 3, "{:?}", log.segment_base_offsets());
    let (records, _) = read_all(&log);
    assert_eq!(records.len(), 1000);
    assert_eq!(records.last().unwrap().2.as_deref(), Some(&b"newest"[..]));
    // Reopen: the cleaned segments load without recovery surprises.
    drop(log);
    let log = open(&tmp.path().join("t-0"));
    assert_eq!(read_all(&log).0, records);
}

#[test]
fn tombstones_kept_until_delete_horizon() {
    let tmp = tempfile::tempdir().unwrap();
    let mut log = open(&tmp.path().join("t-0"));
    append(
        &mut log,
        &[kv("a", Some("1")), kv("b", Some("1")), kv("c", Some("1"))],
        Compression::None,
        T0,
    );
    append(
        &mut log,
        &[kv("b", None), kv("a", Some("2"))],
        Compression::None,
        T0,
    );
    log.roll(T0).unwrap();
    let mut c = cleaner();
    c.clean_now(&mut log, &no_producers, T0, None)
        .unwrap()
        .unwrap();
    let (records, headers) = read_all(&log);
    let keys: Vec<_> = records.iter().map(|r| (r.1.clone(), r.2.clone())).collect();
    assert_eq!(
        keys,
        vec![kv("c", Some("1")), kv("b", None), kv("a", Some("2"))]
    );
    // The batch with the tombstone carries the KIP-534 horizon.
    let h = headers.iter().find(|h| h.base_offset == 3).unwrap();
    assert_ne!(h.attributes & DELETE_HORIZON_FLAG_MASK, 0);
    assert_eq!(delete_horizon_ms(h), Some(T0 + 1_000));
    // Before the horizon: not due, and a forced pass keeps it.
    assert!(c.cleaning_priority(&log, T0 + 999, None).is_none());
    // After the horizon the pass is due although nothing new is dirty.
    assert!(c.cleaning_priority(&log, T0 + 1_000, None).is_some());
    c.clean_now(&mut log, &no_producers, T0 + 1_000, None)
        .unwrap()
        .unwrap();
    let (records, _) = read_all(&log);
    let keys: Vec<_> = records.iter().map(|r| (r.1.clone(), r.2.clone())).collect();
    assert_eq!(keys, vec![kv("c", Some("1")), kv("a", Some("2"))]);
}

#[test]
fn tombstone_survives_passes_before_horizon() {
    let tmp = tempfile::tempdir().unwrap();
    let mut log = open(&tmp.path().join("t-0"));
    append(
        &mut log,
        &[kv("x", Some("1")), kv("x", None)],
        Compression::None,
        T0,
    );
    log.roll(T0).unwrap();
    let mut c = cleaner();
    c.clean_now(&mut log, &no_producers, T0, None)
        .unwrap()
        .unwrap();
    // New dirty data triggers a pass at T0 + 500: the tombstone stays.
    append(&mut log, &[kv("y", Some("1"))], Compression::None, T0);
    log.roll(T0).unwrap();
    c.clean_now(&mut log, &no_producers, T0 + 500, None)
        .unwrap()
        .unwrap();
    let (records, _) = read_all(&log);
    assert_eq!(records[0], (1, b"x".to_vec(), None));
    c.clean_now(&mut log, &no_producers, T0 + 1_001, None)
        .unwrap()
        .unwrap();
    let (records, _) = read_all(&log);
    assert_eq!(records, vec![(2, b"y".to_vec(), Some(b"1".to_vec()))]);
}

#[test]
fn compressed_batches_are_recompressed_with_their_codec() {
    for (codec, xerial) in [
        (Compression::None, false),
        (Compression::Gzip, false),
        (Compression::Snappy, false),
        (Compression::Snappy, true),
        (Compression::Lz4, false),
        (Compression::Zstd, false),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let mut log = open(&tmp.path().join("t-0"));
        for round in 0..20 {
            let recs: Vec<Kv> = (0..10)
                .map(|k| {
                    kv(
                        &format!("k{k}"),
                        Some(&format!("{round}-{}", "x".repeat(50))),
                    )
                })
                .collect();
            let b = BatchBuilder::new(log.log_end_offset())
                .compression(codec)
                .xerial_snappy(xerial);
            append_with(&mut log, b, &recs, T0 + round);
        }
        // One batch where only some records are superseded.
        append(
            &mut log,
            &[kv("k0", Some("last")), kv("k1", Some("last"))],
            codec,
            T0 + 100,
        );
        log.roll(T0).unwrap();
        cleaner()
            .clean_now(&mut log, &no_producers, T0, None)
            .unwrap()
            .unwrap();
        let (records, headers) = read_all(&log);
        assert_eq!(records.len(), 10, "{codec:?}");
        for h in &headers {
            assert_eq!(h.compression(), Some(codec), "{codec:?}");
        }
        // The last round's batch lost k0 and k1: rewritten, sparse, offsets kept.
        let h = headers.iter().find(|h| h.base_offset == 190).unwrap();
        assert_eq!(h.records_count, 8);
        assert_eq!(h.last_offset_delta, 9);
        assert_eq!(records[0].0, 192);
        assert_eq!(records[8], (200, b"k0".to_vec(), Some(b"last".to_vec())));
        assert_eq!(records[9], (201, b"k1".to_vec(), Some(b"last".to_vec())));
    }
}

#[test]
fn min_compaction_lag_leaves_young_segments() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t-0");
    let mut log = open(&dir);
    log.set_config(LogConfig {
        min_compaction_lag_ms: 5_000,
        ..config()
    });
    let old = T0 - 10_000;
    append(
        &mut log,
        &[kv("a", Some("1")), kv("a", Some("2"))],
        Compression::None,
        old,
    );
    log.roll(T0).unwrap();
    let young_base = append(
        &mut log,
        &[kv("a", Some("3")), kv("a", Some("4"))],
        Compression::None,
        T0,
    );
    log.roll(T0).unwrap();
    let info = cleanable_info(&log, T0);
    assert_eq!(info.first_uncleanable_offset, young_base);
    let stats = cleaner()
        .clean_now(&mut log, &no_producers, T0, None)
        .unwrap()
        .unwrap();
    assert_eq!(stats.end_offset, young_base);
    let (records, _) = read_all(&log);
    let offsets: Vec<i64> = records.iter().map(|r| r.0).collect();
    // Only the old segment was compacted against the old map: a=2 stays
    // there (the young a=3, a=4 were not mapped).
    assert_eq!(offsets, vec![1, 2, 3]);
    // Later, once old enough, the young segment is cleaned too.
    let stats = cleaner()
        .clean_now(&mut log, &no_producers, T0 + 6_000, None)
        .unwrap()
        .unwrap();
    assert_eq!(stats.end_offset, 4);
    assert_eq!(read_all(&log).0.len(), 1);
}

#[test]
fn max_compaction_lag_forces_cleaning() {
    let tmp = tempfile::tempdir().unwrap();
    let mut log = open(&tmp.path().join("t-0"));
    log.set_config(LogConfig {
        min_cleanable_dirty_ratio: 0.99,
        max_compaction_lag_ms: 60_000,
        ..config()
    });
    append(
        &mut log,
        &[kv("a", Some("1")), kv("a", Some("2"))],
        Compression::None,
        T0,
    );
    log.roll(T0).unwrap();
    let mut c = cleaner();
    c.clean_now(&mut log, &no_producers, T0, None)
        .unwrap()
        .unwrap(); // ratio 1.0 > 0.99
    append(&mut log, &[kv("a", Some("3"))], Compression::None, T0);
    log.roll(T0).unwrap();
    // Ratio is about 0.5 < 0.99: only the max lag makes it due.
    assert!(c.cleaning_priority(&log, T0 + 60_000, None).is_none());
    assert!(c.cleaning_priority(&log, T0 + 60_001, None).is_some());
}

#[test]
fn active_segment_is_never_cleaned() {
    let tmp = tempfile::tempdir().unwrap();
    let mut log = open(&tmp.path().join("t-0"));
    for _ in 0..3 {
        append(
            &mut log,
            &[kv("a", Some("v")), kv("a", Some("w"))],
            Compression::None,
            T0,
        );
    }
    // Only the active segment: nothing is cleanable.
    assert!(cleaner()
        .clean_now(&mut log, &no_producers, T0, None)
        .unwrap()
        .is_none());
    log.roll(T0).unwrap();
    let active_base = append(
        &mut log,
        &[kv("a", Some("x")), kv("a", Some("y"))],
        Compression::None,
        T0,
    );
    let active_size = log.segments().last().unwrap().size_bytes();
    cleaner()
        .clean_now(&mut log, &no_producers, T0, None)
        .unwrap()
        .unwrap();
    assert_eq!(log.segments().last().unwrap().size_bytes(), active_size);
    assert_eq!(log.active_base_offset(), active_base);
    let offsets: Vec<i64> = read_all(&log).0.iter().map(|r| r.0).collect();
    assert_eq!(offsets, vec![5, 6, 7]);
}

fn build_three_segment_log(dir: &Path) -> Log {
    build_three_segment_log_with(dir, config())
}

fn build_three_segment_log_with(dir: &Path, config: LogConfig) -> Log {
    let mut log = Log::open(dir, config, 0, 0, T0).unwrap().0;
    for seg in 0..3 {
        for round in 0..5 {
            let recs: Vec<Kv> = (0..4)
                .map(|k| kv(&format!("k{k}"), Some(&format!("{seg}-{round}"))))
                .collect();
            append(&mut log, &recs, Compression::None, T0);
        }
        log.roll(T0).unwrap();
    }
    log
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

#[test]
fn crash_leftovers_before_commit_are_discarded() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t-0");
    let log = build_three_segment_log(&dir);
    let (before, _) = read_all(&log);
    log.close().unwrap();
    // A crash while writing: .cleaned files and a partial set of .swap indexes.
    for name in [
        "00000000000000000000.log.cleaned",
        "00000000000000000000.index.cleaned",
        "00000000000000000000.index.swap",
        "00000000000000000000.timeindex.swap",
    ] {
        std::fs::write(dir.join(name), b"garbage").unwrap();
    }
    let log = open(&dir);
    assert_eq!(read_all(&log).0, before);
    assert_eq!(log.segment_count(), 4);
    for e in std::fs::read_dir(&dir).unwrap() {
        let name = e.unwrap().file_name().into_string().unwrap();
        assert!(
            !name.ends_with(".cleaned") && !name.ends_with(".swap"),
            "{name}"
        );
    }
}

#[test]
fn crash_after_commit_completes_the_swap() {
    for keep_index_swaps in [true, false] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("t-0");
        let log = build_three_segment_log(&dir);
        log.close().unwrap();
        // Clean a copy; its first segment is the group's output.
        let copy = tmp.path().join("copy-0");
        copy_dir(&dir, &copy);
        let mut cleaned = open(&copy);
        cleaner()
            .clean_now(&mut cleaned, &no_producers, T0, None)
            .unwrap()
            .unwrap();
        let (want, _) = read_all(&cleaned);
        assert_eq!(cleaned.segment_count(), 2, "one group plus the active");
        cleaned.close().unwrap();
        // The original dir as a crash right after the commit rename left it.
        let base = "00000000000000000000";
        std::fs::copy(
            copy.join(format!("{base}.log")),
            dir.join(format!("{base}.log.swap")),
        )
        .unwrap();
        if keep_index_swaps {
            for s in [".index", ".timeindex"] {
                std::fs::copy(
                    copy.join(format!("{base}{s}")),
                    dir.join(format!("{base}{s}.swap")),
                )
                .unwrap();
            }
        }
        let log = open(&dir);
        assert_eq!(
            read_all(&log).0,
            want,
            "keep_index_swaps={keep_index_swaps}"
        );
        assert_eq!(log.segment_count(), 2);
    }
}

#[test]
fn cleaner_checkpoint_round_trip() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t-0");
    let mut log = build_three_segment_log(&dir);
    let mut c = cleaner();
    let stats = c
        .clean_now(&mut log, &no_producers, T0, None)
        .unwrap()
        .unwrap();
    let file = OffsetCheckpointFile::new(tmp.path().join(CLEANER_OFFSET_CHECKPOINT_FILE));
    file.write(&[("t".to_string(), 0, log.cleaner_checkpoint())])
        .unwrap();
    log.close().unwrap();
    let entries = file.read().unwrap();
    assert_eq!(entries, vec![("t".to_string(), 0, stats.end_offset)]);
    let mut log = open(&dir);
    log.set_cleaner_checkpoint(entries[0].2);
    assert_eq!(cleanable_info(&log, T0).first_dirty_offset, 60);
    assert!(LogCleaner::new(CleanerConfig::default())
        .clean_now(&mut log, &no_producers, T0, None)
        .unwrap()
        .is_none());
    // A checkpoint past the log end is invalid: start over from the log start.
    log.truncate_to(30).unwrap();
    assert!(log.cleaner_checkpoint() <= 30);
}

#[test]
fn producer_state_survives_cleaning() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t-0");
    let mut log = open(&dir);
    // Producer 7's only batch (sequences 0..=2) is superseded entirely.
    let b = BatchBuilder::new(0).producer(7, 3, 0);
    append_with(
        &mut log,
        b,
        &[kv("a", Some("1")), kv("b", Some("1")), kv("c", Some("1"))],
        T0,
    );
    append(
        &mut log,
        &[kv("a", Some("2")), kv("b", Some("2")), kv("c", Some("2"))],
        Compression::None,
        T0,
    );
    log.roll(T0).unwrap();
    let last_data = |pid: i64| {
        (pid == 7).then_some(LastRecord {
            last_data_offset: Some(2),
            producer_epoch: 3,
        })
    };
    cleaner()
        .clean_now(&mut log, &last_data, T0, None)
        .unwrap()
        .unwrap();
    let (records, headers) = read_all(&log);
    assert_eq!(records.len(), 3);
    let empty = headers.iter().find(|h| h.producer_id == 7).expect("kept");
    assert_eq!(
        (
            empty.records_count,
            empty.base_sequence,
            empty.last_offset_delta,
            empty.producer_epoch
        ),
        (0, 0, 2, 3)
    );
    // Rebuilding producer state from the cleaned log gives the same entry.
    let mut ps = ProducerStateManager::new(&dir, i64::MAX);
    log.for_each_batch_from(0, |h, m| {
        ps.replay(h, m);
    })
    .unwrap();
    let e = ps.last_entry(7).expect("producer 7");
    assert_eq!(e.last_seq(), 2);
    assert_eq!(e.last_data_offset(), 2);
    // Without producer state the empty batch would go.
    let mut log2 = open(&tmp.path().join("u-0"));
    let b = BatchBuilder::new(0).producer(9, 0, 0);
    append_with(&mut log2, b, &[kv("a", Some("1"))], T0);
    append(&mut log2, &[kv("a", Some("2"))], Compression::None, T0);
    log2.roll(T0).unwrap();
    cleaner()
        .clean_now(&mut log2, &no_producers, T0, None)
        .unwrap()
        .unwrap();
    assert!(read_all(&log2).1.iter().all(|h| h.producer_id != 9));
}

#[test]
fn keyless_records_are_dropped_and_control_batches_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let mut log = open(&tmp.path().join("t-0"));
    let mut b = BatchBuilder::new(0);
    b.push(T0, None, Some(b"no key"), &[]);
    b.push(T0, Some(b"k"), Some(b"v"), &[]);
    let bytes = b.build();
    log.append(&bytes, &append_info(&bytes), T0).unwrap();
    let ctl = BatchBuilder::new(2)
        .control(true)
        .producer(5, 0, -1)
        .add(T0, Some(&[0, 0, 0, 0]), Some(&[0, 0, 0, 0, 0, 0]), &[])
        .build();
    log.append(&ctl, &append_info(&ctl), T0).unwrap();
    log.roll(T0).unwrap();
    cleaner()
        .clean_now(&mut log, &no_producers, T0, None)
        .unwrap()
        .unwrap();
    let (records, headers) = read_all(&log);
    assert_eq!(records[0], (1, b"k".to_vec(), Some(b"v".to_vec())));
    assert!(headers.iter().any(|h| h.is_control()));
}

#[test]
fn steps_are_bounded() {
    let tmp = tempfile::tempdir().unwrap();
    let mut log = build_three_segment_log(&tmp.path().join("t-0"));
    let mut c = LogCleaner::new(CleanerConfig {
        dedupe_buffer_bytes: 1 << 20,
        step_bytes: 1,
    });
    assert!(c.start(&log, T0, None));
    let mut steps = 0;
    loop {
        steps += 1;
        match c.step(&mut log, &no_producers, T0).unwrap() {
            Step::Done(_) => break,
            Step::InProgress => {}
            Step::WaitingOffShard => std::thread::sleep(std::time::Duration::from_micros(100)),
            Step::Idle => panic!("pass lost"),
        }
    }
    // One batch per step: 15 to map, 15 to rewrite (plus group boundaries).
    assert!(steps >= 30, "{steps}");
    assert_eq!(read_all(&log).0.len(), 4);
}

#[test]
fn a_dedupe_map_made_on_another_thread_is_used() {
    let tmp = tempfile::tempdir().unwrap();
    let mut log = build_three_segment_log(&tmp.path().join("t-0"));
    let config = CleanerConfig {
        dedupe_buffer_bytes: 1 << 20,
        step_bytes: 1 << 20,
    };
    let mut c = LogCleaner::new(config.clone());
    assert!(!c.has_map());
    let map = std::thread::spawn(move || LogCleaner::new_map(&config))
        .join()
        .unwrap();
    let slots = map.slots();
    c.install_map(map);
    assert!(c.has_map());
    let stats = c.clean_now(&mut log, &no_producers, T0, None).unwrap();
    assert!(stats.is_some(), "the log was due");
    assert_eq!(c.map.as_ref().map(|m| m.slots()), Some(slots));
    assert_eq!(read_all(&log).0.len(), 4);
}

fn names_ending(dir: &Path, suffix: &str) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(suffix))
        .collect();
    names.sort();
    names
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !done() {
        assert!(std::time::Instant::now() < deadline, "timed out: {what}");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// Holds the `log-dirs` thread (and so any swap queued behind) until the
/// returned sender is dropped.
fn hold_log_dirs() -> std::sync::mpsc::Sender<()> {
    let (release, held) = std::sync::mpsc::channel::<()>();
    crate::log::log_create::LOG_DIRS.push(move || {
        let _ = held.recv();
    });
    release
}

/// Steps a pass until its first group's swap is queued.
fn step_until_swap_pending(c: &mut LogCleaner, log: &mut Log) {
    assert!(c.start(log, T0, None));
    wait_until("a swap queued", || {
        assert_ne!(c.step(log, &no_producers, T0).unwrap(), Step::Idle);
        log.cleaner_swap_pending()
    });
}

#[test]
fn swapped_out_segments_are_renamed_deleted_and_unlinked_after_the_delay() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t-0");
    let config = LogConfig {
        file_delete_delay_ms: 1_500,
        ..config()
    };
    let mut log = build_three_segment_log_with(&dir, config);
    cleaner()
        .clean_now(&mut log, &no_producers, T0, None)
        .unwrap()
        .unwrap();
    let doomed = names_ending(&dir, ".deleted");
    let logs: Vec<&String> = doomed
        .iter()
        .filter(|n| n.ends_with(".log.deleted"))
        .collect();
    assert_eq!(logs.len(), 3, "the group's three old segments: {doomed:?}");
    assert!(names_ending(&dir, ".cleaned").is_empty());
    assert!(names_ending(&dir, ".swap").is_empty());
    assert_eq!(
        names_ending(&dir, ".log").len(),
        2,
        "the cleaned segment and the active"
    );
    let (cleaned, _) = read_all(&log);
    assert_eq!(cleaned.len(), 4);
    wait_until("the delayed unlink", || {
        names_ending(&dir, ".deleted").is_empty()
    });
    log.close().unwrap();
    assert_eq!(read_all(&open(&dir)).0, cleaned);
}

#[test]
fn retention_leaves_segments_a_swap_in_flight_replaces() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t-0");
    let mut log = build_three_segment_log(&dir);
    let active_base = log.active_base_offset();
    let mut c = cleaner();
    let release = hold_log_dirs();
    step_until_swap_pending(&mut c, &mut log);
    assert_eq!(log.delete_records_before(active_base).unwrap(), active_base);
    assert_eq!(log.segment_count(), 4, "nothing deleted under the swap");
    assert_eq!(
        c.step(&mut log, &no_producers, T0).unwrap(),
        Step::WaitingOffShard
    );
    drop(release);
    wait_until("the pass", || {
        matches!(c.step(&mut log, &no_producers, T0).unwrap(), Step::Done(_))
    });
    assert_eq!(log.segment_count(), 2);
    log.delete_old_segments(T0).unwrap();
    assert_eq!(
        log.segment_count(),
        1,
        "the next check deletes the cleaned segment"
    );
    assert_eq!(log.log_start_offset(), active_base);
}

#[test]
fn a_truncation_waits_for_a_swap_in_flight() {
    let tmp = tempfile::tempdir().unwrap();
    // What the truncation leaves after a pass with nothing in flight.
    let mut settled = build_three_segment_log(&tmp.path().join("settled-0"));
    cleaner()
        .clean_now(&mut settled, &no_producers, T0, None)
        .unwrap()
        .unwrap();
    settled.truncate_to(58).unwrap();
    let want = (settled.log_end_offset(), read_all(&settled).0);

    let dir = tmp.path().join("t-0");
    let mut log = build_three_segment_log(&dir);
    let mut c = cleaner();
    let release = hold_log_dirs();
    step_until_swap_pending(&mut c, &mut log);
    let releaser = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(50));
        drop(release);
    });
    // Into the one batch the cleaner keeps (offsets 56-59).
    log.truncate_to(58).unwrap();
    releaser.join().unwrap();
    assert!(!log.cleaner_swap_pending());
    assert_eq!((log.log_end_offset(), read_all(&log).0), want);
    assert!(names_ending(&dir, ".cleaned").is_empty());
    assert!(names_ending(&dir, ".swap").is_empty());
    log.close().unwrap();
    let reopened = open(&dir);
    assert_eq!((reopened.log_end_offset(), read_all(&reopened).0), want);
}

#[test]
fn a_group_losing_a_segment_while_it_syncs_is_discarded() {
    let tmp = tempfile::tempdir().unwrap();
    for attempt in 0.. {
        let dir = tmp.path().join(format!("t-{attempt}"));
        let mut log = build_three_segment_log(&dir);
        let active_base = log.active_base_offset();
        let mut c = cleaner();
        assert!(c.start(&log, T0, None));
        // Step until the group's fsyncs are under way (no swap queued yet).
        let mut syncing = false;
        while !log.cleaner_swap_pending() {
            match c.step(&mut log, &no_producers, T0).unwrap() {
                Step::WaitingOffShard if !log.cleaner_swap_pending() => {
                    syncing = true;
                    break;
                }
                Step::Done(_) | Step::Idle => break,
                _ => {}
            }
        }
        if !syncing {
            assert!(attempt < 20, "the sync always finished first");
            continue;
        }
        log.delete_records_before(active_base).unwrap();
        assert_eq!(log.segment_count(), 1);
        let err = loop {
            match c.step(&mut log, &no_producers, T0) {
                Err(e) => break e,
                Ok(Step::WaitingOffShard) => {
                    std::thread::sleep(std::time::Duration::from_millis(1))
                }
                Ok(other) => panic!("{other:?}"),
            }
        };
        assert!(err.to_string().contains("went away"), "{err}");
        assert!(c.in_progress().is_none(), "the pass is aborted");
        assert!(names_ending(&dir, ".cleaned").is_empty());
        assert!(names_ending(&dir, ".swap").is_empty());
        assert_eq!(log.log_start_offset(), active_base);
        return;
    }
}

#[test]
fn a_step_whose_input_left_the_page_cache_waits_for_it_off_the_shard() {
    use crate::log::page_cache::{self, FILLED_BYTES};
    use std::sync::atomic::Ordering;
    let tmp = tempfile::tempdir().unwrap();
    let mut log = build_three_segment_log(&tmp.path().join("t-0"));
    for seg in log.segments() {
        seg.log.file().sync_all().unwrap();
        page_cache::advise(seg.log.file(), libc::POSIX_FADV_DONTNEED).unwrap();
    }
    let first = log.segments().next().unwrap();
    let first_bytes = first.size_bytes();
    if page_cache::range_cached(first.log.file(), 0, first_bytes) != Some(false) {
        return; // a kernel without cachestat, or pages it kept: nothing to see
    }
    let filled_before = FILLED_BYTES.load(Ordering::Relaxed);
    let mut c = cleaner();
    assert!(c.start(&log, T0, None));
    // The first step reads nothing: its input is read in off the shard.
    assert_eq!(
        c.step(&mut log, &no_producers, T0).unwrap(),
        Step::WaitingOffShard
    );
    let stats = loop {
        match c.step(&mut log, &no_producers, T0).unwrap() {
            Step::Done(stats) => break stats,
            Step::InProgress => {}
            Step::WaitingOffShard => std::thread::sleep(std::time::Duration::from_micros(100)),
            Step::Idle => panic!("pass lost"),
        }
    };
    assert!(FILLED_BYTES.load(Ordering::Relaxed) - filled_before >= first_bytes);
    assert_eq!(stats.records_read, 60);
    assert_eq!(read_all(&log).0.len(), 4);
}
