//! One flamegraph per query over all its workers:
//! `profiles/perf/queries/<Q>/stacks.folded` and `flamegraph.html`, merged
//! from the `stacks.folded` of the query's completely processed captures,
//! with `worker_N` as the root frame by default (one tower per worker, so
//! imbalance shows). `sources.json`, written last, names the captures (and
//! when each was completed) a view was drawn from; a view whose sources are
//! unchanged is not drawn again, so a refresh after one capture redraws one
//! query.

use std::path::Path;

use serde_json::json;

use super::scan::{Index, QueryView, Row, State};
use super::{offcpu_views, Options, QueryRoot, QUERIES_DIR, SOURCES_JSON};
use crate::capture::{FOLDED, HTML};
use crate::error::{Error, Result};
use crate::output::render::{self, folded::read_folded, RenderOptions};
use crate::sys::atomic::{write_in, AtomicFile};
use crate::sys::confined::Dir;
use crate::sys::input::Source;
use crate::text::offcpu::{OFFCPU_FOLDED, WALLCLOCK_FOLDED};

/// Brings every query's merged view up to date and records it in
/// `index.queries`. Returns (queries with a view, views redrawn).
pub fn update(
    perf_root: &Path,
    root: &Dir,
    index: &mut Index,
    opts: &Options,
) -> Result<(usize, usize)> {
    let queries: Vec<String> = index.job.queries.iter().cloned().collect();
    // Queries side by side (`sub_create` takes a directory another made).
    let jobs = crate::jobs_or_cores(opts.jobs);
    let views = crate::sys::jobs::map_jobs(&queries, jobs, |q| {
        update_one(perf_root, root, index, q, opts)
    });
    let (mut drawn, mut rendered) = (0, 0);
    for v in views {
        let (view, redrawn) = v?;
        drawn += usize::from(view.flamegraph.is_some());
        rendered += usize::from(redrawn);
        index.queries.push(view);
    }
    Ok((drawn, rendered))
}

/// Brings query `q`'s merged view up to date: the view, and whether it was
/// drawn again.
fn update_one(
    perf_root: &Path,
    root: &Dir,
    index: &Index,
    q: &str,
    opts: &Options,
) -> Result<(QueryView, bool)> {
    let job = index.job.job_ids.iter().next().cloned();
    let rows: Vec<&Row> = index.captures.iter().filter(|r| r.query == q).collect();
    let merged: Vec<&Row> = rows
        .iter()
        .copied()
        .filter(|r| r.state == State::Processed && r.folded.is_some())
        .collect();
    let mut view = QueryView {
        query: q.to_string(),
        workers_merged: merged.iter().filter_map(|r| r.worker).collect(),
        captures: rows.len(),
        samples: merged.iter().filter_map(|r| r.samples).sum(),
        imbalance: imbalance(&merged),
        flamegraph: None,
    };
    if merged.is_empty() {
        remove_view(root, q)?;
        return Ok((view, false));
    }
    let sources = json!({
        "query": q,
        "root": opts.query_root.as_str(),
        "captures": merged.iter().map(|r| json!({
            "capture": r.capture,
            "completed": r.completed,
        })).collect::<Vec<_>>(),
    });
    let sources = serde_json::to_string_pretty(&sources).expect("JSON values serialize") + "\n";
    // queries/Q reached one name at a time, never through a link.
    let dir = root.sub_create(QUERIES_DIR)?.sub_create(q)?;
    let is_file = |n: &str| dir.entry(n).ok().flatten().is_some_and(|e| e.is_file());
    let current = dir
        .read(SOURCES_JSON)
        .is_ok_and(|s| s == sources.as_bytes())
        && is_file(HTML)
        && is_file(FOLDED)
        && is_file(crate::output::pprof::PPROF);
    if !current {
        draw(perf_root, &dir, q, job.as_deref(), &merged, opts)?;
        write_in(&dir, SOURCES_JSON, true, sources.as_bytes())?;
    }
    view.flamegraph = Some(format!("{QUERIES_DIR}/{q}/{HTML}"));
    Ok((view, !current))
}

/// Largest worker's samples over the mean of the merged workers.
fn imbalance(rows: &[&Row]) -> Option<f64> {
    let samples: Vec<u64> = rows.iter().filter_map(|r| r.samples).collect();
    if samples.len() < 2 {
        return None;
    }
    let mean = samples.iter().sum::<u64>() as f64 / samples.len() as f64;
    let max = *samples.iter().max()? as f64;
    (mean > 0.0).then(|| max / mean)
}

fn remove_view(root: &Dir, q: &str) -> Result<()> {
    let queries = match root.entry(QUERIES_DIR)? {
        None => return Ok(()),
        Some(_) => root.sub(QUERIES_DIR)?,
    };
    let dir = match queries.entry(q)? {
        None => return Ok(()),
        Some(_) => queries.sub(q)?,
    };
    // sources.json first: without it a half-removed view is redrawn.
    let views = offcpu_views::FILES;
    for name in [SOURCES_JSON, HTML, FOLDED, crate::output::pprof::PPROF]
        .iter()
        .chain(views.iter())
    {
        dir.remove_file(name)?;
    }
    let _ = queries.remove_dir(q);
    Ok(())
}

/// Merges the workers' folded stacks and writes the query's folded stacks
/// and flamegraph page.
fn draw(
    perf_root: &Path,
    dir: &Dir,
    q: &str,
    job: Option<&str>,
    merged: &[&Row],
    opts: &Options,
) -> Result<()> {
    let mut stacks: Vec<(String, u64)> = Vec::new();
    let mut labelled: Vec<Labelled> = Vec::new();
    for r in merged {
        let rel = r.folded.as_deref().expect("filtered on folded");
        let input = read_folded(&[Source::Path(perf_root.join(rel))])?;
        let switch_data = offcpu_views::capture_file(perf_root, r, WALLCLOCK_FOLDED).is_some();
        labelled.push((input.stacks.len(), r.worker, switch_data));
        match (opts.query_root, r.worker) {
            (QueryRoot::Worker, Some(w)) => stacks.extend(
                input
                    .stacks
                    .into_iter()
                    .map(|(s, c)| (format!("worker_{w};{s}"), c)),
            ),
            _ => stacks.extend(input.stacks),
        }
    }
    let mut f = AtomicFile::create_in(dir, FOLDED, true)?;
    render::render_folded(&stacks, &mut f)?;
    f.commit()?;
    let ropts = render_options(q, job, merged, opts);
    if crate::sys::counts::sum(stacks.iter().map(|(_, c)| *c)) == 0 {
        // Every worker's capture of the query was valid and empty.
        dir.remove_file(crate::output::pprof::PPROF)?;
        let mut f = AtomicFile::create_in(dir, HTML, true)?;
        render::render_empty(render::Format::Html, &ropts, render::NO_SAMPLES, &mut f)?;
        f.commit()?;
        return offcpu_views::draw(perf_root, dir, merged, opts.query_root, &ropts);
    }
    let off_cpu = offcpu_views::per_worker(perf_root, merged, OFFCPU_FOLDED, opts.query_root)?;
    write_pprof(dir, q, (&stacks, &labelled), &off_cpu, &ropts)?;
    // Each worker's own page has the timeline of its capture.
    let links = merged
        .iter()
        .filter_map(|r| {
            let page = r.flamegraph.as_deref()?;
            let text = match r.worker {
                Some(w) => format!("worker {w} (timeline)"),
                None => format!("{} (timeline)", r.capture),
            };
            Some((text, format!("../../{page}")))
        })
        .collect();
    let extras = render::PageExtras {
        links,
        ..Default::default()
    };
    let mut f = AtomicFile::create_in(dir, HTML, true)?;
    render::render_html_with(&stacks, &ropts, &extras, &mut f)?;
    f.commit()?;
    offcpu_views::draw(perf_root, dir, merged, opts.query_root, &ropts)
}

/// How many stacks in a row of the merged stacks came from which worker,
/// and whether that worker's capture has switch data (a `wallclock.folded`).
type Labelled = (usize, Option<u32>, bool);

/// The merged query's `profile.pb.gz`: every worker's stacks as samples
/// labelled `query` and `worker` (`on_cpu`: the merged stacks and which
/// worker each came from). When a worker has switch data, its `off_cpu`
/// stacks follow in the off-CPU and wall columns, and its on-CPU stacks
/// count in the wall column too (so that column's total is the query's
/// `wallclock.folded`).
fn write_pprof(
    dir: &Dir,
    q: &str,
    on_cpu: (&[(String, u64)], &[Labelled]),
    off_cpu: &[offcpu_views::WorkerStacks],
    ropts: &RenderOptions,
) -> Result<()> {
    let (stacks, labelled) = on_cpu;
    let switch_data = labelled.iter().any(|l| l.2);
    let columns =
        crate::output::pprof::Columns::for_count_name(&ropts.count_name).with_off_cpu(switch_data);
    let labels = |w: Option<u32>| {
        let mut labels = vec![("query".to_string(), q.to_string())];
        if let Some(w) = w {
            labels.push(("worker".to_string(), w.to_string()));
        }
        labels
    };
    let workers = labelled
        .iter()
        .flat_map(|&(n, w, wall)| std::iter::repeat_n((w, wall), n));
    let on = stacks
        .iter()
        .zip(workers)
        .map(|((s, c), (w, wall))| (s.as_str(), columns.on_cpu(*c, wall), labels(w)));
    let off = off_cpu.iter().flat_map(|(w, stacks)| {
        let columns = &columns;
        stacks
            .iter()
            .map(move |(s, ns)| (s.as_str(), columns.off_cpu_values(*ns), labels(*w)))
    });
    let path = dir.join(crate::output::pprof::PPROF);
    let mut f = AtomicFile::create_in(dir, crate::output::pprof::PPROF, true)?;
    crate::output::pprof::from_stacks(on.chain(off), &columns, &mut f)
        .map_err(|e| Error::io(&path, e))?;
    f.commit()
}

fn render_options(q: &str, job: Option<&str>, merged: &[&Row], opts: &Options) -> RenderOptions {
    let workers = match merged.len() {
        1 => "1 worker".to_string(),
        n => format!("{n} workers"),
    };
    let event = merged.iter().find_map(|r| r.event.clone());
    let mut facts = vec![workers];
    if let Some(ev) = &event {
        facts.insert(0, ev.clone());
    }
    if opts.query_root == QueryRoot::Worker {
        facts.push("root frame = worker".into());
    }
    let mut o = RenderOptions {
        title: format!(
            "{} · all workers",
            render::capture_title(job, None, Some(q))
        ),
        subtitle: Some(facts.join(" · ")),
        ..RenderOptions::default()
    };
    if let Some(ev) = &event {
        crate::text::perf_script::period_unit(ev).clone_into(&mut o.count_name);
    }
    o
}
