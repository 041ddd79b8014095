//! A broker's own requests to other brokers, framed as a Kafka client
//! frames them: size prefix and request header out, response header
//! checked and stripped on the way back. Shared by the replica fetchers,
//! the controller channel, `broker_client` and the inter-broker SASL
//! exchange.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable};

/// A size-prefixed request frame with header v0/v1/v2.
pub fn encode_request_frame(
    api_key: i16,
    api_version: i16,
    header_version: i16,
    correlation_id: i32,
    client_id: &str,
    body: &[u8],
) -> Bytes {
    let mut buf = BytesMut::with_capacity(32 + client_id.len() + body.len());
    buf.put_i32(0);
    buf.put_i16(api_key);
    buf.put_i16(api_version);
    buf.put_i32(correlation_id);
    if header_version >= 1 {
        buf.put_i16(client_id.len() as i16);
        buf.put_slice(client_id.as_bytes());
    }
    if header_version >= 2 {
        buf.put_u8(0); // no tagged fields
    }
    buf.put_slice(body);
    let len = (buf.len() - 4) as i32;
    buf[0..4].copy_from_slice(&len.to_be_bytes());
    buf.freeze()
}

/// Encodes a request body with its size prefix and request header.
pub fn encode_frame<M: Encodable>(
    api_key: ApiKey,
    version: i16,
    correlation_id: i32,
    client_id: &str,
    body: &M,
) -> Result<Bytes, String> {
    let mut buf = BytesMut::new();
    body.encode(&mut buf, version)
        .map_err(|e| format!("encoding {api_key:?} v{version}: {e}"))?;
    Ok(encode_request_frame(
        api_key as i16,
        version,
        api_key.request_header_version(version),
        correlation_id,
        client_id,
        &buf,
    ))
}

/// Strips the response header (size prefix already removed), checking the
/// correlation id; returns the body.
pub fn response_body(
    mut frame: Bytes,
    api_key: ApiKey,
    version: i16,
    correlation_id: i32,
) -> Result<Bytes, String> {
    let header = ResponseHeader::decode(&mut frame, api_key.response_header_version(version))
        .map_err(|e| format!("{api_key:?} response header: {e}"))?;
    if header.correlation_id != correlation_id {
        return Err(format!(
            "{api_key:?} response has correlation id {}, expected {correlation_id}",
            header.correlation_id
        ));
    }
    Ok(frame)
}
