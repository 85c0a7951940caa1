//! What is checked of a perf.data header before linux-perf-data reads it.
//!
//! linux-perf-data (0.13) allocates what a header says without holding it
//! against the file: a feature section's 64-bit size becomes a zeroed
//! buffer of that size, an event description's counts become
//! `Vec::with_capacity`, the attribute count divides by the attribute size.
//! On a damaged file that is a request for exabytes, which aborts the whole
//! process (no panic to catch), or a division by zero. So every section the
//! header names must lie within the file, and the event descriptions and
//! the architecture string within their sections, before the file goes to
//! the parser; a file that fails is damaged, said in the error (found by
//! [`super::check`], `process` falls back to `perf script` for the shard).
//!
//! Every reader of a perf.data header in jobprof (the native symbolizer,
//! the architecture and call-graph facts, the build-id table, the off-CPU
//! test, pprof's build ids) opens the file through [`open_checked`], so no
//! header reaches linux-perf-data unchecked.

use std::fs::File;
use std::path::Path;

use super::error::{Error, HeaderDamage};
use crate::sys::input::Mapping;

/// `HEADER_ARCH`: a `perf_header_string` (`u32` length, then the bytes).
const FEATURE_ARCH: usize = 6;
/// `HEADER_EVENT_DESC`: the event attributes with their names and ids.
const FEATURE_EVENT_DESC: usize = 12;
/// Size of `struct perf_file_header`.
pub(super) const HEADER_SIZE: usize = 104;

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(
        b.get(at..at.checked_add(4)?)?.try_into().ok()?,
    ))
}

/// The little-endian `u64` at `at` of `b`, when `b` holds it.
pub(super) fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(
        b.get(at..at.checked_add(8)?)?.try_into().ok()?,
    ))
}

/// Opens and maps the perf.data file `data` and checks its header
/// ([`check`]) before any parser sees it: `Err` (naming the file when it
/// cannot be opened) for a file that is not a little-endian perf.data file
/// or whose header lies about its sizes.
pub fn open_checked(data: &Path) -> Result<(File, Mapping), Error> {
    let (file, map) = super::open_and_map(data, Some(data))?;
    if map.get(..8) != Some(&b"PERFILE2"[..]) {
        return Err(Error::NotPerfFile);
    }
    check(&map)?;
    Ok((file, map))
}

/// `(offset, size)` at `at` as a range of `b`, when it lies within `b`.
pub(super) fn section(b: &[u8], at: usize) -> Option<std::ops::Range<usize>> {
    let off = usize::try_from(u64_at(b, at)?).ok()?;
    let end = off.checked_add(usize::try_from(u64_at(b, at + 8)?).ok()?)?;
    (end <= b.len()).then_some(off..end)
}

/// Checks the header of the little-endian perf.data file `b` (the whole
/// file) as the module doc says; `Err` says what is damaged.
pub fn check(b: &[u8]) -> Result<(), Error> {
    let bad = |what| Err(Error::DamagedHeader(what));
    if b.len() < HEADER_SIZE {
        return bad(HeaderDamage::Short {
            len: b.len(),
            header: HEADER_SIZE,
        });
    }
    if u64_at(b, 16) == Some(0) {
        return bad(HeaderDamage::ZeroAttrSize);
    }
    let mut data = 0..0;
    for (name, at) in [("attributes", 24), ("data", 40), ("event types", 56)] {
        match section(b, at) {
            Some(r) if at == 40 => data = r,
            Some(_) => {}
            None => return bad(past_end(b, name, at)),
        }
    }
    // One (offset, size) per feature flag set, right after the data
    // section, in the order of the flags.
    let mut table = data.end;
    for feature in (0..256).filter(|&bit| b[72 + bit / 8] & (1 << (bit % 8)) != 0) {
        let Some(r) = section(b, table) else {
            return bad(HeaderDamage::FeaturePastEnd(feature));
        };
        let ok = match feature {
            FEATURE_ARCH => string_fits(&b[r], 0).is_some(),
            FEATURE_EVENT_DESC => event_desc_fits(&b[r]),
            _ => true,
        };
        if !ok {
            return bad(HeaderDamage::FeatureOverfull(feature));
        }
        table += 16;
    }
    Ok(())
}

/// Whether the perf.data file `data` is cut short (its data section ends
/// past the end of the file), read from its header alone: the reason, for
/// a failure's message.
pub fn truncation(data: &Path) -> Option<String> {
    use std::io::Read;
    let mut f = File::open(data).ok()?;
    let len = f.metadata().ok()?.len();
    let mut head = vec![0u8; HEADER_SIZE];
    f.read_exact(&mut head).ok()?;
    let (off, size) = (u64_at(&head, 40)?, u64_at(&head, 48)?);
    let end = off.checked_add(size)?;
    (off <= len && end > len).then(|| {
        HeaderDamage::Truncated {
            end,
            len: usize::try_from(len).unwrap_or(usize::MAX),
        }
        .to_string()
    })
}

/// Why section `name` (its offset and size at `at`) does not fit in `b`: a
/// data section that starts within the file but ends past it is a file
/// cut short ([`HeaderDamage::Truncated`]).
fn past_end(b: &[u8], name: &'static str, at: usize) -> HeaderDamage {
    let (Some(off), Some(size)) = (u64_at(b, at), u64_at(b, at + 8)) else {
        return HeaderDamage::SectionPastEnd(name);
    };
    match off.checked_add(size) {
        Some(end) if name == "data" && off <= b.len() as u64 => {
            HeaderDamage::Truncated { end, len: b.len() }
        }
        _ => HeaderDamage::SectionPastEnd(name),
    }
}

/// The end of the `perf_header_string` at `at` of `s`, when it fits.
fn string_fits(s: &[u8], at: usize) -> Option<usize> {
    let len = usize::try_from(u32_at(s, at)?).ok()?;
    let end = at.checked_add(4)?.checked_add(len)?;
    (end <= s.len()).then_some(end)
}

/// Whether the `HEADER_EVENT_DESC` section `s` holds what its counts say:
/// `nr` events of an attribute of `attr_size` bytes, a count of ids, a
/// name and the ids each.
fn event_desc_fits(s: &[u8]) -> bool {
    let (Some(nr), Some(attr_size)) = (u32_at(s, 0), u32_at(s, 4)) else {
        return false;
    };
    let mut at = 8usize;
    for _ in 0..nr {
        let Some(ids_at) = at.checked_add(attr_size as usize) else {
            return false;
        };
        let Some(nr_ids) = u32_at(s, ids_at) else {
            return false;
        };
        let Some(name_end) = string_fits(s, ids_at + 4) else {
            return false;
        };
        match (nr_ids as usize)
            .checked_mul(8)
            .and_then(|n| name_end.checked_add(n))
        {
            Some(end) if end <= s.len() => at = end,
            _ => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::check;

    /// A header whose data section ends the file, with feature flags
    /// `flags` and the feature table and sections appended.
    fn file(flags: &[usize], sections: &[&[u8]]) -> Vec<u8> {
        let mut b = vec![0u8; 104];
        b[..8].copy_from_slice(b"PERFILE2");
        b[16..24].copy_from_slice(&136u64.to_le_bytes());
        b[40..48].copy_from_slice(&104u64.to_le_bytes());
        for &f in flags {
            b[72 + f / 8] |= 1 << (f % 8);
        }
        let mut at = 104 + 16 * sections.len();
        for s in sections {
            b.extend_from_slice(&(at as u64).to_le_bytes());
            b.extend_from_slice(&(s.len() as u64).to_le_bytes());
            at += s.len();
        }
        for s in sections {
            b.extend_from_slice(s);
        }
        b
    }

    fn event_desc(nr: u32, attr_size: u32, nr_ids: u32, name: &[u8], ids: usize) -> Vec<u8> {
        let mut s = Vec::new();
        s.extend_from_slice(&nr.to_le_bytes());
        s.extend_from_slice(&attr_size.to_le_bytes());
        s.extend(std::iter::repeat_n(0, (attr_size as usize).min(256)));
        s.extend_from_slice(&nr_ids.to_le_bytes());
        s.extend_from_slice(&(name.len() as u32).to_le_bytes());
        s.extend_from_slice(name);
        s.extend(std::iter::repeat_n(0, 8 * ids));
        s
    }

    #[test]
    fn a_header_that_holds_together_passes() {
        let arch = [3u8, 0, 0, 0, b'x', b'8', b'6'];
        let desc = event_desc(1, 128, 2, b"cpu-clock\0", 2);
        assert!(check(&file(&[6, 12], &[&arch, &desc])).is_ok());
    }

    /// Issue 58, item 6: a perf.data cut short is said to be truncated.
    #[test]
    fn a_data_section_cut_short_is_a_truncated_file() {
        let mut cut = file(&[], &[]);
        cut[48..56].copy_from_slice(&5000u64.to_le_bytes());
        let e = check(&cut).unwrap_err().to_string();
        assert!(
            e.contains("the file is truncated") && e.contains("end at byte 5104, but it has 104"),
            "{e}"
        );
    }

    #[test]
    fn a_file_shorter_than_a_header_says_both_sizes() {
        // The message is built from the sizes the error carries (error.rs
        // names nothing of header.rs, which imports it).
        assert_eq!(
            check(&[0; 10]).unwrap_err().to_string(),
            "damaged file header: the file has 10 bytes, a header 104"
        );
    }

    #[test]
    fn sections_past_the_end_or_counts_above_their_section_are_damage() {
        let mut past = file(&[], &[]);
        past[48..56].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(check(&past)
            .unwrap_err()
            .to_string()
            .contains("data section"));
        let mut zero = file(&[], &[]);
        zero[16..24].fill(0);
        assert!(check(&zero)
            .unwrap_err()
            .to_string()
            .contains("attribute size of 0"));
        // A feature flag set with no table entry after the data.
        assert!(check(&file(&[2], &[]))
            .unwrap_err()
            .to_string()
            .contains("feature section 2"));
        let mut huge = file(&[2], &[&[0u8; 8]]);
        let n = huge.len();
        huge[n - 16..n - 8].copy_from_slice(&(1u64 << 62).to_le_bytes());
        assert!(check(&huge).is_err());
        let long_arch = [200u8, 0, 0, 0, b'x'];
        assert!(check(&file(&[6], &[&long_arch])).is_err());
        for desc in [
            event_desc(u32::MAX, 128, 0, b"", 0),
            event_desc(1, u32::MAX, 0, b"", 0),
            event_desc(1, 128, u32::MAX, b"x", 0),
        ] {
            assert!(check(&file(&[12], &[&desc]))
                .unwrap_err()
                .to_string()
                .contains("feature section 12"));
        }
        assert!(check(&[0u8; 50]).is_err());
    }
}
