//! StopReplica (API 5), from the controller: stop serving partitions and,
//! for topic deletion, remove their logs. The sender needs CLUSTER_ACTION
//! on the cluster, checked before the controller epoch; a denial is
//! `cluster_authorization_failed`.

use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;

use crate::cluster::ClusterHandle;
use crate::handlers::KafkaApis;
use crate::protocol::errors;
use crate::protocol::inter_broker::{
    StopReplicaPartitionError, StopReplicaRequest, StopReplicaResponse,
};
use crate::replica::StopReplicaPart;
use crate::router::join_all;
use crate::router::{ShardRequest, ShardResponse};
use kshard_shards::mailbox::LocalBoxFuture;

/// (topic, partition, leader epoch, delete) from any request version.
fn partitions(req: &StopReplicaRequest) -> Vec<(String, i32, i32, bool)> {
    let mut out = Vec::new();
    for p in &req.ungrouped_partitions {
        out.push((
            p.topic_name.clone(),
            p.partition_index,
            -1,
            req.delete_partitions,
        ));
    }
    for t in &req.topics {
        for &p in &t.partition_indexes {
            out.push((t.name.clone(), p, -1, req.delete_partitions));
        }
    }
    for t in &req.topic_states {
        for s in &t.partition_states {
            out.push((
                t.topic_name.clone(),
                s.partition_index,
                s.leader_epoch,
                s.delete_partition,
            ));
        }
    }
    out
}

/// StopReplicaRequest.getErrorResponse for a denied CLUSTER_ACTION: the
/// code at the top and on every partition.
pub fn cluster_authorization_failed(req: &StopReplicaRequest) -> StopReplicaResponse {
    let code = errors::CLUSTER_AUTHORIZATION_FAILED.code();
    StopReplicaResponse {
        error_code: code,
        partition_errors: partitions(req)
            .into_iter()
            .map(
                |(topic_name, partition_index, _, _)| StopReplicaPartitionError {
                    topic_name,
                    partition_index,
                    error_code: code,
                },
            )
            .collect(),
    }
}

pub async fn handle(
    ctx: &Rc<KafkaApis>,
    cluster: &Arc<ClusterHandle>,
    req: StopReplicaRequest,
    _version: i16,
) -> StopReplicaResponse {
    if !cluster.accept_controller_epoch(req.controller_id, req.controller_epoch) {
        return StopReplicaResponse {
            error_code: errors::STALE_CONTROLLER_EPOCH.code(),
            ..Default::default()
        };
    }
    // (topic, shard, delete) → (partition, epoch)
    let mut groups: BTreeMap<(String, usize, bool), Vec<StopReplicaPart>> = BTreeMap::new();
    for (t, p, epoch, delete) in partitions(&req) {
        let owner = ctx.owner_of(&t, p);
        groups
            .entry((t, owner, delete))
            .or_default()
            .push(StopReplicaPart {
                partition: p,
                leader_epoch: epoch,
            });
    }
    let mut calls: Vec<LocalBoxFuture<Vec<StopReplicaPartitionError>>> = Vec::new();
    for ((topic, shard, delete), parts) in groups {
        let ctx = ctx.clone();
        calls.push(Box::pin(async move {
            let ids: Vec<i32> = parts.iter().map(|p| p.partition).collect();
            let codes = match ctx
                .router
                .run_on(
                    shard,
                    ShardRequest::StopReplicas {
                        topic: topic.clone(),
                        parts,
                        delete,
                    },
                )
                .await
            {
                Ok(ShardResponse::PartitionErrors(c)) => c,
                _ => vec![errors::KAFKA_STORAGE_ERROR; ids.len()],
            };
            ids.into_iter()
                .zip(codes)
                .map(|(p, error_code)| StopReplicaPartitionError {
                    topic_name: topic.clone(),
                    partition_index: p,
                    error_code: error_code.code(),
                })
                .collect()
        }));
    }
    let partition_errors = join_all(calls).await.into_iter().flatten().collect();
    StopReplicaResponse {
        error_code: errors::NONE.code(),
        partition_errors,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::inter_broker::{StopReplicaPartitionState, StopReplicaTopicState};

    #[test]
    fn denial_names_every_partition() {
        let req = StopReplicaRequest {
            topic_states: vec![StopReplicaTopicState {
                topic_name: "t".into(),
                partition_states: vec![StopReplicaPartitionState {
                    partition_index: 2,
                    ..Default::default()
                }],
            }],
            ..Default::default()
        };
        let code = errors::CLUSTER_AUTHORIZATION_FAILED.code();
        let r = cluster_authorization_failed(&req);
        assert_eq!(r.error_code, code);
        assert_eq!(
            r.partition_errors,
            vec![StopReplicaPartitionError {
                topic_name: "t".into(),
                partition_index: 2,
                error_code: code,
            }]
        );
    }
}
