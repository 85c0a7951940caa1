//! The binary's [`Progress`]: indicatif bars on stderr when it is a
//! terminal, drawn together (one line each) and kept out of the way of the
//! result lines; the library's plain [`LogLines`] otherwise.

use std::io::IsTerminal;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use jobprof::sys::progress::{Bar, Counts, LogLines, Progress};

/// Bars on a terminal, log lines off one (`verbose`: the detail lines
/// too).
pub fn from_env(verbose: bool) -> Box<dyn Progress> {
    let lines = LogLines::plain().with_verbose(verbose);
    if std::io::stderr().is_terminal() {
        Box::new(Bars {
            multi: MultiProgress::with_draw_target(ProgressDrawTarget::stderr()),
            lines,
        })
    } else {
        Box::new(lines)
    }
}

/// Drawn bars, all in one group.
#[derive(Clone)]
struct Bars {
    multi: MultiProgress,
    /// The result lines (log lines are not printed while bars are drawn).
    lines: LogLines,
}

impl Progress for Bars {
    fn bar(&self, len: Option<u64>, counts: Counts, msg: &str) -> Box<dyn Bar> {
        let template = match (len, counts) {
            (Some(_), Counts::Items) => "{spinner} {msg:30!} [{bar:30}] {pos}/{len} {elapsed}",
            (Some(_), Counts::Bytes) => {
                "{spinner} {msg:30!} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec}"
            }
            (None, _) => "{spinner} {msg:30!} {bytes} {bytes_per_sec}",
        };
        let pb = match len {
            Some(n) => ProgressBar::new(n),
            None => ProgressBar::no_length(),
        };
        pb.set_style(
            ProgressStyle::with_template(template)
                .expect("static template")
                .progress_chars("=> "),
        );
        pb.set_message(msg.to_string());
        Box::new(Drawn(self.multi.add(pb)))
    }

    fn draws_bars(&self) -> bool {
        true
    }

    fn result(&self, line: &str) {
        self.multi.suspend(|| self.lines.result(line));
    }

    fn log(&self, _: &str) {}

    fn detail(&self, _: &str) {}

    fn boxed(&self) -> Box<dyn Progress> {
        Box::new(self.clone())
    }
}

/// One drawn bar.
struct Drawn(ProgressBar);

impl Bar for Drawn {
    fn inc(&self, n: u64) {
        self.0.inc(n);
    }
    fn set_position(&self, pos: u64) {
        self.0.set_position(pos);
    }
    fn println(&self, line: &str) {
        self.0.println(line);
    }
    fn finish(&self) {
        self.0.finish_and_clear();
    }
}
