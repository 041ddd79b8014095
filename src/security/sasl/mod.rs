//! Kafka's server-side SASL mechanisms as pure logic (no I/O): the
//! `SaslServer` implementations `PlainSaslServer` and `ScramSaslServer`,
//! the credential format of `ScramCredentialUtils`, and the `JaasConfig`
//! parser of `sasl.jaas.config` values (plus JAAS files). The connection
//! layer (Kafka's `SaslServerAuthenticator`) feeds tokens to a
//! [`SaslServer`] and sends back what it answers.

mod client;
mod jaas;
mod jaas_tokenizer;
mod plain;
mod scram;
mod scram_credential;
mod scram_messages;

use std::fmt;

pub use client::{ClientStep, SaslClient};
pub use jaas::{
    jaas_option, parse_jaas_config, parse_jaas_file, JaasEntry, PLAIN_LOGIN_MODULE,
    SCRAM_LOGIN_MODULE,
};
pub use plain::PlainServer;
pub use scram::ScramServer;
pub use scram_credential::ScramCredential;

/// The PLAIN mechanism's name.
pub const PLAIN: &str = "PLAIN";

/// Kafka's `ScramMechanism`: the SCRAM variants a broker offers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScramMechanism {
    Sha256,
    Sha512,
}

impl ScramMechanism {
    /// Both mechanisms, in Kafka's declaration order.
    pub const ALL: [ScramMechanism; 2] = [ScramMechanism::Sha256, ScramMechanism::Sha512];

    /// Kafka's `maxIterations`, the same for both (AlterUserScramCredentials
    /// rejects more).
    pub const MAX_ITERATIONS: i32 = 16384;

    pub fn name(self) -> &'static str {
        match self {
            ScramMechanism::Sha256 => "SCRAM-SHA-256",
            ScramMechanism::Sha512 => "SCRAM-SHA-512",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.name() == name)
    }

    /// The mechanism byte of AlterUserScramCredentials and
    /// DescribeUserScramCredentials.
    pub fn wire_type(self) -> i8 {
        match self {
            ScramMechanism::Sha256 => 1,
            ScramMechanism::Sha512 => 2,
        }
    }

    pub fn from_wire_type(t: i8) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.wire_type() == t)
    }

    /// Kafka's `minIterations`: the server refuses weaker stored credentials.
    pub fn min_iterations(self) -> i32 {
        4096
    }

    pub fn max_iterations(self) -> i32 {
        Self::MAX_ITERATIONS
    }
}

impl fmt::Display for ScramMechanism {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Where a SASL server looks users up. PLAIN's users are the JAAS options
/// `user_<name>="<password>"` of the listener's PlainLoginModule line
/// (see [`jaas_option`]); SCRAM's are the stored credentials.
pub trait CredentialSource {
    fn plain_password(&self, user: &str) -> Option<String>;
    fn scram_credential(&self, user: &str, mechanism: ScramMechanism) -> Option<ScramCredential>;
}

/// What a server answers to one client token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SaslStep {
    /// Send these bytes back; the exchange goes on.
    Challenge(Vec<u8>),
    /// Authenticated as `authorization_id`; send `final_token` back (empty
    /// for PLAIN, SCRAM's server-final message otherwise).
    Complete {
        authorization_id: String,
        final_token: Vec<u8>,
    },
}

/// A failed exchange. `message` is exactly what Kafka 3.9 puts in the
/// SaslAuthenticate response's error_message for this failure (error code
/// SASL_AUTHENTICATION_FAILED).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SaslFailure {
    pub message: String,
    /// Kafka's internal reason (its `SaslException` text) for the broker's
    /// log. It may name the user, so it never goes to the client.
    pub detail: String,
    /// Kafka answers nothing and closes the connection: an unexpected
    /// runtime exception or `IllegalSaslStateException` escapes its
    /// authenticator instead of becoming a SaslAuthenticate response.
    pub close_without_response: bool,
}

impl SaslFailure {
    /// A `SaslAuthenticationException`: its message reaches the client.
    pub(crate) fn visible(message: impl Into<String>) -> Self {
        let message = message.into();
        SaslFailure {
            detail: message.clone(),
            message,
            close_without_response: false,
        }
    }

    /// A plain `SaslException`: the client only sees the generic text, so
    /// that it learns nothing (such as whether the user exists).
    pub(crate) fn generic(
        mechanism: &str,
        reauthenticating: bool,
        detail: impl Into<String>,
    ) -> Self {
        SaslFailure {
            message: invalid_credentials_message(mechanism, reauthenticating),
            detail: detail.into(),
            close_without_response: false,
        }
    }

    /// An exception Kafka does not turn into a response.
    pub(crate) fn closed(detail: impl Into<String>) -> Self {
        let detail = detail.into();
        SaslFailure {
            message: detail.clone(),
            detail,
            close_without_response: true,
        }
    }
}

/// SaslServerAuthenticator's text for every `SaslException`.
pub fn invalid_credentials_message(mechanism: &str, reauthenticating: bool) -> String {
    let phase = if reauthenticating {
        "re-authentication"
    } else {
        "authentication"
    };
    format!("Authentication failed during {phase} due to invalid credentials with SASL mechanism {mechanism}")
}

/// One connection's (or re-authentication's) SASL exchange.
#[derive(Debug)]
pub enum SaslServer {
    Plain(PlainServer),
    Scram(ScramServer),
}

impl SaslServer {
    /// A server for an initial authentication; None for a mechanism not
    /// built here (GSSAPI, OAUTHBEARER).
    pub fn new(mechanism: &str) -> Option<SaslServer> {
        Self::create(mechanism, false)
    }

    /// A server for re-authentication (KIP-368): Kafka's generic failure
    /// text then says "re-authentication".
    pub fn new_reauthentication(mechanism: &str) -> Option<SaslServer> {
        Self::create(mechanism, true)
    }

    fn create(mechanism: &str, reauthenticating: bool) -> Option<SaslServer> {
        if mechanism == PLAIN {
            return Some(SaslServer::Plain(PlainServer::new()));
        }
        let scram = ScramMechanism::from_name(mechanism)?;
        Some(SaslServer::Scram(ScramServer::new(scram, reauthenticating)))
    }

    pub fn mechanism(&self) -> &str {
        match self {
            SaslServer::Plain(_) => PLAIN,
            SaslServer::Scram(s) => s.mechanism().name(),
        }
    }

    /// One client token. After Complete or a failure, further calls fail
    /// with `close_without_response` (Kafka's IllegalSaslStateException).
    pub fn evaluate(
        &mut self,
        token: &[u8],
        credentials: &dyn CredentialSource,
    ) -> Result<SaslStep, SaslFailure> {
        match self {
            SaslServer::Plain(s) => s.evaluate(token, credentials),
            SaslServer::Scram(s) => s.evaluate(token, credentials),
        }
    }
}

/// `Utils.isEqualConstantTime`: the time depends only on the length of
/// `given` (the client's, which it knows), never on `expected`'s length or
/// on where the two differ.
pub(crate) fn constant_time_eq(given: &[u8], expected: &[u8]) -> bool {
    if expected.is_empty() {
        return given.is_empty();
    }
    let mut diff = u8::from(given.len() != expected.len());
    for (i, byte) in given.iter().enumerate() {
        diff |= byte ^ expected[i % expected.len()];
    }
    std::hint::black_box(diff) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mechanism_names_and_wire_types() {
        for m in ScramMechanism::ALL {
            assert_eq!(ScramMechanism::from_name(m.name()), Some(m));
            assert_eq!(ScramMechanism::from_wire_type(m.wire_type()), Some(m));
            assert_eq!(m.min_iterations(), 4096);
            assert_eq!(m.max_iterations(), 16384);
        }
        assert_eq!(ScramMechanism::Sha256.to_string(), "SCRAM-SHA-256");
        assert_eq!(ScramMechanism::Sha512.wire_type(), 2);
        assert_eq!(ScramMechanism::from_name("SCRAM-SHA-1"), None);
        assert_eq!(ScramMechanism::from_wire_type(0), None);
        assert!(SaslServer::new("GSSAPI").is_none());
        assert_eq!(
            SaslServer::new(PLAIN).map(|s| s.mechanism().to_string()),
            Some("PLAIN".into())
        );
        let scram = SaslServer::new_reauthentication("SCRAM-SHA-512");
        assert_eq!(
            scram.map(|s| s.mechanism().to_string()),
            Some("SCRAM-SHA-512".into())
        );
    }

    #[test]
    fn generic_message_text() {
        assert_eq!(
            invalid_credentials_message("SCRAM-SHA-256", false),
            "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256"
        );
        assert!(invalid_credentials_message("PLAIN", true).contains("during re-authentication due"));
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
        assert!(!constant_time_eq(b"abab", b"ab"));
        assert!(!constant_time_eq(b"", b"ab"));
        assert!(!constant_time_eq(b"a", b""));
        assert!(constant_time_eq(b"", b""));
    }
}
