//! AlterReplicaLogDirs on the partition's owning shard (Kafka's
//! `ReplicaManager.alterReplicaLogDirs`, `LogManager.getOrCreateLog(isFuture)`,
//! `ReplicaAlterLogDirsThread` and `replaceCurrentWithFutureLog`):
//!
//! - A replica not hosted here has its target remembered (Kafka's
//!   `maybeUpdatePreferredLogDir`) and placed there when its log is made.
//! - Moving to the dir the log is in cancels any move in progress.
//! - Otherwise a future log is made in the target dir (counted there), and
//!   the shard's copy task (`ReplicaManager::copy_future_log`) appends the
//!   current log's batches to it as they are (offsets, leader epochs), in
//!   bounded chunks, throttled by `replica.alter.log.dirs.io.max.bytes.per.second`.
//! - Caught up, the future log's close (fsyncs) runs on the `log-dirs`
//!   thread; then, synchronously on the shard (so no append lands in
//!   between), if the current log did not move meanwhile: the future dir
//!   is renamed to the partition's dir name in the target dir and opened
//!   (its recovery point is its end: nothing is scanned), it replaces the
//!   partition's log, the producer state and leader-epoch cache (the same
//!   batches, so the same state) are kept and write to the new dir from
//!   then on, the high watermark and log start offset are kept, and the old
//!   log is deleted (renamed `-delete`, unlinked off the shard). If the
//!   current log moved, the future log is reopened and the copy goes on.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use kshard_shards::log::{read_slice_bytes, Log, ReadError};

use super::{delete_log_queued, LogDirOp, Partitions};
use crate::protocol::errors;
use crate::protocol::errors::ErrorCode;
use crate::replica::future_log::{append_info_of, future_dir_name, FutureLog};
use crate::replica::partition::log_config_of;
use crate::replica::parts::{LogDirPartition, LogDirTopic};
use crate::replica::quota::{ReplicaQuota, UnboundedQuota};

/// The most bytes one copy step reads from the current log.
pub const COPY_CHUNK_BYTES: u32 = 1024 * 1024;

#[derive(Default)]
pub struct AlterLogDirsState {
    futures: HashMap<(String, i32), FutureLog>,
    /// Kafka's `preferredLogDirs`: targets of replicas not hosted yet.
    preferred: HashMap<(String, i32), usize>,
    next_id: u64,
    /// Kafka's QuotaManagers.alterLogDirs (unbounded until set).
    quota: Option<Arc<dyn ReplicaQuota>>,
}

/// What one partition's AlterReplicaLogDirs did here.
#[derive(Debug, PartialEq)]
pub struct AlterLogDirResult {
    pub error: ErrorCode,
    /// A future log was made: the shard starts its copy task with this id.
    pub started: Option<u64>,
}

/// One step of a future log's copy.
#[derive(Debug)]
pub enum CopyStep {
    /// The future log (this id) is gone: cancelled, replaced, or its
    /// partition left this shard (the task ends).
    Gone,
    /// Bytes were copied (count them against the throttle).
    Copied(u64),
    /// The future log has caught up: its close is queued; call
    /// `finish_future_swap` once `LogDirOp` resolves.
    Closing(LogDirOp),
    /// Nothing to do now (the current log is busy, e.g. direct-mode
    /// appends in flight): try again shortly.
    Wait,
    /// The swap happened.
    Swapped,
}

impl PartialEq for CopyStep {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (CopyStep::Gone, CopyStep::Gone)
            | (CopyStep::Wait, CopyStep::Wait)
            | (CopyStep::Swapped, CopyStep::Swapped) => true,
            (CopyStep::Copied(a), CopyStep::Copied(b)) => a == b,
            _ => false,
        }
    }
}

impl Partitions {
    /// `replica.alter.log.dirs.io.max.bytes.per.second`'s quota.
    pub fn set_alter_log_dirs_quota(&mut self, quota: Arc<dyn ReplicaQuota>) {
        self.alter_log_dirs.quota = Some(quota);
    }

    /// The quota the copy tasks check and record against.
    pub fn alter_log_dirs_quota(&self) -> Arc<dyn ReplicaQuota> {
        self.alter_log_dirs
            .quota
            .clone()
            .unwrap_or_else(|| Arc::new(UnboundedQuota))
    }

    /// The dir AlterReplicaLogDirs named for a replica before it existed.
    pub(super) fn take_preferred_log_dir(&mut self, topic: &str, partition: i32) -> Option<usize> {
        if self.alter_log_dirs.preferred.is_empty() {
            return None;
        }
        self.alter_log_dirs
            .preferred
            .remove(&(topic.to_string(), partition))
    }

    /// AlterReplicaLogDirs for one partition owned by this shard, to the
    /// log dir at `target`; `known` says whether the metadata has the
    /// partition (answers REPLICA_NOT_AVAILABLE, else
    /// UNKNOWN_TOPIC_OR_PARTITION, when it is not hosted here).
    pub fn alter_log_dir(
        &mut self,
        topic: &str,
        partition: i32,
        target: usize,
        known: bool,
        now_ms: i64,
    ) -> AlterLogDirResult {
        let key = (topic.to_string(), partition);
        let answer = |error| AlterLogDirResult {
            error,
            started: None,
        };
        // Kafka checks the destination first, then the replica's own dir.
        if self.log_dirs.is_offline(target) {
            return answer(errors::KAFKA_STORAGE_ERROR);
        }
        let Some(p) = self.partition(topic, partition) else {
            self.alter_log_dirs.preferred.insert(key, target);
            return answer(if known {
                errors::REPLICA_NOT_AVAILABLE
            } else {
                errors::UNKNOWN_TOPIC_OR_PARTITION
            });
        };
        if p.log_dir_offline() {
            return answer(errors::KAFKA_STORAGE_ERROR);
        }
        let lso = p.log.log_start_offset();
        let config = p.log.config().clone();
        let current = self.log_dir_index(topic, partition);
        if let Some(f) = self.alter_log_dirs.futures.get(&key) {
            if f.log_dir_index == target {
                return answer(errors::NONE);
            }
        }
        self.discard_future_log(topic, partition);
        if current == target {
            return answer(errors::NONE);
        }
        let dir = self.log_dirs.path(target).join(future_dir_name(
            topic,
            partition,
            uuid::Uuid::new_v4(),
        ));
        let log = match Log::open(&dir, config, lso, lso, now_ms) {
            Ok((log, _)) => log,
            Err(e) => {
                log::error!("creating future log {}: {e}", dir.display());
                let _ = std::fs::remove_dir_all(&dir);
                return answer(errors::KAFKA_STORAGE_ERROR);
            }
        };
        self.log_dirs.log_added(target);
        self.alter_log_dirs.next_id += 1;
        let id = self.alter_log_dirs.next_id;
        log::info!(
            "{topic}-{partition}: moving from {} to {} (future log {})",
            self.log_dirs.path(current).display(),
            self.log_dirs.path(target).display(),
            dir.display()
        );
        self.alter_log_dirs.futures.insert(
            key,
            FutureLog {
                log: Some(log),
                log_dir_index: target,
                dir,
                id,
                last_copied_epoch: -1,
                closed_at: None,
            },
        );
        AlterLogDirResult {
            error: errors::NONE,
            started: Some(id),
        }
    }

    /// Drops `topic`-`partition`'s future log, if any: its directory is
    /// renamed `-delete` and unlinked off the shard.
    fn discard_future_log(&mut self, topic: &str, partition: i32) {
        let Some(f) = self
            .alter_log_dirs
            .futures
            .remove(&(topic.to_string(), partition))
        else {
            return;
        };
        self.log_dirs.log_deleted(f.log_dir_index);
        log::info!(
            "{topic}-{partition}: future log {} discarded",
            f.dir.display()
        );
        match f.log {
            Some(log) => drop(delete_log_queued(log)),
            // Being closed: the close job runs first, in order.
            None => {
                let dir = f.dir.clone();
                kshard_shards::log::log_create::LOG_DIRS.push(move || {
                    if let Err(e) = kshard_shards::log::log_deleter::delete_log_dir(&dir) {
                        log::error!("deleting {}: {e}", dir.display());
                    }
                });
            }
        }
    }

    /// One bounded copy step of future log `id` (see `CopyStep`).
    pub fn copy_future_log_step(
        &mut self,
        topic: &str,
        partition: i32,
        id: u64,
        now_ms: i64,
    ) -> CopyStep {
        let key = (topic.to_string(), partition);
        match self.alter_log_dirs.futures.get(&key) {
            Some(f) if f.id == id && f.log.is_some() => {}
            _ => return CopyStep::Gone,
        }
        if self.partition(topic, partition).is_none() {
            // StopReplica or topic deletion took the partition.
            self.discard_future_log(topic, partition);
            return CopyStep::Gone;
        }
        let p = self
            .topics
            .get(topic)
            .and_then(|t| t.get(&partition))
            .unwrap();
        let f = self.alter_log_dirs.futures.get_mut(&key).unwrap();
        let future = f.log.as_mut().unwrap();
        let (cur_start, cur_end) = (p.log.log_start_offset(), p.log.log_end_offset());
        let mut fut_end = future.log_end_offset();
        // The current log was truncated (a follower's divergence: Kafka's
        // alter-log-dirs thread asks the current log's epoch cache for the
        // end of the future log's last epoch) or lost its start
        // (retention): copy on from where the two agree.
        let mut agreed = cur_end;
        if f.last_copied_epoch >= 0 {
            let (_, end) = p
                .leader_epoch_cache
                .end_offset_for(f.last_copied_epoch, cur_end);
            if end >= 0 {
                agreed = agreed.min(end);
            }
        }
        if fut_end > agreed || fut_end < cur_start {
            let restart = if fut_end < cur_start || agreed < future.log_start_offset() {
                future.truncate_fully_and_start_at(cur_start)
            } else {
                future.truncate_to(agreed)
            };
            if let Err(e) = restart {
                log::error!("{topic}-{partition}: future log truncation: {e}");
                self.discard_future_log(topic, partition);
                return CopyStep::Gone;
            }
            f.last_copied_epoch = -1;
            fut_end = future.log_end_offset();
        }
        if fut_end == cur_end {
            if p.log.has_staged_writes() || p.appends_fenced {
                return CopyStep::Wait;
            }
            let future = f.log.take().unwrap();
            f.closed_at = Some(fut_end);
            let (done, closed) = futures_channel::oneshot::channel();
            if let Err(e) = future.close_queued(move |r| {
                let _ = done.send(r);
            }) {
                log::error!("{topic}-{partition}: closing future log: {e}");
                self.discard_future_log(topic, partition);
                return CopyStep::Gone;
            }
            return CopyStep::Closing(closed);
        }
        let read = match p.log.read(fut_end, COPY_CHUNK_BYTES, cur_end, true) {
            Ok(read) => read,
            Err(ReadError::OffsetOutOfRange { .. }) => return CopyStep::Wait,
            Err(ReadError::Io(e)) => {
                log::error!("{topic}-{partition}: reading for the future log: {e}");
                return CopyStep::Wait;
            }
        };
        let Some(slice) = read.slice else {
            return CopyStep::Wait;
        };
        let bytes = match read_slice_bytes(&slice) {
            Ok(b) => b,
            Err(e) => {
                log::error!("{topic}-{partition}: reading for the future log: {e}");
                return CopyStep::Wait;
            }
        };
        let Some((info, last_epoch)) = append_info_of(&bytes) else {
            return CopyStep::Wait;
        };
        let copied = &bytes[..info.valid_bytes];
        if let Err(e) = future.append_as_follower(copied, &info, now_ms) {
            log::error!("{topic}-{partition}: appending to the future log: {e}");
            self.discard_future_log(topic, partition);
            return CopyStep::Gone;
        }
        f.last_copied_epoch = last_epoch;
        CopyStep::Copied(copied.len() as u64)
    }

    /// The future log's close resolved (`closed`): swaps it in if the
    /// current log has not moved since, else reopens it to copy on.
    pub fn finish_future_swap(
        &mut self,
        topic: &str,
        partition: i32,
        id: u64,
        closed: std::io::Result<()>,
        now_ms: i64,
    ) -> CopyStep {
        let key = (topic.to_string(), partition);
        let (dir, closed_at, target) = match self.alter_log_dirs.futures.get(&key) {
            Some(f) if f.id == id && f.log.is_none() => {
                (f.dir.clone(), f.closed_at.unwrap_or(0), f.log_dir_index)
            }
            _ => return CopyStep::Gone,
        };
        if let Err(e) = closed {
            log::error!(
                "{topic}-{partition}: closing future log {}: {e}",
                dir.display()
            );
            self.discard_future_log(topic, partition);
            return CopyStep::Gone;
        }
        let Some(p) = self.partition(topic, partition) else {
            self.discard_future_log(topic, partition);
            return CopyStep::Gone;
        };
        let config = log_config_of(&p.config, p.log.config().io_mode);
        let lso = p.log.log_start_offset();
        let ready =
            p.log.log_end_offset() == closed_at && !p.log.has_staged_writes() && !p.appends_fenced;
        if !ready {
            // Appends landed meanwhile: reopen (nothing to scan) and copy on.
            return match Log::open(&dir, config, closed_at, lso, now_ms) {
                Ok((log, _)) => {
                    let f = self.alter_log_dirs.futures.get_mut(&key).unwrap();
                    f.log = Some(log);
                    f.closed_at = None;
                    CopyStep::Wait
                }
                Err(e) => {
                    log::error!("{topic}-{partition}: reopening future log: {e}");
                    self.discard_future_log(topic, partition);
                    CopyStep::Gone
                }
            };
        }
        let final_dir = self
            .log_dirs
            .path(target)
            .join(kshard_shards::log::partition_dir_name(topic, partition));
        if let Err(e) = self.swap_in(
            topic, partition, &dir, &final_dir, config, closed_at, now_ms,
        ) {
            log::error!(
                "{topic}-{partition}: swapping in future log {}: {e}",
                dir.display()
            );
            self.discard_future_log(topic, partition);
            return CopyStep::Gone;
        }
        CopyStep::Swapped
    }

    /// Kafka's `replaceCurrentWithFutureLog`, synchronously on the shard.
    #[allow(clippy::too_many_arguments)]
    fn swap_in(
        &mut self,
        topic: &str,
        partition: i32,
        future_dir: &Path,
        final_dir: &Path,
        config: kshard_shards::log::LogConfig,
        end: i64,
        now_ms: i64,
    ) -> std::io::Result<()> {
        let key = (topic.to_string(), partition);
        std::fs::rename(future_dir, final_dir)?;
        let p = self
            .topics
            .get_mut(topic)
            .and_then(|t| t.get_mut(&partition))
            .unwrap();
        let (mut log, _) = match Log::open(final_dir, config, end, p.log.log_start_offset(), now_ms)
        {
            Ok(opened) => opened,
            Err(e) => {
                // Put the future log back where it was, for the discard.
                let _ = std::fs::rename(final_dir, future_dir);
                return Err(e);
            }
        };
        debug_assert_eq!(log.log_end_offset(), p.log.log_end_offset());
        log.set_cleaner_checkpoint(p.log.cleaner_checkpoint());
        let old = std::mem::replace(&mut p.log, log);
        p.producer_state.relocate(final_dir);
        if let Err(e) = p.producer_state.take_snapshot(end) {
            log::warn!("{topic}-{partition}: producer snapshot at {end}: {e}");
        }
        if let Err(e) = p.leader_epoch_cache.relocate(final_dir) {
            log::warn!("{topic}-{partition}: leader epoch checkpoint: {e}");
        }
        let f = self.alter_log_dirs.futures.remove(&key).unwrap();
        let source = self
            .log_dir_of
            .insert(key, f.log_dir_index)
            .expect("an open log was placed in a log dir");
        self.log_dirs.log_deleted(source);
        self.cleaner.forget(old.dir());
        log::info!(
            "{topic}-{partition}: moved from {} to {}",
            old.dir().display(),
            final_dir.display()
        );
        drop(delete_log_queued(old));
        Ok(())
    }

    /// DescribeLogDirs' future entries of `topic`: size, and the offset
    /// lag of the future log behind the current one (Kafka's
    /// `getLogEndOffsetLag` for a future log).
    pub(super) fn describe_future_logs(
        &self,
        topic: &str,
        wanted: &dyn Fn(i32) -> bool,
        by_dir: &mut Vec<LogDirTopic>,
    ) {
        for ((t, partition), f) in &self.alter_log_dirs.futures {
            if t != topic || !wanted(*partition) {
                continue;
            }
            let Some(p) = self.partition(topic, *partition) else {
                continue;
            };
            let entry = LogDirPartition {
                partition: *partition,
                size_bytes: f.log.as_ref().map_or(0, |l| l.size_bytes()),
                offset_lag: (p.log.log_end_offset() - f.log_end_offset()).max(0),
                is_future: true,
            };
            match by_dir
                .iter_mut()
                .find(|d| d.log_dir_index == f.log_dir_index)
            {
                Some(d) => d.partitions.push(entry),
                None => by_dir.push(LogDirTopic {
                    log_dir_index: f.log_dir_index,
                    topic: topic.to_string(),
                    partitions: vec![entry],
                }),
            }
        }
    }

    /// The future logs (partition, target dir index, id) of this shard.
    pub fn future_logs(&self) -> Vec<(String, i32, usize, u64)> {
        self.alter_log_dirs
            .futures
            .iter()
            .map(|((t, p), f)| (t.clone(), *p, f.log_dir_index, f.id))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use bytes::Bytes;
    use kshard_shards::log::config::IoMode;
    use kshard_shards::log::log_create::LOG_DIRS;
    use kshard_shards::log::validate::Validator;

    use super::*;
    use crate::replica::log_dirs::LogDirs;
    use crate::replica::partition::follower::test_support::{
        log_bytes, producer_batch, temp_dir, topic_t, NOW_MS,
    };
    use crate::replica::partitions::LogDirOp;

    fn resolved(mut op: LogDirOp) -> std::io::Result<()> {
        LOG_DIRS.wait_idle();
        op.try_recv().unwrap().expect("the close ran")
    }

    fn append(parts: &mut Partitions, seq: i32, count: usize) {
        let p = parts.partition_mut("t", 0).unwrap();
        let records = Bytes::from(producer_batch(0, count, 0, 1000, seq));
        p.append_records_as_leader(&records, &mut Validator::new(), NOW_MS, false)
            .unwrap();
        let end = p.log.log_end_offset();
        p.set_high_watermark(end);
    }

    fn entries(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
            .filter(|n| n.starts_with("t-") && !n.ends_with("-delete"))
            .collect();
        names.sort();
        names
    }

    #[test]
    fn a_replica_is_copied_under_appends_and_swapped_into_the_other_dir() {
        let root = temp_dir("alter-log-dirs");
        let (a, b) = (root.join("a"), root.join("b"));
        let (log_dirs, _) = LogDirs::load(&[a.clone(), b.clone()]).unwrap();
        let log_dirs = Arc::new(log_dirs);
        let mut parts = Partitions::new(
            log_dirs.clone(),
            Default::default(),
            86_400_000,
            IoMode::Buffered,
        );
        let topic = topic_t();
        parts
            .open_partitions(&topic, &[0], NOW_MS, &mut Default::default())
            .unwrap();
        assert_eq!(parts.log_dir_index("t", 0), 0);
        for seq in 0..4 {
            append(&mut parts, seq * 10, 10);
        }
        let before = log_bytes(parts.partition("t", 0).unwrap(), 0);

        // Not hosted: remembered; the same dir: nothing happens.
        let r = parts.alter_log_dir("t", 5, 1, true, NOW_MS);
        assert_eq!(r.error, errors::REPLICA_NOT_AVAILABLE);
        assert_eq!(parts.take_preferred_log_dir("t", 5), Some(1));
        let r = parts.alter_log_dir("t", 0, 0, true, NOW_MS);
        assert_eq!((r.error, r.started), (errors::NONE, None));

        let r = parts.alter_log_dir("t", 0, 1, true, NOW_MS);
        let id = r.started.expect("a future log");
        assert_eq!(r.error, errors::NONE);
        assert_eq!(log_dirs.partition_count(1), 1, "counted in its dir");
        let future = entries(&b);
        assert_eq!(future.len(), 1);
        assert!(future[0].starts_with("t-0.") && future[0].ends_with("-future"));
        // Asking again for the same dir keeps the move.
        assert_eq!(parts.alter_log_dir("t", 0, 1, true, NOW_MS).started, None);
        let described = parts.describe_log_dirs("t", |_| true);
        let fut = described
            .iter()
            .find(|d| d.log_dir_index == 1)
            .unwrap()
            .partitions[0];
        assert!(
            fut.is_future && fut.offset_lag == 40 && fut.size_bytes == 0,
            "{fut:?}"
        );

        // Copy a step, append more, copy on to the end.
        assert!(matches!(
            parts.copy_future_log_step("t", 0, id, NOW_MS),
            CopyStep::Copied(n) if n > 0
        ));
        append(&mut parts, 40, 5);
        let closing = loop {
            match parts.copy_future_log_step("t", 0, id, NOW_MS) {
                CopyStep::Copied(_) => continue,
                CopyStep::Closing(op) => break op,
                other => panic!("{other:?}"),
            }
        };
        // An append while the future log closes: it is reopened, copied on.
        append(&mut parts, 45, 5);
        let r = resolved(closing);
        assert_eq!(
            parts.finish_future_swap("t", 0, id, r, NOW_MS),
            CopyStep::Wait
        );
        let closing = loop {
            match parts.copy_future_log_step("t", 0, id, NOW_MS) {
                CopyStep::Copied(_) => continue,
                CopyStep::Closing(op) => break op,
                other => panic!("{other:?}"),
            }
        };
        let r = resolved(closing);
        assert_eq!(
            parts.finish_future_swap("t", 0, id, r, NOW_MS),
            CopyStep::Swapped
        );
        LOG_DIRS.wait_idle();

        assert_eq!(parts.log_dir_index("t", 0), 1);
        assert_eq!(
            (log_dirs.partition_count(0), log_dirs.partition_count(1)),
            (0, 1)
        );
        assert_eq!(entries(&b), vec!["t-0".to_string()]);
        assert_eq!(
            entries(&a),
            Vec::<String>::new(),
            "the old log is renamed away"
        );
        let p = parts.partition("t", 0).unwrap();
        assert_eq!(p.log.dir(), b.join("t-0"));
        assert_eq!(p.log.log_end_offset(), 50);
        assert_eq!(p.high_watermark(), 50);
        let mut expected = before;
        expected.extend(log_bytes(p, 40));
        assert_eq!(
            log_bytes(p, 0),
            expected,
            "the same batches at the same offsets"
        );
        assert!(parts
            .describe_log_dirs("t", |_| true)
            .iter()
            .all(|d| d.partitions.iter().all(|p| !p.is_future)));
        // The producer state came along: a retried batch is a duplicate.
        let p = parts.partition_mut("t", 0).unwrap();
        let retry = Bytes::from(producer_batch(0, 5, 0, 1000, 45));
        let r = p
            .append_records_as_leader(&retry, &mut Validator::new(), NOW_MS, false)
            .unwrap();
        assert_eq!((r.base_offset, p.log.log_end_offset()), (45, 50));
        append(&mut parts, 50, 1);
        assert_eq!(parts.partition("t", 0).unwrap().log.log_end_offset(), 51);

        // A move cancelled by moving back: the future log goes.
        let id = parts
            .alter_log_dir("t", 0, 0, true, NOW_MS)
            .started
            .unwrap();
        assert!(matches!(
            parts.copy_future_log_step("t", 0, id, NOW_MS),
            CopyStep::Copied(_)
        ));
        assert_eq!(parts.alter_log_dir("t", 0, 1, true, NOW_MS).started, None);
        assert_eq!(
            parts.copy_future_log_step("t", 0, id, NOW_MS),
            CopyStep::Gone
        );
        LOG_DIRS.wait_idle();
        std::thread::sleep(std::time::Duration::from_millis(200));
        assert_eq!(entries(&a), Vec::<String>::new());
        assert_eq!(
            (log_dirs.partition_count(0), log_dirs.partition_count(1)),
            (0, 1)
        );
        drop(parts.delete_topic("t"));
        LOG_DIRS.wait_idle();
        let _ = std::fs::remove_dir_all(&root);
    }
}
