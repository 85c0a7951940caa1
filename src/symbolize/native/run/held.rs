//! A time slice's frames whose inline names depend on what its shard asked
//! before ([`super::super::order`]), held until every slice before it has
//! finished: its batches are kept back with a gap in their text where each
//! such frame goes, and named in the slice's sample order, spliced in and
//! handed on when its turn comes. A slice whose turn has come (the first,
//! or a shard not cut into slices) names them as it meets them.

use std::sync::Arc;

use rustc_hash::FxHashMap;

use super::{Batch, Error, Frame, Line, Run};
use crate::symbolize::native::order::{Ordered, ShardOrder};
use crate::symbolize::perf::TimeSlice;

/// Text a slice holds back before it waits for its turn.
const HELD_BYTES: usize = 64 << 20;

/// A frame met before the slice's turn.
struct Pending {
    frame: Box<Ordered>,
    /// Its id in the frame table, and the table's epoch then.
    id: u32,
    epoch: u32,
    /// The batch (counted from the first held) and the place in its
    /// `new_frames`.
    batch: usize,
    at: usize,
    /// The ELF symbol's own line, for a frame whose lines are all inlined.
    function: Option<Line>,
}

/// One slice's naming turn and what it holds until then.
pub(super) struct Held {
    order: Arc<ShardOrder>,
    /// The slice's first and last sample time (`None`: open).
    start: u64,
    end: Option<u64>,
    live: bool,
    /// Held batches, each with its gaps: (text offset, pending index).
    batches: Vec<(Batch, Vec<(usize, u32)>)>,
    bytes: usize,
    pending: Vec<Pending>,
    /// The gaps in the text being written.
    gaps: Vec<(usize, u32)>,
    /// Pending index by frame id, in the frame table's current epoch.
    ids: FxHashMap<u32, u32>,
    epoch: u32,
    finished: bool,
}

impl Held {
    /// The naming turn of `slice` (`None`: the whole shard) of a shard
    /// named in `order`.
    pub fn new(order: Arc<ShardOrder>, slice: Option<&TimeSlice>) -> Held {
        let start = slice.and_then(|s| s.start_ns).unwrap_or(0);
        Held {
            live: order.named_before(start),
            order,
            start,
            end: slice.and_then(|s| s.end_ns),
            batches: Vec::new(),
            bytes: 0,
            pending: Vec::new(),
            gaps: Vec::new(),
            ids: FxHashMap::default(),
            epoch: 0,
            finished: false,
        }
    }

    /// Whether frames are named as met.
    pub fn live(&self) -> bool {
        self.live
    }

    /// Names `frame` now (its slice's turn has come).
    pub fn lines(&self, frame: &Ordered) -> Arc<[Line]> {
        self.order.lines(frame)
    }

    /// The pending frame of table id `id`, if it is one.
    pub fn pending(&self, id: u32) -> Option<u32> {
        self.ids.get(&id).copied()
    }

    /// A gap for pending frame `p` at `at` in the text being written.
    pub fn gap(&mut self, at: usize, p: u32) {
        self.gaps.push((at, p));
    }

    /// Holds `frame`, table id `id`, the `at`th new frame of the batch
    /// being gathered; its gap is at `text_at`.
    pub fn hold(&mut self, frame: Box<Ordered>, id: u32, at: usize, function: Option<Line>) -> u32 {
        let p = self.pending.len() as u32;
        self.pending.push(Pending {
            frame,
            id,
            epoch: self.epoch,
            batch: self.batches.len(),
            at,
            function,
        });
        self.ids.insert(id, p);
        p
    }

    /// The frame table starts over.
    pub fn reset(&mut self) {
        self.ids.clear();
        self.epoch += 1;
    }

    /// The pending frames named now, in the order met, and their text.
    fn name_pending(&self) -> (Vec<Frame>, Vec<Vec<u8>>) {
        let frames: Vec<Frame> = (self.pending.iter())
            .map(|p| {
                let lines = self.order.lines(&p.frame);
                let all_inlined = lines.iter().all(Line::is_inlined);
                Frame {
                    address: p.frame.key.1,
                    lines,
                    function: p.function.clone().filter(|_| all_inlined),
                }
            })
            .collect();
        let texts = (frames.iter())
            .map(|f| {
                let mut t = Vec::with_capacity(96);
                f.write_text(&mut t);
                t
            })
            .collect();
        (frames, texts)
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        // A slice that failed: the ones after it go on without it.
        if !self.finished {
            self.order.finished(self.end);
        }
    }
}

/// `text` with each gap filled with its pending frame's text.
fn fill(text: &[u8], gaps: &[(usize, u32)], texts: &[Vec<u8>]) -> Vec<u8> {
    let extra: usize = gaps.iter().map(|&(_, p)| texts[p as usize].len()).sum();
    let mut out = Vec::with_capacity(text.len() + extra);
    let mut from = 0;
    for &(at, p) in gaps {
        out.extend_from_slice(&text[from..at]);
        out.extend_from_slice(&texts[p as usize]);
        from = at;
    }
    out.extend_from_slice(&text[from..]);
    out
}

impl Run<'_> {
    /// Hands on the batch gathered, or holds it until the slice's turn
    /// (waiting for it when too much is held).
    pub(super) fn hand_on(
        &mut self,
        batch: Batch,
        consume: &mut impl FnMut(Batch) -> std::io::Result<()>,
    ) -> Result<(), Error> {
        if self.held.live {
            self.bytes += batch.text.len() as u64;
            return consume(batch).map_err(Error::Consume);
        }
        let gaps = std::mem::take(&mut self.held.gaps);
        self.held.bytes += batch.text.len();
        self.held.batches.push((batch, gaps));
        if self.held.bytes >= HELD_BYTES {
            self.held.order.wait(self.held.start);
        }
        if self.held.order.named_before(self.held.start) {
            self.take_turn(consume)?;
        }
        Ok(())
    }

    /// The slice's turn: names the pending frames in the order met, fills
    /// their gaps and hands on the held batches.
    fn take_turn(
        &mut self,
        consume: &mut impl FnMut(Batch) -> std::io::Result<()>,
    ) -> Result<(), Error> {
        let held = &mut self.held;
        held.live = true;
        let (frames, texts) = held.name_pending();
        for (p, text) in held.pending.iter().zip(&texts) {
            if p.epoch == held.epoch {
                self.table[p.id as usize] = text.clone().into_boxed_slice();
            }
        }
        let batches = std::mem::take(&mut held.batches);
        let pending = std::mem::take(&mut held.pending);
        let gaps = std::mem::take(&mut held.gaps);
        held.ids.clear();
        held.bytes = 0;
        let place = |b: &mut Batch, n: usize| {
            for (p, f) in pending.iter().zip(&frames).filter(|(p, _)| p.batch == n) {
                b.new_frames[p.at] = f.clone();
            }
        };
        let n = batches.len();
        for (i, (mut batch, gaps)) in batches.into_iter().enumerate() {
            place(&mut batch, i);
            let text = fill(&batch.text, &gaps, &texts);
            self.sym.recycle(std::mem::replace(&mut batch.text, text));
            batch.text_bytes = batch.text.len() as u64;
            self.bytes += batch.text_bytes;
            consume(batch).map_err(Error::Consume)?;
        }
        place(&mut self.batch, n);
        self.out = fill(&self.out, &gaps, &texts);
        Ok(())
    }

    /// The end of the slice: waits for its turn, hands on what it held and
    /// lets the next slice take its turn.
    pub(super) fn end_turn(
        &mut self,
        consume: &mut impl FnMut(Batch) -> std::io::Result<()>,
    ) -> Result<(), Error> {
        if !self.held.live {
            self.held.order.wait(self.held.start);
            self.take_turn(consume)?;
        }
        self.flush(consume)?;
        self.held.finished = true;
        self.held.order.finished(self.held.end);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gaps_are_filled_in_place() {
        let texts = vec![b"AA".to_vec(), b"B".to_vec()];
        assert_eq!(fill(b"xyz", &[(0, 1), (2, 0), (3, 1)], &texts), b"BxyAAzB");
    }
}
