//! A plan change, said once per query: when a query's plan changes (an
//! engine runs a hash aggregate where it ran a perfect hash aggregate),
//! its operators vanish and others appear, each with a significant self
//! and `[total]` finding. The significant findings nothing explains
//! ([`super::causes`]) of a function absent from every replicate of the
//! baseline runs (appeared) or of the tested run (vanished: below the
//! floor of [`crate::trend::load::FLOOR_PCT`] reads as absent) are grouped
//! into one [`PlanChange`] of their query and run, each function named
//! once, largest first (except a cause whose callers' findings are folded
//! under it: it keeps its line, as the hashing a new plan does, with
//! `Py_RunMain` and the executor folded under it), when some appeared and
//! some vanished (a function
//! that only appears is new work, reported on a line of its own: an
//! injected substring search is no plan change); the findings keep their
//! figures in `trend.json`, marked with their `plan_change`.

use std::collections::{BTreeMap, HashSet};

use serde::Serialize;

use super::{Finding, Kind};
use crate::trend::load::{QuerySeries, Replicate, Series};

/// A function of a plan change.
#[derive(Debug, Clone, Serialize)]
pub struct PlanFunction {
    /// Its name.
    pub function: String,
    /// Its share (percent; the larger of its self and total share's mean)
    /// in the run where it appeared, in the baseline where it vanished.
    pub share: f64,
}

/// The functions of one query and tested run that appeared or vanished.
#[derive(Debug, Clone, Serialize)]
pub struct PlanChange {
    /// The query.
    pub query: String,
    /// The run tested (index in the series).
    pub run: usize,
    /// Functions absent from every baseline replicate, largest first.
    pub appeared: Vec<PlanFunction>,
    /// Functions absent from every replicate of the run, largest first.
    pub vanished: Vec<PlanFunction>,
}

/// Marks the reported findings of functions that appeared or vanished
/// with their `plan_change`, and gathers them per query and run, where
/// some appeared and some vanished (functions that only appear are new
/// work, reported as such).
pub(super) fn group(findings: &mut [Finding], series: &Series) -> Vec<PlanChange> {
    // Causes of their callers' findings are named on lines of their own.
    let causes: HashSet<(&str, usize, &str)> = findings
        .iter()
        .filter_map(|f| {
            let c = f.cause.as_deref().filter(|c| *c != f.function)?;
            Some((f.query.as_str(), f.run, c))
        })
        .collect();
    let words: Vec<Option<&'static str>> = findings
        .iter()
        .map(|f| {
            let cause = f.kind == Kind::Own
                && causes.contains(&(f.query.as_str(), f.run, f.function.as_str()));
            if cause {
                None
            } else {
                word(f, series)
            }
        })
        .collect();
    let mut out: BTreeMap<(String, usize), PlanChange> = BTreeMap::new();
    for (f, w) in findings.iter().zip(&words) {
        let Some(w) = w else { continue };
        let p = out
            .entry((f.query.clone(), f.run))
            .or_insert_with(|| PlanChange {
                query: f.query.clone(),
                run: f.run,
                appeared: Vec::new(),
                vanished: Vec::new(),
            });
        let (list, share) = if *w == APPEARED {
            (&mut p.appeared, f.new)
        } else {
            (&mut p.vanished, f.baseline)
        };
        match list.iter_mut().find(|e| e.function == f.function) {
            Some(e) => e.share = e.share.max(share),
            None => list.push(PlanFunction {
                function: f.function.clone(),
                share,
            }),
        }
    }
    out.retain(|_, p| !p.appeared.is_empty() && !p.vanished.is_empty());
    for (f, w) in findings.iter_mut().zip(words) {
        if out.contains_key(&(f.query.clone(), f.run)) {
            f.plan_change = w;
        }
    }
    let mut out: Vec<PlanChange> = out.into_values().collect();
    for p in &mut out {
        for list in [&mut p.appeared, &mut p.vanished] {
            list.sort_by(|a, b| {
                b.share
                    .total_cmp(&a.share)
                    .then_with(|| a.function.cmp(&b.function))
            });
        }
    }
    out
}

const APPEARED: &str = "appeared";
const VANISHED: &str = "vanished";

/// `appeared` or `vanished` for a reported finding whose function no
/// baseline replicate, or no replicate of the run, has.
fn word(f: &Finding, series: &Series) -> Option<&'static str> {
    let q = series.queries.get(&f.query).filter(|_| f.reported())?;
    if absent_from(q, &f.function, &f.baseline_runs) {
        Some(APPEARED)
    } else if absent_from(q, &f.function, &[f.run]) {
        Some(VANISHED)
    } else {
        None
    }
}

/// True when no replicate of the runs `runs` of `q` has `function`.
fn absent_from(q: &QuerySeries, function: &str, runs: &[usize]) -> bool {
    let Some(id) = q.id(function) else {
        return true;
    };
    let has = |r: &Replicate| {
        let (s, t) = r.share(id);
        s > 0.0 || t > 0.0
    };
    runs.iter()
        .filter_map(|&r| q.runs.get(r))
        .flatten()
        .all(|r| !has(r))
}
