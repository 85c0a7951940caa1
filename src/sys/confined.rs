//! Directories opened without following links: the one way jobprof reaches
//! what it writes (and the small files it reads on its own) inside result
//! and report trees.
//!
//! A [`Dir`] is an open directory descriptor. The root of a tree is opened
//! by path ([`Dir::open`]: the links of its ancestors are followed, they
//! are the user's; a link *at* the root itself is refused); every step
//! below it is `openat(2)` of one name with `O_NOFOLLOW | O_DIRECTORY`
//! ([`Dir::sub`], [`Dir::walk`]), and files are created, renamed, removed
//! and read relative to the descriptor (`openat`, `renameat`, `unlinkat`
//! with `O_NOFOLLOW`). A symbolic link planted anywhere below the root,
//! even swapped in after a check, is therefore never followed: the step
//! that meets it fails with an error naming it. [`crate::sys::atomic`] builds
//! its confined writes on this; this module decides nothing about what is
//! written.

use std::ffi::{CString, OsStr};
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use crate::error::{Error, Result};

/// An open directory inside a confined tree.
#[derive(Debug)]
pub struct Dir {
    fd: OwnedFd,
    path: PathBuf,
}

fn cstr(name: &OsStr) -> io::Result<CString> {
    CString::new(name.as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte in a file name"))
}

/// A single plain name: not empty, no `/`, not `.` or `..`.
fn plain_name(name: &OsStr) -> bool {
    let b = name.as_bytes();
    !b.is_empty() && b != b"." && b != b".." && !b.contains(&b'/')
}

/// The error for a step that met a link (or a non-directory) where a
/// directory was expected.
fn step_error(path: &Path, e: io::Error, is_link: impl FnOnce() -> bool) -> Error {
    let code = e.raw_os_error();
    if matches!(code, Some(libc::ELOOP | libc::ENOTDIR)) && is_link() {
        return crate::sys::file_kind::not_plain(path, "a symbolic link");
    }
    match code {
        Some(libc::ELOOP) => crate::sys::file_kind::not_plain(path, "a symbolic link"),
        Some(libc::ENOTDIR) => Error::io(
            path,
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "is not a directory (a symbolic link or a file where a directory belongs; \
                 refusing to follow it)",
            ),
        ),
        _ => Error::io(path, e),
    }
}

/// What a `fstatat(AT_SYMLINK_NOFOLLOW)` found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    /// `st_mode`.
    pub mode: u32,
    /// `st_dev`: with `ino`, what identifies a directory without its path.
    pub dev: u64,
    /// `st_ino`.
    pub ino: u64,
    /// `st_size` in bytes.
    pub size: u64,
    /// `st_mtime` in nanoseconds since the epoch.
    pub mtime_ns: i64,
}

impl Entry {
    /// The entry `meta` describes (of a file already open).
    pub fn of(meta: &std::fs::Metadata) -> Entry {
        use std::os::unix::fs::MetadataExt;
        Entry {
            mode: meta.mode(),
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime_ns: meta.mtime().saturating_mul(1_000_000_000) + meta.mtime_nsec(),
        }
    }

    /// Whether `other` is this very file as it was: the same device,
    /// inode, size and modification time (a file rewritten, or another
    /// renamed over it, differs in one of them).
    pub fn same_file(self, other: Entry) -> bool {
        (self.dev, self.ino, self.size, self.mtime_ns)
            == (other.dev, other.ino, other.size, other.mtime_ns)
    }

    fn kind(self) -> u32 {
        self.mode & libc::S_IFMT
    }
    /// A regular file.
    pub fn is_file(self) -> bool {
        self.kind() == libc::S_IFREG
    }
    /// A directory.
    pub fn is_dir(self) -> bool {
        self.kind() == libc::S_IFDIR
    }
    /// Words for [`crate::sys::file_kind::not_plain`] when this is not a regular file.
    pub fn non_regular(self) -> Option<&'static str> {
        match self.kind() {
            libc::S_IFREG => None,
            libc::S_IFLNK => Some("a symbolic link"),
            libc::S_IFDIR => Some("a directory"),
            _ => Some("a special file"),
        }
    }
}

impl Dir {
    /// Opens the root of a tree. Links in its ancestors are followed; the
    /// root itself must be a directory, not a link to one.
    pub fn open(path: &Path) -> Result<Dir> {
        let c = cstr(path.as_os_str()).map_err(|e| Error::io(path, e))?;
        // SAFETY: a valid NUL-terminated path.
        let fd = unsafe {
            libc::open(
                c.as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            let e = io::Error::last_os_error();
            let link = || std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
            return Err(step_error(path, e, link));
        }
        Ok(Dir {
            // SAFETY: a descriptor we just opened and own.
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
            path: path.to_path_buf(),
        })
    }

    /// The directory holding `file` (opened as a root, [`Dir::open`]) and
    /// `file`'s name in it.
    pub fn parent_of(file: &Path) -> Result<(Dir, &OsStr)> {
        let name = file.file_name().filter(|n| plain_name(n)).ok_or_else(|| {
            Error::io(
                file,
                io::Error::new(io::ErrorKind::InvalidInput, "has no file name"),
            )
        })?;
        let dir = match file.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        Ok((Dir::open(dir)?, name))
    }

    /// This directory's owner (uid) and permission bits.
    pub fn owner_and_mode(&self) -> Result<(u32, u32)> {
        // SAFETY: zeroed plain-data struct filled by the kernel.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: a valid descriptor and out-pointer.
        if unsafe { libc::fstat(self.fd.as_raw_fd(), &mut st) } != 0 {
            return Err(Error::io(&self.path, io::Error::last_os_error()));
        }
        Ok((st.st_uid, st.st_mode & 0o7777))
    }

    /// The path this directory was reached by (for messages).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `name` in this directory, for messages.
    pub fn join(&self, name: impl AsRef<Path>) -> PathBuf {
        self.path.join(name)
    }

    /// Another descriptor of the same directory.
    pub fn try_clone(&self) -> Result<Dir> {
        Ok(Dir {
            fd: self.fd.try_clone().map_err(|e| Error::io(&self.path, e))?,
            path: self.path.clone(),
        })
    }

    fn checked(&self, name: &OsStr) -> Result<CString> {
        if !plain_name(name) {
            return Err(Error::io(
                self.join(name),
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "is not a plain file name in its directory",
                ),
            ));
        }
        cstr(name).map_err(|e| Error::io(self.join(name), e))
    }

    /// The subdirectory `name`, never through a link.
    pub fn sub(&self, name: impl AsRef<OsStr>) -> Result<Dir> {
        let name = name.as_ref();
        let c = self.checked(name)?;
        // SAFETY: a valid descriptor and NUL-terminated name.
        let fd = unsafe {
            libc::openat(
                self.fd.as_raw_fd(),
                c.as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            )
        };
        let path = self.join(name);
        if fd < 0 {
            let e = io::Error::last_os_error();
            let link = || {
                self.entry(name)
                    .ok()
                    .flatten()
                    .is_some_and(|e| e.mode & libc::S_IFMT == libc::S_IFLNK)
            };
            return Err(step_error(&path, e, link));
        }
        Ok(Dir {
            // SAFETY: a descriptor we just opened and own.
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
            path,
        })
    }

    /// The subdirectory `name`, created (mode `0777 & ~umask`) when absent.
    pub fn sub_create(&self, name: impl AsRef<OsStr>) -> Result<Dir> {
        self.mkdir(name.as_ref(), 0o777)?;
        self.sub(name)
    }

    /// Makes the directory `name` (permission bits `mode & ~umask`);
    /// whether it was made (`false`: something, maybe a link, is there
    /// already: [`Dir::sub`] decides).
    pub fn mkdir(&self, name: impl AsRef<OsStr>, mode: u32) -> Result<bool> {
        let name = name.as_ref();
        let c = self.checked(name)?;
        // SAFETY: a valid descriptor and NUL-terminated name; mkdirat never
        // follows a link at the last component.
        let r = unsafe { libc::mkdirat(self.fd.as_raw_fd(), c.as_ptr(), mode as libc::mode_t) };
        if r != 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EEXIST) {
                return Err(Error::io(self.join(name), e));
            }
            return Ok(false);
        }
        Ok(true)
    }

    /// Walks the relative path `rel` one component at a time (creating
    /// what is missing when `create`); `..`, `.` and absolute paths are
    /// refused.
    pub fn walk(&self, rel: &Path, create: bool) -> Result<Dir> {
        let mut dir = self.try_clone()?;
        for c in rel.components() {
            let Component::Normal(name) = c else {
                return Err(Error::io(
                    self.join(rel),
                    io::Error::new(
                        io::ErrorKind::InvalidInput,
                        "is not a path inside its tree (absolute, or with `..`)",
                    ),
                ));
            };
            dir = if create {
                dir.sub_create(name)?
            } else {
                dir.sub(name)?
            };
        }
        Ok(dir)
    }

    /// What is at `name`, without following a link; `None` when nothing.
    pub fn entry(&self, name: impl AsRef<OsStr>) -> Result<Option<Entry>> {
        let name = name.as_ref();
        let c = self.checked(name)?;
        // SAFETY: zeroed plain-data struct filled by the kernel.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: a valid descriptor, name and out-pointer.
        let r = unsafe {
            libc::fstatat(
                self.fd.as_raw_fd(),
                c.as_ptr(),
                &mut st,
                libc::AT_SYMLINK_NOFOLLOW,
            )
        };
        if r == 0 {
            return Ok(Some(Entry {
                mode: st.st_mode,
                dev: st.st_dev,
                ino: st.st_ino,
                size: u64::try_from(st.st_size).unwrap_or(0),
                mtime_ns: st.st_mtime.saturating_mul(1_000_000_000) + st.st_mtime_nsec,
            }));
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::ENOENT) => Ok(None),
            _ => Err(Error::io(self.join(name), e)),
        }
    }

    /// Opens `name` with `flags | O_NOFOLLOW | O_CLOEXEC` (and `mode` when
    /// creating); the raw `io::Error` for the caller to word.
    pub fn open_at(&self, name: impl AsRef<OsStr>, flags: i32, mode: u32) -> Result<File> {
        let name = name.as_ref();
        let c = self.checked(name)?;
        // SAFETY: a valid descriptor and NUL-terminated name.
        let fd = unsafe {
            libc::openat(
                self.fd.as_raw_fd(),
                c.as_ptr(),
                flags | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                mode as libc::c_uint,
            )
        };
        if fd < 0 {
            let e = io::Error::last_os_error();
            return Err(match e.raw_os_error() {
                Some(libc::ELOOP) => {
                    crate::sys::file_kind::not_plain(&self.join(name), "a symbolic link")
                }
                _ => Error::io(self.join(name), e),
            });
        }
        // SAFETY: a descriptor we just opened and own.
        Ok(unsafe { File::from_raw_fd(fd) })
    }

    /// Opens the regular file `name` for reading, never through a link and
    /// never blocking on a FIFO or device: anything else is an error naming
    /// it.
    pub fn open_read(&self, name: impl AsRef<OsStr>) -> Result<File> {
        let name = name.as_ref();
        let f = self.open_at(name, libc::O_RDONLY | libc::O_NONBLOCK, 0)?;
        crate::sys::file_kind::regular_blocking(f, &self.join(name))
    }

    /// Reads the regular file `name` whole (see [`Dir::open_read`]).
    pub fn read(&self, name: impl AsRef<OsStr>) -> Result<Vec<u8>> {
        use std::io::Read;
        let name = name.as_ref();
        let mut f = self.open_read(name)?;
        let mut out = Vec::new();
        f.read_to_end(&mut out)
            .map_err(|e| Error::io(self.join(name), e))?;
        Ok(out)
    }

    /// Renames `from` onto `to`, both in this directory (the entry itself
    /// is replaced, whatever it is).
    pub fn rename(&self, from: &OsStr, to: &OsStr) -> Result<()> {
        let (f, t) = (self.checked(from)?, self.checked(to)?);
        let fd = self.fd.as_raw_fd();
        // SAFETY: valid descriptors and NUL-terminated names.
        if unsafe { libc::renameat(fd, f.as_ptr(), fd, t.as_ptr()) } != 0 {
            return Err(Error::io(self.join(to), io::Error::last_os_error()));
        }
        Ok(())
    }

    /// Removes the file (or link) `name`; absent is fine.
    pub fn remove_file(&self, name: impl AsRef<OsStr>) -> Result<()> {
        self.unlink(name.as_ref(), 0)
    }

    /// Removes the empty directory `name`; absent is fine.
    pub fn remove_dir(&self, name: impl AsRef<OsStr>) -> Result<()> {
        self.unlink(name.as_ref(), libc::AT_REMOVEDIR)
    }

    fn unlink(&self, name: &OsStr, flags: i32) -> Result<()> {
        let c = self.checked(name)?;
        // SAFETY: a valid descriptor and NUL-terminated name.
        if unsafe { libc::unlinkat(self.fd.as_raw_fd(), c.as_ptr(), flags) } != 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::ENOENT) {
                return Err(Error::io(self.join(name), e));
            }
        }
        Ok(())
    }

    /// The names in this directory (not `.` and `..`), unsorted.
    pub fn names(&self) -> Result<Vec<std::ffi::OsString>> {
        let dot = self.try_clone()?;
        let fd = dot.fd.as_raw_fd();
        // The descriptor of a directory opened with O_DIRECTORY reads
        // through /proc/self/fd without following anything in the tree.
        let p = PathBuf::from(format!("/proc/self/fd/{fd}"));
        let rd = std::fs::read_dir(&p).map_err(|e| Error::io(&self.path, e))?;
        let mut out = Vec::new();
        for e in rd {
            out.push(e.map_err(|e| Error::io(&self.path, e))?.file_name());
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_on_the_way_is_refused_and_nothing_is_created_through_it() {
        let t = tempfile::tempdir().unwrap();
        let outside = t.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        let root = t.path().join("root");
        std::fs::create_dir(&root).unwrap();
        std::os::unix::fs::symlink(&outside, root.join("queries")).unwrap();
        let d = Dir::open(&root).unwrap();
        let err = d.walk(Path::new("queries/q01"), true).unwrap_err();
        assert!(err.to_string().contains("symbolic link"), "{err}");
        assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
        let err = d.walk(Path::new("../x"), true).unwrap_err();
        assert!(err.to_string().contains("inside its tree"), "{err}");
    }

    #[test]
    fn reads_refuse_links_and_fifos_without_blocking() {
        let t = tempfile::tempdir().unwrap();
        std::fs::write(t.path().join("a"), b"x").unwrap();
        std::os::unix::fs::symlink("a", t.path().join("l")).unwrap();
        let c = CString::new(t.path().join("p").as_os_str().as_bytes()).unwrap();
        // SAFETY: a valid path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let d = Dir::open(t.path()).unwrap();
        assert_eq!(d.read("a").unwrap(), b"x");
        assert!(d
            .read("l")
            .unwrap_err()
            .to_string()
            .contains("symbolic link"));
        assert!(d.read("p").unwrap_err().to_string().contains("FIFO"));
        let mut names = d.names().unwrap();
        names.sort();
        assert_eq!(names, ["a", "l", "p"]);
    }
}
