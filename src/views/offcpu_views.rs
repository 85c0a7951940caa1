//! The per-query off-CPU and wall-clock views: next to a query's merged
//! `stacks.folded`, `offcpu.folded`/`offcpu.html` and
//! `wallclock.folded`/`wallclock.html` merged from the workers' captures
//! recorded with `--off-cpu` (the same root frame rule as the on-CPU view,
//! the state frames in their fixed colours). A query none of whose
//! captures has them gets none (and loses stale ones).

use std::path::Path;

use super::scan::Row;
use super::summary::SummaryFields;
use super::QueryRoot;
use crate::error::Result;
use crate::output::render::{self, folded::read_folded, Format, RenderOptions};
use crate::sys::atomic::AtomicFile;
use crate::sys::confined::Dir;
use crate::sys::input::Source;
use crate::text::offcpu::{marked_frames, OFFCPU_FOLDED, WALLCLOCK_FOLDED};

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
        render::marked::render_marked(Format::Html, &stacks, &o, &marked_frames(), &mut f)?;
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

/// A capture's on/off/wall columns on the job page, from the `off_cpu`
/// section of its `summary.json`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Cells {
    /// Share (0..1) of the threads' time in the window spent on the CPU.
    pub on_cpu_share: f64,
    /// Share (0..1) off the CPU (all states).
    pub off_cpu_share: f64,
    /// Of that, runnable (preempted, waiting for a CPU).
    pub runnable_share: f64,
    /// The capture's off-CPU flamegraph, relative to `profiles/perf`.
    pub offcpu: Option<String>,
    /// The capture's wall-clock flamegraph, relative to `profiles/perf`.
    pub wallclock: Option<String>,
}

/// The cells of a summary with an `off_cpu` section; `rel` gives an
/// output's path relative to `profiles/perf` when it exists.
pub fn cells(summary: &SummaryFields, rel: impl Fn(&str) -> Option<String>) -> Option<Cells> {
    let t = &summary.off_cpu.as_ref()?.totals;
    let ns = |x: u64| x as f64;
    let on = ns(t.on_cpu_ns);
    let off: f64 = [
        t.runnable_ns,
        t.sleeping_ns,
        t.uninterruptible_ns,
        t.other_ns,
        t.unknown_ns,
    ]
    .iter()
    .map(|k| ns(*k))
    .sum();
    let all = on + off;
    let share = |x: f64| if all > 0.0 { x / all } else { 0.0 };
    Some(Cells {
        on_cpu_share: share(on),
        off_cpu_share: share(off),
        runnable_share: share(ns(t.runnable_ns)),
        offcpu: rel("offcpu.html").or_else(|| rel("offcpu.svg")),
        wallclock: rel("wallclock.html").or_else(|| rel("wallclock.svg")),
    })
}

/// The page cells of the on/off/wall columns ("-" without off-CPU data).
pub fn page_cells(c: Option<&Cells>) -> Vec<super::page::Cell> {
    use super::page::Cell;
    let pct = |x: f64| format!("{:.1}%", 100.0 * x);
    match c {
        None => vec![Cell::text("-"), Cell::text("-"), Cell::text("-")],
        Some(c) => vec![
            Cell::num(pct(c.on_cpu_share), Some(c.on_cpu_share)),
            Cell::num(
                format!("{} ({} R)", pct(c.off_cpu_share), pct(c.runnable_share)),
                Some(c.off_cpu_share),
            ),
            match (&c.offcpu, &c.wallclock) {
                (Some(o), Some(w)) => Cell {
                    html: format!(
                        "<a href=\"{}\">off-CPU</a> <a href=\"{}\">wall</a>",
                        super::page::href_esc(o),
                        super::page::href_esc(w)
                    ),
                    v: Some("off-CPU".into()),
                    class: "",
                },
                _ => Cell::text("-"),
            },
        ],
    }
}

/// The page columns of [`page_cells`].
pub fn page_cols() -> Vec<super::page::Col> {
    use super::page::Col;
    vec![
        Col {
            key: "on_cpu",
            label: "On-CPU",
            num: true,
        },
        Col {
            key: "off_cpu",
            label: "Off-CPU",
            num: true,
        },
        Col {
            key: "wall",
            label: "Off-CPU / wall",
            num: false,
        },
    ]
}
