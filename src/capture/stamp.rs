//! Input hashes that survive a rerun. `summary.json` lists the SHA-256 of
//! every input (users check them with `sha256sum`); on a multi-GB dwarf
//! capture hashing is most of a rerun's CPU. The marker records each
//! input's size, mtime and inode beside its hash ([`InputStamp`]); a rerun
//! whose input still has all three takes the recorded hash instead of
//! reading the file again ([`hash_reusing`]). A file changed in place gets
//! a new mtime (or size, or inode when replaced) and is hashed again.

use std::io;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// One input as a completed run saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputStamp {
    /// Size in bytes.
    pub bytes: u64,
    /// Modification time, nanoseconds since the epoch.
    pub mtime_ns: i64,
    /// Inode number.
    pub ino: u64,
    /// SHA-256 of the content (hex).
    pub sha256: String,
}

/// The file's (size, mtime in ns, inode), not following a link.
fn identity(path: &Path) -> io::Result<(u64, i64, u64)> {
    let e = crate::sys::confined::Entry::of(&std::fs::symlink_metadata(path)?);
    Ok((e.size, e.mtime_ns, e.ino))
}

/// Whether `path` still has the size, mtime and inode of `stamp`.
pub fn unchanged(path: &Path, stamp: &InputStamp) -> bool {
    identity(path).is_ok_and(|i| i == (stamp.bytes, stamp.mtime_ns, stamp.ino))
}

/// Size and SHA-256 of `path` (`hash` computes them), reusing `known`'s
/// hash when the file still has its size, mtime and inode; with the stamp
/// to record (`None` when the file changed while it was hashed).
pub fn hash_reusing(
    path: &Path,
    known: Option<&InputStamp>,
    hash: impl FnOnce(&Path) -> io::Result<(u64, String)>,
) -> io::Result<(u64, String, Option<InputStamp>)> {
    let (bytes, mtime_ns, ino) = identity(path)?;
    if let Some(k) = known.filter(|k| (k.bytes, k.mtime_ns, k.ino) == (bytes, mtime_ns, ino)) {
        return Ok((k.bytes, k.sha256.clone(), Some(k.clone())));
    }
    let (n, sha256) = hash(path)?;
    let stamp = (identity(path)? == (n, mtime_ns, ino)).then(|| InputStamp {
        bytes: n,
        mtime_ns,
        ino,
        sha256: sha256.clone(),
    });
    Ok((n, sha256, stamp))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recorded_hash_is_reused_only_while_the_file_is_unchanged() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("perf.data");
        std::fs::write(&p, b"abc").unwrap();
        let hash = |p: &Path| crate::output::summary::hash_file(p);
        let (n, sha, stamp) = hash_reusing(&p, None, hash).unwrap();
        assert_eq!(n, 3);
        assert_eq!(
            sha,
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        let mut stamp = stamp.expect("a stable file is stamped");
        // A matching stamp is believed: its (here deliberately wrong) hash
        // comes back, the file is not read.
        stamp.sha256 = "recorded".into();
        let (_, again, _) = hash_reusing(&p, Some(&stamp), |_| panic!("re-hashed")).unwrap();
        assert_eq!(again, "recorded");
        // Rewritten in place: a new mtime (set explicitly: same-second
        // writes can share one), hashed again.
        std::fs::write(&p, b"abd").unwrap();
        let f = std::fs::File::options().write(true).open(&p).unwrap();
        f.set_modified(std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(7))
            .unwrap();
        let (_, fresh, _) = hash_reusing(&p, Some(&stamp), hash).unwrap();
        assert_ne!(fresh, "recorded");
    }
}
