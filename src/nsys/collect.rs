//! Waiting for `.nsys-rep` reports to settle, rescuing them from runtime
//! workspaces, and writing the manifest (and optional archive).
//!
//! A report is only complete once its writer stopped: nsys writes nothing
//! until its session ends and then writes for minutes, so a report can exist
//! at 0 bytes, grow in bursts, and pause longer than any poll interval.
//! Settling is therefore decided on bytes and modification times over a
//! settle window, never on file counts. Collectors on one report root are
//! serialized by an exclusive `flock` on `DIR/.jobprof-nsys.lock`; a collector
//! that had to wait adopts the result of the one it waited for when that
//! result is complete and still true.
//!
//! This module never deletes, truncates or rewrites a report: it stats,
//! copies (runtime workspace -> `DIR/rescued/`), hashes and archives them.
//! It does not start or stop profiling sessions (see [`mod@super::flush`]).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs::{self, File};
use std::io::{self, Read};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::duration::format_duration;
use super::{compact_ranks, Error, Log, ReportName};
use crate::sys::atomic::{AtomicFile, Destination};
use crate::sys::digest::Sha256Reader;
use crate::sys::progress::{format_utc, Progress};

/// Name of the lock file collectors take in the report root.
pub const LOCK_FILE: &str = ".jobprof-nsys.lock";
/// Directory (under the report root) that rescued copies go to.
pub const RESCUED_DIR: &str = "rescued";
/// Archive file name (in the report root) written with `--archive`.
pub const ARCHIVE_FILE: &str = "reports.tar.zst";
/// Manifest file name (in the report root) unless `--manifest` says otherwise.
pub const MANIFEST_FILE: &str = "manifest.json";

type Result<T, E = Error> = std::result::Result<T, E>;

/// What `collect` does and how long it waits.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct CollectOptions {
    /// The shared report root (`DIR`); must exist.
    pub report_root: PathBuf,
    /// Per-rank runtime workspaces to rescue reports from.
    pub runtime_dirs: Vec<PathBuf>,
    /// Ranks 0..N-1 must each have a report.
    pub expect_ranks: Option<u32>,
    /// How long nothing may change before reports count as settled.
    pub settle: Duration,
    /// Overall limit, including any wait for another collector's lock.
    pub timeout: Duration,
    /// Time between polls.
    pub poll: Duration,
    /// Ignore reports that existed (unchanged) when the collector started.
    pub since_baseline: bool,
    /// Also write `reports.tar.zst` into the report root.
    pub archive: bool,
    /// Manifest path; `None` means `DIR/manifest.json`.
    pub manifest: Option<PathBuf>,
}

impl CollectOptions {
    /// Options with the documented defaults (settle 60s, timeout 600s, poll 5s).
    pub fn new(report_root: impl Into<PathBuf>) -> Self {
        CollectOptions {
            report_root: report_root.into(),
            runtime_dirs: Vec::new(),
            expect_ranks: None,
            settle: Duration::from_secs(60),
            timeout: Duration::from_secs(600),
            poll: Duration::from_secs(5),
            since_baseline: false,
            archive: false,
            manifest: None,
        }
    }

    /// Where the manifest is written.
    pub fn manifest_path(&self) -> PathBuf {
        self.manifest
            .clone()
            .unwrap_or_else(|| self.report_root.join(MANIFEST_FILE))
    }

    fn validate(&self) -> Result<()> {
        if self.poll.is_zero() {
            return Err(Error::Usage(
                "--poll must be longer than 0 (e.g. 5s): it is the time between two looks at the reports".into(),
            ));
        }
        if self.settle.is_zero() {
            return Err(Error::Usage(
                "--settle must be longer than 0 (e.g. 60s): reports only count as written \
                 once their sizes and mtimes stayed the same for this long"
                    .into(),
            ));
        }
        if self.expect_ranks == Some(0) {
            return Err(Error::Usage(
                "--expect-ranks must be at least 1 (the number of ranks, 0..N-1)".into(),
            ));
        }
        if let Ok(root) = fs::canonicalize(&self.report_root) {
            for dir in &self.runtime_dirs {
                if fs::canonicalize(dir).is_ok_and(|d| root.starts_with(&d)) {
                    return Err(Error::Usage(format!(
                        "--runtime-dir {} contains the report root {}: rescued copies would be \
                         rescued again; give the per-rank workspace directories themselves",
                        dir.display(),
                        self.report_root.display()
                    )));
                }
            }
        }
        match fs::metadata(&self.report_root) {
            Ok(m) if m.is_dir() => Ok(()),
            Ok(_) => Err(Error::Usage(format!(
                "--report-root {}: not a directory",
                self.report_root.display()
            ))),
            Err(e) => Err(Error::Usage(format!(
                "--report-root {}: {e}; create it (it is the shared directory the ranks write reports to)",
                self.report_root.display()
            ))),
        }
    }
}

/// Size and modification time of a file: what settling compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    bytes: u64,
    mtime_ns: i64,
}

impl Stamp {
    #[cfg(test)]
    fn of(m: &fs::Metadata) -> Stamp {
        Stamp {
            bytes: m.len(),
            mtime_ns: m.mtime().saturating_mul(1_000_000_000) + m.mtime_nsec(),
        }
    }
}

/// The reports that existed when a collector (or flush) started: they are
/// ignored while they stay unchanged.
#[derive(Debug, Clone, Default)]
pub struct Baseline {
    files: HashMap<PathBuf, Stamp>,
    keep_job: Option<String>,
}

impl Baseline {
    /// Records every report under the report root and the runtime dirs.
    pub fn take(opts: &CollectOptions) -> Result<Baseline> {
        let mut files = HashMap::new();
        let deadline = Instant::now() + opts.timeout;
        let mut roots = vec![(&opts.report_root, opts.runtime_dirs.as_slice())];
        roots.extend(opts.runtime_dirs.iter().map(|d| (d, &[][..])));
        for (root, skip) in roots {
            let (found, cut) = scan(root, skip, Some(deadline))?;
            if cut {
                return Err(Error::Usage(format!(
                    "{}: listing the reports that already exist (the baseline) took longer \
                     than --timeout {}; give a report root holding fewer files, or a longer \
                     --timeout",
                    root.display(),
                    format_duration(opts.timeout)
                )));
            }
            for f in found {
                files.insert(f.path, f.stamp);
            }
        }
        Ok(Baseline {
            files,
            keep_job: None,
        })
    }

    /// Never ignores reports whose name carries this job ID (a flush is for
    /// exactly those, and stopping the sessions may already have written some).
    pub fn keep_job(mut self, job: &str) -> Baseline {
        self.keep_job = Some(job.to_string());
        self
    }

    /// How many reports the baseline holds.
    pub fn len(&self) -> usize {
        self.files.len()
    }

    /// True when no report existed.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    fn ignores(&self, path: &Path, stamp: Stamp) -> bool {
        if self.files.get(path) != Some(&stamp) {
            return false;
        }
        match (&self.keep_job, path.file_name()) {
            (Some(job), Some(name)) => {
                ReportName::parse(&name.to_string_lossy()).job.as_deref() != Some(job)
            }
            _ => true,
        }
    }
}

/// Where a collected report came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// Written by the rank straight into the report root.
    Direct,
    /// Copied out of a runtime workspace into `DIR/rescued/`.
    Rescued,
}

/// The state of one report (or expected rank) in the manifest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReportStatus {
    /// Non-empty and unchanged for the whole settle window.
    Ok,
    /// 0 bytes.
    Empty,
    /// Its size or mtime changed within the last settle window.
    Incomplete,
    /// An expected rank without any report.
    Missing,
}

/// The overall outcome of a collection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OverallStatus {
    /// Settled and complete: exit 0.
    Complete,
    /// Reports were still changing at the timeout: exit 3.
    Timeout,
    /// Some reports stayed empty: exit 4.
    Empty,
    /// Expected ranks (or any report at all) never appeared: exit 5.
    MissingRanks,
}

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

/// The result of [`fn@collect`]: the manifest as written and where.
#[derive(Debug, Clone)]
pub struct Collection {
    /// The manifest written.
    pub manifest: Manifest,
    /// Where it was written.
    pub manifest_path: PathBuf,
    /// The archive, when written.
    pub archive_path: Option<PathBuf>,
    /// True when this collector waited for another one and adopted its
    /// (complete, still valid) result instead of collecting again.
    pub adopted: bool,
}

impl Collection {
    /// `Ok` only when the reports settled and are complete; otherwise the
    /// error that names what is wrong and maps to exit code 3, 4 or 5.
    pub fn check(&self) -> Result<()> {
        let m = &self.manifest;
        let waited = Duration::from_secs_f64(m.elapsed_s);
        let named = |status: ReportStatus| -> Vec<String> {
            m.reports
                .iter()
                .filter(|r| r.status == status)
                .filter_map(|r| r.path.as_ref().map(|p| p.display().to_string()))
                .collect()
        };
        match m.status {
            OverallStatus::Complete => Ok(()),
            OverallStatus::MissingRanks => Err(Error::MissingRanks {
                waited,
                ranks: m.missing_ranks.clone(),
                also_empty: named(ReportStatus::Empty),
                report_root: m.report_root.clone(),
                manifest: self.manifest_path.clone(),
            }),
            OverallStatus::Empty => Err(Error::EmptyReports {
                waited,
                empty: named(ReportStatus::Empty),
                manifest: self.manifest_path.clone(),
            }),
            OverallStatus::Timeout => {
                let mut changing = named(ReportStatus::Incomplete);
                if m.scan_incomplete {
                    changing.push(format!(
                        "(the scan of the report tree did not finish within the timeout of {}s; \
                         the manifest lists what the last whole poll found)",
                        m.timeout_s
                    ));
                } else if changing.is_empty() {
                    changing.push(format!(
                        "(none changed in the last {}s, but the settle window of {}s had not \
                         passed since the last change or since waiting began)",
                        m.settle_s, m.settle_s
                    ));
                }
                Err(Error::Timeout {
                    waited,
                    changing,
                    manifest: self.manifest_path.clone(),
                })
            }
        }
    }
}

/// A report file found by a scan.
#[derive(Debug, Clone)]
struct Found {
    path: PathBuf,
    rel: PathBuf,
    stamp: Stamp,
}

/// Finds `*.nsys-rep` files under `root` (recursively, at any depth,
/// following no symbolic link: a linked report or directory is not
/// collected, so a link planted in a report tree cannot make jobprof read,
/// rescue or archive a file elsewhere), skipping the directories in `skip`
/// (recognised by device and inode, see [`mod@super::walk`]). Files that
/// vanish during the walk are left out. The second value is true when
/// `deadline` passed before the walk finished (what it found is returned).
fn scan(root: &Path, skip: &[PathBuf], deadline: Option<Instant>) -> Result<(Vec<Found>, bool)> {
    let skip: Vec<(u64, u64)> = skip
        .iter()
        .filter_map(|d| fs::metadata(d).ok())
        .map(|m| (m.dev(), m.ino()))
        .collect();
    let walked = super::walk::walk(root, &skip, deadline)?;
    let mut out: Vec<Found> = walked
        .hits
        .into_iter()
        .map(|h| Found {
            path: root.join(&h.rel),
            rel: h.rel,
            stamp: Stamp {
                bytes: h.size,
                mtime_ns: h.mtime_ns,
            },
        })
        .collect();
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok((out, walked.cut))
}

/// What one file last looked like and when that last changed.
#[derive(Debug, Clone, Copy)]
struct Seen {
    stamp: Stamp,
    /// `None` while unchanged since the first poll (we never saw it change).
    changed_at: Option<Instant>,
}

/// The collector's memory across polls.
struct Watch {
    seen: BTreeMap<PathBuf, Seen>,
    last_change: Instant,
    /// Rescue destinations already reported as conflicting (logged once).
    warned: BTreeSet<PathBuf>,
    /// Whether a poll happened yet (the first one sees no growth).
    polled: bool,
}

impl Watch {
    fn new(now: Instant) -> Watch {
        Watch {
            seen: BTreeMap::new(),
            last_change: now,
            warned: BTreeSet::new(),
            polled: false,
        }
    }

    /// Records the current stamps; any new, changed or vanished file moves
    /// `last_change` to `now`. Returns the files that changed since the
    /// previous poll (none at the first).
    fn update(&mut self, current: &[(PathBuf, Stamp)], now: Instant) -> BTreeSet<PathBuf> {
        let first = !self.polled;
        self.polled = true;
        let mut changed = BTreeSet::new();
        let mut next = BTreeMap::new();
        for (path, stamp) in current {
            let seen = match self.seen.get(path) {
                Some(s) if s.stamp == *stamp => *s,
                _ => {
                    if !first {
                        changed.insert(path.clone());
                    }
                    self.last_change = now;
                    Seen {
                        stamp: *stamp,
                        changed_at: (!first).then_some(now),
                    }
                }
            };
            next.insert(path.clone(), seen);
        }
        if self.seen.keys().any(|k| !next.contains_key(k)) {
            self.last_change = now;
        }
        self.seen = next;
        changed
    }

    fn changed_at(&self, path: &Path) -> Option<Instant> {
        self.seen.get(path).and_then(|s| s.changed_at)
    }
}

/// One report as evaluated at a poll.
#[derive(Debug, Clone)]
struct Current {
    found: Found,
    name: ReportName,
    source: Source,
    origin: Option<PathBuf>,
    /// When we last saw it (or its origin) change; `None`: not since the first poll.
    changed_at: Option<Instant>,
}

impl Current {
    /// Changed within the last settle window: seen changing by us, or, if
    /// unchanged since the first poll, modified (by its mtime) that recently.
    fn recently_changed(&self, now: Instant, settle: Duration) -> bool {
        match self.changed_at {
            Some(t) => now.duration_since(t) < settle,
            None => {
                let now_ns = (unix_now() * 1e9) as i64;
                let age = now_ns.saturating_sub(self.found.stamp.mtime_ns);
                age < settle.as_nanos() as i64
            }
        }
    }
}

/// Copies new or grown reports from the runtime dirs into `DIR/rescued/`.
/// Returns the map from rescued copy to its origin, and whether a scan was
/// cut by `deadline`.
fn rescue(
    opts: &CollectOptions,
    baseline: Option<&Baseline>,
    watch: &mut Watch,
    sources: &mut Vec<(PathBuf, Stamp)>,
    deadline: Instant,
    log: &Log,
) -> Result<(HashMap<PathBuf, PathBuf>, bool)> {
    let rescued_root = opts.report_root.join(RESCUED_DIR);
    let mut origins: HashMap<PathBuf, PathBuf> = HashMap::new();
    for dir in &opts.runtime_dirs {
        if !dir.is_dir() {
            continue;
        }
        let (found, cut) = scan(dir, &[], Some(deadline))?;
        if cut {
            return Ok((origins, true));
        }
        for f in found {
            if baseline.is_some_and(|b| b.ignores(&f.path, f.stamp)) {
                continue;
            }
            sources.push((f.path.clone(), f.stamp));
            let dest = rescued_root.join(&f.rel);
            if let Some(first) = origins.get(&dest) {
                if watch.warned.insert(dest.clone()) {
                    log.line(format!(
                        "warning: {} and {} both map to {}; keeping the first (give runtime dirs \
                         whose reports have distinct relative paths)",
                        first.display(),
                        f.path.display(),
                        dest.display()
                    ));
                }
                continue;
            }
            origins.insert(dest.clone(), f.path.clone());
            let existing = rescued_size(&opts.report_root, &f.rel);
            match existing {
                Some(len) if len == f.stamp.bytes => continue,
                Some(len) if len > f.stamp.bytes => {
                    if watch.warned.insert(dest.clone()) {
                        log.line(format!(
                            "warning: {} ({} bytes) is smaller than its rescued copy {} ({len} bytes); \
                             keeping the copy (a rescued copy is never shrunk)",
                            f.path.display(),
                            f.stamp.bytes,
                            dest.display()
                        ));
                    }
                    continue;
                }
                _ => {}
            }
            let copied = copy_atomic(dir, &f.rel, &opts.report_root)?;
            log.line(format!(
                "rescued {} ({copied} bytes) -> {}",
                f.path.display(),
                dest.display()
            ));
        }
    }
    Ok((origins, false))
}

/// Opens the report `rel` under `root` for reading, one directory at a
/// time (any depth, no symbolic link, never blocking on a special file).
fn open_report(root: &Path, rel: &Path) -> Result<File> {
    let (dir, name) = super::walk::parent_in(root, rel, false)?;
    Ok(dir.open_read(name)?)
}

/// The size of the rescued copy of the runtime-dir report `rel`, if any.
fn rescued_size(report_root: &Path, rel: &Path) -> Option<u64> {
    let rel = Path::new(RESCUED_DIR).join(rel);
    let (dir, name) = super::walk::parent_in(report_root, &rel, false).ok()?;
    let e = dir.entry(name).ok()??;
    e.is_file().then_some(e.size)
}

/// Copies the report `rel` of the runtime dir `src_root` to
/// `report_root/rescued/rel` through a temporary name beside it (which does
/// not end in `.nsys-rep`, so scans never see a partial copy). Both sides
/// are reached one directory at a time, so a planted symbolic link on the
/// way is refused and no depth is too deep.
fn copy_atomic(src_root: &Path, rel: &Path, report_root: &Path) -> Result<u64> {
    let src = src_root.join(rel);
    let mut input = open_report(src_root, rel)?;
    let dest = Path::new(RESCUED_DIR).join(rel);
    let (dir, name) = super::walk::parent_in(report_root, &dest, true)?;
    let mut out = AtomicFile::create_in(&dir, name, true)?;
    let n = io::copy(&mut input, &mut out).map_err(|e| Error::io(&src, e))?;
    out.commit()?;
    Ok(n)
}

/// The exclusive lock on `DIR/.jobprof-nsys.lock`, released when dropped
/// (or when the process dies: the lock (`flock` on Linux) dies with its
/// descriptor).
struct DirLock {
    _file: File,
}

/// Takes the lock, waiting (polling) until `deadline`. Returns whether it
/// had to wait, or `None` when the deadline passed first.
fn lock(
    root: &Path,
    deadline: Instant,
    poll: Duration,
    log: &Log,
) -> Result<Option<(DirLock, bool)>> {
    let path = root.join(LOCK_FILE);
    let file = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|e| Error::io(&path, e))?;
    let mut waited = false;
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(Some((DirLock { _file: file }, waited))),
            Err(fs::TryLockError::WouldBlock) => {}
            Err(fs::TryLockError::Error(e)) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(fs::TryLockError::Error(e)) => return Err(Error::io(&path, e)),
        }
        if !waited {
            log.line(format!(
                "another collector holds {}; waiting for it to finish",
                path.display()
            ));
            waited = true;
        }
        let now = Instant::now();
        if now >= deadline {
            return Ok(None);
        }
        // Check often enough to notice the release promptly.
        std::thread::sleep(poll.min(Duration::from_millis(200)).min(deadline - now));
    }
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

fn rfc3339_ns(ns: i64) -> String {
    format_utc(u64::try_from(ns / 1_000_000_000).unwrap_or(0))
}

/// Waits for the reports to settle and writes the manifest (and archive).
///
/// `baseline` is the flush's baseline; with `opts.since_baseline` and no
/// baseline given, one is taken now. Returns the collection whatever the
/// outcome (the manifest is written in every case); call
/// [`Collection::check`] for the error that names what is missing.
pub fn collect(
    opts: &CollectOptions,
    baseline: Option<Baseline>,
    progress: &Progress,
) -> Result<Collection> {
    let log = Log::new(progress, opts.timeout, "collecting nsys reports");
    let result = collect_logged(opts, baseline, &log);
    log.finish();
    result
}

/// The manifest of what the polls found (its finish time, hashes and
/// archive are filled in by [`hash_and_archive`]).
fn new_manifest(
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

/// [`fn@collect`] reporting through an existing [`Log`] (the flush's).
pub fn collect_logged(
    opts: &CollectOptions,
    baseline: Option<Baseline>,
    log: &Log,
) -> Result<Collection> {
    opts.validate()?;
    let start = Instant::now();
    let started_wall = SystemTime::now();
    let started_at = format_utc(unix_now() as u64);
    let deadline = start + opts.timeout;
    let baseline = match (baseline, opts.since_baseline) {
        (Some(b), _) => Some(b),
        (None, true) => Some(Baseline::take(opts)?),
        (None, false) => None,
    };
    let manifest_path = opts.manifest_path();

    let Some((_lock, waited)) = lock(&opts.report_root, deadline, opts.poll, log)? else {
        return Err(Error::LockTimeout {
            waited: start.elapsed(),
            lock: opts.report_root.join(LOCK_FILE),
        });
    };
    if waited {
        if let Some(c) = adopt(opts, baseline.as_ref(), &manifest_path, started_wall)? {
            log.line(format!(
                "the collector we waited for finished; its result in {} is complete and still \
                 matches the files, using it",
                manifest_path.display()
            ));
            return Ok(c);
        }
    }
    for dir in &opts.runtime_dirs {
        if !dir.is_dir() {
            log.line(format!(
                "note: runtime dir {} does not exist (yet); it is searched at every poll",
                dir.display()
            ));
        }
    }
    let polled = poll_until_settled(opts, baseline.as_ref(), start, deadline, log)?;
    let mut manifest = new_manifest(opts, &polled, baseline.is_some(), started_at, log);
    let archive_path = opts.archive.then(|| opts.report_root.join(ARCHIVE_FILE));
    log.finish();
    hash_and_archive(opts, &mut manifest, archive_path.as_deref(), start, log)?;
    let json = manifest_json(&manifest)?;
    crate::sys::atomic::write_with(&manifest_path, Destination::Confined, true, &json)?;
    log.line(format!(
        "wrote {} ({}, {} report(s), {} bytes, {})",
        manifest_path.display(),
        serde_json::to_value(manifest.status)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default(),
        manifest.report_count,
        manifest.total_bytes,
        format_duration(start.elapsed())
    ));
    Ok(Collection {
        manifest,
        manifest_path,
        archive_path,
        adopted: false,
    })
}

/// Where the polls ended.
struct Polled {
    /// The reports of the last poll.
    reports: Vec<Current>,
    status: OverallStatus,
    /// Expected ranks without a report at the last poll.
    missing: Vec<u32>,
    /// Reports left out as the baseline's (at the last poll).
    ignored: usize,
    /// Every report seen at any poll: one that vanished is recorded missing.
    ever: BTreeMap<PathBuf, (PathBuf, ReportName, u64)>,
    /// The last scan was cut by the deadline.
    cut: bool,
}

/// Polls every `opts.poll` until the reports have settled (every expected
/// rank present, none empty, none changed for `opts.settle`) or `deadline`
/// passes; logs one line a poll.
fn poll_until_settled(
    opts: &CollectOptions,
    baseline: Option<&Baseline>,
    start: Instant,
    deadline: Instant,
    log: &Log,
) -> Result<Polled> {
    let mut watch = Watch::new(Instant::now());
    let mut poll_no = 0u64;
    let mut ever = BTreeMap::new();
    let mut last_whole: Option<(Vec<Current>, usize)> = None;
    loop {
        poll_no += 1;
        let looked = poll_reports(opts, baseline, &mut watch, deadline, log)?;
        let (changed, now, cut) = (looked.changed, looked.now, looked.cut);
        // A scan cut by the deadline saw only part of the tree: the last
        // whole poll (if any) is what is known, and nothing counts as
        // settled.
        let (reports, ignored) = match (cut, last_whole.take()) {
            (true, Some(whole)) => whole,
            (_, _) => (looked.reports, looked.ignored),
        };
        if cut {
            log.line(format!(
                "the scan of the report tree did not finish before the timeout ({}); \
                 recording what the last whole poll found",
                format_duration(opts.timeout)
            ));
        }
        for r in &reports {
            ever.insert(
                r.found.path.clone(),
                (r.found.rel.clone(), r.name.clone(), r.found.stamp.bytes),
            );
        }
        let present: BTreeSet<u32> = reports.iter().filter_map(|r| r.name.rank).collect();
        let missing: Vec<u32> = (0..opts.expect_ranks.unwrap_or(0))
            .filter(|r| !present.contains(r))
            .collect();
        let empty = reports.iter().filter(|r| r.found.stamp.bytes == 0).count();
        let growing = reports
            .iter()
            .filter(|r| {
                changed.contains(&r.found.path)
                    || r.origin.as_ref().is_some_and(|o| changed.contains(o))
            })
            .count();
        let quiet_for = now.duration_since(watch.last_change);
        let settled = !cut
            && !reports.is_empty()
            && empty == 0
            && missing.is_empty()
            && quiet_for >= opts.settle;
        let seen = PollSeen {
            reports: &reports,
            missing: &missing,
            empty,
            growing,
            quiet_for,
            settled,
        };
        let line = seen.line(
            poll_no,
            opts.settle,
            deadline.saturating_duration_since(now),
        );
        log.tick(start.elapsed());
        log.line(line);

        let status = if settled {
            OverallStatus::Complete
        } else if now < deadline && !cut {
            last_whole = Some((reports, ignored));
            std::thread::sleep(opts.poll.min(deadline - now));
            continue;
        } else if !missing.is_empty() || reports.is_empty() {
            OverallStatus::MissingRanks
        } else if empty > 0 {
            OverallStatus::Empty
        } else {
            OverallStatus::Timeout
        };
        return Ok(Polled {
            reports,
            status,
            missing,
            ignored,
            ever,
            cut,
        });
    }
}

/// What one poll saw, for its status line.
struct PollSeen<'a> {
    reports: &'a [Current],
    missing: &'a [u32],
    empty: usize,
    growing: usize,
    quiet_for: Duration,
    settled: bool,
}

impl PollSeen<'_> {
    /// `poll N: R report(s), SIZE, G growing, E empty[, missing ranks ...];
    /// settled | settles in ..., times out in ...` (`left`: until the
    /// deadline).
    fn line(&self, poll_no: u64, settle: Duration, left: Duration) -> String {
        let (reports, missing, empty) = (self.reports, self.missing, self.empty);
        let total: u64 = reports.iter().map(|r| r.found.stamp.bytes).sum();
        let mut line = format!(
            "poll {poll_no}: {} report(s), {}, {} growing, {empty} empty",
            reports.len(),
            crate::sys::units::format_bytes(total),
            self.growing
        );
        if !missing.is_empty() {
            line.push_str(&format!(", missing ranks {}", compact_ranks(missing)));
        } else if reports.is_empty() {
            line.push_str(", no report yet");
        }
        if self.settled {
            line.push_str("; settled");
        } else if empty == 0 && missing.is_empty() && !reports.is_empty() {
            line.push_str(&format!(
                "; settles in {}, times out in {}",
                format_duration(settle - self.quiet_for),
                format_duration(left)
            ));
        } else {
            line.push_str(&format!("; times out in {}", format_duration(left)));
        }
        line
    }
}

/// What one poll found.
struct Looked {
    reports: Vec<Current>,
    /// How many were left out as the baseline's.
    ignored: usize,
    /// The paths that changed since the last poll.
    changed: BTreeSet<PathBuf>,
    /// When it looked.
    now: Instant,
    /// A scan was cut by the deadline: `reports` is what it found so far.
    cut: bool,
}

/// One poll: rescues what the ranks left in their runtime dirs, scans for
/// reports, leaves out the baseline's.
fn poll_reports(
    opts: &CollectOptions,
    baseline: Option<&Baseline>,
    watch: &mut Watch,
    deadline: Instant,
    log: &Log,
) -> Result<Looked> {
    let mut sources = Vec::new();
    let (origins, rescue_cut) = rescue(opts, baseline, watch, &mut sources, deadline, log)?;
    let (found, cut) = if rescue_cut {
        (Vec::new(), true)
    } else {
        scan(&opts.report_root, &opts.runtime_dirs, Some(deadline))?
    };
    let all = found.len();
    let found: Vec<Found> = found
        .into_iter()
        .filter(|f| !baseline.is_some_and(|b| b.ignores(&f.path, f.stamp)))
        .collect();
    let ignored = all - found.len();
    let now = Instant::now();
    let mut stamps: Vec<(PathBuf, Stamp)> =
        found.iter().map(|f| (f.path.clone(), f.stamp)).collect();
    stamps.extend(sources);
    let changed = watch.update(&stamps, now);

    let reports: Vec<Current> = found
        .into_iter()
        .map(|f| {
            let rescued = f.rel.starts_with(RESCUED_DIR);
            let origin = origins.get(&f.path).cloned();
            let own = watch.changed_at(&f.path);
            let of_origin = origin.as_ref().and_then(|o| watch.changed_at(o));
            let changed_at = own.max(of_origin);
            Current {
                name: ReportName::parse(&f.path.file_name().unwrap_or_default().to_string_lossy()),
                source: if rescued {
                    Source::Rescued
                } else {
                    Source::Direct
                },
                origin,
                changed_at,
                found: f,
            }
        })
        .collect();
    Ok(Looked {
        reports,
        ignored,
        changed,
        now,
        cut,
    })
}

/// The manifest's report entries (sorted by rank, unranked last), with the
/// final status and missing ranks: a report that vanished makes its rank
/// missing.
fn report_entries(
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

fn manifest_json(m: &Manifest) -> Result<Vec<u8>> {
    let mut json = serde_json::to_vec_pretty(m)
        .map_err(|e| Error::Usage(format!("cannot serialize the manifest: {e}")))?;
    json.push(b'\n');
    Ok(json)
}

/// The archive being written: tar inside one zstd frame, committed
/// atomically at the end.
type Archive = tar::Builder<zstd::Encoder<'static, AtomicFile>>;

/// Hashes every report (streaming it into the archive when asked), then
/// finalizes the manifest's times and, for an archive, appends the manifest
/// as `manifest.json` and commits the archive atomically.
fn hash_and_archive(
    opts: &CollectOptions,
    manifest: &mut Manifest,
    archive_path: Option<&Path>,
    start: Instant,
    log: &Log,
) -> Result<()> {
    let bar = log
        .progress()
        .bytes_bar(manifest.total_bytes, "hashing reports");
    let mut builder = archive_path.map(open_archive).transpose()?;
    for entry in manifest.reports.iter_mut() {
        let Some(rel) = entry.path.clone() else {
            continue;
        };
        let path = opts.report_root.join(&rel);
        let file = match open_report(&opts.report_root, &rel) {
            Ok(f) => f,
            Err(Error::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => {
                log.line(format!(
                    "warning: {} vanished before it could be hashed; recorded as missing",
                    path.display()
                ));
                entry.status = ReportStatus::Missing;
                if let (Some(rank), OverallStatus::Complete) = (entry.rank, manifest.status) {
                    manifest.missing_ranks.push(rank);
                    manifest.status = OverallStatus::MissingRanks;
                }
                continue;
            }
            Err(e) => return Err(e),
        };
        let reader = bar.wrap_read(file);
        entry.sha256 = Some(hash_report(reader, entry, &rel, &path, builder.as_mut())?);
    }
    bar.finish_and_clear();
    manifest.finished_at = format_utc(unix_now() as u64);
    manifest.elapsed_s = start.elapsed().as_secs_f64();
    if let (Some(b), Some(p)) = (builder, archive_path) {
        commit_archive(b, p, manifest, log)?;
    }
    Ok(())
}

/// Creates the archive at `p` (confined, atomic).
fn open_archive(p: &Path) -> Result<Archive> {
    let file = AtomicFile::open(p, Destination::Confined, true)?;
    let mut enc = zstd::Encoder::new(file, 3).map_err(|e| Error::io(p, e))?;
    // Reports can be GB-sized; use a second core when there is one.
    let _ = enc.multithread(2);
    Ok(tar::Builder::new(enc))
}

/// The tar header of a regular file (mode 0644).
fn regular_header(size: u64, mtime: u64) -> tar::Header {
    let mut header = tar::Header::new_gnu();
    header.set_entry_type(tar::EntryType::Regular);
    header.set_size(size);
    header.set_mode(0o644);
    header.set_mtime(mtime);
    header
}

/// The SHA-256 (hex) of exactly the `entry.bytes` the manifest records of
/// the report at `path` (a report that grew after settling, as it should
/// not, cannot corrupt the archive's framing), streamed into the archive
/// as `rel` when there is one; an error when the report shrank meanwhile.
fn hash_report(
    file: impl Read,
    entry: &ReportEntry,
    rel: &Path,
    path: &Path,
    archive: Option<&mut Archive>,
) -> Result<String> {
    let mut reader = Sha256Reader::new(file.take(entry.bytes));
    match archive {
        Some(b) => {
            let secs = entry.mtime_unix_ns.unwrap_or(0) / 1_000_000_000;
            let mut header = regular_header(entry.bytes, u64::try_from(secs).unwrap_or(0));
            b.append_data(&mut header, rel, &mut reader)
                .map_err(|e| Error::io(path, e))?;
        }
        None => {
            io::copy(&mut reader, &mut io::sink()).map_err(|e| Error::io(path, e))?;
        }
    }
    if reader.bytes_read() != entry.bytes {
        return Err(Error::Io {
            path: path.to_path_buf(),
            source: io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "shrank from {} to {} bytes while being hashed; something is rewriting \
                     the report, rerun the collector once it has stopped",
                    entry.bytes,
                    reader.bytes_read()
                ),
            ),
        });
    }
    Ok(reader.hex_digest())
}

/// Appends the manifest (naming the archive) as `manifest.json` and
/// commits the archive at `p`.
fn commit_archive(mut b: Archive, p: &Path, manifest: &mut Manifest, log: &Log) -> Result<()> {
    manifest.archive = Some(PathBuf::from(ARCHIVE_FILE));
    let json = manifest_json(manifest)?;
    let mut header = regular_header(json.len() as u64, unix_now() as u64);
    b.append_data(&mut header, MANIFEST_FILE, json.as_slice())
        .map_err(|e| Error::io(p, e))?;
    let enc = b.into_inner().map_err(|e| Error::io(p, e))?;
    let file = enc.finish().map_err(|e| Error::io(p, e))?;
    file.commit()?;
    log.line(format!("wrote {}", p.display()));
    Ok(())
}

/// After waiting for another collector: its manifest, if it was written
/// while we waited, is complete, covers our expected ranks, and every file
/// it lists is unchanged with no new report since.
fn adopt(
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn write(path: &Path, bytes: &[u8]) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, bytes).unwrap();
    }

    fn fast(root: &Path) -> CollectOptions {
        CollectOptions {
            settle: Duration::from_millis(300),
            timeout: Duration::from_secs(20),
            poll: Duration::from_millis(50),
            ..CollectOptions::new(root)
        }
    }

    /// A deadline that never passes in a test.
    fn far() -> Instant {
        Instant::now() + Duration::from_secs(3600)
    }

    #[test]
    fn scan_finds_reports_recursively_and_skips_other_files() {
        let d = tempfile::tempdir().unwrap();
        write(&d.path().join("direct/1_a_rank0.nsys-rep"), b"x");
        write(&d.path().join("rescued/w/1_b_rank1.nsys-rep"), b"yy");
        write(&d.path().join("direct/.1_a_rank2.nsys-rep.abc.tmp"), b"z");
        write(&d.path().join("direct/1_a_rank0.qdstrm"), b"z");
        let (found, _) = scan(d.path(), &[], None).unwrap();
        let rels: Vec<_> = found.iter().map(|f| f.rel.clone()).collect();
        assert_eq!(
            rels,
            vec![
                PathBuf::from("direct/1_a_rank0.nsys-rep"),
                PathBuf::from("rescued/w/1_b_rank1.nsys-rep")
            ]
        );
        assert_eq!(found[1].stamp.bytes, 2);
    }

    #[test]
    fn baseline_ignores_only_unchanged_reports() {
        let d = tempfile::tempdir().unwrap();
        let old = d.path().join("direct/9_a_rank0.nsys-rep");
        write(&old, b"old");
        let opts = fast(d.path());
        let b = Baseline::take(&opts).unwrap();
        let stamp = Stamp::of(&fs::metadata(&old).unwrap());
        assert!(b.ignores(&old, stamp));
        let grown = Stamp { bytes: 10, ..stamp };
        assert!(!b.ignores(&old, grown));
        let b = b.keep_job("9");
        assert!(
            !b.ignores(&old, stamp),
            "reports of the flushed job are kept"
        );
    }

    #[test]
    fn settled_reports_give_a_complete_manifest_with_hashes() {
        let d = tempfile::tempdir().unwrap();
        write(&d.path().join("direct/5_n1_rank0.nsys-rep"), b"abc");
        write(&d.path().join("direct/5_n2_rank1.nsys-rep"), b"defg");
        write(&d.path().join("odd-name.nsys-rep"), b"h");
        let opts = CollectOptions {
            expect_ranks: Some(2),
            archive: true,
            ..fast(d.path())
        };
        let c = collect(&opts, None, &Progress::silent()).unwrap();
        c.check().unwrap();
        let m = &c.manifest;
        assert_eq!(m.status, OverallStatus::Complete);
        assert_eq!(m.report_count, 3);
        assert_eq!(m.total_bytes, 8);
        assert_eq!(m.reports[0].rank, Some(0));
        assert_eq!(m.reports[0].node.as_deref(), Some("n1"));
        assert_eq!(
            m.reports[0].sha256.as_deref(),
            Some("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        );
        assert_eq!(m.reports[2].rank, None);
        assert_eq!(m.reports[2].job, None);
        assert!(m.reports.iter().all(|r| r.status == ReportStatus::Ok));
        let on_disk: Manifest =
            serde_json::from_slice(&fs::read(d.path().join(MANIFEST_FILE)).unwrap()).unwrap();
        assert_eq!(on_disk.reports, m.reports);
        // The archive holds every report and the manifest.
        let dec = zstd::Decoder::new(File::open(d.path().join(ARCHIVE_FILE)).unwrap()).unwrap();
        let mut names: Vec<String> = tar::Archive::new(dec)
            .entries()
            .unwrap()
            .map(|e| e.unwrap().path().unwrap().display().to_string())
            .collect();
        names.sort();
        assert_eq!(
            names,
            [
                "direct/5_n1_rank0.nsys-rep",
                "direct/5_n2_rank1.nsys-rep",
                "manifest.json",
                "odd-name.nsys-rep"
            ]
        );
    }

    #[test]
    fn rejects_zero_poll_and_settle_and_a_missing_root() {
        let d = tempfile::tempdir().unwrap();
        let mut o = fast(d.path());
        o.poll = Duration::ZERO;
        assert!(collect(&o, None, &Progress::silent())
            .unwrap_err()
            .to_string()
            .contains("--poll"));
        let mut o = fast(d.path());
        o.settle = Duration::ZERO;
        assert!(collect(&o, None, &Progress::silent())
            .unwrap_err()
            .to_string()
            .contains("--settle"));
        let mut o = fast(d.path());
        o.runtime_dirs = vec![d.path().to_path_buf()];
        let e = collect(&o, None, &Progress::silent()).unwrap_err();
        assert!(e.to_string().contains("contains the report root"), "{e}");
        let o = fast(&d.path().join("nope"));
        let e = collect(&o, None, &Progress::silent()).unwrap_err();
        assert!(e.to_string().contains("nope"), "{e}");
        assert_eq!(e.exit_code().code(), 2);
    }

    #[test]
    fn rescue_copies_skips_same_size_and_recopies_grown_sources() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("root");
        let rt = d.path().join("rt");
        fs::create_dir_all(&root).unwrap();
        let src = rt.join("sub/3_n_rank0.nsys-rep");
        write(&src, b"1234");
        let opts = CollectOptions {
            runtime_dirs: vec![rt.clone()],
            ..fast(&root)
        };
        let mut watch = Watch::new(Instant::now());
        let p = Log::new(&Progress::silent(), Duration::from_secs(1), "test");
        let dest = root.join("rescued/sub/3_n_rank0.nsys-rep");
        let origins = rescue(&opts, None, &mut watch, &mut Vec::new(), far(), &p)
            .unwrap()
            .0;
        assert_eq!(origins.get(&dest), Some(&src));
        assert_eq!(fs::read(&dest).unwrap(), b"1234");
        let before = fs::metadata(&dest).unwrap().ino();
        rescue(&opts, None, &mut watch, &mut Vec::new(), far(), &p).unwrap();
        assert_eq!(
            fs::metadata(&dest).unwrap().ino(),
            before,
            "same size: not copied again"
        );
        fs::OpenOptions::new()
            .append(true)
            .open(&src)
            .unwrap()
            .write_all(b"56")
            .unwrap();
        rescue(&opts, None, &mut watch, &mut Vec::new(), far(), &p).unwrap();
        assert_eq!(fs::read(&dest).unwrap(), b"123456");
        // A shrunken source never shrinks the copy.
        fs::write(&src, b"1").unwrap();
        rescue(&opts, None, &mut watch, &mut Vec::new(), far(), &p).unwrap();
        assert_eq!(fs::read(&dest).unwrap(), b"123456");
        // No temporary files are left behind.
        let names: Vec<_> = fs::read_dir(dest.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 1);
    }

    #[test]
    fn watch_counts_new_changed_and_vanished_files_as_changes() {
        let t0 = Instant::now();
        let mut w = Watch::new(t0);
        let a = PathBuf::from("a");
        let s = Stamp {
            bytes: 1,
            mtime_ns: 1,
        };
        let t1 = t0 + Duration::from_secs(1);
        assert!(
            w.update(&[(a.clone(), s)], t1).is_empty(),
            "first poll: no growth"
        );
        assert_eq!(w.last_change, t1);
        let t2 = t1 + Duration::from_secs(1);
        w.update(&[(a.clone(), s)], t2);
        assert_eq!(w.last_change, t1, "unchanged");
        let t3 = t2 + Duration::from_secs(1);
        let touched = Stamp { mtime_ns: 2, ..s };
        assert_eq!(w.update(&[(a.clone(), touched)], t3).len(), 1);
        assert_eq!(w.last_change, t3, "mtime alone counts");
        let t4 = t3 + Duration::from_secs(1);
        w.update(&[], t4);
        assert_eq!(w.last_change, t4, "vanishing counts");
    }
}
