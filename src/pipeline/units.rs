//! Running a capture's units of symbolizing work (planned in `plan`) up
//! to `jobs` at once: each unit's text is written into a compressed,
//! spooled archive part; its samples go to the fold, the report and the
//! pprof profile (`pprof_stream`) on this thread as structured samples
//! ([`crate::symbolize::sample`]): a native unit's as it symbolizes them,
//! its text never read again; a `perf script` unit's text cut at sample
//! boundaries and parsed once, on the unit's thread
//! ([`crate::text::script_samples`]; a block the model does not print back
//! goes on as text, read by the fold and the report, and the profile is
//! then written from the archive). Then the results per shard.

use std::io::{self, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use super::off_cpu_logs::OffCpuLogs;
use super::own_text::Consumers;
use super::plan::{Plan, Unit};
use super::pprof_stream::StreamedPprof;
use super::{file_name, secs, Pipeline};
use crate::capture;
use crate::error::Result;
use crate::output::archive::{Part, Spool, Spooled};
use crate::output::report::read::{self as report, SampleReader};
use crate::output::summary::ShardSummary;
use crate::symbolize::native;
use crate::symbolize::perf::{self, PerfTool, RunOutcome, ScriptOptions};
use crate::symbolize::sample::{Batch, Frames};
use crate::sys::progress::{Bar, Counts};
use crate::text::boundary::Chunker;
use crate::text::fold::{Folded, Folder};
use crate::text::offcpu::{ShardInput, ShardLog};
use crate::text::script_samples::ScriptSamples;

pub(super) struct UnitResult {
    pub(super) outcome: std::result::Result<RunOutcome, UnitError>,
    part: Option<Spooled>,
    /// How the native symbolizer's dwarf unwinds ended (`None`: `perf
    /// script` ran, or the run failed).
    unwound: Option<native::UnwindTally>,
    /// Whether the native run handed on its shard's switch and task
    /// records, and the header's first and last sample time (`None`:
    /// `perf script` ran, or the run failed).
    pub(super) off_cpu: Option<(native::OffCpuRecords, Option<(u64, u64)>)>,
    /// Those records and the samples, as the off-CPU accounting takes
    /// them.
    pub(super) log: Option<ShardLog>,
}

impl UnitResult {
    /// A unit that never ran.
    fn empty() -> UnitResult {
        UnitResult {
            outcome: Err(UnitError::NotRun),
            part: None,
            unwound: None,
            off_cpu: None,
            log: None,
        }
    }
}

/// Why a unit has no run outcome (its shard fails with this message).
#[derive(Debug, thiserror::Error)]
pub(super) enum UnitError {
    /// Its compressed part could not be created.
    #[error(transparent)]
    Part(crate::Error),
    /// The symbolizer could not be started or read.
    #[error("cannot run `{}`: {source}", program.display())]
    Run {
        program: PathBuf,
        #[source]
        source: io::Error,
    },
    /// It never ran (its worker stopped first).
    #[error("not run")]
    NotRun,
}

/// What the `perf script` runs produced: the fold, per-shard summaries,
/// failures, and the new archive's spooled parts in order.
pub(super) struct Symbolized {
    pub(super) folded: Folded,
    pub(super) shards: Vec<ShardSummary>,
    pub(super) failures: Vec<String>,
    /// `None` in memory ([`super::memory`]): no archive is written.
    pub(super) archive: Option<(Spool, Vec<Spooled>)>,
    /// JIT files refused or cut short (logged already).
    pub(super) warnings: Vec<String>,
    /// How the dwarf unwinds ended and the call chains discarded, when the
    /// native symbolizer ran every unit (`perf script` says nothing about
    /// it).
    pub(super) unwound: Option<native::UnwindTally>,
    /// The report's profile of the units' samples (structured, or text),
    /// read as they streamed: what a reader of the new archive reads
    /// (`None`: no report asked for, or its units' readers could not be
    /// merged: the archive is read again).
    pub(super) report: Option<SampleReader>,
    /// `profile.pb.gz` written from the native runs' samples, still to be
    /// finished (`None`: not asked for, or a `perf script` unit ran).
    pub(super) pprof: Option<StreamedPprof>,
    /// The off-CPU accounting's input, per shard recorded with
    /// `--off-cpu`.
    pub(super) off_cpu: Vec<(PathBuf, ShardInput)>,
}

impl Pipeline<'_> {
    /// Runs every unit (up to `jobs` at once), folding their output as it
    /// streams and compressing it in the same pass into checked, spooled
    /// parts; the archive is published later, and only when it may replace
    /// the old one ([`Self::publish_archive`]).
    pub(super) fn symbolize_all(&self, plan: &Plan<'_>, units: &[Unit]) -> Result<Symbolized> {
        let (script_opts, natively) = self.symbolizers(units.iter().any(|u| !u.native));
        let zstd_workers = self.zstd_workers(units);
        let jobs = self.opts.jobs().min(units.len()).max(1);
        let native_runs = units.iter().filter(|u| u.native).count();
        self.log(format!(
            "symbolizing: {} run(s) over {} shard(s) ({native_runs} native, {} perf script), {jobs} at once",
            units.len(),
            self.cap.shards.len(),
            units.len() - native_runs
        ));
        // In memory the text is not kept: no archive, nothing on disk.
        let spool = match self.memory {
            Some(_) => None,
            None => Some(Spool::create(&self.dir)?),
        };
        // perf 6.1 names JIT frames from this host's /tmp: renamed from the
        // capture's snapshot instead.
        let jit_maps = Arc::new(crate::symbolize::jit::JitMaps::load(&self.cap.found.dir));
        for w in &jit_maps.warnings {
            self.log(format!("warning: {w}"));
        }
        let how = |unit: &Unit| match plan.perf {
            _ if unit.native => Symbolize::Native(&natively),
            Some(perf) => Symbolize::Perf(perf, &script_opts, &jit_maps),
            None => unreachable!("plan() gives a perf to every perf unit"),
        };
        let recycle = |block: Vec<u8>| natively.recycle(block);
        let mut pprof = self.streamed_pprof(units.len())?;
        let (folded, mut results, report) = self.run_units(
            units,
            (jobs, zstd_workers),
            (spool.as_ref(), pprof.as_mut()),
            &how,
            &recycle,
        );
        // The unwinder's verdict stands only when it saw every sample.
        let unwound = results
            .iter()
            .try_fold(native::UnwindTally::default(), |mut t, r| {
                t.add(r.unwound.as_ref()?);
                Some(t)
            });
        let off_cpu = self.off_cpu_inputs(units, &mut results);
        let (shards, failures, parts) = self.collect_results(units, results);
        let mut warnings = jit_maps.warnings.clone();
        for file in natively.shrunk_files() {
            let w = format!(
                "{}: the symbol file shrank while it was read (truncated by another \
                 process?); its DSO's frames are left unnamed",
                file.display()
            );
            self.log(format!("warning: {w}"));
            warnings.push(w);
        }
        Ok(Symbolized {
            folded,
            shards,
            failures,
            archive: spool.map(|s| (s, parts)),
            warnings,
            unwound,
            report,
            pprof,
            off_cpu,
        })
    }

    /// zstd worker threads per stream: one stream from a big shard that
    /// could not be sliced gives the spare cores to zstd. Several streams
    /// already keep the cores busy, and one zstd thread outruns one `perf
    /// script` several times over.
    fn zstd_workers(&self, units: &[Unit]) -> u32 {
        let big = self
            .cap
            .shards
            .iter()
            .any(|s| s.bytes.unwrap_or(0) >= self.opts.slice_min_bytes);
        if units.len() == 1 && big && self.opts.jobs() > 1 {
            self.opts.jobs() as u32
        } else {
            0
        }
    }

    /// Unit indexes, longest first (estimated by data bytes per slice), so
    /// that a big shard does not start last and run alone. The sort is
    /// stable: a shard's slices start in time order, which the native
    /// symbolizer relies on (a slice waits for the ones before it to name
    /// their inline frames first).
    fn unit_order(&self, units: &[Unit]) -> Vec<usize> {
        let mut order: Vec<usize> = (0..units.len()).collect();
        let cost = |u: &Unit| {
            let s = &self.cap.shards[u.shard_pos];
            let slices = units.iter().filter(|v| v.shard_pos == u.shard_pos).count();
            s.bytes.unwrap_or(0) / slices.max(1) as u64
        };
        order.sort_by_key(|&i| std::cmp::Reverse(cost(&units[i])));
        order
    }

    /// Runs the units on `jobs` threads (each stream compressed with
    /// `zstd_workers` extra threads), each taking the next unit in
    /// [`Self::unit_order`], while this thread folds the text they send
    /// and reads it for the report (and `pprof`, when streamed); results
    /// keep unit order.
    fn run_units<'s>(
        &self,
        units: &[Unit],
        (jobs, zstd_workers): (usize, u32),
        (spool, mut pprof): (Option<&Spool>, Option<&mut StreamedPprof>),
        how: &(dyn Fn(&Unit) -> Symbolize<'s> + Sync),
        recycle: &dyn Fn(Vec<u8>),
    ) -> (Folded, Vec<UnitResult>, Option<SampleReader>) {
        let label = |what: &str| format!("{} {what}", self.label);
        let units_bar =
            self.progress
                .bar(Some(units.len() as u64), Counts::Items, &label("symbolize"));
        let bytes_bar = self.progress.bar(None, Counts::Bytes, &label("text"));
        let order = &self.unit_order(units);
        let next = AtomicUsize::new(0);
        let results: Mutex<Vec<Option<UnitResult>>> =
            Mutex::new((0..units.len()).map(|_| None).collect());
        let (tx, rx) = mpsc::sync_channel::<(usize, Piece)>(jobs * 2);
        // In memory, the caller's fold may take the samples instead, its
        // units numbered on from `base`.
        let into = self.memory.and_then(|m| m.take_fold());
        let base = into.as_ref().map(|(_, base)| *base);
        let mut stream = match into {
            Some((stream, _)) => stream,
            None => Folder::new(self.fold_options_with_cells()).stream(),
        };
        let mut readers = self.report_readers(units.len());
        let recorded = |u: &Unit| self.shard_ids().off_cpu(&u.data);
        let mut logs = OffCpuLogs::new(units, recorded, self.cap.event.as_deref());
        std::thread::scope(|scope| {
            for _ in 0..jobs {
                let sinks = UnitSinks {
                    tx: tx.clone(),
                    zstd_workers,
                    bytes_bar: &*bytes_bar,
                    spool,
                };
                let (next, results, units_bar) = (&next, &results, &units_bar);
                scope.spawn(move || {
                    while let Some(&i) = order.get(next.fetch_add(1, Ordering::SeqCst)) {
                        let unit = &units[i];
                        let r = self.run_unit(how(unit), (i, unit), &sinks);
                        self.log_unit(unit, &r);
                        units_bar.inc(1);
                        results.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(r);
                        let _ = send(&sinks.tx, i, Piece::Done);
                    }
                });
            }
            drop(tx);
            // Text blocks end at sample boundaries: folded in place, their
            // buffers go back to the native symbolizer. Units run side by
            // side; the timeline's cells place each in unit order, and so
            // does the merge of the report's per-unit readers.
            let mut frames: Vec<Frames> = (0..units.len()).map(|_| Frames::default()).collect();
            let logs = &mut logs;
            for (unit, piece) in rx {
                match piece {
                    Piece::Text(block) => {
                        // Text the profile cannot take: it is written from
                        // the archive instead.
                        Consumers {
                            stream: &mut stream,
                            unit_base: base.unwrap_or(0),
                            reader: readers.as_mut().map(|r| &mut r[unit]),
                            pprof: pprof.as_deref_mut(),
                            off_cpu: None,
                        }
                        .text(unit, &block);
                        recycle(block);
                    }
                    Piece::Samples(batch) => Consumers {
                        stream: &mut stream,
                        unit_base: base.unwrap_or(0),
                        reader: readers.as_mut().map(|r| &mut r[unit]),
                        pprof: pprof.as_deref_mut(),
                        off_cpu: Some(&mut *logs),
                    }
                    .samples(unit, &mut frames[unit], batch),
                    Piece::Done => {
                        if let Some(p) = pprof.as_mut() {
                            p.done(unit);
                        }
                        logs.done(unit);
                    }
                }
            }
        });
        if let Some(p) = pprof {
            p.all_done();
        }
        units_bar.finish();
        bytes_bar.finish();
        let report = readers.and_then(report::merge);
        let mut results = in_unit_order(results);
        for (unit, r) in results.iter_mut().enumerate() {
            r.log = logs.take(unit);
        }
        // The caller's fold goes back to it, to be finished there.
        let folded = match (self.memory, base) {
            (Some(m), Some(base)) => {
                m.give_back(stream, base + units.len());
                Folded::default()
            }
            _ => stream.finish(),
        };
        (folded, results, report)
    }

    /// One reader of the report's profile per unit, when a report is asked
    /// for: each unit's samples are read as they stream, and the readers
    /// merged in unit order read what one reader of the archive (the
    /// units' text in unit order) would.
    fn report_readers(&self, units: usize) -> Option<Vec<SampleReader>> {
        // Off-CPU captures: the sampling event's, as the folded stacks.
        let event = self.fold_options().event_filter;
        (self.opts.formats.report).then(|| {
            (0..units)
                .map(|_| SampleReader::of_event(event.as_deref()))
                .collect()
        })
    }

    /// One log line per finished unit: its text, time and failure.
    fn log_unit(&self, unit: &Unit, r: &UnitResult) {
        let Ok(o) = &r.outcome else { return };
        let s = &self.cap.shards[unit.shard_pos];
        let slice = unit
            .slice
            .map(|sl| format!(" slice {}", sl.to_arg()))
            .unwrap_or_default();
        // A failed shard is a warning, shown without -v too.
        self.log(format!(
            "{}shard {}{slice}: {} of text in {:.1}s{}",
            if o.ok() { "" } else { "warning: " },
            s.index,
            crate::sys::units::format_bytes(o.bytes),
            o.elapsed.as_secs_f64(),
            if o.ok() {
                String::new()
            } else {
                format!(" - FAILED: {}", o.failure())
            }
        ));
    }

    /// Per shard: slices, bytes, the slowest run, the first failure; and
    /// the spooled archive parts.
    fn collect_results(
        &self,
        units: &[Unit],
        results: Vec<UnitResult>,
    ) -> (Vec<ShardSummary>, Vec<String>, Vec<Spooled>) {
        let mut shards: Vec<ShardSummary> = self
            .cap
            .shards
            .iter()
            .map(|s| shard_summary(s, "ok"))
            .collect();
        let mut failures = Vec::new();
        let mut parts = Vec::new();
        for (unit, r) in units.iter().zip(results) {
            let sh = &mut shards[unit.shard_pos];
            sh.slices += 1;
            let err = match &r.outcome {
                Ok(o) => {
                    sh.text_bytes += o.bytes;
                    sh.seconds = sh.seconds.max(secs(o.elapsed));
                    (!o.ok()).then(|| o.failure())
                }
                Err(e) => Some(e.to_string()),
            };
            if let Some(e) = err {
                if sh.error.is_none() {
                    let data = &self.cap.shards[unit.shard_pos].data_file;
                    let hint = match crate::symbolize::native::truncation(data) {
                        Some(why) => format!(": {why}"),
                        None if e.contains("exit status") => {
                            " (corrupt or truncated perf.data?)".to_string()
                        }
                        None => String::new(),
                    };
                    let msg = format!("shard {} ({}): {e}{hint}", sh.index, sh.data_file);
                    failures.push(msg);
                    sh.error = Some(format!("{e}{hint}"));
                    sh.status = "failed".into();
                }
            }
            if let Some(p) = r.part {
                parts.push(p);
            }
        }
        (shards, failures, parts)
    }

    /// Runs one `perf script` (or the native symbolizer), teeing its output
    /// into a compressed part and (cut at sample boundaries) into the fold
    /// channel.
    fn run_unit(
        &self,
        how: Symbolize<'_>,
        (index, unit): (usize, &Unit),
        sinks: &UnitSinks<'_>,
    ) -> UnitResult {
        let UnitSinks {
            tx,
            zstd_workers,
            bytes_bar,
            spool,
        } = sinks;
        // In memory (no spool) the text is dropped: no part to write.
        let part = spool.map(|_| Part::create(&self.dir, self.opts.zstd_level, *zstd_workers));
        let mut part = match part.transpose() {
            Ok(p) => p,
            Err(e) => {
                return UnitResult {
                    outcome: Err(UnitError::Part(e)),
                    ..UnitResult::empty()
                }
            }
        };
        let mut chunker = Chunker::default();
        let mut parsed = ScriptSamples::default();
        let (mut unwound, mut off_cpu) = (None, None);
        let (outcome, program) = match how {
            Symbolize::Perf(perf, script_opts, jit_maps) => {
                let how = (perf, script_opts, jit_maps);
                let text = (&mut chunker, &mut parsed);
                let r = run_perf(how, (index, unit), part.as_mut(), text, sinks);
                (r, perf.program.clone())
            }
            Symbolize::Native(n) => {
                // The text goes to the archive only; the samples go on
                // (in memory, the text instead where the caller's fold
                // reads text: [`super::memory::Memory::as_text`]).
                let as_text = self.memory.is_some_and(|m| m.as_text);
                let consume = |mut batch: Batch| {
                    let text = std::mem::take(&mut batch.text);
                    if let Some(part) = part.as_mut() {
                        part.write_block(&text)?;
                    }
                    bytes_bar.inc(text.len() as u64);
                    if as_text {
                        return send(tx, index, Piece::Text(text));
                    }
                    n.recycle(text);
                    send(tx, index, Piece::Samples(batch))
                };
                let r = n.run(&unit.data, unit.slice.as_ref(), consume);
                unwound = r.as_ref().ok().map(|o| o.unwound);
                off_cpu = r.as_ref().ok().map(|o| (o.off_cpu.clone(), o.sample_times));
                (Ok(native_outcome(r)), PathBuf::from("native symbolizer"))
            }
        };
        let tail = chunker.finish();
        let write_tail = || -> io::Result<()> {
            if let Some(part) = part.as_mut() {
                part.write_all(&tail.extra)?;
            }
            if !tail.block.is_empty() {
                send(tx, index, text_piece(&mut parsed, tail.block))?;
            }
            Ok(())
        };
        let tail_result = write_tail();
        let outcome = match (outcome, tail_result) {
            (Ok(mut o), Err(e)) => {
                o.consumer_error.get_or_insert(e.to_string());
                Ok(o)
            }
            (Ok(o), Ok(())) => Ok(o),
            (Err(source), _) => Err(UnitError::Run { program, source }),
        };
        let mut r = match (part, spool) {
            (Some(part), Some(spool)) => self.finish_part(part, spool, outcome),
            _ => UnitResult {
                outcome,
                ..UnitResult::empty()
            },
        };
        r.unwound = unwound;
        r.off_cpu = off_cpu;
        r
    }

    /// Finishes and spools the compressed `part` of a unit's text. A part
    /// that cannot be finished or checked (a full disk) fails its shard:
    /// the archive is never published without it.
    fn finish_part(
        &self,
        part: Part,
        spool: &Spool,
        outcome: std::result::Result<RunOutcome, UnitError>,
    ) -> UnitResult {
        match part.finish().and_then(|p| spool.append(p)) {
            Ok(p) => UnitResult {
                outcome,
                part: Some(p),
                ..UnitResult::empty()
            },
            Err(e) => UnitResult {
                outcome: outcome.map(|mut o| {
                    o.consumer_error.get_or_insert(format!(
                        "{}: compressed part in {}: {e}",
                        capture::SCRIPT_ZST,
                        self.dir.display()
                    ));
                    o
                }),
                ..UnitResult::empty()
            },
        }
    }
}

/// The units' results in unit order; a unit without one counts as not
/// run.
fn in_unit_order(results: Mutex<Vec<Option<UnitResult>>>) -> Vec<UnitResult> {
    results
        .into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .into_iter()
        .map(|r| r.unwrap_or(UnitResult::empty()))
        .collect()
}

/// What a unit hands the fold and the report: structured samples (the
/// native symbolizer's, or `perf script`'s text parsed), or text cut at
/// sample boundaries (`perf script`'s that the model does not print back);
/// then that it is done.
enum Piece {
    Text(Vec<u8>),
    Samples(Batch),
    Done,
}

/// Where one `perf script` run's text goes: the fold channel and the
/// archive spool.
struct UnitSinks<'s> {
    tx: mpsc::SyncSender<(usize, Piece)>,
    zstd_workers: u32,
    bytes_bar: &'s dyn Bar,
    /// `None` in memory: the text is not kept.
    spool: Option<&'s Spool>,
}

/// How one unit is symbolized.
enum Symbolize<'a> {
    Perf(
        &'a PerfTool,
        &'a ScriptOptions,
        &'a Arc<crate::symbolize::jit::JitMaps>,
    ),
    Native(&'a native::Symbolizer),
}

/// Runs `perf script` over `unit`, JIT frames renamed from the capture's
/// maps, teeing its text into `part` and, cut at sample boundaries by
/// `chunker` and parsed by `parsed`, into the fold channel.
fn run_perf(
    (perf, script_opts, jit_maps): (
        &PerfTool,
        &ScriptOptions,
        &Arc<crate::symbolize::jit::JitMaps>,
    ),
    (index, unit): (usize, &Unit),
    mut part: Option<&mut Part>,
    (chunker, parsed): (&mut Chunker, &mut ScriptSamples),
    sinks: &UnitSinks<'_>,
) -> io::Result<RunOutcome> {
    let UnitSinks { tx, bytes_bar, .. } = sinks;
    let args = perf::script_argv(&unit.data, script_opts, unit.slice.as_ref());
    let mut rewrite = crate::symbolize::jit::ScriptRewrite::new(Arc::clone(jit_maps));
    let mut sink = |bytes: &[u8]| -> io::Result<()> {
        if let Some(part) = part.as_mut() {
            part.write_all(bytes)?;
        }
        bytes_bar.inc(bytes.len() as u64);
        if let Some(block) = chunker.push(bytes) {
            send(tx, index, text_piece(parsed, block))?;
        }
        Ok(())
    };
    let mut renamed = Vec::new();
    let r = perf::run(perf, &args, |b| {
        renamed.clear();
        rewrite.push(b, &mut renamed);
        sink(&renamed)
    });
    // A last line without its newline (perf ends with one).
    let mut rest = Vec::new();
    rewrite.finish(&mut rest);
    r.and_then(|o| sink(&rest).map(|()| o))
}

/// A native run in the shape of a `perf script` run's outcome.
fn native_outcome(r: std::result::Result<native::Outcome, native::Error>) -> RunOutcome {
    match r {
        Ok(o) => RunOutcome {
            bytes: o.bytes,
            exit_code: Some(0),
            stderr_tail: String::new(),
            elapsed: o.elapsed,
            consumer_error: None,
        },
        Err(e) => RunOutcome {
            bytes: 0,
            exit_code: None,
            stderr_tail: String::new(),
            elapsed: Duration::ZERO,
            consumer_error: Some(format!("native symbolizer: {e}")),
        },
    }
}

/// A block of a `perf script` run's text as it goes on: its samples, parsed
/// once, or the text when the model does not print it back as it is.
fn text_piece(parsed: &mut ScriptSamples, block: Vec<u8>) -> Piece {
    match parsed.parse(&block) {
        Some(batch) => Piece::Samples(batch),
        None => Piece::Text(block),
    }
}

/// Sends a piece of unit `unit`'s samples to the fold.
fn send(tx: &mpsc::SyncSender<(usize, Piece)>, unit: usize, piece: Piece) -> io::Result<()> {
    tx.send((unit, piece))
        .map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "the folder stopped"))
}

/// A shard's summary line before any `perf script` run was counted.
pub(super) fn shard_summary(s: &crate::capture::Shard, status: &str) -> ShardSummary {
    ShardSummary {
        index: s.index,
        data_file: file_name(&s.data_file),
        data_bytes: s.bytes.unwrap_or(0),
        slices: 0,
        text_bytes: 0,
        seconds: 0.0,
        status: status.into(),
        error: None,
        inline: None,
    }
}

#[cfg(test)]
mod tests;
