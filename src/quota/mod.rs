//! Client quotas, as a Kafka 3.9 broker in ZooKeeper mode keeps them:
//! the entities and their store paths (`entity`), the AlterClientQuotas and
//! DescribeClientQuotas rules (`alter`, `describe`), the sampled rate and
//! token bucket the quotas are measured with (`rate`), and the per-broker
//! ClientQuotaManager that resolves which quota applies to a client and
//! returns its throttle time (`manager`).
//!
//! Every broker enforces its own quotas; one manager per quota type is
//! shared by all shards (in an `Arc`), so a client whose connections land
//! on several shards is throttled on its total. The replication quotas
//! (`replication`, Kafka's ReplicationQuotaManager) bound the broker's
//! replication traffic of throttled partitions, as leader and as follower.

pub mod alter;
pub mod describe;
pub mod entity;
pub mod manager;
pub mod managers;
pub mod rate;
pub mod replication;

pub use alter::{apply_quota_ops, entity_from_components, QuotaAlterError, QuotaOp};
pub use describe::{
    describe_entries, matches, quota_values, validate_filter, DescribeError, DescribedEntry,
    FilterComponent,
};
pub use entity::{
    desanitize, entity_path, parse_entity_path, sanitize, ClientQuotaEntity, EntityName,
};
pub use manager::{ClientQuotaManager, QuotaConfig, QuotaSensor, QuotaType, SensorCache};
pub use managers::{ControllerMutationQuota, QuotaManagers, ShardQuotaCaches, ANONYMOUS_USER};
pub use rate::{bounded_throttle_time_ms, throttle_time_ms, window_size_ms};
pub use replication::{
    ReplicationQuotaManager, ReplicationQuotaManagerConfig, ReplicationQuotaType,
};

/// Entity types on the wire (ClientQuotaEntity.USER, CLIENT_ID, IP).
pub const USER: &str = "user";
pub const CLIENT_ID: &str = "client-id";
pub const IP: &str = "ip";

/// QuotaConfigs keys: the four user/client-id quotas and the ip one.
pub const PRODUCER_BYTE_RATE: &str = "producer_byte_rate";
pub const CONSUMER_BYTE_RATE: &str = "consumer_byte_rate";
pub const REQUEST_PERCENTAGE: &str = "request_percentage";
pub const CONTROLLER_MUTATION_RATE: &str = "controller_mutation_rate";
pub const IP_CONNECTION_RATE: &str = "connection_creation_rate";

/// QuotaConfigs.isClientOrUserQuotaConfig.
pub const CLIENT_QUOTA_KEYS: [&str; 4] = [
    PRODUCER_BYTE_RATE,
    CONSUMER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    CONTROLLER_MUTATION_RATE,
];

/// Java's `Double.parseDouble`, which Kafka reads stored quota values with:
/// surrounding blanks (chars up to U+0020) are ignored, `NaN`/`Infinity`
/// are spelled out, and a trailing `d`/`f` type suffix is allowed. Hex
/// floats are not accepted (Kafka never writes them).
fn parse_java_double(text: &str) -> Option<f64> {
    let text = text.trim_matches(|c: char| c <= ' ');
    let (sign, body) = match text.as_bytes().first() {
        Some(b'-') => (-1.0, &text[1..]),
        Some(b'+') => (1.0, &text[1..]),
        _ => (1.0, text),
    };
    match body {
        "NaN" => return Some(f64::NAN),
        "Infinity" => return Some(sign * f64::INFINITY),
        _ => {}
    }
    let body = body.strip_suffix(['d', 'D', 'f', 'F']).unwrap_or(body);
    // Rust also reads "inf"/"nan" and friends; Java only the digits forms.
    let numeric = body
        .bytes()
        .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-'));
    if !numeric || !body.starts_with(|c: char| c.is_ascii_digit() || c == '.') {
        return None;
    }
    body.parse::<f64>().ok().map(|v| sign * v)
}

#[cfg(test)]
mod tests {
    use super::parse_java_double;

    #[test]
    fn parses_as_java_does() {
        assert_eq!(parse_java_double("23.45"), Some(23.45));
        assert_eq!(parse_java_double(" 100.0\n"), Some(100.0));
        assert_eq!(parse_java_double("1.0E10"), Some(1e10));
        assert_eq!(parse_java_double("-1.0"), Some(-1.0));
        assert_eq!(parse_java_double("5d"), Some(5.0));
        assert_eq!(parse_java_double("-Infinity"), Some(f64::NEG_INFINITY));
        assert!(parse_java_double("NaN").unwrap().is_nan());
        for bad in ["", "inf", "nan", "abc", "1,5", "--1", "d"] {
            assert_eq!(parse_java_double(bad), None, "{bad}");
        }
    }
}
