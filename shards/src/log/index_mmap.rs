//! The active segment's index file mapped writable, as Kafka's
//! `AbstractIndex` keeps it: the file is preallocated (sparse) to its
//! capacity and entries are copied into the shared mapping as they are
//! appended, so the on-disk index (what `kafka-dump-log` and a restart
//! read) is as current as the log without a system call per entry. When the
//! segment becomes inactive the mapping goes and the file is trimmed to its
//! entries. Pages dirtied through the mapping are in the page cache, so
//! `fdatasync` on the file persists them.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::ptr::NonNull;

pub struct IndexMmap {
    base: NonNull<u8>,
    len_bytes: usize,
}

impl IndexMmap {
    /// Preallocates `file` to `len_bytes` and maps it shared, read-write.
    pub fn map(file: &File, len_bytes: usize) -> io::Result<IndexMmap> {
        assert!(len_bytes > 0, "empty index mapping");
        file.set_len(len_bytes as u64)?;
        // SAFETY: a fresh shared mapping of a file we hold open; the kernel
        // picks the address. Only this value reads or writes through it.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len_bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base = NonNull::new(ptr.cast::<u8>()).expect("mmap returned null");
        Ok(IndexMmap { base, len_bytes })
    }

    /// Copies `bytes` to `position`; the index never writes past its
    /// capacity, so an overflow is a bug, not an input error.
    pub fn write(&mut self, position: usize, bytes: &[u8]) {
        assert!(
            position + bytes.len() <= self.len_bytes,
            "index write {position}+{} past the mapping ({})",
            bytes.len(),
            self.len_bytes
        );
        // SAFETY: in bounds (asserted); the mapping lives as long as self.
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                self.base.as_ptr().add(position),
                bytes.len(),
            )
        }
    }

    /// Zeroes `[from, to)`: truncated entries read as the end of the index.
    pub fn zero(&mut self, from: usize, to: usize) {
        assert!(from <= to && to <= self.len_bytes, "zero {from}..{to}");
        // SAFETY: in bounds (asserted).
        unsafe { std::ptr::write_bytes(self.base.as_ptr().add(from), 0, to - from) }
    }
}

// SAFETY: the mapping is this value's alone (nothing else holds its
// address), so moving it to another thread moves sole access with it; a
// new log's files are mapped off the shard and handed to it.
unsafe impl Send for IndexMmap {}

impl Drop for IndexMmap {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the region `map` created.
        unsafe {
            libc::munmap(self.base.as_ptr().cast(), self.len_bytes);
        }
    }
}

/// Reads an index file's entries. An active segment's file is preallocated
/// to `preallocated_bytes` (its capacity), so after a crash its entries are
/// followed by zeros: for a file of exactly that length, only the bytes
/// before the first hole are read (a preallocated file is sparse; written
/// pages come first) and trailing all-zero entries are dropped, since
/// neither index ever writes an all-zero entry (a segment's first batch is
/// never indexed). The file is then trimmed to its entries, as Kafka trims
/// an index when its segment becomes inactive. Any other file is read whole
/// and left to the caller's checks. Returns whole entries only.
pub fn read_entries(
    file: &super::segment::DiskFile,
    entry_bytes: usize,
    preallocated_bytes: usize,
) -> io::Result<Vec<u8>> {
    let len_bytes = file.file_len()?;
    let whole = len_bytes - len_bytes % entry_bytes as u64;
    let preallocated = len_bytes == preallocated_bytes as u64;
    let read_bytes = if preallocated {
        // Round up to whole entries: an entry may straddle the hole's page.
        let data_end = first_hole(file.file(), whole)?.min(whole);
        data_end.div_ceil(entry_bytes as u64) * entry_bytes as u64
    } else {
        whole
    };
    let mut raw = vec![0u8; read_bytes.min(whole) as usize];
    file.read_exact_at(&mut raw, 0)?;
    if preallocated {
        let mut entries_len = raw.len();
        while entries_len >= entry_bytes
            && raw[entries_len - entry_bytes..entries_len]
                .iter()
                .all(|&b| b == 0)
        {
            entries_len -= entry_bytes;
        }
        raw.truncate(entries_len);
        file.set_len(entries_len as u64)?;
    }
    Ok(raw)
}
/// The offset of the first hole at or after 0, or `len_bytes` when the file
/// system cannot tell (every byte is then read).
fn first_hole(file: &File, len_bytes: u64) -> io::Result<u64> {
    if len_bytes == 0 {
        return Ok(0);
    }
    // SAFETY: lseek on a descriptor we hold; it only moves the offset,
    // which positional reads and writes (pread/pwrite) never use.
    let hole = unsafe { libc::lseek(file.as_raw_fd(), 0, libc::SEEK_HOLE) };
    if hole < 0 {
        return Ok(len_bytes);
    }
    Ok(hole as u64)
}
