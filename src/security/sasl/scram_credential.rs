//! Kafka's `ScramCredential`, its config-string form
//! (`ScramCredentialUtils.credentialToString` / `credentialFromString`) and
//! the key derivations of `ScramFormatter` (RFC 5802 section 3).

use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
use base64::engine::DecodePaddingMode;
use base64::{alphabet, Engine};
use hmac::{Hmac, KeyInit, Mac};
use sha2::{Digest, Sha256, Sha512};

use super::ScramMechanism;

/// `java.util.Base64.getEncoder()`: standard alphabet, padded.
pub(crate) const B64_ENCODE: GeneralPurpose = base64::engine::general_purpose::STANDARD;

/// `java.util.Base64.getDecoder()`: padding optional, nonzero trailing bits
/// ignored.
pub(crate) const B64_DECODE_LENIENT: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new()
        .with_decode_padding_mode(DecodePaddingMode::Indifferent)
        .with_decode_allow_trailing_bits(true),
);

const SALT: &str = "salt";
const STORED_KEY: &str = "stored_key";
const SERVER_KEY: &str = "server_key";
const ITERATIONS: &str = "iterations";

/// What a broker stores per user and mechanism (never the password).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScramCredential {
    pub salt: Vec<u8>,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
    pub iterations: i32,
}

impl ScramCredential {
    /// `salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=N`.
    pub fn to_config_string(&self) -> String {
        format!(
            "{SALT}={},{STORED_KEY}={},{SERVER_KEY}={},{ITERATIONS}={}",
            B64_ENCODE.encode(&self.salt),
            B64_ENCODE.encode(&self.stored_key),
            B64_ENCODE.encode(&self.server_key),
            self.iterations
        )
    }

    /// `credentialFromString`: exactly the four keys (a repeated key counts
    /// once, the last value wins), each `key=value`; None where Kafka throws.
    pub fn parse(text: &str) -> Option<ScramCredential> {
        let mut salt = None;
        let mut stored_key = None;
        let mut server_key = None;
        let mut iterations = None;
        // Java's String.split drops trailing empty pieces.
        for token in text.split(',').rev().skip_while(|t| t.is_empty()) {
            let (key, value) = token.split_once('=')?;
            let slot = match key {
                "" => return None,
                SALT => &mut salt,
                STORED_KEY => &mut stored_key,
                SERVER_KEY => &mut server_key,
                ITERATIONS => &mut iterations,
                _ => return None,
            };
            // Walking backwards, the first value seen is Java's last put.
            slot.get_or_insert(value);
        }
        Some(ScramCredential {
            salt: B64_DECODE_LENIENT.decode(salt?).ok()?,
            stored_key: B64_DECODE_LENIENT.decode(stored_key?).ok()?,
            server_key: B64_DECODE_LENIENT.decode(server_key?).ok()?,
            iterations: iterations?.parse().ok()?,
        })
    }

    /// `ScramFormatter.generateCredential(salt, saltedPassword, iterations)`:
    /// what a broker stores for AlterUserScramCredentials.
    pub fn from_salted_password(
        m: ScramMechanism,
        salt: &[u8],
        salted_password: &[u8],
        iterations: i32,
    ) -> ScramCredential {
        ScramCredential {
            salt: salt.to_vec(),
            stored_key: hash(m, &client_key(m, salted_password)),
            server_key: server_key(m, salted_password),
            iterations,
        }
    }

    /// Hi(password, salt, i) and then [`Self::from_salted_password`].
    pub fn from_password(
        m: ScramMechanism,
        password: &str,
        salt: &[u8],
        iterations: i32,
    ) -> ScramCredential {
        let salted = salted_password(m, password, salt, iterations);
        Self::from_salted_password(m, salt, &salted, iterations)
    }
}

/// HMAC keyed by `key` over the concatenation of `parts`.
pub(crate) fn hmac(m: ScramMechanism, key: &[u8], parts: &[&[u8]]) -> Vec<u8> {
    fn run<M: Mac + KeyInit>(key: &[u8], parts: &[&[u8]]) -> Vec<u8> {
        // HMAC takes keys of any length, so this never fails.
        let Ok(mut mac) = <M as KeyInit>::new_from_slice(key) else {
            return Vec::new();
        };
        for part in parts {
            mac.update(part);
        }
        mac.finalize().into_bytes().to_vec()
    }
    match m {
        ScramMechanism::Sha256 => run::<Hmac<Sha256>>(key, parts),
        ScramMechanism::Sha512 => run::<Hmac<Sha512>>(key, parts),
    }
}

pub(crate) fn hash(m: ScramMechanism, data: &[u8]) -> Vec<u8> {
    match m {
        ScramMechanism::Sha256 => Sha256::digest(data).to_vec(),
        ScramMechanism::Sha512 => Sha512::digest(data).to_vec(),
    }
}

/// Hi(): PBKDF2 with the mechanism's HMAC, one output block. Kafka's loop
/// runs at least once, so iterations below 1 count as 1.
pub(crate) fn salted_password(
    m: ScramMechanism,
    password: &str,
    salt: &[u8],
    iterations: i32,
) -> Vec<u8> {
    let rounds = u32::try_from(iterations).unwrap_or(1).max(1);
    let password = password.as_bytes();
    match m {
        ScramMechanism::Sha256 => {
            let mut out = [0u8; 32];
            pbkdf2::pbkdf2_hmac::<Sha256>(password, salt, rounds, &mut out);
            out.to_vec()
        }
        ScramMechanism::Sha512 => {
            let mut out = [0u8; 64];
            pbkdf2::pbkdf2_hmac::<Sha512>(password, salt, rounds, &mut out);
            out.to_vec()
        }
    }
}

pub(crate) fn client_key(m: ScramMechanism, salted_password: &[u8]) -> Vec<u8> {
    hmac(m, salted_password, &[b"Client Key"])
}

pub(crate) fn server_key(m: ScramMechanism, salted_password: &[u8]) -> Vec<u8> {
    hmac(m, salted_password, &[b"Server Key"])
}

/// Byte-wise XOR; None where Kafka's `xor` throws (lengths differ).
pub(crate) fn xor(a: &[u8], b: &[u8]) -> Option<Vec<u8>> {
    (a.len() == b.len()).then(|| a.iter().zip(b).map(|(x, y)| x ^ y).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> ScramCredential {
        ScramCredential::from_password(ScramMechanism::Sha256, "pencil", b"salty", 4096)
    }

    #[test]
    fn config_string_round_trip() {
        let credential = sample();
        let text = credential.to_config_string();
        assert!(text.starts_with("salt=c2FsdHk=,stored_key="));
        assert!(text.ends_with(",iterations=4096"));
        assert_eq!(ScramCredential::parse(&text), Some(credential.clone()));
        // Java's split drops trailing empties; key order is free.
        let reordered = format!(
            "iterations=4096,server_key={},stored_key={},salt=c2FsdHk=,,",
            B64_ENCODE.encode(&credential.server_key),
            B64_ENCODE.encode(&credential.stored_key)
        );
        assert_eq!(ScramCredential::parse(&reordered), Some(credential));
    }

    #[test]
    fn bad_config_strings() {
        for text in [
            "",
            "salt=c2FsdHk=",
            "salt=c2FsdHk=,stored_key=AA==,server_key=AA==,iterations=x",
            "salt=c2FsdHk=,stored_key=AA==,server_key=AA==,iterations=1,extra=1",
            "salt=c2FsdHk=,stored_key=AA==,server_key=AA==,,iterations=1",
            "salt=c2FsdHk=,stored_key=A!==,server_key=AA==,iterations=1",
            "=x,stored_key=AA==,server_key=AA==,iterations=1",
        ] {
            assert_eq!(ScramCredential::parse(text), None, "{text}");
        }
        let parsed = ScramCredential::parse("salt=,stored_key=AA,server_key=AA==,iterations=-1");
        assert_eq!(parsed.map(|c| (c.salt.len(), c.iterations)), Some((0, -1)));
    }

    #[test]
    fn salted_password_path_matches_password_path() {
        for m in ScramMechanism::ALL {
            let salted = salted_password(m, "pencil", b"NaCl", 4096);
            let direct = ScramCredential::from_password(m, "pencil", b"NaCl", 4096);
            let upserted = ScramCredential::from_salted_password(m, b"NaCl", &salted, 4096);
            assert_eq!(direct, upserted);
            assert_eq!(direct.stored_key.len(), salted.len());
        }
    }

    #[test]
    fn xor_needs_equal_lengths() {
        assert_eq!(xor(b"ab", b"a"), None);
        assert_eq!(xor(&[1, 2], &[3, 2]), Some(vec![2, 0]));
        // Hi() runs at least once, as Kafka's loop does.
        let m = ScramMechanism::Sha256;
        assert_eq!(
            salted_password(m, "p", b"s", 0),
            salted_password(m, "p", b"s", 1)
        );
    }
}
