//! Folding structured samples ([`crate::symbolize::sample`]): what the
//! line-by-line machine (`state.rs`) does with a sample's `perf script`
//! text, done from the sample's fields and its frames, with no text read.
//! Each frame's lines become frame names once per run (per process-name
//! kind: Java tidying depends on it), by the same rules
//! ([`super::frame::frame_names`]) a frame line of the text goes through,
//! so the fold is the one of the run's text.

use super::chain::Chain;
use super::frame::line_names;
use super::state::{FoldState, NO_PNAME};
use super::{cells, Config, Engine};
use crate::symbolize::sample::{Batch, Frame, Frames, Sample};
use crate::text::perf_script;

/// What one frame line folds to: its names' ids (in the line's order) and
/// whether it matched `--skip-after`.
struct LineNames {
    ids: Box<[u32]>,
    skip_after: bool,
}

/// A run's frames as folded, by frame id and by whether the process name
/// starts with `java`.
#[derive(Default)]
pub(super) struct UnitFrames {
    folded: [Vec<Option<Box<[LineNames]>>>; 2],
}

impl Engine {
    /// Folds the samples of `batch`, a batch of unit `unit`'s run whose
    /// frames `frames` holds (`cache`: what they folded to so far), on
    /// this thread, as the text of the batch folds.
    pub(super) fn fold_batch(
        &mut self,
        unit: usize,
        batch: &Batch,
        frames: &Frames,
        cache: &mut UnitFrames,
    ) {
        if batch.reset {
            *cache = UnitFrames::default();
        }
        self.bytes += batch.text_bytes;
        let Some(first) = batch.samples.first() else {
            return;
        };
        self.unit = unit;
        if self.cfg.event.is_none() {
            let ev = &*first.event;
            self.cfg.event = Some(match self.cfg.compat {
                true => ev.to_string(),
                false => perf_script::event_base(ev).to_string(),
            });
        }
        let order = self.next_block();
        let mut st = self.states[0].lock().unwrap_or_else(|e| e.into_inner());
        let mut one = OneSample {
            st: &mut st,
            cfg: &self.cfg,
            frames,
            cache,
        };
        for (i, s) in batch.samples.iter().enumerate() {
            one.fold(s, batch.frames_of(s), order | i as u128);
        }
        st.stacks.flush();
    }
}

/// Folds one sample at a time into a state.
struct OneSample<'a> {
    st: &'a mut FoldState,
    cfg: &'a Config,
    frames: &'a Frames,
    cache: &'a mut UnitFrames,
}

impl OneSample<'_> {
    /// Folds sample `s` with frames `ids` (leaf first); `at`: its place in
    /// the text, for the timeline's cells.
    fn fold(&mut self, s: &Sample, ids: &[u32], at: cells::Order) {
        // The header: in compat mode too an event is always there.
        if !self.cfg.event_matches(&s.event) {
            self.st.counters.filtered += 1;
            return;
        }
        let mut tid = itoa::Buffer::new();
        let tid = tid.format(s.tid);
        let Some(chain) = self.stack(s, tid, ids) else {
            return;
        };
        let (cfg, st) = (self.cfg, &mut *self.st);
        if let Some(cell_ns) = cfg.time_cells {
            let buf = &mut st.thread_buf;
            buf.clear();
            buf.extend_from_slice(s.comm.trim().as_bytes());
            buf.push(0);
            buf.extend_from_slice(tid.as_bytes());
            st.cells.add(
                cell_ns,
                &st.stack_buf,
                &st.thread_buf,
                s.printed_time_ns(),
                at,
            );
        }
        let count = s.period.unwrap_or(1);
        st.stacks.add_deferred(&mut st.stack_buf, count);
        st.counters.samples += 1;
        st.counters.chains.count(chain, count);
    }

    /// Puts the stack of sample `s` (of thread `tid`, frames `ids`, leaf
    /// first) in the state's stack buffer: its process name's id, then the
    /// frames' names, leaf first. `None`: the sample folds to nothing.
    fn stack(&mut self, s: &Sample, tid: &str, ids: &[u32]) -> Option<Chain> {
        let (cfg, st) = (self.cfg, &mut *self.st);
        // The text prints the thread id alone: the process id reads `?`.
        let (pname, java) = st.pname(cfg, s.comm.trim(), "?", tid);
        st.stack_buf.clear();
        st.stack_buf.push(NO_PNAME);
        let mut chain = Chain::default();
        let mut skip_remaining = false;
        'frames: for &id in ids {
            let Some(frame) = self.frames.get(id) else {
                continue;
            };
            let names = lines_of(
                &mut self.cache.folded[java as usize],
                st,
                cfg,
                frame,
                id,
                java,
            );
            for (line, names) in frame.lines.iter().zip(names.iter()) {
                chain.frame_at(frame.address, &line.module);
                st.stack_buf.extend(names.ids.iter().rev());
                if names.skip_after {
                    skip_remaining = true;
                    break 'frames;
                }
            }
        }
        let emit = st.stack_buf.len() > 1 || (!cfg.compat && !skip_remaining && pname != NO_PNAME);
        if !emit {
            return None;
        }
        st.stack_buf[0] = if skip_remaining { NO_PNAME } else { pname };
        Some(chain)
    }
}

/// Structured samples folded one at a time, each to its own stack as
/// `stacks.folded` spells it (`comm;root;...;leaf`): for the outputs that
/// need every sample with its stack (the pprof profile). The same rules as
/// the fold of a run's samples ([`super::StreamFolder::push_samples`]),
/// with the options' event filter fixed.
pub struct SampleStacks {
    cfg: Config,
    st: FoldState,
    cache: UnitFrames,
}

impl SampleStacks {
    /// A folder of samples one at a time with `opts` (their event filter
    /// should name the fold's event: [`super::Stats::event`]).
    pub fn new(opts: &super::Options) -> Self {
        SampleStacks {
            cfg: Config::new(opts),
            st: FoldState::default(),
            cache: UnitFrames::default(),
        }
    }

    /// Forgets what the frames folded to: the frame ids of the samples
    /// that follow number another table (a new run's, or a table started
    /// over: [`Batch::reset`]).
    pub fn start_over(&mut self) {
        self.cache = UnitFrames::default();
    }

    /// The stack of sample `s` (frames `ids`, leaf first, in `frames`)
    /// written into `stack` (cleared first), and its weight; `None` when it
    /// folds to nothing (another event, or no frame and no name).
    pub fn fold(
        &mut self,
        s: &Sample,
        ids: &[u32],
        frames: &Frames,
        stack: &mut String,
    ) -> Option<u64> {
        stack.clear();
        if !self.cfg.event_matches(&s.event) {
            return None;
        }
        let mut tid = itoa::Buffer::new();
        let tid = tid.format(s.tid);
        let mut one = OneSample {
            st: &mut self.st,
            cfg: &self.cfg,
            frames,
            cache: &mut self.cache,
        };
        one.stack(s, tid, ids)?;
        *stack = self.st.render_key(&self.st.stack_buf);
        Some(s.period.unwrap_or(1))
    }
}

/// The names of `frame`'s lines (frame `id` of the run), folded now if
/// they were not before.
fn lines_of<'c>(
    cache: &'c mut Vec<Option<Box<[LineNames]>>>,
    st: &mut FoldState,
    cfg: &Config,
    frame: &Frame,
    id: u32,
    java: bool,
) -> &'c [LineNames] {
    let i = id as usize;
    if cache.len() <= i {
        cache.resize_with(i + 1, || None);
    }
    cache[i].get_or_insert_with(|| {
        let pc = format!("{:x}", frame.address);
        frame
            .lines
            .iter()
            .map(|l| {
                let n = line_names(&pc, l, java, &cfg.frames, &cfg.skip_after);
                LineNames {
                    ids: n.names.iter().map(|n| st.intern(n)).collect(),
                    skip_after: n.skip_after,
                }
            })
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::super::{Folder, Options};
    use crate::symbolize::sample::{Batch, Frame, Frames, Line, Sample};

    /// One sample of thread `comm`, its text as the native symbolizer
    /// prints it.
    fn batch(comm: &str) -> Batch {
        let frame = Frame {
            address: 0x1234,
            lines: vec![Line::new("work+0x4", "/bin/w")].into(),
            function: None,
        };
        let mut text =
            format!("{comm} 77 [001]     1.000001:     250000 cpu-clock: \n").into_bytes();
        frame.write_text(&mut text);
        text.push(b'\n');
        Batch {
            new_frames: vec![frame],
            samples: vec![Sample {
                comm: comm.into(),
                tid: 77,
                cpu: Some(1),
                time_ns: Some(1_000_001_000),
                period: Some(250_000),
                event: "cpu-clock".into(),
                frames: 0..1,
            }],
            stacks: vec![0],
            text_bytes: text.len() as u64,
            text,
            ..Batch::default()
        }
    }

    /// A thread name with a number word in it (`pool 2 worker`): its text
    /// reads as the thread `pool` of id 2, so today's fold of the text
    /// loses the name's rest; the structured sample keeps it whole.
    #[test]
    fn a_thread_name_with_a_number_word_keeps_its_whole_name() {
        let folder = Folder::new(Options::default());
        let mut b = batch("pool 2 worker");
        let mut text = folder.stream();
        text.push_whole(&b.text);
        assert_eq!(text.finish().to_bytes(), b"pool;work 250000\n");
        let mut frames = Frames::default();
        frames.take(&mut b);
        let mut s = folder.stream();
        s.push_samples(0, &b, &frames);
        assert_eq!(s.finish().to_bytes(), b"pool_2_worker;work 250000\n");
        // An ordinary name folds alike either way.
        let mut b = batch("duckdb worker");
        let mut text = folder.stream();
        text.push_whole(&b.text);
        let mut frames = Frames::default();
        frames.take(&mut b);
        let mut s = folder.stream();
        s.push_samples(0, &b, &frames);
        assert_eq!(text.finish().to_bytes(), s.finish().to_bytes());
    }
}
