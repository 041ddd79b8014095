//! The leader-epoch checkpoint writes that opening logs and becoming
//! leader queued (see `partition::leader_epoch`): taken in one batch per
//! request, their partitions' appends fenced until the batch is durable.

use std::io;

use super::Partitions;
use crate::replica::partition::leader_epoch_writes::QueuedWrite;

/// One request's queued leader-epoch checkpoint writes.
pub struct LeaderEpochSync {
    pub id: u64,
    pub writes: Vec<QueuedWrite>,
}

impl Partitions {
    /// Takes the queued leader-epoch checkpoint writes of `topic`'s
    /// partitions `ids` and fences their appends until
    /// `leader_epochs_synced` with the batch's id; None when nothing is
    /// queued.
    pub fn take_leader_epoch_writes(
        &mut self,
        topic: &str,
        ids: &[i32],
    ) -> Option<LeaderEpochSync> {
        let id = self.next_leader_epoch_sync_id;
        let parts = self.topics.get_mut(topic)?;
        let mut writes = Vec::new();
        for p in ids {
            let Some(partition) = parts.get_mut(p) else {
                continue;
            };
            let queued = partition.leader_epoch_cache.take_queued_writes();
            if !queued.is_empty() {
                partition.leader_epoch_sync_id = Some(id);
                writes.extend(queued);
            }
        }
        if writes.is_empty() {
            return None;
        }
        self.next_leader_epoch_sync_id += 1;
        Some(LeaderEpochSync { id, writes })
    }

    /// Batch `sync_id` is durable: unfences the partitions it fenced that no
    /// later batch fenced again meanwhile.
    pub fn leader_epochs_synced(&mut self, topic: &str, ids: &[i32], sync_id: u64) {
        let Some(parts) = self.topics.get_mut(topic) else {
            return;
        };
        for p in ids {
            if let Some(partition) = parts.get_mut(p) {
                if partition.leader_epoch_sync_id == Some(sync_id) {
                    partition.leader_epoch_sync_id = None;
                }
            }
        }
    }

    /// Start-up, before the shard serves: waits for the opened logs'
    /// checkpoint writes on the spot.
    pub fn sync_leader_epochs_now(&mut self, topic: &str, ids: &[i32]) -> io::Result<()> {
        let Some(batch) = self.take_leader_epoch_writes(topic, ids) else {
            return Ok(());
        };
        for write in batch.writes {
            futures_lite::future::block_on(write).map_err(|_| dropped_write())??;
        }
        self.leader_epochs_synced(topic, ids, batch.id);
        Ok(())
    }
}

/// The writer thread dropped a write's reply: it panicked.
pub fn dropped_write() -> io::Error {
    io::Error::other("the leader-epoch checkpoint writer stopped")
}
