//! The one lock of a directory: an exclusive `flock` on a lock file inside
//! it, serializing the processes that rebuild what the directory holds (the
//! job views of `profiles/perf`, the nsys collectors of a report root).
//!
//! The lock file is opened through [`crate::sys::confined`] relative to the
//! open directory, created `0644` when missing: a symbolic link planted
//! where the lock goes is not followed, and a FIFO or device there is
//! refused without being waited on. The lock is released when the
//! [`DirLock`] is dropped, or when the process dies (an `flock` dies with
//! its descriptor). Waiting is either unbounded ([`DirLock::wait`]) or
//! polled until a deadline ([`DirLock::poll`]). This module knows nothing
//! of what the lock protects.

use std::fs::{File, TryLockError};
use std::io;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::sys::confined::Dir;

/// An exclusive lock on a file in a directory, held while this lives.
#[derive(Debug)]
pub struct DirLock {
    _file: File,
}

/// A lock taken by [`DirLock::poll`], and whether it was held by another
/// process when first tried.
#[derive(Debug)]
pub struct Acquired {
    /// The lock.
    pub lock: DirLock,
    /// True when the first try found it held.
    pub waited: bool,
}

impl DirLock {
    /// Opens (creating) the lock file `name` in `dir`: no link followed,
    /// nothing but a regular file accepted, never blocking on the open.
    fn open(dir: &Dir, name: &str) -> Result<File> {
        let file = dir.open_at(name, libc::O_RDWR | libc::O_CREAT | libc::O_NONBLOCK, 0o644)?;
        crate::sys::file_kind::regular_blocking(file, &dir.join(name))
    }

    /// Takes the lock on `dir/name`, waiting as long as another process
    /// holds it.
    pub fn wait(dir: &Dir, name: &str) -> Result<DirLock> {
        let file = Self::open(dir, name)?;
        loop {
            // std's lock is `flock` on Linux; a signal may interrupt the wait.
            match file.lock() {
                Ok(()) => return Ok(DirLock { _file: file }),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Error::io(dir.join(name), e)),
            }
        }
    }

    /// Takes the lock on `dir/name`, trying every `every` until `deadline`;
    /// `on_busy` is called once, when the first try finds it held. `None`
    /// when the deadline passed first.
    pub fn poll(
        dir: &Dir,
        name: &str,
        deadline: Instant,
        every: Duration,
        on_busy: impl FnOnce(),
    ) -> Result<Option<Acquired>> {
        let file = Self::open(dir, name)?;
        let mut on_busy = Some(on_busy);
        loop {
            match file.try_lock() {
                Ok(()) => {
                    let lock = DirLock { _file: file };
                    let waited = on_busy.is_none();
                    return Ok(Some(Acquired { lock, waited }));
                }
                Err(TryLockError::WouldBlock) => {}
                Err(TryLockError::Error(e)) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(TryLockError::Error(e)) => return Err(Error::io(dir.join(name), e)),
            }
            if let Some(f) = on_busy.take() {
                f();
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(None);
            }
            std::thread::sleep(every.min(deadline - now));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_lock_makes_polling_wait_until_it_is_released() {
        let d = tempfile::tempdir().unwrap();
        let dir = Dir::open(d.path()).unwrap();
        let held = DirLock::wait(&dir, ".lock").unwrap();
        let mut busy = 0;
        let soon = Instant::now() + Duration::from_millis(200);
        let none = DirLock::poll(&dir, ".lock", soon, Duration::from_millis(20), || busy += 1);
        assert!(none.unwrap().is_none());
        assert_eq!(busy, 1, "told once that it is held");
        let dir2 = Dir::open(d.path()).unwrap();
        let releaser = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            drop(held);
        });
        let later = Instant::now() + Duration::from_secs(20);
        let got = DirLock::poll(&dir2, ".lock", later, Duration::from_millis(20), || {})
            .unwrap()
            .expect("taken once released");
        assert!(got.waited);
        releaser.join().unwrap();
        drop(got);
        let free = DirLock::poll(&dir, ".lock", later, Duration::from_millis(20), || {});
        assert!(!free.unwrap().unwrap().waited);
    }

    #[test]
    fn links_and_fifos_where_the_lock_goes_are_refused() {
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("elsewhere");
        std::fs::write(&target, b"").unwrap();
        std::os::unix::fs::symlink(&target, d.path().join(".link")).unwrap();
        let fifo =
            std::ffi::CString::new(d.path().join(".fifo").into_os_string().into_encoded_bytes())
                .unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
        let dir = Dir::open(d.path()).unwrap();
        assert!(DirLock::wait(&dir, ".link").is_err());
        let soon = Instant::now() + Duration::from_secs(5);
        assert!(DirLock::poll(&dir, ".fifo", soon, Duration::from_millis(20), || {}).is_err());
    }
}
