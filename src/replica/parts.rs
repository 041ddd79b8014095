//! The per-partition request and result types of the replica layer (what a
//! `ShardRequest` carries to the owning shard and back), and the offsets the
//! broker checkpoint files record.

use bytes::Bytes;

use kshard_shards::log::FileSlice;

use crate::protocol::errors;
use crate::protocol::errors::ErrorCode;
use crate::protocol::fetch_encoder::AbortedTransaction;

/// Who appends (Kafka's AppendOrigin): a client's batches are checked
/// against the producer state's sequences; a coordinator's (group offsets,
/// transactional offsets) only against its producer epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AppendOrigin {
    Client,
    Coordinator,
}

pub struct ProducePart {
    pub topic: String,
    pub partition: i32,
    pub records: Bytes,
    /// KIP-890 partition verification of a transactional producer's batch.
    pub txn_verification: TxnVerification,
}

/// Whether a transactional batch was verified with the transaction
/// coordinator before it reached the leader (KIP-890 part 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxnVerification {
    /// `transaction.partition.verification.enable=false`, or not a
    /// client's transactional batch: appended without asking.
    Off,
    /// The leader was asked first: `guard` is the verification it handed
    /// out (None: the producer's transaction had already started here).
    /// A batch that starts a transaction needs a guard still current.
    Checked { guard: Option<u64> },
}

/// A partition a transactional producer is about to write (KIP-890).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnVerifyPart {
    pub topic: String,
    pub partition: i32,
    pub producer_id: i64,
    pub producer_epoch: i16,
    /// Transaction version 2: the coordinator adds the partition and
    /// bumps the epoch at the transaction's end (Kafka's
    /// `supportsEpochBump`).
    pub supports_epoch_bump: bool,
}

#[derive(Clone, Debug)]
pub struct ProducePartResult {
    pub error_code: ErrorCode,
    /// Sent from Produce v8: Kafka has one only for rejected records.
    pub error_message: Option<String>,
    /// (batch index, message) of each rejected record (Produce v8+).
    pub record_errors: Vec<(i32, String)>,
    pub base_offset: i64,
    pub log_append_time_ms: i64,
    pub log_start_offset: i64,
}

/// One partition's state from LeaderAndIsr.
#[derive(Debug, Clone)]
pub struct RoleChange {
    pub partition: i32,
    pub leader: i32,
    pub leader_epoch: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    pub partition_epoch: i32,
}

#[derive(Clone, Debug)]
pub struct FetchPart {
    pub topic: String,
    pub partition: i32,
    pub fetch_offset: i64,
    /// The partition's limit (`partition_max_bytes`).
    pub max_bytes: u32,
    pub current_leader_epoch: i32,
    /// A follower's broker id (it reads to the log end and its fetch
    /// offset is its log end offset); -1 for consumers.
    pub replica_id: i32,
    /// Fetch v12+: the epoch of the follower's last batch, -1 if none.
    pub last_fetched_epoch: i32,
    /// isolation_level=read_committed: a consumer reads below the last
    /// stable offset and is told the aborted transactions.
    pub read_committed: bool,
}

/// Kafka's `readFromLog` limits, carried over the partitions of one fetch
/// in request order: each reads at most `min(partition_max_bytes,
/// bytes_left)`, except that the first partition with data returns its
/// first batch whole even when larger (`minOneMessage`), so consumers
/// always progress; after it, no limit is exceeded.
#[derive(Clone, Copy, Debug)]
pub struct FetchBudget {
    pub bytes_left: u32,
    pub min_one_batch: bool,
}

impl FetchBudget {
    /// A response limit of `max_bytes`; `hard_limit` (Fetch v0-v2) never
    /// exceeds it, not even by one batch.
    pub fn new(max_bytes: u32, hard_limit: bool) -> Self {
        FetchBudget {
            bytes_left: max_bytes,
            min_one_batch: !hard_limit,
        }
    }

    /// Accounts for `len` bytes returned by one partition.
    pub fn take(&mut self, len: u32) {
        if len > 0 {
            self.min_one_batch = false;
        }
        self.bytes_left = self.bytes_left.saturating_sub(len);
    }
}

/// What a parked fetch learns about one partition (Kafka's
/// `DelayedFetch.tryComplete` cases).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FetchWaitCheck {
    /// Answer now: an error, a truncation, a diverging epoch, or data on
    /// an older segment than the end offset.
    Complete,
    /// Bytes readable past the fetch offset (bounded by the partition limit).
    Bytes(u64),
}

#[derive(Clone, Debug)]
pub struct FetchPartResult {
    pub error_code: ErrorCode,
    pub high_watermark: i64,
    pub last_stable_offset: i64,
    pub log_start_offset: i64,
    pub slice: Option<FileSlice>,
    /// Kafka's size of the read, a partial trailing batch included (kshard
    /// sends whole batches only); the fetch's byte limits are charged this.
    pub read_size: u32,
    /// For a follower whose log diverged: (epoch, end offset) to truncate to.
    pub diverging_epoch: Option<(i32, i64)>,
    /// read_committed: the aborted transactions in the range read.
    pub aborted_transactions: Vec<AbortedTransaction>,
    /// A follower's fetch of a partition in this broker's leader throttled
    /// set (`leader.replication.throttled.replicas`): its bytes count
    /// against the leader replication quota.
    pub leader_throttled: bool,
}

pub struct ListOffsetsPart {
    pub topic: String,
    pub partition: i32,
    pub timestamp: i64,
    pub current_leader_epoch: i32,
    /// isolation_level=read_committed: LATEST is the last stable offset.
    pub read_committed: bool,
}

/// One partition of a ListOffsets v0 request.
pub struct LegacyListOffsetsPart {
    pub topic: String,
    pub partition: i32,
    pub timestamp: i64,
    pub max_num_offsets: i32,
    /// Replica id -1: a consumer, who never sees past the high watermark.
    pub from_consumer: bool,
}

#[derive(Clone, Debug)]
pub struct ListOffsetsPartResult {
    pub error_code: ErrorCode,
    pub timestamp: i64,
    pub offset: i64,
    pub leader_epoch: i32,
}

pub const LATEST_TIMESTAMP: i64 = -1;
pub const EARLIEST_TIMESTAMP: i64 = -2;
pub const MAX_TIMESTAMP: i64 = -3;
pub const EARLIEST_LOCAL_TIMESTAMP: i64 = -4;
pub const LATEST_TIERED_TIMESTAMP: i64 = -5;

impl ProducePartResult {
    /// A partition that was not appended, with `error_code`.
    pub fn failed(error_code: ErrorCode) -> Self {
        assert_ne!(error_code, errors::NONE);
        ProducePartResult {
            error_code,
            error_message: None,
            record_errors: Vec::new(),
            base_offset: -1,
            log_append_time_ms: -1,
            log_start_offset: -1,
        }
    }

    /// An empty message set: no error, nothing appended (no offsets).
    pub fn nothing_appended() -> Self {
        ProducePartResult {
            error_code: errors::NONE,
            error_message: None,
            record_errors: Vec::new(),
            base_offset: -1,
            log_append_time_ms: -1,
            log_start_offset: -1,
        }
    }
}

/// One partition of DeleteRecords: delete before `offset` (-1: the high watermark).
pub struct DeleteRecordsPart {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
}

#[derive(Clone, Copy, Debug)]
pub struct DeleteRecordsPartResult {
    pub error_code: ErrorCode,
    pub low_watermark: i64,
}

impl DeleteRecordsPartResult {
    /// DeleteRecordsResponse.INVALID_LOW_WATERMARK, with `error_code`.
    pub fn failed(error_code: ErrorCode) -> Self {
        DeleteRecordsPartResult {
            error_code,
            low_watermark: -1,
        }
    }
}

/// One partition of OffsetForLeaderEpoch.
pub struct EpochQuery {
    pub topic: String,
    pub partition: i32,
    /// The requester's view of the leader epoch, fenced as in Fetch (-1: none).
    pub current_leader_epoch: i32,
    /// The epoch whose end offset is asked for.
    pub leader_epoch: i32,
}

/// Kafka's `EpochEndOffset`: the largest epoch <= the asked one, and its end.
#[derive(Clone, Copy, Debug)]
pub struct EpochEndOffset {
    pub error_code: ErrorCode,
    pub leader_epoch: i32,
    pub end_offset: i64,
}

impl EpochEndOffset {
    /// Kafka's UNDEFINED_EPOCH and UNDEFINED_EPOCH_OFFSET, with `error_code`.
    pub fn failed(error_code: ErrorCode) -> Self {
        EpochEndOffset {
            error_code,
            leader_epoch: -1,
            end_offset: -1,
        }
    }
}

/// One partition of StopReplica.
#[derive(Clone, Copy, Debug)]
pub struct StopReplicaPart {
    pub partition: i32,
    /// The controller's leader epoch; -1: no check, -2: deletion, always applies.
    pub leader_epoch: i32,
}

/// One partition's line in the broker checkpoint files.
#[derive(Clone, Debug)]
pub struct CheckpointEntry {
    /// The log dir (index into `log.dirs`) whose files list this entry.
    pub log_dir_index: usize,
    pub topic: String,
    pub partition: i32,
    pub recovery_point: i64,
    pub log_start_offset: i64,
    /// The cleaner's first dirty offset, for compacted logs only.
    pub cleaner_offset: Option<i64>,
    /// For `replication-offset-checkpoint`.
    pub high_watermark: i64,
}

/// One transaction marker (Kafka's WriteTxnMarkers entry) for a partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxnMarker {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub coordinator_epoch: i32,
    /// COMMIT, else ABORT.
    pub commit: bool,
}

/// A marker to write to one partition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnMarkerPart {
    pub topic: String,
    pub partition: i32,
    pub marker: TxnMarker,
}

/// One producer a partition knows (DescribeProducers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ActiveProducer {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub last_sequence: i32,
    pub last_timestamp_ms: i64,
    pub coordinator_epoch: i32,
    /// -1: no open transaction.
    pub current_txn_start_offset: i64,
}

/// One shard's DescribeLogDirs entry: some of a topic's logs in one log dir.
#[derive(Clone, Debug, PartialEq)]
pub struct LogDirTopic {
    pub log_dir_index: usize,
    pub topic: String,
    pub partitions: Vec<LogDirPartition>,
}

/// One log in a DescribeLogDirs answer.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LogDirPartition {
    pub partition: i32,
    /// The bytes of its segments (Kafka's `log.size`).
    pub size_bytes: u64,
    pub offset_lag: i64,
    pub is_future: bool,
}
