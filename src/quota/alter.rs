//! AlterClientQuotas, one entry at a time, as ZkAdminManager.alterClientQuotas
//! checks and applies it: the entity is validated, then the ops are applied
//! in order to the entity's current stored props (read-modify-write). Each
//! entry fails alone, with INVALID_REQUEST and Kafka's message, or with
//! UNKNOWN_SERVER_ERROR where Kafka throws something that is not an
//! ApiException.

use std::collections::BTreeMap;
use std::net::IpAddr;

use crate::config::defs::java_double;
use crate::util::java_string_hash;

use super::entity::{sanitize, ClientQuotaEntity, EntityName};
use super::{
    CLIENT_ID, CLIENT_QUOTA_KEYS, CONSUMER_BYTE_RATE, IP, IP_CONNECTION_RATE, PRODUCER_BYTE_RATE,
    USER,
};

/// ScramMechanism.mechanismNames: STRING keys DynamicConfig.User also
/// defines, so AlterClientQuotas finds them but cannot set them.
const SCRAM_KEYS: [&str; 2] = ["SCRAM-SHA-256", "SCRAM-SHA-512"];

/// Kafka's rounding slack for LONG and INT quota values.
const EPSILON: f64 = 1e-6;

/// One op of an entry: set `key` to `value`, or remove it.
#[derive(Clone, Debug, PartialEq)]
pub struct QuotaOp {
    pub key: String,
    pub value: f64,
    pub remove: bool,
}

/// Why an entry failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum QuotaAlterError {
    /// INVALID_REQUEST (42) with Kafka's message.
    InvalidRequest(String),
    /// UNKNOWN_SERVER_ERROR (-1), message null.
    UnknownServerError,
}

impl QuotaAlterError {
    pub fn code(&self) -> i16 {
        match self {
            QuotaAlterError::InvalidRequest(_) => 42,
            QuotaAlterError::UnknownServerError => -1,
        }
    }

    pub fn message(&self) -> Option<&str> {
        match self {
            QuotaAlterError::InvalidRequest(m) => Some(m),
            QuotaAlterError::UnknownServerError => None,
        }
    }
}

fn invalid(message: String) -> QuotaAlterError {
    QuotaAlterError::InvalidRequest(message)
}

/// The components in the order a Java `HashMap<String, String>` built from
/// them iterates (bucket of the spread hash, then insertion order), a later
/// duplicate type replacing the earlier name in place. The order decides
/// which error an entity with several faults reports.
fn java_hash_map_order(components: &[(String, Option<String>)]) -> Vec<(&str, Option<&str>)> {
    let mut entries: Vec<(&str, Option<&str>)> = Vec::new();
    for (kind, name) in components {
        match entries.iter_mut().find(|(k, _)| k == kind) {
            Some(entry) => entry.1 = name.as_deref(),
            None => entries.push((kind, name.as_deref())),
        }
    }
    let mut capacity = 16usize;
    while entries.len() > capacity * 3 / 4 {
        capacity *= 2;
    }
    let bucket = |key: &str| {
        let h = java_string_hash(key) as u32;
        (h ^ (h >> 16)) as usize & (capacity - 1)
    };
    entries.sort_by_key(|(k, _)| bucket(k));
    entries
}

/// The entity of an entry from its wire components (EntityType, EntityName),
/// checked as parseAndSanitizeQuotaEntity and alterEntityQuotas check it.
pub fn entity_from_components(
    components: &[(String, Option<String>)],
) -> Result<ClientQuotaEntity, QuotaAlterError> {
    if components.is_empty() {
        return Err(invalid("Invalid empty client quota entity".to_string()));
    }
    let mut entity = ClientQuotaEntity::default();
    for (kind, name) in java_hash_map_order(components) {
        let slot = match kind {
            USER => &mut entity.user,
            CLIENT_ID => &mut entity.client_id,
            IP => &mut entity.ip,
            _ => {
                return Err(invalid(format!(
                    "Unhandled client quota entity type: {kind}"
                )))
            }
        };
        if name == Some("") {
            return Err(invalid(format!("Empty {kind} not supported")));
        }
        *slot = Some(EntityName::from_wire(name));
    }
    if let Some(ip) = &entity.ip {
        if entity.user.is_some() || entity.client_id.is_some() {
            return Err(invalid(
                "Invalid quota entity combination, IP entity should not be used with user/client ID entity."
                    .to_string(),
            ));
        }
        if let EntityName::Named(name) = ip {
            check_ip(name)?;
        }
    }
    Ok(entity)
}

/// DynamicConfig.Ip.isValidIpEntity runs `InetAddress.getByName` on the
/// sanitised name, so an IPv6 literal (its `:` escaped) is refused as Kafka
/// refuses it. Host names are refused too: kshard does not resolve them
/// here (Kafka accepts a name that resolves).
fn check_ip(name: &str) -> Result<(), QuotaAlterError> {
    let sanitized = sanitize(name);
    match sanitized.parse::<IpAddr>() {
        Ok(_) => Ok(()),
        Err(_) => Err(invalid(format!(
            "{sanitized} is not a valid IP or resolvable host."
        ))),
    }
}

/// The ConfigDef type of a settable key.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum KeyType {
    Long,
    Int,
    Double,
    Str,
}

impl KeyType {
    fn name(self) -> &'static str {
        match self {
            KeyType::Long => "LONG",
            KeyType::Int => "INT",
            KeyType::Double => "DOUBLE",
            KeyType::Str => "STRING",
        }
    }
}

/// DynamicConfig.{User, Client, Ip}.configKeys: user entities (with or
/// without a client id) also know the SCRAM keys.
fn key_type(entity: &ClientQuotaEntity, key: &str) -> Option<KeyType> {
    if entity.ip.is_some() {
        return (key == IP_CONNECTION_RATE).then_some(KeyType::Int);
    }
    if entity.user.is_some() && SCRAM_KEYS.contains(&key) {
        return Some(KeyType::Str);
    }
    if !CLIENT_QUOTA_KEYS.contains(&key) {
        return None;
    }
    if key == PRODUCER_BYTE_RATE || key == CONSUMER_BYTE_RATE {
        Some(KeyType::Long)
    } else {
        Some(KeyType::Double)
    }
}

/// Scala's `Double.toString` (Java's), including the non-finite spellings.
fn double_string(value: f64) -> String {
    if value.is_nan() {
        "NaN".to_string()
    } else if value.is_infinite() {
        if value > 0.0 { "Infinity" } else { "-Infinity" }.to_string()
    } else {
        java_double(value)
    }
}

/// A LONG or INT value as Kafka stores it: `(value + 1e-6)` truncated
/// toward zero (saturating, NaN to 0), refused when more than 1e-6 from the
/// value. So fractions and negative values are refused; zero is accepted.
fn integral_string(key: &str, value: f64, key_type: KeyType) -> Result<String, QuotaAlterError> {
    let integral = match key_type {
        KeyType::Int => (value + EPSILON) as i32 as i64,
        _ => (value + EPSILON) as i64,
    };
    if (integral as f64 - value).abs() > EPSILON {
        return Err(invalid(format!(
            "Configuration {key} must be a {} value",
            key_type.name()
        )));
    }
    Ok(integral.to_string())
}

/// Applies an entry's ops, in order, to the entity's current props (which
/// may hold SCRAM credentials for a user: they are kept) and returns the
/// props to store. A remove is never checked; a set of a key the entity
/// type does not know is INVALID_REQUEST; a SCRAM key is
/// UNKNOWN_SERVER_ERROR (Kafka's IllegalStateException).
pub fn apply_quota_ops(
    entity: &ClientQuotaEntity,
    current: &BTreeMap<String, String>,
    ops: &[QuotaOp],
) -> Result<BTreeMap<String, String>, QuotaAlterError> {
    let mut props = current.clone();
    for op in ops {
        if op.remove {
            props.remove(&op.key);
            continue;
        }
        let stored = match key_type(entity, &op.key) {
            None => return Err(invalid(format!("Invalid configuration key {}", op.key))),
            Some(KeyType::Str) => return Err(QuotaAlterError::UnknownServerError),
            Some(KeyType::Double) => double_string(op.value),
            Some(t) => integral_string(&op.key, op.value, t)?,
        };
        props.insert(op.key.clone(), stored);
    }
    Ok(props)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quota::{CONTROLLER_MUTATION_RATE, REQUEST_PERCENTAGE};

    fn comps(list: &[(&str, Option<&str>)]) -> Vec<(String, Option<String>)> {
        list.iter()
            .map(|(k, n)| (k.to_string(), n.map(str::to_string)))
            .collect()
    }

    fn error_of(list: &[(&str, Option<&str>)]) -> String {
        match entity_from_components(&comps(list)) {
            Err(QuotaAlterError::InvalidRequest(m)) => m,
            other => panic!("expected an error, got {other:?}"),
        }
    }

    fn set(key: &str, value: f64) -> QuotaOp {
        QuotaOp {
            key: key.to_string(),
            value,
            remove: false,
        }
    }

    fn remove(key: &str) -> QuotaOp {
        QuotaOp {
            key: key.to_string(),
            value: 0.0,
            remove: true,
        }
    }

    fn user(name: &str) -> ClientQuotaEntity {
        ClientQuotaEntity {
            user: Some(EntityName::Named(name.to_string())),
            ..Default::default()
        }
    }

    #[test]
    fn valid_shapes() {
        let e =
            entity_from_components(&comps(&[("user", None), ("client-id", Some("c"))])).unwrap();
        assert_eq!(e.user, Some(EntityName::Default));
        assert_eq!(e.client_id, Some(EntityName::Named("c".into())));
        let e = entity_from_components(&comps(&[("ip", Some("10.0.0.1"))])).unwrap();
        assert_eq!(e.ip, Some(EntityName::Named("10.0.0.1".into())));
        let e = entity_from_components(&comps(&[("ip", None)])).unwrap();
        assert_eq!(e.ip, Some(EntityName::Default));
        // A duplicate type overwrites the earlier name (HashMap.put).
        let e =
            entity_from_components(&comps(&[("user", Some("a")), ("user", Some("b"))])).unwrap();
        assert_eq!(e, user("b"));
    }

    #[test]
    fn entity_error_messages() {
        assert_eq!(error_of(&[]), "Invalid empty client quota entity");
        assert_eq!(
            error_of(&[("other", Some("x"))]),
            "Unhandled client quota entity type: other"
        );
        assert_eq!(
            error_of(&[("", None)]),
            "Unhandled client quota entity type: "
        );
        assert_eq!(error_of(&[("user", Some(""))]), "Empty user not supported");
        assert_eq!(
            error_of(&[("client-id", Some(""))]),
            "Empty client-id not supported"
        );
        assert_eq!(error_of(&[("ip", Some(""))]), "Empty ip not supported");
        assert_eq!(
            error_of(&[("ip", Some("not-an-ip"))]),
            "not-an-ip is not a valid IP or resolvable host."
        );
        assert_eq!(
            error_of(&[("ip", Some("::1"))]),
            "%3A%3A1 is not a valid IP or resolvable host."
        );
        let combo = "Invalid quota entity combination, IP entity should not be used with user/client ID entity.";
        assert_eq!(
            error_of(&[("ip", Some("1.2.3.4")), ("user", Some("u"))]),
            combo
        );
        assert_eq!(error_of(&[("client-id", None), ("ip", None)]), combo);
    }

    #[test]
    fn entity_faults_report_in_java_hash_map_order() {
        // Buckets: "" 0, "other" 2, "ip" 7, "client-id" 12, "user" 13.
        assert_eq!(
            error_of(&[("user", Some("")), ("other", Some("x"))]),
            "Unhandled client quota entity type: other"
        );
        assert_eq!(
            error_of(&[("user", Some("")), ("client-id", Some(""))]),
            "Empty client-id not supported"
        );
        assert_eq!(
            error_of(&[("user", Some("")), ("ip", Some("1.2.3.4"))]),
            "Empty user not supported"
        );
    }

    #[test]
    fn ops_store_kafka_strings() {
        let ops = [
            set(PRODUCER_BYTE_RATE, 10000.0),
            set(CONSUMER_BYTE_RATE, 0.0),
            set(REQUEST_PERCENTAGE, 23.45),
            set(CONTROLLER_MUTATION_RATE, 1e10),
        ];
        let props = apply_quota_ops(&user("u"), &BTreeMap::new(), &ops).unwrap();
        assert_eq!(props[PRODUCER_BYTE_RATE], "10000");
        assert_eq!(props[CONSUMER_BYTE_RATE], "0");
        assert_eq!(props[REQUEST_PERCENTAGE], "23.45");
        assert_eq!(props[CONTROLLER_MUTATION_RATE], "1.0E10");
        let ops = [
            set(REQUEST_PERCENTAGE, 100.0),
            set(CONTROLLER_MUTATION_RATE, -1.0),
        ];
        let props = apply_quota_ops(&user("u"), &BTreeMap::new(), &ops).unwrap();
        assert_eq!(props[REQUEST_PERCENTAGE], "100.0");
        assert_eq!(props[CONTROLLER_MUTATION_RATE], "-1.0");
        // Within 1e-6 of an integer rounds to it.
        let props = apply_quota_ops(
            &user("u"),
            &BTreeMap::new(),
            &[set(PRODUCER_BYTE_RATE, 99.9999995)],
        )
        .unwrap();
        assert_eq!(props[PRODUCER_BYTE_RATE], "100");
    }

    #[test]
    fn ops_keep_other_props_and_apply_in_order() {
        let current: BTreeMap<String, String> = [
            ("SCRAM-SHA-256".to_string(), "salt=...".to_string()),
            (PRODUCER_BYTE_RATE.to_string(), "5".to_string()),
        ]
        .into();
        let ops = [
            remove(PRODUCER_BYTE_RATE),
            set(CONSUMER_BYTE_RATE, 7.0),
            remove(CONSUMER_BYTE_RATE),
            set(PRODUCER_BYTE_RATE, 6.0),
            // Removing an unknown key is a silent no-op.
            remove("no.such.key"),
        ];
        let props = apply_quota_ops(&user("u"), &current, &ops).unwrap();
        let expected: BTreeMap<String, String> = [
            ("SCRAM-SHA-256".to_string(), "salt=...".to_string()),
            (PRODUCER_BYTE_RATE.to_string(), "6".to_string()),
        ]
        .into();
        assert_eq!(props, expected);
    }

    #[test]
    fn op_error_messages() {
        let client = ClientQuotaEntity {
            client_id: Some(EntityName::Default),
            ..Default::default()
        };
        let ip = ClientQuotaEntity {
            ip: Some(EntityName::Default),
            ..Default::default()
        };
        let none = BTreeMap::new();
        let err =
            |e: &ClientQuotaEntity, op: QuotaOp| apply_quota_ops(e, &none, &[op]).unwrap_err();
        let long_msg = "Configuration producer_byte_rate must be a LONG value";
        assert_eq!(
            err(&client, set(PRODUCER_BYTE_RATE, 10000.5)).message(),
            Some(long_msg)
        );
        assert_eq!(
            err(&client, set(PRODUCER_BYTE_RATE, -5.0)).message(),
            Some(long_msg)
        );
        assert_eq!(
            err(&ip, set(IP_CONNECTION_RATE, 1.5)).message(),
            Some("Configuration connection_creation_rate must be a INT value")
        );
        assert_eq!(
            err(&ip, set(PRODUCER_BYTE_RATE, 1.0)).message(),
            Some("Invalid configuration key producer_byte_rate")
        );
        assert_eq!(
            err(&client, set("SCRAM-SHA-256", 1.0)).message(),
            Some("Invalid configuration key SCRAM-SHA-256")
        );
        assert_eq!(
            err(&client, set(IP_CONNECTION_RATE, 1.0)).message(),
            Some("Invalid configuration key connection_creation_rate")
        );
        let scram = err(&user("u"), set("SCRAM-SHA-512", 1.0));
        assert_eq!((scram.code(), scram.message()), (-1, None));
        assert_eq!(err(&client, set("bogus", 1.0)).code(), 42);
        // A failing op leaves nothing applied: the whole entry fails.
        let ops = [set(CONSUMER_BYTE_RATE, 1.0), set("bogus", 1.0)];
        assert!(apply_quota_ops(&client, &none, &ops).is_err());
        let ok = apply_quota_ops(&ip, &none, &[set(IP_CONNECTION_RATE, 100.0)]).unwrap();
        assert_eq!(ok[IP_CONNECTION_RATE], "100");
    }
}
