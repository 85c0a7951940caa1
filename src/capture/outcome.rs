//! How the processing of one capture ended ([`Outcome`], [`Status`]): what
//! `jobprof process` and `jobprof reprocess` return per capture and what
//! the job views take to show states that left nothing on disk.

use std::path::PathBuf;
use std::time::Duration;

use crate::error::ExitCode;

/// How one capture ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// All outputs written, marker written.
    Processed,
    /// Already complete; nothing done.
    Skipped,
    /// Validation refused it; nothing written.
    Refused,
    /// Too little was symbolized: folded stacks and summary written, no
    /// flamegraph, no marker.
    RenderRefused,
    /// Something failed (a shard, perf, an output); what could be written
    /// was, but no marker.
    Failed,
}

impl Status {
    /// Lower-case word for reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Processed => "processed",
            Status::Skipped => "skipped",
            Status::Refused => "refused",
            Status::RenderRefused => "not rendered",
            Status::Failed => "failed",
        }
    }

    /// True when the outcome counts against the exit code.
    pub fn is_failure(self) -> bool {
        matches!(
            self,
            Status::Refused | Status::RenderRefused | Status::Failed
        )
    }
}

/// The exit code of a run of `process` or `reprocess` with these outcomes
/// (docs/exit-codes.md): 0 when none counts as a failure; 2 when nothing
/// could be done: every capture refused (its input invalid, missing or
/// unreadable: the reason on its result line); 1 otherwise (some done,
/// or the work itself failed: a damaged shard, a full disk).
pub fn run_exit_code(outcomes: &[Outcome]) -> ExitCode {
    let failures = outcomes.iter().filter(|o| o.status.is_failure()).count();
    let nothing = outcomes.iter().all(|o| o.status == Status::Refused);
    match failures {
        0 => ExitCode::Success,
        _ if nothing => ExitCode::Usage,
        _ => ExitCode::Failed,
    }
}

/// The outcome of one capture (or render-only directory).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// The capture directory (the file, for a plain `perf.data`).
    pub dir: PathBuf,
    /// How it ended.
    pub status: Status,
    /// One line: what was done, or why not.
    pub message: String,
    /// Wall time spent on it.
    pub elapsed: Duration,
}

impl Outcome {
    /// The result line: `DIR: processed (1.2s): ...`.
    pub fn line(&self) -> String {
        format!(
            "{}: {} ({:.1}s): {}",
            crate::sys::progress::printable(&self.dir),
            self.status.as_str(),
            self.elapsed.as_secs_f64(),
            self.message
        )
    }
}
