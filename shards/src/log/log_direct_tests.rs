//! Direct-mode specifics: block-crossing appends read back byte-exact
//! through the buffered descriptor, padding never visible as data, clean
//! reopen without a scan, crash recovery, rolls and preallocation.

use super::*;
use crate::log::segment::direct_io::DIRECT_BLOCK_BYTES;

const BLOCK: u64 = DIRECT_BLOCK_BYTES as u64;

/// Switches the calling test to direct mode; returns a fresh directory.
fn direct_dir() -> tempfile::TempDir {
    MODE.set(IoMode::Direct);
    test_dir()
}

fn direct_config(segment_bytes: u64) -> LogConfig {
    LogConfig {
        segment_bytes,
        index_interval_bytes: 4096,
        ..base_config()
    }
}

fn file_len(dir: &Path, base: i64) -> u64 {
    std::fs::metadata(segment_file_path(dir, base, LOG_FILE_SUFFIX))
        .unwrap()
        .len()
}

/// The `.log` holds exactly `expected`, then at most a block of zeros.
fn assert_file_holds(dir: &Path, base: i64, expected: &[u8]) {
    let raw = std::fs::read(segment_file_path(dir, base, LOG_FILE_SUFFIX)).unwrap();
    assert!(raw.len() >= expected.len(), "file shorter than the log");
    assert!(raw[..expected.len()] == *expected, "file bytes differ");
    let padding = &raw[expected.len()..];
    assert!(padding.len() < DIRECT_BLOCK_BYTES && padding.iter().all(|&b| b == 0));
    assert!(padding.is_empty() || (raw.len() as u64).is_multiple_of(BLOCK));
}

/// A 1-record batch at `base` whose size makes the log end `end_mod`
/// bytes past a block boundary (0 = exactly on it), starting at `log_len`.
fn batch_ending_at(base: i64, log_len: u64, end_mod: u64) -> Vec<u8> {
    (1..2 * DIRECT_BLOCK_BYTES)
        .map(|v| build_batch(base, 1, NOW, v))
        .find(|b| (log_len + b.len() as u64) % BLOCK == end_mod)
        .expect("some value size hits the boundary")
}

#[test]
fn odd_appends_cross_blocks_and_read_back_exactly() {
    let dir = direct_dir();
    let (mut log, _) = open(dir.path(), direct_config(1 << 30), 0);
    assert!(log.active().is_direct());
    let mut all: Vec<u8> = Vec::new();
    // Tiny, just-under-a-block, multi-block, larger than the 256 KiB
    // buffer, and sizes landing exactly on and one past a block boundary.
    let value_sizes = [1usize, 7, 3990, 4096, 5000, 1, 300_000, 12_345, 600_000, 33];
    for (i, &v) in value_sizes.iter().enumerate() {
        let b = build_batch(log.log_end_offset(), 1 + i % 3, NOW + i as i64, v);
        log.append(&b, &append_info(&b), NOW).unwrap();
        all.extend_from_slice(&b);
        assert_eq!(read_all(&log, 0), all, "after append {i}");
        assert_file_holds(dir.path(), 0, &all);
    }
    for end_mod in [0, 1, BLOCK - 1, 0] {
        let b = batch_ending_at(log.log_end_offset(), all.len() as u64, end_mod);
        log.append(&b, &append_info(&b), NOW).unwrap();
        all.extend_from_slice(&b);
        assert_eq!(all.len() as u64 % BLOCK, end_mod);
        assert_eq!(read_all(&log, 0), all);
        assert_file_holds(dir.path(), 0, &all);
    }
    assert_eq!(log.size_bytes(), all.len() as u64);
    // Every batch reads back alone, too.
    let mut pos = 0usize;
    for h in headers(&all) {
        let info = log.read(h.base_offset, 1, i64::MAX, true).unwrap();
        let one = read_slice_bytes(&info.slice.unwrap()).unwrap();
        assert_eq!(one, all[pos..pos + h.total_size()]);
        pos += h.total_size();
    }
}

#[test]
fn flush_and_close_leave_the_exact_length_and_reopen_without_scan() {
    let dir = direct_dir();
    let (mut log, _) = open(dir.path(), direct_config(1 << 30), 0);
    let mut all = Vec::new();
    for i in 0..20 {
        all.extend(append(&mut log, 3, NOW + i, 333 + i as usize).0);
    }
    assert!(file_len(dir.path(), 0) > all.len() as u64, "a padded tail");
    log.flush().unwrap();
    assert_eq!(file_len(dir.path(), 0), all.len() as u64, "flush trims");
    // Appends after a trimmed tail continue seamlessly.
    all.extend(append(&mut log, 2, NOW, 77).0);
    assert_eq!(read_all(&log, 0), all);
    let leo = log.log_end_offset();
    log.close().unwrap();
    assert_eq!(file_len(dir.path(), 0), all.len() as u64);
    let (mut log, stats) = open(dir.path(), direct_config(1 << 30), leo);
    assert_eq!(stats, RecoveryStats::default(), "no scan after close");
    assert!(log.active().is_direct());
    assert_eq!(read_all(&log, 0), all);
    all.extend(append(&mut log, 4, NOW, 5000).0);
    assert_eq!(read_all(&log, 0), all);
    assert_file_holds(dir.path(), 0, &all);
    // Flushed, then dropped without close: still no scan.
    log.flush().unwrap();
    let leo = log.log_end_offset();
    drop(log);
    let (log, stats) = open(dir.path(), direct_config(1 << 30), leo);
    assert_eq!(stats.segments_scanned, 0);
    assert_eq!(read_all(&log, 0), all);
}

#[test]
fn crash_without_close_recovers_every_batch() {
    let dir = direct_dir();
    let config = direct_config(64 * 1024);
    let (mut log, _) = open(dir.path(), config.clone(), 0);
    let mut batches = Vec::new();
    for i in 0..60 {
        batches.push(append(&mut log, 5, NOW + i, 100 + 13 * i as usize).0);
    }
    let leo = log.log_end_offset();
    let bases = log.segment_base_offsets();
    let active = *bases.last().unwrap();
    let active_bytes = log.active().size_bytes();
    assert!(bases.len() > 2);
    // A crash: no close, no flush; the padded tail block is on disk.
    drop(log);
    let padded = file_len(dir.path(), active);
    assert!(padded > active_bytes && padded.is_multiple_of(BLOCK));
    let (mut log, stats) = open(dir.path(), config, 0);
    assert_eq!(stats.segments_scanned, bases.len());
    assert_eq!(
        stats.bytes_truncated,
        padded - active_bytes,
        "only the padding"
    );
    assert_eq!(stats.batches_recovered, 60);
    assert_eq!(log.log_end_offset(), leo);
    assert_eq!(log.segment_base_offsets(), bases);
    assert_eq!(file_len(dir.path(), active), active_bytes);
    for (i, b) in batches.iter().enumerate() {
        let info = log.read(i as i64 * 5, 1, i64::MAX, true).unwrap();
        assert_eq!(read_slice_bytes(&info.slice.unwrap()).unwrap(), *b);
    }
    let (b, _) = append(&mut log, 5, NOW, 100);
    assert_eq!(read_all(&log, leo), b);
}

#[test]
fn rolls_switch_the_write_path_to_the_new_segment() {
    for preallocate in [false, true] {
        let dir = direct_dir();
        let config = LogConfig {
            preallocate,
            ..direct_config(20_000)
        };
        let (mut log, _) = open(dir.path(), config.clone(), 0);
        let mut batches = Vec::new();
        let mut rolls = 0;
        for i in 0..50 {
            let (b, rolled) = append(&mut log, 3, NOW + i, 900 + 37 * i as usize);
            batches.push(b);
            if let Some(base) = rolled {
                rolls += 1;
                let prev = log.segment_base_offsets()[log.segment_count() - 2];
                let seg = log.segment_for(prev).unwrap();
                assert!(!seg.is_direct(), "inactive segments drop the writer");
                assert_eq!(file_len(dir.path(), prev), seg.size_bytes());
                assert_eq!(log.active().base_offset(), base);
            }
            assert!(log.active().is_direct());
        }
        assert!(rolls >= 4, "rolled {rolls} times");
        for (i, b) in batches.iter().enumerate() {
            let info = log.read(i as i64 * 3, 1, i64::MAX, true).unwrap();
            assert_eq!(read_slice_bytes(&info.slice.unwrap()).unwrap(), *b);
        }
        let leo = log.log_end_offset();
        let size = log.size_bytes();
        log.close().unwrap();
        let (log, stats) = open(dir.path(), config, leo);
        assert_eq!(stats.segments_scanned, 0, "preallocate={preallocate}");
        assert_eq!(log.size_bytes(), size);
    }
}

#[test]
fn truncation_inside_a_block_then_append() {
    let dir = direct_dir();
    let (mut log, _) = open(dir.path(), direct_config(1 << 30), 0);
    let mut batches = Vec::new();
    for i in 0..12 {
        batches.push(append(&mut log, 2, NOW + i, 700).0);
    }
    log.truncate_to(14).unwrap();
    batches.truncate(7);
    let (b, _) = append(&mut log, 2, NOW, 3000);
    batches.push(b);
    let all = batches.concat();
    assert_eq!(read_all(&log, 0), all);
    assert_file_holds(dir.path(), 0, &all);
    // Back into an older, inactive segment with a fresh writer.
    let dir = direct_dir();
    let (mut log, _) = open(dir.path(), direct_config(8000), 0);
    while log.segment_count() < 3 {
        append(&mut log, 2, NOW, 700);
    }
    let second = log.segment_base_offsets()[1];
    log.truncate_to(second + 2).unwrap();
    assert!(log.active().is_direct());
    let (b, _) = append(&mut log, 1, NOW, 10);
    assert_eq!(read_all(&log, second + 2), b);
}

#[test]
fn tmpfs_without_o_direct_fails_open_clearly() {
    let shm = Path::new("/dev/shm");
    if !shm.is_dir() {
        return;
    }
    let dir = tempfile::tempdir_in(shm).unwrap();
    let path = dir.path().join("t-0");
    // Kernels since 6.6 give tmpfs O_DIRECT; older ones refuse with EINVAL.
    match Log::open(&path, direct_config(1 << 20), 0, 0, NOW) {
        Ok((mut log, _)) => {
            let (b, _) = append(&mut log, 1, NOW, 10);
            assert_eq!(read_all(&log, 0), b);
        }
        Err(e) => {
            assert_eq!(e.kind(), std::io::ErrorKind::Unsupported);
            let msg = e.to_string();
            assert!(
                msg.contains("direct I/O") && msg.contains("unsupported"),
                "{msg}"
            );
            assert!(msg.contains(&path.display().to_string()), "{msg}");
        }
    }
}
