//! The symbol statistics of `summary.json`, derived from folded stacks
//! ([`StackStats::from_stacks`]): samples and weight, the share whose leaf
//! is named, the unnamed weight per DSO, the top functions by self and
//! total time, and whether stacks were truncated, judged from how they
//! were unwound (by the unwinder, or by where each call chain ended),
//! never from what their frames are called; [`StackStats::warnings`]
//! turns bad figures into one warning each, with the likely fix. The
//! first frame of every folded stack is the process name, left out of
//! every list and ratio.

use std::collections::HashMap;

use serde::Serialize;

/// How many functions each top list holds.
pub const TOP_N: usize = 50;

/// True for a frame perf could not name (`[unknown]`, `[libc.so.6]`,
/// `[unknown]_[k]`).
pub fn is_unknown_frame(frame: &str) -> bool {
    let f = frame
        .strip_suffix("_[k]")
        .or_else(|| frame.strip_suffix("_[j]"))
        .or_else(|| frame.strip_suffix("_[i]"))
        .unwrap_or(frame);
    f.starts_with('[') && f.ends_with(']')
}

/// One function's share.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FunctionShare {
    /// The frame name.
    pub name: String,
    /// Its period (samples weighted by period, as in the folded file).
    pub period: u64,
    /// Percent of the period total.
    pub percent: f64,
}

/// Weight of the stacks with an unnamed frame in one DSO.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DsoShare {
    /// The DSO's file name as perf printed it (`libc.so.6`,
    /// `[kernel.kallsyms]`), or `[unknown]` for addresses in no mapping.
    pub dso: String,
    /// Period of the stacks with at least one unnamed frame in it.
    pub period: u64,
    /// Percent of the period total.
    pub percent: f64,
}

/// How many DSOs [`StackStats::unnamed_by_dso`] lists.
pub const TOP_DSOS: usize = 10;

/// What a capture recorded without call chains (`perf record` without
/// `-g`) gets instead of a truncation warning: its stacks are not cut, it
/// has none.
pub const NO_CALL_GRAPH: &str =
    "the capture has no call graph (recorded without `perf record -g`): \
     each stack is the sampled function alone, without callers; record with `perf record -g` \
     (or `--call-graph dwarf`)";

/// Symbol statistics of folded stacks.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct StackStats {
    /// Sum of all counts.
    pub period_total: u64,
    /// Share (0..1) of the period whose leaf frame (where the sample was
    /// taken) is named.
    pub symbolized_ratio: f64,
    /// Share (0..1) of the period whose stack has at least one named frame
    /// (the old pipeline's renderer drew at 5% of call chains by this).
    pub named_stack_ratio: f64,
    /// Share (0..1) of the period whose stack has at least one unnamed frame.
    pub unnamed_stack_ratio: f64,
    /// Share (0..1) of frames (weighted by period, process name excluded)
    /// that perf could not name.
    pub unknown_frame_ratio: f64,
    /// Share (0..1) of the period whose stack the unwinder cut short
    /// before the thread's first frame (0 until judged).
    pub truncated_ratio: f64,
    /// The DSOs with unnamed frames, most weight first (at most
    /// [`TOP_DSOS`]).
    pub unnamed_by_dso: Vec<DsoShare>,
    /// Why the truncated stacks stop, most weight first: the unwinder's
    /// causes (`stack copy exhausted`, `no unwind tables`, `unwinding
    /// failed`) or the call chains' ([`crate::text::fold::chain::Cut`]).
    pub truncated_roots: Vec<FunctionShare>,
    /// Who judged truncation.
    #[serde(skip)]
    pub truncation_judge: Judge,
    /// Call chains discarded as corrupted, as perf does (`None`: not
    /// known, `perf script` symbolized a shard).
    pub discarded_chains: Option<DiscardedChains>,
    /// Top functions by self time (leaf frames; where the samples' call
    /// chains are read, [`top_self_of`] replaces it: a folded leaf may be
    /// an inlined function, which perf charges to the one holding it).
    pub top_self: Vec<FunctionShare>,
    /// Top functions by total time (anywhere in the stack, counted once per
    /// stack even under recursion).
    pub top_total: Vec<FunctionShare>,
}

/// The DSO an unnamed frame belongs to: `[libc.so.6]` -> `libc.so.6`,
/// `[[kernel.kallsyms]]` -> `[kernel.kallsyms]`, `[libc.so.6 <7f01>]`
/// (`--addrs`) -> `libc.so.6`. `None` for a named frame.
pub fn unnamed_dso(frame: &str) -> Option<&str> {
    if !is_unknown_frame(frame) {
        return None;
    }
    let f = frame
        .strip_suffix("_[k]")
        .or_else(|| frame.strip_suffix("_[j]"))
        .or_else(|| frame.strip_suffix("_[i]"))
        .unwrap_or(frame);
    let inner = &f[1..f.len() - 1];
    let inner = match inner.rfind(" <") {
        Some(i) if inner.ends_with('>') => &inner[..i],
        _ => inner,
    };
    Some(match inner {
        "unknown" => "[unknown]",
        other => other,
    })
}

/// The samples whose recorded call chain held an entry at or above
/// `PERF_CONTEXT_MAX` that is no context marker (a frame-pointer walk that
/// read `0xffffffffffffffff` as a return address): perf 6.1 takes such a
/// chain for corrupted and discards all of it, printing the sample
/// without frames (or with only the frames unwound from its stack copy),
/// and the native symbolizer does the same.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct DiscardedChains {
    /// How many samples.
    pub samples: u64,
    /// Their weight (sum of periods).
    pub period: u64,
}

/// Who judged which stacks are truncated.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Judge {
    /// Nobody yet: nothing is counted truncated.
    #[default]
    None,
    /// The call chains' last frames in the text (frame-pointer chains,
    /// and every shard `perf script` symbolized).
    Chains,
    /// The native unwinder, for dwarf stacks it unwound.
    Unwinder,
}

/// The sums [`StackStats::from_stacks`] collects, one stack at a time.
#[derive(Default)]
struct Tally<'a> {
    total: u64,
    leaf_named: u64,
    any_named: u64,
    any_unnamed: u64,
    frames: u128,
    unknown: u128,
    self_t: HashMap<&'a str, u64>,
    total_t: HashMap<&'a str, u64>,
    by_dso: HashMap<&'a str, u64>,
    /// Scratch, per stack: the frames and unnamed DSOs already counted.
    seen: Vec<&'a str>,
    dsos: Vec<&'a str>,
}

/// `m[key] += count`, saturating.
fn bump<'a>(m: &mut HashMap<&'a str, u64>, key: &'a str, count: u64) {
    let t = m.entry(key).or_default();
    *t = crate::sys::counts::add(*t, count);
}

impl<'a> Tally<'a> {
    /// Counts one folded stack (`process;root;...;leaf`) of weight `count`.
    fn add(&mut self, stack: &'a str, count: u64) {
        self.total = crate::sys::counts::add(self.total, count);
        let mut parts = stack.split(';');
        let _process = parts.next();
        let mut leaf = None;
        let mut named = false;
        self.seen.clear();
        self.dsos.clear();
        for f in parts {
            self.frames += u128::from(count);
            if let Some(dso) = unnamed_dso(f) {
                self.unknown += u128::from(count);
                if !self.dsos.contains(&dso) {
                    self.dsos.push(dso);
                }
            } else {
                named = true;
            }
            if !self.seen.contains(&f) {
                self.seen.push(f);
                bump(&mut self.total_t, f, count);
            }
            leaf = Some(f);
        }
        for d in &self.dsos {
            bump(&mut self.by_dso, d, count);
        }
        if !self.dsos.is_empty() {
            self.any_unnamed = crate::sys::counts::add(self.any_unnamed, count);
        }
        if named {
            self.any_named = crate::sys::counts::add(self.any_named, count);
        }
        if leaf.is_some_and(|l| !is_unknown_frame(l)) {
            self.leaf_named = crate::sys::counts::add(self.leaf_named, count);
        }
        if let Some(l) = leaf {
            bump(&mut self.self_t, l, count);
        }
    }

    /// The ratios and top lists of what was counted.
    fn stats(self) -> StackStats {
        let total = self.total;
        let top = |m: HashMap<&str, u64>, n: usize| top(m, total, n);
        let t = u128::from(total);
        StackStats {
            period_total: total,
            symbolized_ratio: ratio(u128::from(self.leaf_named), t),
            named_stack_ratio: ratio(u128::from(self.any_named), t),
            unnamed_stack_ratio: ratio(u128::from(self.any_unnamed), t),
            unknown_frame_ratio: ratio(self.unknown, self.frames),
            truncated_ratio: 0.0,
            unnamed_by_dso: top(self.by_dso, TOP_DSOS)
                .into_iter()
                .map(|f| DsoShare {
                    dso: f.name,
                    period: f.period,
                    percent: f.percent,
                })
                .collect(),
            truncated_roots: Vec::new(),
            truncation_judge: Judge::None,
            discarded_chains: None,
            top_self: top(self.self_t, TOP_N),
            top_total: top(self.total_t, TOP_N),
        }
    }
}

/// The top functions by self time of `profile`, the samples' call chains
/// as the report reads them: each sample's weight charged to its leaf
/// frame's function line ([`crate::symbolize::sample::function_line`],
/// as `perf report --no-children` charges it and as the report's entries
/// are), named as the fold names frames (`[libc.so.6]` for an unnamed
/// one) and summed by that name, as [`StackStats::from_stacks`] sums
/// folded leaves.
pub fn top_self_of(profile: &crate::output::report::Profile) -> Vec<FunctionShare> {
    let mut by_name: HashMap<String, u64> = HashMap::new();
    for (i, w) in profile.self_weights() {
        let f = &profile.frames[i as usize];
        let t = by_name.entry(folded_name(f)).or_default();
        *t = crate::sys::counts::add(*t, w);
    }
    let by_name = by_name.iter().map(|(n, &w)| (n.as_str(), w)).collect();
    top(by_name, profile.total(), TOP_N)
}

/// The name the fold gives the frame `f` of a report (its symbol in its
/// DSO): the frame name of the line `perf script` prints for it, by the
/// fold's rules with the fold's defaults (its first name: a Java inline
/// chain `a->b` is charged to `a`, the function holding the code).
fn folded_name(f: &crate::output::report::Frame) -> String {
    use crate::text::fold::frame::{line_names, FrameSettings};
    const SETTINGS: FrameSettings = FrameSettings {
        include_addrs: false,
        annotate_kernel: false,
        annotate_jit: false,
        keep_paren_frames: true,
        anon_is_jit: true,
    };
    let line = crate::symbolize::sample::Line::new(f.symbol.as_str(), f.dso.as_str());
    let names = line_names("0", &line, false, &SETTINGS, &[]).names;
    names.into_iter().next().unwrap_or_else(|| f.symbol.clone())
}

/// The `n` heaviest of `m`'s `(name, weight)`, ties by name, with their
/// shares of `total`.
fn top(m: HashMap<&str, u64>, total: u64, n: usize) -> Vec<FunctionShare> {
    let mut v: Vec<(&str, u64)> = m.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    v.truncate(n);
    let t = u128::from(total);
    v.into_iter()
        .map(|(name, period)| FunctionShare {
            name: name.to_string(),
            period,
            percent: round2(100.0 * ratio(u128::from(period), t)),
        })
        .collect()
}

/// `a / b`, 0 when `b` is.
fn ratio(a: u128, b: u128) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

impl StackStats {
    /// Computes the statistics of `(stack, count)` pairs.
    pub fn from_stacks(stacks: &[(String, u64)]) -> StackStats {
        let mut tally = Tally::default();
        for (stack, count) in stacks {
            tally.add(stack, *count);
        }
        tally.stats()
    }

    /// Truncation as the native unwinder judged it: `causes` are the
    /// weights of the stacks it stopped short, by why (`stack copy
    /// exhausted`, ...), out of `unwound` (the weight of the samples it
    /// unwound; the ratio is of the larger of that and the period total).
    pub fn judged_by_unwinder(&mut self, causes: &[(&str, u64)], unwound: u64) {
        self.judged(causes, unwound, Judge::Unwinder);
    }

    /// Truncation as the call chains' last frames say
    /// ([`crate::text::fold::chain`]): for frame-pointer chains and text
    /// `perf script` unwound, whatever the frames are called.
    pub fn judged_by_chains(&mut self, chains: &crate::text::fold::chain::ChainEnds) {
        use crate::text::fold::chain::Cut;
        let causes: Vec<(&str, u64)> = Cut::ALL
            .iter()
            .zip(chains.cut)
            .map(|(c, w)| (c.as_str(), w))
            .collect();
        self.judged(&causes, chains.weight, Judge::Chains);
    }

    fn judged(&mut self, causes: &[(&str, u64)], unwound: u64, judge: Judge) {
        let of = unwound.max(self.period_total);
        let ratio = |w: u64| if of == 0 { 0.0 } else { w as f64 / of as f64 };
        let truncated = causes.iter().fold(0u64, |a, &(_, w)| a.saturating_add(w));
        self.truncated_ratio = ratio(truncated);
        let mut roots: Vec<FunctionShare> = causes
            .iter()
            .filter(|&&(_, w)| w > 0)
            .map(|&(name, period)| FunctionShare {
                name: name.to_string(),
                period,
                percent: round2(100.0 * ratio(period)),
            })
            .collect();
        roots.sort_by_key(|r| std::cmp::Reverse(r.period));
        self.truncated_roots = roots;
        self.truncation_judge = judge;
    }

    /// The symbol figures in one phrase, for page headers and the report:
    /// `3.0% named leaves, 61.2% of stacks with a named frame`.
    pub fn symbol_figures(&self) -> String {
        format!(
            "{:.1}% named leaves, {:.1}% of stacks with a named frame",
            100.0 * self.symbolized_ratio,
            100.0 * self.named_stack_ratio
        )
    }

    /// The warning that goes with every picture drawn from too few named
    /// leaves (below [`SYMBOL_WARN_PCT`]%): the picture is drawn anyway
    /// (unnamed frames still say in which DSO the time went), and the
    /// reader is told how far to trust it.
    pub fn symbol_warning(&self) -> Option<String> {
        let leaf = 100.0 * self.symbolized_ratio;
        (self.period_total > 0 && leaf < SYMBOL_WARN_PCT).then(|| {
            let dso = self
                .unnamed_by_dso
                .first()
                .map(|d| format!("; most unnamed frames are in {} ({:.1}%)", d.dso, d.percent))
                .unwrap_or_default();
            format!(
                "few symbols: only {leaf:.1}% of the weight has a named leaf frame and {:.1}% \
                 of it a named frame at all{dso}: the picture shows in which DSO the time went, \
                 not in which function; check symfs/ (the worker's binaries with .symtab or \
                 .debug_info)",
                100.0 * self.named_stack_ratio
            )
        })
    }

    /// One warning per figure that is bad enough to mislead a reader of the
    /// flamegraph, each with its likely fix: more than
    /// [`TRUNCATED_WARN_PCT`]% of the weight truncated, or more than
    /// [`DSO_WARN_PCT`]% unnamed in one DSO.
    pub fn warnings(&self) -> Vec<String> {
        self.warnings_for(None)
    }

    /// The truncation warning: the causes, each with its share, and the
    /// fix for the main one, fitting the call-graph mode (`dwarf`).
    fn truncation_warning(&self, truncated: f64, dwarf: bool) -> String {
        let causes: Vec<String> = self
            .truncated_roots
            .iter()
            .map(|r| format!("{} {:.1}%", r.name, r.percent))
            .collect();
        let main = self.truncated_roots.first().map(|r| r.name.as_str());
        let fix = match main {
            Some("stack copy exhausted") => {
                "the stack copies were too small for these stacks: record with a larger one, \
                 e.g. --call-graph dwarf,32768"
            }
            Some("no unwind tables") => {
                "the code where they stop has no unwind tables (.eh_frame) or is in no file \
                 (JIT code): a larger stack copy will not help; build it with unwind tables, \
                 or record with --call-graph fp and -fno-omit-frame-pointer"
            }
            Some("unsupported CFA rule") => {
                "the functions where they stop have unwind tables, but with a rule the native \
                 unwinder cannot evaluate (a DWARF expression operation it does not know): a \
                 larger stack copy will not help; process with --symbolizer perf (perf's \
                 libunwind evaluates it), or record with --call-graph fp and \
                 -fno-omit-frame-pointer"
            }
            Some("return address in no mapping") if self.truncation_judge == Judge::Unwinder => {
                "a step through the unwind tables gave a return address in no mapping (a \
                 damaged stack, or unwind tables that do not describe the code): a larger stack \
                 copy will not help; compare with --symbolizer perf"
            }
            Some("call chain at the depth limit") => {
                "the stacks are deeper than perf's limit of 127 frames, whose callers are not \
                 recorded: raise kernel.perf_event_max_stack on the node before recording \
                 (deep recursion shows its innermost frames only)"
            }
            Some("return address in no mapping" | "no caller recorded") if dwarf => {
                "it was recorded with --call-graph dwarf: the code where they stop has no \
                 unwind tables (.eh_frame) or is JIT code, or the stack copies were too small \
                 (record with a larger one, e.g. --call-graph dwarf,32768)"
            }
            Some("return address in no mapping" | "no caller recorded") => {
                "a frame pointer led nowhere: the code where they stop keeps no frame pointers; \
                 record with --call-graph dwarf, or build the program and its libraries with \
                 -fno-omit-frame-pointer (static glibc and most distribution libraries have \
                 none)"
            }
            _ => "a frame could not be unwound (a damaged stack, or deeper than perf prints)",
        };
        let who = match self.truncation_judge {
            Judge::Unwinder => "the unwinder stopped before the thread's first frame",
            _ => "their call chains end before the thread's first frame",
        };
        format!(
            "{truncated:.1}% of the weight is in truncated stacks: {who} ({}); {fix}",
            causes.join(", ")
        )
    }

    /// [`StackStats::warnings`] for a capture recorded with `call_graph`
    /// (`fp` or `dwarf`; `None`: not known): the advice fits the mode used
    /// (no "record with --call-graph dwarf" for a dwarf capture).
    /// A capture recorded without call chains (`none`: no `-g`) has only
    /// its leaves: that is said, not a truncation and its frame-pointer fix.
    pub fn warnings_for(&self, call_graph: Option<&str>) -> Vec<String> {
        let dwarf = call_graph == Some("dwarf");
        let mut out = Vec::new();
        let truncated = 100.0 * self.truncated_ratio;
        if call_graph == Some("none") {
            out.push(NO_CALL_GRAPH.to_string());
        } else if truncated > TRUNCATED_WARN_PCT && self.truncation_judge != Judge::None {
            out.push(self.truncation_warning(truncated, dwarf));
        }
        for d in &self.unnamed_by_dso {
            if d.percent <= DSO_WARN_PCT {
                continue;
            }
            let jit_dso = crate::symbolize::jit::pid_in(&d.dso, "perf-", ".map").is_some()
                || d.dso == "anon"
                || (d.dso.starts_with("jitted-") && d.dso.ends_with(".so"));
            let fix = match d.dso.as_str() {
                _ if jit_dso => {
                    "JIT-compiled code its runtime's perf map does not name (no debug package \
                     can): the runtime must write /tmp/perf-PID.map before stop (JVM: \
                     jobprof-record --jit-maps auto asks it, JDK 17+; Node: --perf-basic-prof; \
                     Python 3.12+: -X perf); see jit in summary.json and symbol-manifest.tsv"
                }
                "[kernel.kallsyms]" => {
                    "kernel symbols were not available: record with jobprof-record as root or \
                     with kernel.kptr_restrict=0 so that kallsyms is snapshotted (see \
                     kernel_symbols in summary.json)"
                }
                "[unknown]" if dwarf => {
                    "these addresses are in no mapping: code without unwind tables, or a stack \
                     copy too small (record with a larger --call-graph dwarf,SIZE)"
                }
                "[unknown]" => {
                    "these addresses are in no mapping, usually a broken frame-pointer chain: \
                     record with --call-graph dwarf or build with -fno-omit-frame-pointer"
                }
                _ => {
                    "its symbols are missing: install its debug package (debug info by build id \
                     under /usr/lib/debug/.build-id) on the node before recording, or deploy it \
                     unstripped; symbol-manifest.tsv shows what was snapshotted"
                }
            };
            out.push(format!(
                "{:.1}% of the weight has unnamed frames in {}: {fix}",
                d.percent, d.dso
            ));
        }
        out
    }
}

/// Below this share of weight with a named leaf (percent), every picture
/// carries [`StackStats::symbol_warning`].
pub const SYMBOL_WARN_PCT: f64 = 5.0;

/// Above this share of truncated weight (percent), [`StackStats::warnings`]
/// warns.
pub const TRUNCATED_WARN_PCT: f64 = 10.0;
/// Above this share of weight unnamed in one DSO (percent),
/// [`StackStats::warnings`] warns.
pub const DSO_WARN_PCT: f64 = 5.0;

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_frames() {
        assert!(is_unknown_frame("[unknown]"));
        assert!(is_unknown_frame("[libc.so.6]"));
        assert!(is_unknown_frame("[kernel.kallsyms]_[k]"));
        assert!(!is_unknown_frame("main"));
        assert!(!is_unknown_frame("do_sys_open_[k]"));
        assert!(!is_unknown_frame("std::vector<int>::operator[]"));
    }

    #[test]
    fn unnamed_dsos() {
        assert_eq!(unnamed_dso("[libc.so.6]"), Some("libc.so.6"));
        assert_eq!(
            unnamed_dso("[[kernel.kallsyms]]_[k]"),
            Some("[kernel.kallsyms]")
        );
        assert_eq!(
            unnamed_dso("[[kernel.kallsyms]]"),
            Some("[kernel.kallsyms]")
        );
        assert_eq!(unnamed_dso("[unknown]"), Some("[unknown]"));
        assert_eq!(unnamed_dso("[libc.so.6 <7f01>]"), Some("libc.so.6"));
        assert_eq!(unnamed_dso("main"), None);
    }

    #[test]
    fn no_stack_is_truncated_for_what_its_frames_are_called() {
        // Unnamed roots, and named ones that are no thread entry.
        let stacks = vec![
            ("w;[libc.so.6];main;work".to_string(), 50),
            ("w;msort_with_tmp;cmp".to_string(), 50),
        ];
        let mut s = StackStats::from_stacks(&stacks);
        assert_eq!(s.truncated_ratio, 0.0);
        assert!(s.truncated_roots.is_empty());
        assert!(s.warnings().iter().all(|w| !w.contains("truncated")));
        // The chains reached their first frames.
        s.judged_by_chains(&crate::text::fold::chain::ChainEnds {
            weight: 100,
            cut: [0; 3],
        });
        assert_eq!(s.truncated_ratio, 0.0);
        assert!(s.warnings().iter().all(|w| !w.contains("truncated")));
    }

    #[test]
    fn the_chains_verdict_names_the_cause_and_its_fix() {
        let stacks = vec![("w;main;work".to_string(), 100)];
        let mut s = StackStats::from_stacks(&stacks);
        s.judged_by_chains(&crate::text::fold::chain::ChainEnds {
            weight: 100,
            cut: [0, 30, 10],
        });
        assert!((s.truncated_ratio - 0.4).abs() < 1e-9);
        assert_eq!(s.truncated_roots[0].name, "return address in no mapping");
        let fp = s.warnings_for(Some("fp"));
        assert!(
            fp[0].contains("40.0% of the weight is in truncated stacks: their call chains end")
                && fp[0].contains("return address in no mapping 30.0%, no caller recorded 10.0%")
                && fp[0].contains("-fno-omit-frame-pointer"),
            "{}",
            fp[0]
        );
        let dwarf = s.warnings_for(Some("dwarf"));
        assert!(
            dwarf[0].contains("it was recorded with --call-graph dwarf")
                && !dwarf[0].contains("record with --call-graph dwarf,"),
            "{}",
            dwarf[0]
        );
        // Deeper than perf records: the depth limit's fix.
        s.judged_by_chains(&crate::text::fold::chain::ChainEnds {
            weight: 100,
            cut: [50, 0, 0],
        });
        assert!(s.warnings()[0].contains("kernel.perf_event_max_stack"));
    }

    #[test]
    fn the_unwinders_verdict_names_its_causes() {
        let stacks = vec![("w;[libc.so.6];main;work".to_string(), 100)];
        let mut s = StackStats::from_stacks(&stacks);
        // The unwinder reached the first frame of every stack.
        s.judged_by_unwinder(&[("stack copy exhausted", 0), ("no unwind tables", 0)], 100);
        assert_eq!(s.truncated_ratio, 0.0);
        assert!(s
            .warnings_for(Some("dwarf"))
            .iter()
            .all(|w| !w.contains("truncated")));
        // It stopped short in a fifth of them, mostly for the copy's size.
        s.judged_by_unwinder(
            &[("stack copy exhausted", 15), ("no unwind tables", 5)],
            100,
        );
        assert!((s.truncated_ratio - 0.2).abs() < 1e-9);
        assert_eq!(s.truncated_roots[0].name, "stack copy exhausted");
        let w = s.warnings_for(Some("dwarf"));
        assert!(
            w[0].contains("20.0% of the weight is in truncated stacks: the unwinder stopped")
                && w[0].contains("stack copy exhausted 15.0%, no unwind tables 5.0%")
                && w[0].contains("--call-graph dwarf,32768"),
            "{}",
            w[0]
        );
    }

    #[test]
    fn each_cause_the_unwinder_names_gets_its_own_fix() {
        use crate::symbolize::native::unwind::Stop;
        let stacks = vec![("w;[libc.so.6];main;work".to_string(), 100)];
        let fix = |cause: Stop| {
            let mut s = StackStats::from_stacks(&stacks);
            s.judged_by_unwinder(&[(cause.as_str(), 50)], 100);
            s.warnings_for(Some("dwarf")).remove(0)
        };
        for cause in Stop::SHORT {
            let w = fix(cause);
            assert!(w.contains(&format!("({} 50.0%)", cause.as_str())), "{w}");
            // Only an exhausted copy is helped by a larger one.
            assert_eq!(w.contains("dwarf,32768"), cause == Stop::StackCopy, "{w}");
        }
        let w = fix(Stop::Unsupported);
        assert!(
            w.contains("have unwind tables, but with a rule")
                && w.contains("--symbolizer perf")
                && !w.contains("no unwind tables (.eh_frame)"),
            "{w}"
        );
        assert!(fix(Stop::NoTables).contains("no unwind tables (.eh_frame)"));
        assert!(fix(Stop::BadAddress).contains("a step through the unwind tables"));
        assert!(fix(Stop::Depth).contains("kernel.perf_event_max_stack"));
        assert!(fix(Stop::Lost).contains("could not be unwound"));
    }

    #[test]
    fn honest_figures_count_placeholders_as_unnamed() {
        // The old figure (any named frame) said 100% here.
        let stacks = vec![
            ("w;_start;main;work".to_string(), 50),
            ("w;clone3;start_thread;[libc.so.6]".to_string(), 30),
            (
                "w;[libc.so.6];[[kernel.kallsyms]];[[kernel.kallsyms]]".to_string(),
                20,
            ),
        ];
        let s = StackStats::from_stacks(&stacks);
        assert!((s.symbolized_ratio - 0.5).abs() < 1e-9);
        assert!((s.unnamed_stack_ratio - 0.5).abs() < 1e-9);
        assert_eq!(s.truncated_ratio, 0.0);
        assert_eq!(s.unnamed_by_dso[0].dso, "libc.so.6");
        assert_eq!(s.unnamed_by_dso[0].period, 50);
        assert_eq!(s.unnamed_by_dso[1].dso, "[kernel.kallsyms]");
        assert_eq!(s.unnamed_by_dso[1].period, 20, "counted once per stack");
        let w = s.warnings();
        assert_eq!(w.len(), 2, "{w:#?}");
        assert!(
            w[0].contains("libc.so.6: ") && w[0].contains("debug package"),
            "{}",
            w[0]
        );
        assert!(w[1].contains("[kernel.kallsyms]: ") && w[1].contains("kptr_restrict"));
        let good = StackStats::from_stacks(&[("w;_start;main".to_string(), 99)]);
        assert!(good.warnings().is_empty());
        assert_eq!(good.symbolized_ratio, 1.0);
        assert_eq!(good.truncated_ratio, 0.0);
    }

    #[test]
    fn self_total_and_ratios() {
        let stacks = vec![
            ("app;main;f;g".to_string(), 6),
            ("app;main;f;f".to_string(), 2),
            ("app;[libc.so.6];[unknown]".to_string(), 2),
        ];
        let s = StackStats::from_stacks(&stacks);
        assert_eq!(s.period_total, 10);
        assert!((s.symbolized_ratio - 0.8).abs() < 1e-9);
        assert!((s.unnamed_stack_ratio - 0.2).abs() < 1e-9);
        // frames: 3*6 + 3*2 + 2*2 = 28, unknown 4.
        assert!((s.unknown_frame_ratio - 4.0 / 28.0).abs() < 1e-9);
        assert_eq!(s.top_self[0].name, "g");
        assert_eq!(s.top_self[0].period, 6);
        assert_eq!(s.top_self[0].percent, 60.0);
        let f = s.top_total.iter().find(|x| x.name == "f").unwrap();
        assert_eq!(f.period, 8, "recursion counted once per stack");
        assert!(s.top_total.iter().all(|x| x.name != "app"));
    }

    #[test]
    fn top_self_of_the_samples_is_charged_as_the_report_charges_it() {
        use crate::output::report::{Frame, Profile};
        let mut p = Profile::default();
        let mut frame = |symbol: &str, dso: &str| {
            p.intern(Frame {
                symbol: symbol.into(),
                dso: dso.into(),
            })
        };
        let (memmove, copyit, unknown, main) = (
            frame("__memmove_avx512_unaligned_erms", "libc.so.6"),
            frame("copyit", "m"),
            frame("[unknown]", "libc.so.6"),
            frame("main", "m"),
        );
        p.add(vec![memmove, copyit, main], 97);
        p.add(vec![copyit, main], 1);
        p.add(vec![unknown, main], 2);
        let top = top_self_of(&p);
        let names: Vec<(&str, u64, f64)> = top
            .iter()
            .map(|f| (f.name.as_str(), f.period, f.percent))
            .collect();
        // Named as the fold names frames: `[libc.so.6]` for unnamed ones.
        assert_eq!(
            names,
            [
                ("__memmove_avx512_unaligned_erms", 97, 97.0),
                ("[libc.so.6]", 2, 2.0),
                ("copyit", 1, 1.0)
            ]
        );
    }

    #[test]
    fn empty_is_all_zero() {
        let s = StackStats::from_stacks(&[]);
        assert_eq!(s.symbolized_ratio, 0.0);
        assert!(s.top_self.is_empty());
    }
}
