//! PKCS12 key and trust stores (`ssl.keystore.type=PKCS12`), read with
//! p12-keystore the way Java's `PKCS12KeyStore` + SunX509 key manager use
//! them: the first private key entry with its chain; every certificate as
//! a trust anchor for a trust store.

use p12_keystore::{KeyStore, Pkcs12Archive, Pkcs12ImportPolicy};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// Key and chain. Java decrypts keys with ssl.key.password (or the store
/// password); PKCS12 files normally use one password for both, so the store
/// password is tried first and the key password second.
pub(crate) fn load_key(
    data: &[u8],
    password: &str,
    key_password: Option<&str>,
) -> Result<(PrivateKeyDer<'static>, Vec<CertificateDer<'static>>), String> {
    let store = match KeyStore::from_pkcs12(data, password, Pkcs12ImportPolicy::Relaxed) {
        Ok(store) => store,
        Err(first) => match key_password.filter(|k| *k != password) {
            Some(k) => KeyStore::from_pkcs12(data, k, Pkcs12ImportPolicy::Relaxed)
                .map_err(|_| first.to_string())?,
            None => return Err(first.to_string()),
        },
    };
    let (_, chain) = store
        .private_key_chain()
        .ok_or("The PKCS12 key store holds no private key entry")?;
    if chain.certs().is_empty() {
        return Err("The PKCS12 key store's private key has no certificate chain".to_string());
    }
    let key = PrivatePkcs8KeyDer::from(chain.key().as_der().to_vec()).into();
    let certs = chain
        .certs()
        .iter()
        .map(|c| CertificateDer::from(c.as_der().to_vec()))
        .collect();
    Ok((key, certs))
}

/// Trust anchors. Without ssl.truststore.password Java still reads a store
/// whose certificates are not encrypted; the empty password stands in.
pub(crate) fn load_trust(
    data: &[u8],
    password: Option<&str>,
) -> Result<Vec<CertificateDer<'static>>, String> {
    let archive =
        Pkcs12Archive::from_pkcs12(data, password.unwrap_or("")).map_err(|e| e.to_string())?;
    let certs: Vec<CertificateDer<'static>> = archive
        .certs
        .iter()
        .map(|bag| CertificateDer::from(bag.cert.as_der().to_vec()))
        .collect();
    Ok(certs)
}
