//! Kafka's `PlainSaslServer` (RFC 4616) with the password check of its
//! `PlainServerCallbackHandler` (the `user_<name>` JAAS options, compared
//! in constant time).

use super::{constant_time_eq, CredentialSource, SaslFailure, SaslStep};

/// The PLAIN exchange: a single client token.
#[derive(Debug, Default)]
pub struct PlainServer {
    complete: bool,
}

impl PlainServer {
    pub fn new() -> Self {
        PlainServer::default()
    }

    /// `authzid NUL authcid NUL passwd`, checked in Kafka's order with its
    /// messages (all `SaslAuthenticationException`s, so the client sees them).
    pub fn evaluate(
        &mut self,
        token: &[u8],
        credentials: &dyn CredentialSource,
    ) -> Result<SaslStep, SaslFailure> {
        if self.complete {
            // Kafka never hands a completed server another token.
            return Err(SaslFailure::closed(
                "Unexpected SASL/PLAIN token after authentication completed",
            ));
        }
        // Java's `new String(bytes, UTF_8)` replaces malformed input.
        let response = String::from_utf8_lossy(token);
        let tokens = extract_tokens(&response);
        let [authorization_id, username, password] = tokens.as_slice() else {
            return Err(SaslFailure::visible(format!(
                "Invalid SASL/PLAIN response: expected 3 tokens, got {}",
                tokens.len()
            )));
        };
        if username.is_empty() {
            return Err(SaslFailure::visible(
                "Authentication failed: username not specified",
            ));
        }
        if password.is_empty() {
            return Err(SaslFailure::visible(
                "Authentication failed: password not specified",
            ));
        }
        // An unknown user and a wrong password read the same.
        let authenticated = credentials
            .plain_password(username)
            .is_some_and(|expected| constant_time_eq(password.as_bytes(), expected.as_bytes()));
        if !authenticated {
            return Err(SaslFailure::visible(
                "Authentication failed: Invalid username or password",
            ));
        }
        if !authorization_id.is_empty() && authorization_id != username {
            return Err(SaslFailure::visible(
                "Authentication failed: Client requested an authorization id that is different from username",
            ));
        }
        self.complete = true;
        Ok(SaslStep::Complete {
            authorization_id: username.to_string(),
            final_token: Vec::new(),
        })
    }
}

/// Kafka's `extractTokens`: splits at NUL at most four times, so a count
/// above 3 is reported as 4.
fn extract_tokens(response: &str) -> Vec<&str> {
    const MAX_SPLITS: usize = 4;
    let mut tokens = Vec::with_capacity(MAX_SPLITS);
    let mut rest = response;
    for _ in 0..MAX_SPLITS {
        match rest.find('\0') {
            Some(end) => {
                tokens.push(&rest[..end]);
                rest = &rest[end + 1..];
            }
            None => {
                tokens.push(rest);
                break;
            }
        }
    }
    tokens
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::security::sasl::{ScramCredential, ScramMechanism};

    struct Users;
    impl CredentialSource for Users {
        fn plain_password(&self, user: &str) -> Option<String> {
            (user == "alice").then(|| "alice-secret".to_string())
        }
        fn scram_credential(&self, _: &str, _: ScramMechanism) -> Option<ScramCredential> {
            None
        }
    }

    fn run(token: &[u8]) -> Result<SaslStep, SaslFailure> {
        PlainServer::new().evaluate(token, &Users)
    }

    fn message(token: &[u8]) -> String {
        match run(token) {
            Err(f) => {
                assert!(!f.close_without_response);
                f.message
            }
            Ok(step) => panic!("expected a failure, got {step:?}"),
        }
    }

    #[test]
    fn good_credentials_complete() {
        let expected = SaslStep::Complete {
            authorization_id: "alice".into(),
            final_token: Vec::new(),
        };
        assert_eq!(run(b"\0alice\0alice-secret"), Ok(expected.clone()));
        assert_eq!(run(b"alice\0alice\0alice-secret"), Ok(expected));
    }

    #[test]
    fn bad_credentials_share_one_message() {
        let invalid = "Authentication failed: Invalid username or password";
        assert_eq!(message(b"\0alice\0wrong"), invalid);
        assert_eq!(message(b"\0bob\0alice-secret"), invalid);
        assert_eq!(message(b"\0alice\0alice-secret\xff"), invalid);
        assert_eq!(
            message(b"bob\0alice\0alice-secret"),
            "Authentication failed: Client requested an authorization id that is different from username"
        );
    }

    #[test]
    fn malformed_tokens() {
        let count = |n: usize| format!("Invalid SASL/PLAIN response: expected 3 tokens, got {n}");
        assert_eq!(message(b""), count(1));
        assert_eq!(message(b"alice"), count(1));
        assert_eq!(message(b"\0alice"), count(2));
        assert_eq!(message(b"\0a\0b\0c"), count(4));
        assert_eq!(message(b"\0a\0b\0c\0d\0e"), count(4));
        assert_eq!(
            message(b"\0\0pw"),
            "Authentication failed: username not specified"
        );
        assert_eq!(
            message(b"\0alice\0"),
            "Authentication failed: password not specified"
        );
    }

    #[test]
    fn second_token_closes() {
        let mut server = PlainServer::new();
        assert!(server.evaluate(b"\0alice\0alice-secret", &Users).is_ok());
        let again = server.evaluate(b"\0alice\0alice-secret", &Users);
        assert!(again.is_err_and(|f| f.close_without_response));
    }
}
