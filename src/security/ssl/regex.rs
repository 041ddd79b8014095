//! A small backtracking matcher for the subset of `java.util.regex.Pattern`
//! that `SslPrincipalMapper` rules use (and that its own rule parser is
//! written in): literals, `.`, classes, `\d\w\s`, groups, `(?:)`, `|`,
//! greedy and lazy `* + ? {n,m}`, `^` and `$`. Java's `matches`,
//! `lookingAt`, `find` and `replaceAll` are mirrored on top of it.

use super::regex_syntax::{self, Node};
use std::cell::Cell;

/// Backtracking steps allowed per operation, so a pathological rule cannot
/// stall a shard; running out is an error, never a silent non-match.
const STEP_BUDGET: u64 = 2_000_000;
/// Nesting of the recursive matcher (about one level per character
/// consumed), kept well inside a 2 MiB thread stack.
const MAX_DEPTH: usize = 1_000;

/// A compiled pattern.
#[derive(Debug, Clone)]
pub(crate) struct Regex {
    source: String,
    /// The whole pattern as one non-capturing group.
    root: Vec<Node>,
    groups: usize,
}

/// Group spans (in chars) of one match; index 0 is the whole match.
pub(crate) type Captures = Vec<Option<(usize, usize)>>;

type Cont<'k> = &'k mut dyn FnMut(usize, &mut Captures) -> bool;

struct Matcher<'a> {
    input: &'a [char],
    steps: Cell<u64>,
    depth: Cell<usize>,
    exhausted: Cell<bool>,
}

impl Matcher<'_> {
    fn new(input: &[char]) -> Matcher<'_> {
        Matcher {
            input,
            steps: Cell::new(0),
            depth: Cell::new(0),
            exhausted: Cell::new(false),
        }
    }

    fn seq(&self, seq: &[Node], pos: usize, caps: &mut Captures, k: Cont<'_>) -> bool {
        match seq.split_first() {
            None => k(pos, caps),
            Some((node, rest)) => self.node(node, pos, caps, &mut |p, c| self.seq(rest, p, c, k)),
        }
    }

    fn node(&self, node: &Node, pos: usize, caps: &mut Captures, k: Cont<'_>) -> bool {
        let steps = self.steps.get() + 1;
        let depth = self.depth.get() + 1;
        if steps > STEP_BUDGET || depth > MAX_DEPTH || self.exhausted.get() {
            self.exhausted.set(true);
            return false;
        }
        self.steps.set(steps);
        self.depth.set(depth);
        let matched = self.step(node, pos, caps, k);
        self.depth.set(depth - 1);
        matched
    }

    fn step(&self, node: &Node, pos: usize, caps: &mut Captures, k: Cont<'_>) -> bool {
        if let Some(single) = single_char(node, self.input.get(pos).copied()) {
            return single && k(pos + 1, caps);
        }
        match node {
            Node::Char(_) | Node::Any | Node::Class(_) => false,
            Node::Start => pos == 0 && k(pos, caps),
            Node::End => pos == self.input.len() && k(pos, caps),
            Node::Group(alts, index) => alts.iter().any(|alt| {
                self.seq(alt, pos, caps, &mut |p, c| match index {
                    None => k(p, c),
                    Some(i) => {
                        let saved = c.get(*i).copied().flatten();
                        set(c, *i, Some((pos, p)));
                        k(p, c) || {
                            set(c, *i, saved);
                            false
                        }
                    }
                })
            }),
            Node::Repeat(inner, min, max, greedy) => {
                self.repeat(inner, (*min, *max, *greedy), 0, pos, caps, k)
            }
        }
    }

    /// A repeated single-character node, iteratively: `.*` over a long
    /// subject must not recurse once per character.
    fn repeat_chars(
        &self,
        inner: &Node,
        spec: (u32, Option<u32>, bool),
        pos: usize,
        caps: &mut Captures,
        k: Cont<'_>,
    ) -> bool {
        let (min, max, greedy) = spec;
        let limit = max.map_or(usize::MAX, |m| m as usize);
        let mut n = 0;
        while n < limit && single_char(inner, self.input.get(pos + n).copied()) == Some(true) {
            n += 1;
        }
        let min = min as usize;
        if n < min {
            return false;
        }
        let mut attempt = |i: usize| {
            let steps = self.steps.get() + 1;
            self.steps.set(steps);
            if steps > STEP_BUDGET {
                self.exhausted.set(true);
            }
            !self.exhausted.get() && k(pos + i, caps)
        };
        if greedy {
            (min..=n).rev().any(&mut attempt)
        } else {
            (min..=n).any(&mut attempt)
        }
    }

    fn repeat(
        &self,
        inner: &Node,
        spec: (u32, Option<u32>, bool),
        count: u32,
        pos: usize,
        caps: &mut Captures,
        k: Cont<'_>,
    ) -> bool {
        if count == 0 && single_char(inner, None).is_some() {
            return self.repeat_chars(inner, spec, pos, caps, k);
        }
        let (min, max, greedy) = spec;
        let can_more = max.is_none_or(|m| count < m);
        let more = |c: &mut Captures, k: Cont<'_>| {
            can_more
                && self.node(inner, pos, c, &mut |p, c2| {
                    // An empty iteration past the minimum would loop forever.
                    (p != pos || count < min)
                        && self.repeat(inner, spec, count.saturating_add(1), p, c2, k)
                })
        };
        if count < min {
            more(caps, k)
        } else if greedy {
            more(caps, &mut *k) || k(pos, caps)
        } else {
            k(pos, caps) || more(caps, k)
        }
    }
}

/// For a node that consumes exactly one character: whether it matches
/// `c` (no character never matches); None for any other node.
fn single_char(node: &Node, c: Option<char>) -> Option<bool> {
    let matches = match node {
        Node::Char(want) => c == Some(*want),
        Node::Any => c.is_some_and(|c| c != '\n' && c != '\r'),
        Node::Class(class) => c.is_some_and(|c| class.matches(c)),
        _ => return None,
    };
    Some(matches)
}

fn set(caps: &mut Captures, i: usize, v: Option<(usize, usize)>) {
    if let Some(slot) = caps.get_mut(i) {
        *slot = v;
    }
}

impl Regex {
    pub(crate) fn new(source: &str) -> Result<Regex, String> {
        let (alts, groups) = regex_syntax::parse(source)?;
        Ok(Regex {
            source: source.to_string(),
            root: vec![Node::Group(alts, None)],
            groups,
        })
    }

    pub(crate) fn as_str(&self) -> &str {
        &self.source
    }

    pub(crate) fn group_count(&self) -> usize {
        self.groups
    }

    /// Runs `f` with one matcher, so the step budget covers the whole operation.
    fn run<T>(&self, input: &[char], f: impl FnOnce(&Matcher<'_>) -> T) -> Result<T, String> {
        let m = Matcher::new(input);
        let out = f(&m);
        if m.exhausted.get() {
            return Err(format!(
                "Pattern {} is too complex for the input",
                self.source
            ));
        }
        Ok(out)
    }

    /// A match starting exactly at `start`; `whole` demands it end at the end.
    fn match_at(&self, m: &Matcher<'_>, start: usize, whole: bool) -> Option<Captures> {
        let mut caps: Captures = vec![None; self.groups + 1];
        let mut found = None;
        m.seq(&self.root, start, &mut caps, &mut |p, c| {
            if whole && p != m.input.len() {
                return false;
            }
            let mut out = c.clone();
            set(&mut out, 0, Some((start, p)));
            found = Some(out);
            true
        });
        found
    }

    /// Java's `Matcher.matches()`.
    pub(crate) fn matches(&self, input: &[char]) -> Result<Option<Captures>, String> {
        self.run(input, |m| self.match_at(m, 0, true))
    }

    /// Java's `Matcher.lookingAt()`.
    pub(crate) fn looking_at(&self, input: &[char]) -> Result<Option<Captures>, String> {
        self.run(input, |m| self.match_at(m, 0, false))
    }

    /// Every match as `Matcher.find()` loops over them (an empty match moves on one char).
    pub(crate) fn find_all(&self, input: &[char]) -> Result<Vec<Captures>, String> {
        self.run(input, |m| {
            let mut out = Vec::new();
            let mut from = 0;
            while let Some(caps) = (from..=input.len()).find_map(|s| self.match_at(m, s, false)) {
                let Some(Some((s, e))) = caps.first().copied() else {
                    break;
                };
                from = if e == s { e + 1 } else { e };
                out.push(caps);
                if from > input.len() || m.exhausted.get() {
                    break;
                }
            }
            out
        })
    }

    /// Java's `String.replaceAll(regex, replacement)`.
    pub(crate) fn replace_all(&self, input: &[char], replacement: &str) -> Result<String, String> {
        let mut out = String::new();
        let mut last = 0;
        for caps in self.find_all(input)? {
            let Some(Some((s, e))) = caps.first().copied() else {
                continue;
            };
            out.extend(input.get(last..s).unwrap_or_default());
            expand(replacement, input, &caps, &mut out)?;
            last = e;
        }
        out.extend(input.get(last..).unwrap_or_default());
        Ok(out)
    }
}

/// Java's `Matcher.appendReplacement` expansion of `\x` and `$n`.
fn expand(
    replacement: &str,
    input: &[char],
    caps: &Captures,
    out: &mut String,
) -> Result<(), String> {
    let groups = caps.len().saturating_sub(1);
    let mut chars = replacement.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => out.push(chars.next().ok_or("character to be escaped is missing")?),
            '$' => {
                let first = chars
                    .next()
                    .ok_or("Illegal group reference: group index is missing")?;
                let mut n = first.to_digit(10).ok_or("Illegal group reference")? as usize;
                if n > groups {
                    return Err(format!("No group {n}"));
                }
                // Java keeps taking digits while the number stays a valid group.
                while let Some(d) = chars.peek().and_then(|d| d.to_digit(10)) {
                    let longer = n * 10 + d as usize;
                    if longer > groups {
                        break;
                    }
                    n = longer;
                    chars.next();
                }
                if let Some(Some((s, e))) = caps.get(n).copied() {
                    out.extend(input.get(s..e).unwrap_or_default());
                }
            }
            c => out.push(c),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chars(s: &str) -> Vec<char> {
        s.chars().collect()
    }

    #[test]
    fn matching_and_groups() {
        let r = Regex::new(r"^CN=(.*?),OU=(.*?)(,.*)?$").unwrap();
        let input = chars("CN=alice,OU=eng,O=kshard");
        let caps = r.matches(&input).unwrap().unwrap();
        assert_eq!(caps[1], Some((3, 8)));
        assert_eq!(r.replace_all(&input, "$1@$2").unwrap(), "alice@eng");
        assert!(Regex::new("a{2,3}b")
            .unwrap()
            .matches(&chars("aaab"))
            .unwrap()
            .is_some());
        assert!(Regex::new("a{2,3}b")
            .unwrap()
            .matches(&chars("ab"))
            .unwrap()
            .is_none());
        assert!(Regex::new(r"[^\\/]+x")
            .unwrap()
            .matches(&chars("abx"))
            .unwrap()
            .is_some());
        assert!(Regex::new(r"(?:ab|cd)+\d")
            .unwrap()
            .matches(&chars("abcdab7"))
            .unwrap()
            .is_some());
        assert_eq!(
            Regex::new("a*")
                .unwrap()
                .replace_all(&chars("baab"), "-")
                .unwrap(),
            "-b--b-"
        );
    }

    #[test]
    fn runaway_matching_is_an_error() {
        let nested = Regex::new("(a*)*b").unwrap();
        assert!(nested.matches(&chars(&"a".repeat(40))).is_err());
        let long = chars(&"x".repeat(5000));
        assert!(Regex::new("(?:.)*").unwrap().matches(&long).is_err());
        assert!(Regex::new("^(.*?)(,.*)?$")
            .unwrap()
            .matches(&long)
            .unwrap()
            .is_some());
    }

    #[test]
    fn bad_patterns() {
        for p in ["(", "a)", "[a", "*a", "a{2,1}", r"\k", "(?i)a", "(?<n"] {
            assert!(Regex::new(p).is_err(), "{p}");
        }
    }
}
