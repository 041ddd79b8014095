//! AlterReplicaLogDirs (API 34, v0-v2; v0 is v1's layout, served through
//! `protocol/legacy`), Kafka's `KafkaApis.handleAlterReplicaLogDirsRequest`
//! and `ReplicaManager.alterReplicaLogDirs`: moves replicas between this
//! broker's log dirs. A partition named twice takes its last path. A path
//! that is not one of `log.dirs` exactly as this broker prints them
//! (absolute, no trailing separator) is LOG_DIR_NOT_FOUND; the rest goes to
//! each partition's owning shard (`replica/partitions/alter_log_dirs.rs`).
//! Needs ALTER on the cluster.

use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;

use kafka_protocol::messages::alter_replica_log_dirs_response::{
    AlterReplicaLogDirPartitionResult, AlterReplicaLogDirTopicResult,
};
use kafka_protocol::messages::{
    AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kshard_shards::mailbox::LocalBoxFuture;

use super::{respond, HandlerResult, KafkaApis};
use crate::protocol::errors::ErrorCode;
use crate::protocol::{decode_body, errors, Request};
use crate::router::{join_all, ShardRequest, ShardResponse};
use crate::security::authorizer::AclOperation;

/// One shard's share: (topic, partition, target log dir index).
type ShardParts = Vec<(String, i32, usize)>;

pub async fn handle(ctx: &Rc<KafkaApis>, req: &Request) -> HandlerResult {
    let r: AlterReplicaLogDirsRequest = decode_body(req)?;
    if !ctx.authorize_cluster(req, AclOperation::Alter) {
        return respond(req, &unauthorized(&r));
    }
    // Kafka's partitionDirs: one target per partition, the last one named.
    let mut order: Vec<(String, i32)> = Vec::new();
    let mut target: HashMap<(String, i32), Option<usize>> = HashMap::new();
    for d in &r.dirs {
        let index = (0..ctx.log_dirs.len())
            .find(|&i| ctx.log_dirs.path(i).to_str() == Some(d.path.as_str()));
        for t in &d.topics {
            for &p in &t.partitions {
                let key = (t.name.0.to_string(), p);
                if target.insert(key.clone(), index).is_none() {
                    order.push(key);
                }
            }
        }
    }
    let mut codes: HashMap<(String, i32), ErrorCode> = HashMap::new();
    let mut by_shard: BTreeMap<usize, ShardParts> = BTreeMap::new();
    for key in &order {
        match target[key] {
            None => {
                codes.insert(key.clone(), errors::LOG_DIR_NOT_FOUND);
            }
            Some(index) => by_shard
                .entry(ctx.owner_of(&key.0, key.1))
                .or_default()
                .push((key.0.clone(), key.1, index)),
        }
    }
    let calls: Vec<(ShardParts, LocalBoxFuture<_>)> = by_shard
        .into_iter()
        .map(|(shard, parts)| {
            let router = ctx.router.clone();
            let request = ShardRequest::AlterReplicaLogDirs {
                parts: parts.clone(),
            };
            let call =
                Box::pin(async move { router.run_on(shard, request).await }) as LocalBoxFuture<_>;
            (parts, call)
        })
        .collect();
    let (parts, replies): (Vec<_>, Vec<_>) = calls.into_iter().unzip();
    for (parts, reply) in parts.into_iter().zip(join_all(replies).await) {
        let answered = match reply {
            Ok(ShardResponse::PartitionErrors(e)) if e.len() == parts.len() => e,
            _ => vec![errors::UNKNOWN_SERVER_ERROR; parts.len()],
        };
        for ((topic, partition, _), code) in parts.into_iter().zip(answered) {
            codes.insert((topic, partition), code);
        }
    }
    let mut results: Vec<AlterReplicaLogDirTopicResult> = Vec::new();
    for (topic, partition) in order {
        let code = codes[&(topic.clone(), partition)];
        let result = AlterReplicaLogDirPartitionResult::default()
            .with_partition_index(partition)
            .with_error_code(code.code());
        match results
            .iter_mut()
            .find(|t| t.topic_name.0.as_str() == topic)
        {
            Some(t) => t.partitions.push(result),
            None => results.push(
                AlterReplicaLogDirTopicResult::default()
                    .with_topic_name(TopicName(StrBytes::from_string(topic)))
                    .with_partitions(vec![result]),
            ),
        }
    }
    respond(
        req,
        &AlterReplicaLogDirsResponse::default()
            .with_throttle_time_ms(0)
            .with_results(results),
    )
}

/// getErrorResponse: every topic of every dir, as named (a partition
/// named twice answered twice), each partition CLUSTER_AUTHORIZATION_FAILED.
fn unauthorized(r: &AlterReplicaLogDirsRequest) -> AlterReplicaLogDirsResponse {
    let code = errors::CLUSTER_AUTHORIZATION_FAILED.code();
    let results = r
        .dirs
        .iter()
        .flat_map(|d| d.topics.iter())
        .map(|t| {
            AlterReplicaLogDirTopicResult::default()
                .with_topic_name(t.name.clone())
                .with_partitions(
                    t.partitions
                        .iter()
                        .map(|&p| {
                            AlterReplicaLogDirPartitionResult::default()
                                .with_partition_index(p)
                                .with_error_code(code)
                        })
                        .collect(),
                )
        })
        .collect();
    AlterReplicaLogDirsResponse::default()
        .with_throttle_time_ms(0)
        .with_results(results)
}
