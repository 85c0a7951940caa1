//! One flamegraph per base query over all its replicates and workers:
//! `profiles/perf/queries/<Q>/stacks.folded` and `flamegraph.html`, merged
//! from the `stacks.folded` of the query's completely processed captures
//! (`q01_iter1`, `q01_iter2`, ... are replicates of `q01`:
//! [`crate::capture::replicate`]; their stacks are summed, and the page
//! says how many replicates it holds), with `worker_N` as the root frame by
//! default (one tower per worker, so imbalance shows). `sources.json`,
//! written last, names the captures (and when each was completed) a view
//! was drawn from; a view whose sources are unchanged is not drawn again,
//! so a refresh after one capture redraws one query.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

use serde_json::json;

use super::scan::{Index, QueryView, Row, State};
use super::{offcpu_views, Options, QueryRoot, QUERIES_DIR, SOURCES_JSON};
use crate::capture::{KeptStacks, FOLDED, HTML};
use crate::error::{Error, Result};
use crate::output::render::{self, folded::read_folded, RenderOptions};
use crate::sys::atomic::{write_in, AtomicFile};
use crate::sys::confined::{Dir, Entry};
use crate::sys::input::Source;
use crate::text::offcpu::{OFFCPU_FOLDED, WALLCLOCK_FOLDED};

/// The folded stacks the run kept in memory ([`KeptStacks`]), by the
/// device and inode of the file they were written to.
pub type Kept<'a> = HashMap<(u64, u64), &'a KeptStacks>;

/// Brings every query's merged view up to date and records it in
/// `index.queries`. Returns (queries with a view, views redrawn).
pub fn update(
    perf_root: &Path,
    root: &Dir,
    index: &mut Index,
    kept: &Kept<'_>,
    opts: &Options,
) -> Result<(usize, usize)> {
    let queries: Vec<String> = index.job.queries.iter().cloned().collect();
    // Queries side by side (`sub_create` takes a directory another made).
    let jobs = crate::jobs_or_cores(opts.jobs);
    let views = crate::sys::jobs::map_jobs(&queries, jobs, |q| {
        update_one((perf_root, root), index, kept, q, opts)
    });
    let (mut drawn, mut rendered) = (0, 0);
    for v in views {
        let (view, redrawn) = v?;
        drawn += usize::from(view.flamegraph.is_some());
        rendered += usize::from(redrawn);
        index.queries.push(view);
    }
    remove_other_views(root, &index.job.queries)?;
    Ok((drawn, rendered))
}

/// Brings query `q`'s merged view up to date: the view, and whether it was
/// drawn again.
fn update_one(
    (perf_root, root): (&Path, &Dir),
    index: &Index,
    kept: &Kept<'_>,
    q: &str,
    opts: &Options,
) -> Result<(QueryView, bool)> {
    let job = index.job.job_ids.iter().next().cloned();
    let rows: Vec<&Row> = index.captures.iter().filter(|r| r.base == q).collect();
    let merged: Vec<&Row> = rows
        .iter()
        .copied()
        .filter(|r| r.state == State::Processed && r.folded.is_some())
        .collect();
    let mut replicates: Vec<(u32, &str)> = rows
        .iter()
        .map(|r| (r.replicate, r.query.as_str()))
        .collect();
    replicates.sort_unstable();
    replicates.dedup();
    let workers: BTreeSet<u32> = merged.iter().filter_map(|r| r.worker).collect();
    let mut view = QueryView {
        query: q.to_string(),
        replicates: replicates.iter().map(|(_, n)| n.to_string()).collect(),
        workers_merged: workers.into_iter().collect(),
        captures_merged: merged.len(),
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
        "replicates": view.replicates,
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
        let summed: BTreeSet<&str> = merged.iter().map(|r| r.query.as_str()).collect();
        let look = Look {
            job: job.as_deref(),
            replicates: summed.len(),
        };
        draw((perf_root, kept), &dir, q, look, &merged, opts)?;
        write_in(&dir, SOURCES_JSON, true, sources.as_bytes())?;
    }
    view.flamegraph = Some(format!("{QUERIES_DIR}/{q}/{HTML}"));
    Ok((view, !current))
}

/// Largest worker's samples over the mean of the merged workers (each
/// worker's replicates summed).
fn imbalance(rows: &[&Row]) -> Option<f64> {
    let mut per_worker: BTreeMap<Option<u32>, u64> = BTreeMap::new();
    for r in rows {
        if let Some(n) = r.samples {
            *per_worker.entry(r.worker).or_default() += n;
        }
    }
    let samples: Vec<u64> = per_worker.into_values().collect();
    if samples.len() < 2 {
        return None;
    }
    let mean = samples.iter().sum::<u64>() as f64 / samples.len() as f64;
    let max = *samples.iter().max()? as f64;
    (mean > 0.0).then(|| max / mean)
}

/// Removes the views of queries the job no longer has: a query whose
/// captures were removed, and the per-replicate views (`queries/q01_iter2/`)
/// that jobprof drew before replicates were merged. Only the view's own
/// files go; a directory holding anything else stays.
fn remove_other_views(root: &Dir, queries: &BTreeSet<String>) -> Result<()> {
    let Ok(dir) = root.sub(QUERIES_DIR) else {
        return Ok(());
    };
    for name in dir.names().unwrap_or_default() {
        let Some(name) = name.to_str() else { continue };
        if !queries.contains(name) && dir.entry(name)?.is_some_and(|e| e.is_dir()) {
            remove_view(root, name)?;
        }
    }
    Ok(())
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

/// What a query's pages say about it besides its stacks.
#[derive(Clone, Copy)]
struct Look<'a> {
    /// The Slurm job id.
    job: Option<&'a str>,
    /// Replicates of the query summed in the view (processed ones).
    replicates: usize,
}

/// Merges the replicates' and workers' folded stacks and writes the query's
/// folded stacks and flamegraph page.
fn draw(
    (perf_root, kept): (&Path, &Kept<'_>),
    dir: &Dir,
    q: &str,
    look: Look,
    merged: &[&Row],
    opts: &Options,
) -> Result<()> {
    let mut stacks: Vec<(String, u64)> = Vec::new();
    let mut labelled: Vec<Labelled> = Vec::new();
    for r in merged {
        let path = perf_root.join(r.folded.as_deref().expect("filtered on folded"));
        let switch_data = offcpu_views::capture_file(perf_root, r, WALLCLOCK_FOLDED).is_some();
        let before = stacks.len();
        let root = match (opts.query_root, r.worker) {
            (QueryRoot::Worker, Some(w)) => Some(format!("worker_{w};")),
            _ => None,
        };
        let rooted = |s: &str| match &root {
            Some(root) => format!("{root}{s}"),
            None => s.to_string(),
        };
        match kept_for(kept, &path) {
            Some(k) => stacks.extend(k.iter().map(|(s, c)| (rooted(s), c))),
            None => {
                let read = read_folded(&[Source::Path(path)])?.stacks;
                stacks.extend(read.into_iter().map(|(s, c)| match root {
                    Some(_) => (rooted(&s), c),
                    None => (s, c),
                }));
            }
        }
        labelled.push((stacks.len() - before, r, switch_data));
    }
    let mut f = AtomicFile::create_in(dir, FOLDED, true)?;
    render::render_folded(&stacks, &mut f)?;
    f.commit()?;
    let ropts = render_options(q, look, merged, opts);
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
            let text = match (r.worker, look.replicates) {
                (Some(w), 1) => format!("worker {w} (timeline)"),
                (Some(w), _) => format!("{} worker {w} (timeline)", r.query),
                (None, _) => format!("{} (timeline)", r.capture),
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

/// The stacks the run kept for the folded file at `path`, while that file
/// is still the one it wrote (the same device, inode, size and mtime, not
/// a link); `None`: read it from disk.
fn kept_for<'k>(kept: &Kept<'k>, path: &Path) -> Option<&'k KeptStacks> {
    if kept.is_empty() {
        return None;
    }
    let now = Entry::of(&std::fs::symlink_metadata(path).ok()?);
    let k = *kept.get(&(now.dev, now.ino))?;
    k.file.same_file(now).then_some(k)
}

/// How many stacks in a row of the merged stacks came from which capture,
/// and whether that capture has switch data (a `wallclock.folded`).
type Labelled<'r> = (usize, &'r Row, bool);

/// The merged query's `profile.pb.gz`: every capture's stacks as samples
/// labelled `query` (the base query), `replicate` (the capture's query
/// name, when it is not the base's) and `worker` (`on_cpu`: the merged
/// stacks and which capture each came from). When a worker has switch data, its `off_cpu`
/// stacks follow in the off-CPU and wall columns, and its on-CPU stacks
/// count in the wall column too (so that column's total is the query's
/// `wallclock.folded`).
fn write_pprof(
    dir: &Dir,
    q: &str,
    on_cpu: (&[(String, u64)], &[Labelled<'_>]),
    off_cpu: &[offcpu_views::WorkerStacks],
    ropts: &RenderOptions,
) -> Result<()> {
    let (stacks, labelled) = on_cpu;
    let switch_data = labelled.iter().any(|l| l.2);
    let columns =
        crate::output::pprof::Columns::for_count_name(&ropts.count_name).with_off_cpu(switch_data);
    let labels = |r: &Row| {
        let mut labels = vec![("query".to_string(), q.to_string())];
        if r.query != q {
            labels.push(("replicate".to_string(), r.query.clone()));
        }
        if let Some(w) = r.worker {
            labels.push(("worker".to_string(), w.to_string()));
        }
        labels
    };
    let rows = labelled
        .iter()
        .flat_map(|&(n, r, wall)| std::iter::repeat_n((r, wall), n));
    let on = stacks
        .iter()
        .zip(rows)
        .map(|((s, c), (r, wall))| (s.as_str(), columns.on_cpu(*c, wall), labels(r)));
    let off = off_cpu.iter().flat_map(|(r, stacks)| {
        let columns = &columns;
        let labels = labels(r);
        stacks
            .iter()
            .map(move |(s, ns)| (s.as_str(), columns.off_cpu_values(*ns), labels.clone()))
    });
    let path = dir.join(crate::output::pprof::PPROF);
    let mut f = AtomicFile::create_in(dir, crate::output::pprof::PPROF, true)?;
    crate::output::pprof::from_stacks(on.chain(off), &columns, &mut f)
        .map_err(|e| Error::io(&path, e))?;
    f.commit()
}

fn render_options(q: &str, look: Look, merged: &[&Row], opts: &Options) -> RenderOptions {
    let workers = merged
        .iter()
        .filter_map(|r| r.worker)
        .collect::<BTreeSet<_>>();
    let workers = match workers.len().max(1) {
        1 => "1 worker".to_string(),
        n => format!("{n} workers"),
    };
    let event = merged.iter().find_map(|r| r.event.clone());
    let mut facts = vec![workers];
    if look.replicates > 1 {
        facts.push(format!("{} replicates summed", look.replicates));
    }
    if let Some(ev) = &event {
        facts.insert(0, ev.clone());
    }
    if opts.query_root == QueryRoot::Worker {
        facts.push("root frame = worker".into());
    }
    let mut o = RenderOptions {
        title: format!(
            "{} · all workers",
            render::capture_title(look.job, None, Some(q))
        ),
        subtitle: Some(facts.join(" · ")),
        ..RenderOptions::default()
    };
    if let Some(ev) = &event {
        crate::text::perf_script::period_unit(ev).clone_into(&mut o.count_name);
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(path: &Path) -> Entry {
        Entry::of(&std::fs::symlink_metadata(path).unwrap())
    }

    #[test]
    fn kept_stacks_stand_for_their_file_only_while_it_is_unchanged() {
        let t = tempfile::tempdir().unwrap();
        let path = t.path().join(FOLDED);
        std::fs::write(&path, "a;b 1\n").unwrap();
        let k = KeptStacks::new(entry(&path), [("a;b", 1)].into_iter());
        let kept: Kept = [((k.file.dev, k.file.ino), &k)].into_iter().collect();
        let got = kept_for(&kept, &path).map(|k| k.iter().collect::<Vec<_>>());
        assert_eq!(got, Some(vec![("a;b", 1)]));
        // Another run's file renamed over it: read from disk.
        let other = t.path().join("other");
        std::fs::write(&other, "a;c 2\n").unwrap();
        std::fs::rename(&other, &path).unwrap();
        assert!(kept_for(&kept, &path).is_none());
        // A link to the file written is not that file.
        let link = t.path().join("link");
        std::os::unix::fs::symlink(&path, &link).unwrap();
        assert!(kept_for(&kept, &link).is_none());
        assert!(kept_for(&Kept::new(), &path).is_none());
    }
}
