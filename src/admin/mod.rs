//! Topic administration (Kafka's ZkAdminManager and, on a single broker, the
//! embedded store's equivalent): CreateTopics, DeleteTopics, CreatePartitions,
//! auto-creation, Kafka's replica placement and the request limits.

pub mod assignment;
pub mod auto_topic_creation;
pub mod embedded;
pub mod limits;
pub mod zk;

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use crate::cluster::ClusterHandle;
use crate::config::BrokerConfig;
use crate::metadata::metadata_cache::MetadataCache;
use crate::protocol::errors::{self, ErrorCode};
use crate::router::Router;

/// One per shard: what topic admin needs. Admin requests run on the
/// controller shard, which alone holds the embedded `controller`.
pub struct TopicAdmin {
    pub shard_id: usize,
    pub nr_shards: usize,
    pub router: Rc<Router>,
    pub config: Arc<BrokerConfig>,
    pub metadata: Arc<MetadataCache>,
    /// Cluster mode: topics are created through ZooKeeper.
    pub cluster: Option<Arc<ClusterHandle>>,
    /// A single broker's topic admin over the embedded store; only on the
    /// controller shard.
    pub controller: Option<RefCell<embedded::Controller>>,
}

impl TopicAdmin {
    pub fn new(
        router: Rc<Router>,
        config: Arc<BrokerConfig>,
        metadata: Arc<MetadataCache>,
        cluster: Option<Arc<ClusterHandle>>,
        controller: Option<embedded::Controller>,
    ) -> Self {
        TopicAdmin {
            shard_id: router.shard_id,
            nr_shards: router.nr_shards,
            router,
            config,
            metadata,
            cluster,
            controller: controller.map(RefCell::new),
        }
    }

    pub fn owner_of(&self, topic: &str, partition: i32) -> usize {
        self.router.owner_of(topic, partition)
    }
}

/// A refused admin operation: Kafka's error code and the message Kafka
/// sends with it (`ApiError`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AdminError {
    pub code: ErrorCode,
    pub message: String,
}

pub type AdminResult<T> = Result<T, AdminError>;

impl AdminError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        assert!(!code.is_none(), "an admin error needs an error code");
        AdminError {
            code,
            message: message.into(),
        }
    }

    // Kafka's messages, shared by the single-broker and ZooKeeper admin.

    pub fn topic_exists(name: &str) -> Self {
        Self::new(
            errors::TOPIC_ALREADY_EXISTS,
            format!("Topic '{name}' already exists."),
        )
    }

    pub fn colliding_topic(name: &str, other: &str) -> Self {
        Self::new(
            errors::INVALID_TOPIC_EXCEPTION,
            format!("Topic '{name}' collides with existing topic: {other}"),
        )
    }

    pub fn counts_and_assignment() -> Self {
        Self::new(
            errors::INVALID_REQUEST,
            "Both numPartitions or replicationFactor and replicasAssignments were set. \
             Both cannot be used at the same time.",
        )
    }

    /// DeleteTopics of a topic this broker does not know.
    pub fn unknown_topic_partition() -> Self {
        Self::new(
            errors::UNKNOWN_TOPIC_OR_PARTITION,
            "This server does not host this topic-partition.",
        )
    }

    /// CreatePartitions of a topic that does not exist.
    pub fn no_such_topic(name: &str) -> Self {
        Self::new(
            errors::UNKNOWN_TOPIC_OR_PARTITION,
            format!("The topic '{name}' does not exist."),
        )
    }

    /// CreatePartitions to a count at or below the current one.
    pub fn partition_count_not_increased(current: i32, new_total: i32) -> Self {
        let message = if new_total < current {
            format!(
                "Topic currently has {current} partitions, which is higher than the requested {new_total}."
            )
        } else {
            format!("Topic already has {current} partitions.")
        };
        Self::new(errors::INVALID_PARTITIONS, message)
    }
}
