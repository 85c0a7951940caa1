//! `jobprof reprocess`: every old result directory under some trees brought
//! up to date, on one machine or as a Slurm job array.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use jobprof::bulk::{self, Options, Split};
use jobprof::capture::Status;
use jobprof::sys::slurm::array::{self, ArrayJob};
use jobprof::sys::slurm::Slurm;
use jobprof::sys::units;
use jobprof::views;
use jobprof::ExitCode;

use super::pipeline_args::PipelineArgs;

/// Bring every result directory under ROOT up to date (new or outdated captures).
///
/// Bring every result directory under ROOT up to date: process captures
/// never processed, or processed by an older jobprof.
///
/// Walks each ROOT at any depth for result directories (result_dir_*, or any
/// directory holding profiles/perf/worker_N/), and for every capture in them
/// whose outputs are missing or older than this jobprof's output version runs
/// the `jobprof process` pipeline. Captures of the old shell pipeline that
/// only kept perf.script.gz are folded from it; directories that only kept
/// stacks.folded get their flamegraphs drawn. Several captures are worked on
/// at once (--jobs). Every file is written atomically and the completion
/// marker last: a run killed at any moment leaves only complete outputs, and
/// the next run finishes the rest. Each result directory's job views
/// (profiles/perf/index.html, index.json, queries/) are refreshed at the end.
///
/// In a Slurm job array every task takes its own share of the captures (the
/// sorted list, round robin), so N tasks cover every capture exactly once
/// without talking to each other; --sbatch writes such an array job.
///
/// One result line per capture worked on goes to stdout as it ends (`DIR:
/// processed (1.2s): ...`), then the summary table; progress and warnings
/// go to stderr, each line naming its capture directory.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  jobprof reprocess /shared/results --dry-run
  jobprof reprocess /shared/results --jobs 8 --recompress
  jobprof reprocess /shared/results --no-inline --min-symbolized 20 --formats all
  jobprof reprocess /shared/results --sbatch --array-count 32 --partition cpu --time 2:00:00
  jobprof reprocess /shared/results --sbatch --submit --array-count 32 --time 1h30m

Exit status: 0 when every capture is complete; 1 when any was refused,
not rendered or failed (listed in the summary table); 2 for bad usage,
when every capture was refused (nothing could be done), or a ROOT without
captures (when jobprof-record is writing one there now, the
message says \"a capture is being written\"; next to published captures it
is listed as \"being written\").")]
pub struct ReprocessArgs {
    /// Directory trees holding result directories (any depth); a result
    /// directory itself, or one capture directory, also works.
    #[arg(value_name = "ROOT", required = true)]
    pub roots: Vec<PathBuf>,

    /// Captures worked on at once [default: number of cores; in a Slurm
    /// job, SLURM_CPUS_PER_TASK when set].
    #[arg(short = 'j', long, value_name = "N")]
    pub jobs: Option<usize>,

    /// Only list what would be done (and what would be refused, and why).
    #[arg(short = 'n', long)]
    pub dry_run: bool,

    /// Process complete captures again too.
    #[arg(short, long)]
    pub force: bool,

    /// Also write perf.script.zst beside an old perf.script.gz (the .gz is
    /// kept).
    #[arg(long)]
    pub recompress: bool,

    /// Like --recompress, then delete perf.script.gz once perf.script.zst
    /// and all outputs of the capture are complete.
    #[arg(long)]
    pub replace_archives: bool,

    /// This task's number, 0..N, when N tasks share the work [default:
    /// from SLURM_ARRAY_TASK_ID, less SLURM_ARRAY_TASK_MIN].
    #[arg(long, value_name = "I", requires = "array_count")]
    pub array_index: Option<usize>,

    /// How many tasks share the work [default: SLURM_ARRAY_TASK_COUNT];
    /// with --sbatch, the size of the array [default: the number of
    /// captures to do, at most 64].
    #[arg(long, value_name = "N")]
    pub array_count: Option<usize>,

    /// Print a ready sbatch script for a job array that runs this
    /// reprocessing (same ROOTs and options), instead of running it.
    #[arg(long)]
    pub sbatch: bool,

    /// With --sbatch: submit the script (`sbatch --parsable`) and print the
    /// job id.
    #[arg(long, requires = "sbatch")]
    pub submit: bool,

    /// With --sbatch: the partition (`#SBATCH --partition`).
    #[arg(long, value_name = "P", requires = "sbatch")]
    pub partition: Option<String>,

    /// With --sbatch: the time limit of each task (`#SBATCH --time`): 90m,
    /// 2h, 1h30m, HH:MM:SS, D-HH:MM:SS, or a bare number of seconds.
    #[arg(long, value_name = "DURATION", requires = "sbatch", value_parser = units::parse_duration)]
    pub time: Option<Duration>,

    #[command(flatten)]
    pub pipeline: PipelineArgs,
}

fn env_jobs() -> Option<usize> {
    std::env::var("SLURM_CPUS_PER_TASK")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .filter(|n| *n > 0)
}

/// Runs `jobprof reprocess`.
pub fn run(args: ReprocessArgs) -> anyhow::Result<ExitCode> {
    super::check_count("--jobs", args.jobs, super::MAX_JOBS)?;
    let process = args.pipeline.options()?;
    if args.sbatch {
        return submit_or_print(&args);
    }
    let split = match (args.array_index, args.array_count) {
        (Some(i), Some(n)) => Some(Split::new(i, n)?),
        (None, Some(_)) => {
            return Err(jobprof::Error::Usage(
                "--array-count needs --array-index (or run inside a Slurm array task)".into(),
            )
            .into())
        }
        _ => Split::from_slurm_env(|k| std::env::var(k).ok())?,
    };
    let mut opts = Options::default();
    opts.jobs = args.jobs.or_else(env_jobs).unwrap_or(0);
    opts.dry_run = args.dry_run;
    opts.force = args.force;
    opts.recompress = args.recompress;
    opts.replace_archives = args.replace_archives;
    opts.split = split;
    opts.process = process;
    let mut view_opts = args.pipeline.view_options()?;
    view_opts.jobs = opts.jobs;
    let progress = args.pipeline.progress();
    // The result lines of the captures worked on go to stdout as each ends
    // (the per-task log of an array job); a dry run lists its plan here.
    // The Nsight Systems reports under the roots (not in a dry run).
    let nsys = if args.dry_run {
        Vec::new()
    } else {
        let (force, p) = (opts.force, &opts.process);
        super::nsys_reports::run(
            &args.roots,
            &[],
            &[],
            p,
            force,
            args.pipeline.slice_by.as_ref(),
        )
    };
    let nsys_code = if nsys.iter().any(|o| o.failed) {
        ExitCode::Failed
    } else {
        ExitCode::Success
    };
    let report = match bulk::run(&args.roots, &opts, &*progress) {
        // Roots of Nsight Systems reports only.
        Err(jobprof::Error::Usage(_)) if !nsys.is_empty() => None,
        r => Some(r?),
    };
    for o in &nsys {
        jobprof::outln!("{}", o.line)?;
    }
    let Some(report) = report else {
        // Roots of Nsight Systems reports only: their views list them.
        let views = super::nsys_reports::views(&nsys, &[], &view_opts);
        for v in &views {
            jobprof::outln!("{}", v.line())?;
        }
        return Ok(views::exit_code(nsys_code, &views));
    };
    super::list_being_written(&args.roots)?;
    // A dry run changes nothing, the job views included.
    let views = if report.dry_run {
        Vec::new()
    } else {
        let mut v = views::after_run(&report.outcomes, &view_opts);
        v.extend(super::nsys_reports::views(&nsys, &v, &view_opts));
        v
    };
    if report.dry_run {
        for o in &report.outcomes {
            let what = match o.status {
                Status::Processed => "to do",
                s => s.as_str(),
            };
            jobprof::outln!(
                "{}: {what} ({:.1}s): {}",
                o.dir.display(),
                o.elapsed.as_secs_f64(),
                o.message
            )?;
        }
    }
    for v in &views {
        jobprof::outln!("{}", v.line())?;
    }
    jobprof::out!("{}", report.table())?;
    let code = views::exit_code(report.exit_code(), &views);
    Ok(if code == ExitCode::Success {
        nsys_code
    } else {
        code
    })
}

fn submit_or_print(args: &ReprocessArgs) -> anyhow::Result<ExitCode> {
    let exe = std::env::current_exe()
        .map_err(|e| jobprof::Error::Usage(format!("cannot find the jobprof executable: {e}")))?;
    let job = ArrayJob {
        jobprof: exe,
        roots: args.roots.clone(),
        array_count: args.array_count,
        partition: args.partition.clone(),
        time: args.time.map(units::slurm_time),
        cpus_per_task: args.jobs,
        extra_args: forwarded_args(args),
    };
    let script = bulk::array_script(&job)?;
    if !args.submit {
        jobprof::out!("{script}")?;
        return Ok(ExitCode::Success);
    }
    let id = array::submit(&Slurm::new(), &script)?;
    jobprof::outln!("{}", id.as_str())?;
    jobprof::errln!(
        "jobprof: submitted array job {} (per-task logs: jobprof-reprocess-{}_N.out)",
        id.as_str(),
        id.as_str()
    );
    Ok(ExitCode::Success)
}

/// The options the array tasks run with (everything but the --sbatch ones).
fn forwarded_args(args: &ReprocessArgs) -> Vec<String> {
    let mut v = Vec::new();
    if args.force {
        v.push("--force".into());
    }
    if args.recompress {
        v.push("--recompress".into());
    }
    if args.replace_archives {
        v.push("--replace-archives".into());
    }
    v.extend(args.pipeline.to_argv());
    v
}
