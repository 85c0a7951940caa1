//! How the processing of one capture ended ([`Outcome`], [`Status`]): what
//! `jobprof process` and `jobprof reprocess` return per capture and what
//! the job views take to show states that left nothing on disk.

use std::path::PathBuf;
use std::time::Duration;

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
