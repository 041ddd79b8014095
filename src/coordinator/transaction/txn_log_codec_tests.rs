use super::*;

fn tp(topic: &str, partition: i32) -> TopicPartition {
    TopicPartition {
        topic: topic.into(),
        partition,
    }
}

fn ongoing_value() -> TxnLogValue {
    TxnLogValue {
        producer_id: 1000,
        producer_epoch: 3,
        txn_timeout_ms: 60000,
        state: TransactionState::Ongoing,
        topic_partitions: [tp("a", 0), tp("a", 2), tp("bc", 1)].into_iter().collect(),
        txn_last_update_timestamp_ms: 1_700_000_000_123,
        txn_start_timestamp_ms: 1_700_000_000_000,
        client_transaction_version: 0,
    }
}

#[test]
fn key_golden_bytes() {
    let k = encode_key("tx-1");
    assert_eq!(k, vec![0, 0, 0, 4, b't', b'x', b'-', b'1']);
    assert_eq!(decode_key(&k).unwrap(), "tx-1");
    assert_eq!(decode_key(&encode_key("")).unwrap(), "");
    // Trailing bytes are ignored, as in Kafka.
    assert_eq!(decode_key(&[0, 0, 0, 1, b'a', 9]).unwrap(), "a");
}

#[test]
fn bad_keys() {
    // Kafka skips other key versions while loading; so does the caller.
    let e = decode_key(&[0, 1, 0, 0]).unwrap_err();
    assert!(e
        .to_string()
        .contains("unknown transaction log key version 1"));
    assert!(decode_key(&[0xff, 0xff]).is_err());
    assert!(decode_key(&[0]).is_err());
    assert!(decode_key(&[0, 0, 0, 5, b'a']).is_err());
    assert!(decode_key(&[0, 0, 0xff, 0xff]).is_err()); // null id
    assert!(decode_key(&[0, 0, 0, 1, 0xff]).is_err()); // not UTF-8
}

#[test]
fn value_v0_golden_bytes() {
    let v = ongoing_value();
    let b = encode_value(&v);
    let mut want = vec![0, 0];
    want.extend_from_slice(&1000i64.to_be_bytes());
    want.extend_from_slice(&3i16.to_be_bytes());
    want.extend_from_slice(&60000i32.to_be_bytes());
    want.push(1); // Ongoing
    want.extend_from_slice(&2i32.to_be_bytes()); // two topics
    want.extend_from_slice(&[0, 1, b'a']);
    want.extend_from_slice(&[0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 2]);
    want.extend_from_slice(&[0, 2, b'b', b'c']);
    want.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 1]);
    want.extend_from_slice(&1_700_000_000_123i64.to_be_bytes());
    want.extend_from_slice(&1_700_000_000_000i64.to_be_bytes());
    assert_eq!(b, want);
    assert_eq!(decode_value(Some(&b)).unwrap(), Some(v));
}

#[test]
fn value_v1_golden_bytes() {
    let v = ongoing_value();
    let b = encode_value_flexible(&v);
    let mut want = vec![0, 1];
    want.extend_from_slice(&1000i64.to_be_bytes());
    want.extend_from_slice(&3i16.to_be_bytes());
    want.extend_from_slice(&60000i32.to_be_bytes());
    want.push(1);
    want.push(3); // compact array of two topics
    want.extend_from_slice(&[2, b'a', 3, 0, 0, 0, 0, 0, 0, 0, 2, 0]);
    want.extend_from_slice(&[3, b'b', b'c', 2, 0, 0, 0, 1, 0]);
    want.extend_from_slice(&1_700_000_000_123i64.to_be_bytes());
    want.extend_from_slice(&1_700_000_000_000i64.to_be_bytes());
    want.push(0); // no tagged fields
    assert_eq!(b, want);
    assert_eq!(decode_value(Some(&b)).unwrap(), Some(v));
}

#[test]
fn value_v1_reads_its_client_transaction_version() {
    // Kafka 4's tags: PreviousProducerId (0), NextProducerId (1),
    // ClientTransactionVersion (2), and an unknown one (9).
    let mut v = ongoing_value();
    let mut b = encode_value_flexible(&v);
    b.pop();
    b.push(4);
    b.extend_from_slice(&[0, 8]);
    b.extend_from_slice(&999i64.to_be_bytes());
    b.extend_from_slice(&[1, 8]);
    b.extend_from_slice(&(-1i64).to_be_bytes());
    b.extend_from_slice(&[2, 2, 0, 2]);
    b.extend_from_slice(&[9, 3, 1, 2, 3]);
    v.client_transaction_version = 2;
    assert_eq!(decode_value(Some(&b)).unwrap(), Some(v.clone()));
    // What kshard writes for a transaction of version 2: v1 with the tag.
    let written = encode_value(&v);
    assert_eq!(&written[..2], &[0, 1]);
    assert!(written.ends_with(&[1, 2, 2, 0, 2]));
    assert_eq!(decode_value(Some(&written)).unwrap(), Some(v));
}

#[test]
fn empty_and_complete_partitions() {
    let empty = TxnLogValue {
        state: TransactionState::Empty,
        topic_partitions: BTreeSet::new(),
        txn_start_timestamp_ms: -1,
        ..ongoing_value()
    };
    let b = encode_value(&empty);
    // Empty writes a null array.
    assert_eq!(&b[17..21], &[0xff, 0xff, 0xff, 0xff]);
    assert_eq!(decode_value(Some(&b)).unwrap(), Some(empty.clone()));
    assert_eq!(encode_value_flexible(&empty)[17], 0);

    // Complete* writes an empty (not null) array.
    let complete = TxnLogValue {
        state: TransactionState::CompleteCommit,
        topic_partitions: BTreeSet::new(),
        ..ongoing_value()
    };
    let b = encode_value(&complete);
    assert_eq!(&b[17..21], &[0, 0, 0, 0]);
    assert_eq!(decode_value(Some(&b)).unwrap(), Some(complete));

    // Partitions stored for an Empty state are ignored, as Kafka does.
    let mut b = encode_value(&ongoing_value());
    b[16] = TransactionState::Empty.to_byte() as u8;
    let got = decode_value(Some(&b)).unwrap().unwrap();
    assert_eq!(got.state, TransactionState::Empty);
    assert!(got.topic_partitions.is_empty());
}

#[test]
#[should_panic(expected = "not expected to have any partitions")]
fn empty_with_partitions_is_refused() {
    encode_value(&TxnLogValue {
        state: TransactionState::Empty,
        ..ongoing_value()
    });
}

#[test]
fn tombstone_and_bad_values() {
    assert_eq!(decode_value(None).unwrap(), None);
    let mut b = encode_value(&ongoing_value());
    b[1] = 2;
    assert!(decode_value(Some(&b))
        .unwrap_err()
        .0
        .contains("unknown version 2"));
    let mut b = encode_value(&ongoing_value());
    b[16] = 8;
    assert!(decode_value(Some(&b)).is_err());
    // A null partition array for a non-Empty state reads as none.
    let complete = TxnLogValue {
        state: TransactionState::CompleteAbort,
        topic_partitions: BTreeSet::new(),
        ..ongoing_value()
    };
    let mut b = encode_value(&complete);
    b[17..21].copy_from_slice(&(-1i32).to_be_bytes());
    assert_eq!(decode_value(Some(&b)).unwrap(), Some(complete));
    // A huge array count fails without allocating.
    let mut b = encode_value(&ongoing_value());
    b[17..21].copy_from_slice(&i32::MAX.to_be_bytes());
    assert!(decode_value(Some(&b)).is_err());
}

#[test]
fn truncations_and_mutations_never_panic() {
    for bytes in [
        encode_value(&ongoing_value()),
        encode_value_flexible(&ongoing_value()),
        encode_key("transactional-id"),
    ] {
        for n in 0..bytes.len() {
            assert!(decode_value(Some(&bytes[..n])).is_err(), "prefix {n}");
            let _ = decode_key(&bytes[..n]);
        }
        for i in 0..bytes.len() {
            for x in [0x00, 0x01, 0x7f, 0x80, 0xfe, 0xff, bytes[i] ^ 0xff] {
                let mut m = bytes.clone();
                m[i] = x;
                let _ = decode_value(Some(&m));
                let _ = decode_key(&m);
                let _ = decode_value(Some(&m[..m.len() - 1]));
            }
        }
    }
}
