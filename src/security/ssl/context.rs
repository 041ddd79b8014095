//! The listener's TLS context, Kafka's `SslFactory` over
//! `DefaultSslEngineFactory`: a server config built from the settings,
//! rebuilt when a store file changes (keeping the old one when the new
//! files are broken or change the certificate's identity), the client
//! config for the broker's own connections, and the SSL principal.

use super::principal::rfc2253_subject;
use super::settings::{
    ClientAuth, KeySource, SslSettings, CIPHER_SUITES, KEYSTORE_LOCATION, PRINCIPAL_MAPPING_RULES,
    TRUSTSTORE_LOCATION,
};
use super::stores::{self, KeyMaterial, Stamp};
use super::SslConfigError;
use crate::security::KafkaPrincipal;
use arc_swap::ArcSwap;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::server::WebPkiClientVerifier;
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, ServerConfig,
    SignatureScheme,
};
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// Always ring, never a process-wide default; restricted to ssl.cipher.suites when set.
// rustls 0.23.48 deprecates ring's provider only for lacking post-quantum key
// exchange; the crate is built without aws-lc, so ring is the provider.
#[allow(deprecated)]
fn provider(settings: &SslSettings) -> Arc<CryptoProvider> {
    let mut provider = rustls::crypto::ring::default_provider();
    if let Some(suites) = &settings.cipher_suites {
        provider.cipher_suites = suites.clone();
    }
    Arc::new(provider)
}

fn suite_error(e: rustls::Error) -> SslConfigError {
    SslConfigError::new(
        CIPHER_SUITES,
        format!("No cipher suite usable with ssl.enabled.protocols: {e}"),
    )
}

fn roots(settings: &SslSettings, why: &str) -> Result<Arc<RootCertStore>, SslConfigError> {
    let source = settings.truststore.as_ref().ok_or_else(|| {
        SslConfigError::new(
            TRUSTSTORE_LOCATION,
            format!("{why} needs a trust store (ssl.truststore.location or ssl.truststore.certificates): there is no JVM default cacerts here"),
        )
    })?;
    let mut store = RootCertStore::empty();
    for cert in stores::load_trust(source)? {
        store.add(cert).map_err(|e| {
            SslConfigError::new(
                TRUSTSTORE_LOCATION,
                format!("Invalid trusted certificate: {e}"),
            )
        })?;
    }
    Ok(Arc::new(store))
}

/// A key that rustls cannot use, or that is not the certificate's, is a keystore error.
fn key_error(source: &KeySource, e: rustls::Error) -> SslConfigError {
    SslConfigError::new(
        source.config_key(),
        format!("Private key could not be loaded or does not match the certificate chain: {e}"),
    )
}

struct Built {
    config: Arc<ServerConfig>,
    identity: Identity,
}

fn build_server(settings: &SslSettings) -> Result<Built, SslConfigError> {
    let source = settings.keystore.as_ref().ok_or_else(|| {
        SslConfigError::new(
            KEYSTORE_LOCATION,
            "A TLS listener needs a key store: set ssl.keystore.location, or ssl.keystore.key and ssl.keystore.certificate.chain",
        )
    })?;
    let KeyMaterial { chain, key } = stores::load_key(source)?;
    let identity = Identity::of(chain.first(), source)?;
    let provider = provider(settings);
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&settings.protocols)
        .map_err(suite_error)?;
    let builder = match settings.client_auth {
        ClientAuth::None => {
            // Kafka loads a configured trust store even when it is not used.
            if settings.truststore.is_some() {
                roots(settings, "ssl.client.auth")?;
            }
            builder.with_no_client_auth()
        }
        auth => {
            let mut verifier = WebPkiClientVerifier::builder_with_provider(
                roots(settings, "ssl.client.auth")?,
                provider,
            );
            if auth == ClientAuth::Requested {
                verifier = verifier.allow_unauthenticated();
            }
            let verifier = verifier
                .build()
                .map_err(|e| SslConfigError::new(TRUSTSTORE_LOCATION, e.to_string()))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let config = builder
        .with_single_cert(chain, key)
        .map_err(|e| key_error(source, e))?;
    Ok(Built {
        config: Arc::new(config),
        identity,
    })
}

/// The leaf certificate's DN and SANs, which a reload may not change
/// unless ssl.allow.dn.changes / ssl.allow.san.changes say so
/// (SslFactory.CertificateEntries.ensureCompatible).
#[derive(Debug, Clone, PartialEq)]
struct Identity {
    dn: String,
    sans: Vec<String>,
}

impl Identity {
    fn of(
        leaf: Option<&CertificateDer<'_>>,
        source: &KeySource,
    ) -> Result<Identity, SslConfigError> {
        let invalid = |e: String| {
            SslConfigError::new(
                source.config_key(),
                format!("Invalid key store certificate: {e}"),
            )
        };
        let leaf = leaf.ok_or_else(|| invalid("empty certificate chain".to_string()))?;
        let dn = rfc2253_subject(leaf.as_ref()).map_err(invalid)?;
        let (_, cert) = <x509_parser::certificate::X509Certificate as x509_parser::prelude::FromDer<_>>::from_der(leaf.as_ref())
            .map_err(|e| invalid(e.to_string()))?;
        let sans = match cert.subject_alternative_name() {
            Ok(Some(ext)) => ext
                .value
                .general_names
                .iter()
                .map(|n| n.to_string())
                .collect(),
            _ => Vec::new(),
        };
        Ok(Identity { dn, sans })
    }

    fn ensure_compatible(
        &self,
        new: &Identity,
        settings: &SslSettings,
    ) -> Result<(), SslConfigError> {
        if !settings.allow_dn_changes && !self.dn.eq_ignore_ascii_case(&new.dn) {
            return Err(SslConfigError::new(
                KEYSTORE_LOCATION,
                format!(
                    "Keystore DistinguishedName does not match:  existing={{DN={}}}, new={{DN={}}}",
                    self.dn, new.dn
                ),
            ));
        }
        if !settings.allow_san_changes && !self.sans.iter().all(|s| new.sans.contains(s)) {
            return Err(SslConfigError::new(
                KEYSTORE_LOCATION,
                format!("Keystore SubjectAltNames do not match:  existing={{SAN={:?}}}, new={{SAN={:?}}}", self.sans, new.sans),
            ));
        }
        Ok(())
    }
}

struct Watch {
    stamps: Vec<(PathBuf, Stamp)>,
    identity: Identity,
    /// Stamps of files that failed to load, so a broken file is reported once.
    failed: Option<Vec<(PathBuf, Stamp)>>,
}

/// A listener's TLS context, shared by all shards.
pub struct SslServerContext {
    settings: SslSettings,
    current: ArcSwap<ServerConfig>,
    watch: Mutex<Watch>,
}

fn current_stamps(files: &[PathBuf]) -> Vec<(PathBuf, Stamp)> {
    files
        .iter()
        .map(|p| (p.clone(), stores::stamp(p)))
        .collect()
}

impl SslServerContext {
    pub fn new(settings: SslSettings) -> Result<SslServerContext, SslConfigError> {
        let files = stores::watched_files(settings.keystore.as_ref(), settings.truststore.as_ref());
        // Stamped before reading, so a write racing the read shows up as a change later.
        let stamps = current_stamps(&files);
        let built = build_server(&settings)?;
        Ok(SslServerContext {
            settings,
            current: ArcSwap::new(built.config),
            watch: Mutex::new(Watch {
                stamps,
                identity: built.identity,
                failed: None,
            }),
        })
    }

    pub fn server_config(&self) -> Arc<ServerConfig> {
        self.current.load_full()
    }

    pub fn client_auth(&self) -> ClientAuth {
        self.settings.client_auth
    }

    /// Rebuilds when a watched file's modification time or size changed;
    /// Ok(true) when a new config is in place. On failure the old config
    /// stays and the error is returned once per broken file version.
    pub fn reload_if_changed(&self) -> Result<bool, SslConfigError> {
        let mut watch = self.watch.lock().unwrap_or_else(|e| e.into_inner());
        let files: Vec<PathBuf> = watch.stamps.iter().map(|(p, _)| p.clone()).collect();
        let stamps = current_stamps(&files);
        // A file that cannot be stat'ed (mid-rename, say) counts as unchanged,
        // as Kafka's FileBasedStore.modified() treats it.
        let changed = stamps
            .iter()
            .zip(&watch.stamps)
            .any(|((_, new), (_, old))| new.is_some() && new != old);
        if !changed || watch.failed.as_ref() == Some(&stamps) {
            return Ok(false);
        }
        let result = build_server(&self.settings).and_then(|built| {
            watch
                .identity
                .ensure_compatible(&built.identity, &self.settings)?;
            Ok(built)
        });
        match result {
            Ok(built) => {
                self.current.store(built.config);
                *watch = Watch {
                    stamps,
                    identity: built.identity,
                    failed: None,
                };
                Ok(true)
            }
            Err(e) => {
                watch.failed = Some(stamps);
                Err(e)
            }
        }
    }

    /// DefaultKafkaPrincipalBuilder for SSL: ANONYMOUS without a client
    /// certificate, else the leaf's RFC 2253 subject through
    /// ssl.principal.mapping.rules. A subject no rule maps fails the
    /// connection, as in Kafka.
    pub fn principal_of(
        &self,
        peer_certificates: Option<&[CertificateDer<'_>]>,
    ) -> Result<KafkaPrincipal, SslConfigError> {
        let Some(leaf) = peer_certificates.and_then(<[_]>::first) else {
            return Ok(KafkaPrincipal::anonymous());
        };
        let dn = rfc2253_subject(leaf.as_ref())
            .map_err(|e| SslConfigError::new(PRINCIPAL_MAPPING_RULES, e))?;
        let name = self.settings.mapper.principal_name(&dn).map_err(|e| {
            SslConfigError::new(
                PRINCIPAL_MAPPING_RULES,
                format!("Failed to map name for '{dn}' based on SSL principal mapping rules: {e}"),
            )
        })?;
        Ok(KafkaPrincipal::user(name))
    }
}

/// ssl.endpoint.identification.algorithm empty: the chain is verified, the host name is not.
#[derive(Debug)]
struct NoHostNameVerifier(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for NoHostNameVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// The broker's client side (replica fetchers, controller channel): the
/// trust store is required, the key store is presented when configured.
pub fn client_config(settings: &SslSettings) -> Result<Arc<ClientConfig>, SslConfigError> {
    let provider = provider(settings);
    let roots = roots(settings, "A TLS client")?;
    let verifier = WebPkiServerVerifier::builder_with_provider(roots, provider.clone())
        .build()
        .map_err(|e| SslConfigError::new(TRUSTSTORE_LOCATION, e.to_string()))?;
    let builder = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&settings.protocols)
        .map_err(suite_error)?;
    let builder = if settings.verify_host_name {
        builder.with_webpki_verifier(verifier)
    } else {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(NoHostNameVerifier(verifier)))
    };
    let config = match &settings.keystore {
        Some(source) => {
            let KeyMaterial { chain, key } = stores::load_key(source)?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| key_error(source, e))?
        }
        None => builder.with_no_client_auth(),
    };
    Ok(Arc::new(config))
}
