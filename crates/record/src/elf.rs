//! Just enough ELF reading for the preflight and the symbol snapshot: the
//! section names of a 64-bit little-endian ELF file (does it have `.symtab`
//! or `.debug_info`?), its GNU build id and its `.gnu_debuglink` name, and
//! its section table (where [`crate::dwarf`] reads split DWARF skeletons).
//! Reads only the headers, never the whole file. Anything else (32-bit, big-endian, not ELF) is reported
//! as unknown rather than guessed.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::Path;

use jobprof_capture_format::build_id::{gnu_build_id, ByteOrder};

/// What the section headers say about a binary.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ElfInfo {
    /// Has a `.symtab` section (function symbols).
    pub symtab: bool,
    /// Has a `.debug_info` section (DWARF).
    pub debug_info: bool,
    /// The GNU build id, lowercase hex, when present.
    pub build_id: Option<String>,
    /// The file name in `.gnu_debuglink` (where the separate debug info
    /// lives), when present.
    pub debuglink: Option<String>,
}

fn u16_at(b: &[u8], o: usize) -> Option<u64> {
    Some(u16::from_le_bytes(b.get(o..o + 2)?.try_into().ok()?) as u64)
}
fn u32_at(b: &[u8], o: usize) -> Option<u64> {
    Some(u32::from_le_bytes(b.get(o..o + 4)?.try_into().ok()?) as u64)
}
fn u64_at(b: &[u8], o: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(o..o + 8)?.try_into().ok()?))
}

fn read_at(f: &mut File, offset: u64, len: u64) -> io::Result<Vec<u8>> {
    if len > 64 << 20 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "ELF table too large",
        ));
    }
    f.seek(SeekFrom::Start(offset))?;
    let mut buf = vec![0; len as usize];
    f.read_exact(&mut buf)?;
    Ok(buf)
}

fn bad(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.to_string())
}

/// Reads the section table of the ELF file at `path`.
pub fn inspect(path: &Path) -> io::Result<ElfInfo> {
    inspect_file(&mut File::open(path)?)
}

/// One section header: name, file offset, size, type and flags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    /// Its name (from the section name table).
    pub name: Vec<u8>,
    /// Where its bytes are in the file.
    pub offset: u64,
    /// How many bytes it has in the file.
    pub size: u64,
    /// `sh_type`.
    pub kind: u64,
    /// `sh_flags`.
    pub flags: u64,
}

/// `SHF_COMPRESSED`: the section's bytes are a compression header and
/// compressed data.
pub const SHF_COMPRESSED: u64 = 0x800;

/// The section headers of an open 64-bit little-endian ELF file (empty
/// when it has no section table).
pub fn sections(f: &mut File) -> io::Result<Vec<Section>> {
    let hdr = read_at(f, 0, 64).map_err(|_| bad("not an ELF file (too short)"))?;
    if &hdr[..4] != b"\x7fELF" {
        return Err(bad("not an ELF file"));
    }
    if hdr[4] != 2 || hdr[5] != 1 {
        return Err(bad("not a 64-bit little-endian ELF file"));
    }
    let shoff = u64_at(&hdr, 0x28).ok_or_else(|| bad("short header"))?;
    let shentsize = u16_at(&hdr, 0x3a).ok_or_else(|| bad("short header"))?;
    let shnum = u16_at(&hdr, 0x3c).ok_or_else(|| bad("short header"))?;
    let shstrndx = u16_at(&hdr, 0x3e).ok_or_else(|| bad("short header"))?;
    if shoff == 0 || shnum == 0 || shentsize < 64 || shstrndx >= shnum {
        return Ok(Vec::new());
    }
    let table = read_at(f, shoff, shentsize * shnum)?;
    let section = |i: u64| -> Option<(u64, u64, u64, u64, u64)> {
        let o = (i * shentsize) as usize;
        Some((
            u32_at(&table, o)?,
            u64_at(&table, o + 0x18)?,
            u64_at(&table, o + 0x20)?,
            u32_at(&table, o + 4)?,
            u64_at(&table, o + 8)?,
        ))
    };
    let (_, stroff, strsize, _, _) = section(shstrndx).ok_or_else(|| bad("bad section table"))?;
    let names = read_at(f, stroff, strsize)?;
    let mut out = Vec::new();
    for i in 0..shnum {
        let Some((name_off, offset, size, kind, flags)) = section(i) else {
            continue;
        };
        let Some(rest) = names.get(name_off as usize..) else {
            continue;
        };
        let name = rest[..rest.iter().position(|&b| b == 0).unwrap_or(rest.len())].to_vec();
        out.push(Section {
            name,
            offset,
            size,
            kind,
            flags,
        });
    }
    Ok(out)
}

/// [`inspect`] on a file already open (so that what is checked is what is
/// then read).
pub fn inspect_file(f: &mut File) -> io::Result<ElfInfo> {
    let mut info = ElfInfo::default();
    for s in sections(f)? {
        let (off, size) = (s.offset, s.size);
        match &s.name[..] {
            b".symtab" => info.symtab = true,
            b".debug_info" => info.debug_info = true,
            // `.note.gnu.build-id`, or any note section holding it (the
            // vDSO's `.note` has it after two Linux notes).
            _ if s.kind == SHT_NOTE && size <= 4096 && info.build_id.is_none() => {
                let notes = read_at(f, off, size)?;
                info.build_id = gnu_build_id(&notes, ByteOrder::Little);
            }
            b".gnu_debuglink" if size <= 4096 => {
                let link = read_at(f, off, size)?;
                let end = link.iter().position(|&b| b == 0).unwrap_or(link.len());
                let name = String::from_utf8_lossy(&link[..end]).into_owned();
                // A bare file name; anything with a slash would leave the
                // directories perf searches.
                if !name.is_empty() && !name.contains('/') && name != "." && name != ".." {
                    info.debuglink = Some(name);
                }
            }
            _ => {}
        }
    }
    Ok(info)
}

/// `SHT_NOTE`.
const SHT_NOTE: u64 = 7;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_our_own_test_binary() {
        // The test binary is built with debug info and symbols.
        let exe = std::env::current_exe().unwrap();
        let info = inspect(&exe).unwrap();
        assert!(info.symtab || info.debug_info, "{info:?}");
    }

    #[test]
    fn non_elf_is_an_error() {
        let p = std::env::temp_dir().join(format!("elf-test-{}", std::process::id()));
        std::fs::write(&p, b"#!/bin/sh\necho hi\n").unwrap();
        assert!(inspect(&p).is_err());
        std::fs::remove_file(&p).unwrap();
    }
}
