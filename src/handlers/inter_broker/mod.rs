//! Controller-to-broker APIs (LeaderAndIsr 4, StopReplica 5,
//! UpdateMetadata 6, ControlledShutdown 7), served in cluster mode only.
//! Their codecs are our own (`protocol::inter_broker`): the protocol crate
//! follows Kafka 4, which dropped them. Every such request is run on the
//! controller shard so requests from the controller apply in order.

use std::rc::Rc;

use bytes::{Buf, BufMut, Bytes, BytesMut};

pub mod alter_partition;
pub mod controlled_shutdown;
pub mod leader_and_isr;
pub mod stop_replica;
pub mod update_metadata;
use crate::handlers::auth_helper::authorize_cluster_action;
use crate::handlers::KafkaApis;
use crate::protocol::inter_broker::{
    self, decode_request, InterBrokerRequest, InterBrokerResponse, CONTROLLED_SHUTDOWN_VERSIONS,
    LEADER_AND_ISR_VERSIONS, STOP_REPLICA_VERSIONS, UPDATE_METADATA_VERSIONS,
};
use crate::protocol::ClientIdentity;
use crate::router::{ShardRequest, ShardResponse, CONTROLLER_SHARD};

/// The version range of an inter-broker API key, if it is one.
pub fn versions(api_key: i16) -> Option<(i16, i16)> {
    match api_key {
        inter_broker::LEADER_AND_ISR_API_KEY => Some(LEADER_AND_ISR_VERSIONS),
        inter_broker::STOP_REPLICA_API_KEY => Some(STOP_REPLICA_VERSIONS),
        inter_broker::UPDATE_METADATA_API_KEY => Some(UPDATE_METADATA_VERSIONS),
        inter_broker::CONTROLLED_SHUTDOWN_API_KEY => Some(CONTROLLED_SHUTDOWN_VERSIONS),
        _ => None,
    }
}

/// Parses the request header; returns (api key, version, correlation id, body).
fn parse_header(mut frame: Bytes) -> Result<(i16, i16, i32, Bytes), String> {
    if frame.len() < 8 {
        return Err("truncated header".into());
    }
    let api_key = frame.get_i16();
    let version = frame.get_i16();
    let correlation_id = frame.get_i32();
    let header_version = inter_broker::request_header_version(api_key, version);
    if header_version >= 1 {
        if frame.remaining() < 2 {
            return Err("truncated client id".into());
        }
        let len = frame.get_i16();
        if len > 0 {
            let len = len as usize;
            if frame.remaining() < len {
                return Err("truncated client id".into());
            }
            frame.advance(len);
        }
    }
    if header_version >= 2 {
        crate::controller::channel::skip_tagged_fields(&mut frame)
            .map_err(|e| format!("request header: {e}"))?;
    }
    Ok((api_key, version, correlation_id, frame))
}

/// Serves one inter-broker request frame from a connection; Err closes it.
pub async fn serve(
    ctx: &Rc<KafkaApis>,
    identity: &ClientIdentity,
    frame: Bytes,
) -> Result<Bytes, String> {
    let (api_key, version, correlation_id, body) = parse_header(frame)?;
    let (min, max) =
        versions(api_key).ok_or_else(|| format!("API {api_key} is not inter-broker"))?;
    if version < min || version > max {
        return Err(format!("API {api_key} v{version} is not supported"));
    }
    // Before the controller epoch is looked at, as in Kafka.
    let response_body = if !authorize_cluster_action(ctx, identity, api_key) {
        cluster_authorization_failed(api_key, version, &body)?
    } else if ctx.shard_id == CONTROLLER_SHARD {
        handle_on_controller_shard(ctx, api_key, version, body).await?
    } else {
        match ctx
            .router
            .call(
                CONTROLLER_SHARD,
                ShardRequest::InterBroker {
                    api_key,
                    api_version: version,
                    body,
                },
            )
            .await
        {
            Ok(ShardResponse::InterBroker(r)) => r?,
            Ok(_) => return Err("unexpected reply to an inter-broker request".into()),
            Err(_) => return Err("the controller shard is not available".into()),
        }
    };
    let header_version = inter_broker::response_header_version(api_key, version);
    let mut out = BytesMut::with_capacity(9 + response_body.len());
    out.put_i32(0);
    out.put_i32(correlation_id);
    if header_version >= 1 {
        out.put_u8(0);
    }
    out.put_slice(&response_body);
    let len = (out.len() - 4) as i32;
    out[0..4].copy_from_slice(&len.to_be_bytes());
    Ok(out.freeze())
}

/// Decodes and runs one inter-broker request on the controller shard,
/// returning the encoded response body.
/// The request's getErrorResponse(CLUSTER_AUTHORIZATION_FAILED).
fn cluster_authorization_failed(api_key: i16, version: i16, body: &Bytes) -> Result<Bytes, String> {
    let response = match decode_request(api_key, version, body)? {
        InterBrokerRequest::LeaderAndIsr(r) => InterBrokerResponse::LeaderAndIsr(
            leader_and_isr::cluster_authorization_failed(&r, version),
        ),
        InterBrokerRequest::StopReplica(r) => {
            InterBrokerResponse::StopReplica(stop_replica::cluster_authorization_failed(&r))
        }
        InterBrokerRequest::UpdateMetadata(_) => {
            InterBrokerResponse::UpdateMetadata(update_metadata::cluster_authorization_failed())
        }
        InterBrokerRequest::ControlledShutdown(_) => InterBrokerResponse::ControlledShutdown(
            controlled_shutdown::cluster_authorization_failed(),
        ),
    };
    response.encode_to_vec(version).map(Bytes::from)
}

pub async fn handle_on_controller_shard(
    ctx: &Rc<KafkaApis>,
    api_key: i16,
    version: i16,
    body: Bytes,
) -> Result<Bytes, String> {
    let cluster = ctx
        .cluster
        .clone()
        .ok_or("inter-broker APIs are served in cluster mode only")?;
    let request = decode_request(api_key, version, &body)?;
    let response = match request {
        InterBrokerRequest::LeaderAndIsr(r) => InterBrokerResponse::LeaderAndIsr(
            leader_and_isr::handle(ctx, &cluster, r, version).await,
        ),
        InterBrokerRequest::StopReplica(r) => {
            InterBrokerResponse::StopReplica(stop_replica::handle(ctx, &cluster, r, version).await)
        }
        InterBrokerRequest::UpdateMetadata(r) => {
            InterBrokerResponse::UpdateMetadata(update_metadata::handle(ctx, &cluster, r).await)
        }
        InterBrokerRequest::ControlledShutdown(r) => {
            InterBrokerResponse::ControlledShutdown(controlled_shutdown::handle(&cluster, r).await)
        }
    };
    response.encode_to_vec(version).map(Bytes::from)
}
