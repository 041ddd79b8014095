use super::*;
use crate::quota::rate::SampledRate;

/// Kafka's tests run on a MockTime that starts at the wall clock.
const NOW: u64 = 1_700_000_000_000;

/// "<default>" stands for the default entity here.
fn name(n: &str) -> EntityName {
    if n == "<default>" {
        EntityName::Default
    } else {
        EntityName::Named(n.to_string())
    }
}

fn entity(user: Option<&str>, client: Option<&str>) -> ClientQuotaEntity {
    ClientQuotaEntity {
        user: user.map(name),
        client_id: client.map(name),
        ip: None,
    }
}

fn props(key: &str, value: Option<&str>) -> BTreeMap<String, String> {
    value
        .map(|v| (key.to_string(), v.to_string()))
        .into_iter()
        .collect()
}

/// updateQuota for a Produce manager: Some(bytes) sets, None removes.
fn produce_quota(m: &ClientQuotaManager, user: Option<&str>, client: Option<&str>, q: Option<i64>) {
    let value = q.map(|q| q.to_string());
    m.update_quota(
        &entity(user, client),
        &props(PRODUCER_BYTE_RATE, value.as_deref()),
    );
}

fn produce_manager() -> ClientQuotaManager {
    ClientQuotaManager::new(QuotaType::Produce, QuotaConfig::default())
}

/// ClientQuotaManagerTest.checkQuota: the bound, the max value in the quota
/// window, and whether recording value × 11 at NOW throttles.
fn check_quota(
    m: &ClientQuotaManager,
    user: &str,
    client: &str,
    bound: f64,
    value: f64,
    throttle: bool,
) {
    assert_eq!(
        m.quota_bound(user, client),
        bound,
        "bound of {user}/{client}"
    );
    let sensor = m.sensor(user, client);
    let max = sensor
        .as_ref()
        .map_or(f64::MAX, |s| s.max_value_in_quota_window());
    let expected_max = if bound < UNLIMITED {
        10.0 * bound
    } else {
        f64::MAX
    };
    assert_eq!(max, expected_max, "max value of {user}/{client}");
    let t = sensor.map_or(0, |s| s.record_and_throttle_ms(value * 11.0, NOW));
    assert_eq!(t > 0, throttle, "throttle of {user}/{client} was {t}");
}

#[test]
fn kafka_quota_config_precedence() {
    let m = produce_manager();
    let d = Some("<default>");
    produce_quota(&m, d, None, Some(1000));
    produce_quota(&m, None, d, Some(2000));
    produce_quota(&m, d, d, Some(3000));
    produce_quota(&m, Some("userA"), None, Some(4000));
    produce_quota(&m, Some("userA"), Some("client1"), Some(5000));
    produce_quota(&m, Some("userB"), None, Some(6000));
    produce_quota(&m, Some("userB"), Some("client1"), Some(7000));
    produce_quota(&m, Some("userB"), d, Some(8000));
    produce_quota(&m, Some("userC"), None, Some(10000));
    produce_quota(&m, None, Some("client1"), Some(9000));

    check_quota(&m, "userA", "client1", 5000.0, 4500.0, false);
    check_quota(&m, "userA", "client2", 4000.0, 4500.0, true);
    check_quota(&m, "userA", "client3", 4000.0, 0.0, true);
    check_quota(&m, "userA", "client1", 5000.0, 0.0, false);
    check_quota(&m, "userB", "client1", 7000.0, 8000.0, true);
    check_quota(&m, "userB", "client2", 8000.0, 7000.0, false);
    check_quota(&m, "userB", "client3", 8000.0, 7000.0, false);
    check_quota(&m, "userD", "client1", 3000.0, 3500.0, true);
    check_quota(&m, "userD", "client2", 3000.0, 2500.0, false);
    check_quota(&m, "userE", "client1", 3000.0, 2500.0, false);

    produce_quota(&m, d, d, None);
    check_quota(&m, "userD", "client1", 1000.0, 0.0, false);
    check_quota(&m, "userE", "client4", 1000.0, 1500.0, true);
    check_quota(&m, "userF", "client4", 1000.0, 800.0, false);
    check_quota(&m, "userF", "client5", 1000.0, 800.0, true);

    produce_quota(&m, d, None, None);
    check_quota(&m, "userF", "client4", 2000.0, 0.0, false);
    check_quota(&m, "userF", "client5", 2000.0, 0.0, false);
    check_quota(&m, "userF", "client5", 2000.0, 2500.0, true);
    check_quota(&m, "userG", "client5", 2000.0, 0.0, true);

    produce_quota(&m, Some("userA"), None, Some(8000));
    produce_quota(&m, Some("userA"), Some("client1"), Some(10000));
    check_quota(&m, "userA", "client2", 8000.0, 0.0, false);
    check_quota(&m, "userA", "client2", 8000.0, 4500.0, true);
    check_quota(&m, "userA", "client1", 10000.0, 0.0, false);
    check_quota(&m, "userA", "client1", 10000.0, 6000.0, true);
    produce_quota(&m, Some("userA"), Some("client1"), None);
    check_quota(&m, "userA", "client6", 8000.0, 0.0, true);
    produce_quota(&m, Some("userA"), Some("client6"), Some(11000));
    check_quota(&m, "userA", "client6", 11000.0, 8500.0, false);
    produce_quota(&m, Some("userA"), d, Some(12000));
    produce_quota(&m, Some("userA"), Some("client6"), None);
    check_quota(&m, "userA", "client6", 12000.0, 4000.0, true);
}

#[test]
fn all_eight_levels_in_order() {
    let m = produce_manager();
    let d = Some("<default>");
    let levels = [
        (Some("u"), Some("c"), ("u", "c")),
        (Some("u"), d, ("u", "c")),
        (Some("u"), None, ("u", "")),
        (d, Some("c"), ("u", "c")),
        (d, d, ("u", "c")),
        (d, None, ("u", "")),
        (None, Some("c"), ("", "c")),
        (None, d, ("", "c")),
    ];
    for (i, (user, client, _)) in levels.iter().enumerate() {
        produce_quota(&m, *user, *client, Some(1000 * (i as i64 + 1)));
    }
    for (i, (user, client, tags)) in levels.iter().enumerate() {
        let bound = 1000.0 * (i as f64 + 1.0);
        assert_eq!(m.quota_bound("u", "c"), bound, "level {}", i + 1);
        let sensor = m.sensor("u", "c").unwrap();
        assert_eq!(sensor.metric_tags(), *tags, "level {}", i + 1);
        assert_eq!(sensor.quota_bound(), bound);
        produce_quota(&m, *user, *client, None);
    }
    assert_eq!(m.quota_bound("u", "c"), UNLIMITED);
    assert_eq!(m.sensor("u", "c").unwrap().metric_tags(), ("", "c"));
}

#[test]
fn tag_pairs_follow_the_quota_types_bitmask() {
    let d = Some("<default>");
    let tags = |m: &ClientQuotaManager, u: &str, c: &str| {
        let s = m.sensor(u, c).unwrap();
        (s.metric_tags().0.to_string(), s.metric_tags().1.to_string())
    };
    let pair = |u: &str, c: &str| (u.to_string(), c.to_string());

    let m = produce_manager();
    assert!(!m.quotas_enabled());
    assert!(m.sensor("alice", "c1").is_none());
    let mut cache = SensorCache::new();
    assert_eq!(
        m.maybe_record_and_get_throttle_time_ms(&mut cache, "a", "c", 1e12, NOW),
        0
    );

    // Client-id quotas only: one sensor per client id, whoever the user.
    produce_quota(&m, None, d, Some(10));
    assert_eq!(tags(&m, "alice", "c1"), pair("", "c1"));
    let (a, b) = (
        m.sensor("alice", "c1").unwrap(),
        m.sensor("bob", "c1").unwrap(),
    );
    assert!(Arc::ptr_eq(&a, &b));
    assert_eq!(tags(&m, "alice", "client@#$%"), pair("", "client@#$%"));

    // User quotas only: one sensor per user (sanitised), whatever the client.
    let m = produce_manager();
    produce_quota(&m, d, None, Some(10));
    assert_eq!(tags(&m, "CN=alice", "c1"), pair("CN%3Dalice", ""));
    let (a, b) = (
        m.sensor("alice", "c1").unwrap(),
        m.sensor("alice", "c2").unwrap(),
    );
    assert!(Arc::ptr_eq(&a, &b));
    // Mixed levels: the chain decides; here users/<default> (level 6).
    produce_quota(&m, None, Some("c1"), Some(20));
    assert_eq!(tags(&m, "alice", "c1"), pair("alice", ""));
    assert_eq!(m.quota_bound("alice", "c1"), 10.0);

    // User and client-id quotas only: one sensor per pair.
    let m = produce_manager();
    produce_quota(&m, d, d, Some(10));
    assert_eq!(tags(&m, "alice", "c1"), pair("alice", "c1"));
    assert_eq!(tags(&m, "bob", "c1"), pair("bob", "c1"));

    // Any user/client-id change enables the manager, even without its key;
    // a pair with no quota is recorded, unlimited.
    let fetch = ClientQuotaManager::new(QuotaType::Fetch, QuotaConfig::default());
    fetch.update_quota(
        &entity(Some("bob"), None),
        &props(PRODUCER_BYTE_RATE, Some("5")),
    );
    assert!(fetch.quotas_enabled());
    let s = fetch.sensor("bob", "c").unwrap();
    assert_eq!(s.metric_tags(), ("bob", ""));
    assert_eq!(s.quota_bound(), UNLIMITED);
    assert_eq!(s.record_and_throttle_ms(1e15, NOW), 0);
    // Ip entities are not client quotas.
    let m = produce_manager();
    let ip = ClientQuotaEntity {
        ip: Some(EntityName::Default),
        ..Default::default()
    };
    m.update_quota(&ip, &props(PRODUCER_BYTE_RATE, Some("5")));
    assert!(!m.quotas_enabled());
}

#[test]
fn set_and_remove_default_user_quota() {
    let m = produce_manager();
    check_quota(&m, "userA", "client1", UNLIMITED, 1000.0, false);
    produce_quota(&m, Some("<default>"), None, Some(10));
    check_quota(&m, "userA", "client1", 10.0, 1000.0, true);
    produce_quota(&m, Some("<default>"), None, None);
    check_quota(&m, "userA", "client1", UNLIMITED, 1000.0, false);
}

#[test]
fn quota_changes_reach_held_sensors() {
    // ClientQuotaManagerTest.testQuotaParsing with client-id quotas.
    let m = produce_manager();
    produce_quota(&m, None, Some("p1"), Some(2000));
    produce_quota(&m, None, Some("p2"), Some(4000));
    assert_eq!(m.quota_bound("ANONYMOUS", "random-client-id"), UNLIMITED);
    assert_eq!(m.quota_bound("ANONYMOUS", "p2"), 4000.0);
    let p1 = m.sensor("ANONYMOUS", "p1").unwrap();
    assert!(p1.record_and_throttle_ms(2500.0 * 11.0, NOW) > 0);
    produce_quota(&m, None, Some("p1"), Some(3000));
    assert_eq!(p1.quota_bound(), 3000.0);
    assert_eq!(p1.record_and_throttle_ms(0.0, NOW), 0);
    produce_quota(&m, None, Some("p1"), Some(500));
    assert!(p1.record_and_throttle_ms(0.0, NOW) > 0);
    produce_quota(&m, None, Some("p1"), None);
    produce_quota(&m, None, Some("<default>"), Some(4000));
    assert_eq!(p1.quota_bound(), 4000.0);
    assert_eq!(p1.record_and_throttle_ms(1000.0 * 11.0, NOW), 0);
    // A value that does not parse leaves the quota as it was.
    m.update_quota(
        &entity(None, Some("<default>")),
        &props(PRODUCER_BYTE_RATE, Some("1.5")),
    );
    assert_eq!(p1.quota_bound(), 4000.0);
}

#[test]
fn produce_quota_violation_vector() {
    let m = produce_manager();
    produce_quota(&m, None, Some("<default>"), Some(500));
    let mut cache = SensorCache::new();
    let mut record = |value: f64, now: u64| {
        m.maybe_record_and_get_throttle_time_ms(&mut cache, "ANONYMOUS", "unknown", value, now)
    };
    let mut now = NOW;
    for _ in 0..10 {
        assert_eq!(record(400.0, now), 0);
        now += 1000;
    }
    now += 500;
    let throttle = record(2300.0, now);
    assert_eq!(throttle, 2100);
    now += throttle;
    for _ in 0..10 {
        record(400.0, now);
        now += 1000;
    }
    assert_eq!(record(0.0, now), 0, "the burst has rolled over");
}

#[test]
fn request_quota_vector_and_bound() {
    let m = ClientQuotaManager::new(QuotaType::Request, QuotaConfig::default());
    let e = entity(None, Some("<default>"));
    m.update_quota(&e, &props(REQUEST_PERCENTAGE, Some("1.0")));
    let sensor = m.sensor("u", "c").unwrap();
    // 4 ms of handler time a second is 0.4 % of a thread.
    let percent = |ms: f64| ms * 1e6 * (100.0 / 1e9);
    let mut now = NOW;
    for _ in 0..10 {
        assert_eq!(sensor.record_and_throttle_ms(percent(4.0), now), 0);
        now += 1000;
    }
    now += 500;
    assert_eq!(sensor.record_and_throttle_ms(percent(67.1), now), 210);
    // Request throttling never exceeds one window.
    assert_eq!(sensor.record_and_throttle_ms(1000.0, now), 1000);
}

#[test]
fn controller_mutation_token_bucket() {
    let config = QuotaConfig {
        window_num: 10,
        window_size_ms: 1000,
    };
    let m = ClientQuotaManager::new(QuotaType::ControllerMutation, config);
    let e = entity(None, Some("<default>"));
    m.update_quota(&e, &props(CONTROLLER_MUTATION_RATE, Some("10")));
    let strict = m.sensor("u", "admin").unwrap();
    assert_eq!(strict.record_and_throttle_ms(90.0, NOW), 0);
    assert_eq!(strict.record_and_throttle_ms(90.0, NOW), 0);
    assert_eq!(strict.record_and_throttle_ms(1.0, NOW), 8000);
    assert_eq!(strict.record_and_throttle_ms(1.0, NOW + 5000), 3000);
    assert_eq!(strict.measure(NOW + 5000), -30.0);

    let permissive = m.sensor("u", "other").unwrap();
    assert_eq!(permissive.record_permissive_ms(90.0, NOW), 0);
    assert_eq!(permissive.record_permissive_ms(90.0, NOW), 8000);
    permissive.record_no_throttle(-80.0, NOW);
    assert_eq!(permissive.measure(NOW), 0.0);
}

#[test]
fn fetch_unrecord_takes_bytes_back() {
    let m = ClientQuotaManager::new(QuotaType::Fetch, QuotaConfig::default());
    m.update_quota(
        &entity(None, Some("c")),
        &props(CONSUMER_BYTE_RATE, Some("100")),
    );
    let s = m.sensor("u", "c").unwrap();
    assert_eq!(s.max_value_in_quota_window(), 1000.0);
    assert!(s.record_and_throttle_ms(5000.0, NOW) > 0);
    s.record_no_throttle(-5000.0, NOW);
    assert_eq!(s.measure(NOW), 0.0);
}

#[test]
fn cache_follows_generation_and_identity() {
    let m = produce_manager();
    let d = Some("<default>");
    produce_quota(&m, d, d, Some(100));
    produce_quota(&m, None, Some("c"), Some(50));
    let mut cache = SensorCache::new();
    let first = cache.sensor(&m, "alice", "c").unwrap() as *const QuotaSensor;
    assert!(std::ptr::eq(
        first,
        Arc::as_ptr(&m.sensor("alice", "c").unwrap())
    ));
    assert_eq!(
        cache.sensor(&m, "alice", "c").unwrap().metric_tags(),
        ("alice", "c")
    );
    // The level-5 quota goes: the client moves to its clients/c sensor.
    produce_quota(&m, d, d, None);
    let moved = cache.sensor(&m, "alice", "c").unwrap();
    assert_eq!(moved.metric_tags(), ("", "c"));
    assert_eq!(moved.quota_bound(), 50.0);
    // Another client id on the same connection resolves afresh.
    assert_eq!(
        cache.sensor(&m, "alice", "d").unwrap().metric_tags(),
        ("", "d")
    );
}

#[test]
fn idle_unheld_sensors_expire() {
    let m = produce_manager();
    produce_quota(&m, None, Some("<default>"), Some(100));
    m.sensor("u", "gone")
        .unwrap()
        .record_and_throttle_ms(1.0, NOW);
    let held = m.sensor("u", "held").unwrap();
    held.record_and_throttle_ms(1.0, NOW);
    assert_eq!(m.expire_inactive(NOW + INACTIVE_SENSOR_EXPIRATION_MS), 0);
    assert_eq!(
        m.expire_inactive(NOW + INACTIVE_SENSOR_EXPIRATION_MS + 1),
        1
    );
    assert!(Arc::ptr_eq(&held, &m.sensor("u", "held").unwrap()));
    assert_eq!(m.lock().sensors.len(), 1);
}

#[test]
fn two_threads_share_one_sensor() {
    let m = Arc::new(produce_manager());
    produce_quota(&m, None, Some("<default>"), Some(1000));
    // Each thread alone stays at 600 B/s; together they reach 1200 B/s.
    std::thread::scope(|scope| {
        for user in ["shard-a", "shard-b"] {
            let m = Arc::clone(&m);
            scope.spawn(move || {
                let mut cache = SensorCache::new();
                for _ in 0..6 {
                    m.maybe_record_and_get_throttle_time_ms(&mut cache, user, "app", 1000.0, NOW);
                }
            });
        }
    });
    let sensor = m.sensor("anyone", "app").unwrap();
    assert_eq!(sensor.measure(NOW), 1200.0);
    assert_eq!(sensor.record_and_throttle_ms(0.0, NOW), 2000);
}

#[test]
fn concurrent_records_across_windows_sum_exactly() {
    let m = Arc::new(produce_manager());
    produce_quota(&m, None, Some("<default>"), Some(1_000_000));
    let reference = SampledRate::new(11, 1000);
    for i in 0..5000 {
        reference.record(2.0, NOW + i);
    }
    std::thread::scope(|scope| {
        for _ in 0..2 {
            let sensor = m.sensor("u", "app").unwrap();
            scope.spawn(move || {
                for i in 0..5000 {
                    sensor.record_no_throttle(1.0, NOW + i);
                }
            });
        }
    });
    let end = NOW + 4999;
    let sensor = m.sensor("u", "app").unwrap();
    assert_eq!(sensor.measure(end), reference.measure(end).per_second());
    assert_eq!(reference.measure(end).sum, 10_000.0);
}
