//! Incremental fetch sessions (KIP-227), Kafka's FetchSession.scala: the
//! FetchSessionCache, and the FetchContext that `FetchManager.newContext`
//! makes for each Fetch (session error, sessionless, full, incremental).
//! Each shard keeps the sessions of connections it serves; session ids carry
//! the shard (id % nr_shards == shard), so a client that reconnects to another
//! shard gets FETCH_SESSION_ID_NOT_FOUND and starts a new session, as with a
//! restarted broker.

use std::collections::HashMap;

use indexmap::IndexMap;
use uuid::Uuid;

use crate::protocol::errors;
use crate::protocol::errors::ErrorCode;

pub const INITIAL_EPOCH: i32 = 0;
pub const FINAL_EPOCH: i32 = -1;

/// A request's session fields (Kafka's FetchMetadata).
#[derive(Clone, Copy, Debug)]
pub struct FetchMetadata {
    pub session_id: i32,
    pub epoch: i32,
}

impl FetchMetadata {
    /// The initial and final epochs carry every partition (and close the
    /// session named); other epochs only changes to it.
    pub fn is_full(&self) -> bool {
        self.epoch == INITIAL_EPOCH || self.epoch == FINAL_EPOCH
    }
}

/// One partition a fetch reads (Kafka's FetchRequest.PartitionData with
/// its topic), in response order.
#[derive(Clone, Debug)]
pub struct RequestedPartition {
    pub topic: String,
    pub topic_id: Uuid,
    pub partition: i32,
    pub fetch_offset: i64,
    pub max_bytes: i32,
    pub current_leader_epoch: i32,
    pub last_fetched_epoch: i32,
    /// Error found before reading (unknown topic id, ...): such a partition
    /// is answered with it and never cached.
    pub error: Option<ErrorCode>,
}

impl RequestedPartition {
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
            answered_with_records: false,
        }
    }
}

/// What a response tells the client about one partition that was read.
#[derive(Clone, Copy, Debug)]
pub struct PartitionResponse {
    pub has_records: bool,
    pub error_code: ErrorCode,
    pub high_watermark: i64,
    pub last_stable_offset: i64,
    pub log_start_offset: i64,
}

#[derive(Clone, Debug)]
pub struct CachedPartition {
    pub topic: String,
    pub topic_id: Uuid,
    pub partition: i32,
    pub fetch_offset: i64,
    pub max_bytes: i32,
    pub current_leader_epoch: i32,
    /// Fetch v12+: the epoch of the last batch the client has (-1: none).
    pub last_fetched_epoch: i32,
    /// What the last response told the client (-1 before the first).
    pub high_watermark: i64,
    pub last_stable_offset: i64,
    pub log_start_offset: i64,
    /// Sent records in the incremental response being built: it moves to
    /// the session's end when the response is done.
    answered_with_records: bool,
}

impl CachedPartition {
    /// Kafka's `updateRequestParams`: the client's new position and limits.
    fn update_request_params(&mut self, requested: &RequestedPartition) {
        self.fetch_offset = requested.fetch_offset;
        self.max_bytes = requested.max_bytes;
        self.current_leader_epoch = requested.current_leader_epoch;
        self.last_fetched_epoch = requested.last_fetched_epoch;
    }

    /// Kafka's `maybeUpdateResponseData`: records what the response tells
    /// the client; true when that is news (records, an error, or a moved
    /// high watermark, last stable offset or log start offset).
    fn maybe_update_response_data(&mut self, response: &PartitionResponse) -> bool {
        let changed = response.has_records
            || response.error_code != errors::NONE
            || self.high_watermark != response.high_watermark
            || self.last_stable_offset != response.last_stable_offset
            || self.log_start_offset != response.log_start_offset;
        self.high_watermark = response.high_watermark;
        self.last_stable_offset = response.last_stable_offset;
        self.log_start_offset = response.log_start_offset;
        changed
    }

    fn to_requested(&self) -> RequestedPartition {
        RequestedPartition {
            topic: self.topic.clone(),
            topic_id: self.topic_id,
            partition: self.partition,
            fetch_offset: self.fetch_offset,
            max_bytes: self.max_bytes,
            current_leader_epoch: self.current_leader_epoch,
            last_fetched_epoch: self.last_fetched_epoch,
            error: None,
        }
    }
}

pub struct FetchSession {
    pub id: i32,
    /// The epoch the next request must carry.
    pub next_epoch: i32,
    pub partitions: IndexMap<(String, i32), CachedPartition>,
    pub last_used_ms: u64,
}

impl FetchSession {
    /// Kafka's `FetchSession.update`: adds or updates the requested
    /// partitions, then drops the forgotten ones.
    fn update(&mut self, requested: &[RequestedPartition], forgotten: &[(String, i32)]) {
        for r in requested.iter().filter(|r| r.error.is_none()) {
            self.partitions
                .entry((r.topic.clone(), r.partition))
                .or_insert_with(|| r.to_cached())
                .update_request_params(r);
        }
        for key in forgotten {
            self.partitions.shift_remove(key);
        }
    }
}

pub enum SessionError {
    NotFound,
    InvalidEpoch,
}

impl SessionError {
    pub fn error_code(&self) -> ErrorCode {
        match self {
            SessionError::NotFound => errors::FETCH_SESSION_ID_NOT_FOUND,
            SessionError::InvalidEpoch => errors::INVALID_FETCH_SESSION_EPOCH,
        }
    }
}

/// Kafka's FetchContext: which partitions a fetch reads, which session id
/// it answers with, and how its response updates the session.
pub enum FetchContext {
    /// Kafka's SessionErrorContext: the answer is this error alone.
    SessionError { error_code: ErrorCode },
    /// Kafka's SessionlessFetchContext: Fetch v0-v6 or the final epoch;
    /// every partition is answered and nothing is cached.
    Sessionless { partitions: Vec<RequestedPartition> },
    /// Kafka's FullFetchContext: a new session caching every partition
    /// that is readable; every partition is answered.
    Full {
        session_id: i32,
        partitions: Vec<RequestedPartition>,
    },
    /// Kafka's IncrementalFetchContext: the session's partitions after this
    /// request's changes, then those with an error; only news is answered.
    Incremental {
        session_id: i32,
        partitions: Vec<RequestedPartition>,
    },
}

impl FetchContext {
    /// The partitions to read, in response order.
    pub fn partitions(&self) -> &[RequestedPartition] {
        match self {
            FetchContext::SessionError { .. } => &[],
            FetchContext::Sessionless { partitions }
            | FetchContext::Full { partitions, .. }
            | FetchContext::Incremental { partitions, .. } => partitions,
        }
    }

    pub fn partitions_mut(&mut self) -> &mut [RequestedPartition] {
        match self {
            FetchContext::SessionError { .. } => &mut [],
            FetchContext::Sessionless { partitions }
            | FetchContext::Full { partitions, .. }
            | FetchContext::Incremental { partitions, .. } => partitions,
        }
    }

    /// The session id the response carries (0: none).
    pub fn session_id(&self) -> i32 {
        match self {
            FetchContext::SessionError { .. } | FetchContext::Sessionless { .. } => 0,
            FetchContext::Full { session_id, .. }
            | FetchContext::Incremental { session_id, .. } => *session_id,
        }
    }

    /// Kafka's `updateAndGenerateResponseData`, one partition at a time: the
    /// session (if it still exists: another fetch may have evicted it while
    /// this one read) learns what the response tells the client.
    pub fn response_updater<'a>(&self, cache: &'a mut FetchSessionCache) -> ResponseUpdater<'a> {
        let session_id = self.session_id();
        ResponseUpdater {
            session: if session_id != 0 {
                cache.get_mut(session_id)
            } else {
                None
            },
            incremental: matches!(self, FetchContext::Incremental { .. }),
            rotate: false,
        }
    }
}

/// A response being built against the session of its FetchContext.
pub struct ResponseUpdater<'a> {
    session: Option<&'a mut FetchSession>,
    incremental: bool,
    /// Some partition sent records in an incremental response.
    rotate: bool,
}

impl ResponseUpdater<'_> {
    /// Records `response` for a partition that was read; false when an
    /// incremental response leaves the partition out (nothing new).
    pub fn must_respond(
        &mut self,
        topic: &str,
        partition: i32,
        response: &PartitionResponse,
    ) -> bool {
        let cached = self
            .session
            .as_deref_mut()
            .and_then(|s| s.partitions.get_mut(&(topic.to_string(), partition)));
        let Some(c) = cached else { return true };
        if !self.incremental {
            c.maybe_update_response_data(response);
            return true;
        }
        let must = c.maybe_update_response_data(response);
        if must && response.has_records {
            c.answered_with_records = true;
            self.rotate = true;
        }
        must
    }

    /// Kafka's incremental responses move each partition that sent records
    /// to the end of the session, keeping their order, so the next fetch
    /// reads (and answers) the others first: under a `max_bytes` that does
    /// not fit every partition none starves, and a client drains them in
    /// turn.
    pub fn finish(self) {
        let (Some(session), true) = (self.session, self.rotate) else {
            return;
        };
        // Stable: the others keep their order ahead of the moved ones.
        session
            .partitions
            .sort_by(|_, a, _, b| a.answered_with_records.cmp(&b.answered_with_records));
        for c in session.partitions.values_mut() {
            c.answered_with_records = false;
        }
    }
}

pub struct FetchSessionCache {
    shard_id: usize,
    nr_shards: usize,
    max_sessions: usize,
    sessions: HashMap<i32, FetchSession>,
    rng_state: u64,
}

fn next_epoch(epoch: i32) -> i32 {
    if epoch == i32::MAX {
        1
    } else {
        epoch + 1
    }
}

impl FetchSessionCache {
    /// `now_ms` only seeds the session ids.
    pub fn new(shard_id: usize, nr_shards: usize, max_sessions: usize, now_ms: u64) -> Self {
        assert!(shard_id < nr_shards);
        let seed = (std::process::id() as u64) << 32 ^ now_ms ^ (shard_id as u64 * 0x9e37_79b9);
        FetchSessionCache {
            shard_id,
            nr_shards,
            max_sessions: max_sessions.max(1),
            sessions: HashMap::new(),
            rng_state: seed | 1,
        }
    }

    fn new_session_id(&mut self) -> i32 {
        loop {
            // xorshift64*: session ids need only be unpredictable-ish and unique.
            let mut x = self.rng_state;
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            self.rng_state = x;
            let r = (x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 33) as i64;
            let n = self.nr_shards as i64;
            let id = (r / n * n + self.shard_id as i64) as i32;
            if id > 0 && !self.sessions.contains_key(&id) {
                debug_assert_eq!(id as usize % self.nr_shards, self.shard_id);
                return id;
            }
        }
    }

    /// Starts a session holding `partitions` and returns its id; a full
    /// cache first evicts its least recently used session.
    pub fn create(
        &mut self,
        partitions: IndexMap<(String, i32), CachedPartition>,
        now_ms: u64,
    ) -> i32 {
        if self.sessions.len() >= self.max_sessions {
            // Evict the least recently used session.
            let oldest = self
                .sessions
                .values()
                .min_by_key(|s| s.last_used_ms)
                .map(|s| s.id);
            if let Some(id) = oldest {
                self.sessions.remove(&id);
            }
        }
        let id = self.new_session_id();
        self.sessions.insert(
            id,
            FetchSession {
                id,
                next_epoch: next_epoch(INITIAL_EPOCH),
                partitions,
                last_used_ms: now_ms,
            },
        );
        id
    }

    /// Kafka's `FetchManager.newContext`: a full request closes the session
    /// it names and, at the initial epoch from Fetch v7 on, starts one; an
    /// incremental request must name a live session at its next epoch.
    pub fn new_context(
        &mut self,
        version: i16,
        metadata: FetchMetadata,
        requested: Vec<RequestedPartition>,
        forgotten: &[(String, i32)],
        now_ms: u64,
    ) -> FetchContext {
        if metadata.is_full() {
            if metadata.session_id != 0 {
                self.remove(metadata.session_id);
            }
            if metadata.epoch == FINAL_EPOCH || version < 7 {
                return FetchContext::Sessionless {
                    partitions: requested,
                };
            }
            let cached = requested
                .iter()
                .filter(|r| r.error.is_none())
                .map(|r| ((r.topic.clone(), r.partition), r.to_cached()))
                .collect();
            return FetchContext::Full {
                session_id: self.create(cached, now_ms),
                partitions: requested,
            };
        }
        let session = match self.get_for_epoch(metadata.session_id, metadata.epoch, now_ms) {
            Ok(s) => s,
            Err(e) => {
                return FetchContext::SessionError {
                    error_code: e.error_code(),
                }
            }
        };
        session.update(&requested, forgotten);
        let mut partitions: Vec<RequestedPartition> = session
            .partitions
            .values()
            .map(|c| c.to_requested())
            .collect();
        // Partitions whose topic is unknown are answered but not cached.
        partitions.extend(requested.into_iter().filter(|r| r.error.is_some()));
        FetchContext::Incremental {
            session_id: metadata.session_id,
            partitions,
        }
    }

    pub fn remove(&mut self, id: i32) {
        self.sessions.remove(&id);
    }

    /// Looks up a session for an incremental request at `epoch` and advances it.
    pub fn get_for_epoch(
        &mut self,
        id: i32,
        epoch: i32,
        now_ms: u64,
    ) -> Result<&mut FetchSession, SessionError> {
        let s = self.sessions.get_mut(&id).ok_or(SessionError::NotFound)?;
        if s.next_epoch != epoch {
            return Err(SessionError::InvalidEpoch);
        }
        s.next_epoch = next_epoch(epoch);
        s.last_used_ms = now_ms;
        Ok(s)
    }

    pub fn get_mut(&mut self, id: i32) -> Option<&mut FetchSession> {
        self.sessions.get_mut(&id)
    }

    pub fn forget_topic(&mut self, topic: &str) {
        for s in self.sessions.values_mut() {
            s.partitions.retain(|k, _| k.0 != topic);
        }
    }

    pub fn len(&self) -> usize {
        self.sessions.len()
    }
    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_encode_shard_and_epochs_advance() {
        let mut c = FetchSessionCache::new(1, 3, 2, 0);
        let id = c.create(IndexMap::new(), 1);
        assert_eq!(id as usize % 3, 1);
        assert!(c.get_for_epoch(id, 2, 2).is_err());
        assert!(c.get_for_epoch(id, 1, 2).is_ok());
        assert!(c.get_for_epoch(id, 2, 3).is_ok());
        assert!(matches!(
            c.get_for_epoch(id + 3, 1, 3),
            Err(SessionError::NotFound)
        ));
        c.create(IndexMap::new(), 4);
        c.create(IndexMap::new(), 5);
        assert_eq!(c.len(), 2, "least recently used session evicted");
    }

    /// xorshift64: a reproducible source of test operations.
    struct Rng(u64);

    impl Rng {
        fn below(&mut self, n: u64) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0 % n
        }
    }

    #[test]
    fn epochs_wrap_to_one_never_to_initial_or_final() {
        assert_eq!(next_epoch(INITIAL_EPOCH), 1);
        assert_eq!(next_epoch(41), 42);
        assert_eq!(next_epoch(i32::MAX), 1);
    }

    /// The cache against a model: a list of (id, next epoch, last used)
    /// where a full cache drops the least recently used session and only a
    /// lookup at the right epoch advances and refreshes a session.
    #[test]
    fn cache_evicts_least_recently_used_like_a_model() {
        for seed in 1..=20u64 {
            let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
            let max_sessions = 1 + rng.below(4) as usize;
            let mut cache = FetchSessionCache::new(2, 4, max_sessions, seed);
            let mut model: Vec<(i32, i32, u64)> = Vec::new();
            let mut gone: Vec<i32> = Vec::new();
            for now_ms in 1..400u64 {
                match rng.below(4) {
                    0 => {
                        if model.len() == max_sessions {
                            let lru = (0..model.len()).min_by_key(|&i| model[i].2).unwrap();
                            gone.push(model.remove(lru).0);
                        }
                        let id = cache.create(IndexMap::new(), now_ms);
                        assert!(id > 0 && id % 4 == 2, "id {id} names shard 2");
                        assert!(model.iter().all(|m| m.0 != id), "ids are unique");
                        model.push((id, 1, now_ms));
                    }
                    1 if !model.is_empty() => {
                        let i = rng.below(model.len() as u64) as usize;
                        let ahead = rng.below(3) == 0;
                        let (id, epoch, _) = model[i];
                        let asked = if ahead { epoch + 1 } else { epoch };
                        let got = cache.get_for_epoch(id, asked, now_ms);
                        if ahead {
                            assert!(matches!(got, Err(SessionError::InvalidEpoch)));
                        } else {
                            assert_eq!(got.ok().map(|s| s.next_epoch), Some(epoch + 1));
                            model[i] = (id, epoch + 1, now_ms);
                        }
                    }
                    2 if !model.is_empty() => {
                        let i = rng.below(model.len() as u64) as usize;
                        cache.remove(model.remove(i).0);
                    }
                    _ => {
                        // An evicted id may be handed out again (rarely).
                        let live = |id: &&i32| model.iter().all(|m| m.0 != **id);
                        if let Some(&id) = gone.last().filter(live) {
                            let got = cache.get_for_epoch(id, 1, now_ms);
                            assert!(matches!(got, Err(SessionError::NotFound)));
                        }
                    }
                }
                assert_eq!(cache.len(), model.len());
                for (id, epoch, _) in &model {
                    assert_eq!(cache.get_mut(*id).map(|s| s.next_epoch), Some(*epoch));
                }
            }
        }
    }

    const TOPICS: [&str; 3] = ["a", "b", "c"];

    fn requested(topic: &str, partition: i32, fetch_offset: i64) -> RequestedPartition {
        RequestedPartition {
            topic: topic.to_string(),
            topic_id: Uuid::nil(),
            partition,
            fetch_offset,
            max_bytes: 1 << 20,
            current_leader_epoch: 0,
            last_fetched_epoch: -1,
            error: None,
        }
    }

    fn unknown(partition: i32) -> RequestedPartition {
        RequestedPartition {
            error: Some(errors::UNKNOWN_TOPIC_OR_PARTITION),
            ..requested("gone", partition, 0)
        }
    }

    fn positions(context: &FetchContext) -> Vec<(String, i32, i64)> {
        let parts = context.partitions().iter();
        parts
            .map(|p| (p.topic.clone(), p.partition, p.fetch_offset))
            .collect()
    }

    /// Incremental fetches against a model of the session: an ordered list
    /// of (topic, partition, fetch offset) that a request updates in place,
    /// appends to, and forgets from; unknown partitions are answered last
    /// and never cached.
    #[test]
    fn incremental_contexts_update_the_session_like_a_model() {
        for seed in 1..=20u64 {
            let mut rng = Rng(seed.wrapping_mul(0x2545_f491_4f6c_dd1d));
            let mut cache = FetchSessionCache::new(0, 1, 8, seed);
            let first = vec![requested("a", 0, 0), unknown(0)];
            let full = FetchMetadata {
                session_id: 0,
                epoch: INITIAL_EPOCH,
            };
            let context = cache.new_context(12, full, first, &[], 1);
            assert!(matches!(context, FetchContext::Full { .. }));
            let session_id = context.session_id();
            let mut model = vec![("a".to_string(), 0, 0i64)];
            for epoch in 1..60 {
                let mut asked = Vec::new();
                for _ in 0..rng.below(4) {
                    let topic = TOPICS[rng.below(3) as usize];
                    let (partition, offset) = (rng.below(3) as i32, rng.below(1000) as i64);
                    asked.push(requested(topic, partition, offset));
                    match model.iter_mut().find(|m| m.0 == topic && m.1 == partition) {
                        Some(m) => m.2 = offset,
                        None => model.push((topic.to_string(), partition, offset)),
                    }
                }
                let mut forgotten = Vec::new();
                if rng.below(3) == 0 && !model.is_empty() {
                    let i = rng.below(model.len() as u64) as usize;
                    let m = model.remove(i);
                    forgotten.push((m.0, m.1));
                }
                let with_unknown = rng.below(2) == 0;
                if with_unknown {
                    asked.push(unknown(7));
                }
                let metadata = FetchMetadata { session_id, epoch };
                let context = cache.new_context(12, metadata, asked, &forgotten, epoch as u64);
                assert!(matches!(context, FetchContext::Incremental { .. }));
                assert_eq!(context.session_id(), session_id);
                let mut expected = model.clone();
                if with_unknown {
                    expected.push(("gone".to_string(), 7, 0));
                }
                assert_eq!(positions(&context), expected, "seed {seed} epoch {epoch}");
            }
        }
    }

    fn response(high_watermark: i64, has_records: bool) -> PartitionResponse {
        PartitionResponse {
            has_records,
            error_code: errors::NONE,
            high_watermark,
            last_stable_offset: high_watermark,
            log_start_offset: 0,
        }
    }

    /// A new session of partitions a-0 to a-3, at offset 0.
    fn full_context_of_four(cache: &mut FetchSessionCache) -> FetchContext {
        let all: Vec<_> = (0..4).map(|p| requested("a", p, 0)).collect();
        let full = FetchMetadata {
            session_id: 0,
            epoch: INITIAL_EPOCH,
        };
        cache.new_context(12, full, all, &[], 1)
    }

    /// A full response reports every partition and teaches the session what
    /// it said; an incremental one then reports only news, as in a model that
    /// remembers the last high watermark sent per partition.
    #[test]
    fn responses_report_news_only_when_incremental() {
        let mut rng = Rng(7);
        let mut cache = FetchSessionCache::new(0, 1, 4, 0);
        let context = full_context_of_four(&mut cache);
        let session_id = context.session_id();
        let mut sent = [-1i64; 4];
        let mut updater = context.response_updater(&mut cache);
        for (p, sent) in sent.iter_mut().enumerate() {
            let hw = rng.below(3) as i64;
            assert!(updater.must_respond("a", p as i32, &response(hw, false)));
            *sent = hw;
        }
        for epoch in 1..100 {
            let metadata = FetchMetadata { session_id, epoch };
            let context = cache.new_context(12, metadata, Vec::new(), &[], 1 + epoch as u64);
            let mut updater = context.response_updater(&mut cache);
            for (p, sent) in sent.iter_mut().enumerate() {
                let hw = rng.below(3) as i64;
                let has_records = rng.below(4) == 0;
                let news = has_records || hw != *sent;
                let reported = updater.must_respond("a", p as i32, &response(hw, has_records));
                assert_eq!(reported, news, "epoch {epoch} partition {p}");
                *sent = hw;
            }
        }
    }

    /// As Kafka's incremental contexts: partitions that sent records move to
    /// the session's end in their order; a full response moves nothing.
    #[test]
    fn partitions_that_sent_records_go_last_in_incremental_sessions() {
        let mut cache = FetchSessionCache::new(0, 1, 4, 0);
        let context = full_context_of_four(&mut cache);
        let session_id = context.session_id();
        let mut updater = context.response_updater(&mut cache);
        for p in 0..4 {
            assert!(updater.must_respond("a", p, &response(10, p == 0)));
        }
        updater.finish();
        let order = |context: &FetchContext| -> Vec<i32> {
            context.partitions().iter().map(|p| p.partition).collect()
        };
        let at = |epoch| FetchMetadata { session_id, epoch };
        let context = cache.new_context(12, at(1), Vec::new(), &[], 2);
        assert_eq!(order(&context), vec![0, 1, 2, 3]);
        let mut updater = context.response_updater(&mut cache);
        for p in 0..4 {
            let sent = updater.must_respond("a", p, &response(10, p == 1 || p == 3));
            assert_eq!(sent, p == 1 || p == 3);
        }
        updater.finish();
        let context = cache.new_context(12, at(2), Vec::new(), &[], 3);
        assert_eq!(order(&context), vec![0, 2, 1, 3]);
        // A response with no records keeps the order.
        let mut updater = context.response_updater(&mut cache);
        for p in [0, 2, 1, 3] {
            assert!(!updater.must_respond("a", p, &response(10, false)));
        }
        updater.finish();
        let context = cache.new_context(12, at(3), Vec::new(), &[], 4);
        assert_eq!(order(&context), vec![0, 2, 1, 3]);
    }

    #[test]
    fn sessionless_and_error_contexts_keep_no_session() {
        let mut cache = FetchSessionCache::new(0, 1, 4, 0);
        let initial = FetchMetadata {
            session_id: 0,
            epoch: INITIAL_EPOCH,
        };
        let old = cache.new_context(6, initial, vec![requested("a", 0, 5)], &[], 1);
        assert!(matches!(old, FetchContext::Sessionless { .. }));
        assert_eq!(
            (old.session_id(), cache.len()),
            (0, 0),
            "v6 has no sessions"
        );
        let mut updater = old.response_updater(&mut cache);
        assert!(updater.must_respond("a", 0, &response(0, false)));
        let full = cache.new_context(7, initial, vec![requested("a", 0, 5)], &[], 2);
        let session_id = full.session_id();
        assert_eq!(cache.len(), 1);
        let at = |epoch| FetchMetadata { session_id, epoch };
        let error = |c: FetchContext| match c {
            FetchContext::SessionError { error_code } => error_code,
            _ => errors::NONE,
        };
        let ahead = cache.new_context(7, at(2), Vec::new(), &[], 3);
        assert_eq!(error(ahead), errors::INVALID_FETCH_SESSION_EPOCH);
        let last = cache.new_context(7, at(FINAL_EPOCH), vec![requested("a", 0, 6)], &[], 4);
        assert!(matches!(last, FetchContext::Sessionless { .. }));
        assert_eq!(positions(&last), vec![("a".to_string(), 0, 6)]);
        assert_eq!(cache.len(), 0, "the final epoch closes the session");
        let closed = cache.new_context(7, at(1), Vec::new(), &[], 5);
        assert_eq!(error(closed), errors::FETCH_SESSION_ID_NOT_FOUND);
    }
}
