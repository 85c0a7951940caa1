//! The Nsight Systems report of each capture's query and worker, next to
//! its perf flamegraph: what `jobprof-record sidecar --tool nsys` published
//! into `profiles/nsys/worker_N/Q/` (beside `profiles/perf/`), read from
//! its `nsys-capture.json`: the report's size and link, which file it is
//! (`.nsys-rep`, or the `.qdstrm` fallback), and how long it took to
//! settle after `nsys stop`. A report cut per query (`--slice-by`) gives
//! each slice (`Q/jobprof/slices/NAME/`) a row of query NAME, its cell the
//! report's with the slice's profile. Links only to regular files reached through
//! real directories; nothing here is written. The page's cell is drawn
//! in `page` ([`super::page`]).

use std::fs;
use std::path::Path;

use jobprof_capture_format::nsys::{
    NsysCapture, NSYS_CAPTURE_JSON, NSYS_PROFILE_DIR, NSYS_SLICES_DIR,
};

use super::scan::{Index, NsysCell, NsysProfileCell, Row, State};
use crate::capture::{is_plain_file, read_plain, replicate};

/// The per-query nsys root beside `profiles/perf`.
pub const NSYS_DIR: &str = "nsys";

/// The most bytes of `nsys-capture.json` read (it holds a few hundred).
const MAX_MANIFEST: u64 = 64 * 1024;

fn is_real_dir(p: &Path) -> bool {
    fs::symlink_metadata(p).is_ok_and(|m| m.is_dir())
}

/// `profiles/nsys` beside `perf_root`, when it is a real directory.
fn nsys_root(perf_root: &Path) -> Option<std::path::PathBuf> {
    let root = perf_root.parent()?.join(NSYS_DIR);
    is_real_dir(&root).then_some(root)
}

/// The worker directories (`worker_N`, real directories) of the nsys root
/// beside `perf_root`, sorted by N.
fn workers(perf_root: &Path) -> Vec<(u32, std::path::PathBuf)> {
    let Some(root) = nsys_root(perf_root) else {
        return Vec::new();
    };
    let mut out: Vec<(u32, std::path::PathBuf)> = fs::read_dir(&root)
        .into_iter()
        .flatten()
        .filter_map(|e| {
            let e = e.ok()?;
            let n = e
                .file_name()
                .to_str()?
                .strip_prefix("worker_")?
                .parse()
                .ok()?;
            is_real_dir(&e.path()).then(|| (n, e.path()))
        })
        .collect();
    out.sort();
    out
}

/// True when some nsys report was published beside `perf_root`.
pub fn has_reports(perf_root: &Path) -> bool {
    workers(perf_root)
        .iter()
        .any(|(_, w)| !query_dirs(w).is_empty())
}

/// The query directories of a worker's nsys directory, sorted.
fn query_dirs(worker: &Path) -> Vec<String> {
    let mut out: Vec<String> = fs::read_dir(worker)
        .into_iter()
        .flatten()
        .filter_map(|e| {
            let e = e.ok()?;
            let name = e.file_name().to_str()?.to_string();
            is_real_dir(&e.path()).then_some(name)
        })
        .collect();
    out.sort();
    out
}

/// Reads the nsys report of every row that has one, and adds a row for
/// each published query and worker without a perf capture (state
/// [`State::NsysOnly`]; the job's ids, hosts, workers and queries taken
/// from them too); returns how many reports were listed.
pub fn attach(perf_root: &Path, index: &mut Index) -> usize {
    let mut found = 0;
    let mut added = false;
    for (w, wdir) in workers(perf_root) {
        for query in query_dirs(&wdir) {
            let rel = format!("../{NSYS_DIR}/worker_{w}/{query}");
            let (cell, manifest) = read(&wdir.join(&query), &rel);
            found += 1;
            // The report's slices (`--slice-by`): a query each, the
            // report's cell with the slice's profile.
            let out = wdir.join(&query).join(NSYS_PROFILE_DIR);
            let out_rel = format!("{rel}/{NSYS_PROFILE_DIR}");
            for name in listed_slices(&out) {
                let dir = out.join(NSYS_SLICES_DIR).join(&name);
                let dir_rel = format!("{out_rel}/{NSYS_SLICES_DIR}/{name}");
                let Some(p) = profile(&dir, &dir_rel) else {
                    continue;
                };
                let slice = NsysCell {
                    profile: Some(p),
                    ..cell.clone()
                };
                added |= add_cell(index, w, &name, manifest.as_ref(), slice);
            }
            added |= add_cell(index, w, &query, manifest.as_ref(), cell);
        }
    }
    if added {
        index
            .captures
            .sort_by(|a, b| (a.worker, &a.query).cmp(&(b.worker, &b.query)));
    }
    found
}

/// Puts `cell` in the row of worker `w`'s `query`, or adds an nsys-only
/// row for it (the job's ids, host, worker and query noted); whether a
/// row was added.
fn add_cell(
    index: &mut Index,
    w: u32,
    query: &str,
    manifest: Option<&NsysCapture>,
    cell: NsysCell,
) -> bool {
    let row = (index.captures.iter_mut()).find(|r| r.worker == Some(w) && r.query == query);
    if let Some(r) = row {
        r.nsys = Some(cell);
        return false;
    }
    let host = manifest.map(|m| m.host.clone());
    let job = &mut index.job;
    if let Some(j) = manifest.and_then(|m| m.slurm_job_id.clone()) {
        job.job_ids.insert(j);
    }
    job.hosts.extend(host.clone());
    job.workers.insert(w);
    job.queries.insert(replicate::split(query).0.to_string());
    index.captures.push(nsys_only_row(w, query, host, cell));
    true
}

/// The row of a query and worker with an nsys report and no perf capture.
fn nsys_only_row(worker: u32, query: &str, host: Option<String>, cell: NsysCell) -> Row {
    let (base, replicate) = replicate::split(query);
    Row {
        capture: format!("worker_{worker}/{query}"),
        worker: Some(worker),
        query: query.to_string(),
        base: base.to_string(),
        replicate,
        state: State::NsysOnly,
        reason: None,
        host,
        samples: None,
        period_total: None,
        event: None,
        window_seconds: None,
        symbolized_share: None,
        truncated_share: None,
        top_self: Vec::new(),
        flamegraph: None,
        folded: None,
        completed: None,
        off_cpu: None,
        nsys: Some(cell),
    }
}

/// The cell of one published query directory `dir` (`rel` from
/// `profiles/perf`), and its manifest when it could be read.
fn read(dir: &Path, rel: &str) -> (NsysCell, Option<NsysCapture>) {
    let path = dir.join(NSYS_CAPTURE_JSON);
    let meta = match fs::symlink_metadata(&path) {
        Ok(m) if m.len() > MAX_MANIFEST => Err(format!(
            "{} is {} bytes, more than a manifest holds; not read",
            path.display(),
            m.len()
        )),
        _ => read_plain(&path)
            .map_err(|e| format!("{}: {e}", path.display()))
            .and_then(|t| {
                serde_json::from_str::<NsysCapture>(&t)
                    .map_err(|e| format!("{}: not an nsys-capture.json: {e}", path.display()))
            }),
    };
    match meta {
        Ok(m) => {
            // The file name must stay inside the directory.
            let plain = !m.file.contains('/') && is_plain_file(&dir.join(&m.file));
            let cell = NsysCell {
                report: plain.then(|| format!("{rel}/{}", m.file)),
                kind: m.kind.as_str().to_string(),
                bytes: m.bytes,
                settled: m.settled,
                wait_seconds: m.wait_s(),
                settle_seconds: m.settle_ms as f64 / 1000.0,
                reason: m.reason.clone(),
                profile: profile(
                    &dir.join(NSYS_PROFILE_DIR),
                    &format!("{rel}/{NSYS_PROFILE_DIR}"),
                ),
            };
            (cell, Some(m))
        }
        Err(why) => (
            NsysCell {
                report: None,
                kind: "-".into(),
                bytes: 0,
                settled: false,
                wait_seconds: 0.0,
                settle_seconds: 0.0,
                reason: Some(why),
                profile: None,
            },
            None,
        ),
    }
}

/// What `summary.json` of a processed report holds for the page.
#[derive(serde::Deserialize)]
struct Processed {
    samples: u64,
    read: String,
    tables: Vec<ProcessedTable>,
}

#[derive(serde::Deserialize)]
struct ProcessedTable {
    file: String,
    top: Vec<ProcessedRow>,
}

#[derive(serde::Deserialize)]
struct ProcessedRow {
    name: String,
    total_ns: u64,
}

/// The most bytes of a processed report's `summary.json` read.
const MAX_SUMMARY: u64 = 1 << 20;

/// The slices of a report's profile directory `out` that its own
/// `summary.json` lists (`"slices": ["slices/q1", ...]`, written last by
/// the run that cut them), each a real directory with its summary: a slice
/// of an earlier cut left on disk, a link, or a name that is not one plain
/// path component is not one.
pub fn listed_slices(out: &Path) -> Vec<String> {
    #[derive(serde::Deserialize)]
    struct Listed {
        #[serde(default)]
        slices: Vec<String>,
    }
    let root = out.join(NSYS_SLICES_DIR);
    let path = out.join(crate::capture::SUMMARY);
    if !is_real_dir(out) || !is_real_dir(&root) {
        return Vec::new();
    }
    let small = fs::symlink_metadata(&path).is_ok_and(|m| m.len() <= MAX_SUMMARY);
    let listed: Option<Listed> = small
        .then(|| read_plain(&path).ok())
        .flatten()
        .and_then(|t| serde_json::from_str(&t).ok());
    let prefix = format!("{NSYS_SLICES_DIR}/");
    (listed.map(|l| l.slices).unwrap_or_default().into_iter())
        .filter_map(|s| s.strip_prefix(&prefix).map(str::to_string))
        .filter(|n| {
            let one = Path::new(n).components().count() == 1;
            let plain = !n.is_empty() && !n.starts_with('.') && !n.contains('/');
            one && plain
                && is_real_dir(&root.join(n))
                && is_plain_file(&root.join(n).join(crate::capture::SUMMARY))
        })
        .collect()
}

/// The profile `jobprof process` wrote into `out` (`rel` from
/// `profiles/perf`): a report's `jobprof/`, or one of its slices.
fn profile(out: &Path, rel: &str) -> Option<NsysProfileCell> {
    let path = out.join(crate::capture::SUMMARY);
    if fs::symlink_metadata(&path).ok()?.len() > MAX_SUMMARY || !is_real_dir(out) {
        return None;
    }
    let p: Processed = serde_json::from_str(&read_plain(&path).ok()?).ok()?;
    let top = |file: &str| -> Vec<(String, u64)> {
        (p.tables.iter().find(|t| t.file == file))
            .map(|t| {
                t.top
                    .iter()
                    .take(3)
                    .map(|r| (r.name.clone(), r.total_ns))
                    .collect()
            })
            .unwrap_or_default()
    };
    let fg = crate::capture::HTML;
    Some(NsysProfileCell {
        flamegraph: is_plain_file(&out.join(fg)).then(|| format!("{rel}/{fg}")),
        samples: p.samples,
        read: p.read.clone(),
        top_waits: top("osrt.tsv"),
        nvtx: top("nvtx.tsv"),
        gpu_kernels: top("gpu-kernels.tsv"),
    })
}
