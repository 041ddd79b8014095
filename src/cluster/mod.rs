//! Cluster mode (`zookeeper.connect` set): the broker's side of Kafka's
//! ZooKeeper metadata plane. Start-up resolves the broker and cluster ids
//! against ZooKeeper and `meta.properties`, registers `/brokers/ids/<id>`,
//! and starts the controller thread (`controller/`), which takes part in the
//! `/controller` election. Shards reach ZooKeeper only through
//! `ClusterHandle::zk_call`, which runs the blocking call on the ZooKeeper
//! worker thread so no shard ever waits on the network.

pub mod acl_changes;
pub mod config_changes;

use std::path::PathBuf;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;
use std::thread;

use crate::config::dynamic::DynamicBrokerConfig;
use crate::config::BrokerConfig;
use crate::controller::ChangeListener;
use crate::metadata::acls::CHANGE_PATHS;
use crate::metadata::configs::{self as entity, EntityConfigChange};
use crate::metadata::meta_properties::{
    read_meta_properties_ensemble, write_meta_properties_all, MetaProperties,
};
use crate::metadata::topics;
use crate::metadata::topics::CONFIG_CHANGES_PATH;
use crate::metadata::MetadataStore;
use crate::protocol::errors::ErrorCode;
use crate::security::authorizer::AclAuthorizer;
use crate::security::inter_broker::InterBrokerSecurity;
use crate::zk::{ZkClient, ZkConfig};

type Job = Box<dyn FnOnce(&mut ZkClient) + Send>;

/// What every shard of a cluster-mode broker shares.
pub struct ClusterHandle {
    pub broker_id: i32,
    pub cluster_id: String,
    jobs: crossbeam_channel::Sender<Job>,
    /// The highest controller epoch this broker has accepted a request
    /// from; older ones get STALE_CONTROLLER_EPOCH.
    controller_epoch: AtomicI32,
    /// The controller that sent it (for logs and Metadata before any UpdateMetadata).
    controller_id: AtomicI32,
    /// This broker's controller thread (active or not).
    pub controller: crate::controller::ControllerHandle,
    /// For the ZooKeeper session close at shutdown.
    zk: ZkClient,
    /// This broker's reserved producer ids: (next, end exclusive).
    producer_ids: std::sync::Mutex<(i64, i64)>,
    /// The live broker config (static, `/config/brokers/<default>`,
    /// `/config/brokers/<id>`), loaded before the broker serves.
    pub dynamic_config: Arc<DynamicBrokerConfig>,
    /// How this broker's own clients (fetchers, AlterPartition, markers)
    /// reach the other brokers.
    pub inter_broker: Arc<InterBrokerSecurity>,
    /// Config changes read by the listener thread, taken by the
    /// controller shard, which applies them.
    config_changes:
        std::sync::Mutex<Option<futures_channel::mpsc::UnboundedReceiver<EntityConfigChange>>>,
}

impl ClusterHandle {
    /// KafkaZkClient.propagateLogDirEvent: a sequential
    /// `/log_dir_event_notification/log_dir_event_<seq>` naming this
    /// broker, so the controller learns which replicas went offline.
    pub async fn propagate_log_dir_event(&self) -> Result<(), String> {
        use crate::controller::log_dir_events::{
            encode_log_dir_event, LOG_DIR_EVENT_NOTIFICATION_PATH, LOG_DIR_EVENT_PREFIX,
        };
        let data = encode_log_dir_event(self.broker_id).into_bytes();
        self.zk_call(move |zk| {
            zk.create(
                &format!("{LOG_DIR_EVENT_NOTIFICATION_PATH}/{LOG_DIR_EVENT_PREFIX}"),
                &data,
                false,
                true,
            )
            .map(|_| ())
            .map_err(|e| e.to_string())
        })
        .await?
    }

    /// Runs `f` with the ZooKeeper client on the worker thread and awaits
    /// its result from any shard (the reply wakes the shard from a foreign
    /// thread, which glommio supports).
    pub async fn zk_call<T, F>(&self, f: F) -> Result<T, String>
    where
        T: Send + 'static,
        F: FnOnce(&mut ZkClient) -> T + Send + 'static,
    {
        let (tx, rx) = futures_channel::oneshot::channel();
        let job: Job = Box::new(move |zk| {
            let _ = tx.send(f(zk));
        });
        self.jobs
            .send(job)
            .map_err(|_| "the ZooKeeper worker has stopped".to_string())?;
        rx.await
            .map_err(|_| "the ZooKeeper worker dropped the call".to_string())
    }

    /// Accepts a controller request's epoch, or returns false if it is
    /// older than one already seen (Kafka's STALE_CONTROLLER_EPOCH check).
    pub fn accept_controller_epoch(&self, controller_id: i32, epoch: i32) -> bool {
        let mut seen = self.controller_epoch.load(Ordering::Acquire);
        loop {
            if epoch < seen {
                return false;
            }
            match self.controller_epoch.compare_exchange(
                seen,
                epoch,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    self.controller_id.store(controller_id, Ordering::Release);
                    return true;
                }
                Err(now) => seen = now,
            }
        }
    }

    /// Closes the ZooKeeper session: the registration vanishes at once, so
    /// the controller sees this broker go without waiting for a timeout.
    pub fn close_session(&self) {
        self.zk.close();
    }

    pub fn last_controller_id(&self) -> i32 {
        self.controller_id.load(Ordering::Acquire)
    }

    /// A producer id from this broker's block; a new block of 1000 is
    /// reserved in `/latest_producer_id_block` by a conditional update
    /// when it runs out (Kafka's ZkProducerIdManager).
    pub async fn allocate_producer_id(&self) -> Result<i64, ErrorCode> {
        {
            let mut ids = self.producer_ids.lock().expect("producer ids");
            if ids.0 < ids.1 {
                ids.0 += 1;
                return Ok(ids.0 - 1);
            }
        }
        let broker_id = self.broker_id;
        let block = self
            .zk_call(move |zk| {
                crate::metadata::producer_ids::reserve_producer_id_block(zk, broker_id)
            })
            .await;
        match block {
            Ok(Ok((start, end))) => {
                let mut ids = self.producer_ids.lock().expect("producer ids");
                *ids = (start + 1, end + 1);
                Ok(start)
            }
            Ok(Err(e)) => {
                log::error!("reserving producer ids: {e}");
                Err(crate::protocol::errors::UNKNOWN_SERVER_ERROR)
            }
            Err(e) => {
                log::error!("reserving producer ids: {e}");
                Err(crate::protocol::errors::UNKNOWN_SERVER_ERROR)
            }
        }
    }

    pub fn controller_epoch(&self) -> i32 {
        self.controller_epoch.load(Ordering::Acquire)
    }

    /// Every stored quota entity with its configs, read before the broker
    /// serves (blocking: start-up only).
    pub fn read_quota_entities(&self) -> Result<Vec<entity::StoredEntityConfig>, String> {
        entity::read_quota_entities(&self.zk).map_err(|e| format!("/config quota entities: {e}"))
    }

    /// The config changes to apply; the controller shard takes them once.
    pub fn take_config_changes(
        &self,
    ) -> Option<futures_channel::mpsc::UnboundedReceiver<EntityConfigChange>> {
        self.config_changes.lock().expect("config changes").take()
    }
}

/// DynamicBrokerConfig.initialize: the cluster default, then this broker's
/// own dynamic configs, before the broker serves.
fn load_dynamic_config(
    zk: &ZkClient,
    config: &BrokerConfig,
    broker_id: i32,
) -> Result<Arc<DynamicBrokerConfig>, String> {
    let dynamic = Arc::new(DynamicBrokerConfig::new(Arc::new(config.clone())));
    for target in [None, Some(broker_id)] {
        let path = entity::broker_entity(target);
        let props =
            entity::fetch_entity_config(zk, &path).map_err(|e| format!("/config/{path}: {e}"))?;
        match target {
            None => dynamic.update_default(&props),
            Some(_) => dynamic.update_broker(&props),
        };
    }
    Ok(dynamic)
}

/// Kafka's getOrGenerateBrokerId: the configured id must agree with
/// meta.properties; with none configured, meta.properties' id is reused, and
/// only a fresh log dir gets one generated from `/brokers/seqid`.
fn resolve_broker_id(
    config: &BrokerConfig,
    meta: &MetaProperties,
    zk: &mut ZkClient,
) -> Result<i32, String> {
    match (config.broker_id, meta.broker_id) {
        (id, Some(stored)) if id >= 0 && id != stored => Err(format!(
            "Configured broker.id {id} doesn't match stored broker.id Some({stored}) in meta.properties. \
             If you moved your data, make sure your configured broker.id matches. \
             If you intend to create a new broker, you should remove all data in your data directories (log.dirs)."
        )),
        (id, _) if id >= 0 => Ok(id),
        (_, Some(stored)) => Ok(stored),
        (_, None) if config.broker_id_generation_enable => {
            topics::generate_broker_id(zk, config.reserved_broker_max_id)
                .map_err(|e| format!("generating a broker id from /brokers/seqid: {e}"))
        }
        _ => Err("broker.id is not set and broker.id.generation.enable is false".into()),
    }
}

/// Connects to ZooKeeper and makes this process a member of the cluster.
/// Returns the handle and the config with the resolved `broker.id`.
pub fn start(
    mut config: BrokerConfig,
    log_dirs: &[PathBuf],
    authorizer: Option<Arc<AclAuthorizer>>,
) -> Result<(Arc<ClusterHandle>, BrokerConfig), String> {
    let connect = config
        .zookeeper_connect
        .clone()
        .ok_or("zookeeper.connect is not set")?;
    let zk_config = ZkConfig {
        connect,
        session_timeout_ms: config.zookeeper_session_timeout_ms.max(1) as u64,
        connection_timeout_ms: config.zookeeper_connection_timeout_ms.max(1) as u64,
    };
    let mut zk = ZkClient::connect(&zk_config)?;
    topics::ensure_base_paths(&mut zk).map_err(|e| format!("ZooKeeper paths: {e}"))?;
    let cluster_id =
        topics::get_or_create_cluster_id(&mut zk).map_err(|e| format!("/cluster/id: {e}"))?;
    let meta = read_meta_properties_ensemble(log_dirs)?;
    if let Some(stored) = &meta.cluster_id {
        if *stored != cluster_id {
            return Err(format!(
                "The Cluster ID {cluster_id} doesn't match stored clusterId Some({stored}) in meta.properties. \
                 The broker is trying to join the wrong cluster. Configured zookeeper.connect may be wrong."
            ));
        }
    }
    // Before registering: a broker that cannot reach its peers must not
    // join.
    let inter_broker = Arc::new(InterBrokerSecurity::from_config(&config)?);
    let broker_id = resolve_broker_id(&config, &meta, &mut zk)?;
    config.broker_id = broker_id;
    write_meta_properties_all(log_dirs, broker_id, &cluster_id)?;
    crate::zk::broker_registration::register_broker(&mut zk, &config, broker_id)?;
    log::info!(
        "registered broker {broker_id} at /brokers/ids/{broker_id} (cluster {cluster_id}, ZooKeeper session {:#x})",
        zk.session_id()
    );
    let (jobs_tx, jobs_rx) = crossbeam_channel::unbounded::<Job>();
    let dynamic_config = load_dynamic_config(&zk, &config, broker_id)?;
    let (wake_tx, wake_rx) = crossbeam_channel::unbounded::<()>();
    let (changes_tx, changes_rx) = futures_channel::mpsc::unbounded();
    config_changes::spawn(zk.clone(), wake_rx, changes_tx)?;
    let mut listeners = vec![ChangeListener {
        paths: vec![CONFIG_CHANGES_PATH],
        wake: wake_tx,
    }];
    if let Some(authorizer) = authorizer {
        // Before serving: the first request is judged by the stored ACLs.
        let last = acl_changes::load(&mut zk, &authorizer)?;
        let (acl_wake_tx, acl_wake_rx) = crossbeam_channel::unbounded::<()>();
        acl_changes::spawn(zk.clone(), acl_wake_rx, authorizer, last)?;
        listeners.push(ChangeListener {
            paths: CHANGE_PATHS.to_vec(),
            wake: acl_wake_tx,
        });
    }
    let controller = crate::controller::spawn(
        zk.clone(),
        Arc::new(config.clone()),
        dynamic_config.clone(),
        listeners,
        inter_broker.clone(),
    )?;
    let handle = Arc::new(ClusterHandle {
        dynamic_config,
        inter_broker,
        config_changes: std::sync::Mutex::new(Some(changes_rx)),
        controller,
        zk: zk.clone(),
        producer_ids: std::sync::Mutex::new((0, 0)),
        broker_id,
        cluster_id,
        jobs: jobs_tx,
        controller_epoch: AtomicI32::new(0),
        controller_id: AtomicI32::new(-1),
    });
    {
        let mut worker_zk = zk.clone();
        thread::Builder::new()
            .name("zk-worker".into())
            .spawn(move || {
                while let Ok(job) = jobs_rx.recv() {
                    job(&mut worker_zk);
                }
            })
            .map_err(|e| format!("starting the ZooKeeper worker: {e}"))?;
    }
    Ok((handle, config))
}

/// The broker side of controlled shutdown (KafkaServer.controlledShutdown):
/// asks the controller, found in `/controller`, to move leadership away,
/// retrying `controlled.shutdown.max.retries` times while partitions remain.
pub fn controlled_shutdown(
    zk: &mut ZkClient,
    config: &BrokerConfig,
    broker_id: i32,
    security: Arc<InterBrokerSecurity>,
) -> Result<(), String> {
    use crate::protocol::inter_broker::{
        ControlledShutdownRequest, ControlledShutdownResponse, CONTROLLED_SHUTDOWN_API_KEY,
        CONTROLLED_SHUTDOWN_VERSIONS,
    };
    use kafka_protocol::protocol::Decodable;
    let version = CONTROLLED_SHUTDOWN_VERSIONS.1;
    let attempts = config.controlled_shutdown_max_retries.max(1);
    let mut last = String::from("no attempt made");
    for attempt in 1..=attempts {
        let outcome = (|| -> Result<Vec<(String, i32)>, String> {
            let (data, _) = zk
                .get(crate::controller::CONTROLLER_PATH)
                .map_err(|e| format!("no controller: {e}"))?;
            let v: serde_json::Value = serde_json::from_slice(&data).map_err(|e| e.to_string())?;
            let controller_id = v
                .get("brokerid")
                .and_then(|x| x.as_i64())
                .ok_or("unreadable /controller")? as i32;
            let (reg, _) = zk
                .get(&format!("/brokers/ids/{controller_id}"))
                .map_err(|e| format!("controller {controller_id} not registered: {e}"))?;
            let reg = crate::metadata::image::decode_broker_registration(controller_id, &reg)
                .ok_or("unreadable controller registration")?;
            let ep = reg
                .endpoint(&config.inter_broker_listener_name)
                .unwrap_or(&reg.endpoints[0]);
            let req = crate::controller::channel::QueuedRequest::new(
                CONTROLLED_SHUTDOWN_API_KEY,
                version,
                &ControlledShutdownRequest {
                    broker_id,
                    broker_epoch: -1,
                },
                None,
            )?;
            let body = crate::controller::channel::blocking_request(
                &ep.host,
                ep.port,
                &req,
                &format!("kshard-broker-{broker_id}"),
                config.controller_socket_timeout_ms.max(1) as u64,
                security.clone(),
            )
            .map_err(|e| format!("ControlledShutdown to broker {controller_id}: {e}"))?;
            let mut b = body;
            let resp =
                ControlledShutdownResponse::decode(&mut b, version).map_err(|e| e.to_string())?;
            if resp.error_code != crate::protocol::errors::NONE {
                return Err(format!("controller answered error {}", resp.error_code));
            }
            Ok(resp
                .remaining_partitions
                .into_iter()
                .map(|p| (p.topic_name, p.partition_index))
                .collect())
        })();
        match outcome {
            Ok(remaining) if remaining.is_empty() => {
                log::info!("controlled shutdown succeeded");
                return Ok(());
            }
            Ok(remaining) => {
                last = format!(
                    "{} partitions still led here: {remaining:?}",
                    remaining.len()
                );
            }
            Err(e) => last = e,
        }
        log::warn!("controlled shutdown attempt {attempt}/{attempts}: {last}");
        if attempt < attempts {
            thread::sleep(std::time::Duration::from_millis(
                config.controlled_shutdown_retry_backoff_ms.max(0) as u64,
            ));
        }
    }
    Err(last)
}

impl ClusterHandle {
    /// Runs controlled shutdown on the ZooKeeper worker (it blocks on the network).
    pub async fn controlled_shutdown(&self, config: Arc<BrokerConfig>) {
        let broker_id = self.broker_id;
        let security = self.inter_broker.clone();
        match self
            .zk_call(move |zk| controlled_shutdown(zk, &config, broker_id, security))
            .await
        {
            Ok(Ok(())) => {}
            Ok(Err(e)) => log::warn!("proceeding to an unclean shutdown: {e}"),
            Err(e) => log::warn!("controlled shutdown: {e}"),
        }
    }
}
