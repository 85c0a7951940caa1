//! Symbol tables as `perf` builds them: function symbols of an ELF file's
//! `.symtab` (else `.dynsym`), or the text and data symbols of a kallsyms
//! file; aliases at one address resolved by perf's own preference order
//! (sized over unsized, typed over untyped, strong over weak, global over
//! local, fewer leading underscores, longer name); zero-sized symbols
//! (every kallsyms symbol) ending where the next one starts. A lookup is a
//! binary search. Knows nothing about processes or files on disk.
//!
//! Building a table costs one sort of compact entries (names stay in one
//! arena, none on the heap of its own) and no demangling: where perf's
//! choice among symbols at one address comes down to their demangled names
//! (C++ constructors' C1/C2 pairs, folded code), the group is kept and
//! decided on the first lookup that lands in it. Velox's `libvelox.so` has
//! 26,000 such groups among 214,000 symbols; demangling them all took 8 s.

use std::cmp::Ordering;

use super::demangle::demangle;

/// ELF symbol binding, as perf compares them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Binding {
    /// `STB_LOCAL` (kallsyms lower case).
    Local,
    /// `STB_GLOBAL` (kallsyms upper case).
    Global,
    /// `STB_WEAK` (kallsyms `W`/`w`).
    Weak,
}

/// One symbol while a table is built.
#[derive(Debug, Clone)]
pub struct RawSymbol {
    /// First address.
    pub start: u64,
    /// Size in bytes (0 = unknown: ends at the next symbol).
    pub size: u64,
    /// Binding.
    pub binding: Binding,
    /// `STT_NOTYPE` labels lose to typed symbols at the same address.
    pub untyped: bool,
    /// Raw (mangled) name.
    pub name: String,
    /// Kernel module (`[nvme]`), for kallsyms symbols of modules.
    pub module: Option<String>,
}

/// One symbol of a built table: 32 bytes, its name in the table's arena.
#[derive(Debug, Clone, Copy)]
struct Sym {
    start: u64,
    end: u64,
    /// Offset of the name in [`SymbolTable::names`]; for a symbol whose
    /// name is not decided yet ([`LAZY`]), the index of its group in
    /// [`SymbolTable::groups`].
    name_at: u64,
    /// The name's length, or [`LAZY`].
    name_len: u32,
    /// Index into [`SymbolTable::modules`], or [`NO_MODULE`].
    module: u32,
}

const NO_MODULE: u32 = u32::MAX;
/// [`Sym::name_len`] of a symbol whose name perf picks among the
/// [`Alias`]es at its start by their demangled names, on the first lookup.
const LAZY: u32 = u32::MAX;
/// [`Sym::name_len`] of a PLT entry, whose name (its target's, demangled,
/// then `@plt`) is made on its first lookup: [`Sym::name_at`] indexes
/// [`SymbolTable::plts`]. A C++ library has tens of thousands (65,000 in
/// `libvelox.so`), and samples land in a handful.
const LAZY_PLT: u32 = u32::MAX - 1;

/// Symbols as read from a file, before [`SymbolTable::build_from`]: compact
/// entries, every name in one arena (no allocation per symbol).
#[derive(Debug, Default)]
pub struct RawSymbols {
    syms: Vec<RawSym>,
    names: String,
}

/// One symbol of [`RawSymbols`].
#[derive(Debug, Clone, Copy)]
struct RawSym {
    start: u64,
    size: u64,
    name_at: u64,
    name_len: u32,
    binding: Binding,
    untyped: bool,
    /// A PLT entry: the name is its target's raw name ([`LAZY_PLT`]).
    plt: bool,
}

impl RawSymbols {
    /// Room for `syms` symbols whose names take `names` bytes.
    pub fn with_capacity(syms: usize, names: usize) -> RawSymbols {
        RawSymbols {
            syms: Vec::with_capacity(syms),
            names: String::with_capacity(names),
        }
    }

    /// Adds a symbol.
    pub fn push(&mut self, start: u64, size: u64, binding: Binding, untyped: bool, name: &str) {
        self.push_as(start, size, binding, untyped, name, false);
    }

    /// Adds a PLT entry of x86-64's or AArch64's lazy-binding `.plt` for
    /// the target named `target` (raw): named `target` demangled, then
    /// `@plt`, as perf 6.1 names them, on its first lookup.
    pub fn push_plt(&mut self, start: u64, size: u64, target: &str) {
        self.push_as(start, size, Binding::Global, false, target, true);
    }

    fn push_as(
        &mut self,
        start: u64,
        size: u64,
        binding: Binding,
        untyped: bool,
        name: &str,
        plt: bool,
    ) {
        let name_len = u32::try_from(name.len()).unwrap_or(LAZY_PLT - 1);
        let name_at = self.names.len() as u64;
        self.names.push_str(&name[..name_len as usize]);
        self.syms.push(RawSym {
            start,
            size,
            name_at,
            name_len,
            binding,
            untyped,
            plt,
        });
    }

    /// Number of symbols.
    pub fn len(&self) -> usize {
        self.syms.len()
    }

    /// True when there is none.
    pub fn is_empty(&self) -> bool {
        self.syms.is_empty()
    }
}

/// A sorted, de-duplicated symbol table. Names live in one arena (no
/// allocation per symbol): a 10 M-line kallsyms costs its names plus 32
/// bytes a symbol.
#[derive(Debug, Default)]
pub struct SymbolTable {
    syms: Vec<Sym>,
    names: String,
    modules: Vec<Box<str>>,
    /// A kernel table's `_text`: where the core kernel starts in the boot
    /// the table describes.
    text: Option<u64>,
    /// Every symbol of each address two or more start at (identical code
    /// folded by the linker: `CTypeImpl<FloatType>::layout` and three
    /// others at one address), by start, each group in symbol-table
    /// order: binutils names such an address by its own rule
    /// ([`SymbolTable::bfd_name`]), not perf's; and perf's pick among the
    /// [`Alias::candidate`]s of a [`LAZY`] symbol.
    aliases: Vec<Alias>,
    /// Per [`LAZY`] symbol, perf's pick among its aliases once a lookup
    /// decided it: (name offset, length).
    groups: Vec<std::sync::OnceLock<(u64, u32)>>,
    /// Per [`LAZY_PLT`] symbol: its target's raw name in the arena, and
    /// its own name once a lookup made it.
    plts: Vec<Plt>,
}

/// A PLT entry's name ([`LAZY_PLT`]).
#[derive(Debug)]
struct Plt {
    target_at: u64,
    target_len: u32,
    name: std::sync::OnceLock<Box<str>>,
}

/// One symbol of an address several start at.
#[derive(Debug, Clone, Copy)]
struct Alias {
    start: u64,
    /// BFD's size: the symbol's, 1 for an unsized one.
    size: u64,
    /// `STT_NOTYPE`.
    untyped: bool,
    /// Among the ones perf's choice comes down to by name (its ranking by
    /// size, type, binding put none of the group above it).
    candidate: bool,
    name_at: u64,
    name_len: u32,
}

/// A symbol found for an address.
#[derive(Debug, Clone, Copy)]
pub struct Hit<'a> {
    /// The (raw) name.
    pub name: &'a str,
    /// Offset of the address from the symbol's start.
    pub offset: u64,
    /// Kernel module, when the symbol belongs to one.
    pub module: Option<&'a str>,
}

fn underscores(s: &str) -> usize {
    s.bytes().take_while(|&b| b == b'_').count()
}

/// The part of perf's `choose_best_symbol` that needs no name, higher
/// first: sized over unsized, typed over untyped, strong over weak, global
/// over local.
fn rank(size: u64, untyped: bool, binding: Binding) -> (bool, bool, bool, bool) {
    (
        size > 0,
        !untyped,
        binding != Binding::Weak,
        binding == Binding::Global,
    )
}

/// What the rest of perf's choice reads of a name: its demangled form's
/// leading underscores and length, and whether it is an x86 `SyS` alias.
struct NameKey {
    underscores: usize,
    len: usize,
    sys: bool,
}

impl NameKey {
    fn of(name: &str) -> NameKey {
        // perf keeps names demangled, and compares those.
        let d = demangle(name);
        NameKey {
            underscores: underscores(&d),
            len: d.len(),
            sys: name.starts_with("SyS") || name.starts_with("compat_SyS"),
        }
    }
}

/// The index of perf's pick among `names`, symbols at one address of one
/// [`rank`], in symbol-table order: fewer leading underscores, not a `SyS`
/// alias, the longer name; on a tie the one seen first (perf's
/// `symbols__fixup_duplicate` keeps the earlier symbol-table entry:
/// `__libc_start_main@@GLIBC_2.34` over `__libc_start_main@GLIBC_2.2.5`).
/// Each name is demangled once.
fn pick_by_name<'a>(names: impl Iterator<Item = &'a str>) -> usize {
    let keys: Vec<NameKey> = names.map(NameKey::of).collect();
    let mut kept = 0;
    for (i, a) in keys.iter().enumerate().skip(1) {
        let b = &keys[kept];
        let wins = match a.underscores.cmp(&b.underscores) {
            Ordering::Less => true,
            Ordering::Greater => false,
            Ordering::Equal => !a.sys && a.len > b.len,
        };
        if wins {
            kept = i;
        }
    }
    kept
}

impl SymbolTable {
    /// Builds a table from `syms`. `kallsyms` makes every symbol end where
    /// the next one starts, as perf does for kernel symbol lists.
    pub fn build(syms: Vec<RawSymbol>, kallsyms: bool) -> SymbolTable {
        if kallsyms {
            let mut t = SymbolTable::default();
            let mut modules = Modules::default();
            for s in &syms {
                let module = s.module.as_deref().map_or(NO_MODULE, |m| modules.id(m));
                let sym = t.sym(s.start, &s.name, module);
                t.syms.push(sym);
            }
            t.modules = modules.names;
            finish_kernel_table(&mut t);
            return t;
        }
        let names = syms.iter().map(|s| s.name.len()).sum();
        let mut raw = RawSymbols::with_capacity(syms.len(), names);
        for s in &syms {
            raw.push(s.start, s.size, s.binding, s.untyped, &s.name);
        }
        SymbolTable::build_from(raw)
    }

    /// Builds an ELF table from `raw`, whose arena becomes the table's: one
    /// stable sort by address, then per address the symbol perf keeps
    /// (perf's `choose_best_symbol` and the x86 `SyS` alias rule); where
    /// that comes down to demangled names, it is decided on the first
    /// lookup ([`LAZY`]) unless the candidates' sizes differ (then the end
    /// depends on it: decided now). Every symbol of an address two or more
    /// start at is kept as an [`Alias`] (binutils names those by its own
    /// rule, [`SymbolTable::bfd_name`]).
    pub fn build_from(raw: RawSymbols) -> SymbolTable {
        let RawSymbols { mut syms, names } = raw;
        // Stable: symbols at one address stay in table order.
        syms.sort_by_key(|s| s.start);
        let distinct = 1 + syms.windows(2).filter(|w| w[0].start != w[1].start).count();
        let mut t = SymbolTable {
            syms: Vec::with_capacity(distinct.min(syms.len())),
            names,
            ..SymbolTable::default()
        };
        let mut at = 0;
        while at < syms.len() {
            let start = syms[at].start;
            let n = syms[at..].iter().take_while(|s| s.start == start).count();
            let group = &syms[at..at + n];
            at += n;
            let next = syms.get(at).map(|s| s.start);
            let (name_at, name_len, size) = if n == 1 && group[0].plt {
                let g = &group[0];
                t.plts.push(Plt {
                    target_at: g.name_at,
                    target_len: g.name_len,
                    name: std::sync::OnceLock::new(),
                });
                ((t.plts.len() - 1) as u64, LAZY_PLT, g.size)
            } else if n == 1 {
                (group[0].name_at, group[0].name_len, group[0].size)
            } else {
                // A PLT entry at another symbol's address (none in the
                // libraries seen) is named now, to be compared.
                let named: Vec<RawSym> = group.iter().map(|s| t.named_plt(s)).collect();
                t.choose(&named)
            };
            let end = if size > 0 {
                start.saturating_add(size)
            } else {
                next.unwrap_or_else(|| last_end(start))
            };
            t.syms.push(Sym {
                start,
                end: end.max(start + 1),
                name_at,
                name_len,
                module: NO_MODULE,
            });
        }
        t
    }

    /// Perf's pick among `group` (symbols at one address, in table order):
    /// (name offset, name length, size), or a [`LAZY`] name; every member
    /// kept as an [`Alias`].
    fn choose(&mut self, group: &[RawSym]) -> (u64, u32, u64) {
        let best = group
            .iter()
            .map(|s| rank(s.size, s.untyped, s.binding))
            .max()
            .unwrap_or_default();
        let is_candidate = |s: &RawSym| rank(s.size, s.untyped, s.binding) == best;
        self.aliases.extend(group.iter().map(|s| Alias {
            start: s.start,
            size: s.size.max(1),
            untyped: s.untyped,
            candidate: is_candidate(s),
            name_at: s.name_at,
            name_len: s.name_len,
        }));
        let candidates: Vec<&RawSym> = group.iter().filter(|s| is_candidate(s)).collect();
        let first = candidates[0];
        if candidates.len() == 1 {
            return (first.name_at, first.name_len, first.size);
        }
        if candidates.iter().all(|c| c.size == first.size) {
            self.groups.push(std::sync::OnceLock::new());
            return ((self.groups.len() - 1) as u64, LAZY, first.size);
        }
        let names = &self.names;
        let name = |c: &&RawSym| {
            let at = c.name_at as usize;
            &names[at..at + c.name_len as usize]
        };
        let w = candidates[pick_by_name(candidates.iter().map(name))];
        (w.name_at, w.name_len, w.size)
    }

    /// `s` with its name in the arena: a PLT entry's made now.
    fn named_plt(&mut self, s: &RawSym) -> RawSym {
        if !s.plt {
            return *s;
        }
        let target = arena_name(&self.names, s.name_at, s.name_len).unwrap_or("");
        let name = plt_name(target);
        let name_at = self.names.len() as u64;
        self.names.push_str(&name);
        RawSym {
            name_at,
            name_len: u32::try_from(name.len()).unwrap_or(LAZY_PLT - 1),
            plt: false,
            ..*s
        }
    }

    /// The name of `s`: a [`LAZY`] or [`LAZY_PLT`] one made now (once).
    fn name_str(&self, s: &Sym) -> &str {
        if s.name_len == LAZY_PLT {
            let Some(p) = self.plts.get(s.name_at as usize) else {
                return "";
            };
            return p.name.get_or_init(|| {
                let target = arena_name(&self.names, p.target_at, p.target_len).unwrap_or("");
                plt_name(target).into_boxed_str()
            });
        }
        let (at, len) = self.name_of(s);
        arena_name(&self.names, at, len).unwrap_or("")
    }

    /// The (offset, length) of `s`'s name in the arena, a [`LAZY`] one
    /// decided now (once).
    fn name_of(&self, s: &Sym) -> (u64, u32) {
        if s.name_len != LAZY {
            return (s.name_at, s.name_len);
        }
        let Some(cell) = self.groups.get(s.name_at as usize) else {
            return (0, 0);
        };
        *cell.get_or_init(|| {
            let candidates: Vec<&Alias> = self
                .group_at(s.start)
                .iter()
                .filter(|a| a.candidate)
                .collect();
            let names = candidates
                .iter()
                .map(|a| arena_name(&self.names, a.name_at, a.name_len).unwrap_or(""));
            match candidates.get(pick_by_name(names)) {
                Some(a) => (a.name_at, a.name_len),
                None => (0, 0),
            }
        })
    }

    /// The aliases starting at `start`.
    fn group_at(&self, start: u64) -> &[Alias] {
        let from = self.aliases.partition_point(|a| a.start < start);
        let n = self.aliases[from..]
            .iter()
            .take_while(|a| a.start == start)
            .count();
        &self.aliases[from..from + n]
    }

    /// A symbol at `start` named `name` (copied into the arena), no end yet.
    fn sym(&mut self, start: u64, name: &str, module: u32) -> Sym {
        let name_at = self.names.len() as u64;
        let name_len = u32::try_from(name.len()).unwrap_or(u32::MAX);
        self.names.push_str(&name[..name_len as usize]);
        Sym {
            start,
            end: 0,
            name_at,
            name_len,
            module,
        }
    }

    /// Number of symbols.
    pub fn len(&self) -> usize {
        self.syms.len()
    }

    /// True when there is no symbol.
    pub fn is_empty(&self) -> bool {
        self.syms.is_empty()
    }

    /// A kernel table's `_text` address, when it lists one.
    pub fn text(&self) -> Option<u64> {
        self.text
    }

    /// The symbol containing `addr`.
    pub fn find(&self, addr: u64) -> Option<Hit<'_>> {
        let i = self
            .syms
            .partition_point(|s| s.start <= addr)
            .checked_sub(1)?;
        let s = self.syms[i];
        if addr >= s.end {
            return None;
        }
        Some(Hit {
            name: self.name_str(&s),
            offset: addr - s.start,
            module: self.modules.get(s.module as usize).map(|m| &**m),
        })
    }
}

impl SymbolTable {
    /// The name binutils gives `addr` from this symbol table where it
    /// differs from [`SymbolTable::find`]'s, or `None`: `addr2line -f`
    /// (which `perf script --inline` asks for every address of a DWARF
    /// call chain, and whose answer it prints, as an inlined frame when it
    /// is not perf's own symbol, even without a line) takes, among the
    /// symbols starting at one address, the first in symbol-table order
    /// (BFD's `better_fit`: one that reaches `addr` over one that does
    /// not, a function over a label, then the smaller, then the earlier),
    /// where perf keeps the longest name.
    pub fn bfd_name(&self, addr: u64) -> Option<&str> {
        let hit = self.find(addr)?;
        let start = addr - hit.offset;
        let mut best: Option<&Alias> = None;
        for a in self.group_at(start) {
            best = match best {
                Some(b) if !bfd_better_fit(b, a, addr) => Some(b),
                _ => Some(a),
            };
        }
        let b = best?;
        let at = b.name_at as usize;
        let name = &self.names[at..at + b.name_len as usize];
        (name != hit.name).then_some(name)
    }
}

/// BFD's `better_fit` for two symbols starting at one address: whether
/// `new` beats the current `best` for `addr`.
fn bfd_better_fit(best: &Alias, new: &Alias, addr: u64) -> bool {
    if best.start + best.size < addr {
        return new.size > best.size;
    }
    if new.start + new.size < addr {
        return false;
    }
    if best.untyped != new.untyped {
        return best.untyped;
    }
    new.size < best.size
}

/// [`SymbolTable::encode`]'s bytes per symbol.
const ENCODED_SYM: usize = 32;
/// [`SymbolTable::encode`]'s bytes per alias.
const ENCODED_ALIAS: usize = 29;
/// [`SymbolTable::encode`]'s bytes per PLT entry.
const ENCODED_PLT: usize = 12;

impl SymbolTable {
    /// Appends this table to `out` for the persistent cache
    /// ([`super::cache`]).
    pub fn encode(&self, out: &mut Vec<u8>) {
        use super::cache::{put_u32, put_u64};
        put_u64(out, self.syms.len() as u64);
        out.reserve(self.syms.len() * ENCODED_SYM + self.names.len());
        for s in &self.syms {
            put_u64(out, s.start);
            put_u64(out, s.end);
            put_u64(out, s.name_at);
            put_u32(out, s.name_len);
            put_u32(out, s.module);
        }
        put_u64(out, self.names.len() as u64);
        out.extend_from_slice(self.names.as_bytes());
        put_u32(out, self.modules.len() as u32);
        for m in &self.modules {
            put_u32(out, m.len() as u32);
            out.extend_from_slice(m.as_bytes());
        }
        put_u64(out, self.text.map_or(u64::MAX, |t| t));
        put_u64(out, self.aliases.len() as u64);
        for a in &self.aliases {
            put_u64(out, a.start);
            put_u64(out, a.size);
            put_u64(out, a.name_at);
            put_u32(out, a.name_len);
            out.push(u8::from(a.untyped) | (u8::from(a.candidate) << 1));
        }
        put_u64(out, self.plts.len() as u64);
        for p in &self.plts {
            put_u64(out, p.target_at);
            put_u32(out, p.target_len);
        }
    }

    /// A table [`SymbolTable::encode`] wrote, read from `c`; `None` when
    /// the bytes are not one (every name in the arena and on a character
    /// boundary, every module known, starts in order, every [`LAZY`] name
    /// a group of its own with candidates among the aliases). Its
    /// [`LAZY`] names are decided again on their first lookup.
    pub fn decode(c: &mut super::cache::Cursor<'_>) -> Option<SymbolTable> {
        let n = c.usize()?;
        let raw = c.bytes(n.checked_mul(ENCODED_SYM)?)?;
        let names_len = c.usize()?;
        let names = std::str::from_utf8(c.bytes(names_len)?).ok()?.to_string();
        let mut modules = Vec::new();
        for _ in 0..c.u32()? {
            let len = c.u32()? as usize;
            modules.push(std::str::from_utf8(c.bytes(len)?).ok()?.into());
        }
        let text = Some(c.u64()?).filter(|&t| t != u64::MAX);
        let n_aliases = c.usize()?;
        let raw_aliases = c.bytes(n_aliases.checked_mul(ENCODED_ALIAS)?)?;
        let aliases = decode_aliases(raw_aliases, &names)?;
        let n_plts = c.usize()?;
        let raw_plts = c.bytes(n_plts.checked_mul(ENCODED_PLT)?)?;
        let mut plts = Vec::with_capacity(n_plts);
        for r in raw_plts.chunks_exact(ENCODED_PLT) {
            let mut f = super::cache::Cursor::new(r);
            let (target_at, target_len) = (f.u64()?, f.u32()?);
            arena_name(&names, target_at, target_len)?;
            plts.push(Plt {
                target_at,
                target_len,
                name: std::sync::OnceLock::new(),
            });
        }
        let mut syms = Vec::with_capacity(n);
        let mut last = 0;
        let mut groups = 0u64;
        for r in raw.chunks_exact(ENCODED_SYM) {
            let mut f = super::cache::Cursor::new(r);
            let s = Sym {
                start: f.u64()?,
                end: f.u64()?,
                name_at: f.u64()?,
                name_len: f.u32()?,
                module: f.u32()?,
            };
            let named = if s.name_len == LAZY_PLT {
                (s.name_at as usize) < plts.len()
            } else if s.name_len == LAZY {
                groups += 1;
                s.name_at == groups - 1 && {
                    let from = aliases.partition_point(|a| a.start < s.start);
                    aliases[from..]
                        .iter()
                        .take_while(|a| a.start == s.start)
                        .any(|a| a.candidate)
                }
            } else {
                arena_name(&names, s.name_at, s.name_len).is_some()
            };
            let ok = s.start >= last
                && s.end > s.start
                && named
                && (s.module == NO_MODULE || (s.module as usize) < modules.len());
            if !ok {
                return None;
            }
            last = s.start;
            syms.push(s);
        }
        Some(SymbolTable {
            syms,
            names,
            modules,
            text,
            aliases,
            groups: (0..groups).map(|_| std::sync::OnceLock::new()).collect(),
            plts,
        })
    }
}

/// The aliases [`SymbolTable::encode`] wrote: `None` unless every name is
/// in `names` and the starts are in order.
fn decode_aliases(raw: &[u8], names: &str) -> Option<Vec<Alias>> {
    let mut out = Vec::with_capacity(raw.len() / ENCODED_ALIAS);
    let mut last = 0;
    for r in raw.chunks_exact(ENCODED_ALIAS) {
        let mut f = super::cache::Cursor::new(r);
        let a = Alias {
            start: f.u64()?,
            size: f.u64()?,
            name_at: f.u64()?,
            name_len: f.u32()?,
            untyped: false,
            candidate: false,
        };
        let flags = f.bytes(1)?[0];
        if flags > 3 {
            return None;
        }
        let a = Alias {
            untyped: flags & 1 != 0,
            candidate: flags & 2 != 0,
            ..a
        };
        let ok =
            a.start >= last && a.size > 0 && arena_name(names, a.name_at, a.name_len).is_some();
        if !ok {
            return None;
        }
        last = a.start;
        out.push(a);
    }
    Some(out)
}

/// The name at `at` of `len` bytes in the arena `names`, or `None` when
/// that is not in it (or not on character boundaries): a decoded table's
/// check.
fn arena_name(names: &str, at: u64, len: u32) -> Option<&str> {
    let at = usize::try_from(at).ok()?;
    names.get(at..at.checked_add(len as usize)?)
}

/// The longest PLT entry name perf 6.1 makes: it prints them into a
/// 1024-byte buffer (`sympltname`), so a longer one loses its end,
/// `@plt` included (folly's templates in Velox's `libvelox.so`).
const PLT_NAME_MAX: usize = 1023;

/// A PLT entry's name, as perf 6.1 makes it: the target's (raw) name
/// demangled, then `@plt`, cut to [`PLT_NAME_MAX`] bytes.
fn plt_name(target: &str) -> String {
    let mut name = format!("{}@plt", demangle(target));
    if name.len() > PLT_NAME_MAX {
        let cut = (0..=PLT_NAME_MAX)
            .rev()
            .find(|&i| name.is_char_boundary(i))
            .unwrap_or(0);
        name.truncate(cut);
    }
    name
}

/// perf: the last symbol of a kernel table ends a page past its start.
fn last_end(start: u64) -> u64 {
    (start & !4095).saturating_add(8192)
}

/// Module names, each stored once.
#[derive(Default)]
struct Modules {
    names: Vec<Box<str>>,
    ids: std::collections::HashMap<Box<str>, u32>,
}

impl Modules {
    fn id(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.ids.get(name) {
            return id;
        }
        let id = u32::try_from(self.names.len()).unwrap_or(NO_MODULE);
        self.names.push(name.into());
        self.ids.insert(name.into(), id);
        id
    }
}

/// Parses a kallsyms text (`ADDR TYPE NAME [MODULE]` per line); see
/// [`read_kallsyms`].
pub fn parse_kallsyms(text: &str) -> SymbolTable {
    read_kallsyms(text.as_bytes()).unwrap_or_default()
}

/// Reads a kallsyms file (`ADDR TYPE NAME [MODULE]` per line) as a stream,
/// keeping the symbol types perf keeps (`T`, `W`, `D`, `B`, either case).
/// No allocation per line: each line is read into one reused buffer, names
/// go to the table's arena, modules are stored once. A line that is not
/// UTF-8 or not `ADDR TYPE NAME` is skipped. An all-zero table
/// (`kptr_restrict` hid the addresses) gives an empty table.
pub fn read_kallsyms(mut input: impl std::io::BufRead) -> std::io::Result<SymbolTable> {
    let mut t = SymbolTable::default();
    let mut modules = Modules::default();
    let mut line = Vec::with_capacity(256);
    loop {
        line.clear();
        if input.read_until(b'\n', &mut line)? == 0 {
            break;
        }
        let Ok(text) = std::str::from_utf8(&line) else {
            continue;
        };
        let mut it = text.split_ascii_whitespace();
        let (Some(addr), Some(ty), Some(name)) = (it.next(), it.next(), it.next()) else {
            continue;
        };
        let Ok(start) = u64::from_str_radix(addr, 16) else {
            continue;
        };
        let kept = matches!(
            ty.as_bytes().first(),
            Some(b'T' | b'W' | b'D' | b'B' | b't' | b'w' | b'd' | b'b')
        );
        if start == 0 || !kept {
            continue;
        }
        let module = it
            .next()
            .filter(|m| m.starts_with('[') && m.ends_with(']'))
            .map_or(NO_MODULE, |m| modules.id(m));
        if name == "_text" && module == NO_MODULE {
            t.text = Some(start);
        }
        let sym = t.sym(start, name, module);
        t.syms.push(sym);
    }
    t.modules = modules.names;
    finish_kernel_table(&mut t);
    Ok(t)
}

/// Sorts a kernel table in place (names were added in file order, so the
/// name offset keeps equal starts in file order without a stable sort's
/// buffer), keeps the last symbol listed at each address (see
/// [`SymbolTable::build`]) and ends each where the next one starts.
fn finish_kernel_table(t: &mut SymbolTable) {
    let syms = &mut t.syms;
    syms.sort_unstable_by_key(|s| (s.start, s.name_at));
    let mut kept = 0;
    for i in 0..syms.len() {
        if kept > 0 && syms[kept - 1].start == syms[i].start {
            syms[kept - 1] = syms[i];
        } else {
            syms[kept] = syms[i];
            kept += 1;
        }
    }
    syms.truncate(kept);
    for i in 0..syms.len() {
        let end = syms.get(i + 1).map_or(last_end(syms[i].start), |n| n.start);
        syms[i].end = end.max(syms[i].start + 1);
    }
    syms.shrink_to_fit();
    t.names.shrink_to_fit();
}

#[cfg(test)]
mod tests;
