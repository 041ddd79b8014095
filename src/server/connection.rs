//! One client connection on its shard: reads size-prefixed frames (the size is
//! checked against `socket.request.max.bytes` before anything is allocated,
//! and a request's resident memory grows only with the bytes that arrive), bounded by
//! the shard's share of `queued.max.request.bytes`; runs each request,
//! writes responses in request order.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use futures_lite::{AsyncRead, AsyncWriteExt};
use futures_rustls::TlsAcceptor;
use glommio::net::TcpStream;
use kafka_protocol::messages::ApiKey;
use kshard_shards::log::FileSlice;

use crate::handlers;
use crate::handlers::api_versions::unsupported_version_response;
use crate::handlers::txn_verification::produce_needs_coordinator;
use crate::handlers::KafkaApis;
use crate::protocol::principal::KafkaPrincipal;
use crate::protocol::{parse_request_from, Chunk, ClientIdentity, FrameError, Request, Response};
use crate::server::authenticator::{Exchange, SaslSession};
use crate::server::listener::ListenerSecurity;
use crate::server::request_memory::{Charge, RequestMemoryPool};
use crate::server::sendfile::{send_cached_bytes, send_with_read_ahead};
use crate::server::transport::Transport;

/// Bytes one read asks the socket for. Reads land in the shard's buffer
/// (`SHARD_READ_BUF`) and only the bytes received are copied to the
/// connection, so an idle connection holds no buffer and a request's
/// resident memory grows with its bytes, never with the size its prefix
/// declares (see `reserve_frame`).
const READ_CHUNK_BYTES: usize = 256 * 1024;

thread_local! {
    /// One read buffer per shard (a shard is one thread); borrowed only
    /// inside a synchronous `poll_read`, never across an await.
    static SHARD_READ_BUF: RefCell<Box<[u8]>> =
        RefCell::new(vec![0u8; READ_CHUNK_BYTES].into_boxed_slice());
}

pub async fn serve(
    ctx: Rc<KafkaApis>,
    pool: Rc<RequestMemoryPool>,
    stream: TcpStream,
    listener: Arc<ListenerSecurity>,
) {
    let peer = stream
        .peer_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    let client_host: Arc<str> = match stream.peer_addr() {
        Ok(a) => Arc::from(format!("/{}", a.ip())),
        Err(_) => Arc::from(""),
    };
    // connections.max.idle.ms: a connection that sends nothing for that long
    // is closed, as Kafka's processor does; this timeout covers the TLS
    // handshake, `read_some` the requests.
    if ctx.config.connections_max_idle_ms > 0 {
        let idle = Duration::from_millis(ctx.config.connections_max_idle_ms as u64);
        if let Err(e) = stream.set_read_timeout(Some(idle)) {
            log::debug!("connection {peer}: {e}");
            return;
        }
    }
    let (mut transport, principal) = match establish(stream, &listener).await {
        Ok(established) => established,
        Err(e) => {
            log::info!("Failed authentication with {peer} ({e})");
            return;
        }
    };
    // From here `read_some` keeps the idle timer: glommio's would stay
    // armed across reads that bypass it (see `Transport::try_recv_into_spare`).
    if let Err(e) = transport.set_read_timeout(None) {
        log::debug!("connection {peer}: {e}");
        return;
    }
    let connection = Connection {
        listener: &listener,
        identity: ClientIdentity {
            client_host,
            principal: Arc::new(principal),
            listener_name: Arc::from(listener.endpoint.listener_name.as_str()),
        },
    };
    if let Err(e) = serve_inner(&ctx, &pool, &mut transport, connection).await {
        log::debug!("connection {peer} closed: {e}");
    }
}

/// The TLS handshake on SSL and SASL_SSL listeners, with the principal the
/// certificate gives (ANONYMOUS on plaintext and without a client
/// certificate). A failed handshake closes the connection after
/// `connection.failed.authentication.delay.ms`, as Kafka delays it.
async fn establish(
    stream: TcpStream,
    listener: &ListenerSecurity,
) -> Result<(Transport, KafkaPrincipal), String> {
    let Some(tls) = listener.tls.as_ref().map(|t| t.current()) else {
        return Ok((Transport::Plain(stream), KafkaPrincipal::anonymous()));
    };
    let accepted = TlsAcceptor::from(tls.server_config())
        .accept(stream)
        .await
        .map_err(|e| format!("SSL handshake failed: {e}"))
        .and_then(|stream| {
            // A subject no mapping rule matches fails the connection, as
            // in Kafka (never ANONYMOUS, which ACLs may allow more).
            let principal = tls
                .principal_of(stream.get_ref().1.peer_certificates())
                .map_err(|e| format!("{}: {}", e.key, e.message))?;
            Ok((Transport::Tls(Box::new(stream)), principal))
        });
    if accepted.is_err() {
        let delay_ms = listener.failed_authentication_delay_ms;
        if delay_ms > 0 {
            glommio::timer::sleep(Duration::from_millis(delay_ms)).await;
        }
    }
    accepted
}

/// Who is on the other end of a connection.
struct Connection<'a> {
    listener: &'a ListenerSecurity,
    identity: ClientIdentity,
}

/// What one read may take, and the largest frame a size prefix may declare.
#[derive(Clone, Copy)]
struct ReadLimits {
    read_bytes_max: usize,
    max_request_bytes: usize,
}

/// Reads once (at most `limits.read_bytes_max`) and appends what arrived to
/// `buf`, charging it to `charge`. While the shard's request memory is
/// full the connection does not read (Kafka mutes the channel while its
/// memory pool is exhausted); the check and the read happen in the same
/// poll, so connections waiting for bytes cannot all pass the check and
/// then overrun the pool together. A connection that receives nothing for
/// `connections.max.idle.ms`, muted or not, is closed, as Kafka expires an
/// idle channel. Cancel-safe: bytes are appended only when the read
/// completes.
///
/// Once a frame's buffer is reserved (`reserve_frame`), a plaintext read
/// goes straight into it; other reads land in the shard's buffer and are
/// copied. `drained` remembers that a direct read emptied the socket, so
/// the next read waits through glommio at once instead of trying again.
async fn read_some(
    pool: &RequestMemoryPool,
    idle_ms: i64,
    stream: &mut Transport,
    buf: &mut BytesMut,
    charge: &mut Charge,
    limits: ReadLimits,
    drained: &mut bool,
) -> Result<(), String> {
    let ReadLimits {
        read_bytes_max,
        max_request_bytes,
    } = limits;
    assert!(read_bytes_max > 0 && read_bytes_max <= READ_CHUNK_BYTES);
    let mut idle_timer: Option<glommio::timer::Timer> = None;
    let n = futures_lite::future::poll_fn(|cx| {
        let muted = !pool.may_read(charge);
        if muted {
            pool.wake_when_may_read(cx.waker());
        } else if let Poll::Ready(read) =
            poll_read_into(cx, stream, buf, read_bytes_max, max_request_bytes, drained)
        {
            if let Ok(n) = read {
                charge.add(n);
            }
            return Poll::Ready(read);
        }
        if idle_ms > 0 {
            let idle = Duration::from_millis(idle_ms as u64);
            let timer = idle_timer.get_or_insert_with(|| glommio::timer::Timer::new(idle));
            if Pin::new(timer).poll(cx).is_ready() {
                return Poll::Ready(Err(if muted {
                    format!("muted for connections.max.idle.ms {idle_ms}: queued.max.request.bytes in use")
                } else {
                    format!("idle for connections.max.idle.ms {idle_ms}")
                }));
            }
        }
        Poll::Pending
    })
    .await?;
    if n == 0 {
        return Err("peer closed".into());
    }
    Ok(())
}

/// One read's attempt for `read_some`: directly into `buf` when its frame's
/// room is reserved and the socket was not just drained, else through the
/// shard's buffer (which registers the wait for the socket).
fn poll_read_into(
    cx: &mut std::task::Context<'_>,
    stream: &mut Transport,
    buf: &mut BytesMut,
    read_bytes_max: usize,
    max_request_bytes: usize,
    drained: &mut bool,
) -> Poll<Result<usize, String>> {
    let reserved = buf.len() >= 4 && buf.capacity() - buf.len() >= read_bytes_max;
    if reserved && !*drained {
        match stream.try_recv_into_spare(buf, read_bytes_max) {
            Ok(Some(n)) => {
                *drained = n < read_bytes_max;
                return Poll::Ready(Ok(n));
            }
            Ok(None) => {}
            Err(e) => return Poll::Ready(Err(e.to_string())),
        }
    }
    *drained = false;
    SHARD_READ_BUF.with(|shared| {
        let Ok(mut chunk) = shared.try_borrow_mut() else {
            return Poll::Ready(Err("shard read buffer in use".to_string()));
        };
        match Pin::new(&mut *stream).poll_read(cx, &mut chunk[..read_bytes_max]) {
            Poll::Ready(Ok(n)) => {
                reserve_frame(buf, &chunk[..n], max_request_bytes);
                buf.extend_from_slice(&chunk[..n]);
                Poll::Ready(Ok(n))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e.to_string())),
            Poll::Pending => Poll::Pending,
        }
    })
}

/// Splits the next whole frame (without its size prefix) off `buf`, or
/// says how many bytes `buf` must hold before it can. An emptied `buf`
/// lets go of its memory (the frames split off keep what they use).
fn take_frame(
    buf: &mut BytesMut,
    max_request_bytes: usize,
) -> Result<Result<Bytes, usize>, String> {
    if buf.len() < 4 {
        return Ok(Err(4));
    }
    let size = i32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]);
    if size < 0 || size as usize > max_request_bytes {
        return Err(format!(
            "request size {size} exceeds socket.request.max.bytes {max_request_bytes}"
        ));
    }
    let size = size as usize;
    if buf.len() < 4 + size {
        return Ok(Err(4 + size));
    }
    let mut frame = buf.split_to(4 + size);
    let frame: Bytes = frame.split_off(4).freeze();
    if buf.is_empty() {
        *buf = BytesMut::new();
    }
    Ok(Ok(frame))
}

/// The bytes the next read may take: no more than the frame being read
/// still misses, so a frame's buffer (see `reserve_frame`) never overflows
/// into a regrowth when a pipelining client's next frame follows it.
fn read_bytes_max(buf: &BytesMut, frame_bytes: usize) -> usize {
    if buf.len() >= 4 && frame_bytes > buf.len() {
        return (frame_bytes - buf.len()).min(READ_CHUNK_BYTES);
    }
    READ_CHUNK_BYTES
}

/// Before `incoming` is appended to `buf` (which holds at most the start of
/// one frame): once the frame's body starts arriving, its whole buffer is
/// reserved, so the rest lands without regrowing (each regrowth copied the
/// bytes so far and touched fresh pages: a tenth of the broker's CPU with
/// 100-byte records). Reserved pages that no byte has reached are address
/// space, not memory, so resident memory still grows only with the bytes
/// received, which is what the pool charges; a bare size prefix reserves
/// nothing, and a size past `max_request_bytes` is left to `take_frame`.
fn reserve_frame(buf: &mut BytesMut, incoming: &[u8], max_request_bytes: usize) {
    let held_bytes = buf.len() + incoming.len();
    if held_bytes <= 4 {
        return;
    }
    let mut prefix = [0u8; 4];
    for (i, byte) in prefix.iter_mut().enumerate() {
        *byte = if i < buf.len() {
            buf[i]
        } else {
            incoming[i - buf.len()]
        };
    }
    let size = i32::from_be_bytes(prefix);
    if size < 0 || size as usize > max_request_bytes {
        return;
    }
    let frame_bytes = 4 + size as usize;
    if frame_bytes > held_bytes {
        buf.reserve(frame_bytes - buf.len());
    }
}

async fn write_response(
    ctx: &KafkaApis,
    stream: &mut Transport,
    resp: Response,
    scratch: &mut Vec<u8>,
) -> Result<(), String> {
    if resp
        .chunks
        .iter()
        .any(|c| matches!(c, Chunk::File(f) if f.direct && f.cached.is_none()))
    {
        send_with_read_ahead(stream, resp.chunks, &ctx.replica_manager.read_cache)
            .await
            .map_err(|e| e.to_string())?;
        return stream.finish_response().await.map_err(|e| e.to_string());
    }
    for chunk in resp.chunks {
        match chunk {
            Chunk::Bytes(b) => stream.write_all(&b).await.map_err(|e| e.to_string())?,
            Chunk::File(FileSlice {
                cached: Some(b), ..
            }) => send_cached_bytes(stream, &b)
                .await
                .map_err(|e| e.to_string())?,
            Chunk::File(f) => stream
                .send_file(&f, scratch)
                .await
                .map_err(|e| e.to_string())?,
        }
    }
    stream.finish_response().await.map_err(|e| e.to_string())
}

/// A handler's future, timed while it is polled: the time the request
/// kept its shard busy (Kafka's request handler thread time), without the
/// time it waited for replicas, other shards or the purgatory.
struct Timed<F> {
    inner: Pin<Box<F>>,
    busy_nanos: u64,
}

impl<F: Future> Future for Timed<F> {
    type Output = (F::Output, u64);

    fn poll(mut self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> Poll<Self::Output> {
        let started = Instant::now();
        let polled = self.inner.as_mut().poll(cx);
        self.busy_nanos += started.elapsed().as_nanos() as u64;
        polled.map(|out| (out, self.busy_nanos))
    }
}

/// Runs a request's handler and charges the time it kept the shard busy to
/// the client's request quota (`request_percentage`); over quota, the
/// connection is muted for the throttle time, as Kafka's request quota
/// throttles every API but the cluster's own.
async fn dispatch_timed(ctx: &Rc<KafkaApis>, req: Request) -> handlers::HandlerResult {
    if !ctx.quotas.request.quotas_enabled() {
        return handlers::dispatch(ctx, req).await;
    }
    let client_id = req.header.client_id.as_deref().unwrap_or("").to_string();
    let principal = req.principal.clone();
    let timed = Timed {
        inner: Box::pin(handlers::dispatch(ctx, req)),
        busy_nanos: 0,
    };
    let (mut result, busy_nanos) = timed.await;
    let throttle_ms = ctx.quota_caches.record_request(
        &ctx.quotas,
        &principal.name,
        &client_id,
        busy_nanos,
        crate::util::monotonic_ms(),
    );
    if let Ok(Some(resp)) = &mut result {
        resp.throttle_ms = resp.throttle_ms.max(throttle_ms);
    }
    result
}

/// A pipelined produce: its handler runs as its own task; its answer is
/// written in request order.
type InFlight = glommio::Task<handlers::HandlerResult>;

/// Whether a Produce request may need partition verification (KIP-890): it
/// names a transactional id (its first field: a nullable string, compact
/// from v9) and verification is on. Such a request runs alone, as Kafka
/// runs every request: its appends wait for the coordinator's answer, and
/// a later request of the producer must not overtake them.
fn verifies_transaction(ctx: &KafkaApis, req: &Request) -> bool {
    const FLEXIBLE_VERSION: i16 = 9;
    if !produce_needs_coordinator(ctx, req.api_version) || req.api_version < 3 {
        return false;
    }
    let b = &req.body;
    if req.api_version >= FLEXIBLE_VERSION {
        // Unsigned varint of length + 1; 0 is null.
        b.first().is_some_and(|&n| n != 0)
    } else {
        b.len() >= 2 && i16::from_be_bytes([b[0], b[1]]) >= 0
    }
}

/// Produce requests one connection may have in flight at once. Kafka's broker
/// reads the next request only after answering the last; reading ahead lets
/// a producer's pipelined requests share appends and disk writes.
const MAX_PIPELINED_PRODUCES: usize = 16;

/// Until when a throttled connection reads nothing (Kafka mutes the
/// channel for a response's throttle time, KIP-219).
#[derive(Default)]
struct Mute(Cell<Option<Instant>>);

impl Mute {
    fn extend(&self, throttle_ms: u32) {
        if throttle_ms == 0 {
            return;
        }
        let until = Instant::now() + Duration::from_millis(u64::from(throttle_ms));
        if self.0.get().is_none_or(|t| t < until) {
            self.0.set(Some(until));
        }
    }

    /// How long reading must still wait; clears an expired mute.
    fn remaining(&self) -> Option<Duration> {
        let until = self.0.get()?;
        let now = Instant::now();
        if until <= now {
            self.0.set(None);
            return None;
        }
        Some(until - now)
    }
}

async fn write_result(
    ctx: &KafkaApis,
    stream: &mut Transport,
    result: handlers::HandlerResult,
    scratch: &mut Vec<u8>,
    mute: &Mute,
) -> Result<(), String> {
    let written = match result {
        Ok(Some(resp)) => {
            mute.extend(resp.throttle_ms);
            write_response(ctx, stream, resp, scratch).await
        }
        Ok(None) => Ok(()),
        Err(e) => Err(e),
    };
    // The copy fallback of sendfile filled it: not kept while idle.
    if scratch.capacity() > 0 {
        *scratch = Vec::new();
    }
    written
}

/// Writes the answers of all pipelined requests, oldest first.
async fn drain_in_flight(
    ctx: &KafkaApis,
    stream: &mut Transport,
    in_flight: &mut VecDeque<InFlight>,
    scratch: &mut Vec<u8>,
    mute: &Mute,
) -> Result<(), String> {
    while let Some(task) = in_flight.pop_front() {
        let result = task.await;
        write_result(ctx, stream, result, scratch, mute).await?;
    }
    Ok(())
}

/// What finished first while a connection waited for its next frame.
enum Woken {
    Read(Result<(), String>),
    Answered(handlers::HandlerResult),
    Unmuted,
}

/// A connection's reading state.
struct Reader<'a> {
    pool: &'a RequestMemoryPool,
    /// Bytes received and not yet split into a frame.
    buf: BytesMut,
    /// What `buf` holds, charged to `pool`.
    charge: Charge,
    max_request_bytes: usize,
    idle_ms: i64,
    mute: &'a Mute,
    /// The last read took everything the socket had (see `read_some`).
    drained: bool,
}

impl Reader<'_> {
    /// The next frame with its charge; answers of pipelined produces go out
    /// as they finish.
    async fn next_frame(
        &mut self,
        ctx: &KafkaApis,
        stream: &mut Transport,
        in_flight: &mut VecDeque<InFlight>,
        scratch: &mut Vec<u8>,
    ) -> Result<(Bytes, Charge), String> {
        let Reader {
            pool,
            buf,
            charge,
            max_request_bytes,
            idle_ms,
            mute,
            drained,
        } = self;
        loop {
            // A throttled connection takes no request, read or buffered,
            // until its mute ends; answers of earlier requests still go out.
            if let Some(wait) = mute.remaining() {
                let woken = match in_flight.front_mut() {
                    Some(front) => {
                        futures_lite::future::or(
                            async {
                                glommio::timer::sleep(wait).await;
                                Woken::Unmuted
                            },
                            async { Woken::Answered(front.await) },
                        )
                        .await
                    }
                    None => {
                        glommio::timer::sleep(wait).await;
                        Woken::Unmuted
                    }
                };
                if let Woken::Answered(result) = woken {
                    in_flight.pop_front();
                    write_result(ctx, stream, result, scratch, mute).await?;
                }
                continue;
            }
            let limits = match take_frame(buf, *max_request_bytes)? {
                Ok(frame) => {
                    let frame_charge = charge.split(4 + frame.len());
                    return Ok((frame, frame_charge));
                }
                Err(frame_bytes) => ReadLimits {
                    read_bytes_max: read_bytes_max(buf, frame_bytes),
                    max_request_bytes: *max_request_bytes,
                },
            };
            let Some(front) = in_flight.front_mut() else {
                read_some(pool, *idle_ms, stream, buf, charge, limits, drained).await?;
                continue;
            };
            let woken = futures_lite::future::or(
                async {
                    let read = read_some(pool, *idle_ms, stream, buf, charge, limits, drained);
                    Woken::Read(read.await)
                },
                async { Woken::Answered(front.await) },
            )
            .await;
            match woken {
                Woken::Read(r) => r?,
                Woken::Answered(result) => {
                    in_flight.pop_front();
                    write_result(ctx, stream, result, scratch, mute).await?;
                }
                Woken::Unmuted => {}
            }
        }
    }
}

/// The frames and answers of one connection, for the SASL exchange
/// (which reads and answers requests before the connection serves any).
pub struct FrameIo<'a, 'r> {
    ctx: &'a Rc<KafkaApis>,
    reader: &'a mut Reader<'r>,
    stream: &'a mut Transport,
    scratch: &'a mut Vec<u8>,
    in_flight: &'a mut VecDeque<InFlight>,
}

impl FrameIo<'_, '_> {
    /// The next frame, its bytes no longer charged (a SASL exchange's).
    pub async fn next_frame(&mut self) -> Result<Bytes, String> {
        let (frame, _charge) = self.next_charged_frame().await?;
        Ok(frame)
    }

    async fn next_charged_frame(&mut self) -> Result<(Bytes, Charge), String> {
        self.reader
            .next_frame(self.ctx, self.stream, self.in_flight, self.scratch)
            .await
    }

    pub async fn write(&mut self, result: handlers::HandlerResult) -> Result<(), String> {
        let mute = self.reader.mute;
        write_result(self.ctx, self.stream, result, self.scratch, mute).await
    }

    /// An answer already encoded.
    pub async fn write_bytes(&mut self, bytes: &[u8]) -> Result<(), String> {
        self.stream
            .write_all(bytes)
            .await
            .map_err(|e| e.to_string())?;
        self.stream
            .finish_response()
            .await
            .map_err(|e| e.to_string())
    }

    /// Writes the answers of every pipelined produce, oldest first.
    async fn drain(&mut self) -> Result<(), String> {
        let mute = self.reader.mute;
        drain_in_flight(self.ctx, self.stream, self.in_flight, self.scratch, mute).await
    }
}

/// A SASL exchange on a SASL listener: the first (`previous` None), or a
/// re-authentication started by `first_frame`.
async fn sasl_exchange(
    io: &mut FrameIo<'_, '_>,
    listener: &ListenerSecurity,
    identity: &ClientIdentity,
    previous: Option<&SaslSession>,
    first_frame: Option<Bytes>,
) -> Result<SaslSession, String> {
    let sasl = listener.sasl.as_ref().expect("a SASL listener");
    let ctx = io.ctx;
    let exchange = Exchange {
        ctx,
        listener,
        sasl,
        identity,
        previous,
    };
    exchange.run(io, first_frame).await
}

/// The API key of a frame (its first two bytes).
fn api_key_of(frame: &Bytes) -> Option<i16> {
    (frame.len() >= 2).then(|| i16::from_be_bytes([frame[0], frame[1]]))
}

async fn serve_inner(
    ctx: &Rc<KafkaApis>,
    pool: &Rc<RequestMemoryPool>,
    stream: &mut Transport,
    connection: Connection<'_>,
) -> Result<(), String> {
    let mute = Mute::default();
    let mut reader = Reader {
        pool,
        buf: BytesMut::new(),
        charge: pool.charge(),
        max_request_bytes: ctx.config.socket_request_max_bytes.max(0) as usize,
        idle_ms: ctx.config.connections_max_idle_ms,
        mute: &mute,
        drained: false,
    };
    let mut scratch = Vec::new();
    let mut in_flight: VecDeque<InFlight> = VecDeque::new();
    let mut io = FrameIo {
        ctx,
        reader: &mut reader,
        stream,
        scratch: &mut scratch,
        in_flight: &mut in_flight,
    };
    let Connection {
        listener,
        mut identity,
    } = connection;
    let mut session: Option<SaslSession> = None;
    if listener.sasl.is_some() {
        let authenticated = authenticate(&mut io, listener, &identity).await?;
        identity.principal = authenticated.principal.clone();
        session = Some(authenticated);
    }
    loop {
        if ctx.is_shutting_down() {
            return Ok(());
        }
        let (frame, frame_charge) = io.next_charged_frame().await?;
        if let Some(current) = &session {
            // KIP-368: a SaslHandshake on an authenticated connection starts
            // a re-authentication; past the session's end nothing else is
            // served.
            if current.renewable() && api_key_of(&frame) == Some(ApiKey::SaslHandshake as i16) {
                io.drain().await?;
                drop(frame_charge);
                let renewed =
                    sasl_exchange(&mut io, listener, &identity, Some(current), Some(frame)).await?;
                session = Some(renewed);
                continue;
            }
            if current.expired(Instant::now()) {
                return Err(format!(
                    "authentication session of {} expired (connections.max.reauth.ms)",
                    current.principal
                ));
            }
        }
        serve_frame(&mut io, &identity, frame, frame_charge).await?;
    }
}

/// The first SASL exchange; until it is done a client may send no more
/// than Kafka lets it (`sasl.server.max.receive.size`).
async fn authenticate(
    io: &mut FrameIo<'_, '_>,
    listener: &ListenerSecurity,
    identity: &ClientIdentity,
) -> Result<SaslSession, String> {
    let sasl = listener.sasl.as_ref().expect("a SASL listener");
    let max_request_bytes = io.reader.max_request_bytes;
    io.reader.max_request_bytes = sasl.max_receive_bytes.min(max_request_bytes);
    let session = sasl_exchange(io, listener, identity, None, None).await?;
    io.reader.max_request_bytes = max_request_bytes;
    Ok(session)
}

/// One request of an authenticated connection: an inter-broker request, a
/// pipelined produce, or anything else alone after the produces before it.
async fn serve_frame(
    io: &mut FrameIo<'_, '_>,
    identity: &ClientIdentity,
    frame: Bytes,
    frame_charge: Charge,
) -> Result<(), String> {
    let ctx = io.ctx;
    if ctx.cluster.is_some() {
        if let Some(api_key) = api_key_of(&frame) {
            if handlers::inter_broker::versions(api_key).is_some() {
                io.drain().await?;
                let resp = handlers::inter_broker::serve(ctx, identity, frame).await?;
                drop(frame_charge);
                return io.write_bytes(&resp).await;
            }
        }
    }
    match parse_request_from(frame, identity) {
        // Once produce quotas exist, a request waits for the answer
        // before it (and its throttle) as in Kafka, which takes one
        // request per connection at a time.
        Ok(req)
            if req.api_key == ApiKey::Produce
                && !verifies_transaction(ctx, &req)
                && !ctx.quotas.produce.quotas_enabled() =>
        {
            // Applied in request order: each handler appends (or sends to
            // the owning shards) in its first poll, and tasks start in
            // the order they are spawned.
            while io.in_flight.len() >= MAX_PIPELINED_PRODUCES {
                let task = io.in_flight.pop_front().expect("non-empty");
                let result = task.await;
                io.write(result).await?;
            }
            let ctx = ctx.clone();
            // The request's bytes stay charged until its handler is done.
            io.in_flight.push_back(glommio::spawn_local(async move {
                let result = dispatch_timed(&ctx, req).await;
                drop(frame_charge);
                result
            }));
            Ok(())
        }
        Ok(req) => {
            io.drain().await?;
            let result = dispatch_timed(ctx, req).await;
            drop(frame_charge);
            io.write(result).await
        }
        Err(FrameError::UnsupportedVersion {
            api_key: ApiKey::ApiVersions,
            correlation_id,
            ..
        }) => {
            io.drain().await?;
            io.write_bytes(&unsupported_version_response(correlation_id))
                .await
        }
        Err(e) => Err(format!("bad request: {e:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame_start(size: i32, body_bytes: usize) -> Vec<u8> {
        let mut v = size.to_be_bytes().to_vec();
        v.resize(4 + body_bytes, 7);
        v
    }

    #[test]
    fn a_frame_is_reserved_whole_once_its_body_arrives() {
        let mut buf = BytesMut::new();
        reserve_frame(&mut buf, &frame_start(1 << 20, 0), 100 << 20);
        assert_eq!(buf.capacity(), 0, "a bare size prefix reserves nothing");

        let incoming = frame_start(1 << 20, 10);
        reserve_frame(&mut buf, &incoming, 100 << 20);
        assert!(buf.capacity() >= 4 + (1 << 20));
        buf.extend_from_slice(&incoming);
        assert_eq!(read_bytes_max(&buf, 4 + (1 << 20)), READ_CHUNK_BYTES);

        // The last read of a frame asks for exactly what it misses.
        buf.resize(4 + (1 << 20) - 100, 0);
        assert_eq!(read_bytes_max(&buf, 4 + (1 << 20)), 100);
    }

    #[test]
    fn a_prefix_split_over_reads_is_read_whole() {
        let whole = frame_start(300_000, 20);
        let mut buf = BytesMut::from(&whole[..2]);
        reserve_frame(&mut buf, &whole[2..], 100 << 20);
        assert!(buf.capacity() >= 300_004);
    }

    #[test]
    fn bad_or_complete_frames_reserve_nothing() {
        for size in [-1, (100 << 20) + 1] {
            let mut buf = BytesMut::new();
            reserve_frame(&mut buf, &frame_start(size, 10), 100 << 20);
            assert_eq!(buf.capacity(), 0);
        }
        let mut buf = BytesMut::new();
        reserve_frame(&mut buf, &frame_start(10, 10), 100 << 20);
        assert_eq!(
            buf.capacity(),
            0,
            "a frame that arrived whole needs no reservation"
        );
    }
}
