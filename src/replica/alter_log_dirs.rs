//! AlterReplicaLogDirs on a shard (Kafka's `ReplicaManager.alterReplicaLogDirs`
//! and its `ReplicaAlterLogDirsThread`): each future log made here is
//! copied by a task of its own on the partition's shard, a bounded chunk
//! (1 MiB) per step with a yield between steps, paused while the
//! alter-log-dirs quota is exceeded; the swap itself is in
//! `partitions/alter_log_dirs.rs`.

use std::rc::{Rc, Weak};
use std::time::Duration;

use super::partitions::CopyStep;
use super::ReplicaManager;
use crate::protocol::errors::ErrorCode;
use crate::util::now_ms;

/// How long a copy task waits when the current log is busy or it is
/// throttled (Kafka's `replica.fetch.backoff.ms` is 1 s; shorter here
/// keeps a throttle's pauses close to its rate).
const COPY_BACKOFF: Duration = Duration::from_millis(100);

impl ReplicaManager {
    /// AlterReplicaLogDirs for partitions this shard owns: (topic,
    /// partition, target log dir index); one error code each.
    pub fn alter_replica_log_dirs(
        self: &Rc<Self>,
        parts: &[(String, i32, usize)],
    ) -> Vec<ErrorCode> {
        let image = self.metadata.image();
        parts
            .iter()
            .map(|(topic, partition, target)| {
                let known = image
                    .topic(topic)
                    .is_some_and(|t| t.partitions.iter().any(|p| p.partition == *partition));
                let result = self.partitions_mut().alter_log_dir(
                    topic,
                    *partition,
                    *target,
                    known,
                    now_ms() as i64,
                );
                if let Some(id) = result.started {
                    let rm = Rc::downgrade(self);
                    let topic = topic.clone();
                    let partition = *partition;
                    glommio::spawn_local(copy_future_log(rm, topic, partition, id)).detach();
                }
                result.error
            })
            .collect()
    }
}

/// Copies future log `id` of `topic`-`partition` until it is swapped in or
/// gone (cancelled, the partition left, the broker stopping).
async fn copy_future_log(rm: Weak<ReplicaManager>, topic: String, partition: i32, id: u64) {
    loop {
        let Some(manager) = rm.upgrade() else {
            return;
        };
        if manager.is_shutting_down() {
            return;
        }
        let quota = manager.partitions().alter_log_dirs_quota();
        if quota.is_quota_exceeded() {
            drop(manager);
            glommio::timer::sleep(COPY_BACKOFF).await;
            continue;
        }
        let step =
            manager
                .partitions_mut()
                .copy_future_log_step(&topic, partition, id, now_ms() as i64);
        drop(manager);
        match step {
            CopyStep::Gone | CopyStep::Swapped => return,
            CopyStep::Copied(bytes) => {
                quota.record(bytes);
                glommio::yield_if_needed().await;
            }
            CopyStep::Wait => glommio::timer::sleep(COPY_BACKOFF).await,
            CopyStep::Closing(closed) => {
                let result = crate::replica::partitions::log_dir_op_done(closed).await;
                let Some(manager) = rm.upgrade() else {
                    return;
                };
                let step = manager.partitions_mut().finish_future_swap(
                    &topic,
                    partition,
                    id,
                    result,
                    now_ms() as i64,
                );
                if matches!(step, CopyStep::Gone | CopyStep::Swapped) {
                    return;
                }
            }
        }
    }
}
