//! The byte stream of a broker's own client connections: plaintext TCP or
//! TLS over it, generic over the socket so the shards' glommio sockets and
//! the controller threads' async-io ones share the code.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use futures_lite::{AsyncRead, AsyncWrite};
use futures_rustls::client::TlsStream;

/// A secured connection to a broker.
pub struct ClientStream<S> {
    inner: Inner<S>,
    /// When the SASL session should be renewed (a broker with
    /// `connections.max.reauth.ms` closes it at expiry): the owner opens
    /// a new connection after this instant.
    pub(super) renew_at: Option<Instant>,
}

enum Inner<S> {
    Plain(S),
    Tls(Box<TlsStream<S>>),
}

impl<S> ClientStream<S> {
    pub(super) fn plain(s: S) -> Self {
        ClientStream {
            inner: Inner::Plain(s),
            renew_at: None,
        }
    }

    pub(super) fn tls(s: TlsStream<S>) -> Self {
        ClientStream {
            inner: Inner::Tls(Box::new(s)),
            renew_at: None,
        }
    }

    /// The SASL session is near its expiry: reconnect before the next
    /// request.
    pub fn session_expiring(&self) -> bool {
        self.renew_at.is_some_and(|at| Instant::now() >= at)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for ClientStream<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        match &mut self.get_mut().inner {
            Inner::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Inner::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for ClientStream<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match &mut self.get_mut().inner {
            Inner::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Inner::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().inner {
            Inner::Plain(s) => Pin::new(s).poll_flush(cx),
            Inner::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().inner {
            Inner::Plain(s) => Pin::new(s).poll_close(cx),
            Inner::Tls(s) => Pin::new(s.as_mut()).poll_close(cx),
        }
    }
}
