//! The CreateTopics checks and the new topic's metadata that the single
//! broker and ZooKeeper modes share, in Kafka's order, with Kafka's messages.

use std::sync::Arc;

use uuid::Uuid;

use super::embedded::NewTopic;
use super::limits::check_partitions_per_request;
use super::{AdminError, AdminResult};
use crate::config::topic::TopicConfig;
use crate::config::BrokerConfig;
use crate::metadata::metadata_cache::{MetadataImage, PartitionInfo, TopicInfo};
use crate::metadata::topics;
use crate::protocol::errors;

/// The checks before any assignment: a legal name, no such topic yet, and
/// with a manual assignment neither counts nor more partitions than the
/// request bound.
pub fn check_new_topic(t: &NewTopic, image: &MetadataImage) -> AdminResult<()> {
    topics::validate_topic_name(&t.name)
        .map_err(|m| AdminError::new(errors::INVALID_TOPIC_EXCEPTION, m))?;
    if image.topic(&t.name).is_some() {
        return Err(AdminError::topic_exists(&t.name));
    }
    if let Some(a) = &t.assignment {
        if t.num_partitions != -1 || t.replication_factor != -1 {
            return Err(AdminError::counts_and_assignment());
        }
        check_partitions_per_request(a.len() as i64)?;
    }
    Ok(())
}

/// CreatePartitions' first checks: the topic exists, the count grows, and
/// the new partitions stay within the request bound. Returns the topic and
/// its current partition count.
pub fn check_partition_increase(
    image: &MetadataImage,
    name: &str,
    new_total: i32,
) -> AdminResult<(Arc<TopicInfo>, i32)> {
    let Some(info) = image.topic(name).cloned() else {
        return Err(AdminError::no_such_topic(name));
    };
    let current = info.partitions.len() as i32;
    if new_total <= current {
        return Err(AdminError::partition_count_not_increased(
            current, new_total,
        ));
    }
    check_partitions_per_request(i64::from(new_total) - i64::from(current))?;
    Ok((info, current))
}

/// (partitions, replication factor) asked for, -1 meaning the broker's
/// `num.partitions` / `default.replication.factor`.
pub fn requested_counts(t: &NewTopic, config: &BrokerConfig) -> (i32, i16) {
    let partitions = if t.num_partitions == -1 {
        config.num_partitions
    } else {
        t.num_partitions
    };
    let replication_factor = if t.replication_factor == -1 {
        config.default_replication_factor as i16
    } else {
        t.replication_factor
    };
    (partitions, replication_factor)
}

/// The topic's config: broker defaults under the request's overrides.
pub fn topic_config(t: &NewTopic, config: &BrokerConfig) -> AdminResult<TopicConfig> {
    TopicConfig::from_overrides(config, &t.configs)
        .map_err(|e| AdminError::new(errors::INVALID_CONFIG, e.to_string()))
}

/// A partition as created: its first replica leads, every replica is in sync.
pub fn new_partition(partition: i32, replicas: &[i32]) -> PartitionInfo {
    PartitionInfo {
        partition,
        leader: replicas.first().copied().unwrap_or(-1),
        leader_epoch: 0,
        replicas: replicas.to_vec(),
        isr: replicas.to_vec(),
        offline_replicas: Vec::new(),
    }
}

/// The metadata a new topic gets.
pub fn new_topic_info<'a>(
    name: &str,
    topic_id: Uuid,
    assignment: impl IntoIterator<Item = (&'a i32, &'a Vec<i32>)>,
    config: TopicConfig,
) -> Arc<TopicInfo> {
    Arc::new(TopicInfo {
        name: name.to_string(),
        topic_id,
        partitions: assignment
            .into_iter()
            .map(|(p, replicas)| new_partition(*p, replicas))
            .collect(),
        overrides: config.overrides.clone(),
        config: Arc::new(config),
        is_internal: name.starts_with("__"),
    })
}
