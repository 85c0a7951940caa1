//! Building a [`Profile`] for the report: from `perf script` text (plain,
//! `.gz` or `.zst`, recognised by their magic bytes), from folded stacks,
//! or from a capture directory (its symbolized text, else its folded
//! stacks).
//!
//! `perf script` samples keep their DSOs and times: frames are `(symbol
//! without offset, DSO file name)`, one per address, named by its function
//! line ([`crate::symbolize::sample::function_line`]: inlined functions'
//! lines count in the function holding the code, as `perf report`'s
//! entries do). A frame whose every line is inlined is named by its
//! outermost inlined line in DSO `-` (as perf report's call graph prints
//! it), except as a structured sample's leaf, where the ELF symbol the
//! symbolizer kept names it (as perf report's entries do; text lacks it).
//! Only the first event seen is read. Folded stacks carry no DSO: their first frame
//! is taken for the process name (jobprof, inferno and FlameGraph put it
//! there) and left out, unnamed frames (`[libc.so.6]`, the old pipeline's
//! `[unknown:libc.so.6]`) become `[unknown]` in that DSO, `_[k]` frames
//! are kernel frames.
//!
//! Text symbolized in pieces (a capture's units, read as they stream) is
//! read by one [`SampleReader`] per piece and [`merge`]d in order into
//! what one reader of the whole text reads. A frame seen before is found
//! by its `(symbol, DSO)` text without building a [`Frame`].

use std::path::{Path, PathBuf};

use super::{Frame, Profile};
use crate::capture::{self, Filter};
use crate::error::{Error, Result};
use crate::symbolize::sample::{Batch, Frames, Line, Sample, INLINED};
use crate::sys::input::{self, Source};
use crate::text::perf_script;

/// What kind of text an input holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `perf script` output.
    Script,
    /// Folded stacks (`frame;frame;... count`).
    Folded,
}

/// Reads `path`: a capture directory, or a file of `perf script` text or
/// folded stacks (told apart by their first lines).
pub fn path(path: &Path) -> Result<Profile> {
    if path.is_dir() {
        return capture_dir(path);
    }
    if let Some(e) = unusable(path) {
        return Err(e);
    }
    of_event(path, None)
}

/// A path that cannot be reported, said as `process` says it: one that
/// does not exist, or an empty file (`-` is stdin).
fn unusable(path: &Path) -> Option<Error> {
    if path.as_os_str() == "-" {
        return None;
    }
    let what = "pass a perf.data, `perf script` text, folded stacks or a capture directory";
    match std::fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Some(Error::Usage(format!(
            "{}: does not exist; {what}",
            path.display()
        ))),
        Ok(m) if m.is_file() && m.len() == 0 => Some(Error::Usage(format!(
            "{}: the file is empty (0 bytes): nothing to report (was the capture or its copy \
             cut off?); {what}",
            path.display()
        ))),
        _ => None,
    }
}

/// Reads the file `path` as [`path`] does, keeping only the samples of
/// `event` (its base name matches too: `cpu-clock` takes `cpu-clock:u`);
/// `None`: the first event seen. An off-CPU capture's text begins with
/// `sched:sched_switch` samples as often as not: its report is of the
/// sampling event.
pub fn of_event(path: &Path, event: Option<&str>) -> Result<Profile> {
    let src = Source::from_arg(path);
    let mut lines = Lines {
        want: event.map(String::from),
        ..Lines::default()
    };
    input::each_line(&src, |_, l| lines.push(l))?;
    let mut p = lines.finish(&src.display_path())?;
    p.source = src.display_path().display().to_string();
    if p.samples.is_none() && src != Source::Stdin && p.count_name.is_none() {
        p.count_name = crate::output::render::folded::count_name_beside(path);
    }
    Ok(p)
}

/// Reads the capture in `dir`: jobprof's `perf.script.zst`, else the old
/// pipeline's `perf.script.gz`, else the folded stacks.
pub fn capture_dir(dir: &Path) -> Result<Profile> {
    let found = capture::discover(&[dir.to_path_buf()], &Filter::default())?;
    let [c] = found.as_slice() else {
        return Err(Error::Usage(format!(
            "{}: holds {} captures; pass one capture directory (RESULT_DIR/profiles/perf/\
             worker_N/QUERY)",
            dir.display(),
            found.len()
        )));
    };
    let out = c.out_dir();
    let candidates: Vec<PathBuf> = vec![
        out.join(capture::SCRIPT_ZST),
        c.dir.join(capture::SCRIPT_ZST),
        c.dir.join(capture::SCRIPT_GZ),
        out.join(crate::capture::FOLDED),
        c.dir.join(crate::capture::FOLDED),
    ];
    let Some(text) = candidates.iter().find(|p| capture::is_plain_file(p)) else {
        return Err(Error::Usage(format!(
            "{}: no symbolized text (perf.script.zst, perf.script.gz) or stacks.folded; run \
             `jobprof process` on it first",
            dir.display()
        )));
    };
    let v = capture::validate(c).ok();
    // An off-CPU capture's report is of its sampling event.
    let off_cpu = v.as_ref().is_some_and(|v| {
        v.shards
            .iter()
            .any(|s| s.bytes.is_some() && crate::text::offcpu::recorded(&s.data_file))
    });
    let event = v
        .as_ref()
        .filter(|_| off_cpu)
        .and_then(|v| v.event.as_deref());
    let mut p = of_event(text, event)?;
    p.source = c.label();
    p.shards = v.map(|v| v.shards.len());
    Ok(p)
}

/// The profile of folded stacks already in memory (`process;...;leaf`,
/// count), when no symbolized text is there to read.
pub fn folded_stacks(stacks: &[(String, u64)], source: &str) -> Profile {
    let mut lines = Lines {
        kind: Some(Kind::Folded),
        ..Lines::default()
    };
    for (stack, n) in stacks {
        lines.folded(&format!("{stack} {n}"));
    }
    let mut p = lines.p;
    p.source = source.to_string();
    p
}

/// The profile of `perf script` text read sample by sample as another
/// walk over it hands them on ([`crate::text::samples::walk_with_text`]):
/// the same profile [`path`] reads from that text, without reading it
/// again.
#[derive(Default)]
pub struct SampleReader {
    lines: Lines,
    /// Structured samples' frames as the report's, by frame id: as a
    /// sample's leaf and as a caller (`None` inside: a frame without
    /// lines).
    frames: Vec<Option<Option<Named>>>,
}

impl SampleReader {
    /// A reader of the samples of `event` (its base name matches too, as
    /// in [`of_event`]); `None`: the first event seen.
    pub fn of_event(event: Option<&str>) -> SampleReader {
        SampleReader {
            lines: Lines {
                want: event.map(String::from),
                ..Lines::default()
            },
            frames: Vec::new(),
        }
    }

    /// Takes one sample's text (its lines; the blank line after it may be
    /// left out), or a block of whole samples with the blank lines between
    /// them (a blank line ends a sample): the same as taking its samples
    /// one by one.
    pub fn sample(&mut self, text: &[u8]) {
        let mut at = 0;
        for nl in memchr::memchr_iter(b'\n', text) {
            self.lines.push(&text[at..nl]);
            at = nl + 1;
        }
        self.lines.push(&text[at..]);
        self.lines.end_sample();
    }

    /// Takes the structured samples of `batch`, a batch of a run whose
    /// frames `frames` holds (its new frames taken in): the same as taking
    /// the batch's `perf script` text, without reading it, but for a leaf
    /// frame whose every line is inlined, named by the ELF symbol the
    /// symbolizer kept ([`crate::symbolize::sample::Frame::function`]).
    pub fn samples(&mut self, batch: &Batch, frames: &Frames) {
        if batch.reset {
            self.frames.clear();
        }
        for s in &batch.samples {
            self.lines.end_sample();
            self.lines.kind.get_or_insert(Kind::Script);
            if !self.lines.structured_header(s) {
                continue;
            }
            for (at, &id) in batch.frames_of(s).iter().enumerate() {
                self.frame(frames, id);
                if let Some(Some(Some(n))) = self.frames.get(id as usize) {
                    let i = if at == 0 { n.leaf } else { n.caller };
                    self.lines.chain.push(i);
                }
            }
            self.lines.end_sample();
        }
    }

    /// Makes sure the report's frames of frame `id` are in `self.frames`:
    /// as a leaf, its function line
    /// ([`crate::symbolize::sample::Frame::function_line`], the ELF
    /// symbol of a frame whose every line is inlined, as perf report's
    /// entries); as a caller, the line perf report's call graph prints
    /// for it ([`crate::symbolize::sample::Frame::caller_line`]), what
    /// the text gives too.
    fn frame(&mut self, frames: &Frames, id: u32) {
        let i = id as usize;
        if self.frames.len() <= i {
            self.frames.resize_with(i + 1, || None);
        }
        let p = &mut self.lines.p;
        self.frames[i].get_or_insert_with(|| {
            let f = frames.get(id)?;
            let mut intern = |l: &Line| {
                let (symbol, dso) = frame_parts(&l.symbol, &l.module);
                p.intern_parts(symbol, dso)
            };
            let caller = intern(f.caller_line()?);
            let leaf = f.function_line().map_or(caller, intern);
            Some(Named { leaf, caller })
        });
    }

    /// The profile, as [`path`] gives it for the text at `path`.
    pub fn finish(self, path: &Path) -> Result<Profile> {
        let mut p = self.lines.finish(path)?;
        p.source = path.display().to_string();
        Ok(p)
    }
}

/// The readers of consecutive pieces of one text, in the text's order,
/// as one: what a single reader of the whole text reads when every piece
/// ends at a sample boundary (frames numbered in order of first
/// appearance, chains and samples summed, the first event, the widest
/// window). `None` when no reader is given, or when one reader of the
/// whole could read otherwise: no event was given and the pieces' first
/// events differ (it keeps the first of the whole text), or the pieces
/// were read as different kinds of text.
pub fn merge(readers: impl IntoIterator<Item = SampleReader>) -> Option<SampleReader> {
    let mut readers = readers.into_iter();
    let mut whole = readers.next()?;
    for r in readers {
        whole.lines.absorb(r.lines)?;
    }
    Some(whole)
}

/// The line-by-line reader of either kind.
#[derive(Default)]
struct Lines {
    kind: Option<Kind>,
    /// The event to read (`None`: the first seen).
    want: Option<String>,
    p: Profile,
    /// The weight of the sample being read (`None`: between samples).
    sample: Option<u64>,
    /// Its frames, leaf first (one buffer for every sample).
    chain: Vec<u32>,
    skipping: bool,
    /// A header held its sample's one frame: text without call graphs,
    /// whose headers perf indents (the command name right-aligned), so
    /// only a tab starts a frame line.
    flat: bool,
    bad: u64,
    /// What each `perf script` frame line read so far gave, by its
    /// bytes: a job's text repeats the same lines (one per address) in
    /// sample after sample.
    frames: rustc_hash::FxHashMap<Box<[u8]>, Read>,
    /// The frame being read whose lines so far are all inlined: its
    /// address and its outermost inlined line so far, the frame's name
    /// unless a plain line at the address follows.
    inlined: Option<(u64, Line)>,
    /// The structured samples' times so far, first and last.
    ns_window: Option<(u64, u64)>,
}

/// A structured frame's report frames, as a leaf and as a caller.
#[derive(Debug, Clone, Copy)]
struct Named {
    leaf: u32,
    caller: u32,
}

/// Frame lines kept in [`Lines::frames`] before it starts over.
const FRAMES_KEPT: usize = 1 << 20;

/// What one `perf script` frame line gives: at its address, a frame's
/// plain line (interned) or an inlined function's line (its symbol as
/// printed).
#[derive(Debug, Clone)]
struct Read {
    address: u64,
    line: ReadLine,
}

#[derive(Debug, Clone)]
enum ReadLine {
    Plain(u32),
    Inlined(Box<str>),
}

/// The report's frame of a frame's function line `symbol` (with offset)
/// in `module`: the symbol without offset (`[unknown]` when empty) and the
/// DSO's file name, `-` for an inlined line (the text does not say which
/// DSO holds it).
fn frame_parts<'a>(symbol: &'a str, module: &'a str) -> (&'a str, &'a str) {
    let symbol = match perf_script::strip_offset(symbol.trim()).trim() {
        "" => "[unknown]",
        s => s,
    };
    let dso = if module == INLINED {
        "-"
    } else {
        dso_name(module)
    };
    (symbol, dso)
}

impl Lines {
    fn push(&mut self, raw: &[u8]) {
        let frame_line = matches!(raw.first(), Some(b' ' | b'\t'))
            && self.kind == Some(Kind::Script)
            && !self.skipping
            && self.sample.is_some();
        if frame_line {
            if let Some(read) = self.frames.get(raw) {
                let read = read.clone();
                self.take(read);
                return;
            }
        }
        // perf's text is UTF-8 but for the odd symbol: read in place.
        let lossy;
        let line = match std::str::from_utf8(raw) {
            Ok(s) => s,
            Err(_) => {
                lossy = String::from_utf8_lossy(raw);
                &lossy
            }
        };
        let line = line.trim_end_matches('\r');
        if line.trim().is_empty() {
            self.end_sample();
            return;
        }
        if line.starts_with('#') {
            // Folded text that says what its counts are (`# counts: ns`).
            if let Some(n) = crate::output::render::folded::declared_counts(line.trim()) {
                self.p.count_name.get_or_insert_with(|| n.to_string());
            }
            return;
        }
        let kind = *self.kind.get_or_insert_with(|| kind_of(line));
        match kind {
            Kind::Folded => self.folded(line),
            Kind::Script => {
                let read = self.script(line);
                if let Some(read) = read.filter(|_| frame_line) {
                    if self.frames.len() >= FRAMES_KEPT {
                        self.frames.clear();
                    }
                    self.frames.insert(raw.into(), read);
                }
            }
        }
    }

    fn folded(&mut self, line: &str) {
        let Some((stack, n)) = line.trim_end().rsplit_once(' ') else {
            self.bad += 1;
            return;
        };
        let Ok(n) = n.parse::<u64>() else {
            self.bad += 1;
            return;
        };
        let mut frames: Vec<&str> = stack.split(';').collect();
        if frames.len() > 1 {
            frames.remove(0);
        }
        let chain: Vec<u32> = frames
            .iter()
            .rev()
            .map(|f| self.p.intern(folded_frame(f)))
            .collect();
        self.p.add(chain, n);
    }

    /// Takes one line of `perf script` text; for a frame line of a
    /// sample, what it gave.
    fn script(&mut self, line: &str) -> Option<Read> {
        // A line indented with spaces between samples is a header (the
        // command name right-aligned, as perf prints it without `-g`).
        let in_sample = self.sample.is_some() || self.skipping;
        let indented = line.starts_with('\t') || (line.starts_with(' ') && in_sample && !self.flat);
        if !indented {
            self.end_sample();
            self.header(line);
            return None;
        }
        if self.skipping || self.sample.is_none() {
            return None;
        }
        let frame = self.frame(perf_script::trim_end(line));
        if frame.is_none() {
            self.bad += 1;
        }
        frame
    }

    /// What a frame line gives, taken into the sample's chain
    /// ([`Self::take`]); `None` when it is no frame line.
    fn frame(&mut self, trimmed: &str) -> Option<Read> {
        let fl = perf_script::parse_frame_fixed(trimmed)?;
        // perf prints the address in hex; anything else is no address
        // another line shares.
        let address = fl.address().unwrap_or(u64::MAX);
        let line = if fl.is_inlined() {
            ReadLine::Inlined(fl.rawfunc.into())
        } else {
            let (symbol, dso) = frame_parts(fl.rawfunc, fl.module);
            ReadLine::Plain(self.p.intern_parts(symbol, dso))
        };
        let read = Read { address, line };
        self.take(read.clone());
        Some(read)
    }

    /// Takes one frame line's [`Read`] into the sample's chain: one frame
    /// per address, named by the frame's function line as
    /// [`crate::symbolize::sample::function_line`] picks it from the
    /// lines printed for the address (inlined ones first, then at most one
    /// plain line, which ends the frame).
    fn take(&mut self, read: Read) {
        let same = self
            .inlined
            .as_ref()
            .is_some_and(|(a, _)| *a == read.address);
        match read.line {
            ReadLine::Inlined(symbol) => {
                if !same {
                    self.end_inlined();
                }
                self.inlined = Some((read.address, Line::new(symbol, INLINED)));
            }
            ReadLine::Plain(i) => {
                if same {
                    self.inlined = None;
                } else {
                    self.end_inlined();
                }
                self.chain.push(i);
            }
        }
    }

    /// Ends a frame whose lines were all inlined: named by its outermost
    /// inlined line, as the rule names a frame whose text holds no ELF
    /// symbol.
    fn end_inlined(&mut self) {
        if let Some((_, line)) = self.inlined.take() {
            let outermost = std::slice::from_ref(&line);
            if let Some(l) = crate::symbolize::sample::function_line(outermost, None) {
                let (symbol, dso) = frame_parts(&l.symbol, &l.module);
                let i = self.p.intern_parts(symbol, dso);
                self.chain.push(i);
            }
        }
    }

    fn header(&mut self, line: &str) {
        let Some(h) = perf_script::parse_header_fixed(line) else {
            self.bad += 1;
            self.skipping = true;
            return;
        };
        let trailing_frame = h
            .trailing
            .filter(|t| perf_script::parse_frame_fixed(t.trim()).is_some());
        self.flat |= trailing_frame.is_some();
        let event = h.event.unwrap_or("").trim_end_matches(':');
        let wanted = match (&self.want, &self.p.event) {
            (Some(w), _) => event == w || perf_script::event_base(event) == w,
            (None, Some(e)) => e == event,
            (None, None) => true,
        };
        if !wanted {
            self.skipping = true;
            return;
        }
        if self.p.event.is_none() {
            self.p.event = Some(event.to_string());
        }
        self.skipping = false;
        // The header's time stamp, its printed digits read as seconds.
        let printed = h.time_ns().and(h.stamp.split_ascii_whitespace().last());
        if let Some(t) = printed.and_then(|s| s.parse::<f64>().ok()) {
            let w = self.p.window.get_or_insert((t, t));
            w.0 = w.0.min(t);
            w.1 = w.1.max(t);
        }
        self.sample = Some(h.period.unwrap_or(1));
        // A frame on the header line: the sample has no call graph.
        let read = trailing_frame.and_then(|t| self.frame(t.trim()));
        if let Some(ReadLine::Plain(_)) = read.map(|r| r.line) {
            self.p.flat_samples += 1;
            self.end_sample();
        }
    }

    /// [`Self::header`] of a structured sample: false when its event is
    /// not read.
    fn structured_header(&mut self, s: &Sample) -> bool {
        let event = s.event.trim_end_matches(':');
        let wanted = match (&self.want, &self.p.event) {
            (Some(w), _) => event == w || perf_script::event_base(event) == w,
            (None, Some(e)) => e == event,
            (None, None) => true,
        };
        if !wanted {
            self.skipping = true;
            return false;
        }
        if self.p.event.is_none() {
            self.p.event = Some(event.to_string());
        }
        self.skipping = false;
        if let Some(t) = s.time_ns {
            let (lo, hi) = self.ns_window.unwrap_or((u64::MAX, 0));
            if t < lo || t > hi {
                self.ns_window = Some((lo.min(t), hi.max(t)));
                // As the text prints it, and as the header's time reads that.
                let at = format!("{}.{:06}", t / 1_000_000_000, t % 1_000_000_000 / 1000);
                let t = at.parse().unwrap_or(0.0);
                let w = self.p.window.get_or_insert((t, t));
                w.0 = w.0.min(t);
                w.1 = w.1.max(t);
            }
        }
        self.sample = Some(s.period.unwrap_or(1));
        true
    }

    fn end_sample(&mut self) {
        self.end_inlined();
        if let Some(w) = self.sample.take() {
            if !self.chain.is_empty() {
                *self.p.samples.get_or_insert(0) += 1;
                self.p.add_slice(&self.chain, w);
            }
            self.chain.clear();
        }
    }

    /// Adds what `next` read of the text that follows this reader's, both
    /// cut at a sample boundary (see [`merge`]); `None` when one reader of
    /// the whole could read otherwise (left half-merged then).
    fn absorb(&mut self, mut next: Lines) -> Option<()> {
        self.end_sample();
        next.end_sample();
        let first_events_differ = matches!(
            (&self.p.event, &next.p.event),
            (Some(a), Some(b)) if a != b
        );
        let kinds_differ = matches!((self.kind, next.kind), (Some(a), Some(b)) if a != b);
        if self.want != next.want || kinds_differ || (self.want.is_none() && first_events_differ) {
            return None;
        }
        self.kind = self.kind.or(next.kind);
        self.p.event = self.p.event.take().or(next.p.event);
        self.p.window = match (self.p.window, next.p.window) {
            (Some(a), Some(b)) => Some((a.0.min(b.0), a.1.max(b.1))),
            (a, b) => a.or(b),
        };
        self.p.flat_samples += next.p.flat_samples;
        self.p.samples = match (self.p.samples, next.p.samples) {
            (Some(a), Some(b)) => Some(a + b),
            (a, b) => a.or(b),
        };
        self.bad += next.bad;
        // Its frames in their order of first appearance, after ours.
        let ids: Vec<u32> = next
            .p
            .frames
            .into_iter()
            .map(|f| self.p.intern(f))
            .collect();
        for (mut chain, w) in next.p.chains {
            for i in &mut chain {
                *i = ids[*i as usize];
            }
            self.p.add(chain, w);
        }
        Some(())
    }

    fn finish(mut self, path: &Path) -> Result<Profile> {
        self.end_sample();
        if self.p.chains.is_empty() {
            return Err(Error::Usage(format!(
                "{}: no samples: neither `perf script` text nor folded stacks ({} line(s) not \
                 understood)",
                path.display(),
                self.bad
            )));
        }
        self.p.bad_lines = self.bad;
        Ok(self.p)
    }
}

/// Folded stacks end in a count and have no indented lines.
fn kind_of(first: &str) -> Kind {
    let folded = !first.starts_with([' ', '\t'])
        && first
            .trim_end()
            .rsplit_once(' ')
            .is_some_and(|(s, n)| !s.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        && perf_script::parse_header_fixed(first).is_none_or(|h| h.event.is_none());
    if folded {
        Kind::Folded
    } else {
        Kind::Script
    }
}

/// A folded frame as a [`Frame`]: `[libc.so.6]`, `[unknown:libc.so.6]`,
/// `name_[k]`.
fn folded_frame(f: &str) -> Frame {
    if let Some(name) = f.strip_suffix("_[k]") {
        return Frame {
            symbol: if crate::output::summary::is_unknown_frame(name) {
                "[unknown]".into()
            } else {
                name.into()
            },
            dso: "[kernel.kallsyms]".into(),
        };
    }
    if let Some(dso) = crate::output::summary::unnamed_dso(f) {
        let dso = dso.strip_prefix("unknown:").unwrap_or(dso);
        return Frame {
            symbol: "[unknown]".into(),
            dso: dso.into(),
        };
    }
    let f = f
        .strip_suffix("_[j]")
        .or(f.strip_suffix("_[i]"))
        .unwrap_or(f);
    Frame {
        symbol: f.into(),
        dso: "-".into(),
    }
}

/// `/usr/lib/x86_64-linux-gnu/libc.so.6` -> `libc.so.6`; `[kernel.kallsyms]`
/// and `[unknown]` stay.
fn dso_name(module: &str) -> &str {
    if module.starts_with('[') {
        return module;
    }
    // Its last component, as `Path::file_name` finds it, without parsing
    // the path: a plain name after the last `/`.
    let last = module.rsplit('/').next().unwrap_or(module);
    if !matches!(last, "" | "." | "..") {
        return last;
    }
    // The file name of a `&str` path is UTF-8.
    Path::new(module)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or(module)
}

#[cfg(test)]
mod tests;
