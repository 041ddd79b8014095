//! Broker start-up and shutdown (Kafka's `KafkaServer.startup` and
//! `shutdown`): opens the metadata store and the checkpoint files, starts
//! one shard per core, and on SIGTERM closes every log and writes the
//! checkpoints so the next start needs no recovery.

mod authenticator;
pub mod connection;
pub mod in_process;
pub mod listener;
mod log_dirs;
pub mod request_memory;
pub mod sendfile;
pub mod shard;
pub mod transport;

use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd};
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use glommio::net::TcpListener;
use glommio::Task;

use kshard_shards::log::cleaner::Step;
use kshard_shards::log::index_file;
use kshard_shards::mailbox::MailboxBuilder;
use kshard_shards::stall::StallSettings;

use crate::admin::embedded::EmbeddedAdmin;
use crate::cluster::ClusterHandle;
use crate::config::dynamic::DynamicBrokerConfig;
use crate::config::BrokerConfig;
use crate::handlers::KafkaApis;
use crate::metadata::checkpoints::{self, StartupCheckpoints};
use crate::metadata::embedded::EmbeddedStore;
use crate::metadata::meta_properties::write_meta_properties_all;
use crate::metadata::metadata_cache::{MetadataCache, MetadataImage};
use crate::protocol::probe::{probe_port, PortProbe};
use crate::quota::QuotaManagers;
use crate::replica::partitions::{log_dir_op_done, PreparedLogs};
use crate::replica::{CheckpointEntry, LogDirs};
use crate::router::{ShardRequest, ShardResponse, CONTROLLER_SHARD};
use crate::security::authorizer::AclAuthorizer;
use crate::util::{now_ms, tcp_socket};
use listener::ListenerSecurity;
use log_dirs::{prepare_log_dirs, split_by_owner, write_checkpoints};
use request_memory::RequestMemoryPool;

/// Envelopes per shard inbox. Each takes ~150 bytes up front (crossbeam
/// initializes every slot), so 65,536 cost 10 MiB per shard of idle RSS; a
/// full inbox only makes senders wait their turn.
const MAILBOX_CAPACITY: usize = 4096;

/// Every shard binds each listener with SO_REUSEPORT, which would let a
/// second broker on the same port silently share its connections. So first
/// see whether a live server answers there, and refuse to start if so
/// (Kafka fails with "Address already in use"). A listener that accepts but
/// never answers is the previous run's, still being torn down after a
/// restart: wait (bounded) for it to go. Port 0 is resolved to one free port
/// for all shards.
fn claim_listener_ports(mut config: BrokerConfig) -> Result<BrokerConfig, String> {
    use std::net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs};
    const LINGER_WAIT_MS: u64 = 5_000;
    for l in config.listeners.iter_mut() {
        if l.port == 0 {
            let probe = std::net::TcpListener::bind((l.host.as_str(), 0))
                .map_err(|e| format!("listeners={}: cannot bind: {e}", l.connection_string()))?;
            l.port = probe.local_addr().map_err(|e| e.to_string())?.port();
            continue;
        }
        let addrs: Vec<SocketAddr> = (l.host.as_str(), l.port)
            .to_socket_addrs()
            .map_err(|e| format!("listeners={}: {e}", l.connection_string()))?
            .collect();
        for mut addr in addrs {
            if addr.ip().is_unspecified() {
                addr.set_ip(IpAddr::V4(Ipv4Addr::LOCALHOST));
            }
            let deadline = std::time::Instant::now() + Duration::from_millis(LINGER_WAIT_MS);
            loop {
                match probe_port(&addr) {
                    PortProbe::Free => break,
                    PortProbe::Serving => {
                        return Err(format!(
                            "listeners={}: cannot bind: Address already in use (a broker is serving on {addr})",
                            l.connection_string()
                        ))
                    }
                    PortProbe::Lingering if std::time::Instant::now() >= deadline => {
                        log::warn!("{addr} still accepts connections it never answers; starting anyway");
                        break;
                    }
                    PortProbe::Lingering => std::thread::sleep(Duration::from_millis(100)),
                }
            }
        }
    }
    let ports: Vec<(String, u16)> = config
        .listeners
        .iter()
        .map(|l| (l.listener_name.clone(), l.port))
        .collect();
    for a in config.advertised_listeners.iter_mut() {
        if a.port == 0 {
            if let Some((_, p)) = ports.iter().find(|(n, _)| *n == a.listener_name) {
                a.port = *p;
            }
        }
    }
    Ok(config)
}

/// Where this broker's metadata comes from.
struct StartupMetadata {
    /// With `broker.id` resolved in cluster mode.
    config: Arc<BrokerConfig>,
    /// The live broker config, with the stored dynamic configs.
    dynamic_config: Arc<DynamicBrokerConfig>,
    quotas: Arc<QuotaManagers>,
    /// The embedded store's single-broker controller (no ZooKeeper).
    controller: Option<EmbeddedAdmin>,
    /// Cluster mode (`zookeeper.connect` set).
    cluster: Option<Arc<ClusterHandle>>,
    image: MetadataImage,
    /// With the stored ACLs loaded.
    authorizer: Option<Arc<AclAuthorizer>>,
}

/// What every shard's start and stop share; built once by `run`.
struct Broker {
    config: Arc<BrokerConfig>,
    /// Each of `config.listeners`' TLS and SASL settings, in order.
    listener_security: Vec<Arc<ListenerSecurity>>,
    dynamic_config: Arc<DynamicBrokerConfig>,
    quotas: Arc<QuotaManagers>,
    cleaner_slots: Arc<crate::replica::cleaner_slots::CleanerSlots>,
    log_dirs: Arc<LogDirs>,
    nr_shards: usize,
    metadata: Arc<MetadataCache>,
    cluster: Option<Arc<ClusterHandle>>,
    authorizer: Option<Arc<AclAuthorizer>>,
    mailbox: MailboxBuilder<ShardRequest, ShardResponse>,
    /// The embedded controller, taken by the controller shard.
    controller: Mutex<Option<EmbeddedAdmin>>,
    /// Each shard's entries of the start-up checkpoints, taken by it.
    startup_checkpoints: Mutex<Vec<Option<StartupCheckpoints>>>,
    /// Set by SIGTERM/SIGINT, or by a shard that failed to start.
    shutdown: Arc<AtomicBool>,
    /// Set by shard 0 once controlled shutdown is done, so the other shards
    /// keep serving while leadership moves away.
    serving_done: AtomicBool,
    /// What every shard's logs said when they closed.
    final_checkpoints: Mutex<Vec<CheckpointEntry>>,
    startup_errors: Mutex<Vec<String>>,
    started_at_ms: u64,
}

/// Runs the broker until SIGTERM/SIGINT.
pub fn run(config: BrokerConfig) -> Result<(), String> {
    let config = Arc::new(claim_listener_ports(config)?);
    let listener_security = listener::build_listeners(&config)?;
    let (log_dirs, startup_checkpoints) = prepare_log_dirs(&config)?;
    let paths: Vec<PathBuf> = log_dirs.paths().map(|p| p.to_path_buf()).collect();
    let metadata = open_metadata(config, &paths)?;
    let broker = Arc::new(Broker::new(
        metadata,
        log_dirs,
        startup_checkpoints,
        listener_security,
    )?);
    log::info!(
        "starting kshard broker {} with {} shards, data in {}",
        broker.config.effective_broker_id(),
        broker.nr_shards,
        paths
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(",")
    );
    let io_memory_bytes = match broker.config.log_io_mode {
        crate::config::LogIoMode::Direct => kshard_shards::shard::DIRECT_IO_MEMORY_BYTES,
        crate::config::LogIoMode::Buffered => kshard_shards::shard::MIN_IO_MEMORY_BYTES,
    };
    if broker.config.log_io_mode == crate::config::LogIoMode::Buffered
        && broker.config.log_io_offload_writes
    {
        kshard_shards::log::dirty_pages::start_sampler().map_err(|e| e.to_string())?;
    }
    let body = {
        let broker = broker.clone();
        move |shard_id: usize| run_shard(broker.clone(), shard_id)
    };
    let stall = StallSettings::from_threshold_ms(broker.config.shard_stall_threshold_ms);
    let pinning = if broker.config.shard_core_pinning {
        kshard_shards::shard::Pinning::FromCore(broker.config.shard_core_offset)
    } else {
        kshard_shards::shard::Pinning::Unbound
    };
    kshard_shards::shard::run_shards(broker.nr_shards, pinning, io_memory_bytes, stall, body)
        .map_err(|e| e.to_string())?;
    finish(&broker)
}

/// Cluster mode: ZooKeeper holds the metadata and the image comes from the
/// controller's UpdateMetadata; otherwise the embedded store. Either way
/// every log dir's `meta.properties` is checked or written.
fn open_metadata(
    config: Arc<BrokerConfig>,
    log_dirs: &[PathBuf],
) -> Result<StartupMetadata, String> {
    let authorizer = AclAuthorizer::from_config(&config)?.map(Arc::new);
    if config.zookeeper_connect.is_some() {
        let (cluster, resolved) =
            crate::cluster::start((*config).clone(), log_dirs, authorizer.clone())?;
        let image = MetadataImage {
            cluster_id: cluster.cluster_id.clone(),
            controller_id: -1,
            ..Default::default()
        };
        let quotas = load_quotas(
            &resolved,
            &cluster.dynamic_config,
            cluster.read_quota_entities()?,
        );
        return Ok(StartupMetadata {
            config: Arc::new(resolved),
            dynamic_config: cluster.dynamic_config.clone(),
            quotas,
            controller: None,
            cluster: Some(cluster),
            image,
            authorizer,
        });
    }
    let store = EmbeddedStore::open(&config.metadata_dir())
        .map_err(|e| format!("metadata store {}: {e}", config.metadata_dir().display()))?;
    let mut controller = EmbeddedAdmin::open(store, config.clone())?;
    let dynamic_config = controller.load_dynamic_config()?;
    let image = controller.build_image(&dynamic_config.current())?;
    let stored_quotas = crate::metadata::configs::read_quota_entities(controller.store())
        .map_err(|e| format!("metadata store quota entities: {e}"))?;
    let quotas = load_quotas(&config, &dynamic_config, stored_quotas);
    if let Some(authorizer) = &authorizer {
        crate::admin::acls::load_embedded(&mut controller, authorizer)?;
    }
    // Start-up's own writes were synced; from here the shard leaves them
    // to the metadata-sync thread.
    controller.defer_store_syncs();
    write_meta_properties_all(log_dirs, config.effective_broker_id(), &image.cluster_id)?;
    Ok(StartupMetadata {
        config,
        dynamic_config,
        quotas,
        controller: Some(controller),
        cluster: None,
        image,
        authorizer,
    })
}

/// The client quota managers with every stored user and client-id quota,
/// and the replication quotas' bounds from the dynamic broker configs
/// loaded at start-up.
fn load_quotas(
    config: &BrokerConfig,
    dynamic_config: &crate::config::dynamic::DynamicBrokerConfig,
    stored: Vec<crate::metadata::configs::StoredEntityConfig>,
) -> Arc<QuotaManagers> {
    let quotas = Arc::new(QuotaManagers::new(config));
    for e in &stored {
        quotas.update(&e.entity_path, &e.configs);
    }
    quotas.update_replication_quotas(&dynamic_config.state());
    quotas
}

/// A flag SIGTERM and SIGINT set.
fn register_shutdown_signals() -> Result<Arc<AtomicBool>, String> {
    let shutdown = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGTERM, shutdown.clone())
        .map_err(|e| e.to_string())?;
    signal_hook::flag::register(signal_hook::consts::SIGINT, shutdown.clone())
        .map_err(|e| e.to_string())?;
    Ok(shutdown)
}

impl Broker {
    fn new(
        metadata: StartupMetadata,
        log_dirs: Arc<LogDirs>,
        checkpoints: StartupCheckpoints,
        listener_security: Vec<Arc<ListenerSecurity>>,
    ) -> Result<Broker, String> {
        let shutdown = register_shutdown_signals()?;
        let nr_shards = metadata.config.num_shards.max(1);
        let mailbox = MailboxBuilder::new(nr_shards, MAILBOX_CAPACITY);
        Ok(Broker {
            config: metadata.config,
            listener_security,
            cleaner_slots: Arc::new(crate::replica::cleaner_slots::CleanerSlots::new(
                metadata.dynamic_config.clone(),
            )),
            dynamic_config: metadata.dynamic_config,
            quotas: metadata.quotas,
            log_dirs,
            nr_shards,
            metadata: Arc::new(MetadataCache::new(metadata.image)),
            cluster: metadata.cluster,
            authorizer: metadata.authorizer,
            mailbox,
            controller: Mutex::new(metadata.controller),
            startup_checkpoints: Mutex::new(split_by_owner(checkpoints, nr_shards)),
            shutdown,
            serving_done: AtomicBool::new(false),
            final_checkpoints: Mutex::new(Vec::new()),
            startup_errors: Mutex::new(Vec::new()),
            started_at_ms: now_ms(),
        })
    }

    /// Records why start-up failed and stops the broker.
    fn fail_startup(&self, error: String) {
        self.startup_errors.lock().expect("errors").push(error);
        self.shutdown.store(true, Ordering::SeqCst);
    }
}

/// One shard's life: start, serve until shutdown, stop.
async fn run_shard(broker: Arc<Broker>, shard_id: usize) {
    let ctx = start_shard(&broker, shard_id).await;
    let accept_tasks = start_listeners(&broker, &ctx);
    if shard_id == CONTROLLER_SHARD {
        glommio::spawn_local(reload_certificates(broker.clone(), ctx.clone())).detach();
    }
    wait_for_shutdown(&broker, shard_id).await;
    stop_shard(&broker, &ctx, accept_tasks).await;
}

/// Builds this shard's `KafkaApis` and starts its tasks: opens the
/// partitions it owns (recovery runs in parallel across shards), joins the
/// mailbox, replays `__consumer_offsets` on a single broker's controller
/// shard, then runs the purgatory ticker and the maintenance loop.
async fn start_shard(broker: &Broker, shard_id: usize) -> Rc<KafkaApis> {
    let config = &broker.config;
    let controller = if shard_id == CONTROLLER_SHARD {
        broker.controller.lock().expect("controller slot").take()
    } else {
        None
    };
    let checkpoints = broker.startup_checkpoints.lock().expect("checkpoints")[shard_id]
        .take()
        .unwrap_or_default();
    let ctx = shard::build(shard::ShardConfig {
        shard_id,
        nr_shards: broker.nr_shards,
        config: config.clone(),
        dynamic_config: broker.dynamic_config.clone(),
        quotas: broker.quotas.clone(),
        cleaner_slots: broker.cleaner_slots.clone(),
        log_dirs: broker.log_dirs.clone(),
        metadata: broker.metadata.clone(),
        startup_checkpoints: checkpoints,
        controller,
        cluster: broker.cluster.clone(),
        authorizer: broker.authorizer.clone(),
    });
    open_partitions(broker, &ctx);
    let mb = broker
        .mailbox
        .clone()
        .join(shard_id, shard::mailbox_handler(&ctx))
        .await;
    ctx.router.set_mailbox(mb);
    if let Some(coordinator) = ctx.coordinator.as_ref() {
        // A single broker creates __consumer_offsets and starts loading it
        // before serving; in a cluster LeaderAndIsr drives loading.
        coordinator.start().await;
    }
    if let Some(txn_coordinator) = ctx.txn_coordinator.as_ref() {
        txn_coordinator.start().await;
    }
    glommio::spawn_local(ctx.replica_manager.clone().run_purgatory_ticker()).detach();
    glommio::spawn_local(maintenance_loop(ctx.clone())).detach();
    if let Err(e) = spawn_log_cleaner(&ctx) {
        broker.fail_startup(e);
    }
    glommio::spawn_local(ship_index_writes(ctx.clone())).detach();
    let cluster = ctx
        .cluster
        .as_ref()
        .filter(|_| shard_id == CONTROLLER_SHARD);
    if let Some(changes) = cluster.and_then(|c| c.take_config_changes()) {
        glommio::spawn_local(apply_config_changes(ctx.clone(), changes)).detach();
    }
    ctx
}

/// Cluster mode, on the controller shard: applies the entity configs the
/// config change listener read, in the order of their notifications.
async fn apply_config_changes(
    ctx: Rc<KafkaApis>,
    mut changes: futures_channel::mpsc::UnboundedReceiver<
        crate::metadata::configs::EntityConfigChange,
    >,
) {
    use futures_lite::StreamExt;
    while let Some(change) = changes.next().await {
        crate::admin::config_changes::apply(&ctx.admin, change.entity, change.props).await;
    }
}

/// Opens the partitions this shard owns; a failure stops the broker.
fn open_partitions(broker: &Broker, ctx: &KafkaApis) {
    let image = broker.metadata.image();
    for topic in image.topics.values() {
        let mine: Vec<i32> = topic
            .partitions
            .iter()
            .map(|p| p.partition)
            .filter(|p| ctx.owner_of(&topic.name, *p) == ctx.shard_id)
            .collect();
        if mine.is_empty() {
            continue;
        }
        let opened = {
            let mut partitions = ctx.replica_manager.partitions_mut();
            partitions
                .open_partitions(topic, &mine, now_ms() as i64, &mut PreparedLogs::new())
                .and_then(|()| partitions.sync_leader_epochs_now(&topic.name, &mine))
        };
        if let Err(e) = opened {
            broker.fail_startup(format!("opening {}: {e}", topic.name));
        }
    }
}

/// Binds every listener on this shard (each shard binds each port, see
/// `claim_listener_ports`) and serves the connections it accepts.
fn start_listeners(broker: &Broker, ctx: &Rc<KafkaApis>) -> Vec<Task<()>> {
    let config = &broker.config;
    let socket_settings = config.listener_socket_settings();
    let listeners: Vec<(TcpListener, Arc<ListenerSecurity>)> = broker
        .listener_security
        .iter()
        .filter_map(|security| {
            let l = &security.endpoint;
            match tcp_socket::bind_listener(&l.host, l.port, &socket_settings) {
                // SAFETY: glommio's listener takes over the bound, listening socket.
                Ok(s) => Some((
                    unsafe { TcpListener::from_raw_fd(s.into_raw_fd()) },
                    security.clone(),
                )),
                Err(e) => {
                    broker.fail_startup(format!(
                        "listeners={}: cannot bind: {e}",
                        l.connection_string()
                    ));
                    None
                }
            }
        })
        .collect();
    let request_memory = RequestMemoryPool::new(
        request_memory::queued_max_request_bytes(
            config.queued_max_request_bytes,
            config.socket_request_max_bytes.max(0) as usize,
        ) / broker.nr_shards,
    );
    let accept_tasks = listeners
        .into_iter()
        .map(|(l, security)| {
            glommio::spawn_local(accept_loop(
                l,
                socket_settings,
                security,
                ctx.clone(),
                request_memory.clone(),
            ))
        })
        .collect();
    if ctx.shard_id == CONTROLLER_SHARD {
        log::info!(
            "queued.max.request.bytes: reads stop at {} bytes of requests per shard",
            request_memory.share_bytes()
        );
        log::info!(
            "kshard started in {} ms, serving on {:?}",
            now_ms() - broker.started_at_ms,
            config
                .listeners
                .iter()
                .map(|l| l.connection_string())
                .collect::<Vec<_>>()
        );
    }
    accept_tasks
}

/// How often the dynamic config is checked for TLS store changes.
const CERTIFICATE_CHECK_EVERY_MS: u64 = 1_000;

/// Certificate reload as Kafka's DynamicBrokerConfig does it: when a
/// listener's ssl keys are altered (`kafka-configs --alter --add-config
/// listener.name.<l>.ssl.keystore.location=...`, even to the same path),
/// the listener rebuilds its stores if the settings or the files changed,
/// and new connections get the new certificates. A store that fails to
/// load is logged and the old one kept.
async fn reload_certificates(broker: Arc<Broker>, ctx: Rc<KafkaApis>) {
    let mut seen = ctx.dynamic_config.state();
    while !ctx.is_shutting_down() {
        glommio::timer::sleep(Duration::from_millis(CERTIFICATE_CHECK_EVERY_MS)).await;
        let state = ctx.dynamic_config.state();
        if Arc::ptr_eq(&state, &seen) {
            continue;
        }
        seen = state.clone();
        for security in &broker.listener_security {
            let Some(tls) = &security.tls else {
                continue;
            };
            let name = &security.endpoint.listener_name;
            let prefix = format!("listener.name.{}.ssl.", name.to_ascii_lowercase());
            let altered = |layer: &std::collections::BTreeMap<String, String>| {
                layer.keys().any(|k| k.starts_with(&prefix))
            };
            if !altered(&state.dynamic_broker) && !altered(&state.dynamic_default) {
                continue;
            }
            let reconfigured = listener::ssl_settings(&state.effective, name)
                .and_then(|settings| tls.reconfigure(settings));
            match reconfigured {
                Ok(true) => log::info!("listener {name}: reloaded its key and trust stores"),
                Ok(false) => {}
                Err(e) => log::error!(
                    "listener {name}: keeping the old certificates, the new {} fails: {}",
                    e.key,
                    e.message
                ),
            }
        }
    }
}

async fn accept_loop(
    listener: TcpListener,
    socket_settings: tcp_socket::ListenerSocketSettings,
    security: Arc<ListenerSecurity>,
    ctx: Rc<KafkaApis>,
    request_memory: Rc<RequestMemoryPool>,
) {
    loop {
        match listener.accept().await {
            Ok(stream) => {
                if let Err(e) = tcp_socket::configure_accepted(stream.as_raw_fd(), &socket_settings)
                {
                    log::warn!("closing an accepted connection: setting its socket options: {e}");
                    continue;
                }
                glommio::spawn_local(connection::serve(
                    ctx.clone(),
                    request_memory.clone(),
                    stream,
                    security.clone(),
                ))
                .detach();
            }
            Err(e) => {
                log::warn!("accept failed: {e}");
                glommio::timer::sleep(Duration::from_millis(10)).await;
            }
        }
    }
}

/// Serves until SIGTERM/SIGINT or a failed start. In cluster mode the
/// controller shard then runs controlled shutdown while the other shards
/// keep serving, so leadership moves away before any log closes.
async fn wait_for_shutdown(broker: &Broker, shard_id: usize) {
    while !broker.shutdown.load(Ordering::SeqCst) {
        glommio::timer::sleep(Duration::from_millis(50)).await;
    }
    let Some(cluster) = &broker.cluster else {
        return;
    };
    if shard_id == CONTROLLER_SHARD {
        let started = broker.startup_errors.lock().expect("errors").is_empty();
        if broker.config.controlled_shutdown_enable && started {
            cluster.controlled_shutdown(broker.config.clone()).await;
        }
        broker.serving_done.store(true, Ordering::SeqCst);
    } else {
        while !broker.serving_done.load(Ordering::SeqCst) {
            glommio::timer::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// Stops serving, lets parked fetches answer and staged appends land,
/// closes this shard's logs and hands in their checkpoint entries.
async fn stop_shard(broker: &Broker, ctx: &Rc<KafkaApis>, accept_tasks: Vec<Task<()>>) {
    ctx.router.begin_shutdown();
    ctx.replica_manager.begin_shutdown();
    for t in accept_tasks {
        t.cancel().await;
    }
    // Let parked fetches and in-flight appends finish.
    ctx.replica_manager.complete_parked_fetches();
    glommio::timer::sleep(Duration::from_millis(20)).await;
    // Direct mode: staged appends land before the logs close.
    ctx.replica_manager
        .quiesce_direct_writes(|_, _| true, Duration::from_secs(10))
        .await;
    let closing = ctx.replica_manager.partitions_mut().close_all();
    let mut entries = Vec::with_capacity(closing.len());
    for (entry, closed) in closing {
        // A log whose close failed is left out: the next start recovers it.
        match log_dir_op_done(closed).await {
            Ok(()) => entries.push(entry),
            Err(e) => log::error!("closing {}-{}: {e}", entry.topic, entry.partition),
        }
    }
    broker
        .final_checkpoints
        .lock()
        .expect("checkpoints")
        .extend(entries);
}

/// After every shard stopped: ends the ZooKeeper session, writes the
/// checkpoint files and reports what failed at start-up.
fn finish(broker: &Broker) -> Result<(), String> {
    if let Some(c) = &broker.cluster {
        // The registration goes now, not after the session timeout.
        c.close_session();
    }
    // Rolls wrote producer snapshots whose fsyncs may still be queued.
    kshard_shards::log::producer_state::wait_for_snapshot_syncs();
    crate::replica::partition::leader_epoch_writes::wait_for_leader_epoch_writes();
    // A periodic write still queued would replace the final one.
    checkpoints::wait_for_queued_writes();
    let errors = broker.startup_errors.lock().expect("errors").clone();
    let entries = broker
        .final_checkpoints
        .lock()
        .expect("checkpoints")
        .clone();
    write_checkpoints(&broker.log_dirs, &entries)
        .map_err(|e| format!("writing checkpoints: {e}"))?;
    log::info!(
        "kshard stopped; zero-copy: {} bytes by sendfile, {} bytes copied, {} bytes from the direct-I/O read cache, {} bytes from direct-mode tail caches, {} bytes read into the page cache off the shards",
        sendfile::SENDFILE_BYTES.load(Ordering::Relaxed),
        sendfile::COPIED_BYTES.load(Ordering::Relaxed),
        sendfile::READ_CACHE_BYTES.load(Ordering::Relaxed),
        sendfile::TAIL_CACHE_BYTES_SENT.load(Ordering::Relaxed),
        kshard_shards::log::page_cache::FILLED_BYTES.load(Ordering::Relaxed)
    );
    if !errors.is_empty() {
        return Err(errors.join("; "));
    }
    Ok(())
}

/// How often an idle cleaner looks for a log to clean, and how often it
/// looks again while waiting for work off the shard (a group's fsyncs, the
/// dedupe map).
const CLEANER_IDLE_SLEEP: Duration = Duration::from_millis(200);
const CLEANER_SYNC_POLL: Duration = Duration::from_millis(1);
/// Between steps: short, but a timer, so the executor polls its I/O (a
/// task that only yields keeps it running task queues until preempted).
const CLEANER_STEP_PAUSE: Duration = Duration::from_micros(50);

/// Starts the shard's log cleaner in a task queue of its own with a tenth
/// of the default queue's shares: a busy shard keeps serving, an idle one
/// cleans at full speed.
pub(crate) fn spawn_log_cleaner(ctx: &Rc<KafkaApis>) -> Result<(), String> {
    let queue = glommio::executor().create_task_queue(
        glommio::Shares::Static(100),
        glommio::Latency::NotImportant,
        "log-cleaner",
    );
    glommio::spawn_local_into(cleaner_loop(ctx.clone()), queue)
        .map(|task| {
            task.detach();
        })
        .map_err(|e| format!("starting the log cleaner: {e}"))
}

/// The log cleaner's steps (`Partitions::clean_step`, about 1 MiB of input
/// each), one after another while a pass has work, the shard serving in
/// between; as Kafka's cleaner threads, unthrottled by default. Stepping once per
/// maintenance tick (4 MiB every 200 ms) cleaned 20 MiB/s at most.
async fn cleaner_loop(ctx: Rc<KafkaApis>) {
    while !ctx.is_shutting_down() {
        let step = ctx
            .replica_manager
            .partitions_mut()
            .clean_step(now_ms() as i64);
        match step {
            Step::InProgress => glommio::timer::sleep(CLEANER_STEP_PAUSE).await,
            Step::WaitingOffShard => glommio::timer::sleep(CLEANER_SYNC_POLL).await,
            Step::Idle | Step::Done(_) => glommio::timer::sleep(CLEANER_IDLE_SLEEP).await,
        }
    }
}

/// How long an active index's new entries wait on the shard, gathered,
/// before the `index-writes` thread gets them: `kafka-dump-log` reads a
/// live index this far behind, and the thread wakes at most this often.
const INDEX_WRITES_SHIP_INTERVAL: Duration = Duration::from_millis(10);

/// Hands the shard's queued index entries to the `index-writes` thread
/// (`kshard_shards::log::index_file`), sleeping while none are queued.
pub(crate) async fn ship_index_writes(ctx: Rc<KafkaApis>) {
    while !ctx.is_shutting_down() {
        index_file::queued_writes_waiting().await;
        glommio::timer::sleep(INDEX_WRITES_SHIP_INTERVAL).await;
        index_file::ship_queued_writes();
    }
}

/// Time-based flush, retention, and (on the controller shard) the broker
/// checkpoint files.
/// Kafka's LogDirFailureHandler: each log dir that went offline is
/// reported once; in cluster mode through ZooKeeper to the controller,
/// which moves leadership away from its replicas. The broker keeps serving
/// its other dirs (and, alone, reads from the offline one).
async fn report_log_dir_failures(ctx: &Rc<KafkaApis>) {
    for index in ctx.log_dirs.take_unreported_failures() {
        let path = ctx.log_dirs.path(index).display().to_string();
        let online = (0..ctx.log_dirs.len())
            .filter(|&i| !ctx.log_dirs.is_offline(i))
            .count();
        log::error!(
            "log dir {path} is offline: its partitions answer KAFKA_STORAGE_ERROR \
             until the broker restarts ({online} of {} log dirs online)",
            ctx.log_dirs.len()
        );
        let (Some(cluster), ctx) = (ctx.cluster.clone(), ctx.clone()) else {
            continue;
        };
        // Retried until ZooKeeper takes it (the controller must hear), off
        // the maintenance loop.
        glommio::spawn_local(async move {
            while let Err(e) = cluster.propagate_log_dir_event().await {
                log::error!("reporting the failure of log dir {path} to the controller: {e}");
                if ctx.is_shutting_down() {
                    return;
                }
                glommio::timer::sleep(Duration::from_millis(500)).await;
            }
        })
        .detach();
    }
}

pub(crate) async fn maintenance_loop(ctx: Rc<KafkaApis>) {
    let retention_every_ms = ctx.config.log_retention_check_interval_ms.max(1) as u64;
    // The checkpoint files are written together; in cluster mode they carry
    // the high watermarks, due every replica.high.watermark.checkpoint.interval.ms.
    let mut checkpoint_every_ms = ctx.config.log_flush_offset_checkpoint_interval_ms.max(1) as u64;
    if ctx.cluster.is_some() {
        checkpoint_every_ms = checkpoint_every_ms.min(
            ctx.config
                .replica_high_watermark_checkpoint_interval_ms
                .max(1) as u64,
        );
    }
    let mut last_retention = now_ms();
    let mut last_checkpoint = now_ms();
    // Kafka's isr-expiration task runs every replica.lag.time.max.ms / 2.
    let isr_check_every_ms = (ctx.config.replica_lag_time_max_ms / 2).max(1) as u64;
    let mut last_isr_check = now_ms();
    const SENSOR_EXPIRY_EVERY_MS: u64 = 60_000;
    let mut last_sensor_expiry = now_ms();
    while !ctx.is_shutting_down() {
        glommio::timer::sleep(Duration::from_millis(200)).await;
        if ctx.is_shutting_down() {
            return;
        }
        let now = now_ms();
        let run_retention = now - last_retention >= retention_every_ms;
        if run_retention {
            last_retention = now;
        }
        let mut round = ctx
            .replica_manager
            .partitions()
            .maintenance_round(now as i64, run_retention);
        while !round.is_done() {
            let roll_syncs = ctx
                .replica_manager
                .partitions_mut()
                .maintain_some(&mut round);
            ctx.replica_manager.start_roll_syncs(roll_syncs);
            glommio::yield_if_needed().await;
        }
        if ctx.shard_id == CONTROLLER_SHARD {
            report_log_dir_failures(&ctx).await;
        }
        // Kafka's sensor expiry runs on its metrics thread; here once a minute.
        if ctx.shard_id == CONTROLLER_SHARD && now - last_sensor_expiry >= SENSOR_EXPIRY_EVERY_MS {
            last_sensor_expiry = now;
            ctx.quotas.expire_inactive(crate::util::monotonic_ms());
        }
        if ctx.cluster.is_some() && now - last_isr_check >= isr_check_every_ms {
            last_isr_check = now;
            ctx.replica_manager
                .partitions_mut()
                .maybe_shrink_isr(now as i64);
            ctx.replica_manager.schedule_alter_isr();
        }
        if ctx.shard_id == CONTROLLER_SHARD && now - last_checkpoint >= checkpoint_every_ms {
            last_checkpoint = now;
            let entries = shard::collect_checkpoints(&ctx).await;
            let log_dirs = ctx.log_dirs.clone();
            let written = checkpoints::write_queued(move || write_checkpoints(&log_dirs, &entries));
            if let Err(e) = written.await {
                log::error!("writing checkpoints: {e}");
            }
        }
    }
}
