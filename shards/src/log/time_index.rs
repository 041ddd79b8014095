//! Kafka's `TimeIndex`: a sparse map from timestamps to offsets in one
//! segment. The file is a run of 12-byte entries (timestamp i64 BE, relative
//! offset i32 BE); timestamps strictly increase, offsets never decrease. As
//! with the offset index, entries are kept in memory and written out on
//! flush, roll and close.

use std::io;

use super::batch::NO_TIMESTAMP;
use super::index_mmap::{self, IndexMmap};
use super::segment::DiskFile;

pub const TIME_INDEX_ENTRY_BYTES: usize = 12;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimestampOffset {
    pub timestamp: i64,
    pub offset: i64,
}

pub struct TimeIndex {
    base_offset: i64,
    file: DiskFile,
    /// (timestamp, relative offset) pairs.
    entries: Vec<(i64, u32)>,
    written: usize,
    max_entries: usize,
    /// While the segment is active: the file mapped at its capacity.
    mapped: Option<IndexMmap>,
}

fn corrupt(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

impl TimeIndex {
    pub fn create(file: DiskFile, base_offset: i64, max_index_size_bytes: u32) -> io::Result<Self> {
        file.set_len(0)?;
        Ok(TimeIndex {
            base_offset,
            file,
            entries: Vec::new(),
            written: 0,
            max_entries: max_entries(max_index_size_bytes),
            mapped: None,
        })
    }

    /// Loads and sanity-checks an existing file; `InvalidData` = rebuild.
    pub fn load(file: DiskFile, base_offset: i64, max_index_size_bytes: u32) -> io::Result<Self> {
        let len = file.file_len()?;
        let max_entries = max_entries(max_index_size_bytes);
        if len % TIME_INDEX_ENTRY_BYTES as u64 != 0 {
            return Err(corrupt(format!(
                "time index size {len} is not a multiple of 12"
            )));
        }
        // One extra: the entry written on roll skips the full check.
        if len / TIME_INDEX_ENTRY_BYTES as u64 > max_entries as u64 + 1 {
            return Err(corrupt(format!(
                "time index of {len} bytes holds more than {max_entries} entries"
            )));
        }
        let raw = index_mmap::read_entries(
            &file,
            TIME_INDEX_ENTRY_BYTES,
            preallocated_bytes(max_entries),
        )?;
        let count = raw.len() / TIME_INDEX_ENTRY_BYTES;
        let mut entries: Vec<(i64, u32)> = Vec::with_capacity(count);
        for chunk in raw.chunks_exact(TIME_INDEX_ENTRY_BYTES) {
            let ts = i64::from_be_bytes(chunk[0..8].try_into().expect("8 bytes"));
            let rel = i32::from_be_bytes(chunk[8..12].try_into().expect("4 bytes"));
            if rel < 0 || ts < 0 {
                return Err(corrupt(format!(
                    "time index entry ({ts}, {rel}) out of range"
                )));
            }
            if let Some(&(prev_ts, prev_rel)) = entries.last() {
                if ts <= prev_ts || (rel as u32) < prev_rel {
                    return Err(corrupt(format!(
                        "time index entry ({ts}, {rel}) not increasing"
                    )));
                }
            }
            entries.push((ts, rel as u32));
        }
        Ok(TimeIndex {
            base_offset,
            file,
            entries,
            written: count,
            max_entries,
            mapped: None,
        })
    }

    pub fn entries(&self) -> usize {
        self.entries.len()
    }
    pub fn max_entries(&self) -> usize {
        self.max_entries
    }
    pub fn is_full(&self) -> bool {
        self.entries.len() >= self.max_entries
    }
    pub fn entry(&self, n: usize) -> TimestampOffset {
        let (timestamp, rel) = self.entries[n];
        TimestampOffset {
            timestamp,
            offset: self.base_offset + rel as i64,
        }
    }

    /// Kafka's `lastEntry`: (-1, base offset) when empty.
    pub fn last_entry(&self) -> TimestampOffset {
        match self.entries.len().checked_sub(1) {
            Some(n) => self.entry(n),
            None => TimestampOffset {
                timestamp: NO_TIMESTAMP,
                offset: self.base_offset,
            },
        }
    }

    /// Kafka's `maybeAppend`: adds (timestamp, offset) only if the timestamp
    /// is larger than the last entry's. `skip_full_check` is for the final
    /// entry written when the segment becomes inactive.
    pub fn maybe_append(&mut self, timestamp: i64, offset: i64, skip_full_check: bool) -> bool {
        if !skip_full_check && self.is_full() {
            return false;
        }
        let last = self.last_entry();
        let rel = offset - self.base_offset;
        if timestamp <= last.timestamp
            || offset < last.offset
            || !(0..=i32::MAX as i64).contains(&rel)
        {
            return false;
        }
        self.entries.push((timestamp, rel as u32));
        true
    }

    /// Kafka's `lookup`: the entry with the largest timestamp <= `target`,
    /// or (-1, base offset) when there is none.
    pub fn lookup(&self, target: i64) -> TimestampOffset {
        let n = self.entries.partition_point(|&(ts, _)| ts <= target);
        if n == 0 {
            TimestampOffset {
                timestamp: NO_TIMESTAMP,
                offset: self.base_offset,
            }
        } else {
            self.entry(n - 1)
        }
    }

    /// Removes every entry whose offset is >= `offset`.
    pub fn truncate_to(&mut self, offset: i64) -> io::Result<()> {
        let keep = if offset <= self.base_offset {
            0
        } else {
            let rel = (offset - self.base_offset).min(u32::MAX as i64) as u32;
            self.entries.partition_point(|&(_, r)| r < rel)
        };
        self.entries.truncate(keep);
        if self.written > keep {
            match &mut self.mapped {
                Some(m) => m.zero(
                    keep * TIME_INDEX_ENTRY_BYTES,
                    self.written * TIME_INDEX_ENTRY_BYTES,
                ),
                None => self.file.set_len((keep * TIME_INDEX_ENTRY_BYTES) as u64)?,
            }
            self.written = keep;
        }
        Ok(())
    }

    pub fn reset(&mut self) -> io::Result<()> {
        self.truncate_to(self.base_offset)
    }

    pub fn flush_pending(&mut self) -> io::Result<()> {
        if self.written == self.entries.len() {
            return Ok(());
        }
        let pending = &self.entries[self.written..];
        if let Some(m) = &mut self.mapped {
            for (n, &(ts, rel)) in pending.iter().enumerate() {
                m.write(
                    (self.written + n) * TIME_INDEX_ENTRY_BYTES,
                    &encode_entry(ts, rel),
                );
            }
            self.written = self.entries.len();
            return Ok(());
        }
        let mut raw = Vec::with_capacity(pending.len() * TIME_INDEX_ENTRY_BYTES);
        for &(ts, rel) in pending {
            raw.extend_from_slice(&encode_entry(ts, rel));
        }
        self.file
            .write_all_at(&raw, (self.written * TIME_INDEX_ENTRY_BYTES) as u64)?;
        self.written = self.entries.len();
        Ok(())
    }

    /// The segment became active: preallocate the file to the index's
    /// capacity and write entries through a mapping from now on.
    pub fn map_for_appends(&mut self) -> io::Result<()> {
        if self.mapped.is_some() {
            return Ok(());
        }
        self.flush_pending()?;
        self.mapped = Some(IndexMmap::map(
            self.file.file(),
            preallocated_bytes(self.max_entries),
        )?);
        Ok(())
    }

    /// The segment became inactive: pending entries written, the mapping
    /// dropped and the file trimmed to exactly its entries.
    pub fn unmap_and_trim(&mut self) -> io::Result<()> {
        let was_mapped = self.mapped.take().is_some();
        self.flush_pending()?;
        if was_mapped {
            self.file
                .set_len((self.written * TIME_INDEX_ENTRY_BYTES) as u64)?;
        }
        Ok(())
    }

    /// Copies new entries into the mapping while the segment is active.
    pub fn write_through(&mut self) {
        if self.mapped.is_some() {
            self.flush_pending()
                .expect("writing through the mapping does no I/O");
        }
    }

    pub fn sync(&mut self) -> io::Result<()> {
        self.flush_pending()?;
        self.file.sync_data()
    }

    pub fn file(&self) -> &DiskFile {
        &self.file
    }
}

/// Kafka's entry layout: timestamp i64 BE, relative offset i32 BE.
fn encode_entry(ts: i64, rel: u32) -> [u8; TIME_INDEX_ENTRY_BYTES] {
    let mut raw = [0u8; TIME_INDEX_ENTRY_BYTES];
    raw[..8].copy_from_slice(&ts.to_be_bytes());
    raw[8..].copy_from_slice(&(rel as i32).to_be_bytes());
    raw
}

/// The file's length while its segment is active (the mapping's size).
fn preallocated_bytes(max_entries: usize) -> usize {
    (max_entries + 1) * TIME_INDEX_ENTRY_BYTES
}

fn max_entries(max_index_size_bytes: u32) -> usize {
    (max_index_size_bytes as usize / TIME_INDEX_ENTRY_BYTES).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn append_lookup_truncate_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("0.timeindex");
        let f = DiskFile::open(&path, true).unwrap();
        let mut idx = TimeIndex::create(f, 50, 1200).unwrap();
        assert_eq!(
            idx.lookup(5),
            TimestampOffset {
                timestamp: -1,
                offset: 50
            }
        );
        assert!(idx.maybe_append(1000, 60, false));
        assert!(!idx.maybe_append(1000, 70, false), "timestamp must grow");
        assert!(idx.maybe_append(2000, 70, false));
        assert!(idx.maybe_append(3000, 80, false));
        assert_eq!(idx.lookup(999).offset, 50);
        assert_eq!(idx.lookup(1000).offset, 60);
        assert_eq!(idx.lookup(2500).offset, 70);
        assert_eq!(idx.lookup(i64::MAX).offset, 80);
        idx.flush_pending().unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(bytes.len(), 36);
        assert_eq!(&bytes[0..12], &[0, 0, 0, 0, 0, 0, 3, 0xe8, 0, 0, 0, 10]);
        idx.truncate_to(70).unwrap();
        assert_eq!(idx.entries(), 1);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 12);
        let f = DiskFile::open(&path, false).unwrap();
        let loaded = TimeIndex::load(f, 50, 1200).unwrap();
        assert_eq!(
            loaded.last_entry(),
            TimestampOffset {
                timestamp: 1000,
                offset: 60
            }
        );
    }

    #[test]
    fn malformed_file_is_rejected() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("0.timeindex");
        std::fs::write(&path, [0u8; 13]).unwrap();
        assert!(TimeIndex::load(DiskFile::open(&path, false).unwrap(), 0, 1200).is_err());
        std::fs::write(&path, [0u8; 24]).unwrap();
        assert!(TimeIndex::load(DiskFile::open(&path, false).unwrap(), 0, 1200).is_err());
    }
}
