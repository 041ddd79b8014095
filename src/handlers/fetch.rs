//! Fetch (API 1): fetch sessions (KIP-227), reads split by owning shard,
//! long-poll through the purgatory for `max_wait_ms`/`min_bytes`, and a
//! response whose record bytes go to the socket by sendfile.

use std::rc::Rc;

use indexmap::IndexMap;
use kafka_protocol::messages::FetchRequest;
use uuid::Uuid;

use super::HandlerResult;
use crate::fetch_session::{CachedPartition, SessionError, FINAL_EPOCH, INITIAL_EPOCH};
use crate::protocol::fetch_encoder::{
    encode_fetch_response, FetchPartitionData, FetchResponseData, FetchTopicData, RecordsData,
};
use crate::protocol::{decode_body, errors, Request};
use crate::replica_manager::{FetchPart, FetchPartResult};
use crate::shard_context::{now_ms, ShardContext, ShardRequest, ShardResponse};
use crate::shard_handler::{wait_for_data, PartitionOffsets, ShardGroups};

/// One partition to answer for, in response order.
struct Wanted {
    topic: String,
    topic_id: Uuid,
    partition: i32,
    fetch_offset: i64,
    max_bytes: i32,
    current_leader_epoch: i32,
    last_fetched_epoch: i32,
    /// Error found before reading (unknown topic id, ...).
    error: Option<i16>,
}

impl Wanted {
    /// A new fetch-session entry; -1s mean "never reported to the client".
    fn to_cached(&self) -> CachedPartition {
        CachedPartition {
            topic: self.topic.clone(),
            topic_id: self.topic_id,
            partition: self.partition,
            fetch_offset: self.fetch_offset,
            max_bytes: self.max_bytes,
            current_leader_epoch: self.current_leader_epoch,
            last_fetched_epoch: self.last_fetched_epoch,
            high_watermark: -1,
            last_stable_offset: -1,
            log_start_offset: -1,
        }
    }
}

fn session_error_response(req: &Request, code: i16) -> HandlerResult {
    let data = FetchResponseData {
        throttle_time_ms: 0,
        error_code: code,
        session_id: 0,
        topics: Vec::new(),
    };
    Ok(Some(encode_fetch_response(
        req.api_version,
        req.header.correlation_id,
        data,
    )))
}

/// Reads every wanted partition on its owning shard, all shards at once.
async fn read_all(
    ctx: &Rc<ShardContext>,
    wanted: &[Wanted],
    isolation_level: i8,
    replica_id: i32,
) -> Vec<Option<FetchPartResult>> {
    let mut out: Vec<Option<FetchPartResult>> = (0..wanted.len()).map(|_| None).collect();
    let mut by_shard = ShardGroups::new(ctx.nr_shards);
    for (i, w) in wanted.iter().enumerate() {
        if w.error.is_some() {
            continue;
        }
        let owner = ctx.owner_of(&w.topic, w.partition);
        by_shard.push(
            owner,
            i,
            FetchPart {
                topic: w.topic.clone(),
                partition: w.partition,
                fetch_offset: w.fetch_offset,
                max_bytes: w.max_bytes.max(0) as u32,
                min_one_batch: true,
                current_leader_epoch: w.current_leader_epoch,
                replica_id,
                last_fetched_epoch: w.last_fetched_epoch,
            },
        );
    }
    by_shard
        .run(
            ctx,
            &mut out,
            |parts| ShardRequest::Fetch {
                parts,
                isolation_level,
            },
            |r| match r {
                ShardResponse::Fetch(r) => Some(r),
                _ => None,
            },
            || FetchPartResult {
                error_code: errors::NOT_LEADER_OR_FOLLOWER,
                high_watermark: -1,
                last_stable_offset: -1,
                log_start_offset: -1,
                slice: None,
                diverging_epoch: None,
            },
        )
        .await;
    out
}

/// Applies the response-wide byte limit in order (the first batch always
/// goes, so a consumer can make progress past a large batch).
fn enforce_max_bytes(results: &mut [Option<FetchPartResult>], max_bytes: i32) -> usize {
    let limit = max_bytes.max(0) as usize;
    let mut total = 0usize;
    for r in results.iter_mut().flatten() {
        if let Some(s) = &r.slice {
            let len = s.len as usize;
            if total > 0 && total + len > limit {
                r.slice = None;
            } else {
                total += len;
            }
        }
    }
    total
}

pub async fn handle(ctx: &Rc<ShardContext>, req: &Request) -> HandlerResult {
    let request: FetchRequest = decode_body(req)?;
    let image = ctx.metadata.image();
    let use_ids = req.api_version >= 13;
    let now = now_ms();
    // A follower names itself by replica id (v15+: in replica_state).
    let replica_id = if req.api_version >= 15 {
        request.replica_state.replica_id.0
    } else {
        request.replica_id.0
    };
    if replica_id >= 0 && ctx.cluster.is_none() {
        return Err(format!(
            "Fetch from replica {replica_id} on a single-broker kshard"
        ));
    }

    // Partitions named in this request, in order.
    let mut requested: Vec<Wanted> = Vec::new();
    for t in &request.topics {
        let (name, error) = if use_ids {
            match image.topic_by_id(&t.topic_id) {
                Some(info) => (info.name.clone(), None),
                None => (String::new(), Some(errors::UNKNOWN_TOPIC_ID)),
            }
        } else {
            let n = t.topic.0.to_string();
            let error = if image.topic(&n).is_none() {
                Some(errors::UNKNOWN_TOPIC_OR_PARTITION)
            } else {
                None
            };
            (n, error)
        };
        let topic_id = image.topic(&name).map(|i| i.topic_id).unwrap_or(t.topic_id);
        for p in &t.partitions {
            requested.push(Wanted {
                topic: name.clone(),
                topic_id,
                partition: p.partition,
                fetch_offset: p.fetch_offset,
                max_bytes: p.partition_max_bytes,
                current_leader_epoch: p.current_leader_epoch,
                last_fetched_epoch: if req.api_version >= 12 {
                    p.last_fetched_epoch
                } else {
                    -1
                },
                error,
            });
        }
    }

    // KIP-227: decide which session this is and which partitions to read.
    let session_id = request.session_id;
    let epoch = request.session_epoch;
    let mut incremental = false;
    let mut response_session_id = 0;
    let wanted: Vec<Wanted>;
    {
        let mut sessions = ctx.fetch_sessions.borrow_mut();
        if epoch == FINAL_EPOCH || epoch == INITIAL_EPOCH {
            if session_id != 0 {
                sessions.remove(session_id);
            }
            if epoch == INITIAL_EPOCH && req.api_version >= 7 {
                let mut map = IndexMap::new();
                for w in requested.iter().filter(|w| w.error.is_none()) {
                    map.insert((w.topic.clone(), w.partition), w.to_cached());
                }
                response_session_id = sessions.create(map, now);
            }
            wanted = requested;
        } else {
            let session = match sessions.get_for_epoch(session_id, epoch, now) {
                Ok(s) => s,
                Err(SessionError::NotFound) => {
                    drop(sessions);
                    return session_error_response(req, errors::FETCH_SESSION_ID_NOT_FOUND);
                }
                Err(SessionError::InvalidEpoch) => {
                    drop(sessions);
                    return session_error_response(req, errors::INVALID_FETCH_SESSION_EPOCH);
                }
            };
            incremental = true;
            response_session_id = session_id;
            for w in requested.iter().filter(|w| w.error.is_none()) {
                let entry = session
                    .partitions
                    .entry((w.topic.clone(), w.partition))
                    .or_insert_with(|| w.to_cached());
                entry.fetch_offset = w.fetch_offset;
                entry.max_bytes = w.max_bytes;
                entry.current_leader_epoch = w.current_leader_epoch;
                entry.last_fetched_epoch = w.last_fetched_epoch;
            }
            for f in &request.forgotten_topics_data {
                let name = if use_ids {
                    image
                        .topic_by_id(&f.topic_id)
                        .map(|i| i.name.clone())
                        .unwrap_or_default()
                } else {
                    f.topic.0.to_string()
                };
                for p in &f.partitions {
                    session.partitions.shift_remove(&(name.clone(), *p));
                }
            }
            let mut all: Vec<Wanted> = session
                .partitions
                .values()
                .map(|c| Wanted {
                    topic: c.topic.clone(),
                    topic_id: c.topic_id,
                    partition: c.partition,
                    fetch_offset: c.fetch_offset,
                    max_bytes: c.max_bytes,
                    current_leader_epoch: c.current_leader_epoch,
                    last_fetched_epoch: c.last_fetched_epoch,
                    error: None,
                })
                .collect();
            // Partitions whose topic is unknown are reported but not cached.
            all.extend(requested.into_iter().filter(|w| w.error.is_some()));
            wanted = all;
        }
    }

    let mut results = read_all(ctx, &wanted, request.isolation_level, replica_id).await;
    let mut total = enforce_max_bytes(&mut results, request.max_bytes);
    let has_error = results
        .iter()
        .flatten()
        .any(|r| r.error_code != errors::NONE || r.diverging_epoch.is_some())
        || wanted.iter().any(|w| w.error.is_some());
    let min_bytes = request.min_bytes.max(0) as usize;
    if request.max_wait_ms > 0 && total < min_bytes.max(1) && !has_error && !wanted.is_empty() {
        let mut by_shard: Vec<PartitionOffsets> = (0..ctx.nr_shards).map(|_| Vec::new()).collect();
        for w in &wanted {
            by_shard[ctx.owner_of(&w.topic, w.partition)].push((
                w.topic.clone(),
                w.partition,
                w.fetch_offset,
            ));
        }
        let by_shard: Vec<(usize, PartitionOffsets)> = by_shard
            .into_iter()
            .enumerate()
            .filter(|(_, v)| !v.is_empty())
            .collect();
        wait_for_data(ctx, by_shard, request.max_wait_ms as u64, replica_id >= 0).await;
        results = read_all(ctx, &wanted, request.isolation_level, replica_id).await;
        total = enforce_max_bytes(&mut results, request.max_bytes);
    }
    debug_assert!(
        total <= request.max_bytes.max(0) as usize
            || results
                .iter()
                .flatten()
                .filter(|r| r.slice.is_some())
                .count()
                == 1
    );

    // Build the response; incremental sessions report only what changed.
    let read_uncommitted = request.isolation_level == 0;
    let mut topics: Vec<FetchTopicData> = Vec::new();
    let mut sessions = ctx.fetch_sessions.borrow_mut();
    let mut session = if response_session_id != 0 {
        sessions.get_mut(response_session_id)
    } else {
        None
    };
    for (w, r) in wanted.into_iter().zip(results) {
        let data = match (w.error, r) {
            (Some(_), _) | (None, None) => FetchPartitionData {
                partition: w.partition,
                error_code: w.error.unwrap_or(errors::UNKNOWN_SERVER_ERROR),
                high_watermark: -1,
                last_stable_offset: -1,
                log_start_offset: -1,
                diverging_epoch: None,
                current_leader: None,
                aborted_transactions: if read_uncommitted {
                    None
                } else {
                    Some(Vec::new())
                },
                records: RecordsData::Empty,
            },
            (None, Some(r)) => {
                if let Some(s) = session.as_deref_mut() {
                    if let Some(c) = s.partitions.get_mut(&(w.topic.clone(), w.partition)) {
                        let changed = r.slice.is_some()
                            || r.error_code != errors::NONE
                            || c.high_watermark != r.high_watermark
                            || c.last_stable_offset != r.last_stable_offset
                            || c.log_start_offset != r.log_start_offset;
                        c.high_watermark = r.high_watermark;
                        c.last_stable_offset = r.last_stable_offset;
                        c.log_start_offset = r.log_start_offset;
                        if incremental && !changed {
                            continue;
                        }
                    }
                }
                FetchPartitionData {
                    partition: w.partition,
                    error_code: r.error_code,
                    high_watermark: r.high_watermark,
                    last_stable_offset: r.last_stable_offset,
                    log_start_offset: r.log_start_offset,
                    diverging_epoch: r.diverging_epoch,
                    current_leader: None,
                    aborted_transactions: if read_uncommitted {
                        None
                    } else {
                        Some(Vec::new())
                    },
                    records: match r.slice {
                        Some(s) => RecordsData::File(s),
                        None => RecordsData::Empty,
                    },
                }
            }
        };
        match topics.last_mut() {
            Some(t) if t.name == w.topic && t.topic_id == w.topic_id => t.partitions.push(data),
            _ => topics.push(FetchTopicData {
                name: w.topic,
                topic_id: w.topic_id,
                partitions: vec![data],
            }),
        }
    }
    drop(sessions);
    let data = FetchResponseData {
        throttle_time_ms: 0,
        error_code: errors::NONE,
        session_id: response_session_id,
        topics,
    };
    Ok(Some(encode_fetch_response(
        req.api_version,
        req.header.correlation_id,
        data,
    )))
}
