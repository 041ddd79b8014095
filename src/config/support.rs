//! What kshard does with each Kafka 3.9 broker key that affects security,
//! durability or retention, in one table so it can be audited:
//!
//! - `Acted`: kshard does what the key asks.
//! - `Accepted(why)`: any value is accepted because it has no observable
//!   effect in kshard, or kshard's behaviour is what the default asks for;
//!   `why` says which (logged at start-up when the key is set).
//! - `Refused(when, why)`: start-up fails, naming the key and `why`, when
//!   the value asks for something kshard does not do.
//!
//! A key ending in "." is a prefix for every key under it; an exact entry
//! wins over a prefix. `listener.name.<listener>.<key>` follows `<key>`'s
//! refusal. Keys outside the table (including keys Kafka does not know)
//! are logged and ignored, as Kafka does.

use std::collections::BTreeMap;

use super::{defs, ConfigError};

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Support {
    Acted,
    Accepted(&'static str),
    Refused(When, &'static str),
}

/// When a refused key's value asks for something kshard does not do.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum When {
    /// A boolean set to true.
    True,
    /// Any non-empty value.
    NonEmpty,
    /// Any value other than Kafka's default.
    NotDefault,
    /// A non-empty value other than these.
    NoneOf(&'static [&'static str]),
}

use Support::{Accepted, Acted, Refused};

const JSSE_ONLY: &str =
    "it tunes Java's TLS implementation (JSSE); kshard's TLS is rustls, configured by the other ssl. keys";
/// The authorizers kshard is: Kafka's ZooKeeper-mode AclAuthorizer, and
/// the KRaft StandardAuthorizer (the same ACL semantics) so a KRaft
/// config carries over; both keep ACLs where kshard keeps metadata.
pub const AUTHORIZER_CLASSES: &[&str] = &[
    "kafka.security.authorizer.AclAuthorizer",
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
];
const NO_TIERED: &str =
    "it applies only to tiered storage, which kshard refuses (remote.log.storage.system.enable)";
const KRAFT_ONLY: &str = "it applies only to KRaft mode, which kshard refuses (process.roles)";

/// The support table, sorted by key (checked by a test).
#[rustfmt::skip]
pub static SUPPORT: &[(&str, Support)] = &[
    ("advertised.listeners", Acted),
    ("allow.everyone.if.no.acl.found", Acted),
    ("alter.config.policy.class.name", Refused(When::NonEmpty, "kshard enforces no alter-configs policy (it cannot load Java classes); every valid AlterConfigs would be allowed")),
    ("authorizer.class.name", Refused(When::NoneOf(AUTHORIZER_CLASSES), "kshard cannot load Java classes; its authorizer is Kafka's AclAuthorizer (kafka.security.authorizer.AclAuthorizer or org.apache.kafka.metadata.authorizer.StandardAuthorizer)")),
    ("client.quota.callback.class", Refused(When::NonEmpty, "kshard enforces no client quotas (it cannot load Java classes)")),
    ("compression.type", Refused(When::NotDefault, "kshard stores batches as the producer compressed them; it does not recompress to a broker-wide codec (only 'producer' is supported)")),
    ("connection.failed.authentication.delay.ms", Acted),
    ("connections.max.reauth.ms", Acted),
    ("control.plane.listener.name", Accepted("the listener it names must be in listeners, where a protocol other than PLAINTEXT is refused; kshard sends controller requests over the inter-broker listener")),
    ("controlled.shutdown.enable", Acted),
    ("create.topic.policy.class.name", Refused(When::NonEmpty, "kshard enforces no create-topic policy (it cannot load Java classes); every valid CreateTopics would be allowed")),
    ("default.replication.factor", Acted),
    ("delegation.token.", Accepted("kshard issues no delegation tokens; a SCRAM login that asks for token authentication is refused")),
    ("delete.topic.enable", Acted),
    ("eligible.leader.replicas.enable", Accepted("eligible leader replicas (KIP-966) exist only in KRaft mode; Kafka 3.9 in ZooKeeper mode ignores the key too")),
    ("inter.broker.listener.name", Acted),
    ("listener.name.", Acted),
    ("listener.security.protocol.map", Acted),
    ("listeners", Acted),
    ("log.cleaner.backoff.ms", Acted),
    ("log.cleaner.dedupe.buffer.size", Accepted("memory sizing of Kafka's cleaner threads; kshard's cleaner sizes its own offset map")),
    ("log.cleaner.delete.retention.ms", Acted),
    ("log.cleaner.enable", Acted),
    ("log.cleaner.io.buffer.load.factor", Accepted("memory sizing of Kafka's cleaner threads; kshard's cleaner sizes its own offset map")),
    ("log.cleaner.io.buffer.size", Accepted("memory sizing of Kafka's cleaner threads; kshard's cleaner sizes its own buffers")),
    ("log.cleaner.io.max.bytes.per.second", Accepted("an I/O throttle: it changes how fast, not what, the cleaner removes")),
    ("log.cleaner.max.compaction.lag.ms", Acted),
    ("log.cleaner.min.cleanable.ratio", Acted),
    ("log.cleaner.min.compaction.lag.ms", Acted),
    ("log.cleaner.threads", Accepted("kshard cleans on its shard executors; this bounds how many shards run a cleaning pass at once")),
    ("log.cleanup.policy", Acted),
    ("log.dir", Acted),
    ("log.dir.failure.timeout.ms", Accepted(KRAFT_ONLY)),
    ("log.dirs", Acted),
    ("log.flush.interval.messages", Acted),
    ("log.flush.interval.ms", Acted),
    ("log.flush.offset.checkpoint.interval.ms", Acted),
    ("log.flush.scheduler.interval.ms", Acted),
    ("log.flush.start.offset.checkpoint.interval.ms", Accepted("kshard writes the log start offset checkpoint together with the recovery point, every log.flush.offset.checkpoint.interval.ms")),
    ("log.index.interval.bytes", Acted),
    ("log.index.size.max.bytes", Acted),
    ("log.local.retention.bytes", Accepted(NO_TIERED)),
    ("log.local.retention.ms", Accepted(NO_TIERED)),
    ("log.message.timestamp.after.max.ms", Acted),
    ("log.message.timestamp.before.max.ms", Acted),
    ("log.message.timestamp.type", Acted),
    ("log.preallocate", Acted),
    ("log.retention.bytes", Acted),
    ("log.retention.check.interval.ms", Acted),
    ("log.retention.hours", Acted),
    ("log.retention.minutes", Acted),
    ("log.retention.ms", Acted),
    ("log.roll.hours", Acted),
    ("log.roll.jitter.hours", Accepted("roll jitter only spreads segment rolls in time; kshard rolls at segment.ms exactly")),
    ("log.roll.jitter.ms", Accepted("roll jitter only spreads segment rolls in time; kshard rolls at segment.ms exactly")),
    ("log.roll.ms", Acted),
    ("log.segment.bytes", Acted),
    ("log.segment.delete.delay.ms", Accepted("kshard unlinks a deleted segment at once; reads in progress keep their open file, so none sees it vanish")),
    ("max.connection.creation.rate", Refused(When::NotDefault, "kshard does not limit the connection creation rate")),
    ("max.connections", Refused(When::NotDefault, "kshard does not limit the number of connections")),
    ("max.connections.per.ip", Refused(When::NotDefault, "kshard does not limit connections per IP address")),
    ("max.connections.per.ip.overrides", Refused(When::NotDefault, "kshard does not limit connections per IP address")),
    ("metadata.log.", Accepted(KRAFT_ONLY)),
    ("metadata.max.retention.bytes", Accepted(KRAFT_ONLY)),
    ("metadata.max.retention.ms", Accepted(KRAFT_ONLY)),
    ("min.insync.replicas", Acted),
    ("offsets.commit.required.acks", Acted),
    ("offsets.retention.check.interval.ms", Acted),
    ("offsets.retention.minutes", Acted),
    ("offsets.topic.replication.factor", Acted),
    ("password.encoder.", Accepted("it encrypts dynamic password configs, which kshard refuses (it does not encrypt them yet)")),
    ("principal.builder.class", Refused(When::NotDefault, "kshard cannot load Java classes; it builds principals as Kafka's DefaultKafkaPrincipalBuilder does")),
    ("process.roles", Refused(When::NonEmpty, "kshard does not run in KRaft mode: it uses ZooKeeper (zookeeper.connect) or, unset, its embedded single-node store")),
    ("producer.id.expiration.ms", Acted),
    ("remote.log.", Accepted(NO_TIERED)),
    ("remote.log.storage.system.enable", Refused(When::True, "kshard has no tiered storage")),
    ("replica.high.watermark.checkpoint.interval.ms", Acted),
    ("replica.lag.time.max.ms", Acted),
    ("sasl.", Accepted("SASL client, Kerberos and OAUTHBEARER settings, which kshard's PLAIN and SCRAM servers do not read")),
    ("sasl.enabled.mechanisms", Acted),
    ("sasl.jaas.config", Acted),
    ("sasl.mechanism.inter.broker.protocol", Acted),
    ("sasl.server.callback.handler.class", Refused(When::NonEmpty, "kshard cannot load Java classes; PLAIN users come from the JAAS config and SCRAM users from the credential store")),
    ("security.inter.broker.protocol", Acted),
    ("security.providers", Accepted(JSSE_ONLY)),
    ("ssl.", Acted),
    ("ssl.engine.factory.class", Refused(When::NonEmpty, "kshard cannot load Java classes; its TLS is rustls, configured by the ssl. keys")),
    ("ssl.keymanager.algorithm", Accepted(JSSE_ONLY)),
    ("ssl.provider", Accepted(JSSE_ONLY)),
    ("ssl.secure.random.implementation", Accepted(JSSE_ONLY)),
    ("ssl.trustmanager.algorithm", Accepted(JSSE_ONLY)),
    ("super.users", Acted),
    ("transaction.", Acted),
    ("transaction.state.log.load.buffer.size", Accepted("kshard loads the transaction log 4 MiB at a time")),
    ("transactional.id.expiration.ms", Acted),
    ("unclean.leader.election.enable", Acted),
    ("zookeeper.clientCnxnSocket", Accepted("kshard's ZooKeeper client has its own socket layer; the Netty socket Kafka needs for TLS does not apply")),
    ("zookeeper.metadata.migration.enable", Refused(When::True, "kshard does not migrate to KRaft")),
    ("zookeeper.set.acl", Refused(When::True, "kshard creates its ZooKeeper nodes with open ACLs; secure ACLs need ZooKeeper SASL, which kshard's client does not speak")),
    ("zookeeper.ssl.", Accepted("it applies only when zookeeper.ssl.client.enable=true, which kshard refuses")),
    ("zookeeper.ssl.client.enable", Refused(When::True, "kshard's ZooKeeper client has no TLS")),
];

/// The entry for `key`: exact, else the longest prefix; None when the
/// key is outside the table.
pub fn support_of(key: &str) -> Option<Support> {
    if let Ok(i) = SUPPORT.binary_search_by(|(k, _)| (*k).cmp(key)) {
        return Some(SUPPORT[i].1);
    }
    let base = listener_base(key);
    if let Some(Refused(when, why)) = base.and_then(support_of) {
        return Some(Refused(when, why));
    }
    SUPPORT
        .iter()
        .filter(|(k, _)| k.ends_with('.') && key.starts_with(k))
        .max_by_key(|(k, _)| k.len())
        .map(|(_, s)| *s)
}

/// `listener.name.<listener>.<key>` -> `<key>`.
fn listener_base(key: &str) -> Option<&str> {
    let rest = key.strip_prefix("listener.name.")?;
    rest.split_once('.').map(|(_, base)| base)
}

/// Fails on the first key whose value asks for something kshard does not
/// do, naming the key and why. `map` is the file plus overrides.
pub fn check_refused(map: &BTreeMap<String, String>) -> Result<(), ConfigError> {
    for (key, raw) in map {
        let Some(Refused(when, why)) = support_of(key) else {
            continue;
        };
        if asks_for_more(key, raw.trim(), when) {
            return Err(ConfigError::new(
                key,
                raw,
                format!("kshard does not support this: {why}"),
            ));
        }
    }
    Ok(())
}

fn asks_for_more(key: &str, value: &str, when: When) -> bool {
    match when {
        When::True => value.eq_ignore_ascii_case("true"),
        When::NonEmpty => !value.is_empty(),
        When::NoneOf(allowed) => !value.is_empty() && !allowed.contains(&value),
        When::NotDefault => {
            let base = listener_base(key).unwrap_or(key);
            let def = defs::broker_def(base);
            let default = def.and_then(|d| d.default).unwrap_or("");
            let shown = def
                .and_then(|d| defs::normalize_value(d, value).ok())
                .unwrap_or_else(|| value.to_string());
            shown != default
        }
    }
}

/// Keys set in `map` that kshard accepts without acting on, with why.
pub fn accepted_keys(map: &BTreeMap<String, String>) -> Vec<(&str, &'static str)> {
    let authorizer_off = map
        .get("authorizer.class.name")
        .is_none_or(|v| v.trim().is_empty());
    map.keys()
        .filter_map(|k| match support_of(k) {
            Some(Accepted(why)) => Some((k.as_str(), why)),
            _ if authorizer_off && AUTHORIZER_KEYS.contains(&k.as_str()) => {
                Some((k.as_str(), NO_AUTHORIZER))
            }
            _ => None,
        })
        .collect()
}

/// The authorizer's own keys (not broker keys in Kafka's definitions).
pub const AUTHORIZER_KEYS: &[&str] = &["allow.everyone.if.no.acl.found", "super.users"];
const NO_AUTHORIZER: &str =
    "it is read only by the authorizer, and authorizer.class.name is not set";

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn refused_key(pairs: &[(&str, &str)]) -> Option<String> {
        check_refused(&map(pairs)).err().map(|e| e.key)
    }

    #[test]
    fn table_sorted_unique_and_names_known_keys() {
        for pair in SUPPORT.windows(2) {
            assert!(pair[0].0 < pair[1].0, "{} !< {}", pair[0].0, pair[1].0);
        }
        // Every exact entry is a Kafka key, except the authorizer's own.
        for (key, _) in SUPPORT.iter().filter(|(k, _)| !k.ends_with('.')) {
            assert!(
                defs::broker_def(key).is_some() || AUTHORIZER_KEYS.contains(key),
                "{key} is not a Kafka broker key"
            );
        }
    }

    #[test]
    fn refusals_name_the_key() {
        let cases: &[(&str, &str)] = &[
            ("authorizer.class.name", "com.example.Authorizer"),
            ("principal.builder.class", "com.example.Builder"),
            ("create.topic.policy.class.name", "com.example.Policy"),
            ("process.roles", "broker,controller"),
            ("remote.log.storage.system.enable", "TRUE"),
            ("zookeeper.set.acl", "true"),
            ("zookeeper.ssl.client.enable", "true"),
            ("max.connections", "100"),
            ("compression.type", "gzip"),
            ("listener.name.plaintext.max.connections", "10"),
        ];
        for (key, value) in cases {
            let err = check_refused(&map(&[(key, value)])).unwrap_err();
            assert_eq!(err.key, *key);
            let text = err.to_string();
            assert!(
                text.contains(key) && text.contains("kshard does not support"),
                "{text}"
            );
        }
    }

    #[test]
    fn defaults_and_harmless_values_pass() {
        for pairs in [
            &[("authorizer.class.name", "")][..],
            &[(
                "authorizer.class.name",
                "kafka.security.authorizer.AclAuthorizer",
            )],
            &[(
                "authorizer.class.name",
                "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            )],
            &[("security.inter.broker.protocol", "PLAINTEXT")],
            &[("security.inter.broker.protocol", "SSL")],
            &[(
                "principal.builder.class",
                "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder",
            )],
            &[("log.dirs", "/a, ")],
            &[("log.dirs", "/a,/b")],
            &[("log.dir", "/a, /b")],
            &[("max.connections", "2147483647")],
            &[("compression.type", "producer")],
            &[("zookeeper.set.acl", "false")],
            &[
                ("ssl.keystore.location", "/x"),
                ("sasl.enabled.mechanisms", "PLAIN"),
            ],
            &[("super.users", "User:admin")],
            &[(
                "listener.security.protocol.map",
                "PLAINTEXT:PLAINTEXT,SSL:SSL",
            )],
        ] {
            assert_eq!(refused_key(pairs), None, "{pairs:?}");
        }
    }

    #[test]
    fn every_security_protocol_is_served() {
        assert_eq!(
            refused_key(&[
                (
                    "listeners",
                    "PLAINTEXT://:9092,INTERNAL://:9093,SSL://:9094"
                ),
                (
                    "listener.security.protocol.map",
                    "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_PLAINTEXT,SSL:SSL"
                ),
            ]),
            None
        );
        assert_eq!(
            refused_key(&[("ssl.engine.factory.class", "com.example.F")]),
            Some("ssl.engine.factory.class".into())
        );
    }

    #[test]
    fn lookups_and_accepted() {
        assert_eq!(support_of("ssl.keystore.location"), Some(Acted));
        assert_eq!(
            support_of("zookeeper.ssl.protocol").map(|s| matches!(s, Accepted(_))),
            Some(true)
        );
        assert!(matches!(
            support_of("zookeeper.ssl.client.enable"),
            Some(Refused(When::True, _))
        ));
        assert!(matches!(
            support_of("remote.log.storage.system.enable"),
            Some(Refused(..))
        ));
        assert_eq!(support_of("num.partitions"), None);
        assert_eq!(support_of("log.retention.ms"), Some(Acted));
        let m = map(&[("ssl.provider", "SunJSSE"), ("num.partitions", "3")]);
        assert_eq!(accepted_keys(&m), vec![("ssl.provider", JSSE_ONLY)]);
        let m = map(&[("super.users", "User:a")]);
        assert_eq!(accepted_keys(&m), vec![("super.users", NO_AUTHORIZER)]);
        let m = map(&[
            ("super.users", "User:a"),
            ("authorizer.class.name", AUTHORIZER_CLASSES[0]),
        ]);
        assert!(accepted_keys(&m).is_empty());
    }
}
