//! The worker-level symbol snapshot, taken once before `ready`: a copy of
//! `/proc/PID/maps` (`worker.maps`) and of every executable file-backed
//! mapping, read through `/proc/PID/root` so that it works for containers
//! too, into `symfs/<absolute path>`, so that `perf report --symfs` and
//! `perf script --symfs` can symbolize after the job (when the container or
//! the deployed binaries may be gone). Deleted files are read through
//! `/proc/PID/map_files/`. `symbol-manifest.tsv` lists every mapping with
//! its size, build id and what happened to it. Stops copying at
//! `--symfs-limit` bytes (the rest is listed as skipped). Nothing in the
//! destination tree is followed: directories are created only where no
//! symlink is, files with `O_EXCL | O_NOFOLLOW`.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::elf;
use crate::sys;
use crate::tokens::write_atomic;

/// Header of `symbol-manifest.tsv`.
pub const MANIFEST_HEADER: &str = "path\tbytes\tbuild_id\tstatus";

/// What the snapshot did, for the log line.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Summary {
    /// Files copied.
    pub copied: usize,
    /// Bytes copied.
    pub bytes: u64,
    /// Files not copied (limit or error).
    pub skipped: usize,
}

/// The executable file-backed mappings in a maps text: absolute path (without
/// a ` (deleted)` suffix) to (address range, deleted?).
pub fn executable_mappings(maps: &str) -> BTreeMap<String, (String, bool)> {
    let mut found = BTreeMap::new();
    for line in maps.lines() {
        let mut parts = line.splitn(6, ' ');
        let (Some(range), Some(perms)) = (parts.next(), parts.next()) else {
            continue;
        };
        let path = parts.nth(3).map(str::trim_start).unwrap_or("");
        if !perms.contains('x') || !path.starts_with('/') {
            continue;
        }
        let (path, deleted) = match path.strip_suffix(" (deleted)") {
            Some(p) => (p, true),
            None => (path, false),
        };
        found
            .entry(path.to_string())
            .or_insert_with(|| (range.to_string(), deleted));
    }
    found
}

/// Takes the snapshot of `pid` into `worker_dir` (`worker.maps`, `symfs/`,
/// `symbol-manifest.tsv`), copying at most `limit` bytes.
pub fn snapshot(pid: u32, worker_dir: &Path, limit: u64) -> io::Result<Summary> {
    let maps = fs::read_to_string(format!("/proc/{pid}/maps"))?;
    write_atomic(&worker_dir.join("worker.maps"), maps.as_bytes())?;
    let symfs = worker_dir.join("symfs");
    // Never through a symlink in the destination tree.
    sys::create_dirs_nofollow(worker_dir, &symfs)?;
    let mut manifest = String::from(MANIFEST_HEADER);
    manifest.push('\n');
    let mut summary = Summary::default();
    for (path, (range, deleted)) in executable_mappings(&maps) {
        let src = if deleted {
            PathBuf::from(format!("/proc/{pid}/map_files/{range}"))
        } else {
            PathBuf::from(format!("/proc/{pid}/root{path}"))
        };
        let size = fs::metadata(&src).map(|m| m.len());
        let build_id = elf::inspect(&src)
            .ok()
            .and_then(|i| i.build_id)
            .unwrap_or_else(|| "-".into());
        let status = match &size {
            Err(e) => format!("error: {e}"),
            Ok(n) if summary.bytes + *n > limit => {
                format!("skipped: --symfs-limit {limit} bytes reached")
            }
            Ok(n) => {
                let dst = symfs.join(path.trim_start_matches('/'));
                let copied = dst
                    .parent()
                    .map_or(Ok(()), |p| sys::create_dirs_nofollow(&symfs, p))
                    .and_then(|_| sys::copy_new(&src, &dst));
                match copied {
                    Ok(_) => {
                        summary.bytes += *n;
                        summary.copied += 1;
                        if deleted {
                            "copied (deleted on disk)".to_string()
                        } else {
                            "copied".to_string()
                        }
                    }
                    Err(e) => format!("error: {e}"),
                }
            }
        };
        if !status.starts_with("copied") {
            summary.skipped += 1;
        }
        manifest.push_str(&format!(
            "{path}\t{}\t{build_id}\t{status}\n",
            size.as_ref()
                .map(|n| n.to_string())
                .unwrap_or_else(|_| "-".into())
        ));
    }
    write_atomic(&worker_dir.join("symbol-manifest.tsv"), manifest.as_bytes())?;
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_executable_file_mappings_once() {
        let maps = "\
55d0-55d1 r--p 00000000 08:01 10 /usr/bin/srv
55d1-55d2 r-xp 00001000 08:01 10 /usr/bin/srv
7f00-7f01 r-xp 00000000 08:01 11 /usr/lib/libc.so.6
7f02-7f03 r-xp 00000000 08:01 11 /usr/lib/libc.so.6
7f04-7f05 r-xp 00000000 00:00 0 \n\
7f06-7f07 r-xp 00000000 08:01 12                     /opt/my lib/old.so (deleted)
7ffd-7ffe r-xp 00000000 00:00 0                  [vdso]
";
        let m = executable_mappings(maps);
        let keys: Vec<&str> = m.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            ["/opt/my lib/old.so", "/usr/bin/srv", "/usr/lib/libc.so.6"]
        );
        assert_eq!(m["/opt/my lib/old.so"], ("7f06-7f07".to_string(), true));
        assert_eq!(m["/usr/lib/libc.so.6"].0, "7f00-7f01");
    }

    #[test]
    fn snapshots_this_process_within_the_limit() {
        let dir = std::env::temp_dir().join(format!("symfs-test-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let s = snapshot(std::process::id(), &dir, 1).unwrap();
        assert_eq!(s.copied, 0);
        assert!(s.skipped >= 1);
        let manifest = fs::read_to_string(dir.join("symbol-manifest.tsv")).unwrap();
        assert!(manifest.contains("skipped: --symfs-limit"), "{manifest}");
        fs::remove_dir_all(&dir).unwrap();
        fs::create_dir_all(&dir).unwrap();
        let s = snapshot(std::process::id(), &dir, u64::MAX).unwrap();
        assert!(s.copied >= 1, "{s:?}");
        let exe = std::env::current_exe().unwrap();
        assert!(dir
            .join("symfs")
            .join(exe.strip_prefix("/").unwrap())
            .is_file());
        fs::remove_dir_all(&dir).unwrap();
    }
}
