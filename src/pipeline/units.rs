//! Symbolizing a capture's shards: which symbolizer takes each shard
//! (native or `perf script`, refused across architectures), the units of
//! work (shards cut into time slices), running them up to `jobs` at once
//! while this thread folds the text they stream and each stream is
//! compressed into a spooled archive part, and the per-shard results.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use super::{file_name, secs, Pipeline};
use crate::capture;
use crate::error::Result;
use crate::output::archive::{Part, Spool, Spooled};
use crate::output::summary::ShardSummary;
use crate::symbolize::native;
use crate::symbolize::perf::{self, PerfTool, RunOutcome, ScriptOptions, TimeSlice};
use crate::text::boundary::Chunker;
use crate::text::fold::{Folded, Folder};

/// One unit of symbolizing work: a shard, or a time slice of one, by
/// `perf script` or natively.
#[derive(Debug, Clone)]
pub(super) struct Unit {
    shard_pos: usize,
    data: PathBuf,
    slice: Option<TimeSlice>,
    native: bool,
}

/// Which shards are symbolized natively, and the perf for the others.
pub(super) struct Plan<'p> {
    pub(super) native: Vec<bool>,
    pub(super) perf: Option<&'p PerfTool>,
}

impl Plan<'_> {
    /// `perf script`, `native`, or both with shard counts.
    pub(super) fn symbolized_from(&self) -> String {
        let n = self.native.iter().filter(|&&x| x).count();
        match (n, self.native.len() - n) {
            (_, 0) => "native".into(),
            (0, _) => "perf script".into(),
            (n, p) => format!("native ({n} shards), perf script ({p} shards)"),
        }
    }
}

struct UnitResult {
    outcome: std::result::Result<RunOutcome, String>,
    part: Option<Spooled>,
}

/// What the `perf script` runs produced: the fold, per-shard summaries,
/// failures, and the new archive's spooled parts in order.
pub(super) struct Symbolized {
    pub(super) folded: Folded,
    pub(super) shards: Vec<ShardSummary>,
    pub(super) failures: Vec<String>,
    pub(super) archive: (Spool, Vec<Spooled>),
}

impl<'a> Pipeline<'a> {
    /// Per shard: native or `perf script` (`--symbolizer`, and what
    /// [`native::check`] says of the shard). `None` when the text must come
    /// from the capture's symbolized text instead (data files missing, or
    /// perf needed and unusable).
    /// `cross` gets the refusal when a shard would go to `perf script` on a
    /// host that cannot unwind its architecture ([`native::arch`]).
    pub(super) fn plan(
        &self,
        warnings: &mut Vec<String>,
        cross: &mut Option<String>,
    ) -> Option<Plan<'a>> {
        if !self.cap.has_all_data() {
            return None;
        }
        let choice = self.opts.symbolizer;
        // Without perf, `auto` keeps folding the text a capture carries (it
        // was symbolized where the capture's files were); native then runs
        // only on captures that carry none, or when asked for by name.
        if choice == native::Choice::Auto && self.perf.is_err() && self.cap.script_text.is_some() {
            return None;
        }
        let native = self.native_shards(choice, warnings);
        if let Some(why) = self.cross_arch(&native) {
            let msg = format!(
                "{why}; process it on a node of that architecture, or with --symbolizer native \
                 (auto) where the native symbolizer takes the shard"
            );
            self.log(format!("warning: {msg}"));
            *cross = Some(msg);
            return None;
        }
        let perf = self.perf.as_ref().ok();
        if native.iter().any(|n| !n) && perf.is_none() {
            return None;
        }
        Some(Plan { native, perf })
    }

    /// Per shard: whether the native symbolizer takes it (`choice`, and
    /// what [`native::check`] says); each reason it refuses shards for is
    /// logged and warned of once, naming them.
    fn native_shards(&self, choice: native::Choice, warnings: &mut Vec<String>) -> Vec<bool> {
        let mut native = Vec::new();
        let mut refused: Vec<(String, Vec<u32>)> = Vec::new();
        let verdicts = match choice {
            native::Choice::Perf => Vec::new(),
            // Jobs at a time: each check walks its whole file.
            _ => crate::map_jobs(&self.cap.shards, self.opts.jobs(), |s| {
                native::check(&s.data_file)
            }),
        };
        for (i, s) in self.cap.shards.iter().enumerate() {
            let ok = match choice {
                native::Choice::Perf => false,
                _ => match verdicts[i].clone() {
                    Ok(()) => true,
                    Err(why) => {
                        match refused.iter_mut().find(|(w, _)| *w == why) {
                            Some((_, v)) => v.push(s.index),
                            None => refused.push((why, vec![s.index])),
                        }
                        false
                    }
                },
            };
            native.push(ok);
        }
        for (why, shards) in refused {
            let list: Vec<String> = shards.iter().map(u32::to_string).collect();
            let msg = format!(
                "perf script symbolizes shard(s) {} instead of the native symbolizer: {why}",
                list.join(", ")
            );
            self.log(format!("warning: {msg}"));
            warnings.push(msg);
        }
        native
    }

    /// Why `perf script` here would draw the stacks of the shards that would
    /// go to it (`native[i]` false) wrongly, naming them (`None`: it would not).
    fn cross_arch(&self, native: &[bool]) -> Option<String> {
        let mut bad: Vec<String> = Vec::new();
        let mut reason = None;
        for (s, _) in self.cap.shards.iter().zip(native).filter(|(_, n)| !**n) {
            if let Some(why) = native::arch::perf_mismatch(&s.data_file) {
                bad.push(s.index.to_string());
                reason.get_or_insert(why);
            }
        }
        reason.map(|why| {
            format!(
                "cannot symbolize shard(s) {} with perf script: {why}",
                bad.join(", ")
            )
        })
    }

    /// Shards, cut into time slices when there are fewer shards than jobs.
    pub(super) fn plan_units(&self, plan: &Plan<'_>) -> Vec<Unit> {
        let jobs = self.opts.jobs();
        let shards = &self.cap.shards;
        let total: u64 = shards
            .iter()
            .map(|s| s.bytes.unwrap_or(0))
            .sum::<u64>()
            .max(1);
        let mut units = Vec::new();
        for (pos, s) in shards.iter().enumerate() {
            let bytes = s.bytes.unwrap_or(0);
            let want = match self.opts.time_slices {
                Some(n) => n.max(1),
                None if shards.len() < jobs && bytes >= self.opts.slice_min_bytes => {
                    let share = (jobs as f64 * bytes as f64 / total as f64).round() as usize;
                    let by_size = (bytes / self.opts.slice_min_bytes.max(1)) as usize;
                    share.clamp(1, by_size.max(1))
                }
                None => 1,
            };
            let is_native = plan.native[pos];
            let slices = self.time_slices(plan, s, is_native, want);
            if slices.len() > 1 {
                self.log(format!(
                    "shard {} ({}): {} time slices",
                    s.index,
                    file_name(&s.data_file),
                    slices.len()
                ));
                units.extend(slices.into_iter().map(|sl| Unit {
                    shard_pos: pos,
                    data: s.data_file.clone(),
                    slice: Some(sl),
                    native: is_native,
                }));
            } else {
                units.push(Unit {
                    shard_pos: pos,
                    data: s.data_file.clone(),
                    slice: None,
                    native: is_native,
                });
            }
        }
        units
    }

    /// `want` time slices of shard `s`, from its time range; none when
    /// `want` is 1 or the range cannot be read.
    fn time_slices(
        &self,
        plan: &Plan<'_>,
        s: &capture::Shard,
        is_native: bool,
        want: usize,
    ) -> Vec<TimeSlice> {
        if want <= 1 {
            return Vec::new();
        }
        let range = match plan.perf {
            _ if is_native => native::time_range(&s.data_file),
            Some(perf) => perf::time_range(perf, &s.data_file),
            None => Err("no perf".into()),
        };
        match range {
            Ok((first, last)) => perf::plan_slices(first, last, want),
            Err(e) => {
                self.log(format!(
                    "shard {}: not split into time slices ({e})",
                    s.index
                ));
                Vec::new()
            }
        }
    }

    /// Runs every unit (up to `jobs` at once), folding their output as it
    /// streams and compressing it in the same pass into checked, spooled
    /// parts; the archive is published later, and only when it may replace
    /// the old one ([`Self::publish_archive`]).
    pub(super) fn symbolize_all(&self, plan: &Plan<'_>, units: &[Unit]) -> Result<Symbolized> {
        let (script_opts, natively) = self.symbolizers();
        let zstd_workers = self.zstd_workers(units);
        let jobs = self.opts.jobs().min(units.len()).max(1);
        let native_runs = units.iter().filter(|u| u.native).count();
        self.log(format!(
            "symbolizing: {} run(s) over {} shard(s) ({native_runs} native, {} perf script), {jobs} at once",
            units.len(),
            self.cap.shards.len(),
            units.len() - native_runs
        ));
        let spool = Spool::create(&self.dir)?;
        // perf 6.1 names JIT frames from this host's /tmp: renamed from the
        // capture's snapshot instead.
        let jit_maps = Arc::new(crate::symbolize::jit::JitMaps::load(&self.cap.found.dir));
        let how = |unit: &Unit| match plan.perf {
            _ if unit.native => Symbolize::Native(&natively),
            Some(perf) => Symbolize::Perf(perf, &script_opts, &jit_maps),
            None => unreachable!("plan() gives a perf to every perf unit"),
        };
        let recycle = |block: Vec<u8>| natively.recycle(block);
        let (folded, results) = self.run_units(units, (jobs, zstd_workers), &spool, &how, &recycle);
        let (shards, failures, parts) = self.collect_results(units, results);
        Ok(Symbolized {
            folded,
            shards,
            failures,
            archive: (spool, parts),
        })
    }

    /// Inline frames from the native symbolizer: they cost about nothing
    /// there, so on unless `--no-inline`.
    fn native_inline(&self) -> bool {
        !self.opts.no_inline
    }

    /// Inline frames from `perf script`: it can get 100 times slower, so
    /// only with `--inline`.
    fn perf_inline(&self) -> bool {
        self.opts.inline && !self.opts.no_inline
    }

    /// Marks each shard with whether it has inline frames, and logs which.
    pub(super) fn note_inline(&self, plan: &Plan<'_>, shards: &mut [ShardSummary]) {
        let mut with = Vec::new();
        let mut without = Vec::new();
        for (pos, s) in self.cap.shards.iter().enumerate() {
            let native = plan.native.get(pos).copied().unwrap_or(false);
            let inline = if native {
                self.native_inline()
            } else {
                self.perf_inline()
            };
            if let Some(sum) = shards.iter_mut().find(|x| x.index == s.index) {
                sum.inline = Some(inline);
            }
            let who = if native { "native" } else { "perf script" };
            if inline {
                with.push(format!("{} ({who})", s.index));
            } else {
                without.push(format!("{} ({who})", s.index));
            }
        }
        let why = if self.opts.no_inline {
            "--no-inline"
        } else {
            "perf script expands them only with --inline"
        };
        match (with.is_empty(), without.is_empty()) {
            (_, true) => self.log("inline frames: in every shard"),
            (true, _) => self.log(format!("inline frames: none ({why})")),
            _ => self.log(format!(
                "inline frames: in shard(s) {}; not in shard(s) {} ({why})",
                with.join(", "),
                without.join(", ")
            )),
        }
    }

    /// The `perf script` options and the native symbolizer for this
    /// capture, both reading the same symbol files and kernel table.
    fn symbolizers(&self) -> (ScriptOptions, native::Symbolizer) {
        let script_opts = ScriptOptions {
            inline: self.perf_inline(),
            symfs: self.cap.symfs.clone(),
            kallsyms: self.kernel_symbols().file().map(Path::to_path_buf),
        };
        if let Some(s) = &script_opts.symfs {
            self.log(format!("symbols from {}", s.display()));
        }
        self.log(format!(
            "kernel symbols: {}",
            self.kernel_symbols().describe()
        ));
        // The native symbolizer names kernel frames from the same table as
        // `perf script` (the snapshot, or the live one on the same boot).
        let natively = native::Symbolizer::new(native::Options {
            symfs: self.cap.symfs.clone(),
            kallsyms: self.kernel_symbols().file().map(Path::to_path_buf),
            inline: self.native_inline(),
            jit: Some(self.cap.found.dir.clone()),
        });
        (script_opts, natively)
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
    /// that a big shard does not start last and run alone.
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
    /// [`Self::unit_order`], while this thread folds the text they send;
    /// results keep unit order.
    fn run_units<'s>(
        &self,
        units: &[Unit],
        (jobs, zstd_workers): (usize, u32),
        spool: &Spool,
        how: &(dyn Fn(&Unit) -> Symbolize<'s> + Sync),
        recycle: &dyn Fn(Vec<u8>),
    ) -> (Folded, Vec<UnitResult>) {
        let units_bar = self.multi.add(
            self.progress
                .bar(units.len() as u64, format!("{} symbolize", self.label)),
        );
        let bytes_bar = self
            .multi
            .add(self.progress.bytes_counter(format!("{} text", self.label)));
        let order = &self.unit_order(units);
        let next = AtomicUsize::new(0);
        let results: Mutex<Vec<Option<UnitResult>>> =
            Mutex::new((0..units.len()).map(|_| None).collect());
        let (tx, rx) = mpsc::sync_channel::<Vec<u8>>(jobs * 2);
        let folder = Folder::new(self.fold_options());
        let mut stream = folder.stream();
        std::thread::scope(|scope| {
            for _ in 0..jobs {
                let sinks = UnitSinks {
                    tx: tx.clone(),
                    zstd_workers,
                    bytes_bar: &bytes_bar,
                    spool,
                };
                let (next, results, units_bar) = (&next, &results, &units_bar);
                scope.spawn(move || {
                    while let Some(&i) = order.get(next.fetch_add(1, Ordering::SeqCst)) {
                        let unit = &units[i];
                        let r = self.run_unit(how(unit), unit, &sinks);
                        self.log_unit(unit, &r);
                        units_bar.inc(1);
                        results.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(r);
                    }
                });
            }
            drop(tx);
            // Blocks end at sample boundaries: folded in place, their
            // buffers go back to the native symbolizer.
            for block in rx {
                stream.push_whole(&block);
                recycle(block);
            }
        });
        units_bar.finish_and_clear();
        bytes_bar.finish_and_clear();
        (stream.finish(), in_unit_order(results))
    }

    /// One log line per finished unit: its text, time and failure.
    fn log_unit(&self, unit: &Unit, r: &UnitResult) {
        let Ok(o) = &r.outcome else { return };
        let s = &self.cap.shards[unit.shard_pos];
        let slice = unit
            .slice
            .map(|sl| format!(" slice {}", sl.to_arg()))
            .unwrap_or_default();
        self.log(format!(
            "shard {}{slice}: {} of text in {:.1}s{}",
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
                Err(e) => Some(e.clone()),
            };
            if let Some(e) = err {
                if sh.error.is_none() {
                    let hint = if e.contains("exit status") {
                        " (corrupt or truncated perf.data?)"
                    } else {
                        ""
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
    fn run_unit(&self, how: Symbolize<'_>, unit: &Unit, sinks: &UnitSinks<'_>) -> UnitResult {
        let UnitSinks {
            tx,
            zstd_workers,
            bytes_bar,
            spool,
        } = sinks;
        let mut part = match Part::create(&self.dir, self.opts.zstd_level, *zstd_workers) {
            Ok(p) => p,
            Err(e) => {
                return UnitResult {
                    outcome: Err(e.to_string()),
                    part: None,
                }
            }
        };
        let mut chunker = Chunker::default();
        let (outcome, program) = match how {
            Symbolize::Perf(perf, script_opts, jit_maps) => {
                let how = (perf, script_opts, jit_maps);
                let r = run_perf(how, unit, &mut part, &mut chunker, sinks);
                (r, perf.program.clone())
            }
            Symbolize::Native(n) => {
                // Native blocks already end at sample boundaries: they go to
                // the folder whole, without the chunker's copy.
                let consume = |block: Vec<u8>| {
                    part.write_block(&block)?;
                    bytes_bar.inc(block.len() as u64);
                    send(tx, block)
                };
                let r = n.run(&unit.data, unit.slice.as_ref(), consume);
                (Ok(native_outcome(r)), PathBuf::from("native symbolizer"))
            }
        };
        let tail = chunker.finish();
        let write_tail = || -> io::Result<()> {
            part.write_all(&tail.extra)?;
            if !tail.block.is_empty() {
                send(tx, tail.block)?;
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
            (Err(e), _) => Err(format!("cannot run `{}`: {e}", program.display())),
        };
        self.finish_part(part, spool, outcome)
    }

    /// Finishes and spools the compressed `part` of a unit's text. A part
    /// that cannot be finished or checked (a full disk) fails its shard:
    /// the archive is never published without it.
    fn finish_part(
        &self,
        part: Part,
        spool: &Spool,
        outcome: std::result::Result<RunOutcome, String>,
    ) -> UnitResult {
        match part.finish().and_then(|p| spool.append(p)) {
            Ok(p) => UnitResult {
                outcome,
                part: Some(p),
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
                part: None,
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
        .map(|r| {
            r.unwrap_or(UnitResult {
                outcome: Err("not run".into()),
                part: None,
            })
        })
        .collect()
}

/// Where one `perf script` run's text goes: the fold channel and the
/// archive spool.
struct UnitSinks<'s> {
    tx: mpsc::SyncSender<Vec<u8>>,
    zstd_workers: u32,
    bytes_bar: &'s indicatif::ProgressBar,
    spool: &'s Spool,
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
/// `chunker`, into the fold channel.
fn run_perf(
    (perf, script_opts, jit_maps): (
        &PerfTool,
        &ScriptOptions,
        &Arc<crate::symbolize::jit::JitMaps>,
    ),
    unit: &Unit,
    part: &mut Part,
    chunker: &mut Chunker,
    sinks: &UnitSinks<'_>,
) -> io::Result<RunOutcome> {
    let UnitSinks { tx, bytes_bar, .. } = sinks;
    let args = perf::script_argv(&unit.data, script_opts, unit.slice.as_ref());
    let mut rewrite = crate::symbolize::jit::ScriptRewrite::new(Arc::clone(jit_maps));
    let mut sink = |bytes: &[u8]| -> io::Result<()> {
        part.write_all(bytes)?;
        bytes_bar.inc(bytes.len() as u64);
        if let Some(block) = chunker.push(bytes) {
            send(tx, block)?;
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
fn native_outcome(r: std::result::Result<native::Outcome, String>) -> RunOutcome {
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

fn send(tx: &mpsc::SyncSender<Vec<u8>>, block: Vec<u8>) -> io::Result<()> {
    tx.send(block)
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
