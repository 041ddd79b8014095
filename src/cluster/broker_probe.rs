//! Is a Kafka broker serving at this address? A blocking ApiVersions v0
//! probe, for the two places where "something accepts connections" is not
//! enough: a broker id whose `/brokers/ids/<id>` registration is still held
//! (Kafka's checkedEphemeralCreate waits out the old session), and a
//! listener port at start-up (every shard binds with SO_REUSEPORT, so a
//! second broker would otherwise share the first one's connections).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

/// What answers on an address.
pub enum PortProbe {
    Free,
    /// Accepts connections but answers nothing: the listening socket of a
    /// broker that just exited, kept alive for a moment by its io_uring
    /// teardown.
    Lingering,
    /// A live Kafka-protocol server answered ApiVersions.
    Serving,
}

pub fn probe_port(addr: &SocketAddr) -> PortProbe {
    let Ok(mut s) = TcpStream::connect_timeout(addr, Duration::from_millis(300)) else {
        return PortProbe::Free;
    };
    // ApiVersions v0, correlation id 1, client id "kshard-probe".
    let client_id = b"kshard-probe";
    let mut req = Vec::with_capacity(32);
    req.extend_from_slice(&((10 + client_id.len()) as i32).to_be_bytes());
    req.extend_from_slice(&18i16.to_be_bytes());
    req.extend_from_slice(&0i16.to_be_bytes());
    req.extend_from_slice(&1i32.to_be_bytes());
    req.extend_from_slice(&(client_id.len() as i16).to_be_bytes());
    req.extend_from_slice(client_id);
    let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
    let mut byte = [0u8; 1];
    match s.write_all(&req).and_then(|_| s.read(&mut byte)) {
        Ok(n) if n > 0 => PortProbe::Serving,
        _ => PortProbe::Lingering,
    }
}

/// True when a Kafka-protocol server answers ApiVersions at host:port.
pub fn kafka_server_answers(host: &str, port: u16) -> bool {
    match (host, port)
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
    {
        Some(addr) => matches!(probe_port(&addr), PortProbe::Serving),
        None => false,
    }
}
