//! The per-query off-CPU and wall-clock views: next to a query's merged
//! `stacks.folded`, `offcpu.folded`/`offcpu.html` and
//! `wallclock.folded`/`wallclock.html` merged from the workers' captures
//! recorded with `--off-cpu` (the same root frame rule as the on-CPU view,
//! the state frames in their fixed colours). A query none of whose
//! captures has them gets none (and loses stale ones). The workers' stacks
//! come from one reader, [`per_worker`], which the query's `profile.pb.gz`
//! uses too.

use std::path::Path;

use super::scan::Row;
use super::QueryRoot;
use crate::error::Result;
use crate::output::render::{self, folded::read_folded, Format, RenderOptions};
use crate::sys::atomic::AtomicFile;
use crate::sys::confined::Dir;
use crate::sys::input::Source;
use crate::text::offcpu::{OFFCPU_FOLDED, WALLCLOCK_FOLDED};

/// The views' files, for removal with the query's view.
pub const FILES: [&str; 4] = [
    OFFCPU_FOLDED,
    "offcpu.html",
    WALLCLOCK_FOLDED,
    "wallclock.html",
];

/// Draws both views of one query from its merged captures.
pub fn draw(
    perf_root: &Path,
    dir: &Dir,
    merged: &[&Row],
    root: QueryRoot,
    base: &RenderOptions,
) -> Result<()> {
    for (folded, html, what) in [
        (OFFCPU_FOLDED, "offcpu.html", "off-CPU"),
        (WALLCLOCK_FOLDED, "wallclock.html", "wall-clock"),
    ] {
        let stacks = merge(perf_root, merged, folded, root)?;
        if stacks.is_empty() {
            for name in [folded, html] {
                dir.remove_file(name)?;
            }
            continue;
        }
        let mut f = AtomicFile::create_in(dir, folded, true)?;
        render::render_folded(&stacks, &mut f)?;
        f.commit()?;
        let o = RenderOptions {
            title: format!("{} · {what}", base.title),
            count_name: "ns".into(),
            ..base.clone()
        };
        let mut f = AtomicFile::create_in(dir, html, true)?;
        render::marked::render_marked(
            Format::Html,
            &stacks,
            &o,
            &render::marked::offcpu_frames(),
            &mut f,
        )?;
        f.commit()?;
    }
    Ok(())
}

/// The `name` files next to each row's `stacks.folded`, merged.
fn merge(
    perf_root: &Path,
    merged: &[&Row],
    name: &str,
    root: QueryRoot,
) -> Result<Vec<(String, u64)>> {
    let per_row = per_worker(perf_root, merged, name, root)?;
    Ok(per_row.into_iter().flat_map(|(_, s)| s).collect())
}

/// The `name` file next to `row`'s `stacks.folded`, when there is one.
pub fn capture_file(perf_root: &Path, row: &Row, name: &str) -> Option<std::path::PathBuf> {
    let rel = row.folded.as_deref()?;
    let path = perf_root.join(rel).parent()?.join(name);
    path.is_file().then_some(path)
}

/// One capture's stacks of one file, with its row (worker and replicate).
pub type WorkerStacks<'r> = (&'r Row, Vec<(String, u64)>);

/// The stacks of the `name` file of each row that has one, with the
/// query's root frame rule applied, by row.
pub fn per_worker<'r>(
    perf_root: &Path,
    merged: &[&'r Row],
    name: &str,
    root: QueryRoot,
) -> Result<Vec<WorkerStacks<'r>>> {
    let mut out = Vec::new();
    for r in merged {
        let Some(path) = capture_file(perf_root, r, name) else {
            continue;
        };
        let input = read_folded(&[Source::Path(path)])?;
        let stacks = match (root, r.worker) {
            (QueryRoot::Worker, Some(w)) => input
                .stacks
                .into_iter()
                .map(|(s, c)| (format!("worker_{w};{s}"), c))
                .collect(),
            _ => input.stacks,
        };
        out.push((*r, stacks));
    }
    Ok(out)
}
