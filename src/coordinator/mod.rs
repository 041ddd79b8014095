//! The classic-protocol group coordinator (Kafka 3.9's GroupCoordinator,
//! GroupMetadataManager and GroupMetadata; not KIP-848). It runs on the
//! controller shard, which also owns every `__consumer_offsets` partition
//! (see `kshard_shards::placement::shard_for`), so group state and offset
//! commits are appended locally and synchronously, then answered.
//!
//! - `group`: one group's members and state machine.
//! - `group_coordinator`: Sync/Heartbeat/Leave and the delayed
//!   operations (join, heartbeat, pending member, pending sync);
//!   `join`: JoinGroup.
//! - `offsets`: OffsetCommit/Fetch/Delete, DeleteGroups, expiry, replay.
//! - `offsets_codec`: the `__consumer_offsets` key/value schemas.
//! - `runtime`: glue to the shard (log appends, start-up load, ticker).

pub mod group;
pub mod group_coordinator;
mod join;
pub mod offsets;
pub mod offsets_codec;
pub mod runtime;

pub use group_coordinator::{CoordinatorConfig, GroupCoordinator};

pub const OFFSETS_TOPIC: &str = kshard_shards::placement::OFFSETS_TOPIC;

/// Java's `String.hashCode` over UTF-16 code units.
pub fn java_string_hash(s: &str) -> i32 {
    let mut h: i32 = 0;
    for unit in s.encode_utf16() {
        h = h.wrapping_mul(31).wrapping_add(unit as i32);
    }
    h
}

/// Kafka's `partitionFor`: `Utils.abs(groupId.hashCode) % partitions`, where
/// `Utils.abs(Integer.MIN_VALUE)` is 0.
pub fn partition_for(group_id: &str, num_partitions: i32) -> i32 {
    assert!(num_partitions > 0);
    let h = java_string_hash(group_id);
    let abs = if h == i32::MIN { 0 } else { h.abs() };
    abs % num_partitions
}

/// Where the coordinator appends its records: the `__consumer_offsets`
/// partition's log on this shard (a fake in tests).
pub trait OffsetsLog {
    /// Appends one v2 batch; returns a Kafka error code (0: appended).
    fn append(&mut self, partition: i32, batch: Vec<u8>) -> i16;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_hash_matches_known_values() {
        assert_eq!(java_string_hash(""), 0);
        assert_eq!(java_string_hash("a"), 97);
        // "hello".hashCode() == 99162322
        assert_eq!(java_string_hash("hello"), 99162322);
        assert_eq!(java_string_hash("polygenelubricants"), i32::MIN);
        assert_eq!(partition_for("polygenelubricants", 50), 0);
        assert_eq!(partition_for("hello", 50), 99162322 % 50);
        // Non-BMP characters count as two UTF-16 units.
        assert_eq!(java_string_hash("\u{1F600}"), 0xD83D * 31 + 0xDE00);
    }
}
