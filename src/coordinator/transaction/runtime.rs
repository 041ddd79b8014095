//! The transaction coordinator on its shard: `__transaction_state` is
//! created on a single broker at start-up (in cluster mode on first
//! FindCoordinator), each of its partitions is loaded when this broker
//! becomes its leader and unloaded when it stops (Kafka's onElection and
//! onResignation), and a ticker aborts timed-out transactions and removes
//! expired transactional ids.

use std::rc::Rc;
use std::time::Duration;

use super::transaction_coordinator::TransactionCoordinator;
use super::txn_log_codec::{decode_key, decode_value};
use super::TRANSACTION_STATE_TOPIC;
use crate::admin::auto_topic_creation::transaction_state_topic;
use crate::admin::AdminError;
use crate::coordinator::log_replay::{replay_partition, Replayed};
use crate::coordinator::runtime::CoordinatorHandOver;
use crate::util::now_ms;

/// How often the ticker looks at the clock.
const TICK_MS: u64 = 100;

impl TransactionCoordinator {
    /// Single broker: creates `__transaction_state` if needed and loads
    /// every partition, all led here. Either way starts the ticker.
    pub async fn start(self: &Rc<Self>) {
        if self.admin.cluster.is_none() {
            self.create_single_broker_topic().await;
            let count = self
                .admin
                .metadata
                .image()
                .topic(TRANSACTION_STATE_TOPIC)
                .map_or(0, |t| t.partitions.len() as i32);
            for p in 0..count {
                let epoch = self
                    .replica_manager
                    .partitions()
                    .partition(TRANSACTION_STATE_TOPIC, p)
                    .map(|part| part.leader_epoch);
                if let Some(epoch) = epoch {
                    self.on_election(p, epoch);
                }
            }
        }
        glommio::spawn_local(self.clone().run_ticker()).detach();
    }

    async fn create_single_broker_topic(&self) {
        if self
            .admin
            .metadata
            .image()
            .topic(TRANSACTION_STATE_TOPIC)
            .is_some()
        {
            return;
        }
        let mut t = transaction_state_topic(&self.admin.config);
        // One broker hosts one replica, and one replica is the whole ISR.
        t.replication_factor = 1;
        t.configs
            .insert("min.insync.replicas".to_string(), "1".to_string());
        if let Err(AdminError { code, message }) = self.admin.create_topic(t, false).await {
            log::error!("creating {TRANSACTION_STATE_TOPIC}: error {code}: {message}");
        }
    }

    /// LeaderAndIsr or StopReplica changed this broker's role for some
    /// `__transaction_state` partitions.
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
                    let unloaded = self.state.borrow_mut().unload(partition, leader_epoch);
                    if let Some(n) = unloaded {
                        log::info!(
                            "resigned as transaction coordinator of {TRANSACTION_STATE_TOPIC}-{partition}: unloaded {n} transactional ids"
                        );
                    }
                }
            }
        }
    }

    fn on_election(self: &Rc<Self>, partition: i32, coordinator_epoch: i32) {
        let load_id = {
            let mut state = self.state.borrow_mut();
            if let Some(t) = self.admin.metadata.image().topic(TRANSACTION_STATE_TOPIC) {
                // partitionFor uses the topic's real partition count.
                state.num_partitions = t.partitions.len().max(1) as i32;
            }
            if partition < 0 || partition >= state.num_partitions {
                return;
            }
            match state.begin_loading(partition, coordinator_epoch) {
                Some(id) => id,
                None => return,
            }
        };
        glommio::spawn_local(
            self.clone()
                .load_partition(partition, coordinator_epoch, load_id),
        )
        .detach();
    }

    /// Kafka's loadTransactionsForTxnTopicPartition: replays the partition
    /// a read at a time, yielding between reads; then resends the markers
    /// of transactions left in a Prepare state.
    async fn load_partition(self: Rc<Self>, partition: i32, coordinator_epoch: i32, load_id: u64) {
        let started_ms = now_ms();
        let replayed = replay_partition(
            &self.replica_manager,
            TRANSACTION_STATE_TOPIC,
            partition,
            || self.state.borrow().is_loading_for(partition, load_id),
            |item| {
                let Replayed::Record { key, value, .. } = item else {
                    return;
                };
                let loaded = decode_key(key).and_then(|id| Ok((id, decode_value(value)?)));
                match loaded {
                    Ok((id, v)) => self
                        .state
                        .borrow_mut()
                        .load_record(partition, load_id, id, v),
                    Err(e) => log::warn!(
                        "skipping bad record in {TRANSACTION_STATE_TOPIC}-{partition}: {e}"
                    ),
                }
            },
        )
        .await;
        let Some(records) = replayed else {
            return;
        };
        let pending = self.state.borrow_mut().finish_loading(partition, load_id);
        // Most of the 50 partitions are empty: only those with state are news.
        let level = if records == 0 {
            log::Level::Debug
        } else {
            log::Level::Info
        };
        log::log!(
            level,
            "loaded {records} records of {TRANSACTION_STATE_TOPIC}-{partition} (coordinator epoch {coordinator_epoch}) in {} ms; {} transactions to complete",
            now_ms().saturating_sub(started_ms),
            pending.len()
        );
        self.resume_completions(pending);
    }

    async fn run_ticker(self: Rc<Self>) {
        let abort_every_ms = self.config.abort_timed_out_interval_ms as i64;
        let expire_every_ms = self.config.remove_expired_interval_ms as i64;
        let mut last_abort = now_ms() as i64;
        let mut last_expiry = last_abort;
        while !self.router.is_shutting_down() {
            glommio::timer::sleep(Duration::from_millis(TICK_MS)).await;
            let now = now_ms() as i64;
            if now - last_abort >= abort_every_ms {
                last_abort = now;
                self.abort_timed_out_transactions().await;
            }
            if now - last_expiry >= expire_every_ms {
                last_expiry = now;
                self.remove_expired_transactional_ids().await;
            }
        }
    }
}
