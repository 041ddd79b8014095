//! A parser for Java `.properties` files, following `java.util.Properties.load`:
//! `#`/`!` comments, `=`, `:` or whitespace separators, backslash line
//! continuation, `\uXXXX` and the other escapes. Later keys win, as in Java.

use std::collections::BTreeMap;
use std::fmt;

/// A syntax error with the 1-based line where the offending logical line starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PropertiesError {
    pub line: usize,
    pub message: String,
}

impl fmt::Display for PropertiesError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

impl std::error::Error for PropertiesError {}

/// Parses properties text into a map (duplicate keys: last wins).
pub fn parse_properties(text: &str) -> Result<BTreeMap<String, String>, PropertiesError> {
    let mut map = BTreeMap::new();
    for (key, value) in parse_properties_list(text)? {
        map.insert(key, value);
    }
    Ok(map)
}

/// Parses properties text into (key, value) pairs in file order.
pub fn parse_properties_list(text: &str) -> Result<Vec<(String, String)>, PropertiesError> {
    let lines: Vec<&str> = text.split('\n').collect();
    let mut out = Vec::new();
    let mut index = 0usize;
    while index < lines.len() {
        let start_line = index + 1;
        let first = strip_cr(lines[index]);
        index += 1;
        let trimmed = trim_leading(first);
        if trimmed.is_empty() || trimmed.starts_with('#') || trimmed.starts_with('!') {
            continue;
        }
        // Join continuation lines: an odd number of trailing backslashes
        // continues the logical line; the next line's leading blanks are dropped.
        let mut logical = String::from(trimmed);
        while ends_with_odd_backslashes(&logical) {
            logical.pop();
            if index >= lines.len() {
                break;
            }
            logical.push_str(trim_leading(strip_cr(lines[index])));
            index += 1;
        }
        let (raw_key, raw_value) = split_key_value(&logical);
        let key = unescape(raw_key, start_line)?;
        let value = unescape(raw_value, start_line)?;
        out.push((key, value));
    }
    Ok(out)
}

fn strip_cr(line: &str) -> &str {
    line.strip_suffix('\r').unwrap_or(line)
}

fn is_blank(c: char) -> bool {
    c == ' ' || c == '\t' || c == '\u{0c}'
}

fn trim_leading(s: &str) -> &str {
    s.trim_start_matches(is_blank)
}

fn ends_with_odd_backslashes(s: &str) -> bool {
    let count = s.chars().rev().take_while(|&c| c == '\\').count();
    count % 2 == 1
}

/// Splits at the first unescaped `=`, `:` or blank; blanks around the
/// separator and one `=`/`:` after blanks are consumed, as Java does.
fn split_key_value(line: &str) -> (&str, &str) {
    let bytes = line.as_bytes();
    let mut pos = 0usize;
    let mut escaped = false;
    while pos < bytes.len() {
        let b = bytes[pos];
        if escaped {
            escaped = false;
        } else if b == b'\\' {
            escaped = true;
        } else if b == b'=' || b == b':' || b == b' ' || b == b'\t' || b == 0x0c {
            break;
        }
        pos += 1;
    }
    let key = &line[..pos];
    let mut rest = &line[pos..];
    rest = trim_leading(rest);
    if let Some(stripped) = rest.strip_prefix(['=', ':']) {
        // Only one hard separator is consumed; `a==b` has value `=b`.
        rest = trim_leading(stripped);
    }
    (key, rest)
}

fn unescape(raw: &str, line: usize) -> Result<String, PropertiesError> {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let Some(next) = chars.next() else {
            // A lone trailing backslash (end of file continuation) is dropped.
            break;
        };
        match next {
            't' => out.push('\t'),
            'n' => out.push('\n'),
            'r' => out.push('\r'),
            'f' => out.push('\u{0c}'),
            'u' => {
                let mut code: u32 = 0;
                for _ in 0..4 {
                    let digit = chars.next().and_then(|d| d.to_digit(16)).ok_or_else(|| {
                        PropertiesError {
                            line,
                            message: "Malformed \\uxxxx encoding.".to_string(),
                        }
                    })?;
                    code = code * 16 + digit;
                }
                let decoded = decode_utf16_unit(code, &mut chars, line)?;
                out.push(decoded);
            }
            other => out.push(other),
        }
    }
    Ok(out)
}

/// Decodes one UTF-16 code unit, pairing a high surrogate with a following
/// `\uDCxx` escape; an unpaired surrogate becomes U+FFFD.
fn decode_utf16_unit(
    code: u32,
    chars: &mut std::str::Chars<'_>,
    line: usize,
) -> Result<char, PropertiesError> {
    if (0xD800..0xDC00).contains(&code) {
        let mut look = chars.clone();
        if look.next() == Some('\\') && look.next() == Some('u') {
            let mut low: u32 = 0;
            for _ in 0..4 {
                let digit =
                    look.next()
                        .and_then(|d| d.to_digit(16))
                        .ok_or_else(|| PropertiesError {
                            line,
                            message: "Malformed \\uxxxx encoding.".to_string(),
                        })?;
                low = low * 16 + digit;
            }
            if (0xDC00..0xE000).contains(&low) {
                *chars = look;
                let combined = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
                return Ok(char::from_u32(combined).unwrap_or('\u{fffd}'));
            }
        }
        return Ok('\u{fffd}');
    }
    Ok(char::from_u32(code).unwrap_or('\u{fffd}'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(text: &str) -> (String, String) {
        let list = parse_properties_list(text).unwrap();
        assert_eq!(list.len(), 1, "{list:?}");
        list.into_iter().next().unwrap()
    }

    #[test]
    fn separators() {
        assert_eq!(one("a=b"), ("a".into(), "b".into()));
        assert_eq!(one("a:b"), ("a".into(), "b".into()));
        assert_eq!(one("a b"), ("a".into(), "b".into()));
        assert_eq!(one("  a  =  b  "), ("a".into(), "b  ".into()));
        assert_eq!(one("a = = b"), ("a".into(), "= b".into()));
        assert_eq!(one("a"), ("a".into(), "".into()));
        assert_eq!(one("a="), ("a".into(), "".into()));
        assert_eq!(one("\ta\t:\tb"), ("a".into(), "b".into()));
        assert_eq!(one("a==b"), ("a".into(), "=b".into()));
    }

    #[test]
    fn comments_and_blank_lines() {
        let map = parse_properties("# c\n! d\n\n   \n  # indented\nx=1\r\ny = 2\r\n").unwrap();
        assert_eq!(map.len(), 2);
        assert_eq!(map["x"], "1");
        assert_eq!(map["y"], "2");
    }

    #[test]
    fn escapes() {
        assert_eq!(one(r"a\=b=c"), ("a=b".into(), "c".into()));
        assert_eq!(one(r"a\ b c"), ("a b".into(), "c".into()));
        assert_eq!(
            one(r"k=\t\n\r\f\\\q"),
            ("k".into(), "\t\n\r\u{0c}\\q".into())
        );
        assert_eq!(one(r"k=\u0041\u00e9"), ("k".into(), "Aé".into()));
        assert_eq!(one(r"k=\ud83d\ude00"), ("k".into(), "😀".into()));
        assert_eq!(one(r"k=\ud83dx"), ("k".into(), "\u{fffd}x".into()));
        let err = parse_properties("a=1\nk=\\u12g4\n").unwrap_err();
        assert_eq!(err.line, 2);
        assert!(parse_properties("k=\\u12").is_err());
    }

    #[test]
    fn continuation() {
        let map = parse_properties("a=one,\\\n    two,\\\n\tthree\nb=x\\\\\nc=y").unwrap();
        assert_eq!(map["a"], "one,two,three");
        assert_eq!(map["b"], "x\\");
        assert_eq!(map["c"], "y");
        // Continuation at end of file and a comment-looking continued line.
        let map = parse_properties("a=1\\\n# not a comment\nb=\\").unwrap();
        assert_eq!(map["a"], "1# not a comment");
        assert_eq!(map["b"], "");
        // Error line numbers count physical lines.
        let err = parse_properties("x=\\\n y\n\nz=\\uZZZZ").unwrap_err();
        assert_eq!(err.line, 4);
    }

    #[test]
    fn last_wins_and_unicode_keys() {
        let map = parse_properties("k=1\nk=2\nключ=значение\n").unwrap();
        assert_eq!(map["k"], "2");
        assert_eq!(map["ключ"], "значение");
    }
}
