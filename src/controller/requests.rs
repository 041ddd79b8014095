//! ControllerBrokerRequestBatch: builds the LeaderAndIsr, UpdateMetadata
//! and StopReplica requests of one controller step and queues them on the
//! per-broker channels, every request carrying the controller epoch.

use std::collections::{BTreeMap, BTreeSet};

use super::context::ControllerContext;
use super::ControllerEvent;
use crate::controller::channel::{ControllerChannelManager, QueuedRequest, ResponseCallback};
use crate::protocol::inter_broker::{
    LeaderAndIsrLiveLeader, LeaderAndIsrPartitionState, LeaderAndIsrRequest,
    LeaderAndIsrTopicState, StopReplicaPartitionState, StopReplicaRequest, StopReplicaTopicState,
    UpdateMetadataBroker, UpdateMetadataEndpoint, UpdateMetadataPartitionState,
    UpdateMetadataRequest, UpdateMetadataTopicState, LEADER_AND_ISR_VERSIONS,
    STOP_REPLICA_VERSIONS, UPDATE_METADATA_VERSIONS,
};

pub const LEADER_AND_ISR_KEY: i16 = 4;
pub const STOP_REPLICA_KEY: i16 = 5;
pub const UPDATE_METADATA_KEY: i16 = 6;

/// Kafka's security protocol ids (SecurityProtocol.id).
fn security_protocol_id(name: &str) -> i16 {
    match name {
        "PLAINTEXT" => 0,
        "SSL" => 1,
        "SASL_PLAINTEXT" => 2,
        "SASL_SSL" => 3,
        _ => 0,
    }
}

pub struct RequestBatch<'a> {
    pub controller_id: i32,
    pub controller_epoch: i32,
    pub ctx: &'a ControllerContext,
    /// `inter.broker.listener.name`: the endpoint LeaderAndIsr gives the
    /// followers for each leader.
    inter_broker_listener: &'a str,
    /// broker → topic → partitions to send LeaderAndIsr for.
    leader_and_isr: BTreeMap<i32, BTreeMap<String, BTreeSet<i32>>>,
    /// Partitions whose state goes to every live broker by UpdateMetadata.
    update_metadata: BTreeSet<(String, i32)>,
    /// Topics announced as being deleted (leader -2).
    deleting: BTreeSet<String>,
    new_partitions: BTreeSet<(String, i32)>,
    /// Send UpdateMetadata even with no partition in it (the live brokers changed).
    brokers_changed: bool,
    /// Where LeaderAndIsr answers go (they report offline log directories).
    events: crossbeam_channel::Sender<ControllerEvent>,
}

impl<'a> RequestBatch<'a> {
    pub fn new(
        controller_id: i32,
        controller_epoch: i32,
        ctx: &'a ControllerContext,
        inter_broker_listener: &'a str,
        events: crossbeam_channel::Sender<ControllerEvent>,
    ) -> Self {
        RequestBatch {
            controller_id,
            controller_epoch,
            ctx,
            inter_broker_listener,
            leader_and_isr: BTreeMap::new(),
            update_metadata: BTreeSet::new(),
            deleting: BTreeSet::new(),
            new_partitions: BTreeSet::new(),
            brokers_changed: false,
            events,
        }
    }

    /// LeaderAndIsr for (topic, partition) to `brokers` (live ones only),
    /// and its state to everyone by UpdateMetadata, as Kafka's
    /// addLeaderAndIsrRequestForBrokers does.
    pub fn add_leader_and_isr(
        &mut self,
        brokers: &[i32],
        topic: &str,
        partition: i32,
        is_new: bool,
    ) {
        for &b in brokers {
            if self.ctx.is_live(b) {
                self.leader_and_isr
                    .entry(b)
                    .or_default()
                    .entry(topic.to_string())
                    .or_default()
                    .insert(partition);
            }
        }
        if is_new {
            self.new_partitions.insert((topic.to_string(), partition));
        }
        self.update_metadata.insert((topic.to_string(), partition));
    }

    /// LeaderAndIsr to every live replica of the partition.
    pub fn add_partition(&mut self, topic: &str, partition: i32, is_new: bool) {
        let replicas = self.ctx.replicas(topic, partition).to_vec();
        self.add_leader_and_isr(&replicas, topic, partition, is_new);
    }

    pub fn add_update_metadata(&mut self, topic: &str, partition: i32) {
        self.update_metadata.insert((topic.to_string(), partition));
    }

    pub fn add_all_partitions_to_update_metadata(&mut self) {
        for (t, e) in &self.ctx.topics {
            for p in e.assignment.keys() {
                self.update_metadata.insert((t.clone(), *p));
            }
        }
    }

    /// UpdateMetadata goes to every live broker even if no partition changed.
    pub fn mark_brokers_changed(&mut self) {
        self.brokers_changed = true;
    }

    pub fn mark_deleting(&mut self, topic: &str) {
        self.deleting.insert(topic.to_string());
    }

    /// Queues everything on the channels: LeaderAndIsr first, then
    /// UpdateMetadata to every live broker (so a new leader knows it leads
    /// before clients are told).
    pub fn send(self, channels: &ControllerChannelManager) {
        let live_leaders: Vec<LeaderAndIsrLiveLeader> = self
            .ctx
            .live_brokers
            .values()
            .map(|b| {
                // Kafka's liveLeaders: each leader's inter-broker endpoint.
                let (host, port) = b
                    .endpoint(self.inter_broker_listener)
                    .map_or((&b.host, b.port), |e| (&e.host, e.port));
                LeaderAndIsrLiveLeader {
                    broker_id: b.id,
                    host_name: host.clone(),
                    port: i32::from(port),
                }
            })
            .collect();
        let version = LEADER_AND_ISR_VERSIONS.1;
        for (broker, topics) in &self.leader_and_isr {
            let mut topic_states = Vec::new();
            for (topic, partitions) in topics {
                let Some(entry) = self.ctx.topics.get(topic) else {
                    continue;
                };
                let mut partition_states = Vec::new();
                for &p in partitions {
                    let Some(s) = self.ctx.states.get(&(topic.clone(), p)) else {
                        continue;
                    };
                    partition_states.push(LeaderAndIsrPartitionState {
                        topic_name: topic.clone(),
                        partition_index: p,
                        controller_epoch: s.controller_epoch,
                        leader: s.leader,
                        leader_epoch: s.leader_epoch,
                        isr: s.isr.clone(),
                        partition_epoch: s.zk_version,
                        replicas: entry.assignment.get(&p).cloned().unwrap_or_default(),
                        adding_replicas: entry.adding.get(&p).cloned().unwrap_or_default(),
                        removing_replicas: entry.removing.get(&p).cloned().unwrap_or_default(),
                        is_new: self.new_partitions.contains(&(topic.clone(), p)),
                        ..Default::default()
                    });
                }
                if !partition_states.is_empty() {
                    topic_states.push(LeaderAndIsrTopicState {
                        topic_name: topic.clone(),
                        topic_id: entry.topic_id,
                        partition_states,
                    });
                }
            }
            if topic_states.is_empty() {
                continue;
            }
            let body = LeaderAndIsrRequest {
                controller_id: self.controller_id,
                controller_epoch: self.controller_epoch,
                broker_epoch: -1,
                topic_states,
                live_leaders: live_leaders.clone(),
                ..Default::default()
            };
            let events = self.events.clone();
            let from = *broker;
            let cb: ResponseCallback = Box::new(move |body| {
                let _ = events.send(ControllerEvent::LeaderAndIsrResponse { broker: from, body });
            });
            queue(
                channels,
                *broker,
                LEADER_AND_ISR_KEY,
                version,
                &body,
                Some(cb),
            );
        }
        if !self.brokers_changed
            && self.update_metadata.is_empty()
            && self.deleting.is_empty()
            && self.leader_and_isr.is_empty()
        {
            return;
        }
        let body = self.update_metadata_body();
        for &b in self.ctx.live_brokers.keys() {
            queue(
                channels,
                b,
                UPDATE_METADATA_KEY,
                UPDATE_METADATA_VERSIONS.1,
                &body,
                None,
            );
        }
    }

    fn update_metadata_body(&self) -> UpdateMetadataRequest {
        let mut by_topic: BTreeMap<&str, Vec<UpdateMetadataPartitionState>> = BTreeMap::new();
        for (topic, p) in &self.update_metadata {
            let (Some(entry), Some(s)) = (
                self.ctx.topics.get(topic),
                self.ctx.states.get(&(topic.clone(), *p)),
            ) else {
                continue;
            };
            let replicas = entry.assignment.get(p).cloned().unwrap_or_default();
            let offline: Vec<i32> = replicas
                .iter()
                .copied()
                .filter(|b| !self.ctx.is_replica_online(*b, topic, *p))
                .collect();
            let deleting = self.deleting.contains(topic);
            by_topic
                .entry(topic.as_str())
                .or_default()
                .push(UpdateMetadataPartitionState {
                    topic_name: topic.clone(),
                    partition_index: *p,
                    controller_epoch: s.controller_epoch,
                    leader: if deleting {
                        super::elections::LEADER_DURING_DELETE
                    } else {
                        s.leader
                    },
                    leader_epoch: s.leader_epoch,
                    isr: s.isr.clone(),
                    zk_version: s.zk_version,
                    replicas,
                    offline_replicas: offline,
                });
        }
        for topic in &self.deleting {
            if by_topic.contains_key(topic.as_str()) {
                continue;
            }
            for p in self.ctx.partitions_of(topic) {
                let s = self.ctx.states.get(&(topic.clone(), p));
                by_topic
                    .entry(topic.as_str())
                    .or_default()
                    .push(UpdateMetadataPartitionState {
                        topic_name: topic.clone(),
                        partition_index: p,
                        controller_epoch: self.controller_epoch,
                        leader: super::elections::LEADER_DURING_DELETE,
                        leader_epoch: s.map_or(0, |s| s.leader_epoch),
                        isr: s.map(|s| s.isr.clone()).unwrap_or_default(),
                        zk_version: s.map_or(0, |s| s.zk_version),
                        replicas: self.ctx.replicas(topic, p).to_vec(),
                        offline_replicas: Vec::new(),
                    });
            }
        }
        let topic_states = by_topic
            .into_iter()
            .map(|(t, partition_states)| UpdateMetadataTopicState {
                topic_name: t.to_string(),
                topic_id: self
                    .ctx
                    .topics
                    .get(t)
                    .map(|e| e.topic_id)
                    .unwrap_or_default(),
                partition_states,
            })
            .collect();
        UpdateMetadataRequest {
            controller_id: self.controller_id,
            controller_epoch: self.controller_epoch,
            broker_epoch: -1,
            topic_states,
            live_brokers: self.live_brokers(),
            ..Default::default()
        }
    }

    fn live_brokers(&self) -> Vec<UpdateMetadataBroker> {
        self.ctx
            .live_brokers
            .values()
            .map(|b| UpdateMetadataBroker {
                id: b.id,
                v0_host: b.host.clone(),
                v0_port: i32::from(b.port),
                endpoints: b
                    .endpoints
                    .iter()
                    .map(|e| UpdateMetadataEndpoint {
                        port: i32::from(e.port),
                        host: e.host.clone(),
                        listener: e.listener.clone(),
                        security_protocol: security_protocol_id(&e.security_protocol),
                    })
                    .collect(),
                rack: b.rack.clone(),
            })
            .collect()
    }
}

fn queue<M: kafka_protocol::protocol::Encodable>(
    channels: &ControllerChannelManager,
    broker: i32,
    api_key: i16,
    version: i16,
    body: &M,
    cb: Option<ResponseCallback>,
) {
    match QueuedRequest::new(api_key, version, body, cb) {
        Ok(r) => channels.send(broker, r),
        Err(e) => log::error!("controller request to broker {broker}: {e}"),
    }
}

/// StopReplica for partitions of one topic on one broker.
#[allow(clippy::too_many_arguments)]
pub fn send_stop_replica(
    channels: &ControllerChannelManager,
    controller_id: i32,
    controller_epoch: i32,
    broker: i32,
    topic: &str,
    partitions: &[(i32, i32)],
    delete: bool,
    cb: Option<ResponseCallback>,
) {
    let body = StopReplicaRequest {
        controller_id,
        controller_epoch,
        broker_epoch: -1,
        topic_states: vec![StopReplicaTopicState {
            topic_name: topic.to_string(),
            partition_states: partitions
                .iter()
                .map(|&(p, leader_epoch)| StopReplicaPartitionState {
                    partition_index: p,
                    leader_epoch,
                    delete_partition: delete,
                })
                .collect(),
        }],
        ..Default::default()
    };
    queue(
        channels,
        broker,
        STOP_REPLICA_KEY,
        STOP_REPLICA_VERSIONS.1,
        &body,
        cb,
    );
}
