//! The controller's answers to brokers' requests and its leadership
//! timer: ElectLeaders (and the preferred-election node), AlterPartition,
//! ControlledShutdown, and the auto leader rebalance.

use std::collections::BTreeMap;

use super::elections::{self, LeaderAndIsr};
use super::{
    ControllerRequest, ElectionResult, IsrChangeRequest, IsrChangeResult, KafkaController,
};
use crate::metadata::StoreResult;
use crate::protocol::errors;
use crate::protocol::errors::ErrorCode;

type States = BTreeMap<(String, i32), LeaderAndIsr>;

impl KafkaController {
    /// Preferred (0) or unclean (1) election for partitions.
    pub(super) fn elect_leaders(
        &mut self,
        parts: &[(String, i32)],
        election_type: i8,
    ) -> StoreResult<Vec<ElectionResult>> {
        let mut results = Vec::new();
        let mut updates: States = BTreeMap::new();
        for (t, p) in parts {
            let result = |code: ErrorCode, msg: Option<String>| ElectionResult {
                topic: t.clone(),
                partition: *p,
                error_code: code,
                error_message: msg,
            };
            let Some(s) = self.ctx.states.get(&(t.clone(), *p)) else {
                results.push(result(
                    errors::UNKNOWN_TOPIC_OR_PARTITION,
                    Some("The partition does not exist.".into()),
                ));
                continue;
            };
            let replicas = self.ctx.replicas(t, *p);
            let ctx = &self.ctx;
            let is_live = |b: i32| ctx.is_replica_online(b, t, *p);
            if election_type == 0 {
                if replicas.first() == Some(&s.leader) {
                    results.push(result(errors::ELECTION_NOT_NEEDED, None));
                    continue;
                }
                match elections::preferred_replica_leader(replicas, &s.isr, &is_live) {
                    Some(l) => {
                        updates.insert((t.clone(), *p), s.with_leader(l, s.isr.clone(), self.epoch));
                        results.push(result(errors::NONE, None));
                    }
                    None => results.push(result(
                        errors::PREFERRED_LEADER_NOT_AVAILABLE,
                        Some(format!(
                            "Failed to elect leader for partition {t}-{p} under strategy PreferredReplicaPartitionLeaderElectionStrategy"
                        )),
                    )),
                }
            } else {
                if is_live(s.leader) {
                    results.push(result(errors::ELECTION_NOT_NEEDED, None));
                    continue;
                }
                match elections::elect_offline(s, replicas, &is_live, true, self.epoch) {
                    Some(n) => {
                        updates.insert((t.clone(), *p), n);
                        results.push(result(errors::NONE, None));
                    }
                    None => results.push(result(
                        errors::ELIGIBLE_LEADERS_NOT_AVAILABLE,
                        Some(format!(
                            "Failed to elect leader for partition {t}-{p} under strategy OfflinePartitionLeaderElectionStrategy"
                        )),
                    )),
                }
            }
        }
        self.write_states_and_send(&updates, false)?;
        Ok(results)
    }

    pub(super) fn on_request(&mut self, req: ControllerRequest) {
        match req {
            ControllerRequest::ElectLeaders {
                partitions,
                election_type,
                reply,
            } => {
                if !self.is_active() {
                    let _ = reply.send(Err(errors::NOT_CONTROLLER));
                    return;
                }
                let parts = partitions.unwrap_or_else(|| self.ctx.states.keys().cloned().collect());
                match self.elect_leaders(&parts, election_type) {
                    Ok(r) => {
                        let _ = reply.send(Ok(r));
                    }
                    Err(e) => {
                        let _ = reply.send(Err(errors::UNKNOWN_SERVER_ERROR));
                        self.on_zk_failure("ElectLeaders", e);
                    }
                }
            }
            ControllerRequest::AlterPartition {
                broker_id,
                changes,
                reply,
            } => {
                if !self.is_active() {
                    let _ = reply.send(Err(errors::NOT_CONTROLLER));
                    return;
                }
                match self.alter_partition(broker_id, &changes) {
                    Ok(r) => {
                        let changed: Vec<(String, i32)> = r
                            .iter()
                            .filter(|x| x.error_code == errors::NONE)
                            .filter_map(|x| {
                                self.topic_name_of(x.topic_id).map(|t| (t, x.partition))
                            })
                            .collect();
                        let _ = reply.send(Ok(r));
                        // The ISR may now hold a reassignment's target.
                        for key in &changed {
                            if let Err(e) = self.maybe_complete_reassignment(key) {
                                self.on_zk_failure("completing a reassignment", e);
                                break;
                            }
                        }
                    }
                    Err(e) => {
                        let _ = reply.send(Err(errors::UNKNOWN_SERVER_ERROR));
                        self.on_zk_failure("AlterPartition", e);
                    }
                }
            }
            ControllerRequest::ControlledShutdown { broker_id, reply } => {
                if !self.is_active() {
                    let _ = reply.send(Err(errors::NOT_CONTROLLER));
                    return;
                }
                match self.controlled_shutdown(broker_id) {
                    Ok(remaining) => {
                        let _ = reply.send(Ok(remaining));
                    }
                    Err(e) => {
                        let _ = reply.send(Err(errors::UNKNOWN_SERVER_ERROR));
                        self.on_zk_failure("ControlledShutdown", e);
                    }
                }
            }
            ControllerRequest::AlterPartitionReassignments {
                reassignments,
                reply,
            } => {
                if !self.is_active() {
                    let _ = reply.send(Err(errors::NOT_CONTROLLER));
                    return;
                }
                match self.alter_partition_reassignments(&reassignments) {
                    Ok(r) => {
                        let _ = reply.send(Ok(r));
                    }
                    Err(e) => {
                        let _ = reply.send(Err(errors::UNKNOWN_SERVER_ERROR));
                        self.on_zk_failure("AlterPartitionReassignments", e);
                    }
                }
            }
            ControllerRequest::ListPartitionReassignments { partitions, reply } => {
                if !self.is_active() {
                    let _ = reply.send(Err(errors::NOT_CONTROLLER));
                    return;
                }
                let _ = reply.send(Ok(self.list_partition_reassignments(partitions.as_deref())));
            }
            ControllerRequest::UncleanElectionConfig {
                topic,
                unclean_override,
            } => {
                if let Some(entry) = topic.as_ref().and_then(|t| self.ctx.topics.get_mut(t)) {
                    entry.unclean_override = unclean_override;
                }
                if self.is_active() {
                    if let Err(e) = self.elect_after_unclean_change() {
                        self.on_zk_failure("unclean leader election", e);
                    }
                }
            }
        }
    }

    /// The live `unclean.leader.election.enable` broker default.
    pub(super) fn unclean_default(&self) -> bool {
        self.dynamic_config.current().unclean_leader_election_enable
    }

    /// triggerOnlinePartitionStateChange after unclean election was
    /// enabled: partitions without a live leader get one now if they can.
    fn elect_after_unclean_change(&mut self) -> StoreResult<()> {
        let elected = self.elect_offline_partitions()?;
        if elected.is_empty() {
            return Ok(());
        }
        log::info!(
            "elected leaders for {} offline partitions after an unclean election config change",
            elected.len()
        );
        let mut batch = self.batch();
        for (t, p) in &elected {
            batch.add_partition(t, *p, false);
            batch.add_update_metadata(t, *p);
        }
        self.send(batch);
        Ok(())
    }

    /// processAlterPartition: a leader's ISR change, checked against the
    /// current leader, leader epoch and partition epoch, and against live
    /// brokers; written to the state znode, then spread by UpdateMetadata.
    fn alter_partition(
        &mut self,
        broker_id: i32,
        changes: &[IsrChangeRequest],
    ) -> StoreResult<Vec<IsrChangeResult>> {
        let mut results = Vec::with_capacity(changes.len());
        let mut updates: States = BTreeMap::new();
        for c in changes {
            let topic = self
                .ctx
                .topics
                .iter()
                .find(|(_, e)| e.topic_id == c.topic_id)
                .map(|(t, _)| t.clone());
            let result = |code: ErrorCode, s: Option<&LeaderAndIsr>| IsrChangeResult {
                topic_id: c.topic_id,
                partition: c.partition,
                error_code: code,
                leader: s.map_or(-1, |s| s.leader),
                leader_epoch: s.map_or(-1, |s| s.leader_epoch),
                isr: s.map(|s| s.isr.clone()).unwrap_or_default(),
                partition_epoch: s.map_or(-1, |s| s.zk_version),
            };
            let Some(topic) = topic else {
                results.push(result(errors::UNKNOWN_TOPIC_OR_PARTITION, None));
                continue;
            };
            let key = (topic.clone(), c.partition);
            let Some(s) = self.ctx.states.get(&key) else {
                results.push(result(errors::UNKNOWN_TOPIC_OR_PARTITION, None));
                continue;
            };
            if s.leader != broker_id {
                results.push(result(errors::NOT_LEADER_OR_FOLLOWER, Some(s)));
                continue;
            }
            if c.leader_epoch != s.leader_epoch {
                results.push(result(errors::FENCED_LEADER_EPOCH, Some(s)));
                continue;
            }
            // Already in the desired state: answered as it is, before the
            // partition epoch is checked, so a retried change is idempotent
            // (Kafka's equalsAllowStalePartitionEpoch).
            if c.new_isr == s.isr {
                results.push(result(errors::NONE, Some(s)));
                continue;
            }
            if c.partition_epoch != s.zk_version {
                results.push(result(errors::INVALID_UPDATE_VERSION, Some(s)));
                continue;
            }
            let replicas = self.ctx.replicas(&topic, c.partition);
            if c.new_isr.is_empty()
                || !c.new_isr.contains(&broker_id)
                || c.new_isr.iter().any(|b| !replicas.contains(b))
            {
                results.push(result(errors::INVALID_REQUEST, Some(s)));
                continue;
            }
            if c.new_isr
                .iter()
                .any(|b| !self.ctx.is_live(*b) || self.ctx.shutting_down.contains(b))
            {
                results.push(result(errors::INELIGIBLE_REPLICA, Some(s)));
                continue;
            }
            let next = LeaderAndIsr {
                isr: c.new_isr.clone(),
                controller_epoch: self.epoch,
                ..s.clone()
            };
            updates.insert(key, next);
            results.push(result(errors::NONE, None));
        }
        self.write_states(&updates)?;
        // Fill in the written states (new partition epochs).
        for r in results
            .iter_mut()
            .filter(|r| r.error_code == errors::NONE && r.partition_epoch == -1)
        {
            let topic = self
                .ctx
                .topics
                .iter()
                .find(|(_, e)| e.topic_id == r.topic_id)
                .map(|(t, _)| t.clone())
                .unwrap_or_default();
            if let Some(s) = self.ctx.states.get(&(topic, r.partition)) {
                r.leader = s.leader;
                r.leader_epoch = s.leader_epoch;
                r.isr = s.isr.clone();
                r.partition_epoch = s.zk_version;
            }
        }
        let mut batch = self.batch();
        for (t, p) in updates.keys() {
            batch.add_update_metadata(t, *p);
        }
        self.send(batch);
        Ok(results)
    }

    /// doControlledShutdown: leadership moves to another in-sync replica;
    /// where the broker follows, it leaves the ISR. Returns what it still leads.
    fn controlled_shutdown(&mut self, broker_id: i32) -> StoreResult<Vec<(String, i32)>> {
        if !self.ctx.is_live(broker_id) {
            return Ok(Vec::new());
        }
        self.ctx.shutting_down.insert(broker_id);
        let mut updates: States = BTreeMap::new();
        for ((t, p), s) in &self.ctx.states {
            let replicas = self.ctx.replicas(t, *p);
            if !replicas.contains(&broker_id) || replicas.len() < 2 {
                continue;
            }
            let ctx = &self.ctx;
            if s.leader == broker_id {
                let leader = elections::controlled_shutdown_leader(
                    replicas,
                    &s.isr,
                    &|b| ctx.is_replica_online(b, t, *p),
                    &|b| ctx.shutting_down.contains(&b),
                );
                if let Some(l) = leader {
                    let isr: Vec<i32> = s
                        .isr
                        .iter()
                        .copied()
                        .filter(|b| !ctx.shutting_down.contains(b))
                        .collect();
                    updates.insert((t.clone(), *p), s.with_leader(l, isr, self.epoch));
                }
            } else if let Some(n) = elections::remove_from_isr(s, broker_id, self.epoch) {
                updates.insert((t.clone(), *p), n);
            }
        }
        self.write_states_and_send(&updates, false)?;
        let remaining = self
            .ctx
            .states
            .iter()
            .filter(|(_, s)| s.leader == broker_id)
            .map(|(k, _)| k.clone())
            .collect();
        Ok(remaining)
    }

    /// checkAndTriggerAutoLeaderRebalance: per preferred leader, the share of
    /// its partitions led by someone else; above
    /// `leader.imbalance.per.broker.percentage`, preferred elections.
    pub(super) fn check_and_trigger_auto_leader_rebalance(&mut self) -> StoreResult<()> {
        let mut by_preferred: BTreeMap<i32, Vec<(String, i32)>> = BTreeMap::new();
        for (t, e) in &self.ctx.topics {
            if self.ctx.topics_to_delete.contains(t) {
                continue;
            }
            for (p, replicas) in &e.assignment {
                if let Some(&pref) = replicas.first() {
                    by_preferred.entry(pref).or_default().push((t.clone(), *p));
                }
            }
        }
        let mut to_elect = Vec::new();
        for (broker, parts) in by_preferred {
            if !self.ctx.is_live(broker) || self.ctx.shutting_down.contains(&broker) {
                continue;
            }
            let imbalanced: Vec<(String, i32)> = parts
                .iter()
                .filter(|k| self.ctx.states.get(*k).is_some_and(|s| s.leader != broker))
                .cloned()
                .collect();
            let ratio = imbalanced.len() as f64 / parts.len().max(1) as f64;
            if ratio * 100.0 > f64::from(self.config.leader_imbalance_per_broker_percentage) {
                to_elect.extend(imbalanced.into_iter().filter(|k| {
                    self.ctx
                        .states
                        .get(k)
                        .is_some_and(|s| s.isr.contains(&broker))
                }));
            }
        }
        if !to_elect.is_empty() {
            log::info!(
                "auto leader rebalance: preferred election for {} partitions",
                to_elect.len()
            );
            self.elect_leaders(&to_elect, 0)?;
        }
        Ok(())
    }
}
