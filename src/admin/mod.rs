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
