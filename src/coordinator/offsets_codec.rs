//! Keys and values of `__consumer_offsets` records in Kafka's schemas
//! (group-coordinator/src/main/resources/common/message/*.json): every key
//! and value starts with an int16 schema version.
//!
//! Keys: OffsetCommitKey v0/v1 (group, topic, partition; written as v1),
//! GroupMetadataKey v2 (group). Values: OffsetCommitValue v0-v4 (written as
//! v1 when an expire timestamp is set, else v3, as Kafka 3.9 does) and
//! GroupMetadataValue v0-v4 (written as v3). A null value is a tombstone.
//! Decoders are bounds-checked and never panic.

use bytes::Bytes;

pub const OFFSET_COMMIT_KEY_VERSION: i16 = 1;
pub const GROUP_METADATA_KEY_VERSION: i16 = 2;
pub const GROUP_METADATA_VALUE_VERSION: i16 = 3;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RecordKey {
    Offset {
        group: String,
        topic: String,
        partition: i32,
    },
    Group {
        group: String,
    },
    /// A key version kshard does not know (e.g. KIP-848 records): skipped.
    Other(i16),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OffsetValue {
    pub offset: i64,
    /// -1: none.
    pub leader_epoch: i32,
    pub metadata: String,
    pub commit_timestamp_ms: i64,
    pub expire_timestamp_ms: Option<i64>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberValue {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: i32,
    pub session_timeout_ms: i32,
    pub subscription: Bytes,
    pub assignment: Bytes,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupValue {
    pub protocol_type: String,
    pub generation: i32,
    pub protocol: Option<String>,
    pub leader: Option<String>,
    /// -1: unknown (versions before 2).
    pub current_state_timestamp_ms: i64,
    pub members: Vec<MemberValue>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodecError(pub String);

impl std::fmt::Display for CodecError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

// ---- writing (non-flexible versions only) ----

fn put_str(out: &mut Vec<u8>, s: &str) {
    debug_assert!(s.len() <= i16::MAX as usize);
    out.extend_from_slice(&(s.len() as i16).to_be_bytes());
    out.extend_from_slice(s.as_bytes());
}

fn put_nullable_str(out: &mut Vec<u8>, s: Option<&str>) {
    match s {
        Some(s) => put_str(out, s),
        None => out.extend_from_slice(&(-1i16).to_be_bytes()),
    }
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len() as i32).to_be_bytes());
    out.extend_from_slice(b);
}

pub fn encode_offset_key(group: &str, topic: &str, partition: i32) -> Vec<u8> {
    let mut out = Vec::with_capacity(2 + 2 + group.len() + 2 + topic.len() + 4);
    out.extend_from_slice(&OFFSET_COMMIT_KEY_VERSION.to_be_bytes());
    put_str(&mut out, group);
    put_str(&mut out, topic);
    out.extend_from_slice(&partition.to_be_bytes());
    out
}

pub fn encode_group_key(group: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + group.len());
    out.extend_from_slice(&GROUP_METADATA_KEY_VERSION.to_be_bytes());
    put_str(&mut out, group);
    out
}

/// v1 if the commit has an explicit expire timestamp, else v3 (Kafka 3.9).
pub fn encode_offset_value(v: &OffsetValue) -> Vec<u8> {
    let mut out = Vec::with_capacity(32 + v.metadata.len());
    match v.expire_timestamp_ms {
        Some(expire) => {
            out.extend_from_slice(&1i16.to_be_bytes());
            out.extend_from_slice(&v.offset.to_be_bytes());
            put_str(&mut out, &v.metadata);
            out.extend_from_slice(&v.commit_timestamp_ms.to_be_bytes());
            out.extend_from_slice(&expire.to_be_bytes());
        }
        None => {
            out.extend_from_slice(&3i16.to_be_bytes());
            out.extend_from_slice(&v.offset.to_be_bytes());
            out.extend_from_slice(&v.leader_epoch.to_be_bytes());
            put_str(&mut out, &v.metadata);
            out.extend_from_slice(&v.commit_timestamp_ms.to_be_bytes());
        }
    }
    out
}

pub fn encode_group_value(v: &GroupValue) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    out.extend_from_slice(&GROUP_METADATA_VALUE_VERSION.to_be_bytes());
    put_str(&mut out, &v.protocol_type);
    out.extend_from_slice(&v.generation.to_be_bytes());
    put_nullable_str(&mut out, v.protocol.as_deref());
    put_nullable_str(&mut out, v.leader.as_deref());
    out.extend_from_slice(&v.current_state_timestamp_ms.to_be_bytes());
    out.extend_from_slice(&(v.members.len() as i32).to_be_bytes());
    for m in &v.members {
        put_str(&mut out, &m.member_id);
        put_nullable_str(&mut out, m.group_instance_id.as_deref());
        put_str(&mut out, &m.client_id);
        put_str(&mut out, &m.client_host);
        out.extend_from_slice(&m.rebalance_timeout_ms.to_be_bytes());
        out.extend_from_slice(&m.session_timeout_ms.to_be_bytes());
        put_bytes(&mut out, &m.subscription);
        put_bytes(&mut out, &m.assignment);
    }
    out
}

// ---- reading ----

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    /// Flexible version: compact strings/bytes/arrays and tagged fields.
    flexible: bool,
}

impl<'a> Reader<'a> {
    fn new(buf: &'a [u8]) -> Self {
        Reader {
            buf,
            pos: 0,
            flexible: false,
        }
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8], CodecError> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.buf.len())
            .ok_or_else(|| CodecError(format!("truncated at byte {}", self.pos)))?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    fn i16(&mut self) -> Result<i16, CodecError> {
        let b = self.take(2)?;
        Ok(i16::from_be_bytes([b[0], b[1]]))
    }
    fn i32(&mut self) -> Result<i32, CodecError> {
        let b = self.take(4)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn i64(&mut self) -> Result<i64, CodecError> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(i64::from_be_bytes(a))
    }
    fn uvarint(&mut self) -> Result<u32, CodecError> {
        let mut v: u32 = 0;
        for i in 0..5 {
            let b = self.take(1)?[0];
            v |= ((b & 0x7f) as u32) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(CodecError("varint too long".into()))
    }
    /// Length of a string/bytes field; None: null.
    fn len(&mut self, wide: bool) -> Result<Option<usize>, CodecError> {
        let n: i64 = if self.flexible {
            self.uvarint()? as i64 - 1
        } else if wide {
            self.i32()? as i64
        } else {
            self.i16()? as i64
        };
        Ok(if n < 0 { None } else { Some(n as usize) })
    }
    fn nullable_str(&mut self) -> Result<Option<String>, CodecError> {
        match self.len(false)? {
            None => Ok(None),
            Some(n) => {
                let b = self.take(n)?;
                String::from_utf8(b.to_vec())
                    .map(Some)
                    .map_err(|_| CodecError("string is not UTF-8".into()))
            }
        }
    }
    fn str(&mut self) -> Result<String, CodecError> {
        self.nullable_str()?
            .ok_or_else(|| CodecError("null string in a non-nullable field".into()))
    }
    fn bytes(&mut self) -> Result<Bytes, CodecError> {
        match self.len(true)? {
            None => Ok(Bytes::new()),
            Some(n) => Ok(Bytes::copy_from_slice(self.take(n)?)),
        }
    }
    fn array_len(&mut self) -> Result<usize, CodecError> {
        let n: usize = self.len(true)?.unwrap_or_default();
        // Every element takes at least one byte: bounds the allocation.
        if n > self.buf.len() - self.pos {
            return Err(CodecError(format!("array of {n} elements overruns")));
        }
        Ok(n)
    }
    fn skip_tagged_fields(&mut self) -> Result<(), CodecError> {
        if !self.flexible {
            return Ok(());
        }
        let count = self.uvarint()?;
        for _ in 0..count {
            self.uvarint()?;
            let size = self.uvarint()? as usize;
            self.take(size)?;
        }
        Ok(())
    }
}

pub fn decode_key(buf: &[u8]) -> Result<RecordKey, CodecError> {
    let mut r = Reader::new(buf);
    let version = r.i16()?;
    match version {
        0 | 1 => Ok(RecordKey::Offset {
            group: r.str()?,
            topic: r.str()?,
            partition: r.i32()?,
        }),
        2 => Ok(RecordKey::Group { group: r.str()? }),
        v => Ok(RecordKey::Other(v)),
    }
}

pub fn decode_offset_value(buf: &[u8]) -> Result<OffsetValue, CodecError> {
    let mut r = Reader::new(buf);
    let version = r.i16()?;
    if !(0..=4).contains(&version) {
        return Err(CodecError(format!(
            "unknown offset commit value version {version}"
        )));
    }
    r.flexible = version >= 4;
    let offset = r.i64()?;
    let leader_epoch = if version >= 3 { r.i32()? } else { -1 };
    let metadata = r.str()?;
    let commit_timestamp_ms = r.i64()?;
    let expire_timestamp_ms = if version == 1 { Some(r.i64()?) } else { None };
    r.skip_tagged_fields()?;
    Ok(OffsetValue {
        offset,
        leader_epoch,
        metadata,
        commit_timestamp_ms,
        expire_timestamp_ms,
    })
}

pub fn decode_group_value(buf: &[u8]) -> Result<GroupValue, CodecError> {
    let mut r = Reader::new(buf);
    let version = r.i16()?;
    if !(0..=4).contains(&version) {
        return Err(CodecError(format!(
            "unknown group metadata value version {version}"
        )));
    }
    r.flexible = version >= 4;
    let protocol_type = r.str()?;
    let generation = r.i32()?;
    let protocol = r.nullable_str()?;
    let leader = r.nullable_str()?;
    let current_state_timestamp_ms = if version >= 2 { r.i64()? } else { -1 };
    let count = r.array_len()?;
    let mut members = Vec::with_capacity(count);
    for _ in 0..count {
        let member_id = r.str()?;
        let group_instance_id = if version >= 3 {
            r.nullable_str()?
        } else {
            None
        };
        let client_id = r.str()?;
        let client_host = r.str()?;
        let session_then_rebalance = version >= 1;
        let rebalance_timeout_ms = if session_then_rebalance { r.i32()? } else { 0 };
        let session_timeout_ms = r.i32()?;
        let rebalance_timeout_ms = if session_then_rebalance {
            rebalance_timeout_ms
        } else {
            session_timeout_ms
        };
        let subscription = r.bytes()?;
        let assignment = r.bytes()?;
        r.skip_tagged_fields()?;
        members.push(MemberValue {
            member_id,
            group_instance_id,
            client_id,
            client_host,
            rebalance_timeout_ms,
            session_timeout_ms,
            subscription,
            assignment,
        });
    }
    r.skip_tagged_fields()?;
    Ok(GroupValue {
        protocol_type,
        generation,
        protocol,
        leader,
        current_state_timestamp_ms,
        members,
    })
}

/// Topics of a ConsumerProtocolSubscription (v0-v3, non-flexible), for
/// OffsetDelete's GROUP_SUBSCRIBED_TO_TOPIC and offset expiry.
pub fn subscription_topics(buf: &[u8]) -> Result<Vec<String>, CodecError> {
    let mut r = Reader::new(buf);
    let version = r.i16()?;
    if version < 0 {
        return Err(CodecError(format!("bad subscription version {version}")));
    }
    let n = r.array_len()?;
    let mut topics = Vec::with_capacity(n);
    for _ in 0..n {
        topics.push(r.str()?);
    }
    Ok(topics)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_key_bytes_match_kafka_schema() {
        let k = encode_offset_key("g", "t", 3);
        assert_eq!(k, vec![0, 1, 0, 1, b'g', 0, 1, b't', 0, 0, 0, 3]);
        assert_eq!(
            decode_key(&k).unwrap(),
            RecordKey::Offset {
                group: "g".into(),
                topic: "t".into(),
                partition: 3
            }
        );
        assert_eq!(encode_group_key("ab"), vec![0, 2, 0, 2, b'a', b'b']);
        assert_eq!(
            decode_key(&[0, 2, 0, 1, b'x']).unwrap(),
            RecordKey::Group { group: "x".into() }
        );
        assert_eq!(decode_key(&[0, 3, 0, 0]).unwrap(), RecordKey::Other(3));
        assert!(decode_key(&[0, 1, 0, 5, b'a']).is_err());
    }

    #[test]
    fn offset_value_v3_and_v1_bytes() {
        let v = OffsetValue {
            offset: 42,
            leader_epoch: 7,
            metadata: "m".into(),
            commit_timestamp_ms: 1000,
            expire_timestamp_ms: None,
        };
        let b = encode_offset_value(&v);
        let mut want = vec![0, 3];
        want.extend_from_slice(&42i64.to_be_bytes());
        want.extend_from_slice(&7i32.to_be_bytes());
        want.extend_from_slice(&[0, 1, b'm']);
        want.extend_from_slice(&1000i64.to_be_bytes());
        assert_eq!(b, want);
        assert_eq!(decode_offset_value(&b).unwrap(), v);

        let v1 = OffsetValue {
            expire_timestamp_ms: Some(5000),
            leader_epoch: -1,
            ..v
        };
        let b = encode_offset_value(&v1);
        let mut want = vec![0, 1];
        want.extend_from_slice(&42i64.to_be_bytes());
        want.extend_from_slice(&[0, 1, b'm']);
        want.extend_from_slice(&1000i64.to_be_bytes());
        want.extend_from_slice(&5000i64.to_be_bytes());
        assert_eq!(b, want);
        assert_eq!(decode_offset_value(&b).unwrap(), v1);
    }

    #[test]
    fn offset_value_v4_flexible_decodes() {
        let mut b = vec![0, 4];
        b.extend_from_slice(&9i64.to_be_bytes());
        b.extend_from_slice(&(-1i32).to_be_bytes());
        b.extend_from_slice(&[3, b'h', b'i']); // compact string "hi"
        b.extend_from_slice(&77i64.to_be_bytes());
        b.push(0); // no tagged fields
        let v = decode_offset_value(&b).unwrap();
        assert_eq!(
            (v.offset, v.metadata.as_str(), v.commit_timestamp_ms),
            (9, "hi", 77)
        );
    }

    #[test]
    fn group_value_v3_round_trip_and_bytes() {
        let v = GroupValue {
            protocol_type: "consumer".into(),
            generation: 2,
            protocol: Some("range".into()),
            leader: Some("c-1".into()),
            current_state_timestamp_ms: 99,
            members: vec![MemberValue {
                member_id: "c-1".into(),
                group_instance_id: None,
                client_id: "c".into(),
                client_host: "/h".into(),
                rebalance_timeout_ms: 300000,
                session_timeout_ms: 45000,
                subscription: Bytes::from_static(&[1, 2]),
                assignment: Bytes::from_static(&[3]),
            }],
        };
        let b = encode_group_value(&v);
        let mut want = vec![0, 3, 0, 8];
        want.extend_from_slice(b"consumer");
        want.extend_from_slice(&2i32.to_be_bytes());
        want.extend_from_slice(&[0, 5]);
        want.extend_from_slice(b"range");
        want.extend_from_slice(&[0, 3]);
        want.extend_from_slice(b"c-1");
        want.extend_from_slice(&99i64.to_be_bytes());
        want.extend_from_slice(&1i32.to_be_bytes());
        want.extend_from_slice(&[0, 3]);
        want.extend_from_slice(b"c-1");
        want.extend_from_slice(&[0xff, 0xff]); // null instance id
        want.extend_from_slice(&[0, 1, b'c', 0, 2, b'/', b'h']);
        want.extend_from_slice(&300000i32.to_be_bytes());
        want.extend_from_slice(&45000i32.to_be_bytes());
        want.extend_from_slice(&[0, 0, 0, 2, 1, 2, 0, 0, 0, 1, 3]);
        assert_eq!(b, want);
        assert_eq!(decode_group_value(&b).unwrap(), v);
        // Every truncation fails cleanly.
        for n in 0..b.len() {
            assert!(decode_group_value(&b[..n]).is_err(), "prefix {n}");
        }
    }

    #[test]
    fn empty_group_value_and_garbage() {
        let v = GroupValue {
            protocol_type: "".into(),
            generation: 5,
            protocol: None,
            leader: None,
            current_state_timestamp_ms: 1,
            members: vec![],
        };
        assert_eq!(decode_group_value(&encode_group_value(&v)).unwrap(), v);
        assert!(decode_group_value(&[0, 3, 0, 0, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff]).is_err());
        let mut huge = vec![0, 3, 0, 0, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff];
        huge.extend_from_slice(&0i64.to_be_bytes());
        huge.extend_from_slice(&i32::MAX.to_be_bytes());
        assert!(decode_group_value(&huge).is_err());
    }

    #[test]
    fn subscription_topics_parse() {
        let mut b = vec![0, 1, 0, 0, 0, 2, 0, 1, b'a', 0, 2, b'b', b'c'];
        b.extend_from_slice(&[0xff, 0xff, 0xff, 0xff]); // null user data
        assert_eq!(subscription_topics(&b).unwrap(), vec!["a", "bc"]);
        assert!(subscription_topics(&[0, 1, 0, 0, 0, 9]).is_err());
    }
}
