//! Java's `String.hashCode`, which Kafka's placement rules hash with
//! (`partitionFor` of the group and transaction coordinators, the fetcher
//! thread a partition goes to).

/// `s.hashCode()` over UTF-16 code units, wrapping as Java's `int` does.
pub fn java_string_hash(s: &str) -> i32 {
    let mut h: i32 = 0;
    for unit in s.encode_utf16() {
        h = h.wrapping_mul(31).wrapping_add(unit as i32);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::java_string_hash;

    #[test]
    fn matches_java() {
        assert_eq!(java_string_hash(""), 0);
        assert_eq!(java_string_hash("a"), 97);
        assert_eq!(java_string_hash("hello"), 99162322);
        assert_eq!(java_string_hash("polygenelubricants"), i32::MIN);
        assert_eq!(java_string_hash("\u{1F600}"), 0xD83D * 31 + 0xDE00);
    }
}
