//! Golden vectors for Produce v0-v2 and Fetch v0-v3 from Kafka 3.9.1's own
//! serializers (testdata/produce_fetch_golden.txt, made by
//! tests/legacy_golden/OldFormatVectors.java, whose samples these match).

use bytes::Bytes;
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{ApiKey, FetchRequest, ProduceRequest, ProduceResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use super::{decode_request, encode_response};
use crate::protocol::fetch_encoder::{
    encode_fetch_response, FetchPartitionData, FetchResponseData, FetchTopicData, RecordsData,
};
use crate::protocol::Chunk;

fn golden(name: &str, version: i16) -> Vec<u8> {
    super::golden_vector(
        include_str!("testdata/produce_fetch_golden.txt"),
        name,
        version,
    )
}

/// The magic-1 message of the samples: offset 0, timestamp 1000, "k" = "v".
const MESSAGE: &str = "000000000000000000000018e4e321bc010000000000000003e8000000016b0000000176";

fn message() -> Vec<u8> {
    (0..MESSAGE.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&MESSAGE[i..i + 2], 16).unwrap())
        .collect()
}

#[test]
fn decodes_produce_v0_to_v2() {
    for version in 0..=2 {
        let body = golden("produce_request", version);
        let req: Box<ProduceRequest> = decode_request(ApiKey::Produce, version, &body)
            .unwrap()
            .unwrap()
            .downcast()
            .unwrap();
        assert_eq!((req.acks, req.timeout_ms), (-1, 30000));
        assert_eq!(req.transactional_id, None);
        let t = &req.topic_data[0];
        assert_eq!(t.name.0.as_str(), "foo");
        assert_eq!(t.partition_data[0].index, 2);
        assert_eq!(t.partition_data[0].records.as_deref(), Some(&message()[..]));
        assert_eq!(t.partition_data[1].index, 3);
        assert_eq!(t.partition_data[1].records, None);
    }
}

#[test]
fn encodes_produce_v0_to_v2_responses() {
    let response = ProduceResponse::default().with_responses(vec![TopicProduceResponse::default()
        .with_name(TopicName(StrBytes::from_static_str("foo")))
        .with_partition_responses(vec![
            PartitionProduceResponse::default()
                .with_index(2)
                .with_base_offset(41)
                .with_log_append_time_ms(1_700_000_000_000),
            PartitionProduceResponse::default()
                .with_index(3)
                .with_error_code(87)
                .with_base_offset(-1)
                .with_log_append_time_ms(-1),
        ])]);
    for version in 0..=2 {
        let got = encode_response(ApiKey::Produce, version, &response)
            .unwrap()
            .unwrap();
        assert_eq!(got, golden("produce_response", version), "v{version}");
    }
}

#[test]
fn decodes_fetch_v0_to_v3() {
    for version in 0..=3 {
        let body = golden("fetch_request", version);
        let req: Box<FetchRequest> = decode_request(ApiKey::Fetch, version, &body)
            .unwrap()
            .unwrap()
            .downcast()
            .unwrap();
        assert_eq!(req.replica_id.0, -1);
        assert_eq!((req.max_wait_ms, req.min_bytes), (500, 1));
        let max_bytes = if version >= 3 { 1_000_000 } else { i32::MAX };
        assert_eq!(req.max_bytes, max_bytes);
        assert_eq!(req.isolation_level, 0);
        let p = &req.topics[0].partitions[0];
        assert_eq!(req.topics[0].topic.0.as_str(), "foo");
        assert_eq!(
            (p.partition, p.fetch_offset, p.partition_max_bytes),
            (2, 41, 65536)
        );
        assert_eq!(p.current_leader_epoch, -1);
    }
}

#[test]
fn encodes_fetch_v0_to_v3_responses() {
    for version in 0..=3 {
        let partition = |partition, error_code, high_watermark, records| FetchPartitionData {
            partition,
            error_code,
            high_watermark,
            last_stable_offset: high_watermark,
            log_start_offset: 0,
            diverging_epoch: None,
            current_leader: None,
            aborted_transactions: None,
            records,
        };
        let data = FetchResponseData {
            throttle_time_ms: 0,
            error_code: 0,
            session_id: 0,
            topics: vec![FetchTopicData {
                name: "foo".into(),
                topic_id: Uuid::nil(),
                partitions: vec![
                    partition(2, 0, 42, RecordsData::Bytes(Bytes::from(message()))),
                    partition(3, 76, -1, RecordsData::Null),
                ],
            }],
        };
        let response = encode_fetch_response(version, 9, data).unwrap();
        let mut frame = Vec::new();
        for c in &response.chunks {
            match c {
                Chunk::Bytes(b) => frame.extend_from_slice(b),
                Chunk::File(_) => panic!("no files here"),
            }
        }
        // Size prefix and correlation id, then the body.
        assert_eq!(frame[4..8], 9i32.to_be_bytes());
        assert_eq!(
            frame[8..],
            golden("fetch_response", version)[..],
            "v{version}"
        );
    }
}

#[test]
fn truncated_requests_fail_cleanly() {
    for (key, name, versions) in [
        (ApiKey::Produce, "produce_request", 0..=2),
        (ApiKey::Fetch, "fetch_request", 0..=3),
    ] {
        for version in versions {
            let body = golden(name, version);
            for cut in 0..body.len() {
                assert!(decode_request(key, version, &body[..cut]).unwrap().is_err());
            }
        }
    }
    // Counts and lengths past the bytes left are refused before allocating.
    let hostile = [0xffu8, 0xff, 0, 0, 0x75, 0x30, 0x7f, 0xff, 0xff, 0xff];
    assert!(decode_request(ApiKey::Produce, 1, &hostile)
        .unwrap()
        .is_err());
    let mut records_too_long = golden("produce_request", 0);
    records_too_long[23..27].copy_from_slice(&i32::MAX.to_be_bytes());
    assert!(decode_request(ApiKey::Produce, 0, &records_too_long)
        .unwrap()
        .is_err());
}
