//! The client side of PLAIN and SCRAM, as Kafka's PlainSaslClient and
//! ScramSaslClient: what a broker sends when it authenticates to another
//! broker's SASL listener (replica fetchers, the controller channel).

use base64::Engine;

use super::scram_credential::{
    client_key, hash, hmac, salted_password, server_key, xor, B64_ENCODE,
};
use super::{constant_time_eq, ScramMechanism, PLAIN};

/// What the client sends next.
#[derive(Debug, PartialEq, Eq)]
pub enum ClientStep {
    /// A token for the server.
    Send(Vec<u8>),
    /// Authenticated: nothing more to send.
    Done,
}

pub enum SaslClient {
    Plain {
        username: String,
        password: String,
        sent: bool,
    },
    Scram(Box<ScramClient>),
}

impl SaslClient {
    /// None for a mechanism this side does not speak.
    pub fn new(mechanism: &str, username: &str, password: &str) -> Option<SaslClient> {
        if mechanism == PLAIN {
            return Some(SaslClient::Plain {
                username: username.to_string(),
                password: password.to_string(),
                sent: false,
            });
        }
        let m = ScramMechanism::from_name(mechanism)?;
        Some(SaslClient::Scram(Box::new(ScramClient::new(
            m,
            username,
            password,
            client_nonce()?,
        ))))
    }

    /// The first token (SASL mechanisms here are client-first).
    pub fn initial_response(&mut self) -> Vec<u8> {
        match self {
            SaslClient::Plain {
                username,
                password,
                sent,
            } => {
                *sent = true;
                // authzid (empty) NUL authcid NUL password.
                format!("\0{username}\0{password}").into_bytes()
            }
            SaslClient::Scram(s) => s.client_first().into_bytes(),
        }
    }

    /// The server's answer to the last token; an error says why the
    /// exchange cannot go on.
    pub fn evaluate(&mut self, challenge: &[u8]) -> Result<ClientStep, String> {
        match self {
            SaslClient::Plain { sent, .. } => {
                assert!(*sent, "PLAIN answered before its initial response");
                Ok(ClientStep::Done)
            }
            SaslClient::Scram(s) => s.evaluate(challenge),
        }
    }
}

enum ScramState {
    ClientFirst,
    ServerFirst { client_first_bare: String },
    ServerFinal { server_signature: Vec<u8> },
    Complete,
}

pub struct ScramClient {
    mechanism: ScramMechanism,
    username: String,
    password: String,
    nonce: String,
    state: ScramState,
}

impl ScramClient {
    pub fn new(mechanism: ScramMechanism, username: &str, password: &str, nonce: String) -> Self {
        ScramClient {
            mechanism,
            username: username.to_string(),
            password: password.to_string(),
            nonce,
            state: ScramState::ClientFirst,
        }
    }

    /// `n,,n=<saslname>,r=<nonce>` (no authzid, no channel binding).
    fn client_first(&mut self) -> String {
        assert!(matches!(self.state, ScramState::ClientFirst));
        let sasl_name = self.username.replace('=', "=3D").replace(',', "=2C");
        let bare = format!("n={sasl_name},r={}", self.nonce);
        let message = format!("n,,{bare}");
        self.state = ScramState::ServerFirst {
            client_first_bare: bare,
        };
        message
    }

    fn evaluate(&mut self, challenge: &[u8]) -> Result<ClientStep, String> {
        let text = std::str::from_utf8(challenge)
            .map_err(|_| "the SCRAM server message is not UTF-8".to_string())?;
        match std::mem::replace(&mut self.state, ScramState::Complete) {
            ScramState::ServerFirst { client_first_bare } => {
                let (final_message, server_signature) =
                    self.client_final(&client_first_bare, text)?;
                self.state = ScramState::ServerFinal { server_signature };
                Ok(ClientStep::Send(final_message.into_bytes()))
            }
            ScramState::ServerFinal { server_signature } => {
                verify_server_final(text, &server_signature)?;
                Ok(ClientStep::Done)
            }
            ScramState::ClientFirst | ScramState::Complete => {
                Err("unexpected SCRAM server message".into())
            }
        }
    }

    /// Answers `r=<nonce>,s=<salt>,i=<iterations>` with the proof, and
    /// returns the signature the server must show next.
    fn client_final(
        &self,
        client_first_bare: &str,
        server_first: &str,
    ) -> Result<(String, Vec<u8>), String> {
        let field = |name: &str| {
            server_first
                .split(',')
                .find_map(|f| f.strip_prefix(name))
                .ok_or_else(|| format!("the SCRAM server-first message has no {name}"))
        };
        let nonce = field("r=")?;
        if !nonce.starts_with(&self.nonce) || nonce.len() == self.nonce.len() {
            return Err("the SCRAM server nonce does not extend the client nonce".into());
        }
        let salt = B64_ENCODE
            .decode(field("s=")?)
            .map_err(|_| "the SCRAM salt is not base64".to_string())?;
        let iterations: i32 = field("i=")?
            .parse()
            .map_err(|_| "the SCRAM iteration count is not a number".to_string())?;
        let m = self.mechanism;
        if iterations < m.min_iterations() || iterations > m.max_iterations() {
            return Err(format!(
                "the SCRAM iteration count {iterations} is outside {}..={}",
                m.min_iterations(),
                m.max_iterations()
            ));
        }
        // "biws" is base64("n,,"): the GS2 header of the first message.
        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!("{client_first_bare},{server_first},{without_proof}");
        let salted = salted_password(m, &self.password, &salt, iterations);
        let client_key = client_key(m, &salted);
        let stored_key = hash(m, &client_key);
        let signature = hmac(m, &stored_key, &[auth_message.as_bytes()]);
        let proof = xor(&client_key, &signature).expect("equal digest lengths");
        let server_signature = hmac(m, &server_key(m, &salted), &[auth_message.as_bytes()]);
        Ok((
            format!("{without_proof},p={}", B64_ENCODE.encode(proof)),
            server_signature,
        ))
    }
}

/// `v=<server signature>`, or `e=<error>` from a server that refused.
fn verify_server_final(text: &str, expected: &[u8]) -> Result<(), String> {
    if let Some(error) = text.strip_prefix("e=") {
        return Err(format!("the SCRAM server refused: {error}"));
    }
    let given = text
        .split(',')
        .find_map(|f| f.strip_prefix("v="))
        .and_then(|v| B64_ENCODE.decode(v).ok())
        .ok_or_else(|| "the SCRAM server-final message has no verifier".to_string())?;
    if !constant_time_eq(&given, expected) {
        return Err("the SCRAM server signature does not match".into());
    }
    Ok(())
}

/// ScramSaslClient's nonce: `ScramFormatter.secureRandomString`, as the
/// server's.
fn client_nonce() -> Option<String> {
    super::scram::secure_random_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::security::sasl::{CredentialSource, SaslServer, SaslStep, ScramCredential};

    struct One(String, ScramCredential);
    impl CredentialSource for One {
        fn scram_credential(&self, user: &str, _m: ScramMechanism) -> Option<ScramCredential> {
            (user == self.0).then(|| self.1.clone())
        }
        fn plain_password(&self, _user: &str) -> Option<String> {
            None
        }
    }

    fn exchange(m: ScramMechanism, client_password: &str) -> Result<(), String> {
        let stored = ScramCredential::from_password(m, "s3cret", b"0123456789abcdef", 4096);
        let users = One("al,i=ce".into(), stored);
        let mut server = SaslServer::new(m.name()).unwrap();
        let mut client = SaslClient::new(m.name(), "al,i=ce", client_password).unwrap();
        let mut token = client.initial_response();
        loop {
            let challenge = match server.evaluate(&token, &users) {
                Ok(SaslStep::Challenge(c)) => c,
                Ok(SaslStep::Complete { final_token, .. }) => final_token,
                Err(f) => return Err(f.message),
            };
            match client.evaluate(&challenge)? {
                ClientStep::Send(t) => token = t,
                ClientStep::Done => return Ok(()),
            }
        }
    }

    #[test]
    fn scram_client_authenticates_to_the_server() {
        for m in ScramMechanism::ALL {
            exchange(m, "s3cret").unwrap();
            assert!(exchange(m, "wrong").is_err());
        }
    }

    #[test]
    fn scram_client_refuses_a_forged_server() {
        let mut c = ScramClient::new(ScramMechanism::Sha256, "u", "p", "abc".into());
        c.client_first();
        assert!(
            c.evaluate(b"r=xyz,s=AAAA,i=4096").is_err(),
            "nonce must extend ours"
        );
        let mut c = ScramClient::new(ScramMechanism::Sha256, "u", "p", "abc".into());
        c.client_first();
        assert!(
            c.evaluate(b"r=abcd,s=AAAA,i=1").is_err(),
            "too few iterations"
        );
        let mut c = ScramClient::new(ScramMechanism::Sha256, "u", "p", "abc".into());
        c.client_first();
        assert!(matches!(
            c.evaluate(b"r=abcd,s=AAAA,i=4096"),
            Ok(ClientStep::Send(_))
        ));
        assert!(c.evaluate(b"v=AAAA").is_err(), "wrong server signature");
    }

    #[test]
    fn plain_sends_one_token() {
        let mut c = SaslClient::new(PLAIN, "admin", "pw").unwrap();
        assert_eq!(c.initial_response(), b"\0admin\0pw".to_vec());
        assert_eq!(c.evaluate(b"").unwrap(), ClientStep::Done);
    }
}
