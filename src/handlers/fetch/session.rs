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

pub const INITIAL_EPOCH: i32 = 0;
pub const FINAL_EPOCH: i32 = -1;

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
}

pub struct FetchSession {
    pub id: i32,
    /// The epoch the next request must carry.
    pub next_epoch: i32,
    pub partitions: IndexMap<(String, i32), CachedPartition>,
    pub last_used_ms: u64,
}

pub enum SessionError {
    NotFound,
    InvalidEpoch,
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
        let mut c = FetchSessionCache::new(1, 3, 2);
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
}
