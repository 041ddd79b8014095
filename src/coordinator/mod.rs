//! The classic-protocol group coordinator (Kafka 3.9's GroupCoordinator,
//! GroupMetadataManager and GroupMetadata; not KIP-848). It runs on the
//! controller shard, which also owns every `__consumer_offsets` partition
//! (see `kshard_shards::placement::shard_for`), so group state and offset
//! commits are appended to the local logs synchronously; the answer waits
//! until the append is replicated (acks=all). The broker coordinates the
//! groups of the `__consumer_offsets` partitions it leads: it loads one on
//! becoming its leader and unloads it on losing it.
//!
//! - `group`: one group's members and state machine.
//! - `group_coordinator`: Sync/Heartbeat/Leave and the delayed
//!   operations (join, heartbeat, pending member, pending sync);
//!   `join`: JoinGroup.
//! - `offsets`: OffsetCommit/Fetch/Delete, DeleteGroups, expiry, replay.
//! - `loading`: loading and unloading a partition's groups with its leadership.
//! - `offsets_codec`: the `__consumer_offsets` key/value schemas.
//! - `runtime`: glue to the shard (log appends, start-up load, ticker).

pub mod group;
pub mod group_coordinator;
mod join;
mod loading;
pub mod log_replay;
pub mod offsets;
pub mod offsets_codec;
pub mod runtime;
pub mod transaction;
pub mod txn_offsets;

pub use group_coordinator::{CoordinatorConfig, GroupCoordinator};

use crate::protocol::errors::ErrorCode;
use crate::util::java_string_hash;

pub const OFFSETS_TOPIC: &str = kshard_shards::placement::OFFSETS_TOPIC;

/// Kafka's `partitionFor`: `Utils.abs(groupId.hashCode) % partitions`, where
/// `Utils.abs(Integer.MIN_VALUE)` is 0.
pub fn partition_for(group_id: &str, num_partitions: i32) -> i32 {
    assert!(num_partitions > 0);
    let h = java_string_hash(group_id);
    let abs = if h == i32::MIN { 0 } else { h.abs() };
    abs % num_partitions
}

/// Where an append to `__consumer_offsets` must be replicated before it is
/// answered (offsets.commit.required.acks=-1): the high watermark of
/// `partition` must reach `end_offset`, the offset after the batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplicationPoint {
    pub partition: i32,
    pub end_offset: i64,
}

/// Where the coordinator appends its records: the `__consumer_offsets`
/// partition's log on this shard (an in-memory log in tests).
pub trait OffsetsLog {
    /// Appends one v2 batch to `partition`, which this broker leads in
    /// `leader_epoch` (the coordinator epoch; a stale one is refused).
    /// Ok: the offset after the batch; Err: a Kafka error code.
    fn append(
        &mut self,
        partition: i32,
        leader_epoch: i32,
        batch: Vec<u8>,
    ) -> Result<i64, ErrorCode>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_for_matches_kafka() {
        // "polygenelubricants".hashCode() is i32::MIN, whose Utils.abs is 0.
        assert_eq!(partition_for("polygenelubricants", 50), 0);
        assert_eq!(partition_for("hello", 50), 99162322 % 50);
    }
}
