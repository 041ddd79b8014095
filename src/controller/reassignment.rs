//! Partition reassignment as Kafka 3.9's ZooKeeper-mode KafkaController
//! does it (KIP-455): AlterPartitionReassignments and the legacy
//! `/admin/reassign_partitions` znode start one; `onPartitionReassignment`
//! drives it. While the target replicas are not all in the ISR the full
//! set (target + original) replicates at a new leader epoch; once they
//! are, leadership moves into the target if needed, the leaving replicas
//! leave the ISR and delete their logs, and the topic znode is rewritten
//! with only the target. The topic znode carries `adding_replicas` /
//! `removing_replicas` from the first step to the last, so a controller
//! elected mid-way resumes from ZooKeeper.

use std::collections::{BTreeMap, BTreeSet};

use super::context::{read_state, ReplicaAssignment};
use super::requests::send_stop_replica;
use super::{KafkaController, CONTROLLER_EPOCH_PATH};
use crate::metadata::topics::{self, TopicZNode};
use crate::metadata::{MetadataStore, Op, StoreError, StoreResult, ANY_VERSION};
use crate::protocol::errors::{self, ErrorCode};

pub const REASSIGN_PARTITIONS_PATH: &str = "/admin/reassign_partitions";

/// A partition's answer to AlterPartitionReassignments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReassignmentResult {
    pub topic: String,
    pub partition: i32,
    pub error_code: ErrorCode,
    pub error_message: Option<String>,
}

/// One partition of AlterPartitionReassignments: a target, or None to
/// cancel the reassignment in progress.
#[derive(Debug, Clone)]
pub struct ReassignmentRequest {
    pub topic: String,
    pub partition: i32,
    pub target: Option<Vec<i32>>,
}

/// A reassignment in progress, as ListPartitionReassignments lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OngoingReassignment {
    pub topic: String,
    pub partition: i32,
    pub assignment: ReplicaAssignment,
}

type Partition = (String, i32);

impl KafkaController {
    /// processApiPartitionReassignment: validates each target, builds the
    /// reassignment (a cancellation targets the original replicas), drops
    /// the partitions from the ZooKeeper path (the latest request wins)
    /// and starts them.
    pub(super) fn alter_partition_reassignments(
        &mut self,
        requests: &[ReassignmentRequest],
    ) -> StoreResult<Vec<ReassignmentResult>> {
        let mut results = Vec::with_capacity(requests.len());
        let mut to_reassign: BTreeMap<Partition, ReplicaAssignment> = BTreeMap::new();
        for r in requests {
            let key = (r.topic.clone(), r.partition);
            let invalid = r
                .target
                .as_ref()
                .and_then(|t| self.validate_replicas(&r.topic, r.partition, t));
            if let Some(message) = invalid {
                results.push(result(
                    &key,
                    errors::INVALID_REPLICA_ASSIGNMENT,
                    Some(message),
                ));
                continue;
            }
            match self.maybe_build_reassignment(&key, r.target.as_deref()) {
                Some(a) => {
                    to_reassign.insert(key, a);
                }
                None => results.push(result(
                    &key,
                    errors::NO_REASSIGNMENT_IN_PROGRESS,
                    Some("No partition reassignment is in progress.".into()),
                )),
            }
        }
        self.maybe_remove_from_zk_reassignment(&|p, _| to_reassign.contains_key(p))?;
        results.extend(self.maybe_trigger_partition_reassignment(to_reassign)?);
        Ok(results)
    }

    /// Kafka's validateReplicas (the API path only).
    fn validate_replicas(&self, topic: &str, partition: i32, replicas: &[i32]) -> Option<String> {
        let distinct: BTreeSet<i32> = replicas.iter().copied().collect();
        let list = scala_list(replicas);
        if replicas.is_empty() {
            return Some("Empty replica list specified in partition reassignment.".into());
        }
        if distinct.len() != replicas.len() {
            return Some(format!(
                "Duplicate replica ids in partition reassignment replica list: {list}"
            ));
        }
        if replicas.iter().any(|r| *r < 0) {
            return Some(format!("Invalid broker id in replica list: {list}"));
        }
        let adding = self
            .ctx
            .full_assignment(topic, partition)
            .reassign_to(replicas)
            .adding;
        if adding.iter().all(|b| self.ctx.is_live(*b)) {
            return None;
        }
        let live: Vec<String> = self.ctx.live_brokers.keys().map(i32::to_string).collect();
        Some(format!(
            "Replica assignment has brokers that are not alive. Replica list: {}, live broker list: Set({})",
            scala_list(&adding),
            live.join(", ")
        ))
    }

    fn maybe_build_reassignment(
        &self,
        (topic, partition): &Partition,
        target: Option<&[i32]>,
    ) -> Option<ReplicaAssignment> {
        let current = self.ctx.full_assignment(topic, *partition);
        match target {
            Some(t) => Some(current.reassign_to(t)),
            None if current.is_being_reassigned() => {
                Some(current.reassign_to(&current.origin_replicas()))
            }
            None => None,
        }
    }

    fn maybe_trigger_partition_reassignment(
        &mut self,
        reassignments: BTreeMap<Partition, ReplicaAssignment>,
    ) -> StoreResult<Vec<ReassignmentResult>> {
        let mut results = Vec::with_capacity(reassignments.len());
        for (key, a) in reassignments {
            let exists = !self.ctx.replicas(&key.0, key.1).is_empty();
            if self.ctx.topics_to_delete.contains(&key.0) || !exists {
                results.push(result(
                    &key,
                    errors::UNKNOWN_TOPIC_OR_PARTITION,
                    Some("The partition does not exist.".into()),
                ));
                continue;
            }
            self.on_partition_reassignment(&key, &a)?;
            results.push(result(&key, errors::NONE, None));
        }
        Ok(results)
    }

    /// onPartitionReassignment: phase A (replicate to the full set) until
    /// the target is in the ISR, then phase B (settle on the target).
    pub(super) fn on_partition_reassignment(
        &mut self,
        key: &Partition,
        a: &ReplicaAssignment,
    ) -> StoreResult<()> {
        self.update_current_reassignment(key, a)?;
        if !self.is_reassignment_complete(key, a)? {
            log::info!(
                "reassigning {}-{}: replicas {:?}, adding {:?}, removing {:?}",
                key.0,
                key.1,
                a.replicas,
                a.adding,
                a.removing
            );
            self.update_leader_epoch_and_send(key)?;
            return Ok(());
        }
        let completed = ReplicaAssignment::settled(a.target_replicas());
        log::info!(
            "reassignment of {}-{} to {:?} complete",
            key.0,
            key.1,
            completed.replicas
        );
        // B2-B5: the target in memory, a leader in the target, the leaving
        // replicas out of the ISR and their logs deleted.
        self.ctx.set_full_assignment(&key.0, key.1, &completed);
        self.settle_leadership(key, &a.removing)?;
        self.stop_replicas_deleting(key, &a.removing);
        // B6: ZooKeeper last, so a failover before it resumes the reassignment.
        self.write_assignment(key, &completed)?;
        // B7: no longer reassigning, and gone from the ZooKeeper path.
        self.ctx.partitions_being_reassigned.remove(key);
        let replicas = completed.replicas.clone();
        self.maybe_remove_from_zk_reassignment(&|p, r| p == key && r == replicas.as_slice())?;
        // B8
        let mut batch = self.batch();
        batch.add_update_metadata(&key.0, key.1);
        self.send(batch);
        self.resume_topic_deletions()
    }

    /// updateCurrentReassignment: the new full assignment to ZooKeeper and
    /// memory; replicas an earlier reassignment was adding that this one
    /// drops are stopped and deleted at once.
    fn update_current_reassignment(
        &mut self,
        key: &Partition,
        a: &ReplicaAssignment,
    ) -> StoreResult<()> {
        let current = self.ctx.full_assignment(&key.0, key.1);
        if current != *a {
            self.write_assignment(key, a)?;
            self.ctx.set_full_assignment(&key.0, key.1, a);
            let unneeded = super::context::diff(&current.replicas, &a.replicas);
            if !unneeded.is_empty() {
                self.remove_from_isr(key, &unneeded)?;
                self.stop_replicas_deleting(key, &unneeded);
            }
        }
        self.ctx.partitions_being_reassigned.insert(key.clone());
        Ok(())
    }

    /// isReassignmentComplete: nothing to move, or every target replica in
    /// the ISR as ZooKeeper has it.
    fn is_reassignment_complete(
        &self,
        key: &Partition,
        a: &ReplicaAssignment,
    ) -> StoreResult<bool> {
        if !a.is_being_reassigned() {
            return Ok(true);
        }
        Ok(read_state(&self.zk, &key.0, key.1)?
            .is_some_and(|s| a.target_replicas().iter().all(|r| s.isr.contains(r))))
    }

    /// updateLeaderEpochAndSendRequest: the same leader and ISR at the next
    /// leader epoch, to every replica of the (full) assignment.
    fn update_leader_epoch_and_send(&mut self, key: &Partition) -> StoreResult<()> {
        let Some(s) = self.ctx.states.get(key) else {
            log::warn!(
                "reassignment of {}-{}: no partition state yet",
                key.0,
                key.1
            );
            return Ok(());
        };
        let next = s.with_leader(s.leader, s.isr.clone(), self.epoch);
        let updates = BTreeMap::from([(key.clone(), next)]);
        self.write_states_and_send(&updates, false)
    }

    /// Phase B's leadership: a leader in the target (Kafka's
    /// reassignPartitionLeaderElection: the first target replica that is
    /// live and in the ISR) unless the current one is in it and live, and
    /// the leaving replicas out of the ISR, in one new leader epoch.
    fn settle_leadership(&mut self, key: &Partition, removing: &[i32]) -> StoreResult<()> {
        let Some(s) = self.ctx.states.get(key).cloned() else {
            return Ok(());
        };
        let target = self.ctx.replicas(&key.0, key.1).to_vec();
        let online = |b: i32| self.ctx.is_replica_online(b, &key.0, key.1);
        let leader = if target.contains(&s.leader) && online(s.leader) {
            s.leader
        } else {
            match target
                .iter()
                .copied()
                .find(|r| online(*r) && s.isr.contains(r))
            {
                Some(l) => l,
                None => {
                    log::warn!(
                        "reassignment of {}-{}: no live in-sync replica in {target:?} to lead",
                        key.0,
                        key.1
                    );
                    s.leader
                }
            }
        };
        let mut isr = super::context::diff(&s.isr, removing);
        if isr.is_empty() {
            // Kafka never empties an ISR: the last member stays.
            isr = s.isr.clone();
        }
        let next = s.with_leader(leader, isr, self.epoch);
        let updates = BTreeMap::from([(key.clone(), next)]);
        self.write_states_and_send(&updates, false)
    }

    /// The OfflineReplica transition's ISR edit for replicas leaving
    /// before they ever joined the target (a reassignment replaced).
    fn remove_from_isr(&mut self, key: &Partition, gone: &[i32]) -> StoreResult<()> {
        let Some(s) = self.ctx.states.get(key).cloned() else {
            return Ok(());
        };
        let isr = super::context::diff(&s.isr, gone);
        if isr.len() == s.isr.len() && !gone.contains(&s.leader) {
            return Ok(());
        }
        let leader = if gone.contains(&s.leader) {
            let replicas = self.ctx.replicas(&key.0, key.1);
            replicas
                .iter()
                .copied()
                .find(|r| self.ctx.is_replica_online(*r, &key.0, key.1) && isr.contains(r))
                .unwrap_or(super::elections::NO_LEADER)
        } else {
            s.leader
        };
        let isr = if isr.is_empty() { s.isr.clone() } else { isr };
        let next = s.with_leader(leader, isr, self.epoch);
        let updates = BTreeMap::from([(key.clone(), next)]);
        self.write_states_and_send(&updates, false)
    }

    /// ReplicaDeletionStarted: StopReplica with delete to each leaving
    /// replica that is live (a dead one keeps its log until it is told).
    fn stop_replicas_deleting(&self, key: &Partition, replicas: &[i32]) {
        let Some(channels) = &self.channels else {
            return;
        };
        let epoch = self.ctx.states.get(key).map_or(-1, |s| s.leader_epoch);
        for &b in replicas.iter().filter(|b| self.ctx.is_live(**b)) {
            send_stop_replica(
                channels,
                self.broker_id,
                self.epoch,
                b,
                &key.0,
                &[(key.1, epoch)],
                true,
                None,
            );
        }
    }

    /// updateReplicaAssignmentForPartition: the topic znode with this
    /// partition's assignment replaced, fenced by the controller epoch.
    fn write_assignment(&mut self, key: &Partition, a: &ReplicaAssignment) -> StoreResult<()> {
        let Some(entry) = self.ctx.topics.get(&key.0) else {
            return Err(StoreError::NoNode(topics::topic_path(&key.0)));
        };
        let mut znode = TopicZNode {
            topic_id: Some(*entry.topic_id.as_bytes()),
            partitions: entry.assignment.clone(),
            adding_replicas: entry.adding.clone(),
            removing_replicas: entry.removing.clone(),
        };
        znode.partitions.insert(key.1, a.replicas.clone());
        set_or_remove(&mut znode.adding_replicas, key.1, &a.adding);
        set_or_remove(&mut znode.removing_replicas, key.1, &a.removing);
        let ops = [
            Op::Check {
                path: CONTROLLER_EPOCH_PATH.into(),
                expected_version: self.epoch_zk_version,
            },
            Op::SetData {
                path: topics::topic_path(&key.0),
                data: topics::encode_topic_znode(&znode).into_bytes(),
                expected_version: ANY_VERSION,
            },
        ];
        self.zk.multi(&ops)?;
        Ok(())
    }

    /// PartitionReassignmentIsrChange: after an ISR change of a partition
    /// being reassigned, finish it if the target has caught up.
    pub(super) fn maybe_complete_reassignment(&mut self, key: &Partition) -> StoreResult<()> {
        if !self.ctx.partitions_being_reassigned.contains(key) {
            return Ok(());
        }
        let a = self.ctx.full_assignment(&key.0, key.1);
        if self.is_reassignment_complete(key, &a)? {
            self.on_partition_reassignment(key, &a)?;
        }
        Ok(())
    }

    /// maybeResumeReassignments: runs onPartitionReassignment again for the
    /// reassignments `select` picks (after failover, or when a target
    /// broker starts).
    pub(super) fn maybe_resume_reassignments(
        &mut self,
        select: &dyn Fn(&Partition, &ReplicaAssignment) -> bool,
    ) -> StoreResult<()> {
        let pending: Vec<Partition> = self
            .ctx
            .partitions_being_reassigned
            .iter()
            .cloned()
            .collect();
        for key in pending {
            let a = self.ctx.full_assignment(&key.0, key.1);
            if select(&key, &a) {
                self.on_partition_reassignment(&key, &a)?;
            }
        }
        Ok(())
    }

    /// processZkPartitionReassignment: `/admin/reassign_partitions`
    /// (written by older tools) starts the reassignments it lists; the
    /// ones that fail are dropped from it. Returns those started.
    pub(super) fn on_zk_reassignment(&mut self) -> StoreResult<BTreeSet<Partition>> {
        if self.zk.exists_watch(REASSIGN_PARTITIONS_PATH)?.is_none() {
            return Ok(BTreeSet::new());
        }
        let listed = self.read_zk_reassignment()?;
        let mut to_reassign = BTreeMap::new();
        let mut failed: BTreeSet<Partition> = BTreeSet::new();
        for (key, target) in listed {
            match self.maybe_build_reassignment(&key, Some(&target)) {
                Some(a) => {
                    to_reassign.insert(key, a);
                }
                None => {
                    failed.insert(key);
                }
            }
        }
        let mut started = BTreeSet::new();
        for r in self.maybe_trigger_partition_reassignment(to_reassign)? {
            let key = (r.topic, r.partition);
            if r.error_code == errors::NONE {
                started.insert(key);
            } else {
                failed.insert(key);
            }
        }
        if !failed.is_empty() {
            log::warn!("reassignments through ZooKeeper failed for {failed:?}");
            self.maybe_remove_from_zk_reassignment(&|p, _| failed.contains(p))?;
        }
        Ok(started)
    }

    /// ReassignPartitionsZNode.decode; unreadable JSON lists nothing.
    fn read_zk_reassignment(&self) -> StoreResult<Vec<(Partition, Vec<i32>)>> {
        match self.zk.get(REASSIGN_PARTITIONS_PATH) {
            Ok((data, _)) => Ok(parse_reassignment(&data)),
            Err(StoreError::NoNode(_)) => Ok(Vec::new()),
            Err(e) => Err(e),
        }
    }

    /// maybeRemoveFromZkReassignment: rewrites `/admin/reassign_partitions`
    /// without the partitions `remove` picks, deleting it when none remain
    /// (and watching for the next one).
    fn maybe_remove_from_zk_reassignment(
        &mut self,
        remove: &dyn Fn(&Partition, &[i32]) -> bool,
    ) -> StoreResult<()> {
        if self.zk.exists(REASSIGN_PARTITIONS_PATH).is_none() {
            return Ok(());
        }
        let listed = self.read_zk_reassignment()?;
        let before = listed.len();
        let remaining: Vec<(Partition, Vec<i32>)> =
            listed.into_iter().filter(|(p, r)| !remove(p, r)).collect();
        if remaining.len() == before && before > 0 {
            return Ok(());
        }
        let check = Op::Check {
            path: CONTROLLER_EPOCH_PATH.into(),
            expected_version: self.epoch_zk_version,
        };
        let op = if remaining.is_empty() {
            log::info!("no more partitions to reassign; deleting {REASSIGN_PARTITIONS_PATH}");
            Op::Delete {
                path: REASSIGN_PARTITIONS_PATH.into(),
                expected_version: ANY_VERSION,
            }
        } else {
            Op::SetData {
                path: REASSIGN_PARTITIONS_PATH.into(),
                data: encode_reassignment(&remaining).into_bytes(),
                expected_version: ANY_VERSION,
            }
        };
        match self.zk.multi(&[check, op]) {
            Ok(_) | Err(StoreError::NoNode(_)) => {}
            Err(e) => return Err(e),
        }
        if remaining.is_empty() {
            // Watch for the next one (it may already be there).
            if self.zk.exists_watch(REASSIGN_PARTITIONS_PATH)?.is_some() {
                self.on_zk_reassignment()?;
            }
        }
        Ok(())
    }

    /// initializePartitionReassignments after failover: what the ZooKeeper
    /// path lists, then every API reassignment found in topic znodes.
    pub(super) fn initialize_partition_reassignments(&mut self) -> StoreResult<()> {
        let resumed = self.on_zk_reassignment()?;
        self.maybe_resume_reassignments(&|p, _| !resumed.contains(p))
    }

    /// ListPartitionReassignments: the named partitions (or all) that are
    /// being reassigned.
    pub(super) fn list_partition_reassignments(
        &self,
        partitions: Option<&[Partition]>,
    ) -> Vec<OngoingReassignment> {
        let all: Vec<Partition>;
        let keys: &[Partition] = match partitions {
            Some(p) => p,
            None => {
                all = self
                    .ctx
                    .partitions_being_reassigned
                    .iter()
                    .cloned()
                    .collect();
                &all
            }
        };
        keys.iter()
            .filter_map(|(t, p)| {
                let a = self.ctx.full_assignment(t, *p);
                a.is_being_reassigned().then(|| OngoingReassignment {
                    topic: t.clone(),
                    partition: *p,
                    assignment: a,
                })
            })
            .collect()
    }
}

fn result(key: &Partition, code: ErrorCode, message: Option<String>) -> ReassignmentResult {
    ReassignmentResult {
        topic: key.0.clone(),
        partition: key.1,
        error_code: code,
        error_message: message,
    }
}

fn set_or_remove(map: &mut BTreeMap<i32, Vec<i32>>, partition: i32, replicas: &[i32]) {
    if replicas.is_empty() {
        map.remove(&partition);
    } else {
        map.insert(partition, replicas.to_vec());
    }
}

/// The request's replicas as Kafka's messages print them (a Scala
/// mutable Buffer): `ArrayBuffer(1, 2)`.
fn scala_list(items: &[i32]) -> String {
    let parts: Vec<String> = items.iter().map(i32::to_string).collect();
    format!("ArrayBuffer({})", parts.join(", "))
}

/// `{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2]}]}`.
pub fn parse_reassignment(data: &[u8]) -> Vec<(Partition, Vec<i32>)> {
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(data) else {
        return Vec::new();
    };
    let Some(list) = v.get("partitions").and_then(|p| p.as_array()) else {
        return Vec::new();
    };
    list.iter()
        .filter_map(|e| {
            let t = e.get("topic")?.as_str()?.to_string();
            let p = i32::try_from(e.get("partition")?.as_i64()?).ok()?;
            let replicas = e
                .get("replicas")?
                .as_array()?
                .iter()
                .map(|r| r.as_i64().and_then(|n| i32::try_from(n).ok()))
                .collect::<Option<Vec<i32>>>()?;
            Some(((t, p), replicas))
        })
        .collect()
}

/// ReassignPartitionsZNode.encode.
pub fn encode_reassignment(list: &[(Partition, Vec<i32>)]) -> String {
    let parts: Vec<String> = list
        .iter()
        .map(|((t, p), r)| {
            serde_json::json!({"topic": t, "partition": p, "replicas": r}).to_string()
        })
        .collect();
    format!("{{\"version\":1,\"partitions\":[{}]}}", parts.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reassign_to_follows_kafka() {
        let a = ReplicaAssignment::settled(vec![1, 2, 3]);
        let r = a.reassign_to(&[4, 2, 3]);
        assert_eq!(r.replicas, vec![4, 2, 3, 1]);
        assert_eq!(r.adding, vec![4]);
        assert_eq!(r.removing, vec![1]);
        assert_eq!(r.origin_replicas(), vec![2, 3, 1]);
        assert_eq!(r.target_replicas(), vec![4, 2, 3]);
        // Cancelling goes back to the origin, nothing added or removed.
        let c = r.reassign_to(&r.origin_replicas());
        assert_eq!(c.replicas, vec![2, 3, 1]);
        assert!(!c.is_being_reassigned());
        // A reorder moves nothing.
        let o = a.reassign_to(&[3, 2, 1]);
        assert_eq!(o.replicas, vec![3, 2, 1]);
        assert!(!o.is_being_reassigned());
        // A new target during a reassignment keeps the origin.
        let n = r.reassign_to(&[5, 6]);
        assert_eq!(n.replicas, vec![5, 6, 2, 3, 1]);
        assert_eq!(n.adding, vec![5, 6]);
        assert_eq!(n.removing, vec![2, 3, 1]);
    }

    #[test]
    fn zk_reassignment_round_trips() {
        let list = vec![
            (("a".to_string(), 0), vec![1, 2]),
            (("b".to_string(), 3), vec![3]),
        ];
        let json = encode_reassignment(&list);
        assert_eq!(parse_reassignment(json.as_bytes()), list);
        assert!(parse_reassignment(b"{").is_empty());
        assert!(parse_reassignment(
            br#"{"version":1,"partitions":[{"topic":"a","partition":0,"replicas":["x"]}]}"#
        )
        .is_empty());
    }
}
