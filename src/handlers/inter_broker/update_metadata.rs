//! UpdateMetadata (API 6), from the controller: live brokers and partition
//! states for this broker's metadata image (Kafka's ZkMetadataCache).

use std::rc::Rc;
use std::sync::Arc;

use crate::cluster::ClusterHandle;
use crate::handlers::KafkaApis;
use crate::metadata::image;
use crate::protocol::errors;
use crate::protocol::inter_broker::{UpdateMetadataRequest, UpdateMetadataResponse};

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
    let next = image::apply_update_metadata(&current, &req, &ctx.config, &configs);
    ctx.metadata.publish(next);
    UpdateMetadataResponse {
        error_code: errors::NONE.code(),
    }
}
