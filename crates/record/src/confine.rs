//! Reading what the worker names, as the worker could: the one way the
//! root sidecar opens the worker's files (its mapped binaries, their debug
//! info, its JIT maps and jitdumps). The worker's file system, mounts and
//! links are its own to arrange (`unshare -Urm` gives any user a mount
//! namespace), so nothing it names is opened with root's rights:
//!
//! - [`Worker::pin`] takes the worker's credentials (effective uid and gid,
//!   supplementary groups) from `/proc/PID/status` before anything else,
//!   the process pinned by a pidfd and its start time checked again after
//!   the read: a worker gone (or a PID reused) gives no credentials, and
//!   callers then open nothing and run nothing.
//! - [`Worker::as_worker`] runs a closure on a thread of its own whose file
//!   system credentials (`setfsuid`, `setfsgid`, `setgroups`, raw system
//!   calls: they change that thread only; `jobprof_capture_format::fs_creds`,
//!   which jobprof uses too) are the worker's: every
//!   permission check of every lookup and open is the worker's.
//! - [`Worker::open_path`] walks a path below the worker's root one
//!   component at a time (each opened `O_PATH | O_NOFOLLOW` relative to
//!   the last: nothing above the root, no `..` of the file system's), links
//!   refused or resolved inside the worker's root, and opens only a
//!   regular file that nothing is mounted over (a bind mount over the file
//!   itself is refused); it is reopened for reading through
//!   `/proc/self/fd` only once it is known to be one, `O_NONBLOCK`, so a
//!   FIFO or a device is never opened at all.
//! - [`Worker::open_mapped`] opens a mapped file through
//!   `/proc/PID/map_files/START-END`: the inode the worker maps, whatever
//!   its path now leads to, reopened with the worker's credentials.
//! - [`copy_bounded`] copies at most the size checked, into a new file no
//!   more readable than its source (0600 unless the source is readable by
//!   everyone).

use std::ffi::CString;
use std::fs::{self, File};
use std::io::{self, Read};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use crate::sys;

/// Most symbolic links followed in one path (the kernel's limit).
const MAX_LINKS: usize = 40;

/// A worker process pinned, with its credentials.
#[derive(Debug)]
pub struct Worker {
    /// Its PID (in the sidecar's PID namespace).
    pub pid: u32,
    start: u64,
    pidfd: Option<OwnedFd>,
    /// Effective uid.
    pub uid: u32,
    /// Effective gid.
    pub gid: u32,
    /// Supplementary groups.
    pub groups: Vec<u32>,
}

fn err(kind: io::ErrorKind, msg: impl Into<String>) -> io::Error {
    io::Error::new(kind, msg.into())
}

fn last_err() -> io::Error {
    io::Error::last_os_error()
}

fn cstr(s: &str) -> io::Result<CString> {
    CString::new(s).map_err(|_| err(io::ErrorKind::InvalidInput, "NUL in a path"))
}

/// The effective id (second column) of a `Uid:`/`Gid:` line of a status.
fn status_id(status: &str, name: &str) -> Option<u32> {
    let line = status.lines().find(|l| l.starts_with(name))?;
    line.split_whitespace().nth(2)?.parse().ok()
}

impl Worker {
    /// Pins `pid`, whose start time (clock ticks since boot) must be
    /// `start`, and takes its credentials; `Err` says why not (it is gone,
    /// its PID is another process's, its status cannot be read).
    pub fn pin(pid: u32, start: u64) -> Result<Worker, String> {
        // SAFETY: pidfd_open takes a pid and flags; the fd is ours.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
        let pidfd = match fd {
            // SAFETY: a new descriptor, owned here.
            n if n >= 0 => Some(unsafe { OwnedFd::from_raw_fd(n as i32) }),
            // A kernel before 5.3: the start time alone tells processes apart.
            _ if last_err().raw_os_error() == Some(libc::ENOSYS) => None,
            _ => return Err(format!("pid {pid} is gone")),
        };
        let mut w = Worker {
            pid,
            start,
            pidfd,
            uid: 0,
            gid: 0,
            groups: Vec::new(),
        };
        if !w.alive() {
            return Err(format!("pid {pid} is no longer the worker"));
        }
        let status = fs::read_to_string(format!("/proc/{pid}/status"))
            .map_err(|e| format!("cannot read /proc/{pid}/status: {e}"))?;
        let (uid, gid) = match (status_id(&status, "Uid:"), status_id(&status, "Gid:")) {
            (Some(u), Some(g)) => (u, g),
            _ => return Err(format!("/proc/{pid}/status names no uid or gid")),
        };
        w.uid = uid;
        w.gid = gid;
        w.groups = status
            .lines()
            .find_map(|l| l.strip_prefix("Groups:"))
            .unwrap_or("")
            .split_whitespace()
            .filter_map(|g| g.parse().ok())
            .take(65536)
            .collect();
        // What was read was the worker's only if it is still there now.
        if !w.alive() {
            return Err(format!("pid {pid} exited while its credentials were read"));
        }
        Ok(w)
    }

    /// True while the pinned process lives (not a zombie) with its start
    /// time: its PID, and what `/proc/PID` shows, are still its own.
    pub fn alive(&self) -> bool {
        let signalled = self.pidfd.as_ref().is_none_or(|fd| {
            // SAFETY: signal 0 only checks; a valid pidfd, no siginfo.
            let r = unsafe {
                libc::syscall(
                    libc::SYS_pidfd_send_signal,
                    fd.as_raw_fd(),
                    0,
                    std::ptr::null::<libc::siginfo_t>(),
                    0,
                )
            };
            r == 0
        });
        signalled && sys::alive(self.pid, self.start)
    }

    /// Runs `f` with file system credentials that are the worker's: this
    /// thread's own (raw system calls change only the calling thread),
    /// given back when `f` returns. A sidecar that is not root runs it with
    /// its own (an unprivileged user's) credentials.
    pub fn as_worker<T>(&self, f: impl FnOnce() -> io::Result<T>) -> io::Result<T> {
        jobprof_capture_format::fs_creds::run_as(self.uid, self.gid, &self.groups, f)
    }

    /// The worker's root (`/proc/PID/root`), opened as a directory handle
    /// while it is known to be the worker's.
    pub fn root(&self) -> io::Result<File> {
        let root = open_path_fd(None, &format!("/proc/{}/root", self.pid), true)?;
        self.still_there()?;
        Ok(root)
    }

    fn still_there(&self) -> io::Result<()> {
        if self.alive() {
            Ok(())
        } else {
            Err(err(io::ErrorKind::NotFound, "the worker exited"))
        }
    }

    /// Opens `path` (absolute, as the worker sees it) below the worker's
    /// `root` ([`Worker::root`]) as the worker: links refused, or resolved
    /// inside its root when `links`; a regular file nothing is mounted over;
    /// its metadata.
    pub fn open_path(
        &self,
        root: &File,
        path: &str,
        links: bool,
    ) -> io::Result<(File, fs::Metadata)> {
        self.as_worker(|| open_beneath(root, path, links))
    }

    /// Opens the file the worker maps at `range` (`START-END`, as in its
    /// maps) and names `path` through `/proc/PID/map_files/`, as the
    /// worker. A sidecar that is not root may not follow `map_files`
    /// (`CAP_SYS_ADMIN`): it opens `path` below the worker's root, without
    /// links, with its own credentials.
    pub fn open_mapped(&self, range: &str, path: &str) -> io::Result<(File, fs::Metadata)> {
        match self.open_mapping(range) {
            Err(e) if sys::euid() != 0 && e.kind() == io::ErrorKind::PermissionDenied => {
                self.open_path(&self.root()?, path, false)
            }
            r => r,
        }
    }

    /// [`Worker::open_mapped`] through `map_files` only.
    fn open_mapping(&self, range: &str) -> io::Result<(File, fs::Metadata)> {
        // maps pads addresses to 8 digits, map_files does not.
        let hex = |a: &str| u64::from_str_radix(a, 16).ok();
        let name = range
            .split_once('-')
            .and_then(|(a, b)| Some(format!("{:x}-{:x}", hex(a)?, hex(b)?)))
            .ok_or_else(|| err(io::ErrorKind::InvalidInput, format!("bad range {range}")))?;
        let at = open_path_fd(None, &format!("/proc/{}/map_files/{name}", self.pid), true)?;
        self.still_there()?;
        let meta = at.metadata()?;
        regular(&meta)?;
        self.as_worker(|| reopen(&at))
    }
}

/// `openat(dir, name, O_PATH | O_CLOEXEC [| O_NOFOLLOW])`.
fn open_path_fd(dir: Option<&File>, name: &str, follow: bool) -> io::Result<File> {
    let c = cstr(name)?;
    let flags = libc::O_PATH | libc::O_CLOEXEC | if follow { 0 } else { libc::O_NOFOLLOW };
    let dirfd = dir.map_or(libc::AT_FDCWD, |d| d.as_raw_fd());
    // SAFETY: a valid NUL-terminated name; the fd is ours.
    let fd = unsafe { libc::openat(dirfd, c.as_ptr(), flags) };
    if fd < 0 {
        return Err(last_err());
    }
    // SAFETY: a new descriptor, owned here.
    Ok(unsafe { File::from_raw_fd(fd) })
}

/// An error unless `meta` is a regular file, saying what it is.
fn regular(meta: &fs::Metadata) -> io::Result<()> {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    let what = if t.is_file() {
        return Ok(());
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_dir() {
        "a directory"
    } else if t.is_char_device() || t.is_block_device() {
        "a device"
    } else if t.is_symlink() {
        "a symbolic link"
    } else {
        "a special file"
    };
    Err(err(
        io::ErrorKind::InvalidInput,
        format!("is {what}, not a regular file"),
    ))
}

/// Opens the file an `O_PATH` handle stands for, for reading (without
/// blocking), through `/proc/self/fd`: permission is checked as of now,
/// with this thread's credentials.
fn reopen(at: &File) -> io::Result<(File, fs::Metadata)> {
    let path = format!("/proc/self/fd/{}", at.as_raw_fd());
    let c = cstr(&path)?;
    let flags = libc::O_RDONLY | libc::O_CLOEXEC | libc::O_NONBLOCK | libc::O_NOCTTY;
    // SAFETY: a valid NUL-terminated path; the fd is ours.
    let fd = unsafe { libc::open(c.as_ptr(), flags) };
    if fd < 0 {
        return Err(last_err());
    }
    // SAFETY: a new descriptor, owned here.
    let f = unsafe { File::from_raw_fd(fd) };
    let meta = f.metadata()?;
    regular(&meta)?;
    if meta.ino() != at.metadata()?.ino() {
        return Err(err(io::ErrorKind::Other, "changed while it was opened"));
    }
    Ok((f, meta))
}

/// The mount id of an open file (`/proc/self/fdinfo`).
fn mount_id(f: &File) -> io::Result<u64> {
    let info = fs::read_to_string(format!("/proc/self/fdinfo/{}", f.as_raw_fd()))?;
    info.lines()
        .find_map(|l| l.strip_prefix("mnt_id:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| err(io::ErrorKind::Other, "no mnt_id in fdinfo"))
}

/// The target of the link `name` in `dir`.
fn read_link_at(dir: &File, name: &str) -> io::Result<String> {
    let c = cstr(name)?;
    let mut buf = vec![0u8; libc::PATH_MAX as usize];
    // SAFETY: a valid name and a buffer of the given length.
    let n = unsafe {
        libc::readlinkat(
            dir.as_raw_fd(),
            c.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    if n < 0 {
        return Err(last_err());
    }
    buf.truncate(n as usize);
    String::from_utf8(buf).map_err(|_| err(io::ErrorKind::InvalidData, "a link that is not UTF-8"))
}

/// What [`walk`] found: the last component (an `O_PATH` handle and its
/// metadata), the directory it is in, and its path from the root with every
/// link resolved.
pub struct Walked {
    /// The last component.
    pub at: File,
    /// Its metadata (not followed: a link is a link).
    pub meta: fs::Metadata,
    /// The directory it is in.
    pub dir: File,
    /// Its path from the root, links resolved.
    pub path: String,
}

/// Walks `path` below `root` one component at a time with this thread's
/// credentials, each opened `O_PATH | O_NOFOLLOW` relative to the last:
/// `..` never goes above `root`; a link is an error, or (`links`) resolved
/// inside `root`; `check` sees every directory passed through (the root
/// too) with its path.
pub fn walk(
    root: &File,
    path: &str,
    links: bool,
    check: &dyn Fn(&fs::Metadata, &str) -> io::Result<()>,
) -> io::Result<Walked> {
    let mut dirs: Vec<(File, String)> = vec![(root.try_clone()?, String::new())];
    check(&root.metadata()?, "/")?;
    // The components still to walk, the next one last.
    let mut parts: Vec<String> = path.rsplit('/').map(str::to_string).collect();
    let mut followed = 0;
    while let Some(part) = parts.pop() {
        match part.as_str() {
            "" | "." => continue,
            ".." => {
                if dirs.len() > 1 {
                    dirs.pop();
                }
                continue;
            }
            _ => {}
        }
        let (dir, above) = dirs.last().expect("the root is never popped");
        let at = open_path_fd(Some(dir), &part, false)?;
        let meta = at.metadata()?;
        let here = format!("{above}/{part}");
        if meta.file_type().is_symlink() {
            if !links {
                return Err(err(
                    io::ErrorKind::InvalidInput,
                    format!("{here} is a symbolic link (not followed)"),
                ));
            }
            followed += 1;
            if followed > MAX_LINKS {
                return Err(io::Error::from_raw_os_error(libc::ELOOP));
            }
            let target = read_link_at(dir, &part)?;
            if target.starts_with('/') {
                dirs.truncate(1);
            }
            parts.extend(target.rsplit('/').map(str::to_string));
            continue;
        }
        if parts.iter().any(|p| !p.is_empty() && p != ".") {
            if !meta.is_dir() {
                return Err(io::Error::from_raw_os_error(libc::ENOTDIR));
            }
            check(&meta, &here)?;
            dirs.push((at, here));
            continue;
        }
        let (dir, _) = dirs.pop().expect("the root is never popped");
        return Ok(Walked {
            at,
            meta,
            dir,
            path: here,
        });
    }
    Err(err(io::ErrorKind::InvalidInput, "not a file path"))
}

/// Opens `path` below `root` with this thread's credentials (see
/// [`Worker::open_path`]).
pub fn open_beneath(root: &File, path: &str, links: bool) -> io::Result<(File, fs::Metadata)> {
    let w = walk(root, path, links, &|_, _| Ok(()))?;
    regular(&w.meta)?;
    if mount_id(&w.at)? != mount_id(&w.dir)? {
        return Err(err(
            io::ErrorKind::InvalidInput,
            format!("{} is a mount point (something is mounted over it)", w.path),
        ));
    }
    reopen(&w.at)
}

/// The path of `path` below `root`, links resolved, when only root can
/// change what it is: every directory on the way and the file itself owned
/// by root and writable by no one else, the file a regular executable one.
/// `Err` says which part is not.
pub fn root_only(root: &File, path: &str) -> io::Result<String> {
    let trusted = |m: &fs::Metadata, p: &str| {
        if m.uid() != 0 || m.mode() & 0o022 != 0 {
            return Err(err(
                io::ErrorKind::PermissionDenied,
                format!(
                    "{p} is owned by uid {} with mode {:o}: others can change it",
                    m.uid(),
                    m.mode() & 0o7777
                ),
            ));
        }
        Ok(())
    };
    let w = walk(root, path, true, &trusted)?;
    regular(&w.meta)?;
    trusted(&w.meta, &w.path)?;
    if w.meta.mode() & 0o111 == 0 {
        return Err(err(
            io::ErrorKind::PermissionDenied,
            format!("{} is not executable", w.path),
        ));
    }
    Ok(w.path)
}

/// The mode of a copy of a file of mode `source`: 0644 when everyone may
/// read the source, else 0600.
pub fn copy_mode(source: u32) -> u32 {
    if source & 0o004 != 0 {
        0o644
    } else {
        0o600
    }
}

/// Copies at most `size` bytes of `from` (from its start) into the new
/// file `dst` below `base` (directories created without following links),
/// of mode [`copy_mode`] of `source_mode`; the bytes copied.
pub fn copy_bounded(
    from: &mut File,
    size: u64,
    source_mode: u32,
    base: &Path,
    dst: &Path,
) -> io::Result<u64> {
    use std::io::Seek;
    if let Some(parent) = dst.parent() {
        sys::create_dirs_nofollow(base, parent)?;
    }
    from.seek(io::SeekFrom::Start(0))?;
    sys::write_new(dst, copy_mode(source_mode), |to| {
        io::copy(&mut from.take(size), to)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn tempdir(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("confine-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn paths_are_walked_below_the_root_without_links_fifos_or_dotdot() {
        let d = tempdir("walk");
        let root = d.join("root");
        fs::create_dir_all(root.join("tmp/sub")).unwrap();
        fs::write(root.join("tmp/perf-1.map"), "1000 10 f\n").unwrap();
        fs::write(d.join("outside"), "secret\n").unwrap();
        std::os::unix::fs::symlink(d.join("outside"), root.join("tmp/link")).unwrap();
        std::os::unix::fs::symlink("/tmp/perf-1.map", root.join("tmp/sub/abs")).unwrap();
        std::os::unix::fs::symlink(&d, root.join("tmp/dirlink")).unwrap();
        sys::mkfifo(&root.join("tmp/fifo")).unwrap();
        let r = File::open(&root).unwrap();
        let read = |p: &str, links: bool| {
            open_beneath(&r, p, links).map(|(mut f, _)| {
                let mut s = String::new();
                f.read_to_string(&mut s).unwrap();
                s
            })
        };
        assert_eq!(read("/tmp/perf-1.map", false).unwrap(), "1000 10 f\n");
        assert_eq!(
            read("/tmp/sub/../perf-1.map", false).unwrap(),
            "1000 10 f\n"
        );
        // `..` never leaves the root; links are refused, or stay inside.
        assert!(read("/../../outside", false).is_err());
        let e = read("/tmp/link", false).unwrap_err().to_string();
        assert!(e.contains("symbolic link"), "{e}");
        assert!(read("/tmp/dirlink/outside", false).is_err());
        assert!(
            read("/tmp/dirlink/outside", true).is_err(),
            "absolute: inside the root"
        );
        assert_eq!(read("/tmp/sub/abs", true).unwrap(), "1000 10 f\n");
        // A FIFO is refused at once (this would block otherwise).
        let e = read("/tmp/fifo", false).unwrap_err().to_string();
        assert!(e.contains("a FIFO"), "{e}");
        assert!(read("/tmp", false)
            .unwrap_err()
            .to_string()
            .contains("a directory"));
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn only_what_root_alone_can_change_is_trusted_to_run() {
        let slash = File::open("/").unwrap();
        if fs::metadata("/bin/sh").is_ok_and(|m| m.uid() == 0) {
            let sh = root_only(&slash, "/bin/sh").unwrap();
            assert!(sh.starts_with('/') && !sh.contains("//"), "{sh}");
        }
        // A file in a directory others may write to (/tmp), or of another
        // owner, is not.
        let d = tempdir("trust");
        let exe = d.join("jcmd");
        fs::write(&exe, "#!/bin/sh\n").unwrap();
        fs::set_permissions(&exe, fs::Permissions::from_mode(0o755)).unwrap();
        let e = root_only(&slash, exe.to_str().unwrap())
            .unwrap_err()
            .to_string();
        assert!(e.contains("others can change it"), "{e}");
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn copies_are_bounded_and_no_more_readable_than_their_source() {
        let d = tempdir("copy");
        let src = d.join("src");
        fs::write(&src, "0123456789").unwrap();
        let mut f = File::open(&src).unwrap();
        // The file grew after its size was checked: 4 bytes copied.
        let n = copy_bounded(&mut f, 4, 0o600, &d, &d.join("out/a")).unwrap();
        assert_eq!(n, 4);
        assert_eq!(fs::read(d.join("out/a")).unwrap(), b"0123");
        let mode = |p: &str| fs::metadata(d.join(p)).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode("out/a"), 0o600);
        copy_bounded(&mut f, 100, 0o644, &d, &d.join("out/b")).unwrap();
        assert_eq!(mode("out/b"), 0o644);
        assert_eq!(fs::read(d.join("out/b")).unwrap(), b"0123456789");
        // Nothing is written over what is there.
        assert!(copy_bounded(&mut f, 100, 0o644, &d, &d.join("out/b")).is_err());
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn this_process_is_pinned_with_its_credentials_and_a_dead_one_is_not() {
        let me = std::process::id();
        let (_, start) = sys::proc_stat(me).unwrap();
        let w = Worker::pin(me, start).unwrap();
        assert!(w.alive());
        assert_eq!(w.uid, sys::euid());
        assert!(Worker::pin(me, start + 1).is_err(), "another start time");
        let mut c = std::process::Command::new("true").spawn().unwrap();
        let pid = c.id();
        let (_, start) = sys::proc_stat(pid).unwrap_or((' ', 0));
        c.wait().unwrap();
        assert!(Worker::pin(pid, start).is_err(), "gone");
        // Read as the worker: a file only root may read is refused to a
        // worker of another uid (as root), read by this one.
        let d = tempdir("as");
        let secret = d.join("secret");
        fs::write(&secret, "s\n").unwrap();
        fs::set_permissions(&secret, fs::Permissions::from_mode(0o600)).unwrap();
        let root = File::open("/").unwrap();
        let p = secret.to_str().unwrap();
        assert!(w.open_path(&root, p, true).is_ok());
        if sys::euid() == 0 {
            let nobody = Worker {
                pid: me,
                start: w.start,
                pidfd: None,
                uid: 65534,
                gid: 65534,
                groups: vec![],
            };
            let e = nobody.open_path(&root, p, true).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{e}");
            // This thread's own credentials are untouched.
            assert!(File::open(&secret).is_ok());
        }
        fs::remove_dir_all(&d).unwrap();
    }
}
