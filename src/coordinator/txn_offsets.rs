//! Transactional offset commits (Kafka's TxnOffsetCommit path through the
//! GroupCoordinator and GroupMetadataManager): the offsets are written to
//! `__consumer_offsets` in a transactional batch of the producer, held as
//! the group's pending transactional offsets, and become its committed
//! offsets when the transaction's commit marker is written to the
//! partition (dropped on abort). Replay does the same from the log.

use kshard_shards::log::batch::BatchHeader;
use kshard_shards::log::records::BatchBuilder;

use super::group::{CommittedOffset, Group, GroupState};
use super::group_coordinator::{GroupCoordinator, OFFSET_METADATA_MAX_BYTES};
use super::offsets::{map_store_error, CommitPart};
use super::offsets_codec::{self as codec, RecordKey};
use super::{OffsetsLog, ReplicationPoint};
use crate::protocol::errors;
use crate::protocol::errors::ErrorCode;

/// A TxnOffsetCommit as the coordinator needs it.
pub struct TxnOffsetCommit<'a> {
    pub group_id: &'a str,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub generation_id: i32,
    pub member_id: &'a str,
    pub instance_id: Option<&'a str>,
    pub parts: &'a [CommitPart],
}

/// What TxnOffsetCommit answers, and the append to wait for.
pub struct TxnCommitOutcome {
    pub results: Vec<ErrorCode>,
    pub stored: Option<ReplicationPoint>,
    pub group_id: String,
    pub producer_id: i64,
}

impl GroupCoordinator {
    /// Kafka's handleTxnCommitOffsets: validates, appends the offsets in a
    /// transactional batch and holds them pending for the producer.
    pub fn txn_commit_offsets(
        &mut self,
        log: &mut dyn OffsetsLog,
        commit: &TxnOffsetCommit,
        now_ms: i64,
    ) -> TxnCommitOutcome {
        let gid = commit.group_id;
        let mut outcome = TxnCommitOutcome {
            results: vec![errors::NONE; commit.parts.len()],
            stored: None,
            group_id: gid.to_string(),
            producer_id: commit.producer_id,
        };
        let fail = |mut o: TxnCommitOutcome, e: ErrorCode| {
            o.results.iter_mut().for_each(|r| *r = e);
            o
        };
        if let Some(e) = self.validate_group_status(gid, true) {
            return fail(outcome, e);
        }
        let g = self
            .groups
            .entry(gid.to_string())
            .or_insert_with(|| Group::new(gid, GroupState::Empty, now_ms));
        let e = Self::validate_offset_commit(
            g,
            commit.generation_id,
            commit.member_id,
            commit.instance_id,
            true,
        );
        if !e.is_none() {
            return fail(outcome, e);
        }
        let mut builder = BatchBuilder::new(0)
            .producer(commit.producer_id, commit.producer_epoch, 0)
            .transactional(true);
        let mut accepted = Vec::with_capacity(commit.parts.len());
        for (p, result) in commit.parts.iter().zip(outcome.results.iter_mut()) {
            let metadata = p.metadata.clone().unwrap_or_default();
            if metadata.len() > OFFSET_METADATA_MAX_BYTES {
                *result = errors::OFFSET_METADATA_TOO_LARGE;
                continue;
            }
            let committed = CommittedOffset {
                offset: p.offset,
                leader_epoch: p.leader_epoch,
                metadata,
                commit_timestamp_ms: now_ms,
                expire_timestamp_ms: None,
                appended_end_offset: -1,
            };
            let key = codec::encode_offset_key(gid, &p.topic, p.partition);
            let value = codec::encode_offset_value(&committed.to_value());
            builder.push(now_ms, Some(&key), Some(&value), &[]);
            accepted.push(((p.topic.clone(), p.partition), committed));
        }
        if accepted.is_empty() {
            return outcome;
        }
        let stored = match self.append_for_group(log, gid, builder.build()) {
            Ok(stored) => stored,
            Err(e) => {
                let e = map_store_error(e, true);
                for r in outcome.results.iter_mut().filter(|r| r.is_none()) {
                    *r = e;
                }
                return outcome;
            }
        };
        let g = self.groups.get_mut(gid).expect("group");
        let pending = g.pending_txn_offsets.entry(commit.producer_id).or_default();
        for (key, mut o) in accepted {
            o.appended_end_offset = stored.end_offset;
            pending.insert(key, o);
        }
        self.open_groups_for_producer
            .entry(commit.producer_id)
            .or_default()
            .insert(gid.to_string());
        outcome.stored = Some(stored);
        outcome
    }

    /// The append of a TxnOffsetCommit failed (Kafka's
    /// failPendingTxnOffsetCommit): its offsets are no longer pending.
    pub fn fail_txn_commit(&mut self, outcome: &TxnCommitOutcome) {
        let Some(stored) = outcome.stored else {
            return;
        };
        if let Some(g) = self.groups.get_mut(&outcome.group_id) {
            if let Some(pending) = g.pending_txn_offsets.get_mut(&outcome.producer_id) {
                pending.retain(|_, o| o.appended_end_offset != stored.end_offset);
                if pending.is_empty() {
                    g.pending_txn_offsets.remove(&outcome.producer_id);
                }
            }
        }
    }

    /// A transaction marker of `producer_id` was written to `partition`
    /// (Kafka's handleTxnCompletion): its pending offsets in the groups of
    /// that partition become committed, or are dropped.
    pub fn complete_txn_offsets(&mut self, partition: i32, producer_id: i64, is_commit: bool) {
        let Some(group_ids) = self.open_groups_for_producer.remove(&producer_id) else {
            return;
        };
        let mut still_open = Vec::new();
        for gid in group_ids {
            if self.partition_of(&gid) != partition {
                still_open.push(gid);
                continue;
            }
            if let Some(g) = self.groups.get_mut(&gid) {
                complete_pending(g, producer_id, is_commit);
            }
        }
        if !still_open.is_empty() {
            self.open_groups_for_producer
                .insert(producer_id, still_open.into_iter().collect());
        }
    }

    /// Whether OffsetFetch with require_stable must answer
    /// UNSTABLE_OFFSET_COMMIT for this partition.
    pub fn has_pending_txn_offset(&self, gid: &str, topic: &str, partition: i32) -> bool {
        self.groups.get(gid).is_some_and(|g| {
            let key = (topic.to_string(), partition);
            g.pending_txn_offsets.values().any(|p| p.contains_key(&key))
        })
    }

    /// Replays one offset record of a transactional batch: pending for its
    /// producer until the batch's marker is replayed.
    pub fn load_txn_record(
        &mut self,
        header: &BatchHeader,
        key: &[u8],
        value: Option<&[u8]>,
        now_ms: i64,
    ) -> Result<(), codec::CodecError> {
        let RecordKey::Offset {
            group,
            topic,
            partition,
        } = codec::decode_key(key)?
        else {
            // Only offsets are written transactionally.
            return self.load_record(key, value, now_ms);
        };
        let Some(v) = value else {
            return Ok(());
        };
        let mut o = CommittedOffset::from_value(codec::decode_offset_value(v)?);
        o.appended_end_offset = header.last_offset() + 1;
        self.groups
            .entry(group.clone())
            .or_insert_with(|| Group::new(&group, GroupState::Empty, now_ms))
            .pending_txn_offsets
            .entry(header.producer_id)
            .or_default()
            .insert((topic, partition), o);
        self.open_groups_for_producer
            .entry(header.producer_id)
            .or_default()
            .insert(group);
        Ok(())
    }
}

/// Kafka's completePendingTxnOffsetCommit for one group.
fn complete_pending(g: &mut Group, producer_id: i64, is_commit: bool) {
    let Some(pending) = g.pending_txn_offsets.remove(&producer_id) else {
        return;
    };
    if !is_commit {
        return;
    }
    for (key, o) in pending {
        let newer = g
            .offsets
            .get(&key)
            .is_some_and(|c| c.appended_end_offset > o.appended_end_offset);
        if !newer {
            g.offsets.insert(key, o);
        }
    }
}
