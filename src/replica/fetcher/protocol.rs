//! The follower's requests to its leader, as pure functions: Fetch (v13
//! with topic ids, v12 by name when an id is unknown) and ListOffsets (for
//! OFFSET_OUT_OF_RANGE), framed with request header v2, and the decoding
//! of their responses. No sockets here, so all of it is unit-tested.

use std::collections::HashMap;

use bytes::Bytes;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{
    BrokerId, FetchRequest, FetchResponse, ListOffsetsRequest, ListOffsetsResponse, TopicName,
};
use kafka_protocol::protocol::{Decodable, StrBytes};
use uuid::Uuid;

pub use crate::protocol::client_frame::{encode_frame, response_body};
use crate::protocol::errors::ErrorCode;

pub const FETCH_VERSION_WITH_TOPIC_IDS: i16 = 13;
pub const FETCH_VERSION_WITH_NAMES: i16 = 12;
/// Flexible, with replica id and current leader epoch (what the leader needs).
pub const LIST_OFFSETS_VERSION: i16 = 7;
pub const LATEST_TIMESTAMP: i64 = -1;
pub const EARLIEST_TIMESTAMP: i64 = -2;

/// The fixed part of every follower fetch (broker configs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchSettings {
    pub replica_id: i32,
    /// `replica.fetch.wait.max.ms`
    pub max_wait_ms: i32,
    /// `replica.fetch.min.bytes`
    pub min_bytes: i32,
    /// `replica.fetch.response.max.bytes`
    pub max_bytes: i32,
    /// `replica.fetch.max.bytes`
    pub partition_max_bytes: i32,
}

/// One partition of a follower fetch, read from the local log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionFetchRequest {
    pub topic: String,
    pub partition: i32,
    pub topic_id: Uuid,
    pub current_leader_epoch: i32,
    /// The local log end offset.
    pub fetch_offset: i64,
    /// Epoch of the last local record, -1 if none.
    pub last_fetched_epoch: i32,
    pub log_start_offset: i64,
}

/// One partition of a fetch response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchedPartition {
    pub error_code: ErrorCode,
    pub high_watermark: i64,
    pub log_start_offset: i64,
    /// (epoch, end offset) when the leader found the logs diverge (v12+).
    pub diverging_epoch: Option<(i32, i64)>,
    pub records: Option<Bytes>,
}

/// A decoded fetch response: the top-level error and, per answered
/// partition, its index in the request's partition list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchResponseParts {
    pub error_code: ErrorCode,
    pub partitions: Vec<(usize, FetchedPartition)>,
}

/// The Fetch version for these partitions: topic ids (v13) when every
/// topic id is known, as Kafka's fetcher decides, else names (v12).
pub fn fetch_version(parts: &[PartitionFetchRequest]) -> i16 {
    if parts.iter().all(|p| !p.topic_id.is_nil()) {
        FETCH_VERSION_WITH_TOPIC_IDS
    } else {
        FETCH_VERSION_WITH_NAMES
    }
}

/// A full (sessionless) follower fetch at `fetch_version(parts)`,
/// partitions grouped by topic in order of first appearance.
pub fn follower_fetch_request(
    settings: &FetchSettings,
    parts: &[PartitionFetchRequest],
) -> FetchRequest {
    // Each version carries either the names or the ids, never both.
    let use_ids = fetch_version(parts) >= FETCH_VERSION_WITH_TOPIC_IDS;
    let mut topics: Vec<FetchTopic> = Vec::new();
    let mut topic_index: HashMap<&str, usize> = HashMap::new();
    for p in parts {
        let i = *topic_index.entry(p.topic.as_str()).or_insert_with(|| {
            topics.push(if use_ids {
                FetchTopic::default().with_topic_id(p.topic_id)
            } else {
                FetchTopic::default().with_topic(TopicName(StrBytes::from_string(p.topic.clone())))
            });
            topics.len() - 1
        });
        topics[i].partitions.push(
            FetchPartition::default()
                .with_partition(p.partition)
                .with_current_leader_epoch(p.current_leader_epoch)
                .with_fetch_offset(p.fetch_offset)
                .with_last_fetched_epoch(p.last_fetched_epoch)
                .with_log_start_offset(p.log_start_offset)
                .with_partition_max_bytes(settings.partition_max_bytes),
        );
    }
    FetchRequest::default()
        .with_replica_id(BrokerId(settings.replica_id))
        .with_max_wait_ms(settings.max_wait_ms)
        .with_min_bytes(settings.min_bytes)
        .with_max_bytes(settings.max_bytes)
        .with_isolation_level(0)
        .with_session_id(0)
        // -1: FINAL_EPOCH, a full fetch without a session.
        .with_session_epoch(-1)
        .with_topics(topics)
}

/// Decodes a fetch response body and matches its partitions to the
/// request's (by topic id in v13, by name before); partitions the request
/// did not name are ignored.
pub fn decode_fetch_response(
    mut body: Bytes,
    version: i16,
    sent: &[PartitionFetchRequest],
) -> Result<FetchResponseParts, String> {
    let response = FetchResponse::decode(&mut body, version)
        .map_err(|e| format!("Fetch v{version} response: {e}"))?;
    let use_ids = version >= FETCH_VERSION_WITH_TOPIC_IDS;
    let mut index: HashMap<(&str, Uuid, i32), usize> = HashMap::new();
    for (i, p) in sent.iter().enumerate() {
        let name = if use_ids { "" } else { p.topic.as_str() };
        let id = if use_ids { p.topic_id } else { Uuid::nil() };
        index.insert((name, id, p.partition), i);
    }
    let mut partitions = Vec::new();
    for t in response.responses {
        let (name, id) = if use_ids {
            (String::new(), t.topic_id)
        } else {
            (t.topic.0.to_string(), Uuid::nil())
        };
        for p in t.partitions {
            let Some(&i) = index.get(&(name.as_str(), id, p.partition_index)) else {
                continue;
            };
            let diverging_epoch = (p.diverging_epoch.epoch >= 0)
                .then_some((p.diverging_epoch.epoch, p.diverging_epoch.end_offset));
            partitions.push((
                i,
                FetchedPartition {
                    error_code: ErrorCode::from_wire(p.error_code),
                    high_watermark: p.high_watermark,
                    log_start_offset: p.log_start_offset,
                    diverging_epoch,
                    records: p.records,
                },
            ));
        }
    }
    Ok(FetchResponseParts {
        error_code: ErrorCode::from_wire(response.error_code),
        partitions,
    })
}

/// ListOffsets for the leader's latest (`LATEST_TIMESTAMP`) or earliest
/// (`EARLIEST_TIMESTAMP`) offsets, as a replica asks.
pub fn list_offsets_request(
    replica_id: i32,
    parts: &[PartitionFetchRequest],
    timestamp: i64,
) -> ListOffsetsRequest {
    let mut topics: Vec<ListOffsetsTopic> = Vec::new();
    for p in parts {
        let partition = ListOffsetsPartition::default()
            .with_partition_index(p.partition)
            .with_current_leader_epoch(p.current_leader_epoch)
            .with_timestamp(timestamp);
        match topics.iter_mut().find(|t| t.name.0.as_str() == p.topic) {
            Some(t) => t.partitions.push(partition),
            None => topics.push(
                ListOffsetsTopic::default()
                    .with_name(TopicName(StrBytes::from_string(p.topic.clone())))
                    .with_partitions(vec![partition]),
            ),
        }
    }
    ListOffsetsRequest::default()
        .with_replica_id(BrokerId(replica_id))
        .with_isolation_level(0)
        .with_topics(topics)
}

/// Per request partition (same order): (error code, offset); partitions
/// the response left out get UNKNOWN_SERVER_ERROR.
pub fn decode_list_offsets_response(
    mut body: Bytes,
    version: i16,
    sent: &[PartitionFetchRequest],
) -> Result<Vec<(ErrorCode, i64)>, String> {
    let response = ListOffsetsResponse::decode(&mut body, version)
        .map_err(|e| format!("ListOffsets v{version} response: {e}"))?;
    let mut found: HashMap<(String, i32), (ErrorCode, i64)> = HashMap::new();
    for t in response.topics {
        for p in t.partitions {
            found.insert(
                (t.name.0.to_string(), p.partition_index),
                (ErrorCode::from_wire(p.error_code), p.offset),
            );
        }
    }
    Ok(sent
        .iter()
        .map(|p| {
            found
                .get(&(p.topic.clone(), p.partition))
                .copied()
                .unwrap_or((crate::protocol::errors::UNKNOWN_SERVER_ERROR, -1))
        })
        .collect())
}
