//! Finding reports: the walk of a report tree (every `*.nsys-rep` at any
//! depth, no symbolic link followed), the size and modification time that
//! settling compares, and the baseline of reports that existed before a
//! collector or flush started. Nothing here waits or writes.

use std::collections::HashMap;
use std::fs::{self, File};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use super::{CollectOptions, Result};
use crate::nsys::{Error, ReportName};
use crate::sys::units::format_duration;

/// Size and modification time of a file: what settling compares (the
/// type the recorder's nsys sidecar shares).
pub(super) use jobprof_capture_format::settle::Stamp;

#[cfg(test)]
fn stamp_of(m: &fs::Metadata) -> Stamp {
    Stamp {
        bytes: m.len(),
        mtime_ns: m.mtime().saturating_mul(1_000_000_000) + m.mtime_nsec(),
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

    pub(super) fn ignores(&self, path: &Path, stamp: Stamp) -> bool {
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

/// A report file found by a scan.
#[derive(Debug, Clone)]
pub(super) struct Found {
    pub(super) path: PathBuf,
    pub(super) rel: PathBuf,
    pub(super) stamp: Stamp,
}

/// Finds `*.nsys-rep` files under `root` (recursively, at any depth,
/// following no symbolic link: a linked report or directory is not
/// collected, so a link planted in a report tree cannot make jobprof read,
/// rescue or archive a file elsewhere), skipping the directories in `skip`
/// (recognised by device and inode, see [`mod@crate::nsys::walk`]). Files that
/// vanish during the walk are left out. The second value is true when
/// `deadline` passed before the walk finished (what it found is returned).
pub(super) fn scan(
    root: &Path,
    skip: &[PathBuf],
    deadline: Option<Instant>,
) -> Result<(Vec<Found>, bool)> {
    let skip: Vec<(u64, u64)> = skip
        .iter()
        .filter_map(|d| fs::metadata(d).ok())
        .map(|m| (m.dev(), m.ino()))
        .collect();
    let walked = crate::nsys::walk::walk(root, &skip, deadline)?;
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

/// Opens the report `rel` under `root` for reading, one directory at a
/// time (any depth, no symbolic link, never blocking on a special file).
pub(super) fn open_report(root: &Path, rel: &Path) -> Result<File> {
    let (dir, name) = crate::nsys::walk::parent_in(root, rel, false)?;
    Ok(dir.open_read(name)?)
}

pub(super) fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::super::tests::{fast, write};
    use super::*;

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
        let stamp = stamp_of(&fs::metadata(&old).unwrap());
        assert!(b.ignores(&old, stamp));
        let grown = Stamp { bytes: 10, ..stamp };
        assert!(!b.ignores(&old, grown));
        let b = b.keep_job("9");
        assert!(
            !b.ignores(&old, stamp),
            "reports of the flushed job are kept"
        );
    }
}
