//! The fetcher task against a scripted fake leader on a local socket.

use crate::security::inter_broker::InterBrokerSecurity;
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_lite::{AsyncReadExt, AsyncWriteExt};
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{
    ApiKey, FetchRequest, ListOffsetsRequest, ListOffsetsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::protocol::{EARLIEST_TIMESTAMP, LATEST_TIMESTAMP};
use super::tests::{broker_config, flatten, followed, leader, partition_data, TOPIC_ID};
use super::*;
use crate::config::BrokerConfig;
use crate::metadata::metadata_cache::{MetadataCache, TopicInfo};
use crate::protocol::errors;
use crate::protocol::fetch_encoder::{encode_fetch_response, FetchResponseData, FetchTopicData};
use crate::replica::partition::follower::test_support::*;
use crate::replica::{ReplicaConfig, ReplicaManager};

/// What the fake leader saw.
#[derive(Default)]
struct LeaderLog {
    fetches: Vec<(Instant, FetchRequest)>,
    list_offsets: Vec<ListOffsetsRequest>,
    done: bool,
}

async fn read_frame(s: &mut glommio::net::TcpStream) -> Option<Bytes> {
    let mut size = [0u8; 4];
    s.read_exact(&mut size).await.ok()?;
    let mut buf = vec![0u8; i32::from_be_bytes(size) as usize];
    s.read_exact(&mut buf).await.ok()?;
    Some(Bytes::from(buf))
}

/// Answers the follower's requests with a script of errors, data and a
/// divergence, recording what it was asked.
async fn fake_leader(listener: glommio::net::TcpListener, seen: Rc<RefCell<LeaderLog>>) {
    let Ok(mut s) = listener.accept().await else {
        return;
    };
    let host: Arc<str> = Arc::from("/127.0.0.1");
    let mut fetch_no = 0;
    while let Some(frame) = read_frame(&mut s).await {
        let req = crate::protocol::parse_request(frame, &host).unwrap();
        let cid = req.header.correlation_id;
        let out = match req.api_key {
            ApiKey::Fetch => {
                let f: FetchRequest = crate::protocol::decode_body(&req).unwrap();
                seen.borrow_mut().fetches.push((Instant::now(), f));
                fetch_no += 1;
                let p = match fetch_no {
                    1 => partition_data(
                        0,
                        errors::NONE,
                        3,
                        Some([batch(0, 2, 4), batch(2, 1, 4), batch(3, 2, 5)].concat()),
                    ),
                    2 => {
                        let mut d = partition_data(0, errors::NONE, 3, None);
                        d.diverging_epoch = Some((4, 3));
                        d
                    }
                    3 => partition_data(0, errors::NOT_LEADER_OR_FOLLOWER, -1, None),
                    4 => partition_data(0, errors::OFFSET_OUT_OF_RANGE, -1, None),
                    5 => partition_data(0, errors::NONE, 2, None),
                    _ => {
                        seen.borrow_mut().done = true;
                        // Hold the request, as a leader with no data would.
                        glommio::timer::sleep(Duration::from_secs(60)).await;
                        return;
                    }
                };
                let data = FetchResponseData {
                    throttle_time_ms: 0,
                    error_code: errors::NONE.code(),
                    session_id: 0,
                    topics: vec![FetchTopicData {
                        name: "t".into(),
                        topic_id: TOPIC_ID,
                        partitions: vec![p],
                    }],
                };
                flatten(&encode_fetch_response(req.api_version, cid, data).unwrap())
            }
            ApiKey::ListOffsets => {
                let r: ListOffsetsRequest = crate::protocol::decode_body(&req).unwrap();
                let timestamp = r.topics[0].partitions[0].timestamp;
                seen.borrow_mut().list_offsets.push(r);
                let offset = if timestamp == LATEST_TIMESTAMP { 2 } else { 0 };
                let response = ListOffsetsResponse::default().with_topics(vec![
                    ListOffsetsTopicResponse::default()
                        .with_name(TopicName(StrBytes::from_static_str("t")))
                        .with_partitions(vec![ListOffsetsPartitionResponse::default()
                            .with_partition_index(0)
                            .with_offset(offset)]),
                ]);
                crate::protocol::encode_response(
                    ApiKey::ListOffsets,
                    req.api_version,
                    cid,
                    &response,
                )
                .unwrap()
            }
            other => panic!("unexpected {other:?}"),
        };
        if s.write_all(&out).await.is_err() {
            return;
        }
    }
}

/// A ReplicaManager whose partition t-0 follows at leader epoch 5.
fn follower_of_epoch_5(dir: &std::path::Path, config: &Arc<BrokerConfig>) -> Rc<ReplicaManager> {
    let rm = Rc::new(ReplicaManager::new(ReplicaConfig {
        shard_id: 0,
        nr_shards: 1,
        broker_id: 1,
        log_dirs: crate::replica::LogDirs::single(dir),
        startup_checkpoints: HashMap::new(),
        config: config.clone(),
        metadata: Arc::new(MetadataCache::new(Default::default())),
        cluster: None,
        cleaner_slots: Arc::new(crate::replica::cleaner_slots::CleanerSlots::new(Arc::new(
            crate::config::dynamic::DynamicBrokerConfig::new(config.clone()),
        ))),
        replication_quotas: Default::default(),
    }));
    let topic = TopicInfo {
        name: "t".into(),
        topic_id: TOPIC_ID,
        partitions: Vec::new(),
        overrides: BTreeMap::new(),
        config: topic_config(&[]),
        is_internal: false,
    };
    let mut partitions = rm.partitions_mut();
    partitions
        .open_partitions(&topic, &[0], NOW_MS, &mut Default::default())
        .unwrap();
    partitions
        .partition_mut("t", 0)
        .unwrap()
        .become_leader_or_follower(5, false)
        .unwrap();
    drop(partitions);
    rm
}

#[test]
fn fetcher_task_replicates_truncates_and_backs_off() {
    glommio::LocalExecutorBuilder::default()
        .spawn(|| async {
            let dir = temp_dir("task");
            let config = Arc::new(broker_config(&[]));
            let ctx = follower_of_epoch_5(&dir, &config);
            let listener = glommio::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let port = listener.local_addr().unwrap().port();
            let seen = Rc::new(RefCell::new(LeaderLog::default()));
            let leader_task = glommio::spawn_local(fake_leader(listener, seen.clone()));
            let mut m = ReplicaFetcherManager::new(0, 1, &config, InterBrokerSecurity::plaintext());
            m.add_partitions(&ctx, leader(2, port), vec![followed("t", 0, 5)]);
            let deadline = Instant::now() + Duration::from_secs(20);
            while !seen.borrow().done {
                assert!(Instant::now() < deadline, "the fetcher stalled");
                glommio::timer::sleep(Duration::from_millis(10)).await;
            }
            {
                let rm = ctx.partitions();
                let p = rm.partition("t", 0).unwrap();
                assert_eq!((p.log.log_end_offset(), p.high_watermark()), (2, 2));
                assert_eq!(p.leader_epoch_cache.entries(), &[(4, 0)]);
                assert_eq!(log_bytes(p, 0), batch(0, 2, 4));
            }
            let seen = seen.borrow();
            let asked: Vec<(i64, i32)> = seen
                .fetches
                .iter()
                .map(|(_, f)| {
                    assert_eq!(f.replica_id.0, 1);
                    assert_eq!((f.max_wait_ms, f.min_bytes), (500, 1));
                    assert_eq!(f.topics.len(), 1);
                    assert_eq!(f.topics[0].topic_id, TOPIC_ID);
                    let p = &f.topics[0].partitions[0];
                    assert_eq!(p.current_leader_epoch, 5);
                    (p.fetch_offset, p.last_fetched_epoch)
                })
                .collect();
            // Data; the divergence; NOT_LEADER_OR_FOLLOWER; out of range
            // (then ListOffsets latest 2, earliest 0); resumed at 2.
            assert_eq!(asked, vec![(0, -1), (5, 5), (3, 4), (3, 4), (2, 4), (2, 4)]);
            let waited = seen.fetches[3].0 - seen.fetches[2].0;
            assert!(
                waited >= Duration::from_millis(90),
                "backed off only {waited:?}"
            );
            let timestamps: Vec<i64> = seen
                .list_offsets
                .iter()
                .map(|r| r.topics[0].partitions[0].timestamp)
                .collect();
            assert_eq!(timestamps, vec![LATEST_TIMESTAMP, EARLIEST_TIMESTAMP]);
            drop(seen);
            m.shutdown();
            drop(leader_task);
            crate::replica::partition::leader_epoch_writes::remove_test_dir(&dir);
        })
        .unwrap()
        .join()
        .unwrap();
}

#[test]
fn fetcher_reconnects_when_the_leader_comes_up() {
    glommio::LocalExecutorBuilder::default()
        .spawn(|| async {
            // A port with nothing listening yet.
            let probe = glommio::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let port = probe.local_addr().unwrap().port();
            drop(probe);
            let dir = temp_dir("reconnect");
            let config = Arc::new(broker_config(&[]));
            let ctx = follower_of_epoch_5(&dir, &config);
            let mut m = ReplicaFetcherManager::new(0, 1, &config, InterBrokerSecurity::plaintext());
            m.add_partitions(&ctx, leader(2, port), vec![followed("t", 0, 5)]);
            glommio::timer::sleep(Duration::from_millis(400)).await;
            let listener = glommio::net::TcpListener::bind(("127.0.0.1", port)).unwrap();
            let seen = Rc::new(RefCell::new(LeaderLog::default()));
            let leader_task = glommio::spawn_local(fake_leader(listener, seen.clone()));
            let deadline = Instant::now() + Duration::from_secs(10);
            // The whole script runs once the leader is up.
            while !seen.borrow().done {
                assert!(Instant::now() < deadline, "never reconnected");
                glommio::timer::sleep(Duration::from_millis(10)).await;
            }
            let asked: Vec<i64> = seen
                .borrow()
                .fetches
                .iter()
                .map(|(_, f)| f.topics[0].partitions[0].fetch_offset)
                .collect();
            assert_eq!(asked, vec![0, 5, 3, 3, 2, 2]);
            let leo = ctx
                .partitions()
                .partition("t", 0)
                .unwrap()
                .log
                .log_end_offset();
            assert_eq!(leo, 2);
            m.shutdown();
            drop(leader_task);
            crate::replica::partition::leader_epoch_writes::remove_test_dir(&dir);
        })
        .unwrap()
        .join()
        .unwrap();
}
