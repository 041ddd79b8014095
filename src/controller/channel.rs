//! ControllerChannelManager: one sender thread per live broker, as Kafka's
//! RequestSendThread. Requests to a broker go out one at a time in queue
//! order over a blocking connection to its inter-broker listener; a failed
//! send reconnects and retries the same request until the broker is removed.

use std::collections::HashMap;
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use async_io::{block_on, Async, Timer};
use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::protocol::Encodable;

use crate::protocol::client_frame::encode_request_frame;
use crate::protocol::inter_broker;
use crate::security::inter_broker::{
    connect_failure_level, exchange_frame, ClientStream, InterBrokerSecurity,
};

/// The controller's connection to one broker: a std socket driven by
/// async-io's reactor on the sender thread (TLS needs a socket that can
/// say "not yet").
type BrokerStream = ClientStream<Async<TcpStream>>;

/// Largest response the controller accepts (responses are small lists of errors).
const MAX_RESPONSE_BYTES: usize = 64 << 20;
const RECONNECT_BACKOFF_MS: u64 = 100;

pub type ResponseCallback = Box<dyn FnOnce(Bytes) + Send>;

/// An encoded request body and what to do with the response body.
pub struct QueuedRequest {
    pub api_key: i16,
    pub api_version: i16,
    pub body: Bytes,
    pub on_response: Option<ResponseCallback>,
}

impl QueuedRequest {
    pub fn new<M: Encodable>(
        api_key: i16,
        api_version: i16,
        body: &M,
        on_response: Option<ResponseCallback>,
    ) -> Result<QueuedRequest, String> {
        let mut buf = BytesMut::new();
        body.encode(&mut buf, api_version)
            .map_err(|e| format!("encoding API {api_key} v{api_version}: {e}"))?;
        Ok(QueuedRequest {
            api_key,
            api_version,
            body: buf.freeze(),
            on_response,
        })
    }
}

struct BrokerChannel {
    queue: crossbeam_channel::Sender<QueuedRequest>,
    alive: Arc<AtomicBool>,
    address: (String, u16),
}

pub struct ControllerChannelManager {
    controller_id: i32,
    socket_timeout_ms: u64,
    security: Arc<InterBrokerSecurity>,
    brokers: HashMap<i32, BrokerChannel>,
}

impl ControllerChannelManager {
    pub fn new(
        controller_id: i32,
        socket_timeout_ms: u64,
        security: Arc<InterBrokerSecurity>,
    ) -> Self {
        ControllerChannelManager {
            controller_id,
            socket_timeout_ms,
            security,
            brokers: HashMap::new(),
        }
    }

    /// Starts (or restarts, if the address changed) the sender for `broker_id`.
    pub fn add_broker(&mut self, broker_id: i32, host: &str, port: u16) {
        let address = (host.to_string(), port);
        if let Some(existing) = self.brokers.get(&broker_id) {
            if existing.address == address {
                return;
            }
            self.remove_broker(broker_id);
        }
        let (tx, rx) = crossbeam_channel::unbounded::<QueuedRequest>();
        let alive = Arc::new(AtomicBool::new(true));
        let sender = RequestSendThread {
            target_broker_id: broker_id,
            address: address.clone(),
            client_id: format!("kshard-controller-{}", self.controller_id),
            socket_timeout_ms: self.socket_timeout_ms,
            security: self.security.clone(),
            alive: alive.clone(),
            stream: None,
            next_correlation_id: 0,
        };
        let spawned = thread::Builder::new()
            .name(format!("controller-to-broker-{broker_id}"))
            .spawn(move || sender.run(rx));
        if let Err(e) = spawned {
            log::error!("starting the controller sender for broker {broker_id}: {e}");
            return;
        }
        self.brokers.insert(
            broker_id,
            BrokerChannel {
                queue: tx,
                alive,
                address,
            },
        );
    }

    /// Stops the sender; requests still queued for the broker are dropped.
    pub fn remove_broker(&mut self, broker_id: i32) {
        if let Some(ch) = self.brokers.remove(&broker_id) {
            ch.alive.store(false, Ordering::Release);
        }
    }

    pub fn remove_all(&mut self) {
        let ids: Vec<i32> = self.brokers.keys().copied().collect();
        for id in ids {
            self.remove_broker(id);
        }
    }

    pub fn send(&self, broker_id: i32, req: QueuedRequest) {
        match self.brokers.get(&broker_id) {
            Some(ch) => {
                let _ = ch.queue.send(req);
            }
            None => log::debug!(
                "no channel to broker {broker_id}; request {} dropped",
                req.api_key
            ),
        }
    }
}

impl Drop for ControllerChannelManager {
    fn drop(&mut self) {
        self.remove_all();
    }
}

struct RequestSendThread {
    target_broker_id: i32,
    address: (String, u16),
    client_id: String,
    socket_timeout_ms: u64,
    security: Arc<InterBrokerSecurity>,
    alive: Arc<AtomicBool>,
    stream: Option<BrokerStream>,
    next_correlation_id: i32,
}

impl RequestSendThread {
    fn run(mut self, rx: crossbeam_channel::Receiver<QueuedRequest>) {
        while self.alive.load(Ordering::Acquire) {
            let Ok(req) = rx.recv_timeout(Duration::from_millis(200)) else {
                continue;
            };
            let mut req = Some(req);
            while let Some(r) = req.take() {
                if !self.alive.load(Ordering::Acquire) {
                    break;
                }
                match self.round_trip(&r) {
                    Ok(body) => {
                        if let Some(cb) = r.on_response {
                            cb(body);
                        }
                    }
                    Err(e) => {
                        log::log!(
                            connect_failure_level(&e),
                            "controller request {} to broker {} at {}:{} failed: {e}; retrying",
                            r.api_key,
                            self.target_broker_id,
                            self.address.0,
                            self.address.1
                        );
                        self.stream = None;
                        thread::sleep(Duration::from_millis(RECONNECT_BACKOFF_MS));
                        req = Some(r);
                    }
                }
            }
        }
    }

    fn connect(&mut self) -> std::io::Result<&mut BrokerStream> {
        if self.stream.as_ref().is_some_and(|s| s.session_expiring()) {
            self.stream = None;
        }
        if self.stream.is_none() {
            let addr = (self.address.0.as_str(), self.address.1)
                .to_socket_addrs()?
                .next()
                .ok_or_else(|| std::io::Error::other("address does not resolve"))?;
            let (security, host, client_id) = (&self.security, &self.address.0, &self.client_id);
            let secured = block_on(within(self.socket_timeout_ms, async {
                let tcp = Async::<TcpStream>::connect(addr).await?;
                tcp.get_ref().set_nodelay(true)?;
                security.open(tcp, host, client_id).await
            }))?;
            self.stream = Some(secured);
        }
        Ok(self.stream.as_mut().expect("connected"))
    }

    fn round_trip(&mut self, req: &QueuedRequest) -> std::io::Result<Bytes> {
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id = self.next_correlation_id.wrapping_add(1);
        let header_version = inter_broker::request_header_version(req.api_key, req.api_version);
        let frame = encode_request_frame(
            req.api_key,
            req.api_version,
            header_version,
            correlation_id,
            &self.client_id,
            &req.body,
        );
        let response_header_version =
            inter_broker::response_header_version(req.api_key, req.api_version);
        let timeout_ms = self.socket_timeout_ms;
        let stream = self.connect()?;
        let mut body = block_on(within(
            timeout_ms,
            exchange_frame(stream, &frame, MAX_RESPONSE_BYTES),
        ))?;
        let got = body.get_i32();
        if got != correlation_id {
            return Err(std::io::Error::other(format!(
                "correlation id {got}, expected {correlation_id}"
            )));
        }
        if response_header_version >= 1 {
            skip_tagged_fields(&mut body)?;
        }
        Ok(body)
    }
}

/// `exchange`, failed with TimedOut after `timeout_ms` (the sender's
/// socket timeout: `controller.socket.timeout.ms`).
async fn within<T>(
    timeout_ms: u64,
    exchange: impl std::future::Future<Output = std::io::Result<T>>,
) -> std::io::Result<T> {
    let timeout = async {
        Timer::after(Duration::from_millis(timeout_ms.max(1))).await;
        Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!("no answer in {timeout_ms} ms"),
        ))
    };
    futures_lite::future::or(exchange, timeout).await
}

fn read_unsigned_varint(buf: &mut Bytes) -> std::io::Result<u32> {
    let mut value: u32 = 0;
    for i in 0..5 {
        if !buf.has_remaining() {
            return Err(std::io::Error::other("truncated varint"));
        }
        let b = buf.get_u8();
        value |= u32::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err(std::io::Error::other("varint too long"))
}

/// Skips a tagged-field section (flexible-version headers and bodies).
pub fn skip_tagged_fields(buf: &mut Bytes) -> std::io::Result<()> {
    let n = read_unsigned_varint(buf)?;
    for _ in 0..n {
        let _tag = read_unsigned_varint(buf)?;
        let len = read_unsigned_varint(buf)? as usize;
        if buf.remaining() < len {
            return Err(std::io::Error::other("truncated tagged field"));
        }
        buf.advance(len);
    }
    Ok(())
}

/// Sends one request and waits for its response body, on a fresh
/// connection (the broker's side of controlled shutdown).
pub fn blocking_request(
    host: &str,
    port: u16,
    req: &QueuedRequest,
    client_id: &str,
    timeout_ms: u64,
    security: Arc<InterBrokerSecurity>,
) -> std::io::Result<Bytes> {
    let mut t = RequestSendThread {
        target_broker_id: -1,
        address: (host.to_string(), port),
        client_id: client_id.to_string(),
        socket_timeout_ms: timeout_ms,
        security,
        alive: Arc::new(AtomicBool::new(true)),
        stream: None,
        next_correlation_id: 1,
    };
    t.round_trip(req)
}
