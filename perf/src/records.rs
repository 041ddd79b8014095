//! Bounds-checked reading of v2 record batches from fetch responses.

use std::io::Read;

use anyhow::{bail, Context, Result};

use crate::batch::BATCH_HEADER_SIZE_BYTES;

/// The header fields of one complete batch.
#[derive(Debug, Clone, Copy)]
pub struct BatchView {
    pub base_offset: i64,
    /// Whole batch, including the 12 bytes of offset and length.
    pub batch_size_bytes: usize,
    pub crc: u32,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub record_count: i32,
}

impl BatchView {
    /// Parses the batch at the start of `buf`. `Ok(None)` when the batch is
    /// cut short (a fetch may end with a partial batch).
    pub fn parse(buf: &[u8]) -> Result<Option<BatchView>> {
        if buf.len() < 17 {
            return Ok(None);
        }
        let base_offset = i64::from_be_bytes(buf[0..8].try_into().expect("8 bytes"));
        let len = i32::from_be_bytes(buf[8..12].try_into().expect("4 bytes"));
        if len < 0 {
            bail!("negative batch length {len}");
        }
        let batch_size_bytes = len as usize + 12;
        let magic = buf[16] as i8;
        if magic != 2 {
            bail!("unsupported record batch magic {magic}");
        }
        if batch_size_bytes < BATCH_HEADER_SIZE_BYTES {
            bail!("batch length {len} shorter than the v2 header");
        }
        if buf.len() < batch_size_bytes {
            return Ok(None);
        }
        let be32 = |at: usize| i32::from_be_bytes(buf[at..at + 4].try_into().expect("4 bytes"));
        Ok(Some(BatchView {
            base_offset,
            batch_size_bytes,
            crc: be32(17) as u32,
            attributes: i16::from_be_bytes([buf[21], buf[22]]),
            last_offset_delta: be32(23),
            record_count: be32(57),
        }))
    }

    pub fn is_control(&self) -> bool {
        self.attributes & 0x20 != 0
    }

    pub fn next_offset(&self) -> i64 {
        self.base_offset + self.last_offset_delta as i64 + 1
    }

    pub fn crc_ok(&self, batch: &[u8]) -> bool {
        batch.len() >= self.batch_size_bytes
            && crc32c::crc32c(&batch[21..self.batch_size_bytes]) == self.crc
    }
}

/// One record, borrowed from the (possibly decompressed) batch.
pub struct RecordView<'a> {
    pub offset_delta: i32,
    pub key_len: usize,
    pub value: &'a [u8],
}

/// Calls `f` for each record of the complete batch `batch` (decompressing
/// into a temporary buffer when needed: the consumer side may allocate per
/// batch, never per record).
pub fn for_each_record<F: FnMut(RecordView<'_>)>(
    batch: &[u8],
    view: &BatchView,
    mut f: F,
) -> Result<()> {
    let body = &batch[BATCH_HEADER_SIZE_BYTES..view.batch_size_bytes];
    let owned;
    let records: &[u8] = match view.attributes & 0x7 {
        0 => body,
        codec => {
            owned = decompress(codec, body)?;
            &owned
        }
    };
    let mut cur = Cursor {
        buf: records,
        pos: 0,
    };
    for _ in 0..view.record_count.max(0) {
        let len = cur.varint()?;
        if len < 0 {
            bail!("negative record length");
        }
        let end = cur
            .pos
            .checked_add(len as usize)
            .filter(|&e| e <= records.len())
            .context("record runs past the batch")?;
        cur.skip(1)?; // attributes
        cur.varlong()?; // timestamp delta
        let offset_delta = cur.varint()?;
        let key_len = cur.varint()?;
        if key_len > 0 {
            cur.skip(key_len as usize)?;
        }
        let value_len = cur.varint()?;
        let value = if value_len > 0 {
            cur.take(value_len as usize)?
        } else {
            &[][..]
        };
        if cur.pos > end {
            bail!("record fields run past the record length");
        }
        cur.pos = end; // headers are not needed
        f(RecordView {
            offset_delta,
            key_len: key_len.max(0) as usize,
            value,
        });
    }
    Ok(())
}

fn decompress(codec: i16, body: &[u8]) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(body.len() * 4);
    match codec {
        1 => {
            flate2::read::GzDecoder::new(body)
                .read_to_end(&mut out)
                .context("gzip")?;
        }
        2 => snappy_decompress(body, &mut out)?,
        3 => {
            lz4::Decoder::new(body)
                .context("lz4")?
                .read_to_end(&mut out)
                .context("lz4")?;
        }
        4 => {
            zstd::stream::read::Decoder::new(body)
                .context("zstd")?
                .read_to_end(&mut out)
                .context("zstd")?;
        }
        other => bail!("unknown compression codec {other}"),
    }
    Ok(out)
}

/// Raw snappy, or the xerial framing used by the Java client.
fn snappy_decompress(body: &[u8], out: &mut Vec<u8>) -> Result<()> {
    let mut dec = snap::raw::Decoder::new();
    if body.len() >= 16 && body[..8] == *b"\x82SNAPPY\x00" {
        let mut pos = 16;
        while pos < body.len() {
            if body.len() - pos < 4 {
                bail!("truncated xerial snappy block length");
            }
            let n = u32::from_be_bytes(body[pos..pos + 4].try_into().expect("4 bytes")) as usize;
            pos += 4;
            let block = body.get(pos..pos + n).context("truncated snappy block")?;
            out.extend_from_slice(&dec.decompress_vec(block).context("snappy")?);
            pos += n;
        }
    } else {
        out.extend_from_slice(&dec.decompress_vec(body).context("snappy")?);
    }
    Ok(())
}

struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.buf.len())
            .context("record field runs past the batch")?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    fn skip(&mut self, n: usize) -> Result<()> {
        self.take(n).map(|_| ())
    }

    fn uvarint(&mut self) -> Result<u64> {
        let mut v = 0u64;
        for shift in (0..70).step_by(7) {
            let b = *self.buf.get(self.pos).context("truncated varint")?;
            self.pos += 1;
            v |= ((b & 0x7f) as u64) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        bail!("varint longer than 10 bytes")
    }

    fn varint(&mut self) -> Result<i32> {
        let v = self.uvarint()?;
        if v > u32::MAX as u64 {
            bail!("varint overflows 32 bits");
        }
        let v = v as u32;
        Ok(((v >> 1) as i32) ^ -((v & 1) as i32))
    }

    fn varlong(&mut self) -> Result<i64> {
        let v = self.uvarint()?;
        Ok(((v >> 1) as i64) ^ -((v & 1) as i64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garbage_never_panics() {
        let mut seed = 12345u64;
        for _ in 0..2000 {
            let mut buf = vec![0u8; 80];
            for b in buf.iter_mut() {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                *b = seed as u8;
            }
            buf[8..12].copy_from_slice(&68i32.to_be_bytes());
            buf[16] = 2;
            buf[21] = 0;
            buf[22] &= 0xf0;
            if let Ok(Some(v)) = BatchView::parse(&buf) {
                let _ = for_each_record(&buf, &v, |_| {});
            }
        }
    }

    #[test]
    fn partial_batch_is_none() {
        let mut buf = vec![0u8; 30];
        buf[8..12].copy_from_slice(&100i32.to_be_bytes());
        buf[16] = 2;
        assert!(BatchView::parse(&buf).unwrap().is_none());
    }
}
