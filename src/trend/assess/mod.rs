//! What changed: for each query, each function (self and total share of
//! the query's samples) and each run tested (the newest, or each one), the
//! change from the baseline (the median of the earlier runs' means, or
//! one chosen run), and whether it is beyond the noise:
//!
//! - the change must exceed the threshold: `min_change` points and
//!   `noise_sigmas` standard deviations of the baseline runs' means (the
//!   run-to-run noise; none with one baseline run);
//! - and be significant: the permutation test of the run's replicates
//!   against the baseline runs' replicates, over every function and kind
//!   of the query at once (max-T: a family-wise adjusted p-value per
//!   function; with one replicate per run, the between-runs prediction
//!   test with Holm's adjustment), then across queries and tested runs
//!   Benjamini-Hochberg over each query's smallest adjusted p selects the
//!   queries that changed, and within them a function is significant at
//!   `alpha` x selected / queries ([`select`]).
//!
//! Each query's total (its samples per replicate) is judged in log terms
//! against the machine's run-to-run noise, pooled over every query of the
//! baseline runs (a run's load moves all its queries; [`totals`]),
//! Benjamini-Hochberg across queries. The chart series (the top functions'
//! shares per run, with their spread over replicates) are gathered here
//! too.

use serde::Serialize;

mod causes;
mod chart;
mod notes;
mod plan;
mod totals;

use chart::chart;
pub use chart::{FnSeries, QueryTrend};
use notes::{dilution_notes, note_one_replicate, why_unjudged, why_untestable};
pub use plan::{PlanChange, PlanFunction};
pub use totals::MIN_LOAD_DF;
use totals::{load_noise, time};

use super::load::{QuerySeries, Replicate, Series};
use super::stats::{self, Method, Tested};

/// Which runs the tested run is compared with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Baseline {
    /// The median of all earlier runs (the default).
    #[default]
    Earlier,
    /// One run (its index in the series).
    Run(usize),
}

/// How to judge changes.
#[derive(Debug, Clone)]
pub struct Options {
    /// Smallest change in share worth reporting, in points.
    pub min_change: f64,
    /// The false discovery rate of the Benjamini-Hochberg adjustment.
    pub alpha: f64,
    /// The baseline.
    pub baseline: Baseline,
    /// Test every run against its own baseline, not only the newest.
    pub each_run: bool,
    /// Smallest change of a query's total worth reporting, in percent.
    pub min_time_change: f64,
    /// Standard deviations of the baseline runs' means a change must
    /// exceed.
    pub noise_sigmas: f64,
    /// Functions charted per query (besides those with a finding).
    pub top: usize,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            min_change: 1.0,
            alpha: 0.05,
            baseline: Baseline::Earlier,
            each_run: false,
            min_time_change: 10.0,
            noise_sigmas: 3.0,
            top: 8,
        }
    }
}

/// Self or total share.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// Samples whose leaf is the function.
    #[serde(rename = "self")]
    Own,
    /// Samples with the function anywhere on the stack.
    Total,
}

impl Kind {
    /// `self` or `total`.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Own => "self",
            Kind::Total => "total",
        }
    }
}

/// A mean with its spread over replicates.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Stat {
    /// Mean over the replicates.
    pub mean: f64,
    /// Their standard deviation (0 for one).
    pub sd: f64,
    /// Smallest.
    pub min: f64,
    /// Largest.
    pub max: f64,
    /// Replicates.
    pub n: usize,
}

impl Stat {
    pub(super) fn of(v: &[f64]) -> Option<Stat> {
        (!v.is_empty()).then(|| Stat {
            mean: stats::mean(v),
            sd: stats::sd(v),
            min: v.iter().copied().fold(f64::INFINITY, f64::min),
            max: v.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            n: v.len(),
        })
    }
}

/// A tested change of one function's share.
#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    /// `regressed` (the share rose) or `improved`.
    pub verdict: &'static str,
    /// Significant after the adjustment, and beyond the threshold.
    pub significant: bool,
    /// The query.
    pub query: String,
    /// The function.
    pub function: String,
    /// Self or total share.
    pub kind: Kind,
    /// The run tested (index in the series).
    pub run: usize,
    /// The baseline runs.
    pub baseline_runs: Vec<usize>,
    /// The baseline share (percent).
    pub baseline: f64,
    /// The run's share (mean over its replicates).
    pub new: f64,
    /// Its spread over the run's replicates.
    pub new_spread: Stat,
    /// new - baseline, in points.
    pub change: f64,
    /// The function's own time per replicate in the baseline (its share of
    /// each replicate's total; the median of the baseline runs' means), in
    /// the profile's counts.
    pub baseline_time: f64,
    /// The same in the run (the mean over its replicates).
    pub new_time: f64,
    /// new_time - baseline_time, in points of the baseline's total per
    /// replicate: what the function's own time did, whatever the others'
    /// did to its share.
    pub own_time_change: f64,
    /// The own time moved the way the share did, by more than
    /// `min_change` points of the baseline's total. A share that moved
    /// only because other functions' time did (dilution) is never
    /// significant.
    pub own_time_moved: bool,
    /// The run-to-run noise: `noise_sigmas` x the sd of the baseline runs'
    /// means (0 with one baseline run).
    pub noise: f64,
    /// The change that had to be exceeded: max(min_change, noise).
    pub threshold: f64,
    /// Two-sided p-value.
    pub p: f64,
    /// Benjamini-Hochberg adjusted p-value.
    pub q: f64,
    /// How p was found.
    pub method: Method,
    /// For a significant `[total]` finding: the function whose own time
    /// explains it, under which it is reported: of the significant self
    /// findings of the same query and run whose stacks through this
    /// function explain at least half of its change in share, the one
    /// that explains the most; `None` when they do not ([`causes`]).
    pub cause: Option<String>,
    /// For a significant finding nothing explains, of a function absent
    /// from every replicate of the baseline runs (`appeared`) or of the
    /// tested run (`vanished`): the query's plan changed, and the function
    /// is named once in its [`PlanChange`], not on a line of its own.
    pub plan_change: Option<&'static str>,
    /// For a significant self finding: its callers
    /// (on at least half of its own samples in the run, and those whose
    /// `[total]` findings it explains), nearest first (`called from: a <-
    /// b <- c`).
    pub callers: Vec<String>,
}

impl Finding {
    /// Significant and not explained by another finding: what stdout, the
    /// page and the gate name.
    pub fn reported(&self) -> bool {
        self.significant && self.cause.is_none() && self.plan_change.is_none()
    }
}

/// A tested change of one query's total.
#[derive(Debug, Clone, Serialize)]
pub struct TimeFinding {
    /// `slower` or `faster`.
    pub verdict: &'static str,
    /// Significant and beyond the threshold.
    pub significant: bool,
    /// The query.
    pub query: String,
    /// The run tested.
    pub run: usize,
    /// How many baseline runs it was judged against (with one, the
    /// run-to-run noise is unknown and the change is never significant).
    pub baseline_runs: usize,
    /// The machine's run-to-run noise it was judged against: the standard
    /// deviation of a query's log total between baseline runs, pooled over
    /// every query of the series (`None` when no query has two baseline
    /// runs).
    pub load_sd: Option<f64>,
    /// Its degrees of freedom: the query's baseline runs less one (a run's
    /// load is common to its queries, so more queries do not add to them);
    /// significance needs at least [`MIN_LOAD_DF`].
    pub load_df: usize,
    /// The baseline's total per replicate (median of run means).
    pub baseline: f64,
    /// The run's total per replicate (mean).
    pub new: f64,
    /// Change in percent of the baseline.
    pub change_pct: f64,
    /// max(min_time_change, run-to-run noise in percent).
    pub threshold_pct: f64,
    /// Two-sided p-value.
    pub p: f64,
    /// Adjusted p-value.
    pub q: f64,
    /// How p was found.
    pub method: Method,
}

/// A query the baseline runs have that a tested run has nothing of, or
/// that cannot be tested (too few replicates and baseline runs for any
/// change to be significant): not judged (the gate fails closed on it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Unjudged {
    /// The run tested (index in the series).
    pub run: usize,
    /// The query.
    pub query: String,
    /// Why, in words: its captures in the run not processed, their
    /// profiles empty, no capture of it in the run, or no test possible
    /// with its replicates (and what would make one possible).
    pub reason: String,
}

/// Everything the trend found.
#[derive(Debug, Clone, Serialize)]
pub struct Assessment {
    /// Per query: the chart series.
    pub queries: Vec<QueryTrend>,
    /// Every candidate change (beyond the threshold), tested: rises
    /// first, largest first, then falls, largest first.
    pub findings: Vec<Finding>,
    /// Every candidate change of a query's total.
    pub time_findings: Vec<TimeFinding>,
    /// The runs tested.
    pub tested_runs: Vec<usize>,
    /// Queries of the baseline runs that a run tested has nothing of, or
    /// that cannot be tested.
    pub unjudged: Vec<Unjudged>,
    /// Per query and tested run whose plan changed: the functions that
    /// appeared and vanished ([`plan`]).
    pub plan_changes: Vec<PlanChange>,
    /// Notes on the tests (weaker tests, untestable queries).
    pub notes: Vec<String>,
}

/// Assesses the series.
pub fn assess(series: &Series, opts: &Options) -> Assessment {
    let n = series.runs.len();
    let targets: Vec<usize> = match (opts.each_run, opts.baseline) {
        (false, Baseline::Earlier) => (n > 1).then(|| n - 1).into_iter().collect(),
        (false, Baseline::Run(b)) => (0..n).rev().filter(|&t| t != b).take(1).collect(),
        (true, Baseline::Earlier) => (1..n).collect(),
        (true, Baseline::Run(b)) => (0..n).filter(|&t| t != b).collect(),
    };
    let mut findings = Vec::new();
    let mut families: Vec<Vec<Tested1>> = Vec::new();
    let mut times = Vec::new();
    let mut notes = Vec::new();
    let mut unjudged = Vec::new();
    for &t in &targets {
        let base: Vec<usize> = match opts.baseline {
            Baseline::Earlier => (0..t).collect(),
            Baseline::Run(b) => vec![b],
        };
        let load = load_noise(series, &base);
        for (name, q) in &series.queries {
            let b: Vec<(usize, &Vec<Replicate>)> = base
                .iter()
                .filter_map(|&i| q.runs.get(i).filter(|r| !r.is_empty()).map(|r| (i, r)))
                .collect();
            if b.is_empty() {
                continue;
            }
            let Some(x) = q.runs.get(t).filter(|r| !r.is_empty()) else {
                unjudged.push(why_unjudged(&series.runs[t], t, name));
                continue;
            };
            let sizes: Vec<usize> = b.iter().map(|(_, r)| r.len()).collect();
            if let Some(u) = why_untestable(name, t, x.len(), &sizes, opts.alpha) {
                unjudged.push(u);
            } else if x.len() == 1 && sizes.iter().all(|&n| n == 1) {
                notes.push(note_one_replicate(name, t, b.len()));
            }
            let family = functions(name, q, t, x, &b, opts);
            if !family.is_empty() {
                families.push(family);
            }
            if let Some(f) = time(name, t, x, &b, load, opts) {
                times.push(f);
            }
        }
    }
    findings.extend(select(families, opts.alpha));
    adjust(&mut times, |f| f.p, |f, q| f.q = q);
    for f in &mut times {
        f.significant = f.q <= opts.alpha && f.baseline_runs >= 2 && f.load_df >= MIN_LOAD_DF;
    }
    notes.extend(dilution_notes(&findings, opts.alpha, opts.min_change));
    findings.sort_by(|a, b| {
        (a.change < 0.0)
            .cmp(&(b.change < 0.0))
            .then_with(|| b.change.abs().total_cmp(&a.change.abs()))
            .then_with(|| a.query.cmp(&b.query))
            .then_with(|| a.function.cmp(&b.function))
            .then_with(|| a.kind.cmp(&b.kind))
    });
    causes::fold_callers(&mut findings, series);
    let plan_changes = plan::group(&mut findings, series);
    notes.dedup();
    let queries = series
        .queries
        .iter()
        .map(|(name, q)| chart(name, q, n, opts.top, &findings))
        .collect();
    Assessment {
        queries,
        findings,
        time_findings: times,
        tested_runs: targets,
        unjudged,
        plan_changes,
        notes,
    }
}

/// Which findings are significant, across queries and tested runs
/// (Benjamini and Bogomolov's selective inference over families, one
/// family per query and tested run): Benjamini-Hochberg at `alpha` over
/// the families' Simes p-values selects the R of m families in which
/// something changed; within a selected family, Benjamini-Hochberg at
/// `alpha` x R / m picks the functions. `q` is a finding's adjusted p
/// within its family x m / R (1 outside selected families); significant
/// when at most `alpha`.
fn select(families: Vec<Vec<Tested1>>, alpha: f64) -> Vec<Finding> {
    let m = families.len();
    let simes: Vec<f64> = families
        .iter()
        .map(|f| stats::simes(&f.iter().map(|t| t.p).collect::<Vec<_>>()))
        .collect();
    let chosen: Vec<bool> = stats::benjamini_hochberg(&simes)
        .into_iter()
        .map(|q| q <= alpha)
        .collect();
    let r = chosen.iter().filter(|c| **c).count().max(1);
    let mut out = Vec::new();
    for (family, chosen) in families.into_iter().zip(chosen) {
        let ps: Vec<f64> = family.iter().map(|t| t.p).collect();
        let qs = stats::benjamini_hochberg(&ps);
        for (t, q) in family.into_iter().zip(qs) {
            let Some(mut f) = t.finding else { continue };
            f.q = if chosen {
                (q * m as f64 / r as f64).min(1.0)
            } else {
                1.0
            };
            f.significant = chosen && f.q <= alpha && f.own_time_moved;
            out.push(f);
        }
    }
    out
}

/// Benjamini-Hochberg over `items`.
fn adjust<T>(items: &mut [T], p: impl Fn(&T) -> f64, set: impl Fn(&mut T, f64)) {
    let ps: Vec<f64> = items.iter().map(&p).collect();
    for (item, q) in items.iter_mut().zip(stats::benjamini_hochberg(&ps)) {
        set(item, q);
    }
}

/// The test of `x` (the run's replicates) against the baseline runs'.
pub(super) fn test(x: &[f64], runs: &[Vec<f64>], seed: u64) -> Option<Tested> {
    if x.len() == 1 && runs.iter().all(|r| r.len() == 1) {
        let means: Vec<f64> = runs.iter().map(|r| r[0]).collect();
        return stats::between_runs(x[0], &means);
    }
    let pooled: Vec<f64> = runs.iter().flatten().copied().collect();
    stats::permutation(x, &pooled, seed)
}

/// Baseline (median of run means), noise (sigmas x sd of run means).
fn baseline_of(runs: &[Vec<f64>], sigmas: f64) -> (f64, f64) {
    let means: Vec<f64> = runs.iter().map(|r| stats::mean(r)).collect();
    let noise = if means.len() >= 2 {
        sigmas * stats::sd(&means)
    } else {
        0.0
    };
    (stats::median(&means), noise)
}

/// One tested function of a query: its family p-value and its finding
/// (when the change is beyond the threshold).
struct Tested1 {
    p: f64,
    finding: Option<Finding>,
}

/// The family of query `name` in run `t`: every function and kind whose
/// share, in at least as many replicates as the run has, exceeds
/// `min_change` (a filter on the pooled replicates, which a permutation
/// leaves unchanged, so it does not bias the test), each tested by the
/// permutation test over replicates (or the between-runs test with one
/// replicate per run). Findings are made for the changes beyond the
/// threshold; their `p` is the test's.
fn functions(
    name: &str,
    q: &QuerySeries,
    t: usize,
    x: &[Replicate],
    b: &[(usize, &Vec<Replicate>)],
    opts: &Options,
) -> Vec<Tested1> {
    let mut ids: Vec<u32> = x
        .iter()
        .chain(b.iter().flat_map(|(_, r)| r.iter()))
        .flat_map(|r| r.shares.iter().map(|s| s.0))
        .collect();
    ids.sort_unstable();
    ids.dedup();
    let total_of =
        |reps: &[Replicate]| stats::mean(&reps.iter().map(|r| r.total as f64).collect::<Vec<_>>());
    let base_total = stats::median(&b.iter().map(|(_, r)| total_of(r)).collect::<Vec<_>>());
    let mut out = Vec::new();
    for id in ids {
        for kind in [Kind::Own, Kind::Total] {
            let pick = |r: &Replicate| {
                let (s, t) = r.share(id);
                if kind == Kind::Own {
                    s
                } else {
                    t
                }
            };
            let xs: Vec<f64> = x.iter().map(pick).collect();
            let ys: Vec<Vec<f64>> = b
                .iter()
                .map(|(_, r)| r.iter().map(pick).collect())
                .collect();
            let mut pooled: Vec<f64> = xs.iter().chain(ys.iter().flatten()).copied().collect();
            pooled.sort_by(|a, b| b.total_cmp(a));
            if pooled
                .get(xs.len() - 1)
                .is_none_or(|v| *v <= opts.min_change)
            {
                continue;
            }
            let function = &q.names[id as usize];
            let seed = stats::seed_of(&format!("{name};{function};{}", kind.as_str()));
            let Some(tested) = test(&xs, &ys, seed ^ t as u64) else {
                continue;
            };
            let (baseline, noise) = baseline_of(&ys, opts.noise_sigmas);
            let new = stats::mean(&xs);
            let change = new - baseline;
            let threshold = opts.min_change.max(noise);
            let own = |r: &Replicate| pick(r) * r.total as f64 / 100.0;
            let (baseline_time, new_time) = own_times(x, b, own);
            let own_time_change = if base_total > 0.0 {
                100.0 * (new_time - baseline_time) / base_total
            } else {
                0.0
            };
            let finding = (change.abs() > threshold).then(|| Finding {
                verdict: if change > 0.0 {
                    "regressed"
                } else {
                    "improved"
                },
                significant: false,
                query: name.to_string(),
                function: function.clone(),
                kind,
                run: t,
                baseline_runs: b.iter().map(|(i, _)| *i).collect(),
                baseline,
                new,
                new_spread: Stat::of(&xs).expect("the run has replicates"),
                change,
                baseline_time,
                new_time,
                own_time_change,
                own_time_moved: own_time_change.signum() == change.signum()
                    && own_time_change.abs() > opts.min_change,
                noise,
                threshold,
                p: tested.p,
                q: 1.0,
                method: tested.method,
                cause: None,
                plan_change: None,
                callers: Vec::new(),
            });
            out.push(Tested1 {
                p: tested.p,
                finding,
            });
        }
    }
    out
}

/// A function's own time per replicate (`own` of each replicate) in the
/// baseline (the median of the baseline runs' means) and in the run (the
/// mean of its replicates).
fn own_times(
    x: &[Replicate],
    b: &[(usize, &Vec<Replicate>)],
    own: impl Fn(&Replicate) -> f64,
) -> (f64, f64) {
    let mean = |reps: &[Replicate]| stats::mean(&reps.iter().map(&own).collect::<Vec<_>>());
    let base: Vec<f64> = b.iter().map(|(_, r)| mean(r)).collect();
    (stats::median(&base), mean(x))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::stats::Rng;
    use crate::trend::load::RunInfo;

    /// A query of 12 functions sampled `samples` times per replicate, with
    /// a little run-to-run jitter of the true shares; `bump` adds points
    /// to function `f3` in the last run.
    fn series(rng: &mut Rng, runs: usize, reps: usize, samples: u32, bump: f64) -> Series {
        let base = [
            30.0, 20.0, 12.0, 8.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.5, 1.5, 1.0,
        ];
        let mut q = QuerySeries::default();
        let ids: Vec<u32> = (0..base.len())
            .map(|i| q.intern(&format!("f{i}")))
            .collect();
        for run in 0..runs {
            let mut shares: Vec<f64> = base.iter().map(|s| s * (0.95 + 0.1 * rng.unit())).collect();
            if run == runs - 1 {
                shares[3] += bump;
            }
            let sum: f64 = shares.iter().sum();
            let mut reps_out = Vec::new();
            for r in 0..reps {
                let mut counts = vec![0u32; shares.len()];
                for _ in 0..samples {
                    let mut u = rng.unit() * sum;
                    let mut i = 0;
                    while i + 1 < shares.len() && u >= shares[i] {
                        u -= shares[i];
                        i += 1;
                    }
                    counts[i] += 1;
                }
                let pct = |c: u32| (100.0 * f64::from(c) / f64::from(samples)) as f32;
                reps_out.push(Replicate {
                    name: format!("q_iter{}", r + 1),
                    number: r as u32 + 1,
                    total: u64::from(samples),
                    folded: vec![],
                    tables: vec![],
                    flamegraph: None,
                    // Leaf functions: self and total alike.
                    shares: ids
                        .iter()
                        .zip(&counts)
                        .map(|(&id, &c)| (id, pct(c), pct(c)))
                        .collect(),
                });
            }
            q.runs.push(reps_out);
        }
        let info = |i: usize| RunInfo {
            dir: format!("run{i}").into(),
            name: format!("run{i}"),
            job_ids: Default::default(),
            started: None,
            started_ns: None,
            labels: Default::default(),
            event: None,
            unprocessed: vec![],
            empty: vec![],
            on_cpu_only: 0,
            bad_lines: 0,
        };
        Series {
            runs: (0..runs).map(info).collect(),
            queries: [("q".to_string(), q)].into_iter().collect(),
        }
    }

    /// A series of two queries whose per-run totals are `q1` and `q2`
    /// (per run, three tight replicates around the figure), one function.
    fn totals(q1: &[f64], q2: &[f64]) -> Series {
        let query = |per_run: &[f64]| {
            let mut q = QuerySeries::default();
            let id = q.intern("f");
            q.runs = per_run
                .iter()
                .map(|&t| {
                    (0..3)
                        .map(|r| Replicate {
                            name: format!("q_iter{}", r + 1),
                            number: r + 1,
                            total: (t * (0.999 + 0.001 * f64::from(r))) as u64,
                            folded: vec![],
                            tables: vec![],
                            flamegraph: None,
                            shares: vec![(id, 100.0, 100.0)],
                        })
                        .collect()
                })
                .collect();
            q
        };
        let mut s = series(&mut Rng::new(1), q1.len(), 1, 1, 0.0);
        s.queries = [("q1".to_string(), query(q1)), ("q2".to_string(), query(q2))]
            .into_iter()
            .collect();
        s
    }

    #[test]
    fn load_changes_between_unchanged_runs_are_not_a_slowdown() {
        // q1's two baseline runs happen to agree (within 0.3%), but q2
        // shows how much the machine's load moves a run (+20%): the third
        // run's +30% in q1 is within that noise.
        let s = totals(&[1.0e8, 1.003e8, 1.3e8], &[5.0e7, 6.0e7, 6.4e7]);
        let a = assess(&s, &Options::default());
        assert!(
            a.time_findings.iter().all(|f| !f.significant),
            "{:#?}",
            a.time_findings
        );
    }

    #[test]
    fn two_numbers_are_no_estimate_of_the_load_noise() {
        // One query, two baseline runs that agree: one degree of freedom.
        let mut s = totals(&[1.0e8, 1.001e8, 1.5e8], &[]);
        s.queries.remove("q2");
        let a = assess(&s, &Options::default());
        let f = &a.time_findings[0];
        assert_eq!((f.verdict, f.significant, f.load_df), ("slower", false, 1));
    }

    #[test]
    fn a_slowdown_beyond_the_load_noise_is_found_in_its_query() {
        let s = totals(
            &[1.0e8, 1.05e8, 0.97e8, 1.02e8, 2.0e8],
            &[5.0e7, 5.2e7, 4.9e7, 5.1e7, 5.2e7],
        );
        let a = assess(&s, &Options::default());
        let sig: Vec<&TimeFinding> = a.time_findings.iter().filter(|f| f.significant).collect();
        assert_eq!(sig.len(), 1, "{:#?}", a.time_findings);
        assert_eq!((sig[0].query.as_str(), sig[0].verdict), ("q1", "slower"));
        assert_eq!(sig[0].load_df, 3);
    }

    #[test]
    fn a_query_the_tested_run_lacks_is_unjudged_with_its_reason() {
        let mut s = totals(&[1.0e8, 1.0e8, 1.0e8], &[5.0e7, 5.0e7, 5.0e7]);
        s.queries.get_mut("q2").unwrap().runs[2].clear();
        s.runs[2].unprocessed = vec!["worker_0/q2_iter1".into(), "worker_1/q2x".into()];
        let a = assess(&s, &Options::default());
        assert_eq!(a.unjudged.len(), 1, "{:?}", a.unjudged);
        let u = &a.unjudged[0];
        assert_eq!((u.run, u.query.as_str()), (2, "q2"));
        assert!(
            u.reason.contains("1 capture(s) not processed")
                && u.reason.contains("worker_0/q2_iter1"),
            "{}",
            u.reason
        );
        assert!(
            !u.reason.contains("q2x"),
            "another query's capture: {}",
            u.reason
        );
        // Empty profiles, and no capture at all, say so.
        s.runs[2].unprocessed.clear();
        s.runs[2].empty = vec!["worker_0/q2_iter2".into()];
        let a = assess(&s, &Options::default());
        assert!(
            a.unjudged[0].reason.contains("empty profile"),
            "{:?}",
            a.unjudged
        );
        s.runs[2].empty.clear();
        let a = assess(&s, &Options::default());
        assert!(
            a.unjudged[0].reason.contains("not in this run"),
            "{:?}",
            a.unjudged
        );
        // A query new in the tested run has no baseline: nothing to say.
        let q1 = s.queries.get_mut("q1").unwrap();
        q1.runs[0].clear();
        q1.runs[1].clear();
        let a = assess(&s, &Options::default());
        assert_eq!(a.unjudged.len(), 1, "{:?}", a.unjudged);
        assert_eq!(a.unjudged[0].query, "q2");
    }

    /// Issue 58, item 1: with one replicate against one baseline run of
    /// one, or 3 replicates against 3, no change can be significant: the
    /// query is unjudged (the gate fails closed on it), with what would
    /// make a test possible; 4 against 4 can be tested.
    #[test]
    fn a_query_no_test_can_judge_is_unjudged_with_the_fix() {
        for (reps, words) in [
            (1, "no test is possible"),
            (2, "no p-value below 0.333"),
            (3, "no p-value below 0.100"),
        ] {
            let s = series(&mut Rng::new(3), 2, reps, 400, 12.0);
            let a = assess(&s, &Options::default());
            assert_eq!(a.unjudged.len(), 1, "{reps}: {:?}", a.unjudged);
            let u = &a.unjudged[0];
            assert_eq!((u.run, u.query.as_str()), (1, "q"));
            assert!(
                u.reason.contains(words) && u.reason.contains("several times per run"),
                "{reps}: {}",
                u.reason
            );
            // Said once, as the reason, not again as a note.
            assert!(
                !a.notes.iter().any(|n| n.contains("no test")),
                "{:?}",
                a.notes
            );
        }
        let s = series(&mut Rng::new(3), 2, 4, 400, 12.0);
        let a = assess(&s, &Options::default());
        assert!(a.unjudged.is_empty(), "{:?}", a.unjudged);
        // One replicate against two baseline runs: the weaker test.
        let s = series(&mut Rng::new(3), 3, 1, 400, 12.0);
        let a = assess(&s, &Options::default());
        assert!(a.unjudged.is_empty(), "{:?}", a.unjudged);
    }

    /// Four runs of four replicates of one query: `scan` and `old` in
    /// every run; in the last, `new` takes 30% and, with `vanish`, `old`
    /// is gone.
    fn plan_series(vanish: bool) -> Series {
        let mut s = totals(&[1e8; 4], &[]);
        s.queries.remove("q2");
        let q = s.queries.get_mut("q1").unwrap();
        let ids = [q.intern("scan"), q.intern("old"), q.intern("new")];
        for (run, reps) in q.runs.iter_mut().enumerate() {
            let last = run == 3;
            reps.push(reps[0].clone());
            for (k, r) in reps.iter_mut().enumerate() {
                let j = k as f32 * 0.5;
                let old = if last && vanish { 0.0 } else { 30.0 + j };
                let new = if last { 30.0 - j } else { 0.0 };
                let scan = 100.0 - old - new;
                r.shares = [(ids[0], scan), (ids[1], old), (ids[2], new)]
                    .into_iter()
                    .filter(|(_, v)| *v > 0.0)
                    .map(|(id, v)| (id, v, v))
                    .collect();
                r.shares.sort_by_key(|x| x.0);
            }
        }
        s
    }

    /// Issue 58, item 2: what appeared and vanished is one plan change,
    /// each function once; what only appeared is new work, reported.
    #[test]
    fn functions_that_appear_and_vanish_are_one_plan_change() {
        let a = assess(&plan_series(true), &Options::default());
        assert_eq!(a.plan_changes.len(), 1, "{:#?}", a.findings);
        let p = &a.plan_changes[0];
        let names = |v: &[PlanFunction]| v.iter().map(|f| f.function.clone()).collect::<Vec<_>>();
        assert_eq!(
            (names(&p.appeared), names(&p.vanished)),
            (vec!["new".to_string()], vec!["old".to_string()])
        );
        assert!(
            a.findings
                .iter()
                .filter(|f| f.function != "scan")
                .all(|f| !f.reported()),
            "{:#?}",
            a.findings
        );
        let a = assess(&plan_series(false), &Options::default());
        assert!(a.plan_changes.is_empty(), "{:#?}", a.plan_changes);
        assert!(a
            .findings
            .iter()
            .any(|f| f.function == "new" && f.reported()));
    }

    fn flags(s: &Series) -> Vec<Finding> {
        assess(s, &Options::default())
            .findings
            .into_iter()
            .filter(|f| f.significant)
            .collect()
    }

    #[test]
    fn unchanged_synthetic_series_rarely_flag_anything() {
        let mut rng = Rng::new(5);
        let trials = 300;
        let flagged = (0..trials)
            .filter(|_| !flags(&series(&mut rng, 4, 3, 400, 0.0)).is_empty())
            .count();
        let rate = flagged as f64 / f64::from(trials);
        eprintln!("synthetic: {flagged} of {trials} unchanged series flagged something");
        assert!(rate <= 0.05, "false-positive rate {rate}");
    }

    #[test]
    fn a_rise_of_six_points_is_found_in_its_function() {
        let mut rng = Rng::new(6);
        let trials = 60;
        let found = (0..trials)
            .filter(|_| {
                flags(&series(&mut rng, 6, 3, 400, 6.0))
                    .iter()
                    .any(|f| f.function == "f3" && f.verdict == "regressed")
            })
            .count();
        eprintln!("synthetic: a 6-point rise found in {found} of {trials} series");
        assert!(found >= 54, "found in {found} of {trials}");
    }

    #[test]
    fn one_replicate_per_run_uses_the_weaker_between_runs_test() {
        let mut rng = Rng::new(7);
        let s = series(&mut rng, 8, 1, 2000, 15.0);
        let a = assess(&s, &Options::default());
        let hit = a
            .findings
            .iter()
            .find(|f| f.function == "f3" && f.kind == Kind::Own)
            .expect("f3 tested");
        assert_eq!(hit.method, Method::BetweenRuns);
        assert!(
            a.notes.iter().any(|n| n.contains("weaker")),
            "{:?}",
            a.notes
        );
    }
}
