//! Golden vectors from Kafka 3.9.1's own serializers (testdata/golden.txt,
//! made by tests/legacy_golden/LegacyVectors.java, whose samples the
//! builders here match), plus truncation and hostile-count checks.

use std::any::Any;

use kafka_protocol::messages::create_topics_request::{
    CreatableReplicaAssignment, CreatableTopic, CreatableTopicConfig,
};
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult,
};
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponsePartition, OffsetFetchResponseTopic,
};
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

use super::*;

const TOPIC_2: &str = "tøpic";

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn tn(v: &str) -> TopicName {
    TopicName(s(v))
}

fn golden(name: &str, version: i16) -> Vec<u8> {
    super::golden_vector(include_str!("testdata/golden.txt"), name, version)
}

fn decode<M: 'static>(key: ApiKey, version: i16, bytes: &[u8]) -> M {
    *decode_request(key, version, bytes)
        .expect("legacy version")
        .expect("decodes")
        .downcast::<M>()
        .expect("type")
}

fn encode(key: ApiKey, version: i16, body: &dyn Any) -> Vec<u8> {
    encode_response(key, version, body)
        .expect("legacy version and type")
        .expect("encodes")
}

#[test]
fn list_offsets_v0() {
    let r: ListOffsetsV0Request = decode(ApiKey::ListOffsets, 0, &golden("ListOffsetsRequest", 0));
    let part = |partition_index, timestamp, max_num_offsets| ListOffsetsV0Partition {
        partition_index,
        timestamp,
        max_num_offsets,
    };
    let want = ListOffsetsV0Request {
        replica_id: -1,
        topics: vec![
            ListOffsetsV0Topic {
                name: "foo".into(),
                partitions: vec![part(0, -1, 10), part(3, 1_700_000_000_000, 1)],
            },
            ListOffsetsV0Topic {
                name: TOPIC_2.into(),
                partitions: vec![],
            },
        ],
    };
    assert_eq!(r, want);
    let resp = ListOffsetsV0Response {
        topics: vec![ListOffsetsV0TopicResponse {
            name: "foo".into(),
            partitions: vec![
                ListOffsetsV0PartitionResponse {
                    partition_index: 0,
                    error_code: 0,
                    old_style_offsets: vec![42, 7, 0],
                },
                ListOffsetsV0PartitionResponse {
                    partition_index: 3,
                    error_code: 3,
                    old_style_offsets: vec![],
                },
            ],
        }],
    };
    assert_eq!(
        encode(ApiKey::ListOffsets, 0, &resp),
        golden("ListOffsetsResponse", 0)
    );
}

fn create_topics_sample(version: i16) -> CreateTopicsRequest {
    CreateTopicsRequest::default()
        .with_timeout_ms(30000)
        .with_validate_only(version >= 1)
        .with_topics(vec![
            CreatableTopic::default()
                .with_name(tn("foo"))
                .with_num_partitions(3)
                .with_replication_factor(1)
                .with_configs(vec![
                    CreatableTopicConfig::default()
                        .with_name(s("cleanup.policy"))
                        .with_value(Some(s("compact"))),
                    CreatableTopicConfig::default()
                        .with_name(s("retention.ms"))
                        .with_value(None),
                ]),
            CreatableTopic::default()
                .with_name(tn(TOPIC_2))
                .with_num_partitions(-1)
                .with_replication_factor(-1)
                .with_assignments(vec![CreatableReplicaAssignment::default()
                    .with_partition_index(0)
                    .with_broker_ids(vec![BrokerId(1), BrokerId(2)])]),
        ])
}

#[test]
fn create_topics_v0_v1() {
    for v in 0..=1 {
        let r: CreateTopicsRequest =
            decode(ApiKey::CreateTopics, v, &golden("CreateTopicsRequest", v));
        assert_eq!(r, create_topics_sample(v), "v{v}");
        let message = (v >= 1).then(|| s("Topic 'tøpic' already exists."));
        let resp = CreateTopicsResponse::default().with_topics(vec![
            CreatableTopicResult::default()
                .with_name(tn("foo"))
                .with_error_message(None),
            CreatableTopicResult::default()
                .with_name(tn(TOPIC_2))
                .with_error_code(36)
                .with_error_message(message),
        ]);
        assert_eq!(
            encode(ApiKey::CreateTopics, v, &resp),
            golden("CreateTopicsResponse", v),
            "v{v}"
        );
    }
}

#[test]
fn delete_topics_v0() {
    let r: DeleteTopicsRequest = decode(ApiKey::DeleteTopics, 0, &golden("DeleteTopicsRequest", 0));
    assert_eq!(r.topic_names, vec![tn("foo"), tn(TOPIC_2)]);
    assert_eq!(r.timeout_ms, 15000);
    let resp = DeleteTopicsResponse::default()
        .with_throttle_time_ms(5)
        .with_responses(vec![
            DeletableTopicResult::default().with_name(Some(tn("foo"))),
            DeletableTopicResult::default()
                .with_name(Some(tn(TOPIC_2)))
                .with_error_code(3),
        ]);
    assert_eq!(
        encode(ApiKey::DeleteTopics, 0, &resp),
        golden("DeleteTopicsResponse", 0)
    );
}

#[test]
fn offset_commit_v0_v1() {
    for v in 0..=1 {
        let r: OffsetCommitRequest =
            decode(ApiKey::OffsetCommit, v, &golden("OffsetCommitRequest", v));
        let want = OffsetCommitRequest::default()
            .with_group_id(GroupId(s("grp")))
            .with_generation_id_or_member_epoch(if v >= 1 { 5 } else { -1 })
            .with_member_id(s(if v >= 1 { "member-1" } else { "" }))
            .with_topics(vec![OffsetCommitRequestTopic::default()
                .with_name(tn("foo"))
                .with_partitions(vec![
                    OffsetCommitRequestPartition::default()
                        .with_partition_index(0)
                        .with_committed_offset(100)
                        .with_committed_metadata(Some(s("meta"))),
                    OffsetCommitRequestPartition::default()
                        .with_partition_index(1)
                        .with_committed_offset(7)
                        .with_committed_metadata(None),
                ])]);
        assert_eq!(r, want, "v{v}");
        let resp =
            OffsetCommitResponse::default().with_topics(vec![OffsetCommitResponseTopic::default()
                .with_name(tn("foo"))
                .with_partitions(vec![
                    OffsetCommitResponsePartition::default().with_partition_index(0),
                    OffsetCommitResponsePartition::default()
                        .with_partition_index(1)
                        .with_error_code(3),
                ])]);
        assert_eq!(
            encode(ApiKey::OffsetCommit, v, &resp),
            golden("OffsetCommitResponse", v),
            "v{v}"
        );
    }
}

#[test]
fn offset_fetch_v0() {
    let r: OffsetFetchRequest = decode(ApiKey::OffsetFetch, 0, &golden("OffsetFetchRequest", 0));
    let want = OffsetFetchRequest::default()
        .with_group_id(GroupId(s("grp")))
        .with_topics(Some(vec![OffsetFetchRequestTopic::default()
            .with_name(tn("foo"))
            .with_partition_indexes(vec![0, 1])]));
    assert_eq!(r, want);
    let part = |p, o| {
        OffsetFetchResponsePartition::default()
            .with_partition_index(p)
            .with_committed_offset(o)
            .with_metadata(Some(s("")))
    };
    let resp = OffsetFetchResponse::default()
        .with_topics(vec![OffsetFetchResponseTopic::default()
            .with_name(tn("foo"))
            .with_partitions(vec![part(0, 100), part(1, -1)])]);
    assert_eq!(
        encode(ApiKey::OffsetFetch, 0, &resp),
        golden("OffsetFetchResponse", 0)
    );
}

#[test]
fn offset_for_leader_epoch_v0_v1() {
    for v in 0..=1 {
        let r: OffsetForLeaderEpochRequest = decode(
            ApiKey::OffsetForLeaderEpoch,
            v,
            &golden("OffsetForLeaderEpochRequest", v),
        );
        let part = |p, e| {
            OffsetForLeaderPartition::default()
                .with_partition(p)
                .with_current_leader_epoch(-1)
                .with_leader_epoch(e)
        };
        let want = OffsetForLeaderEpochRequest::default()
            .with_replica_id(BrokerId(-2))
            .with_topics(vec![OffsetForLeaderTopic::default()
                .with_topic(tn("foo"))
                .with_partitions(vec![part(0, 3), part(2, 0)])]);
        assert_eq!(r, want, "v{v}");
        let resp = OffsetForLeaderEpochResponse::default().with_topics(vec![
            OffsetForLeaderTopicResult::default()
                .with_topic(tn("foo"))
                .with_partitions(vec![
                    EpochEndOffset::default()
                        .with_partition(0)
                        .with_leader_epoch(if v >= 1 { 3 } else { -1 })
                        .with_end_offset(55),
                    EpochEndOffset::default()
                        .with_error_code(3)
                        .with_partition(2)
                        .with_leader_epoch(-1)
                        .with_end_offset(-1),
                ]),
        ]);
        assert_eq!(
            encode(ApiKey::OffsetForLeaderEpoch, v, &resp),
            golden("OffsetForLeaderEpochResponse", v),
            "v{v}"
        );
    }
}

#[test]
fn describe_configs_v0() {
    let r: DescribeConfigsRequest = decode(
        ApiKey::DescribeConfigs,
        0,
        &golden("DescribeConfigsRequest", 0),
    );
    let want = DescribeConfigsRequest::default().with_resources(vec![
        DescribeConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(s("foo"))
            .with_configuration_keys(Some(vec![s("cleanup.policy"), s("retention.ms")])),
        DescribeConfigsResource::default()
            .with_resource_type(4)
            .with_resource_name(s("1"))
            .with_configuration_keys(None),
    ]);
    assert_eq!(r, want);
    // ConfigSource and synonyms are dropped: v0 carries neither.
    let resp = DescribeConfigsResponse::default().with_results(vec![
        DescribeConfigsResult::default()
            .with_error_message(None)
            .with_resource_type(2)
            .with_resource_name(s("foo"))
            .with_configs(vec![
                DescribeConfigsResourceResult::default()
                    .with_name(s("cleanup.policy"))
                    .with_value(Some(s("compact")))
                    .with_config_source(1),
                DescribeConfigsResourceResult::default()
                    .with_name(s("secret"))
                    .with_value(None)
                    .with_read_only(true)
                    .with_is_sensitive(true)
                    .with_config_source(5),
            ]),
        DescribeConfigsResult::default()
            .with_error_code(3)
            .with_error_message(Some(s("Topic tøpic does not exist.")))
            .with_resource_type(2)
            .with_resource_name(s(TOPIC_2)),
    ]);
    assert_eq!(
        encode(ApiKey::DescribeConfigs, 0, &resp),
        golden("DescribeConfigsResponse", 0)
    );
}

const REQUESTS: &[(ApiKey, i16, &str)] = &[
    (ApiKey::ListOffsets, 0, "ListOffsetsRequest"),
    (ApiKey::CreateTopics, 0, "CreateTopicsRequest"),
    (ApiKey::CreateTopics, 1, "CreateTopicsRequest"),
    (ApiKey::DeleteTopics, 0, "DeleteTopicsRequest"),
    (ApiKey::OffsetCommit, 0, "OffsetCommitRequest"),
    (ApiKey::OffsetCommit, 1, "OffsetCommitRequest"),
    (ApiKey::OffsetFetch, 0, "OffsetFetchRequest"),
    (
        ApiKey::OffsetForLeaderEpoch,
        0,
        "OffsetForLeaderEpochRequest",
    ),
    (
        ApiKey::OffsetForLeaderEpoch,
        1,
        "OffsetForLeaderEpochRequest",
    ),
    (ApiKey::DescribeConfigs, 0, "DescribeConfigsRequest"),
];

#[test]
fn every_truncation_is_an_error() {
    for &(key, v, name) in REQUESTS {
        let full = golden(name, v);
        for cut in 0..full.len() {
            let r = decode_request(key, v, &full[..cut]).expect("legacy version");
            assert!(r.is_err(), "{name} v{v} cut at {cut} decoded");
        }
    }
}

#[test]
fn huge_counts_are_refused_before_allocating() {
    // A topics count of i32::MAX with four bytes behind it.
    for &(key, v, _) in REQUESTS {
        let mut body = Vec::new();
        match key {
            ApiKey::ListOffsets => body.extend_from_slice(&(-1i32).to_be_bytes()),
            ApiKey::OffsetCommit | ApiKey::OffsetFetch => {
                body.extend_from_slice(&[0, 1, b'g']);
                if key == ApiKey::OffsetCommit && v == 1 {
                    body.extend_from_slice(&[0, 0, 0, 1, 0, 0]);
                }
            }
            _ => {}
        }
        body.extend_from_slice(&i32::MAX.to_be_bytes());
        body.extend_from_slice(&[0, 0, 0, 0]);
        let err = decode_request(key, v, &body).unwrap().unwrap_err();
        assert!(err.contains("tried to allocate"), "{key:?} v{v}: {err}");
    }
}

#[test]
fn only_versions_below_the_crate_are_legacy() {
    assert!(is_legacy(ApiKey::ListOffsets, 0));
    assert!(!is_legacy(ApiKey::ListOffsets, 1));
    assert!(is_legacy(ApiKey::OffsetCommit, 1));
    assert!(!is_legacy(ApiKey::OffsetCommit, 2));
    assert!(is_legacy(ApiKey::Fetch, 3));
    assert!(!is_legacy(ApiKey::Fetch, 4));
    assert!(is_legacy(ApiKey::Produce, 2));
    assert!(!is_legacy(ApiKey::Produce, 3));
    assert!(decode_request(ApiKey::Metadata, 0, &[]).is_none());
    // The wrong struct for a legacy version is not encoded.
    assert!(encode_response(ApiKey::OffsetCommit, 0, &OffsetFetchResponse::default()).is_none());
}
