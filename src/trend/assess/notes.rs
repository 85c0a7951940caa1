//! The assessment's words beside its figures: why a tested run has
//! nothing of a query ([`why_unjudged`]), what one replicate per run does to
//! the test, and which shares moved only by dilution.

use super::{Finding, Unjudged};
use crate::capture::replicate;
use crate::trend::load::RunInfo;

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

pub(super) fn note_one_replicate(q: &str, t: usize, baseline_runs: usize) -> String {
    if baseline_runs < 2 {
        format!(
            "{q}, run {}: one replicate per run and one baseline run: no test is possible \
             (run the query several times per run, or give more runs)",
            t + 1
        )
    } else {
        format!(
            "{q}, run {}: one replicate per run: the test compares the run with the spread \
             between the {baseline_runs} baseline runs (weaker than a test over replicates)",
            t + 1
        )
    }
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
