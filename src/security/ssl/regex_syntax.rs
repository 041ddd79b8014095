//! The pattern syntax half of the `java.util.regex.Pattern` subset used by
//! Kafka's `SslPrincipalMapper`: the parsed tree and its parser.

#[derive(Debug, Clone)]
pub(super) enum Node {
    Char(char),
    Any,
    Class(Class),
    Start,
    End,
    /// Alternatives, each a sequence; `Some(i)` captures as group `i`.
    Group(Vec<Vec<Node>>, Option<usize>),
    Repeat(Box<Node>, u32, Option<u32>, bool),
}

#[derive(Debug, Clone)]
pub(super) struct Class {
    negated: bool,
    items: Vec<ClassItem>,
}

#[derive(Debug, Clone)]
pub(super) enum ClassItem {
    Range(char, char),
    Digit(bool),
    Word(bool),
    Space(bool),
}

impl ClassItem {
    fn matches(&self, c: char) -> bool {
        match *self {
            ClassItem::Range(lo, hi) => lo <= c && c <= hi,
            ClassItem::Digit(neg) => c.is_ascii_digit() != neg,
            ClassItem::Word(neg) => (c.is_ascii_alphanumeric() || c == '_') != neg,
            ClassItem::Space(neg) => matches!(c, ' ' | '\t' | '\n' | '\x0B' | '\x0C' | '\r') != neg,
        }
    }
}

impl Class {
    pub(super) fn matches(&self, c: char) -> bool {
        self.items.iter().any(|i| i.matches(c)) != self.negated
    }
}

struct Parser<'a> {
    chars: &'a [char],
    pos: usize,
    groups: usize,
}

impl Parser<'_> {
    fn err(&self, what: &str) -> String {
        format!("{what} near index {}", self.pos)
    }

    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn alternation(&mut self) -> Result<Vec<Vec<Node>>, String> {
        let mut alts = vec![self.sequence()?];
        while self.peek() == Some('|') {
            self.pos += 1;
            alts.push(self.sequence()?);
        }
        Ok(alts)
    }

    fn sequence(&mut self) -> Result<Vec<Node>, String> {
        let mut seq = Vec::new();
        while let Some(c) = self.peek() {
            if c == '|' || c == ')' {
                break;
            }
            let atom = self.atom()?;
            seq.push(self.quantified(atom)?);
        }
        Ok(seq)
    }

    fn atom(&mut self) -> Result<Node, String> {
        let c = self.peek().ok_or_else(|| self.err("Unexpected end"))?;
        self.pos += 1;
        Ok(match c {
            '.' => Node::Any,
            '^' => Node::Start,
            '$' => Node::End,
            '[' => Node::Class(self.class()?),
            '\\' => self.escape()?,
            '(' => self.group()?,
            '*' | '+' | '?' | '{' => return Err(self.err("Dangling meta character")),
            c => Node::Char(c),
        })
    }

    fn group(&mut self) -> Result<Node, String> {
        let named = self
            .chars
            .get(self.pos..self.pos + 3)
            .is_some_and(|c| c[0] == '?' && c[1] == '<' && c[2].is_ascii_alphabetic());
        let index = if self.chars.get(self.pos..self.pos + 2) == Some(&['?', ':']) {
            self.pos += 2;
            None
        } else if named {
            // A named group captures like a numbered one; the name itself is not used.
            let close = self.chars[self.pos..]
                .iter()
                .position(|c| *c == '>')
                .ok_or_else(|| self.err("Named capturing group is missing trailing '>'"))?;
            self.pos += close + 1;
            self.groups += 1;
            Some(self.groups)
        } else if self.peek() == Some('?') {
            return Err(self.err("Unsupported group construct"));
        } else {
            self.groups += 1;
            Some(self.groups)
        };
        let alts = self.alternation()?;
        if self.peek() != Some(')') {
            return Err(self.err("Unclosed group"));
        }
        self.pos += 1;
        Ok(Node::Group(alts, index))
    }

    /// After a backslash: a class shorthand or a literal character.
    fn escape(&mut self) -> Result<Node, String> {
        let c = self
            .peek()
            .ok_or_else(|| self.err("Unexpected internal error"))?;
        self.pos += 1;
        let item = match c {
            'd' | 'D' => ClassItem::Digit(c == 'D'),
            'w' | 'W' => ClassItem::Word(c == 'W'),
            's' | 'S' => ClassItem::Space(c == 'S'),
            't' => return Ok(Node::Char('\t')),
            'n' => return Ok(Node::Char('\n')),
            'r' => return Ok(Node::Char('\r')),
            'f' => return Ok(Node::Char('\x0C')),
            c if c.is_ascii_alphanumeric() => {
                return Err(self.err("Illegal/unsupported escape sequence"))
            }
            c => return Ok(Node::Char(c)),
        };
        Ok(Node::Class(Class {
            negated: false,
            items: vec![item],
        }))
    }

    fn class(&mut self) -> Result<Class, String> {
        let negated = self.peek() == Some('^');
        if negated {
            self.pos += 1;
        }
        let mut items = Vec::new();
        let mut first = true;
        loop {
            let c = self
                .peek()
                .ok_or_else(|| self.err("Unclosed character class"))?;
            self.pos += 1;
            if c == ']' && !first {
                return Ok(Class { negated, items });
            }
            first = false;
            let lo = match c {
                '\\' => match self.escape()? {
                    Node::Char(ch) => ch,
                    Node::Class(inner) => {
                        items.extend(inner.items);
                        continue;
                    }
                    _ => return Err(self.err("Illegal escape in class")),
                },
                '[' | '&' => return Err(self.err("Unsupported class construct")),
                c => c,
            };
            let is_range =
                self.peek() == Some('-') && self.chars.get(self.pos + 1).is_some_and(|&n| n != ']');
            if !is_range {
                items.push(ClassItem::Range(lo, lo));
                continue;
            }
            self.pos += 1;
            let hi = match self.peek() {
                Some('\\') => {
                    self.pos += 1;
                    match self.escape()? {
                        Node::Char(ch) => ch,
                        _ => return Err(self.err("Illegal character range")),
                    }
                }
                Some(h) => {
                    self.pos += 1;
                    h
                }
                None => return Err(self.err("Unclosed character class")),
            };
            if hi < lo {
                return Err(self.err("Illegal character range"));
            }
            items.push(ClassItem::Range(lo, hi));
        }
    }

    fn quantified(&mut self, atom: Node) -> Result<Node, String> {
        let (min, max) = match self.peek() {
            Some('*') => (0, None),
            Some('+') => (1, None),
            Some('?') => (0, Some(1)),
            Some('{') => return self.braces(atom),
            _ => return Ok(atom),
        };
        self.pos += 1;
        self.finish_repeat(atom, min, max)
    }

    fn braces(&mut self, atom: Node) -> Result<Node, String> {
        self.pos += 1;
        let min = self
            .number()
            .ok_or_else(|| self.err("Illegal repetition"))?;
        let max = if self.peek() == Some(',') {
            self.pos += 1;
            self.number()
        } else {
            Some(min)
        };
        if self.peek() != Some('}') || max.is_some_and(|m| m < min) {
            return Err(self.err("Illegal repetition range"));
        }
        self.pos += 1;
        self.finish_repeat(atom, min, max)
    }

    fn number(&mut self) -> Option<u32> {
        let start = self.pos;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.pos += 1;
        }
        let digits: String = self.chars.get(start..self.pos)?.iter().collect();
        digits.parse().ok()
    }

    fn finish_repeat(&mut self, atom: Node, min: u32, max: Option<u32>) -> Result<Node, String> {
        if matches!(atom, Node::Start | Node::End) {
            return Err(self.err("Dangling meta character"));
        }
        // Possessive `+` is treated as greedy: close enough for DN rules.
        let greedy = match self.peek() {
            Some('?') => {
                self.pos += 1;
                false
            }
            Some('+') => {
                self.pos += 1;
                true
            }
            _ => true,
        };
        Ok(Node::Repeat(Box::new(atom), min, max, greedy))
    }
}

/// Parses a pattern: its alternatives and the number of capturing groups.
pub(super) fn parse(source: &str) -> Result<(Vec<Vec<Node>>, usize), String> {
    let chars: Vec<char> = source.chars().collect();
    let mut p = Parser {
        chars: &chars,
        pos: 0,
        groups: 0,
    };
    let alts = p.alternation()?;
    if p.pos != chars.len() {
        return Err(format!(
            "Unmatched closing ')' near index {} in {source}",
            p.pos
        ));
    }
    Ok((alts, p.groups))
}
