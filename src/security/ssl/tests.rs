//! Handshake tests for the module mirroring Kafka's `SslFactory` /
//! `DefaultSslEngineFactory`: a rustls client and server pumped in memory.

use super::*;
use rustls::{ClientConfig, ClientConnection, ProtocolVersion, ServerConfig, ServerConnection};
use rustls_pki_types::ServerName;
use std::collections::HashMap;
use std::io::{Read, Write};
use std::sync::Arc;

pub(crate) fn td(name: &str) -> String {
    format!(
        "{}/src/security/ssl/testdata/{name}",
        env!("CARGO_MANIFEST_DIR")
    )
}

fn try_settings(pairs: &[(&str, &str)]) -> Result<SslSettings, SslConfigError> {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    SslSettings::from_lookup(&|k| map.get(k).cloned())
}

fn settings(pairs: &[(&str, &str)]) -> SslSettings {
    try_settings(pairs).unwrap()
}

fn server(pairs: &[(&str, &str)]) -> SslServerContext {
    SslServerContext::new(settings(pairs)).unwrap()
}

const PEM_TYPE: (&str, &str) = ("ssl.keystore.type", "PEM");

/// PEM file key store plus a PEM trust store of the CA, with `extra` on top.
fn pem_server(extra: &[(&str, &str)]) -> SslServerContext {
    let ks = td("server-keystore.pem");
    let ca = td("ca.pem");
    let mut pairs = vec![
        ("ssl.keystore.type", "PEM"),
        ("ssl.keystore.location", ks.as_str()),
        ("ssl.truststore.type", "PEM"),
        ("ssl.truststore.location", ca.as_str()),
    ];
    pairs.extend_from_slice(extra);
    server(&pairs)
}

/// A client trusting the CA and presenting `keystore` (a PEM file) if given.
fn client(keystore: Option<&str>, extra: &[(&str, &str)]) -> Arc<ClientConfig> {
    let ca = td("ca.pem");
    let ks = keystore.map(td);
    let mut pairs = vec![
        ("ssl.truststore.type", "PEM"),
        ("ssl.truststore.location", ca.as_str()),
        ("ssl.keystore.type", "PEM"),
    ];
    if let Some(ks) = &ks {
        pairs.push(("ssl.keystore.location", ks.as_str()));
    }
    pairs.extend_from_slice(extra);
    client_config(&settings(&pairs)).unwrap()
}

fn pump_once(client: &mut ClientConnection, server: &mut ServerConnection) -> Result<(), String> {
    let mut buf = Vec::new();
    client.write_tls(&mut buf).map_err(|e| e.to_string())?;
    server.read_tls(&mut &buf[..]).map_err(|e| e.to_string())?;
    server
        .process_new_packets()
        .map_err(|e| format!("server: {e}"))?;
    buf.clear();
    server.write_tls(&mut buf).map_err(|e| e.to_string())?;
    client.read_tls(&mut &buf[..]).map_err(|e| e.to_string())?;
    client
        .process_new_packets()
        .map_err(|e| format!("client: {e}"))?;
    Ok(())
}

/// Handshake, then one application record client to server, so a client
/// certificate the server refuses after a TLS 1.3 handshake still fails.
fn connect_as(
    sc: Arc<ServerConfig>,
    cc: Arc<ClientConfig>,
    name: &str,
) -> Result<(ClientConnection, ServerConnection), String> {
    let name = ServerName::try_from(name.to_string()).map_err(|e| e.to_string())?;
    let mut c = ClientConnection::new(cc, name).map_err(|e| e.to_string())?;
    let mut s = ServerConnection::new(sc).map_err(|e| e.to_string())?;
    for _ in 0..10 {
        pump_once(&mut c, &mut s)?;
        if !c.is_handshaking() && !s.is_handshaking() {
            break;
        }
    }
    c.writer().write_all(b"ping").map_err(|e| e.to_string())?;
    pump_once(&mut c, &mut s)?;
    let mut got = [0u8; 4];
    s.reader().read_exact(&mut got).map_err(|e| e.to_string())?;
    assert_eq!(&got, b"ping");
    Ok((c, s))
}

fn connect(
    sc: Arc<ServerConfig>,
    cc: Arc<ClientConfig>,
) -> Result<(ClientConnection, ServerConnection), String> {
    connect_as(sc, cc, "localhost")
}

fn principal(ctx: &SslServerContext, s: &ServerConnection) -> String {
    ctx.principal_of(s.peer_certificates()).unwrap().to_string()
}

#[test]
fn pem_inline_key_store() {
    let key = std::fs::read_to_string(td("server.key")).unwrap();
    let chain = std::fs::read_to_string(td("server-chain.pem")).unwrap();
    let ctx = server(&[
        ("ssl.keystore.type", "PEM"),
        ("ssl.keystore.key", &key),
        ("ssl.keystore.certificate.chain", &chain),
    ]);
    let (c, s) = connect(ctx.server_config(), client(None, &[])).unwrap();
    assert_eq!(c.protocol_version(), Some(ProtocolVersion::TLSv1_3));
    assert_eq!(principal(&ctx, &s), "User:ANONYMOUS");
    let other = std::fs::read_to_string(td("alice.key")).unwrap();
    let mismatch = SslServerContext::new(settings(&[
        ("ssl.keystore.type", "PEM"),
        ("ssl.keystore.key", &other),
        ("ssl.keystore.certificate.chain", &chain),
    ]));
    assert_eq!(mismatch.err().unwrap().key, "ssl.keystore.key");
}

#[test]
fn pem_file_key_store_and_inline_trust_store() {
    let ctx = pem_server(&[]);
    connect(ctx.server_config(), client(None, &[])).unwrap();
    let ca = std::fs::read_to_string(td("ca.pem")).unwrap();
    let s = settings(&[
        ("ssl.truststore.type", "PEM"),
        ("ssl.truststore.certificates", &ca),
    ]);
    connect(ctx.server_config(), client_config(&s).unwrap()).unwrap();
}

#[test]
fn encrypted_pem_key_with_key_password() {
    let key = std::fs::read_to_string(td("server-encrypted.key")).unwrap();
    let chain = std::fs::read_to_string(td("server-chain.pem")).unwrap();
    let base = [
        ("ssl.keystore.type", "PEM"),
        ("ssl.keystore.key", key.as_str()),
        ("ssl.keystore.certificate.chain", chain.as_str()),
    ];
    let ctx = server(&[&base[..], &[("ssl.key.password", "keypass")]].concat());
    connect(ctx.server_config(), client(None, &[])).unwrap();
    let wrong = SslServerContext::new(settings(
        &[&base[..], &[("ssl.key.password", "nope")]].concat(),
    ))
    .err()
    .unwrap();
    assert_eq!(wrong.key, "ssl.keystore.key");
    assert!(
        wrong
            .message
            .starts_with("Invalid PEM keystore configs: Private key could not be loaded"),
        "{wrong}"
    );
    let missing = SslServerContext::new(settings(&base)).err().unwrap();
    assert!(
        missing.message.contains("ssl.key.password is not set"),
        "{missing}"
    );
}

#[test]
fn pkcs12_stores_with_required_client_auth() {
    let ks = td("server.p12");
    let ts = td("truststore.p12");
    let ctx = server(&[
        ("ssl.keystore.type", "PKCS12"),
        ("ssl.keystore.location", &ks),
        ("ssl.keystore.password", "storepass"),
        ("ssl.truststore.type", "PKCS12"),
        ("ssl.truststore.location", &ts),
        ("ssl.truststore.password", "trustpass"),
        ("ssl.client.auth", "required"),
    ]);
    let (_, s) = connect(ctx.server_config(), client(Some("alice-keystore.pem"), &[])).unwrap();
    assert_eq!(principal(&ctx, &s), "User:CN=alice,OU=eng,O=kshard");
    assert!(connect(ctx.server_config(), client(None, &[])).is_err());
}

#[test]
fn jks_stores_with_key_password() {
    let ks = td("server.jks");
    let ts = td("truststore.jks");
    let ctx = server(&[
        ("ssl.keystore.location", &ks),
        ("ssl.keystore.password", "storepass"),
        ("ssl.key.password", "keypass"),
        ("ssl.truststore.location", &ts),
        ("ssl.truststore.password", "trustpass"),
        ("ssl.client.auth", "required"),
    ]);
    let (_, s) = connect(ctx.server_config(), client(Some("alice-keystore.pem"), &[])).unwrap();
    assert_eq!(principal(&ctx, &s), "User:CN=alice,OU=eng,O=kshard");
    // Java's JKS type reads PKCS12 files too (keystore.type.compat).
    let p12 = td("server.p12");
    server(&[
        ("ssl.keystore.type", "JKS"),
        ("ssl.keystore.location", &p12),
        ("ssl.keystore.password", "storepass"),
    ]);
    let bad = SslServerContext::new(settings(&[
        ("ssl.keystore.location", &ks),
        ("ssl.keystore.password", "storepass"),
    ]));
    assert!(bad.err().unwrap().message.contains("Cannot recover key"));
}

#[test]
fn required_client_auth_refuses_missing_untrusted_and_expired() {
    let ctx = pem_server(&[("ssl.client.auth", "required")]);
    assert_eq!(ctx.client_auth(), ClientAuth::Required);
    connect(ctx.server_config(), client(Some("alice-keystore.pem"), &[])).unwrap();
    for ks in [
        None,
        Some("untrusted-keystore.pem"),
        Some("expired-keystore.pem"),
    ] {
        let err = connect(ctx.server_config(), client(ks, &[])).unwrap_err();
        assert!(
            err.contains("server:") || err.contains("client:"),
            "{ks:?}: {err}"
        );
    }
    let expired = connect(
        ctx.server_config(),
        client(Some("expired-keystore.pem"), &[]),
    )
    .unwrap_err();
    assert!(expired.contains("certificate expired"), "{expired}");
}

#[test]
fn requested_client_auth_allows_anonymous() {
    let ctx = pem_server(&[("ssl.client.auth", " requested ")]);
    assert_eq!(ctx.client_auth(), ClientAuth::Requested);
    let (_, s) = connect(ctx.server_config(), client(None, &[])).unwrap();
    assert_eq!(principal(&ctx, &s), "User:ANONYMOUS");
    let (_, s) = connect(ctx.server_config(), client(Some("alice-keystore.pem"), &[])).unwrap();
    assert_eq!(principal(&ctx, &s), "User:CN=alice,OU=eng,O=kshard");
    assert!(connect(
        ctx.server_config(),
        client(Some("untrusted-keystore.pem"), &[])
    )
    .is_err());
}

#[test]
fn principal_mapping_rules() {
    let rules = "RULE:^CN=(.*?),OU=(.*?),O=kshard$/$1@$2/U, DEFAULT";
    let ctx = pem_server(&[
        ("ssl.client.auth", "required"),
        ("ssl.principal.mapping.rules", rules),
    ]);
    let (_, s) = connect(ctx.server_config(), client(Some("alice-keystore.pem"), &[])).unwrap();
    assert_eq!(principal(&ctx, &s), "User:ALICE@ENG");
    let strict = pem_server(&[
        ("ssl.client.auth", "required"),
        ("ssl.principal.mapping.rules", "RULE:^CN=(.*?),O=x$/$1/"),
    ]);
    let (_, s) = connect(
        strict.server_config(),
        client(Some("alice-keystore.pem"), &[]),
    )
    .unwrap();
    let err = strict.principal_of(s.peer_certificates()).unwrap_err();
    assert_eq!(err.key, "ssl.principal.mapping.rules");
    assert!(
        err.message
            .contains("No rules apply to CN=alice,OU=eng,O=kshard"),
        "{err}"
    );
    let bad = try_settings(&[("ssl.principal.mapping.rules", "RULE:^CN=(.*)$/$1/Q")]).unwrap_err();
    assert_eq!(
        bad.message,
        "Invalid rule: `RULE:^CN=(.*)$/$1/Q`, unmatched substring: `Q`"
    );
}

#[test]
fn subjects_print_like_x500_principal() {
    let der = |name: &str| {
        pem::certificates(&std::fs::read_to_string(td(name)).unwrap())
            .unwrap()
            .remove(0)
    };
    assert_eq!(
        rfc2253_subject(der("alice.pem").as_ref()).unwrap(),
        "CN=alice,OU=eng,O=kshard"
    );
    assert_eq!(
        rfc2253_subject(der("server.pem").as_ref()).unwrap(),
        "O=kshard,CN=localhost"
    );
    assert_eq!(
        rfc2253_subject(der("ca.pem").as_ref()).unwrap(),
        "CN=kshard test CA"
    );
    assert!(rfc2253_subject(b"\x30\x03\x02\x01").is_err());
    // As Java 17 prints it (see testdata/README).
    let java = concat!(
        r#"2.5.4.12=#0c04426f7373,STREET=Main St,2.5.4.5=#130431323334,"#,
        r#"1.2.840.113549.1.9.1=#1611616c696365406578616d706c652e636f6d,UID=u1+CN=\ \#lead\"q\"\ ,"#,
        r#"OU=a\+b\=c \<d\>\;e\\f,O=Acme\, Inc.,L=Köln,C=US,DC=example,DC=org"#
    );
    assert_eq!(rfc2253_subject(der("tricky.pem").as_ref()).unwrap(), java);
}

#[test]
fn protocol_versions() {
    let tls12 = [("ssl.enabled.protocols", "TLSv1.2")];
    let tls13 = [("ssl.enabled.protocols", "TLSv1.3")];
    let (c, _) = connect(pem_server(&tls12).server_config(), client(None, &[])).unwrap();
    assert_eq!(c.protocol_version(), Some(ProtocolVersion::TLSv1_2));
    let (c, _) = connect(pem_server(&tls13).server_config(), client(None, &tls13)).unwrap();
    assert_eq!(c.protocol_version(), Some(ProtocolVersion::TLSv1_3));
    assert!(connect(pem_server(&tls12).server_config(), client(None, &tls13)).is_err());
    let old = try_settings(&[("ssl.enabled.protocols", "TLSv1.1,TLSv1.2")]).unwrap_err();
    assert_eq!(old.key, "ssl.enabled.protocols");
    assert!(
        old.message
            .contains("rustls offers only TLSv1.2 and TLSv1.3"),
        "{old}"
    );
    assert!(try_settings(&[("ssl.enabled.protocols", "TLSv9")]).is_err());
}

#[test]
fn cipher_suites() {
    let suites = [
        ("ssl.enabled.protocols", "TLSv1.2"),
        (
            "ssl.cipher.suites",
            "TLS_RSA_WITH_AES_128_CBC_SHA, TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
        ),
    ];
    let (c, _) = connect(pem_server(&suites).server_config(), client(None, &[])).unwrap();
    let suite = c.negotiated_cipher_suite().map(|s| u16::from(s.suite()));
    assert_eq!(suite, Some(0xc02f));
    let unknown = try_settings(&[("ssl.cipher.suites", "NOT_A_SUITE")]).unwrap_err();
    assert_eq!(
        (unknown.key.as_str(), unknown.message.as_str()),
        ("ssl.cipher.suites", "Unsupported CipherSuite: NOT_A_SUITE")
    );
    let mismatch = [
        ("ssl.enabled.protocols", "TLSv1.2"),
        ("ssl.cipher.suites", "TLS_AES_128_GCM_SHA256"),
    ];
    assert_eq!(
        try_settings(&mismatch).unwrap_err().key,
        "ssl.cipher.suites"
    );
}

#[test]
fn host_name_verification() {
    let ctx = pem_server(&[]);
    assert!(connect_as(ctx.server_config(), client(None, &[]), "broker.example.com").is_err());
    let off = client(None, &[("ssl.endpoint.identification.algorithm", "")]);
    connect_as(ctx.server_config(), off.clone(), "broker.example.com").unwrap();
    connect_as(ctx.server_config(), client(None, &[]), "127.0.0.1").unwrap();
    // Host name checks off still verify the chain.
    let rogue = server(&[
        PEM_TYPE,
        ("ssl.keystore.location", &td("untrusted-keystore.pem")),
    ]);
    assert!(connect_as(rogue.server_config(), off, "localhost").is_err());
}

#[test]
fn kafka_validation_messages() {
    type Case<'a> = (&'a [(&'a str, &'a str)], &'a str, &'a str);
    let cases: &[Case] = &[
        (&[("ssl.keystore.type", "PEM"), ("ssl.keystore.key", "k")], "ssl.keystore.certificate.chain", "SSL private key is specified, but certificate chain is not specified."),
        (&[("ssl.keystore.key", "k"), ("ssl.keystore.certificate.chain", "c")], "ssl.keystore.key", "SSL private key can be specified only for PEM, but key store type is JKS."),
        (&[("ssl.keystore.type", "PEM"), ("ssl.keystore.key", "k"), ("ssl.keystore.certificate.chain", "c"), ("ssl.keystore.password", "p")], "ssl.keystore.password", "SSL key store password cannot be specified with PEM format, only key password may be specified."),
        (&[("ssl.keystore.type", "PEM"), ("ssl.keystore.key", "k"), ("ssl.keystore.certificate.chain", "c"), ("ssl.keystore.location", "l")], "ssl.keystore.location", "Both SSL key store location and separate private key are specified."),
        (&[("ssl.keystore.certificate.chain", "c")], "ssl.keystore.key", "SSL certificate chain is specified, but private key is not specified"),
        (&[("ssl.keystore.location", "l")], "ssl.keystore.password", "SSL key store is specified, but key store password is not specified."),
        (&[("ssl.keystore.password", "p")], "ssl.keystore.location", "SSL key store is not specified, but key store password is specified."),
        (&[("ssl.truststore.certificates", "c")], "ssl.truststore.certificates", "SSL trust store certs can be specified only for PEM, but trust store type is JKS."),
        (&[("ssl.truststore.type", "PEM"), ("ssl.truststore.location", "l"), ("ssl.truststore.password", "p")], "ssl.truststore.password", "SSL trust store password cannot be specified for PEM format."),
        (&[("ssl.truststore.password", "p")], "ssl.truststore.location", "SSL trust store is not specified, but trust store password is specified."),
        (&[("ssl.protocol", "TLSv9")], "ssl.protocol", "TLSv9 SSLContext not available"),
        (&[("ssl.allow.dn.changes", "yes")], "ssl.allow.dn.changes", "Invalid value yes for configuration ssl.allow.dn.changes: Expected value to be either true or false"),
        (&[("ssl.client.auth", "maybe")], "ssl.client.auth", "Invalid value maybe for configuration ssl.client.auth: String must be one of: required, requested, none"),
        (&[("ssl.client.auth", "REQUIRED")], "ssl.client.auth", "Invalid value REQUIRED for configuration ssl.client.auth: String must be one of: required, requested, none"),
    ];
    for (pairs, key, message) in cases {
        let err = try_settings(pairs).unwrap_err();
        assert_eq!((err.key.as_str(), err.message.as_str()), (*key, *message));
    }
    let no_trust = SslServerContext::new(settings(&[
        PEM_TYPE,
        ("ssl.keystore.location", &td("server-keystore.pem")),
        ("ssl.client.auth", "required"),
    ]));
    assert_eq!(no_trust.err().unwrap().key, "ssl.truststore.location");
    assert_eq!(
        SslServerContext::new(settings(&[])).err().unwrap().key,
        "ssl.keystore.location"
    );
}

#[test]
fn shared_across_shards() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<SslServerContext>();
    send_sync::<SslSettings>();
    let no_trust = client_config(&settings(&[])).err().unwrap();
    assert_eq!(no_trust.key, "ssl.truststore.location");
}

/// A scratch directory removed on drop.
struct Scratch(std::path::PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("kshard-ssl-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    fn put(&self, name: &str, data: &[u8]) -> String {
        let path = self.0.join(name);
        std::fs::write(&path, data).unwrap();
        path.display().to_string()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn garbage_and_truncated_stores_are_errors() {
    let dir = Scratch::new("garbage");
    let jks = std::fs::read(td("server.jks")).unwrap();
    let p12 = std::fs::read(td("server.p12")).unwrap();
    let pem = std::fs::read(td("server-keystore.pem")).unwrap();
    let cases = [
        ("JKS", &jks[..jks.len() - 7], Some("storepass")),
        ("JKS", &jks[..jks.len() / 3], Some("storepass")),
        ("PKCS12", &p12[..p12.len() / 2], Some("storepass")),
        (
            "PKCS12",
            b"\x30\x82\xff\xff garbage".as_slice(),
            Some("storepass"),
        ),
        ("JKS", b"".as_slice(), Some("storepass")),
        ("PEM", &pem[..pem.len() / 2], None),
        ("PEM", b"\xff\xfe not text".as_slice(), None),
        ("JCEKS", &jks[..], Some("storepass")),
    ];
    for (i, (store_type, data, password)) in cases.iter().enumerate() {
        let path = dir.put(&format!("store{i}"), data);
        let mut pairs = vec![
            ("ssl.keystore.type", *store_type),
            ("ssl.keystore.location", path.as_str()),
        ];
        if let Some(p) = password {
            pairs.push(("ssl.keystore.password", p));
        }
        let err = SslServerContext::new(settings(&pairs)).err().unwrap();
        assert_eq!(err.key, "ssl.keystore.location", "{i}: {err}");
        assert!(err.message.starts_with("Failed to load"), "{i}: {err}");
    }
    let missing = SslServerContext::new(settings(&[
        PEM_TYPE,
        ("ssl.keystore.location", "/nonexistent/x.pem"),
    ]));
    assert!(missing
        .err()
        .unwrap()
        .message
        .starts_with("Failed to load PEM SSL keystore /nonexistent/x.pem"));
}

#[test]
fn damaged_pkcs12_stores_do_not_panic() {
    let p12 = std::fs::read(td("server.p12")).unwrap();
    for i in (0..p12.len()).step_by(97) {
        let mut damaged = p12.clone();
        damaged[i] ^= 0x5a;
        assert!(
            pkcs12::load_key(&damaged, "storepass", None).is_err(),
            "{i}"
        );
        let _ = pkcs12::load_trust(&p12[..i], Some("storepass"));
    }
}

#[test]
fn reload_after_replacing_files() {
    let dir = Scratch::new("reload");
    let good = std::fs::read(td("server-keystore.pem")).unwrap();
    let path = dir.put("keystore.pem", &good);
    let ctx = server(&[
        ("ssl.keystore.type", "PEM"),
        ("ssl.keystore.location", &path),
    ]);
    let first = ctx.server_config();
    assert_eq!(ctx.reload_if_changed(), Ok(false));

    std::fs::remove_file(&path).unwrap();
    assert_eq!(
        ctx.reload_if_changed(),
        Ok(false),
        "a missing file is not a change"
    );
    dir.put("keystore.pem", b"-----BEGIN CERTIFICATE-----\ntruncated");
    assert_eq!(
        ctx.reload_if_changed().unwrap_err().key,
        "ssl.keystore.location"
    );
    assert_eq!(
        ctx.reload_if_changed(),
        Ok(false),
        "a broken file is reported once"
    );
    assert!(Arc::ptr_eq(&first, &ctx.server_config()));
    connect(ctx.server_config(), client(None, &[])).unwrap();

    // A certificate with another subject is refused, as SslFactory refuses it.
    dir.put(
        "keystore.pem",
        &std::fs::read(td("alice-keystore.pem")).unwrap(),
    );
    let changed = ctx.reload_if_changed().unwrap_err();
    assert!(
        changed
            .message
            .starts_with("Keystore DistinguishedName does not match"),
        "{changed}"
    );

    let relaxed = server(&[
        ("ssl.keystore.type", "PEM"),
        ("ssl.keystore.location", &path),
        ("ssl.allow.dn.changes", "TRUE"),
        ("ssl.allow.san.changes", "true"),
    ]);
    dir.put("keystore.pem", &good);
    assert_eq!(
        relaxed.reload_if_changed(),
        Ok(true),
        "the DN may change when allowed"
    );

    let mut renewed = good.clone();
    renewed.extend_from_slice(b"\n");
    dir.put("keystore.pem", &renewed);
    assert_eq!(ctx.reload_if_changed(), Ok(true));
    assert!(!Arc::ptr_eq(&first, &ctx.server_config()));
    connect(ctx.server_config(), client(None, &[])).unwrap();
    assert_eq!(ctx.reload_if_changed(), Ok(false));
}

#[test]
fn reload_watches_the_trust_store() {
    let dir = Scratch::new("trust");
    let ks = td("server-keystore.pem");
    let ca = dir.put("trust.pem", &std::fs::read(td("untrusted.pem")).unwrap());
    let pairs = [
        ("ssl.keystore.type", "PEM"),
        ("ssl.keystore.location", ks.as_str()),
        ("ssl.truststore.type", "PEM"),
        ("ssl.truststore.location", ca.as_str()),
        ("ssl.client.auth", "required"),
    ];
    let ctx = server(&pairs);
    assert!(connect(ctx.server_config(), client(Some("alice-keystore.pem"), &[])).is_err());
    dir.put("trust.pem", &std::fs::read(td("ca.pem")).unwrap());
    assert_eq!(ctx.reload_if_changed(), Ok(true));
    connect(ctx.server_config(), client(Some("alice-keystore.pem"), &[])).unwrap();
}
