//! The Nsight Systems profiles of a run: what `jobprof process` wrote for
//! each per-query report under `RESULT_DIR/profiles/nsys/worker_N/Q/jobprof/`
//! (beside `profiles/perf`), followed per query as perf captures are. Each
//! query gives up to four series, named after it: `Q [nsys]` (the CPU
//! stacks, `stacks.folded`, or the kind's folded file), `Q [gpu-kernels]`,
//! `Q [gpu-memcpy]` and `Q [nvtx]` (the tables: each name's total ns per
//! replicate, its share of the table's total). A report cut per query
//! (`--slice-by`) gives each slice (`jobprof/slices/NAME/`) as query NAME,
//! and a report's own profile directory given as a run gives its slices.
//! Only real directories and plain files are read (a link is not followed).

use std::path::{Path, PathBuf};

use jobprof_capture_format::nsys::{
    NsysCapture, NSYS_CAPTURE_JSON, NSYS_PROFILE_DIR, NSYS_SLICES_DIR,
};

use crate::capture::{self, is_plain_file, replicate};
use crate::views::listed_slices;

/// Where the sidecar publishes per-query reports, beside `profiles/perf`.
const NSYS_ROOT: &str = "nsys";
/// The tables followed, and the suffix of their series' names.
pub const TABLES: [&str; 3] = ["gpu-kernels", "gpu-memcpy", "nvtx"];
/// The suffix of the CPU stacks' series.
pub const CPU_SUFFIX: &str = "[nsys]";
/// The most bytes of `nsys-capture.json` read (it holds a few hundred).
const MAX_MANIFEST: u64 = 64 * 1024;

/// One processed (or not) per-query report of a run.
pub struct Profile {
    /// `nsys worker_N/Q`, as warnings name it.
    pub label: String,
    /// The query's directory name (`q1_iter2`).
    pub query: String,
    /// Its `jobprof/` directory, when `summary.json` is there.
    pub out: Option<PathBuf>,
    /// The Slurm job id, from the manifest.
    pub job_id: Option<String>,
    /// When `nsys start` returned (ns since the epoch), from the manifest.
    pub started_ns: Option<u64>,
}

fn is_real_dir(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir())
}

/// `RESULT_DIR/profiles/nsys` of a run given as `RESULT_DIR` or as its
/// `profiles/perf`.
fn root_of(run: &Path) -> PathBuf {
    let is = |p: &Path, n: &str| p.file_name().is_some_and(|f| f == n);
    match run.parent() {
        Some(profiles) if is(run, "perf") && is(profiles, "profiles") => profiles.join(NSYS_ROOT),
        _ => run.join("profiles").join(NSYS_ROOT),
    }
}

/// Every per-query report directory of the run (holding
/// `nsys-capture.json` or a `jobprof/` directory), sorted.
pub fn find(run: &Path) -> Vec<Profile> {
    // A report's own profile directory, cut per query: its slices.
    if !listed_slices(run).is_empty() {
        return slices(run, "nsys", None);
    }
    let root = root_of(run);
    let mut out = Vec::new();
    for worker in sorted_dirs(&root) {
        let wname = worker.file_name().map(|n| n.to_string_lossy().into_owned());
        let Some(wname) = wname.filter(|n| n.starts_with("worker_")) else {
            continue;
        };
        for q in sorted_dirs(&worker) {
            let query = q.file_name().map(|n| n.to_string_lossy().into_owned());
            let Some(query) = query else { continue };
            let jp = q.join(NSYS_PROFILE_DIR);
            if !is_plain_file(&q.join(NSYS_CAPTURE_JSON)) && !is_real_dir(&jp) {
                continue;
            }
            let processed = is_real_dir(&jp) && is_plain_file(&jp.join(capture::SUMMARY));
            let manifest = read_manifest(&q.join(NSYS_CAPTURE_JSON));
            let job_id = manifest.as_ref().and_then(|m| m.slurm_job_id.clone());
            let label = format!("nsys {wname}/{query}");
            out.extend(slices(&jp, &label, job_id.clone()));
            out.push(Profile {
                label,
                query,
                out: processed.then_some(jp),
                job_id,
                started_ns: manifest.map(|m| m.start.unix_ns).filter(|&ns| ns > 0),
            });
        }
    }
    out
}

/// The slices of a report's profile directory `out` its summary lists
/// ([`listed_slices`]), each a query named NAME.
fn slices(out: &Path, label: &str, job_id: Option<String>) -> Vec<Profile> {
    let mut names = listed_slices(out);
    names.sort();
    (names.into_iter())
        .map(|query| Profile {
            label: format!("{label}/{NSYS_SLICES_DIR}/{query}"),
            out: Some(out.join(NSYS_SLICES_DIR).join(&query)),
            query,
            job_id: job_id.clone(),
            started_ns: None,
        })
        .collect()
}

fn sorted_dirs(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut dirs: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| is_real_dir(p))
        .collect();
    dirs.sort();
    dirs
}

fn read_manifest(path: &Path) -> Option<NsysCapture> {
    if std::fs::symlink_metadata(path).ok()?.len() > MAX_MANIFEST {
        return None;
    }
    serde_json::from_str(&capture::read_plain(path).ok()?).ok()
}

/// The series name of query `base`'s CPU stacks or table `table`.
pub fn series_name(base: &str, table: Option<&str>) -> String {
    match table {
        Some(t) => format!("{base} [{t}]"),
        None => format!("{base} {CPU_SUFFIX}"),
    }
}

/// Which kind of nsys series a query name is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeriesKind {
    /// `Q [nsys]`: CPU samples.
    Cpu,
    /// `Q [gpu-kernels]` and the other tables: ns.
    Table,
}

/// The kind of series `query` names, `None` for a perf capture's query.
pub fn series_of(query: &str) -> Option<SeriesKind> {
    if query.ends_with(&format!(" {CPU_SUFFIX}")) {
        return Some(SeriesKind::Cpu);
    }
    TABLES
        .iter()
        .any(|t| query.ends_with(&format!(" [{t}]")))
        .then_some(SeriesKind::Table)
}

/// (base query, replicate number) of a report's query name.
pub fn split(query: &str) -> (String, u32) {
    let (base, n) = replicate::split(query);
    (base.to_string(), n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_names_say_their_kind_and_the_nsys_root_is_beside_perf() {
        assert_eq!(series_name("q1", None), "q1 [nsys]");
        assert_eq!(series_name("q1", Some("nvtx")), "q1 [nvtx]");
        assert_eq!(series_of("q1 [nsys]"), Some(SeriesKind::Cpu));
        assert_eq!(series_of("q1 [gpu-kernels]"), Some(SeriesKind::Table));
        assert_eq!(series_of("q1"), None);
        assert_eq!(
            root_of(Path::new("/r/run_1")),
            Path::new("/r/run_1/profiles/nsys")
        );
        assert_eq!(
            root_of(Path::new("/r/run_1/profiles/perf")),
            Path::new("/r/run_1/profiles/nsys")
        );
    }
}
