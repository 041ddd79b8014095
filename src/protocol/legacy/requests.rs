//! Request decoders for the legacy versions (Kafka 3.9's JSON definitions).

use kafka_protocol::messages::create_topics_request::{
    CreatableReplicaAssignment, CreatableTopic, CreatableTopicConfig,
};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::{
    BrokerId, CreateTopicsRequest, DeleteTopicsRequest, DescribeConfigsRequest, GroupId,
    OffsetCommitRequest, OffsetFetchRequest, OffsetForLeaderEpochRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::Reader;

type R<'a, 'b> = &'a mut Reader<'b>;

fn str_bytes(s: String) -> StrBytes {
    StrBytes::from_string(s)
}

fn topic_name(r: R, field: &str) -> Result<TopicName, String> {
    Ok(TopicName(str_bytes(r.string(field)?)))
}

/// ListOffsets v0: one request partition asks for up to `max_num_offsets`
/// offsets at or before `timestamp`.
#[derive(Debug, Clone, PartialEq)]
pub struct ListOffsetsV0Request {
    pub replica_id: i32,
    pub topics: Vec<ListOffsetsV0Topic>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ListOffsetsV0Topic {
    pub name: String,
    pub partitions: Vec<ListOffsetsV0Partition>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ListOffsetsV0Partition {
    pub partition_index: i32,
    pub timestamp: i64,
    pub max_num_offsets: i32,
}

pub(super) fn list_offsets_v0(r: R) -> Result<ListOffsetsV0Request, String> {
    let replica_id = r.i32()?;
    let topics = r.array("topics", |r| {
        Ok(ListOffsetsV0Topic {
            name: r.string("name")?,
            partitions: r.array("partitions", |r| {
                Ok(ListOffsetsV0Partition {
                    partition_index: r.i32()?,
                    timestamp: r.i64()?,
                    max_num_offsets: r.i32()?,
                })
            })?,
        })
    })?;
    Ok(ListOffsetsV0Request { replica_id, topics })
}

/// CreateTopics v0-1 (v1 adds validateOnly).
pub(super) fn create_topics(r: R, version: i16) -> Result<CreateTopicsRequest, String> {
    let topics = r.array("topics", |r| {
        Ok(CreatableTopic::default()
            .with_name(topic_name(r, "name")?)
            .with_num_partitions(r.i32()?)
            .with_replication_factor(r.i16()?)
            .with_assignments(r.array("assignments", |r| {
                Ok(CreatableReplicaAssignment::default()
                    .with_partition_index(r.i32()?)
                    .with_broker_ids(r.array("brokerIds", |r| Ok(BrokerId(r.i32()?)))?))
            })?)
            .with_configs(r.array("configs", |r| {
                Ok(CreatableTopicConfig::default()
                    .with_name(str_bytes(r.string("name")?))
                    .with_value(r.nullable_string("value")?.map(str_bytes)))
            })?))
    })?;
    let timeout_ms = r.i32()?;
    let validate_only = if version >= 1 { r.bool()? } else { false };
    Ok(CreateTopicsRequest::default()
        .with_topics(topics)
        .with_timeout_ms(timeout_ms)
        .with_validate_only(validate_only))
}

/// DeleteTopics v0: topic names and a timeout, as v1.
pub(super) fn delete_topics_v0(r: R) -> Result<DeleteTopicsRequest, String> {
    let names = r.array("topicNames", |r| topic_name(r, "topicNames"))?;
    Ok(DeleteTopicsRequest::default()
        .with_topic_names(names)
        .with_timeout_ms(r.i32()?))
}

/// OffsetCommit v0-1. v1 adds the generation, the member id and a commit
/// timestamp per partition (kept by Kafka as the commit time; kshard stamps
/// commits with the broker's time).
pub(super) fn offset_commit(r: R, version: i16) -> Result<OffsetCommitRequest, String> {
    let group_id = GroupId(str_bytes(r.string("groupId")?));
    let (generation, member_id) = if version >= 1 {
        (r.i32()?, r.string("memberId")?)
    } else {
        (-1, String::new())
    };
    let topics = r.array("topics", |r| {
        let name = topic_name(r, "name")?;
        let partitions = r.array("partitions", |r| {
            let partition_index = r.i32()?;
            let committed_offset = r.i64()?;
            if version == 1 {
                let _commit_timestamp = r.i64()?;
            }
            Ok(OffsetCommitRequestPartition::default()
                .with_partition_index(partition_index)
                .with_committed_offset(committed_offset)
                .with_committed_metadata(r.nullable_string("committedMetadata")?.map(str_bytes)))
        })?;
        Ok(OffsetCommitRequestTopic::default()
            .with_name(name)
            .with_partitions(partitions))
    })?;
    Ok(OffsetCommitRequest::default()
        .with_group_id(group_id)
        .with_generation_id_or_member_epoch(generation)
        .with_member_id(str_bytes(member_id))
        .with_topics(topics))
}

/// OffsetFetch v0: as v1 (a group and its partitions; v0 has no null
/// "all partitions" list).
pub(super) fn offset_fetch_v0(r: R) -> Result<OffsetFetchRequest, String> {
    let group_id = GroupId(str_bytes(r.string("groupId")?));
    let topics = r.array("topics", |r| {
        Ok(OffsetFetchRequestTopic::default()
            .with_name(topic_name(r, "name")?)
            .with_partition_indexes(r.array("partitionIndexes", |r| r.i32())?))
    })?;
    Ok(OffsetFetchRequest::default()
        .with_group_id(group_id)
        .with_topics(Some(topics)))
}

/// OffsetForLeaderEpoch v0-1 (the same layout): no current leader epoch,
/// and a consumer's replica id (-2, the v3 default).
pub(super) fn offset_for_leader_epoch(r: R) -> Result<OffsetForLeaderEpochRequest, String> {
    let topics = r.array("topics", |r| {
        Ok(OffsetForLeaderTopic::default()
            .with_topic(topic_name(r, "topic")?)
            .with_partitions(r.array("partitions", |r| {
                Ok(OffsetForLeaderPartition::default()
                    .with_partition(r.i32()?)
                    .with_current_leader_epoch(-1)
                    .with_leader_epoch(r.i32()?))
            })?))
    })?;
    Ok(OffsetForLeaderEpochRequest::default()
        .with_replica_id(BrokerId(-2))
        .with_topics(topics))
}

/// DescribeConfigs v0: resources only (no synonyms, no documentation).
pub(super) fn describe_configs_v0(r: R) -> Result<DescribeConfigsRequest, String> {
    let resources = r.array("resources", |r| {
        Ok(DescribeConfigsResource::default()
            .with_resource_type(r.i8()?)
            .with_resource_name(str_bytes(r.string("resourceName")?))
            .with_configuration_keys(r.nullable_array("configurationKeys", |r| {
                Ok(str_bytes(r.string("configurationKeys")?))
            })?))
    })?;
    Ok(DescribeConfigsRequest::default()
        .with_resources(resources)
        .with_include_synonyms(false))
}

impl kafka_protocol::protocol::Decodable for ListOffsetsV0Request {
    fn decode<B: kafka_protocol::protocol::buf::ByteBuf>(
        buf: &mut B,
        version: i16,
    ) -> anyhow::Result<Self> {
        if version != 0 {
            anyhow::bail!("ListOffsetsV0Request has no version {version}");
        }
        let body = buf.copy_to_bytes(buf.remaining());
        list_offsets_v0(&mut Reader::new(&body)).map_err(anyhow::Error::msg)
    }
}
