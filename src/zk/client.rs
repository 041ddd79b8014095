//! The caller side of the ZooKeeper client: a blocking, thread-safe handle
//! that sends each request to the runtime thread and waits for its answer.

use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError};
use tokio::sync::mpsc::UnboundedSender;
use zookeeper_client as zkc;

use super::ops::{self, NewWatch};
use super::session::{Command, Settings, Worker};
use super::{ConnectString, ZkConfig, ZkEvent};
use crate::metadata::{
    parent_of, validate_path, MetadataStore, Op, OpResult, Stat, StoreError, StoreResult,
    ANY_VERSION,
};

/// Attempts of `delete_recursive` on one node when children keep appearing.
const DELETE_RECURSIVE_ATTEMPTS: usize = 3;

struct Inner {
    commands: UnboundedSender<Command>,
    events: Receiver<ZkEvent>,
    session_id: Arc<AtomicI64>,
    timeout: Duration,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Inner {
    fn shutdown(&self) {
        // Fails only if the worker is gone already.
        let _ = self.commands.send(Command::Close);
        let handle = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(handle) = handle {
            if handle.thread().id() != thread::current().id() && handle.join().is_err() {
                log::error!("ZooKeeper client thread panicked");
            }
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// A ZooKeeper session for the metadata plane. Cheap to clone; all clones
/// share one session, one runtime thread and one event channel. Dropping
/// the last clone closes the session like `close`.
#[derive(Clone)]
pub struct ZkClient {
    inner: Arc<Inner>,
}

impl fmt::Debug for ZkClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ZkClient(session 0x{:x})", self.session_id())
    }
}

fn validate(path: &str, sequential: bool) -> StoreResult<()> {
    if sequential {
        // ZooKeeper validates a sequential path with its suffix in place,
        // so "/queue/" is a valid prefix.
        validate_path(&format!("{path}0")).map_err(|_| {
            StoreError::BadArguments(format!("Invalid sequential path prefix \"{path}\""))
        })
    } else {
        validate_path(path)
    }
}

fn child_path(parent: &str, name: &str) -> String {
    if parent == "/" {
        format!("/{name}")
    } else {
        format!("{parent}/{name}")
    }
}

impl ZkClient {
    /// Connects to the ensemble of `cfg.connect`, creating its chroot (and
    /// parents) if missing as Kafka does at start-up; from then on every
    /// path is relative to the chroot. Fails after
    /// `connection_timeout_ms` with Kafka's "Timed out waiting for
    /// connection while in state: CONNECTING".
    pub fn connect(cfg: &ZkConfig) -> Result<ZkClient, String> {
        let connect = ConnectString::parse(&cfg.connect)?;
        if cfg.session_timeout_ms == 0 {
            return Err("zookeeper.session.timeout.ms must be positive".into());
        }
        if cfg.connection_timeout_ms == 0 {
            return Err("zookeeper.connection.timeout.ms must be positive".into());
        }
        let timeout = Duration::from_millis(cfg.session_timeout_ms);
        let settings = Settings {
            connect,
            session_timeout: timeout,
            connection_timeout: Duration::from_millis(cfg.connection_timeout_ms),
        };
        let (commands, command_rx) = tokio::sync::mpsc::unbounded_channel();
        let (event_tx, events) = crossbeam_channel::unbounded();
        let session_id = Arc::new(AtomicI64::new(0));
        let worker_session_id = session_id.clone();
        let (started_tx, started) = std::sync::mpsc::sync_channel(1);
        let thread = thread::Builder::new()
            .name("kshard-zk".into())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread()
                    .enable_time()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = started_tx.send(Err(format!("ZooKeeper client runtime: {e}")));
                        return;
                    }
                };
                runtime.block_on(async move {
                    match Worker::start(settings, command_rx, event_tx, worker_session_id).await {
                        Ok(worker) => {
                            let _ = started_tx.send(Ok(()));
                            worker.run().await;
                        }
                        Err(e) => {
                            let _ = started_tx.send(Err(e));
                        }
                    }
                });
            })
            .map_err(|e| format!("cannot start the ZooKeeper client thread: {e}"))?;
        // The worker bounds its own start-up by the connection timeout.
        let outcome = started
            .recv()
            .unwrap_or_else(|_| Err("ZooKeeper client thread died".into()));
        if let Err(e) = outcome {
            let _ = thread.join();
            return Err(e);
        }
        Ok(ZkClient {
            inner: Arc::new(Inner {
                commands,
                events,
                session_id,
                timeout,
                thread: Mutex::new(Some(thread)),
            }),
        })
    }

    /// The current session's id (a new one after SessionEstablished).
    pub fn session_id(&self) -> i64 {
        self.inner.session_id.load(Ordering::SeqCst)
    }

    /// Watch firings and session changes. There is one queue: every clone
    /// of the receiver (and of the client) takes from the same one, so one
    /// owner should drain it.
    pub fn events(&self) -> Receiver<ZkEvent> {
        self.inner.events.clone()
    }

    /// Closes the session (its ephemeral nodes vanish at once) and stops
    /// the runtime thread. Later calls fail with NotConnected.
    pub fn close(&self) {
        self.inner.shutdown();
    }

    /// Sends one request and waits for its answer, at most the session
    /// timeout. A timeout leaves a write's outcome unknown, as ZooKeeper's
    /// own clients do.
    fn call_watching<T, F, Fut>(&self, op: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(zkc::Client, Instant) -> Fut + Send + 'static,
        Fut: Future<Output = (StoreResult<T>, Option<NewWatch>)> + 'static,
    {
        let (reply, answer) = crossbeam_channel::bounded(1);
        let deadline = Instant::now() + self.inner.timeout;
        let start: super::session::Start = Box::new(move |client, deadline| {
            let request = op(client, deadline);
            Box::pin(async move {
                let (result, watch) = request.await;
                // The caller may have timed out; the watch still counts.
                let _ = reply.send(result);
                watch
            })
        });
        self.inner
            .commands
            .send(Command::Call { deadline, start })
            .map_err(|_| ops::closed_error())?;
        match answer.recv_deadline(deadline) {
            Ok(result) => result,
            Err(RecvTimeoutError::Timeout) => {
                Err(ops::timed_out_error(self.inner.timeout.as_millis() as u64))
            }
            Err(RecvTimeoutError::Disconnected) => Err(ops::closed_error()),
        }
    }

    fn call<T, F, Fut>(&self, op: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(zkc::Client, Instant) -> Fut + Send + 'static,
        Fut: Future<Output = StoreResult<T>> + 'static,
    {
        self.call_watching(move |client, deadline| {
            let request = op(client, deadline);
            async move { (request.await, None) }
        })
    }

    fn create_node(
        &self,
        path: &str,
        data: &[u8],
        ephemeral: bool,
        sequential: bool,
    ) -> StoreResult<String> {
        validate(path, sequential)?;
        let (path, data) = (path.to_string(), data.to_vec());
        self.call(move |c, _| ops::create(c, path, data, ephemeral, sequential))
    }

    fn get_data(&self, path: &str) -> StoreResult<(Vec<u8>, Stat)> {
        validate_path(path)?;
        let path = path.to_string();
        self.call(move |c, deadline| ops::get(c, path, deadline))
    }

    fn set_data(&self, path: &str, data: &[u8], expected_version: i32) -> StoreResult<Stat> {
        validate_path(path)?;
        let (path, data) = (path.to_string(), data.to_vec());
        self.call(move |c, _| ops::set(c, path, data, expected_version))
    }

    fn delete_node(&self, path: &str, expected_version: i32) -> StoreResult<()> {
        validate_path(path)?;
        let path = path.to_string();
        self.call(move |c, _| ops::delete(c, path, expected_version))
    }

    fn list_children(&self, path: &str) -> StoreResult<Vec<String>> {
        validate_path(path)?;
        let path = path.to_string();
        self.call(move |c, deadline| ops::children(c, path, deadline))
    }

    /// Like `MetadataStore::exists`, but reports connection problems
    /// instead of answering "absent".
    pub fn try_exists(&self, path: &str) -> StoreResult<Option<Stat>> {
        validate_path(path)?;
        let path = path.to_string();
        self.call(move |c, deadline| ops::exists(c, path, deadline))
    }

    /// The session owning `path` if it is an ephemeral node (0 for a
    /// persistent one); None if absent. Kafka's checkedEphemeralCreate
    /// compares it with the current session.
    pub fn ephemeral_owner(&self, path: &str) -> StoreResult<Option<i64>> {
        validate_path(path)?;
        let path = path.to_string();
        self.call(move |c, deadline| ops::ephemeral_owner(c, path, deadline))
    }

    /// Reads `path` and leaves a one-shot data watch: DataChanged or
    /// Deleted. NoNode sets no watch (as in ZooKeeper).
    pub fn get_watch(&self, path: &str) -> StoreResult<(Vec<u8>, Stat)> {
        validate_path(path)?;
        let path = path.to_string();
        self.call_watching(move |c, deadline| ops::get_watch(c, path, deadline))
    }

    /// Stats `path` and leaves a one-shot exists watch, also when the node
    /// is absent: Created, Deleted or DataChanged.
    pub fn exists_watch(&self, path: &str) -> StoreResult<Option<Stat>> {
        validate_path(path)?;
        let path = path.to_string();
        self.call_watching(move |c, deadline| ops::exists_watch(c, path, deadline))
    }

    /// Lists `path`'s children (sorted) and leaves a one-shot child watch:
    /// ChildrenChanged, or Deleted for the node itself.
    pub fn children_watch(&self, path: &str) -> StoreResult<Vec<String>> {
        validate_path(path)?;
        let path = path.to_string();
        self.call_watching(move |c, deadline| ops::children_watch(c, path, deadline))
    }

    /// Fault injection for tests and drills: makes the ensemble expire the
    /// current session, by attaching a second connection to it and closing
    /// that (the ZooKeeper FAQ's method). SessionExpired and then
    /// SessionEstablished follow on the event channel.
    pub fn force_session_expiry(&self) -> Result<(), String> {
        let (reply, answer) = crossbeam_channel::bounded(1);
        self.inner
            .commands
            .send(Command::ExpireSession { reply })
            .map_err(|_| "ZooKeeper: client closed".to_string())?;
        // Attaching waits for the connection timeout, closing for the
        // session timeout, at most.
        let bound = self.inner.timeout * 2 + Duration::from_secs(30);
        answer
            .recv_timeout(bound)
            .map_err(|_| "ZooKeeper: no answer to the session expiry".to_string())?
    }

    fn delete_tree(&self, path: &str, top: bool) -> StoreResult<()> {
        for _ in 0..DELETE_RECURSIVE_ATTEMPTS {
            let children = match self.list_children(path) {
                Ok(children) => children,
                // Someone else removed it meanwhile: that is what we wanted.
                Err(StoreError::NoNode(_)) if !top => return Ok(()),
                Err(e) => return Err(e),
            };
            for name in children {
                self.delete_tree(&child_path(path, &name), false)?;
            }
            match self.delete_node(path, ANY_VERSION) {
                Ok(()) | Err(StoreError::NoNode(_)) => return Ok(()),
                // A child appeared after the listing: go again.
                Err(StoreError::NotEmpty(_)) => continue,
                Err(e) => return Err(e),
            }
        }
        Err(StoreError::NotEmpty(path.to_string()))
    }

    /// Creates the missing ancestors of `path` as empty persistent nodes.
    fn create_parents(&self, path: &str) -> StoreResult<()> {
        let parent = parent_of(path);
        if parent == "/" {
            return Ok(());
        }
        match self.create_node(parent, &[], false, false) {
            Ok(_) | Err(StoreError::NodeExists(_)) => Ok(()),
            Err(StoreError::NoNode(_)) => {
                self.create_parents(parent)?;
                match self.create_node(parent, &[], false, false) {
                    Ok(_) | Err(StoreError::NodeExists(_)) => Ok(()),
                    Err(e) => Err(e),
                }
            }
            Err(e) => Err(e),
        }
    }
}

impl MetadataStore for ZkClient {
    fn create(
        &mut self,
        path: &str,
        data: &[u8],
        ephemeral: bool,
        sequential: bool,
    ) -> StoreResult<String> {
        self.create_node(path, data, ephemeral, sequential)
    }

    /// Kafka's createRecursive: try the node, and on NoNode create the
    /// parents and try again.
    fn create_all(&mut self, path: &str, data: &[u8]) -> StoreResult<String> {
        match self.create_node(path, data, false, false) {
            Err(StoreError::NoNode(_)) => {
                self.create_parents(path)?;
                self.create_node(path, data, false, false)
            }
            other => other,
        }
    }

    fn get(&self, path: &str) -> StoreResult<(Vec<u8>, Stat)> {
        self.get_data(path)
    }

    fn set(&mut self, path: &str, data: &[u8], expected_version: i32) -> StoreResult<Stat> {
        self.set_data(path, data, expected_version)
    }

    fn delete(&mut self, path: &str, expected_version: i32) -> StoreResult<()> {
        self.delete_node(path, expected_version)
    }

    /// Children first, depth-first; NoNode only if `path` is absent.
    fn delete_recursive(&mut self, path: &str) -> StoreResult<()> {
        validate_path(path)?;
        self.delete_tree(path, true)
    }

    fn children(&self, path: &str) -> StoreResult<Vec<String>> {
        self.list_children(path)
    }

    /// The trait cannot report errors here: a failure is logged and reads
    /// as absent. Callers that must tell the two apart use `try_exists`.
    fn exists(&self, path: &str) -> Option<Stat> {
        match self.try_exists(path) {
            Ok(stat) => stat,
            Err(e) => {
                log::error!("ZooKeeper exists({path}) failed: {e}");
                None
            }
        }
    }

    fn multi(&mut self, ops: &[Op]) -> StoreResult<Vec<OpResult>> {
        for op in ops {
            match op {
                Op::Create {
                    path, sequential, ..
                } => validate(path, *sequential)?,
                Op::SetData { path, .. } | Op::Delete { path, .. } | Op::Check { path, .. } => {
                    validate_path(path)?
                }
            }
        }
        let batch = ops.to_vec();
        self.call(move |c, _| ops::multi(c, batch))
    }
}
