//! Kafka's AutoTopicCreationManager: topics a Metadata request names but
//! that do not exist are created in the background, and the request is
//! answered at once with LEADER_NOT_AVAILABLE (Kafka 3.9's broker sends one
//! CreateTopics to the controller and does not wait for it).
//!
//! Lives on the controller shard. Names wait in a bounded queue, each at
//! most once (Kafka's `inflightTopics`); a name that does not fit is not
//! queued, and the client's next Metadata request asks again. One task
//! drains the queue, creating one topic at a time with the defaults
//! (`num.partitions`, `default.replication.factor`), so a request naming
//! 20,000 unknown topics costs a bounded amount of memory and never holds
//! up the answer. `__consumer_offsets` is created the same way, on the
//! first FindCoordinator (or Metadata) that finds it missing, with its own
//! settings.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashSet, VecDeque};
use std::rc::Rc;

use kshard_shards::placement::{OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC};

use crate::admin::embedded::NewTopic;
use crate::admin::AdminError;
use crate::admin::TopicAdmin;
use crate::config::BrokerConfig;
use crate::metadata::topics;
use crate::protocol::errors;
use crate::protocol::errors::ErrorCode;
use crate::router::CONTROLLER_SHARD;

/// Names waiting to be created, at most.
pub const PENDING_TOPICS_MAX: usize = 1_000;

#[derive(Default)]
struct Queue {
    pending: VecDeque<String>,
    /// The names in `pending` plus the one being created.
    in_flight: HashSet<String>,
    draining: bool,
}

impl Queue {
    /// Queues `name` unless it is in flight already or the queue is full.
    fn offer(&mut self, name: &str) -> bool {
        if self.in_flight.contains(name) {
            return true;
        }
        if self.pending.len() >= PENDING_TOPICS_MAX {
            return false;
        }
        self.in_flight.insert(name.to_string());
        self.pending.push_back(name.to_string());
        true
    }
}

thread_local! {
    // One queue per broker: only the controller shard's thread touches it.
    static QUEUE: RefCell<Queue> = RefCell::new(Queue::default());
}

/// Queues `names` for creation and returns at once, one code per name:
/// INVALID_TOPIC_EXCEPTION for an illegal name, else LEADER_NOT_AVAILABLE.
pub fn request_creation(ctx: &Rc<TopicAdmin>, names: &[String]) -> Vec<ErrorCode> {
    debug_assert_eq!(ctx.shard_id, CONTROLLER_SHARD);
    let mut dropped = 0usize;
    let codes = QUEUE.with(|q| {
        let mut q = q.borrow_mut();
        names
            .iter()
            .map(|name| {
                if topics::validate_topic_name(name).is_err() {
                    return errors::INVALID_TOPIC_EXCEPTION;
                }
                if !q.offer(name) {
                    dropped += 1;
                }
                errors::LEADER_NOT_AVAILABLE
            })
            .collect()
    });
    if dropped > 0 {
        log::debug!("auto topic creation queue full: {dropped} names not queued");
    }
    let start = QUEUE.with(|q| {
        let mut q = q.borrow_mut();
        let idle = !q.draining && !q.pending.is_empty();
        q.draining |= idle;
        idle
    });
    if start {
        glommio::spawn_local(drain(ctx.clone())).detach();
    }
    codes
}

/// Kafka's groupMetadataTopicConfigs: `__consumer_offsets` is created with
/// the offsets.topic.* settings, compacted, and min.insync.replicas left
/// at the broker default. With fewer live brokers than its replication
/// factor the creation fails (INVALID_REPLICATION_FACTOR), as Kafka's.
pub fn offsets_topic(config: &BrokerConfig) -> NewTopic {
    let mut configs = BTreeMap::new();
    configs.insert("cleanup.policy".to_string(), "compact".to_string());
    configs.insert(
        "segment.bytes".to_string(),
        config.offsets_topic_segment_bytes.to_string(),
    );
    configs.insert("compression.type".to_string(), "producer".to_string());
    NewTopic {
        name: OFFSETS_TOPIC.to_string(),
        num_partitions: config.offsets_topic_num_partitions.max(1),
        replication_factor: config.offsets_topic_replication_factor,
        assignment: None,
        configs,
    }
}

/// `__transaction_state` as Kafka's TransactionStateManager creates it
/// (`transactionTopicConfigs`).
pub fn transaction_state_topic(config: &BrokerConfig) -> NewTopic {
    let mut configs = BTreeMap::new();
    configs.insert("cleanup.policy".to_string(), "compact".to_string());
    configs.insert(
        "segment.bytes".to_string(),
        config.transaction_state_log_segment_bytes.to_string(),
    );
    configs.insert(
        "min.insync.replicas".to_string(),
        config.transaction_state_log_min_isr.to_string(),
    );
    configs.insert("compression.type".to_string(), "uncompressed".to_string());
    configs.insert(
        "unclean.leader.election.enable".to_string(),
        "false".to_string(),
    );
    NewTopic {
        name: TRANSACTION_STATE_TOPIC.to_string(),
        num_partitions: config.transaction_state_log_num_partitions.max(1),
        replication_factor: config.transaction_state_log_replication_factor,
        assignment: None,
        configs,
    }
}

async fn drain(ctx: Rc<TopicAdmin>) {
    loop {
        let Some(name) = QUEUE.with(|q| {
            let mut q = q.borrow_mut();
            let next = q.pending.pop_front();
            q.draining = next.is_some();
            next
        }) else {
            return;
        };
        let t = if name == OFFSETS_TOPIC {
            offsets_topic(&ctx.config)
        } else if name == TRANSACTION_STATE_TOPIC {
            transaction_state_topic(&ctx.config)
        } else {
            NewTopic {
                name: name.clone(),
                num_partitions: -1,
                replication_factor: -1,
                assignment: None,
                configs: BTreeMap::new(),
            }
        };
        match ctx.create_topic(t, false).await {
            Ok(_) => {}
            Err(AdminError { code, .. }) if code == errors::TOPIC_ALREADY_EXISTS => {}
            Err(AdminError { message, .. }) => log::warn!("auto-creating topic {name}: {message}"),
        }
        QUEUE.with(|q| q.borrow_mut().in_flight.remove(&name));
        if ctx.router.is_shutting_down() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offers_are_bounded_and_deduplicated() {
        let mut q = Queue::default();
        assert!(q.offer("a"));
        assert!(q.offer("a"));
        assert_eq!(q.pending.len(), 1);
        for i in 1..PENDING_TOPICS_MAX {
            assert!(q.offer(&format!("t{i}")));
        }
        assert_eq!(q.pending.len(), PENDING_TOPICS_MAX);
        assert!(!q.offer("one-too-many"));
        assert!(q.offer("a"), "a queued name is accepted again");
        assert_eq!(q.in_flight.len(), PENDING_TOPICS_MAX);
    }
}
