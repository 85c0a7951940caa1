//! The hand-written line parsers that [`super::grammar`]'s nom parsers
//! replaced, kept for the tests alone: the property tests hold the nom
//! grammar to them on generated lines and on every line of the fixtures.
//! They give no stamp in a [`Header`] (the grammar adds it).

#![allow(dead_code)]

use super::{is_ascii_ws, trim_end, trim_start, FrameLine, Header};
use crate::text::bytes::rfind_byte;

/// The first `needle` in `hay[from..]`.
fn find_byte(hay: &[u8], from: usize, needle: u8) -> Option<usize> {
    memchr::memchr(needle, &hay[from..]).map(|i| i + from)
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

/// Where the text after a frame line's address starts: the byte after the
/// first space that follows the (left-trimmed) address token. `None` when
/// no space follows it. (The 16-byte check of perf's own layout that
/// came before the trim is left out: old tests held it to this.)
#[inline]
pub(crate) fn after_address(line: &str) -> Option<usize> {
    let trimmed = trim_start(line);
    let end = address_end(trimmed.as_bytes())?;
    Some(line.len() - trimmed.len() + end + 1)
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
        stamp: "",
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
    parse_header_fixed_general(line)
}

/// [`parse_header_fixed`] for any line: the reference the fast path must
/// agree with, and what runs where the fast path declines.
fn parse_header_fixed_general(line: &str) -> Option<Header<'_>> {
    let Some((comm, pid, tid, end)) = header_ids(line, true) else {
        return parse_header_simpleperf(line);
    };
    let rest = &line[end..];
    let mut header = Header::of_ids(comm, pid, tid);
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
        stamp: "",
        period,
        event: (!event.is_empty()).then_some(event),
        trailing: None,
    })
}

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
