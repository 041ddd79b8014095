//! The coordinator on its shard: appends go to the local `__consumer_offsets`
//! logs through the ReplicaManager; at start-up the topic is created if
//! missing and its partitions are replayed; a task ticks the timers and
//! expires old offsets.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

use kshard_shards::log::batch::{BatchIter, Compression, RECORD_BATCH_OVERHEAD};
use kshard_shards::log::read_slice_bytes;
use kshard_shards::log::records::{decompress, RecordIter};

use super::{CoordinatorConfig, GroupCoordinator, OffsetsLog, OFFSETS_TOPIC};
use crate::admin::embedded::NewTopic;
use crate::admin::AdminError;
use crate::admin::TopicAdmin;
use crate::protocol::errors;
use crate::protocol::errors::ErrorCode;
use crate::replica::{ProducePart, ReplicaManager};
use crate::router::{Router, CONTROLLER_SHARD};
use crate::util::now_ms;

/// Largest decompressed batch accepted while replaying.
const MAX_REPLAY_BATCH_BYTES: usize = 64 << 20;
const READ_CHUNK_BYTES: u32 = 4 << 20;
/// Longest sleep of the ticker: it wakes at the next timer bucket, or after
/// this long to notice timers armed meanwhile and shutdown.
const TICK_MAX_MS: u64 = 10;

pub struct LocalOffsetsLog<'a> {
    replica_manager: &'a ReplicaManager,
    now_ms: i64,
}

impl OffsetsLog for LocalOffsetsLog<'_> {
    fn append(&mut self, partition: i32, batch: Vec<u8>) -> ErrorCode {
        let part = ProducePart {
            topic: OFFSETS_TOPIC.to_string(),
            partition,
            records: batch.into(),
        };
        let r = self
            .replica_manager
            .partitions_mut()
            .append(&part, self.now_ms, false);
        if r.error_code == errors::NONE {
            self.replica_manager
                .on_high_watermark_advanced(OFFSETS_TOPIC, partition);
        } else {
            log::warn!(
                "append to {OFFSETS_TOPIC}-{partition} failed: error {} {}",
                r.error_code,
                r.error_message.unwrap_or_default()
            );
        }
        r.error_code
    }
}

/// The group coordinator on the controller shard, with what it needs: the
/// local `__consumer_offsets` logs and the topic admin that creates them.
pub struct CoordinatorRuntime {
    coordinator: RefCell<GroupCoordinator>,
    replica_manager: Rc<ReplicaManager>,
    admin: Rc<TopicAdmin>,
    router: Rc<Router>,
}

impl CoordinatorRuntime {
    /// `coordinating`: false in cluster mode, which has no group coordinator yet.
    pub fn new(
        replica_manager: Rc<ReplicaManager>,
        admin: Rc<TopicAdmin>,
        router: Rc<Router>,
        coordinating: bool,
    ) -> Self {
        assert_eq!(router.shard_id, CONTROLLER_SHARD);
        let mut coordinator = GroupCoordinator::new(
            CoordinatorConfig::from_broker(&admin.config),
            now_ms() as i64,
        );
        coordinator.coordinating = coordinating;
        CoordinatorRuntime {
            coordinator: RefCell::new(coordinator),
            replica_manager,
            admin,
            router,
        }
    }

    /// Runs `f` on the coordinator with the offsets log.
    pub fn with_coordinator<R>(
        &self,
        f: impl FnOnce(&mut GroupCoordinator, &mut dyn OffsetsLog, i64) -> R,
    ) -> R {
        let now = now_ms() as i64;
        let mut log = LocalOffsetsLog {
            replica_manager: &self.replica_manager,
            now_ms: now,
        };
        let mut c = self.coordinator.borrow_mut();
        // Timers due by the request's arrival fire first (a session that
        // expired 1 ms ago is gone for this request), as Kafka's timer thread
        // runs them on time rather than at the next tick.
        if !c.loading {
            c.tick(&mut log, now);
        }
        f(&mut c, &mut log, now)
    }

    /// Creates `__consumer_offsets` if needed, replays it and starts the ticker.
    pub async fn start(self: &Rc<Self>) {
        let config = &self.admin.config;
        let metadata = &self.admin.metadata;
        if metadata.image().topic(OFFSETS_TOPIC).is_none() {
            let mut configs = BTreeMap::new();
            configs.insert("cleanup.policy".to_string(), "compact".to_string());
            configs.insert(
                "segment.bytes".to_string(),
                config.offsets_topic_segment_bytes.to_string(),
            );
            configs.insert("compression.type".to_string(), "producer".to_string());
            // One broker: the replication factor is what it can host.
            let live = metadata.image().brokers.len().max(1) as i16;
            let rf = config.offsets_topic_replication_factor.clamp(1, live);
            let t = NewTopic {
                name: OFFSETS_TOPIC.to_string(),
                num_partitions: config.offsets_topic_num_partitions.max(1),
                replication_factor: rf,
                assignment: None,
                configs,
            };
            if let Err(AdminError { code, message }) = self.admin.create_topic(t, false).await {
                log::error!("creating {OFFSETS_TOPIC}: error {code}: {message}");
            }
        }
        self.load();
        glommio::spawn_local(self.clone().run_ticker()).detach();
    }

    /// Replays every local `__consumer_offsets` partition into the coordinator.
    fn load(&self) {
        let started = now_ms();
        let mut c = self.coordinator.borrow_mut();
        let now = now_ms() as i64;
        let mut records = 0usize;
        let mut scratch = Vec::new();
        for p in 0..c.config.num_partitions {
            let partitions = self.replica_manager.partitions();
            let Some(part) = partitions.partition(OFFSETS_TOPIC, p) else {
                continue;
            };
            let mut offset = part.log.log_start_offset();
            loop {
                let read = part.read(offset, READ_CHUNK_BYTES, true);
                if read.error_code != errors::NONE {
                    log::error!(
                        "replaying {OFFSETS_TOPIC}-{p} at {offset}: error {}",
                        read.error_code
                    );
                    break;
                }
                let Some(slice) = read.slice else {
                    break;
                };
                let bytes = match read_slice_bytes(&slice) {
                    Ok(b) => b,
                    Err(e) => {
                        log::error!("replaying {OFFSETS_TOPIC}-{p}: {e}");
                        break;
                    }
                };
                let mut next = offset;
                for item in BatchIter::new(&bytes) {
                    let Ok((_, header, batch)) = item else {
                        break;
                    };
                    next = header.last_offset() + 1;
                    if header.is_control() || header.last_offset() < offset {
                        continue;
                    }
                    let codec = Compression::from_attributes(header.attributes)
                        .unwrap_or(Compression::None);
                    let body = &batch[RECORD_BATCH_OVERHEAD.min(batch.len())..];
                    let recs: &[u8] = if codec == Compression::None {
                        body
                    } else {
                        if let Err(e) =
                            decompress(codec, body, &mut scratch, MAX_REPLAY_BATCH_BYTES)
                        {
                            log::error!(
                                "replaying {OFFSETS_TOPIC}-{p}: batch at {}: {e}",
                                header.base_offset
                            );
                            continue;
                        }
                        &scratch
                    };
                    for r in RecordIter::new(recs) {
                        let Ok(r) = r else {
                            break;
                        };
                        let Some(key) = r.key else {
                            continue;
                        };
                        records += 1;
                        if let Err(e) = c.load_record(key, r.value, now) {
                            log::warn!("skipping bad record in {OFFSETS_TOPIC}-{p}: {e}");
                        }
                    }
                }
                if next <= offset {
                    break;
                }
                offset = next;
            }
        }
        c.finish_loading(now_ms() as i64);
        log::info!(
            "replayed {records} records of {OFFSETS_TOPIC} in {} ms",
            now_ms().saturating_sub(started)
        );
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
            let now = now_ms();
            sleep_ms = match next {
                Some(at) => at.saturating_sub(now).clamp(1, TICK_MAX_MS),
                None => TICK_MAX_MS,
            };
        }
    }
}
