//! The follower side of a partition's log (Kafka's `appendAsFollower`,
//! `truncateTo`, `truncateFullyAndStartAt`, `maybeIncrementLogStartOffset`).
//! A follower stores the leader's batches exactly as fetched: offsets,
//! partition leader epochs and timestamps come from the leader.

use std::io;

use kshard_shards::log::batch::{self, BatchError, BatchIter};
use kshard_shards::log::LogAppendInfo;

use crate::protocol::errors;
use crate::replica::partition::leader_epoch::{UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET};
use crate::replica::partition::leader_epoch_writes::QueuedWrite;
use crate::replica::partition::{AppendError, Partition};

fn corrupt(message: String) -> AppendError {
    AppendError {
        error_code: errors::CORRUPT_MESSAGE,
        message,
        record_errors: Vec::new(),
    }
}

/// The follower's truncation point for a diverging epoch in a fetch
/// response (Kafka's `getOffsetTruncationState`). The leader says its
/// epoch `diverging.0` ends at `diverging.1`; `local_end_offset_for` is the
/// local leader epoch cache's `end_offset_for` (largest epoch at or below the
/// requested one, and where it ends).
pub fn truncation_offset(
    local_end_offset_for: (i32, i64),
    log_end_offset: i64,
    fetch_offset: i64,
    diverging: (i32, i64),
) -> i64 {
    let (leader_epoch, leader_end_offset) = diverging;
    if leader_end_offset == UNDEFINED_EPOCH_OFFSET {
        // The leader knows no end for the epoch: keep what was fetched.
        return fetch_offset.min(log_end_offset);
    }
    if leader_epoch == UNDEFINED_EPOCH {
        return leader_end_offset.min(log_end_offset);
    }
    let (local_epoch, local_end_offset) = local_end_offset_for;
    if local_end_offset == UNDEFINED_EPOCH_OFFSET {
        // No local epoch at or below the leader's: trust the leader's offset.
        leader_end_offset.min(log_end_offset)
    } else if local_epoch != leader_epoch {
        // The leader's epoch is unknown here: cut to where the largest
        // smaller local epoch ends; the next fetch names that epoch and the
        // leader answers again if the logs still differ.
        local_end_offset.min(log_end_offset)
    } else {
        local_end_offset.min(leader_end_offset).min(log_end_offset)
    }
}

/// (leader epoch, base offset) of each batch in validated `records`.
fn batch_epochs(records: &[u8]) -> impl Iterator<Item = (i32, i64)> + '_ {
    BatchIter::new(records)
        .flatten()
        .map(|(_, h, _)| (h.partition_leader_epoch, h.base_offset))
}

impl Partition {
    /// The epoch of the last record in the log (the fetch request's
    /// `last_fetched_epoch`), -1 if the log holds none. Epochs recorded at
    /// the log end offset itself (a leadership without writes) do not count.
    pub fn last_fetched_epoch(&self) -> i32 {
        let leo = self.log.log_end_offset();
        if leo <= 0 {
            return UNDEFINED_EPOCH;
        }
        self.leader_epoch_cache.epoch_for_offset(leo - 1)
    }

    /// Appends batches fetched from the leader, keeping their offsets and
    /// epochs (Kafka's `appendAsFollower`). Every complete batch must pass
    /// its CRC check and offsets must increase, though not by one: a
    /// compacted leader's batches skip the offsets it cleaned away, and the
    /// first new batch may start above the log end offset. A trailing
    /// partial batch is ignored (a fetch may end in one). Batches wholly
    /// below the log end offset are skipped (a resend). Returns what was
    /// appended, None if nothing was new.
    pub fn append_records_as_follower(
        &mut self,
        records: &[u8],
        now_ms: i64,
    ) -> Result<Option<LogAppendInfo>, AppendError> {
        let leo = self.log.log_end_offset();
        // Validate everything before touching the log, as Kafka does.
        let mut new_from: Option<usize> = None;
        let mut valid_end = 0usize;
        let mut prev_last_offset = i64::MIN;
        let mut info = LogAppendInfo::empty();
        for item in BatchIter::new(records) {
            let (pos, h, bytes) = match item {
                Ok(b) => b,
                Err(BatchError::Truncated { .. }) => break,
                Err(e) => return Err(corrupt(format!("fetched batch: {e}"))),
            };
            batch::verify_crc(bytes)
                .map_err(|e| corrupt(format!("fetched batch at offset {}: {e}", h.base_offset)))?;
            if h.last_offset_delta < 0 || h.base_offset <= prev_last_offset {
                return Err(corrupt(format!(
                    "fetched batch at offset {} (last offset {}) after offset {prev_last_offset}",
                    h.base_offset,
                    h.last_offset()
                )));
            }
            prev_last_offset = h.last_offset();
            valid_end = pos + bytes.len();
            if new_from.is_none() {
                if h.last_offset() < leo {
                    continue;
                }
                new_from = Some(pos);
                info.first_offset = h.base_offset;
            }
            info.last_offset = h.last_offset();
            if h.max_timestamp > info.max_timestamp {
                info.max_timestamp = h.max_timestamp;
                info.offset_of_max_timestamp = h.last_offset();
            }
            info.record_count += h.records_count.max(0) as u32;
            info.batch_count += 1;
        }
        let Some(start) = new_from else {
            return Ok(None);
        };
        // A fetch reads one leader segment, whose offsets are relative to
        // its base: more apart than that is not what a leader sends.
        if info.last_offset - info.first_offset > i32::MAX as i64 {
            return Err(corrupt(format!(
                "fetched batches span offsets {}..={}, more than one segment holds",
                info.first_offset, info.last_offset
            )));
        }
        let new = &records[start..valid_end];
        info.valid_bytes = new.len();

        if info.first_offset < leo {
            // The batch straddles the log end offset. Only an empty log may
            // take it (the leader's log start offset fell inside the batch,
            // after DeleteRecords): restart the log at the batch (Kafka's
            // handling of UnexpectedAppendOffsetException).
            if leo != self.log.log_start_offset() {
                return Err(AppendError {
                    error_code: errors::UNKNOWN_SERVER_ERROR,
                    message: format!(
                        "fetched batch at offset {} overlaps the log end offset {leo}",
                        info.first_offset
                    ),
                    record_errors: Vec::new(),
                });
            }
            self.truncate_fully_and_start_at(info.first_offset, now_ms)
                .map_err(|e| {
                    self.storage_error(&format!("restarting the log at {}", info.first_offset), &e)
                })?;
        }
        // A first offset above the log end offset is a gap Kafka's followers
        // accept: a compacted leader no longer has the offsets between. The
        // log appends the batches at their offsets.

        // Kafka records the batches' epochs before appending them. Usually
        // the fetcher has written them already (`queue_fetched_epochs`).
        let leo = self.log.log_end_offset();
        if self
            .leader_epoch_cache
            .needs_follower_update(leo, batch_epochs(new))
        {
            self.leader_epoch_cache
                .follower_update(leo, batch_epochs(new), true)
                .map_err(|e| self.storage_error("writing the leader epoch checkpoint", &e))?;
        }
        let rolled = match self.log.append_as_follower(new, &info, now_ms) {
            Ok(rolled) => rolled,
            Err(e) => return Err(self.storage_error("appending fetched records", &e)),
        };
        if let Some(new_base) = rolled {
            if let Err(e) = self.producer_state.take_snapshot(new_base) {
                log::warn!(
                    "{}-{}: producer snapshot at {new_base}: {e}",
                    self.topic,
                    self.partition
                );
            }
        }
        self.track_appended_batches(new, now_ms)
            .map_err(|e| self.storage_error("writing the transaction index", &e))?;
        Ok(Some(info))
    }

    /// Queues the leader-epoch checkpoint write that appending `records`
    /// (a fetched partition's data) needs, so the fetcher awaits it off
    /// the shard and `append_records_as_follower` then finds the epochs
    /// recorded; no writes when nothing changes.
    pub fn queue_fetched_epochs(&mut self, records: &[u8]) -> io::Result<Vec<QueuedWrite>> {
        let leo = self.log.log_end_offset();
        let fetched = |records| {
            BatchIter::new(records)
                .map_while(Result::ok)
                .filter(move |(_, h, _)| h.last_offset() >= leo)
                .map(|(_, h, _)| (h.partition_leader_epoch, h.base_offset))
        };
        let cache = &mut self.leader_epoch_cache;
        if cache.needs_follower_update(leo, fetched(records)) {
            cache.follower_update(leo, fetched(records), false)?;
        }
        Ok(cache.take_queued_writes())
    }

    /// Removes everything at and above `offset` (Kafka's `truncateTo`): the
    /// log (whole batches), the leader epochs starting there, the producer
    /// state (reloaded from snapshots and replayed, as on open); the high
    /// watermark drops to the new log end offset if above it. Returns false
    /// if `offset` is at or beyond the log end offset (nothing to do).
    pub fn truncate_to(&mut self, offset: i64, now_ms: i64) -> io::Result<bool> {
        if offset >= self.log.log_end_offset() {
            return Ok(false);
        }
        self.log.truncate_to(offset)?;
        let leo = self.log.log_end_offset();
        self.leader_epoch_cache.truncate_from_end(leo)?;
        self.rebuild_producer_state(now_ms)?;
        let hw = self.high_watermark().min(leo);
        self.set_high_watermark(hw);
        Ok(true)
    }

    /// Drops the whole log and restarts it, empty, at `offset` (Kafka's
    /// `truncateFullyAndStartAt`): leader epochs and producer state go too.
    pub fn truncate_fully_and_start_at(&mut self, offset: i64, now_ms: i64) -> io::Result<()> {
        self.log.truncate_fully_and_start_at(offset)?;
        debug_assert_eq!(self.log.log_end_offset(), offset);
        debug_assert_eq!(self.log.log_start_offset(), offset);
        // Every epoch and snapshot describes data that is gone.
        self.leader_epoch_cache.truncate_from_end(i64::MIN)?;
        self.producer_state.delete_snapshots_before(i64::MAX)?;
        self.rebuild_producer_state(now_ms)?;
        self.set_high_watermark(offset);
        Ok(())
    }

    /// Kafka's `maybeIncrementLogStartOffset` for a follower: follows the
    /// leader's log start offset up, never above the high watermark.
    /// Returns true if the log start offset moved.
    pub fn maybe_increment_log_start_offset(
        &mut self,
        leader_log_start_offset: i64,
    ) -> io::Result<bool> {
        let target = leader_log_start_offset.min(self.high_watermark());
        if target <= self.log.log_start_offset() {
            return Ok(false);
        }
        let start = self.log.delete_records_before(target)?;
        self.producer_state.on_log_start_offset_incremented(start);
        Ok(true)
    }

    /// Reloads producer state from the newest snapshot at or below the log
    /// end offset and replays the log after it (as `Partition::open` does).
    fn rebuild_producer_state(&mut self, now_ms: i64) -> io::Result<()> {
        let replay_from = self.producer_state.truncate_and_reload(
            self.log.log_start_offset(),
            self.log.log_end_offset(),
            now_ms,
        )?;
        self.log
            .replay_producer_state(&mut self.producer_state, replay_from)
    }
}

/// A follower partition in a fresh directory, for this module's tests and
/// the fetcher's.
#[cfg(test)]
pub(crate) mod test_support {
    use std::collections::BTreeMap;
    use std::path::PathBuf;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::Arc;

    use kshard_shards::log::config::IoMode;
    use kshard_shards::log::records::BatchBuilder;
    use uuid::Uuid;

    use crate::config::topic::TopicConfig;
    use crate::config::BrokerConfig;
    use crate::replica::partition::Partition;

    pub const NOW_MS: i64 = 1_700_000_000_000;

    /// Closes `p` and waits for its queued close (fsyncs) to finish.
    pub fn close_and_wait(p: Partition) {
        let closed = p.close().unwrap();
        futures_lite::future::block_on(crate::replica::partition::log_dir_op_done(closed.closed))
            .unwrap();
    }

    pub fn temp_dir(name: &str) -> PathBuf {
        static N: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "kshard-follower-{name}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    pub fn topic_config(overrides: &[(&str, &str)]) -> Arc<TopicConfig> {
        let broker = BrokerConfig::from_map(&BTreeMap::new()).unwrap();
        let map: BTreeMap<String, String> = overrides
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Arc::new(TopicConfig::from_overrides(&broker, &map).unwrap())
    }

    /// A one-shard ReplicaManager of broker 1 over `dir`, with Kafka's
    /// defaults.
    pub fn replica_manager_in(
        dir: &std::path::Path,
    ) -> std::rc::Rc<crate::replica::ReplicaManager> {
        use crate::metadata::metadata_cache::MetadataCache;
        use crate::replica::{ReplicaConfig, ReplicaManager};
        let config = Arc::new(BrokerConfig::from_map(&BTreeMap::new()).unwrap());
        std::rc::Rc::new(ReplicaManager::new(ReplicaConfig {
            shard_id: 0,
            nr_shards: 1,
            broker_id: 1,
            log_dirs: crate::replica::LogDirs::single(dir),
            startup_checkpoints: std::collections::HashMap::new(),
            config: config.clone(),
            metadata: Arc::new(MetadataCache::new(Default::default())),
            cluster: None,
            cleaner_slots: Arc::new(crate::replica::cleaner_slots::CleanerSlots::new(Arc::new(
                crate::config::dynamic::DynamicBrokerConfig::new(config),
            ))),
            replication_quotas: Default::default(),
        }))
    }

    /// Topic `t` with default configs and no partitions in its image.
    pub fn topic_t() -> Arc<crate::metadata::metadata_cache::TopicInfo> {
        Arc::new(crate::metadata::metadata_cache::TopicInfo {
            name: "t".into(),
            topic_id: Uuid::from_u128(7),
            partitions: Vec::new(),
            overrides: BTreeMap::new(),
            config: topic_config(&[]),
            is_internal: false,
        })
    }

    /// Opens `t-0` under `dir` as a follower at `leader_epoch`, its log
    /// starting at `log_start_offset`.
    pub fn follower_in(
        dir: &std::path::Path,
        leader_epoch: i32,
        log_start_offset: i64,
        overrides: &[(&str, &str)],
    ) -> Partition {
        let mut p = Partition::open(
            dir,
            "t",
            0,
            Uuid::from_u128(7),
            topic_config(overrides),
            0,
            log_start_offset,
            leader_epoch,
            86_400_000,
            IoMode::Buffered,
            NOW_MS,
            None,
        )
        .unwrap();
        p.become_leader_or_follower(leader_epoch, false).unwrap();
        // What the broker's LeaderAndIsr does with the open's checkpoint write.
        for write in p.leader_epoch_cache.take_queued_writes() {
            futures_lite::future::block_on(write).unwrap().unwrap();
        }
        p
    }

    /// `count` records at `base_offset` written in `epoch`.
    pub fn batch(base_offset: i64, count: usize, epoch: i32) -> Vec<u8> {
        let mut b = BatchBuilder::new(base_offset).partition_leader_epoch(epoch);
        for i in 0..count {
            b.push(NOW_MS + i as i64, Some(b"k"), Some(b"value"), &[]);
        }
        b.build()
    }

    /// Like `batch`, from an idempotent producer.
    pub fn producer_batch(
        base_offset: i64,
        count: usize,
        epoch: i32,
        producer_id: i64,
        seq: i32,
    ) -> Vec<u8> {
        let mut b = BatchBuilder::new(base_offset)
            .partition_leader_epoch(epoch)
            .producer(producer_id, 0, seq);
        for i in 0..count {
            b.push(NOW_MS + i as i64, None, Some(b"v"), &[]);
        }
        b.build()
    }

    /// The log's bytes from `offset` to its end.
    pub fn log_bytes(p: &Partition, offset: i64) -> Vec<u8> {
        let mut out = Vec::new();
        let mut at = offset;
        while at < p.log.log_end_offset() {
            let info = p.log.read(at, u32::MAX, i64::MAX, true).unwrap();
            let Some(slice) = info.slice else { break };
            let bytes = kshard_shards::log::read_slice_bytes(&slice).unwrap();
            let mut next = at;
            for (_, h, _) in kshard_shards::log::batch::BatchIter::new(&bytes).flatten() {
                next = h.last_offset() + 1;
            }
            out.extend_from_slice(&bytes);
            at = next;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::test_support::*;
    use super::*;
    use crate::protocol::errors::ErrorCode;

    fn concat(parts: &[&[u8]]) -> Vec<u8> {
        parts.concat()
    }

    #[test]
    fn follower_append_keeps_offsets_epochs_and_bytes() {
        let dir = temp_dir("append");
        // Opening records the metadata epoch at the empty log's end.
        let mut p = follower_in(&dir, 1, 0, &[]);
        assert_eq!(p.leader_epoch_cache.entries(), &[(1, 0)]);
        assert_eq!(p.last_fetched_epoch(), UNDEFINED_EPOCH);
        let fetched = concat(&[
            &batch(0, 3, 3),
            &batch(3, 2, 3),
            &producer_batch(5, 1, 5, 42, 0),
        ]);
        let info = p
            .append_records_as_follower(&fetched, NOW_MS)
            .map_err(|e| e.message)
            .unwrap()
            .unwrap();
        assert_eq!((info.first_offset, info.last_offset), (0, 5));
        assert_eq!((info.batch_count, info.record_count), (3, 6));
        assert_eq!(info.valid_bytes, fetched.len());
        assert_eq!(info.log_append_time_ms, -1);
        assert_eq!(info.max_timestamp, NOW_MS + 2);
        assert_eq!(info.offset_of_max_timestamp, 2);
        assert_eq!(p.log.log_end_offset(), 6);
        // The leader's epochs, not the one recorded at open.
        assert_eq!(p.leader_epoch_cache.entries(), &[(3, 0), (5, 5)]);
        assert_eq!(p.last_fetched_epoch(), 5);
        // Stored byte for byte: offsets, epochs and CRCs as the leader sent them.
        assert_eq!(log_bytes(&p, 0), fetched);
        let producer = p.producer_state.last_entry(42).expect("producer replayed");
        assert_eq!(producer.last_seq(), 0);
        assert_eq!(producer.last_data_offset(), 5);
        // The high watermark is the fetcher's to set.
        assert_eq!(p.high_watermark(), 0);
        crate::replica::partition::leader_epoch_writes::remove_test_dir(&dir);
    }

    #[test]
    fn follower_append_skips_what_it_has() {
        let dir = temp_dir("resend");
        let mut p = follower_in(&dir, 0, 0, &[]);
        let first = concat(&[&batch(0, 2, 0), &batch(2, 2, 0)]);
        p.append_records_as_follower(&first, NOW_MS).ok().unwrap();
        assert!(p
            .append_records_as_follower(&first, NOW_MS)
            .ok()
            .unwrap()
            .is_none());
        let more = concat(&[&first, &batch(4, 3, 1)]);
        let info = p
            .append_records_as_follower(&more, NOW_MS)
            .ok()
            .unwrap()
            .unwrap();
        assert_eq!(
            (info.first_offset, info.last_offset, info.batch_count),
            (4, 6, 1)
        );
        assert_eq!(p.log.log_end_offset(), 7);
        assert_eq!(log_bytes(&p, 0), more);
        // Empty input and a lone partial batch append nothing.
        assert!(p
            .append_records_as_follower(&[], NOW_MS)
            .ok()
            .unwrap()
            .is_none());
        let partial = batch(7, 2, 1);
        assert!(p
            .append_records_as_follower(&partial[..partial.len() - 1], NOW_MS)
            .ok()
            .unwrap()
            .is_none());
        // A trailing partial batch is left for the next fetch.
        let with_tail = concat(&[&batch(7, 1, 1), &partial[..20]]);
        let info = p
            .append_records_as_follower(&with_tail, NOW_MS)
            .ok()
            .unwrap()
            .unwrap();
        assert_eq!(info.last_offset, 7);
        assert_eq!(p.log.log_end_offset(), 8);
        crate::replica::partition::leader_epoch_writes::remove_test_dir(&dir);
    }

    #[test]
    fn follower_append_rejects_corruption_and_overlaps() {
        let dir = temp_dir("reject");
        let mut p = follower_in(&dir, 0, 0, &[]);
        p.append_records_as_follower(&batch(0, 2, 0), NOW_MS)
            .ok()
            .unwrap();
        let check = |p: &mut Partition, records: &[u8], code: ErrorCode| {
            let before = (p.log.log_end_offset(), p.log.size_bytes());
            match p.append_records_as_follower(records, NOW_MS) {
                Err(e) => assert_eq!(e.error_code, code, "{}", e.message),
                Ok(_) => panic!("appended"),
            }
            assert_eq!((p.log.log_end_offset(), p.log.size_bytes()), before);
        };
        // A flipped bit in a record, even behind a good batch: nothing goes in.
        let mut bad = batch(3, 2, 0);
        let last = bad.len() - 1;
        bad[last] ^= 1;
        check(
            &mut p,
            &concat(&[&batch(2, 1, 0), &bad]),
            errors::CORRUPT_MESSAGE,
        );
        // Not a v2 batch.
        let mut magic = batch(2, 1, 0);
        magic[batch::MAGIC_OFFSET] = 1;
        check(&mut p, &magic, errors::CORRUPT_MESSAGE);
        // Offsets that go backwards.
        check(
            &mut p,
            &concat(&[&batch(2, 3, 0), &batch(3, 1, 0)]),
            errors::CORRUPT_MESSAGE,
        );
        // A batch across the end of a non-empty log.
        check(&mut p, &batch(1, 3, 0), errors::UNKNOWN_SERVER_ERROR);
        crate::replica::partition::leader_epoch_writes::remove_test_dir(&dir);
    }

    /// A compacted leader's batches skip offsets: appended at their
    /// offsets, the log end offset after the last, epochs at the batches
    /// that carry them, producers replayed, all kept across a reopen.
    #[test]
    fn follower_append_takes_a_compacted_leaders_gaps() {
        let dir = temp_dir("gaps");
        let mut p = follower_in(&dir, 0, 0, &[]);
        // An empty log's first batch above its end: the epoch recorded at
        // open (at the end, no batches) gives way to the batch's.
        let first = batch(7, 2, 1);
        let info = p
            .append_records_as_follower(&first, NOW_MS)
            .map_err(|e| e.message)
            .unwrap()
            .unwrap();
        assert_eq!((info.first_offset, info.last_offset), (7, 8));
        assert_eq!(p.log.log_end_offset(), 9);
        assert_eq!(p.leader_epoch_cache.entries(), &[(1, 7)]);
        // Gaps between batches and after the end, behind a resend.
        let fetched = concat(&[
            &first,
            &batch(12, 1, 1),
            &producer_batch(20, 2, 2, 42, 0),
            &batch(30, 3, 3),
        ]);
        let info = p
            .append_records_as_follower(&fetched, NOW_MS)
            .map_err(|e| e.message)
            .unwrap()
            .unwrap();
        assert_eq!((info.first_offset, info.last_offset), (12, 32));
        assert_eq!((info.batch_count, info.record_count), (3, 6));
        assert_eq!(info.valid_bytes, fetched.len() - first.len());
        assert_eq!(p.log.log_end_offset(), 33);
        assert_eq!(p.leader_epoch_cache.entries(), &[(1, 7), (2, 20), (3, 30)]);
        assert_eq!(p.last_fetched_epoch(), 3);
        assert_eq!(log_bytes(&p, 0), fetched);
        assert_eq!(
            p.producer_state.last_entry(42).unwrap().last_data_offset(),
            21
        );
        // A read in a gap starts at the next batch.
        let r = p.read_for_follower(13, u32::MAX, true);
        let bytes = kshard_shards::log::read_slice_bytes(&r.slice.unwrap()).unwrap();
        assert_eq!(bytes, fetched[first.len() + batch(12, 1, 1).len()..]);
        // Truncating into a gap (a diverging epoch) ends at the batch below.
        assert!(p.truncate_to(25, NOW_MS).unwrap());
        assert_eq!(p.log.log_end_offset(), 22);
        assert_eq!(p.leader_epoch_cache.entries(), &[(1, 7), (2, 20)]);
        let again = batch(30, 3, 3);
        p.append_records_as_follower(&again, NOW_MS).ok().unwrap();
        assert_eq!(p.log.log_end_offset(), 33);
        close_and_wait(p);
        let p = follower_in(&dir, 0, 0, &[]);
        assert_eq!(p.log.log_end_offset(), 33);
        assert_eq!(log_bytes(&p, 0), fetched);
        assert_eq!(
            p.leader_epoch_cache.entries()[..3],
            [(1, 7), (2, 20), (3, 30)]
        );
        assert_eq!(p.producer_state.last_entry(42).unwrap().last_seq(), 1);
        crate::replica::partition::leader_epoch_writes::remove_test_dir(&dir);
    }

    /// The fetcher's queued epoch write leaves the append nothing to write;
    /// a failed one makes the append write again.
    #[test]
    fn fetched_epochs_are_written_before_the_append() {
        let dir = temp_dir("fetched-epochs");
        let mut p = follower_in(&dir, 0, 0, &[]);
        p.append_records_as_follower(&batch(0, 2, 1), NOW_MS)
            .ok()
            .unwrap();
        assert_eq!(p.leader_epoch_cache.entries(), &[(1, 0)]);
        // Nothing new: no write queued.
        let resend = concat(&[&batch(0, 2, 1), &batch(2, 1, 1)]);
        assert!(p.queue_fetched_epochs(&resend).unwrap().is_empty());
        let fetched = concat(&[&batch(0, 2, 1), &batch(2, 1, 1), &batch(3, 2, 4)]);
        let writes = p.queue_fetched_epochs(&fetched).unwrap();
        assert_eq!(writes.len(), 1);
        for w in writes {
            futures_lite::future::block_on(w).unwrap().unwrap();
        }
        let checkpoint = dir.join("t-0").join("leader-epoch-checkpoint");
        let text = std::fs::read_to_string(&checkpoint).unwrap();
        assert_eq!(text, "0\n2\n1 0\n4 3\n", "written before the append");
        let leo = p.log.log_end_offset();
        let epochs = [(1, 2), (4, 3)].into_iter();
        assert!(!p.leader_epoch_cache.needs_follower_update(leo, epochs));
        p.append_records_as_follower(&fetched, NOW_MS).ok().unwrap();
        assert_eq!(p.log.log_end_offset(), 5);
        assert_eq!(p.leader_epoch_cache.entries(), &[(1, 0), (4, 3)]);
        // A failed queued write: the append writes the file itself.
        std::fs::remove_file(&checkpoint).unwrap();
        p.leader_epoch_cache.mark_file_stale();
        p.append_records_as_follower(&batch(5, 1, 4), NOW_MS)
            .ok()
            .unwrap();
        let text = std::fs::read_to_string(&checkpoint).unwrap();
        assert_eq!(text, "0\n2\n1 0\n4 3\n");
        crate::replica::partition::leader_epoch_writes::remove_test_dir(&dir);
    }

    /// A gap the active segment cannot index, and one at a size roll: the
    /// new segment starts at the batch and the producer snapshot is taken
    /// there, as after a leader's roll.
    #[test]
    fn follower_gaps_roll_segments_at_the_batch() {
        let dir = temp_dir("gap-roll");
        let mut p = follower_in(&dir, 0, 0, &[("segment.bytes", "100")]);
        p.append_records_as_follower(&producer_batch(0, 1, 0, 5, 0), NOW_MS)
            .ok()
            .unwrap();
        p.append_records_as_follower(&producer_batch(10, 1, 0, 5, 1), NOW_MS)
            .ok()
            .unwrap();
        let far = i32::MAX as i64 + 50;
        let far_batch = batch(far, 2, 0);
        assert!(far_batch.len() < 100, "no size roll here");
        p.append_records_as_follower(&far_batch, NOW_MS)
            .ok()
            .unwrap();
        assert_eq!(p.log.segment_base_offsets(), vec![0, 10, far]);
        assert_eq!(p.log.log_end_offset(), far + 2);
        kshard_shards::log::producer_state::wait_for_snapshot_syncs();
        for base in [10, far] {
            let snapshot =
                kshard_shards::log::producer_state::snapshot_path(&dir.join("t-0"), base);
            assert!(snapshot.exists(), "{}", snapshot.display());
        }
        // A read at the old end gets the far batch.
        let r = p.read_for_follower(11, u32::MAX, true);
        let bytes = kshard_shards::log::read_slice_bytes(&r.slice.unwrap()).unwrap();
        assert_eq!(bytes, far_batch);
        crate::replica::partition::leader_epoch_writes::remove_test_dir(&dir);
    }

    /// One fetch never spans more offsets than a segment indexes (it reads
    /// one leader segment): such data is refused, nothing is appended.
    #[test]
    fn follower_refuses_batches_wider_than_a_segment() {
        let dir = temp_dir("gap-wide");
        let mut p = follower_in(&dir, 0, 0, &[]);
        let wide = concat(&[&batch(0, 1, 0), &batch(i32::MAX as i64 + 1, 1, 0)]);
        match p.append_records_as_follower(&wide, NOW_MS) {
            Err(e) => assert_eq!(e.error_code, errors::CORRUPT_MESSAGE, "{}", e.message),
            Ok(_) => panic!("appended"),
        }
        assert_eq!((p.log.log_end_offset(), p.log.size_bytes()), (0, 0));
        crate::replica::partition::leader_epoch_writes::remove_test_dir(&dir);
    }

    #[test]
    fn empty_log_restarts_at_a_batch_across_its_start() {
        let dir = temp_dir("restart");
        // DeleteRecords on the leader left its log start inside a batch.
        let mut p = follower_in(&dir, 0, 100, &[]);
        assert_eq!(
            (p.log.log_start_offset(), p.log.log_end_offset()),
            (100, 100)
        );
        let info = p
            .append_records_as_follower(&batch(95, 10, 2), NOW_MS)
            .map_err(|e| e.message)
            .unwrap()
            .unwrap();
        assert_eq!(info.first_offset, 95);
        assert_eq!(
            (p.log.log_start_offset(), p.log.log_end_offset()),
            (95, 105)
        );
        assert_eq!(p.leader_epoch_cache.entries(), &[(2, 95)]);
        // Restarting above the data (the leader's log starts past ours).
        p.truncate_fully_and_start_at(200, NOW_MS).unwrap();
        assert_eq!(
            (p.log.log_start_offset(), p.log.log_end_offset()),
            (200, 200)
        );
        assert!(p.leader_epoch_cache.entries().is_empty());
        assert_eq!(p.high_watermark(), 200);
        let info = p
            .append_records_as_follower(&batch(200, 2, 3), NOW_MS)
            .map_err(|e| e.message)
            .unwrap()
            .unwrap();
        assert_eq!((info.first_offset, p.log.log_end_offset()), (200, 202));
        crate::replica::partition::leader_epoch_writes::remove_test_dir(&dir);
    }

    #[test]
    fn truncate_to_drops_the_tail_epochs_and_producers() {
        let dir = temp_dir("truncate");
        let mut p = follower_in(&dir, 0, 0, &[]);
        let fetched = concat(&[
            &batch(0, 3, 3),
            &producer_batch(3, 2, 4, 9, 0),
            &producer_batch(5, 1, 5, 10, 0),
        ]);
        p.append_records_as_follower(&fetched, NOW_MS).ok().unwrap();
        p.set_high_watermark(6);
        assert!(!p.truncate_to(6, NOW_MS).unwrap());
        assert!(!p.truncate_to(60, NOW_MS).unwrap());
        assert!(p.truncate_to(5, NOW_MS).unwrap());
        assert_eq!(p.log.log_end_offset(), 5);
        assert_eq!(p.high_watermark(), 5);
        assert_eq!(p.leader_epoch_cache.entries(), &[(3, 0), (4, 3)]);
        assert_eq!(p.last_fetched_epoch(), 4);
        assert!(p.producer_state.last_entry(10).is_none());
        assert_eq!(
            p.producer_state.last_entry(9).unwrap().last_data_offset(),
            4
        );
        // Inside a batch: the whole batch goes.
        assert!(p.truncate_to(4, NOW_MS).unwrap());
        assert_eq!(p.log.log_end_offset(), 3);
        assert_eq!(p.leader_epoch_cache.entries(), &[(3, 0)]);
        assert!(p.producer_state.last_entry(9).is_none());
        assert_eq!(log_bytes(&p, 0), batch(0, 3, 3));
        // Fetching resumes at the new end.
        let next = producer_batch(3, 1, 6, 11, 0);
        p.append_records_as_follower(&next, NOW_MS).ok().unwrap();
        assert_eq!(p.leader_epoch_cache.entries(), &[(3, 0), (6, 3)]);
        assert_eq!(p.log.log_end_offset(), 4);
        crate::replica::partition::leader_epoch_writes::remove_test_dir(&dir);
    }

    #[test]
    fn truncation_survives_reopen() {
        let dir = temp_dir("reopen");
        let mut p = follower_in(&dir, 0, 0, &[("segment.bytes", "14")]);
        for i in 0..4 {
            let b = producer_batch(i * 2, 2, i as i32, 5, (i * 2) as i32);
            p.append_records_as_follower(&b, NOW_MS).ok().unwrap();
        }
        assert_eq!(p.log.segment_count(), 4, "one batch per segment");
        assert!(p.truncate_to(3, NOW_MS).unwrap());
        assert_eq!(p.log.log_end_offset(), 2);
        assert_eq!(p.producer_state.last_entry(5).unwrap().last_seq(), 1);
        close_and_wait(p);
        let p = follower_in(&dir, 0, 0, &[("segment.bytes", "14")]);
        assert_eq!(p.log.log_end_offset(), 2);
        assert_eq!(p.leader_epoch_cache.entries()[0], (0, 0));
        assert_eq!(p.producer_state.last_entry(5).unwrap().last_seq(), 1);
        crate::replica::partition::leader_epoch_writes::remove_test_dir(&dir);
    }

    #[test]
    fn log_start_offset_follows_the_leader_up_to_the_high_watermark() {
        let dir = temp_dir("lso");
        let mut p = follower_in(&dir, 0, 0, &[]);
        p.append_records_as_follower(&concat(&[&batch(0, 4, 0), &batch(4, 4, 0)]), NOW_MS)
            .ok()
            .unwrap();
        p.set_high_watermark(6);
        assert!(p.maybe_increment_log_start_offset(3).unwrap());
        assert_eq!(p.log.log_start_offset(), 3);
        assert!(!p.maybe_increment_log_start_offset(2).unwrap());
        assert!(p.maybe_increment_log_start_offset(100).unwrap());
        assert_eq!(p.log.log_start_offset(), 6);
        crate::replica::partition::leader_epoch_writes::remove_test_dir(&dir);
    }

    #[test]
    fn truncation_offsets_follow_kafka() {
        // (local end_offset_for result, log end offset, fetch offset, diverging)
        // Same epoch on both sides: the smaller end wins.
        assert_eq!(truncation_offset((3, 80), 100, 100, (3, 90)), 80);
        assert_eq!(truncation_offset((3, 95), 100, 100, (3, 90)), 90);
        assert_eq!(truncation_offset((3, 120), 100, 100, (3, 110)), 100);
        // The leader's epoch is unknown here: cut to the smaller epoch's end.
        assert_eq!(truncation_offset((2, 70), 100, 100, (3, 90)), 70);
        // No local epoch at or below the leader's: the leader's offset.
        assert_eq!(
            truncation_offset((UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET), 100, 100, (1, 40)),
            40
        );
        // The leader knows no end offset: nothing to cut.
        assert_eq!(
            truncation_offset((3, 80), 100, 100, (3, UNDEFINED_EPOCH_OFFSET)),
            100
        );
        assert_eq!(
            truncation_offset((3, 80), 100, 100, (UNDEFINED_EPOCH, 60)),
            60
        );
    }
}
