//! The controller's event handlers: failover, broker changes, topic
//! creation, partition increase, deletion, elections, controlled shutdown.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::Ordering;

use super::context::{self, read_brokers, read_state, read_topic, BROKER_IDS_PATH, TOPICS_PATH};
use super::elections::{self, LeaderAndIsr};
use super::log_dir_events::LOG_DIR_EVENT_NOTIFICATION_PATH;
use super::requests::{send_stop_replica, RequestBatch};
use super::{
    ControllerEvent, KafkaController, DELETE_TOPICS_PATH, ISR_CHANGE_PATH, PREFERRED_ELECTION_PATH,
};
use crate::controller::channel::ControllerChannelManager;
use crate::metadata::topics;
use crate::metadata::{MetadataStore, Op, StoreError, StoreResult, ANY_VERSION};
use crate::protocol::errors;

const FEATURE_PATH: &str = "/feature";

type States = BTreeMap<(String, i32), LeaderAndIsr>;

impl KafkaController {
    pub(super) fn batch(&self) -> RequestBatch<'_> {
        RequestBatch::new(
            self.broker_id,
            self.epoch,
            &self.ctx,
            &self.config.inter_broker_listener_name,
            self.events_tx.clone(),
        )
    }

    pub(super) fn send(&self, batch: RequestBatch<'_>) {
        if let Some(ch) = &self.channels {
            batch.send(ch);
        }
    }

    /// onControllerFailover: watches, context from ZooKeeper, leaders for
    /// partitions that have none, then everything to every live broker.
    pub(super) fn on_controller_failover(&mut self) -> StoreResult<()> {
        // FeatureZNode as a 3.9 controller enables feature versioning: no
        // finalized features, status Enabled.
        match self.zk.create(
            FEATURE_PATH,
            br#"{"features":{},"version":2,"status":1}"#,
            false,
            false,
        ) {
            Ok(_) | Err(StoreError::NodeExists(_)) => {}
            Err(e) => return Err(e),
        }
        let ids = self.zk.children_watch(BROKER_IDS_PATH)?;
        self.ctx = context::ControllerContext {
            live_brokers: read_brokers(&self.zk, &ids)?,
            ..Default::default()
        };
        for name in self.zk.children_watch(TOPICS_PATH)? {
            if let Some(entry) = read_topic(&self.zk, &name)? {
                self.ctx.topics.insert(name, entry);
            }
        }
        for (t, e) in &self.ctx.topics {
            for p in e.assignment.keys() {
                if let Some(s) = read_state(&self.zk, t, *p)? {
                    self.ctx.states.insert((t.clone(), *p), s);
                }
            }
            // Reassignments in progress, as their topic znodes record them.
            for p in e.adding.keys().chain(e.removing.keys()) {
                self.ctx.partitions_being_reassigned.insert((t.clone(), *p));
            }
        }
        let deletions = self.zk.children_watch(DELETE_TOPICS_PATH)?;
        self.zk.children_watch(ISR_CHANGE_PATH)?;
        // Pending log dir events are moot: every replica gets LeaderAndIsr
        // below, and the answers tell which directories are offline.
        for c in self.zk.children(LOG_DIR_EVENT_NOTIFICATION_PATH)? {
            let _ = self.zk.delete(
                &format!("{LOG_DIR_EVENT_NOTIFICATION_PATH}/{c}"),
                ANY_VERSION,
            );
        }
        self.zk.children_watch(LOG_DIR_EVENT_NOTIFICATION_PATH)?;
        self.zk.exists_watch(PREFERRED_ELECTION_PATH)?;
        let mut channels = ControllerChannelManager::new(
            self.broker_id,
            self.config.controller_socket_timeout_ms.max(1) as u64,
            self.inter_broker.clone(),
        );
        for b in self.ctx.live_brokers.values() {
            let (host, port) = self.inter_broker_address(b);
            channels.add_broker(b.id, &host, port);
        }
        self.channels = Some(channels);
        self.active.store(true, Ordering::Release);
        log::info!(
            "controller context loaded: {} live brokers {:?}, {} topics, {} partitions",
            self.ctx.live_brokers.len(),
            self.ctx.live_brokers.keys().collect::<Vec<_>>(),
            self.ctx.topics.len(),
            self.ctx.states.len()
        );
        // Partitions with no state yet (topic written by an admin, controller
        // died before electing) or with an offline leader.
        let created = self.initialize_new_partitions(None)?;
        // Replicas on brokers that are not live go offline: new leaders where
        // they led, out of every ISR (replicaStateMachine.startup).
        let dead: BTreeSet<i32> = self
            .ctx
            .topics
            .values()
            .flat_map(|e| e.assignment.values().flatten().copied())
            .filter(|b| !self.ctx.is_live(*b))
            .collect();
        if !dead.is_empty() {
            self.on_broker_failure(&dead.into_iter().collect::<Vec<_>>())?;
        }
        let elected = self.elect_offline_partitions()?;
        let mut batch = self.batch();
        for (t, e) in &self.ctx.topics {
            for p in e.assignment.keys() {
                let is_new = created.contains(&(t.clone(), *p));
                batch.add_partition(t, *p, is_new);
            }
        }
        batch.add_all_partitions_to_update_metadata();
        batch.mark_brokers_changed();
        drop(elected);
        self.send(batch);
        self.ctx.topics_to_delete = deletions.into_iter().collect();
        self.initialize_partition_reassignments()?;
        self.resume_topic_deletions()
    }

    fn inter_broker_address(
        &self,
        b: &crate::metadata::image::BrokerRegistration,
    ) -> (String, u16) {
        let ep = b
            .endpoint(&self.config.inter_broker_listener_name)
            .unwrap_or(&b.endpoints[0]);
        (ep.host.clone(), ep.port)
    }

    /// Creates state znodes for partitions that have none (all topics, or
    /// the given ones). Returns the partitions initialized.
    fn initialize_new_partitions(
        &mut self,
        only: Option<&[(String, i32)]>,
    ) -> StoreResult<BTreeSet<(String, i32)>> {
        let candidates: Vec<(String, i32)> = match only {
            Some(list) => list.to_vec(),
            None => self
                .ctx
                .topics
                .iter()
                .flat_map(|(t, e)| e.assignment.keys().map(move |p| (t.clone(), *p)))
                .collect(),
        };
        let mut created = BTreeSet::new();
        for (t, p) in candidates {
            if self.ctx.states.contains_key(&(t.clone(), p))
                || self.ctx.topics_to_delete.contains(&t)
            {
                continue;
            }
            let replicas = self.ctx.replicas(&t, p).to_vec();
            let ctx = &self.ctx;
            let Some(state) = elections::initial_leader_and_isr(
                &replicas,
                &|b| ctx.is_replica_online(b, &t, p),
                self.epoch,
            ) else {
                log::warn!(
                    "partition {t}-{p}: no live replica among {replicas:?}; it stays offline"
                );
                continue;
            };
            let partitions_path = format!("{TOPICS_PATH}/{t}/partitions");
            let mut ops = vec![Op::Check {
                path: super::CONTROLLER_EPOCH_PATH.into(),
                expected_version: self.epoch_zk_version,
            }];
            if self.zk.exists(&partitions_path).is_none() {
                ops.push(create(partitions_path.clone(), Vec::new()));
            }
            if self.zk.exists(&format!("{partitions_path}/{p}")).is_none() {
                ops.push(create(format!("{partitions_path}/{p}"), Vec::new()));
            }
            ops.push(create(
                topics::partition_state_path(&t, p),
                context::state_json(&state),
            ));
            match self.zk.multi(&ops) {
                Ok(_) => {
                    self.ctx.states.insert((t.clone(), p), state);
                    created.insert((t, p));
                }
                Err(StoreError::NodeExists(_)) => {
                    if let Some(s) = read_state(&self.zk, &t, p)? {
                        self.ctx.states.insert((t, p), s);
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Ok(created)
    }

    /// Elects leaders for partitions whose leader is not live.
    pub(super) fn elect_offline_partitions(&mut self) -> StoreResult<Vec<(String, i32)>> {
        let mut updates: States = BTreeMap::new();
        for ((t, p), s) in &self.ctx.states {
            if self.ctx.is_replica_online(s.leader, t, *p) || self.ctx.topics_to_delete.contains(t)
            {
                continue;
            }
            let replicas = self.ctx.replicas(t, *p);
            let unclean = self.ctx.unclean_allowed(t, self.unclean_default());
            let ctx = &self.ctx;
            let online = |b: i32| ctx.is_replica_online(b, t, *p);
            if let Some(next) = elections::elect_offline(s, replicas, &online, unclean, self.epoch)
            {
                if next.leader != s.leader {
                    updates.insert((t.clone(), *p), next);
                }
            }
        }
        let changed: Vec<(String, i32)> = updates.keys().cloned().collect();
        self.write_states(&updates)?;
        Ok(changed)
    }

    /// processBrokerChange: new, dead and bounced brokers.
    pub(super) fn on_broker_change(&mut self) -> StoreResult<()> {
        let ids = self.zk.children_watch(BROKER_IDS_PATH)?;
        let current = read_brokers(&self.zk, &ids)?;
        let mut dead: Vec<i32> = Vec::new();
        let mut started: Vec<i32> = Vec::new();
        for (id, old) in &self.ctx.live_brokers {
            match current.get(id) {
                None => dead.push(*id),
                Some(now) if now.registered_at_ms != old.registered_at_ms => {
                    dead.push(*id);
                    started.push(*id);
                }
                Some(_) => {}
            }
        }
        for id in current.keys() {
            if !self.ctx.live_brokers.contains_key(id) {
                started.push(*id);
            }
        }
        if dead.is_empty() && started.is_empty() {
            return Ok(());
        }
        log::info!("broker change: started {started:?}, gone {dead:?}");
        for id in &dead {
            self.ctx.live_brokers.remove(id);
            self.ctx.shutting_down.remove(id);
            if let Some(ch) = self.channels.as_mut() {
                ch.remove_broker(*id);
            }
        }
        if !dead.is_empty() {
            self.on_broker_failure(&dead)?;
        }
        for id in &started {
            if let Some(reg) = current.get(id) {
                self.ctx.live_brokers.insert(*id, reg.clone());
                let (host, port) = self.inter_broker_address(reg);
                if let Some(ch) = self.channels.as_mut() {
                    ch.add_broker(*id, &host, port);
                }
            }
        }
        if !started.is_empty() {
            self.on_broker_startup(&started)?;
        }
        Ok(())
    }

    /// onBrokerFailure: new leaders for partitions the dead brokers led,
    /// the dead brokers out of every ISR.
    fn on_broker_failure(&mut self, dead: &[i32]) -> StoreResult<()> {
        for d in dead {
            self.ctx.replicas_on_offline_dirs.remove(d);
        }
        self.on_replicas_become_offline(&|b, _, _| dead.contains(&b), true)
    }

    /// onReplicasBecomeOffline: for every partition with a replica `gone`
    /// picks (already not online in the context), a new leader where one
    /// of them led, and those replicas out of the ISR, in one new epoch.
    pub(super) fn on_replicas_become_offline(
        &mut self,
        gone: &dyn Fn(i32, &str, i32) -> bool,
        brokers_changed: bool,
    ) -> StoreResult<()> {
        let mut updates: States = BTreeMap::new();
        for ((t, p), s) in &self.ctx.states {
            let replicas = self.ctx.replicas(t, *p);
            let lost: Vec<i32> = replicas
                .iter()
                .copied()
                .filter(|b| gone(*b, t, *p))
                .collect();
            if lost.is_empty() {
                continue;
            }
            let ctx = &self.ctx;
            let online = |b: i32| ctx.is_replica_online(b, t, *p);
            let mut next = s.clone();
            let mut changed = false;
            if lost.contains(&s.leader) {
                let unclean = self.ctx.unclean_allowed(t, self.unclean_default());
                if let Some(n) = elections::elect_offline(s, replicas, &online, unclean, self.epoch)
                {
                    next = n;
                    changed = true;
                }
            }
            for &d in &lost {
                if let Some(n) = elections::remove_from_isr(&next, d, self.epoch) {
                    // One epoch bump per controller step.
                    next = LeaderAndIsr {
                        leader_epoch: s.leader_epoch + 1,
                        ..n
                    };
                    changed = true;
                }
            }
            if changed {
                updates.insert((t.clone(), *p), next);
            }
        }
        self.write_states_and_send(&updates, brokers_changed)?;
        Ok(())
    }

    /// onBrokerStartup: full metadata to everyone, the new brokers' replicas
    /// by LeaderAndIsr, leaders for partitions that can now have one.
    fn on_broker_startup(&mut self, started: &[i32]) -> StoreResult<()> {
        // A restarted broker reports its log directories afresh.
        for b in started {
            self.ctx.replicas_on_offline_dirs.remove(b);
        }
        let created = self.initialize_new_partitions(None)?;
        let elected = self.elect_offline_partitions()?;
        let mut batch = self.batch();
        for &b in started {
            for (t, p) in self.ctx.partitions_on_broker(b) {
                batch.add_leader_and_isr(&[b], &t, p, created.contains(&(t.clone(), p)));
            }
        }
        for (t, p) in elected.iter().chain(created.iter()) {
            batch.add_partition(t, *p, created.contains(&(t.clone(), *p)));
        }
        batch.add_all_partitions_to_update_metadata();
        batch.mark_brokers_changed();
        self.send(batch);
        // Reassignments waiting for a target broker go on.
        let started_set: BTreeSet<i32> = started.iter().copied().collect();
        self.maybe_resume_reassignments(&|_, a| {
            a.target_replicas().iter().any(|b| started_set.contains(b))
        })?;
        self.resume_topic_deletions()
    }

    /// New topics under `/brokers/topics`; topics gone from there are dropped.
    pub(super) fn on_topic_change(&mut self) -> StoreResult<()> {
        let names: BTreeSet<String> = self.zk.children_watch(TOPICS_PATH)?.into_iter().collect();
        self.ctx.topics.retain(|t, _| names.contains(t));
        self.ctx.states.retain(|(t, _), _| names.contains(t));
        self.ctx
            .partitions_being_reassigned
            .retain(|(t, _)| names.contains(t));
        let mut new_partitions = Vec::new();
        for name in names {
            if self.ctx.topics.contains_key(&name) {
                continue;
            }
            if let Some(entry) = read_topic(&self.zk, &name)? {
                for p in entry.assignment.keys() {
                    new_partitions.push((name.clone(), *p));
                }
                log::info!(
                    "new topic {name} with {} partitions",
                    entry.assignment.len()
                );
                self.ctx.topics.insert(name, entry);
            }
        }
        self.on_new_partitions(&new_partitions)
    }

    fn on_new_partitions(&mut self, parts: &[(String, i32)]) -> StoreResult<()> {
        if parts.is_empty() {
            return Ok(());
        }
        let created = self.initialize_new_partitions(Some(parts))?;
        let mut batch = self.batch();
        for (t, p) in &created {
            batch.add_partition(t, *p, true);
        }
        self.send(batch);
        Ok(())
    }

    /// A topic's assignment changed: partitions were added.
    pub(super) fn on_partition_modification(&mut self, topic: &str) -> StoreResult<()> {
        let Some(entry) = read_topic(&self.zk, topic)? else {
            return Ok(());
        };
        let known: BTreeSet<i32> = self.ctx.partitions_of(topic).into_iter().collect();
        let added: Vec<(String, i32)> = entry
            .assignment
            .keys()
            .filter(|p| !known.contains(p))
            .map(|p| (topic.to_string(), *p))
            .collect();
        // Only new partitions come from the znode: the assignments of
        // known ones are the controller's (its own reassignment writes
        // land here too), as in Kafka's processPartitionModifications.
        match self.ctx.topics.get_mut(topic) {
            Some(known_entry) => {
                for (t, p) in &added {
                    debug_assert_eq!(t, topic);
                    if let Some(r) = entry.assignment.get(p) {
                        known_entry.assignment.insert(*p, r.clone());
                    }
                }
            }
            None => {
                self.ctx.topics.insert(topic.to_string(), entry);
            }
        }
        if !added.is_empty() {
            log::info!(
                "topic {topic}: new partitions {:?}",
                added.iter().map(|x| x.1).collect::<Vec<_>>()
            );
        }
        self.on_new_partitions(&added)
    }

    pub(super) fn on_topic_deletion(&mut self) -> StoreResult<()> {
        let names = self.zk.children_watch(DELETE_TOPICS_PATH)?;
        for n in names {
            if !self.config.delete_topic_enable {
                log::warn!("topic {n} marked for deletion but delete.topic.enable is false");
                let _ = self
                    .zk
                    .delete(&format!("{DELETE_TOPICS_PATH}/{n}"), ANY_VERSION);
                continue;
            }
            self.ctx.topics_to_delete.insert(n);
        }
        self.resume_topic_deletions()
    }

    /// TopicDeletionManager: a topic whose replicas are all live gets
    /// StopReplica(delete) on each of them and leader -2 in UpdateMetadata;
    /// when every replica has answered its znodes are removed. A topic with
    /// an offline replica waits for it to return.
    pub(super) fn resume_topic_deletions(&mut self) -> StoreResult<()> {
        let pending: Vec<String> = self.ctx.topics_to_delete.iter().cloned().collect();
        for topic in pending {
            if self.ctx.deletion_pending_acks.contains_key(&topic) {
                continue;
            }
            let Some(entry) = self.ctx.topics.get(&topic).cloned() else {
                // Not a topic (any more): drop the marker.
                let _ = self
                    .zk
                    .delete(&format!("{DELETE_TOPICS_PATH}/{topic}"), ANY_VERSION);
                self.ctx.topics_to_delete.remove(&topic);
                continue;
            };
            let replicas: BTreeSet<i32> = entry.assignment.values().flatten().copied().collect();
            if let Some(offline) = replicas.iter().find(|b| !self.ctx.is_live(**b)) {
                log::info!("deletion of topic {topic} waits for broker {offline}");
                continue;
            }
            log::info!("deleting topic {topic}");
            let mut batch = self.batch();
            batch.mark_deleting(&topic);
            self.send(batch);
            self.ctx
                .deletion_pending_acks
                .insert(topic.clone(), replicas.clone());
            let Some(channels) = &self.channels else {
                continue;
            };
            for b in replicas {
                let parts: Vec<(i32, i32)> = entry
                    .assignment
                    .iter()
                    .filter(|(_, r)| r.contains(&b))
                    .map(|(p, _)| {
                        let epoch = self
                            .ctx
                            .states
                            .get(&(topic.clone(), *p))
                            .map_or(-2, |s| s.leader_epoch);
                        (*p, epoch)
                    })
                    .collect();
                let events = self.events_tx.clone();
                let t = topic.clone();
                let cb = Box::new(move |body: bytes::Bytes| {
                    let ok = stop_replica_ok(&body);
                    let _ = events.send(ControllerEvent::DeletionAck {
                        topic: t,
                        broker: b,
                        ok,
                    });
                });
                send_stop_replica(
                    channels,
                    self.broker_id,
                    self.epoch,
                    b,
                    &topic,
                    &parts,
                    true,
                    Some(cb),
                );
            }
        }
        Ok(())
    }

    pub(super) fn on_deletion_ack(&mut self, topic: &str, broker: i32, ok: bool) {
        if !ok {
            log::warn!("broker {broker} failed StopReplica for topic {topic}; retrying later");
            self.ctx.deletion_pending_acks.remove(topic);
            return;
        }
        let Some(waiting) = self.ctx.deletion_pending_acks.get_mut(topic) else {
            return;
        };
        waiting.remove(&broker);
        if !waiting.is_empty() {
            return;
        }
        self.ctx.deletion_pending_acks.remove(topic);
        match self.complete_topic_deletion(topic) {
            Ok(()) => log::info!("deleted topic {topic}"),
            Err(e) => self.on_zk_failure(&format!("deleting topic {topic}"), e),
        }
    }

    fn complete_topic_deletion(&mut self, topic: &str) -> StoreResult<()> {
        match topics::delete_topic(&mut self.zk, topic) {
            Ok(()) | Err(StoreError::NoNode(_)) => {}
            Err(e) => return Err(e),
        }
        let _ = self
            .zk
            .delete(&format!("{DELETE_TOPICS_PATH}/{topic}"), ANY_VERSION);
        self.ctx.topics.remove(topic);
        self.ctx.states.retain(|(t, _), _| t != topic);
        self.ctx
            .partitions_being_reassigned
            .retain(|(t, _)| t != topic);
        self.ctx.topics_to_delete.remove(topic);
        Ok(())
    }

    /// `/isr_change_notification/isr_change_<seq>`: leaders changed ISRs;
    /// reread those partitions and spread them.
    pub(super) fn on_isr_change_notification(&mut self) -> StoreResult<()> {
        let children = self.zk.children_watch(ISR_CHANGE_PATH)?;
        let mut batch_parts = Vec::new();
        for c in &children {
            let path = format!("{ISR_CHANGE_PATH}/{c}");
            if let Ok((data, _)) = self.zk.get(&path) {
                batch_parts.extend(parse_partition_list(&data));
            }
            let _ = self.zk.delete(&path, ANY_VERSION);
        }
        for (t, p) in &batch_parts {
            if let Some(s) = read_state(&self.zk, t, *p)? {
                self.ctx.states.insert((t.clone(), *p), s);
            }
        }
        let mut batch = self.batch();
        for (t, p) in &batch_parts {
            batch.add_update_metadata(t, *p);
        }
        self.send(batch);
        for key in &batch_parts {
            self.maybe_complete_reassignment(key)?;
        }
        Ok(())
    }

    /// `/admin/preferred_replica_election` created (kafka-preferred-replica-election).
    pub(super) fn on_preferred_election_node(&mut self) -> StoreResult<()> {
        if self.zk.exists_watch(PREFERRED_ELECTION_PATH)?.is_none() {
            return Ok(());
        }
        let data = match self.zk.get(PREFERRED_ELECTION_PATH) {
            Ok((d, _)) => d,
            Err(StoreError::NoNode(_)) => return Ok(()),
            Err(e) => return Err(e),
        };
        let parts = parse_partition_list(&data);
        let results = self.elect_leaders(&parts, 0)?;
        for r in results.iter().filter(|r| r.error_code != errors::NONE) {
            log::info!(
                "preferred election {}-{}: error {}",
                r.topic,
                r.partition,
                r.error_code
            );
        }
        let _ = self.zk.delete(PREFERRED_ELECTION_PATH, ANY_VERSION);
        self.zk.exists_watch(PREFERRED_ELECTION_PATH)?;
        Ok(())
    }
}

fn create(path: String, data: Vec<u8>) -> Op {
    Op::Create {
        path,
        data,
        ephemeral: false,
        sequential: false,
    }
}

/// `{"version":1,"partitions":[{"topic":"t","partition":0},...]}`.
fn parse_partition_list(data: &[u8]) -> Vec<(String, i32)> {
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(data) else {
        return Vec::new();
    };
    v.get("partitions")
        .and_then(|p| p.as_array())
        .map(|list| {
            list.iter()
                .filter_map(|e| {
                    let t = e.get("topic")?.as_str()?.to_string();
                    let p = i32::try_from(e.get("partition")?.as_i64()?).ok()?;
                    Some((t, p))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// True when a StopReplica response has no top-level or partition error.
fn stop_replica_ok(body: &bytes::Bytes) -> bool {
    use kafka_protocol::protocol::Decodable;
    let mut b = body.clone();
    match crate::protocol::inter_broker::StopReplicaResponse::decode(
        &mut b,
        crate::protocol::inter_broker::STOP_REPLICA_VERSIONS.1,
    ) {
        Ok(r) => {
            r.error_code == errors::NONE
                && r.partition_errors
                    .iter()
                    .all(|p| p.error_code == errors::NONE)
        }
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn parses_partition_lists() {
        let v = super::parse_partition_list(br#"{"version":1,"partitions":[{"topic":"a","partition":1},{"topic":"b","partition":0}]}"#);
        assert_eq!(v, vec![("a".to_string(), 1), ("b".to_string(), 0)]);
        assert!(super::parse_partition_list(b"nope").is_empty());
    }
}
