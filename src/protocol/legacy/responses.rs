//! Response encoders for the legacy versions (Kafka 3.9's JSON definitions).
//! Each takes the struct the handler builds; fields the old version lacks
//! are left out, as Kafka's writers leave out ignorable fields.

use bytes::BufMut;
use kafka_protocol::messages::{
    CreateTopicsResponse, DeleteTopicsResponse, DescribeConfigsResponse, OffsetCommitResponse,
    OffsetFetchResponse, OffsetForLeaderEpochResponse,
};
use kafka_protocol::protocol::Encodable;

use super::Writer;

/// ListOffsets v0's answer: per partition, an error and a list of offsets
/// in descending order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ListOffsetsV0Response {
    pub topics: Vec<ListOffsetsV0TopicResponse>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct ListOffsetsV0TopicResponse {
    pub name: String,
    pub partitions: Vec<ListOffsetsV0PartitionResponse>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct ListOffsetsV0PartitionResponse {
    pub partition_index: i32,
    pub error_code: i16,
    pub old_style_offsets: Vec<i64>,
}

pub(super) fn list_offsets_v0(w: &mut Vec<u8>, m: &ListOffsetsV0Response) {
    w.count(m.topics.len());
    for t in &m.topics {
        w.string(&t.name);
        w.count(t.partitions.len());
        for p in &t.partitions {
            w.put_i32(p.partition_index);
            w.put_i16(p.error_code);
            w.count(p.old_style_offsets.len());
            for o in &p.old_style_offsets {
                w.put_i64(*o);
            }
        }
    }
}

/// CreateTopics v0-1: name and error per topic; v1 adds the message.
pub(super) fn create_topics(w: &mut Vec<u8>, m: &CreateTopicsResponse, version: i16) {
    w.count(m.topics.len());
    for t in &m.topics {
        w.string(&t.name.0);
        w.put_i16(t.error_code);
        if version >= 1 {
            w.nullable_string(t.error_message.as_deref());
        }
    }
}

/// DeleteTopics v0: name and error per topic, no throttle time.
pub(super) fn delete_topics_v0(w: &mut Vec<u8>, m: &DeleteTopicsResponse) {
    w.count(m.responses.len());
    for t in &m.responses {
        w.string(t.name.as_ref().map_or("", |n| n.0.as_str()));
        w.put_i16(t.error_code);
    }
}

/// OffsetCommit v0-1: the same layout as v2, which the crate writes.
pub(super) fn offset_commit(w: &mut Vec<u8>, m: &OffsetCommitResponse) -> Result<(), String> {
    let m = m.clone().with_throttle_time_ms(0);
    m.encode(w, 2).map_err(|e| e.to_string())
}

/// OffsetFetch v0: the same layout as v1, which the crate writes.
pub(super) fn offset_fetch_v0(w: &mut Vec<u8>, m: &OffsetFetchResponse) -> Result<(), String> {
    let m = m.clone().with_throttle_time_ms(0).with_error_code(0);
    m.encode(w, 1).map_err(|e| e.to_string())
}

/// OffsetForLeaderEpoch v0-1: no throttle time; v1 adds the leader epoch.
pub(super) fn offset_for_leader_epoch(
    w: &mut Vec<u8>,
    m: &OffsetForLeaderEpochResponse,
    version: i16,
) {
    w.count(m.topics.len());
    for t in &m.topics {
        w.string(&t.topic.0);
        w.count(t.partitions.len());
        for p in &t.partitions {
            w.put_i16(p.error_code);
            w.put_i32(p.partition);
            if version >= 1 {
                w.put_i32(p.leader_epoch);
            }
            w.put_i64(p.end_offset);
        }
    }
}

/// DescribeConfigs v0: per config an IsDefault flag instead of a source and
/// synonyms. Kafka 3.9's broker never sets IsDefault (it fills ConfigSource,
/// which v0 cannot carry), so it is always false on the wire.
pub(super) fn describe_configs_v0(w: &mut Vec<u8>, m: &DescribeConfigsResponse) {
    w.put_i32(m.throttle_time_ms);
    w.count(m.results.len());
    for r in &m.results {
        w.put_i16(r.error_code);
        w.nullable_string(r.error_message.as_deref());
        w.put_i8(r.resource_type);
        w.string(&r.resource_name);
        w.count(r.configs.len());
        for c in &r.configs {
            w.string(&c.name);
            w.nullable_string(c.value.as_deref());
            w.put_u8(u8::from(c.read_only));
            w.put_u8(0);
            w.put_u8(u8::from(c.is_sensitive));
        }
    }
}

impl Encodable for ListOffsetsV0Response {
    fn encode<B: kafka_protocol::protocol::buf::ByteBufMut>(
        &self,
        buf: &mut B,
        version: i16,
    ) -> anyhow::Result<()> {
        if version != 0 {
            anyhow::bail!("ListOffsetsV0Response has no version {version}");
        }
        let mut w = Vec::new();
        list_offsets_v0(&mut w, self);
        buf.put_slice(&w);
        Ok(())
    }

    fn compute_size(&self, version: i16) -> anyhow::Result<usize> {
        let mut w = Vec::new();
        self.encode(&mut w, version)?;
        Ok(w.len())
    }
}
