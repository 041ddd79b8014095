//! A single broker's topic admin over the embedded store, hosted on shard 0:
//! the only writer of the metadata store and of the metadata image (what
//! ZooKeeper and the KafkaController are to a cluster). Topic creation,
//! deletion and partition increase write Kafka's ZooKeeper layout to the
//! store, open or delete logs on the owning shards, then publish a new image
//! to every shard. It also hands out producer-id blocks.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::rc::Rc;
use std::sync::Arc;

use uuid::Uuid;

use crate::admin::limits::check_partitions_per_request;
use crate::admin::TopicAdmin;
use crate::admin::{validate, AdminError, AdminResult};
use crate::config::dynamic::DynamicBrokerConfig;
use crate::config::topic::TopicConfig;
use crate::config::BrokerConfig;
use crate::metadata::configs as entity;
use crate::metadata::embedded::{halt_on_sync_failure, EmbeddedStore};
use crate::metadata::metadata_cache::{
    BrokerInfo, ListenerEndpoint, MetadataImage, PartitionInfo, TopicInfo,
};
use crate::metadata::topics;
use crate::metadata::{MetadataStore, StoreError};
use crate::protocol::errors;
use crate::protocol::errors::ErrorCode;
use crate::router::join_all;
use crate::router::{ShardRequest, CONTROLLER_SHARD};
use kshard_shards::background::BackgroundQueue;
use kshard_shards::mailbox::LocalBoxFuture;

pub struct NewTopic {
    pub name: String,
    /// -1: `num.partitions`.
    pub num_partitions: i32,
    /// -1: `default.replication.factor`.
    pub replication_factor: i16,
    pub assignment: Option<BTreeMap<i32, Vec<i32>>>,
    pub configs: BTreeMap<String, String>,
}

/// The embedded store and what the admin keeps beside it.
pub struct EmbeddedAdmin {
    store: EmbeddedStore,
    config: Arc<BrokerConfig>,
    broker_id: i32,
    next_producer_id: i64,
    producer_id_block_end: i64,
    /// Topics whose logs are being deleted: not created again until done.
    deleting: HashSet<String>,
    /// When config change notifications were last purged.
    config_changes_purged_at_ms: i64,
}

fn store_err(e: StoreError) -> AdminError {
    AdminError::new(errors::UNKNOWN_SERVER_ERROR, format!("metadata store: {e}"))
}

impl EmbeddedAdmin {
    /// Opens the controller over an opened store: registers this broker,
    /// takes the controller role (embedded: always this broker).
    pub fn open(
        mut store: EmbeddedStore,
        config: Arc<BrokerConfig>,
    ) -> Result<EmbeddedAdmin, String> {
        let broker_id = config.effective_broker_id();
        topics::ensure_base_paths(&mut store).map_err(|e| format!("metadata store: {e}"))?;
        let now = crate::util::now_ms() as i64;
        topics::register_broker(
            &mut store,
            broker_id,
            &config.advertised_listeners,
            config.broker_rack.as_deref(),
            now,
        )
        .map_err(|e| format!("registering broker {broker_id}: {e}"))?;
        topics::elect_controller(&mut store, broker_id, now)
            .map_err(|e| format!("controller election: {e}"))?;
        Ok(EmbeddedAdmin {
            store,
            config,
            broker_id,
            next_producer_id: 0,
            producer_id_block_end: 0,
            deleting: HashSet::new(),
            config_changes_purged_at_ms: 0,
        })
    }

    pub fn cluster_id(&mut self) -> Result<String, String> {
        topics::get_or_create_cluster_id(&mut self.store).map_err(|e| format!("cluster id: {e}"))
    }

    /// Deletes config change notifications older than 15 minutes, at most
    /// once a minute (a single broker applies changes as it writes them;
    /// the notifications keep Kafka's layout).
    pub fn purge_config_changes_if_due(&mut self, now_ms: i64) {
        const PURGE_INTERVAL_MS: i64 = 60_000;
        if now_ms - self.config_changes_purged_at_ms < PURGE_INTERVAL_MS {
            return;
        }
        self.config_changes_purged_at_ms = now_ms;
        entity::purge_obsolete_notifications(&mut self.store, now_ms, entity::CHANGE_EXPIRATION_MS);
    }

    pub fn store(&self) -> &dyn MetadataStore {
        &self.store
    }

    /// The metadata store, for the few requests that write it directly
    /// (OffsetCommit/OffsetFetch v0 offsets under `/consumers`).
    pub fn store_mut(&mut self) -> &mut dyn MetadataStore {
        &mut self.store
    }

    /// DynamicBrokerConfig.initialize: the live broker config from the
    /// stored cluster default and this broker's dynamic configs.
    pub fn load_dynamic_config(&self) -> Result<Arc<DynamicBrokerConfig>, String> {
        let dynamic = Arc::new(DynamicBrokerConfig::new(self.config.clone()));
        let read = |target| {
            let path = entity::broker_entity(target);
            entity::fetch_entity_config(&self.store, &path)
                .map_err(|e| format!("metadata store /config/{path}: {e}"))
        };
        dynamic.update_default(&read(None)?);
        dynamic.update_broker(&read(Some(self.broker_id))?);
        Ok(dynamic)
    }

    /// The metadata image as the store holds it (start-up); topic configs
    /// derive from `broker`, the live broker config.
    pub fn build_image(&mut self, broker: &BrokerConfig) -> Result<MetadataImage, String> {
        let cluster_id = self.cluster_id()?;
        let mut image = MetadataImage {
            cluster_id,
            controller_id: self.broker_id,
            brokers: self
                .config
                .advertised_listeners
                .first()
                .map(|e| BrokerInfo {
                    id: self.broker_id,
                    host: e.host.clone(),
                    port: e.port,
                    rack: self.config.broker_rack.clone(),
                    endpoints: self
                        .config
                        .advertised_listeners
                        .iter()
                        .map(|a| ListenerEndpoint {
                            listener_name: a.listener_name.clone(),
                            host: a.host.clone(),
                            port: a.port,
                        })
                        .collect(),
                })
                .into_iter()
                .collect(),
            topics: HashMap::new(),
            topic_names_by_id: HashMap::new(),
        };
        for name in topics::list_topics(&self.store).map_err(|e| e.to_string())? {
            let Some(rec) = topics::get_topic(&self.store, &name).map_err(|e| e.to_string())?
            else {
                continue;
            };
            let config = TopicConfig::from_overrides(broker, &rec.configs)
                .map_err(|e| format!("topic {name}: stored config invalid: {e}"))?;
            let topic_id = Uuid::from_bytes(rec.topic_id.unwrap_or_else(topics::random_uuid));
            let partitions = rec
                .assignment
                .iter()
                .map(|(p, replicas)| {
                    let state = rec.partition_states.get(p);
                    PartitionInfo {
                        partition: *p,
                        leader: state.map(|s| s.leader).unwrap_or(self.broker_id),
                        leader_epoch: state.map(|s| s.leader_epoch).unwrap_or(0),
                        replicas: replicas.clone(),
                        isr: state
                            .map(|s| s.isr.clone())
                            .unwrap_or_else(|| replicas.clone()),
                        offline_replicas: Vec::new(),
                    }
                })
                .collect();
            image.insert_topic(TopicInfo {
                name: name.clone(),
                topic_id,
                partitions,
                overrides: rec.configs.clone(),
                config: Arc::new(config),
                is_internal: name.starts_with("__"),
            });
        }
        Ok(image)
    }

    /// From now on the store's commits leave their fdatasync to
    /// `store_synced`, which every writer awaits before it answers.
    pub fn defer_store_syncs(&mut self) {
        self.store.defer_syncs();
    }

    /// A producer id for an idempotent producer, from blocks reserved in
    /// the store; a reservation must be synced (`store_synced`) before the
    /// id is handed out.
    pub fn allocate_producer_id(&mut self) -> Result<AllocatedProducerId, ErrorCode> {
        let reserved_block = self.next_producer_id >= self.producer_id_block_end;
        if reserved_block {
            let (start, end) = crate::metadata::producer_ids::reserve_producer_id_block(
                &mut self.store,
                self.broker_id,
            )
            .map_err(|e| {
                log::error!("reserving producer ids: {e}");
                errors::UNKNOWN_SERVER_ERROR
            })?;
            self.next_producer_id = start;
            self.producer_id_block_end = end + 1;
        }
        let id = self.next_producer_id;
        self.next_producer_id += 1;
        Ok(AllocatedProducerId { id, reserved_block })
    }
}

/// A producer id, and whether reserving its block wrote the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AllocatedProducerId {
    pub id: i64,
    pub reserved_block: bool,
}

/// The `metadata-sync` thread: the embedded store's fdatasyncs, in order.
static METADATA_SYNC: BackgroundQueue = BackgroundQueue::new("metadata-sync");

/// Resolves once every record committed to `admin`'s store so far is
/// durable. Called after a write: if another caller already took the sync
/// that covers it, a no-op queued behind that sync waits for it.
pub async fn store_synced(admin: &std::cell::RefCell<EmbeddedAdmin>) {
    let log = admin.borrow_mut().store.take_unsynced();
    let synced = METADATA_SYNC.run(move || {
        if let Some(log) = log {
            if let Err(e) = log.sync_data() {
                halt_on_sync_failure(&e);
            }
        }
    });
    // None means the thread is gone: the process is exiting.
    let _ = synced.await;
}

fn embedded(ctx: &TopicAdmin) -> &std::cell::RefCell<EmbeddedAdmin> {
    assert_eq!(ctx.shard_id, CONTROLLER_SHARD);
    ctx.embedded.as_ref().expect("the controller shard")
}

/// Opens logs for `partitions` of `topic` on their owning shards.
async fn open_logs(ctx: &Rc<TopicAdmin>, topic: &Arc<TopicInfo>, partitions: &[i32]) {
    let mut by_shard: Vec<Vec<i32>> = (0..ctx.nr_shards).map(|_| Vec::new()).collect();
    for &p in partitions {
        by_shard[ctx.owner_of(&topic.name, p)].push(p);
    }
    let mut calls: Vec<LocalBoxFuture<()>> = Vec::new();
    for (shard, parts) in by_shard.into_iter().enumerate() {
        if parts.is_empty() {
            continue;
        }
        let ctx = ctx.clone();
        let topic = topic.clone();
        calls.push(Box::pin(async move {
            let _ = ctx
                .router
                .run_on(
                    shard,
                    ShardRequest::OpenLogs {
                        topic,
                        partitions: parts,
                    },
                )
                .await;
        }));
    }
    join_all(calls).await;
}

/// The checks of Kafka's `ReplicationControlManager` for a manual
/// assignment: registered brokers, each at most once per partition, the
/// same replica count everywhere, partitions 0..n.
fn validate_manual_assignment(
    assignment: &BTreeMap<i32, Vec<i32>>,
    image: &MetadataImage,
) -> AdminResult<()> {
    let invalid = |m: String| Err(AdminError::new(errors::INVALID_REPLICA_ASSIGNMENT, m));
    let mut replication_factor: Option<usize> = None;
    for replicas in assignment.values() {
        if replicas.is_empty() {
            return invalid(
                "The manual partition assignment includes an empty replica list.".into(),
            );
        }
        let mut sorted = replicas.clone();
        sorted.sort_unstable();
        for (i, b) in sorted.iter().enumerate() {
            if !image.brokers.iter().any(|x| x.id == *b) {
                return invalid(format!("The manual partition assignment includes broker {b}, but no such broker is registered."));
            }
            if i > 0 && sorted[i - 1] == *b {
                return invalid(format!(
                    "The manual partition assignment includes the broker {b} more than once."
                ));
            }
        }
        match replication_factor {
            Some(rf) if rf != sorted.len() => {
                return invalid(format!("The manual partition assignment includes a partition with {} replica(s), but this is not consistent with previous partitions, which have {rf} replica(s).", sorted.len()));
            }
            _ => replication_factor = Some(sorted.len()),
        }
    }
    // Keys are distinct and sorted: 0..n exactly when the last is n-1.
    let n = assignment.len() as i64;
    let consecutive = assignment.keys().next().is_none_or(|&first| first == 0)
        && assignment
            .keys()
            .next_back()
            .map_or(0, |&last| i64::from(last) + 1)
            == n;
    if !consecutive {
        return invalid("partitions should be a consecutive 0-based integer sequence".into());
    }
    Ok(())
}

fn single_broker_assignment(
    num_partitions: i32,
    replication_factor: i16,
    broker_id: i32,
    first: i32,
) -> BTreeMap<i32, Vec<i32>> {
    debug_assert_eq!(replication_factor, 1);
    (first..first + num_partitions)
        .map(|p| (p, vec![broker_id]))
        .collect()
}

pub async fn create_topic(
    ctx: &Rc<TopicAdmin>,
    t: NewTopic,
    validate_only: bool,
) -> AdminResult<Arc<TopicInfo>> {
    let config = &ctx.config;
    let image = ctx.metadata.image();
    validate::check_new_topic(&t, &image)?;
    let live_brokers = image.brokers.len().max(1) as i32;
    let broker_id = config.effective_broker_id();
    let assignment = match &t.assignment {
        Some(a) => {
            validate_manual_assignment(a, &image)?;
            a.clone()
        }
        None => {
            let (partitions, rf) = validate::requested_counts(&t, config);
            if partitions <= 0 {
                return Err(AdminError::new(
                    errors::INVALID_PARTITIONS,
                    "Number of partitions must be larger than 0.",
                ));
            }
            if rf <= 0 {
                return Err(AdminError::new(
                    errors::INVALID_REPLICATION_FACTOR,
                    "Replication factor must be larger than 0.",
                ));
            }
            check_partitions_per_request(i64::from(partitions))?;
            if rf as i32 > live_brokers {
                return Err(AdminError::new(
                    errors::INVALID_REPLICATION_FACTOR,
                    format!(
                        "Replication factor: {rf} larger than available brokers: {live_brokers}."
                    ),
                ));
            }
            single_broker_assignment(partitions, rf, broker_id, 0)
        }
    };
    let topic_config = validate::topic_config(&t, &ctx.dynamic_config.current())?;
    let topic_id_bytes = topics::random_uuid();
    let info = validate::new_topic_info(
        &t.name,
        Uuid::from_bytes(topic_id_bytes),
        &assignment,
        topic_config,
    );
    if validate_only {
        return Ok(info);
    }
    {
        let mut c = embedded(ctx).borrow_mut();
        if c.deleting.contains(&t.name) {
            return Err(AdminError::new(
                errors::TOPIC_ALREADY_EXISTS,
                format!("Topic '{}' is marked for deletion.", t.name),
            ));
        }
        let colliding = topics::colliding_topics(&c.store, &t.name).map_err(store_err)?;
        if let Some(other) = colliding.first() {
            return Err(AdminError::colliding_topic(&t.name, other));
        }
        match topics::create_topic(
            &mut c.store,
            &t.name,
            topic_id_bytes,
            &assignment,
            &info.config.overrides,
        ) {
            Ok(()) => {}
            Err(StoreError::NodeExists(_)) => {
                return Err(AdminError::topic_exists(&t.name));
            }
            Err(e) => return Err(store_err(e)),
        }
    }
    store_synced(embedded(ctx)).await;
    let partitions: Vec<i32> = assignment.keys().copied().collect();
    open_logs(ctx, &info, &partitions).await;
    ctx.metadata
        .publish(ctx.metadata.image().with_topic((*info).clone()));
    log::info!(
        "created topic {} with {} partitions",
        t.name,
        partitions.len()
    );
    Ok(info)
}

pub async fn delete_topic(ctx: &Rc<TopicAdmin>, name: &str) -> AdminResult<Uuid> {
    let image = ctx.metadata.image();
    let Some(info) = image.topic(name).cloned() else {
        return Err(AdminError::unknown_topic_partition());
    };
    {
        let mut c = embedded(ctx).borrow_mut();
        match topics::mark_topic_for_deletion(&mut c.store, name) {
            Ok(()) | Err(StoreError::NodeExists(_)) => {}
            Err(e) => return Err(store_err(e)),
        }
        topics::delete_topic(&mut c.store, name).map_err(store_err)?;
        c.deleting.insert(name.to_string());
    }
    store_synced(embedded(ctx)).await;
    // Unpublish first so no new request reaches the logs being deleted.
    ctx.metadata
        .publish(ctx.metadata.image().without_topic(name));
    let mut calls: Vec<LocalBoxFuture<()>> = Vec::new();
    for shard in 0..ctx.nr_shards {
        let ctx = ctx.clone();
        let topic = name.to_string();
        calls.push(Box::pin(async move {
            let _ = ctx
                .router
                .run_on(shard, ShardRequest::DeleteLogs { topic })
                .await;
        }));
    }
    join_all(calls).await;
    embedded(ctx).borrow_mut().deleting.remove(name);
    log::info!("deleted topic {name}");
    Ok(info.topic_id)
}

pub async fn create_partitions(
    ctx: &Rc<TopicAdmin>,
    name: &str,
    new_total: i32,
    assignment: Option<Vec<Vec<i32>>>,
    validate_only: bool,
) -> AdminResult<()> {
    let image = ctx.metadata.image();
    let (info, current) = validate::check_partition_increase(&image, name, new_total)?;
    let broker_id = ctx.config.effective_broker_id();
    let added: BTreeMap<i32, Vec<i32>> = match assignment {
        Some(a) => {
            if a.len() as i32 != new_total - current {
                return Err(AdminError::new(
                    errors::INVALID_REPLICA_ASSIGNMENT,
                    format!(
                        "Increasing the number of partitions by {} but {} assignments provided.",
                        new_total - current,
                        a.len()
                    ),
                ));
            }
            let mut m = BTreeMap::new();
            for (i, replicas) in a.into_iter().enumerate() {
                if replicas.is_empty()
                    || replicas
                        .iter()
                        .any(|b| !image.brokers.iter().any(|x| x.id == *b))
                {
                    return Err(AdminError::new(
                        errors::INVALID_REPLICA_ASSIGNMENT,
                        format!("Unknown broker in assignment {replicas:?}"),
                    ));
                }
                m.insert(current + i as i32, replicas);
            }
            m
        }
        None => single_broker_assignment(new_total - current, 1, broker_id, current),
    };
    if validate_only {
        return Ok(());
    }
    {
        let mut c = embedded(ctx).borrow_mut();
        topics::add_partitions(&mut c.store, name, &added).map_err(store_err)?;
    }
    store_synced(embedded(ctx)).await;
    let mut next = (*info).clone();
    for (p, replicas) in &added {
        next.partitions.push(validate::new_partition(*p, replicas));
    }
    let next = Arc::new(next);
    let new_ids: Vec<i32> = added.keys().copied().collect();
    open_logs(ctx, &next, &new_ids).await;
    ctx.metadata
        .publish(ctx.metadata.image().with_topic((*next).clone()));
    Ok(())
}
