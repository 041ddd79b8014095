//! Tests of the `JaasConfig` and JAAS file parsers.

use super::*;
use crate::security::sasl::jaas_tokenizer::{Token, Tokenizer};

fn options(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn plain_login_module_with_users() {
    let text = r#"org.apache.kafka.common.security.plain.PlainLoginModule required
        username="admin" password="admin-secret"
        user_admin="admin-secret" user_alice="alice secret";"#;
    let entries = parse_jaas_config(text).expect("parses");
    assert_eq!(
        entries,
        vec![JaasEntry {
            login_module: PLAIN_LOGIN_MODULE.into(),
            control_flag: "required".into(),
            options: options(&[
                ("username", "admin"),
                ("password", "admin-secret"),
                ("user_admin", "admin-secret"),
                ("user_alice", "alice secret"),
            ]),
        }]
    );
    assert_eq!(
        jaas_option(&entries, "user_alice", PLAIN_LOGIN_MODULE),
        Some("alice secret")
    );
    assert_eq!(jaas_option(&entries, "user_bob", PLAIN_LOGIN_MODULE), None);
    assert_eq!(
        jaas_option(&entries, "user_alice", SCRAM_LOGIN_MODULE),
        None
    );
}

#[test]
fn quoting_escapes_words_and_comments() {
    let text = "a.B-c_$ OPTIONAL /* note */ k1=plain_word-1.2 k2='single \"q\"' // rest\n \
                k3=\"tab\\there \\101\\7x \\q \\\\ \\\"\" k4=\"cut\nk5=\"v\";";
    let entries = parse_jaas_config(text).expect("parses");
    let entry = &entries[0];
    assert_eq!(entry.login_module, "a.B-c_$");
    assert_eq!(entry.control_flag, "optional");
    assert_eq!(
        entry.options,
        options(&[
            ("k1", "plain_word-1.2"),
            ("k2", "single \"q\""),
            ("k3", "tab\there A\u{7}x q \\ \""),
            // An unterminated string ends at the line break.
            ("k4", "cut"),
            ("k5", "v"),
        ])
    );
}

#[test]
fn several_entries_and_duplicate_keys() {
    let text = "M1 required a=\"1\" a=\"2\"; M2 Sufficient; M1 requisite a=3x;";
    let entries = parse_jaas_config(text);
    // `3x` starts with a digit: a number, which has no text.
    assert_eq!(
        entries,
        Err("Value not specified for key 'a' in JAAS config".to_string())
    );
    let entries =
        parse_jaas_config("M1 required a=\"1\" a=\"2\"; M2 Sufficient; M1 requisite a=x;")
            .expect("parses");
    assert_eq!(entries.len(), 3);
    assert_eq!(entries[0].options, options(&[("a", "2")]));
    assert_eq!(entries[1].control_flag, "sufficient");
    assert_eq!(jaas_option(&entries, "a", "M1"), Some("2"));
}

#[test]
fn kafka_error_messages() {
    let cases = [
        ("", "Login module not specified in JAAS config"),
        (
            "  /* only a comment */ ",
            "Login module not specified in JAAS config",
        ),
        (
            "M",
            "Login module control flag not specified in JAAS config",
        ),
        (
            "M ;",
            "Login module control flag is not available in the JAAS config",
        ),
        (
            "M 5",
            "Login module control flag is not available in the JAAS config",
        ),
        (
            "M mandatory;",
            "Invalid login module control flag 'mandatory' in JAAS config",
        ),
        (
            "M required",
            "JAAS config entry not terminated by semi-colon",
        ),
        (
            "M required a=\"b\"",
            "JAAS config entry not terminated by semi-colon",
        ),
        (
            "M required a;",
            "Value not specified for key 'a' in JAAS config",
        ),
        (
            "M required a=;",
            "Value not specified for key 'a' in JAAS config",
        ),
        (
            "M required a=",
            "Value not specified for key 'a' in JAAS config",
        ),
        (
            "M required =b;",
            "Value not specified for key 'null' in JAAS config",
        ),
        (
            "M required a=-1;",
            "Value not specified for key 'a' in JAAS config",
        ),
        (
            "\"\" required;",
            "Login module name not specified in JAAS config",
        ),
    ];
    for (text, message) in cases {
        assert_eq!(
            parse_jaas_config(text),
            Err(message.to_string()),
            "{text:?}"
        );
    }
}

#[test]
fn tokenizer_quirks() {
    let mut t = Tokenizer::for_jaas_config("-x / skipped line\n- 1.5.2 \u{e9}t\u{e9} \\ \"\\");
    let mut tokens = Vec::new();
    loop {
        let token = t.next_token();
        if token == Token::Eof {
            break;
        }
        tokens.push(token);
    }
    assert_eq!(
        tokens,
        vec![
            Token::Ordinary('-'),
            Token::Word("x".into()),
            Token::Ordinary('-'),
            Token::Number,
            Token::Number,
            Token::Word("\u{e9}t\u{e9}".into()),
            Token::Ordinary('\\'),
            Token::Quoted('"', "\u{FFFF}".into()),
        ]
    );
    let mut t = Tokenizer::for_jaas_config("/* unterminated");
    assert_eq!(t.next_token(), Token::Eof);
    assert_eq!(t.next_token(), Token::Eof);
}

#[test]
fn jaas_file_sections() {
    let text = "// brokers\nKafkaServer {\n  org.apache.kafka.common.security.plain.PlainLoginModule required\n    \
                user_admin=\"admin-secret\";\n  M2 optional;\n};\n\
                sasl_ssl.KafkaServer { S* REQUIRED k=v; };\nClient { };";
    let sections = parse_jaas_file(text).expect("parses");
    assert_eq!(sections.len(), 3);
    let server = &sections["KafkaServer"];
    assert_eq!(
        jaas_option(server, "user_admin", PLAIN_LOGIN_MODULE),
        Some("admin-secret")
    );
    assert_eq!(server[1].control_flag, "optional");
    assert_eq!(sections["sasl_ssl.KafkaServer"][0].login_module, "S*");
    assert!(sections["Client"].is_empty());
}

#[test]
fn jaas_file_errors() {
    let cases = [
        (
            "A {",
            "Configuration Error:\n\texpected [module class name], read [end of file]",
        ),
        (
            "A\n{ M required k=v }",
            "Configuration Error:\n\tLine 2: expected [option key]",
        ),
        (
            "A { M bogus; };",
            "Configuration Error:\n\tInvalid control flag, BOGUS",
        ),
        (
            "A { M required k 'v'; };",
            "Configuration Error:\n\tLine 1: expected [=], found [v]",
        ),
        (
            "A { M required; }",
            "Configuration Error:\n\texpected [;], read [end of file]",
        ),
        (
            "A { }; A { };",
            "Configuration Error:\n\tCan not specify multiple entries for A",
        ),
        (
            "A M",
            "Configuration Error:\n\tLine 1: expected [{], found [M]",
        ),
    ];
    for (text, message) in cases {
        assert_eq!(parse_jaas_file(text), Err(message.to_string()), "{text:?}");
    }
}
