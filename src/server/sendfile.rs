//! Zero-copy fetch: segment bytes go from the page cache to the socket with
//! sendfile(2). The socket is switched to non-blocking only around the call
//! (no io_uring op of this connection is submitted meanwhile, since the shard
//! is single-threaded), so a full socket buffer returns EAGAIN instead of
//! blocking the shard; then one chunk goes through glommio's async write,
//! which waits for the socket to drain, and sendfile resumes.
//!
//! Slices of `log.io.mode=direct` logs skip the page cache: their bytes come
//! from the shard's [`ReadCache`] (DMA reads) and go out by async writes.

use std::io;
use std::os::unix::io::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};

use futures_lite::AsyncWriteExt;
use glommio::net::TcpStream;

use kshard_shards::log::read_cache::ReadCache;
use kshard_shards::log::FileSlice;

/// Bytes sent by sendfile(2) and bytes copied through user space, process-wide.
pub static SENDFILE_BYTES: AtomicU64 = AtomicU64::new(0);
pub static COPIED_BYTES: AtomicU64 = AtomicU64::new(0);
/// Bytes of direct-mode slices sent from the direct-I/O read cache.
pub static READ_CACHE_BYTES: AtomicU64 = AtomicU64::new(0);

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

/// Sends a direct-mode slice block by block from the shard's read cache.
pub async fn send_cached_slice(
    stream: &mut TcpStream,
    slice: &FileSlice,
    cache: &ReadCache,
) -> io::Result<()> {
    debug_assert!(slice.direct);
    let end = slice.position + slice.len as u64;
    let mut pos = slice.position;
    while pos < end {
        let chunk = cache.read_chunk(slice, pos).await?;
        debug_assert!(!chunk.is_empty() && pos + chunk.len() as u64 <= end);
        stream.write_all(&chunk).await?;
        pos += chunk.len() as u64;
        READ_CACHE_BYTES.fetch_add(chunk.len() as u64, Ordering::Relaxed);
    }
    Ok(())
}
