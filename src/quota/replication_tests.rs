use std::collections::BTreeMap;
use std::sync::Arc;

use super::*;
use crate::config::dynamic::BrokerConfigState;

const START: u64 = 1_700_000_000_000;

fn manager(samples: u32) -> ReplicationQuotaManager {
    ReplicationQuotaManager::new(
        ReplicationQuotaType::LeaderReplication,
        ReplicationQuotaManagerConfig {
            num_quota_samples: samples,
            quota_window_size_seconds: 1,
        },
    )
}

fn rate(q: &ReplicationQuotaManager, now: u64) -> f64 {
    q.measure(now).per_second()
}

#[test]
fn exceeds_the_quota_then_returns_below_the_bound_as_time_passes() {
    // ReplicationQuotaManagerTest.shouldExceedQuotaThenReturnBackBelowBoundAsTimePasses.
    let q = manager(10);
    q.update_quota(100.0);
    let mut now = START;
    // The first measure starts the first sample (the first window is fixed).
    assert!(!q.is_quota_exceeded(now));
    now += 1000;
    now += 500;
    q.record(1, now);
    assert!(!q.is_quota_exceeded(now));
    q.record(149, now); // 150 B, 1.5 s
    assert!(!q.is_quota_exceeded(now));
    q.record(1, now); // 151 B, 1.5 s
    assert_eq!(rate(&q, now), 151.0 / 1.5);
    assert!(q.is_quota_exceeded(now));
    now += 500; // 151 B, 2 s
    assert!(!q.is_quota_exceeded(now));
    assert!((rate(&q, now) - 151.0 / 2.0).abs() < 0.1);
    now += 500;
    q.record(99, now); // 250 B, 2.5 s
    assert_eq!(rate(&q, now), 250.0 / 2.5);
    // Exactly at the bound is within it (Quota.acceptable: value <= bound).
    assert!(!q.is_quota_exceeded(now));
    q.record(1, now);
    assert!(q.is_quota_exceeded(now));
    assert_eq!(rate(&q, now), 251.0 / 2.5);
    now += 2000;
    assert!(!q.is_quota_exceeded(now));
    assert_eq!(rate(&q, now), 251.0 / 4.5);
}

#[test]
fn simple_rate_window_is_at_least_one_window_and_samples_expire() {
    let q = manager(11);
    q.update_quota(1000.0);
    // No measure before the first record: the record starts the window,
    // which counts as one whole window while younger.
    q.record(900, START);
    assert_eq!(q.measure(START).window_ms, 1000);
    assert!(!q.is_quota_exceeded(START + 10));
    q.record(200, START + 10);
    assert!(q.is_quota_exceeded(START + 10));
    // 1100 B over 1.1 s: back at the bound.
    assert!(!q.is_quota_exceeded(START + 1100));
    // Samples idle for 11 windows are gone: nothing measured.
    assert_eq!(rate(&q, START + 11_009), 1100.0 / 11.009);
    assert_eq!(rate(&q, START + 11_010), 0.0);
    assert!(!q.is_quota_exceeded(START + 11_010));
}

#[test]
fn no_quota_and_the_unbounded_default_are_never_exceeded() {
    let q = manager(11);
    q.record(u64::MAX / 2, START);
    // Kafka's null quota before the first broker config is applied.
    assert!(!q.is_quota_exceeded(START));
    assert_eq!(q.upper_bound(), i64::MAX);
    q.update_quota(QUOTA_BYTES_PER_SECOND_DEFAULT as f64);
    assert!(!q.is_quota_exceeded(START));
    q.update_quota(10.0);
    assert!(q.is_quota_exceeded(START));
    assert_eq!(q.upper_bound(), 10);
    // A bound change keeps what was measured.
    q.update_quota(1e30);
    assert!(!q.is_quota_exceeded(START));
    q.update_quota(0.0);
    assert!(q.is_quota_exceeded(START));
}

#[test]
fn records_from_many_threads_are_all_counted() {
    let q = Arc::new(manager(11));
    q.update_quota(1e12);
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let q = q.clone();
            std::thread::spawn(move || {
                for i in 0..10_000 {
                    q.record(3, START + i / 100);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(q.measure(START + 100).sum, 120_000.0);
}

fn layers(broker: &[(&str, &str)], default: &[(&str, &str)]) -> BrokerConfigState {
    let map = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    let static_config = crate::config::BrokerConfig::from_map(&BTreeMap::new()).unwrap();
    BrokerConfigState {
        dynamic_broker: map(broker),
        dynamic_default: map(default),
        ..BrokerConfigState::from_static(Arc::new(static_config))
    }
}

#[test]
fn the_bound_comes_from_this_broker_then_the_cluster_default() {
    // BrokerConfigHandler's getOrDefault, per side.
    let leader = manager(11);
    let follower = ReplicationQuotaManager::new(
        ReplicationQuotaType::FollowerReplication,
        ReplicationQuotaManagerConfig::default(),
    );
    let state = layers(
        &[(LEADER_REPLICATION_THROTTLED_RATE, "100000")],
        &[
            (LEADER_REPLICATION_THROTTLED_RATE, "5"),
            (FOLLOWER_REPLICATION_THROTTLED_RATE, "7"),
        ],
    );
    leader.update_from(&state);
    follower.update_from(&state);
    assert_eq!(leader.upper_bound(), 100_000);
    assert_eq!(follower.upper_bound(), 7);
    let state = layers(&[], &[]);
    leader.update_from(&state);
    follower.update_from(&state);
    assert_eq!(leader.upper_bound(), i64::MAX);
    assert_eq!(follower.upper_bound(), i64::MAX);
    leader.record(1 << 40, START);
    assert!(!leader.is_quota_exceeded(START));
}

#[test]
fn window_settings_come_from_the_read_only_broker_keys() {
    let config = |pairs: &[(&str, &str)]| {
        let map: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        ReplicationQuotaManagerConfig::from_broker(
            &crate::config::BrokerConfig::from_map(&map).unwrap(),
        )
    };
    assert_eq!(config(&[]), ReplicationQuotaManagerConfig::default());
    assert_eq!(
        config(&[
            ("replication.quota.window.num", "3"),
            ("replication.quota.window.size.seconds", "2"),
        ]),
        ReplicationQuotaManagerConfig {
            num_quota_samples: 3,
            quota_window_size_seconds: 2,
        }
    );
    // Three samples of 2 s: idle for 6 s, a sample is gone.
    let q = ReplicationQuotaManager::new(
        ReplicationQuotaType::FollowerReplication,
        ReplicationQuotaManagerConfig {
            num_quota_samples: 3,
            quota_window_size_seconds: 2,
        },
    );
    q.record(100, START);
    assert_eq!(q.measure(START + 1000).window_ms, 2000);
    assert_eq!(q.measure(START + 5999).sum, 100.0);
    assert_eq!(q.measure(START + 6000).sum, 0.0);
}
