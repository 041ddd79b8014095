//! The ZooKeeper client of the metadata plane: `ZkClient` talks to a real
//! ensemble through the async `zookeeper-client` crate, driven by a helper
//! OS thread with its own tokio current-thread runtime, and offers a
//! blocking, thread-safe `MetadataStore` to kshard's controller thread.
//!
//! Watches are one-shot, as in ZooKeeper; their firings and the session's
//! state changes arrive as `ZkEvent`s on one channel (`ZkClient::events`).
//! As ZooKeeper's Java client, it keeps its session across any outage the
//! session survives on the server (a restarted ensemble restores its
//! sessions): it reconnects with the session's id and password, and sets
//! its watches again. Only when a server says the session expired does it
//! build a new one by itself, like Kafka's `ZooKeeperClient.reinitialize`,
//! and announce it with `ZkEvent::SessionEstablished`; the owner then
//! re-registers its ephemeral nodes and watches (Kafka's
//! `afterInitializingSession`).
//!
//! Event semantics:
//! - A watch fires once. At most one data watch (from `get_watch` or
//!   `exists_watch`, the same kind of watch to ZooKeeper) and one child
//!   watch are pending per path; registering again while one is pending
//!   keeps the pending one, so one change gives one event, as with
//!   ZooKeeper's default watcher. If the pending one had already fired
//!   (event still in flight), that event still arrives and the owner
//!   re-registers on it as usual.
//! - A node's deletion with both watches pending gives one `Deleted`.
//! - Node events come in the order ZooKeeper sent them. The one case the
//!   crate leaves undecidable: a watch whose own event arrives in the same
//!   read as the reply that set it is reported right after that reply's
//!   other events, possibly ahead of another watch's event that came
//!   between the two.
//! - `Disconnected`/`Connected` mark connection loss and recovery within a
//!   session, however long the loss lasts; watches are set again on
//!   reconnection, and one whose node changed meanwhile fires then (as
//!   ZooKeeper's SetWatches does). Calls wait for the reconnection within
//!   their bound; reads in flight at the loss are re-sent, writes fail with
//!   ConnectionAborted (outcome unknown).
//! - On expiry (a server's answer): `SessionExpired`, then (after retries
//!   with backoff)
//!   `SessionEstablished { session_id }`. The old session's watches are
//!   dropped silently. Calls made in between wait for the new session
//!   within their bound; calls in flight at the expiry fail with
//!   ConnectionAborted. The first session of `connect` sends no event.

pub mod broker_registration;
mod client;
mod ops;
mod ready;
mod resume;
mod session;

#[cfg(test)]
mod tests;

use std::fmt;

pub use client::ZkClient;

/// Settings of `ZkClient::connect`, Kafka's `zookeeper.connect`,
/// `zookeeper.session.timeout.ms` and `zookeeper.connection.timeout.ms`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZkConfig {
    /// "h1:2181,h2:2181/chroot"; a missing port means 2181.
    pub connect: String,
    /// Requested session timeout; also bounds each blocking call.
    pub session_timeout_ms: u64,
    /// How long `connect` waits for the first session.
    pub connection_timeout_ms: u64,
}

/// What a fired watch saw (ZooKeeper's `Watcher.Event.EventType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NodeEventKind {
    Created,
    Deleted,
    DataChanged,
    ChildrenChanged,
}

/// A watch firing or a session state change, in the order they happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ZkEvent {
    /// A one-shot watch fired; `path` is relative to the chroot.
    Node { kind: NodeEventKind, path: String },
    /// The connection dropped; the session may still be alive.
    Disconnected,
    /// The connection came back within the same session.
    Connected,
    /// The session is gone with all its watches and ephemeral nodes. A new
    /// session is being created.
    SessionExpired,
    /// A new session replaced an expired one (not sent for the first one).
    SessionEstablished { session_id: i64 },
}

/// One ensemble member of a connect string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZkServer {
    pub host: String,
    pub port: u16,
}

impl fmt::Display for ZkServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

/// A parsed `zookeeper.connect`: servers plus an optional chroot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectString {
    pub servers: Vec<ZkServer>,
    /// None for no chroot (also for a bare "/", as ZooKeeper does).
    pub chroot: Option<String>,
}

/// ZooKeeper's client port when the connect string names none.
pub const DEFAULT_ZK_PORT: u16 = 2181;

impl ConnectString {
    /// Parses like ZooKeeper's `ConnectStringParser`: the chroot starts at
    /// the first '/', servers are comma separated (blank entries skipped),
    /// IPv6 hosts go in brackets.
    pub fn parse(connect: &str) -> Result<ConnectString, String> {
        let (hosts, chroot) = match connect.find('/') {
            Some(i) => (&connect[..i], Some(&connect[i..])),
            None => (connect, None),
        };
        let chroot = match chroot {
            None | Some("/") => None,
            Some(path) => {
                crate::metadata::validate_path(path)
                    .map_err(|e| format!("Invalid chroot in zookeeper.connect {connect:?}: {e}"))?;
                Some(path.to_string())
            }
        };
        let mut servers = Vec::new();
        for entry in hosts.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            servers.push(
                parse_server(entry).map_err(|why| {
                    format!("Invalid server {entry:?} in zookeeper.connect: {why}")
                })?,
            );
        }
        if servers.is_empty() {
            return Err(format!("zookeeper.connect {connect:?} names no server"));
        }
        Ok(ConnectString { servers, chroot })
    }

    /// The server list in the form the crate connects to (no chroot).
    pub fn hosts(&self) -> String {
        let hosts: Vec<String> = self.servers.iter().map(ZkServer::to_string).collect();
        hosts.join(",")
    }
}

fn parse_server(entry: &str) -> Result<ZkServer, String> {
    let (host, port) = if let Some(rest) = entry.strip_prefix('[') {
        let end = rest.find(']').ok_or("unclosed '['")?;
        let host = &rest[..end];
        let after = &rest[end + 1..];
        let port = match after.strip_prefix(':') {
            Some(p) => Some(p),
            None if after.is_empty() => None,
            None => return Err("unexpected text after ']'".into()),
        };
        (host, port)
    } else {
        match entry.rfind(':') {
            Some(i) => (&entry[..i], Some(&entry[i + 1..])),
            None => (entry, None),
        }
    };
    if host.is_empty() {
        return Err("empty host".into());
    }
    if host.contains(|c: char| c.is_whitespace() || c == '[' || c == ']') {
        return Err("bad host".into());
    }
    if !entry.starts_with('[') && host.contains(':') {
        return Err("IPv6 addresses need brackets".into());
    }
    let port = match port {
        None | Some("") => DEFAULT_ZK_PORT,
        Some(p) => match p.parse::<u16>() {
            Ok(0) | Err(_) => return Err(format!("bad port {p:?}")),
            Ok(n) => n,
        },
    };
    Ok(ZkServer {
        host: host.to_string(),
        port,
    })
}
