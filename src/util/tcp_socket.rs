//! The socket options Kafka sets on its TCP sockets, from its configs:
//! `socket.receive.buffer.bytes` on each listening socket (before `listen`,
//! so accepted connections inherit it and the window scale offered in the
//! handshake fits it), `socket.listen.backlog.size` as the listen backlog,
//! and on each accepted connection `TCP_NODELAY`, `SO_KEEPALIVE` and
//! `socket.send.buffer.bytes` (Kafka's `Acceptor`). A buffer size of -1
//! leaves the kernel's default and its autotuning.

use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, OwnedFd, RawFd};

use socket2::{Domain, Protocol, Socket, Type};

/// Kafka's value for "the operating system's default" buffer size.
pub const OS_DEFAULT_BUFFER_BYTES: i32 = -1;

/// One listener's socket settings (the same for every listener, as in Kafka).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ListenerSocketSettings {
    pub receive_buffer_bytes: i32,
    pub send_buffer_bytes: i32,
    pub listen_backlog: i32,
}

/// A bound, listening socket with `SO_REUSEPORT` (every shard binds the
/// same port), the receive buffer and the backlog set.
pub fn bind_listener(
    host: &str,
    port: u16,
    settings: &ListenerSocketSettings,
) -> io::Result<OwnedFd> {
    assert!(
        settings.listen_backlog >= 1,
        "the config validates the backlog"
    );
    let addr: SocketAddr = (host, port)
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| io::Error::other(format!("{host} does not resolve")))?;
    // socket2 opens it close-on-exec.
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    socket.set_reuse_port(true)?;
    set_buffer_bytes(
        socket.as_raw_fd(),
        libc::SO_RCVBUF,
        settings.receive_buffer_bytes,
    )?;
    socket.bind(&addr.into())?;
    socket.listen(settings.listen_backlog)?;
    // SAFETY: the descriptor comes straight from the socket, which gives it up.
    Ok(unsafe { OwnedFd::from_raw_fd(socket.into_raw_fd()) })
}

/// The options Kafka sets on a connection it accepts.
pub fn configure_accepted(fd: RawFd, settings: &ListenerSocketSettings) -> io::Result<()> {
    set_int_option(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY, 1)?;
    set_int_option(fd, libc::SOL_SOCKET, libc::SO_KEEPALIVE, 1)?;
    set_buffer_bytes(fd, libc::SO_SNDBUF, settings.send_buffer_bytes)
}

/// `SO_RCVBUF` or `SO_SNDBUF`, unless `bytes` asks for the OS default.
/// Other sizes under 1 are refused, as Java's socket refuses them (Kafka
/// then fails to open the listener, or closes the connection).
pub fn set_buffer_bytes(fd: RawFd, option: libc::c_int, bytes: i32) -> io::Result<()> {
    assert!(option == libc::SO_RCVBUF || option == libc::SO_SNDBUF);
    if bytes == OS_DEFAULT_BUFFER_BYTES {
        return Ok(());
    }
    if bytes < 1 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("invalid socket buffer size {bytes}"),
        ));
    }
    set_int_option(fd, libc::SOL_SOCKET, option, bytes)
}

fn set_int_option(
    fd: RawFd,
    level: libc::c_int,
    option: libc::c_int,
    value: i32,
) -> io::Result<()> {
    // SAFETY: the option value is a live c_int of the size passed.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            option,
            (&value as *const i32).cast(),
            std::mem::size_of::<i32>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn int_option(fd: RawFd, level: libc::c_int, option: libc::c_int) -> i32 {
        let mut value: i32 = 0;
        let mut len = std::mem::size_of::<i32>() as libc::socklen_t;
        // SAFETY: value and len are live and sized for a c_int.
        let rc = unsafe {
            libc::getsockopt(fd, level, option, (&mut value as *mut i32).cast(), &mut len)
        };
        assert_eq!(rc, 0, "{}", io::Error::last_os_error());
        value
    }

    #[test]
    fn accepted_connections_get_kafkas_options() {
        let settings = ListenerSocketSettings {
            receive_buffer_bytes: 65_536,
            send_buffer_bytes: 98_304,
            listen_backlog: 7,
        };
        let listener = bind_listener("127.0.0.1", 0, &settings).unwrap();
        // SAFETY: the std listener takes over the descriptor.
        let listener = unsafe { std::net::TcpListener::from_raw_fd(listener.into_raw_fd()) };
        let port = listener.local_addr().unwrap().port();
        let client = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        let (accepted, _) = listener.accept().unwrap();
        configure_accepted(accepted.as_raw_fd(), &settings).unwrap();
        let fd = accepted.as_raw_fd();
        // Linux doubles the size asked for (its bookkeeping overhead).
        assert_eq!(
            int_option(fd, libc::SOL_SOCKET, libc::SO_RCVBUF),
            2 * 65_536
        );
        assert_eq!(
            int_option(fd, libc::SOL_SOCKET, libc::SO_SNDBUF),
            2 * 98_304
        );
        assert_eq!(int_option(fd, libc::SOL_SOCKET, libc::SO_KEEPALIVE), 1);
        assert_eq!(int_option(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY), 1);
        assert_eq!(
            int_option(listener.as_raw_fd(), libc::SOL_SOCKET, libc::SO_REUSEPORT),
            1
        );
        drop(client);
    }

    /// The buffer sizes of a connection accepted on `listener`.
    fn accepted_buffers(
        listener: &std::net::TcpListener,
        settings: &ListenerSocketSettings,
    ) -> (i32, i32) {
        let port = listener.local_addr().unwrap().port();
        let _client = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        let (accepted, _) = listener.accept().unwrap();
        configure_accepted(accepted.as_raw_fd(), settings).unwrap();
        let fd = accepted.as_raw_fd();
        (
            int_option(fd, libc::SOL_SOCKET, libc::SO_RCVBUF),
            int_option(fd, libc::SOL_SOCKET, libc::SO_SNDBUF),
        )
    }

    #[test]
    fn minus_one_keeps_the_kernels_buffers() {
        let settings = ListenerSocketSettings {
            receive_buffer_bytes: OS_DEFAULT_BUFFER_BYTES,
            send_buffer_bytes: OS_DEFAULT_BUFFER_BYTES,
            listen_backlog: 50,
        };
        let listener = bind_listener("127.0.0.1", 0, &settings).unwrap();
        // SAFETY: the std listener takes over the descriptor.
        let listener = unsafe { std::net::TcpListener::from_raw_fd(listener.into_raw_fd()) };
        let plain = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        assert_eq!(
            accepted_buffers(&listener, &settings),
            accepted_buffers(&plain, &settings)
        );
    }
}
