//! The coordinator on its shard: appends go to the local `__consumer_offsets`
//! logs through the ReplicaManager and are answered once replicated; a
//! partition's groups are loaded (its log replayed) when this broker
//! becomes its leader and unloaded when it stops leading it (in cluster
//! mode from LeaderAndIsr and StopReplica; a single broker leads them all
//! from start-up); a task ticks the timers and expires old offsets.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use kshard_shards::mailbox::LocalBoxFuture;

use kshard_shards::log::control_batch::{parse_end_txn_marker, ControlRecordType};

use super::log_replay::{replay_partition, Replayed};
use super::{CoordinatorConfig, GroupCoordinator, OffsetsLog, ReplicationPoint, OFFSETS_TOPIC};
use crate::admin::auto_topic_creation::offsets_topic;
use crate::admin::AdminError;
use crate::admin::TopicAdmin;
use crate::protocol::errors;
use crate::protocol::errors::ErrorCode;
use crate::replica::{ProducePart, ReplicaManager, TxnVerification};
use crate::router::{Router, CONTROLLER_SHARD};
use crate::util::{monotonic_ms, now_ms};

/// Longest sleep of the ticker: it wakes at the next timer bucket, or after
/// this long to notice timers armed meanwhile and shutdown.
const TICK_MAX_MS: u64 = 10;

pub struct LocalOffsetsLog<'a> {
    replica_manager: &'a Rc<ReplicaManager>,
    acks: i16,
}

impl OffsetsLog for LocalOffsetsLog<'_> {
    fn append(
        &mut self,
        partition: i32,
        leader_epoch: i32,
        batch: Vec<u8>,
    ) -> Result<i64, ErrorCode> {
        let part = ProducePart {
            topic: OFFSETS_TOPIC.to_string(),
            partition,
            records: batch.into(),
            txn_verification: TxnVerification::Off,
        };
        let rm = self.replica_manager;
        let r = rm.append_for_coordinator(&part, leader_epoch, self.acks);
        if r.error_code != errors::NONE {
            log::warn!(
                "append to {OFFSETS_TOPIC}-{partition} failed: error {} {}",
                r.error_code,
                r.error_message.unwrap_or_default()
            );
            return Err(r.error_code);
        }
        let end_offset = rm
            .partitions()
            .partition(OFFSETS_TOPIC, partition)
            .map(|p| p.log.next_offset())
            .expect("appended to a partition that exists");
        Ok(end_offset)
    }
}

/// The group coordinator on the controller shard, with what it needs: the
/// local `__consumer_offsets` logs and the topic admin that creates them.
pub struct CoordinatorRuntime {
    coordinator: RefCell<GroupCoordinator>,
    replica_manager: Rc<ReplicaManager>,
    admin: Rc<TopicAdmin>,
    router: Rc<Router>,
    /// offsets.commit.required.acks: -1 answers once the ISR has the append.
    required_acks: i16,
    commit_timeout_ms: u64,
}

impl CoordinatorRuntime {
    pub fn new(
        replica_manager: Rc<ReplicaManager>,
        admin: Rc<TopicAdmin>,
        router: Rc<Router>,
    ) -> Self {
        assert_eq!(router.shard_id, CONTROLLER_SHARD);
        let config = &admin.config;
        let coordinator = GroupCoordinator::new(
            CoordinatorConfig::from_broker(config),
            monotonic_ms() as i64,
        );
        let required_acks = config.offsets_commit_required_acks;
        let commit_timeout_ms = config.offsets_commit_timeout_ms.max(1) as u64;
        CoordinatorRuntime {
            coordinator: RefCell::new(coordinator),
            replica_manager,
            admin,
            router,
            required_acks,
            commit_timeout_ms,
        }
    }

    /// Runs `f` on the coordinator with the offsets log.
    pub fn with_coordinator<R>(
        &self,
        f: impl FnOnce(&mut GroupCoordinator, &mut dyn OffsetsLog, i64) -> R,
    ) -> R {
        let mut c = self.coordinator.borrow_mut();
        let now = read_clocks(&mut c);
        let mut log = LocalOffsetsLog {
            replica_manager: &self.replica_manager,
            acks: self.required_acks,
        };
        // Timers due by the request's arrival fire first (a session that
        // expired 1 ms ago is gone for this request), as Kafka's timer thread
        // runs them on time rather than at the next tick.
        c.tick(&mut log, now);
        f(&mut c, &mut log, now)
    }

    /// Resolves once an append the coordinator made is replicated as
    /// offsets.commit.required.acks asks (Kafka's DelayedProduce), with
    /// the append's error (NONE, or e.g. REQUEST_TIMED_OUT).
    pub fn replicated(&self, point: Option<ReplicationPoint>) -> LocalBoxFuture<ErrorCode> {
        match point {
            Some(p) if self.required_acks == -1 => self.replica_manager.wait_for_high_watermark(
                OFFSETS_TOPIC,
                p.partition,
                p.end_offset,
                self.commit_timeout_ms,
            ),
            _ => Box::pin(async { errors::NONE }),
        }
    }

    /// Single broker: creates `__consumer_offsets` if needed, then loads
    /// every partition, all led here; then starts the ticker. In cluster
    /// mode LeaderAndIsr drives loading (`on_leadership_change`).
    pub async fn start(self: &Rc<Self>) {
        if self.admin.cluster.is_none() {
            self.create_single_broker_topic().await;
            let image = self.admin.metadata.image();
            let count = image
                .topic(OFFSETS_TOPIC)
                .map_or(0, |t| t.partitions.len() as i32);
            for p in 0..count {
                let epoch = self
                    .replica_manager
                    .partitions()
                    .partition(OFFSETS_TOPIC, p)
                    .map(|part| part.leader_epoch);
                if let Some(epoch) = epoch {
                    self.on_election(p, epoch);
                }
            }
        }
        glommio::spawn_local(self.clone().run_ticker()).detach();
    }

    async fn create_single_broker_topic(&self) {
        let metadata = &self.admin.metadata;
        if metadata.image().topic(OFFSETS_TOPIC).is_some() {
            return;
        }
        let mut t = offsets_topic(&self.admin.config);
        // One broker hosts one replica, whatever offsets.topic.replication.factor says.
        t.replication_factor = 1;
        if let Err(AdminError { code, message }) = self.admin.create_topic(t, false).await {
            log::error!("creating {OFFSETS_TOPIC}: error {code}: {message}");
        }
    }

    /// LeaderAndIsr or StopReplica changed this broker's role for some
    /// `__consumer_offsets` partitions: load the groups of those it now
    /// leads, unload the others (Kafka's onLeadershipChange).
    pub fn on_leadership_change(self: &Rc<Self>, changes: &[CoordinatorHandOver]) {
        for change in changes {
            match *change {
                CoordinatorHandOver::Elected {
                    partition,
                    leader_epoch,
                } => self.on_election(partition, leader_epoch),
                CoordinatorHandOver::Resigned {
                    partition,
                    leader_epoch,
                } => {
                    let unloaded = self
                        .coordinator
                        .borrow_mut()
                        .unload(partition, leader_epoch);
                    if let Some(groups) = unloaded {
                        log::info!(
                            "resigned as coordinator of {OFFSETS_TOPIC}-{partition}: unloaded {groups} groups"
                        );
                    }
                }
            }
        }
    }

    /// onElection: loads the partition's groups in the background.
    fn on_election(self: &Rc<Self>, partition: i32, leader_epoch: i32) {
        let load_id = {
            let mut c = self.coordinator.borrow_mut();
            if c.partitions.is_empty() {
                // partitionFor uses the topic's real partition count.
                if let Some(t) = self.admin.metadata.image().topic(OFFSETS_TOPIC) {
                    c.config.num_partitions = t.partitions.len().max(1) as i32;
                }
            }
            // Only a partition of the topic can be loaded (LeaderAndIsr is input).
            if partition < 0 || partition >= c.config.num_partitions {
                return;
            }
            match c.begin_loading(partition, leader_epoch) {
                Some(load_id) => load_id,
                None => return,
            }
        };
        glommio::spawn_local(
            self.clone()
                .load_partition(partition, leader_epoch, load_id),
        )
        .detach();
    }

    /// Kafka's doLoadGroupsAndOffsets: replays the partition from its log
    /// start to its log end offset, a chunk at a time, yielding between
    /// chunks so the shard keeps serving; stops if the partition is
    /// unloaded or re-elected meanwhile.
    async fn load_partition(self: Rc<Self>, partition: i32, leader_epoch: i32, load_id: u64) {
        let started_ms = now_ms();
        let replayed = replay_partition(
            &self.replica_manager,
            OFFSETS_TOPIC,
            partition,
            || self.coordinator.borrow().is_loading_for(partition, load_id),
            |item| self.apply_replayed(partition, item),
        )
        .await;
        let Some(records) = replayed else {
            return;
        };
        let mut c = self.coordinator.borrow_mut();
        if !c.is_loading_for(partition, load_id) {
            return;
        }
        let now = read_clocks(&mut c);
        c.finish_loading(partition, now);
        log::info!(
            "loaded {records} records of {OFFSETS_TOPIC}-{partition} (leader epoch {leader_epoch}) in {} ms",
            now_ms().saturating_sub(started_ms)
        );
    }

    /// Applies one record or transaction marker read back from the log.
    fn apply_replayed(&self, partition: i32, item: Replayed<'_>) {
        let mut c = self.coordinator.borrow_mut();
        match item {
            Replayed::Record { header, key, value } => {
                let now = now_ms() as i64;
                let loaded = if header.is_transactional() {
                    c.load_txn_record(header, key, value, now)
                } else {
                    c.load_record(key, value, now)
                };
                if let Err(e) = loaded {
                    log::warn!("skipping bad record in {OFFSETS_TOPIC}-{partition}: {e}");
                }
            }
            // An empty control batch was emptied by the cleaner.
            Replayed::Control { header, .. } if header.records_count == 0 => {}
            Replayed::Control { header, batch } => match parse_end_txn_marker(batch) {
                Ok(marker) => c.complete_txn_offsets(
                    partition,
                    header.producer_id,
                    marker.control_type == ControlRecordType::Commit,
                ),
                Err(e) => log::warn!(
                    "skipping bad control batch at {} in {OFFSETS_TOPIC}-{partition}: {e}",
                    header.base_offset
                ),
            },
        }
    }

    /// Ticks the coordinator's timers and runs offset expiry.
    async fn run_ticker(self: Rc<Self>) {
        let expiry_every_ms = self.admin.config.offsets_retention_check_interval_ms.max(1);
        let mut last_expiry = now_ms() as i64;
        let mut sleep_ms = TICK_MAX_MS;
        while !self.router.is_shutting_down() {
            glommio::timer::sleep(Duration::from_millis(sleep_ms)).await;
            let next = self.with_coordinator(|c, log, now| {
                c.tick(log, now);
                if now - last_expiry >= expiry_every_ms {
                    last_expiry = now;
                    c.expire_offsets(log, now);
                }
                c.next_timer_ms()
            });
            let now = monotonic_ms();
            sleep_ms = match next {
                Some(at) => at.saturating_sub(now).clamp(1, TICK_MAX_MS),
                None => TICK_MAX_MS,
            };
        }
    }
}

/// Reads both clocks for one coordinator call: returns the wall clock's
/// now, which is what the coordinator is passed and records, after telling
/// it the monotonic clock's lead, which its timers run on.
fn read_clocks(c: &mut GroupCoordinator) -> i64 {
    let wall_ms = now_ms() as i64;
    c.set_clock_skew(monotonic_ms() as i64 - wall_ms);
    wall_ms
}

/// A change of this broker's role for one `__consumer_offsets` partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CoordinatorHandOver {
    Elected {
        partition: i32,
        leader_epoch: i32,
    },
    /// `leader_epoch`: None from StopReplica.
    Resigned {
        partition: i32,
        leader_epoch: Option<i32>,
    },
}
