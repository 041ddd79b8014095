//! Kafka's `OffsetIndex`: a sparse map from offsets to byte positions in one
//! segment's `.log`. The file is a run of 8-byte entries (relative offset i32
//! BE, position i32 BE), both strictly increasing. Entries live in memory; the
//! file receives them as `index_file` says (written behind while the segment
//! is active, on flush otherwise).

use std::io;

use super::index_file::{self, IndexFile};
use super::segment::DiskFile;

pub const OFFSET_INDEX_ENTRY_BYTES: usize = 8;

/// One index entry with the offset made absolute again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OffsetPosition {
    pub offset: i64,
    pub position: u32,
}

pub struct OffsetIndex {
    base_offset: i64,
    file: IndexFile,
    /// (relative offset, position) pairs.
    entries: Vec<(u32, u32)>,
    max_entries: usize,
}

fn corrupt(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

impl OffsetIndex {
    /// A new, empty index over a freshly truncated file.
    pub fn create(file: DiskFile, base_offset: i64, max_index_size_bytes: u32) -> io::Result<Self> {
        file.set_len(0)?;
        Ok(OffsetIndex {
            base_offset,
            file: IndexFile::new(file, OFFSET_INDEX_ENTRY_BYTES, 0),
            entries: Vec::new(),
            max_entries: max_entries(max_index_size_bytes),
        })
    }

    /// Loads and sanity-checks an existing index file. `log_size_bytes`
    /// bounds the positions. An `InvalidData` error means "rebuild me".
    pub fn load(
        file: DiskFile,
        base_offset: i64,
        max_index_size_bytes: u32,
        log_size_bytes: u64,
    ) -> io::Result<Self> {
        let len = file.file_len()?;
        let max_entries = max_entries(max_index_size_bytes);
        if len % OFFSET_INDEX_ENTRY_BYTES as u64 != 0 {
            return Err(corrupt(format!(
                "offset index size {len} is not a multiple of 8"
            )));
        }
        if len / OFFSET_INDEX_ENTRY_BYTES as u64 > max_entries as u64 {
            return Err(corrupt(format!(
                "offset index of {len} bytes holds more than {max_entries} entries"
            )));
        }
        let raw = index_file::read_entries(
            &file,
            OFFSET_INDEX_ENTRY_BYTES,
            preallocated_bytes(max_entries),
        )?;
        let count = raw.len() / OFFSET_INDEX_ENTRY_BYTES;
        let mut entries = Vec::with_capacity(count);
        for chunk in raw.chunks_exact(OFFSET_INDEX_ENTRY_BYTES) {
            let rel = i32::from_be_bytes(chunk[0..4].try_into().expect("4 bytes"));
            let pos = i32::from_be_bytes(chunk[4..8].try_into().expect("4 bytes"));
            if rel < 0 || pos < 0 || pos as u64 >= log_size_bytes.max(1) {
                return Err(corrupt(format!(
                    "offset index entry ({rel}, {pos}) out of range"
                )));
            }
            if let Some(&(prev_rel, prev_pos)) = entries.last() {
                if rel as u32 <= prev_rel || pos as u32 <= prev_pos {
                    return Err(corrupt(format!(
                        "offset index entry ({rel}, {pos}) not increasing"
                    )));
                }
            }
            entries.push((rel as u32, pos as u32));
        }
        if !entries.is_empty() && log_size_bytes == 0 {
            return Err(corrupt(
                "offset index has entries but the log is empty".into(),
            ));
        }
        Ok(OffsetIndex {
            base_offset,
            file: IndexFile::new(file, OFFSET_INDEX_ENTRY_BYTES, count),
            entries,
            max_entries,
        })
    }

    pub fn base_offset(&self) -> i64 {
        self.base_offset
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
    pub fn entry(&self, n: usize) -> OffsetPosition {
        let (rel, position) = self.entries[n];
        OffsetPosition {
            offset: self.base_offset + rel as i64,
            position,
        }
    }
    pub fn last_entry(&self) -> Option<OffsetPosition> {
        self.entries.len().checked_sub(1).map(|n| self.entry(n))
    }
    /// Kafka's `canAppendOffset`: fits an i32 relative offset.
    pub fn can_append_offset(&self, offset: i64) -> bool {
        let rel = offset - self.base_offset;
        (0..=i32::MAX as i64).contains(&rel)
    }

    /// Adds an entry. Offsets and positions must grow; a full index or an
    /// offset that does not fit is refused (the caller rolls before that).
    pub fn append(&mut self, offset: i64, position: u32) -> bool {
        if self.is_full() || !self.can_append_offset(offset) || position > i32::MAX as u32 {
            return false;
        }
        let rel = (offset - self.base_offset) as u32;
        if let Some(&(last_rel, last_pos)) = self.entries.last() {
            if rel <= last_rel || position <= last_pos {
                return false;
            }
        }
        self.entries.push((rel, position));
        true
    }

    /// Kafka's `lookup`: the entry with the largest offset <= `target`, or
    /// (base offset, 0) when there is none.
    pub fn lookup(&self, target: i64) -> OffsetPosition {
        let rel = target - self.base_offset;
        if rel < 0 {
            return self.start();
        }
        let rel = rel.min(u32::MAX as i64) as u32;
        let n = self.entries.partition_point(|&(r, _)| r <= rel);
        if n == 0 {
            self.start()
        } else {
            self.entry(n - 1)
        }
    }

    /// The entry with the largest position <= `position`, or (base, 0).
    pub fn lookup_by_position(&self, position: u64) -> OffsetPosition {
        let n = self.entries.partition_point(|&(_, p)| p as u64 <= position);
        if n == 0 {
            self.start()
        } else {
            self.entry(n - 1)
        }
    }

    fn start(&self) -> OffsetPosition {
        OffsetPosition {
            offset: self.base_offset,
            position: 0,
        }
    }

    /// Removes every entry with offset >= `offset` (Kafka's `truncateTo`).
    pub fn truncate_to(&mut self, offset: i64) -> io::Result<()> {
        let keep = if offset <= self.base_offset {
            0
        } else {
            let rel = (offset - self.base_offset).min(u32::MAX as i64) as u32;
            self.entries.partition_point(|&(r, _)| r < rel)
        };
        self.entries.truncate(keep);
        let entries = &self.entries;
        self.file
            .truncate(keep, |n, out| encode_entry(entries[n], out))
    }

    /// Drops all entries (recovery rebuilds from scratch).
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

/// Kafka's entry layout: relative offset i32 BE, position i32 BE.
fn encode_entry((rel, pos): (u32, u32), out: &mut [u8]) {
    out[..4].copy_from_slice(&(rel as i32).to_be_bytes());
    out[4..OFFSET_INDEX_ENTRY_BYTES].copy_from_slice(&(pos as i32).to_be_bytes());
}

/// The file's length while its segment is active (the mapping's size).
fn preallocated_bytes(max_entries: usize) -> usize {
    max_entries * OFFSET_INDEX_ENTRY_BYTES
}

fn max_entries(max_index_size_bytes: u32) -> usize {
    (max_index_size_bytes as usize / OFFSET_INDEX_ENTRY_BYTES).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index(dir: &std::path::Path, max_bytes: u32) -> OffsetIndex {
        let f = DiskFile::open(&dir.join("0.index"), true).unwrap();
        OffsetIndex::create(f, 100, max_bytes).unwrap()
    }

    #[test]
    fn lookup_is_greatest_lower_bound() {
        let dir = tempfile::tempdir().unwrap();
        let mut idx = index(dir.path(), 1024);
        assert_eq!(
            idx.lookup(150),
            OffsetPosition {
                offset: 100,
                position: 0
            }
        );
        for i in 1..=10u32 {
            assert!(idx.append(100 + i as i64 * 10, i * 1000));
        }
        assert_eq!(idx.lookup(99).position, 0);
        assert_eq!(idx.lookup(109).position, 0);
        assert_eq!(idx.lookup(110).position, 1000);
        assert_eq!(idx.lookup(155).position, 5000);
        assert_eq!(idx.lookup(i64::MAX).position, 10000);
        assert_eq!(idx.lookup_by_position(4999).position, 4000);
        assert!(!idx.append(150, 20000), "offsets must grow");
        idx.truncate_to(150).unwrap();
        assert_eq!(idx.entries(), 4);
        assert_eq!(idx.last_entry().unwrap().offset, 140);
    }

    #[test]
    fn file_round_trip_and_full() {
        let dir = tempfile::tempdir().unwrap();
        let mut idx = index(dir.path(), 32);
        assert_eq!(idx.max_entries(), 4);
        for i in 1..=4u32 {
            assert!(idx.append(100 + i as i64, i * 10));
        }
        assert!(idx.is_full());
        assert!(!idx.append(200, 100));
        idx.flush_pending().unwrap();
        let bytes = std::fs::read(dir.path().join("0.index")).unwrap();
        assert_eq!(bytes.len(), 32);
        assert_eq!(&bytes[0..8], &[0, 0, 0, 1, 0, 0, 0, 10]);
        let f = DiskFile::open(&dir.path().join("0.index"), false).unwrap();
        let loaded = OffsetIndex::load(f, 100, 32, 1000).unwrap();
        assert_eq!(loaded.entries(), 4);
        assert_eq!(loaded.lookup(103).position, 30);
        // Positions past the log end mean the index is stale.
        let f = DiskFile::open(&dir.path().join("0.index"), false).unwrap();
        assert!(OffsetIndex::load(f, 100, 32, 30).is_err());
    }

    #[test]
    fn malformed_file_is_rejected() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("0.index");
        std::fs::write(&path, [0u8; 12]).unwrap();
        let f = DiskFile::open(&path, false).unwrap();
        assert!(OffsetIndex::load(f, 0, 1024, 100).is_err());
        // A preallocated (zero-filled) Kafka index is not increasing.
        std::fs::write(&path, [0u8; 16]).unwrap();
        let f = DiskFile::open(&path, false).unwrap();
        assert!(OffsetIndex::load(f, 0, 1024, 100).is_err());
    }
}
