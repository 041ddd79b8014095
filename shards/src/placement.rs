//! Which shard owns a partition. Deterministic from topic and partition, so
//! every shard computes the same answer without asking anyone: partitions of
//! one topic go round-robin over the shards from a per-topic start.

/// 32-bit FNV-1a: stable across builds and platforms (unlike std's hasher).
fn fnv1a(bytes: &[u8]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for &b in bytes {
        h ^= b as u32;
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

/// Kafka's internal offsets topic. All its partitions live on shard 0, where
/// the group coordinator runs, so it appends and replays them locally.
pub const OFFSETS_TOPIC: &str = "__consumer_offsets";
/// Kafka's transaction log: on shard 0 too, for the transaction coordinator.
pub const TRANSACTION_STATE_TOPIC: &str = "__transaction_state";

/// The one placement rule: every caller (request routing, log opening, the
/// start-up checkpoint split) goes through here. A request may name a
/// negative partition: it maps to some shard, which finds no such partition
/// and answers UNKNOWN_TOPIC_OR_PARTITION.
#[inline]
pub fn shard_for(topic: &str, partition: i32, nr_shards: usize) -> usize {
    debug_assert!(nr_shards >= 1);
    if topic == OFFSETS_TOPIC || topic == TRANSACTION_STATE_TOPIC {
        return 0;
    }
    let start = fnv1a(topic.as_bytes()) as u64;
    (start.wrapping_add(partition as u64) % nr_shards as u64) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spreads_partitions_round_robin() {
        let n = 4;
        let owners: Vec<usize> = (0..8).map(|p| shard_for("orders", p, n)).collect();
        for p in 0..8 {
            assert_eq!(owners[p], (owners[0] + p) % n);
        }
        assert_eq!(shard_for("x", 3, 1), 0);
        // Negative partitions (from requests) map somewhere, no overflow.
        assert_eq!(shard_for("orders", -1, n), (owners[0] + n - 1) % n);
        assert!(shard_for("orders", i32::MIN, n) < n);
        for p in 0..50 {
            assert_eq!(shard_for(OFFSETS_TOPIC, p, 4), 0);
            assert_eq!(shard_for(TRANSACTION_STATE_TOPIC, p, 4), 0);
        }
    }
}
