//! KafkaController for ZooKeeper mode. Every broker runs this event thread
//! (Kafka's controller-event-thread, pinned next to the coordinator shard);
//! it takes part in the `/controller` election and, while it holds the
//! role, reacts to the watches on `/brokers/ids`, `/brokers/topics`,
//! `/brokers/topics/<t>`, `/admin/delete_topics`,
//! `/admin/preferred_replica_election` and `/isr_change_notification`,
//! keeping partition leadership in ZooKeeper and telling brokers by
//! LeaderAndIsr, UpdateMetadata and StopReplica. The work is blocking
//! ZooKeeper round trips, so it lives on its own thread, not on a shard.

pub mod broker_client;
pub mod channel;
pub mod context;
pub mod elections;
mod events;
mod leadership;
pub mod log_dir_events;
pub mod reassignment;
mod requests;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use crate::config::dynamic::DynamicBrokerConfig;
use crate::config::BrokerConfig;
use crate::controller::channel::ControllerChannelManager;
use crate::metadata::{MetadataStore, Op, StoreError};
use crate::protocol::errors::ErrorCode;
use crate::security::inter_broker::InterBrokerSecurity;
use crate::zk::{NodeEventKind, ZkClient, ZkEvent};
use context::ControllerContext;
use elections::LeaderAndIsr;

pub const CONTROLLER_PATH: &str = "/controller";
pub const CONTROLLER_EPOCH_PATH: &str = "/controller_epoch";
pub const DELETE_TOPICS_PATH: &str = "/admin/delete_topics";
pub const PREFERRED_ELECTION_PATH: &str = "/admin/preferred_replica_election";
pub const ISR_CHANGE_PATH: &str = "/isr_change_notification";

/// What a broker's request handlers ask of the local controller.
pub enum ControllerRequest {
    /// ElectLeaders: `partitions` None = all; election_type 0 preferred, 1 unclean.
    ElectLeaders {
        partitions: Option<Vec<(String, i32)>>,
        election_type: i8,
        reply: futures_channel::oneshot::Sender<Result<Vec<ElectionResult>, ErrorCode>>,
    },
    /// AlterPartition from the leader `broker_id`.
    AlterPartition {
        broker_id: i32,
        changes: Vec<IsrChangeRequest>,
        reply: futures_channel::oneshot::Sender<Result<Vec<IsrChangeResult>, ErrorCode>>,
    },
    /// ControlledShutdown from `broker_id`: partitions it still leads.
    ControlledShutdown {
        broker_id: i32,
        reply: futures_channel::oneshot::Sender<Result<Vec<(String, i32)>, ErrorCode>>,
    },
    /// AlterPartitionReassignments (KIP-455).
    AlterPartitionReassignments {
        reassignments: Vec<reassignment::ReassignmentRequest>,
        reply: futures_channel::oneshot::Sender<
            Result<Vec<reassignment::ReassignmentResult>, ErrorCode>,
        >,
    },
    /// ListPartitionReassignments: the named partitions, or None for all.
    ListPartitionReassignments {
        partitions: Option<Vec<(String, i32)>>,
        reply: futures_channel::oneshot::Sender<
            Result<Vec<reassignment::OngoingReassignment>, ErrorCode>,
        >,
    },
    /// A topic's `unclean.leader.election.enable` override (None: unset),
    /// or, with no topic, the broker default changed (Kafka's
    /// enableTopicUncleanLeaderElection / enableDefaultUncleanLeaderElection).
    UncleanElectionConfig {
        topic: Option<String>,
        unclean_override: Option<bool>,
    },
}

#[derive(Debug, Clone)]
pub struct IsrChangeRequest {
    pub topic_id: uuid::Uuid,
    pub partition: i32,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    pub new_isr: Vec<i32>,
}

#[derive(Debug, Clone)]
pub struct IsrChangeResult {
    pub topic_id: uuid::Uuid,
    pub partition: i32,
    pub error_code: ErrorCode,
    pub leader: i32,
    pub leader_epoch: i32,
    pub isr: Vec<i32>,
    pub partition_epoch: i32,
}

#[derive(Debug, Clone)]
pub struct ElectionResult {
    pub topic: String,
    pub partition: i32,
    pub error_code: ErrorCode,
    pub error_message: Option<String>,
}

pub(crate) enum ControllerEvent {
    Zk(ZkEvent),
    Request(ControllerRequest),
    /// A broker's answer to a LeaderAndIsr.
    LeaderAndIsrResponse {
        broker: i32,
        body: bytes::Bytes,
    },
    /// A broker answered the StopReplica(delete) of a topic being deleted.
    DeletionAck {
        topic: String,
        broker: i32,
        ok: bool,
    },
}

/// The broker's way to the local controller thread.
#[derive(Clone)]
pub struct ControllerHandle {
    events: crossbeam_channel::Sender<ControllerEvent>,
    active: Arc<AtomicBool>,
    /// The broker id of the active controller as last seen in `/controller`.
    active_id: Arc<AtomicI32>,
}

impl ControllerHandle {
    pub fn is_active(&self) -> bool {
        self.active.load(Ordering::Acquire)
    }
    pub fn active_controller_id(&self) -> i32 {
        self.active_id.load(Ordering::Acquire)
    }
    pub fn request(&self, req: ControllerRequest) -> bool {
        self.events.send(ControllerEvent::Request(req)).is_ok()
    }
}

pub struct KafkaController {
    zk: ZkClient,
    config: Arc<BrokerConfig>,
    /// For the live `unclean.leader.election.enable` default.
    dynamic_config: Arc<DynamicBrokerConfig>,
    /// How the controller channel reaches the brokers.
    inter_broker: Arc<InterBrokerSecurity>,
    broker_id: i32,
    events_tx: crossbeam_channel::Sender<ControllerEvent>,
    active: Arc<AtomicBool>,
    active_id: Arc<AtomicI32>,
    epoch: i32,
    epoch_zk_version: i32,
    ctx: ControllerContext,
    channels: Option<ControllerChannelManager>,
    next_rebalance_check: Instant,
    /// Set by a new session until `/brokers/ids/<id>` is ours again: when
    /// to try next, and how many attempts failed.
    registration_due: Option<(Instant, u32)>,
}

/// Pause between attempts at registering again while the expired
/// session's node is still there.
const REREGISTER_RETRY: Duration = Duration::from_millis(200);

/// A change listener's watched paths and its wake-up channel.
pub struct ChangeListener {
    pub paths: Vec<&'static str>,
    pub wake: crossbeam_channel::Sender<()>,
}

/// Starts the controller event thread for this broker. Each change
/// listener (config changes, ACL changes) is woken for its watches and
/// after a new session (the one ZooKeeper event channel is read here).
pub fn spawn(
    zk: ZkClient,
    config: Arc<BrokerConfig>,
    dynamic_config: Arc<DynamicBrokerConfig>,
    listeners: Vec<ChangeListener>,
    inter_broker: Arc<InterBrokerSecurity>,
) -> Result<ControllerHandle, String> {
    let (tx, rx) = crossbeam_channel::unbounded::<ControllerEvent>();
    let zk_events = zk.events();
    {
        let tx = tx.clone();
        thread::Builder::new()
            .name("zk-event-forwarder".into())
            .spawn(move || {
                while let Ok(ev) = zk_events.recv() {
                    let for_listener = match &ev {
                        ZkEvent::Node { path, .. } => listeners
                            .iter()
                            .find(|l| l.paths.contains(&path.as_str()))
                            .map(|l| l.wake.send(()))
                            .is_some(),
                        ZkEvent::SessionEstablished { .. } => {
                            // A new session lost the listeners' watches.
                            for l in &listeners {
                                let _ = l.wake.send(());
                            }
                            false
                        }
                        _ => false,
                    };
                    if for_listener {
                        continue;
                    }
                    if tx.send(ControllerEvent::Zk(ev)).is_err() {
                        return;
                    }
                }
            })
            .map_err(|e| format!("starting the ZooKeeper event thread: {e}"))?;
    }
    let active = Arc::new(AtomicBool::new(false));
    let active_id = Arc::new(AtomicI32::new(-1));
    let handle = ControllerHandle {
        events: tx.clone(),
        active: active.clone(),
        active_id: active_id.clone(),
    };
    let broker_id = config.broker_id;
    let interval_s = config.leader_imbalance_check_interval_seconds.max(1) as u64;
    let mut controller = KafkaController {
        zk,
        config,
        dynamic_config,
        inter_broker,
        broker_id,
        events_tx: tx,
        active,
        active_id,
        epoch: 0,
        epoch_zk_version: -1,
        ctx: ControllerContext::default(),
        channels: None,
        next_rebalance_check: Instant::now() + Duration::from_secs(interval_s),
        registration_due: None,
    };
    thread::Builder::new()
        .name("controller-event-thread".into())
        .spawn(move || {
            // Next to the coordinator shard: shard 0 runs on the first allowed core.
            if let Some(core) = core_affinity::get_core_ids().and_then(|c| c.first().copied()) {
                core_affinity::set_for_current(core);
            }
            controller.run(rx)
        })
        .map_err(|e| format!("starting the controller thread: {e}"))?;
    Ok(handle)
}

impl KafkaController {
    fn run(&mut self, rx: crossbeam_channel::Receiver<ControllerEvent>) {
        self.watch_controller_and_elect();
        loop {
            let wait = match self.registration_due {
                Some((due, _)) => due.saturating_duration_since(Instant::now()),
                None => Duration::from_millis(500),
            };
            match rx.recv_timeout(wait) {
                Ok(ev) => self.handle(ev),
                Err(crossbeam_channel::RecvTimeoutError::Timeout) => {}
                Err(crossbeam_channel::RecvTimeoutError::Disconnected) => return,
            }
            self.register_again_if_due();
            if self.is_active() {
                self.periodic();
            }
        }
    }

    fn is_active(&self) -> bool {
        self.active.load(Ordering::Acquire)
    }

    fn handle(&mut self, ev: ControllerEvent) {
        match ev {
            ControllerEvent::Zk(ZkEvent::Node { kind, path }) => self.on_node_event(kind, &path),
            ControllerEvent::Zk(ZkEvent::SessionExpired) => {
                log::warn!("ZooKeeper session expired");
                self.registration_due = None;
                if self.is_active() {
                    self.resign();
                }
            }
            ControllerEvent::Zk(ZkEvent::SessionEstablished { session_id }) => {
                log::info!(
                    "new ZooKeeper session {session_id:#x}: registering broker {} again",
                    self.broker_id
                );
                self.registration_due = Some((Instant::now(), 0));
            }
            ControllerEvent::Zk(_) => {}
            ControllerEvent::Request(req) => self.on_request(req),
            ControllerEvent::LeaderAndIsrResponse { broker, body } => {
                if self.is_active() {
                    self.on_leader_and_isr_response(broker, &body);
                }
            }
            ControllerEvent::DeletionAck { topic, broker, ok } => {
                if self.is_active() {
                    self.on_deletion_ack(&topic, broker, ok);
                }
            }
        }
    }

    /// Kafka's RegisterBrokerAndReelect after a new session: registers
    /// `/brokers/ids/<id>` again, retrying for as long as the expired
    /// session's node is still there (ZooKeeper deletes it when it expires
    /// that session, at the latest one session timeout after a restart),
    /// then joins the controller election.
    fn register_again_if_due(&mut self) {
        let Some((due, failed)) = self.registration_due else {
            return;
        };
        if Instant::now() < due {
            return;
        }
        match crate::zk::broker_registration::reregister_broker(
            &mut self.zk,
            &self.config,
            self.broker_id,
        ) {
            Ok(true) => {
                log::info!(
                    "registered broker {} at /brokers/ids/{} (ZooKeeper session {:#x})",
                    self.broker_id,
                    self.broker_id,
                    self.zk.session_id()
                );
                self.registration_due = None;
                self.watch_controller_and_elect();
            }
            Ok(false) => {
                if failed % 50 == 0 {
                    log::info!(
                        "/brokers/ids/{} still belongs to the expired ZooKeeper session; \
                         registering again once ZooKeeper removes it",
                        self.broker_id
                    );
                }
                self.registration_due = Some((Instant::now() + REREGISTER_RETRY, failed + 1));
            }
            Err(e) => {
                log::error!("re-registering after session expiry: {e}; retrying");
                self.registration_due = Some((Instant::now() + REREGISTER_RETRY, failed + 1));
            }
        }
    }

    fn on_node_event(&mut self, kind: NodeEventKind, path: &str) {
        if path == CONTROLLER_PATH {
            self.watch_controller_and_elect();
            return;
        }
        if !self.is_active() {
            return;
        }
        let result = match (kind, path) {
            (NodeEventKind::ChildrenChanged, context::BROKER_IDS_PATH) => self.on_broker_change(),
            (NodeEventKind::ChildrenChanged, context::TOPICS_PATH) => self.on_topic_change(),
            (NodeEventKind::ChildrenChanged, DELETE_TOPICS_PATH) => self.on_topic_deletion(),
            (NodeEventKind::ChildrenChanged, ISR_CHANGE_PATH) => self.on_isr_change_notification(),
            (NodeEventKind::ChildrenChanged, log_dir_events::LOG_DIR_EVENT_NOTIFICATION_PATH) => {
                self.on_log_dir_event_notification()
            }
            (_, PREFERRED_ELECTION_PATH) => self.on_preferred_election_node(),
            (_, reassignment::REASSIGN_PARTITIONS_PATH) => self.on_zk_reassignment().map(|_| ()),
            (NodeEventKind::DataChanged, p) if p.starts_with("/brokers/topics/") => {
                let topic = &p["/brokers/topics/".len()..];
                if topic.contains('/') {
                    Ok(())
                } else {
                    self.on_partition_modification(topic)
                }
            }
            _ => Ok(()),
        };
        if let Err(e) = result {
            self.on_zk_failure(&format!("handling {kind:?} on {path}"), e);
        }
    }

    /// A ZooKeeper error in a controller step. A fenced write means another
    /// controller took over; anything else is retried by the next event
    /// (Kafka's controller likewise resigns on ControllerMovedException).
    fn on_zk_failure(&mut self, what: &str, e: StoreError) {
        match e {
            StoreError::BadVersion(_) => {
                log::warn!("{what}: the controller epoch moved; resigning");
                self.resign();
                self.watch_controller_and_elect();
            }
            other => log::error!("{what}: {other}"),
        }
    }

    /// Arms the watch on `/controller` and runs an election if it is absent
    /// (KafkaController.elect); resigns if another broker holds it.
    fn watch_controller_and_elect(&mut self) {
        match self.zk.exists_watch(CONTROLLER_PATH) {
            Ok(Some(_)) => {
                let holder = self.read_controller_id();
                self.active_id
                    .store(holder.unwrap_or(-1), Ordering::Release);
                if self.is_active() && holder != Some(self.broker_id) {
                    log::info!("broker {:?} is now the controller; resigning", holder);
                    self.resign();
                }
            }
            Ok(None) => self.elect_controller(),
            Err(e) => log::error!("watching {CONTROLLER_PATH}: {e}"),
        }
    }

    fn read_controller_id(&self) -> Option<i32> {
        let (data, _) = self.zk.get(CONTROLLER_PATH).ok()?;
        let v: serde_json::Value = serde_json::from_slice(&data).ok()?;
        v.get("brokerid")?
            .as_i64()
            .and_then(|n| i32::try_from(n).ok())
    }

    /// registerControllerAndIncrementControllerEpoch, then onControllerFailover.
    fn elect_controller(&mut self) {
        let (epoch, version) = match self.zk.get(CONTROLLER_EPOCH_PATH) {
            Ok((data, stat)) => {
                let epoch = std::str::from_utf8(&data)
                    .ok()
                    .and_then(|s| s.trim().parse::<i32>().ok())
                    .unwrap_or(0);
                (epoch, stat.version)
            }
            Err(StoreError::NoNode(_)) => {
                match self.zk.create(CONTROLLER_EPOCH_PATH, b"0", false, false) {
                    Ok(_) | Err(StoreError::NodeExists(_)) => return self.elect_controller(),
                    Err(e) => return log::error!("creating {CONTROLLER_EPOCH_PATH}: {e}"),
                }
            }
            Err(e) => return log::error!("reading {CONTROLLER_EPOCH_PATH}: {e}"),
        };
        let new_epoch = epoch + 1;
        let now = crate::util::now_ms();
        let data = format!(
            "{{\"version\":2,\"brokerid\":{},\"timestamp\":\"{now}\",\"kraftControllerEpoch\":-1}}",
            self.broker_id
        );
        let ops = [
            Op::Create {
                path: CONTROLLER_PATH.into(),
                data: data.into_bytes(),
                ephemeral: true,
                sequential: false,
            },
            Op::SetData {
                path: CONTROLLER_EPOCH_PATH.into(),
                data: new_epoch.to_string().into_bytes(),
                expected_version: version,
            },
        ];
        match self.zk.multi(&ops) {
            Ok(results) => {
                let epoch_version = results
                    .iter()
                    .find_map(|r| match r {
                        crate::metadata::OpResult::Set(stat) => Some(stat.version),
                        _ => None,
                    })
                    .unwrap_or(version + 1);
                self.epoch = new_epoch;
                self.epoch_zk_version = epoch_version;
                log::info!(
                    "broker {} is the controller, epoch {new_epoch}",
                    self.broker_id
                );
                self.active_id.store(self.broker_id, Ordering::Release);
                // Watch our own node so its deletion (session loss) is seen.
                let _ = self.zk.exists_watch(CONTROLLER_PATH);
                if let Err(e) = self.on_controller_failover() {
                    self.on_zk_failure("controller failover", e);
                }
            }
            Err(StoreError::NodeExists(_)) | Err(StoreError::BadVersion(_)) => {
                // Another broker won; watch its node.
                self.watch_controller_and_elect();
            }
            Err(e) => log::error!("controller election: {e}"),
        }
    }

    fn resign(&mut self) {
        self.active.store(false, Ordering::Release);
        if let Some(mut ch) = self.channels.take() {
            ch.remove_all();
        }
        self.ctx = ControllerContext::default();
        log::info!(
            "broker {} resigned as controller (epoch {})",
            self.broker_id,
            self.epoch
        );
    }

    /// Writes the new partition states, then sends LeaderAndIsr and
    /// UpdateMetadata for exactly those partitions (and every broker's
    /// metadata as well when the live broker set changed).
    fn write_states_and_send(
        &mut self,
        updates: &BTreeMap<(String, i32), LeaderAndIsr>,
        brokers_changed: bool,
    ) -> Result<(), StoreError> {
        self.write_states(updates)?;
        let mut batch = self.batch();
        for (t, p) in updates.keys() {
            batch.add_partition(t, *p, false);
        }
        if brokers_changed {
            batch.mark_brokers_changed();
        }
        self.send(batch);
        Ok(())
    }

    /// Writes partition states fenced by the controller epoch znode's
    /// version; returns the new state versions.
    fn write_states(
        &mut self,
        updates: &BTreeMap<(String, i32), LeaderAndIsr>,
    ) -> Result<(), StoreError> {
        for ((topic, p), s) in updates {
            let path = crate::metadata::topics::partition_state_path(topic, *p);
            let ops = [
                Op::Check {
                    path: CONTROLLER_EPOCH_PATH.into(),
                    expected_version: self.epoch_zk_version,
                },
                Op::SetData {
                    path,
                    data: context::state_json(s),
                    expected_version: s.zk_version,
                },
            ];
            let results = self.zk.multi(&ops)?;
            let version = results
                .iter()
                .find_map(|r| match r {
                    crate::metadata::OpResult::Set(stat) => Some(stat.version),
                    _ => None,
                })
                .unwrap_or(s.zk_version + 1);
            let mut stored = s.clone();
            stored.zk_version = version;
            self.ctx.states.insert((topic.clone(), *p), stored);
        }
        Ok(())
    }

    fn periodic(&mut self) {
        if Instant::now() < self.next_rebalance_check {
            return;
        }
        let interval_s = self.config.leader_imbalance_check_interval_seconds.max(1) as u64;
        self.next_rebalance_check = Instant::now() + Duration::from_secs(interval_s);
        if self.config.auto_leader_rebalance_enable {
            if let Err(e) = self.check_and_trigger_auto_leader_rebalance() {
                self.on_zk_failure("auto leader rebalance", e);
            }
        }
    }
}
