//! `jobprof nsys`: collect, flush and plan Nsight Systems reports.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand};
use jobprof::nsys::{self, CollectOptions, Collection, FlushOptions, Plan};
use jobprof::progress::Progress;

/// Settle, collect and archive Nsight Systems reports of multi-rank jobs;
/// plan nsight-slurm launches.
#[derive(Debug, Args)]
pub struct NsysArgs {
    #[command(subcommand)]
    command: NsysCommand,
}

#[derive(Debug, Subcommand)]
enum NsysCommand {
    // A repeated option takes its last value (scripts append overrides).
    #[command(args_override_self = true)]
    Collect(CollectArgs),
    #[command(args_override_self = true)]
    Flush(FlushArgs),
    Plan(PlanArgs),
}

/// Wait until every `*.nsys-rep` report under a report root is fully
/// written, then write manifest.json (and optionally reports.tar.zst).
///
/// Reports count as settled when all are non-empty, none changed size or
/// modification time during the last settle window, and (with --expect-ranks)
/// every rank 0..N-1 has one. Exit codes: 0 settled and complete,
/// 3 still changing at the timeout, 4 empty reports, 5 missing ranks
/// (or no report at all); the manifest is written in every case.
#[derive(Debug, Args)]
pub struct CollectArgs {
    /// The shared report root; reports are found anywhere below it
    /// (direct/, rescued/, ...). Must exist.
    #[arg(long, value_name = "DIR")]
    report_root: PathBuf,

    /// A per-rank runtime workspace to rescue reports from: its *.nsys-rep
    /// files are copied to DIR/rescued/<relative path> at every poll
    /// (again whenever the source grew). Repeatable.
    #[arg(long, value_name = "DIR")]
    runtime_dir: Vec<PathBuf>,

    /// Require a report for every rank 0..N-1 (ranks are parsed from
    /// <job>_<node>_rank<k>.nsys-rep). Without it, at least one report.
    #[arg(long, value_name = "N")]
    expect_ranks: Option<u32>,

    /// How long no report may change size or mtime before all count as
    /// written. 500ms, 20s, 2m; a bare number means seconds.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = nsys::parse_duration)]
    settle: Duration,

    /// Give up after this long (including any wait for another collector);
    /// the exit code then says why.
    #[arg(long, value_name = "DURATION", default_value = "600s", value_parser = nsys::parse_duration)]
    timeout: Duration,

    /// Time between two looks at the reports; one status line is printed per poll.
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = nsys::parse_duration)]
    poll: Duration,

    /// Ignore reports that already existed when the command started, as long
    /// as they stay unchanged (flush always does, keeping its job's own).
    #[arg(long)]
    since_baseline: bool,

    /// Also write DIR/reports.tar.zst with every report and the manifest.
    #[arg(long)]
    archive: bool,

    /// Where to write the manifest [default: DIR/manifest.json].
    #[arg(long, value_name = "PATH")]
    manifest: Option<PathBuf>,
}

impl CollectArgs {
    fn options(&self) -> CollectOptions {
        CollectOptions {
            report_root: self.report_root.clone(),
            runtime_dirs: self.runtime_dir.clone(),
            expect_ranks: self.expect_ranks,
            settle: self.settle,
            timeout: self.timeout,
            poll: self.poll,
            since_baseline: self.since_baseline,
            archive: self.archive,
            manifest: self.manifest.clone(),
        }
    }
}

/// Stop a job's Nsight sessions, signal its connector steps, then collect
/// the reports like `collect` (the teardown, run before anything kills the
/// job's steps).
///
/// Runs `nsight-slurm stop --job JOBID --timeout 30` (with --nsight-slurm),
/// `squeue -s -j JOBID -h -o "%i|%j"` and `scancel --signal=TERM STEP` for
/// every step named like the connector; each command and its result is
/// logged, and a failing one does not stop the sequence. Reports present
/// before the flush are ignored while unchanged, except this job's own.
#[derive(Debug, Args)]
pub struct FlushArgs {
    /// The Slurm job whose reports are flushed (an array task as 1234_5).
    #[arg(long, value_name = "JOBID")]
    job: jobprof::slurm::JobId,

    /// Steps with this name are sent SIGTERM, which makes their ranks
    /// write their reports.
    #[arg(long, value_name = "NAME", default_value = nsys::flush::DEFAULT_CONNECTOR_STEP_NAME)]
    connector_step_name: String,

    /// The nsight-slurm executable, or its install home (bin/nsight-slurm is
    /// used); without it the sessions are not stopped first.
    #[arg(long, value_name = "PATH")]
    nsight_slurm: Option<PathBuf>,

    #[command(flatten)]
    collect: CollectArgs,
}

/// Validate a profiling config (TOML) and print the worker launch command.
///
/// Prints the launcher as one shell-quoted line (prefixed with `env VAR=...`
/// for the variables it needs), or with --dry-run a "Profiling" panel, or
/// with --json the plan as JSON. Exit 2 with every problem listed when the
/// config is invalid.
#[derive(Debug, Args)]
pub struct PlanArgs {
    /// The profiling config (TOML).
    #[arg(long, value_name = "FILE")]
    config: PathBuf,

    /// Print the "Profiling" panel (type, mode, windows, launcher, tool
    /// options, report output, environment) instead of the command line.
    #[arg(long, conflicts_with = "json")]
    dry_run: bool,

    /// Print the plan as JSON (for scripts).
    #[arg(long)]
    json: bool,
}

pub fn run(args: NsysArgs) -> anyhow::Result<jobprof::ExitCode> {
    let progress = Progress::from_env();
    match args.command {
        NsysCommand::Collect(a) => {
            let c = nsys::collect(&a.options(), None, &progress).map_err(jobprof::Error::from)?;
            finish(c)
        }
        NsysCommand::Flush(a) => {
            let mut opts = FlushOptions::new(a.job.clone(), a.collect.options());
            opts.connector_step_name = a.connector_step_name.clone();
            opts.nsight_slurm = a.nsight_slurm.clone();
            let c = nsys::flush(&opts, &progress).map_err(jobprof::Error::from)?;
            finish(c)
        }
        NsysCommand::Plan(a) => {
            let plan = Plan::from_path(&a.config).map_err(jobprof::Error::from)?;
            if a.json {
                jobprof::outln!("{}", serde_json::to_string_pretty(&plan)?)?;
            } else if a.dry_run {
                jobprof::out!("{}", plan.panel())?;
            } else {
                jobprof::outln!("{}", plan.command_line())?;
            }
            Ok(jobprof::ExitCode::Success)
        }
    }
}

/// Prints the one-line summary and turns an incomplete collection into the
/// error that names what is missing (exit 3, 4 or 5).
fn finish(c: Collection) -> anyhow::Result<jobprof::ExitCode> {
    let m = &c.manifest;
    let ranks: Vec<u32> = {
        let mut r: Vec<u32> = m
            .reports
            .iter()
            .filter(|e| e.path.is_some())
            .filter_map(|e| e.rank)
            .collect();
        r.sort_unstable();
        r.dedup();
        r
    };
    jobprof::outln!(
        "{}: {} report(s), {} bytes{}{}{}",
        c.manifest_path.display(),
        m.report_count,
        m.total_bytes,
        if ranks.is_empty() {
            String::new()
        } else {
            format!(", ranks {}", nsys::compact_ranks(&ranks))
        },
        c.archive_path
            .as_ref()
            .map(|a| format!(", archive {}", a.display()))
            .unwrap_or_default(),
        if c.adopted {
            " (result of the collector this one waited for)"
        } else {
            ""
        }
    )?;
    c.check().map_err(jobprof::Error::from)?;
    Ok(jobprof::ExitCode::Success)
}
