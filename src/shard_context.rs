//! What one shard owns and serves: its partitions (ReplicaManager), its fetch
//! purgatory, its fetch sessions, and its end of the cross-shard mailbox.
//! One `ShardContext` per executor, shared by that executor's tasks via `Rc`.

use std::cell::{Cell, RefCell};
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use kshard_shards::log::read_cache::{ReadCache, DEFAULT_READ_CACHE_CAPACITY_BYTES};
use kshard_shards::mailbox::{LocalBoxFuture, Mailbox, ShardUnavailable};
use kshard_shards::placement;
use kshard_shards::timer::purgatory::Purgatory;

use crate::config::BrokerConfig;
use crate::controller::Controller;
use crate::coordinator::{CoordinatorConfig, GroupCoordinator};
use crate::delayed_fetch::DelayedFetch;
use crate::delayed_produce::DelayedProduce;
use crate::handlers::fetch::session::FetchSessionCache;
use crate::metadata_cache::{MetadataCache, TopicInfo};
use crate::protocol::{Request, Response};
use crate::replica_manager::{
    FetchPart, FetchPartResult, LegacyListOffsetsPart, ListOffsetsPart, ListOffsetsPartResult,
    ProducePart, ProducePartResult, ReplicaManager,
};

/// Work one shard asks of another. Partition work goes to the partition's
/// owner; metadata changes go to the controller shard (0).
pub enum ShardRequest {
    Produce {
        parts: Vec<ProducePart>,
        /// -1 (all), 0 or 1.
        acks: i16,
        timeout_ms: u64,
    },
    Fetch {
        parts: Vec<FetchPart>,
        isolation_level: i8,
        /// The response limit, applied to `parts` in order.
        budget: crate::replica_manager::FetchBudget,
    },
    /// Long-poll (Kafka's DelayedFetch): reply when the fetch's bytes on
    /// every shard reach its `min_bytes`, or after `max_wait_ms`.
    WaitForData {
        parts: Vec<FetchPart>,
        max_wait_ms: u64,
        state: std::sync::Arc<crate::delayed_fetch::FetchWaitState>,
        /// This shard's slot in `state`.
        slot: usize,
    },
    ListOffsets {
        parts: Vec<ListOffsetsPart>,
        isolation_level: i8,
    },
    /// ListOffsets v0: a list of segment offsets per part.
    LegacyListOffsets {
        parts: Vec<LegacyListOffsetsPart>,
    },
    DeleteRecords {
        parts: Vec<(String, i32, i64)>,
    },
    OffsetForLeaderEpoch {
        parts: Vec<(String, i32, i32, i32)>,
    },
    /// From the controller: open (creating if needed) logs for partitions.
    OpenLogs {
        topic: Arc<TopicInfo>,
        partitions: Vec<i32>,
    },
    /// From the controller: delete a topic's logs on this shard.
    DeleteLogs {
        topic: String,
    },
    /// From the controller: a topic's config changed.
    UpdateTopicConfig {
        topic: Arc<TopicInfo>,
    },
    /// A request that runs on the controller shard (topic admin).
    Forward {
        req: Request,
    },
    AutoCreateTopics {
        names: Vec<String>,
    },
    AllocateProducerId,
    /// Offsets for the broker-level checkpoint files.
    CollectCheckpoints,
    /// LeaderAndIsr on the owner: open the logs if needed, then become
    /// leader or follower at the given leader epochs.
    BecomeLeaderOrFollower {
        topic: Arc<TopicInfo>,
        parts: Vec<crate::replica_manager::RoleChange>,
        /// Live brokers from LeaderAndIsr: (id, host, port), for fetchers.
        leaders: Arc<Vec<(i32, String, u16)>>,
    },
    /// StopReplica on the owner: close (and with `delete`, remove) logs.
    StopReplicas {
        topic: String,
        /// (partition, leader epoch or -1/-2)
        parts: Vec<(i32, i32)>,
        delete: bool,
    },
    /// A controller-to-broker request, serialized on the controller shard.
    InterBroker {
        api_key: i16,
        api_version: i16,
        body: bytes::Bytes,
    },
}

pub enum ShardResponse {
    Produce(Vec<ProducePartResult>),
    Fetch(Vec<FetchPartResult>),
    ListOffsets(Vec<ListOffsetsPartResult>),
    /// Offsets, newest first, or an error code, per part.
    LegacyListOffsets(Vec<Result<Vec<i64>, i16>>),
    /// (error code, new low watermark) per part.
    DeleteRecords(Vec<(i16, i64)>),
    /// (error code, leader epoch, end offset) per part.
    OffsetForLeaderEpoch(Vec<(i16, i32, i64)>),
    Forwarded(Result<Option<Response>, String>),
    /// Error code per requested topic.
    AutoCreated(Vec<i16>),
    ProducerId(Result<i64, i16>),
    Checkpoints(Vec<CheckpointEntry>),
    /// Error code per part of BecomeLeaderOrFollower / StopReplicas.
    PartitionErrors(Vec<i16>),
    /// An encoded inter-broker response body.
    InterBroker(Result<bytes::Bytes, String>),
    Done,
}

#[derive(Clone, Debug)]
pub struct CheckpointEntry {
    pub topic: String,
    pub partition: i32,
    pub recovery_point: i64,
    pub log_start_offset: i64,
    /// The cleaner's first dirty offset, for compacted logs only.
    pub cleaner_offset: Option<i64>,
    /// For `replication-offset-checkpoint`.
    pub high_watermark: i64,
}

pub type ShardMailbox = Mailbox<ShardRequest, ShardResponse>;

pub const CONTROLLER_SHARD: usize = 0;

pub struct ShardContext {
    pub shard_id: usize,
    pub nr_shards: usize,
    pub config: Arc<BrokerConfig>,
    pub log_dir: PathBuf,
    pub metadata: Arc<MetadataCache>,
    pub replica_manager: RefCell<ReplicaManager>,
    pub fetch_purgatory: RefCell<Purgatory<(String, i32), DelayedFetch, ShardContext>>,
    /// acks=all produces waiting for the high watermark.
    pub produce_purgatory: RefCell<Purgatory<(String, i32), DelayedProduce, ShardContext>>,
    /// An AlterPartition sender task is running for this shard.
    alter_isr_in_flight: Cell<bool>,
    /// Follower fetchers for the partitions this shard follows.
    pub replica_fetchers: RefCell<crate::replica_fetcher::ReplicaFetcherManager>,
    pub fetch_sessions: RefCell<FetchSessionCache>,
    /// Only on the controller shard.
    pub controller: Option<RefCell<Controller>>,
    /// The group coordinator; only on the controller shard.
    pub coordinator: Option<RefCell<GroupCoordinator>>,
    /// Cluster mode (`zookeeper.connect`): ids, ZooKeeper and the controller thread.
    pub cluster: Option<Arc<crate::cluster::ClusterHandle>>,
    mailbox: RefCell<Option<Rc<ShardMailbox>>>,
    /// Wakes the purgatory ticker when an earlier deadline arrives.
    ticker_wake: Cell<Option<u64>>,
    ticker_notify: RefCell<Option<std::task::Waker>>,
    pub shutting_down: Cell<bool>,
    /// Blocks of direct-mode segments for fetch (DMA reads, no page cache).
    pub read_cache: Rc<ReadCache>,
}

impl ShardContext {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        shard_id: usize,
        nr_shards: usize,
        config: Arc<BrokerConfig>,
        log_dir: PathBuf,
        metadata: Arc<MetadataCache>,
        replica_manager: ReplicaManager,
        controller: Option<Controller>,
        cluster: Option<Arc<crate::cluster::ClusterHandle>>,
        now_ms: u64,
    ) -> Self {
        assert!(shard_id < nr_shards);
        // The embedded store's controller lives on shard 0; cluster mode has
        // none there (the controller is the ZooKeeper-side thread).
        assert!(controller.is_none() || shard_id == CONTROLLER_SHARD);
        assert!(cluster.is_none() || controller.is_none());
        let coordinator = (shard_id == CONTROLLER_SHARD).then(|| {
            let mut c =
                GroupCoordinator::new(CoordinatorConfig::from_broker(&config), now_ms as i64);
            // Cluster mode has no group coordinator yet (issue 15).
            c.coordinating = cluster.is_none();
            RefCell::new(c)
        });
        let replica_fetchers = crate::replica_fetcher::ReplicaFetcherManager::new(
            shard_id,
            cluster.as_ref().map_or(-1, |c| c.broker_id),
            &config,
        );
        ShardContext {
            shard_id,
            nr_shards,
            config,
            log_dir,
            metadata,
            replica_manager: RefCell::new(replica_manager),
            fetch_purgatory: RefCell::new(Purgatory::new("fetch", 1, 512, now_ms)),
            produce_purgatory: RefCell::new(Purgatory::new("produce", 1, 512, now_ms)),
            alter_isr_in_flight: Cell::new(false),
            replica_fetchers: RefCell::new(replica_fetchers),
            fetch_sessions: RefCell::new(FetchSessionCache::new(shard_id, nr_shards, 1000, now_ms)),
            controller: controller.map(RefCell::new),
            coordinator,
            cluster,
            mailbox: RefCell::new(None),
            ticker_wake: Cell::new(None),
            ticker_notify: RefCell::new(None),
            shutting_down: Cell::new(false),
            read_cache: Rc::new(ReadCache::new(DEFAULT_READ_CACHE_CAPACITY_BYTES)),
        }
    }

    pub fn set_mailbox(&self, mailbox: Rc<ShardMailbox>) {
        *self.mailbox.borrow_mut() = Some(mailbox);
    }

    /// The broker id this process runs as.
    pub fn broker_id(&self) -> i32 {
        match &self.cluster {
            Some(c) => c.broker_id,
            None => self.config.effective_broker_id(),
        }
    }

    #[inline]
    pub fn owner_of(&self, topic: &str, partition: i32) -> usize {
        placement::shard_for(topic, partition, self.nr_shards)
    }

    /// Calls another shard; `target` must not be this shard.
    pub async fn call(
        &self,
        target: usize,
        req: ShardRequest,
    ) -> Result<ShardResponse, ShardUnavailable> {
        debug_assert_ne!(target, self.shard_id);
        let mailbox = self
            .mailbox
            .borrow()
            .clone()
            .ok_or(ShardUnavailable(target))?;
        mailbox.call(target, req).await
    }

    /// Runs `req` here if `target` is this shard, else through the mailbox.
    pub async fn run_on(
        self: &Rc<Self>,
        target: usize,
        req: ShardRequest,
    ) -> Result<ShardResponse, ShardUnavailable> {
        if target == self.shard_id {
            Ok(crate::shard_handler::handle_shard_request(self.clone(), req).await)
        } else {
            self.call(target, req).await
        }
    }

    pub fn handler(
        self: &Rc<Self>,
    ) -> impl Fn(ShardRequest) -> LocalBoxFuture<ShardResponse> + 'static {
        let ctx = self.clone();
        move |req| crate::shard_handler::handle_shard_request(ctx.clone(), req)
    }

    /// Registers a delayed fetch and makes sure the ticker wakes by its deadline.
    pub fn watch_fetch(&self, op: DelayedFetch, deadline_ms: u64, keys: &[(String, i32)]) {
        let completed =
            self.fetch_purgatory
                .borrow_mut()
                .try_complete_else_watch(self, op, deadline_ms, keys);
        if !completed {
            self.wake_ticker_by(deadline_ms);
        }
    }

    /// Completes delayed fetches and produces watching a partition whose
    /// log end offset or high watermark moved.
    pub fn on_high_watermark_advanced(&self, topic: &str, partition: i32) {
        {
            let mut purgatory = self.fetch_purgatory.borrow_mut();
            if purgatory.watched_count() > 0 {
                purgatory.check_and_complete(self, &(topic.to_string(), partition));
            }
        }
        let mut purgatory = self.produce_purgatory.borrow_mut();
        if purgatory.watched_count() > 0 {
            purgatory.check_and_complete(self, &(topic.to_string(), partition));
        }
    }

    /// Parks an acks=all produce until its offsets are committed.
    pub fn watch_produce(&self, op: DelayedProduce, deadline_ms: u64, keys: &[(String, i32)]) {
        let completed = self.produce_purgatory.borrow_mut().try_complete_else_watch(
            self,
            op,
            deadline_ms,
            keys,
        );
        if !completed {
            self.wake_ticker_by(deadline_ms);
        }
    }

    /// Sends queued ISR changes to the controller, one task per shard.
    pub fn schedule_alter_isr(self: &Rc<Self>) {
        if self.alter_isr_in_flight.get() || self.cluster.is_none() {
            return;
        }
        self.alter_isr_in_flight.set(true);
        let ctx = self.clone();
        glommio::spawn_local(async move {
            loop {
                let items = ctx.replica_manager.borrow_mut().take_alter_isr_queue();
                if items.is_empty() {
                    break;
                }
                crate::cluster::alter_partition::send(&ctx, items).await;
            }
            ctx.alter_isr_in_flight.set(false);
        })
        .detach();
    }

    fn wake_ticker_by(&self, deadline_ms: u64) {
        let planned = self.ticker_wake.get();
        if planned.is_none_or(|p| deadline_ms < p) {
            self.ticker_wake.set(Some(deadline_ms));
            if let Some(w) = self.ticker_notify.borrow_mut().take() {
                w.wake();
            }
        }
    }

    /// The purgatory ticker: advances the timing wheel to the next deadline.
    pub async fn run_purgatory_ticker(self: Rc<Self>) {
        loop {
            if self.shutting_down.get() {
                return;
            }
            let now = now_ms();
            self.fetch_purgatory.borrow_mut().advance_clock(&self, now);
            self.produce_purgatory
                .borrow_mut()
                .advance_clock(&self, now);
            let next = match (
                self.fetch_purgatory.borrow().next_expiration_ms(),
                self.produce_purgatory.borrow().next_expiration_ms(),
            ) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            // Sleep until the next bucket expires, at most 100 ms so shutdown is noticed.
            let wake_at = next.unwrap_or(now + 100).min(now + 100).max(now + 1);
            self.ticker_wake.set(Some(wake_at));
            let sleep_ms = wake_at.saturating_sub(now);
            let me = self.clone();
            let woken = futures_lite::future::or(
                async {
                    glommio::timer::sleep(Duration::from_millis(sleep_ms)).await;
                },
                TickerWait {
                    ctx: &me,
                    armed: false,
                },
            );
            woken.await;
        }
    }
}

/// Resolves when `wake_ticker_by` is called with an earlier deadline.
struct TickerWait<'a> {
    ctx: &'a ShardContext,
    armed: bool,
}

impl std::future::Future for TickerWait<'_> {
    type Output = ();
    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        if self.armed && self.ctx.ticker_notify.borrow().is_none() {
            return std::task::Poll::Ready(());
        }
        self.armed = true;
        *self.ctx.ticker_notify.borrow_mut() = Some(cx.waker().clone());
        std::task::Poll::Pending
    }
}

pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}
