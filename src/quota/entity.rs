//! Client quota entities and their names in the store. Kafka keeps a quota
//! under `/config/users/<u>`, `/config/users/<u>/clients/<c>`,
//! `/config/clients/<c>` or `/config/ips/<ip>`, each name sanitised
//! (Sanitizer: URL-encoded) so that `/` and the default's `<default>` can
//! never be spelled by a real name.

use std::fmt::Write;

use crate::metadata::configs::{CLIENTS, DEFAULT_ENTITY, USERS};

use super::{CLIENT_ID, IP, USER};

/// ConfigType.Ip: the third root below `/config` quotas use.
pub const IPS: &str = "ips";

/// Kafka's Sanitizer.sanitize: `URLEncoder.encode(name, UTF-8)` with `*`
/// then written `%2A` and `+` (a space) `%20`. What is left unescaped is
/// exactly ASCII letters, digits, `.`, `-` and `_`.
pub fn sanitize(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for &b in name.as_bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_') {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// Kafka's Sanitizer.desanitize (`URLDecoder.decode`): `+` is a space and
/// runs of `%XX` are UTF-8 bytes. None where URLDecoder throws (a bad or
/// incomplete escape).
pub fn desanitize(name: &str) -> Option<String> {
    let bytes = name.as_bytes();
    let mut out = String::with_capacity(name.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => {
                out.push(' ');
                i += 1;
            }
            b'%' => {
                let mut decoded = Vec::new();
                while i + 2 < bytes.len() && bytes[i] == b'%' {
                    decoded.push(hex_byte(&bytes[i + 1..i + 3])?);
                    i += 3;
                }
                if i < bytes.len() && bytes[i] == b'%' {
                    return None;
                }
                out.push_str(&String::from_utf8_lossy(&decoded));
            }
            _ => {
                let c = name[i..].chars().next()?;
                out.push(c);
                i += c.len_utf8();
            }
        }
    }
    Some(out)
}

/// `Integer.parseInt(two chars, 16)`, refused when negative.
fn hex_byte(digits: &[u8]) -> Option<u8> {
    let text = std::str::from_utf8(digits).ok()?;
    let value = i32::from_str_radix(text, 16).ok()?;
    u8::try_from(value).ok()
}

/// One component's name: the default (`<default>` in the store, a null name
/// on the wire) or a real name (unsanitised).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum EntityName {
    Default,
    Named(String),
}

impl EntityName {
    /// From a wire name: null is the default.
    pub fn from_wire(name: Option<&str>) -> Self {
        match name {
            None => EntityName::Default,
            Some(n) => EntityName::Named(n.to_string()),
        }
    }

    /// The wire name: None for the default.
    pub fn wire_name(&self) -> Option<&str> {
        match self {
            EntityName::Default => None,
            EntityName::Named(n) => Some(n),
        }
    }

    /// The store path segment: `<default>` or the sanitised name.
    pub fn path_segment(&self) -> String {
        match self {
            EntityName::Default => DEFAULT_ENTITY.to_string(),
            EntityName::Named(n) => sanitize(n),
        }
    }

    fn from_path_segment(segment: &str) -> Option<Self> {
        if segment.is_empty() {
            return None;
        }
        if segment == DEFAULT_ENTITY {
            return Some(EntityName::Default);
        }
        desanitize(segment).map(EntityName::Named)
    }
}

/// A client quota entity: a user and/or a client id, or an ip. An absent
/// component is None. Valid shapes: {user}, {client-id}, {user, client-id},
/// {ip}.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct ClientQuotaEntity {
    pub user: Option<EntityName>,
    pub client_id: Option<EntityName>,
    pub ip: Option<EntityName>,
}

impl ClientQuotaEntity {
    /// The wire components (EntityType, EntityName), user first.
    pub fn components(&self) -> Vec<(&'static str, Option<&str>)> {
        let parts = [
            (USER, &self.user),
            (CLIENT_ID, &self.client_id),
            (IP, &self.ip),
        ];
        parts
            .into_iter()
            .filter_map(|(kind, name)| name.as_ref().map(|n| (kind, n.wire_name())))
            .collect()
    }
}

/// The entity's path below `/config` (also the `entity_path` of its change
/// notification): `users/<su>`, `users/<su>/clients/<sc>`, `clients/<sc>`
/// or `ips/<ip>`. None for a shape Kafka never stores (empty, or an ip
/// together with a user or client id).
pub fn entity_path(e: &ClientQuotaEntity) -> Option<String> {
    match (&e.user, &e.client_id, &e.ip) {
        (Some(u), Some(c), None) => Some(format!(
            "{USERS}/{}/{CLIENTS}/{}",
            u.path_segment(),
            c.path_segment()
        )),
        (Some(u), None, None) => Some(format!("{USERS}/{}", u.path_segment())),
        (None, Some(c), None) => Some(format!("{CLIENTS}/{}", c.path_segment())),
        (None, None, Some(ip)) => Some(format!("{IPS}/{}", ip.path_segment())),
        _ => None,
    }
}

/// The inverse of `entity_path`, desanitising the names. None for any
/// other path (topics, brokers, a malformed name).
pub fn parse_entity_path(path: &str) -> Option<ClientQuotaEntity> {
    let parts: Vec<&str> = path.split('/').collect();
    let name = |i: usize| EntityName::from_path_segment(parts[i]);
    let mut entity = ClientQuotaEntity::default();
    match parts.as_slice() {
        [USERS, _] => entity.user = Some(name(1)?),
        [USERS, _, CLIENTS, _] => {
            entity.user = Some(name(1)?);
            entity.client_id = Some(name(3)?);
        }
        [CLIENTS, _] => entity.client_id = Some(name(1)?),
        [IPS, _] => entity.ip = Some(name(1)?),
        _ => return None,
    }
    Some(entity)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(n: &str) -> Option<EntityName> {
        Some(EntityName::Named(n.to_string()))
    }

    #[test]
    fn sanitize_examples() {
        assert_eq!(sanitize("user with spaces"), "user%20with%20spaces");
        assert_eq!(sanitize("CN=systemtest"), "CN%3Dsystemtest");
        assert_eq!(sanitize("<default>"), "%3Cdefault%3E");
        assert_eq!(sanitize("a*b+c/d"), "a%2Ab%2Bc%2Fd");
        assert_eq!(sanitize("client@#$%"), "client%40%23%24%25");
        assert_eq!(sanitize("é"), "%C3%A9");
        assert_eq!(sanitize("Az09.-_"), "Az09.-_");
    }

    #[test]
    fn desanitize_inverts_sanitize() {
        // Kafka's SanitizerTest principal.
        let principal = "CN=Some characters !@#$%&*()_-+=';:,/~";
        let sanitized = sanitize(principal);
        assert!(sanitized
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-%".contains(&b)));
        assert_eq!(desanitize(&sanitized).as_deref(), Some(principal));
        assert_eq!(desanitize("%C3%A9t%C3%A9").as_deref(), Some("été"));
        assert_eq!(desanitize("a+b%20c").as_deref(), Some("a b c"));
        assert_eq!(desanitize("100%").as_deref(), None);
        assert_eq!(desanitize("%4").as_deref(), None);
        assert_eq!(desanitize("%G1").as_deref(), None);
        assert_eq!(desanitize("%-1").as_deref(), None);
        assert_eq!(desanitize("%41").as_deref(), Some("A"));
    }

    #[test]
    fn paths_of_every_shape() {
        let cases = [
            (
                ClientQuotaEntity {
                    user: named("CN=alice"),
                    ..Default::default()
                },
                "users/CN%3Dalice",
            ),
            (
                ClientQuotaEntity {
                    user: Some(EntityName::Default),
                    client_id: named("<default>"),
                    ip: None,
                },
                "users/<default>/clients/%3Cdefault%3E",
            ),
            (
                ClientQuotaEntity {
                    user: named("u"),
                    client_id: Some(EntityName::Default),
                    ip: None,
                },
                "users/u/clients/<default>",
            ),
            (
                ClientQuotaEntity {
                    client_id: named("app 1"),
                    ..Default::default()
                },
                "clients/app%201",
            ),
            (
                ClientQuotaEntity {
                    ip: named("1.2.3.4"),
                    ..Default::default()
                },
                "ips/1.2.3.4",
            ),
            (
                ClientQuotaEntity {
                    ip: Some(EntityName::Default),
                    ..Default::default()
                },
                "ips/<default>",
            ),
        ];
        for (entity, path) in cases {
            assert_eq!(entity_path(&entity).as_deref(), Some(path));
            assert_eq!(parse_entity_path(path), Some(entity));
        }
        let mixed = ClientQuotaEntity {
            user: named("u"),
            ip: named("1.2.3.4"),
            ..Default::default()
        };
        assert_eq!(entity_path(&mixed), None);
        assert_eq!(entity_path(&ClientQuotaEntity::default()), None);
        for bad in [
            "topics/t",
            "users",
            "users/u/clients",
            "users/u/topics/c",
            "users/",
            "ips/%",
        ] {
            assert_eq!(parse_entity_path(bad), None, "{bad}");
        }
    }

    #[test]
    fn wire_components() {
        let entity = ClientQuotaEntity {
            user: Some(EntityName::Default),
            client_id: named("c"),
            ip: None,
        };
        assert_eq!(
            entity.components(),
            vec![("user", None), ("client-id", Some("c"))]
        );
        assert_eq!(EntityName::from_wire(None), EntityName::Default);
        assert_eq!(EntityName::from_wire(Some("x")).wire_name(), Some("x"));
    }
}
