//! A real query engine: DuckDB from PyPI in a pinned virtual environment,
//! and a Python benchmark driver run beside the real sidecar.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::thread;

use super::{output_text, recorder, repo_root, require, sidecar_command};

/// A Python with DuckDB: `$JOBPROF_TEST_PYTHON` when set, else the venv
/// `target/duckdb-venv` (see [`pinned_venv`]; `.ci/run` makes it before the
/// tests). `None`, skipped loudly (a failure under CI), when neither works.
pub fn duckdb_python() -> Option<PathBuf> {
    /// Pinned: tests/trend.rs injects work that lands in this release's
    /// named `duckdb::FindStrInStr`; another release may rename or inline
    /// it (keep in step with .ci/run).
    const PINS: &[(&str, &str, &str)] = &[("duckdb", "duckdb", "2.0.1")];
    static PY: OnceLock<Option<PathBuf>> = OnceLock::new();
    PY.get_or_init(|| {
        if let Some(py) = std::env::var_os("JOBPROF_TEST_PYTHON").map(PathBuf::from) {
            let works = imports(&py, "import duckdb");
            return require(works, "JOBPROF_TEST_PYTHON with duckdb").then_some(py);
        }
        pinned_venv("duckdb-venv", PINS)
    })
    .clone()
}

/// Whether `py -c CODE` succeeds.
fn imports(py: &Path, code: &str) -> bool {
    Command::new(py)
        .args(["-c", code])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The Python of the venv `target/NAME` with `pins` installed from PyPI,
/// each `(module, distribution, version)`: made with `python3 -m venv` and
/// `pip install DIST==VERSION...` unless every module already imports at
/// its pinned `__version__` (`.ci/run` makes the venvs before the tests).
/// `None`, skipped loudly (a failure under CI), when that fails.
pub fn pinned_venv(name: &str, pins: &[(&str, &str, &str)]) -> Option<PathBuf> {
    let venv = repo_root().join("target").join(name);
    let py = venv.join("bin/python");
    let check: String = pins
        .iter()
        .map(|(m, _, v)| format!("import {m}; assert {m}.__version__ == '{v}'\n"))
        .collect();
    if !imports(&py, &check) {
        let made = Command::new("python3")
            .args(["-m", "venv"])
            .arg(&venv)
            .status()
            .is_ok_and(|s| s.success())
            && Command::new(venv.join("bin/pip"))
                .args(["install", "-q"])
                .args(pins.iter().map(|(_, d, v)| format!("{d}=={v}")))
                .status()
                .is_ok_and(|s| s.success());
        if !made {
            eprintln!("python3 -m venv {} && pip install failed", venv.display());
        }
    }
    let what: Vec<String> = pins.iter().map(|(_, d, v)| format!("{d}=={v}")).collect();
    require(
        imports(&py, &check),
        &format!("a Python venv target/{name} with {}", what.join(", ")),
    )
    .then_some(py)
}

/// Runs the Python benchmark worker `script` (below the repository root)
/// with `py` beside the real sidecar, as a job does: the script gets
/// `READY ARGS...` and waits for the file READY; the sidecar writes into
/// `perf_root` (created) with `options` and `env`. Insists both succeed.
///
/// The script asks for each `start`, `stop` and `shutdown` by a line on its
/// stdout (`start --query q1_iter1`) and waits for `ok` on its stdin: they
/// run here, outside the worker's process tree, as a job's benchmark driver
/// runs in its own process or container. Run by the worker, each
/// `jobprof-record` would be a child of the profiled process, followed by
/// its perf: its token file's create and fsync, whose cost follows the
/// disk's load, were in the queries' profiles (a CI run's unchanged trend
/// series flagged `ext4_create` and `__libc_open64` at +1.1 points).
pub fn record_python(
    py: &Path,
    script: &str,
    args: &[&str],
    perf_root: &Path,
    options: &[&str],
    env: &[(&str, &str)],
) {
    std::fs::create_dir_all(perf_root).unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let tokens = scratch.path().join("tokens");
    std::fs::create_dir_all(&tokens).unwrap();
    let mut worker = Command::new(py)
        .arg(repo_root().join(script))
        .arg(tokens.join(".perf_sidecar_ready_w0"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let driver = drive(&mut worker, &tokens);
    let sidecar = sidecar_command(
        &tokens,
        0,
        worker.id(),
        perf_root,
        &scratch.path().join("staging"),
    )
    .args(options)
    .envs(env.iter().copied())
    .stdout(Stdio::null())
    .stderr(Stdio::piped())
    .output()
    .unwrap();
    let w = worker.wait().unwrap();
    let mut err = String::new();
    if let Some(mut e) = worker.stderr.take() {
        use std::io::Read;
        let _ = e.read_to_string(&mut err);
    }
    let driven = driver.join().unwrap();
    assert!(w.success(), "the worker {script}: {w:?}\n{err}");
    assert_eq!(driven, Ok(()), "the driver of {script}");
    assert!(
        sidecar.status.success(),
        "sidecar: {}",
        output_text(&sidecar)
    );
}

/// The benchmark driver of [`record_python`]: for each line the worker
/// writes (`start --query NAME`, `stop --query NAME`, `shutdown`), runs
/// `jobprof-record LINE --token-dir TOKENS --worker 0 --timeout 300` and
/// answers `ok`, or `failed` (and stops driving). Its result: the first
/// failure's words and output.
fn drive(worker: &mut Child, tokens: &Path) -> thread::JoinHandle<Result<(), String>> {
    let asks = BufReader::new(worker.stdout.take().expect("piped stdout"));
    let mut answers = worker.stdin.take().expect("piped stdin");
    let tokens = tokens.to_path_buf();
    thread::spawn(move || {
        for line in asks.lines() {
            let line = line.map_err(|e| format!("reading the worker: {e}"))?;
            let words: Vec<&str> = line.split_whitespace().collect();
            let out = Command::new(recorder())
                .args(&words)
                .arg("--token-dir")
                .arg(&tokens)
                .args(["--worker", "0", "--timeout", "300"])
                .stdin(Stdio::null())
                .output()
                .map_err(|e| format!("running jobprof-record {line}: {e}"))?;
            let ok = out.status.success();
            // The worker may be gone already: its exit status says why.
            let _ = answers.write_all(if ok { b"ok\n" } else { b"failed\n" });
            let _ = answers.flush();
            if !ok {
                return Err(format!("jobprof-record {line}: {}", output_text(&out)));
            }
        }
        Ok(())
    })
}
