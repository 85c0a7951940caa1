//! Time cells kept beside the stack counts, when
//! [`super::Options::time_cells`] asks for them: per sample with a time,
//! its cell (time / cell width), its thread (comm and TID as the header
//! prints them) and its stack, counted per (cell, stack, thread), so that
//! the flamegraph page's timeline comes from the fold's own walk instead
//! of a second fold of every sample.
//!
//! Each folding thread keeps its own [`Cells`] (stacks by the thread's
//! frame ids), merged at the end as the stack counts are. Chunks are
//! folded in any order, so every stack and thread remembers the position
//! in the text ([`Order`]) where it was first seen: [`TimeCells`] lists
//! them in that order, the order a walk over the text would meet them.

use std::hash::BuildHasherDefault;

use rustc_hash::FxHasher;

type FxMap<K, V> = std::collections::HashMap<K, V, BuildHasherDefault<FxHasher>>;

/// A sample's position in the text: (unit, block, chunk, sample), 32 bits
/// each, most significant first. Units are the inputs in order (the
/// archive's parts), blocks the pieces of one unit in order.
pub(crate) type Order = u128;

/// The timeline's counts, for the stacks and threads of a fold: what
/// [`super::Folded::cells`] holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TimeCells {
    /// Width of a cell, in nanoseconds.
    pub cell_ns: u64,
    /// The folded stacks of the timed samples, as `stacks.folded` names
    /// them, in the order the text first has them.
    pub stacks: Vec<String>,
    /// The threads of the timed samples, (comm, TID) as the headers print
    /// them, in the order the text first has them.
    pub threads: Vec<(String, String)>,
    /// `(cell, stack, thread, samples)`: indexes into `stacks` and
    /// `threads`; in no particular order.
    pub counts: Vec<(u64, u32, u32, u32)>,
    /// Samples folded without a time.
    pub untimed: u64,
}

/// One folding thread's cells.
#[derive(Default)]
pub(crate) struct Cells {
    /// Stacks by key (the fold's `[pname, leaf, ..., root]` ids): local id
    /// and first position.
    stacks: FxMap<Box<[u32]>, (u32, Order)>,
    /// Threads by `comm \0 tid`: local id and first position.
    threads: FxMap<Box<[u8]>, (u32, Order)>,
    counts: FxMap<(u64, u32, u32), u32>,
    untimed: u64,
}

impl Cells {
    /// Counts a folded sample with stack `key`, thread `thread` (`comm \0
    /// tid`) and `time` (`None`: only counted), seen at `at`.
    pub(crate) fn add(
        &mut self,
        cell_ns: u64,
        key: &[u32],
        thread: &[u8],
        time: Option<u64>,
        at: Order,
    ) {
        let Some(t) = time else {
            self.untimed += 1;
            return;
        };
        let stack = first_seen(&mut self.stacks, key, at);
        let thread = first_seen(&mut self.threads, thread, at);
        *self.counts.entry((t / cell_ns, stack, thread)).or_insert(0) += 1;
    }

    /// Adds `other`, whose frame ids `remap` turns into this state's.
    pub(crate) fn merge(&mut self, other: Cells, remap: impl Fn(u32) -> u32) {
        let mut stack_ids = vec![0u32; other.stacks.len()];
        let mut key = Vec::new();
        for (k, (id, at)) in other.stacks {
            key.clear();
            key.extend(k.iter().map(|&i| remap(i)));
            stack_ids[id as usize] = first_seen(&mut self.stacks, &key, at);
        }
        let mut thread_ids = vec![0u32; other.threads.len()];
        for (k, (id, at)) in other.threads {
            thread_ids[id as usize] = first_seen(&mut self.threads, &k, at);
        }
        for ((cell, s, t), n) in other.counts {
            let key = (cell, stack_ids[s as usize], thread_ids[t as usize]);
            let c = self.counts.entry(key).or_insert(0);
            *c = c.saturating_add(n);
        }
        self.untimed += other.untimed;
    }

    /// The cells with stacks named by `render` (a stack key's folded
    /// text), stacks and threads in first-seen order.
    pub(crate) fn finish(self, cell_ns: u64, render: impl Fn(&[u32]) -> String) -> TimeCells {
        let (stack_keys, stack_pos) = in_first_order(self.stacks);
        let (thread_keys, thread_pos) = in_first_order(self.threads);
        let thread = |k: &[u8]| {
            let s = String::from_utf8_lossy(k);
            let (comm, tid) = s.split_once('\0').unwrap_or((&s, ""));
            let comm = crate::sys::printable::printable_text(comm);
            (comm.into_owned(), tid.to_string())
        };
        TimeCells {
            cell_ns,
            stacks: stack_keys.iter().map(|k| render(k)).collect(),
            threads: thread_keys.iter().map(|k| thread(k)).collect(),
            counts: self
                .counts
                .into_iter()
                .map(|((c, s, t), n)| (c, stack_pos[s as usize], thread_pos[t as usize], n))
                .collect(),
            untimed: self.untimed,
        }
    }
}

/// The local id of `key` in `map`, added when new; its first position
/// moved back to `at` when that is earlier.
fn first_seen<T: Eq + std::hash::Hash + ?Sized>(
    map: &mut FxMap<Box<T>, (u32, Order)>,
    key: &T,
    at: Order,
) -> u32
where
    Box<T>: std::borrow::Borrow<T> + for<'a> From<&'a T>,
{
    if let Some((id, first)) = map.get_mut(key) {
        *first = (*first).min(at);
        return *id;
    }
    let id = map.len() as u32;
    map.insert(Box::from(key), (id, at));
    id
}

/// The keys of `map` by first position, and each local id's place in
/// that list.
fn in_first_order<T: ?Sized>(map: FxMap<Box<T>, (u32, Order)>) -> (Vec<Box<T>>, Vec<u32>) {
    let mut all: Vec<(Order, u32, Box<T>)> =
        map.into_iter().map(|(k, (id, at))| (at, id, k)).collect();
    all.sort_unstable_by_key(|e| e.0);
    let mut pos = vec![0u32; all.len()];
    for (i, (_, id, _)) in all.iter().enumerate() {
        pos[*id as usize] = i as u32;
    }
    (all.into_iter().map(|e| e.2).collect(), pos)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NO_PNAME: u32 = u32::MAX;

    #[test]
    fn stacks_and_threads_come_out_in_first_seen_order_whatever_the_merge() {
        // Two threads' cells: the second saw its samples earlier in the
        // text (unit 0) than the first (unit 1).
        let (mut a, mut b) = (Cells::default(), Cells::default());
        a.add(10, &[0, 1], b"w\x001", Some(25), 1 << 96);
        a.add(10, &[0, 2], b"w\x002", Some(5), (1 << 96) + 1);
        a.add(10, &[0, 2], b"w\x002", None, (1 << 96) + 2);
        b.add(10, &[5, 6], b"w\x002", Some(7), 3);
        b.add(10, &[NO_PNAME, 6], b"w\x001", Some(8), 4);
        // b's ids 5 and 6 are a's 0 and 2.
        let ids = [9, 9, 9, 9, 9, 0, 2];
        a.merge(b, |i| if i == NO_PNAME { i } else { ids[i as usize] });
        let names = ["w", "a", "b"];
        let render = |k: &[u32]| {
            k.iter()
                .map(|&i| {
                    if i == NO_PNAME {
                        "-"
                    } else {
                        names[i as usize]
                    }
                })
                .collect::<Vec<_>>()
                .join(";")
        };
        let mut c = a.finish(10, render);
        c.counts.sort_unstable();
        assert_eq!(c.stacks, ["w;b", "-;b", "w;a"]);
        assert_eq!(
            c.threads,
            [("w".into(), "2".into()), ("w".into(), "1".into())]
        );
        assert_eq!(c.counts, [(0, 0, 0, 2), (0, 1, 1, 1), (2, 2, 1, 1)]);
        assert_eq!(c.untimed, 1);
    }
}
