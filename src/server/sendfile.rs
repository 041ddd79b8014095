//! Zero-copy fetch: segment bytes go from the page cache to the socket with
//! sendfile(2). The socket is switched to non-blocking only around the call
//! (no io_uring op of this connection is submitted meanwhile, since the shard
//! is single-threaded), so a full socket buffer returns EAGAIN instead of
//! blocking the shard; then one chunk goes through glommio's async write,
//! which waits for the socket to drain, and sendfile resumes.
//!
//! A closed segment's slice is read into the page cache off the shard first
//! when it is not all there (`page_cache`), so sendfile does not wait for
//! the disk on the shard. Slices of a `log.io.mode=direct` log's active
//! segment skip the page cache: their bytes come from the shard's
//! [`ReadCache`] (DMA reads) and go out by async writes; its closed
//! segments go by sendfile like any other.

use std::collections::VecDeque;
use std::io;
use std::os::unix::io::AsRawFd;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures_lite::AsyncWriteExt;
use glommio::net::TcpStream;

use glommio::io::ReadResult;
use kshard_shards::log::page_cache::{self, ColdRange};
use kshard_shards::log::read_cache::{chunk_starts, ReadCache};

use crate::protocol::Chunk;
use crate::server::transport::Transport;
use kshard_shards::log::FileSlice;

/// Bytes sent by sendfile(2) and bytes copied through user space, process-wide.
pub static SENDFILE_BYTES: AtomicU64 = AtomicU64::new(0);
pub static COPIED_BYTES: AtomicU64 = AtomicU64::new(0);
/// Bytes of direct-mode slices sent from the direct-I/O read cache.
pub static READ_CACHE_BYTES: AtomicU64 = AtomicU64::new(0);
/// Bytes of direct-mode slices sent from a log's tail cache (in memory).
pub static TAIL_CACHE_BYTES_SENT: AtomicU64 = AtomicU64::new(0);

/// Reads `ranges` into the page cache on the executor's blocking thread
/// (`page_cache::fill_all`): the calling task waits, the shard does not.
pub async fn fill_page_cache(ranges: Vec<ColdRange>) -> io::Result<()> {
    glommio::executor()
        .spawn_blocking(move || page_cache::fill_all(&ranges))
        .await
}

/// Sends a slice whose bytes are already in memory (a tail-cache read).
pub async fn send_cached_bytes(stream: &mut Transport, bytes: &[u8]) -> io::Result<()> {
    stream.write_all(bytes).await?;
    TAIL_CACHE_BYTES_SENT.fetch_add(bytes.len() as u64, Ordering::Relaxed);
    Ok(())
}

const FALLBACK_CHUNK_BYTES: usize = 64 * 1024;

fn set_nonblocking(fd: i32, on: bool) -> io::Result<()> {
    // SAFETY: fcntl on a descriptor we own; no memory is passed.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 {
        return Err(io::Error::last_os_error());
    }
    let next = if on {
        flags | libc::O_NONBLOCK
    } else {
        flags & !libc::O_NONBLOCK
    };
    // SAFETY: as above.
    if unsafe { libc::fcntl(fd, libc::F_SETFL, next) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

pub async fn send_file_slice(
    stream: &mut TcpStream,
    slice: &FileSlice,
    scratch: &mut Vec<u8>,
) -> io::Result<()> {
    let sock = stream.as_raw_fd();
    let file = slice.file.as_raw_fd();
    let mut offset = slice.position as libc::off_t;
    let end = slice.position + slice.len as u64;
    while (offset as u64) < end {
        let remaining = (end - offset as u64) as usize;
        set_nonblocking(sock, true)?;
        // SAFETY: both descriptors are open for the duration of the call
        // (the Arc<File> and the stream are borrowed); offset is a valid pointer.
        let n = unsafe { libc::sendfile(sock, file, &mut offset, remaining) };
        let err = io::Error::last_os_error();
        set_nonblocking(sock, false)?;
        if n > 0 {
            SENDFILE_BYTES.fetch_add(n as u64, Ordering::Relaxed);
            continue;
        }
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "segment shorter than the fetch slice",
            ));
        }
        match err.raw_os_error() {
            Some(libc::EAGAIN) => {
                // Socket full: send one chunk through the async path, which
                // parks this task (not the shard) until the socket drains.
                let len = remaining.min(FALLBACK_CHUNK_BYTES);
                scratch.resize(len, 0);
                use std::os::unix::fs::FileExt;
                slice
                    .file
                    .read_exact_at(&mut scratch[..len], offset as u64)?;
                stream.write_all(&scratch[..len]).await?;
                offset += len as libc::off_t;
                COPIED_BYTES.fetch_add(len as u64, Ordering::Relaxed);
            }
            Some(libc::EINTR) => continue,
            _ => return Err(err),
        }
    }
    Ok(())
}

/// Read-cache blocks read ahead of the one being sent, so the device works
/// while the socket drains (1 MiB with 128 KiB blocks).
const READ_AHEAD_BLOCKS: usize = 32;

/// Sends a response holding direct-mode slices: their blocks come from the
/// shard's read cache, with up to `READ_AHEAD_BLOCKS` DMA reads in flight
/// ahead of the socket across all the response's slices.
pub async fn send_with_read_ahead(
    stream: &mut Transport,
    chunks: Vec<Chunk>,
    cache: &Rc<ReadCache>,
) -> io::Result<()> {
    let read = |slice: &FileSlice, pos: u64| {
        let (cache, slice) = (cache.clone(), slice.clone());
        glommio::spawn_local(async move { cache.read_chunk(&slice, pos).await })
    };
    // Every block to send, in order, as (slice, chunk start); the first
    // READ_AHEAD_BLOCKS start now, one more each time one is sent.
    let mut blocks = chunks
        .iter()
        .filter_map(|c| match c {
            Chunk::File(f) if f.direct && f.cached.is_none() => Some(f),
            _ => None,
        })
        .flat_map(|f| chunk_starts(f).map(move |pos| (f, pos)));
    let mut reading: VecDeque<glommio::Task<io::Result<ReadResult>>> = blocks
        .by_ref()
        .take(READ_AHEAD_BLOCKS)
        .map(|(f, pos)| read(f, pos))
        .collect();
    let mut scratch = Vec::new();
    for chunk in &chunks {
        match chunk {
            Chunk::Bytes(b) => stream.write_all(b).await?,
            Chunk::File(FileSlice {
                cached: Some(b), ..
            }) => send_cached_bytes(stream, b).await?,
            Chunk::File(f) if !f.direct => stream.send_file(f, &mut scratch).await?,
            Chunk::File(f) => {
                for _ in chunk_starts(f) {
                    let task = reading
                        .pop_front()
                        .expect("one read per block, started in order");
                    if let Some((f, pos)) = blocks.next() {
                        reading.push_back(read(f, pos));
                    }
                    let data = task.await?;
                    stream.write_all(&data).await?;
                    READ_CACHE_BYTES.fetch_add(data.len() as u64, Ordering::Relaxed);
                }
            }
        }
    }
    debug_assert!(reading.is_empty());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kshard_shards::log::read_cache::READ_CACHE_BLOCK_BYTES;
    use std::sync::Arc;

    fn slice(position: u64, len: u32) -> FileSlice {
        FileSlice {
            file: Arc::new(std::fs::File::open("/dev/null").unwrap()),
            position,
            len,
            direct: true,
            may_be_cold: false,
            cached: None,
        }
    }

    #[test]
    fn chunks_start_at_the_slice_then_at_block_boundaries() {
        let b = READ_CACHE_BLOCK_BYTES as u64;
        let starts: Vec<u64> = chunk_starts(&slice(10, 5)).collect();
        assert_eq!(starts, vec![10]);
        let starts: Vec<u64> = chunk_starts(&slice(b - 1, 2)).collect();
        assert_eq!(starts, vec![b - 1, b]);
        let starts: Vec<u64> = chunk_starts(&slice(0, 3 * b as u32)).collect();
        assert_eq!(starts, vec![0, b, 2 * b]);
        let starts: Vec<u64> = chunk_starts(&slice(b, b as u32)).collect();
        assert_eq!(starts, vec![b]);
    }
}
