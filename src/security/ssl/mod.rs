//! TLS listeners and inter-broker TLS clients as Kafka's
//! `org.apache.kafka.common.security.ssl` package configures them
//! (`SslFactory`, `DefaultSslEngineFactory`, `SslPrincipalMapper`), on
//! rustls with the ring provider. Key stores: PEM (inline or file),
//! PKCS12 and JKS.

mod context;
mod jks;
mod pem;
mod pkcs12;
mod pkcs8;
mod principal;
mod regex;
mod regex_syntax;
mod settings;
mod sha1;
mod stores;
mod suites;
#[cfg(test)]
mod tests;

pub use context::{client_config, SslServerContext};
pub use principal::{rfc2253_subject, SslPrincipalMapper};
pub use settings::{ClientAuth, SslSettings};

/// A bad ssl.* setting or store: the Kafka key concerned and a message
/// worded like Kafka's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SslConfigError {
    pub key: String,
    pub message: String,
}

impl SslConfigError {
    pub(crate) fn new(key: &str, message: impl Into<String>) -> SslConfigError {
        SslConfigError {
            key: key.to_string(),
            message: message.into(),
        }
    }
}

impl std::fmt::Display for SslConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.message, self.key)
    }
}

impl std::error::Error for SslConfigError {}
