//! One module per Kafka API, as Redpanda lays them out. `dispatch` runs on the
//! connection's shard; admin APIs that change metadata are forwarded to the
//! controller shard and run there by `controller_dispatch`.

pub mod add_offsets_to_txn;
pub mod add_partitions_to_txn;
pub mod alter_client_quotas;
pub mod alter_configs;
pub mod alter_partition_reassignments;
pub mod alter_replica_log_dirs;
pub mod alter_user_scram_credentials;
pub mod api_versions;
pub mod auth_helper;
pub mod create_acls;
pub mod create_partitions;
pub mod create_topics;
pub mod delete_acls;
pub mod delete_groups;
pub mod delete_records;
pub mod delete_topics;
pub mod describe_acls;
pub mod describe_client_quotas;
pub mod describe_cluster;
pub mod describe_configs;
pub mod describe_groups;
pub mod describe_log_dirs;
pub mod describe_producers;
pub mod describe_transactions;
pub mod describe_user_scram_credentials;
pub mod elect_leaders;
pub mod end_txn;
pub mod fetch;
pub mod find_coordinator;
pub mod heartbeat;
pub mod incremental_alter_configs;
pub mod init_producer_id;
pub mod inter_broker;
pub mod join_group;
pub mod leave_group;
mod legacy_format;
pub mod list_groups;
pub mod list_offsets;
pub mod list_partition_reassignments;
pub mod list_transactions;
pub mod metadata;
pub mod offset_commit;
pub mod offset_delete;
pub mod offset_fetch;
pub mod offset_for_leader_epoch;
pub mod produce;
pub mod sasl_authenticate;
pub mod sasl_handshake;
pub mod sync_group;
pub mod txn_offset_commit;
pub mod txn_verification;
pub mod write_txn_markers;
pub mod zk_offsets;

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_protocol::messages::ApiKey;
use kafka_protocol::protocol::Encodable;

use crate::admin::TopicAdmin;
use crate::cluster::ClusterHandle;
use crate::config::dynamic::DynamicBrokerConfig;
use crate::config::BrokerConfig;
use crate::coordinator::offsets::map_store_error;
use crate::coordinator::runtime::CoordinatorRuntime;
use crate::coordinator::transaction::TransactionCoordinator;
use crate::coordinator::{GroupCoordinator, OffsetsLog, ReplicationPoint};
use crate::handlers::fetch::session::FetchSessionCache;
use crate::metadata::metadata_cache::MetadataCache;
use crate::protocol::errors;
use crate::protocol::errors::ErrorCode;
use crate::protocol::{encode_response, Request, Response};
use crate::quota::{QuotaManagers, ShardQuotaCaches};
use crate::replica::{LogDirs, ReplicaManager};
use crate::router::{Router, ShardRequest, ShardResponse, CONTROLLER_SHARD};
use crate::security::authorizer::AclAuthorizer;

/// Kafka's `KafkaApis` for one shard: what the request handlers reach. The
/// services are owned by the layers below; this only holds them.
/// How long a request that describes the cluster waits for a starting
/// broker's first UpdateMetadata (`KafkaApis::await_cluster_metadata`).
pub const CLUSTER_METADATA_WAIT_MS: u64 = 5_000;
const CLUSTER_METADATA_POLL_MS: u64 = 10;

pub struct KafkaApis {
    pub shard_id: usize,
    pub nr_shards: usize,
    /// As started; the live broker config (with dynamic values) is
    /// `dynamic_config.current()`.
    pub config: Arc<BrokerConfig>,
    pub dynamic_config: Arc<DynamicBrokerConfig>,
    /// The broker's client quotas (shared by every shard) and this shard's
    /// sensor caches.
    pub quotas: Arc<QuotaManagers>,
    pub quota_caches: ShardQuotaCaches,
    /// The broker's `log.dirs`.
    pub log_dirs: Arc<LogDirs>,
    pub metadata: Arc<MetadataCache>,
    pub router: Rc<Router>,
    pub replica_manager: Rc<ReplicaManager>,
    pub admin: Rc<TopicAdmin>,
    /// The group coordinator; only on the controller shard.
    pub coordinator: Option<Rc<CoordinatorRuntime>>,
    /// The transaction coordinator; only on the controller shard.
    pub txn_coordinator: Option<Rc<TransactionCoordinator>>,
    /// Cluster mode (`zookeeper.connect`): ids, ZooKeeper and the controller thread.
    pub cluster: Option<Arc<ClusterHandle>>,
    /// The ACL authorizer, if `authorizer.class.name` names one (every
    /// request is allowed otherwise, as in Kafka).
    pub authorizer: Option<Arc<AclAuthorizer>>,
    pub fetch_sessions: RefCell<FetchSessionCache>,
}

impl KafkaApis {
    /// The broker id this process runs as.
    pub fn broker_id(&self) -> i32 {
        self.replica_manager.broker_id
    }

    #[inline]
    pub fn owner_of(&self, topic: &str, partition: i32) -> usize {
        self.router.owner_of(topic, partition)
    }

    pub fn is_shutting_down(&self) -> bool {
        self.router.is_shutting_down()
    }

    /// A broker in a cluster learns the brokers and topics from the
    /// controller's first UpdateMetadata, which arrives a moment after its
    /// listeners open (the controller reaches it through them). A client
    /// answered in that moment would be told the cluster has no brokers,
    /// and librdkafka then forgets every broker it knew. So requests that
    /// describe the cluster wait for that first UpdateMetadata, at most
    /// `CLUSTER_METADATA_WAIT_MS`, and are answered from what is there then.
    pub async fn await_cluster_metadata(&self) {
        if self.cluster.is_none() || !self.metadata.image().brokers.is_empty() {
            return;
        }
        let deadline = Instant::now() + Duration::from_millis(CLUSTER_METADATA_WAIT_MS);
        while self.metadata.image().brokers.is_empty()
            && Instant::now() < deadline
            && !self.is_shutting_down()
        {
            glommio::timer::sleep(Duration::from_millis(CLUSTER_METADATA_POLL_MS)).await;
        }
    }

    /// Runs `f` on this shard's group coordinator; Err off the controller shard.
    pub fn with_coordinator<R>(
        &self,
        f: impl FnOnce(&mut GroupCoordinator, &mut dyn OffsetsLog, i64) -> R,
    ) -> Result<R, String> {
        match &self.coordinator {
            Some(c) => Ok(c.with_coordinator(f)),
            None => Err("the group coordinator runs on the controller shard".to_string()),
        }
    }
}

/// The transaction coordinator; requests for it run on the controller shard.
pub fn txn_coordinator(ctx: &KafkaApis) -> Result<&Rc<TransactionCoordinator>, String> {
    ctx.txn_coordinator
        .as_ref()
        .ok_or_else(|| "the transaction coordinator runs on the controller shard".to_string())
}

/// Waits until the coordinator's append at `point` is replicated as
/// offsets.commit.required.acks asks; its error mapped as Kafka's
/// storeGroup maps it (NONE when nothing was appended).
pub async fn group_stored(ctx: &KafkaApis, point: Option<ReplicationPoint>) -> ErrorCode {
    let Some(c) = &ctx.coordinator else {
        return errors::NONE;
    };
    match c.replicated(point).await {
        e if e.is_none() => e,
        e => map_store_error(e, false),
    }
}

/// `Ok(None)`: no response (acks=0 produce). `Err`: close the connection.
pub type HandlerResult = Result<Option<Response>, String>;

pub fn respond<M: Encodable + 'static>(req: &Request, body: &M) -> HandlerResult {
    encode_response(
        req.api_key,
        req.api_version,
        req.header.correlation_id,
        body,
    )
    .map(|b| Some(Response::from_bytes(b)))
}

pub async fn dispatch(ctx: &Rc<KafkaApis>, req: Request) -> HandlerResult {
    match req.api_key {
        ApiKey::ApiVersions => api_versions::handle(ctx, &req),
        ApiKey::SaslHandshake => sasl_handshake::handle(&req),
        ApiKey::SaslAuthenticate => sasl_authenticate::handle(&req),
        ApiKey::Metadata => metadata::handle(ctx, &req).await,
        ApiKey::Produce => produce::handle(ctx, &req).await,
        ApiKey::Fetch => fetch::handle(ctx, &req).await,
        ApiKey::ListOffsets => list_offsets::handle(ctx, &req).await,
        ApiKey::DeleteRecords => delete_records::handle(ctx, &req).await,
        ApiKey::OffsetForLeaderEpoch => offset_for_leader_epoch::handle(ctx, &req).await,
        ApiKey::DescribeConfigs => describe_configs::handle(ctx, &req),
        ApiKey::DescribeAcls => describe_acls::handle(ctx, &req).await,
        ApiKey::DescribeCluster => describe_cluster::handle(ctx, &req).await,
        ApiKey::WriteTxnMarkers => write_txn_markers::handle(ctx, &req).await,
        ApiKey::DescribeProducers => describe_producers::handle(ctx, &req).await,
        ApiKey::DescribeLogDirs => describe_log_dirs::handle(ctx, &req).await,
        ApiKey::AlterReplicaLogDirs => alter_replica_log_dirs::handle(ctx, &req).await,
        ApiKey::FindCoordinator => find_coordinator::handle(ctx, &req).await,
        ApiKey::ElectLeaders => elect_leaders::handle(ctx, &req).await,
        ApiKey::AlterPartitionReassignments => {
            alter_partition_reassignments::handle(ctx, &req).await
        }
        ApiKey::ListPartitionReassignments => list_partition_reassignments::handle(ctx, &req).await,
        ApiKey::AlterPartition => inter_broker::alter_partition::handle(ctx, &req).await,
        ApiKey::CreateTopics
        | ApiKey::DeleteTopics
        | ApiKey::CreatePartitions
        | ApiKey::AlterConfigs
        | ApiKey::IncrementalAlterConfigs
        | ApiKey::DescribeClientQuotas
        | ApiKey::AlterClientQuotas
        | ApiKey::DescribeUserScramCredentials
        | ApiKey::AlterUserScramCredentials
        | ApiKey::CreateAcls
        | ApiKey::DeleteAcls => forward_to_controller(ctx, req).await,
        // The group coordinator lives on the controller shard.
        ApiKey::JoinGroup
        | ApiKey::SyncGroup
        | ApiKey::Heartbeat
        | ApiKey::LeaveGroup
        | ApiKey::OffsetCommit
        | ApiKey::OffsetFetch
        | ApiKey::ListGroups
        | ApiKey::DescribeGroups
        | ApiKey::DeleteGroups
        | ApiKey::OffsetDelete => forward_to_controller(ctx, req).await,
        // So does the transaction coordinator (and producer id allocation).
        ApiKey::InitProducerId
        | ApiKey::AddPartitionsToTxn
        | ApiKey::AddOffsetsToTxn
        | ApiKey::EndTxn
        | ApiKey::TxnOffsetCommit
        | ApiKey::DescribeTransactions
        | ApiKey::ListTransactions => forward_to_controller(ctx, req).await,
        other => Err(format!("API {other:?} is not served")),
    }
}

/// Hands a request to this broker's controller thread if it is the
/// active controller (NOT_CONTROLLER otherwise: the admin client retries
/// at the controller Metadata names, as with Kafka in ZooKeeper mode).
pub(crate) async fn ask_active_controller<T>(
    cluster: &crate::cluster::ClusterHandle,
    make: impl FnOnce(
        futures_channel::oneshot::Sender<Result<T, errors::ErrorCode>>,
    ) -> crate::controller::ControllerRequest,
) -> Result<T, errors::ErrorCode> {
    if !cluster.controller.is_active() {
        return Err(errors::NOT_CONTROLLER);
    }
    let (tx, rx) = futures_channel::oneshot::channel();
    if !cluster.controller.request(make(tx)) {
        return Err(errors::NOT_CONTROLLER);
    }
    rx.await.unwrap_or(Err(errors::NOT_CONTROLLER))
}

/// Runs a metadata-changing request on the controller shard.
async fn forward_to_controller(ctx: &Rc<KafkaApis>, req: Request) -> HandlerResult {
    if ctx.shard_id == CONTROLLER_SHARD {
        return controller_dispatch(ctx, req).await;
    }
    let r = ctx
        .router
        .call(CONTROLLER_SHARD, ShardRequest::Forward { req })
        .await
        .map_err(|_| "controller shard unavailable".to_string())?;
    match r {
        ShardResponse::Forwarded(r) => r,
        _ => Err("unexpected controller reply".into()),
    }
}

/// The admin handlers; only ever called on the controller shard.
pub async fn controller_dispatch(ctx: &Rc<KafkaApis>, req: Request) -> HandlerResult {
    assert_eq!(ctx.shard_id, CONTROLLER_SHARD);
    match req.api_key {
        ApiKey::CreateTopics => create_topics::handle(ctx, &req).await,
        ApiKey::DeleteTopics => delete_topics::handle(ctx, &req).await,
        ApiKey::CreatePartitions => create_partitions::handle(ctx, &req).await,
        ApiKey::AlterConfigs => alter_configs::handle(ctx, &req).await,
        ApiKey::IncrementalAlterConfigs => incremental_alter_configs::handle(ctx, &req).await,
        ApiKey::DescribeClientQuotas => describe_client_quotas::handle(ctx, &req).await,
        ApiKey::AlterClientQuotas => alter_client_quotas::handle(ctx, &req).await,
        ApiKey::DescribeUserScramCredentials => {
            describe_user_scram_credentials::handle(ctx, &req).await
        }
        ApiKey::AlterUserScramCredentials => alter_user_scram_credentials::handle(ctx, &req).await,
        ApiKey::CreateAcls => create_acls::handle(ctx, &req).await,
        ApiKey::DeleteAcls => delete_acls::handle(ctx, &req).await,
        ApiKey::JoinGroup => join_group::handle(ctx, &req).await,
        ApiKey::SyncGroup => sync_group::handle(ctx, &req).await,
        ApiKey::Heartbeat => heartbeat::handle(ctx, &req),
        ApiKey::LeaveGroup => leave_group::handle(ctx, &req),
        // Version 0 offsets live in the metadata store, as in ZooKeeper-mode Kafka.
        ApiKey::OffsetCommit if req.api_version == 0 => zk_offsets::commit(ctx, &req).await,
        ApiKey::OffsetFetch if req.api_version == 0 => zk_offsets::fetch(ctx, &req).await,
        ApiKey::OffsetCommit => offset_commit::handle(ctx, &req).await,
        ApiKey::OffsetFetch => offset_fetch::handle(ctx, &req),
        ApiKey::ListGroups => list_groups::handle(ctx, &req),
        ApiKey::DescribeGroups => describe_groups::handle(ctx, &req),
        ApiKey::DeleteGroups => delete_groups::handle(ctx, &req),
        ApiKey::OffsetDelete => offset_delete::handle(ctx, &req),
        ApiKey::InitProducerId => init_producer_id::handle(ctx, &req).await,
        ApiKey::AddPartitionsToTxn => add_partitions_to_txn::handle(ctx, &req).await,
        ApiKey::AddOffsetsToTxn => add_offsets_to_txn::handle(ctx, &req).await,
        ApiKey::EndTxn => end_txn::handle(ctx, &req).await,
        ApiKey::TxnOffsetCommit => txn_offset_commit::handle(ctx, &req).await,
        ApiKey::DescribeTransactions => describe_transactions::handle(ctx, &req),
        ApiKey::ListTransactions => list_transactions::handle(ctx, &req),
        other => Err(format!("API {other:?} does not run on the controller")),
    }
}
