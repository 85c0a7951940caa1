//! The one atomic-write helper: every output file jobprof writes goes through
//! here.
//!
//! Data is written to a temporary file in the destination's own directory
//! (so the final `rename` never crosses a filesystem), flushed and fsynced,
//! then renamed over the destination. Outputs that a later marker vouches
//! for can skip the fsync ([`AtomicFile::create_deferred`]): a crash may
//! then leave them empty or short, which the sizes recorded in a capture's
//! completion marker reveal; a killed process never can. A
//! reader therefore sees either the old file or the complete new one, never
//! a partial file; if the writer is dropped without [`AtomicFile::commit`]
//! (an error, a panic, a kill), the temporary file is removed and the
//! destination is untouched. A full disk is an error naming the
//! destination, and the previous file stays as it was.
//!
//! Modes: the output keeps the permission bits of the file it replaces; a
//! new one gets `0666 & ~umask`, from the `open(2)` that creates the
//! temporary file (the process umask is never read or changed, so parallel
//! commits cannot race on it). [`AtomicFile::limit_mode`] can narrow that
//! further (derived files never more readable than a capture's raw data).
//!
//! Two policies for what already sits at the destination:
//! - [`Follow`](Destination::Follow), for paths the user typed (`-o`): a
//!   destination that is not a regular file (`/dev/null`, a FIFO,
//!   `/dev/stdout` on a pipe) is opened and written in place, and a
//!   symbolic link is followed and its target replaced, so that
//!   `latest.svg -> run42.svg` stays a link.
//! - [`Confined`](Destination::Confined), for everything jobprof writes on
//!   its own inside result and report trees: a symbolic link or a special
//!   file at the destination is refused with an error naming it, and the
//!   rename replaces the directory entry itself, so nothing outside the tree
//!   is ever written, whatever another user planted there.
//!
//! This module does not decide *what* to write or *where*.

use std::fs;
use std::io::{self, BufWriter, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use std::ffi::{OsStr, OsString};

use crate::error::{Error, Result};
pub use crate::sys::confined::Dir;
use crate::sys::confined::Entry;

/// What to do with a symbolic link or special file at the destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Destination {
    /// A path the user named: follow links, write devices and pipes in place.
    Follow,
    /// A path jobprof chose inside a result or report tree: refuse links and
    /// special files.
    Confined,
}

/// A file being written atomically. Write to it, then [`commit`](Self::commit).
pub struct AtomicFile {
    dest: PathBuf,
    writer: BufWriter<Sink>,
    fsync: bool,
    /// Permission bits the committed file gets (`None`: as created).
    mode: Option<u32>,
}

/// Where the bytes go before `commit`.
enum Sink {
    /// A temporary file next to the destination, renamed onto it.
    Temp(tempfile::NamedTempFile),
    /// A temporary file in a confined directory, renamed onto its entry
    /// with `renameat(2)` (never through a link).
    At(TempAt),
    /// The destination itself: a device, FIFO or other non-regular file.
    InPlace(fs::File),
}

/// A temporary file created with `O_EXCL | O_NOFOLLOW` in a [`Dir`],
/// removed when dropped uncommitted.
struct TempAt {
    dir: Dir,
    tmp: OsString,
    name: OsString,
    file: fs::File,
    kept: bool,
}

impl Drop for TempAt {
    fn drop(&mut self) {
        if !self.kept {
            let _ = self.dir.remove_file(&self.tmp);
        }
    }
}

/// The temporary's name for `name`: `.NAME.HOST-PID-N.tmp`, naming its
/// writer, so that a leftover whose writer still runs is told from one a
/// killed run left ([`leftover_is_stale`]).
fn temp_name(name: &OsStr, n: u64) -> OsString {
    let mut t = OsString::from(".");
    t.push(name);
    t.push(format!(".{}-{}-{n}.tmp", host(), std::process::id()));
    t
}

/// This host's name (without dots and dashes' ambiguity: `-` kept, the
/// parser reads pid and counter from the end).
fn host() -> &'static str {
    static HOST: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    HOST.get_or_init(|| {
        let mut buf = [0u8; 256];
        // SAFETY: a valid buffer of the given length.
        let ok = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } == 0;
        let end = buf.iter().position(|&b| b == 0).unwrap_or(0);
        let h = String::from_utf8_lossy(&buf[..end]).into_owned();
        if ok && !h.is_empty() && !h.contains('/') {
            h
        } else {
            "host".into()
        }
    })
}

/// Whether `file`, a temporary left beside `dest_name` (`.DEST.*.tmp`),
/// may be removed: its writer, named in it, is no longer running on this
/// host. A temporary written on another host is stale only once it is a
/// day old; one without a writer in its name (older jobprof versions) is
/// stale. `None` when `file` is no temporary of `dest_name`.
pub fn leftover_is_stale(file: &OsStr, dest_name: &str, age: std::time::Duration) -> Option<bool> {
    let s = file.to_str()?;
    let rest = s
        .strip_prefix(&format!(".{dest_name}."))?
        .strip_suffix(".tmp")?;
    let mut parts = rest.rsplitn(3, '-');
    let (n, pid, host_part) = (parts.next(), parts.next(), parts.next());
    let (Some(n), Some(pid), Some(h)) = (n, pid, host_part) else {
        return Some(true);
    };
    let Ok(pid) = pid.parse::<libc::pid_t>() else {
        return Some(true);
    };
    if pid <= 0 || n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
        return Some(true);
    }
    if h != host() {
        return Some(age > std::time::Duration::from_secs(24 * 3600));
    }
    // SAFETY: signal 0 only checks for existence.
    let r = unsafe { libc::kill(pid, 0) };
    let alive = r == 0 || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
    Some(!alive)
}

/// Removes the temporaries of `names` in `dir` that [`leftover_is_stale`]
/// calls stale (a killed run's); returns how many. Never follows a link.
pub fn remove_leftovers_in(dir: &Dir, names: &[&str]) -> usize {
    let Ok(entries) = dir.names() else {
        return 0;
    };
    let mut removed = 0;
    for e in entries {
        let age = || {
            fs::symlink_metadata(dir.join(&e))
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
                .unwrap_or_default()
        };
        let stale = names
            .iter()
            .any(|n| leftover_is_stale(&e, n, age()) == Some(true));
        if stale && dir.remove_file(&e).is_ok() {
            removed += 1;
        }
    }
    removed
}

impl TempAt {
    fn create(dir: Dir, name: &OsStr) -> Result<TempAt> {
        use std::sync::atomic::{AtomicU64, Ordering};
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        loop {
            let tmp = temp_name(name, COUNTER.fetch_add(1, Ordering::Relaxed));
            match dir.open_at(&tmp, libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL, 0o666) {
                Ok(file) => {
                    return Ok(TempAt {
                        dir,
                        tmp,
                        name: name.to_os_string(),
                        file,
                        kept: false,
                    })
                }
                Err(Error::Io { source, .. }) if source.kind() == io::ErrorKind::AlreadyExists => {}
                Err(Error::Io { source, .. }) => return Err(Error::io(dir.join(name), source)),
                Err(e) => return Err(e),
            }
        }
    }
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Sink::Temp(t) => t.write(buf),
            Sink::At(t) => t.file.write(buf),
            Sink::InPlace(f) => f.write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Sink::Temp(t) => t.flush(),
            Sink::At(t) => t.file.flush(),
            Sink::InPlace(f) => f.flush(),
        }
    }
}

/// Whether `dest` exists and is something other than a regular file (or a
/// directory, which the temporary-file path reports properly), following
/// symbolic links.
fn is_special(dest: &Path) -> bool {
    fs::metadata(dest).is_ok_and(|m| !m.is_file() && !m.is_dir())
}

/// `dest` with a symbolic link (chain) resolved, so that the rename replaces
/// the link's target, not the link; `dest` itself when it is no link or
/// the link dangles.
fn resolve_link(dest: &Path) -> PathBuf {
    match fs::symlink_metadata(dest) {
        Ok(m) if m.file_type().is_symlink() => {
            fs::canonicalize(dest).unwrap_or_else(|_| dest.to_path_buf())
        }
        _ => dest.to_path_buf(),
    }
}

impl AtomicFile {
    /// Starts writing `dest`, a path the user named
    /// ([`Destination::Follow`]). [`commit`](Self::commit) fsyncs it before
    /// the rename.
    pub fn create(dest: impl AsRef<Path>) -> Result<Self> {
        Self::open(dest.as_ref(), Destination::Follow, true)
    }

    /// Like [`create`](Self::create), but `commit` does not fsync: for
    /// outputs whose completeness is checked another way (the marker's
    /// recorded sizes). Still atomic against a killed process.
    pub fn create_deferred(dest: impl AsRef<Path>) -> Result<Self> {
        Self::open(dest.as_ref(), Destination::Follow, false)
    }

    /// Starts writing `dest` with the given policy; `fsync` as in
    /// [`create`](Self::create) and [`create_deferred`](Self::create_deferred).
    pub fn open(asked: &Path, policy: Destination, fsync: bool) -> Result<Self> {
        let dest = match policy {
            Destination::Confined => {
                let (dir, name) = Dir::parent_of(asked)?;
                return Self::create_in(&dir, name, fsync);
            }
            Destination::Follow if is_special(asked) => {
                let file = fs::OpenOptions::new()
                    .write(true)
                    .open(asked)
                    .map_err(|e| Error::io(asked, e))?;
                return Ok(AtomicFile {
                    dest: asked.to_path_buf(),
                    writer: BufWriter::with_capacity(1 << 20, Sink::InPlace(file)),
                    fsync: false,
                    mode: None,
                });
            }
            Destination::Follow => resolve_link(asked),
        };
        let dir = match dest.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let name = dest
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "output".to_string());
        // The mode of the file replaced (lstat: a confined destination is a
        // regular file here); a new file: 0666 & ~umask from open(2) itself.
        let mode = fs::symlink_metadata(&dest)
            .ok()
            .filter(|m| m.is_file())
            .map(|m| m.mode() & 0o7777);
        let tmp = tempfile::Builder::new()
            .prefix(&format!(".{name}."))
            .suffix(".tmp")
            .permissions(fs::Permissions::from_mode(0o666))
            .tempfile_in(&dir)
            .map_err(|e| Error::io(&dest, without_temp_path(e)))?;
        Ok(AtomicFile {
            dest,
            writer: BufWriter::with_capacity(1 << 20, Sink::Temp(tmp)),
            fsync,
            mode,
        })
    }

    /// Starts writing the file `name` in the confined directory `dir`: a
    /// link or special file there is refused with an error naming it, the
    /// temporary is created with `O_EXCL | O_NOFOLLOW` beside it and the
    /// commit is a `renameat(2)` in the same directory, so nothing is
    /// written outside it whatever is planted or swapped in.
    pub fn create_in(dir: &Dir, name: impl AsRef<OsStr>, fsync: bool) -> Result<Self> {
        let name = name.as_ref();
        let dest = dir.join(name);
        let mode = match dir.entry(name)? {
            Some(e) => match e.non_regular() {
                Some(what) => return Err(crate::sys::file_kind::not_plain(&dest, what)),
                None => Some(e.mode & 0o7777),
            },
            None => None,
        };
        let tmp = TempAt::create(dir.try_clone()?, name)?;
        Ok(AtomicFile {
            dest,
            writer: BufWriter::with_capacity(1 << 20, Sink::At(tmp)),
            fsync,
            mode,
        })
    }

    /// Never more readable than `raw`'s mode allows the group and others:
    /// derived outputs of a capture follow the capture's raw data.
    pub fn limit_mode(&mut self, raw: u32) {
        let file = match self.writer.get_ref() {
            Sink::Temp(t) => t.as_file(),
            Sink::At(t) => &t.file,
            Sink::InPlace(_) => return,
        };
        let current = self
            .mode
            .unwrap_or_else(|| file.metadata().map(|m| m.mode() & 0o7777).unwrap_or(0o600));
        self.mode = Some(current & (raw | 0o700));
    }

    /// The final path this file will have once committed.
    pub fn path(&self) -> &Path {
        &self.dest
    }

    /// Flushes, fsyncs and renames the temporary file onto the destination,
    /// with the mode of the file it replaces (or `0666 & ~umask`).
    pub fn commit(self) -> Result<()> {
        self.commit_identified().map(drop)
    }

    /// [`Self::commit`], and what the committed file was when it was
    /// renamed into place (taken from its descriptor, so it is this
    /// file's even if another is renamed over it at once); `None` for a
    /// file written in place.
    pub fn commit_identified(self) -> Result<Option<Entry>> {
        let fsync = self.fsync;
        let dest = self.dest;
        let sink = self
            .writer
            .into_inner()
            .map_err(|e| Error::io(&dest, e.into_error()))?;
        let tmp = match sink {
            Sink::Temp(tmp) => tmp,
            Sink::At(tmp) => return commit_at(tmp, self.mode, fsync, &dest).map(Some),
            // Written in place; nothing to rename (and fsync means nothing
            // for a device or a pipe).
            Sink::InPlace(_) => return Ok(None),
        };
        if let Some(mode) = self.mode {
            tmp.as_file()
                .set_permissions(fs::Permissions::from_mode(mode))
                .map_err(|e| Error::io(&dest, e))?;
        }
        if fsync {
            tmp.as_file().sync_all().map_err(|e| Error::io(&dest, e))?;
        }
        let entry = identify(tmp.as_file(), &dest)?;
        tmp.persist(&dest).map_err(|e| Error::io(&dest, e.error))?;
        Ok(Some(entry))
    }
}

/// The identity of the temporary file `f` about to become `dest`.
fn identify(f: &fs::File, dest: &Path) -> Result<Entry> {
    f.metadata()
        .map(|m| Entry::of(&m))
        .map_err(|e| Error::io(dest, e))
}

/// The confined commit: mode, fsync, `renameat` onto the entry.
fn commit_at(mut tmp: TempAt, mode: Option<u32>, fsync: bool, dest: &Path) -> Result<Entry> {
    if let Some(mode) = mode {
        tmp.file
            .set_permissions(fs::Permissions::from_mode(mode))
            .map_err(|e| Error::io(dest, e))?;
    }
    if fsync {
        tmp.file.sync_all().map_err(|e| Error::io(dest, e))?;
    }
    let entry = identify(&tmp.file, dest)?;
    tmp.dir.rename(&tmp.tmp, &tmp.name)?;
    tmp.kept = true;
    Ok(entry)
}

/// Writes `bytes` to the file `name` in the confined directory `dir`
/// ([`AtomicFile::create_in`]).
pub fn write_in(dir: &Dir, name: impl AsRef<OsStr>, fsync: bool, bytes: &[u8]) -> Result<()> {
    let name = name.as_ref();
    let mut f = AtomicFile::create_in(dir, name, fsync)?;
    f.write_all(bytes)
        .map_err(|e| Error::io(dir.join(name), e))?;
    f.commit()
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.writer.write(buf)
    }
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.writer.write_all(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.writer.flush()
    }
}

/// Writes `bytes` to `dest` atomically.
pub fn write_atomic(dest: impl AsRef<Path>, bytes: &[u8]) -> Result<()> {
    write_with(dest.as_ref(), Destination::Follow, true, bytes)
}

/// Writes `bytes` to `dest` atomically without fsync (see
/// [`AtomicFile::create_deferred`]).
pub fn write_atomic_deferred(dest: impl AsRef<Path>, bytes: &[u8]) -> Result<()> {
    write_with(dest.as_ref(), Destination::Follow, false, bytes)
}

/// Writes `bytes` to `dest` atomically with the given policy.
pub fn write_with(dest: &Path, policy: Destination, fsync: bool, bytes: &[u8]) -> Result<()> {
    let mut f = AtomicFile::open(dest, policy, fsync)?;
    f.write_all(bytes).map_err(|e| Error::io(dest, e))?;
    f.commit()
}

/// The error of creating a temporary file without the temporary's name,
/// which tempfile appends (`... at path "/dir/.out.folded.PQAs0x.tmp"`):
/// the message names the user's file, never a name jobprof made up.
fn without_temp_path(e: io::Error) -> io::Error {
    // tempfile wraps the OS error in its own `PathError`, whose `source`
    // skips the OS error: its text is all there is to go by.
    let text = e.get_ref().map(ToString::to_string);
    match text.as_deref().and_then(|t| t.split_once(" at path ")) {
        Some((what, _)) => io::Error::new(e.kind(), what.to_string()),
        None => e,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commit_replaces_destination() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("out.txt");
        fs::write(&dest, b"old").unwrap();
        write_atomic(&dest, b"new").unwrap();
        assert_eq!(fs::read(&dest).unwrap(), b"new");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn drop_without_commit_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("out.txt");
        {
            let mut f = AtomicFile::create(&dest).unwrap();
            f.write_all(b"partial").unwrap();
        }
        assert!(!dest.exists());
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn deferred_commit_replaces_destination() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("a.txt");
        fs::write(&dest, b"old").unwrap();
        write_atomic_deferred(&dest, b"deferred").unwrap();
        assert_eq!(fs::read(&dest).unwrap(), b"deferred");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_is_written_in_place_not_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("pipe");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || fs::read(fifo).unwrap())
        };
        write_atomic(&fifo, b"through the pipe").unwrap();
        assert_eq!(reader.join().unwrap(), b"through the pipe");
        use std::os::unix::fs::FileTypeExt;
        assert!(fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
        assert_eq!(
            fs::read_dir(dir.path()).unwrap().count(),
            1,
            "no temporary left"
        );
    }

    #[cfg(unix)]
    #[test]
    fn a_symlink_keeps_pointing_at_its_replaced_target() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("run42.svg");
        let link = dir.path().join("latest.svg");
        fs::write(&target, b"old").unwrap();
        std::os::unix::fs::symlink("run42.svg", &link).unwrap();
        write_atomic(&link, b"new").unwrap();
        assert!(fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(fs::read(&target).unwrap(), b"new");
    }

    #[test]
    fn missing_directory_names_the_path() {
        let err = AtomicFile::create("/nonexistent-jobprof-dir/x.txt")
            .err()
            .unwrap();
        assert!(err.to_string().contains("/nonexistent-jobprof-dir/x.txt"));
    }

    #[test]
    fn replaced_file_keeps_its_mode() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("private.txt");
        fs::write(&dest, b"old").unwrap();
        fs::set_permissions(&dest, fs::Permissions::from_mode(0o600)).unwrap();
        write_atomic(&dest, b"new").unwrap();
        assert_eq!(fs::metadata(&dest).unwrap().mode() & 0o777, 0o600);
        fs::set_permissions(&dest, fs::Permissions::from_mode(0o640)).unwrap();
        write_with(&dest, Destination::Confined, false, b"newer").unwrap();
        assert_eq!(fs::metadata(&dest).unwrap().mode() & 0o777, 0o640);
    }

    #[test]
    fn limit_mode_follows_the_raw_data() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("derived.txt");
        let mut f = AtomicFile::open(&dest, Destination::Confined, false).unwrap();
        f.write_all(b"x").unwrap();
        f.limit_mode(0o600);
        f.commit().unwrap();
        assert_eq!(fs::metadata(&dest).unwrap().mode() & 0o077, 0);
    }

    #[test]
    fn confined_refuses_links_and_special_files() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("elsewhere");
        fs::write(&target, b"precious").unwrap();
        let link = dir.path().join("stacks.folded");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let err = write_with(&link, Destination::Confined, false, b"x").unwrap_err();
        assert!(err.to_string().contains("symbolic link"), "{err}");
        assert_eq!(fs::read(&target).unwrap(), b"precious");
        assert!(fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        let fifo = dir.path().join("flamegraph.html");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let err = write_with(&fifo, Destination::Confined, false, b"x").unwrap_err();
        assert!(err.to_string().contains("special file"), "{err}");
        // No temporary left behind by the refusals.
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 3);
    }
}
