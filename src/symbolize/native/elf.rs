//! Finding and reading the ELF file that names a mapped DSO's addresses,
//! as `perf` does under `--symfs`: the separate debug file by build id
//! (`usr/lib/debug/.build-id/NN/REST.debug`), the distro debug path
//! (`usr/lib/debug/<path>.debug`, `usr/lib/debug/<path>`), then the file
//! itself; the first one with a `.symtab` wins, else the file's `.dynsym`.
//! Function symbols (and untyped labels) in executable sections only.
//! Addresses in a mapping are file offsets; the file's `PT_LOAD` segments
//! turn them into the addresses symbols use.

use std::fs::File;
use std::path::{Path, PathBuf};

use object::elf;
use object::read::elf::{ElfFile64, FileHeader, ProgramHeader, SectionHeader, Sym};
use object::Endianness;

use super::symbols::{Binding, RawSymbol, SymbolTable};

/// What a DSO's addresses map to.
#[derive(Debug, Default)]
pub struct DsoSymbols {
    /// Function symbols, in the ELF's address space.
    pub table: SymbolTable,
    /// `PT_LOAD` segments: (file offset, file size, vaddr).
    segments: Vec<(u64, u64, u64)>,
    /// The file symbols were read from (for messages), if any.
    pub source: Option<PathBuf>,
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

/// The files to try for `path` (as the capture saw it) with `build_id`,
/// under `root` (the symfs, or `/`), in perf's order.
pub fn candidates(root: &Path, path: &str, build_id: Option<&[u8]>) -> Vec<PathBuf> {
    let rel = path.trim_start_matches('/');
    let mut v = Vec::new();
    v.push(root.join("usr/lib/debug").join(format!("{rel}.debug")));
    v.push(root.join("usr/lib/debug").join(rel));
    if let Some(id) = build_id.filter(|b| b.len() > 1 && b.iter().any(|&x| x != 0)) {
        let hex = crate::sys::digest::hex(id);
        v.push(
            root.join("usr/lib/debug/.build-id")
                .join(&hex[..2])
                .join(format!("{}.debug", &hex[2..])),
        );
    }
    v.push(root.join(rel));
    v
}

/// Loads the symbols of the DSO mapped from `path`; a DSO no file names
/// gives an empty table (its frames print as `[unknown]`, as perf's do).
pub fn load(root: &Path, path: &str, build_id: Option<&[u8]>) -> DsoSymbols {
    // A recorded path is joined under the symfs root: one that climbs out
    // of it (`/../../etc/x`) names nothing.
    if Path::new(path)
        .components()
        .any(|c| c == std::path::Component::ParentDir)
    {
        return DsoSymbols::default();
    }
    let files: Vec<PathBuf> = candidates(root, path, build_id);
    let runtime = root.join(path.trim_start_matches('/'));
    let mut segments = Vec::new();
    let mut dynsym: Option<(Vec<RawSymbol>, PathBuf)> = None;
    let mut chosen: Option<(Vec<RawSymbol>, PathBuf)> = None;
    let mut plt = Vec::new();
    for f in &files {
        let Some(map) = map_file(root, f) else {
            continue;
        };
        let Ok(file) = ElfFile64::<Endianness>::parse(&*map) else {
            continue;
        };
        if *f == runtime || segments.is_empty() {
            let segs = load_segments(&file);
            if !segs.is_empty() {
                segments = segs;
            }
        }
        if chosen.is_none() && !file.elf_symbol_table().is_empty() {
            chosen = Some((read_symbols(&file, false), f.clone()));
        }
        if *f == runtime {
            plt = plt_symbols(&file);
        }
        if *f == runtime && dynsym.is_none() {
            dynsym = Some((read_symbols(&file, true), f.clone()));
        }
        if chosen.is_some() && f == &runtime {
            break;
        }
    }
    // perf adds `name@plt` entries whenever it found any symbol.
    let (mut syms, source) = match chosen.or(dynsym) {
        Some((s, p)) => (s, Some(p)),
        None => (Vec::new(), None),
    };
    if !syms.is_empty() {
        syms.extend(plt);
    }
    DsoSymbols {
        table: SymbolTable::build(syms, false),
        segments,
        source,
    }
}

pub(super) fn map_file(root: &Path, p: &Path) -> Option<memmap2::Mmap> {
    let f = open_symbol_file(root, p).ok()?;
    // SAFETY: a symbol file under a capture's symfs/ (copies published with
    // the capture, written by nobody after), or with no symfs the live
    // system's binaries, which package managers replace by renaming a new
    // file over them, never by writing the old one in place. This map is
    // not registered with the SIGBUS guard: one truncated anyway kills the
    // process with SIGBUS.
    unsafe { memmap2::Mmap::map(&f) }.ok()
}

/// Opens the symbol file `p` found under `root`. Under a capture's
/// `symfs/` it is reached from there one name at a time, never through a
/// symbolic link (a link there could show a file the capture's owner may
/// not read: docs/reliability.md); under `/` (no snapshot: the paths the
/// recorded MMAPs name) links are followed, as perf does. A FIFO or device
/// is refused either way, without blocking.
pub(crate) fn open_symbol_file(root: &Path, p: &Path) -> crate::Result<File> {
    use crate::sys::input::{open_regular, Links};
    if root == Path::new("/") {
        return open_regular(p, Links::Follow);
    }
    let not_under = || {
        crate::Error::io(
            p,
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "is not under the symfs"),
        )
    };
    let rel = p.strip_prefix(root).map_err(|_| not_under())?;
    let name = rel.file_name().ok_or_else(not_under)?;
    let parent = rel.parent().unwrap_or(Path::new(""));
    crate::sys::confined::Dir::open(root)?
        .walk(parent, false)?
        .open_read(name)
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
/// sections, as perf's `dso__load_sym` keeps them.
fn read_symbols(file: &ElfFile64<'_, Endianness>, dynamic: bool) -> Vec<RawSymbol> {
    let e = file.endian();
    let table = if dynamic {
        file.elf_dynamic_symbol_table()
    } else {
        file.elf_symbol_table()
    };
    let sections = file.elf_section_table();
    let is_arm = file.elf_header().e_machine(e) == elf::EM_AARCH64;
    let exec = exec_ranges(file);
    let mut out = Vec::new();
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
        out.push(RawSymbol {
            start: s.st_value(e),
            size: s.st_size(e),
            binding: match s.st_bind() {
                elf::STB_GLOBAL => Binding::Global,
                elf::STB_WEAK => Binding::Weak,
                _ => Binding::Local,
            },
            untyped: !func,
            name: name.into_owned(),
            module: None,
        });
    }
    out
}

/// `name@plt` symbols for the lazy-binding `.plt` stubs of x86-64 and
/// AArch64, one per `.rela.plt` entry in order after the PLT header, as
/// perf 6.1 synthesizes them (the target's name demangled, then `@plt`;
/// an `IRELATIVE` entry has no name: `@plt`);
/// none unless `.rela.plt` refers to `.dynsym`.
fn plt_symbols(file: &ElfFile64<'_, Endianness>) -> Vec<RawSymbol> {
    let e = file.endian();
    let (header, entry) = match file.elf_header().e_machine(e) {
        elf::EM_X86_64 => (16, 16),
        elf::EM_AARCH64 => (32, 16),
        _ => return Vec::new(),
    };
    let sections = file.elf_section_table();
    let by_name = |name: &[u8]| {
        sections
            .iter()
            .find(|h| sections.section_name(e, h).is_ok_and(|n| n == name))
    };
    let (Some(plt), Some(rela)) = (by_name(b".plt"), by_name(b".rela.plt")) else {
        return Vec::new();
    };
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
        out.push(RawSymbol {
            start: plt.sh_addr(e) + header + (i as u64) * entry,
            size: entry,
            binding: Binding::Global,
            untyped: false,
            // perf demangles the target's name, then adds `@plt`.
            name: format!("{}@plt", super::symbols::demangle(&name)),
            module: None,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidate_order_follows_perf() {
        let c = candidates(
            Path::new("/s"),
            "/usr/lib/libc.so.6",
            Some(&[0xab, 0xcd, 0xef]),
        );
        let c: Vec<String> = c.iter().map(|p| p.display().to_string()).collect();
        assert_eq!(
            c,
            [
                "/s/usr/lib/debug/usr/lib/libc.so.6.debug",
                "/s/usr/lib/debug/usr/lib/libc.so.6",
                "/s/usr/lib/debug/.build-id/ab/cdef.debug",
                "/s/usr/lib/libc.so.6",
            ]
        );
    }

    #[test]
    fn paths_climbing_out_of_the_symfs_name_nothing() {
        let exe = std::env::current_exe().unwrap();
        let root = tempfile::tempdir().unwrap();
        // `<root>/../..(...)/<exe>` is the test binary itself once the
        // `..`s reach `/`: it exists, and must not be read.
        let ups = root.path().components().count() - 1;
        let climbing = format!("/{}{}", "../".repeat(ups), exe.display());
        assert!(root.path().join(climbing.trim_start_matches('/')).is_file());
        let d = load(root.path(), &climbing, None);
        assert!(d.table.is_empty() && d.source.is_none());
    }

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
    fn reads_this_test_binary() {
        let exe = std::env::current_exe().unwrap();
        let d = load(Path::new("/"), exe.to_str().unwrap(), None);
        assert!(d.table.len() > 100, "{} symbols", d.table.len());
        assert_eq!(d.source.as_deref(), Some(exe.as_path()));
    }
}
