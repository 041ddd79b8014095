//! Record batches as a produce request sent them plus the headers they are
//! stored with. Offset assignment only changes the 61-byte batch header
//! (base offset and leader epoch, which the CRC does not cover, and for
//! LogAppendTime the attributes, max timestamp and CRC), so direct mode
//! keeps the request's bytes as they are and writes the new headers over
//! them on their way into the DMA buffer: one copy instead of two.

use std::io;

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

    /// The stored bytes as one buffer (tests, tools).
    pub fn to_vec(&self) -> Vec<u8> {
        let mut out = vec![0u8; self.len()];
        self.copy_range(0, &mut out);
        out
    }
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
