//! DescribeClientQuotas as ZkAdminManager.describeClientQuotas answers it:
//! the filter is checked first (any fault fails the whole request), then
//! every stored entity that matches the filter and holds at least one quota
//! key is listed with those keys only.

use std::collections::BTreeMap;

use super::entity::{ClientQuotaEntity, EntityName};
use super::{parse_java_double, CLIENT_ID, CLIENT_QUOTA_KEYS, IP, IP_CONNECTION_RATE, USER};

/// ComponentData.MatchType values.
pub const MATCH_TYPE_EXACT: i8 = 0;
pub const MATCH_TYPE_DEFAULT: i8 = 1;
pub const MATCH_TYPE_SPECIFIED: i8 = 2;

/// One filter component as it comes off the wire.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FilterComponent {
    pub entity_type: String,
    pub match_type: i8,
    pub name: Option<String>,
}

/// Why the whole request failed (top-level error, Entries null).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DescribeError {
    /// INVALID_REQUEST (42).
    InvalidRequest(String),
    /// UNSUPPORTED_VERSION (35).
    UnsupportedVersion(String),
    /// UNKNOWN_SERVER_ERROR (-1), message null.
    UnknownServerError,
}

impl DescribeError {
    pub fn code(&self) -> i16 {
        match self {
            DescribeError::InvalidRequest(_) => 42,
            DescribeError::UnsupportedVersion(_) => 35,
            DescribeError::UnknownServerError => -1,
        }
    }

    pub fn message(&self) -> Option<&str> {
        match self {
            DescribeError::InvalidRequest(m) | DescribeError::UnsupportedVersion(m) => Some(m),
            DescribeError::UnknownServerError => None,
        }
    }
}

fn invalid(message: &str) -> DescribeError {
    DescribeError::InvalidRequest(message.to_string())
}

/// Checks a filter in Kafka's order: DescribeClientQuotasRequest.filter()
/// first converts every component (an unknown match type throws
/// IllegalArgumentException, an exact match of a null name a
/// NullPointerException: both UNKNOWN_SERVER_ERROR), then
/// describeClientQuotas checks the entity types.
pub fn validate_filter(components: &[FilterComponent]) -> Result<(), DescribeError> {
    for c in components {
        let convertible = match c.match_type {
            MATCH_TYPE_EXACT => c.name.is_some(),
            MATCH_TYPE_DEFAULT | MATCH_TYPE_SPECIFIED => true,
            _ => false,
        };
        if !convertible {
            return Err(DescribeError::UnknownServerError);
        }
    }
    let (mut user, mut client, mut ip) = (false, false, false);
    for c in components {
        let (seen, which) = match c.entity_type.as_str() {
            USER => (&mut user, "user"),
            CLIENT_ID => (&mut client, "client"),
            IP => (&mut ip, "ip"),
            "" => return Err(invalid("Unexpected empty filter component entity type")),
            other => {
                return Err(DescribeError::UnsupportedVersion(format!(
                    "Custom entity type '{other}' not supported"
                )))
            }
        };
        if *seen {
            return Err(DescribeError::InvalidRequest(format!(
                "Duplicate {which} filter component entity type"
            )));
        }
        *seen = true;
    }
    if (user || client) && ip {
        return Err(invalid(
            "Invalid entity filter component combination, IP filter component should not be used with user or clientId filter component.",
        ));
    }
    Ok(())
}

fn component<'a>(components: &'a [FilterComponent], kind: &str) -> Option<&'a FilterComponent> {
    components.iter().find(|c| c.entity_type == kind)
}

/// handleDescribeClientQuotas' `matches` for one entity type: an exact
/// component wants that name, a default one the default, a specified one
/// any name (the default included); without a component a strict filter
/// wants the type absent and a lax one does not care.
fn component_matches(
    component: Option<&FilterComponent>,
    name: &Option<EntityName>,
    strict: bool,
) -> bool {
    let Some(c) = component else {
        return name.is_none() || !strict;
    };
    match (c.match_type, name) {
        (MATCH_TYPE_SPECIFIED, n) => n.is_some(),
        (MATCH_TYPE_DEFAULT, Some(EntityName::Default)) => true,
        (MATCH_TYPE_EXACT, Some(EntityName::Named(n))) => c.name.as_deref() == Some(n.as_str()),
        _ => false,
    }
}

/// Whether a (validated) filter selects the entity. User/client-id entities
/// are only described without an ip component and ip entities only without
/// user or client-id components; so an empty filter selects everything
/// when lax and nothing when strict.
pub fn matches(entity: &ClientQuotaEntity, components: &[FilterComponent], strict: bool) -> bool {
    let user = component(components, USER);
    let client = component(components, CLIENT_ID);
    let ip = component(components, IP);
    if entity.ip.is_some() {
        return user.is_none() && client.is_none() && component_matches(ip, &entity.ip, strict);
    }
    ip.is_none()
        && component_matches(user, &entity.user, strict)
        && component_matches(client, &entity.client_id, strict)
}

/// The entity's quota values: the four client quota keys (or
/// `connection_creation_rate` for an ip), others (SCRAM credentials) left
/// out. Empty means the entity is not listed. A value Java cannot read as a
/// double is UNKNOWN_SERVER_ERROR for the whole request.
pub fn quota_values(
    entity: &ClientQuotaEntity,
    props: &BTreeMap<String, String>,
) -> Result<Vec<(String, f64)>, DescribeError> {
    let wanted = |key: &str| {
        if entity.ip.is_some() {
            key == IP_CONNECTION_RATE
        } else {
            CLIENT_QUOTA_KEYS.contains(&key)
        }
    };
    props
        .iter()
        .filter(|(k, _)| wanted(k))
        .map(|(k, v)| {
            parse_java_double(v)
                .map(|value| (k.clone(), value))
                .ok_or(DescribeError::UnknownServerError)
        })
        .collect()
}

/// One entry of the answer: the entity and its quota values.
pub type DescribedEntry = (ClientQuotaEntity, Vec<(String, f64)>);

/// The whole answer over the stored entities: the filter checked, then the
/// matching entities with at least one quota value, in the given order.
pub fn describe_entries<'a>(
    stored: impl IntoIterator<Item = (ClientQuotaEntity, &'a BTreeMap<String, String>)>,
    components: &[FilterComponent],
    strict: bool,
) -> Result<Vec<DescribedEntry>, DescribeError> {
    validate_filter(components)?;
    let mut entries = Vec::new();
    for (entity, props) in stored {
        if !matches(&entity, components, strict) {
            continue;
        }
        let values = quota_values(&entity, props)?;
        if !values.is_empty() {
            entries.push((entity, values));
        }
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quota::entity::parse_entity_path;
    use crate::quota::{PRODUCER_BYTE_RATE, REQUEST_PERCENTAGE};

    fn comp(kind: &str, match_type: i8, name: Option<&str>) -> FilterComponent {
        FilterComponent {
            entity_type: kind.to_string(),
            match_type,
            name: name.map(str::to_string),
        }
    }

    fn exact(kind: &str, name: &str) -> FilterComponent {
        comp(kind, MATCH_TYPE_EXACT, Some(name))
    }

    fn default(kind: &str) -> FilterComponent {
        comp(kind, MATCH_TYPE_DEFAULT, None)
    }

    fn specified(kind: &str) -> FilterComponent {
        comp(kind, MATCH_TYPE_SPECIFIED, None)
    }

    #[test]
    fn filter_error_messages() {
        let err = |cs: &[FilterComponent]| validate_filter(cs).unwrap_err();
        let dup = err(&[specified("user"), exact("user", "a")]);
        assert_eq!(
            (dup.code(), dup.message()),
            (42, Some("Duplicate user filter component entity type"))
        );
        assert_eq!(
            err(&[default("client-id"), default("client-id")]).message(),
            Some("Duplicate client filter component entity type")
        );
        assert_eq!(
            err(&[default("ip"), specified("ip")]).message(),
            Some("Duplicate ip filter component entity type")
        );
        assert_eq!(
            err(&[specified("")]).message(),
            Some("Unexpected empty filter component entity type")
        );
        let custom = err(&[specified("other")]);
        assert_eq!(
            (custom.code(), custom.message()),
            (35, Some("Custom entity type 'other' not supported"))
        );
        let combo = err(&[specified("ip"), specified("client-id")]);
        assert_eq!(
            combo.message(),
            Some("Invalid entity filter component combination, IP filter component should not be used with user or clientId filter component.")
        );
        // Match types are converted before any type check.
        let bad_match = err(&[specified("other"), comp("user", 3, None)]);
        assert_eq!((bad_match.code(), bad_match.message()), (-1, None));
        assert_eq!(err(&[comp("user", MATCH_TYPE_EXACT, None)]).code(), -1);
        // The first fault in component order wins.
        assert_eq!(err(&[specified("other"), specified("")]).code(), 35);
        assert!(validate_filter(&[]).is_ok());
        assert!(validate_filter(&[exact("user", "u"), default("client-id")]).is_ok());
    }

    fn entity(path: &str) -> ClientQuotaEntity {
        parse_entity_path(path).unwrap()
    }

    const ALL: [&str; 8] = [
        "users/alice",
        "users/<default>",
        "users/alice/clients/app",
        "users/<default>/clients/<default>",
        "clients/app",
        "clients/<default>",
        "ips/1.2.3.4",
        "ips/<default>",
    ];

    fn selected(components: &[FilterComponent], strict: bool) -> Vec<&'static str> {
        ALL.into_iter()
            .filter(|p| matches(&entity(p), components, strict))
            .collect()
    }

    #[test]
    fn matching_rules() {
        assert_eq!(selected(&[], false), ALL.to_vec());
        assert!(selected(&[], true).is_empty());
        assert_eq!(
            selected(&[exact("user", "alice")], false),
            ["users/alice", "users/alice/clients/app"]
        );
        assert_eq!(selected(&[exact("user", "alice")], true), ["users/alice"]);
        assert_eq!(
            selected(&[default("user")], false),
            ["users/<default>", "users/<default>/clients/<default>"]
        );
        assert_eq!(
            selected(&[specified("user")], true),
            ["users/alice", "users/<default>"]
        );
        assert_eq!(
            selected(&[specified("user"), specified("client-id")], true),
            [
                "users/alice/clients/app",
                "users/<default>/clients/<default>"
            ]
        );
        assert_eq!(
            selected(&[exact("client-id", "app")], false),
            ["users/alice/clients/app", "clients/app"]
        );
        assert_eq!(
            selected(&[default("client-id")], true),
            ["clients/<default>"]
        );
        assert_eq!(
            selected(&[specified("ip")], true),
            ["ips/1.2.3.4", "ips/<default>"]
        );
        assert_eq!(selected(&[default("ip")], false), ["ips/<default>"]);
        assert_eq!(selected(&[exact("ip", "1.2.3.4")], true), ["ips/1.2.3.4"]);
        // The literal name "<default>" is not the default.
        let literal = entity("clients/%3Cdefault%3E");
        assert!(matches(&literal, &[exact("client-id", "<default>")], true));
        assert!(!matches(&literal, &[default("client-id")], true));
    }

    #[test]
    fn values_keep_only_quota_keys() {
        let props: BTreeMap<String, String> = [
            (PRODUCER_BYTE_RATE.to_string(), "1024".to_string()),
            (REQUEST_PERCENTAGE.to_string(), "23.45".to_string()),
            ("SCRAM-SHA-256".to_string(), "salt=x".to_string()),
            (IP_CONNECTION_RATE.to_string(), "9".to_string()),
        ]
        .into();
        let values = quota_values(&entity("users/alice"), &props).unwrap();
        assert_eq!(
            values,
            vec![
                (PRODUCER_BYTE_RATE.to_string(), 1024.0),
                (REQUEST_PERCENTAGE.to_string(), 23.45)
            ]
        );
        let ip_values = quota_values(&entity("ips/<default>"), &props).unwrap();
        assert_eq!(ip_values, vec![(IP_CONNECTION_RATE.to_string(), 9.0)]);
        let scram_only: BTreeMap<String, String> =
            [("SCRAM-SHA-512".to_string(), "x".to_string())].into();
        assert!(quota_values(&entity("users/bob"), &scram_only)
            .unwrap()
            .is_empty());
        let broken: BTreeMap<String, String> =
            [(PRODUCER_BYTE_RATE.to_string(), "fast".to_string())].into();
        assert_eq!(
            quota_values(&entity("users/bob"), &broken),
            Err(DescribeError::UnknownServerError)
        );
    }

    #[test]
    fn describe_lists_matching_entities_with_quotas() {
        let quota: BTreeMap<String, String> =
            [(PRODUCER_BYTE_RATE.to_string(), "10".to_string())].into();
        let scram: BTreeMap<String, String> =
            [("SCRAM-SHA-256".to_string(), "x".to_string())].into();
        let stored = vec![
            (entity("users/alice"), &quota),
            (entity("users/bob"), &scram),
            (entity("clients/app"), &quota),
        ];
        let found = describe_entries(stored.clone(), &[specified("user")], false).unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].0, entity("users/alice"));
        assert_eq!(found[0].1, vec![(PRODUCER_BYTE_RATE.to_string(), 10.0)]);
        assert_eq!(
            describe_entries(stored.clone(), &[], false).unwrap().len(),
            2
        );
        let err = describe_entries(stored, &[specified("topic")], false).unwrap_err();
        assert_eq!(err.code(), 35);
    }
}
