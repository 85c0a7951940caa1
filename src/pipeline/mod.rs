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
//!
//! The files: this one holds the public API and what the others share
//! (`Pipeline`, one capture's run, and `Pass`, what symbolizing produced);
//! `stages` runs the stages in order, `plan` decides how the shards are
//! symbolized and `units` runs that, `publish` writes the outputs,
//! `off_cpu` the off-CPU ones, `pprof_stream` the profile written as the
//! runs stream, `own_text` the one read of a capture's own text that
//! feeds the fold, the report and that profile, `sources` which files name each DSO (for both
//! symbolizers and the summary), and `inputs` hashes the inputs.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::capture::{
    self, CaptureDir, Completion, Outcome, Quality, Status, ValidCapture, FOLDED, HTML, SPEEDSCOPE,
    SUMMARY, SVG,
};
use crate::error::{Error, ExitCode, Result};
use crate::output::archive::{self, Spool, Spooled};
use crate::output::render::Format;
use crate::output::summary::{ShardSummary, StackStats};
use crate::symbolize::kernel::KernelSymbols;
use crate::symbolize::native;
use crate::symbolize::perf::PerfProbe;
use crate::sys::progress::{Bar, Counts, Progress};
use crate::text::fold::Folded;

pub mod imported;
mod inputs;
mod memory;
mod off_cpu;
mod off_cpu_logs;
mod plan;
mod own_text;
mod pprof_stream;
mod publish;
mod sources;
mod stages;
mod units;

pub use memory::{fold_plain, folded_plain, report_plain};

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
    /// `--debug-dir`: more directories of debug files by build id
    /// (`DIR/.build-id/NN/REST.debug`), searched after this host's own.
    pub debug_dirs: Vec<PathBuf>,
    /// The symbol store every capture of the run reads through
    /// ([`native::store`]); `None`: [`run`] makes one, a lone
    /// [`process_capture`] one of its own.
    pub store: Option<Arc<native::store::Store>>,
    /// The persistent symbol cache's directory (`--cache-dir`;
    /// [`native::cache`]); `None`: none (`--no-cache`). Read when a store
    /// is made ([`Options::with_store`]).
    pub cache_dir: Option<PathBuf>,
    /// `-o DIR`: where the outputs of the one plain `perf.data` of the run
    /// go, instead of `FILE.jobprof/` beside it.
    pub output: Option<PathBuf>,
    /// Bytes of folded stacks the run may still keep in memory for the
    /// job views ([`Outcome::stacks`]); `None` (the default): none kept.
    /// Shared by every capture of the run, each taking what it keeps.
    pub keep_stacks: Option<Arc<std::sync::atomic::AtomicU64>>,
    /// `--nsys-read-limit`: the longest one Nsight Systems report's export
    /// may take to read; `None`: the reader's default.
    pub nsys_read_limit: Option<std::time::Duration>,
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
            debug_dirs: Vec::new(),
            store: None,
            cache_dir: None,
            output: None,
            keep_stacks: None,
            nsys_read_limit: None,
        }
    }
}

impl Options {
    fn jobs(&self) -> usize {
        crate::jobs_or_cores(self.jobs)
    }

    /// These options with a symbol store (a new one when they have none),
    /// and that store.
    pub fn with_store(&self) -> (Options, Arc<native::store::Store>) {
        let mut o = self.clone();
        let background = self.jobs() > 1;
        let store = o
            .store
            .get_or_insert_with(|| {
                let disk = self
                    .cache_dir
                    .clone()
                    .map(|d| Arc::new(native::cache::Cache::new(d)));
                let store = native::store::Store::default().with_disk_cache(disk);
                Arc::new(store.with_background_loads(background))
            })
            .clone();
        (o, store)
    }
}

/// The outcome of a whole run.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// One entry per capture, in discovery order.
    pub captures: Vec<Outcome>,
}

impl Report {
    /// 0 when every capture was processed or skipped, 2 when nothing could
    /// be done (each refused), 1 otherwise
    /// ([`capture::run_exit_code`]).
    pub fn exit_code(&self) -> ExitCode {
        capture::run_exit_code(&self.captures)
    }
}

/// Processes every capture found under `roots` (narrowed by `filter`).
/// Errors only for bad usage (no captures, unreadable roots); per-capture
/// problems are in the report.
pub fn run(
    roots: &[PathBuf],
    filter: &capture::Filter,
    opts: &Options,
    progress: &dyn Progress,
) -> Result<Report> {
    // perf is looked for while the captures are found, and waited for
    // only where it is needed.
    let perf = PerfProbe::start(opts.perf.as_deref());
    let mut found = capture::discover(roots, filter)?;
    if found.is_empty() {
        return Err(Error::Usage(
            "no capture matches --worker/--query under the given directories".into(),
        ));
    }
    if let Some(out) = &opts.output {
        redirect_plain(&mut found, out)?;
    }
    // `--perf PATH` that does not work is a usage error up front.
    let explicit = opts.perf.as_ref();
    if let (Some(p), Some(Err(e))) = (explicit, explicit.map(|_| perf.get())) {
        return Err(Error::Usage(format!("--perf {}: {e}", p.display())));
    }
    let (opts, store) = opts.with_store();
    let overall = progress.bar(Some(found.len() as u64), Counts::Items, "captures");
    let captures = run_captures(&found, &opts, &perf, progress, &*overall);
    overall.finish();
    store.log_to(progress);
    Ok(Report { captures })
}

/// Sends the outputs of the one plain `perf.data` found to `out` (`-o`);
/// a usage error for anything else: a result directory's captures have
/// their places, and two files cannot share one directory.
fn redirect_plain(found: &mut [CaptureDir], out: &Path) -> Result<()> {
    match found {
        [CaptureDir { plain: Some(p), .. }] => {
            p.out = out.to_path_buf();
            Ok(())
        }
        _ => Err(Error::Usage(format!(
            "-o {}: takes one plain perf.data file; {} capture(s) found, {} of them plain \
             (a result directory's outputs go into its capture directories)",
            out.display(),
            found.len(),
            found.iter().filter(|c| c.plain.is_some()).count()
        ))),
    }
}

/// The bytes of a capture's `perf.data` files (0 when unreadable).
fn data_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .filter(|e| e.file_name().as_encoded_bytes().starts_with(b"perf.data"))
        .filter_map(|e| e.metadata().ok())
        .map(|m| m.len())
        .sum()
}

/// Processes `found`, the outcomes in discovery order (and their result
/// lines printed in it). Big captures (worth cutting into time slices for
/// every job) run first, one at a time with every job; the small ones, a
/// job's usual many, then run side by side, one job each, so that `--jobs`
/// works over captures as over shards and the cores share one symbol store
/// instead of each capture waiting for the last one's outputs.
fn run_captures(
    found: &[CaptureDir],
    opts: &Options,
    perf: &PerfProbe,
    progress: &dyn Progress,
    overall: &dyn Bar,
) -> Vec<Outcome> {
    let jobs = opts.jobs();
    let big_bytes = opts.slice_min_bytes.saturating_mul(4 * jobs as u64);
    let (big, small): (Vec<usize>, Vec<usize>) =
        (0..found.len()).partition(|&i| jobs == 1 || data_bytes(&found[i].dir) >= big_bytes);
    let side = jobs.min(small.len()).max(1);
    let one_each = Options {
        jobs: (jobs / side).max(1),
        ..opts.clone()
    };
    // Outcomes by position, and how many lines are printed.
    let done: Mutex<(Vec<Option<Outcome>>, usize)> = Mutex::new((vec![None; found.len()], 0));
    let finish = |i: usize, r: Outcome| {
        overall.inc(1);
        let mut d = done.lock().unwrap_or_else(|e| e.into_inner());
        d.0[i] = Some(r);
        while let Some(Some(r)) = d.0.get(d.1) {
            progress.result(&r.line());
            d.1 += 1;
        }
    };
    for &i in &big {
        finish(i, process_capture(&found[i], opts, perf, progress));
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..side {
            s.spawn(|| {
                while let Some(&i) =
                    small.get(next.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
                {
                    finish(i, process_capture(&found[i], &one_each, perf, progress));
                }
            });
        }
    });
    let (outcomes, _) = done.into_inner().unwrap_or_else(|e| e.into_inner());
    outcomes.into_iter().flatten().collect()
}

/// Processes one capture.
pub fn process_capture(
    found: &CaptureDir,
    opts: &Options,
    perf: &PerfProbe,
    progress: &dyn Progress,
) -> Outcome {
    let start = Instant::now();
    let mut report = Outcome {
        dir: found.subject().to_path_buf(),
        status: Status::Failed,
        message: String::new(),
        elapsed: Duration::ZERO,
        stacks: None,
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
        match plain_changed(found, capture::completion(&found.out_dir(), &wanted)) {
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
                progress.detail(&format!(
                    "{}: processing again: {why}",
                    found.subject().display()
                ));
            }
            Completion::NotDone => {}
        }
    }
    match Pipeline::new(&capture, opts, perf, progress, start).run() {
        Ok(done) => {
            report.status = done.status;
            report.message = done.message;
            report.stacks = done.stacks;
        }
        Err(e) => {
            report.status = Status::Failed;
            report.message = e.to_string();
            if let Some(fix) = unwritable_output(found, &e) {
                report.message.push_str(&fix);
            }
        }
    }
    report.elapsed = start.elapsed();
    report
}

/// The fix for a plain `perf.data` whose outputs cannot be written beside
/// it (a read-only folder, another user's): `-o DIR`.
fn unwritable_output(found: &CaptureDir, e: &Error) -> Option<String> {
    let p = found.plain.as_ref()?;
    let Error::Io { path, source } = e else {
        return None;
    };
    let denied = matches!(
        source.kind(),
        std::io::ErrorKind::PermissionDenied | std::io::ErrorKind::ReadOnlyFilesystem
    );
    (denied && path.starts_with(&p.out)).then(|| {
        let name = file_name(&p.file);
        format!(
            "; its folder is not writable: write the outputs elsewhere with -o DIR \
             (e.g. `jobprof process {} -o /tmp/{name}.jobprof`)",
            p.file.display()
        )
    })
}

/// A plain `perf.data` is rewritten in place by the next `perf record`
/// (the old one renamed `perf.data.old`): its outputs are complete only
/// for the file the marker stamped (size, mtime, inode).
fn plain_changed(found: &CaptureDir, c: Completion) -> Completion {
    let (Some(p), Completion::Done(m)) = (&found.plain, &c) else {
        return c;
    };
    let name = file_name(&p.file);
    match m.inputs.get(&name) {
        Some(stamp) if capture::stamp::unchanged(&p.file, stamp) => c,
        _ => Completion::Stale(format!(
            "{} is not the file its outputs were made from (rewritten since)",
            p.file.display()
        )),
    }
}

/// How one capture's run ended: its status and the line saying why (and
/// the folded stacks kept for the views).
struct Done {
    status: Status,
    message: String,
    stacks: Option<Arc<capture::KeptStacks>>,
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
    /// The report's profile, read from the text as it was symbolized (see
    /// [`units::Symbolized::report`]) or as the capture's own text was
    /// folded ([`own_text`]); kept only when that text is on disk (the
    /// archive published, or the capture's own).
    report: Option<crate::output::report::read::SampleReader>,
    /// `profile.pb.gz` from the runs' samples (or the capture's own
    /// text's, read once), to be finished with the off-CPU stacks
    /// ([`pprof_stream`]).
    pprof: Option<pprof_stream::StreamedPprof>,
    /// The off-CPU accounting's input, per shard recorded with
    /// `--off-cpu` (none when the capture's own text was folded).
    off_cpu: Vec<(std::path::PathBuf, crate::text::offcpu::ShardInput)>,
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

/// One capture's run: the capture, the options, where progress goes and
/// where the outputs go.
struct Pipeline<'a> {
    cap: &'a ValidCapture,
    /// Permission bits of the capture's raw data, ANDed: derived outputs
    /// are never more readable.
    raw_mode: Option<u32>,
    opts: &'a Options,
    perf: &'a PerfProbe,
    progress: &'a dyn Progress,
    start: Instant,
    label: String,
    dir: PathBuf,
    /// Where kernel frames get their names, decided once (a copy of the
    /// live table lives as long as the pipeline).
    kernel: OnceLock<KernelSymbols>,
    /// Which files name each DSO, decided once for both symbolizers.
    sources: OnceLock<sources::CaptureSources>,
    /// The shards' build-id tables, read once.
    shard_ids: OnceLock<crate::symbolize::build_ids::ShardIds>,
    /// The run's symbol store (or this capture's own).
    store: Arc<native::store::Store>,
    /// The `stacks.folded` this run wrote, when it was renamed into place.
    folded_file: OnceLock<crate::sys::confined::Entry>,
    /// A run in memory ([`memory`]): nothing written, the samples handed
    /// on; `None`: `jobprof process`'s run.
    memory: Option<&'a memory::Memory>,
}

impl<'a> Pipeline<'a> {
    fn new(
        cap: &'a ValidCapture,
        opts: &'a Options,
        perf: &'a PerfProbe,
        progress: &'a dyn Progress,
        start: Instant,
    ) -> Self {
        Pipeline {
            cap,
            raw_mode: inputs::raw_mode(cap),
            opts,
            perf,
            progress,
            start,
            label: cap.found.label(),
            // The old pipeline's captures get their outputs in a
            // subdirectory: its own files are never touched.
            dir: cap.found.out_dir(),
            kernel: OnceLock::new(),
            sources: OnceLock::new(),
            shard_ids: OnceLock::new(),
            store: opts.store.clone().unwrap_or_default(),
            folded_file: OnceLock::new(),
            memory: None,
        }
    }

    /// Logs `msg` prefixed with the capture directory (which names the
    /// result directory: lines of many captures stay readable): a warning
    /// (`warning: ...`) always, any other step's detail with `-v` only
    /// (the capture's result line on stdout says how it ended).
    fn log(&self, msg: impl AsRef<str>) {
        // A plain perf.data is named by its file, not its output directory.
        let who = match self.cap.found.plain {
            Some(_) => self.cap.found.subject(),
            None => &self.dir,
        };
        let msg = msg.as_ref();
        let line = format!("{}: {msg}", crate::sys::progress::printable(who));
        if msg.starts_with("warning") {
            self.progress.log(&line);
        } else {
            self.progress.detail(&line);
        }
    }
}

/// The last component of `p` (all of `p` when it has none).
fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| p.display().to_string())
}

/// Seconds rounded to the millisecond, as `summary.json` records them.
fn secs(d: Duration) -> f64 {
    (d.as_secs_f64() * 1000.0).round() / 1000.0
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
    fn exit_code_counts_failures() {
        let mk = |status| Outcome {
            dir: PathBuf::new(),
            status,
            message: String::new(),
            elapsed: Duration::ZERO,
            stacks: None,
        };
        let mut r = Report {
            captures: vec![mk(Status::Processed), mk(Status::Skipped)],
        };
        assert_eq!(r.exit_code(), ExitCode::Success);
        r.captures.push(mk(Status::Refused));
        assert_eq!(r.exit_code(), ExitCode::Failed);
        // Nothing could be done: every capture refused.
        r.captures = vec![mk(Status::Refused), mk(Status::Refused)];
        assert_eq!(r.exit_code(), ExitCode::Usage);
        // The work itself failed: 1.
        r.captures.push(mk(Status::Failed));
        assert_eq!(r.exit_code(), ExitCode::Failed);
    }
}
