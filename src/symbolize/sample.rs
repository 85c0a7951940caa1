//! The sample model the native symbolizer hands its consumers: samples
//! whose frames are ids into a table of interned frames, each frame an
//! address with its lines (inlined functions first, then the function
//! itself), as `perf script` would print them. The consumers (the fold,
//! the report) read these directly; the same samples' `perf script` text
//! goes to the archive only, never to be parsed back.
//!
//! A run hands its samples on in [`Batch`]es, in order. A batch carries the
//! frames first met in it ([`Batch::new_frames`], numbered on from the
//! frames of the batches before); [`Frames`] keeps a run's table on the
//! consumer's side. A run that holds too many frames starts its table over
//! ([`Batch::reset`]): ids are numbered from 0 again.

use std::io::Write;
use std::ops::Range;
use std::sync::Arc;

/// One line `perf script` prints for a frame: `ADDRESS SYMBOL (MODULE)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    /// The symbol with its offset (`main+0x1a`), or `[unknown]`.
    pub symbol: Box<str>,
    /// The DSO as printed (`/usr/lib/libc.so.6`, `[kernel.kallsyms]`,
    /// `[unknown]`), or `inlined` for an inlined function's line.
    pub module: Box<str>,
}

impl Line {
    /// A line of `symbol` in `module`, their control characters escaped
    /// ([`crate::sys::printable`]): a symbol of an ELF file or a JIT map,
    /// or a module's path, with a newline or an escape sequence in it
    /// reaches no output raw, the archive's text included.
    pub fn new(symbol: impl Into<Box<str>>, module: impl Into<Box<str>>) -> Line {
        use crate::sys::printable::printable_owned;
        Line {
            symbol: printable_owned(symbol.into()),
            module: printable_owned(module.into()),
        }
    }

    /// An inlined function's line: it belongs to the location of the
    /// function line after it.
    pub fn is_inlined(&self) -> bool {
        &*self.module == INLINED
    }

    /// Bytes it holds, about (for the caches' accounting).
    pub fn size(&self) -> usize {
        self.symbol.len() + self.module.len() + 32
    }
}

/// The module of an inlined function's line.
pub const INLINED: &str = "inlined";

/// A frame of a call chain: an address and the lines printed for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// The address as printed: a file offset for user code in a file, an
    /// absolute address otherwise.
    pub address: u64,
    /// Its lines, inlined functions first (one line without inline
    /// frames).
    pub lines: Arc<[Line]>,
    /// The line of the ELF symbol holding the address (`name+0xOFF` in
    /// the DSO, as perf prints the frame without `--inline`), kept only
    /// when no line of [`Self::lines`] is it: every line inlined, which
    /// perf 6.1 prints when the function holding the code is named
    /// otherwise in the DWARF than its ELF symbol (an alias such as
    /// `__memcpy_avx512_unaligned_erms` for `__memmove_avx512_unaligned_erms`,
    /// a `.constprop` clone). Never printed; `perf report` names the frame
    /// by it ([`Self::function_line`]). `None` from text, which lacks it.
    pub function: Option<Line>,
}

/// The line of a frame with lines `lines` (inlined functions first) and
/// ELF symbol line `function` ([`Frame::function`]) that names the
/// function holding the code at its address: the one rule by which the
/// report's entries, `report.txt` and `summary.json`'s `top_self` charge a
/// sample's self time (to its leaf frame's function line). As `perf
/// report --no-children` does (its entries are by the symbol of the
/// sampled address, with or without `--inline`): the frame's plain line
/// (the ELF symbol's own; inlined callees count in it); without one,
/// `function`; without that either (text), the outermost inlined line,
/// the nearest name the text holds. `None` only for a frame without
/// lines. A frame in a call path is named by the same rule without
/// `function` ([`Frame::caller_line`]): perf report's call graph prints a
/// frame whose every line is inlined by its inlined lines.
pub fn function_line<'a>(lines: &'a [Line], function: Option<&'a Line>) -> Option<&'a Line> {
    lines
        .iter()
        .find(|l| !l.is_inlined())
        .or(function)
        .or(lines.last())
}

impl Frame {
    /// The line naming the function that holds the code at the address,
    /// by [`function_line`].
    pub fn function_line(&self) -> Option<&Line> {
        function_line(&self.lines, self.function.as_ref())
    }

    /// The line naming the frame in a call path, as perf report's call
    /// graph prints it: [`function_line`] without [`Self::function`], what
    /// the frame's text gives.
    pub fn caller_line(&self) -> Option<&Line> {
        function_line(&self.lines, None)
    }

    /// Appends the frame's lines as `perf script` prints them.
    pub fn write_text(&self, out: &mut Vec<u8>) {
        for l in self.lines.iter() {
            let _ = writeln!(out, "\t{:16x} {} ({})", self.address, l.symbol, l.module);
        }
    }
}

/// One sample, as its header line says it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sample {
    /// The thread's command name.
    pub comm: Arc<str>,
    /// The thread id.
    pub tid: i32,
    /// The CPU, when recorded.
    pub cpu: Option<u32>,
    /// The time in nanoseconds of perf's clock, when recorded.
    pub time_ns: Option<u64>,
    /// The period, when recorded.
    pub period: Option<u64>,
    /// The event's name.
    pub event: Arc<str>,
    /// Its frames' ids in [`Batch::stacks`], leaf first.
    pub frames: Range<u32>,
}

impl Sample {
    /// The time as `perf script` prints it by default (microseconds), in
    /// nanoseconds: what a reader of the archive's text reads.
    pub fn printed_time_ns(&self) -> Option<u64> {
        self.time_ns.map(|t| t / 1000 * 1000)
    }
}

/// Samples of one stretch of a run, in order, with the frames first met in
/// it and their `perf script` text.
#[derive(Debug, Clone, Default)]
pub struct Batch {
    /// The run's frame table starts over before [`Self::new_frames`].
    pub reset: bool,
    /// Frames first met in this batch, in id order.
    pub new_frames: Vec<Frame>,
    /// The samples.
    pub samples: Vec<Sample>,
    /// The samples' frame ids back to back ([`Sample::frames`]).
    pub stacks: Vec<u32>,
    /// The samples' `perf script` text (for the archive; may be taken).
    pub text: Vec<u8>,
    /// Bytes of that text.
    pub text_bytes: u64,
    /// The switch and task records among the samples, for the off-CPU
    /// accounting (`None`: the run was not asked for them).
    pub tasks: Option<Tasks>,
}

/// The tracepoint whose samples are switch-outs: a capture recorded with
/// `--off-cpu` has it.
pub const SWITCH_EVENT: &str = "sched:sched_switch";

/// What a run of a capture recorded with `--off-cpu` hands the off-CPU
/// accounting besides its samples: the side-band records that start and
/// end threads' runs, in record order among the samples, and the state
/// each `sched:sched_switch` sample left its thread in.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tasks {
    /// Each record with the number of the batch's samples before it.
    pub records: Vec<(u32, Task)>,
    /// The `prev_state` of each `sched:sched_switch` sample, as perf
    /// prints it (`S`, `R+`, `D|K`), by its index in the batch (`None`:
    /// its fields lie outside the record).
    pub states: Vec<(u32, Option<Box<str>>)>,
}

/// A switch or task record (times in ns of perf's clock; only records
/// with a time are handed on, as `perf script` prints them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Task {
    /// `PERF_RECORD_SWITCH` (or `_CPU_WIDE`) of the thread.
    Switch {
        /// Thread id.
        tid: i32,
        /// Time.
        time: u64,
        /// A switch-out (else in).
        out: bool,
        /// The out was a preemption.
        preempt: bool,
    },
    /// `PERF_RECORD_COMM`: the thread's (new) name.
    Comm {
        /// Thread id.
        tid: i32,
        /// Its name.
        comm: Box<str>,
        /// Time.
        time: u64,
    },
    /// `PERF_RECORD_FORK`: a thread is born.
    Fork {
        /// The new thread.
        tid: i32,
        /// Time.
        time: u64,
    },
    /// `PERF_RECORD_EXIT`: a thread ended.
    Exit {
        /// The thread.
        tid: i32,
        /// Time.
        time: u64,
    },
}

impl Batch {
    /// The frame ids of `s`, leaf first.
    pub fn frames_of(&self, s: &Sample) -> &[u32] {
        self.stacks
            .get(s.frames.start as usize..s.frames.end as usize)
            .unwrap_or(&[])
    }

    /// Whether it holds nothing to read.
    pub fn is_empty(&self) -> bool {
        let no_records = self.tasks.as_ref().is_none_or(|t| t.records.is_empty());
        self.samples.is_empty() && self.new_frames.is_empty() && !self.reset && no_records
    }
}

/// A run's frames by id, as its batches define them (the consumer's
/// copy of the run's table).
#[derive(Debug, Default)]
pub struct Frames {
    frames: Vec<Frame>,
}

impl Frames {
    /// Takes in the frames `batch` defines (the table started over first
    /// when the batch says so), leaving its [`Batch::new_frames`] empty.
    pub fn take(&mut self, batch: &mut Batch) {
        if batch.reset {
            self.frames.clear();
        }
        self.frames.append(&mut batch.new_frames);
    }

    /// The frame `id`.
    pub fn get(&self, id: u32) -> Option<&Frame> {
        self.frames.get(id as usize)
    }

    /// How many frames it holds.
    pub fn len(&self) -> usize {
        self.frames.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_prints_its_inline_lines_first_as_perf_script_does() {
        let f = Frame {
            address: 0x1434,
            lines: vec![
                Line::new("mix+0x34", INLINED),
                Line::new("compute_stage+0x34", "/w"),
            ]
            .into(),
            function: None,
        };
        let mut out = Vec::new();
        f.write_text(&mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "\t            1434 mix+0x34 (inlined)\n\
             \t            1434 compute_stage+0x34 (/w)\n"
        );
        assert!(f.lines[0].is_inlined() && !f.lines[1].is_inlined());
    }

    #[test]
    fn a_frame_is_named_by_its_function_line_as_perf_report_names_it() {
        let frame = |lines: &[(&str, &str)], function: Option<Line>| Frame {
            address: 0x16db75,
            lines: lines.iter().map(|(s, m)| Line::new(*s, *m)).collect(),
            function,
        };
        // Inlined callees count in the function holding the code.
        let f = frame(&[("mix+0x34", INLINED), ("compute+0x34", "/w")], None);
        assert_eq!(f.function_line(), Some(&Line::new("compute+0x34", "/w")));
        // Every line inlined (perf 6.1's memcpy under libc's debug info):
        // the ELF symbol the symbolizer kept, not the inlined name nor
        // the caller.
        let memmove = Line::new(
            "__memmove_avx512_unaligned_erms+0x375",
            "/usr/lib/libc.so.6",
        );
        let only_inlined = [("__memcpy_avx512_unaligned_erms+0x375", INLINED)];
        let f = frame(&only_inlined, Some(memmove.clone()));
        assert_eq!(f.function_line(), Some(&memmove));
        // In a call path, as perf's call graph prints it.
        assert_eq!(&*f.caller_line().unwrap().symbol, only_inlined[0].0);
        // From text, which lacks it: the outermost inlined line.
        let f = frame(&[("inner+0x4", INLINED), ("outer+0x4", INLINED)], None);
        assert_eq!(f.function_line().map(|l| &*l.symbol), Some("outer+0x4"));
        assert_eq!(frame(&[], None).function_line(), None);
    }

    #[test]
    fn a_reset_starts_the_table_over() {
        let frame = |a| Frame {
            address: a,
            lines: vec![Line::new("[unknown]", "[unknown]")].into(),
            function: None,
        };
        let mut t = Frames::default();
        let mut b = Batch {
            new_frames: vec![frame(1), frame(2)],
            ..Batch::default()
        };
        t.take(&mut b);
        assert_eq!((t.len(), b.new_frames.len()), (2, 0));
        let mut b = Batch {
            reset: true,
            new_frames: vec![frame(3)],
            ..Batch::default()
        };
        t.take(&mut b);
        assert_eq!(t.len(), 1);
        assert_eq!(t.get(0).map(|f| f.address), Some(3));
    }
}
