//! A connection's byte stream, as Kafka's TransportLayer: plaintext TCP, or
//! TLS over it (Kafka's SslTransportLayer). Fetch data goes out by
//! sendfile(2) on plaintext; under TLS every byte is encrypted in user
//! space, so segment bytes are read and copied through the TLS writer.

use std::io;
use std::os::unix::fs::FileExt;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};

use futures_lite::{AsyncRead, AsyncWrite, AsyncWriteExt};
use futures_rustls::server::TlsStream;
use glommio::net::TcpStream;
use kshard_shards::log::page_cache::{self, ColdRange};
use kshard_shards::log::FileSlice;

use crate::server::sendfile::{send_file_slice, COPIED_BYTES};

/// Bytes of segment data one TLS copy step reads and encrypts (a TLS
/// record holds at most 16 KiB, rustls splits the rest).
const TLS_COPY_CHUNK_BYTES: usize = 256 * 1024;

pub enum Transport {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

impl Transport {
    pub fn is_tls(&self) -> bool {
        matches!(self, Transport::Tls(_))
    }

    /// Sends a slice of a segment file: sendfile(2) in plaintext, a copy
    /// through the TLS writer otherwise.
    pub async fn send_file(&mut self, slice: &FileSlice, scratch: &mut Vec<u8>) -> io::Result<()> {
        if slice.may_be_cold {
            fill_page_cache(slice).await?;
        }
        let tls = match self {
            Transport::Plain(stream) => return send_file_slice(stream, slice, scratch).await,
            Transport::Tls(tls) => tls,
        };
        let end = slice.position + u64::from(slice.len);
        let mut offset = slice.position;
        while offset < end {
            let len = ((end - offset) as usize).min(TLS_COPY_CHUNK_BYTES);
            scratch.resize(len, 0);
            slice.file.read_exact_at(&mut scratch[..len], offset)?;
            tls.write_all(&scratch[..len]).await?;
            offset += len as u64;
            COPIED_BYTES.fetch_add(len as u64, Ordering::Relaxed);
        }
        Ok(())
    }

    /// The socket's read timeout (glommio's, which arms a timer whenever a
    /// read waits): `None` once the connection is established, when
    /// `connection::read_some` keeps the idle timer itself.
    pub fn set_read_timeout(&self, timeout: Option<std::time::Duration>) -> io::Result<()> {
        let stream = match self {
            Transport::Plain(stream) => stream,
            Transport::Tls(tls) => tls.get_ref().0,
        };
        stream
            .set_read_timeout(timeout)
            .map_err(|e| io::Error::other(e.to_string()))
    }

    /// Receives at most `bytes_max` bytes into `buf`'s spare capacity
    /// without waiting: a plaintext request's body lands in its own buffer,
    /// not in the shard's read buffer to be copied. `Ok(None)` when this
    /// transport cannot (TLS) or nothing is there now (glommio's read then
    /// waits for the socket); `Ok(Some(0))` when the peer closed.
    pub fn try_recv_into_spare(
        &self,
        buf: &mut bytes::BytesMut,
        bytes_max: usize,
    ) -> io::Result<Option<usize>> {
        let Transport::Plain(stream) = self else {
            return Ok(None);
        };
        let spare = buf.spare_capacity_mut();
        let want = bytes_max.min(spare.len());
        assert!(want > 0, "a read into no room");
        // SAFETY: the kernel writes at most `want` bytes into the spare
        // capacity, which `buf` owns; `set_len` below covers only those.
        let n = unsafe {
            libc::recv(
                std::os::fd::AsRawFd::as_raw_fd(stream),
                spare.as_mut_ptr().cast(),
                want,
                libc::MSG_DONTWAIT,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            return match e.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(None),
                _ => Err(e),
            };
        }
        let n = n as usize;
        assert!(n <= want, "recv returned {n} of {want} bytes");
        // SAFETY: the first `n` bytes of the spare capacity were written.
        unsafe { buf.set_len(buf.len() + n) };
        Ok(Some(n))
    }

    /// After a whole response: TLS may hold an encrypted record back.
    pub async fn finish_response(&mut self) -> io::Result<()> {
        match self {
            Transport::Plain(_) => Ok(()),
            Transport::Tls(tls) => tls.flush().await,
        }
    }
}

impl AsyncRead for Transport {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Transport::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Transport::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Transport {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Transport::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Transport::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Transport::Plain(s) => Pin::new(s).poll_flush(cx),
            Transport::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Transport::Plain(s) => Pin::new(s).poll_close(cx),
            Transport::Tls(s) => Pin::new(s.as_mut()).poll_close(cx),
        }
    }
}

/// Reads a closed segment's slice into the page cache off the shard when
/// it is not all there (`page_cache`), so the send that follows does not
/// wait for the disk on the shard; the fetch's read usually did already.
async fn fill_page_cache(slice: &FileSlice) -> io::Result<()> {
    let (position, len) = (slice.position, u64::from(slice.len));
    if page_cache::range_cached(&slice.file, position, len) != Some(false) {
        return Ok(());
    }
    let cold = ColdRange {
        file: slice.file.clone(),
        position,
        len,
    };
    crate::server::sendfile::fill_page_cache(vec![cold]).await
}
