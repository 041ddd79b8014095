//! FindCoordinator (API 10, v0-6; v4+ batches keys, v6 may ask for share
//! groups). Groups: the coordinator
//! is the leader of `__consumer_offsets` partition `partitionFor(group)`,
//! which on this single broker is always this broker (the partitions live
//! on the controller shard). Transaction coordinators: kshard has none, so
//! key type 1 gets INVALID_REQUEST, which clients treat as fatal (the Java
//! producer fails initTransactions at once instead of retrying until
//! max.block.ms), with a message saying why.

use std::rc::Rc;

use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::protocol::StrBytes;

use super::{respond, HandlerResult};
use crate::coordinator::OFFSETS_TOPIC;
use crate::handlers::KafkaApis;
use crate::protocol::errors::ErrorCode;
use crate::protocol::{decode_body, errors, Request};

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

fn find(ctx: &KafkaApis, key_type: i8, version: i16) -> Found {
    let fail = |error: ErrorCode, message: &str| Found {
        error,
        message: Some(message.to_string()),
        node_id: -1,
        host: String::new(),
        port: -1,
    };
    match key_type {
        // Cluster mode does not yet move group coordination with the
        // leadership of __consumer_offsets partitions.
        GROUP_KEY_TYPE if ctx.cluster.is_some() => fail(
            errors::COORDINATOR_NOT_AVAILABLE,
            "The coordinator is not available.",
        ),
        GROUP_KEY_TYPE => {
            let image = ctx.metadata.image();
            match (image.topic(OFFSETS_TOPIC), image.brokers.first()) {
                (Some(_), Some(b)) => Found {
                    error: errors::NONE,
                    message: Some("NONE".into()),
                    node_id: b.id,
                    host: b.host.clone(),
                    port: b.port as i32,
                },
                _ => fail(
                    errors::COORDINATOR_NOT_AVAILABLE,
                    "The coordinator is not available.",
                ),
            }
        }
        TRANSACTION_KEY_TYPE => fail(
            errors::INVALID_REQUEST,
            "kshard has no transaction coordinator; transactions are not supported",
        ),
        SHARE_KEY_TYPE if version >= SHARE_VERSION => fail(
            errors::COORDINATOR_NOT_AVAILABLE,
            "The coordinator is not available.",
        ),
        other => fail(
            errors::INVALID_REQUEST,
            &format!("Unknown coordinator type {other}"),
        ),
    }
}

pub fn handle(ctx: &Rc<KafkaApis>, req: &Request) -> HandlerResult {
    let request: FindCoordinatorRequest = decode_body(req)?;
    let mut response = FindCoordinatorResponse::default();
    if req.api_version >= BATCHED_VERSION {
        for key in &request.coordinator_keys {
            let mut f = find(ctx, request.key_type, req.api_version);
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
        let f = find(ctx, request.key_type, req.api_version);
        response = response
            .with_error_code(f.error.code())
            .with_error_message(f.message.map(StrBytes::from_string))
            .with_node_id(f.node_id.into())
            .with_host(StrBytes::from_string(f.host))
            .with_port(f.port);
    }
    respond(req, &response)
}
