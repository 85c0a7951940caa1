//! The Nsight Systems report of each capture's query and worker, next to
//! its perf flamegraph: what `jobprof-record sidecar --tool nsys` published
//! into `profiles/nsys/worker_N/Q/` (beside `profiles/perf/`), read from
//! its `nsys-capture.json`: the report's size and link, which file it is
//! (`.nsys-rep`, or the `.qdstrm` fallback), and how long it took to
//! settle after `nsys stop`. Links only to regular files reached through
//! real directories; nothing here is written. The page's cell is drawn
//! in `page` ([`super::page`]).

use std::fs;
use std::path::Path;

use jobprof_capture_format::nsys::{NsysCapture, NSYS_CAPTURE_JSON, NSYS_PROFILE_DIR};

use super::scan::{NsysCell, NsysProfileCell, Row};
use crate::capture::{is_plain_file, read_plain};

/// The per-query nsys root beside `profiles/perf`.
pub const NSYS_DIR: &str = "nsys";

/// The most bytes of `nsys-capture.json` read (it holds a few hundred).
const MAX_MANIFEST: u64 = 64 * 1024;

fn is_real_dir(p: &Path) -> bool {
    fs::symlink_metadata(p).is_ok_and(|m| m.is_dir())
}

/// Reads the nsys report of every row that has one; returns how many.
pub fn attach(perf_root: &Path, rows: &mut [Row]) -> usize {
    let Some(profiles) = perf_root.parent() else {
        return 0;
    };
    let root = profiles.join(NSYS_DIR);
    if !is_real_dir(&root) {
        return 0;
    }
    let mut found = 0;
    for r in rows.iter_mut() {
        let Some(w) = r.worker else { continue };
        let worker = format!("worker_{w}");
        let dir = root.join(&worker).join(&r.query);
        if !is_real_dir(&root.join(&worker)) || !is_real_dir(&dir) {
            continue;
        }
        let rel = format!("../{NSYS_DIR}/{worker}/{}", r.query);
        r.nsys = Some(read(&dir, &rel));
        found += 1;
    }
    found
}

/// The cell of one published query directory `dir` (`rel` from `profiles/perf`).
fn read(dir: &Path, rel: &str) -> NsysCell {
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
            NsysCell {
                report: plain.then(|| format!("{rel}/{}", m.file)),
                kind: m.kind.as_str().to_string(),
                bytes: m.bytes,
                settled: m.settled,
                wait_seconds: m.wait_s(),
                settle_seconds: m.settle_ms as f64 / 1000.0,
                reason: m.reason.clone(),
                profile: profile(dir, rel),
            }
        }
        Err(why) => NsysCell {
            report: None,
            kind: "-".into(),
            bytes: 0,
            settled: false,
            wait_seconds: 0.0,
            settle_seconds: 0.0,
            reason: Some(why),
            profile: None,
        },
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

/// The profile `jobprof process` made of the report in `dir`, if any.
fn profile(dir: &Path, rel: &str) -> Option<NsysProfileCell> {
    let out = dir.join(NSYS_PROFILE_DIR);
    let path = out.join(crate::capture::SUMMARY);
    if fs::symlink_metadata(&path).ok()?.len() > MAX_SUMMARY || !is_real_dir(&out) {
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
        flamegraph: is_plain_file(&out.join(fg))
            .then(|| format!("{rel}/{}/{fg}", NSYS_PROFILE_DIR)),
        samples: p.samples,
        read: p.read.clone(),
        top_waits: top("osrt.tsv"),
        nvtx: top("nvtx.tsv"),
        gpu_kernels: top("gpu-kernels.tsv"),
    })
}
