//! `java.io.StreamTokenizer` as Kafka's `JaasConfig` and the JDK's JAAS
//! `ConfigFile` set it up: `//` and `/* */` comments (a lone `/` comments
//! out the rest of the line), numbers parsed (so a token starting with a
//! digit, `.` or `-` is a number without text), words of letters, digits
//! and `.-_$` (plus `*` in files), and `"` / `'` quoted strings with
//! C-style escapes that end, unterminated, at a line break.

use std::str::Chars;

/// One token. Only words and quoted strings carry text (Java's `sval`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Token {
    Eof,
    /// A line end, when line ends are significant.
    Eol,
    Number,
    Word(String),
    /// The quote character and the unescaped contents.
    Quoted(char, String),
    Ordinary(char),
}

impl Token {
    /// Java's `sval` after this token.
    pub fn text(&self) -> Option<&str> {
        match self {
            Token::Word(s) | Token::Quoted(_, s) => Some(s),
            _ => None,
        }
    }
}

/// Java's `peekc`: what the previous token left behind.
#[derive(Clone, Copy)]
enum Pending {
    NeedChar,
    /// After a significant `\r`: a following `\n` belongs to it.
    SkipLf,
    Char(Option<char>),
}

pub(crate) struct Tokenizer<'a> {
    input: Chars<'a>,
    pending: Pending,
    eol_significant: bool,
    star_is_word: bool,
}

impl<'a> Tokenizer<'a> {
    /// `JaasConfig`'s setup: line ends are white space.
    pub fn for_jaas_config(text: &'a str) -> Self {
        Tokenizer {
            input: text.chars(),
            pending: Pending::NeedChar,
            eol_significant: false,
            star_is_word: false,
        }
    }

    /// `ConfigFile`'s setup: line ends are tokens and `*` is a word char.
    pub fn for_jaas_file(text: &'a str) -> Self {
        Tokenizer {
            input: text.chars(),
            pending: Pending::NeedChar,
            eol_significant: true,
            star_is_word: true,
        }
    }

    fn read(&mut self) -> Option<char> {
        self.input.next()
    }

    fn is_word_char(&self, c: char) -> bool {
        c.is_ascii_alphabetic()
            || matches!(c, '-' | '_' | '$')
            || (self.star_is_word && c == '*')
            || u32::from(c) >= 0xA0
    }

    fn is_number_char(c: char) -> bool {
        c.is_ascii_digit() || c == '.' || c == '-'
    }

    pub fn next_token(&mut self) -> Token {
        // Comments restart the scan; a loop rather than Java's recursion.
        loop {
            if let Some(token) = self.scan() {
                return token;
            }
        }
    }

    /// One step of Java's `nextToken`; None when a comment was skipped.
    fn scan(&mut self) -> Option<Token> {
        let mut c = match std::mem::replace(&mut self.pending, Pending::NeedChar) {
            Pending::NeedChar => self.read(),
            Pending::SkipLf => match self.read() {
                Some('\n') => self.read(),
                other => other,
            },
            Pending::Char(c) => c,
        };
        // White space: everything up to ' '.
        while let Some(ch) = c.filter(|&ch| ch <= ' ') {
            if ch == '\r' || ch == '\n' {
                if self.eol_significant {
                    if ch == '\r' {
                        self.pending = Pending::SkipLf;
                    }
                    return Some(Token::Eol);
                }
                c = self.read();
                if ch == '\r' && c == Some('\n') {
                    c = self.read();
                }
            } else {
                c = self.read();
            }
        }
        let Some(ch) = c else {
            return Some(Token::Eof);
        };
        if Self::is_number_char(ch) {
            return Some(self.number(ch));
        }
        if self.is_word_char(ch) {
            return Some(self.word(ch));
        }
        if ch == '"' || ch == '\'' {
            return Some(self.quoted(ch));
        }
        if ch == '/' {
            self.comment();
            return None;
        }
        Some(Token::Ordinary(ch))
    }

    fn number(&mut self, first: char) -> Token {
        let mut c = Some(first);
        if first == '-' {
            c = self.read();
            if !c.is_some_and(|d| d == '.' || d.is_ascii_digit()) {
                self.pending = Pending::Char(c);
                return Token::Ordinary('-');
            }
        }
        let mut seen_dot = false;
        while let Some(d) = c {
            if d == '.' && !seen_dot {
                seen_dot = true;
            } else if !d.is_ascii_digit() {
                break;
            }
            c = self.read();
        }
        self.pending = Pending::Char(c);
        Token::Number
    }

    fn word(&mut self, first: char) -> Token {
        let mut word = String::from(first);
        let mut c = self.read();
        while let Some(d) = c.filter(|&d| self.is_word_char(d) || Self::is_number_char(d)) {
            word.push(d);
            c = self.read();
        }
        self.pending = Pending::Char(c);
        Token::Word(word)
    }

    fn quoted(&mut self, quote: char) -> Token {
        let mut text = String::new();
        let mut d = self.read();
        while let Some(ch) = d.filter(|&ch| ch != quote && ch != '\n' && ch != '\r') {
            if ch == '\\' {
                let (unescaped, next) = self.escape();
                text.push(unescaped);
                d = next;
            } else {
                text.push(ch);
                d = self.read();
            }
        }
        self.pending = if d == Some(quote) {
            Pending::NeedChar
        } else {
            Pending::Char(d)
        };
        Token::Quoted(quote, text)
    }

    /// After a backslash: the character it stands for and the lookahead.
    fn escape(&mut self) -> (char, Option<char>) {
        let Some(first) = self.read() else {
            // Java stores (char) -1 for a backslash at the end.
            return ('\u{FFFF}', None);
        };
        let Some(mut value) = first.to_digit(8) else {
            let unescaped = match first {
                'a' => '\u{7}',
                'b' => '\u{8}',
                'f' => '\u{C}',
                'n' => '\n',
                'r' => '\r',
                't' => '\t',
                'v' => '\u{B}',
                other => other,
            };
            return (unescaped, self.read());
        };
        // Up to three octal digits, the third only after 0-3 (so \377 max).
        let mut next = self.read();
        if let Some(second) = next.and_then(|c| c.to_digit(8)) {
            value = value * 8 + second;
            next = self.read();
            if let Some(third) = next.and_then(|c| c.to_digit(8)).filter(|_| first <= '3') {
                value = value * 8 + third;
                next = self.read();
            }
        }
        (char::from_u32(value).unwrap_or('\u{FFFD}'), next)
    }

    /// After a `/`: a `/* */` block, or the rest of the line (`//`, and a
    /// lone `/` as the default comment character).
    fn comment(&mut self) {
        if self.read() == Some('*') {
            self.block_comment();
            return;
        }
        // `//` and a lone `/` (the default comment character) both skip to
        // the line end; as in Java, the character after the first `/` is
        // consumed unseen, even a line break.
        let mut c = self.read();
        while !matches!(c, None | Some('\n') | Some('\r')) {
            c = self.read();
        }
        self.pending = Pending::Char(c);
    }

    /// Java's `/* */` loop, quirks included: after a line break the next
    /// character is taken without testing it for the closing `*/`.
    fn block_comment(&mut self) {
        let mut previous = None;
        loop {
            let mut c = self.read();
            if c == Some('/') && previous == Some('*') {
                return;
            }
            match c {
                Some('\r') => {
                    c = self.read();
                    if c == Some('\n') {
                        c = self.read();
                    }
                }
                Some('\n') => c = self.read(),
                _ => {}
            }
            if c.is_none() {
                // End of input inside the comment: the next scan sees EOF.
                self.pending = Pending::Char(None);
                return;
            }
            previous = c;
        }
    }
}
