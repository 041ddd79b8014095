//! Record batch v2 encoding straight into a reused per-partition buffer.
//!
//! Records are written as they are produced (no per-record allocation); the
//! 61-byte batch header is reserved up front and filled in when the batch is
//! sealed, after optional compression of the records section.

use std::io::Write;

use anyhow::{bail, Context, Result};
use bytes::{Bytes, BytesMut};

/// Size of the v2 record batch header (base offset .. record count).
pub const BATCH_HEADER_SIZE_BYTES: usize = 61;
/// Offset of the attributes field; the CRC covers everything from here.
const ATTRIBUTES_OFFSET: usize = 21;
const CRC_OFFSET: usize = 17;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

impl Compression {
    pub fn parse(name: &str) -> Result<Compression> {
        Ok(match name {
            "none" => Compression::None,
            "gzip" => Compression::Gzip,
            "snappy" => Compression::Snappy,
            "lz4" => Compression::Lz4,
            "zstd" => Compression::Zstd,
            other => bail!("unknown compression {other:?} (none|gzip|snappy|lz4|zstd)"),
        })
    }

    /// The codec id in the low three bits of the batch attributes.
    pub fn attribute_bits(self) -> i16 {
        match self {
            Compression::None => 0,
            Compression::Gzip => 1,
            Compression::Snappy => 2,
            Compression::Lz4 => 3,
            Compression::Zstd => 4,
        }
    }
}

/// Reusable compression state: one per producer thread, so a batch seal
/// allocates nothing once the scratch buffer has grown.
pub struct Compressor {
    codec: Compression,
    scratch: Vec<u8>,
    zstd: Option<zstd::bulk::Compressor<'static>>,
}

/// Snappy in the xerial framing the Java client writes (Kafka accepts both).
const XERIAL_HEADER: &[u8; 16] = b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01";
const XERIAL_BLOCK_SIZE_BYTES: usize = 32 * 1024;

impl Compressor {
    pub fn new(codec: Compression) -> Result<Compressor> {
        let zstd = match codec {
            Compression::Zstd => Some(zstd::bulk::Compressor::new(3).context("zstd init")?),
            _ => None,
        };
        Ok(Compressor {
            codec,
            scratch: Vec::new(),
            zstd,
        })
    }

    pub fn codec(&self) -> Compression {
        self.codec
    }

    /// Compresses `input` into the scratch buffer and returns it.
    fn compress(&mut self, input: &[u8]) -> Result<&[u8]> {
        self.scratch.clear();
        match self.codec {
            Compression::None => self.scratch.extend_from_slice(input),
            Compression::Gzip => {
                let mut enc =
                    flate2::write::GzEncoder::new(&mut self.scratch, flate2::Compression::fast());
                enc.write_all(input).context("gzip")?;
                enc.finish().context("gzip")?;
            }
            Compression::Snappy => {
                self.scratch.extend_from_slice(XERIAL_HEADER);
                let mut enc = snap::raw::Encoder::new();
                for block in input.chunks(XERIAL_BLOCK_SIZE_BYTES) {
                    let len_at = self.scratch.len();
                    let max_len = snap::raw::max_compress_len(block.len());
                    self.scratch.resize(len_at + 4 + max_len, 0);
                    let written = enc
                        .compress(block, &mut self.scratch[len_at + 4..])
                        .context("snappy")?;
                    self.scratch[len_at..len_at + 4]
                        .copy_from_slice(&(written as u32).to_be_bytes());
                    self.scratch.truncate(len_at + 4 + written);
                }
            }
            Compression::Lz4 => {
                let mut enc = lz4::EncoderBuilder::new()
                    .level(1)
                    .build(&mut self.scratch)
                    .context("lz4")?;
                enc.write_all(input).context("lz4")?;
                let (_, res) = enc.finish();
                res.context("lz4")?;
            }
            Compression::Zstd => {
                let z = self
                    .zstd
                    .as_mut()
                    .expect("zstd compressor exists for zstd codec");
                let bound = zstd::zstd_safe::compress_bound(input.len());
                self.scratch.resize(bound, 0);
                let written = z
                    .compress_to_buffer(input, &mut self.scratch[..])
                    .context("zstd")?;
                self.scratch.truncate(written);
            }
        }
        Ok(&self.scratch)
    }
}

/// An open batch for one partition.
pub struct BatchBuilder {
    buf: BytesMut,
    record_count: u32,
    base_timestamp_ms: i64,
    max_timestamp_ms: i64,
}

impl BatchBuilder {
    pub fn new(capacity_bytes: usize) -> BatchBuilder {
        let mut b = BatchBuilder {
            buf: BytesMut::with_capacity(capacity_bytes + BATCH_HEADER_SIZE_BYTES),
            record_count: 0,
            base_timestamp_ms: 0,
            max_timestamp_ms: 0,
        };
        b.reset();
        b
    }

    fn reset(&mut self) {
        debug_assert!(self.buf.is_empty());
        self.buf.resize(BATCH_HEADER_SIZE_BYTES, 0);
        self.record_count = 0;
    }

    pub fn is_empty(&self) -> bool {
        self.record_count == 0
    }

    pub fn record_count(&self) -> u32 {
        self.record_count
    }

    /// Bytes the batch would take if sealed now, uncompressed.
    pub fn size_bytes(&self) -> usize {
        self.buf.len()
    }

    /// Encoded size of a record with these parts, before it is appended.
    pub fn record_size_bytes(
        &self,
        timestamp_ms: i64,
        key: Option<&[u8]>,
        value_len: usize,
    ) -> usize {
        let body = self.record_body_len(timestamp_ms, key, value_len);
        varint_len(zigzag32(body as i32)) + body
    }

    fn record_body_len(&self, timestamp_ms: i64, key: Option<&[u8]>, value_len: usize) -> usize {
        let ts_delta = if self.record_count == 0 {
            0
        } else {
            timestamp_ms - self.base_timestamp_ms
        };
        let key_part = match key {
            Some(k) => varint_len(zigzag32(k.len() as i32)) + k.len(),
            None => 1,
        };
        1 + varint_len(zigzag64(ts_delta))
            + varint_len(zigzag32(self.record_count as i32))
            + key_part
            + varint_len(zigzag32(value_len as i32))
            + value_len
            + 1
    }

    /// Appends one record whose value is `value_prefix` followed by
    /// `value_rest` (so a timestamp can lead a shared payload without a copy).
    pub fn append(
        &mut self,
        timestamp_ms: i64,
        key: Option<&[u8]>,
        value_prefix: &[u8],
        value_rest: &[u8],
    ) {
        if self.record_count == 0 {
            self.base_timestamp_ms = timestamp_ms;
            self.max_timestamp_ms = timestamp_ms;
        }
        let value_len = value_prefix.len() + value_rest.len();
        let body = self.record_body_len(timestamp_ms, key, value_len);
        let ts_delta = timestamp_ms - self.base_timestamp_ms;
        let buf = &mut self.buf;
        put_varint(buf, zigzag32(body as i32));
        let start = buf.len();
        buf.extend_from_slice(&[0]); // record attributes
        put_varint(buf, zigzag64(ts_delta));
        put_varint(buf, zigzag32(self.record_count as i32));
        match key {
            Some(k) => {
                put_varint(buf, zigzag32(k.len() as i32));
                buf.extend_from_slice(k);
            }
            None => put_varint(buf, zigzag32(-1)),
        }
        put_varint(buf, zigzag32(value_len as i32));
        buf.extend_from_slice(value_prefix);
        buf.extend_from_slice(value_rest);
        put_varint(buf, 0); // no headers
        debug_assert_eq!(buf.len() - start, body);
        self.record_count += 1;
        self.max_timestamp_ms = self.max_timestamp_ms.max(timestamp_ms);
    }

    /// Seals the batch into a complete v2 record batch and starts a new
    /// one in the same allocation once the returned bytes are dropped.
    pub fn seal(&mut self, compressor: &mut Compressor) -> Result<Bytes> {
        assert!(self.record_count > 0, "sealing an empty batch");
        let codec = compressor.codec();
        if codec != Compression::None {
            let compressed = compressor.compress(&self.buf[BATCH_HEADER_SIZE_BYTES..])?;
            self.buf.truncate(BATCH_HEADER_SIZE_BYTES);
            self.buf.extend_from_slice(compressed);
        }
        let total = self.buf.len();
        let h = &mut self.buf[..BATCH_HEADER_SIZE_BYTES];
        h[0..8].copy_from_slice(&0i64.to_be_bytes());
        h[8..12].copy_from_slice(&((total - 12) as i32).to_be_bytes());
        h[12..16].copy_from_slice(&(-1i32).to_be_bytes());
        h[16] = 2;
        h[21..23].copy_from_slice(&codec.attribute_bits().to_be_bytes());
        h[23..27].copy_from_slice(&((self.record_count - 1) as i32).to_be_bytes());
        h[27..35].copy_from_slice(&self.base_timestamp_ms.to_be_bytes());
        h[35..43].copy_from_slice(&self.max_timestamp_ms.to_be_bytes());
        h[43..51].copy_from_slice(&(-1i64).to_be_bytes());
        h[51..53].copy_from_slice(&(-1i16).to_be_bytes());
        h[53..57].copy_from_slice(&(-1i32).to_be_bytes());
        h[57..61].copy_from_slice(&(self.record_count as i32).to_be_bytes());
        let crc = crc32c::crc32c(&self.buf[ATTRIBUTES_OFFSET..]);
        self.buf[CRC_OFFSET..ATTRIBUTES_OFFSET].copy_from_slice(&crc.to_be_bytes());
        // The next appends reuse the tail, then reclaim the front of the
        // allocation once `sealed` has been encoded into a request and dropped.
        let sealed = self.buf.split().freeze();
        self.reset();
        Ok(sealed)
    }
}

pub fn zigzag32(v: i32) -> u64 {
    ((v << 1) ^ (v >> 31)) as u32 as u64
}

pub fn zigzag64(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

pub fn varint_len(mut v: u64) -> usize {
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

fn put_varint(buf: &mut BytesMut, mut v: u64) {
    let mut tmp = [0u8; 10];
    let mut n = 0;
    while v >= 0x80 {
        tmp[n] = (v as u8) | 0x80;
        v >>= 7;
        n += 1;
    }
    tmp[n] = v as u8;
    buf.extend_from_slice(&tmp[..=n]);
}

/// Kafka's murmur2 (the Java client's default partitioner hash).
pub fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let len = data.len();
    let mut h: u32 = SEED ^ (len as u32);
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let tail = chunks.remainder();
    if tail.len() >= 3 {
        h ^= (tail[2] as u32) << 16;
    }
    if tail.len() >= 2 {
        h ^= (tail[1] as u32) << 8;
    }
    if !tail.is_empty() {
        h ^= tail[0] as u32;
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// Partition for a key the way the Java client's default partitioner does.
pub fn partition_for_key(key: &[u8], partitions: usize) -> usize {
    debug_assert!(partitions > 0);
    ((murmur2(key) & 0x7fff_ffff) as usize) % partitions
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::{for_each_record, BatchView};

    #[test]
    fn murmur2_matches_java() {
        // Values from Kafka's UtilsTest.testMurmur2.
        assert_eq!(murmur2(b"21"), -973932308);
        assert_eq!(murmur2(b"foobar"), -790332482);
        assert_eq!(murmur2(b"a-little-bit-long-string"), -985981536);
        assert_eq!(murmur2(b"a-little-bit-longer-string"), -1486304829);
        assert_eq!(
            murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8"),
            -58897971
        );
        assert_eq!(murmur2(b"abc"), 479470107);
    }

    fn roundtrip(codec: Compression) {
        let mut b = BatchBuilder::new(1024);
        let mut c = Compressor::new(codec).unwrap();
        let payload = vec![b'x'; 100];
        for i in 0..50u64 {
            let prefix = i.to_le_bytes();
            let key = if i.is_multiple_of(2) {
                Some(&b"k1"[..])
            } else {
                None
            };
            let est = b.record_size_bytes(1000 + i as i64, key, 108);
            let before = b.size_bytes();
            b.append(1000 + i as i64, key, &prefix, &payload);
            assert_eq!(b.size_bytes() - before, est);
        }
        let sealed = b.seal(&mut c).unwrap();
        let view = BatchView::parse(&sealed).unwrap().unwrap();
        assert_eq!(view.record_count, 50);
        assert_eq!(view.last_offset_delta, 49);
        assert_eq!(view.batch_size_bytes, sealed.len());
        assert!(view.crc_ok(&sealed));
        let mut seen = 0u64;
        for_each_record(&sealed[..view.batch_size_bytes], &view, |r| {
            assert_eq!(r.offset_delta as u64, seen);
            assert_eq!(&r.value[..8], &seen.to_le_bytes());
            assert_eq!(r.value.len(), 108);
            assert_eq!(r.key_len, if seen.is_multiple_of(2) { 2 } else { 0 });
            seen += 1;
        })
        .unwrap();
        assert_eq!(seen, 50);
        // The builder is reusable after a seal.
        drop(sealed);
        b.append(5, None, &[], &payload);
        let again = b.seal(&mut c).unwrap();
        assert_eq!(BatchView::parse(&again).unwrap().unwrap().record_count, 1);
    }

    #[test]
    fn batch_roundtrip_all_codecs() {
        for codec in [
            Compression::None,
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            roundtrip(codec);
        }
    }
}
