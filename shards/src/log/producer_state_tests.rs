//! Tests of `ProducerStateManager`: idempotence, snapshots, expiry.

use super::*;
use crate::log::batch::set_base_offset;
use crate::log::records::BatchBuilder;

/// Header of a batch of `n` records from (pid, epoch, seq), at `offset`.
fn header(pid: i64, epoch: i16, seq: i32, n: usize, offset: i64, ts: i64) -> BatchHeader {
    let mut b = BatchBuilder::new(0).producer(pid, epoch, seq);
    for _ in 0..n {
        b.push(ts, None, Some(b"v"), &[]);
    }
    let mut bytes = b.build();
    set_base_offset(&mut bytes, offset);
    BatchHeader::parse(&bytes).unwrap()
}

fn manager() -> (tempfile::TempDir, ProducerStateManager) {
    let dir = tempfile::tempdir().unwrap();
    let m = ProducerStateManager::new(dir.path(), DEFAULT_PRODUCER_ID_EXPIRATION_MS);
    (dir, m)
}

/// Appends `count` batches of 2 records for pid 1 epoch 0 from seq 0.
fn append_run(m: &mut ProducerStateManager, count: i32) {
    for i in 0..count {
        let h = header(1, 0, i * 2, 2, i as i64 * 2, 1000 + i as i64);
        assert_eq!(m.check(&h), Ok(SequenceCheck::Append), "batch {i}");
        m.update(&h, 0);
    }
}

#[test]
fn in_order_and_duplicates_of_last_five() {
    let (_d, mut m) = manager();
    append_run(&mut m, 7);
    assert_eq!(m.producer_count(), 1);
    let e = m.last_entry(1).unwrap();
    assert_eq!(e.batches().count(), NUM_BATCHES_TO_RETAIN);
    assert_eq!((e.last_seq(), e.last_data_offset()), (13, 13));
    assert_eq!(m.map_end_offset(), 14);
    // Batches 2..=6 are remembered: retries get their original offsets.
    for i in 2..7 {
        let retry = header(1, 0, i * 2, 2, 0, 0);
        assert_eq!(
            m.check(&retry),
            Ok(SequenceCheck::Duplicate {
                first_offset: i as i64 * 2,
                last_offset: i as i64 * 2 + 1,
                timestamp_ms: 1000 + i as i64,
            })
        );
    }
    // The sixth-newest is forgotten, so it is out of order.
    let old = m.check(&header(1, 0, 2, 2, 0, 0)).unwrap_err();
    assert_eq!(old.error_code(), 45);
    // A different range over the same sequences is not a duplicate.
    assert_eq!(
        m.check(&header(1, 0, 12, 1, 0, 0))
            .unwrap_err()
            .error_code(),
        45
    );
}

#[test]
fn gaps_and_new_producers() {
    let (_d, mut m) = manager();
    // Unknown producer ids may start at any sequence (Kafka 2.4+).
    let h = header(5, 3, 42, 1, 0, 1);
    assert_eq!(m.check(&h), Ok(SequenceCheck::Append));
    m.update(&h, 0);
    assert_eq!(
        m.check(&header(5, 3, 44, 1, 1, 1))
            .unwrap_err()
            .error_code(),
        45
    );
    assert_eq!(
        m.check(&header(5, 3, 42, 2, 1, 1))
            .unwrap_err()
            .error_code(),
        45
    );
    assert_eq!(
        m.check(&header(5, 3, 43, 1, 1, 1)),
        Ok(SequenceCheck::Append)
    );
    // Non-idempotent batches always pass.
    let plain = BatchHeader::parse(&BatchBuilder::new(0).add(1, None, None, &[]).build()).unwrap();
    assert_eq!(m.check(&plain), Ok(SequenceCheck::Append));
}

#[test]
fn epoch_bump_and_fencing() {
    let (_d, mut m) = manager();
    append_run(&mut m, 2);
    let bumped_bad = m.check(&header(1, 1, 4, 1, 0, 0)).unwrap_err();
    assert_eq!(bumped_bad.error_code(), 45);
    let bumped = header(1, 1, 0, 1, 4, 5);
    assert_eq!(m.check(&bumped), Ok(SequenceCheck::Append));
    m.update(&bumped, 0);
    let e = m.last_entry(1).unwrap();
    assert_eq!((e.producer_epoch, e.batches().count()), (1, 1));
    let fenced = m.check(&header(1, 0, 4, 1, 0, 0)).unwrap_err();
    assert_eq!(fenced.error_code(), 47);
    // Even a retry of an old-epoch batch is fenced, not a duplicate.
    assert_eq!(
        m.check(&header(1, 0, 0, 2, 0, 0)).unwrap_err().error_code(),
        47
    );
}

#[test]
fn sequence_wraps_at_i32_max() {
    let (_d, mut m) = manager();
    let h = header(2, 0, i32::MAX - 1, 2, 0, 1);
    m.update(&h, 0);
    assert_eq!(m.last_entry(2).unwrap().last_seq(), i32::MAX);
    assert_eq!(
        m.check(&header(2, 0, 0, 1, 2, 1)),
        Ok(SequenceCheck::Append)
    );
    // A batch spanning the wrap is found as a duplicate by its range.
    let span = header(2, 0, i32::MAX, 3, 2, 1);
    assert_eq!(span.last_sequence(), 1);
    m.update(&span, 0);
    assert!(matches!(
        m.check(&span),
        Ok(SequenceCheck::Duplicate {
            first_offset: 2,
            ..
        })
    ));
}

#[test]
fn snapshot_syncs_drain_and_survive_deletion() {
    let (dir, mut m) = manager();
    append_run(&mut m, 3);
    for offset in [3, 5, 7] {
        m.take_snapshot(offset).unwrap();
    }
    // Deleted before its write ran: not written, not an error.
    m.delete_snapshots_before(7).unwrap();
    wait_for_snapshot_syncs();
    assert_eq!(m.snapshot_offsets().unwrap(), vec![7]);
    let file = dir.path().join("00000000000000000007.snapshot");
    assert!(read_snapshot(&file).is_ok());
    assert!(super::super::producer_snapshot::sync_snapshot(
        &dir.path().join("00000000000000000003.snapshot")
    )
    .is_ok());
}

#[test]
fn snapshot_round_trip() {
    let (dir, mut m) = manager();
    append_run(&mut m, 3);
    let other = header(9, 4, 10, 3, 6, 2000);
    m.update(&other, 0);
    m.take_snapshot(9).unwrap();
    wait_for_snapshot_syncs();
    let file = dir.path().join("00000000000000000009.snapshot");
    let bytes = fs::read(&file).unwrap();
    assert_eq!(bytes.len(), 10 + 2 * SNAPSHOT_ENTRY_BYTES);
    assert_eq!(&bytes[..2], &[0, 1]);

    let mut n = ProducerStateManager::new(dir.path(), DEFAULT_PRODUCER_ID_EXPIRATION_MS);
    assert_eq!(n.load(0, 20, 2500).unwrap(), 9);
    assert_eq!(n.producer_count(), 2);
    let e = n.last_entry(9).unwrap();
    assert_eq!(
        (e.producer_epoch, e.last_seq(), e.last_data_offset()),
        (4, 12, 8)
    );
    assert_eq!(e.last_timestamp_ms, 2000);
    // Only the last batch survives a snapshot, and it still dedupes.
    assert!(matches!(
        n.check(&header(1, 0, 4, 2, 0, 0)),
        Ok(SequenceCheck::Duplicate {
            first_offset: 4,
            last_offset: 5,
            ..
        })
    ));
    assert_eq!(
        n.check(&header(1, 0, 6, 1, 0, 0)),
        Ok(SequenceCheck::Append)
    );
    // Expired producers are not loaded.
    let expired = n
        .load(0, 20, 2000 + DEFAULT_PRODUCER_ID_EXPIRATION_MS)
        .unwrap();
    assert_eq!((expired, n.producer_count()), (9, 0));
}

#[test]
fn load_skips_newer_and_corrupt_snapshots() {
    let (dir, mut m) = manager();
    append_run(&mut m, 1);
    m.take_snapshot(2).unwrap();
    append_run(&mut m, 0);
    m.update(&header(1, 0, 2, 2, 2, 1), 0);
    m.take_snapshot(4).unwrap();
    m.take_snapshot(50).unwrap();
    wait_for_snapshot_syncs();
    // Corrupt the one at 4.
    let p4 = snapshot_path(dir.path(), 4);
    let mut bytes = fs::read(&p4).unwrap();
    *bytes.last_mut().unwrap() ^= 0xff;
    fs::write(&p4, bytes).unwrap();
    fs::write(dir.path().join("junk.snapshot"), b"x").unwrap();

    let mut n = ProducerStateManager::new(dir.path(), DEFAULT_PRODUCER_ID_EXPIRATION_MS);
    assert_eq!(n.load(0, 10, 0).unwrap(), 2);
    assert_eq!(n.snapshot_offsets().unwrap(), [2]);
    assert_eq!(n.last_entry(1).unwrap().last_seq(), 1);
    // Truncated files are corrupt too; with none left, replay from start.
    fs::write(snapshot_path(dir.path(), 2), [0u8, 1, 0]).unwrap();
    assert_eq!(n.load(1, 10, 0).unwrap(), 1);
    assert_eq!(n.producer_count(), 0);
    assert!(n.snapshot_offsets().unwrap().is_empty());
}

#[test]
fn expiry_truncation_and_deletion() {
    let (_d, mut m) = manager();
    append_run(&mut m, 2);
    m.take_snapshot(2).unwrap();
    m.take_snapshot(4).unwrap();
    m.take_snapshot(6).unwrap();
    wait_for_snapshot_syncs();
    m.remove_expired(1001 + DEFAULT_PRODUCER_ID_EXPIRATION_MS - 1);
    assert_eq!(m.producer_count(), 1);
    m.remove_expired(1001 + DEFAULT_PRODUCER_ID_EXPIRATION_MS);
    assert_eq!(m.producer_count(), 0);

    m.delete_snapshots_before(4).unwrap();
    assert_eq!(m.snapshot_offsets().unwrap(), [4, 6]);
    assert_eq!(m.truncate_and_reload(0, 5, 1500).unwrap(), 4);
    assert_eq!(m.snapshot_offsets().unwrap(), [4]);
    assert_eq!(m.producer_count(), 1);
    m.truncate_to(3).unwrap();
    assert_eq!(m.producer_count(), 0);
    assert!(m.snapshot_offsets().unwrap().is_empty());
}

/// A roll's snapshot still queued when the log is truncated below it is
/// never written: a restart would load producer state from the
/// discarded history. One queued when retention cut below it neither.
#[test]
fn queued_snapshots_above_a_truncation_or_below_retention_are_not_written() {
    let (_d, mut m) = manager();
    append_run(&mut m, 2);
    let (release, blocked) = std::sync::mpsc::channel::<()>();
    super::super::producer_snapshot::SNAPSHOT_SYNCS.push(move || {
        let _ = blocked.recv();
    });
    m.take_snapshot(2).unwrap();
    m.take_snapshot(10).unwrap();
    m.delete_snapshots_before(3).unwrap();
    m.truncate_to(5).unwrap();
    append_run(&mut m, 1);
    m.take_snapshot(6).unwrap();
    release.send(()).unwrap();
    wait_for_snapshot_syncs();
    assert_eq!(m.snapshot_offsets().unwrap(), [6]);
}

/// A manager made again for the same directory (a partition reopened)
/// drops what the earlier one still had queued.
#[test]
fn a_new_manager_drops_the_snapshots_an_earlier_one_queued() {
    let (dir, mut m) = manager();
    append_run(&mut m, 2);
    let (release, blocked) = std::sync::mpsc::channel::<()>();
    super::super::producer_snapshot::SNAPSHOT_SYNCS.push(move || {
        let _ = blocked.recv();
    });
    m.take_snapshot(10).unwrap();
    let mut reopened = ProducerStateManager::new(dir.path(), DEFAULT_PRODUCER_ID_EXPIRATION_MS);
    assert_eq!(reopened.truncate_and_reload(0, 5, 1500).unwrap(), 0);
    release.send(()).unwrap();
    wait_for_snapshot_syncs();
    assert!(reopened.snapshot_offsets().unwrap().is_empty());
    drop(m);
}
