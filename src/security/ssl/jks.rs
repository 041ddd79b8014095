//! JKS key stores, Kafka's default `ssl.keystore.type`, as Java's
//! `sun.security.provider.JavaKeyStore` writes them: magic 0xFEEDFEED,
//! version 1 or 2, private key entries protected by `KeyProtector`
//! (SHA-1 keystream, PKCS#8 inside), trusted certificate entries, and a
//! trailing SHA-1 over password + "Mighty Aphrodite" + data. Every read is
//! bounds-checked: a damaged store is an error, never a panic.

use super::sha1::{self, DIGEST_LEN};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

pub(crate) const MAGIC: u32 = 0xfeed_feed;
const PRIVATE_KEY_TAG: u32 = 1;
const TRUSTED_CERT_TAG: u32 = 2;
/// KeyProtector's algorithm, 1.3.6.1.4.1.42.2.17.1.1.
const KEY_PROTECTOR_OID: &[u8] = &[0x2b, 0x06, 0x01, 0x04, 0x01, 0x2a, 0x02, 0x11, 0x01, 0x01];

pub(crate) struct KeyEntry {
    pub(crate) alias: String,
    protected_key: Vec<u8>,
    pub(crate) chain: Vec<CertificateDer<'static>>,
}

pub(crate) struct JksStore {
    pub(crate) keys: Vec<KeyEntry>,
    pub(crate) trusted: Vec<CertificateDer<'static>>,
}

struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|e| *e <= self.data.len())
            .ok_or("Truncated JKS key store")?;
        let out = &self.data[self.pos..end];
        self.pos = end;
        Ok(out)
    }

    fn u16(&mut self) -> Result<u16, String> {
        let b = self.take(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    fn u32(&mut self) -> Result<u32, String> {
        let b = self.take(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// DataInput.readUTF; aliases are ASCII in practice, so lossy decoding suffices.
    fn utf(&mut self) -> Result<String, String> {
        let len = self.u16()? as usize;
        Ok(String::from_utf8_lossy(self.take(len)?).into_owned())
    }

    fn bytes(&mut self) -> Result<&'a [u8], String> {
        let len = self.u32()? as usize;
        self.take(len)
    }

    fn certificate(&mut self, version: u32) -> Result<CertificateDer<'static>, String> {
        if version == 2 {
            let cert_type = self.utf()?;
            if cert_type != "X.509" {
                return Err(format!(
                    "Unsupported certificate type {cert_type} in JKS key store"
                ));
            }
        }
        Ok(CertificateDer::from(self.bytes()?.to_vec()))
    }
}

/// Java's char[] password as bytes: each UTF-16 unit big-endian.
fn password_bytes(password: &str) -> Vec<u8> {
    password.encode_utf16().flat_map(u16::to_be_bytes).collect()
}

/// Reads a JKS store; with a password the integrity hash must match (Java
/// skips the check when no password is given).
pub(crate) fn parse(data: &[u8], password: Option<&str>) -> Result<JksStore, String> {
    let mut r = Reader { data, pos: 0 };
    if r.u32().map_err(|_| "Invalid keystore format")? != MAGIC {
        return Err("Invalid keystore format".to_string());
    }
    let version = r.u32()?;
    if version != 1 && version != 2 {
        return Err("Invalid keystore format".to_string());
    }
    let count = r.u32()?;
    let mut store = JksStore {
        keys: Vec::new(),
        trusted: Vec::new(),
    };
    for _ in 0..count {
        let tag = r.u32()?;
        let alias = r.utf()?;
        r.take(8)?; // creation date
        match tag {
            PRIVATE_KEY_TAG => {
                let protected_key = r.bytes()?.to_vec();
                let chain_len = r.u32()?;
                let mut chain = Vec::new();
                for _ in 0..chain_len {
                    chain.push(r.certificate(version)?);
                }
                store.keys.push(KeyEntry {
                    alias,
                    protected_key,
                    chain,
                });
            }
            TRUSTED_CERT_TAG => store.trusted.push(r.certificate(version)?),
            _ => {
                return Err(
                    "Unrecognized keystore entry: unsupported (secret key?) entry in JKS key store"
                        .to_string(),
                )
            }
        }
    }
    if let Some(password) = password {
        let body = &data[..r.pos];
        let expected = r.take(DIGEST_LEN)?;
        let actual = sha1::digest(&[&password_bytes(password), b"Mighty Aphrodite", body]);
        if actual != expected {
            return Err("Keystore was tampered with, or password was incorrect".to_string());
        }
    }
    Ok(store)
}

/// One DER element: (tag, contents, rest).
fn der(data: &[u8]) -> Result<(u8, &[u8], &[u8]), String> {
    let bad = || "Malformed protected key in JKS key store".to_string();
    let (&tag, rest) = data.split_first().ok_or_else(bad)?;
    let (&first, rest) = rest.split_first().ok_or_else(bad)?;
    let (len, rest) = if first < 0x80 {
        (first as usize, rest)
    } else {
        let n = (first & 0x7f) as usize;
        if n == 0 || n > 4 || rest.len() < n {
            return Err(bad());
        }
        (
            rest[..n]
                .iter()
                .fold(0usize, |acc, b| (acc << 8) | *b as usize),
            &rest[n..],
        )
    };
    if rest.len() < len {
        return Err(bad());
    }
    Ok((tag, &rest[..len], &rest[len..]))
}

impl KeyEntry {
    /// KeyProtector.recover: the PKCS#8 key, checked against its SHA-1.
    pub(crate) fn recover(&self, password: &str) -> Result<PrivateKeyDer<'static>, String> {
        let (_, info, _) = der(&self.protected_key)?;
        let (_, algorithm, rest) = der(info)?;
        let (_, oid, _) = der(algorithm)?;
        if oid != KEY_PROTECTOR_OID {
            return Err(format!(
                "Unsupported key protection algorithm for JKS entry {}",
                self.alias
            ));
        }
        let (_, encrypted, _) = der(rest)?;
        if encrypted.len() < 2 * DIGEST_LEN {
            return Err(format!(
                "Malformed protected key for JKS entry {}",
                self.alias
            ));
        }
        let (salt, tail) = encrypted.split_at(DIGEST_LEN);
        let (cipher, check) = tail.split_at(tail.len() - DIGEST_LEN);
        let passwd = password_bytes(password);
        let mut plain = Vec::with_capacity(cipher.len());
        let mut block = [0u8; DIGEST_LEN];
        block.copy_from_slice(salt);
        for chunk in cipher.chunks(DIGEST_LEN) {
            block = sha1::digest(&[&passwd, &block]);
            plain.extend(chunk.iter().zip(block.iter()).map(|(c, k)| c ^ k));
        }
        if sha1::digest(&[&passwd, &plain]) != check {
            return Err(format!(
                "Cannot recover key of JKS entry {} (wrong ssl.key.password?)",
                self.alias
            ));
        }
        Ok(PrivatePkcs8KeyDer::from(plain).into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SERVER: &[u8] = include_bytes!("testdata/server.jks");
    const TRUST: &[u8] = include_bytes!("testdata/truststore.jks");

    #[test]
    fn reads_keytool_stores() {
        let store = parse(SERVER, Some("storepass")).unwrap();
        assert_eq!(store.keys.len(), 1);
        assert_eq!(store.keys[0].chain.len(), 2);
        let key = store.keys[0].recover("keypass").unwrap();
        let plain =
            crate::security::ssl::pem::private_key(include_str!("testdata/server.key"), None)
                .unwrap();
        assert_eq!(key.secret_der(), plain.secret_der());
        assert!(store.keys[0]
            .recover("storepass")
            .unwrap_err()
            .contains("Cannot recover key"));
        assert_eq!(parse(TRUST, Some("trustpass")).unwrap().trusted.len(), 1);
        assert_eq!(parse(TRUST, None).unwrap().trusted.len(), 1);
    }

    #[test]
    fn damaged_stores_are_errors() {
        assert_eq!(
            parse(SERVER, Some("nope")).err().unwrap(),
            "Keystore was tampered with, or password was incorrect"
        );
        for len in [0, 3, 11, 40, SERVER.len() / 2, SERVER.len() - 1] {
            assert!(parse(&SERVER[..len], Some("storepass")).is_err(), "{len}");
        }
        let mut flipped = SERVER.to_vec();
        flipped[100] ^= 1;
        assert!(parse(&flipped, Some("storepass")).is_err());
        assert!(parse(b"garbage garbage garbage", None).is_err());
        // Without a password the integrity hash is skipped, so damage reaches the parser.
        for len in 0..SERVER.len() {
            let _ = parse(&SERVER[..len], None);
        }
        for i in (0..SERVER.len()).step_by(3) {
            let mut damaged = SERVER.to_vec();
            damaged[i] ^= 0xa5;
            if let Ok(store) = parse(&damaged, None) {
                store.keys.iter().for_each(|k| drop(k.recover("keypass")));
            }
        }
        let mut huge = MAGIC.to_be_bytes().to_vec();
        huge.extend([0, 0, 0, 2, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 1, 0xff, 0xff]);
        assert!(parse(&huge, None).is_err());
    }
}
