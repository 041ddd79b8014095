//! The shard's periodic work over its partitions (Kafka's `kafka-log-retention`
//! and `kafka-log-flusher` scheduler tasks, and the start of rolled
//! segments' fsyncs): time-based flush, retention, and roll syncs, every
//! maintenance tick. A round covers the partitions there were when it
//! began, a chunk at a time, the shard yielding between chunks: one pass
//! over every partition in a row held a shard 19 ms with 1,100 partitions
//! (`perf/stalls.sh`, tuning.md), and grows with the partition count.

use kshard_shards::log::RollSyncJob;

use super::{Partition, Partitions};
use crate::replica::log_dirs::LogDirs;

/// Partitions one `Partitions::maintain_some` call looks at: each takes a
/// few µs (a flush and retention check, the roll syncs taken), so a chunk
/// stays well under a millisecond.
const MAINTENANCE_CHUNK: usize = 256;

/// A rolled segment's fsync to start, and the log it belongs to.
pub struct RollSync {
    pub topic: String,
    pub partition: i32,
    pub log_id: u64,
    pub job: RollSyncJob,
}

/// One round of periodic work over the partitions there were when it
/// began (`Partitions::maintenance_round`).
pub struct MaintenanceRound {
    now_ms: i64,
    run_retention: bool,
    topics: Vec<String>,
    /// (index into `topics`, partition).
    partitions: Vec<(u32, i32)>,
    next: usize,
}

impl MaintenanceRound {
    pub fn is_done(&self) -> bool {
        self.next == self.partitions.len()
    }
}

impl Partitions {
    /// A round of the periodic work over every partition, done in chunks
    /// by [`Partitions::maintain_some`].
    pub fn maintenance_round(&self, now_ms: i64, run_retention: bool) -> MaintenanceRound {
        let topics: Vec<String> = self.topics.keys().cloned().collect();
        let partitions = self
            .topics
            .iter()
            .enumerate()
            .flat_map(|(i, (_, parts))| parts.keys().map(move |&p| (i as u32, p)))
            .collect();
        MaintenanceRound {
            now_ms,
            run_retention,
            topics,
            partitions,
            next: 0,
        }
    }

    /// The round's next `MAINTENANCE_CHUNK` partitions: time-based flush,
    /// retention, and the rolled segments not yet being fsynced (with the
    /// log they belong to, for `ReplicaManager::start_roll_syncs`). One
    /// pass over 10,000 partitions would hold the shard for tens of ms, so
    /// the caller yields between chunks. A partition deleted meanwhile is
    /// skipped; one created meanwhile waits for the next round.
    pub fn maintain_some(&mut self, round: &mut MaintenanceRound) -> Vec<RollSync> {
        let end = (round.next + MAINTENANCE_CHUNK).min(round.partitions.len());
        let mut roll_syncs = Vec::new();
        for &(topic_index, partition) in &round.partitions[round.next..end] {
            let topic = &round.topics[topic_index as usize];
            let Some(p) = self
                .topics
                .get_mut(topic.as_str())
                .and_then(|parts| parts.get_mut(&partition))
            else {
                continue;
            };
            for job in p.log.take_roll_syncs() {
                roll_syncs.push(RollSync {
                    topic: p.topic.clone(),
                    partition: p.partition,
                    log_id: p.log.log_id(),
                    job,
                });
            }
            if !p.log_dir_offline() {
                Self::maintain(&self.log_dirs, p, round.now_ms, round.run_retention);
            }
        }
        round.next = end;
        roll_syncs
    }

    /// Time-based flush and retention of one partition.
    fn maintain(log_dirs: &LogDirs, p: &mut Partition, now_ms: i64, run_retention: bool) {
        if let Err(e) = p.log.maybe_flush(now_ms) {
            log::error!("flush {}-{}: {e}", p.topic, p.partition);
            log_dirs.mark_offline(
                p.log_dir_index,
                &format!("flushing {}-{}: {e}", p.topic, p.partition),
            );
            return;
        }
        if !run_retention {
            return;
        }
        match p.log.delete_old_segments(now_ms) {
            Ok(0) => {}
            Ok(bytes) => {
                let start = p.log.log_start_offset();
                p.producer_state.on_log_start_offset_incremented(start);
                log::info!(
                    "retention removed {bytes} bytes from {}-{}",
                    p.topic,
                    p.partition
                )
            }
            Err(e) => {
                log::error!("retention {}-{}: {e}", p.topic, p.partition);
                log_dirs.mark_offline(
                    p.log_dir_index,
                    &format!("deleting old segments of {}-{}: {e}", p.topic, p.partition),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use kshard_shards::log::config::IoMode;

    use super::*;
    use crate::replica::partition::follower::test_support::{temp_dir, topic_t};

    const NOW_MS: i64 = 1_700_000_000_000;

    #[test]
    fn a_round_goes_a_chunk_at_a_time_over_the_partitions_it_began_with() {
        let root = temp_dir("maintenance");
        let (log_dirs, _) = LogDirs::load(std::slice::from_ref(&root)).unwrap();
        let mut parts = Partitions::new(
            Arc::new(log_dirs),
            Default::default(),
            86_400_000,
            IoMode::Buffered,
        );
        let topic = topic_t();
        let first: Vec<i32> = (0..300).collect();
        parts
            .open_partitions(&topic, &first, NOW_MS, &mut Default::default())
            .unwrap();
        let mut round = parts.maintenance_round(NOW_MS, true);
        assert_eq!(round.partitions.len(), 300);
        assert!(parts.maintain_some(&mut round).is_empty(), "nothing rolled");
        assert_eq!(round.next, MAINTENANCE_CHUNK);
        assert!(!round.is_done());
        // Between chunks the partitions go and others come: the rest of the
        // round skips the gone ones and leaves the new ones to the next.
        drop(parts.delete_topic("t"));
        let second: Vec<i32> = (300..310).collect();
        parts
            .open_partitions(&topic, &second, NOW_MS, &mut Default::default())
            .unwrap();
        assert!(parts.maintain_some(&mut round).is_empty());
        assert!(round.is_done());
        assert_eq!(parts.maintenance_round(NOW_MS, false).partitions.len(), 10);
        let _ = std::fs::remove_dir_all(&root);
    }
}
