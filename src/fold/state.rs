//! The per-thread folding state and the line-by-line sample state machine
//! that fills it.
//!
//! A [`FoldState`] interns frame names to `u32` ids, caches what each
//! distinct frame line turns into (so a repeated line costs one hash lookup
//! and no allocation), and counts stacks keyed by id sequences. Each rayon
//! worker owns one state; states are merged once at the end by re-mapping
//! ids. [`fold_chunk`] runs inferno's state machine over one chunk that
//! starts at a sample boundary. Nothing here does I/O.

use std::hash::BuildHasherDefault;

use rustc_hash::FxHasher;

use super::frame::frame_names;
use super::{Config, SkippedKind, SkippedLine};
use crate::perf_script::{self, trim_end, Header};

type FxMap<K, V> = std::collections::HashMap<K, V, BuildHasherDefault<FxHasher>>;

/// The stack key's first element when the process name is omitted
/// (`--skip-after` matched).
pub(crate) const NO_PNAME: u32 = u32::MAX;

/// Per-thread folding state.
#[derive(Default)]
pub(crate) struct FoldState {
    names: Vec<Box<str>>,
    name_ids: FxMap<Box<str>, u32>,
    /// Frame-line cache, one map per "process name starts with java"
    /// (Java tidying depends on it); keyed by the line after its address
    /// (or the whole line with --addrs).
    line_cache: [FxMap<Box<[u8]>, CachedLine>; 2],
    pname_cache: FxMap<Box<[u8]>, (u32, bool)>,
    pub(crate) stacks: FxMap<Box<[u32]>, u64>,
    key_buf: Vec<u8>,
    stack_buf: Vec<u32>,
    pub(crate) counters: Counters,
}

/// Counts kept per state and summed at the end.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Counters {
    pub samples: u64,
    pub filtered: u64,
    pub skipped_lines: u64,
    pub non_utf8_lines: u64,
    pub truncated_lines: u64,
}

impl Counters {
    pub(crate) fn add(&mut self, o: &Counters) {
        self.samples += o.samples;
        self.filtered += o.filtered;
        self.skipped_lines += o.skipped_lines;
        self.non_utf8_lines += o.non_utf8_lines;
        self.truncated_lines += o.truncated_lines;
    }
}

enum CachedLine {
    /// Not a frame line (inferno's "weird stack line").
    Weird,
    Frames {
        ids: Box<[u32]>,
        skip_after: bool,
    },
}

impl FoldState {
    fn intern(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.name_ids.get(name) {
            return id;
        }
        let id = self.names.len() as u32;
        self.names.push(name.into());
        self.name_ids.insert(name.into(), id);
        id
    }

    /// The text of an interned name.
    pub(crate) fn name(&self, id: u32) -> &str {
        &self.names[id as usize]
    }

    /// Adds everything in `other` to `self`, re-mapping ids.
    pub(crate) fn merge(&mut self, other: FoldState) {
        let remap: Vec<u32> = other.names.iter().map(|n| self.intern(n)).collect();
        let mut key = Vec::new();
        for (k, count) in other.stacks {
            key.clear();
            key.extend(k.iter().map(|&id| {
                if id == NO_PNAME {
                    NO_PNAME
                } else {
                    remap[id as usize]
                }
            }));
            match self.stacks.get_mut(key.as_slice()) {
                Some(c) => *c += count,
                None => {
                    self.stacks.insert(key.as_slice().into(), count);
                }
            }
        }
        self.counters.add(&other.counters);
    }

    /// Renders every stack as `pname;root;...;leaf` with its count.
    pub(crate) fn render(&self) -> Vec<(String, u64)> {
        let mut out = Vec::with_capacity(self.stacks.len());
        for (k, &count) in &self.stacks {
            let mut s = String::with_capacity(k.len() * 24);
            let (first, frames) = k.split_first().expect("stack keys are never empty");
            if *first != NO_PNAME {
                s.push_str(self.name(*first));
            }
            for &id in frames.iter().rev() {
                if !s.is_empty() || *first != NO_PNAME {
                    s.push(';');
                }
                s.push_str(self.name(id));
            }
            out.push((s, count));
        }
        out
    }
}

/// What one chunk reports back, in input order.
#[derive(Debug, Default)]
pub(crate) struct ChunkReport {
    pub lines: u64,
    /// Up to [`MAX_REPORTED`] skipped lines, with 0-based line index within
    /// the chunk.
    pub skipped: Vec<SkippedLine>,
}

const MAX_REPORTED: usize = 5;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Filter {
    Keep,
    Skip,
    SkipRemaining,
}

struct Machine<'s, 'c> {
    st: &'s mut FoldState,
    cfg: &'c Config,
    in_event: bool,
    filter: Filter,
    period: Option<u64>,
    pname: u32,
    java: bool,
    header_ok: bool,
    line: u64,
    report: ChunkReport,
}

/// Folds one chunk (which begins at a sample boundary) into `st`.
/// `last_of_input`: the chunk ends its input, so an unterminated final line
/// is a line cut mid-way.
pub(crate) fn fold_chunk(
    st: &mut FoldState,
    cfg: &Config,
    chunk: &[u8],
    last_of_input: bool,
) -> ChunkReport {
    st.stack_buf.clear();
    st.stack_buf.push(NO_PNAME); // slot 0: the process name, set on emit
    let mut m = Machine {
        st,
        cfg,
        in_event: false,
        filter: Filter::Keep,
        period: None,
        pname: NO_PNAME,
        java: false,
        header_ok: false,
        line: 0,
        report: ChunkReport::default(),
    };
    let valid = chunk.is_ascii() || std::str::from_utf8(chunk).is_ok();
    let mut pos = 0;
    // One SIMD scan over the chunk finds every line end; far cheaper than a
    // memchr call per (short) line.
    let mut newlines = memchr::memchr_iter(b'\n', chunk);
    while pos < chunk.len() {
        let (raw, next, terminated) = match newlines.next() {
            Some(i) => (&chunk[pos..i], i + 1, true),
            None => (&chunk[pos..], chunk.len(), false),
        };
        pos = next;
        if !terminated && last_of_input && !cfg.compat {
            m.st.counters.truncated_lines += 1;
            m.skip(SkippedKind::Truncated, &String::from_utf8_lossy(raw));
            m.line += 1;
            break;
        }
        if valid {
            // SAFETY: `chunk` is valid UTF-8 and we split at b'\n', which is
            // never inside a multi-byte sequence.
            let line = unsafe { std::str::from_utf8_unchecked(raw) };
            m.on_line(line);
        } else {
            match std::str::from_utf8(raw) {
                Ok(line) => m.on_line(line),
                Err(_) => {
                    m.st.counters.non_utf8_lines += 1;
                    let line = String::from_utf8_lossy(raw);
                    m.on_line(&line);
                }
            }
        }
        m.line += 1;
    }
    // End of chunk = end of data for this sample.
    m.end_event();
    m.report.lines = m.line;
    m.report
}

impl Machine<'_, '_> {
    #[inline]
    fn on_line(&mut self, line: &str) {
        if line.starts_with('#') {
            return;
        }
        let line = trim_end(line);
        if line.is_empty() {
            self.end_event();
        } else if self.in_event {
            // perf indents every frame line; an unindented line that parses
            // as a header starts the next sample even without a blank line
            // (`perf script -F` without callchains prints one line per
            // sample). inferno reads it as a frame and loses the sample.
            if !self.cfg.compat
                && !perf_script::is_ascii_ws(line.as_bytes()[0])
                && perf_script::parse_header_fixed(line).is_some()
            {
                self.end_event();
                self.on_header_line(line);
            } else {
                self.on_frame_line(line);
            }
        } else {
            self.on_header_line(line);
        }
    }

    fn skip(&mut self, kind: SkippedKind, text: &str) {
        if self.report.skipped.len() < MAX_REPORTED {
            self.report.skipped.push(SkippedLine {
                input: 0,
                line: self.line,
                kind,
                text: text.chars().take(200).collect(),
            });
        }
    }

    fn on_header_line(&mut self, line: &str) {
        self.in_event = true;
        let header = if self.cfg.compat {
            perf_script::parse_header_compat(line)
        } else {
            perf_script::parse_header_fixed(line)
        };
        let Some(h) = header else {
            self.st.counters.skipped_lines += 1;
            self.skip(SkippedKind::Header, line);
            self.in_event = false;
            return;
        };
        // inferno assigns the period only while reading an event field; a
        // header without one keeps the previous sample's period.
        if h.event.is_some() || !self.cfg.compat {
            self.period = h.period;
        }
        if let Some(event) = h.event {
            if !self.cfg.event_matches(event) {
                self.filter = Filter::Skip;
                self.st.counters.filtered += 1;
                return;
            }
        }
        self.set_pname(&h);
        self.header_ok = true;
        if let Some(trailing) = h.trailing {
            if self.cfg.compat {
                self.on_frame_line(trailing);
                self.in_event = false;
                if self.st.stack_buf.len() > 1 {
                    self.end_event();
                }
            } else if perf_script::parse_frame_fixed(trailing).is_some() {
                self.on_frame_line(trailing);
                self.end_event();
            }
            // Otherwise: tracepoint arguments, not a frame; frames follow.
        }
    }

    fn set_pname(&mut self, h: &Header<'_>) {
        let st = &mut *self.st;
        let key = &mut st.key_buf;
        key.clear();
        key.extend_from_slice(h.comm.as_bytes());
        if self.cfg.include_tid {
            key.push(0);
            key.extend_from_slice(h.pid.as_bytes());
            key.push(b'/');
            key.extend_from_slice(h.tid.as_bytes());
        } else if self.cfg.include_pid {
            key.push(0);
            key.extend_from_slice(h.pid.as_bytes());
        }
        if let Some(&(id, java)) = st.pname_cache.get(key.as_slice()) {
            self.pname = id;
            self.java = java;
            return;
        }
        let mut name = h.comm.replace(' ', "_");
        if self.cfg.include_tid {
            name.push('-');
            name.push_str(h.pid);
            name.push('/');
            name.push_str(h.tid);
        } else if self.cfg.include_pid {
            name.push('-');
            name.push_str(h.pid);
        }
        let java = name.starts_with("java");
        let cache_key: Box<[u8]> = key.as_slice().into();
        let id = st.intern(&name);
        st.pname_cache.insert(cache_key, (id, java));
        self.pname = id;
        self.java = java;
    }

    fn on_frame_line(&mut self, line: &str) {
        if self.filter != Filter::Keep {
            return;
        }
        let trimmed = perf_script::trim_start(line);
        // The address is short: a byte loop beats a memchr call here.
        let Some(space) = trimmed.bytes().position(|b| b == b' ') else {
            self.st.counters.skipped_lines += 1;
            self.skip(SkippedKind::Frame, line);
            return;
        };
        let st = &mut *self.st;
        // The frame names depend only on the text after the address, on the
        // address when --addrs is on, and on whether the process is Java.
        let key: &[u8] = if self.cfg.frames.include_addrs {
            trimmed.as_bytes()
        } else {
            &trimmed.as_bytes()[space + 1..]
        };
        let cache = &mut st.line_cache[self.java as usize];
        let skip_after = match cache.get(key) {
            Some(CachedLine::Frames { ids, skip_after }) => {
                st.stack_buf.extend(ids.iter().rev());
                *skip_after
            }
            Some(CachedLine::Weird) => {
                st.counters.skipped_lines += 1;
                self.skip(SkippedKind::Frame, line);
                return;
            }
            None => {
                let parsed = if self.cfg.compat {
                    perf_script::parse_frame_compat(line)
                } else {
                    perf_script::parse_frame_fixed(line)
                };
                let key: Box<[u8]> = key.into();
                let Some(f) = parsed else {
                    st.line_cache[self.java as usize].insert(key, CachedLine::Weird);
                    st.counters.skipped_lines += 1;
                    self.skip(SkippedKind::Frame, line);
                    return;
                };
                let names = frame_names(&f, self.java, &self.cfg.frames, &self.cfg.skip_after);
                let ids: Box<[u32]> = names.names.iter().map(|n| st.intern(n)).collect();
                st.stack_buf.extend(ids.iter().rev());
                st.line_cache[self.java as usize].insert(
                    key,
                    CachedLine::Frames {
                        ids,
                        skip_after: names.skip_after,
                    },
                );
                names.skip_after
            }
        };
        if skip_after {
            self.filter = Filter::SkipRemaining;
        }
    }

    fn end_event(&mut self) {
        let st = &mut *self.st;
        let emit = if st.stack_buf.len() > 1 {
            true
        } else {
            // A sample whose header we accepted but that has no frames:
            // inferno drops it, we keep it as a bare process-name stack.
            !self.cfg.compat
                && self.header_ok
                && self.filter == Filter::Keep
                && self.pname != NO_PNAME
        };
        if emit {
            let first = if self.filter == Filter::SkipRemaining {
                NO_PNAME
            } else {
                self.pname
            };
            // Key layout: [pname, leaf, ..., root]; rendered root-first.
            st.stack_buf[0] = first;
            let count = self.period.unwrap_or(1);
            match st.stacks.get_mut(st.stack_buf.as_slice()) {
                Some(c) => *c += count,
                None => {
                    st.stacks.insert(st.stack_buf.as_slice().into(), count);
                }
            }
            st.counters.samples += 1;
        }
        st.stack_buf.truncate(1);
        self.in_event = false;
        self.filter = Filter::Keep;
        self.period = None;
        self.header_ok = false;
    }
}
