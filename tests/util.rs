//! Helpers shared by the integration test modules.

#![allow(dead_code)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;
use std::thread::sleep;
use std::time::{Duration, Instant};

mod browser;
mod captures;
mod engine;

pub use browser::{
    assert_tables_line_up, chromium, dump_dom, dump_dom_url, probe_layout, require_chromium,
    screenshot, WINDOW,
};
pub use captures::{base, capture_dir, copy_base, copy_seed, data_files, perf_counts, seeds};
pub use engine::{duckdb_python, pinned_venv, record_python};

/// The repository root (where Cargo.toml is).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `../shared/compat` beside the checkout, when it exists.
pub fn shared_compat() -> Option<PathBuf> {
    let p = repo_root().join("../shared/compat");
    p.is_dir().then_some(p)
}

/// True when running under CI (`CI=true`): missing real components are then
/// failures, not skips.
pub fn under_ci() -> bool {
    std::env::var("CI")
        .map(|v| v == "true" || v == "1")
        .unwrap_or(false)
}

/// Reports a missing real component: panics under CI, prints loudly otherwise.
/// Returns `false` so callers can `if !require(...) { return; }`.
pub fn require(available: bool, what: &str) -> bool {
    if available {
        return true;
    }
    if under_ci() {
        panic!("required component missing under CI: {what}");
    }
    eprintln!("\n*** SKIPPED: {what} is not available on this machine ***\n");
    note_skip(what);
    false
}

/// Where skipped tests are listed, one line each (`.ci/run` and
/// `scripts/test-skips.sh` count them): `target/skipped-tests.txt` under the
/// checkout, or `$JOBPROF_SKIP_LOG`.
pub fn skip_log() -> PathBuf {
    std::env::var_os("JOBPROF_SKIP_LOG")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("target/skipped-tests.txt"))
}

/// Appends `test<TAB>what` to the skip log: a test that did not run says
/// so where a summary can count it, not only on captured stderr.
fn note_skip(what: &str) {
    use std::io::Write;
    let test = std::thread::current()
        .name()
        .unwrap_or("(unnamed test)")
        .to_string();
    let log = skip_log();
    if let Some(dir) = log.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let line = format!("{test}\t{}\n", what.replace(['\n', '\t'], " "));
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log)
    {
        let _ = f.write_all(line.as_bytes());
    }
}

/// The path of the fixtures directory.
pub fn fixtures() -> PathBuf {
    repo_root().join("fixtures")
}

/// Reads a file, naming it on failure.
pub fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// True when a real Slurm cluster answers: `SLURM_CONF` is set (as
/// `eval "$(scripts/slurm-cluster.sh start)"` does) and `sinfo` succeeds.
/// Checked once per test run.
pub fn slurm_available() -> bool {
    static AVAILABLE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *AVAILABLE.get_or_init(|| {
        std::env::var_os("SLURM_CONF").is_some()
            && std::process::Command::new("sinfo")
                .arg("-h")
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
    })
}

/// The `jobprof-record` binary.
///
/// It belongs to the workspace member `crates/record`, not to the root
/// package, so Cargo does not give this test binary a
/// `CARGO_BIN_EXE_jobprof-record`. It is built into the same directory as
/// the root package's `jobprof` binary (same target dir, target triple and
/// profile), so we derive its path from `CARGO_BIN_EXE_jobprof` and run
/// `cargo build -p jobprof-record` for exactly that directory once per test
/// run: a no-op when it is up to date, and it never tests a stale binary.
pub fn recorder() -> PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        let main = PathBuf::from(env!("CARGO_BIN_EXE_jobprof"));
        let profile_dir = main.parent().expect("binary directory");
        let exe = profile_dir.join("jobprof-record");
        let profile = match profile_dir.file_name().and_then(|n| n.to_str()) {
            Some("debug") | None => "dev",
            Some(p) => p,
        };
        // target/<triple>/<profile>/ when a target is set (our
        // .cargo/config.toml sets one), else target/<profile>/.
        let above = profile_dir.parent().expect("target directory");
        let triple = above
            .file_name()
            .and_then(|n| n.to_str())
            .filter(|n| n.matches('-').count() >= 2)
            .map(str::to_string);
        let target_dir = if triple.is_some() {
            above.parent().expect("target directory")
        } else {
            above
        };
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let mut cmd = Command::new(cargo);
        cmd.args([
            "build",
            "--quiet",
            "-p",
            "jobprof-record",
            "--profile",
            profile,
        ])
        .arg("--target-dir")
        .arg(target_dir)
        .current_dir(env!("CARGO_MANIFEST_DIR"));
        if let Some(t) = &triple {
            cmd.args(["--target", t]);
        }
        let status = cmd.status().expect("run cargo build -p jobprof-record");
        assert!(status.success(), "cargo build -p jobprof-record failed");
        assert!(exe.is_file(), "{} missing after the build", exe.display());
        exe
    })
    .clone()
}

/// Whether tracefs offers `sched:sched_switch` (what `--off-cpu` records),
/// or a loud skip (a failure under CI).
pub fn tracefs_sched_switch() -> bool {
    let tracefs = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"]
        .iter()
        .any(|d| Path::new(d).join("events/sched/sched_switch/id").exists());
    require(
        tracefs,
        "tracefs with sched:sched_switch (mount -t tracefs nodev /sys/kernel/tracing)",
    )
}

/// Whether `perf record` works here (installed, and allowed to sample).
pub fn perf_can_record() -> bool {
    static OK: OnceLock<bool> = OnceLock::new();
    *OK.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("probe.data");
        Command::new("perf")
            .args(["record", "-q", "-e", "cpu-clock", "-o"])
            .arg(&data)
            .args(["--", "true"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
            && data.exists()
    })
}

/// A finished command's status, stdout and stderr, for assertion messages.
pub fn output_text(out: &std::process::Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Copies the demo result directory (fixtures/result_dir_demo) to `dest`
/// without the outputs a run of the README's first command
/// (`cargo run --release -- process fixtures/result_dir_demo`) leaves in the
/// checkout: tests see the committed capture whether or not the demo ran.
pub fn copy_demo(dest: &Path) {
    copy_tree_without_outputs(&fixtures().join("result_dir_demo"), dest);
}

fn copy_tree_without_outputs(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let name = e.file_name().to_string_lossy().into_owned();
        if is_process_output(&name) {
            continue;
        }
        let dst = to.join(&name);
        if e.file_type().unwrap().is_dir() {
            copy_tree_without_outputs(&e.path(), &dst);
        } else {
            std::fs::copy(e.path(), &dst).unwrap();
        }
    }
}

/// Files `jobprof process` writes into a capture directory (besides
/// perf.script.zst, which the demo also ships), and the job-level views it
/// writes into `profiles/perf/`.
fn is_process_output(name: &str) -> bool {
    name.starts_with(".postprocess")
        || name.starts_with("flamegraph.")
        || name.ends_with(".tmp")
        || [
            "stacks.folded",
            "summary.json",
            "profile.speedscope.json",
            "profile.pb.gz",
            "index.html",
            "index.json",
            ".jobprof-index.lock",
            "queries",
        ]
        .contains(&name)
}

/// The `jobprof` binary under test, with stdin closed (a test that feeds
/// stdin sets it again) and without the fake tools' `CI_FAKE_LOG`, so a
/// test's fakes log only where that test says.
pub fn jobprof() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_jobprof"));
    c.stdin(Stdio::null());
    c.env_remove("CI_FAKE_LOG");
    c
}

/// A command's stderr as text.
pub fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The sum of the counts of a folded stacks file (`stack COUNT` lines).
pub fn folded_total(path: &Path) -> u64 {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        // `# counts: ns` says what the counts are (`jobprof fold`).
        .filter(|l| !l.starts_with('#'))
        .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
        .sum()
}

/// Waits until the sidecar of worker 0 wrote its `ready` token in `tokens`.
/// When it exits first, or `timeout` passes, kills it and the worker and
/// fails with the sidecar's error token and stderr.
pub fn wait_sidecar_ready(
    sidecar: &mut Child,
    worker: &mut Child,
    tokens: &Path,
    timeout: std::time::Duration,
) {
    use std::io::Read;
    let ready = tokens.join(".perf_sidecar_ready_w0");
    let deadline = std::time::Instant::now() + timeout;
    while !ready.exists() {
        if sidecar.try_wait().unwrap().is_some() || std::time::Instant::now() > deadline {
            let _ = sidecar.kill();
            let mut stderr = String::new();
            if let Some(mut s) = sidecar.stderr.take() {
                let _ = s.read_to_string(&mut stderr);
            }
            let _ = sidecar.wait();
            let _ = worker.kill();
            panic!(
                "jobprof-record sidecar not ready: {}{stderr}",
                std::fs::read_to_string(tokens.join(".perf_sidecar_error_w0")).unwrap_or_default()
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// `jobprof-record sidecar` for worker `worker` of `pid`, with its token
/// dir, PERF_ROOT and staging dir; callers add the capture options.
pub fn sidecar_command(
    tokens: &Path,
    worker: u32,
    pid: u32,
    perf_root: &Path,
    staging: &Path,
) -> Command {
    let mut c = Command::new(recorder());
    c.arg("sidecar")
        .arg("--token-dir")
        .arg(tokens)
        .args(["--worker", &worker.to_string(), "--pid", &pid.to_string()])
        .arg("--out")
        .arg(perf_root)
        .arg("--staging")
        .arg(staging);
    c
}

/// Runs a driver-side `jobprof-record ARGS --token-dir TOKENS --worker N
/// --timeout 300` (`start`, `stop`, `shutdown`) and insists it succeeds.
pub fn record_driver(tokens: &Path, worker: u32, args: &[&str]) {
    let out = Command::new(recorder())
        .args(args)
        .arg("--token-dir")
        .arg(tokens)
        .args(["--worker", &worker.to_string(), "--timeout", "300"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "jobprof-record {args:?}: {}",
        output_text(&out)
    );
}

/// One query, `q1`, of worker 0 captured by the real sidecar as a job runs
/// it, into `perf_root` (created), with the tokens and staging in `dir`:
/// starts the sidecar with `options` (words separated by spaces) and `env`
/// next to the running
/// `worker`, waits up to `ready` for it, then `start`, `seconds` of
/// sampling, `stop` and `shutdown`; insists every step and the sidecar
/// succeed, and kills the worker.
pub fn capture_q1(
    dir: &Path,
    perf_root: &Path,
    worker: &mut Child,
    options: &str,
    env: &[(&str, &str)],
    seconds: u64,
    ready: std::time::Duration,
) {
    let tokens = dir.join("tokens");
    std::fs::create_dir_all(&tokens).unwrap();
    std::fs::create_dir_all(perf_root).unwrap();
    let staging = dir.join("staging");
    let mut child = sidecar_command(&tokens, 0, worker.id(), perf_root, &staging)
        .args(options.split_whitespace())
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_sidecar_ready(&mut child, worker, &tokens, ready);
    record_driver(&tokens, 0, &["start", "--query", "q1"]);
    std::thread::sleep(std::time::Duration::from_secs(seconds));
    record_driver(&tokens, 0, &["stop", "--query", "q1"]);
    record_driver(&tokens, 0, &["shutdown"]);
    let out = child.wait_with_output().unwrap();
    let _ = worker.kill();
    let _ = worker.wait();
    assert!(out.status.success(), "sidecar: {}", output_text(&out));
}

/// Compiles the C test program `src` (a path below the repository root)
/// into `exe` with gcc: frame pointers and pthreads, plus `flags` (the
/// optimisation level, `-g`, `-static`). Err says why (gcc missing, or its
/// output).
pub fn gcc(src: &str, exe: &Path, flags: &[&str]) -> Result<(), String> {
    let out = Command::new("gcc")
        .args(flags)
        .args(["-fno-omit-frame-pointer", "-pthread", "-o"])
        .arg(exe)
        .arg(repo_root().join(src))
        .output()
        .map_err(|e| format!("gcc: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("gcc {src}: {}", output_text(&out)))
    }
}

/// The C test program `src` compiled once per test run with `flags` (see
/// [`gcc`]) into the target's temporary directory as `name` (tests look
/// for that name in /proc, reports and flamegraphs); None when gcc fails
/// (callers `require` it).
pub fn program(name: &str, src: &str, flags: &[&str]) -> Option<PathBuf> {
    use std::collections::BTreeMap;
    use std::sync::Mutex;
    static BUILT: Mutex<BTreeMap<String, Option<PathBuf>>> = Mutex::new(BTreeMap::new());
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    built
        .entry(name.to_string())
        .or_insert_with(|| {
            let exe = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
            gcc(src, &exe, flags).ok().map(|()| exe)
        })
        .clone()
}

/// Whether `perf --version` runs.
pub fn perf_available() -> bool {
    Command::new("perf")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Copies the tree `from` to `to` (created), files and directories only.
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dst = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &dst);
        } else {
            std::fs::copy(e.path(), &dst).unwrap();
        }
    }
}

/// A tmpfs mounted for one test, unmounted when dropped.
pub struct Tmpfs {
    _dir: tempfile::TempDir,
    pub mnt: PathBuf,
}

impl Tmpfs {
    pub fn mount(bytes: u64) -> Option<Tmpfs> {
        let dir = tempfile::tempdir().unwrap();
        let mnt = dir.path().join("mnt");
        std::fs::create_dir(&mnt).unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={bytes}"), "tmpfs"])
            .arg(&mnt)
            .status()
            .is_ok_and(|s| s.success());
        require(ok, "mounting a tmpfs (root)").then_some(Tmpfs { _dir: dir, mnt })
    }

    pub fn avail(&self) -> u64 {
        let c = std::ffi::CString::new(self.mnt.to_str().unwrap()).unwrap();
        // SAFETY: a valid path and a zeroed out-struct.
        let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
        // SAFETY: as above: a NUL-terminated path and a struct we own.
        assert_eq!(unsafe { libc::statvfs(c.as_ptr(), &mut st) }, 0);
        st.f_bavail * st.f_frsize
    }

    /// Fills the filesystem until `free` bytes are left (to the page).
    pub fn leave_free(&self, free: u64) {
        let filler = self.mnt.join("filler");
        let _ = std::fs::remove_file(&filler);
        let take = self.avail().saturating_sub(free);
        let f = std::fs::File::create(&filler).unwrap();
        if take > 0 {
            use std::os::fd::AsRawFd;
            // SAFETY: a valid descriptor; tmpfs allocates the pages.
            let r = unsafe { libc::posix_fallocate(f.as_raw_fd(), 0, take as libc::off_t) };
            assert_eq!(r, 0, "fallocate {take}");
        }
    }

    pub fn free_all(&self) {
        let _ = std::fs::remove_file(self.mnt.join("filler"));
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.mnt).status();
    }
}

/// `capture-metadata.txt` as the old shell pipeline's sampler writes it:
/// one block per phase (start, stop, queued, publish_start, published),
/// the capture's facts repeated in each, for `shards` shards.
pub fn old_pipeline_metadata(shards: usize, job_id: &str, event: &str) -> String {
    let common = format!(
        "timestamp_utc=2026-12-02T04:28:48Z\nhostname=vm\nslurm_job_id={job_id}\nworker_id=0\n\
         worker_pid=1\nquery_profile_id=q\nevent={event}\nfrequency=499\ncall_graph=fp\n\
         user_regs=perf-default\nworker_exe=/opt/demo\n"
    );
    let files: Vec<String> = if shards == 1 {
        vec!["perf.data".into()]
    } else {
        (0..shards)
            .map(|i| format!("perf.data.part{i:03}"))
            .collect()
    };
    format!(
        "capture_phase=start\n{common}perf_control_handshake=enabled\nperf_shard_count={shards}\n\
         capture_phase=stop\n{common}\
         capture_phase=queued\n{common}sample_loss=0%\ncapture_valid=1\n\
         capture_phase=publish_start\n{common}perf_data_shards={shards}\nperf_data_files={}\n\
         capture_phase=published\n{common}",
        files.join(",")
    )
}

// ---------------------------------------------------------------------------
// Commands and waiting.

/// True when `cmd` is on PATH (`command -v`).
pub fn have(cmd: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {cmd}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// True when the tests run as root.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Runs `sh -c script` as user `nobody` (the attacker who plants files);
/// panics naming the script when it fails.
pub fn as_nobody(script: &str) {
    let st = Command::new("setpriv")
        .args([
            "--reuid=nobody",
            "--regid=nogroup",
            "--clear-groups",
            "sh",
            "-c",
            script,
        ])
        .status()
        .unwrap();
    assert!(st.success(), "as nobody: {script}");
}

/// A directory only root can change (root-owned, and so is every directory
/// above it, none writable by others): where a trusted JDK or nsys can
/// live (the target's temporary directory, else below /run).
pub fn root_only_dir() -> Option<tempfile::TempDir> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let trusted = |p: &Path| {
        p.ancestors()
            .all(|a| std::fs::metadata(a).is_ok_and(|m| m.uid() == 0 && m.mode() & 0o022 == 0))
    };
    [
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")),
        PathBuf::from("/run"),
    ]
    .into_iter()
    .filter(|p| trusted(p))
    .find_map(|p| tempfile::tempdir_in(p).ok())
    .inspect(|d| {
        std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap()
    })
}

/// The write system calls process `pid` (all its threads) made during
/// `period` (`syscw` of /proc/PID/io): 0 for a sidecar that waits idle.
pub fn writes_during(pid: u32, period: Duration) -> u64 {
    let syscw = || {
        let io = std::fs::read_to_string(format!("/proc/{pid}/io"))
            .unwrap_or_else(|e| panic!("/proc/{pid}/io: {e}"));
        io.lines()
            .find_map(|l| l.strip_prefix("syscw: "))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or_else(|| panic!("no syscw in /proc/{pid}/io:\n{io}"))
    };
    let before = syscw();
    sleep(period);
    syscw() - before
}

/// Asserts that a finished command succeeded, printing its status, stdout
/// and stderr otherwise.
#[track_caller]
pub fn ok(out: &Output) {
    assert!(out.status.success(), "{}", output_text(out));
}

/// A command's stdout as text.
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Polls `done` every 20 ms; panics naming `what` after `timeout`.
pub fn wait_for(what: &str, timeout: Duration, done: impl FnMut() -> bool) {
    wait_every(what, timeout, Duration::from_millis(20), done)
}

/// Polls `done` every `every`; panics naming `what` after `timeout`.
pub fn wait_every(what: &str, timeout: Duration, every: Duration, done: impl FnMut() -> bool) {
    assert!(
        poll_until(timeout, every, done),
        "timed out after {timeout:?} waiting for {what}"
    );
}

/// Polls `done` every `every` until it holds (`true`) or `timeout` passes
/// (`false`), for callers that clean up before they fail.
pub fn poll_until(timeout: Duration, every: Duration, mut done: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + timeout;
    while !done() {
        if Instant::now() >= end {
            return false;
        }
        sleep(every);
    }
    true
}

// ---------------------------------------------------------------------------
// Reading jobprof's outputs.

/// A JSON file, parsed (panics naming the file).
pub fn json(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&read(path)).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `dir/summary.json`, parsed.
pub fn summary(dir: &Path) -> serde_json::Value {
    json(&dir.join("summary.json"))
}

/// Rewrites the JSON file `path` through `edit`.
pub fn edit_json(path: &Path, edit: impl FnOnce(&mut serde_json::Value)) {
    let mut v = json(path);
    edit(&mut v);
    std::fs::write(path, serde_json::to_string_pretty(&v).unwrap()).unwrap();
}

/// `(stack, weight)` of folded text (`stack COUNT` lines; a stack seen
/// twice adds up).
pub fn parse_folded(text: &str) -> HashMap<String, u64> {
    let mut m = HashMap::new();
    // `# counts: ns` says what the counts are (`jobprof fold`).
    for l in text
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        let (stack, n) = l.rsplit_once(' ').unwrap();
        *m.entry(stack.to_string()).or_default() += n.parse::<u64>().unwrap();
    }
    m
}

/// `(stack, weight)` of a folded file.
pub fn folded(path: &Path) -> HashMap<String, u64> {
    parse_folded(&String::from_utf8(read(path)).unwrap())
}

/// Share of `a`'s weight that `b` has on the identical stack.
pub fn agreement(a: &HashMap<String, u64>, b: &HashMap<String, u64>) -> f64 {
    let total: u64 = a.values().sum();
    let same: u64 = a
        .iter()
        .map(|(s, n)| (*n).min(b.get(s).copied().unwrap_or(0)))
        .sum();
    same as f64 / total.max(1) as f64
}

/// Share of the weight on stacks with a frame (below the process-name
/// root) that satisfies `pred`.
pub fn stack_share(stacks: &HashMap<String, u64>, pred: impl Fn(&str) -> bool) -> f64 {
    let total: u64 = stacks.values().sum();
    let hit: u64 = stacks
        .iter()
        .filter(|(s, _)| s.split(';').skip(1).any(&pred))
        .map(|(_, n)| n)
        .sum();
    hit as f64 / total.max(1) as f64
}

/// `jobprof fold INPUT -o OUTPUT`, asserted to succeed; the stacks written.
pub fn fold_file(input: &Path, output: &Path) -> HashMap<String, u64> {
    let o = jobprof()
        .arg("fold")
        .arg(input)
        .arg("-o")
        .arg(output)
        .output()
        .unwrap();
    assert!(o.status.success(), "jobprof fold: {}", output_text(&o));
    folded(output)
}

/// Waits for a spawned worker's first stdout line to say `started` (the
/// test programs print it once their threads run); `what` names the worker
/// in the failure.
pub fn wait_started(child: &mut Child, what: &str) {
    use std::io::{BufRead, BufReader};
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().expect("stdout piped"))
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "started", "the worker did not start: {what}");
}

/// The outputs in `dir` as they can be compared between two runs over
/// copies of one capture at different places (`rd`): compressed ones
/// decompressed, `rd`'s path taken out of text; the summary (times, and the
/// symbol sources that are meant to differ) and the marker left out.
pub fn comparable_outputs(dir: &Path, rd: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    let at = rd.display().to_string();
    let mut out = std::collections::BTreeMap::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if name == "summary.json" || name.starts_with('.') {
            continue;
        }
        let raw = std::fs::read(&p).unwrap();
        let bytes = if name.ends_with(".zst") {
            zstd::decode_all(&raw[..]).unwrap()
        } else if name.ends_with(".gz") {
            let mut v = Vec::new();
            std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&raw[..]), &mut v)
                .unwrap();
            v
        } else {
            raw
        };
        // Text with the place taken out; binary (the profile's protobuf)
        // byte for byte.
        let bytes = match String::from_utf8(bytes) {
            Ok(text) => text.replace(&at, "RD").into_bytes(),
            Err(e) => e.into_bytes(),
        };
        out.insert(name, bytes);
    }
    out
}

/// `jobprof ARGS` as user `nobody` (permissions apply: root bypasses them).
pub fn jobprof_as_nobody(args: &[&std::ffi::OsStr]) -> Output {
    Command::new("setpriv")
        .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups"])
        .arg(env!("CARGO_BIN_EXE_jobprof"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}
