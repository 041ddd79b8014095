//! PEM key and trust stores as Kafka's `DefaultSslEngineFactory.PemStore`
//! and `PemParser` read them: a label containing `CERTIFICATE` or
//! `PRIVATE KEY`, optional `Name: value` header lines, base64 body.

use base64::Engine;
use rustls_pki_types::{
    CertificateDer, PrivateKeyDer, PrivatePkcs1KeyDer, PrivatePkcs8KeyDer, PrivateSec1KeyDer,
};
use x509_parser::prelude::{FromDer, X509Certificate};

/// One `-----BEGIN label-----` ... `-----END label-----` section.
struct Entry {
    label: String,
    der: Vec<u8>,
}

/// Every section, found in the text as a whole (Kafka's PemParser matches
/// `-----BEGIN x-----(.*?)-----END x-----` across lines), so an inline
/// value whose line breaks a properties file turned into spaces still
/// parses.
fn entries(text: &str) -> Result<Vec<Entry>, String> {
    const BEGIN: &str = "-----BEGIN ";
    const DASHES: &str = "-----";
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find(BEGIN) {
        let after = &rest[at + BEGIN.len()..];
        let Some(label_end) = after.find(DASHES) else {
            return Err("PEM BEGIN line is not terminated by -----".to_string());
        };
        let label = after[..label_end].trim().to_string();
        let body_and_rest = &after[label_end + DASHES.len()..];
        let end_marker = format!("-----END {label}-----");
        let Some(body_end) = body_and_rest.find(&end_marker) else {
            return Err(format!("PEM section BEGIN {label} has no END line"));
        };
        let body = &body_and_rest[..body_end];
        if body.contains("Proc-Type:") && body.contains("ENCRYPTED") {
            return Err(format!(
                "Legacy encrypted PEM {label} (Proc-Type: 4,ENCRYPTED) is not supported: convert it to PKCS#8 (openssl pkcs8 -topk8)"
            ));
        }
        // Header lines (`Name: value`) are not part of the base64 body.
        let encoded: String = body
            .lines()
            .filter(|line| !line.contains(':'))
            .flat_map(|line| line.chars().filter(|c| !c.is_whitespace()))
            .collect();
        let der = base64::engine::general_purpose::STANDARD
            .decode(encoded.as_bytes())
            .map_err(|e| format!("Invalid base64 in PEM {label} entry: {e}"))?;
        out.push(Entry { label, der });
        rest = &body_and_rest[body_end + end_marker.len()..];
    }
    Ok(out)
}

/// PemStore.certs: every CERTIFICATE entry, each a parseable X.509 certificate.
pub(crate) fn certificates(text: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs: Vec<CertificateDer<'static>> = entries(text)?
        .into_iter()
        .filter(|e| e.label.contains("CERTIFICATE"))
        .map(|e| CertificateDer::from(e.der))
        .collect();
    if certs.is_empty() {
        return Err("No matching CERTIFICATE entries in PEM file".to_string());
    }
    for (i, cert) in certs.iter().enumerate() {
        X509Certificate::from_der(cert.as_ref())
            .map_err(|e| format!("Invalid certificate {i} in PEM: {e}"))?;
    }
    Ok(certs)
}

/// PemStore.privateKey: exactly one PRIVATE KEY entry, encrypted when (and
/// only when) ssl.key.password is set. PKCS#1 and SEC1 keys are accepted too.
pub(crate) fn private_key(
    text: &str,
    key_password: Option<&str>,
) -> Result<PrivateKeyDer<'static>, String> {
    let mut keys: Vec<Entry> = entries(text)?
        .into_iter()
        .filter(|e| e.label.contains("PRIVATE KEY"))
        .collect();
    if keys.is_empty() {
        return Err("No matching PRIVATE KEY entries in PEM file".to_string());
    }
    if keys.len() != 1 {
        return Err(format!(
            "Expected one private key, but found {}",
            keys.len()
        ));
    }
    let Entry { label, der } = keys.remove(0);
    match (label.as_str(), key_password) {
        ("ENCRYPTED PRIVATE KEY", Some(password)) => super::pkcs8::decrypt(&der, password),
        ("ENCRYPTED PRIVATE KEY", None) => {
            Err("Private key could not be loaded: the key is encrypted but ssl.key.password is not set".to_string())
        }
        (_, Some(_)) => Err("Private key could not be loaded: ssl.key.password is set but the PEM key is not encrypted".to_string()),
        ("RSA PRIVATE KEY", None) => Ok(PrivatePkcs1KeyDer::from(der).into()),
        ("EC PRIVATE KEY", None) => Ok(PrivateSec1KeyDer::from(der).into()),
        (_, None) => Ok(PrivatePkcs8KeyDer::from(der).into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_pem_messages() {
        let cert = include_str!("testdata/ca.pem");
        assert_eq!(certificates(cert).unwrap().len(), 1);
        assert_eq!(
            certificates("junk").unwrap_err(),
            "No matching CERTIFICATE entries in PEM file"
        );
        assert_eq!(
            private_key(cert, None).unwrap_err(),
            "No matching PRIVATE KEY entries in PEM file"
        );
        let two = format!(
            "{}{}",
            include_str!("testdata/alice.key"),
            include_str!("testdata/server.key")
        );
        assert_eq!(
            private_key(&two, None).unwrap_err(),
            "Expected one private key, but found 2"
        );
        let truncated = &cert[..cert.len() / 2];
        assert!(certificates(truncated).is_err());
        let bad = cert.replacen("MII", "M!I", 1);
        assert!(certificates(&bad).is_err());
        let legacy = "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,00\n\nAAAA\n-----END RSA PRIVATE KEY-----\n";
        assert!(private_key(legacy, Some("x"))
            .unwrap_err()
            .contains("Proc-Type"));
        assert!(matches!(
            private_key(include_str!("testdata/server-pkcs1.key"), None),
            Ok(PrivateKeyDer::Pkcs1(_))
        ));
    }
}
