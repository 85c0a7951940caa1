//! The Nsight Systems reports of `jobprof process` and `reprocess`: each
//! per-query report (or lone `.nsys-rep`) read through `nsys::export` and
//! written as `pipeline::imported` writes a profile, into its own
//! `jobprof/` directory, `--jobs` reports side by side. The two layers
//! meet here because `nsys` stands beside the stages (it imports only
//! `sys`) and no stage may import it.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Instant;

use rayon::prelude::*;

use jobprof::nsys::export::{self, Cuts, Found, Limits, NsysCli, Profile, Slice, SliceBy, Stat};
use jobprof::pipeline::imported::{self, Imported, Row, Table};
use jobprof::pipeline::Options;
use jobprof::views;

/// One report's result line and whether it failed.
pub struct Outcome {
    /// `OUT: nsys report processed (1.2s): ...`.
    pub line: String,
    /// It could not be read or written.
    pub failed: bool,
    /// `RESULT_DIR/profiles/perf` of a report the sidecar published under
    /// `RESULT_DIR/profiles/nsys/worker_N/Q/` (where the job views go).
    pub perf_root: Option<PathBuf>,
}

/// Processes the reports under `roots` (narrowed by `workers`, `queries`);
/// a report whose `summary.json` exists is skipped unless `force`; with
/// `by`, each report is also cut into its windows (`slices/NAME/`).
pub fn run(
    roots: &[PathBuf],
    workers: &[u32],
    queries: &[String],
    opts: &Options,
    force: bool,
    by: Option<&SliceBy>,
) -> Vec<Outcome> {
    let found = export::find(roots, workers, queries);
    if found.is_empty() {
        return Vec::new();
    }
    let nsys = NsysCli::find();
    let threads = jobprof::jobs_or_cores(opts.jobs).clamp(1, found.len());
    let one = |f: &Found| Outcome {
        perf_root: perf_root_of(f),
        ..process_one(f, &nsys, opts, force, by)
    };
    match rayon::ThreadPoolBuilder::new().num_threads(threads).build() {
        Ok(pool) => pool.install(|| found.par_iter().map(one).collect()),
        Err(_) => found.iter().map(one).collect(),
    }
}

/// `RESULT_DIR/profiles/perf` of a published report (its outputs in
/// `RESULT_DIR/profiles/nsys/worker_N/Q/jobprof`); `None` for a lone one.
fn perf_root_of(f: &Found) -> Option<PathBuf> {
    f.worker?;
    let nsys = f.out.parent()?.parent()?.parent()?;
    Some(nsys.parent()?.join("perf"))
}

/// The job views of the result directories whose reports were listed
/// (processed now or before) and whose views `written` does not hold
/// already: a job of Nsight Systems reports only has no perf capture to
/// make them.
pub fn views(
    nsys: &[Outcome],
    written: &[views::ViewReport],
    opts: &views::Options,
) -> Vec<views::ViewReport> {
    let roots: BTreeSet<PathBuf> = nsys
        .iter()
        .filter_map(|o| o.perf_root.clone())
        .filter(|r| !written.iter().any(|v| v.perf_root == *r))
        .collect();
    views::for_nsys(&roots.into_iter().collect::<Vec<_>>(), opts)
}

/// Reads one report and writes its outputs: the query directory is opened
/// once (`export::open_query`, no link followed) and the report, its
/// export and every output are reached relative to it.
fn process_one(
    f: &Found,
    nsys: &Result<NsysCli, String>,
    opts: &Options,
    force: bool,
    by: Option<&SliceBy>,
) -> Outcome {
    let started = Instant::now();
    let out = jobprof::sys::progress::printable(&f.out);
    let fail = |why: String| Outcome {
        line: format!("{out}: nsys report not processed: {why}"),
        failed: true,
        perf_root: None,
    };
    if let Some(why) = &f.unreadable {
        return fail(why.clone());
    }
    let opened = match export::open_query(f) {
        Ok(o) => o,
        Err(e) => return fail(e.to_string()),
    };
    if !force && opened.done(jobprof::capture::SUMMARY) {
        return Outcome {
            line: format!("{out}: nsys report already processed (--force to redo)"),
            failed: false,
            perf_root: None,
        };
    }
    let limits = Limits {
        deadline: opts.nsys_read_limit.unwrap_or(export::DEFAULT_DEADLINE),
        ..Limits::default()
    };
    let (profile, slices, how) = match export::read_report(&opened, nsys, &limits, by) {
        Ok(p) => p,
        Err(e) => return fail(e.to_string()),
    };
    let cuts = profile.cuts;
    let written = opened
        .out_dir()
        .and_then(|dir| write_all(f, &dir, profile, slices, &how, opts, by));
    match written {
        Ok(s) => Outcome {
            line: format!(
                "{out}: nsys report processed ({:.1}s): {} CPU samples, {:.1} ms in OS \
                 runtime calls, {}{}{} ({})",
                started.elapsed().as_secs_f64(),
                s.samples,
                s.wait_ns as f64 / 1e6,
                tables_line(&s.tables),
                slices_line(&s.slices, by),
                cut_line(&cuts, &limits),
                s.read
            ),
            failed: false,
            perf_root: None,
        },
        Err(e) => fail(e.to_string()),
    }
}

/// Writes each window's profile into `slices/NAME/` of `dir`, then the
/// whole report's into `dir` (its `summary.json` last of all).
fn write_all(
    f: &Found,
    dir: &jobprof::sys::confined::Dir,
    whole: Profile,
    slices: Vec<Slice>,
    how: &str,
    opts: &Options,
    by: Option<&SliceBy>,
) -> jobprof::Result<imported::ImportedSummary> {
    let mut names = Vec::with_capacity(slices.len());
    if !slices.is_empty() {
        let root = dir.sub_create(imported::SLICES_DIR)?;
        for s in slices {
            let w = s.window;
            let mut imp = imported_of(f, s.profile, how.to_string());
            imp.dir = f.out.join(imported::SLICES_DIR).join(&w.name);
            imp.query = w.name.clone();
            imp.slice = Some(imported::SliceOf {
                by: by.map(ToString::to_string).unwrap_or_default(),
                range: w.range,
                start_ns: w.span.start,
                end_ns: w.span.end,
            });
            imported::write(&imp, &root.sub_create(&w.name)?, opts)?;
            names.push(format!("{}/{}", imported::SLICES_DIR, w.name));
        }
    }
    let mut imp = imported_of(f, whole, how.to_string());
    imp.slices = names;
    imported::write(&imp, dir, opts)
}

/// `, 9 slices by nvtx:q* (slices/)`, or `, no NVTX range matches
/// nvtx:q*`; empty without `--slice-by`.
fn slices_line(slices: &[String], by: Option<&SliceBy>) -> String {
    match (by, slices.len()) {
        (None, _) => String::new(),
        (Some(by), 0) => format!(", no NVTX range matches {by}"),
        (Some(by), n) => format!(
            ", {n} slice{} by {by} ({}/)",
            if n == 1 { "" } else { "s" },
            imported::SLICES_DIR
        ),
    }
}

/// `; cut: ...` when the reader's limits cut something, else empty.
fn cut_line(cuts: &Cuts, limits: &Limits) -> String {
    match cuts.is_empty() {
        true => String::new(),
        false => format!("; cut: {}", cuts.describe(limits)),
    }
}

/// The cuts as `summary.json`'s `cut` object (only what was cut).
fn cut_map(cuts: &Cuts) -> std::collections::BTreeMap<String, u64> {
    [
        ("deep_chains", cuts.deep_chains),
        ("long_names", cuts.long_names),
        ("repeated_depths", cuts.repeated_depths),
    ]
    .into_iter()
    .filter(|(_, n)| *n > 0)
    .map(|(k, n)| (k.to_string(), n))
    .collect()
}

fn tables_line(t: &[imported::TableSummary]) -> String {
    if t.is_empty() {
        return "no tables".into();
    }
    t.iter()
        .map(|t| format!("{} {}", t.file, t.names))
        .collect::<Vec<_>>()
        .join(", ")
}

fn rows(stats: Vec<Stat>) -> Vec<Row> {
    stats
        .into_iter()
        .map(|s| Row {
            name: s.name,
            count: s.count,
            total_ns: s.total_ns,
            median_ns: s.median_ns,
        })
        .collect()
}

/// The pipeline's view of a read report.
fn imported_of(f: &Found, p: Profile, how: String) -> Imported {
    let mut tables = Vec::new();
    let mut add = |stem: &str, title: &str, stats: Option<Vec<Stat>>| {
        if let Some(s) = stats {
            tables.push(Table {
                stem: stem.into(),
                title: title.into(),
                rows: rows(s),
            });
        }
    };
    add("osrt", "OS runtime calls", p.osrt);
    add("nvtx", "NVTX ranges", p.nvtx);
    add("gpu-kernels", "CUDA kernels", p.kernels);
    add("gpu-memcpy", "CUDA memory copies", p.memcpy);
    let cut = cut_map(&p.cuts);
    Imported {
        dir: f.out.clone(),
        worker: f.worker,
        query: f.query.clone(),
        job_id: f.job_id.clone(),
        source: "nsys".into(),
        read: p.meta.describe(),
        input: f.report.clone(),
        read_through: how,
        cpu: p.cpu,
        waits: p.waits,
        tables,
        cut,
        slice: None,
        slices: Vec::new(),
    }
}
