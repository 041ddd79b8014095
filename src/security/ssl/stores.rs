//! Loading key and trust stores, as `DefaultSslEngineFactory`'s
//! `FileBasedStore`, `FileBasedPemStore` and `PemStore` do, with their
//! error messages, and the file stamps `SslFactory` compares on reload.

use super::settings::{
    KeySource, TrustSource, KEYSTORE_KEY, KEYSTORE_LOCATION, TRUSTSTORE_CERTIFICATES,
    TRUSTSTORE_LOCATION,
};
use super::{jks, pem, pkcs12, SslConfigError};
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

pub(crate) struct KeyMaterial {
    pub(crate) chain: Vec<CertificateDer<'static>>,
    pub(crate) key: PrivateKeyDer<'static>,
}

/// What identifies a file's version: modification time and size.
pub(crate) type Stamp = Option<(SystemTime, u64)>;

pub(crate) fn stamp(path: &Path) -> Stamp {
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.modified().ok()?, meta.len()))
}

fn read(path: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| e.to_string())
}

fn read_text(path: &Path) -> Result<String, String> {
    String::from_utf8(read(path)?).map_err(|_| "the file is not UTF-8 text".to_string())
}

/// Java 9+ JKS and PKCS12 key stores each read both formats (keystore.type.compat).
enum Format {
    Jks,
    Pkcs12,
}

fn format_of(store_type: &str, data: &[u8]) -> Result<Format, String> {
    if !store_type.eq_ignore_ascii_case("JKS") && !store_type.eq_ignore_ascii_case("PKCS12") {
        return Err(format!("{store_type} not found"));
    }
    Ok(if data.starts_with(&jks::MAGIC.to_be_bytes()) {
        Format::Jks
    } else {
        Format::Pkcs12
    })
}

fn file_error(key: &str, path: &Path, store_type: &str, cause: String) -> SslConfigError {
    SslConfigError::new(
        key,
        format!(
            "Failed to load SSL keystore {} of type {store_type}: {cause}",
            path.display()
        ),
    )
}

pub(crate) fn load_key(source: &KeySource) -> Result<KeyMaterial, SslConfigError> {
    match source {
        KeySource::PemInline {
            key,
            chain,
            key_password,
        } => pem_key(key, chain, key_password.as_deref()).map_err(|e| {
            SslConfigError::new(KEYSTORE_KEY, format!("Invalid PEM keystore configs: {e}"))
        }),
        KeySource::PemFile { path, key_password } => read_text(path)
            .and_then(|text| pem_key(&text, &text, key_password.as_deref()))
            .map_err(|e| {
                SslConfigError::new(
                    KEYSTORE_LOCATION,
                    format!("Failed to load PEM SSL keystore {}: {e}", path.display()),
                )
            }),
        KeySource::File {
            store_type,
            path,
            password,
            key_password,
        } => file_key(path, store_type, password, key_password.as_deref())
            .map_err(|e| file_error(KEYSTORE_LOCATION, path, store_type, e)),
    }
}

fn pem_key(key: &str, chain: &str, key_password: Option<&str>) -> Result<KeyMaterial, String> {
    Ok(KeyMaterial {
        key: pem::private_key(key, key_password)?,
        chain: pem::certificates(chain)?,
    })
}

fn file_key(
    path: &Path,
    store_type: &str,
    password: &str,
    key_password: Option<&str>,
) -> Result<KeyMaterial, String> {
    let data = read(path)?;
    match format_of(store_type, &data)? {
        Format::Pkcs12 => {
            let (key, chain) = pkcs12::load_key(&data, password, key_password)?;
            Ok(KeyMaterial { chain, key })
        }
        Format::Jks => {
            let store = jks::parse(&data, Some(password))?;
            let entry = store
                .keys
                .first()
                .ok_or("The JKS key store holds no private key entry")?;
            if entry.chain.is_empty() {
                return Err(format!(
                    "JKS entry {} has no certificate chain",
                    entry.alias
                ));
            }
            let key = entry.recover(key_password.unwrap_or(password))?;
            Ok(KeyMaterial {
                chain: entry.chain.clone(),
                key,
            })
        }
    }
}

pub(crate) fn load_trust(
    source: &TrustSource,
) -> Result<Vec<CertificateDer<'static>>, SslConfigError> {
    match source {
        TrustSource::PemInline(text) => pem::certificates(text).map_err(|e| {
            SslConfigError::new(
                TRUSTSTORE_CERTIFICATES,
                format!("Invalid PEM truststore configs: {e}"),
            )
        }),
        TrustSource::PemFile(path) => read_text(path)
            .and_then(|text| pem::certificates(&text))
            .map_err(|e| {
                SslConfigError::new(
                    TRUSTSTORE_LOCATION,
                    format!("Failed to load PEM SSL keystore {}: {e}", path.display()),
                )
            }),
        TrustSource::File {
            store_type,
            path,
            password,
        } => file_trust(path, store_type, password.as_deref())
            .map_err(|e| file_error(TRUSTSTORE_LOCATION, path, store_type, e)),
    }
}

/// Trusted certificate entries plus the leaf of each key entry, as Java's
/// TrustStoreUtil collects them.
fn file_trust(
    path: &Path,
    store_type: &str,
    password: Option<&str>,
) -> Result<Vec<CertificateDer<'static>>, String> {
    let data = read(path)?;
    let certs = match format_of(store_type, &data)? {
        Format::Pkcs12 => pkcs12::load_trust(&data, password)?,
        Format::Jks => {
            let store = jks::parse(&data, password)?;
            let leaves = store.keys.iter().filter_map(|k| k.chain.first().cloned());
            store.trusted.into_iter().chain(leaves).collect()
        }
    };
    if certs.is_empty() {
        return Err("the trust store holds no certificates".to_string());
    }
    Ok(certs)
}

/// The files a context watches for changes.
pub(crate) fn watched_files(
    keystore: Option<&KeySource>,
    truststore: Option<&TrustSource>,
) -> Vec<PathBuf> {
    let key = keystore.and_then(|k| match k {
        KeySource::PemFile { path, .. } | KeySource::File { path, .. } => Some(path.clone()),
        KeySource::PemInline { .. } => None,
    });
    let trust = truststore.and_then(|t| match t {
        TrustSource::PemFile(path) | TrustSource::File { path, .. } => Some(path.clone()),
        TrustSource::PemInline(_) => None,
    });
    key.into_iter().chain(trust).collect()
}
