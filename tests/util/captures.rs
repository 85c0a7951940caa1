//! The shared captures: the old pipeline's seed result directories
//! (`../shared/seed-captures`), and the real capture made once that
//! tests/process.rs and tests/faults.rs share, with the helpers that read
//! it.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use super::{capture_q1, copy_tree, gcc, perf_available, repo_root, require};

/// `../shared/seed-captures`, when present (skipped loudly otherwise;
/// a failure under CI).
pub fn seeds() -> Option<PathBuf> {
    let p = repo_root().join("../shared/seed-captures");
    require(
        p.is_dir(),
        "../shared/seed-captures (the old pipeline's result dirs)",
    )
    .then_some(p)
}

/// A writable copy of the seed result directory `name` under `tmp`.
pub fn copy_seed(seeds: &Path, name: &str, tmp: &Path) -> PathBuf {
    let to = tmp.join(name);
    copy_tree(&seeds.join(name), &to);
    to
}

// ---------------------------------------------------------------------------
// The real capture tests/process.rs and tests/faults.rs share.

/// The capture made once: `<dir>/profiles/perf/worker_0/q1` with 3 shards,
/// and the worker's `symfs/`.
pub struct Base {
    _keep: tempfile::TempDir,
    pub result_dir: PathBuf,
}

static BASE: OnceLock<Option<Base>> = OnceLock::new();

/// The base capture, recorded on first use (`None`, skipped loudly, without
/// perf).
pub fn base() -> Option<&'static Base> {
    BASE.get_or_init(|| {
        if !require(perf_available(), "perf (linux-perf) for tests/process.rs") {
            return None;
        }
        Some(make_base())
    })
    .as_ref()
}

fn make_base() -> Base {
    let keep = tempfile::tempdir().unwrap();
    let bin_dir = keep.path().join("bin");
    std::fs::create_dir_all(&bin_dir).unwrap();
    let exe = bin_dir.join("demo_worker");
    gcc(
        "fixtures/src/demo_worker.c",
        &exe,
        &["-O2", "-g", "-static"],
    )
    .unwrap_or_else(|e| panic!("building the test workload: {e}"));
    // 6 threads + the main thread, 3 per shard: 3 shards.
    let mut worker = Command::new(&exe)
        .args(["60", "6"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let result_dir = keep.path().join("result");
    // The real capture sidecar, as a job runs it.
    capture_q1(
        keep.path(),
        &result_dir.join("profiles/perf"),
        &mut worker,
        "--frequency 499 --threads-per-shard 3 --start-timeout 30 --stop-timeout 20",
        &[("SLURM_JOB_ID", "4242")],
        2,
        Duration::from_secs(60),
    );
    // After the job the binary is gone: only symfs/ can name its frames.
    std::fs::remove_dir_all(&bin_dir).unwrap();
    Base {
        _keep: keep,
        result_dir,
    }
}

/// A private copy of the base result directory.
pub fn copy_base(base: &Base) -> (tempfile::TempDir, PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let dst = t.path().join("result");
    copy_tree(&base.result_dir, &dst);
    (t, dst)
}

/// The capture directory of query `q` of worker `worker` under `result`.
pub fn capture_dir(result: &Path, worker: u32, q: &str) -> PathBuf {
    result.join(format!("profiles/perf/worker_{worker}/{q}"))
}

/// (samples, sum of periods) of `files` according to perf itself.
pub fn perf_counts(files: &[PathBuf], symfs: &Path) -> (u64, u64) {
    let (mut n, mut sum) = (0u64, 0u64);
    for f in files {
        let out = Command::new("perf")
            .args(["script", "-f", "-F", "period", "--symfs"])
            .arg(symfs)
            .arg("-i")
            .arg(f)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "perf script -F period {}",
            f.display()
        );
        for l in String::from_utf8_lossy(&out.stdout).lines() {
            if let Ok(p) = l.trim().parse::<u64>() {
                n += 1;
                sum += p;
            }
        }
    }
    (n, sum)
}

/// The `perf.data*` files of `dir`, sorted.
pub fn data_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("perf.data")
        })
        .collect();
    v.sort();
    v
}
