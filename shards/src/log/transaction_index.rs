//! Kafka's `TransactionIndex`: the `<20-digit base offset>.txnindex` file
//! beside a segment, listing the aborted transactions whose abort marker is
//! in that segment, as 34-byte big-endian `AbortedTxn` entries (version i16
//! = 0, producer id i64, first offset i64, last offset i64, last stable
//! offset i64) in increasing last offset. A read_committed fetch collects
//! the entries overlapping its range to tell the consumer which records to
//! drop.
//!
//! Aborts are rare, so the entries are kept in memory and the file is only
//! appended to (with `pwrite`, not fsynced until the segment is); as in
//! Kafka, the file is created by the first append, so most segments have
//! none.

use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::segment::{segment_file_path, TXN_INDEX_FILE_SUFFIX};

/// Kafka's `AbortedTxn.CURRENT_VERSION`.
pub const ABORTED_TXN_VERSION: i16 = 0;
/// Kafka's `AbortedTxn.TOTAL_SIZE`.
pub const ABORTED_TXN_BYTES: usize = 2 + 8 + 8 + 8 + 8;

/// One aborted transaction (Kafka's `AbortedTxn`): its producer, its first
/// offset (possibly in an earlier segment), the offset of its abort marker,
/// and the last stable offset when it was aborted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AbortedTxn {
    pub producer_id: i64,
    pub first_offset: i64,
    pub last_offset: i64,
    pub last_stable_offset: i64,
}

impl AbortedTxn {
    pub fn encode(&self) -> [u8; ABORTED_TXN_BYTES] {
        let mut out = [0u8; ABORTED_TXN_BYTES];
        out[..2].copy_from_slice(&ABORTED_TXN_VERSION.to_be_bytes());
        out[2..10].copy_from_slice(&self.producer_id.to_be_bytes());
        out[10..18].copy_from_slice(&self.first_offset.to_be_bytes());
        out[18..26].copy_from_slice(&self.last_offset.to_be_bytes());
        out[26..34].copy_from_slice(&self.last_stable_offset.to_be_bytes());
        out
    }

    /// Decodes one entry; an unknown version is an error.
    pub fn decode(buf: &[u8; ABORTED_TXN_BYTES]) -> Result<AbortedTxn, String> {
        let version = i16::from_be_bytes([buf[0], buf[1]]);
        if version != ABORTED_TXN_VERSION {
            return Err(format!("aborted transaction version {version}"));
        }
        let at = |i: usize| i64::from_be_bytes(buf[i..i + 8].try_into().expect("8 bytes"));
        Ok(AbortedTxn {
            producer_id: at(2),
            first_offset: at(10),
            last_offset: at(18),
            last_stable_offset: at(26),
        })
    }
}

/// One segment's aborted transactions, in memory and in its file.
pub struct TransactionIndex {
    path: PathBuf,
    base_offset: i64,
    /// Increasing last offsets.
    entries: Vec<AbortedTxn>,
    /// None until the first append (or when the file was found missing).
    file: Option<Arc<File>>,
}

fn invalid_data(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

impl TransactionIndex {
    /// The empty index of a new segment; no file until an append.
    pub fn new(dir: &Path, base_offset: i64) -> TransactionIndex {
        TransactionIndex::with_path(
            segment_file_path(dir, base_offset, TXN_INDEX_FILE_SUFFIX),
            base_offset,
        )
    }

    /// An empty index to be written at `path` (the cleaner's `.cleaned`
    /// output).
    pub fn with_path(path: PathBuf, base_offset: i64) -> TransactionIndex {
        TransactionIndex {
            path,
            base_offset,
            entries: Vec::new(),
            file: None,
        }
    }

    /// Loads the segment's index if its file exists. A torn tail (a crash
    /// in the middle of an append: a partial entry, zeros where the file
    /// grew before its data landed, a bad last entry) is cut off the file.
    /// Any other entry of an unknown version, with last offsets out of
    /// order, below the segment's base offset (Kafka's `sanityCheck`) or
    /// ending before it starts is `InvalidData`: the caller decides (a
    /// segment discards the index, see `load_for_segment`).
    pub fn open(dir: &Path, base_offset: i64) -> io::Result<TransactionIndex> {
        let mut index = TransactionIndex::new(dir, base_offset);
        let mut file = match OpenOptions::new().read(true).write(true).open(&index.path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(index),
            Err(e) => return Err(e),
        };
        let mut raw = Vec::new();
        file.read_to_end(&mut raw)?;
        let mut count = raw.len() / ABORTED_TXN_BYTES;
        // Zeros at the end are appends whose data never landed: a real
        // entry's marker comes after its first offset, so is never 0.
        while count > 0 && entry_bytes(&raw, count - 1).iter().all(|&b| b == 0) {
            count -= 1;
        }
        for i in 0..count {
            match index.check_entry(entry_bytes(&raw, i)) {
                Ok(e) => index.entries.push(e),
                // Only the last append can have been torn.
                Err(m) if i + 1 == count => {
                    log::warn!("{}: dropping torn last entry: {m}", index.path.display());
                }
                Err(m) => return Err(invalid_data(format!("{}: {m}", index.path.display()))),
            }
        }
        let kept_bytes = (index.entries.len() * ABORTED_TXN_BYTES) as u64;
        if kept_bytes != raw.len() as u64 {
            log::warn!(
                "{}: cutting a torn tail of {} bytes",
                index.path.display(),
                raw.len() as u64 - kept_bytes
            );
            file.set_len(kept_bytes)?;
        }
        index.file = Some(Arc::new(file));
        Ok(index)
    }

    /// Decodes an entry that may follow the entries loaded so far: what
    /// `append` would have accepted, at or past the segment's base offset.
    fn check_entry(&self, raw: &[u8; ABORTED_TXN_BYTES]) -> Result<AbortedTxn, String> {
        let e = AbortedTxn::decode(raw)?;
        let last = self.last_offset();
        if e.last_offset < self.base_offset
            || e.first_offset > e.last_offset
            || last.is_some_and(|l| l >= e.last_offset)
        {
            return Err(format!(
                "bad entry {e:?} (base offset {}, previous last offset {last:?})",
                self.base_offset
            ));
        }
        Ok(e)
    }

    /// Adds an aborted transaction whose marker is at `txn.last_offset`,
    /// after every entry already there (Kafka throws otherwise), creating
    /// the file if needed. Not fsynced (see `sync`).
    pub fn append(&mut self, txn: AbortedTxn) -> io::Result<()> {
        assert!(
            txn.first_offset <= txn.last_offset,
            "aborted transaction {txn:?} ends before it starts"
        );
        if let Some(last) = self.last_offset() {
            assert!(
                txn.last_offset > last,
                "aborted transaction {txn:?} at or before the last entry's offset {last} in {}",
                self.path.display()
            );
        }
        let position = (self.entries.len() * ABORTED_TXN_BYTES) as u64;
        let file = match &self.file {
            Some(f) => f,
            None => {
                debug_assert!(self.entries.is_empty());
                // No file means no entries: anything at the path is stale.
                let f = OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create(true)
                    .truncate(true)
                    .open(&self.path)?;
                self.file.insert(Arc::new(f))
            }
        };
        file.write_all_at(&txn.encode(), position)?;
        self.entries.push(txn);
        Ok(())
    }

    /// Kafka's `collectAbortedTxns`: adds to `out` the entries overlapping
    /// [fetch_offset, upper_bound_offset) and returns true (later segments
    /// need no search) at the first entry whose last stable offset reaches
    /// `upper_bound_offset`: every transaction overlapping the range was
    /// decided before it, so its marker is in this segment or earlier.
    pub fn collect_aborted(
        &self,
        fetch_offset: i64,
        upper_bound_offset: i64,
        out: &mut Vec<AbortedTxn>,
    ) -> bool {
        for e in &self.entries {
            if e.last_offset >= fetch_offset && e.first_offset < upper_bound_offset {
                out.push(*e);
            }
            if e.last_stable_offset >= upper_bound_offset {
                return true;
            }
        }
        false
    }

    /// Drops the entries whose marker is at or after `offset` (Kafka's
    /// `truncateTo`), from memory and the file.
    pub fn truncate_to(&mut self, offset: i64) -> io::Result<()> {
        let keep = self.entries.partition_point(|e| e.last_offset < offset);
        if keep == self.entries.len() {
            return Ok(());
        }
        if let Some(f) = &self.file {
            f.set_len((keep * ABORTED_TXN_BYTES) as u64)?;
        }
        self.entries.truncate(keep);
        Ok(())
    }

    /// Drops every entry (Kafka's `reset`).
    pub fn reset(&mut self) -> io::Result<()> {
        self.truncate_to(i64::MIN)
    }

    /// fdatasync of the file, if there is one.
    pub fn sync(&self) -> io::Result<()> {
        match &self.file {
            Some(f) => f.sync_data(),
            None => Ok(()),
        }
    }

    /// The open file, for a background fsync (`LogSegment::detach_sync`).
    pub fn shared_file(&self) -> Option<Arc<File>> {
        self.file.clone()
    }

    /// Removes the file if it exists.
    pub fn delete(self) -> io::Result<()> {
        remove_if_exists(&self.path)
    }

    /// Kafka's `renameTo`: moves the file, if there is one, and names the
    /// index `path` from now on either way (the cleaner's `.cleaned` to
    /// `.swap` to final names).
    pub fn rename_to(&mut self, path: PathBuf) -> io::Result<()> {
        if self.file.is_some() {
            std::fs::rename(&self.path, &path)?;
        }
        self.path = path;
        Ok(())
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
    pub fn base_offset(&self) -> i64 {
        self.base_offset
    }
    pub fn entries(&self) -> &[AbortedTxn] {
        &self.entries
    }
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
    /// The last entry's marker offset.
    pub fn last_offset(&self) -> Option<i64> {
        self.entries.last().map(|e| e.last_offset)
    }
}

fn entry_bytes(raw: &[u8], i: usize) -> &[u8; ABORTED_TXN_BYTES] {
    raw[i * ABORTED_TXN_BYTES..(i + 1) * ABORTED_TXN_BYTES]
        .try_into()
        .expect("whole entry")
}

fn remove_if_exists(path: &Path) -> io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// A segment's index on open: a corrupt file (see `open`) is logged and
/// emptied, so the segment opens without the aborted transactions it
/// listed (Kafka would rebuild the index while recovering the segment).
pub(super) fn load_for_segment(dir: &Path, base_offset: i64) -> io::Result<TransactionIndex> {
    match TransactionIndex::open(dir, base_offset) {
        Ok(index) => Ok(index),
        Err(e) if e.kind() == io::ErrorKind::InvalidData => {
            log::error!("discarding the transaction index of segment {base_offset}: {e}");
            let index = TransactionIndex::new(dir, base_offset);
            remove_if_exists(index.path())?;
            Ok(index)
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
#[path = "transaction_index_tests.rs"]
mod tests;
