//! The persistent symbol cache: what the run's [`super::store`] builds from
//! a symbol file with a build id (its finished symbol table, its inflated
//! DWARF sections), kept on disk so that the next run that meets the same
//! build (tomorrow's job, the 200th `reprocess` of the same binary, the
//! next task of an array) reads it instead of building it again.
//!
//! **Where.** `--cache-dir DIR` (or `JOBPROF_CACHE_DIR`), else
//! `$XDG_CACHE_HOME/jobprof`, else `~/.cache/jobprof`; `--no-cache` turns
//! it off. The path is opened from `/` one directory at a time, never
//! through a symbolic link (a link anywhere on it leaves the run without a
//! cache); missing directories are made with mode 0700. The directory is
//! used only when it belongs to the user jobprof runs as and no one else
//! may write it, and as root only when every directory above it is root's
//! and writable by root alone (a user's home is no place for root's
//! cache); otherwise the log says why and the run goes on without it.
//! Files are mode 0600.
//!
//! **Its own directory.** jobprof marks a directory it uses with a
//! `CACHEDIR.TAG` (the Cache Directory Tagging standard: backup tools
//! skip it). A directory without the tag is taken, and tagged, only when
//! it holds nothing but jobprof's entries (an empty one, or a cache of an
//! older jobprof); one with other files is not used. Only entries and
//! their temporary files are ever removed, nothing else in it.
//!
//! **Keys, never trusted across a mismatch.** A file's name and header
//! carry a BLAKE3 hash of what it was built from: this jobprof executable
//! (its own build id: a rebuilt jobprof, whose rules may differ, never
//! reads an older one's tables), the kind, and, for every symbol file it
//! was read from, the BLAKE3 hash of the file's bytes ([`Content`]; a
//! cryptographic hash, as collision-resistant as SHA-256 and a third of its
//! CPU time with the CPU's SHA extensions: 13 against 47 ms for a 68 MB
//! library, which every run that meets it reads whole), and who other than
//! this user and root could rewrite the file in place (its owner). A
//! capture's owner may write anything in its `symfs/`, build ids
//! included: by content, a forged file is another key, and an entry built
//! from a file a user could rewrite while it was read is found only by
//! files of that same user. An entry is written only when each file it
//! was built from has the identity it had when it was hashed. A file is
//! taken only when its magic, version, kind and digest match, its length
//! is the one its header records and the CRC-32 of its payload is right;
//! anything else is a miss, and the entry is rebuilt and written again.
//!
//! **Concurrency and crashes.** Entries are written to a temporary file in
//! the directory and renamed over their name ([`crate::sys::atomic`]):
//! concurrent runs and array tasks see an old entry or a whole new one,
//! never a part; two writers of one entry write the same bytes. An entry
//! is read whole into memory, never mapped: another run (on another node
//! of a shared home directory) may replace or remove it at any time.
//!
//! **Size.** Past the limit (2 GiB by default) a write removes the least
//! recently used entries (by modification time, which a hit refreshes)
//! until the directory holds 90% of it, and the temporary files of
//! writers that are gone (killed runs) once they are an hour old.

use std::ffi::OsString;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use crate::sys::confined::Dir;
use crate::sys::creds::Creds;

mod directory;

use directory::{open_private, ours, Ours};

const MAGIC: &[u8; 8] = b"jobprofK";
/// 3: keyed by BLAKE3 hashes (2: SHA-256; 1: by build id and size).
const VERSION: u32 = 3;
/// The tag that marks a directory as jobprof's cache.
const TAG: &str = "CACHEDIR.TAG";
/// The tag's first line (the Cache Directory Tagging standard).
const SIGNATURE: &[u8] = b"Signature: 8a477f597d28d172789f06886806bc55";
/// Bytes of a file hashed per read (small enough to stay in the CPU's
/// cache between the copy and the hash).
const HASH_STEP: usize = 128 << 10;
/// Magic, version, kind, digest, payload length, CRC, padding.
const HEADER: usize = 64;
/// Temporary files of a killed writer older than this are removed.
const STALE_SECS: i64 = 3600;
/// The default limit on the cache directory's size.
pub const DEFAULT_LIMIT: u64 = 2 << 30;

/// What an entry holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A DSO's finished symbol table ([`super::elf::DsoSymbols`]).
    Symbols,
    /// A file's inflated DWARF sections ([`super::inline`]).
    Dwarf,
    /// A file's DWARF units and the addresses each covers
    /// ([`super::inline`]).
    Units,
}

impl Kind {
    fn tag(self) -> (&'static str, u32) {
        match self {
            Kind::Symbols => ("sym", 1),
            Kind::Dwarf => ("dwarf", 2),
            Kind::Units => ("units", 3),
        }
    }
}

/// An entry found: its payload, in the file's bytes read whole.
#[derive(Debug, Clone)]
pub struct Hit {
    data: Arc<Vec<u8>>,
    payload: Range<usize>,
}

impl Hit {
    /// The payload.
    pub fn bytes(&self) -> &[u8] {
        &self.data[self.payload.clone()]
    }

    /// The buffer the payload lies in, and where it starts there (for
    /// readers that keep parts of it without a copy).
    pub fn buffer(&self) -> (&Arc<Vec<u8>>, usize) {
        (&self.data, self.payload.start)
    }
}

/// A file's identity: device, inode, size, and modification and change
/// times (seconds, nanoseconds). A file rewritten in place, or renamed
/// over, has another.
pub type FileId = (u64, u64, u64, i64, i64, i64, i64);

/// The identity of the file `meta` describes.
pub fn file_id(meta: &std::fs::Metadata) -> FileId {
    use std::os::unix::fs::MetadataExt;
    (
        meta.dev(),
        meta.ino(),
        meta.size(),
        meta.mtime(),
        meta.mtime_nsec(),
        meta.ctime(),
        meta.ctime_nsec(),
    )
}

/// The identity of the symbol file `path` under `root`, stat'ed as it is
/// opened: under a symfs never through a link, under `/` through them.
pub fn identity(root: &Path, path: &Path) -> Option<FileId> {
    let meta = match root == Path::new("/") {
        true => std::fs::metadata(path),
        false => std::fs::symlink_metadata(path),
    };
    meta.ok().map(|m| file_id(&m))
}

/// What a key says about one file an entry is built from: the BLAKE3 hash
/// of its bytes, and who else could rewrite them in place.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Content {
    /// BLAKE3 hash of the file's bytes.
    pub digest: [u8; 32],
    /// The file's owner when it is neither this user nor root (who may
    /// change its bytes after they were hashed); `None`: only this user
    /// or root may write it.
    pub writer: Option<u32>,
}

impl Content {
    /// The bytes this file adds to a key.
    pub fn key(&self) -> Vec<u8> {
        let mut k = self.digest.to_vec();
        match self.writer {
            Some(uid) => k.extend_from_slice(format!(" uid {uid}").as_bytes()),
            None => k.extend_from_slice(b" own"),
        }
        k
    }
}

/// A symbol file hashed: where it is, its identity then, its content.
#[derive(Debug, Clone)]
pub struct Hashed {
    /// The root it was found under (`/` or a symfs).
    pub root: PathBuf,
    /// Its path.
    pub path: PathBuf,
    /// Its identity when it was hashed.
    pub id: FileId,
    /// Its content.
    pub content: Content,
}

impl Hashed {
    /// Reads and hashes the symbol file `path` under `root`
    /// ([`crate::symbolize::sources::open_as`], with `owner`'s rights when
    /// given: the same file its readers open); `None` when it cannot be
    /// read, when anyone but its owner may write it (a group or everyone:
    /// who could change it is not known), or when it changed while it was
    /// read.
    pub fn read(root: &Path, path: &Path, owner: Option<&Creds>) -> Option<Hashed> {
        use std::io::Read;
        use std::os::unix::fs::MetadataExt;
        let mut f = crate::symbolize::sources::open_as(root, path, owner).ok()?;
        let before = f.metadata().ok()?;
        if before.mode() & 0o022 != 0 {
            return None;
        }
        let mut h = blake3::Hasher::new();
        let mut buf = vec![0u8; HASH_STEP];
        loop {
            match f.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    h.update(&buf[..n]);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return None,
            }
        }
        let id = file_id(&before);
        if file_id(&f.metadata().ok()?) != id {
            return None;
        }
        // SAFETY: geteuid has no preconditions.
        let me = unsafe { libc::geteuid() };
        let owner = before.uid();
        Some(Hashed {
            root: root.to_path_buf(),
            path: path.to_path_buf(),
            id,
            content: Content {
                digest: *h.finalize().as_bytes(),
                writer: (owner != me && owner != 0).then_some(owner),
            },
        })
    }

    /// Whether the file at its path is still the one hashed (checked before
    /// an entry built from it is written).
    pub fn unchanged(&self) -> bool {
        identity(&self.root, &self.path) == Some(self.id)
    }
}

/// A persistent cache directory (see the module documentation).
#[derive(Debug)]
pub struct Cache {
    path: PathBuf,
    limit: u64,
    /// The directory, opened (and created) on first use; `None` when it
    /// cannot be used (`problem` says why).
    dir: OnceLock<Option<Dir>>,
    /// This executable's identity, part of every key.
    me: OnceLock<Vec<u8>>,
    hits: AtomicU64,
    misses: AtomicU64,
    writes: AtomicU64,
    /// The first reason the cache was not used or not written, for the log.
    problem: Mutex<Option<String>>,
}

impl Cache {
    /// A cache in `path` (nothing is touched before the first lookup).
    pub fn new(path: PathBuf) -> Cache {
        Cache {
            path,
            limit: DEFAULT_LIMIT,
            dir: OnceLock::new(),
            me: OnceLock::new(),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            writes: AtomicU64::new(0),
            problem: Mutex::new(None),
        }
    }

    /// This cache, kept under `limit` bytes.
    pub fn with_limit(mut self, limit: u64) -> Cache {
        self.limit = limit;
        self
    }

    /// The default place: `$XDG_CACHE_HOME/jobprof`, else
    /// `$HOME/.cache/jobprof` (absolute paths only); `None` without either.
    pub fn default_dir() -> Option<PathBuf> {
        let abs = |v: std::ffi::OsString| Some(PathBuf::from(v)).filter(|p| p.is_absolute());
        if let Some(x) = std::env::var_os("XDG_CACHE_HOME").and_then(abs) {
            return Some(x.join("jobprof"));
        }
        std::env::var_os("HOME")
            .and_then(abs)
            .map(|h| h.join(".cache/jobprof"))
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The entry of `kind` for `key`, when a valid one is there.
    pub fn get(&self, kind: Kind, key: &[u8]) -> Option<Hit> {
        let dir = self.dir()?;
        let (name, digest) = self.name(kind, key);
        let hit = dir.open_read(&name).ok().and_then(|mut f| {
            let hit = read_entry(&mut f, kind, &digest)?;
            // Recently used: the last to go past the limit.
            let _ = f.set_modified(std::time::SystemTime::now());
            Some(hit)
        });
        let count = if hit.is_some() {
            &self.hits
        } else {
            &self.misses
        };
        count.fetch_add(1, Ordering::Relaxed);
        hit
    }

    /// Writes `payload` as the entry of `kind` for `key` (a failure is
    /// noted for the log, never an error: the cache only saves time).
    pub fn put(&self, kind: Kind, key: &[u8], payload: &[u8]) {
        let Some(dir) = self.dir() else {
            return;
        };
        let (name, digest) = self.name(kind, key);
        let crc = crc32fast::hash(payload);
        let mut header = Vec::with_capacity(HEADER);
        header.extend_from_slice(MAGIC);
        put_u32(&mut header, VERSION);
        put_u32(&mut header, kind.tag().1);
        header.extend_from_slice(&digest);
        put_u64(&mut header, payload.len() as u64);
        put_u32(&mut header, crc);
        header.resize(HEADER, 0);
        match write_entry(dir, &name, &header, payload) {
            Ok(()) => {
                self.writes.fetch_add(1, Ordering::Relaxed);
                self.trim(dir);
            }
            Err(e) => self.note(format!("not written: {e}")),
        }
    }

    /// The first reason the cache was not used or not written, if any.
    pub fn problem(&self) -> Option<String> {
        self.problem
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// What the cache did in this run, for the log.
    pub fn describe(&self) -> String {
        let mut s = format!(
            "symbol cache {}: {} hit(s), {} miss(es), {} written",
            self.path.display(),
            self.hits.load(Ordering::Relaxed),
            self.misses.load(Ordering::Relaxed),
            self.writes.load(Ordering::Relaxed)
        );
        if let Some(p) = &*self.problem.lock().unwrap_or_else(|e| e.into_inner()) {
            s.push_str("; ");
            s.push_str(p);
        }
        s
    }

    /// Whether each file in `from` is still the one that was hashed (an
    /// entry built from them may be written); the first that is not is
    /// noted for the log.
    pub fn unchanged<'a>(&self, from: impl IntoIterator<Item = &'a Hashed>) -> bool {
        let changed = from.into_iter().find(|h| !h.unchanged());
        if let Some(h) = changed {
            self.note(format!(
                "not written: {} changed while it was read",
                h.path.display()
            ));
        }
        changed.is_none()
    }

    fn note(&self, what: String) {
        let mut p = self.problem.lock().unwrap_or_else(|e| e.into_inner());
        p.get_or_insert(what);
    }

    fn dir(&self) -> Option<&Dir> {
        self.dir
            .get_or_init(|| match open_private(&self.path) {
                Ok(d) => Some(d),
                Err(why) => {
                    self.note(format!("not used: {why}"));
                    None
                }
            })
            .as_ref()
    }

    /// The file name and header digest of the entry of `kind` for `key`.
    fn name(&self, kind: Kind, key: &[u8]) -> (OsString, [u8; 32]) {
        let me = self.me.get_or_init(own_identity);
        let mut h = blake3::Hasher::new();
        h.update(&(me.len() as u64).to_le_bytes());
        h.update(me);
        h.update(&kind.tag().1.to_le_bytes());
        h.update(key);
        let digest: [u8; 32] = *h.finalize().as_bytes();
        let hex = crate::sys::digest::hex(&digest[..16]);
        (format!("{}-{hex}", kind.tag().0).into(), digest)
    }

    /// Removes the least recently used entries while the directory holds
    /// more than the limit, and temporary files a killed writer left;
    /// nothing else ([`ours`]).
    fn trim(&self, dir: &Dir) {
        let Ok(names) = dir.names() else {
            return;
        };
        let now_ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as i64);
        let mut entries = Vec::new();
        let mut total = 0u64;
        for n in names {
            let Some(what) = n.to_str().and_then(ours) else {
                continue;
            };
            let Ok(Some(e)) = dir.entry(&n) else { continue };
            if !e.is_file() {
                continue;
            }
            let age_ns = now_ns.saturating_sub(e.mtime_ns).max(0);
            match what {
                Ours::Entry => entries.push((e.mtime_ns, e.size, n)),
                Ours::Temp(entry) if age_ns > STALE_SECS * 1_000_000_000 => {
                    let age = std::time::Duration::from_nanos(age_ns as u64);
                    if crate::sys::atomic::leftover_is_stale(&n, entry, age) == Some(true) {
                        let _ = dir.remove_file(&n);
                        continue;
                    }
                }
                Ours::Temp(_) => {}
                // A few bytes, never removed: not counted.
                Ours::Tag => continue,
            }
            total += e.size;
        }
        if total <= self.limit {
            return;
        }
        entries.sort();
        let goal = self.limit / 10 * 9;
        for (_, size, n) in entries {
            if total <= goal {
                break;
            }
            if dir.remove_file(&n).is_ok() {
                total -= size;
            }
        }
    }
}

fn write_entry(dir: &Dir, name: &OsString, header: &[u8], payload: &[u8]) -> crate::Result<()> {
    use std::io::Write;
    let mut f = crate::sys::atomic::AtomicFile::create_in(dir, name, false)?;
    f.limit_mode(0o600);
    let io = |e| crate::Error::io(dir.join(name), e);
    f.write_all(header).map_err(io)?;
    f.write_all(payload).map_err(io)?;
    f.commit()
}

/// The entry in `f` when it is whole and of `kind` and `digest`.
fn read_entry(f: &mut std::fs::File, kind: Kind, digest: &[u8; 32]) -> Option<Hit> {
    use std::io::Read;
    let size = f.metadata().ok()?.len();
    let mut data = Vec::with_capacity(usize::try_from(size).ok()?);
    f.read_to_end(&mut data).ok()?;
    let mut c = Cursor::new(data.get(..HEADER)?);
    let ok = c.bytes(8)? == MAGIC
        && c.u32()? == VERSION
        && c.u32()? == kind.tag().1
        && c.bytes(32)? == digest;
    let len = usize::try_from(c.u64()?).ok()?;
    let crc = c.u32()?;
    // The header's padding is zero: every byte of an entry is checked.
    let padded = c.bytes(HEADER - c.position())?.iter().all(|&b| b == 0);
    let payload = HEADER..HEADER.checked_add(len)?;
    if !ok || !padded || data.len() != payload.end || crc32fast::hash(&data[payload.clone()]) != crc
    {
        return None;
    }
    Some(Hit {
        data: Arc::new(data),
        payload,
    })
}

/// This executable's identity: its build id, else its version, size and
/// modification time.
fn own_identity() -> Vec<u8> {
    use object::Object;
    let exe = std::env::current_exe().ok();
    let id = exe.as_ref().and_then(|p| {
        let map = crate::symbolize::sources::map_file(Path::new("/"), p)?;
        let elf = object::File::parse(&map[..]).ok()?;
        elf.build_id().ok().flatten().map(<[u8]>::to_vec)
    });
    id.unwrap_or_else(|| {
        let meta = exe.and_then(|p| std::fs::metadata(p).ok());
        let (size, mtime) = meta.map_or((0, 0), |m| {
            use std::os::unix::fs::MetadataExt;
            (m.size(), m.mtime())
        });
        format!("{} {size} {mtime}", env!("CARGO_PKG_VERSION")).into_bytes()
    })
}

/// Appends `v` little-endian.
pub fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// Appends `v` little-endian.
pub fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// Reads a payload front to back; every read is bounds-checked (`None`
/// past the end).
#[derive(Debug)]
pub struct Cursor<'a> {
    rest: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    /// A cursor at the start of `bytes`.
    pub fn new(bytes: &'a [u8]) -> Cursor<'a> {
        Cursor { rest: bytes, at: 0 }
    }

    /// The next `n` bytes.
    pub fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        if n > self.rest.len() {
            return None;
        }
        let (b, rest) = self.rest.split_at(n);
        self.rest = rest;
        self.at += n;
        Some(b)
    }

    /// The next little-endian u32.
    pub fn u32(&mut self) -> Option<u32> {
        self.bytes(4)
            .map(|b| u32::from_le_bytes(b.try_into().unwrap_or_default()))
    }

    /// The next little-endian u64.
    pub fn u64(&mut self) -> Option<u64> {
        self.bytes(8)
            .map(|b| u64::from_le_bytes(b.try_into().unwrap_or_default()))
    }

    /// The next little-endian u64 as a length or offset.
    pub fn usize(&mut self) -> Option<usize> {
        self.u64().and_then(|v| usize::try_from(v).ok())
    }

    /// Bytes read so far.
    pub fn position(&self) -> usize {
        self.at
    }

    /// Whether every byte was read.
    pub fn is_done(&self) -> bool {
        self.rest.is_empty()
    }
}

/// A temporary directory beside the test binary: its ancestors are the
/// builder's (a directory under /tmp that another user made would be
/// refused as root).
#[cfg(test)]
pub(crate) fn test_dir() -> tempfile::TempDir {
    let exe = std::env::current_exe().unwrap();
    tempfile::tempdir_in(exe.parent().unwrap()).unwrap()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(dir: &Path) -> Cache {
        Cache::new(dir.join("cache"))
    }

    #[test]
    fn an_entry_written_is_read_back_by_kind_and_key() {
        let t = test_dir();
        let c = cache(t.path());
        assert!(c.get(Kind::Symbols, b"k").is_none());
        c.put(Kind::Symbols, b"k", b"payload");
        assert_eq!(c.get(Kind::Symbols, b"k").unwrap().bytes(), b"payload");
        assert!(c.get(Kind::Dwarf, b"k").is_none(), "another kind");
        assert!(c.get(Kind::Symbols, b"k2").is_none(), "another key");
        // Another cache object (another run) on the same directory.
        let again = cache(t.path());
        assert_eq!(again.get(Kind::Symbols, b"k").unwrap().bytes(), b"payload");
        let mode = std::fs::metadata(t.path().join("cache")).unwrap();
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(mode.permissions().mode() & 0o777, 0o700);
        assert!(
            c.describe().contains("1 hit(s), 3 miss(es), 1 written"),
            "{}",
            c.describe()
        );
    }

    /// The one file in the cache directory.
    fn only_file(dir: &Path) -> PathBuf {
        let files: Vec<_> = std::fs::read_dir(dir.join("cache"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| !p.ends_with(TAG))
            .collect();
        assert_eq!(files.len(), 1, "{files:?}");
        files[0].clone()
    }

    #[test]
    fn a_damaged_or_truncated_entry_is_a_miss() {
        let t = test_dir();
        let c = cache(t.path());
        c.put(Kind::Dwarf, b"k", &[7u8; 1000]);
        let f = only_file(t.path());
        let good = std::fs::read(&f).unwrap();
        let mut bad = good.clone();
        bad[HEADER + 500] ^= 1;
        std::fs::write(&f, &bad).unwrap();
        assert!(c.get(Kind::Dwarf, b"k").is_none(), "a flipped payload bit");
        std::fs::write(&f, &good[..good.len() - 1]).unwrap();
        assert!(c.get(Kind::Dwarf, b"k").is_none(), "one byte short");
        std::fs::write(&f, &good[..10]).unwrap();
        assert!(c.get(Kind::Dwarf, b"k").is_none(), "a torn header");
        let mut padding = good.clone();
        padding[HEADER - 1] = 1;
        std::fs::write(&f, &padding).unwrap();
        assert!(
            c.get(Kind::Dwarf, b"k").is_none(),
            "a byte of the header's padding"
        );
        let mut other = good.clone();
        other[8] = 9;
        std::fs::write(&f, &other).unwrap();
        assert!(c.get(Kind::Dwarf, b"k").is_none(), "another format version");
        // Rewritten whole, it is taken again.
        c.put(Kind::Dwarf, b"k", &[7u8; 1000]);
        assert_eq!(c.get(Kind::Dwarf, b"k").unwrap().bytes(), &[7u8; 1000]);
    }

    #[test]
    fn a_directory_others_may_write_is_not_used() {
        use std::os::unix::fs::PermissionsExt;
        let t = test_dir();
        let d = t.path().join("cache");
        std::fs::create_dir(&d).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o777)).unwrap();
        let c = cache(t.path());
        c.put(Kind::Symbols, b"k", b"x");
        assert!(c.get(Kind::Symbols, b"k").is_none());
        assert_eq!(std::fs::read_dir(&d).unwrap().count(), 0, "nothing written");
        assert!(
            c.describe().contains("writable by you alone"),
            "{}",
            c.describe()
        );
    }

    #[test]
    fn a_link_as_the_directory_is_not_followed() {
        let t = test_dir();
        let elsewhere = t.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, t.path().join("cache")).unwrap();
        let c = cache(t.path());
        c.put(Kind::Symbols, b"k", b"x");
        assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
        assert!(c.describe().contains("not used"), "{}", c.describe());
    }

    #[test]
    fn only_entries_their_temporary_files_and_the_tag_are_jobprof_s() {
        let hex = "0123456789abcdef0123456789abcdef";
        assert_eq!(ours(&format!("sym-{hex}")), Some(Ours::Entry));
        assert_eq!(ours(&format!("units-{hex}")), Some(Ours::Entry));
        let temp = format!(".dwarf-{hex}.node1-77-0.tmp");
        assert_eq!(ours(&temp), Some(Ours::Temp(&temp[1..39])));
        assert_eq!(ours(TAG), Some(Ours::Tag));
        assert_eq!(ours(".CACHEDIR.TAG.node1-77-0.tmp"), Some(Ours::Temp(TAG)));
        for other in [
            "notes.txt",
            ".hidden.tmp",
            "sym-0123",
            &format!("sym-{hex}x"),
            &format!(".sym-{hex}.txt"),
            ".CACHEDIR.TAGx.tmp",
        ] {
            assert_eq!(ours(other), None, "{other}");
        }
    }

    #[test]
    fn a_directory_with_files_of_others_is_not_taken_and_an_empty_one_is_tagged() {
        let t = test_dir();
        let d = t.path().join("cache");
        std::fs::create_dir(&d).unwrap();
        std::fs::write(d.join("notes.txt"), b"mine").unwrap();
        let c = cache(t.path());
        c.put(Kind::Symbols, b"k", b"x");
        assert!(c.get(Kind::Symbols, b"k").is_none());
        assert!(c.describe().contains("notes.txt"), "{}", c.describe());
        assert_eq!(std::fs::read_dir(&d).unwrap().count(), 1, "nothing written");
        std::fs::remove_file(d.join("notes.txt")).unwrap();
        let c = cache(t.path());
        c.put(Kind::Symbols, b"k", b"x");
        assert!(c.get(Kind::Symbols, b"k").is_some());
        assert!(std::fs::read(d.join(TAG)).unwrap().starts_with(SIGNATURE));
    }

    #[test]
    fn a_link_above_the_directory_is_not_followed() {
        let t = test_dir();
        let elsewhere = t.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, t.path().join("home")).unwrap();
        let c = Cache::new(t.path().join("home/.cache/jobprof"));
        c.put(Kind::Symbols, b"k", b"x");
        assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
        assert!(c.describe().contains("symbolic link"), "{}", c.describe());
    }

    #[test]
    fn a_file_replaced_after_it_was_hashed_writes_no_entry() {
        use std::os::unix::fs::PermissionsExt;
        let t = test_dir();
        let f = t.path().join("f");
        std::fs::write(&f, b"one").unwrap();
        let h = Hashed::read(Path::new("/"), &f, None).unwrap();
        assert_eq!(h.content.writer, None, "this user's own file");
        let c = cache(t.path());
        assert!(c.unchanged([&h]));
        // Renamed over by another file of the same size.
        let g = t.path().join("g");
        std::fs::write(&g, b"two").unwrap();
        std::fs::rename(&g, &f).unwrap();
        assert!(!c.unchanged([&h]));
        assert!(
            c.describe().contains("changed while it was read"),
            "{}",
            c.describe()
        );
        // Another content, another key; one anyone may write has none.
        let again = Hashed::read(Path::new("/"), &f, None).unwrap();
        assert_ne!(again.content.key(), h.content.key());
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o666)).unwrap();
        assert!(Hashed::read(Path::new("/"), &f, None).is_none());
    }

    #[test]
    fn past_the_limit_the_least_recently_used_entries_go() {
        let t = test_dir();
        let c = cache(t.path()).with_limit(3 * (HEADER as u64 + 100) + 100);
        for k in [b"a", b"b", b"c"] {
            c.put(Kind::Symbols, k, &[1u8; 100]);
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        // `a` is used again: `b` is now the oldest.
        assert!(c.get(Kind::Symbols, b"a").is_some());
        std::thread::sleep(std::time::Duration::from_millis(20));
        c.put(Kind::Symbols, b"d", &[1u8; 100]);
        assert!(c.get(Kind::Symbols, b"b").is_none());
        for k in [b"a", b"c", b"d"] {
            assert!(c.get(Kind::Symbols, k).is_some(), "{k:?}");
        }
    }

    #[test]
    fn cursor_reads_are_bounded() {
        let mut out = Vec::new();
        put_u32(&mut out, 7);
        put_u64(&mut out, u64::MAX);
        let mut c = Cursor::new(&out);
        assert_eq!(c.u32(), Some(7));
        assert_eq!(c.u64(), Some(u64::MAX));
        assert!(c.is_done());
        assert_eq!(c.u32(), None);
        assert_eq!(Cursor::new(&out).bytes(13), None);
    }
}
