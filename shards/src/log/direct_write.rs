//! Asynchronous appends of `log.io.mode=direct`: a produce's validated
//! batches are staged in memory with their offsets assigned, then written
//! to the active segment with an O_DIRECT write through io_uring (glommio
//! `DmaFile`), so the shard keeps serving while the device works.
//!
//! The cycle, per log, at most one write in flight:
//! 1. [`crate::log::log::Log::stage`] queues an append (offsets assigned, nothing
//!    written; the log end offset and every reader are unaffected).
//! 2. [`crate::log::log::Log::begin_write`] rolls if Kafka would, then takes
//!    the staged appends that fit the active segment (up to
//!    [`MAX_DIRECT_WRITE_BYTES`]) as one [`StagedWrite`]: the segment's
//!    partial last block followed by the new bytes, zero padded to a block.
//! 3. [`StagedWrite::execute`] allocates a DMA buffer, fills it and writes.
//! 4. [`crate::log::log::Log::complete_write`] indexes the appends and moves
//!    the log end offset: only now can fetches, the high watermark and
//!    acknowledgements see them, so nothing is acknowledged or served that
//!    is not in the file (it survives a crash of the process, as page-cache
//!    writes do; fsync policy is unchanged).
//!
//! Appends staged while a write is in flight go out together in the next
//! one (group commit).
//!
//! `IoMode::BufferedOffload` runs the same cycle with a buffered write: the
//! appends' bytes as they are, at the segment's end. While the system's
//! dirty pages are far from the kernel's writeback thresholds
//! ([`crate::log::dirty_pages`]) it is one `pwrite` on the shard; near
//! them, io_uring writes it through a duplicate of the segment's
//! descriptor. ext4 refuses non-blocking buffered writes, so io_uring hands
//! each to one of its kernel workers; the kernel's dirty-page throttling
//! (up to hundreds of milliseconds when producers outrun writeback) then
//! holds that worker and this log's next write, never the shard.

use std::fs::File;
use std::io;
use std::os::unix::io::{AsRawFd, FromRawFd};
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;

use bytes::Bytes;
use glommio::io::{BufferedFile, DmaFile, OpenOptions};

use super::patched::PatchedRecords;
use super::segment::direct_io::DIRECT_BLOCK_BYTES;
use super::LogAppendInfo;

/// Largest single write; larger backlogs go out in several. Bounded so a
/// few partitions' writes fit glommio's registered I/O arena.
pub const MAX_DIRECT_WRITE_BYTES: usize = 1024 * 1024;

/// An append whose offsets are assigned but whose bytes are not written.
pub struct StagedAppend {
    pub records: PatchedRecords,
    pub info: LogAppendInfo,
}

/// One planned write of a log's active segment.
pub struct StagedWrite {
    /// Which `Log` planned it (a log reopened or deleted meanwhile differs).
    pub(crate) log_id: u64,
    pub(crate) segment_base: i64,
    pub(crate) path: PathBuf,
    /// The segment's DmaFile if a previous write opened it.
    pub(crate) dma: Option<Rc<DmaFile>>,
    /// Block-aligned file position of `head`.
    pub(crate) file_pos: u64,
    /// The bytes of the segment's partial last block, written again.
    pub(crate) head: Vec<u8>,
    pub(crate) appends: Vec<StagedAppend>,
    /// The log's bytes in the block holding the new end.
    pub(crate) tail: Vec<u8>,
    /// The new bytes as stored, copied out of the DMA buffer for the
    /// log's tail cache once the write has run.
    pub(crate) written: Option<Bytes>,
    /// Set for a buffered write (`IoMode::BufferedOffload`): the segment's
    /// descriptor; no head, tail or padding then.
    pub(crate) buffered: Option<Arc<File>>,
}

impl StagedWrite {
    pub fn log_id(&self) -> u64 {
        self.log_id
    }

    /// One past the last offset written.
    pub fn end_offset(&self) -> i64 {
        self.appends
            .last()
            .map(|a| a.info.last_offset + 1)
            .expect("a write has appends")
    }

    pub(crate) fn data_len(&self) -> usize {
        self.appends.iter().map(|a| a.records.len()).sum()
    }

    /// File position one past the new bytes.
    pub(crate) fn end_pos(&self) -> u64 {
        self.file_pos + (self.head.len() + self.data_len()) as u64
    }

    pub(crate) fn padded_len(&self) -> usize {
        (self.head.len() + self.data_len()).next_multiple_of(DIRECT_BLOCK_BYTES)
    }

    /// Head, records, zero padding.
    fn fill(&self, dst: &mut [u8]) {
        assert_eq!(dst.len(), self.padded_len());
        let mut at = self.head.len();
        dst[..at].copy_from_slice(&self.head);
        for a in &self.appends {
            a.records.copy_range(0, &mut dst[at..at + a.records.len()]);
            at += a.records.len();
        }
        // The padding completes the last block and no more: readers stop
        // at the segment's logical end, and trimming cuts the rest.
        assert!(dst.len() - at < DIRECT_BLOCK_BYTES);
        dst[at..].fill(0);
    }

    /// Writes the planned bytes, opening the segment for O_DIRECT writes on
    /// first use. A short write is an error.
    pub async fn execute(&mut self) -> io::Result<()> {
        if self.buffered.is_some() {
            return self.execute_buffered().await;
        }
        let dma = match &self.dma {
            Some(d) => d.clone(),
            None => {
                let file = OpenOptions::new()
                    .write(true)
                    .dma_open(&self.path)
                    .await
                    .map_err(|e| io::Error::other(format!("{}: {e}", self.path.display())))?;
                let file = Rc::new(file);
                self.dma = Some(file.clone());
                file
            }
        };
        let len = self.padded_len();
        // O_DIRECT: whole blocks at a block-aligned position (the pair of
        // `DirectWriter::async_written`'s checks).
        assert!(len.is_multiple_of(DIRECT_BLOCK_BYTES) && len > 0);
        assert!(self.file_pos.is_multiple_of(DIRECT_BLOCK_BYTES as u64));
        let mut buf = dma.alloc_dma_buffer(len);
        self.fill(buf.as_bytes_mut());
        let new = self.head.len()..self.head.len() + self.data_len();
        self.written = Some(Bytes::copy_from_slice(&buf.as_bytes()[new]));
        let written = dma.write_at(buf, self.file_pos).await;
        self.check_written(written, len)
    }

    /// A buffered write: the appends' bytes in one write at the segment's
    /// end, by `pwrite` here while the kernel is far from throttling
    /// writers, by io_uring's workers otherwise (`dirty_pages`). A short
    /// write is an error.
    async fn execute_buffered(&mut self) -> io::Result<()> {
        let len = self.data_len();
        let target = self.buffered.as_ref().expect("a buffered write");
        if !super::dirty_pages::offload_writes() {
            // From the requests' buffers (`pwritev`), no copy.
            let started = std::time::Instant::now();
            let mut pos = self.file_pos;
            let mut written = Ok(());
            for a in &self.appends {
                written = a.records.write_all_at(target, pos);
                if written.is_err() {
                    break;
                }
                pos += a.records.len() as u64;
            }
            super::dirty_pages::note_write_time(started.elapsed());
            return written.map_err(|e| io::Error::other(format!("{}: {e}", self.path.display())));
        }
        // io_uring's write takes one owned buffer.
        let mut buf = Vec::with_capacity(len);
        for a in &self.appends {
            a.records.extend_into(&mut buf);
        }
        assert_eq!(buf.len(), len);
        // A duplicate descriptor per write (two syscalls beside a write of
        // up to a megabyte), closed when the write is done.
        // SAFETY: dup of a descriptor the Arc keeps open.
        let fd = unsafe { libc::dup(target.as_raw_fd()) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is open and owned by nothing else.
        let file = unsafe { BufferedFile::from_raw_fd(fd) };
        let written = file.write_at(buf, self.file_pos).await;
        self.check_written(written, len)
    }

    /// A write's outcome: an error names the segment, a short write is one.
    fn check_written(&self, written: glommio::Result<usize, ()>, len: usize) -> io::Result<()> {
        let written =
            written.map_err(|e| io::Error::other(format!("{}: {e}", self.path.display())))?;
        if written != len {
            return Err(io::Error::new(
                io::ErrorKind::WriteZero,
                format!(
                    "{}: short write at {}: {written} of {len} bytes",
                    self.path.display(),
                    self.file_pos
                ),
            ));
        }
        Ok(())
    }
}

/// The log bytes of the block holding `end_pos`, taken from the end of
/// `head` followed by `appends` (which together end at `end_pos`).
pub(crate) fn tail_block(head: &[u8], appends: &[StagedAppend], end_pos: u64) -> Vec<u8> {
    let want = (end_pos % DIRECT_BLOCK_BYTES as u64) as usize;
    let mut tail = vec![0u8; want];
    let mut need = want;
    for a in appends.iter().rev() {
        if need == 0 {
            break;
        }
        let n = need.min(a.records.len());
        a.records
            .copy_range(a.records.len() - n, &mut tail[need - n..need]);
        need -= n;
    }
    if need > 0 {
        assert!(head.len() >= need, "the head starts the tail's block");
        tail[..need].copy_from_slice(&head[head.len() - need..]);
    }
    tail
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::log::batch::RECORD_BATCH_OVERHEAD;
    use crate::log::patched::PatchedHeader;

    /// Plain bytes, no header rewritten.
    fn staged(bytes: &[u8]) -> StagedAppend {
        staged_with(bytes, Vec::new())
    }

    fn staged_with(bytes: &[u8], headers: Vec<PatchedHeader>) -> StagedAppend {
        StagedAppend {
            records: PatchedRecords::new(Bytes::copy_from_slice(bytes), headers),
            info: LogAppendInfo {
                first_offset: 0,
                last_offset: 0,
                max_timestamp: -1,
                offset_of_max_timestamp: 0,
                log_append_time_ms: -1,
                record_count: 1,
                batch_count: 1,
                valid_bytes: bytes.len(),
            },
        }
    }

    #[test]
    fn tail_carries_rewritten_headers() {
        let header = PatchedHeader {
            position: 0,
            bytes: [0xEE; RECORD_BATCH_OVERHEAD],
        };
        let a = staged_with(&[1u8; 100], vec![header]);
        let t = tail_block(&[], &[a], 100);
        assert!(t[..RECORD_BATCH_OVERHEAD].iter().all(|&x| x == 0xEE));
        assert!(t[RECORD_BATCH_OVERHEAD..].iter().all(|&x| x == 1));
    }

    #[test]
    fn tail_spans_appends_and_head() {
        let head = vec![7u8; 100];
        let a = staged(&[1u8; 10]);
        let b = staged(&[2u8; 20]);
        // head at 4096, ends at 4096 + 130.
        let t = tail_block(&head, &[a, b], 4096 + 130);
        assert_eq!(t.len(), 130);
        assert!(t[..100].iter().all(|&x| x == 7));
        assert!(t[100..110].iter().all(|&x| x == 1));
        assert!(t[110..].iter().all(|&x| x == 2));
    }

    #[test]
    fn tail_of_a_block_boundary_is_empty() {
        let a = staged(&[1u8; 4096]);
        assert!(tail_block(&[], &[a], 8192).is_empty());
    }

    #[test]
    fn tail_inside_the_last_append() {
        let a = staged(&[1u8; 5000]);
        let b = staged(&[2u8; 3000]);
        let t = tail_block(&[], &[a, b], 8000);
        assert_eq!(t.len(), 8000 - 4096);
        assert!(t[..904].iter().all(|&x| x == 1));
        assert!(t[904..].iter().all(|&x| x == 2));
    }
}
