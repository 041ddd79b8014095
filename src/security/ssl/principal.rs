//! Kafka's `SslPrincipalMapper` (ssl.principal.mapping.rules) and the
//! subject string `DefaultKafkaPrincipalBuilder` feeds it: the peer
//! certificate's `X500Principal.getName()` (RFC 2253).

use super::regex::Regex;
use x509_parser::der_parser::asn1_rs::{Any, Class, Tag};
use x509_parser::prelude::{FromDer, X509Certificate};

/// Kafka's RULE_PATTERN, run through the same regex semantics Kafka uses.
const RULE_PATTERN: &str = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)";

/// Distinguished names longer than this are refused rather than matched.
const MAX_DN_CHARS: usize = 2048;

#[derive(Debug, Clone)]
enum Rule {
    Default,
    Replace {
        pattern: Regex,
        replacement: String,
        lower: bool,
        upper: bool,
    },
}

impl Rule {
    fn apply(&self, dn: &[char]) -> Result<Option<String>, String> {
        let Rule::Replace {
            pattern,
            replacement,
            lower,
            upper,
        } = self
        else {
            return Ok(Some(dn.iter().collect()));
        };
        if pattern.matches(dn)?.is_none() {
            return Ok(None);
        }
        let replacement = escape_literal_back_references(replacement, pattern.group_count());
        let name = pattern.replace_all(dn, &replacement)?;
        Ok(Some(if *lower {
            name.to_lowercase()
        } else if *upper {
            name.to_uppercase()
        } else {
            name
        }))
    }
}

impl std::fmt::Display for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Rule::Default => f.write_str("DEFAULT"),
            Rule::Replace {
                pattern,
                replacement,
                lower,
                upper,
            } => {
                write!(f, "RULE:{}/{}", pattern.as_str(), replacement)?;
                let case = if *lower {
                    "/L"
                } else if *upper {
                    "/U"
                } else {
                    ""
                };
                f.write_str(case)
            }
        }
    }
}

/// `$n` beyond the group count is made literal, as Kafka does (taken by
/// Kafka from Apache NiFi), including its quirk of applying positions
/// found in the original string to the already-escaped one.
fn escape_literal_back_references(unescaped: &str, groups: usize) -> String {
    if groups == 0 {
        return unescaped.to_string();
    }
    let original: Vec<char> = unescaped.chars().collect();
    let mut value = original.clone();
    let mut i = 0;
    while i < original.len() {
        if original[i] != '$' || !original.get(i + 1).is_some_and(|c| c.is_ascii_digit()) {
            i += 1;
            continue;
        }
        let start = i + 1;
        let mut end = start;
        while original.get(end).is_some_and(|c| c.is_ascii_digit()) {
            end += 1;
        }
        let digits: String = original[start..end].iter().collect();
        i = end;
        if digits.starts_with('0') {
            continue;
        }
        let mut index: u128 = digits.parse().unwrap_or(u128::MAX);
        while index > groups as u128 && index >= 10 {
            index /= 10;
        }
        if index > groups as u128 && start <= value.len() {
            value.insert(start - 1, '\\');
        }
    }
    value.into_iter().collect()
}

/// ssl.principal.mapping.rules, parsed as Kafka parses them.
#[derive(Debug, Clone)]
pub struct SslPrincipalMapper {
    rules: Vec<Rule>,
}

impl SslPrincipalMapper {
    /// Parses the rules; errors carry Kafka's `Invalid rule: ...` text.
    pub fn parse(rules: &str) -> Result<Self, String> {
        let splitter = Regex::new(&format!(r"\s*({RULE_PATTERN})\s*(,\s*|$)"))?;
        let parser = Regex::new(RULE_PATTERN)?;
        let input: Vec<char> = rules.trim().chars().collect();
        let mut parsed = Vec::new();
        for caps in splitter.find_all(&input)? {
            let rule: Vec<char> = group(&input, &caps, 1).unwrap_or_default();
            let text: String = rule.iter().collect();
            let Some(m) = parser.looking_at(&rule)? else {
                return Err(format!("Invalid rule: {text}"));
            };
            let end = m.first().copied().flatten().map_or(0, |(_, e)| e);
            if end != rule.len() {
                let rest: String = rule[end..].iter().collect();
                return Err(format!(
                    "Invalid rule: `{text}`, unmatched substring: `{rest}`"
                ));
            }
            // Empty rules are ignored.
            if group(&rule, &m, 1).is_some() {
                parsed.push(Rule::Default);
            } else if let Some(pattern) = group(&rule, &m, 2) {
                let pattern: String = pattern.iter().collect();
                let case: String = group(&rule, &m, 6).unwrap_or_default().iter().collect();
                parsed.push(Rule::Replace {
                    pattern: Regex::new(&pattern)
                        .map_err(|e| format!("Invalid rule: `{text}`: {e}"))?,
                    replacement: group(&rule, &m, 4).unwrap_or_default().iter().collect(),
                    lower: case == "L",
                    upper: case == "U",
                });
            }
        }
        Ok(SslPrincipalMapper { rules: parsed })
    }

    /// The principal name for a subject DN; Kafka's NoMatchingRule text when no rule applies.
    pub fn principal_name(&self, distinguished_name: &str) -> Result<String, String> {
        let dn: Vec<char> = distinguished_name.chars().take(MAX_DN_CHARS + 1).collect();
        if dn.len() > MAX_DN_CHARS {
            return Err(format!(
                "Distinguished name longer than {MAX_DN_CHARS} characters"
            ));
        }
        for rule in &self.rules {
            if let Some(name) = rule.apply(&dn)? {
                return Ok(name);
            }
        }
        let rules: Vec<String> = self.rules.iter().map(Rule::to_string).collect();
        Err(format!(
            "No rules apply to {distinguished_name}, rules [{}]",
            rules.join(", ")
        ))
    }
}

fn group(input: &[char], caps: &[Option<(usize, usize)>], i: usize) -> Option<Vec<char>> {
    let (s, e) = caps.get(i).copied().flatten()?;
    input.get(s..e).map(<[char]>::to_vec)
}

/// RFC 2253 keywords Java prints by name; everything else is a dotted OID.
fn rfc2253_keyword(oid: &str) -> Option<&'static str> {
    Some(match oid {
        "2.5.4.3" => "CN",
        "2.5.4.6" => "C",
        "2.5.4.7" => "L",
        "2.5.4.8" => "ST",
        "2.5.4.10" => "O",
        "2.5.4.11" => "OU",
        "2.5.4.9" => "STREET",
        "0.9.2342.19200300.100.1.25" => "DC",
        "0.9.2342.19200300.100.1.1" => "UID",
        _ => return None,
    })
}

/// RFC 2253 string of a certificate's subject as `X500Principal.getName()` prints it.
pub fn rfc2253_subject(cert_der: &[u8]) -> Result<String, String> {
    let (_, cert) =
        X509Certificate::from_der(cert_der).map_err(|e| format!("Invalid certificate: {e}"))?;
    let mut rdns = Vec::new();
    for rdn in cert.subject().iter_rdn() {
        let avas: Vec<String> = rdn
            .iter()
            .map(|ava| ava_string(&ava.attr_type().to_id_string(), ava.attr_value()))
            .collect();
        rdns.push(avas.join("+"));
    }
    rdns.reverse();
    Ok(rdns.join(","))
}

fn ava_string(oid: &str, value: &Any<'_>) -> String {
    let text = match rfc2253_keyword(oid) {
        Some(keyword) => directory_string(value).map(|v| (keyword, v)),
        None => None,
    };
    match text {
        Some((keyword, v)) => format!("{keyword}={}", escape_value(&v)),
        None => format!("{oid}=#{}", hex_tlv(value)),
    }
}

/// The string types Java prints as text (AVA.isDerString, non-canonical).
fn directory_string(value: &Any<'_>) -> Option<String> {
    if value.class() != Class::Universal {
        return None;
    }
    let data: &[u8] = value.data;
    match value.tag() {
        Tag::PrintableString | Tag::Ia5String | Tag::GeneralString | Tag::Utf8String => {
            Some(String::from_utf8_lossy(data).into_owned())
        }
        Tag::TeletexString => Some(data.iter().map(|&b| char::from(b)).collect()),
        Tag::BmpString => {
            let units: Vec<u16> = data
                .chunks(2)
                .map(|c| u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]))
                .collect();
            Some(String::from_utf16_lossy(&units))
        }
        _ => None,
    }
}

/// Java escapes `,=+<>#;"\` anywhere, NUL as `\00`, and leading/trailing spaces.
fn escape_value(v: &str) -> String {
    let mut escaped: Vec<char> = Vec::with_capacity(v.len());
    for c in v.chars() {
        if ",=+<>#;\"\\".contains(c) {
            escaped.push('\\');
            escaped.push(c);
        } else if c == '\0' {
            escaped.extend(['\\', '0', '0']);
        } else {
            escaped.push(c);
        }
    }
    let blank = |c: &char| *c == ' ' || *c == '\r';
    let lead = escaped.iter().take_while(|c| blank(c)).count();
    let trail = escaped.len() - escaped.iter().rev().take_while(|c| blank(c)).count();
    let mut out = String::with_capacity(escaped.len() + 4);
    for (i, c) in escaped.into_iter().enumerate() {
        if i < lead || i >= trail {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// `#` form: hex of the value's whole DER encoding (tag, length, contents).
fn hex_tlv(value: &Any<'_>) -> String {
    let data: &[u8] = value.data;
    let class_bits = (value.class() as u8) << 6;
    let constructed = if value.header.is_constructed() {
        0x20
    } else {
        0
    };
    let mut der = Vec::with_capacity(data.len() + 6);
    let tag = value.tag().0;
    if tag < 31 {
        der.push(class_bits | constructed | tag as u8);
    } else {
        der.push(class_bits | constructed | 0x1f);
        let mut groups = Vec::new();
        let mut t = tag;
        loop {
            groups.push((t & 0x7f) as u8);
            t >>= 7;
            if t == 0 {
                break;
            }
        }
        let last = groups.len() - 1;
        der.extend(
            groups
                .iter()
                .rev()
                .enumerate()
                .map(|(i, g)| if i < last { g | 0x80 } else { *g }),
        );
    }
    super::pkcs8::push_der_length(&mut der, data.len());
    der.extend_from_slice(data);
    der.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(rules: &str, dn: &str) -> Result<String, String> {
        SslPrincipalMapper::parse(rules)?.principal_name(dn)
    }

    #[test]
    fn kafka_rule_examples() {
        let rules = "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U,RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U,DEFAULT";
        assert_eq!(
            map(rules, "CN=Duke,OU=ServiceUsers,O=Org,C=US").unwrap(),
            "Duke"
        );
        assert_eq!(
            map(rules, "CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US").unwrap(),
            "duke@sme"
        );
        assert_eq!(
            map(rules, "cn=duke,ou=javasoft,dc=mycp,dc=com").unwrap(),
            "DUKE@JAVASOFT"
        );
        assert_eq!(
            map(rules, "cN=duke,OU=JavaSoft,O=Sun Microsystems").unwrap(),
            "DUKE"
        );
        assert_eq!(
            map(rules, "OU=JavaSoft,O=Sun Microsystems,C=US").unwrap(),
            "OU=JavaSoft,O=Sun Microsystems,C=US"
        );
        assert_eq!(map("DEFAULT", "CN=alice").unwrap(), "CN=alice");
        assert_eq!(
            map(" RULE:^CN=(.*?),.*$/$1/ , DEFAULT ", "CN=alice,O=x").unwrap(),
            "alice"
        );
        assert_eq!(map("RULE:^CN=(.*)$/$1\\/x/", "CN=a").unwrap(), "a/x");
        // $2 with one group stays literal.
        assert_eq!(map("RULE:^CN=(.*)$/$1$2/", "CN=a").unwrap(), "a$2");
    }

    #[test]
    fn kafka_parse_errors() {
        for rules in [
            "default",
            "DEFAUL",
            "DEFAULT/L",
            "DEFAULT/U",
            "rule:^CN=(.*?),OU=ServiceUsers.*$/$1/",
            "RULE:/",
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1",
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/L",
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/U",
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/LU",
        ] {
            let err = SslPrincipalMapper::parse(rules).unwrap_err();
            assert!(err.starts_with("Invalid rule"), "{rules}: {err}");
        }
        let err = SslPrincipalMapper::parse("RULE:^CN=(.*?)$/$1/X").unwrap_err();
        assert_eq!(
            err,
            "Invalid rule: `RULE:^CN=(.*?)$/$1/X`, unmatched substring: `X`"
        );
        let err = map("RULE:^CN=(.*?),OU=x$/$1/", "CN=a").unwrap_err();
        assert_eq!(
            err,
            "No rules apply to CN=a, rules [RULE:^CN=(.*?),OU=x$/$1]"
        );
    }

    /// Results printed by Java for Kafka's rule logic (java.util.regex).
    #[test]
    fn agrees_with_java_regex_semantics() {
        let cases = [
            ("RULE:^CN=(.*?),OU=(.*?)$/$1$3/", "CN=a,OU=b", Ok("a$3")),
            ("RULE:(.*)/x/", "abc", Ok("xx")),
            (r"RULE:^(.*)$/\$1/", "abc", Ok("$1")),
            ("RULE:CN=([^,]*).*/$1/L, DEFAULT", "CN=Bob,O=x", Ok("bob")),
            ("RULE:^CN=(.*?),.*$/$12/", "CN=a,O=b", Ok("a2")),
            (
                "RULE:^CN=(a)(b)(c)(d)(e)(f)(g)(h)(i)(j)(k)$/$11-$10-$1/",
                "CN=abcdefghijk",
                Ok("k-j-a"),
            ),
            ("  RULE:a/b/ ,   DEFAULT  ", "zzz", Ok("zzz")),
            ("RULE:^CN=(.*)$/$1/U", "CN=straße", Ok("STRASSE")),
            (",DEFAULT", "CN=x", Ok("CN=x")),
            (
                "RULE:^CN=([^,]+)(,.*)?$/$1/",
                "CN=alice,OU=eng",
                Ok("alice"),
            ),
            ("RULE:^CN=(?<n>.*)$/x/", "CN=a", Ok("x")),
            ("RULE:^CN=(.*)$/$2$1/", "CN=a", Ok("$2a")),
            (
                "RULE:^CN=(.*)$/$/",
                "CN=a",
                Err("Illegal group reference: group index is missing"),
            ),
            (
                "RULE:^CN=(.*)$/$1/,RULE:bad(",
                "CN=a",
                Err("Invalid rule: `RULE:bad(`, unmatched substring: `RULE:bad(`"),
            ),
            ("", "CN=x", Err("No rules apply to CN=x, rules []")),
        ];
        for (rules, dn, expected) in cases {
            assert_eq!(
                map(rules, dn).as_deref(),
                expected.map_err(str::to_string).as_deref(),
                "{rules}"
            );
        }
    }

    #[test]
    fn long_subjects() {
        let mapper = SslPrincipalMapper::parse("RULE:^CN=(.*?)(,.*)?$/$1/").unwrap();
        let dn = format!("CN={}", "x".repeat(2000));
        assert_eq!(mapper.principal_name(&dn).unwrap().len(), 2000);
        let err = mapper
            .principal_name(&format!("CN={}", "x".repeat(5000)))
            .unwrap_err();
        assert!(err.starts_with("Distinguished name longer than"), "{err}");
    }

    #[test]
    fn escaping_like_java() {
        assert_eq!(escape_value("a,b=c+d"), "a\\,b\\=c\\+d");
        assert_eq!(escape_value(" #x "), "\\ \\#x\\ ");
        assert_eq!(escape_value("x\0"), "x\\00");
    }
}
