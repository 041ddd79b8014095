//! Produce v0-v2 and Fetch v0-v3 (Kafka 3.9's JSON definitions): decoded
//! into the crate's Produce v3 / Fetch v4 structs, whose fields the old
//! versions lack taking Kafka's defaults. Fetch responses have their own
//! encoder (`protocol::fetch_encoder`), Produce responses are encoded here.
//! The message sets (magic 0/1) are converted by `kshard_shards::log::legacy`.

use bytes::{BufMut, Bytes};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    BrokerId, FetchRequest, ProduceRequest, ProduceResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::{Reader, Writer};

type R<'a, 'b> = &'a mut Reader<'b>;

fn topic_name(r: R, field: &str) -> Result<TopicName, String> {
    Ok(TopicName(StrBytes::from_string(r.string(field)?)))
}

/// Produce v0-v2: v3 without the transactional id.
pub(super) fn produce(r: R) -> Result<ProduceRequest, String> {
    let acks = r.i16()?;
    let timeout_ms = r.i32()?;
    let topic_data = r.array("topicData", |r| {
        Ok(TopicProduceData::default()
            .with_name(topic_name(r, "name")?)
            .with_partition_data(r.array("partitionData", |r| {
                Ok(PartitionProduceData::default()
                    .with_index(r.i32()?)
                    .with_records(r.nullable_bytes("records")?.map(Bytes::copy_from_slice)))
            })?))
    })?;
    Ok(ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(timeout_ms)
        .with_topic_data(topic_data))
}

/// Produce v0-v2 responses: v1 adds the throttle time, v2 the log append
/// time of each partition.
pub(super) fn produce_response(w: &mut Vec<u8>, m: &ProduceResponse, version: i16) {
    w.count(m.responses.len());
    for t in &m.responses {
        w.string(&t.name.0);
        w.count(t.partition_responses.len());
        for p in &t.partition_responses {
            w.put_i32(p.index);
            w.put_i16(p.error_code);
            w.put_i64(p.base_offset);
            if version >= 2 {
                w.put_i64(p.log_append_time_ms);
            }
        }
    }
    if version >= 1 {
        w.put_i32(m.throttle_time_ms);
    }
}

/// Fetch v0-v3: v3 adds the response's `max_bytes` (earlier versions have
/// no limit but the broker's); no isolation level (read uncommitted), no
/// sessions, no leader epochs.
pub(super) fn fetch(r: R, version: i16) -> Result<FetchRequest, String> {
    let replica_id = r.i32()?;
    let max_wait_ms = r.i32()?;
    let min_bytes = r.i32()?;
    let max_bytes = if version >= 3 { r.i32()? } else { i32::MAX };
    let topics = r.array("topics", |r| {
        Ok(FetchTopic::default()
            .with_topic(topic_name(r, "topic")?)
            .with_partitions(r.array("partitions", |r| {
                Ok(FetchPartition::default()
                    .with_partition(r.i32()?)
                    .with_fetch_offset(r.i64()?)
                    .with_partition_max_bytes(r.i32()?))
            })?))
    })?;
    Ok(FetchRequest::default()
        .with_replica_id(BrokerId(replica_id))
        .with_max_wait_ms(max_wait_ms)
        .with_min_bytes(min_bytes)
        .with_max_bytes(max_bytes)
        .with_isolation_level(0)
        .with_topics(topics))
}
