//! The assessment's words beside its figures: why a tested run has
//! nothing of a query ([`why_unjudged`]), what one replicate per run does to
//! the test, and which shares moved only by dilution.

use super::{Finding, Unjudged};
use crate::capture::replicate;
use crate::trend::load::RunInfo;
use crate::trend::stats;

/// Why run `t` (`info`) has nothing of query `query`: which of its
/// captures were not processed or held no sample.
pub(super) fn why_unjudged(info: &RunInfo, t: usize, query: &str) -> Unjudged {
    let of = |labels: &[String]| -> Vec<String> {
        labels
            .iter()
            .filter(|l| replicate::split(l.rsplit('/').next().unwrap_or(l)).0 == query)
            .cloned()
            .collect()
    };
    let list = |v: &[String]| {
        let more = v.len().saturating_sub(3);
        let mut s = v.iter().take(3).cloned().collect::<Vec<_>>().join(", ");
        if more > 0 {
            s.push_str(&format!(" and {more} more"));
        }
        s
    };
    let (unprocessed, empty) = (of(&info.unprocessed), of(&info.empty));
    let mut why = Vec::new();
    if !unprocessed.is_empty() {
        why.push(format!(
            "{} capture(s) not processed (run `jobprof process`): {}",
            unprocessed.len(),
            list(&unprocessed)
        ));
    }
    if !empty.is_empty() {
        why.push(format!(
            "{} capture(s) with an empty profile (no sample): {}",
            empty.len(),
            list(&empty)
        ));
    }
    Unjudged {
        run: t,
        query: query.to_string(),
        reason: if why.is_empty() {
            "not in this run (no capture of it)".into()
        } else {
            why.join("; ")
        },
    }
}

/// Why query `q` of run `t` cannot be tested, when no change of it could
/// be significant at `alpha` whatever it is: one replicate in the run and
/// in the one baseline run (no test at all), or too few replicates for the
/// permutation test to give a p-value of at most `alpha`. `run` is the
/// run's replicate count, `baseline` each baseline run's. The gate fails
/// closed on it, as on a query with nothing to judge.
pub(super) fn why_untestable(
    q: &str,
    t: usize,
    run: usize,
    baseline: &[usize],
    alpha: f64,
) -> Option<Unjudged> {
    let base = q.split(" [").next().unwrap_or(q);
    let fix = format!(
        "record the query several times per run (replicates: captures named {base}_iter1, \
         {base}_iter2, ...; 4 per run against 4 give p down to 0.029), or give more baseline \
         runs"
    );
    let reason = if run == 1 && baseline.iter().all(|&n| n == 1) {
        if baseline.len() >= 2 {
            return None;
        }
        format!(
            "one replicate in the run and one baseline run of one replicate: no test is \
             possible, so no change can be found: {fix}"
        )
    } else {
        let n: usize = baseline.iter().sum();
        let smallest = stats::smallest_permutation_p(run, n);
        if smallest <= alpha {
            return None;
        }
        format!(
            "{run} replicate(s) in the run against {n} in the baseline: the permutation \
             test over them gives no p-value below {}, above --alpha {alpha}, so no change \
             can be found: {fix}",
            crate::trend::fmt_p(smallest)
        )
    };
    Some(Unjudged {
        run: t,
        query: q.to_string(),
        reason,
    })
}

/// What one replicate per run does to the test, with `baseline_runs` of
/// at least 2 (with one, [`why_untestable`] says it).
pub(super) fn note_one_replicate(q: &str, t: usize, baseline_runs: usize) -> String {
    format!(
        "{q}, run {}: one replicate per run: the test compares the run with the spread \
         between the {baseline_runs} baseline runs (weaker than a test over replicates)",
        t + 1
    )
}

/// One note per query and run tested whose shares moved significantly only
/// because other functions' time did: those functions are not flagged.
pub(super) fn dilution_notes(findings: &[Finding], alpha: f64, min_change: f64) -> Vec<String> {
    let mut by: std::collections::BTreeMap<(&str, usize), Vec<&str>> = Default::default();
    for f in findings
        .iter()
        .filter(|f| f.q <= alpha && !f.own_time_moved)
    {
        let names = by.entry((&f.query, f.run)).or_default();
        if !names.contains(&f.function.as_str()) {
            names.push(&f.function);
        }
    }
    by.into_iter()
        .map(|((q, run), names)| {
            let shown: Vec<&str> = names.iter().take(5).copied().collect();
            let more = names.len() - shown.len();
            format!(
                "{q}, run {}: the share of {} function(s) moved only because other \
                 functions' time did (their own time per replicate did not move the same \
                 way by more than {min_change} points of the query's total), not flagged: {}{}",
                run + 1,
                names.len(),
                shown.join(", "),
                if more > 0 {
                    format!(" and {more} more")
                } else {
                    String::new()
                }
            )
        })
        .collect()
}
