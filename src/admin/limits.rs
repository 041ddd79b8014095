//! Bounds on what one admin request may ask for, checked before anything is
//! allocated for it. Apache Kafka 3.9.1's controller
//! (`ReplicationControlManager.validateTotalNumberOfPartitions`) refuses a
//! CreateTopics request that would create more than 10,000 partitions in
//! all, failing every topic of the request with POLICY_VIOLATION; Kafka 4.x
//! applies the same bound to CreatePartitions (KAFKA-19673). kshard applies
//! both, in single-broker and ZooKeeper mode alike: the topic's metadata is
//! one record (embedded store) or one znode (ZooKeeper), and both are
//! bounded in size. Counts are summed in i64, so no request can wrap them
//! (Kafka 3.9.1 sums in an int).

use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::CreatableTopic;

use crate::admin::AdminError;
use crate::metadata::metadata_cache::MetadataImage;
use crate::protocol::errors;

/// Kafka's `ReplicationControlManager.MAX_PARTITIONS_PER_BATCH`.
pub const PARTITIONS_PER_REQUEST_MAX: i64 = 10_000;

/// Kafka's message for a request over the bound.
pub const TOO_MANY_PARTITIONS_MESSAGE: &str = "Excessively large number of partitions per request.";

/// The error every topic of an oversized request gets.
pub fn too_many_partitions() -> AdminError {
    AdminError::new(errors::POLICY_VIOLATION, TOO_MANY_PARTITIONS_MESSAGE)
}

/// Partitions a CreateTopics request asks for, counted as Kafka counts
/// them: `num.partitions` for -1, the assignment's length when one is
/// given, nothing for other non-positive counts (they fail on their own).
pub fn create_topics_partitions(topics: &[CreatableTopic], default_partitions: i32) -> i64 {
    topics
        .iter()
        .map(|t| {
            if !t.assignments.is_empty() {
                t.assignments.len() as i64
            } else if t.num_partitions == -1 {
                i64::from(default_partitions.max(0))
            } else {
                i64::from(t.num_partitions.max(0))
            }
        })
        .sum()
}

/// Partitions a CreatePartitions request would add to the topics of
/// `image` (unknown topics and non-increases add none).
pub fn create_partitions_added(topics: &[CreatePartitionsTopic], image: &MetadataImage) -> i64 {
    topics
        .iter()
        .map(|t| {
            let current = image
                .topic(t.name.0.as_str())
                .map_or(i64::from(t.count), |info| info.partitions.len() as i64);
            (i64::from(t.count) - current).max(0)
        })
        .sum()
}

/// POLICY_VIOLATION when `partitions` exceeds the per-request bound.
pub fn check_partitions_per_request(partitions: i64) -> Result<(), AdminError> {
    if partitions > PARTITIONS_PER_REQUEST_MAX {
        return Err(too_many_partitions());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::create_topics_request::CreatableReplicaAssignment;
    use kafka_protocol::messages::{BrokerId, TopicName};
    use kafka_protocol::protocol::StrBytes;

    fn topic(name: &str, partitions: i32) -> CreatableTopic {
        CreatableTopic::default()
            .with_name(TopicName(StrBytes::from_string(name.into())))
            .with_num_partitions(partitions)
            .with_replication_factor(-1)
    }

    #[test]
    fn counts_defaults_assignments_and_ignores_non_positive() {
        let a = CreatableReplicaAssignment::default().with_broker_ids(vec![BrokerId(0)]);
        let manual = topic("m", -1).with_assignments(vec![a.clone(), a.with_partition_index(1)]);
        let topics = [
            topic("a", 3),
            topic("b", -1),
            topic("c", 0),
            topic("d", -7),
            manual,
        ];
        assert_eq!(create_topics_partitions(&topics, 5), 3 + 5 + 2);
    }

    #[test]
    fn sums_do_not_wrap() {
        let topics = [topic("a", i32::MAX), topic("b", i32::MAX)];
        let n = create_topics_partitions(&topics, 1);
        assert_eq!(n, 2 * i64::from(i32::MAX));
        assert_eq!(check_partitions_per_request(n), Err(too_many_partitions()));
    }

    #[test]
    fn the_bound_is_inclusive() {
        assert!(check_partitions_per_request(PARTITIONS_PER_REQUEST_MAX).is_ok());
        let AdminError { code, message } =
            check_partitions_per_request(PARTITIONS_PER_REQUEST_MAX + 1)
                .err()
                .unwrap();
        assert_eq!(code, errors::POLICY_VIOLATION);
        assert_eq!(
            message,
            "Excessively large number of partitions per request."
        );
    }

    #[test]
    fn added_partitions_count_only_increases() {
        let image = MetadataImage::default();
        let t = |name: &str, count: i32| {
            CreatePartitionsTopic::default()
                .with_name(TopicName(StrBytes::from_string(name.into())))
                .with_count(count)
        };
        // Unknown topics add nothing (they fail UNKNOWN_TOPIC_OR_PARTITION).
        assert_eq!(create_partitions_added(&[t("x", i32::MAX)], &image), 0);
    }
}
