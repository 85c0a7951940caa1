//! Job-level views: what a result directory looks like as a whole, after
//! its captures were processed one by one.
//!
//! After a run of `jobprof process` or `reprocess` (the binary calls it
//! with the run's [`Outcome`]s), [`after_run`] refreshes, for every
//! result directory it touched, `profiles/perf/index.html` (one offline page:
//! a sortable table of every capture, query x worker, with its numbers, its
//! state and a link to its flamegraph, under a short job header) and
//! `index.json` (the same table for scripts), plus one flamegraph per query
//! merged over all its workers (`profiles/perf/queries/<Q>/`). Everything is
//! rebuilt from what is on disk (the captures' `summary.json`, markers and
//! metadata; no re-folding; the folded stacks this run wrote are taken
//! from memory while the file on disk is still the one written), under an
//! exclusive lock on
//! `profiles/perf/.jobprof-index.lock`, and written atomically: when several
//! array tasks finish at once, the last one to take the lock sees every
//! task's outputs, so the final page is complete. [`diff`] compares two runs
//! query by query. This module neither symbolizes nor folds captures.

pub mod diff;
mod nsys_views;
mod offcpu_views;
mod page;
mod queries;
mod scan;
pub mod summary;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::sys::confined::Dir;
use crate::sys::lock::DirLock;

use crate::capture::Outcome;
use crate::error::{Error, ExitCode, Result};

pub use nsys_views::{listed_slices, NSYS_DIR};
pub use scan::{Header, Index, NsysCell, QueryView, Row, Share, State};

/// The job page, in `profiles/perf/`.
pub const INDEX_HTML: &str = "index.html";
/// The job table for scripts, next to it.
pub const INDEX_JSON: &str = "index.json";
/// The per-query merged views, `profiles/perf/queries/<Q>/`.
pub const QUERIES_DIR: &str = "queries";
/// What a query's merged flamegraph was made from, `queries/<Q>/`.
pub const SOURCES_JSON: &str = "sources.json";
/// The lock serializing refreshes of one result directory.
pub const LOCK_FILE: &str = ".jobprof-index.lock";
/// Bytes of folded stacks a run of `process` or `reprocess` keeps in
/// memory for the views ([`crate::pipeline::Options::keep_stacks`]); the
/// captures past it are read back from disk.
pub const KEEP_STACKS_BYTES: u64 = 32 << 20;

/// What the per-query flamegraphs put at the root of every stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum QueryRoot {
    /// `worker_N` as the root frame: one tower per worker, so imbalance
    /// between workers shows (the default).
    #[default]
    Worker,
    /// No extra frame: the workers' stacks summed.
    None,
}

impl QueryRoot {
    /// The word used in options and `sources.json`.
    pub fn as_str(self) -> &'static str {
        match self {
            QueryRoot::Worker => "worker",
            QueryRoot::None => "none",
        }
    }
}

impl std::str::FromStr for QueryRoot {
    type Err = Error;
    fn from_str(s: &str) -> Result<QueryRoot> {
        match s {
            "worker" => Ok(QueryRoot::Worker),
            "none" => Ok(QueryRoot::None),
            _ => Err(Error::Usage(format!(
                "--query-root {s}: use `worker` (one tower per worker) or `none` (workers summed)"
            ))),
        }
    }
}

/// Options of the job-level views.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Options {
    /// Root frame of the per-query flamegraphs.
    pub query_root: QueryRoot,
    /// Query views drawn at once (0: one per core, as `--jobs`).
    pub jobs: usize,
}

/// The refreshed views of one result directory.
#[derive(Debug, Clone)]
pub struct Refreshed {
    /// Captures listed in the index.
    pub captures: usize,
    /// Of those, processed completely.
    pub processed: usize,
    /// Queries with a merged flamegraph.
    pub queries: usize,
    /// Merged flamegraphs rewritten by this refresh (the others were
    /// current).
    pub queries_rendered: usize,
    /// Captures with an Nsight Systems report beside them
    /// (`profiles/nsys/worker_N/Q/`).
    pub nsys_reports: usize,
}

/// The outcome of refreshing one result directory's views.
#[derive(Debug)]
pub struct ViewReport {
    /// `RESULT_DIR/profiles/perf`.
    pub perf_root: PathBuf,
    /// What was written, or why not.
    pub result: Result<Refreshed>,
}

impl ViewReport {
    /// One line for the run's report.
    pub fn line(&self) -> String {
        let page = self.perf_root.join(INDEX_HTML);
        match &self.result {
            Ok(r) => format!(
                "{}: job index of {} capture(s), {} processed; {} query flamegraph(s), {} redrawn{}",
                page.display(),
                r.captures,
                r.processed,
                r.queries,
                r.queries_rendered,
                match r.nsys_reports {
                    0 => String::new(),
                    n => format!("; {n} Nsight Systems report(s) listed beside them"),
                }
            ),
            Err(e) => format!("{}: not written: {e}", page.display()),
        }
    }
}

/// True when any view could not be written.
pub fn any_failed(views: &[ViewReport]) -> bool {
    views.iter().any(|v| v.result.is_err())
}

/// A run's exit code with its views': [`ExitCode::Failed`] when any view
/// could not be written after a successful run, else `run`'s (a run where
/// nothing could be done stays 2).
pub fn exit_code(run: ExitCode, views: &[ViewReport]) -> ExitCode {
    if any_failed(views) && run == ExitCode::Success {
        ExitCode::Failed
    } else {
        run
    }
}

/// `RESULT_DIR/profiles/perf` of a capture at `.../worker_N/Q`, or `None`
/// for a capture outside that layout.
pub fn perf_root_of(capture_dir: &Path) -> Option<PathBuf> {
    let worker = capture_dir.parent()?;
    let name = worker.file_name()?.to_str()?;
    let n = name.strip_prefix("worker_")?;
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(worker.parent()?.to_path_buf())
}

/// Refreshes the views of every result directory the outcomes of a run
/// (`jobprof process` or `reprocess`) belong to (skipped captures
/// included: a directory processed before views existed gets them). One
/// report per result directory, sorted by path.
pub fn after_run(outcomes: &[Outcome], opts: &Options) -> Vec<ViewReport> {
    let mut roots: BTreeMap<PathBuf, Vec<&Outcome>> = BTreeMap::new();
    for o in outcomes {
        if let Some(root) = perf_root_of(&o.dir) {
            roots.entry(root).or_default().push(o);
        }
    }
    roots
        .into_iter()
        .map(|(root, outs)| {
            let result = refresh(&root, &outs, opts);
            ViewReport {
                perf_root: root,
                result,
            }
        })
        .collect()
}

/// Rebuilds the views of one `profiles/perf` directory from disk, holding
/// its lock. `outcomes` are this run's outcomes of its captures.
pub fn refresh(perf_root: &Path, outcomes: &[&Outcome], opts: &Options) -> Result<Refreshed> {
    // Every view is written through `root`: never through a link planted
    // at or below `profiles/perf` (crate::sys::confined).
    let root = Dir::open(perf_root)?;
    let _lock = DirLock::wait(&root, LOCK_FILE)?;
    remove_view_leftovers(&root);
    let mut index = match scan::scan(perf_root, &root, outcomes) {
        // A job of Nsight Systems reports only: their rows alone.
        Err(Error::Usage(_)) if nsys_views::has_reports(perf_root) => scan::empty_index(),
        r => r?,
    };
    let nsys_reports = nsys_views::attach(perf_root, &mut index);
    let kept: queries::Kept = (outcomes.iter())
        .filter_map(|o| o.stacks.as_deref())
        .map(|k| ((k.file.dev, k.file.ino), k))
        .collect();
    let (queries, rendered) = queries::update(perf_root, &root, &mut index, &kept, opts)?;
    page::write_index(&root, &index)?;
    Ok(Refreshed {
        captures: index.captures.len(),
        processed: index
            .captures
            .iter()
            .filter(|r| r.state == State::Processed)
            .count(),
        queries,
        queries_rendered: rendered,
        nsys_reports,
    })
}

/// Writes the views of result directories whose Nsight Systems reports
/// were read (`perf_roots`: their `profiles/perf`, made when missing, as
/// a job of nsys reports only has none): one report per directory.
pub fn for_nsys(perf_roots: &[PathBuf], opts: &Options) -> Vec<ViewReport> {
    perf_roots
        .iter()
        .map(|perf_root| {
            let made = Dir::parent_of(perf_root).and_then(|(parent, name)| {
                parent.mkdir(name, 0o777)?;
                Ok(())
            });
            ViewReport {
                perf_root: perf_root.clone(),
                result: made.and_then(|()| refresh(perf_root, &[], opts)),
            }
        })
        .collect()
}

/// Removes the temporaries a killed refresh left (`index.html`,
/// `index.json`, `queries/Q/*`), as the capture directories' are removed.
fn remove_view_leftovers(root: &Dir) {
    use crate::sys::atomic::remove_leftovers_in;
    remove_leftovers_in(root, &[INDEX_HTML, INDEX_JSON]);
    let Ok(queries) = root.sub(QUERIES_DIR) else {
        return;
    };
    for q in queries.names().unwrap_or_default() {
        if let Ok(d) = queries.sub(&q) {
            let names = [SOURCES_JSON, crate::capture::HTML, crate::capture::FOLDED];
            remove_leftovers_in(&d, &names);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perf_root_needs_a_worker_parent() {
        assert_eq!(
            perf_root_of(Path::new("/r/profiles/perf/worker_3/q1")),
            Some(PathBuf::from("/r/profiles/perf"))
        );
        assert_eq!(perf_root_of(Path::new("/r/q1")), None);
        assert_eq!(perf_root_of(Path::new("/r/worker_x/q1")), None);
    }

    #[test]
    fn query_root_words() {
        assert_eq!("worker".parse::<QueryRoot>().unwrap(), QueryRoot::Worker);
        assert_eq!("none".parse::<QueryRoot>().unwrap(), QueryRoot::None);
        assert!("host".parse::<QueryRoot>().is_err());
    }
}
