//! Bulk reprocessing of old result directories (`jobprof reprocess`).
//!
//! Finds every capture at any depth below the roots ([`crate::capture::find`])
//! and brings each one up to date: what each needs is decided first from
//! file names and the marker ([`plan`]); then ([`work`]) captures whose
//! outputs are missing or were written by an older output version go
//! through the same per-capture pipeline as `jobprof process`
//! ([`crate::pipeline::process_capture`]), captures of the old shell
//! pipeline that only kept `perf.script.gz` are folded from it (and, with
//! `recompress`, get a `perf.script.zst`, [`crate::output::archive`]), and
//! directories that only kept `stacks.folded` get their flamegraphs drawn
//! ([`crate::output::render::redraw`]). Captures are worked on in parallel,
//! several at a time; a deterministic split ([`Split`]) lets the tasks of a
//! Slurm job array share one tree without talking to each other
//! ([`array_script`] writes the array job, through
//! [`crate::sys::slurm::array`]).
//!
//! Every output is written atomically and the completion marker last, so a
//! run killed at any moment leaves only complete files, and the next run
//! finishes what is left. This module neither prints (progress goes through
//! [`Progress`], results are returned in a [`Report`]) nor refreshes the
//! job views (the binary does, with the report's outcomes).

mod plan;
mod report;
mod split;
mod work;

use std::path::PathBuf;
use std::time::Duration;

use crate::capture::{self, Item, Outcome, Status};
use crate::error::{Error, Result};
use crate::pipeline;
use crate::symbolize::perf::PerfProbe;
use crate::sys::progress::Progress;

pub use plan::{array_script, plan, Plan};
pub use report::Report;
pub use split::{share_key, Split};
pub use work::Error as StepError;

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

/// Reprocesses every capture under `roots` (this task's share when
/// `opts.split` is set). Errors only for bad usage (roots without
/// captures, an unusable `--perf`); per-directory problems are in the
/// report.
pub fn run(roots: &[PathBuf], opts: &Options, progress: &dyn Progress) -> Result<Report> {
    let found = capture::find(roots)?;
    let mut report = Report {
        result_dirs: found.result_dirs,
        total: found.items.len(),
        split: opts.split,
        outcomes: Vec::new(),
        dry_run: opts.dry_run,
    };
    let planned: Vec<(Item, Plan)> = found
        .items
        .into_iter()
        .filter(|item| {
            opts.split
                .is_none_or(|s| s.takes(share_key(item.capture.subject(), roots)))
        })
        .map(|item| {
            let p = plan(&item, opts);
            (item, p)
        })
        .collect();
    // Every task sees the same unreadable directories; the first reports
    // them.
    if opts.split.is_none_or(|s| s.index == 0) {
        report
            .outcomes
            .extend(found.unreadable.iter().map(|(dir, why)| Outcome {
                dir: dir.clone(),
                status: Status::Failed,
                message: format!("not searched for captures: {why}"),
                elapsed: Duration::ZERO,
                stacks: None,
            }));
    }
    if opts.dry_run {
        report
            .outcomes
            .extend(planned.iter().map(|(i, p)| plan::dry_run(i, p)));
        return Ok(report);
    }
    let perf = PerfProbe::start(opts.process.perf.as_deref());
    let explicit = opts.process.perf.as_ref();
    if let (Some(p), Some(Err(e))) = (explicit, explicit.map(|_| perf.get())) {
        return Err(Error::Usage(format!("--perf {}: {e}", p.display())));
    }
    report
        .outcomes
        .extend(bring_up_to_date(planned, opts, &perf, progress));
    report.outcomes.sort_by(|a, b| a.dir.cmp(&b.dir));
    Ok(report)
}

/// Works through the planned captures that need work (the others are
/// skipped as already complete), saying how many first.
fn bring_up_to_date(
    planned: Vec<(Item, Plan)>,
    opts: &Options,
    perf: &PerfProbe,
    progress: &dyn Progress,
) -> Vec<Outcome> {
    let (todo, done): (Vec<_>, Vec<_>) = planned.into_iter().partition(|(_, p)| !p.is_empty());
    let mut outcomes: Vec<Outcome> = done
        .iter()
        .map(|(item, _)| Outcome {
            dir: item.capture.subject().to_path_buf(),
            status: Status::Skipped,
            message: "already complete".into(),
            elapsed: Duration::ZERO,
            stacks: None,
        })
        .collect();
    if !todo.is_empty() {
        progress.log(&format!(
            "{} of {} director(ies) to bring up to date ({} already complete)",
            todo.len(),
            todo.len() + done.len(),
            done.len()
        ));
    }
    outcomes.extend(work::work_all(&todo, opts, perf, progress));
    outcomes
}
