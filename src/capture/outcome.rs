//! How the processing of one capture ended ([`Outcome`], [`Status`]): what
//! `jobprof process` and `jobprof reprocess` return per capture and what
//! the job views take to show states that left nothing on disk.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::error::ExitCode;
use crate::sys::confined::Entry;

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
    /// The folded stacks the run wrote, kept for the job views (`None`:
    /// not kept, read from disk if needed).
    pub stacks: Option<Arc<KeptStacks>>,
}

/// A capture's folded stacks as a run wrote them, kept in memory for the
/// job views, which take them instead of reading the file back only while
/// it is still the one written (`file`: checked under the
/// views' lock, so a later run's outputs are read from disk). The stacks
/// lie end to end in one buffer (a `String` each would take half as much
/// again).
#[derive(Debug, PartialEq, Eq)]
pub struct KeptStacks {
    /// The `stacks.folded` written, when it was renamed into place.
    pub file: Entry,
    text: String,
    /// Each stack's end in `text`, and its count.
    ends: Vec<(usize, u64)>,
}

impl KeptStacks {
    /// Keeps `stacks` (what reading the file back gives: distinct, sorted
    /// bytewise, counts above 0) as the content of the file `file`.
    pub fn new<'s>(
        file: Entry,
        stacks: impl ExactSizeIterator<Item = (&'s str, u64)> + Clone,
    ) -> KeptStacks {
        let mut text = String::with_capacity(stacks.clone().map(|(s, _)| s.len()).sum());
        let mut ends = Vec::with_capacity(stacks.len());
        for (s, c) in stacks {
            text.push_str(s);
            ends.push((text.len(), c));
        }
        KeptStacks { file, text, ends }
    }

    /// The stacks and their counts, in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, u64)> {
        let starts = std::iter::once(0).chain(self.ends.iter().map(|&(e, _)| e));
        (starts.zip(&self.ends)).map(|(start, &(end, c))| (&self.text[start..end], c))
    }

    /// How many stacks.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// No stack at all.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_stacks_give_back_what_they_took() {
        let meta = std::fs::symlink_metadata("/").unwrap();
        let stacks = [("a;b", 2), ("a;c", 1), ("é;x y", 7)];
        let k = KeptStacks::new(Entry::of(&meta), stacks.into_iter());
        assert_eq!(k.iter().collect::<Vec<_>>(), stacks);
        assert_eq!((k.len(), k.is_empty()), (3, false));
        let none = KeptStacks::new(Entry::of(&meta), Vec::new().into_iter());
        assert!(none.is_empty() && none.iter().next().is_none());
    }
}
