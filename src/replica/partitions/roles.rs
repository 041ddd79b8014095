//! ReplicaManager for cluster mode: becoming leader or follower
//! (LeaderAndIsr), StopReplica, the acks=all checks, and the ISR changes
//! the partitions ask the controller for.

use crate::metadata::metadata_cache::TopicInfo;
use crate::protocol::errors;

use super::{delete_log_queued, LogDirOp, Partitions};
use crate::protocol::errors::ErrorCode;
use crate::replica::parts::{RoleChange, StopReplicaPart};

impl Partitions {
    /// LeaderAndIsr for partitions this shard owns: opens missing logs at
    /// the request's epoch, then makes this broker leader or follower. A
    /// leader epoch older than the partition's is refused
    /// (STALE_CONTROLLER_EPOCH), as Kafka does; the same epoch with the
    /// same role is a resend and changes nothing.
    pub fn become_leader_or_follower(
        &mut self,
        topic: &TopicInfo,
        parts: &[RoleChange],
        broker_id: i32,
        now_ms: i64,
        prepared: &mut super::PreparedLogs,
    ) -> Vec<ErrorCode> {
        let missing: Vec<i32> = parts
            .iter()
            .map(|x| x.partition)
            .filter(|p| self.partition(&topic.name, *p).is_none())
            .collect();
        if let Err(e) = self.open_partitions(topic, &missing, now_ms, prepared) {
            log::error!(
                "opening logs of {} in log dirs {}: {e}",
                topic.name,
                self.log_dirs_display()
            );
            return vec![errors::KAFKA_STORAGE_ERROR; parts.len()];
        }
        let mut codes = Vec::with_capacity(parts.len());
        for rc in parts {
            let Some(partition) = self
                .topics
                .get_mut(&topic.name)
                .and_then(|t| t.get_mut(&rc.partition))
            else {
                codes.push(errors::KAFKA_STORAGE_ERROR);
                continue;
            };
            if partition.log_dir_offline() {
                codes.push(errors::KAFKA_STORAGE_ERROR);
                continue;
            }
            let is_leader = rc.leader == broker_id;
            let fresh = missing.contains(&rc.partition);
            if !fresh && rc.leader_epoch < partition.leader_epoch {
                codes.push(errors::STALE_CONTROLLER_EPOCH);
                continue;
            }
            let resend = !fresh
                && rc.leader_epoch == partition.leader_epoch
                && partition.is_leader == is_leader
                && (!is_leader || partition.leadership.replicated);
            if resend {
                codes.push(errors::NONE);
                continue;
            }
            let r = if is_leader {
                partition
                    .make_leader(
                        broker_id,
                        rc.leader_epoch,
                        &rc.replicas,
                        &rc.isr,
                        rc.partition_epoch,
                        now_ms,
                    )
                    .map(|_| {
                        partition.maybe_increment_high_watermark();
                    })
            } else {
                partition.make_follower(rc.leader_epoch)
            };
            match r {
                Ok(()) => {
                    log::info!(
                        "{}-{}: {} at leader epoch {} (isr {:?})",
                        topic.name,
                        rc.partition,
                        if is_leader { "leader" } else { "follower" },
                        rc.leader_epoch,
                        rc.isr
                    );
                    codes.push(errors::NONE)
                }
                Err(e) => {
                    partition.storage_error("becoming leader or follower", &e);
                    codes.push(errors::KAFKA_STORAGE_ERROR);
                }
            }
        }
        codes
    }

    /// acks=all: NOT_ENOUGH_REPLICAS when the ISR is below the topic's
    /// `min.insync.replicas` before the append.
    pub fn check_enough_replicas(&self, topic: &str, partition: i32) -> Option<ErrorCode> {
        let p = self.partition(topic, partition)?;
        (p.is_leader && (p.isr_len() as i32) < p.config.min_insync_replicas)
            .then_some(errors::NOT_ENOUGH_REPLICAS)
    }

    /// The next offset to assign if the high watermark has not reached it
    /// yet (acks=all waits for it).
    pub fn uncommitted_end(&self, topic: &str, partition: i32) -> Option<i64> {
        let p = self.partition(topic, partition)?;
        let next = p.log.next_offset();
        (p.high_watermark() < next).then_some(next)
    }

    /// The next offset to assign if staged appends are not written yet
    /// (acks=1 in direct mode waits for the log end offset to reach it).
    pub fn unwritten_end(&self, topic: &str, partition: i32) -> Option<i64> {
        let p = self.partition(topic, partition)?;
        p.log.has_staged_writes().then(|| p.log.next_offset())
    }

    /// Whether a produce to the partition must wait for a fence: led here,
    /// with a role change draining its staged appends or its new leader
    /// epoch's checkpoint not yet durable.
    pub fn appends_fenced(&self, topic: &str, partition: i32) -> bool {
        self.partition(topic, partition)
            .is_some_and(|p| p.is_leader && !p.accepts_appends())
    }

    /// Fences (or unfences) produce appends to the partitions `filter`
    /// selects, so their staged appends can drain before a role change.
    pub fn set_appends_fenced(&mut self, filter: impl Fn(&str, i32) -> bool, fenced: bool) {
        for (topic, parts) in self.topics.iter_mut() {
            for (&id, p) in parts.iter_mut() {
                if filter(topic, id) {
                    p.appends_fenced = fenced;
                }
            }
        }
    }

    /// Whether any partition `filter` selects has appends not yet written.
    pub fn any_staged_writes(&self, filter: impl Fn(&str, i32) -> bool) -> bool {
        self.topics.iter().any(|(topic, parts)| {
            parts
                .iter()
                .any(|(&id, p)| p.log.has_staged_writes() && filter(topic, id))
        })
    }

    /// The partitions this shard leads (for the ISR expiration task).
    pub fn has_replicated_leaders(&self) -> bool {
        self.topics
            .values()
            .any(|t| t.values().any(|p| p.is_leader && p.leadership.replicated))
    }

    /// StopReplica: closes the logs (the data stays unless `delete`). A
    /// log is closed, or its directory renamed, off the shard: its code is
    /// known once its `LogDirOp` resolves (listed with the code's index).
    pub fn stop_replicas(
        &mut self,
        topic: &str,
        parts: &[StopReplicaPart],
        delete: bool,
    ) -> (Vec<ErrorCode>, Vec<(usize, LogDirOp)>) {
        let mut codes = Vec::with_capacity(parts.len());
        let mut queued = Vec::new();
        for &StopReplicaPart {
            partition: p,
            leader_epoch: epoch,
        } in parts
        {
            let Some(t) = self.topics.get_mut(topic) else {
                codes.push(errors::NONE);
                continue;
            };
            // -1: no epoch check; -2: deletion, always applies.
            if let Some(partition) = t.get(&p) {
                if epoch >= 0 && epoch < partition.leader_epoch {
                    codes.push(errors::FENCED_LEADER_EPOCH);
                    continue;
                }
            }
            let Some(partition) = t.remove(&p) else {
                codes.push(errors::NONE);
                continue;
            };
            if t.is_empty() {
                self.topics.remove(topic);
            }
            if delete {
                self.cleaner.forget(partition.log.dir());
                self.log_deleted(topic, p);
                queued.push((codes.len(), delete_log_queued(partition.log)));
                codes.push(errors::NONE);
                continue;
            }
            let dir = partition.log.dir().to_path_buf();
            match partition.close() {
                Ok(closed) => {
                    queued.push((codes.len(), closed.closed));
                    codes.push(errors::NONE);
                }
                Err(e) => {
                    log::error!("stopping replica {topic}-{p} in dir {}: {e}", dir.display());
                    codes.push(errors::KAFKA_STORAGE_ERROR);
                }
            }
        }
        (codes, queued)
    }

    /// ISR changes waiting to go to the controller.
    pub fn take_alter_isr_queue(&mut self) -> Vec<crate::replica::partition::leader::AlterIsr> {
        std::mem::take(&mut self.alter_isr_queue)
    }

    /// The periodic isr-expiration check (every `replica.lag.time.max.ms / 2`).
    pub fn maybe_shrink_isr(&mut self, now_ms: i64) {
        let lag_ms = self.replica_lag_time_max_ms;
        for parts in self.topics.values_mut() {
            for p in parts.values_mut() {
                if !p.is_leader {
                    continue;
                }
                if let Some(isr) = p.isr_to_shrink(now_ms, lag_ms) {
                    log::info!(
                        "{}-{}: shrinking ISR {:?} -> {isr:?}",
                        p.topic,
                        p.partition,
                        p.leadership.isr
                    );
                    let change = p.request_isr_change(isr);
                    self.alter_isr_queue.push(change);
                }
            }
        }
    }

    /// The controller answered an ISR change; returns true if the high
    /// watermark moved.
    pub fn apply_isr_change(
        &mut self,
        topic: &str,
        partition: i32,
        leader_epoch: i32,
        isr: Option<(Vec<i32>, i32)>,
    ) -> bool {
        let Some(p) = self
            .topics
            .get_mut(topic)
            .and_then(|t| t.get_mut(&partition))
        else {
            return false;
        };
        p.apply_isr_change(leader_epoch, isr);
        p.is_leader && p.maybe_increment_high_watermark()
    }
}
