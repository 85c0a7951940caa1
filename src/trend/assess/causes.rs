//! Naming the cause, not every caller: when one function's own time rises,
//! the total time of every function that calls it rises with it, and each
//! of those `[total]` changes is significant too. Which self findings
//! explain a `[total]` finding is read from the stacks through it: a
//! function's total share is the sum, over the leaves, of the share of the
//! samples through it with that leaf; for each significant self finding of
//! the same query and run (a cause), the change of that share with the
//! cause as leaf, from the baseline (the median of the baseline runs' means
//! over replicates) to the run (the mean of its replicates), in points. The
//! finding is folded under the causes whose changes (the same way as its
//! own, largest first) add up to at least half of its change: its `cause`
//! is the largest of them. A function every sample passes through
//! (`Py_RunMain`) is folded under the cause that moved it, whatever share
//! of the cause's samples it is on. The cause
//! then lists its callers (the functions on at least half of its own
//! samples in the run, and the callers folded under it), nearest first
//! (`called from: a <- b <- c`), and only causes and the findings nothing
//! explains are reported.

use std::collections::{BTreeMap, HashMap};

use super::{Finding, Kind};
use crate::sys::input::{self, Source};
use crate::sys::{counts, stats};
use crate::trend::load::{QuerySeries, Replicate, Series};

/// Share of a cause's own samples a caller must be on to be named under it.
const ON_ITS_PATH: f64 = 0.5;
/// Part of a `[total]` finding's change its causes must explain.
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

/// What one replicate's stacks say of a group's findings.
#[derive(Debug, Default)]
struct Through {
    /// (function of a `[total]` finding, cause) -> the samples whose leaf
    /// is the cause and that pass through the function.
    pairs: HashMap<(String, String), u64>,
    /// How each cause is called (kept for the tested run only).
    calls: HashMap<String, Calls>,
}

/// The names a group's stacks are read for.
struct Wanted<'a> {
    causes: &'a [&'a str],
    totals: &'a [&'a str],
}

/// Sets `cause` on the significant `[total]` findings that significant
/// self findings explain, and the causes' `callers` (nearest first).
pub(super) fn fold_callers(findings: &mut [Finding], series: &Series) {
    let mut groups: BTreeMap<(String, usize), Vec<usize>> = BTreeMap::new();
    for (i, f) in findings.iter().enumerate().filter(|(_, f)| f.significant) {
        groups.entry((f.query.clone(), f.run)).or_default().push(i);
    }
    for ((query, run), idx) in groups {
        let of_kind = |k: Kind| -> Vec<usize> {
            idx.iter()
                .copied()
                .filter(|&i| findings[i].kind == k)
                .collect()
        };
        let (causes, totals) = (of_kind(Kind::Own), of_kind(Kind::Total));
        let Some(q) = series.queries.get(&query).filter(|_| !causes.is_empty()) else {
            continue;
        };
        let names = |v: &[usize]| -> Vec<String> {
            v.iter().map(|&i| findings[i].function.clone()).collect()
        };
        let (cause_names, total_names) = (names(&causes), names(&totals));
        let cn: Vec<&str> = cause_names.iter().map(String::as_str).collect();
        let tn: Vec<&str> = total_names.iter().map(String::as_str).collect();
        let wanted = Wanted {
            causes: &cn,
            totals: &tn,
        };
        let base_runs = findings[idx[0]].baseline_runs.clone();
        let (change, calls) = changes(q, run, &base_runs, &wanted);
        for &i in &totals {
            let t = &findings[i];
            let parts: Vec<(f64, &str)> = cn
                .iter()
                .map(|&c| {
                    let d = change.get(&(t.function.clone(), c.to_string()));
                    (d.copied().unwrap_or(0.0), c)
                })
                .collect();
            findings[i].cause = explaining(t.change, parts);
        }
        for &c in &causes {
            let name = findings[c].function.clone();
            findings[c].callers = callers_of(&name, &idx, findings, calls.get(&name));
        }
    }
}

/// The cause a `[total]` change `want` is folded under: of `parts` (each
/// cause's change through the function), those the same way as `want`,
/// largest first, until they explain [`EXPLAINS`] of it; the largest.
fn explaining(want: f64, mut parts: Vec<(f64, &str)>) -> Option<String> {
    parts.retain(|(d, _)| *d != 0.0 && d.signum() == want.signum());
    parts.sort_by(|a, b| b.0.abs().total_cmp(&a.0.abs()).then_with(|| a.1.cmp(b.1)));
    let mut sum = 0.0;
    for (d, _) in &parts {
        sum += d.abs();
        if sum >= EXPLAINS * want.abs() {
            return parts.first().map(|p| p.1.to_string());
        }
    }
    None
}

/// A cause's callers: those whose `[total]` findings are folded under it
/// and those on at least half of its own samples, nearest first.
fn callers_of(
    name: &str,
    idx: &[usize],
    findings: &[Finding],
    calls: Option<&Calls>,
) -> Vec<String> {
    let folded = idx
        .iter()
        .map(|&i| &findings[i])
        .filter(|f| f.cause.as_deref() == Some(name) && f.function != name)
        .map(|f| f.function.clone());
    let on_path = calls.into_iter().flat_map(|k| {
        k.callers
            .iter()
            .filter(|(_, &(w, _))| w as f64 >= ON_ITS_PATH * k.own as f64)
            .map(|(f, _)| f.clone())
    });
    let mut callers: Vec<(f64, String)> = folded
        .chain(on_path)
        .map(|f| (distance(calls, &f), f))
        .collect();
    callers.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
    callers.dedup_by(|a, b| a.1 == b.1);
    callers.into_iter().map(|(_, f)| f).collect()
}

/// The mean distance of `caller` from the cause's leaf (far when unknown).
fn distance(calls: Option<&Calls>, caller: &str) -> f64 {
    match calls.and_then(|k| k.callers.get(caller)) {
        Some(&(w, d)) if w > 0 => d as f64 / w as f64,
        _ => f64::MAX,
    }
}

/// Per (function, cause): the change from the baseline runs `base` to run
/// `run` of the share of the samples through the function whose leaf is
/// the cause, in points (as a finding's `change`); and how each cause is
/// called in the run.
type Changes = (HashMap<(String, String), f64>, HashMap<String, Calls>);

fn changes(q: &QuerySeries, run: usize, base: &[usize], w: &Wanted) -> Changes {
    let reps = |r: usize| q.runs.get(r).map(Vec::as_slice).unwrap_or_default();
    let read_run = |r: usize, with_calls: bool| -> Vec<(Through, f64)> {
        reps(r)
            .iter()
            .map(|rep| (read(rep, w, with_calls), rep.total as f64))
            .collect()
    };
    let tested = read_run(run, true);
    let baseline: Vec<Vec<(Through, f64)>> = base.iter().map(|&b| read_run(b, false)).collect();
    let mut keys: Vec<&(String, String)> = tested
        .iter()
        .chain(baseline.iter().flatten())
        .flat_map(|(t, _)| t.pairs.keys())
        .collect();
    keys.sort_unstable();
    keys.dedup();
    // The mean share over a run's replicates.
    let mean = |v: &[(Through, f64)], k: &(String, String)| {
        let xs: Vec<f64> = v
            .iter()
            .map(|(t, total)| {
                let n = t.pairs.get(k).copied().unwrap_or(0) as f64;
                if *total > 0.0 {
                    100.0 * n / total
                } else {
                    0.0
                }
            })
            .collect();
        stats::mean(&xs)
    };
    let mut out = HashMap::new();
    for k in keys {
        let before = stats::median(&baseline.iter().map(|v| mean(v, k)).collect::<Vec<_>>());
        out.insert(k.clone(), mean(&tested, k) - before);
    }
    let mut calls: HashMap<String, Calls> = HashMap::new();
    for (t, _) in tested {
        for (name, c) in t.calls {
            let e = calls.entry(name).or_default();
            e.own = counts::add(e.own, c.own);
            for (f, (n, d)) in c.callers {
                let x = e.callers.entry(f).or_default();
                x.0 = counts::add(x.0, n);
                x.1 = counts::add(x.1, d);
            }
        }
    }
    (out, calls)
}

/// One replicate's folded files (its workers), read for `w` (a file that
/// cannot be read now adds nothing: the trend has read it once already).
fn read(rep: &Replicate, w: &Wanted, with_calls: bool) -> Through {
    let mut out = Through::default();
    for file in &rep.folded {
        let _ = input::each_line(&Source::Path(file.clone()), |_, raw| {
            add_line(&String::from_utf8_lossy(raw), w, with_calls, &mut out);
        });
    }
    out
}

/// One `stack count` line: when its leaf is a cause, the functions of
/// `w.totals` on it (the leaf included, each once) and, `with_calls`, its
/// callers (not the first frame, the thread's name) are counted.
fn add_line(line: &str, w: &Wanted, with_calls: bool, out: &mut Through) {
    let Some((stack, count)) = line.trim().rsplit_once([' ', '\t']) else {
        return;
    };
    let Ok(n) = count.parse::<u64>() else { return };
    let stack = crate::sys::printable::printable_text(stack.trim_end());
    let frames: Vec<&str> = stack.split(';').collect();
    let Some((&leaf, callers)) = frames.split_last() else {
        return;
    };
    if n == 0 || !w.causes.contains(&leaf) {
        return;
    }
    let above: Vec<&str> = callers.iter().skip(1).rev().copied().collect();
    let mut seen: Vec<&str> = Vec::new();
    for f in std::iter::once(leaf).chain(above.iter().copied()) {
        if w.totals.contains(&f) && !seen.contains(&f) {
            let pair = out
                .pairs
                .entry((f.to_string(), leaf.to_string()))
                .or_default();
            *pair = counts::add(*pair, n);
        }
        seen.push(f);
    }
    if !with_calls {
        return;
    }
    let calls = out.calls.entry(leaf.to_string()).or_default();
    calls.own = counts::add(calls.own, n);
    let mut seen: Vec<&str> = vec![leaf];
    for (d, &f) in above.iter().enumerate() {
        if seen.contains(&f) {
            continue;
        }
        seen.push(f);
        let e = calls.callers.entry(f.to_string()).or_default();
        // Counts come from files: summed without overflow, as the tally's.
        e.0 = counts::add(e.0, n);
        e.1 = counts::add(e.1, n.saturating_mul(d as u64 + 1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn callers_of_a_leaf_are_counted_nearest_first_once_per_sample() {
        let mut out = Through::default();
        let w = Wanted {
            causes: &["leaf"],
            totals: &["leaf", "outer", "w", "other"],
        };
        for l in [
            "w;main;outer;mid;leaf 3",
            "w;main;outer;leaf;mid;leaf 1",
            "w;main;other 5",
            "garbage",
        ] {
            add_line(l, &w, true, &mut out);
        }
        let k = &out.calls["leaf"];
        assert_eq!(k.own, 4);
        assert_eq!(k.callers["mid"], (4, 4));
        assert_eq!(k.callers["outer"], (4, 3 * 2 + 3));
        assert!(!k.callers.contains_key("w"), "the thread is no caller");
        assert!(distance(Some(k), "mid") < distance(Some(k), "outer"));
        // Through: each sample once per function, the leaf's own total
        // included; the thread's name and other leaves are not counted.
        let p = |f: &str| out.pairs.get(&(f.to_string(), "leaf".to_string())).copied();
        assert_eq!(
            (p("leaf"), p("outer"), p("w"), p("other")),
            (Some(4), Some(4), None, None)
        );
    }

    #[test]
    fn a_total_is_folded_under_the_causes_that_explain_half_its_change() {
        // Py_RunMain's total rose 10 points: the hashing's stacks through
        // it rose 8, another cause's 1, a third fell 3.
        let parts = vec![(1.0, "b"), (8.0, "hash"), (-3.0, "c")];
        assert_eq!(explaining(10.0, parts.clone()).as_deref(), Some("hash"));
        // Two causes together explain half; the larger is named.
        let parts2 = vec![(3.0, "a"), (2.5, "b")];
        assert_eq!(explaining(10.0, parts2).as_deref(), Some("a"));
        // Under half explained: not folded.
        assert_eq!(explaining(30.0, parts), None);
        // A fall is explained by falls only.
        assert_eq!(
            explaining(-4.0, vec![(8.0, "a"), (-2.0, "c")]).as_deref(),
            Some("c")
        );
    }
}
