//! The [`Slurm`] handle: the program names (the real commands on `PATH`
//! unless [`Slurm::with_program`] replaces one), the argv vectors of every
//! command jobprof runs, and the runs themselves, through
//! [`crate::sys::exec`] with the time limit, their failures turned into
//! [`Error`]s that carry the argv and what the command said.

use std::ffi::{OsStr, OsString};
use std::io;
use std::time::Duration;

use super::jobs::{
    parse_hostnames, parse_jobs, parse_sbatch_parsable, parse_steps, JobId, JobInfo, JobState,
    RunningJob, Step, JOB_FORMAT, STEP_FORMAT,
};
use super::{Error, COMMAND_LIMIT};
use crate::sys::exec::{self, display_argv, ExternalCommand, Output};

/// How to run a command in an existing allocation with `srun`.
#[derive(Debug, Clone)]
pub struct StepSpec {
    /// The job whose allocation the step runs in.
    pub job: JobId,
    /// The node to run on (`-w`).
    pub node: String,
    /// Give the step a pseudo-terminal (`--pty`), for interactive programs.
    pub pty: bool,
    /// The program and its arguments.
    pub command: Vec<OsString>,
}

/// Which Slurm command a program name is for (see [`Slurm::with_program`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tool {
    /// `squeue`
    Squeue,
    /// `scontrol`
    Scontrol,
    /// `srun`
    Srun,
    /// `sbatch`
    Sbatch,
    /// `scancel`
    Scancel,
}

/// Slurm's command-line tools: argv builders, runners and parsers.
#[derive(Debug, Clone)]
pub struct Slurm {
    squeue: OsString,
    scontrol: OsString,
    srun: OsString,
    sbatch: OsString,
    scancel: OsString,
    limit: Duration,
}

impl Default for Slurm {
    fn default() -> Self {
        Slurm {
            squeue: "squeue".into(),
            scontrol: "scontrol".into(),
            srun: "srun".into(),
            sbatch: "sbatch".into(),
            scancel: "scancel".into(),
            limit: COMMAND_LIMIT,
        }
    }
}

/// Builds an argv from a program and its arguments.
fn argv<I, S>(program: &OsStr, args: I) -> Vec<OsString>
where
    I: IntoIterator<Item = S>,
    S: Into<OsString>,
{
    std::iter::once(program.to_owned())
        .chain(args.into_iter().map(Into::into))
        .collect()
}

impl Slurm {
    /// The real commands, looked up on `PATH`.
    pub fn new() -> Self {
        Self::default()
    }

    /// Uses `program` (a name on `PATH` or a path) for `tool`.
    pub fn with_program(mut self, tool: Tool, program: impl Into<OsString>) -> Self {
        let slot = match tool {
            Tool::Squeue => &mut self.squeue,
            Tool::Scontrol => &mut self.scontrol,
            Tool::Srun => &mut self.srun,
            Tool::Sbatch => &mut self.sbatch,
            Tool::Scancel => &mut self.scancel,
        };
        *slot = program.into();
        self
    }

    /// Gives every command `limit` to finish (instead of [`COMMAND_LIMIT`]).
    pub fn with_limit(mut self, limit: Duration) -> Self {
        self.limit = limit;
        self
    }

    /// `argv` as a command with this Slurm's time limit (for callers that
    /// run and log Slurm commands themselves, as the nsys flush does).
    pub fn command(&self, argv: Vec<OsString>) -> ExternalCommand {
        ExternalCommand::new(argv, self.limit)
    }

    // --- argv builders ---------------------------------------------------

    /// `squeue -j JOB -t all -h -o %N|%T|%A`: nodes, state and numeric id
    /// of a job in any state (finished jobs too, while Slurm remembers them).
    pub fn squeue_job_argv(&self, job: &JobId) -> Vec<OsString> {
        argv(
            &self.squeue,
            ["-j", job.as_str(), "-t", "all", "-h", "-o", JOB_FORMAT],
        )
    }

    /// `squeue -s -j JOB -h -o %i|%j`: the steps of a job.
    pub fn squeue_steps_argv(&self, job: &JobId) -> Vec<OsString> {
        argv(
            &self.squeue,
            ["-s", "-j", job.as_str(), "-h", "-o", STEP_FORMAT],
        )
    }

    /// `scontrol show hostnames LIST`: a compact node list, one host a line.
    pub fn hostnames_argv(&self, list: &str) -> Vec<OsString> {
        argv(&self.scontrol, ["show", "hostnames", list])
    }

    /// `sbatch --parsable ARGS...` (options, then the script and its
    /// arguments, or `--wrap CMD`).
    pub fn sbatch_argv<I, S>(&self, args: I) -> Vec<OsString>
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        let mut v = argv(&self.sbatch, ["--parsable"]);
        v.extend(args.into_iter().map(Into::into));
        v
    }

    /// `srun --jobid JOB -w NODE --ntasks=1 --overlap [--pty] COMMAND...`:
    /// one task on one node of a running job, sharing its resources.
    pub fn srun_step_argv(&self, spec: &StepSpec) -> Vec<OsString> {
        let mut v = argv(
            &self.srun,
            [
                "--jobid",
                spec.job.as_str(),
                "-w",
                spec.node.as_str(),
                "--ntasks=1",
                "--overlap",
            ],
        );
        if spec.pty {
            v.push("--pty".into());
        }
        v.extend(spec.command.iter().cloned());
        v
    }

    /// `scancel --signal=SIGNAL JOB`: signal a job's steps without ending it.
    pub fn scancel_signal_argv(&self, job: &JobId, signal: &str) -> Vec<OsString> {
        argv(
            &self.scancel,
            [format!("--signal={signal}"), job.as_str().to_owned()],
        )
    }

    /// `scancel --signal=SIGNAL STEP`: signal one step (`1234.5`) of a job,
    /// e.g. a profiler's connector step, leaving the other steps alone.
    pub fn scancel_step_signal_argv(&self, step: &Step, signal: &str) -> Vec<OsString> {
        argv(
            &self.scancel,
            [format!("--signal={signal}"), step.id.clone()],
        )
    }

    /// `scancel JOB`: cancel a job.
    pub fn scancel_argv(&self, job: &JobId) -> Vec<OsString> {
        argv(&self.scancel, [job.as_str()])
    }

    // --- running ---------------------------------------------------------

    /// Runs `argv` with stdin closed and this Slurm's time limit, and
    /// returns its output whatever its exit status; a failure to start or
    /// to finish in time is an error.
    fn output(&self, argv: &[OsString]) -> Result<Output, Error> {
        self.command(argv.to_vec()).run().map_err(|e| match e {
            exec::Error::Empty => Error::Spawn {
                program: String::new(),
                source: io::Error::new(io::ErrorKind::InvalidInput, "empty argv"),
            },
            exec::Error::Spawn { program, source } | exec::Error::Wait { program, source } => {
                Error::Spawn { program, source }
            }
            exec::Error::Timeout { limit, .. } => Error::Timeout {
                command: display_argv(argv),
                limit,
            },
        })
    }

    /// Runs `argv` and returns its stdout; a non-zero exit is an error.
    pub fn run(&self, argv: &[OsString]) -> Result<String, Error> {
        let out = self.output(argv)?;
        if !out.success() {
            return Err(failed(argv, &out));
        }
        Ok(out.stdout)
    }

    /// Every line `squeue` has for the job (several for an array job); an
    /// empty list when Slurm does not know the job.
    pub fn job(&self, job: &JobId) -> Result<Vec<JobInfo>, Error> {
        let argv = self.squeue_job_argv(job);
        let out = self.output(&argv)?;
        if !out.success() {
            // squeue exits 1 with "Invalid job id specified" for ids it has
            // never seen or has purged (MinJobAge); that is an answer.
            if out.stderr.contains("Invalid job id") {
                return Ok(Vec::new());
            }
            return Err(failed(&argv, &out));
        }
        parse_jobs(&out.stdout).map_err(|(what, output)| parse_error(&argv, what, output))
    }

    /// The state of a job: the first line's state, or `None` when unknown.
    pub fn job_state(&self, job: &JobId) -> Result<Option<JobState>, Error> {
        Ok(self.job(job)?.into_iter().next().map(|j| j.state))
    }

    /// The numeric id and hosts (in Slurm's order: the first is where the
    /// batch script runs) of a running job or array task. Errors say when the
    /// job is unknown or not running.
    pub fn running_job(&self, job: &JobId) -> Result<RunningJob, Error> {
        let lines = self.job(job)?;
        let Some(first) = lines.first() else {
            return Err(Error::UnknownJob { job: job.clone() });
        };
        let Some(running) = lines.iter().find(|j| j.state == JobState::Running) else {
            return Err(Error::NotRunning {
                job: job.clone(),
                state: first.state.clone(),
            });
        };
        let hosts = self.hostnames(&running.nodes)?;
        if hosts.is_empty() {
            return Err(parse_error(
                &self.hostnames_argv(&running.nodes),
                "at least one host name",
                String::new(),
            ));
        }
        Ok(RunningJob {
            id: running.id.clone(),
            hosts,
        })
    }

    /// Expands a compact node list (`node[01-03],gpu7`) into host names.
    pub fn hostnames(&self, list: &str) -> Result<Vec<String>, Error> {
        if list.trim().is_empty() {
            return Ok(Vec::new());
        }
        Ok(parse_hostnames(&self.run(&self.hostnames_argv(list))?))
    }

    /// The steps of a job (`1234.batch`, `1234.0`, ...); empty when the job
    /// has none or is unknown.
    pub fn steps(&self, job: &JobId) -> Result<Vec<Step>, Error> {
        let argv = self.squeue_steps_argv(job);
        let out = self.output(&argv)?;
        if !out.success() {
            if out.stderr.contains("Invalid job id") {
                return Ok(Vec::new());
            }
            return Err(failed(&argv, &out));
        }
        parse_steps(&out.stdout).map_err(|(what, output)| parse_error(&argv, what, output))
    }

    /// Submits a batch job (`sbatch --parsable ARGS...`) and returns its id.
    pub fn submit<I, S>(&self, args: I) -> Result<JobId, Error>
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        let argv = self.sbatch_argv(args);
        let out = self.run(&argv)?;
        parse_sbatch_parsable(&out).map_err(|(what, output)| parse_error(&argv, what, output))
    }

    /// Sends `signal` (`TERM`, `USR1`, ...) to a job's steps.
    pub fn signal(&self, job: &JobId, signal: &str) -> Result<(), Error> {
        self.run(&self.scancel_signal_argv(job, signal)).map(drop)
    }

    /// Cancels a job.
    pub fn cancel(&self, job: &JobId) -> Result<(), Error> {
        self.run(&self.scancel_argv(job)).map(drop)
    }
}

fn failed(argv: &[OsString], out: &Output) -> Error {
    let stderr = out.stderr.trim().to_owned();
    Error::Failed {
        command: display_argv(argv),
        status: out.status.to_string(),
        stderr: if stderr.is_empty() {
            "(nothing on stderr)".to_owned()
        } else {
            stderr
        },
    }
}

fn parse_error(argv: &[OsString], what: &'static str, mut output: String) -> Error {
    if output.len() > 300 {
        let mut cut = 300;
        while !output.is_char_boundary(cut) {
            cut -= 1;
        }
        output.truncate(cut);
        output.push_str("...");
    }
    Error::Parse {
        command: display_argv(argv),
        what,
        output,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strs(v: &[OsString]) -> Vec<&str> {
        v.iter().map(|s| s.to_str().unwrap()).collect()
    }

    fn job(s: &str) -> JobId {
        JobId::parse(s).unwrap()
    }

    #[test]
    fn squeue_job_asks_for_every_state() {
        let s = Slurm::new();
        assert_eq!(
            strs(&s.squeue_job_argv(&job("42"))),
            ["squeue", "-j", "42", "-t", "all", "-h", "-o", "%N|%T|%A"]
        );
        assert_eq!(
            strs(&s.squeue_steps_argv(&job("42"))),
            ["squeue", "-s", "-j", "42", "-h", "-o", "%i|%j"]
        );
    }

    #[test]
    fn programs_can_be_replaced() {
        let s = Slurm::new()
            .with_program(Tool::Squeue, "/opt/fake/squeue")
            .with_program(Tool::Scancel, "my-scancel");
        assert_eq!(s.squeue_job_argv(&job("1"))[0], "/opt/fake/squeue");
        assert_eq!(s.scancel_argv(&job("1"))[0], "my-scancel");
        assert_eq!(s.hostnames_argv("n1")[0], "scontrol");
    }

    #[test]
    fn srun_step_is_one_overlapping_task_on_one_node() {
        let s = Slurm::new();
        let mut spec = StepSpec {
            job: job("77"),
            node: "node03".into(),
            pty: false,
            command: vec![
                "presto-cli".into(),
                "--execute".into(),
                "SELECT 'a b';".into(),
            ],
        };
        assert_eq!(
            strs(&s.srun_step_argv(&spec)),
            [
                "srun",
                "--jobid",
                "77",
                "-w",
                "node03",
                "--ntasks=1",
                "--overlap",
                "presto-cli",
                "--execute",
                "SELECT 'a b';"
            ]
        );
        spec.pty = true;
        let v = s.srun_step_argv(&spec);
        assert_eq!(v[7], "--pty");
        assert_eq!(v[8], "presto-cli");
    }

    #[test]
    fn sbatch_and_scancel_argv() {
        let s = Slurm::new();
        assert_eq!(
            strs(&s.sbatch_argv(["--array=0-3", "job.sh", "arg 1"])),
            ["sbatch", "--parsable", "--array=0-3", "job.sh", "arg 1"]
        );
        assert_eq!(
            strs(&s.scancel_signal_argv(&job("9_2"), "USR1")),
            ["scancel", "--signal=USR1", "9_2"]
        );
        assert_eq!(strs(&s.scancel_argv(&job("9"))), ["scancel", "9"]);
        assert_eq!(
            strs(&s.hostnames_argv("n[1-2]")),
            ["scontrol", "show", "hostnames", "n[1-2]"]
        );
    }

    #[test]
    fn a_squeue_that_hangs_is_killed_at_the_limit() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let fake = d.path().join("squeue");
        std::fs::write(&fake, "#!/bin/sh\nsleep 30\n").unwrap();
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        let s = Slurm::new()
            .with_program(Tool::Squeue, &fake)
            .with_limit(Duration::from_millis(500));
        let t = std::time::Instant::now();
        let e = s.job(&job("42")).unwrap_err();
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "returned after {:?}",
            t.elapsed()
        );
        assert!(matches!(e, Error::Timeout { .. }), "{e:?}");
        assert!(e.to_string().contains("did not finish within 0s"), "{e}");
        assert!(matches!(s.steps(&job("42")), Err(Error::Timeout { .. })));
        assert_eq!(Slurm::new().limit, COMMAND_LIMIT);
    }
}
