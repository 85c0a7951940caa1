//! `jobprof nsys collect|flush|plan|setup|teardown` end to end.
//!
//! Nsight Systems cannot run here, so reports come from simulated writers:
//! shell processes that create `<job>_<node>_rank<k>.nsys-rep` files and grow
//! them in bursts (pauses shorter and longer than the poll interval), appear
//! late, stay empty, or exist only in a runtime workspace. `flush` runs
//! against fake `nsight-slurm`, `squeue` and `scancel` on `PATH` that record
//! their argv, and against real Slurm steps when a test cluster is running.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use crate::util::stdout;
use crate::util::{jobprof, slurm_available, stderr};

mod flush;
mod per_query;
mod plan;
mod hostile;
mod profiles;
mod real;
mod real_profiles;
mod real_slices;
mod setup;
mod slices;
mod snapshots;
mod trend_profiles;

/// Short timings keep the suite fast; the settle window stays well above
/// the writers' longest pause so a loaded machine does not settle early.
const POLL: &str = "100ms";
const SETTLE: &str = "2s";

fn run(cmd: &mut Command) -> Output {
    let out = cmd.output().expect("run jobprof");
    eprintln!(
        "--- {:?}\nexit {:?}\nstdout:\n{}\nstderr:\n{}",
        cmd,
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn collect_cmd(root: &Path) -> Command {
    let mut c = jobprof();
    c.args(["nsys", "collect", "--report-root"])
        .arg(root)
        .args(["--poll", POLL, "--settle", SETTLE, "--timeout", "30s"]);
    c
}

fn manifest(root: &Path) -> serde_json::Value {
    let p = root.join("manifest.json");
    serde_json::from_slice(&fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
        .unwrap()
}

fn sha256_file(p: &Path) -> String {
    let bytes = fs::read(p).unwrap();
    Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The manifest entry whose path ends with `name`.
fn entry<'a>(m: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    m["reports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["path"].as_str().is_some_and(|p| p.ends_with(name)))
        .unwrap_or_else(|| panic!("no entry for {name} in {m:#}"))
}

/// A simulated nsys rank: after `delay`, creates `path` (0 bytes, as nsys
/// does when it opens the report), then appends `bursts` chunks of `chunk`
/// random bytes with the given pauses between them.
fn writer(path: &Path, delay: &str, bursts: &[(&str, u32)]) -> Child {
    let mut script = format!("set -e; sleep {delay}; mkdir -p \"$(dirname \"$1\")\"; : > \"$1\"; ");
    for (pause, kib) in bursts {
        script.push_str(&format!(
            "sleep {pause}; head -c {} /dev/urandom >> \"$1\"; ",
            kib * 1024
        ));
    }
    Command::new("sh")
        .args(["-c", &script, "writer"])
        .arg(path)
        .stdin(Stdio::null())
        .spawn()
        .expect("spawn writer")
}

fn wait_ok(mut c: Child) {
    assert!(c.wait().unwrap().success(), "a simulated writer failed");
}

#[test]
fn collect_waits_for_bursty_and_late_writers() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    let r0 = root.join("direct/900_nodeA_rank0.nsys-rep");
    let r1 = root.join("direct/900_nodeB_rank1.nsys-rep");
    // Rank 0: bursts with pauses shorter (30ms) and longer (400ms, 700ms)
    // than the 100ms poll, but shorter than the settle window.
    let w0 = writer(
        &r0,
        "0",
        &[
            ("0.03", 64),
            ("0.4", 64),
            ("0.03", 64),
            ("0.7", 64),
            ("0.4", 64),
        ],
    );
    // Rank 1 appears late and sits at 0 bytes for a while first.
    let w1 = writer(&r1, "0.8", &[("0.6", 32), ("0.05", 32)]);
    let started = Instant::now();
    let out = run(collect_cmd(root).args(["--expect-ranks", "2"]));
    let took = started.elapsed();
    wait_ok(w0);
    wait_ok(w1);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let m = manifest(root);
    assert_eq!(m["status"], "complete");
    // Settled on the final bytes: the collector never stopped mid-write.
    for (p, rank, node) in [(&r0, 0, "nodeA"), (&r1, 1, "nodeB")] {
        let name = p.file_name().unwrap().to_str().unwrap();
        let e = entry(&m, name);
        assert_eq!(e["bytes"], fs::metadata(p).unwrap().len(), "{name}");
        assert_eq!(e["sha256"], sha256_file(p), "{name}");
        assert_eq!(e["rank"], rank);
        assert_eq!(e["node"], node);
        assert_eq!(e["job"], "900");
        assert_eq!(e["source"], "direct");
        assert_eq!(e["status"], "ok");
    }
    assert_eq!(fs::metadata(&r0).unwrap().len(), 5 * 64 * 1024);
    assert!(
        took >= Duration::from_millis(1500),
        "settle window respected"
    );
    // One status line per poll, with the promised fields.
    let err = stderr(&out);
    assert!(err.contains("growing"), "{err}");
    assert!(err.contains("missing ranks 1"), "{err}");
    assert!(err.contains("settles in"), "{err}");
}

#[test]
fn collect_archive_holds_every_report_and_the_manifest() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    fs::create_dir_all(root.join("direct")).unwrap();
    fs::write(root.join("direct/1_n_rank0.nsys-rep"), b"report zero").unwrap();
    fs::write(root.join("other.nsys-rep"), b"unmatched name").unwrap();
    let out = run(collect_cmd(root).args(["--archive", "--settle", "300ms"]));
    assert_eq!(out.status.code(), Some(0));
    assert!(stdout(&out).contains("reports.tar.zst"));
    let m = manifest(root);
    assert_eq!(m["archive"], "reports.tar.zst");
    let odd = entry(&m, "other.nsys-rep");
    assert!(odd["rank"].is_null() && odd["job"].is_null() && odd["node"].is_null());
    let dec = zstd::Decoder::new(fs::File::open(root.join("reports.tar.zst")).unwrap()).unwrap();
    let mut ar = tar::Archive::new(dec);
    let mut seen = Vec::new();
    for e in ar.entries().unwrap() {
        let mut e = e.unwrap();
        let path = e.path().unwrap().display().to_string();
        let mut body = Vec::new();
        std::io::Read::read_to_end(&mut e, &mut body).unwrap();
        if path == "manifest.json" {
            let inner: serde_json::Value = serde_json::from_slice(&body).unwrap();
            assert_eq!(inner["reports"], m["reports"]);
        } else {
            assert_eq!(body, fs::read(root.join(&path)).unwrap(), "{path}");
        }
        seen.push(path);
    }
    seen.sort();
    assert_eq!(
        seen,
        [
            "direct/1_n_rank0.nsys-rep",
            "manifest.json",
            "other.nsys-rep"
        ]
    );
}

#[test]
fn collect_empty_report_exits_4_naming_it() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    fs::create_dir_all(root.join("direct")).unwrap();
    fs::write(root.join("direct/5_a_rank0.nsys-rep"), b"fine").unwrap();
    fs::write(root.join("direct/5_b_rank1.nsys-rep"), b"").unwrap();
    let out = run(collect_cmd(root).args([
        "--expect-ranks",
        "2",
        "--timeout",
        "1s",
        "--settle",
        "300ms",
    ]));
    assert_eq!(out.status.code(), Some(4));
    let err = stderr(&out);
    assert!(err.contains("timed out"), "{err}");
    assert!(err.contains("direct/5_b_rank1.nsys-rep"), "{err}");
    let m = manifest(root);
    assert_eq!(m["status"], "empty");
    assert_eq!(entry(&m, "5_b_rank1.nsys-rep")["status"], "empty");
    assert_eq!(entry(&m, "5_a_rank0.nsys-rep")["status"], "ok");
    // Never deleted or truncated.
    assert_eq!(
        fs::read(root.join("direct/5_a_rank0.nsys-rep")).unwrap(),
        b"fine"
    );
    assert!(root.join("direct/5_b_rank1.nsys-rep").exists());
}

#[test]
fn collect_missing_rank_exits_5_naming_it() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    fs::create_dir_all(root.join("direct")).unwrap();
    for k in [0, 1, 3] {
        fs::write(root.join(format!("direct/5_a_rank{k}.nsys-rep")), b"x").unwrap();
    }
    let out = run(collect_cmd(root).args(["--expect-ranks", "5", "--timeout", "1s"]));
    assert_eq!(out.status.code(), Some(5));
    let err = stderr(&out);
    assert!(err.contains("never produced a report: 2,4"), "{err}");
    let m = manifest(root);
    assert_eq!(m["status"], "missing-ranks");
    assert_eq!(m["missing_ranks"], serde_json::json!([2, 4]));
    let missing: Vec<_> = m["reports"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["status"] == "missing")
        .map(|r| r["rank"].as_u64().unwrap())
        .collect();
    assert_eq!(missing, [2, 4]);
}

#[test]
fn collect_without_any_report_exits_5() {
    let d = tempfile::tempdir().unwrap();
    let out = run(collect_cmd(d.path()).args(["--timeout", "500ms"]));
    assert_eq!(out.status.code(), Some(5));
    assert!(stderr(&out).contains("no *.nsys-rep report appeared"));
}

#[test]
fn collect_still_growing_at_timeout_exits_3_naming_it() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    let p = root.join("direct/8_n_rank0.nsys-rep");
    // Keeps writing for longer than the timeout.
    let bursts: Vec<(&str, u32)> = (0..40).map(|_| ("0.1", 4)).collect();
    let mut w = writer(&p, "0", &bursts);
    let out = run(collect_cmd(root).args(["--timeout", "1s", "--settle", "3s"]));
    let _ = w.kill();
    let _ = w.wait();
    assert_eq!(out.status.code(), Some(3));
    let err = stderr(&out);
    assert!(err.contains("still being written"), "{err}");
    assert!(err.contains("direct/8_n_rank0.nsys-rep"), "{err}");
    assert_eq!(manifest(root)["status"], "timeout");
    assert_eq!(
        entry(&manifest(root), "8_n_rank0.nsys-rep")["status"],
        "incomplete"
    );
}

#[test]
fn collect_rescues_reports_from_runtime_dirs() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("reports");
    let rt = d.path().join("runtime-rank1");
    fs::create_dir_all(root.join("direct")).unwrap();
    fs::write(root.join("direct/3_a_rank0.nsys-rep"), b"rank zero").unwrap();
    // Rank 1 only writes into its container-local workspace, in bursts.
    let src = rt.join("ws/3_b_rank1.nsys-rep");
    let w = writer(&src, "0.2", &[("0.3", 16), ("0.5", 16)]);
    let out = run(collect_cmd(&root)
        .arg("--runtime-dir")
        .arg(&rt)
        .args(["--expect-ranks", "2"]));
    wait_ok(w);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let copy = root.join("rescued/ws/3_b_rank1.nsys-rep");
    assert_eq!(fs::read(&copy).unwrap(), fs::read(&src).unwrap());
    assert_eq!(
        fs::metadata(&src).unwrap().len(),
        32 * 1024,
        "source untouched"
    );
    let m = manifest(&root);
    let e = entry(&m, "3_b_rank1.nsys-rep");
    assert_eq!(e["source"], "rescued");
    assert_eq!(e["path"], "rescued/ws/3_b_rank1.nsys-rep");
    assert_eq!(e["origin"], src.display().to_string());
    assert_eq!(e["sha256"], sha256_file(&src));
    assert!(stderr(&out).contains("rescued "));
    // No temporary copies left behind.
    let names: Vec<_> = fs::read_dir(copy.parent().unwrap()).unwrap().collect();
    assert_eq!(names.len(), 1);
}

#[test]
fn collect_since_baseline_ignores_reports_that_existed() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    fs::create_dir_all(root.join("direct")).unwrap();
    fs::write(root.join("direct/111_old_rank0.nsys-rep"), b"last week's").unwrap();
    let w = writer(
        &root.join("direct/222_new_rank0.nsys-rep"),
        "0.3",
        &[("0.1", 8)],
    );
    let out = run(collect_cmd(root).args(["--since-baseline", "--expect-ranks", "1"]));
    wait_ok(w);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let m = manifest(root);
    assert_eq!(m["report_count"], 1);
    assert_eq!(m["baseline_ignored"], 1);
    entry(&m, "222_new_rank0.nsys-rep");
    assert_eq!(
        fs::read(root.join("direct/111_old_rank0.nsys-rep")).unwrap(),
        b"last week's"
    );
}

/// True while some process holds the collector lock on `root`.
fn lock_is_held(root: &Path) -> bool {
    use std::os::unix::io::AsRawFd;
    let Ok(f) = fs::File::open(root.join(".jobprof-nsys.lock")) else {
        return false;
    };
    // SAFETY: flock on a descriptor we own.
    let rc = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    rc != 0 // dropping `f` releases our lock if we got it
}

#[test]
fn two_collectors_at_once_the_second_waits_and_sees_the_first_result() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    let p = root.join("direct/4_n_rank0.nsys-rep");
    let w = writer(&p, "0", &[("0.2", 32), ("0.4", 32)]);
    let first = collect_cmd(root)
        .args(["--expect-ranks", "1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t = Instant::now();
    while !lock_is_held(root) {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "first collector never locked"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let second = run(collect_cmd(root).args(["--expect-ranks", "1"]));
    let first = first.wait_with_output().unwrap();
    wait_ok(w);
    assert_eq!(first.status.code(), Some(0), "{}", stderr(&first));
    assert_eq!(second.status.code(), Some(0), "{}", stderr(&second));
    assert!(
        stderr(&second).contains("waiting for it"),
        "{}",
        stderr(&second)
    );
    assert!(
        stdout(&second).contains("result of the collector this one waited for"),
        "{}",
        stdout(&second)
    );
    let m = manifest(root);
    assert_eq!(entry(&m, "4_n_rank0.nsys-rep")["bytes"], 64 * 1024);
    assert_eq!(entry(&m, "4_n_rank0.nsys-rep")["sha256"], sha256_file(&p));
}

#[test]
fn collect_gives_up_on_a_lock_held_past_the_timeout() {
    use std::os::unix::io::AsRawFd;
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    fs::write(root.join("1_n_rank0.nsys-rep"), b"x").unwrap();
    let held = fs::File::create(root.join(".jobprof-nsys.lock")).unwrap();
    // SAFETY: flock on a descriptor we own; released when `held` drops.
    assert_eq!(unsafe { libc::flock(held.as_raw_fd(), libc::LOCK_EX) }, 0);
    let out = run(collect_cmd(root).args(["--timeout", "500ms"]));
    drop(held);
    assert_eq!(out.status.code(), Some(3));
    let err = stderr(&out);
    assert!(err.contains("another collector held"), "{err}");
    assert!(err.contains(".jobprof-nsys.lock"), "{err}");
    assert!(
        !root.join("manifest.json").exists(),
        "the holder owns the manifest"
    );
}

#[test]
fn collect_refuses_a_link_planted_where_its_lock_goes() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("reports");
    fs::create_dir(&root).unwrap();
    fs::write(root.join("1_n_rank0.nsys-rep"), b"x").unwrap();
    let target = d.path().join("victim");
    fs::write(&target, b"keep").unwrap();
    std::os::unix::fs::symlink(&target, root.join(".jobprof-nsys.lock")).unwrap();
    let out = run(&mut collect_cmd(&root));
    assert_ne!(out.status.code(), Some(0));
    let err = stderr(&out);
    assert!(
        err.contains(".jobprof-nsys.lock") && err.contains("symbolic link"),
        "{err}"
    );
    assert_eq!(
        fs::read(&target).unwrap(),
        b"keep",
        "written through the link"
    );
    assert!(!root.join("manifest.json").exists());
}

#[test]
fn collect_rejects_bad_durations_and_roots_with_exit_2() {
    let d = tempfile::tempdir().unwrap();
    let out = run(jobprof()
        .args(["nsys", "collect", "--report-root"])
        .arg(d.path())
        .args(["--settle", "5x"]));
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--settle"));
    assert!(stderr(&out).contains("500ms, 20s, 2m"));
    let out = run(jobprof()
        .args(["nsys", "collect", "--report-root"])
        .arg(d.path().join("absent")));
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("absent"));
}

// ---------------------------------------------------------------- flush

/// A directory of fake Slurm and nsight-slurm commands that append their argv
/// (one line per call, words separated by spaces) to `calls.log`. `scancel`
/// sends SIGTERM to the process whose PID the test left in `steps/<id>.pid`.
struct Fakes {
    dir: PathBuf,
}

impl Fakes {
    fn new(base: &Path, squeue_output: &str, squeue_exit: i32) -> Fakes {
        let dir = base.join("fakebin");
        fs::create_dir_all(dir.join("steps")).unwrap();
        let log = dir.join("calls.log");
        let script = |name: &str, body: &str| {
            let p = dir.join(name);
            fs::write(
                &p,
                format!(
                    "#!/bin/sh\necho \"{name} $*\" >> '{}'\n{body}\n",
                    log.display()
                ),
            )
            .unwrap();
            make_executable(&p);
        };
        // `squeue -s ...` lists steps; any other call looks up a job
        // (`squeue-job.out`, written by tests that need it).
        fs::write(dir.join("squeue.out"), squeue_output).unwrap();
        script(
            "squeue",
            &format!(
                "if [ \"$1\" = -s ]; then cat '{0}/squeue.out'; exit {squeue_exit}; fi\n\
                 cat '{0}/squeue-job.out'",
                dir.display()
            ),
        );
        script(
            "scancel",
            &format!(
                "step=\"$2\"\nkill -TERM \"$(cat '{}/steps/'\"$step\".pid)\"",
                dir.display()
            ),
        );
        fs::create_dir_all(dir.join("home/bin")).unwrap();
        script("nsight-slurm", "exit 0");
        fs::rename(dir.join("nsight-slurm"), dir.join("home/bin/nsight-slurm")).unwrap();
        Fakes { dir }
    }

    fn path_env(&self) -> std::ffi::OsString {
        let mut p = self.dir.clone().into_os_string();
        p.push(":");
        p.push(std::env::var_os("PATH").unwrap_or_default());
        p
    }

    fn calls(&self) -> Vec<String> {
        fs::read_to_string(self.dir.join("calls.log"))
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// A connector step: sleeps until SIGTERM, then writes its rank's report
    /// in bursts, like nsys at the end of its session.
    fn connector(&self, step: &str, report: &Path) -> Child {
        let script = "trap 'mkdir -p \"$(dirname \"$1\")\"; : > \"$1\"; sleep 0.3; \
                      head -c 40000 /dev/urandom >> \"$1\"; sleep 0.4; \
                      head -c 40000 /dev/urandom >> \"$1\"; exit 0' TERM; \
                      while :; do sleep 0.05; done";
        let child = Command::new("sh")
            .args(["-c", script, "connector"])
            .arg(report)
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        fs::write(
            self.dir.join(format!("steps/{step}.pid")),
            child.id().to_string(),
        )
        .unwrap();
        child
    }
}

/// Makes `path` executable (mode 0755).
fn make_executable(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(path, fs::Permissions::from_mode(0o755)).unwrap();
}

/// Submits the batch script `batch` to the real cluster as a one-node job
/// named `name`, its output in `dir/slurm-JOBID.out`; returns the job id.
fn sbatch(name: &str, dir: &Path, batch: &Path) -> String {
    let job = sh(&format!(
        "sbatch --parsable -J {name} -N1 -n1 -t 5 -o '{}/slurm-%j.out' '{}'",
        dir.display(),
        batch.display()
    ));
    job.split(';').next().unwrap().to_string()
}

/// Waits up to `secs` seconds for `started` (a step of `job` running); the
/// failure shows the job's steps and its output in `dir`.
fn wait_started(what: &str, job: &str, dir: &Path, secs: u64, started: impl Fn() -> bool) {
    let t = Instant::now();
    while !started() {
        assert!(
            t.elapsed() < Duration::from_secs(secs),
            "{what} of job {job} never started: {} {}",
            sh(&format!("squeue -j {job} -s -t all || true")),
            fs::read_to_string(dir.join(format!("slurm-{job}.out"))).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn sh(cmd: &str) -> String {
    let o = Command::new("sh").args(["-c", cmd]).output().unwrap();
    assert!(
        o.status.success(),
        "{cmd}: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// The flush of the real `job` (cancelled here) succeeded, signalled its
/// connector step by name, and collected the step's one report (rank 0,
/// 100,000 bytes) into the manifest under `root`; returns that entry.
fn flushed_one_report(out: &Output, job: &str, root: &Path) -> serde_json::Value {
    let _ = Command::new("scancel").arg(job).status();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(out));
    let err = stderr(out);
    assert!(err.contains("scancel --signal=TERM"), "{err}");
    let m = manifest(root);
    assert_eq!(m["report_count"], 1, "{m:#}");
    let e = m["reports"][0].clone();
    assert_eq!(e["job"], job);
    assert_eq!(e["rank"], 0);
    assert_eq!(e["bytes"], 100_000);
    e
}

/// Depth of the deep trees: 2 bytes a level, past PATH_MAX (4096).
const DEEP: usize = 2100;

/// Makes `DEEP` nested directories `d/d/...` under `base` (one
/// `mkdirat` at a time, so no path is ever too long) with `bytes` written
/// to `name` at the bottom.
fn deep_report(base: &Path, name: &str, bytes: &str) {
    use std::io::Write;
    fs::create_dir_all(base).unwrap();
    let mut dir = jobprof::sys::confined::Dir::open(base).unwrap();
    for _ in 0..DEEP {
        dir = dir.sub_create("d").unwrap();
    }
    let mut f = dir
        .open_at(name, libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL, 0o644)
        .unwrap();
    f.write_all(bytes.as_bytes()).unwrap();
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[test]
fn collect_finds_rescues_and_archives_reports_deeper_than_path_max_in_time() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("reports");
    let rt = d.path().join("runtime-rank1");
    deep_report(&root, "5_a_rank0.nsys-rep", "rank zero, deep");
    deep_report(&rt, "5_b_rank1.nsys-rep", "rank one, deep in its workspace");
    let started = Instant::now();
    let out = run(jobprof()
        .args(["nsys", "collect", "--report-root"])
        .arg(&root)
        .arg("--runtime-dir")
        .arg(&rt)
        .args(["--expect-ranks", "2", "--archive", "--poll", POLL])
        .args(["--settle", "500ms", "--timeout", "20s"]));
    let took = started.elapsed();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // Before the walk by descriptor: 193 s, then exit 2 "File name too long".
    assert!(took < Duration::from_secs(60), "took {took:?}");
    let m = manifest(&root);
    assert_eq!(m["status"], "complete");
    assert_eq!(m["scan_incomplete"], false);
    let deep = "d/".repeat(DEEP);
    let e0 = entry(&m, "5_a_rank0.nsys-rep");
    assert_eq!(e0["path"], format!("{deep}5_a_rank0.nsys-rep"));
    assert_eq!(e0["sha256"], sha256_hex(b"rank zero, deep"));
    let e1 = entry(&m, "5_b_rank1.nsys-rep");
    assert_eq!(e1["source"], "rescued");
    assert_eq!(e1["path"], format!("rescued/{deep}5_b_rank1.nsys-rep"));
    assert_eq!(e1["sha256"], sha256_hex(b"rank one, deep in its workspace"));
    // The archive holds both deep reports under their long names.
    let file = fs::File::open(root.join("reports.tar.zst")).unwrap();
    let mut tar = tar::Archive::new(zstd::Decoder::new(file).unwrap());
    let mut names: Vec<String> = tar
        .entries()
        .unwrap()
        .map(|e| e.unwrap().path().unwrap().display().to_string())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            format!("{deep}5_a_rank0.nsys-rep"),
            "manifest.json".to_string(),
            format!("rescued/{deep}5_b_rank1.nsys-rep"),
        ]
    );
}

#[test]
fn a_scan_past_the_timeout_ends_with_the_timeout_outcome_and_a_manifest() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("reports");
    deep_report(&root, "6_a_rank0.nsys-rep", "deep");
    // Walking 2,100 directories takes far longer than 1ms: the scan is cut.
    let out = run(jobprof()
        .args(["nsys", "collect", "--report-root"])
        .arg(&root)
        .args(["--expect-ranks", "1", "--poll", POLL, "--settle", "500ms"])
        .args(["--timeout", "1ms"]));
    assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));
    let m = manifest(&root);
    assert_eq!(m["scan_incomplete"], true);
    assert_eq!(m["status"], "missing-ranks");
    assert!(
        stderr(&out).contains("did not finish before the timeout"),
        "{}",
        stderr(&out)
    );
}
