//! One client connection on its shard: reads size-prefixed frames (the size is
//! checked against `socket.request.max.bytes` before anything is allocated),
//! runs each request, writes responses in request order.

use std::rc::Rc;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use futures_lite::{AsyncReadExt, AsyncWriteExt};
use glommio::net::TcpStream;

use crate::handlers;
use crate::handlers::api_versions::unsupported_version_response;
use crate::protocol::{parse_request, Chunk, FrameError, Response};
use crate::server::sendfile::{send_cached_slice, send_file_slice};
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

async fn read_more(
    stream: &mut TcpStream,
    buf: &mut BytesMut,
    at_least: usize,
) -> Result<(), String> {
    while buf.len() < at_least {
        let start = buf.len();
        let want = (at_least - start).max(READ_CHUNK_BYTES);
        buf.resize(start + want, 0);
        let n = stream
            .read(&mut buf[start..])
            .await
            .map_err(|e| e.to_string())?;
        buf.truncate(start + n);
        if n == 0 {
            return Err("peer closed".into());
        }
    }
    Ok(())
}

async fn write_response(
    ctx: &ShardContext,
    stream: &mut TcpStream,
    resp: Response,
    scratch: &mut Vec<u8>,
) -> Result<(), String> {
    for chunk in resp.chunks {
        match chunk {
            Chunk::Bytes(b) => stream.write_all(&b).await.map_err(|e| e.to_string())?,
            Chunk::File(f) if f.direct => send_cached_slice(stream, &f, &ctx.read_cache)
                .await
                .map_err(|e| e.to_string())?,
            Chunk::File(f) => send_file_slice(stream, &f, scratch)
                .await
                .map_err(|e| e.to_string())?,
        }
    }
    Ok(())
}

async fn serve_inner(ctx: &Rc<ShardContext>, stream: &mut TcpStream) -> Result<(), String> {
    let max_request_bytes = ctx.config.socket_request_max_bytes.max(0) as usize;
    let mut buf = BytesMut::with_capacity(READ_CHUNK_BYTES);
    let mut scratch = Vec::new();
    // connections.max.idle.ms: a connection that sends nothing for that long
    // is closed, as Kafka's processor does (requests run one at a time, so a
    // read is only pending while the connection is idle).
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
        read_more(stream, &mut buf, 4).await?;
        let size = i32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]);
        if size < 0 || size as usize > max_request_bytes {
            return Err(format!(
                "request size {size} exceeds socket.request.max.bytes {max_request_bytes}"
            ));
        }
        let size = size as usize;
        read_more(stream, &mut buf, 4 + size).await?;
        let mut frame = buf.split_to(4 + size);
        let frame: Bytes = frame.split_off(4).freeze();
        if buf.capacity() < READ_CHUNK_BYTES {
            buf.reserve(READ_CHUNK_BYTES);
        }
        if ctx.cluster.is_some() && frame.len() >= 2 {
            let api_key = i16::from_be_bytes([frame[0], frame[1]]);
            if handlers::inter_broker::versions(api_key).is_some() {
                let resp = handlers::inter_broker::serve(ctx, frame).await?;
                stream.write_all(&resp).await.map_err(|e| e.to_string())?;
                continue;
            }
        }
        match parse_request(frame, &client_host) {
            Ok(req) => match handlers::dispatch(ctx, req).await {
                Ok(Some(resp)) => write_response(ctx, stream, resp, &mut scratch).await?,
                Ok(None) => {}
                Err(e) => return Err(e),
            },
            Err(FrameError::UnsupportedVersion {
                api_key: kafka_protocol::messages::ApiKey::ApiVersions,
                correlation_id,
                ..
            }) => {
                let b = unsupported_version_response(correlation_id);
                stream.write_all(&b).await.map_err(|e| e.to_string())?;
            }
            Err(e) => return Err(format!("bad request: {e:?}")),
        }
    }
}
