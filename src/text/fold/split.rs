//! Splitting folded stacks into one profile per process or thread, by their
//! root frame: `comm`, `comm-PID` (folded with `include_pid`) or
//! `comm-PID/TID` (with `include_tid`). Per-thread views are what users of
//! the peer tools keep asking for.
//!
//! [`split_by`] groups the stacks, each with a file-name stem made safe and
//! unique; [`crate::output::split`] writes them. Comm names may themselves contain `-` and `/`
//! (`kworker/u8:2-events`), so the PID and TID are parsed from the right.

use std::collections::HashSet;
use std::fmt;
use std::str::FromStr;

use rustc_hash::FxHashMap;

use super::Options;
use crate::error::{Error, Result};

/// What to split by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SplitBy {
    /// Process name (all processes and threads of that name together).
    Comm,
    /// Process: `comm-PID`.
    Pid,
    /// Thread: `comm-PID/TID`.
    Tid,
}

impl SplitBy {
    /// Sets the fold options the split needs: `Pid` needs PIDs in root
    /// frames, `Tid` needs PIDs and TIDs.
    pub fn adjust(self, opts: &mut Options) {
        match self {
            SplitBy::Comm => {}
            SplitBy::Pid => opts.include_pid = true,
            SplitBy::Tid => opts.include_tid = true,
        }
    }

    /// The name used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            SplitBy::Comm => "comm",
            SplitBy::Pid => "pid",
            SplitBy::Tid => "tid",
        }
    }
}

impl FromStr for SplitBy {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "comm" => Ok(SplitBy::Comm),
            "pid" => Ok(SplitBy::Pid),
            "tid" => Ok(SplitBy::Tid),
            _ => Err(Error::Usage(format!(
                "cannot split by `{s}`; use comm, pid or tid"
            ))),
        }
    }
}

impl fmt::Display for SplitBy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One group of stacks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    /// The group's name: `comm`, `comm-PID` or `comm-PID/TID` (`comm/TID`
    /// when the text did not give the pid).
    pub key: String,
    /// A file-name stem for the group: safe characters only, unique within
    /// the split (case-insensitively).
    pub stem: String,
    /// The group's stacks (unchanged, root frame included), sorted.
    pub stacks: Vec<(String, u64)>,
    /// Sum of the group's counts.
    pub total: u64,
}

/// The parts of a root frame, parsed from the right.
fn parse_root<'a>(root: &'a str, opts: &Options) -> (&'a str, Option<&'a str>, Option<&'a str>) {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if opts.include_tid {
        if let Some((comm, rest)) = root.rsplit_once('-') {
            if let Some((pid, tid)) = rest.split_once('/') {
                if digits(pid) && digits(tid) {
                    return (comm, Some(pid), Some(tid));
                }
                // `perf script` without the pid field: `comm-?/TID`.
                if pid == "?" && digits(tid) {
                    return (comm, None, Some(tid));
                }
            }
        }
    } else if opts.include_pid {
        if let Some((comm, pid)) = root.rsplit_once('-') {
            if digits(pid) {
                return (comm, Some(pid), None);
            }
        }
    }
    (root, None, None)
}

/// A group's stacks and their total, while grouping.
type Stacks = (Vec<(String, u64)>, u64);

/// Groups `stacks` (folded with `opts`) by their root frame. Fails when the
/// fold did not record what the split needs (see [`SplitBy::adjust`]).
/// Groups come largest first (ties by name).
pub fn split_by(stacks: &[(String, u64)], by: SplitBy, opts: &Options) -> Result<Vec<Group>> {
    let need_pid = by == SplitBy::Pid && !(opts.include_pid || opts.include_tid);
    let need_tid = by == SplitBy::Tid && !opts.include_tid;
    if need_pid || need_tid {
        return Err(Error::Usage(format!(
            "splitting by {by} needs {} in the root frames; fold with --{}",
            if need_tid { "TIDs" } else { "PIDs" },
            if need_tid { "tid" } else { "pid" }
        )));
    }
    let mut groups: FxHashMap<String, Stacks> = FxHashMap::default();
    for (stack, count) in stacks {
        let root = stack.split(';').next().unwrap_or("");
        let (comm, pid, tid) = parse_root(root, opts);
        let key = match (by, pid, tid) {
            (SplitBy::Comm, _, _) => comm.to_string(),
            (SplitBy::Pid, Some(pid), _) => format!("{comm}-{pid}"),
            (SplitBy::Tid, Some(pid), Some(tid)) => format!("{comm}-{pid}/{tid}"),
            // The pid unknown (`perf script` prints it only with `-F +pid`):
            // the thread by its comm and TID, `xz/23248`, not `xz-?/23248`.
            (SplitBy::Tid, None, Some(tid)) => format!("{comm}/{tid}"),
            // A root without the expected suffix: its own group.
            _ => root.to_string(),
        };
        let g = groups.entry(key).or_default();
        g.0.push((stack.clone(), *count));
        g.1 = crate::sys::counts::add(g.1, *count);
    }
    let mut keyed: Vec<(String, Stacks)> = groups.into_iter().collect();
    keyed.sort_by(|a, b| a.0.cmp(&b.0));
    let mut used = HashSet::new();
    let mut out: Vec<Group> = keyed
        .into_iter()
        .map(|(key, (mut stacks, total))| {
            stacks.sort_unstable_by(|a, b| a.0.cmp(&b.0));
            let stem = unique_stem(&key, &mut used);
            Group {
                key,
                stem,
                stacks,
                total,
            }
        })
        .collect();
    out.sort_by(|a, b| b.total.cmp(&a.total).then_with(|| a.key.cmp(&b.key)));
    Ok(out)
}

/// A file-name stem for `key`: ASCII letters, digits, `.`, `_` and `-`
/// kept, anything else (`/`, spaces, non-ASCII) becomes `_`; no leading
/// dot; at most 100 bytes; made unique (case-insensitively, for
/// case-insensitive file systems) with a `-2`, `-3`, ... suffix.
pub fn unique_stem(key: &str, used: &mut HashSet<String>) -> String {
    let mut base: String = key
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .take(100)
        .collect();
    if base.starts_with('.') {
        base.replace_range(0..1, "_");
    }
    if base.is_empty() {
        base = "unknown".to_string();
    }
    if base.eq_ignore_ascii_case("index") {
        base.push('_');
    }
    let mut stem = base.clone();
    let mut n = 2;
    while !used.insert(stem.to_ascii_lowercase()) {
        stem = format!("{base}-{n}");
        n += 1;
    }
    stem
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(pid: bool, tid: bool) -> Options {
        Options {
            include_pid: pid,
            include_tid: tid,
            ..Options::default()
        }
    }

    fn stacks(v: &[(&str, u64)]) -> Vec<(String, u64)> {
        v.iter().map(|(s, c)| (s.to_string(), *c)).collect()
    }

    #[test]
    fn roots_parse_from_the_right() {
        let o = opts(false, true);
        assert_eq!(
            parse_root("kworker/u8:2-events-17/18", &o),
            ("kworker/u8:2-events", Some("17"), Some("18"))
        );
        assert_eq!(
            parse_root("java-1-2", &opts(true, false)),
            ("java-1", Some("2"), None)
        );
        assert_eq!(parse_root("a-b", &opts(true, false)), ("a-b", None, None));
    }

    #[test]
    fn split_by_tid_and_comm() {
        let s = stacks(&[
            ("srv-10/11;main;f", 5),
            ("srv-10/12;main;g", 3),
            ("srv-10/11;main;g", 1),
            ("cc-20/20;main", 2),
        ]);
        let by_tid = split_by(&s, SplitBy::Tid, &opts(false, true)).unwrap();
        let keys: Vec<(&str, u64)> = by_tid.iter().map(|g| (g.key.as_str(), g.total)).collect();
        assert_eq!(keys, [("srv-10/11", 6), ("srv-10/12", 3), ("cc-20/20", 2)]);
        assert_eq!(by_tid[0].stem, "srv-10_11");
        let by_comm = split_by(&s, SplitBy::Comm, &opts(false, true)).unwrap();
        let keys: Vec<(&str, u64)> = by_comm.iter().map(|g| (g.key.as_str(), g.total)).collect();
        assert_eq!(keys, [("srv", 9), ("cc", 2)]);
        assert!(split_by(&s, SplitBy::Tid, &opts(true, false)).is_err());
    }

    /// Issue 58, item 8: `perf script` without `-F +pid` gives no pid; a
    /// thread was named `prog-?/8011`.
    #[test]
    fn a_thread_whose_pid_is_unknown_is_named_by_its_comm_and_tid() {
        let s = stacks(&[("xz-?/23248;main;f", 5), ("xz-?/23247;main", 2)]);
        let by_tid = split_by(&s, SplitBy::Tid, &opts(false, true)).unwrap();
        let keys: Vec<(&str, &str)> = by_tid
            .iter()
            .map(|g| (g.key.as_str(), g.stem.as_str()))
            .collect();
        assert_eq!(keys, [("xz/23248", "xz_23248"), ("xz/23247", "xz_23247")]);
        let by_comm = split_by(&s, SplitBy::Comm, &opts(false, true)).unwrap();
        assert_eq!(by_comm[0].key, "xz");
    }

    #[test]
    fn stems_are_safe_and_unique() {
        let mut used = HashSet::new();
        assert_eq!(unique_stem("a/b c", &mut used), "a_b_c");
        assert_eq!(unique_stem("a_b_c", &mut used), "a_b_c-2");
        assert_eq!(unique_stem("A_B_C", &mut used), "A_B_C-3");
        assert_eq!(unique_stem(".hidden", &mut used), "_hidden");
        assert_eq!(unique_stem("", &mut used), "unknown");
        assert_eq!(unique_stem("index", &mut used), "index_");
        assert_eq!(unique_stem("ünï", &mut used), "_n_");
    }
}
