//! Fetch (API 1), Kafka's `KafkaApis.handleFetchRequest`: the request's
//! fetch-session context (`session`, KIP-227), reads split by owning shard,
//! long-poll through the purgatory for `max_wait_ms`/`min_bytes`, and a
//! response whose record bytes go to the socket by sendfile.

pub mod session;

use std::rc::Rc;

use indexmap::IndexMap;
use kafka_protocol::messages::FetchRequest;
use uuid::Uuid;

use super::legacy_format::{self, Converted};
use super::HandlerResult;
use crate::handlers::KafkaApis;
use crate::metadata::metadata_cache::MetadataImage;
use crate::protocol::errors::ErrorCode;
use crate::protocol::fetch_encoder::{
    encode_fetch_response, set_fetch_throttle_time, FetchPartitionData, FetchResponseData,
    FetchTopicData, RecordsData,
};
use crate::protocol::{decode_body, errors, Request};
use crate::replica::{FetchBudget, FetchPart, FetchPartResult};
use crate::router::{wait_for_data, ShardGroups};
use crate::router::{ShardRequest, ShardResponse};
use crate::security::authorizer::{AclOperation, ResourceType};
use crate::util::now_ms;
use kshard_shards::log::batch::RECORD_BATCH_OVERHEAD;
use session::{FetchContext, FetchMetadata, PartitionResponse, RequestedPartition};

fn session_error_response(req: &Request, code: ErrorCode) -> HandlerResult {
    let data = FetchResponseData {
        throttle_time_ms: 0,
        error_code: code.code(),
        session_id: 0,
        topics: Vec::new(),
    };
    encode_fetch_response(req.api_version, req.header.correlation_id, data).map(Some)
}

/// Fetch's isolation_level for read_committed consumers.
const READ_COMMITTED: i8 = 1;

fn fetch_part(w: &RequestedPartition, replica_id: i32, isolation_level: i8) -> FetchPart {
    FetchPart {
        // Followers read to the log end whatever they ask.
        read_committed: replica_id < 0 && isolation_level == READ_COMMITTED,
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
        aborted_transactions: Vec::new(),
        leader_throttled: false,
    }
}

/// Reads every wanted partition on its owning shard, all shards at once;
/// each shard applies `budget` to its own partitions in request order.
async fn read_all(
    ctx: &Rc<KafkaApis>,
    wanted: &[RequestedPartition],
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
                fetch_part(w, replica_id, isolation_level),
            );
        }
    }
    by_shard
        .run(
            &ctx.router,
            &mut out,
            |parts| ShardRequest::Fetch { parts, budget },
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
    ctx: &Rc<KafkaApis>,
    wanted: &[RequestedPartition],
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
            parts: vec![fetch_part(w, replica_id, isolation_level)],
            budget: left,
        };
        let owner = ctx.owner_of(&w.topic, w.partition);
        let reread = match ctx.router.run_on(owner, request).await {
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
fn requested_partitions(
    image: &MetadataImage,
    version: i16,
    request: &FetchRequest,
) -> Vec<RequestedPartition> {
    let use_ids = version >= 13;
    let mut requested: IndexMap<(String, Uuid, i32), RequestedPartition> = IndexMap::new();
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
                RequestedPartition {
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

/// The partitions an incremental request drops from its session; a topic
/// id the broker does not know names no cached partition.
fn forgotten_partitions(
    image: &MetadataImage,
    version: i16,
    request: &FetchRequest,
) -> Vec<(String, i32)> {
    let mut forgotten = Vec::new();
    for f in &request.forgotten_topics_data {
        let name = if version >= 13 {
            image
                .topic_by_id(&f.topic_id)
                .map(|i| i.name.clone())
                .unwrap_or_default()
        } else {
            f.topic.0.to_string()
        };
        forgotten.extend(f.partitions.iter().map(|p| (name.clone(), *p)));
    }
    forgotten
}

/// The fetch session's context for this request (KIP-227).
fn new_context(ctx: &KafkaApis, version: i16, request: &FetchRequest) -> FetchContext {
    let image = ctx.metadata.image();
    let requested = requested_partitions(&image, version, request);
    let metadata = FetchMetadata {
        session_id: request.session_id,
        epoch: request.session_epoch,
    };
    let forgotten = if metadata.is_full() {
        Vec::new()
    } else {
        forgotten_partitions(&image, version, request)
    };
    let mut sessions = ctx.fetch_sessions.borrow_mut();
    sessions.new_context(version, metadata, requested, &forgotten, now_ms())
}

/// Kafka's limits for one fetch: `max_bytes` capped by the broker's
/// `fetch.max.bytes`, `min_bytes` by that; Fetch v0-v2 (no `max_bytes`)
/// never exceed the limit, later versions by the first batch only.
fn fetch_limits(
    ctx: &KafkaApis,
    req: &Request,
    request: &FetchRequest,
    replica_id: i32,
) -> (FetchBudget, u64) {
    let version = req.api_version;
    let mut max_bytes = request.max_bytes.min(ctx.config.fetch_max_bytes).max(0);
    if replica_id < 0 {
        // A consumer with a byte-rate quota gets at most what the quota
        // allows over its window in one response (getMaxValueInQuotaWindow).
        let client_id = req.header.client_id.as_deref().unwrap_or("");
        if let Some(cap) =
            ctx.quota_caches
                .fetch_bytes_cap(&ctx.quotas, &req.principal.name, client_id)
        {
            max_bytes = max_bytes.min(i32::try_from(cap).unwrap_or(i32::MAX));
        }
    }
    let min_bytes = request.min_bytes.min(max_bytes).max(0);
    (
        FetchBudget::new(max_bytes as u32, version <= 2),
        min_bytes as u64,
    )
}

/// Parks the fetch until its partitions hold `min_bytes` (Kafka's
/// DelayedFetch), on every shard that owns one.
async fn wait_for_min_bytes(
    ctx: &Rc<KafkaApis>,
    wanted: &[RequestedPartition],
    replica_id: i32,
    isolation_level: i8,
    max_wait_ms: u64,
    min_bytes: u64,
) {
    let mut by_shard: Vec<Vec<FetchPart>> = (0..ctx.nr_shards).map(|_| Vec::new()).collect();
    for w in wanted.iter().filter(|w| w.error.is_none()) {
        by_shard[ctx.owner_of(&w.topic, w.partition)].push(fetch_part(
            w,
            replica_id,
            isolation_level,
        ));
    }
    let by_shard: Vec<(usize, Vec<FetchPart>)> = by_shard
        .into_iter()
        .enumerate()
        .filter(|(_, v)| !v.is_empty())
        .collect();
    wait_for_data(&ctx.router, by_shard, max_wait_ms, min_bytes).await;
}

/// A follower names itself by replica id (v15+: in replica_state); a
/// consumer is -1.
fn fetch_replica_id(ctx: &KafkaApis, version: i16, request: &FetchRequest) -> Result<i32, String> {
    let replica_id = if version >= 15 {
        request.replica_state.replica_id.0
    } else {
        request.replica_id.0
    };
    if replica_id >= 0 && ctx.cluster.is_none() {
        return Err(format!(
            "Fetch from replica {replica_id} on a single-broker kshard"
        ));
    }
    Ok(replica_id)
}

pub async fn handle(ctx: &Rc<KafkaApis>, req: &Request) -> HandlerResult {
    let request: FetchRequest = decode_body(req)?;
    let replica_id = fetch_replica_id(ctx, req.api_version, &request)?;
    let mut context = new_context(ctx, req.api_version, &request);
    if let FetchContext::SessionError { error_code } = context {
        return session_error_response(req, error_code);
    }
    authorize_partitions(ctx, req, replica_id, context.partitions_mut());
    let partitions = context.partitions();
    let results = read_or_wait(ctx, req, &request, partitions, replica_id).await;
    encode_response(
        ctx,
        req,
        &context,
        results,
        request.isolation_level,
        replica_id,
    )
    .await
}

/// KafkaApis.handleFetchRequest's checks: a follower needs CLUSTER_ACTION
/// (or every partition fails with TOPIC_AUTHORIZATION_FAILED), a consumer
/// READ on each topic, checked after unknown topic ids and before
/// existence, so an unauthorized client learns nothing of a topic.
fn authorize_partitions(
    ctx: &KafkaApis,
    req: &Request,
    replica_id: i32,
    partitions: &mut [RequestedPartition],
) {
    if ctx.authorizer.is_none() {
        return;
    }
    if replica_id >= 0 {
        if !ctx.authorize_cluster(req, AclOperation::ClusterAction) {
            for p in partitions {
                p.error = Some(errors::TOPIC_AUTHORIZATION_FAILED);
            }
        }
        return;
    }
    // A topic's partitions are next to each other: one check per run.
    let mut last: Option<(String, bool)> = None;
    for p in partitions {
        if p.error == Some(errors::UNKNOWN_TOPIC_ID) {
            continue;
        }
        let allowed = match &last {
            Some((topic, allowed)) if *topic == p.topic => *allowed,
            _ => {
                let allowed = ctx.authorize(req, AclOperation::Read, ResourceType::Topic, &p.topic);
                last = Some((p.topic.clone(), allowed));
                allowed
            }
        };
        if !allowed {
            p.error = Some(errors::TOPIC_AUTHORIZATION_FAILED);
        }
    }
}

/// Reads at once; when Kafka would park the fetch (a DelayedFetch), waits
/// for `min_bytes` or `max_wait_ms` and reads again.
async fn read_or_wait(
    ctx: &Rc<KafkaApis>,
    req: &Request,
    request: &FetchRequest,
    wanted: &[RequestedPartition],
    replica_id: i32,
) -> Vec<Option<FetchPartResult>> {
    let (budget, min_bytes) = fetch_limits(ctx, req, request, replica_id);
    let isolation = request.isolation_level;
    let (results, total) = read_limited(ctx, wanted, isolation, replica_id, budget).await;
    if !must_wait(request, wanted, &results, total, min_bytes) {
        return results;
    }
    let max_wait_ms = request.max_wait_ms as u64;
    wait_for_min_bytes(ctx, wanted, replica_id, isolation, max_wait_ms, min_bytes).await;
    read_limited(ctx, wanted, isolation, replica_id, budget)
        .await
        .0
}

/// Kafka answers at once when it may not wait, has nothing to read, has
/// read enough, or met an error or a diverging epoch.
fn must_wait(
    request: &FetchRequest,
    wanted: &[RequestedPartition],
    results: &[Option<FetchPartResult>],
    total_bytes: u64,
    min_bytes: u64,
) -> bool {
    let read_error = results
        .iter()
        .flatten()
        .any(|r| r.error_code != errors::NONE || r.diverging_epoch.is_some());
    let readable = wanted.iter().any(|w| w.error.is_none());
    request.max_wait_ms > 0 && readable && total_bytes < min_bytes && !read_error
}

/// The response: records down-converted for Fetch v0-v3, and only news
/// for an incremental session.
async fn encode_response(
    ctx: &Rc<KafkaApis>,
    req: &Request,
    context: &FetchContext,
    results: Vec<Option<FetchPartResult>>,
    isolation_level: i8,
    replica_id: i32,
) -> HandlerResult {
    if replica_id < 0 {
        if let Some(throttled) = throttled_fetch(ctx, req, context, &results) {
            return throttled;
        }
    } else {
        record_leader_throttled_bytes(ctx, &results);
    }
    let converted = if req.api_version <= 3 {
        Some(down_convert_all(ctx, req.api_version, context.partitions(), &results).await)
    } else {
        None
    };
    let mut topics = response_topics(ctx, context, results, isolation_level);
    if let Some(converted) = converted {
        legacy_format::apply(&mut topics, converted);
    }
    let data = FetchResponseData {
        throttle_time_ms: 0,
        error_code: errors::NONE.code(),
        session_id: context.session_id(),
        topics,
    };
    encode_fetch_response(req.api_version, req.header.correlation_id, data).map(Some)
}

/// Kafka's KafkaApis for a follower's fetch: the bytes of the partitions
/// throttled for leaders on this broker count against the leader
/// replication quota, whatever the follower's ISR membership (so the total
/// replication traffic of throttled partitions stays under the bound).
/// kshard counts their records' bytes (Kafka the size of a response made
/// of them alone). Without throttled partitions this reads no clock and
/// touches no shared state.
fn record_leader_throttled_bytes(ctx: &KafkaApis, results: &[Option<FetchPartResult>]) {
    let bytes: u64 = results
        .iter()
        .flatten()
        .filter(|r| r.leader_throttled)
        .map(|r| u64::from(r.read_size))
        .sum();
    if bytes > 0 {
        ctx.quotas.leader.record(bytes, crate::util::monotonic_ms());
    }
}

/// Bytes a partition's entry adds to a response beside its records (an
/// estimate of Kafka's FetchResponse.sizeOf: the fixed fields).
const PARTITION_RESPONSE_OVERHEAD_BYTES: usize = 48;

/// Kafka's fetch quota for a consumer: the response's size is charged to
/// it; over quota, the bytes are taken back and the answer is empty, with
/// the throttle time, and the connection is muted for that long. The
/// session is left as it was, so the next fetch gets what this one would
/// have.
fn throttled_fetch(
    ctx: &KafkaApis,
    req: &Request,
    context: &FetchContext,
    results: &[Option<FetchPartResult>],
) -> Option<HandlerResult> {
    let bytes: usize = results
        .iter()
        .flatten()
        .map(|r| r.read_size as usize + PARTITION_RESPONSE_OVERHEAD_BYTES)
        .sum();
    let client_id = req.header.client_id.as_deref().unwrap_or("");
    let throttle_ms = ctx.quota_caches.record_fetch(
        &ctx.quotas,
        &req.principal.name,
        client_id,
        bytes,
        crate::util::monotonic_ms(),
    );
    if throttle_ms == 0 {
        return None;
    }
    let data = FetchResponseData {
        throttle_time_ms: 0,
        error_code: errors::NONE.code(),
        session_id: context.session_id(),
        topics: Vec::new(),
    };
    Some(
        encode_fetch_response(req.api_version, req.header.correlation_id, data).map(|mut r| {
            set_fetch_throttle_time(&mut r, req.api_version, throttle_ms);
            Some(r)
        }),
    )
}

/// Fetch v0-v1 read magic 0, v2-v3 magic 1: every partition's records are
/// down-converted, in request order.
async fn down_convert_all(
    ctx: &Rc<KafkaApis>,
    version: i16,
    wanted: &[RequestedPartition],
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

fn error_partition(w: &RequestedPartition, read_uncommitted: bool) -> FetchPartitionData {
    FetchPartitionData {
        partition: w.partition,
        error_code: w.error.unwrap_or(errors::UNKNOWN_SERVER_ERROR).code(),
        high_watermark: -1,
        last_stable_offset: -1,
        log_start_offset: -1,
        diverging_epoch: None,
        current_leader: None,
        aborted_transactions: (!read_uncommitted).then(Vec::new),
        records: RecordsData::Empty,
    }
}

fn partition_response(r: &FetchPartResult) -> PartitionResponse {
    PartitionResponse {
        has_records: r.slice.is_some(),
        error_code: r.error_code,
        high_watermark: r.high_watermark,
        last_stable_offset: r.last_stable_offset,
        log_start_offset: r.log_start_offset,
    }
}

fn read_partition(
    partition: i32,
    r: FetchPartResult,
    read_uncommitted: bool,
) -> FetchPartitionData {
    FetchPartitionData {
        partition,
        error_code: r.error_code.code(),
        high_watermark: r.high_watermark,
        last_stable_offset: r.last_stable_offset,
        log_start_offset: r.log_start_offset,
        diverging_epoch: r.diverging_epoch,
        current_leader: None,
        aborted_transactions: (!read_uncommitted).then_some(r.aborted_transactions),
        records: match r.slice {
            Some(s) => RecordsData::File(s),
            None => RecordsData::Empty,
        },
    }
}

/// Builds the response topics; incremental sessions report only what changed.
fn response_topics(
    ctx: &KafkaApis,
    context: &FetchContext,
    results: Vec<Option<FetchPartResult>>,
    isolation_level: i8,
) -> Vec<FetchTopicData> {
    let read_uncommitted = isolation_level == 0;
    let mut topics: Vec<FetchTopicData> = Vec::new();
    let mut sessions = ctx.fetch_sessions.borrow_mut();
    let mut updater = context.response_updater(&mut sessions);
    for (w, r) in context.partitions().iter().zip(results) {
        let data = match (w.error, r) {
            (Some(_), _) | (None, None) => error_partition(w, read_uncommitted),
            (None, Some(r)) => {
                if !updater.must_respond(&w.topic, w.partition, &partition_response(&r)) {
                    continue;
                }
                read_partition(w.partition, r, read_uncommitted)
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
    updater.finish();
    topics
}
