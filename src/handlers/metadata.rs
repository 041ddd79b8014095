//! Metadata (API 3): brokers, controller, topics and partitions from the
//! shard's metadata image. Unknown topics are auto-created as Kafka does when
//! allowed: queued for the controller shard and answered at once with
//! LEADER_NOT_AVAILABLE and no partitions (`auto_topic_creation`), so the
//! answer never waits for a creation and never shows a topic half made.

use std::rc::Rc;

use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use super::{respond, HandlerResult};
use crate::handlers::KafkaApis;
use crate::metadata::metadata_cache::{MetadataImage, TopicInfo};
use crate::protocol::errors::ErrorCode;
use crate::protocol::{decode_body, errors, Request};
use crate::router::{ShardRequest, ShardResponse, CONTROLLER_SHARD};

fn topic_entry(t: &TopicInfo, v: i16) -> MetadataResponseTopic {
    let partitions = t
        .partitions
        .iter()
        .map(|p| {
            // Kafka: no live leader is LEADER_NOT_AVAILABLE; v0 also flags
            // missing replicas (errorUnavailableEndpoints).
            let code = if p.leader < 0 {
                errors::LEADER_NOT_AVAILABLE
            } else if v == 0 && !p.offline_replicas.is_empty() {
                errors::REPLICA_NOT_AVAILABLE
            } else {
                errors::NONE
            };
            MetadataResponsePartition::default()
                .with_error_code(code.code())
                .with_partition_index(p.partition)
                .with_leader_id(BrokerId(p.leader))
                .with_leader_epoch(if v >= 7 { p.leader_epoch } else { -1 })
                .with_replica_nodes(p.replicas.iter().map(|&b| BrokerId(b)).collect())
                .with_isr_nodes(p.isr.iter().map(|&b| BrokerId(b)).collect())
                .with_offline_replicas(if v >= 5 {
                    p.offline_replicas.iter().map(|&b| BrokerId(b)).collect()
                } else {
                    Vec::new()
                })
        })
        .collect();
    MetadataResponseTopic::default()
        .with_error_code(errors::NONE.code())
        .with_name(Some(TopicName(StrBytes::from_string(t.name.clone()))))
        .with_topic_id(if v >= 10 { t.topic_id } else { Uuid::nil() })
        .with_is_internal(v >= 1 && t.is_internal)
        .with_partitions(partitions)
}

fn error_entry(
    name: Option<&str>,
    topic_id: Uuid,
    code: ErrorCode,
    v: i16,
) -> MetadataResponseTopic {
    let topic_id = if v >= 10 { topic_id } else { Uuid::nil() };
    MetadataResponseTopic::default()
        .with_error_code(code.code())
        .with_name(name.map(|n| TopicName(StrBytes::from_string(n.to_string()))))
        .with_topic_id(topic_id)
}

pub async fn handle(ctx: &Rc<KafkaApis>, req: &Request) -> HandlerResult {
    let mut request: MetadataRequest = decode_body(req)?;
    ctx.await_cluster_metadata().await;
    let image = ctx.metadata.image();
    // v0: an empty list means all topics; v1+: null means all topics.
    let all_topics = match &request.topics {
        None => true,
        Some(t) => t.is_empty() && req.api_version == 0,
    };
    let allow_auto_create = (req.api_version < 4 || request.allow_auto_topic_creation)
        && ctx.config.auto_create_topics_enable;
    let mut topics = Vec::new();
    if all_topics {
        let mut names: Vec<&String> = image.topics.keys().collect();
        names.sort();
        for n in names {
            topics.push(topic_entry(&image.topics[n], req.api_version));
        }
    } else {
        let requested = request.topics.take().unwrap_or_default();
        let missing: Vec<String> = requested
            .iter()
            .filter_map(|t| t.name.as_ref().map(|n| n.0.to_string()))
            .filter(|n| image.topic(n).is_none())
            .collect();
        if !missing.is_empty() && allow_auto_create {
            // Answered from this image: the new topics show up once created.
            request_auto_creation(ctx, missing).await;
        }
        for t in requested {
            topics.push(requested_topic_entry(
                &image,
                &t,
                allow_auto_create,
                req.api_version,
            ));
        }
    }
    let brokers = broker_entries(&image, &req.listener_name, req.api_version);
    let body = MetadataResponse::default()
        .with_brokers(brokers)
        .with_cluster_id(if req.api_version >= 2 {
            Some(StrBytes::from_string(image.cluster_id.clone()))
        } else {
            None
        })
        .with_controller_id(BrokerId(if req.api_version >= 1 {
            image.controller_id
        } else {
            -1
        }))
        .with_topics(topics);
    respond(
        req,
        &with_authorized_operations(body, &request, req.api_version),
    )
}

/// Kafka's MetadataRequest.getErrorResponse: no brokers, no controller,
/// `code` for every topic the request names.
pub fn error_response(req: &Request, code: ErrorCode) -> HandlerResult {
    let request: MetadataRequest = decode_body(req)?;
    let topics = request
        .topics
        .unwrap_or_default()
        .iter()
        .map(|t| {
            let name = t.name.as_ref().map(|n| n.0.as_str());
            error_entry(name, t.topic_id, code, req.api_version)
        })
        .collect();
    let body = MetadataResponse::default()
        .with_controller_id(BrokerId(-1))
        .with_topics(topics);
    respond(req, &body)
}

/// A topic the request names (by name, or by id from v10 on).
fn requested_topic_entry(
    image: &MetadataImage,
    t: &MetadataRequestTopic,
    allow_auto_create: bool,
    v: i16,
) -> MetadataResponseTopic {
    match (&t.name, t.topic_id) {
        (Some(name), _) => match image.topic(name.0.as_str()) {
            Some(info) => topic_entry(info, v),
            None => {
                let code = if crate::metadata::topics::validate_topic_name(name.0.as_str()).is_err()
                {
                    errors::INVALID_TOPIC_EXCEPTION
                } else if allow_auto_create {
                    errors::LEADER_NOT_AVAILABLE
                } else {
                    errors::UNKNOWN_TOPIC_OR_PARTITION
                };
                error_entry(Some(name.0.as_str()), Uuid::nil(), code, v)
            }
        },
        (None, id) => match image.topic_by_id(&id) {
            Some(info) => topic_entry(info, v),
            None => error_entry(None, id, errors::UNKNOWN_TOPIC_ID, v),
        },
    }
}

/// The live brokers with an endpoint on the request's listener, at it.
fn broker_entries(
    image: &MetadataImage,
    listener_name: &str,
    v: i16,
) -> Vec<MetadataResponseBroker> {
    image
        .brokers
        .iter()
        .filter_map(|b| Some((b, b.endpoint(listener_name)?)))
        .map(|(b, endpoint)| {
            MetadataResponseBroker::default()
                .with_node_id(BrokerId(b.id))
                .with_host(StrBytes::from_string(endpoint.host.clone()))
                .with_port(i32::from(endpoint.port))
                .with_rack(if v >= 1 {
                    b.rack.clone().map(StrBytes::from_string)
                } else {
                    None
                })
        })
        .collect()
}

/// Queues unknown topics for creation on the controller shard; returns at once.
async fn request_auto_creation(ctx: &Rc<KafkaApis>, missing: Vec<String>) {
    let n = missing.len();
    let codes = if ctx.shard_id == CONTROLLER_SHARD {
        ctx.admin.auto_create_topics(&missing)
    } else {
        match ctx
            .router
            .call(
                CONTROLLER_SHARD,
                ShardRequest::AutoCreateTopics { names: missing },
            )
            .await
        {
            Ok(ShardResponse::AutoCreated(codes)) => codes,
            _ => vec![errors::LEADER_NOT_AVAILABLE; n],
        }
    };
    debug_assert_eq!(codes.len(), n);
}

/// Every operation Kafka defines on a topic (`AclEntry.supportedOperations`:
/// READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS,
/// ALTER_CONFIGS) as the bit field Kafka reports without an authorizer.
pub const TOPIC_AUTHORIZED_OPERATIONS_ALL: i32 = bits(&[3, 4, 5, 6, 7, 8, 10, 11]);
/// The same for the cluster: CREATE, ALTER, DESCRIBE, CLUSTER_ACTION,
/// DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE.
pub const CLUSTER_AUTHORIZED_OPERATIONS_ALL: i32 = bits(&[5, 7, 8, 9, 10, 11, 12]);

/// Kafka's `Utils.to32BitField` of AclOperation codes.
const fn bits(codes: &[u8]) -> i32 {
    let mut field = 0i32;
    let mut i = 0;
    while i < codes.len() {
        field |= 1 << codes[i];
        i += 1;
    }
    field
}

/// Kafka's KafkaApis (no authorizer): from v8 every topic gets all topic
/// operations when asked; v8-v10 also carry the cluster's (v11 dropped the
/// field). Unasked, the fields keep their default, i32::MIN.
fn with_authorized_operations(
    mut body: MetadataResponse,
    request: &MetadataRequest,
    version: i16,
) -> MetadataResponse {
    if version < 8 {
        return body;
    }
    if request.include_topic_authorized_operations {
        for t in &mut body.topics {
            t.topic_authorized_operations = TOPIC_AUTHORIZED_OPERATIONS_ALL;
        }
    }
    if version <= 10 && request.include_cluster_authorized_operations {
        body.cluster_authorized_operations = CLUSTER_AUTHORIZED_OPERATIONS_ALL;
    }
    body
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operation_bit_fields_match_kafka() {
        assert_eq!(TOPIC_AUTHORIZED_OPERATIONS_ALL, 3576);
        assert_eq!(CLUSTER_AUTHORIZED_OPERATIONS_ALL, 8096);
    }

    fn answer(version: i16, topics: bool, cluster: bool) -> MetadataResponse {
        let request = MetadataRequest::default()
            .with_include_topic_authorized_operations(topics)
            .with_include_cluster_authorized_operations(cluster);
        let body = MetadataResponse::default().with_topics(vec![MetadataResponseTopic::default()]);
        with_authorized_operations(body, &request, version)
    }

    #[test]
    fn authorized_operations_only_when_asked_and_supported() {
        let r = answer(8, true, true);
        assert_eq!(r.topics[0].topic_authorized_operations, 3576);
        assert_eq!(r.cluster_authorized_operations, 8096);
        let r = answer(10, false, false);
        assert_eq!(r.topics[0].topic_authorized_operations, i32::MIN);
        assert_eq!(r.cluster_authorized_operations, i32::MIN);
        let r = answer(11, true, true);
        assert_eq!(r.topics[0].topic_authorized_operations, 3576);
        assert_eq!(r.cluster_authorized_operations, i32::MIN);
        let r = answer(7, true, true);
        assert_eq!(r.topics[0].topic_authorized_operations, i32::MIN);
    }
}
