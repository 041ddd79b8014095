//! One consumer group (Kafka's GroupMetadata and MemberMetadata): members,
//! protocol votes, leader, generation, committed offsets, and the state
//! machine Empty -> PreparingRebalance -> CompletingRebalance -> Stable, and
//! Dead once deleted or unloaded.

use std::collections::{BTreeMap, HashMap, HashSet};

use bytes::Bytes;
use kshard_shards::oneshot;

use super::offsets_codec::{subscription_topics, GroupValue, MemberValue, OffsetValue};
use super::ReplicationPoint;
use crate::protocol::errors;
use crate::protocol::errors::ErrorCode;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupState {
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
    Dead,
}

impl GroupState {
    /// The names Kafka reports (DescribeGroups, ListGroups).
    pub fn name(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
            GroupState::Dead => "Dead",
        }
    }

    /// Kafka's validPreviousStates.
    fn may_follow(self, prev: GroupState) -> bool {
        use GroupState::*;
        match self {
            Empty => matches!(prev, PreparingRebalance),
            PreparingRebalance => matches!(prev, Stable | CompletingRebalance | Empty),
            CompletingRebalance => matches!(prev, PreparingRebalance),
            Stable => matches!(prev, CompletingRebalance),
            Dead => true,
        }
    }
}

#[derive(Clone, Debug, Default)]
pub struct JoinResult {
    pub error: ErrorCode,
    pub generation_id: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub leader_id: String,
    pub skip_assignment: bool,
    pub member_id: String,
    /// (member id, group instance id, metadata of the chosen protocol);
    /// only for the leader.
    pub members: Vec<(String, Option<String>, Bytes)>,
    /// The answer waits until this append of the group is replicated.
    pub stored: Option<ReplicationPoint>,
}

impl JoinResult {
    pub fn error(member_id: &str, error: ErrorCode) -> Self {
        JoinResult {
            error,
            generation_id: -1,
            member_id: member_id.to_string(),
            ..Default::default()
        }
    }
}

#[derive(Clone, Debug, Default)]
pub struct SyncResult {
    pub error: ErrorCode,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub assignment: Bytes,
    /// The answer waits until this append of the group is replicated.
    pub stored: Option<ReplicationPoint>,
}

impl SyncResult {
    pub fn error(error: ErrorCode) -> Self {
        SyncResult {
            error,
            ..Default::default()
        }
    }
}

pub struct Member {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: i32,
    pub session_timeout_ms: i32,
    pub protocol_type: String,
    /// (name, metadata) in the member's order of preference.
    pub protocols: Vec<(String, Bytes)>,
    pub assignment: Bytes,
    pub join_waiter: Option<oneshot::Sender<JoinResult>>,
    pub sync_waiter: Option<oneshot::Sender<SyncResult>>,
    /// Joined in the current rebalance and has not got its JoinGroup answer.
    pub is_new: bool,
    pub heartbeat_satisfied: bool,
    /// Bumped whenever a new heartbeat expectation is scheduled; older
    /// timers are stale.
    pub heartbeat_epoch: u64,
}

impl Member {
    pub fn is_awaiting_join(&self) -> bool {
        self.join_waiter.is_some()
    }
    pub fn is_awaiting_sync(&self) -> bool {
        self.sync_waiter.is_some()
    }
    /// Kafka's hasSatisfiedHeartbeat.
    pub fn has_satisfied_heartbeat(&self) -> bool {
        if self.is_new {
            self.heartbeat_satisfied
        } else if self.is_awaiting_join() || self.is_awaiting_sync() {
            true
        } else {
            self.heartbeat_satisfied
        }
    }
    pub fn metadata_for(&self, protocol: &str) -> Bytes {
        self.protocols
            .iter()
            .find(|(n, _)| n == protocol)
            .map(|(_, m)| m.clone())
            .unwrap_or_default()
    }
    /// Same protocols with the same metadata, in the same order.
    pub fn matches(&self, protocols: &[(String, Bytes)]) -> bool {
        self.protocols == protocols
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommittedOffset {
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: String,
    pub commit_timestamp_ms: i64,
    pub expire_timestamp_ms: Option<i64>,
    /// The offset after the batch that stored it (-1: replayed), so that an
    /// older commit completing late does not replace a newer one.
    pub appended_end_offset: i64,
}

impl CommittedOffset {
    pub fn to_value(&self) -> OffsetValue {
        OffsetValue {
            offset: self.offset,
            leader_epoch: self.leader_epoch,
            metadata: self.metadata.clone(),
            commit_timestamp_ms: self.commit_timestamp_ms,
            expire_timestamp_ms: self.expire_timestamp_ms,
        }
    }
    pub fn from_value(v: OffsetValue) -> Self {
        CommittedOffset {
            offset: v.offset,
            leader_epoch: v.leader_epoch,
            metadata: v.metadata,
            commit_timestamp_ms: v.commit_timestamp_ms,
            expire_timestamp_ms: v.expire_timestamp_ms,
            appended_end_offset: -1,
        }
    }
}

pub struct Group {
    pub group_id: String,
    pub state: GroupState,
    /// When the state last changed (-1: unknown, from old records).
    pub state_timestamp_ms: i64,
    pub generation_id: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub leader_id: Option<String>,
    /// Ordered so leader fallback and responses are deterministic.
    pub members: BTreeMap<String, Member>,
    /// Member ids handed out by MEMBER_ID_REQUIRED, not yet joined.
    pub pending_members: HashSet<String>,
    /// Members of this generation that have not sent SyncGroup.
    pub pending_sync: HashSet<String>,
    /// group instance id -> member id.
    pub static_members: HashMap<String, String>,
    /// protocol name -> how many members support it.
    supported_protocols: HashMap<String, usize>,
    pub num_awaiting_join: usize,
    /// A member joined during the initial delayed join (extends the delay).
    pub new_member_added: bool,
    pub offsets: HashMap<(String, i32), CommittedOffset>,
    /// OffsetCommits appended and not yet replicated.
    pub pending_commits: usize,
    /// TxnOffsetCommits per producer id, visible once their transaction
    /// commits (Kafka's pendingTransactionalOffsetCommits).
    pub pending_txn_offsets: HashMap<i64, HashMap<(String, i32), CommittedOffset>>,
    /// Where the group's metadata was last appended: a SyncGroup answer
    /// waits until it is replicated.
    pub last_stored: Option<ReplicationPoint>,
    /// Topics the members subscribe to, when the protocol is "consumer"
    /// and every subscription parsed.
    pub subscribed_topics: Option<HashSet<String>>,
    /// Bumped on every DelayedJoin / pending-sync timer armed.
    pub join_epoch: u64,
    pub sync_epoch: u64,
    /// Remaining ms of the initial rebalance delay (InitialDelayedJoin);
    /// None: a plain DelayedJoin is armed.
    pub initial_join_remaining_ms: Option<i64>,
}

pub const CONSUMER_PROTOCOL_TYPE: &str = "consumer";

impl Group {
    pub fn new(group_id: &str, state: GroupState, now_ms: i64) -> Self {
        Group {
            group_id: group_id.to_string(),
            state,
            state_timestamp_ms: now_ms,
            generation_id: 0,
            protocol_type: None,
            protocol_name: None,
            leader_id: None,
            members: BTreeMap::new(),
            pending_members: HashSet::new(),
            pending_sync: HashSet::new(),
            static_members: HashMap::new(),
            supported_protocols: HashMap::new(),
            num_awaiting_join: 0,
            new_member_added: false,
            offsets: HashMap::new(),
            pending_commits: 0,
            pending_txn_offsets: HashMap::new(),
            last_stored: None,
            subscribed_topics: None,
            join_epoch: 0,
            sync_epoch: 0,
            initial_join_remaining_ms: None,
        }
    }

    pub fn is(&self, s: GroupState) -> bool {
        self.state == s
    }

    pub fn transition_to(&mut self, s: GroupState, now_ms: i64) {
        assert!(
            s.may_follow(self.state),
            "group {}: illegal transition {:?} -> {:?}",
            self.group_id,
            self.state,
            s
        );
        self.state = s;
        self.state_timestamp_ms = now_ms;
    }

    pub fn can_rebalance(&self) -> bool {
        GroupState::PreparingRebalance.may_follow(self.state)
    }

    pub fn is_leader(&self, member_id: &str) -> bool {
        self.leader_id.as_deref() == Some(member_id)
    }

    pub fn has(&self, member_id: &str) -> bool {
        self.members.contains_key(member_id)
    }

    pub fn is_pending_member(&self, member_id: &str) -> bool {
        self.pending_members.contains(member_id)
    }

    pub fn static_member_id(&self, instance_id: &str) -> Option<&str> {
        self.static_members.get(instance_id).map(|s| s.as_str())
    }

    /// Kafka's isStaticMemberFenced.
    pub fn is_static_member_fenced(&self, instance_id: Option<&str>, member_id: &str) -> bool {
        match instance_id.and_then(|i| self.static_member_id(i)) {
            Some(current) => current != member_id,
            None => false,
        }
    }

    /// Kafka's validateCurrentMember.
    pub fn validate_current_member(&self, member_id: &str, instance_id: Option<&str>) -> ErrorCode {
        if let Some(instance) = instance_id {
            match self.static_member_id(instance) {
                Some(current) if current != member_id => return errors::FENCED_INSTANCE_ID,
                Some(_) => {}
                None => return errors::UNKNOWN_MEMBER_ID,
            }
        }
        if !self.has(member_id) {
            return errors::UNKNOWN_MEMBER_ID;
        }
        errors::NONE
    }

    /// Kafka's supportsProtocols.
    pub fn supports_protocols(&self, protocol_type: &str, protocols: &[(String, Bytes)]) -> bool {
        if self.is(GroupState::Empty) {
            !protocol_type.is_empty() && !protocols.is_empty()
        } else {
            self.protocol_type.as_deref() == Some(protocol_type)
                && protocols.iter().any(|(n, _)| {
                    self.supported_protocols.get(n).copied().unwrap_or(0) == self.members.len()
                })
        }
    }

    pub fn has_all_members_joined(&self) -> bool {
        self.members.len() == self.num_awaiting_join && self.pending_members.is_empty()
    }

    pub fn rebalance_timeout_ms(&self) -> i32 {
        self.members
            .values()
            .map(|m| m.rebalance_timeout_ms)
            .max()
            .unwrap_or(0)
    }

    pub fn add(&mut self, mut member: Member, waiter: Option<oneshot::Sender<JoinResult>>) {
        if self.members.is_empty() {
            self.protocol_type = Some(member.protocol_type.clone());
        }
        debug_assert_eq!(self.protocol_type.as_deref(), Some(&*member.protocol_type));
        if self.leader_id.is_none() {
            self.leader_id = Some(member.member_id.clone());
        }
        for (name, _) in &member.protocols {
            *self.supported_protocols.entry(name.clone()).or_insert(0) += 1;
        }
        member.join_waiter = waiter;
        if member.is_awaiting_join() {
            self.num_awaiting_join += 1;
        }
        if let Some(instance) = &member.group_instance_id {
            self.static_members
                .insert(instance.clone(), member.member_id.clone());
        }
        self.pending_members.remove(&member.member_id);
        self.members.insert(member.member_id.clone(), member);
    }

    /// Removes a member; a waiting JoinGroup or SyncGroup is dropped by the
    /// caller first (it decides the answer).
    pub fn remove(&mut self, member_id: &str) -> Option<Member> {
        let m = self.members.remove(member_id);
        if let Some(m) = &m {
            for (name, _) in &m.protocols {
                if let Some(c) = self.supported_protocols.get_mut(name) {
                    *c -= 1;
                }
            }
            if m.is_awaiting_join() {
                self.num_awaiting_join -= 1;
            }
            if let Some(i) = &m.group_instance_id {
                self.static_members.remove(i);
            }
        }
        if self.is_leader(member_id) {
            self.leader_id = self.members.keys().next().cloned();
        }
        self.pending_members.remove(member_id);
        self.pending_sync.remove(member_id);
        m
    }

    /// Updates a rejoining member's protocols and timeouts; `waiter` becomes
    /// its pending JoinGroup answer.
    pub fn update_member(
        &mut self,
        member_id: &str,
        protocols: Vec<(String, Bytes)>,
        rebalance_timeout_ms: i32,
        session_timeout_ms: i32,
        waiter: Option<oneshot::Sender<JoinResult>>,
    ) {
        let Some(m) = self.members.get_mut(member_id) else {
            return;
        };
        for (name, _) in &m.protocols {
            if let Some(c) = self.supported_protocols.get_mut(name) {
                *c -= 1;
            }
        }
        for (name, _) in &protocols {
            *self.supported_protocols.entry(name.clone()).or_insert(0) += 1;
        }
        m.protocols = protocols;
        m.rebalance_timeout_ms = rebalance_timeout_ms;
        m.session_timeout_ms = session_timeout_ms;
        let was_waiting = m.is_awaiting_join();
        // A JoinGroup replaced by a newer one gets no answer (Kafka drops the
        // old callback the same way).
        m.join_waiter = waiter;
        match (was_waiting, m.is_awaiting_join()) {
            (false, true) => self.num_awaiting_join += 1,
            (true, false) => self.num_awaiting_join -= 1,
            _ => {}
        }
    }

    /// Answers a member's pending JoinGroup, if any.
    pub fn complete_join(&mut self, member_id: &str, result: JoinResult) {
        if let Some(m) = self.members.get_mut(member_id) {
            if let Some(tx) = m.join_waiter.take() {
                self.num_awaiting_join -= 1;
                tx.send(result);
            }
        }
    }

    /// Kafka's selectProtocol: among protocols every member supports, the
    /// one most members list first.
    pub fn select_protocol(&self) -> Option<String> {
        let n = self.members.len();
        let candidates: Vec<&String> = self
            .supported_protocols
            .iter()
            .filter(|(_, &c)| c == n && n > 0)
            .map(|(p, _)| p)
            .collect();
        let mut votes: BTreeMap<&str, usize> = BTreeMap::new();
        for m in self.members.values() {
            if let Some((p, _)) = m.protocols.iter().find(|(p, _)| candidates.contains(&p)) {
                *votes.entry(p.as_str()).or_insert(0) += 1;
            }
        }
        let mut best: Option<(&str, usize)> = None;
        for (p, v) in votes {
            if best.is_none_or(|(_, bv)| v > bv) {
                best = Some((p, v));
            }
        }
        best.map(|(p, _)| p.to_string())
    }

    /// Kafka's maybeElectNewJoinedLeader.
    pub fn maybe_elect_new_joined_leader(&mut self) -> bool {
        let Some(leader) = self.leader_id.clone() else {
            return false;
        };
        if self
            .members
            .get(&leader)
            .is_some_and(|m| m.is_awaiting_join())
        {
            return true;
        }
        match self
            .members
            .values()
            .find(|m| m.is_awaiting_join())
            .map(|m| m.member_id.clone())
        {
            Some(id) => {
                self.leader_id = Some(id);
                true
            }
            None => false,
        }
    }

    pub fn compute_subscribed_topics(&self) -> Option<HashSet<String>> {
        if self.protocol_type.as_deref() != Some(CONSUMER_PROTOCOL_TYPE) {
            return None;
        }
        let protocol = self.protocol_name.as_deref()?;
        let mut all = HashSet::new();
        for m in self.members.values() {
            let topics = subscription_topics(&m.metadata_for(protocol)).ok()?;
            all.extend(topics);
        }
        Some(all)
    }

    pub fn is_subscribed_to_topic(&self, topic: &str) -> bool {
        match &self.subscribed_topics {
            Some(t) => t.contains(topic),
            None => true,
        }
    }

    pub fn init_next_generation(&mut self, now_ms: i64) {
        self.generation_id += 1;
        if self.members.is_empty() {
            self.protocol_name = None;
            self.transition_to(GroupState::Empty, now_ms);
        } else {
            self.protocol_name = self.select_protocol();
            self.transition_to(GroupState::CompletingRebalance, now_ms);
        }
        self.subscribed_topics = self.compute_subscribed_topics();
        self.pending_sync = self.members.keys().cloned().collect();
    }

    /// The members' chosen-protocol metadata, for the leader's JoinGroup.
    pub fn current_member_metadata(&self) -> Vec<(String, Option<String>, Bytes)> {
        let p = self.protocol_name.clone().unwrap_or_default();
        self.members
            .values()
            .map(|m| {
                (
                    m.member_id.clone(),
                    m.group_instance_id.clone(),
                    m.metadata_for(&p),
                )
            })
            .collect()
    }

    /// The GroupMetadataValue stored for this group.
    pub fn to_value(&self) -> GroupValue {
        let protocol = self.protocol_name.clone().unwrap_or_default();
        GroupValue {
            protocol_type: self.protocol_type.clone().unwrap_or_default(),
            generation: self.generation_id,
            protocol: self.protocol_name.clone(),
            leader: self.leader_id.clone(),
            current_state_timestamp_ms: self.state_timestamp_ms,
            members: self
                .members
                .values()
                .map(|m| MemberValue {
                    member_id: m.member_id.clone(),
                    group_instance_id: m.group_instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    rebalance_timeout_ms: m.rebalance_timeout_ms,
                    session_timeout_ms: m.session_timeout_ms,
                    subscription: m.metadata_for(&protocol),
                    assignment: m.assignment.clone(),
                })
                .collect(),
        }
    }

    /// Kafka's loadGroup: members present -> Stable, else Empty.
    pub fn load(&mut self, v: GroupValue, now_ms: i64) {
        let members = std::mem::take(&mut self.members);
        drop(members);
        self.supported_protocols.clear();
        self.static_members.clear();
        self.num_awaiting_join = 0;
        self.leader_id = None;
        self.state = if v.members.is_empty() {
            GroupState::Empty
        } else {
            GroupState::Stable
        };
        self.state_timestamp_ms = if v.current_state_timestamp_ms >= 0 {
            v.current_state_timestamp_ms
        } else {
            now_ms
        };
        self.generation_id = v.generation;
        self.protocol_type = if v.protocol_type.is_empty() && v.members.is_empty() {
            None
        } else {
            Some(v.protocol_type.clone())
        };
        self.protocol_name = v.protocol.clone();
        let protocol = v.protocol.clone().unwrap_or_default();
        for mv in v.members {
            let member = Member {
                member_id: mv.member_id,
                group_instance_id: mv.group_instance_id,
                client_id: mv.client_id,
                client_host: mv.client_host,
                rebalance_timeout_ms: mv.rebalance_timeout_ms,
                session_timeout_ms: mv.session_timeout_ms,
                protocol_type: v.protocol_type.clone(),
                protocols: vec![(protocol.clone(), mv.subscription)],
                assignment: mv.assignment,
                join_waiter: None,
                sync_waiter: None,
                is_new: false,
                heartbeat_satisfied: false,
                heartbeat_epoch: 0,
            };
            self.add(member, None);
        }
        self.leader_id = v.leader.filter(|l| self.members.contains_key(l));
        if self.leader_id.is_none() {
            self.leader_id = self.members.keys().next().cloned();
        }
        self.subscribed_topics = self.compute_subscribed_topics();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(id: &str, protocols: &[&str]) -> Member {
        Member {
            member_id: id.into(),
            group_instance_id: None,
            client_id: "c".into(),
            client_host: "".into(),
            rebalance_timeout_ms: 1000,
            session_timeout_ms: 10000,
            protocol_type: "consumer".into(),
            protocols: protocols
                .iter()
                .map(|p| (p.to_string(), Bytes::new()))
                .collect(),
            assignment: Bytes::new(),
            join_waiter: None,
            sync_waiter: None,
            is_new: true,
            heartbeat_satisfied: false,
            heartbeat_epoch: 0,
        }
    }

    #[test]
    fn protocol_vote_and_support() {
        let mut g = Group::new("g", GroupState::Empty, 0);
        g.add(member("a", &["range", "roundrobin"]), None);
        g.transition_to(GroupState::PreparingRebalance, 1);
        g.add(member("b", &["roundrobin", "range"]), None);
        g.add(member("c", &["roundrobin"]), None);
        assert_eq!(g.select_protocol().as_deref(), Some("roundrobin"));
        let only_range = vec![("range".to_string(), Bytes::new())];
        assert!(!g.supports_protocols("consumer", &only_range));
        let rr = vec![("roundrobin".to_string(), Bytes::new())];
        assert!(g.supports_protocols("consumer", &rr));
        assert!(!g.supports_protocols("connect", &rr));
        assert_eq!(g.leader_id.as_deref(), Some("a"));
        g.remove("a");
        assert_eq!(g.leader_id.as_deref(), Some("b"));
    }

    #[test]
    fn state_transitions_follow_kafka() {
        let mut g = Group::new("g", GroupState::Empty, 0);
        assert!(g.can_rebalance());
        g.transition_to(GroupState::PreparingRebalance, 1);
        g.init_next_generation(2);
        assert!(g.is(GroupState::Empty));
        assert_eq!(g.generation_id, 1);
        g.transition_to(GroupState::PreparingRebalance, 3);
        g.add(member("a", &["range"]), None);
        g.init_next_generation(4);
        assert!(g.is(GroupState::CompletingRebalance));
        assert_eq!(g.protocol_name.as_deref(), Some("range"));
        assert!(g.pending_sync.contains("a"));
        g.transition_to(GroupState::Stable, 5);
        assert_eq!(g.state_timestamp_ms, 5);
    }

    #[test]
    #[should_panic]
    fn illegal_transition_panics() {
        let mut g = Group::new("g", GroupState::Empty, 0);
        g.transition_to(GroupState::Stable, 1);
    }

    #[test]
    fn value_round_trip_loads_stable() {
        let mut g = Group::new("g", GroupState::Empty, 0);
        g.transition_to(GroupState::PreparingRebalance, 1);
        let mut m = member("a", &["range"]);
        m.group_instance_id = Some("i1".into());
        g.add(m, None);
        g.init_next_generation(2);
        let v = g.to_value();
        let mut h = Group::new("g", GroupState::Empty, 0);
        h.load(v.clone(), 10);
        assert!(h.is(GroupState::Stable));
        assert_eq!(h.generation_id, 1);
        assert_eq!(h.static_member_id("i1"), Some("a"));
        assert_eq!(h.leader_id.as_deref(), Some("a"));
        assert_eq!(h.to_value(), v);
    }
}
