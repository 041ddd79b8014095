//! Kafka's `ReplicaManager` for one shard: `append_records` (acks and
//! DelayedProduce), `fetch_messages` and the DelayedFetch long-poll, role
//! changes (`become_leader_or_follower`, `stop_replicas`) and the purgatory
//! ticker. The purgatories' context is `Partitions`, a sibling field, so a
//! delayed operation sees the partitions and never the purgatory holding it.
//!
//! Ordering contract: every method that returns a future runs its
//! synchronous part (the appends in particular) before it returns, so work
//! is applied in the order requests arrived on the shard.

use std::cell::{Cell, Ref, RefCell, RefMut};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use kshard_shards::log::config::IoMode;
use kshard_shards::log::page_cache::ColdRange;
use kshard_shards::log::read_cache::{ReadCache, DEFAULT_READ_CACHE_CAPACITY_BYTES};
use kshard_shards::mailbox::LocalBoxFuture;
use kshard_shards::oneshot;
use kshard_shards::placement;
use kshard_shards::timer::purgatory::{DelayedOperation, Purgatory};

use super::delayed_fetch::{DelayedFetch, FetchWaitState};
use super::delayed_produce::{append_one, DelayedProduce, ProduceWait};
use super::fetcher::ReplicaFetcherManager;
use super::parked_appends::ParkedAppends;
use super::partitions::{log_dir_op_done, PreparedLogs};
use super::parts::*;
use super::role_changes::PARTITIONS_PER_STEP;
use super::{LogDirs, Partitions};
use crate::cluster::ClusterHandle;
use crate::config::{BrokerConfig, LogIoMode};
use crate::metadata::checkpoints::StartupCheckpoints;
use crate::metadata::metadata_cache::{MetadataCache, TopicInfo};
use crate::protocol::errors;
use crate::protocol::errors::ErrorCode;
use crate::security::inter_broker::InterBrokerSecurity;
use crate::util::{monotonic_ms, now_ms};

/// The longest a role change or close waits for staged appends to land.
const QUIESCE_TIMEOUT: Duration = Duration::from_secs(10);
/// The ticker's longest sleep, so that shutdown is noticed.
const TICKER_SLEEP_MAX_MS: u64 = 100;

/// Purgatory key: a partition.
type PartitionKey = (String, i32);

/// What a shard's ReplicaManager is built from.
pub struct ReplicaConfig {
    pub shard_id: usize,
    pub nr_shards: usize,
    pub broker_id: i32,
    /// The broker's `log.dirs`.
    pub log_dirs: Arc<LogDirs>,
    /// The logs found at start-up this shard owns, with their checkpoints.
    pub startup_checkpoints: StartupCheckpoints,
    pub config: Arc<BrokerConfig>,
    pub metadata: Arc<MetadataCache>,
    /// Cluster mode: the ZooKeeper membership, for AlterPartition.
    pub cluster: Option<Arc<ClusterHandle>>,
    /// The broker's bound on cleaning passes at once.
    pub cleaner_slots: Arc<crate::replica::cleaner_slots::CleanerSlots>,
    /// The broker's replication quotas (shared by every shard).
    pub replication_quotas: super::ReplicationQuotas,
}

pub struct ReplicaManager {
    pub shard_id: usize,
    nr_shards: usize,
    pub broker_id: i32,
    pub config: Arc<BrokerConfig>,
    pub metadata: Arc<MetadataCache>,
    pub cluster: Option<Arc<ClusterHandle>>,
    partitions: RefCell<Partitions>,
    fetch_purgatory: RefCell<Purgatory<PartitionKey, DelayedFetch, Partitions>>,
    /// acks=all produces waiting for the high watermark.
    produce_purgatory: RefCell<Purgatory<PartitionKey, DelayedProduce, Partitions>>,
    /// Produce appends waiting for their partition's fence to lift.
    pub(super) parked_appends: RefCell<ParkedAppends>,
    /// Wakes the purgatory ticker when an earlier deadline arrives.
    ticker_wake_ms: Cell<Option<u64>>,
    ticker_notify: RefCell<Option<std::task::Waker>>,
    /// An AlterPartition sender task is running for this shard.
    pub(super) alter_isr_in_flight: Cell<bool>,
    /// Follower fetchers for the partitions this shard follows.
    pub(super) replica_fetchers: RefCell<ReplicaFetcherManager>,
    /// Blocks of direct-mode segments for fetch (DMA reads, no page cache).
    pub read_cache: Rc<ReadCache>,
    shutting_down: Cell<bool>,
}

impl ReplicaManager {
    /// How this broker's own clients reach the other brokers (plaintext
    /// outside a cluster).
    pub fn inter_broker_security(&self) -> Arc<InterBrokerSecurity> {
        self.cluster
            .as_ref()
            .map_or_else(InterBrokerSecurity::plaintext, |c| c.inter_broker.clone())
    }

    pub fn new(rc: ReplicaConfig) -> Self {
        let config = rc.config;
        let io_mode = match config.log_io_mode {
            LogIoMode::Direct => IoMode::Direct,
            LogIoMode::Buffered if config.log_io_offload_writes => IoMode::BufferedOffload,
            LogIoMode::Buffered => IoMode::Buffered,
        };
        let mut partitions = Partitions::new(
            rc.log_dirs,
            rc.startup_checkpoints,
            config.producer_id_expiration_ms as i64,
            io_mode,
        );
        partitions.set_cleaner_backoff_ms(config.log_cleaner_backoff_ms);
        partitions.set_cleaner_enabled(config.log_cleaner_enable);
        partitions.set_cleaner_slots(rc.cleaner_slots);
        partitions.set_cluster_mode(rc.cluster.is_some());
        partitions.set_replica_lag_time_max_ms(config.replica_lag_time_max_ms);
        partitions.set_leader_quota(rc.replication_quotas.leader.clone());
        partitions.set_alter_log_dirs_quota(rc.replication_quotas.alter_log_dirs.clone());
        let inter_broker = rc
            .cluster
            .as_ref()
            .map_or_else(InterBrokerSecurity::plaintext, |c| c.inter_broker.clone());
        let mut replica_fetchers =
            ReplicaFetcherManager::new(rc.shard_id, rc.broker_id, &config, inter_broker);
        replica_fetchers.set_quota(rc.replication_quotas.follower.clone());
        // The purgatories run on the monotonic clock, as Kafka's (hiResClockMs).
        let now = monotonic_ms();
        assert!(rc.shard_id < rc.nr_shards);
        ReplicaManager {
            shard_id: rc.shard_id,
            nr_shards: rc.nr_shards,
            broker_id: rc.broker_id,
            replica_fetchers: RefCell::new(replica_fetchers),
            config,
            metadata: rc.metadata,
            cluster: rc.cluster,
            partitions: RefCell::new(partitions),
            fetch_purgatory: RefCell::new(Purgatory::new("fetch", 1, 512, now)),
            produce_purgatory: RefCell::new(Purgatory::new("produce", 1, 512, now)),
            parked_appends: RefCell::new(ParkedAppends::default()),
            ticker_wake_ms: Cell::new(None),
            ticker_notify: RefCell::new(None),
            alter_isr_in_flight: Cell::new(false),
            read_cache: Rc::new(ReadCache::new(DEFAULT_READ_CACHE_CAPACITY_BYTES)),
            shutting_down: Cell::new(false),
        }
    }

    pub fn partitions(&self) -> Ref<'_, Partitions> {
        self.partitions.borrow()
    }

    pub fn partitions_mut(&self) -> RefMut<'_, Partitions> {
        self.partitions.borrow_mut()
    }

    pub fn is_shutting_down(&self) -> bool {
        self.shutting_down.get()
    }

    /// A partition is touched only by the shard that owns it.
    pub(super) fn assert_owned(&self, topic: &str, partition: i32) {
        assert_eq!(
            placement::shard_for(topic, partition, self.nr_shards),
            self.shard_id,
            "{topic}-{partition} belongs to another shard"
        );
    }

    /// Kafka's `appendRecords`: appends each part on its partition now (a
    /// part whose partition is fenced waits its turn, see `parked_appends`),
    /// then waits as `acks` asks (acks=all: the high watermark; acks=1: a
    /// staged append written) in a DelayedProduce.
    pub fn append_records(
        self: &Rc<Self>,
        parts: Vec<ProducePart>,
        acks: i16,
        timeout_ms: u64,
    ) -> LocalBoxFuture<Vec<ProducePartResult>> {
        let now = now_ms();
        let deadline_ms = monotonic_ms() + timeout_ms;
        for part in &parts {
            self.assert_owned(&part.topic, part.partition);
        }
        let mut waiting = Vec::new();
        let mut parked = Vec::new();
        let mut results = Vec::with_capacity(parts.len());
        for (index, part) in parts.iter().enumerate() {
            let (result, wait) = append_one(&mut self.partitions_mut(), part, acks, now, index);
            if result.error_code == errors::NOT_LEADER_OR_FOLLOWER && self.must_park(part) {
                parked.push(self.park(part, acks, index));
                // Replaced by the parked append's outcome.
                results.push(ProducePartResult::failed(errors::REQUEST_TIMED_OUT));
                continue;
            }
            debug_assert!(
                result.error_code != errors::NONE
                    || !self
                        .parked_appends
                        .borrow()
                        .is_waiting(&part.topic, part.partition),
                "an append overtook parked ones"
            );
            waiting.extend(wait.map(Some));
            results.push(result);
        }
        for (part, result) in parts.iter().zip(&results) {
            if result.error_code == errors::NONE {
                self.after_append(&part.topic, part.partition);
            }
        }
        if parked.is_empty() {
            return self.wait_for_acks(waiting, results, deadline_ms);
        }
        let rm = self.clone();
        Box::pin(async move {
            for p in parked {
                let index = p.index;
                let (result, wait) = rm.parked_outcome(p, deadline_ms).await;
                if result.error_code == errors::NONE {
                    let part = &parts[index];
                    rm.after_append(&part.topic, part.partition);
                }
                waiting.extend(wait.map(Some));
                results[index] = result;
            }
            rm.wait_for_acks(waiting, results, deadline_ms).await
        })
    }

    /// Staged appends need their writer; written ones wake followers'
    /// fetches (and consumers', if the high watermark moved).
    fn after_append(self: &Rc<Self>, topic: &str, partition: i32) {
        self.schedule_direct_write(topic, partition);
        self.on_high_watermark_advanced(topic, partition);
    }

    /// The DelayedProduce of appended parts: resolves with `results` once
    /// every wait is satisfied, failed or past `deadline_ms`.
    fn wait_for_acks(
        &self,
        waiting: Vec<Option<ProduceWait>>,
        results: Vec<ProducePartResult>,
        deadline_ms: u64,
    ) -> LocalBoxFuture<Vec<ProducePartResult>> {
        if waiting.is_empty() {
            return Box::pin(async move { results });
        }
        let parts_count = results.len();
        let (tx, rx) = oneshot::channel();
        let keys: Vec<PartitionKey> = waiting
            .iter()
            .flatten()
            .map(|w| (w.topic.clone(), w.partition))
            .collect();
        let op = DelayedProduce {
            waiting,
            results,
            done: Some(tx),
        };
        self.watch_produce(op, deadline_ms, &keys);
        Box::pin(async move {
            rx.await.unwrap_or_else(|_| {
                // The purgatory dropped the operation (the shard is closing).
                vec![ProducePartResult::failed(errors::NOT_LEADER_OR_FOLLOWER); parts_count]
            })
        })
    }

    /// The group coordinator's append (Kafka's `appendRecords` with
    /// `AppendOrigin.Coordinator`): one batch on a local partition, now; the
    /// coordinator's state follows the outcome. `leader_epoch` is the
    /// coordinator's epoch: once the partition's leader epoch moved, the
    /// coordinator is stale and the append is refused with
    /// NOT_LEADER_OR_FOLLOWER. With acks=all the caller then waits in
    /// `wait_for_high_watermark`.
    pub fn append_for_coordinator(
        &self,
        part: &ProducePart,
        leader_epoch: i32,
        acks: i16,
    ) -> ProducePartResult {
        self.assert_owned(&part.topic, part.partition);
        let result = {
            let mut partitions = self.partitions_mut();
            let current_epoch = partitions
                .partition(&part.topic, part.partition)
                .map(|p| p.leader_epoch);
            if current_epoch != Some(leader_epoch) {
                return ProducePartResult::failed(errors::NOT_LEADER_OR_FOLLOWER);
            }
            if acks == -1 {
                if let Some(code) = partitions.check_enough_replicas(&part.topic, part.partition) {
                    return ProducePartResult::failed(code);
                }
            }
            partitions.append(part, now_ms() as i64, AppendOrigin::Coordinator)
        };
        if result.error_code == errors::NONE {
            self.on_high_watermark_advanced(&part.topic, part.partition);
        }
        result
    }

    /// KIP-890: each part's verification guard (see
    /// `Partitions::prepare_txn_verification`).
    pub fn prepare_txn_verification(
        &self,
        parts: &[TxnVerifyPart],
    ) -> Vec<Result<Option<u64>, ErrorCode>> {
        let mut partitions = self.partitions_mut();
        parts
            .iter()
            .map(|p| {
                self.assert_owned(&p.topic, p.partition);
                partitions.prepare_txn_verification(p)
            })
            .collect()
    }

    /// Kafka's activeProducerState for partitions led here.
    pub fn active_producers(
        &self,
        parts: &[(String, i32)],
    ) -> Vec<Result<Vec<ActiveProducer>, ErrorCode>> {
        let partitions = self.partitions();
        parts
            .iter()
            .map(|(topic, partition)| partitions.active_producers(topic, *partition))
            .collect()
    }

    /// WriteTxnMarkers on this shard (Kafka appends markers with
    /// acks=all): each marker is appended now and answered once
    /// replicated, or with its partition's error.
    pub fn write_txn_markers(
        self: &Rc<Self>,
        parts: Vec<TxnMarkerPart>,
        timeout_ms: u64,
    ) -> LocalBoxFuture<Vec<ErrorCode>> {
        let now = now_ms() as i64;
        let mut results = Vec::with_capacity(parts.len());
        let mut appended = Vec::new();
        {
            let mut partitions = self.partitions_mut();
            for (i, p) in parts.iter().enumerate() {
                self.assert_owned(&p.topic, p.partition);
                if let Some(code) = partitions.check_enough_replicas(&p.topic, p.partition) {
                    results.push(code);
                    continue;
                }
                match partitions.append_txn_marker(p, now) {
                    Ok(end_offset) => {
                        results.push(errors::NONE);
                        appended.push((i, end_offset));
                    }
                    Err(code) => results.push(code),
                }
            }
        }
        let mut waits = Vec::with_capacity(appended.len());
        for (i, end_offset) in appended {
            let p = &parts[i];
            self.schedule_direct_write(&p.topic, p.partition);
            self.on_high_watermark_advanced(&p.topic, p.partition);
            waits.push((
                i,
                self.wait_for_high_watermark(&p.topic, p.partition, end_offset, timeout_ms),
            ));
        }
        Box::pin(async move {
            for (i, wait) in waits {
                results[i] = wait.await;
            }
            results
        })
    }

    /// Resolves once the high watermark of a partition this broker leads
    /// reaches `required_offset` (Kafka's DelayedProduce for acks=all):
    /// NONE, NOT_ENOUGH_REPLICAS_AFTER_APPEND, NOT_LEADER_OR_FOLLOWER when
    /// leadership moved, or REQUEST_TIMED_OUT after `timeout_ms`.
    pub fn wait_for_high_watermark(
        &self,
        topic: &str,
        partition: i32,
        required_offset: i64,
        timeout_ms: u64,
    ) -> LocalBoxFuture<ErrorCode> {
        self.assert_owned(topic, partition);
        let (tx, rx) = oneshot::channel();
        let op = DelayedProduce {
            waiting: vec![Some(ProduceWait {
                topic: topic.to_string(),
                partition,
                required_offset,
                until_high_watermark: true,
                index: 0,
            })],
            results: vec![ProducePartResult::nothing_appended()],
            done: Some(tx),
        };
        let deadline_ms = monotonic_ms() + timeout_ms;
        self.watch_produce(op, deadline_ms, &[(topic.to_string(), partition)]);
        Box::pin(async move {
            match rx.await {
                Ok(results) => results[0].error_code,
                // The purgatory dropped the operation (the shard is closing).
                Err(_) => errors::NOT_LEADER_OR_FOLLOWER,
            }
        })
    }

    /// The closed-segment bytes `parts` would read that are not in the page
    /// cache: read them in off the shard before `fetch_messages`, which
    /// would otherwise wait for the disk on the shard.
    pub fn cold_fetch_ranges(&self, parts: &[FetchPart]) -> Vec<ColdRange> {
        let partitions = self.partitions();
        parts
            .iter()
            .filter_map(|part| {
                let p = partitions.partition(&part.topic, part.partition)?;
                p.log.cold_range(part.fetch_offset, part.max_bytes)
            })
            .collect()
    }

    /// Kafka's `fetchMessages`, the read: each part in order under `budget`.
    /// A follower's fetch may move the high watermark or the ISR.
    pub fn fetch_messages(
        self: &Rc<Self>,
        parts: &[FetchPart],
        mut budget: FetchBudget,
    ) -> Vec<FetchPartResult> {
        let now = now_ms() as i64;
        for part in parts {
            self.assert_owned(&part.topic, part.partition);
        }
        let results = {
            let mut partitions = self.partitions_mut();
            parts
                .iter()
                .map(|p| partitions.read(p, &mut budget, now))
                .collect()
        };
        let mut from_follower = false;
        for p in parts.iter().filter(|p| p.replica_id >= 0) {
            from_follower = true;
            self.on_high_watermark_advanced(&p.topic, p.partition);
        }
        if from_follower {
            self.schedule_alter_isr();
        }
        results
    }

    /// Parks this shard's part of a long-poll fetch (Kafka's DelayedFetch);
    /// the future resolves when it completes or expires.
    pub fn park_fetch(
        &self,
        parts: Vec<FetchPart>,
        max_wait_ms: u64,
        state: Arc<FetchWaitState>,
        slot: usize,
    ) -> LocalBoxFuture<()> {
        let (tx, rx) = oneshot::channel();
        let keys: Vec<PartitionKey> = parts
            .iter()
            .map(|p| (p.topic.clone(), p.partition))
            .collect();
        let op = DelayedFetch {
            parts,
            state,
            slot,
            done: Some(tx),
        };
        self.watch_fetch(op, monotonic_ms() + max_wait_ms, &keys);
        Box::pin(async move {
            let _ = rx.await;
        })
    }

    pub fn list_offsets(&self, parts: &[ListOffsetsPart]) -> Vec<ListOffsetsPartResult> {
        let partitions = self.partitions();
        parts.iter().map(|p| partitions.list_offset(p)).collect()
    }

    pub fn legacy_list_offsets(
        &self,
        parts: &[LegacyListOffsetsPart],
    ) -> Vec<Result<Vec<i64>, ErrorCode>> {
        let partitions = self.partitions();
        let now = now_ms() as i64;
        parts
            .iter()
            .map(|p| partitions.legacy_offsets_before(p, now))
            .collect()
    }

    pub fn delete_records(&self, parts: &[DeleteRecordsPart]) -> Vec<DeleteRecordsPartResult> {
        let mut partitions = self.partitions_mut();
        parts.iter().map(|p| partitions.delete_records(p)).collect()
    }

    pub fn offsets_for_leader_epoch(&self, queries: &[EpochQuery]) -> Vec<EpochEndOffset> {
        let partitions = self.partitions();
        queries
            .iter()
            .map(|q| partitions.offset_for_leader_epoch(q))
            .collect()
    }

    /// Opens (creating if needed) this shard's logs of `topic`; resolves
    /// once their leader-epoch checkpoints are durable.
    pub fn open_logs(
        self: &Rc<Self>,
        topic: Arc<TopicInfo>,
        partition_ids: Vec<i32>,
    ) -> LocalBoxFuture<()> {
        for &p in &partition_ids {
            self.assert_owned(&topic.name, p);
        }
        let prepare = self.prepare_new_logs(&topic, &partition_ids);
        if prepare.is_none() {
            self.open_partitions_logged(&topic, &partition_ids, &mut PreparedLogs::new());
        }
        let rm = self.clone();
        Box::pin(async move {
            if let Some(prepare) = prepare {
                let mut prepared = prepare.await;
                // In steps, as LeaderAndIsr's (`role_changes` says why);
                // CreateTopics answers after the last.
                for step in partition_ids.chunks(PARTITIONS_PER_STEP) {
                    rm.open_partitions_logged(&topic, step, &mut prepared);
                    glommio::yield_if_needed().await;
                }
            }
            // An error is logged and leaves the partitions refusing appends.
            let _ = rm.sync_leader_epochs(&topic.name, &partition_ids).await;
        })
    }

    /// Opens `topic`'s partitions `ids`; an error is logged (the partitions
    /// it left closed answer as absent).
    fn open_partitions_logged(&self, topic: &TopicInfo, ids: &[i32], prepared: &mut PreparedLogs) {
        let opened = self
            .partitions_mut()
            .open_partitions(topic, ids, now_ms() as i64, prepared);
        if let Err(e) = opened {
            log::error!("opening logs of {}: {e}", topic.name);
        }
    }

    pub fn update_topic_config(&self, topic: &TopicInfo) {
        self.partitions_mut().update_topic_config(topic);
    }

    pub fn checkpoints(&self) -> Vec<CheckpointEntry> {
        self.partitions().checkpoints()
    }

    /// Deletes this shard's logs of `topic`, once its staged appends landed;
    /// `then` runs right after, in the same step.
    pub fn delete_logs(
        self: &Rc<Self>,
        topic: String,
        then: impl FnOnce(&str) + 'static,
    ) -> LocalBoxFuture<()> {
        let ids: Vec<PartitionKey> = self
            .partitions()
            .partition_ids(&topic)
            .into_iter()
            .map(|p| (topic.clone(), p))
            .collect();
        let deleted = self.run_quiesced(ids, move |rm| {
            let ids = rm.partitions().partition_ids(&topic);
            let deletions = rm.partitions_mut().delete_topic(&topic);
            // Fetches parked on the deleted partitions complete with the error.
            for p in ids {
                rm.on_high_watermark_advanced(&topic, p);
            }
            then(&topic);
            (topic, deletions)
        });
        Box::pin(async move {
            let (topic, deletions) = deleted.await;
            for deletion in deletions {
                if let Err(e) = log_dir_op_done(deletion).await {
                    log::error!("deleting logs of {topic}: {e}");
                }
            }
        })
    }

    /// StopReplica: closes (with `delete`, removes) this shard's logs of
    /// `topic`'s `parts`; `then` runs right after, in the same step.
    pub fn stop_replicas(
        self: &Rc<Self>,
        topic: String,
        parts: Vec<StopReplicaPart>,
        delete: bool,
        then: impl FnOnce(&str) + 'static,
    ) -> LocalBoxFuture<Vec<ErrorCode>> {
        let ids: Vec<PartitionKey> = parts.iter().map(|p| (topic.clone(), p.partition)).collect();
        let stopped = self.run_quiesced(ids, move |rm| {
            let stopped = rm.partitions_mut().stop_replicas(&topic, &parts, delete);
            for p in &parts {
                rm.on_high_watermark_advanced(&topic, p.partition);
            }
            then(&topic);
            (topic, stopped)
        });
        Box::pin(async move {
            // Answered once the logs are closed (flushed) or their
            // directories renamed away, as Kafka's stopReplicas closes or
            // renames before it answers.
            let (topic, (mut codes, queued)) = stopped.await;
            for (i, op) in queued {
                if let Err(e) = log_dir_op_done(op).await {
                    log::error!("stopping replica of {topic}: {e}");
                    codes[i] = errors::KAFKA_STORAGE_ERROR;
                }
            }
            codes
        })
    }

    /// Runs `apply` on partitions `ids` at once if none has staged appends
    /// (always so in buffered mode, keeping arrival order); otherwise fences
    /// their appends, waits for the staged ones to be written, then applies.
    pub(super) fn run_quiesced<R: 'static>(
        self: &Rc<Self>,
        ids: Vec<PartitionKey>,
        apply: impl FnOnce(&Rc<Self>) -> R + 'static,
    ) -> LocalBoxFuture<R> {
        let selects = move |ids: &[PartitionKey], t: &str, p: i32| {
            ids.iter().any(|(it, ip)| it == t && *ip == p)
        };
        let busy = self
            .partitions()
            .any_staged_writes(|t, p| selects(&ids, t, p));
        if !busy {
            let r = apply(self);
            return Box::pin(async move { r });
        }
        let rm = self.clone();
        Box::pin(async move {
            rm.quiesce_direct_writes(|t, p| selects(&ids, t, p), QUIESCE_TIMEOUT)
                .await;
            let r = apply(&rm);
            rm.unfence_appends(|t, p| selects(&ids, t, p));
            r
        })
    }

    /// Registers a delayed fetch and makes sure the ticker wakes by its deadline.
    fn watch_fetch(&self, op: DelayedFetch, deadline_ms: u64, keys: &[PartitionKey]) {
        self.watch(&self.fetch_purgatory, op, deadline_ms, keys);
    }

    /// Parks an acks=all produce until its offsets are committed.
    fn watch_produce(&self, op: DelayedProduce, deadline_ms: u64, keys: &[PartitionKey]) {
        self.watch(&self.produce_purgatory, op, deadline_ms, keys);
    }

    fn watch<Op: DelayedOperation<Partitions>>(
        &self,
        purgatory: &RefCell<Purgatory<PartitionKey, Op, Partitions>>,
        op: Op,
        deadline_ms: u64,
        keys: &[PartitionKey],
    ) {
        let completed = purgatory.borrow_mut().try_complete_else_watch(
            &self.partitions.borrow(),
            op,
            deadline_ms,
            keys,
        );
        if !completed {
            self.wake_ticker_by(deadline_ms);
        }
    }

    /// Completes delayed fetches and produces watching a partition whose
    /// log end offset or high watermark moved. The caller must not hold
    /// `partitions_mut()`.
    pub fn on_high_watermark_advanced(&self, topic: &str, partition: i32) {
        let partitions = self.partitions.borrow();
        {
            let mut purgatory = self.fetch_purgatory.borrow_mut();
            if purgatory.watched_count() > 0 {
                purgatory.check_and_complete(&partitions, &(topic.to_string(), partition));
            }
        }
        let mut purgatory = self.produce_purgatory.borrow_mut();
        if purgatory.watched_count() > 0 {
            purgatory.check_and_complete(&partitions, &(topic.to_string(), partition));
        }
    }

    fn wake_ticker_by(&self, deadline_ms: u64) {
        let planned = self.ticker_wake_ms.get();
        if planned.is_none_or(|p| deadline_ms < p) {
            self.ticker_wake_ms.set(Some(deadline_ms));
            if let Some(w) = self.ticker_notify.borrow_mut().take() {
                w.wake();
            }
        }
    }

    /// The purgatory ticker: advances the timing wheels to the next deadline.
    pub async fn run_purgatory_ticker(self: Rc<Self>) {
        while !self.is_shutting_down() {
            let now = monotonic_ms();
            let next_ms = {
                let partitions = self.partitions.borrow();
                let mut fetches = self.fetch_purgatory.borrow_mut();
                let mut produces = self.produce_purgatory.borrow_mut();
                fetches.advance_clock(&partitions, now);
                produces.advance_clock(&partitions, now);
                match (fetches.next_expiration_ms(), produces.next_expiration_ms()) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                }
            };
            let wake_at = next_ms
                .unwrap_or(now + TICKER_SLEEP_MAX_MS)
                .min(now + TICKER_SLEEP_MAX_MS)
                .max(now + 1);
            self.ticker_wake_ms.set(Some(wake_at));
            let sleep_ms = wake_at.saturating_sub(now);
            let woken = futures_lite::future::or(
                async {
                    glommio::timer::sleep(Duration::from_millis(sleep_ms)).await;
                },
                TickerWait {
                    rm: &self,
                    armed: false,
                },
            );
            woken.await;
        }
    }

    /// Stops the fetchers; from here on parked fetches and produces
    /// complete at once. The logs stay open for `close_all`.
    pub fn begin_shutdown(&self) {
        self.shutting_down.set(true);
        self.partitions_mut().set_closing();
        self.replica_fetchers.borrow_mut().shutdown();
        // The fences of a closing broker do not lift.
        self.fail_parked_appends(|_, _| true, errors::NOT_LEADER_OR_FOLLOWER);
    }

    /// Answers every parked fetch now (they read what there is).
    pub fn complete_parked_fetches(&self) {
        assert!(self.is_shutting_down());
        self.fetch_purgatory
            .borrow_mut()
            .advance_clock(&self.partitions.borrow(), u64::MAX / 2);
    }
}

/// Resolves when `wake_ticker_by` is called with an earlier deadline.
struct TickerWait<'a> {
    rm: &'a ReplicaManager,
    armed: bool,
}

impl std::future::Future for TickerWait<'_> {
    type Output = ();
    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        if self.armed && self.rm.ticker_notify.borrow().is_none() {
            return std::task::Poll::Ready(());
        }
        self.armed = true;
        *self.rm.ticker_notify.borrow_mut() = Some(cx.waker().clone());
        std::task::Poll::Pending
    }
}
