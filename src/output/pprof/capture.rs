//! A capture's `profile.pb.gz`: the facts of the capture (labels, window,
//! frequency, build ids of its shards) and its samples feeding
//! [`TextProfile`], either as the native symbolizer hands them on
//! ([`SampleProfile`]: structured samples, no text read) or from one walk
//! over symbolized text ([`crate::text::samples::walk`]: `perf script`'s, or
//! a capture's own text).

use std::collections::HashMap;
use std::io::{self, Write};
use std::path::Path;

use super::{Facts, TextProfile};
use crate::capture::ValidCapture;
use crate::error::{Error, Result};
use crate::symbolize::sample::{Batch, Frames};
use crate::text::fold::{self, SampleStacks};
use crate::text::samples::{self, RawFrame, Sample};

/// The facts of `cap` for its profile; `event` is the folded event,
/// `build_ids` the shards' build ids by DSO path (as read once for the
/// capture: [`crate::symbolize::build_ids::ShardIds::by_path`]).
pub fn facts(
    cap: &ValidCapture,
    event: Option<String>,
    build_ids: HashMap<String, String>,
) -> Facts {
    let mut labels = Vec::new();
    if let Some(w) = cap.found.worker {
        labels.push(("worker".to_string(), w.to_string()));
    }
    labels.push(("query".to_string(), cap.found.query.clone()));
    if let Some(h) = &cap.host {
        labels.push(("node".to_string(), h.clone()));
    }
    let json: Option<serde_json::Value> =
        std::fs::read_to_string(cap.found.dir.join(jobprof_capture_format::CAPTURE_JSON))
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok());
    let field = |k: &str| {
        json.as_ref()
            .and_then(|j| j.get(k))
            .and_then(|v| v.as_u64())
    };
    Facts {
        labels,
        event,
        start_unix_ns: field("enabled_unix_ns"),
        end_unix_ns: field("disabled_unix_ns"),
        frequency: field("frequency"),
        build_ids,
    }
}

/// Writes the profile of the perf script text at `text` (folded with
/// `opts`) to `out` (the file `out_path`), calling `tap` with every sample
/// too; with `off_cpu` (the off-CPU pass's stacks, as in `offcpu.folded`,
/// of a capture with switch data) the off-CPU and wall columns too.
/// Returns `out` and the samples written.
pub fn write<W: Write>(
    text: &Path,
    out_path: &Path,
    opts: &fold::Options,
    facts: Facts,
    off_cpu: Option<&[(String, u64)]>,
    out: W,
    tap: impl FnMut(&Sample<'_>),
) -> Result<(W, u64)> {
    let to = (out_path, off_cpu, out);
    write_with_text(text, opts, facts, to, |_| {}, tap)
}

/// [`write`], also handing `raw` every sample's text as
/// [`samples::walk_with_text`] does; `to`: the output's path (for
/// messages), the off-CPU stacks, and where the profile goes.
pub fn write_with_text<W: Write>(
    text: &Path,
    opts: &fold::Options,
    facts: Facts,
    to: (&Path, Option<&[(String, u64)]>, W),
    raw: impl FnMut(&[u8]),
    mut tap: impl FnMut(&Sample<'_>),
) -> Result<(W, u64)> {
    let (out_path, off_cpu, out) = to;
    let mut profile = TextProfile::new(facts, off_cpu.is_some(), out);
    let mut failed = None;
    let n = samples::walk_with_text(text, opts, raw, |s| {
        tap(s);
        if failed.is_none() {
            failed = profile.add(s).err();
        }
    })?;
    if let Some(e) = failed {
        return Err(Error::io(out_path, e));
    }
    for (stack, ns) in off_cpu.unwrap_or_default() {
        profile
            .add_off_cpu(stack, *ns)
            .map_err(|e| Error::io(out_path, e))?;
    }
    let out = profile.finish().map_err(|e| Error::io(out_path, e))?;
    Ok((out, n))
}

/// A capture's profile written from the structured samples of its runs,
/// handed on run after run in the order of the capture's text (the order
/// a walk over its archive would see them): the profile that walk writes,
/// without the text. Each sample's stack is folded as `stacks.folded`
/// folds it ([`SampleStacks`]), its frame lines give the locations'
/// addresses and mappings.
pub struct SampleProfile<W: Write> {
    profile: TextProfile<W>,
    stacks: SampleStacks,
    frames: Frames,
    stack: String,
    failed: Option<io::Error>,
    samples: u64,
}

impl<W: Write> SampleProfile<W> {
    /// Starts the profile of a capture with `facts` into `out`, its
    /// samples folded with `opts` (the event filter naming the fold's
    /// event); with the off-CPU and wall columns when `off_cpu` (as
    /// [`TextProfile::new`]).
    pub fn new(facts: Facts, opts: &fold::Options, off_cpu: bool, out: W) -> Self {
        SampleProfile {
            profile: TextProfile::new(facts, off_cpu, out),
            stacks: SampleStacks::new(opts),
            frames: Frames::default(),
            stack: String::new(),
            failed: None,
            samples: 0,
        }
    }

    /// The samples that follow are another run's: its frame ids number a
    /// table of their own.
    pub fn next_run(&mut self) {
        self.frames = Frames::default();
        self.stacks.start_over();
    }

    /// Adds the samples of `batch`, the next batch of the current run
    /// (taking its new frames into the run's table).
    pub fn add(&mut self, batch: &mut Batch) {
        if batch.reset {
            self.stacks.start_over();
        }
        self.frames.take(batch);
        for s in &batch.samples {
            let ids = batch.frames_of(s);
            let Some(weight) = self.stacks.fold(s, ids, &self.frames, &mut self.stack) else {
                continue;
            };
            self.samples += 1;
            if self.failed.is_some() {
                continue;
            }
            // The frame lines, leaf first, inlined functions' included.
            let frames: Vec<RawFrame<'_>> = (ids.iter())
                .filter_map(|&id| self.frames.get(id))
                .flat_map(|f| {
                    f.lines.iter().map(|l| RawFrame {
                        address: f.address,
                        module: &l.module,
                    })
                })
                .collect();
            let mut tid = itoa::Buffer::new();
            let sample = Sample {
                comm: s.comm.trim(),
                // The text prints the thread id alone.
                pid: "?",
                tid: tid.format(s.tid),
                time_ns: s.printed_time_ns(),
                weight,
                stack: &self.stack,
                frames: &frames,
            };
            self.failed = self.profile.add(&sample).err();
        }
    }

    /// Adds the off-CPU stacks `off_cpu` (as [`write_with_text`] does) and
    /// writes the tables; returns the output and the samples written.
    /// `out_path` names the output in errors.
    pub fn finish(
        mut self,
        out_path: &Path,
        off_cpu: Option<&[(String, u64)]>,
    ) -> Result<(W, u64)> {
        if let Some(e) = self.failed {
            return Err(Error::io(out_path, e));
        }
        for (stack, ns) in off_cpu.unwrap_or_default() {
            (self.profile)
                .add_off_cpu(stack, *ns)
                .map_err(|e| Error::io(out_path, e))?;
        }
        let out = self.profile.finish().map_err(|e| Error::io(out_path, e))?;
        Ok((out, self.samples))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::symbolize::sample::{Frame, Line, Sample as Structured, INLINED};

    /// A batch of samples of two threads with an inlined function, a
    /// kernel frame and an unknown one, and its text as the native
    /// symbolizer prints it.
    fn batch() -> Batch {
        let frame = |address, lines: &[(&str, &str)]| Frame {
            address,
            lines: lines.iter().map(|(s, m)| Line::new(*s, *m)).collect(),
            function: None,
        };
        let new_frames = vec![
            frame(0x1434, &[("mix+0x34", INLINED), ("stage+0x34", "/w")]),
            frame(0x1200, &[("main+0x20", "/w")]),
            frame(
                0xffff_8000_0000_1000,
                &[("do_syscall+0x10", "[kernel.kallsyms]")],
            ),
            frame(0x99, &[("[unknown]", "[unknown]")]),
        ];
        let sample = |comm: &str, tid, t, frames| Structured {
            comm: comm.into(),
            tid,
            cpu: Some(1),
            time_ns: Some(t),
            period: Some(250_000),
            event: "cpu-clock:u".into(),
            frames,
        };
        let samples = vec![
            sample("w", 7, 1_000_001_999, 0..2),
            sample("pool worker", 8, 1_000_002_000, 2..5),
            sample("w", 7, 1_000_003_000, 5..5),
        ];
        let stacks = vec![0, 1, 2, 0, 1];
        let mut text = Vec::new();
        for s in &samples {
            let t = s.time_ns.unwrap_or(0);
            text.extend(
                format!(
                    "{} {:5} [001] {:5}.{:06}: {:10} {}: \n",
                    s.comm,
                    s.tid,
                    t / 1_000_000_000,
                    t % 1_000_000_000 / 1000,
                    250_000,
                    s.event
                )
                .bytes(),
            );
            for &id in &stacks[s.frames.start as usize..s.frames.end as usize] {
                new_frames[id as usize].write_text(&mut text);
            }
            text.push(b'\n');
        }
        Batch {
            text_bytes: text.len() as u64,
            text,
            new_frames,
            samples,
            stacks,
            ..Batch::default()
        }
    }

    /// The profile of the structured samples is the one the walk over
    /// their text writes, byte for byte (gzip's output aside), over two
    /// runs whose frame ids each start at 0.
    #[test]
    fn the_samples_profile_is_the_one_of_their_text() {
        let opts = fold::Options {
            event_filter: Some("cpu-clock".into()),
            annotate_jit: true,
            ..fold::Options::default()
        };
        let facts = Facts {
            event: Some("cpu-clock".into()),
            labels: vec![("query".into(), "q1".into())],
            build_ids: [("/w".to_string(), "abcd".to_string())].into(),
            ..Facts::default()
        };
        let dir = tempfile::tempdir().unwrap();
        let text = dir.path().join("perf.script");
        let mut both = batch().text;
        both.extend_from_slice(&batch().text);
        std::fs::write(&text, &both).unwrap();
        let off_cpu = [("w;main;[off-cpu S: sleeping]".to_string(), 5000)];
        let to = (text.as_path(), Some(&off_cpu[..]), Vec::new());
        let (walked, n) = write_with_text(&text, &opts, facts.clone(), to, |_| {}, |_| {}).unwrap();
        let mut p = SampleProfile::new(facts, &opts, true, Vec::new());
        p.add(&mut batch());
        p.next_run();
        p.add(&mut batch());
        let (streamed, m) = p.finish(&text, Some(&off_cpu)).unwrap();
        let gunzip = |gz: &[u8]| {
            let mut raw = Vec::new();
            io::Read::read_to_end(&mut flate2::read::GzDecoder::new(gz), &mut raw).unwrap();
            raw
        };
        assert_eq!((n, m), (6, 6));
        assert_eq!(gunzip(&walked), gunzip(&streamed));
    }

    /// A thread name with a number word (`pool 2 worker`), which its text
    /// reads as the thread `pool` of id 2: the profile of the samples keeps
    /// the whole name, as `stacks.folded` does (the root frame and the
    /// `comm` label), and the thread's own id.
    #[test]
    fn a_thread_name_with_a_number_word_keeps_its_whole_name() {
        let mut b = batch();
        for s in &mut b.samples {
            s.comm = "pool 2 worker".into();
        }
        let opts = fold::Options {
            event_filter: Some("cpu-clock".into()),
            ..fold::Options::default()
        };
        let facts = Facts {
            event: Some("cpu-clock".into()),
            ..Facts::default()
        };
        let mut p = SampleProfile::new(facts, &opts, false, Vec::new());
        p.add(&mut b);
        let (gz, n) = p.finish(Path::new("profile.pb.gz"), None).unwrap();
        assert_eq!(n, 3);
        let mut raw = Vec::new();
        io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&gz[..]), &mut raw).unwrap();
        let prof = <super::super::proto::Profile as prost::Message>::decode(&raw[..]).unwrap();
        let strings = &prof.string_table;
        for want in ["pool_2_worker", "pool 2 worker", "7", "8"] {
            assert!(strings.iter().any(|s| s == want), "{want}: {strings:?}");
        }
        assert!(!strings.iter().any(|s| s == "2"), "{strings:?}");
    }
}
