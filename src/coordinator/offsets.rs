//! Kafka's GroupMetadataManager side of the coordinator: writing group
//! metadata and offsets to `__consumer_offsets`, OffsetCommit/OffsetFetch,
//! DeleteGroups, OffsetDelete, ListGroups, DescribeGroups, offset expiry,
//! and rebuilding everything by replaying the topic's records.

use bytes::Bytes;
use kshard_shards::log::records::BatchBuilder;

use super::group::{CommittedOffset, Group, GroupState, CONSUMER_PROTOCOL_TYPE};
use super::group_coordinator::{GroupCoordinator, OFFSET_METADATA_MAX_BYTES};
use super::offsets_codec::{self as codec, RecordKey};
use super::{partition_for, OffsetsLog, ReplicationPoint};
use crate::protocol::errors;
use crate::protocol::errors::ErrorCode;

/// One partition's commit in an OffsetCommit.
pub struct CommitPart {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: Option<String>,
}

/// An OffsetCommit as the coordinator needs it.
pub struct OffsetCommit<'a> {
    pub group_id: &'a str,
    pub generation_id: i32,
    pub member_id: &'a str,
    pub instance_id: Option<&'a str>,
    /// -1: the broker default.
    pub retention_ms: i64,
    pub parts: &'a [CommitPart],
}

/// What OffsetCommit answers, and the commits waiting for replication.
pub struct CommitOutcome {
    pub results: Vec<ErrorCode>,
    pub pending: Option<PendingCommit>,
}

/// Commits appended but not yet replicated: OffsetFetch does not see them.
pub struct PendingCommit {
    pub group_id: String,
    /// The load of the partition the commit was made in.
    load_id: u64,
    pub stored: ReplicationPoint,
    offsets: Vec<((String, i32), CommittedOffset)>,
}

/// (topic, partition, committed offset, leader epoch, metadata).
pub type OffsetRow = (String, i32, i64, i32, String);

/// A group as DescribeGroups reports it.
pub struct GroupDescription {
    pub state: &'static str,
    pub protocol_type: String,
    pub protocol: String,
    /// (member id, instance id, client id, client host, metadata, assignment)
    pub members: Vec<(String, Option<String>, String, String, Bytes, Bytes)>,
}

/// Maps append errors as Kafka's storeGroup/storeOffsets do.
pub fn map_store_error(e: ErrorCode, for_offsets: bool) -> ErrorCode {
    match e {
        errors::UNKNOWN_TOPIC_OR_PARTITION
        | errors::NOT_ENOUGH_REPLICAS
        | errors::NOT_ENOUGH_REPLICAS_AFTER_APPEND
        | errors::REQUEST_TIMED_OUT => errors::COORDINATOR_NOT_AVAILABLE,
        errors::NOT_LEADER_OR_FOLLOWER | errors::KAFKA_STORAGE_ERROR => errors::NOT_COORDINATOR,
        errors::MESSAGE_TOO_LARGE | errors::RECORD_LIST_TOO_LARGE | errors::INVALID_FETCH_SIZE => {
            if for_offsets {
                errors::INVALID_COMMIT_OFFSET_SIZE
            } else {
                errors::UNKNOWN_SERVER_ERROR
            }
        }
        other => other,
    }
}

impl GroupCoordinator {
    pub fn partition_of(&self, gid: &str) -> i32 {
        partition_for(gid, self.config.num_partitions)
    }

    /// Appends a batch to the partition of `gid` under its coordinator epoch.
    pub(super) fn append_for_group(
        &self,
        log: &mut dyn OffsetsLog,
        gid: &str,
        batch: Vec<u8>,
    ) -> Result<ReplicationPoint, ErrorCode> {
        let partition = self.partition_of(gid);
        let Some(owned) = self.partitions.get(&partition) else {
            return Err(errors::NOT_COORDINATOR);
        };
        let end_offset = log.append(partition, owned.leader_epoch, batch)?;
        Ok(ReplicationPoint {
            partition,
            end_offset,
        })
    }

    /// Writes the group's metadata record (Kafka's storeGroup); the caller
    /// answers once it is replicated.
    pub(super) fn store_group(
        &mut self,
        log: &mut dyn OffsetsLog,
        gid: &str,
        now_ms: i64,
    ) -> Result<ReplicationPoint, ErrorCode> {
        let g = &self.groups[gid];
        let key = codec::encode_group_key(gid);
        let value = codec::encode_group_value(&g.to_value());
        let batch = BatchBuilder::new(0)
            .add(now_ms, Some(&key), Some(&value), &[])
            .build();
        let stored = self
            .append_for_group(log, gid, batch)
            .map_err(|e| map_store_error(e, false))?;
        self.groups.get_mut(gid).expect("group").last_stored = Some(stored);
        Ok(stored)
    }

    /// Kafka's validateOffsetCommit.
    pub(super) fn validate_offset_commit(
        g: &Group,
        generation_id: i32,
        member_id: &str,
        instance_id: Option<&str>,
        is_transactional: bool,
    ) -> ErrorCode {
        if g.is(GroupState::Dead) {
            return errors::COORDINATOR_NOT_AVAILABLE;
        }
        if generation_id >= 0 || !member_id.is_empty() || instance_id.is_some() {
            match g.validate_current_member(member_id, instance_id) {
                errors::NONE if generation_id != g.generation_id => errors::ILLEGAL_GENERATION,
                e => e,
            }
        } else if !is_transactional && !g.is(GroupState::Empty) {
            // Only members may commit to a group that has members; not so
            // for transactional commits, whose old versions carry no member.
            errors::UNKNOWN_MEMBER_ID
        } else {
            errors::NONE
        }
    }

    /// OffsetCommit: one error per part. Accepted commits are appended now
    /// and become visible (OffsetFetch) in `complete_commit`, once the append
    /// is replicated: Kafka's pending offset commits.
    pub fn commit_offsets(
        &mut self,
        log: &mut dyn OffsetsLog,
        commit: &OffsetCommit,
        now_ms: i64,
    ) -> CommitOutcome {
        let outcome = self.do_commit_offsets(log, commit, now_ms);
        self.run_fired(log, now_ms);
        outcome
    }

    fn do_commit_offsets(
        &mut self,
        log: &mut dyn OffsetsLog,
        commit: &OffsetCommit,
        now_ms: i64,
    ) -> CommitOutcome {
        let OffsetCommit {
            group_id: gid,
            generation_id,
            member_id,
            instance_id,
            retention_ms,
            parts,
        } = *commit;
        let all = |e: ErrorCode| CommitOutcome {
            results: vec![e; parts.len()],
            pending: None,
        };
        if let Some(e) = self.validate_group_status(gid, true) {
            return all(e);
        }
        if !self.groups.contains_key(gid) {
            if generation_id >= 0 {
                // A commit from an older generation of a group that is gone.
                return all(errors::ILLEGAL_GENERATION);
            }
            // Not using group management: allow it (a simple consumer).
            self.groups
                .insert(gid.to_string(), Group::new(gid, GroupState::Empty, now_ms));
        }
        let g = &self.groups[gid];
        let e = Self::validate_offset_commit(g, generation_id, member_id, instance_id, false);
        if e != errors::NONE {
            return all(e);
        }
        match g.state {
            GroupState::Empty => {}
            GroupState::Stable | GroupState::PreparingRebalance => {
                // Heartbeats still tell members a rebalance is in progress.
                let timeout = g.members[member_id].session_timeout_ms as i64;
                self.schedule_heartbeat(gid, member_id, timeout, now_ms);
            }
            GroupState::CompletingRebalance => return all(errors::REBALANCE_IN_PROGRESS),
            GroupState::Dead => return all(errors::COORDINATOR_NOT_AVAILABLE),
        }
        let expire = (retention_ms != -1).then_some(now_ms + retention_ms);
        let mut results = Vec::with_capacity(parts.len());
        let mut builder = BatchBuilder::new(0);
        let mut accepted = Vec::with_capacity(parts.len());
        for p in parts {
            let metadata = p.metadata.clone().unwrap_or_default();
            if metadata.len() > OFFSET_METADATA_MAX_BYTES {
                results.push(errors::OFFSET_METADATA_TOO_LARGE);
                continue;
            }
            let committed = CommittedOffset {
                offset: p.offset,
                leader_epoch: p.leader_epoch,
                metadata,
                commit_timestamp_ms: now_ms,
                expire_timestamp_ms: expire,
                appended_end_offset: -1,
            };
            let key = codec::encode_offset_key(gid, &p.topic, p.partition);
            let value = codec::encode_offset_value(&committed.to_value());
            builder.push(now_ms, Some(&key), Some(&value), &[]);
            results.push(errors::NONE);
            accepted.push(((p.topic.clone(), p.partition), committed));
        }
        if accepted.is_empty() {
            return CommitOutcome {
                results,
                pending: None,
            };
        }
        match self.append_for_group(log, gid, builder.build()) {
            Err(e) => {
                let e = map_store_error(e, true);
                for r in results.iter_mut().filter(|r| **r == errors::NONE) {
                    *r = e;
                }
                CommitOutcome {
                    results,
                    pending: None,
                }
            }
            Ok(stored) => {
                for (_, o) in accepted.iter_mut() {
                    o.appended_end_offset = stored.end_offset;
                }
                self.groups.get_mut(gid).expect("group").pending_commits += 1;
                CommitOutcome {
                    results,
                    pending: Some(PendingCommit {
                        group_id: gid.to_string(),
                        load_id: self.partitions[&stored.partition].load_id,
                        stored,
                        offsets: accepted,
                    }),
                }
            }
        }
    }

    /// Kafka's onOffsetCommitAppend: the append of `pending` is replicated
    /// (`error` NONE) or failed; the commits become visible, unless a later
    /// commit of the same partition already is. Returns the error to answer.
    pub fn complete_commit(&mut self, pending: PendingCommit, error: ErrorCode) -> ErrorCode {
        let partition = pending.stored.partition;
        let same_load = self
            .partitions
            .get(&partition)
            .is_some_and(|p| p.load_id == pending.load_id);
        if !same_load {
            // Unloaded meanwhile; the next coordinator reads the log.
            return map_store_error(error, true);
        }
        let Some(g) = self.groups.get_mut(&pending.group_id) else {
            return map_store_error(error, true);
        };
        assert!(g.pending_commits > 0);
        g.pending_commits -= 1;
        if error != errors::NONE {
            return map_store_error(error, true);
        }
        for (key, committed) in pending.offsets {
            let newer = g
                .offsets
                .get(&key)
                .is_some_and(|o| o.appended_end_offset > committed.appended_end_offset);
            if !newer {
                g.offsets.insert(key, committed);
            }
        }
        errors::NONE
    }

    /// OffsetFetch for one group: the group error, and (topic, partition,
    /// offset, leader epoch, metadata) for the asked partitions (None: all
    /// committed ones). Partitions without a commit get -1 and "".
    pub fn fetch_offsets(
        &self,
        gid: &str,
        parts: Option<&[(String, i32)]>,
    ) -> (ErrorCode, Vec<OffsetRow>) {
        if let Some(e) = self.validate_group_status(gid, true) {
            return (e, Vec::new());
        }
        let g = self.groups.get(gid).filter(|g| !g.is(GroupState::Dead));
        let lookup = |t: &str, p: i32| match g.and_then(|g| g.offsets.get(&(t.to_string(), p))) {
            Some(o) => (
                t.to_string(),
                p,
                o.offset,
                o.leader_epoch,
                o.metadata.clone(),
            ),
            None => (t.to_string(), p, -1, -1, String::new()),
        };
        let out = match parts {
            Some(parts) => parts.iter().map(|(t, p)| lookup(t, *p)).collect(),
            None => {
                let mut all: Vec<(String, i32)> = g
                    .map(|g| g.offsets.keys().cloned().collect())
                    .unwrap_or_default();
                all.sort();
                all.iter().map(|(t, p)| lookup(t, *p)).collect()
            }
        };
        (errors::NONE, out)
    }

    /// ListGroups: (group id, protocol type, state) matching the states
    /// filter (empty: all).
    pub fn list_groups(
        &self,
        states: &[String],
    ) -> (ErrorCode, Vec<(String, String, &'static str)>) {
        // As Kafka: the loaded groups, and an error while any partition loads.
        let error = if self.is_loading() {
            errors::COORDINATOR_LOAD_IN_PROGRESS
        } else {
            errors::NONE
        };
        let mut out: Vec<(String, String, &'static str)> = self
            .groups
            .values()
            .filter(|g| !g.is(GroupState::Dead) && self.is_owned(self.partition_of(&g.group_id)))
            .filter(|g| {
                states.is_empty()
                    || states
                        .iter()
                        .any(|s| s.eq_ignore_ascii_case(g.state.name()))
            })
            .map(|g| {
                (
                    g.group_id.clone(),
                    g.protocol_type.clone().unwrap_or_default(),
                    g.state.name(),
                )
            })
            .collect();
        out.sort();
        (error, out)
    }

    /// DescribeGroups for one group; an unknown group is reported Dead.
    pub fn describe_group(&self, gid: &str) -> (ErrorCode, GroupDescription) {
        let dead = GroupDescription {
            state: GroupState::Dead.name(),
            protocol_type: String::new(),
            protocol: String::new(),
            members: Vec::new(),
        };
        if let Some(e) = self.validate_group_status(gid, true) {
            let empty = GroupDescription { state: "", ..dead };
            return (e, empty);
        }
        let Some(g) = self.groups.get(gid) else {
            return (errors::NONE, dead);
        };
        let stable = g.is(GroupState::Stable);
        let protocol = if stable {
            g.protocol_name.clone().unwrap_or_default()
        } else {
            String::new()
        };
        let members = g
            .members
            .values()
            .map(|m| {
                let (meta, assignment) = if stable {
                    (m.metadata_for(&protocol), m.assignment.clone())
                } else {
                    (Bytes::new(), Bytes::new())
                };
                (
                    m.member_id.clone(),
                    m.group_instance_id.clone(),
                    m.client_id.clone(),
                    m.client_host.clone(),
                    meta,
                    assignment,
                )
            })
            .collect();
        (
            errors::NONE,
            GroupDescription {
                state: g.state.name(),
                protocol_type: g.protocol_type.clone().unwrap_or_default(),
                protocol,
                members,
            },
        )
    }

    /// Writes tombstones for `offsets` of `gid` and, if the group is Dead,
    /// for its metadata (Kafka's cleanupGroupMetadata), then forgets them.
    fn write_tombstones(
        &mut self,
        log: &mut dyn OffsetsLog,
        gid: &str,
        offsets: &[(String, i32)],
        now_ms: i64,
    ) -> ErrorCode {
        let dead = self.groups.get(gid).is_none_or(|g| g.is(GroupState::Dead));
        let mut b = BatchBuilder::new(0);
        for (t, p) in offsets {
            b.push(
                now_ms,
                Some(&codec::encode_offset_key(gid, t, *p)),
                None,
                &[],
            );
        }
        if dead {
            b.push(now_ms, Some(&codec::encode_group_key(gid)), None, &[]);
        }
        if b.record_count() == 0 {
            return errors::NONE;
        }
        let e = match self.append_for_group(log, gid, b.build()) {
            Ok(_) => errors::NONE,
            Err(e) => map_store_error(e, false),
        };
        if let Some(g) = self.groups.get_mut(gid) {
            for k in offsets {
                g.offsets.remove(k);
            }
        }
        if dead {
            self.groups.remove(gid);
        }
        e
    }

    /// DeleteGroups: one error per group.
    pub fn delete_groups(
        &mut self,
        log: &mut dyn OffsetsLog,
        gids: &[String],
        now_ms: i64,
    ) -> Vec<ErrorCode> {
        let mut out = Vec::with_capacity(gids.len());
        for gid in gids {
            if let Some(e) = self.validate_group_status(gid, true) {
                out.push(e);
                continue;
            }
            let Some(g) = self.groups.get_mut(gid) else {
                out.push(errors::GROUP_ID_NOT_FOUND);
                continue;
            };
            match g.state {
                GroupState::Dead => out.push(errors::GROUP_ID_NOT_FOUND),
                GroupState::Empty => {
                    g.transition_to(GroupState::Dead, now_ms);
                    let all: Vec<(String, i32)> = g.offsets.keys().cloned().collect();
                    let e = self.write_tombstones(log, gid, &all, now_ms);
                    if e != errors::NONE {
                        log::warn!("writing tombstones for deleted group {gid}: error {e}");
                    }
                    out.push(errors::NONE);
                }
                _ => out.push(errors::NON_EMPTY_GROUP),
            }
        }
        out
    }

    /// OffsetDelete: the group error and one error per partition.
    pub fn delete_offsets(
        &mut self,
        log: &mut dyn OffsetsLog,
        gid: &str,
        parts: &[(String, i32)],
        now_ms: i64,
    ) -> (ErrorCode, Vec<ErrorCode>) {
        if let Some(e) = self.validate_group_status(gid, true) {
            return (e, Vec::new());
        }
        let Some(g) = self.groups.get(gid) else {
            return (errors::GROUP_ID_NOT_FOUND, Vec::new());
        };
        let mut results = vec![errors::NONE; parts.len()];
        let mut eligible = Vec::new();
        match g.state {
            GroupState::Dead => return (errors::GROUP_ID_NOT_FOUND, Vec::new()),
            GroupState::Empty => eligible.extend(parts.iter().cloned()),
            _ if g.protocol_type.as_deref() == Some(CONSUMER_PROTOCOL_TYPE) => {
                for (i, (t, p)) in parts.iter().enumerate() {
                    if g.is_subscribed_to_topic(t) {
                        results[i] = errors::GROUP_SUBSCRIBED_TO_TOPIC;
                    } else {
                        eligible.push((t.clone(), *p));
                    }
                }
            }
            _ => return (errors::NON_EMPTY_GROUP, Vec::new()),
        }
        let present: Vec<(String, i32)> = eligible
            .into_iter()
            .filter(|k| g.offsets.contains_key(k))
            .collect();
        if !present.is_empty() {
            let e = self.write_tombstones(log, gid, &present, now_ms);
            if e != errors::NONE {
                return (e, Vec::new());
            }
        }
        (errors::NONE, results)
    }

    /// The groups of loaded partitions (not those still being replayed).
    fn loaded_group_ids(&self) -> Vec<String> {
        self.groups
            .keys()
            .filter(|gid| self.is_owned(self.partition_of(gid)))
            .cloned()
            .collect()
    }

    /// Kafka's removeExpiredOffsets for every group, then drops groups left
    /// Empty without offsets. Returns how many offsets expired.
    pub fn expire_offsets(&mut self, log: &mut dyn OffsetsLog, now_ms: i64) -> usize {
        let retention_ms = self.config.offsets_retention_ms;
        let gids = self.loaded_group_ids();
        let mut expired_total = 0;
        for gid in gids {
            let g = &self.groups[&gid];
            let expired_by = |base_ms: i64, o: &CommittedOffset| match o.expire_timestamp_ms {
                Some(t) => now_ms >= t,
                None => now_ms - base_ms >= retention_ms,
            };
            let expired: Vec<(String, i32)> = match g.protocol_type.as_deref() {
                Some(_) if g.is(GroupState::Empty) => g
                    .offsets
                    .iter()
                    .filter(|(_, o)| {
                        let base = if g.state_timestamp_ms >= 0 {
                            g.state_timestamp_ms
                        } else {
                            o.commit_timestamp_ms
                        };
                        expired_by(base, o)
                    })
                    .map(|(k, _)| k.clone())
                    .collect(),
                Some(CONSUMER_PROTOCOL_TYPE)
                    if g.is(GroupState::Stable) && g.subscribed_topics.is_some() =>
                {
                    g.offsets
                        .iter()
                        .filter(|((t, _), o)| {
                            !g.is_subscribed_to_topic(t) && expired_by(o.commit_timestamp_ms, o)
                        })
                        .map(|(k, _)| k.clone())
                        .collect()
                }
                None => g
                    .offsets
                    .iter()
                    .filter(|(_, o)| expired_by(o.commit_timestamp_ms, o))
                    .map(|(k, _)| k.clone())
                    .collect(),
                _ => Vec::new(),
            };
            // Kafka's hasOffsets counts commits waiting for replication.
            let becomes_dead = g.is(GroupState::Empty)
                && g.offsets.len() == expired.len()
                && g.pending_commits == 0;
            if expired.is_empty() && !becomes_dead {
                continue;
            }
            if becomes_dead {
                self.groups
                    .get_mut(&gid)
                    .expect("group")
                    .transition_to(GroupState::Dead, now_ms);
            }
            expired_total += expired.len();
            let e = self.write_tombstones(log, &gid, &expired, now_ms);
            if e != errors::NONE {
                log::warn!("writing expired-offset tombstones for group {gid}: error {e}");
            }
        }
        if expired_total > 0 {
            log::info!("removed {expired_total} expired offsets");
        }
        expired_total
    }

    /// Kafka's onPartitionsDeleted: a deleted topic's committed offsets are
    /// removed from every group (tombstones written). Returns how many.
    pub fn on_topic_deleted(
        &mut self,
        log: &mut dyn OffsetsLog,
        topic: &str,
        now_ms: i64,
    ) -> usize {
        let gids = self.loaded_group_ids();
        let mut removed = 0;
        for gid in gids {
            let keys: Vec<(String, i32)> = self.groups[&gid]
                .offsets
                .keys()
                .filter(|(t, _)| t == topic)
                .cloned()
                .collect();
            if keys.is_empty() {
                continue;
            }
            removed += keys.len();
            let e = self.write_tombstones(log, &gid, &keys, now_ms);
            if e != errors::NONE {
                log::warn!("removing offsets of deleted topic {topic} from group {gid}: error {e}");
            }
        }
        removed
    }

    /// Applies one `__consumer_offsets` record during replay.
    pub fn load_record(
        &mut self,
        key: &[u8],
        value: Option<&[u8]>,
        now_ms: i64,
    ) -> Result<(), codec::CodecError> {
        match codec::decode_key(key)? {
            RecordKey::Offset {
                group,
                topic,
                partition,
            } => match value {
                None => {
                    if let Some(g) = self.groups.get_mut(&group) {
                        g.offsets.remove(&(topic, partition));
                    }
                }
                Some(v) => {
                    let o = CommittedOffset::from_value(codec::decode_offset_value(v)?);
                    self.groups
                        .entry(group.clone())
                        .or_insert_with(|| Group::new(&group, GroupState::Empty, now_ms))
                        .offsets
                        .insert((topic, partition), o);
                }
            },
            RecordKey::Group { group } => match value {
                None => {
                    if let Some(g) = self.groups.get_mut(&group) {
                        let offsets = std::mem::take(&mut g.offsets);
                        if offsets.is_empty() {
                            self.groups.remove(&group);
                        } else {
                            let mut fresh = Group::new(&group, GroupState::Empty, now_ms);
                            fresh.offsets = offsets;
                            self.groups.insert(group, fresh);
                        }
                    }
                }
                Some(v) => {
                    let gv = codec::decode_group_value(v)?;
                    let g = self
                        .groups
                        .entry(group.clone())
                        .or_insert_with(|| Group::new(&group, GroupState::Empty, now_ms));
                    g.load(gv, now_ms);
                }
            },
            RecordKey::Other(v) => {
                log::debug!("skipping __consumer_offsets record with key version {v}")
            }
        }
        Ok(())
    }
}
