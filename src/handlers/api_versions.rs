//! ApiVersions (API 18): the exact table of implemented APIs, and from v3
//! the `transaction.version` feature, finalized at level 2.

use std::rc::Rc;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::api_versions_response::{
    ApiVersion, FinalizedFeatureKey, SupportedFeatureKey,
};
use kafka_protocol::messages::ApiVersionsResponse;
use kafka_protocol::protocol::StrBytes;

use super::{respond, HandlerResult};
use crate::coordinator::transaction::transaction_metadata::TRANSACTION_VERSION_2;
use crate::handlers::KafkaApis;
use crate::protocol::{errors, Request, SUPPORTED_APIS};

fn api_list() -> Vec<ApiVersion> {
    SUPPORTED_APIS
        .iter()
        .map(|a| {
            ApiVersion::default()
                .with_api_key(a.key as i16)
                .with_min_version(a.min_version)
                .with_max_version(a.max_version)
        })
        .collect()
}

/// The controller-to-broker APIs a ZooKeeper-mode broker lists.
fn inter_broker_list() -> Vec<ApiVersion> {
    use crate::protocol::inter_broker as ib;
    [
        (ib::LEADER_AND_ISR_API_KEY, ib::LEADER_AND_ISR_VERSIONS),
        (ib::STOP_REPLICA_API_KEY, ib::STOP_REPLICA_VERSIONS),
        (ib::UPDATE_METADATA_API_KEY, ib::UPDATE_METADATA_VERSIONS),
        (
            ib::CONTROLLED_SHUTDOWN_API_KEY,
            ib::CONTROLLED_SHUTDOWN_VERSIONS,
        ),
    ]
    .into_iter()
    .map(|(key, (min, max))| {
        ApiVersion::default()
            .with_api_key(key)
            .with_min_version(min)
            .with_max_version(max)
    })
    .collect()
}

pub fn handle(ctx: &Rc<KafkaApis>, req: &Request) -> HandlerResult {
    let mut apis = api_list();
    if ctx.cluster.is_none() {
        // Controller APIs: a single broker has no controller to run them.
        use kafka_protocol::messages::ApiKey;
        const CLUSTER_ONLY: [ApiKey; 3] = [
            ApiKey::AlterPartition,
            ApiKey::AlterPartitionReassignments,
            ApiKey::ListPartitionReassignments,
        ];
        apis.retain(|a| !CLUSTER_ONLY.iter().any(|k| *k as i16 == a.api_key));
    }
    if ctx.cluster.is_some() {
        apis.extend(inter_broker_list());
        apis.sort_by_key(|a| a.api_key);
    }
    let mut body = ApiVersionsResponse::default()
        .with_error_code(errors::NONE.code())
        .with_api_keys(apis);
    if req.api_version >= FEATURES_VERSION {
        body = with_features(body, req.api_version);
    }
    respond(req, &body)
}

/// From v3 the response lists features (KIP-584), in tagged fields.
const FEATURES_VERSION: i16 = 3;
/// Below v4 a supported feature's minimum must not be 0 (KAFKA-17492), so
/// Kafka lists none of those.
const FEATURE_MIN_ZERO_VERSION: i16 = 4;
/// Kafka's feature for the transaction protocol (KIP-890): level 2 has the
/// epoch bumped at every transaction end, partitions added by their
/// leaders. The level never changes, so its epoch is 0.
const TRANSACTION_VERSION_FEATURE: &str = "transaction.version";
const FINALIZED_FEATURES_EPOCH: i64 = 0;

fn with_features(body: ApiVersionsResponse, version: i16) -> ApiVersionsResponse {
    let name = || StrBytes::from_static_str(TRANSACTION_VERSION_FEATURE);
    let supported = if version >= FEATURE_MIN_ZERO_VERSION {
        vec![SupportedFeatureKey::default()
            .with_name(name())
            .with_min_version(0)
            .with_max_version(TRANSACTION_VERSION_2)]
    } else {
        Vec::new()
    };
    body.with_supported_features(supported)
        .with_finalized_features_epoch(FINALIZED_FEATURES_EPOCH)
        .with_finalized_features(vec![FinalizedFeatureKey::default()
            .with_name(name())
            .with_max_version_level(TRANSACTION_VERSION_2)
            .with_min_version_level(TRANSACTION_VERSION_2)])
}

/// The answer to an ApiVersions request of a version we do not speak: a v0
/// body with UNSUPPORTED_VERSION under a v0 header, listing only ApiVersions
/// itself as Kafka does, so the client retries with a version it knows (KIP-511).
pub fn unsupported_version_response(correlation_id: i32) -> Bytes {
    let apis: Vec<ApiVersion> = api_list()
        .into_iter()
        .filter(|a| a.api_key == kafka_protocol::messages::ApiKey::ApiVersions as i16)
        .collect();
    let mut buf = BytesMut::with_capacity(16 + apis.len() * 6);
    buf.put_i32(0);
    buf.put_i32(correlation_id);
    buf.put_i16(errors::UNSUPPORTED_VERSION.code());
    buf.put_i32(apis.len() as i32);
    for a in &apis {
        buf.put_i16(a.api_key);
        buf.put_i16(a.min_version);
        buf.put_i16(a.max_version);
    }
    let len = (buf.len() - 4) as i32;
    buf[0..4].copy_from_slice(&len.to_be_bytes());
    buf.freeze()
}
