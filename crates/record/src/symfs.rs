//! The worker-level symbol snapshot, taken before `ready` ([`snapshot`])
//! and grown at the end of each capture with what the worker mapped since
//! ([`add_new`]: plugins loaded with `dlopen`), holding everything `perf
//! script` needs to name frames after the job (when the container, the
//! deployed binaries or the node may be gone):
//!
//! - `worker.maps`: a copy of `/proc/PID/maps`;
//! - `symfs/<absolute path>`: every executable file-backed mapping, read
//!   through `/proc/PID/root` so that it works for containers too (deleted
//!   files through `/proc/PID/map_files/`);
//! - the separate debug info of each of them, found as perf finds it (by
//!   build id under `/usr/lib/debug/.build-id/`, then by `.gnu_debuglink`
//!   in the same directory, its `.debug/` and `/usr/lib/debug/<dir>/`, then
//!   `/usr/lib/debug/<path>.debug`) and copied to the same path under
//!   `symfs/`, where `perf --symfs` looks for it;
//! - the split DWARF of each of them (`-gsplit-dwarf`): the `.dwo` files
//!   its skeleton units name and its `<path>.dwp` package, copied to the
//!   same path under `symfs/` ([`split`]);
//! - `symfs/[vdso]`: the worker's vDSO (the kernel's user-space code for
//!   `clock_gettime` and friends), read from its memory, where `perf
//!   --symfs` and the native symbolizer look for it: without it, samples
//!   in the vDSO are `[unknown]` after the job;
//! - `kallsyms` and `modules`: the kernel's symbol table and module list,
//!   next to `symfs/` (perf reads them together with `--kallsyms`). A table
//!   whose addresses are all zero (`kernel.kptr_restrict`) is not kept.
//!
//! `symbol-manifest.tsv` lists each of them with its kind, size, build id
//! and what happened to it (copied, skipped at `--symfs-limit`, absent,
//! error). Every copied byte counts against `--symfs-limit`. Nothing in the
//! destination tree is followed: directories are created only where no
//! symlink is, files with `O_EXCL | O_NOFOLLOW`.
//!
//! Nothing of the worker's is opened as root ([`crate::confine`]): each
//! mapped file through its mapping (`/proc/PID/map_files/START-END`, the
//! inode the worker runs, whatever its path leads to now), debug files
//! below the worker's root (links resolved inside it, nothing mounted over
//! the file), all with the worker's credentials, never a FIFO or a device;
//! each copy holds at most the size checked and is 0600 unless its source
//! is readable by everyone.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::confine::{self, Worker};
use crate::elf;
use crate::sys;
use crate::tokens::write_atomic;

mod split;

/// Header of `symbol-manifest.tsv`.
pub const MANIFEST_HEADER: &str = "kind\tpath\tbytes\tbuild_id\tstatus";

/// The vDSO's name under `symfs/` (the name perf gives its mapping, and
/// where `perf --symfs` looks for it).
pub const VDSO: &str = "[vdso]";

/// The kernel symbol table's name in the worker directory.
pub const KALLSYMS: &str = "kallsyms";
/// The kernel module list's name in the worker directory.
pub const MODULES: &str = "modules";

/// What the snapshot did, for the log line.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Summary {
    /// Files copied (binaries, debug files, kernel tables).
    pub copied: usize,
    /// Bytes copied.
    pub bytes: u64,
    /// Files not copied (limit or error).
    pub skipped: usize,
    /// Separate debug files copied.
    pub debug_files: usize,
    /// Whether a usable kernel symbol table was kept.
    pub kallsyms: bool,
}

/// The executable file-backed mappings in a maps text: absolute path (without
/// a ` (deleted)` suffix) to (address range, deleted?).
pub fn executable_mappings(maps: &str) -> BTreeMap<String, (String, bool)> {
    let mut found = BTreeMap::new();
    for (range, path) in maps.lines().filter_map(executable_file) {
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

/// Every line of a maps text that maps a file executable, as written: what
/// perf synthesizes `MMAP` records of when it attaches (a file mapped twice
/// is there twice).
pub fn executable_mapping_lines(maps: &str) -> BTreeSet<String> {
    maps.lines()
        .filter(|l| executable_file(l).is_some())
        .map(str::to_string)
        .collect()
}

/// (address range, path) of a maps line that maps a file executable.
fn executable_file(line: &str) -> Option<(&str, &str)> {
    let mut parts = line.splitn(6, ' ');
    let (range, perms) = (parts.next()?, parts.next()?);
    let path = parts.nth(3).map(str::trim_start).unwrap_or("");
    (perms.contains('x') && path.starts_with('/')).then_some((range, path))
}

/// Where perf looks for the separate debug info of the file at `path`
/// (absolute, as the worker sees it), in perf's order: by build id, then by
/// `.gnu_debuglink` (same directory, `.debug/`, `/usr/lib/debug/<dir>/`),
/// then `/usr/lib/debug/<path>.debug`.
pub fn debug_candidates(
    path: &str,
    build_id: Option<&str>,
    debuglink: Option<&str>,
) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(id) = build_id.filter(|id| id.len() > 2) {
        out.push(format!(
            "/usr/lib/debug/.build-id/{}/{}.debug",
            &id[..2],
            &id[2..]
        ));
    }
    let dir = Path::new(path)
        .parent()
        .map(|d| d.to_string_lossy().into_owned())
        .unwrap_or_default();
    let dir = dir.trim_end_matches('/');
    if let Some(link) = debuglink {
        let same = format!("{dir}/{link}");
        if same != path {
            out.push(same);
        }
        out.push(format!("{dir}/.debug/{link}"));
        out.push(format!("/usr/lib/debug{dir}/{link}"));
    }
    out.push(format!("/usr/lib/debug{path}.debug"));
    out.dedup();
    out
}

/// True when a kallsyms text has at least one non-zero address (false when
/// `kptr_restrict` hid them all, or the text is empty).
pub fn kallsyms_has_addresses(text: &[u8]) -> bool {
    text.split(|&b| b == b'\n')
        .filter_map(|l| l.split(|&b| b == b' ').next())
        .any(|a| !a.is_empty() && a.iter().any(|&b| b != b'0'))
}

/// What the snapshot holds, kept by the sidecar to add the files the worker
/// maps later ([`add_new`]) within the same `--symfs-limit`.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Held {
    /// The mapped files looked at (absolute, as the worker sees them).
    paths: BTreeSet<String>,
    /// Bytes counted against the limit so far.
    bytes: u64,
}

impl Held {
    /// Bytes counted against the limit so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Counts `n` more bytes (copied into the capture's `jit/`).
    pub fn count(&mut self, n: u64) {
        self.bytes += n;
    }
}

/// What [`add_new`] added.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Added {
    /// This addition alone (files, bytes, skipped, debug files).
    pub summary: Summary,
    /// The files copied, relative to `symfs/`.
    pub files: Vec<PathBuf>,
}

/// Accumulates the manifest and the byte budget.
struct Snap<'a> {
    /// The worker, whose credentials open its files.
    worker: &'a Worker,
    /// Its root (`/proc/PID/root`), when it could be opened.
    root: io::Result<fs::File>,
    symfs: &'a Path,
    limit: u64,
    manifest: String,
    summary: Summary,
    /// Files copied into `symfs/`, relative to it.
    files: Vec<PathBuf>,
    /// Appended to every status (why a row came after the first snapshot).
    note: &'a str,
}

impl Snap<'_> {
    fn new<'a>(
        worker: &'a Worker,
        symfs: &'a Path,
        limit: u64,
        bytes: u64,
        note: &'a str,
    ) -> Snap<'a> {
        Snap {
            worker,
            root: worker.root(),
            symfs,
            limit,
            manifest: String::new(),
            summary: Summary {
                bytes,
                ..Summary::default()
            },
            files: Vec::new(),
            note,
        }
    }

    fn row(&mut self, kind: &str, path: &str, size: Option<u64>, build_id: &str, status: &str) {
        let size = size.map(|n| n.to_string()).unwrap_or_else(|| "-".into());
        let note = self.note;
        self.manifest.push_str(&format!(
            "{kind}\t{path}\t{size}\t{build_id}\t{status}{note}\n"
        ));
    }

    /// Remembers a file copied to `dst` (below `symfs/`).
    fn copied(&mut self, dst: &Path, n: u64) {
        self.summary.bytes += n;
        self.summary.copied += 1;
        if let Ok(rel) = dst.strip_prefix(self.symfs) {
            self.files.push(rel.to_path_buf());
        }
    }

    /// The file the worker maps at `range` (as `path`), opened through its
    /// mapping as the worker, copied with its separate debug info.
    fn mapping(&mut self, path: &str, range: &str, deleted: bool) {
        let (mut f, meta) = match self.worker.open_mapped(range, path) {
            Ok(o) => o,
            Err(e) => {
                self.summary.skipped += 1;
                return self.row("binary", path, None, "-", &format!("not copied: {e}"));
            }
        };
        let info = elf::inspect_file(&mut f).ok();
        let build_id = info.as_ref().and_then(|i| i.build_id.clone());
        let dst = self.symfs.join(path.trim_start_matches('/'));
        let mut status = self.copy_open(&mut f, &meta, &dst);
        if deleted && status == "copied" {
            status = "copied (deleted on disk)".into();
        }
        let id = build_id.as_deref().unwrap_or("-");
        self.row("binary", path, Some(meta.len()), id, &status);
        if info.as_ref().is_some_and(|i| i.debug_info) {
            self.split_dwarf(path, &mut f);
        }
        if let Some(info) = info {
            self.debug_info(path, &info);
        }
    }

    /// Finds and copies the separate debug info of `path`, looking in the
    /// worker's file system, as the worker.
    fn debug_info(&mut self, path: &str, info: &elf::ElfInfo) {
        let candidates =
            debug_candidates(path, info.build_id.as_deref(), info.debuglink.as_deref());
        let id = info.build_id.as_deref().unwrap_or("-");
        // The first candidate that really is this file's debug info: the
        // worker's file system is not ours to trust (a planted link must
        // not copy a host file into the published symfs/), so a candidate is
        // opened once as the worker (links resolved inside its root), checked
        // from that handle (an ELF file with the binary's build id, or with
        // debug sections when the binary has no build id) and copied from
        // the same handle.
        let found = candidates.iter().find_map(|c| {
            let root = self.root.as_ref().ok()?;
            let (mut f, meta) = self.worker.open_path(root, c, true).ok()?;
            let debug = elf::inspect_file(&mut f).ok()?;
            let matches = match (&info.build_id, &debug.build_id) {
                (Some(want), Some(got)) => want == got,
                (Some(_), None) => false,
                (None, _) => debug.symtab || debug.debug_info,
            };
            matches.then_some((c, f, meta))
        });
        match found {
            Some((c, mut f, meta)) => {
                let dst = self.symfs.join(c.trim_start_matches('/'));
                let status = self.copy_open(&mut f, &meta, &dst);
                if status == "copied" {
                    self.summary.debug_files += 1;
                }
                self.row(
                    "debuginfo",
                    c,
                    Some(meta.len()),
                    id,
                    &format!("{status} (for {path})"),
                );
            }
            None => {
                let named = if info.symtab || info.debug_info {
                    "its own symbols are used"
                } else {
                    "only its exported symbols can be named; install its debug package"
                };
                let status = format!("absent (for {path}; {named})");
                self.row("debuginfo", &candidates.join(" "), None, id, &status);
            }
        }
    }

    /// Copies an open file (at most the size in `meta`) to `dst` within the
    /// budget; the manifest status.
    fn copy_open(&mut self, f: &mut fs::File, meta: &fs::Metadata, dst: &Path) -> String {
        let size = meta.len();
        if self.summary.bytes + size > self.limit {
            self.summary.skipped += 1;
            return format!("skipped: --symfs-limit {} bytes reached", self.limit);
        }
        match confine::copy_bounded(f, size, meta.mode(), self.symfs, dst) {
            Ok(n) => {
                self.copied(dst, n);
                "copied".into()
            }
            Err(e) => {
                self.summary.skipped += 1;
                format!("error: {e}")
            }
        }
    }

    /// The worker's vDSO into `symfs/[vdso]`: read from the worker's
    /// memory, else (when ptrace rules forbid that) the sidecar's own vDSO
    /// when it has the same size: one kernel maps one vDSO per ABI, and
    /// perf and the native symbolizer check its build id anyway.
    fn vdso(&mut self, pid: u32, maps: &str) {
        let Some(range) = vdso_range(maps) else {
            return;
        };
        let size = range.1 - range.0;
        let read = read_mem(&format!("/proc/{pid}/mem"), range)
            .map(|b| (b, "copied"))
            .or_else(|worker_err| match fs::read_to_string("/proc/self/maps") {
                Ok(own) => match vdso_range(&own).filter(|r| r.1 - r.0 == size) {
                    Some(r) => read_mem("/proc/self/mem", r)
                        .map(|b| (b, "copied (the sidecar's own vDSO, same size)")),
                    None => Err(worker_err),
                },
                Err(_) => Err(worker_err),
            });
        let (bytes, how) = match read {
            Ok(found) if found.0.starts_with(b"\x7fELF") => found,
            Ok(_) => return self.row("vdso", VDSO, Some(size), "-", "error: not an ELF image"),
            Err(e) => return self.row("vdso", VDSO, Some(size), "-", &format!("error: {e}")),
        };
        if self.summary.bytes + size > self.limit {
            self.summary.skipped += 1;
            let status = format!("skipped: --symfs-limit {} bytes reached", self.limit);
            return self.row("vdso", VDSO, Some(size), "-", &status);
        }
        let dst = self.symfs.join(VDSO);
        let written = sys::write_new(&dst, 0o644, |f| {
            io::Write::write_all(f, &bytes).map(|()| size)
        });
        let (id, status) = match written {
            Ok(_) => {
                self.copied(&dst, size);
                let id = elf::inspect(&dst).ok().and_then(|i| i.build_id);
                (id.unwrap_or_else(|| "-".into()), how.to_string())
            }
            Err(e) => {
                self.summary.skipped += 1;
                ("-".into(), format!("error: {e}"))
            }
        };
        self.row("vdso", VDSO, Some(size), &id, &status);
    }

    /// `/proc/kallsyms` and `/proc/modules` into `worker_dir`.
    fn kernel(&mut self, worker_dir: &Path) {
        match fs::read("/proc/kallsyms") {
            Err(e) => self.row(
                "kallsyms",
                "/proc/kallsyms",
                None,
                "-",
                &format!("error: {e}"),
            ),
            Ok(text) if !kallsyms_has_addresses(&text) => {
                let restrict = fs::read_to_string("/proc/sys/kernel/kptr_restrict")
                    .map(|s| s.trim().to_string())
                    .unwrap_or_else(|_| "?".into());
                let status = format!(
                    "absent: addresses hidden (kernel.kptr_restrict={restrict}); \
                     run as root or lower kptr_restrict to 0 to name kernel frames"
                );
                self.row(
                    "kallsyms",
                    "/proc/kallsyms",
                    Some(text.len() as u64),
                    "-",
                    &status,
                );
            }
            Ok(text) => {
                let size = text.len() as u64;
                let status = self.keep(worker_dir, KALLSYMS, &text);
                self.summary.kallsyms = status == "copied";
                self.row("kallsyms", "/proc/kallsyms", Some(size), "-", &status);
            }
        }
        match fs::read("/proc/modules") {
            Ok(text) => {
                let size = text.len() as u64;
                let status = self.keep(worker_dir, MODULES, &text);
                self.row("modules", "/proc/modules", Some(size), "-", &status);
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => self.row(
                "modules",
                "/proc/modules",
                None,
                "-",
                "absent (kernel without loadable modules)",
            ),
            Err(e) => self.row(
                "modules",
                "/proc/modules",
                None,
                "-",
                &format!("error: {e}"),
            ),
        }
    }

    /// Writes a kernel table into the worker directory within the budget.
    fn keep(&mut self, worker_dir: &Path, name: &str, text: &[u8]) -> String {
        let size = text.len() as u64;
        if self.summary.bytes + size > self.limit {
            self.summary.skipped += 1;
            return format!("skipped: --symfs-limit {} bytes reached", self.limit);
        }
        match write_atomic(&worker_dir.join(name), text) {
            Ok(()) => {
                self.summary.bytes += size;
                self.summary.copied += 1;
                "copied".into()
            }
            Err(e) => {
                self.summary.skipped += 1;
                format!("error: {e}")
            }
        }
    }
}

/// The address range of the `[vdso]` mapping in a maps text.
fn vdso_range(maps: &str) -> Option<(u64, u64)> {
    let line = maps.lines().find(|l| l.trim_end().ends_with(" [vdso]"))?;
    let (start, end) = line.split(' ').next()?.split_once('-')?;
    let start = u64::from_str_radix(start, 16).ok()?;
    let end = u64::from_str_radix(end, 16).ok()?;
    (end > start && end - start <= 1 << 20).then_some((start, end))
}

/// The bytes at `range` of a process's memory (`/proc/PID/mem`).
fn read_mem(mem: &str, range: (u64, u64)) -> io::Result<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    let mut buf = vec![0; (range.1 - range.0) as usize];
    fs::File::open(mem)?.read_exact_at(&mut buf, range.0)?;
    Ok(buf)
}

/// The worker `pid` (started at `start`) pinned with its credentials.
fn pin(pid: u32, start: u64) -> io::Result<Worker> {
    Worker::pin(pid, start).map_err(|e| io::Error::new(io::ErrorKind::NotFound, e))
}

/// Takes the snapshot of `pid` into `worker_dir` (`worker.maps`, `symfs/`,
/// `kallsyms`, `modules`, `symbol-manifest.tsv`), copying at most `limit`
/// bytes. The kernel tables come first: they are small and name every
/// kernel frame.
pub fn snapshot(
    pid: u32,
    start: u64,
    worker_dir: &Path,
    limit: u64,
) -> io::Result<(Summary, Held)> {
    let worker = pin(pid, start)?;
    let maps = fs::read_to_string(format!("/proc/{pid}/maps"))?;
    write_atomic(&worker_dir.join("worker.maps"), maps.as_bytes())?;
    let symfs = worker_dir.join("symfs");
    // Never through a symlink in the destination tree.
    sys::create_dirs_nofollow(worker_dir, &symfs)?;
    let mut snap = Snap::new(&worker, &symfs, limit, 0, "");
    snap.manifest = format!("{MANIFEST_HEADER}\n");
    snap.kernel(worker_dir);
    snap.vdso(pid, &maps);
    let mut held = Held::default();
    for (path, (range, deleted)) in executable_mappings(&maps) {
        snap.mapping(&path, &range, deleted);
        held.paths.insert(path);
    }
    write_atomic(
        &worker_dir.join("symbol-manifest.tsv"),
        snap.manifest.as_bytes(),
    )?;
    held.bytes = snap.summary.bytes;
    Ok((snap.summary, held))
}

/// Adds to the snapshot in `worker_dir` the files `pid` maps executable now
/// and the snapshot has not looked at yet (libraries loaded with `dlopen`
/// after `ready`), with their separate debug info, exactly as [`snapshot`]
/// copies them and within what is left of `limit`. Their rows are appended
/// to `symbol-manifest.tsv`, each status followed by `note`. Nothing is
/// written when nothing new is mapped.
pub fn add_new(
    pid: u32,
    start: u64,
    worker_dir: &Path,
    limit: u64,
    held: &mut Held,
    note: &str,
) -> io::Result<Added> {
    let maps = fs::read_to_string(format!("/proc/{pid}/maps"))?;
    let new: Vec<_> = executable_mappings(&maps)
        .into_iter()
        .filter(|(path, _)| !held.paths.contains(path))
        .collect();
    if new.is_empty() {
        return Ok(Added::default());
    }
    let symfs = worker_dir.join("symfs");
    sys::create_dirs_nofollow(worker_dir, &symfs)?;
    let worker = pin(pid, start)?;
    let mut snap = Snap::new(&worker, &symfs, limit, held.bytes, note);
    for (path, (range, deleted)) in new {
        snap.mapping(&path, &range, deleted);
        held.paths.insert(path);
    }
    let manifest_path = worker_dir.join("symbol-manifest.tsv");
    let mut manifest = match fs::read_to_string(&manifest_path) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => format!("{MANIFEST_HEADER}\n"),
        Err(e) => return Err(e),
    };
    manifest.push_str(&snap.manifest);
    write_atomic(&manifest_path, manifest.as_bytes())?;
    let mut summary = snap.summary;
    summary.bytes -= held.bytes;
    held.bytes += summary.bytes;
    Ok(Added {
        summary,
        files: snap.files,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::elf::ElfInfo;

    #[test]
    fn vdso_range_is_read_from_maps() {
        let maps = "\
55d0-55d1 r-xp 00000000 08:01 10 /usr/bin/srv
7ffd0000-7ffd2000 r-xp 00000000 00:00 0                  [vdso]
";
        assert_eq!(vdso_range(maps), Some((0x7ffd0000, 0x7ffd2000)));
        assert_eq!(
            vdso_range("55d0-55d1 r-xp 00000000 08:01 10 /usr/bin/srv\n"),
            None
        );
        // A file named like the vDSO is not it; neither is a huge range.
        assert_eq!(vdso_range("1000-2000 r-xp 0 08:01 10 /x/[vdso]x\n"), None);
        assert_eq!(vdso_range("0-100000000 r-xp 0 00:00 0 [vdso]\n"), None);
    }

    #[test]
    fn own_vdso_is_an_elf_image() {
        let maps = fs::read_to_string("/proc/self/maps").unwrap();
        let Some(range) = vdso_range(&maps) else {
            return; // a kernel booted with vdso=0
        };
        let bytes = read_mem("/proc/self/mem", range).unwrap();
        assert!(bytes.starts_with(b"\x7fELF"));
    }

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
    fn executable_mapping_lines_keep_every_mapping_of_a_file() {
        let maps = "\
55d0-55d1 r--p 00000000 08:01 10 /usr/bin/srv
7f00-7f01 r-xp 00000000 08:01 11 /usr/lib/libc.so.6
7f02-7f03 r-xp 00000000 08:01 11 /usr/lib/libc.so.6
7f04-7f05 r-xp 00000000 00:00 0 \n\
7f08-7f09 rw-p 00000000 00:00 0                  [stack]
7ffd-7ffe r-xp 00000000 00:00 0                  [vdso]
";
        let lines: Vec<String> = executable_mapping_lines(maps).into_iter().collect();
        assert_eq!(
            lines,
            [
                "7f00-7f01 r-xp 00000000 08:01 11 /usr/lib/libc.so.6",
                "7f02-7f03 r-xp 00000000 08:01 11 /usr/lib/libc.so.6",
            ]
        );
    }

    #[test]
    fn debug_candidates_follow_perf_order() {
        let c = debug_candidates(
            "/usr/lib/x86_64-linux-gnu/libc.so.6",
            Some("93ac61ec5a8eb1396f9fbd350e3169a558528a40"),
            Some("libc.so.6.debug"),
        );
        assert_eq!(
            c,
            [
                "/usr/lib/debug/.build-id/93/ac61ec5a8eb1396f9fbd350e3169a558528a40.debug",
                "/usr/lib/x86_64-linux-gnu/libc.so.6.debug",
                "/usr/lib/x86_64-linux-gnu/.debug/libc.so.6.debug",
                "/usr/lib/debug/usr/lib/x86_64-linux-gnu/libc.so.6.debug",
            ]
        );
        assert_eq!(
            debug_candidates("/srv", None, None),
            ["/usr/lib/debug/srv.debug"]
        );
    }

    #[test]
    fn debug_info_is_copied_only_when_it_is_the_binarys() {
        let t = std::env::temp_dir().join(format!("symfs-debug-{}", std::process::id()));
        let _ = fs::remove_dir_all(&t);
        let (root, symfs) = (t.join("root"), t.join("symfs"));
        // snapshot() creates symfs/ before copying into it.
        fs::create_dir_all(&symfs).unwrap();
        let exe = std::env::current_exe().unwrap();
        let info = elf::inspect(&exe).unwrap();
        let Some(id) = info.build_id.clone() else {
            return; // a test binary linked without a build id: nothing to find
        };
        let by_id = format!("/usr/lib/debug/.build-id/{}/{}.debug", &id[..2], &id[2..]);
        let planted = root.join(by_id.trim_start_matches('/'));
        fs::create_dir_all(planted.parent().unwrap()).unwrap();
        let secret = t.join("secret");
        fs::write(&secret, b"root:$6$not-for-symfs\n").unwrap();
        let me = std::process::id();
        let worker = pin(me, sys::proc_stat(me).unwrap().1).unwrap();
        let mut snap = Snap::new(&worker, &symfs, u64::MAX, 0, "");
        snap.root = fs::File::open(&root);
        // A symlink planted where perf looks, to a file that is not ELF: not
        // copied, listed as absent.
        std::os::unix::fs::symlink(&secret, &planted).unwrap();
        snap.debug_info("/opt/app/worker", &info);
        assert!(!symfs.join(by_id.trim_start_matches('/')).exists());
        assert!(
            snap.manifest.contains("\tabsent (for /opt/app/worker"),
            "{}",
            snap.manifest
        );
        // The real thing (an ELF file with the binary's build id): copied.
        fs::remove_file(&planted).unwrap();
        fs::copy(&exe, &planted).unwrap();
        snap.debug_info("/opt/app/worker", &info);
        let copy = symfs.join(by_id.trim_start_matches('/'));
        assert_eq!(fs::read(&copy).unwrap(), fs::read(&exe).unwrap());
        assert_eq!(snap.summary.debug_files, 1);
        assert!(
            snap.manifest.contains("\tcopied (for /opt/app/worker)"),
            "{}",
            snap.manifest
        );
        // Another ELF file (another build id) is not this binary's.
        let other = ElfInfo {
            build_id: Some("00".repeat(20)),
            ..info.clone()
        };
        fs::remove_dir_all(&symfs).unwrap();
        fs::create_dir_all(&symfs).unwrap();
        let zeros = root.join(format!(
            "usr/lib/debug/.build-id/00/{}.debug",
            "0".repeat(38)
        ));
        fs::create_dir_all(zeros.parent().unwrap()).unwrap();
        fs::rename(&planted, &zeros).unwrap();
        snap.debug_info("/opt/app/worker", &other);
        assert!(
            fs::read_dir(&symfs).unwrap().next().is_none(),
            "nothing copied"
        );
        assert_eq!(snap.summary.debug_files, 1);
        fs::remove_dir_all(&t).unwrap();
    }

    #[test]
    fn files_mapped_after_the_snapshot_are_added_within_the_limit() {
        let dir = std::env::temp_dir().join(format!("symfs-add-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let me = std::process::id();
        let start = sys::proc_stat(me).unwrap().1;
        let (_, mut held) = snapshot(me, start, &dir, u64::MAX).unwrap();
        // Nothing mapped since: nothing added, nothing rewritten.
        let before = fs::read_to_string(dir.join("symbol-manifest.tsv")).unwrap();
        assert_eq!(
            add_new(me, start, &dir, u64::MAX, &mut held, " [late]").unwrap(),
            Added::default()
        );
        assert_eq!(
            fs::read_to_string(dir.join("symbol-manifest.tsv")).unwrap(),
            before
        );
        // As if the test binary had been mapped after the snapshot.
        let exe = std::env::current_exe().unwrap();
        let exe_s = exe.to_str().unwrap().to_string();
        let rel = exe.strip_prefix("/").unwrap().to_path_buf();
        assert!(held.paths.remove(&exe_s));
        let size = fs::metadata(dir.join("symfs").join(&rel)).unwrap().len();
        fs::remove_file(dir.join("symfs").join(&rel)).unwrap();
        held.bytes -= size;
        // No room left: skipped, counted, listed.
        let mut full = held.clone();
        let a = add_new(me, start, &dir, full.bytes, &mut full, " [late]").unwrap();
        assert_eq!((a.summary.copied, a.summary.skipped), (0, 1), "{a:?}");
        assert!(a.files.is_empty());
        assert!(!dir.join("symfs").join(&rel).exists());
        // Room: copied, listed after the first rows with the note.
        let a = add_new(me, start, &dir, u64::MAX, &mut held, " [late]").unwrap();
        assert_eq!(a.summary.copied, 1 + a.summary.debug_files, "{a:?}");
        assert_eq!(a.files[0], rel);
        assert_eq!(
            fs::read(dir.join("symfs").join(&rel)).unwrap(),
            fs::read(&exe).unwrap()
        );
        assert_eq!(held.bytes, a.summary.bytes + full.bytes);
        let manifest = fs::read_to_string(dir.join("symbol-manifest.tsv")).unwrap();
        assert!(manifest.starts_with(&before), "{manifest}");
        assert!(
            manifest.contains(&format!("binary\t{exe_s}\t{size}\t")),
            "{manifest}"
        );
        assert!(manifest.contains("\tcopied [late]\n"), "{manifest}");
        assert!(manifest.contains("--symfs-limit"), "{manifest}");
        // Added once only.
        assert_eq!(
            add_new(me, start, &dir, u64::MAX, &mut held, " [late]").unwrap(),
            Added::default()
        );
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn hidden_kallsyms_addresses_are_detected() {
        assert!(kallsyms_has_addresses(
            b"0000000000000000 A fixed_percpu_data\nffffffff81000000 T _stext\n"
        ));
        assert!(!kallsyms_has_addresses(
            b"0000000000000000 A fixed_percpu_data\n0000000000000000 T _stext\n"
        ));
        assert!(!kallsyms_has_addresses(b""));
    }

    #[test]
    fn snapshots_this_process_within_the_limit() {
        let dir = std::env::temp_dir().join(format!("symfs-test-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let me = std::process::id();
        let start = sys::proc_stat(me).unwrap().1;
        let (s, _) = snapshot(me, start, &dir, 1).unwrap();
        assert_eq!(s.copied, 0);
        assert!(s.skipped >= 1);
        let manifest = fs::read_to_string(dir.join("symbol-manifest.tsv")).unwrap();
        assert!(manifest.starts_with(MANIFEST_HEADER), "{manifest}");
        assert!(manifest.contains("\tskipped: --symfs-limit"), "{manifest}");
        assert!(!dir.join(KALLSYMS).exists());
        fs::remove_dir_all(&dir).unwrap();
        fs::create_dir_all(&dir).unwrap();
        let (s, _) = snapshot(me, start, &dir, u64::MAX).unwrap();
        assert!(s.copied >= 1, "{s:?}");
        let exe = std::env::current_exe().unwrap();
        assert!(dir
            .join("symfs")
            .join(exe.strip_prefix("/").unwrap())
            .is_file());
        let manifest = fs::read_to_string(dir.join("symbol-manifest.tsv")).unwrap();
        for line in manifest.lines() {
            assert_eq!(line.split('\t').count(), 5, "{line}");
        }
        // Every binary row has a debuginfo row after it.
        let binaries = manifest
            .lines()
            .filter(|l| l.starts_with("binary\t"))
            .count();
        let debug = manifest
            .lines()
            .filter(|l| l.starts_with("debuginfo\t"))
            .count();
        assert!(debug >= binaries.saturating_sub(1), "{manifest}");
        // The kernel table is kept exactly when this process can see it.
        let live = fs::read("/proc/kallsyms").unwrap_or_default();
        assert_eq!(s.kallsyms, kallsyms_has_addresses(&live), "{manifest}");
        assert_eq!(dir.join(KALLSYMS).is_file(), s.kallsyms);
        // Separate debug files that exist on this machine are copied to the
        // same path under symfs/.
        for line in manifest.lines().filter(|l| l.starts_with("debuginfo\t")) {
            let cols: Vec<&str> = line.split('\t').collect();
            if cols[4].starts_with("copied") {
                let copy = dir.join("symfs").join(cols[1].trim_start_matches('/'));
                assert_eq!(
                    fs::metadata(&copy).unwrap().len(),
                    fs::metadata(cols[1]).unwrap().len()
                );
            } else {
                assert!(cols[4].starts_with("absent"), "{line}");
                for c in cols[1].split(' ') {
                    let other = elf::inspect(Path::new(c)).map(|i| i.build_id);
                    assert!(
                        other.is_err() || other.unwrap().as_deref() != Some(cols[3]),
                        "{c} is the debug info of {line} but was not copied"
                    );
                }
            }
        }
        fs::remove_dir_all(&dir).unwrap();
    }
}
