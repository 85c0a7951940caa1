//! `jobprof repl`: the Presto CLI on a running job's coordinator node.
//!
//! The coordinator of a benchmark job is the first host of its node list
//! (`squeue -j JOB -h -o %N`, expanded with `scontrol show hostnames`). This
//! module asks Slurm for it and builds the argv that runs the CLI there as an
//! overlapping step of the job:
//! `srun --jobid JOB -w NODE --ntasks=1 --overlap [--pty] CLI --server
//! http://NODE:PORT --catalog C [--schema S] [--user U] [--file SQL] EXTRA...`.
//!
//! It only queries Slurm; it does not start the CLI. The binary executes the
//! argv in place of itself, so the CLI owns the terminal and its exit status
//! becomes jobprof's. Nothing passes through a shell.

use std::ffi::OsString;
use std::path::PathBuf;

use crate::sys::slurm::{JobId, Slurm, StepSpec};
use crate::{Error, Result};

/// What `jobprof repl` was asked to do.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ReplOptions {
    /// The running job whose coordinator to connect to.
    pub job: JobId,
    /// The coordinator's HTTP port.
    pub port: u16,
    /// `--catalog` for the CLI.
    pub catalog: String,
    /// `--schema` for the CLI, when given.
    pub schema: Option<String>,
    /// `--user` for the CLI, when given.
    pub user: Option<String>,
    /// A SQL file for the CLI to execute (`--file`) instead of prompting.
    pub file: Option<PathBuf>,
    /// The CLI program (name on the node's `PATH`, or a path).
    pub cli: OsString,
    /// Further arguments handed to the CLI verbatim.
    pub extra: Vec<OsString>,
    /// Ask `srun` for a pseudo-terminal (interactive use).
    pub pty: bool,
}

impl ReplOptions {
    /// Options with the documented defaults: port 9200, catalog `hive`,
    /// `presto-cli`, no pseudo-terminal.
    pub fn new(job: JobId) -> Self {
        ReplOptions {
            job,
            port: 9200,
            catalog: "hive".to_owned(),
            schema: None,
            user: None,
            file: None,
            cli: "presto-cli".into(),
            extra: Vec::new(),
            pty: false,
        }
    }
}

/// The resolved command: where it runs and the full argv (`srun ...`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplPlan {
    /// The coordinator node.
    pub node: String,
    /// The server URL handed to the CLI.
    pub server: String,
    /// The argv to execute, starting with `srun`.
    pub argv: Vec<OsString>,
}

/// Finds the job's coordinator and builds the `srun` argv for the CLI.
///
/// Errors: the job is unknown or not running (exit code 2), the SQL file
/// cannot be read (2), Slurm's commands fail (1).
pub fn plan(slurm: &Slurm, opts: &ReplOptions) -> Result<ReplPlan> {
    if opts.cli.is_empty() || opts.cli.to_string_lossy().starts_with('-') {
        return Err(Error::Usage(format!(
            "--cli {:?}: expected a program name or path",
            opts.cli
        )));
    }
    // The CLI runs on the node in the same working directory (srun keeps
    // it), but an absolute path still works when the step lands elsewhere.
    // Checking here turns a typo into a clear local error instead of a
    // remote CLI failure.
    let file = match &opts.file {
        Some(path) => {
            std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
            Some(std::path::absolute(path).map_err(|e| Error::io(path, e))?)
        }
        None => None,
    };
    let job = slurm.running_job(&opts.job)?;
    let node = job.hosts[0].clone();
    Ok(plan_for_node(slurm, opts, &job.id, node, file))
}

/// Builds the argv for a known job id and coordinator `node` (no Slurm
/// queries). `job` is the numeric id `srun` accepts.
fn plan_for_node(
    slurm: &Slurm,
    opts: &ReplOptions,
    job: &JobId,
    node: String,
    file: Option<PathBuf>,
) -> ReplPlan {
    let server = format!("http://{node}:{}", opts.port);
    let mut cli: Vec<OsString> = vec![
        opts.cli.clone(),
        "--server".into(),
        server.clone().into(),
        "--catalog".into(),
        opts.catalog.clone().into(),
    ];
    if let Some(schema) = &opts.schema {
        cli.extend(["--schema".into(), schema.into()]);
    }
    if let Some(user) = &opts.user {
        cli.extend(["--user".into(), user.into()]);
    }
    if let Some(file) = file {
        cli.extend(["--file".into(), file.into_os_string()]);
    }
    cli.extend(opts.extra.iter().cloned());
    let argv = slurm.srun_step_argv(&StepSpec {
        job: job.clone(),
        node: node.clone(),
        pty: opts.pty,
        command: cli,
    });
    ReplPlan { node, server, argv }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strs(v: &[OsString]) -> Vec<&str> {
        v.iter().map(|s| s.to_str().unwrap()).collect()
    }

    #[test]
    fn defaults_give_the_minimal_command() {
        let opts = ReplOptions::new(JobId::parse("12").unwrap());
        let p = plan_for_node(&Slurm::new(), &opts, &opts.job, "n1".into(), None);
        assert_eq!(p.server, "http://n1:9200");
        assert_eq!(
            strs(&p.argv),
            [
                "srun",
                "--jobid",
                "12",
                "-w",
                "n1",
                "--ntasks=1",
                "--overlap",
                "presto-cli",
                "--server",
                "http://n1:9200",
                "--catalog",
                "hive"
            ]
        );
    }

    #[test]
    fn every_option_lands_in_order_after_the_cli() {
        let mut opts = ReplOptions::new(JobId::parse("12").unwrap());
        opts.port = 8080;
        opts.catalog = "tpch".into();
        opts.schema = Some("sf1".into());
        opts.user = Some("bench".into());
        opts.cli = "/opt/presto/bin/presto".into();
        opts.extra = vec!["--output-format".into(), "CSV".into()];
        opts.pty = true;
        let p = plan_for_node(
            &Slurm::new(),
            &opts,
            &opts.job,
            "gpu7".into(),
            Some("/q/one.sql".into()),
        );
        assert_eq!(
            strs(&p.argv[7..]),
            [
                "--pty",
                "/opt/presto/bin/presto",
                "--server",
                "http://gpu7:8080",
                "--catalog",
                "tpch",
                "--schema",
                "sf1",
                "--user",
                "bench",
                "--file",
                "/q/one.sql",
                "--output-format",
                "CSV"
            ]
        );
    }

    #[test]
    fn a_cli_that_looks_like_an_option_is_refused() {
        let mut opts = ReplOptions::new(JobId::parse("12").unwrap());
        opts.cli = "--pty".into();
        assert!(matches!(plan(&Slurm::new(), &opts), Err(Error::Usage(_))));
    }

    #[test]
    fn a_missing_sql_file_is_named_before_asking_slurm() {
        let mut opts = ReplOptions::new(JobId::parse("12").unwrap());
        opts.file = Some("/nonexistent/q.sql".into());
        // squeue would fail loudly if it were run: point it at nothing.
        let slurm =
            Slurm::new().with_program(crate::sys::slurm::Tool::Squeue, "/nonexistent/squeue");
        let err = plan(&slurm, &opts).unwrap_err();
        assert!(err.to_string().contains("/nonexistent/q.sql"), "{err}");
        assert_eq!(err.exit_code(), Some(crate::ExitCode::Usage));
    }
}
