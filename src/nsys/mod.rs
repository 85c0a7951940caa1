//! Nsight Systems reports of multi-rank Slurm jobs: collect, flush and plan.
//!
//! Every rank of a GPU job profiled through the `nsight-slurm` wrapper writes
//! one `<job>_<node>_rank<k>.nsys-rep` report, but only when its profiling
//! session ends, and big reports take minutes to write. This module makes the
//! teardown that gathers them safe:
//!
//! - [`mod@collect`] waits until the reports under a report root have *settled*
//!   (non-empty, and no size or modification time changed during a settle
//!   window), rescue-copies reports out of per-rank runtime workspaces,
//!   serializes concurrent collectors with a lock, and writes a manifest (and
//!   optionally a `reports.tar.zst` archive);
//! - [`mod@flush`] is the teardown sequence run before a job's steps are killed:
//!   stop the sessions, take a baseline, signal the connector steps, collect;
//! - [`plan`] validates a profiling config and builds the worker launch argv;
//! - [`mod@setup`] configures the `nsight-slurm` wrapper and starts its
//!   coordinator before the first worker step, and stops it at the end;
//! - [`mod@wrapper`] is how every `nsight-slurm` call is made and logged;
//! - [`export`] reads a report through its SQLite export (`nsys export`)
//!   into folded CPU stacks, waits and NVTX / CUDA tables, which the binary
//!   hands to `pipeline::imported` to write.
//!
//! It never deletes, truncates or rewrites a report: collecting only weighs,
//! copies, hashes and archives them, and `export` runs `nsys export` into a
//! temporary directory of its own and opens the export read-only.

pub mod collect;
pub mod export;
pub mod flush;
pub mod plan;
pub mod setup;
mod walk;
pub mod wrapper;

use crate::sys::progress::{Bar, Counts, Progress};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use crate::sys::exec::{self, ExternalCommand};
use crate::sys::units::format_duration;

pub use collect::{collect, CollectOptions, Collection, Manifest, ReportEntry, ReportStatus};
pub use flush::{flush, FlushOptions};
pub use plan::{Dirs, Plan, ProfilingConfig};
pub use setup::{setup, teardown, SetupOutcome};
pub use wrapper::Wrapper;

/// Status lines for a long-running nsys command: plain timestamped log lines
/// off a terminal, and on a terminal lines printed above one progress bar
/// (elapsed seconds of the timeout), so commands and polls are always shown.
pub struct Log {
    progress: Box<dyn Progress>,
    bar: Box<dyn Bar>,
}

impl std::fmt::Debug for Log {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Log").finish_non_exhaustive()
    }
}

impl Log {
    /// A log whose bar counts seconds up to `limit`.
    pub fn new(progress: &dyn Progress, limit: Duration, what: &str) -> Log {
        Log {
            progress: progress.boxed(),
            bar: progress.bar(Some(limit.as_secs().max(1)), Counts::Items, what),
        }
    }

    /// Prints one status line.
    pub fn line(&self, msg: impl AsRef<str>) {
        if self.progress.draws_bars() {
            self.bar.println(&format!(
                "[jobprof {}] {}",
                crate::sys::units::utc_timestamp(),
                msg.as_ref()
            ));
        } else {
            self.progress.log(msg.as_ref());
        }
    }

    /// Moves the bar to `elapsed`.
    pub fn tick(&self, elapsed: Duration) {
        self.bar.set_position(elapsed.as_secs());
    }

    /// Removes the bar (before another one is drawn).
    pub fn finish(&self) {
        self.bar.finish();
    }

    /// Runs `cmd` (see [`crate::sys::exec`]), logging its command line
    /// before and its result after.
    pub fn run(&self, cmd: &ExternalCommand) -> Result<exec::Output, exec::Error> {
        self.line(format!("running: {}", cmd.display()));
        let outcome = cmd.run();
        let name = cmd.program();
        let detail = |s: &str| {
            let s = s.trim();
            if s.is_empty() {
                String::new()
            } else {
                format!(": {}", s.lines().take(5).collect::<Vec<_>>().join(" | "))
            }
        };
        match &outcome {
            Err(why) => self.line(format!("{name} failed: {why}")),
            Ok(out) if out.success() => {
                self.line(format!("{name} exited 0{}", detail(&out.stdout)))
            }
            Ok(out) => self.line(format!(
                "{name} failed ({}){}",
                out.status,
                detail(if out.stderr.trim().is_empty() {
                    &out.stdout
                } else {
                    &out.stderr
                })
            )),
        }
        outcome
    }

    /// The progress factory behind this log.
    pub fn progress(&self) -> &dyn Progress {
        &*self.progress
    }
}

/// The file name suffix of Nsight Systems reports.
pub const REPORT_SUFFIX: &str = ".nsys-rep";

/// The `-o` pattern every rank writes its report with (under the run's
/// direct-output directory): one report per job, node and rank.
pub const REPORT_PATTERN: &str = "%q{SLURM_JOB_ID}_%q{SLURMD_NODENAME}_rank%q{SLURM_PROCID}";

/// What can go wrong collecting, flushing or planning.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Reports were still changing when the timeout expired.
    #[error(
        "timed out after {}: reports were still being written: {}; \
         wait longer with a larger --timeout (see {})",
        format_duration(*waited), list(changing), manifest.display()
    )]
    Timeout {
        /// How long the collector waited.
        waited: Duration,
        /// Reports (relative paths) whose size or mtime changed within the
        /// last settle window, or a note that the window had not yet elapsed.
        changing: Vec<String>,
        /// Where the manifest with the details was written.
        manifest: PathBuf,
    },

    /// Some reports were still 0 bytes when the timeout expired.
    #[error(
        "timed out after {}: {} report(s) stayed empty (0 bytes): {}; \
         the profiled process never wrote its report (killed before its session ended?) (see {})",
        format_duration(*waited), empty.len(), list(empty), manifest.display()
    )]
    EmptyReports {
        /// How long the collector waited.
        waited: Duration,
        /// The empty reports, relative to the report root.
        empty: Vec<String>,
        /// Where the manifest with the details was written.
        manifest: PathBuf,
    },

    /// Expected ranks (or any report at all) never appeared.
    #[error(
        "timed out after {}: {}{}; check that every rank ran under nsys and wrote to {} \
         (or pass its runtime workspace with --runtime-dir) (see {})",
        format_duration(*waited), missing_text(ranks), also_empty_text(also_empty),
        report_root.display(), manifest.display()
    )]
    MissingRanks {
        /// How long the collector waited.
        waited: Duration,
        /// The ranks without a report; empty when no report appeared at all
        /// and no rank count was expected.
        ranks: Vec<u32>,
        /// Reports that also stayed empty (relative paths).
        also_empty: Vec<String>,
        /// The report root searched.
        report_root: PathBuf,
        /// Where the manifest with the details was written.
        manifest: PathBuf,
    },

    /// Another collector held the report root's lock for the whole timeout.
    #[error(
        "timed out after {}: another collector held {} the whole time; \
         wait for it (its manifest has the result) or give a longer --timeout",
        format_duration(*waited), lock.display()
    )]
    LockTimeout {
        /// How long this collector waited.
        waited: Duration,
        /// The lock file.
        lock: PathBuf,
    },

    /// The profiling config is invalid.
    #[error("{}: {message}", path.display())]
    Config {
        /// The config file.
        path: PathBuf,
        /// Which field is wrong, why, and what to write instead.
        message: String,
    },

    /// A wrapper call of the set-up or teardown failed.
    #[error("{command} failed: {why} (see {})", log.display())]
    Wrapper {
        /// The command line.
        command: String,
        /// Its exit status and last line of output, or why it did not finish.
        why: String,
        /// The wrapper log with the call's whole output.
        log: PathBuf,
    },

    /// Invalid options (a flag's value that clap cannot check alone).
    #[error("{0}")]
    Usage(String),

    /// An I/O error on a named file or directory.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory involved.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    /// Wraps an I/O error with the path it concerns.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }

    /// The exit code this error maps to under the contract.
    pub fn exit_code(&self) -> crate::ExitCode {
        use crate::ExitCode;
        match self {
            Error::Timeout { .. } | Error::LockTimeout { .. } => ExitCode::NsysTimeout,
            Error::EmptyReports { .. } => ExitCode::NsysEmpty,
            Error::MissingRanks { .. } => ExitCode::NsysMissingRanks,
            Error::Config { .. } | Error::Usage(_) | Error::Io { .. } => ExitCode::Usage,
            Error::Wrapper { .. } => ExitCode::Failed,
        }
    }
}

impl From<crate::Error> for Error {
    fn from(e: crate::Error) -> Self {
        match e {
            crate::Error::Io { path, source } => Error::Io { path, source },
            other => Error::Usage(other.to_string()),
        }
    }
}

/// Joins names for a message, eliding the middle of very long lists.
fn list(items: &[String]) -> String {
    const SHOW: usize = 8;
    if items.len() <= SHOW {
        return items.join(", ");
    }
    let mut s = items[..SHOW].join(", ");
    let _ = write!(s, " and {} more", items.len() - SHOW);
    s
}

fn also_empty_text(empty: &[String]) -> String {
    if empty.is_empty() {
        String::new()
    } else {
        format!(
            ", and {} report(s) stayed empty (0 bytes): {}",
            empty.len(),
            list(empty)
        )
    }
}

fn missing_text(ranks: &[u32]) -> String {
    if ranks.is_empty() {
        "no *.nsys-rep report appeared".to_string()
    } else {
        format!(
            "{} expected rank(s) never produced a report: {}",
            ranks.len(),
            compact_ranks(ranks)
        )
    }
}

/// Formats sorted ranks compactly: `0-3,7,9-10`.
pub fn compact_ranks(ranks: &[u32]) -> String {
    let mut out = String::new();
    let mut i = 0;
    while i < ranks.len() {
        let start = ranks[i];
        let mut end = start;
        while i + 1 < ranks.len() && ranks[i + 1] == end + 1 {
            i += 1;
            end = ranks[i];
        }
        if !out.is_empty() {
            out.push(',');
        }
        if start == end {
            let _ = write!(out, "{start}");
        } else {
            let _ = write!(out, "{start}-{end}");
        }
        i += 1;
    }
    out
}

/// Job, node and rank parsed from a report file name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReportName {
    /// The Slurm job ID (`SLURM_JOB_ID`).
    pub job: Option<String>,
    /// The node name (`SLURMD_NODENAME`).
    pub node: Option<String>,
    /// The rank (`SLURM_PROCID`).
    pub rank: Option<u32>,
}

impl ReportName {
    /// Parses `<job>_<node>_rank<k>.nsys-rep`. Names that do not follow the
    /// launch pattern give all fields empty (they are still collected). The
    /// node may itself contain underscores: the job is everything before the
    /// first `_`, the rank everything after the last `_rank`.
    pub fn parse(file_name: &str) -> ReportName {
        let Some(stem) = file_name.strip_suffix(REPORT_SUFFIX) else {
            return ReportName::default();
        };
        let Some((prefix, rank)) = stem.rsplit_once("_rank") else {
            return ReportName::default();
        };
        let Some((job, node)) = prefix.split_once('_') else {
            return ReportName::default();
        };
        let rank_ok = !rank.is_empty() && rank.bytes().all(|b| b.is_ascii_digit());
        match (rank_ok, rank.parse::<u32>()) {
            (true, Ok(rank)) if !job.is_empty() && !node.is_empty() => ReportName {
                job: Some(job.to_string()),
                node: Some(node.to_string()),
                rank: Some(rank),
            },
            _ => ReportName::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_broken_pipe_on_a_report_is_found() {
        let source = std::io::Error::new(std::io::ErrorKind::BrokenPipe, "closed");
        let e = Error::Io {
            path: "r.nsys-rep".into(),
            source,
        };
        assert!(crate::error::is_broken_pipe(&e));
    }

    #[test]
    fn parses_launch_pattern_names() {
        let n = ReportName::parse("4242_gpu-node-07_rank13.nsys-rep");
        assert_eq!(n.job.as_deref(), Some("4242"));
        assert_eq!(n.node.as_deref(), Some("gpu-node-07"));
        assert_eq!(n.rank, Some(13));
    }

    #[test]
    fn node_names_may_contain_underscores() {
        let n = ReportName::parse("7_rack_a_n1_rank0.nsys-rep");
        assert_eq!(n.job.as_deref(), Some("7"));
        assert_eq!(n.node.as_deref(), Some("rack_a_n1"));
        assert_eq!(n.rank, Some(0));
    }

    #[test]
    fn other_names_have_empty_fields() {
        for name in [
            "profile.nsys-rep",
            "1_rank2.nsys-rep",
            "1_n_rankX.nsys-rep",
            "1_n_rank.nsys-rep",
            "_n_rank1.nsys-rep",
            "1_n_rank1.qdrep",
            "1_n_rank-1.nsys-rep",
            "1_n_rank99999999999.nsys-rep",
        ] {
            assert_eq!(ReportName::parse(name), ReportName::default(), "{name}");
        }
    }

    #[test]
    fn compacts_rank_lists() {
        assert_eq!(compact_ranks(&[0, 1, 2, 3, 7, 9, 10]), "0-3,7,9-10");
        assert_eq!(compact_ranks(&[5]), "5");
        assert_eq!(compact_ranks(&[]), "");
    }

    #[test]
    fn exit_codes_follow_the_contract() {
        let m = PathBuf::from("m.json");
        let w = Duration::from_secs(1);
        let t = Error::Timeout {
            waited: w,
            changing: vec!["a".into()],
            manifest: m.clone(),
        };
        let e = Error::EmptyReports {
            waited: w,
            empty: vec!["direct/1_n_rank0.nsys-rep".into()],
            manifest: m.clone(),
        };
        let r = Error::MissingRanks {
            waited: w,
            ranks: vec![2, 3],
            also_empty: vec![],
            report_root: "/r".into(),
            manifest: m,
        };
        assert_eq!(t.exit_code().code(), 3);
        assert_eq!(e.exit_code().code(), 4);
        assert!(e.to_string().contains("direct/1_n_rank0.nsys-rep"));
        assert_eq!(r.exit_code().code(), 5);
        assert!(r.to_string().contains("2-3"));
        assert_eq!(Error::Usage("x".into()).exit_code().code(), 2);
        let w = Error::Wrapper {
            command: "nsight-slurm coordinator start".into(),
            why: "exit status: 1: busy".into(),
            log: "/run/nsight-slurm.out".into(),
        };
        assert_eq!(w.exit_code().code(), 1);
        assert!(w
            .to_string()
            .contains("coordinator start failed: exit status: 1: busy"));
    }
}
