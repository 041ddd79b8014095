//! FindCoordinator (API 10, v0-6; v4+ batches keys, v6 may ask for share
//! groups). Groups: the coordinator is the live leader of
//! `__consumer_offsets` partition `partitionFor(group)` in this broker's
//! metadata (Kafka's getCoordinator), which the topic is created for on
//! first use; transactional ids likewise with `__transaction_state`.

use std::rc::Rc;

use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::protocol::StrBytes;

use super::{respond, HandlerResult};
use crate::coordinator::transaction::TRANSACTION_STATE_TOPIC;
use crate::coordinator::{partition_for, OFFSETS_TOPIC};
use crate::handlers::KafkaApis;
use crate::protocol::errors::ErrorCode;
use crate::protocol::{decode_body, errors, Request};
use crate::router::{ShardRequest, CONTROLLER_SHARD};
use crate::security::authorizer::{AclOperation, ResourceType};

const GROUP_KEY_TYPE: i8 = 0;
const TRANSACTION_KEY_TYPE: i8 = 1;
/// Share groups (KIP-932): asked for from v6; Kafka 3.9 has no share
/// coordinator and answers COORDINATOR_NOT_AVAILABLE.
const SHARE_KEY_TYPE: i8 = 2;
const SHARE_VERSION: i16 = 6;
const BATCHED_VERSION: i16 = 4;

struct Found {
    error: ErrorCode,
    message: Option<String>,
    node_id: i32,
    host: String,
    port: i32,
}

fn find(ctx: &KafkaApis, req: &Request, key_type: i8, key: &str) -> Found {
    let version = req.api_version;
    let fail = |error: ErrorCode, message: &str| Found {
        error,
        message: Some(message.to_string()),
        node_id: -1,
        host: String::new(),
        port: -1,
    };
    let not_available = || {
        fail(
            errors::COORDINATOR_NOT_AVAILABLE,
            "The coordinator is not available.",
        )
    };
    // Kafka's getCoordinator asks before anything else.
    let authorized = match key_type {
        GROUP_KEY_TYPE => ctx.authorize(req, AclOperation::Describe, ResourceType::Group, key),
        TRANSACTION_KEY_TYPE => ctx.authorize(
            req,
            AclOperation::Describe,
            ResourceType::TransactionalId,
            key,
        ),
        SHARE_KEY_TYPE if version >= SHARE_VERSION => {
            ctx.authorize_cluster(req, AclOperation::ClusterAction)
        }
        _ => true,
    };
    if !authorized {
        return match key_type {
            GROUP_KEY_TYPE => fail(
                errors::GROUP_AUTHORIZATION_FAILED,
                "Group authorization failed.",
            ),
            TRANSACTION_KEY_TYPE => fail(
                errors::TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                "Transactional Id authorization failed.",
            ),
            _ => fail(
                errors::CLUSTER_AUTHORIZATION_FAILED,
                "Cluster authorization failed.",
            ),
        };
    }
    match key_type {
        GROUP_KEY_TYPE => coordinator_for(ctx, &req.listener_name, OFFSETS_TOPIC, key)
            .unwrap_or_else(not_available),
        TRANSACTION_KEY_TYPE if key.is_empty() => fail(
            errors::INVALID_REQUEST,
            "Transactional id must not be empty",
        ),
        TRANSACTION_KEY_TYPE => {
            coordinator_for(ctx, &req.listener_name, TRANSACTION_STATE_TOPIC, key)
                .unwrap_or_else(not_available)
        }
        SHARE_KEY_TYPE if version >= SHARE_VERSION => not_available(),
        other => fail(
            errors::INVALID_REQUEST,
            &format!("Unknown coordinator type {other}"),
        ),
    }
}

/// Kafka's getCoordinator: the live leader of the key's partition of the
/// coordinator's topic in this broker's metadata; None while the topic is
/// missing, the partition has no leader or the leader is not alive.
fn coordinator_for(
    ctx: &KafkaApis,
    listener_name: &str,
    internal_topic: &str,
    key: &str,
) -> Option<Found> {
    let image = ctx.metadata.image();
    let topic = image.topic(internal_topic)?;
    let partition = partition_for(key, topic.partitions.len().max(1) as i32);
    let leader = topic
        .partitions
        .iter()
        .find(|p| p.partition == partition)
        .map(|p| p.leader)
        .filter(|&l| l >= 0)?;
    let broker = image.brokers.iter().find(|b| b.id == leader)?;
    let endpoint = broker.endpoint(listener_name)?;
    Some(Found {
        error: errors::NONE,
        message: Some("NONE".into()),
        node_id: broker.id,
        host: endpoint.host.clone(),
        port: i32::from(endpoint.port),
    })
}

/// A missing `__consumer_offsets` or `__transaction_state` is created in
/// the background, as Kafka's FindCoordinator asks its
/// AutoTopicCreationManager; the request is answered
/// COORDINATOR_NOT_AVAILABLE meanwhile.
async fn create_internal_topic_if_missing(ctx: &KafkaApis, key_type: i8) {
    let topic = match key_type {
        GROUP_KEY_TYPE => OFFSETS_TOPIC,
        TRANSACTION_KEY_TYPE => TRANSACTION_STATE_TOPIC,
        _ => return,
    };
    if ctx.metadata.image().topic(topic).is_some() {
        return;
    }
    let names = vec![topic.to_string()];
    if ctx.shard_id == CONTROLLER_SHARD {
        ctx.admin.auto_create_topics(&names);
    } else if let Err(e) = ctx
        .router
        .call(CONTROLLER_SHARD, ShardRequest::AutoCreateTopics { names })
        .await
    {
        log::debug!("asking to create {topic}: {e:?}");
    }
}

pub async fn handle(ctx: &Rc<KafkaApis>, req: &Request) -> HandlerResult {
    let request: FindCoordinatorRequest = decode_body(req)?;
    ctx.await_cluster_metadata().await;
    create_internal_topic_if_missing(ctx, request.key_type).await;
    let mut response = FindCoordinatorResponse::default();
    if req.api_version >= BATCHED_VERSION {
        for key in &request.coordinator_keys {
            let mut f = find(ctx, req, request.key_type, key);
            // Kafka's batched answer leaves the message at its default, an
            // empty string, error or not; kshard's own INVALID_REQUEST texts
            // say what is missing.
            if f.error != errors::INVALID_REQUEST {
                f.message = Some(String::new());
            }
            response.coordinators.push(
                Coordinator::default()
                    .with_key(key.clone())
                    .with_node_id(f.node_id.into())
                    .with_host(StrBytes::from_string(f.host))
                    .with_port(f.port)
                    .with_error_code(f.error.code())
                    .with_error_message(f.message.map(StrBytes::from_string)),
            );
        }
    } else {
        let f = find(ctx, req, request.key_type, &request.key);
        response = response
            .with_error_code(f.error.code())
            .with_error_message(f.message.map(StrBytes::from_string))
            .with_node_id(f.node_id.into())
            .with_host(StrBytes::from_string(f.host))
            .with_port(f.port);
    }
    respond(req, &response)
}
