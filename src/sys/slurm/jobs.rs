//! What Slurm says about jobs, as typed values: job ids as users type
//! them (validated so that none can pass for an option), job states, the
//! `squeue` lines jobprof asks for ([`JOB_FORMAT`], [`STEP_FORMAT`]), and
//! the parsers of `squeue`, `scontrol show hostnames` and `sbatch
//! --parsable` output.

use std::fmt;

use super::Error;

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
}
