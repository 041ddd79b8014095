//! One client connection on its shard: reads size-prefixed frames (the size is
//! checked against `socket.request.max.bytes` before anything is allocated),
//! runs each request, writes responses in request order.

use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use futures_lite::{AsyncReadExt, AsyncWriteExt};
use glommio::net::TcpStream;
use kafka_protocol::messages::ApiKey;
use kshard_shards::log::FileSlice;

use crate::handlers;
use crate::handlers::api_versions::unsupported_version_response;
use crate::protocol::{parse_request, Chunk, FrameError, Response};
use crate::server::sendfile::{send_cached_bytes, send_file_slice, send_with_read_ahead};
use crate::shard_context::ShardContext;

const READ_CHUNK_BYTES: usize = 64 * 1024;

pub async fn serve(ctx: Rc<ShardContext>, mut stream: TcpStream) {
    let peer = stream
        .peer_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    if let Err(e) = serve_inner(&ctx, &mut stream).await {
        log::debug!("connection {peer} closed: {e}");
    }
}

/// Reads once into `buf`, growing it by `want` bytes first. Cancel-safe: if
/// the future is dropped before the read completes, `buf` is as it was.
async fn read_some(stream: &mut TcpStream, buf: &mut BytesMut, want: usize) -> Result<(), String> {
    /// Truncates the buffer back to `keep` bytes when dropped.
    struct Grown<'a> {
        buf: &'a mut BytesMut,
        keep: usize,
    }
    impl Drop for Grown<'_> {
        fn drop(&mut self) {
            self.buf.truncate(self.keep);
        }
    }
    let start = buf.len();
    buf.resize(start + want, 0);
    let grown = Grown { buf, keep: start };
    let n = stream
        .read(&mut grown.buf[start..])
        .await
        .map_err(|e| e.to_string())?;
    if n == 0 {
        return Err("peer closed".into());
    }
    let mut grown = grown;
    grown.keep = start + n;
    Ok(())
}

/// Bytes to ask the socket for when `buf` needs `at_least` in all.
fn read_want(buf: &BytesMut, at_least: usize) -> usize {
    at_least.saturating_sub(buf.len()).max(READ_CHUNK_BYTES)
}

/// Splits the next whole frame (without its size prefix) off `buf`, or
/// says how many bytes `buf` must hold before it can.
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
    if buf.capacity() < READ_CHUNK_BYTES {
        buf.reserve(READ_CHUNK_BYTES);
    }
    Ok(Ok(frame))
}

async fn write_response(
    ctx: &ShardContext,
    stream: &mut TcpStream,
    resp: Response,
    scratch: &mut Vec<u8>,
) -> Result<(), String> {
    if resp
        .chunks
        .iter()
        .any(|c| matches!(c, Chunk::File(f) if f.direct && f.cached.is_none()))
    {
        return send_with_read_ahead(stream, resp.chunks, &ctx.read_cache)
            .await
            .map_err(|e| e.to_string());
    }
    for chunk in resp.chunks {
        match chunk {
            Chunk::Bytes(b) => stream.write_all(&b).await.map_err(|e| e.to_string())?,
            Chunk::File(FileSlice {
                cached: Some(b), ..
            }) => send_cached_bytes(stream, &b)
                .await
                .map_err(|e| e.to_string())?,
            Chunk::File(f) => send_file_slice(stream, &f, scratch)
                .await
                .map_err(|e| e.to_string())?,
        }
    }
    Ok(())
}

/// A pipelined produce: its handler runs as its own task; its answer is
/// written in request order.
type InFlight = glommio::Task<handlers::HandlerResult>;

/// Produce requests one connection may have in flight at once. Kafka's broker
/// reads the next request only after answering the last; reading ahead lets
/// a producer's pipelined requests share appends and disk writes.
const MAX_PIPELINED_PRODUCES: usize = 16;

async fn write_result(
    ctx: &ShardContext,
    stream: &mut TcpStream,
    result: handlers::HandlerResult,
    scratch: &mut Vec<u8>,
) -> Result<(), String> {
    match result {
        Ok(Some(resp)) => write_response(ctx, stream, resp, scratch).await,
        Ok(None) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Writes the answers of all pipelined requests, oldest first.
async fn drain_in_flight(
    ctx: &ShardContext,
    stream: &mut TcpStream,
    in_flight: &mut VecDeque<InFlight>,
    scratch: &mut Vec<u8>,
) -> Result<(), String> {
    while let Some(task) = in_flight.pop_front() {
        let result = task.await;
        write_result(ctx, stream, result, scratch).await?;
    }
    Ok(())
}

/// What finished first while a connection waited for its next frame.
enum Woken {
    Read(Result<(), String>),
    Answered(handlers::HandlerResult),
}

async fn serve_inner(ctx: &Rc<ShardContext>, stream: &mut TcpStream) -> Result<(), String> {
    let max_request_bytes = ctx.config.socket_request_max_bytes.max(0) as usize;
    let mut buf = BytesMut::with_capacity(READ_CHUNK_BYTES);
    let mut scratch = Vec::new();
    let mut in_flight: VecDeque<InFlight> = VecDeque::new();
    // connections.max.idle.ms: a connection that sends nothing for that long
    // is closed, as Kafka's processor does (a read is only pending while the
    // connection waits for its next request).
    if ctx.config.connections_max_idle_ms > 0 {
        let idle = std::time::Duration::from_millis(ctx.config.connections_max_idle_ms as u64);
        stream
            .set_read_timeout(Some(idle))
            .map_err(|e| e.to_string())?;
    }
    let client_host: Arc<str> = match stream.peer_addr() {
        Ok(a) => Arc::from(format!("/{}", a.ip())),
        Err(_) => Arc::from(""),
    };
    loop {
        if ctx.shutting_down.get() {
            return Ok(());
        }
        // The next frame; answers of pipelined produces go out as they finish.
        let frame = loop {
            let need = match take_frame(&mut buf, max_request_bytes)? {
                Ok(frame) => break frame,
                Err(need) => need,
            };
            let want = read_want(&buf, need);
            let Some(front) = in_flight.front_mut() else {
                read_some(stream, &mut buf, want).await?;
                continue;
            };
            let woken = futures_lite::future::or(
                async { Woken::Read(read_some(stream, &mut buf, want).await) },
                async { Woken::Answered(front.await) },
            )
            .await;
            match woken {
                Woken::Read(r) => r?,
                Woken::Answered(result) => {
                    in_flight.pop_front();
                    write_result(ctx, stream, result, &mut scratch).await?;
                }
            }
        };
        if ctx.cluster.is_some() && frame.len() >= 2 {
            let api_key = i16::from_be_bytes([frame[0], frame[1]]);
            if handlers::inter_broker::versions(api_key).is_some() {
                drain_in_flight(ctx, stream, &mut in_flight, &mut scratch).await?;
                let resp = handlers::inter_broker::serve(ctx, frame).await?;
                stream.write_all(&resp).await.map_err(|e| e.to_string())?;
                continue;
            }
        }
        match parse_request(frame, &client_host) {
            Ok(req) if req.api_key == ApiKey::Produce => {
                // Applied in request order: each handler appends (or sends to
                // the owning shards) in its first poll, and tasks start in
                // the order they are spawned.
                while in_flight.len() >= MAX_PIPELINED_PRODUCES {
                    let task = in_flight.pop_front().expect("non-empty");
                    let result = task.await;
                    write_result(ctx, stream, result, &mut scratch).await?;
                }
                let ctx = ctx.clone();
                in_flight.push_back(glommio::spawn_local(async move {
                    handlers::dispatch(&ctx, req).await
                }));
            }
            Ok(req) => {
                // Everything else runs alone, after the produces before it.
                drain_in_flight(ctx, stream, &mut in_flight, &mut scratch).await?;
                let result = handlers::dispatch(ctx, req).await;
                write_result(ctx, stream, result, &mut scratch).await?;
            }
            Err(FrameError::UnsupportedVersion {
                api_key: ApiKey::ApiVersions,
                correlation_id,
                ..
            }) => {
                drain_in_flight(ctx, stream, &mut in_flight, &mut scratch).await?;
                let b = unsupported_version_response(correlation_id);
                stream.write_all(&b).await.map_err(|e| e.to_string())?;
            }
            Err(e) => return Err(format!("bad request: {e:?}")),
        }
    }
}
