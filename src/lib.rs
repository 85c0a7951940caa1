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
pub mod build_ids;
mod bytes;
pub mod compat;
pub mod confined;
pub mod counts;
mod digest;
pub mod error;
pub mod fold;
pub mod input;
pub mod input_stamp;
pub mod jit;
pub mod job;
pub mod native;
pub mod nsys;
pub mod offcpu;
pub mod perf_script;
pub mod pprof;
pub mod process;
pub mod progress;
pub mod render;
pub mod repl;
pub mod report;
pub mod reprocess;
pub mod result_dir;
pub mod samples;
pub mod slurm;
pub mod summary;
pub mod symbolize;
pub mod units;

pub use error::{Error, ExitCode, Result};

/// `f` of each item, on up to `jobs` threads at once, in the items' order
/// (for a few long, independent tasks such as one per file).
pub(crate) fn map_jobs<T: Sync, R: Send>(
    items: &[T],
    jobs: usize,
    f: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let next = AtomicUsize::new(0);
    let results: Vec<std::sync::Mutex<Option<R>>> =
        items.iter().map(|_| std::sync::Mutex::new(None)).collect();
    std::thread::scope(|scope| {
        for _ in 0..jobs.clamp(1, items.len().max(1)) {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(item) = items.get(i) else { break };
                let r = f(item);
                *results[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
            });
        }
    });
    results
        .into_iter()
        .map(|r| {
            let r = r.into_inner().unwrap_or_else(|e| e.into_inner());
            r.expect("every item was mapped")
        })
        .collect()
}

/// A `--jobs`/`--threads` value, where 0 means one per core.
pub(crate) fn jobs_or_cores(requested: usize) -> usize {
    if requested == 0 {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    } else {
        requested
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn map_jobs_keeps_the_order_whatever_the_threads() {
        let items: Vec<u64> = (0..100).collect();
        for jobs in [0, 1, 3, 200] {
            let out = super::map_jobs(&items, jobs, |&i| {
                // Later items finish first.
                std::thread::sleep(std::time::Duration::from_micros(100 - i));
                i * i
            });
            assert_eq!(out, items.iter().map(|i| i * i).collect::<Vec<_>>());
        }
        assert!(super::map_jobs(&[] as &[u8], 4, |_| 0).is_empty());
    }
}
