//! How the library reports progress: the [`Progress`] trait, which the
//! binary implements with drawn bars (indicatif) on a terminal, and
//! [`LogLines`], the library's own implementation without bars.
//!
//! Off a terminal (sbatch logs, CI, pipes) no bars are drawn and the same
//! events are printed as plain timestamped lines, so logs stay readable: by
//! default only what a reader must see ([`Progress::log`]: warnings, a
//! run's plan), the detail of each step ([`Progress::detail`]) with `-v`,
//! since every capture already has its one result line on stdout. Nothing
//! else in the library draws or prints progress. This module knows nothing
//! about what is being processed, and no drawing library.

/// `eprintln!` that never panics: a closed or broken stderr loses the line,
/// never the run (`2>&-`, `2>/dev/full`, a log reader that went away).
#[macro_export]
macro_rules! errln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr().lock(), $($arg)*);
    }};
}

/// `println!` that returns the write's `io::Result` instead of panicking,
/// so a closed or broken stdout ends the command through the exit-code
/// contract (a broken pipe counts as success).
#[macro_export]
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout().lock(), $($arg)*)
    }};
}

/// `print!` counterpart of [`outln!`].
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        write!(std::io::stdout().lock(), $($arg)*)
    }};
}

/// What a bar counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counts {
    /// Items (captures, units).
    Items,
    /// Bytes.
    Bytes,
}

/// One progress bar handed out by a [`Progress`].
pub trait Bar: Send + Sync {
    /// Counts `n` more.
    fn inc(&self, n: u64);
    /// Moves it to `pos`.
    fn set_position(&self, pos: u64);
    /// Prints `line` above it (a status line that must not be drawn over).
    fn println(&self, line: &str);
    /// Removes it.
    fn finish(&self);
}

/// Where the library's progress goes: bars, log lines and the result
/// lines. The binary draws bars on a terminal; [`LogLines`] prints lines
/// only.
pub trait Progress: Send + Sync {
    /// A bar counting `len` of `counts` (`None`: a counter of unknown
    /// total) labelled `msg`; drawn with the others this progress drew.
    fn bar(&self, len: Option<u64>, counts: Counts, msg: &str) -> Box<dyn Bar>;
    /// Whether bars are drawn.
    fn draws_bars(&self) -> bool;
    /// Prints one result line on stdout (one per capture: what happened to
    /// it), whether or not log lines are printed, unless silent; drawn
    /// bars are kept out of its way. A closed stdout is not an error here:
    /// the results are also in the report.
    fn result(&self, line: &str);
    /// Prints one log line on stderr, when bars are not drawn (so the two
    /// never interleave): `[jobprof 2026-11-30T05:41:26Z] message`.
    fn log(&self, msg: &str);
    /// A log line of detail (what each step of a capture did): printed as
    /// [`Self::log`] prints, only with `-v/--verbose`.
    fn detail(&self, msg: &str);
    /// The same progress, to hold on to (a long command's log).
    fn boxed(&self) -> Box<dyn Progress>;
}

/// This progress with its bars hidden (per-capture bars under one bar
/// overall), its lines printed as before.
pub struct NoBars<'a>(pub &'a dyn Progress);

impl Progress for NoBars<'_> {
    fn bar(&self, _: Option<u64>, _: Counts, _: &str) -> Box<dyn Bar> {
        Box::new(Hidden)
    }
    fn draws_bars(&self) -> bool {
        false
    }
    fn result(&self, line: &str) {
        self.0.result(line)
    }
    fn log(&self, msg: &str) {
        self.0.log(msg)
    }
    fn detail(&self, msg: &str) {
        self.0.detail(msg)
    }
    fn boxed(&self) -> Box<dyn Progress> {
        self.0.boxed()
    }
}

/// A reader that counts what it reads on a bar.
pub struct Counting<'a, R> {
    inner: R,
    bar: &'a dyn Bar,
}

impl<'a, R: std::io::Read> Counting<'a, R> {
    /// `inner`, its bytes counted on `bar`.
    pub fn new(bar: &'a dyn Bar, inner: R) -> Self {
        Counting { inner, bar }
    }
}

impl<R: std::io::Read> std::io::Read for Counting<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.bar.inc(n as u64);
        Ok(n)
    }
}

/// A bar nobody sees.
#[derive(Debug, Clone, Copy, Default)]
pub struct Hidden;

impl Bar for Hidden {
    fn inc(&self, _: u64) {}
    fn set_position(&self, _: u64) {}
    fn println(&self, _: &str) {}
    fn finish(&self) {}
}

/// Progress as plain log lines, never bars: the library's own [`Progress`]
/// (library use, tests, the binary off a terminal).
#[derive(Debug, Clone, Copy)]
pub struct LogLines {
    quiet: bool,
    results: bool,
    verbose: bool,
}

impl LogLines {
    /// No log lines and no results (library use, tests).
    pub fn silent() -> Self {
        LogLines {
            quiet: true,
            results: false,
            verbose: false,
        }
    }

    /// Log lines and results.
    pub fn plain() -> Self {
        LogLines {
            quiet: false,
            results: true,
            verbose: false,
        }
    }

    /// Only the result lines (`-q/--quiet`).
    pub fn quiet() -> Self {
        LogLines {
            quiet: true,
            results: true,
            verbose: false,
        }
    }

    /// The same, with the detail lines printed too when `verbose`
    /// (`-v/--verbose`).
    pub fn with_verbose(mut self, verbose: bool) -> Self {
        self.verbose = verbose;
        self
    }

    /// Whether log lines are printed.
    pub fn logs(&self) -> bool {
        !self.quiet
    }

    /// Whether detail lines are printed.
    pub fn verbose(&self) -> bool {
        self.verbose
    }
}

impl Progress for LogLines {
    fn bar(&self, _: Option<u64>, _: Counts, _: &str) -> Box<dyn Bar> {
        Box::new(Hidden)
    }

    fn draws_bars(&self) -> bool {
        false
    }

    fn result(&self, line: &str) {
        if self.results {
            use std::io::Write;
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{line}").and_then(|()| out.flush());
        }
    }

    fn log(&self, msg: &str) {
        if !self.quiet {
            crate::errln!("[jobprof {}] {msg}", crate::sys::units::utc_timestamp());
        }
    }

    fn detail(&self, msg: &str) {
        if self.verbose {
            self.log(msg);
        }
    }

    fn boxed(&self) -> Box<dyn Progress> {
        Box::new(*self)
    }
}

// The one escape of names and paths, where log lines and `report.txt`
// have always found it.
pub use super::printable::{printable, printable_text};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_lines_draw_no_bars_and_no_bars_keeps_the_lines() {
        let p = LogLines::silent();
        assert!(!p.draws_bars());
        let plain = LogLines::plain().with_verbose(true);
        assert!(plain.logs() && plain.verbose());
        assert!(!NoBars(&plain).draws_bars());
        assert!(!LogLines::quiet().logs());
    }
}
