//! The one escape of control characters in names: every name a capture
//! or a report brings (a frame, a thread or process, a module, an NVTX
//! range, a kernel, a call) and every path in a message goes through
//! [`printable_text`] before it reaches an output, so that a name can
//! neither split a line of a line-based file (`stacks.folded`, a TSV,
//! `report.txt`, a log line) nor reach a terminal as an escape sequence.
//!
//! C0 (U+0000..U+001F), DEL (U+007F) and C1 (U+0080..U+009F) characters,
//! `char::is_control`, are written as Rust's `char::escape_default` writes
//! them: `\n`, `\r`, `\t`, `\u{1b}`, `\u{9b}`. Nothing else changes (a
//! backslash stays one), so the escape is idempotent: escaping an escaped
//! name gives it back, and readers may escape what writers escaped.
//!
//! A clean name, by far the most common, is returned borrowed after a byte
//! scan of 32 bytes a step that the compiler vectorises (2.5 GB/s a core
//! on folded stacks of 100 bytes, 6 times `chars().any(char::is_control)`;
//! names under 32 bytes eight at a time): the folded writers run it on
//! every stack.

use std::borrow::Cow;

/// Bytes scanned a step by [`is_printable`].
const STEP: usize = 32;

/// Whether `text` holds no control character ([`printable_text`] would
/// return it borrowed).
#[inline]
pub fn is_printable(text: &str) -> bool {
    bytes_are_printable(text.as_bytes())
}

/// [`is_printable`] of UTF-8 bytes (a line being written: scanned where
/// it was just copied, in cache).
#[inline]
pub fn bytes_are_printable(b: &[u8]) -> bool {
    if b.len() < STEP {
        return short_is_printable(b);
    }
    let mut at = 0;
    loop {
        // The last step overlaps the one before it: no byte-by-byte tail.
        let from = at.min(b.len() - STEP);
        let step: &[u8; STEP] = b[from..from + STEP].try_into().expect("STEP bytes");
        if suspect(step) && !clean(&b[from..b.len().min(from + STEP + 1)]) {
            return false;
        }
        if from + STEP == b.len() {
            return true;
        }
        at += STEP;
    }
}

/// Whether a step may hold a control character: a byte below 0x20, DEL,
/// or 0xC2, the lead byte of U+0080..U+00BF (only U+0080..U+009F are
/// control characters). No early exit, so the compiler vectorises it.
#[inline(always)]
fn suspect(step: &[u8; STEP]) -> bool {
    step.iter()
        .fold(false, |s, &c| s | (c < 0x20) | (c == 0x7f) | (c == 0xc2))
}

/// [`is_printable`] of fewer than [`STEP`] bytes: eight at a time in a
/// word (the bit tricks of "Bit Twiddling Hacks": a byte below 0x20, a
/// byte equal to 0x7F or 0xC2), then byte by byte.
#[inline]
fn short_is_printable(b: &[u8]) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let zero_byte = |v: u64| v.wrapping_sub(ONES) & !v & HIGH;
    let mut at = 0;
    while at + 8 <= b.len() {
        let w = u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"));
        let below_space = w.wrapping_sub(ONES * 0x20) & !w & HIGH;
        let hit = below_space | zero_byte(w ^ (ONES * 0x7f)) | zero_byte(w ^ (ONES * 0xc2));
        if hit != 0 && !clean(&b[at..b.len().min(at + 9)]) {
            return false;
        }
        at += 8;
    }
    clean(&b[at..])
}

/// Whether `b` (UTF-8, possibly cut mid-character) holds no control
/// character, byte by byte.
#[inline]
fn clean(b: &[u8]) -> bool {
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            0x00..=0x1f | 0x7f => return false,
            // U+0080..U+009F are C2 80..C2 9F in UTF-8.
            0xc2 if matches!(b.get(i + 1), Some(0x80..=0x9f)) => return false,
            _ => {}
        }
        i += 1;
    }
    true
}

/// `text` with every C0 and C1 control character (and DEL) escaped
/// (`\n`, `\u{1b}`): the one escape of names and paths in every output
/// and log line (see the module docs). Borrowed when there is none.
#[inline]
pub fn printable_text(text: &str) -> Cow<'_, str> {
    if is_printable(text) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c.is_control() {
            true => out.extend(c.escape_default()),
            false => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// [`printable_text`] of an owned name (`String`, `Box<str>`,
/// `Arc<str>`): the same value back when it is clean.
#[inline]
pub fn printable_owned<S: AsRef<str> + From<String>>(text: S) -> S {
    if is_printable(text.as_ref()) {
        return text;
    }
    S::from(printable_text(text.as_ref()).into_owned())
}

/// `path` for a one-line message: control characters (a newline in a
/// directory name) escaped, so a name cannot split or forge a line.
pub fn printable(path: &std::path::Path) -> String {
    printable_owned(path.display().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped_c0_c1_and_del() {
        let t = "jit \u{1b}]0;TITLE\u{7}\u{1b}[2J \u{9b}31m\u{7f} ok\tz\n";
        assert_eq!(
            printable_text(t),
            "jit \\u{1b}]0;TITLE\\u{7}\\u{1b}[2J \\u{9b}31m\\u{7f} ok\\tz\\n"
        );
        // The attack of issue 55: a name that would forge a folded line.
        assert_eq!(
            printable_text("w;leaf\nforged;stack 1000000\r\u{0}"),
            "w;leaf\\nforged;stack 1000000\\r\\u{0}"
        );
        assert_eq!(
            printable_text("\u{80}\u{85}\u{9f}"),
            "\\u{80}\\u{85}\\u{9f}"
        );
        // Escaped once is escaped for good.
        let once = printable_text(t).into_owned();
        assert!(matches!(printable_text(&once), Cow::Borrowed(_)));
        assert_eq!(printable_owned(String::from(t)), once);
        assert_eq!(&*printable_owned(Box::<str>::from("a\u{7f}")), "a\\u{7f}");
    }

    #[test]
    fn clean_names_are_borrowed_whatever_their_length() {
        // U+00A0..U+00BF share the lead byte 0xC2 with C1 and are kept,
        // as are other non-ASCII characters; every length and position
        // around the 32-byte steps.
        for name in ["", "main", "plain é", "\u{a0}x£©®°µ¿", "中文;🦀::f"] {
            assert!(matches!(printable_text(name), Cow::Borrowed(n) if n == name));
        }
        for len in 0..100 {
            let base = "a".repeat(len);
            assert!(matches!(printable_text(&base), Cow::Borrowed(_)));
            for at in 0..=len {
                for (bad, escaped) in [("\n", "\\n"), ("\u{1b}", "\\u{1b}"), ("\u{7f}", "\\u{7f}")]
                    .into_iter()
                    .chain([("\u{9f}", "\\u{9f}"), ("\u{0}", "\\u{0}")])
                {
                    let dirty = format!("{}{bad}{}", &base[..at], &base[at..]);
                    let want = format!("{}{escaped}{}", &base[..at], &base[at..]);
                    assert_eq!(printable_text(&dirty), want, "{len} {at}");
                }
                let kept = format!("{}\u{a0}{}", &base[..at], &base[at..]);
                assert!(matches!(printable_text(&kept), Cow::Borrowed(_)));
            }
        }
    }
}
