//! Typed errors for the whole library and the one exit-code contract.
//!
//! Every stage returns [`Result`]. This module stands beneath every layer
//! and names none of them: a module with richer failure modes keeps its
//! own error enum, converts it into [`Error::Layer`] itself (its own
//! `From` impl, beside the enum), and the binary maps it to an exit code
//! at its edge, as ripgrep does: `main.rs`'s `layer_exit_code` finds the
//! layer's error in the chain of causes (`output::render::Error`,
//! `sys::slurm::Error`, and `nsys::Error`, which converts [`Error`] into
//! its own) next to [`Error::exit_code`]. Messages carry the path (and,
//! where it helps, the line number or size) and say what to do. This
//! module does not print or exit: only `main.rs` does.

use std::io;
use std::path::{Path, PathBuf};

/// Process exit codes: the contract documented in the README.
/// Codes 3-6 mean different things to different subcommands (each is
/// returned by one subcommand only: 3 by `nsys collect` and `trend`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitCode {
    /// Everything asked for was done.
    Success,
    /// Some work failed or was refused while the rest was done (partial
    /// success), or the work itself failed.
    Failed,
    /// Bad usage, or input that cannot be read or is not what was expected.
    Usage,
    /// `nsys collect`: reports did not settle before the timeout (3).
    NsysTimeout,
    /// `nsys collect`: some reports stayed empty (0 bytes) (4).
    NsysEmpty,
    /// `nsys collect`: expected ranks never produced a report (5).
    NsysMissingRanks,
    /// `trend --fail-on-regression`: a significant regression beyond the
    /// gate (3).
    Regression,
    /// `trend --fail-on-regression`: a run tested has nothing to judge of
    /// a query its baseline runs have (6): the gate fails closed.
    NothingToJudge,
}

impl ExitCode {
    /// The numeric code handed to the operating system.
    pub fn code(self) -> u8 {
        match self {
            ExitCode::Success => 0,
            ExitCode::Failed => 1,
            ExitCode::Usage => 2,
            ExitCode::NsysTimeout | ExitCode::Regression => 3,
            ExitCode::NsysEmpty => 4,
            ExitCode::NsysMissingRanks => 5,
            ExitCode::NothingToJudge => 6,
        }
    }
}

/// Convenience alias used throughout the library.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in jobprof's library.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An I/O error on a named file or directory.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory involved.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: io::Error,
    },

    /// A binary `perf.data` file was given where `perf script` text is expected.
    #[error(
        "{}: this is a perf.data file (binary), not `perf script` text; \
         symbolize it first with `perf script -i {} > perf.script.txt`, \
         or give the perf.data itself (uncompressed) to `jobprof process` or `jobprof fold`",
        path.display(), path.display()
    )]
    PerfData {
        /// The offending input.
        path: PathBuf,
    },

    /// Binary data that is neither a known compressed stream nor text.
    #[error(
        "{}: binary data ({what}), not `perf script` text; \
         pass the text that `perf script` prints (optionally .gz or .zst compressed)",
        path.display()
    )]
    Binary {
        /// The offending input.
        path: PathBuf,
        /// What the sniffing saw.
        what: String,
    },

    /// A compressed input stream is corrupt or truncated.
    #[error("{}: corrupt or truncated {format} stream: {source}", path.display())]
    Corrupt {
        /// The offending input.
        path: PathBuf,
        /// `gzip` or `zstd`.
        format: &'static str,
        /// The decoder's complaint.
        #[source]
        source: io::Error,
    },

    /// A stream input (compressed, a pipe, stdin) holds a sample or line
    /// longer than `limit` (the input layer's `MAX_RECORD`, given where the
    /// error is built, so that this module names nothing below it): no
    /// text perf writes, a decompression bomb more likely; reading it on
    /// would hold it all in memory.
    #[error(
        "{}: {what} longer than {} MiB (no sample boundary or newline in it): not text as \
         perf prints it (a decompression bomb?); refusing to read on",
        path.display(),
        limit >> 20
    )]
    Oversized {
        /// The offending input.
        path: PathBuf,
        /// `a sample`, `a line`.
        what: &'static str,
        /// The longest sample or line read, in bytes.
        limit: usize,
    },

    /// Not one line of the input is a `perf script` sample: the input is
    /// something else (folded stacks, `perf report` output...).
    #[error(
        "{inputs}: not one line is a `perf script` sample; this looks like {looks_like}; {hint}"
    )]
    NoSamples {
        /// The inputs, comma separated.
        inputs: String,
        /// What the input looks like.
        looks_like: String,
        /// What to run instead.
        hint: String,
    },

    /// Invalid options or arguments that clap could not catch.
    #[error("{0}")]
    Usage(String),

    /// A layer's own error (`output::render`, `sys::slurm`), converted by
    /// that layer's `From` impl: its message, and itself as the source, so
    /// that the binary finds it in the chain of causes and maps it to an
    /// exit code at its edge ([`Error::exit_code`] says `None`).
    #[error("{0}")]
    Layer(#[source] Box<dyn std::error::Error + Send + Sync + 'static>),
}

impl Error {
    /// Wraps an I/O error with the path it concerns.
    pub fn io(path: impl AsRef<Path>, source: io::Error) -> Self {
        Error::Io {
            path: path.as_ref().to_path_buf(),
            source,
        }
    }

    /// The exit code this error maps to under the contract; `None` for a
    /// layer's error ([`Error::Layer`]), which the binary maps itself.
    pub fn exit_code(&self) -> Option<ExitCode> {
        match self {
            Error::Io { .. }
            | Error::PerfData { .. }
            | Error::Binary { .. }
            | Error::Corrupt { .. }
            | Error::Oversized { .. }
            | Error::NoSamples { .. }
            | Error::Usage(_) => Some(ExitCode::Usage),
            Error::Layer(_) => None,
        }
    }
}

/// True when `err` or one of its causes ([`std::error::Error::source`]) is
/// an I/O error of kind `BrokenPipe`: our output went to a reader that
/// stopped (e.g. `| head`), which the binary treats as success. Every error
/// enum keeps the `io::Error` of an output write as its `#[source]` (a
/// `transparent` variant forwards its inner error's), so it is found
/// however deep it sits.
pub fn is_broken_pipe(err: &(dyn std::error::Error + 'static)) -> bool {
    std::iter::successors(Some(err), |e| e.source()).any(|e| {
        e.downcast_ref::<io::Error>()
            .is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stage's error: an output write with its io::Error as source.
    #[derive(Debug, thiserror::Error)]
    enum Stage {
        #[error("writing out.svg: {source}")]
        Write {
            #[source]
            source: io::Error,
        },
    }

    /// A wrapper that forwards, as `Error`'s stage variants do.
    #[derive(Debug, thiserror::Error)]
    enum Outer {
        #[error(transparent)]
        Stage(#[from] Stage),
    }

    #[test]
    fn broken_pipes_are_found_under_any_wrapper() {
        let pipe = || io::Error::new(io::ErrorKind::BrokenPipe, "closed");
        assert!(is_broken_pipe(&pipe()));
        assert!(is_broken_pipe(&Error::io("out.svg", pipe())));
        let deep = Outer::Stage(Stage::Write { source: pipe() });
        assert!(is_broken_pipe(&deep));
        let boxed: Box<dyn std::error::Error + Send + Sync> = Box::new(deep);
        assert!(is_broken_pipe(boxed.as_ref()));
        let other = io::Error::new(io::ErrorKind::PermissionDenied, "no");
        assert!(!is_broken_pipe(&Error::io("out.svg", other)));
        assert!(!is_broken_pipe(&Error::Usage("bad".into())));
    }
}
