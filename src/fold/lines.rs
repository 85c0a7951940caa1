//! Finding line ends in a chunk: a forward iterator over the positions of
//! `\n`, sixteen bytes per step.
//!
//! `perf script` lines are short (~60 bytes), so `memchr_iter`, which
//! restarts its search (and its SIMD set-up) at every match, spends more on
//! each line than on the bytes. This iterator keeps a bit mask of the
//! newlines in the current 16-byte block and hands them out one by one.
//! x86_64 always has SSE2; elsewhere it falls back to `memchr_iter`.

/// Positions of every `b'\n'` in a byte slice, in order.
pub(crate) struct Newlines<'a> {
    #[cfg(target_arch = "x86_64")]
    hay: &'a [u8],
    #[cfg(target_arch = "x86_64")]
    next_block: usize,
    #[cfg(target_arch = "x86_64")]
    base: usize,
    #[cfg(target_arch = "x86_64")]
    mask: u32,
    #[cfg(not(target_arch = "x86_64"))]
    inner: memchr::Memchr<'a>,
}

impl<'a> Newlines<'a> {
    /// Newlines of `hay`.
    pub(crate) fn new(hay: &'a [u8]) -> Self {
        #[cfg(target_arch = "x86_64")]
        {
            Newlines {
                hay,
                next_block: 0,
                base: 0,
                mask: 0,
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            Newlines {
                inner: memchr::memchr_iter(b'\n', hay),
            }
        }
    }
}

impl Iterator for Newlines<'_> {
    type Item = usize;

    #[cfg(target_arch = "x86_64")]
    #[inline]
    fn next(&mut self) -> Option<usize> {
        use std::arch::x86_64::{
            _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_set1_epi8,
        };
        while self.mask == 0 {
            let at = self.next_block;
            let len = self.hay.len();
            if at + 16 <= len {
                // SAFETY: SSE2 is part of x86_64; the 16 bytes at `at` are
                // inside `hay` (checked above), and loadu has no alignment
                // requirement.
                self.mask = unsafe {
                    let block = _mm_loadu_si128(self.hay.as_ptr().add(at).cast());
                    _mm_movemask_epi8(_mm_cmpeq_epi8(block, _mm_set1_epi8(b'\n' as i8))) as u32
                };
                self.base = at;
                self.next_block = at + 16;
            } else if at < len {
                self.mask = self.hay[at..]
                    .iter()
                    .enumerate()
                    .filter(|(_, &b)| b == b'\n')
                    .fold(0u32, |m, (i, _)| m | (1 << i));
                self.base = at;
                self.next_block = len;
            } else {
                return None;
            }
        }
        let bit = self.mask.trailing_zeros() as usize;
        self.mask &= self.mask - 1;
        Some(self.base + bit)
    }

    #[cfg(not(target_arch = "x86_64"))]
    #[inline]
    fn next(&mut self) -> Option<usize> {
        self.inner.next()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_every_newline_like_a_plain_scan() {
        let mut hay = Vec::new();
        for i in 0..300u32 {
            hay.extend(std::iter::repeat_n(b'x', (i % 37) as usize));
            hay.push(b'\n');
            if i % 5 == 0 {
                hay.push(b'\n');
            }
            hay.push((i % 251) as u8 | 0x80);
        }
        for start in 0..40 {
            let h = &hay[start..];
            let want: Vec<usize> = (0..h.len()).filter(|&i| h[i] == b'\n').collect();
            assert_eq!(Newlines::new(h).collect::<Vec<_>>(), want);
        }
        assert_eq!(Newlines::new(b"").next(), None);
        assert_eq!(Newlines::new(b"\n").collect::<Vec<_>>(), vec![0]);
    }
}
