//! Folding `perf script` text into collapsed stacks (`a;b;c count`).
//!
//! The input is cut into blocks (windows of a memory map, or buffers read
//! from a stream) and each block into chunks, always at sample boundaries
//! (blank lines). rayon folds the chunks in parallel, each worker into its
//! own `FoldState` (module `state`), where frames are interned and stacks are
//! counted by id sequences; the states are merged once at the end. Memory
//! does not grow with input size: mapped windows are released once folded.
//!
//! Two modes share this engine: `--compat inferno` (byte-identical to
//! `inferno-collapse-perf` 0.12.8) and the default, the same with the peers'
//! data-loss bugs fixed (see `crate::text::compat`). Inputs are read through
//! `crate::sys::input`, and the cuts are found by `crate::text::boundary`.
//! The fold is returned, never written: [`split`] groups folded stacks per
//! process or thread, and `crate::output::split` writes the groups.

mod blocks;
pub mod chain;
mod cells;
pub(crate) mod frame;
mod lines;
pub mod split;
mod stacks;
mod state;
mod structured;

use std::io::{self, Write};
use std::path::PathBuf;
use std::sync::mpsc;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::symbolize::sample::{Batch, Frames};
use crate::sys::input::{self, Opened, Source};
use crate::text::{boundary, perf_script};
pub use cells::TimeCells;
use frame::FrameSettings;
use state::{fold_chunk, ChunkReport, FoldState};
pub use structured::SampleStacks;

/// Which behaviour to reproduce.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Compat {
    /// jobprof's own behaviour: inferno's output with its losses fixed.
    #[default]
    None,
    /// Byte-identical to `inferno-collapse-perf` 0.12.8, losses included.
    Inferno,
}

/// Folding options. The first group has `inferno-collapse-perf`'s meaning.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Options {
    /// Include the PID in the root frame (`comm-PID`).
    pub include_pid: bool,
    /// Include PID and TID in the root frame (`comm-PID/TID`); implies PID.
    pub include_tid: bool,
    /// Annotate kernel frames with `_[k]`.
    pub annotate_kernel: bool,
    /// Annotate JIT frames with `_[j]`.
    pub annotate_jit: bool,
    /// Show raw addresses where symbols are unknown.
    pub include_addrs: bool,
    /// Only fold samples of this event; `None` = the first event seen.
    pub event_filter: Option<String>,
    /// Drop callers of frames whose symbol equals one of these.
    pub skip_after: Vec<String>,
    /// Behaviour to reproduce.
    pub compat: Compat,
    /// Worker threads; 0 = all cores.
    pub threads: usize,
    /// Target bytes per parallel task (cut at the next sample boundary).
    pub chunk_size: usize,
    /// Bytes of input folded per step (mapped window or read buffer); bounds
    /// memory use.
    pub block_size: usize,
    /// Count the timed samples per cell of this many nanoseconds, thread
    /// and stack, for the flamegraph page's timeline ([`Folded::cells`]);
    /// `None`: not counted.
    pub time_cells: Option<u64>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            include_pid: false,
            include_tid: false,
            annotate_kernel: false,
            annotate_jit: false,
            include_addrs: false,
            event_filter: None,
            skip_after: Vec::new(),
            compat: Compat::None,
            threads: 0,
            chunk_size: 1 << 20,
            block_size: 32 << 20,
            time_cells: None,
        }
    }
}

/// The resolved, immutable configuration every chunk reads.
#[derive(Debug, Clone)]
pub(crate) struct Config {
    compat: bool,
    include_pid: bool,
    include_tid: bool,
    frames: FrameSettings,
    skip_after: Vec<String>,
    event: Option<String>,
    time_cells: Option<u64>,
}

impl Config {
    fn new(o: &Options) -> Self {
        let compat = o.compat == Compat::Inferno;
        Config {
            compat,
            include_pid: o.include_pid || o.include_tid,
            include_tid: o.include_tid,
            frames: FrameSettings {
                include_addrs: o.include_addrs,
                annotate_kernel: o.annotate_kernel,
                annotate_jit: o.annotate_jit,
                keep_paren_frames: !compat,
                anon_is_jit: !compat,
            },
            skip_after: o.skip_after.clone(),
            event: o.event_filter.clone(),
            time_cells: o.time_cells.filter(|&n| n > 0),
        }
    }

    /// Whether a sample of `event` is folded. In compat mode the names must
    /// be equal; otherwise a filter also matches the event's base name
    /// (`cycles` matches `cycles:u`).
    #[inline]
    fn event_matches(&self, event: &str) -> bool {
        // Byte loops: `==` on strings calls memcmp, once per sample here.
        fn same(a: &str, b: &str) -> bool {
            a.len() == b.len() && a.bytes().zip(b.bytes()).all(|(x, y)| x == y)
        }
        match &self.event {
            None => true,
            Some(f) if self.compat => same(f, event),
            Some(f) => same(f, event) || same(f, perf_script::event_base(event)),
        }
    }
}

/// Why a line was not used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkippedKind {
    /// Expected a sample header and could not parse one.
    Header,
    /// Expected a frame line and could not parse one.
    Frame,
    /// The input ended in the middle of this line.
    Truncated,
    /// A frame line (tab-indented) outside any sample: its header is
    /// missing, as at the start of a capture cut mid-sample.
    OrphanFrame,
}

/// A line that was counted as skipped, for reporting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedLine {
    /// Index of the input in the list given to the folder.
    pub input: usize,
    /// 1-based line number within that input (0-based inside the engine).
    pub line: u64,
    /// What kind of line was expected.
    pub kind: SkippedKind,
    /// The line's text (at most 200 characters).
    pub text: String,
}

/// Numbers about one fold, for `--stats` and summaries.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    /// Input bytes folded (after decompression).
    pub bytes: u64,
    /// Samples that became (part of) a stack.
    pub samples: u64,
    /// Samples of other events, not folded.
    pub filtered_samples: u64,
    /// Distinct stacks in the output.
    pub unique_stacks: u64,
    /// Lines that were neither headers, frames, comments nor blank.
    pub skipped_lines: u64,
    /// Lines that were not valid UTF-8 (folded lossily).
    pub non_utf8_lines: u64,
    /// Samples whose one frame was on their header line: recorded without
    /// call graphs (`perf record` without `-g`), folded flat.
    pub flat_samples: u64,
    /// A final line cut mid-way (not folded).
    pub truncated_lines: u64,
    /// Where the folded samples' call chains ended (truncation judged from
    /// their frame lines, [`chain`]).
    pub chains: chain::ChainEnds,
    /// The first few skipped lines, with their inputs and line numbers.
    pub first_skipped: Vec<SkippedLine>,
    /// The event that was folded (as resolved from the filter or the input).
    pub event: Option<String>,
    /// Wall time of the fold.
    pub elapsed: Duration,
}

impl Stats {
    /// Throughput in MB/s (10^6 bytes per second).
    pub fn mb_per_s(&self) -> f64 {
        let s = self.elapsed.as_secs_f64();
        if s > 0.0 {
            self.bytes as f64 / 1e6 / s
        } else {
            0.0
        }
    }
}

/// The result of a fold: collapsed stacks sorted bytewise, and statistics.
#[derive(Debug, Clone, Default)]
pub struct Folded {
    /// `(stack, count)` pairs sorted by stack.
    pub stacks: Vec<(String, u64)>,
    /// Statistics of the fold.
    pub stats: Stats,
    /// The timeline's counts, when [`Options::time_cells`] asked for them.
    pub cells: Option<TimeCells>,
}

impl Folded {
    /// Writes `stack count` lines, control characters escaped
    /// ([`crate::sys::printable`]: the names were escaped as they were
    /// interned; this keeps any other stack from splitting a line).
    pub fn write_to<W: Write>(&self, mut w: W) -> io::Result<()> {
        let mut line = Vec::with_capacity(256);
        let mut num = itoa::Buffer::new();
        for (stack, count) in &self.stacks {
            folded_line(&mut line, stack, *count, &mut num);
            w.write_all(&line)?;
        }
        w.flush()
    }

    /// The folded output as bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut v = Vec::new();
        self.write_to(&mut v).expect("writing to a Vec cannot fail");
        v
    }

    /// Sum of all counts (the total of sample periods).
    pub fn total(&self) -> u64 {
        crate::sys::counts::sum(self.stacks.iter().map(|(_, c)| *c))
    }

    /// What the counts are: `samples` when each sample counted 1 (no
    /// periods in the text), else the unit of the folded event's periods
    /// ([`perf_script::period_unit`]: `ns` for `cpu-clock`).
    pub fn count_name(&self) -> &str {
        match &self.stats.event {
            Some(e) if self.total() != self.stats.samples => perf_script::period_unit(e),
            _ => "samples",
        }
    }

    /// An error when lines were read but not one was a sample (nor a sample
    /// of another event): the input is not `perf script` text. The message
    /// names `inputs` and says what the text looks like and what to run
    /// instead (folded stacks: `jobprof render`). Empty or comment-only
    /// input is not an error (a capture can have no samples).
    pub fn require_samples(&self, inputs: &str) -> crate::Result<()> {
        let s = &self.stats;
        if s.samples > 0 || s.filtered_samples > 0 || s.skipped_lines == 0 {
            return Ok(());
        }
        let lines: Vec<&str> = s.first_skipped.iter().map(|l| l.text.as_str()).collect();
        let (looks_like, hint) = crate::text::perf_script::describe_non_samples(&lines);
        Err(crate::Error::NoSamples {
            inputs: inputs.to_string(),
            looks_like: looks_like.into(),
            hint: hint.into(),
        })
    }
}

/// Folds inputs with a fixed set of options. Cheap to create.
#[derive(Debug, Clone, Default)]
pub struct Folder {
    opts: Options,
}

impl Folder {
    /// A folder with these options.
    pub fn new(opts: Options) -> Self {
        Folder { opts }
    }

    /// The options in use.
    pub fn options(&self) -> &Options {
        &self.opts
    }

    /// Folds in-memory `perf script` text.
    pub fn fold_bytes(&self, data: &[u8]) -> Folded {
        let mut eng = Engine::new(&self.opts);
        eng.input_block(data, true);
        eng.finish()
    }

    /// Folds several inputs as shards of one capture (stacks merged).
    pub fn fold_sources(&self, sources: &[Source]) -> Result<Folded> {
        let mut eng = Engine::new(&self.opts);
        for (i, src) in sources.iter().enumerate() {
            eng.input_source(i, src)?;
        }
        Ok(eng.finish())
    }

    /// A push-based folder for text that arrives in pieces (e.g. the stdout
    /// of a running `perf script`).
    pub fn stream(&self) -> StreamFolder {
        StreamFolder {
            eng: Engine::new(&self.opts),
            buf: Vec::new(),
            scanned: 0,
            units: Vec::new(),
        }
    }
}

impl Engine {
    /// Folds input `src` as the `i`th input (and unit).
    fn input_source(&mut self, i: usize, src: &Source) -> Result<()> {
        self.input = i;
        self.unit = i;
        match input::open(src)? {
            Opened::Empty => {}
            Opened::Mapped(map) => self.input_mmap(&map),
            Opened::Stream(s) => self.input_stream(s)?,
        }
        Ok(())
    }
}

/// Folds text pushed in arbitrary pieces; see [`Folder::stream`].
pub struct StreamFolder {
    eng: Engine,
    buf: Vec<u8>,
    /// `buf[..scanned]` holds no block cut (searched already).
    scanned: usize,
    /// Per unit of structured samples: what its frames folded to.
    units: Vec<structured::UnitFrames>,
}

impl StreamFolder {
    /// Adds bytes; folds whole blocks as they fill up.
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
        if self.buf.len() >= self.eng.block_size {
            // Only the bytes not searched before: a block without a cut
            // grows, it is never rescanned whole per push.
            match stream_cut(&self.buf, self.scanned, self.eng.cfg.compat) {
                Some(cut) => {
                    let rest = self.buf.split_off(cut);
                    let block = std::mem::replace(&mut self.buf, rest);
                    self.scanned = 0;
                    self.eng.input_block(&block, false);
                }
                None => self.scanned = self.buf.len(),
            }
        }
    }

    /// [`Self::push_whole`] of a block of unit `unit` (an input of several
    /// that arrive interleaved, each in order): the timeline's cells
    /// ([`Options::time_cells`]) place its samples after all of the units
    /// before it, as if the units came one after another.
    pub fn push_whole_of(&mut self, unit: usize, block: &[u8]) {
        self.eng.unit = unit;
        self.push_whole(block);
    }

    /// Adds a block that may end at a sample boundary (a blank line): when
    /// it does and nothing is pending, it is folded in place, without the
    /// copy [`Self::push`] makes; otherwise it is pushed. The fold is the
    /// same either way.
    pub fn push_whole(&mut self, block: &[u8]) {
        if self.buf.is_empty() && boundary::ends_at(block) {
            self.scanned = 0;
            self.eng.input_block(block, false);
        } else {
            self.push(block);
        }
    }

    /// Folds input `src`, the `i`th of [`Folder::fold_sources`]'s (unit
    /// `i`), as that folds it: after text pushed before, whose rest is
    /// folded first.
    pub fn push_source(&mut self, i: usize, src: &Source) -> Result<()> {
        let rest = std::mem::take(&mut self.buf);
        self.scanned = 0;
        if !rest.is_empty() {
            self.eng.input_block(&rest, true);
        }
        self.eng.input_source(i, src)
    }

    /// Folds the samples of `batch`, a batch of unit `unit`'s run (an input
    /// of several, as in [`Self::push_whole_of`]) whose frames `frames`
    /// holds (with the batch's new frames taken in): the fold of the
    /// batch's `perf script` text, without reading it. Text pushed before
    /// must have ended at a sample boundary.
    pub fn push_samples(&mut self, unit: usize, batch: &Batch, frames: &Frames) {
        if self.units.len() <= unit {
            self.units.resize_with(unit + 1, Default::default);
        }
        self.eng
            .fold_batch(unit, batch, frames, &mut self.units[unit]);
    }

    /// Folds what is left and returns the result.
    pub fn finish(mut self) -> Folded {
        let block = std::mem::take(&mut self.buf);
        self.eng.input_block(&block, true);
        self.eng.finish()
    }
}

impl Write for StreamFolder {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.push(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Where a block of stream input may end, searching `buf[from..]` (the
/// bounded-block rule): just past the last blank line, or, outside
/// `--compat inferno`, at the start of the last unindented line that
/// parses as a sample header: `perf script` without call chains prints one
/// line per sample and no blank line, and the fold ends a sample at such a
/// line anyway, so the cut changes nothing (the output is that of the
/// mapped file, folded whole). `None`: no cut yet; the caller reads on and
/// the block grows (in compat mode, as a mapped file's single chunk does),
/// up to [`input::MAX_RECORD`]: past that the input is an error.
fn stream_cut(buf: &[u8], from: usize, compat: bool) -> Option<usize> {
    let start = from.saturating_sub(1).min(buf.len());
    if let Some(cut) = boundary::last(&buf[start..]) {
        return Some(start + cut);
    }
    if compat {
        return None;
    }
    // The last line starts, newest first (a bounded look back: one header
    // line among the last 64 is plenty for flat input).
    let mut end = buf.len();
    for _ in 0..64 {
        let nl = memchr::memrchr(b'\n', &buf[start..end])?;
        let ls = start + nl + 1;
        let line_end = memchr::memchr(b'\n', &buf[ls..]).map_or(buf.len(), |i| ls + i);
        if starts_a_sample(&buf[ls..line_end]) {
            return Some(ls);
        }
        end = start + nl;
    }
    None
}

/// An unindented, non-comment line that parses as a sample header.
fn starts_a_sample(line: &[u8]) -> bool {
    let Some(&first) = line.first() else {
        return false;
    };
    if first == b'#' || perf_script::is_ascii_ws(first) {
        return false;
    }
    std::str::from_utf8(line)
        .ok()
        .is_some_and(|l| perf_script::parse_header_fixed(l.trim_end()).is_some())
}

struct Engine {
    cfg: Config,
    threads: usize,
    chunk_size: usize,
    block_size: usize,
    pool: Option<rayon::ThreadPool>,
    states: Vec<Mutex<FoldState>>,
    reports: Vec<(usize, ChunkReport)>,
    bytes: u64,
    input: usize,
    /// The unit the next block belongs to, and the blocks folded of each
    /// unit: where a block's samples are in the text (the timeline's cells).
    unit: usize,
    blocks: Vec<u32>,
    start: Instant,
}

impl Engine {
    fn new(o: &Options) -> Self {
        let threads = crate::jobs_or_cores(o.threads);
        let pool = (threads > 1).then(|| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .thread_name(|i| format!("jobprof-fold-{i}"))
                .build()
                .expect("building a thread pool")
        });
        Engine {
            cfg: Config::new(o),
            threads,
            chunk_size: o.chunk_size.max(1),
            block_size: o.block_size.max(1),
            pool,
            states: (0..threads)
                .map(|_| Mutex::new(FoldState::default()))
                .collect(),
            reports: Vec::new(),
            bytes: 0,
            input: 0,
            unit: 0,
            blocks: Vec::new(),
            start: Instant::now(),
        }
    }

    /// Decides the event to fold when none was given: the first event of
    /// the first sample that has one, as inferno does.
    fn resolve_event(&mut self, block: &[u8]) {
        if self.cfg.event.is_some() {
            return;
        }
        let mut in_event = false;
        for raw in block.split(|&b| b == b'\n') {
            let line = String::from_utf8_lossy(raw);
            if line.starts_with('#') {
                continue;
            }
            let line = perf_script::trim_end(&line);
            if line.is_empty() {
                in_event = false;
                continue;
            }
            if in_event || (!self.cfg.compat && perf_script::starts_like_a_frame(line)) {
                // Frames, and frames whose header is missing (see
                // `Machine::on_line`), never name the event.
                continue;
            }
            let h = if self.cfg.compat {
                perf_script::parse_header_compat(line)
            } else {
                perf_script::parse_header_fixed(line)
            };
            match h {
                Some(h) => {
                    if let Some(ev) = h.event {
                        self.cfg.event = Some(if self.cfg.compat {
                            ev.to_string()
                        } else {
                            perf_script::event_base(ev).to_string()
                        });
                        return;
                    }
                    in_event = h.trailing.is_none();
                }
                None => in_event = false,
            }
        }
    }

    /// Folds one block that starts and ends at sample boundaries.
    fn input_block(&mut self, block: &[u8], last_of_input: bool) {
        self.fold_chunks(block, last_of_input, &|_| {});
    }

    /// Cuts `data` into chunks at sample boundaries and folds them on the
    /// pool; `done` is called with every stretch of `data` that will not be
    /// read again: the neighbourhood of each boundary once it is found, and
    /// each chunk once it is folded.
    fn fold_chunks(&mut self, data: &[u8], last_of_input: bool, done: &(dyn Fn(&[u8]) + Sync)) {
        if data.is_empty() {
            return;
        }
        self.resolve_event(data);
        self.bytes += data.len() as u64;
        let mut chunks = Vec::new();
        let mut pos = 0;
        let mut scanned = 0;
        while pos < data.len() {
            let end = boundary::next(data, pos + self.chunk_size).unwrap_or(data.len());
            chunks.push(&data[pos..end]);
            pos = end;
            // The search touched a page near each boundary, and the kernel
            // mapped its neighbours; let go of them every few chunks.
            if chunks.len() % 64 == 0 {
                done(&data[scanned..pos]);
                scanned = pos;
            }
        }
        done(&data[scanned..]);
        let n = chunks.len();
        let block = self.next_block();
        let cfg = &self.cfg;
        let states = &self.states;
        let run = |(i, chunk): (usize, &&[u8])| {
            let t = rayon::current_thread_index().unwrap_or(0) % states.len();
            let mut st = states[t].lock().unwrap_or_else(|e| e.into_inner());
            let order = block | (i as u128) << 32;
            let report = fold_chunk(&mut st, cfg, chunk, last_of_input && i + 1 == n, order);
            drop(st);
            done(chunk);
            report
        };
        let reports: Vec<ChunkReport> = match &self.pool {
            Some(pool) if n > 1 => {
                pool.install(|| chunks.par_iter().enumerate().map(run).collect())
            }
            _ => chunks.iter().enumerate().map(run).collect(),
        };
        let input = self.input;
        self.reports.extend(reports.into_iter().map(|r| (input, r)));
    }

    /// Where the next block's samples are in the text: its unit and its
    /// number in the unit, as the high bits of [`cells::Order`].
    fn next_block(&mut self) -> cells::Order {
        if self.blocks.len() <= self.unit {
            self.blocks.resize(self.unit + 1, 0);
        }
        let seq = self.blocks[self.unit];
        self.blocks[self.unit] += 1;
        (self.unit as u128) << 96 | u128::from(seq) << 64
    }

    /// Folds a memory-mapped file in one parallel pass (no barrier between
    /// windows), dropping each chunk's pages as soon as it is folded so that
    /// resident memory stays flat whatever the file size.
    fn input_mmap(&mut self, map: &input::Mapping) {
        let _ = map.advise(memmap2::Advice::Sequential);
        let page = input::page_size();
        let base = map.as_ptr() as usize;
        let release = |chunk: &[u8]| {
            let start = chunk.as_ptr() as usize - base;
            // Faulting in this chunk's pages made the kernel map
            // neighbouring pages too (fault-around, whole large folios): up
            // to MAP_SLACK of the previous, already released chunk, and of
            // the next one, which releases its own. A neighbour chunk that
            // shares an edge page faults it in again, with the same bytes.
            let first = start.saturating_sub(MAP_SLACK) / page * page;
            let last = (start + chunk.len()).div_ceil(page) * page;
            map.release(first, last);
        };
        self.fold_chunks(map, true, &release);
    }

    /// Folds a stream: a reader thread fills blocks (cut at the last sample
    /// boundary) while the pool folds the previous one.
    fn input_stream(&mut self, mut stream: input::Stream) -> Result<()> {
        let block_size = self.block_size;
        let compat = self.cfg.compat;
        let (tx, rx) = mpsc::sync_channel::<Result<Vec<u8>>>(1);
        let path: PathBuf = stream.path().to_path_buf();
        std::thread::scope(|scope| -> Result<()> {
            let path = &path;
            scope.spawn(move || {
                let mut carry: Vec<u8> = Vec::new();
                // `carry[..scanned]` holds no cut: read on past it.
                let mut scanned = 0;
                loop {
                    let mut buf = std::mem::take(&mut carry);
                    let fill = block_size.max(scanned + block_size.min(1 << 20));
                    buf.reserve(fill.saturating_sub(buf.len()));
                    let mut eof = false;
                    while buf.len() < fill {
                        let old = buf.len();
                        buf.resize(old + (1 << 20), 0);
                        match stream.read(&mut buf[old..]) {
                            Ok(0) => {
                                buf.truncate(old);
                                eof = true;
                                break;
                            }
                            Ok(k) => buf.truncate(old + k),
                            Err(e) => {
                                let _ = tx.send(Err(e));
                                return;
                            }
                        }
                    }
                    if eof {
                        let _ = tx.send(Ok(buf));
                        return;
                    }
                    if let Some(cut) = stream_cut(&buf, scanned, compat) {
                        carry = buf.split_off(cut);
                        scanned = 0;
                        if tx.send(Ok(buf)).is_err() {
                            return;
                        }
                    } else if buf.len() > input::MAX_RECORD {
                        // No text perf prints: a bomb, never held whole.
                        let _ = tx.send(Err(input::oversized(path, "a sample")));
                        return;
                    } else {
                        // No cut yet: keep reading into the same buffer
                        // (the loop above reads at least 1 MiB more).
                        scanned = buf.len();
                        carry = buf;
                    }
                }
            });
            let mut pending: Option<Vec<u8>> = None;
            for msg in rx {
                let block = msg?;
                if let Some(prev) = pending.take() {
                    self.input_block(&prev, false);
                }
                pending = Some(block);
            }
            if let Some(last) = pending {
                self.input_block(&last, true);
            }
            Ok(())
        })
        .map_err(|e| match e {
            Error::Io { source, .. } if source.kind() == io::ErrorKind::BrokenPipe => {
                Error::io(path, source)
            }
            e => e,
        })
    }

    fn finish(self) -> Folded {
        let mut states = self
            .states
            .into_iter()
            .map(|m| m.into_inner().unwrap_or_else(|e| e.into_inner()));
        let mut total = states.next().unwrap_or_default();
        for s in states {
            total.merge(s);
        }
        let mut stacks = total.render();
        stacks.par_sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let cells = self.cfg.time_cells.map(|cell_ns| {
            let c = std::mem::take(&mut total.cells);
            c.finish(cell_ns, |k| total.render_key(k))
        });
        // Absolute line numbers: chunk reports are in input order.
        let mut first_skipped = Vec::new();
        let mut line_base = 0u64;
        let mut cur_input = usize::MAX;
        for (input, r) in &self.reports {
            if *input != cur_input {
                cur_input = *input;
                line_base = 0;
            }
            for s in &r.skipped {
                if first_skipped.len() < 10 {
                    let mut s = s.clone();
                    s.input = *input;
                    s.line += line_base + 1;
                    first_skipped.push(s);
                }
            }
            line_base += r.lines;
        }
        let c = total.counters;
        let _ = self.threads;
        Folded {
            stats: Stats {
                bytes: self.bytes,
                samples: c.samples,
                filtered_samples: c.filtered,
                unique_stacks: stacks.len() as u64,
                skipped_lines: c.skipped_lines,
                non_utf8_lines: c.non_utf8_lines,
                flat_samples: c.flat,
                truncated_lines: c.truncated_lines,
                chains: c.chains,
                first_skipped,
                event: self.cfg.event.clone(),
                elapsed: self.start.elapsed(),
            },
            stacks,
            cells,
        }
    }
}

/// How far around a faulting address Linux may map pages that are already
/// in the page cache: `fault_around_bytes` (64 KiB by default), or a whole
/// large folio, at most a PMD (2 MiB).
const MAP_SLACK: usize = 2 << 20;

/// `line` made the folded line `STACK COUNT\n`, its control characters
/// escaped (`sys::printable`): the one way every folded writer builds a
/// line. The stack is scanned in the copy, in cache (a separate pass over
/// the stacks, scattered in memory, cost twice as much).
pub(crate) fn folded_line(line: &mut Vec<u8>, stack: &str, count: u64, num: &mut itoa::Buffer) {
    line.clear();
    line.extend_from_slice(stack.as_bytes());
    if !crate::sys::printable::bytes_are_printable(line) {
        line.clear();
        line.extend_from_slice(crate::sys::printable::printable_text(stack).as_bytes());
    }
    line.push(b' ');
    line.extend_from_slice(num.format(count).as_bytes());
    line.push(b'\n');
}

#[cfg(test)]
mod tests;
