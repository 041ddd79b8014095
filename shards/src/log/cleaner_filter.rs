//! The cleaner's per-batch work: reading keys for the offset map, and
//! Kafka's `MemoryRecords.filterTo` with the `Cleaner`'s retention rules
//! (latest offset per key, tombstones until the batch's delete horizon,
//! keyless records dropped, aborted transactions' batches dropped, the
//! last batch of an active producer kept even when empty, markers until
//! their delete horizon once no data of their transaction is left).

use super::batch::{
    self, BatchHeader, Compression, TimestampType, ATTRIBUTES_OFFSET, CONTROL_FLAG_MASK,
    CRC_OFFSET, CURRENT_MAGIC, DELETE_HORIZON_FLAG_MASK, LENGTH_OFFSET, LOG_OVERHEAD, NO_TIMESTAMP,
    RECORD_BATCH_OVERHEAD, TIMESTAMP_TYPE_MASK, TRANSACTIONAL_FLAG_MASK,
};
use super::offset_map::OffsetMap;
use super::records::{self, RecordIter};
use super::transaction_index::AbortedTxn;

/// Reusable buffers, so a cleaning pass allocates only while they grow.
#[derive(Default)]
pub(super) struct Buffers {
    records: Vec<u8>,
    body: Vec<u8>,
    /// The rewritten batch after [`filter_batch`] returns `Rewritten`.
    pub out: Vec<u8>,
}

/// What the cleaner keeps of one batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Outcome {
    /// Every record stays and no horizon is needed: copy the batch as is.
    Original,
    /// Nothing stays.
    Dropped,
    /// The batch in `Buffers::out` replaces it.
    Rewritten,
}

/// The inputs of the retention decision.
pub(super) struct FilterContext<'a> {
    pub map: &'a OffsetMap,
    /// Offsets above this were not mapped: keep them (Kafka's latestOffset).
    pub map_latest_offset: i64,
    /// The time the cleaning pass started.
    pub now_ms: i64,
    pub delete_retention_ms: i64,
    /// The last batch of an active producer id (Kafka's
    /// `lastRecordsOfActiveProducers`).
    pub last_record_of: LastRecordOf<'a>,
}

/// What the producer state knows of an active producer's last batch
/// (Kafka's `LastRecord`): the cleaner keeps that batch, emptied if need
/// be, so the producer's sequence and epoch outlive its records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LastRecord {
    /// The last offset of its last data batch; None if it wrote only
    /// markers here.
    pub last_data_offset: Option<i64>,
    pub producer_epoch: i16,
}

/// Producer id -> its [`LastRecord`], if the producer is active.
pub type LastRecordOf<'a> = &'a dyn Fn(i64) -> Option<LastRecord>;

/// What a cleaning pass does with one batch, as far as transactions go
/// (decided by the cleaner's walk over the aborted transactions).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum TxnFate {
    /// Not transactional, or committed data.
    Data,
    /// A data batch of an aborted transaction: its records go.
    AbortedData,
    /// A control batch. `removable`: none of its transaction's data was
    /// seen in this group, so it goes once its delete horizon has passed
    /// (Kafka's `onControlBatchRead`). `keeps_entry`: the aborted
    /// transaction it ends still had data here, so its `.txnindex` entry
    /// stays.
    Marker {
        removable: bool,
        keeps_entry: Option<AbortedTxn>,
    },
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct BatchCounts {
    pub records_read: u64,
    pub records_retained: u64,
    /// A rewritten or original batch that keeps a tombstone has this horizon.
    pub delete_horizon_ms: Option<i64>,
}

/// The KIP-534 delete horizon of a batch (attribute bit 6; the base
/// timestamp then holds it).
pub fn delete_horizon_ms(header: &BatchHeader) -> Option<i64> {
    (header.attributes & DELETE_HORIZON_FLAG_MASK != 0).then_some(header.base_timestamp)
}

fn decompressed_limit_bytes(batch_len: usize) -> usize {
    use super::validate::{DECOMPRESSED_LIMIT_FACTOR, MIN_DECOMPRESSED_LIMIT_BYTES};
    batch_len
        .saturating_mul(DECOMPRESSED_LIMIT_FACTOR)
        .max(MIN_DECOMPRESSED_LIMIT_BYTES)
}

/// The uncompressed records of `batch`, decompressing into `scratch`.
fn records_of<'a>(
    batch: &'a [u8],
    header: &BatchHeader,
    scratch: &'a mut Vec<u8>,
) -> Result<&'a [u8], String> {
    let codec = header
        .compression()
        .ok_or_else(|| format!("batch at offset {}: unknown codec", header.base_offset))?;
    let body = batch
        .get(RECORD_BATCH_OVERHEAD..header.total_size())
        .ok_or_else(|| format!("batch at offset {} truncated", header.base_offset))?;
    if codec == Compression::None {
        return Ok(body);
    }
    records::decompress(codec, body, scratch, decompressed_limit_bytes(batch.len()))?;
    Ok(scratch)
}

/// Calls `f(offset, key)` for every record of a data batch.
pub(super) fn for_each_key(
    batch: &[u8],
    header: &BatchHeader,
    bufs: &mut Buffers,
    mut f: impl FnMut(i64, Option<&[u8]>),
) -> Result<(), String> {
    let recs = records_of(batch, header, &mut bufs.records)?;
    for r in RecordIter::new(recs) {
        let r = r.map_err(|e| e.to_string())?;
        f(header.base_offset + r.offset_delta as i64, r.key);
    }
    Ok(())
}

/// Kafka's `Cleaner.shouldRetainRecord` for a v2 batch.
fn retain_record(
    ctx: &FilterContext<'_>,
    horizon: Option<i64>,
    offset: i64,
    key: Option<&[u8]>,
    has_value: bool,
) -> bool {
    if offset > ctx.map_latest_offset {
        return true;
    }
    let Some(key) = key else {
        return false; // keyless records have no place in a compacted log
    };
    let latest_for_key = ctx.map.get(key).is_none_or(|found| offset >= found);
    let keep_delete = horizon.is_none_or(|h| ctx.now_ms < h);
    latest_for_key && (has_value || keep_delete)
}

/// Decides what stays of one batch; a rewrite goes to `bufs.out`. A batch
/// of aborted data keeps no record (Kafka's `discardBatchRecords`).
pub(super) fn filter_batch(
    batch: &[u8],
    header: &BatchHeader,
    fate: TxnFate,
    ctx: &FilterContext<'_>,
    bufs: &mut Buffers,
) -> Result<(Outcome, BatchCounts), String> {
    let mut counts = BatchCounts::default();
    let horizon = delete_horizon_ms(header);
    match fate {
        TxnFate::Marker { removable, .. } => {
            assert!(header.is_control(), "a marker is a control batch");
            return filter_marker(batch, header, removable, ctx, bufs);
        }
        TxnFate::AbortedData => {
            counts.records_read = header.records_count.max(0) as u64;
            return Ok((empty_or_dropped(header, ctx, &mut bufs.out), counts));
        }
        TxnFate::Data => assert!(!header.is_control(), "a control batch is a marker"),
    }
    let Buffers { records, body, out } = bufs;
    let recs = records_of(batch, header, records)?;
    // First pass: which records stay.
    let mut kept_all = true;
    let mut has_tombstone = false;
    let mut first_ts: Option<i64> = None;
    let mut max_ts = NO_TIMESTAMP;
    for r in RecordIter::new(recs) {
        let r = r.map_err(|e| e.to_string())?;
        counts.records_read += 1;
        let offset = header.base_offset + r.offset_delta as i64;
        if retain_record(ctx, horizon, offset, r.key, r.value.is_some()) {
            counts.records_retained += 1;
            has_tombstone |= r.value.is_none();
            let ts = header.base_timestamp.wrapping_add(r.timestamp_delta);
            first_ts.get_or_insert(ts);
            max_ts = max_ts.max(ts);
        } else {
            kept_all = false;
        }
    }
    let set_horizon = has_tombstone && horizon.is_none();
    if counts.records_retained == 0 {
        return Ok((empty_or_dropped(header, ctx, out), counts));
    }
    let new_horizon = if set_horizon {
        Some(ctx.now_ms.saturating_add(ctx.delete_retention_ms))
    } else {
        horizon
    };
    if has_tombstone {
        counts.delete_horizon_ms = new_horizon;
    }
    if kept_all && !set_horizon {
        return Ok((Outcome::Original, counts));
    }
    let max_ts = if header.timestamp_type() == TimestampType::LogAppendTime {
        header.max_timestamp
    } else {
        max_ts
    };
    let rewrite = Rewrite {
        base_ts: new_horizon.unwrap_or(first_ts.unwrap_or(NO_TIMESTAMP)),
        max_ts,
        horizon: new_horizon,
        records_count: counts.records_retained as i32,
    };
    rewrite.write(batch, header, recs, body, out, |offset, key, has_value| {
        retain_record(ctx, horizon, offset, key, has_value)
    })?;
    Ok((Outcome::Rewritten, counts))
}

/// Kafka's retention of a control batch: kept until it is `removable` and
/// its delete horizon, set by the first pass that finds it removable, has
/// passed; but the last batch of an active producer stays, emptied.
fn filter_marker(
    batch: &[u8],
    header: &BatchHeader,
    removable: bool,
    ctx: &FilterContext<'_>,
    bufs: &mut Buffers,
) -> Result<(Outcome, BatchCounts), String> {
    let mut counts = BatchCounts {
        records_read: header.records_count.max(0) as u64,
        ..BatchCounts::default()
    };
    let horizon = delete_horizon_ms(header);
    if header.records_count <= 0 || (removable && horizon.is_some_and(|h| h <= ctx.now_ms)) {
        return Ok((empty_or_dropped(header, ctx, &mut bufs.out), counts));
    }
    counts.records_retained = counts.records_read;
    if !removable {
        // Its transaction's data is still here: no horizon is due (one
        // reported would bring the log back to the cleaner for nothing).
        return Ok((Outcome::Original, counts));
    }
    if horizon.is_some() {
        counts.delete_horizon_ms = horizon;
        return Ok((Outcome::Original, counts));
    }
    let new_horizon = ctx.now_ms.saturating_add(ctx.delete_retention_ms);
    counts.delete_horizon_ms = Some(new_horizon);
    let Buffers { records, body, out } = bufs;
    let recs = records_of(batch, header, records)?;
    let rewrite = Rewrite {
        base_ts: new_horizon,
        max_ts: header.max_timestamp,
        horizon: Some(new_horizon),
        records_count: header.records_count,
    };
    rewrite.write(batch, header, recs, body, out, |_, _, _| true)?;
    Ok((Outcome::Rewritten, counts))
}

/// A batch rewritten with some of its records, re-encoded against a new
/// base timestamp (the delete horizon when it has one, as KIP-534 keeps
/// it).
struct Rewrite {
    base_ts: i64,
    max_ts: i64,
    horizon: Option<i64>,
    records_count: i32,
}

impl Rewrite {
    /// Writes to `out` the batch of `header` (whose records are `recs`)
    /// with the records `keep(offset, key, has_value)` selects.
    fn write(
        &self,
        batch: &[u8],
        header: &BatchHeader,
        recs: &[u8],
        body: &mut Vec<u8>,
        out: &mut Vec<u8>,
        keep: impl Fn(i64, Option<&[u8]>, bool) -> bool,
    ) -> Result<(), String> {
        body.clear();
        let mut iter = RecordIter::new(recs);
        loop {
            let start = iter.position();
            let Some(r) = iter.next() else { break };
            let r = r.map_err(|e| e.to_string())?;
            let offset = header.base_offset + r.offset_delta as i64;
            if !keep(offset, r.key, r.value.is_some()) {
                continue;
            }
            let ts = header.base_timestamp.wrapping_add(r.timestamp_delta);
            reencode_record(
                &recs[start..iter.position()],
                ts.wrapping_sub(self.base_ts),
                body,
            )?;
        }
        let mut attributes = header.attributes & !DELETE_HORIZON_FLAG_MASK;
        if self.horizon.is_some() {
            attributes |= DELETE_HORIZON_FLAG_MASK;
        }
        out.clear();
        write_header(
            out,
            header,
            attributes,
            self.base_ts,
            self.max_ts,
            self.records_count,
        );
        let codec = header.compression().expect("checked by records_of");
        let xerial = codec == Compression::Snappy
            && batch[RECORD_BATCH_OVERHEAD..].starts_with(&records::XERIAL_MAGIC);
        records::compress(codec, body, out, xerial).map_err(|e| e.to_string())?;
        finish_batch(out);
        Ok(())
    }
}

/// A batch none of whose records stay: dropped, unless it is the last data
/// batch of an active producer (Kafka's `isBatchLastRecordOfProducer`,
/// RETAIN_EMPTY): then its header alone, in `out`, keeps the producer's
/// last sequence and epoch in the log.
fn empty_or_dropped(header: &BatchHeader, ctx: &FilterContext<'_>, out: &mut Vec<u8>) -> Outcome {
    if !is_last_batch_of_producer(header, ctx) {
        return Outcome::Dropped;
    }
    out.clear();
    let attributes =
        header.attributes & (TIMESTAMP_TYPE_MASK | TRANSACTIONAL_FLAG_MASK | CONTROL_FLAG_MASK);
    write_header(
        out,
        header,
        attributes,
        NO_TIMESTAMP,
        header.max_timestamp,
        0,
    );
    finish_batch(out);
    Outcome::Rewritten
}

/// Kafka's `isBatchLastRecordOfProducer`: the batch the producer state
/// names as the producer's last (for one that wrote only markers here, a
/// marker of its current epoch).
fn is_last_batch_of_producer(header: &BatchHeader, ctx: &FilterContext<'_>) -> bool {
    if !header.has_producer_id() {
        return false;
    }
    (ctx.last_record_of)(header.producer_id).is_some_and(|last| match last.last_data_offset {
        Some(offset) => header.last_offset() == offset,
        None => header.is_control() && header.producer_epoch == last.producer_epoch,
    })
}

/// Copies one encoded record with a new timestamp delta; the offset delta
/// stays, since the batch keeps its base offset.
fn reencode_record(raw: &[u8], ts_delta: i64, out: &mut Vec<u8>) -> Result<(), String> {
    let bad = |e: records::RecordError| e.to_string();
    let mut pos = 0;
    records::read_varint(raw, &mut pos).map_err(bad)?;
    let attributes = *raw.get(pos).ok_or("record truncated")?;
    pos += 1;
    records::read_varlong(raw, &mut pos).map_err(bad)?;
    let offset_delta = records::read_varint(raw, &mut pos).map_err(bad)?;
    let tail = raw.get(pos..).ok_or("record truncated")?;
    let body_len =
        1 + records::varlong_len(ts_delta) + records::varint_len(offset_delta) + tail.len();
    records::write_varint(out, body_len as i32);
    out.push(attributes);
    records::write_varlong(out, ts_delta);
    records::write_varint(out, offset_delta);
    out.extend_from_slice(tail);
    Ok(())
}

/// The 61-byte v2 header with length and CRC left for [`finish_batch`];
/// offsets, leader epoch and producer fields come from the original.
fn write_header(
    out: &mut Vec<u8>,
    h: &BatchHeader,
    attributes: i16,
    base_timestamp: i64,
    max_timestamp: i64,
    records_count: i32,
) {
    out.extend_from_slice(&h.base_offset.to_be_bytes());
    out.extend_from_slice(&0i32.to_be_bytes());
    out.extend_from_slice(&h.partition_leader_epoch.to_be_bytes());
    out.push(CURRENT_MAGIC);
    out.extend_from_slice(&0u32.to_be_bytes());
    debug_assert_eq!(out.len(), ATTRIBUTES_OFFSET);
    out.extend_from_slice(&attributes.to_be_bytes());
    // Kafka keeps the original last offset so the last sequence survives.
    out.extend_from_slice(&h.last_offset_delta.to_be_bytes());
    out.extend_from_slice(&base_timestamp.to_be_bytes());
    out.extend_from_slice(&max_timestamp.to_be_bytes());
    out.extend_from_slice(&h.producer_id.to_be_bytes());
    out.extend_from_slice(&h.producer_epoch.to_be_bytes());
    out.extend_from_slice(&h.base_sequence.to_be_bytes());
    out.extend_from_slice(&records_count.to_be_bytes());
    debug_assert_eq!(out.len(), RECORD_BATCH_OVERHEAD);
}

fn finish_batch(out: &mut [u8]) {
    let length = (out.len() - LOG_OVERHEAD) as i32;
    out[LENGTH_OFFSET..LENGTH_OFFSET + 4].copy_from_slice(&length.to_be_bytes());
    let crc = batch::compute_crc(out);
    out[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
}
