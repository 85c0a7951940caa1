//! jobprof against a real single-node Slurm cluster, started with
//! `eval "$(scripts/slurm-cluster.sh start)"` (as `.ci/run` does). Only the
//! Presto CLI is a stand-in: a script that records its argv and where it ran.
//! Every job submitted here is cancelled when its test ends, pass or fail.

use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use jobprof::sys::slurm::{JobId, JobState, Slurm};

use crate::util;

const WHAT: &str = "a Slurm cluster (run `eval \"$(scripts/slurm-cluster.sh start)\"` first)";

/// How long a job may take to start or end on the 1-node test cluster
/// (other tests' jobs may hold both cores for a while).
const JOB_TIMEOUT: Duration = Duration::from_secs(90);

/// A submitted job, cancelled on drop so that no test leaves one behind.
struct Job {
    id: JobId,
}

impl Drop for Job {
    fn drop(&mut self) {
        // Already finished jobs make scancel complain; that is fine here.
        let _ = Slurm::new().cancel(&self.id);
    }
}

/// Submits `sbatch --wrap CMD` with its output and working dir in `dir`.
fn submit(dir: &Path, wrap: &str) -> Job {
    submit_with(dir, &[], wrap)
}

/// Like [`submit`], with further sbatch options.
fn submit_with(dir: &Path, options: &[&str], wrap: &str) -> Job {
    let dir = dir.to_str().expect("temp dir is UTF-8");
    let mut args = vec![
        "--job-name=jobprof-test".to_owned(),
        "--ntasks=1".to_owned(),
        format!("--chdir={dir}"),
        format!("--output={dir}/slurm-%j.out"),
    ];
    args.extend(options.iter().map(|o| o.to_string()));
    args.extend(["--wrap".to_owned(), wrap.to_owned()]);
    let id = Slurm::new().submit(args).expect("sbatch submits");
    Job { id }
}

/// Polls the job's state every 100 ms until `done` says so; panics after
/// JOB_TIMEOUT.
fn wait_for(job: &JobId, what: &str, done: impl Fn(&JobState) -> bool) -> JobState {
    let slurm = Slurm::new();
    let mut reached = None;
    util::wait_every(
        &format!("job {job} to be {what}"),
        JOB_TIMEOUT,
        Duration::from_millis(100),
        || {
            reached = slurm
                .job_state(job)
                .expect("squeue answers")
                .filter(|s| done(s));
            reached.is_some()
        },
    );
    reached.unwrap()
}

/// Writes an executable `presto-cli` stand-in into `dir` that records one
/// `arg=` line per argument, then where it ran, into `$JOBPROF_TEST_RECORD`.
fn fake_presto_cli(dir: &Path) {
    let path = dir.join("presto-cli");
    std::fs::write(
        &path,
        "#!/bin/sh\n\
         out=\"$JOBPROF_TEST_RECORD\"\n\
         {\n\
           for a in \"$@\"; do printf 'arg=%s\\n' \"$a\"; done\n\
           printf 'hostname=%s\\n' \"$(hostname)\"\n\
           printf 'job=%s\\n' \"$SLURM_JOB_ID\"\n\
           printf 'node=%s\\n' \"$SLURMD_NODENAME\"\n\
         } > \"$out.tmp\" && mv \"$out.tmp\" \"$out\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Runs `jobprof repl ARGS` with the fake CLI first on PATH and stdin closed
/// (so no --pty), recording into `record`.
fn jobprof_repl(dir: &Path, record: &Path, args: &[OsString]) -> Output {
    let path = std::env::join_paths(std::iter::once(dir.to_path_buf()).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))
    .unwrap();
    Command::new(env!("CARGO_BIN_EXE_jobprof"))
        .arg("repl")
        .args(args)
        .env("PATH", path)
        .env("JOBPROF_TEST_RECORD", record)
        .stdin(Stdio::null())
        .output()
        .expect("jobprof runs")
}

fn short_hostname() -> String {
    let out = Command::new("hostname").arg("-s").output().unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

#[test]
fn cluster_runs_a_batch_job_to_completion() {
    if !util::require(util::slurm_available(), WHAT) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let job = submit(dir.path(), "hostname -s > ran-on.txt");
    let state = wait_for(&job.id, "finished", JobState::is_finished);
    assert_eq!(state, JobState::Completed);

    let slurm = Slurm::new();
    let info = slurm.job(&job.id).unwrap();
    assert_eq!(info.len(), 1, "{info:?}");
    let hosts = slurm.hostnames(&info[0].nodes).unwrap();
    let ran_on = String::from_utf8(util::read(&dir.path().join("ran-on.txt"))).unwrap();
    assert_eq!(hosts, [ran_on.trim()]);
    assert_eq!(hosts, [short_hostname()]);
}

#[test]
fn repl_runs_the_cli_on_the_coordinator_of_a_running_job() {
    if !util::require(util::slurm_available(), WHAT) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    fake_presto_cli(dir.path());
    let sql = dir.path().join("q1.sql");
    std::fs::write(&sql, "SELECT 1;\n").unwrap();
    let record = dir.path().join("record.txt");

    let job = submit(dir.path(), "sleep 300");
    wait_for(&job.id, "running", |s| *s == JobState::Running);
    let slurm = Slurm::new();
    let node = slurm.running_job(&job.id).unwrap().hosts[0].clone();

    let out = jobprof_repl(
        dir.path(),
        &record,
        &[
            job.id.as_str().into(),
            "--port".into(),
            "9311".into(),
            "--catalog".into(),
            "tpch".into(),
            "--schema".into(),
            "sf1".into(),
            "--user".into(),
            "bench".into(),
            "--file".into(),
            sql.clone().into(),
            "--".into(),
            "--output-format".into(),
            "SELECT 'a b'; -- not a shell".into(),
        ],
    );
    assert!(
        out.status.success(),
        "jobprof repl failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );

    let recorded = String::from_utf8(util::read(&record)).unwrap();
    let args: Vec<&str> = recorded
        .lines()
        .filter_map(|l| l.strip_prefix("arg="))
        .collect();
    let server = format!("http://{node}:9311");
    let sql = sql.to_str().unwrap();
    assert_eq!(
        args,
        [
            "--server",
            &server,
            "--catalog",
            "tpch",
            "--schema",
            "sf1",
            "--user",
            "bench",
            "--file",
            sql,
            "--output-format",
            "SELECT 'a b'; -- not a shell",
        ]
    );
    // It ran as a step of the job, on the coordinator node.
    let field = |key: &str| {
        recorded
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .unwrap_or_else(|| panic!("no {key} in {recorded}"))
            .to_owned()
    };
    assert_eq!(field("job="), job.id.as_str());
    assert_eq!(field("node="), node);
    assert_eq!(field("hostname=").split('.').next().unwrap(), node);

    // The job is still running: the CLI's step overlapped it, and the batch
    // step is listed among its steps.
    let steps = slurm.steps(&job.id).unwrap();
    assert!(
        steps.iter().any(|s| s.id == format!("{}.batch", job.id)),
        "{steps:?}"
    );
    slurm.cancel(&job.id).unwrap();
    let state = wait_for(&job.id, "finished", JobState::is_finished);
    assert_eq!(state, JobState::Cancelled);
}

#[test]
fn repl_runs_in_an_array_task_given_as_job_underscore_index() {
    if !util::require(util::slurm_available(), WHAT) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    fake_presto_cli(dir.path());
    let record = dir.path().join("record.txt");
    // One task, index 3: `JOB_3` names it, which `srun --jobid` refuses;
    // jobprof must hand srun the task's own numeric id instead.
    let job = submit_with(dir.path(), &["--array=3"], "sleep 300");
    let task = JobId::parse(&format!("{}_3", job.id)).unwrap();
    wait_for(&task, "running", |s| *s == JobState::Running);
    let running = Slurm::new().running_job(&task).unwrap();

    let out = jobprof_repl(dir.path(), &record, &[task.as_str().into()]);
    assert!(
        out.status.success(),
        "jobprof repl failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let recorded = String::from_utf8(util::read(&record)).unwrap();
    assert!(
        recorded.contains(&format!("\njob={}\n", running.id)),
        "{recorded}"
    );
}

#[test]
fn repl_refuses_a_finished_job() {
    if !util::require(util::slurm_available(), WHAT) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    fake_presto_cli(dir.path());
    let record = dir.path().join("record.txt");
    let job = submit(dir.path(), "true");
    wait_for(&job.id, "finished", JobState::is_finished);

    let out = jobprof_repl(dir.path(), &record, &[job.id.as_str().into()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!("job {} is COMPLETED, not RUNNING", job.id)),
        "{stderr}"
    );
    assert!(!record.exists(), "the CLI must not have run");
}

#[test]
fn repl_refuses_an_unknown_job() {
    if !util::require(util::slurm_available(), WHAT) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    fake_presto_cli(dir.path());
    let record = dir.path().join("record.txt");
    // Slurm's job ids stop at 67108863; this one is far beyond any the test
    // cluster hands out.
    let out = jobprof_repl(dir.path(), &record, &["67000000".into()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("job 67000000 is unknown to Slurm"),
        "{stderr}"
    );
    assert!(!record.exists(), "the CLI must not have run");
}
