//! A single-node broker inside the calling process, for fuzz targets and
//! regression tests: one shard whose glommio executor runs on the calling
//! thread (only while a call is in progress), with its metadata store and
//! logs in a directory of its own. Started the way `server::run` starts a
//! shard, minus the signal handlers and checkpoint files.
//!
//! Two ways in, both through the code a client connection reaches:
//! - [`InProcessBroker::call`]: one request frame (no size prefix) through
//!   `parse_request` and `handlers::dispatch`, as `connection::serve` does;
//! - [`InProcessBroker::exchange`]: raw bytes written to a loopback TCP
//!   connection served by `connection::serve` itself (framing, buffers).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_lite::{AsyncReadExt, AsyncWriteExt};
use glommio::net::{TcpListener, TcpStream};
use glommio::{LocalExecutor, LocalExecutorBuilder, Placement};
use kafka_protocol::messages::ApiKey;
use kshard_shards::mailbox::MailboxBuilder;

use crate::admin::embedded::EmbeddedAdmin;
use crate::config::BrokerConfig;
use crate::handlers;
use crate::handlers::api_versions::unsupported_version_response;
use crate::handlers::KafkaApis;
use crate::metadata::embedded::EmbeddedStore;
use crate::metadata::metadata_cache::MetadataCache;
use crate::protocol::{parse_request, Chunk, FrameError, Response};
use crate::replica::partitions::log_dir_op_done;
use crate::router::{ShardRequest, ShardResponse, CONTROLLER_SHARD};

/// What the broker did with one request frame.
#[derive(Debug, PartialEq, Eq)]
pub enum Answer {
    /// The response, size prefix included, as the connection would send it.
    Response(Vec<u8>),
    /// No response by design (acks=0 produce).
    NoResponse,
    /// The connection would be closed, for this reason.
    Closed(String),
    /// Still running when the wait ran out (a parked fetch, a join waiting
    /// for the rebalance); it goes on running in the background.
    Pending,
}

/// What a loopback connection received for the bytes written to it.
#[derive(Debug)]
pub struct Exchanged {
    /// Every byte the broker sent back.
    pub received: Vec<u8>,
    /// True when the broker closed the connection (or it reached EOF after
    /// the client's half-close) before the wait ran out.
    pub closed: bool,
}

pub struct InProcessBroker {
    // Declared first so the shard's state drops before its executor.
    ctx: Rc<KafkaApis>,
    addr: SocketAddr,
    client_host: Arc<str>,
    executor: LocalExecutor,
}

/// Settings that keep start-up and each call fast; `overrides` win.
fn broker_config(
    dir: &Path,
    port: u16,
    overrides: &[(&str, &str)],
) -> Result<BrokerConfig, String> {
    let mut map: BTreeMap<String, String> = BTreeMap::new();
    let defaults = [
        ("log.dirs", dir.join("logs").display().to_string()),
        ("listeners", format!("PLAINTEXT://127.0.0.1:{port}")),
        ("num.shards", "1".into()),
        ("log.io.mode", "buffered".into()),
        ("offsets.topic.num.partitions", "1".into()),
        ("group.initial.rebalance.delay.ms", "0".into()),
    ];
    for (k, v) in defaults {
        map.insert(k.to_string(), v);
    }
    for (k, v) in overrides {
        map.insert(k.to_string(), v.to_string());
    }
    BrokerConfig::from_map(&map).map_err(|e| e.to_string())
}

impl InProcessBroker {
    /// Starts a broker whose data lives under `dir` (created if missing).
    /// `overrides` are `server.properties` keys.
    pub fn start(dir: &Path, overrides: &[(&str, &str)]) -> Result<InProcessBroker, String> {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let executor = LocalExecutorBuilder::new(Placement::Unbound)
            .name("in-process-broker")
            .io_memory(kshard_shards::shard::MIN_IO_MEMORY_BYTES)
            .make()
            .map_err(|e| format!("starting the executor: {e}"))?;
        let (ctx, addr) = executor.run(start_shard(dir.to_path_buf(), overrides))?;
        Ok(InProcessBroker {
            ctx,
            addr,
            client_host: Arc::from("/127.0.0.1"),
            executor,
        })
    }

    /// The shard's state, for checks (topic counts, logs).
    pub fn context(&self) -> &Rc<KafkaApis> {
        &self.ctx
    }

    /// The loopback address `connection::serve` answers on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Runs one request frame (without its size prefix) as a connection
    /// would, waiting at most `wait` for the answer.
    pub fn call(&self, frame: Bytes, wait: Duration) -> Answer {
        let ctx = self.ctx.clone();
        let client_host = self.client_host.clone();
        self.executor.run(async move {
            let req = match parse_request(frame, &client_host) {
                Ok(req) => req,
                Err(FrameError::UnsupportedVersion {
                    api_key: ApiKey::ApiVersions,
                    correlation_id,
                    ..
                }) => return Answer::Response(unsupported_version_response(correlation_id).into()),
                Err(e) => return Answer::Closed(format!("bad request: {e:?}")),
            };
            let handler = glommio::spawn_local(async move { handlers::dispatch(&ctx, req).await });
            // Detached: a handler still running when the wait ends finishes
            // in the background, as it would after its client went away.
            let handle = handler.detach();
            let timeout = async {
                glommio::timer::sleep(wait).await;
                None
            };
            match futures_lite::future::or(handle, timeout).await {
                Some(Ok(Some(resp))) => Answer::Response(materialize(resp)),
                Some(Ok(None)) => Answer::NoResponse,
                Some(Err(e)) => Answer::Closed(e),
                None => Answer::Pending,
            }
        })
    }

    /// Opens a loopback connection, writes `bytes`, half-closes, and reads
    /// until the broker closes or `wait` runs out.
    pub fn exchange(&self, bytes: &[u8], wait: Duration) -> Result<Exchanged, String> {
        let addr = self.addr;
        self.executor.run(async move {
            let mut stream = TcpStream::connect(addr)
                .await
                .map_err(|e| format!("connect {addr}: {e}"))?;
            let deadline = Instant::now() + wait;
            let mut received = Vec::new();
            // The broker may close before reading everything: not an error.
            if stream.write_all(bytes).await.is_ok() {
                let _ = stream.shutdown(std::net::Shutdown::Write).await;
            }
            let mut chunk = vec![0u8; 64 * 1024];
            loop {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Ok(Exchanged {
                        received,
                        closed: false,
                    });
                }
                let read = stream.read(&mut chunk);
                let timeout = async {
                    glommio::timer::sleep(left).await;
                    Err(std::io::Error::from(std::io::ErrorKind::TimedOut))
                };
                match futures_lite::future::or(read, timeout).await {
                    Ok(0) => break,
                    Ok(n) => received.extend_from_slice(&chunk[..n]),
                    Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {
                        return Ok(Exchanged {
                            received,
                            closed: false,
                        })
                    }
                    // Reset by the broker: it closed the connection.
                    Err(_) => break,
                }
            }
            Ok(Exchanged {
                received,
                closed: true,
            })
        })
    }

    /// Lets background work (parked fetches, timers, appends) run for `d`.
    pub fn idle(&self, d: Duration) {
        self.executor.run(glommio::timer::sleep(d));
    }

    /// Partitions in the metadata image (to decide when to start afresh).
    pub fn partition_count(&self) -> usize {
        let image = self.ctx.metadata.image();
        image.topics.values().map(|t| t.partitions.len()).sum()
    }
}

impl Drop for InProcessBroker {
    fn drop(&mut self) {
        let ctx = self.ctx.clone();
        self.executor.run(async move {
            ctx.router.begin_shutdown();
            ctx.replica_manager.begin_shutdown();
            ctx.replica_manager.complete_parked_fetches();
            glommio::timer::sleep(Duration::from_millis(5)).await;
            let closing = ctx.replica_manager.partitions_mut().close_all();
            for (_, closed) in closing {
                let _ = log_dir_op_done(closed).await;
            }
        });
    }
}

/// The response's bytes, file slices read in.
fn materialize(resp: Response) -> Vec<u8> {
    use std::os::unix::fs::FileExt;
    let mut out = Vec::with_capacity(resp.total_len());
    for chunk in resp.chunks {
        match chunk {
            Chunk::Bytes(b) => out.extend_from_slice(&b),
            Chunk::File(f) => match f.cached {
                Some(b) => out.extend_from_slice(&b),
                None => {
                    let start = out.len();
                    out.resize(start + f.len as usize, 0);
                    // A short read leaves zeros, as a truncated segment would.
                    let _ = f.file.read_at(&mut out[start..], f.position);
                }
            },
        }
    }
    out
}

/// Builds the shard as `server::run` does, and serves `connection::serve`
/// on a loopback port.
async fn start_shard(
    dir: std::path::PathBuf,
    overrides: &[(&str, &str)],
) -> Result<(Rc<KafkaApis>, SocketAddr), String> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("bind: {e}"))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let config = Arc::new(broker_config(&dir, addr.port(), overrides)?);
    let (log_dirs, startup_checkpoints) = super::log_dirs::prepare_log_dirs(&config)?;
    let store = EmbeddedStore::open(&config.metadata_dir())
        .map_err(|e| format!("metadata store {}: {e}", config.metadata_dir().display()))?;
    let mut controller = EmbeddedAdmin::open(store, config.clone())?;
    let dynamic_config = controller.load_dynamic_config()?;
    let image = controller.build_image(&dynamic_config.current())?;
    let authorizer =
        crate::security::authorizer::AclAuthorizer::from_config(&config)?.map(Arc::new);
    if let Some(authorizer) = &authorizer {
        crate::admin::acls::load_embedded(&mut controller, authorizer)?;
    }
    controller.defer_store_syncs();
    crate::metadata::meta_properties::write_meta_properties_all(
        &config.log_dirs,
        config.effective_broker_id(),
        &image.cluster_id,
    )?;
    let metadata = Arc::new(MetadataCache::new(image));
    let mailbox = MailboxBuilder::<ShardRequest, ShardResponse>::new(1, 64);
    let ctx = super::shard::build(super::shard::ShardConfig {
        shard_id: CONTROLLER_SHARD,
        nr_shards: 1,
        config: config.clone(),
        cleaner_slots: Arc::new(crate::replica::cleaner_slots::CleanerSlots::new(
            dynamic_config.clone(),
        )),
        dynamic_config,
        quotas: Arc::new(crate::quota::QuotaManagers::new(&config)),
        log_dirs,
        metadata,
        startup_checkpoints,
        controller: Some(controller),
        cluster: None,
        authorizer,
    });
    let mb = mailbox
        .join(CONTROLLER_SHARD, super::shard::mailbox_handler(&ctx))
        .await;
    ctx.router.set_mailbox(mb);
    let coordinator = ctx.coordinator.clone().expect("the controller shard");
    coordinator.start().await;
    let txn_coordinator = ctx.txn_coordinator.clone().expect("the controller shard");
    txn_coordinator.start().await;
    glommio::spawn_local(ctx.replica_manager.clone().run_purgatory_ticker()).detach();
    glommio::spawn_local(super::maintenance_loop(ctx.clone())).detach();
    super::spawn_log_cleaner(&ctx)?;
    glommio::spawn_local(super::ship_index_writes(ctx.clone())).detach();
    let accept_ctx = ctx.clone();
    // One shard: it gets the whole bound, as the broker's only shard would.
    let request_memory = super::request_memory::RequestMemoryPool::new(
        super::request_memory::queued_max_request_bytes(
            config.queued_max_request_bytes,
            config.socket_request_max_bytes.max(0) as usize,
        ),
    );
    // The in-process broker serves its first listener, plaintext.
    let security = super::listener::build_listeners(&config)?
        .into_iter()
        .next()
        .ok_or("no listener")?;
    glommio::spawn_local(async move {
        while let Ok(stream) = listener.accept().await {
            let _ = stream.set_nodelay(true);
            let serve = super::connection::serve(
                accept_ctx.clone(),
                request_memory.clone(),
                stream,
                security.clone(),
            );
            glommio::spawn_local(serve).detach();
        }
    })
    .detach();
    Ok((ctx, addr))
}
