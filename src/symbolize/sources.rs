//! Which files name a DSO's addresses: one resolver, keyed by build id,
//! that both symbolizers (native and `perf script`), the summary and the
//! log ask.
//!
//! For each DSO a capture recorded (its path and, usually, its GNU build
//! id), [`resolve`] looks at the candidates in this order:
//!
//! 1. the capture's snapshot of the file (`symfs/PATH`);
//! 2. its debug file inside the snapshot: by build id
//!    (`symfs/usr/lib/debug/.build-id/NN/REST.debug`), by the distro paths
//!    (`usr/lib/debug/PATH.debug`, `usr/lib/debug/PATH`), by its
//!    `.gnu_debuglink` (`DIR/NAME`, `DIR/.debug/NAME`,
//!    `usr/lib/debug/DIR/NAME`);
//! 3. this host's debug files by build id: `/usr/lib/debug/.build-id/`,
//!    perf's build-id cache (`~/.debug/.build-id/NN/REST/{elf,debug}`),
//!    each `--debug-dir DIR` (`DIR/.build-id/NN/REST.debug`,
//!    `DIR/NN/REST.debug`), the debuginfod cache
//!    (`$DEBUGINFOD_CACHE_PATH/ID/{executable,debuginfo}`), and for
//!    `[vdso]` this process's own vDSO ([`live_vdso`]);
//! 4. this host's file at the recorded path.
//!
//! A candidate is taken only when its build id equals the recorded one (a
//! capture that recorded none takes files by path, as perf does); a file
//! with another id is a [`Rejected`] candidate, named with both ids. The
//! answer is a pure function of (recorded path, recorded build id,
//! [`Search`]): a per-run store may key on it. This module reads ELF
//! headers and notes only; it loads no symbols.
//!
//! **Another user's capture.** When the capture belongs to someone else
//! than the processing user ([`Search::owner`]: root's `reprocess` over
//! users' result dirs, or a root-owned capture of another user's worker,
//! whose mmaps the recorded paths are), what the capture records is that
//! user's to write,
//! so this host's files are read only as that user could read them: each
//! is opened with the owner's file system credentials
//! ([`crate::sys::creds`]: every directory searched and link followed on
//! the way is checked by the kernel for that user), and the host file at a
//! recorded path is taken only for a recorded build id it carries: a path
//! alone (no build id recorded, or perf's zeros) names nothing. A file the
//! owner may not read, or a path without a build id, is a [`Rejected`]
//! candidate that says so. Files inside the capture's `symfs/` are its
//! own (reached without links) and read as before.
//!
//! **Truncation.** Every symbol file is mapped under the SIGBUS guard in
//! its surviving mode ([`crate::sys::input::Mapping::of_shrinkable`]): a
//! file truncated while it is read (the capture's owner may truncate its
//! `symfs/` at any time) reads as zeros, and the reader, seeing
//! [`Mapping::shrank`], throws away what it read: that DSO is left
//! unnamed, with a warning naming the file, never a crash.

use std::fs::File;
use std::path::{Component, Path, PathBuf};

use object::read::elf::ElfFile64;
use object::{Endianness, Object};

use crate::sys::creds::Creds;
use crate::sys::input::Mapping;

/// Where to look, besides the recorded path.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Search {
    /// The capture's snapshot (`symfs/`), if it has one.
    pub symfs: Option<PathBuf>,
    /// The root under which this host's files are looked up (`/`; `None`:
    /// the host is not searched at all).
    pub host: Option<PathBuf>,
    /// perf's build-id cache (`~/.debug`), when there is one.
    pub buildid_cache: Option<PathBuf>,
    /// `--debug-dir` directories, in the order given.
    pub debug_dirs: Vec<PathBuf>,
    /// The debuginfod client's cache (`$DEBUGINFOD_CACHE_PATH`).
    pub debuginfod: Option<PathBuf>,
    /// The capture's owner, when not (only) the processing user
    /// ([`Creds::of_capture`]): this host's files are opened with the
    /// owner's rights, and taken at a recorded path only by build id.
    pub owner: Option<Creds>,
    /// Whether this process's own vDSO ([`live_vdso`]) is a candidate
    /// for a recorded `[vdso]` with its build id: it is copied only when
    /// such a `[vdso]` is resolved and nothing before it was taken.
    pub live_vdso: bool,
}

impl Search {
    /// The search for a capture with snapshot `symfs` on this host: `/`,
    /// `$HOME/.debug`, `debug_dirs`, and `$DEBUGINFOD_CACHE_PATH` when set;
    /// this host's files read as `owner` could (`None`: the processing
    /// user's own capture).
    pub fn on_this_host(
        symfs: Option<PathBuf>,
        debug_dirs: Vec<PathBuf>,
        owner: Option<Creds>,
    ) -> Search {
        let home = std::env::var_os("HOME").map(PathBuf::from);
        Search {
            symfs,
            host: Some(PathBuf::from("/")),
            buildid_cache: home.map(|h| h.join(".debug")).filter(|d| d.is_dir()),
            debug_dirs,
            debuginfod: std::env::var_os("DEBUGINFOD_CACHE_PATH")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from),
            owner,
            live_vdso: true,
        }
    }
}

/// This process's own vDSO, copied once into a memory file
/// (`/proc/PID/fd/N`, gone with the process). perf names a `[vdso]` it
/// has no copy of from its own vDSO; jobprof does the same, and like every
/// candidate takes it only when its build id is the recorded one (one
/// kernel build maps one vDSO). `None` when it cannot be read.
pub fn live_vdso() -> Option<PathBuf> {
    static VDSO: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    VDSO.get_or_init(|| copy_vdso().ok()).clone()
}

/// The vDSO's bytes, from its start (`AT_SYSINFO_EHDR`) to the end of its
/// `[vdso]` mapping in `/proc/self/maps`, in a memory file kept open.
fn copy_vdso() -> std::io::Result<PathBuf> {
    use std::io::Write;
    use std::os::fd::{FromRawFd, IntoRawFd};
    // SAFETY: reads the process's auxiliary vector; no memory is touched.
    let base = unsafe { libc::getauxval(libc::AT_SYSINFO_EHDR) } as usize;
    let maps = std::fs::read_to_string("/proc/self/maps")?;
    let end = maps
        .lines()
        .filter(|l| l.ends_with("[vdso]"))
        .find_map(|l| {
            let (from, to) = l.split_once(' ')?.0.split_once('-')?;
            let from = usize::from_str_radix(from, 16).ok()?;
            let to = usize::from_str_radix(to, 16).ok()?;
            (from == base && to > base).then_some(to)
        })
        .ok_or_else(|| std::io::Error::other("no [vdso] mapping at AT_SYSINFO_EHDR"))?;
    // SAFETY: the kernel maps the vDSO readable at [base, end) for the
    // whole life of the process, and nothing writes it.
    let bytes = unsafe { std::slice::from_raw_parts(base as *const u8, end - base) };
    // SAFETY: a constant, NUL-terminated name; the result is checked.
    let fd = unsafe { libc::memfd_create(c"jobprof-vdso".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` was just created and is owned by nobody else.
    let mut file = unsafe { File::from_raw_fd(fd) };
    file.write_all(bytes)?;
    // Kept open for the life of the process: the path is its descriptor
    // (by pid, not `self`: `perf script` reads it through its link tree).
    let fd = file.into_raw_fd();
    Ok(PathBuf::from(format!(
        "/proc/{}/fd/{fd}",
        std::process::id()
    )))
}

/// Where a taken file came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// The capture's copy of the file (`symfs/PATH`).
    Snapshot,
    /// A debug file inside the snapshot.
    SnapshotDebug,
    /// This host's `/usr/lib/debug/.build-id/`.
    HostDebug,
    /// perf's build-id cache (`~/.debug`).
    BuildIdCache,
    /// A `--debug-dir` directory.
    DebugDir,
    /// The debuginfod cache.
    Debuginfod,
    /// This host's file at the recorded path.
    HostFile,
    /// This process's own vDSO ([`live_vdso`]).
    LiveVdso,
}

impl Kind {
    /// The words the summary and the log use.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Snapshot => "snapshot",
            Kind::SnapshotDebug => "snapshot debug file",
            Kind::HostDebug => "host debug file",
            Kind::BuildIdCache => "perf build-id cache",
            Kind::DebugDir => "--debug-dir",
            Kind::Debuginfod => "debuginfod cache",
            Kind::HostFile => "host file",
            Kind::LiveVdso => "this host's vDSO",
        }
    }
}

/// One file taken for a DSO.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Source {
    /// The file.
    pub path: PathBuf,
    /// The root it is opened under: the snapshot (reached one name at a
    /// time, never through a link) or `/`.
    pub root: PathBuf,
    /// Where it came from.
    pub kind: Kind,
    /// Its build id, if it has one.
    pub build_id: Option<Vec<u8>>,
    /// Whose rights it is opened with (this host's files of another
    /// user's capture); `None`: the processing user's.
    pub owner: Option<Creds>,
}

impl Source {
    /// The file mapped ([`map_as`]); `None` when it cannot be.
    pub fn map(&self) -> Option<Mapping> {
        map_as(&self.root, &self.path, self.owner.as_ref()).ok()
    }
}

/// A candidate that exists but was not taken: another build id, or (a
/// debug file found by the binary's `.gnu_debuglink`) another CRC.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Rejected {
    /// The file.
    pub path: PathBuf,
    /// Where it would have come from.
    pub kind: Kind,
    /// Its build id (`None`: it has none).
    pub build_id: Option<Vec<u8>>,
    /// Its CRC-32, when it was refused for not being the one the
    /// `.gnu_debuglink` names.
    pub crc: Option<u32>,
    /// Why it was not read at all (another user's capture: a path without
    /// a build id, a file that user may not read, a file that shrank).
    pub refused: Option<&'static str>,
}

/// The files that name one DSO.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Resolved {
    /// The file as it was mapped (its segments, `.dynsym`, PLT, unwind
    /// tables), when one with the right build id was found.
    pub binary: Option<Source>,
    /// Debug files with the right build id, best first (`.symtab`,
    /// `.debug_info`, `.debug_frame`).
    pub debug: Vec<Source>,
    /// Files at candidate paths with another build id.
    pub rejected: Vec<Rejected>,
    /// The build id the capture recorded (empty: none).
    pub recorded: Vec<u8>,
}

impl Resolved {
    /// Every taken file, debug files first (the order symbols are read
    /// in: the first with a `.symtab` names the DSO).
    pub fn files(&self) -> impl Iterator<Item = &Source> {
        self.debug.iter().chain(self.binary.as_ref())
    }

    /// Whether any file was taken.
    pub fn found(&self) -> bool {
        self.binary.is_some() || !self.debug.is_empty()
    }

    /// Where the symbols come from, in one phrase (`snapshot
    /// /s/usr/lib/libc.so.6 + host debug file /usr/lib/debug/...`), or
    /// `none: ...` with the reason (a mismatch names both ids).
    pub fn describe(&self) -> String {
        if self.found() {
            let parts: Vec<String> = self
                .binary
                .iter()
                .chain(self.debug.iter().take(1))
                .map(|s| format!("{} {}", s.kind.as_str(), s.path.display()))
                .collect();
            return parts.join(" + ");
        }
        match self.rejected.first() {
            Some(Rejected {
                path,
                kind,
                refused: Some(why),
                ..
            }) => format!("none: {} {} not read: {why}", kind.as_str(), path.display()),
            Some(r) => format!(
                "none: {} {} has build id {}, the capture recorded {}",
                r.kind.as_str(),
                r.path.display(),
                r.build_id
                    .as_deref()
                    .map_or_else(|| "(none)".to_string(), crate::sys::digest::hex),
                crate::sys::digest::hex(&self.recorded)
            ),
            None => "none: no file with its build id in the snapshot or on this host".into(),
        }
    }
}

/// The files that name the DSO recorded at `path` with `build_id` (empty:
/// none recorded), searched as `search` says. A recorded path that climbs
/// (`..`) or is not absolute names no file (`[vdso]` excepted: the
/// snapshot's copy, or a copy by build id in perf's cache or debuginfod's).
pub fn resolve(path: &str, build_id: &[u8], search: &Search) -> Resolved {
    let mut r = Resolved {
        recorded: build_id.to_vec(),
        ..Resolved::default()
    };
    let vdso = path == "[vdso]";
    if !vdso
        && (!path.starts_with('/')
            || path.starts_with("//")
            || Path::new(path)
                .components()
                .any(|c| c == Component::ParentDir))
    {
        return r;
    }
    let rel = path.trim_start_matches('/');
    let mut hex = real_id(build_id).map(crate::sys::digest::hex);
    if let Some(symfs) = &search.symfs {
        r.offer(symfs, symfs.join(rel), Kind::Snapshot, true);
        if hex.is_none() {
            hex = r.adopt_binary_id(search);
        }
        for p in snapshot_debug(symfs, rel, hex.as_deref()) {
            r.offer(symfs, p, Kind::SnapshotDebug, false);
        }
        if let Some((link, crc)) = r.binary.as_ref().and_then(debuglink) {
            let dir = Path::new(rel).parent().unwrap_or(Path::new(""));
            for p in [
                symfs.join(dir).join(&link),
                symfs.join(dir).join(".debug").join(&link),
                symfs.join("usr/lib/debug").join(dir).join(&link),
            ] {
                r.offer_checked(symfs, p, Kind::SnapshotDebug, false, Some(crc), None);
            }
        }
    }
    if let Some(host) = &search.host {
        if hex.is_none() && !vdso && search.owner.is_none() {
            r.offer_host_file(host.join(rel), host, false, search);
            hex = r.adopt_binary_id(search);
        }
        if let Some(hex) = &hex {
            r.offer_host_debug(host, hex, search);
        }
        // The vDSO is no file on this host: only its copies by build id.
        if !vdso {
            r.offer_host_file(host.join(rel), host, hex.is_some(), search);
        }
        // This process's own vDSO, when its build id is the recorded one;
        // copied only now, and only when no other file was taken.
        if vdso && search.live_vdso && hex.is_some() && r.binary.is_none() {
            if let Some(live) = live_vdso() {
                r.offer(Path::new("/"), live, Kind::LiveVdso, true);
            }
        }
    }
    r.recorded = build_id.to_vec();
    r
}

impl Resolved {
    /// A capture that recorded no build id for a DSO (perf records ids
    /// only for DSOs its samples hit; one met only in call chains has
    /// none): the taken binary's own id, which from here on every
    /// candidate must carry, as perf's `dso__load` reads the id of the
    /// file it opened and looks for debug files by it (libc's symbols in
    /// `/usr/lib/debug/.build-id/`). The processing user's captures only:
    /// another user's binary is theirs to forge.
    fn adopt_binary_id(&mut self, search: &Search) -> Option<String> {
        let id = self.binary.as_ref()?.build_id.as_deref()?;
        if search.owner.is_some() || real_id(id).is_none() {
            return None;
        }
        self.recorded = id.to_vec();
        Some(crate::sys::digest::hex(id))
    }

    /// Offers this host's debug files of build id `hex` (hex digits)
    /// under `host`, and the build-id cache's, `--debug-dir`'s and
    /// debuginfod's, opened as [`Search::owner`] when there is one.
    fn offer_host_debug(&mut self, host: &Path, hex: &str, search: &Search) {
        // Directories named by absolute paths (given, or from the
        // environment) are opened as this host's files.
        let abs = Path::new("/");
        let owner = search.owner.as_ref();
        let (nn, rest) = hex.split_at(2);
        let by_id = format!(".build-id/{nn}/{rest}.debug");
        let debug = host.join("usr/lib/debug").join(&by_id);
        self.offer_as(host, debug, Kind::HostDebug, false, owner);
        if let Some(cache) = &search.buildid_cache {
            let entry = cache.join(format!(".build-id/{nn}/{rest}"));
            self.offer_as(abs, entry.join("elf"), Kind::BuildIdCache, true, owner);
            self.offer_as(abs, entry.join("debug"), Kind::BuildIdCache, false, owner);
        }
        for d in &search.debug_dirs {
            self.offer_as(abs, d.join(&by_id), Kind::DebugDir, false, owner);
            let flat = d.join(format!("{nn}/{rest}.debug"));
            self.offer_as(host, flat, Kind::DebugDir, false, owner);
        }
        if let Some(cache) = &search.debuginfod {
            let entry = cache.join(hex);
            self.offer_as(
                host,
                entry.join("executable"),
                Kind::Debuginfod,
                true,
                owner,
            );
            self.offer_as(
                host,
                entry.join("debuginfo"),
                Kind::Debuginfod,
                false,
                owner,
            );
        }
    }

    /// Offers this host's file `at` (the recorded path under `host`); for
    /// another user's capture ([`Search::owner`]) only when a build id was
    /// recorded (`by_id`), never by the path alone.
    fn offer_host_file(&mut self, at: PathBuf, host: &Path, by_id: bool, search: &Search) {
        match &search.owner {
            Some(_) if !by_id && self.binary.is_none() => self.refuse(at, Kind::HostFile, NO_ID),
            Some(_) if !by_id => {}
            owner => self.offer_as(host, at, Kind::HostFile, true, owner.as_ref()),
        }
    }
}

/// Why the host file at a recorded path is not read for another user's
/// capture without a build id.
const NO_ID: &str = "the capture recorded no build id, and another user's capture \
                     takes this host's files by build id only";

/// The recorded id, unless it is missing or all zeros (perf's padding of
/// an id it could not read).
fn real_id(id: &[u8]) -> Option<&[u8]> {
    (id.len() > 1 && id.iter().any(|&b| b != 0)).then_some(id)
}

/// Whether a file's id `found` is the recorded `recorded`: equal, or
/// `recorded` is `found` padded with zeros (perf pads ids to 20 bytes).
pub fn same_id(recorded: &[u8], found: &[u8]) -> bool {
    !found.is_empty()
        && recorded.len() >= found.len()
        && recorded[..found.len()] == *found
        && recorded[found.len()..].iter().all(|&b| b == 0)
}

/// The debug-file paths perf tries under a snapshot, in its order.
fn snapshot_debug(symfs: &Path, rel: &str, hex: Option<&str>) -> Vec<PathBuf> {
    let mut v = vec![
        symfs.join("usr/lib/debug").join(format!("{rel}.debug")),
        symfs.join("usr/lib/debug").join(rel),
    ];
    if let Some(hex) = hex {
        let (nn, rest) = hex.split_at(2);
        v.insert(
            0,
            symfs.join(format!("usr/lib/debug/.build-id/{nn}/{rest}.debug")),
        );
    }
    v
}

/// The `.gnu_debuglink` of a taken file: the debug file's name and the
/// CRC-32 of its contents.
fn debuglink(s: &Source) -> Option<(PathBuf, u32)> {
    let map = s.map()?;
    let file = ElfFile64::<Endianness>::parse(&map[..]).ok()?;
    let (name, crc) = file.gnu_debuglink().ok().flatten()?;
    let name = std::str::from_utf8(name).ok()?.to_string();
    if map.shrank() {
        return None;
    }
    // A bare file name only: a link cannot point elsewhere.
    (!name.is_empty() && !name.contains('/') && name != "..").then(|| (PathBuf::from(name), crc))
}

impl Resolved {
    /// Looks at the ELF file `path` (under `root`) and takes it as the
    /// binary (`binary`) or a debug file when its build id is the recorded
    /// one; a file with another id is remembered as rejected. A missing
    /// file, or one that is not ELF, is passed over.
    fn offer(&mut self, root: &Path, path: PathBuf, kind: Kind, binary: bool) {
        self.offer_checked(root, path, kind, binary, None, None);
    }

    /// [`Self::offer`] of a file opened with `owner`'s rights.
    fn offer_as(
        &mut self,
        root: &Path,
        path: PathBuf,
        kind: Kind,
        binary: bool,
        owner: Option<&Creds>,
    ) {
        self.offer_checked(root, path, kind, binary, None, owner);
    }

    /// Notes `path` as a candidate not read at all, and why.
    fn refuse(&mut self, path: PathBuf, kind: Kind, why: &'static str) {
        self.rejected.push(Rejected {
            path,
            kind,
            build_id: None,
            crc: None,
            refused: Some(why),
        });
    }

    /// [`Self::offer`], and when `crc` is given (a debug file found by a
    /// `.gnu_debuglink`) and the capture recorded no build id, only a file
    /// whose CRC-32 is that one, as gdb checks it: a stale or foreign file
    /// under the linked name is never read.
    fn offer_checked(
        &mut self,
        root: &Path,
        path: PathBuf,
        kind: Kind,
        binary: bool,
        crc: Option<u32>,
        owner: Option<&Creds>,
    ) {
        if binary && self.binary.is_some() {
            return;
        }
        if self.files().any(|s| s.path == path) {
            return;
        }
        let map = match map_as(root, &path, owner) {
            Ok(map) => map,
            Err(e) if owner.is_some() && denied(&e) => return self.refuse(path, kind, DENIED),
            Err(_) => return,
        };
        let Ok(file) = ElfFile64::<Endianness>::parse(&map[..]) else {
            return;
        };
        let found = file.build_id().ok().flatten().map(<[u8]>::to_vec);
        let ok = match (real_id(&self.recorded), &found) {
            (None, _) => true,
            (Some(want), Some(have)) => same_id(want, have),
            (Some(_), None) => false,
        };
        // A build id recorded and matched says more than a CRC (and costs
        // no read of the whole file); without one, the CRC decides.
        let crc = crc
            .filter(|_| real_id(&self.recorded).is_none())
            .map(|want| (want, crc32fast::hash(&map[..])));
        let crc_ok = crc.is_none_or(|(want, have)| want == have);
        if map.shrank() {
            return self.refuse(path, kind, SHRANK);
        }
        if !ok || !crc_ok {
            self.rejected.push(Rejected {
                path,
                kind,
                build_id: found,
                crc: crc.filter(|_| !crc_ok).map(|(_, have)| have),
                refused: None,
            });
            return;
        }
        let source = Source {
            path,
            root: root.to_path_buf(),
            kind,
            build_id: found,
            owner: owner.cloned(),
        };
        if binary {
            self.binary = Some(source);
        } else {
            self.debug.push(source);
        }
    }
}

/// A symbol file that shrank while it was read: what it gave was thrown
/// away (the loaders' error; the log names the file).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shrank(pub PathBuf);

/// Why a host file is not read for another user's capture: that user
/// may not.
const DENIED: &str = "the capture's owner may not read it";
/// Why a file is not taken: it shrank while it was read.
const SHRANK: &str = "it shrank while it was read (truncated by another process?)";

/// Whether `e` is a refusal by the file system's permissions.
fn denied(e: &crate::Error) -> bool {
    matches!(e, crate::Error::Io { source, .. } if source.kind() == std::io::ErrorKind::PermissionDenied)
}

/// Maps the symbol file `p` found under `root` ([`map_as`]), with the
/// processing user's rights.
pub fn map_file(root: &Path, p: &Path) -> Option<Mapping> {
    map_as(root, p, None).ok()
}

/// Maps the symbol file `p` found under `root` ([`open_symbol_file`]),
/// opened with `owner`'s rights when given, under the SIGBUS guard's
/// surviving mode: a file truncated while it is read reads as zeros and
/// the map says it [`Mapping::shrank`] (its readers throw away what they
/// read).
pub fn map_as(root: &Path, p: &Path, owner: Option<&Creds>) -> crate::Result<Mapping> {
    let f = open_as(root, p, owner)?;
    // SAFETY: a symbol file under a capture's symfs/, which its owner may
    // truncate or rewrite at any time, or this host's files. A truncation
    // is survived (the guard's zero pages); what is read is parsed as
    // untrusted input by `object` and `gimli` (bounds-checked), never
    // relied on for memory safety.
    unsafe { Mapping::of_shrinkable(&f, p) }.map_err(|e| crate::Error::io(p, e))
}

/// Opens the symbol file `p` found under `root` ([`open_symbol_file`]),
/// with `owner`'s rights when given (on this thread alone, for the open).
pub fn open_as(root: &Path, p: &Path, owner: Option<&Creds>) -> crate::Result<File> {
    match owner {
        Some(c) => c
            .run(|| open_symbol_file(root, p).map_err(std::io::Error::other))
            .map_err(|e| unwrap_io(p, e)),
        None => open_symbol_file(root, p),
    }
}

/// The library error carried through [`Creds::run`]'s `io::Error`, or an
/// error naming `p` for the credentials' own failure.
fn unwrap_io(p: &Path, e: std::io::Error) -> crate::Error {
    match e.downcast::<crate::Error>() {
        Ok(inner) => inner,
        Err(e) => crate::Error::io(p, e),
    }
}

/// Opens the symbol file `p` found under `root`. Under a capture's
/// `symfs/` it is reached from there one name at a time, never through a
/// symbolic link (a link there could show a file the capture's owner may
/// not read: docs/reliability.md); under `/` (this host's files) links are
/// followed, as perf does. A FIFO or device is refused either way, without
/// blocking.
pub fn open_symbol_file(root: &Path, p: &Path) -> crate::Result<File> {
    use crate::sys::input::{open_regular, Links};
    if root == Path::new("/") {
        return open_regular(p, Links::Follow);
    }
    let not_under = || {
        crate::Error::io(
            p,
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "is not under the symfs"),
        )
    };
    let rel = p.strip_prefix(root).map_err(|_| not_under())?;
    let name = rel.file_name().ok_or_else(not_under)?;
    let parent = rel.parent().unwrap_or(Path::new(""));
    crate::sys::confined::Dir::open(root)?
        .walk(parent, false)?
        .open_read(name)
}

#[cfg(test)]
mod tests;
