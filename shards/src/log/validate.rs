//! Validation of one Produce partition's record batches and offset
//! assignment, following Kafka 3.9's `UnifiedLog.analyzeAndValidateRecords`
//! and `LogValidator` for magic 2 with in-place assignment: the batches are
//! checked, every record is parsed (through a bounded streaming decoder for
//! compressed batches), and only the base offset, partition leader epoch and
//! (when it changes) timestamp type / max timestamp + CRC are rewritten.
//! Compressed batches are never recompressed.
//!
//! Where kshard is stricter than Kafka (noted at each check): a trailing
//! partial batch is CORRUPT_MESSAGE (Kafka silently drops it), and record
//! offset deltas must run 0, 1, 2, ... (Kafka rebuilds such compressed
//! batches and ignores the deltas of uncompressed ones).

use std::fmt;

use super::batch::{
    self, BatchError, BatchHeader, Compression, TimestampType, ATTRIBUTES_OFFSET,
    CRC_COVERAGE_START, CRC_OFFSET, CURRENT_MAGIC, MAX_TIMESTAMP_OFFSET, NO_TIMESTAMP,
    RECORD_BATCH_OVERHEAD, TIMESTAMP_TYPE_MASK,
};
use super::patched::PatchedHeader;
use super::records::{self, Decoder, ReadSource, RecordError, RecordSource, SliceSource};
use super::LogAppendInfo;

/// Kafka's default `max.message.bytes` (1 MiB + record batch overhead).
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 1_048_588;
/// Decompressed records may be this many times `max_message_bytes`...
pub const DECOMPRESSED_LIMIT_FACTOR: usize = 32;
/// ...but at least this much, so small topic limits still admit normal ratios.
pub const MIN_DECOMPRESSED_LIMIT_BYTES: usize = 16 << 20;

/// The topic settings validation depends on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ValidationConfig {
    /// `max.message.bytes`: the largest batch, as sent (compressed).
    pub max_message_bytes: usize,
    /// `message.timestamp.type`.
    pub timestamp_type: TimestampType,
    /// `message.timestamp.before.max.ms` (Kafka 3.9 default: Long.MAX).
    pub timestamp_before_max_ms: i64,
    /// `message.timestamp.after.max.ms` (Kafka 3.9 default: Long.MAX).
    pub timestamp_after_max_ms: i64,
    /// `cleanup.policy` contains `compact`: every record needs a key.
    pub compacted: bool,
    /// The broker's own append of control batches (transaction markers,
    /// Kafka's `AppendOrigin.COORDINATOR`): control batches pass, with a
    /// producer id and base sequence -1. Clients' appends keep false.
    pub allow_control_batches: bool,
}

impl Default for ValidationConfig {
    fn default() -> Self {
        ValidationConfig {
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            timestamp_type: TimestampType::CreateTime,
            timestamp_before_max_ms: i64::MAX,
            timestamp_after_max_ms: i64::MAX,
            compacted: false,
            allow_control_batches: false,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ValidationError {
    /// CORRUPT_MESSAGE (2): bad CRC, bad batch length, partial batch, or a
    /// compressed stream that does not decode.
    CorruptMessage(String),
    /// INVALID_RECORD (87): a batch or record breaks the format's rules.
    InvalidRecord(String),
    /// MESSAGE_TOO_LARGE (10): batch over `max.message.bytes`, or records
    /// decompressing past the limit (`size` is then a lower bound).
    MessageTooLarge { size: usize, max: usize },
    /// Record-level errors (Kafka's RecordValidationException): each
    /// rejected record's batch index and Kafka's message for it;
    /// INVALID_TIMESTAMP (32) when any is a timestamp error, else
    /// INVALID_RECORD (87). Key errors end with `NULL_KEY_MESSAGE` until
    /// `with_topic_partition` names the partition.
    RecordErrors {
        timestamp: bool,
        errors: Vec<(i32, String)>,
    },
    /// A batch whose magic is not 2. Kafka 3.9 answers a Produce v3+ with
    /// INVALID_RECORD for magic 0/1 (`ProduceRequest.validateRecords`) and
    /// CORRUPT_MESSAGE for magic > 2 (the batch iterator's "Invalid magic").
    UnsupportedMagic(u8),
}

impl ValidationError {
    /// Kafka's error code for the partition's produce response.
    pub fn error_code(&self) -> i16 {
        match self {
            ValidationError::CorruptMessage(_) => 2,
            ValidationError::InvalidRecord(_) => 87,
            ValidationError::MessageTooLarge { .. } => 10,
            ValidationError::RecordErrors {
                timestamp: true, ..
            } => 32,
            ValidationError::RecordErrors { .. } => 87,
            ValidationError::UnsupportedMagic(m) if *m > CURRENT_MAGIC => 2,
            ValidationError::UnsupportedMagic(_) => 87,
        }
    }
}

impl fmt::Display for ValidationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ValidationError::CorruptMessage(m) => write!(f, "corrupt message: {m}"),
            ValidationError::InvalidRecord(m) => write!(f, "invalid record: {m}"),
            ValidationError::MessageTooLarge { size, max } => write!(
                f,
                "the record batch size {size} bytes exceeds the maximum of {max} bytes"
            ),
            // LogValidator.processRecordErrors.
            ValidationError::RecordErrors {
                timestamp: true, ..
            } => write!(
                f,
                "One or more records have been rejected due to invalid timestamp"
            ),
            ValidationError::RecordErrors { errors, .. } => {
                let shown: Vec<String> = errors
                    .iter()
                    .take(3)
                    .map(|(i, m)| format!("RecordError(batchIndex={i}, message='{m}')"))
                    .collect();
                write!(
                    f,
                    "One or more records have been rejected due to {} record errors in total, and only showing the first three errors at most: [{}]",
                    errors.len(),
                    shown.join(", ")
                )
            }
            ValidationError::UnsupportedMagic(m) => write!(
                f,
                "record batches must have magic {CURRENT_MAGIC}, found magic {m}"
            ),
        }
    }
}

impl std::error::Error for ValidationError {}

/// Kafka's message for a keyless record on a compacted topic, before the
/// topic partition that `ValidationError::with_topic_partition` appends.
pub const NULL_KEY_MESSAGE: &str =
    "Compacted topic cannot accept message without key in topic partition";

impl ValidationError {
    /// Names the partition in key errors, as Kafka's message does.
    pub fn with_topic_partition(self, topic_partition: &str) -> ValidationError {
        match self {
            ValidationError::RecordErrors { timestamp, errors } => ValidationError::RecordErrors {
                timestamp,
                errors: errors
                    .into_iter()
                    .map(|(i, m)| {
                        if m == NULL_KEY_MESSAGE {
                            (i, format!("{m} {topic_partition}"))
                        } else {
                            (i, m)
                        }
                    })
                    .collect(),
            },
            other => other,
        }
    }

    /// The message Kafka sends with the error code: only record-level
    /// errors carry one (ReplicaManager's hasCustomErrorMessage).
    pub fn wire_message(&self) -> Option<String> {
        match self {
            ValidationError::RecordErrors { .. } => Some(self.to_string()),
            _ => None,
        }
    }

    /// Per-record errors for the produce response's record_errors.
    pub fn record_errors(&self) -> &[(i32, String)] {
        match self {
            ValidationError::RecordErrors { errors, .. } => errors,
            _ => &[],
        }
    }
}

fn invalid(msg: impl Into<String>) -> ValidationError {
    ValidationError::InvalidRecord(msg.into())
}
fn corrupt(msg: impl Into<String>) -> ValidationError {
    ValidationError::CorruptMessage(msg.into())
}

fn from_batch_error(e: BatchError) -> ValidationError {
    match e {
        BatchError::UnsupportedMagic(m) => ValidationError::UnsupportedMagic(m),
        other => corrupt(other.to_string()),
    }
}

fn from_record_error(e: RecordError) -> ValidationError {
    match e {
        RecordError::Malformed(m) => invalid(m),
        RecordError::Decompress(m) => corrupt(m),
        RecordError::TooLarge { limit_bytes } => ValidationError::MessageTooLarge {
            size: limit_bytes.saturating_add(1),
            max: limit_bytes,
        },
    }
}

/// Validates and assigns offsets; holds scratch buffers reused across calls
/// so the steady state allocates nothing but codec state.
pub struct Validator {
    chunk: Vec<u8>,
    snappy: Vec<u8>,
    max_decompressed_bytes: Option<usize>,
    /// Reused by the in-place entry points.
    headers: Vec<PatchedHeader>,
}

impl Default for Validator {
    fn default() -> Self {
        Self::new()
    }
}

impl Validator {
    /// Decompressed data is limited to
    /// `max(max_message_bytes * DECOMPRESSED_LIMIT_FACTOR, MIN_DECOMPRESSED_LIMIT_BYTES)`.
    pub fn new() -> Self {
        Validator {
            chunk: Vec::new(),
            snappy: Vec::new(),
            max_decompressed_bytes: None,
            headers: Vec::new(),
        }
    }

    /// A validator with a fixed limit on decompressed bytes per batch.
    pub fn with_max_decompressed_bytes(limit_bytes: usize) -> Self {
        Validator {
            max_decompressed_bytes: Some(limit_bytes),
            ..Self::new()
        }
    }

    /// Validates a Produce partition's data and assigns offsets from
    /// `next_offset`. As Kafka requires for magic 2, the data must be exactly
    /// one batch. On error the buffer is unchanged.
    pub fn validate_and_assign_offsets(
        &mut self,
        records: &mut [u8],
        next_offset: i64,
        partition_leader_epoch: i32,
        now_ms: i64,
        cfg: &ValidationConfig,
    ) -> Result<LogAppendInfo, ValidationError> {
        self.run_in_place(
            records,
            next_offset,
            partition_leader_epoch,
            now_ms,
            cfg,
            false,
        )
    }

    /// Like `validate_and_assign_offsets` but leaves `records` as they are
    /// and pushes each batch's header as it must be stored onto `headers`
    /// (see [`crate::log::patched`]).
    pub fn validate_and_patch_headers(
        &mut self,
        records: &[u8],
        next_offset: i64,
        partition_leader_epoch: i32,
        now_ms: i64,
        cfg: &ValidationConfig,
        headers: &mut Vec<PatchedHeader>,
    ) -> Result<LogAppendInfo, ValidationError> {
        let before = headers.len();
        let r = self.run(
            records,
            next_offset,
            partition_leader_epoch,
            now_ms,
            cfg,
            false,
            headers,
        );
        if r.is_err() {
            headers.truncate(before);
        }
        r
    }

    /// Like `validate_and_assign_offsets` but accepts several batches laid end
    /// to end (kshard's own multi-batch appends; Kafka's produce path refuses
    /// them), assigning consecutive offsets across them.
    pub fn validate_batches_and_assign_offsets(
        &mut self,
        records: &mut [u8],
        next_offset: i64,
        partition_leader_epoch: i32,
        now_ms: i64,
        cfg: &ValidationConfig,
    ) -> Result<LogAppendInfo, ValidationError> {
        self.run_in_place(
            records,
            next_offset,
            partition_leader_epoch,
            now_ms,
            cfg,
            true,
        )
    }

    fn run_in_place(
        &mut self,
        records: &mut [u8],
        next_offset: i64,
        partition_leader_epoch: i32,
        now_ms: i64,
        cfg: &ValidationConfig,
        allow_many: bool,
    ) -> Result<LogAppendInfo, ValidationError> {
        let mut headers = std::mem::take(&mut self.headers);
        headers.clear();
        let r = self.run(
            records,
            next_offset,
            partition_leader_epoch,
            now_ms,
            cfg,
            allow_many,
            &mut headers,
        );
        if r.is_ok() {
            for h in &headers {
                records[h.position..h.position + RECORD_BATCH_OVERHEAD].copy_from_slice(&h.bytes);
            }
        }
        self.headers = headers;
        r
    }

    #[allow(clippy::too_many_arguments)]
    fn run(
        &mut self,
        records: &[u8],
        next_offset: i64,
        partition_leader_epoch: i32,
        now_ms: i64,
        cfg: &ValidationConfig,
        allow_many: bool,
        headers: &mut Vec<PatchedHeader>,
    ) -> Result<LogAppendInfo, ValidationError> {
        if records.is_empty() {
            return Err(invalid("produce data has no record batch"));
        }
        // Structure first, so framing errors leave the buffer untouched.
        let mut pos = 0usize;
        let mut batch_count = 0u32;
        while pos < records.len() {
            let rest = &records[pos..];
            let header = BatchHeader::parse(rest).map_err(from_batch_error)?;
            let size = header.total_size();
            if rest.len() < size {
                return Err(corrupt(format!(
                    "partial batch at byte {pos}: needs {size} bytes, {} present",
                    rest.len()
                )));
            }
            if batch_count > 0 && !allow_many {
                return Err(invalid(
                    "produce data may contain exactly one record batch per partition",
                ));
            }
            batch_count += 1;
            pos += size;
        }
        debug_assert_eq!(pos, records.len());

        let limit_bytes = self.max_decompressed_bytes.unwrap_or_else(|| {
            cfg.max_message_bytes
                .saturating_mul(DECOMPRESSED_LIMIT_FACTOR)
                .max(MIN_DECOMPRESSED_LIMIT_BYTES)
        });
        let first_offset = next_offset;
        let mut offset = next_offset;
        let mut max_timestamp = NO_TIMESTAMP;
        let mut offset_of_max_timestamp = -1i64;
        let mut pos = 0usize;
        while pos < records.len() {
            let header = BatchHeader::parse(&records[pos..]).map_err(from_batch_error)?;
            let size = header.total_size();
            let batch = &records[pos..pos + size];
            let batch_max = self.validate_batch(batch, &header, now_ms, cfg, limit_bytes)?;
            let count = header.records_count as i64;
            let last_offset = offset + count - 1;

            let mut stored = [0u8; RECORD_BATCH_OVERHEAD];
            stored.copy_from_slice(&batch[..RECORD_BATCH_OVERHEAD]);
            batch::set_base_offset(&mut stored, offset);
            batch::set_partition_leader_epoch(&mut stored, partition_leader_epoch);
            let batch_max = match cfg.timestamp_type {
                TimestampType::LogAppendTime => now_ms,
                TimestampType::CreateTime => batch_max,
            };
            set_max_timestamp(
                &mut stored,
                &batch[RECORD_BATCH_OVERHEAD..],
                &header,
                cfg.timestamp_type,
                batch_max,
            );
            headers.push(PatchedHeader {
                position: pos,
                bytes: stored,
            });
            // Kafka's shallow offset of max timestamp: the holding batch's last offset.
            if batch_max > max_timestamp {
                max_timestamp = batch_max;
                offset_of_max_timestamp = last_offset;
            }
            offset = last_offset + 1;
            pos += size;
        }
        let log_append_time_ms = match cfg.timestamp_type {
            TimestampType::LogAppendTime => {
                offset_of_max_timestamp = offset - 1;
                now_ms
            }
            TimestampType::CreateTime => NO_TIMESTAMP,
        };
        let record_count = offset - first_offset;
        debug_assert!(record_count > 0 && record_count <= u32::MAX as i64);
        Ok(LogAppendInfo {
            first_offset,
            last_offset: offset - 1,
            max_timestamp,
            offset_of_max_timestamp,
            log_append_time_ms,
            record_count: record_count as u32,
            batch_count,
            valid_bytes: records.len(),
        })
    }

    /// Batch-level checks in Kafka's order, then every record. Returns the
    /// largest record timestamp.
    fn validate_batch(
        &mut self,
        batch: &[u8],
        h: &BatchHeader,
        now_ms: i64,
        cfg: &ValidationConfig,
        limit_bytes: usize,
    ) -> Result<i64, ValidationError> {
        debug_assert_eq!(batch.len(), h.total_size());
        // UnifiedLog.analyzeAndValidateRecords.
        if h.base_offset != 0 {
            return Err(invalid(format!(
                "the base offset of a produced batch must be 0, not {}",
                h.base_offset
            )));
        }
        if batch.len() > cfg.max_message_bytes {
            return Err(ValidationError::MessageTooLarge {
                size: batch.len(),
                max: cfg.max_message_bytes,
            });
        }
        let crc = batch::compute_crc(batch);
        if crc != h.crc {
            return Err(corrupt(format!(
                "record is corrupt (stored crc = {}, computed {crc})",
                h.crc
            )));
        }
        // LogValidator.validateBatch.
        if h.last_offset_delta < 0 {
            return Err(invalid(format!(
                "batch has an invalid offset range (last offset delta {})",
                h.last_offset_delta
            )));
        }
        if h.records_count <= 0 {
            return Err(invalid(format!(
                "invalid reported count for record batch: {}",
                h.records_count
            )));
        }
        if h.last_offset_delta as i64 + 1 != h.records_count as i64 {
            return Err(invalid(format!(
                "inconsistent batch offset range (last offset delta {}) and count of records {}",
                h.last_offset_delta, h.records_count
            )));
        }
        if h.is_control() {
            if !cfg.allow_control_batches {
                return Err(invalid("clients are not allowed to write control records"));
            }
        } else if h.has_producer_id() && h.base_sequence < 0 {
            return Err(invalid(format!(
                "invalid sequence number {} in record batch with producer id {}",
                h.base_sequence, h.producer_id
            )));
        }
        let codec = h
            .compression()
            .ok_or_else(|| invalid("unknown compression codec"))?;
        let body = &batch[RECORD_BATCH_OVERHEAD..];
        if codec == Compression::None {
            return scan_records(&mut SliceSource::new(body), h, now_ms, cfg);
        }
        let decoder =
            Decoder::new(codec, body, &mut self.snappy, limit_bytes).map_err(from_record_error)?;
        let mut src = ReadSource::new(decoder, &mut self.chunk, limit_bytes);
        scan_records(&mut src, h, now_ms, cfg)
    }
}

/// Parses exactly `records_count` records and checks each as
/// `LogValidator.validateRecord` does. Key and timestamp errors are gathered
/// over the whole batch; any timestamp error wins, as in
/// `processRecordErrors`. Structural errors stop at once.
fn scan_records<S: RecordSource>(
    src: &mut S,
    h: &BatchHeader,
    now_ms: i64,
    cfg: &ValidationConfig,
) -> Result<i64, ValidationError> {
    let lat_batch = h.timestamp_type() == TimestampType::LogAppendTime;
    let mut max_ts = NO_TIMESTAMP;
    let mut record_errors: Vec<(i32, String)> = Vec::new();
    let mut timestamp_error = false;
    for index in 0..h.records_count {
        let r = records::parse_record(src).map_err(from_record_error)?;
        if r.offset_delta != index {
            return Err(invalid(format!(
                "record {index} has offset delta {}; deltas must run from 0 in order",
                r.offset_delta
            )));
        }
        // A LogAppendTime batch's records all carry the batch max timestamp.
        let ts = if lat_batch {
            h.max_timestamp
        } else {
            h.base_timestamp.wrapping_add(r.timestamp_delta)
        };
        if cfg.compacted && r.key_len < 0 {
            record_errors.push((index, NULL_KEY_MESSAGE.to_string()));
        } else if let Some(e) = check_timestamp(index, ts, &r, lat_batch, now_ms, cfg) {
            timestamp_error = true;
            record_errors.push((index, e));
        }
        max_ts = max_ts.max(ts);
    }
    if !src.at_end().map_err(from_record_error)? {
        return Err(invalid(
            "incorrect declared batch size, records still remaining",
        ));
    }
    if !record_errors.is_empty() {
        return Err(ValidationError::RecordErrors {
            timestamp: timestamp_error,
            errors: record_errors,
        });
    }
    Ok(max_ts)
}

/// `LogValidator.validateTimestamp`.
fn check_timestamp(
    index: i32,
    ts: i64,
    r: &records::RecordLayout,
    lat_batch: bool,
    now_ms: i64,
    cfg: &ValidationConfig,
) -> Option<String> {
    if cfg.timestamp_type == TimestampType::CreateTime && ts != NO_TIMESTAMP {
        // i128: Kafka's long arithmetic would wrap for absurd timestamps.
        let diff = now_ms as i128 - ts as i128;
        if diff > cfg.timestamp_before_max_ms as i128 || -diff > cfg.timestamp_after_max_ms as i128
        {
            // Produced batches start at offset 0, so a record's offset is
            // its index; the bounds wrap as Java longs do.
            return Some(format!(
                "Timestamp {ts} of message with offset {index} is out of range. The timestamp should be within [{}, {}]",
                now_ms.wrapping_sub(cfg.timestamp_before_max_ms),
                now_ms.wrapping_add(cfg.timestamp_after_max_ms)
            ));
        }
    } else if lat_batch {
        // DefaultRecord.toString inside Kafka's message.
        return Some(format!(
            "Invalid timestamp type in message DefaultRecord(offset={index}, timestamp={ts}, key={} bytes, value={} bytes). Producer should not set timestamp type to LogAppendTime.",
            r.key_len.max(0),
            r.value_len.max(0)
        ));
    }
    None
}

/// `DefaultRecordBatch.setMaxTimestamp` on a batch's `header` (whose
/// records are `body`): rewrites the timestamp type bit and max timestamp,
/// and the CRC they are covered by, only if either changes.
fn set_max_timestamp(
    header: &mut [u8; RECORD_BATCH_OVERHEAD],
    body: &[u8],
    h: &BatchHeader,
    ty: TimestampType,
    ts: i64,
) {
    if h.timestamp_type() == ty && h.max_timestamp == ts {
        return;
    }
    let attributes = match ty {
        TimestampType::LogAppendTime => h.attributes | TIMESTAMP_TYPE_MASK,
        TimestampType::CreateTime => h.attributes & !TIMESTAMP_TYPE_MASK,
    };
    header[ATTRIBUTES_OFFSET..ATTRIBUTES_OFFSET + 2].copy_from_slice(&attributes.to_be_bytes());
    header[MAX_TIMESTAMP_OFFSET..MAX_TIMESTAMP_OFFSET + 8].copy_from_slice(&ts.to_be_bytes());
    let crc = crc32c::crc32c_append(crc32c::crc32c(&header[CRC_COVERAGE_START..]), body);
    header[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
}

/// Thin wrapper over `Validator::validate_and_assign_offsets` with fresh
/// scratch buffers; keep a `Validator` per shard on hot paths.
pub fn validate_and_assign_offsets(
    records: &mut [u8],
    next_offset: i64,
    partition_leader_epoch: i32,
    now_ms: i64,
    cfg: &ValidationConfig,
) -> Result<LogAppendInfo, ValidationError> {
    Validator::new().validate_and_assign_offsets(
        records,
        next_offset,
        partition_leader_epoch,
        now_ms,
        cfg,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::batch::{verify_crc, LENGTH_OFFSET, RECORDS_COUNT_OFFSET};
    use crate::log::records::BatchBuilder;

    const NOW_MS: i64 = 1_700_000_000_000;
    const CODECS: [(Compression, bool); 6] = [
        (Compression::None, false),
        (Compression::Gzip, false),
        (Compression::Snappy, false),
        (Compression::Snappy, true),
        (Compression::Lz4, false),
        (Compression::Zstd, false),
    ];

    fn builder(codec: Compression, xerial: bool) -> BatchBuilder {
        BatchBuilder::new(0)
            .compression(codec)
            .xerial_snappy(xerial)
            .producer(11, 0, 0)
    }

    fn sample(codec: Compression, xerial: bool, n: usize) -> Vec<u8> {
        let mut b = builder(codec, xerial);
        for i in 0..n {
            let v = format!("value-{i}");
            b.push(
                NOW_MS - 100 + i as i64,
                Some(b"key"),
                Some(v.as_bytes()),
                &[("h", None)],
            );
        }
        b.build()
    }

    fn fix_crc(b: &mut [u8]) {
        let crc = batch::compute_crc(b);
        b[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
    }

    fn code(mut b: Vec<u8>, cfg: &ValidationConfig) -> i16 {
        validate_and_assign_offsets(&mut b, 0, 0, NOW_MS, cfg)
            .unwrap_err()
            .error_code()
    }

    #[test]
    fn valid_batches_of_every_codec() {
        let cfg = ValidationConfig::default();
        for (codec, xerial) in CODECS {
            let mut b = sample(codec, xerial, 10);
            let sent = b.clone();
            let info = validate_and_assign_offsets(&mut b, 100, 7, NOW_MS, &cfg).unwrap();
            assert_eq!(info.first_offset, 100);
            assert_eq!(info.last_offset, 109);
            assert_eq!(info.record_count, 10);
            assert_eq!(info.batch_count, 1);
            assert_eq!(info.valid_bytes, b.len());
            assert_eq!(info.max_timestamp, NOW_MS - 91);
            assert_eq!(info.offset_of_max_timestamp, 109);
            assert_eq!(info.log_append_time_ms, NO_TIMESTAMP);
            let h = BatchHeader::parse(&b).unwrap();
            assert_eq!((h.base_offset, h.partition_leader_epoch), (100, 7));
            verify_crc(&b).unwrap();
            // Nothing but base offset and leader epoch changed.
            assert_eq!(b[16..], sent[16..], "{codec:?}");
        }
    }

    #[test]
    fn offsets_run_across_several_batches() {
        let cfg = ValidationConfig::default();
        let mut all = Vec::new();
        for (i, n) in [2usize, 3, 1].iter().enumerate() {
            let mut b = builder(CODECS[i * 2].0, false);
            for j in 0..*n {
                b.push(
                    NOW_MS + (i as i64) * 10 - j as i64,
                    Some(b"k"),
                    Some(b"v"),
                    &[],
                );
            }
            all.extend_from_slice(&b.build());
        }
        let mut strict = all.clone();
        let err = validate_and_assign_offsets(&mut strict, 0, 0, NOW_MS, &cfg).unwrap_err();
        assert_eq!(err.error_code(), 87);
        assert_eq!(strict, all, "framing errors leave the buffer untouched");

        let mut v = Validator::new();
        let info = v
            .validate_batches_and_assign_offsets(&mut all, 50, 3, NOW_MS, &cfg)
            .unwrap();
        assert_eq!((info.first_offset, info.last_offset), (50, 55));
        assert_eq!((info.record_count, info.batch_count), (6, 3));
        assert_eq!(info.max_timestamp, NOW_MS + 20);
        assert_eq!(info.offset_of_max_timestamp, 55);
        let bases: Vec<i64> = batch::BatchIter::new(&all)
            .map(|r| r.unwrap().1.base_offset)
            .collect();
        assert_eq!(bases, [50, 52, 55]);
        for r in batch::BatchIter::new(&all) {
            verify_crc(r.unwrap().2).unwrap();
        }
    }

    #[test]
    fn log_append_time_rewrites_max_timestamp_and_crc() {
        let cfg = ValidationConfig {
            timestamp_type: TimestampType::LogAppendTime,
            ..ValidationConfig::default()
        };
        for (codec, xerial) in CODECS {
            let mut b = sample(codec, xerial, 4);
            let info = validate_and_assign_offsets(&mut b, 10, 0, NOW_MS + 5, &cfg).unwrap();
            assert_eq!(info.log_append_time_ms, NOW_MS + 5);
            assert_eq!(info.max_timestamp, NOW_MS + 5);
            assert_eq!(info.offset_of_max_timestamp, 13);
            let h = BatchHeader::parse(&b).unwrap();
            assert_eq!(h.timestamp_type(), TimestampType::LogAppendTime);
            assert_eq!(h.max_timestamp, NOW_MS + 5);
            verify_crc(&b).unwrap();
        }
    }

    #[test]
    fn create_time_max_timestamp_is_corrected() {
        let mut b = sample(Compression::Lz4, false, 3);
        b[MAX_TIMESTAMP_OFFSET..MAX_TIMESTAMP_OFFSET + 8].copy_from_slice(&5i64.to_be_bytes());
        fix_crc(&mut b);
        let cfg = ValidationConfig::default();
        let info = validate_and_assign_offsets(&mut b, 0, 0, NOW_MS, &cfg).unwrap();
        assert_eq!(info.max_timestamp, NOW_MS - 98);
        assert_eq!(BatchHeader::parse(&b).unwrap().max_timestamp, NOW_MS - 98);
        verify_crc(&b).unwrap();
    }

    #[test]
    fn framing_errors() {
        let cfg = ValidationConfig::default();
        assert_eq!(code(Vec::new(), &cfg), 87);
        let b = sample(Compression::None, false, 3);
        assert_eq!(code(b[..b.len() - 1].to_vec(), &cfg), 2);
        assert_eq!(code(b[..30].to_vec(), &cfg), 2);
        let mut two = b.clone();
        two.extend_from_slice(&b[..20]);
        assert_eq!(code(two, &cfg), 2);
        let mut short = b.clone();
        short[LENGTH_OFFSET..LENGTH_OFFSET + 4].copy_from_slice(&20i32.to_be_bytes());
        assert_eq!(code(short, &cfg), 2);
        for (magic, expect) in [(0u8, 87), (1, 87), (3, 2)] {
            let mut m = b.clone();
            m[16] = magic;
            assert_eq!(code(m, &cfg), expect, "magic {magic}");
        }
    }

    #[test]
    fn batch_level_errors() {
        let cfg = ValidationConfig::default();
        let b = sample(Compression::Gzip, false, 3);
        let small = ValidationConfig {
            max_message_bytes: b.len() - 1,
            ..cfg
        };
        let mut c = b.clone();
        let err = validate_and_assign_offsets(&mut c, 0, 0, NOW_MS, &small).unwrap_err();
        assert_eq!(
            err,
            ValidationError::MessageTooLarge {
                size: b.len(),
                max: b.len() - 1
            }
        );
        assert_eq!(err.error_code(), 10);

        let mut crc = b.clone();
        *crc.last_mut().unwrap() ^= 1;
        assert_eq!(code(crc, &cfg), 2);

        let mut base = b.clone();
        batch::set_base_offset(&mut base, 5);
        assert_eq!(code(base, &cfg), 87);

        let mut count = b.clone();
        count[RECORDS_COUNT_OFFSET..RECORDS_COUNT_OFFSET + 4].copy_from_slice(&4i32.to_be_bytes());
        fix_crc(&mut count);
        assert_eq!(code(count, &cfg), 87);

        let control = BatchBuilder::new(0)
            .control(true)
            .add(1, Some(b"k"), None, &[])
            .build();
        assert_eq!(code(control, &cfg), 87);

        let no_seq = BatchBuilder::new(0)
            .producer(3, 0, -1)
            .add(1, None, None, &[])
            .build();
        assert_eq!(code(no_seq, &cfg), 87);

        let mut codec = BatchBuilder::new(0).add(1, None, None, &[]).build();
        codec[ATTRIBUTES_OFFSET + 1] |= 6;
        fix_crc(&mut codec);
        assert_eq!(code(codec, &cfg), 87);

        let mut garbage = b.clone();
        for x in &mut garbage[RECORD_BATCH_OVERHEAD..] {
            *x = 0x5a;
        }
        fix_crc(&mut garbage);
        assert_eq!(code(garbage, &cfg), 2);
    }

    /// The broker's own marker append (Kafka's COORDINATOR origin) takes
    /// the same path as a client's; clients still may not write one.
    #[test]
    fn control_batches_pass_only_for_the_broker() {
        use crate::log::control_batch::{
            build_end_txn_marker_batch, parse_end_txn_marker, ControlRecordType, EndTxnMarker,
        };
        let marker = EndTxnMarker {
            control_type: ControlRecordType::Abort,
            coordinator_epoch: 4,
        };
        let b = build_end_txn_marker_batch(77, 2, marker, NOW_MS);
        let client = ValidationConfig {
            compacted: true,
            ..ValidationConfig::default()
        };
        assert_eq!(code(b.clone(), &client), 87);
        let broker = ValidationConfig {
            allow_control_batches: true,
            ..client
        };
        let mut appended = b.clone();
        let info = validate_and_assign_offsets(&mut appended, 40, 6, NOW_MS, &broker).unwrap();
        assert_eq!(
            (info.first_offset, info.last_offset, info.record_count),
            (40, 40, 1)
        );
        assert_eq!(info.max_timestamp, NOW_MS);
        let h = BatchHeader::parse(&appended).unwrap();
        assert_eq!((h.base_offset, h.partition_leader_epoch), (40, 6));
        assert!(verify_crc(&appended).is_ok());
        assert_eq!(parse_end_txn_marker(&appended), Ok(marker));
        // A data batch without a sequence is still refused.
        let no_seq = BatchBuilder::new(0)
            .producer(3, 0, -1)
            .add(1, Some(b"k"), None, &[])
            .build();
        assert_eq!(code(no_seq, &broker), 87);
    }

    #[test]
    fn record_level_errors() {
        let cfg = ValidationConfig::default();
        for (codec, xerial) in CODECS {
            let gap = builder(codec, xerial)
                .add(NOW_MS, None, None, &[])
                .add_with_offset_delta(2, NOW_MS, None, None, &[])
                .build();
            let mut gap = gap;
            gap[batch::LAST_OFFSET_DELTA_OFFSET + 3] = 1;
            fix_crc(&mut gap);
            assert_eq!(code(gap, &cfg), 87, "{codec:?}");

            let compacted = ValidationConfig {
                compacted: true,
                ..cfg
            };
            let keyless = builder(codec, xerial)
                .add(NOW_MS, Some(b"k"), None, &[])
                .add(NOW_MS, None, Some(b"v"), &[])
                .build();
            assert_eq!(code(keyless.clone(), &compacted), 87);
            assert!(validate_and_assign_offsets(&mut keyless.clone(), 0, 0, NOW_MS, &cfg).is_ok());

            let window = ValidationConfig {
                timestamp_before_max_ms: 1000,
                timestamp_after_max_ms: 10,
                ..cfg
            };
            let old = builder(codec, xerial)
                .add(NOW_MS - 1001, None, None, &[])
                .build();
            assert_eq!(code(old, &window), 32);
            let future = builder(codec, xerial)
                .add(NOW_MS + 11, None, None, &[])
                .build();
            assert_eq!(code(future, &window), 32);
            let edge = builder(codec, xerial)
                .add(NOW_MS - 1000, None, None, &[])
                .add(NOW_MS + 10, None, None, &[])
                .add(NO_TIMESTAMP, None, None, &[])
                .build();
            assert!(validate_and_assign_offsets(&mut edge.clone(), 0, 0, NOW_MS, &window).is_ok());
            // A timestamp error outranks a key error in the same batch.
            let both = builder(codec, xerial)
                .add(NOW_MS, None, None, &[])
                .add(NOW_MS - 5000, Some(b"k"), None, &[])
                .build();
            let strict = ValidationConfig {
                compacted: true,
                ..window
            };
            assert_eq!(code(both, &strict), 32);

            let lat = builder(codec, xerial)
                .timestamp_type(TimestampType::LogAppendTime)
                .add(NOW_MS, None, None, &[])
                .build();
            let lat_topic = ValidationConfig {
                timestamp_type: TimestampType::LogAppendTime,
                ..cfg
            };
            assert_eq!(code(lat, &lat_topic), 32);
        }
    }

    #[test]
    fn uncompressed_record_bytes_must_match_count() {
        let cfg = ValidationConfig::default();
        let mut extra = sample(Compression::None, false, 2);
        extra.push(0);
        let len = (extra.len() - batch::LOG_OVERHEAD) as i32;
        extra[LENGTH_OFFSET..LENGTH_OFFSET + 4].copy_from_slice(&len.to_be_bytes());
        fix_crc(&mut extra);
        assert_eq!(code(extra, &cfg), 87);
    }

    #[test]
    fn zip_bomb_is_bounded() {
        let cfg = ValidationConfig::default();
        let zeros = vec![0u8; 8 << 20];
        for (codec, xerial) in CODECS.into_iter().skip(1) {
            let mut b = builder(codec, xerial)
                .add(NOW_MS, None, Some(&zeros), &[])
                .build();
            assert!(b.len() < cfg.max_message_bytes, "{codec:?} {}", b.len());
            let mut v = Validator::with_max_decompressed_bytes(1 << 20);
            let err = v
                .validate_and_assign_offsets(&mut b, 0, 0, NOW_MS, &cfg)
                .unwrap_err();
            assert_eq!(err.error_code(), 10, "{codec:?}: {err}");
            // The default limit (32 MiB here) admits it.
            assert!(Validator::new()
                .validate_and_assign_offsets(&mut b, 0, 0, NOW_MS, &cfg)
                .is_ok());
        }
    }

    #[test]
    fn mutated_batches_never_panic() {
        let cfg = ValidationConfig {
            compacted: true,
            ..ValidationConfig::default()
        };
        let mut v = Validator::with_max_decompressed_bytes(1 << 20);
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut rand = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let (mut ok, mut err) = (0, 0);
        for (codec, xerial) in CODECS {
            let base = sample(codec, xerial, 5);
            for round in 0..400 {
                let mut b = base.clone();
                let flips = 1 + rand() % 4;
                for _ in 0..flips {
                    let at = (rand() as usize) % b.len();
                    b[at] ^= 1 << (rand() % 8);
                }
                if round % 3 == 0 {
                    b.truncate((rand() as usize) % (b.len() + 1));
                }
                // Mostly get past the CRC so the record parsers see the damage.
                if round % 4 != 0 && b.len() >= RECORD_BATCH_OVERHEAD {
                    let len = (b.len() - batch::LOG_OVERHEAD) as i32;
                    if round % 2 == 0 {
                        b[LENGTH_OFFSET..LENGTH_OFFSET + 4].copy_from_slice(&len.to_be_bytes());
                    }
                    fix_crc(&mut b);
                }
                match v.validate_and_assign_offsets(&mut b, 0, 0, NOW_MS, &cfg) {
                    Ok(_) => ok += 1,
                    Err(e) => {
                        assert!([2, 10, 32, 87].contains(&e.error_code()), "{e}");
                        err += 1;
                    }
                }
            }
        }
        assert!(err > 0 && ok + err == 2400, "ok {ok} err {err}");
    }

    #[test]
    fn record_errors_read_as_kafkas() {
        let (codec, xerial) = CODECS[0];
        let compacted = ValidationConfig {
            compacted: true,
            ..ValidationConfig::default()
        };
        let keyless = builder(codec, xerial)
            .add(NOW_MS, Some(b"k"), None, &[])
            .add(NOW_MS, None, Some(b"v"), &[])
            .build();
        let e = validate_and_assign_offsets(&mut keyless.clone(), 0, 0, NOW_MS, &compacted)
            .unwrap_err()
            .with_topic_partition("t-0");
        let record = "Compacted topic cannot accept message without key in topic partition t-0";
        assert_eq!(e.record_errors(), [(1, record.to_string())]);
        assert_eq!(
            e.wire_message().unwrap(),
            format!("One or more records have been rejected due to 1 record errors in total, and only showing the first three errors at most: [RecordError(batchIndex=1, message='{record}')]")
        );
        let window = ValidationConfig {
            timestamp_before_max_ms: 1000,
            ..ValidationConfig::default()
        };
        let old = builder(codec, xerial)
            .add(NOW_MS - 1001, None, None, &[])
            .build();
        let e = validate_and_assign_offsets(&mut old.clone(), 0, 0, NOW_MS, &window).unwrap_err();
        assert_eq!(
            e.wire_message().as_deref(),
            Some("One or more records have been rejected due to invalid timestamp")
        );
        assert_eq!(
            e.record_errors()[0].1,
            format!(
                "Timestamp {} of message with offset 0 is out of range. The timestamp should be within [{}, {}]",
                NOW_MS - 1001,
                NOW_MS - 1000,
                NOW_MS.wrapping_add(i64::MAX)
            )
        );
        let mut corrupt_crc = old;
        corrupt_crc[20] ^= 1;
        let e = validate_and_assign_offsets(&mut corrupt_crc, 0, 0, NOW_MS, &window).unwrap_err();
        assert_eq!((e.error_code(), e.wire_message()), (2, None));
    }
}
