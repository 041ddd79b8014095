//! A log prepared off the shard (`log_create`): what `Log::open_new`
//! attaches behaves as a log `Log::open` created, on disk too.

use super::*;
use crate::log::log_create::prepare_new_log;

#[test]
fn buffered_prepared_log_is_a_new_log() {
    run_in(IoMode::Buffered, prepared_log_is_a_new_log);
}

#[test]
fn direct_prepared_log_is_a_new_log() {
    run_in(IoMode::Direct, prepared_log_is_a_new_log);
}

fn prepared_log_is_a_new_log() {
    let root = test_dir();
    let dir = root.path().join("t-0");
    let config = small_config();
    let prepared = {
        let (dir, config) = (dir.clone(), config.clone());
        std::thread::spawn(move || prepare_new_log(&dir, &config, 0))
            .join()
            .unwrap()
            .unwrap()
            .expect("a new directory")
    };
    assert!(dir.is_dir());
    // A second preparation finds the directory: it is not handed out twice.
    assert!(prepare_new_log(&dir, &config, 0).unwrap().is_none());
    let mut log = Log::open_new(prepared, config.clone(), NOW).unwrap();
    assert_eq!(
        (
            log.log_start_offset(),
            log.log_end_offset(),
            log.recovery_point()
        ),
        (0, 0, 0)
    );
    let first = append(&mut log, 5, NOW, 100).0;
    for i in 1..40 {
        append(&mut log, 5, NOW + i, 100);
    }
    assert!(log.segment_count() > 1, "small segments roll");
    let written = read_all(&log, 0);
    assert!(written.starts_with(&first));
    let leo = log.log_end_offset();
    log.close().unwrap();
    let (log, stats) = open(&dir, config, leo);
    assert_eq!(stats.segments_scanned, 0);
    assert_eq!(log.log_end_offset(), leo);
    assert_eq!(read_all(&log, 0), written);
}

#[test]
fn a_prepared_log_dropped_unused_leaves_a_log_open_can_load() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("t-1");
    let prepared = prepare_new_log(&dir, &base_config(), 0).unwrap().unwrap();
    drop(prepared);
    let (log, _) = open(&dir, base_config(), 0);
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (0, 0));
}

#[test]
fn buffered_queued_close_reopens_without_scanning() {
    run_in(IoMode::Buffered, queued_close_reopens_without_scanning);
}

#[test]
fn direct_queued_close_reopens_without_scanning() {
    run_in(IoMode::Direct, queued_close_reopens_without_scanning);
}

/// `close_queued` leaves what `close` leaves: trimmed indexes, every
/// segment (also those whose roll sync was pending) synced, so reopening
/// at the log end offset scans nothing.
fn queued_close_reopens_without_scanning() {
    let dir = test_dir();
    let (mut log, _) = open(dir.path(), small_config(), 0);
    for i in 0..40 {
        append(&mut log, 5, NOW + i, 100);
    }
    assert!(log.pending_roll_syncs() > 0, "rolled segments await a sync");
    let written = read_all(&log, 0);
    let bases = log.segment_base_offsets();
    let leo = log.log_end_offset();
    let (done, closed) = std::sync::mpsc::channel();
    log.close_queued(move |r| done.send(r).unwrap()).unwrap();
    closed.recv().unwrap().unwrap();
    let active_time_index = std::fs::read(segment_file_path(
        dir.path(),
        bases[bases.len() - 1],
        TIME_INDEX_FILE_SUFFIX,
    ))
    .unwrap();
    assert!(!active_time_index.is_empty() && active_time_index.len().is_multiple_of(12));
    let (log, stats) = open(dir.path(), small_config(), leo);
    assert_eq!(stats.segments_scanned, 0);
    assert_eq!(log.segment_base_offsets(), bases);
    assert_eq!(log.log_end_offset(), leo);
    assert_eq!(read_all(&log, 0), written);
}
