//! `jobprof-record` against real perf and a real multi-threaded worker
//! (tests/programs/phases.c, compiled with gcc here): the token handshake,
//! sharding, atomic publication, every fault case of issue 3, and those of
//! issue 11: a worker churning ~300 short-lived threads a second, a sidecar
//! SIGKILLed after `stop`, stale tokens of a dead sidecar, `--max-shard-size`,
//! and symlinks planted by another user (`setpriv`) while we run as root.
//!
//! Needs perf that can record (root, or perf_event_paranoid <= 1) and gcc;
//! without them each test says so loudly and fails under CI=true.
//!
//! The tests sample at 999 Hz: with cpu-clock, threads that run in short
//! bursts (as these do, so that hundreds of them fit on a 2-core machine)
//! are hardly ever sampled at 99 Hz. They run one at a time (PERF_LOCK) so
//! that concurrent perf sessions do not starve each other on small machines.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::thread::sleep;
use std::time::{Duration, Instant};

use jobprof_capture_format::{
    parse_dropped_tsv, parse_shards_tsv, Capture, EndCause, Phase, ShardRow,
};

use crate::util::{ok, wait_for};
use crate::util::{perf_can_record, recorder, require};

mod arming;
mod churn;
mod disk;
mod prearm;

static PERF_LOCK: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    PERF_LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// The test worker, compiled once per test run.
fn phases_program() -> Option<PathBuf> {
    crate::util::program("record-phases", "tests/programs/phases.c", &["-O1"])
}

/// Both real components, or a loud skip (a failure under CI).
fn components() -> Option<PathBuf> {
    let perf = perf_can_record();
    if !require(
        perf,
        "perf that can record (`perf record -e cpu-clock`; install linux-perf, run as root)",
    ) {
        return None;
    }
    let prog = phases_program();
    if !require(prog.is_some(), "gcc (to build tests/programs/phases.c)") {
        return None;
    }
    prog
}

/// A worker process, its sidecar and their directories.
struct Rig {
    dir: tempfile::TempDir,
    worker: Child,
    sidecar: Option<Child>,
    sidecar_args: Vec<String>,
}

impl Rig {
    /// Starts the worker with `threads` threads (bursts of `burst_us`
    /// every `sleep_us`) and waits until every thread runs.
    fn worker(prog: &Path, threads: u32, burst_us: u32, sleep_us: u32) -> Rig {
        Rig::launch(prog, |cue| {
            vec![
                threads.to_string(),
                cue.display().to_string(),
                burst_us.to_string(),
                sleep_us.to_string(),
            ]
        })
    }

    /// Starts `prog` with the arguments `args(cue file)` and waits for its
    /// first acknowledgement ('A') on `cue.ack`.
    fn launch(prog: &Path, args: impl FnOnce(&Path) -> Vec<String>) -> Rig {
        let dir = tempfile::tempdir().unwrap();
        for d in ["tokens", "out", "staging"] {
            fs::create_dir(dir.path().join(d)).unwrap();
        }
        let cue = dir.path().join("cue");
        let worker = Command::new(prog).args(args(&cue)).spawn().unwrap();
        let rig = Rig {
            dir,
            worker,
            sidecar: None,
            sidecar_args: vec![],
        };
        rig.wait_ack('A');
        rig
    }

    fn path(&self, p: &str) -> PathBuf {
        self.dir.path().join(p)
    }

    fn tokens(&self) -> PathBuf {
        self.path("tokens")
    }

    fn token(&self, name: &str) -> PathBuf {
        self.tokens().join(name)
    }

    fn pid(&self) -> u32 {
        self.worker.id()
    }

    fn wait_ack(&self, phase: char) {
        let ack = self.path("cue.ack");
        wait_for(
            &format!("the worker to switch to {phase}"),
            Duration::from_secs(30),
            || fs::read_to_string(&ack).is_ok_and(|s| s.trim() == phase.to_string()),
        );
    }

    /// Switches the worker's threads to phase `phase` and waits until it
    /// took effect.
    fn cue(&self, phase: char) {
        fs::write(self.path("cue"), format!("{phase}\n")).unwrap();
        self.wait_ack(phase);
    }

    /// The usual sidecar arguments plus `extra`.
    fn default_args(&self, extra: &[&str]) -> Vec<String> {
        let mut a: Vec<String> = vec![
            "sidecar".into(),
            "--token-dir".into(),
            self.tokens().display().to_string(),
            "--worker".into(),
            "0".into(),
            "--out".into(),
            self.path("out").display().to_string(),
            "--pid".into(),
            self.pid().to_string(),
            "--staging".into(),
            self.path("staging").display().to_string(),
            "--frequency".into(),
            "999".into(),
            "--symfs-limit".into(),
            "64M".into(),
            "--start-timeout".into(),
            "30".into(),
            "--stop-timeout".into(),
            "20".into(),
        ];
        a.extend(extra.iter().map(|s| s.to_string()));
        a
    }

    fn spawn_sidecar(&self, args: &[String]) -> Child {
        Command::new(recorder())
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// Starts the sidecar and waits for its `ready` token.
    fn sidecar(&mut self, extra: &[&str]) {
        self.sidecar_with(self.default_args(extra));
    }

    /// Starts the sidecar with exactly `args` and waits for its `ready`.
    fn sidecar_with(&mut self, args: Vec<String>) {
        self.sidecar_args = args;
        let child = self.spawn_sidecar(&self.sidecar_args);
        self.sidecar = Some(child);
        let ready = self.token(".perf_sidecar_ready_w0");
        let error = self.token(".perf_sidecar_error_w0");
        let end = Instant::now() + Duration::from_secs(60);
        while !ready.exists() {
            let exited = self.sidecar.as_mut().unwrap().try_wait().unwrap().is_some();
            if exited || Instant::now() > end {
                let out = self.finish_sidecar();
                panic!(
                    "sidecar not ready: {}\n{}",
                    fs::read_to_string(&error).unwrap_or_default(),
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            sleep(Duration::from_millis(20));
        }
    }

    /// Waits for the sidecar to exit and returns its output.
    fn finish_sidecar(&mut self) -> Output {
        let child = self.sidecar.take().expect("sidecar running");
        let pid = child.id();
        let end = Instant::now() + Duration::from_secs(60);
        while fs::metadata(format!("/proc/{pid}")).is_ok()
            && !fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| s.contains(") Z "))
        {
            if Instant::now() > end {
                unsafe_kill(pid, 9);
                break;
            }
            sleep(Duration::from_millis(20));
        }
        child.wait_with_output().unwrap()
    }

    /// Runs `jobprof-record ARGS`.
    fn rec(&self, args: &[&str]) -> Output {
        Command::new(recorder()).args(args).output().unwrap()
    }

    fn driver(&self, cmd: &str, q: &str) -> Output {
        let t = self.tokens().display().to_string();
        self.rec(&[
            cmd,
            "--token-dir",
            &t,
            "--worker",
            "0",
            "--query",
            q,
            "--timeout",
            "60",
        ])
    }

    fn shutdown(&self) -> Output {
        let t = self.tokens().display().to_string();
        self.rec(&[
            "shutdown",
            "--token-dir",
            &t,
            "--worker",
            "0",
            "--timeout",
            "60",
        ])
    }

    fn capture_dir(&self, q: &str) -> PathBuf {
        self.path("out").join("worker_0").join(q)
    }

    fn capture(&self, q: &str) -> Capture {
        let p = self.capture_dir(q).join("capture.json");
        serde_json::from_slice(&crate::util::read(&p))
            .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    }

    fn shards(&self, q: &str) -> Vec<ShardRow> {
        let p = self.capture_dir(q).join("perf-shards.tsv");
        parse_shards_tsv(&String::from_utf8(crate::util::read(&p)).unwrap()).unwrap()
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        if let Some(mut s) = self.sidecar.take() {
            let _ = s.kill();
            let _ = s.wait();
        }
        let _ = self.worker.kill();
        let _ = self.worker.wait();
    }
}

fn unsafe_kill(pid: u32, sig: i32) {
    let status = Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .status()
        .unwrap();
    assert!(status.success(), "kill -{sig} {pid}");
}

#[track_caller]
fn fails_with(out: &Output, code: i32, needle: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "stderr: {stderr}");
    assert!(stderr.contains(needle), "`{needle}` not in: {stderr}");
}

/// Samples whose stack contains each phase's function: (A, B, C).
fn phase_samples(data: &Path) -> (usize, usize, usize) {
    let out = Command::new("perf")
        .arg("script")
        .arg("-i")
        .arg(data)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "perf script -i {}: {}",
        data.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let mut counts = (0, 0, 0);
    for sample in text.split("\n\n") {
        counts.0 += sample.contains("phase_alpha_work") as usize;
        counts.1 += sample.contains("phase_beta_work") as usize;
        counts.2 += sample.contains("phase_gamma_work") as usize;
    }
    counts
}

fn total_samples(dir: &Path, rows: &[ShardRow]) -> (usize, usize, usize) {
    rows.iter().fold((0, 0, 0), |acc, r| {
        let c = phase_samples(&dir.join(&r.data_file));
        (acc.0 + c.0, acc.1 + c.1, acc.2 + c.2)
    })
}

#[test]
fn record_three_shards_hold_the_query_window_only() {
    let Some(prog) = components() else { return };
    let _serial = serial();
    // 300 busy threads + the main thread: shards of 128, 128 and 45.
    let mut rig = Rig::worker(&prog, 300, 2000, 1_000_000);
    rig.sidecar(&[]);
    ok(&rig.driver("start", "q1"));
    rig.cue('B');
    sleep(Duration::from_millis(2000));
    ok(&rig.driver("stop", "q1"));
    rig.cue('C');
    sleep(Duration::from_millis(500));
    ok(&rig.shutdown());
    let out = rig.finish_sidecar();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let dir = rig.capture_dir("q1");
    let rows = rig.shards("q1");
    assert_eq!(rows.len(), 3, "{rows:?}");
    for (i, r) in rows.iter().enumerate() {
        assert_eq!(r.shard, i as u32);
        assert!(r.clean_exit(), "{r:?}");
        assert_eq!(r.data_file, format!("perf.data.part{i:03}"));
        assert!(r.data_bytes > 0 && dir.join(&r.data_file).is_file());
        assert!(dir.join(format!("perf-record.part{i:03}.log")).is_file());
    }
    let dropped =
        parse_dropped_tsv(&fs::read_to_string(dir.join("perf-dropped-tids.tsv")).unwrap()).unwrap();
    let attached: u32 = rows.iter().map(|r| r.thread_count).sum();
    assert_eq!(attached as usize + dropped.len(), 301);
    // Dealt out in turn: 101, 100 and 100 threads.
    assert!(rows.iter().all(|r| r.thread_count <= 101), "{rows:?}");
    let tids = fs::read_to_string(dir.join("perf-target-tids.txt")).unwrap();
    assert_eq!(tids.lines().count(), 301);
    assert_eq!(tids.lines().next().unwrap(), rig.pid().to_string());

    let (a, b, c) = total_samples(&dir, &rows);
    eprintln!("samples: alpha {a}, beta {b}, gamma {c}");
    assert!(b >= 100, "too few samples of phase B: {b}");
    assert_eq!(c, 0, "samples of phase C, after stop");
    assert!(
        a * 5 <= b,
        "phase A is only the moment between enable and the switch: {a} vs {b}"
    );

    let meta = rig.capture("q1");
    assert!(meta.valid, "{meta:?}");
    assert_eq!(meta.ended_by, Some(EndCause::Stop));
    assert_eq!(meta.shard_count, 3);
    assert_eq!(meta.target_thread_count, 301);
    assert_eq!(meta.dropped_thread_count as usize, dropped.len());
    // SAFETY: geteuid and getegid have no preconditions.
    let me = unsafe { (libc::geteuid(), libc::getegid()) };
    assert_eq!((meta.worker_uid, meta.worker_gid), (Some(me.0), Some(me.1)));
    for p in Phase::ALL {
        assert!(meta.reached(p), "phase {p} missing: {meta:?}");
    }
    let (on, off) = (
        meta.enabled_unix_ns.unwrap(),
        meta.disabled_unix_ns.unwrap(),
    );
    assert!(on < off && off - on >= 2_000_000_000, "{on} {off}");
    // Published atomically: no temporary left, staging cleaned up.
    let names: Vec<String> = fs::read_dir(rig.path("out/worker_0"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(!names.iter().any(|n| n.contains("publishing")), "{names:?}");
    assert!(!rig.path("staging/worker_0/q1").exists());
    assert!(rig.token(".perf_sidecar_done_w0").exists());
}

#[test]
fn record_one_shard_two_queries_in_one_sidecar_life() {
    let Some(prog) = components() else { return };
    let _serial = serial();
    let mut rig = Rig::worker(&prog, 8, 2000, 20_000);
    // The worker's PID comes the old way: a token file the driver writes.
    let pid_file = rig.token(".presto_worker_pid_w0");
    fs::write(&pid_file, format!("{}\n", rig.pid())).unwrap();
    rig.sidecar(&["--pid-file", &pid_file.display().to_string()]);
    ok(&rig.driver("start", "q1"));
    rig.cue('B');
    sleep(Duration::from_millis(600));
    ok(&rig.driver("stop", "q1"));
    rig.cue('A');
    ok(&rig.driver("start", "q2.warm-2"));
    rig.cue('C');
    sleep(Duration::from_millis(600));
    ok(&rig.driver("stop", "q2.warm-2"));
    ok(&rig.shutdown());
    ok(&rig.finish_sidecar());

    for (q, want_b) in [("q1", true), ("q2.warm-2", false)] {
        let rows = rig.shards(q);
        assert_eq!(rows.len(), 1, "{q}: {rows:?}");
        assert_eq!(rows[0].data_file, "perf.data");
        assert_eq!(rows[0].thread_count, 9);
        let (_, b, c) = phase_samples(&rig.capture_dir(q).join("perf.data"));
        if want_b {
            assert!(b > 0 && c == 0, "{q}: B {b}, C {c}");
        } else {
            assert!(c > 0 && b == 0, "{q}: B {b}, C {c}");
        }
        assert!(rig.capture(q).valid);
    }
    // Worker-level files: preflight report, maps, symbol snapshot.
    let w = rig.path("out/worker_0");
    let preflight = fs::read_to_string(w.join("preflight.txt")).unwrap();
    assert!(preflight.contains("all checks passed"), "{preflight}");
    assert!(fs::read_to_string(w.join("worker.maps"))
        .unwrap()
        .contains("record-phases"));
    let manifest = fs::read_to_string(w.join("symbol-manifest.tsv")).unwrap();
    assert!(
        manifest.starts_with("kind\tpath\tbytes\tbuild_id\tstatus\n"),
        "{manifest}"
    );
    // The kernel symbol table is kept next to symfs/ when it is readable.
    let kallsyms = fs::read("/proc/kallsyms").unwrap_or_default();
    let readable = kallsyms.split(|&b| b == b'\n').any(|l| {
        l.split(|&b| b == b' ')
            .next()
            .is_some_and(|a| a.iter().any(|&c| c != b'0'))
    });
    assert_eq!(w.join("kallsyms").is_file(), readable, "{manifest}");
    let exe = prog.strip_prefix("/").unwrap();
    assert!(w.join("symfs").join(exe).is_file(), "{manifest}");
}

#[test]
fn record_worker_exit_mid_capture_is_published_and_marked() {
    let Some(prog) = components() else { return };
    let _serial = serial();
    let mut rig = Rig::worker(&prog, 8, 2000, 20_000);
    rig.sidecar(&["--threads-per-shard", "4"]);
    ok(&rig.driver("start", "q1"));
    sleep(Duration::from_millis(300));
    rig.worker.kill().unwrap();
    rig.worker.wait().unwrap();
    let out = rig.finish_sidecar();
    ok(&out);
    assert!(rig.token(".perf_sidecar_done_w0").exists());
    let stop = rig.driver("stop", "q1");
    fails_with(&stop, 5, "exited during the capture");
    let meta = rig.capture("q1");
    assert!(!meta.valid);
    assert_eq!(meta.ended_by, Some(EndCause::WorkerExit));
    assert!(
        meta.reason.as_deref().unwrap().contains("exited"),
        "{meta:?}"
    );
    assert!(meta.reached(Phase::Published));
    assert_eq!(rig.shards("q1").len(), 3);
    // A driver arriving later learns at once that the sidecar is gone.
    fails_with(&rig.driver("start", "q2"), 1, "exited");
}

#[test]
fn record_sigterm_stops_perf_cleanly_and_publishes() {
    let Some(prog) = components() else { return };
    let _serial = serial();
    let mut rig = Rig::worker(&prog, 8, 2000, 20_000);
    rig.sidecar(&[]);
    ok(&rig.driver("start", "q1"));
    rig.cue('B');
    sleep(Duration::from_millis(400));
    unsafe_kill(rig.sidecar.as_ref().unwrap().id(), 15);
    let out = rig.finish_sidecar();
    ok(&out);
    assert!(String::from_utf8_lossy(&out.stderr).contains("SIGTERM"));
    let rows = rig.shards("q1");
    assert!(rows.iter().all(ShardRow::clean_exit), "{rows:?}");
    // The data file was finalised: perf can read it.
    let (_, b, _) = phase_samples(&rig.capture_dir("q1").join("perf.data"));
    assert!(b > 0);
    let meta = rig.capture("q1");
    assert_eq!(meta.ended_by, Some(EndCause::Signal));
    assert!(!meta.valid && meta.reached(Phase::Published), "{meta:?}");
    assert!(rig.token(".perf_sidecar_done_w0").exists());
}

#[test]
fn record_second_sidecar_is_refused_and_sigint_ends_the_first() {
    let Some(prog) = components() else { return };
    let _serial = serial();
    let mut rig = Rig::worker(&prog, 4, 2000, 20_000);
    rig.sidecar(&[]);
    let second = rig
        .spawn_sidecar(&rig.sidecar_args)
        .wait_with_output()
        .unwrap();
    fails_with(&second, 1, "another sidecar for worker 0 already runs");
    // The refused one touched nothing: the first still serves.
    ok(&rig.driver("start", "q1"));
    ok(&rig.driver("stop", "q1"));
    unsafe_kill(rig.sidecar.as_ref().unwrap().id(), 2);
    let out = rig.finish_sidecar();
    ok(&out);
    assert!(rig.capture("q1").valid);
    assert!(rig.token(".perf_sidecar_done_w0").exists());
}

#[test]
fn record_bad_query_ids_and_worker_indexes_are_refused() {
    // Driver side: refused before any token is written (no perf needed).
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path().display().to_string();
    for q in ["..", ".", "a/b", "../x", "", "q 1", ".warmup"] {
        let out = Command::new(recorder())
            .args(["start", "--token-dir", &t, "--worker", "0", "--query", q])
            .output()
            .unwrap();
        fails_with(&out, 2, "is not allowed");
    }
    // Too long to name token files: refused up front, by start and stop.
    let long = "q".repeat(129);
    for cmd in ["start", "stop"] {
        let out = Command::new(recorder())
            .args([cmd, "--token-dir", &t, "--worker", "0", "--query", &long])
            .output()
            .unwrap();
        fails_with(&out, 2, "the limit is 128");
    }
    let out = Command::new(recorder())
        .args(["stop", "--token-dir", &t, "--worker", "w0", "--query", "q"])
        .output()
        .unwrap();
    fails_with(&out, 2, "is not a number");
    assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);

    // Sidecar side: a start token with a bad id (`..` is a legal file name
    // suffix) is answered with an error token and never becomes a path.
    let Some(prog) = components() else { return };
    let _serial = serial();
    let mut rig = Rig::worker(&prog, 2, 2000, 20_000);
    rig.sidecar(&[]);
    fs::write(rig.token(".perf_start_w0_.."), "").unwrap();
    let err = rig.token(".perf_error_w0_..");
    wait_for("the error token", Duration::from_secs(10), || err.exists());
    assert!(fs::read_to_string(&err).unwrap().contains("not allowed"));
    assert!(!rig.token(".perf_start_w0_..").exists());
    ok(&rig.shutdown());
    ok(&rig.finish_sidecar());
    let published: Vec<_> = fs::read_dir(rig.path("out/worker_0")).unwrap().collect();
    assert!(published
        .iter()
        .all(|e| e.as_ref().unwrap().file_type().unwrap().is_file()
            || e.as_ref().unwrap().file_name() == "symfs"));
}

#[test]
fn record_stale_tokens_are_cleared() {
    let Some(prog) = components() else { return };
    let _serial = serial();
    let mut rig = Rig::worker(&prog, 2, 2000, 20_000);
    // Left by an earlier run of the sidecar: would make it stop at once or
    // make drivers think it is ready/done.
    for name in [
        ".perf_sidecar_shutdown_w0",
        ".perf_sidecar_done_w0",
        ".perf_sidecar_error_w0",
        ".perf_start_w0_old",
    ] {
        fs::write(rig.token(name), "stale\n").unwrap();
    }
    rig.sidecar(&[]);
    assert!(!rig.token(".perf_sidecar_done_w0").exists());
    assert!(!rig.token(".perf_start_w0_old").exists());
    // Left by an earlier run of the query: `start` must not take them as
    // this run's answer.
    fs::write(rig.token(".perf_started_w0_q1"), "stale\n").unwrap();
    fs::write(rig.token(".perf_error_w0_q1"), "stale failure\n").unwrap();
    fs::write(rig.token(".perf_finished_w0_q1"), "stale\n").unwrap();
    ok(&rig.driver("start", "q1"));
    let started = fs::read_to_string(rig.token(".perf_started_w0_q1")).unwrap();
    assert!(started.contains("shards=1"), "{started}");
    // A driver that retries `start` for the running query is answered again.
    ok(&rig.driver("start", "q1"));
    ok(&rig.driver("stop", "q1"));
    assert!(fs::read_to_string(rig.token(".perf_finished_w0_q1"))
        .unwrap()
        .contains("ended_by=stop"));
    ok(&rig.shutdown());
    ok(&rig.finish_sidecar());
    assert!(rig.capture("q1").valid);
}

/// PIDs of the perf processes the sidecar started.
fn perf_children(sidecar: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for e in fs::read_dir("/proc").unwrap() {
        let Ok(pid) = e.unwrap().file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some(close) = stat.rfind(')') else {
            continue;
        };
        let ppid: u32 = stat[close + 2..]
            .split(' ')
            .nth(1)
            .unwrap()
            .parse()
            .unwrap();
        if ppid == sidecar && stat.contains("(perf)") {
            out.push((shard_of_perf(pid), pid));
        }
    }
    // In shard order: shards are attached in parallel, so pids need not be.
    out.sort_unstable();
    out.into_iter().map(|(_, pid)| pid).collect()
}

/// The shard a perf child writes: the number that ends its `-o` file name
/// (`perf.data.partNNN`; a lone shard writes `perf.data`, index 0).
fn shard_of_perf(pid: u32) -> u32 {
    let argv = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let args: Vec<&[u8]> = argv.split(|&b| b == 0).collect();
    let output = args
        .iter()
        .position(|a| *a == b"-o")
        .and_then(|i| args.get(i + 1))
        .map(|o| String::from_utf8_lossy(o).into_owned())
        .unwrap_or_default();
    let digits = output.len() - output.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    output[output.len() - digits..].parse().unwrap_or(0)
}

#[test]
fn record_perf_death_names_the_shard() {
    let Some(prog) = components() else { return };
    let _serial = serial();
    let mut rig = Rig::worker(&prog, 8, 2000, 20_000);
    rig.sidecar(&["--threads-per-shard", "5"]);
    ok(&rig.driver("start", "q1"));
    let perfs = perf_children(rig.sidecar.as_ref().unwrap().id());
    assert_eq!(perfs.len(), 2, "{perfs:?}");
    unsafe_kill(perfs[1], 9);
    let stop = rig.driver("stop", "q1");
    fails_with(&stop, 5, "shard 1");
    assert!(String::from_utf8_lossy(&stop.stderr).contains("SIGKILL"));
    ok(&rig.shutdown());
    ok(&rig.finish_sidecar());
    let meta = rig.capture("q1");
    assert_eq!(meta.ended_by, Some(EndCause::PerfFailure));
    assert!(
        meta.reason.as_deref().unwrap().contains("shard 1"),
        "{meta:?}"
    );
    let rows = rig.shards("q1");
    assert_eq!(rows[1].exit_status, Some(137));
    assert!(rows[0].clean_exit());
}

#[test]
fn record_max_capture_ends_a_capture_without_stop() {
    let Some(prog) = components() else { return };
    let _serial = serial();
    let mut rig = Rig::worker(&prog, 2, 2000, 20_000);
    rig.sidecar(&["--max-capture", "1"]);
    ok(&rig.driver("start", "q1"));
    let err = rig.token(".perf_error_w0_q1");
    wait_for(
        "the max-capture error token",
        Duration::from_secs(15),
        || err.exists(),
    );
    fails_with(&rig.driver("stop", "q1"), 5, "--max-capture");
    ok(&rig.shutdown());
    ok(&rig.finish_sidecar());
    let meta = rig.capture("q1");
    assert_eq!(meta.ended_by, Some(EndCause::MaxCapture));
    assert!(!meta.valid);
    assert!(rig.shards("q1")[0].clean_exit());
}

#[test]
fn record_unwritable_out_keeps_the_data_in_staging() {
    let Some(prog) = components() else { return };
    let _serial = serial();
    let mut rig = Rig::worker(&prog, 2, 2000, 20_000);
    // A path below a regular file cannot be created, not even by root.
    fs::write(rig.path("blocker"), "").unwrap();
    let out_dir = rig.path("blocker/perf");
    let out_arg = out_dir.display().to_string();
    rig.sidecar(&["--out", &out_arg]);
    ok(&rig.driver("start", "q1"));
    ok(&rig.driver("stop", "q1"));
    let shut = rig.shutdown();
    fails_with(&shut, 1, &out_arg);
    let side = rig.finish_sidecar();
    assert_eq!(side.status.code(), Some(1));
    let err = fs::read_to_string(rig.token(".perf_sidecar_error_w0")).unwrap();
    assert!(
        err.contains(&out_arg) && err.contains("raw data left in"),
        "{err}"
    );
    assert!(!rig.token(".perf_sidecar_done_w0").exists());
    let staged = rig.path("staging/worker_0/q1");
    assert!(staged.join("perf.data").is_file());
    assert!(staged.join("capture.json").is_file());
    assert!(rig.path("staging/worker_0/symfs").is_dir());
}

#[test]
fn record_preflight_reports_and_names_failed_checks() {
    let Some(prog) = components() else { return };
    let _serial = serial();
    let rig = Rig::worker(&prog, 2, 2000, 20_000);
    let pid = rig.pid().to_string();
    let staging = rig.path("staging").display().to_string();
    let out = rig.rec(&[
        "preflight",
        "--pid",
        &pid,
        "--exe-name",
        "record-phases",
        "--staging",
        &staging,
    ]);
    ok(&out);
    let report = String::from_utf8_lossy(&out.stdout);
    for check in [
        "perf",
        "permissions",
        "nofile",
        "staging",
        "process",
        "uid",
        "symbols",
        "test record",
    ] {
        assert!(report.contains(check), "{check} missing: {report}");
    }
    let out = rig.rec(&[
        "preflight",
        "--pid",
        &pid,
        "--exe-name",
        "presto_server",
        "--staging",
        &staging,
    ]);
    fails_with(&out, 1, "preflight check `process` failed");
    assert!(String::from_utf8_lossy(&out.stderr).contains("fix:"));

    // A stripped worker fails only with --require-symbols.
    let stripped = rig.path("stripped-phases");
    fs::copy(&prog, &stripped).unwrap();
    let strip = Command::new("strip").arg(&stripped).status();
    if !require(strip.is_ok_and(|s| s.success()), "strip (binutils)") {
        return;
    }
    let other = Rig::worker(&stripped, 1, 2000, 20_000);
    let pid = other.pid().to_string();
    ok(&rig.rec(&["preflight", "--pid", &pid, "--staging", &staging]));
    let out = rig.rec(&[
        "preflight",
        "--pid",
        &pid,
        "--require-symbols",
        "--staging",
        &staging,
    ]);
    fails_with(&out, 1, "preflight check `symbols` failed");
}

#[test]
fn record_every_subcommand_has_help() {
    for cmd in ["sidecar", "start", "stop", "shutdown", "preflight"] {
        let out = Command::new(recorder())
            .args([cmd, "--help"])
            .output()
            .unwrap();
        ok(&out);
        assert!(String::from_utf8_lossy(&out.stdout).contains(&format!("jobprof-record {cmd}")));
    }
    let out = Command::new(recorder()).arg("--help").output().unwrap();
    ok(&out);
    let out = Command::new(recorder()).output().unwrap();
    fails_with(&out, 2, "no command given");
}

#[test]
fn record_non_utf8_argument_is_a_usage_error() {
    // The OS hands over bytes; one that is not UTF-8 is refused with the
    // usage exit code and the flag named, not a panic (exit 101).
    use std::os::unix::ffi::OsStrExt;
    let dir = tempfile::tempdir().unwrap();
    let bad = std::ffi::OsStr::from_bytes(b"q\xff");
    let out = Command::new(recorder())
        .args(["start", "--worker", "0", "--token-dir"])
        .arg(dir.path())
        .arg("--query")
        .arg(bad)
        .output()
        .unwrap();
    fails_with(&out, 2, "--query: `q\u{fffd}` is not valid UTF-8");
    let out = Command::new(recorder()).arg(bad).output().unwrap();
    fails_with(&out, 2, "unknown command `q\u{fffd}`");
    assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn record_stop_watchdog_kills_a_hung_perf() {
    let Some(prog) = components() else { return };
    let _serial = serial();
    let mut rig = Rig::worker(&prog, 2, 2000, 20_000);
    rig.sidecar(&["--stop-timeout", "1"]);
    ok(&rig.driver("start", "q1"));
    // A perf that no longer reacts to its FIFO, SIGINT or SIGTERM.
    let perfs = perf_children(rig.sidecar.as_ref().unwrap().id());
    assert_eq!(perfs.len(), 1, "{perfs:?}");
    unsafe_kill(perfs[0], 19);
    // `stop` ends the capture but says it is invalid (exit 5) and why.
    fails_with(&rig.driver("stop", "q1"), 5, "shard 0");
    let forced = fs::read_to_string(rig.token(".perf_record_stop_forced_w0")).unwrap();
    assert!(
        forced.contains("shard 0") && forced.contains("watchdog"),
        "{forced}"
    );
    ok(&rig.shutdown());
    ok(&rig.finish_sidecar());
    let rows = rig.shards("q1");
    assert_eq!(rows[0].phase, jobprof_capture_format::ShardPhase::Killed);
    assert_eq!(rows[0].exit_status, Some(137));
    assert!(!rig.capture("q1").valid);
}

#[test]
fn record_shard_whose_threads_all_exit_is_not_a_failure() {
    let Some(prog) = components() else { return };
    let _serial = serial();
    // 2 threads + main, one per shard: the last shard holds only the last
    // thread created, which exits on cue 'E'.
    let mut rig = Rig::worker(&prog, 2, 2000, 20_000);
    rig.sidecar(&["--threads-per-shard", "1"]);
    ok(&rig.driver("start", "q1"));
    let sidecar = rig.sidecar.as_ref().unwrap().id();
    assert_eq!(perf_children(sidecar).len(), 3);
    rig.cue('B');
    rig.cue('E');
    // perf of the last shard ends by itself and the sidecar reaps it.
    wait_for(
        "the last shard's perf to end",
        Duration::from_secs(20),
        || perf_children(sidecar).len() == 2,
    );
    ok(&rig.driver("stop", "q1"));
    ok(&rig.shutdown());
    ok(&rig.finish_sidecar());
    let meta = rig.capture("q1");
    assert!(meta.valid, "{meta:?}");
    let rows = rig.shards("q1");
    assert_eq!(rows[2].phase, jobprof_capture_format::ShardPhase::Exited);
    assert!(rows.iter().all(ShardRow::clean_exit), "{rows:?}");
}

/// The counters of `capture.json` agree with the TSV files.
#[track_caller]
fn counters_agree(rig: &Rig, q: &str) {
    let meta = rig.capture(q);
    let dir = rig.capture_dir(q);
    let dropped =
        parse_dropped_tsv(&fs::read_to_string(dir.join("perf-dropped-tids.tsv")).unwrap()).unwrap();
    let rows = rig.shards(q);
    assert_eq!(meta.dropped_thread_count as usize, dropped.len(), "{q}");
    assert_eq!(meta.shard_count as usize, rows.len(), "{q}");
    let attached: u32 = rows.iter().map(|r| r.thread_count).sum();
    assert_eq!(
        attached as usize + dropped.len(),
        meta.target_thread_count as usize,
        "{q}"
    );
}
