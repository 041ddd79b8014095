//! `listeners` / `advertised.listeners` / `listener.security.protocol.map`
//! parsing with Kafka's rules (SocketServerConfigs.listenerListToEndPoints).

use std::collections::BTreeMap;

use super::ConfigError;

/// One listener: `NAME://host:port`. An empty host means all interfaces
/// (for binding) or the canonical host name (when advertised).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub listener_name: String,
    pub security_protocol: String,
    pub host: String,
    pub port: u16,
}

impl Endpoint {
    /// `NAME://host:port` as Kafka's EndPoint.connectionString (IPv6 in brackets).
    pub fn connection_string(&self) -> String {
        if self.host.contains(':') {
            format!("{}://[{}]:{}", self.listener_name, self.host, self.port)
        } else {
            format!("{}://{}:{}", self.listener_name, self.host, self.port)
        }
    }
}

const KNOWN_PROTOCOLS: &[&str] = &["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"];

pub(super) fn parse_protocol_map(text: &str) -> Result<BTreeMap<String, String>, ConfigError> {
    let key = "listener.security.protocol.map";
    let mut map = BTreeMap::new();
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let Some((name, protocol)) = item.split_once(':') else {
            return Err(ConfigError::new(
                key,
                text,
                format!("Map entry '{item}' is not of the form NAME:PROTOCOL"),
            ));
        };
        let name = name.trim().to_ascii_uppercase();
        let protocol = protocol.trim().to_ascii_uppercase();
        if !KNOWN_PROTOCOLS.contains(&protocol.as_str()) {
            return Err(ConfigError::new(
                key,
                text,
                format!("No enum constant for security protocol {protocol}"),
            ));
        }
        if map.insert(name.clone(), protocol).is_some() {
            return Err(ConfigError::new(
                key,
                text,
                format!("Duplicate listener name {name}"),
            ));
        }
    }
    Ok(map)
}

/// Parses a comma list of `NAME://host:port`, each listener's security
/// protocol taken from `protocol_map`.
pub fn parse_listeners(
    key: &str,
    text: &str,
    protocol_map: &BTreeMap<String, String>,
) -> Result<Vec<Endpoint>, ConfigError> {
    let mut out = Vec::new();
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let err = |m: String| ConfigError::new(key, text, m);
        let Some((name, rest)) = item.split_once("://") else {
            return Err(err(format!("Unable to parse {item} to a broker endpoint")));
        };
        let Some(colon) = rest.rfind(':') else {
            return Err(err(format!("Unable to parse {item} to a broker endpoint")));
        };
        let mut host = &rest[..colon];
        let port_text = &rest[colon + 1..];
        if let Some(inner) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
            host = inner;
        }
        let host_ok = host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-%._:".contains(c));
        let port: u16 = match port_text.parse() {
            Ok(p) if host_ok => p,
            _ => return Err(err(format!("Unable to parse {item} to a broker endpoint"))),
        };
        let listener_name = name.trim().to_ascii_uppercase();
        let Some(protocol) = protocol_map.get(&listener_name) else {
            return Err(err(format!(
                "No security protocol defined for listener {listener_name}"
            )));
        };
        out.push(Endpoint {
            listener_name,
            security_protocol: protocol.clone(),
            host: host.to_string(),
            port,
        });
    }
    if out.is_empty() {
        return Err(ConfigError::new(
            key,
            text,
            "At least one listener must be defined",
        ));
    }
    Ok(out)
}

/// `key` for one listener: `listener.name.<name lower-cased>.<key>` wins
/// over `<key>`.
pub(super) fn listener_value<'a>(
    originals: &'a BTreeMap<String, String>,
    listener_name: &str,
    key: &str,
) -> Option<&'a str> {
    let prefixed = format!("listener.name.{}.{key}", listener_name.to_ascii_lowercase());
    originals
        .get(&prefixed)
        .or_else(|| originals.get(key))
        .map(String::as_str)
}

/// `listener.name.<l>.<key>` or `listener.name.<l>.<mechanism>.<key>`
/// of a Kafka key (Kafka's per-listener and per-mechanism overrides).
pub fn is_listener_override(key: &str) -> bool {
    let Some((_, rest)) = key
        .strip_prefix("listener.name.")
        .and_then(|r| r.split_once('.'))
    else {
        return false;
    };
    let known = |k: &str| super::defs::broker_def(k).is_some() || k == "sasl.jaas.config";
    known(rest) || rest.split_once('.').is_some_and(|(_, k)| known(k))
}

/// The SASL mechanisms kshard serves (Kerberos and OAUTHBEARER need
/// Java login modules).
pub const SERVED_SASL_MECHANISMS: [&str; 3] = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"];

/// `sasl.enabled.mechanisms` of one listener (Kafka's default is GSSAPI).
pub fn sasl_mechanisms_of(
    originals: &BTreeMap<String, String>,
    listener_name: &str,
) -> Vec<String> {
    listener_value(originals, listener_name, "sasl.enabled.mechanisms")
        .unwrap_or("GSSAPI")
        .split(',')
        .map(|m| m.trim().to_ascii_uppercase())
        .filter(|m| !m.is_empty())
        .collect()
}

/// Every SASL listener must enable only mechanisms kshard serves.
pub(super) fn check_sasl_mechanisms(
    originals: &BTreeMap<String, String>,
    listeners: &[Endpoint],
) -> Result<(), ConfigError> {
    for l in listeners
        .iter()
        .filter(|l| l.security_protocol.starts_with("SASL_"))
    {
        let mechanisms = sasl_mechanisms_of(originals, &l.listener_name);
        let shown = mechanisms.join(",");
        if mechanisms.is_empty() {
            return Err(ConfigError::new(
                "sasl.enabled.mechanisms",
                &shown,
                format!(
                    "No SASL mechanisms are enabled for listener {}",
                    l.listener_name
                ),
            ));
        }
        if let Some(m) = mechanisms
            .iter()
            .find(|m| !SERVED_SASL_MECHANISMS.contains(&m.as_str()))
        {
            return Err(ConfigError::new(
                "sasl.enabled.mechanisms",
                &shown,
                format!(
                    "kshard does not support this: listener {} enables SASL mechanism {m}; kshard serves PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 (Kafka's default, GSSAPI, needs Kerberos)",
                    l.listener_name
                ),
            ));
        }
    }
    Ok(())
}

/// Kafka requires distinct listener names, and distinct ports for bound
/// listeners (port 0 asks the OS and may repeat).
pub(super) fn check_unique(
    key: &str,
    text: &str,
    eps: &[Endpoint],
    ports: bool,
) -> Result<(), ConfigError> {
    for (i, a) in eps.iter().enumerate() {
        for b in &eps[i + 1..] {
            if a.listener_name == b.listener_name {
                return Err(ConfigError::new(
                    key,
                    text,
                    format!("Each listener must have a different name, {key}: {text}"),
                ));
            }
            if ports && a.port != 0 && a.port == b.port {
                return Err(ConfigError::new(
                    key,
                    text,
                    format!("Each listener must have a different port, {key}: {text}"),
                ));
            }
        }
    }
    Ok(())
}

/// Advertised endpoints with an empty host get the canonical host name,
/// as Kafka's KafkaServer does before registering.
pub(super) fn fill_empty_hosts(eps: Vec<Endpoint>) -> Vec<Endpoint> {
    if eps.iter().all(|e| !e.host.trim().is_empty()) {
        return eps;
    }
    let host = canonical_hostname();
    eps.into_iter()
        .map(|mut e| {
            if e.host.trim().is_empty() {
                e.host = host.clone();
            }
            e
        })
        .collect()
}

pub(super) fn inter_broker_listener(
    name: Option<String>,
    protocol_set: bool,
    protocol: &str,
    advertised: &[Endpoint],
) -> Result<String, ConfigError> {
    if name.is_some() && protocol_set {
        return Err(ConfigError::new(
            "inter.broker.listener.name",
            name.as_deref().unwrap_or(""),
            "Only one of inter.broker.listener.name and security.inter.broker.protocol should be set.",
        ));
    }
    let wanted = name
        .clone()
        .unwrap_or_else(|| protocol.to_string())
        .to_ascii_uppercase();
    if advertised.iter().any(|e| e.listener_name == wanted) {
        return Ok(wanted);
    }
    let valid: Vec<&str> = advertised
        .iter()
        .map(|e| e.listener_name.as_str())
        .collect();
    let key = if name.is_some() {
        "inter.broker.listener.name"
    } else {
        "security.inter.broker.protocol"
    };
    Err(ConfigError::new(
        key,
        &wanted,
        format!(
            "{key} must be a listener name defined in advertised.listeners. The valid options based on currently configured listeners are {}",
            valid.join(",")
        ),
    ))
}

/// The host's canonical name (getaddrinfo AI_CANONNAME of gethostname),
/// like Java's InetAddress.getLocalHost().getCanonicalHostName(); falls
/// back to the plain host name, then "localhost".
pub fn canonical_hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: buf is writable for its full length; gethostname NUL-terminates
    // on success when the name fits, and we terminate the last byte anyway.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len() - 1) };
    if rc != 0 {
        return "localhost".to_string();
    }
    let len = buf.iter().position(|&b| b == 0).unwrap_or(buf.len() - 1);
    let Ok(host) = std::str::from_utf8(&buf[..len]) else {
        return "localhost".to_string();
    };
    if host.is_empty() {
        return "localhost".to_string();
    }
    canonical_name_of(&buf[..=len]).unwrap_or_else(|| host.to_string())
}

fn canonical_name_of(host_nul: &[u8]) -> Option<String> {
    debug_assert_eq!(host_nul.last(), Some(&0));
    // SAFETY: hints is zero-initialised plain data; host_nul is NUL-terminated;
    // the result list is freed exactly once below.
    unsafe {
        let mut hints: libc::addrinfo = std::mem::zeroed();
        hints.ai_flags = libc::AI_CANONNAME;
        hints.ai_family = libc::AF_UNSPEC;
        let mut res: *mut libc::addrinfo = std::ptr::null_mut();
        if libc::getaddrinfo(host_nul.as_ptr().cast(), std::ptr::null(), &hints, &mut res) != 0 {
            return None;
        }
        let mut name = None;
        if !res.is_null() && !(*res).ai_canonname.is_null() {
            let c = std::ffi::CStr::from_ptr((*res).ai_canonname);
            name = c
                .to_str()
                .ok()
                .filter(|s| !s.is_empty())
                .map(str::to_string);
        }
        libc::freeaddrinfo(res);
        name
    }
}
