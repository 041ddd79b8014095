//! Round trips at every version, golden vectors from Kafka 3.9.1's own
//! serializers (testdata/golden.txt, made by
//! tests/inter_broker_golden/GoldenVectors.java, whose samples the builders
//! below mirror), and hostile input.

use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Message, Request};

use super::*;

const TOPIC_A: uuid::Uuid = uuid::Uuid::from_u64_pair(0x0123456789abcdef, 0x1122334455667788);
const TOPIC_B: uuid::Uuid = uuid::Uuid::from_u64_pair(0x7edcba9876543210, 0x0f0e0d0c0b0a0908);
/// Multi-byte UTF-8, so string lengths are byte counts, not char counts.
const TOPIC_2: &str = "t\u{f8}pic";

fn s(text: &str) -> String {
    text.to_string()
}

fn lisr_state(topic: &str, index: i32, v: i16) -> LeaderAndIsrPartitionState {
    LeaderAndIsrPartitionState {
        topic_name: if v <= 1 { s(topic) } else { String::new() },
        partition_index: index,
        controller_epoch: 17,
        leader: 1,
        leader_epoch: 9 + index,
        isr: vec![1, 2],
        partition_epoch: 42,
        replicas: vec![1, 2, 3],
        adding_replicas: if v >= 3 { vec![3] } else { vec![] },
        removing_replicas: if v >= 3 { vec![4] } else { vec![] },
        is_new: v >= 1,
        leader_recovery_state: if v >= 6 { 1 } else { 0 },
    }
}

fn leader_and_isr_request(v: i16) -> LeaderAndIsrRequest {
    let mut request = LeaderAndIsrRequest {
        controller_id: 3,
        is_kraft_controller: v >= 7,
        controller_epoch: 17,
        broker_epoch: if v >= 2 { 123_456_789_012 } else { -1 },
        type_: if v >= 5 { 2 } else { 0 },
        live_leaders: vec![
            LeaderAndIsrLiveLeader {
                broker_id: 1,
                host_name: s("broker1.example.com"),
                port: 9092,
            },
            LeaderAndIsrLiveLeader {
                broker_id: 2,
                host_name: s("h\u{f6}st-2"),
                port: 9093,
            },
        ],
        ..Default::default()
    };
    if v <= 1 {
        request.ungrouped_partition_states = vec![
            lisr_state("foo", 0, v),
            lisr_state("foo", 1, v),
            lisr_state(TOPIC_2, 0, v),
        ];
    } else {
        let id = |uuid| if v >= 5 { uuid } else { uuid::Uuid::nil() };
        request.topic_states = vec![
            LeaderAndIsrTopicState {
                topic_name: s("foo"),
                topic_id: id(TOPIC_A),
                partition_states: vec![lisr_state("foo", 0, v), lisr_state("foo", 1, v)],
            },
            LeaderAndIsrTopicState {
                topic_name: s(TOPIC_2),
                topic_id: id(TOPIC_B),
                partition_states: vec![lisr_state(TOPIC_2, 0, v)],
            },
        ];
    }
    request
}

fn lisr_error(topic: &str, index: i32, error_code: i16) -> LeaderAndIsrPartitionError {
    LeaderAndIsrPartitionError {
        topic_name: s(topic),
        partition_index: index,
        error_code,
    }
}

fn leader_and_isr_response(v: i16) -> LeaderAndIsrResponse {
    let mut response = LeaderAndIsrResponse {
        error_code: 11,
        ..Default::default()
    };
    if v <= 4 {
        response.partition_errors = vec![lisr_error("foo", 0, 0), lisr_error(TOPIC_2, 1, 75)];
    } else {
        response.topics = vec![
            LeaderAndIsrTopicError {
                topic_id: TOPIC_A,
                partition_errors: vec![lisr_error("", 0, 0), lisr_error("", 1, 75)],
            },
            LeaderAndIsrTopicError {
                topic_id: TOPIC_B,
                partition_errors: vec![lisr_error("", 2, 6)],
            },
        ];
    }
    response
}

fn um_state(topic: &str, index: i32, v: i16) -> UpdateMetadataPartitionState {
    UpdateMetadataPartitionState {
        topic_name: if v <= 4 { s(topic) } else { String::new() },
        partition_index: index,
        controller_epoch: 16,
        leader: 2,
        leader_epoch: 5 + index,
        isr: vec![2, 1],
        zk_version: 77,
        replicas: vec![2, 1, 3],
        offline_replicas: if v >= 4 { vec![3] } else { vec![] },
    }
}

fn um_broker(id: i32, host: &str, rack: Option<&str>, v: i16) -> UpdateMetadataBroker {
    let endpoint = |port, listener: &str, security_protocol| UpdateMetadataEndpoint {
        port,
        host: s(host),
        listener: if v >= 3 { s(listener) } else { String::new() },
        security_protocol,
    };
    let mut broker = UpdateMetadataBroker {
        id,
        ..Default::default()
    };
    if v == 0 {
        broker.v0_host = s(host);
        broker.v0_port = 9092;
    } else {
        broker.endpoints = vec![endpoint(9092, "PLAINTEXT", 0), endpoint(9093, "SSL", 1)];
    }
    if v >= 2 {
        broker.rack = rack.map(s);
    }
    broker
}

fn update_metadata_request(v: i16) -> UpdateMetadataRequest {
    let mut request = UpdateMetadataRequest {
        controller_id: 3,
        is_kraft_controller: v >= 8,
        type_: if v >= 8 { 2 } else { 0 },
        controller_epoch: 17,
        broker_epoch: if v >= 5 { 98765 } else { -1 },
        live_brokers: vec![
            um_broker(1, "host1", Some("rack-a"), v),
            um_broker(2, "h\u{f6}st-2", None, v),
        ],
        ..Default::default()
    };
    if v <= 4 {
        request.ungrouped_partition_states = vec![
            um_state("foo", 0, v),
            um_state("foo", 1, v),
            um_state(TOPIC_2, 0, v),
        ];
    } else {
        let id = |uuid| if v >= 7 { uuid } else { uuid::Uuid::nil() };
        request.topic_states = vec![
            UpdateMetadataTopicState {
                topic_name: s("foo"),
                topic_id: id(TOPIC_A),
                partition_states: vec![um_state("foo", 0, v), um_state("foo", 1, v)],
            },
            UpdateMetadataTopicState {
                topic_name: s(TOPIC_2),
                topic_id: id(TOPIC_B),
                partition_states: vec![um_state(TOPIC_2, 0, v)],
            },
        ];
    }
    request
}

fn stop_replica_request(v: i16) -> StopReplicaRequest {
    let state = |partition_index, leader_epoch, delete_partition| StopReplicaPartitionState {
        partition_index,
        leader_epoch,
        delete_partition,
    };
    let mut request = StopReplicaRequest {
        controller_id: 3,
        is_kraft_controller: v >= 4,
        controller_epoch: 17,
        broker_epoch: if v >= 1 { 555 } else { -1 },
        delete_partitions: v <= 2,
        ..Default::default()
    };
    match v {
        0 => {
            request.ungrouped_partitions = vec![
                StopReplicaPartitionV0 {
                    topic_name: s("foo"),
                    partition_index: 0,
                },
                StopReplicaPartitionV0 {
                    topic_name: s(TOPIC_2),
                    partition_index: 2,
                },
            ]
        }
        1 | 2 => {
            request.topics = vec![
                StopReplicaTopicV1 {
                    name: s("foo"),
                    partition_indexes: vec![0, 1],
                },
                StopReplicaTopicV1 {
                    name: s(TOPIC_2),
                    partition_indexes: vec![2],
                },
            ]
        }
        _ => {
            request.topic_states = vec![
                StopReplicaTopicState {
                    topic_name: s("foo"),
                    partition_states: vec![state(0, 7, true), state(1, -2, false)],
                },
                StopReplicaTopicState {
                    topic_name: s(TOPIC_2),
                    partition_states: vec![state(2, 3, true)],
                },
            ]
        }
    }
    request
}

fn stop_replica_response(_v: i16) -> StopReplicaResponse {
    let error = |topic: &str, partition_index, error_code| StopReplicaPartitionError {
        topic_name: s(topic),
        partition_index,
        error_code,
    };
    StopReplicaResponse {
        error_code: 11,
        partition_errors: vec![error("foo", 0, 0), error(TOPIC_2, 2, 56)],
    }
}

fn controlled_shutdown_request(v: i16) -> ControlledShutdownRequest {
    ControlledShutdownRequest {
        broker_id: 2,
        broker_epoch: if v >= 2 { 424_242 } else { -1 },
    }
}

fn controlled_shutdown_response(_v: i16) -> ControlledShutdownResponse {
    let partition = |topic: &str, partition_index| RemainingPartition {
        topic_name: s(topic),
        partition_index,
    };
    ControlledShutdownResponse {
        error_code: 7,
        remaining_partitions: vec![partition("foo", 0), partition(TOPIC_2, 2)],
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Any {
    Request(InterBrokerRequest),
    Response(InterBrokerResponse),
}

struct Kind {
    name: &'static str,
    api_key: i16,
    is_response: bool,
    sample: fn(i16) -> Any,
}

const fn kind(name: &'static str, api_key: i16, is_response: bool, sample: fn(i16) -> Any) -> Kind {
    Kind {
        name,
        api_key,
        is_response,
        sample,
    }
}

use InterBrokerRequest as Rq;
use InterBrokerResponse as Rs;

const KINDS: [Kind; 8] = [
    kind("LeaderAndIsrRequest", 4, false, |v| {
        Any::Request(Rq::LeaderAndIsr(leader_and_isr_request(v)))
    }),
    kind("LeaderAndIsrResponse", 4, true, |v| {
        Any::Response(Rs::LeaderAndIsr(leader_and_isr_response(v)))
    }),
    kind("StopReplicaRequest", 5, false, |v| {
        Any::Request(Rq::StopReplica(stop_replica_request(v)))
    }),
    kind("StopReplicaResponse", 5, true, |v| {
        Any::Response(Rs::StopReplica(stop_replica_response(v)))
    }),
    kind("UpdateMetadataRequest", 6, false, |v| {
        Any::Request(Rq::UpdateMetadata(update_metadata_request(v)))
    }),
    kind("UpdateMetadataResponse", 6, true, |_| {
        Any::Response(Rs::UpdateMetadata(UpdateMetadataResponse {
            error_code: 11,
        }))
    }),
    kind("ControlledShutdownRequest", 7, false, |v| {
        Any::Request(Rq::ControlledShutdown(controlled_shutdown_request(v)))
    }),
    kind("ControlledShutdownResponse", 7, true, |v| {
        Any::Response(Rs::ControlledShutdown(controlled_shutdown_response(v)))
    }),
];

impl Kind {
    fn highest(&self) -> i16 {
        match self.api_key {
            4 => LEADER_AND_ISR_VERSIONS.1,
            5 => STOP_REPLICA_VERSIONS.1,
            6 => UPDATE_METADATA_VERSIONS.1,
            _ => CONTROLLED_SHUTDOWN_VERSIONS.1,
        }
    }

    fn versions(&self) -> std::ops::RangeInclusive<i16> {
        0..=self.highest()
    }

    fn decode(&self, bytes: &[u8], v: i16) -> Result<Any, String> {
        if self.is_response {
            decode_response(self.api_key, v, bytes).map(Any::Response)
        } else {
            decode_request(self.api_key, v, bytes).map(Any::Request)
        }
    }
}

fn encode(message: &Any, v: i16) -> Result<Vec<u8>, String> {
    match message {
        Any::Request(m) => m.encode_to_vec(v),
        Any::Response(m) => m.encode_to_vec(v),
    }
}

fn size<M: Encodable>(m: &M, v: i16) -> usize {
    m.compute_size(v).expect("compute_size")
}

fn compute_size(message: &Any, v: i16) -> usize {
    match message {
        Any::Request(Rq::LeaderAndIsr(m)) => size(m, v),
        Any::Request(Rq::StopReplica(m)) => size(m, v),
        Any::Request(Rq::UpdateMetadata(m)) => size(m, v),
        Any::Request(Rq::ControlledShutdown(m)) => size(m, v),
        Any::Response(Rs::LeaderAndIsr(m)) => size(m, v),
        Any::Response(Rs::StopReplica(m)) => size(m, v),
        Any::Response(Rs::UpdateMetadata(m)) => size(m, v),
        Any::Response(Rs::ControlledShutdown(m)) => size(m, v),
    }
}

fn from_hex(hex: &str) -> Vec<u8> {
    assert!(hex.len().is_multiple_of(2), "odd hex length");
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex digit"))
        .collect()
}

#[test]
fn every_version_round_trips() {
    let mut checked = 0;
    for kind in &KINDS {
        for v in kind.versions() {
            let sample = (kind.sample)(v);
            let bytes = encode(&sample, v).unwrap_or_else(|e| panic!("{} v{v}: {e}", kind.name));
            assert_eq!(compute_size(&sample, v), bytes.len(), "{} v{v}", kind.name);
            let api_key = match &sample {
                Any::Request(m) => m.api_key(),
                Any::Response(m) => m.api_key(),
            };
            assert_eq!(api_key, kind.api_key);
            assert_eq!(kind.decode(&bytes, v), Ok(sample), "{} v{v}", kind.name);
            checked += 1;
        }
    }
    assert_eq!(checked, 2 * (8 + 5 + 9 + 4));
}

#[test]
fn golden_vectors_from_kafka_3_9_1() {
    let golden = include_str!("testdata/golden.txt");
    let mut plain = 0;
    let mut tagged = 0;
    for line in golden
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let fields: Vec<&str> = line.split(' ').collect();
        let [name, version, hex] = fields[..] else {
            panic!("bad golden line {line}");
        };
        let v: i16 = version.parse().expect("version");
        let bytes = from_hex(hex);
        let (base, with_unknown_tags) = match name.strip_suffix("+unknown_tags") {
            Some(base) => (base, true),
            None => (name, false),
        };
        let kind = KINDS.iter().find(|k| k.name == base).expect("known kind");
        let sample = (kind.sample)(v);
        assert_eq!(kind.decode(&bytes, v), Ok(sample.clone()), "{name} v{v}");
        if with_unknown_tags {
            // Skipped tags leave the struct as if they were never sent.
            assert!(bytes.len() > encode(&sample, v).expect("encode").len());
            tagged += 1;
        } else {
            assert_eq!(encode(&sample, v), Ok(bytes), "{name} v{v}");
            plain += 1;
        }
    }
    assert_eq!(plain, 2 * (8 + 5 + 9 + 4), "a version is missing");
    assert_eq!(tagged, KINDS.len());
}

#[test]
fn every_truncation_is_an_error() {
    for kind in &KINDS {
        for v in kind.versions() {
            let bytes = encode(&(kind.sample)(v), v).expect("encode");
            for cut in 0..bytes.len() {
                assert!(
                    kind.decode(&bytes[..cut], v).is_err(),
                    "{} v{v} decoded from {cut} of {} bytes",
                    kind.name,
                    bytes.len()
                );
            }
        }
    }
}

/// xorshift64*, so the hostile inputs are the same on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// A decode that succeeds must give a message that encodes and decodes to
/// itself.
fn check_hostile(kind: &Kind, bytes: &[u8], v: i16) -> bool {
    let Ok(message) = kind.decode(bytes, v) else {
        return false;
    };
    let again = encode(&message, v).expect("a decoded message encodes");
    assert_eq!(kind.decode(&again, v), Ok(message), "{} v{v}", kind.name);
    true
}

#[test]
fn random_and_corrupted_bytes_never_panic() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let (mut decoded, mut total) = (0, 0);
    for kind in &KINDS {
        for v in kind.versions() {
            for _ in 0..300 {
                let len = rng.below(96);
                let bytes: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
                decoded += usize::from(check_hostile(kind, &bytes, v));
                total += 1;
            }
            let sample = encode(&(kind.sample)(v), v).expect("encode");
            for _ in 0..300 {
                let mut bytes = sample.clone();
                for _ in 0..1 + rng.below(3) {
                    let at = rng.below(bytes.len());
                    bytes[at] = match rng.below(3) {
                        0 => 0xff,
                        1 => 0,
                        _ => rng.next() as u8,
                    };
                }
                decoded += usize::from(check_hostile(kind, &bytes, v));
                total += 1;
            }
        }
    }
    // Corrupting a length or count usually breaks the message; corrupting a
    // number usually does not, so both outcomes must be well represented.
    assert!(
        decoded > total / 10 && decoded < total,
        "{decoded} of {total}"
    );
    eprintln!("hostile inputs: {decoded} of {total} decoded");
}

#[test]
fn huge_counts_are_refused_before_allocating() {
    // LeaderAndIsr v0: controller id, epoch, then 2^31-1 partition states.
    let mut body = vec![0, 0, 0, 1, 0, 0, 0, 1, 0x7f, 0xff, 0xff, 0xff];
    body.extend_from_slice(&[0; 8]);
    let err = decode_request(4, 0, &body).expect_err("count exceeds bytes");
    assert!(err.contains("tried to allocate"), "{err}");
    // UpdateMetadata v6 (compact): a 4-billion-element varint count.
    let mut body = vec![0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0];
    body.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0x0f]);
    assert!(decode_request(6, 6, &body).is_err());
    // A six-byte varint.
    body.truncate(16);
    body.extend_from_slice(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x01]);
    assert!(decode_request(6, 6, &body).is_err());
    // StopReplicaResponse v0: a 32767-byte topic name with 2 bytes left.
    let body = [0, 0, 0, 0, 0, 1, 0x7f, 0xff, 0, 0];
    let err = decode_response(5, 0, &body).expect_err("string past the end");
    assert!(err.contains("ends early"), "{err}");
}

#[test]
fn null_for_non_nullable_fields_is_an_error() {
    // StopReplicaResponse v0, one partition error whose topic name is null.
    let body = [0, 0, 0, 0, 0, 1, 0xff, 0xff, 0, 0, 0, 0, 0, 0];
    let err = decode_response(5, 0, &body).expect_err("null topic name");
    assert!(err.contains("topicName"), "{err}");
    // ControlledShutdownResponse v3, null (compact 0) partition array.
    let err = decode_response(7, 3, &[0, 0, 0, 0]).expect_err("null array");
    assert!(err.contains("remainingPartitions"), "{err}");
}

#[test]
fn null_and_empty_rack_are_distinct() {
    for v in [2, 6] {
        let mut request = update_metadata_request(v);
        request.live_brokers[0].rack = Some(String::new());
        let back = re_decode(&request, v);
        assert_eq!(back.live_brokers[0].rack, Some(String::new()));
        assert_eq!(back.live_brokers[1].rack, None);
    }
    // Before v2 there is no rack; it decodes to Kafka's default, "".
    let back = re_decode(&update_metadata_request(1), 1);
    assert!(back
        .live_brokers
        .iter()
        .all(|b| b.rack.as_deref() == Some("")));
}

fn encode_err<M: Encodable>(m: &M, v: i16) -> String {
    let mut out = Vec::new();
    m.encode(&mut out, v)
        .expect_err("must not encode")
        .to_string()
}

fn re_decode<M: Encodable + Decodable>(m: &M, v: i16) -> M {
    let mut out = Vec::new();
    m.encode(&mut out, v).expect("encode");
    M::decode(&mut out.as_slice(), v).expect("decode")
}

#[test]
fn non_ignorable_fields_a_version_lacks_are_errors() {
    let lisr = |v| leader_and_isr_request(v);
    let err = encode_err(
        &LeaderAndIsrRequest {
            type_: 1,
            ..lisr(4)
        },
        4,
    );
    assert!(err.contains("non-default type at version 4"), "{err}");
    let err = encode_err(
        &LeaderAndIsrRequest {
            is_kraft_controller: true,
            ..lisr(6)
        },
        6,
    );
    assert!(err.contains("isKRaftController"), "{err}");
    let mut recovering = lisr(5);
    recovering.topic_states[0].partition_states[0].leader_recovery_state = 1;
    assert!(encode_err(&recovering, 5).contains("leaderRecoveryState"));
    assert!(encode_err(&lisr(1), 2).contains("ungroupedPartitionStates"));
    assert!(encode_err(&lisr(2), 1).contains("topicStates"));
    assert!(encode_err(&leader_and_isr_response(4), 5).contains("partitionErrors"));
    assert!(encode_err(&leader_and_isr_response(5), 4).contains("topics"));

    let um = |v| update_metadata_request(v);
    assert!(encode_err(&UpdateMetadataRequest { type_: 1, ..um(7) }, 7).contains("type"));
    let err = encode_err(
        &UpdateMetadataRequest {
            is_kraft_controller: true,
            ..um(7)
        },
        7,
    );
    assert!(err.contains("isKRaftController"), "{err}");
    assert!(encode_err(&um(4), 5).contains("ungroupedPartitionStates"));
    assert!(encode_err(&um(5), 4).contains("topicStates"));

    let sr = |v| stop_replica_request(v);
    assert!(encode_err(
        &StopReplicaRequest {
            delete_partitions: true,
            ..sr(3)
        },
        3
    )
    .contains("deletePartitions"));
    let err = encode_err(
        &StopReplicaRequest {
            is_kraft_controller: true,
            ..sr(3)
        },
        3,
    );
    assert!(err.contains("isKRaftController"), "{err}");
    assert!(encode_err(&sr(0), 1).contains("ungroupedPartitions"));
    assert!(encode_err(
        &StopReplicaRequest {
            delete_partitions: false,
            ..sr(2)
        },
        3
    )
    .contains("topics"));
    assert!(encode_err(&sr(3), 2).contains("topicStates"));
}

#[test]
fn ignorable_fields_a_version_lacks_are_dropped() {
    let mut lisr = LeaderAndIsrRequest {
        type_: 0,
        ..leader_and_isr_request(5)
    };
    lisr.topic_states[0].partition_states[0].topic_name = s("ignored");
    let back = re_decode(&lisr, 2);
    assert_eq!(back.broker_epoch, lisr.broker_epoch);
    assert_eq!(back.topic_states[0].topic_id, uuid::Uuid::nil());
    assert!(back.topic_states[0].partition_states[0]
        .topic_name
        .is_empty());
    assert!(back.topic_states[0].partition_states[0]
        .adding_replicas
        .is_empty());
    let back = re_decode(
        &LeaderAndIsrRequest {
            type_: 0,
            ..leader_and_isr_request(1)
        },
        0,
    );
    assert_eq!(back.broker_epoch, -1);
    assert!(!back.ungrouped_partition_states[0].is_new);

    let mut um = update_metadata_request(1);
    um.live_brokers[0].v0_host = s("ignored");
    um.live_brokers[0].rack = Some(s("ignored"));
    um.ungrouped_partition_states[0].offline_replicas = vec![9];
    let back = re_decode(&um, 1);
    assert!(back.live_brokers[0].v0_host.is_empty());
    assert_eq!(back.live_brokers[0].rack.as_deref(), Some(""));
    assert!(back.ungrouped_partition_states[0]
        .offline_replicas
        .is_empty());
    let back = re_decode(&update_metadata_request(3), 0);
    assert!(back.live_brokers[0].endpoints.is_empty());
    assert!(
        re_decode(&update_metadata_request(3), 2).live_brokers[0].endpoints[0]
            .listener
            .is_empty()
    );

    let back = re_decode(
        &StopReplicaRequest {
            broker_epoch: 9,
            ..stop_replica_request(0)
        },
        0,
    );
    assert_eq!(back.broker_epoch, -1);
    let back = re_decode(&controlled_shutdown_request(3), 1);
    assert_eq!(back.broker_epoch, -1);
}

#[test]
fn update_metadata_type_tag() {
    let v7 = encode(&(KINDS[4].sample)(7), 7).expect("encode");
    // The top-level tag section is the last byte (an empty one, 0).
    assert_eq!(v7.last(), Some(&0));
    let with_type = |bytes: &[u8], size_and_value: &[u8]| {
        let mut out = bytes[..bytes.len() - 1].to_vec();
        out.extend_from_slice(&[1, 0]);
        out.extend_from_slice(size_and_value);
        out
    };
    // Kafka refuses tag 0 where Type does not exist.
    let err = decode_request(6, 7, &with_type(&v7, &[1, 2])).expect_err("v7 tag 0");
    assert!(err.contains("tag 0 is not valid for version 7"), "{err}");
    let mut v8 = update_metadata_request(8);
    v8.type_ = 0;
    let bytes = encode(
        &Any::Request(InterBrokerRequest::UpdateMetadata(v8.clone())),
        8,
    )
    .expect("encode");
    let Ok(InterBrokerRequest::UpdateMetadata(back)) =
        decode_request(6, 8, &with_type(&bytes, &[1, 1]))
    else {
        panic!("v8 tag 0");
    };
    assert_eq!(back, UpdateMetadataRequest { type_: 1, ..v8 });
    assert!(decode_request(6, 8, &with_type(&bytes, &[2, 1, 0])).is_err());
}

#[test]
fn unsupported_versions_are_errors() {
    for kind in &KINDS {
        for v in [-1, kind.highest() + 1] {
            assert!(kind.decode(&[0; 64], v).is_err(), "{} v{v}", kind.name);
            assert!(encode(&(kind.sample)(kind.highest()), v).is_err());
        }
    }
    assert!(decode_request(8, 0, &[]).is_err());
    assert!(decode_response(3, 0, &[]).is_err());
    assert!(decode_any(4, 0, &[]).is_err());
    assert!(decode_any(4, 0, &encode(&(KINDS[1].sample)(0), 0).expect("encode")).is_ok());
}

#[test]
fn strings_longer_than_i16_max_bytes_are_refused() {
    let mut request = controlled_shutdown_response(3);
    request.remaining_partitions[0].topic_name = "x".repeat(32_768);
    assert!(encode_err(&request, 3).contains("too long"));
    request.remaining_partitions[0].topic_name = "x".repeat(32_767);
    assert_eq!(re_decode(&request, 0), request);
}

#[test]
fn invalid_utf8_is_replaced_as_kafka_does() {
    // ControlledShutdownResponse v0 with topic name bytes ff fe.
    let body = [0, 0, 0, 0, 0, 1, 0, 2, 0xff, 0xfe, 0, 0, 0, 4];
    let Ok(InterBrokerResponse::ControlledShutdown(response)) = decode_response(7, 0, &body) else {
        panic!("decode");
    };
    assert_eq!(
        response.remaining_partitions[0].topic_name,
        "\u{fffd}\u{fffd}"
    );
}

#[test]
fn partition_states_name_their_topic_in_every_version() {
    let expected = vec![("foo", 0), ("foo", 1), (TOPIC_2, 0)];
    for v in LEADER_AND_ISR_VERSIONS.0..=LEADER_AND_ISR_VERSIONS.1 {
        let request = leader_and_isr_request(v);
        let got: Vec<_> = request
            .partition_states()
            .map(|(topic, state)| (topic, state.partition_index))
            .collect();
        assert_eq!(got, expected, "LeaderAndIsr v{v}");
    }
    for v in UPDATE_METADATA_VERSIONS.0..=UPDATE_METADATA_VERSIONS.1 {
        let request = update_metadata_request(v);
        let got: Vec<_> = request
            .partition_states()
            .map(|(topic, state)| (topic, state.partition_index))
            .collect();
        assert_eq!(got, expected, "UpdateMetadata v{v}");
    }
}

#[test]
fn header_versions_match_kafka_api_keys() {
    // (key, first flexible version, highest), from Kafka 3.9.1's ApiKeys.
    for (key, flexible, highest) in [(4, 4, 7), (5, 2, 4), (6, 6, 8), (7, 3, 3)] {
        for v in 0..=highest {
            let request = if key == 7 && v == 0 {
                0
            } else if v >= flexible {
                2
            } else {
                1
            };
            assert_eq!(request_header_version(key, v), request, "key {key} v{v}");
            assert_eq!(response_header_version(key, v), i16::from(v >= flexible));
        }
    }
    // Other keys come from the kafka-protocol crate: Metadata v9+ is flexible.
    assert_eq!(request_header_version(3, 9), 2);
    assert_eq!(response_header_version(3, 8), 0);
    assert_eq!(request_header_version(-5, 0), -1);
    assert_eq!(LeaderAndIsrRequest::header_version(4), 2);
    assert_eq!(ControlledShutdownRequest::header_version(0), 0);
    assert_eq!(StopReplicaResponse::header_version(2), 1);
    assert_eq!(UpdateMetadataRequest::VERSIONS.max, 8);
    assert_eq!(<ControlledShutdownRequest as Request>::KEY, 7);
}
