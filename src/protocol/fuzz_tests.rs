//! Deterministic fuzzing of request decoding (the cargo-fuzz targets in
//! `fuzz/` run the same entry points open-ended): random frames and
//! mutations of valid frames must decode to Ok or Err, never panic or abort.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiKey, FetchRequest, MetadataRequest, ProduceRequest, RequestHeader, TopicName,
};
use kafka_protocol::protocol::{Encodable, StrBytes};

use super::{decode_frame, SUPPORTED_APIS};

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn frame<M: Encodable>(key: ApiKey, version: i16, body: &M) -> Vec<u8> {
    let header = RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(7)
        .with_client_id(Some(StrBytes::from_static_str("fuzz")));
    let mut buf = BytesMut::new();
    header
        .encode(&mut buf, key.request_header_version(version))
        .unwrap();
    body.encode(&mut buf, version).unwrap();
    buf.to_vec()
}

fn seeds() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for v in [0i16, 4, 9, 12] {
        let m = MetadataRequest::default().with_topics(Some(vec![
            kafka_protocol::messages::metadata_request::MetadataRequestTopic::default()
                .with_name(Some(TopicName(StrBytes::from_static_str("t")))),
        ]));
        out.push(frame(ApiKey::Metadata, v, &m));
    }
    for v in [3i16, 9, 11] {
        let p = ProduceRequest::default()
            .with_acks(1)
            .with_timeout_ms(1000)
            .with_topic_data(vec![
                kafka_protocol::messages::produce_request::TopicProduceData::default()
                    .with_name(TopicName(StrBytes::from_static_str("t")))
                    .with_partition_data(vec![
                        kafka_protocol::messages::produce_request::PartitionProduceData::default()
                            .with_index(0)
                            .with_records(Some(Bytes::from_static(&[0u8; 70]))),
                    ]),
            ]);
        out.push(frame(ApiKey::Produce, v, &p));
    }
    for v in [4i16, 11, 12, 13] {
        let f = FetchRequest::default()
            .with_max_wait_ms(10)
            .with_topics(vec![
                kafka_protocol::messages::fetch_request::FetchTopic::default()
                    .with_topic(if v < 13 {
                        TopicName(StrBytes::from_static_str("t"))
                    } else {
                        TopicName::default()
                    })
                    .with_partitions(vec![
                        kafka_protocol::messages::fetch_request::FetchPartition::default()
                            .with_partition_max_bytes(1024),
                    ]),
            ]);
        out.push(frame(ApiKey::Fetch, v, &f));
    }
    out.extend(legacy_seeds());
    out
}

/// The legacy-version requests of `legacy/testdata/golden.txt` and
/// `produce_fetch_golden.txt` (bodies serialized by Kafka 3.9.1) under a v1
/// request header.
fn legacy_seeds() -> Vec<Vec<u8>> {
    include_str!("legacy/testdata/golden.txt")
        .lines()
        .chain(include_str!("legacy/testdata/produce_fetch_golden.txt").lines())
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let mut f = l.split(' ');
            let (name, version, hex) = (f.next()?, f.next()?, f.next()?);
            let key = match name {
                "produce_request" => "Produce",
                "fetch_request" => "Fetch",
                _ => name.strip_suffix("Request")?,
            };
            let key = match key {
                "Produce" => ApiKey::Produce,
                "Fetch" => ApiKey::Fetch,
                "ListOffsets" => ApiKey::ListOffsets,
                "CreateTopics" => ApiKey::CreateTopics,
                "DeleteTopics" => ApiKey::DeleteTopics,
                "OffsetCommit" => ApiKey::OffsetCommit,
                "OffsetFetch" => ApiKey::OffsetFetch,
                "OffsetForLeaderEpoch" => ApiKey::OffsetForLeaderEpoch,
                "DescribeConfigs" => ApiKey::DescribeConfigs,
                other => panic!("unknown golden request {other}"),
            };
            let mut b = BytesMut::new();
            b.put_i16(key as i16);
            b.put_i16(version.parse().ok()?);
            b.put_i32(7);
            b.put_i16(4);
            b.put_slice(b"fuzz");
            for i in (0..hex.len()).step_by(2) {
                b.put_u8(u8::from_str_radix(&hex[i..i + 2], 16).ok()?);
            }
            Some(b.to_vec())
        })
        .collect()
}

#[test]
fn random_and_mutated_frames_never_panic() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let seeds = seeds();
    for s in &seeds {
        assert!(
            decode_frame(Bytes::from(s.clone())).is_ok(),
            "seed must decode"
        );
    }
    for i in 0..20_000 {
        let mut buf = if i % 4 == 0 {
            // A random header for every served API and version, random body.
            let api = SUPPORTED_APIS[rng.below(SUPPORTED_APIS.len())];
            let span = (api.max_version - api.min_version + 1) as usize;
            let version = api.min_version + rng.below(span) as i16;
            let mut b = BytesMut::new();
            b.put_i16(api.key as i16);
            b.put_i16(version);
            b.put_i32(1);
            for _ in 0..rng.below(64) {
                b.put_u8(rng.next() as u8);
            }
            b.to_vec()
        } else {
            seeds[rng.below(seeds.len())].clone()
        };
        for _ in 0..1 + rng.below(4) {
            if buf.is_empty() {
                break;
            }
            let at = rng.below(buf.len());
            match rng.below(4) {
                0 => buf[at] ^= 1 << rng.below(8),
                1 => buf[at] = 0xff,
                2 => buf.truncate(at),
                _ => buf[at] = 0x7f,
            }
        }
        let _ = decode_frame(Bytes::from(buf));
    }
}

#[test]
fn huge_array_counts_do_not_abort() {
    // Metadata v1 with topics count = i32::MAX and no elements.
    let mut b = BytesMut::new();
    b.put_i16(ApiKey::Metadata as i16);
    b.put_i16(1);
    b.put_i32(1);
    b.put_i16(-1);
    b.put_i32(i32::MAX);
    assert!(decode_frame(b.freeze()).is_err());
}
