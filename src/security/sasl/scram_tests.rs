//! Tests of `ScramSaslServer`'s behaviour, with a small SCRAM client.

use std::collections::BTreeMap;

use base64::Engine;

use super::*;
use crate::security::sasl::scram_credential::{client_key, salted_password, B64_DECODE_LENIENT};
use crate::security::sasl::{SaslServer, PLAIN};

const ITERATIONS: i32 = 4096;
const SALT: &[u8] = b"kshard-test-salt";

/// Users by name with their password; SCRAM credentials derive from it.
struct Users {
    passwords: BTreeMap<&'static str, &'static str>,
    salt: Vec<u8>,
    iterations: i32,
}

impl Users {
    fn new(users: &[(&'static str, &'static str)]) -> Self {
        Users {
            passwords: users.iter().copied().collect(),
            salt: SALT.to_vec(),
            iterations: ITERATIONS,
        }
    }
}

impl CredentialSource for Users {
    fn plain_password(&self, user: &str) -> Option<String> {
        self.passwords.get(user).map(|p| p.to_string())
    }
    fn scram_credential(&self, user: &str, m: ScramMechanism) -> Option<ScramCredential> {
        let password = self.passwords.get(user)?;
        Some(ScramCredential::from_password(
            m,
            password,
            &self.salt,
            self.iterations,
        ))
    }
}

/// The client side of RFC 5802, as Kafka's ScramSaslClient computes it.
struct Client {
    m: ScramMechanism,
    password: &'static str,
    client_first_bare: String,
}

impl Client {
    fn new(m: ScramMechanism, sasl_name: &str, password: &'static str, nonce: &str) -> Self {
        Client {
            m,
            password,
            client_first_bare: format!("n={sasl_name},r={nonce}"),
        }
    }

    fn first(&self, gs2_header: &str) -> Vec<u8> {
        format!("{gs2_header}{}", self.client_first_bare).into_bytes()
    }

    /// The client-final message for `server_first`, signed over channel
    /// binding `c` (base64 text).
    fn last(&self, server_first: &[u8], c: &str) -> String {
        let server_first = std::str::from_utf8(server_first).expect("ASCII");
        let field = |prefix: &str| {
            let f = server_first.split(',').find_map(|f| f.strip_prefix(prefix));
            f.expect("field").to_string()
        };
        let nonce = field("r=");
        let salt = B64_DECODE_LENIENT.decode(field("s=")).expect("salt");
        let iterations: i32 = field("i=").parse().expect("iterations");
        let without_proof = format!("c={c},r={nonce}");
        let auth = format!("{},{server_first},{without_proof}", self.client_first_bare);
        let salted = salted_password(self.m, self.password, &salt, iterations);
        let key = client_key(self.m, &salted);
        let signature = hmac(self.m, &hash(self.m, &key), &[auth.as_bytes()]);
        let proof = xor(&key, &signature).expect("same length");
        format!("{without_proof},p={}", B64_ENCODE.encode(proof))
    }
}

fn server(m: ScramMechanism) -> ScramServer {
    ScramServer::new(m, false)
}

fn challenge(step: Result<SaslStep, SaslFailure>) -> Vec<u8> {
    match step {
        Ok(SaslStep::Challenge(bytes)) => bytes,
        other => panic!("expected a challenge, got {other:?}"),
    }
}

fn generic_failure(step: Result<SaslStep, SaslFailure>, m: ScramMechanism, detail: &str) {
    let failure = step.expect_err("should fail");
    let expected = format!(
        "Authentication failed during authentication due to invalid credentials with SASL mechanism {}",
        m.name()
    );
    assert_eq!(failure.message, expected);
    assert_eq!(failure.detail, detail);
    assert!(!failure.close_without_response);
}

#[test]
fn rfc7677_example() {
    let users = Users {
        passwords: [("user", "pencil")].into_iter().collect(),
        salt: B64_DECODE_LENIENT
            .decode("W22ZaJ0SNY7soEsUEjb6gQ==")
            .expect("salt"),
        iterations: 4096,
    };
    let mut s = ScramServer {
        fixed_server_nonce: Some("%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0".into()),
        ..server(ScramMechanism::Sha256)
    };
    let first = s.evaluate(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO", &users);
    assert_eq!(
        challenge(first),
        b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    );
    let last = b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,\
p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
    let done = s.evaluate(last, &users);
    assert_eq!(
        done,
        Ok(SaslStep::Complete {
            authorization_id: "user".into(),
            final_token: b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=".to_vec(),
        })
    );
    let again = s.evaluate(last, &users).expect_err("complete");
    assert!(again.close_without_response);
    assert_eq!(
        again.message,
        "Unexpected challenge in Sasl server state COMPLETE"
    );
}

#[test]
fn sha512_round_trip_with_authzid_and_encoded_name() {
    let m = ScramMechanism::Sha512;
    let users = Users::new(&[("a,b=c", "secret")]);
    let client = Client::new(m, "a=2Cb=3Dc", "secret", "clientnonce");
    let mut s = SaslServer::Scram(server(m));
    let first = challenge(s.evaluate(&client.first("n,,"), &users));
    assert!(first.starts_with(b"r=clientnonce"));
    let signature = match s.evaluate(client.last(&first, "biws").as_bytes(), &users) {
        Ok(SaslStep::Complete {
            authorization_id,
            final_token,
        }) => {
            assert_eq!(authorization_id, "a,b=c");
            final_token
        }
        other => panic!("expected completion, got {other:?}"),
    };
    assert!(signature.starts_with(b"v="));
    // A name may repeat itself as the authzid.
    let users = Users::new(&[("alice", "secret")]);
    let client = Client::new(m, "alice", "secret", "n2");
    let mut s = server(m);
    let first = challenge(s.evaluate(&client.first("n,a=alice,"), &users));
    let done = s.evaluate(client.last(&first, "bixhPWFsaWNlLA==").as_bytes(), &users);
    assert!(matches!(done, Ok(SaslStep::Complete { .. })));
}

#[test]
fn wrong_password_and_unknown_user_fail_alike() {
    let m = ScramMechanism::Sha256;
    let users = Users::new(&[("alice", "secret")]);
    let client = Client::new(m, "alice", "wrong", "n1");
    let mut s = server(m);
    let first = challenge(s.evaluate(&client.first("n,,"), &users));
    let last = client.last(&first, "biws");
    generic_failure(
        s.evaluate(last.as_bytes(), &users),
        m,
        "Invalid client credentials",
    );
    assert!(s
        .evaluate(last.as_bytes(), &users)
        .is_err_and(|f| f.close_without_response));

    let detail = "Authentication failed: Invalid user credentials";
    generic_failure(server(m).evaluate(b"n,,n=bob,r=n1", &users), m, detail);
}

#[test]
fn wrong_nonce_fails() {
    let m = ScramMechanism::Sha256;
    let users = Users::new(&[("alice", "secret")]);
    let client = Client::new(m, "alice", "secret", "n1");
    let mut s = server(m);
    let first = challenge(s.evaluate(&client.first("n,,"), &users));
    let forged = client.last(b"r=n1other,s=AA==,i=4096", "biws");
    let detail = "Invalid client nonce in the final client message.";
    generic_failure(s.evaluate(forged.as_bytes(), &users), m, detail);
    assert!(!first.is_empty());
}

#[test]
fn channel_binding_is_only_signed_not_compared() {
    let m = ScramMechanism::Sha256;
    let users = Users::new(&[("alice", "secret")]);
    let client = Client::new(m, "alice", "secret", "n1");
    // A binding other than the gs2 header's, signed consistently: Kafka
    // accepts it (it never compares the two).
    let mut s = server(m);
    let first = challenge(s.evaluate(&client.first("n,,"), &users));
    let other = s.evaluate(client.last(&first, "eSws").as_bytes(), &users);
    assert!(matches!(other, Ok(SaslStep::Complete { .. })));
    // Changed after signing, it breaks the proof.
    let mut s = server(m);
    let first = challenge(s.evaluate(&client.first("n,,"), &users));
    let tampered = client.last(&first, "biws").replacen("c=biws", "c=eSws", 1);
    generic_failure(
        s.evaluate(tampered.as_bytes(), &users),
        m,
        "Invalid client credentials",
    );
}

#[test]
fn authzid_mismatch_is_reported_to_the_client() {
    let users = Users::new(&[("alice", "secret")]);
    let failure = server(ScramMechanism::Sha256)
        .evaluate(b"n,a=bob,n=alice,r=n1", &users)
        .expect_err("mismatch");
    assert_eq!(
        failure.message,
        "Authentication failed: Client requested an authorization id that is different from username"
    );
}

#[test]
fn extensions_tokens_and_weak_credentials() {
    let m = ScramMechanism::Sha512;
    let users = Users::new(&[("alice", "secret")]);
    // Unknown extensions are ignored; they stay in the AuthMessage.
    let client = Client::new(m, "alice", "secret", "n1,foo=bar");
    let mut s = server(m);
    let first = challenge(s.evaluate(&client.first("n,,"), &users));
    let done = s.evaluate(client.last(&first, "biws").as_bytes(), &users);
    assert!(matches!(done, Ok(SaslStep::Complete { .. })));
    // Delegation tokens do not exist here.
    let detail = "Token Authentication failed: Invalid tokenId : alice";
    let token = server(m).evaluate(b"n,,n=alice,r=n1,tokenauth=true", &users);
    generic_failure(token, m, detail);
    let weak = Users {
        iterations: 4095,
        ..Users::new(&[("alice", "secret")])
    };
    let detail = "Iterations 4095 is less than the minimum 4096 for SCRAM_SHA_512";
    generic_failure(server(m).evaluate(b"n,,n=alice,r=n1", &weak), m, detail);
}

#[test]
fn malformed_messages_fail_without_panicking() {
    let m = ScramMechanism::Sha256;
    let users = Users::new(&[("alice", "secret")]);
    for token in [
        &b""[..],
        b"\xff\xfe",
        b"n,,n=alice",
        b"n,,n=alice,r=\x80",
        b"y,,n=alice,r=a",
    ] {
        let detail = format!(
            "Invalid SCRAM client first message format: {}",
            String::from_utf8_lossy(token)
        );
        generic_failure(server(m).evaluate(token, &users), m, &detail);
    }
    for token in [&b""[..], b"c=biws,r=n1", b"c=biws,r=n1,p=!!!!", b"\0"] {
        let mut s = server(m);
        challenge(s.evaluate(b"n,,n=alice,r=n1", &users));
        let detail = format!(
            "Invalid SCRAM client final message format: {}",
            String::from_utf8_lossy(token)
        );
        generic_failure(s.evaluate(token, &users), m, &detail);
        let after = s.evaluate(token, &users).expect_err("failed");
        assert_eq!(
            after.message,
            "Unexpected challenge in Sasl server state FAILED"
        );
    }
    // A proof of the wrong length: Kafka closes the connection unanswered.
    let mut s = server(m);
    let first = challenge(s.evaluate(b"n,,n=alice,r=n1", &users));
    let first = String::from_utf8(first).expect("ASCII");
    let nonce = first.split(',').next().unwrap_or_default();
    let short = format!("c=biws,{nonce},p=AAAA");
    assert!(s
        .evaluate(short.as_bytes(), &users)
        .is_err_and(|f| f.close_without_response));
}

#[test]
fn reauthentication_and_plain_through_the_enum() {
    let users = Users::new(&[("alice", "secret")]);
    let mut s = SaslServer::new_reauthentication("SCRAM-SHA-256").expect("scram");
    let failure = s.evaluate(b"n,,n=bob,r=n1", &users).expect_err("unknown");
    assert!(failure
        .message
        .contains("during re-authentication due to invalid credentials"));
    let mut plain = SaslServer::new(PLAIN).expect("plain");
    let done = plain.evaluate(b"\0alice\0secret", &users);
    assert!(
        matches!(done, Ok(SaslStep::Complete { authorization_id, .. }) if authorization_id == "alice")
    );
}

#[test]
fn server_nonces_are_base36_130_bit_numbers() {
    assert_eq!(to_base36(&[0]), "0");
    assert_eq!(to_base36(&[35]), "z");
    assert_eq!(to_base36(&[0, 36]), "10");
    let mut max = [0xffu8; 17];
    max[0] = 0x03;
    assert_eq!(to_base36(&max), "1omfro7zwmumr3umxudzyj6scf");
    let a = secure_random_string().expect("randomness");
    let b = secure_random_string().expect("randomness");
    assert_ne!(a, b);
    assert!(
        a.len() <= 26
            && a.bytes()
                .all(|c| c.is_ascii_digit() || c.is_ascii_lowercase())
    );
}
