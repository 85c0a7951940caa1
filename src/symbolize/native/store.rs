//! The symbol store: what the native symbolizer reads from symbol files,
//! loaded once per run and shared by every shard, time slice, capture and
//! worker thread that one `process`, `reprocess` or array task handles.
//!
//! A job is many small captures of the same large binaries; without the
//! store each capture read and indexed them again (ELF symbols, unwind
//! tables, DWARF line and inline tables, the kernel table), which cost
//! more than its samples. The store holds, per DSO ([`Entry`]): its symbol
//! table, its unwind tables (framehop's sections), the DWARF of the file
//! its symbols came from (addr2line's context, which fills its tables
//! lazily and keeps them), and the finished frame lines of the addresses
//! printed so far (names demangled, inline chains resolved); kernel
//! tables by content (a kallsyms file read before, by its identity, is not
//! read again); and the resolver's answers (which files name a DSO), asked
//! once per run for every capture with the same search. Each part loads
//! lazily, once, on the first ask.
//!
//! **Keys.** Which files name a DSO is decided by the resolver
//! ([`crate::symbolize::sources::resolve`]); a DSO is shared between
//! captures only when those files are the same ([`DsoId`]): with a build
//! id that every taken file carries in its `.note.gnu.build-id` (the
//! resolver takes no other), the recorded path, the build id, and the kind
//! and content of each taken file ([`Content`]: the BLAKE3 hash of its bytes,
//! and its owner when another user could rewrite it: a build id is only
//! bytes a capture's owner wrote, and a forged file must never name
//! another capture's frames); otherwise (no build id recorded, a file
//! without one, or one anyone may write) the file identity of each
//! (device, inode, size and modification time), never shared with another
//! capture's copy. Each file is hashed once per run (by its identity);
//! each symbolizer keeps its own (path, build id) → entry map, so the stat
//! calls happen once per DSO and capture.
//!
//! **Memory.** Each part's size is counted as it loads (symbol tables by
//! their entries, unwind sections by their bytes, DWARF by the file's
//! size, frame lines by their bytes); past the store's limit the least
//! recently asked entries are dropped (runs that hold one keep it until
//! they end). [`Store::describe`] says what it holds, for the log and the
//! summary.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

pub use super::cache::{file_id, FileId};
use super::cache::{identity, Cache, Content, Hashed, Kind as CacheKind};
use super::elf::{self, DsoSymbols};
use super::inline;
use super::once_map::OnceMap;
use super::symbols::{self, SymbolTable};
use super::unwind::{self, DsoUnwind};
use crate::symbolize::sample::Line;
use crate::symbolize::sources::{Kind, Resolved, Search, Shrank, Source};

/// The store's default limit: 1 GiB of symbol data.
pub const DEFAULT_LIMIT: usize = 1 << 30;
/// Frame lines kept per entry before its line cache starts over.
const LINES_PER_ENTRY: usize = 1 << 18;
/// A kernel table's bytes counted per symbol (entry, name, arena).
const KERNEL_SYMBOL_BYTES: usize = 64;
/// An ELF symbol's bytes counted (table entry and name).
const SYMBOL_BYTES: usize = 80;

/// Which files a DSO's symbols come from: what decides whether two
/// captures may share them.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum DsoId {
    /// Every taken file carries `build_id`: (kind, content) of each.
    Build {
        /// The path the capture recorded.
        path: String,
        /// The build id recorded (and found in every file).
        build_id: Vec<u8>,
        /// (kind, content) of the taken files, debug files first.
        files: Vec<(Kind, Content)>,
    },
    /// No build id, or a file without it: the kind and identity
    /// ([`FileId`]) of each taken file.
    File {
        /// The path the capture recorded.
        path: String,
        /// The build id recorded (possibly empty).
        build_id: Vec<u8>,
        /// Identity of each taken file.
        files: Vec<(Kind, FileId)>,
    },
}

/// Whether `id` is a build id worth keying on (perf's rule: more than one
/// byte, not all zero).
fn usable_build_id(id: &[u8]) -> bool {
    id.len() > 1 && id.iter().any(|&b| b != 0)
}

impl DsoId {
    /// The key of the DSO recorded at `path` whose files the resolver took
    /// as `resolved` says, and the taken files as `hash` hashed them
    /// (none for a [`DsoId::File`]).
    pub fn of(
        path: &str,
        resolved: &Resolved,
        hash: impl Fn(&Source, FileId) -> Option<Hashed>,
    ) -> (DsoId, Vec<Hashed>) {
        let want = &resolved.recorded[..];
        let taken: Vec<(&Source, FileId)> = resolved
            .files()
            .filter_map(|f| Some((f, identity(&f.root, &f.path)?)))
            .collect();
        let carried = taken
            .iter()
            .all(|(f, _)| f.build_id.as_deref() == Some(want));
        let hashed: Option<Vec<Hashed>> = (usable_build_id(want) && carried)
            .then(|| taken.iter().map(|(f, id)| hash(f, *id)).collect())
            .flatten();
        if let Some(hashed) = hashed {
            let files = (taken.iter().zip(&hashed))
                .map(|((f, _), h)| (f.kind, h.content.clone()))
                .collect();
            let id = DsoId::Build {
                path: path.to_string(),
                build_id: want.to_vec(),
                files,
            };
            return (id, hashed);
        }
        let id = DsoId::File {
            path: path.to_string(),
            build_id: want.to_vec(),
            files: taken.iter().map(|(f, id)| (f.kind, *id)).collect(),
        };
        (id, Vec::new())
    }

    /// The key of this DSO's symbol table in the persistent cache: the
    /// build id and the kind and content of each taken file; `None`
    /// without a build id (file identities do not outlive the run's files).
    fn disk_key(&self) -> Option<Vec<u8>> {
        let DsoId::Build {
            build_id, files, ..
        } = self
        else {
            return None;
        };
        let mut key = build_id.clone();
        for (kind, content) in files {
            key.extend_from_slice(format!(" {kind:?} ").as_bytes());
            key.extend_from_slice(&content.key());
        }
        Some(key)
    }
}

/// Finished frames' lines by (file offset, inline frames expanded).
type Lines = rustc_hash::FxHashMap<(u64, bool), Arc<[Line]>>;

/// One DSO's symbol data, each part loaded on the first ask from the files
/// of the capture that created the entry (the same files, by its key, as
/// every capture that shares it).
pub struct Entry {
    /// The path the capture recorded (for the log).
    path: String,
    /// The files that name it.
    resolved: Arc<Resolved>,
    /// Whether there is a file to read at all.
    readable: bool,
    symbols: OnceLock<Arc<DsoSymbols>>,
    unwind: OnceLock<Option<Arc<DsoUnwind>>>,
    debug: OnceLock<Option<Arc<inline::Debug>>>,
    /// Finished frame lines by (file offset, inline frames expanded).
    lines: Mutex<Lines>,
    /// Bytes counted for the parts loaded so far.
    bytes: AtomicUsize,
    /// Dropped by the store: loads no longer add to its total.
    evicted: std::sync::atomic::AtomicBool,
    /// Handed to a background load already ([`Store::warm`]).
    warming: std::sync::atomic::AtomicBool,
    /// The store whose totals this entry's loads add to.
    counts: Arc<Counts>,
    /// The persistent cache, and this DSO's key in it.
    disk: Option<(Arc<Cache>, Vec<u8>)>,
    /// Files that shrank while a part was read from them (that part was
    /// thrown away): for the log.
    shrunk: Mutex<Vec<PathBuf>>,
    /// The taken files as hashed for the key (empty: no build id key).
    hashed: Vec<Hashed>,
}

impl std::fmt::Debug for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Entry")
            .field("path", &self.path)
            .field("bytes", &self.bytes.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl Entry {
    fn new(path: &str, resolved: Arc<Resolved>, counts: Arc<Counts>) -> Entry {
        Entry {
            path: path.to_string(),
            readable: resolved.found(),
            resolved,
            symbols: OnceLock::new(),
            unwind: OnceLock::new(),
            debug: OnceLock::new(),
            lines: Mutex::default(),
            bytes: AtomicUsize::new(0),
            evicted: Default::default(),
            warming: Default::default(),
            counts,
            disk: None,
            shrunk: Mutex::default(),
            hashed: Vec::new(),
        }
    }

    /// An entry with nothing to read: empty symbols, no unwind tables.
    pub fn empty() -> Arc<Entry> {
        Arc::new(Entry::new("", Arc::default(), Arc::default()))
    }

    fn count(&self, bytes: usize) {
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
        if !self.evicted.load(Ordering::Relaxed) {
            self.counts.bytes.fetch_add(bytes, Ordering::Relaxed);
        }
    }

    /// The DSO's symbols (an empty table when no file names them).
    pub fn symbols(&self) -> &Arc<DsoSymbols> {
        self.symbols.get_or_init(|| {
            if !self.readable {
                return Arc::default();
            }
            let s = self.load_symbols();
            if let Some(p) = &s.shrank {
                self.note_shrunk(p.clone());
            }
            self.count(s.table.len() * SYMBOL_BYTES);
            self.counts.loads.fetch_add(1, Ordering::Relaxed);
            Arc::new(s)
        })
    }

    /// The symbols from the persistent cache, else from the files (and
    /// then into the cache).
    fn load_symbols(&self) -> DsoSymbols {
        let Some((cache, key)) = &self.disk else {
            return elf::load(&self.resolved);
        };
        let hit = cache.get(CacheKind::Symbols, key);
        if let Some(s) = hit.and_then(|h| DsoSymbols::decode(h.bytes(), &self.resolved)) {
            return s;
        }
        let s = elf::load(&self.resolved);
        // A file that shrank gave nothing to keep, nor one that changed
        // after it was hashed.
        if s.shrank.is_none() && cache.unchanged(&self.hashed) {
            cache.put(CacheKind::Symbols, key, &s.encode(&self.resolved));
        }
        s
    }

    /// Notes `file` as one that shrank while read.
    fn note_shrunk(&self, file: PathBuf) {
        let mut v = self.shrunk.lock().unwrap_or_else(|e| e.into_inner());
        if !v.contains(&file) {
            v.push(file);
        }
    }

    /// The files that shrank while a part of this DSO was read from them
    /// (those parts were thrown away: its frames are unnamed or not
    /// unwound).
    pub fn shrunk(&self) -> Vec<PathBuf> {
        let mut v = self
            .shrunk
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        if let Some(d) = self.debug.get().and_then(Option::as_ref) {
            for p in d.shrunk() {
                if !v.contains(&p) {
                    v.push(p);
                }
            }
        }
        v
    }

    /// The DSO's unwind tables (`None`: nothing to unwind with).
    pub fn unwind(&self) -> Option<&Arc<DsoUnwind>> {
        self.unwind
            .get_or_init(|| {
                if !self.readable {
                    return None;
                }
                let t = match unwind::load(&self.resolved) {
                    Ok(t) => t?,
                    Err(Shrank(p)) => {
                        self.note_shrunk(p);
                        return None;
                    }
                };
                self.count(t.bytes());
                self.counts.loads.fetch_add(1, Ordering::Relaxed);
                Some(Arc::new(t))
            })
            .as_ref()
    }

    /// The DWARF of the file the symbols came from (`None`: none).
    pub fn debug(&self) -> Option<&Arc<inline::Debug>> {
        self.debug
            .get_or_init(|| {
                let syms = self.symbols();
                let src = syms.source.as_ref()?;
                let hashed = self.hashed.iter().find(|h| h.path == src.path);
                let cache = self.disk.as_ref().map(|(c, _)| &**c).zip(hashed);
                let d = match inline::Debug::load(&src.root, &src.path, src.owner.as_ref(), cache) {
                    Ok(d) => d?,
                    Err(Shrank(p)) => {
                        self.note_shrunk(p);
                        return None;
                    }
                };
                let size = std::fs::metadata(&src.path).map_or(0, |m| m.len() as usize);
                self.count(size);
                self.counts.loads.fetch_add(1, Ordering::Relaxed);
                Some(Arc::new(d))
            })
            .as_ref()
    }

    /// The frame lines kept for file offset `offset` (`expand`: with
    /// inline frames), or the ones `make` names, kept; `None` when `make`
    /// names none (lines named in a shard's order: never kept here).
    pub fn line(
        &self,
        offset: u64,
        expand: bool,
        make: impl FnOnce() -> Result<Vec<Line>, ()>,
    ) -> Option<Arc<[Line]>> {
        let key = (offset, expand);
        if let Some(l) = self.lock_lines().get(&key) {
            return Some(l.clone());
        }
        let line: Arc<[Line]> = make().ok()?.into();
        let size = |l: &[Line]| l.iter().map(Line::size).sum::<usize>();
        let mut lines = self.lock_lines();
        // Another thread made this address's lines meanwhile (the same
        // lines: those that depend on what was asked before are not kept
        // here).
        if let Some(l) = lines.get(&key) {
            return Some(l.clone());
        }
        if lines.len() >= LINES_PER_ENTRY {
            let dropped: usize = lines.values().map(|l| size(l)).sum();
            lines.clear();
            self.bytes.fetch_sub(dropped, Ordering::Relaxed);
            if !self.evicted.load(Ordering::Relaxed) {
                sub(&self.counts.bytes, dropped);
            }
        }
        if lines.insert(key, line.clone()).is_none() {
            self.count(size(&line));
        }
        Some(line)
    }

    fn lock_lines(&self) -> std::sync::MutexGuard<'_, Lines> {
        self.lines.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Bytes counted for what this entry holds.
    pub fn bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }
}

/// Takes `n` from `c`, stopping at 0 (a load counted while its entry was
/// being dropped must not wrap the total).
fn sub(c: &AtomicUsize, n: usize) {
    let _ = c.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
        Some(v.saturating_sub(n))
    });
}

/// The store's running totals, shared with its entries.
#[derive(Debug, Default)]
struct Counts {
    /// Bytes counted for every part loaded and not dropped.
    bytes: AtomicUsize,
    /// Parts loaded (symbol tables, unwind tables, DWARF, kernel tables).
    loads: AtomicU64,
    /// Asks answered by an entry another capture (or slice) made.
    reuses: AtomicU64,
    /// Entries dropped for the limit.
    evictions: AtomicU64,
}

struct Slot<T> {
    value: Arc<T>,
    last_use: u64,
}

/// A kernel table by its text's content.
struct Kernel {
    text: Vec<u8>,
    table: OnceLock<Arc<SymbolTable>>,
    bytes: AtomicUsize,
}

#[derive(Default)]
struct Slots {
    dsos: HashMap<DsoId, Slot<Entry>>,
    kernels: HashMap<(usize, u64), Slot<Kernel>>,
    /// Which kernel table a kallsyms file read before holds, by the file's
    /// identity ([`FileId`]).
    kernel_files: HashMap<FileId, (usize, u64)>,
    tick: u64,
}

/// The key of a kernel table: its text's length and hash.
fn kernel_key(text: &[u8]) -> (usize, u64) {
    let mut h = rustc_hash::FxHasher::default();
    text.hash(&mut h);
    (text.len(), h.finish())
}

/// Symbol data by DSO, shared by a whole run; see the module's doc.
pub struct Store {
    limit: usize,
    slots: Mutex<Slots>,
    counts: Arc<Counts>,
    /// The resolver's answers, by recorded path, build id and search.
    resolutions: OnceMap<(String, Vec<u8>, Search), Arc<Resolved>>,
    /// Whether [`Store::warm`] loads in the background.
    background: bool,
    /// The persistent cache entries read from and write to.
    disk: Option<Arc<Cache>>,
    /// Each symbol file hashed, by path and identity: once per run.
    hashes: OnceMap<(std::path::PathBuf, FileId), Option<Hashed>>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}

impl Default for Store {
    fn default() -> Self {
        Store::new(DEFAULT_LIMIT)
    }
}

impl Store {
    /// An empty store that keeps about `limit` bytes of symbol data.
    pub fn new(limit: usize) -> Store {
        Store {
            limit,
            slots: Mutex::default(),
            counts: Arc::default(),
            resolutions: OnceMap::default(),
            background: false,
            disk: None,
            hashes: OnceMap::default(),
        }
    }

    /// This store, reading symbol tables and DWARF of files with a build
    /// id from `cache` (and writing there what it had to build).
    pub fn with_disk_cache(mut self, cache: Option<Arc<Cache>>) -> Store {
        self.disk = cache;
        self
    }

    /// This store, loading each new DSO's symbols (and DWARF) in the
    /// background when asked to ([`Store::warm`]): for runs that may use
    /// more than one core.
    pub fn with_background_loads(mut self, on: bool) -> Store {
        self.background = on;
        self
    }

    /// Starts loading `entry`'s symbols, then its DWARF when `debug`, on
    /// another thread, while the asker goes on (it asks for the unwind
    /// tables first, and its other DSOs': the first capture of a run
    /// loaded every part of every DSO one after the other). Once per
    /// entry, and only for a store made [`Store::with_background_loads`].
    pub fn warm(&self, entry: &Arc<Entry>, debug: bool) {
        let started = !self.background
            || !entry.readable
            || entry.symbols.get().is_some()
            || entry.warming.swap(true, Ordering::Relaxed);
        if started {
            return;
        }
        let e = entry.clone();
        rayon::spawn(move || {
            e.symbols();
            if debug {
                e.debug();
            }
        });
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Slots> {
        self.slots.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Which files name the DSO recorded at `path` with `build_id` (possibly
    /// empty) under `search`: resolved by the first capture of the run
    /// that asks ([`crate::symbolize::sources::resolve`] opens and checks
    /// each candidate file, which cost more than a small capture's
    /// samples), the same answer for every later one.
    pub fn resolved(&self, path: &str, build_id: &[u8], search: &Search) -> Arc<Resolved> {
        let key = (path.to_string(), build_id.to_vec(), search.clone());
        self.resolutions.get_or_load(key, || {
            Arc::new(crate::symbolize::sources::resolve(path, build_id, search))
        })
    }

    /// The entry of the DSO recorded at `path` whose files the resolver
    /// took as `resolved` says: shared with every earlier ask whose files
    /// are the same ([`DsoId`]).
    pub fn dso(&self, path: &str, resolved: &Arc<Resolved>) -> Arc<Entry> {
        let (id, hashed) = DsoId::of(path, resolved, |f, id| self.hash(f, id));
        let mut slots = self.lock();
        slots.tick += 1;
        let tick = slots.tick;
        let e = match slots.dsos.get_mut(&id) {
            Some(s) => {
                s.last_use = tick;
                self.counts.reuses.fetch_add(1, Ordering::Relaxed);
                s.value.clone()
            }
            None => {
                let mut e = Entry::new(path, resolved.clone(), self.counts.clone());
                e.disk = (self.disk.clone()).zip(id.disk_key());
                e.hashed = hashed;
                let e = Arc::new(e);
                let slot = Slot {
                    value: e.clone(),
                    last_use: tick,
                };
                slots.dsos.insert(id, slot);
                e
            }
        };
        self.evict(&mut slots);
        e
    }

    /// The symbol file `f`, whose identity is `id`, hashed: once per run.
    fn hash(&self, f: &Source, id: FileId) -> Option<Hashed> {
        let key = (f.path.clone(), id);
        self.hashes
            .get_or_load(key, || Hashed::read(&f.root, &f.path, f.owner.as_ref()))
            .filter(|h| h.id == id)
    }

    /// The kernel table read from `text` (kallsyms format), shared with
    /// every earlier ask for the same text.
    pub fn kernel(&self, text: Vec<u8>) -> Arc<SymbolTable> {
        let key = kernel_key(&text);
        // The cell is made under the lock and filled outside it: a second
        // asker of the same text waits for the first one's table.
        let cell = {
            let mut slots = self.lock();
            slots.tick += 1;
            let tick = slots.tick;
            match slots.kernels.get_mut(&key).filter(|s| s.value.text == text) {
                Some(s) => {
                    s.last_use = tick;
                    self.counts.reuses.fetch_add(1, Ordering::Relaxed);
                    s.value.clone()
                }
                None => {
                    let k = Arc::new(Kernel {
                        text,
                        table: OnceLock::new(),
                        bytes: AtomicUsize::new(0),
                    });
                    let slot = Slot {
                        value: k.clone(),
                        last_use: tick,
                    };
                    if let Some(old) = slots.kernels.insert(key, slot) {
                        sub(&self.counts.bytes, old.value.bytes.load(Ordering::Relaxed));
                    }
                    k
                }
            }
        };
        let table = cell
            .table
            .get_or_init(|| {
                let table = Arc::new(symbols::read_kallsyms(&cell.text[..]).unwrap_or_default());
                let bytes = cell.text.len() + table.len() * KERNEL_SYMBOL_BYTES;
                cell.bytes.store(bytes, Ordering::Relaxed);
                self.counts.bytes.fetch_add(bytes, Ordering::Relaxed);
                self.counts.loads.fetch_add(1, Ordering::Relaxed);
                table
            })
            .clone();
        self.evict(&mut self.lock());
        table
    }

    /// The kernel table of the kallsyms file whose identity is `id`
    /// (a regular file: `/proc/kallsyms` has none worth keeping), read with
    /// `read` only when no table of the store came from that file: the
    /// snapshot every capture of a worker shares is read once per run.
    /// `None` when `read` fails.
    pub fn kernel_file(
        &self,
        id: FileId,
        read: impl FnOnce() -> Option<Vec<u8>>,
    ) -> Option<Arc<SymbolTable>> {
        {
            let mut slots = self.lock();
            let key = slots.kernel_files.get(&id).copied();
            slots.tick += 1;
            let tick = slots.tick;
            let known = key.and_then(|k| slots.kernels.get_mut(&k));
            if let Some(s) = known {
                if let Some(t) = s.value.table.get() {
                    s.last_use = tick;
                    self.counts.reuses.fetch_add(1, Ordering::Relaxed);
                    return Some(t.clone());
                }
            }
        }
        let text = read()?;
        let key = kernel_key(&text);
        let table = self.kernel(text);
        self.lock().kernel_files.insert(id, key);
        Some(table)
    }

    /// Drops the least recently asked entries while more than the limit is
    /// held; the one asked last stays whatever its size (its asker is
    /// about to use it). Runs at every ask: what an entry loads after it
    /// was asked for counts from the next ask on.
    fn evict(&self, slots: &mut Slots) {
        let newest = slots.tick;
        while self.counts.bytes.load(Ordering::Relaxed) > self.limit {
            let dso = slots
                .dsos
                .iter()
                .filter(|(_, s)| s.last_use != newest)
                .min_by_key(|(_, s)| s.last_use)
                .map(|(k, s)| (s.last_use, k.clone()));
            let kernel = slots
                .kernels
                .iter()
                .filter(|(_, s)| s.last_use != newest)
                .min_by_key(|(_, s)| s.last_use)
                .map(|(k, s)| (s.last_use, *k));
            let dso_first = match (&dso, &kernel) {
                (Some((a, _)), Some((b, _))) => a <= b,
                (d, _) => d.is_some(),
            };
            let freed = match (dso, kernel) {
                (Some((_, k)), _) if dso_first => slots.dsos.remove(&k).map_or(0, |s| {
                    s.value.evicted.store(true, Ordering::Relaxed);
                    s.value.bytes()
                }),
                (_, Some((_, k))) => slots
                    .kernels
                    .remove(&k)
                    .map_or(0, |s| s.value.bytes.load(Ordering::Relaxed)),
                _ => break,
            };
            sub(&self.counts.bytes, freed);
            self.counts.evictions.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Bytes counted for what the store holds now.
    pub fn bytes(&self) -> usize {
        self.counts.bytes.load(Ordering::Relaxed)
    }

    /// Entries held now (DSOs, kernel tables).
    pub fn entries(&self) -> (usize, usize) {
        let s = self.lock();
        (s.dsos.len(), s.kernels.len())
    }

    /// Parts loaded, asks answered from an earlier entry, entries dropped.
    pub fn figures(&self) -> (u64, u64, u64) {
        let c = &self.counts;
        (
            c.loads.load(Ordering::Relaxed),
            c.reuses.load(Ordering::Relaxed),
            c.evictions.load(Ordering::Relaxed),
        )
    }

    /// Logs [`Self::describe`]: a detail (`-v`), or a warning when the
    /// persistent cache could not be used or written (the user's
    /// `--cache-dir` or home is refused, and says why).
    pub fn log_to(&self, progress: &dyn crate::sys::progress::Progress) {
        let line = self.describe();
        match self.disk.as_ref().and_then(|c| c.problem()) {
            Some(_) => progress.log(&format!("warning: {line}")),
            None => progress.detail(&line),
        }
    }

    /// One line on what the store holds, for the log.
    pub fn describe(&self) -> String {
        let (dsos, kernels) = self.entries();
        let (loads, reuses, evictions) = self.figures();
        format!(
            "symbol store: {dsos} DSO(s) and {kernels} kernel table(s), about {:.1} MiB of {} MiB; \
             {loads} load(s), {reuses} reuse(s), {evictions} eviction(s)",
            self.bytes() as f64 / (1 << 20) as f64,
            self.limit >> 20
        ) + &self
            .disk
            .as_ref()
            .map_or(String::new(), |c| format!("; {}", c.describe()))
    }
}

#[cfg(test)]
mod tests;
