//! The partitions one shard hosts (Kafka's `ReplicaManager.allPartitions`)
//! and the synchronous partition-level work of Produce, Fetch, ListOffsets,
//! DeleteRecords and OffsetForLeaderEpoch. It runs on the owning shard, in
//! the order requests arrived; `ReplicaManager` adds the waiting around it.

use std::collections::HashMap;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use kshard_shards::log::checkpoint::partition_dir_name;
use kshard_shards::log::cleaner::{CleanerConfig, LastRecord, LogCleaner, Step};
use kshard_shards::log::config::IoMode;
use kshard_shards::log::validate::Validator;

use crate::metadata::checkpoints::StartupCheckpoints;
use crate::metadata::metadata_cache::TopicInfo;
use crate::protocol::errors;
use crate::protocol::errors::ErrorCode;
use crate::replica::cleaner_slots::CleanerSlots;
use crate::replica::log_dirs::LogDirs;
use crate::replica::partition::{log_config_of, Partition};
use crate::replica::parts::*;
use crate::replica::quota::{
    is_leader_throttled, should_leader_throttle, ReplicaQuota, UnboundedQuota,
};

/// New logs made off the shard for some partitions of one topic, by
/// partition (`ReplicaManager::prepare_new_logs`).
pub type PreparedLogs = HashMap<i32, kshard_shards::log::log_create::PreparedLog>;

pub use crate::replica::partition::{log_dir_op_done, LogDirOp};

/// Closes `log`'s files and renames its directory away on the `log-dirs`
/// thread (`Log::delete_queued`).
pub fn delete_log_queued(log: kshard_shards::log::Log) -> LogDirOp {
    let (done, deleted) = futures_channel::oneshot::channel();
    log.delete_queued(move |r| {
        let _ = done.send(r);
    });
    deleted
}

/// A new log to make off the shard: partition `partition` in `dir`.
pub struct NewLogJob {
    pub partition: i32,
    pub dir: PathBuf,
    pub config: kshard_shards::log::LogConfig,
}

/// Kafka's `allPartitions`: the partitions this shard hosts, and the
/// synchronous partition-level work on them.
pub struct Partitions {
    /// The broker's `log.dirs`, shared by every shard.
    log_dirs: Arc<LogDirs>,
    /// The log dir (index into `log_dirs`) of every log this shard's
    /// partitions have on disk, open or not (Kafka's `currentLogs` by
    /// parent dir): found at start-up or placed when created.
    log_dir_of: HashMap<(String, i32), usize>,
    /// topic -> partition -> state; looked up by &str without allocating.
    topics: HashMap<String, HashMap<i32, Partition>>,
    validator: Validator,
    /// The logs found at start-up and their checkpoint entries, each taken
    /// when its partition opens.
    startup_checkpoints: StartupCheckpoints,
    producer_id_expiration_ms: i64,
    io_mode: IoMode,
    /// This shard's log cleaner (compacted topics) and its pacing.
    cleaner: LogCleaner,
    /// Kafka's `log.cleaner.backoff.ms`: the wait after finding nothing to clean.
    cleaner_backoff_ms: i64,
    next_cleaner_check_ms: i64,
    /// The partition the cleaner's pass is on.
    cleaning: Option<(String, i32)>,
    /// The cleaner's dedupe map being made off the shard.
    cleaner_map: Option<std::thread::JoinHandle<kshard_shards::log::offset_map::OffsetMap>>,
    /// `log.cleaner.enable`.
    cleaner_enabled: bool,
    /// `log.cleaner.threads` across shards, and whether this shard's pass
    /// holds one of them.
    cleaner_slots: Option<Arc<CleanerSlots>>,
    holds_cleaner_slot: bool,
    /// Cluster mode: a partition this broker does not hold is another
    /// broker's (NOT_LEADER_OR_FOLLOWER), not unknown.
    cluster_mode: bool,
    /// `replica.lag.time.max.ms`.
    replica_lag_time_max_ms: i64,
    /// ISR changes for the controller (AlterPartition), drained by the shard.
    alter_isr_queue: Vec<crate::replica::partition::leader::AlterIsr>,
    /// The broker is shutting down: delayed operations complete at once.
    closing: bool,
    /// The id of the next batch of leader-epoch checkpoint fsyncs.
    next_leader_epoch_sync_id: u64,
    /// The broker's leader replication quota (Kafka's QuotaManagers.leader).
    leader_quota: Arc<dyn ReplicaQuota>,
    /// AlterReplicaLogDirs: future replicas and preferred dirs.
    alter_log_dirs: alter_log_dirs::AlterLogDirsState,
}

/// Kafka's `log.cleaner.backoff.ms` default.
pub const DEFAULT_CLEANER_BACKOFF_MS: i64 = 15_000;

/// How soon a shard looks again for a cleaner slot the others held.
const CLEANER_SLOT_RETRY_MS: i64 = 100;

mod leader_epoch_sync;
pub use leader_epoch_sync::{dropped_write, LeaderEpochSync};
mod alter_log_dirs;
pub use alter_log_dirs::{AlterLogDirResult, CopyStep};
mod log_placement;
mod maintenance;
pub use maintenance::{MaintenanceRound, RollSync};
mod roles;
mod transactions;

fn leader_epoch_error(requested: i32, current: i32) -> Option<ErrorCode> {
    if requested < 0 || requested == current {
        None
    } else if requested < current {
        Some(errors::FENCED_LEADER_EPOCH)
    } else {
        Some(errors::UNKNOWN_LEADER_EPOCH)
    }
}

impl Partitions {
    pub fn new(
        log_dirs: Arc<LogDirs>,
        startup_checkpoints: StartupCheckpoints,
        producer_id_expiration_ms: i64,
        io_mode: IoMode,
    ) -> Self {
        let log_dir_of = startup_checkpoints
            .iter()
            .map(|(key, log)| {
                assert!(log.log_dir_index < log_dirs.len());
                (key.clone(), log.log_dir_index)
            })
            .collect();
        Partitions {
            cleaner: LogCleaner::new(CleanerConfig::default()),
            cleaner_backoff_ms: DEFAULT_CLEANER_BACKOFF_MS,
            cleaner_enabled: true,
            cleaner_slots: None,
            holds_cleaner_slot: false,
            next_cleaner_check_ms: 0,
            cleaning: None,
            cleaner_map: None,
            log_dirs,
            log_dir_of,
            topics: HashMap::new(),
            validator: Validator::new(),
            startup_checkpoints,
            producer_id_expiration_ms,
            io_mode,
            cluster_mode: false,
            replica_lag_time_max_ms: 30_000,
            alter_isr_queue: Vec::new(),
            closing: false,
            next_leader_epoch_sync_id: 1,
            leader_quota: Arc::new(UnboundedQuota),
            alter_log_dirs: Default::default(),
        }
    }

    /// The quota a follower's fetch of a leader-throttled partition is
    /// checked against (unbounded until set).
    pub fn set_leader_quota(&mut self, quota: Arc<dyn ReplicaQuota>) {
        self.leader_quota = quota;
    }

    /// From here on, parked fetches and produces complete at once.
    pub fn set_closing(&mut self) {
        self.closing = true;
    }

    pub fn is_closing(&self) -> bool {
        self.closing
    }

    pub fn set_replica_lag_time_max_ms(&mut self, ms: i64) {
        self.replica_lag_time_max_ms = ms.max(1);
    }

    pub fn replica_lag_time_max_ms(&self) -> i64 {
        self.replica_lag_time_max_ms
    }

    pub fn set_cluster_mode(&mut self, on: bool) {
        self.cluster_mode = on;
    }

    fn absent_error(&self) -> ErrorCode {
        if self.cluster_mode {
            errors::NOT_LEADER_OR_FOLLOWER
        } else {
            errors::UNKNOWN_TOPIC_OR_PARTITION
        }
    }

    /// The partition if this broker leads it, else the error for clients.
    fn leader_partition(&self, topic: &str, partition: i32) -> Result<&Partition, ErrorCode> {
        match self.partition(topic, partition) {
            Some(p) if p.is_leader => Ok(p),
            Some(_) => Err(errors::NOT_LEADER_OR_FOLLOWER),
            None => Err(self.absent_error()),
        }
    }

    fn leader_partition_mut(
        &mut self,
        topic: &str,
        partition: i32,
    ) -> Result<&mut Partition, ErrorCode> {
        let absent = self.absent_error();
        match self
            .topics
            .get_mut(topic)
            .and_then(|t| t.get_mut(&partition))
        {
            Some(p) if p.is_leader => Ok(p),
            Some(_) => Err(errors::NOT_LEADER_OR_FOLLOWER),
            None => Err(absent),
        }
    }

    pub fn partition(&self, topic: &str, partition: i32) -> Option<&Partition> {
        self.topics.get(topic).and_then(|t| t.get(&partition))
    }

    pub fn partition_mut(&mut self, topic: &str, partition: i32) -> Option<&mut Partition> {
        self.topics
            .get_mut(topic)
            .and_then(|t| t.get_mut(&partition))
    }

    pub fn partition_ids(&self, topic: &str) -> Vec<i32> {
        self.topics
            .get(topic)
            .map(|t| t.keys().copied().collect())
            .unwrap_or_default()
    }

    pub fn partition_count(&self) -> usize {
        self.topics.values().map(|t| t.len()).sum()
    }

    /// The logs that opening `topic`'s partitions `ids` would create: those
    /// with no log on disk here, each placed in a log dir now
    /// (`LogDirs::next_log_dir`).
    pub fn new_log_jobs(&mut self, topic: &TopicInfo, ids: &[i32]) -> Vec<NewLogJob> {
        let new: Vec<i32> = ids
            .iter()
            .copied()
            .filter(|&p| !self.has_log(&topic.name, p))
            .collect();
        new.into_iter()
            // A partition with no online dir to go to gets no job; opening
            // it fails with the reason.
            .filter_map(|p| {
                let (_, dir) = self.place_log(&topic.name, p).ok()?;
                Some(NewLogJob {
                    partition: p,
                    dir: dir.join(partition_dir_name(&topic.name, p)),
                    config: log_config_of(&topic.config, self.io_mode),
                })
            })
            .collect()
    }

    /// Opens (or creates) the logs of `partitions` of `topic` on this shard.
    pub fn open_partitions(
        &mut self,
        topic: &TopicInfo,
        partitions: &[i32],
        now_ms: i64,
        prepared: &mut PreparedLogs,
    ) -> io::Result<()> {
        for &p in partitions {
            if self.partition(&topic.name, p).is_some() {
                continue;
            }
            let startup = self
                .startup_checkpoints
                .remove(&(topic.name.clone(), p))
                .unwrap_or_default();
            let leader_epoch = topic
                .partitions
                .iter()
                .find(|pi| pi.partition == p)
                .map(|pi| pi.leader_epoch)
                .unwrap_or(0);
            let (log_dir_index, log_dir) = self.place_log(&topic.name, p)?;
            if self.log_dirs.is_offline(log_dir_index) {
                // Left closed: its callers answer KAFKA_STORAGE_ERROR for it.
                log::warn!(
                    "not opening {}-{p}: its log dir {} is offline",
                    topic.name,
                    log_dir.display()
                );
                continue;
            }
            let mut partition = Partition::open(
                &log_dir,
                &topic.name,
                p,
                topic.topic_id,
                topic.config.clone(),
                startup.recovery_point,
                startup.log_start_offset,
                leader_epoch,
                self.producer_id_expiration_ms,
                self.io_mode,
                now_ms,
                prepared.remove(&p),
            )?;
            partition.set_log_dir(log_dir_index, self.log_dirs.offline_flag(log_dir_index));
            if let Some(offset) = startup.cleaner_offset {
                partition.log.set_cleaner_checkpoint(offset);
            }
            if self.cluster_mode {
                // replication-offset-checkpoint: a replica's HW survives restarts;
                // with none recorded nothing is known committed yet.
                partition.set_high_watermark(startup.high_watermark.unwrap_or(0));
            }
            self.topics
                .entry(topic.name.clone())
                .or_default()
                .insert(p, partition);
        }
        Ok(())
    }

    /// A topic's new config on its partitions here (Kafka's
    /// `LogManager.updateTopicConfig`): read at each next use, so nothing
    /// rolls or is deleted at once; a log no longer compacted stops any
    /// cleaning pass in progress (`abortCleaning`).
    pub fn update_topic_config(&mut self, topic: &TopicInfo) {
        let Some(parts) = self.topics.get_mut(&topic.name) else {
            return;
        };
        for p in parts.values_mut() {
            let was_compacted = p.log.config().compact;
            p.set_config(topic.config.clone());
            if was_compacted && !p.log.config().compact {
                self.cleaner.forget(p.log.dir());
            }
        }
    }

    /// Deletes every log of `topic` on this shard; each directory is
    /// renamed away when its `LogDirOp` resolves.
    pub fn delete_topic(&mut self, topic: &str) -> Vec<LogDirOp> {
        let Some(parts) = self.topics.remove(topic) else {
            return Vec::new();
        };
        parts
            .into_values()
            .map(|p| {
                self.cleaner.forget(p.log.dir());
                self.log_deleted(topic, p.partition);
                delete_log_queued(p.log)
            })
            .collect()
    }

    /// Appends one partition's records as leader: a client's (staged in a
    /// direct-mode log, see `Partition::append_records_as_leader`) or a
    /// coordinator's (written now, without the sequence checks).
    pub fn append(
        &mut self,
        part: &ProducePart,
        now_ms: i64,
        origin: AppendOrigin,
    ) -> ProducePartResult {
        let absent = self.absent_error();
        let partition = match appendable(&mut self.topics, &part.topic, part.partition, absent) {
            Ok(p) => p,
            Err(code) => return ProducePartResult::failed(code),
        };
        if partition.log_dir_offline() {
            return ProducePartResult::failed(errors::KAFKA_STORAGE_ERROR);
        }
        if let Err(code) = partition.check_txn_verification(&part.records, part.txn_verification) {
            return ProducePartResult::failed(code);
        }
        let appended = match origin {
            AppendOrigin::Client => {
                partition.append_records_as_leader(&part.records, &mut self.validator, now_ms, true)
            }
            AppendOrigin::Coordinator => {
                partition.append_records_as_coordinator(&part.records, &mut self.validator, now_ms)
            }
        };
        match appended {
            Ok(r) => {
                // A single replica (or an ISR of one) commits at once.
                partition.maybe_increment_high_watermark();
                ProducePartResult {
                    error_code: errors::NONE,
                    error_message: None,
                    record_errors: Vec::new(),
                    base_offset: r.base_offset,
                    log_append_time_ms: r.log_append_time_ms,
                    log_start_offset: r.log_start_offset,
                }
            }
            Err(e) => {
                if e.error_code == errors::KAFKA_STORAGE_ERROR {
                    let what = format!(
                        "appending to {}-{}: {}",
                        part.topic, part.partition, e.message
                    );
                    self.log_dirs.mark_offline(partition.log_dir_index, &what);
                }
                ProducePartResult {
                    error_code: e.error_code,
                    // Kafka sends a message only with record errors.
                    error_message: (!e.record_errors.is_empty()).then_some(e.message),
                    record_errors: e.record_errors,
                    base_offset: -1,
                    log_append_time_ms: -1,
                    log_start_offset: partition.log.log_start_offset(),
                }
            }
        }
    }

    /// Reads one partition for a consumer (below the high watermark) or a
    /// follower (to the log end, recording its fetch state; the high
    /// watermark may advance and an ISR expansion may be queued).
    pub fn read(
        &mut self,
        part: &FetchPart,
        budget: &mut FetchBudget,
        now_ms: i64,
    ) -> FetchPartResult {
        let fail = |code: ErrorCode| FetchPartResult {
            error_code: code,
            high_watermark: -1,
            last_stable_offset: -1,
            log_start_offset: -1,
            slice: None,
            read_size: 0,
            diverging_epoch: None,
            aborted_transactions: Vec::new(),
            leader_throttled: false,
        };
        let absent = self.absent_error();
        let Some(partition) = self
            .topics
            .get_mut(part.topic.as_str())
            .and_then(|t| t.get_mut(&part.partition))
        else {
            return fail(absent);
        };
        // An offline log dir's partitions are the other replicas' in a
        // cluster (Kafka answers KAFKA_STORAGE_ERROR); a single broker has
        // no other copy, and reads of what was written still work.
        if self.cluster_mode && partition.log_dir_offline() {
            return fail(errors::KAFKA_STORAGE_ERROR);
        }
        if !partition.is_leader {
            return fail(errors::NOT_LEADER_OR_FOLLOWER);
        }
        if let Some(code) = leader_epoch_error(part.current_leader_epoch, partition.leader_epoch) {
            return fail(code);
        }
        let max_bytes = part.max_bytes.min(budget.bytes_left);
        let min_one_batch = budget.min_one_batch;
        if part.replica_id >= 0
            && !partition
                .leadership
                .followers
                .contains_key(&part.replica_id)
        {
            return fail(errors::NOT_LEADER_OR_FOLLOWER);
        }
        // Fetch v12+ (KIP-320): a fetcher, follower or consumer, whose last
        // fetched epoch ends earlier here than its fetch offset diverged and
        // must truncate first; it gets that epoch's end instead of records.
        if part.last_fetched_epoch >= 0 {
            let (epoch, end) = partition
                .leader_epoch_cache
                .end_offset_for(part.last_fetched_epoch, partition.log.log_end_offset());
            if epoch < part.last_fetched_epoch || end < part.fetch_offset {
                return FetchPartResult {
                    error_code: errors::NONE,
                    high_watermark: partition.high_watermark(),
                    last_stable_offset: partition.last_stable_offset(),
                    log_start_offset: partition.log.log_start_offset(),
                    slice: None,
                    read_size: 0,
                    diverging_epoch: Some((epoch, end)),
                    aborted_transactions: Vec::new(),
                    leader_throttled: false,
                };
            }
        }
        if part.replica_id >= 0 {
            let mut r = partition.read_for_follower(part.fetch_offset, max_bytes, min_one_batch);
            // Kafka's readFromLocalLog: a throttled partition's read is
            // answered with no records (the follower fetches it again);
            // its fetch state still moves with the fetch offset.
            if should_leader_throttle(&*self.leader_quota, partition, part.replica_id) {
                r.slice = None;
                r.read_size = 0;
            }
            if r.error_code == errors::NONE {
                partition.update_follower_fetch_state(part.replica_id, part.fetch_offset, now_ms);
                partition.maybe_increment_high_watermark();
                if let Some(isr) = partition.isr_to_expand(part.replica_id) {
                    let change = partition.request_isr_change(isr);
                    self.alter_isr_queue.push(change);
                }
            }
            budget.take(r.read_size);
            return FetchPartResult {
                error_code: r.error_code,
                high_watermark: partition.high_watermark(),
                last_stable_offset: partition.last_stable_offset(),
                log_start_offset: r.log_start_offset,
                slice: r.slice,
                read_size: r.read_size,
                diverging_epoch: None,
                aborted_transactions: Vec::new(),
                leader_throttled: is_leader_throttled(partition),
            };
        }
        let (r, aborted_transactions) = if part.read_committed {
            partition.read_committed(part.fetch_offset, max_bytes, min_one_batch)
        } else {
            let r = partition.read(part.fetch_offset, max_bytes, min_one_batch);
            (r, Vec::new())
        };
        budget.take(r.read_size);
        FetchPartResult {
            error_code: r.error_code,
            high_watermark: r.high_watermark,
            last_stable_offset: r.last_stable_offset,
            log_start_offset: r.log_start_offset,
            slice: r.slice,
            read_size: r.read_size,
            diverging_epoch: None,
            aborted_transactions,
            leader_throttled: false,
        }
    }

    /// Kafka's `DelayedFetch.tryComplete` for one partition: the bytes a
    /// fetch at `part.fetch_offset` could read now, up to the high
    /// watermark (a consumer) or the log end (a follower) and at most the
    /// partition limit, or `Complete` when the fetch must answer at once.
    pub fn fetch_wait_check(&self, part: &FetchPart) -> FetchWaitCheck {
        let Some(p) = self.partition(&part.topic, part.partition) else {
            return FetchWaitCheck::Complete;
        };
        if !p.is_leader || leader_epoch_error(part.current_leader_epoch, p.leader_epoch).is_some() {
            return FetchWaitCheck::Complete;
        }
        let end = if part.replica_id >= 0 {
            p.log.log_end_offset()
        } else if part.read_committed {
            p.last_stable_offset()
        } else {
            p.high_watermark()
        };
        // Case H: truncation left the fetcher's last epoch diverged.
        if part.last_fetched_epoch >= 0 {
            let (epoch, epoch_end) = p
                .leader_epoch_cache
                .end_offset_for(part.last_fetched_epoch, p.log.log_end_offset());
            if epoch < part.last_fetched_epoch || epoch_end < part.fetch_offset {
                return FetchWaitCheck::Complete;
            }
        }
        if part.fetch_offset > end || part.fetch_offset < p.log.log_start_offset() {
            return FetchWaitCheck::Complete;
        }
        if part.fetch_offset == end {
            return FetchWaitCheck::Bytes(0);
        }
        // A throttled partition's bytes do not count, nor does its data on
        // an older segment complete the fetch (Kafka's DelayedFetch).
        if part.replica_id >= 0 && should_leader_throttle(&*self.leader_quota, p, part.replica_id) {
            return FetchWaitCheck::Bytes(0);
        }
        match p.log.bytes_between(part.fetch_offset, end) {
            Ok(Some(bytes)) => FetchWaitCheck::Bytes(bytes.min(u64::from(part.max_bytes))),
            // On an older segment than the end offset, or unreadable.
            Ok(None) | Err(_) => FetchWaitCheck::Complete,
        }
    }

    pub fn list_offset(&self, part: &ListOffsetsPart) -> ListOffsetsPartResult {
        let fail = |code| ListOffsetsPartResult {
            error_code: code,
            timestamp: -1,
            offset: -1,
            leader_epoch: -1,
        };
        let p = match self.leader_partition(&part.topic, part.partition) {
            Ok(p) => p,
            Err(code) => return fail(code),
        };
        if let Some(code) = leader_epoch_error(part.current_leader_epoch, p.leader_epoch) {
            return fail(code);
        }
        let ok = |offset: i64, timestamp: i64| ListOffsetsPartResult {
            error_code: errors::NONE,
            timestamp,
            offset,
            leader_epoch: p.leader_epoch_cache.epoch_for_offset(offset),
        };
        match part.timestamp {
            LATEST_TIMESTAMP if part.read_committed => ok(p.last_stable_offset(), -1),
            LATEST_TIMESTAMP => ok(p.high_watermark(), -1),
            // No tiered storage: Kafka answers no offset and no epoch.
            LATEST_TIERED_TIMESTAMP => ListOffsetsPartResult {
                error_code: errors::NONE,
                timestamp: -1,
                offset: -1,
                leader_epoch: -1,
            },
            EARLIEST_TIMESTAMP | EARLIEST_LOCAL_TIMESTAMP => ok(p.log.log_start_offset(), -1),
            MAX_TIMESTAMP => match p.log.offset_of_max_timestamp() {
                Ok(Some((offset, ts))) => ok(offset, ts),
                Ok(None) => ListOffsetsPartResult {
                    error_code: errors::NONE,
                    timestamp: -1,
                    offset: -1,
                    leader_epoch: -1,
                },
                Err(e) => {
                    p.storage_error("reading the time index for the max timestamp", &e);
                    fail(errors::KAFKA_STORAGE_ERROR)
                }
            },
            ts if ts >= 0 => match p.log.offset_for_timestamp(ts) {
                Ok(Some((offset, found_ts))) => ok(offset, found_ts),
                Ok(None) => ListOffsetsPartResult {
                    error_code: errors::NONE,
                    timestamp: -1,
                    offset: -1,
                    leader_epoch: -1,
                },
                Err(e) => {
                    p.storage_error(&format!("looking up the offset for timestamp {ts}"), &e);
                    fail(errors::KAFKA_STORAGE_ERROR)
                }
            },
            _ => fail(errors::INVALID_REQUEST),
        }
    }

    /// ListOffsets v0 (Kafka's `legacyFetchOffsetsBefore`): the base offsets
    /// of the segments last modified at or before `timestamp` (plus the log
    /// end offset, stamped now, when the active segment holds data), newest
    /// first, at most `max_num_offsets`; -1 (latest) starts from the newest,
    /// -2 (earliest) from the oldest. A consumer never sees past the high
    /// watermark: the list then starts with it.
    pub fn legacy_offsets_before(
        &self,
        part: &LegacyListOffsetsPart,
        now_ms: i64,
    ) -> Result<Vec<i64>, ErrorCode> {
        let p = self.leader_partition(&part.topic, part.partition)?;
        let log_start = p.log.log_start_offset();
        let mut offset_times = Vec::with_capacity(p.log.segment_count() + 1);
        for seg in p.log.segments() {
            let modified = seg.last_modified_ms().map_err(|e| {
                log::error!("{}-{}: segment mtime: {e}", part.topic, part.partition);
                errors::KAFKA_STORAGE_ERROR
            })?;
            offset_times.push((seg.base_offset().max(log_start), modified));
        }
        if p.log
            .segments()
            .next_back()
            .is_some_and(|s| s.size_bytes() > 0)
        {
            offset_times.push((p.log.log_end_offset(), now_ms));
        }
        let start = match part.timestamp {
            LATEST_TIMESTAMP => offset_times.len() as i64 - 1,
            EARLIEST_TIMESTAMP => 0,
            ts => offset_times
                .iter()
                .rposition(|&(_, modified)| modified <= ts)
                .map_or(-1, |i| i as i64),
        };
        // Kafka allocates an array of this size: a negative one fails.
        let count = i64::from(part.max_num_offsets).min(start + 1);
        if count < 0 {
            return Err(errors::UNKNOWN_SERVER_ERROR);
        }
        let mut offsets: Vec<i64> = (0..count)
            .map(|j| offset_times[(start - j) as usize].0)
            .collect();
        offsets.sort_unstable_by(|a, b| b.cmp(a));
        if part.from_consumer {
            let hw = p.high_watermark();
            if offsets.iter().any(|&o| o > hw) {
                offsets.retain(|&o| o <= hw);
                offsets.insert(0, hw);
            }
        }
        Ok(offsets)
    }

    /// DeleteRecords: offset -1 means the high watermark.
    pub fn delete_records(&mut self, part: &DeleteRecordsPart) -> DeleteRecordsPartResult {
        let p = match self.leader_partition_mut(&part.topic, part.partition) {
            Ok(p) => p,
            Err(code) => return DeleteRecordsPartResult::failed(code),
        };
        let hw = p.high_watermark();
        let target = if part.offset == -1 { hw } else { part.offset };
        if target < 0 || target > hw {
            return DeleteRecordsPartResult::failed(errors::OFFSET_OUT_OF_RANGE);
        }
        match p.log.delete_records_before(target) {
            Ok(low_watermark) => {
                p.producer_state
                    .on_log_start_offset_incremented(low_watermark);
                DeleteRecordsPartResult {
                    error_code: errors::NONE,
                    low_watermark,
                }
            }
            Err(e) => {
                p.storage_error(&format!("deleting records before {target}"), &e);
                DeleteRecordsPartResult::failed(errors::KAFKA_STORAGE_ERROR)
            }
        }
    }

    pub fn offset_for_leader_epoch(&self, query: &EpochQuery) -> EpochEndOffset {
        let p = match self.leader_partition(&query.topic, query.partition) {
            Ok(p) => p,
            Err(code) => return EpochEndOffset::failed(code),
        };
        if let Some(code) = leader_epoch_error(query.current_leader_epoch, p.leader_epoch) {
            return EpochEndOffset::failed(code);
        }
        let (leader_epoch, end_offset) = p
            .leader_epoch_cache
            .end_offset_for(query.leader_epoch, p.log.log_end_offset());
        EpochEndOffset {
            error_code: errors::NONE,
            leader_epoch,
            end_offset,
        }
    }

    /// `log.cleaner.enable`: false leaves compacted topics uncleaned, as in Kafka.
    pub fn set_cleaner_enabled(&mut self, enabled: bool) {
        self.cleaner_enabled = enabled;
    }

    /// The broker's bound on cleaning passes at once (`log.cleaner.threads`).
    pub fn set_cleaner_slots(&mut self, slots: Arc<CleanerSlots>) {
        self.cleaner_slots = Some(slots);
    }

    /// A slot for a new pass (always, without a bound set).
    fn acquire_cleaner_slot(&mut self) -> bool {
        assert!(!self.holds_cleaner_slot, "one pass at a time per shard");
        let acquired = self.cleaner_slots.as_ref().is_none_or(|s| s.try_acquire());
        self.holds_cleaner_slot = acquired && self.cleaner_slots.is_some();
        acquired
    }

    /// The pass ended (done, failed or aborted): its slot goes back.
    fn release_cleaner_slot(&mut self) {
        if std::mem::take(&mut self.holds_cleaner_slot) {
            self.cleaner_slots
                .as_ref()
                .expect("a held slot has slots")
                .release();
        }
    }

    /// `log.cleaner.backoff.ms` (tests and the live check use small values).
    pub fn set_cleaner_backoff_ms(&mut self, backoff_ms: i64) {
        self.cleaner_backoff_ms = backoff_ms.max(0);
        self.next_cleaner_check_ms = 0;
    }

    /// Whether the cleaner has its dedupe map; if not, has it made on a
    /// thread of its own (once per shard) and installs it when done.
    fn cleaner_map_ready(&mut self) -> bool {
        if self.cleaner.has_map() {
            return true;
        }
        match self.cleaner_map.take() {
            Some(made) if made.is_finished() => {
                // Without it (the thread failed), `start` makes the map here.
                if let Ok(map) = made.join() {
                    self.cleaner.install_map(map);
                }
                true
            }
            Some(making) => {
                self.cleaner_map = Some(making);
                false
            }
            None => {
                let config = self.cleaner.config().clone();
                match std::thread::Builder::new()
                    .name("cleaner-map".into())
                    .spawn(move || LogCleaner::new_map(&config))
                {
                    Ok(making) => {
                        self.cleaner_map = Some(making);
                        false
                    }
                    // No thread: `start` makes the map here.
                    Err(_) => true,
                }
            }
        }
    }

    /// One bounded slice of cleaning (`CleanerConfig::step_bytes` of
    /// input): continues the pass in progress, or, when due, starts one on
    /// the filthiest compacted log, as Kafka's cleaner thread does between
    /// backoffs. `Step::Idle` when there was nothing to do.
    pub fn clean_step(&mut self, now_ms: i64) -> Step {
        if !self.cleaner_enabled {
            return Step::Idle;
        }
        if self.cleaner.in_progress().is_none() {
            self.cleaning = None;
            self.release_cleaner_slot();
            if now_ms < self.next_cleaner_check_ms {
                return Step::Idle;
            }
            // The map is being made: no need to look for a log meanwhile.
            if self.cleaner_map.is_some() && !self.cleaner_map_ready() {
                return Step::WaitingOffShard;
            }
            let filthiest = self
                .topics
                .values()
                .flat_map(|parts| parts.values())
                .filter_map(|p| {
                    let lso = Some(p.last_stable_offset());
                    Some((self.cleaner.cleaning_priority(&p.log, now_ms, lso)?, p))
                })
                .max_by(|a, b| a.0.total_cmp(&b.0))
                .map(|(_, p)| (p.topic.clone(), p.partition));
            let Some((topic, partition)) = filthiest else {
                self.next_cleaner_check_ms = now_ms.saturating_add(self.cleaner_backoff_ms);
                return Step::Idle;
            };
            if !self.cleaner_map_ready() {
                return Step::WaitingOffShard;
            }
            // Other shards' passes take every `log.cleaner.threads` slot.
            if !self.acquire_cleaner_slot() {
                self.next_cleaner_check_ms = now_ms.saturating_add(CLEANER_SLOT_RETRY_MS);
                return Step::Idle;
            }
            let p = &self.topics[&topic][&partition];
            self.cleaner
                .start(&p.log, now_ms, Some(p.last_stable_offset()));
            self.cleaning = Some((topic, partition));
        }
        let dir = self.cleaner.in_progress().map(|d| d.to_path_buf());
        let p = self
            .cleaning
            .as_ref()
            .and_then(|(t, p)| self.topics.get_mut(t)?.get_mut(p))
            .filter(|p| Some(p.log.dir()) == dir.as_deref());
        let Some(p) = p else {
            self.cleaner.abort(); // deleted while being cleaned
            self.cleaning = None;
            return Step::Idle;
        };
        let producers = &p.producer_state;
        let last_record_of = |pid: i64| {
            producers.last_entry(pid).map(|e| LastRecord {
                last_data_offset: Some(e.last_data_offset()).filter(|&o| o >= 0),
                producer_epoch: e.producer_epoch,
            })
        };
        let step = self.cleaner.step(&mut p.log, &last_record_of, now_ms);
        match &step {
            Ok(Step::Done(s)) => log::info!(
                "cleaned {}-{}: offsets {}..{}, {} of {} records kept, {} -> {} bytes, {} groups",
                p.topic,
                p.partition,
                s.first_dirty_offset,
                s.end_offset,
                s.records_retained,
                s.records_read,
                s.bytes_read,
                s.bytes_written,
                s.groups
            ),
            Ok(_) => {}
            Err(e) => {
                log::error!("cleaning {}-{}: {e}", p.topic, p.partition);
                self.next_cleaner_check_ms = now_ms.saturating_add(self.cleaner_backoff_ms);
            }
        }
        step.unwrap_or(Step::Idle)
    }

    pub fn checkpoints(&self) -> Vec<CheckpointEntry> {
        let mut out = Vec::with_capacity(self.partition_count());
        for parts in self.topics.values() {
            for p in parts.values() {
                out.push(CheckpointEntry {
                    log_dir_index: self.log_dir_index(&p.topic, p.partition),
                    topic: p.topic.clone(),
                    partition: p.partition,
                    recovery_point: p.log.recovery_point(),
                    log_start_offset: p.log.log_start_offset(),
                    cleaner_offset: p.log.config().compact.then(|| p.log.cleaner_checkpoint()),
                    high_watermark: p.high_watermark(),
                });
            }
        }
        out
    }

    /// Closes every partition (shutdown): each entry's recovery point
    /// holds once its close resolves Ok.
    pub fn close_all(&mut self) -> Vec<(CheckpointEntry, LogDirOp)> {
        let mut out = Vec::new();
        for (topic, parts) in std::mem::take(&mut self.topics) {
            for (partition, p) in parts {
                let cleaner_offset = p.log.config().compact.then(|| p.log.cleaner_checkpoint());
                let high_watermark = p.high_watermark();
                let log_dir_index = self.log_dir_index(&topic, partition);
                self.cleaner.forget(p.log.dir());
                match p.close() {
                    Ok(closed) => out.push((
                        CheckpointEntry {
                            log_dir_index,
                            topic: topic.clone(),
                            partition,
                            recovery_point: closed.log_end_offset,
                            log_start_offset: closed.log_start_offset,
                            cleaner_offset,
                            high_watermark,
                        },
                        closed.closed,
                    )),
                    Err(e) => log::error!("closing {topic}-{partition}: {e}"),
                }
            }
        }
        out
    }
}

/// A partition that takes appends now: led here, no role change or
/// leader-epoch write in progress; else the error a writer gets.
fn appendable<'a>(
    topics: &'a mut HashMap<String, HashMap<i32, Partition>>,
    topic: &str,
    partition: i32,
    absent: ErrorCode,
) -> Result<&'a mut Partition, ErrorCode> {
    match topics.get_mut(topic).and_then(|t| t.get_mut(&partition)) {
        Some(p) if p.accepts_appends() => Ok(p),
        Some(_) => Err(errors::NOT_LEADER_OR_FOLLOWER),
        None => Err(absent),
    }
}
