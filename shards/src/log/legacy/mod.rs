//! Message formats v0 and v1 (magic 0 and 1): Kafka's `LegacyRecord` and
//! `AbstractLegacyRecordBatch`. Kafka 3.x stores only magic 2, so these
//! formats exist only on the wire: Produce v0-v2 may carry them
//! ([`up_convert`]: Kafka's `LogValidator` conversion on append) and Fetch
//! v0-v3 answers with them ([`down_convert`]: `RecordsUtil.downConvert` as
//! sent by `LazyDownConversionRecordsSend`).
//!
//! An entry is `offset: i64, size: i32` followed by a message of `size`
//! bytes: `crc: u32` (CRC-32 over the rest), `magic: i8`, `attributes: i8`
//! (bits 0-2 the codec, bit 3 LogAppendTime in v1), `timestamp: i64` (v1
//! only), `key: bytes`, `value: bytes`. A compressed message (the wrapper)
//! has a null key and its value holds the compressed inner entries.
//!
//! Parsing is bounds-checked and never panics: every length is checked
//! against the bytes present before it is used.

pub mod down_convert;
mod lz4_frame;
#[cfg(test)]
mod tests;
pub mod up_convert;

use super::batch::{Compression, NO_TIMESTAMP};

/// Offset and size in front of every message.
pub const LOG_OVERHEAD: usize = 12;
/// crc, magic, attributes, key length, value length.
pub const RECORD_OVERHEAD_V0: usize = 14;
/// v0 plus the timestamp.
pub const RECORD_OVERHEAD_V1: usize = 22;
/// `LegacyRecord.TIMESTAMP_TYPE_MASK`.
pub const TIMESTAMP_TYPE_BIT: u8 = 0x08;
const CODEC_MASK: u8 = 0x07;

/// One message (a wrapper or a plain message), borrowed from its buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LegacyMessage<'a> {
    pub offset: i64,
    pub magic: u8,
    pub attributes: u8,
    /// NO_TIMESTAMP for magic 0.
    pub timestamp: i64,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    pub stored_crc: u32,
    /// The message bytes after the offset and size.
    pub body: &'a [u8],
}

impl LegacyMessage<'_> {
    /// LOG_OVERHEAD plus the message size.
    pub fn entry_bytes(&self) -> usize {
        LOG_OVERHEAD + self.body.len()
    }
    pub fn codec_id(&self) -> u8 {
        self.attributes & CODEC_MASK
    }
    pub fn is_log_append_time(&self) -> bool {
        self.magic > 0 && self.attributes & TIMESTAMP_TYPE_BIT != 0
    }
    /// `LegacyRecord.computeChecksum`: CRC-32 of everything after the crc.
    pub fn computed_crc(&self) -> u32 {
        crc32(&self.body[4..])
    }
    pub fn crc_is_valid(&self) -> bool {
        self.stored_crc == self.computed_crc()
    }
}

/// CRC-32 (IEEE), the checksum of message formats v0 and v1.
pub fn crc32(data: &[u8]) -> u32 {
    let mut crc = flate2::Crc::new();
    crc.update(data);
    crc.sum()
}

/// The codec of a legacy attributes byte; None for ids Kafka does not know.
pub fn codec_of(id: u8) -> Option<Compression> {
    Compression::from_attributes(i16::from(id & CODEC_MASK))
}

/// What `next_entry` found at the front of a buffer.
#[derive(Debug, PartialEq, Eq)]
pub enum Entry<'a> {
    /// Not even a whole entry is left (Kafka's iterators stop there).
    Partial,
    /// A magic-2 batch of `bytes` bytes.
    Batch {
        bytes: usize,
    },
    Message(LegacyMessage<'a>),
}

fn be_i32(b: &[u8], at: usize) -> Option<i32> {
    Some(i32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
}
fn be_i64(b: &[u8], at: usize) -> Option<i64> {
    Some(i64::from_be_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// `ByteBufferLogInputStream.nextBatch` for one entry: Err is Kafka's
/// CorruptRecordException text (a size below the v0 overhead, an unknown
/// magic, or lengths inside the message that do not add up).
pub fn next_entry(buf: &[u8]) -> Result<Entry<'_>, String> {
    let Some(size) = be_i32(buf, 8) else {
        return Ok(Entry::Partial);
    };
    if size < RECORD_OVERHEAD_V0 as i32 {
        return Err(format!(
            "Record size {size} is less than the minimum record overhead ({RECORD_OVERHEAD_V0})"
        ));
    }
    let Some(&magic) = buf.get(LOG_OVERHEAD + 4) else {
        return Ok(Entry::Partial);
    };
    if magic > 2 {
        return Err(format!("Invalid magic found in record: {}", magic as i8));
    }
    let total = LOG_OVERHEAD + size as usize;
    if buf.len() < total {
        return Ok(Entry::Partial);
    }
    if magic == 2 {
        return Ok(Entry::Batch { bytes: total });
    }
    let offset = be_i64(buf, 0).unwrap_or(-1);
    parse_message(offset, &buf[LOG_OVERHEAD..total]).map(Entry::Message)
}

/// Parses one message body (crc onwards) of magic 0 or 1.
pub fn parse_message(offset: i64, body: &[u8]) -> Result<LegacyMessage<'_>, String> {
    let magic = *body.get(4).ok_or("message ends early")?;
    let overhead = if magic == 0 {
        RECORD_OVERHEAD_V0
    } else {
        RECORD_OVERHEAD_V1
    };
    if body.len() < overhead {
        return Err(format!(
            "Record is corrupt (crc could not be retrieved as the record is too small, size = {})",
            body.len()
        ));
    }
    let stored_crc = u32::from_be_bytes([body[0], body[1], body[2], body[3]]);
    let attributes = body[5];
    let (timestamp, mut at) = if magic == 0 {
        (NO_TIMESTAMP, 6)
    } else {
        (be_i64(body, 6).ok_or("message ends early")?, 14)
    };
    let mut field = |name: &str| -> Result<Option<&[u8]>, String> {
        let len = be_i32(body, at).ok_or_else(|| format!("{name} length missing"))?;
        at += 4;
        if len < 0 {
            return Ok(None);
        }
        let end = at
            .checked_add(len as usize)
            .filter(|&e| e <= body.len())
            .ok_or_else(|| format!("{name} of {len} bytes passes the message end"))?;
        let bytes = &body[at..end];
        at = end;
        Ok(Some(bytes))
    };
    let key = field("key")?;
    let value = field("value")?;
    Ok(LegacyMessage {
        offset,
        magic,
        attributes,
        timestamp,
        key,
        value,
        stored_crc,
        body,
    })
}

/// Appends one message entry (`LegacyRecord.write` behind
/// `AbstractLegacyRecordBatch.writeHeader`).
pub fn write_message(
    out: &mut Vec<u8>,
    offset: i64,
    magic: u8,
    attributes: u8,
    timestamp: i64,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
) {
    let overhead = if magic == 0 {
        RECORD_OVERHEAD_V0
    } else {
        RECORD_OVERHEAD_V1
    };
    let size = overhead + key.map_or(0, <[u8]>::len) + value.map_or(0, <[u8]>::len);
    out.extend_from_slice(&offset.to_be_bytes());
    out.extend_from_slice(&(size as i32).to_be_bytes());
    let crc_at = out.len();
    out.extend_from_slice(&[0; 4]);
    out.push(magic);
    out.push(attributes);
    if magic > 0 {
        out.extend_from_slice(&timestamp.to_be_bytes());
    }
    for field in [key, value] {
        match field {
            Some(b) => {
                out.extend_from_slice(&(b.len() as i32).to_be_bytes());
                out.extend_from_slice(b);
            }
            None => out.extend_from_slice(&(-1i32).to_be_bytes()),
        }
    }
    let crc = crc32(&out[crc_at + 4..]);
    out[crc_at..crc_at + 4].copy_from_slice(&crc.to_be_bytes());
}

/// The attributes byte of a message: codec and, in v1, the timestamp type.
pub fn attributes(magic: u8, codec: Compression, log_append_time: bool) -> u8 {
    let codec_id = match codec {
        Compression::None => 0,
        Compression::Gzip => 1,
        Compression::Snappy => 2,
        Compression::Lz4 => 3,
        Compression::Zstd => 4,
    };
    if magic > 0 && log_append_time {
        codec_id | TIMESTAMP_TYPE_BIT
    } else {
        codec_id
    }
}
