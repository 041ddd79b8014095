//! Runs a `ShardRequest` on the shard that received it: partition work on the
//! owning shard, topic admin on the controller shard. The synchronous part
//! (appends in particular) runs before the returned future is first polled,
//! so requests are applied in arrival order.

use std::rc::Rc;
use std::time::Duration;

use kshard_shards::mailbox::LocalBoxFuture;
use kshard_shards::oneshot;

use crate::delayed_fetch::{DelayedFetch, FetchWaitState};
use crate::delayed_produce::{DelayedProduce, ProduceWait};
use crate::handlers;
use crate::protocol::errors;
use crate::replica_manager::FetchPart;
use crate::shard_context::{now_ms, ShardContext, ShardRequest, ShardResponse};

/// The longest a role change or close waits for staged appends to land.
const QUIESCE_TIMEOUT: Duration = Duration::from_secs(10);

/// Runs `apply` on partitions `ids` at once if none has staged appends
/// (always so in buffered mode, keeping arrival order); otherwise fences
/// their appends, waits for the staged ones to be written, then applies.
fn run_quiesced<R: 'static>(
    ctx: Rc<ShardContext>,
    ids: Vec<(String, i32)>,
    apply: impl FnOnce(&Rc<ShardContext>) -> R + 'static,
    wrap: impl FnOnce(R) -> ShardResponse + 'static,
) -> LocalBoxFuture<ShardResponse> {
    let selects = move |ids: &[(String, i32)], t: &str, p: i32| {
        ids.iter().any(|(it, ip)| it == t && *ip == p)
    };
    let busy = ctx
        .replica_manager
        .borrow()
        .any_staged_writes(|t, p| selects(&ids, t, p));
    if !busy {
        let r = apply(&ctx);
        return Box::pin(async move { wrap(r) });
    }
    Box::pin(async move {
        ctx.quiesce_direct_writes(|t, p| selects(&ids, t, p), QUIESCE_TIMEOUT)
            .await;
        let r = apply(&ctx);
        ctx.unfence_appends(|t, p| selects(&ids, t, p));
        wrap(r)
    })
}

pub fn handle_shard_request(
    ctx: Rc<ShardContext>,
    req: ShardRequest,
) -> LocalBoxFuture<ShardResponse> {
    match req {
        ShardRequest::Produce {
            parts,
            acks,
            timeout_ms,
        } => {
            let now = now_ms() as i64;
            let mut waiting = Vec::new();
            let results: Vec<_> = {
                let mut rm = ctx.replica_manager.borrow_mut();
                parts
                    .iter()
                    .enumerate()
                    .map(|(i, p)| {
                        if acks == -1 {
                            if let Some(code) = rm.check_enough_replicas(&p.topic, p.partition) {
                                return crate::replica_manager::ProducePartResult {
                                    error_code: code,
                                    error_message: None,
                                    record_errors: Vec::new(),
                                    base_offset: -1,
                                    log_append_time_ms: -1,
                                    log_start_offset: -1,
                                };
                            }
                        }
                        let r = rm.append(p, now, true);
                        if r.error_code != errors::NONE {
                            return r;
                        }
                        // acks=all waits for the high watermark; acks=1 for
                        // a staged (direct-mode) append to be written. A
                        // duplicate waits for everything staged before it.
                        let wait = match acks {
                            -1 => rm
                                .uncommitted_end(&p.topic, p.partition)
                                .map(|offset| (offset, true)),
                            1 => rm
                                .unwritten_end(&p.topic, p.partition)
                                .map(|offset| (offset, false)),
                            _ => None,
                        };
                        if let Some((required_offset, until_high_watermark)) = wait {
                            waiting.push(Some(ProduceWait {
                                topic: p.topic.clone(),
                                partition: p.partition,
                                required_offset,
                                until_high_watermark,
                                index: i,
                            }));
                        }
                        r
                    })
                    .collect()
            };
            for (p, r) in parts.iter().zip(&results) {
                if r.error_code == errors::NONE {
                    // Staged appends need their writer; written ones wake
                    // followers' fetches (and consumers', if the HW moved).
                    ctx.schedule_direct_write(&p.topic, p.partition);
                    ctx.on_high_watermark_advanced(&p.topic, p.partition);
                }
            }
            if waiting.is_empty() {
                return Box::pin(async move { ShardResponse::Produce(results) });
            }
            let (tx, rx) = oneshot::channel();
            let keys: Vec<(String, i32)> = waiting
                .iter()
                .flatten()
                .map(|w| (w.topic.clone(), w.partition))
                .collect();
            let op = DelayedProduce {
                waiting,
                results,
                done: Some(tx),
            };
            ctx.watch_produce(op, now as u64 + timeout_ms, &keys);
            Box::pin(async move {
                match rx.await {
                    Ok(r) => ShardResponse::Produce(r),
                    Err(_) => ShardResponse::Produce(Vec::new()),
                }
            })
        }
        ShardRequest::Fetch {
            parts,
            isolation_level: _,
            mut budget,
        } => {
            let now = now_ms() as i64;
            let results = {
                let mut rm = ctx.replica_manager.borrow_mut();
                parts.iter().map(|p| rm.read(p, &mut budget, now)).collect()
            };
            // A follower's fetch may move the high watermark or the ISR.
            for p in parts.iter().filter(|p| p.replica_id >= 0) {
                ctx.on_high_watermark_advanced(&p.topic, p.partition);
            }
            if parts.iter().any(|p| p.replica_id >= 0) {
                ctx.schedule_alter_isr();
            }
            Box::pin(async move { ShardResponse::Fetch(results) })
        }
        ShardRequest::WaitForData {
            parts,
            max_wait_ms,
            state,
            slot,
        } => {
            let (tx, rx) = oneshot::channel();
            let keys: Vec<(String, i32)> = parts
                .iter()
                .map(|p| (p.topic.clone(), p.partition))
                .collect();
            let op = DelayedFetch {
                parts,
                state,
                slot,
                done: Some(tx),
            };
            ctx.watch_fetch(op, now_ms() + max_wait_ms, &keys);
            Box::pin(async move {
                let _ = rx.await;
                ShardResponse::Done
            })
        }
        ShardRequest::ListOffsets {
            parts,
            isolation_level: _,
        } => {
            let rm = ctx.replica_manager.borrow();
            let results = parts.iter().map(|p| rm.list_offset(p)).collect();
            Box::pin(async move { ShardResponse::ListOffsets(results) })
        }
        ShardRequest::LegacyListOffsets { parts } => {
            let rm = ctx.replica_manager.borrow();
            let now = now_ms() as i64;
            let results = parts
                .iter()
                .map(|p| rm.legacy_offsets_before(p, now))
                .collect();
            Box::pin(async move { ShardResponse::LegacyListOffsets(results) })
        }
        ShardRequest::DeleteRecords { parts } => {
            let mut rm = ctx.replica_manager.borrow_mut();
            let results = parts
                .iter()
                .map(|(t, p, o)| rm.delete_records(t, *p, *o))
                .collect();
            Box::pin(async move { ShardResponse::DeleteRecords(results) })
        }
        ShardRequest::OffsetForLeaderEpoch { parts } => {
            let rm = ctx.replica_manager.borrow();
            let results = parts
                .iter()
                .map(|(t, p, cur, epoch)| rm.offset_for_leader_epoch(t, *p, *cur, *epoch))
                .collect();
            Box::pin(async move { ShardResponse::OffsetForLeaderEpoch(results) })
        }
        ShardRequest::OpenLogs { topic, partitions } => {
            let r = ctx.replica_manager.borrow_mut().open_partitions(
                &topic,
                &partitions,
                now_ms() as i64,
            );
            if let Err(e) = r {
                log::error!("opening logs of {}: {e}", topic.name);
            }
            Box::pin(async move { ShardResponse::Done })
        }
        ShardRequest::DeleteLogs { topic } => {
            let delete = move |ctx: &ShardContext, topic: &str| {
                let ids = ctx.replica_manager.borrow().partition_ids(topic);
                if let Err(e) = ctx.replica_manager.borrow_mut().delete_topic(topic) {
                    log::error!("deleting logs of {topic}: {e}");
                }
                // Fetches parked on the deleted partitions complete with the error.
                for p in ids {
                    ctx.on_high_watermark_advanced(topic, p);
                }
                ctx.fetch_sessions.borrow_mut().forget_topic(topic);
            };
            let selects = |t: &str, _: i32| t == topic;
            if !ctx.replica_manager.borrow().any_staged_writes(selects) {
                delete(&ctx, &topic);
                return Box::pin(async move { ShardResponse::Done });
            }
            Box::pin(async move {
                let selects = |t: &str, _: i32| t == topic;
                ctx.quiesce_direct_writes(selects, QUIESCE_TIMEOUT).await;
                delete(&ctx, &topic);
                ShardResponse::Done
            })
        }
        ShardRequest::UpdateTopicConfig { topic } => {
            ctx.replica_manager.borrow_mut().update_topic_config(&topic);
            Box::pin(async move { ShardResponse::Done })
        }
        ShardRequest::Forward { req } => Box::pin(async move {
            ShardResponse::Forwarded(handlers::controller_dispatch(&ctx, req).await)
        }),
        ShardRequest::AutoCreateTopics { names } => Box::pin(async move {
            ShardResponse::AutoCreated(crate::controller::auto_create_topics(&ctx, &names).await)
        }),
        ShardRequest::AllocateProducerId if ctx.cluster.is_some() => {
            let cluster = ctx.cluster.clone().expect("cluster mode");
            Box::pin(async move { ShardResponse::ProducerId(cluster.allocate_producer_id().await) })
        }
        ShardRequest::AllocateProducerId => {
            let r = match &ctx.controller {
                Some(c) => c.borrow_mut().allocate_producer_id(),
                None => Err(errors::NOT_CONTROLLER),
            };
            Box::pin(async move { ShardResponse::ProducerId(r) })
        }
        ShardRequest::CollectCheckpoints => {
            let entries = ctx.replica_manager.borrow().checkpoints();
            Box::pin(async move { ShardResponse::Checkpoints(entries) })
        }
        ShardRequest::BecomeLeaderOrFollower {
            topic,
            parts,
            leaders,
        } => {
            let ids: Vec<(String, i32)> = parts
                .iter()
                .map(|p| (topic.name.clone(), p.partition))
                .collect();
            let apply = move |ctx: &Rc<ShardContext>| {
                let codes = ctx.replica_manager.borrow_mut().become_leader_or_follower(
                    &topic,
                    &parts,
                    ctx.broker_id(),
                    now_ms() as i64,
                );
                update_fetchers(ctx, &topic, &parts, &codes, &leaders);
                // Fetches and produces parked on partitions that changed role re-check.
                for p in &parts {
                    ctx.on_high_watermark_advanced(&topic.name, p.partition);
                }
                codes
            };
            run_quiesced(ctx, ids, apply, ShardResponse::PartitionErrors)
        }
        ShardRequest::StopReplicas {
            topic,
            parts,
            delete,
        } => {
            let ids: Vec<(String, i32)> = parts.iter().map(|(p, _)| (topic.clone(), *p)).collect();
            let apply = move |ctx: &Rc<ShardContext>| {
                let codes = ctx
                    .replica_manager
                    .borrow_mut()
                    .stop_replicas(&topic, &parts, delete);
                for (p, _) in &parts {
                    ctx.on_high_watermark_advanced(&topic, *p);
                }
                if delete {
                    ctx.fetch_sessions.borrow_mut().forget_topic(&topic);
                }
                codes
            };
            run_quiesced(ctx, ids, apply, ShardResponse::PartitionErrors)
        }
        ShardRequest::InterBroker {
            api_key,
            api_version,
            body,
        } => Box::pin(async move {
            ShardResponse::InterBroker(
                handlers::inter_broker::handle_on_controller_shard(
                    &ctx,
                    api_key,
                    api_version,
                    body,
                )
                .await,
            )
        }),
    }
}

/// makeFollowers / makeLeaders for the fetchers: followed partitions fetch
/// from their new leader, led ones stop fetching.
fn update_fetchers(
    ctx: &Rc<ShardContext>,
    topic: &crate::metadata_cache::TopicInfo,
    parts: &[crate::replica_manager::RoleChange],
    codes: &[i16],
    leaders: &[(i32, String, u16)],
) {
    use crate::replica_fetcher::{FollowedPartition, LeaderEndpoint};
    let me = ctx.broker_id();
    let mut stop = Vec::new();
    let mut by_leader: std::collections::BTreeMap<i32, Vec<FollowedPartition>> = Default::default();
    for (rc, code) in parts.iter().zip(codes) {
        if *code != errors::NONE {
            continue;
        }
        if rc.leader == me || rc.leader < 0 {
            stop.push((topic.name.clone(), rc.partition));
        } else {
            by_leader
                .entry(rc.leader)
                .or_default()
                .push(FollowedPartition {
                    topic: topic.name.clone(),
                    partition: rc.partition,
                    topic_id: topic.topic_id,
                    leader_epoch: rc.leader_epoch,
                });
        }
    }
    let mut fetchers = ctx.replica_fetchers.borrow_mut();
    fetchers.remove_partitions(&stop);
    for (leader, followed) in by_leader {
        match leaders.iter().find(|l| l.0 == leader) {
            Some((_, host, port)) => fetchers.add_partitions(
                ctx,
                LeaderEndpoint {
                    broker_id: leader,
                    host: host.clone(),
                    port: *port,
                },
                followed,
            ),
            None => log::warn!(
                "no endpoint for leader {leader} of {}; not fetching",
                topic.name
            ),
        }
    }
}

/// Parks the fetch on every listed shard (Kafka's DelayedFetch), returning
/// when one of them completes it (`min_bytes` reached across all shards, or
/// an answer is due) or `max_wait_ms` passes.
pub async fn wait_for_data(
    ctx: &Rc<ShardContext>,
    by_shard: Vec<(usize, Vec<FetchPart>)>,
    max_wait_ms: u64,
    min_bytes: u64,
) {
    let state = FetchWaitState::new(min_bytes, by_shard.len());
    let mut waits: Vec<LocalBoxFuture<()>> = Vec::with_capacity(by_shard.len());
    for (slot, (shard, parts)) in by_shard.into_iter().enumerate() {
        let ctx = ctx.clone();
        let state = state.clone();
        waits.push(Box::pin(async move {
            let _ = ctx
                .run_on(
                    shard,
                    ShardRequest::WaitForData {
                        parts,
                        max_wait_ms,
                        state,
                        slot,
                    },
                )
                .await;
        }));
    }
    let deadline = glommio::timer::sleep(Duration::from_millis(max_wait_ms + 50));
    futures_lite::future::or(select_first(waits), deadline).await;
}

async fn select_first(futs: Vec<LocalBoxFuture<()>>) {
    if futs.is_empty() {
        return;
    }
    let mut futs = futs;
    std::future::poll_fn(move |cx| {
        for f in futs.iter_mut() {
            if f.as_mut().poll(cx).is_ready() {
                return std::task::Poll::Ready(());
            }
        }
        std::task::Poll::Pending
    })
    .await
}

/// Awaits every future, returning their outputs in order.
pub async fn join_all<T>(futs: Vec<LocalBoxFuture<T>>) -> Vec<T> {
    let mut futs: Vec<Option<LocalBoxFuture<T>>> = futs.into_iter().map(Some).collect();
    let mut out: Vec<Option<T>> = futs.iter().map(|_| None).collect();
    std::future::poll_fn(move |cx| {
        let mut pending = false;
        for (i, slot) in futs.iter_mut().enumerate() {
            if let Some(f) = slot {
                match f.as_mut().poll(cx) {
                    std::task::Poll::Ready(v) => {
                        out[i] = Some(v);
                        *slot = None;
                    }
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(
                out.iter_mut()
                    .map(|o| o.take().expect("completed"))
                    .collect(),
            )
        }
    })
    .await
}

/// Parts of one request grouped by owning shard, each with its index in
/// the request.
pub struct ShardGroups<P> {
    groups: Vec<(Vec<usize>, Vec<P>)>,
}

impl<P: 'static> ShardGroups<P> {
    pub fn new(nr_shards: usize) -> Self {
        ShardGroups {
            groups: (0..nr_shards).map(|_| (Vec::new(), Vec::new())).collect(),
        }
    }

    pub fn push(&mut self, shard: usize, request_index: usize, part: P) {
        self.groups[shard].0.push(request_index);
        self.groups[shard].1.push(part);
    }

    /// Runs every group on its shard at once (`make` builds the request,
    /// `unpack` takes the results out of the reply) and stores each result
    /// at its request index; groups whose shard fails get `fail()`.
    pub async fn run<R: 'static>(
        self,
        ctx: &Rc<ShardContext>,
        out: &mut [Option<R>],
        make: impl Fn(Vec<P>) -> ShardRequest,
        unpack: impl Fn(ShardResponse) -> Option<Vec<R>> + Clone + 'static,
        fail: impl Fn() -> R,
    ) {
        type GroupReply<R> = (Vec<usize>, Option<Vec<R>>);
        let mut calls: Vec<LocalBoxFuture<GroupReply<R>>> = Vec::new();
        for (shard, (idxs, parts)) in self.groups.into_iter().enumerate() {
            if parts.is_empty() {
                continue;
            }
            let ctx = ctx.clone();
            let req = make(parts);
            let unpack = unpack.clone();
            calls.push(Box::pin(async move {
                let reply = ctx.run_on(shard, req).await.ok().and_then(unpack);
                (idxs, reply)
            }));
        }
        for (idxs, reply) in join_all(calls).await {
            match reply {
                Some(rs) if rs.len() == idxs.len() => {
                    for (i, r) in idxs.into_iter().zip(rs) {
                        out[i] = Some(r);
                    }
                }
                _ => {
                    for i in idxs {
                        out[i] = Some(fail());
                    }
                }
            }
        }
    }
}
