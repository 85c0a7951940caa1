//! Adding sample counts without ever wrapping: the one home for sums of
//! periods (fold merges, totals, render and diff).
//!
//! A `u64` of nanoseconds holds 584 years of CPU time, but folded files from
//! other tools and hand-edited ones can hold anything. A sum that would
//! pass `u64::MAX` stays at `u64::MAX` (saturates) and the process
//! remembers it, so that the binary warns once at the end
//! ([`saturated`]). This module knows nothing about stacks.

use std::sync::atomic::{AtomicBool, Ordering};

static SATURATED: AtomicBool = AtomicBool::new(false);

/// `a + b`, or `u64::MAX` (remembered for the warning) when that overflows.
#[inline]
pub fn add(a: u64, b: u64) -> u64 {
    a.checked_add(b).unwrap_or_else(|| {
        SATURATED.store(true, Ordering::Relaxed);
        u64::MAX
    })
}

/// Sum of `counts`, saturating as [`add`] does.
pub fn sum<I: IntoIterator<Item = u64>>(counts: I) -> u64 {
    counts.into_iter().fold(0, add)
}

/// The right shift that brings every count down so that their sum fits in
/// an `i64` (0 when it already does; remembered for the warning otherwise).
/// For consumers that add counts themselves without overflow checks
/// (inferno's flamegraph merge) and signed SVG attributes.
pub fn shift_to_fit<I: IntoIterator<Item = u64>>(counts: I) -> u32 {
    let total: u128 = counts.into_iter().map(u128::from).sum();
    let mut shift = 0;
    while total >> shift > i64::MAX as u128 {
        shift += 1;
    }
    if shift > 0 {
        SATURATED.store(true, Ordering::Relaxed);
    }
    shift
}

/// True once any sum in this process saturated.
pub fn saturated() -> bool {
    SATURATED.load(Ordering::Relaxed)
}

/// The warning the binary prints when [`saturated`] is true.
pub const WARNING: &str = "warning: some sums of counts exceeded 18446744073709551615 \
     (2^64-1): totals were capped at it, and pictures drawn with every count halved as often \
     as needed to fit (shares are kept)";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shifts_bring_totals_into_range() {
        assert_eq!(shift_to_fit([1, 2]), 0);
        assert_eq!(shift_to_fit([u64::MAX]), 1);
        assert_eq!(shift_to_fit([u64::MAX, u64::MAX]), 2);
        assert_eq!(shift_to_fit([u64::MAX; 5]), 4);
    }

    #[test]
    fn sums_saturate_and_say_so() {
        assert_eq!(sum([1, 2, 3]), 6);
        assert_eq!(add(u64::MAX - 1, 1), u64::MAX);
        assert_eq!(sum([u64::MAX, 5, u64::MAX]), u64::MAX);
        assert!(saturated());
    }
}
