//! Broker start-up and shutdown: opens the metadata store and the checkpoint
//! files, starts one shard per core, and on SIGTERM closes every log and
//! writes the checkpoints so the next start needs no recovery.

pub mod connection;
pub mod in_process;
pub mod request_memory;
pub mod sendfile;
pub mod shard;

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use glommio::net::TcpListener;

use kshard_shards::log::checkpoint::{OffsetCheckpointFile, CLEANER_OFFSET_CHECKPOINT_FILE};
use kshard_shards::mailbox::MailboxBuilder;

use crate::admin::embedded::Controller;
use crate::config::BrokerConfig;
use crate::handlers::KafkaApis;
use crate::metadata::embedded::EmbeddedStore;
use crate::metadata::metadata_cache::MetadataCache;
use crate::protocol::probe::{probe_port, PortProbe};
use crate::replica::CheckpointEntry;
use crate::router::{ShardRequest, ShardResponse, CONTROLLER_SHARD};
use crate::util::now_ms;

/// Envelopes per shard inbox. Each takes ~150 bytes up front (crossbeam
/// initializes every slot), so 65,536 cost 10 MiB per shard of idle RSS; a
/// full inbox only makes senders wait their turn.
const MAILBOX_CAPACITY: usize = 4096;
pub const RECOVERY_POINT_CHECKPOINT: &str = "recovery-point-offset-checkpoint";
pub const LOG_START_OFFSET_CHECKPOINT: &str = "log-start-offset-checkpoint";

pub fn write_meta_properties(
    log_dir: &Path,
    broker_id: i32,
    cluster_id: &str,
) -> Result<(), String> {
    let path = log_dir.join("meta.properties");
    if let Ok(text) = std::fs::read_to_string(&path) {
        for line in text.lines() {
            if let Some(v) = line.strip_prefix("broker.id=") {
                if v.trim() != broker_id.to_string() {
                    return Err(format!(
                        "{}: broker.id {} does not match configured broker.id {broker_id}",
                        path.display(),
                        v.trim()
                    ));
                }
            }
            if let Some(v) = line.strip_prefix("cluster.id=") {
                if v.trim() != cluster_id {
                    return Err(format!(
                        "{}: cluster.id {} does not match the metadata store's {cluster_id}",
                        path.display(),
                        v.trim()
                    ));
                }
            }
        }
        return Ok(());
    }
    let text = format!(
        "#\n#Written by kshard\ncluster.id={cluster_id}\nversion=0\nbroker.id={broker_id}\n"
    );
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::File::create(&tmp).map_err(|e| e.to_string())?;
    f.write_all(text.as_bytes()).map_err(|e| e.to_string())?;
    f.sync_all().map_err(|e| e.to_string())?;
    std::fs::rename(&tmp, &path).map_err(|e| e.to_string())
}

/// (topic, partition) -> (recovery point, log start offset).
type StartupCheckpoints = HashMap<(String, i32), (i64, i64)>;

fn read_checkpoints(log_dir: &Path) -> Result<StartupCheckpoints, String> {
    let rp = OffsetCheckpointFile::new(log_dir.join(RECOVERY_POINT_CHECKPOINT))
        .read()
        .map_err(|e| format!("{RECOVERY_POINT_CHECKPOINT}: {e}"))?;
    let ls = OffsetCheckpointFile::new(log_dir.join(LOG_START_OFFSET_CHECKPOINT))
        .read()
        .map_err(|e| format!("{LOG_START_OFFSET_CHECKPOINT}: {e}"))?;
    let mut map: StartupCheckpoints = HashMap::new();
    for (t, p, o) in rp {
        map.entry((t, p)).or_insert((0, 0)).0 = o;
    }
    for (t, p, o) in ls {
        map.entry((t, p)).or_insert((0, 0)).1 = o;
    }
    Ok(map)
}

pub fn write_checkpoints(log_dir: &Path, entries: &[CheckpointEntry]) -> std::io::Result<()> {
    let rp: Vec<(String, i32, i64)> = entries
        .iter()
        .map(|e| (e.topic.clone(), e.partition, e.recovery_point))
        .collect();
    let ls: Vec<(String, i32, i64)> = entries
        .iter()
        .map(|e| (e.topic.clone(), e.partition, e.log_start_offset))
        .collect();
    let cleaner: Vec<(String, i32, i64)> = entries
        .iter()
        .filter_map(|e| Some((e.topic.clone(), e.partition, e.cleaner_offset?)))
        .collect();
    let hw: Vec<(String, i32, i64)> = entries
        .iter()
        .map(|e| (e.topic.clone(), e.partition, e.high_watermark))
        .collect();
    OffsetCheckpointFile::new(log_dir.join(crate::replica::REPLICATION_OFFSET_CHECKPOINT_FILE))
        .write(&hw)?;
    OffsetCheckpointFile::new(log_dir.join(RECOVERY_POINT_CHECKPOINT)).write(&rp)?;
    OffsetCheckpointFile::new(log_dir.join(CLEANER_OFFSET_CHECKPOINT_FILE)).write(&cleaner)?;
    OffsetCheckpointFile::new(log_dir.join(LOG_START_OFFSET_CHECKPOINT)).write(&ls)
}

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

/// Runs the broker until SIGTERM/SIGINT.
pub fn run(config: BrokerConfig) -> Result<(), String> {
    let config = Arc::new(claim_listener_ports(config)?);
    let log_dir: PathBuf = config.log_dirs[0].clone();
    if config.log_dirs.len() > 1 {
        log::warn!(
            "log.dirs has {} entries; this version stores every partition in the first, {}",
            config.log_dirs.len(),
            log_dir.display()
        );
    }
    std::fs::create_dir_all(&log_dir)
        .map_err(|e| format!("log.dirs {}: {e}", log_dir.display()))?;
    // Cluster mode: ZooKeeper holds the metadata and the image comes from
    // the controller's UpdateMetadata; otherwise the embedded store.
    let (config, controller, cluster, image) = if config.zookeeper_connect.is_some() {
        let (cluster, resolved) = crate::cluster::start((*config).clone(), &log_dir)?;
        let image = crate::metadata::metadata_cache::MetadataImage {
            cluster_id: cluster.cluster_id.clone(),
            controller_id: -1,
            ..Default::default()
        };
        (Arc::new(resolved), None, Some(cluster), image)
    } else {
        let store = EmbeddedStore::open(&config.metadata_dir())
            .map_err(|e| format!("metadata store {}: {e}", config.metadata_dir().display()))?;
        let mut controller = Controller::open(store, config.clone())?;
        let image = controller.build_image()?;
        write_meta_properties(&log_dir, config.effective_broker_id(), &image.cluster_id)?;
        (config, Some(controller), None, image)
    };
    let checkpoints = read_checkpoints(&log_dir)?;
    let metadata = Arc::new(MetadataCache::new(image));

    let shutdown = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGTERM, shutdown.clone())
        .map_err(|e| e.to_string())?;
    signal_hook::flag::register(signal_hook::consts::SIGINT, shutdown.clone())
        .map_err(|e| e.to_string())?;

    let nr_shards = config.num_shards.max(1);
    let mailbox = MailboxBuilder::<ShardRequest, ShardResponse>::new(nr_shards, MAILBOX_CAPACITY)
        .map_err(|e| format!("creating the cross-shard mailbox: {e}"))?;
    let controller_slot = Arc::new(Mutex::new(controller));
    // Set by shard 0 once controlled shutdown is done, so the other shards
    // keep serving while leadership moves away.
    let serving_done = Arc::new(AtomicBool::new(false));
    let final_checkpoints: Arc<Mutex<Vec<CheckpointEntry>>> = Arc::new(Mutex::new(Vec::new()));
    let startup_errors: Arc<Mutex<Vec<String>>> = Arc::new(Mutex::new(Vec::new()));
    // Each shard gets the checkpoint entries of the partitions it owns.
    let mut per_shard: Vec<StartupCheckpoints> = (0..nr_shards).map(|_| HashMap::new()).collect();
    for (k, v) in checkpoints {
        let owner = kshard_shards::placement::shard_for(&k.0, k.1, nr_shards);
        per_shard[owner].insert(k, v);
    }
    let per_shard = Arc::new(Mutex::new(
        per_shard.into_iter().map(Some).collect::<Vec<_>>(),
    ));
    let started_at_ms = now_ms();
    log::info!(
        "starting kshard broker {} with {nr_shards} shards, data in {}",
        config.effective_broker_id(),
        log_dir.display()
    );

    let body = {
        let config = config.clone();
        let metadata = metadata.clone();
        let shutdown = shutdown.clone();
        let final_checkpoints = final_checkpoints.clone();
        let startup_errors = startup_errors.clone();
        let log_dir = log_dir.clone();
        let cluster = cluster.clone();
        let serving_done = serving_done.clone();
        move |shard_id: usize| {
            let cluster = cluster.clone();
            let serving_done = serving_done.clone();
            let config = config.clone();
            let metadata = metadata.clone();
            let shutdown = shutdown.clone();
            let mailbox = mailbox.clone();
            let controller = if shard_id == CONTROLLER_SHARD {
                controller_slot.lock().expect("controller slot").take()
            } else {
                None
            };
            let checkpoints = per_shard.lock().expect("checkpoints")[shard_id]
                .take()
                .unwrap_or_default();
            let final_checkpoints = final_checkpoints.clone();
            let startup_errors = startup_errors.clone();
            let log_dir = log_dir.clone();
            async move {
                let ctx = shard::build(shard::ShardConfig {
                    shard_id,
                    nr_shards,
                    config: config.clone(),
                    log_dir: log_dir.clone(),
                    metadata: metadata.clone(),
                    startup_checkpoints: checkpoints,
                    controller,
                    cluster: cluster.clone(),
                });
                // Open this shard's partitions (recovery runs in parallel across shards).
                let image = metadata.image();
                for topic in image.topics.values() {
                    let mine: Vec<i32> = topic
                        .partitions
                        .iter()
                        .map(|p| p.partition)
                        .filter(|p| ctx.owner_of(&topic.name, *p) == shard_id)
                        .collect();
                    if mine.is_empty() {
                        continue;
                    }
                    if let Err(e) = ctx.replica_manager.partitions_mut().open_partitions(
                        topic,
                        &mine,
                        now_ms() as i64,
                    ) {
                        startup_errors
                            .lock()
                            .expect("errors")
                            .push(format!("opening {}: {e}", topic.name));
                        shutdown.store(true, Ordering::SeqCst);
                    }
                }
                let mb = mailbox.join(shard_id, shard::mailbox_handler(&ctx)).await;
                ctx.router.set_mailbox(mb);
                if let Some(coordinator) = ctx.coordinator.as_ref().filter(|_| cluster.is_none()) {
                    // Creates and replays __consumer_offsets before serving.
                    coordinator.start().await;
                }
                glommio::spawn_local(ctx.replica_manager.clone().run_purgatory_ticker()).detach();
                glommio::spawn_local(maintenance_loop(ctx.clone())).detach();
                let listeners: Vec<TcpListener> = config
                    .listeners
                    .iter()
                    .filter_map(|l| match TcpListener::bind((l.host.as_str(), l.port)) {
                        Ok(s) => Some(s),
                        Err(e) => {
                            startup_errors.lock().expect("errors").push(format!(
                                "listeners={}: cannot bind: {e}",
                                l.connection_string()
                            ));
                            shutdown.store(true, Ordering::SeqCst);
                            None
                        }
                    })
                    .collect();
                let request_memory = request_memory::RequestMemoryPool::new(
                    request_memory::queued_max_request_bytes(
                        config.queued_max_request_bytes,
                        config.socket_request_max_bytes.max(0) as usize,
                    ) / nr_shards,
                );
                let mut accept_tasks = Vec::new();
                for listener in listeners {
                    let ctx = ctx.clone();
                    let request_memory = request_memory.clone();
                    accept_tasks.push(glommio::spawn_local(async move {
                        loop {
                            match listener.accept().await {
                                Ok(stream) => {
                                    let _ = stream.set_nodelay(true);
                                    glommio::spawn_local(connection::serve(
                                        ctx.clone(),
                                        request_memory.clone(),
                                        stream,
                                    ))
                                    .detach();
                                }
                                Err(e) => {
                                    log::warn!("accept failed: {e}");
                                    glommio::timer::sleep(Duration::from_millis(10)).await;
                                }
                            }
                        }
                    }));
                }
                if shard_id == CONTROLLER_SHARD {
                    log::info!(
                        "queued.max.request.bytes: reads stop at {} bytes of requests per shard",
                        request_memory.share_bytes()
                    );
                    log::info!(
                        "kshard started in {} ms, serving on {:?}",
                        now_ms() - started_at_ms,
                        config
                            .listeners
                            .iter()
                            .map(|l| l.connection_string())
                            .collect::<Vec<_>>()
                    );
                }
                while !shutdown.load(Ordering::SeqCst) {
                    glommio::timer::sleep(Duration::from_millis(50)).await;
                }
                if let Some(c) = &cluster {
                    if shard_id == CONTROLLER_SHARD {
                        if config.controlled_shutdown_enable
                            && startup_errors.lock().expect("errors").is_empty()
                        {
                            c.controlled_shutdown(config.clone()).await;
                        }
                        serving_done.store(true, Ordering::SeqCst);
                    } else {
                        while !serving_done.load(Ordering::SeqCst) {
                            glommio::timer::sleep(Duration::from_millis(20)).await;
                        }
                    }
                }
                ctx.router.begin_shutdown();
                for t in accept_tasks {
                    t.cancel().await;
                }
                // Let parked fetches and in-flight appends finish.
                ctx.replica_manager.begin_shutdown();
                glommio::timer::sleep(Duration::from_millis(20)).await;
                // Direct mode: staged appends land before the logs close.
                ctx.replica_manager
                    .quiesce_direct_writes(|_, _| true, Duration::from_secs(10))
                    .await;
                let entries = ctx.replica_manager.partitions_mut().close_all();
                final_checkpoints
                    .lock()
                    .expect("checkpoints")
                    .extend(entries);
            }
        }
    };
    let io_memory_bytes = match config.log_io_mode {
        crate::config::LogIoMode::Direct => kshard_shards::shard::DIRECT_IO_MEMORY_BYTES,
        crate::config::LogIoMode::Buffered => kshard_shards::shard::MIN_IO_MEMORY_BYTES,
    };
    kshard_shards::shard::run_shards(nr_shards, true, io_memory_bytes, body)
        .map_err(|e| e.to_string())?;
    if let Some(c) = &cluster {
        // The registration goes now, not after the session timeout.
        c.close_session();
    }
    let errors = startup_errors.lock().expect("errors").clone();
    let entries = final_checkpoints.lock().expect("checkpoints").clone();
    write_checkpoints(&log_dir, &entries).map_err(|e| format!("writing checkpoints: {e}"))?;
    log::info!(
        "kshard stopped; zero-copy: {} bytes by sendfile, {} bytes copied, {} bytes from the direct-I/O read cache, {} bytes from direct-mode tail caches",
        sendfile::SENDFILE_BYTES.load(Ordering::Relaxed),
        sendfile::COPIED_BYTES.load(Ordering::Relaxed),
        sendfile::READ_CACHE_BYTES.load(Ordering::Relaxed),
        sendfile::TAIL_CACHE_BYTES_SENT.load(Ordering::Relaxed)
    );
    if !errors.is_empty() {
        return Err(errors.join("; "));
    }
    Ok(())
}

/// Time-based flush, retention, and (on the controller shard) the broker
/// checkpoint files.
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
        ctx.replica_manager
            .partitions_mut()
            .maintenance(now as i64, run_retention);
        ctx.replica_manager.start_roll_syncs();
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
            if let Err(e) = write_checkpoints(&ctx.log_dir, &entries) {
                log::error!("writing checkpoints: {e}");
            }
        }
    }
}
