//! WriteTxnMarkers (API 27, v0-1): a transaction coordinator has this
//! broker write commit or abort markers to partitions it leads; each is
//! answered once replicated (Kafka appends markers with acks=all). Needs
//! ALTER or CLUSTER_ACTION on the cluster.

use std::rc::Rc;

use kafka_protocol::messages::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
};
use kafka_protocol::messages::{WriteTxnMarkersRequest, WriteTxnMarkersResponse};

use super::{respond, HandlerResult};
use crate::handlers::KafkaApis;
use crate::protocol::errors::ErrorCode;
use crate::protocol::{decode_body, errors, Request};
use crate::replica::{TxnMarker, TxnMarkerPart};
use crate::router::write_txn_markers;
use crate::security::authorizer::{AclOperation, AuditLog, ResourceType, CLUSTER_NAME};

/// ALTER on the cluster (its denial not logged), else CLUSTER_ACTION.
fn authorized(ctx: &KafkaApis, req: &Request) -> bool {
    ctx.authorize_logged(
        req,
        AclOperation::Alter,
        ResourceType::Cluster,
        CLUSTER_NAME,
        AuditLog::ALLOWED_ONLY,
    ) || ctx.authorize_cluster(req, AclOperation::ClusterAction)
}

pub async fn handle(ctx: &Rc<KafkaApis>, req: &Request) -> HandlerResult {
    let r: WriteTxnMarkersRequest = decode_body(req)?;
    if !authorized(ctx, req) {
        // getErrorResponse: every partition of every marker.
        let denied = response(&r, || errors::CLUSTER_AUTHORIZATION_FAILED);
        return respond(req, &denied);
    }
    let mut parts = Vec::new();
    for m in &r.markers {
        let marker = TxnMarker {
            producer_id: m.producer_id.0,
            producer_epoch: m.producer_epoch,
            coordinator_epoch: m.coordinator_epoch,
            commit: m.transaction_result,
        };
        for t in &m.topics {
            for &partition in &t.partition_indexes {
                parts.push(TxnMarkerPart {
                    topic: t.name.0.to_string(),
                    partition,
                    marker,
                });
            }
        }
    }
    let timeout_ms = ctx.config.request_timeout_ms.max(1) as u64;
    let mut codes = write_txn_markers(&ctx.router, parts, timeout_ms)
        .await
        .into_iter();
    let body = response(&r, || codes.next().unwrap_or(errors::UNKNOWN_SERVER_ERROR));
    respond(req, &body)
}

/// The request's markers with a code per partition, taken in order.
fn response(
    r: &WriteTxnMarkersRequest,
    mut code: impl FnMut() -> ErrorCode,
) -> WriteTxnMarkersResponse {
    let markers = r
        .markers
        .iter()
        .map(|m| {
            let topics = m
                .topics
                .iter()
                .map(|t| {
                    let partitions = t
                        .partition_indexes
                        .iter()
                        .map(|&p| {
                            WritableTxnMarkerPartitionResult::default()
                                .with_partition_index(p)
                                .with_error_code(code().code())
                        })
                        .collect();
                    WritableTxnMarkerTopicResult::default()
                        .with_name(t.name.clone())
                        .with_partitions(partitions)
                })
                .collect();
            WritableTxnMarkerResult::default()
                .with_producer_id(m.producer_id)
                .with_topics(topics)
        })
        .collect();
    WriteTxnMarkersResponse::default().with_markers(markers)
}
