//! Topic administration: CreateTopics, DeleteTopics, CreatePartitions and
//! auto-creation, as Kafka's ZkAdminManager (`zk.rs`) in cluster mode and
//! over the embedded store on a single broker (`embedded.rs`); the checks
//! both share (`validate.rs`), Kafka's replica placement (`assignment/`) and
//! the request limits. The mode is fixed when the broker starts.

pub mod acls;
pub mod assignment;
pub mod auto_topic_creation;
pub mod client_quotas;
pub mod config_changes;
pub mod configs;
pub mod embedded;
pub mod limits;
pub mod logger_configs;
pub mod scram_alter;
pub mod scram_credentials;
pub mod validate;
pub mod zk;

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use crate::cluster::ClusterHandle;
use crate::config::dynamic::DynamicBrokerConfig;
use crate::config::BrokerConfig;
use crate::metadata::metadata_cache::{MetadataCache, TopicInfo};
use crate::protocol::errors::{self, ErrorCode};
use crate::quota::QuotaManagers;
use crate::router::Router;

/// One per shard: what topic admin needs. Admin requests run on the
/// controller shard, which alone holds the embedded `controller`.
pub struct TopicAdmin {
    pub shard_id: usize,
    pub nr_shards: usize,
    pub router: Rc<Router>,
    /// As started (static); the live values are in `dynamic_config`.
    pub config: Arc<BrokerConfig>,
    pub dynamic_config: Arc<DynamicBrokerConfig>,
    /// The broker's client quotas, fed by user and client-id config changes.
    pub quotas: Arc<QuotaManagers>,
    pub metadata: Arc<MetadataCache>,
    /// Cluster mode: topics are created through ZooKeeper.
    pub cluster: Option<Arc<ClusterHandle>>,
    /// A single broker's topic admin over the embedded store; only on the
    /// controller shard.
    pub embedded: Option<RefCell<embedded::EmbeddedAdmin>>,
}

impl TopicAdmin {
    pub fn new(
        router: Rc<Router>,
        config: Arc<BrokerConfig>,
        dynamic_config: Arc<DynamicBrokerConfig>,
        quotas: Arc<QuotaManagers>,
        metadata: Arc<MetadataCache>,
        cluster: Option<Arc<ClusterHandle>>,
        embedded: Option<embedded::EmbeddedAdmin>,
    ) -> Self {
        TopicAdmin {
            shard_id: router.shard_id,
            nr_shards: router.nr_shards,
            router,
            config,
            dynamic_config,
            quotas,
            metadata,
            cluster,
            embedded: embedded.map(RefCell::new),
        }
    }

    pub fn owner_of(&self, topic: &str, partition: i32) -> usize {
        self.router.owner_of(topic, partition)
    }

    /// Cluster mode: topics live in ZooKeeper, as Kafka's ZkAdminManager.
    fn is_zk(&self) -> bool {
        self.cluster.is_some()
    }

    pub async fn create_topic(
        self: &Rc<Self>,
        t: embedded::NewTopic,
        validate_only: bool,
    ) -> AdminResult<Arc<TopicInfo>> {
        if self.is_zk() {
            zk::create_topic(self, t, validate_only).await
        } else {
            embedded::create_topic(self, t, validate_only).await
        }
    }

    /// Deletes a topic; returns its id.
    pub async fn delete_topic(self: &Rc<Self>, name: &str) -> AdminResult<uuid::Uuid> {
        if self.is_zk() {
            zk::delete_topic(self, name).await
        } else {
            embedded::delete_topic(self, name).await
        }
    }

    pub async fn create_partitions(
        self: &Rc<Self>,
        name: &str,
        new_total: i32,
        assignment: Option<Vec<Vec<i32>>>,
        validate_only: bool,
    ) -> AdminResult<()> {
        if self.is_zk() {
            zk::create_partitions(self, name, new_total, assignment, validate_only).await
        } else {
            embedded::create_partitions(self, name, new_total, assignment, validate_only).await
        }
    }

    /// Auto-creation from Metadata requests: queued for the background,
    /// answered at once with one code per name.
    pub fn auto_create_topics(self: &Rc<Self>, names: &[String]) -> Vec<ErrorCode> {
        auto_topic_creation::request_creation(self, names)
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

    /// A controller mutation quota refused the change (KIP-599); Kafka
    /// sends no message with it.
    pub fn throttled() -> Self {
        Self::new(errors::THROTTLING_QUOTA_EXCEEDED, "")
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
