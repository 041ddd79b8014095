//! A listener's `ssl.*` settings as Kafka's `SslConfigs`,
//! `BrokerSecurityConfigs` and `DefaultSslEngineFactory.configure` read
//! them, including `createKeystore`/`createTruststore`'s validation.

use super::{suites, SslConfigError, SslPrincipalMapper};
use rustls::SupportedCipherSuite;
use rustls::SupportedProtocolVersion;
use std::path::PathBuf;

pub(crate) const KEYSTORE_TYPE: &str = "ssl.keystore.type";
pub(crate) const KEYSTORE_LOCATION: &str = "ssl.keystore.location";
pub(crate) const KEYSTORE_PASSWORD: &str = "ssl.keystore.password";
pub(crate) const KEY_PASSWORD: &str = "ssl.key.password";
pub(crate) const KEYSTORE_KEY: &str = "ssl.keystore.key";
pub(crate) const KEYSTORE_CERTIFICATE_CHAIN: &str = "ssl.keystore.certificate.chain";
pub(crate) const TRUSTSTORE_TYPE: &str = "ssl.truststore.type";
pub(crate) const TRUSTSTORE_LOCATION: &str = "ssl.truststore.location";
pub(crate) const TRUSTSTORE_PASSWORD: &str = "ssl.truststore.password";
pub(crate) const TRUSTSTORE_CERTIFICATES: &str = "ssl.truststore.certificates";
pub(crate) const CLIENT_AUTH: &str = "ssl.client.auth";
pub(crate) const ENABLED_PROTOCOLS: &str = "ssl.enabled.protocols";
pub(crate) const CIPHER_SUITES: &str = "ssl.cipher.suites";
pub(crate) const ENDPOINT_IDENTIFICATION: &str = "ssl.endpoint.identification.algorithm";
pub(crate) const PRINCIPAL_MAPPING_RULES: &str = "ssl.principal.mapping.rules";
pub(crate) const PROTOCOL: &str = "ssl.protocol";
pub(crate) const ALLOW_DN_CHANGES: &str = "ssl.allow.dn.changes";
pub(crate) const ALLOW_SAN_CHANGES: &str = "ssl.allow.san.changes";

/// SslConfigs.DEFAULT_SSL_KEYSTORE_TYPE and DEFAULT_SSL_TRUSTSTORE_TYPE.
const DEFAULT_STORE_TYPE: &str = "JKS";
/// SslConfigs.DEFAULT_SSL_ENABLED_PROTOCOLS (Java 11+).
const DEFAULT_ENABLED_PROTOCOLS: &str = "TLSv1.2,TLSv1.3";
/// SslConfigs.DEFAULT_SSL_ENDPOINT_IDENTIFICATION_ALGORITHM.
const DEFAULT_ENDPOINT_IDENTIFICATION: &str = "https";
/// BrokerSecurityConfigs.DEFAULT_SSL_PRINCIPAL_MAPPING_RULES.
const DEFAULT_PRINCIPAL_MAPPING_RULES: &str = "DEFAULT";
pub(crate) const PEM_TYPE: &str = "PEM";

/// ssl.client.auth (BrokerSecurityConfigs, SslClientAuth).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientAuth {
    None,
    Requested,
    Required,
}

/// Where a listener's own key and certificate chain come from.
#[derive(Clone)]
pub(crate) enum KeySource {
    PemInline {
        key: String,
        chain: String,
        key_password: Option<String>,
    },
    PemFile {
        path: PathBuf,
        key_password: Option<String>,
    },
    File {
        store_type: String,
        path: PathBuf,
        password: String,
        key_password: Option<String>,
    },
}

impl KeySource {
    /// The setting an error about this key store names.
    pub(crate) fn config_key(&self) -> &'static str {
        match self {
            KeySource::PemInline { .. } => KEYSTORE_KEY,
            KeySource::PemFile { .. } | KeySource::File { .. } => KEYSTORE_LOCATION,
        }
    }
}

/// Where the trusted certificates come from.
#[derive(Clone)]
pub(crate) enum TrustSource {
    PemInline(String),
    PemFile(PathBuf),
    File {
        store_type: String,
        path: PathBuf,
        password: Option<String>,
    },
}

/// A listener's ssl.* settings, validated.
#[derive(Clone)]
pub struct SslSettings {
    pub(crate) keystore: Option<KeySource>,
    pub(crate) truststore: Option<TrustSource>,
    pub(crate) client_auth: ClientAuth,
    pub(crate) protocols: Vec<&'static SupportedProtocolVersion>,
    pub(crate) cipher_suites: Option<Vec<SupportedCipherSuite>>,
    pub(crate) verify_host_name: bool,
    pub(crate) mapper: SslPrincipalMapper,
    /// ssl.allow.dn.changes / ssl.allow.san.changes (both default false).
    pub(crate) allow_dn_changes: bool,
    pub(crate) allow_san_changes: bool,
}

impl std::fmt::Debug for SslSettings {
    // Passwords and inline keys stay out of logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SslSettings")
            .field("client_auth", &self.client_auth)
            .field("protocols", &self.protocols)
            .field("verify_host_name", &self.verify_host_name)
            .finish_non_exhaustive()
    }
}

fn err(key: &str, message: impl Into<String>) -> SslConfigError {
    SslConfigError::new(key, message)
}

impl SslSettings {
    /// Reads and validates a listener's ssl.* keys; `lookup` gives the
    /// effective value of a key (listener overrides already applied).
    /// Stores are only read later, by [`super::SslServerContext::new`] and
    /// [`super::client_config`].
    /// The settings of `listener` in `config`: its `listener.name.<l>.`
    /// overrides, then the broker-wide `ssl.` keys.
    pub fn for_listener(
        config: &crate::config::BrokerConfig,
        listener: &str,
    ) -> Result<SslSettings, SslConfigError> {
        Self::from_lookup(&|key| config.listener_value(listener, key).map(str::to_string))
    }

    pub fn from_lookup(
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Result<SslSettings, SslConfigError> {
        let get = |key: &str| lookup(key);
        let protocols = parse_protocols(
            &get(ENABLED_PROTOCOLS).unwrap_or_else(|| DEFAULT_ENABLED_PROTOCOLS.to_string()),
        )?;
        let cipher_suites = match get(CIPHER_SUITES) {
            Some(list) if !list.trim().is_empty() => Some(parse_cipher_suites(&list, &protocols)?),
            _ => None,
        };
        let rules = get(PRINCIPAL_MAPPING_RULES)
            .unwrap_or_else(|| DEFAULT_PRINCIPAL_MAPPING_RULES.to_string());
        let mapper =
            SslPrincipalMapper::parse(&rules).map_err(|e| err(PRINCIPAL_MAPPING_RULES, e))?;
        let endpoint = get(ENDPOINT_IDENTIFICATION)
            .unwrap_or_else(|| DEFAULT_ENDPOINT_IDENTIFICATION.to_string());
        if let Some(protocol) = get(PROTOCOL) {
            check_ssl_protocol(&protocol)?;
        }
        Ok(SslSettings {
            keystore: key_source(&get)?,
            truststore: trust_source(&get)?,
            client_auth: parse_client_auth(get(CLIENT_AUTH).as_deref())?,
            protocols,
            cipher_suites,
            verify_host_name: parse_endpoint_identification(&endpoint)?,
            mapper,
            allow_dn_changes: parse_bool(ALLOW_DN_CHANGES, get(ALLOW_DN_CHANGES))?,
            allow_san_changes: parse_bool(ALLOW_SAN_CHANGES, get(ALLOW_SAN_CHANGES))?,
        })
    }

    pub fn client_auth(&self) -> ClientAuth {
        self.client_auth
    }
}

/// The broker validates ssl.client.auth with ValidString.in(required,
/// requested, none): trimmed, case-sensitive.
fn parse_client_auth(value: Option<&str>) -> Result<ClientAuth, SslConfigError> {
    match value.map(str::trim) {
        None | Some("none") => Ok(ClientAuth::None),
        Some("requested") => Ok(ClientAuth::Requested),
        Some("required") => Ok(ClientAuth::Required),
        Some(_) => Err(err(
            CLIENT_AUTH,
            format!("Invalid value {} for configuration {CLIENT_AUTH}: String must be one of: required, requested, none", value.unwrap_or_default().trim()),
        )),
    }
}

/// ConfigDef's BOOLEAN: true/false in any case; unset is false here.
fn parse_bool(key: &str, value: Option<String>) -> Result<bool, SslConfigError> {
    match value.as_deref().map(str::trim) {
        None => Ok(false),
        Some(v) if v.eq_ignore_ascii_case("true") => Ok(true),
        Some(v) if v.eq_ignore_ascii_case("false") => Ok(false),
        Some(v) => Err(err(key, format!("Invalid value {v} for configuration {key}: Expected value to be either true or false"))),
    }
}

/// ssl.protocol names the SSLContext; the engine's protocols come from
/// ssl.enabled.protocols, so only the name is checked, as
/// SSLContext.getInstance checks it (JDK 17 algorithm names).
fn check_ssl_protocol(value: &str) -> Result<(), SslConfigError> {
    const KNOWN: &[&str] = &[
        "TLS", "TLSv1.3", "TLSv1.2", "TLSv1.1", "TLSv1", "SSL", "SSLv3", "Default", "DTLS",
        "DTLSv1.2", "DTLSv1.0",
    ];
    if KNOWN.iter().any(|k| k.eq_ignore_ascii_case(value)) {
        Ok(())
    } else {
        Err(err(PROTOCOL, format!("{value} SSLContext not available")))
    }
}

/// `https` turns on host name verification; empty turns it off (the JSSE algorithm names).
fn parse_endpoint_identification(value: &str) -> Result<bool, SslConfigError> {
    match value.trim() {
        "" => Ok(false),
        v if v.eq_ignore_ascii_case("https") => Ok(true),
        v => Err(err(
            ENDPOINT_IDENTIFICATION,
            format!("Unsupported endpoint identification algorithm {v}: only https (or empty to disable) is supported"),
        )),
    }
}

fn list(value: &str) -> impl Iterator<Item = &str> {
    value.split(',').map(str::trim).filter(|s| !s.is_empty())
}

fn parse_protocols(value: &str) -> Result<Vec<&'static SupportedProtocolVersion>, SslConfigError> {
    let mut out: Vec<&'static SupportedProtocolVersion> = Vec::new();
    for name in list(value) {
        let version = match name {
            "TLSv1.3" => &rustls::version::TLS13,
            "TLSv1.2" => &rustls::version::TLS12,
            "TLSv1.1" | "TLSv1" | "SSLv3" | "SSLv2Hello" => {
                return Err(err(
                    ENABLED_PROTOCOLS,
                    format!("{name} is not supported: rustls offers only TLSv1.2 and TLSv1.3"),
                ));
            }
            _ => {
                return Err(err(
                    ENABLED_PROTOCOLS,
                    format!("Unsupported protocol: {name}"),
                ))
            }
        };
        if !out.iter().any(|v| v.version == version.version) {
            out.push(version);
        }
    }
    if out.is_empty() {
        // JSSE falls back to its defaults for an empty list; Kafka does the same.
        return parse_protocols(DEFAULT_ENABLED_PROTOCOLS);
    }
    Ok(out)
}

/// Names rustls implements are kept. Other names JSSE accepts (RSA key
/// exchange, CBC, DHE...) are skipped: Kafka would accept them, rustls can
/// never negotiate them. Names JSSE does not know are refused as JSSE
/// refuses them (`Unsupported CipherSuite: X`). A list left with nothing usable for the
/// enabled protocols is an error rather than a listener no client can reach.
fn parse_cipher_suites(
    value: &str,
    protocols: &[&'static SupportedProtocolVersion],
) -> Result<Vec<SupportedCipherSuite>, SslConfigError> {
    let all = rustls::crypto::ring::ALL_CIPHER_SUITES;
    let mut out: Vec<SupportedCipherSuite> = Vec::new();
    for name in list(value) {
        let found = all
            .iter()
            .find(|s| suites::rustls_suite_name(u16::from(s.suite())) == Some(name));
        match found {
            Some(suite) if !out.iter().any(|s| s.suite() == suite.suite()) => out.push(*suite),
            Some(_) => {}
            None if suites::jsse_knows(name) => {
                log::warn!("{CIPHER_SUITES}: {name} is not implemented by rustls and is ignored");
            }
            None => {
                return Err(err(
                    CIPHER_SUITES,
                    format!("Unsupported CipherSuite: {name}"),
                ))
            }
        }
    }
    let usable = out
        .iter()
        .any(|s| protocols.iter().any(|p| p.version == s.version().version));
    if !usable {
        return Err(err(
            CIPHER_SUITES,
            format!("No cipher suite in {value} can be used with the enabled protocols (rustls implements the TLSv1.3 suites and the ECDHE GCM/CHACHA20 TLSv1.2 suites)"),
        ));
    }
    Ok(out)
}

fn store_type(get: &dyn Fn(&str) -> Option<String>, key: &str) -> String {
    get(key)
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty())
        .unwrap_or_else(|| DEFAULT_STORE_TYPE.to_string())
}

/// DefaultSslEngineFactory.createKeystore's checks, with its messages.
fn key_source(get: &dyn Fn(&str) -> Option<String>) -> Result<Option<KeySource>, SslConfigError> {
    let store_type = store_type(get, KEYSTORE_TYPE);
    let path = get(KEYSTORE_LOCATION).map(PathBuf::from);
    let password = get(KEYSTORE_PASSWORD);
    let key_password = get(KEY_PASSWORD);
    let key = get(KEYSTORE_KEY);
    let chain = get(KEYSTORE_CERTIFICATE_CHAIN);
    if let Some(key) = key {
        let Some(chain) = chain else {
            return Err(err(
                KEYSTORE_CERTIFICATE_CHAIN,
                "SSL private key is specified, but certificate chain is not specified.",
            ));
        };
        return if store_type != PEM_TYPE {
            Err(err(KEYSTORE_KEY, format!("SSL private key can be specified only for PEM, but key store type is {store_type}.")))
        } else if path.is_some() {
            Err(err(
                KEYSTORE_LOCATION,
                "Both SSL key store location and separate private key are specified.",
            ))
        } else if password.is_some() {
            Err(err(KEYSTORE_PASSWORD, "SSL key store password cannot be specified with PEM format, only key password may be specified."))
        } else {
            Ok(Some(KeySource::PemInline {
                key,
                chain,
                key_password,
            }))
        };
    }
    if chain.is_some() {
        return Err(err(
            KEYSTORE_KEY,
            "SSL certificate chain is specified, but private key is not specified",
        ));
    }
    match (path, password) {
        (Some(_), Some(_)) if store_type == PEM_TYPE => Err(err(
            KEYSTORE_PASSWORD,
            "SSL key store password cannot be specified with PEM format, only key password may be specified",
        )),
        (Some(path), None) if store_type == PEM_TYPE => Ok(Some(KeySource::PemFile { path, key_password })),
        (None, Some(_)) => Err(err(KEYSTORE_LOCATION, "SSL key store is not specified, but key store password is specified.")),
        (Some(_), None) => Err(err(KEYSTORE_PASSWORD, "SSL key store is specified, but key store password is not specified.")),
        (Some(path), Some(password)) => Ok(Some(KeySource::File { store_type, path, password, key_password })),
        (None, None) => Ok(None),
    }
}

/// DefaultSslEngineFactory.createTruststore's checks, with its messages.
fn trust_source(
    get: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<TrustSource>, SslConfigError> {
    let store_type = store_type(get, TRUSTSTORE_TYPE);
    let path = get(TRUSTSTORE_LOCATION).map(PathBuf::from);
    let password = get(TRUSTSTORE_PASSWORD);
    if let Some(certs) = get(TRUSTSTORE_CERTIFICATES) {
        return if store_type != PEM_TYPE {
            Err(err(
                TRUSTSTORE_CERTIFICATES,
                format!("SSL trust store certs can be specified only for PEM, but trust store type is {store_type}."),
            ))
        } else if path.is_some() {
            Err(err(
                TRUSTSTORE_LOCATION,
                "Both SSL trust store location and separate trust certificates are specified.",
            ))
        } else if password.is_some() {
            Err(err(
                TRUSTSTORE_PASSWORD,
                "SSL trust store password cannot be specified for PEM format.",
            ))
        } else {
            Ok(Some(TrustSource::PemInline(certs)))
        };
    }
    match path {
        Some(_) if store_type == PEM_TYPE && password.is_some() => Err(err(
            TRUSTSTORE_PASSWORD,
            "SSL trust store password cannot be specified for PEM format.",
        )),
        Some(path) if store_type == PEM_TYPE => Ok(Some(TrustSource::PemFile(path))),
        None if password.is_some() => Err(err(
            TRUSTSTORE_LOCATION,
            "SSL trust store is not specified, but trust store password is specified.",
        )),
        Some(path) => Ok(Some(TrustSource::File {
            store_type,
            path,
            password,
        })),
        None => Ok(None),
    }
}
