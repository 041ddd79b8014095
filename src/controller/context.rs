//! ControllerContext: the controller's cache of ZooKeeper — live brokers,
//! topics with their assignments, every partition's leader and ISR —
//! loaded on failover and kept current by the watch handlers.

use std::collections::{BTreeMap, BTreeSet};

use uuid::Uuid;

use super::elections::LeaderAndIsr;
use crate::metadata::image::{decode_broker_registration, BrokerRegistration};
use crate::metadata::topics;
use crate::metadata::{MetadataStore, StoreError, StoreResult};
use crate::zk::ZkClient;

pub const BROKER_IDS_PATH: &str = "/brokers/ids";
pub const TOPICS_PATH: &str = "/brokers/topics";

#[derive(Debug, Clone)]
pub struct TopicEntry {
    pub topic_id: Uuid,
    pub assignment: BTreeMap<i32, Vec<i32>>,
    /// `unclean.leader.election.enable` as set on the topic, if it is.
    pub unclean_override: Option<bool>,
}

#[derive(Debug, Default)]
pub struct ControllerContext {
    pub live_brokers: BTreeMap<i32, BrokerRegistration>,
    pub topics: BTreeMap<String, TopicEntry>,
    pub states: BTreeMap<(String, i32), LeaderAndIsr>,
    /// Topics under `/admin/delete_topics` not yet removed.
    pub topics_to_delete: BTreeSet<String>,
    /// Deletions whose StopReplica is out: topic → brokers yet to answer.
    pub deletion_pending_acks: BTreeMap<String, BTreeSet<i32>>,
    /// Brokers in controlled shutdown.
    pub shutting_down: BTreeSet<i32>,
}

impl ControllerContext {
    pub fn is_live(&self, broker: i32) -> bool {
        self.live_brokers.contains_key(&broker)
    }

    pub fn partitions_of(&self, topic: &str) -> Vec<i32> {
        self.topics
            .get(topic)
            .map(|t| t.assignment.keys().copied().collect())
            .unwrap_or_default()
    }

    pub fn replicas(&self, topic: &str, partition: i32) -> &[i32] {
        self.topics
            .get(topic)
            .and_then(|t| t.assignment.get(&partition))
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }

    /// Every partition a broker holds a replica of.
    pub fn partitions_on_broker(&self, broker: i32) -> Vec<(String, i32)> {
        let mut out = Vec::new();
        for (t, e) in &self.topics {
            for (p, replicas) in &e.assignment {
                if replicas.contains(&broker) {
                    out.push((t.clone(), *p));
                }
            }
        }
        out
    }

    pub fn unclean_allowed(&self, topic: &str, broker_default: bool) -> bool {
        self.topics
            .get(topic)
            .and_then(|t| t.unclean_override)
            .unwrap_or(broker_default)
    }
}

/// Reads the live brokers under `/brokers/ids`.
pub fn read_brokers(
    zk: &ZkClient,
    ids: &[String],
) -> StoreResult<BTreeMap<i32, BrokerRegistration>> {
    let mut out = BTreeMap::new();
    for name in ids {
        let Ok(id) = name.parse::<i32>() else {
            continue;
        };
        match zk.get(&format!("{BROKER_IDS_PATH}/{name}")) {
            Ok((data, stat)) => {
                if let Some(mut reg) = decode_broker_registration(id, &data) {
                    reg.registered_at_ms = stat.ctime_ms;
                    out.insert(id, reg);
                } else {
                    log::warn!("{BROKER_IDS_PATH}/{name}: unreadable registration");
                }
            }
            // Gone between the listing and the read: not live.
            Err(StoreError::NoNode(_)) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}

/// Reads a topic's assignment (arming a data watch on it) and its config.
pub fn read_topic(zk: &ZkClient, name: &str) -> StoreResult<Option<TopicEntry>> {
    let path = topics::topic_path(name);
    let (data, _) = match zk.get_watch(&path) {
        Ok(x) => x,
        Err(StoreError::NoNode(_)) => return Ok(None),
        Err(e) => return Err(e),
    };
    let (topic_id, assignment) = topics::decode_topic(&path, &data)?;
    let unclean_override = match zk.get(&topics::topic_config_path(name)) {
        Ok((b, _)) => topics::decode_entity_config(&topics::topic_config_path(name), &b)?
            .get("unclean.leader.election.enable")
            .map(|v| v.eq_ignore_ascii_case("true")),
        Err(StoreError::NoNode(_)) => None,
        Err(e) => return Err(e),
    };
    Ok(Some(TopicEntry {
        topic_id: Uuid::from_bytes(topic_id.unwrap_or_else(topics::random_uuid)),
        assignment,
        unclean_override,
    }))
}

/// Reads a partition's state znode; None if absent.
pub fn read_state(zk: &ZkClient, topic: &str, partition: i32) -> StoreResult<Option<LeaderAndIsr>> {
    let path = topics::partition_state_path(topic, partition);
    match zk.get(&path) {
        Ok((data, stat)) => {
            let s = topics::decode_partition_state(&path, &data, stat.version)?;
            Ok(Some(LeaderAndIsr {
                leader: s.leader,
                leader_epoch: s.leader_epoch,
                isr: s.isr,
                zk_version: stat.version,
                controller_epoch: s.controller_epoch,
            }))
        }
        Err(StoreError::NoNode(_)) => Ok(None),
        Err(e) => Err(e),
    }
}

pub fn state_json(s: &LeaderAndIsr) -> Vec<u8> {
    topics::encode_partition_state(&topics::PartitionState {
        leader: s.leader,
        leader_epoch: s.leader_epoch,
        isr: s.isr.clone(),
        controller_epoch: s.controller_epoch,
        leader_recovery_state: 0,
        zk_version: s.zk_version,
    })
    .into_bytes()
}
