//! Tests of `TransactionIndex`.

use super::*;

fn txn(producer_id: i64, first: i64, last: i64, lso: i64) -> AbortedTxn {
    AbortedTxn {
        producer_id,
        first_offset: first,
        last_offset: last,
        last_stable_offset: lso,
    }
}

fn file_len(index: &TransactionIndex) -> u64 {
    std::fs::metadata(index.path()).unwrap().len()
}

#[test]
fn entries_are_kafkas_34_bytes_big_endian() {
    let e = txn(0x0102, 3, 0x0405, -1);
    let b = e.encode();
    assert_eq!(&b[..2], &[0, 0]);
    assert_eq!(&b[2..10], &0x0102i64.to_be_bytes());
    assert_eq!(&b[10..18], &3i64.to_be_bytes());
    assert_eq!(&b[18..26], &0x0405i64.to_be_bytes());
    assert_eq!(&b[26..34], &[0xff; 8]);
    assert_eq!(AbortedTxn::decode(&b), Ok(e));
    let mut v1 = b;
    v1[1] = 1;
    assert!(AbortedTxn::decode(&v1).is_err());
}

#[test]
fn file_is_made_by_the_first_append_and_reloads() {
    let dir = tempfile::tempdir().unwrap();
    let mut index = TransactionIndex::open(dir.path(), 100).unwrap();
    assert!(index.is_empty() && !index.path().exists());
    assert_eq!(
        index.path(),
        dir.path().join("00000000000000000100.txnindex")
    );
    index.sync().unwrap();
    index.append(txn(1, 90, 105, 90)).unwrap();
    index.append(txn(2, 100, 110, 111)).unwrap();
    assert_eq!(file_len(&index), 2 * ABORTED_TXN_BYTES as u64);
    assert_eq!(index.last_offset(), Some(110));
    index.sync().unwrap();
    let reopened = TransactionIndex::open(dir.path(), 100).unwrap();
    assert_eq!(reopened.entries(), index.entries());
    // Appends continue at the end of a loaded file.
    let mut reopened = reopened;
    reopened.append(txn(3, 112, 120, 121)).unwrap();
    let again = TransactionIndex::open(dir.path(), 100).unwrap();
    assert_eq!(again.entries().len(), 3);
    assert_eq!(again.entries()[2], txn(3, 112, 120, 121));
}

#[test]
#[should_panic(expected = "at or before the last entry")]
fn appends_must_move_forward() {
    let dir = tempfile::tempdir().unwrap();
    let mut index = TransactionIndex::new(dir.path(), 0);
    index.append(txn(1, 0, 10, 11)).unwrap();
    let _ = index.append(txn(2, 5, 10, 11));
}

#[test]
#[should_panic(expected = "ends before it starts")]
fn a_transaction_must_start_before_it_ends() {
    let dir = tempfile::tempdir().unwrap();
    let mut index = TransactionIndex::new(dir.path(), 0);
    let _ = index.append(txn(1, 11, 10, 11));
}

#[test]
fn collect_aborted_is_kafkas_search() {
    let dir = tempfile::tempdir().unwrap();
    let mut index = TransactionIndex::new(dir.path(), 0);
    index.append(txn(1, 0, 10, 5)).unwrap();
    index.append(txn(2, 5, 20, 21)).unwrap();
    index.append(txn(3, 25, 30, 31)).unwrap();
    let mut out = Vec::new();
    // [11, 21): the first ends before it, the second overlaps and its
    // last stable offset reaches the bound: complete.
    assert!(index.collect_aborted(11, 21, &mut out));
    assert_eq!(out, [txn(2, 5, 20, 21)]);
    out.clear();
    // [0, 100): all overlap, none has an LSO reaching 100.
    assert!(!index.collect_aborted(0, 100, &mut out));
    assert_eq!(out.len(), 3);
    out.clear();
    // [0, 5): only the first overlaps, and the first's LSO is 5.
    assert!(index.collect_aborted(0, 5, &mut out));
    assert_eq!(out, [txn(1, 0, 10, 5)]);
    out.clear();
    // Past every entry: nothing, not complete, nothing allocated.
    let mut none = Vec::new();
    assert!(!index.collect_aborted(31, 40, &mut none));
    assert!(none.is_empty() && none.capacity() == 0);
}

#[test]
fn truncate_drops_entries_at_or_after_the_offset() {
    let dir = tempfile::tempdir().unwrap();
    let mut index = TransactionIndex::new(dir.path(), 0);
    for (i, last) in [10, 20, 30].into_iter().enumerate() {
        index
            .append(txn(i as i64, last - 5, last, last + 1))
            .unwrap();
    }
    index.truncate_to(31).unwrap();
    assert_eq!(index.entries().len(), 3);
    index.truncate_to(20).unwrap();
    assert_eq!(index.last_offset(), Some(10));
    assert_eq!(file_len(&index), ABORTED_TXN_BYTES as u64);
    index.append(txn(7, 12, 15, 16)).unwrap();
    let reopened = TransactionIndex::open(dir.path(), 0).unwrap();
    assert_eq!(reopened.entries(), [txn(0, 5, 10, 11), txn(7, 12, 15, 16)]);
    index.reset().unwrap();
    assert!(index.is_empty());
    assert_eq!(file_len(&index), 0);
}

#[test]
fn a_torn_tail_is_cut() {
    let dir = tempfile::tempdir().unwrap();
    let mut index = TransactionIndex::new(dir.path(), 0);
    index.append(txn(1, 0, 10, 11)).unwrap();
    index.append(txn(2, 12, 20, 21)).unwrap();
    let path = index.path().to_path_buf();
    let good = std::fs::read(&path).unwrap();
    let cases: Vec<(Vec<u8>, usize)> = vec![
        // A partial entry.
        ([&good[..], &good[..7]].concat(), 2),
        // Zeros where appends did not land.
        ([&good[..], &[0u8; 2 * ABORTED_TXN_BYTES][..]].concat(), 2),
        // A last entry half written (its last offset still 0).
        (
            [&good[..], &txn(3, 0, 0, 0).encode()[..20], &[0u8; 14][..]].concat(),
            2,
        ),
        (Vec::new(), 0),
    ];
    for (i, (bytes, entries)) in cases.into_iter().enumerate() {
        std::fs::write(&path, &bytes).unwrap();
        let loaded = TransactionIndex::open(dir.path(), 0).unwrap();
        assert_eq!(loaded.entries().len(), entries, "case {i}");
        assert_eq!(
            std::fs::metadata(&path).unwrap().len(),
            (entries * ABORTED_TXN_BYTES) as u64,
            "case {i}"
        );
    }
}

#[test]
fn bad_entries_are_invalid_data() {
    let dir = tempfile::tempdir().unwrap();
    let path = TransactionIndex::new(dir.path(), 50).path().to_path_buf();
    let ok = txn(1, 40, 60, 61).encode();
    let mut version = txn(2, 61, 70, 71).encode();
    version[1] = 9;
    let cases = [
        // Unknown version, then a good entry.
        [&version[..], &txn(3, 72, 80, 81).encode()[..]].concat(),
        // Out of order.
        [&ok[..], &txn(2, 40, 60, 61).encode()[..], &ok[..]].concat(),
        // Below the segment's base offset.
        [&txn(2, 10, 20, 21).encode()[..], &ok[..]].concat(),
    ];
    for (i, bytes) in cases.iter().enumerate() {
        std::fs::write(&path, bytes).unwrap();
        let err = TransactionIndex::open(dir.path(), 50)
            .err()
            .expect("invalid");
        assert_eq!(err.kind(), io::ErrorKind::InvalidData, "case {i}");
        // A segment opens with the index emptied and its file gone.
        let index = load_for_segment(dir.path(), 50).unwrap();
        assert!(index.is_empty() && !path.exists(), "case {i}");
    }
}

#[test]
fn delete_and_rename() {
    let dir = tempfile::tempdir().unwrap();
    TransactionIndex::new(dir.path(), 0).delete().unwrap();
    let cleaned = dir.path().join("00000000000000000000.txnindex.cleaned");
    let mut index = TransactionIndex::with_path(cleaned.clone(), 0);
    // Without a file only the name changes.
    let swap = dir.path().join("00000000000000000000.txnindex.swap");
    index.rename_to(swap.clone()).unwrap();
    assert_eq!(index.path(), swap);
    index.rename_to(cleaned.clone()).unwrap();
    index.append(txn(1, 0, 3, 4)).unwrap();
    index.rename_to(swap.clone()).unwrap();
    assert!(!cleaned.exists() && swap.exists());
    let fin = segment_file_path(dir.path(), 0, TXN_INDEX_FILE_SUFFIX);
    index.rename_to(fin.clone()).unwrap();
    index.sync().unwrap();
    assert_eq!(
        TransactionIndex::open(dir.path(), 0).unwrap().entries(),
        [txn(1, 0, 3, 4)]
    );
    index.delete().unwrap();
    assert!(!fin.exists());
}
