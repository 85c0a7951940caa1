//! jobprof turns profiling captures of cluster (Slurm) jobs into flamegraphs,
//! summaries and compact archives.
//!
//! The modules follow the data's way through the tool: `input` opens files
//! (mmap or stream), `perf_script` parses `perf script` text, `fold` turns it
//! into collapsed stacks, and later stages render, summarize, archive and
//! publish. Only the `jobprof` binary prints to the user or exits.

#![warn(missing_docs)]

pub mod atomic;
pub mod compat;
pub mod error;
pub mod nsys;
pub mod progress;
pub mod repl;
pub mod slurm;

pub use error::{Error, ExitCode, Result};
pub mod archive;
pub mod fold;
pub mod input;
pub mod perf_script;
pub mod process;
pub mod render;
pub mod reprocess;
pub mod result_dir;
pub mod summary;
pub mod symbolize;
