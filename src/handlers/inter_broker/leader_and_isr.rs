//! LeaderAndIsr (API 4), from the controller: this broker becomes leader or
//! follower of the listed partitions at the given leader epochs, creating
//! their logs first when needed (ReplicaManager.becomeLeaderOrFollower).
//! The sender needs CLUSTER_ACTION on the cluster, checked before the
//! controller epoch; a denial is `cluster_authorization_failed`.

use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;
use std::sync::Arc;

use uuid::Uuid;

use crate::cluster::ClusterHandle;
use crate::config::topic::TopicConfig;
use crate::handlers::KafkaApis;
use crate::metadata::metadata_cache::{MetadataImage, PartitionInfo, TopicInfo};
use crate::protocol::errors;
use crate::protocol::errors::ErrorCode;
use crate::protocol::inter_broker::{
    LeaderAndIsrPartitionError, LeaderAndIsrPartitionState, LeaderAndIsrRequest,
    LeaderAndIsrResponse, LeaderAndIsrTopicError,
};
use crate::replica::fetcher::LeaderEndpoint;
use crate::replica::RoleChange;
use crate::router::join_all;
use crate::router::{ShardRequest, ShardResponse};
use kshard_shards::mailbox::LocalBoxFuture;

/// ((topic, partition), error code) as a shard answers.
type PartitionError = ((String, i32), ErrorCode);

/// First version whose response groups errors by topic id.
const VERSION_WITH_TOPIC_IDS: i16 = 5;

pub async fn handle(
    ctx: &Rc<KafkaApis>,
    cluster: &Arc<ClusterHandle>,
    req: LeaderAndIsrRequest,
    version: i16,
) -> LeaderAndIsrResponse {
    if !cluster.accept_controller_epoch(req.controller_id, req.controller_epoch) {
        log::warn!(
            "ignoring LeaderAndIsr from controller {} with stale epoch {} (seen {})",
            req.controller_id,
            req.controller_epoch,
            cluster.controller_epoch()
        );
        return LeaderAndIsrResponse {
            error_code: errors::STALE_CONTROLLER_EPOCH.code(),
            ..Default::default()
        };
    }
    let topic_ids: HashMap<&str, Uuid> = req
        .topic_states
        .iter()
        .map(|t| (t.topic_name.as_str(), t.topic_id))
        .collect();
    let mut by_topic: BTreeMap<String, Vec<&LeaderAndIsrPartitionState>> = BTreeMap::new();
    for (topic, s) in req.partition_states() {
        by_topic.entry(topic.to_string()).or_default().push(s);
    }
    let image = ctx.metadata.image();
    let fetched = configs_of_new_topics(cluster, &image, &by_topic).await;
    let leaders = Arc::new(live_leaders(&req));
    // (topic, partition) → error, filled as shards answer.
    let mut results: BTreeMap<(String, i32), ErrorCode> = BTreeMap::new();
    let mut calls: Vec<LocalBoxFuture<Vec<PartitionError>>> = Vec::new();
    for (topic, states) in &by_topic {
        let config = topic_config(ctx, &image, &fetched, topic);
        let topic_id = topic_ids
            .get(topic.as_str())
            .copied()
            .filter(|id| !id.is_nil())
            .or_else(|| image.topic(topic).map(|t| t.topic_id))
            .unwrap_or_else(Uuid::nil);
        let info = topic_info(topic, topic_id, states, config);
        let per_shard = role_changes_by_shard(ctx, cluster.broker_id, topic, states, &mut results);
        for (shard, parts) in per_shard.into_iter().enumerate() {
            if !parts.is_empty() {
                calls.push(become_on_shard(ctx, shard, &info, parts, &leaders));
            }
        }
    }
    for answered in join_all(calls).await {
        results.extend(answered);
    }
    response(version, results, &topic_ids)
}

/// LeaderAndIsrRequest.getErrorResponse for a denied CLUSTER_ACTION: the
/// code at the top and on every partition, by topic id from v5.
pub fn cluster_authorization_failed(
    req: &LeaderAndIsrRequest,
    version: i16,
) -> LeaderAndIsrResponse {
    let code = errors::CLUSTER_AUTHORIZATION_FAILED.code();
    let error = |topic_name: &str, s: &LeaderAndIsrPartitionState| LeaderAndIsrPartitionError {
        topic_name: topic_name.to_string(),
        partition_index: s.partition_index,
        error_code: code,
    };
    let mut response = LeaderAndIsrResponse {
        error_code: code,
        ..Default::default()
    };
    if version >= VERSION_WITH_TOPIC_IDS {
        response.topics = req
            .topic_states
            .iter()
            .map(|t| LeaderAndIsrTopicError {
                topic_id: t.topic_id,
                partition_errors: t.partition_states.iter().map(|s| error("", s)).collect(),
            })
            .collect();
    } else {
        response.partition_errors = req.partition_states().map(|(t, s)| error(t, s)).collect();
    }
    response
}

/// The stored configs of topics this broker has not seen yet.
async fn configs_of_new_topics(
    cluster: &Arc<ClusterHandle>,
    image: &MetadataImage,
    by_topic: &BTreeMap<String, Vec<&LeaderAndIsrPartitionState>>,
) -> HashMap<String, BTreeMap<String, String>> {
    let unknown: Vec<String> = by_topic
        .keys()
        .filter(|t| image.topic(t).is_none())
        .cloned()
        .collect();
    if unknown.is_empty() {
        return HashMap::new();
    }
    cluster
        .zk_call(move |zk| crate::admin::zk::read_topic_configs(zk, &unknown))
        .await
        .unwrap_or_default()
}

/// The live brokers the request lists, for the fetchers.
fn live_leaders(req: &LeaderAndIsrRequest) -> Vec<LeaderEndpoint> {
    req.live_leaders
        .iter()
        .filter_map(|l| {
            Some(LeaderEndpoint {
                broker_id: l.broker_id,
                host: l.host_name.clone(),
                port: u16::try_from(l.port).ok()?,
            })
        })
        .collect()
}

/// A known topic's config, or a new topic's from its stored overrides.
fn topic_config(
    ctx: &KafkaApis,
    image: &MetadataImage,
    fetched: &HashMap<String, BTreeMap<String, String>>,
    topic: &str,
) -> Arc<TopicConfig> {
    if let Some(t) = image.topic(topic) {
        return t.config.clone();
    }
    let overrides = fetched.get(topic).cloned().unwrap_or_default();
    let broker = ctx.dynamic_config.current();
    match TopicConfig::from_overrides(&broker, &overrides) {
        Ok(c) => Arc::new(c),
        Err(e) => {
            log::warn!("topic {topic}: stored config invalid ({e}); using defaults");
            Arc::new(
                TopicConfig::from_overrides(&broker, &BTreeMap::new())
                    .expect("broker defaults are a valid topic config"),
            )
        }
    }
}

fn topic_info(
    topic: &str,
    topic_id: Uuid,
    states: &[&LeaderAndIsrPartitionState],
    config: Arc<TopicConfig>,
) -> Arc<TopicInfo> {
    Arc::new(TopicInfo {
        name: topic.to_string(),
        topic_id,
        partitions: states
            .iter()
            .map(|s| PartitionInfo {
                partition: s.partition_index,
                leader: s.leader,
                leader_epoch: s.leader_epoch,
                replicas: s.replicas.clone(),
                isr: s.isr.clone(),
                offline_replicas: Vec::new(),
            })
            .collect(),
        overrides: config.overrides.clone(),
        config,
        is_internal: topic.starts_with("__"),
    })
}

/// The role changes of `topic` by owning shard; partitions not assigned to
/// this broker are answered UNKNOWN_TOPIC_OR_PARTITION in `results`.
fn role_changes_by_shard(
    ctx: &KafkaApis,
    me: i32,
    topic: &str,
    states: &[&LeaderAndIsrPartitionState],
    results: &mut BTreeMap<(String, i32), ErrorCode>,
) -> Vec<Vec<RoleChange>> {
    let mut per_shard: Vec<Vec<RoleChange>> = vec![Vec::new(); ctx.nr_shards];
    for s in states {
        if !s.replicas.contains(&me) {
            // Kafka ignores partitions this broker is not assigned.
            results.insert(
                (topic.to_string(), s.partition_index),
                errors::UNKNOWN_TOPIC_OR_PARTITION,
            );
            continue;
        }
        let owner = ctx.owner_of(topic, s.partition_index);
        per_shard[owner].push(RoleChange {
            partition: s.partition_index,
            leader: s.leader,
            leader_epoch: s.leader_epoch,
            replicas: s.replicas.clone(),
            isr: s.isr.clone(),
            partition_epoch: s.partition_epoch,
        });
    }
    per_shard
}

/// Makes `shard` leader or follower of `parts`; a shard that cannot be
/// reached answers KAFKA_STORAGE_ERROR for them.
fn become_on_shard(
    ctx: &Rc<KafkaApis>,
    shard: usize,
    info: &Arc<TopicInfo>,
    parts: Vec<RoleChange>,
    leaders: &Arc<Vec<LeaderEndpoint>>,
) -> LocalBoxFuture<Vec<PartitionError>> {
    let ctx = ctx.clone();
    let info = info.clone();
    let leaders = leaders.clone();
    Box::pin(async move {
        let keys: Vec<(String, i32)> = parts
            .iter()
            .map(|p| (info.name.clone(), p.partition))
            .collect();
        let request = ShardRequest::BecomeLeaderOrFollower {
            topic: info,
            parts,
            leaders,
        };
        let codes = match ctx.router.run_on(shard, request).await {
            Ok(ShardResponse::PartitionErrors(c)) => c,
            _ => vec![errors::KAFKA_STORAGE_ERROR; keys.len()],
        };
        keys.into_iter().zip(codes).collect()
    })
}

/// The answers, grouped by topic id from v5, listed before.
fn response(
    version: i16,
    results: BTreeMap<(String, i32), ErrorCode>,
    topic_ids: &HashMap<&str, Uuid>,
) -> LeaderAndIsrResponse {
    let mut response = LeaderAndIsrResponse::default();
    if version >= VERSION_WITH_TOPIC_IDS {
        let mut by_id: BTreeMap<String, Vec<LeaderAndIsrPartitionError>> = BTreeMap::new();
        for ((t, p), code) in &results {
            by_id
                .entry(t.clone())
                .or_default()
                .push(LeaderAndIsrPartitionError {
                    topic_name: String::new(),
                    partition_index: *p,
                    error_code: code.code(),
                });
        }
        response.topics = by_id
            .into_iter()
            .map(|(t, partition_errors)| LeaderAndIsrTopicError {
                topic_id: topic_ids.get(t.as_str()).copied().unwrap_or_default(),
                partition_errors,
            })
            .collect();
    } else {
        response.partition_errors = results
            .into_iter()
            .map(|((t, p), code)| LeaderAndIsrPartitionError {
                topic_name: t,
                partition_index: p,
                error_code: code.code(),
            })
            .collect();
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::inter_broker::LeaderAndIsrTopicState;

    fn state(topic: &str, partition: i32) -> LeaderAndIsrPartitionState {
        LeaderAndIsrPartitionState {
            topic_name: topic.to_string(),
            partition_index: partition,
            ..Default::default()
        }
    }

    #[test]
    fn denial_names_every_partition() {
        let code = errors::CLUSTER_AUTHORIZATION_FAILED.code();
        let id = Uuid::from_u128(7);
        let grouped = LeaderAndIsrRequest {
            topic_states: vec![LeaderAndIsrTopicState {
                topic_name: "t".into(),
                topic_id: id,
                partition_states: vec![state("", 0), state("", 1)],
            }],
            ..Default::default()
        };
        let v5 = cluster_authorization_failed(&grouped, 5);
        assert_eq!(v5.error_code, code);
        assert!(v5.partition_errors.is_empty());
        assert_eq!(v5.topics.len(), 1);
        assert_eq!(v5.topics[0].topic_id, id);
        assert_eq!(v5.topics[0].partition_errors.len(), 2);
        let v4 = cluster_authorization_failed(&grouped, 4);
        assert!(v4.topics.is_empty());
        assert_eq!(v4.partition_errors[1].topic_name, "t");
        assert_eq!(v4.partition_errors[1].partition_index, 1);
        let ungrouped = LeaderAndIsrRequest {
            ungrouped_partition_states: vec![state("u", 3)],
            ..Default::default()
        };
        let v1 = cluster_authorization_failed(&ungrouped, 1);
        assert_eq!(v1.partition_errors[0].topic_name, "u");
        assert_eq!(v1.partition_errors[0].error_code, code);
    }
}
