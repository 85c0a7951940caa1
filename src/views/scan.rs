//! The job table, read from disk: one [`Row`] per capture of a
//! `profiles/perf` directory, with its state and the numbers of its
//! `summary.json`, and the job header gathered from the captures'
//! `capture.json`. Summaries are read typed ([`super::summary`]): a field a
//! summary lacks (written by an older or newer jobprof) is shown as "-"
//! instead of hiding the capture.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use jobprof_capture_format::Capture;
use serde::Serialize;
use serde_json::Value;

use super::summary::{Ratio, SummaryFields};
use super::INDEX_JSON;
use crate::capture::Outcome;
use crate::capture::{self, legacy::Facts, CaptureDir, Completion, Filter};
use crate::capture::{Status, HTML, SUMMARY, SVG};
use crate::error::Result;
use crate::sys::confined::Dir;

/// How far a capture got.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum State {
    /// Complete: outputs and marker written.
    Processed,
    /// Folded and summarized, but the flamegraph was refused (too few
    /// symbols).
    NotRendered,
    /// Processing failed (the reason says where).
    Failed,
    /// Validation refused the capture (the reason says why).
    Refused,
    /// Completed by a jobprof whose outputs are out of date.
    Outdated,
    /// Not processed (yet).
    NotProcessed,
    /// No perf capture: a query and worker of which only an Nsight Systems
    /// report was published (its cell says what was read from it).
    NsysOnly,
}

impl State {
    /// The word shown in the page.
    pub fn as_str(self) -> &'static str {
        match self {
            State::Processed => "processed",
            State::NotRendered => "not rendered",
            State::Failed => "failed",
            State::Refused => "refused",
            State::Outdated => "outdated",
            State::NotProcessed => "not processed",
            State::NsysOnly => "nsys only",
        }
    }
}

/// A function's share of a capture.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Share {
    /// The function.
    pub name: String,
    /// Percent of the capture's period total.
    pub percent: f64,
}

/// One capture of the job.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// `worker_N/Q`.
    pub capture: String,
    /// N.
    pub worker: Option<u32>,
    /// Q.
    pub query: String,
    /// The query Q is a replicate of ([`crate::capture::replicate`]:
    /// `q01` for `q01_iter2`; Q itself when it names no replicate).
    pub base: String,
    /// Q's replicate number (1 when it names none).
    pub replicate: u32,
    /// How far it got.
    pub state: State,
    /// Why it is not processed, when it is not.
    pub reason: Option<String>,
    /// Node it ran on.
    pub host: Option<String>,
    /// Samples folded.
    pub samples: Option<u64>,
    /// Sum of the sample periods.
    pub period_total: Option<u64>,
    /// The event sampled.
    pub event: Option<String>,
    /// Seconds between sampling on and off.
    pub window_seconds: Option<f64>,
    /// Share (0..1) of the samples with a named frame.
    pub symbolized_share: Option<f64>,
    /// Share (0..1) of the samples whose stack was cut short.
    pub truncated_share: Option<f64>,
    /// Top functions by self time (at most 3).
    pub top_self: Vec<Share>,
    /// The capture's flamegraph, relative to `profiles/perf`.
    pub flamegraph: Option<String>,
    /// The capture's folded stacks, relative to `profiles/perf`, when it is
    /// processed completely (what the per-query views merge).
    #[serde(skip)]
    pub folded: Option<String>,
    /// When its marker says it was completed.
    #[serde(skip)]
    pub completed: Option<String>,
    /// On/off-CPU shares and views, for captures recorded with `--off-cpu`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub off_cpu: Option<OffCpuCells>,
    /// The Nsight Systems report of the same query and worker, when
    /// `profiles/nsys/worker_N/Q/` holds one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nsys: Option<NsysCell>,
}

/// One capture's nsys report, as the job page and `index.json` show it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NsysCell {
    /// The report, relative to `profiles/perf` (`../nsys/worker_N/Q/FILE`);
    /// `None` when it is missing or not a regular file.
    pub report: Option<String>,
    /// `nsys-rep` or `qdstrm`.
    pub kind: String,
    /// Its size.
    pub bytes: u64,
    /// It settled (else it was published at `--report-timeout`).
    pub settled: bool,
    /// Seconds from `nsys stop` to settled (or published).
    pub wait_seconds: f64,
    /// The settle window it was judged by.
    pub settle_seconds: f64,
    /// Why it is not a settled `.nsys-rep` (or why it cannot be read).
    pub reason: Option<String>,
    /// What `jobprof process` read from the report (its `jobprof/`
    /// directory), when it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub profile: Option<NsysProfileCell>,
}

/// An nsys report's profile (`profiles/nsys/worker_N/Q/jobprof/`), as the
/// job page shows it beside the perf flamegraph.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct NsysProfileCell {
    /// Its CPU flamegraph, relative to `profiles/perf`; `None` when not drawn.
    pub flamegraph: Option<String>,
    /// CPU samples.
    pub samples: u64,
    /// Which nsys wrote what was read.
    pub read: String,
    /// The longest OS runtime calls (name, total ns), at most 3.
    pub top_waits: Vec<(String, u64)>,
    /// The longest NVTX ranges, at most 3.
    pub nvtx: Vec<(String, u64)>,
    /// The longest CUDA kernels, at most 3.
    pub gpu_kernels: Vec<(String, u64)>,
}

/// The job header.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Header {
    /// Slurm job ids seen (normally one).
    pub job_ids: BTreeSet<String>,
    /// Nodes the workers ran on.
    pub hosts: BTreeSet<String>,
    /// Worker indices.
    pub workers: BTreeSet<u32>,
    /// Base queries (replicates counted once: `q01` for `q01_iter1..3`).
    pub queries: BTreeSet<String>,
    /// Capture settings, each with every value seen: `event`,
    /// `frequency`, `call graph`, `threads per shard`, `perf`, `recorder`.
    pub settings: BTreeMap<String, BTreeSet<String>>,
}

/// A base query's merged view (its replicates and workers summed), filled
/// in by the per-query stage.
#[derive(Debug, Clone, Serialize)]
pub struct QueryView {
    /// The base query.
    pub query: String,
    /// Its replicates' query names (`q01_iter1`, ...; the query itself
    /// when it has one capture name), sorted by replicate number.
    pub replicates: Vec<String>,
    /// Workers merged (processed completely), each once.
    pub workers_merged: Vec<u32>,
    /// Captures merged (processed completely), over replicates and workers.
    pub captures_merged: usize,
    /// Captures of the query in all.
    pub captures: usize,
    /// Sum of the merged captures' samples (every replicate's).
    pub samples: u64,
    /// Largest worker's samples over the mean (1 = balanced).
    pub imbalance: Option<f64>,
    /// `queries/<Q>/flamegraph.html`, when drawn.
    pub flamegraph: Option<String>,
}

/// Everything the job page shows.
#[derive(Debug, Clone, Serialize)]
pub struct Index {
    /// `jobprof`.
    pub tool: String,
    /// Its version.
    pub tool_version: String,
    /// When the index was written (UTC).
    pub generated: String,
    /// The job header.
    pub job: Header,
    /// One row per capture, by worker and query.
    pub captures: Vec<Row>,
    /// One entry per query.
    pub queries: Vec<QueryView>,
}

/// Reads every capture of `perf_root`.
pub fn scan(perf_root: &Path, root: &Dir, outcomes: &[&Outcome]) -> Result<Index> {
    let found = capture::discover(&[perf_root.to_path_buf()], &Filter::default())?;
    let earlier = earlier_failures(root);
    let mut header = Header::default();
    let mut rows = Vec::with_capacity(found.len());
    for c in &found {
        let outcome = outcomes.iter().find(|o| o.dir == c.dir);
        rows.push(row(perf_root, c, outcome.copied(), &earlier, &mut header));
    }
    Ok(index_of(header, rows))
}

/// The index of a `profiles/perf` without a capture (a job of Nsight
/// Systems reports only: their rows are added by `nsys_views`).
pub fn empty_index() -> Index {
    index_of(Header::default(), Vec::new())
}

fn index_of(job: Header, captures: Vec<Row>) -> Index {
    Index {
        tool: "jobprof".into(),
        tool_version: env!("CARGO_PKG_VERSION").into(),
        generated: crate::sys::units::utc_timestamp(),
        job,
        captures,
        queries: Vec::new(),
    }
}

/// Failures recorded by an earlier refresh (perhaps another array task's):
/// a capture that failed before writing anything leaves no other trace.
fn earlier_failures(root: &Dir) -> BTreeMap<String, String> {
    // Never through a link, never waiting on a FIFO (the lock is held).
    let Ok(text) = root.read(INDEX_JSON) else {
        return BTreeMap::new();
    };
    let Ok(v) = serde_json::from_slice::<Value>(&text) else {
        return BTreeMap::new();
    };
    let mut out = BTreeMap::new();
    for r in v["captures"].as_array().into_iter().flatten() {
        if r["state"] == "failed" {
            if let (Some(c), Some(why)) = (r["capture"].as_str(), r["reason"].as_str()) {
                out.insert(c.to_string(), why.to_string());
            }
        }
    }
    out
}

fn row(
    perf_root: &Path,
    c: &CaptureDir,
    outcome: Option<&Outcome>,
    earlier: &BTreeMap<String, String>,
    header: &mut Header,
) -> Row {
    let label = c.label();
    let meta: Option<Capture> =
        capture::read_plain(&c.dir.join(jobprof_capture_format::CAPTURE_JSON))
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok());
    let out = c.out_dir();
    let summary = SummaryFields::read(&out.join(SUMMARY));
    let rel = |name: &str| {
        let p = out.join(name);
        // Only a regular file of the capture itself, never a link's target.
        capture::is_plain_file(&p)
            .then(|| {
                p.strip_prefix(perf_root)
                    .ok()
                    .map(|r| r.display().to_string())
            })
            .flatten()
    };
    let mut r = Row {
        capture: label.clone(),
        worker: c.worker,
        query: c.query.clone(),
        base: capture::replicate::split(&c.query).0.to_string(),
        replicate: capture::replicate::split(&c.query).1,
        state: State::NotProcessed,
        reason: None,
        host: meta.as_ref().map(|m| m.host.clone()),
        samples: None,
        period_total: None,
        event: meta.as_ref().map(|m| m.event.clone()),
        window_seconds: meta.as_ref().and_then(window),
        symbolized_share: None,
        truncated_share: None,
        top_self: Vec::new(),
        flamegraph: rel(HTML).or_else(|| rel(SVG)),
        folded: None,
        completed: None,
        off_cpu: None,
        nsys: None,
    };
    if let Some(s) = &summary {
        read_summary(s, &mut r);
        if r.host.is_none() {
            r.host = s.old_pipeline.as_ref().and_then(|o| o.hostname.clone());
        }
        r.off_cpu = offcpu_cells(s, rel);
    }
    let (state, reason) = match not_utf8(c) {
        // The page and index.json name files by text: a name that is not
        // UTF-8 cannot be linked or merged; that capture alone is refused.
        Some(why) => (State::Refused, Some(why)),
        None => state_of(c, summary.as_ref(), outcome, earlier.get(&label)),
    };
    if state == State::Refused {
        r.flamegraph = None;
    }
    r.state = state;
    // A capture drawn from few symbols says so where its state is shown.
    r.reason = reason.or_else(|| summary.as_ref().and_then(|s| s.symbol_warning.clone()));
    if state == State::Processed {
        r.folded = rel(crate::capture::FOLDED);
        if let Completion::Done(m) = capture::completion(&out, &[]) {
            r.completed = Some(m.completed);
        }
    }
    note_header(header, c, meta.as_ref(), summary.as_ref());
    r
}

/// Why the views cannot name `c` (a worker or query directory name that
/// is not UTF-8), or `None`.
fn not_utf8(c: &CaptureDir) -> Option<String> {
    let bad = c.dir.iter().rev().take(2).any(|n| n.to_str().is_none());
    bad.then(|| {
        format!(
            "the directory name {:?} is not UTF-8; the job views cannot name it (rename it)",
            c.dir.file_name().unwrap_or_default()
        )
    })
}

fn window(m: &Capture) -> Option<f64> {
    let (on, off) = (m.enabled_unix_ns?, m.disabled_unix_ns?);
    (off >= on).then(|| (off - on) as f64 / 1e9)
}

/// The summary fields the page shows.
fn read_summary(s: &SummaryFields, r: &mut Row) {
    r.samples = s.samples;
    r.period_total = s.period_total;
    if let Some(e) = &s.event {
        r.event = Some(e.clone());
    }
    r.symbolized_share = s.symbolized_ratio.and_then(Ratio::value);
    r.truncated_share = s.truncated_ratio.and_then(Ratio::value);
    r.top_self = s
        .top_self
        .iter()
        .filter_map(|f| {
            Some(Share {
                name: f.name.clone()?,
                percent: f.percent,
            })
        })
        .take(3)
        .collect();
}

fn state_of(
    c: &CaptureDir,
    summary: Option<&SummaryFields>,
    outcome: Option<&Outcome>,
    earlier: Option<&String>,
) -> (State, Option<String>) {
    if let Err(refusal) = capture::validate(c) {
        return (State::Refused, Some(refusal.0));
    }
    match capture::completion(&c.out_dir(), &[]) {
        Completion::Done(_) => return (State::Processed, None),
        Completion::Stale(why) if summary.is_some() => return (State::Outdated, Some(why)),
        _ => {}
    }
    let this_run = outcome
        .filter(|o| o.status.is_failure())
        .map(|o| o.message.clone());
    if let Some(s) = summary {
        if let Some(why) = &s.render_refused {
            return (State::NotRendered, Some(why.clone()));
        }
        let why = this_run.unwrap_or_else(|| {
            if s.warnings.is_empty() {
                "no completion marker (interrupted, or being processed now)".to_string()
            } else {
                s.warnings.join("; ")
            }
        });
        return (State::Failed, Some(why));
    }
    match (this_run, outcome.map(|o| o.status)) {
        (Some(why), _) => (State::Failed, Some(why)),
        // Processed or skipped by this run, yet nothing on disk says so:
        // the summary was not asked for (--formats).
        (None, Some(Status::Processed | Status::Skipped)) => (
            State::Processed,
            Some("no summary.json (not among --formats)".into()),
        ),
        (None, _) => match earlier {
            Some(why) => (State::Failed, Some(why.clone())),
            None => (State::NotProcessed, None),
        },
    }
}

fn note_header(
    h: &mut Header,
    c: &CaptureDir,
    meta: Option<&Capture>,
    summary: Option<&SummaryFields>,
) {
    if let Some(w) = c.worker {
        h.workers.insert(w);
    }
    h.queries
        .insert(capture::replicate::split(&c.query).0.to_string());
    let mut set = |k: &str, v: String| {
        if !v.is_empty() {
            h.settings.entry(k.to_string()).or_default().insert(v);
        }
    };
    if let Some(m) = meta {
        set("event", m.event.clone());
        set("frequency", format!("{} Hz", m.frequency));
        set("call graph", m.call_graph.clone());
        set("threads per shard", m.threads_per_shard.to_string());
        let perf = m.perf_version.trim();
        set(
            "perf",
            perf.strip_prefix("perf version ")
                .unwrap_or(perf)
                .to_string(),
        );
        set("recorder", format!("jobprof-record {}", m.recorder_version));
        if let Some(j) = &m.slurm_job_id {
            h.job_ids.insert(j.clone());
        }
        if !m.host.is_empty() {
            h.hosts.insert(m.host.clone());
        }
    }
    if let Some(j) = summary.and_then(|s| s.job_id.clone()) {
        h.job_ids.insert(j);
    }
    if let Some(old) = summary.and_then(|s| s.old_pipeline.as_ref()) {
        note_old_pipeline(h, old);
    }
}

/// The old shell pipeline's facts (`old_pipeline` in summary.json) in the
/// job header: its event, frequency, call graph, sample loss, shards and
/// worker executable.
fn note_old_pipeline(h: &mut Header, old: &Facts) {
    let mut set = |k: &str, v: Option<String>| {
        if let Some(v) = v.filter(|v| !v.is_empty()) {
            h.settings.entry(k.to_string()).or_default().insert(v);
        }
    };
    set("event", old.event.clone());
    set(
        "frequency",
        old.frequency.as_ref().map(|f| format!("{f} Hz")),
    );
    set("call graph", old.call_graph.clone());
    set(
        "threads per shard",
        old.threads_per_shard.map(|n| n.to_string()),
    );
    set("shards", old.shard_count.map(|n| n.to_string()));
    set("sample loss", old.sample_loss.clone());
    set("worker exe", old.worker_exe.clone());
    set("recorder", Some("old shell pipeline".into()));
    if let Some(host) = &old.hostname {
        h.hosts.insert(host.clone());
    }
}

/// A capture's on/off/wall columns on the job page, from the `off_cpu`
/// section of its `summary.json`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct OffCpuCells {
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
pub fn offcpu_cells(
    summary: &SummaryFields,
    rel: impl Fn(&str) -> Option<String>,
) -> Option<OffCpuCells> {
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
    Some(OffCpuCells {
        on_cpu_share: share(on),
        off_cpu_share: share(off),
        runnable_share: share(ns(t.runnable_ns)),
        offcpu: rel("offcpu.html").or_else(|| rel("offcpu.svg")),
        wallclock: rel("wallclock.html").or_else(|| rel("wallclock.svg")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn old_summaries_leave_dashes() {
        let s = SummaryFields::parse(r#"{"samples": 7, "top_self": [{"name": "f"}]}"#).unwrap();
        let mut r = Row {
            capture: "worker_0/q".into(),
            worker: Some(0),
            query: "q".into(),
            base: "q".into(),
            replicate: 1,
            state: State::Processed,
            reason: None,
            host: None,
            samples: None,
            period_total: None,
            event: None,
            window_seconds: None,
            symbolized_share: None,
            truncated_share: None,
            top_self: vec![],
            flamegraph: None,
            folded: None,
            completed: None,
            off_cpu: None,
            nsys: None,
        };
        read_summary(&s, &mut r);
        assert_eq!(r.samples, Some(7));
        assert_eq!(r.symbolized_share, None);
        assert_eq!(r.truncated_share, None);
        assert_eq!(r.top_self[0].name, "f");
    }
}
