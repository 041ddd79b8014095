//! The write path of `log.io.mode=direct`: the active segment's `.log` is
//! written through a second descriptor opened with `O_DIRECT`, from an
//! aligned write-behind buffer, so appends bypass the page cache.
//!
//! What direct mode does and does not change, in this version:
//! - Fetch reads bypass the page cache too: a direct-mode
//!   [`crate::log::FileSlice`] is served from the shard's
//!   [`crate::log::read_cache::ReadCache`] (glommio DMA reads) instead of
//!   sendfile(2). Other reads (index rebuild, recovery, timestamp lookups)
//!   use the segment's normal buffered descriptor; the kernel keeps the
//!   page cache coherent with `O_DIRECT` writes to the same inode.
//! - Two write paths share this state. Synchronous `pwrite`s on the shard
//!   thread ([`DirectWriter::write_at`]) serve followers and the group
//!   coordinator. Produce appends are staged instead and written
//!   asynchronously through io_uring by [`crate::log::direct_write`], which
//!   asks this writer for the tail block to rewrite
//!   ([`DirectWriter::plan_async`]) and reports what landed
//!   ([`DirectWriter::async_written`]).
//! - An append copies its bytes into the aligned buffer, writes the full
//!   blocks, and also writes the partial tail block padded with zeros, so
//!   every appended byte is in the file (and visible to readers) when the
//!   append returns. The tail block stays in memory and the next append
//!   rewrites it completed; the bytes already visible are rewritten
//!   unchanged.
//! - The zero padding can make the file longer than the log. Readers never
//!   look past the segment's logical size; the padding is cut (ftruncate)
//!   before every fsync and when the segment becomes inactive or the log is
//!   closed, so a flushed or cleanly closed segment has its exact length and
//!   reopens without a scan. After a crash, recovery sees the padding as an
//!   invalid batch and truncates it like any other torn tail.
//! - Index files and fsync policy are unchanged (fdatasync on the direct
//!   descriptor).

use std::alloc::{self, Layout};
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::ptr::NonNull;

/// `O_DIRECT` alignment of buffer addresses, file offsets and lengths.
/// 4096 covers the logical block size of every common device.
pub const DIRECT_BLOCK_BYTES: usize = 4096;

/// The write-behind buffer: large appends are written in chunks of this.
pub const DIRECT_BUFFER_BYTES: usize = 256 * 1024;

const _: () = assert!(DIRECT_BUFFER_BYTES.is_multiple_of(DIRECT_BLOCK_BYTES));

fn align_down(n: u64) -> u64 {
    n & !(DIRECT_BLOCK_BYTES as u64 - 1)
}

fn align_up(n: usize) -> usize {
    n.div_ceil(DIRECT_BLOCK_BYTES) * DIRECT_BLOCK_BYTES
}

/// A zeroed, block-aligned heap buffer (a `Vec<u8>` gives no alignment).
struct AlignedBuf {
    ptr: NonNull<u8>,
    layout: Layout,
}

impl AlignedBuf {
    fn new(size_bytes: usize) -> AlignedBuf {
        let layout = Layout::from_size_align(size_bytes, DIRECT_BLOCK_BYTES)
            .expect("valid direct buffer layout");
        assert!(layout.size() > 0);
        // SAFETY: the layout has a non-zero size.
        let raw = unsafe { alloc::alloc_zeroed(layout) };
        let Some(ptr) = NonNull::new(raw) else {
            alloc::handle_alloc_error(layout)
        };
        AlignedBuf { ptr, layout }
    }

    fn as_slice(&self) -> &[u8] {
        // SAFETY: `ptr` owns `layout.size()` initialized (zeroed) bytes.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.layout.size()) }
    }

    fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, and `&mut self` makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.layout.size()) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this exact layout.
        unsafe { alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

// SAFETY: AlignedBuf uniquely owns its allocation, like a Box<[u8]>, and
// only hands out slices borrowed from `&self`/`&mut self`.
unsafe impl Send for AlignedBuf {}
// SAFETY: as above; shared access is read-only.
unsafe impl Sync for AlignedBuf {}

/// The `O_DIRECT` appender of one `.log` file. Writes must be sequential;
/// a write anywhere else (after a truncation, a failed write, or on a
/// reopened segment) first reloads the tail block from the file.
pub struct DirectWriter {
    file: File,
    buf: AlignedBuf,
    /// File offset of `buf[0]`, block aligned; meaningful only if `positioned`.
    buf_pos: u64,
    /// Log bytes in `buf`; the logical end of the file is `buf_pos + len`.
    len: usize,
    positioned: bool,
    /// The physical file length, as far as our own writes and truncations
    /// tell; None until the next reposition asks the file.
    known_file_len: Option<u64>,
    /// A padded tail block extended the file past its logical end.
    padded_past_eof: bool,
    /// The same file opened by glommio for asynchronous writes, once the
    /// first one has run (see `crate::log::direct_write`).
    pub(crate) dma: Option<std::rc::Rc<glommio::io::DmaFile>>,
}

/// The error for a filesystem that refuses `O_DIRECT` (tmpfs, some FUSE).
fn unsupported(path: &Path, e: io::Error) -> io::Error {
    io::Error::new(
        io::ErrorKind::Unsupported,
        format!(
            "{}: direct I/O (O_DIRECT, {DIRECT_BLOCK_BYTES}-byte alignment) is unsupported on this filesystem \
             (log.io.mode=direct); use log.io.mode=buffered or another filesystem: {e}",
            path.display()
        ),
    )
}

fn is_einval(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::EINVAL)
}

impl DirectWriter {
    /// Opens `path` (which must exist) for `O_DIRECT` writes. EINVAL, the
    /// answer of filesystems without direct I/O, becomes `Unsupported`.
    pub fn open(path: &Path) -> io::Result<DirectWriter> {
        let file = OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_DIRECT)
            .open(path)
            .map_err(|e| {
                if is_einval(&e) {
                    unsupported(path, e)
                } else {
                    e
                }
            })?;
        Ok(DirectWriter {
            file,
            buf: AlignedBuf::new(DIRECT_BUFFER_BYTES),
            buf_pos: 0,
            len: 0,
            positioned: false,
            known_file_len: None,
            padded_past_eof: false,
            dma: None,
        })
    }

    /// One past the last byte written, if positioned.
    /// Where the partial tail block starts: bytes before it are on disk and
    /// no append writes them again (a write in flight starts there too).
    pub fn settled_end(&self) -> Option<u64> {
        self.positioned.then_some(self.buf_pos)
    }

    pub fn logical_end(&self) -> Option<u64> {
        self.positioned.then_some(self.buf_pos + self.len as u64)
    }

    /// The file was truncated or extended to `len_bytes` by someone else:
    /// forget the buffered tail (the next write reloads it).
    pub fn file_resized(&mut self, len_bytes: u64) {
        self.positioned = false;
        self.known_file_len = Some(len_bytes);
        self.padded_past_eof = false;
    }

    /// Loads the partial block before `pos` from `reader` so writes can
    /// continue at `pos`.
    fn reposition(&mut self, pos: u64, reader: &File, path: &Path) -> io::Result<()> {
        let file_len = match self.known_file_len {
            Some(n) => n,
            None => reader.metadata()?.len(),
        };
        if pos > file_len {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{}: direct write at {pos} past the end {file_len}",
                    path.display()
                ),
            ));
        }
        let base = align_down(pos);
        let head = (pos - base) as usize;
        reader.read_exact_at(&mut self.buf.as_mut_slice()[..head], base)?;
        self.buf_pos = base;
        self.len = head;
        self.known_file_len = Some(file_len);
        self.positioned = true;
        Ok(())
    }

    /// Writes `buf[..len_bytes]` (block multiple) at `buf_pos`.
    fn write_blocks(&mut self, len_bytes: usize, path: &Path) -> io::Result<()> {
        // O_DIRECT's contract; the kernel would answer EINVAL, which reads
        // as "unsupported filesystem" and hides the bug.
        assert!(
            len_bytes.is_multiple_of(DIRECT_BLOCK_BYTES) && len_bytes <= DIRECT_BUFFER_BYTES,
            "direct write of {len_bytes} bytes"
        );
        assert!(
            self.buf_pos.is_multiple_of(DIRECT_BLOCK_BYTES as u64),
            "direct write at {}",
            self.buf_pos
        );
        let data = &self.buf.as_slice()[..len_bytes];
        self.file.write_all_at(data, self.buf_pos).map_err(|e| {
            if is_einval(&e) {
                unsupported(path, e)
            } else {
                e
            }
        })?;
        let end = self.buf_pos + len_bytes as u64;
        if end > self.known_file_len.unwrap_or(0) {
            self.known_file_len = Some(end);
            self.padded_past_eof = end > self.buf_pos + self.len as u64;
        }
        Ok(())
    }

    /// Appends `data` at `pos` and writes it out before returning: full
    /// blocks as they fill, then the partial tail block padded with zeros.
    /// `reader` is the file's buffered descriptor, used to reload the tail
    /// block when `pos` is not where the last write ended.
    pub fn write_at(
        &mut self,
        data: &[u8],
        pos: u64,
        reader: &File,
        path: &Path,
    ) -> io::Result<()> {
        if self.logical_end() != Some(pos) {
            self.reposition(pos, reader, path)?;
        }
        let result = self.write_through(data, path);
        if result.is_err() {
            // The file may hold part of this write: reload before the next one.
            self.positioned = false;
            self.known_file_len = None;
        }
        result
    }

    fn write_through(&mut self, mut data: &[u8], path: &Path) -> io::Result<()> {
        while !data.is_empty() {
            let n = data.len().min(DIRECT_BUFFER_BYTES - self.len);
            self.buf.as_mut_slice()[self.len..self.len + n].copy_from_slice(&data[..n]);
            self.len += n;
            data = &data[n..];
            if self.len == DIRECT_BUFFER_BYTES {
                self.write_blocks(DIRECT_BUFFER_BYTES, path)?;
                self.buf_pos += DIRECT_BUFFER_BYTES as u64;
                self.len = 0;
            }
        }
        if self.len == 0 {
            return Ok(());
        }
        let padded = align_up(self.len);
        self.buf.as_mut_slice()[self.len..padded].fill(0);
        self.write_blocks(padded, path)?;
        // Keep only the partial tail block; it is rewritten by the next append.
        let full = self.len / DIRECT_BLOCK_BYTES * DIRECT_BLOCK_BYTES;
        if full > 0 {
            self.buf.as_mut_slice().copy_within(full..self.len, 0);
            self.buf_pos += full as u64;
            self.len -= full;
        }
        // Pairs with `plan_async` and `reposition`: between writes the
        // buffer holds only the partial block at the logical end.
        assert!(self.len < DIRECT_BLOCK_BYTES);
        Ok(())
    }

    /// For an asynchronous write of new bytes at `pos` (the logical end):
    /// the block-aligned file position to write at and the bytes of the
    /// partial block before `pos`, which the write must repeat.
    pub fn plan_async(&mut self, pos: u64, reader: &File, path: &Path) -> io::Result<(u64, &[u8])> {
        if self.logical_end() != Some(pos) {
            self.reposition(pos, reader, path)?;
        }
        // The head is the partial block before `pos`, starting on a block
        // boundary; `async_written` checks the other side of the write.
        assert!(self.buf_pos.is_multiple_of(DIRECT_BLOCK_BYTES as u64));
        assert!(self.len < DIRECT_BLOCK_BYTES);
        assert_eq!(self.buf_pos + self.len as u64, pos);
        Ok((self.buf_pos, &self.buf.as_slice()[..self.len]))
    }

    /// An asynchronous write planned by `plan_async` landed: `padded_len`
    /// bytes at `file_pos`, of which the log's bytes end at `end`; `tail`
    /// holds the log bytes of the block holding `end` (the next write
    /// repeats them).
    pub fn async_written(&mut self, file_pos: u64, padded_len: usize, end: u64, tail: &[u8]) {
        assert!(file_pos.is_multiple_of(DIRECT_BLOCK_BYTES as u64));
        assert!(padded_len.is_multiple_of(DIRECT_BLOCK_BYTES));
        let tail_pos = align_down(end);
        assert_eq!(
            tail.len() as u64,
            end - tail_pos,
            "tail is the end's partial block"
        );
        assert!(tail_pos >= file_pos && end <= file_pos + padded_len as u64);
        self.buf.as_mut_slice()[..tail.len()].copy_from_slice(tail);
        self.buf_pos = tail_pos;
        self.len = tail.len();
        self.positioned = true;
        let written_end = file_pos + padded_len as u64;
        let file_len = self.known_file_len.unwrap_or(0).max(written_end);
        self.known_file_len = Some(file_len);
        self.padded_past_eof = file_len > end;
    }

    /// A write failed or was abandoned: the file may hold part of it, so
    /// the next write reloads the tail from the file first.
    pub fn invalidate(&mut self) {
        self.positioned = false;
        self.known_file_len = None;
    }

    /// Cuts the zero padding past the logical end, if our writes added any.
    pub fn trim_padding(&mut self) -> io::Result<()> {
        // Unpositioned (after a failed write): recovery owns whatever is there.
        let Some(end) = self.logical_end().filter(|_| self.padded_past_eof) else {
            return Ok(());
        };
        self.file.set_len(end)?;
        self.known_file_len = Some(end);
        self.padded_past_eof = false;
        Ok(())
    }

    /// Trims the padding, then fdatasyncs the direct descriptor.
    pub fn sync_data(&mut self) -> io::Result<()> {
        self.trim_padding()?;
        self.file.sync_data()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsupported_error_names_the_file() {
        let e = unsupported(
            Path::new("/x/00000000000000000000.log"),
            io::Error::from_raw_os_error(libc::EINVAL),
        );
        assert_eq!(e.kind(), io::ErrorKind::Unsupported);
        let msg = e.to_string();
        assert!(
            msg.starts_with("/x/00000000000000000000.log: direct I/O"),
            "{msg}"
        );
        assert!(msg.contains("unsupported on this filesystem"), "{msg}");
    }

    #[test]
    fn alignment_helpers() {
        assert_eq!(align_down(4095), 0);
        assert_eq!(align_down(4096), 4096);
        assert_eq!(align_up(1), 4096);
        assert_eq!(align_up(4096), 4096);
        assert_eq!(align_up(0), 0);
        let buf = AlignedBuf::new(DIRECT_BUFFER_BYTES);
        assert!((buf.as_slice().as_ptr() as usize).is_multiple_of(DIRECT_BLOCK_BYTES));
        assert!(buf.as_slice().iter().all(|&b| b == 0));
    }
}
