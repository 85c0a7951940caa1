//! Run versus run: the same queries of two result directories (or two
//! capture directories) compared. A query is a base query
//! ([`crate::capture::replicate`]: `q01_iter1..3` are three replicates of
//! `q01`), and its stacks are the sum of its replicates' and workers'
//! `stacks.folded` ([`load_run`]); when the two runs hold different numbers
//! of replicates of a query, BEFORE's counts are scaled by AFTER's count
//! over BEFORE's ([`replicate_scale`]), so both sides stand for as many
//! replicates. [`diff_runs`] draws one differential flamegraph per query
//! present in both runs and an index page of them sorted by the largest
//! change (the total's change, or with `normalize` the share of samples that
//! moved between stacks, since the totals are then equal by construction).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use rustc_hash::FxHashMap;
use serde::Serialize;

use super::page::{self, Cell, Col, Section, Table};
use super::{INDEX_HTML, INDEX_JSON};
use crate::capture::FOLDED;
use crate::capture::{self, replicate, Filter};
use crate::error::{Error, Result};
use crate::output::render::diff::{render_diff, render_diff_replicates, DiffSummary, Noise};
use crate::output::render::folded::read_folded;
use crate::output::render::html::group_digits;
use crate::output::render::{Format, RenderOptions};
use crate::sys::atomic::{write_atomic, AtomicFile};
use crate::sys::input::Source;

/// One base query of one run, its replicates and workers merged.
#[derive(Debug, Clone, Default)]
pub struct QueryStacks {
    /// Captures merged (`worker_N/Q`).
    pub merged: Vec<String>,
    /// The replicates' query names merged (`q01_iter1`, ...).
    pub replicates: BTreeSet<String>,
    /// Captures of the query without `stacks.folded` (not processed).
    pub missing: Vec<String>,
    /// The merged stacks.
    pub stacks: Vec<(String, u64)>,
    /// Each merged capture's replicate (query name) and its lines in
    /// `stacks`.
    pub parts: Vec<(String, std::ops::Range<usize>)>,
    /// Lines of the folded files that were not `stack count`.
    pub bad_lines: u64,
}

/// The queries of one run.
#[derive(Debug, Clone)]
pub struct Run {
    /// What was given.
    pub root: PathBuf,
    /// Base query -> its stacks.
    pub queries: BTreeMap<String, QueryStacks>,
    /// The event sampled, from the first merged capture's summary.json.
    pub event: Option<String>,
}

/// What the counts of two runs are, from their event: `ns` for the
/// software clocks (folded counts are sample periods), the event's name
/// otherwise; `None` when the summaries do not say or the runs differ.
pub fn count_name(before: &Run, after: &Run) -> Option<String> {
    let (b, a) = (before.event.as_deref()?, after.event.as_deref()?);
    let (b, a) = (
        crate::text::perf_script::period_unit(b),
        crate::text::perf_script::period_unit(a),
    );
    (b == a).then(|| b.to_string())
}

/// Finds the captures under `root` (a result directory, its
/// `profiles/perf`, a `worker_N` directory or one capture directory),
/// narrowed to `query` (a base query, or one replicate's name), and merges
/// each base query's replicates and workers.
pub fn load_run(root: &Path, query: Option<&str>) -> Result<Run> {
    load_run_of(root, query, FOLDED)
}

/// [`load_run`] for the profile in each capture's `folded` file
/// (`stacks.folded`, or `offcpu.folded`/`wallclock.folded` of captures
/// recorded with `--off-cpu`).
pub fn load_run_of(root: &Path, query: Option<&str>, folded: &str) -> Result<Run> {
    let found = capture::discover(&[root.to_path_buf()], &Filter::default())?;
    let base = |c: &capture::CaptureDir| replicate::split(&c.query).0.to_string();
    let wanted = |c: &capture::CaptureDir| query.is_none_or(|q| c.query == q || base(c) == q);
    if let Some(q) = query {
        if !found.iter().any(wanted) {
            let all: BTreeSet<String> = found.iter().map(base).collect();
            return Err(Error::Usage(format!(
                "{}: no capture of query `{q}`; its queries are: {}",
                root.display(),
                names(all.iter())
            )));
        }
    }
    let mut queries: BTreeMap<String, QueryStacks> = BTreeMap::new();
    let mut event = None;
    for c in found.iter().filter(|c| wanted(c)) {
        let entry = queries.entry(base(c)).or_default();
        let folded = c.out_dir().join(folded);
        if !folded.is_file() {
            entry.missing.push(c.label());
            continue;
        }
        if event.is_none() {
            event = fs::read_to_string(c.out_dir().join(crate::capture::SUMMARY))
                .ok()
                .and_then(|t| super::summary::SummaryFields::parse(&t))
                .and_then(|s| s.event);
        }
        let input = read_folded(&[Source::Path(folded)])?;
        entry.bad_lines += input.bad_lines;
        let start = entry.stacks.len();
        entry.stacks.extend(input.stacks);
        entry
            .parts
            .push((c.query.clone(), start..entry.stacks.len()));
        entry.merged.push(c.label());
        entry.replicates.insert(c.query.clone());
    }
    Ok(Run {
        root: root.to_path_buf(),
        queries,
        event,
    })
}

impl QueryStacks {
    /// The stacks of each replicate (its workers together), in the order of
    /// the replicates' names.
    pub fn by_replicate(&self) -> Vec<Vec<(&str, u64)>> {
        let mut reps: BTreeMap<&str, Vec<(&str, u64)>> = BTreeMap::new();
        for (name, range) in &self.parts {
            reps.entry(name).or_default().extend(
                self.stacks[range.clone()]
                    .iter()
                    .map(|(s, c)| (s.as_str(), *c)),
            );
        }
        reps.into_values().collect()
    }
}

/// Draws query `b` -> `a`: with `noise` and at least two replicates on
/// each side, only the frames that changed beyond the replicates' noise
/// are coloured ([`render_diff_replicates`]); otherwise every change is
/// (BEFORE's counts scaled to AFTER's number of replicates unless
/// `normalize`).
pub fn render_query<W: std::io::Write>(
    b: &QueryStacks,
    a: &QueryStacks,
    normalize: bool,
    noise: Option<&Noise>,
    format: Format,
    opts: &RenderOptions,
    w: W,
) -> crate::output::render::Result<DiffSummary> {
    let replicated = b.replicates.len() >= 2 && a.replicates.len() >= 2;
    if let (Some(noise), true) = (noise, replicated) {
        let (rb, ra) = (b.by_replicate(), a.by_replicate());
        return render_diff_replicates(&rb, &ra, normalize, noise, format, opts, w);
    }
    let bs = if normalize {
        std::borrow::Cow::Borrowed(&b.stacks[..])
    } else {
        balanced_before(b, a)
    };
    render_diff(&bs, &a.stacks, normalize, format, opts, w)
}

/// The factor BEFORE's counts are multiplied by so that both sides stand
/// for as many replicates: AFTER's replicate count over BEFORE's (1 when
/// they are equal, or a side has none).
pub fn replicate_scale(before: &QueryStacks, after: &QueryStacks) -> f64 {
    let (b, a) = (before.replicates.len(), after.replicates.len());
    if b == 0 || a == 0 || a == b {
        1.0
    } else {
        a as f64 / b as f64
    }
}

/// BEFORE's stacks at AFTER's replicate count ([`replicate_scale`]; each
/// count rounded), the stacks themselves when the counts are equal.
pub fn balanced_before<'a>(
    before: &'a QueryStacks,
    after: &QueryStacks,
) -> std::borrow::Cow<'a, [(String, u64)]> {
    let k = replicate_scale(before, after);
    if k == 1.0 {
        return std::borrow::Cow::Borrowed(&before.stacks);
    }
    let scaled = before
        .stacks
        .iter()
        .map(|(s, c)| (s.clone(), (*c as f64 * k).round() as u64))
        .collect();
    std::borrow::Cow::Owned(scaled)
}

/// True when `root` is one capture directory (not a result, perf root or
/// worker directory): two of those are compared directly, whatever their
/// queries are called.
pub fn is_capture_dir(root: &Path) -> bool {
    matches!(
        capture::discover(&[root.to_path_buf()], &Filter::default()).as_deref(),
        Ok([c]) if c.dir == root
    )
}

/// The one query of `run` (a capture directory's run).
pub fn only_query(run: &Run) -> Option<(&String, &QueryStacks)> {
    match run.queries.len() {
        1 => run.queries.iter().next(),
        _ => None,
    }
}

/// The stacks of query `q` of `run`, or a usage error saying why there are
/// none (`side` names the run: BEFORE or AFTER).
pub fn stacks_of<'a>(run: &'a Run, q: &str, side: &str) -> Result<&'a QueryStacks> {
    match run.queries.get(q) {
        Some(s) if !s.stacks.is_empty() => Ok(s),
        Some(s) => Err(Error::Usage(format!(
            "{side} {}: query `{q}` has no processed capture (no {FOLDED} in {}); \
             run `jobprof process` on it first",
            run.root.display(),
            s.missing.join(", ")
        ))),
        None => Err(Error::Usage(format!(
            "{side} {}: no capture of query `{q}`",
            run.root.display()
        ))),
    }
}

/// How one query changed.
#[derive(Debug, Clone, Serialize)]
pub struct QueryDiff {
    /// The query.
    pub query: String,
    /// BEFORE's total (as read).
    pub before_total: u64,
    /// AFTER's total.
    pub after_total: u64,
    /// Factor BEFORE was scaled by: AFTER's total over BEFORE's when
    /// normalized, else AFTER's replicate count over BEFORE's (1 when equal).
    pub scale: f64,
    /// AFTER's total minus BEFORE's (scaled).
    pub change: f64,
    /// Share of AFTER's total that moved between stacks: half the sum over
    /// stacks of |after - before| over AFTER's total.
    pub moved: f64,
    /// The leaf function whose self count changed most, and by how much.
    pub top_function: Option<(String, f64)>,
    /// Captures merged on each side.
    pub before_captures: usize,
    /// Captures merged on AFTER's side.
    pub after_captures: usize,
    /// Replicates merged on BEFORE's side.
    pub before_replicates: usize,
    /// Replicates merged on AFTER's side.
    pub after_replicates: usize,
    /// The differential flamegraph, relative to the output directory.
    pub file: Option<String>,
}

impl QueryDiff {
    /// The number the index sorts by.
    pub fn magnitude(&self, normalize: bool) -> f64 {
        if normalize {
            self.moved
        } else {
            self.change.abs()
        }
    }
}

/// Compares one query's stacks.
pub fn compare(
    query: &str,
    before: &QueryStacks,
    after: &QueryStacks,
    normalize: bool,
) -> QueryDiff {
    let bt: u64 = before.stacks.iter().map(|(_, c)| c).sum();
    let at: u64 = after.stacks.iter().map(|(_, c)| c).sum();
    let scale = if normalize && bt > 0 {
        at as f64 / bt as f64
    } else {
        replicate_scale(before, after)
    };
    let mut stacks: FxHashMap<&str, f64> = FxHashMap::default();
    let mut leaves: FxHashMap<&str, f64> = FxHashMap::default();
    for (sign, side, k) in [(-1.0, before, scale), (1.0, after, 1.0)] {
        for (s, c) in &side.stacks {
            let d = sign * k * *c as f64;
            *stacks.entry(s.as_str()).or_default() += d;
            let leaf = s.rsplit(';').next().unwrap_or(s);
            *leaves.entry(leaf).or_default() += d;
        }
    }
    let moved = stacks.values().map(|d| d.abs()).sum::<f64>() / 2.0 / (at.max(1) as f64);
    let top_function = leaves
        .into_iter()
        .filter(|(_, d)| d.abs() >= 0.5)
        .max_by(|a, b| a.1.abs().total_cmp(&b.1.abs()).then(b.0.cmp(a.0)))
        .map(|(n, d)| (n.to_string(), d));
    QueryDiff {
        query: query.to_string(),
        before_total: bt,
        after_total: at,
        scale,
        change: at as f64 - bt as f64 * scale,
        moved,
        top_function,
        before_captures: before.merged.len(),
        after_captures: after.merged.len(),
        before_replicates: before.replicates.len(),
        after_replicates: after.replicates.len(),
        file: None,
    }
}

/// The diff of two runs, query by query.
#[derive(Debug, Clone, Serialize)]
pub struct RunDiff {
    /// BEFORE as given.
    pub before: PathBuf,
    /// AFTER as given.
    pub after: PathBuf,
    /// Whether BEFORE was scaled to AFTER's total.
    pub normalize: bool,
    /// What the counts are (`ns`, `samples`, ...).
    pub count_name: String,
    /// Queries in both, largest change first.
    pub queries: Vec<QueryDiff>,
    /// Queries only BEFORE has.
    pub only_before: Vec<String>,
    /// Queries only AFTER has.
    pub only_after: Vec<String>,
}

/// Draws one differential flamegraph per query in both runs into
/// `out_dir/<Q>.diff.<ext>` and the index (`index.html`, `index.json`),
/// each file atomically. Queries without stacks on either side are listed
/// but not drawn. With `noise`, queries with replicates on both sides are
/// drawn by [`render_query`]'s rule (only changes beyond the noise).
pub fn diff_runs(
    before: &Run,
    after: &Run,
    normalize: bool,
    noise: Option<&Noise>,
    format: Format,
    opts: &RenderOptions,
    out_dir: &Path,
) -> Result<RunDiff> {
    let common: Vec<&String> = before
        .queries
        .keys()
        .filter(|q| after.queries.contains_key(*q))
        .collect();
    if common.is_empty() {
        return Err(Error::Usage(format!(
            "{} and {} have no query in common (BEFORE: {}; AFTER: {})",
            before.root.display(),
            after.root.display(),
            names(before.queries.keys()),
            names(after.queries.keys())
        )));
    }
    fs::create_dir_all(out_dir).map_err(|e| Error::io(out_dir, e))?;
    let mut diffs = Vec::with_capacity(common.len());
    for q in common {
        let (b, a) = (&before.queries[q], &after.queries[q]);
        let mut d = compare(q, b, a, normalize);
        if !b.stacks.is_empty() && !a.stacks.is_empty() {
            let name = format!("{q}.diff.{}", format.extension());
            let mut look = opts.clone();
            look.title = format!("{} · query {q}", opts.title);
            let mut f = AtomicFile::create(out_dir.join(&name))?;
            render_query(b, a, normalize, noise, format, &look, &mut f)?;
            f.commit()?;
            d.file = Some(name);
        }
        diffs.push(d);
    }
    diffs.sort_by(|x, y| {
        y.magnitude(normalize)
            .total_cmp(&x.magnitude(normalize))
            .then(x.query.cmp(&y.query))
    });
    let only = |x: &Run, y: &Run| -> Vec<String> {
        x.queries
            .keys()
            .filter(|q| !y.queries.contains_key(*q))
            .cloned()
            .collect()
    };
    let diff = RunDiff {
        before: before.root.clone(),
        after: after.root.clone(),
        normalize,
        count_name: opts.count_name.clone(),
        queries: diffs,
        only_before: only(before, after),
        only_after: only(after, before),
    };
    let mut json = serde_json::to_string_pretty(&diff).expect("the diff index serializes");
    json.push('\n');
    write_atomic(out_dir.join(INDEX_JSON), json.as_bytes())?;
    write_atomic(out_dir.join(INDEX_HTML), index_html(&diff).as_bytes())?;
    Ok(diff)
}

fn names<'a>(it: impl Iterator<Item = &'a String>) -> String {
    let v: Vec<&str> = it.map(String::as_str).collect();
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ")
    }
}

fn signed(x: f64) -> String {
    let r = x.round();
    if r > 0.0 {
        format!("+{}", group_digits(r as u64))
    } else if r < 0.0 {
        format!("-{}", group_digits((-r) as u64))
    } else {
        "0".into()
    }
}

/// One query's row of the run-versus-run index: its row class (`q-up`,
/// `q-down`, `q-`) and cells.
fn query_row(q: &QueryDiff) -> (String, Vec<Cell>) {
    let base = q.before_total as f64 * q.scale;
    let rel = (base > 0.0).then(|| 100.0 * q.change / base);
    let dir = if q.change >= 0.5 {
        "up"
    } else if q.change <= -0.5 {
        "down"
    } else {
        ""
    };
    let top = q
        .top_function
        .as_ref()
        .map_or(Cell::text("-"), |(n, v)| Cell {
            html: format!(
                "{} <span class=\"{}\">{}</span>",
                crate::output::render::html::esc(n),
                if *v > 0.0 { "up" } else { "down" },
                signed(*v)
            ),
            v: Some(n.clone()),
            class: "fns",
        });
    let mut change = Cell::num(signed(q.change), Some(q.change));
    change.class = if dir == "up" {
        "num up"
    } else if dir == "down" {
        "num down"
    } else {
        "num"
    };
    let cells = vec![
        Cell::text(&q.query),
        Cell::num(group_digits(q.before_total), Some(q.before_total as f64)),
        Cell::num(group_digits(q.after_total), Some(q.after_total as f64)),
        change,
        Cell::num(rel.map_or("-".into(), |r| format!("{r:+.1}%")), rel),
        Cell::num(page::pct(Some(q.moved)), Some(q.moved)),
        top,
        Cell::num(
            format!("{} / {}", q.before_replicates, q.after_replicates),
            Some(q.after_replicates as f64),
        ),
        Cell::num(
            format!("{} / {}", q.before_captures, q.after_captures),
            Some(q.after_captures as f64),
        ),
        Cell::link("differential flamegraph", q.file.as_deref()),
    ];
    (format!("q-{dir}"), cells)
}

fn index_html(d: &RunDiff) -> String {
    let col = |key, label, num| Col { key, label, num };
    let section = Section {
        heading: "Queries, largest change first".into(),
        note: Some(index_note(d)),
        table: Table {
            id: "jp-diff",
            cols: vec![
                col("query", "Query", false),
                col("before", "Before", true),
                col("after", "After", true),
                col("change", "Change", true),
                col("relative", "Change %", true),
                col("moved", "Moved", true),
                col("function", "Largest function change", false),
                col("replicates", "Replicates (before / after)", true),
                col("captures", "Captures (before / after)", true),
                col("flamegraph", "Flamegraph", false),
            ],
            rows: d.queries.iter().map(query_row).collect(),
        },
    };
    page::page("Run versus run", &index_facts(d), &[section])
}

/// The line above the table: the order, the colours, the unpaired queries.
fn index_note(d: &RunDiff) -> String {
    let sort = if d.normalize {
        "the share of samples that moved between stacks (BEFORE scaled to AFTER's total)"
    } else {
        "the size of the change of the query's total"
    };
    let mut note = format!(
        "Largest change first, by {sort}. Red: grew since BEFORE; blue: shrank. \
         Each query's replicates (q01_iter1, q01_iter2, ... of q01) and workers are summed."
    );
    if !d.normalize
        && d.queries
            .iter()
            .any(|q| q.before_replicates != q.after_replicates)
    {
        note.push_str(
            " Where the runs hold different numbers of replicates, BEFORE is scaled by \
             AFTER's replicate count over its own (the change is per as many replicates).",
        );
    }
    if !d.only_before.is_empty() {
        note.push_str(&format!(" Only in BEFORE: {}.", d.only_before.join(", ")));
    }
    if !d.only_after.is_empty() {
        note.push_str(&format!(" Only in AFTER: {}.", d.only_after.join(", ")));
    }
    note
}

/// The page's header facts: the two runs, the queries, the unit, when.
fn index_facts(d: &RunDiff) -> Vec<(String, String)> {
    vec![
        ("Before".to_string(), d.before.display().to_string()),
        ("After".to_string(), d.after.display().to_string()),
        (
            "Queries".to_string(),
            format!("{} in both", d.queries.len()),
        ),
        ("Counts".to_string(), d.count_name.clone()),
        (
            "Written".to_string(),
            format!(
                "{} by jobprof {}",
                crate::sys::units::utc_timestamp(),
                env!("CARGO_PKG_VERSION")
            ),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn qs(stacks: &[(&str, u64)]) -> QueryStacks {
        QueryStacks {
            merged: vec!["worker_0/q".into()],
            stacks: stacks.iter().map(|(s, c)| (s.to_string(), *c)).collect(),
            ..QueryStacks::default()
        }
    }

    #[test]
    fn change_moved_and_top_function() {
        let b = qs(&[("app;main;a", 10), ("app;main;b", 10)]);
        let a = qs(&[("app;main;a", 10), ("app;main;b", 30)]);
        let d = compare("q", &b, &a, false);
        assert_eq!(d.change, 20.0);
        assert_eq!(d.top_function, Some(("b".to_string(), 20.0)));
        assert!((d.moved - 10.0 / 40.0).abs() < 1e-9);
        let n = compare("q", &b, &a, true);
        assert!(n.change.abs() < 1e-9);
        // scaled BEFORE: a 20, b 20; AFTER a 10, b 30: 10 moved of 40.
        assert!((n.moved - 0.25).abs() < 1e-9);
    }
}
