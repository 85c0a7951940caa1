//! `manifest.json`: its format, how it is built from the last poll (a
//! report that vanished makes its rank missing), and whether another
//! collector's manifest can be adopted (complete, and still true of the
//! files).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime};

use serde::{Deserialize, Serialize};

use super::rescue::RESCUED_DIR;
use super::scan::{open_report, scan, Baseline};
use super::settle::{Current, Polled};
use super::status::{OverallStatus, ReportStatus, Source};
use super::{CollectOptions, Collection, Result};
use crate::nsys::{Error, Log, ReportName};
use crate::sys::atomic::Destination;
use crate::sys::units::{format_duration, format_utc};

/// Manifest file name (in the report root) unless `--manifest` says otherwise.
pub const MANIFEST_FILE: &str = "manifest.json";

/// One report, or one expected rank without a report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReportEntry {
    /// Job ID parsed from the name (`null` when the name does not match).
    pub job: Option<String>,
    /// Node parsed from the name.
    pub node: Option<String>,
    /// Rank parsed from the name (or the missing rank).
    pub rank: Option<u32>,
    /// Path relative to the report root (`null` for a missing rank).
    pub path: Option<PathBuf>,
    /// Direct or rescued.
    pub source: Option<Source>,
    /// For rescued reports: the runtime-workspace file it was copied from.
    pub origin: Option<PathBuf>,
    /// Size in bytes.
    pub bytes: u64,
    /// Modification time, RFC 3339 UTC.
    pub mtime: Option<String>,
    /// Modification time in nanoseconds since the epoch (exact comparisons).
    pub mtime_unix_ns: Option<i64>,
    /// SHA-256 of the content, lowercase hex.
    pub sha256: Option<String>,
    /// ok, empty, incomplete or missing.
    pub status: ReportStatus,
}

/// `manifest.json`: what was collected and how it ended.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Manifest {
    /// Format version of this file.
    pub version: u32,
    /// complete, timeout, empty or missing-ranks.
    pub status: OverallStatus,
    /// The report root (absolute).
    pub report_root: PathBuf,
    /// Runtime workspaces searched.
    pub runtime_dirs: Vec<PathBuf>,
    /// `--expect-ranks`.
    pub expect_ranks: Option<u32>,
    /// Ranks without a report.
    pub missing_ranks: Vec<u32>,
    /// Number of reports with a file.
    pub report_count: usize,
    /// Sum of report sizes.
    pub total_bytes: u64,
    /// Settle window in seconds.
    pub settle_s: f64,
    /// Timeout in seconds.
    pub timeout_s: f64,
    /// Poll interval in seconds.
    pub poll_s: f64,
    /// Whether pre-existing reports were ignored.
    pub since_baseline: bool,
    /// How many pre-existing, unchanged reports under the report root were
    /// ignored at the last poll.
    pub baseline_ignored: usize,
    /// When the collector started (RFC 3339 UTC).
    pub started_at: String,
    /// When it finished.
    pub finished_at: String,
    /// Wall time in seconds, including any wait for the lock.
    pub elapsed_s: f64,
    /// The archive, relative to the report root, when one was written.
    pub archive: Option<PathBuf>,
    /// True when the last scan of the report tree did not finish before the
    /// timeout (the reports are those of the last whole poll, if any).
    #[serde(default)]
    pub scan_incomplete: bool,
    /// One entry per report and per missing rank, by rank then path.
    pub reports: Vec<ReportEntry>,
}

fn rfc3339_ns(ns: i64) -> String {
    format_utc(u64::try_from(ns / 1_000_000_000).unwrap_or(0))
}

/// The manifest of what the polls found (its finish time, hashes and
/// archive are filled in by [`super::archive::hash_and_archive`]).
pub(super) fn new_manifest(
    opts: &CollectOptions,
    polled: &Polled,
    since_baseline: bool,
    started_at: String,
    log: &Log,
) -> Manifest {
    let (entries, status, missing) = report_entries(opts, polled, log);
    let report_root = fs::canonicalize(&opts.report_root).unwrap_or(opts.report_root.clone());
    Manifest {
        version: 1,
        status,
        report_root,
        runtime_dirs: opts.runtime_dirs.clone(),
        expect_ranks: opts.expect_ranks,
        missing_ranks: missing,
        report_count: polled.reports.len(),
        total_bytes: polled.reports.iter().map(|r| r.found.stamp.bytes).sum(),
        settle_s: opts.settle.as_secs_f64(),
        timeout_s: opts.timeout.as_secs_f64(),
        poll_s: opts.poll.as_secs_f64(),
        since_baseline,
        baseline_ignored: polled.ignored,
        started_at,
        finished_at: String::new(),
        elapsed_s: 0.0,
        archive: None,
        scan_incomplete: polled.cut,
        reports: entries,
    }
}

/// The manifest's report entries (sorted by rank, unranked last), with the
/// final status and missing ranks: a report that vanished makes its rank
/// missing.
pub(super) fn report_entries(
    opts: &CollectOptions,
    polled: &Polled,
    log: &Log,
) -> (Vec<ReportEntry>, OverallStatus, Vec<u32>) {
    let mut status = polled.status;
    let mut missing = polled.missing.clone();
    let now = Instant::now();
    let mut entries: Vec<ReportEntry> = polled
        .reports
        .iter()
        .map(|r| ReportEntry {
            job: r.name.job.clone(),
            node: r.name.node.clone(),
            rank: r.name.rank,
            path: Some(r.found.rel.clone()),
            source: Some(r.source),
            origin: r.origin.clone(),
            bytes: r.found.stamp.bytes,
            mtime: Some(rfc3339_ns(r.found.stamp.mtime_ns)),
            mtime_unix_ns: Some(r.found.stamp.mtime_ns),
            sha256: None,
            status: if r.found.stamp.bytes == 0 {
                ReportStatus::Empty
            } else if status != OverallStatus::Complete && r.recently_changed(now, opts.settle) {
                ReportStatus::Incomplete
            } else {
                ReportStatus::Ok
            },
        })
        .collect();
    let vanished = vanished_reports(&polled.ever, &polled.reports, log);
    let vanished_ranks: Vec<u32> = vanished
        .iter()
        .filter_map(|e| e.rank)
        .filter(|r| !missing.contains(r))
        .collect();
    entries.extend(vanished);
    entries.extend(missing.iter().map(|&rank| ReportEntry {
        job: None,
        node: None,
        rank: Some(rank),
        path: None,
        source: None,
        origin: None,
        bytes: 0,
        mtime: None,
        mtime_unix_ns: None,
        sha256: None,
        status: ReportStatus::Missing,
    }));
    // A vanished report's rank is missing (its entry is the vanished one).
    if !vanished_ranks.is_empty() {
        if status == OverallStatus::Complete {
            status = OverallStatus::MissingRanks;
        }
        missing.extend(vanished_ranks);
        missing.sort_unstable();
        missing.dedup();
    }
    entries.sort_by(|a, b| {
        (a.rank.is_none(), a.rank, &a.path).cmp(&(b.rank.is_none(), b.rank, &b.path))
    });
    (entries, status, missing)
}

/// Reports seen at an earlier poll and gone at the last one: `missing`
/// entries (with the path and size last seen), each with a warning.
fn vanished_reports(
    ever: &BTreeMap<PathBuf, (PathBuf, ReportName, u64)>,
    reports: &[Current],
    log: &Log,
) -> Vec<ReportEntry> {
    let now: BTreeSet<&PathBuf> = reports.iter().map(|r| &r.found.path).collect();
    ever.iter()
        .filter(|(path, _)| !now.contains(path))
        .map(|(path, (rel, name, bytes))| {
            log.line(format!(
                "warning: {} ({bytes} bytes) vanished during collection; recorded as missing",
                path.display()
            ));
            ReportEntry {
                job: name.job.clone(),
                node: name.node.clone(),
                rank: name.rank,
                path: Some(rel.clone()),
                source: None,
                origin: None,
                bytes: *bytes,
                mtime: None,
                mtime_unix_ns: None,
                sha256: None,
                status: ReportStatus::Missing,
            }
        })
        .collect()
}

pub(super) fn manifest_json(m: &Manifest) -> Result<Vec<u8>> {
    let mut json = serde_json::to_vec_pretty(m)
        .map_err(|e| Error::Usage(format!("cannot serialize the manifest: {e}")))?;
    json.push(b'\n');
    Ok(json)
}

/// Writes the manifest to `path` (confined, atomically) and logs it with
/// its outcome and the time since `start`.
pub(super) fn write(manifest: &Manifest, path: &Path, start: Instant, log: &Log) -> Result<()> {
    let json = manifest_json(manifest)?;
    crate::sys::atomic::write_with(path, Destination::Confined, true, &json)?;
    log.line(format!(
        "wrote {} ({}, {} report(s), {} bytes, {})",
        path.display(),
        serde_json::to_value(manifest.status)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default(),
        manifest.report_count,
        manifest.total_bytes,
        format_duration(start.elapsed())
    ));
    Ok(())
}

/// After waiting for another collector: its manifest, if it was written
/// while we waited, is complete, covers our expected ranks, and every file
/// it lists is unchanged with no new report since.
pub(super) fn adopt(
    opts: &CollectOptions,
    baseline: Option<&Baseline>,
    manifest_path: &Path,
    started: SystemTime,
) -> Result<Option<Collection>> {
    let Ok(meta) = fs::metadata(manifest_path) else {
        return Ok(None);
    };
    if meta.modified().map_or(true, |m| m < started) {
        return Ok(None);
    }
    let Ok(bytes) = fs::read(manifest_path) else {
        return Ok(None);
    };
    let Ok(manifest) = serde_json::from_slice::<Manifest>(&bytes) else {
        return Ok(None);
    };
    if manifest.status != OverallStatus::Complete || (opts.archive && manifest.archive.is_none()) {
        return Ok(None);
    }
    let listed: HashMap<PathBuf, &ReportEntry> = manifest
        .reports
        .iter()
        .filter_map(|r| r.path.clone().map(|p| (p, r)))
        .collect();
    let ranks: BTreeSet<u32> = manifest.reports.iter().filter_map(|r| r.rank).collect();
    if (0..opts.expect_ranks.unwrap_or(0)).any(|r| !ranks.contains(&r)) {
        return Ok(None);
    }
    let deadline = Some(Instant::now() + opts.timeout);
    let (found, cut) = scan(&opts.report_root, &opts.runtime_dirs, deadline)?;
    if cut {
        return Ok(None);
    }
    for f in found {
        match listed.get(&f.rel) {
            Some(e) if e.bytes == f.stamp.bytes && e.mtime_unix_ns == Some(f.stamp.mtime_ns) => {}
            Some(_) => return Ok(None),
            None if baseline.is_some_and(|b| b.ignores(&f.path, f.stamp)) => {}
            None => return Ok(None),
        }
    }
    // Every listed file must still be there.
    for rel in listed.keys() {
        if open_report(&opts.report_root, rel).is_err() {
            return Ok(None);
        }
    }
    // Runtime-workspace reports must already be rescued at their size.
    for dir in &opts.runtime_dirs {
        if !dir.is_dir() {
            continue;
        }
        let (found, cut) = scan(dir, &[], deadline)?;
        if cut {
            return Ok(None);
        }
        for f in found {
            let rel = Path::new(RESCUED_DIR).join(&f.rel);
            match listed.get(&rel) {
                Some(e) if e.bytes == f.stamp.bytes => {}
                _ if baseline.is_some_and(|b| b.ignores(&f.path, f.stamp)) => {}
                _ => return Ok(None),
            }
        }
    }
    let archive_path = manifest.archive.as_ref().map(|a| opts.report_root.join(a));
    Ok(Some(Collection {
        manifest,
        manifest_path: manifest_path.to_path_buf(),
        archive_path,
        adopted: true,
    }))
}
