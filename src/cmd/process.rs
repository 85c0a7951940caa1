//! `jobprof process`: a result directory's raw captures in, flamegraphs,
//! folded stacks, summaries and text archives out.

use std::path::PathBuf;

use clap::Args;

use jobprof::capture::Filter;
use jobprof::pipeline;
use jobprof::views;

use super::pipeline_args::PipelineArgs;
use jobprof::ExitCode;

/// Turn raw perf captures, or a plain perf.data, into flamegraphs and summaries.
///
/// Turn the raw perf captures of a result directory, or a plain perf.data,
/// into flamegraphs, folded stacks, summaries and compressed text archives.
///
/// Finds every capture under RESULT_DIR/profiles/perf/worker_N/QUERY/ (written
/// by jobprof-record or by the old shell pipeline), checks it, symbolizes all
/// its shards at once, in-process by default (the native symbolizer, with this
/// host's files by build id; `perf script` only for shards it cannot read, or
/// with --symbolizer perf), folds and compresses the text as it streams, and
/// writes into the capture directory, each file atomically:
/// perf.script.zst, stacks.folded, flamegraph.svg, flamegraph.html,
/// summary.json, and .postprocess-complete last. Then it refreshes the job's
/// views from the summaries: profiles/perf/index.html (every capture in one
/// sortable offline page), index.json, and one flamegraph per query merged
/// over its workers (profiles/perf/queries/QUERY/).
///
/// Completed captures are skipped (unless --force); a run that was killed
/// half-way is completed by the next one. A capture without perf.data files,
/// or on a machine without perf, is folded from the symbolized text it carries
/// (perf.script.zst, or the old pipeline's perf.script.gz).
///
/// Nsight Systems reports (RESULT_DIR/profiles/nsys/worker_N/QUERY/, as
/// `jobprof-record sidecar --tool nsys` publishes them, or REPORT.nsys-rep
/// files) are read through their SQLite export (REPORT.sqlite beside the
/// report, else `nsys export` of this host) into QUERY/jobprof/ (or
/// REPORT.nsys-rep.jobprof/): stacks.folded and flamegraphs of the CPU
/// samples, offcpu.* of the OS runtime calls, osrt.tsv, nvtx.tsv,
/// gpu-kernels.tsv, gpu-memcpy.tsv, report.txt and summary.json.
///
/// One result line per capture goes to stdout (`DIR: processed (1.2s): ...`);
/// progress (bars on a terminal, timestamped log lines otherwise) and
/// warnings go to stderr.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  perf record -g ./prog && jobprof process perf.data   # -> perf.data.jobprof/
  jobprof process perf.data -o prog-profile
  jobprof process result_dir_4242
  jobprof process result_dir_4242 --worker 0 --query q17 --force
  jobprof process results/* --jobs 8 --formats svg,summary,speedscope
  jobprof process results/* --formats all --quiet
  jobprof process result_dir_4242 --no-inline --min-symbolized 20
  jobprof process fixtures/result_dir_demo
  jobprof process run1/q7.nsys-rep                  # -> run1/q7.nsys-rep.jobprof/

Exit status: 0 when every capture was processed or already complete; 1
when any was refused (with its reason), not rendered or failed (an Nsight
Systems report too: no export and no nsys, a .qdstrm, an unknown schema),
or a path among others was missing or not a perf.data (named, the others
processed); 2 for bad usage, when every capture was refused (nothing could
be done), or a directory without captures (when jobprof-record is writing one
there now, the message says \"a capture is being written\"; next to
published captures it is listed as \"being written\").")]
pub struct ProcessArgs {
    /// Result directories (holding profiles/perf/worker_N/QUERY/); a perf
    /// root, one worker_N directory or one capture directory also work, and
    /// so do plain `perf record` outputs: a perf.data file, or a directory
    /// holding perf.data, X.perf.data or perf.data.X files without capture.json (each
    /// file's outputs go to FILE.jobprof/ beside it).
    /// Nsight Systems reports (FILE.nsys-rep) are read too.
    #[arg(value_name = "RESULT_DIR|PERF_DATA", required = true)]
    pub dirs: Vec<PathBuf>,

    /// Where the outputs of one plain perf.data go [default: PERF_DATA.jobprof/
    /// beside it]; the input is never modified.
    #[arg(short, long, value_name = "DIR")]
    pub output: Option<PathBuf>,

    /// Only captures of worker N (repeatable).
    #[arg(long, value_name = "N")]
    pub worker: Vec<u32>,

    /// Only captures of query Q (repeatable).
    #[arg(long, value_name = "Q")]
    pub query: Vec<String>,

    /// How many `perf script` processes run at once (all shards and time
    /// slices of a capture share them); also the fold's threads
    /// [default: number of cores].
    #[arg(short = 'j', long, value_name = "N")]
    pub jobs: Option<usize>,

    #[command(flatten)]
    pub pipeline: PipelineArgs,

    /// Process captures again even when .postprocess-complete says they are
    /// done.
    #[arg(short, long)]
    pub force: bool,

    /// Split every shard into N time slices, each symbolized by its own
    /// `perf script --time` [default: automatic: a capture with fewer shards
    /// than --jobs has its big shards split so that every job works].
    #[arg(long, value_name = "N")]
    pub time_slices: Option<usize>,
}

/// Runs `jobprof process`.
pub fn run(args: ProcessArgs) -> anyhow::Result<ExitCode> {
    super::check_count("--jobs", args.jobs, super::MAX_JOBS)?;
    super::check_count("--time-slices", args.time_slices, super::MAX_TIME_SLICES)?;
    let mut opts = args.pipeline.options()?;
    opts.jobs = args.jobs.unwrap_or(0);
    opts.force = args.force;
    opts.time_slices = args.time_slices;
    opts.output = args.output;
    let mut views = args.pipeline.view_options()?;
    views.jobs = opts.jobs;
    let filter = Filter {
        workers: args.worker,
        queries: args.query,
    };
    let progress = args.pipeline.progress();
    // Lone Nsight Systems reports are read by the nsys step alone.
    let mut perf_dirs: Vec<PathBuf> = (args.dirs.iter())
        .filter(|d| !jobprof::nsys::export::is_report(d))
        .cloned()
        .collect();
    // A path that does not exist, or a file that is not a perf.data, is
    // named and left out while the others are processed (exit 1), as `cp`
    // does; alone, it is the usage error (exit 2).
    let problems: Vec<(PathBuf, jobprof::Error)> = (perf_dirs.iter())
        .filter_map(|d| jobprof::capture::root_problem(d).map(|e| (d.clone(), e)))
        .collect();
    let left_out = !problems.is_empty() && problems.len() < args.dirs.len();
    if left_out {
        perf_dirs.retain(|d| !problems.iter().any(|(p, _)| p == d));
        for (_, e) in &problems {
            jobprof::errln!("jobprof: error: {e} (left out; the others are processed)");
        }
    }
    let nsys = super::nsys_reports::run(
        &args.dirs,
        &filter.workers,
        &filter.queries,
        &opts,
        opts.force,
        args.pipeline.slice_by.as_ref(),
    );
    let nsys_failed = nsys.iter().any(|o| o.failed);
    let nsys_code = if nsys_failed || left_out {
        ExitCode::Failed
    } else {
        ExitCode::Success
    };
    // The result lines, one per capture, go to stdout as each capture ends;
    // log lines and bars to stderr.
    let report = if perf_dirs.is_empty() && !nsys.is_empty() {
        None
    } else {
        match pipeline::run(&perf_dirs, &filter, &opts, &*progress) {
            // A result directory of Nsight Systems reports only.
            Err(jobprof::Error::Usage(_)) if !nsys.is_empty() => None,
            Err(e) => return Err(e.into()),
            Ok(r) => Some(r),
        }
    };
    for o in &nsys {
        jobprof::outln!("{}", o.line)?;
    }
    let Some(report) = report else {
        // A job of Nsight Systems reports only: its views list them.
        let views = super::nsys_reports::views(&nsys, &[], &views);
        for v in &views {
            jobprof::outln!("{}", v.line())?;
        }
        return Ok(views::exit_code(nsys_code, &views));
    };
    super::list_being_written(&args.dirs)?;
    let mut views_written = views::after_run(&report.captures, &views);
    views_written.extend(super::nsys_reports::views(&nsys, &views_written, &views));
    let views = views_written;
    for v in &views {
        jobprof::outln!("{}", v.line())?;
    }
    let failed = report
        .captures
        .iter()
        .filter(|c| c.status.is_failure())
        .count();
    if failed > 0 {
        jobprof::errln!(
            "jobprof: {failed} of {} capture(s) not processed completely (see the result lines)",
            report.captures.len()
        );
    }
    let code = views::exit_code(report.exit_code(), &views);
    // nsys_code is 1 for a path left out, too.
    Ok(if code == ExitCode::Success {
        nsys_code
    } else {
        code
    })
}
