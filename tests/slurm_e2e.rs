//! End to end on a real single-node Slurm cluster (started by `.ci/run` with
//! `scripts/slurm-cluster.sh`): the example batch scripts of
//! `examples/slurm/` run as they are, parametrized only by environment
//! variables. (1) A benchmark job with a multi-threaded C workload, the
//! `jobprof-record` sidecar as an `--overlap` step, two queries between
//! `start` and `stop`, shutdown and the post-job `jobprof process` step.
//! (2) `jobprof reprocess --sbatch --submit` as an array job of two tasks
//! over five result directories. (3) A requeued job (same job id, same
//! token directory) whose first run lost its sidecar to SIGKILL: the second
//! run's `start` is not fooled by the dead sidecar's tokens. (4) The
//! benchmark script with `ENABLE_PERF=0`. Every job is cancelled when its
//! test ends.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use jobprof::sys::slurm::{self, JobId, JobState, Slurm};

use crate::util;

const SLURM: &str = "a Slurm cluster (run `eval \"$(scripts/slurm-cluster.sh start)\"` first)";

/// How long a job may take on the 2-core test cluster, other tests' jobs
/// included.
const JOB_TIMEOUT: Duration = Duration::from_secs(240);

/// A submitted job, cancelled on drop so that no test leaves one behind.
struct Job(JobId);

impl Drop for Job {
    fn drop(&mut self) {
        let _ = Slurm::new().cancel(&self.0);
    }
}

/// Waits until Slurm knows `want` lines for the job (array tasks) and all
/// of them are finished; returns their states.
fn wait_finished(job: &JobId, want: usize, log: &Path) -> Vec<JobState> {
    let slurm = Slurm::new();
    let start = Instant::now();
    loop {
        let lines = slurm.job(job).expect("squeue answers");
        if lines.len() >= want && lines.iter().all(|l| l.state.is_finished()) {
            return lines.into_iter().map(|l| l.state).collect();
        }
        assert!(
            start.elapsed() < JOB_TIMEOUT,
            "job {job} not finished after {JOB_TIMEOUT:?}: {lines:?}\n{}",
            fs::read_to_string(log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// Submits `script` with `sbatch --parsable`, the environment `env` added
/// to ours (the scripts read their parameters from it; `--export=ALL` is
/// sbatch's default).
fn sbatch(dir: &Path, script: &Path, env: &[(&str, String)]) -> Job {
    let out = Command::new("sbatch")
        .arg("--parsable")
        .arg(format!("--chdir={}", dir.display()))
        .arg(format!("--output={}/job-%j.out", dir.display()))
        .arg(script)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .stdin(Stdio::null())
        .output()
        .expect("run sbatch");
    assert!(out.status.success(), "sbatch: {}", util::output_text(&out));
    let id = slurm::parse_sbatch_parsable(&String::from_utf8_lossy(&out.stdout))
        .expect("sbatch --parsable prints a job id");
    Job(id)
}

/// tests/programs/NAME.c built into `dir` (the job runs it from there), or
/// a loud skip (a failure under CI).
fn workload(dir: &Path, name: &str) -> Option<PathBuf> {
    let exe = dir.join(name);
    let built = util::gcc(&format!("tests/programs/{name}.c"), &exe, &["-O1"]);
    let why = built
        .as_ref()
        .err()
        .map_or(String::new(), |e| format!(": {e}"));
    util::require(built.is_ok(), &format!("gcc (for the test workload){why}")).then_some(exe)
}

#[test]
fn slurm_benchmark_job_with_sidecar_and_post_job_processing() {
    if !cluster_and_perf() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let Some(workload) = workload(dir, "queries") else {
        return;
    };
    let result = dir.join("result_dir_e2e");
    let ctl = dir.join("ctl");
    fs::write(&ctl, "idle\n").unwrap();
    let set = |word: &str| format!("echo {word} > \"$CTL.tmp\" && mv \"$CTL.tmp\" \"$CTL\"");
    let env = [
        ("JOBPROF", env!("CARGO_BIN_EXE_jobprof").to_string()),
        ("JOBPROF_RECORD", util::recorder().display().to_string()),
        ("RESULT_DIR", result.display().to_string()),
        ("QUERIES", "qa qb".to_string()),
        ("EXE_NAME", "queries".to_string()),
        ("CTL", ctl.display().to_string()),
        ("WORKLOAD", workload.display().to_string()),
        (
            "WORKER_CMD",
            "exec \"$WORKLOAD\" \"$CTL\" \"$WORKER_PID_FILE\" 3".to_string(),
        ),
        // The query's threads run for 1.5 s; `idle` reaches them within
        // 20 ms, before `stop` switches sampling off.
        (
            "QUERY_CMD",
            format!(
                "echo \"$1\" > \"$CTL.tmp\" && mv \"$CTL.tmp\" \"$CTL\" && sleep 1.5 && {} && sleep 0.2",
                set("idle")
            ),
        ),
        ("STOP_CMD", set("exit")),
    ];
    let script = util::repo_root().join("examples/slurm/benchmark.sbatch");
    let job = sbatch(dir, &script, &env);
    let log = dir.join(format!("job-{}.out", job.0));
    let states = wait_finished(&job.0, 1, &log);
    let log_text = fs::read_to_string(&log).unwrap_or_default();
    assert_eq!(states, [JobState::Completed], "job log:\n{log_text}");
    assert!(log_text.contains("all 1 sidecar(s) ready"), "{log_text}");

    let worker = result.join("profiles/perf/worker_0");
    for (q, own, other) in [
        ("qa", "query_alpha", "query_beta"),
        ("qb", "query_beta", "query_alpha"),
    ] {
        let cap = worker.join(q);
        for f in [
            "capture.json",
            "perf-shards.tsv",
            ".postprocess-complete",
            "stacks.folded",
            "flamegraph.svg",
            "flamegraph.html",
            "summary.json",
        ] {
            assert!(
                cap.join(f).is_file(),
                "{q}: {f} missing; job log:\n{log_text}"
            );
        }
        let folded = fs::read_to_string(cap.join("stacks.folded")).unwrap();
        let own_samples: u64 = folded
            .lines()
            .filter(|l| l.contains(own))
            .filter_map(|l| l.rsplit_once(' ')?.1.parse::<u64>().ok())
            .sum();
        assert!(own_samples > 0, "{q}: no {own} in stacks.folded:\n{folded}");
        assert!(
            folded.contains("common_scan"),
            "{q}: the shared common_scan is missing from the stacks:\n{folded}"
        );
        assert!(
            !folded.contains(other),
            "{q}: the other query's {other} leaked into this capture:\n{folded}"
        );
        for pic in ["flamegraph.svg", "flamegraph.html"] {
            let body = fs::read_to_string(cap.join(pic)).unwrap();
            assert!(body.contains(own), "{q}: {pic} lacks {own}");
            assert!(!body.contains(other), "{q}: {pic} shows {other}");
        }
    }
}

/// Turns the demo copy in `dest` into what the old shell pipeline left:
/// key=value metadata, perf.script.gz, no perf.data, no capture.json.
fn make_old_layout(dest: &Path) {
    let q = dest.join("profiles/perf/worker_0/q01");
    let zst = fs::read(q.join("perf.script.zst")).unwrap();
    let text = zstd::decode_all(&zst[..]).unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut gz, &text).unwrap();
    fs::write(q.join("perf.script.gz"), gz.finish().unwrap()).unwrap();
    for f in fs::read_dir(&q).unwrap().flatten() {
        let name = f.file_name().to_string_lossy().into_owned();
        if name.starts_with("perf.data") || name == "perf.script.zst" || name == "capture.json" {
            fs::remove_file(f.path()).unwrap();
        }
    }
    fs::write(
        q.join("capture-metadata.txt"),
        util::old_pipeline_metadata(2, "1005", "cpu-clock:u"),
    )
    .unwrap();
}

#[test]
fn slurm_array_of_two_tasks_reprocesses_every_capture_exactly_once() {
    if !cluster_and_perf() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let root = dir.join("results");
    let mut captures = Vec::new();
    for i in 1..=5 {
        // Spread over two levels: reprocess finds them at any depth.
        let rd = root
            .join(format!("2025-0{}", i % 2))
            .join(format!("result_dir_100{i}"));
        fs::create_dir_all(&rd).unwrap();
        util::copy_demo(&rd);
        if i == 5 {
            make_old_layout(&rd);
        }
        captures.push(rd.join("profiles/perf/worker_0/q01"));
    }
    let out = Command::new(env!("CARGO_BIN_EXE_jobprof"))
        .args([
            "reprocess",
            "--sbatch",
            "--submit",
            "--array-count",
            "2",
            "--jobs",
            "1",
        ])
        .arg(&root)
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", util::output_text(&out));
    let id = slurm::parse_sbatch_parsable(&String::from_utf8_lossy(&out.stdout))
        .expect("--submit prints the job id");
    let job = Job(id);
    let logs: Vec<PathBuf> = (0..2)
        .map(|t| dir.join(format!("jobprof-reprocess-{}_{t}.out", job.0)))
        .collect();
    let states = wait_finished(&job.0, 2, &logs[0]);
    let texts: Vec<String> = logs
        .iter()
        .map(|l| fs::read_to_string(l).unwrap_or_default())
        .collect();
    assert_eq!(
        states,
        [JobState::Completed, JobState::Completed],
        "task logs:\n{}\n{}",
        texts[0],
        texts[1]
    );
    for (t, log) in texts.iter().enumerate() {
        assert!(
            log.contains(&format!("array task {t} of 2")),
            "task {t} log:\n{log}"
        );
    }
    // Every capture processed by exactly one task; both tasks worked.
    let canonical: Vec<PathBuf> = captures.iter().map(|c| c.canonicalize().unwrap()).collect();
    for (i, c) in canonical.iter().enumerate() {
        // The old pipeline's capture (the fifth) has jobprof's outputs in
        // its jobprof/.
        let out = if i == 4 { c.join("jobprof") } else { c.clone() };
        let needle = format!("{}: processed", c.display());
        let hits: Vec<usize> = texts
            .iter()
            .map(|t| t.lines().filter(|l| l.starts_with(&needle)).count())
            .collect();
        assert_eq!(
            hits.iter().sum::<usize>(),
            1,
            "{} processed {hits:?} times; logs:\n{}\n{}",
            c.display(),
            texts[0],
            texts[1]
        );
        for f in [
            ".postprocess-complete",
            "stacks.folded",
            "flamegraph.svg",
            "flamegraph.html",
        ] {
            assert!(out.join(f).is_file(), "{}: {f} missing", out.display());
        }
        let folded = fs::read_to_string(out.join("stacks.folded")).unwrap();
        assert!(folded.contains("demo_"), "{folded}");
    }
    for (t, log) in texts.iter().enumerate() {
        assert!(log.contains(": processed"), "task {t} did nothing:\n{log}");
    }
    // The old layout got the new outputs and kept its .gz.
    assert!(canonical[4].join("perf.script.gz").is_file());
    // A second run (all tasks' work seen at once) has nothing left to do.
    let again = Command::new(env!("CARGO_BIN_EXE_jobprof"))
        .arg("reprocess")
        .arg(&root)
        .env_remove("SLURM_ARRAY_TASK_ID")
        .output()
        .unwrap();
    assert_eq!(
        again.status.code(),
        Some(0),
        "{}",
        util::output_text(&again)
    );
    let table = String::from_utf8_lossy(&again.stdout);
    assert!(table.contains("skipped           5"), "{table}");
}

/// A running Slurm cluster and a perf that can record (both required under
/// CI; a loud skip otherwise).
fn cluster_and_perf() -> bool {
    util::require(util::slurm_available(), SLURM)
        && util::require(
            util::perf_can_record(),
            "perf that can record (linux-perf, as root)",
        )
}

/// The batch script of the requeue test: run 0 captures q1, starts q2 and
/// then loses its sidecar (SIGKILL, as when a node fails) and waits to be
/// requeued; run 1 (same job id, same token directory, same staging) calls
/// `start` at once, with run 0's `ready` token still there.
const REQUEUE_SCRIPT: &str = r#"#!/bin/bash
#SBATCH --requeue
#SBATCH --open-mode=append
set -eu
RUN=${SLURM_RESTART_COUNT:-0}
TOK=$DIR/tokens
mkdir -p "$TOK"
rec() { "$REC" "$@" --token-dir "$TOK" --worker 0; }
"$WORKLOAD" 2 "$DIR/cue-$RUN" 2000 20000 &
WPID=$!
for _ in $(seq 600); do [ -e "$DIR/cue-$RUN.ack" ] && break; sleep 0.1; done
sidecar() {
  "$REC" sidecar --token-dir "$TOK" --worker 0 --out "$DIR/out" --pid "$WPID" \
    --staging "$DIR/staging" --frequency 999 --symfs-limit 64M >"$DIR/sidecar-$RUN.log" 2>&1 &
  SIDECAR=$!
}
if [ "$RUN" = 0 ]; then
  sidecar
  rec wait-ready --timeout 120
  rec start --query q1 --timeout 120
  sleep 0.5
  rec stop --query q1 --timeout 120
  rec start --query q2 --timeout 120
  sleep 0.3
  kill -9 "$SIDECAR"
  echo "run 0: sidecar killed during q2"
  touch "$DIR/requeue-me"
  sleep 600
else
  # The driver comes first and finds run 0's `ready`: it must wait for the
  # new sidecar's own, not write `start` for the dead one.
  echo "run 1: start while run 0's tokens are still there"
  rec start --query q2 --timeout 120 &
  DRIVER=$!
  sleep 1
  sidecar
  wait "$DRIVER"
  sleep 0.5
  rec stop --query q2 --timeout 120
  rec start --query q3 --timeout 120
  sleep 0.5
  rec stop --query q3 --timeout 120
  rec shutdown --timeout 120
  kill "$WPID"
  echo "run 1: done"
fi
"#;

#[test]
fn slurm_requeued_job_is_not_fooled_by_stale_tokens() {
    if !cluster_and_perf() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let Some(workload) = workload(dir, "phases") else {
        return;
    };
    let script = dir.join("requeue.sbatch");
    fs::write(&script, REQUEUE_SCRIPT).unwrap();
    let env = [
        ("DIR", dir.display().to_string()),
        ("REC", util::recorder().display().to_string()),
        ("WORKLOAD", workload.display().to_string()),
    ];
    let job = sbatch(dir, &script, &env);
    let log = dir.join(format!("job-{}.out", job.0));
    let start = Instant::now();
    while !dir.join("requeue-me").exists() {
        assert!(
            start.elapsed() < JOB_TIMEOUT,
            "run 0 did not get to the requeue:\n{}",
            fs::read_to_string(&log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let scontrol = |args: &[&str]| {
        Command::new("scontrol")
            .args(args)
            .output()
            .is_ok_and(|o| o.status.success())
    };
    assert!(
        scontrol(&["requeue", &job.0.to_string()]),
        "scontrol requeue"
    );
    // A requeued job waits for a begin time (minutes); once it is pending
    // for that reason, start it again now.
    let id = format!("JobId={}", job.0);
    let since = Instant::now();
    loop {
        let state = Command::new("squeue")
            .args(["-h", "-j", &job.0.to_string(), "-o", "%T %r"])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default();
        // Not in the second of the requeue: slurmd refuses a job whose
        // credential is as old as the revocation ("Job credential revoked").
        if state == "PENDING BeginTime" && since.elapsed() > Duration::from_secs(3) {
            scontrol(&["update", &id, "StartTime=now"]);
        } else if dir.join("cue-1.ack").exists() {
            break;
        }
        assert!(
            since.elapsed() < JOB_TIMEOUT,
            "the requeued job did not run again (state `{state}`):\n{}",
            fs::read_to_string(&log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let states = wait_finished(&job.0, 1, &log);
    let log_text = fs::read_to_string(&log).unwrap_or_default();
    let sidecar_logs: String = ["sidecar-0.log", "sidecar-1.log"]
        .iter()
        .map(|f| fs::read_to_string(dir.join(f)).unwrap_or_default())
        .collect();
    assert_eq!(
        states,
        [JobState::Completed],
        "job log:\n{log_text}\nsidecars:\n{sidecar_logs}"
    );
    assert!(log_text.contains("run 1: done"), "{log_text}");
    for q in ["q1", "q2", "q3"] {
        let json = dir.join("out/worker_0").join(q).join("capture.json");
        let cap: jobprof_capture_format::Capture = serde_json::from_slice(
            &fs::read(&json).unwrap_or_else(|e| panic!("{q}: {e}\n{log_text}\n{sidecar_logs}")),
        )
        .unwrap();
        assert!(cap.valid, "{q}: {cap:?}");
    }
    // Run 0's unfinished q2 is kept beside, not mixed into run 1's q2.
    let kept = fs::read_dir(dir.join("staging/worker_0"))
        .unwrap()
        .flatten()
        .any(|e| e.file_name().to_string_lossy().starts_with("q2.abandoned-"));
    assert!(kept, "run 0's q2 is not kept in staging");
}

#[test]
fn slurm_benchmark_job_with_profiling_switched_off() {
    if !util::require(util::slurm_available(), SLURM) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let result = dir.join("result_dir_off");
    // Binaries that cannot run: with ENABLE_PERF=0 neither may be called.
    let env = [
        ("JOBPROF", "/nonexistent/jobprof".to_string()),
        ("JOBPROF_RECORD", "/nonexistent/jobprof-record".to_string()),
        ("RESULT_DIR", result.display().to_string()),
        ("QUERIES", "qa qb".to_string()),
        ("ENABLE_PERF", "0".to_string()),
        ("WORKER_CMD", "exec sleep 1".to_string()),
        (
            "QUERY_CMD",
            "echo \"$1\" >> \"$RESULT_DIR/ran\"".to_string(),
        ),
        ("STOP_CMD", "true".to_string()),
    ];
    let script = util::repo_root().join("examples/slurm/benchmark.sbatch");
    let job = sbatch(dir, &script, &env);
    let log = dir.join(format!("job-{}.out", job.0));
    let states = wait_finished(&job.0, 1, &log);
    let log_text = fs::read_to_string(&log).unwrap_or_default();
    assert_eq!(states, [JobState::Completed], "job log:\n{log_text}");
    assert_eq!(fs::read_to_string(result.join("ran")).unwrap(), "qa\nqb\n");
    assert!(!result.join("profiles").exists(), "{log_text}");
    assert!(!log_text.contains("sidecar"), "{log_text}");
}
