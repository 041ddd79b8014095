//! How a broker's own clients (replica fetchers, the controller channel,
//! AlterPartition and transaction-marker requests) connect to other
//! brokers: over the inter-broker listener's security protocol, as
//! Kafka's client ChannelBuilder for `inter.broker.listener.name`. TLS
//! uses the listener's `ssl.` settings (trust store, and the key store as
//! the client certificate); SASL uses `sasl.mechanism.inter.broker.protocol`
//! with the `username` and `password` options of the listener's JAAS entry
//! for that mechanism, exactly the entry a Kafka broker logs in with.

mod stream;

use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes};
use futures_lite::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use kafka_protocol::messages::{
    ApiKey, SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest,
    SaslHandshakeResponse,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use rustls::ClientConfig;
use rustls_pki_types::ServerName;

pub use stream::ClientStream;

use crate::config::BrokerConfig;
use crate::protocol::client_frame::{encode_frame, response_body};
use crate::security::jaas_context::{jaas_config_key, server_jaas_entries};
use crate::security::sasl::{
    jaas_option, ClientStep, SaslClient, PLAIN, PLAIN_LOGIN_MODULE, SCRAM_LOGIN_MODULE,
};
use crate::security::ssl::{client_config, SslSettings};

const SASL_HANDSHAKE_VERSION: i16 = 1;
const SASL_AUTHENTICATE_VERSION: i16 = 2;
/// PLAIN takes one SaslAuthenticate round and SCRAM two; a broker that
/// asks for more is not speaking either.
const SASL_ROUNDS_MAX: i32 = 4;
/// The largest SASL answer accepted from a broker.
const SASL_RESPONSE_BYTES_MAX: usize = 1 << 20;
/// Kafka's clients re-authenticate at 85-95% of the session lifetime; the
/// brokers' own clients reconnect at 85% instead.
const SESSION_RENEW_PERCENT: u32 = 85;

/// The inter-broker listener's client side, built once at start-up.
pub struct InterBrokerSecurity {
    /// `inter.broker.listener.name`.
    pub listener_name: String,
    tls: Option<Arc<ClientConfig>>,
    sasl: Option<SaslLogin>,
}

/// The identity a broker authenticates with.
struct SaslLogin {
    mechanism: String,
    username: String,
    password: String,
}

impl std::fmt::Debug for InterBrokerSecurity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InterBrokerSecurity")
            .field("listener_name", &self.listener_name)
            .field("tls", &self.tls.is_some())
            .field("sasl", &self.sasl.as_ref().map(|s| &s.mechanism))
            .finish()
    }
}

impl InterBrokerSecurity {
    /// Plaintext TCP (unit tests, and brokers whose inter-broker listener
    /// is PLAINTEXT).
    pub fn plaintext() -> Arc<InterBrokerSecurity> {
        Arc::new(InterBrokerSecurity {
            listener_name: "PLAINTEXT".into(),
            tls: None,
            sasl: None,
        })
    }

    /// From the broker's config; an error names the setting at fault.
    pub fn from_config(config: &BrokerConfig) -> Result<InterBrokerSecurity, String> {
        let listener = config.inter_broker_listener_name.clone();
        let protocol = config
            .listener_security_protocol_map
            .get(&listener)
            .map_or("PLAINTEXT", String::as_str);
        let tls = if protocol == "SSL" || protocol == "SASL_SSL" {
            let invalid = |e: crate::security::ssl::SslConfigError| {
                format!(
                    "inter-broker listener {listener}: Invalid configuration {}: {}",
                    e.key, e.message
                )
            };
            let settings = SslSettings::for_listener(config, &listener).map_err(invalid)?;
            Some(client_config(&settings).map_err(invalid)?)
        } else {
            None
        };
        let sasl = if protocol.starts_with("SASL_") {
            Some(sasl_login(config, &listener)?)
        } else {
            None
        };
        Ok(InterBrokerSecurity {
            listener_name: listener,
            tls,
            sasl,
        })
    }

    /// Secures a connected socket to a broker at `host`: the TLS handshake
    /// (the certificate checked against `host` when
    /// `ssl.endpoint.identification.algorithm` is https), then the SASL
    /// exchange. An error means the connection is unusable.
    pub async fn open<S>(&self, tcp: S, host: &str, client_id: &str) -> io::Result<ClientStream<S>>
    where
        S: AsyncRead + AsyncWrite + Unpin,
    {
        let mut stream = match &self.tls {
            None => ClientStream::plain(tcp),
            Some(config) => {
                let name = ServerName::try_from(host.to_string())
                    .map_err(|e| io::Error::other(format!("TLS server name {host}: {e}")))?;
                let tls = futures_rustls::TlsConnector::from(config.clone())
                    .connect(name, tcp)
                    .await?;
                ClientStream::tls(tls)
            }
        };
        if let Some(login) = &self.sasl {
            let lifetime_ms = authenticate(&mut stream, login, client_id).await?;
            if lifetime_ms > 0 {
                let renew_ms = lifetime_ms as u64 * u64::from(SESSION_RENEW_PERCENT) / 100;
                stream.renew_at = Some(Instant::now() + Duration::from_millis(renew_ms));
            }
        }
        Ok(stream)
    }
}

/// How loudly to log a failed connection to a broker: a refused login is a
/// configuration error an operator must see (Kafka logs it as an error);
/// a broker that is down is routine.
pub fn connect_failure_level(e: &io::Error) -> log::Level {
    if e.kind() == io::ErrorKind::PermissionDenied {
        log::Level::Error
    } else {
        log::Level::Debug
    }
}

/// `sasl.mechanism.inter.broker.protocol` and the `username` and `password`
/// of the inter-broker listener's JAAS entry for it.
fn sasl_login(config: &BrokerConfig, listener: &str) -> Result<SaslLogin, String> {
    let mechanism = config
        .originals()
        .get("sasl.mechanism.inter.broker.protocol")
        .map_or("GSSAPI", String::as_str)
        .trim()
        .to_ascii_uppercase();
    let module = if mechanism == PLAIN {
        PLAIN_LOGIN_MODULE
    } else if mechanism.starts_with("SCRAM-") {
        SCRAM_LOGIN_MODULE
    } else {
        return Err(format!(
            "sasl.mechanism.inter.broker.protocol {mechanism}: kshard's brokers authenticate to each other with PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"
        ));
    };
    let entries = server_jaas_entries(config, listener, &mechanism)?;
    let option = |key: &str| {
        jaas_option(&entries, key, module).map(str::to_string).ok_or_else(|| {
            format!(
                "inter-broker listener {listener}: the JAAS configuration for SASL mechanism {mechanism} ({} or the JAAS file) has no {key} option for {module}; brokers log in to each other with it",
                jaas_config_key(listener, &mechanism)
            )
        })
    };
    Ok(SaslLogin {
        username: option("username")?,
        password: option("password")?,
        mechanism,
    })
}

/// SaslHandshake v1 and SaslAuthenticate v2 rounds until the client is
/// done; returns the session lifetime the broker granted (0: unbounded).
async fn authenticate<S>(
    stream: &mut ClientStream<S>,
    login: &SaslLogin,
    client_id: &str,
) -> io::Result<i64>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let handshake = SaslHandshakeRequest::default()
        .with_mechanism(StrBytes::from_string(login.mechanism.clone()));
    let answer: SaslHandshakeResponse = sasl_round_trip(
        stream,
        ApiKey::SaslHandshake,
        SASL_HANDSHAKE_VERSION,
        0,
        client_id,
        &handshake,
    )
    .await?;
    if answer.error_code != 0 {
        let enabled: Vec<&str> = answer.mechanisms.iter().map(|m| m.as_str()).collect();
        return Err(io::Error::other(format!(
            "SaslHandshake for {}: error {}; the broker enables {enabled:?}",
            login.mechanism, answer.error_code
        )));
    }
    let mut client = SaslClient::new(&login.mechanism, &login.username, &login.password)
        .ok_or_else(|| io::Error::other(format!("no SASL client for {}", login.mechanism)))?;
    let mut token = client.initial_response();
    for correlation_id in 1..=SASL_ROUNDS_MAX {
        let request = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(token));
        let answer: SaslAuthenticateResponse = sasl_round_trip(
            stream,
            ApiKey::SaslAuthenticate,
            SASL_AUTHENTICATE_VERSION,
            correlation_id,
            client_id,
            &request,
        )
        .await?;
        if answer.error_code != 0 {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "SASL {} authentication as {} failed: {}",
                    login.mechanism,
                    login.username,
                    answer.error_message.as_deref().unwrap_or("")
                ),
            ));
        }
        match client
            .evaluate(&answer.auth_bytes)
            .map_err(io::Error::other)?
        {
            ClientStep::Send(next) => token = next,
            ClientStep::Done => return Ok(answer.session_lifetime_ms),
        }
    }
    Err(io::Error::other(format!(
        "SASL {} did not complete in {SASL_ROUNDS_MAX} rounds",
        login.mechanism
    )))
}

async fn sasl_round_trip<S, Req, Resp>(
    stream: &mut ClientStream<S>,
    api_key: ApiKey,
    version: i16,
    correlation_id: i32,
    client_id: &str,
    body: &Req,
) -> io::Result<Resp>
where
    S: AsyncRead + AsyncWrite + Unpin,
    Req: Encodable,
    Resp: Decodable,
{
    let frame = encode_frame(api_key, version, correlation_id, client_id, body)
        .map_err(io::Error::other)?;
    let answer = exchange_frame(stream, &frame, SASL_RESPONSE_BYTES_MAX).await?;
    let mut body =
        response_body(answer, api_key, version, correlation_id).map_err(io::Error::other)?;
    let decoded = Resp::decode(&mut body, version)
        .map_err(|e| io::Error::other(format!("decoding {api_key:?}: {e}")))?;
    if body.has_remaining() {
        return Err(io::Error::other(format!(
            "{api_key:?} response has bytes after its body"
        )));
    }
    Ok(decoded)
}

/// Sends one size-prefixed request `frame` and reads the size-prefixed
/// response (without its size), refusing one over `response_bytes_max`.
pub async fn exchange_frame<S>(
    stream: &mut S,
    frame: &[u8],
    response_bytes_max: usize,
) -> io::Result<Bytes>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    stream.write_all(frame).await?;
    stream.flush().await?;
    let mut size = [0u8; 4];
    stream.read_exact(&mut size).await?;
    let size = i32::from_be_bytes(size);
    if size < 4 || size as usize > response_bytes_max {
        return Err(io::Error::other(format!("bad response size {size}")));
    }
    let mut buf = vec![0u8; size as usize];
    stream.read_exact(&mut buf).await?;
    Ok(Bytes::from(buf))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    const SCRAM_JAAS: &str = "org.apache.kafka.common.security.scram.ScramLoginModule required username=\"admin\" password=\"admin-secret\";";

    fn security(pairs: &[(&str, &str)]) -> Result<InterBrokerSecurity, String> {
        let mut map: BTreeMap<String, String> = [
            ("listeners", "PLAINTEXT://:9092"),
            ("log.dirs", "/tmp/kshard-inter-broker-tests"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        map.extend(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        let config = BrokerConfig::from_map(&map).map_err(|e| e.to_string())?;
        InterBrokerSecurity::from_config(&config)
    }

    #[test]
    fn plaintext_needs_no_settings() {
        let s = security(&[]).unwrap();
        assert_eq!(s.listener_name, "PLAINTEXT");
        assert!(s.tls.is_none() && s.sasl.is_none());
    }

    #[test]
    fn the_login_is_the_listener_jaas_entry_for_the_mechanism() {
        let s = security(&[
            ("listeners", "PLAINTEXT://:9092,SASL_PLAINTEXT://:9093"),
            ("inter.broker.listener.name", "SASL_PLAINTEXT"),
            ("sasl.enabled.mechanisms", "SCRAM-SHA-512"),
            ("sasl.mechanism.inter.broker.protocol", "SCRAM-SHA-512"),
            (
                "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config",
                SCRAM_JAAS,
            ),
        ])
        .unwrap();
        let login = s.sasl.as_ref().unwrap();
        assert_eq!(
            (login.mechanism.as_str(), login.username.as_str()),
            ("SCRAM-SHA-512", "admin")
        );
        assert_eq!(login.password, "admin-secret");
        assert!(s.tls.is_none());
        assert!(!format!("{s:?}").contains("admin-secret"), "{s:?}");
    }

    #[test]
    fn a_jaas_entry_without_credentials_is_refused_naming_its_key() {
        let e = security(&[
            ("listeners", "PLAINTEXT://:9092,SASL_PLAINTEXT://:9093"),
            ("inter.broker.listener.name", "SASL_PLAINTEXT"),
            ("sasl.enabled.mechanisms", "SCRAM-SHA-256"),
            ("sasl.mechanism.inter.broker.protocol", "SCRAM-SHA-256"),
            (
                "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config",
                "org.apache.kafka.common.security.scram.ScramLoginModule required;",
            ),
        ])
        .unwrap_err();
        assert!(
            e.contains("listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config")
                && e.contains("username"),
            "{e}"
        );
    }

    #[test]
    fn tls_between_brokers_needs_a_trust_store() {
        let e = security(&[
            ("listeners", "PLAINTEXT://:9092,SSL://:9093"),
            ("inter.broker.listener.name", "SSL"),
        ])
        .unwrap_err();
        assert!(
            e.starts_with("inter-broker listener SSL: Invalid configuration"),
            "{e}"
        );
    }
}
