//! The tail cache of a `log.io.mode=direct` log: the bytes of its last
//! asynchronous writes, kept in memory so fetches of what was just written
//! (consumers keeping up, followers, end-to-end latency) are answered
//! without a disk read. Direct writes bypass the page cache, so without it
//! every such fetch would wait for a DMA read of bytes the broker had in
//! memory a moment before.
//!
//! Each entry is one write's new bytes, exactly as stored, with the offsets
//! and segment position they hold. A read is served from one entry (a zero
//! copy slice of it, `Send`, so it crosses shards as is), starting at the
//! batch holding the fetch offset. Entries are dropped oldest first beyond
//! `TAIL_CACHE_BYTES` (the newest always stays) and all at once when the
//! log is truncated.

use std::collections::VecDeque;

use bytes::{Bytes, BytesMut};

use super::batch::BatchHeader;

/// Bytes of recent writes one log keeps (beyond the newest write).
pub const TAIL_CACHE_BYTES: usize = 1024 * 1024;

struct Entry {
    segment_base: i64,
    /// Segment file position of `bytes[0]`.
    position: u64,
    first_offset: i64,
    /// One past the last offset in `bytes`.
    end_offset: i64,
    bytes: Bytes,
}

/// What a read found: bytes that start with the batch holding the fetch
/// offset, where they lie in which segment, and that batch's base offset.
pub struct TailRead {
    pub segment_base: i64,
    pub position: u64,
    pub bytes: Bytes,
    pub first_batch_base_offset: i64,
    /// Kafka's size of the read (see [`crate::log::ReadInfo::read_size`]).
    pub read_size: u32,
}

#[derive(Default)]
pub struct TailCache {
    entries: VecDeque<Entry>,
    bytes: usize,
}

impl TailCache {
    /// Records a write: `bytes` (whole batches) at `position` of the
    /// segment at `segment_base`, offsets `first_offset..end_offset`.
    pub fn push(
        &mut self,
        segment_base: i64,
        position: u64,
        first_offset: i64,
        end_offset: i64,
        bytes: Bytes,
    ) {
        assert!(first_offset < end_offset && !bytes.is_empty());
        if let Some(last) = self.entries.back() {
            assert_eq!(last.end_offset, first_offset, "contiguous writes");
        }
        self.bytes += bytes.len();
        self.entries.push_back(Entry {
            segment_base,
            position,
            first_offset,
            end_offset,
            bytes,
        });
        while self.entries.len() > 1 && self.bytes - self.entries[0].bytes.len() >= TAIL_CACHE_BYTES
        {
            let old = self.entries.pop_front().expect("len > 1");
            self.bytes -= old.bytes.len();
        }
    }

    pub fn clear(&mut self) {
        self.entries.clear();
        self.bytes = 0;
    }

    /// Bytes held.
    pub fn size_bytes(&self) -> usize {
        self.bytes
    }

    /// Whether reads at `offset` start in the cache (it holds the log's
    /// last writes, so everything from its first offset on).
    pub fn covers(&self, offset: i64) -> bool {
        self.entries
            .front()
            .is_some_and(|first| offset >= first.first_offset)
    }

    /// (segment base, file position) of the cached batch holding `offset`.
    pub fn position_of(&self, offset: i64) -> Option<(i64, u64)> {
        let first = self.entries.front()?;
        if offset < first.first_offset {
            return None;
        }
        let i = self.entries.partition_point(|e| e.end_offset <= offset);
        let e = self.entries.get(i)?;
        let mut start = 0usize;
        while start < e.bytes.len() {
            let h = BatchHeader::parse(&e.bytes[start..]).ok()?;
            if h.last_offset() >= offset {
                return Some((e.segment_base, e.position + start as u64));
            }
            start += h.total_size();
        }
        None
    }

    /// Whole batches from the one holding `offset`: at most `max_bytes`
    /// (but the first batch even if larger, when `min_one_batch`), none
    /// starting at or past `max_offset_exclusive`, all in one segment. A
    /// read within one write is a zero-copy slice; one spanning writes is
    /// copied into one buffer. None when `offset` is not cached or nothing
    /// qualifies.
    pub fn read(
        &self,
        offset: i64,
        max_bytes: u32,
        max_offset_exclusive: i64,
        min_one_batch: bool,
    ) -> Option<TailRead> {
        let first = self.entries.front()?;
        if offset < first.first_offset {
            return None;
        }
        let i = self.entries.partition_point(|e| e.end_offset <= offset);
        let e = self.entries.get(i)?;
        debug_assert!(e.first_offset <= offset && offset < e.end_offset);
        // The batch holding `offset`.
        let mut start = 0usize;
        let first_base = loop {
            let h = BatchHeader::parse(&e.bytes[start..]).ok()?;
            if h.last_offset() >= offset {
                break h.base_offset;
            }
            start += h.total_size();
            if start >= e.bytes.len() {
                return None;
            }
        };
        if first_base >= max_offset_exclusive {
            return None;
        }
        // Whole batches from there, write after write while they continue
        // the same segment: (entry, start, end) ranges.
        let mut ranges: Vec<(usize, usize, usize)> = Vec::new();
        let mut total = 0u64;
        // A batch did not fit: Kafka fills the limit with part of it.
        let mut cut_by_limit = false;
        let (mut at, mut from) = (i, start);
        'entries: while let Some(cur) = self.entries.get(at) {
            if at > i {
                let prev = &self.entries[at - 1];
                if cur.segment_base != prev.segment_base
                    || cur.position != prev.position + prev.bytes.len() as u64
                {
                    break;
                }
            }
            let mut end = from;
            while end < cur.bytes.len() {
                let Ok(h) = BatchHeader::parse(&cur.bytes[end..]) else {
                    break 'entries;
                };
                let size = h.total_size();
                if h.base_offset >= max_offset_exclusive || end + size > cur.bytes.len() {
                    break;
                }
                let fits = total + (end + size - from) as u64 <= max_bytes as u64;
                let first_batch = total == 0 && end == from;
                if !(fits || first_batch && min_one_batch) {
                    cut_by_limit = true;
                    break;
                }
                end += size;
            }
            if end > from {
                ranges.push((at, from, end));
                total += (end - from) as u64;
            }
            if end < cur.bytes.len() {
                break;
            }
            at += 1;
            from = 0;
        }
        let bytes = match ranges.as_slice() {
            [] => return None,
            [(at, from, end)] => self.entries[*at].bytes.slice(*from..*end),
            many => {
                let mut out = BytesMut::with_capacity(total as usize);
                for (at, from, end) in many {
                    out.extend_from_slice(&self.entries[*at].bytes[*from..*end]);
                }
                out.freeze()
            }
        };
        debug_assert_eq!(bytes.len() as u64, total);
        Some(TailRead {
            segment_base: e.segment_base,
            position: e.position + start as u64,
            bytes,
            first_batch_base_offset: first_base,
            read_size: if cut_by_limit {
                (max_bytes as u64).max(total) as u32
            } else {
                total as u32
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::test_util::build_batch;

    /// One write per `writes` entry, from offset 0, each holding two
    /// batches of `n` records.
    fn cache_with(writes: &[usize]) -> (TailCache, Vec<Vec<u8>>) {
        let mut cache = TailCache::default();
        let mut offset = 0i64;
        let mut position = 0u64;
        let mut all = Vec::new();
        for &n in writes {
            let a = build_batch(offset, n, 1, 10);
            let b = build_batch(offset + n as i64, n, 1, 10);
            let bytes: Vec<u8> = [a.clone(), b.clone()].concat();
            cache.push(
                0,
                position,
                offset,
                offset + 2 * n as i64,
                Bytes::from(bytes.clone()),
            );
            position += bytes.len() as u64;
            offset += 2 * n as i64;
            all.push(a);
            all.push(b);
        }
        (cache, all)
    }

    #[test]
    fn reads_start_at_the_batch_holding_the_offset() {
        let (cache, batches) = cache_with(&[3, 2]);
        // Offsets: write 0 = [0..3) [3..6), write 1 = [6..8) [8..10).
        let one = batches[1].len() as u32;
        let r = cache.read(4, one, i64::MAX, true).unwrap();
        assert_eq!(r.first_batch_base_offset, 3);
        assert_eq!(&r.bytes[..], &batches[1][..]);
        assert_eq!(r.position, batches[0].len() as u64);
        let r = cache.read(6, u32::MAX, i64::MAX, true).unwrap();
        assert_eq!(
            &r.bytes[..],
            &[batches[2].clone(), batches[3].clone()].concat()[..]
        );
        assert!(cache.read(10, u32::MAX, i64::MAX, true).is_none());
        // Across writes, copied into one buffer.
        let r = cache.read(4, u32::MAX, i64::MAX, true).unwrap();
        assert_eq!(&r.bytes[..], &batches[1..].concat()[..]);
        let two = (batches[1].len() + batches[2].len()) as u32;
        let r = cache.read(4, two, i64::MAX, true).unwrap();
        assert_eq!(&r.bytes[..], &batches[1..3].concat()[..]);
        let r = cache.read(4, u32::MAX, 8, true).unwrap();
        assert_eq!(&r.bytes[..], &batches[1..3].concat()[..], "stops at the HW");
    }

    #[test]
    fn limits_apply_by_whole_batches() {
        let (cache, batches) = cache_with(&[3]);
        let one = batches[0].len() as u32;
        let r = cache.read(0, one, i64::MAX, false).unwrap();
        assert_eq!(r.bytes.len(), one as usize);
        assert!(cache.read(0, one - 1, i64::MAX, false).is_none());
        let r = cache.read(0, 1, i64::MAX, true).unwrap();
        assert_eq!(r.bytes.len(), one as usize, "min one batch");
        // The high watermark stops at batch starts.
        let r = cache.read(0, u32::MAX, 3, true).unwrap();
        assert_eq!(r.bytes.len(), one as usize);
        assert!(cache.read(0, u32::MAX, 0, true).is_none());
    }

    #[test]
    fn keeps_the_newest_writes_covering_the_budget() {
        let mut cache = TailCache::default();
        let a = Bytes::from(build_batch(0, 1, 1, 100));
        let b = Bytes::from(build_batch(1, 1, 1, TAIL_CACHE_BYTES - 1000));
        let c = Bytes::from(build_batch(2, 1, 1, 2000));
        cache.push(0, 0, 0, 1, a.clone());
        cache.push(0, a.len() as u64, 1, 2, b.clone());
        assert!(
            cache.read(0, u32::MAX, i64::MAX, true).is_some(),
            "b alone is under budget"
        );
        cache.push(0, (a.len() + b.len()) as u64, 2, 3, c.clone());
        assert!(
            cache.read(0, u32::MAX, i64::MAX, true).is_none(),
            "a evicted"
        );
        assert!(cache.read(1, u32::MAX, i64::MAX, true).is_some());
        assert!(cache.read(2, u32::MAX, i64::MAX, true).is_some());
        assert_eq!(cache.size_bytes(), b.len() + c.len());
        cache.clear();
        assert!(cache.read(2, u32::MAX, i64::MAX, true).is_none());
    }
}
