//! JoinGroup (Kafka's handleJoinGroup and its helpers): new, pending,
//! static and current members, and the MEMBER_ID_REQUIRED first join.

use bytes::Bytes;
use kshard_shards::oneshot;

use super::group::{Group, GroupState, JoinResult, Member, SyncResult};
use super::group_coordinator::{
    GroupCoordinator, JoinParams, TimerEvent, TimerKey, NEW_MEMBER_JOIN_TIMEOUT_MS,
};
use super::OffsetsLog;
use crate::protocol::errors;

impl GroupCoordinator {
    // ---- JoinGroup ----

    pub fn join_group(
        &mut self,
        log: &mut dyn OffsetsLog,
        p: JoinParams,
        now_ms: i64,
    ) -> oneshot::Receiver<JoinResult> {
        let (tx, rx) = oneshot::channel();
        self.do_join(log, p, tx, now_ms);
        self.run_fired(log, now_ms);
        rx
    }

    fn do_join(
        &mut self,
        log: &mut dyn OffsetsLog,
        p: JoinParams,
        tx: oneshot::Sender<JoinResult>,
        now_ms: i64,
    ) {
        if let Some(e) = self.validate_group_status(&p.group_id, false) {
            return tx.send(JoinResult::error(&p.member_id, e));
        }
        if p.session_timeout_ms < self.config.min_session_timeout_ms
            || p.session_timeout_ms > self.config.max_session_timeout_ms
        {
            return tx.send(JoinResult::error(
                &p.member_id,
                errors::INVALID_SESSION_TIMEOUT,
            ));
        }
        let unknown = p.member_id.is_empty();
        let gid = p.group_id.clone();
        if !self.groups.contains_key(&gid) {
            if !unknown {
                return tx.send(JoinResult::error(&p.member_id, errors::UNKNOWN_MEMBER_ID));
            }
            self.groups
                .insert(gid.clone(), Group::new(&gid, GroupState::Empty, now_ms));
        }
        let max = self.config.max_group_size;
        let g = self.groups.get_mut(&gid).expect("group");
        let accept = match g.state {
            GroupState::Empty | GroupState::Dead => true,
            GroupState::PreparingRebalance => {
                g.members
                    .get(&p.member_id)
                    .is_some_and(|m| m.is_awaiting_join())
                    || g.num_awaiting_join < max
            }
            GroupState::CompletingRebalance | GroupState::Stable => {
                g.has(&p.member_id) || g.members.len() < max
            }
        };
        if !accept {
            let member_id = p.member_id.clone();
            self.remove_member_and_update_group(log, &gid, &member_id, now_ms);
            return tx.send(JoinResult::error(
                &member_id,
                errors::GROUP_MAX_SIZE_REACHED,
            ));
        }
        if unknown {
            self.do_new_member_join(log, p, tx, now_ms);
        } else {
            self.do_current_member_join(log, p, tx, now_ms);
        }
        if self
            .groups
            .get(&gid)
            .is_some_and(|g| g.is(GroupState::PreparingRebalance))
        {
            self.maybe_complete_join(log, &gid, now_ms);
        }
    }

    fn do_new_member_join(
        &mut self,
        log: &mut dyn OffsetsLog,
        p: JoinParams,
        tx: oneshot::Sender<JoinResult>,
        now_ms: i64,
    ) {
        let gid = p.group_id.clone();
        let g = self.groups.get_mut(&gid).expect("group");
        if g.is(GroupState::Dead) {
            return tx.send(JoinResult::error("", errors::COORDINATOR_NOT_AVAILABLE));
        }
        if !g.supports_protocols(&p.protocol_type, &p.protocols) {
            return tx.send(JoinResult::error("", errors::INCONSISTENT_GROUP_PROTOCOL));
        }
        let prefix = p.group_instance_id.as_deref().unwrap_or(&p.client_id);
        let new_id = format!("{prefix}-{}", uuid::Uuid::new_v4());
        if let Some(instance) = p.group_instance_id.clone() {
            match g.static_member_id(&instance).map(str::to_string) {
                Some(old) => self.update_static_member_and_rebalance(
                    log, p, &instance, &old, new_id, tx, now_ms,
                ),
                None => self.add_member_and_rebalance(log, p, new_id, tx, now_ms),
            }
        } else if p.require_known_member_id {
            g.pending_members.insert(new_id.clone());
            let event = TimerEvent::Heartbeat {
                group: gid.clone(),
                member: new_id.clone(),
                epoch: 0,
                pending: true,
            };
            let key = TimerKey::Member(gid, new_id.clone());
            self.arm(key, event, now_ms + p.session_timeout_ms as i64);
            tx.send(JoinResult::error(&new_id, errors::MEMBER_ID_REQUIRED));
        } else {
            self.add_member_and_rebalance(log, p, new_id, tx, now_ms);
        }
    }

    fn add_member_and_rebalance(
        &mut self,
        log: &mut dyn OffsetsLog,
        p: JoinParams,
        member_id: String,
        tx: oneshot::Sender<JoinResult>,
        now_ms: i64,
    ) {
        let gid = p.group_id.clone();
        let member = Member {
            member_id: member_id.clone(),
            group_instance_id: p.group_instance_id,
            client_id: p.client_id,
            client_host: p.client_host,
            rebalance_timeout_ms: p.rebalance_timeout_ms,
            session_timeout_ms: p.session_timeout_ms,
            protocol_type: p.protocol_type,
            protocols: p.protocols,
            assignment: Bytes::new(),
            join_waiter: None,
            sync_waiter: None,
            is_new: true,
            heartbeat_satisfied: false,
            heartbeat_epoch: 0,
        };
        let g = self.groups.get_mut(&gid).expect("group");
        if g.is(GroupState::PreparingRebalance) && g.generation_id == 0 {
            g.new_member_added = true;
        }
        g.add(member, Some(tx));
        // New members cannot heartbeat yet; bound how long their join may wait.
        self.schedule_heartbeat(&gid, &member_id, NEW_MEMBER_JOIN_TIMEOUT_MS, now_ms);
        let reason = format!("adding new member {member_id}");
        self.maybe_prepare_rebalance(log, &gid, &reason, now_ms);
    }

    #[allow(clippy::too_many_arguments)]
    fn update_static_member_and_rebalance(
        &mut self,
        log: &mut dyn OffsetsLog,
        p: JoinParams,
        instance: &str,
        old_id: &str,
        new_id: String,
        tx: oneshot::Sender<JoinResult>,
        now_ms: i64,
    ) {
        let gid = p.group_id.clone();
        let g = self.groups.get_mut(&gid).expect("group");
        let previous_leader = g.leader_id.clone().unwrap_or_default();
        // replaceStaticMember: fence the old incarnation's waiting requests.
        let Some(mut member) = g.members.remove(old_id) else {
            return tx.send(JoinResult::error("", errors::UNKNOWN_MEMBER_ID));
        };
        if let Some(old_tx) = member.join_waiter.take() {
            g.num_awaiting_join -= 1;
            old_tx.send(JoinResult::error(old_id, errors::FENCED_INSTANCE_ID));
        }
        if let Some(old_tx) = member.sync_waiter.take() {
            old_tx.send(SyncResult::error(errors::FENCED_INSTANCE_ID));
        }
        let old_protocols = member.protocols.clone();
        let (old_rebalance, old_session) = (member.rebalance_timeout_ms, member.session_timeout_ms);
        member.member_id = new_id.clone();
        g.members.insert(new_id.clone(), member);
        if g.is_leader(old_id) {
            g.leader_id = Some(new_id.clone());
        }
        g.static_members
            .insert(instance.to_string(), new_id.clone());
        if g.pending_sync.remove(old_id) {
            g.pending_sync.insert(new_id.clone());
        }
        self.disarm(&TimerKey::Member(gid.clone(), old_id.to_string()));
        self.schedule_session_heartbeat(&gid, &new_id, now_ms);
        let g = self.groups.get_mut(&gid).expect("group");
        g.update_member(
            &new_id,
            p.protocols,
            p.rebalance_timeout_ms,
            p.session_timeout_ms,
            Some(tx),
        );
        match g.state {
            GroupState::Stable => {
                if g.protocol_name.is_some() && g.protocol_name == g.select_protocol() {
                    let stored = self.store_group(log, &gid, now_ms);
                    let g = self.groups.get_mut(&gid).expect("group");
                    if let Err(e) = stored {
                        // Revert to the old incarnation, as Kafka does.
                        let waiter = g
                            .members
                            .get_mut(&new_id)
                            .and_then(|m| m.join_waiter.take());
                        if waiter.is_some() {
                            g.num_awaiting_join -= 1;
                        }
                        g.update_member(&new_id, old_protocols, old_rebalance, old_session, None);
                        if let Some(mut m) = g.members.remove(&new_id) {
                            m.member_id = old_id.to_string();
                            g.members.insert(old_id.to_string(), m);
                        }
                        if g.is_leader(&new_id) {
                            g.leader_id = Some(old_id.to_string());
                        }
                        g.static_members
                            .insert(instance.to_string(), old_id.to_string());
                        if let Some(w) = waiter {
                            w.send(JoinResult::error(&new_id, e));
                        }
                        return;
                    }
                    let skip = p.supports_skip_assignment && g.is_leader(&new_id);
                    let result = JoinResult {
                        error: errors::NONE,
                        generation_id: g.generation_id,
                        protocol_type: g.protocol_type.clone(),
                        protocol_name: g.protocol_name.clone(),
                        // The old leader id keeps a rejoining leader from
                        // assigning while the group is stable (unless v9 skips it).
                        leader_id: if p.supports_skip_assignment {
                            g.leader_id.clone().unwrap_or_default()
                        } else {
                            previous_leader
                        },
                        skip_assignment: skip,
                        member_id: new_id.clone(),
                        members: if skip {
                            g.current_member_metadata()
                        } else {
                            Vec::new()
                        },
                        stored: stored.ok(),
                    };
                    g.complete_join(&new_id, result);
                } else {
                    let reason = format!("static member {new_id} with instance id {instance} joined with a change of protocol");
                    self.maybe_prepare_rebalance(log, &gid, &reason, now_ms);
                }
            }
            GroupState::CompletingRebalance => {
                let reason = format!(
                    "updating metadata for static member {new_id} with instance id {instance}"
                );
                self.maybe_prepare_rebalance(log, &gid, &reason, now_ms);
            }
            GroupState::PreparingRebalance => {}
            GroupState::Empty | GroupState::Dead => {
                debug_assert!(false, "static member in an {:?} group", g.state);
            }
        }
    }

    fn do_current_member_join(
        &mut self,
        log: &mut dyn OffsetsLog,
        p: JoinParams,
        tx: oneshot::Sender<JoinResult>,
        now_ms: i64,
    ) {
        let gid = p.group_id.clone();
        let member_id = p.member_id.clone();
        let g = self.groups.get_mut(&gid).expect("group");
        if g.is(GroupState::Dead) {
            return tx.send(JoinResult::error(
                &member_id,
                errors::COORDINATOR_NOT_AVAILABLE,
            ));
        }
        if !g.supports_protocols(&p.protocol_type, &p.protocols) {
            return tx.send(JoinResult::error(
                &member_id,
                errors::INCONSISTENT_GROUP_PROTOCOL,
            ));
        }
        if g.is_pending_member(&member_id) {
            // A pending member is never static (it got MEMBER_ID_REQUIRED).
            if p.group_instance_id.is_some() {
                return tx.send(JoinResult::error(&member_id, errors::INVALID_REQUEST));
            }
            return self.add_member_and_rebalance(log, p, member_id, tx, now_ms);
        }
        let instance = p.group_instance_id.as_deref();
        let instance_not_found = instance.is_some_and(|i| g.static_member_id(i).is_none());
        if g.is_static_member_fenced(instance, &member_id) {
            return tx.send(JoinResult::error(&member_id, errors::FENCED_INSTANCE_ID));
        }
        if !g.has(&member_id) || instance_not_found {
            return tx.send(JoinResult::error(&member_id, errors::UNKNOWN_MEMBER_ID));
        }
        let m = &g.members[&member_id];
        let same = m.matches(&p.protocols);
        let reason = format!("member {member_id} joining group during {}", g.state.name());
        let stable_answer = |g: &Group, with_members: bool| JoinResult {
            error: errors::NONE,
            generation_id: g.generation_id,
            protocol_type: g.protocol_type.clone(),
            protocol_name: g.protocol_name.clone(),
            leader_id: g.leader_id.clone().unwrap_or_default(),
            skip_assignment: false,
            member_id: member_id.clone(),
            members: if with_members {
                g.current_member_metadata()
            } else {
                Vec::new()
            },
            stored: None,
        };
        match g.state {
            GroupState::PreparingRebalance => {
                g.update_member(
                    &member_id,
                    p.protocols,
                    p.rebalance_timeout_ms,
                    p.session_timeout_ms,
                    Some(tx),
                );
                self.maybe_prepare_rebalance(log, &gid, &reason, now_ms);
            }
            GroupState::CompletingRebalance if same => {
                // It missed the JoinGroup answer: repeat it.
                let leader = g.is_leader(&member_id);
                tx.send(stable_answer(g, leader));
            }
            GroupState::Stable if same && !g.is_leader(&member_id) => {
                tx.send(stable_answer(g, false));
            }
            GroupState::CompletingRebalance | GroupState::Stable => {
                g.update_member(
                    &member_id,
                    p.protocols,
                    p.rebalance_timeout_ms,
                    p.session_timeout_ms,
                    Some(tx),
                );
                self.maybe_prepare_rebalance(log, &gid, &reason, now_ms);
            }
            GroupState::Empty | GroupState::Dead => {
                tx.send(JoinResult::error(&member_id, errors::UNKNOWN_MEMBER_ID));
            }
        }
    }
}
