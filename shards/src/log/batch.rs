//! The v2 record batch header (Kafka's `DefaultRecordBatch`), read and patched
//! in place. Batches are stored exactly as the producer sent them, with only
//! the base offset, partition leader epoch and (for LogAppendTime) the max
//! timestamp rewritten, so this module never copies record bytes.

use std::fmt;

pub const BASE_OFFSET_OFFSET: usize = 0;
pub const LENGTH_OFFSET: usize = 8;
pub const PARTITION_LEADER_EPOCH_OFFSET: usize = 12;
pub const MAGIC_OFFSET: usize = 16;
pub const CRC_OFFSET: usize = 17;
pub const ATTRIBUTES_OFFSET: usize = 21;
pub const LAST_OFFSET_DELTA_OFFSET: usize = 23;
pub const BASE_TIMESTAMP_OFFSET: usize = 27;
pub const MAX_TIMESTAMP_OFFSET: usize = 35;
pub const PRODUCER_ID_OFFSET: usize = 43;
pub const PRODUCER_EPOCH_OFFSET: usize = 51;
pub const BASE_SEQUENCE_OFFSET: usize = 53;
pub const RECORDS_COUNT_OFFSET: usize = 57;
/// Size of the fixed v2 header; records follow it.
pub const RECORD_BATCH_OVERHEAD: usize = 61;
/// Bytes before the `batchLength` field's coverage starts (offset + length).
pub const LOG_OVERHEAD: usize = 12;
/// The CRC covers everything from the attributes to the end of the batch.
pub const CRC_COVERAGE_START: usize = ATTRIBUTES_OFFSET;

pub const CURRENT_MAGIC: u8 = 2;
pub const NO_PRODUCER_ID: i64 = -1;
pub const NO_PRODUCER_EPOCH: i16 = -1;
pub const NO_SEQUENCE: i32 = -1;
pub const NO_PARTITION_LEADER_EPOCH: i32 = -1;
pub const NO_TIMESTAMP: i64 = -1;

pub const COMPRESSION_CODEC_MASK: i16 = 0x07;
pub const TIMESTAMP_TYPE_MASK: i16 = 0x08;
pub const TRANSACTIONAL_FLAG_MASK: i16 = 0x10;
pub const CONTROL_FLAG_MASK: i16 = 0x20;
pub const DELETE_HORIZON_FLAG_MASK: i16 = 0x40;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

impl Compression {
    pub fn from_attributes(attributes: i16) -> Option<Compression> {
        match attributes & COMPRESSION_CODEC_MASK {
            0 => Some(Compression::None),
            1 => Some(Compression::Gzip),
            2 => Some(Compression::Snappy),
            3 => Some(Compression::Lz4),
            4 => Some(Compression::Zstd),
            _ => None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimestampType {
    CreateTime,
    LogAppendTime,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BatchError {
    /// Fewer bytes than the header or than `batchLength` claims.
    Truncated {
        needed: usize,
        available: usize,
    },
    /// `batchLength` is smaller than the v2 header can be.
    InvalidLength(i32),
    UnsupportedMagic(u8),
    CrcMismatch {
        stored: u32,
        computed: u32,
    },
}

impl fmt::Display for BatchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BatchError::Truncated { needed, available } => {
                write!(f, "truncated batch: need {needed} bytes, have {available}")
            }
            BatchError::InvalidLength(len) => write!(f, "invalid batch length {len}"),
            BatchError::UnsupportedMagic(m) => write!(f, "unsupported magic {m}"),
            BatchError::CrcMismatch { stored, computed } => {
                write!(
                    f,
                    "crc mismatch: stored {stored:#x}, computed {computed:#x}"
                )
            }
        }
    }
}

impl std::error::Error for BatchError {}

#[inline]
fn be_i64(b: &[u8], at: usize) -> i64 {
    i64::from_be_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}
#[inline]
fn be_i32(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}
#[inline]
fn be_i16(b: &[u8], at: usize) -> i16 {
    i16::from_be_bytes(b[at..at + 2].try_into().expect("2 bytes"))
}

/// A parsed copy of one batch header. Cheap (`Copy`), taken from the first
/// `RECORD_BATCH_OVERHEAD` bytes of a batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchHeader {
    pub base_offset: i64,
    /// Value of the `batchLength` field: bytes after the length field.
    pub batch_length: i32,
    pub partition_leader_epoch: i32,
    pub magic: u8,
    pub crc: u32,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub records_count: i32,
}

impl BatchHeader {
    /// Parses the header at the start of `buf`. Checks the magic and that the
    /// declared length is sane, but not that the whole batch is present.
    pub fn parse(buf: &[u8]) -> Result<BatchHeader, BatchError> {
        if buf.len() < LOG_OVERHEAD + 5 {
            return Err(BatchError::Truncated {
                needed: LOG_OVERHEAD + 5,
                available: buf.len(),
            });
        }
        let magic = buf[MAGIC_OFFSET];
        if magic != CURRENT_MAGIC {
            return Err(BatchError::UnsupportedMagic(magic));
        }
        if buf.len() < RECORD_BATCH_OVERHEAD {
            return Err(BatchError::Truncated {
                needed: RECORD_BATCH_OVERHEAD,
                available: buf.len(),
            });
        }
        let batch_length = be_i32(buf, LENGTH_OFFSET);
        if (batch_length as i64) < (RECORD_BATCH_OVERHEAD - LOG_OVERHEAD) as i64 {
            return Err(BatchError::InvalidLength(batch_length));
        }
        Ok(BatchHeader {
            base_offset: be_i64(buf, BASE_OFFSET_OFFSET),
            batch_length,
            partition_leader_epoch: be_i32(buf, PARTITION_LEADER_EPOCH_OFFSET),
            magic,
            crc: be_i32(buf, CRC_OFFSET) as u32,
            attributes: be_i16(buf, ATTRIBUTES_OFFSET),
            last_offset_delta: be_i32(buf, LAST_OFFSET_DELTA_OFFSET),
            base_timestamp: be_i64(buf, BASE_TIMESTAMP_OFFSET),
            max_timestamp: be_i64(buf, MAX_TIMESTAMP_OFFSET),
            producer_id: be_i64(buf, PRODUCER_ID_OFFSET),
            producer_epoch: be_i16(buf, PRODUCER_EPOCH_OFFSET),
            base_sequence: be_i32(buf, BASE_SEQUENCE_OFFSET),
            records_count: be_i32(buf, RECORDS_COUNT_OFFSET),
        })
    }

    /// Whole size of the batch on disk and on the wire.
    #[inline]
    pub fn total_size(&self) -> usize {
        LOG_OVERHEAD + self.batch_length as usize
    }
    #[inline]
    pub fn last_offset(&self) -> i64 {
        self.base_offset + self.last_offset_delta as i64
    }
    #[inline]
    pub fn compression(&self) -> Option<Compression> {
        Compression::from_attributes(self.attributes)
    }
    #[inline]
    pub fn timestamp_type(&self) -> TimestampType {
        if self.attributes & TIMESTAMP_TYPE_MASK != 0 {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        }
    }
    #[inline]
    pub fn is_transactional(&self) -> bool {
        self.attributes & TRANSACTIONAL_FLAG_MASK != 0
    }
    #[inline]
    pub fn is_control(&self) -> bool {
        self.attributes & CONTROL_FLAG_MASK != 0
    }
    #[inline]
    pub fn has_producer_id(&self) -> bool {
        self.producer_id >= 0
    }
    /// Sequence of the batch's last record, wrapping at i32::MAX as Kafka does.
    #[inline]
    pub fn last_sequence(&self) -> i32 {
        if self.base_sequence == NO_SEQUENCE {
            return NO_SEQUENCE;
        }
        let last = self.base_sequence as i64 + self.last_offset_delta as i64;
        if last > i32::MAX as i64 {
            (last - i32::MAX as i64 - 1) as i32
        } else {
            last as i32
        }
    }
}

/// CRC32C of a whole batch's covered bytes. `batch` must hold exactly one batch.
#[inline]
pub fn compute_crc(batch: &[u8]) -> u32 {
    debug_assert!(batch.len() >= RECORD_BATCH_OVERHEAD);
    crc32c::crc32c(&batch[CRC_COVERAGE_START..])
}

/// Checks that `batch` (exactly one batch) has the CRC its header claims.
pub fn verify_crc(batch: &[u8]) -> Result<(), BatchError> {
    let header = BatchHeader::parse(batch)?;
    if batch.len() < header.total_size() {
        return Err(BatchError::Truncated {
            needed: header.total_size(),
            available: batch.len(),
        });
    }
    let computed = compute_crc(&batch[..header.total_size()]);
    if computed != header.crc {
        return Err(BatchError::CrcMismatch {
            stored: header.crc,
            computed,
        });
    }
    Ok(())
}

/// Rewrites the base offset (not covered by the CRC).
#[inline]
pub fn set_base_offset(batch: &mut [u8], base_offset: i64) {
    batch[BASE_OFFSET_OFFSET..BASE_OFFSET_OFFSET + 8].copy_from_slice(&base_offset.to_be_bytes());
}

/// Rewrites the partition leader epoch (not covered by the CRC).
#[inline]
pub fn set_partition_leader_epoch(batch: &mut [u8], epoch: i32) {
    batch[PARTITION_LEADER_EPOCH_OFFSET..PARTITION_LEADER_EPOCH_OFFSET + 4]
        .copy_from_slice(&epoch.to_be_bytes());
}

/// Sets LogAppendTime: timestamp type bit and max timestamp, then the CRC,
/// since both fields are covered by it.
pub fn set_log_append_time(batch: &mut [u8], timestamp_ms: i64) {
    let header = BatchHeader::parse(batch).expect("validated batch");
    let attributes = header.attributes | TIMESTAMP_TYPE_MASK;
    batch[ATTRIBUTES_OFFSET..ATTRIBUTES_OFFSET + 2].copy_from_slice(&attributes.to_be_bytes());
    batch[MAX_TIMESTAMP_OFFSET..MAX_TIMESTAMP_OFFSET + 8]
        .copy_from_slice(&timestamp_ms.to_be_bytes());
    let crc = compute_crc(&batch[..header.total_size()]);
    batch[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
}

/// Iterates over the batches laid end to end in `buf`, stopping at the first
/// incomplete one (a fetch may legally end with a partial batch). After an
/// error it yields nothing more (`position` stays at the bad batch), so
/// `.flatten()` ends instead of spinning on it.
pub struct BatchIter<'a> {
    buf: &'a [u8],
    pos: usize,
    failed: bool,
}

impl<'a> BatchIter<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        BatchIter {
            buf,
            pos: 0,
            failed: false,
        }
    }
    /// Byte position of the next batch within the buffer.
    pub fn position(&self) -> usize {
        self.pos
    }
}

impl<'a> Iterator for BatchIter<'a> {
    /// The batch's position in the buffer, its header, and its bytes.
    type Item = Result<(usize, BatchHeader, &'a [u8]), BatchError>;

    fn next(&mut self) -> Option<Self::Item> {
        let rest = &self.buf[self.pos..];
        if rest.is_empty() || self.failed {
            return None;
        }
        let header = match BatchHeader::parse(rest) {
            Ok(h) => h,
            Err(e) => {
                self.failed = true;
                return Some(Err(e));
            }
        };
        let size = header.total_size();
        if rest.len() < size {
            self.failed = true;
            return Some(Err(BatchError::Truncated {
                needed: size,
                available: rest.len(),
            }));
        }
        let at = self.pos;
        self.pos += size;
        Some(Ok((at, header, &rest[..size])))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::records::BatchBuilder;

    /// A bad batch ends the iteration: `.flatten()` (which skips errors)
    /// must not spin on it (found by the handlers fuzzer: a transactional
    /// Produce with a garbage batch held its shard).
    #[test]
    fn iteration_ends_at_the_first_bad_batch() {
        let mut b = BatchBuilder::new(0);
        b.push(0, None, Some(b"v"), &[]);
        let mut bytes = b.build();
        let good = bytes.len();
        bytes.extend_from_slice(&[0xff; 40]);
        let mut it = BatchIter::new(&bytes);
        assert!(matches!(it.next(), Some(Ok((0, _, _)))));
        assert!(matches!(it.next(), Some(Err(_))));
        assert!(it.next().is_none());
        assert_eq!(it.position(), good);
        assert_eq!(BatchIter::new(&bytes).flatten().count(), 1);
        assert_eq!(BatchIter::new(&[0xff; 70]).flatten().count(), 0);
    }
}
