//! Finding line ends in a chunk: a forward iterator over the positions of
//! `\n`, sixty-four bytes per step, that also tells whether each line holds
//! a byte above 0x7f.
//!
//! `perf script` lines are short (~60 bytes), so `memchr_iter`, which
//! restarts its search (and its SIMD set-up) at every match, spends more on
//! each line than on the bytes. This iterator keeps a bit mask of the
//! newlines in the current 64-byte block (four 16-byte blocks of
//! `crate::text::bytes`) and hands them out one by one; a block holds about one
//! line, so the per-block work is paid about once per line. The same
//! blocks give the high bytes for free, which spares the folder a second
//! pass over every line to check that it is ASCII.

use crate::text::bytes::Block16;

/// Positions of every `b'\n'` in a byte slice, in order, each with whether
/// the line it ends (from the previous newline, or the start) has a byte
/// above 0x7f.
pub(crate) struct Newlines<'a> {
    hay: &'a [u8],
    next_block: usize,
    base: usize,
    /// Newlines of the current block not handed out yet.
    mask: u64,
    /// High-bit bytes of the current block after the last newline handed
    /// out.
    high: u64,
    /// The line being scanned had a high byte in an earlier block.
    carried_high: bool,
}

impl<'a> Newlines<'a> {
    /// Newlines of `hay`.
    pub(crate) fn new(hay: &'a [u8]) -> Self {
        Newlines {
            hay,
            next_block: 0,
            base: 0,
            mask: 0,
            high: 0,
            carried_high: false,
        }
    }
}

impl<'a> Newlines<'a> {
    /// Newlines of `hay` from `at` on (positions still count from the
    /// start of `hay`): for a reader that skipped ahead.
    pub(crate) fn starting_at(hay: &'a [u8], at: usize) -> Self {
        Newlines {
            hay,
            next_block: at,
            base: at,
            mask: 0,
            high: 0,
            carried_high: false,
        }
    }
}

impl Iterator for Newlines<'_> {
    /// `(position of the newline, the line before it has a byte > 0x7f)`.
    type Item = (usize, bool);

    #[inline]
    fn next(&mut self) -> Option<(usize, bool)> {
        while self.mask == 0 {
            // High bytes left in this block lie after its last newline: in
            // the line that the next blocks end.
            self.carried_high |= self.high != 0;
            let at = self.next_block;
            let len = self.hay.len();
            if at + 64 <= len {
                let (mut mask, mut high) = (0u64, 0u64);
                for (k, sixteen) in self.hay[at..at + 64].chunks_exact(16).enumerate() {
                    let block = Block16::load(sixteen);
                    mask |= (block.eq(b'\n') as u64) << (16 * k);
                    high |= (block.high() as u64) << (16 * k);
                }
                (self.mask, self.high) = (mask, high);
                self.base = at;
                self.next_block = at + 64;
            } else if at < len {
                // The last few bytes of the chunk, once.
                (self.mask, self.high) = self.hay[at..]
                    .iter()
                    .enumerate()
                    .fold((0u64, 0u64), |(m, h), (i, &b)| {
                        (m | ((b == b'\n') as u64) << i, h | ((b >> 7) as u64) << i)
                    });
                self.base = at;
                self.next_block = len;
            } else {
                self.high = 0;
                return None;
            }
        }
        let bit = self.mask.trailing_zeros();
        self.mask &= self.mask - 1;
        let up_to_newline = u64::MAX >> (63 - bit);
        let high = self.carried_high || self.high & up_to_newline != 0;
        self.high &= !up_to_newline;
        self.carried_high = false;
        Some((self.base + bit as usize, high))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_every_newline_and_high_byte_like_a_plain_scan() {
        let mut hay = Vec::new();
        for i in 0..300u32 {
            hay.extend(std::iter::repeat_n(b'x', (i % 37) as usize));
            hay.push(b'\n');
            if i % 5 == 0 {
                hay.push(b'\n');
            }
            // High bytes at line starts, ends and in long lines, some
            // lines without any.
            if i % 3 != 0 {
                hay.push((i % 251) as u8 | 0x80);
            }
        }
        for start in 0..40 {
            let h = &hay[start..];
            let mut want = Vec::new();
            let mut line_start = 0;
            for i in (0..h.len()).filter(|&i| h[i] == b'\n') {
                want.push((i, !h[line_start..i].is_ascii()));
                line_start = i + 1;
            }
            assert_eq!(Newlines::new(h).collect::<Vec<_>>(), want, "from {start}");
        }
        assert_eq!(Newlines::new(b"").next(), None);
        assert_eq!(Newlines::new(b"\n").collect::<Vec<_>>(), vec![(0, false)]);
        let long = [vec![0xc3u8], vec![b'a'; 40], vec![b'\n']].concat();
        assert_eq!(Newlines::new(&long).collect::<Vec<_>>(), vec![(41, true)]);
    }
}
