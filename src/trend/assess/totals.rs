//! A query's total: its samples per replicate, judged in log terms
//! against the machine's run-to-run noise pooled over every query of the
//! baseline runs ([`load_noise`]; a run's load moves all its queries), the
//! p of each query's change from the Student's t prediction test
//! ([`time`]).

use super::{test, Options, TimeFinding};
use crate::sys::stats;
use crate::trend::load::{Replicate, Series};

/// Degrees of freedom of the run-to-run noise below which a query's total
/// is listed but never significant: the spread of two runs is no estimate
/// of a machine's load changes (two unchanged runs that happen to agree
/// would make any third one "significant").
pub const MIN_LOAD_DF: usize = 2;

/// The machine's run-to-run noise of query totals, in log terms: the
/// deviations of each query's log run mean from that query's mean over the
/// baseline runs `base`, pooled over every query. A run's load moves all
/// its queries, so every query's spread measures the same noise (pooling
/// steadies its size; it does not add degrees of freedom, which stay the
/// runs'). `None` without two baseline runs of any query.
pub(super) fn load_noise(series: &Series, base: &[usize]) -> Option<f64> {
    let (mut ss, mut df) = (0.0, 0usize);
    for q in series.queries.values() {
        let logs: Vec<f64> = base
            .iter()
            .filter_map(|&i| q.runs.get(i).filter(|r| !r.is_empty()))
            .map(|r| stats::mean(&r.iter().map(|r| r.total as f64).collect::<Vec<_>>()))
            .filter(|m| *m > 0.0)
            .map(f64::ln)
            .collect();
        if logs.len() >= 2 {
            let m = stats::mean(&logs);
            ss += logs.iter().map(|l| (l - m).powi(2)).sum::<f64>();
            df += logs.len() - 1;
        }
    }
    (df > 0).then(|| (ss / df as f64).sqrt())
}

/// The candidate change of query `name`'s total in run `t`, if any. The
/// change is judged in log terms (a halving weighs as a doubling) against
/// the machine's run-to-run noise `load` ([`load_noise`]): it must exceed
/// `min_time_change` and `noise_sigmas` of that noise, and its p is the
/// Student's t prediction test of the run's log total against the query's
/// baseline runs with the pooled noise (baseline runs - 1 degrees of
/// freedom). With one
/// baseline run, or no pooled noise, the permutation test over replicates
/// gives the p of a change that is listed but never significant.
pub(super) fn time(
    name: &str,
    t: usize,
    x: &[Replicate],
    b: &[(usize, &Vec<Replicate>)],
    load: Option<f64>,
    opts: &Options,
) -> Option<TimeFinding> {
    let xs: Vec<f64> = x.iter().map(|r| r.total as f64).collect();
    let ys: Vec<Vec<f64>> = b
        .iter()
        .map(|(_, r)| r.iter().map(|r| r.total as f64).collect())
        .collect();
    let means: Vec<f64> = ys.iter().map(|r| stats::mean(r)).collect();
    let baseline = stats::median(&means);
    let new = stats::mean(&xs);
    if baseline <= 0.0 || new <= 0.0 || means.iter().any(|m| *m <= 0.0) {
        return None;
    }
    let change_pct = 100.0 * (new - baseline) / baseline;
    let (sd, df) = match load {
        Some(sd) if means.len() >= 2 => (sd, means.len() - 1),
        _ => (0.0, 0),
    };
    let threshold = (1.0 + opts.min_time_change / 100.0)
        .ln()
        .max(opts.noise_sigmas * sd);
    if (new / baseline).ln().abs() <= threshold {
        return None;
    }
    let tested = if df > 0 {
        let logs: Vec<f64> = means.iter().map(|m| m.ln()).collect();
        stats::prediction(new.ln(), stats::mean(&logs), sd, logs.len(), df)
    } else {
        test(&xs, &ys, stats::seed_of(name) ^ t as u64)?
    };
    Some(TimeFinding {
        verdict: if change_pct > 0.0 { "slower" } else { "faster" },
        significant: false,
        query: name.to_string(),
        run: t,
        baseline_runs: b.len(),
        load_sd: (df > 0).then_some(sd),
        load_df: df,
        baseline,
        new,
        change_pct,
        threshold_pct: 100.0 * threshold.exp_m1(),
        p: tested.p,
        q: 1.0,
        method: tested.method,
    })
}
