//! Metadata (API 3): brokers, controller, topics and partitions from the
//! shard's metadata image; auto-creates topics as Kafka does when allowed.

use std::rc::Rc;

use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use super::{respond, HandlerResult};
use crate::metadata_cache::TopicInfo;
use crate::protocol::{decode_body, errors, Request};
use crate::shard_context::{ShardContext, ShardRequest, ShardResponse, CONTROLLER_SHARD};

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
                .with_error_code(code)
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
        .with_error_code(errors::NONE)
        .with_name(Some(TopicName(StrBytes::from_string(t.name.clone()))))
        .with_topic_id(if v >= 10 { t.topic_id } else { Uuid::nil() })
        .with_is_internal(v >= 1 && t.is_internal)
        .with_partitions(partitions)
}

fn error_entry(name: Option<&str>, topic_id: Uuid, code: i16, v: i16) -> MetadataResponseTopic {
    let topic_id = if v >= 10 { topic_id } else { Uuid::nil() };
    MetadataResponseTopic::default()
        .with_error_code(code)
        .with_name(name.map(|n| TopicName(StrBytes::from_string(n.to_string()))))
        .with_topic_id(topic_id)
}

pub async fn handle(ctx: &Rc<ShardContext>, req: &Request) -> HandlerResult {
    let request: MetadataRequest = decode_body(req)?;
    let mut image = ctx.metadata.image();
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
        let requested = request.topics.unwrap_or_default();
        let missing: Vec<String> = requested
            .iter()
            .filter_map(|t| t.name.as_ref().map(|n| n.0.to_string()))
            .filter(|n| image.topic(n).is_none())
            .collect();
        if !missing.is_empty() && allow_auto_create {
            let r = if ctx.shard_id == CONTROLLER_SHARD {
                crate::controller::auto_create_topics(ctx, &missing).await
            } else {
                match ctx
                    .call(
                        CONTROLLER_SHARD,
                        ShardRequest::AutoCreateTopics {
                            names: missing.clone(),
                        },
                    )
                    .await
                {
                    Ok(ShardResponse::AutoCreated(codes)) => codes,
                    _ => vec![errors::LEADER_NOT_AVAILABLE; missing.len()],
                }
            };
            if r.iter()
                .any(|&c| c != errors::NONE && c != errors::TOPIC_ALREADY_EXISTS)
            {
                log::debug!("auto-create of {missing:?}: {r:?}");
            }
            image = ctx.metadata.image();
        }
        for t in requested {
            match (&t.name, t.topic_id) {
                (Some(name), _) => match image.topic(name.0.as_str()) {
                    Some(info) => topics.push(topic_entry(info, req.api_version)),
                    None => {
                        let code = if crate::metadata::topics::validate_topic_name(name.0.as_str())
                            .is_err()
                        {
                            errors::INVALID_TOPIC_EXCEPTION
                        } else if allow_auto_create {
                            errors::LEADER_NOT_AVAILABLE
                        } else {
                            errors::UNKNOWN_TOPIC_OR_PARTITION
                        };
                        topics.push(error_entry(
                            Some(name.0.as_str()),
                            Uuid::nil(),
                            code,
                            req.api_version,
                        ));
                    }
                },
                (None, id) => match image.topic_by_id(&id) {
                    Some(info) => topics.push(topic_entry(info, req.api_version)),
                    None => topics.push(error_entry(
                        None,
                        id,
                        errors::UNKNOWN_TOPIC_ID,
                        req.api_version,
                    )),
                },
            }
        }
    }
    let brokers = image
        .brokers
        .iter()
        .map(|b| {
            MetadataResponseBroker::default()
                .with_node_id(BrokerId(b.id))
                .with_host(StrBytes::from_string(b.host.clone()))
                .with_port(b.port as i32)
                .with_rack(if req.api_version >= 1 {
                    b.rack.clone().map(StrBytes::from_string)
                } else {
                    None
                })
        })
        .collect();
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
    respond(req, &body)
}
