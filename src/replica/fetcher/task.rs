//! One fetcher task (Kafka's ReplicaFetcherThread): a connection to one
//! leader, one Fetch at a time for every ready partition it follows from
//! there. Everything that touches a `Partition` runs synchronously between
//! awaits, so no borrow of the replica manager is ever held across one.

use std::cell::RefCell;
use std::future::Future;
use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::rc::{Rc, Weak};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use bytes::Bytes;
use glommio::net::TcpStream;
use indexmap::IndexMap;
use kafka_protocol::messages::ApiKey;
use uuid::Uuid;

use super::process::{
    apply_fetched_partition, apply_out_of_range, fetch_request_for, FetchOutcome,
};
use super::protocol::{
    decode_fetch_response, decode_list_offsets_response, encode_frame, fetch_version,
    follower_fetch_request, list_offsets_request, response_body, FetchSettings,
    PartitionFetchRequest, EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, LIST_OFFSETS_VERSION,
};
use super::LeaderEndpoint;
use crate::protocol::errors;
use crate::replica::partition::Partition;
use crate::replica::quota::{is_follower_throttled, should_follower_throttle};
use crate::replica::{ReplicaManager, ReplicaQuota};
use crate::security::inter_broker::{
    connect_failure_level, exchange_frame, ClientStream, InterBrokerSecurity,
};
use crate::util::{now_ms, tcp_socket};

pub(crate) const MIN_BACKOFF_MS: u64 = 100;
pub(crate) const MAX_BACKOFF_MS: u64 = 1_000;
/// Longest a fetcher with nothing to fetch sleeps before looking again.
const IDLE_RECHECK_MS: u64 = 1_000;
/// Bound on a response frame: a leader may exceed the byte limits by one
/// large batch (KIP-74), never by this much.
const MAX_RESPONSE_BYTES: usize = 1 << 30;

/// 100 ms, doubling to 1 s.
pub(crate) fn next_backoff_ms(current_ms: u64) -> u64 {
    (current_ms * 2).clamp(MIN_BACKOFF_MS, MAX_BACKOFF_MS)
}

/// A followed partition's fetch state (Kafka's PartitionFetchState).
#[derive(Clone, Debug)]
pub(crate) struct PartitionState {
    pub topic_id: Uuid,
    pub leader_epoch: i32,
    /// Set anew on every (re)add: a response to a request built before
    /// belongs to an older state and is dropped.
    pub generation: u64,
    /// Not fetched before this time (ms); 0 when ready.
    pub delayed_until_ms: u64,
    pub backoff_ms: u64,
    /// Kafka's PartitionFetchState.lag: the leader's high watermark less
    /// this log's end after the last fetch that appended records (or the
    /// first answered one); unknown until then.
    pub lag: Option<i64>,
}

impl PartitionState {
    /// Kafka's isReplicaInSync: the lag is known and zero. An in-sync
    /// partition is never left out for the follower quota.
    pub fn is_replica_in_sync(&self) -> bool {
        self.lag.is_some_and(|lag| lag <= 0)
    }

    /// Kafka's processFetchRequest: the lag is taken from a response that
    /// appended records, or from the first one answered.
    pub fn update_lag(&mut self, appended: bool, leader_high_watermark: i64, log_end_offset: i64) {
        if appended || self.lag.is_none() {
            self.lag = Some((leader_high_watermark - log_end_offset).max(0));
        }
    }

    fn delay(&mut self, now_ms: u64) {
        self.backoff_ms = next_backoff_ms(self.backoff_ms);
        self.delayed_until_ms = now_ms + self.backoff_ms;
    }
}

/// What the manager and the task share.
#[derive(Default)]
pub(crate) struct FetcherShared {
    /// In fetch order; a partition that got data moves to the end, so a
    /// full response cannot starve the partitions after it.
    pub partitions: IndexMap<(String, i32), PartitionState>,
    pub stopped: bool,
    /// Bumped on every change, so a sleeping task looks again.
    pub version: u64,
    pub waker: Option<Waker>,
}

impl FetcherShared {
    pub fn changed(&mut self) {
        self.version += 1;
        if let Some(w) = self.waker.take() {
            w.wake();
        }
    }
}

/// Resolves when the shared state changes (or at once if it already has).
struct Changed<'a> {
    shared: &'a RefCell<FetcherShared>,
    seen: u64,
}

impl Future for Changed<'_> {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut s = self.shared.borrow_mut();
        if s.stopped || s.version != self.seen {
            return Poll::Ready(());
        }
        s.waker = Some(cx.waker().clone());
        Poll::Pending
    }
}

/// Sleeps for `ms`, or less if the shared state changes.
async fn sleep_or_change(shared: &RefCell<FetcherShared>, ms: u64) {
    let seen = shared.borrow().version;
    futures_lite::future::or(
        glommio::timer::sleep(Duration::from_millis(ms.max(1))),
        Changed { shared, seen },
    )
    .await;
}

/// A partition as sent in the current request.
struct Sent {
    request: PartitionFetchRequest,
    generation: u64,
}

pub(crate) struct FetcherTask {
    pub replica_manager: Weak<ReplicaManager>,
    pub shared: Rc<RefCell<FetcherShared>>,
    pub leader: LeaderEndpoint,
    pub settings: FetchSettings,
    pub client_id: String,
    pub socket_timeout_ms: u64,
    /// `replica.socket.receive.buffer.bytes`, set as Kafka's fetcher sets it.
    pub socket_receive_buffer_bytes: i32,
    /// The inter-broker listener's TLS and SASL.
    pub security: Arc<InterBrokerSecurity>,
    /// The broker's follower replication quota.
    pub quota: Arc<dyn ReplicaQuota>,
}

/// A fetcher's connection to its leader.
type LeaderStream = ClientStream<TcpStream>;

/// The follower partition, if this shard still follows it.
fn follower_mut<'a>(
    rm: &'a mut crate::replica::Partitions,
    topic: &str,
    partition: i32,
) -> Option<&'a mut Partition> {
    rm.partition_mut(topic, partition).filter(|p| !p.is_leader)
}

/// The follower partition `r` fetched for, if it is still in the state it
/// was fetched in: truncated, re-added, demoted or deleted while the fetch
/// was in flight, the data is for a state that is gone.
fn fetched_follower_mut<'a>(
    rm: &'a mut crate::replica::Partitions,
    r: &PartitionFetchRequest,
) -> Option<&'a mut Partition> {
    follower_mut(rm, &r.topic, r.partition).filter(|p| {
        p.log.log_end_offset() == r.fetch_offset && p.leader_epoch == r.current_leader_epoch
    })
}

impl FetcherTask {
    pub async fn run(self) {
        let mut stream: Option<LeaderStream> = None;
        let mut correlation_id: i32 = 0;
        let mut connect_backoff_ms: u64 = 0;
        loop {
            if self.shared.borrow().stopped {
                return;
            }
            let Some(manager) = self.replica_manager.upgrade() else {
                return;
            };
            if manager.is_shutting_down() {
                return;
            }
            let now = now_ms();
            let (sent, wake_in_ms) = self.ready_partitions(&manager, now);
            drop(manager);
            if sent.is_empty() {
                sleep_or_change(&self.shared, wake_in_ms).await;
                continue;
            }
            if stream.as_ref().is_some_and(LeaderStream::session_expiring) {
                stream = None;
            }
            if stream.is_none() {
                match self.connect().await {
                    Ok(s) => stream = Some(s),
                    Err(e) => {
                        connect_backoff_ms = next_backoff_ms(connect_backoff_ms);
                        log::log!(
                            connect_failure_level(&e),
                            "{}: connecting to leader {} at {}:{}: {e}; retrying in {connect_backoff_ms} ms",
                            self.client_id,
                            self.leader.broker_id,
                            self.leader.host,
                            self.leader.port
                        );
                        sleep_or_change(&self.shared, connect_backoff_ms).await;
                        continue;
                    }
                }
            }
            let conn = stream.as_mut().expect("connected");
            let requests: Vec<PartitionFetchRequest> =
                sent.iter().map(|s| s.request.clone()).collect();
            let version = fetch_version(&requests);
            let request = follower_fetch_request(&self.settings, &requests);
            correlation_id = correlation_id.wrapping_add(1);
            let result = self
                .round_trip(conn, ApiKey::Fetch, version, correlation_id, &request)
                .await
                .and_then(|body| {
                    decode_fetch_response(body, version, &requests).map_err(io::Error::other)
                });
            let response = match result {
                Ok(r) => r,
                Err(e) => {
                    stream = None;
                    connect_backoff_ms = next_backoff_ms(connect_backoff_ms);
                    log::warn!(
                        "{}: fetch from leader {} failed: {e}; reconnecting in {connect_backoff_ms} ms",
                        self.client_id,
                        self.leader.broker_id
                    );
                    sleep_or_change(&self.shared, connect_backoff_ms).await;
                    continue;
                }
            };
            connect_backoff_ms = 0;
            let Some(manager) = self.replica_manager.upgrade() else {
                return;
            };
            let out_of_range = if response.error_code != errors::NONE {
                log::warn!(
                    "{}: fetch from leader {}: error {}",
                    self.client_id,
                    self.leader.broker_id,
                    response.error_code
                );
                self.delay_all(&sent, now_ms());
                Vec::new()
            } else {
                self.write_fetched_epochs(&manager, &sent, &response.partitions)
                    .await;
                self.apply_response(&manager, &sent, response.partitions)
            };
            drop(manager);
            if !out_of_range.is_empty() {
                if let Err(e) = self
                    .handle_out_of_range(conn, &mut correlation_id, out_of_range)
                    .await
                {
                    stream = None;
                    log::warn!(
                        "{}: ListOffsets to leader {} failed: {e}",
                        self.client_id,
                        self.leader.broker_id
                    );
                }
            }
        }
    }

    /// The partitions to fetch now, read from their logs, and how long to
    /// sleep if there are none.
    fn ready_partitions(&self, manager: &ReplicaManager, now: u64) -> (Vec<Sent>, u64) {
        let shared = self.shared.borrow();
        let rm = manager.partitions();
        let mut sent = Vec::new();
        let mut wake_in_ms = IDLE_RECHECK_MS;
        for ((topic, partition), state) in &shared.partitions {
            if state.delayed_until_ms > now {
                wake_in_ms = wake_in_ms.min(state.delayed_until_ms - now);
                continue;
            }
            // A partition that became leader (or was removed) before
            // `remove_partitions` reached this fetcher is not fetched.
            let Some(p) = rm.partition(topic, *partition).filter(|p| !p.is_leader) else {
                continue;
            };
            // Kafka's buildFetch: a throttled partition not in sync waits
            // out the exceeded follower quota.
            if should_follower_throttle(
                &*self.quota,
                state.is_replica_in_sync(),
                &p.config,
                *partition,
                self.settings.replica_id,
            ) {
                continue;
            }
            let mut request = fetch_request_for(p);
            request.topic_id = state.topic_id;
            request.current_leader_epoch = state.leader_epoch;
            sent.push(Sent {
                request,
                generation: state.generation,
            });
        }
        (sent, wake_in_ms)
    }

    async fn connect(&self) -> io::Result<LeaderStream> {
        let addr: SocketAddr = (self.leader.host.as_str(), self.leader.port)
            .to_socket_addrs()?
            .next()
            .ok_or_else(|| io::Error::other("the leader's address does not resolve"))?;
        let timeout = Duration::from_millis(self.socket_timeout_ms.max(1));
        let s = TcpStream::connect_timeout(addr, timeout).await?;
        s.set_nodelay(true)?;
        tcp_socket::set_buffer_bytes(
            s.as_raw_fd(),
            libc::SO_RCVBUF,
            self.socket_receive_buffer_bytes,
        )?;
        s.set_read_timeout(Some(timeout))?;
        s.set_write_timeout(Some(timeout))?;
        self.security
            .open(s, &self.leader.host, &self.client_id)
            .await
    }

    async fn round_trip<M: kafka_protocol::protocol::Encodable>(
        &self,
        stream: &mut LeaderStream,
        api_key: ApiKey,
        version: i16,
        correlation_id: i32,
        body: &M,
    ) -> io::Result<Bytes> {
        let frame = encode_frame(api_key, version, correlation_id, &self.client_id, body)
            .map_err(io::Error::other)?;
        let buf = exchange_frame(stream, &frame, MAX_RESPONSE_BYTES).await?;
        response_body(buf, api_key, version, correlation_id).map_err(io::Error::other)
    }

    fn delay_all(&self, sent: &[Sent], now: u64) {
        let mut shared = self.shared.borrow_mut();
        for s in sent {
            let key = (s.request.topic.clone(), s.request.partition);
            if let Some(state) = shared.partitions.get_mut(&key) {
                if state.generation == s.generation {
                    state.delay(now);
                }
            }
        }
    }

    /// Kafka writes a fetched batch's new leader epoch durably before it
    /// appends the batch, on its fetcher thread; here the writes of a whole
    /// response run on the checkpoint writer thread while this task waits
    /// and the shard serves on. A failed write is written again, on the
    /// shard, by the append (which then reports the storage error).
    async fn write_fetched_epochs(
        &self,
        manager: &ReplicaManager,
        sent: &[Sent],
        answered: &[(usize, super::protocol::FetchedPartition)],
    ) {
        let mut writes = Vec::new();
        {
            let mut rm = manager.partitions_mut();
            for (i, data) in answered {
                let r = &sent[*i].request;
                let Some(records) = data.records.as_deref() else {
                    continue;
                };
                if data.error_code != errors::NONE || data.diverging_epoch.is_some() {
                    continue;
                }
                let Some(p) = fetched_follower_mut(&mut rm, r) else {
                    continue;
                };
                // On an error the file is marked stale: the append retries.
                if let Ok(queued) = p.queue_fetched_epochs(records) {
                    writes.extend(queued.into_iter().map(|w| (*i, w)));
                }
            }
        }
        for (i, write) in writes {
            if matches!(write.await, Ok(Ok(()))) {
                continue;
            }
            let r = &sent[i].request;
            if let Some(p) = follower_mut(&mut manager.partitions_mut(), &r.topic, r.partition) {
                p.leader_epoch_cache.mark_file_stale();
            }
        }
    }

    /// Applies every answered partition still in the state it was fetched
    /// in; returns those the leader found out of range.
    fn apply_response(
        &self,
        manager: &ReplicaManager,
        sent: &[Sent],
        answered: Vec<(usize, super::protocol::FetchedPartition)>,
    ) -> Vec<Sent> {
        let now = now_ms();
        let mut advanced: Vec<(String, i32)> = Vec::new();
        let mut out_of_range = Vec::new();
        {
            let mut shared = self.shared.borrow_mut();
            let mut rm = manager.partitions_mut();
            for (i, data) in answered {
                let s = &sent[i];
                let r = &s.request;
                let key = (r.topic.clone(), r.partition);
                let Some(state) = shared.partitions.get_mut(&key) else {
                    continue;
                };
                if state.generation != s.generation {
                    continue;
                }
                let Some(p) = fetched_follower_mut(&mut rm, r) else {
                    continue;
                };
                let log_dir_index = p.log_dir_index;
                let was_offline = p.log_dir_offline();
                match apply_fetched_partition(p, r.fetch_offset, &data, now as i64) {
                    FetchOutcome::Applied {
                        appended_bytes,
                        high_watermark_changed,
                        truncated_to,
                    } => {
                        state.backoff_ms = 0;
                        state.delayed_until_ms = 0;
                        // A diverging epoch leaves the lag for the next fetch.
                        if data.diverging_epoch.is_none() {
                            state.update_lag(
                                appended_bytes > 0,
                                data.high_watermark,
                                p.log.log_end_offset(),
                            );
                        }
                        // Kafka's processPartitionData: a throttled
                        // partition's bytes count, in sync or not.
                        let received = data.records.as_ref().map_or(0, |b| b.len());
                        if received > 0
                            && is_follower_throttled(
                                &p.config,
                                r.partition,
                                self.settings.replica_id,
                            )
                        {
                            self.quota.record(received as u64);
                        }
                        if let Some(offset) = truncated_to {
                            log::info!(
                                "{}: truncated {}-{} to {offset} (diverging epoch {:?} from leader {})",
                                self.client_id,
                                r.topic,
                                r.partition,
                                data.diverging_epoch,
                                self.leader.broker_id
                            );
                        }
                        if appended_bytes > 0 || high_watermark_changed || truncated_to.is_some() {
                            advanced.push(key.clone());
                        }
                        if appended_bytes > 0 {
                            if let Some(idx) = shared.partitions.get_index_of(&key) {
                                let last = shared.partitions.len() - 1;
                                shared.partitions.move_index(idx, last);
                            }
                        }
                    }
                    FetchOutcome::OffsetOutOfRange => out_of_range.push(Sent {
                        request: r.clone(),
                        generation: s.generation,
                    }),
                    FetchOutcome::Retry {
                        error_code,
                        message,
                    } => {
                        // A local write failed (the leader's errors are
                        // never KAFKA_STORAGE_ERROR here: those are its own).
                        if error_code == errors::KAFKA_STORAGE_ERROR
                            && data.error_code == errors::NONE
                            && !was_offline
                        {
                            let what = format!(
                                "appending fetched records to {}-{}: {message}",
                                r.topic, r.partition
                            );
                            rm.log_dirs().mark_offline(log_dir_index, &what);
                        }
                        state.delay(now);
                        let level = match error_code {
                            errors::NOT_LEADER_OR_FOLLOWER
                            | errors::UNKNOWN_LEADER_EPOCH
                            | errors::FENCED_LEADER_EPOCH => log::Level::Debug,
                            errors::UNKNOWN_TOPIC_OR_PARTITION
                            | errors::UNKNOWN_TOPIC_ID
                            | errors::INCONSISTENT_TOPIC_ID => log::Level::Warn,
                            _ => log::Level::Error,
                        };
                        log::log!(
                            level,
                            "{}: {}-{} at offset {} from leader {}: {message} (error {error_code}); \
                             retrying in {} ms",
                            self.client_id,
                            r.topic,
                            r.partition,
                            r.fetch_offset,
                            self.leader.broker_id,
                            state.backoff_ms
                        );
                    }
                }
            }
        }
        // Both borrows are released: waking delayed fetches reads partitions.
        for (topic, partition) in advanced {
            manager.on_high_watermark_advanced(&topic, partition);
        }
        out_of_range
    }

    /// Asks the leader for its latest and earliest offsets of the
    /// out-of-range partitions, then resets them (Kafka's
    /// `handleOutOfRangeError`).
    async fn handle_out_of_range(
        &self,
        stream: &mut LeaderStream,
        correlation_id: &mut i32,
        parts: Vec<Sent>,
    ) -> io::Result<()> {
        let requests: Vec<PartitionFetchRequest> =
            parts.iter().map(|s| s.request.clone()).collect();
        let mut offsets = Vec::with_capacity(2);
        for timestamp in [LATEST_TIMESTAMP, EARLIEST_TIMESTAMP] {
            let request = list_offsets_request(self.settings.replica_id, &requests, timestamp);
            *correlation_id = correlation_id.wrapping_add(1);
            let body = self
                .round_trip(
                    stream,
                    ApiKey::ListOffsets,
                    LIST_OFFSETS_VERSION,
                    *correlation_id,
                    &request,
                )
                .await;
            let decoded = match body {
                Ok(b) => decode_list_offsets_response(b, LIST_OFFSETS_VERSION, &requests)
                    .map_err(io::Error::other),
                Err(e) => Err(e),
            };
            match decoded {
                Ok(o) => offsets.push(o),
                Err(e) => {
                    self.delay_all(&parts, now_ms());
                    return Err(e);
                }
            }
        }
        let Some(manager) = self.replica_manager.upgrade() else {
            return Ok(());
        };
        let now = now_ms();
        let mut advanced = Vec::new();
        {
            let mut shared = self.shared.borrow_mut();
            let mut rm = manager.partitions_mut();
            for (i, s) in parts.iter().enumerate() {
                let r = &s.request;
                let key = (r.topic.clone(), r.partition);
                let Some(state) = shared.partitions.get_mut(&key) else {
                    continue;
                };
                if state.generation != s.generation {
                    continue;
                }
                let (latest, earliest) = (offsets[0][i], offsets[1][i]);
                if latest.0 != errors::NONE || earliest.0 != errors::NONE {
                    state.delay(now);
                    log::info!(
                        "{}: ListOffsets for {}-{} from leader {}: errors {} / {}; retrying in {} ms",
                        self.client_id,
                        r.topic,
                        r.partition,
                        self.leader.broker_id,
                        latest.0,
                        earliest.0,
                        state.backoff_ms
                    );
                    continue;
                }
                let Some(p) = follower_mut(&mut rm, &r.topic, r.partition) else {
                    continue;
                };
                if p.log.log_end_offset() != r.fetch_offset
                    || p.leader_epoch != r.current_leader_epoch
                {
                    continue;
                }
                match apply_out_of_range(p, latest.1, earliest.1, now as i64) {
                    Ok(new_leo) if new_leo != r.fetch_offset => {
                        state.backoff_ms = 0;
                        state.delayed_until_ms = 0;
                        advanced.push(key);
                    }
                    // Nothing to reset (the leader moved on meanwhile):
                    // fetch again, but not in a tight loop.
                    Ok(_) => state.delay(now),
                    Err(e) => {
                        state.delay(now);
                        log::error!(
                            "{}: resetting {}-{} after OFFSET_OUT_OF_RANGE: {e}",
                            self.client_id,
                            r.topic,
                            r.partition
                        );
                    }
                }
            }
        }
        for (topic, partition) in advanced {
            manager.on_high_watermark_advanced(&topic, partition);
        }
        Ok(())
    }
}
