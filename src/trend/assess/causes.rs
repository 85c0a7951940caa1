//! Naming the cause, not every caller: when one function's own time rises,
//! the total time of every function that calls it rises with it, and each
//! of those `[total]` changes is significant too. A significant `[total]`
//! finding is folded under a significant self finding of the same query
//! and run (its `cause`) when that function is the caller's own, or the
//! caller is on at least half of the cause's own samples in the run, and
//! the cause's own-time change explains at least half of the caller's
//! total-time change, the same way. The cause then lists its callers (the
//! functions on at least half of its own samples, and the callers folded
//! under it), nearest first (`called from: a <- b <- c`), and only causes
//! and the findings nothing explains are reported.

use std::collections::{BTreeMap, HashMap};

use super::{Finding, Kind};
use crate::sys::input::{self, Source};
use crate::trend::load::Series;

/// Share of a cause's own samples a caller must be on.
const ON_ITS_PATH: f64 = 0.5;
/// Part of a caller's total-time change the cause must explain.
const EXPLAINS: f64 = 0.5;

/// How one cause's own samples are called in the tested run.
#[derive(Debug, Default)]
struct Calls {
    /// Its own samples.
    own: u64,
    /// Per caller: the own samples under it and their summed distance
    /// from the leaf (the nearest occurrence, recursion counted once).
    callers: HashMap<String, (u64, u64)>,
}

/// Sets `cause` on the significant `[total]` findings that a significant
/// self finding explains, and that finding's `callers` (nearest first).
pub(super) fn fold_callers(findings: &mut [Finding], series: &Series) {
    let mut groups: BTreeMap<(String, usize), Vec<usize>> = BTreeMap::new();
    for (i, f) in findings.iter().enumerate().filter(|(_, f)| f.significant) {
        groups.entry((f.query.clone(), f.run)).or_default().push(i);
    }
    for ((query, run), idx) in groups {
        let causes: Vec<usize> = idx
            .iter()
            .copied()
            .filter(|&i| findings[i].kind == Kind::Own)
            .collect();
        if causes.is_empty() {
            continue;
        }
        let names: Vec<&str> = causes
            .iter()
            .map(|&i| findings[i].function.as_str())
            .collect();
        let calls = read_calls(series, &query, run, &names);
        let totals: Vec<usize> = idx
            .iter()
            .copied()
            .filter(|&i| findings[i].kind == Kind::Total)
            .collect();
        for i in totals {
            let best = causes
                .iter()
                .copied()
                .filter(|&c| explains(&findings[c], &findings[i], calls.get(&findings[c].function)))
                .max_by(|&a, &b| {
                    let size = |k: usize| findings[k].own_time_change.abs();
                    size(a).total_cmp(&size(b))
                });
            findings[i].cause = best.map(|c| findings[c].function.clone());
        }
        for &c in &causes {
            let name = findings[c].function.clone();
            let folded = idx
                .iter()
                .map(|&i| &findings[i])
                .filter(|f| f.cause.as_deref() == Some(name.as_str()) && f.function != name)
                .map(|f| f.function.clone());
            let on_path = calls.get(&name).into_iter().flat_map(|k| {
                k.callers
                    .iter()
                    .filter(|(_, &(w, _))| w as f64 >= ON_ITS_PATH * k.own as f64)
                    .map(|(f, _)| f.clone())
            });
            let mut callers: Vec<(f64, String)> = folded
                .chain(on_path)
                .map(|f| (distance(calls.get(&name), &f), f))
                .collect();
            callers.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
            callers.dedup_by(|a, b| a.1 == b.1);
            findings[c].callers = callers.into_iter().map(|(_, f)| f).collect();
        }
    }
}

/// True when `cause` explains the `[total]` finding `t` (the module's rule).
fn explains(cause: &Finding, t: &Finding, calls: Option<&Calls>) -> bool {
    let same_way = cause.change.signum() == t.change.signum()
        && cause.own_time_change.signum() == t.own_time_change.signum();
    let on_path = t.function == cause.function
        || calls.is_some_and(|k| {
            k.callers
                .get(&t.function)
                .is_some_and(|&(w, _)| w as f64 >= ON_ITS_PATH * k.own as f64)
        });
    same_way && on_path && cause.own_time_change.abs() >= EXPLAINS * t.own_time_change.abs()
}

/// The mean distance of `caller` from the cause's leaf (far when unknown).
fn distance(calls: Option<&Calls>, caller: &str) -> f64 {
    match calls.and_then(|k| k.callers.get(caller)) {
        Some(&(w, d)) if w > 0 => d as f64 / w as f64,
        _ => f64::MAX,
    }
}

/// How the functions `names` are called in query `query`'s replicates of
/// run `run`, read from their folded files (a file that cannot be read now
/// adds nothing: the trend has read it once already).
fn read_calls(series: &Series, query: &str, run: usize, names: &[&str]) -> HashMap<String, Calls> {
    let mut out: HashMap<String, Calls> = HashMap::new();
    let reps = series
        .queries
        .get(query)
        .and_then(|q| q.runs.get(run))
        .map(Vec::as_slice)
        .unwrap_or_default();
    for file in reps.iter().flat_map(|r| r.folded.iter()) {
        let _ = input::each_line(&Source::Path(file.clone()), |_, raw| {
            add_line(&String::from_utf8_lossy(raw), names, &mut out);
        });
    }
    out
}

/// One `stack count` line: when its leaf is one of `names`, its callers
/// (not the first frame, the thread's name) are counted.
fn add_line(line: &str, names: &[&str], out: &mut HashMap<String, Calls>) {
    let Some((stack, count)) = line.trim().rsplit_once([' ', '\t']) else {
        return;
    };
    let Ok(n) = count.parse::<u64>() else { return };
    let stack = crate::sys::printable::printable_text(stack.trim_end());
    let frames: Vec<&str> = stack.split(';').collect();
    let Some((&leaf, callers)) = frames.split_last() else {
        return;
    };
    if n == 0 || !names.contains(&leaf) {
        return;
    }
    let calls = out.entry(leaf.to_string()).or_default();
    calls.own += n;
    let mut seen: Vec<&str> = vec![leaf];
    for (d, &f) in callers.iter().skip(1).rev().enumerate() {
        if seen.contains(&f) {
            continue;
        }
        seen.push(f);
        let e = calls.callers.entry(f.to_string()).or_default();
        e.0 += n;
        e.1 += n * (d as u64 + 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn callers_of_a_leaf_are_counted_nearest_first_once_per_sample() {
        let mut out = HashMap::new();
        for l in [
            "w;main;outer;mid;leaf 3",
            "w;main;outer;leaf;mid;leaf 1",
            "w;main;other 5",
            "garbage",
        ] {
            add_line(l, &["leaf"], &mut out);
        }
        let k = &out["leaf"];
        assert_eq!(k.own, 4);
        assert_eq!(k.callers["mid"], (4, 4));
        assert_eq!(k.callers["outer"], (4, 3 * 2 + 3));
        assert!(!k.callers.contains_key("w"), "the thread is no caller");
        assert!(distance(Some(k), "mid") < distance(Some(k), "outer"));
    }
}
