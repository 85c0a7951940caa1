//! The off-CPU accounting of one shard's records, read from the
//! symbolizing pass's structured samples as they stream ([`Batch`] with
//! its [`Tasks`]): each sample's header and its stack named as the
//! off-CPU profiles name frames, the switch and task records, in record
//! order, go straight into the shard's [`Accounts`] (no window is needed
//! for that: [`Accounts::finish`] takes it). A shard read in several time
//! slices at once is read in order all the same: a later slice's records
//! are held, a few words each, until the slices before it were read
//! ([`ShardLog::go_live`]). Each distinct stack is named once.

use std::sync::Arc;

use rustc_hash::FxHashMap;

use super::account::{Accounts, SampleOf};
use super::parse::{Event, SETTINGS};
use crate::symbolize::sample::{Batch, Frame, Frames, Task};
use crate::text::fold::frame::line_names;

/// A sample's header fields that repeat (thread name, event, state).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Kind {
    comm: Arc<str>,
    event: Arc<str>,
    prev_state: Option<Box<str>>,
}

/// One record held (a few words: names and stacks are interned).
#[derive(Debug, Clone, Copy)]
enum Held {
    Sample {
        tid: u32,
        /// Index in [`ShardLog::stacks`].
        stack: u32,
        /// Index in [`ShardLog::kinds`].
        kind: u32,
        time: u64,
        period: u64,
    },
    Switch {
        tid: u32,
        out: bool,
        preempt: bool,
        time: u64,
    },
    /// A name: index in [`ShardLog::names`].
    Comm {
        tid: u32,
        comm: u32,
        time: u64,
    },
    Fork {
        tid: u32,
        time: u64,
    },
    Exit {
        tid: u32,
        time: u64,
    },
}

/// The off-CPU accounting of one shard (of one time slice of it, and
/// those after it once it was read), fed from the symbolizing pass.
#[derive(Debug, Default)]
pub struct ShardLog {
    /// The shard's accounts, once this slice's records go there.
    live: Option<Accounts>,
    /// Records held until then.
    held: Vec<Held>,
    /// Each distinct stack: each frame name after a `;`, root first.
    stacks: Vec<Box<str>>,
    /// Stacks by their frame ids in the run's current frame table.
    by_ids: FxHashMap<Box<[u32]>, u32>,
    /// Each frame's names, as they appear in a stack, by frame id.
    names_of_frames: Vec<Option<Box<str>>>,
    kinds: Vec<Kind>,
    kind_ids: FxHashMap<Kind, u32>,
    names: Vec<Box<str>>,
}

impl ShardLog {
    /// The accounting of a shard's first (or only) slice: its records
    /// go to `accounts` as they come.
    pub fn live(accounts: Accounts) -> ShardLog {
        ShardLog {
            live: Some(accounts),
            ..ShardLog::default()
        }
    }

    /// Whether the records go to the accounts as they come.
    pub fn is_live(&self) -> bool {
        self.live.is_some()
    }

    /// Takes in `batch`, the next of a run whose frame table `frames` is
    /// (its new frames already taken in: [`Frames::take`]).
    pub fn push(&mut self, batch: &Batch, frames: &Frames) {
        if batch.reset {
            self.by_ids.clear();
            self.names_of_frames.clear();
        }
        let Some(tasks) = &batch.tasks else { return };
        let mut records = tasks.records.iter().peekable();
        let mut states = tasks.states.iter().peekable();
        for (i, s) in batch.samples.iter().enumerate() {
            let i = i as u32;
            while let Some((_, t)) = records.next_if(|(before, _)| *before <= i) {
                self.task(t);
            }
            let prev_state = states
                .next_if(|(at, _)| *at == i)
                .and_then(|(_, p)| p.clone());
            // Without a time `perf script` prints nothing the accounting
            // reads; a sample without a thread still bounds the window.
            let Some(time) = s.time_ns else { continue };
            let stack = self.stack(batch.frames_of(s), frames);
            let kind = self.kind(Kind {
                comm: s.comm.clone(),
                event: s.event.clone(),
                prev_state,
            });
            let tid = u32::try_from(s.tid).unwrap_or(u32::MAX);
            let period = s.period.unwrap_or(1);
            self.record(Held::Sample {
                tid,
                stack,
                kind,
                time,
                period,
            });
        }
        for (_, t) in records {
            self.task(t);
        }
    }

    /// The slices before this one were read into `accounts`: the records
    /// held go there, and those to come.
    pub fn go_live(&mut self, mut accounts: Accounts) {
        for r in std::mem::take(&mut self.held) {
            self.feed(&mut accounts, r);
        }
        self.live = Some(accounts);
    }

    /// The accounts, when live.
    pub fn into_accounts(self) -> Option<Accounts> {
        self.live
    }

    /// The records held, as [`super::parse::LineParser`] reads them from
    /// `perf script --ns --show-switch-events --show-task-events` text,
    /// without the samples' stacks (for comparing the two).
    pub fn events(&self) -> Vec<Event> {
        self.held.iter().filter_map(|r| self.event(*r)).collect()
    }

    fn record(&mut self, r: Held) {
        match self.live.take() {
            Some(mut acc) => {
                self.feed(&mut acc, r);
                self.live = Some(acc);
            }
            None => self.held.push(r),
        }
    }

    fn feed(&self, acc: &mut Accounts, r: Held) {
        match r {
            Held::Sample {
                tid,
                stack,
                kind,
                time,
                period,
            } => {
                let k = &self.kinds[kind as usize];
                // The text's reader skips a sample without a thread.
                let sample = |tid| SampleOf {
                    tid,
                    comm: k.comm.trim(),
                    time,
                    event: &k.event,
                    period,
                };
                match tid {
                    u32::MAX => acc.saw_sample(time),
                    tid => acc.sample(
                        sample(tid),
                        k.prev_state.as_deref(),
                        &self.stacks[stack as usize],
                    ),
                }
            }
            other => {
                if let Some(e) = self.event(other) {
                    acc.event(e);
                }
            }
        }
    }

    /// A held record as the text's reader reads it (`None`: a sample
    /// without a thread, which it skips).
    fn event(&self, r: Held) -> Option<Event> {
        Some(match r {
            Held::Sample {
                tid,
                kind,
                time,
                period,
                ..
            } => {
                let k = &self.kinds[kind as usize];
                let tracepoint = &*k.event == super::TRACEPOINT;
                Event::Sample {
                    tid: (tid != u32::MAX).then_some(tid)?,
                    comm: k.comm.trim().to_string(),
                    time,
                    event: k.event.to_string(),
                    period: if tracepoint { 1 } else { period },
                    prev_state: k.prev_state.as_deref().map(String::from),
                    stack: Vec::new(),
                }
            }
            Held::Switch {
                tid,
                out,
                preempt,
                time,
            } => Event::Switch {
                tid,
                time,
                out,
                preempt,
            },
            Held::Comm { tid, comm, time } => Event::Comm {
                tid,
                comm: self.names[comm as usize].to_string(),
                time,
            },
            Held::Fork { tid, time } => Event::Fork { tid, time },
            Held::Exit { tid, time } => Event::Exit { tid, time },
        })
    }

    fn task(&mut self, t: &Task) {
        // A negative thread id reads as no thread in the text.
        let tid = |t: i32| u32::try_from(t).ok();
        let r = match *t {
            Task::Switch {
                tid: t,
                time,
                out,
                preempt,
            } => tid(t).map(|tid| Held::Switch {
                tid,
                out,
                preempt,
                time,
            }),
            Task::Comm {
                tid: t,
                ref comm,
                time,
            } => tid(t).map(|tid| {
                self.names.push(comm.clone());
                let comm = self.names.len() as u32 - 1;
                Held::Comm { tid, comm, time }
            }),
            Task::Fork { tid: t, time } => tid(t).map(|tid| Held::Fork { tid, time }),
            Task::Exit { tid: t, time } => tid(t).map(|tid| Held::Exit { tid, time }),
        };
        if let Some(r) = r {
            self.record(r);
        }
    }

    fn kind(&mut self, k: Kind) -> u32 {
        if let Some(&i) = self.kind_ids.get(&k) {
            return i;
        }
        let i = self.kinds.len() as u32;
        self.kinds.push(k.clone());
        self.kind_ids.insert(k, i);
        i
    }

    /// The stack of frames `ids` (leaf first), its index.
    fn stack(&mut self, ids: &[u32], frames: &Frames) -> u32 {
        if let Some(&i) = self.by_ids.get(ids) {
            return i;
        }
        let mut stack = String::new();
        for &id in ids.iter().rev() {
            stack.push_str(self.names_of(id, frames));
        }
        let i = self.stacks.len() as u32;
        self.stacks.push(stack.into());
        self.by_ids.insert(ids.into(), i);
        i
    }

    /// Frame `id`'s names, each after a `;`, root first.
    fn names_of(&mut self, id: u32, frames: &Frames) -> &str {
        let i = id as usize;
        if self.names_of_frames.len() <= i {
            self.names_of_frames.resize_with(i + 1, || None);
        }
        self.names_of_frames[i]
            .get_or_insert_with(|| frames.get(id).map(frame_names).unwrap_or_default().into())
    }
}

/// A frame's names as the off-CPU text's reader makes them (no Java
/// tidying, no annotations), each after a `;`, root first: its lines from
/// the function out to the innermost inlined one.
fn frame_names(frame: &Frame) -> String {
    let pc = format!("{:x}", frame.address);
    let mut out = String::new();
    for line in frame.lines.iter().rev() {
        for name in line_names(&pc, line, false, &SETTINGS, &[]).names {
            out.push(';');
            out.push_str(&name);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::symbolize::sample::{Line, Sample, Tasks, INLINED};
    use crate::text::offcpu::parse::LineParser;
    use crate::text::offcpu::TRACEPOINT;

    fn frames() -> Vec<Frame> {
        vec![
            Frame {
                address: 0x1434,
                lines: vec![
                    Line::new("mix+0x34", INLINED),
                    Line::new("compute+0x34", "/w"),
                ]
                .into(),
                function: None,
            },
            Frame {
                address: 0x1010,
                lines: vec![Line::new("main+0x10", "/w")].into(),
                function: None,
            },
        ]
    }

    /// One switch-out of thread 7 at 2 s (state S), then a sample of the
    /// sampling event at 3 s; a name before, a switch-in between.
    fn batch(event: &str) -> Batch {
        let sample = |time, event: &str| Sample {
            comm: "w".into(),
            tid: 7,
            cpu: None,
            time_ns: Some(time),
            period: Some(1000),
            event: event.into(),
            frames: 0..2,
        };
        Batch {
            new_frames: frames(),
            samples: vec![
                sample(2_000_000_000, TRACEPOINT),
                sample(3_000_000_000, event),
            ],
            stacks: vec![0, 1, 0, 1],
            tasks: Some(Tasks {
                records: vec![
                    (
                        0,
                        Task::Comm {
                            tid: 7,
                            comm: "w".into(),
                            time: 1,
                        },
                    ),
                    (
                        1,
                        Task::Switch {
                            tid: 7,
                            time: 2_500_000_000,
                            out: false,
                            preempt: false,
                        },
                    ),
                ],
                states: vec![(0, Some("S".into()))],
            }),
            ..Batch::default()
        }
    }

    fn logged(mut b: Batch, mut log: ShardLog) -> ShardLog {
        let mut table = Frames::default();
        table.take(&mut b);
        log.push(&b, &table);
        log
    }

    #[test]
    fn stacks_are_named_root_first_as_the_text_reader_names_them() {
        let log = logged(batch("cpu-clock"), ShardLog::default());
        let mut text = b"w     7  2.000000000: sched:sched_switch: prev_state=S\n".to_vec();
        for f in frames() {
            f.write_text(&mut text);
        }
        let mut read = Vec::new();
        let mut p = LineParser::default();
        for line in String::from_utf8(text).unwrap().lines() {
            p.line(line, &mut |e| read.push(e));
        }
        p.finish(&mut |e| read.push(e));
        let Event::Sample { stack, .. } = &read[0] else {
            panic!("{read:?}")
        };
        assert_eq!(stack, &["main", "compute", "mix"]);
        assert_eq!(&*log.stacks[0], ";main;compute;mix");
    }

    #[test]
    fn records_keep_their_place_among_the_samples() {
        let mut log = logged(batch("cpu-clock"), ShardLog::default());
        let kinds: Vec<&str> = log
            .events()
            .iter()
            .map(|e| match e {
                Event::Comm { .. } => "comm",
                Event::Sample {
                    prev_state: Some(_),
                    ..
                } => "out",
                Event::Sample { .. } => "sample",
                Event::Switch { .. } => "in",
                _ => "other",
            })
            .collect();
        assert_eq!(kinds, ["comm", "out", "in", "sample"]);
        log.go_live(Accounts::new(Some("cpu-clock")));
        let acc = log.into_accounts().unwrap();
        assert_eq!(acc.sample_times(), Some((2_000_000_000, 3_000_000_000)));
        let f = acc.finish((1_000_000_000, 3_000_000_000));
        let off = "w;main;compute;mix;[off-cpu S: sleeping]";
        assert_eq!(f.off_cpu[off], 500_000_000);
        assert_eq!(f.on_cpu["w;main;compute;mix"], 1000);
    }

    /// A later slice read at the same time is held, then read after the
    /// slice before it, with stacks of its own.
    #[test]
    fn a_later_slice_is_read_after_the_one_before() {
        let live = ShardLog::live(Accounts::new(Some("cpu-clock")));
        let first = logged(batch("cpu-clock"), live);
        let mut later = batch("cpu-clock");
        later.new_frames.reverse();
        let mut later = logged(later, ShardLog::default());
        assert!(first.is_live() && !later.is_live());
        assert_eq!(later.events().len(), 4);
        later.go_live(first.into_accounts().unwrap());
        let f = later.into_accounts().unwrap().finish((0, 4_000_000_000));
        assert_eq!(f.on_cpu["w;main;compute;mix"], 1000);
        assert_eq!(f.on_cpu["w;compute;mix;main"], 1000);
        assert_eq!(f.samples, 2);
    }
}
