//! The teardown flush of a profiled job: stop the Nsight sessions, take a
//! baseline, signal the connector steps so their ranks write reports, then
//! collect them.
//!
//! External programs (`nsight-slurm`, and `squeue`/`scancel` through the
//! argv builders of [`crate::sys::slurm`]) are run from argv vectors (never a
//! shell string) with a time limit; each command line and its result is
//! logged. A failing command is logged and the sequence goes on: skipping the
//! later steps would lose reports, and the collection decides the outcome. This module does not kill jobs or steps
//! beyond the one `SIGTERM` per connector step.

use std::ffi::OsString;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use super::collect::{collect_logged, Baseline, CollectOptions, Collection};
use super::{Error, Log};
use crate::sys::progress::Progress;
use crate::sys::slurm::{self, JobId, Slurm, Step};

/// The step name `nsight-slurm` gives its connector steps.
pub const DEFAULT_CONNECTOR_STEP_NAME: &str = "nsight-slurm-connector";

/// Seconds `nsight-slurm stop` may take to stop the sessions (its own limit).
pub const STOP_TIMEOUT_S: u32 = 30;

/// What `flush` does.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct FlushOptions {
    /// The Slurm job (or array task).
    pub job: JobId,
    /// Steps with this name are sent `SIGTERM`.
    pub connector_step_name: String,
    /// The `nsight-slurm` executable (or its install home, whose
    /// `bin/nsight-slurm` is used); `None` skips `nsight-slurm stop`.
    pub nsight_slurm: Option<PathBuf>,
    /// How wrapper calls run (environment, working directory, and the
    /// `nsight-slurm.out` log) when the flush is part of a set-up run's
    /// teardown; `None` runs `nsight-slurm stop` plainly.
    pub wrapper: Option<super::setup::Wrapper>,
    /// Slurm's commands (`squeue`, `scancel` from `PATH` by default).
    pub slurm: Slurm,
    /// How the reports are then collected.
    pub collect: CollectOptions,
}

impl FlushOptions {
    /// Flush options with the default connector step name and Slurm's
    /// commands from `PATH`.
    pub fn new(job: JobId, collect: CollectOptions) -> Self {
        FlushOptions {
            job,
            connector_step_name: DEFAULT_CONNECTOR_STEP_NAME.to_string(),
            nsight_slurm: None,
            wrapper: None,
            slurm: Slurm::new(),
            collect,
        }
    }
}

/// One external command as an argv (program first), no shell involved,
/// with the time it may take.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExternalCommand {
    /// The program (a name looked up on `PATH`, or a path), then its arguments.
    pub argv: Vec<OsString>,
    /// How long it may run before it is killed.
    pub limit: Duration,
    /// Variables set on top of jobprof's own environment.
    pub env: Vec<(OsString, OsString)>,
    /// The working directory (jobprof's own when `None`).
    pub cwd: Option<PathBuf>,
}

/// Reads a child's pipe to its end on a thread of its own (so neither
/// pipe can fill and block the child); the text, lossily decoded.
fn drain<R: Read + Send + 'static>(r: Option<R>) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(mut r) = r {
            let _ = r.read_to_end(&mut buf);
        }
        String::from_utf8_lossy(&buf).into_owned()
    })
}

/// What an external command did.
#[derive(Debug)]
pub struct CommandOutcome {
    /// Exit status, `None` when it could not start or was killed at its limit.
    pub status: Option<ExitStatus>,
    /// Its standard output.
    pub stdout: String,
    /// Its standard error.
    pub stderr: String,
    /// Why it did not run to completion, if it did not.
    pub failure: Option<String>,
}

impl CommandOutcome {
    /// True when it ran and exited 0.
    pub fn success(&self) -> bool {
        self.status.is_some_and(|s| s.success())
    }
}

/// How long a Slurm query or signal may take before it is killed.
const SLURM_COMMAND_LIMIT: Duration = Duration::from_secs(60);

impl ExternalCommand {
    /// A command from an argv (program first).
    pub fn new(argv: Vec<OsString>, limit: Duration) -> Self {
        ExternalCommand {
            argv,
            limit,
            env: Vec::new(),
            cwd: None,
        }
    }

    /// The same command with variables `env` set and run in `cwd`.
    pub fn with_env(mut self, env: &[(OsString, OsString)], cwd: Option<&Path>) -> Self {
        self.env.extend(env.iter().cloned());
        self.cwd = cwd.map(Path::to_path_buf);
        self
    }

    /// `nsight-slurm stop --job JOB --timeout 30`.
    pub fn nsight_slurm_stop(nsight_slurm: &Path, job: &JobId) -> Self {
        let mut argv = vec![nsight_slurm.as_os_str().to_owned()];
        argv.extend(
            [
                "stop",
                "--job",
                job.as_str(),
                "--timeout",
                &STOP_TIMEOUT_S.to_string(),
            ]
            .map(OsString::from),
        );
        ExternalCommand::new(argv, Duration::from_secs(u64::from(STOP_TIMEOUT_S) + 30))
    }

    fn program(&self) -> String {
        self.argv
            .first()
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default()
    }

    /// The command line as a shell would need it typed (for logs only).
    pub fn display(&self) -> String {
        slurm::display_argv(&self.argv)
    }

    /// Runs it with its output captured, killing it at its time limit.
    pub fn run(&self) -> CommandOutcome {
        let mut child = match self.spawn() {
            Ok(c) => c,
            Err(failure) => {
                return CommandOutcome {
                    status: None,
                    stdout: String::new(),
                    stderr: String::new(),
                    failure: Some(failure),
                }
            }
        };
        let out = drain(child.stdout.take());
        let err = drain(child.stderr.take());
        let (status, failure) = self.wait_limited(&mut child);
        CommandOutcome {
            status,
            stdout: out.join().unwrap_or_default(),
            stderr: err.join().unwrap_or_default(),
            failure,
        }
    }

    /// Starts it with piped output in a process group of its own: at the
    /// limit the whole group is killed, so a grandchild holding the pipes
    /// open cannot outlive it. Err says why it did not start.
    fn spawn(&self) -> std::result::Result<std::process::Child, String> {
        let Some((program, args)) = self.argv.split_first() else {
            return Err("empty command line".into());
        };
        let mut command = Command::new(program);
        command
            .args(args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .process_group(0);
        if let Some(dir) = &self.cwd {
            command.current_dir(dir);
        }
        command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("could not start {}: {e}", self.program()))
    }

    /// Waits for `child` up to the limit, then kills its group: the exit
    /// status, or why there is none.
    fn wait_limited(
        &self,
        child: &mut std::process::Child,
    ) -> (Option<ExitStatus>, Option<String>) {
        let started = Instant::now();
        loop {
            match child.try_wait() {
                Ok(Some(s)) => return (Some(s), None),
                Ok(None) if started.elapsed() >= self.limit => {
                    // SAFETY: signalling the group we created for the child
                    // (its pgid is its pid); the child is not reaped yet, so
                    // the id cannot have been reused.
                    unsafe {
                        libc::kill(-(child.id() as libc::pid_t), libc::SIGKILL);
                    }
                    let _ = child.kill();
                    let _ = child.wait();
                    let why = format!("killed after {}s without finishing", self.limit.as_secs());
                    return (None, Some(why));
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(20)),
                Err(e) => return (None, Some(format!("waiting for it failed: {e}"))),
            }
        }
    }

    /// Runs it, logging the command line before and the result after.
    pub fn run_logged(&self, log: &Log) -> CommandOutcome {
        log.line(format!("running: {}", self.display()));
        let outcome = self.run();
        let name = self.program();
        let detail = |s: &str| {
            let s = s.trim();
            if s.is_empty() {
                String::new()
            } else {
                format!(": {}", s.lines().take(5).collect::<Vec<_>>().join(" | "))
            }
        };
        match (&outcome.failure, outcome.status) {
            (Some(why), _) => log.line(format!("{name} failed: {why}")),
            (None, Some(s)) if s.success() => {
                log.line(format!("{name} exited 0{}", detail(&outcome.stdout)))
            }
            (None, Some(s)) => log.line(format!(
                "{name} failed ({s}){}",
                detail(if outcome.stderr.trim().is_empty() {
                    &outcome.stdout
                } else {
                    &outcome.stderr
                })
            )),
            (None, None) => {}
        }
        outcome
    }
}

/// `nsight-slurm` given as the executable or as its install home.
fn nsight_slurm_executable(p: &Path) -> PathBuf {
    if p.is_dir() {
        p.join("bin").join("nsight-slurm")
    } else {
        p.to_path_buf()
    }
}

/// Runs the teardown sequence and collects the reports.
///
/// Order: `nsight-slurm stop --job J --timeout 30` (when the wrapper is
/// given), baseline, `squeue -s -j J -h -o "%i|%j"`, `scancel --signal=TERM`
/// for every step named like the connector, then [`fn@super::collect::collect`] with the
/// baseline (reports that existed before, unchanged, are ignored, except
/// those of this job).
pub fn flush(opts: &FlushOptions, progress: &Progress) -> Result<Collection, Error> {
    if !opts.collect.report_root.is_dir() {
        return Err(Error::Usage(format!(
            "--report-root {}: not an existing directory; it must be the shared directory \
             the ranks write reports to",
            opts.collect.report_root.display()
        )));
    }
    let log = Log::new(
        progress,
        opts.collect.timeout,
        &format!("flushing job {}", opts.job),
    );
    if let Some(ns) = &opts.nsight_slurm {
        let exe = nsight_slurm_executable(ns);
        let stop = ExternalCommand::nsight_slurm_stop(&exe, &opts.job);
        match &opts.wrapper {
            Some(w) => {
                let stop = stop.with_env(&w.env(), Some(&w.log_dir));
                if let (_, Some(e)) = w.run(&stop, &log) {
                    log.line(format!("warning: {e}"));
                }
            }
            None => {
                stop.run_logged(&log);
            }
        }
    }
    let job = numeric_job(&opts.slurm, &opts.job, &log);
    let baseline = Baseline::take(&opts.collect)?.keep_job(job.as_str());
    log.line(format!(
        "baseline: {} report(s) already present are ignored while unchanged \
         (except job {job}'s own)",
        baseline.len(),
    ));
    let steps = connector_steps(&opts.slurm, &job, &opts.connector_step_name, &log);
    if steps.is_empty() {
        log.line(format!(
            "no running step named {} in job {job}; collecting whatever the ranks write",
            opts.connector_step_name
        ));
    }
    for step in &steps {
        ExternalCommand::new(
            opts.slurm.scancel_step_signal_argv(step, "TERM"),
            SLURM_COMMAND_LIMIT,
        )
        .run_logged(&log);
    }
    let result = collect_logged(&opts.collect, Some(baseline), &log);
    log.finish();
    result
}

/// An array task (`1234_5`) runs under its own numeric job ID, which is
/// what its report names and step IDs carry; ask `squeue` for it. Plain
/// IDs are returned as they are; when the lookup fails, the ID as given.
fn numeric_job(slurm: &Slurm, job: &JobId, log: &Log) -> JobId {
    if !job.as_str().contains('_') {
        return job.clone();
    }
    let out = ExternalCommand::new(slurm.squeue_job_argv(job), SLURM_COMMAND_LIMIT).run_logged(log);
    let found = out
        .success()
        .then(|| slurm::parse_jobs(&out.stdout).ok())
        .flatten()
        .and_then(|jobs| jobs.into_iter().next())
        .map(|j| j.id);
    match found {
        Some(id) => {
            log.line(format!("array task {job} runs as job {id}"));
            id
        }
        None => {
            log.line(format!(
                "could not resolve array task {job} to its job ID; using it as given"
            ));
            job.clone()
        }
    }
}

/// The job's steps named `name`, from `squeue -s -j JOB -h -o "%i|%j"`;
/// none when squeue fails or prints something unexpected (logged).
fn connector_steps(slurm: &Slurm, job: &JobId, name: &str, log: &Log) -> Vec<Step> {
    let out =
        ExternalCommand::new(slurm.squeue_steps_argv(job), SLURM_COMMAND_LIMIT).run_logged(log);
    if !out.success() {
        return Vec::new();
    }
    match slurm::parse_steps(&out.stdout) {
        Ok(steps) => steps.into_iter().filter(|s| s.name == name).collect(),
        Err((what, line)) => {
            log.line(format!(
                "squeue printed {line:?}, expected {what}; no step is signalled"
            ));
            Vec::new()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argv_builders_match_the_documented_commands() {
        let job = JobId::parse("77").unwrap();
        let stop = ExternalCommand::nsight_slurm_stop(Path::new("/opt/ns/bin/nsight-slurm"), &job);
        assert_eq!(
            stop.display(),
            "/opt/ns/bin/nsight-slurm stop --job 77 --timeout 30"
        );
        let slurm = Slurm::new();
        let sq = ExternalCommand::new(slurm.squeue_steps_argv(&job), SLURM_COMMAND_LIMIT);
        assert_eq!(sq.display(), "squeue -s -j 77 -h -o '%i|%j'");
        let step = Step {
            id: "77.3".into(),
            name: DEFAULT_CONNECTOR_STEP_NAME.into(),
        };
        assert_eq!(
            slurm.scancel_step_signal_argv(&step, "TERM"),
            ["scancel", "--signal=TERM", "77.3"].map(OsString::from)
        );
    }

    #[test]
    fn commands_that_cannot_start_or_fail_are_reported() {
        let c = ExternalCommand::new(
            vec!["/nonexistent/jobprof-none".into()],
            Duration::from_secs(5),
        );
        let o = c.run();
        assert!(!o.success());
        assert!(o.failure.unwrap().contains("could not start"));
        let f = ExternalCommand::new(vec!["false".into()], Duration::from_secs(5)).run();
        assert!(f.status.is_some() && !f.success());
    }

    #[test]
    fn the_whole_process_group_is_killed_at_the_limit() {
        // A grandchild that keeps the output pipes open: without the group
        // kill, reading them would wait for its 30 seconds.
        let c = ExternalCommand::new(
            vec!["sh".into(), "-c".into(), "sleep 30 & sleep 30".into()],
            Duration::from_millis(500),
        );
        let t = std::time::Instant::now();
        let o = c.run();
        assert!(o.failure.unwrap().contains("killed"));
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "returned after {:?}",
            t.elapsed()
        );
    }
}
