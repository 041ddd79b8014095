//! Kafka's `ScramMessages` (the client-first and client-final parsers, the
//! server messages) and `ScramFormatter.username` / `authMessage`. Kafka
//! matches each message against a regular expression over ASCII 0x01-0x7F;
//! these parsers accept exactly the same strings.

use base64::Engine;

use super::scram_credential::{B64_DECODE_LENIENT, B64_ENCODE};

/// A parsed client-first message:
/// `n,[a=authzid],[m=reserved,]n=saslname,r=nonce[,key=value]...`.
#[derive(Debug)]
pub(crate) struct ClientFirst {
    /// Still SASLNAME-encoded: Kafka compares it to the decoded user name
    /// as it is.
    pub authorization_id: String,
    pub sasl_name: String,
    pub nonce: String,
    /// In Kafka's iteration order (a Java HashMap's), duplicates merged.
    pub extensions: Vec<(String, String)>,
}

impl ClientFirst {
    pub fn parse(message: &str) -> Option<ClientFirst> {
        let rest = message.strip_prefix("n,")?;
        let (authorization_id, rest) = match rest.strip_prefix("a=") {
            Some(after) => {
                let (authzid, rest) = after.split_once(',')?;
                (is_sasl_name(authzid).then_some(authzid)?, rest)
            }
            None => ("", rest.strip_prefix(',')?),
        };
        let rest = match rest.strip_prefix("m=") {
            Some(after) => {
                let (reserved, rest) = after.split_once(',')?;
                is_value(reserved).then_some(rest)?
            }
            None => rest,
        };
        let mut fields = rest.split(',');
        let sasl_name = fields.next()?.strip_prefix("n=")?;
        let nonce = fields.next()?.strip_prefix("r=")?;
        if !is_sasl_name(sasl_name) || !is_printable(nonce) {
            return None;
        }
        let extensions = parse_extensions(fields)?;
        Some(ClientFirst {
            authorization_id: authorization_id.to_string(),
            sasl_name: sasl_name.to_string(),
            nonce: nonce.to_string(),
            extensions: java_hash_map_order(extensions),
        })
    }

    /// Kafka's `clientFirstMessageBare`, rebuilt from the parsed fields: the
    /// reserved `m=` is dropped and extensions come in HashMap order.
    pub fn bare(&self) -> String {
        let mut bare = format!("n={},r={}", self.sasl_name, self.nonce);
        for (key, value) in &self.extensions {
            bare.push(',');
            bare.push_str(key);
            bare.push('=');
            bare.push_str(value);
        }
        bare
    }

    /// `ScramExtensions.tokenAuthenticated`: Boolean.parseBoolean.
    pub fn token_authenticated(&self) -> bool {
        self.extensions
            .iter()
            .any(|(k, v)| k == "tokenauth" && v.eq_ignore_ascii_case("true"))
    }
}

/// A parsed client-final message: `c=b64,r=nonce[,key=value]...,p=b64`.
#[derive(Debug)]
pub(crate) struct ClientFinal {
    pub channel_binding: Vec<u8>,
    pub nonce: String,
    pub proof: Vec<u8>,
}

impl ClientFinal {
    pub fn parse(message: &str) -> Option<ClientFinal> {
        let mut fields = message.split(',');
        let channel = fields.next()?.strip_prefix("c=")?;
        let nonce = fields.next()?.strip_prefix("r=")?;
        let proof = fields.next_back()?.strip_prefix("p=")?;
        if !is_printable(nonce) {
            return None;
        }
        // Kafka ignores the final message's extensions (and drops them
        // from the AuthMessage), but they must be well formed.
        parse_extensions(fields)?;
        Some(ClientFinal {
            channel_binding: decode_base64(channel)?,
            nonce: nonce.to_string(),
            proof: decode_base64(proof)?,
        })
    }

    /// Kafka's `clientFinalMessageWithoutProof`: the channel binding is
    /// re-encoded and extensions are left out.
    pub fn without_proof(&self) -> String {
        format!(
            "c={},r={}",
            B64_ENCODE.encode(&self.channel_binding),
            self.nonce
        )
    }
}

/// `r=<client nonce + server nonce>,s=<b64 salt>,i=<iterations>`.
pub(crate) fn server_first(nonce: &str, salt: &[u8], iterations: i32) -> String {
    format!("r={nonce},s={},i={iterations}", B64_ENCODE.encode(salt))
}

/// `ScramFormatter.authMessage`.
pub(crate) fn auth_message(first: &ClientFirst, server_first: &str, last: &ClientFinal) -> String {
    format!("{},{server_first},{}", first.bare(), last.without_proof())
}

/// `ScramFormatter.username`: `=2C` is `,` and `=3D` is `=`; any other `=`
/// makes the name invalid.
pub(crate) fn username(sasl_name: &str) -> Option<String> {
    let commas = sasl_name.replace("=2C", ",");
    if commas.replace("=3D", "").contains('=') {
        return None;
    }
    Some(commas.replace("=3D", "="))
}

/// `(,ALPHA=VALUE)*` for the remaining comma-separated fields.
fn parse_extensions<'a>(fields: impl Iterator<Item = &'a str>) -> Option<Vec<(&'a str, &'a str)>> {
    fields
        .map(|field| {
            let (key, value) = field.split_once('=')?;
            let key_ok = !key.is_empty() && key.bytes().all(|b| b.is_ascii_alphabetic());
            (key_ok && is_value(value)).then_some((key, value))
        })
        .collect()
}

/// Kafka's BASE64 (`(?:X{4})*(?:X{3}=|X{2}==)?`, possibly empty) decoded
/// by `java.util.Base64`, which ignores nonzero trailing bits.
fn decode_base64(text: &str) -> Option<Vec<u8>> {
    let well_formed = text.len().is_multiple_of(4)
        && text
            .trim_end_matches('=')
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/')
        && text.len() - text.trim_end_matches('=').len() <= 2;
    well_formed.then(|| B64_DECODE_LENIENT.decode(text).ok())?
}

/// VALUE: one or more of 0x01-0x7F except `,`.
fn is_value(text: &str) -> bool {
    !text.is_empty()
        && text
            .bytes()
            .all(|b| (0x01..=0x7f).contains(&b) && b != b',')
}

/// PRINTABLE: one or more of 0x21-0x7E except `,`.
fn is_printable(text: &str) -> bool {
    !text.is_empty()
        && text
            .bytes()
            .all(|b| (0x21..=0x7e).contains(&b) && b != b',')
}

/// SASLNAME: one or more of 0x01-0x7F except `=` and `,`, or `=2C`, `=3D`.
fn is_sasl_name(text: &str) -> bool {
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'=' => match bytes.get(i + 1..i + 3) {
                Some(b"2C") | Some(b"3D") => i += 3,
                _ => return false,
            },
            b',' => return false,
            b => {
                if !(0x01..=0x7f).contains(&b) {
                    return false;
                }
                i += 1;
            }
        }
    }
    !bytes.is_empty()
}

/// The iteration order of the `HashMap` Kafka's `Utils.parseMap` builds:
/// later duplicates replace the value in place, and entries come by bucket
/// (`hash ^ hash >>> 16` masked by a power-of-two table of at least 16
/// holding the entries at load factor 0.75), then by insertion. Exact while
/// no bucket holds 8 or more keys (where Java would start treeifying).
fn java_hash_map_order(entries: Vec<(&str, &str)>) -> Vec<(String, String)> {
    let mut merged: Vec<(String, String)> = Vec::with_capacity(entries.len());
    for (key, value) in entries {
        match merged.iter_mut().find(|(k, _)| k == key) {
            Some(slot) => slot.1 = value.to_string(),
            None => merged.push((key.to_string(), value.to_string())),
        }
    }
    let mut capacity: usize = 16;
    while merged.len() * 4 > capacity * 3 {
        capacity *= 2;
    }
    let bucket = |key: &str| {
        let hash = key.encode_utf16().fold(0i32, |h, unit| {
            h.wrapping_mul(31).wrapping_add(i32::from(unit))
        });
        let spread = (hash ^ ((hash as u32) >> 16) as i32) as u32;
        spread as usize & (capacity - 1)
    };
    // A stable sort keeps insertion order within a bucket.
    merged.sort_by_key(|(key, _)| bucket(key));
    merged
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_first_variants() {
        let first = ClientFirst::parse("n,a=bob,m=x,n=b=2Co=3Db,r=abc,tokenauth=TRUE,x=y=z");
        let first = first.expect("parses");
        assert_eq!(first.authorization_id, "bob");
        assert_eq!(first.sasl_name, "b=2Co=3Db");
        assert_eq!(username(&first.sasl_name).as_deref(), Some("b,o=b"));
        assert!(first.token_authenticated());
        // Java HashMap buckets: "tokenauth" 5, "x" 8.
        assert_eq!(first.bare(), "n=b=2Co=3Db,r=abc,tokenauth=TRUE,x=y=z");
        for bad in [
            "",
            "y,,n=u,r=a",
            "p=tls-unique,,n=u,r=a",
            "n,,n=u",
            "n,,n=,r=a",
            "n,,n=u,r=",
            "n,,n=u=,r=a",
            "n,,n=u,r=a b",
            "n,,n=u,r=a,",
            "n,,n=u,r=a,1=2",
            "n,,n=u,r=a,k=",
            "n,a=,n=u,r=a",
            "n,,n=\u{e9},r=a",
            "n,,n=u\0,r=a",
        ] {
            assert!(ClientFirst::parse(bad).is_none(), "{bad:?}");
        }
    }

    #[test]
    fn client_final_variants() {
        let last = ClientFinal::parse("c=biws,r=abc,e=f,p=AAE=").expect("parses");
        assert_eq!(last.channel_binding, b"n,,");
        assert_eq!(last.proof, [0, 1]);
        assert_eq!(last.without_proof(), "c=biws,r=abc");
        // Nonzero trailing bits decode as Java does, then re-encode canonically.
        let lenient = ClientFinal::parse("c=bix=,r=abc,p=").expect("parses");
        assert_eq!(lenient.without_proof(), "c=biw=,r=abc");
        assert!(lenient.proof.is_empty());
        for bad in [
            "",
            "c=biws,r=abc",
            "c=biw,r=a,p=AA==",
            "c=biws,r=a,p=AA=",
            "r=a,c=biws,p=AA==",
            "c=biws,r=a,p=A===",
            "c=biws,r=a,1=1,p=AA==",
        ] {
            assert!(ClientFinal::parse(bad).is_none(), "{bad:?}");
        }
    }

    #[test]
    fn usernames() {
        assert_eq!(username("a=3D=2Cb").as_deref(), Some("a=,b"));
        assert_eq!(username("=3D2C").as_deref(), Some("=2C"));
        assert_eq!(username("a=b"), None);
    }

    #[test]
    fn hash_map_order_follows_java() {
        // Java: "tokenauth".hashCode() = 141882145 and "a".hashCode() = 97;
        // buckets of a 16-wide table: 5 and 1.
        let order = java_hash_map_order(vec![("tokenauth", "true"), ("a", "1"), ("a", "2")]);
        assert_eq!(
            order,
            vec![
                ("a".into(), "2".into()),
                ("tokenauth".into(), "true".into())
            ]
        );
    }
}
