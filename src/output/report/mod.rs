//! The text report (`report.txt`, `jobprof report`): what `perf report
//! --stdio --no-children` prints, but over all shards of a capture
//! together, with the event, samples, window and honest symbol figures on
//! top, fitting an 80-column sbatch log.
//!
//! A [`Profile`] is the capture's samples reduced to weighted call chains
//! of `(symbol, DSO)` frames, leaf first; [`read`] builds one from `perf
//! script` text, folded stacks or a capture directory. [`write`] prints it:
//! one entry per function by self weight (its DSO, `[.]` user or `[k]`
//! kernel, share of the whole capture), each with its heaviest call paths,
//! entries below `--percent-limit` left out, at most `--limit` of them.
//! Ties are broken by name, so the same input always gives the same bytes.
//! Further sections (per-thread totals, off-CPU time) are [`Section`]s a
//! caller appends; this module knows nothing about captures' metadata.

pub mod read;

use std::collections::HashMap;
use std::io::{self, Write};

/// Name of the report in a capture's output directory.
pub const REPORT_TXT: &str = "report.txt";

/// The line width the report keeps to.
pub const WIDTH: usize = 80;

/// One frame: a function (or `[unknown]`) and the file it is in.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Frame {
    /// The symbol without offset; `[unknown]` when perf could not name it.
    pub symbol: String,
    /// The DSO's file name (`libc.so.6`, `[kernel.kallsyms]`), `-` when
    /// the input did not say (folded stacks).
    pub dso: String,
}

impl Frame {
    /// True for a frame perf could not name.
    pub fn is_unknown(&self) -> bool {
        self.symbol == "[unknown]"
    }

    /// `[k]` for kernel frames, `[.]` for the others (as perf prints).
    pub fn kind(&self) -> &'static str {
        if self.dso == "[kernel.kallsyms]" || self.dso.starts_with("[kernel") {
            "[k]"
        } else {
            "[.]"
        }
    }

    /// How the frame is printed in a call path.
    fn label(&self) -> String {
        if self.is_unknown() && self.dso != "-" {
            format!("[unknown] ({})", self.dso)
        } else {
            self.symbol.clone()
        }
    }
}

/// A capture's samples as weighted call chains.
#[derive(Debug, Clone, Default)]
pub struct Profile {
    /// Every distinct frame; chains refer to them by index.
    pub frames: Vec<Frame>,
    /// Call chains, leaf first, with their summed weight (periods).
    pub chains: HashMap<Vec<u32>, u64>,
    /// Samples read; `None` for folded stacks, which hold summed weights,
    /// not how many samples made them.
    pub samples: Option<u64>,
    /// Samples read whose one frame was on their header line (recorded
    /// without call graphs).
    pub flat_samples: u64,
    /// What the weights count when the event does not say (folded stacks
    /// of a capture: `ns` for `cpu-clock`).
    pub count_name: Option<String>,
    /// The event, when the input says.
    pub event: Option<String>,
    /// First and last sample time (seconds), when the input says.
    pub window: Option<(f64, f64)>,
    /// What the profile was read from, for the header.
    pub source: String,
    /// Shards merged, when known.
    pub shards: Option<usize>,
    /// Lines read that were neither `perf script` text nor `stack COUNT`
    /// (skipped).
    pub bad_lines: u64,
    /// Indexes into `frames`, by [`frame_hash`] of the frame's text: a
    /// frame seen before is found without building its strings.
    index: hashbrown::HashTable<u32>,
}

/// The hash of a frame by its `(symbol, DSO)` text.
fn frame_hash(symbol: &str, dso: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = rustc_hash::FxHasher::default();
    symbol.hash(&mut h);
    dso.hash(&mut h);
    h.finish()
}

impl Profile {
    /// The index of `frame`, added when new.
    pub fn intern(&mut self, frame: Frame) -> u32 {
        match self.find(&frame.symbol, &frame.dso) {
            Some(i) => i,
            None => self.push(frame),
        }
    }

    /// The index of the frame `symbol` in `dso`, added when new; no
    /// string is built for a frame seen before.
    pub fn intern_parts(&mut self, symbol: &str, dso: &str) -> u32 {
        match self.find(symbol, dso) {
            Some(i) => i,
            None => self.push(Frame {
                symbol: symbol.to_string(),
                dso: dso.to_string(),
            }),
        }
    }

    fn find(&self, symbol: &str, dso: &str) -> Option<u32> {
        let frames = &self.frames;
        let same = |&i: &u32| frames[i as usize].symbol == symbol && frames[i as usize].dso == dso;
        self.index.find(frame_hash(symbol, dso), same).copied()
    }

    fn push(&mut self, frame: Frame) -> u32 {
        let i = self.frames.len() as u32;
        let frames = &self.frames;
        let rehash = |&j: &u32| {
            let f: &Frame = &frames[j as usize];
            frame_hash(&f.symbol, &f.dso)
        };
        self.index
            .insert_unique(frame_hash(&frame.symbol, &frame.dso), i, rehash);
        self.frames.push(frame);
        i
    }

    /// Adds one sample (or `weight` of a folded stack) with `chain` leaf
    /// first.
    pub fn add(&mut self, chain: Vec<u32>, weight: u64) {
        let w = self.chains.entry(chain).or_default();
        *w = crate::sys::counts::add(*w, weight);
    }

    /// [`Self::add`] for a chain in a buffer the caller keeps: copied only
    /// when it is new.
    pub fn add_slice(&mut self, chain: &[u32], weight: u64) {
        match self.chains.get_mut(chain) {
            Some(w) => *w = crate::sys::counts::add(*w, weight),
            None => {
                self.chains.insert(chain.to_vec(), weight);
            }
        }
    }

    /// The sum of all weights.
    pub fn total(&self) -> u64 {
        self.chains
            .values()
            .fold(0u64, |a, &b| crate::sys::counts::add(a, b))
    }

    /// Each function's self weight (of the chains whose leaf frame it
    /// is: the leaf's function line, [`crate::symbolize::sample::function_line`]),
    /// by frame index, heaviest first, ties by name: the report's entries
    /// and `summary.json`'s `top_self` alike.
    pub fn self_weights(&self) -> Vec<(u32, u64)> {
        let mut by_leaf: HashMap<u32, u64> = HashMap::new();
        for (chain, &w) in &self.chains {
            if let Some(&leaf) = chain.first() {
                let t = by_leaf.entry(leaf).or_default();
                *t = crate::sys::counts::add(*t, w);
            }
        }
        let mut out: Vec<(u32, u64)> = by_leaf.into_iter().collect();
        out.sort_by(|a, b| {
            b.1.cmp(&a.1)
                .then_with(|| self.frames[a.0 as usize].cmp(&self.frames[b.0 as usize]))
        });
        out
    }

    /// Shares (percent) of the weight whose leaf is named, and whose chain
    /// has any named frame.
    pub fn symbol_shares(&self) -> (f64, f64) {
        let (mut leaf, mut any) = (0u64, 0u64);
        for (chain, &w) in &self.chains {
            let named = |i: &u32| !self.frames[*i as usize].is_unknown();
            if chain.first().is_some_and(named) {
                leaf += w;
            }
            if chain.iter().any(named) {
                any += w;
            }
        }
        let t = self.total().max(1) as f64;
        (100.0 * leaf as f64 / t, 100.0 * any as f64 / t)
    }
}

/// A further section of the report: a title and its lines (each at most
/// [`WIDTH`] columns; longer ones are cut).
#[derive(Debug, Clone, Default)]
pub struct Section {
    /// Printed as `# TITLE`.
    pub title: String,
    /// The section's lines.
    pub lines: Vec<String>,
}

/// What to print.
#[derive(Debug, Clone)]
pub struct Options {
    /// Leave out entries below this share (percent), as `perf report
    /// --percent-limit`.
    pub percent_limit: f64,
    /// At most this many entries.
    pub limit: Option<usize>,
    /// Call paths shown under each entry.
    pub paths: usize,
    /// Frames shown per call path.
    pub depth: usize,
    /// Printed after the main table.
    pub sections: Vec<Section>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            percent_limit: 0.1,
            limit: None,
            paths: 3,
            depth: 12,
            sections: Vec::new(),
        }
    }
}

/// One line of the main table: a function's self weight and its paths.
struct Entry {
    frame: u32,
    weight: u64,
    /// Caller chains (the entry's own frame first), heaviest first.
    paths: Vec<(Vec<u32>, u64)>,
}

/// The entries by self weight ([`Profile::self_weights`]), heaviest first,
/// ties by name.
fn entries(p: &Profile) -> Vec<Entry> {
    let mut by_leaf: HashMap<u32, Vec<(&Vec<u32>, u64)>> = HashMap::new();
    for (chain, &w) in &p.chains {
        if let Some(&leaf) = chain.first() {
            by_leaf.entry(leaf).or_default().push((chain, w));
        }
    }
    p.self_weights()
        .into_iter()
        .map(|(frame, weight)| {
            let chains = by_leaf.remove(&frame).unwrap_or_default();
            let mut paths: Vec<(Vec<u32>, u64)> =
                chains.into_iter().map(|(c, w)| (c.clone(), w)).collect();
            paths.sort_by(|a, b| {
                b.1.cmp(&a.1)
                    .then_with(|| names(p, &a.0).cmp(&names(p, &b.0)))
            });
            Entry {
                frame,
                weight,
                paths,
            }
        })
        .collect()
}

fn names<'a>(p: &'a Profile, chain: &[u32]) -> Vec<&'a Frame> {
    chain.iter().map(|i| &p.frames[*i as usize]).collect()
}

/// Cuts `s` to [`WIDTH`] columns (characters), ending in `...` when cut,
/// with its control characters escaped first (a name cannot reach the
/// reader's terminal as an escape sequence).
fn fit(s: &str) -> String {
    let s = &*crate::sys::progress::printable_text(s);
    if s.chars().count() <= WIDTH {
        return s.to_string();
    }
    let mut out: String = s.chars().take(WIDTH - 3).collect();
    out.push_str("...");
    out
}

/// `# TEXT` as comment lines of at most [`WIDTH`] columns, broken at
/// spaces (the lines after the first indented).
fn comment(text: &str) -> Vec<String> {
    let mut lines = vec![String::from("#")];
    for word in text.split(' ') {
        let last = lines.last_mut().expect("one line at least");
        if last.len() > 3 && last.chars().count() + 1 + word.chars().count() > WIDTH {
            lines.push(format!("#   {word}"));
        } else {
            last.push(' ');
            last.push_str(word);
        }
    }
    lines.iter().map(|l| fit(l)).collect()
}

fn pct(part: u64, total: u64) -> f64 {
    100.0 * part as f64 / total.max(1) as f64
}

/// Prints the report of `p`.
pub fn write(p: &Profile, opts: &Options, out: &mut dyn Write) -> io::Result<()> {
    let total = p.total();
    write_header(p, total, out)?;
    let list = entries(p);
    let shown: Vec<&Entry> = list
        .iter()
        .filter(|e| pct(e.weight, total) >= opts.percent_limit)
        .take(opts.limit.unwrap_or(usize::MAX))
        .collect();
    let dso_w = shown
        .iter()
        .map(|e| p.frames[e.frame as usize].dso.chars().count())
        .max()
        .unwrap_or(13)
        .clamp(13, 24);
    writeln!(out, "# Overhead  {:<dso_w$}  Symbol", "Shared Object")?;
    writeln!(out, "# ........  {}  {}", ".".repeat(dso_w), ".".repeat(22))?;
    writeln!(out, "#")?;
    for e in &shown {
        let f = &p.frames[e.frame as usize];
        let dso: String = f.dso.chars().take(dso_w).collect();
        let line = format!(
            "{:>9.2}%  {dso:<dso_w$}  {} {}",
            pct(e.weight, total),
            f.kind(),
            f.symbol
        );
        writeln!(out, "{}", fit(&line))?;
        write_paths(p, e, opts, total, out)?;
        writeln!(out)?;
    }
    let left = list.len() - shown.len();
    if left > 0 {
        let rest = list[shown.len()..]
            .iter()
            .fold(0u64, |a, e| crate::sys::counts::add(a, e.weight));
        let line = format!(
            "# {left} more function(s), {:.2}% of the weight (--percent-limit {}, --limit)",
            pct(rest, total),
            opts.percent_limit
        );
        writeln!(out, "{}", fit(&line))?;
    }
    for s in &opts.sections {
        writeln!(out, "#\n# {}\n#", fit(&s.title))?;
        for l in &s.lines {
            writeln!(out, "{}", fit(l))?;
        }
    }
    Ok(())
}

fn write_header(p: &Profile, total: u64, out: &mut dyn Write) -> io::Result<()> {
    let shards = p
        .shards
        .map(|n| format!(", {n} shard(s) together"))
        .unwrap_or_default();
    writeln!(
        out,
        "{}",
        fit(&format!("# jobprof report: {}{shards}", p.source))
    )?;
    let samples = match (p.samples, p.count_name.as_deref()) {
        (Some(n), _) => format!(
            "# Samples: {n}  of event '{}'",
            p.event.as_deref().unwrap_or("unknown")
        ),
        // Folded stacks whose counts are samples (an nsys profile's CPU
        // samples): the count is the samples'.
        (None, Some("samples")) => format!("# Samples: {total}"),
        (None, _) => "# Samples: not known (folded stacks hold weights, not samples)".to_string(),
    };
    writeln!(out, "{}", fit(&samples))?;
    match p.count_name.as_deref() {
        Some("ns") if p.samples.is_none() => writeln!(
            out,
            "# Event count: {total} ns ({})",
            crate::sys::units::format_amount(total as f64, "ns")
        )?,
        Some(unit) if p.samples.is_none() => writeln!(out, "# Event count: {total} {unit}")?,
        _ => writeln!(out, "# Event count: {total}")?,
    }
    if let Some((a, b)) = p.window {
        writeln!(
            out,
            "# Window: {:.3} s (first to last sample)",
            (b - a).max(0.0)
        )?;
    }
    let (leaf, any) = p.symbol_shares();
    writeln!(
        out,
        "# Symbols: {leaf:.1}% of the weight has a named leaf, {any:.1}% a named frame"
    )?;
    if p.flat_samples > 0 {
        let all = p.samples.unwrap_or(p.flat_samples);
        let warning = crate::text::perf_script::no_call_graph_warning(p.flat_samples, all);
        for line in comment(&format!("Warning: {warning}")) {
            writeln!(out, "{line}")?;
        }
    }
    if leaf < crate::output::summary::SYMBOL_WARN_PCT {
        writeln!(
            out,
            "# Warning: few symbols; unnamed frames are shown as [unknown] in their DSO"
        )?;
    }
    writeln!(
        out,
        "# Shares are of all samples together (perf report's are per shard)."
    )?;
    writeln!(out, "#")
}

/// The heaviest call paths of an entry, as perf's caller graph: the
/// entry's frame, then its callers up to the thread's entry.
fn write_paths(
    p: &Profile,
    e: &Entry,
    opts: &Options,
    total: u64,
    out: &mut dyn Write,
) -> io::Result<()> {
    let paths: Vec<&(Vec<u32>, u64)> = e
        .paths
        .iter()
        .filter(|(_, w)| pct(*w, total) >= opts.percent_limit)
        .take(opts.paths)
        .collect();
    if paths.is_empty() {
        return Ok(());
    }
    writeln!(out, "            |")?;
    let single = paths.len() == 1 && e.paths.len() == 1;
    for (chain, w) in &paths {
        let frames: Vec<String> = chain
            .iter()
            .take(opts.depth)
            .map(|i| p.frames[*i as usize].label())
            .collect();
        let (first, indent) = if single {
            (format!("            ---{}", frames[0]), " ".repeat(15))
        } else {
            let head = format!("            |--{:.2}%--", pct(*w, total));
            let indent = format!("            |{}", " ".repeat(head.len() - 13));
            (format!("{head}{}", frames[0]), indent)
        };
        writeln!(out, "{}", fit(&first))?;
        for f in &frames[1..] {
            writeln!(out, "{}", fit(&format!("{indent}{f}")))?;
        }
        if chain.len() > opts.depth {
            writeln!(
                out,
                "{indent}... ({} more callers)",
                chain.len() - opts.depth
            )?;
        }
        if !single {
            writeln!(out, "            |")?;
        }
    }
    let shown = paths
        .iter()
        .fold(0u64, |a, p| crate::sys::counts::add(a, p.1));
    if !single && shown < e.weight {
        writeln!(
            out,
            "            ---{:.2}% in {} other path(s)",
            pct(e.weight - shown, total),
            e.paths.len() - paths.len()
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile() -> Profile {
        let mut p = Profile {
            source: "test".into(),
            samples: Some(4),
            event: Some("cpu-clock".into()),
            ..Profile::default()
        };
        let f = |p: &mut Profile, s: &str, d: &str| {
            p.intern(Frame {
                symbol: s.into(),
                dso: d.into(),
            })
        };
        let (burn, busy, start, unk) = (
            f(&mut p, "burn", "w"),
            f(&mut p, "busy", "w"),
            f(&mut p, "start_thread", "libc.so.6"),
            f(&mut p, "[unknown]", "libc.so.6"),
        );
        p.add(vec![burn, busy, start], 300);
        p.add(vec![burn, start], 100);
        p.add(vec![unk, busy], 1);
        p
    }

    #[test]
    fn control_characters_in_names_are_escaped_as_in_the_log() {
        let evil = "\u{1b}]0;TITLE\u{7}\u{1b}[2J";
        let mut p = profile();
        p.event = Some(format!("ev{evil}"));
        p.source = format!("src{evil}");
        let f = p.intern(Frame {
            symbol: format!("jit{evil}"),
            dso: format!("perf-1.map{evil}"),
        });
        p.add(vec![f], 1000);
        let opts = Options {
            sections: vec![Section {
                title: format!("t{evil}"),
                lines: vec![format!("l{evil}")],
            }],
            ..Options::default()
        };
        let mut out = Vec::new();
        write(&p, &opts, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            !text.chars().any(|c| c.is_control() && c != '\n'),
            "{text:?}"
        );
        assert!(text.contains("jit\\u{1b}]0;TITLE\\u{7}"), "{text}");
        assert!(text.contains("'ev\\u{1b}]0;TITLE"), "{text}");
    }

    #[test]
    fn entries_by_self_weight_with_paths_and_limits() {
        let mut out = Vec::new();
        write(&profile(), &Options::default(), &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("99.75%  w              [.] burn"), "{text}");
        assert!(text.contains("|--74.81%--burn"), "{text}");
        assert!(
            text.contains("0.25%  libc.so.6      [.] [unknown]"),
            "{text}"
        );
        assert!(text.contains("99.8% of the weight has a named leaf, 100.0% a named"));
        assert!(text.lines().all(|l| l.chars().count() <= WIDTH), "{text}");
        let mut out = Vec::new();
        let opts = Options {
            percent_limit: 1.0,
            ..Options::default()
        };
        write(&profile(), &opts, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            !text.contains("[unknown]") && text.contains("1 more function(s)"),
            "{text}"
        );
    }
}
