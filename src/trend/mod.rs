//! `jobprof trend`: what changed across a series of runs of the same
//! queries. Each run is a result directory already processed by `jobprof
//! process` or `reprocess`; the runs are read once ([`load`]: each query's
//! replicates, their workers merged as the job views merge them, kept as
//! per-function shares counted straight from the folded files by
//! [`tally`]), judged ([`assess`]: per query and function, the
//! change of the self and total share from the baseline, beyond the
//! threshold and significant by a permutation test over replicates with a
//! Benjamini-Hochberg adjustment; [`stats`] holds the tests, in `sys` since
//! `jobprof diff` judges its frames with them too), and written
//! ([`page`]: `trend.html`, a chart per query linking every point to that
//! run's flamegraph or its diff against the baseline, and `trend.json`,
//! every figure). This stage reads what the job views ([`crate::views`])
//! and the processing wrote; it never folds a capture again. Nsight
//! Systems profiles (`profiles/nsys/worker_N/Q/jobprof/`) are followed
//! beside the perf captures ([`nsys_runs`]): their CPU stacks, and their
//! GPU kernel, memory copy and NVTX tables, each name's total time per
//! replicate taken as a function's own time.

pub mod assess;
pub mod load;
mod nsys_runs;
mod page;
pub use crate::sys::stats;
mod tally;

use std::path::{Path, PathBuf};

use serde::Serialize;

pub use assess::{Assessment, Baseline, Finding, Kind, Options, TimeFinding, Unjudged};
pub use assess::{FnSeries, QueryTrend};
pub use assess::{PlanChange, PlanFunction};
pub use load::{LoadOptions, RunInfo, Series};

use crate::error::{Error, Result};
use crate::sys::atomic::write_atomic;

/// Callers named under a cause in stdout and on the page (nearest first;
/// `trend.json` keeps them all).
pub const CALLERS_SHOWN: usize = 8;

/// The chart page.
pub const TREND_HTML: &str = "trend.html";
/// Every figure, for scripts.
pub const TREND_JSON: &str = "trend.json";
/// Where the run-versus-baseline diffs go, in the output directory.
pub const DIFFS_DIR: &str = "diffs";

/// The settings a trend was judged with, as `trend.json` records them.
#[derive(Debug, Clone, Serialize)]
pub struct Settings {
    /// on-cpu, off-cpu or wall-clock.
    pub profile: String,
    /// What the counts are (`ns`, `samples`, ...).
    pub count_name: String,
    /// The baseline, in words.
    pub baseline: String,
    /// Smallest change in points.
    pub min_change: f64,
    /// Smallest change of a query's total, in percent.
    pub min_time_change: f64,
    /// The false discovery rate.
    pub alpha: f64,
    /// Standard deviations of the baseline runs a change must exceed.
    pub noise_sigmas: f64,
    /// Functions below this share of a replicate read as 0 (percent).
    pub floor_pct: f32,
    /// The replicate naming rule.
    pub replicate_rule: &'static str,
}

/// The whole trend: runs, settings, charts and findings.
#[derive(Debug, Clone, Serialize)]
pub struct Trend {
    /// `jobprof`.
    pub tool: &'static str,
    /// Its version.
    pub tool_version: &'static str,
    /// When written (UTC).
    pub generated: String,
    /// How it was judged.
    pub settings: Settings,
    /// The runs, oldest first.
    pub runs: Vec<RunInfo>,
    /// The assessment.
    #[serde(flatten)]
    pub assessment: Assessment,
}

/// The replicate rule in words (for the page and `trend.json`).
pub const REPLICATE_RULE: &str = "a capture named BASE_iterN (also \
     BASE{_,.,-}{iter,iteration,rep,repeat,run}N and BASE.N: Q3_iter2, q01.rep2, q01.2) is \
     replicate N of query BASE; any other name is a query with one replicate";

impl Trend {
    /// Assesses `series` with `opts`.
    pub fn new(series: &Series, opts: &Options, profile: &str, count_name: &str) -> Trend {
        let baseline = match opts.baseline {
            Baseline::Earlier => "the median of the earlier runs".to_string(),
            Baseline::Run(i) => format!("run {} ({})", i + 1, series.runs[i].name),
        };
        Trend {
            tool: "jobprof",
            tool_version: env!("CARGO_PKG_VERSION"),
            generated: crate::sys::units::utc_timestamp(),
            settings: Settings {
                profile: profile.to_string(),
                count_name: count_name.to_string(),
                baseline,
                min_change: opts.min_change,
                min_time_change: opts.min_time_change,
                alpha: opts.alpha,
                noise_sigmas: opts.noise_sigmas,
                floor_pct: load::FLOOR_PCT,
                replicate_rule: REPLICATE_RULE,
            },
            runs: series.runs.clone(),
            assessment: assess::assess(series, opts),
        }
    }

    /// The significant findings.
    pub fn significant(&self) -> impl Iterator<Item = &Finding> {
        self.assessment.findings.iter().filter(|f| f.significant)
    }

    /// The significant findings nothing else explains ([`Finding::reported`]):
    /// each cause once, its callers folded under it.
    pub fn reported(&self) -> impl Iterator<Item = &Finding> {
        self.assessment.findings.iter().filter(|f| f.reported())
    }

    /// The finding that explains `f`: its cause's self finding (reported,
    /// or named in a plan change), or itself.
    pub fn reported_for<'a>(&'a self, f: &'a Finding) -> &'a Finding {
        let Some(cause) = &f.cause else { return f };
        self.significant()
            .find(|c| {
                c.kind == Kind::Own && &c.function == cause && c.query == f.query && c.run == f.run
            })
            .unwrap_or(f)
    }
}

/// Writes `trend.html`, `trend.json` (when `json` is `None`, into
/// `out_dir`) and the diffs of the runs with a significant finding into
/// `out_dir` (created), each file atomically; fills in the links.
pub fn write(
    trend: &mut Trend,
    series: &Series,
    out_dir: &Path,
    json: Option<&Path>,
) -> Result<()> {
    std::fs::create_dir_all(out_dir).map_err(|e| Error::io(out_dir, e))?;
    page::link_flamegraphs(trend, series, out_dir);
    page::draw_diffs(trend, series, out_dir)?;
    let json_path = json.map_or_else(|| out_dir.join(TREND_JSON), Path::to_path_buf);
    let mut text = serde_json::to_string_pretty(trend).expect("the trend serializes");
    text.push('\n');
    write_atomic(&json_path, text.as_bytes())?;
    write_atomic(out_dir.join(TREND_HTML), page::html(trend).as_bytes())
}

/// The smallest p-value written as a number: below it (a t test's p can
/// round to 0), `<1e-9`.
const P_FLOOR: f64 = 1e-9;

/// A p-value as every output writes it (stdout, stderr, the page): three
/// decimals, two significant digits below 0.001, `<1e-9` below 1e-9
/// (never `0.0e0`). With its sign, as lines print it: [`p_is`].
pub fn fmt_p(p: f64) -> String {
    if p < P_FLOOR {
        "<1e-9".to_string()
    } else if p < 0.001 {
        format!("{p:.1e}")
    } else {
        format!("{p:.3}")
    }
}

/// `p=0.012`, `p=4.0e-4`, or `p<1e-9`.
pub fn p_is(p: f64) -> String {
    let v = fmt_p(p);
    if v.starts_with('<') {
        format!("p{v}")
    } else {
        format!("p={v}")
    }
}

/// An amount of `count_name` (a query's or a function's time per
/// replicate) as every output writes it: `ns` as seconds (`0.74 s`, or ms
/// and µs when small), other counts as whole numbers with their name.
pub fn amount(x: f64, count_name: &str) -> String {
    if count_name != "ns" {
        return format!("{x:.0} {count_name}");
    }
    let s = x / 1e9;
    if s.abs() >= 0.1 {
        format!("{s:.2} s")
    } else if s.abs() >= 1e-4 {
        format!("{:.1} ms", s * 1e3)
    } else {
        format!("{:.0} µs", s * 1e6)
    }
}

/// What the counts of `query`'s series are: `ns` for an nsys table's
/// (`Q [gpu-kernels]`, `Q [nvtx]`), `samples` for an nsys profile's CPU
/// stacks (`Q [nsys]`), else the run's `count_name`.
pub fn count_name_of<'a>(query: &str, count_name: &'a str) -> &'a str {
    match nsys_runs::series_of(query) {
        Some(nsys_runs::SeriesKind::Table) => "ns",
        Some(nsys_runs::SeriesKind::Cpu) => "samples",
        None => count_name,
    }
}

/// `to` relative to the directory `from` (both made absolute first).
pub fn relative(from: &Path, to: &Path) -> Option<PathBuf> {
    let abs = |p: &Path| -> Option<PathBuf> {
        let p = if p.is_absolute() {
            p.to_path_buf()
        } else {
            std::env::current_dir().ok()?.join(p)
        };
        // Resolve `..` and links of the directories (the target itself
        // is a plain file checked by the caller).
        match (p.parent(), p.file_name()) {
            (Some(dir), Some(name)) if !p.is_dir() => Some(dir.canonicalize().ok()?.join(name)),
            _ => p.canonicalize().ok(),
        }
    };
    let (from, to) = (abs(from)?, abs(to)?);
    let f: Vec<_> = from.components().collect();
    let t: Vec<_> = to.components().collect();
    let common = f.iter().zip(&t).take_while(|(a, b)| a == b).count();
    let mut out = PathBuf::new();
    for _ in common..f.len() {
        out.push("..");
    }
    for c in &t[common..] {
        out.push(c);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn p_values_and_amounts_have_one_form() {
        assert_eq!(fmt_p(0.0123), "0.012");
        assert_eq!(fmt_p(0.0004), "4.0e-4");
        // Issue 58, item 8: a p of 0 (a t test's, rounded) was `0.0e0`.
        assert_eq!(fmt_p(0.0), "<1e-9");
        assert_eq!(p_is(0.0), "p<1e-9");
        assert_eq!(p_is(0.0123), "p=0.012");
        assert_eq!(amount(735_343_292.0, "ns"), "0.74 s");
        assert_eq!(amount(2_500_000.0, "ns"), "2.5 ms");
        assert_eq!(amount(40_000.0, "ns"), "40 µs");
        assert_eq!(amount(377.0, "samples"), "377 samples");
    }

    #[test]
    fn relative_paths_climb_to_the_common_dir() {
        let d = tempfile::tempdir().unwrap();
        let a = d.path().join("out");
        let b = d.path().join("runs/r1/profiles");
        std::fs::create_dir_all(&a).unwrap();
        std::fs::create_dir_all(&b).unwrap();
        std::fs::write(b.join("f.html"), "x").unwrap();
        assert_eq!(
            relative(&a, &b.join("f.html")).unwrap(),
            PathBuf::from("../runs/r1/profiles/f.html")
        );
        assert_eq!(
            relative(&a, &a.join("x.html")).unwrap(),
            PathBuf::from("x.html")
        );
    }
}
