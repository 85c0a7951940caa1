//! Walking a report tree for `*.nsys-rep` files one directory descriptor
//! at a time.
//!
//! Every step below the root is `openat(2)` of one name relative to its
//! parent's descriptor ([`crate::sys::confined::Dir`]), so a tree of any depth
//! is walked (no path is ever longer than one name: reports deeper than
//! `PATH_MAX` are found like any other), no symbolic link is followed, and
//! no directory is canonicalized: directories to leave out are recognised
//! by their (device, inode). The walk holds one descriptor per
//! [`KEEP_EVERY`] levels of the current path (plus the current directory),
//! reopening a parent from its nearest kept ancestor when it returns to it,
//! so deep trees never run out of descriptors. A deadline ends the walk
//! early with what it found so far, marked cut.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Instant;

use super::{Error, REPORT_SUFFIX};
use crate::sys::confined::Dir;

/// Directory levels between two descriptors the walk keeps open.
const KEEP_EVERY: usize = 32;

/// One report file found.
#[derive(Debug, Clone)]
pub(super) struct Hit {
    /// Path relative to the walked root.
    pub rel: PathBuf,
    /// Size in bytes.
    pub size: u64,
    /// Modification time, nanoseconds since the epoch.
    pub mtime_ns: i64,
}

/// What a walk found.
#[derive(Debug, Default)]
pub(super) struct Walked {
    /// The reports, in no particular order.
    pub hits: Vec<Hit>,
    /// True when the deadline passed before the walk finished.
    pub cut: bool,
}

/// One directory of the current path.
struct Frame {
    /// Its descriptor, when kept (always for the root and the top frame).
    dir: Option<Dir>,
    rel: PathBuf,
    depth: usize,
    /// Subdirectories still to walk.
    pending: Vec<OsString>,
}

/// Opens a tree root the user named (links above and at it are theirs to
/// follow: it is resolved once, here).
pub(super) fn open_root(root: &Path) -> Result<Dir, Error> {
    let real = std::fs::canonicalize(root).map_err(|e| Error::io(root, e))?;
    Ok(Dir::open(&real)?)
}

/// The directory holding `rel` below `root` (created when `create`) and
/// `rel`'s file name, reached one `openat` at a time.
pub(super) fn parent_in<'a>(
    root: &Path,
    rel: &'a Path,
    create: bool,
) -> Result<(Dir, &'a std::ffi::OsStr), Error> {
    let name = rel.file_name().ok_or_else(|| {
        Error::io(
            root.join(rel),
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "has no file name"),
        )
    })?;
    let parent = rel.parent().unwrap_or(Path::new(""));
    Ok((open_root(root)?.walk(parent, create)?, name))
}

/// Finds the regular `*.nsys-rep` files under `root`, leaving out the
/// directories whose (device, inode) is in `skip` and everything reached
/// through a symbolic link. Entries that vanish during the walk are left
/// out; the walk stops (cut) once `deadline` passes.
pub(super) fn walk(
    root: &Path,
    skip: &[(u64, u64)],
    deadline: Option<Instant>,
) -> Result<Walked, Error> {
    let top = open_root(root)?;
    let mut out = Walked::default();
    let pending = list(&top, Path::new(""), skip, &mut out.hits)?;
    let mut frames = vec![Frame {
        dir: Some(top),
        rel: PathBuf::new(),
        depth: 0,
        pending,
    }];
    while let Some(f) = frames.last_mut() {
        let Some(name) = f.pending.pop() else {
            frames.pop();
            continue;
        };
        if deadline.is_some_and(|d| Instant::now() >= d) {
            out.cut = true;
            return Ok(out);
        }
        if f.dir.is_none() && !reopen(&mut frames) {
            frames.pop();
            continue;
        }
        let f = frames.last_mut().expect("a frame");
        // A directory replaced (by a link, a file) or removed since it was
        // listed is left out, like one that vanished.
        let Ok(child) = f.dir.as_ref().expect("reopened").sub(&name) else {
            continue;
        };
        let (rel, depth) = (f.rel.join(&name), f.depth + 1);
        if f.depth % KEEP_EVERY != 0 {
            f.dir = None;
        }
        let pending = list(&child, &rel, skip, &mut out.hits)?;
        frames.push(Frame {
            dir: Some(child),
            rel,
            depth,
            pending,
        });
    }
    Ok(out)
}

/// Reopens the top frame's directory from its nearest kept ancestor; false
/// when that fails (it was removed or replaced meanwhile).
fn reopen(frames: &mut [Frame]) -> bool {
    let (top, below) = frames.split_last_mut().expect("a frame");
    let Some(anchor) = below.iter().rev().find(|f| f.dir.is_some()) else {
        return false;
    };
    let Ok(suffix) = top.rel.strip_prefix(&anchor.rel) else {
        return false;
    };
    match anchor.dir.as_ref().expect("kept").walk(suffix, false) {
        Ok(d) => {
            top.dir = Some(d);
            true
        }
        Err(_) => false,
    }
}

/// Lists `dir` (at `rel`): its reports go to `hits`, the names of its
/// subdirectories (not in `skip`) are returned.
fn list(
    dir: &Dir,
    rel: &Path,
    skip: &[(u64, u64)],
    hits: &mut Vec<Hit>,
) -> Result<Vec<OsString>, Error> {
    let mut subdirs = Vec::new();
    for name in dir.names()? {
        let Some(e) = dir.entry(&name)? else { continue };
        if e.is_dir() {
            if !skip.contains(&(e.dev, e.ino)) {
                subdirs.push(name);
            }
        } else if e.is_file() && name.to_string_lossy().ends_with(REPORT_SUFFIX) {
            hits.push(Hit {
                rel: rel.join(&name),
                size: e.size,
                mtime_ns: e.mtime_ns,
            });
        }
    }
    Ok(subdirs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn every_branch_of_a_deep_tree_is_found_and_skips_and_links_are_not_entered() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("root");
        // 3 * KEEP_EVERY levels, each with a side branch holding a report
        // (found after the walk came back up past dropped descriptors).
        let mut dir = root.clone();
        let levels = 3 * KEEP_EVERY + 5;
        for i in 0..levels {
            fs::create_dir_all(dir.join("side")).unwrap();
            fs::write(dir.join(format!("side/{i}_n_rank0.nsys-rep")), b"x").unwrap();
            dir.push("d");
        }
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("bottom.nsys-rep"), b"yy").unwrap();
        fs::write(dir.join("bottom.qdstrm"), b"no").unwrap();
        let outside = t.path().join("outside");
        fs::create_dir_all(&outside).unwrap();
        fs::write(outside.join("o.nsys-rep"), b"o").unwrap();
        std::os::unix::fs::symlink(&outside, root.join("link")).unwrap();
        std::os::unix::fs::symlink(outside.join("o.nsys-rep"), root.join("l.nsys-rep")).unwrap();
        let skipped = root.join("d/d/skipped");
        fs::create_dir_all(&skipped).unwrap();
        fs::write(skipped.join("s.nsys-rep"), b"s").unwrap();
        let m = fs::metadata(&skipped).unwrap();
        use std::os::unix::fs::MetadataExt;
        let w = walk(&root, &[(m.dev(), m.ino())], None).unwrap();
        assert!(!w.cut);
        let mut rels: Vec<String> = w.hits.iter().map(|h| h.rel.display().to_string()).collect();
        rels.sort();
        assert_eq!(rels.len(), levels + 1, "{rels:?}");
        assert!(rels
            .iter()
            .all(|r| !r.contains("skipped") && !r.starts_with('l')));
        let bottom = w
            .hits
            .iter()
            .find(|h| h.rel.ends_with("bottom.nsys-rep"))
            .unwrap();
        assert_eq!(bottom.size, 2);
        assert!(rels.contains(&"side/0_n_rank0.nsys-rep".to_string()));
    }

    #[test]
    fn a_passed_deadline_cuts_the_walk() {
        let t = tempfile::tempdir().unwrap();
        fs::create_dir_all(t.path().join("a/b")).unwrap();
        let w = walk(t.path(), &[], Some(Instant::now())).unwrap();
        assert!(w.cut);
    }
}
