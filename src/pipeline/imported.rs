//! Profiles whose stacks another tool recorded and jobprof only reads (an
//! Nsight Systems report, read by the binary through `nsys::export`): the
//! same outputs as a perf capture's, from folded stacks and tables.
//!
//! Into its output directory (`jobprof/` beside the report), each file
//! atomically: the CPU stacks in the formats asked for (`stacks.folded`,
//! `flamegraph.svg`, `flamegraph.html`, ...), the waits as the off-CPU
//! view's `offcpu.*` (ns, its `io` colours), one `NAME.tsv` per table
//! (`name count total_ns median_ns`, biggest total first), `report.txt`
//! (the functions by self samples, then every table) and `summary.json`
//! last, so a run killed half-way is done again by the next one. A report
//! cut into windows (`--slice-by`) has one such directory per window
//! under `slices/`, each a query's profile, written before the whole's.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use serde::Serialize;

use super::{output_name, Options};
use crate::capture::SUMMARY;
use crate::error::{Error, Result};
use crate::output::render::{self, RenderOptions};
use crate::output::report;
use crate::output::summary::{FunctionShare, StackStats};
use crate::sys::atomic::AtomicFile;
use crate::sys::confined::Dir;

/// One row of a table: a name's durations.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Row {
    /// The name (an OS runtime function, an NVTX range, a kernel).
    pub name: String,
    /// How many.
    pub count: u64,
    /// Their total, ns.
    pub total_ns: u64,
    /// Their median, ns.
    pub median_ns: u64,
}

/// A table and the file it goes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Table {
    /// The file's stem (`nvtx` -> `nvtx.tsv`).
    pub stem: String,
    /// Its title in `report.txt`.
    pub title: String,
    /// The rows, biggest total first.
    pub rows: Vec<Row>,
}

/// The directory of a report's windows (`--slice-by`), in its output
/// directory: one directory per window below it.
pub const SLICES_DIR: &str = jobprof_capture_format::nsys::NSYS_SLICES_DIR;

/// The header of every table file.
pub const TSV_HEADER: &str = "name\tcount\ttotal_ns\tmedian_ns\n";

/// A table as TSV, control characters in names escaped as in every
/// output (`crate::sys::printable`: a tab is `\t`, a newline `\n`), so a
/// name never adds a column or a row.
pub fn tsv(rows: &[Row]) -> String {
    let mut s = String::from(TSV_HEADER);
    for r in rows {
        let name = crate::sys::printable::printable_text(&r.name);
        s.push_str(&format!(
            "{name}\t{}\t{}\t{}\n",
            r.count, r.total_ns, r.median_ns
        ));
    }
    s
}

/// One imported profile to write.
#[derive(Debug, Clone, Default)]
pub struct Imported {
    /// Where the outputs go (for messages: [`write`] is handed the
    /// directory open).
    pub dir: PathBuf,
    /// Worker index.
    pub worker: Option<u32>,
    /// Query id (the report's name for a lone report).
    pub query: String,
    /// Slurm job id, when known.
    pub job_id: Option<String>,
    /// The tool that recorded it (`nsys`).
    pub source: String,
    /// Which version of it wrote what was read (`nsys 2022.4.2.1, schema 3.0.0`).
    pub read: String,
    /// The input read (the report), for `summary.json`.
    pub input: PathBuf,
    /// How the input was read (`the .sqlite beside it`, `nsys export`).
    pub read_through: String,
    /// CPU samples per folded stack.
    pub cpu: Vec<(String, u64)>,
    /// Wait ns per folded stack (empty: none traced).
    pub waits: Vec<(String, u64)>,
    /// The tables.
    pub tables: Vec<Table>,
    /// What the reader's limits cut, counted by what (`deep_chains`:
    /// chains cut at the depth limit, ...); empty when nothing was cut.
    pub cut: BTreeMap<String, u64>,
    /// The window of the report this profile is (`--slice-by`), if one.
    pub slice: Option<SliceOf>,
    /// The windows written beside it (`slices/NAME`), for a whole report
    /// cut by `--slice-by`.
    pub slices: Vec<String>,
}

/// Which window of a report a sliced profile is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SliceOf {
    /// The `--slice-by` spec that cut it.
    pub by: String,
    /// The NVTX range (`domain:text`).
    pub range: String,
    /// Its start, ns on the report's clock.
    pub start_ns: i64,
    /// Its end (the first ns past it).
    pub end_ns: i64,
}

/// A table's figures in `summary.json`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TableSummary {
    /// The file.
    pub file: String,
    /// Rows.
    pub names: usize,
    /// Sum of counts.
    pub count: u64,
    /// Sum of totals, ns.
    pub total_ns: u64,
    /// The first rows (at most 10).
    pub top: Vec<Row>,
}

/// `summary.json` of an imported profile.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ImportedSummary {
    /// `jobprof`.
    pub tool: String,
    /// jobprof's version.
    pub tool_version: String,
    /// When written (UTC).
    pub created: String,
    /// `worker_N/Q`, or the query alone.
    pub capture: String,
    /// Worker index.
    pub worker: Option<u32>,
    /// Query id.
    pub query: String,
    /// Slurm job id.
    pub job_id: Option<String>,
    /// The tool that recorded it (`nsys`).
    pub source: String,
    /// Which version of it wrote what was read.
    pub read: String,
    /// The input.
    pub input: String,
    /// How it was read.
    pub read_through: String,
    /// CPU samples (the folded file's total).
    pub samples: u64,
    /// Distinct CPU stacks.
    pub unique_stacks: u64,
    /// Share of the samples whose leaf frame is named (0..1).
    pub symbolized_ratio: f64,
    /// Share of frames without a name (0..1).
    pub unknown_frame_ratio: f64,
    /// Top functions by self samples.
    pub top_self: Vec<FunctionShare>,
    /// Top functions by total samples.
    pub top_total: Vec<FunctionShare>,
    /// Sum of the waits, ns.
    pub wait_ns: u64,
    /// The tables.
    pub tables: Vec<TableSummary>,
    /// Files written besides this one.
    pub outputs: Vec<String>,
    /// What the reader's limits cut, counted by what (as in [`Imported`]).
    pub cut: BTreeMap<String, u64>,
    /// The window this is, for a slice of a report.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slice: Option<SliceOf>,
    /// The slices written beside it (`slices/NAME`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub slices: Vec<String>,
    /// What went wrong without stopping it.
    pub warnings: Vec<String>,
    /// Seconds spent writing.
    pub seconds: f64,
}

impl Imported {
    /// `worker_N/Q`, or `Q`.
    fn capture(&self) -> String {
        match self.worker {
            Some(w) => format!("worker_{w}/{}", self.query),
            None => self.query.clone(),
        }
    }

    fn render_options(&self) -> RenderOptions {
        let worker = self.worker.map(|w| w.to_string());
        RenderOptions {
            title: render::capture_title(
                self.job_id.as_deref(),
                worker.as_deref(),
                Some(&self.query),
            ),
            subtitle: Some(format!(
                "{} CPU samples · {}",
                render::total(&self.cpu),
                self.read
            )),
            ..RenderOptions::default()
        }
    }
}

/// Writes every output of `p` into `dir` (its output directory, open: each
/// file is created and renamed relative to it, never through a link) as
/// `opts.formats` asks; returns its summary.
pub fn write(p: &Imported, dir: &Dir, opts: &Options) -> Result<ImportedSummary> {
    let started = Instant::now();
    let mut outputs = Vec::new();
    let mut warnings = Vec::new();
    let o = p.render_options();
    for &format in &opts.formats.render {
        let name = output_name(format).to_string();
        if p.cpu.is_empty() {
            warnings.push(format!("{name}: no CPU sample in the report (not drawn)"));
            continue;
        }
        write_file(dir, &name, |w| {
            render::render(format, &p.cpu, &o, w).map_err(Error::from)
        })?;
        outputs.push(name);
    }
    write_waits(p, dir, opts, &o, &mut outputs)?;
    for t in &p.tables {
        let name = format!("{}.tsv", t.stem);
        write_file(dir, &name, |w| {
            w.write_all(tsv(&t.rows).as_bytes())
                .map_err(|e| Error::io(dir.join(&name), e))
        })?;
        outputs.push(name);
    }
    if opts.formats.report {
        write_report(p, dir)?;
        outputs.push(report::REPORT_TXT.to_string());
    }
    let summary = summarize(p, outputs, warnings, started);
    if opts.formats.summary {
        let mut s = serde_json::to_string_pretty(&summary).expect("a summary serializes");
        s.push('\n');
        write_file(dir, SUMMARY, |w| {
            w.write_all(s.as_bytes())
                .map_err(|e| Error::io(dir.join(SUMMARY), e))
        })?;
    }
    Ok(summary)
}

/// The waits as the off-CPU view draws them: `offcpu.*`, ns, `io` colours.
fn write_waits(
    p: &Imported,
    dir: &Dir,
    opts: &Options,
    base: &RenderOptions,
    outputs: &mut Vec<String>,
) -> Result<()> {
    if p.waits.is_empty() {
        return Ok(());
    }
    let mut o = RenderOptions {
        title: format!("{} · waits (OS runtime calls)", base.title),
        subtitle: Some(format!(
            "OS runtime ns · {:.1} ms in calls · {}",
            render::total(&p.waits) as f64 / 1e6,
            p.read
        )),
        count_name: "ns".into(),
        ..base.clone()
    };
    o.colors = RenderOptions::parse_palette("io")?;
    for &format in &opts.formats.render {
        let name = format!("offcpu.{}", format.extension());
        write_file(dir, &name, |w| {
            render::render(format, &p.waits, &o, w).map_err(Error::from)
        })?;
        outputs.push(name);
    }
    Ok(())
}

/// `report.txt`: the CPU functions by self samples, then every table.
fn write_report(p: &Imported, dir: &Dir) -> Result<()> {
    let mut profile = report::read::folded_stacks(&p.cpu, &p.read);
    // nsys's CPU stacks count samples, one each.
    profile.count_name = Some("samples".into());
    let mut ropts = report::Options::default();
    for t in &p.tables {
        let mut lines = vec![format!(
            "{:>14} {:>8} {:>14}  name",
            "total ms", "count", "median ms"
        )];
        lines.extend(t.rows.iter().take(30).map(|r| {
            format!(
                "{:>14.3} {:>8} {:>14.3}  {}",
                r.total_ns as f64 / 1e6,
                r.count,
                r.median_ns as f64 / 1e6,
                r.name
            )
        }));
        ropts.sections.push(report::Section {
            title: format!("{} ({}.tsv)", t.title, t.stem),
            lines,
        });
    }
    let name = report::REPORT_TXT;
    write_file(dir, name, |w| {
        report::write(&profile, &ropts, w).map_err(|e| Error::io(dir.join(name), e))
    })
}

fn summarize(
    p: &Imported,
    outputs: Vec<String>,
    warnings: Vec<String>,
    started: Instant,
) -> ImportedSummary {
    let stats = StackStats::from_stacks(&p.cpu);
    let tables = p
        .tables
        .iter()
        .map(|t| TableSummary {
            file: format!("{}.tsv", t.stem),
            names: t.rows.len(),
            count: t.rows.iter().map(|r| r.count).sum(),
            total_ns: t
                .rows
                .iter()
                .fold(0u64, |a, r| a.saturating_add(r.total_ns)),
            top: t.rows.iter().take(10).cloned().collect(),
        })
        .collect();
    ImportedSummary {
        tool: "jobprof".into(),
        tool_version: env!("CARGO_PKG_VERSION").into(),
        created: crate::sys::units::utc_timestamp(),
        capture: p.capture(),
        worker: p.worker,
        query: p.query.clone(),
        job_id: p.job_id.clone(),
        source: p.source.clone(),
        read: p.read.clone(),
        input: p.input.display().to_string(),
        read_through: p.read_through.clone(),
        samples: stats.period_total,
        unique_stacks: p.cpu.len() as u64,
        symbolized_ratio: stats.symbolized_ratio,
        unknown_frame_ratio: stats.unknown_frame_ratio,
        top_self: stats.top_self,
        top_total: stats.top_total,
        wait_ns: render::total(&p.waits),
        tables,
        outputs,
        cut: p.cut.clone(),
        slice: p.slice.clone(),
        slices: p.slices.clone(),
        warnings,
        seconds: started.elapsed().as_secs_f64(),
    }
}

/// Writes `dir/name` atomically with `f`.
fn write_file(dir: &Dir, name: &str, f: impl FnOnce(&mut AtomicFile) -> Result<()>) -> Result<()> {
    let mut out = AtomicFile::create_in(dir, name, false)?;
    f(&mut out)?;
    out.flush().map_err(|e| Error::io(dir.join(name), e))?;
    out.commit()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_imported_profile_gets_the_captures_outputs_and_its_tables() {
        let t = tempfile::tempdir().unwrap();
        let p = Imported {
            dir: t.path().join("jobprof"),
            worker: Some(0),
            query: "q1".into(),
            source: "nsys".into(),
            read: "nsys 2022.4.2.1, schema 3.0.0".into(),
            cpu: vec![("w;main;spin".into(), 3), ("w;main;[libc.so.6]".into(), 1)],
            waits: vec![("w;main;usleep".into(), 2_000_000)],
            tables: vec![Table {
                stem: "nvtx".into(),
                title: "NVTX ranges".into(),
                rows: vec![Row {
                    name: "outer\trange".into(),
                    count: 2,
                    total_ns: 30,
                    median_ns: 15,
                }],
            }],
            ..Imported::default()
        };
        std::fs::create_dir(&p.dir).unwrap();
        let s = write(&p, &Dir::open(&p.dir).unwrap(), &Options::default()).unwrap();
        assert_eq!(s.samples, 4);
        assert_eq!(s.wait_ns, 2_000_000);
        let read = |n: &str| std::fs::read_to_string(p.dir.join(n)).unwrap();
        assert_eq!(
            read("stacks.folded"),
            "w;main;[libc.so.6] 1\nw;main;spin 3\n"
        );
        assert_eq!(read("offcpu.folded"), "w;main;usleep 2000000\n");
        assert_eq!(
            read("nvtx.tsv"),
            format!("{TSV_HEADER}outer\\trange\t2\t30\t15\n")
        );
        assert!(read("report.txt").contains("NVTX ranges (nvtx.tsv)"));
        // Issue 58, item 8: the CPU samples are counted, not "not known".
        let report = read("report.txt");
        assert!(report.contains("# Samples: 4\n"), "{report}");
        assert!(!report.contains("not known"), "{report}");
        assert!(read("flamegraph.html").contains("spin"));
        let json: serde_json::Value = serde_json::from_str(&read("summary.json")).unwrap();
        assert_eq!(json["read"], "nsys 2022.4.2.1, schema 3.0.0");
        assert_eq!(json["capture"], "worker_0/q1");
    }
}
