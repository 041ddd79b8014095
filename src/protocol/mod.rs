//! The Kafka wire protocol layer: framing, request headers, the ApiVersions
//! table, and response encoding. Codecs come from the `kafka-protocol` crate
//! except the Fetch response, which has its own encoder (`fetch_encoder`) so
//! record bytes can go from segment files to the socket by sendfile.

pub mod client_frame;
pub mod errors;
pub mod fetch_encoder;
#[cfg(test)]
mod fuzz_tests;
pub mod inter_broker;
pub mod legacy;
pub mod principal;
pub mod probe;

use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable};

use kshard_shards::log::FileSlice;

/// One API kshard implements and the versions it accepts.
#[derive(Clone, Copy, Debug)]
pub struct ApiRange {
    pub key: ApiKey,
    pub min_version: i16,
    pub max_version: i16,
    /// Versions below this are advertised (librdkafka turns on its v2 message
    /// format only when Produce's range reaches down to 0..2) but refused,
    /// as Apache Kafka 4.x does (KAFKA-18659).
    pub min_served_version: i16,
}

const fn api(key: ApiKey, min: i16, max: i16) -> ApiRange {
    ApiRange {
        key,
        min_version: min,
        max_version: max,
        min_served_version: min,
    }
}

/// Exactly the APIs implemented, nothing more (an API that is not here is
/// not offered), with Apache Kafka 3.9's ZooKeeper-mode ranges, but for the
/// versions of transaction version 2 (Kafka 4.0: Produce v12, EndTxn v5,
/// TxnOffsetCommit v5). Versions the `kafka-protocol` crate no longer
/// decodes are served by `legacy`.
pub const SUPPORTED_APIS: &[ApiRange] = &[
    api(ApiKey::Produce, 0, 12),
    api(ApiKey::Fetch, 0, 17),
    api(ApiKey::ListOffsets, 0, 9),
    api(ApiKey::Metadata, 0, 12),
    api(ApiKey::ApiVersions, 0, 4),
    api(ApiKey::CreateTopics, 0, 7),
    api(ApiKey::DeleteTopics, 0, 6),
    api(ApiKey::DeleteRecords, 0, 2),
    api(ApiKey::InitProducerId, 0, 5),
    api(ApiKey::OffsetForLeaderEpoch, 0, 4),
    api(ApiKey::DescribeConfigs, 0, 4),
    api(ApiKey::AlterConfigs, 0, 2),
    api(ApiKey::AlterReplicaLogDirs, 0, 2),
    api(ApiKey::DescribeLogDirs, 0, 4),
    api(ApiKey::CreatePartitions, 0, 3),
    api(ApiKey::DescribeClientQuotas, 0, 1),
    api(ApiKey::AlterClientQuotas, 0, 1),
    api(ApiKey::DescribeUserScramCredentials, 0, 0),
    api(ApiKey::AlterUserScramCredentials, 0, 0),
    // Version 0 of the ACL APIs predates pattern types (Kafka 2.0 clients
    // and later send 1+); it is not offered.
    api(ApiKey::DescribeAcls, 1, 3),
    api(ApiKey::CreateAcls, 1, 3),
    api(ApiKey::DeleteAcls, 1, 3),
    api(ApiKey::SaslHandshake, 0, 1),
    api(ApiKey::SaslAuthenticate, 0, 2),
    api(ApiKey::DescribeCluster, 0, 1),
    api(ApiKey::FindCoordinator, 0, 6),
    api(ApiKey::JoinGroup, 0, 9),
    api(ApiKey::SyncGroup, 0, 5),
    api(ApiKey::Heartbeat, 0, 4),
    api(ApiKey::LeaveGroup, 0, 5),
    api(ApiKey::OffsetCommit, 0, 9),
    api(ApiKey::OffsetFetch, 0, 9),
    api(ApiKey::ListGroups, 0, 5),
    api(ApiKey::DescribeGroups, 0, 5),
    api(ApiKey::DeleteGroups, 0, 2),
    api(ApiKey::OffsetDelete, 0, 0),
    api(ApiKey::ElectLeaders, 0, 2),
    api(ApiKey::IncrementalAlterConfigs, 0, 1),
    api(ApiKey::AddPartitionsToTxn, 0, 5),
    api(ApiKey::AddOffsetsToTxn, 0, 4),
    api(ApiKey::EndTxn, 0, 5),
    api(ApiKey::WriteTxnMarkers, 0, 1),
    api(ApiKey::TxnOffsetCommit, 0, 5),
    api(ApiKey::DescribeProducers, 0, 0),
    api(ApiKey::DescribeTransactions, 0, 0),
    api(ApiKey::ListTransactions, 0, 1),
    // Cluster mode only (left out of ApiVersions on a single broker).
    api(ApiKey::AlterPartition, 0, 3),
    api(ApiKey::AlterPartitionReassignments, 0, 0),
    api(ApiKey::ListPartitionReassignments, 0, 0),
];

pub fn supported(key: ApiKey) -> Option<&'static ApiRange> {
    SUPPORTED_APIS.iter().find(|a| a.key == key)
}

/// A request frame whose header has been decoded; `body` is the rest.
pub struct Request {
    pub api_key: ApiKey,
    pub api_version: i16,
    pub header: RequestHeader,
    pub body: Bytes,
    /// The client's address as Kafka prints it ("/127.0.0.1"), shared by
    /// every request of a connection.
    pub client_host: Arc<str>,
    /// Header and body bytes (Kafka's `request.sizeInBytes`, what a
    /// producer's byte-rate quota counts).
    pub size_bytes: usize,
    /// Who the connection authenticated as (ANONYMOUS on PLAINTEXT).
    pub principal: Arc<principal::KafkaPrincipal>,
    /// The listener the connection came in on: Metadata and
    /// FindCoordinator answer with the brokers' endpoints on it.
    pub listener_name: Arc<str>,
}

/// Who sent a connection's requests, shared by all of them.
#[derive(Clone)]
pub struct ClientIdentity {
    pub client_host: Arc<str>,
    pub principal: Arc<principal::KafkaPrincipal>,
    pub listener_name: Arc<str>,
}

#[derive(Debug)]
pub enum FrameError {
    /// Not even the fixed header prefix is present.
    Truncated,
    /// An API key that does not exist or that kshard does not serve.
    UnknownApiKey(i16),
    /// A version outside the served range (ApiVersions is answered anyway).
    UnsupportedVersion {
        api_key: ApiKey,
        version: i16,
        correlation_id: i32,
    },
    BadHeader(String),
}

/// Decodes the request header of one frame (size prefix already removed).
pub fn parse_request(frame: Bytes, client_host: &Arc<str>) -> Result<Request, FrameError> {
    thread_local! {
        static ANONYMOUS: Arc<principal::KafkaPrincipal> =
            Arc::new(principal::KafkaPrincipal::anonymous());
        static PLAINTEXT: Arc<str> = Arc::from("PLAINTEXT");
    }
    let identity = ClientIdentity {
        client_host: client_host.clone(),
        principal: ANONYMOUS.with(Arc::clone),
        listener_name: PLAINTEXT.with(Arc::clone),
    };
    parse_request_from(frame, &identity)
}

/// `parse_request` for a connection of a listener whose client
/// authenticated as `identity.principal`.
pub fn parse_request_from(
    mut frame: Bytes,
    identity: &ClientIdentity,
) -> Result<Request, FrameError> {
    if frame.len() < 8 {
        return Err(FrameError::Truncated);
    }
    let api_key_raw = i16::from_be_bytes([frame[0], frame[1]]);
    let api_version = i16::from_be_bytes([frame[2], frame[3]]);
    let correlation_id = i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
    let api_key =
        ApiKey::try_from(api_key_raw).map_err(|_| FrameError::UnknownApiKey(api_key_raw))?;
    let range = supported(api_key).ok_or(FrameError::UnknownApiKey(api_key_raw))?;
    if api_version < range.min_served_version || api_version > range.max_version {
        return Err(FrameError::UnsupportedVersion {
            api_key,
            version: api_version,
            correlation_id,
        });
    }
    let size_bytes = frame.len();
    let header_version = api_key.request_header_version(api_version);
    let header = RequestHeader::decode(&mut frame, header_version)
        .map_err(|e| FrameError::BadHeader(e.to_string()))?;
    Ok(Request {
        api_key,
        api_version,
        header,
        body: frame,
        client_host: identity.client_host.clone(),
        size_bytes,
        principal: identity.principal.clone(),
        listener_name: identity.listener_name.clone(),
    })
}

/// A response ready to write: a size-prefixed frame made of in-memory bytes
/// and, for Fetch, ranges of segment files sent with sendfile.
pub enum Chunk {
    Bytes(Bytes),
    File(FileSlice),
}

pub struct Response {
    pub chunks: Vec<Chunk>,
    /// A client quota's throttle: the connection reads nothing more for
    /// this long after the response is sent (KIP-219 muting).
    pub throttle_ms: u32,
}

impl Response {
    pub fn from_bytes(b: Bytes) -> Self {
        Response {
            chunks: vec![Chunk::Bytes(b)],
            throttle_ms: 0,
        }
    }
    pub fn total_len(&self) -> usize {
        self.chunks
            .iter()
            .map(|c| match c {
                Chunk::Bytes(b) => b.len(),
                Chunk::File(f) => f.len as usize,
            })
            .sum()
    }
}

/// Encodes `body` with its response header into one size-prefixed frame.
pub fn encode_response<M: Encodable + 'static>(
    api_key: ApiKey,
    api_version: i16,
    correlation_id: i32,
    body: &M,
) -> Result<Bytes, String> {
    let header_version = api_key.response_header_version(api_version);
    let header = ResponseHeader::default().with_correlation_id(correlation_id);
    let header_size = header
        .compute_size(header_version)
        .map_err(|e| format!("response header: {e}"))?;
    if let Some(legacy) = legacy::encode_response(api_key, api_version, body) {
        let legacy = legacy?;
        let size = i32::try_from(header_size + legacy.len())
            .map_err(|_| format!("{api_key:?} v{api_version} response too large"))?;
        let mut buf = BytesMut::with_capacity(4 + header_size + legacy.len());
        buf.put_i32(size);
        header
            .encode(&mut buf, header_version)
            .map_err(|e| format!("response header: {e}"))?;
        buf.put_slice(&legacy);
        return Ok(buf.freeze());
    }
    let body_size = body
        .compute_size(api_version)
        .map_err(|e| format!("{api_key:?} v{api_version} response size: {e}"))?;
    let mut buf = BytesMut::with_capacity(4 + header_size + body_size);
    buf.put_i32((header_size + body_size) as i32);
    header
        .encode(&mut buf, header_version)
        .map_err(|e| format!("response header: {e}"))?;
    body.encode(&mut buf, api_version)
        .map_err(|e| format!("{api_key:?} v{api_version} response: {e}"))?;
    debug_assert_eq!(buf.len(), 4 + header_size + body_size);
    Ok(buf.freeze())
}

/// Decodes a request body of type `M` at the request's version (legacy
/// versions by `legacy`, into the struct their handler expects).
pub fn decode_body<M: Decodable + 'static>(req: &Request) -> Result<M, String> {
    if let Some(decoded) = legacy::decode_request(req.api_key, req.api_version, &req.body) {
        return decoded?.downcast::<M>().map(|m| *m).map_err(|_| {
            format!(
                "{:?} v{}: decoded as another type",
                req.api_key, req.api_version
            )
        });
    }
    let mut body = req.body.clone();
    M::decode(&mut body, req.api_version)
        .map_err(|e| format!("{:?} v{}: {e}", req.api_key, req.api_version))
}

/// Decodes a whole request frame (header and body) the way the broker does,
/// for the fuzz targets: any input must give Ok or Err, never a panic.
pub fn decode_frame(frame: Bytes) -> Result<(), String> {
    use kafka_protocol::messages as m;
    let req = parse_request(frame, &Arc::from("/fuzz")).map_err(|e| format!("{e:?}"))?;
    match req.api_key {
        ApiKey::Produce => decode_body::<m::ProduceRequest>(&req).map(|_| ()),
        ApiKey::Fetch => decode_body::<m::FetchRequest>(&req).map(|_| ()),
        ApiKey::ListOffsets if req.api_version == 0 => {
            decode_body::<legacy::ListOffsetsV0Request>(&req).map(|_| ())
        }
        ApiKey::ListOffsets => decode_body::<m::ListOffsetsRequest>(&req).map(|_| ()),
        ApiKey::Metadata => decode_body::<m::MetadataRequest>(&req).map(|_| ()),
        ApiKey::ApiVersions => decode_body::<m::ApiVersionsRequest>(&req).map(|_| ()),
        ApiKey::CreateTopics => decode_body::<m::CreateTopicsRequest>(&req).map(|_| ()),
        ApiKey::DeleteTopics => decode_body::<m::DeleteTopicsRequest>(&req).map(|_| ()),
        ApiKey::DeleteRecords => decode_body::<m::DeleteRecordsRequest>(&req).map(|_| ()),
        ApiKey::InitProducerId => decode_body::<m::InitProducerIdRequest>(&req).map(|_| ()),
        ApiKey::OffsetForLeaderEpoch => {
            decode_body::<m::OffsetForLeaderEpochRequest>(&req).map(|_| ())
        }
        ApiKey::DescribeConfigs => decode_body::<m::DescribeConfigsRequest>(&req).map(|_| ()),
        ApiKey::AlterConfigs => decode_body::<m::AlterConfigsRequest>(&req).map(|_| ()),
        ApiKey::IncrementalAlterConfigs => {
            decode_body::<m::IncrementalAlterConfigsRequest>(&req).map(|_| ())
        }
        ApiKey::CreatePartitions => decode_body::<m::CreatePartitionsRequest>(&req).map(|_| ()),
        ApiKey::DescribeLogDirs => decode_body::<m::DescribeLogDirsRequest>(&req).map(|_| ()),
        ApiKey::AlterReplicaLogDirs => {
            decode_body::<m::AlterReplicaLogDirsRequest>(&req).map(|_| ())
        }
        ApiKey::DescribeCluster => decode_body::<m::DescribeClusterRequest>(&req).map(|_| ()),
        ApiKey::DescribeClientQuotas => {
            decode_body::<m::DescribeClientQuotasRequest>(&req).map(|_| ())
        }
        ApiKey::AlterClientQuotas => decode_body::<m::AlterClientQuotasRequest>(&req).map(|_| ()),
        ApiKey::DescribeUserScramCredentials => {
            decode_body::<m::DescribeUserScramCredentialsRequest>(&req).map(|_| ())
        }
        ApiKey::AlterUserScramCredentials => {
            decode_body::<m::AlterUserScramCredentialsRequest>(&req).map(|_| ())
        }
        ApiKey::SaslHandshake => decode_body::<m::SaslHandshakeRequest>(&req).map(|_| ()),
        ApiKey::SaslAuthenticate => decode_body::<m::SaslAuthenticateRequest>(&req).map(|_| ()),
        ApiKey::FindCoordinator => decode_body::<m::FindCoordinatorRequest>(&req).map(|_| ()),
        ApiKey::JoinGroup => decode_body::<m::JoinGroupRequest>(&req).map(|_| ()),
        ApiKey::SyncGroup => decode_body::<m::SyncGroupRequest>(&req).map(|_| ()),
        ApiKey::Heartbeat => decode_body::<m::HeartbeatRequest>(&req).map(|_| ()),
        ApiKey::LeaveGroup => decode_body::<m::LeaveGroupRequest>(&req).map(|_| ()),
        ApiKey::OffsetCommit => decode_body::<m::OffsetCommitRequest>(&req).map(|_| ()),
        ApiKey::OffsetFetch => decode_body::<m::OffsetFetchRequest>(&req).map(|_| ()),
        ApiKey::ListGroups => decode_body::<m::ListGroupsRequest>(&req).map(|_| ()),
        ApiKey::DescribeGroups => decode_body::<m::DescribeGroupsRequest>(&req).map(|_| ()),
        ApiKey::DeleteGroups => decode_body::<m::DeleteGroupsRequest>(&req).map(|_| ()),
        ApiKey::OffsetDelete => decode_body::<m::OffsetDeleteRequest>(&req).map(|_| ()),
        ApiKey::ElectLeaders => decode_body::<m::ElectLeadersRequest>(&req).map(|_| ()),
        ApiKey::AlterPartition if req.api_version < 2 => {
            decode_body::<legacy::AlterPartitionV0Request>(&req).map(|_| ())
        }
        ApiKey::AlterPartition => decode_body::<m::AlterPartitionRequest>(&req).map(|_| ()),
        other => Err(format!("{other:?} not served")),
    }
}
