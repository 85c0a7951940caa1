//! Cutting one report by time (`--slice-by nvtx[:DOMAIN:]PATTERN`): the
//! NVTX ranges whose text matches a glob become windows `[start, end)`,
//! each read as a profile of its own ([`super::read_sliced`]). A range's
//! text may repeat (a query run three times): its windows are named as
//! replicates (`q1`, `q1_iter2`, `q1_iter3`, the `capture::replicate`
//! spelling), in the order they started.
//!
//! The rule of every table, the same for each: an event belongs to a
//! window when it starts in it (`start <= t < end`) and counts whole, its
//! end past the window or not. So windows that do not overlap split the
//! report's events, and nothing is counted twice.

use rustc_hash::FxHashMap;

use super::samples::Names;
use super::schema::Db;
use super::tables::nvtx_ranges;
use super::{Error, Result, Span};

/// Which NVTX ranges cut a report: `nvtx:PATTERN` (any domain),
/// `nvtx:DOMAIN:PATTERN` (that domain's), `nvtx::PATTERN` (the default
/// domain's); PATTERN is a glob on the range's text (`*` any characters,
/// `?` one, everything else itself, case counted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SliceBy {
    /// The spec as given.
    spec: String,
    /// `None`: any domain; `Some("")`: the default domain.
    domain: Option<String>,
    /// The glob.
    pattern: Vec<char>,
}

impl std::fmt::Display for SliceBy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.spec)
    }
}

impl std::str::FromStr for SliceBy {
    type Err = String;

    fn from_str(spec: &str) -> std::result::Result<SliceBy, String> {
        let Some(rest) = spec.strip_prefix("nvtx:") else {
            return Err(format!(
                "`{spec}`: give nvtx:PATTERN, nvtx:DOMAIN:PATTERN or nvtx::PATTERN \
                 (PATTERN a glob on the NVTX range's text, e.g. nvtx:q*)"
            ));
        };
        let (domain, pattern) = match rest.split_once(':') {
            Some((d, p)) => (Some(d.to_string()), p),
            None => (None, rest),
        };
        if pattern.is_empty() {
            return Err(format!(
                "`{spec}`: the pattern is empty (nvtx:* takes every range)"
            ));
        }
        Ok(SliceBy {
            spec: spec.to_string(),
            domain,
            pattern: pattern.chars().collect(),
        })
    }
}

impl SliceBy {
    /// Whether a range of `domain` (`None`: the default) with `text` is one.
    fn matches(&self, domain: Option<&str>, text: &str) -> bool {
        let domain_ok = match &self.domain {
            None => true,
            Some(d) if d.is_empty() => domain.is_none(),
            Some(d) => domain == Some(d.as_str()),
        };
        domain_ok && glob(&self.pattern, &text.chars().collect::<Vec<_>>())
    }
}

/// Whether `text` matches the glob `pattern` (`*`, `?`), with one
/// backtrack point: linear in practice, quadratic at worst.
fn glob(pattern: &[char], text: &[char]) -> bool {
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        match pattern.get(p) {
            Some('*') => {
                star = Some((p, t));
                p += 1;
            }
            Some(&c) if c == '?' || c == text[t] => {
                p += 1;
                t += 1;
            }
            _ => match star {
                Some((sp, st)) => {
                    p = sp + 1;
                    t = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|&c| c == '*')
}

/// One window to cut: a matching range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Window {
    /// Its name as a query: the text made a file name, and `_iterN` for
    /// the Nth range of the same text.
    pub name: String,
    /// The range's name as `nvtxsum` shows it (`domain:text`).
    pub range: String,
    /// Its time.
    pub span: Span,
}

/// The most windows one report is cut into: each is one more pass over
/// the report's events and one more directory (a benchmark's queries are
/// tens to thousands; more is a pattern that matches every small range).
pub const MAX_WINDOWS: usize = 10_000;

/// The ranges `by` takes, in the order they started, named; more than
/// [`MAX_WINDOWS`] refuses the report.
pub(super) fn windows(db: &Db, names: &Names, by: &SliceBy) -> Result<Vec<Window>> {
    let mut found = Vec::new();
    nvtx_ranges(db, names, None, |r| {
        if by.matches(r.domain.as_deref(), &r.text) {
            found.push(r);
        }
    })?;
    if found.len() > MAX_WINDOWS {
        return Err(Error::TooManyWindows {
            path: db.path.clone(),
            by: by.to_string(),
            count: found.len(),
            max: MAX_WINDOWS,
        });
    }
    found.sort_by_key(|r| (r.start, r.end));
    let mut names = WindowNames::default();
    Ok(found
        .into_iter()
        .map(|r| Window {
            name: names.next(&r.text),
            range: r.name(),
            span: Span {
                start: r.start,
                end: r.end,
            },
        })
        .collect())
}

/// Directory names for windows, in the order they started: a range's text
/// as [`file_name`] spells it, the same text again `NAME_iter2`, ... (the
/// replicate naming), and never a name given before: two texts spelled
/// alike (`a/b` and `a_b`, SQL texts sharing their first 100 bytes) or a
/// text that is another's replicate name (`q1_iter2`) get a short hash of
/// the whole text after it.
#[derive(Default)]
struct WindowNames {
    /// Each text's base name and how many windows it named.
    texts: FxHashMap<String, (String, u32)>,
    /// Every base and name given.
    taken: rustc_hash::FxHashSet<String>,
}

impl WindowNames {
    fn next(&mut self, text: &str) -> String {
        let (base, n) = match self.texts.get_mut(text) {
            Some((base, n)) => {
                *n += 1;
                (base.clone(), *n)
            }
            None => {
                let mut base = file_name(text);
                if self.taken.contains(&base) {
                    base = format!("{base}-{}", short_hash(text));
                }
                self.taken.insert(base.clone());
                self.texts.insert(text.to_string(), (base.clone(), 1));
                (base, 1)
            }
        };
        let mut name = match n {
            1 => base,
            k => format!("{base}_iter{k}"),
        };
        let mut extra = 1;
        while n > 1 && !self.taken.insert(name.clone()) {
            extra += 1;
            name = format!("{name}-{}{extra}", short_hash(text));
        }
        name
    }
}

/// Eight hex digits of the BLAKE3 hash of `text`: the same on every run.
fn short_hash(text: &str) -> String {
    blake3::hash(text.as_bytes()).to_hex()[..8].to_string()
}

/// The most bytes of a window's directory name.
const MAX_FILE_NAME: usize = 100;

/// `text` as one directory name: letters, digits, `.`, `_`, `-` kept,
/// every other character `_`, not starting with `.`, at most
/// [`MAX_FILE_NAME`] bytes; `range` when nothing is left.
fn file_name(text: &str) -> String {
    let mut s: String = text
        .chars()
        .map(
            |c| match c.is_alphanumeric() || matches!(c, '.' | '_' | '-') {
                true => c,
                false => '_',
            },
        )
        .collect();
    if s.starts_with('.') {
        s.replace_range(..1, "_");
    }
    let mut end = s.len().min(MAX_FILE_NAME);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s.truncate(end);
    match s.is_empty() {
        true => "range".into(),
        false => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Texts spelled alike and a text that is a replicate's name never
    /// share a directory.
    #[test]
    fn window_names_are_never_given_twice() {
        let mut w = WindowNames::default();
        let got: Vec<String> = ["q1", "q1_iter2", "q1", "a/b", "a_b", "a/b", "q1"]
            .iter()
            .map(|t| w.next(t))
            .collect();
        let h = |t: &str| short_hash(t);
        assert_eq!(got[0], "q1");
        assert_eq!(got[1], "q1_iter2");
        assert_eq!(got[2], format!("q1_iter2-{}2", h("q1")));
        assert_eq!(got[3], "a_b");
        assert_eq!(got[4], format!("a_b-{}", h("a_b")));
        assert_eq!(got[5], "a_b_iter2");
        assert_eq!(got[6], "q1_iter3");
        let unique: std::collections::BTreeSet<&String> = got.iter().collect();
        assert_eq!(unique.len(), got.len(), "{got:?}");
    }

    fn by(s: &str) -> SliceBy {
        s.parse().unwrap()
    }

    #[test]
    fn specs_parse_into_domain_and_glob() {
        assert!(by("nvtx:q*").matches(None, "q17"));
        assert!(by("nvtx:q*").matches(Some("engine"), "q1"));
        assert!(!by("nvtx:q*").matches(None, "Q1"));
        assert!(by("nvtx:engine:q?").matches(Some("engine"), "q1"));
        assert!(!by("nvtx:engine:q?").matches(None, "q1"));
        assert!(!by("nvtx:engine:q?").matches(Some("engine"), "q12"));
        assert!(by("nvtx::q1").matches(None, "q1"));
        assert!(!by("nvtx::q1").matches(Some("engine"), "q1"));
        assert_eq!(by("nvtx:a:b:c").to_string(), "nvtx:a:b:c");
        assert!(by("nvtx:a:b:c").matches(Some("a"), "b:c"));
        for bad in ["q*", "nvtx:", "nvtx:d:", "time:1-2"] {
            let e = bad.parse::<SliceBy>().unwrap_err();
            assert!(e.contains(bad), "{e}");
        }
    }

    #[test]
    fn globs_match_as_a_shell_does() {
        let g = |p: &str, t: &str| {
            glob(
                &p.chars().collect::<Vec<_>>(),
                &t.chars().collect::<Vec<_>>(),
            )
        };
        assert!(g("*", ""));
        assert!(g("*q*", "tpch q1 run"));
        assert!(g("a*b*c", "aXbYbZc"));
        assert!(!g("a*b*c", "aXbYbZ"));
        assert!(g("q??", "q12"));
        assert!(!g("q??", "q1"));
        assert!(g("query *", "query 7"));
        assert!(!g("query", "query 7"));
    }

    #[test]
    fn range_texts_become_directory_names() {
        assert_eq!(file_name("q1"), "q1");
        assert_eq!(file_name("TPC-H Q1/scan"), "TPC-H_Q1_scan");
        assert_eq!(file_name("../x"), "_._x");
        assert_eq!(file_name(""), "range");
        assert_eq!(file_name(&"é".repeat(80)).len(), 100);
    }
}
