//! CreateTopics (API 19, v2-7), run on the controller shard. Follows Kafka
//! 3.9's ZooKeeper-mode handler: one result per request entry, a name given
//! twice fails every entry with that name, and v5+ successes carry the
//! topic's partition count, replication factor and configs. A request for
//! more than 10,000 partitions in all fails every entry with
//! POLICY_VIOLATION before anything is allocated (see `admin_limits`). Creation is
//! synchronous; as in Kafka, a `timeout_ms` <= 0 still creates the topic
//! but answers REQUEST_TIMED_OUT, since the caller would not wait for it.

use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;
use std::sync::Arc;

use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::create_topics_response::{
    CreatableTopicConfigs, CreatableTopicResult,
};
use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use super::{respond, HandlerResult};
use crate::admin::embedded::NewTopic;
use crate::admin::limits::{check_partitions_per_request, create_topics_partitions};
use crate::admin::AdminError;
use crate::config::topic_config_entries;
use crate::handlers::KafkaApis;
use crate::metadata::metadata_cache::TopicInfo;
use crate::protocol::errors::ErrorCode;
use crate::protocol::{decode_body, errors, Request};
use crate::quota::ControllerMutationQuota;
use crate::security::authorizer::{AclOperation, AuditLog, ResourceType, CLUSTER_NAME};

/// First version whose results carry partitions, replication and configs.
const VERSION_WITH_CONFIGS: i16 = 5;

pub async fn handle(ctx: &Rc<KafkaApis>, req: &Request) -> HandlerResult {
    let request: CreateTopicsRequest = decode_body(req)?;
    let validate_only = request.validate_only;
    let partitions = create_topics_partitions(&request.topics, ctx.config.num_partitions);
    if let Err(AdminError { code, message }) = check_partitions_per_request(partitions) {
        // As Kafka's controller: the whole request fails, nothing is created.
        let results = request
            .topics
            .iter()
            .map(|t| failed(code, Some(message.clone())).with_name(t.name.clone()))
            .collect();
        return respond(req, &CreateTopicsResponse::default().with_topics(results));
    }
    let mut occurrences: HashMap<&str, usize> = HashMap::with_capacity(request.topics.len());
    for t in &request.topics {
        *occurrences.entry(t.name.0.as_str()).or_insert(0) += 1;
    }
    let client_id = req.header.client_id.as_deref().unwrap_or("");
    let mut quota = ctx.quotas.controller_mutation_quota(
        &req.principal.name,
        client_id,
        req.api_version >= STRICT_QUOTA_VERSION,
    );
    let mut results = Vec::with_capacity(request.topics.len());
    // CREATE on the cluster covers every topic (no audit line if not).
    let cluster_create = ctx.authorize_logged(
        req,
        AclOperation::Create,
        ResourceType::Cluster,
        CLUSTER_NAME,
        AuditLog::ALLOWED_ONLY,
    );
    for t in &request.topics {
        let name = t.name.0.as_str();
        let result = if occurrences.get(name).copied().unwrap_or(0) > 1 {
            failed(
                errors::INVALID_REQUEST,
                Some("Found multiple entries for this topic.".into()),
            )
        } else if !cluster_create
            && !ctx.authorize(req, AclOperation::Create, ResourceType::Topic, name)
        {
            // Before existence: an existing topic is not revealed.
            failed(
                errors::TOPIC_AUTHORIZATION_FAILED,
                Some("Authorization failed.".into()),
            )
        } else {
            match to_new_topic(t) {
                Err(AdminError { code, message }) => failed(code, Some(message)),
                Ok(new_topic) => {
                    match create_one(ctx, new_topic, validate_only, &mut quota).await {
                        // Kafka (ZooKeeper mode) creates the topic but does not wait
                        // for it without a positive timeout.
                        Ok(_) if !validate_only && request.timeout_ms <= 0 => {
                            failed(errors::REQUEST_TIMED_OUT, None)
                        }
                        Ok(info) => {
                            let result = created(ctx, &info, validate_only, req.api_version);
                            without_configs_unless_described(ctx, req, name, result)
                        }
                        // THROTTLING_QUOTA_EXCEEDED goes without a message, as in Kafka.
                        Err(AdminError { code, message }) => {
                            failed(code, (!message.is_empty()).then_some(message))
                        }
                    }
                }
            }
        };
        results.push(result.with_name(t.name.clone()));
    }
    debug_assert_eq!(results.len(), request.topics.len());
    let throttle_ms = quota.throttle_ms();
    let response = CreateTopicsResponse::default()
        .with_topics(results)
        .with_throttle_time_ms(i32::try_from(throttle_ms).unwrap_or(i32::MAX));
    let mut response = respond(req, &response)?;
    if let Some(r) = response.as_mut() {
        r.throttle_ms = throttle_ms;
    }
    Ok(response)
}

/// First version answering THROTTLING_QUOTA_EXCEEDED (KIP-599); older
/// ones are throttled after the fact.
const STRICT_QUOTA_VERSION: i16 = 6;

/// Creates one topic under the client's controller mutation quota, as
/// Kafka's ZkAdminManager: the topic is validated first (an invalid one
/// gets its own error), a strict quota below zero refuses it, and its
/// partitions are charged once created.
async fn create_one(
    ctx: &Rc<KafkaApis>,
    new_topic: NewTopic,
    validate_only: bool,
    quota: &mut ControllerMutationQuota,
) -> Result<Arc<TopicInfo>, AdminError> {
    if validate_only {
        return ctx.admin.create_topic(new_topic, true).await;
    }
    let now_ms = crate::util::monotonic_ms();
    if quota.is_exceeded(now_ms) {
        ctx.admin.create_topic(new_topic, true).await?;
        return Err(AdminError::throttled());
    }
    let info = ctx.admin.create_topic(new_topic, false).await?;
    quota.record(info.partitions.len(), now_ms);
    Ok(info)
}

/// The request checks Kafka makes before handing a topic to the controller.
fn to_new_topic(t: &CreatableTopic) -> Result<NewTopic, AdminError> {
    let null_configs: Vec<&str> = t
        .configs
        .iter()
        .filter(|c| c.value.is_none())
        .map(|c| c.name.as_str())
        .collect();
    if !null_configs.is_empty() {
        return Err(AdminError::new(
            errors::INVALID_CONFIG,
            format!(
                "Null value not supported for topic configs: {}",
                null_configs.join(",")
            ),
        ));
    }
    if !t.assignments.is_empty() && (t.num_partitions != -1 || t.replication_factor != -1) {
        return Err(AdminError::counts_and_assignment());
    }
    let assignment = if t.assignments.is_empty() {
        None
    } else {
        // A repeated partition index keeps the last entry, as Kafka's map does.
        let map: BTreeMap<i32, Vec<i32>> = t
            .assignments
            .iter()
            .map(|a| {
                (
                    a.partition_index,
                    a.broker_ids.iter().map(|b| b.0).collect(),
                )
            })
            .collect();
        Some(map)
    };
    // Later entries win for a repeated key, as java.util.Properties does.
    let configs: BTreeMap<String, String> = t
        .configs
        .iter()
        .filter_map(|c| {
            c.value
                .as_ref()
                .map(|v| (c.name.to_string(), v.to_string()))
        })
        .collect();
    Ok(NewTopic {
        name: t.name.0.to_string(),
        num_partitions: t.num_partitions,
        replication_factor: t.replication_factor,
        assignment,
        configs,
    })
}

/// A failed entry: Kafka resets configs, partitions and replication.
fn failed(code: ErrorCode, message: Option<String>) -> CreatableTopicResult {
    debug_assert_ne!(code, errors::NONE);
    CreatableTopicResult::default()
        .with_error_code(code.code())
        .with_error_message(message.map(StrBytes::from_string))
        .with_num_partitions(-1)
        .with_replication_factor(-1)
        .with_configs(Some(Vec::new()))
}

fn created(
    ctx: &KafkaApis,
    info: &TopicInfo,
    validate_only: bool,
    version: i16,
) -> CreatableTopicResult {
    debug_assert!(!info.partitions.is_empty());
    // Kafka reports the id only of a topic that now exists.
    let topic_id = if validate_only {
        Uuid::nil()
    } else {
        info.topic_id
    };
    let result = CreatableTopicResult::default()
        .with_error_code(errors::NONE.code())
        .with_error_message(None)
        .with_topic_id(topic_id);
    if version < VERSION_WITH_CONFIGS {
        return result;
    }
    let replication_factor = info
        .partitions
        .first()
        .map_or(-1, |p| p.replicas.len() as i16);
    result
        .with_num_partitions(info.partitions.len() as i32)
        .with_replication_factor(replication_factor)
        .with_configs(Some(topic_configs(ctx, &info.overrides)))
}

/// A created topic's configs, counts and id are shown only to a principal
/// that may describe its configs (KafkaApis' authorizedForDescribeConfigs).
fn without_configs_unless_described(
    ctx: &KafkaApis,
    req: &Request,
    name: &str,
    result: CreatableTopicResult,
) -> CreatableTopicResult {
    let described = ctx.authorize_logged(
        req,
        AclOperation::DescribeConfigs,
        ResourceType::Topic,
        name,
        AuditLog::ALLOWED_ONLY,
    );
    if described {
        return result;
    }
    let result = result.with_topic_id(Uuid::nil());
    if req.api_version < VERSION_WITH_CONFIGS {
        return result;
    }
    result
        .with_num_partitions(-1)
        .with_replication_factor(-1)
        .with_configs(Some(Vec::new()))
        .with_topic_config_error_code(errors::TOPIC_AUTHORIZATION_FAILED.code())
}

/// The topic's full config view, without synonyms or documentation.
fn topic_configs(
    ctx: &KafkaApis,
    overrides: &BTreeMap<String, String>,
) -> Vec<CreatableTopicConfigs> {
    topic_config_entries(&ctx.dynamic_config.state(), overrides)
        .into_iter()
        .map(|e| {
            CreatableTopicConfigs::default()
                .with_name(StrBytes::from_string(e.name))
                .with_value(e.value.map(StrBytes::from_string))
                .with_read_only(e.read_only)
                .with_config_source(e.source)
                .with_is_sensitive(e.is_sensitive)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::create_topics_request::{
        CreatableReplicaAssignment, CreatableTopicConfig,
    };
    use kafka_protocol::messages::{BrokerId, TopicName};

    fn topic(name: &str) -> CreatableTopic {
        CreatableTopic::default()
            .with_name(TopicName(StrBytes::from_string(name.into())))
            .with_num_partitions(-1)
            .with_replication_factor(-1)
    }

    fn config(name: &str, value: Option<&str>) -> CreatableTopicConfig {
        CreatableTopicConfig::default()
            .with_name(StrBytes::from_string(name.into()))
            .with_value(value.map(|v| StrBytes::from_string(v.into())))
    }

    #[test]
    fn defaults_pass_through() {
        let t = to_new_topic(&topic("a").with_num_partitions(3)).unwrap();
        assert_eq!(t.name, "a");
        assert_eq!(t.num_partitions, 3);
        assert_eq!(t.replication_factor, -1);
        assert!(t.assignment.is_none());
        assert!(t.configs.is_empty());
    }

    #[test]
    fn null_config_values_are_invalid_config() {
        let t = topic("a").with_configs(vec![
            config("retention.ms", None),
            config("segment.ms", None),
        ]);
        let AdminError { code, message } = to_new_topic(&t).err().unwrap();
        assert_eq!(code, errors::INVALID_CONFIG);
        assert_eq!(
            message,
            "Null value not supported for topic configs: retention.ms,segment.ms"
        );
    }

    #[test]
    fn configs_keep_the_last_value() {
        let t = topic("a").with_configs(vec![
            config("retention.ms", Some("1")),
            config("retention.ms", Some("2")),
        ]);
        let t = to_new_topic(&t).unwrap();
        assert_eq!(t.configs.get("retention.ms").map(String::as_str), Some("2"));
    }

    #[test]
    fn assignment_with_counts_is_invalid_request() {
        let a = CreatableReplicaAssignment::default()
            .with_partition_index(0)
            .with_broker_ids(vec![BrokerId(0)]);
        let t = topic("a").with_num_partitions(1).with_assignments(vec![a]);
        assert_eq!(
            to_new_topic(&t).err().unwrap().code,
            errors::INVALID_REQUEST
        );
    }

    #[test]
    fn assignment_becomes_a_map() {
        let a0 = CreatableReplicaAssignment::default()
            .with_partition_index(1)
            .with_broker_ids(vec![BrokerId(0)]);
        let a1 = CreatableReplicaAssignment::default()
            .with_partition_index(0)
            .with_broker_ids(vec![BrokerId(0), BrokerId(1)]);
        let t = to_new_topic(&topic("a").with_assignments(vec![a0, a1])).unwrap();
        let a = t.assignment.unwrap();
        assert_eq!(a.get(&0), Some(&vec![0, 1]));
        assert_eq!(a.get(&1), Some(&vec![0]));
    }

    #[test]
    fn failed_entries_reset_metadata() {
        let r = failed(errors::TOPIC_ALREADY_EXISTS, Some("x".into()));
        assert_eq!(r.num_partitions, -1);
        assert_eq!(r.replication_factor, -1);
        assert_eq!(r.configs, Some(Vec::new()));
        assert_eq!(r.topic_id, Uuid::nil());
    }

    #[test]
    fn results_encode_at_every_version() {
        let ok = CreatableTopicResult::default()
            .with_name(TopicName(StrBytes::from_static_str("a")))
            .with_error_message(None)
            .with_topic_id(Uuid::from_u128(3))
            .with_num_partitions(1)
            .with_replication_factor(1)
            .with_configs(Some(vec![CreatableTopicConfigs::default()
                .with_name(StrBytes::from_static_str("retention.ms"))
                .with_value(None)
                .with_config_source(5)]));
        let bad = failed(errors::INVALID_REQUEST, Some("x".into()))
            .with_name(TopicName(StrBytes::from_static_str("b")));
        let body = CreateTopicsResponse::default().with_topics(vec![ok, bad]);
        for v in 2..=7 {
            crate::protocol::encode_response(
                kafka_protocol::messages::ApiKey::CreateTopics,
                v,
                1,
                &body,
            )
            .unwrap();
        }
    }
}
