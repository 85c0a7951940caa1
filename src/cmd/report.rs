//! `jobprof report PATH`: the text report of a capture, `perf script` text
//! or folded stacks, on stdout (or `-o FILE`).

use std::path::PathBuf;

use clap::Args;
use jobprof::output::report::{self, Options};
use jobprof::sys::atomic::{AtomicFile, Destination};
use jobprof::ExitCode;

/// Print a capture's functions by self time, like `perf report --no-children`.
///
/// Print a capture's functions by self time, like `perf report --stdio
/// --no-children` but over all shards together, with the event, samples,
/// window and symbol figures on top; 80 columns wide.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  jobprof report perf.data
  jobprof report result_dir_123/profiles/perf/worker_0/q17
  jobprof report perf.script.zst --limit 20
  jobprof report stacks.folded --percent-limit 1

Exit status: 0 printed; 1 printed, but some lines of folded input were
not `stack COUNT` and were skipped (as `render`; in perf script text they
are counted, as `fold` does); 2 bad usage or an input that is neither a
capture, perf script text nor folded stacks.")]
pub struct ReportArgs {
    /// A capture directory (RESULT_DIR/profiles/perf/worker_N/QUERY), a
    /// perf.data file (symbolized natively), a `perf script` text file
    /// (plain, .gz or .zst) or folded stacks; `-` reads stdin.
    #[arg(value_name = "PATH")]
    pub path: PathBuf,

    /// Leave out functions (and call paths) below PCT percent of the
    /// weight, as `perf report --percent-limit`.
    #[arg(long, value_name = "PCT", default_value_t = 0.1)]
    pub percent_limit: f64,

    /// Print at most N functions.
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,

    /// Write to this file (atomically) instead of stdout.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// Runs `jobprof report`.
pub fn run(args: ReportArgs) -> anyhow::Result<ExitCode> {
    if !(0.0..=100.0).contains(&args.percent_limit) {
        return Err(jobprof::Error::Usage(format!(
            "--percent-limit {}: give a percentage between 0 and 100",
            args.percent_limit
        ))
        .into());
    }
    // A perf.data is symbolized natively first, as `jobprof process` does,
    // and its samples read as `report.txt`'s are.
    let perf_data = jobprof::sys::input::is_perf_data(&args.path).unwrap_or(false);
    let mut profile = match perf_data {
        true => jobprof::pipeline::report_plain(&args.path, &super::files::perf_data_options())?,
        false => report::read::path(&args.path)?,
    };
    if perf_data {
        // As for any one file: no shard count in the header.
        profile.source = args.path.display().to_string();
        profile.shards = None;
    }
    let opts = Options {
        percent_limit: args.percent_limit,
        limit: args.limit,
        ..Options::default()
    };
    // Folded input is judged as `render` judges it: a skipped line makes
    // the exit code 1; `perf script` text as `fold` does (counted, 0).
    let folded = profile.samples.is_none();
    if profile.bad_lines > 0 {
        jobprof::errln!(
            "jobprof: warning: {}: {} line(s) were not {} and were skipped{}",
            args.path.display(),
            profile.bad_lines,
            if folded {
                "`stack count`"
            } else {
                "`perf script` text"
            },
            if folded {
                " (the exit code will be 1)"
            } else {
                ""
            }
        );
    }
    let mut text = Vec::new();
    report::write(&profile, &opts, &mut text)?;
    match &args.output {
        Some(path) => {
            let mut f = AtomicFile::open(path, Destination::Follow, false)?;
            std::io::Write::write_all(&mut f, &text).map_err(|e| jobprof::Error::io(path, e))?;
            f.commit()?;
        }
        None => {
            use std::io::Write as _;
            std::io::stdout().lock().write_all(&text)?;
        }
    }
    Ok(if folded && profile.bad_lines > 0 {
        ExitCode::Failed
    } else {
        ExitCode::Success
    })
}
