//! Fetch (API 1): fetch sessions (KIP-227), reads split by owning shard,
//! long-poll through the purgatory for `max_wait_ms`/`min_bytes`, and a
//! response whose record bytes go to the socket by sendfile.

pub mod session;

use std::rc::Rc;

use indexmap::IndexMap;
use kafka_protocol::messages::FetchRequest;
use uuid::Uuid;

use super::legacy_format::{self, Converted};
use super::HandlerResult;
use crate::protocol::fetch_encoder::{
    encode_fetch_response, FetchPartitionData, FetchResponseData, FetchTopicData, RecordsData,
};
use crate::protocol::{decode_body, errors, Request};
use crate::replica_manager::{FetchBudget, FetchPart, FetchPartResult};
use crate::shard_context::{now_ms, ShardContext, ShardRequest, ShardResponse};
use crate::shard_handler::{wait_for_data, ShardGroups};
use kshard_shards::log::batch::RECORD_BATCH_OVERHEAD;
use session::{CachedPartition, SessionError, FINAL_EPOCH, INITIAL_EPOCH};

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
    encode_fetch_response(req.api_version, req.header.correlation_id, data).map(Some)
}

fn fetch_part(w: &Wanted, replica_id: i32) -> FetchPart {
    FetchPart {
        topic: w.topic.clone(),
        partition: w.partition,
        fetch_offset: w.fetch_offset,
        max_bytes: w.max_bytes.max(0) as u32,
        current_leader_epoch: w.current_leader_epoch,
        replica_id,
        last_fetched_epoch: w.last_fetched_epoch,
    }
}

fn shard_failed() -> FetchPartResult {
    FetchPartResult {
        error_code: errors::NOT_LEADER_OR_FOLLOWER,
        high_watermark: -1,
        last_stable_offset: -1,
        log_start_offset: -1,
        slice: None,
        read_size: 0,
        diverging_epoch: None,
    }
}

/// Reads every wanted partition on its owning shard, all shards at once;
/// each shard applies `budget` to its own partitions in request order.
async fn read_all(
    ctx: &Rc<ShardContext>,
    wanted: &[Wanted],
    isolation_level: i8,
    replica_id: i32,
    budget: FetchBudget,
) -> Vec<Option<FetchPartResult>> {
    let mut out: Vec<Option<FetchPartResult>> = (0..wanted.len()).map(|_| None).collect();
    let mut by_shard = ShardGroups::new(ctx.nr_shards);
    for (i, w) in wanted.iter().enumerate() {
        if w.error.is_none() {
            by_shard.push(
                ctx.owner_of(&w.topic, w.partition),
                i,
                fetch_part(w, replica_id),
            );
        }
    }
    by_shard
        .run(
            ctx,
            &mut out,
            |parts| ShardRequest::Fetch {
                parts,
                isolation_level,
                budget,
            },
            |r| match r {
                ShardResponse::Fetch(r) => Some(r),
                _ => None,
            },
            shard_failed,
        )
        .await;
    out
}

/// Kafka's `readFromLog` limits over the whole request: the shards read
/// in parallel, each seeing only its own partitions, so a partition that
/// returned more than what the partitions before it (on every shard) left
/// is read again with what is left. Returns the bytes read.
async fn read_limited(
    ctx: &Rc<ShardContext>,
    wanted: &[Wanted],
    isolation_level: i8,
    replica_id: i32,
    budget: FetchBudget,
) -> (Vec<Option<FetchPartResult>>, u64) {
    let mut results = read_all(ctx, wanted, isolation_level, replica_id, budget).await;
    let mut left = budget;
    let mut total = 0u64;
    for (w, slot) in wanted.iter().zip(results.iter_mut()) {
        let Some(r) = slot else { continue };
        let len = r.read_size;
        // While no partition before had data, this one was read with the
        // same limits as the whole request would give it; after that, a
        // read within both limits is what the limits left would give.
        let part_max_bytes = w.max_bytes.max(0) as u32;
        if left.min_one_batch || len <= left.bytes_left.min(part_max_bytes) {
            left.take(len);
            total += u64::from(len);
            continue;
        }
        let limit = left.bytes_left.min(part_max_bytes);
        if (limit as usize) < RECORD_BATCH_OVERHEAD {
            // Not even a batch header fits: Kafka sends that many bytes
            // of a partial batch, kshard none.
            r.slice = None;
            r.read_size = limit;
            total += u64::from(limit);
            left.take(limit);
            continue;
        }
        let request = ShardRequest::Fetch {
            parts: vec![fetch_part(w, replica_id)],
            isolation_level,
            budget: left,
        };
        let owner = ctx.owner_of(&w.topic, w.partition);
        let reread = match ctx.run_on(owner, request).await {
            Ok(ShardResponse::Fetch(mut v)) if v.len() == 1 => v.pop().unwrap_or_else(shard_failed),
            _ => shard_failed(),
        };
        let len = reread.read_size;
        left.take(len);
        total += u64::from(len);
        *r = reread;
    }
    (results, total)
}

/// The partitions named in the request, in order. A partition named twice
/// is one entry where it first appears with its last fetch position, as in
/// Kafka, whose FetchRequest collects them into a map.
fn requested_partitions(ctx: &ShardContext, version: i16, request: &FetchRequest) -> Vec<Wanted> {
    let image = ctx.metadata.image();
    let use_ids = version >= 13;
    let mut requested: IndexMap<(String, Uuid, i32), Wanted> = IndexMap::new();
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
            let key = (name.clone(), t.topic_id, p.partition);
            requested.insert(
                key,
                Wanted {
                    topic: name.clone(),
                    topic_id,
                    partition: p.partition,
                    fetch_offset: p.fetch_offset,
                    max_bytes: p.partition_max_bytes,
                    current_leader_epoch: p.current_leader_epoch,
                    last_fetched_epoch: if version >= 12 {
                        p.last_fetched_epoch
                    } else {
                        -1
                    },
                    error,
                },
            );
        }
    }
    requested.into_values().collect()
}

/// A fetch session's answer: the partitions to read, whether only changes
/// are reported, and the session id to answer with.
struct SessionPlan {
    wanted: Vec<Wanted>,
    incremental: bool,
    session_id: i32,
}

/// KIP-227: decides which session this is and which partitions to read;
/// Err is the session error code to answer with.
fn plan_session(
    ctx: &ShardContext,
    version: i16,
    request: &FetchRequest,
    requested: Vec<Wanted>,
    now: u64,
) -> Result<SessionPlan, i16> {
    let session_id = request.session_id;
    let epoch = request.session_epoch;
    let mut sessions = ctx.fetch_sessions.borrow_mut();
    if epoch == FINAL_EPOCH || epoch == INITIAL_EPOCH {
        if session_id != 0 {
            sessions.remove(session_id);
        }
        let mut new_id = 0;
        if epoch == INITIAL_EPOCH && version >= 7 {
            let mut map = IndexMap::new();
            for w in requested.iter().filter(|w| w.error.is_none()) {
                map.insert((w.topic.clone(), w.partition), w.to_cached());
            }
            new_id = sessions.create(map, now);
        }
        return Ok(SessionPlan {
            wanted: requested,
            incremental: false,
            session_id: new_id,
        });
    }
    let session = match sessions.get_for_epoch(session_id, epoch, now) {
        Ok(s) => s,
        Err(SessionError::NotFound) => return Err(errors::FETCH_SESSION_ID_NOT_FOUND),
        Err(SessionError::InvalidEpoch) => return Err(errors::INVALID_FETCH_SESSION_EPOCH),
    };
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
    let image = ctx.metadata.image();
    for f in &request.forgotten_topics_data {
        let name = if version >= 13 {
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
    Ok(SessionPlan {
        wanted: all,
        incremental: true,
        session_id,
    })
}

/// Kafka's limits for one fetch: `max_bytes` capped by the broker's
/// `fetch.max.bytes`, `min_bytes` by that; Fetch v0-v2 (no `max_bytes`)
/// never exceed the limit, later versions by the first batch only.
fn fetch_limits(ctx: &ShardContext, version: i16, request: &FetchRequest) -> (FetchBudget, u64) {
    let max_bytes = request.max_bytes.min(ctx.config.fetch_max_bytes).max(0);
    let min_bytes = request.min_bytes.min(max_bytes).max(0);
    (
        FetchBudget::new(max_bytes as u32, version <= 2),
        min_bytes as u64,
    )
}

/// Parks the fetch until its partitions hold `min_bytes` (Kafka's
/// DelayedFetch), on every shard that owns one.
async fn wait_for_min_bytes(
    ctx: &Rc<ShardContext>,
    wanted: &[Wanted],
    replica_id: i32,
    max_wait_ms: u64,
    min_bytes: u64,
) {
    let mut by_shard: Vec<Vec<FetchPart>> = (0..ctx.nr_shards).map(|_| Vec::new()).collect();
    for w in wanted.iter().filter(|w| w.error.is_none()) {
        by_shard[ctx.owner_of(&w.topic, w.partition)].push(fetch_part(w, replica_id));
    }
    let by_shard: Vec<(usize, Vec<FetchPart>)> = by_shard
        .into_iter()
        .enumerate()
        .filter(|(_, v)| !v.is_empty())
        .collect();
    wait_for_data(ctx, by_shard, max_wait_ms, min_bytes).await;
}

pub async fn handle(ctx: &Rc<ShardContext>, req: &Request) -> HandlerResult {
    let request: FetchRequest = decode_body(req)?;
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
    let requested = requested_partitions(ctx, req.api_version, &request);
    let plan = match plan_session(ctx, req.api_version, &request, requested, now_ms()) {
        Ok(plan) => plan,
        Err(code) => return session_error_response(req, code),
    };
    let (budget, min_bytes) = fetch_limits(ctx, req.api_version, &request);
    let isolation = request.isolation_level;
    let wanted = &plan.wanted;
    let (mut results, total) = read_limited(ctx, wanted, isolation, replica_id, budget).await;
    // Kafka answers at once when it may not wait, has nothing to read,
    // has read enough, or met an error or a diverging epoch.
    let read_error = results
        .iter()
        .flatten()
        .any(|r| r.error_code != errors::NONE || r.diverging_epoch.is_some());
    let readable = wanted.iter().any(|w| w.error.is_none());
    if request.max_wait_ms > 0 && readable && total < min_bytes && !read_error {
        let max_wait_ms = request.max_wait_ms as u64;
        wait_for_min_bytes(ctx, wanted, replica_id, max_wait_ms, min_bytes).await;
        results = read_limited(ctx, wanted, isolation, replica_id, budget)
            .await
            .0;
    }
    let converted = if req.api_version <= 3 {
        Some(down_convert_all(ctx, req.api_version, wanted, &results).await)
    } else {
        None
    };
    let mut topics = response_topics(ctx, &plan, results, isolation);
    if let Some(converted) = converted {
        legacy_format::apply(&mut topics, converted);
    }
    let data = FetchResponseData {
        throttle_time_ms: 0,
        error_code: errors::NONE,
        session_id: plan.session_id,
        topics,
    };
    encode_fetch_response(req.api_version, req.header.correlation_id, data).map(Some)
}

/// Fetch v0-v1 read magic 0, v2-v3 magic 1: every partition's records are
/// down-converted, in request order.
async fn down_convert_all(
    ctx: &Rc<ShardContext>,
    version: i16,
    wanted: &[Wanted],
    results: &[Option<FetchPartResult>],
) -> Vec<Converted> {
    let to_magic = if version <= 1 { 0 } else { 1 };
    let mut out = Vec::with_capacity(wanted.len());
    for (w, r) in wanted.iter().zip(results) {
        out.push(match (w.error, r) {
            (None, Some(r)) => {
                legacy_format::down_convert_partition(
                    ctx,
                    &w.topic,
                    w.partition,
                    w.fetch_offset,
                    r,
                    to_magic,
                )
                .await
            }
            _ => Converted::Unchanged,
        });
    }
    out
}

fn error_partition(w: &Wanted, read_uncommitted: bool) -> FetchPartitionData {
    FetchPartitionData {
        partition: w.partition,
        error_code: w.error.unwrap_or(errors::UNKNOWN_SERVER_ERROR),
        high_watermark: -1,
        last_stable_offset: -1,
        log_start_offset: -1,
        diverging_epoch: None,
        current_leader: None,
        aborted_transactions: (!read_uncommitted).then(Vec::new),
        records: RecordsData::Empty,
    }
}

/// Builds the response topics; incremental sessions report only what changed.
fn response_topics(
    ctx: &ShardContext,
    plan: &SessionPlan,
    results: Vec<Option<FetchPartResult>>,
    isolation_level: i8,
) -> Vec<FetchTopicData> {
    let read_uncommitted = isolation_level == 0;
    let mut topics: Vec<FetchTopicData> = Vec::new();
    let mut sessions = ctx.fetch_sessions.borrow_mut();
    let mut session = if plan.session_id != 0 {
        sessions.get_mut(plan.session_id)
    } else {
        None
    };
    for (w, r) in plan.wanted.iter().zip(results) {
        let data = match (w.error, r) {
            (Some(_), _) | (None, None) => error_partition(w, read_uncommitted),
            (None, Some(r)) => {
                if let Some(c) = session
                    .as_deref_mut()
                    .and_then(|s| s.partitions.get_mut(&(w.topic.clone(), w.partition)))
                {
                    let changed = r.slice.is_some()
                        || r.error_code != errors::NONE
                        || c.high_watermark != r.high_watermark
                        || c.last_stable_offset != r.last_stable_offset
                        || c.log_start_offset != r.log_start_offset;
                    c.high_watermark = r.high_watermark;
                    c.last_stable_offset = r.last_stable_offset;
                    c.log_start_offset = r.log_start_offset;
                    if plan.incremental && !changed {
                        continue;
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
                    aborted_transactions: (!read_uncommitted).then(Vec::new),
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
                name: w.topic.clone(),
                topic_id: w.topic_id,
                partitions: vec![data],
            }),
        }
    }
    topics
}
