//! The cleaner with transactions: aborted data never survives compaction,
//! committed data is compacted as any other, markers and aborted
//! transaction entries stay, undecided transactions bound the pass.

use std::path::Path;

use super::*;
use crate::log::batch::{set_base_offset, BatchIter};
use crate::log::cleaner::{cleanable_info, CleanerConfig, LogCleaner};
use crate::log::config::LogConfig;
use crate::log::control_batch::{build_end_txn_marker_batch, ControlRecordType, EndTxnMarker};
use crate::log::producer_state::{ProducerStateManager, DEFAULT_PRODUCER_ID_EXPIRATION_MS};
use crate::log::read_slice_bytes;
use crate::log::records::{BatchBuilder, RecordIter};
use crate::log::test_util::append_info;

const NOW: i64 = 1_700_000_000_000;
const PLAIN: Option<i64> = None;

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 16 * 1024,
        compact: true,
        delete: false,
        min_cleanable_dirty_ratio: 0.0,
        ..LogConfig::default()
    }
}

/// A leader's append path: data (plain or in a producer's transaction)
/// and markers, an abort indexed as the partition does it.
struct Leader {
    log: Log,
    producers: ProducerStateManager,
}

impl Leader {
    fn new(dir: &Path) -> Leader {
        Leader {
            log: Log::open(dir, config(), 0, 0, NOW).unwrap().0,
            producers: ProducerStateManager::new(dir, DEFAULT_PRODUCER_ID_EXPIRATION_MS),
        }
    }

    /// One batch of `records` (key, value), in `pid`'s transaction or
    /// plain; returns its base offset.
    fn data(&mut self, pid: Option<i64>, records: &[(&str, &str)]) -> i64 {
        let offset = self.log.log_end_offset();
        let mut b = BatchBuilder::new(offset);
        if let Some(pid) = pid {
            let seq = self
                .producers
                .last_entry(pid)
                .map_or(0, |e| e.last_seq() + 1);
            b = b.producer(pid, 0, seq).transactional(true);
        }
        for (k, v) in records {
            b.push(NOW, Some(k.as_bytes()), Some(v.as_bytes()), &[]);
        }
        let bytes = b.build();
        self.log.append(&bytes, &append_info(&bytes), NOW).unwrap();
        self.producers
            .update(&BatchHeader::parse(&bytes).unwrap(), NOW);
        offset
    }

    /// `pid`'s marker at the log end; an abort is added to the transaction
    /// index as `Log::append_aborted_txn` does for the partition.
    fn end(&mut self, pid: i64, control_type: ControlRecordType) -> i64 {
        let offset = self.log.log_end_offset();
        let marker = EndTxnMarker {
            control_type,
            coordinator_epoch: 0,
        };
        let mut bytes = build_end_txn_marker_batch(pid, 0, marker, NOW);
        set_base_offset(&mut bytes, offset);
        self.log.append(&bytes, &append_info(&bytes), NOW).unwrap();
        let h = BatchHeader::parse(&bytes).unwrap();
        let done = self.producers.update_marker(&h, &marker, NOW).unwrap();
        if done.is_aborted {
            let txn = AbortedTxn {
                producer_id: pid,
                first_offset: done.first_offset,
                last_offset: done.last_offset,
                last_stable_offset: self.producers.last_stable_offset(&done),
            };
            self.log.append_aborted_txn(txn).unwrap();
        }
        offset
    }

    fn clean(&mut self, last_data_offset_of: &dyn Fn(i64) -> Option<i64>) -> bool {
        let mut c = LogCleaner::new(CleanerConfig::default());
        self.clean_with(&mut c, last_data_offset_of)
    }

    fn clean_with(
        &mut self,
        c: &mut LogCleaner,
        last_data_offset_of: &dyn Fn(i64) -> Option<i64>,
    ) -> bool {
        c.clean_now(&mut self.log, last_data_offset_of, NOW)
            .unwrap()
            .is_some()
    }
}

fn no_producers(_: i64) -> Option<i64> {
    None
}

/// Every batch from the log start: (base offset, control, records as
/// (offset, key, value)).
type Batch = (i64, bool, Vec<(i64, String, String)>);

fn batches(log: &Log) -> Vec<Batch> {
    let mut out = Vec::new();
    let mut next = log.log_start_offset();
    while next < log.log_end_offset() {
        let info = log.read(next, 1 << 20, i64::MAX, true).unwrap();
        let Some(slice) = info.slice else { break };
        let bytes = read_slice_bytes(&slice).unwrap();
        for b in BatchIter::new(&bytes) {
            let (_, h, raw) = b.unwrap();
            crate::log::batch::verify_crc(raw).unwrap();
            let text =
                |b: Option<&[u8]>| String::from_utf8_lossy(b.unwrap_or_default()).into_owned();
            let records = RecordIter::new(&raw[61..])
                .map(|r| {
                    let r = r.unwrap();
                    let offset = h.base_offset + r.offset_delta as i64;
                    (offset, text(r.key), text(r.value))
                })
                .filter(|_| !h.is_control())
                .collect();
            out.push((h.base_offset, h.is_control(), records));
            next = h.last_offset() + 1;
        }
    }
    out
}

/// The data records of `batches`, as (offset, "key=value").
fn records(log: &Log) -> Vec<(i64, String)> {
    batches(log)
        .into_iter()
        .flat_map(|(_, _, recs)| recs)
        .map(|(o, k, v)| (o, format!("{k}={v}")))
        .collect()
}

fn control_offsets(log: &Log) -> Vec<i64> {
    batches(log)
        .into_iter()
        .filter(|b| b.1)
        .map(|b| b.0)
        .collect()
}

fn rec(offset: i64, kv: &str) -> (i64, String) {
    (offset, kv.to_string())
}

#[test]
fn an_aborted_value_never_replaces_a_committed_one() {
    for committed_in_txn in [false, true] {
        let tmp = tempfile::tempdir().unwrap();
        let mut l = Leader::new(&tmp.path().join("t-0"));
        // k=v1 committed (plainly or in producer 1's transaction).
        if committed_in_txn {
            l.data(Some(1), &[("k", "v1")]);
            l.end(1, ControlRecordType::Commit);
        } else {
            l.data(PLAIN, &[("k", "v1")]);
            l.data(PLAIN, &[("other", "x")]);
        }
        // Producer 2 writes k=v2 and aborts.
        let v2 = l.data(Some(2), &[("k", "v2"), ("j", "aborted")]);
        let abort = l.end(2, ControlRecordType::Abort);
        l.log.roll(NOW).unwrap();
        let entries = l.log.collect_aborted_txns(0, abort + 1);
        assert_eq!(entries.len(), 1);
        assert!(l.clean(&no_producers));
        let want_first = if committed_in_txn {
            vec![rec(0, "k=v1")]
        } else {
            vec![rec(0, "k=v1"), rec(1, "other=x")]
        };
        assert_eq!(records(&l.log), want_first, "txn={committed_in_txn}");
        assert!(control_offsets(&l.log).contains(&abort), "the marker stays");
        assert!(!batches(&l.log).iter().any(|b| b.0 == v2));
        assert_eq!(
            l.log.segment_for(0).unwrap().txn_index().entries(),
            &entries[..],
            "the aborted transaction's entry stays"
        );
        // The log reopens, and its producer state replays, the same.
        let dir = l.log.dir().to_path_buf();
        l.log.close().unwrap();
        let mut log = Log::open(&dir, config(), 0, 0, NOW).unwrap().0;
        let mut ps = ProducerStateManager::new(&dir, DEFAULT_PRODUCER_ID_EXPIRATION_MS);
        log.replay_producer_state(&mut ps, 0).unwrap();
        assert_eq!(log.collect_aborted_txns(0, abort + 1), entries);
        assert_eq!(records(&log), want_first);
    }
}

#[test]
fn the_last_batch_of_an_active_producer_is_kept_empty() {
    let tmp = tempfile::tempdir().unwrap();
    let mut l = Leader::new(&tmp.path().join("t-0"));
    l.data(PLAIN, &[("k", "v1")]);
    let v2 = l.data(Some(2), &[("k", "v2")]);
    let abort = l.end(2, ControlRecordType::Abort);
    l.log.roll(NOW).unwrap();
    assert!(l.clean(&|pid| (pid == 2).then_some(v2)));
    let b = batches(&l.log);
    assert_eq!(records(&l.log), [rec(0, "k=v1")]);
    assert_eq!(
        b[1],
        (v2, false, vec![]),
        "an empty header keeps its sequence"
    );
    assert_eq!(control_offsets(&l.log), [abort]);
    // A later pass keeps it the same way.
    l.data(PLAIN, &[("z", "1")]);
    l.log.roll(NOW).unwrap();
    assert!(l.clean(&|pid| (pid == 2).then_some(v2)));
    assert_eq!(batches(&l.log)[1], (v2, false, vec![]));
}

/// Producer 1's transaction aborts while producer 2's, interleaved with it,
/// commits; producer 1's next transaction commits.
#[test]
fn an_aborted_transaction_interleaved_with_a_committed_one() {
    let tmp = tempfile::tempdir().unwrap();
    let mut l = Leader::new(&tmp.path().join("t-0"));
    l.data(PLAIN, &[("k", "v0"), ("j", "v0")]); // 0, 1
    l.data(Some(1), &[("k", "aborted")]); // 2
    l.data(Some(2), &[("j", "committed")]); // 3
    l.data(Some(1), &[("j", "aborted")]); // 4
    l.data(Some(2), &[("k", "committed")]); // 5
    assert_eq!(l.end(1, ControlRecordType::Abort), 6);
    assert_eq!(l.end(2, ControlRecordType::Commit), 7);
    l.data(Some(1), &[("m", "committed"), ("j", "aborted-not")]); // 8, 9
    l.data(Some(2), &[("k", "aborted-2")]); // 10
    assert_eq!(l.end(1, ControlRecordType::Commit), 11);
    assert_eq!(l.end(2, ControlRecordType::Abort), 12);
    l.log.roll(NOW).unwrap();
    let entries = l.log.collect_aborted_txns(0, 13);
    assert_eq!(
        entries
            .iter()
            .map(|t| (t.producer_id, t.first_offset, t.last_offset))
            .collect::<Vec<_>>(),
        [(1, 2, 6), (2, 10, 12)]
    );
    assert!(l.clean(&no_producers));
    assert_eq!(
        records(&l.log),
        [
            rec(5, "k=committed"),
            rec(8, "m=committed"),
            rec(9, "j=aborted-not")
        ]
    );
    assert_eq!(control_offsets(&l.log), [6, 7, 11, 12]);
    assert_eq!(
        l.log.segment_for(0).unwrap().txn_index().entries(),
        &entries[..]
    );
}

#[test]
fn committed_transactions_are_compacted_like_other_records() {
    let tmp = tempfile::tempdir().unwrap();
    let mut l = Leader::new(&tmp.path().join("t-0"));
    l.data(Some(1), &[("k", "1"), ("j", "1")]); // 0, 1
    l.end(1, ControlRecordType::Commit); // 2
    l.data(Some(2), &[("k", "2")]); // 3
    l.end(2, ControlRecordType::Commit); // 4
    l.data(PLAIN, &[("j", "3")]); // 5
    l.data(Some(1), &[("x", "4")]); // 6
    l.data(Some(1), &[("x", "5")]); // 7
    l.end(1, ControlRecordType::Commit); // 8
    l.log.roll(NOW).unwrap();
    assert!(l.clean(&no_producers));
    assert_eq!(
        records(&l.log),
        [rec(3, "k=2"), rec(5, "j=3"), rec(7, "x=5")]
    );
    assert_eq!(control_offsets(&l.log), [2, 4, 8]);
    assert!(l.log.collect_aborted_txns(0, 9).is_empty());
}

/// An aborted transaction whose marker is in a later segment, cleaned in a
/// group of its own: the data's group still knows it aborted.
#[test]
fn an_abort_marker_in_a_later_group() {
    let tmp = tempfile::tempdir().unwrap();
    let mut l = Leader::new(&tmp.path().join("t-0"));
    let filler = "f".repeat(9 * 1024);
    l.data(PLAIN, &[("k", "v1"), ("fill-0", &filler)]);
    l.data(Some(2), &[("k", "v2")]); // 2
    l.log.roll(NOW).unwrap();
    l.data(PLAIN, &[("fill-1", &filler)]); // 3
    let abort = l.end(2, ControlRecordType::Abort); // 4
    l.log.roll(NOW).unwrap();
    let mut c = LogCleaner::new(CleanerConfig::default());
    let stats = c
        .clean_now(&mut l.log, &no_producers, NOW)
        .unwrap()
        .unwrap();
    assert_eq!(stats.groups, 2, "{:?}", l.log.segment_base_offsets());
    assert_eq!(
        records(&l.log).iter().map(|r| r.0).collect::<Vec<_>>(),
        [0, 1, 3]
    );
    assert_eq!(control_offsets(&l.log), [abort]);
    assert_eq!(
        l.log
            .segment_for(abort)
            .unwrap()
            .txn_index()
            .entries()
            .len(),
        1
    );
}

/// A transaction not yet decided when the pass runs may still abort: its
/// data stays out of the map, so what it would replace survives; once it
/// aborts (and the log rolls) it is removed.
#[test]
fn an_open_transaction_bounds_the_pass() {
    let tmp = tempfile::tempdir().unwrap();
    let mut l = Leader::new(&tmp.path().join("t-0"));
    l.data(PLAIN, &[("k", "v1"), ("j", "v1")]); // 0, 1
    l.data(PLAIN, &[("j", "v2")]); // 2
    let open = l.data(Some(2), &[("k", "v2")]); // 3
    l.data(PLAIN, &[("z", "1")]); // 4
    l.log.roll(NOW).unwrap();
    let mut c = LogCleaner::new(CleanerConfig::default());
    let stats = c
        .clean_now(&mut l.log, &no_producers, NOW)
        .unwrap()
        .unwrap();
    assert_eq!(stats.end_offset, open, "mapped up to the open transaction");
    assert_eq!(l.log.cleaner_checkpoint(), open);
    assert_eq!(
        records(&l.log),
        [
            rec(0, "k=v1"),
            rec(2, "j=v2"),
            rec(3, "k=v2"),
            rec(4, "z=1")
        ]
    );
    // Nothing is due until the log rolls.
    assert_eq!(c.txn_bound(&l.log), Some(open));
    assert!(c.cleaning_priority(&l.log, NOW).is_none());
    assert!(cleanable_info(&l.log, NOW).cleanable_bytes > 0);
    let abort = l.end(2, ControlRecordType::Abort);
    assert!(
        c.cleaning_priority(&l.log, NOW).is_none(),
        "marker in the active segment"
    );
    l.log.roll(NOW).unwrap();
    assert!(c.cleaning_priority(&l.log, NOW).is_some());
    assert!(l.clean_with(&mut c, &no_producers));
    assert_eq!(l.log.cleaner_checkpoint(), abort + 1);
    assert_eq!(
        records(&l.log),
        [rec(0, "k=v1"), rec(2, "j=v2"), rec(4, "z=1")]
    );
    assert_eq!(c.txn_bound(&l.log), None);
}

/// A decided transaction whose marker is in the active segment bounds the
/// pass the same way until the roll: the marker's segment is never read.
#[test]
fn a_transaction_decided_in_the_active_segment_waits_for_the_roll() {
    let tmp = tempfile::tempdir().unwrap();
    let mut l = Leader::new(&tmp.path().join("t-0"));
    l.data(PLAIN, &[("k", "v1")]); // 0
    l.data(PLAIN, &[("k", "v2")]); // 1
    l.data(Some(1), &[("k", "v3")]); // 2
    l.log.roll(NOW).unwrap();
    l.end(1, ControlRecordType::Commit); // 3
    assert!(l.clean(&no_producers));
    assert_eq!(records(&l.log), [rec(1, "k=v2"), rec(2, "k=v3")]);
    l.log.roll(NOW).unwrap();
    assert!(l.clean(&no_producers));
    assert_eq!(records(&l.log), [rec(2, "k=v3")]);
}

#[test]
fn the_walk_follows_each_producers_aborted_range() {
    let txn = |producer_id, first_offset, last_offset| AbortedTxn {
        producer_id,
        first_offset,
        last_offset,
        last_stable_offset: 0,
    };
    let header = |pid: i64, base: i64, last: i64, transactional: bool, control: bool| {
        let mut b = BatchBuilder::new(base)
            .producer(pid, 0, 0)
            .transactional(transactional)
            .control(control);
        for _ in base..=last {
            b.push(NOW, Some(b"k"), Some(b"v"), &[]);
        }
        BatchHeader::parse(&b.build()).unwrap()
    };
    // In marker order, as the indexes list them: 2 [3, 6], 1 [0, 8].
    let mut walk = AbortedTxnWalk::new(vec![txn(2, 3, 6), txn(1, 0, 8)]);
    let mut seen = |pid, base, last, transactional, control| {
        walk.on_batch_read(&header(pid, base, last, transactional, control))
    };
    assert!(seen(1, 0, 1, true, false));
    assert!(!seen(3, 2, 2, true, false), "another producer's");
    assert!(seen(2, 3, 4, true, false));
    assert!(!seen(1, 5, 5, false, false), "not transactional");
    assert!(!seen(2, 6, 6, true, true), "the marker ends producer 2's");
    assert!(!seen(2, 7, 7, true, false), "producer 2's next transaction");
    // Producer 1's marker at 8 went missing: its range still ends there.
    assert!(!seen(1, 9, 9, true, false));
    let mut empty = AbortedTxnWalk::default();
    assert!(!empty.on_batch_read(&header(1, 0, 0, true, false)));
}

/// A full map stops before a transaction's marker: the pass maps up to the
/// transaction, and the next one, from there, sees it end. Bounded steps
/// restart the mapping in the middle of a pass.
#[test]
fn a_full_map_before_a_marker_still_makes_progress() {
    let tmp = tempfile::tempdir().unwrap();
    let mut l = Leader::new(&tmp.path().join("t-0"));
    l.data(PLAIN, &[("a", "1")]); // 0
    l.data(PLAIN, &[("b", "1")]); // 1
    l.data(Some(1), &[("a", "2")]); // 2
    l.data(PLAIN, &[("d", "1")]); // 3
    l.data(PLAIN, &[("e", "1")]); // 4
    l.end(1, ControlRecordType::Commit); // 5
    l.log.roll(NOW).unwrap();
    let dedupe_buffer_bytes = (1..4096)
        .find(|&b| crate::log::offset_map::OffsetMap::new(b).max_entries() == 3)
        .unwrap();
    let mut c = LogCleaner::new(CleanerConfig {
        dedupe_buffer_bytes,
        step_bytes: 1,
    });
    assert!(l.clean_with(&mut c, &no_producers));
    assert_eq!(l.log.cleaner_checkpoint(), 2, "the full map stopped at 3");
    assert_eq!(
        c.txn_bound(&l.log),
        None,
        "the marker may be past the full map"
    );
    assert_eq!(records(&l.log).len(), 5);
    assert!(l.clean_with(&mut c, &no_producers));
    assert_eq!(l.log.cleaner_checkpoint(), 6);
    assert_eq!(
        records(&l.log),
        [rec(1, "b=1"), rec(2, "a=2"), rec(3, "d=1"), rec(4, "e=1")]
    );
}
