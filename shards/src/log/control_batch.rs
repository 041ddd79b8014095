//! Transaction markers: the control batches a transaction coordinator has
//! written to every partition of a transaction when it ends (Kafka's
//! `EndTransactionMarker`, `ControlRecordType` and
//! `MemoryRecords.withEndTransactionMarker`). A marker batch holds one
//! record whose key is (version i16, type i16) and whose value is
//! (version i16, coordinator epoch i32).

use std::fmt;

use super::batch::{BatchHeader, Compression, NO_SEQUENCE, RECORD_BATCH_OVERHEAD};
use super::records::{BatchBuilder, RecordIter};

/// Kafka's `ControlRecordType.CURRENT_CONTROL_RECORD_KEY_VERSION`.
pub const CONTROL_RECORD_KEY_VERSION: i16 = 0;
/// Kafka's `EndTransactionMarker.CURRENT_END_TXN_MARKER_VERSION`.
pub const END_TXN_MARKER_VALUE_VERSION: i16 = 0;
/// version i16 + type i16.
pub const CONTROL_RECORD_KEY_BYTES: usize = 4;
/// version i16 + coordinator epoch i32.
pub const END_TXN_MARKER_VALUE_BYTES: usize = 6;

/// The control record types that end a transaction (Kafka's
/// `ControlRecordType`; the KRaft types 2-6 never appear in a partition
/// log a broker serves).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ControlRecordType {
    Abort,
    Commit,
}

impl ControlRecordType {
    /// The wire type id.
    pub fn type_id(self) -> i16 {
        match self {
            ControlRecordType::Abort => 0,
            ControlRecordType::Commit => 1,
        }
    }

    /// The end-of-transaction type with wire id `type_id`, if it is one.
    pub fn from_type_id(type_id: i16) -> Option<ControlRecordType> {
        match type_id {
            0 => Some(ControlRecordType::Abort),
            1 => Some(ControlRecordType::Commit),
            _ => None,
        }
    }
}

/// A commit or abort marker: its type and the epoch of the coordinator that
/// wrote it (a fenced coordinator's markers are refused).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EndTxnMarker {
    pub control_type: ControlRecordType,
    pub coordinator_epoch: i32,
}

/// Why a batch does not hold a transaction marker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MarkerError(pub String);

impl fmt::Display for MarkerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid transaction marker: {}", self.0)
    }
}

impl std::error::Error for MarkerError {}

fn marker_error(msg: impl Into<String>) -> MarkerError {
    MarkerError(msg.into())
}

/// One marker batch as Kafka's `MemoryRecords.withEndTransactionMarker`
/// builds it: base offset 0 and partition leader epoch -1 (the append sets
/// both), transactional and control, uncompressed, CreateTime stamped
/// `timestamp_ms`, base sequence -1, one record without headers.
pub fn build_end_txn_marker_batch(
    producer_id: i64,
    producer_epoch: i16,
    marker: EndTxnMarker,
    timestamp_ms: i64,
) -> Vec<u8> {
    let mut key = [0u8; CONTROL_RECORD_KEY_BYTES];
    key[..2].copy_from_slice(&CONTROL_RECORD_KEY_VERSION.to_be_bytes());
    key[2..].copy_from_slice(&marker.control_type.type_id().to_be_bytes());
    let mut value = [0u8; END_TXN_MARKER_VALUE_BYTES];
    value[..2].copy_from_slice(&END_TXN_MARKER_VALUE_VERSION.to_be_bytes());
    value[2..].copy_from_slice(&marker.coordinator_epoch.to_be_bytes());
    BatchBuilder::new(0)
        .producer(producer_id, producer_epoch, NO_SEQUENCE)
        .transactional(true)
        .control(true)
        .add(timestamp_ms, Some(&key), Some(&value), &[])
        .build()
}

/// Reads the marker of a whole, uncompressed control batch (header
/// included) from its first record, as Kafka's
/// `EndTransactionMarker.deserialize`: key and value may be longer than
/// version 0's fields, and newer versions are read as version 0; negative
/// versions, short fields and types other than ABORT and COMMIT are errors.
/// The CRC is not checked here.
pub fn parse_end_txn_marker(batch: &[u8]) -> Result<EndTxnMarker, MarkerError> {
    let header = BatchHeader::parse(batch).map_err(|e| marker_error(e.to_string()))?;
    if !header.is_control() {
        return Err(marker_error("not a control batch"));
    }
    let size = header.total_size();
    if batch.len() < size {
        return Err(marker_error(format!(
            "batch of {size} bytes truncated to {}",
            batch.len()
        )));
    }
    if header.compression() != Some(Compression::None) {
        return Err(marker_error("compressed control batch"));
    }
    if header.records_count < 1 {
        // Kafka's cleaner empties a marker's batch once its transaction
        // is gone: such a batch ends nothing.
        return Err(marker_error("empty control batch"));
    }
    let record = RecordIter::new(&batch[RECORD_BATCH_OVERHEAD..size])
        .next()
        .ok_or_else(|| marker_error("no record in the batch"))?
        .map_err(|e| marker_error(e.to_string()))?;
    let control_type = parse_key(record.key)?;
    let coordinator_epoch = parse_value(record.value)?;
    Ok(EndTxnMarker {
        control_type,
        coordinator_epoch,
    })
}

/// Kafka's `ControlRecordType.parse`, limited to the marker types.
fn parse_key(key: Option<&[u8]>) -> Result<ControlRecordType, MarkerError> {
    let key = key.ok_or_else(|| marker_error("control record without a key"))?;
    if key.len() < CONTROL_RECORD_KEY_BYTES {
        return Err(marker_error(format!(
            "control record key of {} bytes, need {CONTROL_RECORD_KEY_BYTES}",
            key.len()
        )));
    }
    let version = i16::from_be_bytes([key[0], key[1]]);
    if version < 0 {
        return Err(marker_error(format!(
            "control record key version {version}"
        )));
    }
    let type_id = i16::from_be_bytes([key[2], key[3]]);
    ControlRecordType::from_type_id(type_id)
        .ok_or_else(|| marker_error(format!("control record type {type_id} ends no transaction")))
}

/// Kafka's `EndTransactionMarker.deserializeValue`: the coordinator epoch.
fn parse_value(value: Option<&[u8]>) -> Result<i32, MarkerError> {
    let value = value.ok_or_else(|| marker_error("marker without a value"))?;
    if value.len() < END_TXN_MARKER_VALUE_BYTES {
        return Err(marker_error(format!(
            "marker value of {} bytes, need {END_TXN_MARKER_VALUE_BYTES}",
            value.len()
        )));
    }
    let version = i16::from_be_bytes([value[0], value[1]]);
    if version < 0 {
        return Err(marker_error(format!("marker value version {version}")));
    }
    Ok(i32::from_be_bytes([value[2], value[3], value[4], value[5]]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::batch::{
        verify_crc, CONTROL_FLAG_MASK, NO_PARTITION_LEADER_EPOCH, RECORDS_COUNT_OFFSET,
        TRANSACTIONAL_FLAG_MASK,
    };

    const COMMIT_7: EndTxnMarker = EndTxnMarker {
        control_type: ControlRecordType::Commit,
        coordinator_epoch: 7,
    };

    /// A control batch whose one record has `key` and `value`.
    fn control_batch(key: Option<&[u8]>, value: Option<&[u8]>) -> Vec<u8> {
        BatchBuilder::new(0)
            .producer(5, 1, NO_SEQUENCE)
            .transactional(true)
            .control(true)
            .add(1000, key, value, &[])
            .build()
    }

    #[test]
    fn marker_batch_is_laid_out_as_kafkas() {
        let b = build_end_txn_marker_batch(4242, 3, COMMIT_7, 1_700_000_000_123);
        assert_eq!(b.len(), 78, "61-byte header and a 17-byte record");
        assert!(verify_crc(&b).is_ok());
        let h = BatchHeader::parse(&b).unwrap();
        assert_eq!(h.base_offset, 0);
        assert_eq!(h.partition_leader_epoch, NO_PARTITION_LEADER_EPOCH);
        assert_eq!(h.attributes, TRANSACTIONAL_FLAG_MASK | CONTROL_FLAG_MASK);
        assert_eq!(h.attributes, 0x30);
        assert_eq!((h.last_offset_delta, h.records_count), (0, 1));
        assert_eq!(
            (h.base_timestamp, h.max_timestamp),
            (1_700_000_000_123, 1_700_000_000_123)
        );
        assert_eq!(
            (h.producer_id, h.producer_epoch, h.base_sequence),
            (4242, 3, -1)
        );
        // length 16, attributes, timestamp delta, offset delta, key length
        // 4, key (0, COMMIT), value length 6, value (0, epoch 7), 0 headers.
        let record = [0x20, 0, 0, 0, 0x08, 0, 0, 0, 1, 0x0c, 0, 0, 0, 0, 0, 7, 0];
        assert_eq!(&b[RECORD_BATCH_OVERHEAD..], &record);
        assert_eq!(parse_end_txn_marker(&b), Ok(COMMIT_7));
    }

    #[test]
    fn both_types_round_trip() {
        for (ty, epoch) in [
            (ControlRecordType::Abort, 0),
            (ControlRecordType::Commit, -1),
        ] {
            let marker = EndTxnMarker {
                control_type: ty,
                coordinator_epoch: epoch,
            };
            let b = build_end_txn_marker_batch(1, 0, marker, 5);
            assert_eq!(parse_end_txn_marker(&b), Ok(marker));
        }
        assert_eq!(ControlRecordType::Abort.type_id(), 0);
        assert_eq!(
            ControlRecordType::from_type_id(1),
            Some(ControlRecordType::Commit)
        );
        assert_eq!(ControlRecordType::from_type_id(2), None);
    }

    #[test]
    fn newer_versions_and_longer_fields_read_as_version_0() {
        let b = control_batch(Some(&[0, 3, 0, 0, 9]), Some(&[0, 1, 0, 0, 0, 2, 0xff]));
        assert_eq!(
            parse_end_txn_marker(&b),
            Ok(EndTxnMarker {
                control_type: ControlRecordType::Abort,
                coordinator_epoch: 2,
            })
        );
    }

    #[test]
    fn bad_markers_are_errors() {
        type KeyValue<'a> = (Option<&'a [u8]>, Option<&'a [u8]>);
        let bad: [KeyValue<'_>; 8] = [
            (None, Some(&[0, 0, 0, 0, 0, 1])),
            (Some(&[0, 0, 0]), Some(&[0, 0, 0, 0, 0, 1])),
            (Some(&[0xff, 0xff, 0, 1]), Some(&[0, 0, 0, 0, 0, 1])),
            (Some(&[0, 0, 0, 2]), Some(&[0, 0, 0, 0, 0, 1])),
            (Some(&[0, 0, 0xff, 0xff]), Some(&[0, 0, 0, 0, 0, 1])),
            (Some(&[0, 0, 0, 1]), None),
            (Some(&[0, 0, 0, 1]), Some(&[0, 0, 0, 0, 0])),
            (Some(&[0, 0, 0, 1]), Some(&[0x80, 0, 0, 0, 0, 1])),
        ];
        for (i, (key, value)) in bad.iter().enumerate() {
            let b = control_batch(*key, *value);
            assert!(parse_end_txn_marker(&b).is_err(), "case {i}");
        }
        let data = BatchBuilder::new(0)
            .add(1, Some(&[0, 0, 0, 1]), Some(&[0; 6]), &[])
            .build();
        assert!(parse_end_txn_marker(&data).is_err(), "not a control batch");
        let zipped = BatchBuilder::new(0)
            .control(true)
            .compression(Compression::Gzip)
            .add(1, Some(&[0, 0, 0, 1]), Some(&[0; 6]), &[])
            .build();
        assert!(parse_end_txn_marker(&zipped).is_err(), "compressed");
    }

    /// Every prefix and every single-byte change of a marker batch parses
    /// or fails without panicking.
    #[test]
    fn truncated_and_mutated_batches_never_panic() {
        let b = build_end_txn_marker_batch(9, 9, COMMIT_7, 9);
        for len in 0..b.len() {
            assert!(parse_end_txn_marker(&b[..len]).is_err(), "prefix {len}");
        }
        for at in 0..b.len() {
            for x in [0x00, 0x01, 0x7f, 0x80, 0xff] {
                let mut m = b.clone();
                m[at] = x;
                let _ = parse_end_txn_marker(&m);
            }
        }
        // A record count of zero (a cleaned marker) holds no marker.
        let mut empty = b.clone();
        empty[RECORDS_COUNT_OFFSET..RECORDS_COUNT_OFFSET + 4].copy_from_slice(&0i32.to_be_bytes());
        assert!(parse_end_txn_marker(&empty).is_err());
    }
}
