//! The metadata image every shard reads: topics, partitions, leaders, topic
//! ids, configs, brokers. Shard 0 (the controller) builds a new immutable
//! image after each change and swaps it in; readers pay one atomic load.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use arc_swap::ArcSwap;
use uuid::Uuid;

use crate::config::topic::TopicConfig;

#[derive(Clone, Debug)]
pub struct BrokerInfo {
    pub id: i32,
    /// The endpoint brokers use to reach it (the inter-broker listener's).
    pub host: String,
    pub port: u16,
    pub rack: Option<String>,
    /// Every advertised listener; clients get the one they connected on.
    pub endpoints: Vec<ListenerEndpoint>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListenerEndpoint {
    pub listener_name: String,
    pub host: String,
    pub port: u16,
}

impl BrokerInfo {
    /// The broker's endpoint on `listener_name` (Kafka's
    /// MetadataCache.getAliveBrokerNode(id, listenerName)); None when it
    /// has no such listener.
    pub fn endpoint(&self, listener_name: &str) -> Option<&ListenerEndpoint> {
        self.endpoints
            .iter()
            .find(|e| e.listener_name == listener_name)
    }
}

#[derive(Clone, Debug)]
pub struct PartitionInfo {
    pub partition: i32,
    pub leader: i32,
    pub leader_epoch: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    /// Replicas on brokers that are not live (cluster mode).
    pub offline_replicas: Vec<i32>,
}

#[derive(Clone, Debug)]
pub struct TopicInfo {
    pub name: String,
    pub topic_id: Uuid,
    pub partitions: Vec<PartitionInfo>,
    /// Topic-level overrides as the user set them (DescribeConfigs sources).
    pub overrides: BTreeMap<String, String>,
    pub config: Arc<TopicConfig>,
    pub is_internal: bool,
}

#[derive(Clone, Debug, Default)]
pub struct MetadataImage {
    pub cluster_id: String,
    pub controller_id: i32,
    pub brokers: Vec<BrokerInfo>,
    pub topics: HashMap<String, Arc<TopicInfo>>,
    pub topic_names_by_id: HashMap<Uuid, String>,
}

impl MetadataImage {
    pub fn topic(&self, name: &str) -> Option<&Arc<TopicInfo>> {
        self.topics.get(name)
    }
    pub fn topic_by_id(&self, id: &Uuid) -> Option<&Arc<TopicInfo>> {
        self.topic_names_by_id
            .get(id)
            .and_then(|n| self.topics.get(n))
    }
    /// A copy with `topic` added or replaced: O(topics), so a change of
    /// many topics goes through `insert_topic` on one copy instead.
    pub fn with_topic(&self, topic: TopicInfo) -> MetadataImage {
        let mut next = self.clone();
        next.insert_topic(topic);
        next
    }
    pub fn without_topic(&self, name: &str) -> MetadataImage {
        let mut next = self.clone();
        next.remove_topic(name);
        next
    }
    pub fn insert_topic(&mut self, topic: TopicInfo) {
        self.topic_names_by_id
            .insert(topic.topic_id, topic.name.clone());
        self.topics.insert(topic.name.clone(), Arc::new(topic));
    }
    pub fn remove_topic(&mut self, name: &str) {
        if let Some(t) = self.topics.remove(name) {
            self.topic_names_by_id.remove(&t.topic_id);
        }
    }
}

/// Shared by all shards; written only by the controller shard.
pub struct MetadataCache {
    image: ArcSwap<MetadataImage>,
}

impl MetadataCache {
    pub fn new(image: MetadataImage) -> Self {
        MetadataCache {
            image: ArcSwap::from_pointee(image),
        }
    }
    #[inline]
    pub fn image(&self) -> Arc<MetadataImage> {
        self.image.load_full()
    }
    pub fn publish(&self, image: MetadataImage) {
        self.image.store(Arc::new(image));
    }
}
