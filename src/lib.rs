//! jobprof turns profiling captures of cluster (Slurm) jobs into flamegraphs,
//! summaries and compact archives.
//!
//! The modules follow the data's way through the tool: [`input`] opens files
//! (memory map or stream, with magic-byte sniffing), [`perf_script`] parses
//! `perf script` lines, [`fold`] turns the text into collapsed stacks,
//! [`render`] draws flamegraphs (SVG, offline HTML, speedscope), and the
//! later stages process result directories (and draw their job-level views,
//! [`job`]), talk to Slurm ([`slurm`],
//! [`repl`]) and gather Nsight Systems reports ([`nsys`]). Every file is
//! written through [`atomic`]; progress is drawn only by [`progress`]; all
//! errors are [`Error`], mapped onto one [`ExitCode`] contract. Only the
//! `jobprof` binary prints to the user or exits.
//!
//! Folding in a few lines:
//!
//! ```
//! use jobprof::fold::{Folder, Options};
//!
//! let text = b"worker 42 1.0: 1000 cpu-clock:\n\tffff scan (/bin/w)\n\tfff0 main (/bin/w)\n\n\
//!              worker 42 1.1: 1000 cpu-clock:\n\n";
//! let folded = Folder::new(Options::default()).fold_bytes(text);
//! // The second sample has no frames: inferno drops it, jobprof keeps it.
//! assert_eq!(folded.to_bytes(), b"worker 1000\nworker;main;scan 1000\n");
//! assert_eq!(folded.total(), 2000);
//! ```

pub mod archive;
pub mod atomic;
mod bytes;
pub mod compat;
pub mod counts;
mod digest;
pub mod error;
pub mod fold;
pub mod input;
pub mod job;
pub mod native;
pub mod nsys;
pub mod perf_script;
pub mod process;
pub mod progress;
pub mod render;
pub mod repl;
pub mod reprocess;
pub mod result_dir;
pub mod slurm;
pub mod summary;
pub mod symbolize;
pub mod units;

pub use error::{Error, ExitCode, Result};

/// A `--jobs`/`--threads` value, where 0 means one per core.
pub(crate) fn jobs_or_cores(requested: usize) -> usize {
    if requested == 0 {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    } else {
        requested
    }
}
