//! Record batches as a produce request sent them plus the headers they are
//! stored with. Offset assignment only changes the 61-byte batch header
//! (base offset and leader epoch, which the CRC does not cover, and for
//! LogAppendTime the attributes, max timestamp and CRC), so direct mode
//! keeps the request's bytes as they are and writes the new headers over
//! them on their way into the DMA buffer: one copy instead of two. A
//! buffered append writes them straight from the request with `pwritev`,
//! the headers between the request's slices: no copy at all.

use std::fs::File;
use std::io::{self, IoSlice};
use std::os::fd::AsRawFd;

use bytes::Bytes;

use super::batch::{BatchHeader, RECORD_BATCH_OVERHEAD};

/// A batch header as it will be stored, and where its batch starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PatchedHeader {
    pub position: usize,
    pub bytes: [u8; RECORD_BATCH_OVERHEAD],
}

/// Validated batches: the bytes as received and every batch's new header.
#[derive(Clone, Debug)]
pub struct PatchedRecords {
    records: Bytes,
    headers: Vec<PatchedHeader>,
}

impl PatchedRecords {
    /// `headers` name the batches of `records` (all of them, in order, each
    /// lying wholly inside it; only the ordering and bounds are checked).
    pub fn new(records: Bytes, headers: Vec<PatchedHeader>) -> PatchedRecords {
        let mut last_end = 0usize;
        for h in &headers {
            assert!(h.position >= last_end, "headers in order, not overlapping");
            last_end = h.position + RECORD_BATCH_OVERHEAD;
            assert!(last_end <= records.len(), "header inside the records");
        }
        PatchedRecords { records, headers }
    }

    pub fn len(&self) -> usize {
        self.records.len()
    }

    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// The stored headers, parsed.
    pub fn headers(&self) -> impl Iterator<Item = io::Result<BatchHeader>> + '_ {
        self.headers.iter().map(|h| {
            BatchHeader::parse(&h.bytes).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
        })
    }

    /// Copies the stored bytes `[from, from + dst.len())` into `dst`.
    pub fn copy_range(&self, from: usize, dst: &mut [u8]) {
        let to = from + dst.len();
        assert!(to <= self.records.len(), "range inside the records");
        dst.copy_from_slice(&self.records[from..to]);
        for h in &self.headers {
            let (start, end) = (h.position, h.position + RECORD_BATCH_OVERHEAD);
            if end <= from || start >= to {
                continue;
            }
            let (lo, hi) = (start.max(from), end.min(to));
            dst[lo - from..hi - from].copy_from_slice(&h.bytes[lo - start..hi - start]);
        }
    }

    /// Appends the stored bytes to `out`.
    pub fn extend_into(&self, out: &mut Vec<u8>) {
        let base = out.len();
        out.extend_from_slice(&self.records);
        for h in &self.headers {
            let at = base + h.position;
            out[at..at + RECORD_BATCH_OVERHEAD].copy_from_slice(&h.bytes);
        }
    }

    /// Writes the stored bytes at `pos` of `file` with `pwritev`: the
    /// request's bytes between the headers and the headers themselves, in
    /// order, so nothing is copied or allocated. A short write is resumed;
    /// an error leaves the file holding a prefix of the bytes.
    pub fn write_all_at(&self, file: &File, mut pos: u64) -> io::Result<()> {
        let mut slices = [IoSlice::new(&[]); WRITE_SLICES_MAX];
        let mut filled = 0;
        let mut from = 0;
        for h in &self.headers {
            for part in [&self.records[from..h.position], &h.bytes[..]] {
                if filled == WRITE_SLICES_MAX {
                    pos += pwritev_all(file, &mut slices[..filled], pos)?;
                    filled = 0;
                }
                slices[filled] = IoSlice::new(part);
                filled += 1;
            }
            from = h.position + RECORD_BATCH_OVERHEAD;
        }
        if filled == WRITE_SLICES_MAX {
            pos += pwritev_all(file, &mut slices[..filled], pos)?;
            filled = 0;
        }
        slices[filled] = IoSlice::new(&self.records[from..]);
        pwritev_all(file, &mut slices[..=filled], pos)?;
        Ok(())
    }

    /// The stored bytes as one buffer (tests, tools).
    pub fn to_vec(&self) -> Vec<u8> {
        let mut out = vec![0u8; self.len()];
        self.copy_range(0, &mut out);
        out
    }
}

/// Slices one `pwritev` takes at most: well under the kernel's IOV_MAX
/// (1024), on the stack. A request's partition holds one batch (Kafka's
/// rule for magic 2), so one call nearly always writes it all.
const WRITE_SLICES_MAX: usize = 64;

/// Writes every byte of `slices` at `pos` (resuming short writes); returns
/// the bytes written. Empty slices are allowed.
fn pwritev_all(file: &File, mut slices: &mut [IoSlice<'_>], mut pos: u64) -> io::Result<u64> {
    let total: usize = slices.iter().map(|s| s.len()).sum();
    let mut left = total;
    while left > 0 {
        let offset = libc::off_t::try_from(pos)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "file position overflows"))?;
        // IoSlice is ABI-compatible with iovec; at most WRITE_SLICES_MAX of them.
        // SAFETY: the iovecs point into live borrowed slices for the call.
        let n = unsafe {
            libc::pwritev(
                file.as_raw_fd(),
                slices.as_ptr().cast::<libc::iovec>(),
                slices.len() as libc::c_int,
                offset,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::WriteZero,
                "pwritev wrote nothing",
            ));
        }
        let n = n as usize;
        assert!(n <= left, "pwritev wrote {n} of {left} bytes");
        left -= n;
        pos += n as u64;
        IoSlice::advance_slices(&mut slices, n);
    }
    Ok(total as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> PatchedRecords {
        let records = Bytes::from((0..200u8).collect::<Vec<u8>>());
        let mut h1 = [0xAAu8; RECORD_BATCH_OVERHEAD];
        h1[0] = 1;
        let h2 = [0xBBu8; RECORD_BATCH_OVERHEAD];
        PatchedRecords::new(
            records,
            vec![
                PatchedHeader {
                    position: 0,
                    bytes: h1,
                },
                PatchedHeader {
                    position: 100,
                    bytes: h2,
                },
            ],
        )
    }

    #[test]
    fn every_range_sees_the_patches() {
        let p = sample();
        let whole = p.to_vec();
        assert_eq!(whole[0], 1);
        assert!(whole[1..61].iter().all(|&b| b == 0xAA));
        assert_eq!(&whole[61..100], &(61..100u8).collect::<Vec<u8>>()[..]);
        assert!(whole[100..161].iter().all(|&b| b == 0xBB));
        assert_eq!(whole[161], 161);
        for from in 0..200 {
            for len in 0..=(200 - from) {
                let mut part = vec![0u8; len];
                p.copy_range(from, &mut part);
                assert_eq!(&part[..], &whole[from..from + len], "{from}+{len}");
            }
        }
    }

    #[test]
    fn pwritev_writes_what_copy_range_sees() {
        let dir = tempfile::tempdir().unwrap();
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(dir.path().join("seg"))
            .unwrap();
        let p = sample();
        p.write_all_at(&file, 7).unwrap();
        let mut back = vec![0u8; 207];
        std::os::unix::fs::FileExt::read_exact_at(&file, &mut back, 0).unwrap();
        assert_eq!(&back[7..], &p.to_vec()[..]);
        assert!(back[..7].iter().all(|&b| b == 0));
    }

    #[test]
    fn more_headers_than_one_pwritev_takes() {
        let dir = tempfile::tempdir().unwrap();
        let file = std::fs::File::create(dir.path().join("seg")).unwrap();
        let batches = WRITE_SLICES_MAX * 2 + 3;
        let batch_bytes = RECORD_BATCH_OVERHEAD + 5;
        let records: Vec<u8> = (0..batches * batch_bytes).map(|i| i as u8).collect();
        let headers = (0..batches)
            .map(|i| PatchedHeader {
                position: i * batch_bytes,
                bytes: [i as u8 ^ 0x5A; RECORD_BATCH_OVERHEAD],
            })
            .collect();
        let p = PatchedRecords::new(Bytes::from(records), headers);
        p.write_all_at(&file, 0).unwrap();
        assert_eq!(std::fs::read(dir.path().join("seg")).unwrap(), p.to_vec());
    }

    #[test]
    #[should_panic(expected = "header inside the records")]
    fn a_header_past_the_end_is_refused() {
        PatchedRecords::new(
            Bytes::from(vec![0u8; 70]),
            vec![PatchedHeader {
                position: 20,
                bytes: [0u8; RECORD_BATCH_OVERHEAD],
            }],
        );
    }
}
