//! UpdateMetadata (API 6), from the controller: live brokers and partition
//! states for this broker's metadata image (Kafka's ZkMetadataCache).
//! The sender needs CLUSTER_ACTION on the cluster, checked before the
//! controller epoch; a denial is `cluster_authorization_failed`.

use std::rc::Rc;
use std::sync::Arc;

use crate::cluster::ClusterHandle;
use crate::handlers::KafkaApis;
use crate::metadata::image;
use crate::metadata::topics::LEADER_DURING_DELETE;
use crate::protocol::errors;
use crate::protocol::inter_broker::{UpdateMetadataRequest, UpdateMetadataResponse};

/// UpdateMetadataRequest.getErrorResponse for a denied CLUSTER_ACTION.
pub fn cluster_authorization_failed() -> UpdateMetadataResponse {
    UpdateMetadataResponse {
        error_code: errors::CLUSTER_AUTHORIZATION_FAILED.code(),
    }
}

pub async fn handle(
    ctx: &Rc<KafkaApis>,
    cluster: &Arc<ClusterHandle>,
    req: UpdateMetadataRequest,
) -> UpdateMetadataResponse {
    if !cluster.accept_controller_epoch(req.controller_id, req.controller_epoch) {
        log::warn!(
            "ignoring UpdateMetadata from controller {} with stale epoch {} (seen {})",
            req.controller_id,
            req.controller_epoch,
            cluster.controller_epoch()
        );
        return UpdateMetadataResponse {
            error_code: errors::STALE_CONTROLLER_EPOCH.code(),
        };
    }
    let old = ctx.metadata.image();
    let mut unknown: Vec<String> = req
        .partition_states()
        .map(|(t, _)| t)
        .filter(|t| old.topic(t).is_none())
        .map(str::to_string)
        .collect();
    unknown.sort();
    unknown.dedup();
    let configs = if unknown.is_empty() {
        Default::default()
    } else {
        cluster
            .zk_call(move |zk| crate::admin::zk::read_topic_configs(zk, &unknown))
            .await
            .unwrap_or_default()
    };
    // Re-read: only this shard publishes, but the image may have moved
    // while the configs were fetched.
    let current = ctx.metadata.image();
    let broker = ctx.dynamic_config.current();
    let next = image::apply_update_metadata(&current, &req, &broker, &configs);
    ctx.metadata.publish(next);
    remove_offsets_of_deleted_topics(ctx, &req);
    UpdateMetadataResponse {
        error_code: errors::NONE.code(),
    }
}

/// Kafka's onPartitionsDeleted: partitions marked LeaderDuringDelete lose
/// their committed offsets in the groups this broker coordinates.
fn remove_offsets_of_deleted_topics(ctx: &KafkaApis, req: &UpdateMetadataRequest) {
    let mut deleted: Vec<&str> = req
        .partition_states()
        .filter(|(_, s)| s.leader == LEADER_DURING_DELETE)
        .map(|(t, _)| t)
        .collect();
    deleted.dedup();
    for topic in deleted {
        let removed = ctx.with_coordinator(|c, log, now| c.on_topic_deleted(log, topic, now));
        match removed {
            Ok(0) => {}
            Ok(n) => log::info!("removed {n} committed offsets of deleted topic {topic}"),
            Err(e) => log::warn!("removing committed offsets of deleted topic {topic}: {e}"),
        }
    }
}
