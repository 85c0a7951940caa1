//! `summary.json` as the views read it: the fields the job page and
//! `index.json` show, typed, under the names [`crate::output::summary`]
//! writes them (a test writes a summary there and reads it back here, so a
//! renamed field fails it). Older files' names are aliases; a field a
//! summary lacks (written by an older or newer jobprof) is `None` or empty
//! and shown as "-", and fields the views do not show are ignored.

use std::path::Path;

use serde::Deserialize;

use crate::capture::{self, legacy::Facts};
use crate::text::offcpu::AllThreads;

/// The fields of one capture's `summary.json` that the views show.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct SummaryFields {
    /// Samples folded.
    pub samples: Option<u64>,
    /// Sum of the sample periods.
    pub period_total: Option<u64>,
    /// The event folded.
    pub event: Option<String>,
    /// Share (0..1) of the period whose leaf frame is named.
    #[serde(alias = "symbolized_share")]
    pub symbolized_ratio: Option<Ratio>,
    /// Share (0..1) of the period whose stack was cut short.
    #[serde(
        alias = "truncated_share",
        alias = "truncated_stack_ratio",
        alias = "truncated_stacks_ratio",
        alias = "truncated"
    )]
    pub truncated_ratio: Option<Ratio>,
    /// Top functions by self time.
    pub top_self: Vec<TopFunction>,
    /// The few-symbols warning.
    pub symbol_warning: Option<String>,
    /// Why the flamegraph was not rendered, when it was not.
    pub render_refused: Option<String>,
    /// Things that went wrong without stopping the capture.
    pub warnings: Vec<String>,
    /// Slurm job id, when recorded.
    pub job_id: Option<String>,
    /// The old shell pipeline's facts, for its captures.
    pub old_pipeline: Option<Facts>,
    /// Off-CPU totals, for captures recorded with `--off-cpu`.
    pub off_cpu: Option<OffCpu>,
}

/// A share as summaries have written it: a number, or (older files) an
/// object with a `share` or `ratio`.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum Ratio {
    /// `0.25`.
    Number(f64),
    /// `{"share": 0.25}` or `{"ratio": 0.25}`.
    Object {
        /// The share.
        #[serde(default)]
        share: Option<f64>,
        /// The same, by its other name.
        #[serde(default)]
        ratio: Option<f64>,
    },
}

impl Ratio {
    /// The share, when the object holds one.
    pub fn value(self) -> Option<f64> {
        match self {
            Ratio::Number(x) => Some(x),
            Ratio::Object { share, ratio } => share.or(ratio),
        }
    }
}

/// One entry of `top_self`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct TopFunction {
    /// The frame name (an entry without one is left out).
    pub name: Option<String>,
    /// Percent of the period total.
    pub percent: f64,
}

/// The `off_cpu` section: the totals over all threads.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct OffCpu {
    /// Totals over all threads, in ns: the type `summary.json` is written
    /// from, so writer and reader cannot drift apart.
    pub totals: AllThreads,
}

impl SummaryFields {
    /// Parses a summary; `None` when it is not JSON of these fields.
    pub fn parse(text: &str) -> Option<SummaryFields> {
        serde_json::from_str(text).ok()
    }

    /// Reads `path` (never through a link, never waiting on a FIFO);
    /// `None` when it is missing or unreadable.
    pub fn read(path: &Path) -> Option<SummaryFields> {
        SummaryFields::parse(&capture::read_plain(path).ok()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::summary::{FunctionShare, Summary, Timings};

    /// A summary as `jobprof process` writes it.
    fn written() -> Summary {
        let top = |name: &str, percent| FunctionShare {
            name: name.into(),
            period: 1,
            percent,
        };
        Summary {
            tool: "jobprof".into(),
            tool_version: "0".into(),
            output_version: capture::OUTPUT_VERSION,
            created: "2026-12-02T00:00:00Z".into(),
            capture: "worker_1/q3".into(),
            worker: Some(1),
            query: "q3".into(),
            job_id: Some("4242".into()),
            layout: capture::Layout::Legacy,
            validated: true,
            samples: 1234,
            event: Some("cpu-clock".into()),
            period_total: 99_000,
            unique_stacks: 7,
            symbolized_ratio: 0.75,
            named_stack_ratio: 0.8,
            symbol_warning: Some("few symbols".into()),
            unnamed_stack_ratio: 0.2,
            unknown_frame_ratio: 0.1,
            truncated_ratio: 0.125,
            unnamed_by_dso: vec![],
            truncated_roots: vec![],
            discarded_chains: None,
            kernel_symbols: None,
            jit: None,
            skipped_lines: 0,
            shards: vec![],
            symbolized_from: "perf script".into(),
            top_self: vec![top("scan", 60.0), top("main", 30.0)],
            top_total: vec![],
            inputs: vec![],
            perf_version: None,
            recorded_with: None,
            capture_arch: None,
            host_arch: "x86_64".into(),
            call_graph: None,
            outputs: vec![],
            render_refused: Some("too few symbols".into()),
            warnings: vec!["shard 1 lost samples".into()],
            timings: Timings::default(),
            old_pipeline: Some(Facts {
                hostname: Some("node7".into()),
                frequency: Some("99".into()),
                shard_count: Some(4),
                ..Facts::default()
            }),
            build_ids: vec![],
            symbol_sources: vec![],
            off_cpu: Some(crate::text::offcpu::Summary {
                totals: crate::text::offcpu::AllThreads {
                    on_cpu_ns: 3,
                    runnable_ns: 1,
                    ..Default::default()
                },
                ..Default::default()
            }),
        }
    }

    #[test]
    fn a_written_summary_reads_back_with_its_values() {
        let s = SummaryFields::parse(&written().to_json()).expect("parses");
        assert_eq!(s.samples, Some(1234));
        assert_eq!(s.period_total, Some(99_000));
        assert_eq!(s.event.as_deref(), Some("cpu-clock"));
        assert_eq!(s.symbolized_ratio.and_then(Ratio::value), Some(0.75));
        assert_eq!(s.truncated_ratio.and_then(Ratio::value), Some(0.125));
        let names: Vec<_> = s.top_self.iter().map(|f| f.name.as_deref()).collect();
        assert_eq!(names, [Some("scan"), Some("main")]);
        assert_eq!(s.top_self[0].percent, 60.0);
        assert_eq!(s.symbol_warning.as_deref(), Some("few symbols"));
        assert_eq!(s.render_refused.as_deref(), Some("too few symbols"));
        assert_eq!(s.warnings, ["shard 1 lost samples"]);
        assert_eq!(s.job_id.as_deref(), Some("4242"));
        let old = s.old_pipeline.expect("old_pipeline");
        assert_eq!(old.hostname.as_deref(), Some("node7"));
        assert_eq!(old.frequency.as_deref(), Some("99"));
        assert_eq!(old.shard_count, Some(4));
        let t = s.off_cpu.expect("off_cpu").totals;
        assert_eq!((t.on_cpu_ns, t.runnable_ns), (3, 1));
    }

    #[test]
    fn older_summaries_are_read_by_their_field_names() {
        let s = SummaryFields::parse(
            r#"{"samples": 7, "symbolized_share": 0.5, "truncated": {"share": 0.25},
                "top_self": [{"name": "f"}, {"percent": 3.0}], "extra": [1]}"#,
        )
        .expect("parses");
        assert_eq!(s.samples, Some(7));
        assert_eq!(s.symbolized_ratio.and_then(Ratio::value), Some(0.5));
        assert_eq!(s.truncated_ratio.and_then(Ratio::value), Some(0.25));
        assert_eq!(s.top_self[0].name.as_deref(), Some("f"));
        assert_eq!(s.top_self[1].name, None);
        let s = SummaryFields::parse(r#"{"truncated_stack_ratio": {"ratio": 0.5}}"#).unwrap();
        assert_eq!(s.truncated_ratio.and_then(Ratio::value), Some(0.5));
        // What an old file lacks stays empty (a dash on the page).
        let s = SummaryFields::parse("{}").unwrap();
        assert_eq!(s, SummaryFields::default());
        assert!(SummaryFields::parse("not json").is_none());
    }
}
