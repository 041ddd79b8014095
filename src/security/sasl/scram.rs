//! Kafka's `ScramSaslServer` (RFC 5802 / RFC 7677 as Kafka implements
//! them) and `ScramFormatter.secureRandomString`, its server nonce.

use base64::Engine;

use super::scram_credential::{hash, hmac, xor, B64_ENCODE};
use super::scram_messages::{self, ClientFinal, ClientFirst};
use super::{
    constant_time_eq, CredentialSource, SaslFailure, SaslStep, ScramCredential, ScramMechanism,
};

/// What the server waits for.
#[derive(Debug)]
enum State {
    ClientFirst,
    ClientFinal(Box<Exchange>),
    Complete,
    Failed,
}

/// What the first round established, kept for the proof check.
#[derive(Debug)]
struct Exchange {
    client_first: ClientFirst,
    server_first: String,
    /// Client nonce followed by server nonce.
    nonce: String,
    username: String,
    credential: ScramCredential,
}

/// One SCRAM exchange: client-first, then client-final.
#[derive(Debug)]
pub struct ScramServer {
    mechanism: ScramMechanism,
    reauthenticating: bool,
    state: State,
    /// Tests pin the server nonce (RFC 7677's example); None draws one.
    fixed_server_nonce: Option<String>,
}

impl ScramServer {
    pub fn new(mechanism: ScramMechanism, reauthenticating: bool) -> Self {
        ScramServer {
            mechanism,
            reauthenticating,
            state: State::ClientFirst,
            fixed_server_nonce: None,
        }
    }

    pub fn mechanism(&self) -> ScramMechanism {
        self.mechanism
    }

    pub fn evaluate(
        &mut self,
        token: &[u8],
        credentials: &dyn CredentialSource,
    ) -> Result<SaslStep, SaslFailure> {
        let state = std::mem::replace(&mut self.state, State::Failed);
        let outcome = match state {
            State::ClientFirst => self.client_first(token, credentials),
            State::ClientFinal(exchange) => self.client_final(token, *exchange),
            State::Complete | State::Failed => {
                let name = if matches!(state, State::Complete) {
                    "COMPLETE"
                } else {
                    "FAILED"
                };
                return Err(SaslFailure::closed(format!(
                    "Unexpected challenge in Sasl server state {name}"
                )));
            }
        };
        // A failure leaves the state Failed (and the credential dropped).
        let (state, step) = outcome?;
        self.state = state;
        Ok(step)
    }

    fn generic(&self, detail: impl Into<String>) -> SaslFailure {
        SaslFailure::generic(self.mechanism.name(), self.reauthenticating, detail)
    }

    fn client_first(
        &self,
        token: &[u8],
        credentials: &dyn CredentialSource,
    ) -> Result<(State, SaslStep), SaslFailure> {
        let message = ascii_message(token);
        let client_first = message
            .as_deref()
            .and_then(ClientFirst::parse)
            .ok_or_else(|| {
                let shown = String::from_utf8_lossy(token);
                self.generic(format!(
                    "Invalid SCRAM client first message format: {shown}"
                ))
            })?;
        // Unknown extensions are ignored, as Kafka only logs them.
        let server_nonce = match &self.fixed_server_nonce {
            Some(nonce) => nonce.clone(),
            None => secure_random_string().ok_or_else(|| {
                self.generic("Authentication failed: Credentials could not be obtained")
            })?,
        };
        let username = scram_messages::username(&client_first.sasl_name).ok_or_else(|| {
            self.generic("Authentication failed: Credentials could not be obtained")
        })?;
        if client_first.token_authenticated() {
            // kshard keeps no delegation tokens: every token id is unknown.
            return Err(self.generic(format!(
                "Token Authentication failed: Invalid tokenId : {username}"
            )));
        }
        let credential = credentials
            .scram_credential(&username, self.mechanism)
            .ok_or_else(|| self.generic("Authentication failed: Invalid user credentials"))?;
        let authzid = &client_first.authorization_id;
        if !authzid.is_empty() && *authzid != username {
            return Err(SaslFailure::visible(
                "Authentication failed: Client requested an authorization id that is different from username",
            ));
        }
        let min = self.mechanism.min_iterations();
        if credential.iterations < min {
            // Kafka prints the enum constant, e.g. SCRAM_SHA_256.
            let constant = self.mechanism.name().replace('-', "_");
            return Err(self.generic(format!(
                "Iterations {} is less than the minimum {min} for {constant}",
                credential.iterations
            )));
        }
        let nonce = format!("{}{server_nonce}", client_first.nonce);
        let server_first =
            scram_messages::server_first(&nonce, &credential.salt, credential.iterations);
        let challenge = server_first.clone().into_bytes();
        let exchange = Exchange {
            client_first,
            server_first,
            nonce,
            username,
            credential,
        };
        Ok((
            State::ClientFinal(Box::new(exchange)),
            SaslStep::Challenge(challenge),
        ))
    }

    fn client_final(
        &self,
        token: &[u8],
        exchange: Exchange,
    ) -> Result<(State, SaslStep), SaslFailure> {
        let client_final = ascii_message(token)
            .as_deref()
            .and_then(ClientFinal::parse)
            .ok_or_else(|| {
                let shown = String::from_utf8_lossy(token);
                self.generic(format!(
                    "Invalid SCRAM client final message format: {shown}"
                ))
            })?;
        // Kafka checks only that the echoed nonce ends with the combined
        // one, and never compares the channel binding with the gs2 header:
        // it only enters the AuthMessage, so a mismatch fails the proof
        // only if the client signed something else.
        if !client_final.nonce.ends_with(&exchange.nonce) {
            return Err(self.generic("Invalid client nonce in the final client message."));
        }
        let m = self.mechanism;
        let auth_message = scram_messages::auth_message(
            &exchange.client_first,
            &exchange.server_first,
            &client_final,
        );
        let stored_key = &exchange.credential.stored_key;
        let client_signature = hmac(m, stored_key, &[auth_message.as_bytes()]);
        // A proof of the wrong length makes Kafka's xor throw an
        // IllegalArgumentException, which closes the connection unanswered.
        let client_key = xor(&client_signature, &client_final.proof)
            .ok_or_else(|| SaslFailure::closed("Argument arrays must be of the same length"))?;
        if !constant_time_eq(&hash(m, &client_key), stored_key) {
            return Err(self.generic("Invalid client credentials"));
        }
        let server_signature = hmac(
            m,
            &exchange.credential.server_key,
            &[auth_message.as_bytes()],
        );
        let final_token = format!("v={}", B64_ENCODE.encode(server_signature)).into_bytes();
        let step = SaslStep::Complete {
            authorization_id: exchange.username,
            final_token,
        };
        Ok((State::Complete, step))
    }
}

/// The token as text when Kafka's patterns could match it: they only admit
/// ASCII 0x01-0x7F, so anything else (including bad UTF-8) fails to parse.
fn ascii_message(token: &[u8]) -> Option<String> {
    let ascii = token.iter().all(|b| (0x01..=0x7f).contains(b));
    ascii.then(|| token.iter().map(|&b| char::from(b)).collect())
}

/// `new BigInteger(130, secureRandom).toString(36)`: a uniform 130-bit
/// number in base 36, no leading zeros. None if the OS has no randomness.
pub(super) fn secure_random_string() -> Option<String> {
    const BITS: usize = 130;
    let mut bytes = [0u8; BITS.div_ceil(8)];
    getrandom::fill(&mut bytes).ok()?;
    // Keep the low 130 bits of the big-endian number.
    bytes[0] &= (1u8 << (BITS % 8)) - 1;
    Some(to_base36(&bytes))
}

/// Base-36 digits (0-9a-z) of a big-endian unsigned number.
fn to_base36(big_endian: &[u8]) -> String {
    const DIGITS: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut number = big_endian.to_vec();
    let mut digits = Vec::new();
    while number.iter().any(|&b| b != 0) {
        // Long division by 36, most significant byte first.
        let mut remainder = 0u32;
        for byte in number.iter_mut() {
            let value = (remainder << 8) | u32::from(*byte);
            *byte = (value / 36) as u8;
            remainder = value % 36;
        }
        digits.push(DIGITS[remainder as usize]);
    }
    if digits.is_empty() {
        digits.push(b'0');
    }
    digits.iter().rev().map(|&d| char::from(d)).collect()
}

#[cfg(test)]
#[path = "scram_tests.rs"]
mod tests;
