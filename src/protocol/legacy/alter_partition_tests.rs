//! Golden vectors for AlterPartition v0-1 from Kafka 3.9.1's own serializers
//! (testdata/alter_partition_golden.txt, made by
//! tests/legacy_golden/AlterPartitionVectors.java, whose samples these match).

use kafka_protocol::messages::ApiKey;

use super::alter_partition::*;
use super::{decode_request, encode_response};

fn golden(name: &str, version: i16) -> Vec<u8> {
    super::golden_vector(
        include_str!("testdata/alter_partition_golden.txt"),
        name,
        version,
    )
}

fn request(version: i16) -> AlterPartitionV0Request {
    AlterPartitionV0Request {
        broker_id: 2,
        broker_epoch: 4242,
        topics: vec![
            AlterPartitionV0Topic {
                name: "foo".into(),
                partitions: vec![AlterPartitionV0Partition {
                    partition_index: 1,
                    leader_epoch: 7,
                    new_isr: vec![2, 3],
                    leader_recovery_state: if version >= 1 { 1 } else { 0 },
                    partition_epoch: 11,
                }],
            },
            AlterPartitionV0Topic {
                name: "t\u{f8}pic".into(),
                partitions: vec![],
            },
        ],
    }
}

fn response() -> AlterPartitionV0Response {
    AlterPartitionV0Response {
        throttle_time_ms: 5,
        error_code: 0,
        topics: vec![AlterPartitionV0TopicResponse {
            name: "foo".into(),
            partitions: vec![
                AlterPartitionV0PartitionResponse {
                    partition_index: 1,
                    error_code: 0,
                    leader_id: 2,
                    leader_epoch: 7,
                    isr: vec![2, 3],
                    leader_recovery_state: 0,
                    partition_epoch: 12,
                },
                AlterPartitionV0PartitionResponse {
                    partition_index: 4,
                    error_code: 3,
                    ..Default::default()
                },
            ],
        }],
    }
}

#[test]
fn decodes_and_encodes_kafkas_bytes() {
    for version in 0..=1 {
        let bytes = golden("AlterPartitionRequest", version);
        let decoded = decode_request(ApiKey::AlterPartition, version, &bytes)
            .expect("a legacy version")
            .expect("decodes");
        let decoded = decoded.downcast::<AlterPartitionV0Request>().unwrap();
        assert_eq!(*decoded, request(version), "v{version}");
        let encoded = encode_response(ApiKey::AlterPartition, version, &response())
            .expect("a legacy version")
            .expect("encodes");
        assert_eq!(
            encoded,
            golden("AlterPartitionResponse", version),
            "v{version}"
        );
    }
    assert!(decode_request(ApiKey::AlterPartition, 2, &[]).is_none());
}

#[test]
fn refuses_cut_and_hostile_input() {
    for version in 0..=1 {
        let bytes = golden("AlterPartitionRequest", version);
        for cut in 0..bytes.len() {
            let r = decode_request(ApiKey::AlterPartition, version, &bytes[..cut]).unwrap();
            assert!(r.is_err(), "v{version} cut at {cut}");
        }
    }
    // broker id, epoch, then a topics count of 2^28 with nothing after it.
    let mut hostile = vec![0u8; 12];
    hostile.extend_from_slice(&[0x80, 0x80, 0x80, 0x80, 0x01]);
    let r = decode_request(ApiKey::AlterPartition, 0, &hostile).unwrap();
    assert!(r.unwrap_err().contains("tried to allocate"));
    // A varint longer than five bytes.
    let mut long = vec![0u8; 12];
    long.extend_from_slice(&[0xff; 6]);
    assert!(decode_request(ApiKey::AlterPartition, 0, &long)
        .unwrap()
        .is_err());
}
