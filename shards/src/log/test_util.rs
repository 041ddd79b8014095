//! Builders for valid v2 batches in tests: uncompressed records with varint
//! encoding and a correct CRC32C.

use super::batch::*;
use super::LogAppendInfo;

fn put_varint(out: &mut Vec<u8>, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    loop {
        let b = (z & 0x7f) as u8;
        z >>= 7;
        if z == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

/// A test record: timestamp (absolute) and value.
#[derive(Clone, Debug)]
pub struct TestRecord {
    pub timestamp: i64,
    pub value: Vec<u8>,
}

/// Builds one batch at `base_offset` with the given attributes.
pub fn build_batch_with(base_offset: i64, attributes: i16, records: &[TestRecord]) -> Vec<u8> {
    assert!(!records.is_empty());
    let base_ts = records.iter().map(|r| r.timestamp).min().expect("records");
    let max_ts = records.iter().map(|r| r.timestamp).max().expect("records");
    let mut body = Vec::new();
    for (i, r) in records.iter().enumerate() {
        let mut rec = vec![0u8]; // attributes
        put_varint(&mut rec, r.timestamp - base_ts);
        put_varint(&mut rec, i as i64);
        put_varint(&mut rec, -1); // null key
        put_varint(&mut rec, r.value.len() as i64);
        rec.extend_from_slice(&r.value);
        put_varint(&mut rec, 0); // no headers
        put_varint(&mut body, rec.len() as i64);
        body.extend_from_slice(&rec);
    }
    let mut b = Vec::with_capacity(RECORD_BATCH_OVERHEAD + body.len());
    b.extend_from_slice(&base_offset.to_be_bytes());
    let length = (RECORD_BATCH_OVERHEAD - LOG_OVERHEAD + body.len()) as i32;
    b.extend_from_slice(&length.to_be_bytes());
    b.extend_from_slice(&0i32.to_be_bytes()); // leader epoch
    b.push(CURRENT_MAGIC);
    b.extend_from_slice(&0u32.to_be_bytes()); // crc, set below
    b.extend_from_slice(&attributes.to_be_bytes());
    b.extend_from_slice(&(records.len() as i32 - 1).to_be_bytes());
    b.extend_from_slice(&base_ts.to_be_bytes());
    b.extend_from_slice(&max_ts.to_be_bytes());
    b.extend_from_slice(&NO_PRODUCER_ID.to_be_bytes());
    b.extend_from_slice(&NO_PRODUCER_EPOCH.to_be_bytes());
    b.extend_from_slice(&NO_SEQUENCE.to_be_bytes());
    b.extend_from_slice(&(records.len() as i32).to_be_bytes());
    b.extend_from_slice(&body);
    let crc = compute_crc(&b);
    b[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
    debug_assert!(verify_crc(&b).is_ok());
    b
}

/// An uncompressed CreateTime batch of `count` records with timestamps
/// `timestamp`, `timestamp + 1`, ... and values of `value_bytes` bytes.
pub fn build_batch(base_offset: i64, count: usize, timestamp: i64, value_bytes: usize) -> Vec<u8> {
    let records: Vec<TestRecord> = (0..count)
        .map(|i| TestRecord {
            timestamp: timestamp + i as i64,
            value: vec![(i % 251) as u8; value_bytes],
        })
        .collect();
    build_batch_with(base_offset, 0, &records)
}

/// What validation would report for `records` (one or more batches).
pub fn append_info(records: &[u8]) -> LogAppendInfo {
    let mut info = LogAppendInfo {
        valid_bytes: records.len(),
        ..LogAppendInfo::empty()
    };
    for batch in BatchIter::new(records) {
        let (_, h, _) = batch.expect("valid test batch");
        if info.first_offset < 0 {
            info.first_offset = h.base_offset;
        }
        info.last_offset = h.last_offset();
        if h.max_timestamp > info.max_timestamp {
            info.max_timestamp = h.max_timestamp;
            info.offset_of_max_timestamp = h.last_offset();
        }
        info.record_count += h.records_count as u32;
        info.batch_count += 1;
    }
    info
}
