//! Fetch response encoder (Fetch v0..v17) that leaves record bytes in the
//! segment files: the response is a list of chunks, in-memory header bytes
//! interleaved with file ranges that the connection sends with sendfile(2).

use bytes::{BufMut, Bytes, BytesMut};
use uuid::Uuid;

use super::{Chunk, Response};
use kshard_shards::log::FileSlice;

pub enum RecordsData {
    /// Null records (Kafka's answer for a partition it cannot down-convert).
    Null,
    Empty,
    File(FileSlice),
    Bytes(Bytes),
}

impl RecordsData {
    pub fn len(&self) -> usize {
        match self {
            RecordsData::Null | RecordsData::Empty => 0,
            RecordsData::File(f) => f.len as usize,
            RecordsData::Bytes(b) => b.len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// An aborted transaction a read_committed consumer must skip: the
/// producer's batches from `first_offset` up to its abort marker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AbortedTransaction {
    pub producer_id: i64,
    pub first_offset: i64,
}

pub struct FetchPartitionData {
    pub partition: i32,
    pub error_code: i16,
    pub high_watermark: i64,
    pub last_stable_offset: i64,
    pub log_start_offset: i64,
    /// (epoch, end offset) when the fetcher's last fetched epoch diverges.
    pub diverging_epoch: Option<(i32, i64)>,
    /// (leader id, leader epoch), sent with NOT_LEADER/FENCED errors.
    pub current_leader: Option<(i32, i32)>,
    /// `None` encodes null (read_uncommitted), `Some(vec![])` an empty array.
    pub aborted_transactions: Option<Vec<AbortedTransaction>>,
    pub records: RecordsData,
}

pub struct FetchTopicData {
    pub name: String,
    pub topic_id: Uuid,
    pub partitions: Vec<FetchPartitionData>,
}

pub struct FetchResponseData {
    pub throttle_time_ms: i32,
    pub error_code: i16,
    pub session_id: i32,
    pub topics: Vec<FetchTopicData>,
}

fn put_uvarint(buf: &mut BytesMut, mut v: u64) {
    while v >= 0x80 {
        buf.put_u8((v as u8) | 0x80);
        v >>= 7;
    }
    buf.put_u8(v as u8);
}

fn put_array_len(buf: &mut BytesMut, flexible: bool, len: usize) {
    if flexible {
        put_uvarint(buf, len as u64 + 1);
    } else {
        buf.put_i32(len as i32);
    }
}

fn put_string(buf: &mut BytesMut, flexible: bool, s: &str) {
    if flexible {
        put_uvarint(buf, s.len() as u64 + 1);
    } else {
        buf.put_i16(s.len() as i16);
    }
    buf.put_slice(s.as_bytes());
}

/// Encodes the response (with its size prefix and response header). An
/// error (the connection is then closed) when `version` has no encoding
/// here or the response would pass Kafka's i32 size prefix; the handler
/// bounds responses by `fetch.max.bytes`, so the latter means a bug.
/// Sets the throttle time of an encoded Fetch response (v1+; v0 has no
/// such field) and the connection's mute: the time is known only once the
/// response's size has been charged to the client's quota.
pub fn set_fetch_throttle_time(response: &mut Response, version: i16, throttle_ms: u32) {
    response.throttle_ms = throttle_ms;
    if version < 1 {
        return;
    }
    // size, correlation id, then the header's tagged fields from v12.
    let at = if version >= 12 { 9 } else { 8 };
    let Some(Chunk::Bytes(head)) = response.chunks.first_mut() else {
        unreachable!("a Fetch response starts with its header bytes");
    };
    assert!(head.len() >= at + 4, "the header holds throttle_time_ms");
    let mut patched = BytesMut::from(&head[..]);
    let value = i32::try_from(throttle_ms).unwrap_or(i32::MAX);
    patched[at..at + 4].copy_from_slice(&value.to_be_bytes());
    *head = patched.freeze();
}

pub fn encode_fetch_response(
    version: i16,
    correlation_id: i32,
    data: FetchResponseData,
) -> Result<Response, String> {
    if !(0..=17).contains(&version) {
        return Err(format!("Fetch v{version} responses are not encodable"));
    }
    let flexible = version >= 12;
    let mut chunks: Vec<Chunk> = Vec::with_capacity(2 + data.topics.len() * 2);
    // Header goes into `head`; the size prefix is patched in at the end.
    let mut buf = BytesMut::with_capacity(256);
    buf.put_i32(0);
    buf.put_i32(correlation_id);
    if flexible {
        put_uvarint(&mut buf, 0); // response header tagged fields
    }
    if version >= 1 {
        buf.put_i32(data.throttle_time_ms);
    }
    if version >= 7 {
        buf.put_i16(data.error_code);
        buf.put_i32(data.session_id);
    }
    put_array_len(&mut buf, flexible, data.topics.len());
    for topic in data.topics {
        if version >= 13 {
            buf.put_slice(topic.topic_id.as_bytes());
        } else {
            put_string(&mut buf, flexible, &topic.name);
        }
        put_array_len(&mut buf, flexible, topic.partitions.len());
        for p in topic.partitions {
            buf.put_i32(p.partition);
            buf.put_i16(p.error_code);
            buf.put_i64(p.high_watermark);
            if version >= 4 {
                buf.put_i64(p.last_stable_offset);
            }
            if version >= 5 {
                buf.put_i64(p.log_start_offset);
            }
            match &p.aborted_transactions {
                // Fetch v0-v3 have no transactions.
                _ if version < 4 => {}
                None => {
                    if flexible {
                        put_uvarint(&mut buf, 0);
                    } else {
                        buf.put_i32(-1);
                    }
                }
                Some(list) => {
                    put_array_len(&mut buf, flexible, list.len());
                    for t in list {
                        buf.put_i64(t.producer_id);
                        buf.put_i64(t.first_offset);
                        if flexible {
                            put_uvarint(&mut buf, 0);
                        }
                    }
                }
            }
            if version >= 11 {
                buf.put_i32(-1); // preferred_read_replica: leader serves reads
            }
            let len = p.records.len();
            if len > i32::MAX as usize {
                return Err(format!("Fetch records of {len} bytes pass i32::MAX"));
            }
            match (&p.records, flexible) {
                (RecordsData::Null, true) => put_uvarint(&mut buf, 0),
                (RecordsData::Null, false) => buf.put_i32(-1),
                (_, true) => put_uvarint(&mut buf, len as u64 + 1),
                (_, false) => buf.put_i32(len as i32),
            }
            match p.records {
                RecordsData::Null | RecordsData::Empty => {}
                RecordsData::Bytes(b) => buf.put_slice(&b),
                RecordsData::File(slice) => {
                    chunks.push(Chunk::Bytes(buf.split().freeze()));
                    chunks.push(Chunk::File(slice));
                }
            }
            if flexible {
                let mut tags = 0u64;
                if p.diverging_epoch.is_some() {
                    tags += 1;
                }
                if p.current_leader.is_some() {
                    tags += 1;
                }
                put_uvarint(&mut buf, tags);
                if let Some((epoch, end_offset)) = p.diverging_epoch {
                    put_uvarint(&mut buf, 0);
                    put_uvarint(&mut buf, 4 + 8 + 1);
                    buf.put_i32(epoch);
                    buf.put_i64(end_offset);
                    put_uvarint(&mut buf, 0);
                }
                if let Some((leader_id, leader_epoch)) = p.current_leader {
                    put_uvarint(&mut buf, 1);
                    put_uvarint(&mut buf, 4 + 4 + 1);
                    buf.put_i32(leader_id);
                    buf.put_i32(leader_epoch);
                    put_uvarint(&mut buf, 0);
                }
            }
        }
        if flexible {
            put_uvarint(&mut buf, 0); // topic tagged fields
        }
    }
    if flexible {
        put_uvarint(&mut buf, 0); // top-level tagged fields
    }
    chunks.push(Chunk::Bytes(buf.freeze()));
    let mut response = Response {
        chunks,
        throttle_ms: 0,
    };
    let total = response.total_len();
    if total - 4 > i32::MAX as usize {
        return Err(format!(
            "Fetch response of {total} bytes passes i32::MAX (correlation id {correlation_id})"
        ));
    }
    // Patch the size prefix into the first chunk, which holds it.
    if let Some(Chunk::Bytes(first)) = response.chunks.first_mut() {
        let mut patched = BytesMut::from(&first[..]);
        patched[0..4].copy_from_slice(&((total - 4) as i32).to_be_bytes());
        *first = patched.freeze();
    }
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::FetchResponse;
    use kafka_protocol::protocol::Decodable;

    fn flatten(r: &Response) -> Bytes {
        let mut out = BytesMut::new();
        for c in &r.chunks {
            match c {
                Chunk::Bytes(b) => out.put_slice(b),
                Chunk::File(_) => panic!("no files in this test"),
            }
        }
        out.freeze()
    }

    #[test]
    fn refuses_what_it_cannot_encode() {
        let file = std::sync::Arc::new(std::fs::File::open("/dev/null").unwrap());
        let part = |partition| FetchPartitionData {
            partition,
            error_code: 0,
            high_watermark: 0,
            last_stable_offset: 0,
            log_start_offset: 0,
            diverging_epoch: None,
            current_leader: None,
            aborted_transactions: None,
            records: RecordsData::File(FileSlice {
                file: file.clone(),
                position: 0,
                len: i32::MAX as u32,
                direct: false,
                may_be_cold: false,
                cached: None,
            }),
        };
        let data = |partitions| FetchResponseData {
            throttle_time_ms: 0,
            error_code: 0,
            session_id: 0,
            topics: vec![FetchTopicData {
                name: "t".into(),
                topic_id: Uuid::nil(),
                partitions,
            }],
        };
        // Two partitions of i32::MAX bytes pass the size prefix.
        assert!(encode_fetch_response(4, 1, data(vec![part(0), part(1)])).is_err());
        assert!(encode_fetch_response(4, 1, data(vec![part(0)])).is_err());
        assert!(encode_fetch_response(99, 1, data(vec![])).is_err());
        assert!(encode_fetch_response(-1, 1, data(vec![])).is_err());
        assert!(encode_fetch_response(16, 1, data(vec![])).is_ok());
    }

    #[test]
    fn round_trips_through_kafka_protocol_decoder() {
        for version in 4..=17i16 {
            let data = FetchResponseData {
                throttle_time_ms: 0,
                error_code: 0,
                session_id: 7,
                topics: vec![FetchTopicData {
                    name: "t".into(),
                    topic_id: Uuid::from_u128(42),
                    partitions: vec![FetchPartitionData {
                        partition: 3,
                        error_code: 0,
                        high_watermark: 10,
                        last_stable_offset: 10,
                        log_start_offset: 1,
                        diverging_epoch: if version >= 12 { Some((2, 5)) } else { None },
                        current_leader: None,
                        aborted_transactions: Some(vec![]),
                        records: RecordsData::Bytes(Bytes::from_static(b"abcdef")),
                    }],
                }],
            };
            let frame = flatten(&encode_fetch_response(version, 99, data).unwrap());
            let size = i32::from_be_bytes(frame[0..4].try_into().unwrap()) as usize;
            assert_eq!(size, frame.len() - 4);
            let mut body = frame.slice(8..);
            if version >= 12 {
                assert_eq!(body[0], 0);
                body = body.slice(1..);
            }
            let decoded = FetchResponse::decode(&mut body, version).unwrap();
            assert_eq!(body.len(), 0, "v{version} leftover bytes");
            let p = &decoded.responses[0].partitions[0];
            assert_eq!(p.partition_index, 3);
            assert_eq!(p.high_watermark, 10);
            assert_eq!(p.records.as_deref(), Some(&b"abcdef"[..]));
            if version >= 7 {
                assert_eq!(decoded.session_id, 7);
            }
            if version >= 12 {
                assert_eq!(p.diverging_epoch.epoch, 2);
            }
        }
    }
}
