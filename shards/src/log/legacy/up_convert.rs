//! Up-conversion of a Produce v0-v2 message set (magic 0 or 1) to one
//! magic-2 batch, as Kafka 3.9's `UnifiedLog.analyzeAndValidateRecords` and
//! `LogValidator` do on append (`convertAndAssignOffsetsNonCompressed` for
//! plain messages, `validateMessagesAndAssignOffsetsCompressed` with
//! `buildRecordsAndAssignOffsets` for a compressed wrapper, whose inner
//! messages are re-batched with the same codec).
//!
//! Legacy-only checks happen here: framing, the per-message size limit, the
//! CRC of every message (inner ones included), mixed magic, nested
//! compression, and timestamps / keys with Kafka's per-message rules. The
//! batch made here then goes through the ordinary magic-2 validation, which
//! assigns the offsets and checks the converted batch's size.

use super::super::batch::{self, Compression, TimestampType, NO_TIMESTAMP};
use super::super::records::{decompress, BatchBuilder};
use super::super::validate::{
    ValidationConfig, ValidationError, DECOMPRESSED_LIMIT_FACTOR, MIN_DECOMPRESSED_LIMIT_BYTES,
    NULL_KEY_MESSAGE,
};
use super::{codec_of, lz4_frame, next_entry, Entry, LegacyMessage};

/// The shallow entries of a message set: legacy messages, or the byte size
/// of a magic-2 batch among them.
enum Shallow<'a> {
    Legacy(LegacyMessage<'a>),
    V2 { attributes: i16 },
}

/// What a Produce v0-v2 partition's data becomes.
#[derive(Debug, PartialEq, Eq)]
pub enum UpConverted {
    /// The magic 0/1 messages as one magic-2 batch.
    Batch(Vec<u8>),
    /// A magic-2 batch comes first: the data goes to the magic-2
    /// validation as sent (Produce v0-v2 accept either format).
    AsSent,
    /// Not one whole entry: Kafka appends nothing and answers NONE with
    /// base offset -1.
    Nothing,
}

#[derive(Debug, PartialEq, Eq)]
pub enum UpConvertError {
    Invalid(ValidationError),
    /// A codec id Kafka does not know (5-7): `CompressionType.forId`
    /// throws, which Kafka answers with UNKNOWN_SERVER_ERROR.
    UnknownCodec(u8),
}

impl UpConvertError {
    pub fn error_code(&self) -> i16 {
        match self {
            UpConvertError::Invalid(e) => e.error_code(),
            UpConvertError::UnknownCodec(_) => -1,
        }
    }
}

impl From<ValidationError> for UpConvertError {
    fn from(e: ValidationError) -> Self {
        UpConvertError::Invalid(e)
    }
}

impl std::fmt::Display for UpConvertError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UpConvertError::Invalid(e) => e.fmt(f),
            UpConvertError::UnknownCodec(id) => write!(f, "Unknown compression type id: {id}"),
        }
    }
}

/// Converts `records` when its first entry is a magic 0/1 message.
pub fn up_convert(
    records: &[u8],
    cfg: &ValidationConfig,
    now_ms: i64,
    topic_partition: &str,
) -> Result<UpConverted, UpConvertError> {
    let shallow = shallow_entries(records, cfg, topic_partition)?;
    let first = match shallow.first() {
        None => return Ok(UpConverted::Nothing),
        Some(Shallow::V2 { .. }) => return Ok(UpConverted::AsSent),
        Some(Shallow::Legacy(first)) => first,
    };
    let mut source = Compression::None;
    for entry in &shallow {
        let id = match entry {
            Shallow::Legacy(m) => m.codec_id(),
            Shallow::V2 { attributes } => (*attributes & 0x07) as u8,
        };
        match codec_of(id) {
            Some(Compression::None) => {}
            Some(codec) => source = codec,
            None => return Err(UpConvertError::UnknownCodec(id)),
        }
    }
    let checks = RecordChecks {
        cfg,
        now_ms,
        topic_partition,
    };
    let batch = if source == Compression::None {
        convert_plain(first.magic, &shallow, &checks)?
    } else if shallow.len() > 1 {
        return Err(UpConvertError::Invalid(ValidationError::InvalidRecord(
            "Compressed outer record has more than one batch".into(),
        )));
    } else if source == Compression::Zstd {
        // Kafka refuses zstd below magic 2.
        return Err(UpConvertError::Invalid(ValidationError::InvalidRecord(
            "ZStandard compression is not supported for magic below 2".into(),
        )));
    } else {
        convert_wrapper(first, source, &checks)?
    };
    Ok(UpConverted::Batch(batch))
}

/// Walks the message set as `analyzeAndValidateRecords` does: framing, size
/// limit and CRC of every shallow entry, in order. A trailing partial entry
/// is dropped, as Kafka's iterator drops it.
fn shallow_entries<'a>(
    records: &'a [u8],
    cfg: &ValidationConfig,
    topic_partition: &str,
) -> Result<Vec<Shallow<'a>>, ValidationError> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < records.len() {
        let rest = &records[pos..];
        let (entry, size) = match next_entry(rest).map_err(ValidationError::CorruptMessage)? {
            Entry::Partial => break,
            Entry::Batch { bytes } => {
                let b = &rest[..bytes];
                let attributes = i16::from_be_bytes([b[21], b[22]]);
                if batch::verify_crc(b).is_err() {
                    return Err(corrupt_crc(
                        u32::from_be_bytes([b[17], b[18], b[19], b[20]]),
                        topic_partition,
                    ));
                }
                (Shallow::V2 { attributes }, bytes)
            }
            Entry::Message(m) => {
                let size = m.entry_bytes();
                if size <= cfg.max_message_bytes && !m.crc_is_valid() {
                    return Err(corrupt_crc(m.stored_crc, topic_partition));
                }
                (Shallow::Legacy(m), size)
            }
        };
        if size > cfg.max_message_bytes {
            return Err(ValidationError::MessageTooLarge {
                size,
                max: cfg.max_message_bytes,
            });
        }
        out.push(entry);
        pos += size;
    }
    Ok(out)
}

fn corrupt_crc(stored: u32, topic_partition: &str) -> ValidationError {
    ValidationError::CorruptMessage(format!(
        "Record is corrupt (stored crc = {stored}) in topic partition {topic_partition}."
    ))
}

fn mixed_magic(magic: u8, first: u8, topic_partition: &str) -> ValidationError {
    ValidationError::InvalidRecord(format!(
        "Batch magic {magic} is not the same as the first batch's magic byte {first} in topic partition {topic_partition}"
    ))
}

/// `LogValidator.validateKey` and `validateTimestamp` for one message.
struct RecordChecks<'c> {
    cfg: &'c ValidationConfig,
    now_ms: i64,
    topic_partition: &'c str,
}

impl RecordChecks<'_> {
    /// Some((is a timestamp error, Kafka's message)).
    fn check(&self, m: &LegacyMessage, timestamp: i64, lat: bool) -> Option<(bool, String)> {
        if self.cfg.compacted && m.key.is_none() {
            return Some((
                false,
                format!("{NULL_KEY_MESSAGE} {}", self.topic_partition),
            ));
        }
        let cfg = self.cfg;
        if cfg.timestamp_type == TimestampType::CreateTime && timestamp != NO_TIMESTAMP {
            let diff = self.now_ms as i128 - timestamp as i128;
            if diff > cfg.timestamp_before_max_ms as i128
                || -diff > cfg.timestamp_after_max_ms as i128
            {
                return Some((
                    true,
                    format!(
                        "Timestamp {timestamp} of message with offset {} is out of range. The timestamp should be within [{}, {}]",
                        m.offset,
                        self.now_ms.wrapping_sub(cfg.timestamp_before_max_ms),
                        self.now_ms.wrapping_add(cfg.timestamp_after_max_ms)
                    ),
                ));
            }
        } else if lat {
            return Some((
                true,
                format!(
                    "Invalid timestamp type in message {}. Producer should not set timestamp type to LogAppendTime.",
                    describe(m)
                ),
            ));
        }
        None
    }
}

/// `LegacyRecord.toString`.
fn describe(m: &LegacyMessage) -> String {
    format!(
        "Record(magic={}, attributes={}, compression={:?}, crc={}, CreateTime={}, key={} bytes, value={} bytes)",
        m.magic,
        m.attributes,
        codec_of(m.codec_id()).unwrap_or(Compression::None),
        m.stored_crc,
        m.timestamp,
        m.key.map_or(0, <[u8]>::len),
        m.value.map_or(0, <[u8]>::len)
    )
}

fn record_errors(errors: Vec<(i32, (bool, String))>) -> ValidationError {
    ValidationError::RecordErrors {
        timestamp: errors.iter().any(|(_, (ts, _))| *ts),
        errors: errors.into_iter().map(|(i, (_, m))| (i, m)).collect(),
    }
}

/// Plain messages, each its own shallow "batch": the first failing one
/// fails the request (its record index is 0).
fn convert_plain(
    first_magic: u8,
    shallow: &[Shallow],
    checks: &RecordChecks,
) -> Result<Vec<u8>, ValidationError> {
    let mut builder = BatchBuilder::new(0);
    for entry in shallow {
        let m = match entry {
            Shallow::Legacy(m) if m.magic == first_magic => m,
            Shallow::Legacy(m) => {
                return Err(mixed_magic(m.magic, first_magic, checks.topic_partition))
            }
            Shallow::V2 { .. } => return Err(mixed_magic(2, first_magic, checks.topic_partition)),
        };
        if let Some(e) = checks.check(m, m.timestamp, m.is_log_append_time()) {
            return Err(record_errors(vec![(0, e)]));
        }
        builder.push(m.timestamp, m.key, m.value, &[]);
    }
    Ok(builder.build())
}

/// A compressed wrapper: every inner message is checked (errors gathered
/// with their index), then all are re-batched with the wrapper's codec.
fn convert_wrapper(
    wrapper: &LegacyMessage,
    codec: Compression,
    checks: &RecordChecks,
) -> Result<Vec<u8>, ValidationError> {
    let inner = decompress_wrapper(wrapper, codec, checks.cfg)?;
    let lat = wrapper.is_log_append_time();
    let mut builder = BatchBuilder::new(0).compression(codec).xerial_snappy(true);
    let mut errors = Vec::new();
    let mut pos = 0;
    let mut index = 0i32;
    while pos < inner.len() {
        let m = match next_entry(&inner[pos..]) {
            Ok(Entry::Message(m)) => m,
            Ok(Entry::Partial) => {
                return Err(ValidationError::CorruptMessage(
                    "compressed message set ends in a partial message".into(),
                ))
            }
            Ok(Entry::Batch { .. }) => {
                return Err(ValidationError::CorruptMessage(
                    "a magic-2 batch inside a compressed message".into(),
                ))
            }
            Err(e) => return Err(ValidationError::CorruptMessage(e)),
        };
        pos += m.entry_bytes();
        let timestamp = match (wrapper.magic, lat) {
            (0, _) => NO_TIMESTAMP,
            (_, true) => wrapper.timestamp,
            _ => m.timestamp,
        };
        let error = if m.codec_id() != 0 {
            Some((false, format!("Compressed outer record should not have an inner record with a compression attribute set: {}", describe(&m))))
        } else if m.magic != wrapper.magic {
            Some((
                false,
                format!(
                    "Record {}'s magic does not match outer magic {} in topic partition {}",
                    describe(&m),
                    wrapper.magic,
                    checks.topic_partition
                ),
            ))
        } else if !m.crc_is_valid() {
            return Err(ValidationError::CorruptMessage(format!(
                "Record is corrupt (stored crc = {}, computed crc = {}) in topic partition {}",
                m.stored_crc,
                m.computed_crc(),
                checks.topic_partition
            )));
        } else {
            checks.check(&m, timestamp, lat)
        };
        match error {
            Some(e) => errors.push((index, e)),
            None => {
                builder.push(timestamp, m.key, m.value, &[]);
            }
        }
        index += 1;
    }
    if !errors.is_empty() {
        return Err(record_errors(errors));
    }
    if builder.record_count() == 0 {
        return Err(ValidationError::InvalidRecord(
            "compressed message holds no message".into(),
        ));
    }
    Ok(builder.build())
}

fn decompress_wrapper(
    wrapper: &LegacyMessage,
    codec: Compression,
    cfg: &ValidationConfig,
) -> Result<Vec<u8>, ValidationError> {
    let Some(value) = wrapper.value else {
        return Err(ValidationError::CorruptMessage(
            "Found invalid compressed record set with null value".into(),
        ));
    };
    let limit_bytes = cfg
        .max_message_bytes
        .saturating_mul(DECOMPRESSED_LIMIT_FACTOR)
        .max(MIN_DECOMPRESSED_LIMIT_BYTES);
    let input = if codec == Compression::Lz4 && wrapper.magic == 0 {
        lz4_frame::with_standard_checksum(value)
    } else {
        std::borrow::Cow::Borrowed(value)
    };
    let mut out = Vec::new();
    decompress(codec, &input, &mut out, limit_bytes).map_err(|e| {
        if e.starts_with("decompressed records exceed") {
            ValidationError::MessageTooLarge {
                size: limit_bytes.saturating_add(1),
                max: limit_bytes,
            }
        } else {
            ValidationError::CorruptMessage(e)
        }
    })?;
    Ok(out)
}
