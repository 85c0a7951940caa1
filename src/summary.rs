//! `summary.json`: the numbers a person or a script reads first about one
//! processed capture (samples, event, period total, shards, how much was
//! symbolized, the top functions by self and total time, the inputs with
//! sizes and hashes, versions and timings).
//!
//! [`StackStats::from_stacks`] derives the symbol statistics from folded
//! stacks; [`Summary`] is the serde type written to disk. The first frame of
//! every folded stack is the process name (the fold's root), not a function:
//! it is left out of the function lists and of the unknown-frame ratio. A
//! frame is unknown when perf could not name it: the fold spells those
//! `[unknown]` or `[dso-name]`. This module does not read captures or
//! decide anything.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

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

/// Symbol statistics of folded stacks.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct StackStats {
    /// Sum of all counts.
    pub period_total: u64,
    /// Share (0..1) of the period whose stack has at least one named frame
    /// below the process name.
    pub symbolized_ratio: f64,
    /// Share (0..1) of frames (weighted by period, process name excluded)
    /// that perf could not name.
    pub unknown_frame_ratio: f64,
    /// Top functions by self time (leaf frames).
    pub top_self: Vec<FunctionShare>,
    /// Top functions by total time (anywhere in the stack, counted once per
    /// stack even under recursion).
    pub top_total: Vec<FunctionShare>,
}

impl StackStats {
    /// Computes the statistics of `(stack, count)` pairs.
    pub fn from_stacks(stacks: &[(String, u64)]) -> StackStats {
        let mut total: u64 = 0;
        let mut symbolized: u64 = 0;
        let mut frames: u128 = 0;
        let mut unknown: u128 = 0;
        let mut self_t: HashMap<&str, u64> = HashMap::new();
        let mut total_t: HashMap<&str, u64> = HashMap::new();
        let mut seen: Vec<&str> = Vec::new();
        for (stack, count) in stacks {
            let count = *count;
            total = crate::counts::add(total, count);
            let mut parts = stack.split(';');
            let _root = parts.next();
            let mut any_known = false;
            let mut leaf = None;
            seen.clear();
            for f in parts {
                frames += u128::from(count);
                if is_unknown_frame(f) {
                    unknown += u128::from(count);
                } else {
                    any_known = true;
                }
                if !seen.contains(&f) {
                    seen.push(f);
                    let t = total_t.entry(f).or_default();
                    *t = crate::counts::add(*t, count);
                }
                leaf = Some(f);
            }
            if any_known {
                symbolized = crate::counts::add(symbolized, count);
            }
            if let Some(l) = leaf {
                let t = self_t.entry(l).or_default();
                *t = crate::counts::add(*t, count);
            }
        }
        let ratio = |a: u128, b: u128| if b == 0 { 0.0 } else { a as f64 / b as f64 };
        let top = |m: HashMap<&str, u64>| {
            let mut v: Vec<(&str, u64)> = m.into_iter().collect();
            v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
            v.truncate(TOP_N);
            v.into_iter()
                .map(|(name, period)| FunctionShare {
                    name: name.to_string(),
                    period,
                    percent: round2(100.0 * ratio(u128::from(period), u128::from(total))),
                })
                .collect()
        };
        StackStats {
            period_total: total,
            symbolized_ratio: ratio(u128::from(symbolized), u128::from(total)),
            unknown_frame_ratio: ratio(unknown, frames),
            top_self: top(self_t),
            top_total: top(total_t),
        }
    }
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// One input file of the capture.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InputFile {
    /// Name relative to the capture directory.
    pub name: String,
    /// Size in bytes.
    pub bytes: u64,
    /// SHA-256 of the content, hex (what `sha256sum` prints).
    pub sha256: String,
}

/// Hashes a file (SHA-256, streamed): its size and hex digest.
pub fn hash_file(path: &Path) -> io::Result<(u64, String)> {
    use sha2::Digest;
    let mut f = File::open(path)?;
    let mut h = sha2::Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut n_total = 0u64;
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        n_total += n as u64;
        h.update(&buf[..n]);
    }
    let hex: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
    Ok((n_total, hex))
}

/// One shard (or the symbolized text it came from) as processed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ShardSummary {
    /// Shard number.
    pub index: u32,
    /// The data file's name.
    pub data_file: String,
    /// Its size (0 when it was not there).
    pub data_bytes: u64,
    /// `perf script` runs (time slices) it was split into.
    pub slices: usize,
    /// Text bytes `perf script` printed for it.
    pub text_bytes: u64,
    /// Seconds spent in its slowest `perf script` run.
    pub seconds: f64,
    /// `ok` or `failed`.
    pub status: String,
    /// Why it failed.
    pub error: Option<String>,
}

/// Where the time went, in seconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Timings {
    /// Validation and planning (time ranges).
    pub prepare: f64,
    /// Symbolizing, folding and archiving (one pass).
    pub symbolize_fold: f64,
    /// Rendering.
    pub render: f64,
    /// Everything, up to writing the summary.
    pub total: f64,
}

/// The content of `summary.json`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    /// `jobprof`.
    pub tool: String,
    /// jobprof's version.
    pub tool_version: String,
    /// [`crate::result_dir::OUTPUT_VERSION`].
    pub output_version: u32,
    /// When the summary was written (UTC).
    pub created: String,
    /// `worker_N/Q`.
    pub capture: String,
    /// Worker index.
    pub worker: Option<u32>,
    /// Query id.
    pub query: String,
    /// Slurm job id, when recorded.
    pub job_id: Option<String>,
    /// `record` (jobprof-record) or `legacy` (old shell pipeline).
    pub layout: crate::result_dir::Layout,
    /// False when the capture had no metadata to validate (derived files
    /// only, or the original pipeline's flat layout): nothing vouches that
    /// it was complete.
    pub validated: bool,
    /// Samples folded.
    pub samples: u64,
    /// The event folded.
    pub event: Option<String>,
    /// Sum of sample periods (the folded file's total).
    pub period_total: u64,
    /// Distinct stacks.
    pub unique_stacks: u64,
    /// Share of the period with at least one named frame (0..1).
    pub symbolized_ratio: f64,
    /// Share of frames perf could not name (0..1).
    pub unknown_frame_ratio: f64,
    /// Lines of `perf script` output that were not understood.
    pub skipped_lines: u64,
    /// Shards.
    pub shards: Vec<ShardSummary>,
    /// How the text was obtained: `perf script` or the name of the
    /// symbolized text file folded instead.
    pub symbolized_from: String,
    /// Top functions by self time.
    pub top_self: Vec<FunctionShare>,
    /// Top functions by total time.
    pub top_total: Vec<FunctionShare>,
    /// Input files with sizes and hashes.
    pub inputs: Vec<InputFile>,
    /// `perf --version` of the perf that symbolized (none when the text was
    /// folded from an archive).
    pub perf_version: Option<String>,
    /// `perf --version` of the perf that recorded, when known.
    pub recorded_with: Option<String>,
    /// Output files written, besides this one and the marker.
    pub outputs: Vec<String>,
    /// Why the flamegraph was not rendered, when it was not.
    pub render_refused: Option<String>,
    /// Things that went wrong without stopping the capture.
    pub warnings: Vec<String>,
    /// Timings.
    pub timings: Timings,
}

impl Summary {
    /// Pretty JSON with a trailing newline.
    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).expect("a summary always serializes");
        s.push('\n');
        s
    }
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
    fn self_total_and_ratios() {
        let stacks = vec![
            ("app;main;f;g".to_string(), 6),
            ("app;main;f;f".to_string(), 2),
            ("app;[libc.so.6];[unknown]".to_string(), 2),
        ];
        let s = StackStats::from_stacks(&stacks);
        assert_eq!(s.period_total, 10);
        assert!((s.symbolized_ratio - 0.8).abs() < 1e-9);
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
    fn empty_is_all_zero() {
        let s = StackStats::from_stacks(&[]);
        assert_eq!(s.symbolized_ratio, 0.0);
        assert!(s.top_self.is_empty());
    }
}
