//! What sits at a path, told before anything is read or written through
//! it: the one refusal for a symbolic link or special file where a regular
//! file belongs ([`not_plain`]), and an input opened without blocking kept
//! only when it is a regular file ([`regular_blocking`]).

use std::fs::File;
use std::io;
use std::path::Path;

use crate::error::{Error, Result};

/// The error for a confined destination that is a link or special file.
pub fn not_plain(path: &Path, what: &str) -> Error {
    Error::io(
        path,
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("is {what}, not a regular file; refusing to follow or write it (planted by someone?)"),
        ),
    )
}

/// `f` (opened with `O_NONBLOCK`) when it is a regular file, back in
/// blocking mode; else an error naming `path` and what it is.
pub fn regular_blocking(f: File, path: &Path) -> Result<File> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::FileTypeExt;
    let t = f.metadata().map_err(|e| Error::io(path, e))?.file_type();
    let what = if t.is_file() {
        None
    } else if t.is_dir() {
        Some("a directory")
    } else if t.is_fifo() {
        Some("a FIFO")
    } else if t.is_char_device() || t.is_block_device() {
        Some("a device")
    } else if t.is_socket() {
        Some("a socket")
    } else {
        Some("a special file")
    };
    if let Some(what) = what {
        return Err(Error::io(
            path,
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("is {what}, not a regular file; refusing to read it (it could block)"),
            ),
        ));
    }
    let fd = f.as_raw_fd();
    // SAFETY: fcntl on a descriptor we own.
    unsafe {
        let fl = libc::fcntl(fd, libc::F_GETFL);
        if fl >= 0 {
            libc::fcntl(fd, libc::F_SETFL, fl & !libc::O_NONBLOCK);
        }
    }
    Ok(f)
}
