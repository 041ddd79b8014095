use crate::security::inter_broker::InterBrokerSecurity;
use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{
    ApiKey, FetchRequest, ListOffsetsRequest, ListOffsetsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use super::protocol::{encode_frame, response_body, EARLIEST_TIMESTAMP, LATEST_TIMESTAMP};
use super::task::next_backoff_ms;
use super::*;
use crate::protocol::errors;
use crate::protocol::errors::ErrorCode;
use crate::protocol::fetch_encoder::{
    encode_fetch_response, FetchPartitionData, FetchResponseData, FetchTopicData, RecordsData,
};
use crate::protocol::{Chunk, Response};
use crate::replica::partition::follower::test_support::*;

pub(super) const TOPIC_ID: Uuid = Uuid::from_u128(7);

fn settings() -> FetchSettings {
    FetchSettings {
        replica_id: 3,
        max_wait_ms: 500,
        min_bytes: 1,
        max_bytes: 10 << 20,
        partition_max_bytes: 1 << 20,
    }
}

fn part(topic: &str, partition: i32, topic_id: Uuid, fetch_offset: i64) -> PartitionFetchRequest {
    PartitionFetchRequest {
        topic: topic.into(),
        partition,
        topic_id,
        current_leader_epoch: 4,
        fetch_offset,
        last_fetched_epoch: 2,
        log_start_offset: 1,
    }
}

pub(super) fn flatten(r: &Response) -> Bytes {
    let mut out = BytesMut::new();
    for c in &r.chunks {
        match c {
            Chunk::Bytes(b) => out.put_slice(b),
            Chunk::File(_) => panic!("no files in these tests"),
        }
    }
    out.freeze()
}

pub(super) fn partition_data(
    partition: i32,
    error_code: ErrorCode,
    hw: i64,
    records: Option<Vec<u8>>,
) -> FetchPartitionData {
    FetchPartitionData {
        partition,
        error_code: error_code.code(),
        high_watermark: hw,
        last_stable_offset: hw,
        log_start_offset: 0,
        diverging_epoch: None,
        current_leader: None,
        aborted_transactions: None,
        records: match records {
            Some(r) => RecordsData::Bytes(Bytes::from(r)),
            None => RecordsData::Empty,
        },
    }
}

pub(super) fn broker_config(overrides: &[(&str, &str)]) -> crate::config::BrokerConfig {
    let map: BTreeMap<String, String> = overrides
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    crate::config::BrokerConfig::from_map(&map).unwrap()
}

#[test]
fn fetcher_ids_follow_kafka() {
    // Java: Utils.abs(31 * "topic".hashCode() + p) % n
    assert_eq!(fetcher_id("topic", 0, 3), 1);
    assert_eq!(fetcher_id("topic", 1, 3), 0);
    assert_eq!(fetcher_id("orders", 5, 4), 0);
    assert_eq!(fetcher_id("topic", 0, 2), 1);
    assert_eq!(fetcher_id("other", 4, 2), 0);
    assert_eq!(fetcher_id("anything", 9, 1), 0);
    assert_eq!(fetcher_id("anything", 9, 0), 0);
}

#[test]
fn backoff_doubles_from_100_ms_to_1_s() {
    let mut b = 0;
    let mut seen = Vec::new();
    for _ in 0..6 {
        b = next_backoff_ms(b);
        seen.push(b);
    }
    assert_eq!(seen, [100, 200, 400, 800, 1000, 1000]);
}

#[test]
fn manager_reads_the_replica_fetch_settings() {
    let m = ReplicaFetcherManager::new(0, 4, &broker_config(&[]), InterBrokerSecurity::plaintext());
    assert_eq!(
        m.settings,
        FetchSettings {
            replica_id: 4,
            max_wait_ms: 500,
            min_bytes: 1,
            max_bytes: 10 << 20,
            partition_max_bytes: 1 << 20,
        }
    );
    assert_eq!(m.socket_timeout_ms, 30_000);
    assert_eq!(m.socket_receive_buffer_bytes, 65_536);
    assert_eq!(m.num_fetchers, 1);
    let m = ReplicaFetcherManager::new(
        0,
        4,
        &broker_config(&[
            ("replica.fetch.min.bytes", "7"),
            ("replica.fetch.response.max.bytes", "1000"),
            ("replica.fetch.wait.max.ms", "50"),
            ("replica.fetch.max.bytes", "300"),
            ("replica.socket.timeout.ms", "2000"),
            ("replica.socket.receive.buffer.bytes", "-1"),
            ("num.replica.fetchers", "3"),
        ]),
        InterBrokerSecurity::plaintext(),
    );
    assert_eq!(
        (
            m.settings.min_bytes,
            m.settings.max_bytes,
            m.settings.max_wait_ms,
            m.settings.partition_max_bytes
        ),
        (7, 1000, 50, 300)
    );
    assert_eq!((m.socket_timeout_ms, m.num_fetchers), (2000, 3));
    assert_eq!(m.socket_receive_buffer_bytes, -1);
}

#[test]
fn fetch_request_decodes_on_the_leader() {
    let parts = vec![
        part("a", 0, Uuid::from_u128(1), 10),
        part("b", 2, Uuid::from_u128(2), 20),
        part("a", 1, Uuid::from_u128(1), 30),
    ];
    for (parts, version) in [
        (parts.clone(), 13),
        // An unknown topic id falls back to names.
        (vec![parts[0].clone(), part("c", 0, Uuid::nil(), 5)], 12),
    ] {
        assert_eq!(fetch_version(&parts), version);
        let request = follower_fetch_request(&settings(), &parts);
        let frame =
            encode_frame(ApiKey::Fetch, version, 77, "broker-3-fetcher-0", &request).unwrap();
        let size = i32::from_be_bytes(frame[..4].try_into().unwrap()) as usize;
        assert_eq!(size, frame.len() - 4);
        // As the leader's connection parses it.
        let req =
            crate::protocol::parse_request(frame.slice(4..), &Arc::from("/127.0.0.1")).unwrap();
        assert_eq!((req.api_key, req.api_version), (ApiKey::Fetch, version));
        assert_eq!(req.header.correlation_id, 77);
        assert_eq!(req.header.client_id.as_deref(), Some("broker-3-fetcher-0"));
        let decoded: FetchRequest = crate::protocol::decode_body(&req).unwrap();
        assert_eq!(decoded, request);
        assert_eq!(decoded.replica_id.0, 3);
        assert_eq!(
            (decoded.max_wait_ms, decoded.min_bytes, decoded.max_bytes),
            (500, 1, 10 << 20)
        );
        assert_eq!(
            (
                decoded.isolation_level,
                decoded.session_id,
                decoded.session_epoch
            ),
            (0, 0, -1)
        );
        let mut flat = Vec::new();
        for t in &decoded.topics {
            for p in &t.partitions {
                let name = if version >= 13 {
                    String::new()
                } else {
                    t.topic.0.to_string()
                };
                flat.push((
                    name,
                    t.topic_id,
                    p.partition,
                    p.fetch_offset,
                    p.current_leader_epoch,
                    p.last_fetched_epoch,
                    p.log_start_offset,
                    p.partition_max_bytes,
                ));
            }
        }
        let want: Vec<_> = if version == 13 {
            // Grouped by topic, in order of first appearance.
            vec![
                (String::new(), Uuid::from_u128(1), 0, 10, 4, 2, 1, 1 << 20),
                (String::new(), Uuid::from_u128(1), 1, 30, 4, 2, 1, 1 << 20),
                (String::new(), Uuid::from_u128(2), 2, 20, 4, 2, 1, 1 << 20),
            ]
        } else {
            vec![
                ("a".to_string(), Uuid::nil(), 0, 10, 4, 2, 1, 1 << 20),
                ("c".to_string(), Uuid::nil(), 0, 5, 4, 2, 1, 1 << 20),
            ]
        };
        assert_eq!(flat, want, "v{version}");
    }
}

#[test]
fn fetch_response_from_the_leader_encoder_decodes() {
    let records = batch(10, 2, 4);
    for version in [12i16, 13] {
        let sent = vec![
            part("a", 0, Uuid::from_u128(1), 10),
            part("a", 1, Uuid::from_u128(1), 10),
        ];
        let mut diverged = partition_data(1, errors::NONE, 8, None);
        diverged.diverging_epoch = Some((3, 8));
        let data = FetchResponseData {
            throttle_time_ms: 0,
            error_code: errors::NONE.code(),
            session_id: 0,
            topics: vec![
                FetchTopicData {
                    name: "a".into(),
                    topic_id: Uuid::from_u128(1),
                    partitions: vec![
                        partition_data(0, errors::NONE, 12, Some(records.clone())),
                        diverged,
                        // Not asked for: ignored.
                        partition_data(7, errors::NONE, 1, None),
                    ],
                },
                FetchTopicData {
                    name: "zzz".into(),
                    topic_id: Uuid::from_u128(9),
                    partitions: vec![partition_data(0, errors::NONE, 1, None)],
                },
            ],
        };
        let frame = flatten(&encode_fetch_response(version, 5, data).unwrap());
        let body = response_body(frame.slice(4..), ApiKey::Fetch, version, 5).unwrap();
        let parts = decode_fetch_response(body, version, &sent).unwrap();
        assert_eq!(parts.error_code, errors::NONE);
        assert_eq!(parts.partitions.len(), 2, "v{version}");
        let (i, p0) = &parts.partitions[0];
        assert_eq!(*i, 0);
        assert_eq!(
            (p0.error_code, p0.high_watermark, p0.log_start_offset),
            (errors::NONE, 12, 0)
        );
        assert_eq!(p0.records.as_deref(), Some(&records[..]));
        assert_eq!(p0.diverging_epoch, None);
        let (i, p1) = &parts.partitions[1];
        assert_eq!(*i, 1);
        assert_eq!(p1.diverging_epoch, Some((3, 8)));
        assert!(p1.records.as_deref().is_none_or(|r| r.is_empty()));
        // A wrong correlation id, or a cut frame, is an error, never a panic.
        assert!(response_body(frame.slice(4..), ApiKey::Fetch, version, 6).is_err());
        for cut in [0, 3, 9, frame.len() / 2, frame.len() - 1] {
            let r = response_body(frame.slice(4..cut.max(4)), ApiKey::Fetch, version, 5)
                .and_then(|b| decode_fetch_response(b, version, &sent));
            assert!(r.is_err(), "v{version} cut at {cut}");
        }
    }
}

#[test]
fn list_offsets_round_trip() {
    let sent = vec![
        part("a", 0, TOPIC_ID, 10),
        part("a", 3, TOPIC_ID, 10),
        part("b", 1, TOPIC_ID, 4),
    ];
    let request = list_offsets_request(3, &sent, LATEST_TIMESTAMP);
    let frame = encode_frame(
        ApiKey::ListOffsets,
        protocol::LIST_OFFSETS_VERSION,
        8,
        "c",
        &request,
    )
    .unwrap();
    let req = crate::protocol::parse_request(frame.slice(4..), &Arc::from("/h")).unwrap();
    let decoded: ListOffsetsRequest = crate::protocol::decode_body(&req).unwrap();
    assert_eq!(decoded, request);
    assert_eq!(decoded.replica_id.0, 3);
    assert_eq!(decoded.topics.len(), 2);
    assert_eq!(decoded.topics[0].partitions.len(), 2);
    assert!(decoded
        .topics
        .iter()
        .flat_map(|t| &t.partitions)
        .all(|p| p.timestamp == -1 && p.current_leader_epoch == 4));

    let response =
        ListOffsetsResponse::default().with_topics(vec![ListOffsetsTopicResponse::default()
            .with_name(TopicName(StrBytes::from_static_str("a")))
            .with_partitions(vec![
                ListOffsetsPartitionResponse::default()
                    .with_partition_index(3)
                    .with_offset(33),
                ListOffsetsPartitionResponse::default()
                    .with_partition_index(0)
                    .with_error_code(errors::FENCED_LEADER_EPOCH.code())
                    .with_offset(-1),
            ])]);
    let frame = crate::protocol::encode_response(
        ApiKey::ListOffsets,
        protocol::LIST_OFFSETS_VERSION,
        8,
        &response,
    )
    .unwrap();
    let body = response_body(
        frame.slice(4..),
        ApiKey::ListOffsets,
        protocol::LIST_OFFSETS_VERSION,
        8,
    )
    .unwrap();
    let got =
        decode_list_offsets_response(body.clone(), protocol::LIST_OFFSETS_VERSION, &sent).unwrap();
    assert_eq!(
        got,
        vec![
            (errors::FENCED_LEADER_EPOCH, -1),
            (errors::NONE, 33),
            (errors::UNKNOWN_SERVER_ERROR, -1)
        ]
    );
    assert!(decode_list_offsets_response(
        body.slice(..body.len() - 2),
        protocol::LIST_OFFSETS_VERSION,
        &sent
    )
    .is_err());
    assert_eq!(
        list_offsets_request(3, &sent, EARLIEST_TIMESTAMP).topics[1].partitions[0].timestamp,
        -2
    );
}

fn fetched(
    error_code: ErrorCode,
    hw: i64,
    log_start_offset: i64,
    records: Option<Vec<u8>>,
) -> FetchedPartition {
    FetchedPartition {
        error_code,
        high_watermark: hw,
        log_start_offset,
        diverging_epoch: None,
        records: records.map(Bytes::from),
    }
}

#[test]
fn fetched_data_is_appended_and_the_high_watermark_followed() {
    let dir = temp_dir("apply");
    let mut p = follower_in(&dir, 5, 0, &[]);
    let req = fetch_request_for(&p);
    assert_eq!(
        (
            req.fetch_offset,
            req.last_fetched_epoch,
            req.current_leader_epoch
        ),
        (0, -1, 5)
    );
    let records = [batch(0, 2, 4), batch(2, 1, 4), batch(3, 2, 5)].concat();
    let out = apply_fetched_partition(
        &mut p,
        0,
        &fetched(errors::NONE, 3, 0, Some(records.clone())),
        NOW_MS,
    );
    assert_eq!(
        out,
        FetchOutcome::Applied {
            appended_bytes: records.len(),
            high_watermark_changed: true,
            truncated_to: None
        }
    );
    assert_eq!((p.log.log_end_offset(), p.high_watermark()), (5, 3));
    let req = fetch_request_for(&p);
    assert_eq!((req.fetch_offset, req.last_fetched_epoch), (5, 5));
    // The leader's high watermark above this log's end: capped.
    let out = apply_fetched_partition(&mut p, 5, &fetched(errors::NONE, 9, 0, None), NOW_MS);
    assert_eq!(
        out,
        FetchOutcome::Applied {
            appended_bytes: 0,
            high_watermark_changed: true,
            truncated_to: None
        }
    );
    assert_eq!(p.high_watermark(), 5);
    // The leader's log start offset moved up (retention, DeleteRecords).
    apply_fetched_partition(&mut p, 5, &fetched(errors::NONE, 5, 2, None), NOW_MS);
    assert_eq!(p.log.log_start_offset(), 2);
    // Diverging: the leader's epoch 4 ends at 3, so epoch 5's batch goes.
    let mut d = fetched(errors::NONE, 3, 2, None);
    d.diverging_epoch = Some((4, 3));
    let out = apply_fetched_partition(&mut p, 5, &d, NOW_MS);
    assert_eq!(
        out,
        FetchOutcome::Applied {
            appended_bytes: 0,
            high_watermark_changed: true,
            truncated_to: Some(3)
        }
    );
    assert_eq!((p.log.log_end_offset(), p.high_watermark()), (3, 3));
    assert_eq!(p.leader_epoch_cache.entries(), &[(4, 0)]);
    assert_eq!(fetch_request_for(&p).last_fetched_epoch, 4);
    // An epoch this log never had: cut to where its largest smaller epoch
    // ends (nothing here), then the leader is asked again.
    let mut d = fetched(errors::NONE, 3, 2, None);
    d.diverging_epoch = Some((6, 2));
    let out = apply_fetched_partition(&mut p, 3, &d, NOW_MS);
    assert_eq!(
        out,
        FetchOutcome::Applied {
            appended_bytes: 0,
            high_watermark_changed: true,
            truncated_to: Some(2)
        }
    );
    // Errors.
    assert_eq!(
        apply_fetched_partition(
            &mut p,
            2,
            &fetched(errors::OFFSET_OUT_OF_RANGE, -1, -1, None),
            NOW_MS
        ),
        FetchOutcome::OffsetOutOfRange
    );
    for code in [
        errors::NOT_LEADER_OR_FOLLOWER,
        errors::FENCED_LEADER_EPOCH,
        errors::UNKNOWN_LEADER_EPOCH,
        errors::UNKNOWN_TOPIC_OR_PARTITION,
    ] {
        assert!(matches!(
            apply_fetched_partition(&mut p, 2, &fetched(code, -1, -1, None), NOW_MS),
            FetchOutcome::Retry { error_code, .. } if error_code == code
        ));
    }
    let mut bad = batch(2, 1, 6);
    bad[70] ^= 0xff;
    assert!(matches!(
        apply_fetched_partition(&mut p, 2, &fetched(errors::NONE, 3, 2, Some(bad)), NOW_MS),
        FetchOutcome::Retry {
            error_code: errors::CORRUPT_MESSAGE,
            ..
        }
    ));
    assert_eq!(p.log.log_end_offset(), 2);
    crate::replica::partition::leader_epoch_writes::remove_test_dir(&dir);
}

#[test]
fn out_of_range_resets_to_the_leader() {
    let dir = temp_dir("oor");
    let mut p = follower_in(&dir, 5, 0, &[]);
    p.append_records_as_follower(&[batch(0, 2, 4), batch(2, 3, 5)].concat(), NOW_MS)
        .ok()
        .unwrap();
    // The leader is ahead and starts below this log's end: fetch on.
    assert_eq!(apply_out_of_range(&mut p, 9, 0, NOW_MS).unwrap(), 5);
    // Unclean election: the leader ends before this log does.
    assert_eq!(apply_out_of_range(&mut p, 2, 0, NOW_MS).unwrap(), 2);
    assert_eq!(p.leader_epoch_cache.entries(), &[(4, 0)]);
    crate::replica::partition::leader_epoch_writes::remove_test_dir(&dir);

    // The leader's log starts beyond this one's end, below its first segment.
    let dir = temp_dir("oor-start");
    let mut p = follower_in(&dir, 5, 100, &[]);
    assert_eq!(
        apply_out_of_range(&mut p, 150, 50, NOW_MS).unwrap(),
        100,
        "below: fetch on"
    );
    crate::replica::partition::leader_epoch_writes::remove_test_dir(&dir);
}

pub(super) fn followed(topic: &str, partition: i32, leader_epoch: i32) -> FollowedPartition {
    FollowedPartition {
        topic: topic.into(),
        partition,
        topic_id: TOPIC_ID,
        leader_epoch,
    }
}

pub(super) fn leader(id: i32, port: u16) -> LeaderEndpoint {
    LeaderEndpoint {
        broker_id: id,
        host: "127.0.0.1".into(),
        port,
    }
}

fn generation(m: &ReplicaFetcherManager, topic: &str, partition: i32) -> u64 {
    let tp = (topic.to_string(), partition);
    m.fetchers
        .values()
        .find_map(|f| f.shared.borrow().partitions.get(&tp).map(|s| s.generation))
        .unwrap()
}

#[test]
fn partitions_move_between_leaders_and_fetchers() {
    let mut m = ReplicaFetcherManager::new(
        0,
        3,
        &broker_config(&[("num.replica.fetchers", "2")]),
        InterBrokerSecurity::plaintext(),
    );
    let started = m.place(
        leader(1, 9001),
        vec![followed("topic", 0, 1), followed("topic", 1, 1)],
    );
    // "topic" 0 and 1 hash to different fetchers of the two.
    assert_eq!(started.len(), 2);
    assert_eq!((m.fetcher_count(), m.partition_count()), (2, 2));
    assert_eq!(m.leader_of("topic", 0), Some(1));
    let g = generation(&m, "topic", 0);
    // A resend of the same epoch keeps the state (and the fetch in flight).
    m.place(leader(1, 9001), vec![followed("topic", 0, 1)]);
    assert_eq!(generation(&m, "topic", 0), g);
    // A new epoch starts over.
    m.place(leader(1, 9001), vec![followed("topic", 0, 2)]);
    assert!(generation(&m, "topic", 0) > g);
    // A new leader: off the old fetcher, whose now idle task stops.
    let started = m.place(leader(2, 9002), vec![followed("topic", 0, 3)]);
    assert_eq!(started.len(), 1);
    assert_eq!(m.leader_of("topic", 0), Some(2));
    assert_eq!((m.fetcher_count(), m.partition_count()), (2, 2));
    // The same leader at a new address: a new connection.
    let old = m.fetchers[&(2, 1)].shared.clone();
    m.place(
        leader(2, 9999),
        vec![followed("topic", 0, 3), followed("other", 4, 1)],
    );
    assert_eq!(m.fetchers[&(2, 1)].leader.port, 9999);
    assert_eq!(m.fetchers[&(2, 0)].leader.port, 9999);
    assert!(old.borrow().stopped);
    assert_eq!(m.fetcher_count(), 3);
    assert_eq!(m.partition_count(), 3);
    m.remove_partitions(&[("topic".into(), 0), ("topic".into(), 1), ("nope".into(), 0)]);
    assert_eq!(m.partition_count(), 1);
    assert_eq!(m.fetcher_count(), 1);
    assert_eq!(m.leader_of("topic", 0), None);
    let shared: Vec<_> = m.fetchers.values().map(|f| f.shared.clone()).collect();
    m.shutdown();
    assert_eq!(m.fetcher_count(), 0);
    assert!(shared.iter().all(|s| s.borrow().stopped));
}
