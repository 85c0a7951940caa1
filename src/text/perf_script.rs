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
//! This module works on one line at a time and allocates nothing. It knows
//! nothing about samples, stacks, folding or files.

use crate::text::bytes::{block16, find_byte, rfind_byte, Block16};

/// The fields of a sample header line that folding needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header<'a> {
    /// The command (thread) name, trimmed; may contain spaces.
    pub comm: &'a str,
    /// The process id, or `?` when the line carries only one id.
    pub pid: &'a str,
    /// The thread id (or the only id printed).
    pub tid: &'a str,
    /// The sample period, when printed.
    pub period: Option<u64>,
    /// The event name as the parser understands it (`None` when the line has
    /// no event field).
    pub event: Option<&'a str>,
    /// Text after the event name on the same line (a single frame printed on
    /// the header line, or tracepoint arguments); trimmed, never empty.
    pub trailing: Option<&'a str>,
}

/// The `SECONDS.FRACTION:` time of a sample header, in nanoseconds.
pub fn time_ns(header: &str) -> Option<u64> {
    header.split_ascii_whitespace().find_map(|tok| {
        let t = tok.strip_suffix(':')?;
        let (s, f) = t.split_once('.')?;
        if s.is_empty() || f.is_empty() || f.len() > 9 {
            return None;
        }
        if !s.bytes().chain(f.bytes()).all(|b| b.is_ascii_digit()) {
            return None;
        }
        let secs: u64 = s.parse().ok()?;
        let frac: u64 = f.parse().ok()?;
        let frac_ns = frac * 10u64.pow(9 - f.len() as u32);
        secs.checked_mul(1_000_000_000)?.checked_add(frac_ns)
    })
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

/// Where the text after a frame line's address starts: the byte after the
/// first space that follows the (left-trimmed) address token. `None` when
/// no space follows it. A line laid out the way perf prints it (a tab, the
/// address right-aligned in 16 columns, a space) is recognised with one
/// 16-byte check, without the trimming and searching byte loops.
#[inline]
pub(crate) fn after_address(line: &str) -> Option<usize> {
    standard_frame_rest(line.as_bytes()).or_else(|| {
        let trimmed = trim_start(line);
        let end = address_end(trimmed.as_bytes())?;
        Some(line.len() - trimmed.len() + end + 1)
    })
}

/// Where the (left-trimmed) address token of a frame line ends: at the
/// first space, or at a tab (simpleperf's `ADDR\tSYMBOL (DSO)` layout).
#[inline]
fn address_end(b: &[u8]) -> Option<usize> {
    let space = find_byte(b, 0, b' ');
    let upto = space.unwrap_or(b.len());
    match b[..upto].iter().position(|&c| c == b'\t') {
        Some(tab) => Some(tab),
        None => space,
    }
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

/// Whether a line starts the way perf starts frame lines and never a
/// sample header: with a tab.
#[inline]
pub(crate) fn starts_like_a_frame(line: &str) -> bool {
    line.as_bytes().first() == Some(&b'\t')
}

/// The length of the run of ASCII hex digits that ends at `b[..end]`'s end.
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

/// The ASCII characters that `char::is_whitespace` accepts (note: includes
/// vertical tab, unlike `u8::is_ascii_whitespace`).
#[inline]
pub fn is_ascii_ws(b: u8) -> bool {
    // One shift and mask instead of a chain of compares: bits 9-13 and 32.
    const WS: u64 =
        (1 << b'\t') | (1 << b'\n') | (1 << 0x0B) | (1 << 0x0C) | (1 << b'\r') | (1 << b' ');
    b <= b' ' && (WS >> b) & 1 == 1
}

/// Finds the comm/pid/tid part of a header line, inferno's way: the first
/// all-digit word (optionally `PID/TID`) after the first word, followed by a
/// space, ends the comm. With `allow_negative`, `-1` counts as digits
/// (exiting tasks print `:-1    -1`). Returns `(comm, pid, tid, index after
/// the id word's space)`. Jumps from space to space (with [`find_byte`])
/// rather than keeping a per-byte state machine.
fn header_ids(line: &str, allow_negative: bool) -> Option<(&str, &str, &str, usize)> {
    let b = line.as_bytes();
    let n = b.len();
    // The first word is never the id word.
    let mut i = find_byte(b, 0, b' ').unwrap_or(n);
    // `b[i]` is a space: look at the word after it.
    while i < n {
        let start = i + 1;
        let mut j = start;
        let mut slash: Option<usize> = None;
        let mut digits = true;
        while j < n && b[j] != b' ' {
            let c = b[j];
            if c == b'/' {
                slash = Some(j);
            } else if !c.is_ascii_digit()
                && !(allow_negative && c == b'-' && (j == start || slash == Some(j - 1)))
            {
                digits = false;
            }
            j += 1;
        }
        if j == n {
            return None; // an id word is always followed by a space
        }
        if digits && j > start {
            let (pid, tid) = match slash {
                Some(k) => (&line[start..k], &line[k + 1..j]),
                None => ("?", &line[start..j]),
            };
            let comm = trim_start(trim_end(&line[..start - 1]));
            return Some((comm, pid, tid, j + 1));
        }
        i = j;
    }
    None
}

/// Parses a header line exactly as inferno 0.12.8 does.
pub fn parse_header_compat(line: &str) -> Option<Header<'_>> {
    let (comm, pid, tid, end) = header_ids(line, false)?;
    let rest = &line[end..];
    let mut by_colons = rest.splitn(3, ':').skip(1);
    let mut period = None;
    let event = by_colons.next().and_then(|period_and_event| {
        let mut it = period_and_event.rsplit(' ');
        let name = it.next();
        // str::parse, as inferno: a leading `+` is accepted.
        period = it.next().and_then(|p| p.parse::<u64>().ok());
        name
    });
    let trailing = match (event, by_colons.next()) {
        (Some(_), Some(post)) => {
            let start = post.find([':', ' ']).map(|i| i + 1).unwrap_or(0);
            let t = post[start..].trim();
            (!t.is_empty()).then_some(t)
        }
        _ => None,
    };
    Some(Header {
        comm,
        pid,
        tid,
        period,
        event,
        trailing,
    })
}

/// Parses a header line with inferno's mistakes fixed: negative ids, event
/// names containing colons (the event ends at the first `:` followed by
/// whitespace or the end of the line), and everything after that colon
/// returned as `trailing`.
#[inline]
pub fn parse_header_fixed(line: &str) -> Option<Header<'_>> {
    match header_fast::parse(line) {
        Some(parsed) => parsed,
        None => parse_header_fixed_general(line),
    }
}

/// [`parse_header_fixed`] for any line: the reference the fast path must
/// agree with, and what runs where the fast path declines.
fn parse_header_fixed_general(line: &str) -> Option<Header<'_>> {
    let Some((comm, pid, tid, end)) = header_ids(line, true) else {
        return parse_header_simpleperf(line);
    };
    let rest = &line[end..];
    let mut header = Header {
        comm,
        pid,
        tid,
        period: None,
        event: None,
        trailing: None,
    };
    // These fields are a few bytes long: [`find_byte`], not memchr (see
    // there for why).
    let r = rest.as_bytes();
    // Skip the time stamp (or whatever precedes the first colon).
    let Some(k) = find_byte(r, 0, b':') else {
        return Some(header);
    };
    let from = k + 1;
    let mut end = r.len();
    let mut t = from;
    while let Some(c) = find_byte(r, t, b':') {
        if c + 1 == r.len() || is_ascii_ws(r[c + 1]) {
            let tr = trim_start(trim_end(&rest[c + 1..]));
            header.trailing = (!tr.is_empty()).then_some(tr);
            end = c;
            break;
        }
        t = c + 1;
    }
    let pe = trim_end(&rest[from..end]);
    let p = pe.as_bytes();
    let e = rfind_byte(p, p.len(), b' ').map_or(0, |i| i + 1);
    let event = &pe[e..];
    header.event = (!event.is_empty()).then_some(event);
    if e > 0 {
        let s = rfind_byte(p, e - 1, b' ').map_or(0, |i| i + 1);
        header.period = parse_digits(&p[s..e - 1]);
    }
    Some(header)
}

/// The header line of Android simpleperf's perf-script text
/// (`report_sample.py`, which the Firefox profiler imports):
/// `COMM\tTID [CPU] SECS.USECS:\t\tPERIOD EVENT:`. A tab ends the comm
/// (which may contain spaces), only the thread id is printed, and tabs
/// separate the time from the period. Strict: the CPU in brackets and the
/// time's colon must be there, so a frame line never passes for it.
pub fn parse_header_simpleperf(line: &str) -> Option<Header<'_>> {
    let (comm, rest) = line.split_once('\t')?;
    let (tid, rest) = rest.split_once(' ')?;
    let cpu = rest.strip_prefix('[')?;
    let (cpu, rest) = cpu.split_once("] ")?;
    if tid.is_empty()
        || !tid.bytes().all(|b| b.is_ascii_digit())
        || cpu.is_empty()
        || !cpu.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let (time, rest) = rest.split_once(':')?;
    if time.is_empty() || !time.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return None;
    }
    let rest = rest.trim();
    let rest = rest.strip_suffix(':').unwrap_or(rest);
    let (period, event) = match rest.split_once(' ') {
        Some((p, e)) => (parse_digits(p.as_bytes()), e.trim()),
        None => (None, rest),
    };
    Some(Header {
        comm: trim_start(trim_end(comm)),
        pid: "?",
        tid,
        period,
        event: (!event.is_empty()).then_some(event),
        trailing: None,
    })
}

/// [`parse_header_fixed`] in one pass for the usual header line: 16 to 64
/// bytes, printable ASCII only (no tab or other control byte, so the only
/// whitespace is `' '`). Every question the general parser answers with a
/// byte loop (where the next space is, whether a word is all digits, the
/// last colon followed by a space...) becomes a bit operation on masks of
/// the line's spaces, colons, digits, slashes and dashes, built sixteen
/// bytes at a time (`crate::text::bytes`). A header costs about half of what the general
/// parser spends, and headers are a fifth of the lines of a capture.
///
/// `parse` returns `None` when it declines (another length, a control or
/// non-ASCII byte), never a different answer: a property test holds it to
/// the general parser.
mod header_fast;

/// An unsigned decimal number made of ASCII digits only (no sign), `None`
/// when empty or too large.
#[inline]
fn parse_digits(d: &[u8]) -> Option<u64> {
    if d.is_empty() {
        return None;
    }
    let mut v: u64 = 0;
    for &c in d {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add((c - b'0') as u64)?;
    }
    Some(v)
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

/// Parses a frame line exactly as inferno 0.12.8 does (the line must already
/// be trimmed at the end).
pub fn parse_frame_compat(line: &str) -> Option<FrameLine<'_>> {
    let mut parts = trim_start(line).splitn(2, ' ');
    let pc = trim_end(parts.next()?);
    let mut parts = parts.next()?.rsplitn(2, ' ');
    let module = parts.next()?;
    if !module.starts_with('(') || !module.ends_with(')') || module.len() < 2 {
        return None;
    }
    let module = &module[1..module.len() - 1];
    let rawfunc = match parts.next()?.trim() {
        "" => " ",
        s => s,
    };
    Some(FrameLine {
        pc,
        rawfunc,
        module,
    })
}

/// Parses a frame line, also accepting DSO paths with spaces (the DSO is the
/// last ` (` ... `)` group of the line) and simpleperf's tab after the
/// address.
pub fn parse_frame_fixed(line: &str) -> Option<FrameLine<'_>> {
    let line = trim_start(line);
    let end = address_end(line.as_bytes())?;
    let (pc, rest) = (trim_end(&line[..end]), &line[end + 1..]);
    if !rest.ends_with(')') {
        return None;
    }
    // `rest` is `SYMBOL (DSO)` or ` (DSO)`; a DSO may contain spaces.
    let open = if rest.starts_with('(') && !rest[1..].contains(" (") {
        0
    } else {
        rest.rfind(" (")? + 1
    };
    let module = &rest[open + 1..rest.len() - 1];
    let rawfunc = match rest[..open].trim() {
        "" => " ",
        s => s,
    };
    Some(FrameLine {
        pc,
        rawfunc,
        module,
    })
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

/// Strips a `+0xHEX` symbol offset, if the text after the last `+0x` is all
/// hex digits (an empty run counts, as in inferno).
#[inline]
pub fn strip_offset(rawfunc: &str) -> &str {
    if let Some(i) = rawfunc.rfind("+0x") {
        if rawfunc[i + 3..].bytes().all(|b| b.is_ascii_hexdigit()) {
            return &rawfunc[..i];
        }
    }
    rawfunc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_per_process() {
        let h = parse_header_compat("java 25607 4794564.109216: 1 cycles:").unwrap();
        assert_eq!((h.comm, h.pid, h.tid), ("java", "?", "25607"));
        assert_eq!(
            (h.period, h.event, h.trailing),
            (Some(1), Some("cycles"), None)
        );
    }

    #[test]
    fn header_pid_tid_cpu_and_spaces_in_comm() {
        let line = "V8 WorkerThread 24636/25607 [000] 94564.109216:     257597 cycles:uppp:";
        let h = parse_header_compat(line).unwrap();
        assert_eq!(
            (h.comm, h.pid, h.tid),
            ("V8 WorkerThread", "24636", "25607")
        );
        assert_eq!((h.period, h.event), (Some(257597), Some("cycles")));
        assert_eq!(h.trailing, None);
        let f = parse_header_fixed(line).unwrap();
        assert_eq!(f.event, Some("cycles:uppp"));
        assert_eq!(event_base(f.event.unwrap()), "cycles");
    }

    #[test]
    fn header_with_single_frame() {
        let line = "false 64414 20110.539270:      34467 cycles:u:  ffffffff9aa3c8de [unknown] ([unknown])";
        let c = parse_header_compat(line).unwrap();
        assert_eq!(c.trailing, Some("ffffffff9aa3c8de [unknown] ([unknown])"));
        let f = parse_header_fixed(line).unwrap();
        assert_eq!(f.trailing, c.trailing);
    }

    #[test]
    fn tracepoint_event_names() {
        let line =
            "cat 1234 [001] 10.5: 1 syscalls:sys_enter_openat: dfd: 0xffffff9c, filename: 0x7f";
        let c = parse_header_compat(line).unwrap();
        assert_eq!(c.event, Some("syscalls"), "inferno's known mistake");
        assert!(c.trailing.is_some());
        let f = parse_header_fixed(line).unwrap();
        assert_eq!(f.event, Some("syscalls:sys_enter_openat"));
        assert_eq!(
            event_base("syscalls:sys_enter_openat"),
            "syscalls:sys_enter_openat"
        );
        assert_eq!(f.trailing, Some("dfd: 0xffffff9c, filename: 0x7f"));
    }

    #[test]
    fn exiting_task_ids() {
        let line = ":-1    -1 [001] 12.5:     1001 cpu-clock:";
        // inferno takes the period for the id and the rest for the comm.
        let c = parse_header_compat(line).unwrap();
        assert_eq!((c.comm, c.tid), (":-1    -1 [001] 12.5:", "1001"));
        let f = parse_header_fixed(line).unwrap();
        assert_eq!((f.comm, f.pid, f.tid), (":-1", "?", "-1"));
        assert_eq!(f.event, Some("cpu-clock"));
    }

    #[test]
    fn frame_lines() {
        let f =
            parse_frame_compat("\t7f533952bc77 _dl_check_map_versions+0x597 (/usr/lib/ld-2.28.so)")
                .unwrap();
        assert_eq!(f.pc, "7f533952bc77");
        assert_eq!(strip_offset(f.rawfunc), "_dl_check_map_versions");
        assert_eq!(f.module, "/usr/lib/ld-2.28.so");
        let e = parse_frame_compat("  7f1e2215d058  (/lib/libc-2.15.so)").unwrap();
        assert_eq!(e.rawfunc, " ");
        assert_eq!(parse_frame_compat("garbage"), None);
    }

    #[test]
    fn non_sample_text_is_described() {
        assert!(describe_non_samples(&["a;b;c 10", "a;b 2"])
            .1
            .contains("jobprof render"));
        assert!(describe_non_samples(&["main 7"])
            .0
            .starts_with("folded stacks"));
        assert_eq!(
            describe_non_samples(&["    45.10%  worker  libc.so.6  [.] memcpy"]).0,
            "`perf report` output"
        );
        assert!(describe_non_samples(&["{\"shared\": {}}"])
            .0
            .starts_with("JSON"));
        assert!(describe_non_samples(&["hello world"])
            .0
            .starts_with("text that"));
    }

    #[test]
    fn simpleperf_lines() {
        let line = "RenderThread\t8012 [003] 3125.047371:\t\t250000 cpu-clock:";
        let h = parse_header_fixed(line).unwrap();
        assert_eq!((h.comm, h.pid, h.tid), ("RenderThread", "?", "8012"));
        assert_eq!((h.period, h.event), (Some(250000), Some("cpu-clock")));
        let spaced = "Binder thread #2\t77 [000] 1.000001:\t\t1 cpu-cycles:";
        assert_eq!(parse_header_fixed(spaced).unwrap().comm, "Binder thread #2");
        let frame =
            "    7f8a2b4c10\tandroid::Looper::pollOnce(int, int*) (/system/lib64/libutils.so)";
        let f = parse_frame_fixed(frame).unwrap();
        assert_eq!(f.pc, "7f8a2b4c10");
        assert_eq!(f.rawfunc, "android::Looper::pollOnce(int, int*)");
        assert_eq!(f.module, "/system/lib64/libutils.so");
        assert_eq!(&frame[after_address(frame).unwrap()..], &frame[15..]);
        let kernel = "ffffffc0100a1b2c\tel0_svc_handler ([kernel.kallsyms])";
        assert_eq!(
            parse_frame_fixed(kernel).unwrap().rawfunc,
            "el0_svc_handler"
        );
        // Frame lines never pass for simpleperf headers.
        assert_eq!(parse_header_simpleperf(kernel), None);
        assert_eq!(parse_header_simpleperf(frame), None);
        assert_eq!(parse_header_simpleperf("a\t12 [x] 1.0:\t\t1 e:"), None);
        // perf's own frame lines are parsed as before.
        let perf = "\t55d0 do_work+0x10 (/opt/bin/worker)";
        assert_eq!(parse_frame_fixed(perf).unwrap().pc, "55d0");
    }

    #[test]
    fn frame_dso_with_spaces() {
        let line = "\t55d0 do_work+0x10 (/opt/my app/bin/worker)";
        assert_eq!(parse_frame_compat(line), None);
        let f = parse_frame_fixed(line).unwrap();
        assert_eq!(
            (f.rawfunc, f.module),
            ("do_work+0x10", "/opt/my app/bin/worker")
        );
        let g = parse_frame_fixed("\t55d0 f(int) (/lib/x.so)").unwrap();
        assert_eq!((g.rawfunc, g.module), ("f(int)", "/lib/x.so"));
    }

    #[test]
    fn offsets() {
        assert_eq!(strip_offset("foo+0x1f"), "foo");
        assert_eq!(strip_offset("foo+0x"), "foo");
        assert_eq!(strip_offset("foo+0xzz"), "foo+0xzz");
        assert_eq!(strip_offset("foo"), "foo");
    }

    /// Header-shaped text: the pieces the fast path gives meaning to
    /// (spaces, colons, digits, slashes, dashes), the ones that make it
    /// decline (tabs, non-ASCII), at every length around its 16..=64 window.
    fn header_like() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        let piece = prop::sample::select(vec![
            " ",
            " ",
            "  ",
            "    ",
            ":",
            ": ",
            "/",
            "-",
            "-1",
            "1",
            "42",
            "12345678",
            "123456789",
            "99999999999999999999",
            "7/8",
            "[000]",
            "123.456:",
            "cpu-clock",
            "cycles:u",
            "sys:enter",
            "x",
            "V8 Worker",
            "\t",
            "é",
            "+",
            ".",
            "0x7f",
        ]);
        prop::collection::vec(piece, 0..24).prop_map(|v| v.concat())
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig {
            cases: 20_000, ..proptest::prelude::ProptestConfig::default()
        })]

        #[test]
        fn fast_header_parse_agrees_with_the_general_parser(line in header_like()) {
            proptest::prop_assert_eq!(
                parse_header_fixed(&line),
                parse_header_fixed_general(&line),
                "line {:?}", line
            );
        }
    }

    proptest::proptest! {
        #[test]
        fn trims_agree_with_std(
            pieces in proptest::collection::vec(
                proptest::sample::select(vec![" ", "        ", "\t", "\u{a0}", "\u{2003}", "x", "é", "7f00"]),
                0..30,
            )
        ) {
            let s = pieces.concat();
            proptest::prop_assert_eq!(trim_start(&s), s.trim_start());
            proptest::prop_assert_eq!(trim_end(&s), s.trim_end());
        }

    }

    proptest::proptest! {
        #[test]
        fn after_address_finds_what_trim_and_search_find(
            pieces in proptest::collection::vec(
                proptest::sample::select(vec![" ", "   ", "\t", "7f", "ffffffff81000000", "\u{a0}", "é", "\u{7f}", "x", "(", "+0x1f"]),
                0..12,
            ),
            // Address columns close to perf's 16, so that the one-block
            // check is taken, and declined, often.
            columns in proptest::collection::vec(
                proptest::sample::select(vec![' ', ' ', ' ', 'f', '7', 'x', '\t', '\u{7f}', '\u{a0}']),
                15..=17,
            ),
            perf_layout in proptest::bool::ANY,
        ) {
            let line = match perf_layout {
                true => format!("\t{} {}", columns.iter().collect::<String>(), pieces.concat()),
                false => format!("\t{}", pieces.concat()),
            };
            let trimmed = trim_start(&line);
            // The address ends at the first space, or tab (simpleperf).
            let general = trimmed.find([' ', '\t']).map(|end| line.len() - trimmed.len() + end + 1);
            proptest::prop_assert_eq!(after_address(&line), general, "line {:?}", line);
        }

        #[test]
        fn hex_run_back_counts_like_a_byte_loop(
            b in proptest::collection::vec(proptest::sample::select(vec![b'0', b'9', b'a', b'F', b'g', b'x', b' ', 0xc3]), 0..40),
            end in 0usize..40,
        ) {
            let end = end.min(b.len());
            let want = b[..end].iter().rev().take_while(|c| c.is_ascii_hexdigit()).count();
            proptest::prop_assert_eq!(hex_run_back(&b, end), want);
        }
    }

    #[test]
    fn standard_frame_layout() {
        assert_eq!(
            standard_frame_rest(b"\t    7ffe6eedba65 [unknown] ([unknown])"),
            Some(18)
        );
        assert_eq!(
            standard_frame_rest(b"\tffffffff81b50d8f f+0x16f ([kernel.kallsyms])"),
            Some(18)
        );
        // Other layouts take the general path.
        assert_eq!(standard_frame_rest(b"\t  7f52 f (/x/y/z/long/path)"), None);
        assert_eq!(
            standard_frame_rest(b"\t  7ffe6 eedba65 f ([unknown])"),
            None
        );
        assert_eq!(
            standard_frame_rest(b"\t                 f ([unknown])"),
            None
        );
    }

    #[test]
    fn fast_header_parse_takes_usual_headers() {
        for line in [
            "xz 14733   503.949704:    1001001 cpu-clock:",
            "rustc 23637 [000]   687.980491:    1001001 cpu-clock:",
            "V8 WorkerThread 24636/25607 [000] 94564.10:  257597 cycles:u:",
            ":-1    -1 [001] 12.5:     1001 cpu-clock:",
            "cat 1234 [001] 10.5: 1 syscalls:sys_enter_openat: dfd: 0x9c",
        ] {
            let fast = header_fast::parse(line);
            assert_eq!(fast, Some(parse_header_fixed_general(line)), "{line}");
        }
        let h = parse_header_fixed("a 1 2: 12345678 e:").unwrap();
        assert_eq!(h.period, Some(12_345_678));
        let h = parse_header_fixed("a 1 2: 123456789 e:").unwrap();
        assert_eq!(h.period, Some(123_456_789));
        let h = parse_header_fixed("a 1 2:         09 e:").unwrap();
        assert_eq!(h.period, Some(9));
    }

    #[test]
    fn id_words_end_the_comm() {
        // The id word is `-?\d+` or `-?\d+/-?\d+` (negative only in the
        // fixed parser); a word with anything else in it belongs to the comm.
        for (line, ids) in [
            ("a 123 1.0: 1 e:", ("?", "123")),
            ("a 12/34 1.0: 1 e:", ("12", "34")),
            ("a 1a 7 1.0: 1 e:", ("?", "7")),
        ] {
            for h in [parse_header_compat(line), parse_header_fixed(line)] {
                assert_eq!(h.map(|h| (h.pid, h.tid)), Some(ids), "{line}");
            }
        }
        let h = parse_header_fixed("a -1/-1 1.0: 1 e:").unwrap();
        assert_eq!((h.comm, h.pid, h.tid), ("a", "-1", "-1"));
        assert_eq!(
            parse_header_fixed("a -1 1.0: 1 e:").map(|h| h.tid),
            Some("-1")
        );
        assert_eq!(parse_header_fixed("a b 1x.0: e:"), None);
    }
}
