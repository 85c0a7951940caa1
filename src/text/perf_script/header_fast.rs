//! The one-pass header parser: the usual header line (16 to 64 bytes of
//! printable ASCII) read from bit masks of its bytes, in front of the nom
//! grammar, which it must agree with (a property test holds it to
//! `grammar::header_fixed`).

use super::grammar::decimal as parse_digits;
use super::Header;
use crate::text::bytes::Block16;

/// One bit per byte of a line: headers longer than this (tracepoint
/// arguments, `-F` layouts with a frame on the header line) take the
/// general parser. u128 masks would take them too, but cost twice
/// what the general parser costs (variable u128 shifts branch).
type Bits = u64;
const WIDTH: u32 = Bits::BITS;
const MAX_LEN: usize = WIDTH as usize;

/// Bit `i` of each mask describes byte `i` of the line.
#[derive(Default)]
struct Masks {
    space: Bits,
    colon: Bits,
    digit: Bits,
    slash: Bits,
    dash: Bits,
}

/// The masks of a 16..=64-byte line, or `None` if it has a byte below
/// 0x20 or above 0x7f (whose whitespace rules the masks do not model).
#[inline]
fn masks(b: &[u8]) -> Option<Masks> {
    let n = b.len();
    debug_assert!((16..=MAX_LEN).contains(&n));
    let mut m = Masks::default();
    let mut bad: Bits = 0;
    let mut at = 0;
    while at < n {
        // The last block is loaded flush with the line's end; bytes it
        // shares with the previous block give the same bits again.
        let o = at.min(n - 16);
        let block = Block16::load(&b[o..o + 16]);
        let place = |x: u32| (x as Bits) << o;
        m.space |= place(block.eq(b' '));
        m.colon |= place(block.eq(b':'));
        m.digit |= place(block.digits());
        m.slash |= place(block.eq(b'/'));
        m.dash |= place(block.eq(b'-'));
        bad |= place(block.control_or_high());
        at = o + 16;
    }
    (bad == 0).then_some(m)
}

/// `line[from..to]` of a line that [`masks`] accepted, hence ASCII:
/// every index is a char boundary, and the bounds come from bit
/// positions below the line's length.
#[inline]
fn sub(line: &str, from: usize, to: usize) -> &str {
    debug_assert!(line.is_ascii() && from <= to && to <= line.len());
    let b = &line.as_bytes()[from..to];
    // SAFETY: ASCII bytes are valid UTF-8 (the range itself is
    // bounds-checked above).
    unsafe { std::str::from_utf8_unchecked(b) }
}

/// Bits `from..to` (empty when `from >= to`); both at most `WIDTH`.
#[inline]
fn range(from: u32, to: u32) -> Bits {
    below(to) & !below(from)
}

/// Bits `0..k`, `k` at most `WIDTH`.
#[inline]
fn below(k: u32) -> Bits {
    debug_assert!(k <= WIDTH);
    // Branch-free: the shift wraps to 0 at k = WIDTH, where the second
    // term sets every bit.
    ((1 as Bits) << (k % WIDTH)).wrapping_sub(1) | ((k / WIDTH) as Bits).wrapping_neg()
}

/// The text of bits `first..=last` of the set bits in `bits` (non-zero).
#[inline]
fn span(line: &str, bits: Bits) -> &str {
    let first = bits.trailing_zeros() as usize;
    let last = (WIDTH - 1 - bits.leading_zeros()) as usize;
    sub(line, first, last + 1)
}

#[inline]
pub(super) fn parse(line: &str) -> Option<Option<Header<'_>>> {
    let b = line.as_bytes();
    let n = b.len();
    if !(16..=MAX_LEN).contains(&n) {
        return None;
    }
    let m = masks(b)?;
    let n = n as u32;
    let sp = m.space;
    let ns = !sp & below(n);
    // The id word: the first word after the first one made only of
    // digits, slashes, and dashes that open the word or follow a slash
    // (`header_ids` with negative ids allowed); it must be followed by
    // a space.
    let idish = m.digit | m.slash | (m.dash & ((sp | m.slash) << 1));
    let not_id = ns & !idish;
    // Words start at a non-space after a space: after the first space,
    // so never the first word.
    let mut starts = ns & (sp << 1);
    let (s, e) = loop {
        if starts == 0 {
            return Some(None);
        }
        let s = starts.trailing_zeros();
        let after = sp & !below(s);
        if after == 0 {
            return Some(None); // a word that runs to the end of the line
        }
        let e = after.trailing_zeros();
        if not_id & range(s, e) == 0 {
            break (s, e);
        }
        starts &= starts - 1;
    };
    let (pid, tid) = match m.slash & range(s, e) {
        0 => ("?", sub(line, s as usize, e as usize)),
        sl => {
            let k = (WIDTH - 1 - sl.leading_zeros()) as usize;
            (sub(line, s as usize, k), sub(line, k + 1, e as usize))
        }
    };
    let comm = match ns & below(s - 1) {
        0 => "",
        c => span(line, c),
    };
    let mut header = Header::of_ids(comm, pid, tid);
    // After the id word: the first colon ends the time stamp (or
    // whatever stands there); the event ends at the next colon that is
    // followed by a space or ends the line.
    let colons = m.colon & !below(e + 1);
    if colons == 0 {
        return Some(Some(header));
    }
    let from = colons.trailing_zeros() + 1;
    header.stamp = sub(line, e as usize + 1, from as usize - 1);
    let ends_event = m.colon & ((sp >> 1) | (1 << (n - 1))) & !below(from);
    let end = if ends_event == 0 {
        n
    } else {
        let c = ends_event.trailing_zeros();
        let t = ns & !below(c + 1);
        header.trailing = (t != 0).then(|| span(line, t));
        c
    };
    // `PERIOD EVENT` between `from` and `end`, spaces trimmed at the end.
    let kept = ns & range(from, end);
    if kept == 0 {
        return Some(Some(header));
    }
    let pe_end = WIDTH - kept.leading_zeros();
    let spaces = sp & range(from, pe_end);
    if spaces == 0 {
        header.event = Some(sub(line, from as usize, pe_end as usize));
        return Some(Some(header));
    }
    let last = WIDTH - 1 - spaces.leading_zeros();
    header.event = Some(sub(line, last as usize + 1, pe_end as usize));
    let before = spaces & !(1 << last);
    let period_from = if before == 0 {
        from
    } else {
        WIDTH - before.leading_zeros()
    };
    header.period = if m.digit & range(period_from, last) == range(period_from, last) {
        digits_value(b, period_from as usize, last as usize)
    } else {
        None
    };
    Some(Some(header))
}

/// The value of the ASCII digits `b[from..to]` (already known to be
/// digits). Up to eight of them are combined in a word with three
/// multiplies instead of a multiply-add chain per digit.
#[inline]
fn digits_value(b: &[u8], from: usize, to: usize) -> Option<u64> {
    let len = to - from;
    if len == 0 || len > 8 || to < 8 {
        return parse_digits(&b[from..to]);
    }
    // The eight bytes ending at `to`; the digits are the top `len`
    // bytes (little-endian: the first digit is the lowest of them).
    let w = u64::from_le_bytes(b[to - 8..to].try_into().unwrap());
    let shift = 8 * (8 - len as u32);
    // The bytes below the digits become zeros, i.e. leading '0'
    // digits; '0' is subtracted from the digits only (no borrow: each
    // is at least '0').
    let keep = u64::MAX << shift;
    let mut x = (w & keep) - (0x3030_3030_3030_3030 & keep);
    x = (x.wrapping_mul(10) + (x >> 8)) & 0x00ff_00ff_00ff_00ff;
    x = (x.wrapping_mul(100) + (x >> 16)) & 0x0000_ffff_0000_ffff;
    x = x.wrapping_mul(10000) + (x >> 32);
    Some(x & 0xffff_ffff)
}
