use super::*;
use crate::config::topic_config_entries;

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn static_cfg(pairs: &[(&str, &str)]) -> Arc<BrokerConfig> {
    Arc::new(BrokerConfig::from_map(&map(pairs)).unwrap())
}

fn entry<'a>(entries: &'a [ConfigEntry], name: &str) -> &'a ConfigEntry {
    entries
        .iter()
        .find(|e| e.name == name)
        .unwrap_or_else(|| panic!("no {name}"))
}

fn syn(name: &str, value: Option<&str>, source: i8) -> (String, Option<String>, i8) {
    (name.to_string(), value.map(str::to_string), source)
}

#[test]
fn validate_error_texts() {
    let check = |pairs: &[(&str, &str)], per_broker| validate_dynamic(&map(pairs), per_broker);
    assert_eq!(
        check(&[("log.dirs", "/x"), ("log.retention.ms", "x")], true),
        Err("Cannot update these configs dynamically: Set(log.dirs)".into())
    );
    let five = [
        ("broker.id", "1"),
        ("log.dirs", "/x"),
        ("log.retention.hours", "1"),
        ("log.roll.hours", "1"),
        ("zookeeper.connect", "z"),
    ];
    assert_eq!(
        check(&five, true),
        Err("Cannot update these configs dynamically: HashSet(broker.id, log.dirs, log.retention.hours, log.roll.hours, zookeeper.connect)".into())
    );
    assert_eq!(
        check(&[("ssl.keystore.location", "/k")], true),
        Err("These security configs can be dynamically updated only per-listener using the listener prefix: HashSet(ssl.keystore.location)".into())
    );
    assert_eq!(
        check(&[("log.retention.ms", "x")], true),
        Err("Invalid value x for configuration log.retention.ms: Not a number of type LONG".into())
    );
    // Listener overrides are checked as their base key.
    assert_eq!(
        check(&[("listener.name.internal.sasl.login.refresh.buffer.seconds", "x")], true),
        Err("Invalid value x for configuration sasl.login.refresh.buffer.seconds: Not a number of type SHORT".into())
    );
    assert_eq!(
        check(&[("leader.replication.throttled.rate", "-1")], false),
        Err("Invalid value -1 for configuration leader.replication.throttled.rate: Value must be at least 0".into())
    );
    assert_eq!(
        check(&[("listeners", "PLAINTEXT://:9093"), ("log.retention.ms", "5")], false),
        Err("Cannot update these configs at default cluster level, broker id must be specified: Set(listeners)".into())
    );
    assert_eq!(
        check(&[("listener.name.internal.max.connections", "5")], false),
        Ok(())
    );
    assert_eq!(check(&[("listeners", "PLAINTEXT://:9093")], true), Ok(()));
    // Custom keys and quota keys are accepted.
    assert_eq!(
        check(
            &[
                ("my.custom", "x"),
                ("follower.replication.throttled.rate", "10")
            ],
            false
        ),
        Ok(())
    );
}

#[test]
fn update_modes_match_kafka() {
    // DynamicBrokerConfig.dynamicConfigUpdateModes of Kafka 3.9.
    const PER_BROKER: &[&str] = &[
        "advertised.listeners",
        "listener.security.protocol.map",
        "listeners",
        "principal.builder.class",
        "sasl.enabled.mechanisms",
        "sasl.jaas.config",
        "sasl.kerberos.kinit.cmd",
        "sasl.kerberos.min.time.before.relogin",
        "sasl.kerberos.principal.to.local.rules",
        "sasl.kerberos.service.name",
        "sasl.kerberos.ticket.renew.jitter",
        "sasl.kerberos.ticket.renew.window.factor",
        "sasl.login.refresh.buffer.seconds",
        "sasl.login.refresh.min.period.seconds",
        "sasl.login.refresh.window.factor",
        "sasl.login.refresh.window.jitter",
        "sasl.mechanism.inter.broker.protocol",
        "ssl.cipher.suites",
        "ssl.client.auth",
        "ssl.enabled.protocols",
        "ssl.endpoint.identification.algorithm",
        "ssl.engine.factory.class",
        "ssl.key.password",
        "ssl.keymanager.algorithm",
        "ssl.keystore.certificate.chain",
        "ssl.keystore.key",
        "ssl.keystore.location",
        "ssl.keystore.password",
        "ssl.keystore.type",
        "ssl.protocol",
        "ssl.provider",
        "ssl.secure.random.implementation",
        "ssl.trustmanager.algorithm",
        "ssl.truststore.certificates",
        "ssl.truststore.location",
        "ssl.truststore.password",
        "ssl.truststore.type",
    ];
    const CLUSTER_WIDE: &[&str] = &[
        "background.threads",
        "compression.gzip.level",
        "compression.lz4.level",
        "compression.type",
        "compression.zstd.level",
        "log.cleaner.backoff.ms",
        "log.cleaner.dedupe.buffer.size",
        "log.cleaner.delete.retention.ms",
        "log.cleaner.io.buffer.load.factor",
        "log.cleaner.io.buffer.size",
        "log.cleaner.io.max.bytes.per.second",
        "log.cleaner.max.compaction.lag.ms",
        "log.cleaner.min.cleanable.ratio",
        "log.cleaner.min.compaction.lag.ms",
        "log.cleaner.threads",
        "log.cleanup.policy",
        "log.flush.interval.messages",
        "log.flush.interval.ms",
        "log.index.interval.bytes",
        "log.index.size.max.bytes",
        "log.local.retention.bytes",
        "log.local.retention.ms",
        "log.message.downconversion.enable",
        "log.message.timestamp.after.max.ms",
        "log.message.timestamp.before.max.ms",
        "log.message.timestamp.difference.max.ms",
        "log.message.timestamp.type",
        "log.preallocate",
        "log.retention.bytes",
        "log.retention.ms",
        "log.roll.jitter.ms",
        "log.roll.ms",
        "log.segment.bytes",
        "log.segment.delete.delay.ms",
        "max.connection.creation.rate",
        "max.connections",
        "max.connections.per.ip",
        "max.connections.per.ip.overrides",
        "message.max.bytes",
        "metric.reporters",
        "min.insync.replicas",
        "num.io.threads",
        "num.network.threads",
        "num.recovery.threads.per.data.dir",
        "num.replica.fetchers",
        "producer.id.expiration.ms",
        "remote.fetch.max.wait.ms",
        "remote.log.index.file.cache.total.size.bytes",
        "remote.log.manager.copy.max.bytes.per.second",
        "remote.log.manager.fetch.max.bytes.per.second",
        "transaction.partition.verification.enable",
        "unclean.leader.election.enable",
    ];
    for d in defs::broker_defs() {
        let expected = if PER_BROKER.contains(&d.name) {
            UpdateMode::PerBroker
        } else if CLUSTER_WIDE.contains(&d.name) {
            UpdateMode::ClusterWide
        } else {
            UpdateMode::ReadOnly
        };
        assert_eq!(update_mode(d.name), expected, "{}", d.name);
    }
    assert_eq!(
        defs::broker_defs().iter().filter(|d| d.dynamic).count(),
        PER_BROKER.len() + CLUSTER_WIDE.len()
    );
    assert_eq!(update_mode("log.retention.hours"), UpdateMode::ReadOnly);
    assert_eq!(update_mode("num.shards"), UpdateMode::ReadOnly);
    assert_eq!(
        update_mode("listener.name.a.ssl.keystore.location"),
        UpdateMode::PerBroker
    );
    assert_eq!(
        update_mode("listener.name.a.max.connections"),
        UpdateMode::ClusterWide
    );
    assert_eq!(
        update_mode("leader.replication.throttled.rate"),
        UpdateMode::ClusterWide
    );
    assert_eq!(update_mode("my.custom"), UpdateMode::ClusterWide);
}

#[test]
fn persistable_passwords() {
    let no_secret = static_cfg(&[]);
    let with_secret = static_cfg(&[("password.encoder.secret", "s")]);
    let pw = map(&[("listener.name.internal.ssl.key.password", "p")]);
    assert_eq!(
        check_persistable(&pw, &no_secret),
        Err("Password encoder secret not configured".into())
    );
    // Never stored in the clear: refused even with the secret.
    assert!(check_persistable_at(&pw, true, &with_secret)
        .unwrap_err()
        .contains("does not encrypt"));
    assert_eq!(
        check_persistable_at(&map(&[("my.ssl.key.password", "p")]), false, &no_secret),
        Err("Password config can be defined only at broker level".into())
    );
    assert_eq!(
        check_persistable(&map(&[("log.retention.ms", "1")]), &no_secret),
        Ok(())
    );
}

#[test]
fn precedence_broker_over_default_over_static() {
    let dynamic = DynamicBrokerConfig::new(static_cfg(&[("log.segment.bytes", "2000000")]));
    assert_eq!(dynamic.current().log_segment_bytes, 2_000_000);
    dynamic.update_default(&map(&[("log.segment.bytes", "3000000")]));
    assert_eq!(dynamic.current().log_segment_bytes, 3_000_000);
    let cfg = dynamic.update_broker(&map(&[("log.segment.bytes", "4000000")]));
    assert_eq!(cfg.log_segment_bytes, 4_000_000);
    let seg = broker_entries(&dynamic.state())
        .into_iter()
        .find(|e| e.name == "log.segment.bytes")
        .unwrap();
    assert_eq!(
        (seg.value.as_deref(), seg.source, seg.read_only),
        (Some("4000000"), SOURCE_DYNAMIC_BROKER_CONFIG, false)
    );
    assert_eq!(
        seg.synonyms,
        vec![
            syn("log.segment.bytes", Some("4000000"), 2),
            syn("log.segment.bytes", Some("3000000"), 3),
            syn("log.segment.bytes", Some("2000000"), 4),
            syn("log.segment.bytes", Some("1073741824"), 5),
        ]
    );
    dynamic.update_broker(&BTreeMap::new());
    assert_eq!(dynamic.current().log_segment_bytes, 3_000_000);
    dynamic.update_default(&BTreeMap::new());
    assert_eq!(dynamic.current().log_segment_bytes, 2_000_000);
}

#[test]
fn dynamic_key_removes_static_synonyms() {
    let dynamic = DynamicBrokerConfig::new(static_cfg(&[("log.retention.hours", "1")]));
    assert_eq!(dynamic.current().log_retention_ms, 3_600_000);
    let cfg = dynamic.update_default(&map(&[("log.retention.ms", "1000")]));
    assert_eq!(cfg.log_retention_ms, 1000);
    let state = dynamic.state();
    let entries = broker_entries(&state);
    let ms = entry(&entries, "log.retention.ms");
    assert_eq!(
        (ms.value.as_deref(), ms.source),
        (Some("1000"), SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG)
    );
    assert_eq!(
        ms.synonyms,
        vec![
            syn("log.retention.ms", Some("1000"), 3),
            syn("log.retention.hours", Some("1"), 4),
            syn("log.retention.hours", Some("168"), 5),
        ]
    );
    // The static hours no longer apply, so its value is the default.
    let hours = entry(&entries, "log.retention.hours");
    assert_eq!(
        (hours.value.as_deref(), hours.source, hours.read_only),
        (Some("168"), SOURCE_STATIC_BROKER_CONFIG, true)
    );
    // Topics see the dynamic default, with the same synonyms.
    let topic = topic_config_entries(&state, &BTreeMap::new());
    let retention = entry(&topic, "retention.ms");
    assert_eq!(retention.value.as_deref(), Some("1000"));
    assert_eq!(retention.source, SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG);
    assert_eq!(retention.synonyms, ms.synonyms);
}

#[test]
fn cluster_default_view() {
    let dynamic = DynamicBrokerConfig::new(static_cfg(&[("log.retention.ms", "5")]));
    dynamic.update_default(&map(&[("log.retention.ms", "1000"), ("my.custom", "v")]));
    dynamic.update_broker(&map(&[("log.retention.ms", "2000")]));
    let entries = default_broker_entries(&dynamic.state());
    assert_eq!(entries.len(), 2);
    let ms = entry(&entries, "log.retention.ms");
    assert_eq!(
        (ms.value.as_deref(), ms.source),
        (Some("1000"), SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG)
    );
    assert_eq!(ms.synonyms, vec![syn("log.retention.ms", Some("1000"), 3)]);
    let custom = entry(&entries, "my.custom");
    assert_eq!(
        (
            custom.value.as_deref(),
            custom.is_sensitive,
            custom.read_only
        ),
        (None, true, true)
    );
    assert_eq!(custom.synonyms, vec![syn("my.custom", None, 3)]);
    assert_eq!(custom.config_type, ConfigType::Unknown as i8);
    // The per-broker view lists the custom key too, and the broker layer wins.
    let all = broker_entries(&dynamic.state());
    assert_eq!(
        entry(&all, "log.retention.ms").value.as_deref(),
        Some("2000")
    );
    assert_eq!(
        entry(&all, "my.custom").source,
        SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG
    );
}

#[test]
fn update_drops_what_kafka_ignores() {
    let dynamic = DynamicBrokerConfig::new(static_cfg(&[]));
    let before = dynamic.current().log_dirs.clone();
    dynamic.update_default(&map(&[
        ("log.dirs", "/elsewhere"),
        ("listeners", "PLAINTEXT://:9999"),
        ("ssl.keystore.type", "JKS"),
        ("log.roll.ms", "bad"),
        ("log.retention.ms", "5"),
    ]));
    let state = dynamic.state();
    assert_eq!(state.dynamic_default, map(&[("log.retention.ms", "5")]));
    assert_eq!(state.effective.log_dirs, before);
    assert_eq!(state.effective.log_retention_ms, 5);
    // kshard cannot run with a broker-wide recompression codec: dropped too.
    let cfg = dynamic.update_broker(&map(&[
        ("compression.type", "gzip"),
        ("num.io.threads", "4"),
    ]));
    assert_eq!(cfg.compression_type, "producer");
    assert_eq!(cfg.num_io_threads, 4);
    assert_eq!(
        dynamic.state().dynamic_broker,
        map(&[("num.io.threads", "4")])
    );
    let err = dynamic
        .validate(&map(&[("compression.type", "gzip")]), false)
        .unwrap_err();
    assert!(
        err.starts_with(
            "Invalid value gzip for configuration compression.type: kshard does not support this"
        ),
        "{err}"
    );
    assert_eq!(
        dynamic.validate(&map(&[("log.retention.ms", "7")]), false),
        Ok(())
    );
}

#[test]
fn post_load_fields_carried_over() {
    let mut cfg =
        BrokerConfig::from_map(&map(&[("listeners", "PLAINTEXT://127.0.0.1:0")])).unwrap();
    cfg.broker_id = 7;
    cfg.listeners[0].port = 40_000;
    let dynamic = DynamicBrokerConfig::new(Arc::new(cfg));
    let cfg = dynamic.update_default(&map(&[("log.retention.ms", "5")]));
    assert_eq!((cfg.broker_id, cfg.listeners[0].port), (7, 40_000));
}

#[test]
fn quota_and_listener_keys_described() {
    let dynamic = DynamicBrokerConfig::new(static_cfg(&[]));
    dynamic.update_broker(&map(&[
        ("leader.replication.throttled.rate", "100"),
        ("listener.name.plaintext.ssl.keystore.password", "secret"),
    ]));
    let entries = broker_entries(&dynamic.state());
    let rate = entry(&entries, "leader.replication.throttled.rate");
    assert_eq!(
        (
            rate.value.as_deref(),
            rate.read_only,
            rate.source,
            rate.config_type
        ),
        (
            Some("100"),
            true,
            SOURCE_DYNAMIC_BROKER_CONFIG,
            ConfigType::Long as i8
        )
    );
    let pw = entry(&entries, "listener.name.plaintext.ssl.keystore.password");
    assert_eq!((pw.value.as_deref(), pw.is_sensitive), (None, true));
    assert_eq!(
        pw.synonyms,
        vec![syn(
            "listener.name.plaintext.ssl.keystore.password",
            None,
            2
        )]
    );
}
