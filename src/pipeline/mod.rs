//! The per-capture pipeline of `jobprof process`: validate -> symbolize
//! (all shards and time slices at once, up to `jobs`) -> fold + archive in
//! the same pass -> render -> summarize -> publish, `.postprocess-complete`
//! last.
//!
//! This module composes the stages and owns no format knowledge: captures
//! come from [`crate::capture`], `perf script` runs through
//! [`crate::symbolize::perf`], text is folded by [`crate::text::fold`] and compressed by
//! [`crate::output::archive`], pictures come from [`crate::output::render`] and numbers from
//! [`crate::output::summary`]. Every output is written through
//! [`crate::sys::atomic::AtomicFile`], so a run killed half-way leaves either the
//! previous file or the complete new one; the marker is removed before
//! outputs are rewritten and written only after all of them, so the next
//! run knows what to finish. A run that would be worse than the complete
//! result on disk (a failed shard, or fewer samples or named frames than
//! the marker records) changes nothing and says so. Outcomes are returned per capture; nothing is
//! printed here except progress (through [`Progress`]).

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::capture::{
    self, CaptureDir, Completion, Marker, Outcome, Quality, Status, ValidCapture, FOLDED, HTML,
    SPEEDSCOPE, SUMMARY, SVG,
};
use crate::error::{Error, ExitCode, Result};
use crate::output::archive::{self, Part, Spool, Spooled};
use crate::output::render::{self, Format, RenderOptions};
use crate::output::summary::{self, InputFile, ShardSummary, StackStats, Summary, Timings};
use crate::symbolize::kernel::{self, KernelSymbols};
use crate::symbolize::native;
use crate::symbolize::perf::{self, PerfTool, RunOutcome, ScriptOptions, TimeSlice};
use crate::sys::atomic::{AtomicFile, Destination};
use crate::sys::input::Source;
use crate::sys::progress::Progress;
use crate::text::fold::{self, Folded, Folder};

mod off_cpu;

/// The file a format is written to.
pub fn output_name(format: Format) -> &'static str {
    match format {
        Format::Folded => FOLDED,
        Format::Svg => SVG,
        Format::Html => HTML,
        Format::Speedscope => SPEEDSCOPE,
        Format::Pprof => crate::output::pprof::PPROF,
    }
}

/// What to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Formats {
    /// Rendered outputs, in writing order.
    pub render: Vec<Format>,
    /// Whether to write `summary.json`.
    pub summary: bool,
    /// Whether to write `report.txt` ([`crate::output::report`]).
    pub report: bool,
}

impl Default for Formats {
    fn default() -> Self {
        Formats {
            render: vec![Format::Folded, Format::Svg, Format::Html],
            summary: true,
            report: true,
        }
    }
}

impl Formats {
    /// Parses `svg,html,folded,summary,speedscope` (any subset, any order),
    /// or `all` for every one of them.
    pub fn parse(list: &str) -> Result<Formats> {
        let mut f = Formats {
            render: Vec::new(),
            summary: false,
            report: false,
        };
        for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            if item == "summary" {
                f.summary = true;
                continue;
            }
            if item == "report" {
                f.report = true;
                continue;
            }
            if item.eq_ignore_ascii_case("all") {
                f.summary = true;
                f.report = true;
                f.render = Format::ALL.to_vec();
                continue;
            }
            let format: Format = item.parse().map_err(|_| {
                Error::Usage(format!(
                    "--formats: unknown format `{item}`; use a comma-separated list of \
                     svg, html, folded, summary, report, speedscope, pprof, or all"
                ))
            })?;
            if !f.render.contains(&format) {
                f.render.push(format);
            }
        }
        if f.render.is_empty() && !f.summary && !f.report {
            return Err(Error::Usage("--formats: name at least one format".into()));
        }
        // Folded first: it is the cheapest and the one kept when rendering
        // is refused.
        f.render
            .sort_by_key(|x| Format::ALL.iter().position(|a| a == x).unwrap_or(9));
        Ok(f)
    }

    /// Output file names, the archive excluded.
    pub fn names(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .render
            .iter()
            .map(|f| output_name(*f).to_string())
            .collect();
        if self.report {
            v.push(crate::output::report::REPORT_TXT.to_string());
        }
        if self.summary {
            v.push(SUMMARY.to_string());
        }
        v
    }
}

/// Options of `jobprof process`.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Options {
    /// Concurrent `perf script` processes (and fold threads); 0 = cores.
    pub jobs: usize,
    /// `--inline`: expand inlined functions in the shards `perf script`
    /// symbolizes too (slow on dwarf captures). The native symbolizer
    /// expands them unless `no_inline`.
    pub inline: bool,
    /// `--no-inline`: no inline frames at all.
    pub no_inline: bool,
    /// Process completed captures again.
    pub force: bool,
    /// What to write.
    pub formats: Formats,
    /// Refuse to render below this percentage of the sample weight with a
    /// named leaf frame (`symbolized_ratio`); `None` (the default): always
    /// draw, with the few-symbols warning below 5%.
    pub min_symbolized_pct: Option<f64>,
    /// The perf to run; `None` = `perf` on `PATH`.
    pub perf: Option<PathBuf>,
    /// Time slices per shard; `None` = automatic (only when there are fewer
    /// shards than jobs, and only shards of at least `slice_min_bytes`).
    pub time_slices: Option<usize>,
    /// Smallest data file worth slicing, and the least bytes per slice, in
    /// automatic mode.
    pub slice_min_bytes: u64,
    /// zstd level of the archive.
    pub zstd_level: i32,
    /// Native symbolizer, `perf script`, or native where it can.
    pub symbolizer: native::Choice,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            jobs: 0,
            inline: false,
            no_inline: false,
            force: false,
            formats: Formats::default(),
            min_symbolized_pct: None,
            perf: None,
            time_slices: None,
            slice_min_bytes: 4 << 20,
            zstd_level: archive::DEFAULT_LEVEL,
            symbolizer: native::Choice::Auto,
        }
    }
}

impl Options {
    fn jobs(&self) -> usize {
        crate::jobs_or_cores(self.jobs)
    }
}

/// The outcome of a whole run.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// One entry per capture, in discovery order.
    pub captures: Vec<Outcome>,
}

impl Report {
    /// 0 when every capture was processed or skipped, 1 when any was
    /// refused or failed.
    pub fn exit_code(&self) -> ExitCode {
        if self.captures.iter().any(|c| c.status.is_failure()) {
            ExitCode::Failed
        } else {
            ExitCode::Success
        }
    }
}

/// Processes every capture found under `roots` (narrowed by `filter`).
/// Errors only for bad usage (no captures, unreadable roots); per-capture
/// problems are in the report.
pub fn run(
    roots: &[PathBuf],
    filter: &capture::Filter,
    opts: &Options,
    progress: &Progress,
) -> Result<Report> {
    let found = capture::discover(roots, filter)?;
    if found.is_empty() {
        return Err(Error::Usage(
            "no capture matches --worker/--query under the given directories".into(),
        ));
    }
    let perf = PerfTool::find(opts.perf.as_deref());
    if let (Some(p), Err(e)) = (&opts.perf, &perf) {
        return Err(Error::Usage(format!("--perf {}: {e}", p.display())));
    }
    let multi = progress.multi();
    let overall = multi.add(progress.bar(found.len() as u64, "captures"));
    let mut report = Report::default();
    for c in &found {
        let r = process_capture(c, opts, &perf, progress, &multi);
        multi.suspend(|| progress.result(r.line()));
        overall.inc(1);
        report.captures.push(r);
    }
    overall.finish_and_clear();
    Ok(report)
}

/// Processes one capture.
pub fn process_capture(
    found: &CaptureDir,
    opts: &Options,
    perf: &std::result::Result<PerfTool, String>,
    progress: &Progress,
    multi: &indicatif::MultiProgress,
) -> Outcome {
    let start = Instant::now();
    let mut report = Outcome {
        dir: found.dir.clone(),
        status: Status::Failed,
        message: String::new(),
        elapsed: Duration::ZERO,
    };
    let capture = match capture::validate(found) {
        Ok(v) => v,
        Err(refusal) => {
            report.status = Status::Refused;
            report.message = refusal.0;
            report.elapsed = start.elapsed();
            return report;
        }
    };
    let wanted = opts.formats.names();
    if !opts.force {
        match capture::completion(&found.out_dir(), &wanted) {
            Completion::Done(m) => {
                report.status = Status::Skipped;
                report.message = format!(
                    "already complete ({}, jobprof {}); --force processes it again",
                    m.completed, m.tool_version
                );
                report.elapsed = start.elapsed();
                return report;
            }
            Completion::Stale(why) => {
                progress.log(format!("{}: processing again: {why}", found.dir.display()));
            }
            Completion::NotDone => {}
        }
    }
    match Pipeline::new(&capture, opts, perf, progress, multi, start).run() {
        Ok(done) => {
            report.status = done.status;
            report.message = done.message;
        }
        Err(e) => {
            report.status = Status::Failed;
            report.message = e.to_string();
        }
    }
    report.elapsed = start.elapsed();
    report
}

/// What `write_summary` records of the outputs: their names, why the
/// flamegraph was refused, render time, the off-CPU section.
type Written<'a> = (
    &'a [String],
    &'a Option<String>,
    Duration,
    Option<crate::text::offcpu::Summary>,
);

struct Done {
    status: Status,
    message: String,
}

/// One unit of symbolizing work: a shard, or a time slice of one, by
/// `perf script` or natively.
#[derive(Debug, Clone)]
struct Unit {
    shard_pos: usize,
    data: PathBuf,
    slice: Option<TimeSlice>,
    native: bool,
}

/// Which shards are symbolized natively, and the perf for the others.
struct Plan<'p> {
    native: Vec<bool>,
    perf: Option<&'p PerfTool>,
}

impl Plan<'_> {
    /// `perf script`, `native`, or both with shard counts.
    fn symbolized_from(&self) -> String {
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
struct Symbolized {
    folded: Folded,
    shards: Vec<ShardSummary>,
    failures: Vec<String>,
    archive: (Spool, Vec<Spooled>),
}

/// What one symbolize-and-fold pass produced, before anything is written.
struct Pass {
    folded: Folded,
    /// JIT figures (`None`: no JIT frame).
    jit: Option<crate::output::summary::jit::JitFigures>,
    stats: StackStats,
    shards: Vec<ShardSummary>,
    symbolized_from: String,
    perf_version: Option<String>,
    failures: Vec<String>,
    warnings: Vec<String>,
    prepare: Duration,
    pass: Duration,
    /// The new archive's checked parts, in order, when `perf script` ran.
    parts: Option<(Spool, Vec<Spooled>)>,
    /// Where kernel frames got their names, when the shards' perf.data
    /// were symbolized (natively or by `perf script`); `None` when the
    /// capture's own text was folded.
    kernel: Option<KernelSymbols>,
}

impl Pass {
    /// Samples and named share, as the marker records them.
    fn quality(&self) -> Quality {
        Quality {
            samples: self.folded.stats.samples,
            symbolized_ppm: (self.stats.symbolized_ratio * 1e6).round() as u64,
            archive_text_bytes: None,
        }
    }
}

struct Pipeline<'a> {
    cap: &'a ValidCapture,
    /// Permission bits of the capture's raw data, ANDed: derived outputs
    /// are never more readable.
    raw_mode: Option<u32>,
    opts: &'a Options,
    perf: &'a std::result::Result<PerfTool, String>,
    progress: &'a Progress,
    multi: &'a indicatif::MultiProgress,
    start: Instant,
    label: String,
    dir: PathBuf,
    /// Where kernel frames get their names, decided once (a copy of the
    /// live table lives as long as the pipeline).
    kernel: OnceLock<KernelSymbols>,
}

impl<'a> Pipeline<'a> {
    fn new(
        cap: &'a ValidCapture,
        opts: &'a Options,
        perf: &'a std::result::Result<PerfTool, String>,
        progress: &'a Progress,
        multi: &'a indicatif::MultiProgress,
        start: Instant,
    ) -> Self {
        Pipeline {
            cap,
            raw_mode: raw_mode(cap),
            opts,
            perf,
            progress,
            multi,
            start,
            label: cap.found.label(),
            // The old pipeline's captures get their outputs in a
            // subdirectory: its own files are never touched.
            dir: cap.found.out_dir(),
            kernel: OnceLock::new(),
        }
    }

    /// Logs `msg` prefixed with the capture directory (which names the
    /// result directory: lines of many captures stay readable).
    fn log(&self, msg: impl AsRef<str>) {
        self.progress.log(format!(
            "{}: {}",
            crate::sys::progress::printable(&self.dir),
            msg.as_ref()
        ));
    }

    fn run(self) -> Result<Done> {
        capture::ensure_output_dir(&self.cap.found.dir)?;
        self.remove_leftovers();
        // Read before anything changes: what the outputs on disk are worth.
        let previous = capture::previous_quality(&self.dir);
        for w in &self.cap.warnings {
            self.log(format!("warning: {w}"));
        }
        // Hashing the inputs runs beside symbolization instead of after
        // it.
        let hasher = self.opts.formats.summary.then(|| {
            let paths = self.input_paths();
            let jobs = self.opts.jobs();
            // Read before the marker is cleared: unchanged inputs keep their hash.
            let known = capture::previous_inputs(&self.dir);
            std::thread::spawn(move || hash_all(&paths, jobs, &known))
        });
        // Stopping early: not left hashing in the background of a bulk
        // reprocess.
        let stop = |hasher: Option<std::thread::JoinHandle<_>>, done: Done| {
            if let Some(h) = hasher {
                let _ = h.join();
            }
            Ok(done)
        };
        let mut pass = match self.symbolize_or_fold()? {
            Ok(pass) => pass,
            Err(done) => return stop(hasher, done),
        };
        let facts = self.capture_facts();
        for w in pass
            .stats
            .warnings_for(facts.as_ref().map(|f| f.call_graph()))
            .into_iter()
            .chain(pass.stats.symbol_warning())
        {
            self.log(format!("warning: {w}"));
            pass.warnings.push(w);
        }
        if let Some(w) = pass
            .jit
            .as_ref()
            .and_then(crate::output::summary::jit::warning)
        {
            self.log(format!("warning: {w}"));
            pass.warnings.push(w);
        }
        let quality = pass.quality();
        if let Some(done) = self.keep_previous(&pass, &quality, previous.as_ref()) {
            return stop(hasher, done);
        }
        // From here on outputs change: no marker may vouch for a mix.
        capture::clear_marker(&self.dir)?;
        let mut outputs = Vec::new();
        let archive_bytes = self.publish_archive(&mut pass)?;
        if archive_bytes.is_some() {
            outputs.push(capture::SCRIPT_ZST.to_string());
        }
        let render_start = Instant::now();
        let render_refused = self.render_refusal(&mut pass);
        let text = self.folded_text(&pass, archive_bytes.is_some());
        self.render_outputs(
            &mut pass,
            render_refused.is_some(),
            text.as_deref(),
            &mut outputs,
        )?;
        let off_cpu = self.off_cpu_outputs(&mut pass, &mut outputs)?;
        let mut build_ids = Vec::new();
        if self.opts.formats.report {
            let profile = self.report_profile(&pass, archive_bytes.is_some())?;
            self.write_report(&profile, off_cpu.as_ref())?;
            outputs.push(crate::output::report::REPORT_TXT.to_string());
            build_ids = self.write_build_ids(&profile, &mut pass.warnings, &mut outputs)?;
        }
        let render_time = render_start.elapsed();
        let mut stamps = Stamps::new();
        if self.opts.formats.summary {
            let (inputs, hash_warnings, s) = hasher.map(join_hasher).unwrap_or_default();
            pass.warnings.extend(hash_warnings);
            stamps = s;
            let written = (&outputs[..], &render_refused, render_time, off_cpu);
            self.write_summary(&pass, inputs, written, build_ids)?;
            outputs.push(SUMMARY.to_string());
        }
        self.finish(
            pass,
            render_refused,
            outputs,
            quality,
            archive_bytes,
            stamps,
        )
    }

    /// Removes temporary files a killed run left behind.
    fn remove_leftovers(&self) {
        let mut names: Vec<&str> = vec![
            capture::SCRIPT_ZST,
            capture::MARKER,
            crate::symbolize::build_ids::BUILD_IDS_TXT,
        ];
        let formats = self.opts.formats.names();
        names.extend(formats.iter().map(String::as_str));
        let stale = capture::remove_stale_temporaries(&self.dir, &names);
        if stale > 0 {
            self.log(format!(
                "removed {stale} temporary file(s) left by an interrupted run"
            ));
        }
    }

    /// Runs `perf script` over every shard (and archives its text), or
    /// folds the capture's own symbolized text when perf or the data files
    /// are missing. `Ok(Err(done))` when neither is possible.
    fn symbolize_or_fold(&self) -> Result<std::result::Result<Pass, Done>> {
        let mut warnings = self.cap.warnings.clone();
        let prepare_start = Instant::now();
        let mut cross = None;
        if let Some(plan) = self.plan(&mut warnings, &mut cross) {
            return self.symbolize(&plan, warnings, prepare_start).map(Ok);
        }
        match &self.cap.script_text {
            Some(text) => self.fold_script_text(text, warnings, prepare_start).map(Ok),
            // Stacks perf would draw wrongly are refused, never drawn.
            None if cross.is_some() => Ok(Err(Done {
                status: Status::Failed,
                message: cross.unwrap_or_default(),
            })),
            None => {
                let why = match self.perf {
                    Err(e) => e.clone(),
                    Ok(_) => "shard data files are missing".into(),
                };
                Ok(Err(Done {
                    status: Status::Failed,
                    message: format!(
                        "cannot symbolize: {why}; and there is no {} to fold instead",
                        capture::SCRIPT_ZST
                    ),
                }))
            }
        }
    }

    /// Symbolizes the shards as `plan` says (native or `perf script`) and
    /// folds the text on the way.
    fn symbolize(
        &self,
        plan: &Plan<'_>,
        mut warnings: Vec<String>,
        prepare_start: Instant,
    ) -> Result<Pass> {
        let kernel = self.kernel_symbols().clone();
        if let KernelSymbols::Unavailable(why) = &kernel {
            warnings.push(format!("kernel frames unnamed: {why}"));
        }
        let units = self.plan_units(plan);
        let prepare = prepare_start.elapsed();
        let t = Instant::now();
        let Symbolized {
            mut folded,
            mut shards,
            failures,
            archive: parts,
        } = self.symbolize_all(plan, &units)?;
        let jit = crate::output::summary::jit::take_figures(&mut folded, &self.cap.found.dir);
        self.note_inline(plan, &mut shards);
        Ok(Pass {
            jit,
            stats: StackStats::from_stacks(&folded.stacks),
            folded,
            shards,
            symbolized_from: plan.symbolized_from(),
            // Only when perf script ran for at least one shard.
            perf_version: plan
                .perf
                .filter(|_| plan.native.contains(&false))
                .map(|p| p.version.clone()),
            failures,
            warnings,
            prepare,
            pass: t.elapsed(),
            parts: Some(parts),
            kernel: Some(kernel),
        })
    }

    /// Folds the capture's symbolized text `text` (perf.script.zst), where
    /// the shards cannot be symbolized here.
    fn fold_script_text(
        &self,
        text: &Path,
        mut warnings: Vec<String>,
        prepare_start: Instant,
    ) -> Result<Pass> {
        let why = match self.perf {
            Err(e) => format!("perf is not usable: {e}"),
            Ok(_) if self.cap.shards.is_empty() => "the capture has no perf.data files".to_string(),
            Ok(_) => "the perf.data files are not there".to_string(),
        };
        let name = file_name(text);
        self.log(format!(
            "folding the capture's symbolized text {name} instead of running perf script ({why})"
        ));
        warnings.push(format!(
            "folded {name} instead of running perf script: {why}"
        ));
        let prepare = prepare_start.elapsed();
        let t = Instant::now();
        let folder = Folder::new(self.fold_options());
        let mut folded = folder.fold_sources(&[Source::Path(text.to_path_buf())])?;
        let jit = crate::output::summary::jit::take_figures(&mut folded, &self.cap.found.dir);
        let shards = self
            .cap
            .shards
            .iter()
            .map(|s| shard_summary(s, "not symbolized"))
            .collect();
        Ok(Pass {
            jit,
            stats: StackStats::from_stacks(&folded.stacks),
            folded,
            shards,
            symbolized_from: name,
            perf_version: None,
            failures: Vec::new(),
            warnings,
            prepare,
            pass: t.elapsed(),
            parts: None,
            kernel: None,
        })
    }

    /// Never a worse result than the complete one on disk: when shards
    /// failed, or fewer samples or a smaller named share came out than the
    /// marker recorded, every previous output is kept (marker included)
    /// and the capture is reported failed, saying so.
    fn keep_previous(
        &self,
        pass: &Pass,
        now: &Quality,
        previous: Option<&Quality>,
    ) -> Option<Done> {
        let before = previous?;
        let why = if !pass.failures.is_empty() {
            pass.failures.join("; ")
        } else if now.samples < before.samples || now.symbolized_ppm < before.symbolized_ppm {
            format!(
                "this run symbolized worse ({} samples, {:.1}% with a named frame) than the \
                 complete outputs on disk ({} samples, {:.1}%): is symfs/ missing or perf \
                 different? Remove {} to accept the worse result",
                now.samples,
                now.symbolized_ppm as f64 / 1e4,
                before.samples,
                before.symbolized_ppm as f64 / 1e4,
                capture::MARKER
            )
        } else {
            return None;
        };
        Some(Done {
            status: Status::Failed,
            message: format!("{why}; kept the previous complete outputs unchanged"),
        })
    }

    /// Publishes the new archive when `perf script` produced one and every
    /// shard succeeded; returns its text bytes. With a failed shard the
    /// previous archive (if any) stays: it is never replaced by one that
    /// misses a shard.
    fn publish_archive(&self, pass: &mut Pass) -> Result<Option<u64>> {
        let Some(parts) = pass.parts.take() else {
            return Ok(None);
        };
        if !pass.failures.is_empty() {
            self.log(format!(
                "{} not replaced: a shard failed",
                capture::SCRIPT_ZST
            ));
            return Ok(None);
        }
        let (spool, parts) = parts;
        let sizes = archive::publish(
            &self.dir.join(capture::SCRIPT_ZST),
            spool,
            &parts,
            self.raw_mode,
        )?;
        self.log(format!(
            "{}: {} of text in {}",
            capture::SCRIPT_ZST,
            crate::sys::units::format_bytes(sizes.raw_bytes),
            crate::sys::units::format_bytes(sizes.compressed_bytes)
        ));
        Ok(Some(sizes.raw_bytes))
    }

    /// `report.txt`: from the text just archived (or the capture's own
    /// text that was folded), which keeps each frame's DSO; from the folded
    /// stacks when there is neither.
    fn report_profile(
        &self,
        pass: &Pass,
        archived: bool,
    ) -> Result<crate::output::report::Profile> {
        // A capture without samples (an off-CPU capture of a thread that
        // only slept) gets a report of nothing, not a failure.
        let text = if pass.folded.stacks.is_empty() {
            None
        } else if archived {
            Some(self.dir.join(capture::SCRIPT_ZST))
        } else if pass.kernel.is_none() {
            self.cap.script_text.clone()
        } else {
            None
        };
        let mut profile = match text {
            Some(t) => crate::output::report::read::path(&t)?,
            None => crate::output::report::read::folded_stacks(&pass.folded.stacks, ""),
        };
        profile.source = self.label.clone();
        profile.shards = Some(self.cap.shards.len());
        Ok(profile)
    }

    fn write_report(
        &self,
        profile: &crate::output::report::Profile,
        off_cpu: Option<&crate::text::offcpu::Summary>,
    ) -> Result<()> {
        let opts = crate::output::report::Options {
            sections: Self::report_sections(off_cpu),
            ..crate::output::report::Options::default()
        };
        let name = crate::output::report::REPORT_TXT;
        let mut f = self.output(name)?;
        crate::output::report::write(profile, &opts, &mut f)
            .map_err(|e| Error::io(self.dir.join(name), e))?;
        f.flush().map_err(|e| Error::io(self.dir.join(name), e))?;
        f.commit()
    }

    /// `build-ids.txt`: the build ids of the DSOs a sample hit, from the
    /// shards' headers (none when the shards are gone). Returns the list
    /// for `summary.json`.
    fn write_build_ids(
        &self,
        profile: &crate::output::report::Profile,
        warnings: &mut Vec<String>,
        outputs: &mut Vec<String>,
    ) -> Result<Vec<crate::symbolize::build_ids::BuildId>> {
        if !self.cap.has_all_data() {
            return Ok(Vec::new());
        }
        let shards: Vec<PathBuf> = self
            .cap
            .shards
            .iter()
            .map(|s| s.data_file.clone())
            .collect();
        let (ids, problems) = crate::symbolize::build_ids::of_shards(&shards);
        warnings.extend(problems);
        let hit: std::collections::HashSet<String> =
            profile.frames.iter().map(|f| f.dso.clone()).collect();
        let ids = crate::symbolize::build_ids::hit_only(ids, &hit);
        let name = crate::symbolize::build_ids::BUILD_IDS_TXT;
        let mut f = self.output(name)?;
        f.write_all(crate::symbolize::build_ids::text(&ids).as_bytes())
            .and_then(|()| f.flush())
            .map_err(|e| Error::io(self.dir.join(name), e))?;
        f.commit()?;
        outputs.push(name.to_string());
        Ok(ids)
    }

    /// Further sections of `report.txt` after the functions (per-thread
    /// totals, off-CPU time: none yet).
    /// The report's sections after the functions: the per-thread on-CPU,
    /// runnable and blocked time of a capture recorded with `--off-cpu`.
    fn report_sections(
        off_cpu: Option<&crate::text::offcpu::Summary>,
    ) -> Vec<crate::output::report::Section> {
        off_cpu
            .map(|s| crate::output::report::Section {
                title: "time per thread (on-CPU, runnable, blocked; from --off-cpu)".into(),
                lines: crate::text::offcpu::thread_table(s)
                    .lines()
                    .map(str::to_string)
                    .collect(),
            })
            .into_iter()
            .collect()
    }

    /// Why pictures are not drawn (too little symbolized), if so; a fold
    /// with no samples is a failure.
    fn render_refusal(&self, pass: &mut Pass) -> Option<String> {
        let stats = &pass.stats;
        let symbolized_pct = 100.0 * stats.symbolized_ratio;
        let renders_pictures = self
            .opts
            .formats
            .render
            .iter()
            .any(|f| *f != Format::Folded);
        if pass.folded.stacks.is_empty() {
            pass.failures.push("no samples to fold".into());
            return None;
        }
        self.opts
            .min_symbolized_pct
            .filter(|min| renders_pictures && symbolized_pct < *min)
            .map(|min| {
                format!(
                    "only {symbolized_pct:.1}% of the weight has a named leaf frame \
                     (--min-symbolized {min}%): symbols are missing; check that symfs/ was \
                     published with the capture and holds the worker's binaries with .symtab or \
                     .debug_info, that perf runs on the capture's architecture, or lower \
                     --min-symbolized"
                )
            })
    }

    /// An output file in the capture directory: never through a planted
    /// link, never more readable than the raw data.
    fn output(&self, name: &str) -> Result<AtomicFile> {
        let mut f = AtomicFile::open(&self.dir.join(name), Destination::Confined, false)?;
        if let Some(m) = self.raw_mode {
            f.limit_mode(m);
        }
        Ok(f)
    }

    /// One walk over the perf script text `text` (what was folded): the
    /// capture's profile.pb.gz (with addresses, mappings and per-thread
    /// labels) when `pprof` is open, and the page's timeline when asked.
    fn walk_text(
        &self,
        pass: &Pass,
        text: &Path,
        pprof: Option<&mut AtomicFile>,
        timeline: bool,
    ) -> Result<Option<render::timeline::Timeline>> {
        let event = pass.folded.stats.event.clone();
        let opts = fold::Options {
            event_filter: event.clone(),
            ..self.fold_options()
        };
        let mut tl = timeline.then(render::timeline::Timeline::new);
        let mut tap = |s: &crate::text::samples::Sample<'_>| {
            if let Some(t) = tl.as_mut() {
                t.add(s);
            }
        };
        match pprof {
            Some(f) => {
                let facts = crate::output::pprof::capture::facts(self.cap, event);
                let out = self.dir.join(crate::output::pprof::PPROF);
                crate::output::pprof::capture::write(text, &out, &opts, facts, &mut *f, tap)?;
                f.flush().map_err(|e| Error::io(&out, e))?;
            }
            None => {
                crate::text::samples::walk(text, &opts, |s| tap(s))?;
            }
        }
        Ok(tl)
    }

    /// The perf script text this pass folded, when it is on disk: the
    /// archive just published, or the capture's own text.
    fn folded_text(&self, pass: &Pass, archive_published: bool) -> Option<PathBuf> {
        if archive_published {
            Some(self.dir.join(capture::SCRIPT_ZST))
        } else if pass.kernel.is_none() {
            self.cap.script_text.clone()
        } else {
            None
        }
    }

    fn render_outputs(
        &self,
        pass: &mut Pass,
        refused: bool,
        text: Option<&Path>,
        outputs: &mut Vec<String>,
    ) -> Result<()> {
        let render_opts = self.render_options(&pass.folded, &pass.stats);
        let wants = |f: Format| self.opts.formats.render.contains(&f);
        let mut timeline = None;
        if let Some(text) = text.filter(|_| !pass.folded.stacks.is_empty() && !refused) {
            let mut pprof = wants(Format::Pprof)
                .then(|| self.output(crate::output::pprof::PPROF))
                .transpose()?;
            timeline = self.walk_text(pass, text, pprof.as_mut(), wants(Format::Html))?;
            if let Some(f) = pprof {
                f.commit()?;
            }
        }
        for format in &self.opts.formats.render {
            let is_picture = *format != Format::Folded;
            if pass.folded.stacks.is_empty() || (is_picture && refused) {
                continue;
            }
            let name = output_name(*format);
            if *format == Format::Pprof && text.is_some() {
                outputs.push(name.to_string());
                continue;
            }
            let mut f = self.output(name)?;
            let drawn = match format {
                Format::Html => render::render_html_with(
                    &pass.folded.stacks,
                    &render_opts,
                    &render::PageExtras {
                        timeline: timeline.as_ref(),
                        ..Default::default()
                    },
                    &mut f,
                ),
                _ => render::render(*format, &pass.folded.stacks, &render_opts, &mut f),
            };
            if let Err(e) = drawn {
                pass.failures.push(format!("{name}: {e}"));
                continue;
            }
            f.flush().map_err(|e| Error::io(self.dir.join(name), e))?;
            f.commit()?;
            outputs.push(name.to_string());
        }
        Ok(())
    }

    fn write_summary(
        &self,
        pass: &Pass,
        inputs: Vec<InputFile>,
        written: Written<'_>,
        build_ids: Vec<crate::symbolize::build_ids::BuildId>,
    ) -> Result<()> {
        let (outputs, render_refused, render_time, off_cpu) = written;
        let (folded, stats) = (&pass.folded, &pass.stats);
        let facts = self.capture_facts();
        let s = Summary {
            tool: "jobprof".into(),
            tool_version: env!("CARGO_PKG_VERSION").into(),
            output_version: capture::OUTPUT_VERSION,
            created: crate::sys::units::utc_timestamp(),
            capture: self.label.clone(),
            worker: self.cap.found.worker,
            query: self.cap.found.query.clone(),
            job_id: self.cap.job_id.clone(),
            layout: self.cap.layout,
            validated: self.cap.validated,
            samples: folded.stats.samples,
            event: self.event(folded),
            period_total: stats.period_total,
            unique_stacks: folded.stats.unique_stacks,
            symbolized_ratio: stats.symbolized_ratio,
            named_stack_ratio: stats.named_stack_ratio,
            symbol_warning: stats.symbol_warning(),
            unnamed_stack_ratio: stats.unnamed_stack_ratio,
            unknown_frame_ratio: stats.unknown_frame_ratio,
            truncated_ratio: stats.truncated_ratio,
            unnamed_by_dso: stats.unnamed_by_dso.clone(),
            truncated_roots: stats.truncated_roots.clone(),
            kernel_symbols: pass.kernel.as_ref().map(|k| k.describe()),
            jit: pass.jit.clone(),
            skipped_lines: folded.stats.skipped_lines,
            shards: pass.shards.clone(),
            symbolized_from: pass.symbolized_from.clone(),
            top_self: stats.top_self.clone(),
            top_total: stats.top_total.clone(),
            inputs,
            perf_version: pass.perf_version.clone(),
            recorded_with: self.cap.recorded_with.clone(),
            capture_arch: facts.as_ref().and_then(|f| f.arch.clone()),
            host_arch: native::arch::host().to_string(),
            call_graph: facts.map(|f| f.call_graph().to_string()),
            outputs: outputs.to_vec(),
            render_refused: render_refused.clone(),
            warnings: pass
                .warnings
                .iter()
                .chain(pass.failures.iter())
                .cloned()
                .collect(),
            timings: Timings {
                prepare: secs(pass.prepare),
                symbolize_fold: secs(pass.pass),
                render: secs(render_time),
                total: secs(self.start.elapsed()),
            },
            old_pipeline: self.cap.legacy.clone(),
            build_ids,
            off_cpu,
        };
        let mut f = self.output(SUMMARY)?;
        f.write_all(s.to_json().as_bytes())
            .and_then(|()| f.flush())
            .map_err(|e| Error::io(self.dir.join(SUMMARY), e))?;
        f.commit()
    }

    /// The outcome; the marker, last, only when everything was written.
    fn finish(
        &self,
        pass: Pass,
        render_refused: Option<String>,
        outputs: Vec<String>,
        quality: Quality,
        archive_bytes: Option<u64>,
        stamps: Stamps,
    ) -> Result<Done> {
        let samples = pass.folded.stats.samples;
        if !pass.failures.is_empty() {
            return Ok(Done {
                status: Status::Failed,
                message: pass.failures.join("; "),
            });
        }
        if let Some(why) = render_refused {
            return Ok(Done {
                status: Status::RenderRefused,
                message: format!("flamegraph not rendered: {why}"),
            });
        }
        let mut marker = Marker::new(
            outputs.clone(),
            Some(capture::Quality {
                archive_text_bytes: archive_bytes,
                ..quality
            }),
        );
        marker.inputs = stamps;
        capture::write_marker(&self.dir, &marker, self.raw_mode)?;
        let shards_word = match self.cap.shards.len() {
            1 => "1 shard".to_string(),
            n => format!("{n} shards"),
        };
        let symbolized_pct = 100.0 * pass.stats.symbolized_ratio;
        let from = if pass.kernel.is_some() {
            String::new()
        } else {
            format!(", folded from {}", pass.symbolized_from)
        };
        Ok(Done {
            status: Status::Processed,
            message: format!(
                "{samples} samples, {shards_word}{from}, {symbolized_pct:.1}% named at the leaf, \
                 {:.1}% with an unnamed frame, {:.1}% truncated -> {}",
                100.0 * pass.stats.unnamed_stack_ratio,
                100.0 * pass.stats.truncated_ratio,
                outputs.join(", ")
            ),
        })
    }

    /// Where kernel frames get their names ([`kernel::kernel_symbols`]).
    fn kernel_symbols(&self) -> &KernelSymbols {
        self.kernel.get_or_init(|| {
            let (host, boot) = kernel::this_host_and_boot();
            let needs_ids = self.cap.kallsyms.is_none() && self.cap.symfs.is_some();
            let (recorded, running) = match needs_ids {
                true => (
                    kernel::recorded_kernel_build_id(&self.present_shards()),
                    kernel::running_kernel_build_id(),
                ),
                false => (None, None),
            };
            let machines = kernel::Machines {
                recorded: (self.cap.host.as_deref(), self.cap.boot_id.as_deref()),
                here: (host.as_deref(), boot.as_deref()),
                recorded_kernel: recorded.as_deref(),
                running_kernel: running.as_deref(),
            };
            kernel::kernel_symbols(
                self.cap.kallsyms.as_deref(),
                self.cap.symfs.is_some(),
                machines,
                kernel::core_table,
            )
        })
    }

    /// The data files of the shards that are on disk.
    fn present_shards(&self) -> Vec<PathBuf> {
        let present = self.cap.shards.iter().filter(|s| s.bytes.is_some());
        present.map(|s| s.data_file.clone()).collect()
    }

    fn fold_options(&self) -> fold::Options {
        fold::Options {
            // Off-CPU captures also hold switch-out samples; the on-CPU
            // profile is the sampling event's alone.
            event_filter: self
                .off_cpu_shards()
                .then(|| self.cap.event.clone())
                .flatten(),
            threads: self.opts.jobs(),
            // Streamed text is folded in 8 MiB steps (1 MiB tasks): enough
            // for every thread, and peak memory stays a few blocks.
            block_size: 8 << 20,
            // Marked to count them (crate::output::summary::jit::take_figures), then unmarked.
            annotate_jit: true,
            ..fold::Options::default()
        }
    }

    /// The event folded, as the capture recorded it when that is the same
    /// event (`cpu-clock:u`: the text may name it without its modifier).
    fn event(&self, folded: &Folded) -> Option<String> {
        let base = crate::text::perf_script::event_base;
        match (&folded.stats.event, &self.cap.event) {
            (Some(f), Some(c)) if base(f) == base(c) => Some(c.clone()),
            (Some(f), _) => Some(f.clone()),
            (None, c) => c.clone(),
        }
    }

    fn render_options(&self, folded: &Folded, stats: &StackStats) -> RenderOptions {
        let worker = self.cap.found.worker.map(|w| w.to_string());
        let event = self.event(folded);
        let mut o = RenderOptions {
            title: render::capture_title(
                self.cap.job_id.as_deref(),
                worker.as_deref(),
                Some(&self.cap.found.query),
            ),
            ..RenderOptions::default()
        };
        if let Some(ev) = &event {
            let base = crate::text::perf_script::event_base(ev);
            o.subtitle = Some(format!(
                "{ev} · {} samples · {} shard(s) · {}{}",
                folded.stats.samples,
                self.cap.shards.len(),
                stats.symbol_figures(),
                stats
                    .symbol_warning()
                    .map(|_| " · warning: few symbols, see summary.json")
                    .unwrap_or_default()
            ));
            // Folded counts are sample periods: nanoseconds for the
            // software clocks, events otherwise.
            o.count_name = if base.ends_with("-clock") {
                "ns".into()
            } else {
                base.to_string()
            };
        }
        o
    }

    /// Per shard: native or `perf script` (`--symbolizer`, and what
    /// [`native::check`] says of the shard). `None` when the text must come
    /// from the capture's symbolized text instead (data files missing, or
    /// perf needed and unusable).
    /// `cross` gets the refusal when a shard would go to `perf script` on a
    /// host that cannot unwind its architecture ([`native::arch`]).
    fn plan(&self, warnings: &mut Vec<String>, cross: &mut Option<String>) -> Option<Plan<'a>> {
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

    /// The first shard's header facts (architecture, call-graph mode).
    fn capture_facts(&self) -> Option<native::arch::Facts> {
        native::arch::facts(&self.cap.shards.first()?.data_file)
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
    fn plan_units(&self, plan: &Plan<'_>) -> Vec<Unit> {
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
            let slices = if want > 1 {
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
            } else {
                Vec::new()
            };
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

    /// Runs every unit (up to `jobs` at once), folding their output as it
    /// streams and compressing it in the same pass into checked, spooled
    /// parts; the archive is published later, and only when it may replace
    /// the old one ([`Self::publish_archive`]).
    fn symbolize_all(&self, plan: &Plan<'_>, units: &[Unit]) -> Result<Symbolized> {
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
    fn note_inline(&self, plan: &Plan<'_>, shards: &mut [ShardSummary]) {
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
        let results = results
            .into_inner()
            .unwrap_or_else(|e| e.into_inner())
            .into_iter()
            .map(|r| {
                r.unwrap_or(UnitResult {
                    outcome: Err("not run".into()),
                    part: None,
                })
            })
            .collect();
        (stream.finish(), results)
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
                let r = r.and_then(|o| sink(&rest).map(|()| o));
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
        // A part that cannot be finished or checked (a full disk) fails
        // its shard: the archive is never published without it.
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

/// Cuts a stream into blocks that end at sample boundaries (blank lines),
/// so blocks from different `perf script` processes can be folded in any
/// interleaving.
#[derive(Default)]
struct Chunker {
    pending: Vec<u8>,
}

struct Tail {
    block: Vec<u8>,
    /// Bytes added to end the stream at a sample boundary (also archived,
    /// so the archive is exactly what was folded).
    extra: Vec<u8>,
}

const BLOCK: usize = 4 << 20;

impl Chunker {
    fn push(&mut self, bytes: &[u8]) -> Option<Vec<u8>> {
        self.pending.extend_from_slice(bytes);
        if self.pending.len() < BLOCK {
            return None;
        }
        let cut = memchr::memmem::rfind(&self.pending, b"\n\n")? + 2;
        let rest = self.pending.split_off(cut);
        Some(std::mem::replace(&mut self.pending, rest))
    }

    fn finish(self) -> Tail {
        let mut block = self.pending;
        let extra: &[u8] = if block.is_empty() || block.ends_with(b"\n\n") {
            b""
        } else if block.ends_with(b"\n") {
            b"\n"
        } else {
            b"\n\n"
        };
        block.extend_from_slice(extra);
        Tail {
            block,
            extra: extra.to_vec(),
        }
    }
}

impl Pipeline<'_> {
    /// The capture's inputs worth a hash: metadata, manifest, data files,
    /// and the symbolized text when it is what gets folded.
    fn input_paths(&self) -> Vec<PathBuf> {
        let mut paths: Vec<PathBuf> = [
            jobprof_capture_format::CAPTURE_JSON,
            capture::LEGACY_METADATA,
            jobprof_capture_format::SHARDS_TSV,
        ]
        .iter()
        .map(|n| self.cap.found.dir.join(n))
        .filter(|p| capture::is_plain_file(p))
        .collect();
        paths.extend(
            self.cap
                .shards
                .iter()
                .filter(|s| s.bytes.is_some())
                .map(|s| s.data_file.clone()),
        );
        if let Some(t) = &self.cap.script_text {
            if !self.cap.has_all_data() || self.perf.is_err() {
                paths.push(t.clone());
            }
        }
        paths
    }
}

/// The capture's raw data modes (metadata and data files, not following
/// links), ANDed; `None` when none can be read.
fn raw_mode(cap: &ValidCapture) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    let dir = &cap.found.dir;
    [
        jobprof_capture_format::CAPTURE_JSON,
        capture::LEGACY_METADATA,
    ]
    .iter()
    .map(|n| dir.join(n))
    .chain(cap.shards.iter().map(|s| s.data_file.clone()))
    .filter_map(|p| std::fs::symlink_metadata(p).ok())
    .filter(|m| m.is_file())
    .map(|m| m.mode() & 0o7777)
    .reduce(|a, b| a & b)
}

/// Sizes and SHA-256 hashes of `paths`, `jobs` files at a time, and a
/// warning per unreadable one. One file after the other, the hash of a
/// few GB of shards (1.4 GB/s per core with SHA-NI) was still running
/// alone on one core when symbolizing had ended.
/// An input whose size, mtime and inode match its stamp in `known` (the
/// previous run's marker) keeps the recorded hash ([`crate::capture::stamp`]).
fn hash_all(paths: &[PathBuf], jobs: usize, known: &Stamps) -> Hashed {
    let mut out = Vec::new();
    let mut warnings = Vec::new();
    let mut stamps = Stamps::new();
    let hashes = crate::map_jobs(paths, jobs, |p| {
        let prev = known.get(&file_name(p));
        crate::capture::stamp::hash_reusing(p, prev, summary::hash_file)
    });
    for (p, hash) in paths.iter().zip(hashes) {
        match hash {
            Ok((bytes, sha256, stamp)) => {
                if let Some(s) = stamp {
                    stamps.insert(file_name(p), s);
                }
                out.push(InputFile {
                    name: file_name(p),
                    bytes,
                    sha256,
                })
            }
            Err(e) => warnings.push(format!("cannot hash {}: {e}", p.display())),
        }
    }
    (out, warnings, stamps)
}

/// Input stamps by the name `summary.json` lists the input under.
type Stamps = std::collections::BTreeMap<String, crate::capture::stamp::InputStamp>;
/// The inputs' sizes and hashes, warnings, and the stamps for the marker.
type Hashed = (Vec<InputFile>, Vec<String>, Stamps);

/// The hashing thread's result. A panic there (a bug) is not an empty
/// inputs list in silence: the summary then lists no inputs and says why.
fn join_hasher(h: std::thread::JoinHandle<Hashed>) -> Hashed {
    h.join().unwrap_or_else(|panic| {
        let why = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "no message".to_string());
        let warning = format!("hashing the inputs failed (a bug: {why}); no inputs are listed");
        (Vec::new(), vec![warning], Stamps::new())
    })
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| p.display().to_string())
}

fn secs(d: Duration) -> f64 {
    (d.as_secs_f64() * 1000.0).round() / 1000.0
}

/// A shard's summary line before any `perf script` run was counted.
fn shard_summary(s: &crate::capture::Shard, status: &str) -> ShardSummary {
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
mod tests {
    use super::*;

    #[test]
    fn formats_parse_and_order() {
        let f = Formats::parse("html,summary,folded").unwrap();
        assert_eq!(f.render, vec![Format::Folded, Format::Html]);
        assert!(f.summary);
        assert_eq!(
            f.names(),
            ["stacks.folded", "flamegraph.html", "summary.json"]
        );
        assert!(Formats::parse("png")
            .unwrap_err()
            .to_string()
            .contains("png"));
        assert!(Formats::parse("").is_err());
        let s = Formats::parse("speedscope").unwrap();
        assert_eq!(s.names(), ["profile.speedscope.json"]);
        let all = Formats::parse("svg,all").unwrap();
        assert_eq!(all.render.len(), Format::ALL.len());
        assert!(all.summary);
        assert_eq!(all.names().len(), Format::ALL.len() + 2);
        assert!(Formats::default()
            .names()
            .contains(&"report.txt".to_string()));
        assert_eq!(Formats::parse("report").unwrap().names(), ["report.txt"]);
    }

    #[test]
    fn chunker_cuts_at_sample_boundaries_and_loses_nothing() {
        let sample = b"comm 1 1.0: 1 cpu-clock:\n\tf (x)\n\n";
        let mut input = Vec::new();
        while input.len() < 3 * BLOCK {
            input.extend_from_slice(sample);
        }
        input.extend_from_slice(b"comm 1 2.0: 1 cpu-clock:\n\tlast (x)\n");
        let mut c = Chunker::default();
        let mut out = Vec::new();
        for piece in input.chunks(100_003) {
            if let Some(b) = c.push(piece) {
                assert!(b.ends_with(b"\n\n"));
                out.extend_from_slice(&b);
            }
        }
        let tail = c.finish();
        assert_eq!(tail.extra, b"\n");
        out.extend_from_slice(&tail.block);
        input.extend_from_slice(&tail.extra);
        assert_eq!(out, input);
    }

    #[test]
    fn exit_code_counts_failures() {
        let mk = |status| Outcome {
            dir: PathBuf::new(),
            status,
            message: String::new(),
            elapsed: Duration::ZERO,
        };
        let mut r = Report {
            captures: vec![mk(Status::Processed), mk(Status::Skipped)],
        };
        assert_eq!(r.exit_code(), ExitCode::Success);
        r.captures.push(mk(Status::Refused));
        assert_eq!(r.exit_code(), ExitCode::Failed);
    }
}
