//! `jobprof-record sidecar --tool nsys`: the per-query Nsight Systems loop
//! of a worker, driven as the benchmark drives it today. The worker runs
//! under a fake `nsys` on `PATH` (tests/nsys/fake-nsys-session.sh) that
//! keeps the interactive session's semantics (`launch` runs the app;
//! `start` fails while a collection runs or over an existing report
//! without `-f true`; `stop` returns at once and a background writer
//! produces the `.qdstrm`, then the `.nsys-rep`, in bursts) and logs every
//! call; the driver is the users' own `start_profiler`/`stop_profiler`
//! (tests/nsys/nsys-profiler.sh). Settle windows are short (`--settle`).
//! The fake lives where only root can change it (as root the sidecar runs
//! no other nsys).

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use crate::util::{self, output_text, recorder, wait_for};

mod attacks;

const FAKE: &str = "tests/nsys/fake-nsys-session.sh";
const FUNCTIONS: &str = "tests/nsys/nsys-profiler.sh";

/// One worker under `nsys launch`, its token, staging and output
/// directories, and the sidecars started for it.
struct Session {
    t: tempfile::TempDir,
    bin: PathBuf,
    state: PathBuf,
    tokens: PathBuf,
    staging: PathBuf,
    out: PathBuf,
    launch: Child,
    sidecars: Vec<Child>,
    /// Environment for the fake nsys (burst size and pace).
    env: Vec<(String, String)>,
}

fn manifest(p: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(p)
}

impl Session {
    fn new() -> Session {
        Session::with_env(&[])
    }

    fn with_env(env: &[(&str, &str)]) -> Session {
        // As root the sidecar runs only an nsys that root alone can change.
        let t = util::root_only_dir().unwrap_or_else(|| tempfile::tempdir().unwrap());
        fs::set_permissions(t.path(), fs::Permissions::from_mode(0o755)).unwrap();
        let bin = t.path().join("bin");
        fs::create_dir(&bin).unwrap();
        fs::copy(manifest(FAKE), bin.join("nsys")).unwrap();
        let (state, tokens) = (t.path().join("session"), t.path().join("nsys-tokens"));
        let (staging, out) = (
            t.path().join("staging"),
            t.path().join("result/profiles/nsys"),
        );
        fs::create_dir_all(&tokens).unwrap();
        let mut s = Session {
            launch: Command::new("true").spawn().unwrap(),
            t,
            bin,
            state,
            tokens,
            staging,
            out,
            sidecars: Vec::new(),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        };
        let _ = s.launch.wait();
        // The worker: `nsys launch -t nvtx,cuda <server>`.
        s.launch = s
            .cmd("nsys")
            .args(["launch", "-t", "nvtx,cuda", "sleep", "600"])
            .process_group(0)
            .spawn()
            .unwrap();
        let session = s.state.join("session");
        wait_for("nsys launch", Duration::from_secs(20), || session.exists());
        s
    }

    /// A command with the fake nsys first on PATH and its state directory.
    fn cmd(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = Command::new(program);
        let path = format!(
            "{}:{}",
            self.bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        c.env("PATH", path)
            .env("FAKE_NSYS_STATE", &self.state)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null());
        c
    }

    fn log_path(&self, n: usize) -> PathBuf {
        self.t.path().join(format!("sidecar-{n}.log"))
    }

    /// Starts `jobprof-record sidecar --tool nsys` for worker 0 and waits
    /// until it is ready (`wait-ready --tool nsys`).
    fn sidecar(&mut self, extra: &[&str]) -> usize {
        let n = self.sidecars.len();
        let log = fs::File::create(self.log_path(n)).unwrap();
        let child = self
            .cmd(recorder())
            .args([
                "sidecar", "--tool", "nsys", "--worker", "0", "--settle", "0.8",
            ])
            .args(["--report-timeout", "30"])
            .arg("--token-dir")
            .arg(&self.tokens)
            .arg("--out")
            .arg(&self.out)
            .arg("--staging")
            .arg(&self.staging)
            .args(extra)
            .stderr(log)
            .spawn()
            .unwrap();
        // wait-ready reports the error of the lock's last holder: wait
        // until this sidecar holds it (an earlier one may have failed).
        let (lock, me) = (
            self.tokens.join(".nsys_sidecar_lock_w0"),
            format!("pid={} ", child.id()),
        );
        self.sidecars.push(child);
        wait_for("the sidecar's lock", Duration::from_secs(30), || {
            fs::read_to_string(&lock).is_ok_and(|t| t.contains(&me))
        });
        let o = self.recorder(&["wait-ready", "--timeout", "30"]);
        assert!(
            o.status.success(),
            "wait-ready: {}\n{}",
            output_text(&o),
            self.log(n)
        );
        n
    }

    /// `jobprof-record ARGS --tool nsys --token-dir DIR --worker 0`.
    fn recorder(&self, args: &[&str]) -> Output {
        self.cmd(recorder())
            .args(args)
            .args(["--tool", "nsys", "--worker", "0", "--token-dir"])
            .arg(&self.tokens)
            .output()
            .unwrap()
    }

    /// Runs `script` in bash with the users' profiler functions sourced.
    fn driver(&self, script: &str) -> Output {
        self.driver_env(script, &[])
    }

    fn driver_env(&self, script: &str, env: &[(&str, &str)]) -> Output {
        self.cmd("bash")
            .arg("-c")
            .arg(format!(". {}\n{script}", manifest(FUNCTIONS).display()))
            .env("NSYS_TOKEN_DIR", &self.tokens)
            .env("NSYS_WORKERS", "0")
            .envs(env.iter().copied())
            .output()
            .unwrap()
    }

    fn log(&self, n: usize) -> String {
        format!(
            "--- sidecar {n} log:\n{}",
            fs::read_to_string(self.log_path(n)).unwrap_or_default()
        )
    }

    fn calls(&self) -> String {
        fs::read_to_string(self.state.join("calls.log")).unwrap_or_default()
    }

    fn token(&self, kind: &str, q: &str) -> PathBuf {
        self.tokens.join(format!(".nsys_{kind}_token_w0_{q}"))
    }

    fn published(&self, q: &str) -> PathBuf {
        self.out.join("worker_0").join(q)
    }

    /// Shuts the sidecar down and waits for it; its exit code.
    fn shutdown(&mut self, n: usize) -> (Output, Option<i32>) {
        let o = self.recorder(&["shutdown", "--timeout", "120"]);
        let code = self.sidecars[n].wait().unwrap().code();
        (o, code)
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        for c in &mut self.sidecars {
            let _ = c.kill();
            let _ = c.wait();
        }
        // SAFETY: kill has no memory-safety preconditions.
        unsafe {
            libc::kill(-(self.launch.id() as i32), libc::SIGKILL);
        }
        let _ = self.launch.wait();
    }
}

fn sha256_hex(path: &Path) -> String {
    let data = fs::read(path).unwrap();
    Sha256::digest(&data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Checks one published query: the report, its manifest and its hash.
fn check_published(s: &Session, q: &str, kind: &str) -> serde_json::Value {
    let dir = s.published(q);
    let m = util::json(&dir.join("nsys-capture.json"));
    let file = dir.join(m["file"].as_str().unwrap());
    assert_eq!(m["query"], q);
    assert_eq!(m["worker"], 0);
    assert_eq!(m["kind"], kind);
    assert_eq!(
        file.file_name().unwrap().to_string_lossy(),
        format!("nsys_worker_w0_{q}.{kind}")
    );
    assert_eq!(m["bytes"], fs::metadata(&file).unwrap().len());
    assert!(m["bytes"].as_u64().unwrap() > 0);
    assert_eq!(m["sha256"], sha256_hex(&file));
    let argv: Vec<&str> = m["start"]["argv"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(&argv[1..3], ["start", "-o"]);
    assert!(
        argv[3].ends_with(&format!("/{q}/nsys_worker_w0_{q}")),
        "{argv:?}"
    );
    assert_eq!(&argv[4..], ["-f", "true"]);
    assert_eq!(m["start"]["exit_code"], 0);
    assert_eq!(m["stop"]["argv"][1], "stop");
    m
}

#[test]
fn three_queries_in_a_row_are_settled_and_published_without_blocking_the_next_start() {
    let mut s = Session::new();
    let n = s.sidecar(&[]);
    for q in ["q1", "q2", "q3"] {
        let o = s.driver(&format!(
            "start_profiler {q} && sleep 0.3 && stop_profiler {q}"
        ));
        assert!(o.status.success(), "{q}: {}\n{}", output_text(&o), s.log(n));
    }
    for q in ["q1", "q2", "q3"] {
        let f = s.token("finished", q);
        wait_for(&format!("finished {q}"), Duration::from_secs(60), || {
            f.exists()
        });
        let m = check_published(&s, q, "nsys-rep");
        assert_eq!(m["settled"], true);
        assert!(m["settled_at_ns"].as_u64() > m["stop"]["unix_ns"].as_u64());
        let answer = fs::read_to_string(&f).unwrap();
        assert!(
            answer.contains("kind=nsys-rep") && answer.contains("settled=true"),
            "{answer}"
        );
    }
    let (o, code) = s.shutdown(n);
    assert!(o.status.success(), "{}\n{}", output_text(&o), s.log(n));
    assert_eq!(code, Some(0), "{}", s.log(n));
    assert!(String::from_utf8_lossy(&o.stdout).contains("published 3 report(s)"));
    // The session saw start, stop, start, stop, ... with the users' names.
    let calls = s.calls();
    let order: Vec<&str> = calls
        .lines()
        .filter_map(|l| l.split(" argv=").nth(1))
        .map(|c| c.split(' ').next().unwrap())
        .filter(|c| *c == "start" || *c == "stop")
        .collect();
    assert_eq!(
        order,
        ["start", "stop", "start", "stop", "start", "stop"],
        "{calls}"
    );
    assert!(
        calls.contains("argv=/") && calls.contains("nsys_worker_w0_q2"),
        "{calls}"
    );
    // Nothing is left in staging, nothing half-published in the output.
    let left: Vec<_> = fs::read_dir(s.out.join("worker_0"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left.len(), 3, "{left:?}");
    // `jobprof nsys collect` takes the per-query tree as its report root.
    let o = util::jobprof()
        .args(["nsys", "collect", "--report-root"])
        .arg(&s.out)
        .args(["--settle", "200ms", "--poll", "50ms", "--timeout", "60s"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", output_text(&o));
    let m = util::json(&s.out.join("manifest.json"));
    assert_eq!(m["reports"].as_array().unwrap().len(), 3, "{m}");
}

#[test]
fn a_failed_nsys_start_writes_the_error_token_and_no_started() {
    let mut s = Session::new();
    fs::write(s.state.join("fail-start"), "/q2/").unwrap();
    let n = s.sidecar(&[]);
    let o = s.driver("start_profiler q1 && stop_profiler q1");
    assert!(o.status.success(), "{}", output_text(&o));
    // The users' start_profiler waits for `started`, which never comes: it
    // fails at its limit instead of running the query unprofiled.
    let o = s.driver_env("start_profiler q2", &[("NSYS_START_WAIT", "3")]);
    assert_eq!(o.status.code(), Some(1), "{}", output_text(&o));
    assert!(!s.token("started", "q2").exists());
    let e = fs::read_to_string(s.token("error", "q2")).unwrap();
    assert!(
        e.contains("nsys start failed") && e.contains("CUPTI initialization failed (injected)"),
        "{e}"
    );
    // jobprof-record start --tool nsys fails at once, with the reason.
    let o = s.recorder(&["start", "--query", "q2b", "--timeout", "10"]);
    assert!(
        o.status.success(),
        "q2b is not injected: {}",
        output_text(&o)
    );
    let o = s.recorder(&["stop", "--query", "q2b", "--timeout", "60"]);
    assert!(o.status.success(), "{}", output_text(&o));
    fs::write(s.state.join("fail-start"), "/q4/").unwrap();
    let o = s.recorder(&["start", "--query", "q4", "--timeout", "10"]);
    assert_eq!(o.status.code(), Some(1), "{}", output_text(&o));
    assert!(
        util::stderr(&o).contains("(injected)"),
        "{}",
        output_text(&o)
    );
    // The stop the driver sends anyway is no error; the session still
    // works for the next query.
    let o = s.driver("stop_profiler q2; start_profiler q3 && stop_profiler q3");
    assert!(o.status.success(), "{}\n{}", output_text(&o), s.log(n));
    let (o, code) = s.shutdown(n);
    assert_eq!(code, Some(0), "{}\n{}", output_text(&o), s.log(n));
    for q in ["q1", "q2b", "q3"] {
        check_published(&s, q, "nsys-rep");
    }
    assert!(!s.published("q2").exists() && !s.published("q4").exists());
}

#[test]
fn shutdown_waits_for_a_growing_report_and_stops_a_running_collection() {
    // A report written for about 3 s after its stop.
    let mut s = Session::with_env(&[("FAKE_NSYS_PAUSE", "0.5"), ("FAKE_NSYS_BURSTS", "3")]);
    let n = s.sidecar(&[]);
    let o = s.driver("start_profiler q1 && stop_profiler q1 && start_profiler q2");
    assert!(o.status.success(), "{}", output_text(&o));
    // q1's report is being written (or settling) and q2 still collecting.
    let stopped = s.token("stop", "q1");
    wait_for("the stop of q1 taken", Duration::from_secs(20), || {
        !stopped.exists()
    });
    let t = Instant::now();
    let (o, code) = s.shutdown(n);
    assert!(o.status.success(), "{}\n{}", output_text(&o), s.log(n));
    assert_eq!(code, Some(0));
    assert!(
        t.elapsed() >= Duration::from_secs(2),
        "shutdown returned before the reports"
    );
    let m1 = check_published(&s, "q1", "nsys-rep");
    assert_eq!(m1["settled"], true);
    assert!(m1["reason"].is_null());
    let m2 = check_published(&s, "q2", "nsys-rep");
    assert_eq!(m2["settled"], true, "{m2}");
    assert_eq!(m2["settle_ms"], 800);
    assert!(
        m2["reason"]
            .as_str()
            .unwrap()
            .contains("no stop token came"),
        "{m2}"
    );
    // Each report was whole: the fake's writer had finished both.
    let written = fs::read_to_string(s.state.join("written")).unwrap();
    assert_eq!(written.lines().count(), 2, "{written}");
    assert!(
        !s.state.join("collecting").exists(),
        "the collection was stopped"
    );
}

#[test]
fn a_stop_written_with_the_shutdown_is_taken_as_the_stop() {
    let mut s = Session::new();
    let n = s.sidecar(&[]);
    // Both written while the sidecar waits for a slow `nsys start`: it
    // sees them together at its next look.
    fs::write(s.state.join("start-delay"), "3").unwrap();
    fs::write(s.token("start", "q1"), "").unwrap();
    wait_for("nsys start", Duration::from_secs(60), || {
        s.calls().contains(" argv=start ")
    });
    let shutdown = s.tokens.join(".nsys_sidecar_shutdown_w0");
    let o = s.driver(&format!("stop_profiler q1 && touch {}", shutdown.display()));
    assert!(o.status.success(), "{}", output_text(&o));
    let code = s.sidecars[n].wait().unwrap().code();
    assert_eq!(code, Some(0), "{}", s.log(n));
    let m = check_published(&s, "q1", "nsys-rep");
    assert!(m["reason"].is_null(), "{m}");
    assert!(s.tokens.join(".nsys_sidecar_done_w0").exists());
}

#[test]
fn without_an_nsys_rep_the_qdstrm_is_published_after_the_report_timeout() {
    let mut s = Session::new();
    fs::write(s.state.join("no-rep"), "").unwrap();
    let n = s.sidecar(&["--report-timeout", "3"]);
    let o = s.driver("start_profiler q1 && stop_profiler q1");
    assert!(o.status.success(), "{}", output_text(&o));
    let f = s.token("finished", "q1");
    wait_for("finished q1", Duration::from_secs(30), || f.exists());
    let m = check_published(&s, "q1", "qdstrm");
    assert_eq!(m["settled"], false);
    assert!(
        m["reason"].as_str().unwrap().contains("--report-timeout"),
        "{m}"
    );
    let (_, code) = s.shutdown(n);
    assert_eq!(code, Some(0), "{}", s.log(n));
}

#[test]
fn a_killed_sidecars_tokens_are_ignored_and_its_successor_serves_the_same_ids() {
    let mut s = Session::new();
    let first = s.sidecar(&[]);
    let o = s.driver("start_profiler q1");
    assert!(o.status.success(), "{}", output_text(&o));
    s.sidecars[first].kill().unwrap();
    s.sidecars[first].wait().unwrap();
    // Its tokens stay: a `ready` and q1's `started`.
    assert!(s.tokens.join(".nsys_sidecar_ready_w0").exists());
    assert!(s.token("started", "q1").exists());
    // A dead sidecar's `ready` does not count.
    let o = s.recorder(&["wait-ready", "--timeout", "2"]);
    assert!(!o.status.success(), "{}", output_text(&o));
    // The successor clears them, stops the collection the first one left
    // running (else its first `nsys start` would fail), and serves q1 again.
    let second = s.sidecar(&[]);
    let o = s.driver("start_profiler q1 && stop_profiler q1");
    assert!(o.status.success(), "{}\n{}", output_text(&o), s.log(second));
    let f = s.token("finished", "q1");
    wait_for("finished q1", Duration::from_secs(60), || f.exists());
    check_published(&s, "q1", "nsys-rep");
    assert!(
        s.log(second)
            .contains("an earlier sidecar left 1 collection"),
        "{}",
        s.log(second)
    );
    let aside: Vec<_> = fs::read_dir(s.staging.join("nsys_worker_0"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".earlier-") && n.ends_with("-q1"))
        .collect();
    assert_eq!(aside.len(), 1, "the first run's collection is kept aside");
    let (_, code) = s.shutdown(second);
    assert_eq!(code, Some(0), "{}", s.log(second));
}

#[test]
fn a_full_disk_while_publishing_keeps_the_report_and_shutdown_retries() {
    // Reports of 3 x 60,000 bytes into a 64 KiB tmpfs.
    let Some(tmpfs) = util::Tmpfs::mount(64 << 10) else {
        return;
    };
    let mut s = Session::with_env(&[("FAKE_NSYS_CHUNK", "60000")]);
    s.out = tmpfs.mnt.join("nsys");
    let n = s.sidecar(&[]);
    let o = s.driver("start_profiler q1 && stop_profiler q1");
    assert!(o.status.success(), "{}", output_text(&o));
    let e = s.token("error", "q1");
    wait_for("the error of q1", Duration::from_secs(60), || e.exists());
    let msg = fs::read_to_string(&e).unwrap();
    assert!(
        msg.contains("cannot publish the report of q1 yet") && msg.contains("No space left"),
        "{msg}"
    );
    // Nothing partial in the output; the report whole in staging.
    let names: Vec<_> = fs::read_dir(s.out.join("worker_0"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(names.is_empty(), "{names:?}");
    let staged = s
        .staging
        .join("nsys_worker_0/q1/nsys_worker_w0_q1.nsys-rep");
    assert_eq!(fs::metadata(&staged).unwrap().len(), 180_000);
    // Room again: shutdown publishes it.
    let grown = Command::new("mount")
        .args(["-o", "remount,size=1m"])
        .arg(&tmpfs.mnt)
        .status()
        .unwrap();
    assert!(grown.success());
    let (o, code) = s.shutdown(n);
    assert_eq!(code, Some(0), "{}\n{}", output_text(&o), s.log(n));
    check_published(&s, "q1", "nsys-rep");
    assert!(s.token("finished", "q1").exists() && !e.exists());
}

#[test]
fn a_full_disk_that_stays_full_fails_shutdown_naming_where_the_report_stays() {
    let Some(tmpfs) = util::Tmpfs::mount(64 << 10) else {
        return;
    };
    let mut s = Session::with_env(&[("FAKE_NSYS_CHUNK", "60000")]);
    s.out = tmpfs.mnt.join("nsys");
    let n = s.sidecar(&[]);
    let o = s.driver("start_profiler q1 && stop_profiler q1");
    assert!(o.status.success(), "{}", output_text(&o));
    let e = s.token("error", "q1");
    wait_for("the error of q1", Duration::from_secs(60), || e.exists());
    let (o, code) = s.shutdown(n);
    assert_eq!(code, Some(1), "{}", s.log(n));
    assert_eq!(o.status.code(), Some(1), "{}", output_text(&o));
    let text = util::stderr(&o);
    assert!(
        text.contains("not published") && text.contains("the report stays in"),
        "{text}"
    );
}

#[test]
fn a_perf_and_an_nsys_sidecar_serve_the_same_queries_and_the_job_page_lists_both() {
    if !util::require(
        util::perf_can_record(),
        "perf that can record (`perf record -e cpu-clock`; install linux-perf, run as root)",
    ) {
        return;
    }
    let mut s = Session::new();
    let perf_root = s.t.path().join("result/profiles/perf");
    let perf = s
        .cmd(recorder())
        .args(["sidecar", "--worker", "0", "--token-dir"])
        .arg(&s.tokens)
        .arg("--out")
        .arg(&perf_root)
        .arg("--pid")
        .arg(s.launch.id().to_string())
        .arg("--staging")
        .arg(s.t.path().join("perf-staging"))
        .args(["--symfs-limit", "64M", "--start-timeout", "30"])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    s.sidecars.push(perf);
    fn perf_cmd(s: &Session, args: &[&str]) -> Output {
        s.cmd(recorder())
            .args(args)
            .args(["--worker", "0", "--timeout", "60", "--token-dir"])
            .arg(&s.tokens)
            .output()
            .unwrap()
    }
    let o = perf_cmd(&s, &["wait-ready"]);
    assert!(o.status.success(), "{}", output_text(&o));
    // The perf sidecar's PERF_ROOT is not the nsys sidecar's to share.
    let o = s
        .cmd(recorder())
        .args(["sidecar", "--tool", "nsys", "--worker", "0", "--token-dir"])
        .arg(&s.tokens)
        .arg("--out")
        .arg(&perf_root)
        .arg("--staging")
        .arg(&s.staging)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", output_text(&o));
    assert!(util::stderr(&o).contains("give the nsys sidecar its own --out"));
    let n = s.sidecar(&[]);
    // One token directory, the same query ids, both tools.
    for q in ["q1", "q2"] {
        let o = perf_cmd(&s, &["start", "--query", q]);
        assert!(o.status.success(), "{}", output_text(&o));
        let o = s.driver(&format!(
            "start_profiler {q} && sleep 0.3 && stop_profiler {q}"
        ));
        assert!(o.status.success(), "{}", output_text(&o));
        let o = perf_cmd(&s, &["stop", "--query", q]);
        assert!(o.status.success(), "{}", output_text(&o));
    }
    let o = perf_cmd(&s, &["shutdown"]);
    assert!(o.status.success(), "{}", output_text(&o));
    let (o, code) = s.shutdown(n);
    assert_eq!(code, Some(0), "{}\n{}", output_text(&o), s.log(n));
    for q in ["q1", "q2"] {
        assert!(perf_root
            .join("worker_0")
            .join(q)
            .join("capture.json")
            .is_file());
        check_published(&s, q, "nsys-rep");
    }
    // `jobprof process` lists each query's nsys report beside its flamegraph.
    let o = util::jobprof()
        .arg("process")
        .arg(s.t.path().join("result"))
        .output()
        .unwrap();
    let text = output_text(&o);
    assert!(
        text.contains("2 Nsight Systems report(s) listed beside them"),
        "{text}"
    );
    let index = util::json(&perf_root.join("index.json"));
    for r in index["captures"].as_array().unwrap() {
        let q = r["query"].as_str().unwrap();
        assert_eq!(
            r["nsys"]["report"],
            format!("../nsys/worker_0/{q}/nsys_worker_w0_{q}.nsys-rep"),
            "{r}"
        );
        assert_eq!(r["nsys"]["settled"], true);
        assert!(r["nsys"]["wait_seconds"].as_f64().unwrap() > 0.0);
    }
    let html = fs::read_to_string(perf_root.join("index.html")).unwrap();
    assert!(
        html.contains("href=\"../nsys/worker_0/q1/nsys_worker_w0_q1.nsys-rep\""),
        "the page links the report"
    );
    assert!(html.contains("Nsight Systems") && html.contains("settled "));
}

/// Issue 48: Debian's `nsys stop` leaves the `.qdstrm` ("skipping
/// importation"); the sidecar converts it with the `QdstrmImporter` it
/// found in nsys's install tree, under its own `HOME` (the importer fills
/// `~/.nsightsystems` with a cache the live session shares, and the
/// session's next `stop` hung), and publishes the `.nsys-rep`.
#[test]
fn a_qdstrm_left_by_stop_is_converted_by_the_importer_under_its_own_home() {
    let mut s = Session::new();
    fs::write(s.state.join("skip-import"), "").unwrap();
    let host = s.t.path().join("host-linux-x64");
    fs::create_dir(&host).unwrap();
    let importer = host.join("QdstrmImporter");
    fs::write(
        &importer,
        format!(
            "#!/bin/sh\necho \"$HOME\" >> {}/importer-home\n\
             [ \"$1\" = -i ] || exit 2\ncat \"$2\" > \"${{2%.qdstrm}}.nsys-rep\"\n",
            s.state.display()
        ),
    )
    .unwrap();
    fs::set_permissions(&importer, fs::Permissions::from_mode(0o755)).unwrap();
    let n = s.sidecar(&[]);
    let o = s.driver("start_profiler q1 && stop_profiler q1");
    assert!(o.status.success(), "{}", output_text(&o));
    let f = s.token("finished", "q1");
    wait_for("finished q1", Duration::from_secs(30), || f.exists());
    let m = check_published(&s, "q1", "nsys-rep");
    assert_eq!(m["settled"], true, "{m}");
    assert!(
        m["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("converted from the .qdstrm"),
        "{m}"
    );
    let home = fs::read_to_string(s.state.join("importer-home")).unwrap();
    assert_eq!(
        home.trim(),
        s.staging
            .join("nsys_worker_0/.importer-home")
            .display()
            .to_string(),
        "the importer ran with the session's HOME"
    );
    let (_, code) = s.shutdown(n);
    assert_eq!(code, Some(0), "{}", s.log(n));
}

/// Issue 48: a `stop` that fails leaves nsys 2022.4's session stuck, and
/// every later `start` fails. The sidecar tries `nsys cancel`, every later
/// start's error token names the failed stop and the session, and
/// `shutdown` exits 1 naming the query without a report (before: the
/// starts failed with nsys's bare message).
#[test]
fn a_failed_stop_is_named_by_every_later_failed_start_and_fails_shutdown() {
    let mut s = Session::new();
    fs::write(s.state.join("fail-stop"), "").unwrap();
    let n = s.sidecar(&["--report-timeout", "2", "--session", "w0"]);
    let o = s.driver("start_profiler q1 && stop_profiler q1");
    assert!(o.status.success(), "{}", output_text(&o));
    let o = s.driver_env("start_profiler q2", &[("NSYS_START_WAIT", "5")]);
    assert_eq!(o.status.code(), Some(1), "{}", output_text(&o));
    let e = fs::read_to_string(s.token("error", "q2")).unwrap();
    assert!(
        e.contains("nsys stop of query q1 failed")
            && e.contains("nsys session w0 may be stuck")
            && e.contains("nsys cancel"),
        "{e}"
    );
    assert!(
        s.calls().contains("argv=cancel argv=--session=w0"),
        "{}",
        s.calls()
    );
    let (o, code) = s.shutdown(n);
    assert_eq!(code, Some(1), "{}", s.log(n));
    assert_eq!(o.status.code(), Some(1), "{}", output_text(&o));
    assert!(
        output_text(&o).contains("no report of query q1"),
        "{}",
        output_text(&o)
    );
}
