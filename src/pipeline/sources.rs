//! Which files name each DSO of one capture, decided once for both
//! symbolizers ([`crate::symbolize::sources`]): the DSOs the shards'
//! headers recorded, each resolved by build id; a `--symfs` tree of links
//! to the taken files for `perf script`, so that it reads exactly what the
//! native symbolizer reads; the per-DSO answer for `summary.json` and one
//! log line.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use super::Pipeline;
use crate::output::summary::SymbolSource;
use crate::symbolize::sources::{Resolved, Search};

/// One capture's symbol sources.
#[derive(Debug, Default)]
pub(super) struct CaptureSources {
    /// Where files are looked for.
    pub search: Search,
    /// Each DSO the headers recorded, with its answer.
    pub dsos: Vec<(String, Vec<u8>, Arc<Resolved>)>,
    /// The `--symfs` tree for `perf script` (links to the taken files),
    /// made when a `perf script` run first needs it: the native
    /// symbolizer reads the taken files themselves.
    perf_tree: OnceLock<Option<Tree>>,
}

/// A symbol tree, and the lock on it that tells [`remove_left_trees`] of
/// other runs it is in use.
#[derive(Debug)]
struct Tree {
    dir: tempfile::TempDir,
    _lock: std::fs::File,
}

impl CaptureSources {
    /// The `--symfs` directory `perf script` gets: the tree of links, or
    /// the capture's own `symfs/` when the tree could not be made (`log`
    /// gets why). A capture of the processing user's own without a
    /// snapshot gets none: perf then searches this host's files and debug
    /// directories itself, as the resolver does, and reads
    /// `/proc/kallsyms` as [`crate::symbolize::kernel`] expects. Another
    /// user's capture always gets the tree: perf reads only the files the
    /// resolver took for that user, never a recorded path on its own.
    pub fn perf_symfs(&self, log: impl FnOnce(String)) -> Option<PathBuf> {
        if self.search.symfs.is_none() && self.search.owner.is_none() {
            return None;
        }
        let tree = self.perf_tree.get_or_init(|| match perf_tree(&self.dsos) {
            Ok(t) => Some(t),
            Err(e) => {
                log(format!(
                    "warning: no symbol tree for perf script ({e}); it reads symfs/ only"
                ));
                None
            }
        });
        match tree {
            Some(t) => Some(t.dir.path().to_path_buf()),
            None => self.search.symfs.clone(),
        }
    }

    /// The per-DSO answers for `summary.json`.
    pub fn summary(&self) -> Vec<SymbolSource> {
        self.dsos
            .iter()
            .map(|(path, id, r)| SymbolSource {
                dso: path.clone(),
                build_id: crate::sys::digest::hex(id),
                source: r.describe(),
            })
            .collect()
    }

    /// The log line: how many DSOs each kind of source named, and every
    /// DSO named by none with why.
    pub fn log_line(&self) -> String {
        let mut counts: Vec<(&str, usize)> = Vec::new();
        let mut none = Vec::new();
        for (path, _, r) in &self.dsos {
            let kind = match (r.debug.first(), &r.binary) {
                (Some(d), _) => d.kind.as_str(),
                (None, Some(b)) => b.kind.as_str(),
                (None, None) => {
                    none.push(format!("{path}: {}", r.describe()));
                    continue;
                }
            };
            match counts.iter_mut().find(|(k, _)| *k == kind) {
                Some((_, n)) => *n += 1,
                None => counts.push((kind, 1)),
            }
        }
        let mut parts: Vec<String> = counts.iter().map(|(k, n)| format!("{n} {k}")).collect();
        if !none.is_empty() {
            parts.push(format!("{} none", none.len()));
        }
        let mut line = format!(
            "symbol sources of {} DSO(s), by build id: {}",
            self.dsos.len(),
            parts.join(", ")
        );
        for n in none
            .iter()
            .filter(|n| !n.contains("no file with its build id"))
        {
            line.push_str("; ");
            line.push_str(n);
        }
        line
    }
}

/// Whether a recorded DSO is user space (kernel and module maps are
/// named from kallsyms).
fn user_dso(path: &str) -> bool {
    (path.starts_with('/') && !path.starts_with("//")) || path == "[vdso]"
}

/// The start of a symbol tree's name in the temporary directory; the
/// creator's pid follows (`jobprof-symfs-PID-XXXXXX`, for whoever looks).
const TREE_PREFIX: &str = "jobprof-symfs-";

/// A tree is taken for left behind only when nobody holds its lock and it
/// is older than this (a new tree is locked microseconds after it is made).
const LEFT_AFTER: std::time::Duration = std::time::Duration::from_secs(60);

/// The tree of links `perf script --symfs` reads: each taken binary at its
/// recorded path, the first taken debug file at
/// `usr/lib/debug/.build-id/NN/REST.debug`. Links are made in a private
/// temporary directory, locked while it is used and removed with it; the
/// trees of runs killed before they could remove theirs are removed
/// first, once per process. A DSO whose link cannot be made is left out.
fn perf_tree(dsos: &[(String, Vec<u8>, Arc<Resolved>)]) -> std::io::Result<Tree> {
    static SWEPT: std::sync::Once = std::sync::Once::new();
    SWEPT.call_once(|| remove_left_trees(&std::env::temp_dir()));
    let dir = tempfile::Builder::new()
        .prefix(&format!("{TREE_PREFIX}{}-", std::process::id()))
        .tempdir()?;
    let lock = lock_tree(dir.path(), false)?.ok_or_else(|| std::io::Error::other("locked"))?;
    for (path, id, r) in dsos {
        if let Some(b) = &r.binary {
            let _ = link(dir.path(), path.trim_start_matches('/'), &b.path);
        }
        let hex = crate::sys::digest::hex(id);
        if let (Some(d), true) = (r.debug.first(), hex.len() > 2) {
            let (nn, rest) = hex.split_at(2);
            let at = format!("usr/lib/debug/.build-id/{nn}/{rest}.debug");
            let _ = link(dir.path(), &at, &d.path);
        }
    }
    Ok(Tree { dir, _lock: lock })
}

/// An exclusive `flock` on the directory `dir` (never through a link),
/// waiting for it unless `try_only`; `None`: someone else holds it.
fn lock_tree(dir: &Path, try_only: bool) -> std::io::Result<Option<std::fs::File>> {
    use std::fs::TryLockError;
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW)
        .open(dir)?;
    // std's locks are `flock` on Linux, as `sys::lock`'s.
    let taken = if try_only {
        f.try_lock()
    } else {
        f.lock().map_err(TryLockError::Error)
    };
    match taken {
        Ok(()) => Ok(Some(f)),
        Err(TryLockError::WouldBlock) => Ok(None),
        Err(TryLockError::Error(e)) => Err(e),
    }
}

/// Removes the symbol trees in `tmp` that runs of this user left behind (a
/// run killed with SIGKILL cannot remove its own): directories owned by
/// this user, named `jobprof-symfs-PID-...`, whose lock nobody holds (a
/// live run holds it, in any pid namespace) and older than [`LEFT_AFTER`];
/// trees of the older name without a pid, which had no lock, a day old.
/// Never through a link (`remove_dir_all` does not follow them either).
fn remove_left_trees(tmp: &Path) {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return;
    };
    let me = crate::sys::creds::euid();
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(TREE_PREFIX)) else {
            continue;
        };
        let path = e.path();
        let Ok(meta) = path.symlink_metadata() else {
            continue;
        };
        let age = meta.modified().ok().and_then(|t| t.elapsed().ok());
        if !meta.is_dir() || meta.uid() != me || age.is_none_or(|a| a < LEFT_AFTER) {
            continue;
        }
        let numbered = rest
            .split_once('-')
            .is_some_and(|(pid, _)| pid.parse::<u32>().is_ok());
        if numbered {
            // Held while removed: a run cannot take a name that exists.
            if let Ok(Some(_held)) = lock_tree(&path, true) {
                let _ = std::fs::remove_dir_all(&path);
            }
        } else if age.is_some_and(|a| a.as_secs() > 24 * 3600) {
            let _ = std::fs::remove_dir_all(&path);
        }
    }
}

fn link(root: &Path, rel: &str, target: &Path) -> std::io::Result<()> {
    let at = root.join(rel);
    if let Some(parent) = at.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let target = std::path::absolute(target)?;
    std::os::unix::fs::symlink(target, at)
}

impl Pipeline<'_> {
    /// This capture's symbol sources, resolved at the first call (and
    /// logged then).
    pub(super) fn sources(&self) -> &CaptureSources {
        self.sources.get_or_init(|| {
            // Another user's capture (or a capture of another user's
            // worker) reads this host's files as that user.
            let (dir, cap) = (&self.cap.found.dir, &self.cap);
            let owner = crate::sys::creds::Creds::of_capture(dir, cap.worker_uid, cap.worker_gid);
            let search =
                Search::on_this_host(self.cap.symfs.clone(), self.opts.debug_dirs.clone(), owner);
            let (ids, _) = self.shard_ids().union();
            // Resolved once per run for every capture with this search.
            let dsos: Vec<(String, Vec<u8>, Arc<Resolved>)> = ids
                .into_iter()
                .filter(|b| user_dso(&b.path))
                .map(|b| {
                    let id = unhex(&b.build_id);
                    let r = self.store.resolved(&b.path, &id, &search);
                    (b.path, id, r)
                })
                .collect();
            let s = CaptureSources {
                search,
                dsos,
                perf_tree: OnceLock::new(),
            };
            if !s.dsos.is_empty() {
                self.log(s.log_line());
            }
            s
        })
    }

    /// The `--symfs` directory of this capture's `perf script` runs
    /// ([`CaptureSources::perf_symfs`]).
    pub(super) fn perf_symfs(&self) -> Option<PathBuf> {
        self.sources().perf_symfs(|m| self.log(m))
    }

    /// The data files of the shards on disk.
    fn present_data(&self) -> Vec<PathBuf> {
        let present = self.cap.shards.iter().filter(|s| s.bytes.is_some());
        present.map(|s| s.data_file.clone()).collect()
    }

    /// The build-id tables of the shards on disk, read at the first call:
    /// once per capture, for every stage that needs them.
    pub(super) fn shard_ids(&self) -> &crate::symbolize::build_ids::ShardIds {
        self.shard_ids
            .get_or_init(|| crate::symbolize::build_ids::ShardIds::read(&self.present_data()))
    }
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .filter_map(|i| u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trees_left_by_killed_runs_are_removed_and_those_in_use_kept() {
        let tmp = tempfile::tempdir().unwrap();
        let old = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
        let mk = |name: &str, age: Option<std::time::SystemTime>| {
            let d = tmp.path().join(name);
            std::fs::create_dir_all(d.join("usr/lib")).unwrap();
            std::os::unix::fs::symlink("/etc/passwd", d.join("usr/lib/x")).unwrap();
            if let Some(t) = age {
                std::fs::File::open(&d).unwrap().set_modified(t).unwrap();
            }
            d
        };
        let left = mk("jobprof-symfs-4242-aBc123", Some(old));
        let in_use = mk("jobprof-symfs-4243-xYz789", Some(old));
        let _held = lock_tree(&in_use, false).unwrap().unwrap();
        let just_made = mk("jobprof-symfs-4244-n3wOne", None);
        let unnumbered = mk("jobprof-symfs-Qw3rTy", Some(old));
        let other = mk("other-symfs-1-a", Some(old));
        let file = tmp.path().join("jobprof-symfs-4245-file");
        std::fs::write(&file, "not a tree").unwrap();
        remove_left_trees(tmp.path());
        assert!(!left.exists());
        for kept in [&in_use, &just_made, &unnumbered, &other] {
            assert!(kept.is_dir(), "{}", kept.display());
        }
        assert!(file.is_file());
        assert!(Path::new("/etc/passwd").is_file(), "links are not followed");
    }

    #[test]
    fn user_space_dsos_only() {
        assert!(user_dso("/usr/lib/libc.so.6"));
        assert!(user_dso("[vdso]"));
        assert!(!user_dso("[kernel.kallsyms]"));
        assert!(!user_dso("//anon"));
        assert_eq!(unhex("0aff"), [0x0a, 0xff]);
    }
}
