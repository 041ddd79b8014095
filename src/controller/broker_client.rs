//! A minimal async Kafka client for broker-to-controller requests
//! (AlterPartition) from a shard: one request per connection, bounded by
//! a timeout. These requests are rare (ISR changes), so no pooling.

use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use glommio::net::TcpStream;
use kafka_protocol::messages::ApiKey;
use kafka_protocol::protocol::Encodable;

use crate::protocol::client_frame::encode_request_frame;
use crate::security::inter_broker::{exchange_frame, InterBrokerSecurity};

const MAX_RESPONSE_BYTES: usize = 16 << 20;

/// Where a request goes and how: the broker's address and the
/// inter-broker listener's security.
pub struct BrokerAddress<'a> {
    pub host: &'a str,
    pub port: u16,
    pub security: &'a InterBrokerSecurity,
}

/// Sends `body` as `api_key` v`version` and returns the response body.
pub async fn round_trip<M: Encodable>(
    to: BrokerAddress<'_>,
    api_key: ApiKey,
    version: i16,
    body: &M,
    client_id: &str,
    timeout_ms: u64,
) -> Result<Bytes, String> {
    let BrokerAddress {
        host,
        port,
        security,
    } = to;
    let mut encoded = BytesMut::new();
    body.encode(&mut encoded, version)
        .map_err(|e| format!("encoding {api_key:?}: {e}"))?;
    let frame = encode_request_frame(
        api_key as i16,
        version,
        api_key.request_header_version(version),
        1,
        client_id,
        &encoded,
    );
    let response_header_version = api_key.response_header_version(version);
    let exchange = async {
        let addr = format!("{host}:{port}");
        let tcp = TcpStream::connect(addr.as_str())
            .await
            .map_err(|e| format!("connecting to {addr}: {e}"))?;
        let mut stream = security
            .open(tcp, host, client_id)
            .await
            .map_err(|e| format!("securing the connection to {addr}: {e}"))?;
        let mut b = exchange_frame(&mut stream, &frame, MAX_RESPONSE_BYTES)
            .await
            .map_err(|e| e.to_string())?;
        let correlation_id = b.get_i32();
        if correlation_id != 1 {
            return Err(format!("correlation id {correlation_id}"));
        }
        if response_header_version >= 1 {
            // Tagged fields: we send none, and a broker answers none here.
            if !b.has_remaining() || b.get_u8() != 0 {
                return Err("unexpected tagged fields in the response header".into());
            }
        }
        Ok(b)
    };
    let timeout = async {
        glommio::timer::sleep(Duration::from_millis(timeout_ms.max(1))).await;
        Err(format!(
            "{api_key:?} to {host}:{port} timed out after {timeout_ms} ms"
        ))
    };
    futures_lite::future::or(exchange, timeout).await
}
