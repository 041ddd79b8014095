//! Kafka 3.9's classic GroupCoordinator: JoinGroup, SyncGroup, Heartbeat and
//! LeaveGroup, with its delayed operations kept in the coordinator's own
//! purgatory: DelayedJoin / InitialDelayedJoin (key: group), DelayedHeartbeat
//! for members, pending members and new members (key: member), and the
//! pending-sync timeout (key: group). The timers only record that they
//! fired; the coordinator then runs the expiry logic with the state it owns.
//! Waiting JoinGroup/SyncGroup requests hold a oneshot answered later.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};

use bytes::Bytes;
use kshard_shards::oneshot;
use kshard_shards::timer::purgatory::{DelayedOperation, Purgatory};

use super::group::{Group, GroupState, JoinResult, SyncResult};
use super::OffsetsLog;
use crate::config::BrokerConfig;
use crate::protocol::errors;
use crate::protocol::errors::ErrorCode;

/// Kafka's NewMemberJoinTimeoutMs: a new member's JoinGroup may wait this long.
pub const NEW_MEMBER_JOIN_TIMEOUT_MS: i64 = 5 * 60 * 1000;
/// Kafka's offset.metadata.max.bytes default.
pub const OFFSET_METADATA_MAX_BYTES: usize = 4096;

#[derive(Clone, Debug)]
pub struct CoordinatorConfig {
    pub num_partitions: i32,
    pub initial_rebalance_delay_ms: i64,
    pub min_session_timeout_ms: i32,
    pub max_session_timeout_ms: i32,
    pub max_group_size: usize,
    pub offsets_retention_ms: i64,
}

impl CoordinatorConfig {
    pub fn from_broker(c: &BrokerConfig) -> Self {
        CoordinatorConfig {
            num_partitions: c.offsets_topic_num_partitions.max(1),
            initial_rebalance_delay_ms: c.group_initial_rebalance_delay_ms.max(0) as i64,
            min_session_timeout_ms: c.group_min_session_timeout_ms,
            max_session_timeout_ms: c.group_max_session_timeout_ms,
            max_group_size: c.group_max_size.max(1) as usize,
            offsets_retention_ms: c.offsets_retention_minutes as i64 * 60_000,
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub enum TimerKey {
    Join(String),
    Sync(String),
    Member(String, String),
}

#[derive(Clone, Debug)]
pub enum TimerEvent {
    Join {
        group: String,
        epoch: u64,
    },
    Sync {
        group: String,
        epoch: u64,
    },
    Heartbeat {
        group: String,
        member: String,
        epoch: u64,
        pending: bool,
    },
}

pub struct CoordTimer(TimerEvent);
pub type TimerSink = RefCell<Vec<TimerEvent>>;

impl DelayedOperation<TimerSink> for CoordTimer {
    fn try_complete(&mut self, _sink: &TimerSink) -> bool {
        false
    }
    fn on_expiration(&mut self, sink: &TimerSink) {
        sink.borrow_mut().push(self.0.clone());
    }
}

/// A JoinGroup as the coordinator needs it.
pub struct JoinParams {
    pub group_id: String,
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: i32,
    pub session_timeout_ms: i32,
    pub protocol_type: String,
    pub protocols: Vec<(String, Bytes)>,
    /// v4+: a first join gets MEMBER_ID_REQUIRED.
    pub require_known_member_id: bool,
    /// v9+: a static leader rejoining a stable group may skip assignment.
    pub supports_skip_assignment: bool,
}

/// A `__consumer_offsets` partition this broker leads, so coordinates the
/// groups of (Kafka's ownedPartitions / loadingPartitions).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OffsetsPartition {
    /// The coordinator epoch: the partition's leader epoch when this broker
    /// was elected; appends under an older one are refused.
    pub leader_epoch: i32,
    /// Its records are being replayed: its groups answer
    /// COORDINATOR_LOAD_IN_PROGRESS.
    pub loading: bool,
    /// Tells this load from a later one of the same partition.
    pub load_id: u64,
}

pub struct GroupCoordinator {
    pub config: CoordinatorConfig,
    pub groups: HashMap<String, Group>,
    timers: Purgatory<TimerKey, CoordTimer, TimerSink>,
    fired: TimerSink,
    /// The `__consumer_offsets` partitions this broker coordinates or is
    /// loading; the groups of any other partition get NOT_COORDINATOR.
    pub partitions: HashMap<i32, OffsetsPartition>,
    pub(super) next_load_id: u64,
    /// Groups with pending transactional offsets, per producer id (Kafka's
    /// openGroupsForProducer), so a marker finds them without a scan.
    pub(super) open_groups_for_producer: HashMap<i64, HashSet<String>>,
    /// The timer clock minus the wall clock. Callers pass wall-clock `now`s
    /// (stored in records); timers run on the runtime's monotonic clock, so
    /// a step of the wall clock neither fires them all nor parks them.
    timer_clock_skew_ms: i64,
}

/// Kafka's isValidGroupId: empty ids are allowed only for offset and admin APIs.
pub fn invalid_group_id(group_id: &str, allow_empty: bool) -> bool {
    !allow_empty && group_id.is_empty()
}

impl GroupCoordinator {
    /// `timer_now_ms`: now on the timer clock (`set_clock_skew`).
    pub fn new(config: CoordinatorConfig, timer_now_ms: i64) -> Self {
        GroupCoordinator {
            config,
            groups: HashMap::new(),
            timers: Purgatory::new("group", 1, 512, timer_now_ms.max(0) as u64),
            fired: RefCell::new(Vec::new()),
            partitions: HashMap::new(),
            next_load_id: 0,
            open_groups_for_producer: HashMap::new(),
            timer_clock_skew_ms: 0,
        }
    }

    /// Kafka's validateGroupStatus: the group's partition must be led here
    /// and loaded.
    pub fn validate_group_status(&self, group_id: &str, allow_empty: bool) -> Option<ErrorCode> {
        if invalid_group_id(group_id, allow_empty) {
            return Some(errors::INVALID_GROUP_ID);
        }
        match self.partitions.get(&self.partition_of(group_id)) {
            None => Some(errors::NOT_COORDINATOR),
            Some(p) if p.loading => Some(errors::COORDINATOR_LOAD_IN_PROGRESS),
            Some(_) => None,
        }
    }

    /// Whether any partition is still loading (ListGroups waits for all).
    pub fn is_loading(&self) -> bool {
        self.partitions.values().any(|p| p.loading)
    }

    /// Whether the groups of `partition` are loaded here.
    pub fn is_owned(&self, partition: i32) -> bool {
        self.partitions.get(&partition).is_some_and(|p| !p.loading)
    }

    // ---- timers ----

    /// Sets the timer clock minus the wall clock, read by the caller just
    /// before it passes a wall-clock `now`.
    pub fn set_clock_skew(&mut self, timer_clock_skew_ms: i64) {
        self.timer_clock_skew_ms = timer_clock_skew_ms;
    }

    fn timer_ms(&self, wall_ms: i64) -> u64 {
        (wall_ms + self.timer_clock_skew_ms).max(0) as u64
    }

    /// `deadline_ms` on the wall clock, as every `now` passed in.
    pub(super) fn arm(&mut self, key: TimerKey, event: TimerEvent, deadline_ms: i64) {
        drop(self.timers.cancel_for_key(&key));
        let deadline = self.timer_ms(deadline_ms);
        self.timers
            .try_complete_else_watch(&self.fired, CoordTimer(event), deadline, &[key]);
    }

    pub(super) fn disarm(&mut self, key: &TimerKey) {
        drop(self.timers.cancel_for_key(key));
    }

    /// The next timer's deadline on the timer clock.
    pub fn next_timer_ms(&self) -> Option<u64> {
        self.timers.next_expiration_ms()
    }

    /// Expires due timers and runs their effects.
    pub fn tick(&mut self, log: &mut dyn OffsetsLog, now_ms: i64) {
        self.run_fired(log, now_ms);
    }

    /// Runs timers due by `now_ms` (e.g. a zero initial rebalance delay
    /// completes the join within the request that started it).
    pub(super) fn run_fired(&mut self, log: &mut dyn OffsetsLog, now_ms: i64) {
        loop {
            let timer_now = self.timer_ms(now_ms);
            self.timers.advance_clock(&self.fired, timer_now);
            let events = std::mem::take(&mut *self.fired.borrow_mut());
            if events.is_empty() {
                return;
            }
            for ev in events {
                self.on_timer(log, ev, now_ms);
            }
        }
    }

    fn on_timer(&mut self, log: &mut dyn OffsetsLog, ev: TimerEvent, now_ms: i64) {
        match ev {
            TimerEvent::Join { group, epoch } => self.on_join_timer(log, &group, epoch, now_ms),
            TimerEvent::Sync { group, epoch } => self.on_sync_timer(log, &group, epoch, now_ms),
            TimerEvent::Heartbeat {
                group,
                member,
                epoch,
                pending,
            } => self.on_heartbeat_timer(log, &group, &member, epoch, pending, now_ms),
        }
    }

    /// Kafka's completeAndScheduleNextExpiration: the current heartbeat
    /// expectation is met and a new one starts.
    pub(super) fn schedule_heartbeat(
        &mut self,
        gid: &str,
        member_id: &str,
        timeout_ms: i64,
        now_ms: i64,
    ) {
        let Some(m) = self
            .groups
            .get_mut(gid)
            .and_then(|g| g.members.get_mut(member_id))
        else {
            return;
        };
        m.heartbeat_satisfied = false;
        m.heartbeat_epoch += 1;
        let event = TimerEvent::Heartbeat {
            group: gid.to_string(),
            member: member_id.to_string(),
            epoch: m.heartbeat_epoch,
            pending: false,
        };
        let key = TimerKey::Member(gid.to_string(), member_id.to_string());
        self.arm(key, event, now_ms + timeout_ms);
    }

    pub(super) fn schedule_session_heartbeat(&mut self, gid: &str, member_id: &str, now_ms: i64) {
        let timeout = self
            .groups
            .get(gid)
            .and_then(|g| g.members.get(member_id))
            .map(|m| m.session_timeout_ms as i64);
        if let Some(t) = timeout {
            self.schedule_heartbeat(gid, member_id, t, now_ms);
        }
    }

    fn on_heartbeat_timer(
        &mut self,
        log: &mut dyn OffsetsLog,
        gid: &str,
        member_id: &str,
        epoch: u64,
        pending: bool,
        now_ms: i64,
    ) {
        let Some(g) = self.groups.get_mut(gid) else {
            return;
        };
        if g.is(GroupState::Dead) {
            return;
        }
        if pending {
            if g.pending_members.remove(member_id) {
                log::info!(
                    "pending member {member_id} in group {gid} removed after session timeout"
                );
                self.maybe_complete_join(log, gid, now_ms);
            }
            return;
        }
        let expired = g
            .members
            .get(member_id)
            .is_some_and(|m| m.heartbeat_epoch == epoch && !m.has_satisfied_heartbeat());
        if expired {
            log::info!("member {member_id} in group {gid} has failed, removing it from the group");
            self.remove_member_and_update_group(log, gid, member_id, now_ms);
        }
    }

    // ---- rebalance ----

    pub(super) fn maybe_prepare_rebalance(
        &mut self,
        log: &mut dyn OffsetsLog,
        gid: &str,
        reason: &str,
        now_ms: i64,
    ) {
        if self.groups.get(gid).is_some_and(|g| g.can_rebalance()) {
            self.prepare_rebalance(log, gid, reason, now_ms);
        }
    }

    fn prepare_rebalance(
        &mut self,
        log: &mut dyn OffsetsLog,
        gid: &str,
        reason: &str,
        now_ms: i64,
    ) {
        if self.groups[gid].is(GroupState::CompletingRebalance) {
            self.reset_and_propagate_assignment_error(gid, errors::REBALANCE_IN_PROGRESS, now_ms);
        }
        self.disarm(&TimerKey::Sync(gid.to_string()));
        let delay_ms = self.config.initial_rebalance_delay_ms;
        let g = self.groups.get_mut(gid).expect("group");
        g.sync_epoch += 1;
        let initial = g.is(GroupState::Empty);
        let rebalance_timeout_ms = g.rebalance_timeout_ms() as i64;
        log::info!(
            "preparing to rebalance group {gid} in state {} with old generation {} ({reason})",
            g.state.name(),
            g.generation_id
        );
        g.transition_to(GroupState::PreparingRebalance, now_ms);
        g.join_epoch += 1;
        let epoch = g.join_epoch;
        let deadline = if initial {
            g.initial_join_remaining_ms = Some((rebalance_timeout_ms - delay_ms).max(0));
            now_ms + delay_ms
        } else {
            g.initial_join_remaining_ms = None;
            now_ms + rebalance_timeout_ms
        };
        let event = TimerEvent::Join {
            group: gid.to_string(),
            epoch,
        };
        self.arm(TimerKey::Join(gid.to_string()), event, deadline);
        if !initial {
            self.maybe_complete_join(log, gid, now_ms);
        }
    }

    /// DelayedJoin.tryComplete: every member has rejoined.
    pub(super) fn maybe_complete_join(&mut self, log: &mut dyn OffsetsLog, gid: &str, now_ms: i64) {
        let ready = self.groups.get(gid).is_some_and(|g| {
            g.is(GroupState::PreparingRebalance)
                && g.initial_join_remaining_ms.is_none()
                && g.has_all_members_joined()
        });
        if ready {
            self.on_complete_join(log, gid, now_ms);
        }
    }

    fn on_join_timer(&mut self, log: &mut dyn OffsetsLog, gid: &str, epoch: u64, now_ms: i64) {
        let delay_ms = self.config.initial_rebalance_delay_ms;
        let Some(g) = self.groups.get_mut(gid) else {
            return;
        };
        if g.join_epoch != epoch || !g.is(GroupState::PreparingRebalance) {
            return;
        }
        if let Some(remaining) = g.initial_join_remaining_ms {
            // InitialDelayedJoin: a member joined during the delay, wait again.
            if g.new_member_added && remaining != 0 {
                g.new_member_added = false;
                let delay = delay_ms.min(remaining);
                g.initial_join_remaining_ms = Some((remaining - delay).max(0));
                g.join_epoch += 1;
                let event = TimerEvent::Join {
                    group: gid.to_string(),
                    epoch: g.join_epoch,
                };
                self.arm(TimerKey::Join(gid.to_string()), event, now_ms + delay);
                return;
            }
        }
        self.on_complete_join(log, gid, now_ms);
    }

    fn on_complete_join(&mut self, log: &mut dyn OffsetsLog, gid: &str, now_ms: i64) {
        self.disarm(&TimerKey::Join(gid.to_string()));
        let g = self.groups.get_mut(gid).expect("group");
        g.join_epoch += 1;
        g.initial_join_remaining_ms = None;
        let gone: Vec<String> = g
            .members
            .values()
            .filter(|m| !m.is_awaiting_join() && m.group_instance_id.is_none())
            .map(|m| m.member_id.clone())
            .collect();
        if !gone.is_empty() {
            log::info!("group {gid} removed dynamic members who haven't joined: {gone:?}");
        }
        for id in &gone {
            g.remove(id);
        }
        for id in &gone {
            self.disarm(&TimerKey::Member(gid.to_string(), id.clone()));
        }
        let g = self.groups.get_mut(gid).expect("group");
        if g.is(GroupState::Dead) {
            return;
        }
        if !g.maybe_elect_new_joined_leader() && !g.members.is_empty() {
            // Nobody rejoined: wait again until session timeouts remove them.
            log::error!("group {gid} could not complete rebalance because no members rejoined");
            g.join_epoch += 1;
            let event = TimerEvent::Join {
                group: gid.to_string(),
                epoch: g.join_epoch,
            };
            let deadline = now_ms + g.rebalance_timeout_ms() as i64;
            self.arm(TimerKey::Join(gid.to_string()), event, deadline);
            return;
        }
        g.init_next_generation(now_ms);
        if g.is(GroupState::Empty) {
            log::info!(
                "group {gid} with generation {} is now empty",
                g.generation_id
            );
            if let Err(e) = self.store_group(log, gid, now_ms) {
                log::warn!("failed to write empty metadata for group {gid}: error {e}");
            }
            return;
        }
        log::info!(
            "stabilized group {gid} generation {} ({}) with {} members",
            g.generation_id,
            g.protocol_name.as_deref().unwrap_or(""),
            g.members.len()
        );
        let leader = g.leader_id.clone().unwrap_or_default();
        let all = g.current_member_metadata();
        let ids: Vec<String> = g.members.keys().cloned().collect();
        for id in &ids {
            let result = JoinResult {
                error: errors::NONE,
                generation_id: g.generation_id,
                protocol_type: g.protocol_type.clone(),
                protocol_name: g.protocol_name.clone(),
                leader_id: leader.clone(),
                skip_assignment: false,
                member_id: id.clone(),
                members: if *id == leader {
                    all.clone()
                } else {
                    Vec::new()
                },
                stored: None,
            };
            g.complete_join(id, result);
        }
        for id in &ids {
            self.schedule_session_heartbeat(gid, id, now_ms);
            if let Some(m) = self.groups.get_mut(gid).and_then(|g| g.members.get_mut(id)) {
                m.is_new = false;
            }
        }
        // schedulePendingSync: members must SyncGroup within the rebalance timeout.
        let g = self.groups.get_mut(gid).expect("group");
        g.sync_epoch += 1;
        let event = TimerEvent::Sync {
            group: gid.to_string(),
            epoch: g.sync_epoch,
        };
        let deadline = now_ms + g.rebalance_timeout_ms() as i64;
        self.arm(TimerKey::Sync(gid.to_string()), event, deadline);
    }

    fn on_sync_timer(&mut self, log: &mut dyn OffsetsLog, gid: &str, epoch: u64, now_ms: i64) {
        let Some(g) = self.groups.get_mut(gid) else {
            return;
        };
        if g.sync_epoch != epoch
            || !(g.is(GroupState::CompletingRebalance) || g.is(GroupState::Stable))
            || g.pending_sync.is_empty()
        {
            return;
        }
        let missing: Vec<String> = g.pending_sync.iter().cloned().collect();
        log::info!("group {gid} removed members who haven't sent their sync requests: {missing:?}");
        for id in &missing {
            if let Some(mut m) = g.remove(id) {
                if let Some(tx) = m.join_waiter.take() {
                    tx.send(JoinResult::error("", errors::UNKNOWN_MEMBER_ID));
                }
            }
        }
        for id in &missing {
            self.disarm(&TimerKey::Member(gid.to_string(), id.clone()));
        }
        self.prepare_rebalance(
            log,
            gid,
            "removing members on pending sync request expiration",
            now_ms,
        );
    }

    fn reset_and_propagate_assignment_error(&mut self, gid: &str, error: ErrorCode, now_ms: i64) {
        let g = self.groups.get_mut(gid).expect("group");
        debug_assert!(g.is(GroupState::CompletingRebalance));
        for m in g.members.values_mut() {
            m.assignment = Bytes::new();
        }
        self.propagate_assignment(gid, error, now_ms);
    }

    pub(super) fn propagate_assignment(&mut self, gid: &str, error: ErrorCode, now_ms: i64) {
        let g = self.groups.get_mut(gid).expect("group");
        let (pt, pn) = if error == errors::NONE {
            (g.protocol_type.clone(), g.protocol_name.clone())
        } else {
            (None, None)
        };
        let stored = g.last_stored.filter(|_| error == errors::NONE);
        let mut answered = Vec::new();
        for m in g.members.values_mut() {
            if let Some(tx) = m.sync_waiter.take() {
                tx.send(SyncResult {
                    error,
                    protocol_type: pt.clone(),
                    protocol_name: pn.clone(),
                    assignment: m.assignment.clone(),
                    stored,
                });
                answered.push(m.member_id.clone());
            }
        }
        for id in answered {
            self.schedule_session_heartbeat(gid, &id, now_ms);
        }
    }

    /// Kafka's removeMemberAndUpdateGroup (plus removeHeartbeatForLeavingMember).
    pub(super) fn remove_member_and_update_group(
        &mut self,
        log: &mut dyn OffsetsLog,
        gid: &str,
        member_id: &str,
        now_ms: i64,
    ) {
        let Some(g) = self.groups.get_mut(gid) else {
            return;
        };
        g.complete_join(member_id, JoinResult::error("", errors::UNKNOWN_MEMBER_ID));
        if let Some(mut m) = g.remove(member_id) {
            if let Some(tx) = m.sync_waiter.take() {
                tx.send(SyncResult::error(errors::UNKNOWN_MEMBER_ID));
            }
        }
        let state = g.state;
        self.disarm(&TimerKey::Member(gid.to_string(), member_id.to_string()));
        match state {
            GroupState::Dead | GroupState::Empty => {}
            GroupState::Stable | GroupState::CompletingRebalance => {
                let reason = format!("removing member {member_id}");
                self.maybe_prepare_rebalance(log, gid, &reason, now_ms)
            }
            GroupState::PreparingRebalance => self.maybe_complete_join(log, gid, now_ms),
        }
    }

    // ---- SyncGroup ----

    #[allow(clippy::too_many_arguments)]
    pub fn sync_group(
        &mut self,
        log: &mut dyn OffsetsLog,
        gid: &str,
        generation_id: i32,
        member_id: &str,
        instance_id: Option<&str>,
        protocol_type: Option<&str>,
        protocol_name: Option<&str>,
        assignments: Vec<(String, Bytes)>,
        now_ms: i64,
    ) -> oneshot::Receiver<SyncResult> {
        let (tx, rx) = oneshot::channel();
        match self.validate_group_status(gid, false) {
            // The rebalance state was lost: rejoin (older clients do not
            // expect COORDINATOR_LOAD_IN_PROGRESS here).
            Some(errors::COORDINATOR_LOAD_IN_PROGRESS) => {
                tx.send(SyncResult::error(errors::REBALANCE_IN_PROGRESS));
                return rx;
            }
            Some(e) => {
                tx.send(SyncResult::error(e));
                return rx;
            }
            None => {}
        }
        let Some(g) = self.groups.get_mut(gid) else {
            tx.send(SyncResult::error(errors::UNKNOWN_MEMBER_ID));
            return rx;
        };
        let error = if g.is(GroupState::Dead) {
            errors::COORDINATOR_NOT_AVAILABLE
        } else {
            match g.validate_current_member(member_id, instance_id) {
                errors::NONE if generation_id != g.generation_id => errors::ILLEGAL_GENERATION,
                errors::NONE
                    if protocol_type.is_some() && g.protocol_type.as_deref() != protocol_type =>
                {
                    errors::INCONSISTENT_GROUP_PROTOCOL
                }
                errors::NONE
                    if protocol_name.is_some() && g.protocol_name.as_deref() != protocol_name =>
                {
                    errors::INCONSISTENT_GROUP_PROTOCOL
                }
                e => e,
            }
        };
        if error != errors::NONE {
            tx.send(SyncResult::error(error));
            return rx;
        }
        match g.state {
            GroupState::Empty => tx.send(SyncResult::error(errors::UNKNOWN_MEMBER_ID)),
            GroupState::PreparingRebalance => {
                tx.send(SyncResult::error(errors::REBALANCE_IN_PROGRESS))
            }
            GroupState::Dead => tx.send(SyncResult::error(errors::COORDINATOR_NOT_AVAILABLE)),
            GroupState::CompletingRebalance => {
                g.members.get_mut(member_id).expect("validated").sync_waiter = Some(tx);
                self.remove_pending_sync_member(gid, member_id);
                let g = self.groups.get_mut(gid).expect("group");
                if g.is_leader(member_id) {
                    log::info!(
                        "assignment received from leader {member_id} for group {gid} for generation {}",
                        g.generation_id
                    );
                    let mut given: HashMap<String, Bytes> = assignments.into_iter().collect();
                    for m in g.members.values_mut() {
                        m.assignment = given.remove(&m.member_id).unwrap_or_default();
                    }
                    if let Err(e) = self.store_group(log, gid, now_ms) {
                        self.reset_and_propagate_assignment_error(gid, e, now_ms);
                        self.maybe_prepare_rebalance(
                            log,
                            gid,
                            "error when storing group assignment during SyncGroup",
                            now_ms,
                        );
                    } else {
                        self.groups
                            .get_mut(gid)
                            .expect("group")
                            .transition_to(GroupState::Stable, now_ms);
                        self.propagate_assignment(gid, errors::NONE, now_ms);
                    }
                }
            }
            GroupState::Stable => {
                self.remove_pending_sync_member(gid, member_id);
                let g = &self.groups[gid];
                tx.send(SyncResult {
                    error: errors::NONE,
                    protocol_type: g.protocol_type.clone(),
                    protocol_name: g.protocol_name.clone(),
                    assignment: g.members[member_id].assignment.clone(),
                    stored: g.last_stored,
                });
                self.schedule_session_heartbeat(gid, member_id, now_ms);
            }
        }
        self.run_fired(log, now_ms);
        rx
    }

    fn remove_pending_sync_member(&mut self, gid: &str, member_id: &str) {
        let g = self.groups.get_mut(gid).expect("group");
        g.pending_sync.remove(member_id);
        if g.pending_sync.is_empty() {
            g.sync_epoch += 1;
            self.disarm(&TimerKey::Sync(gid.to_string()));
        }
    }

    // ---- Heartbeat ----

    pub fn heartbeat(
        &mut self,
        log: &mut dyn OffsetsLog,
        gid: &str,
        generation_id: i32,
        member_id: &str,
        instance_id: Option<&str>,
        now_ms: i64,
    ) -> ErrorCode {
        match self.validate_group_status(gid, false) {
            // Still loading: answer blindly, as Kafka does.
            Some(errors::COORDINATOR_LOAD_IN_PROGRESS) => return errors::NONE,
            Some(e) => return e,
            None => {}
        }
        let Some(g) = self.groups.get(gid) else {
            return errors::UNKNOWN_MEMBER_ID;
        };
        let error = if g.is(GroupState::Dead) {
            errors::COORDINATOR_NOT_AVAILABLE
        } else if g.is_static_member_fenced(instance_id, member_id) {
            errors::FENCED_INSTANCE_ID
        } else if !g.has(member_id) {
            errors::UNKNOWN_MEMBER_ID
        } else if generation_id != g.generation_id {
            errors::ILLEGAL_GENERATION
        } else {
            match g.state {
                GroupState::Empty => errors::UNKNOWN_MEMBER_ID,
                GroupState::CompletingRebalance | GroupState::Stable => {
                    self.schedule_session_heartbeat(gid, member_id, now_ms);
                    errors::NONE
                }
                GroupState::PreparingRebalance => {
                    self.schedule_session_heartbeat(gid, member_id, now_ms);
                    errors::REBALANCE_IN_PROGRESS
                }
                GroupState::Dead => errors::COORDINATOR_NOT_AVAILABLE,
            }
        };
        self.run_fired(log, now_ms);
        error
    }

    // ---- LeaveGroup ----

    /// Returns the top-level error and one error per leaving member.
    pub fn leave_group(
        &mut self,
        log: &mut dyn OffsetsLog,
        gid: &str,
        leaving: &[(String, Option<String>)],
        now_ms: i64,
    ) -> (ErrorCode, Vec<ErrorCode>) {
        if let Some(e) = self.validate_group_status(gid, false) {
            return (e, Vec::new());
        }
        let Some(g) = self.groups.get(gid) else {
            return (errors::NONE, vec![errors::UNKNOWN_MEMBER_ID; leaving.len()]);
        };
        if g.is(GroupState::Dead) {
            return (errors::COORDINATOR_NOT_AVAILABLE, Vec::new());
        }
        let mut out = Vec::with_capacity(leaving.len());
        for (member_id, instance) in leaving {
            let g = &self.groups[gid];
            let e = if member_id.is_empty() {
                // Administrative removal by group instance id.
                match instance.as_deref().and_then(|i| g.static_member_id(i)) {
                    Some(current) => {
                        let current = current.to_string();
                        self.remove_member_and_update_group(log, gid, &current, now_ms);
                        errors::NONE
                    }
                    None => errors::UNKNOWN_MEMBER_ID,
                }
            } else if g.is_pending_member(member_id) {
                let g = self.groups.get_mut(gid).expect("group");
                g.pending_members.remove(member_id);
                self.disarm(&TimerKey::Member(gid.to_string(), member_id.clone()));
                self.maybe_complete_join(log, gid, now_ms);
                errors::NONE
            } else {
                match g.validate_current_member(member_id, instance.as_deref()) {
                    errors::NONE => {
                        log::info!(
                            "member {member_id} has left group {gid} through explicit LeaveGroup"
                        );
                        self.remove_member_and_update_group(log, gid, member_id, now_ms);
                        errors::NONE
                    }
                    e => e,
                }
            };
            out.push(e);
        }
        self.run_fired(log, now_ms);
        (errors::NONE, out)
    }
}

#[cfg(test)]
mod tests;
