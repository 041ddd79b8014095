//! ControlledShutdown (API 7), sent by a broker that is stopping to the
//! controller, which moves leadership away and answers with the partitions
//! the broker still leads. The sender needs CLUSTER_ACTION on the
//! cluster; a denial is `cluster_authorization_failed`.

use std::sync::Arc;

use crate::cluster::ClusterHandle;
use crate::controller::ControllerRequest;
use crate::protocol::errors;
use crate::protocol::inter_broker::{
    ControlledShutdownRequest, ControlledShutdownResponse, RemainingPartition,
};

/// ControlledShutdownRequest.getErrorResponse for a denied CLUSTER_ACTION.
pub fn cluster_authorization_failed() -> ControlledShutdownResponse {
    ControlledShutdownResponse {
        error_code: errors::CLUSTER_AUTHORIZATION_FAILED.code(),
        remaining_partitions: Vec::new(),
    }
}

pub async fn handle(
    cluster: &Arc<ClusterHandle>,
    req: ControlledShutdownRequest,
) -> ControlledShutdownResponse {
    let fail = |code| ControlledShutdownResponse {
        error_code: code,
        remaining_partitions: Vec::new(),
    };
    if !cluster.controller.is_active() {
        return fail(errors::NOT_CONTROLLER.code());
    }
    let (tx, rx) = futures_channel::oneshot::channel();
    if !cluster
        .controller
        .request(ControllerRequest::ControlledShutdown {
            broker_id: req.broker_id,
            reply: tx,
        })
    {
        return fail(errors::NOT_CONTROLLER.code());
    }
    match rx.await {
        Ok(Ok(remaining)) => ControlledShutdownResponse {
            error_code: errors::NONE.code(),
            remaining_partitions: remaining
                .into_iter()
                .map(|(topic_name, partition_index)| RemainingPartition {
                    topic_name,
                    partition_index,
                })
                .collect(),
        },
        Ok(Err(code)) => fail(code.code()),
        Err(_) => fail(errors::NOT_CONTROLLER.code()),
    }
}
