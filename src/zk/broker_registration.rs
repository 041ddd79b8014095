//! The broker's registration in ZooKeeper, as Kafka's
//! `KafkaZkClient.registerBroker`: the ephemeral `/brokers/ids/<id>` with the
//! advertised listeners, at start-up and again under every new session.

use std::thread;

use crate::config::BrokerConfig;
use crate::metadata::topics;
use crate::metadata::{MetadataStore, StoreError};
use crate::zk::ZkClient;

/// Outcome of one attempt at `/brokers/ids/<id>` (Kafka's
/// checkedEphemeralCreate).
enum Registration {
    /// Created, or already there and owned by the current session (a create
    /// whose reply was lost to a connection loss).
    Done,
    /// Held by another session.
    HeldBy(i64),
}

/// A connection loss or a request timeout: the session may live on and the
/// request's outcome is unknown, so it is sent again (as Kafka's
/// ZooKeeperClient retries a request once reconnected).
fn is_transient(e: &StoreError) -> bool {
    matches!(e, StoreError::Io(io) if matches!(
        io.kind(),
        std::io::ErrorKind::ConnectionAborted | std::io::ErrorKind::TimedOut
    ))
}

/// Pause between attempts after a transient error.
const RETRY_BACKOFF: std::time::Duration = std::time::Duration::from_millis(200);

fn try_register(
    zk: &mut ZkClient,
    config: &BrokerConfig,
    broker_id: i32,
    path: &str,
) -> Result<Registration, String> {
    // Transient errors are retried for one session timeout: a create whose
    // reply was lost is found by the NodeExists check below.
    let retry_until = std::time::Instant::now()
        + std::time::Duration::from_millis(config.zookeeper_session_timeout_ms.max(0) as u64);
    let may_retry = |e: &StoreError| {
        let retry = is_transient(e) && std::time::Instant::now() < retry_until;
        if retry {
            log::warn!("{path}: {e}; retrying");
            thread::sleep(RETRY_BACKOFF);
        }
        retry
    };
    loop {
        let now = crate::util::now_ms() as i64;
        let created = topics::register_broker(
            zk,
            broker_id,
            &config.advertised_listeners,
            config.broker_rack.as_deref(),
            now,
        );
        match created {
            Ok(()) => return Ok(Registration::Done),
            Err(StoreError::NodeExists(_)) => match zk.ephemeral_owner(path) {
                Ok(Some(owner)) if owner == zk.session_id() => return Ok(Registration::Done),
                Ok(Some(owner)) => return Ok(Registration::HeldBy(owner)),
                // Gone while we looked: create again.
                Ok(None) => continue,
                Err(e) if may_retry(&e) => continue,
                Err(e) => return Err(format!("reading {path}: {e}")),
            },
            Err(e) if may_retry(&e) => continue,
            Err(e) => return Err(format!("registering {path}: {e}")),
        }
    }
}

/// Registers again under a new session (Kafka's registerBroker from
/// afterInitializingSession), one attempt: false while the node still
/// belongs to an older session. The node is ours in any case (our id, our
/// listener), so the caller retries until that session's expiry removes it.
pub fn reregister_broker(
    zk: &mut ZkClient,
    config: &BrokerConfig,
    broker_id: i32,
) -> Result<bool, String> {
    let path = format!("/brokers/ids/{broker_id}");
    match try_register(zk, config, broker_id, &path)? {
        Registration::Done => Ok(true),
        Registration::HeldBy(owner) => {
            log::debug!(
                "{path} is still held by ZooKeeper session 0x{owner:x} (current 0x{:x})",
                zk.session_id()
            );
            Ok(false)
        }
    }
}

/// Registers `/brokers/ids/<id>` at start-up. A node left by this broker's
/// previous session (same data, another owner) is waited out like Kafka
/// does for the old session to expire; a live other broker with the id is
/// an error.
pub fn register_broker(
    zk: &mut ZkClient,
    config: &BrokerConfig,
    broker_id: i32,
) -> Result<(), String> {
    let path = format!("/brokers/ids/{broker_id}");
    // A killed predecessor's session ends within one session timeout of
    // its last heartbeat; allow two for ZooKeeper's tick-based expiry.
    let deadline = std::time::Instant::now()
        + std::time::Duration::from_millis(2 * config.zookeeper_session_timeout_ms.max(0) as u64);
    loop {
        match try_register(zk, config, broker_id, &path)? {
            Registration::Done => return Ok(()),
            Registration::HeldBy(_) => {
                let owner_alive = zk.exists(&path).is_some();
                if owner_alive && std::time::Instant::now() >= deadline {
                    return Err(format!(
                        "Error while creating ephemeral at {path}, node already exists and owner does not match current session: \
                         another broker is registered with broker.id {broker_id}"
                    ));
                }
                if !owner_alive {
                    continue;
                }
                // The holder may be our own previous incarnation (kill -9 and a quick
                // restart): its session expires within the timeout. A live broker
                // keeps it, and start-up fails.
                if is_live_kafka_listener(zk, &path) {
                    return Err(format!(
                        "Error while creating ephemeral at {path}, node already exists and owner does not match current session: \
                         broker.id {broker_id} is registered by a live broker"
                    ));
                }
                thread::sleep(std::time::Duration::from_millis(200));
            }
        }
    }
}

/// True when the endpoint in a broker registration answers the Kafka protocol.
fn is_live_kafka_listener(zk: &mut ZkClient, path: &str) -> bool {
    let Ok((data, _)) = zk.get(path) else {
        return false;
    };
    let Some(info) = crate::metadata::image::decode_broker_registration(0, &data) else {
        return false;
    };
    crate::protocol::probe::kafka_server_answers(&info.host, info.port)
}
