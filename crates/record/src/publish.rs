//! Atomic publication, as soon as a capture ends: a capture staged in
//! `STAGING/worker_N/Q/` appears as `PERF_ROOT/worker_N/Q/` all at once or
//! not at all. Files are hard-linked (same filesystem) or copied and flushed
//! into the hidden `PERF_ROOT/worker_N/.Q.publishing`, `capture.json` is
//! rewritten there with phase `published`, and one `rename` makes it
//! visible. The staging copy is removed only after that rename; on any
//! error it stays where it is and the message names both paths.
//!
//! Worker-level files (`preflight.txt`, `worker.maps`,
//! `symbol-manifest.tsv`, `symfs/`) are published the same way, once the
//! snapshot is taken. Files added to the snapshot later (libraries the
//! worker mapped after `ready`) are published one by one into the
//! published `symfs/`, each under a temporary name renamed into place, and
//! then the manifest: a reader processing an earlier capture meanwhile sees
//! every file either whole or not at all.
//!
//! While a capture runs, `PERF_ROOT/worker_N/.capturing` ([`mark_capturing`])
//! names its query and staging directory, so that `jobprof process` run
//! meanwhile says a capture is being written; it is removed once the
//! capture is published or given up ([`unmark_capturing`]).
//!
//! Nothing is written through a symlink: `PERF_ROOT/worker_N` must be a
//! real directory of ours, the temporary directories are created new, files
//! are created with `O_EXCL | O_NOFOLLOW` (or hard-linked), and an existing
//! `PERF_ROOT/worker_N/Q` (or a symlink there) is never replaced.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use jobprof_capture_format::{Capture, Capturing, Phase, CAPTURE_JSON, CAPTURING};

use crate::sys::{self, now_ns};
use crate::tokens::write_atomic;

/// `what path: e`, the messages of a failed publication.
pub(crate) fn ctx(what: &str, path: &Path, e: io::Error) -> String {
    format!("{what} {}: {e}", path.display())
}

/// Creates `PERF_ROOT/worker_N` if needed and checks that it is a real
/// directory that belongs to us.
pub(crate) fn out_dir(out_worker: &Path) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    if fs::symlink_metadata(out_worker).is_err() {
        fs::create_dir_all(out_worker).map_err(|e| ctx("cannot create", out_worker, e))?;
    }
    let m = fs::symlink_metadata(out_worker).map_err(|e| ctx("cannot read", out_worker, e))?;
    if !m.is_dir() {
        return Err(format!(
            "{} is not a directory (a symlink, owner uid {}?); refusing to publish through it",
            out_worker.display(),
            m.uid()
        ));
    }
    if m.uid() != sys::euid() {
        return Err(format!(
            "{} belongs to uid {}, not to us (uid {}); refusing to publish into it",
            out_worker.display(),
            m.uid(),
            sys::euid()
        ));
    }
    Ok(())
}

/// Removes what a publication interrupted earlier left at `tmp` (never
/// visible, ours): a directory tree, or a file or symlink someone put there.
pub(crate) fn clear_stale(tmp: &Path) -> Result<(), String> {
    match fs::symlink_metadata(tmp) {
        Ok(m) if m.is_dir() => {
            fs::remove_dir_all(tmp).map_err(|e| ctx("cannot remove stale", tmp, e))
        }
        Ok(_) => fs::remove_file(tmp).map_err(|e| ctx("cannot remove stale", tmp, e)),
        Err(_) => Ok(()),
    }
}

/// Publishes the capture staged in `staged` (with metadata `meta`) into
/// `out_worker/<query>`. Returns the error message on failure (the staged
/// data is then untouched).
pub fn capture(staged: &Path, out_worker: &Path, meta: &Capture) -> Result<(), String> {
    let keep = format!("the capture stays in {}", staged.display());
    let taken = |_: &Path| " (an earlier run?); not overwritten";
    query_dir(out_worker, &meta.query, &keep, taken, |tmp| {
        sys::copy_tree(staged, tmp).map_err(|e| ctx("cannot copy the capture into", tmp, e))?;
        let mut published = meta.clone();
        published.reach(Phase::Published, now_ns());
        write_meta(tmp, CAPTURE_JSON, &published.to_json())
    })?;
    // Published: the staging copy is no longer needed.
    let _ = fs::remove_dir_all(staged);
    Ok(())
}

/// The one publication of a query directory, a perf capture's or an nsys
/// report's: `out_worker` is checked ([`out_dir`]); an existing
/// `out_worker/Q` is never replaced (`taken` says why it may be there);
/// `fill` puts the files and the metadata ([`write_meta`]) into the new
/// hidden `out_worker/.Q.publishing` (what an interrupted publication left
/// there is removed first), which is flushed and renamed into place at
/// once. On error nothing stays there and the message ends with `keep`
/// (where the staged data stays). Returns `out_worker/Q`.
pub(crate) fn query_dir(
    out_worker: &Path,
    q: &str,
    keep: &str,
    taken: impl FnOnce(&Path) -> &'static str,
    fill: impl FnOnce(&Path) -> Result<(), String>,
) -> Result<PathBuf, String> {
    out_dir(out_worker).map_err(|e| format!("{e}; {keep}"))?;
    let final_dir = out_worker.join(q);
    if fs::symlink_metadata(&final_dir).is_ok() {
        let why = taken(&final_dir);
        return Err(format!(
            "{} already exists{why}; {keep}",
            final_dir.display()
        ));
    }
    let tmp = out_worker.join(format!(".{q}.publishing"));
    clear_stale(&tmp)?;
    let placed = fill(&tmp).and_then(|()| {
        sys::sync_dir(&tmp);
        fs::rename(&tmp, &final_dir).map_err(|e| ctx("cannot rename into", &final_dir, e))?;
        sys::sync_dir(out_worker);
        Ok(())
    });
    match placed {
        Ok(()) => Ok(final_dir),
        Err(e) => {
            let _ = fs::remove_dir_all(&tmp);
            Err(format!("{e}; {keep}"))
        }
    }
}

/// Writes a query directory's metadata `json` as `dir/name`, atomically.
pub(crate) fn write_meta(dir: &Path, name: &str, json: &str) -> Result<(), String> {
    let path = dir.join(name);
    write_atomic(&path, json.as_bytes()).map_err(|e| ctx("cannot write", &path, e))
}

/// Writes the marker of the capture of `q` staged in `staged` into
/// `out_worker` (checked as [`out_dir`]; written atomically, replacing
/// an earlier one, never through a link).
pub fn mark_capturing(out_worker: &Path, q: &str, staged: &Path) -> Result<(), String> {
    out_dir(out_worker)?;
    let marker = Capturing {
        query: q.to_string(),
        staging: staged.display().to_string(),
        host: sys::hostname(),
        pid: std::process::id(),
        since_unix_ns: now_ns(),
    };
    write_meta(out_worker, CAPTURING, &marker.to_text())
}

/// Removes `out_worker`'s capture marker, when there is one (the name
/// itself: a link there is removed, never followed).
pub fn unmark_capturing(out_worker: &Path) -> Result<(), String> {
    let path = out_worker.join(CAPTURING);
    match fs::remove_file(&path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(ctx("cannot remove", &path, e)),
        _ => Ok(()),
    }
}

/// Publishes the worker-level files of `staged_worker` into `out_worker`.
pub fn worker_files(staged_worker: &Path, out_worker: &Path) -> Result<(), String> {
    out_dir(out_worker)?;
    for name in [
        "preflight.txt",
        "worker.maps",
        "symbol-manifest.tsv",
        crate::symfs::KALLSYMS,
        crate::symfs::MODULES,
    ] {
        let src = staged_worker.join(name);
        let Ok(data) = fs::read(&src) else { continue };
        let dst = out_worker.join(name);
        write_atomic(&dst, &data).map_err(|e| ctx("cannot write", &dst, e))?;
    }
    let symfs = staged_worker.join("symfs");
    if symfs.is_dir() {
        let dst = out_worker.join("symfs");
        let tmp = out_worker.join(".symfs.publishing");
        let old = out_worker.join(format!(".symfs.replaced.{}", std::process::id()));
        clear_stale(&tmp)?;
        sys::copy_tree(&symfs, &tmp).map_err(|e| {
            let _ = fs::remove_dir_all(&tmp);
            ctx("cannot copy symfs into", &tmp, e)
        })?;
        // An earlier sidecar's snapshot is replaced, never merged: it may
        // describe other binaries.
        if fs::symlink_metadata(&dst).is_ok() {
            fs::rename(&dst, &old).map_err(|e| ctx("cannot move aside", &dst, e))?;
        }
        fs::rename(&tmp, &dst).map_err(|e| ctx("cannot rename into", &dst, e))?;
        let _ = clear_stale(&old);
        sys::sync_dir(out_worker);
    }
    Ok(())
}

/// Publishes the files `files` (relative to `symfs/`) added to the staged
/// snapshot of `staged_worker` after the worker files were published, and
/// then its manifest, into `out_worker`. Each file is linked or copied to a
/// new temporary name next to its place (directories created only where no
/// symlink is) and renamed into place.
pub fn symfs_additions(
    staged_worker: &Path,
    out_worker: &Path,
    files: &[PathBuf],
) -> Result<(), String> {
    out_dir(out_worker)?;
    let (src_root, dst_root) = (staged_worker.join("symfs"), out_worker.join("symfs"));
    for rel in files {
        let (src, dst) = (src_root.join(rel), dst_root.join(rel));
        let (Some(parent), Some(name)) = (dst.parent(), dst.file_name()) else {
            continue;
        };
        sys::create_dirs_nofollow(out_worker, parent)
            .map_err(|e| ctx("cannot create", parent, e))?;
        let tmp = parent.join(format!(
            ".{}.publishing.{}",
            name.to_string_lossy(),
            std::process::id()
        ));
        clear_stale(&tmp)?;
        let placed = fs::hard_link(&src, &tmp)
            .or_else(|_| sys::copy_new(&src, &tmp).map(|_| ()))
            .and_then(|()| fs::rename(&tmp, &dst));
        if let Err(e) = placed {
            let _ = fs::remove_file(&tmp);
            return Err(ctx("cannot publish", &dst, e));
        }
    }
    let manifest = "symbol-manifest.tsv";
    let data = fs::read(staged_worker.join(manifest))
        .map_err(|e| ctx("cannot read", &staged_worker.join(manifest), e))?;
    let dst = out_worker.join(manifest);
    write_atomic(&dst, &data).map_err(|e| ctx("cannot write", &dst, e))?;
    sys::sync_dir(out_worker);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symfs_additions_are_renamed_into_place_never_through_a_symlink() {
        let t = std::env::temp_dir().join(format!("publish-add-{}", std::process::id()));
        let _ = fs::remove_dir_all(&t);
        let (staged, out) = (t.join("staging/worker_0"), t.join("out/worker_0"));
        fs::create_dir_all(staged.join("symfs/usr/lib")).unwrap();
        fs::write(staged.join("symfs/usr/lib/first.so"), b"first").unwrap();
        fs::write(staged.join("symbol-manifest.tsv"), b"header\nfirst\n").unwrap();
        worker_files(&staged, &out).unwrap();
        // Added after the first publication: a file in a new directory.
        fs::create_dir_all(staged.join("symfs/opt/plugins")).unwrap();
        fs::write(staged.join("symfs/opt/plugins/late.so"), b"late").unwrap();
        fs::write(staged.join("symbol-manifest.tsv"), b"header\nfirst\nlate\n").unwrap();
        let rel = PathBuf::from("opt/plugins/late.so");
        symfs_additions(&staged, &out, std::slice::from_ref(&rel)).unwrap();
        assert_eq!(fs::read(out.join("symfs").join(&rel)).unwrap(), b"late");
        assert_eq!(
            fs::read(out.join("symfs/usr/lib/first.so")).unwrap(),
            b"first"
        );
        assert_eq!(
            fs::read(out.join("symbol-manifest.tsv")).unwrap(),
            b"header\nfirst\nlate\n"
        );
        let names: Vec<_> = fs::read_dir(out.join("symfs/opt/plugins"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["late.so"], "no temporary file left");
        // A symlink planted in the published tree is not written through.
        let elsewhere = t.join("elsewhere");
        fs::create_dir_all(&elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, out.join("symfs/srv")).unwrap();
        fs::create_dir_all(staged.join("symfs/srv")).unwrap();
        fs::write(staged.join("symfs/srv/x.so"), b"x").unwrap();
        let e = symfs_additions(&staged, &out, &["srv/x.so".into()]).unwrap_err();
        assert!(e.contains("symlink"), "{e}");
        assert!(fs::read_dir(&elsewhere).unwrap().next().is_none());
        fs::remove_dir_all(&t).unwrap();
    }
}
