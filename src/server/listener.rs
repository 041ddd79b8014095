//! What each listener needs to secure its connections, built once at
//! start-up and shared by every shard (Kafka's per-listener ChannelBuilder:
//! an SslFactory for SSL and SASL_SSL, the SASL mechanisms and JAAS login
//! modules for SASL_PLAINTEXT and SASL_SSL).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;

use crate::config::{sasl_mechanisms_of, BrokerConfig, Endpoint};
use crate::security::jaas_context::{jaas_config_key, server_jaas_entries};
use crate::security::sasl::{PLAIN, PLAIN_LOGIN_MODULE};
use crate::security::ssl::{SslConfigError, SslServerContext, SslSettings};

/// One listener's security.
pub struct ListenerSecurity {
    pub endpoint: Endpoint,
    pub tls: Option<TlsListener>,
    pub sasl: Option<SaslListener>,
    /// `connection.failed.authentication.delay.ms`: how long a connection
    /// that failed to authenticate waits before its answer and close.
    pub failed_authentication_delay_ms: u64,
}

/// A SASL listener's settings.
pub struct SaslListener {
    /// `sasl.enabled.mechanisms`, in configured order.
    pub mechanisms: Vec<String>,
    /// PLAIN's users: the `user_<name>="<password>"` options of the
    /// listener's PlainLoginModule.
    pub plain_users: BTreeMap<String, String>,
    /// `connections.max.reauth.ms` (0: sessions never expire).
    pub max_reauth_ms: i64,
    /// `sasl.server.max.receive.size`: the largest frame a client may send
    /// before it has authenticated.
    pub max_receive_bytes: usize,
}

/// A TLS listener's current context, replaced when its stores are
/// reconfigured.
pub struct TlsListener {
    context: ArcSwap<SslServerContext>,
    /// The settings it was built from, as shown without secrets.
    settings_shown: Mutex<String>,
}

impl TlsListener {
    fn new(settings: SslSettings) -> Result<TlsListener, SslConfigError> {
        let shown = format!("{settings:?}");
        Ok(TlsListener {
            context: ArcSwap::from_pointee(SslServerContext::new(settings)?),
            settings_shown: Mutex::new(shown),
        })
    }

    pub fn current(&self) -> Arc<SslServerContext> {
        self.context.load_full()
    }

    /// Kafka's SslFactory.reconfigure after its listener's ssl keys were
    /// altered: new settings build a new context; the same settings reload
    /// the stores only if their files changed. Ok(true) when it changed.
    pub fn reconfigure(&self, settings: SslSettings) -> Result<bool, SslConfigError> {
        let shown = format!("{settings:?}");
        let mut current = self.settings_shown.lock().expect("tls settings poisoned");
        if *current == shown {
            return self.context.load().reload_if_changed();
        }
        self.context
            .store(Arc::new(SslServerContext::new(settings)?));
        *current = shown;
        Ok(true)
    }
}

/// The settings of `listener` in `config` (its `listener.name.` overrides
/// first).
pub fn ssl_settings(config: &BrokerConfig, listener: &str) -> Result<SslSettings, SslConfigError> {
    SslSettings::for_listener(config, listener)
}

/// Every listener's security, in `listeners` order; an error names the key.
pub fn build_listeners(config: &BrokerConfig) -> Result<Vec<Arc<ListenerSecurity>>, String> {
    config
        .listeners
        .iter()
        .map(|endpoint| build_listener(config, endpoint).map(Arc::new))
        .collect()
}

fn build_listener(config: &BrokerConfig, endpoint: &Endpoint) -> Result<ListenerSecurity, String> {
    let name = endpoint.listener_name.as_str();
    let value = |key: &str| config.listener_value(name, key).map(str::to_string);
    let number = |key: &str, default: i64| -> Result<i64, String> {
        match value(key) {
            None => Ok(default),
            Some(v) => v.trim().parse().map_err(|_| {
                format!("Invalid value {v} for configuration {key}: Not a number of type LONG")
            }),
        }
    };
    let protocol = endpoint.security_protocol.as_str();
    let tls = if protocol == "SSL" || protocol == "SASL_SSL" {
        let invalid = |e: SslConfigError| {
            format!(
                "listener {name}: Invalid configuration {}: {}",
                e.key, e.message
            )
        };
        let settings = ssl_settings(config, name).map_err(invalid)?;
        Some(TlsListener::new(settings).map_err(invalid)?)
    } else {
        None
    };
    let sasl = if protocol.starts_with("SASL_") {
        let mechanisms = sasl_mechanisms_of(config.originals(), name);
        let plain_users = if mechanisms.iter().any(|m| m == PLAIN) {
            plain_users(config, name)?
        } else {
            BTreeMap::new()
        };
        Some(SaslListener {
            mechanisms,
            plain_users,
            max_reauth_ms: number("connections.max.reauth.ms", 0)?.max(0),
            max_receive_bytes: number("sasl.server.max.receive.size", 524_288)?.max(0) as usize,
        })
    } else {
        None
    };
    Ok(ListenerSecurity {
        endpoint: endpoint.clone(),
        tls,
        sasl,
        failed_authentication_delay_ms: number("connection.failed.authentication.delay.ms", 100)?
            .max(0) as u64,
    })
}

/// PLAIN's users for a listener: the `user_<name>` options of its
/// PlainLoginModule entry.
fn plain_users(config: &BrokerConfig, listener: &str) -> Result<BTreeMap<String, String>, String> {
    let entries = server_jaas_entries(config, listener, PLAIN)?;
    let module = entries
        .iter()
        .find(|e| e.login_module == PLAIN_LOGIN_MODULE)
        .ok_or_else(|| {
            format!(
                "listener {listener} enables SASL mechanism PLAIN but its JAAS configuration ({}) has no {PLAIN_LOGIN_MODULE}",
                jaas_config_key(listener, PLAIN)
            )
        })?;
    Ok(module
        .options
        .iter()
        .filter_map(|(k, v)| Some((k.strip_prefix("user_")?.to_string(), v.clone())))
        .collect())
}
