//! `perf script` text parsed once into the sample model
//! ([`crate::symbolize::sample`]), for the `perf script` symbolizer's runs:
//! a block of their text becomes a [`Batch`] the fold, the report and the
//! pprof profile take as they take the native symbolizer's, instead of
//! each parsing the text.
//!
//! Only text the model prints back byte for byte is taken: a header of
//! the shape the native symbolizer prints (`COMM TID [CPU] SECS.USEC:
//! PERIOD EVENT: `, CPU, time and period each optional) and frame lines
//! that [`Frame::write_text`] prints again as they are. The consumers of a
//! batch read what they read from its text (the native symbolizer's runs
//! stand on that), so the batch of text it prints back is read as that
//! text. A block with anything else (a process id, a tracepoint's fields,
//! nanosecond times, a thread name that reads as two ids) is left as text.
//!
//! A run's frames are interned by the bytes of their lines: a frame seen
//! before is found without parsing it. The table starts over (the batch
//! says so, [`Batch::reset`]) when it grows large or a block is left as
//! text after its frames were added.

use std::io::Write;
use std::sync::Arc;

use rustc_hash::FxHashMap;

use crate::symbolize::sample::{Batch, Frame, Line, Sample};
use crate::text::perf_script;

/// Frames a run's table holds before it starts over.
const MAX_FRAMES: usize = 1 << 18;

/// One run's text into batches; see the module docs.
#[derive(Default)]
pub struct ScriptSamples {
    /// Frame ids by the bytes of the frame's lines.
    ids: FxHashMap<Box<[u8]>, u32>,
    /// The next batch starts the table over.
    reset: bool,
    comms: FxHashMap<Box<str>, Arc<str>>,
    events: Vec<Arc<str>>,
    /// A header printed back, for the comparison.
    line: Vec<u8>,
}

impl ScriptSamples {
    /// The batch of `block`, whole samples each ended by a blank line (the
    /// last one's may be missing); `None` when the model does not print it
    /// back as it is (then the block is read as text).
    pub fn parse(&mut self, block: &[u8]) -> Option<Batch> {
        if self.ids.len() > MAX_FRAMES {
            self.start_over();
        }
        let mut batch = Batch {
            reset: std::mem::take(&mut self.reset),
            text_bytes: block.len() as u64,
            ..Batch::default()
        };
        let parsed = self.samples(block, &mut batch);
        if parsed.is_none() {
            // Frames added for this block never reach the consumers.
            self.start_over();
            return None;
        }
        Some(batch)
    }

    /// Empties the table; the next batch says so.
    fn start_over(&mut self) {
        self.ids.clear();
        self.reset = true;
    }

    /// Adds the samples of `block` to `batch`.
    fn samples(&mut self, block: &[u8], batch: &mut Batch) -> Option<()> {
        let mut lines = block.split_inclusive(|&b| b == b'\n').peekable();
        while let Some(header) = lines.next() {
            let header = header.strip_suffix(b"\n")?;
            let mut sample = self.header(std::str::from_utf8(header).ok()?)?;
            let first = batch.stacks.len() as u32;
            let mut frame_start: Option<usize> = None;
            let mut at = offset(block, header) + header.len() + 1;
            loop {
                let Some(line) = lines.next() else {
                    // The last sample without its blank line.
                    frame_start.map_or(Some(()), |_| None)?;
                    break;
                };
                if line == b"\n" {
                    frame_start.map_or(Some(()), |_| None)?;
                    break;
                }
                if line.first() != Some(&b'\t') || line.last() != Some(&b'\n') {
                    return None;
                }
                let start = *frame_start.get_or_insert(at);
                at += line.len();
                if !is_inlined(line) {
                    let id = self.frame(&block[start..at], batch)?;
                    batch.stacks.push(id);
                    frame_start = None;
                }
            }
            sample.frames = first..batch.stacks.len() as u32;
            batch.samples.push(sample);
        }
        Some(())
    }

    /// The id of the frame whose lines are `text`, added to `batch`'s new
    /// frames when first met.
    fn frame(&mut self, text: &[u8], batch: &mut Batch) -> Option<u32> {
        if let Some(&id) = self.ids.get(text) {
            return Some(id);
        }
        let frame = frame(text)?;
        let id = u32::try_from(self.ids.len()).ok()?;
        self.ids.insert(text.into(), id);
        batch.new_frames.push(frame);
        Some(id)
    }

    /// The sample of a header line, when the model prints it back as it is.
    fn header(&mut self, line: &str) -> Option<Sample> {
        let h = perf_script::parse_header_fixed(line)?;
        if h.pid != "?" || h.trailing.is_some() {
            return None;
        }
        let tid: i32 = h.tid.parse().ok()?;
        let event = self.event(h.event?);
        let comm = self.comm(h.comm);
        let sample = Sample {
            comm,
            tid,
            cpu: h.cpu(),
            time_ns: h.time_ns(),
            period: h.period,
            event,
            frames: 0..0,
        };
        print_header(&sample, &mut self.line);
        (self.line == line.as_bytes()).then_some(sample)
    }

    /// The event `name`, shared by the samples that name it.
    fn event(&mut self, name: &str) -> Arc<str> {
        if let Some(e) = self.events.iter().find(|e| &***e == name) {
            return e.clone();
        }
        let e: Arc<str> = name.into();
        self.events.push(e.clone());
        e
    }

    /// The thread name `comm`, shared by the samples that name it, its
    /// control characters escaped as in every name of the model
    /// ([`crate::sys::printable`]; such a header is then not printed back
    /// as it is, and its block is left as text).
    fn comm(&mut self, comm: &str) -> Arc<str> {
        if let Some(c) = self.comms.get(comm) {
            return c.clone();
        }
        let c: Arc<str> = crate::sys::printable::printable_text(comm).into();
        self.comms.insert(comm.into(), c.clone());
        c
    }
}

/// Where `part`, a slice of `block`, starts in it.
fn offset(block: &[u8], part: &[u8]) -> usize {
    part.as_ptr() as usize - block.as_ptr() as usize
}

/// Whether a frame line (with its newline) is an inlined function's.
fn is_inlined(line: &[u8]) -> bool {
    line.ends_with(b" (inlined)\n")
}

/// A sample's header line as the native symbolizer prints it, into `out`
/// (without its newline).
fn print_header(s: &Sample, out: &mut Vec<u8>) {
    out.clear();
    let _ = write!(out, "{} {:5} ", s.comm, s.tid);
    if let Some(c) = s.cpu {
        let _ = write!(out, "[{c:03}] ");
    }
    if let Some(t) = s.time_ns {
        let _ = write!(
            out,
            "{:5}.{:06}: ",
            t / 1_000_000_000,
            t % 1_000_000_000 / 1000
        );
    }
    if let Some(p) = s.period {
        let _ = write!(out, "{p:10} ");
    }
    let _ = write!(out, "{}: ", s.event);
}

/// The frame whose lines (inlined functions' first, each with its
/// newline) are `text`, when it prints them back as they are.
fn frame(text: &[u8]) -> Option<Frame> {
    let s = std::str::from_utf8(text).ok()?;
    let mut address = None;
    let mut lines = Vec::new();
    for l in s.lines() {
        let f = perf_script::parse_frame_fixed(l)?;
        let a = f.address()?;
        if *address.get_or_insert(a) != a {
            return None;
        }
        lines.push(Line::new(f.rawfunc, f.module));
    }
    let frame = Frame {
        address: address?,
        lines: lines.into(),
        function: None,
    };
    let mut back = Vec::with_capacity(text.len());
    frame.write_text(&mut back);
    (back == text).then_some(frame)
}

#[cfg(test)]
#[path = "script_samples_tests.rs"]
mod tests;
