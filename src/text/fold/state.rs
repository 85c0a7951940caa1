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

use super::chain::{Chain, ChainEnds};
use super::frame::frame_names;
use super::stacks::StackCounts;
use super::{Config, SkippedKind, SkippedLine};
use crate::sys::printable::printable_text;
use crate::text::perf_script::{self, trim_end, Header};

type FxMap<K, V> = std::collections::HashMap<K, V, BuildHasherDefault<FxHasher>>;

/// The stack key's first element when the process name is omitted
/// (`--skip-after` matched).
pub(crate) const NO_PNAME: u32 = u32::MAX;

/// Per-thread folding state.
#[derive(Default)]
pub(crate) struct FoldState {
    names: Vec<Box<str>>,
    name_ids: FxMap<Box<str>, u32>,
    /// Frame-line cache, one table per "process name starts with java"
    /// (Java tidying depends on it); see [`FrameKey`].
    line_cache: [hashbrown::HashTable<CacheEntry>; 2],
    /// The frame-line cache's keys, back to back.
    key_arena: Vec<u8>,
    /// Id lists of frame lines that make several frames (Java inlining).
    multi_ids: Vec<Box<[u32]>>,
    /// Process-name cache: comm (+ ids) bytes -> (name id, is Java).
    pname_cache: hashbrown::HashTable<(u64, u32, u32, u32, bool)>,
    pname_arena: Vec<u8>,
    pub(crate) stacks: StackCounts,
    key_buf: Vec<u8>,
    pub(super) stack_buf: Vec<u32>,
    pub(crate) counters: Counters,
    /// Whole frame blocks folded before.
    blocks: super::blocks::BlockCache,
    /// The timeline's counts ([`super::Options::time_cells`]).
    pub(crate) cells: super::cells::Cells,
    /// The current sample's thread for `cells`: `comm \0 tid`.
    pub(super) thread_buf: Vec<u8>,
}

/// Counts kept per state and summed at the end.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Counters {
    pub samples: u64,
    pub filtered: u64,
    pub skipped_lines: u64,
    pub non_utf8_lines: u64,
    pub truncated_lines: u64,
    /// Samples folded from their header line's frame alone.
    pub flat: u64,
    /// Where the folded samples' call chains ended.
    pub chains: ChainEnds,
}

impl Counters {
    pub(crate) fn add(&mut self, o: &Counters) {
        self.samples += o.samples;
        self.filtered += o.filtered;
        self.skipped_lines += o.skipped_lines;
        self.non_utf8_lines += o.non_utf8_lines;
        self.truncated_lines += o.truncated_lines;
        self.flat += o.flat;
        self.chains.add(&o.chains);
    }
}

/// A cached frame line: where its key lives in the state's key arena (see
/// [`FrameKey`]) and what the line becomes. Keys sit back to back in one
/// buffer and short id lists inline, so a cache hit touches the table and
/// one nearby stretch of the arena instead of chasing two heap pointers.
///
/// 24 bytes, so that the table of a real capture (tens of thousands of
/// functions) stays in L2: a hit costs a probe, not a trip to memory.
struct CacheEntry {
    hash: u64,
    offset: u32,
    sym_len: u16,
    module_len: u16,
    /// A frame id, or an index into `FoldState::multi_ids` (see `flags`).
    payload: u32,
    flags: u32,
}

const WEIRD: u32 = 1;
const MANY: u32 = 2;
const SKIP_AFTER: u32 = 4;

/// The part of a frame line its frame names depend on, in two pieces so
/// that it can be hashed and compared without copying: the text after the
/// address with a `+0xOFF` symbol offset cut out when the DSO follows as a
/// `(...)` group (so every address inside one function shares an entry),
/// or the whole line (address included) with `--addrs`.
struct FrameKey<'a> {
    sym: &'a [u8],
    module: &'a [u8],
}

impl<'a> FrameKey<'a> {
    /// The key of a frame line whose text after the address starts at
    /// `line[rest_start..]` (without `--addrs`).
    fn after_address(line: &'a [u8], rest_start: usize) -> Self {
        let rest = &line[rest_start..];
        if let Some(last) = crate::text::bytes::rfind_byte(rest, rest.len(), b' ') {
            let (a, b) = (&rest[..last], &rest[last..]);
            // `b` is " (DSO)": cutting the offset from `a` cannot change how
            // either parser splits the line, so the names are the same.
            if b.len() >= 3 && b[1] == b'(' && b[b.len() - 1] == b')' {
                // Searched in `line`, whose bytes before `a` allow a whole
                // 16-byte step; the run cannot pass the space before `a`.
                let hex = perf_script::hex_run_back(line, rest_start + last).min(a.len());
                let head = a.len() - hex;
                // Byte compares: `ends_with` would call memcmp for 3 bytes.
                if head >= 3 && a[head - 3] == b'+' && a[head - 2] == b'0' && a[head - 1] == b'x' {
                    return FrameKey {
                        sym: &a[..head - 3],
                        module: b,
                    };
                }
            }
        }
        FrameKey {
            sym: rest,
            module: &[],
        }
    }

    fn hash(&self) -> u64 {
        use std::hash::Hasher;
        let mut h = FxHasher::default();
        h.write(self.sym);
        h.write_u8(0xff);
        h.write(self.module);
        h.finish()
    }

    #[inline]
    fn matches(&self, hash: u64, e: &CacheEntry, arena: &[u8]) -> bool {
        if e.hash != hash
            || e.sym_len as usize != self.sym.len()
            || e.module_len as usize != self.module.len()
        {
            return false;
        }
        let at = e.offset as usize;
        let stored = &arena[at..at + self.sym.len() + self.module.len()];
        short_eq(&stored[..self.sym.len()], self.sym)
            && short_eq(&stored[self.sym.len()..], self.module)
    }

    /// Whether the key fits an entry's length fields (longer lines, rare,
    /// are simply not cached).
    fn cacheable(&self) -> bool {
        self.sym.len() <= u16::MAX as usize && self.module.len() <= u16::MAX as usize
    }

    fn to_entry(&self, hash: u64, arena: &mut Vec<u8>, payload: u32, flags: u32) -> CacheEntry {
        let offset = arena.len() as u32;
        arena.extend_from_slice(self.sym);
        arena.extend_from_slice(self.module);
        CacheEntry {
            hash,
            offset,
            sym_len: self.sym.len() as u16,
            module_len: self.module.len() as u16,
            payload,
            flags,
        }
    }
}

/// Equality of two equally long byte strings, eight bytes at a time; for
/// the short keys here this beats a call into `memcmp`.
#[inline]
fn short_eq(a: &[u8], b: &[u8]) -> bool {
    debug_assert_eq!(a.len(), b.len());
    let mut ca = a.chunks_exact(8);
    let mut cb = b.chunks_exact(8);
    for (x, y) in (&mut ca).zip(&mut cb) {
        if u64::from_ne_bytes(x.try_into().unwrap()) != u64::from_ne_bytes(y.try_into().unwrap()) {
            return false;
        }
    }
    // A byte loop: slice `==` would call memcmp for these few bytes.
    ca.remainder()
        .iter()
        .zip(cb.remainder())
        .all(|(x, y)| x == y)
}

impl FoldState {
    /// The id of the frame or process name `name`, its control
    /// characters escaped first ([`printable_text`]): no name from a
    /// capture can split a folded line. Called on cache misses only.
    pub(super) fn intern(&mut self, name: &str) -> u32 {
        let name = &*printable_text(name);
        if let Some(&id) = self.name_ids.get(name) {
            return id;
        }
        let id = self.names.len() as u32;
        self.names.push(name.into());
        self.name_ids.insert(name.into(), id);
        id
    }

    /// The process name's id for a sample of thread `tid` of `pid` named
    /// `comm` (the root of its stack, with the ids as `cfg` asks), and
    /// whether it starts with `java`.
    pub(crate) fn pname(&mut self, cfg: &Config, comm: &str, pid: &str, tid: &str) -> (u32, bool) {
        let st = self;
        // The name depends on the comm alone unless ids are shown: then the
        // key is the comm itself, with no copy.
        let key: &[u8] = if cfg.include_pid || cfg.include_tid {
            let buf = &mut st.key_buf;
            buf.clear();
            buf.extend_from_slice(comm.as_bytes());
            buf.push(0);
            buf.extend_from_slice(pid.as_bytes());
            if cfg.include_tid {
                buf.push(b'/');
                buf.extend_from_slice(tid.as_bytes());
            }
            buf
        } else {
            comm.as_bytes()
        };
        let hash = hash_bytes(key);
        let arena = &st.pname_arena;
        if let Some(&(_, _, _, id, java)) = st.pname_cache.find(hash, |&(h, off, len, _, _)| {
            h == hash
                && len as usize == key.len()
                && short_eq(&arena[off as usize..][..key.len()], key)
        }) {
            return (id, java);
        }
        let mut name = comm.replace(' ', "_");
        if cfg.include_tid {
            name.push('-');
            name.push_str(pid);
            name.push('/');
            name.push_str(tid);
        } else if cfg.include_pid {
            name.push('-');
            name.push_str(pid);
        }
        let java = name.starts_with("java");
        let (off, len) = (st.pname_arena.len() as u32, key.len() as u32);
        st.pname_arena.extend_from_slice(key);
        let id = st.intern(&name);
        st.pname_cache
            .insert_unique(hash, (hash, off, len, id, java), |e| e.0);
        (id, java)
    }

    /// The text of an interned name.
    pub(crate) fn name(&self, id: u32) -> &str {
        &self.names[id as usize]
    }

    /// Adds everything in `other` to `self`, re-mapping ids.
    pub(crate) fn merge(&mut self, other: FoldState) {
        let remap: Vec<u32> = other.names.iter().map(|n| self.intern(n)).collect();
        let mut key = Vec::new();
        for (k, count) in other.stacks.iter() {
            key.clear();
            key.extend(k.iter().map(|&id| {
                if id == NO_PNAME {
                    NO_PNAME
                } else {
                    remap[id as usize]
                }
            }));
            self.stacks.add(&key, count);
        }
        self.counters.add(&other.counters);
        let remap_id = |id: u32| match id {
            NO_PNAME => NO_PNAME,
            id => remap[id as usize],
        };
        self.cells.merge(other.cells, remap_id);
    }

    /// Renders every stack as `pname;root;...;leaf` with its count.
    pub(crate) fn render(&self) -> Vec<(String, u64)> {
        let mut out = Vec::with_capacity(self.stacks.len());
        for (k, count) in self.stacks.iter() {
            out.push((self.render_key(k), count));
        }
        out
    }

    /// One stack key as `pname;root;...;leaf`.
    pub(crate) fn render_key(&self, k: &[u32]) -> String {
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
        s
    }
}

/// FxHash of a byte string.
#[inline]
fn hash_bytes(b: &[u8]) -> u64 {
    use std::hash::Hasher;
    let mut h = FxHasher::default();
    h.write(b);
    h.finish()
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

/// A frame block folded line by line (`start..end` of the chunk), and the
/// marks that tell whether anything but the stack changed meanwhile.
struct Learning {
    start: usize,
    end: usize,
    stack_len: usize,
    line: u64,
    marks: (u64, u64, usize, u64),
    chain: Chain,
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
    /// A header was accepted and frames may follow (set by
    /// `on_header_line`, taken by `fold_chunk`).
    block_ready: bool,
    /// Samples ended so far.
    events: u64,
    /// The current sample's call chain, as its frame lines said.
    chain: Chain,
    /// The current sample's time, for the timeline's cells.
    time: Option<u64>,
    /// Where this chunk starts in the text, and samples counted so far:
    /// each one's place for the timeline's cells.
    order: (super::cells::Order, u32),
}

/// Folds one chunk (which begins at a sample boundary) into `st`.
/// `last_of_input`: the chunk ends its input, so an unterminated final line
/// is a line cut mid-way. `order`: where the chunk is in the text (for the
/// timeline's cells, [`super::cells::Order`]).
pub(crate) fn fold_chunk(
    st: &mut FoldState,
    cfg: &Config,
    chunk: &[u8],
    last_of_input: bool,
    order: super::cells::Order,
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
        block_ready: false,
        events: 0,
        chain: Chain::default(),
        time: None,
        order: (order, 0),
    };
    let mut pos = 0;
    // One SIMD scan over the chunk finds every line end; far cheaper than a
    // memchr call per (short) line.
    let mut newlines = super::lines::Newlines::new(chunk);
    // A frame block being folded line by line, to be cached at its end.
    let mut learning: Option<Learning> = None;
    while pos < chunk.len() {
        if let Some(l) = learning.take_if(|l| pos >= l.end) {
            m.learned(chunk, l);
        }
        let (raw, next, terminated, ascii) = match newlines.next() {
            Some((i, high)) => (&chunk[pos..i], i + 1, true, !high),
            None => (&chunk[pos..], chunk.len(), false, chunk[pos..].is_ascii()),
        };
        pos = next;
        if !terminated && last_of_input && !cfg.compat {
            m.st.counters.truncated_lines += 1;
            m.skip(SkippedKind::Truncated, &String::from_utf8_lossy(raw));
            m.line += 1;
            break;
        }
        // The newline scan saw every byte and reported high ones: no
        // second pass over the line.
        if ascii {
            debug_assert!(raw.is_ascii(), "the newline scan missed a high byte");
            // SAFETY: ASCII is valid UTF-8.
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
        if std::mem::take(&mut m.block_ready) {
            // A header just started a sample: its frames may be a block
            // folded before (or one to remember).
            learning = None;
            if let Some(len) = m.st.blocks.block_at(&chunk[pos..]) {
                if m.replay(&chunk[pos..pos + len]) {
                    pos += len;
                    newlines = super::lines::Newlines::starting_at(chunk, pos);
                } else {
                    learning = Some(m.learning(pos, len));
                }
            }
        }
    }
    // End of chunk = end of data for this sample.
    m.end_event();
    m.st.stacks.flush();
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
        } else if !self.cfg.compat && perf_script::starts_like_a_frame(line) {
            // perf starts frame lines with a tab and never a header: this
            // is a frame whose header was cut off (a capture that starts
            // mid-sample) or skipped. inferno reads it as a header, and a
            // C++ `a::b` symbol in it becomes the event that filters out
            // every real sample after it.
            self.st.counters.skipped_lines += 1;
            self.skip(SkippedKind::OrphanFrame, line);
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
        if self.cfg.time_cells.is_some() {
            self.time = perf_script::time_ns(line);
            let buf = &mut self.st.thread_buf;
            buf.clear();
            buf.extend_from_slice(h.comm.as_bytes());
            buf.push(0);
            buf.extend_from_slice(h.tid.as_bytes());
        }
        self.header_ok = true;
        self.block_ready = h.trailing.is_none();
        if let Some(trailing) = h.trailing {
            // A frame on the header line: no call graph was recorded.
            let before = self.st.counters.samples;
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
            self.st.counters.flat += self.st.counters.samples - before;
        }
    }

    fn set_pname(&mut self, h: &Header<'_>) {
        (self.pname, self.java) = self.st.pname(self.cfg, h.comm, h.pid, h.tid);
    }

    fn on_frame_line(&mut self, line: &str) {
        if self.filter != Filter::Keep {
            return;
        }
        let Some(rest_start) = perf_script::after_address(line) else {
            self.st.counters.skipped_lines += 1;
            self.skip(SkippedKind::Frame, line);
            return;
        };
        self.chain.frame(line.as_bytes(), rest_start);
        let key = if self.cfg.frames.include_addrs {
            FrameKey {
                sym: perf_script::trim_start(line).as_bytes(),
                module: &[],
            }
        } else {
            FrameKey::after_address(line.as_bytes(), rest_start)
        };
        let st = &mut *self.st;
        let hash = key.hash();
        let arena = &st.key_arena;
        let found = st.line_cache[self.java as usize].find(hash, |e| key.matches(hash, e, arena));
        let skip_after = match found {
            Some(e) if e.flags & WEIRD != 0 => {
                st.counters.skipped_lines += 1;
                self.skip(SkippedKind::Frame, line);
                return;
            }
            Some(e) => {
                if e.flags & MANY == 0 {
                    st.stack_buf.push(e.payload);
                } else {
                    st.stack_buf
                        .extend(st.multi_ids[e.payload as usize].iter().rev());
                }
                e.flags & SKIP_AFTER != 0
            }
            None => {
                let parsed = if self.cfg.compat {
                    perf_script::parse_frame_compat(line)
                } else {
                    perf_script::parse_frame_fixed(line)
                };
                let cacheable = key.cacheable();
                let Some(f) = parsed else {
                    if cacheable {
                        let entry = key.to_entry(hash, &mut st.key_arena, 0, WEIRD);
                        st.line_cache[self.java as usize].insert_unique(hash, entry, |e| e.hash);
                    }
                    st.counters.skipped_lines += 1;
                    self.skip(SkippedKind::Frame, line);
                    return;
                };
                let names = frame_names(&f, self.java, &self.cfg.frames, &self.cfg.skip_after);
                let ids: Vec<u32> = names.names.iter().map(|n| st.intern(n)).collect();
                st.stack_buf.extend(ids.iter().rev());
                if cacheable {
                    let mut flags = if names.skip_after { SKIP_AFTER } else { 0 };
                    let payload = if ids.len() == 1 {
                        ids[0]
                    } else {
                        flags |= MANY;
                        st.multi_ids.push(ids.into());
                        (st.multi_ids.len() - 1) as u32
                    };
                    let entry = key.to_entry(hash, &mut st.key_arena, payload, flags);
                    st.line_cache[self.java as usize].insert_unique(hash, entry, |e| e.hash);
                }
                names.skip_after
            }
        };
        if skip_after {
            self.filter = Filter::SkipRemaining;
        }
    }

    /// Everything but the stack that folding a line can change.
    fn marks(&self) -> (u64, u64, usize, u64) {
        let c = &self.st.counters;
        (
            c.skipped_lines,
            c.non_utf8_lines,
            self.report.skipped.len(),
            self.events,
        )
    }

    /// Applies the cached fold of `block` (the frames after the header just
    /// read); false when it was not folded before.
    fn replay(&mut self, block: &[u8]) -> bool {
        let st = &mut *self.st;
        let Some(r) = st.blocks.find(block, self.java) else {
            return false;
        };
        st.stack_buf.extend_from_slice(r.ids);
        self.line += u64::from(r.lines);
        self.chain.extend(r.chain);
        if r.skip_remaining {
            self.filter = Filter::SkipRemaining;
        }
        true
    }

    /// Starts watching the block at `start..start + len` as it is folded.
    fn learning(&self, start: usize, len: usize) -> Learning {
        Learning {
            start,
            end: start + len,
            stack_len: self.st.stack_buf.len(),
            line: self.line,
            marks: self.marks(),
            chain: self.chain,
        }
    }

    /// Caches the block `l` watched, now folded, if nothing but the stack
    /// changed (so that a replay does exactly what folding did).
    fn learned(&mut self, chunk: &[u8], l: Learning) {
        if !self.in_event
            || self.marks() != l.marks
            || self.st.stack_buf.len() < l.stack_len
            || l.chain.frames != 0
        {
            return;
        }
        let st = &mut *self.st;
        let replay = super::blocks::Replay {
            ids: &st.stack_buf[l.stack_len..],
            lines: (self.line - l.line) as u32,
            skip_remaining: self.filter == Filter::SkipRemaining,
            chain: self.chain,
        };
        st.blocks.insert(&chunk[l.start..l.end], self.java, replay);
    }

    fn end_event(&mut self) {
        self.events += 1;
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
            if let Some(cell_ns) = self.cfg.time_cells {
                let at = self.order.0 | u128::from(self.order.1);
                self.order.1 += 1;
                st.cells
                    .add(cell_ns, &st.stack_buf, &st.thread_buf, self.time, at);
            }
            let count = self.period.unwrap_or(1);
            st.stacks.add_deferred(&mut st.stack_buf, count);
            st.counters.samples += 1;
            st.counters.chains.count(self.chain, count);
            // The stack went to the table; slot 0 again (set on emit).
            st.stack_buf.push(NO_PNAME);
        } else {
            st.stack_buf.truncate(1);
        }
        self.in_event = false;
        self.filter = Filter::Keep;
        self.period = None;
        self.header_ok = false;
        self.chain = Chain::default();
        self.time = None;
    }
}
