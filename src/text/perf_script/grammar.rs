//! The `perf script` line grammar as nom parsers: a sample header line
//! (`COMM [PID/]TID [CPU] SECS.FRAC: [PERIOD] EVENT: [TRAILING]`, Android
//! simpleperf's tabbed variant, and inferno 0.12.8's reading of it for
//! `--compat inferno`), a frame line (`ADDR SYMBOL[+0xOFF] (DSO)`, both
//! readings), a `SECS.FRAC` time stamp and a `+0xOFF` symbol offset.
//!
//! Parsers take one whole line (complete input, no newline) as bytes and
//! hand back slices of it: nothing is copied or allocated. The parent
//! module's [`Header`] and [`FrameLine`] are what they return; the text
//! slices are cut from the line's `&str` at the ASCII bytes the grammar
//! splits on, so they stay valid UTF-8 without a check. Right-anchored
//! parts (the last ` (` of a frame line, the last space before the event
//! name) are found with memchr's reverse searches, the line splitting the
//! grammar leaves to it.

use memchr::memmem;
use nom::bytes::complete::{tag, take_till, take_while, take_while1, take_while_m_n};
use nom::character::complete::{char, digit0, digit1, hex_digit1};
use nom::combinator::{all_consuming, eof, not, opt, peek, recognize, rest, verify};
use nom::multi::many0_count;
use nom::sequence::{preceded, terminated};
use nom::{IResult, Parser};

use crate::text::bytes::rfind_byte;

use super::{is_ascii_ws, trim_end, trim_start, FrameLine, Header};

/// A parser's result over a line's bytes; errors carry nothing (a line
/// either parses or does not, and the callers only ask which).
type Res<'a, T> = IResult<&'a [u8], T, ()>;

/// The text of `part`, a slice of `line`'s bytes, as a slice of `line`.
/// `None` only if `part` were not cut at char boundaries, which the
/// grammar (it splits at ASCII bytes) never does.
#[inline]
fn text<'a>(line: &'a str, part: &[u8]) -> Option<&'a str> {
    let at = (part.as_ptr() as usize).wrapping_sub(line.as_ptr() as usize);
    line.get(at..at + part.len())
}

/// A word ends at a space (only `' '`: perf pads with spaces, and a tab is
/// part of a word here, as in inferno).
#[inline]
fn word(i: &[u8]) -> Res<'_, &[u8]> {
    take_till(|b| b == b' ').parse(i)
}

/// One id of an id word: digits, after a `-` when `negative` (exiting
/// tasks print `-1`).
#[inline]
fn id_part(negative: bool) -> impl FnMut(&[u8]) -> Res<'_, &[u8]> {
    move |i| {
        if negative {
            recognize((opt(char('-')), digit0)).parse(i)
        } else {
            digit0(i)
        }
    }
}

/// An id word, `TID` or `PID/TID` (more slashes: the last one splits),
/// not empty, followed by the space that ends it (consumed).
#[inline]
fn id_word(negative: bool) -> impl FnMut(&[u8]) -> Res<'_, &[u8]> {
    move |i| {
        terminated(
            verify(
                recognize((
                    id_part(negative),
                    many0_count((char('/'), id_part(negative))),
                )),
                |w: &[u8]| !w.is_empty(),
            ),
            char(' '),
        )
        .parse(i)
    }
}

/// What [`ids`] reads: comm, pid (when printed) and tid.
type Ids<'a> = (&'a [u8], Option<&'a [u8]>, &'a [u8]);

/// `COMM ID-WORD ` at the start of a header line: the comm is every word
/// up to the first id word after the first word (so it may hold spaces).
/// Returns `(comm, pid, tid)`, the comm untrimmed and no pid when the
/// word has no slash, with what follows the id word.
#[inline]
fn ids(negative: bool) -> impl FnMut(&[u8]) -> Res<'_, Ids<'_>> {
    move |i| {
        let at_id = |i| preceded(char(' '), id_word(negative)).parse(i);
        let (rest, (comm, id)) = (
            recognize((word, many0_count(preceded(not(at_id), (char(' '), word))))),
            at_id,
        )
            .parse(i)?;
        let (pid, tid) = match rfind_byte(id, id.len(), b'/') {
            Some(k) => (Some(&id[..k]), &id[k + 1..]),
            None => (None, id),
        };
        Ok((rest, (comm, pid, tid)))
    }
}

/// An unsigned decimal number made of ASCII digits only (no sign), `None`
/// when empty, not all digits or too large.
#[inline]
pub(super) fn decimal(d: &[u8]) -> Option<u64> {
    let (_, digits) = all_consuming(digit1::<_, ()>).parse(d).ok()?;
    digits.iter().try_fold(0u64, |v, &c| {
        v.checked_mul(10)?.checked_add(u64::from(c - b'0'))
    })
}

/// A time stamp `SECS.FRAC` (one to nine decimals) in nanoseconds.
#[inline]
fn stamp(i: &[u8]) -> Res<'_, u64> {
    let (i, (secs, _, frac)) = (
        digit1,
        char('.'),
        take_while_m_n(1, 9, |b: u8| b.is_ascii_digit()),
    )
        .parse(i)?;
    let ns = || {
        let f = decimal(frac)? * 10u64.pow(9 - frac.len() as u32);
        decimal(secs)?.checked_mul(1_000_000_000)?.checked_add(f)
    };
    match ns() {
        Some(ns) => Ok((i, ns)),
        None => Err(nom::Err::Error(())),
    }
}

/// The time stamp of a line: its first word (split at ASCII whitespace)
/// that is `SECS.FRAC:`, in nanoseconds.
pub(super) fn line_time_ns(line: &str) -> Option<u64> {
    line.split_ascii_whitespace().find_map(|tok| {
        all_consuming(terminated(stamp, char(':')))
            .parse(tok.as_bytes())
            .ok()
            .map(|(_, ns)| ns)
    })
}

/// The field a header's first colon ends, `... [CPU] SECS.FRAC`: the
/// time is its last word when that is a time stamp, the CPU the word
/// before it when that is `[N]` (what precedes them belongs to a comm the
/// id word cut short, as in `sorter 2 26178/26180 [001] 1287.165407:`).
#[inline]
pub(super) fn cpu_and_time(field: &[u8]) -> (Option<u32>, Option<u64>) {
    let field = trim_ascii_spaces(field);
    let t = rfind_byte(field, field.len(), b' ').map_or(0, |i| i + 1);
    let Ok((_, time)) = all_consuming(stamp).parse(&field[t..]) else {
        return (None, None);
    };
    let before = trim_ascii_spaces(&field[..t]);
    let c = rfind_byte(before, before.len(), b' ').map_or(0, |i| i + 1);
    let cpu = all_consuming((char::<_, ()>('['), digit1, char(']')))
        .parse(&before[c..])
        .ok()
        .and_then(|(_, (_, d, _))| u32::try_from(decimal(d)?).ok());
    (cpu, Some(time))
}

/// `b` without the spaces around it.
#[inline]
fn trim_ascii_spaces(b: &[u8]) -> &[u8] {
    let start = b.iter().position(|&c| c != b' ').unwrap_or(b.len());
    let end = b.iter().rposition(|&c| c != b' ').map_or(start, |i| i + 1);
    &b[start..end.max(start)]
}

/// Up to (not into) the colon that ends the event name: the first one
/// followed by whitespace or by the end of the line.
#[inline]
fn event_field(i: &[u8]) -> Res<'_, &[u8]> {
    let ends_event = (
        char(':'),
        nom::branch::alt((eof, take_while_m_n(1, 1, is_ascii_ws))),
    );
    recognize(many0_count(nom::branch::alt((
        take_till(|b| b == b':').and_then(verify(rest, |r: &[u8]| !r.is_empty())),
        recognize((peek(not(ends_event)), char(':'))),
    ))))
    .parse(i)
}

/// The header of what [`ids`] read, the fields after the ids still unset.
#[inline]
fn ids_header<'a>(
    line: &'a str,
    comm: &[u8],
    pid: Option<&[u8]>,
    tid: &[u8],
) -> Option<Header<'a>> {
    let pid = match pid {
        Some(pid) => text(line, pid)?,
        None => "?",
    };
    Some(Header::of_ids(
        trim_start(trim_end(text(line, comm)?)),
        pid,
        text(line, tid)?,
    ))
}

/// A header line, inferno's grammar with its mistakes fixed: negative ids,
/// event names that hold colons (tracepoints), everything after the
/// event's colon as `trailing`; simpleperf's header when the line has no
/// id word.
pub(super) fn header_fixed(line: &str) -> Option<Header<'_>> {
    let b = line.as_bytes();
    let Ok((after, (comm, pid, tid))) = ids(true).parse(b) else {
        return header_simpleperf(line);
    };
    let mut header = ids_header(line, comm, pid, tid)?;
    // The time stamp (or whatever precedes the first colon).
    let Ok((fields, (stamp, _))) = (take_till(|b| b == b':'), char::<_, ()>(':')).parse(after)
    else {
        return Some(header);
    };
    header.stamp = text(line, stamp)?;
    let (after_event, pe) = event_field(fields).ok()?;
    if let Ok((t, _)) = char::<_, ()>(':').parse(after_event) {
        let t = trim_start(trim_end(text(line, t)?));
        header.trailing = (!t.is_empty()).then_some(t);
    }
    // `[PERIOD] EVENT`: the event is the last word, the period the one
    // before it when it is a number.
    let pe = trim_end(text(line, pe)?).as_bytes();
    let e = rfind_byte(pe, pe.len(), b' ').map_or(0, |i| i + 1);
    header.event = Some(text(line, &pe[e..])?).filter(|e| !e.is_empty());
    if e > 0 {
        let s = rfind_byte(pe, e - 1, b' ').map_or(0, |i| i + 1);
        header.period = decimal(&pe[s..e - 1]);
    }
    Some(header)
}

/// Android simpleperf's header (`report_sample.py`):
/// `COMM\tTID [CPU] SECS.USECS:\t\tPERIOD EVENT:`. Strict: the CPU in
/// brackets and the time's colon must be there, so a frame line never
/// passes for it.
pub(super) fn header_simpleperf(line: &str) -> Option<Header<'_>> {
    let (fields, (comm, _, tid, _, stamp, _)) = (
        take_till(|b| b == b'\t'),
        char('\t'),
        digit1,
        char(' '),
        recognize((
            char('['),
            digit1,
            tag("] "),
            take_while1(|b: u8| b.is_ascii_digit() || b == b'.'),
        )),
        char::<_, ()>(':'),
    )
        .parse(line.as_bytes())
        .ok()?;
    let fields = text(line, fields)?.trim();
    let fields = fields.strip_suffix(':').unwrap_or(fields);
    let (period, event) = match fields.split_once(' ') {
        Some((p, e)) => (decimal(p.as_bytes()), e.trim()),
        None => (None, fields),
    };
    Some(Header {
        comm: trim_start(trim_end(text(line, comm)?)),
        pid: "?",
        tid: text(line, tid)?,
        stamp: text(line, stamp)?,
        period,
        event: (!event.is_empty()).then_some(event),
        trailing: None,
    })
}

/// A header line exactly as inferno 0.12.8 reads it: ids without signs,
/// the event between the first two colons (so `syscalls:sys_enter_openat`
/// is `syscalls`), the period parsed as Rust parses a `u64` (a `+` is
/// accepted), and the header's period kept only when there is an event.
pub(super) fn header_compat(line: &str) -> Option<Header<'_>> {
    let (after, (comm, pid, tid)) = ids(false).parse(line.as_bytes()).ok()?;
    let mut header = ids_header(line, comm, pid, tid)?;
    let colon = |i| (take_till(|b| b == b':'), char::<_, ()>(':')).parse(i);
    let Ok((fields, (stamp, _))) = colon(after) else {
        return Some(header);
    };
    header.stamp = text(line, stamp)?;
    let (pe, post) = match colon(fields) {
        Ok((post, (pe, _))) => (pe, Some(post)),
        Err(_) => (fields, None),
    };
    let e = rfind_byte(pe, pe.len(), b' ').map_or(0, |i| i + 1);
    header.event = Some(text(line, &pe[e..])?);
    if e > 0 {
        let s = rfind_byte(pe, e - 1, b' ').map_or(0, |i| i + 1);
        header.period = text(line, &pe[s..e - 1])?.parse().ok();
    }
    if let Some(post) = post {
        let start = memchr::memchr2(b':', b' ', post).map_or(0, |i| i + 1);
        let t = text(line, &post[start..])?.trim();
        header.trailing = (!t.is_empty()).then_some(t);
    }
    Some(header)
}

/// The address token of a frame line: after an optional tab and spaces,
/// up to (and with) the space that ends it, or the tab of simpleperf's
/// `ADDR\tSYMBOL (DSO)`. Returns the rest of the line and the token.
#[inline]
fn address(i: &[u8]) -> Res<'_, &[u8]> {
    terminated(
        take_till(|b| b == b' ' || b == b'\t'),
        take_while_m_n(1, 1, |b| b == b' ' || b == b'\t'),
    )
    .parse(i)
}

/// Where the text after a frame line's address starts in `line`: the byte
/// after the first space (or tab) that follows the left-trimmed address
/// token. `None` when nothing ends the token.
#[inline]
pub(super) fn after_address(line: &str) -> Option<usize> {
    let (rest, _) = address(trim_start(line).as_bytes()).ok()?;
    Some(line.len() - rest.len())
}

/// A frame line, with DSO paths that hold spaces (the DSO is the last
/// ` (`...`)` group) and simpleperf's tab after the address.
pub(super) fn frame_fixed(line: &str) -> Option<FrameLine<'_>> {
    let (rest, pc) = address(trim_start(line).as_bytes()).ok()?;
    // `SYMBOL (DSO)` or ` (DSO)` or `(DSO)`; a DSO may hold spaces.
    let sym_dso = rest.strip_suffix(b")")?;
    let lone_group = sym_dso.first() == Some(&b'(') && memmem::find(&sym_dso[1..], b" (").is_none();
    let open = match lone_group {
        true => 0,
        false => memmem::rfind(sym_dso, b" (")? + 1,
    };
    let (sym, module) = (&sym_dso[..open], &sym_dso[open + 1..]);
    Some(FrameLine {
        pc: trim_end(text(line, pc)?),
        rawfunc: match text(line, sym)?.trim() {
            "" => " ",
            s => s,
        },
        module: text(line, module)?,
    })
}

/// A frame line exactly as inferno 0.12.8 reads it: the address up to the
/// first space, the DSO the last word (`(`...`)`), the symbol between.
pub(super) fn frame_compat(line: &str) -> Option<FrameLine<'_>> {
    let (after, (pc, _)) = (word, char::<_, ()>(' '))
        .parse(trim_start(line).as_bytes())
        .ok()?;
    let last = rfind_byte(after, after.len(), b' ')?;
    let (sym, module) = (&after[..last], &after[last + 1..]);
    let (_, module) = all_consuming(preceded(
        char::<_, ()>('('),
        verify(rest, |m: &[u8]| m.last() == Some(&b')')),
    ))
    .parse(module)
    .ok()?;
    Some(FrameLine {
        pc: trim_end(text(line, pc)?),
        rawfunc: match text(line, sym)?.trim() {
            "" => " ",
            s => s,
        },
        module: text(line, &module[..module.len() - 1])?,
    })
}

/// Where the `+0xHEX` offset at the end of a symbol starts (an empty
/// run of digits counts, as in inferno). The last `+` is the only place
/// it can start: neither `0x` nor hex digits hold one.
#[inline]
pub(super) fn offset_at(symbol: &[u8]) -> Option<usize> {
    let at = rfind_byte(symbol, symbol.len(), b'+')?;
    all_consuming((
        tag::<_, _, ()>("+0x"),
        take_while(|b: u8| b.is_ascii_hexdigit()),
    ))
    .parse(&symbol[at..])
    .ok()?;
    Some(at)
}

/// The value of the offset [`offset_at`] finds; `None` for `+0x` with no
/// digits or digits past 64 bits.
#[inline]
pub(super) fn offset_value(symbol: &str, at: usize) -> Option<u64> {
    let (_, digits) = all_consuming(preceded(tag::<_, _, ()>("+0x"), hex_digit1))
        .parse(symbol.get(at..)?.as_bytes())
        .ok()?;
    u64::from_str_radix(text(symbol, digits)?, 16).ok()
}
