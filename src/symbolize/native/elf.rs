//! Reading the ELF files that name a mapped DSO's addresses, once
//! [`crate::symbolize::sources`] has chosen them (by build id): the first
//! with a `.symtab` wins (its debug files first, as perf reads them), else
//! the binary's `.dynsym`. Function symbols are placed by their address
//! (perf keeps every function of an allocated section, wherever a rewritten
//! section index says it is), untyped labels in executable sections only.
//! Addresses in a mapping are file offsets; the binary's `PT_LOAD` segments
//! turn them into the addresses symbols use.

use std::borrow::Cow;
use std::path::PathBuf;

use object::elf;
use object::read::elf::{ElfFile64, FileHeader, ProgramHeader, SectionHeader, Sym};
use object::Endianness;

use super::symbols::{Binding, RawSymbols, SymbolTable};
use crate::symbolize::sources::{Resolved, Source};

/// What a DSO's addresses map to.
#[derive(Debug, Default)]
pub struct DsoSymbols {
    /// Function symbols, in the ELF's address space.
    pub table: SymbolTable,
    /// `PT_LOAD` segments: (file offset, file size, vaddr).
    segments: Vec<(u64, u64, u64)>,
    /// The file symbols were read from (with the root it is opened under
    /// and whose rights it is opened with), if any.
    pub source: Option<Source>,
    /// A file that shrank while it was read: what it gave was thrown away
    /// (the DSO is unnamed), and the log says so.
    pub shrank: Option<PathBuf>,
}

impl DsoSymbols {
    /// The ELF address of file offset `off` (unchanged when no segment
    /// holds it).
    pub fn to_vaddr(&self, off: u64) -> u64 {
        self.segments
            .iter()
            .find(|&&(o, sz, _)| off >= o && off < o + sz.max(1))
            .map_or(off, |&(o, _, v)| off - o + v)
    }
}

impl DsoSymbols {
    /// These symbols as bytes for the persistent cache ([`super::cache`]),
    /// loaded from the files of `resolved`.
    pub fn encode(&self, resolved: &Resolved) -> Vec<u8> {
        use super::cache::{put_u32, put_u64};
        let mut out = Vec::new();
        put_u32(&mut out, self.segments.len() as u32);
        for &(off, size, vaddr) in &self.segments {
            put_u64(&mut out, off);
            put_u64(&mut out, size);
            put_u64(&mut out, vaddr);
        }
        let source = resolved
            .files()
            .position(|f| Some(f) == self.source.as_ref());
        put_u32(&mut out, source.map_or(u32::MAX, |i| i as u32));
        self.table.encode(&mut out);
        out
    }

    /// Symbols [`DsoSymbols::encode`] wrote for the files of `resolved`;
    /// `None` when `bytes` are not such.
    pub fn decode(bytes: &[u8], resolved: &Resolved) -> Option<DsoSymbols> {
        let mut c = super::cache::Cursor::new(bytes);
        let mut segments = Vec::new();
        for _ in 0..c.u32()? {
            segments.push((c.u64()?, c.u64()?, c.u64()?));
        }
        let source = match c.u32()? {
            u32::MAX => None,
            i => Some(resolved.files().nth(i as usize)?),
        };
        let table = SymbolTable::decode(&mut c)?;
        c.is_done().then(|| DsoSymbols {
            table,
            segments,
            source: source.cloned(),
            shrank: None,
        })
    }
}

/// Loads the symbols of a DSO from the files [`sources::resolve`] took for
/// it: the first with a `.symtab` (debug files first, then the binary),
/// else the binary's `.dynsym`, plus its PLT entries; the binary's
/// `PT_LOAD` segments turn mapped file offsets into addresses. A DSO no
/// file names gives an empty table (its frames print as `[unknown]`, as
/// perf's do).
pub fn load(resolved: &Resolved) -> DsoSymbols {
    let mut shrank = None;
    let s = read(resolved, &mut shrank);
    match shrank {
        Some(p) => DsoSymbols {
            shrank: Some(p),
            ..DsoSymbols::default()
        },
        None => s,
    }
}

/// [`load`]'s reading; `shrank` is set to a file that shrank under it.
fn read(resolved: &Resolved, shrank: &mut Option<PathBuf>) -> DsoSymbols {
    let mut note = |map: &crate::sys::input::Mapping, s: &Source| {
        if map.shrank() {
            *shrank = Some(s.path.clone());
        }
    };
    let mut segments = Vec::new();
    let mut chosen: Option<(RawSymbols, &Source)> = None;
    let mut plt = Vec::new();
    let binary = resolved.binary.as_ref().and_then(|b| Some((b.map()?, b)));
    let binary_elf = binary
        .as_ref()
        .and_then(|(map, _)| ElfFile64::<Endianness>::parse(&map[..]).ok());
    if let Some(file) = &binary_elf {
        segments = load_segments(file);
        plt = plt_symbols(file);
    }
    if let Some((map, b)) = &binary {
        note(map, b);
    }
    for d in &resolved.debug {
        let Some(map) = d.map() else {
            continue;
        };
        let Ok(file) = ElfFile64::<Endianness>::parse(&map[..]) else {
            note(&map, d);
            continue;
        };
        if segments.is_empty() {
            segments = load_segments(&file);
        }
        if !file.elf_symbol_table().is_empty() {
            chosen = Some((read_symbols(&file, false, &plt), d));
            note(&map, d);
            break;
        }
        note(&map, d);
    }
    // Debug files first, then the binary's `.symtab`, else its `.dynsym`:
    // only the table taken is read.
    if chosen.is_none() {
        if let (Some((map, b)), Some(file)) = (&binary, &binary_elf) {
            let dynamic = file.elf_symbol_table().is_empty();
            chosen = Some((read_symbols(file, dynamic, &plt), *b));
            note(map, b);
        }
    }
    // perf adds `name@plt` entries whenever it found any symbol.
    let (mut syms, source) = match chosen {
        Some((s, p)) => (s, Some(p)),
        None => (RawSymbols::default(), None),
    };
    if !syms.is_empty() {
        for (start, size, target) in &plt {
            syms.push_plt(*start, *size, target);
        }
    }
    DsoSymbols {
        table: SymbolTable::build_from(syms),
        segments,
        source: source.cloned(),
        shrank: None,
    }
}

/// The `PT_LOAD` segments of `file`: (file offset, file size, address).
pub(super) fn load_segments(file: &ElfFile64<'_, Endianness>) -> Vec<(u64, u64, u64)> {
    let e = file.endian();
    file.elf_program_headers()
        .iter()
        .filter(|p| p.p_type(e) == elf::PT_LOAD)
        .map(|p| (p.p_offset(e), p.p_filesz(e), p.p_vaddr(e)))
        .collect()
}

/// The address ranges of the executable `PT_LOAD` segments of `file`, by
/// `p_vaddr` and `p_memsz` (right in a separate debug file too, whose
/// `p_offset` and `p_filesz` are not).
fn exec_ranges(file: &ElfFile64<'_, Endianness>) -> Vec<(u64, u64)> {
    let e = file.endian();
    file.elf_program_headers()
        .iter()
        .filter(|p| p.p_type(e) == elf::PT_LOAD && p.p_flags(e) & elf::PF_X != 0)
        .map(|p| {
            let size = p.p_memsz(e).max(p.p_filesz(e));
            (p.p_vaddr(e), p.p_vaddr(e).saturating_add(size))
        })
        .collect()
}

fn in_exec_segment(exec: &[(u64, u64)], addr: u64) -> bool {
    exec.iter().any(|&(lo, hi)| (lo..hi).contains(&addr))
}

/// Function symbols (placed by their address) and labels in executable
/// sections, as perf's `dso__load_sym` keeps them, with room for the
/// `extra` PLT entries: the names are gathered first (borrowed from the
/// mapped string table), then copied into one arena of their exact size.
fn read_symbols(
    file: &ElfFile64<'_, Endianness>,
    dynamic: bool,
    extra: &[(u64, u64, Cow<'_, str>)],
) -> RawSymbols {
    let e = file.endian();
    let table = if dynamic {
        file.elf_dynamic_symbol_table()
    } else {
        file.elf_symbol_table()
    };
    let sections = file.elf_section_table();
    let is_arm = file.elf_header().e_machine(e) == elf::EM_AARCH64;
    let exec = exec_ranges(file);
    let mut found = Vec::new();
    for s in table.symbols() {
        let ty = s.st_type();
        let shndx = s.st_shndx(e);
        if s.st_name(e) == 0 || shndx == elf::SHN_UNDEF {
            continue;
        }
        let func = ty == elf::STT_FUNC || ty == elf::STT_GNU_IFUNC;
        let label = ty == elf::STT_NOTYPE
            && shndx != elf::SHN_ABS
            && !matches!(s.st_visibility(), elf::STV_HIDDEN | elf::STV_INTERNAL);
        if !func && !label {
            continue;
        }
        // perf's rule (`dso__load_sym`): a function is kept when its
        // section is allocated, wherever that section says it is; a label
        // only in an executable section. Tools that rewrite a library's
        // layout (manylinux repairs) leave function symbols pointing at a
        // stale section (`.rodata`) while their addresses lie in the
        // executable segment: the address decides, checked against the
        // executable `PT_LOAD` segments (by address and memory size, which
        // a separate debug file keeps too).
        let Ok(section) = sections.section(object::SectionIndex(usize::from(shndx))) else {
            continue;
        };
        let flags = section.sh_flags(e);
        let exec_section = flags & u64::from(elf::SHF_EXECINSTR) != 0;
        let kept = if func {
            flags & u64::from(elf::SHF_ALLOC) != 0
                && (exec_section || in_exec_segment(&exec, s.st_value(e)))
        } else {
            exec_section
        };
        if !kept {
            continue;
        }
        let Ok(name) = table.symbol_name(e, s) else {
            continue;
        };
        let name = String::from_utf8_lossy(name);
        // ARM mapping symbols ($x, $d) are not functions.
        if is_arm && name.starts_with('$') {
            continue;
        }
        let binding = match s.st_bind() {
            elf::STB_GLOBAL => Binding::Global,
            elf::STB_WEAK => Binding::Weak,
            _ => Binding::Local,
        };
        found.push((s.st_value(e), s.st_size(e), binding, !func, name));
    }
    let names = found.iter().map(|k| k.4.len()).sum::<usize>()
        + extra.iter().map(|k| k.2.len()).sum::<usize>();
    let mut out = RawSymbols::with_capacity(found.len() + extra.len(), names);
    for (start, size, binding, untyped, name) in &found {
        out.push(*start, *size, *binding, *untyped, name);
    }
    out
}

/// `name@plt` symbols for the lazy-binding `.plt` stubs of x86-64 and
/// AArch64, one per `.rela.plt` entry in order after the PLT header, as
/// perf 6.1 synthesizes them (the target's name demangled, then `@plt`;
/// an `IRELATIVE` entry has no name: `@plt`);
/// none unless `.rela.plt` refers to `.dynsym`. On x86-64 perf 6.1 takes
/// both the header's and each entry's size from the `.plt` section's
/// `sh_entsize` (16 from GNU ld); where a linker wrote 0 its entries are
/// empty and name no address, so there are none here.
fn plt_symbols<'d>(file: &ElfFile64<'d, Endianness>) -> Vec<(u64, u64, Cow<'d, str>)> {
    let e = file.endian();
    let sections = file.elf_section_table();
    let by_name = |name: &[u8]| {
        sections
            .iter()
            .find(|h| sections.section_name(e, h).is_ok_and(|n| n == name))
    };
    let (Some(plt), Some(rela)) = (by_name(b".plt"), by_name(b".rela.plt")) else {
        return Vec::new();
    };
    let (header, entry) = match file.elf_header().e_machine(e) {
        elf::EM_X86_64 => (plt.sh_entsize(e), plt.sh_entsize(e)),
        elf::EM_AARCH64 => (32, 16),
        _ => return Vec::new(),
    };
    if entry == 0 {
        return Vec::new();
    }
    let Ok(Some((relocs, link))) = rela.rela(e, file.data()) else {
        return Vec::new();
    };
    // Only relocations against .dynsym (a static binary's IRELATIVE-only
    // .rela.plt gets no entries, as in perf).
    let dynsym_link = sections
        .iter()
        .position(|h| h.sh_type(e) == elf::SHT_DYNSYM)
        .map(object::SectionIndex);
    if dynsym_link != Some(link) {
        return Vec::new();
    }
    let Ok(dynsyms) = object::read::elf::SymbolTable::parse(
        e,
        file.data(),
        sections,
        link,
        sections.section(link).unwrap_or(rela),
    ) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (i, r) in relocs.iter().enumerate() {
        let idx = r.r_sym(e, false) as usize;
        let name = dynsyms
            .symbol(object::SymbolIndex(idx))
            .ok()
            .filter(|_| idx != 0)
            .and_then(|s| dynsyms.symbol_name(e, s).ok())
            .map(String::from_utf8_lossy)
            .unwrap_or_default();
        // perf demangles the target's name, then adds `@plt`: on the
        // entry's first lookup ([`RawSymbols::push_plt`]).
        out.push((plt.sh_addr(e) + header + (i as u64) * entry, entry, name));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn offsets_become_addresses_by_their_segment() {
        // A rewritten library's text: file offset 0x13940, address 0x14940.
        let d = DsoSymbols {
            segments: vec![(0, 0x13940, 0), (0x13940, 0x2000, 0x14940)],
            ..DsoSymbols::default()
        };
        assert_eq!(d.to_vaddr(0x13950), 0x14950);
        assert_eq!(d.to_vaddr(0x100), 0x100);
        assert!(in_exec_segment(&[(0x14940, 0x16940)], 0x14940));
        assert!(!in_exec_segment(&[(0x14940, 0x16940)], 0x16940));
    }

    #[test]
    fn a_symbol_file_truncated_while_it_is_read_names_nothing_and_is_noted() {
        use crate::symbolize::sources::{resolve, Search, Shrank};
        use crate::sys::input::tests::truncated_after_map;
        let dir = tempfile::tempdir().unwrap();
        let symfs = dir.path().join("symfs");
        let at = symfs.join("opt/app/server");
        std::fs::create_dir_all(at.parent().unwrap()).unwrap();
        // A small binary for the symbols and unwind tables, this test
        // binary for its DWARF.
        let small = Path::new("/usr/bin/ls");
        let exe = std::env::current_exe().unwrap();
        let put = |from: &Path| std::fs::copy(from, &at).unwrap();
        put(small);
        let search = Search {
            symfs: Some(symfs.clone()),
            ..Search::default()
        };
        let r = resolve("/opt/app/server", &[], &search);
        assert!(!load(&r).table.is_empty(), "intact, {small:?} is named");
        // The capture's owner truncates the file right after each map.
        let syms = truncated_after_map(&at, || load(&r));
        assert!(syms.table.is_empty(), "{} symbols", syms.table.len());
        assert_eq!(syms.shrank.as_deref(), Some(at.as_path()));
        put(small);
        let unwind = truncated_after_map(&at, || super::super::unwind::load(&r));
        assert!(matches!(&unwind, Err(Shrank(p)) if *p == at));
        put(&exe);
        let debug = truncated_after_map(&at, || {
            super::super::inline::Debug::load(&symfs, &at, None, None)
        });
        assert!(matches!(&debug, Err(Shrank(p)) if *p == at));
    }

    #[test]
    fn reads_this_test_binary() {
        let exe = std::env::current_exe().unwrap();
        let search = crate::symbolize::sources::Search {
            host: Some("/".into()),
            ..Default::default()
        };
        let d = load(&crate::symbolize::sources::resolve(
            exe.to_str().unwrap(),
            &[],
            &search,
        ));
        assert!(d.table.len() > 100, "{} symbols", d.table.len());
        assert_eq!(d.source.map(|s| s.path), Some(exe));
    }
}
