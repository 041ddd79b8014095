//! The cleaner with transactions: aborted data never survives compaction,
//! committed data is compacted as any other, markers and aborted
//! transaction entries stay, undecided transactions bound the pass.

use std::path::Path;

use super::*;
use crate::log::batch::{set_base_offset, BatchIter};
use crate::log::cleaner::{cleanable_info, CleanerConfig, LastRecord, LogCleaner};
use crate::log::cleaner_filter::TxnFate;
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
        // None: no transaction of the producer's here to end.
        let Some(done) = self.producers.update_marker(&h, &marker, NOW) else {
            return offset;
        };
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

    fn clean(&mut self, last_data_offset_of: &dyn Fn(i64) -> Option<LastRecord>) -> bool {
        let mut c = LogCleaner::new(CleanerConfig::default());
        self.clean_with(&mut c, last_data_offset_of)
    }

    fn clean_with(
        &mut self,
        c: &mut LogCleaner,
        last_data_offset_of: &dyn Fn(i64) -> Option<LastRecord>,
    ) -> bool {
        c.clean_now(&mut self.log, last_data_offset_of, NOW, None)
            .unwrap()
            .is_some()
    }
}

fn no_producers(_: i64) -> Option<LastRecord> {
    None
}

/// The producer state of producer `of`, whose last data batch ends at
/// `offset` (epoch 0, as `Leader` writes).
fn last_data(pid: i64, of: i64, offset: i64) -> Option<LastRecord> {
    (pid == of).then_some(LastRecord {
        last_data_offset: Some(offset),
        producer_epoch: 0,
    })
}

/// Every batch from the log start: (base offset, control, records as
/// (offset, key, value)).
type Batch = (i64, bool, Vec<(i64, String, String)>);

/// Calls `f` with each batch from the log start, CRC-checked.
fn for_each_stored_batch(log: &Log, mut f: impl FnMut(BatchHeader, &[u8])) {
    let mut next = log.log_start_offset();
    while next < log.log_end_offset() {
        let info = log.read(next, 1 << 20, i64::MAX, true).unwrap();
        let Some(slice) = info.slice else { break };
        let bytes = read_slice_bytes(&slice).unwrap();
        for b in BatchIter::new(&bytes) {
            let (_, h, raw) = b.unwrap();
            crate::log::batch::verify_crc(raw).unwrap();
            next = h.last_offset() + 1;
            f(h, raw);
        }
    }
}

fn batches(log: &Log) -> Vec<Batch> {
    let mut out = Vec::new();
    for_each_stored_batch(log, |h, raw| {
        let text = |b: Option<&[u8]>| String::from_utf8_lossy(b.unwrap_or_default()).into_owned();
        let records = RecordIter::new(&raw[61..])
            .map(|r| {
                let r = r.unwrap();
                let offset = h.base_offset + r.offset_delta as i64;
                (offset, text(r.key), text(r.value))
            })
            .filter(|_| !h.is_control())
            .collect();
        out.push((h.base_offset, h.is_control(), records));
    });
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
    assert!(l.clean(&|pid| last_data(pid, 2, v2)));
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
    assert!(l.clean(&|pid| last_data(pid, 2, v2)));
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
        .clean_now(&mut l.log, &no_producers, NOW, None)
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
        .clean_now(&mut l.log, &no_producers, NOW, None)
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
    assert!(c.cleaning_priority(&l.log, NOW, None).is_none());
    assert!(cleanable_info(&l.log, NOW).cleanable_bytes > 0);
    let abort = l.end(2, ControlRecordType::Abort);
    assert!(
        c.cleaning_priority(&l.log, NOW, None).is_none(),
        "marker in the active segment"
    );
    l.log.roll(NOW).unwrap();
    assert!(c.cleaning_priority(&l.log, NOW, None).is_some());
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
    use TxnFate::{AbortedData, Data};
    assert_eq!(seen(1, 0, 1, true, false), AbortedData);
    assert_eq!(seen(3, 2, 2, true, false), Data, "another producer's");
    assert_eq!(seen(2, 3, 4, true, false), AbortedData);
    assert_eq!(seen(1, 5, 5, false, false), Data, "not transactional");
    assert_eq!(
        seen(2, 6, 6, true, true),
        TxnFate::Marker {
            removable: false,
            keeps_entry: Some(txn(2, 3, 6))
        },
        "the marker ends producer 2's, whose data was seen"
    );
    assert_eq!(seen(2, 7, 7, true, false), Data, "producer 2's next");
    // Producer 1's marker at 8 went missing: its range still ends there.
    assert_eq!(seen(1, 9, 9, true, false), Data);
    assert_eq!(
        seen(3, 10, 10, true, true),
        TxnFate::Marker {
            removable: false,
            keeps_entry: None
        },
        "a commit whose data was seen"
    );
    assert_eq!(
        seen(4, 11, 11, true, true),
        TxnFate::Marker {
            removable: true,
            keeps_entry: None
        },
        "a commit with no data seen"
    );
    let mut empty = AbortedTxnWalk::default();
    assert_eq!(empty.on_batch_read(&header(1, 0, 0, true, false)), Data);
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

/// Kafka's marker lifecycle: the pass that removes a transaction's data
/// keeps its marker (and an abort's index entry); the next finds no data,
/// drops the entry and sets the marker's delete horizon; the first pass
/// after the horizon removes the marker.
#[test]
fn markers_go_once_their_data_is_gone_and_their_horizon_passed() {
    let tmp = tempfile::tempdir().unwrap();
    let mut l = Leader::new(&tmp.path().join("t-0"));
    l.data(Some(1), &[("k", "committed")]); // 0
    l.data(PLAIN, &[("k", "plain")]); // 1: supersedes it
    let commit = l.end(1, ControlRecordType::Commit); // 2
    l.data(Some(2), &[("j", "aborted")]); // 3
    let abort = l.end(2, ControlRecordType::Abort); // 4
    l.log.roll(NOW).unwrap();
    let lso = Some(l.log.log_end_offset());
    let mut c = LogCleaner::new(CleanerConfig::default());
    let mut pass = |l: &mut Leader, now_ms: i64| {
        c.clean_now(&mut l.log, &no_producers, now_ms, lso)
            .unwrap()
            .is_some()
    };
    assert!(pass(&mut l, NOW));
    assert_eq!(records(&l.log), [rec(1, "k=plain")]);
    assert_eq!(control_offsets(&l.log), [commit, abort], "data was seen");
    assert_eq!(l.log.collect_aborted_txns(0, abort + 1).len(), 1);
    // Something new to clean.
    l.data(PLAIN, &[("z", "1")]); // 5
    l.log.roll(NOW).unwrap();
    let lso = Some(l.log.log_end_offset());
    let mut c = LogCleaner::new(CleanerConfig::default());
    assert!(c
        .clean_now(&mut l.log, &no_producers, NOW, lso)
        .unwrap()
        .is_some());
    assert_eq!(
        control_offsets(&l.log),
        [commit, abort],
        "until the horizon"
    );
    assert!(
        l.log.collect_aborted_txns(0, abort + 1).is_empty(),
        "no aborted data is left to skip"
    );
    let horizon = NOW + l.log.config().delete_retention_ms;
    for b in batches_with_headers(&l.log)
        .iter()
        .filter(|h| h.is_control())
    {
        assert_eq!(crate::log::cleaner::delete_horizon_ms(b), Some(horizon));
    }
    assert!(
        c.cleaning_priority(&l.log, horizon - 1, lso).is_none(),
        "nothing is due before the horizon"
    );
    assert!(c.cleaning_priority(&l.log, horizon, lso).is_some());
    assert!(c
        .clean_now(&mut l.log, &no_producers, horizon, lso)
        .unwrap()
        .is_some());
    assert!(control_offsets(&l.log).is_empty());
    assert_eq!(records(&l.log), [rec(1, "k=plain"), rec(5, "z=1")]);
    // Reopened, the log and its producer state replay the same.
    let dir = l.log.dir().to_path_buf();
    l.log.close().unwrap();
    let mut log = Log::open(&dir, config(), 0, 0, NOW).unwrap().0;
    let mut ps = ProducerStateManager::new(&dir, DEFAULT_PRODUCER_ID_EXPIRATION_MS);
    log.replay_producer_state(&mut ps, 0).unwrap();
    assert_eq!(records(&log), [rec(1, "k=plain"), rec(5, "z=1")]);
}

/// A producer that wrote only a marker here keeps it, emptied, while the
/// producer is active (Kafka's `isBatchLastRecordOfProducer`).
#[test]
fn the_marker_of_a_producer_without_data_is_kept_empty() {
    let tmp = tempfile::tempdir().unwrap();
    let mut l = Leader::new(&tmp.path().join("t-0"));
    l.data(PLAIN, &[("k", "1")]); // 0
    let abort = l.end(3, ControlRecordType::Abort); // 1: no data of producer 3
    l.log.roll(NOW).unwrap();
    let only_markers = |pid: i64| {
        (pid == 3).then_some(LastRecord {
            last_data_offset: None,
            producer_epoch: 0,
        })
    };
    let lso = Some(l.log.log_end_offset());
    let horizon = NOW + l.log.config().delete_retention_ms;
    let mut c = LogCleaner::new(CleanerConfig::default());
    c.clean_now(&mut l.log, &only_markers, NOW, lso).unwrap();
    assert_eq!(control_offsets(&l.log), [abort], "horizon set");
    c.clean_now(&mut l.log, &only_markers, horizon, lso)
        .unwrap();
    let kept: Vec<BatchHeader> = batches_with_headers(&l.log);
    assert_eq!(kept.len(), 2);
    assert!(kept[1].is_control() && kept[1].records_count == 0);
    assert_eq!(kept[1].base_offset, abort);
    // Once the producer is gone, so is the empty marker.
    l.data(PLAIN, &[("z", "1")]);
    l.log.roll(NOW).unwrap();
    let lso = Some(l.log.log_end_offset());
    c.clean_now(&mut l.log, &no_producers, horizon, lso)
        .unwrap();
    assert!(batches_with_headers(&l.log).iter().all(|h| !h.is_control()));
}

/// Given the last stable offset, the cleaner knows every transaction below
/// it is decided: one decided in the active segment does not hold the pass
/// (without it, `a_transaction_decided_in_the_active_segment_waits_for_the_roll`),
/// and one still open bounds it.
#[test]
fn the_last_stable_offset_bounds_the_pass() {
    let tmp = tempfile::tempdir().unwrap();
    let mut l = Leader::new(&tmp.path().join("t-0"));
    l.data(PLAIN, &[("k", "1")]); // 0
    l.data(Some(1), &[("k", "2")]); // 1
    l.data(PLAIN, &[("j", "1")]); // 2
    l.log.roll(NOW).unwrap();
    l.data(PLAIN, &[("j", "2")]); // 3
                                  // Open: the LSO is its first offset, and the pass stops there.
    let mut c = LogCleaner::new(CleanerConfig::default());
    c.clean_now(&mut l.log, &no_producers, NOW, Some(1))
        .unwrap();
    assert_eq!(l.log.cleaner_checkpoint(), 1);
    assert_eq!(records(&l.log).len(), 4);
    // Decided in the active segment: the whole first segment is cleaned.
    l.end(1, ControlRecordType::Commit); // 4
    let lso = Some(l.log.log_end_offset());
    c.clean_now(&mut l.log, &no_producers, NOW, lso).unwrap();
    assert_eq!(l.log.cleaner_checkpoint(), 3);
    assert_eq!(
        records(&l.log),
        [rec(1, "k=2"), rec(2, "j=1"), rec(3, "j=2")]
    );
}

fn batches_with_headers(log: &Log) -> Vec<BatchHeader> {
    let mut out = Vec::new();
    for_each_stored_batch(log, |h, _| out.push(h));
    out
}
