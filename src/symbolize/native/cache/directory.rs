//! The symbol cache's directory: opened from `/` one directory at a time,
//! never through a link, used only when it is this user's and no one else
//! may write it (as root, only below directories root alone may write),
//! and taken as jobprof's only when it is tagged (`CACHEDIR.TAG`) or
//! holds nothing but jobprof's entries ([`ours`] says which names those
//! are: only they are ever removed). The parent module's doc has the
//! whole story.

use std::ffi::OsString;
use std::path::Path;

use super::{write_entry, Kind, SIGNATURE, TAG};
use crate::sys::confined::Dir;

/// A name jobprof writes in its cache directory.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Ours<'a> {
    /// An entry.
    Entry,
    /// A temporary file of the entry named (`.ENTRY.HOST-PID-N.tmp`).
    Temp(&'a str),
    /// The directory's `CACHEDIR.TAG`.
    Tag,
}

/// What the file `n` in a cache directory is, when jobprof writes such
/// names there; `None`: not jobprof's, never removed.
pub(super) fn ours(n: &str) -> Option<Ours<'_>> {
    if n == TAG {
        return Some(Ours::Tag);
    }
    if is_entry_name(n) {
        return Some(Ours::Entry);
    }
    let rest = n.strip_prefix('.')?;
    let entry = match rest.strip_prefix(TAG) {
        Some(r) if r.starts_with('.') => TAG,
        _ => rest.split('.').next()?,
    };
    let temp = (entry == TAG || is_entry_name(entry)) && n.ends_with(".tmp");
    temp.then_some(Ours::Temp(entry))
}

/// A kind's tag, `-` and 32 hex digits: an entry, not a temporary file.
fn is_entry_name(n: &str) -> bool {
    let hex = [Kind::Symbols, Kind::Dwarf, Kind::Units]
        .iter()
        .find_map(|k| n.strip_prefix(k.tag().0)?.strip_prefix('-'));
    hex.is_some_and(|h| h.len() == 32 && h.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// Opens the cache directory `path` ([`open_path`]) and takes it as
/// jobprof's ([`claim`]); refused unless it is this user's and no one
/// else may write it.
pub(super) fn open_private(path: &Path) -> Result<Dir, String> {
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    let dir = open_path(path, me)?;
    let (owner, mode) = dir.owner_and_mode().map_err(|e| e.to_string())?;
    if owner != me || mode & 0o022 != 0 {
        return Err(format!(
            "{} belongs to uid {owner} with mode {mode:o}: a symbol cache must be yours and \
             writable by you alone (chmod go-w it, or give --cache-dir DIR)",
            path.display()
        ));
    }
    claim(&dir)?;
    Ok(dir)
}

/// Opens `path` from `/`, one directory at a time, never through a link,
/// making what is missing (mode 0700). As root (`me` 0) every directory
/// above the last must be root's and writable by root alone.
fn open_path(path: &Path, me: u32) -> Result<Dir, String> {
    use std::path::Component;
    let path = std::path::absolute(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut dir = Dir::open(Path::new("/")).map_err(|e| e.to_string())?;
    for c in path.components() {
        let name = match c {
            Component::Normal(name) => name,
            Component::ParentDir => {
                return Err(format!(
                    "{}: a cache path with `..` is not used; give it without",
                    path.display()
                ))
            }
            _ => continue,
        };
        if me == 0 {
            root_only(&dir)?;
        }
        dir.mkdir(name, 0o700).map_err(|e| e.to_string())?;
        dir = dir.sub(name).map_err(|e| {
            format!("{e} (the symbol cache's path is never followed through a link: give --cache-dir the real path)")
        })?;
    }
    Ok(dir)
}

/// Refuses `dir` as a directory above root's cache unless it is root's and
/// writable by root alone, or root's with the sticky bit (`/tmp`: others
/// may add names there but never rename or remove root's, so the next
/// directory, checked in turn, cannot be swapped).
fn root_only(dir: &Dir) -> Result<(), String> {
    let (owner, mode) = dir.owner_and_mode().map_err(|e| e.to_string())?;
    let sticky = mode & 0o1000 != 0;
    if owner != 0 || (mode & 0o022 != 0 && !sticky) {
        return Err(format!(
            "{} belongs to uid {owner} with mode {mode:o}: as root, the symbol cache is used \
             only where every directory above it is root's and writable by root alone (or \
             sticky, as /tmp) (give --cache-dir DIR)",
            dir.path().display()
        ));
    }
    Ok(())
}

/// Takes `dir` as jobprof's cache: tagged already, or holding nothing but
/// jobprof's entries (then tagged now); a directory with other files is
/// refused.
fn claim(dir: &Dir) -> Result<(), String> {
    if dir.read(TAG).is_ok_and(|t| t.starts_with(SIGNATURE)) {
        return Ok(());
    }
    let names = dir.names().map_err(|e| e.to_string())?;
    let other = names
        .iter()
        .find(|n| n.to_str().and_then(ours).is_none_or(|o| o == Ours::Tag));
    if let Some(other) = other {
        return Err(format!(
            "{} holds {} and no {TAG} of jobprof's: the symbol cache is kept only in a \
             directory jobprof made, or an empty one (give --cache-dir a new directory)",
            dir.path().display(),
            other.to_string_lossy()
        ));
    }
    let text = [
        SIGNATURE,
        b"\n# This file is a cache directory tag created by jobprof (its symbol cache).\n",
        b"# For information about cache directory tags, see https://bford.info/cachedir/\n",
    ]
    .concat();
    let tag = OsString::from(TAG);
    write_entry(dir, &tag, &text, &[]).map_err(|e| e.to_string())
}
