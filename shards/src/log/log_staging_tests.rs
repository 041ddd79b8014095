//! Asynchronous appends, of direct mode and of buffered offload
//! (`Log::stage`, `begin_write`, `complete_write`): invisible until written, byte-exact with the headers
//! validation rewrote, grouped into one write, rolled like synchronous
//! appends, flushes deferred past a write in flight, destructive operations
//! refused while anything is pending, and a log dropped with staged appends
//! (a crash) reopens with exactly what was written.

use super::*;
use crate::log::patched::PatchedRecords;
use crate::log::segment::direct_io::DIRECT_BLOCK_BYTES;
use crate::log::validate::{ValidationConfig, Validator};
use bytes::Bytes;

/// Runs `f` on a glommio executor (io_uring files need one), once in
/// direct mode and once with buffered writes offloaded: both stage.
fn run<F, Fut>(f: F)
where
    F: Fn() -> Fut + Send + Clone + 'static,
    Fut: std::future::Future<Output = ()> + 'static,
{
    for mode in [IoMode::Direct, IoMode::BufferedOffload] {
        let f = f.clone();
        glommio::LocalExecutorBuilder::default()
            .spawn(move || {
                MODE.set(mode);
                f()
            })
            .unwrap()
            .join()
            .unwrap();
    }
}

fn staged_config(segment_bytes: u64) -> LogConfig {
    LogConfig {
        segment_bytes,
        index_interval_bytes: 4096,
        ..base_config()
    }
}

/// Validates a produced batch as the broker does and stages it; returns
/// the bytes it will be stored as.
fn stage_batch(log: &mut Log, count: usize, value_bytes: usize) -> Vec<u8> {
    let raw = build_batch(0, count, NOW, value_bytes);
    let mut headers = Vec::new();
    let info = Validator::new()
        .validate_and_patch_headers(
            &raw,
            log.next_offset(),
            3,
            NOW,
            &ValidationConfig::default(),
            &mut headers,
        )
        .unwrap();
    let records = PatchedRecords::new(Bytes::from(raw), headers);
    let stored = records.to_vec();
    log.stage(records, info).unwrap();
    stored
}

/// Byte equality without dumping megabytes on failure.
#[track_caller]
fn assert_bytes(actual: &[u8], expected: &[u8], what: &str) {
    let first_diff = actual.iter().zip(expected).position(|(a, b)| a != b);
    assert!(
        actual == expected,
        "{what}: {} bytes, expected {}, first difference at {first_diff:?}",
        actual.len(),
        expected.len()
    );
}

/// Writes everything staged, one write at a time; returns the writes made.
async fn write_staged(log: &mut Log) -> usize {
    let mut writes = 0;
    while let Some(mut w) = log.begin_write_now(NOW).unwrap() {
        let r = w.execute().await;
        log.complete_write(w, r).unwrap();
        writes += 1;
    }
    writes
}

#[test]
fn staged_appends_are_invisible_until_written_then_exact() {
    run(|| async {
        let dir = test_dir();
        let (mut log, _) = open(dir.path(), staged_config(1 << 30), 0);
        assert!(log.stages_appends(0));
        let mut expected = Vec::new();
        for (count, value) in [(1, 10), (3, 5000), (2, 1)] {
            expected.extend(stage_batch(&mut log, count, value));
        }
        assert_eq!(log.log_end_offset(), 0);
        assert_eq!(log.next_offset(), 6);
        assert!(read_all(&log, 0).is_empty());
        let mut w = log.begin_write_now(NOW).unwrap().expect("a write");
        assert!(
            log.begin_write_now(NOW).unwrap().is_none(),
            "one write at a time"
        );
        assert_eq!(w.end_offset(), 6, "the three appends go as one write");
        let r = w.execute().await;
        assert_eq!(log.log_end_offset(), 0, "not before completion");
        log.complete_write(w, r).unwrap();
        assert_eq!(log.log_end_offset(), 6);
        assert!(!log.has_staged_writes());
        assert_bytes(&read_all(&log, 0), &expected, "read back");
        for (h, base) in headers(&expected).iter().zip([0, 1, 4]) {
            assert_eq!(h.base_offset, base);
            assert_eq!(h.partition_leader_epoch, 3);
        }
        let raw = std::fs::read(segment_file_path(dir.path(), 0, LOG_FILE_SUFFIX)).unwrap();
        assert_bytes(&raw[..expected.len()], &expected, "file");
        assert!(raw[expected.len()..].iter().all(|&b| b == 0));
        assert!(raw.len() - expected.len() < DIRECT_BLOCK_BYTES);
        if MODE.get() == IoMode::BufferedOffload {
            assert_eq!(raw.len(), expected.len(), "a buffered write has no padding");
        }
    });
}

#[test]
fn many_cycles_across_blocks_reopen_without_a_scan() {
    run(|| async {
        let dir = test_dir();
        let (mut log, _) = open(dir.path(), staged_config(1 << 30), 0);
        let mut expected = Vec::new();
        // Cycles of one and several appends, sizes landing everywhere in a block.
        let sizes = [1usize, 4000, 4096, 7, 70_000, 3990, 1, 300_000, 12_345, 33];
        for (i, chunk) in sizes.chunks(3).enumerate() {
            for &v in chunk {
                expected.extend(stage_batch(&mut log, 1 + i % 2, v));
            }
            assert_eq!(write_staged(&mut log).await, 1);
            assert_bytes(&read_all(&log, 0), &expected, &format!("after cycle {i}"));
        }
        // A synchronous append after the staged ones continues the same file.
        let tail = build_batch(log.log_end_offset(), 2, NOW, 100);
        log.append(&tail, &append_info(&tail), NOW).unwrap();
        expected.extend_from_slice(&tail);
        assert_bytes(&read_all(&log, 0), &expected, "read back");
        let end = log.log_end_offset();
        log.close().unwrap();
        let (log, stats) = open(dir.path(), staged_config(1 << 30), end);
        assert_eq!(stats.segments_scanned, 0);
        assert_eq!(log.log_end_offset(), end);
        assert_bytes(&read_all(&log, 0), &expected, "read back");
    });
}

/// A follower's gapped appends (synchronous, at the leader's offsets),
/// then leadership: staged appends continue at the log end, in the file
/// right after the follower's bytes, and a roll after a gap-made roll
/// starts at the end.
#[test]
fn staged_appends_continue_a_follower_log_with_gaps() {
    run(|| async {
        let dir = test_dir();
        let (mut log, _) = open(dir.path(), staged_config(64 * 1024), 0);
        // 20 KB records: 4 and 9 share the first segment, each later
        // batch starts its own at its base offset.
        let mut last = Vec::new();
        for (i, base) in [4i64, 9, 30, 40, 100].into_iter().enumerate() {
            last = build_batch(base, 1 + i, NOW, 20_000);
            log.append_as_follower(&last, &append_info(&last), NOW)
                .unwrap();
        }
        let leo = log.log_end_offset();
        assert_eq!(leo, 105);
        let bases = log.segment_base_offsets();
        assert_eq!(bases, vec![0, 30, 40, 100]);
        let active = 100;
        let mut expected = last;
        let mut all_staged = Vec::new();
        for _ in 0..6 {
            all_staged.extend(stage_batch(&mut log, 2, 20_000));
        }
        assert_eq!(log.next_offset(), leo + 12);
        write_staged(&mut log).await;
        assert_eq!(log.log_end_offset(), leo + 12);
        let staged_bases: Vec<i64> = headers(&all_staged).iter().map(|h| h.base_offset).collect();
        assert_eq!(staged_bases, (leo..leo + 12).step_by(2).collect::<Vec<_>>());
        // The active segment's bytes: the follower's, then the staged ones.
        let mut from_active = Vec::new();
        let mut at = active;
        while at < log.log_end_offset() {
            let bytes = read_all(&log, at);
            at = headers(&bytes).last().unwrap().last_offset() + 1;
            from_active.extend(bytes);
        }
        expected.extend(all_staged);
        assert_bytes(&from_active, &expected, "read back");
        assert!(log.segment_count() > bases.len(), "the leader rolled too");
        assert!(log.segment_base_offsets()[bases.len()..]
            .iter()
            .all(|b| staged_bases.contains(b)));
    });
}

#[test]
fn large_backlogs_split_into_bounded_writes_and_roll() {
    run(|| async {
        let dir = test_dir();
        // Segments of 256 KiB: 40 appends of ~20 KiB roll several times.
        let (mut log, _) = open(dir.path(), staged_config(256 * 1024), 0);
        let mut expected = Vec::new();
        for _ in 0..40 {
            expected.extend(stage_batch(&mut log, 2, 10_000));
        }
        let writes = write_staged(&mut log).await;
        assert!(writes >= 4, "a roll ends a write: {writes}");
        assert!(log.segment_count() >= 4);
        assert!(
            log.take_snapshot_point(),
            "rolled with nothing staged after"
        );
        assert!(!log.take_snapshot_point(), "once per roll");
        let mut read = Vec::new();
        let mut offset = 0;
        while offset < log.log_end_offset() {
            let chunk = read_all(&log, offset);
            offset = headers(&chunk).last().unwrap().last_offset() + 1;
            read.extend(chunk);
        }
        assert_bytes(&read, &expected, "read back");
        for seg in log.segments() {
            assert!(seg.size_bytes() <= 256 * 1024);
        }
    });
}

#[test]
fn flush_waits_for_the_write_in_flight() {
    run(|| async {
        let dir = test_dir();
        let (mut log, _) = open(dir.path(), staged_config(1 << 30), 0);
        stage_batch(&mut log, 1, 100);
        write_staged(&mut log).await;
        stage_batch(&mut log, 1, 100);
        let mut w = log.begin_write_now(NOW).unwrap().unwrap();
        log.flush().unwrap();
        assert_eq!(log.recovery_point(), 0, "deferred while writing");
        let r = w.execute().await;
        log.complete_write(w, r).unwrap();
        assert_eq!(log.recovery_point(), 2, "done when the write landed");
    });
}

#[test]
fn destructive_operations_wait_for_staged_appends() {
    run(|| async {
        let dir = test_dir();
        let (mut log, _) = open(dir.path(), staged_config(1 << 30), 0);
        let written = stage_batch(&mut log, 2, 100);
        write_staged(&mut log).await;
        stage_batch(&mut log, 1, 100);
        assert!(log.truncate_to(1).is_err());
        assert!(log.truncate_fully_and_start_at(0).is_err());
        assert!(log.roll(NOW).is_err());
        let b = build_batch(log.next_offset(), 1, NOW, 1);
        assert!(log.append(&b, &append_info(&b), NOW).is_err());
        // Close refuses too; dropping the log is what a crash looks like.
        assert!(log.close().is_err());
        let (log, _) = open(dir.path(), staged_config(1 << 30), 0);
        assert_eq!(log.log_end_offset(), 2, "only written appends survive");
        assert_bytes(&read_all(&log, 0), &written, "read back");
    });
}

#[test]
fn a_failed_write_stops_the_log_cleanly() {
    run(|| async {
        let dir = test_dir();
        let (mut log, _) = open(dir.path(), staged_config(1 << 30), 0);
        let written = stage_batch(&mut log, 1, 100);
        write_staged(&mut log).await;
        stage_batch(&mut log, 1, 100);
        let w = log.begin_write_now(NOW).unwrap().unwrap();
        stage_batch(&mut log, 1, 100);
        let err = log.complete_write(w, Err(io::Error::other("device gone")));
        assert!(err.is_err());
        assert!(log.write_failure().unwrap().contains("device gone"));
        assert!(!log.stages_appends(0));
        assert!(!log.has_staged_writes(), "staged appends were dropped");
        assert_eq!(log.next_offset(), log.log_end_offset());
        assert!(log.begin_write_now(NOW).unwrap().is_none());
        assert_bytes(&read_all(&log, 0), &written, "read back");
    });
}

#[test]
fn a_roll_waits_for_its_segment_made_elsewhere_while_appends_stay_staged() {
    run(|| async {
        let dir = test_dir();
        let (mut log, _) = open(dir.path(), staged_config(8192), 0);
        let mut expected = stage_batch(&mut log, 1, 6000);
        assert_eq!(write_staged(&mut log).await, 1);
        assert_eq!(log.segment_count(), 1);
        // The next batch does not fit: the roll asks for its files first.
        expected.extend(stage_batch(&mut log, 1, 6000));
        let WriteStep::PrepareSegment(job) = log.begin_write(NOW).unwrap() else {
            panic!("the roll's segment is asked for");
        };
        let new_log_file = segment_file_path(dir.path(), 1, LOG_FILE_SUFFIX);
        assert!(!new_log_file.exists(), "no file made on the log's thread");
        // Appends keep being staged while the files are made elsewhere.
        expected.extend(stage_batch(&mut log, 1, 10));
        let files = std::thread::spawn(move || job.run())
            .join()
            .unwrap()
            .unwrap();
        assert!(new_log_file.exists());
        assert_eq!(log.log_end_offset(), 1, "nothing written meanwhile");
        log.segment_prepared(files);
        assert_eq!(write_staged(&mut log).await, 1);
        assert_eq!(log.segment_base_offsets(), vec![0, 1]);
        assert_eq!(log.log_end_offset(), 3);
        // A read stays within one segment.
        let both = |log: &Log| [read_all(log, 0), read_all(log, 1)].concat();
        assert_bytes(&both(&log), &expected, "read back across the roll");
        let leo = log.log_end_offset();
        log.close().unwrap();
        let (log, stats) = open(dir.path(), staged_config(8192), leo);
        assert_eq!(stats.segments_scanned, 0);
        assert_bytes(&both(&log), &expected, "reopened");
    });
}

#[test]
fn files_made_for_a_roll_are_rolled_onto_even_if_the_rule_no_longer_asks() {
    run(|| async {
        let dir = test_dir();
        let (mut log, _) = open(dir.path(), staged_config(8192), 0);
        stage_batch(&mut log, 1, 6000);
        assert_eq!(write_staged(&mut log).await, 1);
        stage_batch(&mut log, 1, 6000);
        // The next batch does not fit: the roll's segment is asked for...
        let WriteStep::PrepareSegment(job) = log.begin_write(NOW).unwrap() else {
            panic!("the roll's segment is asked for");
        };
        log.segment_prepared(job.run().unwrap());
        // ...then `segment.bytes` grows (a config change): the files made
        // are rolled onto anyway, never left to name a segment inside the
        // active one.
        log.set_config(staged_config(1 << 30));
        let WriteStep::Write(mut w) = log.begin_write(NOW).unwrap() else {
            panic!("a write");
        };
        let r = w.execute().await;
        log.complete_write(w, r).unwrap();
        assert_eq!(log.segment_base_offsets(), vec![0, 1]);
        assert_eq!(log.log_end_offset(), 2);
    });
}

/// An abort whose marker is staged is indexed when the marker lands, in
/// the segment it lands in (here one its write rolls to).
#[test]
fn a_staged_markers_abort_is_indexed_where_it_lands() {
    use crate::log::control_batch::{build_end_txn_marker_batch, ControlRecordType, EndTxnMarker};
    use crate::log::transaction_index::AbortedTxn;
    run(|| async {
        let dir = test_dir();
        let (mut log, _) = open(dir.path(), staged_config(8192), 0);
        stage_batch(&mut log, 1, 6000);
        assert_eq!(write_staged(&mut log).await, 1);
        stage_batch(&mut log, 1, 6000);
        let marker = EndTxnMarker {
            control_type: ControlRecordType::Abort,
            coordinator_epoch: 0,
        };
        let raw = build_end_txn_marker_batch(5, 0, marker, NOW);
        let broker = ValidationConfig {
            allow_control_batches: true,
            ..ValidationConfig::default()
        };
        let mut headers = Vec::new();
        let info = Validator::new()
            .validate_and_patch_headers(&raw, log.next_offset(), 3, NOW, &broker, &mut headers)
            .unwrap();
        log.stage(PatchedRecords::new(Bytes::from(raw), headers), info)
            .unwrap();
        let txn = AbortedTxn {
            producer_id: 5,
            first_offset: 1,
            last_offset: 2,
            last_stable_offset: 3,
        };
        log.append_aborted_txn(txn).unwrap();
        assert!(log.collect_aborted_txns(0, 10).is_empty(), "not yet landed");
        assert_eq!(write_staged(&mut log).await, 1);
        assert_eq!(log.segment_base_offsets(), vec![0, 1]);
        assert_eq!(log.segment_for(1).unwrap().txn_index().entries(), [txn]);
        assert!(log.segment_for(0).unwrap().txn_index().is_empty());
        assert_eq!(log.collect_aborted_txns(0, 10), [txn]);
        log.close().unwrap();
        let (log, _) = open(dir.path(), staged_config(8192), 3);
        assert_eq!(log.collect_aborted_txns(0, 10), [txn]);
    });
}

#[test]
fn the_writeback_flag_flipping_after_the_choice_does_not_refuse_the_stage() {
    glommio::LocalExecutorBuilder::default()
        .spawn(|| async {
            MODE.set(IoMode::BufferedOffload);
            let dir = test_dir();
            let (mut log, _) = open(dir.path(), staged_config(1 << 30), 0);
            crate::log::dirty_pages::force_offload_writes(Some(true));
            assert!(log.stages_appends(0));
            // The dirty-pages thread turns offload off while the produce
            // validates: the append it chose to stage is still staged.
            crate::log::dirty_pages::force_offload_writes(Some(false));
            let stored = stage_batch(&mut log, 2, 100);
            assert!(
                log.stages_appends(0),
                "staging continues while anything is staged"
            );
            write_staged(&mut log).await;
            assert!(!log.stages_appends(0));
            assert_bytes(&read_all(&log, 0), &stored, "read back");
            crate::log::dirty_pages::force_offload_writes(None);
        })
        .unwrap()
        .join()
        .unwrap();
}

#[test]
fn buffered_offload_stages_an_append_that_may_roll_the_segment() {
    glommio::LocalExecutorBuilder::default()
        .spawn(|| async {
            MODE.set(IoMode::BufferedOffload);
            let dir = test_dir();
            let (mut log, _) = open(dir.path(), staged_config(8192), 0);
            crate::log::dirty_pages::force_offload_writes(Some(true));
            let stored = stage_batch(&mut log, 2, 1000);
            write_staged(&mut log).await;
            crate::log::dirty_pages::force_offload_writes(Some(false));
            let room = 8192 - stored.len();
            assert!(!log.stages_appends(room), "fits: synchronous");
            assert!(
                log.stages_appends(room + 1),
                "would roll: staged, so the new segment is made off the shard"
            );
            stage_batch(&mut log, 8, 1000);
            assert!(
                matches!(log.begin_write(NOW), Ok(WriteStep::PrepareSegment(_))),
                "a roll of a staged append prepares its segment off the shard"
            );
            crate::log::dirty_pages::force_offload_writes(None);
        })
        .unwrap()
        .join()
        .unwrap();
}
