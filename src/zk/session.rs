//! The runtime-thread side of `ZkClient`: owns the crate client, runs the
//! callers' requests, keeps the one-shot watch registry, turns session
//! state changes into events, and replaces an expired session.

use std::collections::{HashMap, HashSet, VecDeque};
use std::future::poll_fn;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;
use tokio::sync::mpsc::UnboundedReceiver;
use zookeeper_client as zkc;

use super::ops::{self, NewWatch, WatchClass};
use super::ready::{LocalFuture, ReadySet};
use super::resume::{self, Armed, Rearmed};
use super::{ConnectString, NodeEventKind, ZkEvent};

/// First pause between attempts to replace an expired session; doubles up
/// to the cap (Kafka's ZooKeeperClient retries every second).
const RECREATE_BACKOFF_START: Duration = Duration::from_millis(100);
const RECREATE_BACKOFF_MAX: Duration = Duration::from_millis(1000);

/// Starts one caller's request against the current client; the future
/// answers the caller itself and may hand back a watch the server set.
pub(crate) type Start =
    Box<dyn FnOnce(zkc::Client, Instant) -> LocalFuture<Option<NewWatch>> + Send>;

pub(crate) enum Command {
    Call {
        deadline: Instant,
        start: Start,
    },
    /// Make the ensemble expire the current session (fault injection).
    ExpireSession {
        reply: crossbeam_channel::Sender<Result<(), String>>,
    },
    Close,
}

#[derive(Clone)]
pub(crate) struct Settings {
    pub(crate) connect: ConnectString,
    pub(crate) session_timeout: Duration,
    pub(crate) connection_timeout: Duration,
}

/// Connects a session with the chroot applied, within `connection_timeout`.
async fn connect_session(settings: &Settings, create_chroot: bool) -> Result<zkc::Client, String> {
    let hosts = settings.connect.hosts();
    let deadline = Instant::now() + settings.connection_timeout;
    let client = loop {
        let remaining = deadline.saturating_duration_since(Instant::now());
        let attempt = zkc::Client::connector()
            .with_session_timeout(settings.session_timeout)
            .connect(&hosts);
        match tokio::time::timeout(remaining, attempt).await {
            Ok(Ok(client)) => break client,
            Ok(Err(e)) if Instant::now() + RECREATE_BACKOFF_START < deadline => {
                log::debug!("ZooKeeper connect to {hosts} failed ({e}), retrying");
                tokio::time::sleep(RECREATE_BACKOFF_START).await;
            }
            // Kafka's ZooKeeperClientTimeoutException text.
            _ => return Err("Timed out waiting for connection while in state: CONNECTING".into()),
        }
    };
    let Some(chroot) = settings.connect.chroot.as_deref() else {
        return Ok(client);
    };
    if create_chroot {
        // As Kafka does at start-up: create the chroot through the root
        // view, then work inside it.
        let create = ops::ensure_path(&client, chroot);
        match tokio::time::timeout(settings.session_timeout, create).await {
            Ok(Ok(())) => log::info!("Created zookeeper path {chroot}"),
            Ok(Err(e)) => return Err(format!("Failed to create chroot {chroot}: {e}")),
            Err(_) => return Err(format!("Timed out creating chroot {chroot}")),
        }
    }
    client
        .chroot(chroot.to_string())
        .map_err(|_| format!("Invalid chroot {chroot}"))
}

/// Attaches a second connection to `session` and closes it: the ensemble
/// then expires the session for every connection using it (the method of
/// the ZooKeeper FAQ for testing expiry).
async fn expire_session(settings: Settings, session: zkc::SessionInfo) -> Result<(), String> {
    let twin = tokio::time::timeout(
        settings.connection_timeout,
        zkc::Client::connector()
            .with_session(session)
            .with_session_timeout(settings.session_timeout)
            .connect(&settings.connect.hosts()),
    )
    .await
    .map_err(|_| "timed out attaching to the session".to_string())?
    .map_err(|e| format!("attaching to the session failed: {e}"))?;
    let mut state = twin.state_watcher();
    drop(twin);
    let closed = async { while !state.changed().await.is_terminated() {} };
    tokio::time::timeout(settings.session_timeout, closed)
        .await
        .map_err(|_| "timed out closing the session".to_string())
}

/// Runs `expire_session` on a thread of its own while blocking this one.
/// Blocking matters: the server closes the older connection whenever one
/// attaches to a session, and our own client, left running, would at once
/// reconnect and knock the twin off before it can close the session.
fn expire_session_blocking(settings: Settings, session: zkc::SessionInfo) -> Result<(), String> {
    let twin = std::thread::Builder::new()
        .name("kshard-zk-expire".into())
        .spawn(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .build()
                .map_err(|e| format!("runtime: {e}"))?
                .block_on(expire_session(settings, session))
        })
        .map_err(|e| format!("cannot start a thread: {e}"))?;
    twin.join()
        .unwrap_or_else(|_| Err("session expiry thread panicked".into()))
}

type StateFuture = LocalFuture<(zkc::StateWatcher, zkc::SessionState)>;

fn next_state(mut watcher: zkc::StateWatcher) -> StateFuture {
    Box::pin(async move {
        let state = watcher.changed().await;
        (watcher, state)
    })
}

enum Output {
    Done,
    Watch {
        generation: u64,
        watch: NewWatch,
    },
    Fired {
        generation: u64,
        id: u64,
        class: WatchClass,
        path: String,
        event: zkc::WatchedEvent,
    },
    /// The watches of a resumed session, set again.
    Rearmed {
        generation: u64,
        rearmed: Rearmed,
    },
}

/// How a lost connection ended.
enum Reconnected {
    /// The same session, through a new crate client.
    Resumed(zkc::Client),
    /// The server says the session expired.
    Expired,
    /// A new session replacing an expired one.
    New(zkc::Client),
}

struct Registration {
    id: u64,
    czxid: Option<i64>,
    zxid: i64,
}

/// The one-shot watches pending in the current session, at most one per
/// (path, class): ZooKeeper fires one event per change to a default
/// watcher however often it was registered, and so do we.
#[derive(Default)]
pub(crate) struct WatchRegistry {
    pending: HashMap<(String, WatchClass), Registration>,
    /// Watches whose firing was already reported through the other class
    /// (a node's deletion fires both its data and its child watch).
    suppressed: HashSet<u64>,
    next_id: u64,
}

impl WatchRegistry {
    /// Records a new watch; None if one of that class is already pending,
    /// in which case the caller drops the duplicate.
    pub(crate) fn register(
        &mut self,
        path: &str,
        class: WatchClass,
        czxid: Option<i64>,
        zxid: i64,
    ) -> Option<u64> {
        let key = (path.to_string(), class);
        if self.pending.contains_key(&key) {
            return None;
        }
        let id = self.next_id;
        self.next_id += 1;
        self.pending.insert(key, Registration { id, czxid, zxid });
        Some(id)
    }

    /// A watch fired; true if the event is to be reported.
    pub(crate) fn fired(
        &mut self,
        id: u64,
        class: WatchClass,
        path: &str,
        kind: NodeEventKind,
    ) -> bool {
        if self.suppressed.remove(&id) {
            return false;
        }
        let key = (path.to_string(), class);
        let Some(reg) = self.pending.remove(&key) else {
            return false;
        };
        if reg.id != id {
            // Not ours (cannot happen: duplicates are never armed); keep it.
            self.pending.insert(key, reg);
            return false;
        }
        if kind == NodeEventKind::Deleted {
            let other = match class {
                WatchClass::Data => WatchClass::Child,
                WatchClass::Child => WatchClass::Data,
            };
            let other_key = (path.to_string(), other);
            // Same incarnation of the node: its deletion fires that watch
            // too, and we have already said so.
            if let Some(o) = self.pending.get(&other_key) {
                if o.czxid.is_some() && o.czxid == reg.czxid {
                    let o = self.pending.remove(&other_key).map(|o| o.id);
                    self.suppressed.extend(o);
                }
            }
        }
        true
    }

    /// A watch ended without a node event (session ended).
    fn forget(&mut self, id: u64, class: WatchClass, path: &str) {
        self.suppressed.remove(&id);
        let key = (path.to_string(), class);
        if self.pending.get(&key).is_some_and(|r| r.id == id) {
            self.pending.remove(&key);
        }
    }

    fn clear(&mut self) {
        self.pending.clear();
        self.suppressed.clear();
    }

    /// Empties the registry, returning the watches still pending.
    fn take_pending(&mut self) -> Vec<Armed> {
        self.suppressed.clear();
        self.pending
            .drain()
            .map(|((path, class), reg)| Armed {
                path,
                class,
                czxid: reg.czxid,
                zxid: reg.zxid,
            })
            .collect()
    }

    #[cfg(test)]
    pub(crate) fn pending_count(&self) -> usize {
        self.pending.len()
    }
}

fn node_event_kind(event: zkc::EventType) -> Option<NodeEventKind> {
    match event {
        zkc::EventType::NodeCreated => Some(NodeEventKind::Created),
        zkc::EventType::NodeDeleted => Some(NodeEventKind::Deleted),
        zkc::EventType::NodeDataChanged => Some(NodeEventKind::DataChanged),
        zkc::EventType::NodeChildrenChanged => Some(NodeEventKind::ChildrenChanged),
        zkc::EventType::Session => None,
    }
}

pub(crate) struct Worker {
    settings: Settings,
    commands: UnboundedReceiver<Command>,
    events: Sender<ZkEvent>,
    session_id: Arc<AtomicI64>,
    /// The live session's client; None while a replacement is connecting.
    client: Option<zkc::Client>,
    /// Counts sessions so late results of an old one are recognized.
    generation: u64,
    connected: bool,
    state: Option<StateFuture>,
    reconnect: Option<LocalFuture<Reconnected>>,
    /// Watches of a session being resumed, to be set again.
    rearm: Vec<Armed>,
    /// Calls that arrived while no session existed.
    waiting: VecDeque<(Instant, Start)>,
    running: ReadySet<Output>,
    watches: WatchRegistry,
}

impl Worker {
    /// Connects the first session (creating the chroot) and returns the
    /// worker to run, or Kafka's connect-timeout message.
    pub(crate) async fn start(
        settings: Settings,
        commands: UnboundedReceiver<Command>,
        events: Sender<ZkEvent>,
        session_id: Arc<AtomicI64>,
    ) -> Result<Worker, String> {
        let client = connect_session(&settings, true).await?;
        session_id.store(client.session_id().0, Ordering::SeqCst);
        Ok(Worker {
            settings,
            commands,
            events,
            session_id,
            state: Some(next_state(client.state_watcher())),
            client: Some(client),
            generation: 0,
            connected: true,
            reconnect: None,
            rearm: Vec::new(),
            waiting: VecDeque::new(),
            running: ReadySet::new(),
            watches: WatchRegistry::default(),
        })
    }

    pub(crate) async fn run(mut self) {
        poll_fn(|cx| self.poll_step(cx)).await;
        self.shutdown().await;
    }

    fn emit(&self, event: ZkEvent) {
        // The receiver lives as long as the ZkClient; a send can only fail
        // during shutdown, when nobody listens any more.
        let _ = self.events.send(event);
    }

    /// Ready when the worker is to stop (close, or every ZkClient gone).
    fn poll_step(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        loop {
            match self.commands.poll_recv(cx) {
                Poll::Ready(Some(cmd)) => {
                    if self.command(cmd) {
                        return Poll::Ready(());
                    }
                    continue;
                }
                Poll::Ready(None) => return Poll::Ready(()),
                Poll::Pending => {}
            }
            // Watch firings before state changes: what ZooKeeper sent
            // before an expiry is reported before SessionExpired.
            if let Poll::Ready(out) = self.running.poll_next(cx) {
                self.output(out);
                continue;
            }
            if let Some(state) = self.state.as_mut() {
                if let Poll::Ready((watcher, st)) = state.as_mut().poll(cx) {
                    self.state = (!st.is_terminated()).then(|| next_state(watcher));
                    self.state_changed(st);
                    continue;
                }
            }
            if let Some(reconnect) = self.reconnect.as_mut() {
                if let Poll::Ready(outcome) = reconnect.as_mut().poll(cx) {
                    self.reconnect = None;
                    match outcome {
                        Reconnected::Resumed(client) => self.session_resumed(client),
                        Reconnected::Expired => self.session_expired(),
                        Reconnected::New(client) => self.session_created(client),
                    }
                    continue;
                }
            }
            return Poll::Pending;
        }
    }

    fn start_call(&mut self, client: zkc::Client, deadline: Instant, start: Start) {
        let generation = self.generation;
        let call = start(client, deadline);
        self.running.push_back(Box::pin(async move {
            match call.await {
                Some(watch) => Output::Watch { generation, watch },
                None => Output::Done,
            }
        }));
    }

    /// Handles one command; true means close.
    fn command(&mut self, cmd: Command) -> bool {
        match cmd {
            Command::Call { deadline, start } => {
                if Instant::now() < deadline {
                    match self.client.clone() {
                        Some(client) => self.start_call(client, deadline, start),
                        None => self.waiting.push_back((deadline, start)),
                    }
                }
                // Else the caller gave up already: never run it late.
            }
            Command::ExpireSession { reply } => match self.client.as_ref() {
                Some(client) => {
                    let session = client.session().clone();
                    let _ = reply.send(expire_session_blocking(self.settings.clone(), session));
                }
                None => {
                    let _ = reply.send(Err("no live session".into()));
                }
            },
            Command::Close => return true,
        }
        false
    }

    fn output(&mut self, out: Output) {
        match out {
            Output::Done => {}
            Output::Watch { generation, watch } => {
                if generation == self.generation {
                    self.arm(watch);
                }
                // Else it was set in a session that is gone.
            }
            Output::Rearmed {
                generation,
                rearmed,
            } => {
                if generation != self.generation {
                    return;
                }
                for (kind, path) in rearmed.events {
                    self.emit(ZkEvent::Node { kind, path });
                }
                for watch in rearmed.watches {
                    self.arm(watch);
                }
            }
            Output::Fired {
                generation,
                id,
                class,
                path,
                event,
            } => {
                if generation != self.generation {
                    return;
                }
                match node_event_kind(event.event_type) {
                    Some(kind) => {
                        if self.watches.fired(id, class, &path, kind) {
                            self.emit(ZkEvent::Node {
                                kind,
                                path: event.path,
                            });
                        }
                    }
                    // The session ended: the watch stays registered, to
                    // be set again if the session is resumed (the end of
                    // the session empties the registry either way).
                    None if event.session_state.is_terminated() => {}
                    None => self.watches.forget(id, class, &path),
                }
            }
        }
    }

    /// Registers a watch the server set in the current session and starts
    /// waiting for it to fire.
    fn arm(&mut self, watch: NewWatch) {
        let generation = self.generation;
        let NewWatch {
            path,
            class,
            czxid,
            zxid,
            watcher,
        } = watch;
        let Some(id) = self.watches.register(&path, class, czxid, zxid) else {
            // One of this class is pending on the path: dropping the
            // duplicate keeps one event per change.
            return;
        };
        // Polled next: if it fired already, that happened after the
        // reply that armed it and before anything still queued.
        self.running.push_front(Box::pin(async move {
            let event = watcher.changed().await;
            Output::Fired {
                generation,
                id,
                class,
                path,
                event,
            }
        }));
    }

    fn state_changed(&mut self, state: zkc::SessionState) {
        match state {
            zkc::SessionState::Disconnected => {
                if self.connected {
                    self.connected = false;
                    self.emit(ZkEvent::Disconnected);
                }
            }
            zkc::SessionState::SyncConnected | zkc::SessionState::ConnectedReadOnly => {
                if !self.connected {
                    self.connected = true;
                    self.emit(ZkEvent::Connected);
                }
            }
            zkc::SessionState::Expired
            | zkc::SessionState::AuthFailed
            | zkc::SessionState::Closed => {
                self.session_lost(state);
            }
        }
    }

    /// The crate ended the session: after 7/5 of the session timeout
    /// without a server (its own verdict), or on the server's word. Like
    /// ZooKeeper's Java client, only the server's word counts: first try to
    /// resume the session (see `resume`); calls wait meanwhile.
    fn session_lost(&mut self, state: zkc::SessionState) {
        let session = self.client.take().map(|c| c.session().clone());
        self.generation += 1;
        self.rearm = self.watches.take_pending();
        let session = match session {
            Some(session) if state == zkc::SessionState::Expired => session,
            _ => return self.session_expired(),
        };
        log::info!(
            "ZooKeeper session 0x{:x} lost its connection; resuming it until a server answers",
            session.id().0
        );
        if self.connected {
            self.connected = false;
            self.emit(ZkEvent::Disconnected);
        }
        let settings = self.settings.clone();
        self.reconnect = Some(Box::pin(async move {
            let resumed = resume::resume_until_answered(
                settings,
                session,
                RECREATE_BACKOFF_START,
                RECREATE_BACKOFF_MAX,
            );
            match resumed.await {
                Some(client) => Reconnected::Resumed(client),
                None => Reconnected::Expired,
            }
        }));
    }

    /// The session is gone for good (Kafka's ZooKeeperClient on Expired):
    /// tell the owner, then build a new session, retrying until one is
    /// established.
    fn session_expired(&mut self) {
        log::warn!(
            "ZooKeeper session 0x{:x} expired, creating a new one",
            self.session_id.load(Ordering::SeqCst)
        );
        self.client = None;
        self.connected = false;
        self.generation += 1;
        self.watches.clear();
        self.rearm.clear();
        self.emit(ZkEvent::SessionExpired);
        let settings = self.settings.clone();
        self.reconnect = Some(Box::pin(async move {
            let mut backoff = RECREATE_BACKOFF_START;
            loop {
                match connect_session(&settings, false).await {
                    Ok(client) => return Reconnected::New(client),
                    Err(e) => {
                        log::warn!("Recreating the ZooKeeper session failed: {e}; retrying");
                        tokio::time::sleep(backoff).await;
                        backoff = (backoff * 2).min(RECREATE_BACKOFF_MAX);
                    }
                }
            }
        }));
    }

    /// The server took the session back: the same id, ephemeral nodes and
    /// (once set again) watches. The owner sees Connected, as after any
    /// reconnection.
    fn session_resumed(&mut self, client: zkc::Client) {
        log::info!("ZooKeeper session 0x{:x} resumed", client.session_id().0);
        self.state = Some(next_state(client.state_watcher()));
        self.connected = true;
        self.client = Some(client.clone());
        self.emit(ZkEvent::Connected);
        let generation = self.generation;
        let armed = std::mem::take(&mut self.rearm);
        let deadline = Instant::now() + self.settings.session_timeout;
        let rearm_client = client.clone();
        self.running.push_back(Box::pin(async move {
            let rearmed = resume::rearm(rearm_client, armed, deadline).await;
            Output::Rearmed {
                generation,
                rearmed,
            }
        }));
        self.start_waiting(&client);
    }

    /// Starts the calls that waited for a session (those still wanted).
    fn start_waiting(&mut self, client: &zkc::Client) {
        let now = Instant::now();
        while let Some((deadline, start)) = self.waiting.pop_front() {
            if deadline > now {
                self.start_call(client.clone(), deadline, start);
            }
        }
    }

    fn session_created(&mut self, client: zkc::Client) {
        let session_id = client.session_id().0;
        log::info!("ZooKeeper session 0x{session_id:x} established");
        self.session_id.store(session_id, Ordering::SeqCst);
        self.state = Some(next_state(client.state_watcher()));
        self.connected = true;
        self.client = Some(client.clone());
        self.emit(ZkEvent::SessionEstablished { session_id });
        self.start_waiting(&client);
    }

    /// Closes the session so its ephemeral nodes go at once, waiting (up to
    /// the session timeout) for the server to confirm.
    async fn shutdown(mut self) {
        self.running.clear();
        self.waiting.clear();
        self.reconnect = None;
        let Some(client) = self.client.take() else {
            return;
        };
        if client.state().is_terminated() {
            return;
        }
        let mut state = client.state_watcher();
        drop(client);
        let closed = async { while !state.changed().await.is_terminated() {} };
        if tokio::time::timeout(self.settings.session_timeout, closed)
            .await
            .is_err()
        {
            log::warn!("ZooKeeper session close not confirmed in time");
        }
        debug_assert_eq!(self.running.len(), 0);
    }
}
