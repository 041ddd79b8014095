//! Records inside a v2 batch (Kafka's `DefaultRecord`): zigzag varints, a
//! bounds-checked record iterator, the four codecs with a bounded
//! decompressor, and `BatchBuilder`, which encodes whole v2 batches for tests
//! and tools.
//!
//! Record layout (after the 61-byte batch header, possibly compressed):
//! `length varint, attributes i8, timestampDelta varlong, offsetDelta varint,
//! keyLength varint, key, valueLength varint, value, headerCount varint,
//! [headerKeyLength varint, headerKey, headerValueLength varint, headerValue]*`.

use std::fmt;
use std::io::{self, Read, Write};

use crate::log::batch::{
    self, Compression, TimestampType, ATTRIBUTES_OFFSET, CONTROL_FLAG_MASK, CRC_OFFSET,
    CURRENT_MAGIC, LENGTH_OFFSET, LOG_OVERHEAD, NO_PARTITION_LEADER_EPOCH, NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID, NO_SEQUENCE, NO_TIMESTAMP, RECORD_BATCH_OVERHEAD, TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG_MASK,
};

/// The xerial snappy stream header the Java client writes: magic, then
/// version and compatible version as big-endian int32.
pub const XERIAL_MAGIC: [u8; 8] = [0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0];
const XERIAL_HEADER_BYTES: usize = 16;
/// Uncompressed bytes per xerial block (the Java library's default).
const XERIAL_BLOCK_BYTES: usize = 32 * 1024;
/// Read-ahead chunk for streaming decompressed records.
const STREAM_CHUNK_BYTES: usize = 16 * 1024;
/// Largest zstd window we agree to allocate for (16 MiB); clients use far less.
const ZSTD_WINDOW_LOG_MAX: u32 = 24;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordError {
    /// The bytes do not form the records the batch declares (Kafka's
    /// InvalidRecordException).
    Malformed(String),
    /// The compressed stream could not be decoded.
    Decompress(String),
    /// Decompressing would produce more than `limit_bytes`.
    TooLarge { limit_bytes: usize },
}

impl fmt::Display for RecordError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecordError::Malformed(m) => write!(f, "malformed record: {m}"),
            RecordError::Decompress(m) => write!(f, "decompression failed: {m}"),
            RecordError::TooLarge { limit_bytes } => {
                write!(f, "decompressed records exceed {limit_bytes} bytes")
            }
        }
    }
}

impl std::error::Error for RecordError {}

fn eof() -> RecordError {
    RecordError::Malformed("premature end of records".into())
}

// ---------------------------------------------------------------- varints

#[inline]
pub fn zigzag_encode32(v: i32) -> u32 {
    ((v << 1) ^ (v >> 31)) as u32
}
#[inline]
pub fn zigzag_decode32(u: u32) -> i32 {
    ((u >> 1) as i32) ^ -((u & 1) as i32)
}
#[inline]
pub fn zigzag_encode64(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}
#[inline]
pub fn zigzag_decode64(u: u64) -> i64 {
    ((u >> 1) as i64) ^ -((u & 1) as i64)
}

/// Bytes `write_varint` uses for `v`.
pub fn varint_len(v: i32) -> usize {
    varlong_len(v as i64)
}
/// Bytes `write_varlong` uses for `v`.
pub fn varlong_len(v: i64) -> usize {
    let mut u = zigzag_encode64(v);
    let mut n = 1;
    while u >= 0x80 {
        u >>= 7;
        n += 1;
    }
    n
}

fn write_unsigned(out: &mut Vec<u8>, mut u: u64) {
    while u >= 0x80 {
        out.push((u as u8) | 0x80);
        u >>= 7;
    }
    out.push(u as u8);
}
pub fn write_varint(out: &mut Vec<u8>, v: i32) {
    write_unsigned(out, zigzag_encode32(v) as u64);
}
pub fn write_varlong(out: &mut Vec<u8>, v: i64) {
    write_unsigned(out, zigzag_encode64(v));
}

/// Reads a zigzag varint (at most 5 bytes) at `*pos`, advancing it.
pub fn read_varint(buf: &[u8], pos: &mut usize) -> Result<i32, RecordError> {
    let mut src = SliceSource::new_at(buf, *pos);
    let v = src_varint(&mut src)?;
    *pos = src.pos;
    Ok(v)
}
/// Reads a zigzag varlong (at most 10 bytes) at `*pos`, advancing it.
pub fn read_varlong(buf: &[u8], pos: &mut usize) -> Result<i64, RecordError> {
    let mut src = SliceSource::new_at(buf, *pos);
    let v = src_varlong(&mut src)?;
    *pos = src.pos;
    Ok(v)
}

// Inlined: a record has six or more varints, and an out-of-line call with
// a Result returned through memory cost more than the decoding.
#[inline(always)]
fn src_unsigned<S: RecordSource>(s: &mut S, max_bytes: u32) -> Result<u64, RecordError> {
    s.read_unsigned(max_bytes)
}

/// An unsigned LEB128 of at most `max_bytes` bytes, a byte at a time.
fn read_unsigned_bytewise<S: RecordSource + ?Sized>(
    s: &mut S,
    max_bytes: u32,
) -> Result<u64, RecordError> {
    let mut value: u64 = 0;
    for i in 0..max_bytes {
        let b = s.next_byte()?;
        value |= ((b & 0x7f) as u64) << (7 * i);
        if b & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err(varint_too_long())
}

#[cold]
fn varint_too_long() -> RecordError {
    RecordError::Malformed("varint too long".into())
}
#[inline(always)]
fn src_varint<S: RecordSource>(s: &mut S) -> Result<i32, RecordError> {
    // Bits past 32 of a 5-byte varint are dropped, as Java's readVarint does.
    Ok(zigzag_decode32(src_unsigned(s, 5)? as u32))
}
#[inline(always)]
fn src_varlong<S: RecordSource>(s: &mut S) -> Result<i64, RecordError> {
    Ok(zigzag_decode64(src_unsigned(s, 10)?))
}

// ---------------------------------------------------------------- sources

/// Where record bytes come from: a slice, or a decompressing stream.
pub(crate) trait RecordSource {
    fn next_byte(&mut self) -> Result<u8, RecordError>;
    fn skip(&mut self, n: usize) -> Result<(), RecordError>;
    /// Bytes consumed so far.
    fn consumed(&self) -> u64;
    /// True when no byte remains (may read ahead).
    fn at_end(&mut self) -> Result<bool, RecordError>;
    /// An unsigned LEB128 varint of at most `max_bytes` bytes.
    #[inline]
    fn read_unsigned(&mut self, max_bytes: u32) -> Result<u64, RecordError> {
        read_unsigned_bytewise(self, max_bytes)
    }
}

pub(crate) struct SliceSource<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> SliceSource<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        SliceSource { buf, pos: 0 }
    }
    fn new_at(buf: &'a [u8], pos: usize) -> Self {
        SliceSource {
            buf,
            pos: pos.min(buf.len()),
        }
    }
}

impl RecordSource for SliceSource<'_> {
    #[inline]
    fn next_byte(&mut self) -> Result<u8, RecordError> {
        let b = *self.buf.get(self.pos).ok_or_else(eof)?;
        self.pos += 1;
        Ok(b)
    }
    #[inline]
    fn skip(&mut self, n: usize) -> Result<(), RecordError> {
        if n > self.buf.len() - self.pos {
            return Err(eof());
        }
        self.pos += n;
        Ok(())
    }
    #[inline]
    fn consumed(&self) -> u64 {
        self.pos as u64
    }
    #[inline]
    fn at_end(&mut self) -> Result<bool, RecordError> {
        Ok(self.pos == self.buf.len())
    }
    /// Per record a batch has six or more varints; with a whole varint's
    /// bytes in the slice, one bounds check covers them all (the bytewise
    /// form checked and wrapped every byte in a Result).
    #[inline(always)]
    fn read_unsigned(&mut self, max_bytes: u32) -> Result<u64, RecordError> {
        let Some(bytes) = self.buf.get(self.pos..self.pos + max_bytes as usize) else {
            return read_unsigned_bytewise(self, max_bytes);
        };
        let mut value: u64 = 0;
        for (i, &b) in bytes.iter().enumerate() {
            value |= ((b & 0x7f) as u64) << (7 * i);
            if b & 0x80 == 0 {
                self.pos += i + 1;
                return Ok(value);
            }
        }
        Err(varint_too_long())
    }
}

/// Streams decompressed bytes through a reusable chunk buffer, counting
/// every byte the decoder produces against `limit_bytes`.
pub(crate) struct ReadSource<'b, R: Read> {
    reader: R,
    chunk: &'b mut Vec<u8>,
    start: usize,
    end: usize,
    consumed: u64,
    produced: u64,
    limit_bytes: usize,
}

impl<'b, R: Read> ReadSource<'b, R> {
    pub(crate) fn new(reader: R, chunk: &'b mut Vec<u8>, limit_bytes: usize) -> Self {
        if chunk.len() < STREAM_CHUNK_BYTES {
            chunk.resize(STREAM_CHUNK_BYTES, 0);
        }
        ReadSource {
            reader,
            chunk,
            start: 0,
            end: 0,
            consumed: 0,
            produced: 0,
            limit_bytes,
        }
    }

    /// Makes sure some bytes are buffered; false at end of stream.
    fn fill(&mut self) -> Result<bool, RecordError> {
        if self.start < self.end {
            return Ok(true);
        }
        loop {
            match self.reader.read(&mut self.chunk[..]) {
                Ok(0) => return Ok(false),
                Ok(n) => {
                    self.produced += n as u64;
                    if self.produced > self.limit_bytes as u64 {
                        return Err(RecordError::TooLarge {
                            limit_bytes: self.limit_bytes,
                        });
                    }
                    self.start = 0;
                    self.end = n;
                    return Ok(true);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(io_to_record_error(e, self.limit_bytes)),
            }
        }
    }
}

fn io_to_record_error(e: io::Error, limit_bytes: usize) -> RecordError {
    if e.kind() == io::ErrorKind::FileTooLarge {
        RecordError::TooLarge { limit_bytes }
    } else {
        RecordError::Decompress(e.to_string())
    }
}

impl<R: Read> RecordSource for ReadSource<'_, R> {
    #[inline]
    fn next_byte(&mut self) -> Result<u8, RecordError> {
        if !self.fill()? {
            return Err(eof());
        }
        let b = self.chunk[self.start];
        self.start += 1;
        self.consumed += 1;
        Ok(b)
    }
    fn skip(&mut self, mut n: usize) -> Result<(), RecordError> {
        while n > 0 {
            if !self.fill()? {
                return Err(eof());
            }
            let k = n.min(self.end - self.start);
            self.start += k;
            self.consumed += k as u64;
            n -= k;
        }
        Ok(())
    }
    #[inline]
    fn consumed(&self) -> u64 {
        self.consumed
    }
    fn at_end(&mut self) -> Result<bool, RecordError> {
        Ok(!self.fill()?)
    }
}

// ---------------------------------------------------------------- records

/// Where one record's fields are, relative to the record's first byte (its
/// length varint). Lengths of -1 mean null.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordLayout {
    /// Whole record, length varint included.
    pub size_bytes: usize,
    pub attributes: i8,
    pub timestamp_delta: i64,
    pub offset_delta: i32,
    pub key_at: usize,
    pub key_len: i32,
    pub value_at: usize,
    pub value_len: i32,
    pub headers_at: usize,
    pub header_count: i32,
}

/// Parses one record from `s`, skipping over key, value and header bytes, and
/// checks that the fields fill exactly the declared length (as Kafka's
/// `DefaultRecord.readFrom` does).
#[inline]
pub(crate) fn parse_record<S: RecordSource>(s: &mut S) -> Result<RecordLayout, RecordError> {
    let start = s.consumed();
    let body_len = src_varint(s)?;
    if body_len < 0 {
        return Err(RecordError::Malformed(format!(
            "invalid record size {body_len}"
        )));
    }
    let body_start = s.consumed();
    let body_len = body_len as u64;
    // Skips `n` body bytes, refusing to run past the declared record length.
    let skip_in_body = |s: &mut S, n: i32| -> Result<(), RecordError> {
        if n <= 0 {
            return Ok(());
        }
        let used = s.consumed() - body_start;
        if used + n as u64 > body_len {
            return Err(RecordError::Malformed(format!(
                "field of {n} bytes overruns record of {body_len} bytes"
            )));
        }
        s.skip(n as usize)
    };
    let attributes = s.next_byte()? as i8;
    let timestamp_delta = src_varlong(s)?;
    let offset_delta = src_varint(s)?;
    let key_len = src_varint(s)?;
    let key_at = (s.consumed() - start) as usize;
    skip_in_body(s, key_len)?;
    let value_len = src_varint(s)?;
    let value_at = (s.consumed() - start) as usize;
    skip_in_body(s, value_len)?;
    let header_count = src_varint(s)?;
    let headers_at = (s.consumed() - start) as usize;
    if header_count < 0 {
        return Err(RecordError::Malformed(format!(
            "invalid header count {header_count}"
        )));
    }
    let used = s.consumed() - body_start;
    if header_count as u64 > body_len.saturating_sub(used) {
        return Err(RecordError::Malformed(format!(
            "header count {header_count} exceeds the record's remaining bytes"
        )));
    }
    for _ in 0..header_count {
        let key_len = src_varint(s)?;
        if key_len < 0 {
            return Err(RecordError::Malformed(format!(
                "invalid negative header key size {key_len}"
            )));
        }
        skip_in_body(s, key_len)?;
        let value_len = src_varint(s)?;
        skip_in_body(s, value_len)?;
    }
    let read = s.consumed() - body_start;
    if read != body_len {
        return Err(RecordError::Malformed(format!(
            "expected {body_len} bytes in record payload, read {read}"
        )));
    }
    Ok(RecordLayout {
        size_bytes: (s.consumed() - start) as usize,
        attributes,
        timestamp_delta,
        offset_delta,
        key_at,
        key_len,
        value_at,
        value_len,
        headers_at,
        header_count,
    })
}

/// One record borrowed from an uncompressed records buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record<'a> {
    pub attributes: i8,
    pub timestamp_delta: i64,
    pub offset_delta: i32,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    pub size_bytes: usize,
    headers: &'a [u8],
    header_count: i32,
}

impl<'a> Record<'a> {
    pub fn header_count(&self) -> usize {
        self.header_count as usize
    }
    /// Headers as (key, value); keys are bytes (Kafka decodes them as UTF-8).
    pub fn headers(&self) -> HeaderIter<'a> {
        HeaderIter {
            buf: self.headers,
            pos: 0,
            remaining: self.header_count,
        }
    }
}

fn sub(buf: &[u8], at: usize, len: i32) -> Option<&[u8]> {
    if len < 0 {
        None
    } else {
        buf.get(at..at + len as usize)
    }
}

/// Iterates over headers of a record that `RecordIter` already validated.
pub struct HeaderIter<'a> {
    buf: &'a [u8],
    pos: usize,
    remaining: i32,
}

impl<'a> Iterator for HeaderIter<'a> {
    type Item = (&'a [u8], Option<&'a [u8]>);
    fn next(&mut self) -> Option<Self::Item> {
        if self.remaining <= 0 {
            return None;
        }
        self.remaining -= 1;
        let key_len = read_varint(self.buf, &mut self.pos).ok()?;
        let key = sub(self.buf, self.pos, key_len)?;
        self.pos += key.len();
        let value_len = read_varint(self.buf, &mut self.pos).ok()?;
        let value = sub(self.buf, self.pos, value_len);
        self.pos += value.map_or(0, |v| v.len());
        Some((key, value))
    }
}

/// Bounds-checked iterator over the records of an uncompressed records
/// buffer (the bytes after the batch header, or the output of `decompress`).
/// Yields at most one error, then stops.
pub struct RecordIter<'a> {
    src: SliceSource<'a>,
    failed: bool,
}

impl<'a> RecordIter<'a> {
    pub fn new(records: &'a [u8]) -> Self {
        RecordIter {
            src: SliceSource::new(records),
            failed: false,
        }
    }
    /// Byte position of the next record.
    pub fn position(&self) -> usize {
        self.src.pos
    }
}

impl<'a> Iterator for RecordIter<'a> {
    type Item = Result<Record<'a>, RecordError>;
    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.src.pos == self.src.buf.len() {
            return None;
        }
        let start = self.src.pos;
        match parse_record(&mut self.src) {
            Ok(l) => {
                let rec = &self.src.buf[start..start + l.size_bytes];
                Some(Ok(Record {
                    attributes: l.attributes,
                    timestamp_delta: l.timestamp_delta,
                    offset_delta: l.offset_delta,
                    key: sub(rec, l.key_at, l.key_len),
                    value: sub(rec, l.value_at, l.value_len),
                    size_bytes: l.size_bytes,
                    headers: &rec[l.headers_at..],
                    header_count: l.header_count,
                }))
            }
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
        }
    }
}

// ---------------------------------------------------------------- codecs

/// Reads raw snappy (librdkafka) or xerial-framed snappy (Java) as a stream,
/// one block at a time into `out`.
pub(crate) struct SnappyReader<'a> {
    input: &'a [u8],
    xerial: bool,
    out: &'a mut Vec<u8>,
    pos: usize,
    produced: usize,
    limit_bytes: usize,
}

fn too_large() -> io::Error {
    io::Error::new(io::ErrorKind::FileTooLarge, "decompressed size limit")
}
fn snap_err(e: snap::Error) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}

impl<'a> SnappyReader<'a> {
    pub(crate) fn new(input: &'a [u8], out: &'a mut Vec<u8>, limit_bytes: usize) -> Self {
        out.clear();
        let xerial = is_xerial(input);
        SnappyReader {
            input,
            xerial,
            out,
            pos: 0,
            produced: 0,
            limit_bytes,
        }
    }

    /// Decodes the next block into `out`; false at end of input.
    fn next_block(&mut self) -> io::Result<bool> {
        let block = if self.xerial {
            // A stream may be several concatenated xerial streams.
            while is_xerial(self.input) {
                self.input = &self.input[XERIAL_HEADER_BYTES..];
            }
            if self.input.is_empty() {
                return Ok(false);
            }
            if self.input.len() < 4 {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "xerial block length",
                ));
            }
            let len = i32::from_be_bytes(self.input[..4].try_into().expect("4 bytes"));
            if len < 0 || len as usize > self.input.len() - 4 {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "xerial block length",
                ));
            }
            let block = &self.input[4..4 + len as usize];
            self.input = &self.input[4 + len as usize..];
            block
        } else {
            if self.input.is_empty() {
                return Ok(false);
            }
            std::mem::take(&mut self.input)
        };
        let n = snap::raw::decompress_len(block).map_err(snap_err)?;
        if n > self.limit_bytes - self.produced {
            return Err(too_large());
        }
        self.out.clear();
        self.out.resize(n, 0);
        let got = snap::raw::Decoder::new()
            .decompress(block, &mut self.out[..])
            .map_err(snap_err)?;
        self.out.truncate(got);
        self.produced += got;
        self.pos = 0;
        Ok(true)
    }
}

fn is_xerial(input: &[u8]) -> bool {
    input.len() >= XERIAL_HEADER_BYTES && input[..8] == XERIAL_MAGIC
}

impl Read for SnappyReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.pos == self.out.len() {
            if !self.next_block()? {
                return Ok(0);
            }
        }
        let n = buf.len().min(self.out.len() - self.pos);
        buf[..n].copy_from_slice(&self.out[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

/// A decompressing reader over one batch's record bytes.
pub(crate) enum Decoder<'a> {
    Gzip(flate2::read::MultiGzDecoder<&'a [u8]>),
    Snappy(SnappyReader<'a>),
    Lz4(lz4_flex::frame::FrameDecoder<&'a [u8]>),
    Zstd(zstd::stream::read::Decoder<'static, &'a [u8]>),
}

impl<'a> Decoder<'a> {
    /// `snappy_buf` is block scratch for snappy; `limit_bytes` bounds it.
    pub(crate) fn new(
        codec: Compression,
        input: &'a [u8],
        snappy_buf: &'a mut Vec<u8>,
        limit_bytes: usize,
    ) -> Result<Decoder<'a>, RecordError> {
        Ok(match codec {
            Compression::None => {
                return Err(RecordError::Decompress("not compressed".into()));
            }
            Compression::Gzip => Decoder::Gzip(flate2::read::MultiGzDecoder::new(input)),
            Compression::Snappy => {
                Decoder::Snappy(SnappyReader::new(input, snappy_buf, limit_bytes))
            }
            Compression::Lz4 => Decoder::Lz4(lz4_flex::frame::FrameDecoder::new(input)),
            Compression::Zstd => {
                let mut d = zstd::stream::read::Decoder::with_buffer(input)
                    .map_err(|e| RecordError::Decompress(e.to_string()))?;
                d.window_log_max(ZSTD_WINDOW_LOG_MAX)
                    .map_err(|e| RecordError::Decompress(e.to_string()))?;
                Decoder::Zstd(d)
            }
        })
    }
}

impl Read for Decoder<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Decoder::Gzip(d) => d.read(buf),
            Decoder::Snappy(d) => d.read(buf),
            Decoder::Lz4(d) => d.read(buf),
            Decoder::Zstd(d) => d.read(buf),
        }
    }
}

/// Decompresses a batch's record bytes (everything after the 61-byte header)
/// into `out` (cleared first), failing rather than producing more than
/// `max_out_bytes`. `Compression::None` copies.
pub fn decompress(
    codec: Compression,
    input: &[u8],
    out: &mut Vec<u8>,
    max_out_bytes: usize,
) -> Result<(), String> {
    out.clear();
    if codec == Compression::None {
        if input.len() > max_out_bytes {
            return Err(RecordError::TooLarge {
                limit_bytes: max_out_bytes,
            }
            .to_string());
        }
        out.extend_from_slice(input);
        return Ok(());
    }
    let mut snappy_buf = Vec::new();
    let decoder =
        Decoder::new(codec, input, &mut snappy_buf, max_out_bytes).map_err(|e| e.to_string())?;
    decoder
        .take(max_out_bytes as u64 + 1)
        .read_to_end(out)
        .map_err(|e| io_to_record_error(e, max_out_bytes).to_string())?;
    if out.len() > max_out_bytes {
        out.clear();
        return Err(RecordError::TooLarge {
            limit_bytes: max_out_bytes,
        }
        .to_string());
    }
    Ok(())
}

/// Compresses `input` with `codec`, appending to `out`. Snappy is raw
/// (librdkafka style) unless `xerial_snappy` (Java style).
pub fn compress(
    codec: Compression,
    input: &[u8],
    out: &mut Vec<u8>,
    xerial_snappy: bool,
) -> io::Result<()> {
    match codec {
        Compression::None => out.extend_from_slice(input),
        Compression::Gzip => {
            let mut e = flate2::write::GzEncoder::new(out, flate2::Compression::default());
            e.write_all(input)?;
            e.finish()?;
        }
        Compression::Snappy if xerial_snappy => {
            out.extend_from_slice(&XERIAL_MAGIC);
            out.extend_from_slice(&1i32.to_be_bytes());
            out.extend_from_slice(&1i32.to_be_bytes());
            let mut enc = snap::raw::Encoder::new();
            for block in input.chunks(XERIAL_BLOCK_BYTES) {
                let c = enc.compress_vec(block).map_err(snap_err)?;
                out.extend_from_slice(&(c.len() as i32).to_be_bytes());
                out.extend_from_slice(&c);
            }
        }
        Compression::Snappy => {
            let c = snap::raw::Encoder::new()
                .compress_vec(input)
                .map_err(snap_err)?;
            out.extend_from_slice(&c);
        }
        Compression::Lz4 => {
            let mut e = lz4_flex::frame::FrameEncoder::new(out);
            e.write_all(input)?;
            e.finish().map_err(io::Error::other)?;
        }
        Compression::Zstd => {
            let c = zstd::bulk::compress(input, 3)?;
            out.extend_from_slice(&c);
        }
    }
    Ok(())
}

// ---------------------------------------------------------------- builder

/// Encodes one v2 batch. Chain `add` calls, or `push` in a loop:
///
/// ```
/// use kshard_shards::log::batch::Compression;
/// use kshard_shards::log::records::BatchBuilder;
/// let batch = BatchBuilder::new(0)
///     .compression(Compression::Lz4)
///     .producer(7, 0, 0)
///     .add(1_000, Some(b"k"), Some(b"v"), &[("h", Some(b"x"))])
///     .build();
/// assert!(kshard_shards::log::batch::verify_crc(&batch).is_ok());
/// ```
#[derive(Clone, Debug)]
pub struct BatchBuilder {
    base_offset: i64,
    partition_leader_epoch: i32,
    compression: Compression,
    xerial_snappy: bool,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    transactional: bool,
    control: bool,
    timestamp_type: TimestampType,
    records: Vec<u8>,
    count: i32,
    base_timestamp: Option<i64>,
    max_timestamp: i64,
    last_offset_delta: i32,
}

type Header<'h> = (&'h str, Option<&'h [u8]>);

impl BatchBuilder {
    pub fn new(base_offset: i64) -> Self {
        BatchBuilder {
            base_offset,
            partition_leader_epoch: NO_PARTITION_LEADER_EPOCH,
            compression: Compression::None,
            xerial_snappy: false,
            producer_id: NO_PRODUCER_ID,
            producer_epoch: NO_PRODUCER_EPOCH,
            base_sequence: NO_SEQUENCE,
            transactional: false,
            control: false,
            timestamp_type: TimestampType::CreateTime,
            records: Vec::new(),
            count: 0,
            base_timestamp: None,
            max_timestamp: NO_TIMESTAMP,
            last_offset_delta: -1,
        }
    }
    pub fn compression(mut self, c: Compression) -> Self {
        self.compression = c;
        self
    }
    /// Java-client snappy framing instead of raw blocks.
    pub fn xerial_snappy(mut self, on: bool) -> Self {
        self.xerial_snappy = on;
        self
    }
    pub fn producer(mut self, producer_id: i64, epoch: i16, base_sequence: i32) -> Self {
        self.producer_id = producer_id;
        self.producer_epoch = epoch;
        self.base_sequence = base_sequence;
        self
    }
    pub fn partition_leader_epoch(mut self, epoch: i32) -> Self {
        self.partition_leader_epoch = epoch;
        self
    }
    pub fn transactional(mut self, on: bool) -> Self {
        self.transactional = on;
        self
    }
    pub fn control(mut self, on: bool) -> Self {
        self.control = on;
        self
    }
    pub fn timestamp_type(mut self, t: TimestampType) -> Self {
        self.timestamp_type = t;
        self
    }
    /// Adds a record with the next offset delta.
    pub fn add(
        mut self,
        timestamp_ms: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[Header<'_>],
    ) -> Self {
        self.push(timestamp_ms, key, value, headers);
        self
    }
    /// Adds a record with an explicit offset delta (tests of bad input).
    pub fn add_with_offset_delta(
        mut self,
        offset_delta: i32,
        timestamp_ms: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[Header<'_>],
    ) -> Self {
        self.push_record(offset_delta, timestamp_ms, key, value, headers);
        self
    }
    /// `add` for loops.
    pub fn push(
        &mut self,
        timestamp_ms: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[Header<'_>],
    ) -> &mut Self {
        self.push_record(self.count, timestamp_ms, key, value, headers)
    }
    pub fn record_count(&self) -> usize {
        self.count as usize
    }

    fn push_record(
        &mut self,
        offset_delta: i32,
        timestamp_ms: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[Header<'_>],
    ) -> &mut Self {
        let base = *self.base_timestamp.get_or_insert(timestamp_ms);
        let ts_delta = timestamp_ms.wrapping_sub(base);
        let bytes_len = |b: Option<&[u8]>| b.map_or(-1, |b| b.len() as i32);
        let field_len = |b: Option<&[u8]>| {
            let n = bytes_len(b);
            varint_len(n) + n.max(0) as usize
        };
        let mut body = 1 + varlong_len(ts_delta) + varint_len(offset_delta);
        body += field_len(key) + field_len(value) + varint_len(headers.len() as i32);
        for (k, v) in headers {
            body += field_len(Some(k.as_bytes())) + field_len(*v);
        }
        let out = &mut self.records;
        write_varint(out, body as i32);
        let before = out.len();
        out.push(0); // attributes: unused in v2
        write_varlong(out, ts_delta);
        write_varint(out, offset_delta);
        for field in [key, value] {
            write_varint(out, bytes_len(field));
            out.extend_from_slice(field.unwrap_or(&[]));
        }
        write_varint(out, headers.len() as i32);
        for (k, v) in headers {
            write_varint(out, k.len() as i32);
            out.extend_from_slice(k.as_bytes());
            write_varint(out, bytes_len(*v));
            out.extend_from_slice(v.unwrap_or(&[]));
        }
        debug_assert_eq!(out.len() - before, body);
        self.count += 1;
        self.last_offset_delta = offset_delta;
        self.max_timestamp = self.max_timestamp.max(timestamp_ms);
        self
    }

    /// The encoded batch, CRC set.
    pub fn build(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(RECORD_BATCH_OVERHEAD + self.records.len());
        out.extend_from_slice(&self.base_offset.to_be_bytes());
        out.extend_from_slice(&0i32.to_be_bytes()); // length, patched below
        out.extend_from_slice(&self.partition_leader_epoch.to_be_bytes());
        out.push(CURRENT_MAGIC);
        out.extend_from_slice(&0u32.to_be_bytes()); // crc, patched below
        let mut attributes = match self.compression {
            Compression::None => 0,
            Compression::Gzip => 1,
            Compression::Snappy => 2,
            Compression::Lz4 => 3,
            Compression::Zstd => 4,
        };
        if self.timestamp_type == TimestampType::LogAppendTime {
            attributes |= TIMESTAMP_TYPE_MASK;
        }
        if self.transactional {
            attributes |= TRANSACTIONAL_FLAG_MASK;
        }
        if self.control {
            attributes |= CONTROL_FLAG_MASK;
        }
        out.extend_from_slice(&attributes.to_be_bytes());
        out.extend_from_slice(&self.last_offset_delta.to_be_bytes());
        let base_ts = self.base_timestamp.unwrap_or(NO_TIMESTAMP);
        out.extend_from_slice(&base_ts.to_be_bytes());
        out.extend_from_slice(&self.max_timestamp.to_be_bytes());
        out.extend_from_slice(&self.producer_id.to_be_bytes());
        out.extend_from_slice(&self.producer_epoch.to_be_bytes());
        out.extend_from_slice(&self.base_sequence.to_be_bytes());
        out.extend_from_slice(&self.count.to_be_bytes());
        debug_assert_eq!(out.len(), RECORD_BATCH_OVERHEAD);
        debug_assert_eq!(ATTRIBUTES_OFFSET, 21);
        compress(
            self.compression,
            &self.records,
            &mut out,
            self.xerial_snappy,
        )
        .expect("compressing into memory cannot fail");
        let length = (out.len() - LOG_OVERHEAD) as i32;
        out[LENGTH_OFFSET..LENGTH_OFFSET + 4].copy_from_slice(&length.to_be_bytes());
        let crc = batch::compute_crc(&out);
        out[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CODECS: [Compression; 5] = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];

    #[test]
    fn varint_round_trip_and_sizes() {
        let mut buf = Vec::new();
        for v in [0, 1, -1, 63, -64, 64, i32::MAX, i32::MIN, 300, -300] {
            buf.clear();
            write_varint(&mut buf, v);
            assert_eq!(buf.len(), varint_len(v));
            let mut pos = 0;
            assert_eq!(read_varint(&buf, &mut pos).unwrap(), v);
            assert_eq!(pos, buf.len());
        }
        for v in [0i64, -1, i64::MAX, i64::MIN, 1 << 40] {
            buf.clear();
            write_varlong(&mut buf, v);
            assert_eq!(buf.len(), varlong_len(v));
            let mut pos = 0;
            assert_eq!(read_varlong(&buf, &mut pos).unwrap(), v);
        }
        // Zigzag matches Kafka's: -1 -> 1, 1 -> 2.
        buf.clear();
        write_varint(&mut buf, -1);
        assert_eq!(buf, [1]);
    }

    #[test]
    fn varint_errors() {
        let mut pos = 0;
        assert!(read_varint(&[0x80, 0x80], &mut pos).is_err());
        let mut pos = 0;
        assert!(read_varint(&[0xff; 6], &mut pos).is_err());
        let mut pos = 0;
        assert!(read_varlong(&[0xff; 11], &mut pos).is_err());
        let mut pos = 7;
        assert!(read_varint(&[1], &mut pos).is_err());
    }

    fn sample(codec: Compression, xerial: bool) -> Vec<u8> {
        BatchBuilder::new(0)
            .compression(codec)
            .xerial_snappy(xerial)
            .producer(9, 2, 40)
            .add(
                1000,
                Some(b"k1"),
                Some(b"v1"),
                &[("a", Some(b"1")), ("b", None)],
            )
            .add(990, None, Some(b"v2"), &[])
            .add(1005, Some(b"k3"), None, &[])
            .build()
    }

    #[test]
    fn builder_header_and_records_for_every_codec() {
        for codec in CODECS {
            for xerial in [false, true] {
                let b = sample(codec, xerial);
                batch::verify_crc(&b).unwrap();
                let h = batch::BatchHeader::parse(&b).unwrap();
                assert_eq!(h.total_size(), b.len());
                assert_eq!(h.compression(), Some(codec));
                assert_eq!((h.records_count, h.last_offset_delta), (3, 2));
                assert_eq!((h.base_timestamp, h.max_timestamp), (1000, 1005));
                assert_eq!(
                    (h.producer_id, h.producer_epoch, h.base_sequence),
                    (9, 2, 40)
                );
                let mut out = Vec::new();
                decompress(codec, &b[RECORD_BATCH_OVERHEAD..], &mut out, 1 << 20).unwrap();
                let recs: Vec<_> = RecordIter::new(&out).map(|r| r.unwrap()).collect();
                assert_eq!(recs.len(), 3);
                assert_eq!(recs[0].key, Some(&b"k1"[..]));
                assert_eq!(recs[0].value, Some(&b"v1"[..]));
                let hs: Vec<_> = recs[0].headers().collect();
                assert_eq!(hs, vec![(&b"a"[..], Some(&b"1"[..])), (&b"b"[..], None)]);
                assert_eq!(recs[1].key, None);
                assert_eq!(recs[1].timestamp_delta, -10);
                assert_eq!(recs[2].value, None);
                assert_eq!(
                    recs.iter().map(|r| r.offset_delta).collect::<Vec<_>>(),
                    [0, 1, 2]
                );
            }
        }
    }

    #[test]
    fn xerial_framing_is_detected() {
        let b = sample(Compression::Snappy, true);
        assert_eq!(
            &b[RECORD_BATCH_OVERHEAD..RECORD_BATCH_OVERHEAD + 8],
            &XERIAL_MAGIC
        );
        let raw = sample(Compression::Snappy, false);
        assert_ne!(
            &raw[RECORD_BATCH_OVERHEAD..RECORD_BATCH_OVERHEAD + 8],
            &XERIAL_MAGIC
        );
        // Multi-block xerial stream (> 32 KiB).
        let big = vec![7u8; 100_000];
        let mut c = Vec::new();
        compress(Compression::Snappy, &big, &mut c, true).unwrap();
        let mut out = Vec::new();
        decompress(Compression::Snappy, &c, &mut out, 1 << 20).unwrap();
        assert_eq!(out, big);
    }

    #[test]
    fn decompress_is_bounded() {
        let zeros = vec![0u8; 4 << 20];
        for codec in CODECS {
            for xerial in [false, true] {
                let mut c = Vec::new();
                compress(codec, &zeros, &mut c, xerial).unwrap();
                let mut out = Vec::new();
                let err = decompress(codec, &c, &mut out, 1 << 20).unwrap_err();
                assert!(err.contains("exceed"), "{codec:?}: {err}");
                assert!(out.capacity() <= (4 << 20), "{codec:?}");
            }
        }
    }

    #[test]
    fn garbage_never_panics() {
        let mut out = Vec::new();
        let mut seed = 0x1234_5678_9abc_def0u64;
        for len in 0..200usize {
            let buf: Vec<u8> = (0..len)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    seed as u8
                })
                .collect();
            for codec in CODECS {
                let _ = decompress(codec, &buf, &mut out, 1 << 16);
            }
            for r in RecordIter::new(&buf).flatten() {
                let _ = r.headers().count();
            }
        }
    }

    #[test]
    fn record_length_must_match_fields() {
        let b = BatchBuilder::new(0)
            .add(1, Some(b"k"), Some(b"v"), &[])
            .build();
        let mut recs = b[RECORD_BATCH_OVERHEAD..].to_vec();
        recs[0] += 2; // zigzag: declared length one larger
        recs.push(0);
        assert!(matches!(
            RecordIter::new(&recs).next(),
            Some(Err(RecordError::Malformed(_)))
        ));
    }
}
