//! Reading a series of runs: each run is a processed result directory;
//! its captures are found by the one walker ([`crate::capture::discover`]),
//! grouped by query and replicate ([`crate::capture::replicate::split`]), and each
//! replicate's workers are merged as the job views merge them (their
//! `stacks.folded`, or the off-CPU and wall-clock files, added up). Every
//! folded file is read once; what is kept is each function's self and
//! total share of the replicate's samples (the first frame of a stack, the
//! thread's name, is not a function: it counts only as the leaf of a
//! sample without frames; functions under
//! [`FLOOR_PCT`] of a replicate are dropped: they read as 0), so memory
//! grows with runs x queries x replicates x the functions that matter, not
//! with the stacks.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use jobprof_capture_format::Capture;
use rayon::prelude::*;
use rustc_hash::FxHashMap;
use serde::Serialize;

use super::nsys_runs;
use super::tally::Tally;
use crate::capture::replicate;
use crate::capture::{self, CaptureDir, Filter};
use crate::error::{Error, Result};
use crate::views::summary::SummaryFields;

/// Functions below this share (percent) of a replicate are not kept.
pub const FLOOR_PCT: f32 = 0.05;
/// The labels file a result directory may hold.
pub const RUN_LABELS: &str = "run-labels.json";
/// Largest `run-labels.json` read.
const MAX_LABELS_BYTES: u64 = 64 << 10;
/// Longest label key or value kept.
const MAX_LABEL_CHARS: usize = 200;

/// One run of the series.
#[derive(Debug, Clone, Serialize)]
pub struct RunInfo {
    /// The directory as given.
    pub dir: PathBuf,
    /// Its name (the result directory's).
    pub name: String,
    /// Slurm job ids of its captures.
    pub job_ids: BTreeSet<String>,
    /// When its first capture started sampling (RFC 3339), when known.
    pub started: Option<String>,
    /// The same in ns since the epoch (the order of the series).
    #[serde(skip)]
    pub started_ns: Option<u64>,
    /// `run-labels.json` and `--label` (commit, image digest, ...).
    pub labels: BTreeMap<String, String>,
    /// The event sampled (from the first summary.json).
    pub event: Option<String>,
    /// Captures without the folded file (not processed), left out.
    pub unprocessed: Vec<String>,
    /// Captures whose folded files (all the replicate's workers) hold no
    /// sample, left out.
    pub empty: Vec<String>,
    /// Of those, the ones processed for on-CPU (`stacks.folded`) when an
    /// off-CPU or wall-clock file was asked for: recorded without
    /// `--off-cpu`.
    #[serde(skip)]
    pub on_cpu_only: usize,
    /// Lines of folded files that were not `stack count`.
    pub bad_lines: u64,
}

/// One replicate of a query in one run: its workers merged.
#[derive(Debug, Clone)]
pub struct Replicate {
    /// The capture directories' query name (`Q3_iter2`).
    pub name: String,
    /// Its replicate number (1 when the name has none).
    pub number: u32,
    /// Sum of the counts of its workers.
    pub total: u64,
    /// The folded files merged (one per worker).
    pub folded: Vec<PathBuf>,
    /// A table series' files (`gpu-kernels.tsv`, ...; one per worker),
    /// for the run-versus-baseline table ([`super::page::draw_diffs`]).
    pub tables: Vec<PathBuf>,
    /// The job view of this replicate's base query
    /// (`queries/<base>/flamegraph.html`, every replicate summed), when the
    /// run has one.
    pub flamegraph: Option<PathBuf>,
    /// (function id, self %, total %), sorted by id.
    pub shares: Vec<(u32, f32, f32)>,
}

impl Replicate {
    /// (self %, total %) of function `id` (0 when dropped or absent).
    pub fn share(&self, id: u32) -> (f64, f64) {
        match self.shares.binary_search_by_key(&id, |s| s.0) {
            Ok(i) => (f64::from(self.shares[i].1), f64::from(self.shares[i].2)),
            Err(_) => (0.0, 0.0),
        }
    }
}

/// One query across the runs.
#[derive(Debug, Clone, Default)]
pub struct QuerySeries {
    /// Function names by id.
    pub names: Vec<String>,
    index: FxHashMap<String, u32>,
    /// Per run (in series order), its replicates (none where the run
    /// lacks the query).
    pub runs: Vec<Vec<Replicate>>,
}

impl QuerySeries {
    /// The id of `name`, added when new.
    pub fn intern(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.index.get(name) {
            return id;
        }
        let id = u32::try_from(self.names.len()).expect("fewer than 4 G functions");
        self.names.push(name.to_string());
        self.index.insert(name.to_string(), id);
        id
    }

    /// The id of `name`, when known.
    pub fn id(&self, name: &str) -> Option<u32> {
        self.index.get(name).copied()
    }
}

/// The series as read.
#[derive(Debug, Clone, Default)]
pub struct Series {
    /// The runs, oldest first.
    pub runs: Vec<RunInfo>,
    /// Query -> its series.
    pub queries: BTreeMap<String, QuerySeries>,
}

/// How to read the runs.
#[derive(Debug, Clone, Default)]
pub struct LoadOptions {
    /// The folded file of each capture (`stacks.folded`, `offcpu.folded`,
    /// `wallclock.folded`).
    pub folded: String,
    /// Only these queries (base names or capture names); all when empty.
    pub queries: Vec<String>,
    /// Keep the order given instead of sorting by capture time.
    pub keep_order: bool,
    /// Labels for the newest run (`--label KEY=VALUE`).
    pub labels: Vec<(String, String)>,
}

/// A replicate before its names are interned.
struct Raw {
    base: String,
    rep: Replicate,
    named: Vec<(String, f32, f32)>,
    bad_lines: u64,
}

/// What one replicate is read from: its workers' files.
#[derive(Default)]
struct Members {
    /// Folded files, or tables (`name count total_ns median_ns`).
    files: Vec<PathBuf>,
    /// The captures' labels (`worker_0/Q3_iter2`), for warnings.
    labels: Vec<String>,
    /// The files are tables ([`nsys_runs::TABLES`]), not folded stacks.
    table: bool,
    /// The page a point of the chart opens.
    flamegraph: Option<PathBuf>,
}

/// A replicate to read: (query, number, capture name) and its files.
type Group = ((String, u32, String), Members);

/// Reads every run: each run's captures are found and grouped first, then
/// the replicates of all runs are read in parallel (no stacks are kept,
/// only each replicate's shares, so memory does not grow with the runs
/// read at once).
pub fn load(dirs: &[PathBuf], opts: &LoadOptions) -> Result<Series> {
    let mut infos = Vec::with_capacity(dirs.len());
    let mut groups: Vec<(usize, Group)> = Vec::new();
    for (r, dir) in dirs.iter().enumerate() {
        let (info, run_groups) = load_run(dir, opts)?;
        infos.push(info);
        groups.extend(run_groups.into_iter().map(|g| (r, g)));
    }
    let read = groups
        .par_iter()
        .map(|(r, ((base, number, name), members))| {
            let raw = read_replicate(base, *number, name, members)?;
            Ok((*r, members, raw))
        })
        .collect::<Result<Vec<_>>>()?;
    let mut per_run: Vec<Vec<Raw>> = dirs.iter().map(|_| Vec::new()).collect();
    for (r, members, raw) in read {
        match raw {
            Some(raw) => {
                infos[r].bad_lines += raw.bad_lines;
                per_run[r].push(raw);
            }
            None => infos[r].empty.extend(members.labels.iter().cloned()),
        }
    }
    let mut order: Vec<usize> = (0..dirs.len()).collect();
    if !opts.keep_order {
        // Stable: runs without a time keep their place after timed ones.
        order.sort_by_key(|&i| (infos[i].started_ns.is_none(), infos[i].started_ns));
    }
    if let (Some(&newest), false) = (order.last(), opts.labels.is_empty()) {
        for (k, v) in &opts.labels {
            infos[newest].labels.insert(k.clone(), v.clone());
        }
    }
    let mut series = Series::default();
    let n = order.len();
    let mut slots: Vec<Option<Vec<Raw>>> = per_run.into_iter().map(Some).collect();
    for (pos, &i) in order.iter().enumerate() {
        for raw in slots[i].take().unwrap_or_default() {
            let q = series.queries.entry(raw.base.clone()).or_default();
            if q.runs.len() < n {
                q.runs.resize_with(n, Vec::new);
            }
            let mut rep = raw.rep;
            rep.shares = raw
                .named
                .iter()
                .map(|(name, s, t)| (q.intern(name), *s, *t))
                .collect();
            rep.shares.sort_by_key(|s| s.0);
            q.runs[pos].push(rep);
        }
    }
    for q in series.queries.values_mut() {
        for reps in &mut q.runs {
            reps.sort_by_key(|r| (r.number, r.name.clone()));
        }
    }
    series.runs = order.iter().map(|&i| infos[i].clone()).collect();
    Ok(series)
}

/// One run: its facts and its replicates' captures, grouped.
fn load_run(dir: &Path, opts: &LoadOptions) -> Result<(RunInfo, Vec<Group>)> {
    if !dir.is_dir() {
        return Err(Error::Usage(format!(
            "{}: not a directory; give processed result directories (one per run)",
            dir.display()
        )));
    }
    let nsys = nsys_runs::find(dir);
    let found = match capture::discover(&[dir.to_path_buf()], &Filter::default()) {
        Ok(found) => found,
        // A run of Nsight Systems reports only.
        Err(_) if !nsys.is_empty() => Vec::new(),
        Err(e) => return Err(e),
    };
    if found.is_empty() && nsys.is_empty() {
        return Err(Error::Usage(format!(
            "{}: no capture found; give result directories written by jobprof-record \
             and processed by `jobprof process`",
            dir.display()
        )));
    }
    let mut info = RunInfo {
        dir: dir.to_path_buf(),
        name: run_name(dir),
        job_ids: BTreeSet::new(),
        started: None,
        started_ns: None,
        labels: read_labels(dir)?,
        event: None,
        unprocessed: Vec::new(),
        empty: Vec::new(),
        on_cpu_only: 0,
        bad_lines: 0,
    };
    let mut groups: BTreeMap<(String, u32, String), Members> = BTreeMap::new();
    for c in &found {
        note_capture(&mut info, c);
        let (base, number) = replicate::split(&c.query);
        if !opts.queries.is_empty() && !opts.queries.iter().any(|q| *q == base || *q == c.query) {
            continue;
        }
        let folded = c.out_dir().join(&opts.folded);
        if !capture::is_plain_file(&folded) {
            info.unprocessed.push(c.label());
            if opts.folded != capture::FOLDED
                && capture::is_plain_file(&c.out_dir().join(capture::FOLDED))
            {
                info.on_cpu_only += 1;
            }
            continue;
        }
        if info.event.is_none() {
            info.event =
                SummaryFields::read(&c.out_dir().join(capture::SUMMARY)).and_then(|s| s.event);
        }
        let m = groups
            .entry((base.to_string(), number, c.query.clone()))
            .or_default();
        if m.files.is_empty() {
            m.flamegraph = query_page(c, base);
        }
        m.files.push(folded);
        m.labels.push(c.label());
    }
    add_nsys(&mut info, &mut groups, &nsys, opts);
    info.started = info
        .started_ns
        .map(|ns| crate::sys::units::format_utc(ns / 1_000_000_000));
    Ok((info, groups.into_iter().collect()))
}

/// The run's name: the result directory's (above `profiles/perf` when
/// that was given).
fn run_name(dir: &Path) -> String {
    let name = |p: &Path| p.file_name().map(|n| n.to_string_lossy().into_owned());
    let given = name(dir).unwrap_or_else(|| dir.display().to_string());
    if given == "perf" && dir.parent().and_then(name).as_deref() == Some("profiles") {
        if let Some(n) = dir.parent().and_then(Path::parent).and_then(name) {
            return n;
        }
    }
    given
}

/// The job id and start time a capture's `capture.json` gives.
fn note_capture(info: &mut RunInfo, c: &CaptureDir) {
    let meta: Option<Capture> =
        capture::read_plain(&c.dir.join(jobprof_capture_format::CAPTURE_JSON))
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok());
    let Some(m) = meta else { return };
    if let Some(j) = m.slurm_job_id {
        info.job_ids.insert(j);
    }
    if let Some(ns) = m.enabled_unix_ns {
        info.started_ns = Some(info.started_ns.map_or(ns, |s| s.min(ns)));
    }
}

/// `run-labels.json` of `dir`: an object of short strings (numbers and
/// booleans are written as text).
fn read_labels(dir: &Path) -> Result<BTreeMap<String, String>> {
    let path = dir.join(RUN_LABELS);
    let Ok(meta) = std::fs::symlink_metadata(&path) else {
        return Ok(BTreeMap::new());
    };
    let bad = |why: String| Error::Usage(format!("{}: {why}", path.display()));
    if !meta.is_file() {
        return Err(bad("not a regular file (links are not followed)".into()));
    }
    if meta.len() > MAX_LABELS_BYTES {
        return Err(bad(format!(
            "{} bytes; labels files are at most {MAX_LABELS_BYTES} bytes",
            meta.len()
        )));
    }
    let text = capture::read_plain(&path).map_err(|e| Error::io(&path, e))?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
        bad(format!(
            "not JSON ({e}); write an object such as {{\"commit\": \"abc123\"}}"
        ))
    })?;
    let Some(obj) = v.as_object() else {
        return Err(bad(
            "not a JSON object; write one such as {\"commit\": \"abc123\"}".into(),
        ));
    };
    let mut out = BTreeMap::new();
    for (k, v) in obj {
        let v = match v {
            serde_json::Value::String(s) => s.clone(),
            serde_json::Value::Number(n) => n.to_string(),
            serde_json::Value::Bool(b) => b.to_string(),
            _ => return Err(bad(format!("label `{}`: not a string or number", short(k)))),
        };
        out.insert(short(k), short(&v));
    }
    Ok(out)
}

/// `s` cut to [`MAX_LABEL_CHARS`] characters.
pub fn short(s: &str) -> String {
    s.chars().take(MAX_LABEL_CHARS).collect()
}

/// The nsys profiles of a run, grouped as perf captures are (a query's
/// CPU stacks and each of its tables are series of their own, named by
/// [`nsys_runs::series_name`]); a report not processed is left out as a
/// capture is.
fn add_nsys(
    info: &mut RunInfo,
    groups: &mut BTreeMap<(String, u32, String), Members>,
    nsys: &[nsys_runs::Profile],
    opts: &LoadOptions,
) {
    for p in nsys {
        if let Some(j) = &p.job_id {
            info.job_ids.insert(j.clone());
        }
        if let Some(ns) = p.started_ns {
            info.started_ns = Some(info.started_ns.map_or(ns, |s| s.min(ns)));
        }
        let (base, number) = nsys_runs::split(&p.query);
        if !opts.queries.is_empty() && !opts.queries.iter().any(|q| *q == base || *q == p.query) {
            continue;
        }
        let Some(out) = &p.out else {
            info.unprocessed.push(p.label.clone());
            continue;
        };
        let html = out.join(capture::HTML);
        let flamegraph = capture::is_plain_file(&html).then_some(html);
        let tables = nsys_runs::TABLES
            .iter()
            .map(|t| (Some(*t), format!("{t}.tsv")));
        for (table, file) in std::iter::once((None, opts.folded.clone())).chain(tables) {
            let path = out.join(file);
            if !capture::is_plain_file(&path) {
                continue;
            }
            let key = (
                nsys_runs::series_name(&base, table),
                number,
                p.query.clone(),
            );
            let m = groups.entry(key).or_default();
            if m.files.is_empty() && table.is_none() {
                m.flamegraph = flamegraph.clone();
            }
            m.table = table.is_some();
            m.files.push(path);
            m.labels.push(p.label.clone());
        }
    }
}

/// The job view of query `base` of the run capture `c` belongs to
/// (`queries/<base>/flamegraph.html`, every replicate summed), if any.
fn query_page(c: &CaptureDir, base: &str) -> Option<PathBuf> {
    let root = crate::views::perf_root_of(&c.dir)?;
    let page = root
        .join(crate::views::QUERIES_DIR)
        .join(base)
        .join(capture::HTML);
    capture::is_plain_file(&page).then_some(page)
}

/// Merges a replicate's workers and keeps each function's shares.
fn read_replicate(base: &str, number: u32, name: &str, m: &Members) -> Result<Option<Raw>> {
    let mut tally = Tally::default();
    for path in &m.files {
        if m.table {
            tally.add_table(path)?;
        } else {
            tally.add_file(path)?;
        }
    }
    let (total, bad_lines) = (tally.total, tally.bad_lines);
    if total == 0 {
        return Ok(None);
    }
    let pct = |x: u64| (100.0 * x as f64 / total as f64) as f32;
    let named = tally
        .into_counts()
        .map(|(f, s, t)| (f, pct(s), pct(t)))
        .filter(|(_, s, t)| *s >= FLOOR_PCT || *t >= FLOOR_PCT)
        .collect();
    Ok(Some(Raw {
        base: base.to_string(),
        rep: Replicate {
            name: name.to_string(),
            number,
            total,
            // A table is no stack: its diff is a table of its rows.
            folded: if m.table { Vec::new() } else { m.files.clone() },
            tables: if m.table { m.files.clone() } else { Vec::new() },
            flamegraph: m.flamegraph.clone(),
            shares: Vec::new(),
        },
        named,
        bad_lines,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_names_skip_profiles_perf() {
        assert_eq!(run_name(Path::new("/r/result_5001")), "result_5001");
        assert_eq!(
            run_name(Path::new("/r/result_5001/profiles/perf")),
            "result_5001"
        );
    }

    #[test]
    fn labels_are_short_strings() {
        let d = tempfile::tempdir().unwrap();
        assert!(read_labels(d.path()).unwrap().is_empty());
        let long = "x".repeat(500);
        std::fs::write(
            d.path().join(RUN_LABELS),
            format!("{{\"commit\": \"abc\", \"n\": 3, \"long\": \"{long}\"}}"),
        )
        .unwrap();
        let l = read_labels(d.path()).unwrap();
        assert_eq!(l["commit"], "abc");
        assert_eq!(l["n"], "3");
        assert_eq!(l["long"].len(), MAX_LABEL_CHARS);
        std::fs::write(d.path().join(RUN_LABELS), "[1]").unwrap();
        let e = read_labels(d.path()).unwrap_err().to_string();
        assert!(
            e.contains(RUN_LABELS) && e.contains("not a JSON object"),
            "{e}"
        );
        std::fs::write(d.path().join(RUN_LABELS), "{\"a\": [1]}").unwrap();
        assert!(read_labels(d.path()).is_err());
    }
}
