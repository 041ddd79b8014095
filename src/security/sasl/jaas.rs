//! Kafka's `JaasConfig` (the parser of `sasl.jaas.config` values), the
//! JDK's JAAS `ConfigFile` (files named by `java.security.auth.login.config`)
//! and `JaasContext.configEntryOption`.

use std::collections::BTreeMap;

use super::jaas_tokenizer::{Token, Tokenizer};

pub const PLAIN_LOGIN_MODULE: &str = "org.apache.kafka.common.security.plain.PlainLoginModule";
pub const SCRAM_LOGIN_MODULE: &str = "org.apache.kafka.common.security.scram.ScramLoginModule";

/// One `LoginModule flag key=value ...;` entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JaasEntry {
    pub login_module: String,
    /// `required`, `requisite`, `sufficient` or `optional` (any case in the
    /// source; stored lower case as Java's `LoginModuleControlFlag` prints).
    pub control_flag: String,
    pub options: BTreeMap<String, String>,
}

/// `JaasContext.configEntryOption`: the first entry of `login_module`
/// having `key`. PLAIN's users are `user_<name>` of PLAIN_LOGIN_MODULE.
pub fn jaas_option<'a>(entries: &'a [JaasEntry], key: &str, login_module: &str) -> Option<&'a str> {
    entries
        .iter()
        .filter(|e| e.login_module == login_module)
        .find_map(|e| e.options.get(key).map(String::as_str))
}

const CONTROL_FLAGS: [&str; 4] = ["required", "requisite", "sufficient", "optional"];

/// The canonical flag for `flag` in any case (Java upper-cases it).
fn control_flag(flag: &str) -> Option<&'static str> {
    let upper = flag.to_uppercase();
    CONTROL_FLAGS
        .into_iter()
        .find(|f| f.to_uppercase() == upper)
}

/// Kafka's `JaasConfig`: one or more entries, each ended by `;`. Errors
/// carry Kafka's IllegalArgumentException messages.
pub fn parse_jaas_config(text: &str) -> Result<Vec<JaasEntry>, String> {
    let mut tokens = Tokenizer::for_jaas_config(text);
    let mut entries = Vec::new();
    loop {
        let first = tokens.next_token();
        if first == Token::Eof {
            break;
        }
        entries.push(config_entry(&mut tokens, first)?);
    }
    if entries.is_empty() {
        return Err("Login module not specified in JAAS config".into());
    }
    Ok(entries)
}

fn config_entry(tokens: &mut Tokenizer<'_>, first: Token) -> Result<JaasEntry, String> {
    let login_module = first.text().map(str::to_string);
    let flag_token = tokens.next_token();
    if flag_token == Token::Eof {
        return Err("Login module control flag not specified in JAAS config".into());
    }
    let Some(flag) = flag_token.text() else {
        return Err("Login module control flag is not available in the JAAS config".into());
    };
    let Some(control_flag) = control_flag(flag) else {
        return Err(format!(
            "Invalid login module control flag '{flag}' in JAAS config"
        ));
    };
    let mut options = BTreeMap::new();
    let mut token = tokens.next_token();
    while token != Token::Eof && token != Token::Ordinary(';') {
        // Java prints a missing key as "null".
        let key = token.text().unwrap_or("null").to_string();
        let missing = || format!("Value not specified for key '{key}' in JAAS config");
        if tokens.next_token() != Token::Ordinary('=') {
            return Err(missing());
        }
        let value = tokens.next_token();
        let Some(value) = value.text() else {
            return Err(missing());
        };
        options.insert(key.clone(), value.to_string());
        token = tokens.next_token();
    }
    if token != Token::Ordinary(';') {
        return Err("JAAS config entry not terminated by semi-colon".into());
    }
    // Java's AppConfigurationEntry throws a bare IllegalArgumentException.
    let login_module = login_module
        .filter(|m| !m.is_empty())
        .ok_or("Login module name not specified in JAAS config")?;
    Ok(JaasEntry {
        login_module,
        control_flag: control_flag.to_string(),
        options,
    })
}

/// The JDK's `ConfigFile` parser over `Name { entry; ... };` sections.
/// Errors carry its "Configuration Error" texts. `${property}` expansion
/// in values is not done (values are kept as written).
pub fn parse_jaas_file(text: &str) -> Result<BTreeMap<String, Vec<JaasEntry>>, String> {
    let mut parser = FileParser {
        tokens: Tokenizer::for_jaas_file(text),
        lookahead: Token::Eof,
        line: 1,
    };
    parser.advance();
    let mut sections = BTreeMap::new();
    let mut unnamed_seen = false;
    while parser.lookahead != Token::Eof {
        let name = parser.lookahead.text().map(str::to_string);
        parser.advance();
        let entries = parser.section_body()?;
        let duplicate = match &name {
            Some(name) => sections.contains_key(name),
            None => std::mem::replace(&mut unnamed_seen, true),
        };
        if duplicate {
            let shown = name.as_deref().unwrap_or("null");
            return Err(format!(
                "Configuration Error:\n\tCan not specify multiple entries for {shown}"
            ));
        }
        // Java files a nameless section under null, which no lookup finds.
        if let Some(name) = name {
            sections.insert(name, entries);
        }
    }
    Ok(sections)
}

struct FileParser<'a> {
    tokens: Tokenizer<'a>,
    lookahead: Token,
    /// ConfigFile's own count: line ends seen as tokens, from 1.
    line: u32,
}

impl FileParser<'_> {
    fn advance(&mut self) {
        loop {
            self.lookahead = self.tokens.next_token();
            if self.lookahead != Token::Eol {
                return;
            }
            self.line += 1;
        }
    }

    fn peek(&self, c: char) -> bool {
        self.lookahead == Token::Ordinary(c)
    }

    /// `{ entry; ... };` after the section name.
    fn section_body(&mut self) -> Result<Vec<JaasEntry>, String> {
        self.expect_char('{')?;
        let mut entries = Vec::new();
        while !self.peek('}') {
            let login_module = self.expect_text("module class name")?;
            let flag = self.expect_text("controlFlag")?;
            let control_flag = control_flag(&flag).ok_or_else(|| {
                format!(
                    "Configuration Error:\n\tInvalid control flag, {}",
                    flag.to_uppercase()
                )
            })?;
            let mut options = BTreeMap::new();
            while !self.peek(';') {
                let key = self.expect_text("option key")?;
                self.expect_char('=')?;
                let value = self.expect_text("option value")?;
                options.insert(key, value);
            }
            self.advance();
            entries.push(JaasEntry {
                login_module,
                control_flag: control_flag.to_string(),
                options,
            });
        }
        self.expect_char('}')?;
        self.expect_char(';')?;
        Ok(entries)
    }

    /// ConfigFile's `match` for a word or `"`-quoted string.
    fn expect_text(&mut self, expect: &str) -> Result<String, String> {
        match &self.lookahead {
            Token::Eof => Err(end_of_file(expect)),
            Token::Word(text) | Token::Quoted('"', text) => {
                let text = text.clone();
                self.advance();
                Ok(text)
            }
            _ => Err(self.mismatch(expect)),
        }
    }

    /// ConfigFile's `match` for one of `{ } ; =`.
    fn expect_char(&mut self, expect: char) -> Result<(), String> {
        match &self.lookahead {
            Token::Eof => Err(end_of_file(&expect.to_string())),
            Token::Ordinary(c) if *c == expect => {
                self.advance();
                Ok(())
            }
            _ => Err(self.mismatch(&expect.to_string())),
        }
    }

    /// ConfigFile's message for an unexpected lookahead: punctuation it
    /// knows is not shown, anything else is (Java's null when textless).
    fn mismatch(&self, expect: &str) -> String {
        let line = self.line;
        match &self.lookahead {
            Token::Ordinary('{' | '}' | ';' | '=') => {
                format!("Configuration Error:\n\tLine {line}: expected [{expect}]")
            }
            other => {
                let found = other.text().unwrap_or("null");
                format!("Configuration Error:\n\tLine {line}: expected [{expect}], found [{found}]")
            }
        }
    }
}

fn end_of_file(expect: &str) -> String {
    format!("Configuration Error:\n\texpected [{expect}], read [end of file]")
}

#[cfg(test)]
#[path = "jaas_tests.rs"]
mod tests;
