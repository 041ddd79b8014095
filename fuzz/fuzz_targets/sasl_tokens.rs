//! The SASL servers (`security::sasl`, Kafka's PlainSaslServer and
//! ScramSaslServer) on arbitrary token sequences, plus the JAAS and SCRAM
//! credential parsers on the raw input. An input is
//! `[mechanism: u8]` then tokens `[length: u16 BE][bytes]`; mechanism
//! modulo 3 picks PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512. One user exists:
//! alice / alice-secret. The same tokens also go, as a broker's answers,
//! to the client side (`SaslClient`, what brokers log in to each other
//! with).
#![no_main]
use std::sync::OnceLock;

use kshard::security::sasl::{
    parse_jaas_config, parse_jaas_file, ClientStep, CredentialSource, SaslClient, SaslServer,
    SaslStep, ScramCredential, ScramMechanism, PLAIN,
};
use libfuzzer_sys::fuzz_target;

/// Tokens per input: SCRAM needs two, more probe the finished states.
const TOKENS_MAX: usize = 4;
const USER: &str = "alice";
const PASSWORD: &str = "alice-secret";

struct Alice;

impl CredentialSource for Alice {
    fn plain_password(&self, user: &str) -> Option<String> {
        (user == USER).then(|| PASSWORD.to_string())
    }
    fn scram_credential(&self, user: &str, m: ScramMechanism) -> Option<ScramCredential> {
        // Derived once: 4096 PBKDF2 rounds per input would starve the fuzzer.
        static CREDENTIALS: OnceLock<[ScramCredential; 2]> = OnceLock::new();
        let all = CREDENTIALS.get_or_init(|| {
            ScramMechanism::ALL.map(|m| ScramCredential::from_password(m, PASSWORD, b"salt", 4096))
        });
        (user == USER).then(|| all[usize::from(m == ScramMechanism::Sha512)].clone())
    }
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let _ = parse_jaas_config(&text);
    let _ = parse_jaas_file(&text);
    let _ = ScramCredential::parse(&text);

    let Some((&selector, mut rest)) = data.split_first() else {
        return;
    };
    let mechanism = match selector % 3 {
        0 => PLAIN,
        1 => ScramMechanism::Sha256.name(),
        _ => ScramMechanism::Sha512.name(),
    };
    client_side(mechanism, rest);
    let Some(mut server) = SaslServer::new(mechanism) else {
        panic!("{mechanism} is built in");
    };
    for _ in 0..TOKENS_MAX {
        let Some(token) = next_token(&mut rest) else {
            return;
        };
        if let Ok(SaslStep::Complete { authorization_id, .. }) = server.evaluate(token, &Alice) {
            assert_eq!(authorization_id, USER);
        }
    }
});

/// The tokens as the server's challenges to a client that logged in first.
fn client_side(mechanism: &str, mut rest: &[u8]) {
    let Some(mut client) = SaslClient::new(mechanism, USER, PASSWORD) else {
        panic!("{mechanism} is built in");
    };
    let _first = client.initial_response();
    for _ in 0..TOKENS_MAX {
        let Some(token) = next_token(&mut rest) else {
            return;
        };
        match client.evaluate(token) {
            Ok(ClientStep::Send(_)) => {}
            Ok(ClientStep::Done) | Err(_) => return,
        }
    }
}

/// The next `[length: u16 BE][bytes]` token (cut short at the input's end).
fn next_token<'a>(rest: &mut &'a [u8]) -> Option<&'a [u8]> {
    let (length, tail) = rest.split_first_chunk::<2>()?;
    let length = usize::from(u16::from_be_bytes(*length)).min(tail.len());
    let (token, tail) = tail.split_at(length);
    *rest = tail;
    Some(token)
}
