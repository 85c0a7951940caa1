//! The persistent symbol cache: what the run's [`super::store`] builds from
//! a symbol file with a build id (its finished symbol table, its inflated
//! DWARF sections), kept on disk so that the next run that meets the same
//! build (tomorrow's job, the 200th `reprocess` of the same binary, the
//! next task of an array) reads it instead of building it again.
//!
//! **Where.** `--cache-dir DIR` (or `JOBPROF_CACHE_DIR`), else
//! `$XDG_CACHE_HOME/jobprof`, else `~/.cache/jobprof`; `--no-cache` turns
//! it off. The directory is created with mode 0700 and used only when it
//! belongs to the user jobprof runs as and no one else may write it
//! (otherwise the log says why and the run goes on without it). Files are
//! mode 0600.
//!
//! **Keys, never trusted across a mismatch.** A file's name and header
//! carry a SHA-256 of what it was built from: this jobprof executable (its
//! own build id: a rebuilt jobprof, whose rules may differ, never reads an
//! older one's tables), the kind, and the build id and size of every symbol
//! file it was read from. A file is taken only when its magic, version,
//! kind and digest match, its length is the one its header records and
//! the CRC-32 of its payload is right; anything else is a miss, and the
//! entry is rebuilt and written again.
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
//! until the directory holds 90% of it.

use std::ffi::OsString;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use sha2::{Digest, Sha256};

use crate::sys::confined::Dir;

const MAGIC: &[u8; 8] = b"jobprofK";
const VERSION: u32 = 1;
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
        let mut h = Sha256::new();
        h.update((me.len() as u64).to_le_bytes());
        h.update(me);
        h.update(kind.tag().1.to_le_bytes());
        h.update(key);
        let digest: [u8; 32] = h.finalize().into();
        let hex = crate::sys::digest::hex(&digest[..16]);
        (format!("{}-{hex}", kind.tag().0).into(), digest)
    }

    /// Removes the least recently used entries while the directory holds
    /// more than the limit, and temporary files a killed writer left.
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
            let Ok(Some(e)) = dir.entry(&n) else { continue };
            if !e.is_file() {
                continue;
            }
            let ours = n.to_str().is_some_and(is_entry_name);
            if !ours && now_ns - e.mtime_ns > STALE_SECS * 1_000_000_000 {
                let _ = dir.remove_file(&n);
                continue;
            }
            total += e.size;
            if ours {
                entries.push((e.mtime_ns, e.size, n));
            }
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

/// A kind's tag, `-` and 32 hex digits: an entry, not a temporary file.
fn is_entry_name(n: &str) -> bool {
    let hex = [Kind::Symbols, Kind::Dwarf, Kind::Units]
        .iter()
        .find_map(|k| n.strip_prefix(k.tag().0)?.strip_prefix('-'));
    hex.is_some_and(|h| h.len() == 32 && h.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// Opens (creating, mode 0700) the cache directory `path`; refused unless
/// it is this user's and no one else may write it.
fn open_private(path: &Path) -> Result<Dir, String> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)
        .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
    let dir = Dir::open(path).map_err(|e| e.to_string())?;
    let (owner, mode) = dir.owner_and_mode().map_err(|e| e.to_string())?;
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if owner != me || mode & 0o022 != 0 {
        return Err(format!(
            "{} belongs to uid {owner} with mode {mode:o}: a symbol cache must be yours and \
             writable by you alone (chmod go-w it, or give --cache-dir DIR)",
            path.display()
        ));
    }
    Ok(dir)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(dir: &Path) -> Cache {
        Cache::new(dir.join("cache"))
    }

    #[test]
    fn an_entry_written_is_read_back_by_kind_and_key() {
        let t = tempfile::tempdir().unwrap();
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
            .collect();
        assert_eq!(files.len(), 1, "{files:?}");
        files[0].clone()
    }

    #[test]
    fn a_damaged_or_truncated_entry_is_a_miss() {
        let t = tempfile::tempdir().unwrap();
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
        let t = tempfile::tempdir().unwrap();
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
        let t = tempfile::tempdir().unwrap();
        let elsewhere = t.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, t.path().join("cache")).unwrap();
        let c = cache(t.path());
        c.put(Kind::Symbols, b"k", b"x");
        assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
        assert!(c.describe().contains("not used"), "{}", c.describe());
    }

    #[test]
    fn past_the_limit_the_least_recently_used_entries_go() {
        let t = tempfile::tempdir().unwrap();
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
