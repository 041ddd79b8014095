//! A partition this broker leads: its log, its producer state, its leader
//! epoch and high watermark. Owned by exactly one shard.

pub mod follower;
pub mod leader;
pub mod leader_epoch;
pub mod leader_epoch_writes;
pub mod transactions;

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use uuid::Uuid;

use kshard_shards::log::batch::{BatchHeader, BatchIter, TimestampType};
use kshard_shards::log::config::{IoMode, LogConfig};
use kshard_shards::log::direct_write::StagedWrite;
use kshard_shards::log::log::{Log, ReadError, WriteStep};
use kshard_shards::log::log_create::PreparedLog;
use kshard_shards::log::patched::PatchedRecords;
use kshard_shards::log::producer_state::{ProducerStateManager, SequenceCheck};
use kshard_shards::log::validate::{ValidationConfig, ValidationError, Validator};
use kshard_shards::log::{FileSlice, LogAppendInfo};

use crate::config::topic::TopicConfig;
use crate::protocol::errors;
use crate::protocol::errors::ErrorCode;
use crate::replica::partition::leader_epoch::LeaderEpochCache;
use crate::replica::partition::transactions::VerificationGuard;

/// A log's close or deletion queued on the `log-dirs` thread
/// (`Log::close_queued`, `Log::delete_queued`); resolves with its result.
pub type LogDirOp = futures_channel::oneshot::Receiver<io::Result<()>>;

/// Waits for `op`'s result.
pub async fn log_dir_op_done(op: LogDirOp) -> io::Result<()> {
    op.await
        .map_err(|_| io::Error::other("the log-dirs thread dropped a job"))?
}

/// A closed partition: where its log ended and started, and its close,
/// whose success makes the log end offset its recovery point.
pub struct ClosedPartition {
    pub log_end_offset: i64,
    pub log_start_offset: i64,
    pub closed: LogDirOp,
}

/// Outcome of appending one Produce partition's records.
pub struct AppendResult {
    pub base_offset: i64,
    pub log_append_time_ms: i64,
    pub log_start_offset: i64,
}

#[derive(Debug)]
pub struct AppendError {
    pub error_code: ErrorCode,
    pub message: String,
    /// Rejected records (batch index, Kafka's message); when any, `message`
    /// is the one Kafka sends with the error code, else Kafka sends none.
    pub record_errors: Vec<(i32, String)>,
}

pub struct PartitionRead {
    pub error_code: ErrorCode,
    pub high_watermark: i64,
    pub last_stable_offset: i64,
    pub log_start_offset: i64,
    pub slice: Option<FileSlice>,
    /// Kafka's size of the read (see `ReadInfo::read_size`).
    pub read_size: u32,
}

pub struct Partition {
    pub topic: String,
    pub partition: i32,
    pub topic_id: Uuid,
    pub log: Log,
    pub producer_state: ProducerStateManager,
    pub leader_epoch_cache: LeaderEpochCache,
    pub leader_epoch: i32,
    /// False while this broker follows (cluster mode): clients get
    /// NOT_LEADER_OR_FOLLOWER.
    pub is_leader: bool,
    /// The high watermark: consumers read below it. A leader advances it
    /// as the ISR catches up; a follower takes min(LEO, leader's HW).
    hw: i64,
    /// Replication state while leading (cluster mode); see `replication`.
    pub leadership: crate::replica::partition::leader::Leadership,
    pub config: Arc<TopicConfig>,
    io_mode: IoMode,
    validation: ValidationConfig,
    /// A task is writing this log's staged appends (direct mode).
    pub direct_writer_running: bool,
    /// Produce answers NOT_LEADER_OR_FOLLOWER while set: a role change or
    /// close waits for the staged appends to land.
    pub appends_fenced: bool,
    /// A write of the leader-epoch checkpoint is queued: produce answers
    /// NOT_LEADER_OR_FOLLOWER until the batch of writes with this id is
    /// durable (see `leader_epoch`'s module comment).
    pub leader_epoch_sync_id: Option<u64>,
    /// KIP-890: the verification guard handed to each transactional
    /// producer about to start a transaction here, until its marker.
    txn_verifications: HashMap<i64, VerificationGuard>,
    next_verification_guard: u64,
    /// The log dir holding this log (an index into `LogDirs`) and that
    /// dir's offline flag: once set, the partition answers
    /// KAFKA_STORAGE_ERROR instead of touching its files.
    pub log_dir_index: usize,
    log_dir_offline: Arc<std::sync::atomic::AtomicBool>,
}

/// The log settings of a topic; `io_mode` is broker-wide (`log.io.mode`).
pub fn log_config_of(c: &TopicConfig, io_mode: IoMode) -> LogConfig {
    LogConfig {
        segment_bytes: c.segment_bytes as u64,
        segment_ms: c.segment_ms,
        retention_ms: c.retention_ms,
        retention_bytes: c.retention_bytes,
        index_interval_bytes: c.index_interval_bytes as u32,
        max_index_size_bytes: c.segment_index_bytes as u32,
        flush_interval_messages: if c.flush_messages < 0 {
            u64::MAX
        } else {
            c.flush_messages as u64
        },
        flush_interval_ms: c.flush_ms,
        preallocate: c.preallocate,
        io_mode,
        compact: c.is_compacted(),
        delete: c.is_delete(),
        delete_retention_ms: c.delete_retention_ms,
        min_cleanable_dirty_ratio: c.min_cleanable_dirty_ratio,
        min_compaction_lag_ms: c.min_compaction_lag_ms,
        max_compaction_lag_ms: c.max_compaction_lag_ms,
        file_delete_delay_ms: u64::try_from(c.file_delete_delay_ms)
            .expect("file.delete.delay.ms is validated to be at least 0"),
    }
}

pub(crate) fn validation_config_of(c: &TopicConfig) -> ValidationConfig {
    ValidationConfig {
        max_message_bytes: c.max_message_bytes.max(0) as usize,
        timestamp_type: if c.message_timestamp_type == "LogAppendTime" {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        },
        timestamp_before_max_ms: c.message_timestamp_before_max_ms,
        timestamp_after_max_ms: c.message_timestamp_after_max_ms,
        compacted: c.is_compacted(),
        allow_control_batches: false,
    }
}

impl Partition {
    /// Places the open log in log dir `index`, whose offline flag is `offline`.
    pub fn set_log_dir(&mut self, index: usize, offline: Arc<std::sync::atomic::AtomicBool>) {
        self.log_dir_index = index;
        self.log_dir_offline = offline;
    }

    /// Whether this log's dir went offline (an I/O error there).
    pub fn log_dir_offline(&self) -> bool {
        self.log_dir_offline
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Logs a storage failure with the partition's directory and its cause
    /// (Kafka names the directory with every KafkaStorageException) and
    /// makes the KAFKA_STORAGE_ERROR answer.
    pub fn storage_error(&self, what: &str, cause: &dyn std::fmt::Display) -> AppendError {
        log::error!(
            "{}-{} in dir {}: error while {what}: {cause}",
            self.topic,
            self.partition,
            self.log.dir().display()
        );
        AppendError {
            error_code: errors::KAFKA_STORAGE_ERROR,
            message: format!("Error while {what}: {cause}"),
            record_errors: Vec::new(),
        }
    }

    /// Opens the partition's log, or attaches `prepared` (made off the
    /// shard for a partition with no directory yet, see `log_create`).
    #[allow(clippy::too_many_arguments)]
    pub fn open(
        log_dir: &Path,
        topic: &str,
        partition: i32,
        topic_id: Uuid,
        config: Arc<TopicConfig>,
        recovery_point: i64,
        log_start_offset: i64,
        leader_epoch: i32,
        producer_id_expiration_ms: i64,
        io_mode: IoMode,
        now_ms: i64,
        prepared: Option<PreparedLog>,
    ) -> io::Result<Partition> {
        let dir: PathBuf = log_dir.join(format!("{topic}-{partition}"));
        let (mut log, stats) = match prepared {
            Some(prepared) => {
                assert_eq!(prepared.dir(), dir, "a log prepared for another partition");
                let log = Log::open_new(prepared, log_config_of(&config, io_mode), now_ms)?;
                (log, Default::default())
            }
            None => Log::open(
                &dir,
                log_config_of(&config, io_mode),
                recovery_point,
                log_start_offset,
                now_ms,
            )?,
        };
        if stats.segments_scanned > 0 {
            log::info!(
                "recovered {topic}-{partition}: {} segments scanned, {} batches, {} bytes truncated",
                stats.segments_scanned,
                stats.batches_recovered,
                stats.bytes_truncated
            );
        }
        let mut producer_state = ProducerStateManager::new(&dir, producer_id_expiration_ms);
        let replay_from =
            producer_state.load(log.log_start_offset(), log.log_end_offset(), now_ms)?;
        log.replay_producer_state(&mut producer_state, replay_from)?;
        let mut leader_epoch_cache = LeaderEpochCache::open(&dir)?;
        leader_epoch_cache.reset_to_log_end_queued(leader_epoch, log.log_end_offset())?;
        let initial_hw = log.log_end_offset();
        // Transactions replay completed are decided below it.
        producer_state.on_high_watermark_updated(initial_hw);
        Ok(Partition {
            topic: topic.to_string(),
            partition,
            topic_id,
            validation: validation_config_of(&config),
            log,
            producer_state,
            leader_epoch_cache,
            leader_epoch,
            is_leader: true,
            hw: initial_hw,
            leadership: crate::replica::partition::leader::Leadership::default(),
            config,
            io_mode,
            direct_writer_running: false,
            appends_fenced: false,
            leader_epoch_sync_id: None,
            txn_verifications: HashMap::new(),
            next_verification_guard: 0,
            log_dir_index: 0,
            log_dir_offline: Arc::new(std::sync::atomic::AtomicBool::new(false)),
        })
    }

    /// makeLeader / makeFollower: a new leader epoch from the controller.
    /// A leader records where its epoch starts (KIP-101); the checkpoint's
    /// write is queued for the caller to await (`take_queued_writes`).
    pub fn become_leader_or_follower(
        &mut self,
        leader_epoch: i32,
        is_leader: bool,
    ) -> io::Result<()> {
        debug_assert!(leader_epoch >= self.leader_epoch);
        self.leader_epoch = leader_epoch;
        self.is_leader = is_leader;
        if is_leader {
            self.leader_epoch_cache
                .assign_queued(leader_epoch, self.log.log_end_offset())?;
        }
        Ok(())
    }

    /// Whether produce may append: leading, no role change draining staged
    /// appends, the leader epoch durable.
    pub fn accepts_appends(&self) -> bool {
        self.is_leader && !self.appends_fenced && self.leader_epoch_sync_id.is_none()
    }

    pub fn set_config(&mut self, config: Arc<TopicConfig>) {
        self.log.set_config(log_config_of(&config, self.io_mode));
        self.validation = validation_config_of(&config);
        self.config = config;
    }

    #[inline]
    pub fn high_watermark(&self) -> i64 {
        self.hw
    }

    /// Kafka's `UnifiedLog.updateHighWatermark`: sets the high watermark to
    /// a value this partition does not control, clamped to the log. Its
    /// callers: the `replication-offset-checkpoint` read at start-up (disk
    /// input, which may name offsets recovery truncated away, or 0 below a
    /// later log start), a follower taking the leader's high watermark (it
    /// may drop when leadership moves) and a follower's truncation. So the
    /// value may go down and may lie outside the log; both are clamped
    /// rather than asserted. A leader moves its own high watermark only
    /// through `increment_high_watermark`, which asserts.
    pub fn set_high_watermark(&mut self, hw: i64) {
        self.hw = hw.clamp(self.log.log_start_offset(), self.log.log_end_offset());
        self.producer_state.on_high_watermark_updated(self.hw);
    }

    /// Kafka's `UnifiedLog.maybeIncrementHighWatermark`, once the leader has
    /// decided to move (`replication::maybe_increment_high_watermark`): the
    /// leader's high watermark only grows and never passes its log end
    /// offset (Kafka throws IllegalArgumentException there). A violation is
    /// a bug in the caller, never bad input.
    pub(crate) fn increment_high_watermark(&mut self, new_hw: i64) {
        let (old_hw, leo) = (self.hw, self.log.log_end_offset());
        assert!(
            new_hw > old_hw,
            "{}-{}: high watermark from {old_hw} to {new_hw} goes back",
            self.topic,
            self.partition
        );
        assert!(
            new_hw <= leo,
            "{}-{}: high watermark {new_hw} passes the log end offset {leo}",
            self.topic,
            self.partition
        );
        // Retention deletes segments without looking at the high watermark
        // (Kafka's deletes only below it), so the log start may have passed
        // it: start there, as `set_high_watermark` would.
        self.hw = new_hw.max(self.log.log_start_offset());
        assert!(self.hw > old_hw && self.hw <= leo);
        self.producer_state.on_high_watermark_updated(self.hw);
    }

    /// Validates, deduplicates (idempotent producers), assigns offsets and
    /// appends; with `allow_staging` a direct-mode log stages the append for
    /// an asynchronous write instead (see `kshard_shards::log::direct_write`):
    /// it is then not in the log until `complete_direct_write`.
    pub fn append_records_as_leader(
        &mut self,
        records: &Bytes,
        validator: &mut Validator,
        now_ms: i64,
        allow_staging: bool,
    ) -> Result<AppendResult, AppendError> {
        if let Some(reason) = self.log.write_failure() {
            return Err(AppendError {
                error_code: errors::KAFKA_STORAGE_ERROR,
                message: format!("the log stopped after a failed write: {reason}"),
                record_errors: Vec::new(),
            });
        }
        // Sequence checks come first: a duplicate is answered with the
        // original offsets and nothing is appended.
        let mut first = true;
        for item in BatchIter::new(records) {
            let header = match item {
                Ok((_, h, _)) => h,
                Err(e) => {
                    return Err(AppendError {
                        error_code: errors::CORRUPT_MESSAGE,
                        message: e.to_string(),
                        record_errors: Vec::new(),
                    })
                }
            };
            if !header.has_producer_id() {
                continue;
            }
            match self.producer_state.check(&header) {
                Ok(SequenceCheck::Append) => {}
                Ok(SequenceCheck::Duplicate { first_offset, .. }) if first => {
                    return Ok(AppendResult {
                        base_offset: first_offset,
                        log_append_time_ms: -1,
                        log_start_offset: self.log.log_start_offset(),
                    });
                }
                Ok(SequenceCheck::Duplicate { .. }) => {
                    return Err(AppendError {
                        error_code: errors::DUPLICATE_SEQUENCE_NUMBER,
                        message: "duplicate batch in a multi-batch produce".into(),
                        record_errors: Vec::new(),
                    })
                }
                Err(e) => {
                    log::debug!("{}-{}: {e}", self.topic, self.partition);
                    return Err(AppendError {
                        error_code: ErrorCode::from_wire(e.error_code()),
                        message: e.to_string(),
                        record_errors: Vec::new(),
                    });
                }
            }
            first = false;
        }
        self.append_data_batches(records, validator, now_ms, allow_staging)
    }

    /// Appends checked data batches under the topic's validation; the
    /// producer state follows each stored batch.
    pub(crate) fn append_data_batches(
        &mut self,
        records: &Bytes,
        validator: &mut Validator,
        now_ms: i64,
        allow_staging: bool,
    ) -> Result<AppendResult, AppendError> {
        let validation = self.validation;
        let info = self.validate_and_append(
            records,
            validator,
            now_ms,
            allow_staging,
            &validation,
            |producers, h| {
                if h.has_producer_id() {
                    producers.update(h, now_ms);
                }
            },
        )?;
        Ok(AppendResult {
            base_offset: info.first_offset,
            log_append_time_ms: info.log_append_time_ms,
            log_start_offset: self.log.log_start_offset(),
        })
    }

    /// Validates and assigns offsets, then appends (or, with
    /// `allow_staging`, stages in a direct-mode log); `on_stored` sees each
    /// stored batch's header with the producer state, in log order.
    pub(crate) fn validate_and_append(
        &mut self,
        records: &Bytes,
        validator: &mut Validator,
        now_ms: i64,
        allow_staging: bool,
        validation: &ValidationConfig,
        mut on_stored: impl FnMut(&mut ProducerStateManager, &BatchHeader),
    ) -> Result<LogAppendInfo, AppendError> {
        let next_offset = self.log.next_offset();
        let validation_error = |e: ValidationError| {
            let e = e.with_topic_partition(&format!("{}-{}", self.topic, self.partition));
            AppendError {
                error_code: ErrorCode::from_wire(e.error_code()),
                message: e.wire_message().unwrap_or_else(|| e.to_string()),
                record_errors: e.record_errors().to_vec(),
            }
        };
        // The coordinators' logs are written synchronously, their own
        // appends and the transaction markers alike: a coordinator's append
        // must never find a staged one ahead of it.
        let coordinator_log = self.topic == kshard_shards::placement::OFFSETS_TOPIC
            || self.topic == kshard_shards::placement::TRANSACTION_STATE_TOPIC;
        // The request's bytes are kept as they are, with the headers offset
        // assignment rewrote beside them: staged (direct mode, or buffered
        // near the writeback thresholds) or written at once with `pwritev`,
        // never copied to be patched.
        let mut headers = Vec::with_capacity(1);
        let info = validator
            .validate_and_patch_headers(
                records,
                next_offset,
                self.leader_epoch,
                now_ms,
                validation,
                &mut headers,
            )
            .map_err(validation_error)?;
        let patched = PatchedRecords::new(records.slice(..info.valid_bytes), headers);
        if allow_staging && !coordinator_log && self.log.stages_appends(records.len()) {
            let stored: Vec<BatchHeader> = patched.headers().flatten().collect();
            if let Err(e) = self.log.stage(patched, info) {
                return Err(self.storage_error("appending records", &e));
            }
            for h in &stored {
                on_stored(&mut self.producer_state, h);
            }
        } else {
            let rolled = match self.log.append_patched(&patched, &info, now_ms) {
                Ok(rolled) => rolled,
                Err(e) => return Err(self.storage_error("appending records", &e)),
            };
            if let Some(new_base) = rolled {
                self.snapshot_producer_state(new_base);
            }
            debug_assert_eq!(self.log.log_end_offset(), info.last_offset + 1);
            for h in patched.headers().flatten() {
                on_stored(&mut self.producer_state, &h);
            }
        }
        debug_assert_eq!(info.first_offset, next_offset);
        debug_assert_eq!(self.log.next_offset(), info.last_offset + 1);
        Ok(info)
    }

    fn snapshot_producer_state(&mut self, offset: i64) {
        if let Err(e) = self.producer_state.take_snapshot(offset) {
            log::warn!(
                "{}-{}: producer snapshot at {offset}: {e}",
                self.topic,
                self.partition
            );
        }
    }

    /// The next step of writing staged appends: a write that can start, a
    /// roll's new segment to make first, or nothing.
    pub fn begin_direct_write(&mut self, now_ms: i64) -> io::Result<WriteStep> {
        self.log.begin_write(now_ms)
    }

    /// A write from `begin_direct_write` finished: its appends join the
    /// log and may move the high watermark (true if it moved). A
    /// producer-state snapshot is taken after a roll once the log has
    /// nothing staged, so the snapshot never runs ahead of the file.
    pub fn complete_direct_write(&mut self, write: StagedWrite, result: io::Result<()>) -> bool {
        if let Err(e) = self.log.complete_write(write, result) {
            log::error!(
                "{}-{} in dir {}: direct write failed, the partition takes no more appends: {e}",
                self.topic,
                self.partition,
                self.log.dir().display()
            );
            return false;
        }
        if self.log.take_snapshot_point() {
            self.snapshot_producer_state(self.log.log_end_offset());
        }
        self.maybe_increment_high_watermark()
    }

    /// Reads for a consumer: whole batches below the high watermark.
    pub fn read(&self, fetch_offset: i64, max_bytes: u32, min_one_batch: bool) -> PartitionRead {
        let hw = self.high_watermark();
        self.read_for_consumer(fetch_offset, max_bytes, hw, min_one_batch)
    }

    /// A consumer's read below `end_offset` (the HW, or the LSO).
    pub(crate) fn read_for_consumer(
        &self,
        fetch_offset: i64,
        max_bytes: u32,
        end_offset: i64,
        min_one_batch: bool,
    ) -> PartitionRead {
        let mut out = self.read_below(fetch_offset, max_bytes, end_offset, min_one_batch, "read");
        // Kafka's createLogReadResult(e): a failed read reports no offsets.
        if out.error_code != errors::NONE {
            out.high_watermark = -1;
            out.last_stable_offset = -1;
            out.log_start_offset = -1;
        }
        out
    }

    /// Reads for a follower: whole batches up to the log end offset.
    pub fn read_for_follower(
        &self,
        fetch_offset: i64,
        max_bytes: u32,
        min_one_batch: bool,
    ) -> PartitionRead {
        let leo = self.log.log_end_offset();
        self.read_below(fetch_offset, max_bytes, leo, min_one_batch, "follower read")
    }

    /// Whole batches from `fetch_offset` below `end_offset`, with the
    /// partition's offsets; `what` names the read in a storage error's log line.
    fn read_below(
        &self,
        fetch_offset: i64,
        max_bytes: u32,
        end_offset: i64,
        min_one_batch: bool,
        what: &str,
    ) -> PartitionRead {
        let hw = self.high_watermark();
        let mut out = PartitionRead {
            error_code: errors::NONE,
            high_watermark: hw,
            last_stable_offset: self.last_stable_offset(),
            log_start_offset: self.log.log_start_offset(),
            slice: None,
            read_size: 0,
        };
        match self
            .log
            .read(fetch_offset, max_bytes, end_offset, min_one_batch)
        {
            Ok(info) => {
                out.slice = info.slice;
                out.read_size = info.read_size;
            }
            Err(ReadError::OffsetOutOfRange { .. }) => out.error_code = errors::OFFSET_OUT_OF_RANGE,
            Err(ReadError::Io(e)) => {
                log::error!(
                    "{}-{} in dir {}: {what} at {fetch_offset}: {e}",
                    self.topic,
                    self.partition,
                    self.log.dir().display()
                );
                out.error_code = errors::KAFKA_STORAGE_ERROR;
            }
        }
        out
    }

    /// Queues the log's close (fsyncs, file closes) and then the producer
    /// snapshot at its end on the `log-dirs` thread: on ext4 creating and
    /// renaming the snapshot file waits on the journal as fsyncs do.
    pub fn close(self) -> io::Result<ClosedPartition> {
        let Partition {
            log,
            producer_state,
            ..
        } = self;
        let log_end_offset = log.log_end_offset();
        let log_start_offset = log.log_start_offset();
        let snapshot = producer_state.snapshot_file(log_end_offset);
        let (done, closed) = futures_channel::oneshot::channel();
        log.close_queued(move |synced| {
            // A snapshot is never ahead of a synced log.
            let _ = done.send(synced.and_then(|()| snapshot.write_synced()));
        })?;
        Ok(ClosedPartition {
            log_end_offset,
            log_start_offset,
            closed,
        })
    }
}
