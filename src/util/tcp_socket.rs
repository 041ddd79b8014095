//! The socket options Kafka sets on its TCP sockets, from its configs:
//! `socket.receive.buffer.bytes` on each listening socket (before `listen`,
//! so accepted connections inherit it and the window scale offered in the
//! handshake fits it), `socket.listen.backlog.size` as the listen backlog,
//! and on each accepted connection `TCP_NODELAY`, `SO_KEEPALIVE` and
//! `socket.send.buffer.bytes` (Kafka's `Acceptor`). A buffer size of -1
//! leaves the kernel's default and its autotuning.

use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

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
    let domain = if addr.is_ipv6() {
        libc::AF_INET6
    } else {
        libc::AF_INET
    };
    // SAFETY: plain socket(2); the descriptor is owned at once.
    let fd = unsafe {
        libc::socket(
            domain,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
            libc::IPPROTO_TCP,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just opened and nothing else owns it.
    let socket = unsafe { OwnedFd::from_raw_fd(fd) };
    set_int_option(socket.as_raw_fd(), libc::SOL_SOCKET, libc::SO_REUSEPORT, 1)?;
    set_buffer_bytes(
        socket.as_raw_fd(),
        libc::SO_RCVBUF,
        settings.receive_buffer_bytes,
    )?;
    bind(socket.as_raw_fd(), &addr)?;
    // SAFETY: listen(2) on the descriptor owned above.
    if unsafe { libc::listen(socket.as_raw_fd(), settings.listen_backlog) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(socket)
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

fn bind(fd: RawFd, addr: &SocketAddr) -> io::Result<()> {
    // SAFETY: sockaddr_storage is plain old data; zeroed is a valid value.
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = match addr {
        SocketAddr::V4(v4) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: v4.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes(v4.ip().octets()),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in.
            unsafe { std::ptr::write((&mut storage as *mut libc::sockaddr_storage).cast(), sin) };
            std::mem::size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(v6) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: v6.port().to_be(),
                sin6_flowinfo: v6.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: v6.ip().octets(),
                },
                sin6_scope_id: v6.scope_id(),
            };
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in6.
            unsafe { std::ptr::write((&mut storage as *mut libc::sockaddr_storage).cast(), sin6) };
            std::mem::size_of::<libc::sockaddr_in6>()
        }
    };
    // SAFETY: `storage` holds a sockaddr of `len` bytes.
    let rc = unsafe {
        libc::bind(
            fd,
            (&storage as *const libc::sockaddr_storage).cast(),
            len as libc::socklen_t,
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
    use std::os::fd::IntoRawFd;

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
