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
use crate::security::authorizer::{AclOperation, AuditLog, ResourceType, CLUSTER_NAME};

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
    let (mut topics, refused) = if all_topics {
        (described_topics(ctx, req, &image), Vec::new())
    } else {
        let requested = request.topics.take().unwrap_or_default();
        requested_topics(ctx, req, &image, &requested, allow_auto_create).await
    };
    let v = req.api_version;
    if v >= 8 && request.include_topic_authorized_operations {
        for t in &mut topics {
            let name = t.name.as_ref().map(|n| n.0.as_str()).unwrap_or("");
            t.topic_authorized_operations =
                ctx.authorized_operations(req, ResourceType::Topic, name);
        }
    }
    topics.extend(refused);
    let brokers = broker_entries(&image, &req.listener_name, v);
    let mut body = MetadataResponse::default()
        .with_brokers(brokers)
        .with_cluster_id(if v >= 2 {
            Some(StrBytes::from_string(image.cluster_id.clone()))
        } else {
            None
        })
        .with_controller_id(BrokerId(if v >= 1 { image.controller_id } else { -1 }))
        .with_topics(topics);
    // v11 dropped the cluster's field (DescribeCluster carries it).
    if (8..=10).contains(&v) && request.include_cluster_authorized_operations {
        body.cluster_authorized_operations = if ctx.authorize_cluster(req, AclOperation::Describe) {
            ctx.authorized_operations(req, ResourceType::Cluster, CLUSTER_NAME)
        } else {
            0
        };
    }
    respond(req, &body)
}

/// Every topic the principal may describe, by name; the others are left
/// out without a word (nor an audit line at info, as in Kafka).
fn described_topics(
    ctx: &KafkaApis,
    req: &Request,
    image: &MetadataImage,
) -> Vec<MetadataResponseTopic> {
    let mut names: Vec<&String> = image.topics.keys().collect();
    names.sort();
    names
        .into_iter()
        .filter(|n| {
            ctx.authorize_logged(
                req,
                AclOperation::Describe,
                ResourceType::Topic,
                n,
                AuditLog::ALLOWED_ONLY,
            )
        })
        .map(|n| topic_entry(&image.topics[n], req.api_version))
        .collect()
}

/// The topics a request names, then (to append after the authorized ones,
/// as Kafka orders them) those refused: TOPIC_AUTHORIZATION_FAILED without
/// DESCRIBE, whether the topic exists or not, and for a topic to be
/// auto-created without CREATE on the cluster or on it.
async fn requested_topics(
    ctx: &Rc<KafkaApis>,
    req: &Request,
    image: &MetadataImage,
    requested: &[MetadataRequestTopic],
    allow_auto_create: bool,
) -> (Vec<MetadataResponseTopic>, Vec<MetadataResponseTopic>) {
    let v = req.api_version;
    let name_of = |t: &MetadataRequestTopic| -> Option<String> {
        match &t.name {
            Some(n) => Some(n.0.to_string()),
            None => image.topic_by_id(&t.topic_id).map(|i| i.name.clone()),
        }
    };
    let described: Vec<bool> = requested
        .iter()
        .map(|t| {
            name_of(t)
                .is_none_or(|n| ctx.authorize(req, AclOperation::Describe, ResourceType::Topic, &n))
        })
        .collect();
    let missing: Vec<String> = requested
        .iter()
        .zip(&described)
        .filter(|(_, d)| **d)
        .filter_map(|(t, _)| t.name.as_ref().map(|n| n.0.to_string()))
        .filter(|n| image.topic(n).is_none())
        .collect();
    let mut uncreatable: Vec<String> = Vec::new();
    if !missing.is_empty() && allow_auto_create {
        let (creatable, refused) = creatable_topics(ctx, req, missing);
        uncreatable = refused;
        if !creatable.is_empty() {
            // Answered from this image: the new topics show up once created.
            request_auto_creation(ctx, creatable).await;
        }
    }
    let mut topics = Vec::new();
    let (mut refused_create, mut refused_describe) = (Vec::new(), Vec::new());
    for (t, described) in requested.iter().zip(described) {
        let name = t.name.as_ref().map(|n| n.0.as_str());
        if !described {
            let id = if name.is_some() {
                Uuid::nil()
            } else {
                t.topic_id
            };
            refused_describe.push(error_entry(name, id, errors::TOPIC_AUTHORIZATION_FAILED, v));
        } else if name.is_some_and(|n| uncreatable.iter().any(|u| u == n)) {
            let n = name.unwrap_or_default();
            refused_create.push(
                error_entry(name, Uuid::nil(), errors::TOPIC_AUTHORIZATION_FAILED, v)
                    .with_is_internal(v >= 1 && is_internal_topic(n)),
            );
        } else {
            topics.push(requested_topic_entry(image, t, allow_auto_create, v));
        }
    }
    refused_create.extend(refused_describe);
    (topics, refused_create)
}

/// Kafka's Topic.isInternal.
fn is_internal_topic(name: &str) -> bool {
    name == crate::coordinator::OFFSETS_TOPIC
        || name == crate::coordinator::transaction::TRANSACTION_STATE_TOPIC
}

/// Auto-creation needs CREATE on the cluster or on the topic: the topics
/// that may be created, and those that may not.
fn creatable_topics(
    ctx: &KafkaApis,
    req: &Request,
    missing: Vec<String>,
) -> (Vec<String>, Vec<String>) {
    let cluster_create = ctx.authorize_logged(
        req,
        AclOperation::Create,
        ResourceType::Cluster,
        CLUSTER_NAME,
        AuditLog::ALLOWED_ONLY,
    );
    if cluster_create {
        return (missing, Vec::new());
    }
    missing
        .into_iter()
        .partition(|n| ctx.authorize(req, AclOperation::Create, ResourceType::Topic, n))
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
