//! Collecting `.nsys-rep` reports: the driver that takes the report root's
//! lock, waits for the reports to settle ([`mod@settle`], finding them with
//! [`mod@scan`] and rescuing them from runtime workspaces with
//! [`mod@rescue`]), then writes the manifest ([`mod@manifest`]; the status
//! words both use are in [`mod@status`]) and the optional archive
//! ([`mod@archive`]).
//!
//! A report is only complete once its writer stopped: nsys writes nothing
//! until its session ends and then writes for minutes, so a report can exist
//! at 0 bytes, grow in bursts, and pause longer than any poll interval.
//! Settling is therefore decided on bytes and modification times over a
//! settle window, never on file counts. Collectors on one report root are
//! serialized by an exclusive `flock` on `DIR/.jobprof-nsys.lock`
//! ([`crate::sys::lock`]); a collector
//! that had to wait adopts the result of the one it waited for when that
//! result is complete and still true.
//!
//! This module never deletes, truncates or rewrites a report: it stats,
//! copies (runtime workspace -> `DIR/rescued/`), hashes and archives them.
//! It does not start or stop profiling sessions (see [`mod@super::flush`]).

mod archive;
pub mod manifest;
mod rescue;
mod scan;
mod settle;
pub mod status;

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use archive::hash_and_archive;
use manifest::{adopt, new_manifest};
use scan::unix_now;
use settle::poll_until_settled;

use super::{Error, Log};
use crate::sys::lock::{Acquired, DirLock};
use crate::sys::progress::Progress;
use crate::sys::units::format_utc;

pub use archive::ARCHIVE_FILE;
pub use manifest::{Manifest, ReportEntry, MANIFEST_FILE};
pub use rescue::RESCUED_DIR;
pub use scan::Baseline;
pub use status::{OverallStatus, ReportStatus, Source};

/// Name of the lock file collectors take in the report root.
pub const LOCK_FILE: &str = ".jobprof-nsys.lock";

pub(super) type Result<T, E = Error> = std::result::Result<T, E>;

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

/// Takes the report root's lock, waiting (polling) until `deadline`. The
/// lock and whether it had to wait, or `None` when the deadline passed
/// first.
fn lock(root: &Path, deadline: Instant, poll: Duration, log: &Log) -> Result<Option<Acquired>> {
    let path = root.join(LOCK_FILE);
    let dir = crate::nsys::walk::open_root(root)?;
    // Check often enough to notice the release promptly.
    let every = poll.min(Duration::from_millis(200));
    let busy = || {
        log.line(format!(
            "another collector holds {}; waiting for it to finish",
            path.display()
        ))
    };
    Ok(DirLock::poll(&dir, LOCK_FILE, deadline, every, busy)?)
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
    progress: &dyn Progress,
) -> Result<Collection> {
    let log = Log::new(progress, opts.timeout, "collecting nsys reports");
    let result = collect_logged(opts, baseline, &log);
    log.finish();
    result
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

    let Some(Acquired {
        lock: _lock,
        waited,
    }) = lock(&opts.report_root, deadline, opts.poll, log)?
    else {
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
    manifest::write(&manifest, &manifest_path, start, log)?;
    Ok(Collection {
        manifest,
        manifest_path,
        archive_path,
        adopted: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::progress::LogLines;
    use std::fs::File;

    pub(super) fn write(path: &Path, bytes: &[u8]) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, bytes).unwrap();
    }

    pub(super) fn fast(root: &Path) -> CollectOptions {
        CollectOptions {
            settle: Duration::from_millis(300),
            timeout: Duration::from_secs(20),
            poll: Duration::from_millis(50),
            ..CollectOptions::new(root)
        }
    }

    /// A deadline that never passes in a test.
    pub(super) fn far() -> Instant {
        Instant::now() + Duration::from_secs(3600)
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
        let c = collect(&opts, None, &LogLines::silent()).unwrap();
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
        assert!(collect(&o, None, &LogLines::silent())
            .unwrap_err()
            .to_string()
            .contains("--poll"));
        let mut o = fast(d.path());
        o.settle = Duration::ZERO;
        assert!(collect(&o, None, &LogLines::silent())
            .unwrap_err()
            .to_string()
            .contains("--settle"));
        let mut o = fast(d.path());
        o.runtime_dirs = vec![d.path().to_path_buf()];
        let e = collect(&o, None, &LogLines::silent()).unwrap_err();
        assert!(e.to_string().contains("contains the report root"), "{e}");
        let o = fast(&d.path().join("nope"));
        let e = collect(&o, None, &LogLines::silent()).unwrap_err();
        assert!(e.to_string().contains("nope"), "{e}");
        assert_eq!(e.exit_code().code(), 2);
    }
}
