//! Tests of a log's transaction indexes and marker replay.

use std::path::Path;

use super::*;
use crate::log::batch::set_base_offset;
use crate::log::cleaner::{CleanerConfig, LogCleaner};
use crate::log::config::LogConfig;
use crate::log::control_batch::{build_end_txn_marker_batch, ControlRecordType};
use crate::log::producer_state::{SequenceCheck, DEFAULT_PRODUCER_ID_EXPIRATION_MS};
use crate::log::records::BatchBuilder;
use crate::log::segment::{segment_file_path, TXN_INDEX_FILE_SUFFIX};
use crate::log::test_util::append_info;

const NOW: i64 = 1_700_000_000_000;

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 16 * 1024,
        ..LogConfig::default()
    }
}

fn open(dir: &Path, recovery_point: i64) -> Log {
    Log::open(dir, config(), recovery_point, 0, NOW).unwrap().0
}

fn producers(dir: &Path) -> ProducerStateManager {
    ProducerStateManager::new(dir, DEFAULT_PRODUCER_ID_EXPIRATION_MS)
}

/// A partition leader's append path for data and markers.
struct Leader {
    log: Log,
    producers: ProducerStateManager,
    /// Next sequence per producer id (ids are small).
    seq: [i32; 8],
}

impl Leader {
    fn new(dir: &Path) -> Leader {
        Leader {
            log: open(dir, 0),
            producers: producers(dir),
            seq: [0; 8],
        }
    }

    /// Two records from `pid` in its transaction, keyed `key`.
    fn data(&mut self, pid: i64, key: &str) -> i64 {
        let seq = &mut self.seq[pid as usize];
        let offset = self.log.log_end_offset();
        let bytes = BatchBuilder::new(offset)
            .producer(pid, 0, *seq)
            .transactional(true)
            .add(NOW, Some(key.as_bytes()), Some(b"v"), &[])
            .add(NOW, Some(key.as_bytes()), Some(b"w"), &[])
            .build();
        *seq += 2;
        let h = BatchHeader::parse(&bytes).unwrap();
        assert_eq!(self.producers.check(&h), Ok(SequenceCheck::Append));
        self.log.append(&bytes, &append_info(&bytes), NOW).unwrap();
        self.producers.update(&h, NOW);
        offset
    }

    /// `pid`'s marker; an abort gets its transaction index entry.
    fn end(&mut self, pid: i64, ty: ControlRecordType) -> Option<AbortedTxn> {
        let marker = EndTxnMarker {
            control_type: ty,
            coordinator_epoch: 1,
        };
        let mut bytes = build_end_txn_marker_batch(pid, 0, marker, NOW);
        set_base_offset(&mut bytes, self.log.log_end_offset());
        let h = BatchHeader::parse(&bytes).unwrap();
        self.producers.check_marker(&h, &marker).unwrap();
        self.log.append(&bytes, &append_info(&bytes), NOW).unwrap();
        let done = self.producers.update_marker(&h, &marker, NOW)?;
        let txn = AbortedTxn {
            producer_id: pid,
            first_offset: done.first_offset,
            last_offset: done.last_offset,
            last_stable_offset: self.producers.last_stable_offset(&done),
        };
        if done.is_aborted {
            self.log.append_aborted_txn(txn).unwrap();
        }
        done.is_aborted.then_some(txn)
    }
}

fn txn(producer_id: i64, first: i64, last: i64, lso: i64) -> AbortedTxn {
    AbortedTxn {
        producer_id,
        first_offset: first,
        last_offset: last,
        last_stable_offset: lso,
    }
}

fn txn_index_path(dir: &Path, base: i64) -> std::path::PathBuf {
    segment_file_path(dir, base, TXN_INDEX_FILE_SUFFIX)
}

/// Segment 0: P1 [0, 2), P2 [2, 4), P1 aborted at 4 (LSO 2: P2 is open),
/// P2 committed at 5. Segment 6: P3 [6, 8), aborted at 8. Active at 9.
fn two_aborts(dir: &Path) -> Leader {
    let mut l = Leader::new(dir);
    l.data(1, "a");
    l.data(2, "b");
    assert_eq!(l.end(1, ControlRecordType::Abort), Some(txn(1, 0, 4, 2)));
    assert_eq!(l.end(2, ControlRecordType::Commit), None);
    l.log.roll(NOW).unwrap();
    l.data(3, "c");
    assert_eq!(l.end(3, ControlRecordType::Abort), Some(txn(3, 6, 8, 9)));
    l.log.roll(NOW).unwrap();
    l
}

#[test]
fn aborts_are_indexed_per_segment_and_collected() {
    let dir = tempfile::tempdir().unwrap();
    let l = two_aborts(dir.path());
    let log = &l.log;
    assert_eq!(log.segment_base_offsets(), [0, 6, 9]);
    assert!(txn_index_path(dir.path(), 0).exists() && txn_index_path(dir.path(), 6).exists());
    assert!(
        !txn_index_path(dir.path(), 9).exists(),
        "made by the first abort only"
    );
    assert_eq!(
        log.collect_aborted_txns(0, 10),
        [txn(1, 0, 4, 2), txn(3, 6, 8, 9)]
    );
    // P1's entry has an LSO below 3, so segment 6 is searched; its entry
    // does not overlap [0, 3) but its LSO ends the search.
    assert_eq!(log.collect_aborted_txns(0, 3), [txn(1, 0, 4, 2)]);
    assert_eq!(log.collect_aborted_txns(7, 9), [txn(3, 6, 8, 9)]);
    let none = log.collect_aborted_txns(5, 6);
    assert!(none.is_empty() && none.capacity() == 0);
    assert!(log.collect_aborted_txns(9, 9).is_empty());
    // A clean reopen loads them.
    let Leader { log, .. } = l;
    log.close().unwrap();
    let log = open(dir.path(), 9);
    assert_eq!(log.collect_aborted_txns(0, 10).len(), 2);
    assert_eq!(
        log.segment_for(6).unwrap().txn_index().entries(),
        [txn(3, 6, 8, 9)]
    );
}

#[test]
fn txn_indexes_go_with_their_segments() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = two_aborts(dir.path()).log;
    // The marker at 8 goes, then the whole segment 6.
    log.truncate_to(8).unwrap();
    assert!(log.segment_for(6).unwrap().txn_index().is_empty());
    assert_eq!(
        std::fs::metadata(txn_index_path(dir.path(), 6))
            .unwrap()
            .len(),
        0
    );
    log.truncate_to(5).unwrap();
    assert!(!txn_index_path(dir.path(), 6).exists());
    assert_eq!(log.collect_aborted_txns(0, 10), [txn(1, 0, 4, 2)]);
    log.flush().unwrap();
    log.roll(NOW).unwrap();
    log.delete_records_before(5).unwrap();
    assert!(!txn_index_path(dir.path(), 0).exists());
    assert!(log.collect_aborted_txns(5, 10).is_empty());

    let mut log = two_aborts(&dir.path().join("t-1")).log;
    log.truncate_fully_and_start_at(20).unwrap();
    for base in [0, 6] {
        assert!(!txn_index_path(&dir.path().join("t-1"), base).exists());
    }
}

#[test]
fn replay_passes_markers_and_restores_lost_entries() {
    let dir = tempfile::tempdir().unwrap();
    let l = two_aborts(dir.path());
    let mut seen = Vec::new();
    l.log
        .for_each_batch_from(3, |h, m| {
            seen.push((h.base_offset, m.map(|m| m.control_type)))
        })
        .unwrap();
    use ControlRecordType::{Abort, Commit};
    assert_eq!(
        seen,
        [
            (2, None),
            (4, Some(Abort)),
            (5, Some(Commit)),
            (6, None),
            (8, Some(Abort))
        ]
    );
    l.log.close().unwrap();
    // A crash between segment 6's marker and its entry.
    std::fs::remove_file(txn_index_path(dir.path(), 6)).unwrap();
    let mut log = open(dir.path(), 0);
    let mut ps = producers(dir.path());
    let from = ps.load(0, log.log_end_offset(), NOW).unwrap();
    log.replay_producer_state(&mut ps, from).unwrap();
    assert_eq!(
        log.collect_aborted_txns(0, 10),
        [txn(1, 0, 4, 2), txn(3, 6, 8, 9)]
    );
    assert_eq!(ps.first_unstable_offset(), Some(0), "decided above the HW");
    ps.on_high_watermark_updated(log.log_end_offset());
    assert_eq!(ps.first_unstable_offset(), None);
    // Replaying again adds nothing.
    let mut again = producers(dir.path());
    log.replay_producer_state(&mut again, 0).unwrap();
    assert_eq!(log.collect_aborted_txns(0, 10).len(), 2);
}

#[test]
fn recovery_drops_the_entry_of_a_cut_marker() {
    let dir = tempfile::tempdir().unwrap();
    let mut l = Leader::new(dir.path());
    l.data(1, "a");
    l.data(2, "b");
    l.end(2, ControlRecordType::Abort).unwrap();
    l.end(1, ControlRecordType::Abort).unwrap();
    let entries = l.log.collect_aborted_txns(0, 10);
    assert_eq!(entries, [txn(2, 2, 4, 0), txn(1, 0, 5, 6)]);
    l.log.close().unwrap();
    // The last marker's bytes go bad.
    let log_path = segment_file_path(dir.path(), 0, ".log");
    let mut bytes = std::fs::read(&log_path).unwrap();
    *bytes.last_mut().unwrap() ^= 0xff;
    std::fs::write(&log_path, bytes).unwrap();
    let log = open(dir.path(), 0);
    assert_eq!(log.log_end_offset(), 5);
    assert_eq!(log.collect_aborted_txns(0, 10), [txn(2, 2, 4, 0)]);
    assert_eq!(
        std::fs::metadata(txn_index_path(dir.path(), 0))
            .unwrap()
            .len(),
        34
    );
}

fn compacted() -> LogConfig {
    LogConfig {
        compact: true,
        delete: false,
        min_cleanable_dirty_ratio: 0.0,
        ..config()
    }
}

#[test]
fn cleaning_keeps_the_merged_segments_aborts() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t-0");
    let mut l = two_aborts(&dir);
    l.log.set_config(compacted());
    let mut cleaner = LogCleaner::new(CleanerConfig::default());
    cleaner
        .clean_now(&mut l.log, &|_| None, NOW, None)
        .unwrap()
        .expect("cleaned");
    assert_eq!(l.log.segment_base_offsets(), [0, 9]);
    assert_eq!(
        l.log.segment_for(0).unwrap().txn_index().entries(),
        [txn(1, 0, 4, 2), txn(3, 6, 8, 9)]
    );
    assert!(!txn_index_path(&dir, 6).exists());
    l.log.close().unwrap();
    let log = Log::open(&dir, compacted(), 9, 0, NOW).unwrap().0;
    assert_eq!(log.collect_aborted_txns(0, 10).len(), 2);
    log.close().unwrap();

    // A crash right after the commit rename: the `.swap` files win.
    let other = tmp.path().join("t-1");
    let l = two_aborts(&other);
    l.log.close().unwrap();
    let base = "00000000000000000000";
    for suffix in [".log", ".txnindex"] {
        std::fs::copy(
            dir.join(format!("{base}{suffix}")),
            other.join(format!("{base}{suffix}.swap")),
        )
        .unwrap();
    }
    let log = Log::open(&other, compacted(), 0, 0, NOW).unwrap().0;
    assert_eq!(log.segment_base_offsets(), [0, 9]);
    assert_eq!(log.collect_aborted_txns(0, 10).len(), 2);
}
