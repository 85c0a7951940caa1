//! `jobprof process`: a result directory's raw captures in, flamegraphs,
//! folded stacks, summaries and text archives out.

use std::path::PathBuf;

use clap::Args;

use jobprof::capture::Filter;
use jobprof::pipeline::{self, Formats, Options};
use jobprof::sys::progress::Progress;
use jobprof::views;
use jobprof::ExitCode;

/// Turn the raw perf captures of a result directory into flamegraphs,
/// folded stacks, summaries and compressed text archives.
///
/// Finds every capture under RESULT_DIR/profiles/perf/worker_N/QUERY/ (written
/// by jobprof-record or by the old shell pipeline), checks it, symbolizes all
/// its shards with `perf script` at once, folds and compresses the text as it
/// streams, and writes into the capture directory, each file atomically:
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
/// One result line per capture goes to stdout (`DIR: processed (1.2s): ...`);
/// progress (bars on a terminal, timestamped log lines otherwise) and
/// warnings go to stderr.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  jobprof process result_dir_4242
  jobprof process result_dir_4242 --worker 0 --query q17 --force
  jobprof process results/* --jobs 8 --formats svg,summary,speedscope
  jobprof process results/* --formats all --quiet
  jobprof process fixtures/result_dir_demo

Exit status: 0 when every capture was processed or already complete; 1
when any was refused (with its reason), not rendered or failed; 2 for bad
usage or a directory without captures.")]
pub struct ProcessArgs {
    /// Result directories (holding profiles/perf/worker_N/QUERY/); a perf
    /// root, one worker_N directory or one capture directory also work.
    #[arg(value_name = "RESULT_DIR", required = true)]
    pub dirs: Vec<PathBuf>,

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

    /// Expand inlined functions also in the shards `perf script`
    /// symbolizes (it can make `perf script` 100 times slower). The native
    /// symbolizer expands them by default, at about the cost of plain
    /// symbols, where `perf script --inline` does (perf 6.1: call chains
    /// unwound from `--call-graph dwarf` stack copies; frame-pointer chains
    /// get none). The log and summary.json (`shards[].inline`) say which
    /// shards have them.
    #[arg(long, conflicts_with = "no_inline")]
    pub inline: bool,

    /// No inline frames, not even from the native symbolizer.
    #[arg(long)]
    pub no_inline: bool,

    /// zstd level of the perf.script.zst archive: 1 (fastest; the default)
    /// to 19 (smallest). Level 3 makes the archive ~8% smaller and the
    /// compression ~1.6x slower on `perf script` text.
    #[arg(long, value_name = "LEVEL", default_value_t = jobprof::output::archive::DEFAULT_LEVEL,
          value_parser = clap::value_parser!(i32).range(1..=19))]
    pub zstd_level: i32,

    /// Process captures again even when .postprocess-complete says they are
    /// done.
    #[arg(short, long)]
    pub force: bool,

    /// Outputs to write, comma separated: svg (flamegraph.svg), html
    /// (flamegraph.html, one offline page), folded (stacks.folded), summary
    /// (summary.json), report (report.txt, the functions by self time as
    /// `perf report --stdio --no-children` over all shards), speedscope (profile.speedscope.json, for speedscope.app
    /// when a big profile makes the SVG slow), pprof (profile.pb.gz, for go
    /// tool pprof, Pyroscope, Parca), or all. perf.script.zst is
    /// always written when perf script runs.
    #[arg(
        long,
        value_name = "LIST",
        default_value = "svg,html,folded,summary,report"
    )]
    pub formats: String,

    /// Refuse to draw a flamegraph when less than PCT percent of the sample
    /// weight has a named leaf frame (`symbolized_ratio` in summary.json);
    /// stacks.folded and summary.json are still written. Without it every
    /// capture is drawn; below 5% the page header, the job page and
    /// summary.json (`symbol_warning`) say that symbols are few.
    #[arg(long, value_name = "PCT")]
    pub min_symbolized: Option<f64>,

    /// The perf executable [default: `perf` on PATH].
    #[arg(long, value_name = "PATH")]
    pub perf: Option<PathBuf>,

    /// Split every shard into N time slices, each symbolized by its own
    /// `perf script --time` [default: automatic: a capture with fewer shards
    /// than --jobs has its big shards split so that every job works].
    #[arg(long, value_name = "N")]
    pub time_slices: Option<usize>,

    /// Root frame of the per-query flamegraphs merged over all workers
    /// (profiles/perf/queries/QUERY/): `worker` puts each worker's stacks
    /// under a `worker_N` frame, so imbalance between workers shows; `none`
    /// sums the workers' stacks.
    #[arg(long, value_name = "ROOT", default_value = "worker", value_parser = ["worker", "none"])]
    pub query_root: String,

    /// No progress bars or log lines on stderr; the result lines (stdout)
    /// and errors remain.
    #[arg(short, long)]
    pub quiet: bool,
    /// Who turns perf.data into text: `native` (read perf.data in-process,
    /// no perf needed, several times faster), `perf` (`perf script`), or
    /// `auto`: native for every shard it can read (frame-pointer call
    /// chains, x86-64 dwarf call chains), `perf script` for the others
    /// (compressed files, unknown records), with or without --inline. A
    /// shard native cannot read falls
    /// back to `perf script` with a warning; summary.json's symbolized_from
    /// says which ran.
    #[arg(long, value_name = "WHO", default_value = "auto")]
    pub symbolizer: jobprof::symbolize::native::Choice,
}

/// Runs `jobprof process`.
pub fn run(args: ProcessArgs) -> anyhow::Result<ExitCode> {
    if let Some(min) = args.min_symbolized.filter(|m| !(0.0..=100.0).contains(m)) {
        return Err(jobprof::Error::Usage(format!(
            "--min-symbolized {min}: give a percentage between 0 and 100"
        ))
        .into());
    }
    super::check_count("--jobs", args.jobs, super::MAX_JOBS)?;
    super::check_count("--time-slices", args.time_slices, super::MAX_TIME_SLICES)?;
    let mut opts = Options::default();
    opts.symbolizer = args.symbolizer;
    opts.jobs = args.jobs.unwrap_or(0);
    opts.inline = args.inline;
    opts.no_inline = args.no_inline;
    opts.force = args.force;
    opts.zstd_level = args.zstd_level;
    opts.formats = Formats::parse(&args.formats)?;
    opts.min_symbolized_pct = args.min_symbolized;
    opts.perf = args.perf;
    opts.time_slices = args.time_slices;
    let mut views = views::Options::default();
    views.query_root = args.query_root.parse()?;
    let filter = Filter {
        workers: args.worker,
        queries: args.query,
    };
    let progress = if args.quiet {
        Progress::quiet()
    } else {
        Progress::from_env()
    };
    // The result lines, one per capture, go to stdout as each capture ends;
    // log lines and bars to stderr.
    let report = pipeline::run(&args.dirs, &filter, &opts, &progress)?;
    let views = views::after_run(&report.captures, &views);
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
    Ok(views::exit_code(report.exit_code(), &views))
}
