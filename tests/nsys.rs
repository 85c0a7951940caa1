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

use crate::util::require;
use crate::util::stdout;
use crate::util::{jobprof, slurm_available, stderr};

mod per_query;
mod profiles;
mod real;
mod real_profiles;
mod setup;
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

#[test]
fn flush_stops_sessions_signals_connectors_and_collects() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("reports");
    fs::create_dir_all(root.join("direct")).unwrap();
    // A report of an earlier job: the baseline ignores it.
    fs::write(root.join("direct/76_old_rank0.nsys-rep"), b"old job").unwrap();
    let fakes = Fakes::new(
        d.path(),
        "77.0|batch\n77.1|nsight-slurm-connector\n77.2|nsight-slurm-connector\n77.3|worker\n",
        0,
    );
    let c1 = fakes.connector("77.1", &root.join("direct/77_n1_rank0.nsys-rep"));
    let c2 = fakes.connector("77.2", &root.join("direct/77_n2_rank1.nsys-rep"));
    let out = run(jobprof()
        .env("PATH", fakes.path_env())
        .args(["nsys", "flush", "--job", "77", "--report-root"])
        .arg(&root)
        .arg("--nsight-slurm")
        .arg(fakes.dir.join("home"))
        .args([
            "--expect-ranks",
            "2",
            "--poll",
            POLL,
            "--settle",
            SETTLE,
            "--timeout",
            "30s",
        ]));
    wait_ok(c1);
    wait_ok(c2);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        fakes.calls(),
        [
            "nsight-slurm stop --job 77 --timeout 30",
            "squeue -s -j 77 -h -o %i|%j",
            "scancel --signal=TERM 77.1",
            "scancel --signal=TERM 77.2",
        ]
    );
    let m = manifest(&root);
    assert_eq!(m["report_count"], 2, "{m:#}");
    for k in [0, 1] {
        let name = format!("77_n{}_rank{k}.nsys-rep", k + 1);
        let e = entry(&m, &name);
        assert_eq!(e["bytes"], 80_000);
        assert_eq!(e["sha256"], sha256_file(&root.join("direct").join(&name)));
    }
    let err = stderr(&out);
    for logged in [
        "running: ",
        "nsight-slurm stop --job 77 --timeout 30",
        "squeue -s -j 77 -h -o '%i|%j'",
        "scancel --signal=TERM 77.1",
        "exited 0",
    ] {
        assert!(err.contains(logged), "log lacks {logged:?}:\n{err}");
    }
}

#[test]
fn flush_goes_on_when_commands_fail_and_keeps_this_jobs_reports() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("reports");
    fs::create_dir_all(root.join("direct")).unwrap();
    // Written while `nsight-slurm stop` ran: before the baseline, but this
    // job's own report, so it is collected.
    fs::write(root.join("direct/78_n_rank0.nsys-rep"), b"already there").unwrap();
    let fakes = Fakes::new(
        d.path(),
        "slurm_load_jobs error: Invalid job id specified\n",
        1,
    );
    let out = run(jobprof()
        .env("PATH", fakes.path_env())
        .args(["nsys", "flush", "--job", "78", "--report-root"])
        .arg(&root)
        .args(["--nsight-slurm", "/nonexistent/nsight-slurm"])
        .args(["--poll", POLL, "--settle", "300ms", "--timeout", "10s"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("could not start /nonexistent/nsight-slurm"),
        "{err}"
    );
    assert!(err.contains("Invalid job id specified"), "{err}");
    assert_eq!(fakes.calls(), ["squeue -s -j 78 -h -o %i|%j"], "no scancel");
    entry(&manifest(&root), "78_n_rank0.nsys-rep");
}

#[test]
fn flush_resolves_an_array_task_to_its_job_id() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("reports");
    fs::create_dir_all(root.join("direct")).unwrap();
    let fakes = Fakes::new(d.path(), "80.0|nsight-slurm-connector\n", 0);
    fs::write(fakes.dir.join("squeue-job.out"), "vm|RUNNING|80\n").unwrap();
    // Task 79_1 runs as job 80: its report, present before the flush, is
    // this job's own and therefore not baselined away.
    fs::write(root.join("direct/80_vm_rank0.nsys-rep"), b"x").unwrap();
    let c = fakes.connector("80.0", &root.join("direct/80_vm_rank1.nsys-rep"));
    let out = run(jobprof()
        .env("PATH", fakes.path_env())
        .args(["nsys", "flush", "--job", "79_1", "--report-root"])
        .arg(&root)
        .args([
            "--expect-ranks",
            "2",
            "--poll",
            POLL,
            "--settle",
            SETTLE,
            "--timeout",
            "30s",
        ]));
    wait_ok(c);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        fakes.calls(),
        [
            "squeue -j 79_1 -t all -h -o %N|%T|%A",
            "squeue -s -j 80 -h -o %i|%j",
            "scancel --signal=TERM 80.0",
        ]
    );
    assert!(stderr(&out).contains("array task 79_1 runs as job 80"));
    assert_eq!(manifest(&root)["report_count"], 2);
}

#[test]
fn flush_rejects_a_bad_job_id_before_running_anything() {
    let d = tempfile::tempdir().unwrap();
    let fakes = Fakes::new(d.path(), "", 0);
    let out = run(jobprof()
        .env("PATH", fakes.path_env())
        .args(["nsys", "flush", "--job", "77;true", "--report-root"])
        .arg(d.path()));
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("is not a Slurm job id"),
        "{}",
        stderr(&out)
    );
    assert!(fakes.calls().is_empty());
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

#[test]
fn flush_against_real_slurm_steps() {
    if !require(
        slurm_available(),
        "a running Slurm cluster (scripts/slurm-cluster.sh start)",
    ) {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("reports");
    fs::create_dir_all(root.join("direct")).unwrap();
    // The connector step: a stand-in for nsys that writes its report only
    // after SIGTERM, in two bursts, named like the launch pattern.
    let connector = d.path().join("connector.sh");
    fs::write(
        &connector,
        format!(
            "#!/bin/sh\n\
             out='{}'/\"${{SLURM_JOB_ID}}_${{SLURMD_NODENAME}}_rank${{SLURM_PROCID}}.nsys-rep\"\n\
             trap ': > \"$out\"; sleep 0.5; head -c 50000 /dev/urandom >> \"$out\"; sleep 0.5; \
             head -c 50000 /dev/urandom >> \"$out\"; exit 0' TERM\n\
             touch '{}'/connector-started\n\
             while :; do sleep 0.1; done\n",
            root.join("direct").display(),
            d.path().display()
        ),
    )
    .unwrap();
    let batch = d.path().join("job.sh");
    fs::write(
        &batch,
        format!(
            "#!/bin/sh\n\
             srun --overlap -n1 -J nsight-slurm-connector '{}' &\n\
             wait\n",
            connector.display()
        ),
    )
    .unwrap();
    make_executable(&connector);
    make_executable(&batch);
    let job = sbatch("jobprof-nsys-flush", d.path(), &batch);
    // Wait for the connector step to run.
    let started = d.path().join("connector-started");
    wait_started("connector step", &job, d.path(), 60, || started.exists());
    let out = run(jobprof()
        .args(["nsys", "flush", "--job", &job, "--report-root"])
        .arg(&root)
        .args([
            "--expect-ranks",
            "1",
            "--poll",
            POLL,
            "--settle",
            SETTLE,
            "--timeout",
            "60s",
        ]));
    let e = flushed_one_report(&out, &job, &root);
    assert_eq!(e["status"], "ok");
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

// ---------------------------------------------------------------- plan

const BASE: &str = r#"
type = "nsight-slurm"
home = "/opt/nsight-slurm"
backend = "trtllm"
log_dir = "/shared/run1"
#TOP

[launch]
srun_options = ["--nodes=2", "--ntasks-per-node=4"]
command = ["python", "serve.py", "--port", "8000"]
#LAUNCH
"#;

/// Runs `plan` on BASE without the lines starting with a `drop` entry, with
/// `top` replacing the `#TOP` line and `launch` appended to `[launch]`.
fn plan_with(top: &str, launch: &str, drop: &[&str], extra_args: &[&str]) -> Output {
    let d = tempfile::tempdir().unwrap();
    // Lines are dropped from BASE before `top` and `launch` go in.
    let text = BASE
        .lines()
        .filter(|l| !drop.iter().any(|d| l.starts_with(d)))
        .collect::<Vec<_>>()
        .join("\n")
        .replace("#TOP", top)
        .replace("#LAUNCH", launch);
    let cfg = d.path().join("profiling.toml");
    fs::write(&cfg, text).unwrap();
    let mut c = jobprof();
    c.args(["nsys", "plan", "--config"])
        .arg(&cfg)
        .args(extra_args);
    run(&mut c)
}

fn plan_json(top: &str, launch: &str, drop: &[&str]) -> serde_json::Value {
    let out = plan_with(top, launch, drop, &["--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Asserts the config fails with exit 2 and a message containing each of `needles`.
fn plan_fails(top: &str, launch: &str, drop: &[&str], needles: &[&str]) {
    let out = plan_with(top, launch, drop, &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    let err = stderr(&out);
    assert!(err.contains("profiling.toml"), "{err}");
    for n in needles {
        assert!(err.contains(n), "message lacks {n:?}:\n{err}");
    }
}

#[test]
fn plan_builds_the_nsight_slurm_launcher() {
    let p = plan_json(
        r#"tool_options = ["--trace=cuda,nvtx", "--sample=none"]
container_mounts = ["/data:/data", "/models:/models:ro"]"#,
        r#"srun_options = ["--nodes=2", "--container-mounts=/scratch:/scratch", "--ntasks-per-node=4"]
env = { HF_HOME = "/data/hf" }"#,
        &["srun_options"],
    );
    // No container image: only the user's mounts, merged into one option.
    assert_eq!(
        p["launcher"],
        serde_json::json!([
            "/opt/nsight-slurm/bin/nsight-slurm",
            "srun",
            "--nodes=2",
            "--container-mounts=/scratch:/scratch,/data:/data,/models:/models:ro",
            "--ntasks-per-node=4",
            "--",
            "python",
            "serve.py",
            "--port",
            "8000"
        ])
    );
    let pattern =
        "/shared/run1/nsight-slurm-direct/%q{SLURM_JOB_ID}_%q{SLURMD_NODENAME}_rank%q{SLURM_PROCID}";
    assert_eq!(
        p["tool_options"],
        serde_json::json!([
            "--trace=cuda,nvtx",
            "--sample=none",
            "--wait=primary",
            "-o",
            pattern
        ])
    );
    assert_eq!(p["report_output"], format!("{pattern}.nsys-rep"));
    assert_eq!(p["type"], "nsight-slurm");
    assert_eq!(p["mode"], "cuda-api");
    assert_eq!(p["tool"], "/usr/local/bin/nsys");
    let env = &p["environment"];
    assert_eq!(env["HF_HOME"], "/data/hf");
    assert_eq!(env["TLLM_PROFILE_LOG_RANKS"], "all");
    assert_eq!(env["DYN_ENABLE_RUST_NVTX"], "1");
    assert_eq!(env["SLURM_SUBMIT_DIR"], "/shared/run1");
    assert!(env.get("NVTX_INJECTION64_PATH").is_none());
    // The wrapper gets its settings through its own CLI, not variables.
    assert!(env
        .as_object()
        .unwrap()
        .keys()
        .all(|k| !k.starts_with("NSIGHT_SLURM")));
    assert_eq!(p["dirs"]["workspace"], "/shared/run1/nsight-slurm-reports");
    assert_eq!(p["dirs"]["direct"], "/shared/run1/nsight-slurm-direct");
    assert_eq!(p["dirs"]["runtime"], "/shared/run1/nsight-slurm-runtime");
    assert_eq!(p["dirs"]["wrapper_log"], "/shared/run1/nsight-slurm.out");
    let w = "/opt/nsight-slurm/bin/nsight-slurm";
    assert_eq!(
        p["setup"],
        serde_json::json!([
            [w, "configure", "tool-path", "/usr/local/bin/nsys"],
            [w, "configure", "tool-command", "profile"],
            [w, "configure", "profiling-mode", "cuda-api"],
            [
                w,
                "configure",
                "tool-options",
                format!("--trace=cuda,nvtx --sample=none --wait=primary -o {pattern}")
            ],
            [
                w,
                "configure",
                "report-output",
                "/shared/run1/nsight-slurm-reports"
            ],
            [w, "coordinator", "start"]
        ])
    );
    assert_eq!(
        p["teardown"],
        serde_json::json!([[w, "coordinator", "stop", "--force"]])
    );
    let argv: Vec<&str> = p["launcher"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(argv.iter().all(|a| !a.starts_with("--export")));
}

#[test]
fn plan_in_a_container_mounts_what_the_connector_needs_in_one_option() {
    let p = plan_json(
        r#"container_mounts = ["/data:/data"]
nvtx_injection_path = "/opt/nvtx/libinj.so""#,
        r#"srun_options = ["--container-image=/img/trtllm.sqsh", "--container-mounts", "/scratch:/scratch"]"#,
        &["srun_options"],
    );
    let mounts = "--container-mounts=/scratch:/scratch,/data:/data,\
                  /opt/nsight-slurm:/opt/nsight-slurm:ro,\
                  /opt/nsight-slurm/bin/nsight-slurm-connector:/usr/local/bin/nsight-slurm-connector:ro,\
                  /shared/run1:/shared/run1,\
                  /shared/run1/nsight-slurm-runtime:/nsrt";
    assert_eq!(
        p["launcher"],
        serde_json::json!([
            "/opt/nsight-slurm/bin/nsight-slurm",
            "srun",
            "--container-image=/img/trtllm.sqsh",
            mounts,
            "--",
            "python",
            "serve.py",
            "--port",
            "8000"
        ])
    );
    assert_eq!(
        p["environment"]["NVTX_INJECTION64_PATH"],
        "/opt/nvtx/libinj.so"
    );
    plan_fails(
        r#"nvtx_injection_path = "libinj.so""#,
        "",
        &[],
        &["nvtx_injection_path: `libinj.so` must be an absolute path"],
    );
    plan_fails(
        "",
        r#"env = { DYN_ENABLE_RUST_NVTX = "0", TLLM_PROFILE_LOG_RANKS = "0" }"#,
        &[],
        &[
            "launch.env: `DYN_ENABLE_RUST_NVTX` is set by jobprof",
            "launch.env: `TLLM_PROFILE_LOG_RANKS` is set by jobprof",
        ],
    );
}

#[test]
fn plan_default_tool_options_and_wait_primary() {
    let p = plan_json("", "", &[]);
    let opts: Vec<&str> = p["tool_options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(
        opts[..5],
        [
            "--trace=cuda,nvtx",
            "--cuda-graph-trace=node",
            "--sample=none",
            "--cpuctxsw=none",
            "--wait=primary"
        ]
    );
    plan_fails(
        r#"tool_options = ["--wait=all"]"#,
        "",
        &[],
        &["`--wait=all` sets --wait", "--wait=primary"],
    );
    // A user's set replaces the default.
    let p = plan_json(r#"tool_options = "--trace=cuda""#, "", &[]);
    assert_eq!(p["tool_options"][0], "--trace=cuda");
    assert_eq!(p["tool_options"][1], "--wait=primary");
}

#[test]
fn plan_dry_run_prints_the_profiling_panel() {
    let out = plan_with(r#"windows = ["100-150"]"#, "", &[], &["--dry-run"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let s = stdout(&out);
    assert!(s.starts_with("Profiling\n"), "{s}");
    for field in [
        "type ",
        "nsight-slurm",
        "mode ",
        "cuda-api (backend trtllm)",
        "windows ",
        "iterations 100-150",
        "launcher ",
        "/opt/nsight-slurm/bin/nsight-slurm srun --nodes=2",
        "tool options ",
        "--wait=primary -o ",
        "report output ",
        "_rank%q{SLURM_PROCID}.nsys-rep",
        "workspace ",
        "/shared/run1/nsight-slurm-reports",
        "environment ",
        "TLLM_PROFILE_START_STOP=100-150",
        "setup ",
        "nsight-slurm coordinator start",
        "teardown ",
        "coordinator stop --force",
    ] {
        assert!(s.contains(field), "panel lacks {field:?}:\n{s}");
    }
    // Without flags: one shell-ready command line.
    let out = plan_with("", "", &[], &[]);
    let line = stdout(&out);
    assert!(
        line.starts_with("env DYN_ENABLE_RUST_NVTX=1 SLURM_SUBMIT_DIR=/shared/run1 "),
        "{line}"
    );
    assert!(line.contains(" /opt/nsight-slurm/bin/nsight-slurm srun --nodes=2 --ntasks-per-node=4 -- python serve.py --port 8000"), "{line}");
}

#[test]
fn plan_rule_type() {
    plan_fails("", "", &["type"], &["type"]);
    let out = plan_with("", "", &[], &[]);
    assert_eq!(out.status.code(), Some(0));
    let d = tempfile::tempdir().unwrap();
    let cfg = d.path().join("profiling.toml");
    fs::write(&cfg, BASE.replace("\"nsight-slurm\"", "\"vtune\"")).unwrap();
    let out = run(jobprof().args(["nsys", "plan", "--config"]).arg(&cfg));
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("vtune") && stderr(&out).contains("nsight-slurm"));
}

#[test]
fn plan_rule_home_required_and_absolute() {
    plan_fails("", "", &["home"], &["home: required"]);
    let p = |home: &str| format!("home = \"{home}\"");
    plan_fails(
        &p("opt/ns"),
        "",
        &["home"],
        &["home: `opt/ns` must be an absolute path"],
    );
    assert_eq!(
        plan_json(&p("/usr/ns"), "", &["home"])["launcher"][0],
        "/usr/ns/bin/nsight-slurm"
    );
}

#[test]
fn plan_rule_home_only_for_nsight_slurm() {
    let nsys = r#"type = "nsys""#;
    plan_fails(
        nsys,
        "",
        &["type"],
        &["home: only applies to type = \"nsight-slurm\""],
    );
    let p = plan_json(nsys, "", &["type", "home"]);
    assert_eq!(p["launcher"][0], "srun");
    let argv = p["launcher"].as_array().unwrap();
    let dashdash = argv.iter().position(|a| a == "--").unwrap();
    assert_eq!(argv[dashdash + 1], "/usr/local/bin/nsys");
    assert_eq!(argv[dashdash + 2], "profile");
    assert!(argv.contains(&serde_json::json!("--capture-range=cudaProfilerApi")));
}

#[test]
fn plan_rule_profiling_mode_values() {
    plan_fails(
        r#"profiling_mode = "sometimes""#,
        "",
        &[],
        &["sometimes", "at-launch"],
    );
    for mode in ["at-launch", "manual", "cuda-api"] {
        let p = plan_json(&format!("profiling_mode = \"{mode}\""), "", &[]);
        assert_eq!(p["mode"], mode);
    }
}

#[test]
fn plan_rule_cuda_api_requires_trtllm() {
    plan_fails(
        "",
        "",
        &["backend"],
        &["cuda-api\" (the default) requires backend = \"trtllm\""],
    );
    plan_fails(
        r#"backend = "vllm""#,
        "",
        &["backend"],
        &["backend = \"vllm\""],
    );
    assert_eq!(
        plan_json(r#"profiling_mode = "at-launch""#, "", &["backend"])["mode"],
        "at-launch"
    );
    assert_eq!(plan_json("", "", &[])["backend"], "trtllm");
}

#[test]
fn plan_rule_connector_owned_tool_options() {
    for (opt, flag) in [
        ("-o", "-o"),
        ("-oreport", "-o"),
        ("--output=/x", "--output"),
        ("--force-overwrite=true", "--force-overwrite"),
        ("-c", "-c"),
        ("--capture-range=cudaProfilerApi", "--capture-range"),
        ("--capture-range-end=stop", "--capture-range-end"),
        ("--start-later=true", "--start-later"),
    ] {
        plan_fails(
            &format!("tool_options = [\"{opt}\", \"x\"]"),
            "",
            &[],
            &[&format!(
                "tool_options: `{opt}` sets {flag}, which the connector owns: "
            )],
        );
    }
    // One string is split at whitespace and checked the same way.
    plan_fails(
        r#"tool_options = "--trace=cuda -o out""#,
        "",
        &[],
        &["`-o` sets -o"],
    );
    let p = plan_json(
        r#"tool_options = "--trace=cuda,nvtx --cuda-memory-usage=true""#,
        "",
        &[],
    );
    assert_eq!(p["tool_options"][0], "--trace=cuda,nvtx");
    assert_eq!(p["tool_options"][1], "--cuda-memory-usage=true");
}

#[test]
fn plan_rule_container_mounts() {
    plan_fails(
        r#"container_mounts = ["data:/data"]"#,
        "",
        &[],
        &["container_mounts: `data:/data`"],
    );
    plan_fails(
        "",
        r#"srun_options = ["--container-mounts", "/a:/a,rel:/b"]"#,
        &["srun_options"],
        &["`rel:/b`"],
    );
    let p = plan_json(
        r#"container_mounts = ["/a:/a"]"#,
        r#"srun_options = ["--container-mounts", "/b:/b", "--container-mounts=/a:/a,/c:/c"]"#,
        &["srun_options"],
    );
    assert_eq!(
        p["launcher"],
        serde_json::json!([
            "/opt/nsight-slurm/bin/nsight-slurm",
            "srun",
            "--container-mounts=/b:/b,/a:/a,/c:/c",
            "--",
            "python",
            "serve.py",
            "--port",
            "8000"
        ])
    );
}

#[test]
fn plan_rule_log_dir_required_and_absolute() {
    plan_fails("", "", &["log_dir"], &["log_dir: required"]);
    plan_fails(
        r#"log_dir = "runs/1""#,
        "",
        &["log_dir"],
        &["log_dir: `runs/1` must be an absolute path"],
    );
    plan_fails(
        r#"log_dir = "/runs/a b""#,
        "",
        &["log_dir"],
        &["log_dir: `/runs/a b` contains whitespace"],
    );
    plan_fails(
        r#"log_dir = "/runs/a,b""#,
        "",
        &["log_dir"],
        &["log_dir: `/runs/a,b` contains `,` or `:`"],
    );
    plan_fails(
        r#"report_root = "/r""#,
        "",
        &[],
        &["report_root: replaced by log_dir"],
    );
    assert!(
        plan_json(r#"log_dir = "/r""#, "", &["log_dir"])["report_output"]
            .as_str()
            .unwrap()
            .starts_with("/r/nsight-slurm-direct/")
    );
    // Plain nsys writes to <log_dir>/nsys-direct.
    let p = plan_json(r#"type = "nsys""#, "", &["type", "home"]);
    assert!(p["report_output"]
        .as_str()
        .unwrap()
        .starts_with("/shared/run1/nsys-direct/"));
    assert!(p["dirs"]["workspace"].is_null());
}

#[test]
fn plan_rule_no_export_with_nsight_slurm() {
    plan_fails(
        "",
        r#"srun_options = ["--export=ALL,FOO=1"]"#,
        &["srun_options"],
        &[
            "`--export=ALL,FOO=1` is not allowed with nsight-slurm",
            "[launch.env]",
        ],
    );
    let p = plan_json("", r#"env = { FOO = "1" }"#, &[]);
    assert_eq!(p["environment"]["FOO"], "1");
    // Plain srun (type nsys) keeps --export unchanged.
    let p = plan_json(
        r#"type = "nsys""#,
        r#"srun_options = ["--export=ALL"]"#,
        &["type", "home", "srun_options"],
    );
    assert_eq!(p["launcher"][1], "--export=ALL");
}

#[test]
fn plan_rule_windows() {
    plan_fails(
        r#"windows = ["100-150"]
profiling_mode = "at-launch""#,
        "",
        &[],
        &["windows: only apply to profiling_mode = \"cuda-api\""],
    );
    plan_fails(
        r#"windows = ["150-100"]"#,
        "",
        &[],
        &["`150-100` is not an iteration window"],
    );
    let p = plan_json(r#"windows = ["10-20", "40-50"]"#, "", &[]);
    assert_eq!(p["environment"]["TLLM_PROFILE_START_STOP"], "10-20,40-50");
}

#[test]
fn plan_rule_launch_command_and_separator() {
    plan_fails("", "", &["command"], &["launch.command: required"]);
    plan_fails(
        "",
        r#"srun_options = ["-N2", "--"]"#,
        &["srun_options"],
        &["`--` is added by jobprof"],
    );
    assert_eq!(plan_json("", "", &[])["launcher"][5], "python");
}

#[test]
fn plan_rule_env_names() {
    plan_fails(
        "",
        r#"env = { "1BAD" = "x" }"#,
        &[],
        &["launch.env: `1BAD`"],
    );
    assert_eq!(
        plan_json("", r#"env = { GOOD_1 = "x" }"#, &[])["environment"]["GOOD_1"],
        "x"
    );
}

#[test]
fn plan_rule_manual_needs_nsight_slurm() {
    plan_fails(
        r#"type = "nsys"
profiling_mode = "manual""#,
        "",
        &["type", "home"],
        &["profiling_mode = \"manual\" needs type = \"nsight-slurm\""],
    );
    assert_eq!(
        plan_json(r#"profiling_mode = "manual""#, "", &[])["mode"],
        "manual"
    );
}

#[test]
fn plan_rule_perf_takes_no_nsight_fields() {
    plan_fails(
        r#"type = "perf""#,
        "",
        &["type", "home", "backend"],
        &["log_dir: only applies to the Nsight types"],
    );
    let p = plan_json(
        r#"type = "perf""#,
        "",
        &["type", "home", "backend", "log_dir"],
    );
    assert_eq!(
        p["launcher"],
        serde_json::json!([
            "srun",
            "--nodes=2",
            "--ntasks-per-node=4",
            "--",
            "python",
            "serve.py",
            "--port",
            "8000"
        ])
    );
    assert!(p["tool"].is_null());
}

#[test]
fn plan_rule_unknown_fields_and_all_problems_at_once() {
    plan_fails(r#"tool_option = ["-t", "cuda"]"#, "", &[], &["tool_option"]);
    plan_fails(
        r#"tool_options = ["-o", "x"]
tool_option = 1
profiling_mode = "often""#,
        r#"shell = true"#,
        &["home", "log_dir"],
        &[
            "6 problems",
            "home: required",
            "log_dir: required",
            "`-o` sets -o",
            "tool_option: unknown field",
            "launch.shell: unknown field",
            "profiling_mode: unknown variant `often`",
        ],
    );
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

#[test]
fn plan_refuses_a_nul_byte_and_prints_control_characters_escaped() {
    // A NUL byte can be in no argv word: refused, naming where it is.
    plan_fails(
        "",
        r#"env = { TAG = "a\u0000b" }"#,
        &[],
        &["launch.env.TAG: contains a NUL byte"],
    );
    // Other control characters are printed escaped, on one line.
    let out = plan_with(
        "",
        r#"env = { BANNER = "line1\nline2\u001b[31m" }"#,
        &[],
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        !text.trim_end().contains('\n') && !text.contains('\u{1b}'),
        "{text:?}"
    );
    assert!(text.contains(r"BANNER=$'line1\nline2\x1b[31m'"), "{text}");
    let panel = stdout(&plan_with(
        "",
        r#"env = { BANNER = "x\u0007" }"#,
        &[],
        &["--dry-run"],
    ));
    assert!(!panel.contains('\u{7}'), "{panel:?}");
    assert!(panel.contains(r"BANNER=$'x\x07'"), "{panel}");
}
