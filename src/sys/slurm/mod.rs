//! Slurm's commands as argv vectors, and their output as typed values.
//!
//! jobprof talks to Slurm only through its command-line tools (`squeue`,
//! `scontrol`, `srun`, `sbatch`, `scancel`). This module builds their argument
//! vectors (`Vec<OsString>`, never a shell string, so job names, paths and SQL
//! pass through verbatim), runs them, and parses the few output formats it
//! asks for (`squeue -o` with `|` separators, `scontrol show hostnames`,
//! `sbatch --parsable`). Program names default to the real commands found on
//! `PATH`; [`Slurm::with_program`] points one at another executable (a fake
//! that records its argv in tests, or a site wrapper).
//!
//! Every command run here (`squeue`, `scontrol`, `sbatch`, `scancel`) goes
//! through [`crate::sys::exec`] with a time limit, [`COMMAND_LIMIT`] (60 s)
//! unless [`Slurm::with_limit`] says otherwise: a controller that does not
//! answer makes the call return [`Error::Timeout`] instead of hanging.
//! (`srun` is not run here: `jobprof repl` hands it the terminal.)
//!
//! It does not decide what to run in a job (that is `repl`, `reprocess`, ...),
//! does not print, and does not retry: a failing command is an [`Error`] that
//! carries the argv and what the command said on stderr.

pub mod array;
pub mod repl;

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::io;
use std::time::Duration;

use crate::sys::exec::{self, display_argv, ExternalCommand, Output};

/// How long one Slurm command may run before its process group is killed
/// (Slurm's own client gives up on a silent controller after its
/// `MessageTimeout`, 10 s by default, and a few retries).
pub const COMMAND_LIMIT: Duration = Duration::from_secs(60);

/// What can go wrong when asking Slurm something.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A job id that is not `N` or `N_M` (an array task).
    #[error(
        "'{0}' is not a Slurm job id: expected a number such as 1234 \
         (or an array task such as 1234_5)"
    )]
    BadJobId(String),

    /// A Slurm command could not be started at all.
    #[error(
        "cannot run `{program}`: {source}; is Slurm's client installed and on PATH \
         (and SLURM_CONF set when the cluster's slurm.conf is not the default)?"
    )]
    Spawn {
        /// The program that was run.
        program: String,
        /// What the operating system said.
        #[source]
        source: io::Error,
    },

    /// A Slurm command did not finish within its time limit (it was killed).
    #[error(
        "`{command}` did not finish within {}s and was killed; is the Slurm controller \
         up and answering (`scontrol ping`)?",
        limit.as_secs()
    )]
    Timeout {
        /// The argv, joined for display only.
        command: String,
        /// The limit it ran past.
        limit: Duration,
    },

    /// A Slurm command ran and exited unsuccessfully.
    #[error("`{command}` failed ({status}): {stderr}")]
    Failed {
        /// The argv, joined for display only.
        command: String,
        /// How it exited.
        status: String,
        /// Its standard error, trimmed (or a note that it was empty).
        stderr: String,
    },

    /// A Slurm command printed something this module does not understand.
    #[error("`{command}` printed unexpected output ({what}): {output:?}")]
    Parse {
        /// The argv, joined for display only.
        command: String,
        /// What was expected.
        what: &'static str,
        /// The offending text (trimmed to a reasonable length).
        output: String,
    },

    /// Slurm does not know the job (never existed, or purged long ago).
    #[error(
        "job {job} is unknown to Slurm (squeue does not list it); \
         check the id with `squeue -u $USER`"
    )]
    UnknownJob {
        /// The job asked about.
        job: JobId,
    },

    /// The job exists but is not running, so nothing can run inside it.
    #[error(
        "job {job} is {state}, not RUNNING: nothing can run inside it \
         (`squeue -j {job} -t all` shows its state)"
    )]
    NotRunning {
        /// The job asked about.
        job: JobId,
        /// Its current state as Slurm names it.
        state: JobState,
    },
}

impl Error {
    /// Whether the user's input (not the cluster or jobprof) is at fault:
    /// a malformed, unknown or not-running job. These map to exit code 2.
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            Error::BadJobId(_) | Error::UnknownJob { .. } | Error::NotRunning { .. }
        )
    }
}

/// A Slurm job id as users type it: `1234`, or `1234_5` for an array task.
///
/// Validated so that it can never be mistaken for an option in an argv.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct JobId(String);

impl JobId {
    /// Parses and validates a job id.
    pub fn parse(text: &str) -> Result<Self, Error> {
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        let ok = match text.split_once('_') {
            Some((job, task)) => digits(job) && digits(task),
            None => digits(text),
        };
        if ok {
            Ok(JobId(text.to_owned()))
        } else {
            Err(Error::BadJobId(text.to_owned()))
        }
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::str::FromStr for JobId {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        JobId::parse(s)
    }
}

/// A job's state as `squeue -o %T` prints it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobState {
    /// Waiting for resources.
    Pending,
    /// Running (steps can be started in it).
    Running,
    /// Suspended.
    Suspended,
    /// Finishing: some processes are still being cleaned up.
    Completing,
    /// Finished with exit code 0.
    Completed,
    /// Cancelled by a user or administrator.
    Cancelled,
    /// Finished with a non-zero exit code.
    Failed,
    /// Killed at its time limit.
    Timeout,
    /// Killed because a node failed.
    NodeFail,
    /// Killed for exceeding its memory.
    OutOfMemory,
    /// Any other state (Slurm has many rarer ones), spelled as Slurm prints it.
    Other(String),
}

impl JobState {
    /// Parses the long state name (`%T`).
    pub fn parse(text: &str) -> Self {
        match text.trim() {
            "PENDING" => JobState::Pending,
            "RUNNING" => JobState::Running,
            "SUSPENDED" => JobState::Suspended,
            "COMPLETING" => JobState::Completing,
            "COMPLETED" => JobState::Completed,
            "CANCELLED" => JobState::Cancelled,
            "FAILED" => JobState::Failed,
            "TIMEOUT" => JobState::Timeout,
            "NODE_FAIL" => JobState::NodeFail,
            "OUT_OF_MEMORY" => JobState::OutOfMemory,
            other => JobState::Other(other.to_owned()),
        }
    }

    /// Slurm's own name for the state.
    pub fn as_str(&self) -> &str {
        match self {
            JobState::Pending => "PENDING",
            JobState::Running => "RUNNING",
            JobState::Suspended => "SUSPENDED",
            JobState::Completing => "COMPLETING",
            JobState::Completed => "COMPLETED",
            JobState::Cancelled => "CANCELLED",
            JobState::Failed => "FAILED",
            JobState::Timeout => "TIMEOUT",
            JobState::NodeFail => "NODE_FAIL",
            JobState::OutOfMemory => "OUT_OF_MEMORY",
            JobState::Other(s) => s,
        }
    }

    /// True for states a job never leaves.
    pub fn is_finished(&self) -> bool {
        !matches!(
            self,
            JobState::Pending
                | JobState::Running
                | JobState::Suspended
                | JobState::Completing
                | JobState::Other(_)
        )
    }
}

impl fmt::Display for JobState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One line of `squeue -j J -t all -h -o %N|%T|%A`: a job (or array task).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobInfo {
    /// The plain numeric id (`%A`): for a started array task this is its own
    /// id, which `srun --jobid` needs (it does not take `1234_5`).
    pub id: JobId,
    /// The compact node list (`node[01-04]`); empty while pending.
    pub nodes: String,
    /// The job's state.
    pub state: JobState,
}

/// One line of `squeue -s -j J -h -o %i|%j`: a step of a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// The step id: `1234.0`, `1234.batch`, `1234.extern`, ...
    pub id: String,
    /// The step's name (usually the program it runs).
    pub name: String,
}

/// The format asked of `squeue` for a job's nodes, state and numeric id.
pub const JOB_FORMAT: &str = "%N|%T|%A";

/// A running job as [`Slurm::running_job`] finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunningJob {
    /// The numeric id to hand to `srun --jobid` (an array task's own id).
    pub id: JobId,
    /// Its hosts in Slurm's order; never empty.
    pub hosts: Vec<String>,
}
/// The format asked of `squeue -s` for a job's steps.
pub const STEP_FORMAT: &str = "%i|%j";

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

/// A parse failure: what was expected, and the offending text.
pub type ParseFailure = (&'static str, String);

/// Parses `squeue -h -o %N|%T|%A` output: one [`JobInfo`] per non-empty
/// line.
pub fn parse_jobs(text: &str) -> Result<Vec<JobInfo>, ParseFailure> {
    const WHAT: &str = "NODES|STATE|JOBID lines";
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|line| {
            let fields: Vec<&str> = line.split('|').collect();
            let [nodes, state, id] = fields[..] else {
                return Err((WHAT, line.to_owned()));
            };
            if state.is_empty() {
                return Err((WHAT, line.to_owned()));
            }
            Ok(JobInfo {
                id: JobId::parse(id).map_err(|_| (WHAT, line.to_owned()))?,
                nodes: nodes.to_owned(),
                state: JobState::parse(state),
            })
        })
        .collect()
}

/// Parses `squeue -s -h -o %i|%j` output: one [`Step`] per non-empty line.
/// The name is everything after the first `|` (names may contain `|`).
pub fn parse_steps(text: &str) -> Result<Vec<Step>, ParseFailure> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let (id, name) = line
                .split_once('|')
                .ok_or(("STEPID|NAME lines", line.to_owned()))?;
            let id = id.trim();
            if id.is_empty() || !id.contains('.') {
                return Err(("STEPID|NAME lines", line.to_owned()));
            }
            Ok(Step {
                id: id.to_owned(),
                name: name.trim_end().to_owned(),
            })
        })
        .collect()
}

/// Parses `scontrol show hostnames` output: one host per non-empty line.
pub fn parse_hostnames(text: &str) -> Vec<String> {
    text.split_whitespace().map(str::to_owned).collect()
}

/// Parses `sbatch --parsable` output: `JOBID` or `JOBID;CLUSTER` on the
/// last non-empty line (sbatch may print warnings before it).
pub fn parse_sbatch_parsable(text: &str) -> Result<JobId, ParseFailure> {
    let line = text
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty())
        .ok_or(("a job id", text.to_owned()))?;
    let id = line.split(';').next().unwrap_or(line);
    JobId::parse(id).map_err(|_| ("a job id", text.to_owned()))
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
    fn job_ids_accept_numbers_and_array_tasks_only() {
        assert_eq!(job("1234").as_str(), "1234");
        assert_eq!(job("1234_7").as_str(), "1234_7");
        for bad in [
            "", "-1", "--help", "12a", "1234_", "_3", "1 2", "1;rm", "1_2_3",
        ] {
            assert!(
                matches!(JobId::parse(bad), Err(Error::BadJobId(_))),
                "{bad:?} accepted"
            );
        }
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
    fn jobs_parse_nodes_and_states() {
        let jobs =
            parse_jobs("node[01-03]|RUNNING|7\n|PENDING|8\n\nvm|COMPLETED|9\nx|BOOT_FAIL|10\n")
                .unwrap();
        let info = |id: &str, nodes: &str, state| JobInfo {
            id: job(id),
            nodes: nodes.into(),
            state,
        };
        assert_eq!(
            jobs,
            [
                info("7", "node[01-03]", JobState::Running),
                info("8", "", JobState::Pending),
                info("9", "vm", JobState::Completed),
                info("10", "x", JobState::Other("BOOT_FAIL".into())),
            ]
        );
        assert!(parse_jobs("").unwrap().is_empty());
        for bad in [
            "RUNNING\n",
            "vm|RUNNING\n",
            "vm||7\n",
            "vm|RUNNING|x\n",
            "a|RUNNING|7|8\n",
        ] {
            assert!(parse_jobs(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn states_round_trip_and_know_when_finished() {
        for s in [
            "PENDING",
            "RUNNING",
            "SUSPENDED",
            "COMPLETING",
            "COMPLETED",
            "CANCELLED",
            "FAILED",
            "TIMEOUT",
            "NODE_FAIL",
            "OUT_OF_MEMORY",
            "REQUEUED",
        ] {
            assert_eq!(JobState::parse(s).as_str(), s);
        }
        assert!(JobState::Completed.is_finished());
        assert!(JobState::Cancelled.is_finished());
        assert!(!JobState::Running.is_finished());
        assert!(!JobState::Completing.is_finished());
    }

    #[test]
    fn steps_parse_ids_and_names_with_bars() {
        let steps = parse_steps("5.batch|batch\n5.0|presto|cli\n5.extern|extern\n").unwrap();
        assert_eq!(steps.len(), 3);
        assert_eq!(steps[0].id, "5.batch");
        assert_eq!(steps[1].name, "presto|cli");
        assert!(parse_steps("").unwrap().is_empty());
        assert!(parse_steps("5 batch\n").is_err());
        assert!(parse_steps("5|batch\n").is_err());
    }

    #[test]
    fn hostnames_one_per_line() {
        assert_eq!(parse_hostnames("node01\nnode02\n\n"), ["node01", "node02"]);
        assert!(parse_hostnames("").is_empty());
    }

    #[test]
    fn sbatch_parsable_with_and_without_cluster() {
        assert_eq!(parse_sbatch_parsable("1234\n").unwrap(), job("1234"));
        assert_eq!(
            parse_sbatch_parsable("1234;mycluster\n").unwrap(),
            job("1234")
        );
        assert_eq!(
            parse_sbatch_parsable("sbatch: warning: something\n88\n").unwrap(),
            job("88")
        );
        assert!(parse_sbatch_parsable("").is_err());
        assert!(parse_sbatch_parsable("Submitted batch job 5\n").is_err());
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

    #[test]
    fn usage_errors_are_the_users_fault() {
        assert!(Error::BadJobId("x".into()).is_usage());
        assert!(Error::UnknownJob { job: job("1") }.is_usage());
        assert!(Error::NotRunning {
            job: job("1"),
            state: JobState::Completed
        }
        .is_usage());
        assert!(!Error::Parse {
            command: "squeue".into(),
            what: "x",
            output: String::new()
        }
        .is_usage());
    }
}
