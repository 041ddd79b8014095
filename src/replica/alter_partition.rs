//! AlterPartitionManager: a leader's ISR changes go to the controller as
//! AlterPartition (API 56, v3 with topic ids); the answer becomes the
//! partition's ISR and partition epoch. Retries while there is no
//! controller or it moved.

use std::rc::Rc;
use std::time::Duration;

use kafka_protocol::messages::alter_partition_request::{BrokerState, PartitionData, TopicData};
use kafka_protocol::messages::{AlterPartitionRequest, AlterPartitionResponse, ApiKey, BrokerId};
use kafka_protocol::protocol::Decodable;

use super::partition::leader::AlterIsr;
use super::ReplicaManager;
use crate::controller::broker_client::{round_trip, BrokerAddress};
use crate::protocol::errors;

pub const ALTER_PARTITION_VERSION: i16 = 3;
const RETRY_BACKOFF_MS: u64 = 100;
const MAX_ATTEMPTS: usize = 50;

fn request(broker_id: i32, items: &[AlterIsr]) -> AlterPartitionRequest {
    let mut topics: Vec<TopicData> = Vec::new();
    for it in items {
        let pd = PartitionData::default()
            .with_partition_index(it.partition)
            .with_leader_epoch(it.leader_epoch)
            .with_partition_epoch(it.partition_epoch)
            .with_new_isr_with_epochs(
                it.new_isr
                    .iter()
                    .map(|b| {
                        BrokerState::default()
                            .with_broker_id(BrokerId(*b))
                            .with_broker_epoch(-1)
                    })
                    .collect(),
            );
        match topics.iter_mut().find(|t| t.topic_id == it.topic_id) {
            Some(t) => t.partitions.push(pd),
            None => topics.push(
                TopicData::default()
                    .with_topic_id(it.topic_id)
                    .with_partitions(vec![pd]),
            ),
        }
    }
    AlterPartitionRequest::default()
        .with_broker_id(BrokerId(broker_id))
        .with_broker_epoch(-1)
        .with_topics(topics)
}

/// Sends the items and applies the answers on this (their owning) shard.
async fn send(rm: &Rc<ReplicaManager>, items: Vec<AlterIsr>) {
    let Some(cluster) = rm.cluster.clone() else {
        return;
    };
    let body = request(cluster.broker_id, &items);
    for attempt in 0..MAX_ATTEMPTS {
        let image = rm.metadata.image();
        let controller = image
            .brokers
            .iter()
            .find(|b| b.id == image.controller_id)
            .cloned();
        let outcome = match controller {
            None => Err("no controller known".to_string()),
            Some(c) => round_trip(
                BrokerAddress {
                    host: &c.host,
                    port: c.port,
                    security: &cluster.inter_broker,
                },
                ApiKey::AlterPartition,
                ALTER_PARTITION_VERSION,
                &body,
                &format!("kshard-broker-{}-alter-partition", cluster.broker_id),
                rm.config.controller_socket_timeout_ms.max(1) as u64,
            )
            .await
            .and_then(|mut b| {
                AlterPartitionResponse::decode(&mut b, ALTER_PARTITION_VERSION)
                    .map_err(|e| e.to_string())
            }),
        };
        match outcome {
            Ok(resp) if resp.error_code == errors::NONE => {
                apply(rm, &items, &resp);
                return;
            }
            Ok(resp) => log::debug!(
                "AlterPartition: controller error {} (attempt {attempt})",
                resp.error_code
            ),
            Err(e) => log::debug!("AlterPartition: {e} (attempt {attempt})"),
        }
        glommio::timer::sleep(Duration::from_millis(RETRY_BACKOFF_MS)).await;
    }
    log::warn!(
        "AlterPartition for {} partitions gave up; the ISR stays as it is",
        items.len()
    );
    let mut partitions = rm.partitions_mut();
    for it in &items {
        partitions.apply_isr_change(&it.topic, it.partition, it.leader_epoch, None);
    }
}

fn apply(rm: &ReplicaManager, items: &[AlterIsr], resp: &AlterPartitionResponse) {
    let mut moved = Vec::new();
    {
        let mut partitions = rm.partitions_mut();
        for it in items {
            let answer = resp
                .topics
                .iter()
                .filter(|t| t.topic_id == it.topic_id)
                .flat_map(|t| t.partitions.iter())
                .find(|p| p.partition_index == it.partition);
            let isr = match answer {
                Some(p) if p.error_code == errors::NONE => {
                    log::info!(
                        "{}-{}: ISR now {:?} (partition epoch {})",
                        it.topic,
                        it.partition,
                        p.isr.iter().map(|b| b.0).collect::<Vec<_>>(),
                        p.partition_epoch
                    );
                    Some((p.isr.iter().map(|b| b.0).collect(), p.partition_epoch))
                }
                Some(p) => {
                    log::info!(
                        "{}-{}: AlterPartition refused with error {}",
                        it.topic,
                        it.partition,
                        p.error_code
                    );
                    None
                }
                None => None,
            };
            let epoch = answer.map_or(it.leader_epoch, |p| p.leader_epoch);
            if partitions.apply_isr_change(&it.topic, it.partition, epoch, isr) {
                moved.push((it.topic.clone(), it.partition));
            }
        }
    }
    for (t, p) in moved {
        rm.on_high_watermark_advanced(&t, p);
    }
}

impl ReplicaManager {
    /// Sends queued ISR changes to the controller, one task per shard.
    pub fn schedule_alter_isr(self: &Rc<Self>) {
        if self.alter_isr_in_flight.get() || self.cluster.is_none() {
            return;
        }
        self.alter_isr_in_flight.set(true);
        let rm = self.clone();
        glommio::spawn_local(async move {
            loop {
                let items = rm.partitions_mut().take_alter_isr_queue();
                if items.is_empty() {
                    break;
                }
                send(&rm, items).await;
            }
            rm.alter_isr_in_flight.set(false);
        })
        .detach();
    }
}
