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

use std::fs;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// A file being written atomically. Write to it, then [`commit`](Self::commit).
pub struct AtomicFile {
    dest: PathBuf,
    writer: BufWriter<tempfile::NamedTempFile>,
    fsync: bool,
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
        let dest = dest.as_ref().to_path_buf();
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
            writer: BufWriter::with_capacity(1 << 20, tmp),
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
        let tmp = self
            .writer
            .into_inner()
            .map_err(|e| Error::io(&dest, e.into_error()))?;
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

    #[test]
    fn missing_directory_names_the_path() {
        let err = AtomicFile::create("/nonexistent-jobprof-dir/x.txt")
            .err()
            .unwrap();
        assert!(err.to_string().contains("/nonexistent-jobprof-dir/x.txt"));
    }
}
