//! Symbol tables as `perf` builds them: function symbols of an ELF file's
//! `.symtab` (else `.dynsym`), or the text and data symbols of a kallsyms
//! file; aliases at one address resolved by perf's own preference order
//! (sized over unsized, typed over untyped, strong over weak, global over
//! local, fewer leading underscores, longer name); zero-sized symbols
//! (every kallsyms symbol) ending where the next one starts. A lookup is a
//! binary search. Knows nothing about processes or files on disk.

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
    /// Offset of the name in [`SymbolTable::names`].
    name_at: u64,
    name_len: u32,
    /// Index into [`SymbolTable::modules`], or [`NO_MODULE`].
    module: u32,
}

const NO_MODULE: u32 = u32::MAX;

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
    /// ([`SymbolTable::bfd_name`]), not perf's.
    aliases: Vec<Alias>,
}

/// One symbol of an address several start at.
#[derive(Debug, Clone, Copy)]
struct Alias {
    start: u64,
    /// BFD's size: the symbol's, 1 for an unsized one.
    size: u64,
    /// `STT_NOTYPE`.
    untyped: bool,
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

/// perf's `choose_best_symbol` (and the x86 `SyS` alias rule): `Less` when
/// `a` is the one to keep.
fn better(a: &RawSymbol, b: &RawSymbol) -> Ordering {
    use Ordering::{Greater, Less};
    match (a.size, b.size) {
        (x, 0) if x > 0 => return Less,
        (0, y) if y > 0 => return Greater,
        _ => {}
    }
    if a.untyped != b.untyped {
        return if a.untyped { Greater } else { Less };
    }
    let weak = |s: &RawSymbol| s.binding == Binding::Weak;
    if weak(a) != weak(b) {
        return if weak(b) { Less } else { Greater };
    }
    let global = |s: &RawSymbol| s.binding == Binding::Global;
    if global(a) != global(b) {
        return if global(a) { Less } else { Greater };
    }
    // perf keeps names demangled, and compares those.
    let (da, db) = (demangle(&a.name), demangle(&b.name));
    match underscores(&da).cmp(&underscores(&db)) {
        Ordering::Less => return Less,
        Ordering::Greater => return Greater,
        Ordering::Equal => {}
    }
    if a.name.starts_with("SyS") || a.name.starts_with("compat_SyS") {
        return Greater;
    }
    // The longer name; on a tie the one seen first (perf's
    // `symbols__fixup_duplicate` keeps the earlier symbol-table entry:
    // `__libc_start_main@@GLIBC_2.34` over `__libc_start_main@GLIBC_2.2.5`).
    if da.len() > db.len() {
        Less
    } else {
        Greater
    }
}

impl SymbolTable {
    /// Builds a table from `syms`. `kallsyms` makes every symbol end where
    /// the next one starts, as perf does for kernel symbol lists.
    pub fn build(mut syms: Vec<RawSymbol>, kallsyms: bool) -> SymbolTable {
        // Stable: symbols at one address stay in table order.
        syms.sort_by_key(|s| s.start);
        let mut aliases = Vec::new();
        if !kallsyms {
            for group in syms.chunk_by(|a, b| a.start == b.start) {
                if group.len() > 1 && !bfd_agrees(group) {
                    aliases.extend(group.iter().cloned());
                }
            }
        }
        // Keep the best of each run of equal starts. For a kernel table
        // that is the last one listed (`__x64_sys_getppid` over the
        // `__ia32_sys_getppid` above it): perf 6.1 ends every kallsyms
        // symbol where the next one starts *before* it drops duplicates,
        // so all but the last of a run are empty, and `choose_best_symbol`
        // keeps the one that is not.
        let mut kept: Vec<RawSymbol> = Vec::with_capacity(syms.len());
        for s in syms {
            match kept.last_mut() {
                Some(last) if last.start == s.start => {
                    if kallsyms || better(&s, last) == Ordering::Less {
                        *last = s;
                    }
                }
                _ => kept.push(s),
            }
        }
        // Each allocated once at its size: grown by doubling, a large
        // library's names (32 MiB for polars) took twice their size, and
        // the old buffer beside the new while it moved.
        let mut t = SymbolTable {
            syms: Vec::with_capacity(kept.len()),
            names: String::with_capacity(kept.iter().chain(&aliases).map(|s| s.name.len()).sum()),
            ..SymbolTable::default()
        };
        let mut modules = Modules::default();
        for (i, s) in kept.iter().enumerate() {
            let next = kept.get(i + 1).map(|n| n.start);
            let end = if s.size > 0 && !kallsyms {
                s.start + s.size
            } else {
                match next {
                    Some(n) => n,
                    None => last_end(s.start),
                }
            };
            let module = s.module.as_deref().map_or(NO_MODULE, |m| modules.id(m));
            let mut sym = t.sym(s.start, &s.name, module);
            sym.end = end.max(s.start + 1);
            t.syms.push(sym);
        }
        t.modules = modules.names;
        t.aliases = aliases
            .iter()
            .map(|a| {
                let sym = t.sym(a.start, &a.name, NO_MODULE);
                Alias {
                    start: a.start,
                    size: a.size.max(1),
                    untyped: a.untyped,
                    name_at: sym.name_at,
                    name_len: sym.name_len,
                }
            })
            .collect();
        t
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
        let at = s.name_at as usize;
        (addr < s.end).then(|| Hit {
            name: &self.names[at..at + s.name_len as usize],
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
        let from = self.aliases.partition_point(|a| a.start < start);
        let group = self.aliases[from..].iter().take_while(|a| a.start == start);
        let mut best: Option<&Alias> = None;
        for a in group {
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

/// Whether binutils names every address of `group` (symbols starting at
/// one address, in table order) as perf does: all of one size and type,
/// perf's pick listed first. Only the other groups are kept.
fn bfd_agrees(group: &[RawSymbol]) -> bool {
    let first = &group[0];
    let uniform = group
        .iter()
        .all(|s| s.size.max(1) == first.size.max(1) && s.untyped == first.untyped);
    let perf_pick = group.iter().reduce(|best, s| {
        if better(s, best) == Ordering::Less {
            s
        } else {
            best
        }
    });
    uniform && perf_pick.is_some_and(|p| std::ptr::eq(p, first))
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
            out.push(u8::from(a.untyped));
        }
    }

    /// A table [`SymbolTable::encode`] wrote, read from `c`; `None` when
    /// the bytes are not one (every name in the arena and on a character
    /// boundary, every module known, starts in order).
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
        let mut syms = Vec::with_capacity(n);
        let mut last = 0;
        for r in raw.chunks_exact(ENCODED_SYM) {
            let mut f = super::cache::Cursor::new(r);
            let s = Sym {
                start: f.u64()?,
                end: f.u64()?,
                name_at: f.u64()?,
                name_len: f.u32()?,
                module: f.u32()?,
            };
            let ok = s.start >= last
                && s.end > s.start
                && arena_name(&names, s.name_at, s.name_len).is_some()
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
            untyped: f.bytes(1)?[0] != 0,
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
mod tests {
    use super::*;

    fn sym(start: u64, size: u64, binding: Binding, name: &str) -> RawSymbol {
        RawSymbol {
            start,
            size,
            binding,
            untyped: false,
            name: name.into(),
            module: None,
        }
    }

    #[test]
    fn the_name_arena_is_allocated_once_at_its_size() {
        // _polars_runtime.abi3.so: 125,431 functions, 32 MiB of names. An
        // arena grown by doubling reached 64 MiB and held the old 32 MiB
        // beside it while it moved.
        let syms: Vec<RawSymbol> = (0..5000u64)
            .map(|i| {
                sym(
                    i * 16,
                    16,
                    Binding::Global,
                    &format!("f{i}_{}", "x".repeat(200)),
                )
            })
            .collect();
        let want: usize = syms.iter().map(|s| s.name.len()).sum();
        let t = SymbolTable::build(syms, false);
        assert_eq!(t.names.len(), want);
        assert_eq!(
            t.names.capacity(),
            want,
            "one allocation of the names' size"
        );
        assert_eq!(t.syms.capacity(), t.syms.len());
    }

    #[test]
    fn aliases_resolved_as_perf_does() {
        let t = SymbolTable::build(
            vec![
                sym(0x100, 0x10, Binding::Weak, "write"),
                sym(0x100, 0x10, Binding::Global, "__libc_write"),
                sym(0x100, 0x10, Binding::Local, "__GI___libc_write"),
                sym(0x200, 0, Binding::Global, "unsized"),
                sym(0x200, 8, Binding::Local, "_sized"),
                sym(0x300, 4, Binding::Global, "tail"),
                sym(0x400, 4, Binding::Global, "start@@V_2.34"),
                sym(0x400, 4, Binding::Global, "start@V_2.2.5"),
                // Equal mangled lengths; the longer demangled name wins.
                sym(
                    0x500,
                    4,
                    Binding::Global,
                    "_RNvXsd_NtNtNtCs1_4core3fmt3num3impyNtB9_7Display3fmt",
                ),
                sym(
                    0x500,
                    4,
                    Binding::Global,
                    "_RNvXsi_NtNtNtCs1_4core3fmt3num3impjNtB9_7Display3fmt",
                ),
            ],
            false,
        );
        assert_eq!(t.find(0x104).unwrap().name, "__libc_write");
        assert_eq!(t.find(0x104).unwrap().offset, 4);
        assert!(t.find(0x110).is_none(), "past the end of a sized symbol");
        assert_eq!(t.find(0x207).unwrap().name, "_sized");
        assert!(t.find(0x208).is_none());
        assert!(t.find(0x50).is_none());
        assert_eq!(t.find(0x303).unwrap().name, "tail");
        assert_eq!(t.find(0x401).unwrap().name, "start@@V_2.34");
        assert_eq!(
            demangle(t.find(0x501).unwrap().name),
            "<usize as core::fmt::Display>::fmt"
        );
    }

    #[test]
    fn binutils_names_an_address_of_folded_code_by_its_first_symbol() {
        let mut label = sym(0x300, 0, Binding::Global, "a_label");
        label.untyped = true;
        let t = SymbolTable::build(
            vec![
                // pyarrow's libarrow.so.2600: four local aliases, one size.
                sym(0x100, 0x80, Binding::Local, "b_float_layout"),
                sym(0x100, 0x80, Binding::Local, "c_uint32_layout_longest"),
                sym(0x100, 0x80, Binding::Local, "d_list_layout"),
                sym(0x200, 0x10, Binding::Global, "alone"),
                label,
                sym(0x300, 0x10, Binding::Local, "the_function"),
                sym(0x400, 0x4, Binding::Local, "s"),
                sym(0x400, 0x10, Binding::Local, "a_long_one"),
                sym(0x500, 0x8, Binding::Local, "the_longest_first"),
                sym(0x500, 0x8, Binding::Local, "short"),
            ],
            false,
        );
        // A group binutils names as perf does is not kept.
        assert!(t.aliases.iter().all(|a| a.start != 0x500));
        assert_eq!(t.bfd_name(0x504), None);
        // perf keeps the longest name; binutils the first listed.
        assert_eq!(t.find(0x140).unwrap().name, "c_uint32_layout_longest");
        assert_eq!(t.bfd_name(0x140), Some("b_float_layout"));
        // One symbol at its address, or binutils agrees: nothing to say.
        assert_eq!(t.bfd_name(0x208), None);
        assert_eq!(t.bfd_name(0x50), None);
        // A function over a label.
        assert_eq!(t.find(0x304).unwrap().name, "the_function");
        assert_eq!(t.bfd_name(0x304), None);
        // One that reaches the address over one that does not; else the
        // smaller.
        assert_eq!(t.find(0x40c).unwrap().name, "a_long_one");
        assert_eq!(t.bfd_name(0x40c), None);
        assert_eq!(t.bfd_name(0x402), Some("s"));
        // The persistent cache keeps them.
        let mut bytes = Vec::new();
        t.encode(&mut bytes);
        let back = SymbolTable::decode(&mut crate::symbolize::native::cache::Cursor::new(&bytes))
            .expect("decodes");
        assert_eq!(back.bfd_name(0x140), Some("b_float_layout"));
        assert_eq!(back.bfd_name(0x402), Some("s"));
        // A damaged alias name is refused.
        let at = bytes.len() - 5;
        bytes[at - 4..at].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(
            SymbolTable::decode(&mut crate::symbolize::native::cache::Cursor::new(&bytes))
                .is_none()
        );
    }

    #[test]
    fn kallsyms_types_modules_and_ends() {
        let t = parse_kallsyms(
            "ffffffff81000000 T _text\nffffffff81000100 t do_one\n\
             ffffffff81000100 T __do_one\nffffffff81000200 r ro_data\n\
             ffffffffc0000000 t nvme_irq\t[nvme]\n0000000000000000 A fixed_percpu_data\n",
        );
        assert_eq!(t.find(0xffffffff81000180).unwrap().name, "__do_one");
        assert_eq!(t.find(0xffffffff81000010).unwrap().name, "_text");
        // `r` is not kept: do_one's range runs on to the next kept symbol.
        assert_eq!(t.find(0xffffffff81000250).unwrap().name, "__do_one");
        let m = t.find(0xffffffffc0000004).unwrap();
        assert_eq!((m.name, m.module), ("nvme_irq", Some("[nvme]")));
        assert!(parse_kallsyms("0000000000000000 T _text\n").is_empty());
    }

    #[test]
    fn kallsyms_streams_skips_bad_lines_and_stores_each_module_once() {
        let mut text = b"ffffffff81000000 T _text\n\xff\xfe not utf-8\n".to_vec();
        text.extend_from_slice(b"garbage\nffffffffc0000000 t a\t[nvme]\n");
        text.extend_from_slice(b"ffffffffc0000100 t b\t[nvme]\nffffffffc0000200 T last");
        let t = read_kallsyms(std::io::BufReader::with_capacity(7, &text[..])).unwrap();
        assert_eq!(t.len(), 4);
        assert_eq!(t.modules.len(), 1, "one copy of [nvme]");
        assert_eq!(t.find(0xffffffffc0000104).unwrap().module, Some("[nvme]"));
        assert_eq!(t.find(0xffffffffc0000204).unwrap().name, "last");
        assert_eq!(t.find(0xffffffff81000004).unwrap().module, None);
        // The same answers as the table built from one symbol per line.
        let text = "ffffffff81000010 T b\nffffffff81000000 T a\nffffffff81000010 t c\n\
                    ffffffff81000020 W w\nffffffff81000030 d data\n";
        let raw: Vec<RawSymbol> = text
            .lines()
            .map(|l| {
                let f: Vec<&str> = l.split(' ').collect();
                RawSymbol {
                    start: u64::from_str_radix(f[0], 16).unwrap(),
                    size: 0,
                    binding: Binding::Global,
                    untyped: false,
                    name: f[2].into(),
                    module: None,
                }
            })
            .collect();
        let (streamed, built) = (parse_kallsyms(text), SymbolTable::build(raw, true));
        for addr in 0xffffffff80fffff0..0xffffffff81003000u64 {
            let (a, b) = (streamed.find(addr), built.find(addr));
            assert_eq!(a.map(|h| (h.name, h.offset)), b.map(|h| (h.name, h.offset)));
        }
    }

    #[test]
    fn kallsyms_aliases_name_the_last_one_listed() {
        // As perf 6.1 prints them: `__x64_sys_getppid`, though the other
        // name is longer; a local symbol listed last beats a global one.
        let t = parse_kallsyms(
            "ffffffff81377d40 T __ia32_sys_getppid\nffffffff81377d40 T __x64_sys_getppid\n\
             ffffffff81377d80 T glob\nffffffff81377d80 t loc\nffffffff81377dc0 T next\n",
        );
        assert_eq!(
            t.find(0xffffffff81377d44).unwrap().name,
            "__x64_sys_getppid"
        );
        assert_eq!(t.find(0xffffffff81377d84).unwrap().name, "loc");
    }
}
