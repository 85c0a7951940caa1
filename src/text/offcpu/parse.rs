//! Reads `perf script` text (as `perf script --show-switch-events
//! --show-task-events` or the native symbolizer prints it) one line at a
//! time and hands each complete record to a callback as an [`Event`]: a
//! sample with its stack (root first, frame names as `jobprof fold` makes
//! them), a switch in or out, or a thread's birth, name or exit. Holds only
//! the record being read, never the text.

use crate::text::fold::frame::{frame_names, FrameSettings};
use crate::text::perf_script::{parse_frame_fixed, parse_header_fixed, time_ns};

/// One record of the text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A sample: `sched:sched_switch` (a switch-out) or the sampling event.
    Sample {
        /// Thread id.
        tid: u32,
        /// Thread name.
        comm: String,
        /// Time in ns (perf clock).
        time: u64,
        /// The event's name.
        event: String,
        /// The sample period (1 when not printed).
        period: u64,
        /// The tracepoint's `prev_state` (switch-outs only).
        prev_state: Option<String>,
        /// Frame names, root first.
        stack: Vec<String>,
    },
    /// `PERF_RECORD_SWITCH`/`_CPU_WIDE` of the recorded thread.
    Switch {
        /// Thread id.
        tid: u32,
        /// Time in ns.
        time: u64,
        /// Switch-out (else in).
        out: bool,
        /// The out was a preemption.
        preempt: bool,
    },
    /// `PERF_RECORD_COMM`: the thread exists (time 0: before recording).
    Comm {
        /// Thread id.
        tid: u32,
        /// Its name.
        comm: String,
        /// Time in ns.
        time: u64,
    },
    /// `PERF_RECORD_FORK`: a thread is born.
    Fork {
        /// The new thread.
        tid: u32,
        /// Time in ns.
        time: u64,
    },
    /// `PERF_RECORD_EXIT`: a thread ended.
    Exit {
        /// The thread.
        tid: u32,
        /// Time in ns.
        time: u64,
    },
}

/// The line reader: feed it lines with [`LineParser::line`], then call
/// [`LineParser::finish`].
pub struct LineParser {
    settings: FrameSettings,
    current: Option<Event>,
    frames: Vec<String>,
}

/// How the off-CPU profiles name frames: as `jobprof fold` does by
/// default, with no `_[k]` or `_[j]` annotations.
pub(crate) const SETTINGS: FrameSettings = FrameSettings {
    include_addrs: false,
    annotate_kernel: false,
    annotate_jit: false,
    keep_paren_frames: true,
    anon_is_jit: true,
};

impl Default for LineParser {
    fn default() -> Self {
        LineParser {
            settings: SETTINGS,
            current: None,
            frames: Vec::new(),
        }
    }
}

impl LineParser {
    /// Reads one line (without its newline).
    pub fn line(&mut self, line: &str, emit: &mut impl FnMut(Event)) {
        let first = line.as_bytes().first().copied();
        match first {
            None => self.flush(emit),
            Some(b' ' | b'\t') => self.frame(line),
            Some(_) => {
                self.flush(emit);
                if let Some(ev) = parse_record(line) {
                    if matches!(ev, Event::Sample { .. }) {
                        self.current = Some(ev);
                    } else {
                        emit(ev);
                    }
                }
            }
        }
    }

    /// Ends the text: the last record is handed over.
    pub fn finish(&mut self, emit: &mut impl FnMut(Event)) {
        self.flush(emit);
    }

    fn frame(&mut self, line: &str) {
        if self.current.is_none() {
            return;
        }
        let Some(f) = parse_frame_fixed(line.trim_end()) else {
            return;
        };
        let names = frame_names(&f, false, &self.settings, &[]);
        // Java `a->b` chains print caller last; reversed with the rest.
        self.frames.extend(names.names.into_iter().rev());
    }

    fn flush(&mut self, emit: &mut impl FnMut(Event)) {
        if let Some(mut ev) = self.current.take() {
            if let Event::Sample { stack, .. } = &mut ev {
                stack.extend(self.frames.drain(..).rev());
            }
            emit(ev);
        }
        self.frames.clear();
    }
}

/// One header line as an event (a sample without its frames yet).
fn parse_record(line: &str) -> Option<Event> {
    let time = time_ns(line)?;
    if let Some(at) = line.find(" PERF_RECORD_") {
        return side_band(line, &line[at + 1..], time);
    }
    let h = parse_header_fixed(line)?;
    let tid = h.tid.parse().ok()?;
    let event = h.event?.to_string();
    let period = h
        .period
        .or_else(|| period_before(line, &event))
        .unwrap_or(1);
    let prev_state = h
        .trailing
        .and_then(|t| field(t, "prev_state="))
        .map(String::from);
    Some(Event::Sample {
        tid,
        comm: h.comm.to_string(),
        time,
        event,
        period,
        prev_state,
        stack: Vec::new(),
    })
}

/// A `PERF_RECORD_*` line.
fn side_band(line: &str, rec: &str, time: u64) -> Option<Event> {
    let tid_of_line = || -> Option<u32> { parse_header_fixed(line)?.tid.parse().ok() };
    if let Some(rest) = rec
        .strip_prefix("PERF_RECORD_SWITCH_CPU_WIDE")
        .or_else(|| rec.strip_prefix("PERF_RECORD_SWITCH"))
    {
        let rest = rest.trim_start();
        let out = rest.starts_with("OUT");
        return Some(Event::Switch {
            tid: tid_of_line()?,
            time,
            out,
            preempt: out && rest[3..].trim_start().starts_with("preempt"),
        });
    }
    if rec.starts_with("PERF_RECORD_COMM") {
        // `PERF_RECORD_COMM[ exec]: NAME:PID/TID`
        let (_, who) = rec.split_once(": ")?;
        let (name, ids) = who.trim_end().rsplit_once(':')?;
        let tid = ids.split_once('/')?.1.parse().ok()?;
        return Some(Event::Comm {
            tid,
            comm: name.to_string(),
            time,
        });
    }
    for (prefix, fork) in [("PERF_RECORD_FORK(", true), ("PERF_RECORD_EXIT(", false)] {
        if let Some(rest) = rec.strip_prefix(prefix) {
            // `(PID:TID):(PPID:PTID)`: the first pair is the thread.
            let (ids, _) = rest.split_once(')')?;
            let tid = ids.split_once(':')?.1.parse().ok()?;
            return Some(if fork {
                Event::Fork { tid, time }
            } else {
                Event::Exit { tid, time }
            });
        }
    }
    None
}

/// The period when the header parser finds none: the number just before
/// `EVENT:` whatever spaces pad the two apart (the header grammar takes
/// the word just before the event's, which padding leaves empty).
fn period_before(line: &str, event: &str) -> Option<u64> {
    let mut prev: Option<&str> = None;
    for tok in line.split_ascii_whitespace() {
        if tok.strip_suffix(':') == Some(event) {
            return prev?.parse().ok();
        }
        prev = Some(tok);
    }
    None
}

/// `NAME=VALUE` in tracepoint arguments.
fn field<'a>(args: &'a str, name: &str) -> Option<&'a str> {
    let at = args.find(name)?;
    let v = &args[at + name.len()..];
    Some(v.split_ascii_whitespace().next().unwrap_or(""))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(text: &str) -> Vec<Event> {
        let mut p = LineParser::default();
        let mut v = Vec::new();
        for l in text.lines() {
            p.line(l, &mut |e| v.push(e));
        }
        p.finish(&mut |e| v.push(e));
        v
    }

    #[test]
    fn reads_switches_tracepoints_and_task_records() {
        let text = "\
perf-exec     0     0.000000: PERF_RECORD_COMM: w:27004/27005
bash 27004 [001]   823.796127: sched:sched_switch: prev_comm=bash prev_pid=27004 prev_prio=120 prev_state=S ==> next_comm=bash next_pid=27008 next_prio=120
\tffffffff82266208 __schedule+0x2 ([kernel.kallsyms])
\t           f82ad read (/usr/lib/libc.so.6)
\t            1234 main (/bin/w)

bash 27004   823.796156: PERF_RECORD_SWITCH OUT preempt
bash 27008   823.796159: PERF_RECORD_SWITCH IN         
bash 27004   823.796079: PERF_RECORD_FORK(27008:27009):(27004:27004)
bash 27004  823.800000000:   10101010          cpu-clock: 
\t1234 main (/bin/w)
";
        let v = events(text);
        assert_eq!(
            v[0],
            Event::Comm {
                tid: 27005,
                comm: "w".into(),
                time: 0
            }
        );
        assert_eq!(
            v[1],
            Event::Sample {
                tid: 27004,
                comm: "bash".into(),
                time: 823_796_127_000,
                event: "sched:sched_switch".into(),
                period: 1,
                prev_state: Some("S".into()),
                stack: vec!["main".into(), "read".into(), "__schedule".into()],
            }
        );
        assert_eq!(
            v[2],
            Event::Switch {
                tid: 27004,
                time: 823_796_156_000,
                out: true,
                preempt: true
            }
        );
        assert!(matches!(
            v[3],
            Event::Switch {
                out: false,
                tid: 27008,
                ..
            }
        ));
        assert!(matches!(v[4], Event::Fork { tid: 27009, .. }));
        assert!(
            matches!(&v[5], Event::Sample { period: 10101010, event, .. } if event == "cpu-clock")
        );
    }
}
