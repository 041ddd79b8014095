//! Tests of the transactional producer state.

use super::super::{
    snapshot_path, wait_for_snapshot_syncs, SequenceCheck, DEFAULT_PRODUCER_ID_EXPIRATION_MS,
};
use super::*;
use crate::log::batch::set_base_offset;
use crate::log::control_batch::build_end_txn_marker_batch;
use crate::log::records::BatchBuilder;

const TS: i64 = 1_700_000_000_000;

/// A batch of `n` records from (pid, epoch, seq) at `offset`.
fn data(pid: i64, epoch: i16, seq: i32, n: usize, offset: i64, transactional: bool) -> BatchHeader {
    let mut b = BatchBuilder::new(0)
        .producer(pid, epoch, seq)
        .transactional(transactional);
    for _ in 0..n {
        b.push(TS, None, Some(b"v"), &[]);
    }
    let mut bytes = b.build();
    set_base_offset(&mut bytes, offset);
    BatchHeader::parse(&bytes).unwrap()
}

fn txn_data(pid: i64, seq: i32, offset: i64) -> BatchHeader {
    data(pid, 0, seq, 2, offset, true)
}

fn marker(ty: ControlRecordType, coordinator_epoch: i32) -> EndTxnMarker {
    EndTxnMarker {
        control_type: ty,
        coordinator_epoch,
    }
}

/// A marker batch from (pid, epoch) at `offset`.
fn marker_at(pid: i64, epoch: i16, m: EndTxnMarker, offset: i64) -> BatchHeader {
    let mut bytes = build_end_txn_marker_batch(pid, epoch, m, TS + offset);
    set_base_offset(&mut bytes, offset);
    BatchHeader::parse(&bytes).unwrap()
}

fn manager() -> (tempfile::TempDir, ProducerStateManager) {
    let dir = tempfile::tempdir().unwrap();
    let m = ProducerStateManager::new(dir.path(), DEFAULT_PRODUCER_ID_EXPIRATION_MS);
    (dir, m)
}

fn append(m: &mut ProducerStateManager, h: &BatchHeader) {
    assert_eq!(m.check(h), Ok(SequenceCheck::Append));
    m.update(h, TS);
}

/// Appends the marker as the broker would, returning the completed
/// transaction with the LSO of its index entry.
fn end(
    m: &mut ProducerStateManager,
    h: &BatchHeader,
    mk: EndTxnMarker,
) -> Option<(CompletedTxn, i64)> {
    assert_eq!(m.check_marker(h, &mk), Ok(()));
    let done = m.update_marker(h, &mk, h.max_timestamp)?;
    Some((done, m.last_stable_offset(&done)))
}

#[test]
fn a_transaction_starts_and_commits_then_another_aborts() {
    let (_d, mut m) = manager();
    append(&mut m, &txn_data(1, 0, 0));
    append(&mut m, &txn_data(1, 2, 2));
    assert_eq!(m.ongoing_txns().collect::<Vec<_>>(), [(0, 1)]);
    assert_eq!(m.last_entry(1).unwrap().current_txn_first_offset, Some(0));
    assert_eq!(m.first_unstable_offset(), Some(0));

    let commit = marker(ControlRecordType::Commit, 3);
    let (done, lso) = end(&mut m, &marker_at(1, 0, commit, 4), commit).unwrap();
    let committed = CompletedTxn {
        producer_id: 1,
        first_offset: 0,
        last_offset: 4,
        is_aborted: false,
    };
    assert_eq!((done, lso), (committed, 5));
    let e = m.last_entry(1).unwrap();
    assert_eq!((e.current_txn_first_offset, e.coordinator_epoch), (None, 3));
    assert_eq!(e.last_timestamp_ms, TS + 4);
    assert_eq!(m.map_end_offset(), 5);
    assert_eq!(m.ongoing_txns().count(), 0);
    // Decided, but the high watermark has not passed the marker.
    assert_eq!(m.unreplicated_txns().collect::<Vec<_>>(), [&committed]);
    assert_eq!(m.first_unstable_offset(), Some(0));
    m.on_high_watermark_updated(4);
    assert_eq!(m.first_unstable_offset(), Some(0));
    m.on_high_watermark_updated(5);
    assert_eq!(m.first_unstable_offset(), None);

    append(&mut m, &txn_data(1, 4, 5));
    let abort = marker(ControlRecordType::Abort, 3);
    let (done, lso) = end(&mut m, &marker_at(1, 0, abort, 7), abort).unwrap();
    assert_eq!(
        (done, lso),
        (
            CompletedTxn {
                producer_id: 1,
                first_offset: 5,
                last_offset: 7,
                is_aborted: true,
            },
            8
        )
    );
}

#[test]
fn interleaved_transactions_hold_back_the_lso() {
    let (_d, mut m) = manager();
    append(&mut m, &txn_data(1, 0, 0));
    append(&mut m, &txn_data(2, 0, 2));
    append(&mut m, &txn_data(1, 2, 4));
    assert_eq!(m.ongoing_txns().collect::<Vec<_>>(), [(0, 1), (2, 2)]);
    let abort = marker(ControlRecordType::Abort, 0);
    let (done, lso) = end(&mut m, &marker_at(2, 0, abort, 6), abort).unwrap();
    assert_eq!(
        (done.first_offset, done.last_offset, done.is_aborted),
        (2, 6, true)
    );
    // Producer 1's transaction, open since 0, bounds the LSO.
    assert_eq!(lso, 0);
    let commit = marker(ControlRecordType::Commit, 0);
    let (done, lso) = end(&mut m, &marker_at(1, 0, commit, 7), commit).unwrap();
    assert_eq!((done.first_offset, done.last_offset, lso), (0, 7, 8));
    // Both decided, neither replicated yet.
    assert_eq!(m.first_unstable_offset(), Some(0));
    m.on_high_watermark_updated(7);
    assert_eq!(m.unreplicated_txns().count(), 1);
    assert_eq!(m.first_unstable_offset(), Some(0));
    m.on_high_watermark_updated(8);
    assert_eq!(m.first_unstable_offset(), None);
    // An open transaction is below any decided one above the HW.
    append(&mut m, &txn_data(2, 2, 8));
    append(&mut m, &txn_data(3, 0, 10));
    let (_, lso) = end(&mut m, &marker_at(3, 0, abort, 12), abort).unwrap();
    assert_eq!(lso, 8);
    assert_eq!(m.first_unstable_offset(), Some(8));
    m.on_log_start_offset_incremented(13);
    assert_eq!(m.unreplicated_txns().count(), 0);
    assert_eq!(m.first_unstable_offset(), Some(8));
}

#[test]
fn non_transactional_writes_during_a_transaction_are_refused() {
    let (_d, mut m) = manager();
    append(&mut m, &txn_data(1, 0, 0));
    let plain = data(1, 0, 2, 1, 2, false);
    let err = m.check(&plain).unwrap_err();
    assert_eq!(err.error_code(), 48);
    assert!(matches!(err, ProducerStateError::InvalidTxnState(_)));
    // Epoch and sequence errors come first, as in Kafka.
    assert_eq!(
        m.check(&data(1, 0, 9, 1, 2, false))
            .unwrap_err()
            .error_code(),
        45
    );
    append(&mut m, &txn_data(1, 2, 2));
    let commit = marker(ControlRecordType::Commit, 0);
    end(&mut m, &marker_at(1, 0, commit, 4), commit).unwrap();
    append(&mut m, &data(1, 0, 4, 1, 5, false));
}

#[test]
fn stale_markers_are_refused() {
    let (_d, mut m) = manager();
    let commit = marker(ControlRecordType::Commit, 5);
    // An unknown producer takes any marker.
    assert_eq!(m.check_marker(&marker_at(9, 0, commit, 0), &commit), Ok(()));
    append(&mut m, &data(1, 2, 0, 2, 0, true));
    let old_epoch = marker_at(1, 1, commit, 2);
    assert_eq!(
        m.check_marker(&old_epoch, &commit)
            .unwrap_err()
            .error_code(),
        47
    );
    assert!(end(&mut m, &marker_at(1, 2, commit, 2), commit).is_some());
    let zombie = marker(ControlRecordType::Abort, 4);
    let err = m
        .check_marker(&marker_at(1, 2, zombie, 3), &zombie)
        .unwrap_err();
    assert_eq!(err.error_code(), 52);
    // The same coordinator epoch, or a newer producer epoch, is fine.
    assert_eq!(m.check_marker(&marker_at(1, 3, commit, 3), &commit), Ok(()));
}

#[test]
fn a_marker_without_a_transaction_completes_nothing() {
    let (_d, mut m) = manager();
    append(&mut m, &data(1, 0, 0, 1, 0, false));
    let abort = marker(ControlRecordType::Abort, 2);
    assert_eq!(end(&mut m, &marker_at(1, 1, abort, 1), abort), None);
    let e = m.last_entry(1).unwrap();
    // A new epoch forgets the batches, as in Kafka.
    assert_eq!(
        (e.producer_epoch, e.coordinator_epoch, e.batches().count()),
        (1, 2, 0)
    );
    assert_eq!((m.first_unstable_offset(), m.map_end_offset()), (None, 2));
}

#[test]
fn an_open_transaction_survives_a_snapshot() {
    let (dir, mut m) = manager();
    append(&mut m, &txn_data(1, 0, 10));
    append(&mut m, &data(2, 0, 0, 1, 12, false));
    m.take_snapshot(13).unwrap();
    wait_for_snapshot_syncs();
    assert!(snapshot_path(dir.path(), 13).exists());
    let mut n = ProducerStateManager::new(dir.path(), DEFAULT_PRODUCER_ID_EXPIRATION_MS);
    assert_eq!(n.load(0, 20, TS).unwrap(), 13);
    assert_eq!(n.ongoing_txns().collect::<Vec<_>>(), [(10, 1)]);
    assert_eq!(n.first_unstable_offset(), Some(10));
    // Even long idle, a producer with an open transaction stays.
    n.remove_expired(TS + 2 * DEFAULT_PRODUCER_ID_EXPIRATION_MS);
    assert_eq!(n.producer_count(), 1);
    let abort = marker(ControlRecordType::Abort, 0);
    let done = n.replay(&marker_at(1, 0, abort, 13), Some(abort)).unwrap();
    assert_eq!(
        (done.first_offset, done.last_offset, done.is_aborted),
        (10, 13, true)
    );
    assert_eq!(n.last_stable_offset(&done), 14);
    // Truncation forgets every transaction.
    n.truncate_to(5).unwrap();
    assert_eq!(
        (n.ongoing_txns().count(), n.first_unstable_offset()),
        (0, None)
    );
}

#[test]
fn replay_without_checks() {
    let (_d, mut m) = manager();
    assert_eq!(m.replay(&txn_data(1, 0, 0), None), None);
    // A stale epoch is replayed as it is, as Kafka's REPLICATION origin.
    let commit = marker(ControlRecordType::Commit, 0);
    m.replay(&data(1, 3, 0, 1, 2, true), None);
    let done = m.replay(&marker_at(1, 1, commit, 3), Some(commit)).unwrap();
    assert_eq!((done.first_offset, done.is_aborted), (0, false));
    assert_eq!(m.last_entry(1).unwrap().producer_epoch, 1);
    // An unreadable marker moves only the map end.
    m.replay(&txn_data(2, 0, 4), None);
    assert_eq!(m.replay(&marker_at(2, 0, commit, 6), None), None);
    assert_eq!(
        (m.map_end_offset(), m.first_unstable_offset()),
        (7, Some(0))
    );
    assert_eq!(m.ongoing_txns().collect::<Vec<_>>(), [(4, 2)]);
}

#[test]
fn a_marker_given_to_update_ends_the_transaction_unrecorded() {
    let (_d, mut m) = manager();
    append(&mut m, &txn_data(1, 0, 0));
    m.update(
        &marker_at(1, 0, marker(ControlRecordType::Commit, 0), 2),
        TS,
    );
    assert_eq!(m.last_entry(1).unwrap().current_txn_first_offset, None);
    assert_eq!(
        (m.ongoing_txns().count(), m.first_unstable_offset()),
        (0, None)
    );
}

#[test]
fn a_corrupt_snapshot_cannot_make_completion_panic() {
    let (dir, mut m) = manager();
    append(&mut m, &txn_data(1, 0, 10));
    append(&mut m, &txn_data(2, 0, 12));
    m.take_snapshot(14).unwrap();
    wait_for_snapshot_syncs();
    let mut n = ProducerStateManager::new(dir.path(), DEFAULT_PRODUCER_ID_EXPIRATION_MS);
    n.load(0, 20, TS).unwrap();
    // Both producers claim offset 10 (as a corrupt snapshot could).
    n.producers.get_mut(&2).unwrap().current_txn_first_offset = Some(10);
    let abort = marker(ControlRecordType::Abort, 0);
    let done = n.replay(&marker_at(2, 0, abort, 14), Some(abort)).unwrap();
    assert_eq!(done.first_offset, 10);
    assert_eq!(n.ongoing_txns().collect::<Vec<_>>(), [(10, 1), (12, 2)]);
}
