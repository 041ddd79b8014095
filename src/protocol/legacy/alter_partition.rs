//! AlterPartition v0-1 (flexible versions from the start): the same fields
//! as v2, but topics are named rather than identified by id, and v0 has no
//! leader recovery state. Kafka 3.9 in ZooKeeper mode serves them (brokers
//! below inter-broker protocol 3.3 send them); the `kafka-protocol` crate
//! starts at v2. The handler maps names to ids through the metadata image,
//! so these types keep the names as sent.

use bytes::BufMut;
use kafka_protocol::protocol::{Decodable, Encodable};

use super::Reader;

#[derive(Debug, Default, Clone, PartialEq)]
pub struct AlterPartitionV0Request {
    pub broker_id: i32,
    pub broker_epoch: i64,
    pub topics: Vec<AlterPartitionV0Topic>,
}

#[derive(Debug, Default, Clone, PartialEq)]
pub struct AlterPartitionV0Topic {
    pub name: String,
    pub partitions: Vec<AlterPartitionV0Partition>,
}

#[derive(Debug, Default, Clone, PartialEq)]
pub struct AlterPartitionV0Partition {
    pub partition_index: i32,
    pub leader_epoch: i32,
    pub new_isr: Vec<i32>,
    /// v1+; 0 (recovered) in v0.
    pub leader_recovery_state: i8,
    pub partition_epoch: i32,
}

#[derive(Debug, Default, Clone, PartialEq)]
pub struct AlterPartitionV0Response {
    pub throttle_time_ms: i32,
    pub error_code: i16,
    pub topics: Vec<AlterPartitionV0TopicResponse>,
}

#[derive(Debug, Default, Clone, PartialEq)]
pub struct AlterPartitionV0TopicResponse {
    pub name: String,
    pub partitions: Vec<AlterPartitionV0PartitionResponse>,
}

#[derive(Debug, Default, Clone, PartialEq)]
pub struct AlterPartitionV0PartitionResponse {
    pub partition_index: i32,
    pub error_code: i16,
    pub leader_id: i32,
    pub leader_epoch: i32,
    pub isr: Vec<i32>,
    pub leader_recovery_state: i8,
    pub partition_epoch: i32,
}

// ------------------------------------------------------------ flexible reads

impl Reader<'_> {
    /// An unsigned varint of at most 5 bytes (Kafka's readUnsignedVarint).
    fn uvarint(&mut self) -> Result<u32, String> {
        let mut value = 0u32;
        for i in 0..5 {
            let b = self.i8()? as u8;
            value |= u32::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err("varint is too long".to_string())
    }

    /// A compact array's element count, refused when it exceeds the bytes
    /// left (every element takes at least one byte); null is refused.
    fn compact_array_len(&mut self, field: &str) -> Result<usize, String> {
        let Some(len) = (self.uvarint()? as usize).checked_sub(1) else {
            return Err(format!("non-nullable field {field} was serialized as null"));
        };
        if len > self.buf.len() {
            return Err(format!(
                "tried to allocate a collection of size {len} for {field}, but there are only {} bytes remaining",
                self.buf.len()
            ));
        }
        Ok(len)
    }

    fn compact_array<T>(
        &mut self,
        field: &str,
        mut element: impl FnMut(&mut Self) -> Result<T, String>,
    ) -> Result<Vec<T>, String> {
        let len = self.compact_array_len(field)?;
        let mut items = Vec::with_capacity(len);
        for _ in 0..len {
            items.push(element(self)?);
        }
        Ok(items)
    }

    fn compact_string(&mut self, field: &str) -> Result<String, String> {
        let Some(len) = (self.uvarint()? as usize).checked_sub(1) else {
            return Err(format!("non-nullable field {field} was serialized as null"));
        };
        if len > super::MAX_STRING_BYTES {
            return Err(format!("string field {field} had invalid length {len}"));
        }
        Ok(String::from_utf8_lossy(self.take(len)?).into_owned())
    }

    /// Skips a tagged-field section (none of these versions defines tags).
    fn tagged_fields(&mut self) -> Result<(), String> {
        for _ in 0..self.uvarint()? {
            let _tag = self.uvarint()?;
            let size = self.uvarint()? as usize;
            self.take(size)?;
        }
        Ok(())
    }
}

pub(super) fn request(r: &mut Reader, version: i16) -> Result<AlterPartitionV0Request, String> {
    let broker_id = r.i32()?;
    let broker_epoch = r.i64()?;
    let topics = r.compact_array("topics", |r| {
        let name = r.compact_string("topicName")?;
        let partitions = r.compact_array("partitions", |r| {
            let partition_index = r.i32()?;
            let leader_epoch = r.i32()?;
            let new_isr = r.compact_array("newIsr", |r| r.i32())?;
            let leader_recovery_state = if version >= 1 { r.i8()? } else { 0 };
            let partition_epoch = r.i32()?;
            r.tagged_fields()?;
            Ok(AlterPartitionV0Partition {
                partition_index,
                leader_epoch,
                new_isr,
                leader_recovery_state,
                partition_epoch,
            })
        })?;
        r.tagged_fields()?;
        Ok(AlterPartitionV0Topic { name, partitions })
    })?;
    r.tagged_fields()?;
    Ok(AlterPartitionV0Request {
        broker_id,
        broker_epoch,
        topics,
    })
}

// ----------------------------------------------------------- flexible writes

fn put_uvarint(w: &mut Vec<u8>, mut value: u32) {
    while value >= 0x80 {
        w.put_u8((value as u8 & 0x7f) | 0x80);
        value >>= 7;
    }
    w.put_u8(value as u8);
}

fn put_compact_len(w: &mut Vec<u8>, len: usize) {
    put_uvarint(w, u32::try_from(len + 1).unwrap_or(u32::MAX));
}

fn put_compact_string(w: &mut Vec<u8>, s: &str) {
    let len = s.len().min(super::MAX_STRING_BYTES);
    put_compact_len(w, len);
    w.put_slice(&s.as_bytes()[..len]);
}

const NO_TAGGED_FIELDS: u8 = 0;

pub(super) fn response(w: &mut Vec<u8>, r: &AlterPartitionV0Response, version: i16) {
    w.put_i32(r.throttle_time_ms);
    w.put_i16(r.error_code);
    put_compact_len(w, r.topics.len());
    for t in &r.topics {
        put_compact_string(w, &t.name);
        put_compact_len(w, t.partitions.len());
        for p in &t.partitions {
            w.put_i32(p.partition_index);
            w.put_i16(p.error_code);
            w.put_i32(p.leader_id);
            w.put_i32(p.leader_epoch);
            put_compact_len(w, p.isr.len());
            for b in &p.isr {
                w.put_i32(*b);
            }
            if version >= 1 {
                w.put_i8(p.leader_recovery_state);
            }
            w.put_i32(p.partition_epoch);
            w.put_u8(NO_TAGGED_FIELDS);
        }
        w.put_u8(NO_TAGGED_FIELDS);
    }
    w.put_u8(NO_TAGGED_FIELDS);
}

impl Decodable for AlterPartitionV0Request {
    fn decode<B: kafka_protocol::protocol::buf::ByteBuf>(
        buf: &mut B,
        version: i16,
    ) -> anyhow::Result<Self> {
        if !(0..=1).contains(&version) {
            anyhow::bail!("AlterPartitionV0Request has no version {version}");
        }
        let body = buf.copy_to_bytes(buf.remaining());
        request(&mut Reader::new(&body), version).map_err(anyhow::Error::msg)
    }
}

impl Encodable for AlterPartitionV0Response {
    fn encode<B: kafka_protocol::protocol::buf::ByteBufMut>(
        &self,
        buf: &mut B,
        version: i16,
    ) -> anyhow::Result<()> {
        if !(0..=1).contains(&version) {
            anyhow::bail!("AlterPartitionV0Response has no version {version}");
        }
        let mut w = Vec::new();
        response(&mut w, self, version);
        buf.put_slice(&w);
        Ok(())
    }

    fn compute_size(&self, version: i16) -> anyhow::Result<usize> {
        let mut w = Vec::new();
        self.encode(&mut w, version)?;
        Ok(w.len())
    }
}
