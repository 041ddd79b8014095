//! Replication quotas on both sides of a fetch: the leader's answer to a
//! follower (`Partitions::read` for a replica, `fetch_wait_check`) and the
//! follower's fetcher leaving a partition out of its request, with a quota
//! whose "exceeded" the test sets.

use crate::security::inter_broker::InterBrokerSecurity;
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_lite::{AsyncReadExt, AsyncWriteExt};
use kafka_protocol::messages::{ApiKey, FetchRequest};
use kshard_shards::log::config::IoMode;
use uuid::Uuid;

use super::tests::{broker_config, flatten, followed, leader, partition_data, TOPIC_ID};
use super::*;
use crate::metadata::metadata_cache::TopicInfo;
use crate::protocol::errors;
use crate::protocol::fetch_encoder::{encode_fetch_response, FetchResponseData, FetchTopicData};
use crate::replica::partition::follower::test_support::*;
use crate::replica::quota::{should_follower_throttle, should_leader_throttle};
use crate::replica::{FetchBudget, FetchPart, FetchWaitCheck, Partitions, ReplicaQuota};

/// A quota whose state the test decides; counts what is recorded.
#[derive(Default)]
struct TestQuota {
    exceeded: AtomicBool,
    recorded: AtomicU64,
    checks: AtomicU64,
}

impl TestQuota {
    fn exceeded() -> Arc<Self> {
        let q = Arc::new(TestQuota::default());
        q.exceeded.store(true, Ordering::SeqCst);
        q
    }

    fn set(&self, exceeded: bool) {
        self.exceeded.store(exceeded, Ordering::SeqCst);
    }
}

impl ReplicaQuota for TestQuota {
    fn is_quota_exceeded(&self) -> bool {
        self.checks.fetch_add(1, Ordering::SeqCst);
        self.exceeded.load(Ordering::SeqCst)
    }

    fn record(&self, bytes: u64) {
        self.recorded.fetch_add(bytes, Ordering::SeqCst);
    }
}

const EPOCH: i32 = 3;

/// Broker 1 leading t-0 (replicas 1, 2, 3; ISR 1, 2) with 4 batches of
/// 2 records, its topic configured with `overrides`.
fn leader_of(
    dir: &std::path::Path,
    overrides: &[(&str, &str)],
    quota: Arc<TestQuota>,
) -> Partitions {
    let mut leader = Partitions::new(
        crate::replica::LogDirs::single(dir),
        HashMap::new(),
        86_400_000,
        IoMode::Buffered,
    );
    leader.set_leader_quota(quota);
    let topic = TopicInfo {
        name: "t".into(),
        topic_id: Uuid::from_u128(7),
        partitions: Vec::new(),
        overrides: BTreeMap::new(),
        config: topic_config(overrides),
        is_internal: false,
    };
    leader
        .open_partitions(&topic, &[0], NOW_MS, &mut Default::default())
        .unwrap();
    let p = leader.partition_mut("t", 0).unwrap();
    p.become_leader_or_follower(EPOCH, false).unwrap();
    for i in 0..4 {
        p.append_records_as_follower(&batch(i * 2, 2, EPOCH), NOW_MS)
            .unwrap();
    }
    p.make_leader(1, EPOCH, &[1, 2, 3], &[1, 2], 5, NOW_MS)
        .unwrap();
    leader
}

fn fetch_from(replica: i32, offset: i64) -> FetchPart {
    FetchPart {
        topic: "t".into(),
        partition: 0,
        fetch_offset: offset,
        max_bytes: 1 << 20,
        current_leader_epoch: EPOCH,
        replica_id: replica,
        last_fetched_epoch: -1,
        read_committed: false,
    }
}

#[test]
fn a_leader_answers_an_out_of_sync_follower_empty_while_over_quota() {
    let dir = temp_dir("throttle-leader");
    let quota = TestQuota::exceeded();
    let mut leader = leader_of(
        &dir,
        &[("leader.replication.throttled.replicas", "*")],
        quota.clone(),
    );
    let mut budget = FetchBudget::new(1 << 20, false);
    // Replica 3 is not in the ISR: no records, the follower retries.
    let r = leader.read(&fetch_from(3, 0), &mut budget, NOW_MS);
    assert_eq!(r.error_code, errors::NONE);
    assert!(r.slice.is_none());
    assert_eq!(r.read_size, 0);
    assert!(r.leader_throttled);
    assert_eq!(r.high_watermark, 0);
    // Nothing was taken from the request's budget.
    assert_eq!(budget.bytes_left, 1 << 20);
    assert!(budget.min_one_batch);
    // Its fetch state still moves with the fetch offset.
    let p = leader.partition("t", 0).unwrap();
    assert_eq!(p.leadership.followers[&3].log_end_offset, 0);
    // A parked fetch does not count its bytes.
    assert_eq!(
        leader.fetch_wait_check(&fetch_from(3, 0)),
        FetchWaitCheck::Bytes(0)
    );

    // Replica 2 is in sync: never throttled.
    let r = leader.read(&fetch_from(2, 0), &mut budget, NOW_MS);
    assert!(r.slice.is_some());
    assert!(r.read_size > 0);
    assert!(r.leader_throttled, "its bytes still count");
    assert!(matches!(
        leader.fetch_wait_check(&fetch_from(2, 0)),
        FetchWaitCheck::Bytes(n) if n > 0
    ));

    // Under the quota, replica 3 reads too.
    quota.set(false);
    let mut budget = FetchBudget::new(1 << 20, false);
    let r = leader.read(&fetch_from(3, 0), &mut budget, NOW_MS);
    assert!(r.read_size > 0 && r.slice.is_some());
    assert!(r.leader_throttled);
    assert!(matches!(
        leader.fetch_wait_check(&fetch_from(3, 0)),
        FetchWaitCheck::Bytes(n) if n > 0
    ));
    // Consumers are never throttled by replication quotas.
    quota.set(true);
    let r = leader.read(&fetch_from(-1, 0), &mut budget, NOW_MS);
    assert_eq!(r.error_code, errors::NONE);
    assert!(!r.leader_throttled);
    crate::replica::partition::leader_epoch_writes::remove_test_dir(&dir);
}

#[test]
fn only_the_partitions_listed_with_this_broker_are_throttled_on_the_leader() {
    for (value, throttled) in [
        ("0:1", true),
        ("1:1,0:1,0:2", true),
        // Throttled on broker 2 (a follower), not on this leader.
        ("0:2,0:3", false),
        ("1:1", false),
        ("", false),
    ] {
        let dir = temp_dir("throttle-list");
        let quota = TestQuota::exceeded();
        let mut leader = leader_of(
            &dir,
            &[("leader.replication.throttled.replicas", value)],
            quota.clone(),
        );
        let mut budget = FetchBudget::new(1 << 20, false);
        let r = leader.read(&fetch_from(3, 0), &mut budget, NOW_MS);
        assert_eq!(r.leader_throttled, throttled, "{value}");
        assert_eq!(r.slice.is_none(), throttled, "{value}");
        let p = leader.partition("t", 0).unwrap();
        assert_eq!(should_leader_throttle(&*quota, p, 3), throttled, "{value}");
        assert!(!should_leader_throttle(&*quota, p, 2), "in sync: {value}");
        if !throttled {
            // Not throttled: the quota is never even looked at.
            assert_eq!(quota.checks.load(Ordering::SeqCst), 0, "{value}");
        }
        crate::replica::partition::leader_epoch_writes::remove_test_dir(&dir);
    }
}

#[test]
fn the_follower_throttles_only_out_of_sync_throttled_partitions_over_quota() {
    let quota = TestQuota::exceeded();
    let star = topic_config(&[("follower.replication.throttled.replicas", "*")]);
    let mine = topic_config(&[("follower.replication.throttled.replicas", "0:3,1:2")]);
    let none = topic_config(&[]);
    assert!(should_follower_throttle(&*quota, false, &star, 0, 3));
    assert!(!should_follower_throttle(&*quota, true, &star, 0, 3));
    assert!(should_follower_throttle(&*quota, false, &mine, 0, 3));
    assert!(!should_follower_throttle(&*quota, false, &mine, 1, 3));
    assert!(!should_follower_throttle(&*quota, false, &mine, 0, 2));
    assert!(!should_follower_throttle(&*quota, false, &none, 0, 3));
    quota.set(false);
    assert!(!should_follower_throttle(&*quota, false, &star, 0, 3));

    // PartitionFetchState.lag: unknown until the first answer, then taken
    // from answers that appended records.
    let mut state = task::PartitionState {
        topic_id: TOPIC_ID,
        leader_epoch: 1,
        generation: 1,
        delayed_until_ms: 0,
        backoff_ms: 0,
        lag: None,
    };
    assert!(!state.is_replica_in_sync());
    state.update_lag(false, 10, 4);
    assert_eq!(state.lag, Some(6));
    // An empty answer keeps the lag once known.
    state.update_lag(false, 4, 4);
    assert_eq!(state.lag, Some(6));
    state.update_lag(true, 10, 10);
    assert!(state.is_replica_in_sync());
    // The leader's high watermark below the follower's end is no lag.
    state.update_lag(true, 8, 12);
    assert_eq!(state.lag, Some(0));
    state.update_lag(true, 20, 12);
    assert!(!state.is_replica_in_sync());
}

/// What the leader below saw.
#[derive(Default)]
struct Seen {
    fetches: Vec<(Instant, i64)>,
    done: bool,
}

/// Answers fetch 1 with records 0-1 (high watermark 4: the follower is
/// not in sync) and fetch 2 with records 2-3 (caught up), each time
/// turning the quota's "exceeded" on before it answers; holds fetch 3.
async fn scripted_leader(
    listener: glommio::net::TcpListener,
    seen: Rc<RefCell<Seen>>,
    quota: Arc<TestQuota>,
    sent: Rc<RefCell<u64>>,
) {
    let Ok(mut s) = listener.accept().await else {
        return;
    };
    let host: Arc<str> = Arc::from("/127.0.0.1");
    loop {
        let mut size = [0u8; 4];
        if s.read_exact(&mut size).await.is_err() {
            return;
        }
        let mut buf = vec![0u8; i32::from_be_bytes(size) as usize];
        if s.read_exact(&mut buf).await.is_err() {
            return;
        }
        let req = crate::protocol::parse_request(Bytes::from(buf), &host).unwrap();
        assert_eq!(req.api_key, ApiKey::Fetch);
        let f: FetchRequest = crate::protocol::decode_body(&req).unwrap();
        let offset = f.topics[0].partitions[0].fetch_offset;
        let n = {
            let mut seen = seen.borrow_mut();
            seen.fetches.push((Instant::now(), offset));
            seen.fetches.len()
        };
        let records = match n {
            1 => batch(0, 2, 5),
            2 => batch(2, 2, 5),
            _ => {
                seen.borrow_mut().done = true;
                glommio::timer::sleep(Duration::from_secs(60)).await;
                return;
            }
        };
        *sent.borrow_mut() += records.len() as u64;
        quota.set(true);
        let data = FetchResponseData {
            throttle_time_ms: 0,
            error_code: errors::NONE.code(),
            session_id: 0,
            topics: vec![FetchTopicData {
                name: "t".into(),
                topic_id: TOPIC_ID,
                partitions: vec![partition_data(0, errors::NONE, 4, Some(records))],
            }],
        };
        let out = flatten(
            &encode_fetch_response(req.api_version, req.header.correlation_id, data).unwrap(),
        );
        if s.write_all(&out).await.is_err() {
            return;
        }
    }
}

#[test]
fn a_fetcher_leaves_out_a_throttled_partition_until_under_quota_or_in_sync() {
    glommio::LocalExecutorBuilder::default()
        .spawn(|| async {
            let dir = temp_dir("throttle-fetcher");
            let config = Arc::new(broker_config(&[]));
            let rm = replica_manager_in(&dir);
            let topic = TopicInfo {
                name: "t".into(),
                topic_id: TOPIC_ID,
                partitions: Vec::new(),
                overrides: BTreeMap::new(),
                config: topic_config(&[("follower.replication.throttled.replicas", "*")]),
                is_internal: false,
            };
            {
                let mut partitions = rm.partitions_mut();
                partitions
                    .open_partitions(&topic, &[0], NOW_MS, &mut Default::default())
                    .unwrap();
                partitions
                    .partition_mut("t", 0)
                    .unwrap()
                    .become_leader_or_follower(5, false)
                    .unwrap();
            }
            let quota = Arc::new(TestQuota::default());
            let listener = glommio::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let port = listener.local_addr().unwrap().port();
            let seen = Rc::new(RefCell::new(Seen::default()));
            let sent = Rc::new(RefCell::new(0u64));
            let leader_task = glommio::spawn_local(scripted_leader(
                listener,
                seen.clone(),
                quota.clone(),
                sent.clone(),
            ));
            let mut m = ReplicaFetcherManager::new(0, 1, &config, InterBrokerSecurity::plaintext());
            m.set_quota(quota.clone());
            // Over quota from the start: a partition whose lag is unknown
            // is not in sync, so nothing is fetched.
            quota.set(true);
            m.add_partitions(&rm, leader(2, port), vec![followed("t", 0, 5)]);
            glommio::timer::sleep(Duration::from_millis(300)).await;
            assert!(seen.borrow().fetches.is_empty());
            // Under quota: fetched (at the fetcher's next look, within 1 s).
            quota.set(false);
            let deadline = Instant::now() + Duration::from_secs(10);
            while seen.borrow().fetches.is_empty()
                || rm
                    .partitions()
                    .partition("t", 0)
                    .unwrap()
                    .log
                    .log_end_offset()
                    < 2
            {
                assert!(Instant::now() < deadline, "never fetched");
                glommio::timer::sleep(Duration::from_millis(10)).await;
            }
            // Records 0-1 of 4: lag 2, and the leader turned the quota
            // over: left out again.
            glommio::timer::sleep(Duration::from_millis(400)).await;
            assert_eq!(seen.borrow().fetches.len(), 1);
            quota.set(false);
            // Fetch 2 brings it in sync; over quota again, fetch 3 is sent
            // all the same.
            while !seen.borrow().done {
                assert!(Instant::now() < deadline, "the fetcher stalled");
                glommio::timer::sleep(Duration::from_millis(10)).await;
            }
            let offsets: Vec<i64> = seen.borrow().fetches.iter().map(|f| f.1).collect();
            assert_eq!(offsets, vec![0, 2, 4]);
            assert!(quota.exceeded.load(Ordering::SeqCst));
            // Every byte received for the throttled partition counted,
            // in sync or not.
            assert_eq!(quota.recorded.load(Ordering::SeqCst), *sent.borrow());
            let p_hw = rm.partitions().partition("t", 0).unwrap().high_watermark();
            assert_eq!(p_hw, 4);
            m.shutdown();
            drop(leader_task);
            crate::replica::partition::leader_epoch_writes::remove_test_dir(&dir);
        })
        .unwrap()
        .join()
        .unwrap();
}
