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

use jobprof::nsys::export::{self, Cuts, Found, Limits, NsysCli, Profile, Stat};
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
/// a report whose `summary.json` exists is skipped unless `force`.
pub fn run(
    roots: &[PathBuf],
    workers: &[u32],
    queries: &[String],
    opts: &Options,
    force: bool,
) -> Vec<Outcome> {
    let found = export::find(roots, workers, queries);
    if found.is_empty() {
        return Vec::new();
    }
    let nsys = NsysCli::find();
    let threads = jobprof::jobs_or_cores(opts.jobs).clamp(1, found.len());
    let one = |f: &Found| Outcome {
        perf_root: perf_root_of(f),
        ..process_one(f, &nsys, opts, force)
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
fn process_one(f: &Found, nsys: &Result<NsysCli, String>, opts: &Options, force: bool) -> Outcome {
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
    let (profile, how) = match export::read_report(&opened, nsys, &limits) {
        Ok(p) => p,
        Err(e) => return fail(e.to_string()),
    };
    let cuts = profile.cuts;
    let imp = imported_of(f, profile, how);
    let written = opened
        .out_dir()
        .and_then(|dir| imported::write(&imp, &dir, opts));
    match written {
        Ok(s) => Outcome {
            line: format!(
                "{out}: nsys report processed ({:.1}s): {} CPU samples, {:.1} ms in OS \
                 runtime calls, {}{} ({})",
                started.elapsed().as_secs_f64(),
                s.samples,
                s.wait_ns as f64 / 1e6,
                tables_line(&s.tables),
                cut_line(&cuts, &limits),
                s.read
            ),
            failed: false,
            perf_root: None,
        },
        Err(e) => fail(e.to_string()),
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
    }
}
