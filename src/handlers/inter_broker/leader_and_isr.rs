//! LeaderAndIsr (API 4), from the controller: this broker becomes leader or
//! follower of the listed partitions at the given leader epochs, creating
//! their logs first when needed (ReplicaManager.becomeLeaderOrFollower).

use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;
use std::sync::Arc;

use uuid::Uuid;

use crate::cluster::ClusterHandle;
use crate::config::topic::TopicConfig;
use crate::handlers::KafkaApis;
use crate::metadata::metadata_cache::{PartitionInfo, TopicInfo};
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
    let me = cluster.broker_id;
    let topic_ids: HashMap<&str, Uuid> = req
        .topic_states
        .iter()
        .map(|t| (t.topic_name.as_str(), t.topic_id))
        .collect();
    let mut by_topic: BTreeMap<String, Vec<&LeaderAndIsrPartitionState>> = BTreeMap::new();
    for (topic, s) in req.partition_states() {
        by_topic.entry(topic.to_string()).or_default().push(s);
    }
    // Configs of topics this broker has not seen yet.
    let image = ctx.metadata.image();
    let unknown: Vec<String> = by_topic
        .keys()
        .filter(|t| image.topic(t).is_none())
        .cloned()
        .collect();
    let fetched = if unknown.is_empty() {
        HashMap::new()
    } else {
        cluster
            .zk_call(move |zk| crate::admin::zk::read_topic_configs(zk, &unknown))
            .await
            .unwrap_or_default()
    };
    let leaders: Arc<Vec<LeaderEndpoint>> = Arc::new(
        req.live_leaders
            .iter()
            .filter_map(|l| {
                Some(LeaderEndpoint {
                    broker_id: l.broker_id,
                    host: l.host_name.clone(),
                    port: u16::try_from(l.port).ok()?,
                })
            })
            .collect(),
    );
    // (topic, partition) → error, filled as shards answer.
    let mut results: BTreeMap<(String, i32), ErrorCode> = BTreeMap::new();
    let mut calls: Vec<LocalBoxFuture<Vec<PartitionError>>> = Vec::new();
    for (topic, states) in &by_topic {
        let config = match image.topic(topic) {
            Some(t) => t.config.clone(),
            None => {
                let overrides = fetched.get(topic).cloned().unwrap_or_default();
                match TopicConfig::from_overrides(&ctx.config, &overrides) {
                    Ok(c) => Arc::new(c),
                    Err(e) => {
                        log::warn!("topic {topic}: stored config invalid ({e}); using defaults");
                        Arc::new(
                            TopicConfig::from_overrides(&ctx.config, &BTreeMap::new())
                                .expect("broker defaults are a valid topic config"),
                        )
                    }
                }
            }
        };
        let topic_id = topic_ids
            .get(topic.as_str())
            .copied()
            .filter(|id| !id.is_nil())
            .or_else(|| image.topic(topic).map(|t| t.topic_id))
            .unwrap_or_else(Uuid::nil);
        let info = Arc::new(TopicInfo {
            name: topic.clone(),
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
        });
        let mut per_shard: Vec<Vec<RoleChange>> = vec![Vec::new(); ctx.nr_shards];
        for s in states {
            if !s.replicas.contains(&me) {
                // Kafka ignores partitions this broker is not assigned.
                results.insert(
                    (topic.clone(), s.partition_index),
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
        for (shard, parts) in per_shard.into_iter().enumerate() {
            if parts.is_empty() {
                continue;
            }
            let ctx = ctx.clone();
            let info = info.clone();
            let leaders = leaders.clone();
            calls.push(Box::pin(async move {
                let keys: Vec<(String, i32)> = parts
                    .iter()
                    .map(|p| (info.name.clone(), p.partition))
                    .collect();
                let codes = match ctx
                    .router
                    .run_on(
                        shard,
                        ShardRequest::BecomeLeaderOrFollower {
                            topic: info,
                            parts,
                            leaders,
                        },
                    )
                    .await
                {
                    Ok(ShardResponse::PartitionErrors(c)) => c,
                    _ => vec![errors::KAFKA_STORAGE_ERROR; keys.len()],
                };
                keys.into_iter().zip(codes).collect()
            }));
        }
    }
    for answered in join_all(calls).await {
        results.extend(answered);
    }
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
                    error_code: (*code).code(),
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
