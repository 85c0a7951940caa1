//! Rescuing reports out of per-rank runtime workspaces: new or grown
//! reports are copied into `DIR/rescued/` (atomically, through a temporary
//! name scans never see); a rescued copy is never shrunk and the original
//! is never touched.

use std::collections::{BTreeSet, HashMap};
use std::io;
use std::path::{Path, PathBuf};
use std::time::Instant;

use super::scan::{open_report, scan, Baseline, Stamp};
use super::{CollectOptions, Result};
use crate::nsys::{Error, Log};
use crate::sys::atomic::AtomicFile;

/// Directory (under the report root) that rescued copies go to.
pub const RESCUED_DIR: &str = "rescued";

/// Copies new or grown reports from the runtime dirs into `DIR/rescued/`
/// (`warned`: the destinations whose conflict was already logged).
/// Returns the map from rescued copy to its origin, and whether a scan was
/// cut by `deadline`.
pub(super) fn rescue(
    opts: &CollectOptions,
    baseline: Option<&Baseline>,
    warned: &mut BTreeSet<PathBuf>,
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
                if warned.insert(dest.clone()) {
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
                    if warned.insert(dest.clone()) {
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

/// The size of the rescued copy of the runtime-dir report `rel`, if any.
fn rescued_size(report_root: &Path, rel: &Path) -> Option<u64> {
    let rel = Path::new(RESCUED_DIR).join(rel);
    let (dir, name) = crate::nsys::walk::parent_in(report_root, &rel, false).ok()?;
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
    let (dir, name) = crate::nsys::walk::parent_in(report_root, &dest, true)?;
    let mut out = AtomicFile::create_in(&dir, name, true)?;
    let n = io::copy(&mut input, &mut out).map_err(|e| Error::io(&src, e))?;
    out.commit()?;
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::super::tests::{far, fast, write};
    use super::*;
    use crate::sys::progress::LogLines;
    use std::collections::BTreeSet;
    use std::fs;
    use std::io::Write;
    use std::os::unix::fs::MetadataExt;
    use std::time::Duration;

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
        let mut warned = BTreeSet::new();
        let p = Log::new(&LogLines::silent(), Duration::from_secs(1), "test");
        let dest = root.join("rescued/sub/3_n_rank0.nsys-rep");
        let origins = rescue(&opts, None, &mut warned, &mut Vec::new(), far(), &p)
            .unwrap()
            .0;
        assert_eq!(origins.get(&dest), Some(&src));
        assert_eq!(fs::read(&dest).unwrap(), b"1234");
        let before = fs::metadata(&dest).unwrap().ino();
        rescue(&opts, None, &mut warned, &mut Vec::new(), far(), &p).unwrap();
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
        rescue(&opts, None, &mut warned, &mut Vec::new(), far(), &p).unwrap();
        assert_eq!(fs::read(&dest).unwrap(), b"123456");
        // A shrunken source never shrinks the copy.
        fs::write(&src, b"1").unwrap();
        rescue(&opts, None, &mut warned, &mut Vec::new(), far(), &p).unwrap();
        assert_eq!(fs::read(&dest).unwrap(), b"123456");
        // No temporary files are left behind.
        let names: Vec<_> = fs::read_dir(dest.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 1);
    }
}
