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
//!
//! The typed values and the parsers of the output formats are in
//! [`mod@jobs`]; the [`Slurm`] handle that builds the argv vectors and runs
//! the commands is in [`mod@commands`]; the array script and `jobprof repl`
//! are [`mod@array`] and [`mod@repl`].

pub mod array;
mod commands;
mod jobs;
pub mod repl;

use std::io;
use std::time::Duration;

pub use commands::{Slurm, StepSpec, Tool};
pub use jobs::{
    parse_hostnames, parse_jobs, parse_sbatch_parsable, parse_steps, JobId, JobInfo, JobState,
    ParseFailure, RunningJob, Step, JOB_FORMAT, STEP_FORMAT,
};

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

/// A Slurm error in the library's [`crate::Error`]: a layer's own, which
/// the binary maps to an exit code (`is_usage`: 2, else 1).
impl From<Error> for crate::Error {
    fn from(e: Error) -> Self {
        crate::Error::Layer(Box::new(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(s: &str) -> JobId {
        JobId::parse(s).unwrap()
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
