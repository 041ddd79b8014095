//! Down-conversion of stored magic-2 batches for Fetch v0-v3, with the
//! observable result of Kafka 3.9's `LazyDownConversionRecords` and its
//! `LazyDownConversionRecordsSend`:
//!
//! - the records field is `max(bytes read, first converted batch)` long
//!   (the bytes read include a partial trailing batch), so a consumer
//!   always gets one whole converted batch;
//! - it holds the converted messages, cut at that size, then "overflow"
//!   padding: an entry header with offset -1 and a length past the end,
//!   repeated every 128 KiB, zeros elsewhere; clients drop the partial tail;
//! - control batches are dropped, transactional records kept (Fetch v0-v3
//!   read uncommitted); headers are dropped; an uncompressed batch loses the
//!   records before the fetch offset; a compressed batch becomes one wrapper
//!   of the same codec (inner offsets relative in v1, absolute in v0);
//! - zstd cannot be down-converted: UNSUPPORTED_COMPRESSION_TYPE when the
//!   first converted batch is zstd, padding in place of a later chunk.
//!
//! The output is built in memory and never grows past the records size
//! (plus the one chunk being converted).

use super::super::batch::{
    BatchHeader, BatchIter, Compression, TimestampType, RECORD_BATCH_OVERHEAD,
};
use super::super::records::{compress, decompress, RecordIter};
use super::super::validate::{DECOMPRESSED_LIMIT_FACTOR, MIN_DECOMPRESSED_LIMIT_BYTES};
use super::{attributes, lz4_frame, write_message, LOG_OVERHEAD};

/// `LazyDownConversionRecordsSend.MAX_READ_SIZE`: the raw bytes converted
/// at a time after the first batch.
pub const MAX_READ_SIZE: usize = 128 * 1024;

/// A zstd batch first: Kafka answers UNSUPPORTED_COMPRESSION_TYPE.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnsupportedCompression;

/// The records field of a Fetch v0-v3 partition: the batches in `raw` (the
/// whole batches of a read of `read_size` bytes) as magic `to_magic`
/// messages, from `fetch_offset` on.
pub fn down_convert(
    raw: &[u8],
    read_size: usize,
    to_magic: u8,
    fetch_offset: i64,
) -> Result<Vec<u8>, UnsupportedCompression> {
    let batches: Vec<(BatchHeader, &[u8])> = BatchIter::new(raw)
        .map_while(Result::ok)
        .map(|(_, h, b)| (h, b))
        .collect();
    if batches.is_empty() {
        return Ok(Vec::new());
    }
    // The first batch that converts to something (the constructor's
    // iterator converts one batch at a time).
    let mut first = None;
    for b in &batches {
        let converted = convert_batches(std::slice::from_ref(b), to_magic, fetch_offset)?;
        if !converted.is_empty() {
            first = Some(converted);
            break;
        }
    }
    let Some(mut out) = first else {
        // Only control batches: an overflow header alone.
        let mut out = Vec::new();
        pad(&mut out, LOG_OVERHEAD);
        return Ok(out);
    };
    let size = read_size.max(out.len());
    out.truncate(size);
    // The send's iterator skips one batch for the cached first conversion.
    let mut next = 1;
    while out.len() < size && next < batches.len() {
        let mut end = next + 1;
        let mut bytes = batches[next].1.len();
        while end < batches.len() && bytes + batches[end].1.len() <= MAX_READ_SIZE {
            bytes += batches[end].1.len();
            end += 1;
        }
        let chunk = convert_batches(&batches[next..end], to_magic, fetch_offset);
        next = end;
        match chunk {
            Ok(c) => {
                let take = c.len().min(size - out.len());
                out.extend_from_slice(&c[..take]);
            }
            // Kafka sends overflow padding instead of the chunk; kshard then
            // pads to the end.
            Err(UnsupportedCompression) => break,
        }
    }
    pad(&mut out, size);
    Ok(out)
}

/// `buildOverflowBatch` until `out` is `size` long.
fn pad(out: &mut Vec<u8>, size: usize) {
    while out.len() < size {
        let remaining = size - out.len();
        let block = LOG_OVERHEAD.max((remaining + 1).min(MAX_READ_SIZE));
        let mut overflow = vec![0u8; block];
        overflow[..8].copy_from_slice(&(-1i64).to_be_bytes());
        let length = (remaining + 1)
            .max(RECORD_BATCH_OVERHEAD)
            .min(i32::MAX as usize) as i32;
        overflow[8..12].copy_from_slice(&length.to_be_bytes());
        out.extend_from_slice(&overflow[..block.min(remaining)]);
    }
}

/// `RecordsUtil.downConvert` of some batches.
fn convert_batches(
    batches: &[(BatchHeader, &[u8])],
    to_magic: u8,
    fetch_offset: i64,
) -> Result<Vec<u8>, UnsupportedCompression> {
    let mut out = Vec::new();
    let mut scratch = Vec::new();
    for (h, bytes) in batches {
        if h.is_control() {
            continue;
        }
        let codec = h.compression().unwrap_or(Compression::None);
        if codec == Compression::Zstd {
            return Err(UnsupportedCompression);
        }
        let payload = &bytes[RECORD_BATCH_OVERHEAD..];
        let limit = payload
            .len()
            .saturating_mul(DECOMPRESSED_LIMIT_FACTOR)
            .max(MIN_DECOMPRESSED_LIMIT_BYTES);
        if decompress(codec, payload, &mut scratch, limit).is_err() {
            continue;
        }
        convert_batch(h, codec, &scratch, to_magic, fetch_offset, &mut out);
    }
    Ok(out)
}

/// One record as it goes out: absolute offset, timestamp, key, value.
type Message<'a> = (i64, i64, Option<&'a [u8]>, Option<&'a [u8]>);

fn convert_batch(
    h: &BatchHeader,
    codec: Compression,
    records: &[u8],
    to_magic: u8,
    fetch_offset: i64,
    out: &mut Vec<u8>,
) {
    let lat = h.timestamp_type() == TimestampType::LogAppendTime;
    let compressed = codec != Compression::None;
    let messages: Vec<Message> = RecordIter::new(records)
        .map_while(Result::ok)
        .map(|r| {
            let offset = h.base_offset.wrapping_add(i64::from(r.offset_delta));
            let timestamp = if lat {
                h.max_timestamp
            } else {
                h.base_timestamp.wrapping_add(r.timestamp_delta)
            };
            (offset, timestamp, r.key, r.value)
        })
        .filter(|(offset, ..)| compressed || *offset >= fetch_offset)
        .collect();
    let Some(&(base_offset, ..)) = messages.first() else {
        return;
    };
    let plain = attributes(to_magic, Compression::None, lat);
    if !compressed {
        for &(offset, timestamp, key, value) in &messages {
            write_message(out, offset, to_magic, plain, timestamp, key, value);
        }
        return;
    }
    let mut inner = Vec::new();
    let mut max_timestamp = -1i64;
    let mut last_offset = base_offset;
    for &(offset, timestamp, key, value) in &messages {
        let inner_offset = if to_magic > 0 {
            offset.wrapping_sub(base_offset)
        } else {
            offset
        };
        write_message(
            &mut inner,
            inner_offset,
            to_magic,
            plain,
            timestamp,
            key,
            value,
        );
        max_timestamp = max_timestamp.max(timestamp);
        last_offset = offset;
    }
    let mut value = Vec::new();
    if compress(codec, &inner, &mut value, true).is_err() {
        return;
    }
    if codec == Compression::Lz4 && to_magic == 0 {
        lz4_frame::set_v0_checksum(&mut value);
    }
    let wrapper_timestamp = if lat { h.max_timestamp } else { max_timestamp };
    let wrapper_attributes = attributes(to_magic, codec, lat);
    write_message(
        out,
        last_offset,
        to_magic,
        wrapper_attributes,
        wrapper_timestamp,
        None,
        Some(&value),
    );
}
