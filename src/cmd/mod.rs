//! One file per subcommand: its clap arguments and the few lines that turn
//! them into library options and call the library. A command file imports
//! no other command's file: what several share has its own file here
//! (`bars`: progress; `pipeline_args`: `process` and `reprocess` options;
//! `files`: inputs and outputs of the file commands; `look`: a
//! flamegraph's look; `nsys_reports`: Nsight Systems reports beside the
//! captures), checked by tests/layout.rs.

pub mod bars;
pub mod diff;
pub mod files;
pub mod fold;
pub mod generate;
pub mod look;
pub mod nsys;
pub mod nsys_reports;
pub mod pipeline_args;
pub mod process;
pub mod render;
pub mod repl;
pub mod report;
pub mod reprocess;
pub mod trend;

/// The most worker threads `--jobs`/`--threads` may ask for: far above
/// any node's cores, far below what exhausts a process's threads.
pub const MAX_JOBS: usize = 1024;
/// The most time slices per shard `--time-slices` may ask for (each is one
/// `perf script` run or one pass of the native symbolizer).
pub const MAX_TIME_SLICES: usize = 1024;

/// A count option, checked: at least 1 and at most `max`, else a usage
/// error (exit 2) naming the flag and the limit.
pub fn check_count(flag: &str, value: Option<usize>, max: usize) -> Result<(), jobprof::Error> {
    match value {
        Some(0) => Err(jobprof::Error::Usage(format!("{flag} must be at least 1"))),
        Some(v) if v > max => Err(jobprof::Error::Usage(format!(
            "{flag} {v} is more than the limit of {max}"
        ))),
        _ => Ok(()),
    }
}

/// One stdout line per capture `jobprof-record` is writing now under
/// `roots` (its `.capturing` marker): listed as "being written" next to the
/// captures of the run, not processed, the exit code untouched.
pub fn list_being_written(roots: &[std::path::PathBuf]) -> anyhow::Result<()> {
    let mut found: Vec<_> = roots
        .iter()
        .flat_map(|r| jobprof::capture::capturing::being_written(r))
        .collect();
    found.dedup_by(|a, b| a.worker_dir == b.worker_dir);
    for b in found {
        jobprof::outln!(
            "{}: being written (jobprof-record is capturing it: {}); not processed",
            b.capture_dir().display(),
            b.describe()
        )?;
    }
    Ok(())
}
