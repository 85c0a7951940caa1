//! Bulk reprocessing of old result directories (`jobprof reprocess`).
//!
//! Walks directory trees for result directories (`result_dir_*`, or any
//! directory holding `profiles/perf/worker_*`), finds every capture in them
//! and brings each one up to date: captures whose outputs are missing or
//! were written by an older output version go through the same per-capture
//! pipeline as `jobprof process` ([`crate::pipeline::process_capture`]),
//! captures of the old shell pipeline that only kept `perf.script.gz` are
//! folded from it (and, with `recompress`, get a `perf.script.zst`), and
//! directories that only kept `stacks.folded` get their flamegraphs drawn.
//! Captures are worked on in parallel, several at a time; a deterministic
//! split ([`Split`]) lets the tasks of a Slurm job array share one tree
//! without talking to each other. [`sbatch_script`] writes the array job.
//!
//! Every output is written atomically and the completion marker last, so a
//! run killed at any moment leaves only complete files, and the next run
//! finishes what is left. This module neither prints (progress goes through
//! [`Progress`], results are returned) nor knows how a capture is
//! symbolized or drawn.

use std::fs;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::capture::{self, is_data_file, subdirs, worker_index, CaptureDir, Completion, Marker};
use crate::error::{Error, ExitCode, Result};
use crate::output::render::{self, Format, RenderOptions};
use crate::pipeline::{self, Status};
use crate::symbolize::perf::PerfTool;
use crate::sys::atomic::{AtomicFile, Destination};
use crate::sys::exec::shell_quote;
use crate::sys::input::Source;
use crate::sys::progress::Progress;

/// The old pipeline's folded stacks, the input of a render-only directory.
pub const FOLDED: &str = pipeline::FOLDED;

/// How the captures of a tree are shared among the tasks of a job array.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Split {
    /// This task's position, `0..count`.
    pub index: usize,
    /// How many tasks share the work.
    pub count: usize,
}

impl Split {
    /// A split, checked: `count >= 1` and `index < count`.
    pub fn new(index: usize, count: usize) -> Result<Split> {
        if count == 0 {
            return Err(Error::Usage("--array-count must be at least 1".into()));
        }
        if index >= count {
            return Err(Error::Usage(format!(
                "--array-index {index} is not below --array-count {count}; \
                 tasks are numbered 0..{count}"
            )));
        }
        Ok(Split { index, count })
    }

    /// The split of a Slurm array task, from the variables Slurm sets:
    /// `SLURM_ARRAY_TASK_ID`, `SLURM_ARRAY_TASK_MIN` (the first id, so that
    /// `--array=1-8` works), `SLURM_ARRAY_TASK_STEP` (`--array=0-15:2`) and
    /// `SLURM_ARRAY_TASK_COUNT` (else `(MAX - MIN) / STEP + 1`). `None`
    /// outside an array job. `var` looks a variable up (`std::env::var`).
    pub fn from_slurm_env(var: impl Fn(&str) -> Option<String>) -> Result<Option<Split>> {
        let num = |name: &str| -> Result<Option<usize>> {
            match var(name) {
                None => Ok(None),
                Some(v) if v.trim().is_empty() => Ok(None),
                Some(v) => v.trim().parse().map(Some).map_err(|_| {
                    Error::Usage(format!("{name}={v} is not a number (set by Slurm?)"))
                }),
            }
        };
        let Some(id) = num("SLURM_ARRAY_TASK_ID")? else {
            return Ok(None);
        };
        let min = num("SLURM_ARRAY_TASK_MIN")?.unwrap_or(0);
        let step = num("SLURM_ARRAY_TASK_STEP")?.unwrap_or(1).max(1);
        let count = match (num("SLURM_ARRAY_TASK_COUNT")?, num("SLURM_ARRAY_TASK_MAX")?) {
            (Some(c), _) => c,
            (None, Some(max)) if max >= min => (max - min) / step + 1,
            _ => {
                return Err(Error::Usage(
                    "SLURM_ARRAY_TASK_ID is set but neither SLURM_ARRAY_TASK_COUNT nor \
                     SLURM_ARRAY_TASK_MAX is: pass --array-index and --array-count"
                        .into(),
                ))
            }
        };
        if id < min || (id - min) % step != 0 {
            return Err(Error::Usage(format!(
                "SLURM_ARRAY_TASK_ID={id} is not in the range starting at {min} with step \
                 {step}; arrays with id lists (--array=1,5,9) need --array-index and \
                 --array-count"
            )));
        }
        Split::new((id - min) / step, count).map(Some)
    }

    /// Whether this task takes the item whose key (its path below the root
    /// it was found under, [`share_key`]) is `key`. By a hash of the key,
    /// not by position: every item goes to exactly one task, and an item
    /// stays with its task when result directories appear or vanish
    /// between the tasks' starts (with positions, every later item shifted
    /// and was never done). Shares are even on average, not to one item.
    pub fn takes(&self, key: &[u8]) -> bool {
        (stable_hash(key) % self.count as u64) as usize == self.index
    }
}

/// The key an item is shared by: its path below the root it was found
/// under (the same for every task, whatever the mount point).
pub fn share_key<'a>(dir: &'a Path, roots: &[PathBuf]) -> &'a [u8] {
    use std::os::unix::ffi::OsStrExt;
    let rel = roots
        .iter()
        .find_map(|r| dir.strip_prefix(r).ok())
        .unwrap_or(dir);
    rel.as_os_str().as_bytes()
}

/// FNV-1a, then the splitmix64 finalizer: the same on every host and
/// build (std's hasher is seeded per process).
fn stable_hash(key: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in key {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

impl Split {}

/// What kind of work a directory found in the tree calls for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A capture (raw perf data, or symbolized text): the full pipeline.
    Capture,
    /// Only `stacks.folded` is left: draw the flamegraphs from it.
    RenderOnly,
}

/// One directory to bring up to date.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    /// Where it is and what it is called.
    pub capture: CaptureDir,
    /// What it needs.
    pub kind: Kind,
}

/// What [`find`] saw in the trees.
#[derive(Debug, Clone, Default)]
pub struct Found {
    /// Result directories found.
    pub result_dirs: usize,
    /// Every capture and render-only directory, sorted by path.
    pub items: Vec<Item>,
    /// Directories below the roots that could not be read, with the
    /// error: the walk goes on without them.
    pub unreadable: Vec<(PathBuf, String)>,
}

/// Names of the files that make a directory under `worker_N/` a capture.
const CAPTURE_FILES: [&str; 5] = [
    jobprof_capture_format::CAPTURE_JSON,
    capture::LEGACY_METADATA,
    jobprof_capture_format::SHARDS_TSV,
    capture::SCRIPT_ZST,
    capture::SCRIPT_GZ,
];

/// `worker_N` subdirectories of a `profiles/perf` directory.
fn worker_dirs(perf_root: &Path) -> Result<Vec<(u32, PathBuf)>> {
    let mut v: Vec<(u32, PathBuf)> = subdirs(perf_root)?
        .into_iter()
        .filter_map(|d| Some((worker_index(&d.file_name()?.to_string_lossy())?, d)))
        .collect();
    v.sort();
    Ok(v)
}

/// Classifies one directory below `worker_N/` by the names of its files
/// (one `read_dir`; nothing is opened).
fn classify(dir: &Path) -> Result<Option<Kind>> {
    let mut raw = false;
    let mut folded = false;
    for e in fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        let e = e.map_err(|e| Error::io(dir, e))?;
        let name = e.file_name();
        let name = name.to_string_lossy();
        if CAPTURE_FILES.contains(&name.as_ref()) || is_data_file(&name) {
            raw = true;
        } else if name == FOLDED {
            folded = true;
        }
    }
    // A capture whose raw data and texts are gone but whose folded stacks
    // were kept can only be drawn again.
    let has_text_or_data = raw && {
        let names = fs::read_dir(dir).map_err(|e| Error::io(dir, e))?;
        names.flatten().any(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            is_data_file(&n) || n == capture::SCRIPT_ZST || n == capture::SCRIPT_GZ
        })
    };
    Ok(match (raw, folded) {
        (true, true) if !has_text_or_data => Some(Kind::RenderOnly),
        (true, _) => Some(Kind::Capture),
        (false, true) => Some(Kind::RenderOnly),
        (false, false) => None,
    })
}

fn items_of_worker(worker_dir: &Path, worker: Option<u32>, out: &mut Vec<Item>) -> Result<()> {
    for d in subdirs(worker_dir)? {
        let name = d
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        if name == "symfs" {
            continue;
        }
        if let Some(kind) = classify(&d)? {
            out.push(Item {
                capture: CaptureDir {
                    dir: d,
                    worker,
                    query: name,
                },
                kind,
            });
        }
    }
    Ok(())
}

fn items_of_perf_root(perf_root: &Path, out: &mut Vec<Item>) -> Result<()> {
    for (n, w) in worker_dirs(perf_root)? {
        items_of_worker(&w, Some(n), out)?;
    }
    Ok(())
}

/// True for a result directory: named `result_dir_*` and holding
/// `profiles/perf/`, or holding `profiles/perf/worker_*` whatever its name.
/// (A `result_dir_*` without `profiles/perf/` is walked into: it may be a
/// folder of result directories.)
fn is_result_dir(dir: &Path) -> bool {
    let perf = dir.join("profiles").join("perf");
    if !perf.is_dir() {
        return false;
    }
    let named = dir
        .file_name()
        .is_some_and(|n| n.to_string_lossy().starts_with("result_dir_"));
    named || worker_dirs(&perf).is_ok_and(|w| !w.is_empty())
}

fn walk(dir: &Path, found: &mut Found) -> Result<()> {
    // The original pipeline's flat layout: result_dir_<jobid>/perf/perf.data.<n>.
    if let Some(flat) = capture::flat_layout_dir(dir).filter(|_| !is_result_dir(dir)) {
        found.result_dirs += 1;
        let query = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        found.items.push(Item {
            capture: CaptureDir {
                dir: flat,
                worker: None,
                query,
            },
            kind: Kind::Capture,
        });
        return Ok(());
    }
    if is_result_dir(dir) {
        found.result_dirs += 1;
        items_of_perf_root(&dir.join("profiles").join("perf"), &mut found.items)?;
        // Never deeper: everything of a result directory is under
        // profiles/perf, and its symfs/ trees can be huge.
        return Ok(());
    }
    for d in subdirs(dir)? {
        if d.file_name().is_some_and(|n| n == "symfs") {
            continue;
        }
        // One unreadable directory among years of results must not stop
        // the others; it is reported as failed at the end.
        let before = found.items.len();
        if let Err(e) = walk(&d, found) {
            found.items.truncate(before);
            found.unreadable.push((d, e.to_string()));
        }
    }
    Ok(())
}

/// Finds every capture under `roots`, at any depth. A root may also be a
/// `profiles/perf` directory, one `worker_N` directory or one capture.
/// Errors (exit code 2) when a root does not exist or holds nothing to do.
pub fn find(roots: &[PathBuf]) -> Result<Found> {
    let mut found = Found::default();
    for root in roots {
        if !root.is_dir() {
            let what = if root.exists() {
                "is not a directory"
            } else {
                "does not exist"
            };
            return Err(Error::Usage(format!(
                "{}: {what}; pass directories that hold result_dir_* directories",
                root.display()
            )));
        }
        let before = found.items.len();
        let name = root
            .canonicalize()
            .map_err(|e| Error::io(root, e))?
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if let Some(w) = worker_index(&name) {
            items_of_worker(root, Some(w), &mut found.items)?;
        } else if !is_result_dir(root) && !worker_dirs(root)?.is_empty() {
            items_of_perf_root(root, &mut found.items)?;
        } else if !is_result_dir(root) && classify(root)?.is_some() {
            let parent = root.canonicalize().map_err(|e| Error::io(root, e))?;
            let worker = parent
                .parent()
                .and_then(|p| p.file_name())
                .and_then(|n| worker_index(&n.to_string_lossy()));
            let kind = classify(root)?.expect("checked above");
            found.items.push(Item {
                capture: CaptureDir {
                    dir: root.clone(),
                    worker,
                    query: name,
                },
                kind,
            });
        } else {
            walk(root, &mut found)?;
        }
        if found.items.len() == before && found.unreadable.is_empty() {
            return Err(Error::Usage(format!(
                "{}: no captures found at any depth; expected result_dir_*/profiles/perf/\
                 worker_N/QUERY/ directories (with capture.json, capture-metadata.txt, \
                 perf.data*, perf.script.gz/.zst or stacks.folded)",
                root.display()
            )));
        }
    }
    found
        .items
        .sort_by(|a, b| a.capture.dir.cmp(&b.capture.dir));
    found.items.dedup_by(|a, b| a.capture.dir == b.capture.dir);
    Ok(found)
}

/// Options of `jobprof reprocess`.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Options {
    /// Captures worked on at once (0 = number of cores).
    pub jobs: usize,
    /// Only say what would be done.
    pub dry_run: bool,
    /// Redo complete captures too.
    pub force: bool,
    /// Write `perf.script.zst` beside an old `perf.script.gz`.
    pub recompress: bool,
    /// Delete `perf.script.gz` once its `perf.script.zst` and the outputs
    /// are complete (implies `recompress`).
    pub replace_archives: bool,
    /// This task's share of the work; `None` = everything.
    pub split: Option<Split>,
    /// The per-capture pipeline's options (formats, perf, thresholds); its
    /// `jobs` and `force` are set by this module.
    pub process: pipeline::Options,
}

impl Options {
    fn jobs(&self) -> usize {
        crate::jobs_or_cores(self.jobs)
    }

    fn recompress(&self) -> bool {
        self.recompress || self.replace_archives
    }
}

/// What one directory needs, decided from file names and the marker only.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// Why the outputs must be (re)made; `None` when they are complete.
    pub outputs: Option<String>,
    /// Write `perf.script.zst` from `perf.script.gz`.
    pub recompress: bool,
    /// Delete `perf.script.gz` afterwards.
    pub replace: bool,
}

impl Plan {
    /// True when nothing is to be done.
    pub fn is_empty(&self) -> bool {
        self.outputs.is_none() && !self.recompress && !self.replace
    }

    /// The work in words (`process (never processed), recompress`).
    pub fn describe(&self, kind: Kind) -> String {
        let mut v = Vec::new();
        if let Some(why) = &self.outputs {
            let verb = match kind {
                Kind::Capture => "process",
                Kind::RenderOnly => "render stacks.folded",
            };
            v.push(format!("{verb} ({why})"));
        }
        if self.recompress {
            v.push(format!(
                "recompress {} to {}",
                capture::SCRIPT_GZ,
                capture::SCRIPT_ZST
            ));
        }
        if self.replace {
            v.push(format!("delete {}", capture::SCRIPT_GZ));
        }
        v.join(", ")
    }
}

/// Outputs a render-only directory gets.
fn render_only_outputs(formats: &pipeline::Formats) -> Vec<String> {
    let mut v: Vec<String> = formats
        .render
        .iter()
        .filter(|f| **f != Format::Folded)
        .map(|f| pipeline::output_name(*f).to_string())
        .collect();
    if v.is_empty() {
        // Asked only for folded/summary: the stacks are already there, the
        // pictures are still what such a directory lacks.
        v = vec![pipeline::SVG.to_string(), pipeline::HTML.to_string()];
    }
    v
}

/// Decides what `item` needs.
pub fn plan(item: &Item, opts: &Options) -> Plan {
    let dir = &item.capture.dir;
    let wanted = match item.kind {
        Kind::Capture => opts.process.formats.names(),
        Kind::RenderOnly => render_only_outputs(&opts.process.formats),
    };
    let outputs = if opts.force {
        Some("--force".to_string())
    } else {
        match capture::completion(&item.capture.out_dir(), &wanted) {
            Completion::Done(_) => None,
            Completion::NotDone => Some("not processed yet".to_string()),
            Completion::Stale(why) => Some(why),
        }
    };
    let gz = dir.join(capture::SCRIPT_GZ).is_file();
    let zst = item.capture.out_dir().join(capture::SCRIPT_ZST).is_file();
    let is_capture = item.kind == Kind::Capture;
    Plan {
        outputs,
        recompress: is_capture && opts.recompress() && gz && !zst,
        replace: is_capture && opts.replace_archives && gz,
    }
}

/// How one directory ended.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The directory.
    pub dir: PathBuf,
    /// What kind of work it was.
    pub kind: Kind,
    /// Processed, skipped, refused (with `message` the reason), not
    /// rendered, or failed.
    pub status: Status,
    /// What was done, or why not.
    pub message: String,
    /// Wall time spent on it.
    pub elapsed: Duration,
}

/// The outcome of a run.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Result directories found in the trees.
    pub result_dirs: usize,
    /// Captures found in the trees (all tasks).
    pub total: usize,
    /// This task's share (`None` = all).
    pub split: Option<Split>,
    /// One entry per directory of this task's share, sorted by path.
    pub outcomes: Vec<Outcome>,
    /// True for `--dry-run`: outcomes say what would be done.
    pub dry_run: bool,
    /// The job-level views refreshed, one per result directory.
    pub views: Vec<crate::views::ViewReport>,
}

impl Report {
    /// How many outcomes have `status`.
    pub fn count(&self, status: Status) -> usize {
        self.outcomes.iter().filter(|o| o.status == status).count()
    }

    /// 0 when everything was processed or already complete; 1 when any
    /// directory was refused, not rendered or failed (or a job view could
    /// not be written).
    pub fn exit_code(&self) -> ExitCode {
        if self.outcomes.iter().any(|o| o.status.is_failure())
            || crate::views::any_failed(&self.views)
        {
            ExitCode::Failed
        } else {
            ExitCode::Success
        }
    }

    /// The summary table printed at the end of a run.
    pub fn table(&self) -> String {
        let mut s = String::new();
        let share = match self.split {
            Some(sp) => format!(
                ", array task {} of {}: {} of them",
                sp.index,
                sp.count,
                self.outcomes.len()
            ),
            None => String::new(),
        };
        s.push_str(&format!(
            "jobprof reprocess{}: {} capture(s) in {} result dir(s){share}\n",
            if self.dry_run { " --dry-run" } else { "" },
            self.total,
            self.result_dirs,
        ));
        let rows: [(&str, usize); 5] = if self.dry_run {
            [
                ("to do", self.count(Status::Processed)),
                ("skipped", self.count(Status::Skipped)),
                ("refused", self.count(Status::Refused)),
                ("not rendered", 0),
                ("failed", self.count(Status::Failed)),
            ]
        } else {
            [
                ("processed", self.count(Status::Processed)),
                ("skipped", self.count(Status::Skipped)),
                ("refused", self.count(Status::Refused)),
                ("not rendered", self.count(Status::RenderRefused)),
                ("failed", self.count(Status::Failed)),
            ]
        };
        for (name, n) in rows {
            if name == "not rendered" && n == 0 {
                continue;
            }
            s.push_str(&format!("  {name:<12} {n:>6}\n"));
        }
        for (status, title) in [
            (Status::Refused, "refused"),
            (Status::RenderRefused, "not rendered"),
            (Status::Failed, "failed"),
        ] {
            let list: Vec<&Outcome> = self
                .outcomes
                .iter()
                .filter(|o| o.status == status)
                .collect();
            if list.is_empty() {
                continue;
            }
            s.push_str(&format!("{title}:\n"));
            for o in list {
                s.push_str(&format!(
                    "  {}: {}\n",
                    crate::sys::progress::printable(&o.dir),
                    o.message
                ));
            }
        }
        s
    }
}

/// Reprocesses every capture under `roots` (this task's share when
/// `opts.split` is set). Errors only for bad usage (roots without
/// captures, an unusable `--perf`); per-directory problems are in the
/// report.
pub fn run(roots: &[PathBuf], opts: &Options, progress: &Progress) -> Result<Report> {
    let found = find(roots)?;
    let total = found.items.len();
    let unreadable = found.unreadable;
    let mine: Vec<Item> = found
        .items
        .into_iter()
        .filter(|item| {
            let key = share_key(&item.capture.dir, roots);
            opts.split.is_none_or(|s| s.takes(key))
        })
        .collect();
    let mut report = Report {
        result_dirs: found.result_dirs,
        total,
        split: opts.split,
        outcomes: Vec::new(),
        dry_run: opts.dry_run,
        views: Vec::new(),
    };
    let planned: Vec<(Item, Plan)> = mine
        .into_iter()
        .map(|item| {
            let p = plan(&item, opts);
            (item, p)
        })
        .collect();
    // Every task sees the same unreadable directories; the first reports
    // them.
    if opts.split.is_none_or(|s| s.index == 0) {
        for (dir, why) in &unreadable {
            report.outcomes.push(Outcome {
                dir: dir.clone(),
                kind: Kind::Capture,
                status: Status::Failed,
                message: format!("not searched for captures: {why}"),
                elapsed: Duration::ZERO,
            });
        }
    }
    if opts.dry_run {
        report
            .outcomes
            .extend(planned.iter().map(|(i, p)| dry_run(i, p)));
        return Ok(report);
    }
    let perf = PerfTool::find(opts.process.perf.as_deref());
    if let (Some(p), Err(e)) = (&opts.process.perf, &perf) {
        return Err(Error::Usage(format!("--perf {}: {e}", p.display())));
    }
    let (todo, done): (Vec<_>, Vec<_>) = planned.into_iter().partition(|(_, p)| !p.is_empty());
    for (item, _) in &done {
        report.outcomes.push(Outcome {
            dir: item.capture.dir.clone(),
            kind: item.kind,
            status: Status::Skipped,
            message: "already complete".into(),
            elapsed: Duration::ZERO,
        });
    }
    if !todo.is_empty() {
        progress.log(format!(
            "{} of {} director(ies) to bring up to date ({} already complete)",
            todo.len(),
            todo.len() + done.len(),
            done.len()
        ));
    }
    report
        .outcomes
        .extend(work_all(&todo, opts, &perf, progress));
    report.outcomes.sort_by(|a, b| a.dir.cmp(&b.dir));
    report.views = crate::views::after_run(&report.outcomes, &opts.process.job);
    Ok(report)
}

fn dry_run(item: &Item, plan: &Plan) -> Outcome {
    let mut o = Outcome {
        dir: item.capture.dir.clone(),
        kind: item.kind,
        status: Status::Skipped,
        message: "already complete".into(),
        elapsed: Duration::ZERO,
    };
    if plan.is_empty() {
        return o;
    }
    if item.kind == Kind::Capture && plan.outputs.is_some() {
        if let Err(refusal) = capture::validate(&item.capture) {
            o.status = Status::Refused;
            o.message = refusal.0;
            return o;
        }
    }
    o.status = Status::Processed;
    o.message = format!("would {}", plan.describe(item.kind));
    o
}

/// Brings `todo` up to date, `opts.jobs()` captures at a time, with one
/// progress bar overall; the outcomes in the order they finished.
fn work_all(
    todo: &[(Item, Plan)],
    opts: &Options,
    perf: &std::result::Result<PerfTool, String>,
    progress: &Progress,
) -> Vec<Outcome> {
    let jobs = opts.jobs().min(todo.len()).max(1);
    // Captures run side by side; the cores left over (fewer captures than
    // jobs) go to each capture's own perf script and fold threads.
    let mut popts = opts.process.clone();
    popts.jobs = (opts.jobs() / jobs).max(1);
    popts.force = true; // plan() already decided what needs doing
    let bar = progress.bar(todo.len() as u64, "reprocess");
    // Per-capture bars stay hidden: one bar overall.
    let hidden =
        indicatif::MultiProgress::with_draw_target(indicatif::ProgressDrawTarget::hidden());
    let next = AtomicUsize::new(0);
    let results = Mutex::new(Vec::with_capacity(todo.len()));
    std::thread::scope(|s| {
        for _ in 0..jobs {
            s.spawn(|| {
                while let Some((item, plan)) = todo.get(next.fetch_add(1, Ordering::Relaxed)) {
                    let o = work_on(item, plan, opts, &popts, perf, progress, &hidden);
                    bar.suspend(|| {
                        progress.result(format!(
                            "{}: {} ({:.1}s): {}",
                            crate::sys::progress::printable(&o.dir),
                            o.status.as_str(),
                            o.elapsed.as_secs_f64(),
                            o.message
                        ))
                    });
                    bar.inc(1);
                    results.lock().expect("no panics hold it").push(o);
                }
            });
        }
    });
    bar.finish_and_clear();
    results.into_inner().expect("no panics hold it")
}

fn work_on(
    item: &Item,
    plan: &Plan,
    opts: &Options,
    popts: &pipeline::Options,
    perf: &std::result::Result<PerfTool, String>,
    progress: &Progress,
    multi: &indicatif::MultiProgress,
) -> Outcome {
    let start = Instant::now();
    let steps = || -> std::result::Result<Vec<String>, (Status, String)> {
        let mut done = Vec::new();
        if plan.outputs.is_some() {
            done.push(write_outputs(item, popts, perf, progress, multi)?);
        }
        let dir = &item.capture.dir;
        if plan.recompress {
            done.extend(recompress_step(dir, popts).map_err(|e| (Status::Failed, e))?);
        }
        if plan.replace && opts.replace_archives {
            done.extend(replace_step(dir, opts).map_err(|e| (Status::Failed, e))?);
        }
        Ok(done)
    };
    let (status, message) = match steps() {
        Ok(done) => (Status::Processed, done.join("; ")),
        Err(failed) => failed,
    };
    Outcome {
        dir: item.capture.dir.clone(),
        kind: item.kind,
        status,
        message,
        elapsed: start.elapsed(),
    }
}

/// The outputs: the whole pipeline for a capture, the renders alone for a
/// render-only directory. Err: the status and message when not processed.
fn write_outputs(
    item: &Item,
    popts: &pipeline::Options,
    perf: &std::result::Result<PerfTool, String>,
    progress: &Progress,
    multi: &indicatif::MultiProgress,
) -> std::result::Result<String, (Status, String)> {
    let (status, message) = match item.kind {
        Kind::Capture => {
            let r = pipeline::process_capture(&item.capture, popts, perf, progress, multi);
            (r.status, r.message)
        }
        Kind::RenderOnly => match render_folded(&item.capture, &popts.formats) {
            Ok(msg) => (Status::Processed, msg),
            Err(e) => (Status::Failed, e.to_string()),
        },
    };
    if status == Status::Processed {
        Ok(message)
    } else {
        Err((status, message))
    }
}

/// perf.script.gz recompressed to perf.script.zst, unless processing has
/// just written a fresh perf.script.zst (then recompressing the old text
/// is pointless: None).
fn recompress_step(
    dir: &Path,
    popts: &pipeline::Options,
) -> std::result::Result<Option<String>, String> {
    let gz = dir.join(capture::SCRIPT_GZ);
    let out = capture::ensure_output_dir(dir).map_err(|e| e.to_string())?;
    let zst = out.join(capture::SCRIPT_ZST);
    if capture::is_plain_file(&zst) {
        return Ok(None);
    }
    capture::remove_stale_temporaries(&out, &[capture::SCRIPT_ZST]);
    let (raw, packed) = recompress(&gz, &zst, popts.zstd_level)
        .map_err(|e| format!("recompressing {}: {e}", gz.display()))?;
    Ok(Some(format!(
        "{} recompressed to {} ({raw} bytes of text, {} -> {packed} bytes)",
        capture::SCRIPT_GZ,
        capture::SCRIPT_ZST,
        file_len(&gz),
    )))
}

/// perf.script.gz deleted (None when it was already gone), but only once the new archive and the outputs
/// are complete: the .gz is the last copy of the symbolized text otherwise.
fn replace_step(dir: &Path, opts: &Options) -> std::result::Result<Option<String>, String> {
    let gz = dir.join(capture::SCRIPT_GZ);
    let out = capture::output_dir(dir);
    let zst = out.join(capture::SCRIPT_ZST);
    let complete = matches!(
        capture::completion(&out, &opts.process.formats.names()),
        Completion::Done(_)
    );
    if !(capture::is_plain_file(&zst) && complete) {
        return Ok(Some(format!(
            "{} kept: no complete {} and outputs to replace it with",
            capture::SCRIPT_GZ,
            capture::SCRIPT_ZST
        )));
    }
    match fs::remove_file(&gz) {
        Ok(()) => Ok(Some(format!("{} deleted", capture::SCRIPT_GZ))),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("cannot delete {}: {e}", gz.display())),
    }
}

fn file_len(p: &Path) -> u64 {
    fs::metadata(p).map(|m| m.len()).unwrap_or(0)
}

/// Streams `gz` (gzip, possibly multi-member) into `zst` (one zstd frame,
/// written atomically). Returns the text and compressed sizes.
pub fn recompress(gz: &Path, zst: &Path, level: i32) -> Result<(u64, u64)> {
    let file = fs::File::open(gz).map_err(|e| Error::io(gz, e))?;
    let mut decoder = flate2::read::MultiGzDecoder::new(io::BufReader::new(file));
    let out = AtomicFile::open(zst, Destination::Confined, true)?;
    let mut encoder = zstd::Encoder::new(out, level).map_err(|e| Error::io(zst, e))?;
    let mut buf = vec![0u8; 1 << 20];
    let mut raw = 0u64;
    loop {
        let n = match decoder.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(source) => {
                return Err(Error::Corrupt {
                    path: gz.to_path_buf(),
                    format: "gzip",
                    source,
                })
            }
        };
        raw += n as u64;
        encoder
            .write_all(&buf[..n])
            .map_err(|e| Error::io(zst, e))?;
    }
    let out = encoder.finish().map_err(|e| Error::io(zst, e))?;
    out.commit()?;
    Ok((raw, file_len(zst)))
}

/// Draws the flamegraphs of a directory that only kept `stacks.folded`,
/// then writes the marker.
fn render_folded(cap: &CaptureDir, formats: &pipeline::Formats) -> Result<String> {
    let dir = &cap.dir;
    let names = render_only_outputs(formats);
    let mut refs: Vec<&str> = names.iter().map(String::as_str).collect();
    refs.push(capture::MARKER);
    capture::remove_stale_temporaries(dir, &refs);
    capture::clear_marker(dir)?;
    let input = render::folded::read_folded(&[Source::Path(dir.join(FOLDED))])?;
    if input.stacks.is_empty() {
        return Err(input.nothing_usable(FOLDED).into());
    }
    let worker = cap.worker.map(|w| w.to_string());
    let opts = RenderOptions {
        title: render::capture_title(None, worker.as_deref(), Some(&cap.query)),
        subtitle: Some(format!(
            "{} samples · drawn from stacks.folded",
            input.total()
        )),
        ..RenderOptions::default()
    };
    for name in &names {
        let format = Format::from_path(Path::new(name))?;
        let mut f = AtomicFile::open(&dir.join(name), Destination::Confined, false)?;
        render::render(format, &input.stacks, &opts, &mut f)?;
        f.commit()?;
    }
    capture::write_marker(dir, &Marker::new(names.clone(), None), None)?;
    Ok(format!(
        "drawn from {FOLDED} ({} samples): {}",
        input.total(),
        names.join(", ")
    ))
}

/// The sbatch array job that runs a reprocessing ([`array_script`]).
#[derive(Debug, Clone)]
pub struct ArrayJob {
    /// The jobprof executable the tasks run (absolute: tasks do not share
    /// the submitter's `PATH`).
    pub jobprof: PathBuf,
    /// The trees to reprocess.
    pub roots: Vec<PathBuf>,
    /// Array size; `None` = the number of captures to do, at most
    /// [`DEFAULT_MAX_ARRAY`].
    pub array_count: Option<usize>,
    /// `#SBATCH --partition`.
    pub partition: Option<String>,
    /// `#SBATCH --time`.
    pub time: Option<String>,
    /// `#SBATCH --cpus-per-task` (also each task's `--jobs`, through
    /// `SLURM_CPUS_PER_TASK`); `None` = [`DEFAULT_CPUS_PER_TASK`].
    pub cpus_per_task: Option<usize>,
    /// Further `jobprof reprocess` options for the tasks (`--recompress`).
    pub extra_args: Vec<String>,
}

/// Largest array [`array_script`] makes when not told a size.
pub const DEFAULT_MAX_ARRAY: usize = 64;
/// CPUs of each array task when not told.
pub const DEFAULT_CPUS_PER_TASK: usize = 4;

fn utf8_path(p: &Path, what: &str) -> Result<String> {
    p.to_str().map(str::to_string).ok_or_else(|| {
        Error::Usage(format!(
            "{what} {} is not valid UTF-8; it cannot be written into a batch script",
            p.display()
        ))
    })
}

fn sbatch_value(name: &str, v: &str) -> Result<String> {
    if v.is_empty() || v.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(Error::Usage(format!(
            "--{name} `{v}`: give a value without spaces (it goes on an #SBATCH line)"
        )));
    }
    Ok(v.to_string())
}

/// Writes the sbatch script of a job array that runs `jobprof reprocess`
/// over `job.roots`: one task per share of the captures (see [`Split`];
/// each task finds its share from `SLURM_ARRAY_TASK_ID`). The command line
/// is built as an argv and every word quoted, so any path works.
pub fn array_script(job: &ArrayJob) -> Result<String> {
    let mut roots = Vec::new();
    for r in &job.roots {
        let abs = r.canonicalize().map_err(|e| Error::io(r, e))?;
        roots.push(abs);
    }
    let found = find(&roots)?;
    let opts = Options {
        recompress: job.extra_args.iter().any(|a| a == "--recompress"),
        replace_archives: job.extra_args.iter().any(|a| a == "--replace-archives"),
        force: job.extra_args.iter().any(|a| a == "--force"),
        ..Options::default()
    };
    let pending = found
        .items
        .iter()
        .filter(|i| !plan(i, &opts).is_empty())
        .count();
    let count = match job.array_count {
        Some(0) => return Err(Error::Usage("--array-count must be at least 1".into())),
        Some(n) => n,
        None => pending.clamp(1, DEFAULT_MAX_ARRAY),
    };
    let cpus = job.cpus_per_task.unwrap_or(DEFAULT_CPUS_PER_TASK).max(1);
    let mut argv = vec![
        utf8_path(&job.jobprof, "the jobprof executable")?,
        "reprocess".to_string(),
    ];
    argv.extend(job.extra_args.iter().cloned());
    argv.push("--".into());
    for r in &roots {
        argv.push(utf8_path(r, "ROOT")?);
    }
    let command: Vec<String> = argv.iter().map(|w| shell_quote(w)).collect();
    let mut s = String::new();
    s.push_str("#!/bin/bash\n");
    s.push_str(&format!(
        "# Written by `jobprof reprocess --sbatch` (jobprof {}) on {}.\n",
        env!("CARGO_PKG_VERSION"),
        crate::sys::units::utc_timestamp()
    ));
    s.push_str(&format!(
        "# {count} array task(s) share the {} capture(s) under the roots below ({pending} to do\n\
         # when written). Task I takes every {count}th capture of the sorted list, starting\n\
         # at the Ith (from SLURM_ARRAY_TASK_ID), so every capture is processed exactly once\n\
         # and the tasks never talk to each other. A killed task leaves only complete\n\
         # outputs: submit again to finish the rest (complete captures are skipped).\n",
        found.items.len()
    ));
    s.push_str("#SBATCH --job-name=jobprof-reprocess\n");
    s.push_str(&format!("#SBATCH --array=0-{}\n", count - 1));
    s.push_str("#SBATCH --nodes=1\n#SBATCH --ntasks=1\n");
    s.push_str(&format!("#SBATCH --cpus-per-task={cpus}\n"));
    s.push_str("#SBATCH --output=jobprof-reprocess-%A_%a.out\n");
    if let Some(p) = &job.partition {
        s.push_str(&format!(
            "#SBATCH --partition={}\n",
            sbatch_value("partition", p)?
        ));
    }
    if let Some(t) = &job.time {
        s.push_str(&format!("#SBATCH --time={}\n", sbatch_value("time", t)?));
    }
    s.push_str("set -euo pipefail\n");
    s.push_str(
        "# --jobs comes from SLURM_CPUS_PER_TASK; the share from SLURM_ARRAY_TASK_ID,\n\
         # SLURM_ARRAY_TASK_MIN and SLURM_ARRAY_TASK_COUNT.\n",
    );
    s.push_str(&format!("exec {}\n", command.join(" ")));
    Ok(s)
}

/// Submits a batch script (`sbatch --parsable FILE`, the script written to
/// a temporary file that sbatch copies) and returns the job id.
pub fn submit(slurm: &crate::sys::slurm::Slurm, script: &str) -> Result<crate::sys::slurm::JobId> {
    let mut f = tempfile::Builder::new()
        .prefix("jobprof-reprocess-")
        .suffix(".sbatch")
        .tempfile()
        .map_err(|e| Error::io(std::env::temp_dir(), e))?;
    f.write_all(script.as_bytes())
        .and_then(|()| f.flush())
        .map_err(|e| Error::io(f.path(), e))?;
    Ok(slurm.submit([f.path().as_os_str().to_owned()])?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| m.get(k).cloned()
    }

    #[test]
    fn split_from_slurm_array_variables() {
        assert_eq!(Split::from_slurm_env(env(&[])).unwrap(), None);
        let s = Split::from_slurm_env(env(&[
            ("SLURM_ARRAY_TASK_ID", "3"),
            ("SLURM_ARRAY_TASK_COUNT", "4"),
        ]))
        .unwrap();
        assert_eq!(s, Some(Split { index: 3, count: 4 }));
        // --array=1-8: ids start at MIN.
        let s = Split::from_slurm_env(env(&[
            ("SLURM_ARRAY_TASK_ID", "1"),
            ("SLURM_ARRAY_TASK_MIN", "1"),
            ("SLURM_ARRAY_TASK_MAX", "8"),
        ]))
        .unwrap();
        assert_eq!(s, Some(Split { index: 0, count: 8 }));
        // --array=0-6:2 -> ids 0 2 4 6.
        let s = Split::from_slurm_env(env(&[
            ("SLURM_ARRAY_TASK_ID", "4"),
            ("SLURM_ARRAY_TASK_MIN", "0"),
            ("SLURM_ARRAY_TASK_MAX", "6"),
            ("SLURM_ARRAY_TASK_STEP", "2"),
        ]))
        .unwrap();
        assert_eq!(s, Some(Split { index: 2, count: 4 }));
        assert!(Split::from_slurm_env(env(&[("SLURM_ARRAY_TASK_ID", "1")])).is_err());
        assert!(Split::from_slurm_env(env(&[
            ("SLURM_ARRAY_TASK_ID", "x"),
            ("SLURM_ARRAY_TASK_COUNT", "2")
        ]))
        .is_err());
        assert!(Split::new(2, 2).is_err() && Split::new(0, 0).is_err());
    }

    #[test]
    fn every_item_goes_to_exactly_one_task() {
        for count in 1..6 {
            for n in 0..20 {
                let mut seen = vec![0; n];
                for index in 0..count {
                    let s = Split::new(index, count).unwrap();
                    (0..n)
                        .filter(|p| s.takes(format!("result_dir_{p}/worker_0/q1").as_bytes()))
                        .for_each(|p| seen[p] += 1);
                }
                assert!(seen.iter().all(|c| *c == 1), "{count} tasks, {n} items");
            }
        }
    }
}
