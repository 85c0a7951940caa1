//! `jobprof-record sidecar --tool nsys` against the real Nsight Systems CLI
//! (Debian's 2022.4.2, installed by `.ci/run`): a CPU-only Python worker
//! under `nsys launch --session-new=S -t osrt`, driven through its queries
//! by the users' `start_profiler`/`stop_profiler` (tests/nsys/nsys-profiler.sh).
//! Every nsys call runs under a time limit, and so does the worker.
//!
//! What the real CLI does that the fake did not (docs/nsys.md): `stop`
//! returns only once the report is written; Debian's `nsys stop` leaves a
//! `.qdstrm` ("skipping importation") that the sidecar converts with
//! `QdstrmImporter`; a `stop` of a collection with CPU sampling or
//! context switches can hang (a lost wakeup in nsys 2022.4's agent) and
//! leave the session in `Generation`, refusing every later `start`: the
//! sidecar turns both off on 2022.4 unless asked for.

use std::fs;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use super::real_profiles;
use crate::util::{self, have, output_text, recorder, wait_for};

const FUNCTIONS: &str = "tests/nsys/nsys-profiler.sh";

/// A loop of work per query: CPU and OS runtime calls (`-t osrt`).
const WORKER: &str = "\
import os, sys, time
open(sys.argv[1], 'w').write(str(os.getpid()))
while True:
    s = 0
    for i in range(100000):
        s += i * i
    time.sleep(0.005)
";

/// One real nsys session and the sidecar serving it.
struct Real {
    t: tempfile::TempDir,
    session: String,
    tokens: PathBuf,
    staging: PathBuf,
    out: PathBuf,
    launch: Child,
    sidecar: Option<Child>,
}

/// `timeout SECS nsys ARGS`, stdin from /dev/null.
fn nsys(secs: u32, args: &[&str]) -> Output {
    Command::new("timeout")
        .arg(secs.to_string())
        .arg("nsys")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

impl Real {
    /// `None` (skipped, or failed under CI) without the real nsys.
    fn new(name: &str) -> Option<Real> {
        let real = have("nsys")
            && nsys(30, &["--version"])
                .stdout
                .starts_with(b"NVIDIA Nsight Systems");
        if !util::require(
            real,
            "the real Nsight Systems CLI (`nsys`: Debian non-free's nsight-systems-target and \
             nsight-systems, as .ci/run installs them)",
        ) {
            return None;
        }
        let t = tempfile::tempdir().unwrap();
        let session = format!("jobprof-{name}-{}", std::process::id());
        let tokens = t.path().join("nsys-tokens");
        fs::create_dir(&tokens).unwrap();
        fs::write(t.path().join("worker.py"), WORKER).unwrap();
        let log = fs::File::create(t.path().join("launch.log")).unwrap();
        let launch = Command::new("timeout")
            .args(["240", "nsys", "launch"])
            .arg(format!("--session-new={session}"))
            .args(["-t", "osrt", "python3"])
            .arg(t.path().join("worker.py"))
            .arg(t.path().join("worker.pid"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .process_group(0)
            .spawn()
            .unwrap();
        let r = Real {
            staging: t.path().join("staging"),
            out: t.path().join("result/profiles/nsys"),
            t,
            session,
            tokens,
            launch,
            sidecar: None,
        };
        wait_for("nsys launch", Duration::from_secs(40), || {
            String::from_utf8_lossy(&nsys(20, &["sessions", "list"]).stdout).contains(&r.session)
                && r.t.path().join("worker.pid").exists()
        });
        // nsys 2022.4: a collection started within seconds of `launch`
        // makes a later `stop` hang (docs/nsys.md); 10 s after, none did.
        std::thread::sleep(Duration::from_secs(10));
        Some(r)
    }

    /// Starts the sidecar on the named session and waits until it is ready.
    fn sidecar(&mut self) {
        let log = fs::File::create(self.t.path().join("sidecar.log")).unwrap();
        let child = Command::new(recorder())
            .args([
                "sidecar", "--tool", "nsys", "--worker", "0", "--settle", "1",
            ])
            .args(["--report-timeout", "25", "--call-timeout", "40"])
            .arg("--session")
            .arg(&self.session)
            .arg("--token-dir")
            .arg(&self.tokens)
            .arg("--out")
            .arg(&self.out)
            .arg("--staging")
            .arg(&self.staging)
            .stdin(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        self.sidecar = Some(child);
        let o = self.recorder(&["wait-ready", "--timeout", "60"]);
        assert!(o.status.success(), "{}\n{}", output_text(&o), self.log());
    }

    fn recorder(&self, args: &[&str]) -> Output {
        Command::new(recorder())
            .args(args)
            .args(["--tool", "nsys", "--worker", "0", "--token-dir"])
            .arg(&self.tokens)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    fn driver(&self, script: &str) -> Output {
        let functions = Path::new(env!("CARGO_MANIFEST_DIR")).join(FUNCTIONS);
        Command::new("bash")
            .arg("-c")
            .arg(format!(". {}\n{script}", functions.display()))
            .env("NSYS_TOKEN_DIR", &self.tokens)
            .env("NSYS_WORKERS", "0")
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    fn token(&self, kind: &str, q: &str) -> PathBuf {
        self.tokens.join(format!(".nsys_{kind}_token_w0_{q}"))
    }

    fn log(&self) -> String {
        let read = |f: &str| fs::read_to_string(self.t.path().join(f)).unwrap_or_default();
        format!(
            "--- sidecar log:\n{}--- nsys launch log:\n{}",
            read("sidecar.log"),
            read("launch.log")
        )
    }

    /// Waits for the answer to the stop of `q`: `finished` or `error`.
    fn answer(&self, q: &str) -> Result<String, String> {
        let (f, e) = (self.token("finished", q), self.token("error", q));
        wait_for(
            &format!("the answer to {q}"),
            Duration::from_secs(70),
            || f.exists() || e.exists(),
        );
        fs::read_to_string(&f).map_err(|_| fs::read_to_string(&e).unwrap_or_default())
    }

    /// Shutdown's output and the sidecar's exit code.
    fn shutdown(&mut self) -> (Output, Option<i32>) {
        let o = self.recorder(&["shutdown", "--timeout", "90"]);
        let code = self.sidecar.take().unwrap().wait().unwrap().code();
        (o, code)
    }
}

impl Drop for Real {
    fn drop(&mut self) {
        if let Some(c) = &mut self.sidecar {
            let _ = c.kill();
            let _ = c.wait();
        }
        let s = format!("--session={}", self.session);
        let _ = nsys(20, &["shutdown", &s, "--kill=sigkill"]);
        // The worker runs in the launcher's own process group.
        if let Some(pid) = fs::read_to_string(self.t.path().join("worker.pid"))
            .ok()
            .and_then(|p| p.trim().parse::<i32>().ok())
        {
            // SAFETY: kill has no memory-safety preconditions.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
        // SAFETY: kill has no memory-safety preconditions.
        unsafe {
            libc::kill(-(self.launch.id() as i32), libc::SIGKILL);
        }
        let _ = self.launch.wait();
        // The session's agent outlives a stuck session's shutdown.
        let agent = format!("--session-name={}", self.session);
        for e in fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
                continue;
            };
            let cmd = fs::read(e.path().join("cmdline")).unwrap_or_default();
            if cmd.split(|b| *b == 0).any(|a| a == agent.as_bytes()) {
                // SAFETY: kill has no memory-safety preconditions.
                unsafe {
                    libc::kill(pid, libc::SIGKILL);
                }
            }
        }
    }
}

/// Six queries back to back, each published as a real `.nsys-rep`
/// (converted by the sidecar's QdstrmImporter), and `shutdown` exits 0.
/// Before issue 48's fix a `stop` hung now and then here (by hand too):
/// nsys 2022.4's agent loses the wakeup that ends its Linux perf reader
/// (docs/nsys.md), so on 2022.4 the sidecar starts collections with
/// `--sample=none --cpuctxsw=none` unless asked for sampling.
#[test]
fn the_real_nsys_publishes_six_queries_back_to_back() {
    let Some(mut r) = Real::new("six") else {
        return;
    };
    r.sidecar();
    let queries = ["q1", "q2", "q3", "q4", "q5", "q6"];
    for q in queries {
        let o = r.driver(&format!(
            "start_profiler {q} && sleep 1 && stop_profiler {q}"
        ));
        assert!(o.status.success(), "{q}: {}\n{}", output_text(&o), r.log());
        let answer = r.answer(q);
        assert!(answer.is_ok(), "{q}: {answer:?}\n{}", r.log());
    }
    let (o, code) = r.shutdown();
    assert!(o.status.success(), "{}\n{}", output_text(&o), r.log());
    assert_eq!(code, Some(0), "{}", r.log());
    assert!(
        output_text(&o).contains(&format!("published {} report(s)", queries.len())),
        "{}",
        output_text(&o)
    );
    for q in queries {
        check_real(&r, q);
        read_as_nsys_stats_reads(&r, q);
    }
}

/// The published report of `q` read by `jobprof process` through the real
/// `nsys export`: its stacks hold exactly the report's CPU samples (none,
/// as the sidecar asks on 2022.4) and its OS runtime table equals `nsys
/// stats` of the same report.
fn read_as_nsys_stats_reads(r: &Real, q: &str) {
    let rep = r
        .out
        .join("worker_0")
        .join(q)
        .join(format!("nsys_worker_w0_{q}.nsys-rep"));
    let o = real_profiles::jobprof_process(&rep);
    assert!(o.status.success(), "{q}: {}", output_text(&o));
    let out = rep.with_extension("nsys-rep.jobprof");
    let s = util::json(&out.join("summary.json"));
    let sqlite = r.t.path().join(format!("{q}.stats.sqlite"));
    let (osrt, _) = real_profiles::report_names();
    let osrt_stats = real_profiles::stats(&rep, osrt, &sqlite);
    assert!(
        !osrt_stats.is_empty(),
        "{q}: no OS runtime calls in the report"
    );
    assert_eq!(
        real_profiles::table(&out.join("osrt.tsv")),
        osrt_stats,
        "{q}"
    );
    let samples = real_profiles::cpu_samples(&sqlite);
    assert_eq!(s["samples"], samples, "{q}: {s}");
}

/// A published real report: converted by the sidecar, settled, its argv
/// with the session right after the command.
fn check_real(r: &Real, q: &str) {
    let dir = r.out.join("worker_0").join(q);
    let m = util::json(&dir.join("nsys-capture.json"));
    assert_eq!(m["kind"], "nsys-rep", "{q}: {m}");
    assert_eq!(m["settled"], true, "{q}: {m}");
    assert!(
        m["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("QdstrmImporter"),
        "{q}: {m}"
    );
    let rep = dir.join(format!("nsys_worker_w0_{q}.nsys-rep"));
    let bytes = fs::metadata(&rep).unwrap().len();
    assert!(bytes > 10_000, "{q}: a {bytes}-byte report");
    assert_eq!(m["bytes"], bytes);
    let session = format!("--session={}", r.session);
    for call in ["start", "stop"] {
        // Right after the command: nsys 2022.4's stop hangs after a
        // `start -o OUT -f true --session=S`.
        assert_eq!(m[call]["argv"][2], session.as_str(), "{call}: {m}");
        assert_eq!(m[call]["exit_code"], 0, "{call}: {m}");
    }
    // No Linux perf collection on 2022.4 unless asked for (issue 48).
    assert_eq!(m["start"]["argv"][3], "--sample=none", "{m}");
    assert_eq!(m["start"]["argv"][4], "--cpuctxsw=none", "{m}");
}
