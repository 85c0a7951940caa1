//! Reading collapsed stacks (`frame;frame;... COUNT` lines) written by any
//! tool: jobprof, inferno, FlameGraph's stackcollapse scripts, py-spy, ...
//!
//! Inputs are read line by line (memory-mapped, or streamed when compressed
//! or piped) and merged into one map from stack to count, so memory grows
//! with the number of distinct stacks, not with the input size. Several
//! inputs are summed. Lines that are not `stack count` are counted and the
//! first few are kept with their file and line number for the caller to
//! report; they never abort the read. Blank lines and lines starting with
//! `#` are comments. Control characters in a stack are escaped as jobprof
//! writes them ([`crate::sys::printable`]).

use std::path::{Path, PathBuf};

use rustc_hash::FxHashMap;

use crate::capture::{self, legacy};
use crate::error::Result;
use crate::sys::input::{self, Source};
use crate::text::offcpu::{OFFCPU_FOLDED, WALLCLOCK_FOLDED};
use crate::text::perf_script::period_unit;

/// What the counts of the folded file `path` are, when the capture
/// directory it lies in says: `ns` for its off-CPU and wall-clock profiles
/// (`offcpu.folded`, `wallclock.folded`), else the unit of the periods of
/// the event named by the `summary.json` beside it or by the old
/// pipeline's `capture-metadata.txt` (beside it, or above jobprof's
/// `jobprof/` outputs of such a capture): `ns` for `cpu-clock`. `None`
/// when nothing there says (another tool's file, stdin).
pub fn count_name_beside(path: &Path) -> Option<String> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
    let dir = dir.unwrap_or(Path::new("."));
    let event = summary_event(&dir.join(capture::SUMMARY))
        .or_else(|| legacy::recorded_event(dir))
        .or_else(|| {
            let up = dir.parent()?;
            (dir.file_name()? == capture::LEGACY_OUTPUT_DIR)
                .then(|| legacy::recorded_event(up))
                .flatten()
        })?;
    let name = path.file_name()?;
    if name == OFFCPU_FOLDED || name == WALLCLOCK_FOLDED {
        return Some("ns".into());
    }
    Some(period_unit(&event).to_string())
}

/// The `event` of a `summary.json` (never read through a link).
fn summary_event(path: &Path) -> Option<String> {
    let text = capture::read_plain(path).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    Some(v.get("event")?.as_str()?.to_string())
}

/// The one name of the counts of all `inputs` ([`count_name_beside`]),
/// `samples` when they do not all say the same (or nothing says).
pub fn count_name_of(inputs: &[&Path]) -> String {
    let names: Vec<Option<String>> = inputs.iter().map(|p| count_name_beside(p)).collect();
    match names.first() {
        Some(Some(n)) if names.iter().all(|m| m.as_ref() == Some(n)) => n.clone(),
        _ => "samples".into(),
    }
}

/// The start of the comment line that says what a folded file's counts
/// are when they are not samples (`# counts: ns`), written first by `jobprof
/// fold` and wherever jobprof hands folded stacks to another of its stages
/// without a `summary.json` beside them. jobprof's readers take the unit
/// from it (`render`, `diff`, `report`) and skip it as any `#` line;
/// FlameGraph and inferno skip it as a line they cannot read.
pub const COUNTS_PREFIX: &str = "# counts: ";

/// The line ([`COUNTS_PREFIX`]) that says the counts are `count_name`,
/// `None` for samples (what every reader assumes).
pub fn counts_line(count_name: &str) -> Option<String> {
    (count_name != "samples" && is_count_name(count_name))
        .then(|| format!("{COUNTS_PREFIX}{count_name}\n"))
}

/// The count name a (trimmed) line declares, if it is a [`counts_line`].
pub fn declared_counts(line: &str) -> Option<&str> {
    line.strip_prefix(COUNTS_PREFIX)
        .map(str::trim)
        .filter(|n| is_count_name(n))
}

/// A unit a counts line may name: a short word (`ns`, `cycles`, `bytes`,
/// `instructions:u`).
fn is_count_name(n: &str) -> bool {
    !n.is_empty()
        && n.len() <= 64
        && n.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_:.".contains(&b))
}

/// How many bad lines are kept for reporting.
const KEEP_BAD: usize = 10;

/// A line that could not be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadLine {
    /// The input it came from.
    pub path: PathBuf,
    /// 1-based line number.
    pub line: u64,
    /// What is wrong.
    pub reason: &'static str,
    /// The line (at most 200 characters).
    pub text: String,
}

impl std::fmt::Display for BadLine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}:{}: {}: `{}`",
            self.path.display(),
            self.line,
            self.reason,
            self.text
        )
    }
}

/// Stacks read from folded inputs.
#[derive(Debug, Clone, Default)]
pub struct FoldedInput {
    /// Distinct stacks with their summed counts, sorted bytewise.
    pub stacks: Vec<(String, u64)>,
    /// Lines read (all inputs).
    pub lines: u64,
    /// Lines that were not `stack count` (comments and blanks excluded).
    pub bad_lines: u64,
    /// The first few bad lines.
    pub first_bad: Vec<BadLine>,
    /// Lines that were not valid UTF-8 (read with U+FFFD replacements).
    pub non_utf8_lines: u64,
    /// The first input whose bad lines look like `perf script` output
    /// (sample headers, tab-indented frames): it needs `jobprof fold` first.
    pub perf_script_text: Option<std::path::PathBuf>,
    /// What the counts are, as the inputs' [`counts_line`] says (`None`:
    /// no input says, or two say different things).
    pub count_name: Option<String>,
    /// Two inputs declared different count names.
    counts_differ: bool,
}

impl FoldedInput {
    /// Sum of all counts.
    pub fn total(&self) -> u64 {
        crate::sys::counts::sum(self.stacks.iter().map(|(_, c)| *c))
    }

    /// The error to report when nothing usable was read: the first bad line
    /// when there was one, "empty" otherwise.
    pub fn nothing_usable(&self, what: &str) -> super::Error {
        if let Some(path) = &self.perf_script_text {
            let fold = if path.as_os_str() == "<stdin>" || path.as_os_str() == "-" {
                "perf script | jobprof fold | jobprof render > flamegraph.svg".to_string()
            } else {
                format!(
                    "jobprof fold {} | jobprof render > flamegraph.svg",
                    path.display()
                )
            };
            return super::Error::PerfScriptText {
                path: path.display().to_string(),
                fold,
            };
        }
        match self.first_bad.first() {
            Some(b) => super::Error::BadLine {
                path: b.path.display().to_string(),
                line: b.line,
                reason: b.reason,
                text: b.text.clone(),
            },
            None => super::Error::Empty {
                what: what.to_string(),
            },
        }
    }
}

#[derive(Default)]
struct Merger {
    map: FxHashMap<String, u64>,
    out: FoldedInput,
}

impl Merger {
    fn line(&mut self, path: &std::path::Path, lineno: u64, raw: &[u8]) {
        self.out.lines += 1;
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        let text = match std::str::from_utf8(raw) {
            Ok(s) => std::borrow::Cow::Borrowed(s),
            Err(_) => {
                self.out.non_utf8_lines += 1;
                String::from_utf8_lossy(raw)
            }
        };
        let line = text.trim();
        if line.is_empty() || line.starts_with('#') {
            if let Some(n) = declared_counts(line) {
                match &self.out.count_name {
                    Some(m) if m != n => self.out.counts_differ = true,
                    Some(_) => {}
                    None => self.out.count_name = Some(n.to_string()),
                }
            }
            return;
        }
        let (stack, count) = match line.rfind([' ', '\t']) {
            Some(i) => (line[..i].trim_end(), &line[i + 1..]),
            None => {
                return self.bad(path, lineno, line, "no count at the end of the line");
            }
        };
        let count: u64 = match count.parse() {
            Ok(c) => c,
            Err(_) if count.contains('.') && count.replace('.', "").parse::<u64>().is_ok() => {
                return self.bad(
                    path,
                    lineno,
                    line,
                    "fractional count; scale the counts to integers",
                );
            }
            Err(_) => return self.bad(path, lineno, line, "the last word is not a count"),
        };
        if stack.is_empty() {
            return self.bad(path, lineno, line, "empty stack");
        }
        if count == 0 {
            return;
        }
        // A file another tool (or an older jobprof) wrote: its names
        // escaped as jobprof writes them (`crate::sys::printable`).
        let stack = &*crate::sys::printable::printable_text(stack);
        match self.map.get_mut(stack) {
            Some(c) => *c = crate::sys::counts::add(*c, count),
            None => {
                self.map.insert(stack.to_string(), count);
            }
        }
    }

    /// Takes in what another read gave, as if its lines came next.
    fn absorb(&mut self, other: FoldedInput) {
        let o = &mut self.out;
        o.lines += other.lines;
        o.bad_lines += other.bad_lines;
        o.non_utf8_lines += other.non_utf8_lines;
        let room = KEEP_BAD.saturating_sub(o.first_bad.len());
        o.first_bad.extend(other.first_bad.into_iter().take(room));
        if o.perf_script_text.is_none() {
            o.perf_script_text = other.perf_script_text;
        }
        match (&o.count_name, other.count_name) {
            (Some(m), Some(n)) if *m != n => o.counts_differ = true,
            (None, Some(n)) => o.count_name = Some(n),
            _ => {}
        }
        o.counts_differ |= other.counts_differ;
        for (stack, count) in other.stacks {
            let c = self.map.entry(stack).or_insert(0);
            *c = crate::sys::counts::add(*c, count);
        }
    }

    fn bad(&mut self, path: &std::path::Path, lineno: u64, line: &str, reason: &'static str) {
        self.out.bad_lines += 1;
        if self.out.perf_script_text.is_none() && looks_like_perf_script(line) {
            self.out.perf_script_text = Some(path.to_path_buf());
        }
        if self.out.first_bad.len() < KEEP_BAD {
            self.out.first_bad.push(BadLine {
                path: path.to_path_buf(),
                line: lineno,
                reason,
                text: line.chars().take(200).collect(),
            });
        }
    }

    fn finish(mut self) -> FoldedInput {
        if self.out.counts_differ {
            self.out.count_name = None;
        }
        let mut stacks: Vec<(String, u64)> = self.map.into_iter().collect();
        stacks.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        self.out.stacks = stacks;
        self.out
    }
}

/// Whether a (trimmed) line that is not `stack count` is a line of `perf
/// script` output: a frame (`ADDR symbol+off (dso)`) or a sample header
/// (`comm pid [cpu] time: period event:`).
fn looks_like_perf_script(line: &str) -> bool {
    let first = line.split_whitespace().next().unwrap_or("");
    let frame = first.len() >= 2
        && first.bytes().all(|b| b.is_ascii_hexdigit())
        && line.contains(" (")
        && line.ends_with(')');
    let header = line.ends_with(':') && line.split_whitespace().any(is_cpu_or_time);
    frame || header
}

/// `[003]` (a CPU) or `12345.678901:` (a timestamp) in a sample header.
fn is_cpu_or_time(w: &str) -> bool {
    let cpu = w
        .strip_prefix('[')
        .and_then(|w| w.strip_suffix(']'))
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
    let time = w
        .strip_suffix(':')
        .is_some_and(|t| t.contains('.') && t.parse::<f64>().is_ok());
    cpu || time
}

/// Whether `stack`, written as a `stack count` line, reads back as
/// itself: [`read_folded`] trims each line, skips empty ones and `#`
/// comments, a line ends at `\n` (a `\r` before it is dropped), and
/// one longer than [`crate::sys::input::MAX_RECORD`] is an error.
pub fn reads_back(stack: &str) -> bool {
    // The stack, a space, up to 20 digits and the newline.
    stack.len() + 22 <= crate::sys::input::MAX_RECORD
        && !stack.is_empty()
        && !stack.starts_with('#')
        && stack.trim() == stack
        && !stack.contains(['\n', '\r'])
}

/// What [`read_folded`] gives for the file [`super::render_folded`] writes
/// from `stacks` (the stacks that need it escaped into `held`), without
/// writing or reading it; `None` when a stack would not read back as
/// itself ([`reads_back`]).
pub fn as_read_back<'a, S: AsRef<str>>(
    stacks: &'a [(S, u64)],
    held: &'a mut Vec<String>,
) -> Option<Vec<(&'a str, u64)>> {
    let lines = super::folded_lines(stacks, held);
    lines.iter().all(|(s, _)| reads_back(s)).then_some(lines)
}

/// What [`read_folded`] gives for the file [`super::render_folded`]
/// writes from `stacks` after the [`counts_line`] of `count_name`, without
/// writing or reading it: the stacks as [`as_read_back`] takes them, or,
/// where one would not read back as itself, the text read in memory
/// (its bad lines named as lines of `path`).
pub fn as_input<S: AsRef<str>>(stacks: &[(S, u64)], count_name: &str, path: &Path) -> FoldedInput {
    let head = counts_line(count_name);
    let mut held = Vec::new();
    if let Some(lines) = as_read_back(stacks, &mut held) {
        return FoldedInput {
            lines: (lines.len() + usize::from(head.is_some())) as u64,
            stacks: lines.into_iter().map(|(s, c)| (s.to_string(), c)).collect(),
            count_name: head.map(|_| count_name.to_string()),
            ..FoldedInput::default()
        };
    }
    let mut text = head.unwrap_or_default().into_bytes();
    // Writing to memory cannot fail.
    let _ = super::render_folded(stacks, &mut text);
    let mut m = Merger::default();
    for (i, l) in input::split_lines(&text).enumerate() {
        m.line(path, i as u64 + 1, l);
    }
    m.finish()
}

/// Reads and merges folded inputs (plain, `.gz` or `.zst`; `-` is stdin).
/// Fails only when an input cannot be opened or read; bad lines are counted
/// in the result.
pub fn read_folded(sources: &[Source]) -> Result<FoldedInput> {
    read_folded_or(sources, |_| Ok(None))
}

/// [`read_folded`], where `given` may give an input's stacks already made
/// (a `perf.data` symbolized in memory): merged as if they were read from
/// a file.
pub fn read_folded_or(
    sources: &[Source],
    mut given: impl FnMut(&Source) -> Result<Option<FoldedInput>>,
) -> Result<FoldedInput> {
    let mut m = Merger::default();
    for src in sources {
        if let Some(made) = given(src)? {
            m.absorb(made);
            continue;
        }
        let path = src.display_path();
        input::each_line(src, |lineno, line| m.line(&path, lineno, line))?;
    }
    Ok(m.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> FoldedInput {
        let mut m = Merger::default();
        for (i, l) in input::split_lines(text.as_bytes()).enumerate() {
            m.line(std::path::Path::new("x.folded"), i as u64 + 1, l);
        }
        m.finish()
    }

    /// Issue 58, item 4: the counts' unit travels in the folded text.
    #[test]
    fn a_counts_line_names_the_counts() {
        assert_eq!(counts_line("samples"), None);
        assert_eq!(counts_line("two words"), None);
        let line = counts_line("ns").unwrap();
        assert_eq!(line, "# counts: ns\n");
        let r = read(&format!("{line}main;a 5\n"));
        assert_eq!(r.count_name.as_deref(), Some("ns"));
        assert_eq!((r.stacks.len(), r.bad_lines), (1, 0));
        assert_eq!(read("# a comment\nmain;a 5\n").count_name, None);
        // Two inputs that disagree say nothing.
        assert_eq!(
            read("# counts: ns\n# counts: cycles\na 1\n").count_name,
            None
        );
    }

    #[test]
    fn what_is_written_reads_back_as_as_read_back_says() {
        let cases: &[&[(&str, u64)]] = &[
            &[("b;c", 2), ("a", 1), ("b;c", 3), ("z", 0)],
            &[("a", 1), ("b;c", 5)],
            &[("main;f x", 5), ("é;ü", 7)],
            // Control characters are escaped as written, so read back.
            &[
                ("two\nlines", 1),
                ("w;cr\r;esc\u{1b}", 2),
                ("w;cr\\r;esc\\u{1b}", 3),
            ],
            &[],
        ];
        for &stacks in cases {
            let mut text = Vec::new();
            super::super::render_folded(stacks, &mut text).unwrap();
            let back = read(std::str::from_utf8(&text).unwrap()).stacks;
            let back: Vec<(&str, u64)> = back.iter().map(|(s, c)| (s.as_str(), *c)).collect();
            assert_eq!(
                as_read_back(stacks, &mut Vec::new()),
                Some(back),
                "{stacks:?}"
            );
        }
        for odd in ["# a comment?", " lead", "trail ", ""] {
            assert!(!reads_back(odd), "{odd:?}");
            assert_eq!(as_read_back(&[(odd, 1)], &mut Vec::new()), None);
        }
        assert!(!reads_back("two\nlines") && !reads_back("cr\r"));
    }

    /// What `render` and `diff` take of a perf.data symbolized in memory
    /// is what they read from the `stacks.folded` it would be written to,
    /// alone or merged with a file read after it.
    #[test]
    fn stacks_made_in_memory_are_read_as_their_file() {
        let cases: &[&[(&str, u64)]] = &[
            &[("b;c", 2), ("a", 1), ("b;c", 3), ("z", 0)],
            &[(" lead", 1), ("b", 2), ("# hash", 3)],
            &[],
        ];
        let path = Path::new("perf.data");
        for &stacks in cases {
            for unit in ["samples", "ns"] {
                let mut text = counts_line(unit).unwrap_or_default().into_bytes();
                super::super::render_folded(stacks, &mut text).unwrap();
                let file = read(std::str::from_utf8(&text).unwrap());
                let made = as_input(stacks, unit, path);
                assert_eq!(
                    (&made.stacks, made.lines, made.bad_lines),
                    (&file.stacks, file.lines, file.bad_lines),
                    "{stacks:?} {unit}"
                );
                assert_eq!(made.count_name, file.count_name);
                let mut m = Merger::default();
                m.absorb(made);
                m.line(path, 1, b"a 4");
                let mut both = read(std::str::from_utf8(&text).unwrap()).stacks;
                both.push(("a".into(), 4));
                let merged = m.finish().stacks;
                let total = |v: &[(String, u64)]| v.iter().map(|(_, c)| c).sum::<u64>();
                assert_eq!(total(&merged), total(&both), "{stacks:?}");
            }
        }
    }

    #[test]
    fn merges_and_reports_bad_lines() {
        let r = read("a;b 1\n# comment\n\na;b 2\r\nc\t4\nnocount\nx;y 1.5\nz 0\n");
        assert_eq!(r.stacks, vec![("a;b".into(), 3), ("c".into(), 4)]);
        assert_eq!(r.bad_lines, 2);
        assert_eq!(r.first_bad[0].line, 6);
        assert_eq!(r.first_bad[0].reason, "no count at the end of the line");
        assert_eq!(r.first_bad[1].line, 7);
        assert!(r.first_bad[1].reason.starts_with("fractional"));
    }

    #[test]
    fn frames_with_spaces_are_kept() {
        let r = read("main;(anonymous namespace)::f 7\n");
        assert_eq!(r.stacks, vec![("main;(anonymous namespace)::f".into(), 7)]);
    }

    #[test]
    fn perf_script_text_is_named_with_the_fold_command() {
        let text = "demo_worker 4242/4243 [001] 12345.678901:   10101010 cpu-clock:\n\
                    \t    5555555551a9 demo_run_query+0x19 (/opt/demo)\n\
                    \t    7f0000001000 [unknown] ([unknown])\n\n";
        let r = read(text);
        assert!(r.stacks.is_empty());
        let msg = r.nothing_usable("x.folded").to_string();
        assert!(msg.contains("x.folded is `perf script` text"), "{msg}");
        assert!(
            msg.contains("jobprof fold x.folded | jobprof render"),
            "{msg}"
        );
    }

    #[test]
    fn folded_stacks_and_other_junk_are_not_perf_script() {
        for line in [
            "main;f 1",
            "just some words",
            "deadbeef",
            "a (b)",
            "time: 12",
            "header ends: [x]:",
        ] {
            assert!(!looks_like_perf_script(line), "{line}");
        }
        assert!(looks_like_perf_script(
            "ffffffff81000000 do_syscall_64+0x1 ([kernel.kallsyms])"
        ));
        assert!(looks_like_perf_script("xz 100 [000] 1.5: 1 cycles:"));
        assert!(looks_like_perf_script(
            "xz 100/101 12.000001: 250000 cpu-clock:u:"
        ));
    }
}
