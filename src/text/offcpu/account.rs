//! The per-thread state machine that turns switch-outs and switch-ins into
//! off-CPU time: each `sched:sched_switch` sample (the stack that blocked,
//! `prev_state`) starts a gap that the thread's next `PERF_RECORD_SWITCH`
//! IN ends; the gap's ns go to that stack. Everything is cut to the capture
//! window `[start, end]`; what happened before a thread's first record is
//! decided from that record (a switch-out: it was running; a switch-in: it
//! was blocked since before the window, stack unknown), and a thread with
//! no record at all was blocked the whole window. Only one pending switch
//! per thread is held, so memory grows with threads and distinct stacks,
//! not with switches.
//!
//! The window (the first and last sample over every shard of the capture)
//! is known only once every shard was read, and the records are read in
//! one pass: a span that lies between this shard's first sample and the
//! last one read so far lies in the window whatever the other shards hold,
//! and is counted as it closes; the others (before the shard's first
//! sample, or closed after its last sample so far) wait, a few per thread,
//! until a later sample vouches for them or [`Accounts::finish`] cuts them
//! to the window.

use std::collections::HashMap;

use super::parse::Event;

/// Frame that replaces the stack of time blocked since before the window.
pub const BEFORE_WINDOW: &str = "[blocked since before the window]";
/// Frame for a new thread's wait for its first run.
pub const NOT_YET_RUN: &str = "[new thread, not yet run]";
/// Frame for a switch whose tracepoint sample is missing.
pub const UNKNOWN_STACK: &str = "[switch-out stack not recorded]";

/// How a thread was off the CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum State {
    /// `R`/`R+`: runnable, preempted, waiting for a CPU.
    Runnable,
    /// `S`: sleeping (interruptible: locks, condvars, sleeps, sockets).
    Sleeping,
    /// `D`: uninterruptible (disk, page faults, some drivers).
    Disk,
    /// Any other state letter (`T`, `t`, `I`, `P`, ...).
    Other,
    /// Unknown: blocked since before the window, or not recorded.
    Unknown,
}

impl State {
    /// From the tracepoint's `prev_state` (`R+`, `S`, `D|K`, ...).
    pub fn from_prev_state(s: &str) -> State {
        match s.as_bytes().first() {
            Some(b'R') => State::Runnable,
            Some(b'S') => State::Sleeping,
            Some(b'D') => State::Disk,
            Some(_) => State::Other,
            None => State::Unknown,
        }
    }

    /// The leaf frame that names the state in the folded stacks.
    pub fn frame(self) -> &'static str {
        match self {
            State::Runnable => "[off-cpu R: runnable, preempted]",
            State::Sleeping => "[off-cpu S: sleeping]",
            State::Disk => "[off-cpu D: uninterruptible]",
            State::Other => "[off-cpu: other state]",
            State::Unknown => "[off-cpu: unknown state]",
        }
    }
}

/// One thread's time, in ns of the window.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct ThreadTotals {
    /// Thread id.
    pub tid: u32,
    /// Its last known name.
    pub comm: String,
    /// Running.
    pub on_cpu_ns: u64,
    /// Preempted, waiting for a CPU (`R`).
    pub runnable_ns: u64,
    /// Sleeping (`S`).
    pub sleeping_ns: u64,
    /// Uninterruptible (`D`).
    pub uninterruptible_ns: u64,
    /// Other states.
    pub other_ns: u64,
    /// Blocked in an unknown state (since before the window, or its
    /// switch-out not recorded).
    pub unknown_ns: u64,
    /// Switch-outs in the window.
    pub switches: u64,
}

impl ThreadTotals {
    /// Every ns accounted (the thread's share of the window).
    pub fn total_ns(&self) -> u64 {
        self.on_cpu_ns + self.off_cpu_ns()
    }

    /// Off-CPU ns, all states.
    pub fn off_cpu_ns(&self) -> u64 {
        self.runnable_ns
            + self.sleeping_ns
            + self.uninterruptible_ns
            + self.other_ns
            + self.unknown_ns
    }

    fn add(&mut self, state: Option<State>, ns: u64) {
        let slot = match state {
            None => &mut self.on_cpu_ns,
            Some(State::Runnable) => &mut self.runnable_ns,
            Some(State::Sleeping) => &mut self.sleeping_ns,
            Some(State::Disk) => &mut self.uninterruptible_ns,
            Some(State::Other) => &mut self.other_ns,
            Some(State::Unknown) => &mut self.unknown_ns,
        };
        *slot += ns;
    }
}

/// A switch-out waiting for its switch-in.
#[derive(Debug)]
struct Pending {
    time: u64,
    stack: String,
    state: State,
}

/// What a thread's first record says about the time before it.
#[derive(Debug, Clone, Copy)]
enum Head {
    /// Nothing seen yet.
    None,
    /// Running before this time.
    Running(u64),
    /// Blocked (stack unknown) before this time.
    Blocked(u64),
    /// Born in the window (nothing before it counts).
    Born,
}

#[derive(Debug)]
struct Thread {
    comm: String,
    head: Head,
    /// Running since this time (after a switch-in).
    running_since: Option<u64>,
    pending: Option<Pending>,
    /// Ended (exit) at this time.
    exited: Option<u64>,
    /// Born and not yet run: since this time.
    unborn_since: Option<u64>,
    totals: ThreadTotals,
}

/// A span whose share of the window is not known yet ([`Accounts`]).
#[derive(Debug)]
enum Span {
    /// Off the CPU from `a` to `b`, in `state`, at `stack` (a folded key).
    Gap {
        tid: u32,
        state: State,
        stack: String,
        a: u64,
        b: u64,
    },
    /// Running from `a` to `b`.
    Run { tid: u32, a: u64, b: u64 },
    /// A switch-out at `a`: counted when in the window.
    Switch { tid: u32, a: u64 },
}

impl Span {
    fn ends(&self) -> (u64, u64) {
        match *self {
            Span::Gap { a, b, .. } | Span::Run { a, b, .. } => (a, b),
            Span::Switch { a, .. } => (a, a),
        }
    }
}

/// The accumulated result of one or more shards' records.
#[derive(Debug)]
pub struct Accounts {
    /// The window, once [`Accounts::finish`] knows it.
    start: u64,
    end: u64,
    finishing: bool,
    /// The first and last sample read.
    seen: Option<(u64, u64)>,
    /// Spans that start before the first sample.
    early: Vec<Span>,
    /// Spans that end after the last sample read (so far).
    waiting: Vec<Span>,
    sampling_event: Option<String>,
    threads: HashMap<u32, Thread>,
    /// Off-CPU ns per folded stack (state leaf included).
    pub off_cpu: HashMap<String, u64>,
    /// On-CPU sample periods per folded stack.
    pub on_cpu: HashMap<String, u64>,
    /// Switch records seen (in and out).
    pub switch_records: u64,
    /// `sched:sched_switch` samples seen.
    pub switch_samples: u64,
    /// Of those, the ones without a readable `prev_state`.
    pub unreadable_switches: u64,
    /// Sampling-event samples seen.
    pub samples: u64,
}

impl Accounts {
    /// Accounts of a shard's records; samples of `sampling_event` (base
    /// name; `None`: any event but the tracepoint) are the on-CPU part of
    /// the wall-clock profile.
    pub fn new(sampling_event: Option<&str>) -> Accounts {
        Accounts {
            start: 0,
            end: u64::MAX,
            finishing: false,
            seen: None,
            early: Vec::new(),
            waiting: Vec::new(),
            sampling_event: sampling_event.map(String::from),
            threads: HashMap::new(),
            off_cpu: HashMap::new(),
            on_cpu: HashMap::new(),
            switch_records: 0,
            switch_samples: 0,
            unreadable_switches: 0,
            samples: 0,
        }
    }

    /// The first and last sample's time among the records read.
    pub fn sample_times(&self) -> Option<(u64, u64)> {
        self.seen
    }

    /// The ns of `[a, b]` inside the window.
    fn clip(&self, a: u64, b: u64) -> u64 {
        b.min(self.end).saturating_sub(a.max(self.start))
    }

    /// A sample at `t` (of any event, or of no thread): it bounds the
    /// window, and the spans waiting for it are in it.
    pub fn saw_sample(&mut self, t: u64) {
        let (first, last) = self.seen.map_or((t, t), |(a, b)| (a.min(t), b.max(t)));
        self.seen = Some((first, last));
        if self.waiting.iter().any(|s| s.ends().1 <= last) {
            let (now, later) = std::mem::take(&mut self.waiting)
                .into_iter()
                .partition(|s| s.ends().1 <= last);
            self.waiting = later;
            for s in now {
                self.count(s, true);
            }
        }
    }

    /// Counts `span` now when it lies between the first and last sample
    /// read (or the window is known), else keeps it for later.
    fn span(&mut self, span: Span) {
        let (a, b) = span.ends();
        match self.seen {
            _ if self.finishing => self.count(span, false),
            Some((first, last)) if a >= first && b <= last => self.count(span, true),
            Some((first, _)) if a >= first => self.waiting.push(span),
            _ => self.early.push(span),
        }
    }

    /// Adds `span` to its thread and stack: whole when `inside` the
    /// window, else cut to it.
    fn count(&mut self, span: Span, inside: bool) {
        let (a, b) = span.ends();
        let ns = if inside {
            b.saturating_sub(a)
        } else {
            self.clip(a, b)
        };
        let in_window = inside || (a >= self.start && a <= self.end);
        match span {
            Span::Gap {
                tid, state, stack, ..
            } => {
                self.thread(tid).totals.add(Some(state), ns);
                if ns > 0 {
                    *self.off_cpu.entry(stack).or_default() += ns;
                }
            }
            Span::Run { tid, .. } => self.thread(tid).totals.add(None, ns),
            Span::Switch { tid, .. } => {
                if in_window {
                    self.thread(tid).totals.switches += 1;
                }
            }
        }
    }

    fn thread(&mut self, tid: u32) -> &mut Thread {
        self.threads.entry(tid).or_insert_with(|| Thread {
            comm: String::new(),
            head: Head::None,
            running_since: None,
            pending: None,
            exited: None,
            unborn_since: None,
            totals: ThreadTotals {
                tid,
                ..ThreadTotals::default()
            },
        })
    }

    /// Takes one record (in time order per thread).
    pub fn event(&mut self, ev: Event) {
        match ev {
            Event::Sample {
                tid,
                comm,
                time,
                event,
                period,
                prev_state,
                stack,
            } => {
                let frames: String = stack.iter().flat_map(|f| [";", f]).collect();
                let s = SampleOf {
                    tid,
                    comm: &comm,
                    time,
                    event: &event,
                    period,
                };
                self.sample(s, prev_state.as_deref(), &frames);
            }
            Event::Switch {
                tid,
                time,
                out,
                preempt,
            } => {
                self.switch_records += 1;
                if out {
                    let has_pending = self.thread(tid).pending.is_some();
                    if !has_pending {
                        let state = if preempt {
                            State::Runnable
                        } else {
                            State::Unknown
                        };
                        self.switch_out(tid, "", time, state, None);
                    }
                } else {
                    self.switch_in(tid, time);
                }
            }
            Event::Comm { tid, comm, .. } => self.thread(tid).comm = comm,
            Event::Fork { tid, time } => {
                let t = self.thread(tid);
                if matches!(t.head, Head::None) {
                    t.head = Head::Born;
                    t.unborn_since = Some(time);
                }
            }
            Event::Exit { tid, time } => self.exit(tid, time),
        }
    }

    /// Takes one sample (in time order per thread): a switch-out with the
    /// `prev_state` perf prints for it, or one of the sampling event;
    /// `frames`: its stack, each frame name after a `;`, root first.
    pub fn sample(&mut self, s: SampleOf<'_>, prev_state: Option<&str>, frames: &str) {
        self.saw_sample(s.time);
        if s.event == super::TRACEPOINT {
            self.switch_samples += 1;
            // perf prints no fields (the native pass neither)
            // when the format puts them outside the record.
            if prev_state.is_none_or(str::is_empty) {
                self.unreadable_switches += 1;
            }
            let state = prev_state.map_or(State::Unknown, State::from_prev_state);
            self.switch_out(s.tid, s.comm, s.time, state, Some(frames));
        } else if self.is_sampling(s.event) {
            self.samples += 1;
            let key = folded_key(s.comm, frames, None);
            *self.on_cpu.entry(key).or_default() += s.period;
            let t = self.thread(s.tid);
            if t.comm != s.comm {
                t.comm = s.comm.to_string();
            }
            if matches!(t.head, Head::None) {
                t.head = Head::Running(s.time);
                t.running_since = Some(s.time);
            }
        }
    }

    fn is_sampling(&self, event: &str) -> bool {
        match &self.sampling_event {
            None => true,
            Some(e) => e == event || e == crate::text::perf_script::event_base(event),
        }
    }

    fn switch_out(&mut self, tid: u32, comm: &str, time: u64, state: State, frames: Option<&str>) {
        let t = self.thread(tid);
        if !comm.is_empty() {
            t.comm = comm.to_string();
        }
        let comm = t.comm.clone();
        if matches!(t.head, Head::None) {
            t.head = Head::Running(time);
        }
        let ran = t.running_since.take();
        let stack = match frames {
            Some(f) => folded_key(&comm, f, Some(state)),
            None => folded_key(&comm, &frame(UNKNOWN_STACK), Some(state)),
        };
        // A second out without an in: the first gap ends here.
        let pending = t.pending.take();
        self.run_ends(tid, ran, time);
        self.span(Span::Switch { tid, a: time });
        if let Some(p) = pending {
            self.close_gap(tid, p, time);
        }
        self.thread(tid).pending = Some(Pending { time, stack, state });
    }

    fn switch_in(&mut self, tid: u32, time: u64) {
        let t = self.thread(tid);
        if let Some(since) = t.unborn_since.take() {
            let comm = t.comm.clone();
            let key = folded_key(&comm, &frame(NOT_YET_RUN), Some(State::Runnable));
            let p = Pending {
                time: since,
                stack: key,
                state: State::Runnable,
            };
            self.close_gap(tid, p, time);
        } else if let Some(p) = t.pending.take() {
            self.close_gap(tid, p, time);
        } else if matches!(t.head, Head::None) {
            t.head = Head::Blocked(time);
        }
        self.thread(tid).running_since = Some(time);
    }

    fn exit(&mut self, tid: u32, time: u64) {
        let t = self.thread(tid);
        let ran = t.running_since.take();
        t.exited = Some(time);
        let pending = t.pending.take();
        self.run_ends(tid, ran, time);
        if let Some(p) = pending {
            self.close_gap(tid, p, time);
        }
    }

    /// A run of thread `tid` since `since` (when it was running) ends at
    /// `until`.
    fn run_ends(&mut self, tid: u32, since: Option<u64>, until: u64) {
        if let Some(a) = since {
            self.span(Span::Run { tid, a, b: until });
        }
    }

    /// Adds the gap from `p` to `until` to the thread and its stack.
    fn close_gap(&mut self, tid: u32, p: Pending, until: u64) {
        self.span(Span::Gap {
            tid,
            state: p.state,
            stack: p.stack,
            a: p.time,
            b: until,
        });
    }

    /// Ends every thread at the end of the capture's window `[start, end]`
    /// (perf clock ns: the first and last sample over its shards): the
    /// spans still waiting are cut to it, open gaps and runs are closed,
    /// the time before each thread's first record is decided, and the
    /// per-thread totals come back, by tid.
    pub fn finish(mut self, (start, end): (u64, u64)) -> Finished {
        (self.start, self.end, self.finishing) = (start, end.max(start), true);
        let end = self.end;
        let spans = [
            std::mem::take(&mut self.early),
            std::mem::take(&mut self.waiting),
        ];
        for span in spans.into_iter().flatten() {
            self.count(span, false);
        }
        let tids: Vec<u32> = self.threads.keys().copied().collect();
        for tid in tids {
            self.finish_thread(tid, end);
        }
        let mut threads: Vec<ThreadTotals> = self
            .threads
            .into_values()
            .map(|t| ThreadTotals {
                comm: t.comm,
                ..t.totals
            })
            .collect();
        threads.sort_by_key(|t| t.tid);
        Finished {
            start: self.start,
            end: self.end,
            threads,
            off_cpu: self.off_cpu,
            on_cpu: self.on_cpu,
            switch_records: self.switch_records,
            switch_samples: self.switch_samples,
            unreadable_switches: self.unreadable_switches,
            samples: self.samples,
        }
    }

    fn finish_thread(&mut self, tid: u32, end: u64) {
        let t = self.thread(tid);
        let stop = t.exited.unwrap_or(end);
        let ran = t.running_since.take();
        self.run_ends(tid, ran, stop);
        let t = self.thread(tid);
        if let Some(p) = t.pending.take() {
            self.close_gap(tid, p, stop);
        }
        let t = self.thread(tid);
        if let Some(since) = t.unborn_since.take() {
            let comm = t.comm.clone();
            let key = folded_key(&comm, &frame(NOT_YET_RUN), Some(State::Runnable));
            let p = Pending {
                time: since,
                stack: key,
                state: State::Runnable,
            };
            self.close_gap(tid, p, stop);
        }
        let t = self.thread(tid);
        let head = t.head;
        let comm = t.comm.clone();
        match head {
            Head::Running(at) => {
                let ns = self.clip(self.start, at);
                self.thread(tid).totals.add(None, ns);
            }
            Head::Blocked(at) => self.blocked_before(tid, &comm, at),
            Head::None => self.blocked_before(tid, &comm, stop),
            Head::Born => {}
        }
    }

    /// Time from the window's start to `until`, blocked with no stack.
    fn blocked_before(&mut self, tid: u32, comm: &str, until: u64) {
        let key = folded_key(comm, &frame(BEFORE_WINDOW), Some(State::Unknown));
        let p = Pending {
            time: self.start,
            stack: key,
            state: State::Unknown,
        };
        self.close_gap(tid, p, until);
    }
}

/// One frame name as [`folded_key`] takes frames: after a `;`.
fn frame(name: &str) -> String {
    format!(";{name}")
}

/// A sample's header, as [`Accounts::sample`] takes it.
#[derive(Debug, Clone, Copy)]
pub struct SampleOf<'a> {
    /// Thread id.
    pub tid: u32,
    /// Thread name.
    pub comm: &'a str,
    /// Time in ns (perf clock).
    pub time: u64,
    /// The event's name.
    pub event: &'a str,
    /// The sample period (1 when not recorded).
    pub period: u64,
}

/// The result of [`Accounts::finish`].
#[derive(Debug, Default)]
pub struct Finished {
    /// Window start (perf clock ns).
    pub start: u64,
    /// Window end.
    pub end: u64,
    /// Per thread, by tid.
    pub threads: Vec<ThreadTotals>,
    /// Off-CPU ns per folded stack.
    pub off_cpu: HashMap<String, u64>,
    /// On-CPU sample periods per folded stack.
    pub on_cpu: HashMap<String, u64>,
    /// Switch records seen.
    pub switch_records: u64,
    /// Tracepoint samples seen.
    pub switch_samples: u64,
    /// Of those, the ones without a readable `prev_state`.
    pub unreadable_switches: u64,
    /// Sampling-event samples seen.
    pub samples: u64,
}

impl Finished {
    /// Adds another shard's result (same window; threads are disjoint).
    pub fn merge(&mut self, other: Finished) {
        self.threads.extend(other.threads);
        self.threads.sort_by_key(|t| t.tid);
        for (k, v) in other.off_cpu {
            *self.off_cpu.entry(k).or_default() += v;
        }
        for (k, v) in other.on_cpu {
            *self.on_cpu.entry(k).or_default() += v;
        }
        self.switch_records += other.switch_records;
        self.switch_samples += other.switch_samples;
        self.unreadable_switches += other.unreadable_switches;
        self.samples += other.samples;
    }
}

/// `comm;root;...;leaf[;STATE]` as `jobprof fold` writes stacks, from
/// `frames`: each frame name after a `;` (`;root;...;leaf`).
pub fn folded_key(comm: &str, frames: &str, state: Option<State>) -> String {
    let mut k = String::with_capacity(comm.len() + frames.len() + 32);
    k.push_str(if comm.is_empty() { "[unknown]" } else { comm });
    k.push_str(frames);
    if let Some(s) = state {
        k.push(';');
        k.push_str(s.frame());
    }
    k
}

#[cfg(test)]
mod tests {
    use super::*;

    fn out(tid: u32, time: u64, state: &str, leaf: &str) -> Event {
        Event::Sample {
            tid,
            comm: "w".into(),
            time,
            event: "sched:sched_switch".into(),
            period: 1,
            prev_state: Some(state.into()),
            stack: vec!["main".into(), leaf.into()],
        }
    }

    fn sw(tid: u32, time: u64, out: bool) -> Event {
        Event::Switch {
            tid,
            time,
            out,
            preempt: false,
        }
    }

    #[test]
    fn gaps_go_to_the_switch_out_stack_and_states_stay_apart() {
        let mut a = Accounts::new(Some("cpu-clock"));
        // Running from the start, sleeps 200..500, preempted 600..700.
        a.event(out(1, 200, "S", "nanosleep"));
        a.event(sw(1, 201, true));
        a.event(sw(1, 500, false));
        a.event(out(1, 600, "R+", "work"));
        a.event(sw(1, 700, false));
        // Thread 2 blocked since before the window, wakes at 400, runs to the end.
        a.event(sw(2, 400, false));
        // Thread 3: only named, blocked all window.
        a.event(Event::Comm {
            tid: 3,
            comm: "idle".into(),
            time: 0,
        });
        let f = a.finish((100, 1100));
        let t1 = &f.threads[0];
        assert_eq!(t1.on_cpu_ns, 100 + 100 + 400);
        assert_eq!(t1.sleeping_ns, 300);
        assert_eq!(t1.runnable_ns, 100);
        assert_eq!(t1.total_ns(), 1000);
        assert_eq!(f.off_cpu["w;main;nanosleep;[off-cpu S: sleeping]"], 300);
        let t2 = &f.threads[1];
        assert_eq!((t2.unknown_ns, t2.on_cpu_ns), (300, 700));
        let t3 = &f.threads[2];
        assert_eq!(t3.unknown_ns, 1000);
        assert_eq!(
            f.off_cpu["idle;[blocked since before the window];[off-cpu: unknown state]"],
            1000
        );
    }

    /// Spans before the shard's first sample and after its last one are
    /// cut to the window when it is known; those between are whole.
    #[test]
    fn gaps_are_cut_at_the_window() {
        let mut a = Accounts::new(None);
        // Out (no tracepoint sample) before the first sample, in after it.
        a.event(sw(1, 800, true));
        a.event(sw(1, 1500, false));
        a.event(out(1, 1600, "S", "wait"));
        a.event(Event::Sample {
            tid: 2,
            comm: "w".into(),
            time: 2000,
            event: "cpu-clock".into(),
            period: 1,
            prev_state: None,
            stack: vec!["main".into()],
        });
        // In after the last sample.
        a.event(sw(1, 2500, false));
        assert_eq!(a.sample_times(), Some((1600, 2000)));
        let f = a.finish((1000, 2000));
        let t = &f.threads[0];
        assert_eq!((t.unknown_ns, t.on_cpu_ns, t.sleeping_ns), (500, 100, 400));
        assert_eq!(t.total_ns(), 1000);
        // The out at 800 is outside the window.
        assert_eq!(t.switches, 1);
    }
}
