//! The per-query off-CPU and wall-clock views: next to a query's merged
//! `stacks.folded`, `offcpu.folded`/`offcpu.html` and
//! `wallclock.folded`/`wallclock.html` merged from the workers' captures
//! recorded with `--off-cpu` (the same root frame rule as the on-CPU view,
//! the state frames in their fixed colours). A query none of whose
//! captures has them gets none (and loses stale ones).

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
    let mut stacks = Vec::new();
    for r in merged {
        let Some(rel) = r.folded.as_deref() else {
            continue;
        };
        let Some(cap) = perf_root.join(rel).parent().map(Path::to_path_buf) else {
            continue;
        };
        let path = cap.join(name);
        if !path.is_file() {
            continue;
        }
        let input = read_folded(&[Source::Path(path)])?;
        match (root, r.worker) {
            (QueryRoot::Worker, Some(w)) => stacks.extend(
                input
                    .stacks
                    .into_iter()
                    .map(|(s, c)| (format!("worker_{w};{s}"), c)),
            ),
            _ => stacks.extend(input.stacks),
        }
    }
    Ok(stacks)
}
