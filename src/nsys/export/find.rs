//! Which reports `jobprof process` reads: a lone `.nsys-rep` named on the
//! command line (its outputs in `REPORT.jobprof/` beside it), and every
//! query the nsys sidecar published under a result directory
//! (`profiles/nsys/worker_N/Q/`, read from its `nsys-capture.json`; the
//! outputs in `Q/jobprof/`). Directories are entered and files read only
//! when they are what they claim (no symbolic links followed).

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use jobprof_capture_format::nsys::{NsysCapture, ReportKind, NSYS_CAPTURE_JSON};

/// The per-query nsys root of a result directory.
pub const NSYS_PROFILES: &str = "profiles/nsys";

/// The output directory inside a query directory.
pub const OUTPUT_DIR: &str = jobprof_capture_format::nsys::NSYS_PROFILE_DIR;

/// The most bytes of `nsys-capture.json` read (it holds a few hundred).
const MAX_MANIFEST: u64 = 64 * 1024;

/// One report to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// The report.
    pub report: PathBuf,
    /// Where its outputs go.
    pub out: PathBuf,
    /// Worker index (`None` for a lone report).
    pub worker: Option<u32>,
    /// The query id (a lone report's file name).
    pub query: String,
    /// `SLURM_JOB_ID` of the capture.
    pub job_id: Option<String>,
    /// Why it cannot be read (a `.qdstrm` fallback, an unreadable
    /// manifest), when it cannot.
    pub unreadable: Option<String>,
}

fn is_dir(p: &Path) -> bool {
    fs::symlink_metadata(p).is_ok_and(|m| m.is_dir())
}

fn is_file(p: &Path) -> bool {
    fs::symlink_metadata(p).is_ok_and(|m| m.is_file())
}

/// Whether `p` names a report file (`*.nsys-rep`).
pub fn is_report(p: &Path) -> bool {
    p.to_str()
        .is_some_and(|s| s.ends_with(crate::nsys::REPORT_SUFFIX))
        && is_file(p)
}

/// The reports under `roots` (lone reports, result directories, their
/// `profiles/nsys`), only those of `workers` and `queries` when given.
pub fn find(roots: &[PathBuf], workers: &[u32], queries: &[String]) -> Vec<Found> {
    let mut out = Vec::new();
    for root in roots {
        if is_report(root) {
            let mut dir = root.clone().into_os_string();
            dir.push(".jobprof");
            let query = root
                .file_name()
                .map(|n| {
                    n.to_string_lossy()
                        .trim_end_matches(".nsys-rep")
                        .to_string()
                })
                .unwrap_or_default();
            out.push(Found {
                report: root.clone(),
                out: dir.into(),
                worker: None,
                query,
                job_id: None,
                unreadable: None,
            });
            continue;
        }
        let tree = root.join(NSYS_PROFILES);
        let tree = if is_dir(&tree) { tree } else { root.clone() };
        out.extend(per_query(&tree).into_iter().filter(|f| {
            (workers.is_empty() || f.worker.is_some_and(|w| workers.contains(&w)))
                && (queries.is_empty() || queries.contains(&f.query))
        }));
    }
    out
}

/// Sorted plain directory entries of `dir` with their names.
fn entries(dir: &Path) -> Vec<(String, PathBuf)> {
    let mut v: Vec<(String, PathBuf)> = fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| Some((e.file_name().into_string().ok()?, e.path())))
        .filter(|(n, p)| !n.starts_with('.') && is_dir(p))
        .collect();
    v.sort();
    v
}

/// `worker_N/Q/` directories with an `nsys-capture.json`.
fn per_query(tree: &Path) -> Vec<Found> {
    let mut out = Vec::new();
    for (name, wdir) in entries(tree) {
        let Some(worker) = name.strip_prefix("worker_").and_then(|n| n.parse().ok()) else {
            continue;
        };
        for (query, qdir) in entries(&wdir) {
            let manifest = qdir.join(NSYS_CAPTURE_JSON);
            if !is_file(&manifest) {
                continue;
            }
            let mut f = Found {
                report: PathBuf::new(),
                out: qdir.join(OUTPUT_DIR),
                worker: Some(worker),
                query,
                job_id: None,
                unreadable: None,
            };
            match read_manifest(&manifest) {
                Ok(m) => {
                    f.report = qdir.join(&m.file);
                    f.job_id = m.slurm_job_id.clone();
                    if m.kind != ReportKind::NsysRep {
                        f.unreadable = Some(format!(
                            "{} is a .qdstrm (not converted: {}); convert it with \
                             `QdstrmImporter -i {}` and process again",
                            f.report.display(),
                            m.reason.as_deref().unwrap_or("no reason given"),
                            f.report.display()
                        ));
                    } else if m.file.contains('/') || !is_file(&f.report) {
                        f.unreadable = Some(format!(
                            "{}: the report it names is not a plain file beside it",
                            manifest.display()
                        ));
                    }
                }
                Err(why) => f.unreadable = Some(why),
            }
            out.push(f);
        }
    }
    out
}

fn read_manifest(path: &Path) -> Result<NsysCapture, String> {
    let mut text = String::new();
    fs::File::open(path)
        .and_then(|f| f.take(MAX_MANIFEST).read_to_string(&mut text))
        .map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_str(&text)
        .map_err(|e| format!("{}: not an nsys-capture.json: {e}", path.display()))
}
