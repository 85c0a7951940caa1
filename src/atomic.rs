//! The one atomic-write helper: every output file jobprof writes goes through
//! here.
//!
//! Data is written to a temporary file in the destination's own directory
//! (so the final `rename` never crosses a filesystem), flushed and fsynced,
//! then renamed over the destination. Outputs that a later marker vouches
//! for can skip the fsync ([`AtomicFile::create_deferred`]): a crash may
//! then leave them empty or short, which the marker's recorded sizes reveal
//! (see `crate::result_dir::write_marker`); a killed process never can. A reader therefore sees either the old
//! file or the complete new one, never a partial file; if the writer is
//! dropped without [`AtomicFile::commit`] (an error, a panic, a kill), the
//! temporary file is removed and the destination is untouched. This module
//! does not decide *what* to write or *where*.
//!
//! Two kinds of destination are not replaced. One that exists and is not a
//! regular file (`/dev/null`, a FIFO, a terminal, `/dev/stdout` on a pipe)
//! is opened and written in place: renaming a file over `/dev/null` would
//! replace the device for the whole machine, and a stream cannot be
//! partial-free anyway. A symbolic link is followed, and its target
//! replaced, so that `latest.svg -> run42.svg` stays a link.

use std::fs;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// A file being written atomically. Write to it, then [`commit`](Self::commit).
pub struct AtomicFile {
    dest: PathBuf,
    writer: BufWriter<Sink>,
    fsync: bool,
}

/// Where the bytes go before `commit`.
enum Sink {
    /// A temporary file next to the destination, renamed onto it.
    Temp(tempfile::NamedTempFile),
    /// The destination itself: a device, FIFO or other non-regular file.
    InPlace(fs::File),
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Sink::Temp(t) => t.write(buf),
            Sink::InPlace(f) => f.write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Sink::Temp(t) => t.flush(),
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
    /// Starts writing `dest`: creates a hidden temporary file next to it.
    /// [`commit`](Self::commit) fsyncs it before the rename.
    pub fn create(dest: impl AsRef<Path>) -> Result<Self> {
        Self::with_fsync(dest, true)
    }

    /// Like [`create`](Self::create), but `commit` does not fsync: for
    /// outputs whose completeness is checked another way (the marker's
    /// recorded sizes). Still atomic against a killed process.
    pub fn create_deferred(dest: impl AsRef<Path>) -> Result<Self> {
        Self::with_fsync(dest, false)
    }

    fn with_fsync(dest: impl AsRef<Path>, fsync: bool) -> Result<Self> {
        let asked = dest.as_ref();
        if is_special(asked) {
            let file = fs::OpenOptions::new()
                .write(true)
                .open(asked)
                .map_err(|e| Error::io(asked, e))?;
            return Ok(AtomicFile {
                dest: asked.to_path_buf(),
                writer: BufWriter::with_capacity(1 << 20, Sink::InPlace(file)),
                fsync: false,
            });
        }
        let dest = resolve_link(asked);
        let dir = match dest.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let name = dest
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "output".to_string());
        let tmp = tempfile::Builder::new()
            .prefix(&format!(".{name}."))
            .suffix(".tmp")
            .tempfile_in(&dir)
            .map_err(|e| Error::io(&dest, e))?;
        Ok(AtomicFile {
            dest,
            writer: BufWriter::with_capacity(1 << 20, Sink::Temp(tmp)),
            fsync,
        })
    }

    /// The final path this file will have once committed.
    pub fn path(&self) -> &Path {
        &self.dest
    }

    /// Flushes, fsyncs and renames the temporary file onto the destination.
    /// The file gets the usual 0644-style permissions (subject to umask)
    /// rather than the 0600 of a temporary file.
    pub fn commit(self) -> Result<()> {
        let fsync = self.fsync;
        let dest = self.dest;
        let sink = self
            .writer
            .into_inner()
            .map_err(|e| Error::io(&dest, e.into_error()))?;
        let tmp = match sink {
            Sink::Temp(tmp) => tmp,
            // Written in place; nothing to rename (and fsync means nothing
            // for a device or a pipe).
            Sink::InPlace(_) => return Ok(()),
        };
        if fsync {
            tmp.as_file().sync_all().map_err(|e| Error::io(&dest, e))?;
        }
        set_default_permissions(tmp.path()).map_err(|e| Error::io(&dest, e))?;
        tmp.persist(&dest).map_err(|e| Error::io(&dest, e.error))?;
        Ok(())
    }
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
    let mut f = AtomicFile::create(dest.as_ref())?;
    f.write_all(bytes)
        .map_err(|e| Error::io(dest.as_ref(), e))?;
    f.commit()
}

/// Writes `bytes` to `dest` atomically without fsync (see
/// [`AtomicFile::create_deferred`]).
pub fn write_atomic_deferred(dest: impl AsRef<Path>, bytes: &[u8]) -> Result<()> {
    let mut f = AtomicFile::create_deferred(dest.as_ref())?;
    f.write_all(bytes)
        .map_err(|e| Error::io(dest.as_ref(), e))?;
    f.commit()
}

#[cfg(unix)]
fn set_default_permissions(path: &Path) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    // Emulate what `File::create` would have produced: 0666 & !umask.
    let umask = current_umask();
    fs::set_permissions(path, fs::Permissions::from_mode(0o666 & !umask))
}

#[cfg(not(unix))]
fn set_default_permissions(_path: &Path) -> io::Result<()> {
    Ok(())
}

#[cfg(unix)]
fn current_umask() -> u32 {
    // There is no way to read the umask without setting it; set and restore.
    // SAFETY: umask is always safe to call; the window where it differs is
    // tiny and jobprof creates no files concurrently from other threads with
    // permission-sensitive expectations.
    unsafe {
        let old = libc::umask(0o022);
        libc::umask(old);
        old as u32
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
}
