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
    /// Every partition's full replica set (during a reassignment: the
    /// target followed by the original replicas leaving).
    pub assignment: BTreeMap<i32, Vec<i32>>,
    /// Replicas being added / removed, for partitions being reassigned.
    pub adding: BTreeMap<i32, Vec<i32>>,
    pub removing: BTreeMap<i32, Vec<i32>>,
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
    /// Partitions with a reassignment in progress (adding or removing
    /// replicas in their topic znode).
    pub partitions_being_reassigned: BTreeSet<(String, i32)>,
    /// Replicas a live broker reported in a failed log directory
    /// (KAFKA_STORAGE_ERROR in its LeaderAndIsr answer), by broker.
    pub replicas_on_offline_dirs: BTreeMap<i32, BTreeSet<(String, i32)>>,
}

/// A partition's replicas as Kafka's ReplicaAssignment: the full set, and
/// during a reassignment the ones being added and removed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplicaAssignment {
    pub replicas: Vec<i32>,
    pub adding: Vec<i32>,
    pub removing: Vec<i32>,
}

impl ReplicaAssignment {
    pub fn settled(replicas: Vec<i32>) -> Self {
        ReplicaAssignment {
            replicas,
            ..Default::default()
        }
    }

    /// The replicas before the reassignment (ORS).
    pub fn origin_replicas(&self) -> Vec<i32> {
        diff(&self.replicas, &self.adding)
    }

    /// The replicas after it (TRS).
    pub fn target_replicas(&self) -> Vec<i32> {
        diff(&self.replicas, &self.removing)
    }

    pub fn is_being_reassigned(&self) -> bool {
        !self.adding.is_empty() || !self.removing.is_empty()
    }

    /// Kafka's reassignTo: the full set is the target followed by the
    /// origin replicas not in it.
    pub fn reassign_to(&self, target: &[i32]) -> ReplicaAssignment {
        let origin = self.origin_replicas();
        let mut full: Vec<i32> = Vec::with_capacity(target.len() + origin.len());
        for &r in target.iter().chain(origin.iter()) {
            if !full.contains(&r) {
                full.push(r);
            }
        }
        ReplicaAssignment {
            adding: diff(&full, &origin),
            removing: diff(&full, target),
            replicas: full,
        }
    }
}

/// `a` without the members of `b`, in `a`'s order.
pub fn diff(a: &[i32], b: &[i32]) -> Vec<i32> {
    a.iter().copied().filter(|r| !b.contains(r)).collect()
}

impl ControllerContext {
    pub fn is_live(&self, broker: i32) -> bool {
        self.live_brokers.contains_key(&broker)
    }

    /// isReplicaOnline: the broker is live and the replica's log dir is not
    /// offline.
    pub fn is_replica_online(&self, broker: i32, topic: &str, partition: i32) -> bool {
        self.is_live(broker)
            && !self
                .replicas_on_offline_dirs
                .get(&broker)
                .is_some_and(|s| s.contains(&(topic.to_string(), partition)))
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

    /// The partition's full assignment (empty replicas if unknown).
    pub fn full_assignment(&self, topic: &str, partition: i32) -> ReplicaAssignment {
        let Some(t) = self.topics.get(topic) else {
            return ReplicaAssignment::default();
        };
        ReplicaAssignment {
            replicas: t.assignment.get(&partition).cloned().unwrap_or_default(),
            adding: t.adding.get(&partition).cloned().unwrap_or_default(),
            removing: t.removing.get(&partition).cloned().unwrap_or_default(),
        }
    }

    /// updatePartitionFullReplicaAssignment (memory only).
    pub fn set_full_assignment(&mut self, topic: &str, partition: i32, a: &ReplicaAssignment) {
        let Some(t) = self.topics.get_mut(topic) else {
            return;
        };
        t.assignment.insert(partition, a.replicas.clone());
        if a.adding.is_empty() {
            t.adding.remove(&partition);
        } else {
            t.adding.insert(partition, a.adding.clone());
        }
        if a.removing.is_empty() {
            t.removing.remove(&partition);
        } else {
            t.removing.insert(partition, a.removing.clone());
        }
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
    let znode = topics::decode_topic_znode(&path, &data)?;
    let unclean_override = match zk.get(&topics::topic_config_path(name)) {
        Ok((b, _)) => topics::decode_entity_config(&topics::topic_config_path(name), &b)?
            .get("unclean.leader.election.enable")
            .map(|v| v.eq_ignore_ascii_case("true")),
        Err(StoreError::NoNode(_)) => None,
        Err(e) => return Err(e),
    };
    Ok(Some(TopicEntry {
        topic_id: Uuid::from_bytes(znode.topic_id.unwrap_or_else(topics::random_uuid)),
        assignment: znode.partitions,
        adding: znode
            .adding_replicas
            .into_iter()
            .filter(|(_, r)| !r.is_empty())
            .collect(),
        removing: znode
            .removing_replicas
            .into_iter()
            .filter(|(_, r)| !r.is_empty())
            .collect(),
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
