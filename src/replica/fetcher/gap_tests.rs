//! A follower replicating a compacted leader, through the leader's real
//! fetch path (`Partitions::read` for a replica, `fetch_wait_check`) and
//! the follower's (`apply_fetched_partition`). Kafka's followers take a
//! cleaned leader's batches at their offsets (`appendAsFollower`): a fetch
//! at an offset the cleaner removed is answered with the next batch, the
//! follower's log end offset jumps to that batch's end, and the follower
//! catches up and stays in the ISR.

use std::collections::{BTreeMap, HashMap};

use bytes::Bytes;
use kshard_shards::log::cleaner::{CleanerConfig, LogCleaner};
use kshard_shards::log::config::IoMode;
use kshard_shards::log::read_slice_bytes;
use kshard_shards::log::records::BatchBuilder;
use uuid::Uuid;

use super::*;
use crate::metadata::metadata_cache::TopicInfo;
use crate::protocol::errors;
use crate::replica::partition::follower::test_support::*;
use crate::replica::partition::Partition;
use crate::replica::{FetchBudget, FetchPart, FetchWaitCheck, Partitions};

const COMPACTED: &[(&str, &str)] = &[
    ("cleanup.policy", "compact"),
    ("segment.bytes", "2048"),
    ("min.cleanable.dirty.ratio", "0.01"),
    ("min.compaction.lag.ms", "0"),
];
const LEADER_EPOCH: i32 = 1;

/// A batch at `base` of one record per key, values naming the offset.
fn keyed_batch(base: i64, keys: &[&str], epoch: i32) -> Vec<u8> {
    let mut b = BatchBuilder::new(base).partition_leader_epoch(epoch);
    for (i, k) in keys.iter().enumerate() {
        let value = format!("{k}@{}", base + i as i64);
        b.push(
            NOW_MS + base,
            Some(k.as_bytes()),
            Some(value.as_bytes()),
            &[],
        );
    }
    b.build()
}

/// (base, last) offsets of a partition's batches, read as a fetcher does.
fn batch_offsets(p: &Partition) -> Vec<(i64, i64)> {
    kshard_shards::log::batch::BatchIter::new(&log_bytes(p, 0))
        .map(|b| b.unwrap().1)
        .map(|h| (h.base_offset, h.last_offset()))
        .collect()
}

/// Broker 1 leading t-0 (replicas 1, 2, 3, all in sync) with 60 batches,
/// then cleaned: most batches below the active segment are gone.
fn cleaned_leader(dir: &std::path::Path) -> Partitions {
    let mut leader = Partitions::new(
        crate::replica::LogDirs::single(dir),
        HashMap::new(),
        86_400_000,
        IoMode::Buffered,
    );
    let topic = TopicInfo {
        name: "t".into(),
        topic_id: Uuid::from_u128(7),
        partitions: Vec::new(),
        overrides: BTreeMap::new(),
        config: topic_config(COMPACTED),
        is_internal: false,
    };
    leader
        .open_partitions(&topic, &[0], NOW_MS, &mut Default::default())
        .unwrap();
    let p = leader.partition_mut("t", 0).unwrap();
    p.become_leader_or_follower(LEADER_EPOCH, false).unwrap();
    for i in 0..60i64 {
        // Two records per batch, keys "a" and "b" overwritten again and
        // again; every third batch also has a key of its own, which stays.
        let own = format!("u{i}");
        let keys = if i % 3 == 0 {
            [own.as_str(), "a"]
        } else {
            ["a", "b"]
        };
        let b = keyed_batch(i * 2, &keys, LEADER_EPOCH);
        p.append_records_as_follower(&b, NOW_MS).unwrap();
    }
    p.make_leader(1, LEADER_EPOCH, &[1, 2, 3], &[1, 2, 3], 5, NOW_MS)
        .unwrap();
    let before = batch_offsets(p).len();
    let stats = LogCleaner::new(CleanerConfig::default())
        .clean_now(&mut p.log, &|_| None, NOW_MS, None)
        .unwrap()
        .expect("a cleaning pass");
    assert!(stats.records_retained < stats.records_read);
    let after = batch_offsets(p);
    assert!(
        after.len() < before,
        "{} of {before} batches kept",
        after.len()
    );
    assert!(
        after.windows(2).filter(|w| w[1].0 > w[0].1 + 1).count() > 3,
        "the cleaner left gaps: {after:?}"
    );
    leader
}

/// The fetch a follower (`replica`) sends for `p`'s log end.
fn follower_fetch(p: &Partition, replica: i32, max_bytes: u32) -> FetchPart {
    let req = fetch_request_for(p);
    FetchPart {
        topic: "t".into(),
        partition: 0,
        fetch_offset: req.fetch_offset,
        max_bytes,
        current_leader_epoch: LEADER_EPOCH,
        replica_id: replica,
        last_fetched_epoch: req.last_fetched_epoch,
        read_committed: false,
    }
}

/// One fetch round: the leader reads, the follower applies. Returns the
/// base offset of the first batch sent, if any.
fn fetch_once(leader: &mut Partitions, f: &mut Partition, replica: i32) -> Option<i64> {
    let part = follower_fetch(f, replica, 1500);
    let mut budget = FetchBudget::new(u32::MAX, false);
    let r = leader.read(&part, &mut budget, NOW_MS);
    assert_eq!(r.error_code, errors::NONE);
    assert_eq!(r.diverging_epoch, None, "at {}", part.fetch_offset);
    let records = r.slice.map(|s| read_slice_bytes(&s).unwrap());
    let first = records.as_deref().map(|b| {
        let (_, h, _) = kshard_shards::log::batch::BatchIter::new(b)
            .next()
            .unwrap()
            .unwrap();
        h.base_offset
    });
    let data = FetchedPartition {
        error_code: errors::NONE,
        high_watermark: r.high_watermark,
        log_start_offset: r.log_start_offset,
        diverging_epoch: None,
        records: records.map(Bytes::from),
    };
    let out = apply_fetched_partition(f, part.fetch_offset, &data, NOW_MS);
    assert!(matches!(out, FetchOutcome::Applied { .. }), "{out:?}");
    first
}

#[test]
fn a_follower_replicates_a_cleaned_leader_and_stays_in_sync() {
    let dir = temp_dir("gap-leader");
    let mut leader = cleaned_leader(&dir);
    let leo = leader.partition("t", 0).unwrap().log.log_end_offset();
    assert_eq!(leo, 120);
    let fdir = temp_dir("gap-follower");
    let mut f = follower_in(&fdir, LEADER_EPOCH, 0, COMPACTED);
    let mut answered_past_the_offset = 0;
    for round in 0.. {
        assert!(
            round < 200,
            "the follower stalled at {}",
            f.log.log_end_offset()
        );
        let fetch_offset = f.log.log_end_offset();
        if fetch_offset < leo {
            // A parked fetch at a cleaned offset sees data, not an empty log.
            let part = follower_fetch(&f, 2, 1500);
            assert_ne!(leader.fetch_wait_check(&part), FetchWaitCheck::Bytes(0));
        }
        let first = fetch_once(&mut leader, &mut f, 2);
        if fetch_offset == leo {
            assert_eq!(first, None);
            break;
        }
        let first = first.expect("data below the leader's end");
        assert!(first >= fetch_offset);
        if first > fetch_offset {
            answered_past_the_offset += 1;
        }
        assert!(f.log.log_end_offset() > fetch_offset, "no progress");
    }
    assert!(answered_past_the_offset > 0, "no fetch landed in a gap");
    // Byte for byte the leader's log, gaps included.
    let lp = leader.partition("t", 0).unwrap();
    assert_eq!(log_bytes(&f, 0), log_bytes(lp, 0));
    assert_eq!(f.log.log_end_offset(), leo);
    assert_eq!(f.last_fetched_epoch(), LEADER_EPOCH);

    // Replica 3 catches up too; the high watermark reaches the end and
    // nobody is out of sync.
    let fdir3 = temp_dir("gap-follower3");
    let mut f3 = follower_in(&fdir3, LEADER_EPOCH, 0, COMPACTED);
    while f3.log.log_end_offset() < leo {
        fetch_once(&mut leader, &mut f3, 3);
    }
    fetch_once(&mut leader, &mut f, 2);
    fetch_once(&mut leader, &mut f3, 3);
    let lp = leader.partition("t", 0).unwrap();
    assert_eq!(lp.high_watermark(), leo);
    assert_eq!(lp.isr_to_shrink(NOW_MS + 1, 30_000), None);
    // The follower learns it with its next fetch.
    fetch_once(&mut leader, &mut f, 2);
    assert_eq!(f.high_watermark(), leo);

    // The follower's own cleaner (Kafka's followers clean their copy) and
    // a reopen keep it readable and fetching.
    let cleaned = LogCleaner::new(CleanerConfig::default())
        .clean_now(&mut f.log, &|_| None, NOW_MS, None)
        .unwrap();
    let kept = batch_offsets(&f);
    close_and_wait(f);
    let mut f = follower_in(&fdir, LEADER_EPOCH, 0, COMPACTED);
    assert_eq!(f.log.log_end_offset(), leo);
    assert_eq!(batch_offsets(&f), kept, "cleaned: {cleaned:?}");
    let lp = leader.partition_mut("t", 0).unwrap();
    // A gap right at the follower's end (the leader's next segment,
    // cleaned once it was no longer active, lost its first batches).
    let more = keyed_batch(leo + 5, &["a", "e"], LEADER_EPOCH);
    lp.become_leader_or_follower(LEADER_EPOCH, false).unwrap();
    lp.append_records_as_follower(&more, NOW_MS).unwrap();
    lp.make_leader(1, LEADER_EPOCH, &[1, 2, 3], &[1, 2, 3], 5, NOW_MS)
        .unwrap();
    assert_eq!(fetch_once(&mut leader, &mut f, 2), Some(leo + 5));
    assert_eq!(f.log.log_end_offset(), leo + 7);
    for d in [dir, fdir, fdir3] {
        crate::replica::partition::leader_epoch_writes::remove_test_dir(&d);
    }
}
