//! Inline frames as `perf script --inline` prints them: the functions the
//! compiler inlined at an address, read from the DWARF of the file the
//! DSO's symbols came from (the capture's `symfs/` copy or its separate
//! debug file, with a `dwz` supplementary file when the debug file names
//! one) through addr2line and gimli.
//!
//! perf 6.1 asks binutils' `addr2line -i -f` for the address and keeps its
//! records while they carry a line number: the innermost function first,
//! then each caller it was inlined into, up to the function that holds the
//! code. A record whose (demangled) name is the ELF symbol's own prints as
//! the ordinary frame line; any other prints as `NAME+0xOFF (inlined)`,
//! with the offset from the ELF symbol and no DSO. No line number for the
//! address itself (no debug information, or a compiler-made row) means no
//! inline list here: the frame prints as without `--inline`, unless
//! binutils names the address from the symbol table otherwise than perf
//! does (folded code: [`super::symbols::SymbolTable::bfd_name`]), which
//! perf prints as an inlined frame. perf 6.1 does this
//! only for call chains it unwinds from stack copies (`--call-graph
//! dwarf`); frame-pointer chains print no inline frames even with
//! `--inline` (the change that added them to other chains was reverted
//! upstream for its cost), and the native symbolizer follows it.
//!
//! A file's DWARF is loaded once per DSO by the run's [`super::store`]
//! (shared by every shard, slice and capture); callers cache the finished
//! lines per address.

use crate::symbolize::sources::Shrank;
use crate::sys::creds::Creds;
use crate::sys::input::Mapping;
use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use object::read::elf::ElfFile64;
use object::{Endianness, Object, ObjectSection};

use super::cache::{Cache, Hashed, Kind};
use super::demangle::demangle;
use crate::symbolize::sample::{Line, INLINED};

type Reader = gimli::EndianReader<gimli::RunTimeEndian, Bytes>;

/// The bytes of one DWARF section, shared without a copy: a range of the
/// mapped file (an uncompressed section), the buffer a compressed one was
/// inflated into, or a range of a persistent cache entry read whole.
#[derive(Clone, Debug)]
enum Bytes {
    Mapped(Arc<Mapping>, std::ops::Range<usize>),
    /// An anonymous map of jobprof's own (a unit-restricted copy).
    Anon(Arc<memmap2::Mmap>, std::ops::Range<usize>),
    Owned(Arc<Vec<u8>>),
    Part(Arc<Vec<u8>>, std::ops::Range<usize>),
}

impl std::ops::Deref for Bytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Bytes::Mapped(map, range) => &map[range.clone()],
            Bytes::Anon(map, range) => &map[range.clone()],
            Bytes::Owned(v) => v,
            Bytes::Part(v, range) => &v[range.clone()],
        }
    }
}

// SAFETY: every variant derefs into a heap or mapped buffer an `Arc` keeps
// alive and never moves; a clone derefs to the same address.
unsafe impl stable_deref_trait::StableDeref for Bytes {}
// SAFETY: as above.
unsafe impl stable_deref_trait::CloneStableDeref for Bytes {}

mod names;
mod split;
mod units;

pub use names::{Named, Record};

/// What [`Debug::lookup`] gives for an address.
#[derive(Debug)]
pub enum Lookup {
    /// The chain's names (innermost first), the same whatever was asked
    /// before (empty: no inline list).
    Names(Vec<String>),
    /// Records of which some are named by what was asked before
    /// ([`names`]): a [`Named`] state names them in perf's order.
    Ordered(Vec<Record>),
}

/// An addr2line context. It fills its tables lazily and is not `Sync`:
/// lookups take the lock (they happen once per distinct address; lines
/// are cached by the caller).
type Context = Mutex<addr2line::Context<Reader>>;

/// The DWARF of one file, ready for address lookups: one context over the
/// whole file, or, where the file's unit index is known ([`units`]), one
/// per set of units the addresses asked fall in.
pub struct Debug {
    sections: Sections,
    sup: Option<Arc<gimli::Dwarf<Reader>>>,
    /// The file's units and their ranges (`None`: the whole file only).
    index: Option<units::UnitIndex>,
    /// The context over the whole file, made on first need.
    whole: OnceLock<Option<Context>>,
    /// Contexts over some units, by the units, and the bytes their copies
    /// of `.debug_info` take.
    parts: Mutex<Parts>,
    /// The mapped files read in place (lookups read them lazily), with
    /// their paths: one that shrank names no inline frame from then on.
    maps: Vec<(Arc<Mapping>, PathBuf)>,
    /// binutils' names of functions without linkage names, as
    /// [`Debug::chain`] is asked (the native symbolizer keeps its own per
    /// shard: `super::order`).
    named: names::Named,
    /// The `.dwo` units or `.dwp` package of a split-DWARF file.
    split: split::Split,
}

/// [`Debug`]'s contexts over some units.
#[derive(Default)]
struct Parts {
    made: rustc_hash::FxHashMap<Vec<u32>, Option<Arc<Context>>>,
    bytes: usize,
}

/// The most bytes the copies of `.debug_info` of one file's contexts over
/// some units may take (mostly untouched zero pages); past that, lookups
/// go to the whole file's context.
const PART_BYTES: usize = 512 << 20;

impl std::fmt::Debug for Debug {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("inline::Debug")
    }
}

/// The DWARF sections read, in [`gimli::SectionId`] order.
const SECTIONS: [gimli::SectionId; 17] = {
    use gimli::SectionId::*;
    [
        DebugAbbrev,
        DebugAddr,
        DebugAranges,
        DebugCuIndex,
        DebugInfo,
        DebugLine,
        DebugLineStr,
        DebugLoc,
        DebugLocLists,
        DebugMacinfo,
        DebugMacro,
        DebugRanges,
        DebugRngLists,
        DebugStr,
        DebugStrOffsets,
        DebugTuIndex,
        DebugTypes,
    ]
};

/// The inflated sections of a file from the persistent cache: (index in
/// [`SECTIONS`], range in the entry's bytes).
type Inflated = Vec<(u32, std::ops::Range<usize>)>;

/// The sections a load had to inflate: (index in [`SECTIONS`], bytes).
type Inflating = Vec<(u32, Arc<Vec<u8>>)>;

/// The persistent cache, and the file an entry is built from as it was
/// hashed (its content is the entry's key).
type Keyed<'a> = Option<(&'a Cache, &'a Hashed)>;

/// The section table of a cached entry, with ranges in its bytes.
fn read_inflated(hit: &super::cache::Hit) -> Option<Inflated> {
    let (_, base) = hit.buffer();
    let bytes = hit.bytes();
    let mut c = super::cache::Cursor::new(bytes);
    let mut out = Vec::new();
    for _ in 0..c.u32()? {
        let (i, at, len) = (c.u32()?, c.usize()?, c.usize()?);
        let end = at.checked_add(len).filter(|&e| e <= bytes.len())?;
        if i as usize >= SECTIONS.len() {
            return None;
        }
        out.push((i, base + at..base + end));
    }
    Some(out)
}

/// The payload of a cached entry for `inflated` sections.
fn write_inflated(inflated: &[(u32, Arc<Vec<u8>>)]) -> Vec<u8> {
    use super::cache::{put_u32, put_u64};
    let mut out = Vec::new();
    put_u32(&mut out, inflated.len() as u32);
    let mut at = 4 + inflated.len() * 20;
    for (i, data) in inflated {
        put_u32(&mut out, *i);
        put_u64(&mut out, at as u64);
        put_u64(&mut out, data.len() as u64);
        at += data.len();
    }
    for (_, data) in inflated {
        out.extend_from_slice(data);
    }
    out
}

/// A file's DWARF sections, read once: what every context over the file
/// reads.
struct Sections {
    endian: gimli::RunTimeEndian,
    parts: Vec<(gimli::SectionId, Bytes)>,
}

impl Sections {
    fn part(&self, id: gimli::SectionId) -> Bytes {
        self.parts
            .iter()
            .find(|(i, _)| *i == id)
            .map_or_else(|| Bytes::Owned(Arc::default()), |(_, b)| b.clone())
    }

    /// Section `id` as gimli reads it.
    fn reader(&self, id: gimli::SectionId) -> Reader {
        gimli::EndianReader::new(self.part(id), self.endian)
    }

    /// The sections as gimli reads them, with `info` as `.debug_info`
    /// when given.
    fn dwarf(&self, info: Option<Bytes>) -> Option<gimli::Dwarf<Reader>> {
        let load = |id: gimli::SectionId| -> Result<Reader, gimli::Error> {
            Ok(match (id, &info) {
                (gimli::SectionId::DebugInfo, Some(b)) => {
                    gimli::EndianReader::new(b.clone(), self.endian)
                }
                _ => self.reader(id),
            })
        };
        let mut dwarf = gimli::Dwarf::load(load).ok()?;
        // Units that share an abbreviation table (half of a libc debug
        // file's) parse it once.
        dwarf.populate_abbreviations_cache(gimli::AbbreviationsCacheStrategy::Duplicates);
        Some(dwarf)
    }
}

/// The DWARF sections of `file` (mapped by `map`): uncompressed ones read
/// in place, compressed ones inflated once, or taken from the persistent
/// `cache` where an earlier run left them inflated.
fn sections(
    map: &Arc<Mapping>,
    file: &ElfFile64<'_, Endianness>,
    cache: Keyed<'_>,
) -> Option<Sections> {
    // Only inflated sections are kept: a file without any is read in
    // place already.
    let compressed = file.sections().any(|s| {
        s.name()
            .is_ok_and(|n| n.starts_with(".debug_") || n.starts_with(".zdebug_"))
            && s.compressed_file_range()
                .is_ok_and(|r| r.format != object::CompressionFormat::None)
    });
    let cache = cache.filter(|_| compressed);
    let key = cache.map(|(_, h)| h.content.key());
    let hit = cache
        .zip(key.as_ref())
        .and_then(|((c, _), k)| c.get(Kind::Dwarf, k));
    let cached = hit.as_ref().and_then(read_inflated);
    let (dwarf, inflated) = read_sections(map, file, hit.as_ref().zip(cached.as_ref()), false)?;
    if let Some(((c, h), k)) = cache
        .zip(key)
        .filter(|_| cached.is_none() && !inflated.is_empty())
    {
        // Never kept from a file that shrank (its zeros are not its
        // DWARF), nor from one that changed after it was hashed.
        if !map.shrank() && c.unchanged([h]) {
            c.put(Kind::Dwarf, &k, &write_inflated(&inflated));
        }
    }
    Some(dwarf)
}

/// [`sections`]' reading: each section from `cached` when there, else
/// from the file; and the sections that had to be inflated. `dwo`: the
/// split DWARF sections of a `.dwo` file or `.dwp` package
/// (`.debug_info.dwo`, ...: [`split`]).
fn read_sections(
    map: &Arc<Mapping>,
    file: &ElfFile64<'_, Endianness>,
    cached: Option<(&super::cache::Hit, &Inflated)>,
    dwo: bool,
) -> Option<(Sections, Inflating)> {
    let name = |id: gimli::SectionId| if dwo { id.dwo_name() } else { Some(id.name()) };
    let endian = if file.is_little_endian() {
        gimli::RunTimeEndian::Little
    } else {
        gimli::RunTimeEndian::Big
    };
    file.section_by_name(name(gimli::SectionId::DebugInfo)?)?;
    // Variable locations, macros and type units name no frame: left
    // unread (and undecompressed; location lists are a fifth of a libc
    // debug file). Split files keep them: a package's unit index slices
    // every section it lists, and one missing fails the unit's lookup.
    let unread = |id| {
        use gimli::SectionId::{DebugLoc, DebugLocLists, DebugMacinfo, DebugMacro, DebugTypes};
        !dwo && matches!(
            id,
            DebugLoc | DebugLocLists | DebugMacinfo | DebugMacro | DebugTypes
        )
    };
    let base = map.as_ptr() as usize;
    let mut inflated = Inflating::new();
    let mut load = |id: gimli::SectionId| -> Bytes {
        let index = SECTIONS.iter().position(|&s| s == id).unwrap_or(usize::MAX) as u32;
        let from_cache = cached.and_then(|(hit, table)| {
            let (_, range) = table.iter().find(|(i, _)| *i == index)?;
            Some(Bytes::Part(hit.buffer().0.clone(), range.clone()))
        });
        if let Some(bytes) = from_cache {
            return bytes;
        }
        let data = name(id)
            .and_then(|n| file.section_by_name(n))
            .filter(|_| !unread(id))
            .and_then(|s| s.uncompressed_data().ok());
        match data {
            Some(Cow::Borrowed(b)) => {
                // In the map (anything else, such as the empty data of a
                // `SHT_NOBITS` section, is copied).
                let at = (b.as_ptr() as usize).wrapping_sub(base);
                match map.get(at..at.wrapping_add(b.len())) {
                    Some(m) if m.as_ptr() == b.as_ptr() => {
                        Bytes::Mapped(map.clone(), at..at + b.len())
                    }
                    _ => Bytes::Owned(Arc::new(b.to_vec())),
                }
            }
            Some(Cow::Owned(v)) => {
                let v = Arc::new(v);
                inflated.push((index, v.clone()));
                Bytes::Owned(v)
            }
            None => Bytes::Owned(Arc::new(Vec::new())),
        }
    };
    let parts = SECTIONS.iter().map(|&id| (id, load(id))).collect();
    Some((Sections { endian, parts }, inflated))
}

/// The `dwz` supplementary file a debug file names in
/// `.gnu_debugaltlink` (a path, then its build id), looked up under `root`
/// as perf's addr2line would find it: the path itself, beside the debug
/// file when relative, then by build id.
fn supplementary(root: &Path, file: &Path, elf: &ElfFile64<'_, Endianness>) -> Option<PathBuf> {
    let link = elf.section_by_name(".gnu_debugaltlink")?;
    let data = link.data().ok()?;
    let nul = data.iter().position(|&b| b == 0)?;
    let name = std::str::from_utf8(&data[..nul]).ok()?;
    let id = &data[nul + 1..];
    let mut tries = Vec::new();
    if let Some(abs) = name.strip_prefix('/') {
        tries.push(root.join(abs));
    } else if let Some(dir) = file.parent() {
        tries.push(dir.join(name));
    }
    if id.len() > 1 {
        let hex = crate::sys::digest::hex(id);
        tries.push(
            root.join("usr/lib/debug/.build-id")
                .join(&hex[..2])
                .join(format!("{}.debug", &hex[2..])),
        );
    }
    tries.into_iter().find(|p| p.is_file())
}

impl Debug {
    /// Loads the DWARF of `file` (and of its supplementary file); `None`
    /// when it has no `.debug_info` or cannot be read. With a persistent
    /// `cache`, the file's unit index comes from there (or is built and
    /// kept there), and lookups parse only the units they land in; `cache`
    /// comes with `file` as hashed for its key ([`Hashed`]: entries are
    /// found by the file's content, never by its build id alone).
    ///
    /// Files are opened with `owner`'s rights when given
    /// ([`crate::symbolize::sources::map_as`]); one that shrinks while it
    /// is read is [`Shrank`] (and [`Debug::shrank`] from then on).
    pub fn load(
        root: &Path,
        file: &Path,
        owner: Option<&Creds>,
        cache: Keyed<'_>,
    ) -> Result<Option<Debug>, Shrank> {
        let map_one = |p: &Path| crate::symbolize::sources::map_as(root, p, owner).ok();
        let Some(map) = map_one(file).map(Arc::new) else {
            return Ok(None);
        };
        let debug = Debug::read(root, file, &map, map_one, owner, cache);
        if let Some((_, p)) = debug
            .as_ref()
            .and_then(|d| d.maps.iter().find(|m| m.0.shrank()))
        {
            return Err(Shrank(p.clone()));
        }
        if map.shrank() {
            return Err(Shrank(file.to_path_buf()));
        }
        Ok(debug)
    }

    /// [`Self::load`]'s reading of `file` (mapped as `map`) and its
    /// supplementary file (mapped by `map_one`, hashed as `owner`).
    fn read(
        root: &Path,
        file: &Path,
        map: &Arc<Mapping>,
        map_one: impl Fn(&Path) -> Option<Mapping>,
        owner: Option<&Creds>,
        cache: Keyed<'_>,
    ) -> Option<Debug> {
        let map = map.clone();
        let elf = ElfFile64::<Endianness>::parse(&map[..]).ok()?;
        let own = sections(&map, &elf, cache)?;
        let mut sup = None;
        let mut maps = vec![(map.clone(), file.to_path_buf())];
        if let Some(path) = supplementary(root, file, &elf) {
            let sup_map = Arc::new(map_one(&path)?);
            let sup_elf = ElfFile64::<Endianness>::parse(&sup_map[..]).ok()?;
            let hashed = cache.and_then(|_| Hashed::read(root, &path, owner));
            let sup_cache = cache.map(|(c, _)| c).zip(hashed.as_ref());
            sup = sections(&sup_map, &sup_elf, sup_cache)
                .and_then(|s| s.dwarf(None))
                .map(Arc::new);
            maps.push((sup_map, path));
        }
        let index = cache
            .filter(|_| sup.is_none())
            .and_then(|(c, h)| unit_index(&own, c, h, &map));
        let debug = Debug {
            sections: own,
            sup,
            index,
            whole: OnceLock::new(),
            parts: Mutex::default(),
            maps,
            named: names::Named::default(),
            split: split::Split::new(root, file, owner),
        };
        // Without an index the whole file's context is the only one; a
        // file addr2line cannot read has none.
        if debug.index.is_none() {
            debug.whole().as_ref()?;
        }
        Some(debug)
    }

    /// Whether a file this DWARF is read from shrank under its map: what
    /// it gives is not the file's.
    pub fn shrank(&self) -> bool {
        self.maps.iter().any(|(m, _)| m.shrank())
            || self.split_maps().iter().any(|(m, _)| m.shrank())
    }

    /// The split DWARF files read so far.
    fn split_maps(&self) -> std::sync::MutexGuard<'_, Vec<(Arc<Mapping>, PathBuf)>> {
        self.split.maps.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The files this DWARF is read from that shrank under their maps.
    pub fn shrunk(&self) -> Vec<PathBuf> {
        let split = self.split_maps();
        let shrunk = self
            .maps
            .iter()
            .chain(split.iter())
            .filter(|(m, _)| m.shrank());
        shrunk.map(|(_, p)| p.clone()).collect()
    }

    /// The context over the whole file.
    fn whole(&self) -> &Option<Context> {
        self.whole.get_or_init(|| {
            let mut dwarf = self.sections.dwarf(None)?;
            dwarf.sup = self.sup.clone();
            addr2line::Context::from_dwarf(dwarf).ok().map(Mutex::new)
        })
    }

    /// The context over the units `set` only (`None`: it cannot be made).
    fn part(&self, index: &units::UnitIndex, set: Vec<u32>) -> Option<Arc<Context>> {
        let mut parts = self.parts.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(made) = parts.made.get(&set) {
            return made.clone();
        }
        let len = index.copy_len(&set);
        if parts.bytes.saturating_add(len) > PART_BYTES {
            return None;
        }
        parts.bytes += len;
        let info = self.sections.part(gimli::SectionId::DebugInfo);
        let big = self.sections.endian == gimli::RunTimeEndian::Big;
        let made = index.restricted(&info, &set, big).and_then(|copy| {
            let len = copy.len();
            let dwarf = self
                .sections
                .dwarf(Some(Bytes::Anon(Arc::new(copy), 0..len)))?;
            let ctx = addr2line::Context::from_dwarf(dwarf).ok()?;
            Some(Arc::new(Mutex::new(ctx)))
        });
        parts.made.insert(set, made.clone());
        made
    }

    /// The raw (mangled) function names perf's addr2line records give for
    /// `vaddr` in the function of ELF symbol `symbol` (raw), innermost
    /// first (`??` where a record has no function); empty when perf keeps
    /// no inline list (no line for the address).
    /// Nothing once a file it reads shrank.
    pub fn chain(&self, vaddr: u64, symbol: &str) -> Vec<String> {
        match self.lookup(vaddr, symbol) {
            Lookup::Names(names) => names,
            Lookup::Ordered(records) => self.named.names(records, symbol),
        }
    }

    /// [`Self::chain`]'s records for `vaddr` in ELF symbol `symbol` (raw):
    /// their names when they do not depend on what was asked before, else
    /// the records for a [`Named`] state to name in order.
    pub fn lookup(&self, vaddr: u64, symbol: &str) -> Lookup {
        let records = self.read_chain(vaddr);
        if self.shrank() {
            return Lookup::Names(Vec::new());
        }
        if names::ordered(&records) {
            return Lookup::Ordered(records);
        }
        Lookup::Names(names::Named::default().names(records, symbol))
    }

    /// [`Self::chain`]'s lookup.
    fn read_chain(&self, vaddr: u64) -> Vec<names::Record> {
        if let Some(index) = &self.index {
            let set = index.units_at(vaddr);
            if set.is_empty() {
                return Vec::new();
            }
            if let Some(ctx) = self.part(index, set) {
                let ctx = ctx.lock().unwrap_or_else(|e| e.into_inner());
                // A name in a unit left out is an error there: asked again
                // of the whole file.
                if let (chain, true) = frames(&ctx, vaddr, &self.split) {
                    return chain;
                }
            }
        }
        match self.whole() {
            Some(ctx) => {
                let ctx = ctx.lock().unwrap_or_else(|e| e.into_inner());
                frames(&ctx, vaddr, &self.split).0
            }
            None => Vec::new(),
        }
    }
}

/// The unit index of the file whose sections are `sections`: from the
/// persistent `cache` under the key of `file`'s content, else built and
/// written there.
fn unit_index(
    sections: &Sections,
    cache: &Cache,
    file: &Hashed,
    map: &Mapping,
) -> Option<units::UnitIndex> {
    let key = file.content.key();
    let hit = cache.get(Kind::Units, &key);
    if let Some(index) = hit.and_then(|h| units::UnitIndex::decode(h.bytes())) {
        return Some(index);
    }
    let index = units::UnitIndex::build(&sections.dwarf(None)?)?;
    // Never kept from a file that shrank (its zeros are not its units),
    // nor from one that changed after it was hashed.
    if !map.shrank() && cache.unchanged([file]) {
        cache.put(Kind::Units, &key, &index.encode());
    }
    Some(index)
}

/// [`Debug::chain`]'s records in one context, innermost first, and
/// whether it met no error (the records read before an error are kept,
/// as perf keeps them); [`names`] names them. The split units the lookup
/// needs come from `split`.
fn frames(
    ctx: &addr2line::Context<Reader>,
    vaddr: u64,
    split: &split::Split,
) -> (Vec<names::Record>, bool) {
    let mut out = Vec::new();
    let Ok(mut frames) = split.resolve(ctx.find_frames(vaddr)) else {
        return (out, false);
    };
    loop {
        let f = match frames.next() {
            Ok(Some(f)) => f,
            Ok(None) => return (out, true),
            Err(_) => return (out, false),
        };
        // perf stops at (and, for the first, rejects) a record whose
        // line is unknown or zero.
        if f.location.as_ref().and_then(|l| l.line).unwrap_or(0) == 0 {
            return (out, true);
        }
        let name = f.function.as_ref().and_then(|n| n.raw_name().ok());
        let lang = f.function.as_ref().and_then(|n| n.language);
        out.push(names::Record {
            linkage: name.as_deref().is_some_and(|n| is_linkage_name(n, lang)),
            name: name.map(Cow::into_owned),
            die: f.dw_die_offset.map(|o| o.0),
        });
    }
}

/// Whether binutils takes `name` (a DWARF function's name in a unit of
/// language `lang`) as the function's linkage name: a mangled name (from
/// `DW_AT_linkage_name`), or any name in a language without mangling
/// (binutils' `mangle_style` 0: C, Fortran 77, Pascal, ...). Any other (a
/// C++ template instance's `__introsort_loop<..., long int, ...>`, a
/// lambda's `operator()`) is named as binutils names it then ([`names`]).
fn is_linkage_name(name: &str, lang: Option<gimli::DwLang>) -> bool {
    use gimli::constants::*;
    if name.starts_with("_Z") || name.starts_with("_R") {
        return true;
    }
    const UNMANGLED: [gimli::DwLang; 11] = [
        DW_LANG_C89,
        DW_LANG_C,
        DW_LANG_C99,
        DW_LANG_C11,
        DW_LANG_Cobol74,
        DW_LANG_Cobol85,
        DW_LANG_Fortran77,
        DW_LANG_Pascal83,
        DW_LANG_PLI,
        DW_LANG_UPC,
        DW_LANG_Mips_Assembler,
    ];
    lang.is_some_and(|l| UNMANGLED.contains(&l))
}

/// The lines of the frame in ELF symbol `base` (demangled) at `offset`
/// into it, of DSO `dso`, as perf prints them with `--inline` given the
/// records `chain`: each record whose demangled name is `base` as the
/// plain frame line, every other as an inlined line. Empty when `chain`
/// is.
pub fn frame_lines(chain: &[String], base: &str, offset: u64, dso: &str) -> Vec<Line> {
    chain
        .iter()
        .map(|name| {
            let name = demangle(name);
            let module = if name == base { dso } else { INLINED };
            Line::new(format!("{name}+{offset:#x}"), module)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inlined_lines_and_the_symbol_itself() {
        // The lines printed as a sample's frame.
        fn write_frame(
            out: &mut Vec<u8>,
            address: u64,
            chain: &[String],
            base: &str,
            offset: u64,
            dso: &str,
        ) -> bool {
            let lines = frame_lines(chain, base, offset, dso);
            let some = !lines.is_empty();
            let f = crate::symbolize::sample::Frame {
                address,
                lines: lines.into(),
                function: None,
            };
            f.write_text(out);
            some
        }
        let mut l = Vec::new();
        let chain = ["mix".to_string(), "compute_stage".to_string()];
        assert!(write_frame(
            &mut l,
            0x1434,
            &chain,
            "compute_stage",
            0x34,
            "/w"
        ));
        assert_eq!(
            String::from_utf8(l).unwrap(),
            "\t            1434 mix+0x34 (inlined)\n\
             \t            1434 compute_stage+0x34 (/w)\n"
        );
        // The outermost record named otherwise than the ELF symbol (an
        // alias, a `.constprop` clone): no plain line at all, as in perf.
        let mut l = Vec::new();
        let chain = ["__GI___snprintf".to_string()];
        assert!(write_frame(
            &mut l,
            0x58ca1,
            &chain,
            "__snprintf",
            0x91,
            "/libc"
        ));
        assert_eq!(
            String::from_utf8(l).unwrap(),
            "\t           58ca1 __GI___snprintf+0x91 (inlined)\n"
        );
        assert!(!write_frame(&mut Vec::new(), 1, &[], "f", 0, "/x"));
    }

    #[inline(never)]
    fn a_function_with_a_line() -> usize {
        std::hint::black_box(7)
    }

    /// The ELF address of code address `at` of this executable: its file
    /// offset from /proc/self/maps, through the PT_LOAD segments.
    fn elf_address(exe: &Path, at: u64) -> u64 {
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        for l in maps.lines().filter(|l| l.ends_with(exe.to_str().unwrap())) {
            let f: Vec<&str> = l.split_whitespace().collect();
            let (lo, hi) = f[0].split_once('-').unwrap();
            let lo = u64::from_str_radix(lo, 16).unwrap();
            let hi = u64::from_str_radix(hi, 16).unwrap();
            if (lo..hi).contains(&at) {
                let off = at - lo + u64::from_str_radix(f[2], 16).unwrap();
                let search = crate::symbolize::sources::Search {
                    host: Some("/".into()),
                    ..Default::default()
                };
                let r = crate::symbolize::sources::resolve(exe.to_str().unwrap(), &[], &search);
                let syms = super::super::elf::load(&r);
                return syms.to_vaddr(off);
            }
        }
        panic!("{at:#x} is in no map of {}", exe.display());
    }

    /// About `n` addresses spread over the executable sections of `file`.
    fn text_addresses(file: &Path, n: u64) -> Vec<u64> {
        use object::ObjectSection;
        let map = crate::symbolize::sources::map_file(Path::new("/"), file).unwrap();
        let elf = ElfFile64::<Endianness>::parse(&map[..]).unwrap();
        let mut out = Vec::new();
        for s in elf.sections() {
            // By name: a debug file's `.text` is `SHT_NOBITS`.
            if !s.name().is_ok_and(|n| n.starts_with(".text")) || s.size() == 0 {
                continue;
            }
            let step = (s.size() / n).max(1) | 1;
            out.extend((s.address()..s.address() + s.size()).step_by(step as usize));
        }
        out
    }

    #[test]
    fn lookups_unit_by_unit_name_as_the_whole_file_does() {
        // This test binary (Rust: code inlined from other crates names its
        // abstract origin in another unit, which a context over one unit
        // cannot see) and this host's libc debug file when installed.
        let mut files = vec![(std::env::current_exe().unwrap(), 150)];
        let libc =
            Path::new("/usr/lib/debug/.build-id/93/ac61ec5a8eb1396f9fbd350e3169a558528a40.debug");
        if libc.is_file() {
            files.push((libc.to_path_buf(), 1000));
        }
        for (file, n) in files {
            let dir = super::super::cache::test_dir();
            let cache = Cache::new(dir.path().join("cache"));
            let root = Path::new("/");
            let whole = Debug::load(root, &file, None, None).unwrap().unwrap();
            assert!(whole.index.is_none());
            let hashed = Hashed::read(root, &file, None).unwrap();
            let cold = Debug::load(root, &file, None, Some((&cache, &hashed)))
                .unwrap()
                .unwrap();
            let warm = Debug::load(root, &file, None, Some((&cache, &hashed)))
                .unwrap()
                .unwrap();
            assert!(cold.index.is_some(), "{}: no unit index", file.display());
            assert_eq!(warm.index, cold.index);
            let (mut named, mut parts) = (0, 0);
            for at in text_addresses(&file, n) {
                let want = whole.chain(at, "sym");
                assert_eq!(cold.chain(at, "sym"), want, "{} at {at:#x}", file.display());
                assert_eq!(warm.chain(at, "sym"), want, "{} at {at:#x}", file.display());
                named += usize::from(!want.is_empty());
            }
            parts += cold.parts.lock().unwrap().made.len();
            assert!(
                named > 100 && parts > 1,
                "{}: {named} named, {parts} parts",
                file.display()
            );
        }
    }

    #[test]
    fn compressed_dwarf_from_the_disk_cache_names_as_the_file_does() {
        // A copy of this test binary with compressed DWARF: inflated on
        // the first load (and written to the cache), read from the cache
        // on the next; both name each address as the uncompressed file.
        let exe = std::env::current_exe().unwrap();
        let dir = super::super::cache::test_dir();
        let packed = dir.path().join("packed");
        let ok = std::process::Command::new("objcopy")
            .arg("--compress-debug-sections=zlib")
            .arg(&exe)
            .arg(&packed)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            eprintln!("objcopy (binutils) is missing: skipped");
            return;
        }
        let cache = Cache::new(dir.path().join("cache"));
        let plain = Debug::load(Path::new("/"), &exe, None, None)
            .unwrap()
            .unwrap();
        let hashed = Hashed::read(Path::new("/"), &packed, None).unwrap();
        let first = Debug::load(Path::new("/"), &packed, None, Some((&cache, &hashed)))
            .unwrap()
            .unwrap();
        assert!(
            // The inflated sections and the unit index.
            cache.describe().contains("0 hit(s), 2 miss(es), 2 written"),
            "{}",
            cache.describe()
        );
        let again = Debug::load(Path::new("/"), &packed, None, Some((&cache, &hashed)))
            .unwrap()
            .unwrap();
        assert!(
            cache.describe().contains("2 hit(s), 2 miss(es), 2 written"),
            "{}",
            cache.describe()
        );
        let at = elf_address(&exe, a_function_with_a_line as *const () as usize as u64);
        assert_eq!(a_function_with_a_line(), 7);
        let want = plain.chain(at, "sym");
        assert!(!want.is_empty());
        assert_eq!(first.chain(at, "sym"), want);
        assert_eq!(again.chain(at, "sym"), want);
    }

    #[test]
    fn names_a_function_of_this_test_binary() {
        // Test builds carry DWARF (line tables at least, with function
        // names); the real lookups are checked against perf in
        // tests/native.rs.
        let exe = std::env::current_exe().unwrap();
        assert!(matches!(
            Debug::load(Path::new("/"), Path::new("/nonexistent"), None, None),
            Ok(None)
        ));
        let d = Debug::load(Path::new("/"), &exe, None, None)
            .unwrap()
            .expect("DWARF in the test binary");
        assert_eq!(a_function_with_a_line(), 7);
        let at = a_function_with_a_line as *const () as usize as u64;
        let chain = d.chain(elf_address(&exe, at), "sym");
        assert!(
            chain.iter().any(|n| n.contains("a_function_with_a_line")),
            "{chain:?}"
        );
    }
}
