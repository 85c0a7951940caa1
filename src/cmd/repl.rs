//! `jobprof repl`: open the Presto CLI against a running job's coordinator.

use std::ffi::OsString;
use std::io::IsTerminal;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Command;

use clap::Args;
use jobprof::sys::exec::display_argv;
use jobprof::sys::progress::{LogLines, Progress as _};
use jobprof::sys::slurm::repl::{self, ReplOptions};
use jobprof::sys::slurm::{self, JobId, Slurm};

/// Open the Presto CLI on the coordinator of a running Slurm job (or run a SQL file).
///
/// Open the Presto CLI on the coordinator (first node) of a running Slurm
/// job, as an `srun --overlap` step inside the job; with --file, run a SQL
/// file instead of prompting.
///
/// jobprof prints the srun command it runs on stderr, then becomes it.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  jobprof repl 123456 --schema tpch_sf100
  jobprof repl 123456 --file q17.sql
  jobprof repl 123456_7 --cli /opt/presto/bin/presto
  jobprof repl 123456 -- --output-format CSV_HEADER --execute 'SHOW TABLES'

Exit status: the CLI's own once it runs; 1 a Slurm command could not run or
failed; 2 bad usage, or a job that is pending, finished or unknown.")]
pub struct ReplArgs {
    /// The running job's id (1234, or 1234_5 for an array task).
    #[arg(value_name = "JOBID")]
    pub job: JobId,

    /// The coordinator's HTTP port.
    #[arg(long, default_value_t = 9200)]
    pub port: u16,

    /// Catalog for the CLI.
    #[arg(long, default_value = "hive")]
    pub catalog: String,

    /// Schema for the CLI.
    #[arg(long)]
    pub schema: Option<String>,

    /// User name for the CLI.
    #[arg(long)]
    pub user: Option<String>,

    /// Execute this SQL file and exit instead of prompting.
    #[arg(long, value_name = "SQL")]
    pub file: Option<PathBuf>,

    /// The CLI program on the coordinator node (name on PATH, or a path).
    #[arg(long, default_value = "presto-cli", value_name = "PROGRAM")]
    pub cli: OsString,

    /// Further arguments for the CLI, after `--`, passed verbatim.
    #[arg(last = true, value_name = "EXTRA")]
    pub extra: Vec<OsString>,
}

pub fn run(args: ReplArgs) -> anyhow::Result<jobprof::ExitCode> {
    let mut opts = ReplOptions::new(args.job);
    // A pseudo-terminal only for a person at a terminal: with --file or
    // piped input the CLI must see plain stdin.
    opts.pty = args.file.is_none() && std::io::stdin().is_terminal();
    opts.port = args.port;
    opts.catalog = args.catalog;
    opts.schema = args.schema;
    opts.user = args.user;
    opts.file = args.file;
    opts.cli = args.cli;
    opts.extra = args.extra;
    let plan = repl::plan(&Slurm::new(), &opts)?;
    LogLines::plain().log(&format!(
        "job {} coordinator {} ({}): {}",
        opts.job,
        plan.node,
        plan.server,
        display_argv(&plan.argv)
    ));
    let (program, rest) = plan
        .argv
        .split_first()
        .expect("repl::plan always builds an srun argv");
    // exec only returns on failure; on success the CLI's exit status is ours.
    let source = Command::new(program).args(rest).exec();
    Err(jobprof::Error::from(slurm::Error::Spawn {
        program: program.to_string_lossy().into_owned(),
        source,
    })
    .into())
}
