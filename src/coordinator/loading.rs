//! Coordinator hand-over with `__consumer_offsets` leadership, as Kafka's
//! GroupCoordinator.onElection/onResignation and GroupMetadataManager's
//! scheduleLoadGroupAndOffsets / removeGroupsForPartition: a partition's
//! groups are loaded when this broker becomes its leader (the runtime
//! replays the log into `load_record`) and unloaded when it stops leading.

use super::group::{JoinResult, SyncResult};
use super::group_coordinator::{GroupCoordinator, OffsetsPartition, TimerKey};
use crate::protocol::errors;

impl GroupCoordinator {
    /// onElection: starts loading `partition` led in `leader_epoch`; returns
    /// the load's id. None when there is nothing to load: it is already
    /// owned or loading (the epoch is brought up to date).
    pub fn begin_loading(&mut self, partition: i32, leader_epoch: i32) -> Option<u64> {
        assert!(partition >= 0 && partition < self.config.num_partitions);
        if let Some(p) = self.partitions.get_mut(&partition) {
            p.leader_epoch = p.leader_epoch.max(leader_epoch);
            return None;
        }
        self.next_load_id += 1;
        self.partitions.insert(
            partition,
            OffsetsPartition {
                leader_epoch,
                loading: true,
                load_id: self.next_load_id,
            },
        );
        Some(self.next_load_id)
    }

    /// Whether the load `load_id` of `partition` is still wanted (a replay
    /// stops once the partition is unloaded, or loaded by a later election).
    pub fn is_loading_for(&self, partition: i32, load_id: u64) -> bool {
        self.partitions
            .get(&partition)
            .is_some_and(|p| p.loading && p.load_id == load_id)
    }

    /// Ends loading `partition`: its loaded members must heartbeat within
    /// their session timeout.
    pub fn finish_loading(&mut self, partition: i32, now_ms: i64) {
        let Some(p) = self.partitions.get_mut(&partition) else {
            return;
        };
        assert!(p.loading, "{partition} finished loading twice");
        p.loading = false;
        let members: Vec<(String, String, i64)> = self
            .groups
            .values()
            .filter(|g| self.partition_of(&g.group_id) == partition)
            .flat_map(|g| {
                g.members.values().map(|m| {
                    (
                        g.group_id.clone(),
                        m.member_id.clone(),
                        m.session_timeout_ms as i64,
                    )
                })
            })
            .collect();
        for (gid, mid, timeout) in members {
            self.schedule_heartbeat(&gid, &mid, timeout, now_ms);
        }
    }

    /// onResignation: this broker no longer leads `partition` (a follower
    /// now, or the replica stopped). Its groups are dropped; members waiting
    /// in JoinGroup or SyncGroup get NOT_COORDINATOR and look the
    /// coordinator up again. `leader_epoch`: None from StopReplica; a
    /// resignation older than the election it would undo is ignored.
    /// Returns how many groups were unloaded; None when it did not
    /// coordinate the partition (or the resignation is stale).
    pub fn unload(&mut self, partition: i32, leader_epoch: Option<i32>) -> Option<usize> {
        match (self.partitions.get(&partition), leader_epoch) {
            (None, _) => return None,
            (Some(p), Some(e)) if e < p.leader_epoch => return None,
            _ => {}
        }
        self.partitions.remove(&partition);
        let gids: Vec<String> = self
            .groups
            .keys()
            .filter(|gid| self.partition_of(gid) == partition)
            .cloned()
            .collect();
        for gid in &gids {
            let mut g = self.groups.remove(gid).expect("group");
            for m in g.members.values_mut() {
                if let Some(tx) = m.join_waiter.take() {
                    tx.send(JoinResult::error(&m.member_id, errors::NOT_COORDINATOR));
                }
                if let Some(tx) = m.sync_waiter.take() {
                    tx.send(SyncResult::error(errors::NOT_COORDINATOR));
                }
                self.disarm(&TimerKey::Member(gid.clone(), m.member_id.clone()));
            }
            for id in &g.pending_members {
                self.disarm(&TimerKey::Member(gid.clone(), id.clone()));
            }
            self.disarm(&TimerKey::Join(gid.clone()));
            self.disarm(&TimerKey::Sync(gid.clone()));
        }
        Some(gids.len())
    }
}
