//! Kafka's TransactionMarkerChannelManager: once a transaction's
//! PrepareCommit/PrepareAbort is durable, its markers go to the leader of
//! every partition in it (WriteTxnMarkers; this broker's own partitions
//! through the shards, others' over the network), retried until each
//! leader has written and replicated its marker; then the Complete state
//! is written. A partition whose topic was deleted is dropped; sending
//! stops if this broker stops coordinating the id (another coordinator
//! loads the Prepare state and sends the markers again).

use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::{
    ApiKey, ProducerId, TopicName, WriteTxnMarkersRequest, WriteTxnMarkersResponse,
};
use kafka_protocol::protocol::{Decodable, StrBytes};

use super::transaction_coordinator::{TransactionCoordinator, TransactionResult};
use super::transaction_metadata::{TopicPartition, TransactionMetadata, TxnTransitMetadata};
use super::transaction_state_manager::PendingCompletion;
use crate::controller::broker_client::{round_trip, BrokerAddress};
use crate::protocol::errors;
use crate::protocol::errors::ErrorCode;
use crate::replica::{TxnMarker, TxnMarkerPart};
use crate::router::fan_out::write_txn_markers;
use crate::util::now_ms;

/// Kafka's WriteTxnMarkers retry backoff (the channel's poll interval).
const RETRY_BACKOFF_MS: u64 = 100;
/// WriteTxnMarkers v1 is the flexible version Kafka 3.9 sends.
const WRITE_TXN_MARKERS_VERSION: i16 = 1;

/// What one marker write round did with a partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum MarkerOutcome {
    Written,
    Retry,
    /// The partition is gone or cannot take markers: no marker is needed.
    Dropped,
    /// A newer producer epoch or coordinator exists: stop sending.
    Fenced,
}

/// Kafka's TransactionMarkerRequestCompletionHandler, per partition.
fn outcome_of(code: ErrorCode) -> MarkerOutcome {
    match code {
        errors::NONE => MarkerOutcome::Written,
        errors::UNKNOWN_TOPIC_OR_PARTITION
        | errors::NOT_LEADER_OR_FOLLOWER
        | errors::NOT_ENOUGH_REPLICAS
        | errors::NOT_ENOUGH_REPLICAS_AFTER_APPEND
        | errors::REQUEST_TIMED_OUT
        | errors::KAFKA_STORAGE_ERROR => MarkerOutcome::Retry,
        errors::INVALID_PRODUCER_EPOCH | errors::TRANSACTION_COORDINATOR_FENCED => {
            MarkerOutcome::Fenced
        }
        errors::UNSUPPORTED_FOR_MESSAGE_FORMAT | errors::UNSUPPORTED_VERSION => {
            MarkerOutcome::Dropped
        }
        other => {
            log::error!("unexpected error {other} writing a transaction marker; retrying");
            MarkerOutcome::Retry
        }
    }
}

impl TransactionCoordinator {
    /// Resends the markers of the transactions a load found in a Prepare
    /// state (Kafka's loading callback).
    pub(super) fn resume_completions(self: &Rc<Self>, pending: Vec<PendingCompletion>) {
        for p in pending {
            let prepared = {
                let mut state = self.state.borrow_mut();
                match state.get(&p.transactional_id) {
                    Ok(Some((epoch, m))) if epoch == p.coordinator_epoch => {
                        let result = match m.state {
                            super::transaction_metadata::TransactionState::PrepareCommit => {
                                TransactionResult::Commit
                            }
                            _ => TransactionResult::Abort,
                        };
                        let metadata = m.clone();
                        match m.prepare_complete(now_ms() as i64) {
                            Ok(complete) => Some((result, metadata, complete)),
                            Err(e) => {
                                log::error!("transactional id {}: {}", p.transactional_id, e.0);
                                None
                            }
                        }
                    }
                    _ => None,
                }
            };
            if let Some((result, metadata, complete)) = prepared {
                self.clone().send_markers_then_complete(
                    p.transactional_id,
                    p.coordinator_epoch,
                    result,
                    metadata,
                    complete,
                );
            }
        }
    }

    /// Writes the markers of `metadata`'s transaction, then `complete`.
    pub(super) fn send_markers_then_complete(
        self: Rc<Self>,
        transactional_id: String,
        coordinator_epoch: i32,
        result: TransactionResult,
        metadata: TransactionMetadata,
        complete: TxnTransitMetadata,
    ) {
        let marker = TxnMarker {
            producer_id: metadata.producer_id,
            producer_epoch: metadata.producer_epoch,
            coordinator_epoch,
            commit: result == TransactionResult::Commit,
        };
        let partitions: Vec<TopicPartition> = metadata.topic_partitions.iter().cloned().collect();
        glommio::spawn_local(async move {
            let written = self
                .write_markers(&transactional_id, coordinator_epoch, marker, partitions)
                .await;
            if written {
                self.write_completion(&transactional_id, coordinator_epoch, complete)
                    .await;
            }
        })
        .detach();
    }

    fn still_coordinates(&self, transactional_id: &str, coordinator_epoch: i32) -> bool {
        self.state.borrow().coordinator_epoch_of(transactional_id) == Some(coordinator_epoch)
    }

    /// Sends until every partition has its marker; false if sending
    /// stopped (fenced, no longer coordinator, shutdown).
    async fn write_markers(
        &self,
        transactional_id: &str,
        coordinator_epoch: i32,
        marker: TxnMarker,
        mut pending: Vec<TopicPartition>,
    ) -> bool {
        loop {
            if self.router.is_shutting_down()
                || !self.still_coordinates(transactional_id, coordinator_epoch)
            {
                return false;
            }
            let outcomes = self.write_markers_once(marker, &pending).await;
            if outcomes.contains(&MarkerOutcome::Fenced) {
                log::info!(
                    "stopped writing the markers of {transactional_id}: a newer producer epoch or coordinator exists"
                );
                return false;
            }
            let mut outcomes = outcomes.into_iter();
            pending.retain(|_| outcomes.next() == Some(MarkerOutcome::Retry));
            if pending.is_empty() {
                return true;
            }
            glommio::timer::sleep(Duration::from_millis(RETRY_BACKOFF_MS)).await;
        }
    }

    /// One round: each partition's marker to its current leader.
    async fn write_markers_once(
        &self,
        marker: TxnMarker,
        partitions: &[TopicPartition],
    ) -> Vec<MarkerOutcome> {
        let image = self.admin.metadata.image();
        let own_id = self.replica_manager.broker_id;
        let mut outcomes = vec![MarkerOutcome::Retry; partitions.len()];
        // Partition indexes per leader broker.
        let mut by_leader: BTreeMap<i32, Vec<usize>> = BTreeMap::new();
        for (i, tp) in partitions.iter().enumerate() {
            let leader = image
                .topic(&tp.topic)
                .and_then(|t| t.partitions.iter().find(|p| p.partition == tp.partition))
                .map(|p| p.leader);
            match leader {
                None => outcomes[i] = MarkerOutcome::Dropped,
                Some(l) if l < 0 => {}
                Some(l) => by_leader.entry(l).or_default().push(i),
            }
        }
        for (leader, indexes) in by_leader {
            let parts: Vec<TxnMarkerPart> = indexes
                .iter()
                .map(|&i| TxnMarkerPart {
                    topic: partitions[i].topic.clone(),
                    partition: partitions[i].partition,
                    marker,
                })
                .collect();
            let codes = if leader == own_id {
                write_txn_markers(&self.router, parts, self.config.request_timeout_ms).await
            } else {
                let Some(b) = image.brokers.iter().find(|b| b.id == leader) else {
                    continue;
                };
                self.write_remote(&b.host, b.port, marker, &parts).await
            };
            for (&i, code) in indexes.iter().zip(codes) {
                outcomes[i] = outcome_of(code);
            }
        }
        outcomes
    }

    /// WriteTxnMarkers to another broker; every partition gets the
    /// request's failure as REQUEST_TIMED_OUT (retried).
    async fn write_remote(
        &self,
        host: &str,
        port: u16,
        marker: TxnMarker,
        parts: &[TxnMarkerPart],
    ) -> Vec<ErrorCode> {
        let request = marker_request(marker, parts);
        let security = self.replica_manager.inter_broker_security();
        let to = BrokerAddress {
            host,
            port,
            security: &security,
        };
        let answer = round_trip(
            to,
            ApiKey::WriteTxnMarkers,
            WRITE_TXN_MARKERS_VERSION,
            &request,
            "kshard-txn-markers",
            self.config.request_timeout_ms,
        )
        .await
        .and_then(|mut body| {
            WriteTxnMarkersResponse::decode(&mut body, WRITE_TXN_MARKERS_VERSION)
                .map_err(|e| e.to_string())
        });
        match answer {
            Ok(r) => codes_of(&r, marker.producer_id, parts),
            Err(e) => {
                log::debug!("WriteTxnMarkers to {host}:{port}: {e}");
                vec![errors::REQUEST_TIMED_OUT; parts.len()]
            }
        }
    }

    /// Writes the Complete state, retrying while the log is unavailable.
    async fn write_completion(
        &self,
        transactional_id: &str,
        coordinator_epoch: i32,
        complete: TxnTransitMetadata,
    ) {
        loop {
            let e = self
                .append_transaction_to_log_retrying(
                    transactional_id,
                    coordinator_epoch,
                    complete.clone(),
                )
                .await;
            match e {
                errors::NONE => return,
                errors::COORDINATOR_NOT_AVAILABLE if !self.router.is_shutting_down() => {
                    glommio::timer::sleep(Duration::from_millis(RETRY_BACKOFF_MS)).await;
                }
                e => {
                    log::info!(
                        "not completing the transaction of {transactional_id}: writing the transaction log failed with error {e}"
                    );
                    return;
                }
            }
        }
    }
}

fn marker_request(marker: TxnMarker, parts: &[TxnMarkerPart]) -> WriteTxnMarkersRequest {
    let mut topics: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for p in parts {
        topics.entry(&p.topic).or_default().push(p.partition);
    }
    let topics = topics
        .into_iter()
        .map(|(name, partitions)| {
            WritableTxnMarkerTopic::default()
                .with_name(TopicName(StrBytes::from_string(name.to_string())))
                .with_partition_indexes(partitions)
        })
        .collect();
    WriteTxnMarkersRequest::default().with_markers(vec![WritableTxnMarker::default()
        .with_producer_id(ProducerId(marker.producer_id))
        .with_producer_epoch(marker.producer_epoch)
        .with_transaction_result(marker.commit)
        .with_coordinator_epoch(marker.coordinator_epoch)
        .with_topics(topics)])
}

/// Each part's error in a WriteTxnMarkers response; a partition the
/// response leaves out is retried.
fn codes_of(
    r: &WriteTxnMarkersResponse,
    producer_id: i64,
    parts: &[TxnMarkerPart],
) -> Vec<ErrorCode> {
    let find = |p: &TxnMarkerPart| {
        r.markers
            .iter()
            .filter(|m| m.producer_id.0 == producer_id)
            .flat_map(|m| m.topics.iter())
            .filter(|t| t.name.0.as_str() == p.topic)
            .flat_map(|t| t.partitions.iter())
            .find(|q| q.partition_index == p.partition)
            .map(|q| ErrorCode::from_wire(q.error_code))
    };
    parts
        .iter()
        .map(|p| find(p).unwrap_or(errors::REQUEST_TIMED_OUT))
        .collect()
}
