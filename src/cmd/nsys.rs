//! `jobprof nsys`: collect, flush and plan Nsight Systems reports.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand};
use jobprof::nsys::{self, CollectOptions, Collection, FlushOptions, Plan};
use jobprof::sys::progress::Progress;
use jobprof::sys::units;

/// Collect and archive Nsight Systems reports; plan and set up nsight-slurm runs.
///
/// Settle, collect and archive Nsight Systems reports of multi-rank jobs;
/// plan, set up and tear down nsight-slurm runs.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  jobprof nsys plan --config profiling.toml --dry-run
  jobprof nsys collect --report-root /shared/nsys/4242 --expect-ranks 16 --archive
  jobprof nsys flush --job 4242 --report-root /shared/nsys/4242 --expect-ranks 16

Exit status: 0 done; 1 failed work; 2 bad usage or an invalid config;
3 reports still changing at the timeout; 4 empty reports; 5 missing ranks.")]
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
    #[command(args_override_self = true)]
    Setup(SetupArgs),
    #[command(args_override_self = true)]
    Teardown(TeardownArgs),
}

/// Wait until every `*.nsys-rep` report under a report root is fully
/// written, then write manifest.json (and optionally reports.tar.zst).
///
/// Reports count as settled when all are non-empty, none changed size or
/// modification time during the last settle window, and (with --expect-ranks)
/// every rank 0..N-1 has one. The manifest is written in every case.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  jobprof nsys collect --report-root /shared/nsys/4242 --expect-ranks 16
  jobprof nsys collect --report-root DIR --settle 2m --timeout 1h30m --archive
  jobprof nsys collect --report-root DIR --runtime-dir /tmp/nsys-rank0 --poll 10s

Durations: 500ms, 90s, 2m30s, 1h30m, HH:MM:SS, or a bare number of seconds.

Exit status: 0 settled and complete; 1 failed work (an unreadable report
root, a manifest that could not be written); 2 bad usage; 3 still changing at
the timeout; 4 empty reports; 5 missing ranks (or no report at all).")]
pub struct CollectArgs {
    /// The shared report root; reports are found anywhere below it
    /// (direct/, rescued/, ...). Must exist.
    #[arg(long, value_name = "DIR", required_unless_present = "config")]
    report_root: Option<PathBuf>,

    /// Take the report root and runtime workspace from a profiling config:
    /// the report root is its log_dir (reports in the wrapper's workspace
    /// and the direct-output dir are found below it), and for nsight-slurm
    /// <log_dir>/nsight-slurm-runtime is rescued from.
    #[arg(long, value_name = "FILE", conflicts_with = "report_root")]
    config: Option<PathBuf>,

    /// A per-rank runtime workspace to rescue reports from: its *.nsys-rep
    /// files are copied to DIR/rescued/<relative path> at every poll
    /// (again whenever the source grew). Repeatable.
    #[arg(long, value_name = "DIR")]
    runtime_dir: Vec<PathBuf>,

    #[command(flatten)]
    settle: SettleArgs,
}

/// When reports count as written, and what is written about them.
#[derive(Debug, Args)]
pub struct SettleArgs {
    /// Require a report for every rank 0..N-1 (ranks are parsed from
    /// <job>_<node>_rank<k>.nsys-rep). Without it, at least one report.
    #[arg(long, value_name = "N")]
    expect_ranks: Option<u32>,

    /// How long no report may change size or mtime before all count as
    /// written: 500ms, 20s, 2m30s, 1h30m, HH:MM:SS; a bare number means
    /// seconds.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = units::parse_duration)]
    settle: Duration,

    /// Give up after this long (including any wait for another collector);
    /// the exit code then says why.
    #[arg(long, value_name = "DURATION", default_value = "600s", value_parser = units::parse_duration)]
    timeout: Duration,

    /// Time between two looks at the reports; one status line is printed per poll.
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = units::parse_duration)]
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
    /// The collect options, and the plan of --config when given.
    fn options(&self) -> anyhow::Result<(CollectOptions, Option<Plan>)> {
        let plan = match &self.config {
            Some(c) => Some(Plan::from_path(c)?),
            None => None,
        };
        let mut runtime_dirs = self.runtime_dir.clone();
        let report_root = match plan.as_ref().map(|p| p.dirs.as_ref()) {
            None => self.report_root.clone().unwrap_or_default(),
            Some(Some(dirs)) => {
                runtime_dirs.extend(dirs.runtime.clone());
                dirs.log_dir.clone()
            }
            Some(None) => {
                return Err(jobprof::Error::Usage(format!(
                    "--config {}: type = \"perf\" has no Nsight reports to collect",
                    self.config
                        .as_ref()
                        .map_or(String::new(), |c| c.display().to_string())
                ))
                .into())
            }
        };
        Ok((self.settle.options(report_root, runtime_dirs), plan))
    }
}

impl SettleArgs {
    fn options(&self, report_root: PathBuf, runtime_dirs: Vec<PathBuf>) -> CollectOptions {
        let mut o = CollectOptions::new(report_root);
        o.runtime_dirs = runtime_dirs;
        o.expect_ranks = self.expect_ranks;
        o.settle = self.settle;
        o.timeout = self.timeout;
        o.poll = self.poll;
        o.since_baseline = self.since_baseline;
        o.archive = self.archive;
        o.manifest = self.manifest.clone();
        o
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
#[command(after_help = "Examples:
  jobprof nsys flush --job 4242 --report-root /shared/nsys/4242 --expect-ranks 16
  jobprof nsys flush --job 4242_3 --report-root DIR --nsight-slurm /opt/nsight-slurm --timeout 20m

Exit status: as for `jobprof nsys collect`: 0 settled and complete; 1 failed
work; 2 bad usage; 3 still changing at the timeout; 4 empty reports; 5
missing ranks. A failing Slurm or nsight-slurm command is logged, not fatal.")]
pub struct FlushArgs {
    /// The Slurm job whose reports are flushed (an array task as 1234_5).
    #[arg(long, value_name = "JOBID")]
    job: jobprof::sys::slurm::JobId,

    /// Steps with this name are sent SIGTERM, which makes their ranks
    /// write their reports.
    #[arg(long, value_name = "NAME", default_value = nsys::flush::DEFAULT_CONNECTOR_STEP_NAME)]
    connector_step_name: String,

    /// The nsight-slurm executable, or its install home (bin/nsight-slurm is
    /// used); without it the sessions are not stopped first. With an
    /// nsight-slurm --config, its home is used and `stop` runs like every
    /// set-up call (environment, log in nsight-slurm.out).
    #[arg(long, value_name = "PATH", conflicts_with = "config")]
    nsight_slurm: Option<PathBuf>,

    #[command(flatten)]
    wrapper: WrapperArgs,

    #[command(flatten)]
    collect: CollectArgs,
}

/// Validate a profiling config (TOML) and print the worker launch command.
///
/// Prints the launcher as one shell-quoted line (prefixed with `env VAR=...`
/// for the variables it needs), or with --dry-run a "Profiling" panel, or
/// with --json the plan as JSON.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  jobprof nsys plan --config profiling.toml
  jobprof nsys plan --config profiling.toml --dry-run
  jobprof nsys plan --config profiling.toml --json > plan.json

Exit status: 0 valid; 2 an unreadable or invalid config (every problem is
listed).")]
pub struct PlanArgs {
    /// The profiling config (TOML).
    #[arg(long, value_name = "FILE")]
    config: PathBuf,

    /// Print the "Profiling" panel (type, mode, windows, launcher, tool
    /// options, report output, the directories under log_dir, container
    /// mounts, environment, and the set-up and teardown calls) instead of
    /// the command line.
    #[arg(long, conflicts_with = "json")]
    dry_run: bool,

    /// Print the plan as JSON (for scripts).
    #[arg(long)]
    json: bool,
}

/// How wrapper calls reach the head node and how long each may take.
#[derive(Debug, Args)]
pub struct WrapperArgs {
    /// The head node's IPv4 address, given to wrapper calls as
    /// SLURMD_NODENAME (the coordinator publishes tcp://<it>:<port>).
    /// Default: the address recorded by `setup`, else this node's name
    /// (SLURMD_NODENAME, else the host name) resolved to IPv4.
    #[arg(long, value_name = "IPV4")]
    head_ip: Option<std::net::Ipv4Addr>,

    /// The time limit of each nsight-slurm call; a call still running then
    /// is killed and counts as failed.
    #[arg(long, value_name = "DURATION", default_value = "120s", value_parser = units::parse_duration)]
    call_timeout: Duration,
}

/// Prepare a profiled run: create its directories, configure nsight-slurm, start the coordinator
///
/// Run once per job, before the first worker step. Creates the directories
/// under log_dir and, for type = "nsight-slurm", configures the wrapper and
/// starts its coordinator.
///
/// Runs, in order, each from an argv (no shell) with --call-timeout, in
/// <log_dir>, with SLURM_SUBMIT_DIR=<log_dir> and SLURMD_NODENAME=<head IPv4>,
/// each call and its output appended to <log_dir>/nsight-slurm.out:
///
///   <home>/bin/nsight-slurm configure tool-path <tool_path>
///   <home>/bin/nsight-slurm configure tool-command profile
///   <home>/bin/nsight-slurm configure profiling-mode <mode>
///   <home>/bin/nsight-slurm configure tool-options '<options>'
///   <home>/bin/nsight-slurm configure report-output <log_dir>/nsight-slurm-reports
///   <home>/bin/nsight-slurm coordinator start
///
/// Idempotent: a second run with the same config (and head address, in the
/// same Slurm job) runs nothing; a changed config first stops the running
/// coordinator (coordinator stop --force), then configures and starts it
/// again. `jobprof nsys plan --dry-run` shows the calls.
///
/// Examples:
///
///   jobprof nsys setup --config profiling.toml
///
///   jobprof nsys setup --config profiling.toml --head-ip 10.0.3.17
///
/// Exit codes: 0 set up (or already set up), 1 a wrapper call failed or
/// timed out (named, with nsight-slurm.out for its output), 2 an invalid
/// config, a missing <home>/bin/nsight-slurm, a non-empty report workspace,
/// or no IPv4 address for the head node.
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct SetupArgs {
    /// The profiling config (TOML).
    #[arg(long, value_name = "FILE")]
    config: PathBuf,

    #[command(flatten)]
    wrapper: WrapperArgs,
}

/// End a profiled run: optionally flush its reports, then stop the nsight-slurm coordinator
///
/// With --flush, first runs the flush of `jobprof nsys flush --config FILE`
/// (nsight-slurm stop, signal the connector steps, collect the reports
/// under log_dir). The coordinator is stopped whatever the flush found.
/// Every wrapper call runs like in `setup` and is logged to
/// <log_dir>/nsight-slurm.out. After a successful stop, the set-up record is
/// removed, so that the next `setup` starts a coordinator again.
///
/// Examples:
///
///   jobprof nsys teardown --config profiling.toml
///
///   jobprof nsys teardown --config profiling.toml --flush --job "$SLURM_JOB_ID" \
///       --expect-ranks "$SLURM_NTASKS" --archive
///
/// Exit codes: 0 done, 1 `coordinator stop` failed, 2 an invalid config or
/// options, a missing <home>/bin/nsight-slurm; with --flush, 3, 4 or 5 as
/// `collect` when the reports are incomplete (which wins over a failed stop).
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct TeardownArgs {
    /// The profiling config (TOML).
    #[arg(long, value_name = "FILE")]
    config: PathBuf,

    /// Flush the reports before the coordinator is stopped.
    #[arg(long, requires = "job")]
    flush: bool,

    /// The Slurm job whose reports are flushed (with --flush).
    #[arg(long, value_name = "JOBID", requires = "flush")]
    job: Option<jobprof::sys::slurm::JobId>,

    /// Steps with this name are sent SIGTERM by the flush.
    #[arg(long, value_name = "NAME", default_value = nsys::flush::DEFAULT_CONNECTOR_STEP_NAME)]
    connector_step_name: String,

    #[command(flatten)]
    wrapper: WrapperArgs,

    #[command(flatten)]
    settle: SettleArgs,
}

/// The head address: --head-ip, else the one `setup` recorded.
fn head_ip(given: Option<std::net::Ipv4Addr>, plan: &Plan) -> Option<std::net::Ipv4Addr> {
    given.or_else(|| nsys::setup::recorded_head_ip(plan))
}

pub fn run(args: NsysArgs) -> anyhow::Result<jobprof::ExitCode> {
    let progress = super::bars::from_env(false);
    match args.command {
        NsysCommand::Collect(a) => {
            let (opts, _) = a.options()?;
            let c = nsys::collect(&opts, None, &*progress)?;
            finish(c)
        }
        NsysCommand::Flush(a) => flush(a, &*progress),
        NsysCommand::Setup(a) => setup(a, &*progress),
        NsysCommand::Teardown(a) => teardown(a, &*progress),
        NsysCommand::Plan(a) => plan(a),
    }
}

/// `nsys flush`: through the wrapper of the config, when it names one.
fn flush(a: FlushArgs, progress: &dyn Progress) -> anyhow::Result<jobprof::ExitCode> {
    let (collect, plan) = a.collect.options()?;
    let mut opts = FlushOptions::new(a.job.clone(), collect);
    opts.connector_step_name = a.connector_step_name.clone();
    opts.nsight_slurm = a.nsight_slurm.clone();
    if let Some(plan) = plan.filter(|p| p.wrapper().is_some()) {
        let ip = head_ip(a.wrapper.head_ip, &plan);
        let (ip, warning) = nsys::setup::head_ip(ip)?;
        if let Some(w) = warning {
            progress.log(&w);
        }
        let w = nsys::Wrapper::of(&plan, ip, a.wrapper.call_timeout)?;
        opts.nsight_slurm = Some(w.exe.clone());
        opts.wrapper = Some(w);
    }
    let c = nsys::flush(&opts, progress)?;
    finish(c)
}

/// `nsys setup`: one stdout line saying what was done.
fn setup(a: SetupArgs, progress: &dyn Progress) -> anyhow::Result<jobprof::ExitCode> {
    let plan = Plan::from_path(&a.config)?;
    let done = nsys::setup(&plan, a.wrapper.head_ip, a.wrapper.call_timeout, progress)?;
    let log = plan
        .dirs
        .as_ref()
        .and_then(|d| d.wrapper_log.as_ref())
        .map(|l| format!(" (wrapper log {})", l.display()))
        .unwrap_or_default();
    let what = match done {
        nsys::SetupOutcome::DirsOnly => "directories created; plain nsys needs no wrapper",
        nsys::SetupOutcome::Configured => "nsight-slurm configured, coordinator started",
        nsys::SetupOutcome::Reconfigured => {
            "config changed: coordinator stopped, nsight-slurm configured, coordinator started"
        }
        nsys::SetupOutcome::Unchanged => "already set up with this config; nothing run",
    };
    let dir = plan.dirs.as_ref().map(|d| d.log_dir.display().to_string());
    jobprof::outln!("{}: {what}{log}", dir.unwrap_or_default())?;
    Ok(jobprof::ExitCode::Success)
}

/// `nsys teardown`, with the flush first when `--flush --job` ask for it.
fn teardown(a: TeardownArgs, progress: &dyn Progress) -> anyhow::Result<jobprof::ExitCode> {
    let plan = Plan::from_path(&a.config)?;
    let flush = match (&a.job, plan.dirs.as_ref()) {
        (Some(job), Some(dirs)) if a.flush => {
            let collect = a
                .settle
                .options(dirs.log_dir.clone(), dirs.runtime.iter().cloned().collect());
            let mut f = FlushOptions::new(job.clone(), collect);
            f.connector_step_name = a.connector_step_name.clone();
            Some(f)
        }
        _ => None,
    };
    let ip = head_ip(a.wrapper.head_ip, &plan);
    let collected = nsys::teardown(&plan, ip, a.wrapper.call_timeout, flush, progress)?;
    jobprof::outln!(
        "{}: coordinator stopped",
        plan.dirs
            .as_ref()
            .map(|d| d.log_dir.display().to_string())
            .unwrap_or_default()
    )?;
    match collected {
        Some(c) => finish(c),
        None => Ok(jobprof::ExitCode::Success),
    }
}

/// `nsys plan`: the launcher command line, the panel (`--dry-run`) or JSON.
fn plan(a: PlanArgs) -> anyhow::Result<jobprof::ExitCode> {
    let plan = Plan::from_path(&a.config)?;
    if a.json {
        jobprof::outln!("{}", serde_json::to_string_pretty(&plan)?)?;
    } else if a.dry_run {
        jobprof::out!("{}", plan.panel())?;
    } else {
        jobprof::outln!("{}", plan.command_line())?;
    }
    Ok(jobprof::ExitCode::Success)
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
    c.check()?;
    Ok(jobprof::ExitCode::Success)
}
