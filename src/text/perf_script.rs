//! The `perf script` text format: parsers for one sample header line and one
//! frame line, in two flavours.
//!
//! *Compat* parsers reproduce exactly how `inferno-collapse-perf` 0.12.8 reads
//! a line, including its known mistakes (see `crate::text::compat`). *Fixed*
//! parsers are the same grammar with those mistakes corrected: negative
//! PIDs/TIDs of exiting tasks (`:-1  -1`), event names that contain colons
//! (tracepoints such as `syscalls:sys_enter_openat`), tracepoint arguments on
//! the header line, and DSO paths that contain spaces.
//!
//! The grammar itself is written as nom parsers in [`grammar`], with the
//! bitmask header parser (`header_fast`) and perf's frame-layout check in
//! front of it as fast paths that must agree with it; this file holds what
//! they return ([`Header`], [`FrameLine`] with its typed accessors), the
//! entry points every reader of perf script text calls, and the small
//! helpers around them (trims, event names, descriptions of
//! text that is not perf script). It works on one line at a time and
//! allocates nothing; it knows nothing about samples, stacks, folding or
//! files.

use crate::symbolize::sample::INLINED;
use crate::text::bytes::{block16, Block16};

mod grammar;
/// [`parse_header_fixed`] in one pass for the usual header line: 16 to 64
/// bytes, printable ASCII only (no tab or other control byte, so the only
/// whitespace is `' '`). Every question the grammar answers with a parser
/// (where the next space is, whether a word is all digits, the last colon
/// followed by a space...) becomes a bit operation on masks of the line's
/// spaces, colons, digits, slashes and dashes, built sixteen bytes at a
/// time (`crate::text::bytes`). Measured: the nom grammar alone folds at
/// 0.61x the speed of this path in front of it (`benches/compare.sh`,
/// docs/benchmarks.md). `parse` returns `None` when it declines (another
/// length, a control or non-ASCII byte), never a different answer: a
/// property test holds it to the grammar.
mod header_fast;
#[cfg(test)]
mod reference;

/// The fields of a sample header line that folding needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header<'a> {
    /// The command (thread) name, trimmed; may contain spaces.
    pub comm: &'a str,
    /// The process id, or `?` when the line carries only one id.
    pub pid: &'a str,
    /// The thread id (or the only id printed).
    pub tid: &'a str,
    /// The text before the first colon after the ids, `[CPU] SECS.FRAC`
    /// as perf prints it: read by [`Header::cpu`] and [`Header::time_ns`]
    /// only when asked (folding asks for neither).
    pub stamp: &'a str,
    /// The sample period, when printed.
    pub period: Option<u64>,
    /// The event name as the parser understands it (`None` when the line has
    /// no event field).
    pub event: Option<&'a str>,
    /// Text after the event name on the same line (a single frame printed on
    /// the header line, or tracepoint arguments); trimmed, never empty.
    pub trailing: Option<&'a str>,
}

impl<'a> Header<'a> {
    /// A header of these ids alone, its other fields still to be read.
    #[inline]
    pub fn of_ids(comm: &'a str, pid: &'a str, tid: &'a str) -> Self {
        Header {
            comm,
            pid,
            tid,
            stamp: "",
            period: None,
            event: None,
            trailing: None,
        }
    }
    /// The CPU, when printed (`[003]`) just before the time stamp.
    #[inline]
    pub fn cpu(&self) -> Option<u32> {
        grammar::cpu_and_time(self.stamp.as_bytes()).0
    }

    /// The time stamp (`SECS.FRAC`, up to nine decimals) in nanoseconds.
    #[inline]
    pub fn time_ns(&self) -> Option<u64> {
        grammar::cpu_and_time(self.stamp.as_bytes()).1
    }
}

/// The three parts of a frame line `ADDR SYMBOL+0xOFF (DSO)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameLine<'a> {
    /// The address token.
    pub pc: &'a str,
    /// The symbol text (with offset), `" "` when the symbol was empty.
    pub rawfunc: &'a str,
    /// The DSO without its parentheses.
    pub module: &'a str,
}

/// What a frame line's DSO says the frame is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameKind {
    /// Code in a user-space file (or anonymous memory).
    User,
    /// The kernel or one of its modules (`[kernel.kallsyms]`, `x.ko`,
    /// `vmlinux`).
    Kernel,
    /// A function inlined into the next frame line's (`(inlined)`, perf's
    /// `--inline` lines).
    Inlined,
    /// No DSO is known (`[unknown]`).
    Unknown,
}

impl<'a> FrameLine<'a> {
    /// The address, from its hex digits (a `0x` prefix allowed); `None`
    /// when the token is not one.
    #[inline]
    pub fn address(&self) -> Option<u64> {
        let hex = self.pc.strip_prefix("0x").unwrap_or(self.pc);
        if hex.is_empty() || hex.len() > 16 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        u64::from_str_radix(hex, 16).ok()
    }

    /// The symbol without its `+0xOFF` offset.
    #[inline]
    pub fn symbol(&self) -> &'a str {
        strip_offset(self.rawfunc)
    }

    /// The symbol's offset, when printed (and at most 64 bits).
    #[inline]
    pub fn offset(&self) -> Option<u64> {
        let at = grammar::offset_at(self.rawfunc.as_bytes())?;
        grammar::offset_value(self.rawfunc, at)
    }

    /// Whether this is an inlined function's line.
    #[inline]
    pub fn is_inlined(&self) -> bool {
        self.module == INLINED
    }

    /// What the DSO says the frame is.
    pub fn kind(&self) -> FrameKind {
        match self.module {
            INLINED => FrameKind::Inlined,
            "[unknown]" => FrameKind::Unknown,
            m if is_kernel(m) => FrameKind::Kernel,
            _ => FrameKind::User,
        }
    }
}

/// Whether a DSO is the kernel's or a kernel module's.
pub(crate) fn is_kernel(module: &str) -> bool {
    (module.starts_with('[') || module.ends_with(".ko") || is_vmlinux(module))
        && module != "[unknown]"
}

/// Whether a DSO names a `vmlinux` image (`vmlinux`, `vmlinux-6.1.0-13`).
fn is_vmlinux(module: &str) -> bool {
    module.rfind("vmlinux").is_some_and(|i| {
        module[i..]
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.' || c == '_')
    })
}

/// Unicode whitespace trim at the end, with an ASCII fast path.
#[inline]
pub fn trim_end(s: &str) -> &str {
    match s.as_bytes().last() {
        Some(&b) if b < 0x80 && !is_ascii_ws(b) => s,
        None => s,
        _ => s.trim_end(),
    }
}

/// Unicode whitespace trim at the start, with an ASCII fast path.
#[inline]
pub fn trim_start(s: &str) -> &str {
    let b = s.as_bytes();
    let mut i = 0;
    // perf pads frame addresses with runs of spaces after a tab: skip them
    // sixteen at a time.
    if b.first() == Some(&b'\t') {
        i = 1;
    }
    while let Some(block) = block16(b, i) {
        let spaces = block.eq(b' ');
        i += spaces.trailing_ones() as usize;
        if spaces != 0xffff {
            break;
        }
    }
    while i < b.len() && is_ascii_ws(b[i]) {
        i += 1;
    }
    match b.get(i) {
        // `i` is at an ASCII byte, hence a char boundary.
        Some(&c) if c < 0x80 => &s[i..],
        None => &s[i..],
        _ => s[i..].trim_start(),
    }
}

/// Whether a line starts the way perf starts frame lines and never a
/// sample header: with a tab.
#[inline]
pub(crate) fn starts_like_a_frame(line: &str) -> bool {
    line.as_bytes().first() == Some(&b'\t')
}

/// The ASCII characters that `char::is_whitespace` accepts (note: includes
/// vertical tab, unlike `u8::is_ascii_whitespace`).
#[inline]
pub fn is_ascii_ws(b: u8) -> bool {
    // One shift and mask instead of a chain of compares: bits 9-13 and 32.
    const WS: u64 =
        (1 << b'\t') | (1 << b'\n') | (1 << 0x0B) | (1 << 0x0C) | (1 << b'\r') | (1 << b' ');
    b <= b' ' && (WS >> b) & 1 == 1
}

/// The time stamp of a header line, the first word that is
/// `SECONDS.FRACTION:` (one to nine decimals), in nanoseconds.
pub fn time_ns(header: &str) -> Option<u64> {
    grammar::line_time_ns(header)
}

/// Where the text after a frame line's address starts: the byte after the
/// first space (or simpleperf's tab) that follows the left-trimmed address
/// token. `None` when nothing ends the token.
/// A line laid out the way perf prints it (a tab, the address
/// right-aligned in 16 columns, a space) is recognised with one 16-byte
/// check before the grammar is asked.
#[inline]
pub(crate) fn after_address(line: &str) -> Option<usize> {
    standard_frame_rest(line.as_bytes()).or_else(|| grammar::after_address(line))
}

/// [`after_address`] for perf's own layout; `None` for any other.
#[inline]
fn standard_frame_rest(b: &[u8]) -> Option<usize> {
    if b.len() < 19 || b[0] != b'\t' || b[17] != b' ' {
        return None;
    }
    let field = Block16::load(&b[1..17]);
    let spaces = field.eq(b' ');
    // Spaces, then at least one byte that is not whitespace, up to the
    // space at 17: the address token ends exactly there.
    let layout =
        spaces | field.graphic() == 0xffff && spaces & (spaces + 1) == 0 && spaces != 0xffff;
    layout.then_some(18)
}

/// The length of the run of ASCII hex digits that ends at `b[..end]`'s end
/// (the frame-line cache's key cuts a `+0x` offset with it; the same cut
/// as [`strip_offset`], sixteen bytes at a time).
#[inline]
pub(crate) fn hex_run_back(b: &[u8], end: usize) -> usize {
    if end >= 16 {
        let hex = Block16::load(&b[end - 16..end]).hex_digits();
        let run = (hex << 16).leading_ones() as usize;
        if run < 16 {
            return run;
        }
    }
    b[..end]
        .iter()
        .rev()
        .take_while(|c| c.is_ascii_hexdigit())
        .count()
}

/// Parses a header line exactly as inferno 0.12.8 does.
pub fn parse_header_compat(line: &str) -> Option<Header<'_>> {
    grammar::header_compat(line)
}

/// Parses a header line with inferno's mistakes fixed: negative ids, event
/// names containing colons (the event ends at the first `:` followed by
/// whitespace or the end of the line), and everything after that colon
/// returned as `trailing`; Android simpleperf's header when the line has
/// no id word.
#[inline]
pub fn parse_header_fixed(line: &str) -> Option<Header<'_>> {
    match header_fast::parse(line) {
        Some(parsed) => parsed,
        None => grammar::header_fixed(line),
    }
}

/// The header line of Android simpleperf's perf-script text
/// (`report_sample.py`, which the Firefox profiler imports):
/// `COMM\tTID [CPU] SECS.USECS:\t\tPERIOD EVENT:`. A tab ends the comm
/// (which may contain spaces), only the thread id is printed, and tabs
/// separate the time from the period.
pub fn parse_header_simpleperf(line: &str) -> Option<Header<'_>> {
    grammar::header_simpleperf(line)
}

/// Parses a frame line exactly as inferno 0.12.8 does (the line must already
/// be trimmed at the end).
pub fn parse_frame_compat(line: &str) -> Option<FrameLine<'_>> {
    grammar::frame_compat(line)
}

/// Parses a frame line, also accepting DSO paths with spaces (the DSO is the
/// last ` (` ... `)` group of the line) and simpleperf's tab after the
/// address.
#[inline]
pub fn parse_frame_fixed(line: &str) -> Option<FrameLine<'_>> {
    grammar::frame_fixed(line)
}

/// Strips a `+0xHEX` symbol offset, if the text after the last `+0x` is all
/// hex digits (an empty run counts, as in inferno).
#[inline]
pub fn strip_offset(rawfunc: &str) -> &str {
    match grammar::offset_at(rawfunc.as_bytes()) {
        Some(at) => &rawfunc[..at],
        None => rawfunc,
    }
}

/// The event name without a trailing perf modifier suffix (`cycles:u`,
/// `cpu-clock:ppp` -> `cycles`, `cpu-clock`). Tracepoint names keep their
/// colon (`syscalls:sys_enter_openat`).
pub fn event_base(event: &str) -> &str {
    if let Some(i) = event.rfind(':') {
        let suffix = &event[i + 1..];
        if !suffix.is_empty() && suffix.bytes().all(|b| b"ukhpPGHISDWeb".contains(&b)) {
            return &event[..i];
        }
    }
    event
}

/// The warning for text whose samples carry no call graph: `flat` of
/// `samples` had their one frame on the header line (`perf record`
/// without `-g`), so their stacks are the sampled function alone.
pub fn no_call_graph_warning(flat: u64, samples: u64) -> String {
    format!(
        "{flat} of {samples} sample(s) have no call graph (recorded without `perf record -g`): \
         their stacks are the sampled function alone, without callers; record with \
         `perf record -g` (or `--call-graph dwarf`)"
    )
}

/// What the summed periods of `event`'s samples count, the name a total
/// of them is shown with: `ns` for the software clocks (`cpu-clock`,
/// `task-clock`: their periods are nanoseconds of CPU), the event's base
/// name otherwise (`cycles`).
pub fn period_unit(event: &str) -> &str {
    let base = event_base(event);
    if base.ends_with("-clock") {
        "ns"
    } else {
        base
    }
}

/// What text that holds no `perf script` sample looks like, from a few of
/// its lines: `(description, what to run instead)`.
pub fn describe_non_samples(lines: &[&str]) -> (&'static str, &'static str) {
    let lines: Vec<&str> = lines
        .iter()
        .map(|l| l.trim())
        .filter(|l| !l.is_empty())
        .collect();
    let folded = |l: &&str| {
        l.rsplit_once(' ')
            .is_some_and(|(stack, n)| !stack.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    };
    let report = |l: &&str| {
        l.split_whitespace()
            .next()
            .is_some_and(|w| w.ends_with('%') && w[..w.len() - 1].parse::<f64>().is_ok())
    };
    if lines.is_empty() {
        return ("empty text", "pass the text that `perf script` prints");
    }
    if lines.iter().all(folded) {
        return (
            "folded stacks (`frame;frame;... count`)",
            "draw them with `jobprof render FILE` (or compare two with `jobprof diff`)",
        );
    }
    if lines.iter().any(report) {
        return (
            "`perf report` output",
            "fold what `perf script -i perf.data` prints instead",
        );
    }
    if lines[0].starts_with('{') || lines[0].starts_with('[') {
        return (
            "JSON (a speedscope or Chrome trace profile?)",
            "jobprof folds `perf script` text; open JSON profiles in their own viewer",
        );
    }
    (
        "text that has neither sample headers nor frame lines",
        "pass the text that `perf script` prints (or Android simpleperf's report_sample.py)",
    )
}

#[cfg(test)]
mod tests;
