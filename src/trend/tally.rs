//! Counting one replicate's functions straight from its folded files, in
//! one pass: each line is split where it lies (the mapped file, or the
//! stream's buffer), read by the folded reader's rules (`stack count`,
//! comments and blanks skipped, bad lines counted), and each frame name is
//! looked up once in the replicate's table of names (allocated once per
//! name, never per stack). Frames the line shares with the line before
//! (folded files are written sorted, so neighbours share their callers)
//! keep the previous line's ids without a lookup. Nothing of the stacks is
//! kept: only each function's self and total count.

use std::path::Path;

use rustc_hash::FxHashMap;

use crate::error::Result;
use crate::sys::counts;
use crate::sys::input::{self, Source};

/// One function's counts.
#[derive(Clone, Copy, Default)]
struct Acc {
    /// Samples whose leaf it is.
    own: u64,
    /// Samples with it anywhere on the stack.
    total: u64,
    /// The last line that counted it in `total` (recursion counts once).
    stamp: u64,
}

/// Self and total counts per function of one replicate: its workers'
/// folded files added up.
#[derive(Default)]
pub struct Tally {
    index: FxHashMap<Box<str>, u32>,
    acc: Vec<Acc>,
    /// Sum of the counts read.
    pub total: u64,
    /// Lines that were not `stack count` (comments and blanks excluded).
    pub bad_lines: u64,
    line: u64,
    prev: String,
    /// The previous line's frames: (end offset in `prev`, id).
    prev_frames: Vec<(usize, u32)>,
    frames: Vec<(usize, u32)>,
}

impl Tally {
    /// Adds the folded file at `path`.
    pub fn add_file(&mut self, path: &Path) -> Result<()> {
        // Stacks do not continue across files.
        self.prev.clear();
        self.prev_frames.clear();
        input::each_line(&Source::Path(path.to_path_buf()), |_, raw| {
            self.add_line(raw)
        })
    }

    /// Adds the table at `path` (`name count total_ns median_ns`, as
    /// `jobprof process` writes an nsys report's GPU kernels or NVTX
    /// ranges, under its header): each name's total ns is its own time
    /// (a self count; a table has no callers, so no total count).
    pub fn add_table(&mut self, path: &Path) -> Result<()> {
        let header = crate::pipeline::imported::TSV_HEADER.trim_end().as_bytes();
        input::each_line(&Source::Path(path.to_path_buf()), |_, raw| {
            let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
            if raw.is_empty() || raw == header {
                return;
            }
            let line = String::from_utf8_lossy(raw);
            let fields: Vec<&str> = line.split('\t').collect();
            match (fields.as_slice(), fields.get(2).map(|t| t.parse::<u64>())) {
                ([name, _, _, _], Some(Ok(ns))) if !name.is_empty() => {
                    self.total = counts::add(self.total, ns);
                    let id = self.intern(&crate::sys::printable::printable_text(name));
                    let a = &mut self.acc[id as usize];
                    a.own = counts::add(a.own, ns);
                }
                _ => self.bad_lines += 1,
            }
        })
    }

    /// (name, self, total) of every function counted (thread names that
    /// never were a leaf have 0 and 0).
    pub fn into_counts(self) -> impl Iterator<Item = (String, u64, u64)> {
        let acc = self.acc;
        self.index.into_iter().map(move |(name, id)| {
            let a = acc[id as usize];
            (String::from(name), a.own, a.total)
        })
    }

    /// One line, by [`crate::output::render::folded::read_folded`]'s rules.
    fn add_line(&mut self, raw: &[u8]) {
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        match std::str::from_utf8(raw) {
            Ok(s) => self.add_text(s),
            Err(_) => self.add_text(&String::from_utf8_lossy(raw)),
        }
    }

    fn add_text(&mut self, line: &str) {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            return;
        }
        let Some(i) = line.rfind([' ', '\t']) else {
            self.bad_lines += 1;
            return;
        };
        let (stack, count) = (line[..i].trim_end(), &line[i + 1..]);
        let Ok(n) = count.parse::<u64>() else {
            self.bad_lines += 1;
            return;
        };
        if stack.is_empty() {
            self.bad_lines += 1;
            return;
        }
        if n > 0 {
            // Names escaped as `read_folded` escapes them (an older file).
            self.add_stack(&crate::sys::printable::printable_text(stack), n);
        }
    }

    /// Counts one stack: the first frame is the thread's name, not a
    /// function: it counts only as the leaf of a sample without frames.
    fn add_stack(&mut self, stack: &str, n: u64) {
        self.line += 1;
        self.total = counts::add(self.total, n);
        let common = common_prefix(self.prev.as_bytes(), stack.as_bytes());
        // Frames of the previous line that end before the lines part (and
        // so are followed by `;` in both) are the same frames.
        let keep = self.prev_frames.partition_point(|&(end, _)| end < common);
        self.frames.clear();
        self.frames.extend_from_slice(&self.prev_frames[..keep]);
        let mut start = self.frames.last().map_or(0, |&(end, _)| end + 1);
        loop {
            let end =
                memchr::memchr(b';', &stack.as_bytes()[start..]).map_or(stack.len(), |i| start + i);
            let id = self.intern(&stack[start..end]);
            self.frames.push((end, id));
            if end == stack.len() {
                break;
            }
            start = end + 1;
        }
        let stamp = self.line;
        for &(_, id) in &self.frames[1..] {
            let a = &mut self.acc[id as usize];
            if a.stamp != stamp {
                a.stamp = stamp;
                a.total = counts::add(a.total, n);
            }
        }
        let leaf = self.frames.last().expect("a stack has a frame").1;
        let a = &mut self.acc[leaf as usize];
        a.own = counts::add(a.own, n);
        self.prev.clear();
        self.prev.push_str(stack);
        std::mem::swap(&mut self.prev_frames, &mut self.frames);
    }

    fn intern(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.index.get(name) {
            return id;
        }
        let id = u32::try_from(self.acc.len()).expect("fewer than 4 G functions");
        self.acc.push(Acc::default());
        self.index.insert(name.into(), id);
        id
    }
}

/// Length of the common prefix of `a` and `b`, eight bytes at a time.
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let mut i = 0;
    while i + 8 <= n {
        let x = u64::from_le_bytes(a[i..i + 8].try_into().expect("8 bytes"));
        let y = u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        if x != y {
            return i + ((x ^ y).trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while i < n && a[i] == b[i] {
        i += 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use std::collections::{HashMap, HashSet};

    use super::*;
    use crate::output::render::folded::read_folded;
    use crate::trend::stats::Rng;

    fn tally_of(files: &[&str]) -> (HashMap<String, (u64, u64)>, u64, u64) {
        let d = tempfile::tempdir().unwrap();
        let mut t = Tally::default();
        for (i, text) in files.iter().enumerate() {
            let p = d.path().join(format!("{i}.folded"));
            std::fs::write(&p, text).unwrap();
            t.add_file(&p).unwrap();
        }
        let (total, bad) = (t.total, t.bad_lines);
        (
            t.into_counts().map(|(f, s, a)| (f, (s, a))).collect(),
            total,
            bad,
        )
    }

    #[test]
    fn recursion_counts_once_and_thread_names_are_not_functions() {
        let (counts, total, bad) = tally_of(&["w;main;f;g;f 3\nw;main;h 2\nw 5\n"]);
        assert_eq!((total, bad), (10, 0));
        assert_eq!(
            counts["f"],
            (3, 3),
            "f is twice on one stack: total 3, not 6"
        );
        assert_eq!(counts["main"], (0, 5));
        assert_eq!(counts["h"], (2, 2));
        // The thread's name: only the leaf of the frameless sample.
        assert_eq!(counts["w"], (5, 0));
    }

    /// The counts as the definition gives them, one stack at a time.
    fn reference(stacks: &[(String, u64)]) -> HashMap<String, (u64, u64)> {
        let mut out: HashMap<String, (u64, u64)> = HashMap::new();
        for (stack, n) in stacks {
            let frames: Vec<&str> = stack.split(';').collect();
            let leaf = frames[frames.len() - 1];
            out.entry(leaf.to_string()).or_default().0 += n;
            let on: HashSet<&str> = frames[1..].iter().copied().collect();
            for f in on {
                out.entry(f.to_string()).or_default().1 += n;
            }
        }
        out
    }

    #[test]
    fn lines_sharing_callers_count_as_lines_read_alone() {
        let mut rng = Rng::new(3);
        let names = ["a", "ab", "a;", "b", "main", "x::y", "", "w"];
        let mut lines: Vec<(String, u64)> = (0..400)
            .map(|_| {
                let depth = 1 + rng.below(7);
                let stack: Vec<&str> = (0..depth)
                    .map(|i| {
                        if i == 0 {
                            "w"
                        } else {
                            names[rng.below(names.len())]
                        }
                    })
                    .collect();
                (stack.join(";"), 1 + rng.below(9) as u64)
            })
            .collect();
        // Sorted, as jobprof writes them, so that neighbours share callers;
        // then a second worker's file in another order.
        lines.sort();
        let text = |l: &[(String, u64)]| -> String {
            l.iter().map(|(s, n)| format!("{s} {n}\n")).collect()
        };
        let mut other = lines.clone();
        other.reverse();
        let (counts, total, _) = tally_of(&[&text(&lines), &text(&other)]);
        let mut both = lines.clone();
        both.extend(other);
        let want = reference(&both);
        assert_eq!(total, both.iter().map(|l| l.1).sum::<u64>());
        for (f, c) in &want {
            assert_eq!(counts.get(f).copied().unwrap_or_default(), *c, "{f:?}");
        }
        for (f, c) in &counts {
            assert!(want.contains_key(f) || *c == (0, 0), "{f:?}");
        }
    }

    #[test]
    fn a_tables_totals_are_own_time() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("gpu-kernels.tsv");
        let text =
            "name\tcount\ttotal_ns\tmedian_ns\ngemm\t2\t60\t30\nreduce(float*)\t1\t5\t5\nbad\t1\n";
        std::fs::write(&p, text).unwrap();
        let mut t = Tally::default();
        t.add_table(&p).unwrap();
        t.add_table(&p).unwrap();
        assert_eq!((t.total, t.bad_lines), (130, 2));
        let counts: HashMap<String, (u64, u64)> =
            t.into_counts().map(|(f, s, a)| (f, (s, a))).collect();
        assert_eq!(counts["gemm"], (120, 0));
        assert_eq!(counts["reduce(float*)"], (10, 0));
    }

    #[test]
    fn bad_lines_follow_the_folded_readers_rules() {
        let text =
            "# comment\n\nw;a;b 2\r\nw;a 1.5\nw;a x\n 3\nw;a 0\nw;a\t4\n  w;c 1  \nw;\u{ff}d 1\n";
        let (counts, total, bad) = tally_of(&[text]);
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f.folded");
        std::fs::write(&p, text).unwrap();
        let merged = read_folded(&[Source::Path(p)]).unwrap();
        assert_eq!((total, bad), (merged.total(), merged.bad_lines));
        assert_eq!((total, bad), (8, 3));
        assert_eq!(counts["b"], (2, 2));
        assert_eq!(counts["a"], (4, 6));
        assert_eq!(counts["c"], (1, 1));
    }
}
