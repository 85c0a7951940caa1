//! jobprof turns profiling captures of cluster (Slurm) jobs into flamegraphs,
//! summaries and compact archives.
//!
//! The modules are the stages a capture goes through, in the order the data
//! flows; a stage imports only the stages it builds on (earlier ones, and
//! [`sys`] beneath them all), never a later one:
//!
//! 1. [`capture`]: result directories and capture directories: their layout
//!    and output names, the one walker that finds captures, validation
//!    (jobprof-record's and the old pipeline's formats), the completion marker.
//! 2. [`symbolize`]: `perf.data` shards into `perf script` text, by `perf
//!    script` or the native reader and unwinder; JIT maps; build ids.
//! 3. [`text`]: `perf script` text into collapsed stacks: parsing, folding,
//!    the inferno-compatible mode, off-CPU accounting.
//! 4. [`output`]: what stacks become: flamegraphs, `summary.json`, the text
//!    report, pprof, the compressed archive.
//! 5. [`pipeline`]: `jobprof process` on one capture: the stages above, run
//!    unit by unit, published atomically.
//! 6. [`bulk`]: `jobprof reprocess`: many result directories, locally or as a
//!    Slurm array.
//! 7. [`views`]: the job-level pages and per-query merges over a result
//!    directory, built from what [`capture`] finds and [`output`] wrote.
//! 8. [`trend`]: `jobprof trend`: a series of processed runs, per query
//!    and function, with the changes beyond the noise, from what [`views`]
//!    and [`capture`] read.
//! 9. [`nsys`]: Nsight Systems reports: collect, flush, plan.
//! 10. [`sys`]: what every stage stands on: atomic writes, confined
//!     directories, input mapping, digests, external commands, locks,
//!     units, progress, Slurm's commands.
//!
//! All errors are [`Error`], mapped onto one [`ExitCode`] contract. Only the
//! `jobprof` binary prints to the user or exits.
//!
//! Folding in a few lines:
//!
//! ```
//! use jobprof::text::fold::{Folder, Options};
//!
//! let text = b"worker 42 1.0: 1000 cpu-clock:\n\tffff scan (/bin/w)\n\tfff0 main (/bin/w)\n\n\
//!              worker 42 1.1: 1000 cpu-clock:\n\n";
//! let folded = Folder::new(Options::default()).fold_bytes(text);
//! // The second sample has no frames: inferno drops it, jobprof keeps it.
//! assert_eq!(folded.to_bytes(), b"worker 1000\nworker;main;scan 1000\n");
//! assert_eq!(folded.total(), 2000);
//! ```

pub mod capture;
pub mod symbolize;
pub mod text;
pub mod output;
pub mod pipeline;
pub mod bulk;
pub mod views;
pub mod trend;
pub mod nsys;
pub mod sys;

pub mod error;

pub use error::{Error, ExitCode, Result};

/// A `--jobs`/`--threads` value, where 0 means one per core.
pub fn jobs_or_cores(requested: usize) -> usize {
    if requested == 0 {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    } else {
        requested
    }
}
