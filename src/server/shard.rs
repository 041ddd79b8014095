//! One shard's root: builds its services (router, ReplicaManager, topic
//! admin, group coordinator, KafkaApis) and runs the `ShardRequest`s other
//! shards send it, one line per kind of work. Installing the dispatcher here
//! is what keeps the router from calling up into the handlers.

use std::rc::Rc;
use std::sync::Arc;

use kshard_shards::mailbox::LocalBoxFuture;

use crate::admin::embedded::{store_synced, AllocatedProducerId, EmbeddedAdmin};
use crate::admin::TopicAdmin;
use crate::cluster::ClusterHandle;
use crate::config::dynamic::DynamicBrokerConfig;
use crate::config::BrokerConfig;
use crate::coordinator::runtime::{CoordinatorHandOver, CoordinatorRuntime};
use crate::coordinator::transaction::transaction_metadata::{
    TopicPartition, TRANSACTION_VERSION_2,
};
use crate::coordinator::transaction::{TransactionCoordinator, TxnConfig, TRANSACTION_STATE_TOPIC};
use crate::coordinator::OFFSETS_TOPIC;
use crate::handlers::{self, KafkaApis};
use crate::metadata::checkpoints::StartupCheckpoints;
use crate::metadata::metadata_cache::MetadataCache;
use crate::protocol::errors;
use crate::protocol::errors::ErrorCode;
use crate::quota::{QuotaManagers, ShardQuotaCaches};
use crate::replica::cleaner_slots::CleanerSlots;
use crate::replica::{
    CheckpointEntry, LogDirs, ReplicaConfig, ReplicaManager, RoleChange, TxnMarkerPart,
};
use crate::router::{Router, ShardRequest, ShardResponse, CONTROLLER_SHARD};
use crate::security::authorizer::AclAuthorizer;
use crate::server::sendfile::fill_page_cache;

/// Kafka's `max.incremental.fetch.session.cache.slots` default.
const FETCH_SESSION_CACHE_SLOTS: usize = 1000;

/// What a shard is built from.
pub struct ShardConfig {
    pub shard_id: usize,
    pub nr_shards: usize,
    pub config: Arc<BrokerConfig>,
    pub dynamic_config: Arc<DynamicBrokerConfig>,
    pub quotas: Arc<QuotaManagers>,
    /// `log.cleaner.threads` across the broker's shards.
    pub cleaner_slots: Arc<CleanerSlots>,
    /// The broker's `log.dirs`.
    pub log_dirs: Arc<LogDirs>,
    pub metadata: Arc<MetadataCache>,
    /// The logs found at start-up this shard owns, with their checkpoints.
    pub startup_checkpoints: StartupCheckpoints,
    /// The single broker's topic admin; only on the controller shard.
    pub controller: Option<EmbeddedAdmin>,
    pub cluster: Option<Arc<ClusterHandle>>,
    /// `authorizer.class.name`'s ACL authorizer, shared by every shard.
    pub authorizer: Option<Arc<AclAuthorizer>>,
}

/// Builds the shard's services and installs its dispatcher; the caller joins
/// the mailbox and starts the tasks.
pub fn build(sc: ShardConfig) -> Rc<KafkaApis> {
    // The embedded store's topic admin lives on shard 0; cluster mode has
    // none (its controller is the ZooKeeper-side thread).
    assert!(sc.controller.is_none() || sc.shard_id == CONTROLLER_SHARD);
    assert!(sc.cluster.is_none() || sc.controller.is_none());
    let router = Rc::new(Router::new(sc.shard_id, sc.nr_shards));
    let broker_id = match &sc.cluster {
        Some(c) => c.broker_id,
        None => sc.config.effective_broker_id(),
    };
    let replica_manager = Rc::new(ReplicaManager::new(ReplicaConfig {
        shard_id: sc.shard_id,
        nr_shards: sc.nr_shards,
        broker_id,
        log_dirs: sc.log_dirs.clone(),
        startup_checkpoints: sc.startup_checkpoints,
        config: sc.config.clone(),
        metadata: sc.metadata.clone(),
        cluster: sc.cluster.clone(),
        cleaner_slots: sc.cleaner_slots.clone(),
        replication_quotas: sc.quotas.replication_quotas(),
    }));
    let admin = Rc::new(TopicAdmin::new(
        router.clone(),
        sc.config.clone(),
        sc.dynamic_config.clone(),
        sc.quotas.clone(),
        sc.metadata.clone(),
        sc.cluster.clone(),
        sc.controller,
    ));
    // The coordinator shares the controller shard with every
    // __consumer_offsets partition (placement::shard_for).
    let coordinator = (sc.shard_id == CONTROLLER_SHARD).then(|| {
        Rc::new(CoordinatorRuntime::new(
            replica_manager.clone(),
            admin.clone(),
            router.clone(),
        ))
    });
    // So does the transaction coordinator with __transaction_state.
    let txn_coordinator = (sc.shard_id == CONTROLLER_SHARD).then(|| {
        Rc::new(TransactionCoordinator::new(
            TxnConfig::from_broker(&sc.config),
            replica_manager.clone(),
            admin.clone(),
            router.clone(),
        ))
    });
    let apis = Rc::new(KafkaApis {
        shard_id: sc.shard_id,
        nr_shards: sc.nr_shards,
        config: sc.config,
        dynamic_config: sc.dynamic_config,
        quotas: sc.quotas,
        quota_caches: ShardQuotaCaches::default(),
        log_dirs: sc.log_dirs,
        metadata: sc.metadata,
        router: router.clone(),
        replica_manager,
        admin,
        coordinator,
        txn_coordinator,
        cluster: sc.cluster,
        authorizer: sc.authorizer,
        fetch_sessions: std::cell::RefCell::new(
            crate::handlers::fetch::session::FetchSessionCache::new(
                sc.shard_id,
                sc.nr_shards,
                FETCH_SESSION_CACHE_SLOTS,
                crate::util::now_ms(),
            ),
        ),
    });
    let weak = Rc::downgrade(&apis);
    router.set_local_dispatcher(Rc::new(move |req| match weak.upgrade() {
        Some(apis) => dispatch(apis, req),
        None => Box::pin(async { ShardResponse::Done }),
    }));
    apis
}

/// What the mailbox runs for requests from other shards.
pub fn mailbox_handler(
    apis: &Rc<KafkaApis>,
) -> impl Fn(ShardRequest) -> LocalBoxFuture<ShardResponse> + 'static {
    let apis = apis.clone();
    move |req| dispatch(apis.clone(), req)
}

/// Runs one `ShardRequest` on this shard. Partition work runs its
/// synchronous part before returning, so requests apply in arrival order;
/// a fetch whose bytes must first be read into the page cache (off the
/// shard) reads after that.
pub fn dispatch(apis: Rc<KafkaApis>, req: ShardRequest) -> LocalBoxFuture<ShardResponse> {
    let rm = &apis.replica_manager;
    match req {
        ShardRequest::Produce {
            parts,
            acks,
            timeout_ms,
        } => map(
            rm.append_records(parts, acks, timeout_ms),
            ShardResponse::Produce,
        ),
        ShardRequest::Fetch { parts, budget } => {
            let cold = rm.cold_fetch_ranges(&parts);
            if cold.is_empty() {
                return ready(ShardResponse::Fetch(rm.fetch_messages(&parts, budget)));
            }
            let rm = rm.clone();
            Box::pin(async move {
                // On a failed fill the read still runs (and reports any error).
                if let Err(e) = fill_page_cache(cold).await {
                    log::warn!("reading a fetch's segment bytes into the page cache: {e}");
                }
                ShardResponse::Fetch(rm.fetch_messages(&parts, budget))
            })
        }
        ShardRequest::WaitForData {
            parts,
            max_wait_ms,
            state,
            slot,
        } => map(rm.park_fetch(parts, max_wait_ms, state, slot), |()| {
            ShardResponse::Done
        }),
        ShardRequest::ListOffsets { parts } => {
            ready(ShardResponse::ListOffsets(rm.list_offsets(&parts)))
        }
        ShardRequest::LegacyListOffsets { parts } => ready(ShardResponse::LegacyListOffsets(
            rm.legacy_list_offsets(&parts),
        )),
        ShardRequest::DeleteRecords { parts } => {
            ready(ShardResponse::DeleteRecords(rm.delete_records(&parts)))
        }
        ShardRequest::OffsetForLeaderEpoch { parts } => ready(ShardResponse::OffsetForLeaderEpoch(
            rm.offsets_for_leader_epoch(&parts),
        )),
        ShardRequest::OpenLogs { topic, partitions } => {
            map(rm.open_logs(topic, partitions), |()| ShardResponse::Done)
        }
        ShardRequest::DeleteLogs { topic } => {
            let forget = forget_fetch_sessions(&apis);
            map(rm.delete_logs(topic, forget), |()| ShardResponse::Done)
        }
        ShardRequest::UpdateTopicConfigs { topics } => {
            let image = apis.metadata.image();
            for info in topics.iter().filter_map(|t| image.topic(t)) {
                rm.update_topic_config(info);
            }
            ready(ShardResponse::Done)
        }
        ShardRequest::Forward { req } => Box::pin(async move {
            ShardResponse::Forwarded(handlers::controller_dispatch(&apis, req).await)
        }),
        ShardRequest::AutoCreateTopics { names } => {
            Box::pin(
                async move { ShardResponse::AutoCreated(apis.admin.auto_create_topics(&names)) },
            )
        }
        ShardRequest::AllocateProducerId => allocate_producer_id(&apis),
        ShardRequest::PrepareTxnVerification { parts } => ready(ShardResponse::VerificationGuards(
            rm.prepare_txn_verification(&parts),
        )),
        ShardRequest::VerifyTxnPartitions {
            transactional_id,
            producer_id,
            producer_epoch,
            parts,
            add,
        } => {
            let parts: Vec<TopicPartition> = parts
                .into_iter()
                .map(|(topic, partition)| TopicPartition { topic, partition })
                .collect();
            let Some(c) = apis.txn_coordinator.clone() else {
                return ready(ShardResponse::PartitionErrors(vec![
                    errors::NOT_COORDINATOR;
                    parts.len()
                ]));
            };
            if !add {
                let codes =
                    c.verify_partitions(&transactional_id, producer_id, producer_epoch, &parts);
                return ready(ShardResponse::PartitionErrors(codes));
            }
            Box::pin(async move {
                let n = parts.len();
                let e = c
                    .handle_add_partitions(
                        &transactional_id,
                        producer_id,
                        producer_epoch,
                        parts.into_iter().collect(),
                        TRANSACTION_VERSION_2,
                    )
                    .await;
                ShardResponse::PartitionErrors(vec![e; n])
            })
        }
        ShardRequest::DescribeProducers { parts } => {
            ready(ShardResponse::Producers(rm.active_producers(&parts)))
        }
        ShardRequest::AlterReplicaLogDirs { parts } => ready(ShardResponse::PartitionErrors(
            rm.alter_replica_log_dirs(&parts),
        )),
        ShardRequest::DescribeLogDirs { filter } => {
            let rm = rm.clone();
            Box::pin(async move { ShardResponse::LogDirs(rm.describe_log_dirs(filter).await) })
        }
        ShardRequest::WriteTxnMarkers { parts, timeout_ms } => {
            let written = rm.write_txn_markers(parts.clone(), timeout_ms);
            Box::pin(async move {
                let codes = written.await;
                complete_txn_offsets(&apis, &parts, &codes);
                ShardResponse::TxnMarkers(codes)
            })
        }
        ShardRequest::CollectCheckpoints => ready(ShardResponse::Checkpoints(rm.checkpoints())),
        ShardRequest::BecomeLeaderOrFollower {
            topic,
            parts,
            leaders,
        } => {
            let hand_over = coordinator_of(&apis, &topic.name).map(|c| {
                let (broker_id, roles) = (rm.broker_id, parts.clone());
                move |codes: &[ErrorCode]| {
                    c.on_leadership_change(&elections(broker_id, &roles, codes))
                }
            });
            map(
                rm.become_leader_or_follower(topic, parts, leaders),
                move |codes| {
                    if let Some(hand_over) = hand_over {
                        hand_over(&codes);
                    }
                    ShardResponse::PartitionErrors(codes)
                },
            )
        }
        ShardRequest::StopReplicas {
            topic,
            parts,
            delete,
        } => {
            let forget = forget_fetch_sessions(&apis);
            let then = move |topic: &str| {
                if delete {
                    forget(topic);
                }
            };
            let hand_over = coordinator_of(&apis, &topic).map(|c| {
                let resigned: Vec<CoordinatorHandOver> = parts
                    .iter()
                    .map(|p| CoordinatorHandOver::Resigned {
                        partition: p.partition,
                        leader_epoch: None,
                    })
                    .collect();
                move || c.on_leadership_change(&resigned)
            });
            map(rm.stop_replicas(topic, parts, delete, then), move |codes| {
                if let Some(hand_over) = hand_over {
                    hand_over();
                }
                ShardResponse::PartitionErrors(codes)
            })
        }
        ShardRequest::InterBroker {
            api_key,
            api_version,
            body,
        } => Box::pin(async move {
            ShardResponse::InterBroker(
                handlers::inter_broker::handle_on_controller_shard(
                    &apis,
                    api_key,
                    api_version,
                    body,
                )
                .await,
            )
        }),
    }
}

/// Markers written to `__consumer_offsets` complete the producer's
/// pending transactional offsets there (Kafka's onTransactionCompleted).
fn complete_txn_offsets(apis: &KafkaApis, parts: &[TxnMarkerPart], codes: &[ErrorCode]) {
    for (p, code) in parts.iter().zip(codes) {
        if p.topic != OFFSETS_TOPIC || !code.is_none() {
            continue;
        }
        let (partition, producer_id, commit) = (p.partition, p.marker.producer_id, p.marker.commit);
        let done =
            apis.with_coordinator(|c, _, _| c.complete_txn_offsets(partition, producer_id, commit));
        debug_assert!(
            done.is_ok(),
            "__consumer_offsets lives on the coordinator's shard"
        );
    }
}

/// The coordinator whose partitions `topic`'s are, on this shard: the group
/// coordinator for `__consumer_offsets`, the transaction coordinator for
/// `__transaction_state`. It follows their role changes (Kafka's
/// onLeadershipChange).
fn coordinator_of(apis: &Rc<KafkaApis>, topic: &str) -> Option<HandOverTarget> {
    if topic == OFFSETS_TOPIC {
        return apis.coordinator.clone().map(HandOverTarget::Groups);
    }
    if topic == TRANSACTION_STATE_TOPIC {
        return apis
            .txn_coordinator
            .clone()
            .map(HandOverTarget::Transactions);
    }
    None
}

enum HandOverTarget {
    Groups(Rc<CoordinatorRuntime>),
    Transactions(Rc<TransactionCoordinator>),
}

impl HandOverTarget {
    fn on_leadership_change(&self, changes: &[CoordinatorHandOver]) {
        match self {
            HandOverTarget::Groups(c) => c.on_leadership_change(changes),
            HandOverTarget::Transactions(c) => c.on_leadership_change(changes),
        }
    }
}

/// The partitions a LeaderAndIsr made this broker lead or follow.
fn elections(
    broker_id: i32,
    parts: &[RoleChange],
    codes: &[ErrorCode],
) -> Vec<CoordinatorHandOver> {
    parts
        .iter()
        .zip(codes)
        .filter(|(_, code)| code.is_none())
        .map(|(p, _)| {
            if p.leader == broker_id {
                CoordinatorHandOver::Elected {
                    partition: p.partition,
                    leader_epoch: p.leader_epoch,
                }
            } else {
                CoordinatorHandOver::Resigned {
                    partition: p.partition,
                    leader_epoch: Some(p.leader_epoch),
                }
            }
        })
        .collect()
}

/// Drops a deleted topic from this shard's fetch sessions.
fn forget_fetch_sessions(apis: &Rc<KafkaApis>) -> impl FnOnce(&str) + 'static {
    let apis = apis.clone();
    move |topic| apis.fetch_sessions.borrow_mut().forget_topic(topic)
}

fn ready(response: ShardResponse) -> LocalBoxFuture<ShardResponse> {
    Box::pin(async move { response })
}

fn map<T: 'static>(
    fut: LocalBoxFuture<T>,
    wrap: impl FnOnce(T) -> ShardResponse + 'static,
) -> LocalBoxFuture<ShardResponse> {
    Box::pin(async move { wrap(fut.await) })
}

/// InitProducerId's block: from ZooKeeper in cluster mode, else from the
/// embedded store on the controller shard.
fn allocate_producer_id(apis: &Rc<KafkaApis>) -> LocalBoxFuture<ShardResponse> {
    if let Some(cluster) = apis.cluster.clone() {
        return Box::pin(
            async move { ShardResponse::ProducerId(cluster.allocate_producer_id().await) },
        );
    }
    let Some(admin) = apis.admin.embedded.as_ref() else {
        return ready(ShardResponse::ProducerId(Err(errors::NOT_CONTROLLER)));
    };
    let allocated = admin.borrow_mut().allocate_producer_id();
    match allocated {
        Ok(AllocatedProducerId { id, reserved_block }) if reserved_block => {
            // The new block must be durable before any id of it is used.
            let apis = apis.clone();
            Box::pin(async move {
                let admin = apis.admin.embedded.as_ref().expect("checked above");
                store_synced(admin).await;
                ShardResponse::ProducerId(Ok(id))
            })
        }
        r => ready(ShardResponse::ProducerId(r.map(|a| a.id))),
    }
}

/// The checkpoint entries of every shard, for the broker checkpoint files;
/// run on the controller shard.
pub async fn collect_checkpoints(apis: &KafkaApis) -> Vec<CheckpointEntry> {
    assert_eq!(apis.shard_id, CONTROLLER_SHARD);
    let mut entries = apis.replica_manager.checkpoints();
    for shard in 1..apis.nr_shards {
        if let Ok(ShardResponse::Checkpoints(e)) = apis
            .router
            .call(shard, ShardRequest::CollectCheckpoints)
            .await
        {
            entries.extend(e);
        }
    }
    entries
}
