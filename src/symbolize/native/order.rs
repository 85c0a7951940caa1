//! The order in which inline frames named by what was asked before are
//! named: binutils names a function without a linkage name by the lookups
//! before it ([`super::inline`]'s `names`), and perf asks each address
//! once, in sample order (callee first), one `perf script` run per shard.
//!
//! [`ShardOrder`] keeps that state for one shard (per DSO, the first
//! answer for each address), shared by nothing else: not by another
//! shard or capture reading the same DSO, whatever order they run in. The
//! time slices of a shard are replayed side by side, so a slice names such
//! addresses itself only once every slice before it has finished
//! ([`ShardOrder::named_before`]); until then its replay holds the frames
//! and their text (`run/held.rs`) and names them in its own sample order
//! when its turn comes. The output is then the same whatever the slicing
//! and the threads' timing.

use std::sync::{Arc, Condvar, Mutex};

use rustc_hash::FxHashMap;

use super::inline::{self, Named, Record};
use crate::symbolize::sample::Line;

/// A user frame whose names depend on the order of lookups: what naming
/// it takes ([`ShardOrder::lines`]).
#[derive(Debug, Clone)]
pub struct Ordered {
    /// The DSO's identity in the shard and the address looked up (the
    /// file offset): perf asks each once.
    pub key: (usize, u64),
    /// addr2line's records at the address.
    pub records: Vec<Record>,
    /// The ELF symbol (raw) and its demangled name, the offset into it and
    /// the DSO as printed.
    pub symbol: String,
    pub base: String,
    pub offset: u64,
    pub dso: String,
}

/// A user frame's lines, or what naming them in order takes.
#[derive(Debug, Clone)]
pub enum Naming {
    Lines(Arc<[Line]>),
    Ordered(Box<Ordered>),
}

/// One shard's naming state and how far its time slices have named.
#[derive(Debug, Default)]
pub struct ShardOrder {
    state: Mutex<State>,
    /// Every sample before this time is named (`u64::MAX`: all).
    covered: Mutex<u64>,
    advanced: Condvar,
}

#[derive(Debug, Default)]
struct State {
    /// binutils' state per DSO.
    named: FxHashMap<usize, Named>,
    /// The lines each address got on its first lookup.
    answers: FxHashMap<(usize, u64), Arc<[Line]>>,
}

impl ShardOrder {
    /// The lines of `frame`, named now: its first answer when it was asked
    /// before, else binutils' names after every lookup so far.
    pub fn lines(&self, frame: &Ordered) -> Arc<[Line]> {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(l) = st.answers.get(&frame.key) {
            return l.clone();
        }
        let named = st.named.entry(frame.key.0).or_default();
        let names = named.names(frame.records.clone(), &frame.symbol);
        let lines: Arc<[Line]> =
            inline::frame_lines(&names, &frame.base, frame.offset, &frame.dso).into();
        st.answers.insert(frame.key, lines.clone());
        lines
    }

    /// Whether every sample before time `start` is named.
    pub fn named_before(&self, start: u64) -> bool {
        *self.covered.lock().unwrap_or_else(|e| e.into_inner()) >= start
    }

    /// Waits until every sample before time `start` is named: the slices
    /// before it must have been started (the pipeline starts a shard's
    /// slices in time order).
    pub fn wait(&self, start: u64) {
        let mut c = self.covered.lock().unwrap_or_else(|e| e.into_inner());
        while *c < start {
            c = self.advanced.wait(c).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Every sample up to time `end` (inclusive; `None`: all) is named,
    /// or will never be (its slice failed).
    pub fn finished(&self, end: Option<u64>) {
        let end = end.map_or(u64::MAX, |e| e.saturating_add(1));
        let mut c = self.covered.lock().unwrap_or_else(|e| e.into_inner());
        *c = (*c).max(end);
        self.advanced.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(addr: u64, name: &str, die: usize) -> Ordered {
        Ordered {
            key: (1, addr),
            // Inlined into `loop<long int>`, the function holding the code.
            records: [(name, die), ("loop<long int>", 1)]
                .map(|(n, d)| Record {
                    name: Some(n.into()),
                    linkage: false,
                    die: Some(d),
                })
                .to_vec(),
            symbol: "_ZSt1fv".into(),
            base: "std::f".into(),
            offset: addr,
            dso: "/x".into(),
        }
    }

    #[test]
    fn each_address_keeps_its_first_answer_and_slices_wait_their_turn() {
        let o = ShardOrder::default();
        // An inlined instance: by the symbol on its first lookup only.
        let first = o.lines(&frame(0x10, "operator()", 7));
        // (perf's demangling has no parameters.)
        assert_eq!(&*first[0].symbol, "std::f+0x10");
        assert_eq!(&*first[0].module, "/x");
        let other = o.lines(&frame(0x14, "operator()", 7));
        assert_eq!(&*other[0].symbol, "operator()+0x14");
        assert!(Arc::ptr_eq(&o.lines(&frame(0x10, "operator()", 7)), &first));
        assert!(o.named_before(0) && !o.named_before(5));
        o.finished(Some(4));
        assert!(o.named_before(5) && !o.named_before(6));
        std::thread::scope(|s| {
            let waiting = s.spawn(|| o.wait(u64::MAX));
            o.finished(None);
            waiting.join().unwrap();
        });
    }
}
