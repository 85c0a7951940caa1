//! One walk over `perf script` text, sample by sample, for the outputs that
//! need more than folded stacks (the pprof profile, the flamegraph page's
//! timeline): every sample's thread, time, period, its folded stack exactly
//! as [`crate::text::fold`] folds it, and its raw frame lines (address and DSO).
//!
//! Memory stays a few blocks of text whatever the input's size: the text is
//! read in [`BLOCK`] steps cut at sample boundaries, and the callback sees
//! one sample at a time. Each sample is folded on its own by a single-thread
//! [`Folder`] with the capture's event fixed, so the stack names are the
//! ones of `stacks.folded` (frame rules, annotations and compat included).

use std::path::Path;

use crate::error::Result;
use crate::sys::input::{self, Opened, Source};
use crate::text::boundary;
use crate::text::fold::{self, Folder};
use crate::text::perf_script;
pub use crate::text::perf_script::time_ns;

/// Bytes of text handled per step.
pub const BLOCK: usize = 4 << 20;

/// One raw frame line of a sample.
#[derive(Debug, Clone, Copy)]
pub struct RawFrame<'a> {
    /// The address (0 when the token is not hexadecimal).
    pub address: u64,
    /// The DSO as printed (`inlined` for an inlined function's line).
    pub module: &'a str,
}

impl RawFrame<'_> {
    /// An inlined function's line (`NAME+0xOFF (inlined)`): it belongs to
    /// the location of the next non-inlined frame.
    pub fn is_inlined(&self) -> bool {
        self.module == crate::symbolize::sample::INLINED
    }
}

/// What the callback gets for each folded sample.
#[derive(Debug)]
pub struct Sample<'a> {
    /// The command (thread) name.
    pub comm: &'a str,
    /// The process id as printed (`?` when the text has only one id).
    pub pid: &'a str,
    /// The thread id.
    pub tid: &'a str,
    /// The sample's time in nanoseconds of perf's clock, when printed.
    pub time_ns: Option<u64>,
    /// Its weight in `stacks.folded` (the period, 1 when none is printed).
    pub weight: u64,
    /// The folded stack, root first, `;`-separated.
    pub stack: &'a str,
    /// The frame lines, leaf first.
    pub frames: &'a [RawFrame<'a>],
}

/// Walks the perf script text at `path` (plain, `.zst` or `.gz`), calling
/// `each` for every sample that `opts` folds. Returns the number of samples
/// seen.
pub fn walk(path: &Path, opts: &fold::Options, each: impl FnMut(&Sample<'_>)) -> Result<u64> {
    walk_with_text(path, opts, |_| {}, each)
}

/// Hands `raw` the text of every sample of the perf script text at `path`
/// in order, as [`walk_with_text`] does, without folding any: for the
/// readers of the whole text (the report's profile) when no output needs
/// the samples' stacks (the timeline comes from the fold itself,
/// [`fold::Options::time_cells`]).
pub fn walk_raw(path: &Path, raw: impl FnMut(&[u8])) -> Result<()> {
    walk_blocks(path, raw)
}

/// [`walk`], also handing `raw` the text of every sample, folded or not,
/// in order (its lines, the last newline kept; the blank lines between
/// samples left out): one walk serves the readers of the whole text too
/// (the report's profile), instead of a second decompression and parse.
pub fn walk_with_text(
    path: &Path,
    opts: &fold::Options,
    mut raw: impl FnMut(&[u8]),
    mut each: impl FnMut(&Sample<'_>),
) -> Result<u64> {
    let mut opts = opts.clone();
    opts.threads = 1;
    opts.time_cells = None;
    let folder = Folder::new(opts);
    let mut n = 0;
    walk_blocks(path, |s| {
        raw(s);
        n += one_sample(&folder, s, &mut each) as u64;
    })?;
    Ok(n)
}

/// Calls `each` with every sample of the text at `path`, in order: runs of
/// non-empty lines, read in [`BLOCK`] steps cut at sample boundaries.
fn walk_blocks(path: &Path, mut each: impl FnMut(&[u8])) -> Result<()> {
    blocks(path, |text| {
        for s in split_samples(text) {
            each(s);
        }
    })
}

/// Calls `on_block` with the text at `path` (plain, `.zst` or `.gz`) in
/// order, in blocks of about [`BLOCK`] bytes, each cut at a sample
/// boundary (the last one at the end of the text).
pub fn blocks(path: &Path, mut on_block: impl FnMut(&[u8])) -> Result<()> {
    match input::open(&Source::Path(path.to_path_buf()))? {
        Opened::Empty => {}
        Opened::Mapped(map) => {
            let mut at = 0;
            while at < map.len() {
                let end = cut(&map, at);
                on_block(&map[at..end]);
                map.release(at, end);
                at = end;
            }
        }
        Opened::Stream(mut s) => {
            let mut buf: Vec<u8> = Vec::with_capacity(BLOCK * 2);
            let mut chunk = vec![0u8; 1 << 20];
            loop {
                let got = s.read(&mut chunk)?;
                buf.extend_from_slice(&chunk[..got]);
                if got == 0 || buf.len() >= BLOCK {
                    let end = if got == 0 {
                        buf.len()
                    } else {
                        boundary::last(&buf).unwrap_or(0)
                    };
                    on_block(&buf[..end]);
                    buf.drain(..end);
                    // What is left is one sample not yet ended.
                    if buf.len() > input::MAX_RECORD {
                        return Err(input::oversized(s.path(), "a sample"));
                    }
                }
                if got == 0 {
                    break;
                }
            }
        }
    }
    Ok(())
}

/// End of the block starting at `at`: the first sample boundary past
/// `at + BLOCK`, or the end.
fn cut(map: &[u8], at: usize) -> usize {
    let want = (at + BLOCK).min(map.len());
    boundary::next(map, want).unwrap_or(map.len())
}

/// The samples of a block: runs of non-empty lines.
fn split_samples(text: &[u8]) -> Samples<'_> {
    Samples { text, at: 0 }
}

struct Samples<'a> {
    text: &'a [u8],
    at: usize,
}

impl<'a> Iterator for Samples<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        let t = self.text;
        while self.at < t.len() && t[self.at] == b'\n' {
            self.at += 1;
        }
        if self.at >= t.len() {
            return None;
        }
        let start = self.at;
        // The sample keeps its last newline, not the blank line after it.
        let end = boundary::next(t, start).map_or(t.len(), |b| b - 1);
        self.at = end;
        Some(&t[start..end])
    }
}

/// Folds one sample and calls `each`; false when it was not folded.
fn one_sample(folder: &Folder, s: &[u8], each: &mut impl FnMut(&Sample<'_>)) -> bool {
    let Ok(text) = std::str::from_utf8(s) else {
        return false;
    };
    let mut lines = text.lines();
    let Some(header_line) = lines.next() else {
        return false;
    };
    let folded = folder.fold_bytes(s);
    let Some((stack, weight)) = folded.stacks.first() else {
        return false;
    };
    // What the folder folded always counts; a header this parser does not
    // read (simpleperf's, say) leaves the thread unknown.
    // (simpleperf's header is among the ones the parser reads.)
    let h = perf_script::parse_header_fixed(header_line);
    let (comm, pid, tid) = h.map_or(("?", "?", "?"), |h| (h.comm, h.pid, h.tid));
    let frames: Vec<RawFrame<'_>> = lines
        .filter_map(perf_script::parse_frame_fixed)
        .map(|f| RawFrame {
            address: f.address().unwrap_or(0),
            module: f.module,
        })
        .collect();
    each(&Sample {
        comm,
        pid,
        tid,
        time_ns: h.and_then(|h| h.time_ns()),
        weight: *weight,
        stack,
        frames: &frames,
    });
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_parse() {
        assert_eq!(
            time_ns("w 123/456 [002] 10.500000: 250000 cpu-clock:"),
            Some(10_500_000_000)
        );
        assert_eq!(
            time_ns("w   456 12.000001: cpu-clock:"),
            Some(12_000_001_000)
        );
        assert_eq!(time_ns("w 123/456 [002] cpu-clock:"), None);
    }

    #[test]
    fn samples_split_at_blank_lines() {
        let t = b"a\n\tb\n\n\nc\n\td\n\n";
        let v: Vec<&[u8]> = Samples { text: t, at: 0 }.collect();
        assert_eq!(v, [&b"a\n\tb\n"[..], &b"c\n\td\n"[..]]);
    }
}
