//! Encrypted PKCS#8 keys (`-----BEGIN ENCRYPTED PRIVATE KEY-----` with
//! ssl.key.password), as Kafka's `PemStore.privateKey` decrypts them via
//! `EncryptedPrivateKeyInfo`. A PKCS#12 pkcs8ShroudedKeyBag holds exactly an
//! EncryptedPrivateKeyInfo, so the key is wrapped in a MAC-less PFX and
//! p12-keystore (PBES2: PBKDF2 + AES/DES, and PBES1) decrypts it.

use rustls_pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};

/// id-data, 1.2.840.113549.1.7.1.
const OID_DATA: &[u8] = &[
    0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x07, 0x01,
];
/// pkcs8ShroudedKeyBag, 1.2.840.113549.1.12.10.1.2.
const OID_SHROUDED_KEY_BAG: &[u8] = &[
    0x06, 0x0b, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x0c, 0x0a, 0x01, 0x02,
];

/// A DER length: short form below 128, else the big-endian bytes after
/// their count.
pub(crate) fn push_der_length(out: &mut Vec<u8>, len: usize) {
    if len < 0x80 {
        out.push(len as u8);
        return;
    }
    let bytes: Vec<u8> = len
        .to_be_bytes()
        .into_iter()
        .skip_while(|b| *b == 0)
        .collect();
    out.push(0x80 | bytes.len() as u8);
    out.extend(bytes);
}

pub(crate) fn tlv(tag: u8, content: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    push_der_length(&mut out, content.len());
    out.extend_from_slice(content);
    out
}

/// ContentInfo { id-data, [0] EXPLICIT OCTET STRING content }.
fn data_content_info(content: &[u8]) -> Vec<u8> {
    let explicit = tlv(0xa0, &tlv(0x04, content));
    tlv(0x30, &[OID_DATA, &explicit].concat())
}

fn pfx_around(encrypted_private_key_info: &[u8]) -> Vec<u8> {
    let bag = tlv(
        0x30,
        &[OID_SHROUDED_KEY_BAG, &tlv(0xa0, encrypted_private_key_info)].concat(),
    );
    let safe_contents = tlv(0x30, &bag);
    let authenticated_safe = tlv(0x30, &data_content_info(&safe_contents));
    let version = [0x02, 0x01, 0x03];
    tlv(
        0x30,
        &[&version[..], &data_content_info(&authenticated_safe)].concat(),
    )
}

/// Decrypts an EncryptedPrivateKeyInfo into the PKCS#8 key it protects.
pub(crate) fn decrypt(
    encrypted_private_key_info: &[u8],
    password: &str,
) -> Result<PrivateKeyDer<'static>, String> {
    let pfx = pfx_around(encrypted_private_key_info);
    let archive = p12_keystore::Pkcs12Archive::from_pkcs12(&pfx, password)
        .map_err(|e| format!("Private key could not be loaded (wrong ssl.key.password or unsupported encryption): {e}"))?;
    let key = archive
        .keys
        .into_iter()
        .next()
        .ok_or("Private key could not be loaded")?;
    Ok(PrivatePkcs8KeyDer::from(key.key.as_der().to_vec()).into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encrypted_der() -> Vec<u8> {
        use base64::Engine;
        let pem = include_str!("testdata/server-encrypted.key");
        let body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
        base64::engine::general_purpose::STANDARD
            .decode(body)
            .unwrap()
    }

    #[test]
    fn decrypts_openssl_pbes2_key() {
        let key = decrypt(&encrypted_der(), "keypass").unwrap();
        let plain =
            crate::security::ssl::pem::private_key(include_str!("testdata/server.key"), None)
                .unwrap();
        assert_eq!(key.secret_der(), plain.secret_der());
        assert!(decrypt(&encrypted_der(), "wrong").is_err());
        assert!(decrypt(&encrypted_der()[..40], "keypass").is_err());
        assert!(decrypt(b"garbage", "keypass").is_err());
    }
}
