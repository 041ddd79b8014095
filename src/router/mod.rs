//! Cross-shard calls: what one shard asks of another (`ShardRequest`, plain
//! data) and how it gets there (`Router`: the mailbox to other shards, or the
//! local dispatcher for this one). The router does not know what a request
//! does: `server::shard` installs the dispatcher when the shard starts, so
//! nothing here calls up into handlers. The fan-out helpers over several
//! shards are in `fan_out`.

pub mod fan_out;

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;

use kshard_shards::mailbox::{LocalBoxFuture, Mailbox, ShardUnavailable};
use kshard_shards::placement;

use crate::metadata::metadata_cache::TopicInfo;
use crate::protocol::errors::ErrorCode;
use crate::protocol::{Request, Response};
use crate::replica::delayed_fetch::FetchWaitState;
use crate::replica::fetcher::LeaderEndpoint;
use crate::replica::{
    ActiveProducer, CheckpointEntry, DeleteRecordsPart, DeleteRecordsPartResult, EpochEndOffset,
    EpochQuery, FetchBudget, FetchPart, FetchPartResult, LegacyListOffsetsPart, ListOffsetsPart,
    ListOffsetsPartResult, LogDirTopic, LogDirsFilter, ProducePart, ProducePartResult, RoleChange,
    StopReplicaPart, TxnMarkerPart, TxnVerifyPart,
};

pub use fan_out::{join_all, select_first, wait_for_data, write_txn_markers, ShardGroups};

/// The shard that runs topic admin and the group coordinator.
pub const CONTROLLER_SHARD: usize = 0;

/// Work one shard asks of another. Partition work goes to the partition's
/// owner; metadata changes and group requests to `CONTROLLER_SHARD`.
pub enum ShardRequest {
    Produce {
        parts: Vec<ProducePart>,
        /// -1 (all), 0 or 1.
        acks: i16,
        timeout_ms: u64,
    },
    Fetch {
        parts: Vec<FetchPart>,
        /// The response limit, applied to `parts` in order.
        budget: FetchBudget,
    },
    /// Long-poll (Kafka's DelayedFetch): reply when the fetch's bytes on
    /// every shard reach its `min_bytes`, or after `max_wait_ms`.
    WaitForData {
        parts: Vec<FetchPart>,
        max_wait_ms: u64,
        state: Arc<FetchWaitState>,
        /// This shard's slot in `state`.
        slot: usize,
    },
    ListOffsets {
        parts: Vec<ListOffsetsPart>,
    },
    /// ListOffsets v0: a list of segment offsets per part.
    LegacyListOffsets {
        parts: Vec<LegacyListOffsetsPart>,
    },
    DeleteRecords {
        parts: Vec<DeleteRecordsPart>,
    },
    OffsetForLeaderEpoch {
        parts: Vec<EpochQuery>,
    },
    /// From the topic admin: open (creating if needed) logs for partitions.
    OpenLogs {
        topic: Arc<TopicInfo>,
        partitions: Vec<i32>,
    },
    /// From the topic admin: delete a topic's logs on this shard.
    DeleteLogs {
        topic: String,
    },
    /// From the topic admin: these topics' configs changed; the shard
    /// takes them from the metadata image (so it always applies the latest).
    UpdateTopicConfigs {
        topics: Arc<Vec<String>>,
    },
    /// A request that runs on the controller shard (topic admin, groups).
    Forward {
        req: Request,
    },
    AutoCreateTopics {
        names: Vec<String>,
    },
    AllocateProducerId,
    /// KIP-890: verification guards for a transactional producer's parts.
    PrepareTxnVerification {
        parts: Vec<TxnVerifyPart>,
    },
    /// KIP-890, on the controller shard: whether each (topic, partition)
    /// is in the producer's ongoing transaction (AddPartitionsToTxn
    /// verify_only, answered by this broker's transaction coordinator).
    /// With `add` (transaction version 2), adds them instead
    /// (AddPartitionsToTxn v4+ without verify_only).
    VerifyTxnPartitions {
        transactional_id: String,
        producer_id: i64,
        producer_epoch: i16,
        parts: Vec<(String, i32)>,
        add: bool,
    },
    /// DescribeProducers for partitions this shard owns: (topic, partition).
    DescribeProducers {
        parts: Vec<(String, i32)>,
    },
    /// DescribeLogDirs: this shard's open logs by log dir.
    DescribeLogDirs {
        filter: LogDirsFilter,
    },
    /// AlterReplicaLogDirs for partitions this shard owns: (topic,
    /// partition, target log dir index); answered with one error each.
    AlterReplicaLogDirs {
        parts: Vec<(String, i32, usize)>,
    },
    /// WriteTxnMarkers for partitions this shard owns; answered once each
    /// marker is replicated (or with its error).
    WriteTxnMarkers {
        parts: Vec<TxnMarkerPart>,
        timeout_ms: u64,
    },
    /// Offsets for the broker-level checkpoint files.
    CollectCheckpoints,
    /// LeaderAndIsr on the owner: open the logs if needed, then become
    /// leader or follower at the given leader epochs.
    BecomeLeaderOrFollower {
        topic: Arc<TopicInfo>,
        parts: Vec<RoleChange>,
        /// Live brokers from LeaderAndIsr, for the fetchers.
        leaders: Arc<Vec<LeaderEndpoint>>,
    },
    /// StopReplica on the owner: close (and with `delete`, remove) logs.
    StopReplicas {
        topic: String,
        parts: Vec<StopReplicaPart>,
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
    LegacyListOffsets(Vec<Result<Vec<i64>, ErrorCode>>),
    DeleteRecords(Vec<DeleteRecordsPartResult>),
    OffsetForLeaderEpoch(Vec<EpochEndOffset>),
    Forwarded(Result<Option<Response>, String>),
    /// Error code per requested topic.
    AutoCreated(Vec<ErrorCode>),
    ProducerId(Result<i64, ErrorCode>),
    /// Error code per marker of WriteTxnMarkers.
    TxnMarkers(Vec<ErrorCode>),
    /// Per PrepareTxnVerification part: its guard, or its error.
    VerificationGuards(Vec<Result<Option<u64>, ErrorCode>>),
    /// Per DescribeProducers part: its producers, or its error.
    Producers(Vec<Result<Vec<ActiveProducer>, ErrorCode>>),
    /// DescribeLogDirs entries of one shard.
    LogDirs(Vec<LogDirTopic>),
    Checkpoints(Vec<CheckpointEntry>),
    /// Error code per part of BecomeLeaderOrFollower / StopReplicas.
    PartitionErrors(Vec<ErrorCode>),
    /// An encoded inter-broker response body.
    InterBroker(Result<bytes::Bytes, String>),
    Done,
}

pub type ShardMailbox = Mailbox<ShardRequest, ShardResponse>;

/// Runs a request on this shard: installed by `server::shard`.
pub type LocalDispatcher = Rc<dyn Fn(ShardRequest) -> LocalBoxFuture<ShardResponse>>;

/// One per shard: sends a `ShardRequest` to the shard that must run it.
pub struct Router {
    pub shard_id: usize,
    pub nr_shards: usize,
    mailbox: RefCell<Option<Rc<ShardMailbox>>>,
    local: RefCell<Option<LocalDispatcher>>,
    shutting_down: Cell<bool>,
}

impl Router {
    pub fn new(shard_id: usize, nr_shards: usize) -> Self {
        assert!(shard_id < nr_shards);
        Router {
            shard_id,
            nr_shards,
            mailbox: RefCell::new(None),
            local: RefCell::new(None),
            shutting_down: Cell::new(false),
        }
    }

    /// Joins the router to the other shards; called once at start-up.
    pub fn set_mailbox(&self, mailbox: Rc<ShardMailbox>) {
        let previous = self.mailbox.borrow_mut().replace(mailbox);
        assert!(previous.is_none(), "shard {} joined twice", self.shard_id);
    }

    /// Installs what runs this shard's own requests; called once at start-up.
    pub fn set_local_dispatcher(&self, dispatcher: LocalDispatcher) {
        let previous = self.local.borrow_mut().replace(dispatcher);
        assert!(
            previous.is_none(),
            "shard {} dispatcher set twice",
            self.shard_id
        );
    }

    /// The shard that owns a partition.
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
        assert_ne!(target, self.shard_id);
        assert!(target < self.nr_shards);
        let mailbox = self
            .mailbox
            .borrow()
            .clone()
            .ok_or(ShardUnavailable(target))?;
        mailbox.call(target, req).await
    }

    /// Runs `req` here if `target` is this shard, else through the mailbox.
    /// Either way its synchronous part runs when this future is first polled.
    pub async fn run_on(
        &self,
        target: usize,
        req: ShardRequest,
    ) -> Result<ShardResponse, ShardUnavailable> {
        if target != self.shard_id {
            return self.call(target, req).await;
        }
        let local = self
            .local
            .borrow()
            .clone()
            .ok_or(ShardUnavailable(target))?;
        Ok(local(req).await)
    }

    pub fn begin_shutdown(&self) {
        self.shutting_down.set(true);
    }

    pub fn is_shutting_down(&self) -> bool {
        self.shutting_down.get()
    }
}
