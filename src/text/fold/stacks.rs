//! Stack counts keyed by id sequences: the fold's one hot table.
//!
//! [`StackCounts`] keeps every distinct stack of interned frame ids back to
//! back in one arena behind an open-addressing table, and counts a sample
//! one sample late so that its slot can be prefetched while the next sample
//! is parsed. Nothing here knows about `perf script` text.

/// Stack counts keyed by id sequences. Keys live back to back in one
/// arena and are compared inline, so counting a sample is one probe of a
/// dense table, with no pointer to chase and no memcmp call.
///
/// The table is open-addressing (power-of-two size, linear probing) rather
/// than hashbrown's, because on real captures (hundreds of thousands of
/// distinct stacks) its probes miss the cache: knowing where a probe will
/// start lets [`StackCounts::add_deferred`] prefetch that slot and do the
/// probe one sample later, while the next sample is being parsed.
#[derive(Default)]
pub(crate) struct StackCounts {
    /// Empty, or a power of two long; a slot with `len == 0` is free (keys
    /// are never empty).
    slots: Vec<StackSlot>,
    len: usize,
    arena: Vec<u32>,
    /// The stack handed to `add_deferred` and not counted yet.
    pending: Vec<u32>,
    pending_hash: u64,
    pending_count: u64,
}

#[derive(Clone, Copy, Default)]
struct StackSlot {
    hash: u64,
    offset: u32,
    len: u32,
    count: u64,
}

impl StackCounts {
    /// Adds `count` to the stack `key`.
    pub(crate) fn add(&mut self, key: &[u32], count: u64) {
        self.add_hashed(hash_ids(key), key, count);
    }

    /// Adds `count` to the stack `key` later: prefetches the key's slot now
    /// and counts the previously deferred stack. Takes the key's buffer
    /// (no copy) and leaves an empty one in its place.
    /// [`StackCounts::flush`] must follow the last call before the counts
    /// are read.
    #[inline]
    pub(crate) fn add_deferred(&mut self, key: &mut Vec<u32>, count: u64) {
        let hash = hash_ids(key);
        if !self.slots.is_empty() {
            let slot = &self.slots[hash as usize & (self.slots.len() - 1)];
            prefetch_read(slot as *const StackSlot as *const i8);
        }
        self.flush();
        std::mem::swap(&mut self.pending, key);
        self.pending_hash = hash;
        self.pending_count = count;
    }

    /// Counts the deferred stack, if any.
    #[inline]
    pub(crate) fn flush(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let key = std::mem::take(&mut self.pending);
        self.add_hashed(self.pending_hash, &key, self.pending_count);
        // Hand the buffer back: no allocation per sample.
        self.pending = key;
        self.pending.clear();
    }

    #[inline]
    fn add_hashed(&mut self, hash: u64, key: &[u32], count: u64) {
        debug_assert!(!key.is_empty(), "stack keys are never empty");
        if (self.len + 1) * 8 > self.slots.len() * 5 {
            self.grow();
        }
        let mask = self.slots.len() - 1;
        let mut i = hash as usize & mask;
        loop {
            let s = &mut self.slots[i];
            if s.len == 0 {
                break;
            }
            if s.hash == hash
                && s.len as usize == key.len()
                && ids_eq(&self.arena[s.offset as usize..][..key.len()], key)
            {
                s.count = crate::sys::counts::add(s.count, count);
                return;
            }
            i = (i + 1) & mask;
        }
        let offset = self.arena.len() as u32;
        self.arena.extend_from_slice(key);
        self.slots[i] = StackSlot {
            hash,
            offset,
            len: key.len() as u32,
            count,
        };
        self.len += 1;
    }

    /// Doubles the table (at most 5/8 full keeps probe runs short).
    fn grow(&mut self) {
        let size = (self.slots.len() * 2).max(1024);
        let old = std::mem::replace(&mut self.slots, vec![StackSlot::default(); size]);
        let mask = size - 1;
        for s in old.into_iter().filter(|s| s.len != 0) {
            let mut i = s.hash as usize & mask;
            while self.slots[i].len != 0 {
                i = (i + 1) & mask;
            }
            self.slots[i] = s;
        }
    }

    /// Every `(key, count)`.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&[u32], u64)> + '_ {
        debug_assert!(self.pending.is_empty(), "flush before reading");
        self.slots
            .iter()
            .filter(|s| s.len != 0)
            .map(|s| (&self.arena[s.offset as usize..][..s.len as usize], s.count))
    }

    /// Number of distinct stacks.
    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

/// A read prefetch into all cache levels; a no-op off x86-64.
#[inline(always)]
fn prefetch_read(p: *const i8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is only a hint and never faults, whatever the
    // address; `p` points into a live slice anyway.
    unsafe {
        core::arch::x86_64::_mm_prefetch(p, core::arch::x86_64::_MM_HINT_T0);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

const FX_K: u64 = 0xf135_7aea_2e62_a9c5;

/// An Fx-style hash of an id sequence, two ids per step.
#[inline]
fn hash_ids(ids: &[u32]) -> u64 {
    let mut h = (ids.len() as u64).wrapping_mul(FX_K);
    let mut pairs = ids.chunks_exact(2);
    for p in &mut pairs {
        let w = (p[0] as u64) | ((p[1] as u64) << 32);
        h = (h.rotate_left(26) ^ w).wrapping_mul(FX_K);
    }
    if let [last] = pairs.remainder() {
        h = (h.rotate_left(26) ^ *last as u64).wrapping_mul(FX_K);
    }
    h ^ (h >> 29)
}

/// Equality of two equally long id sequences without a memcmp call.
#[inline]
fn ids_eq(a: &[u32], b: &[u32]) -> bool {
    a.iter().zip(b).all(|(x, y)| x == y)
}

#[cfg(test)]
mod tests {
    use super::StackCounts;

    fn sorted(s: &StackCounts) -> Vec<(Vec<u32>, u64)> {
        let mut v: Vec<_> = s.iter().map(|(k, c)| (k.to_vec(), c)).collect();
        v.sort();
        v
    }

    #[test]
    fn deferred_adds_count_the_same_as_direct_adds_once_flushed() {
        // Enough distinct stacks to make the table grow several times
        // while adds are pending, and repeats to hit existing entries.
        let keys: Vec<Vec<u32>> = (0..5000u32)
            .map(|i| (0..(i % 7 + 1)).map(|j| i % 1300 + j).collect())
            .collect();
        let (mut direct, mut deferred) = (StackCounts::default(), StackCounts::default());
        for (i, k) in keys.iter().enumerate() {
            direct.add(k, i as u64 + 1);
            let mut buf = k.clone();
            deferred.add_deferred(&mut buf, i as u64 + 1);
            assert!(buf.is_empty(), "the buffer handed back is empty");
        }
        deferred.flush();
        assert_eq!(direct.len(), deferred.len());
        assert_eq!(sorted(&direct), sorted(&deferred));
        // A second flush counts nothing twice.
        deferred.flush();
        assert_eq!(sorted(&direct), sorted(&deferred));
    }
}
