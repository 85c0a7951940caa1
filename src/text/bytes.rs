//! Sixteen bytes at a time: a block of bytes in a vector register asked
//! "which of these bytes are ..." and answered with a bit mask (bit `i` for
//! byte `i`). The line scanner, the one-pass header parser, the frame
//! lines' fast paths and the reverse byte search ([`rfind_byte`]) ask
//! their questions here, so the SIMD code lives in one place. x86-64 always has SSE2; elsewhere each question is a plain loop
//! over the sixteen bytes, with the same answers ([`portable`], which the
//! tests also build and check on x86-64, so neither path goes untested).
//! Nothing here knows what the bytes mean.

/// Sixteen bytes of `b` from `at`, when that many are there.
#[inline]
pub(crate) fn block16(b: &[u8], at: usize) -> Option<Block16> {
    b.get(at..at + 16).map(Block16::load)
}

#[cfg(target_arch = "x86_64")]
pub(crate) use sse2::Block16;

#[cfg(not(target_arch = "x86_64"))]
pub(crate) use portable::Block16;

/// The SSE2 block (x86-64 always has SSE2).
#[cfg(target_arch = "x86_64")]
mod sse2 {
    use std::arch::x86_64::*;

    /// Sixteen bytes, held for questions answered as bit masks.
    #[derive(Clone, Copy)]
    pub(crate) struct Block16 {
        v: __m128i,
    }

    impl Block16 {
        /// The block of `b`, which must be 16 bytes long.
        #[inline]
        pub(crate) fn load(b: &[u8]) -> Block16 {
            assert_eq!(b.len(), 16);
            // SAFETY: SSE2 is part of x86-64; `b` is 16 bytes long (checked
            // above) and loadu has no alignment requirement.
            let v = unsafe { _mm_loadu_si128(b.as_ptr().cast()) };
            Block16 { v }
        }

        /// Bytes equal to `c`.
        #[inline]
        pub(crate) fn eq(self, c: u8) -> u32 {
            // SAFETY: SSE2 is part of x86-64.
            unsafe { _mm_movemask_epi8(_mm_cmpeq_epi8(self.v, _mm_set1_epi8(c as i8))) as u32 }
        }

        /// Bytes above 0x7f (parts of multi-byte UTF-8 characters).
        #[inline]
        pub(crate) fn high(self) -> u32 {
            // SAFETY: SSE2 is part of x86-64; movemask takes each byte's
            // top bit.
            unsafe { _mm_movemask_epi8(self.v) as u32 }
        }

        /// Bytes below 0x20 or above 0x7f: control bytes (tab among them)
        /// and parts of multi-byte characters.
        #[inline]
        pub(crate) fn control_or_high(self) -> u32 {
            // SAFETY: SSE2 is part of x86-64. Signed compare: bytes >= 0x80
            // are negative, so they are below 0x20 too.
            unsafe { _mm_movemask_epi8(_mm_cmplt_epi8(self.v, _mm_set1_epi8(0x20))) as u32 }
        }

        /// Printable ASCII other than space (0x21..=0x7f): neither
        /// whitespace nor part of a multi-byte character.
        #[inline]
        pub(crate) fn graphic(self) -> u32 {
            // SAFETY: SSE2 is part of x86-64. Signed compare: bytes >= 0x80
            // are negative and fail it.
            unsafe { _mm_movemask_epi8(_mm_cmpgt_epi8(self.v, _mm_set1_epi8(0x20))) as u32 }
        }

        /// ASCII decimal digits.
        #[inline]
        pub(crate) fn digits(self) -> u32 {
            // SAFETY: SSE2 is part of x86-64.
            unsafe { _mm_movemask_epi8(in_range(self.v, b'0', b'9')) as u32 }
        }

        /// ASCII hex digits (either case).
        #[inline]
        pub(crate) fn hex_digits(self) -> u32 {
            // SAFETY: SSE2 is part of x86-64.
            unsafe {
                let lower = _mm_or_si128(self.v, _mm_set1_epi8(0x20));
                let hex = _mm_or_si128(in_range(self.v, b'0', b'9'), in_range(lower, b'a', b'f'));
                _mm_movemask_epi8(hex) as u32
            }
        }
    }

    /// 0xff in each byte of `v` within `lo..=hi`, both ASCII. Signed
    /// compares are right for ASCII ranges: bytes >= 0x80 are negative and
    /// match none.
    #[inline]
    fn in_range(v: __m128i, lo: u8, hi: u8) -> __m128i {
        // SAFETY: SSE2 is part of x86-64.
        unsafe {
            _mm_and_si128(
                _mm_cmpgt_epi8(v, _mm_set1_epi8(lo as i8 - 1)),
                _mm_cmplt_epi8(v, _mm_set1_epi8(hi as i8 + 1)),
            )
        }
    }
}

/// The plain block: each question a loop over the sixteen bytes.
#[cfg(any(not(target_arch = "x86_64"), test))]
pub(crate) mod portable {
    /// Sixteen bytes, held for questions answered as bit masks.
    #[derive(Clone, Copy)]
    pub(crate) struct Block16 {
        v: [u8; 16],
    }

    impl Block16 {
        /// The block of `b`, which must be 16 bytes long.
        #[inline]
        pub(crate) fn load(b: &[u8]) -> Block16 {
            Block16 {
                v: b.try_into().expect("a block is 16 bytes"),
            }
        }

        /// The mask of the bytes for which `f` holds.
        #[inline]
        fn mask(self, f: impl Fn(u8) -> bool) -> u32 {
            self.v
                .iter()
                .enumerate()
                .fold(0, |m, (i, &x)| m | ((f(x) as u32) << i))
        }

        /// Bytes equal to `c`.
        #[inline]
        pub(crate) fn eq(self, c: u8) -> u32 {
            self.mask(|x| x == c)
        }

        /// Bytes above 0x7f (parts of multi-byte UTF-8 characters).
        #[inline]
        pub(crate) fn high(self) -> u32 {
            self.mask(|x| x >= 0x80)
        }

        /// Bytes below 0x20 or above 0x7f: control bytes (tab among them)
        /// and parts of multi-byte characters.
        #[inline]
        pub(crate) fn control_or_high(self) -> u32 {
            self.mask(|x| !(0x20..0x80).contains(&x))
        }

        /// Printable ASCII other than space (0x21..=0x7f): neither
        /// whitespace nor part of a multi-byte character.
        #[inline]
        pub(crate) fn graphic(self) -> u32 {
            self.mask(|x| (0x21..0x80).contains(&x))
        }

        /// ASCII decimal digits.
        #[inline]
        pub(crate) fn digits(self) -> u32 {
            self.mask(|x| x.is_ascii_digit())
        }

        /// ASCII hex digits (either case).
        #[inline]
        pub(crate) fn hex_digits(self) -> u32 {
            self.mask(|x| x.is_ascii_hexdigit())
        }
    }
}

const LO7: u64 = 0x7f7f_7f7f_7f7f_7f7f;

/// A mask with 0x80 in every byte of `x` that is zero, and nothing else
/// (exact per byte, unlike the shorter borrow-propagating trick).
#[inline]
fn zero_bytes(x: u64) -> u64 {
    !(((x & LO7).wrapping_add(LO7)) | x | LO7)
}

/// The last `needle` in `hay[..end]`, sixteen then eight bytes at a time.
#[inline]
pub(crate) fn rfind_byte(hay: &[u8], end: usize, needle: u8) -> Option<usize> {
    let mut i = end;
    while i >= 16 {
        let m = Block16::load(&hay[i - 16..i]).eq(needle);
        if m != 0 {
            return Some(i + 15 - m.leading_zeros() as usize);
        }
        i -= 16;
    }
    let splat = u64::from_ne_bytes([needle; 8]);
    while i >= 8 {
        let w = u64::from_le_bytes(hay[i - 8..i].try_into().unwrap());
        let m = zero_bytes(w ^ splat);
        if m != 0 {
            return Some(i - 8 + (7 - m.leading_zeros() / 8) as usize);
        }
        i -= 8;
    }
    (0..i).rev().find(|&k| hay[k] == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every question of `$block` against a byte loop, over all 256 bytes.
    macro_rules! every_question_agrees_with_a_byte_loop {
        ($block:ty) => {
            let bytes: Vec<u8> = (0..=255u8).collect();
            for chunk in bytes.chunks_exact(16) {
                let b = <$block>::load(chunk);
                let want = |f: &dyn Fn(u8) -> bool| {
                    chunk
                        .iter()
                        .enumerate()
                        .fold(0u32, |m, (i, &x)| m | ((f(x) as u32) << i))
                };
                assert_eq!(b.eq(b' '), want(&|x| x == b' '));
                assert_eq!(b.eq(0xa0), want(&|x| x == 0xa0));
                assert_eq!(b.high(), want(&|x| x >= 0x80));
                assert_eq!(b.control_or_high(), want(&|x| !(0x20..0x80).contains(&x)));
                assert_eq!(b.graphic(), want(&|x| (0x21..0x80).contains(&x)));
                assert_eq!(b.digits(), want(&|x| x.is_ascii_digit()));
                assert_eq!(b.hex_digits(), want(&|x| x.is_ascii_hexdigit()));
            }
        };
    }

    #[test]
    fn every_question_agrees_with_a_byte_loop() {
        every_question_agrees_with_a_byte_loop!(Block16);
        assert!(block16(b"short", 0).is_none());
        let bytes: Vec<u8> = (0..=255u8).collect();
        assert_eq!(block16(&bytes, 240).unwrap().eq(255), 1 << 15);
    }

    /// The path non-x86 builds take, built and checked on every target.
    #[test]
    fn the_portable_block_agrees_with_a_byte_loop() {
        every_question_agrees_with_a_byte_loop!(portable::Block16);
    }

    #[test]
    fn reverse_byte_search_matches_a_plain_scan() {
        let hay = b"comm 123/456 [001] 12.345678:     1001 cpu-clock:u: x  ffffffff8100 do_syscall_64+0x1f ([kernel.kallsyms])";
        for needle in [b' ', b':', b'/', b'x', b'Q', b')'] {
            for from in 0..hay.len() {
                let rwant = (0..from).rev().find(|&k| hay[k] == needle);
                assert_eq!(rfind_byte(hay, from, needle), rwant);
            }
        }
        // A match at the first byte of the last 16-byte step.
        let mut first = [b'a'; 16];
        first[0] = b' ';
        assert_eq!(rfind_byte(&first, 16, b' '), Some(0));
        // Bytes with the high bit set must not be taken for a match.
        let odd = [
            0x80u8,
            0xa0,
            0x20 | 0x80,
            b' ',
            0xff,
            0x00,
            0x7f,
            b' ',
            0xc2,
        ];
        assert_eq!(rfind_byte(&odd, odd.len(), b' '), Some(7));
    }

    proptest::proptest! {
        #[test]
        fn reverse_byte_searches_agree_with_a_plain_scan(
            hay in proptest::collection::vec(proptest::sample::select(vec![b' ', b'a', b'(', 0x80, 0xa0]), 0..80),
            from in 0usize..80,
        ) {
            let from = from.min(hay.len());
            for needle in [b' ', b'(', 0xa0] {
                let rwant = (0..from).rev().find(|&k| hay[k] == needle);
                proptest::prop_assert_eq!(rfind_byte(&hay, from, needle), rwant);
            }
        }
    }
}
