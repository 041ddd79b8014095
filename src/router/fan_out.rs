//! Fan-out over shards: a request's parts grouped by owning shard and run
//! on all of them at once (`ShardGroups`), the long-poll wait across shards
//! (`wait_for_data`), and the small future combinators they use.

use std::rc::Rc;
use std::time::Duration;

use kshard_shards::mailbox::LocalBoxFuture;

use super::{Router, ShardRequest, ShardResponse};
use crate::protocol::errors;
use crate::protocol::errors::ErrorCode;
use crate::replica::delayed_fetch::FetchWaitState;
use crate::replica::{FetchPart, TxnMarkerPart};

/// Parks the fetch on every listed shard (Kafka's DelayedFetch), returning
/// when one of them completes it (`min_bytes` reached across all shards, or
/// an answer is due) or `max_wait_ms` passes.
pub async fn wait_for_data(
    router: &Rc<Router>,
    by_shard: Vec<(usize, Vec<FetchPart>)>,
    max_wait_ms: u64,
    min_bytes: u64,
) {
    let state = FetchWaitState::new(min_bytes, by_shard.len());
    let mut waits: Vec<LocalBoxFuture<()>> = Vec::with_capacity(by_shard.len());
    for (slot, (shard, parts)) in by_shard.into_iter().enumerate() {
        let router = router.clone();
        let state = state.clone();
        waits.push(Box::pin(async move {
            let _ = router
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

/// WriteTxnMarkers for partitions of this broker: each shard's markers
/// written on it; one error per part, in order (REQUEST_TIMED_OUT, which
/// the coordinator retries, if a shard cannot be reached).
pub async fn write_txn_markers(
    router: &Rc<Router>,
    parts: Vec<TxnMarkerPart>,
    timeout_ms: u64,
) -> Vec<ErrorCode> {
    let mut out: Vec<Option<ErrorCode>> = vec![None; parts.len()];
    let mut groups = ShardGroups::new(router.nr_shards);
    for (i, p) in parts.into_iter().enumerate() {
        groups.push(router.owner_of(&p.topic, p.partition), i, p);
    }
    groups
        .run(
            router,
            &mut out,
            |parts| ShardRequest::WriteTxnMarkers { parts, timeout_ms },
            |reply| match reply {
                ShardResponse::TxnMarkers(codes) => Some(codes),
                _ => None,
            },
            || errors::REQUEST_TIMED_OUT,
        )
        .await;
    out.into_iter()
        .map(|c| c.expect("every part answered"))
        .collect()
}

pub async fn select_first(futs: Vec<LocalBoxFuture<()>>) {
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

    /// Visits every part with its shard and request index; a part for
    /// which `f` returns false is dropped.
    pub fn retain_mut(&mut self, mut f: impl FnMut(usize, usize, &mut P) -> bool) {
        for (shard, (idxs, parts)) in self.groups.iter_mut().enumerate() {
            let mut i = 0;
            while i < parts.len() {
                if f(shard, idxs[i], &mut parts[i]) {
                    i += 1;
                } else {
                    idxs.remove(i);
                    parts.remove(i);
                }
            }
        }
    }

    /// Runs every group on its shard at once (`make` builds the request,
    /// `unpack` takes the results out of the reply) and stores each result
    /// at its request index; groups whose shard fails get `fail()`.
    pub async fn run<R: 'static>(
        self,
        router: &Rc<Router>,
        out: &mut [Option<R>],
        make: impl Fn(Vec<P>) -> ShardRequest,
        unpack: impl Fn(ShardResponse) -> Option<Vec<R>> + Clone + 'static,
        fail: impl Fn() -> R,
    ) {
        type GroupReply<R> = (Vec<usize>, Option<Vec<R>>);
        let mut calls: Vec<LocalBoxFuture<GroupReply<R>>> = Vec::new();
        // This shard's own group last: `join_all` polls in order, so the
        // other shards get their parts before the local part runs (its
        // synchronous half runs at the first poll). They work meanwhile, and
        // a reply that arrives while this shard is still busy needs no
        // wake-up of a parked executor.
        let nr_shards = self.groups.len();
        let mut groups = self.groups;
        for k in 1..=nr_shards {
            let shard = (router.shard_id + k) % nr_shards;
            let (idxs, parts) = std::mem::take(&mut groups[shard]);
            if parts.is_empty() {
                continue;
            }
            let router = router.clone();
            let req = make(parts);
            let unpack = unpack.clone();
            calls.push(Box::pin(async move {
                let reply = router.run_on(shard, req).await.ok().and_then(unpack);
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
