//! Kafka's `TimeIndex`: a sparse map from timestamps to offsets in one
//! segment. The file is a run of 12-byte entries (timestamp i64 BE, relative
//! offset i32 BE); timestamps strictly increase, offsets never decrease. As
//! with the offset index, entries are kept in memory and reach the file as
//! `index_file` says.

use std::io;

use super::batch::NO_TIMESTAMP;
use super::index_file::{self, IndexFile};
use super::segment::DiskFile;

pub const TIME_INDEX_ENTRY_BYTES: usize = 12;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimestampOffset {
    pub timestamp: i64,
    pub offset: i64,
}

pub struct TimeIndex {
    base_offset: i64,
    file: IndexFile,
    /// (timestamp, relative offset) pairs.
    entries: Vec<(i64, u32)>,
    max_entries: usize,
}

fn corrupt(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

impl TimeIndex {
    pub fn create(file: DiskFile, base_offset: i64, max_index_size_bytes: u32) -> io::Result<Self> {
        file.set_len(0)?;
        Ok(TimeIndex {
            base_offset,
            file: IndexFile::new(file, TIME_INDEX_ENTRY_BYTES, 0),
            entries: Vec::new(),
            max_entries: max_entries(max_index_size_bytes),
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
        let raw = index_file::read_entries(
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
            file: IndexFile::new(file, TIME_INDEX_ENTRY_BYTES, count),
            entries,
            max_entries,
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
        let entries = &self.entries;
        self.file
            .truncate(keep, |n, out| encode_entry(entries[n], out))
    }

    pub fn reset(&mut self) -> io::Result<()> {
        self.truncate_to(self.base_offset)
    }

    /// Writes every entry not yet in the file, here and now.
    pub fn flush_pending(&mut self) -> io::Result<()> {
        let entries = &self.entries;
        self.file
            .write_pending(entries.len(), |n, out| encode_entry(entries[n], out))
    }

    /// The segment became active: the file preallocated to the index's
    /// capacity, new entries written behind (`index_file`).
    pub fn map_for_appends(&mut self) -> io::Result<()> {
        let entries = &self.entries;
        self.file.activate(
            entries.len(),
            preallocated_bytes(self.max_entries) as u64,
            |n, out| encode_entry(entries[n], out),
        )
    }

    /// The segment became inactive (a roll): its last entries and the
    /// file's trim queued for the `index-writes` thread.
    pub fn deactivate_queued(&mut self) {
        let entries = &self.entries;
        self.file
            .deactivate_queued(entries.len(), |n, out| encode_entry(entries[n], out))
    }

    /// The segment became inactive, here and now: every entry written and
    /// the file trimmed to exactly them.
    pub fn unmap_and_trim(&mut self) -> io::Result<()> {
        let entries = &self.entries;
        self.file
            .deactivate_now(entries.len(), |n, out| encode_entry(entries[n], out))
    }

    /// Queues new entries while the segment is active (no system call).
    pub fn write_through(&mut self) {
        let entries = &self.entries;
        self.file
            .queue_pending(entries.len(), |n, out| encode_entry(entries[n], out))
    }

    /// Entries are (or were) written behind: see `IndexFile::written_behind`.
    pub fn written_behind(&self) -> bool {
        self.file.written_behind()
    }

    /// Before a background fsync: see `IndexFile::flush_unless_behind`.
    pub fn flush_unless_behind(&mut self) -> io::Result<()> {
        let entries = &self.entries;
        self.file
            .flush_unless_behind(entries.len(), |n, out| encode_entry(entries[n], out))
    }

    /// Every entry to the file, then fsync.
    pub fn sync(&mut self) -> io::Result<()> {
        let entries = &self.entries;
        self.file
            .sync(entries.len(), |n, out| encode_entry(entries[n], out))
    }

    pub fn file(&self) -> &DiskFile {
        self.file.file()
    }
}

/// Kafka's entry layout: timestamp i64 BE, relative offset i32 BE.
fn encode_entry((ts, rel): (i64, u32), out: &mut [u8]) {
    out[..8].copy_from_slice(&ts.to_be_bytes());
    out[8..TIME_INDEX_ENTRY_BYTES].copy_from_slice(&(rel as i32).to_be_bytes());
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
