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
//! inline list: the frame prints as without `--inline`. perf 6.1 does this
//! only for call chains it unwinds from stack copies (`--call-graph
//! dwarf`); frame-pointer chains print no inline frames even with
//! `--inline` (the change that added them to other chains was reverted
//! upstream for its cost), and the native symbolizer follows it.
//!
//! A file's DWARF is loaded once per DSO by the run's [`super::store`]
//! (shared by every shard, slice and capture); callers cache the finished
//! lines per address.

use super::elf::map_file;
use std::borrow::Cow;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use object::read::elf::ElfFile64;
use object::{Endianness, Object, ObjectSection};

use super::symbols;

type Reader = gimli::EndianArcSlice<gimli::RunTimeEndian>;

/// The DWARF of one file, ready for address lookups. addr2line's context
/// fills its tables lazily and is not `Sync`: lookups take the lock (they
/// happen once per distinct address; lines are cached by the caller).
pub struct Debug {
    ctx: Mutex<addr2line::Context<Reader>>,
}

impl std::fmt::Debug for Debug {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("inline::Debug")
    }
}

/// The DWARF sections of `file`, copied out (decompressed) so that the
/// context owns them.
fn sections(file: &ElfFile64<'_, Endianness>) -> Option<gimli::Dwarf<Reader>> {
    let endian = if file.is_little_endian() {
        gimli::RunTimeEndian::Little
    } else {
        gimli::RunTimeEndian::Big
    };
    file.section_by_name(".debug_info")?;
    // Variable locations, macros and type units name no frame: left
    // unread (and undecompressed; location lists are a fifth of a libc
    // debug file).
    let unread = |id| {
        use gimli::SectionId::{DebugLoc, DebugLocLists, DebugMacinfo, DebugMacro, DebugTypes};
        matches!(
            id,
            DebugLoc | DebugLocLists | DebugMacinfo | DebugMacro | DebugTypes
        )
    };
    let load = |id: gimli::SectionId| -> Result<Reader, gimli::Error> {
        let data: Cow<'_, [u8]> = file
            .section_by_name(id.name())
            .filter(|_| !unread(id))
            .and_then(|s| s.uncompressed_data().ok())
            .unwrap_or(Cow::Borrowed(&[]));
        Ok(gimli::EndianArcSlice::new(Arc::from(&*data), endian))
    };
    gimli::Dwarf::load(load).ok()
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
    /// when it has no `.debug_info` or cannot be read.
    pub fn load(root: &Path, file: &Path) -> Option<Debug> {
        let map = map_file(root, file)?;
        let elf = ElfFile64::<Endianness>::parse(&*map).ok()?;
        let mut dwarf = sections(&elf)?;
        if let Some(sup) = supplementary(root, file, &elf) {
            let sup_map = map_file(root, &sup)?;
            let sup_elf = ElfFile64::<Endianness>::parse(&*sup_map).ok()?;
            if let Some(s) = sections(&sup_elf) {
                dwarf.sup = Some(Arc::new(s));
            }
        }
        let ctx = addr2line::Context::from_dwarf(dwarf).ok()?;
        Some(Debug {
            ctx: Mutex::new(ctx),
        })
    }

    /// The raw (mangled) function names perf's addr2line records give for
    /// `vaddr` in the function of ELF symbol `symbol` (raw), innermost
    /// first (`??` where a record has no function); empty when perf keeps
    /// no inline list (no line for the address).
    pub fn chain(&self, vaddr: u64, symbol: &str) -> Vec<String> {
        let ctx = self.ctx.lock().unwrap_or_else(|e| e.into_inner());
        let mut out = Vec::new();
        let Ok(mut frames) = ctx.find_frames(vaddr).skip_all_loads() else {
            return out;
        };
        while let Ok(Some(f)) = frames.next() {
            // perf stops at (and, for the first, rejects) a record whose
            // line is unknown or zero.
            if f.location.as_ref().and_then(|l| l.line).unwrap_or(0) == 0 {
                break;
            }
            let name = f
                .function
                .as_ref()
                .and_then(|n| n.raw_name().ok())
                .map_or_else(|| "??".to_string(), |n| n.into_owned());
            let lang = f.function.as_ref().and_then(|n| n.language);
            if out.is_empty() && !is_linkage_name(&name, lang) {
                out.push(symbol.to_string());
            } else {
                out.push(name);
            }
        }
        out
    }
}

/// Whether binutils takes `name` (a DWARF function's name in a unit of
/// language `lang`) as the function's linkage name: a mangled name (from
/// `DW_AT_linkage_name`), or any name in a language without mangling
/// (binutils' `mangle_style` 0: C, Fortran 77, Pascal, ...). For the
/// innermost record only, binutils' `addr2line` names any other (a C++
/// lambda's `operator()`) by the ELF symbol holding the address instead,
/// which perf then prints as the plain frame line.
fn is_linkage_name(name: &str, lang: Option<gimli::DwLang>) -> bool {
    use gimli::constants::*;
    if name.starts_with("_Z") || name.starts_with("_R") || name == "??" {
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

/// Writes the frame at `addr` (printed address) in ELF symbol `base`
/// (demangled) at `offset` into it, of DSO `dso`, as perf prints it with
/// `--inline` given the records `chain`: each record whose demangled name
/// is `base` as the plain frame line, every other as an inlined line.
/// `false` (and nothing written) when `chain` is empty.
pub fn write_frame(
    line: &mut Vec<u8>,
    addr: u64,
    chain: &[String],
    base: &str,
    offset: u64,
    dso: &str,
) -> bool {
    for name in chain {
        let name = symbols::demangle(name);
        let _ = write!(line, "\t{addr:16x} {name}+{offset:#x} ");
        if name == base {
            let _ = writeln!(line, "({dso})");
        } else {
            line.extend_from_slice(b"(inlined)\n");
        }
    }
    !chain.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inlined_lines_and_the_symbol_itself() {
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

    #[test]
    fn names_a_function_of_this_test_binary() {
        // Test builds carry DWARF (line tables at least, with function
        // names); the real lookups are checked against perf in
        // tests/native.rs.
        let exe = std::env::current_exe().unwrap();
        assert!(Debug::load(Path::new("/"), Path::new("/nonexistent")).is_none());
        let d = Debug::load(Path::new("/"), &exe).expect("DWARF in the test binary");
        assert_eq!(a_function_with_a_line(), 7);
        let at = a_function_with_a_line as *const () as usize as u64;
        let chain = d.chain(elf_address(&exe, at), "sym");
        assert!(
            chain.iter().any(|n| n.contains("a_function_with_a_line")),
            "{chain:?}"
        );
    }
}
