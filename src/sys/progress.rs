//! The one factory for progress bars and log lines.
//!
//! On a terminal, long-running commands draw indicatif bars on stderr; off a
//! terminal (sbatch logs, CI, pipes) bars are hidden and the same events are
//! printed as plain timestamped lines, so logs stay readable: by default
//! only what a reader must see ([`Progress::log`]: warnings, a run's
//! plan), the detail of each step ([`Progress::detail`]) with `-v`, since
//! every capture already has its one result line on stdout. Nothing else in
//! the library draws or prints progress. This module knows nothing about what
//! is being processed.

use std::io::IsTerminal;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

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

/// Decides once whether to draw bars, and hands out bars and log lines.
#[derive(Debug, Clone)]
pub struct Progress {
    draw: bool,
    quiet: bool,
    results: bool,
    verbose: bool,
}

impl Default for Progress {
    fn default() -> Self {
        Self::from_env()
    }
}

impl Progress {
    /// Bars when stderr is a terminal, log lines otherwise.
    pub fn from_env() -> Self {
        Progress {
            draw: std::io::stderr().is_terminal(),
            quiet: false,
            results: true,
            verbose: false,
        }
    }

    /// Never draw bars and never print log lines or results (library use,
    /// tests).
    pub fn silent() -> Self {
        Progress {
            draw: false,
            quiet: true,
            results: false,
            verbose: false,
        }
    }

    /// Plain log lines only, whatever stderr is.
    pub fn plain() -> Self {
        Progress {
            draw: false,
            quiet: false,
            results: true,
            verbose: false,
        }
    }

    /// No bars and no log lines, only the result lines (`-q/--quiet`).
    pub fn quiet() -> Self {
        Progress {
            draw: false,
            quiet: true,
            results: true,
            verbose: false,
        }
    }

    /// The same, with the detail lines ([`detail`](Self::detail)) printed
    /// too when `verbose` (`-v/--verbose`).
    pub fn with_verbose(mut self, verbose: bool) -> Self {
        self.verbose = verbose;
        self
    }

    /// Whether bars are drawn (stderr is a terminal and not silenced).
    pub fn draws_bars(&self) -> bool {
        self.draw && !self.quiet
    }

    /// A bar counting `len` items labelled `msg`; hidden off a terminal.
    pub fn bar(&self, len: u64, msg: impl Into<String>) -> ProgressBar {
        let pb = ProgressBar::with_draw_target(Some(len), self.target());
        pb.set_style(
            ProgressStyle::with_template("{spinner} {msg:30!} [{bar:30}] {pos}/{len} {elapsed}")
                .expect("static template")
                .progress_chars("=> "),
        );
        pb.set_message(msg.into());
        pb
    }

    /// A bar counting bytes labelled `msg`; hidden off a terminal.
    pub fn bytes_bar(&self, len: u64, msg: impl Into<String>) -> ProgressBar {
        let pb = ProgressBar::with_draw_target(Some(len), self.target());
        pb.set_style(
            ProgressStyle::with_template(
                "{spinner} {msg:30!} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec}",
            )
            .expect("static template")
            .progress_chars("=> "),
        );
        pb.set_message(msg.into());
        pb
    }

    /// A byte counter of unknown total (e.g. text a child process prints)
    /// labelled `msg`: bytes so far and throughput; hidden off a terminal.
    pub fn bytes_counter(&self, msg: impl Into<String>) -> ProgressBar {
        let pb = ProgressBar::with_draw_target(None, self.target());
        pb.set_style(
            ProgressStyle::with_template("{spinner} {msg:30!} {bytes} {bytes_per_sec}")
                .expect("static template"),
        );
        pb.set_message(msg.into());
        pb
    }

    /// A group of bars drawn together, one line each (add bars from
    /// [`bar`](Self::bar) and [`bytes_bar`](Self::bytes_bar) to it); hidden
    /// off a terminal.
    pub fn multi(&self) -> MultiProgress {
        MultiProgress::with_draw_target(self.target())
    }

    /// Prints one result line on stdout (one per capture: what happened to
    /// it), whether or not log lines are printed, unless silent. A closed
    /// stdout is not an error here: the results are also in the report.
    /// Call it inside the bars' `suspend` so that they do not interleave.
    pub fn result(&self, line: impl AsRef<str>) {
        if self.results {
            use std::io::Write;
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{}", line.as_ref()).and_then(|()| out.flush());
        }
    }

    /// Prints one log line on stderr (only when bars are not drawn, so the two
    /// never interleave); `[jobprof 2026-11-30T05:41:26Z] message`.
    pub fn log(&self, msg: impl AsRef<str>) {
        if self.quiet || self.draw {
            return;
        }
        crate::errln!(
            "[jobprof {}] {}",
            crate::sys::units::utc_timestamp(),
            msg.as_ref()
        );
    }

    /// A log line of detail (what each step of a capture did): printed as
    /// [`log`](Self::log) prints, only with `-v/--verbose`.
    pub fn detail(&self, msg: impl AsRef<str>) {
        if self.verbose {
            self.log(msg);
        }
    }

    fn target(&self) -> ProgressDrawTarget {
        if self.draws_bars() {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        }
    }
}

/// `path` for a one-line message: control characters (a newline in a
/// directory name) escaped, so a name cannot split or forge a line.
pub fn printable(path: &std::path::Path) -> String {
    printable_text(&path.display().to_string()).into_owned()
}

/// `text` with every C0 and C1 control character (and DEL) escaped
/// (`\u{1b}`, `\n`): a name from a capture (a JIT function, a thread) cannot
/// split a line, or reach a terminal as an escape sequence, in the log or
/// in `report.txt`. The one escape for both.
pub fn printable_text(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(char::is_control) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c.is_control() {
            true => out.extend(c.escape_default()),
            false => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped_c0_c1_and_del() {
        let t = "jit \u{1b}]0;TITLE\u{7}\u{1b}[2J \u{9b}31m\u{7f} ok\tz\n";
        assert_eq!(
            printable_text(t),
            "jit \\u{1b}]0;TITLE\\u{7}\\u{1b}[2J \\u{9b}31m\\u{7f} ok\\tz\\n"
        );
        assert!(matches!(
            printable_text("plain é"),
            std::borrow::Cow::Borrowed("plain é")
        ));
    }

    #[test]
    fn silent_hides_bars() {
        let p = Progress::silent();
        assert!(!p.draws_bars());
        assert!(p.bar(10, "x").is_hidden());
    }
}
