//! Just enough DWARF for the split DWARF snapshot (`-gsplit-dwarf`): the
//! `.dwo` file each skeleton unit of a binary names ([`skeletons`]: its
//! `DW_AT_dwo_name`, or `DW_AT_GNU_dwo_name` in DWARF 4, with its
//! `DW_AT_comp_dir` and dwo id) and the dwo id of the unit a `.dwo` file
//! holds ([`split_unit_id`]), so that a file is copied only when it is the
//! one a skeleton asks for. Reads the unit headers and each unit's first
//! entry only (the sidecar has no DWARF library: it stays small and
//! static), a bounded window at a time through the file's own handle,
//! never a whole section; a binary without `.debug_addr` (which every
//! split unit's addresses go through) has no split units and is not read
//! at all.
//! Compressed sections are not read (their skeletons are not found: the
//! manifest says so).

use std::collections::HashMap;
use std::fs::File;
use std::io;

use crate::elf::{self, Section};

/// A skeleton unit: the split unit it names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skeleton {
    /// The split unit's id (`None`: a DWARF 4 skeleton without one).
    pub dwo_id: Option<u64>,
    /// `DW_AT_dwo_name`: the `.dwo` file, relative to `comp_dir` unless
    /// absolute.
    pub name: String,
    /// `DW_AT_comp_dir`, when the unit has one.
    pub comp_dir: Option<String>,
}

impl Skeleton {
    /// The `.dwo` file's absolute path, `.` and `..` taken lexically
    /// (never above `/`) so that the copy under `symfs/` is where the
    /// processor looks (`None`: relative, with no absolute compilation
    /// directory).
    pub fn path(&self) -> Option<String> {
        let joined = if self.name.starts_with('/') {
            self.name.clone()
        } else {
            let dir = self.comp_dir.as_deref().filter(|d| d.starts_with('/'))?;
            format!("{dir}/{}", self.name)
        };
        let mut parts: Vec<&str> = Vec::new();
        for part in joined.split('/') {
            match part {
                "" | "." => {}
                ".." => {
                    parts.pop();
                }
                _ => parts.push(part),
            }
        }
        Some(format!("/{}", parts.join("/")))
    }
}

/// The most units of one file looked at.
const MAX_UNITS: usize = 1 << 20;
/// The most bytes of a unit's first entry read.
const ENTRY_BYTES: usize = 4096;

fn bad(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("DWARF: {what}"))
}

/// The skeleton units of the open ELF file `f`, in `.debug_info` order,
/// each split unit once. Empty when it has no `.debug_addr`.
pub fn skeletons(f: &mut File) -> io::Result<Vec<Skeleton>> {
    let sections = elf::sections(f)?;
    if find(&sections, ".debug_addr").is_none() {
        return Ok(Vec::new());
    }
    let mut file = Dwarf::read(f, &sections, "")?;
    let mut out: Vec<Skeleton> = Vec::new();
    for unit in file.units()? {
        if let Some(s) = file.skeleton(&unit)? {
            if !out.contains(&s) {
                out.push(s);
            }
        }
    }
    Ok(out)
}

/// The dwo id of the first unit in the `.dwo` file `f` (`None`: it has no
/// split unit with one).
pub fn split_unit_id(f: &mut File) -> io::Result<Option<u64>> {
    let sections = elf::sections(f)?;
    let mut file = Dwarf::read(f, &sections, ".dwo")?;
    let Some(unit) = file.units()?.into_iter().next() else {
        return Ok(None);
    };
    if unit.dwo_id.is_some() {
        return Ok(unit.dwo_id);
    }
    Ok(file.entry(&unit)?.dwo_id)
}

fn find<'a>(sections: &'a [Section], name: &str) -> Option<&'a Section> {
    sections.iter().find(|s| s.name == name.as_bytes())
}

/// One unit's header.
#[derive(Debug)]
struct Unit {
    /// Where its first entry starts and where the unit ends, in
    /// `.debug_info`.
    entry: u64,
    end: u64,
    version: u16,
    /// DWARF 5's unit type (0 before DWARF 5).
    kind: u8,
    abbrev: u64,
    address_size: u8,
    offset_size: u8,
    /// A DWARF 5 skeleton's or split unit's id.
    dwo_id: Option<u64>,
}

/// What a unit's first entry says.
#[derive(Debug, Default)]
struct Entry {
    name: Option<Str>,
    comp_dir: Option<Str>,
    dwo_id: Option<u64>,
    str_offsets_base: Option<u64>,
}

/// A string attribute's value as stored.
#[derive(Debug, Clone)]
enum Str {
    Inline(String),
    /// An offset into `.debug_str`.
    Strp(u64),
    /// An offset into `.debug_line_str`.
    LineStrp(u64),
    /// An index into `.debug_str_offsets`.
    Index(u64),
}

/// An abbreviation's (attribute, form, implicit constant) list.
type Attrs = Vec<(u64, u64, i64)>;

/// An abbreviation table: each code's attributes.
type Abbrevs = HashMap<u64, Attrs>;

/// A section of the open file, read a window at a time (a big
/// `.debug_info` is never read whole: only unit headers and first
/// entries).
struct Part<'f> {
    file: &'f File,
    offset: u64,
    size: u64,
}

impl Part<'_> {
    /// At most `len` bytes from `at` in the section (fewer at its end,
    /// none past it or when the file cannot be read there).
    fn window(&self, at: u64, len: usize) -> Vec<u8> {
        use std::os::unix::fs::FileExt;
        let n = self.size.saturating_sub(at).min(len as u64) as usize;
        let mut buf = vec![0; n];
        let read = self
            .file
            .read_exact_at(&mut buf, self.offset.saturating_add(at));
        read.map_or_else(|_| Vec::new(), |()| buf)
    }
}

/// The most bytes of an abbreviation table read (a unit's first entry's
/// abbreviation is at its start).
const TABLE_BYTES: usize = 64 << 10;
/// The most bytes of a string read.
const STRING_BYTES: usize = 4096;

/// The sections of one file (`suffix`: `.dwo` for a split file's).
struct Dwarf<'f> {
    info: Part<'f>,
    abbrev: Part<'f>,
    strs: Part<'f>,
    line_strs: Part<'f>,
    str_offsets: Part<'f>,
    /// Abbreviation tables by offset.
    tables: HashMap<u64, Abbrevs>,
}

impl<'f> Dwarf<'f> {
    fn read(f: &'f File, sections: &[Section], suffix: &str) -> io::Result<Dwarf<'f>> {
        let get = |name: &str| -> io::Result<Part<'f>> {
            let (offset, size) = match find(sections, &format!("{name}{suffix}")) {
                Some(s) if s.flags & elf::SHF_COMPRESSED != 0 => {
                    return Err(bad(&format!("{name}{suffix} is compressed")));
                }
                Some(s) if s.kind != SHT_NOBITS => (s.offset, s.size),
                _ => (0, 0),
            };
            Ok(Part {
                file: f,
                offset,
                size,
            })
        };
        Ok(Dwarf {
            info: get(".debug_info")?,
            abbrev: get(".debug_abbrev")?,
            strs: get(".debug_str")?,
            line_strs: get(".debug_line_str")?,
            str_offsets: get(".debug_str_offsets")?,
            tables: HashMap::new(),
        })
    }

    /// The unit headers of `.debug_info`.
    fn units(&self) -> io::Result<Vec<Unit>> {
        let mut out = Vec::new();
        let mut at = 0;
        while at < self.info.size && out.len() < MAX_UNITS {
            let header = self.info.window(at, 32);
            let unit =
                unit_header(&header, at, self.info.size).ok_or_else(|| bad("bad unit header"))?;
            at = unit.end;
            out.push(unit);
        }
        Ok(out)
    }

    /// The split unit `unit` names, when it is a skeleton.
    fn skeleton(&mut self, unit: &Unit) -> io::Result<Option<Skeleton>> {
        // DWARF 5 names split units from skeleton units only; DWARF 4
        // (the GNU extension) from compile units.
        if unit.version >= 5 && unit.kind != DW_UT_SKELETON {
            return Ok(None);
        }
        let e = self.entry(unit)?;
        let Some(name) = e.name.as_ref() else {
            return Ok(None);
        };
        let text = |s: &Str| self.string(s, unit, e.str_offsets_base);
        let name = text(name).ok_or_else(|| bad("unreadable dwo name"))?;
        let comp_dir = e.comp_dir.as_ref().and_then(text);
        Ok(Some(Skeleton {
            dwo_id: unit.dwo_id.or(e.dwo_id),
            name,
            comp_dir,
        }))
    }

    /// The attributes of `unit`'s first entry this module reads.
    fn entry(&mut self, unit: &Unit) -> io::Result<Entry> {
        let len = (unit.end - unit.entry).min(ENTRY_BYTES as u64) as usize;
        let bytes = self.info.window(unit.entry, len);
        let mut c = Cursor::new(&bytes);
        let code = c.uleb().ok_or_else(|| bad("bad entry"))?;
        let table = self.table(unit.abbrev)?;
        let Some(attrs) = table.get(&code).cloned() else {
            return Ok(Entry::default());
        };
        let mut e = Entry::default();
        for (at, form, implicit) in attrs {
            let v = value(&mut c, form, implicit, unit).ok_or_else(|| bad("bad attribute"))?;
            match (at, v) {
                (DW_AT_DWO_NAME | DW_AT_GNU_DWO_NAME, Value::Str(s)) => e.name = Some(s),
                (DW_AT_COMP_DIR, Value::Str(s)) => e.comp_dir = Some(s),
                (DW_AT_GNU_DWO_ID, Value::Num(n)) => e.dwo_id = Some(n),
                (DW_AT_STR_OFFSETS_BASE, Value::Num(n)) => e.str_offsets_base = Some(n),
                _ => {}
            }
        }
        Ok(e)
    }

    /// The abbreviation table at `offset`, parsed once.
    fn table(&mut self, offset: u64) -> io::Result<&Abbrevs> {
        if !self.tables.contains_key(&offset) {
            let table = abbrev_table(&self.abbrev.window(offset, TABLE_BYTES));
            self.tables.insert(offset, table);
        }
        Ok(&self.tables[&offset])
    }

    /// A string attribute's text.
    fn string(&self, s: &Str, unit: &Unit, base: Option<u64>) -> Option<String> {
        let at = |part: &Part<'_>, off: u64| -> Option<String> {
            let mut rest = part.window(off, STRING_BYTES);
            rest.truncate(rest.iter().position(|&b| b == 0)?);
            String::from_utf8(rest).ok()
        };
        match s {
            Str::Inline(t) => Some(t.clone()),
            Str::Strp(o) => at(&self.strs, *o),
            Str::LineStrp(o) => at(&self.line_strs, *o),
            Str::Index(i) => {
                // DWARF 5 skeletons give the table's base; a split unit's
                // table starts after its 8-byte header.
                let size = u64::from(unit.offset_size);
                let base = base.unwrap_or(if size == 8 { 16 } else { 8 });
                let entry = base.checked_add(i.checked_mul(size)?)?;
                let bytes = self
                    .str_offsets
                    .window(entry, usize::from(unit.offset_size));
                at(&self.strs, Cursor::new(&bytes).uint(unit.offset_size)?)
            }
        }
    }
}

const SHT_NOBITS: u64 = 8;
const DW_UT_SKELETON: u8 = 4;
const DW_UT_SPLIT_COMPILE: u8 = 5;
const DW_AT_COMP_DIR: u64 = 0x1b;
const DW_AT_STR_OFFSETS_BASE: u64 = 0x72;
const DW_AT_DWO_NAME: u64 = 0x76;
const DW_AT_GNU_DWO_NAME: u64 = 0x2130;
const DW_AT_GNU_DWO_ID: u64 = 0x2131;

/// The unit header at `at` in a `.debug_info` of `size` bytes, read from
/// `bytes` (the section from `at`).
fn unit_header(bytes: &[u8], at: u64, size: u64) -> Option<Unit> {
    let mut c = Cursor::new(bytes);
    let (len, offset_size) = match c.uint(4)? {
        0xffff_ffff => (c.uint(8)?, 8),
        n if n < 0xffff_fff0 => (n, 4),
        _ => return None,
    };
    let end = at.checked_add(c.pos as u64)?.checked_add(len)?;
    let version = c.uint(2)? as u16;
    let (mut kind, mut dwo_id) = (0, None);
    let (abbrev, address_size);
    if version >= 5 {
        kind = c.u8()?;
        address_size = c.u8()?;
        abbrev = c.uint(offset_size)?;
        if kind == DW_UT_SKELETON || kind == DW_UT_SPLIT_COMPILE {
            dwo_id = Some(c.uint(8)?);
        }
    } else {
        abbrev = c.uint(offset_size)?;
        address_size = c.u8()?;
    }
    (end <= size && (2..=5).contains(&version)).then_some(Unit {
        entry: at + c.pos as u64,
        end,
        version,
        kind,
        abbrev,
        address_size,
        offset_size,
        dwo_id,
    })
}

/// The abbreviation table in `bytes`: each code's (attribute, form,
/// implicit constant) list, as far as `bytes` has whole declarations.
fn abbrev_table(bytes: &[u8]) -> Abbrevs {
    let mut c = Cursor::new(bytes);
    let mut table = HashMap::new();
    while let Some((code, attrs)) = declaration(&mut c) {
        table.insert(code, attrs);
    }
    table
}

/// One abbreviation declaration (`None`: the table's end, or the bytes'
/// end).
fn declaration(c: &mut Cursor<'_>) -> Option<(u64, Attrs)> {
    let code = c.uleb().filter(|&code| code != 0)?;
    let (_tag, _children) = (c.uleb()?, c.u8()?);
    let mut attrs = Vec::new();
    loop {
        let (at, form) = (c.uleb()?, c.uleb()?);
        if at == 0 && form == 0 {
            return Some((code, attrs));
        }
        let implicit = if form == DW_FORM_IMPLICIT_CONST {
            c.sleb()?
        } else {
            0
        };
        attrs.push((at, form, implicit));
    }
}

/// An attribute value, as far as this module cares.
enum Value {
    Str(Str),
    Num(u64),
    Other,
}

const DW_FORM_IMPLICIT_CONST: u64 = 0x21;

/// Reads (or skips) one attribute value of form `form`.
fn value(c: &mut Cursor<'_>, form: u64, implicit: i64, unit: &Unit) -> Option<Value> {
    let off = unit.offset_size;
    let num = |n: u64| Some(Value::Num(n));
    match form {
        0x08 => Some(Value::Str(Str::Inline(c.cstr()?))),
        0x0e => Some(Value::Str(Str::Strp(c.uint(off)?))),
        0x1f => Some(Value::Str(Str::LineStrp(c.uint(off)?))),
        0x1a | 0x1f02 => Some(Value::Str(Str::Index(c.uleb()?))),
        0x25..=0x28 => Some(Value::Str(Str::Index(c.uint(1 << (form - 0x25))?))),
        0x0b => num(c.uint(1)?),
        0x05 => num(c.uint(2)?),
        0x06 => num(c.uint(4)?),
        0x07 => num(c.uint(8)?),
        0x0f => num(c.uleb()?),
        0x0d => num(c.sleb()? as u64),
        0x17 => num(c.uint(off)?),
        DW_FORM_IMPLICIT_CONST => num(implicit as u64),
        _ => skip(c, form, unit).map(|()| Value::Other),
    }
}

/// Skips a value of a form [`value`] does not read.
fn skip(c: &mut Cursor<'_>, form: u64, unit: &Unit) -> Option<()> {
    let off = usize::from(unit.offset_size);
    let n = match form {
        0x01 => usize::from(unit.address_size),
        0x0c | 0x11 | 0x29 => 1,
        0x12 | 0x2a => 2,
        0x2b => 3,
        0x13 | 0x1c | 0x2c => 4,
        0x14 | 0x20 | 0x24 => 8,
        0x1e => 16,
        0x19 => 0,
        0x10 if unit.version == 2 => usize::from(unit.address_size),
        0x10 | 0x1d | 0x1f20 | 0x1f21 => off,
        0x15 | 0x1b | 0x22 | 0x23 | 0x1f01 => {
            c.uleb()?;
            0
        }
        0x03 => c.uint(2)? as usize,
        0x04 => c.uint(4)? as usize,
        0x09 | 0x18 => usize::try_from(c.uleb()?).ok()?,
        0x0a => c.uint(1)? as usize,
        0x16 => {
            let real = c.uleb()?;
            return value(c, real, 0, unit).map(|_| ());
        }
        _ => return None,
    };
    c.take(n).map(|_| ())
}

/// A little-endian reader over bytes.
struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn new(bytes: &'a [u8]) -> Cursor<'a> {
        Cursor { bytes, pos: 0 }
    }

    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let b = self.bytes.get(self.pos..self.pos.checked_add(n)?)?;
        self.pos += n;
        Some(b)
    }

    fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }

    /// An unsigned little-endian integer of `size` bytes (1 to 8).
    fn uint(&mut self, size: u8) -> Option<u64> {
        let b = self.take(usize::from(size))?;
        Some(b.iter().rev().fold(0, |n, &x| n << 8 | u64::from(x)))
    }

    /// A LEB128 number's low 64 bits and how many bits it had.
    fn leb(&mut self) -> Option<(u64, u32)> {
        let (mut n, mut shift) = (0u64, 0u32);
        loop {
            let b = self.u8()?;
            if shift < 64 {
                n |= u64::from(b & 0x7f) << shift;
            }
            shift += 7;
            if b & 0x80 == 0 {
                return Some((n, shift));
            }
        }
    }

    fn uleb(&mut self) -> Option<u64> {
        Some(self.leb()?.0)
    }

    fn sleb(&mut self) -> Option<i64> {
        let (n, bits) = self.leb()?;
        // Sign-extended from its last bit.
        Some(if bits < 64 && n >> (bits - 1) & 1 == 1 {
            (n | (u64::MAX << bits)) as i64
        } else {
            n as i64
        })
    }

    fn cstr(&mut self) -> Option<String> {
        let rest = self.bytes.get(self.pos..)?;
        let end = rest.iter().position(|&b| b == 0)?;
        self.pos += end + 1;
        String::from_utf8(rest[..end].to_vec()).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_unit_header_with_a_bad_length_is_refused() {
        assert!(unit_header(&[0xf0, 0xff, 0xff, 0xff, 5, 0], 0, 6).is_none());
        assert!(unit_header(&[100, 0, 0, 0, 5, 0, 4, 8, 0, 0, 0, 0], 0, 12).is_none());
    }

    #[test]
    fn leb128_reads_as_dwarf_says() {
        let mut c = Cursor::new(&[0xe5, 0x8e, 0x26, 0x7f]);
        assert_eq!(c.uleb(), Some(624_485));
        assert_eq!(c.sleb(), Some(-1));
        let mut c = Cursor::new(&[0x80, 0x7f, 0x3f, 0x40]);
        assert_eq!(
            (c.sleb(), c.sleb(), c.sleb()),
            (Some(-128), Some(63), Some(-64))
        );
    }

    #[test]
    fn a_relative_dwo_name_is_under_its_comp_dir() {
        let s = |name: &str, dir: Option<&str>| Skeleton {
            dwo_id: None,
            name: name.into(),
            comp_dir: dir.map(str::to_string),
        };
        assert_eq!(s("a.dwo", Some("/b/")).path().as_deref(), Some("/b/a.dwo"));
        assert_eq!(
            s("/c/a.dwo", Some("/b")).path().as_deref(),
            Some("/c/a.dwo")
        );
        assert_eq!(
            s("../x/./a.dwo", Some("/b/c")).path().as_deref(),
            Some("/b/x/a.dwo")
        );
        assert_eq!(
            s("../../../a.dwo", Some("/b")).path().as_deref(),
            Some("/a.dwo")
        );
        assert_eq!(s("a.dwo", Some("rel")).path(), None);
        assert_eq!(s("a.dwo", None).path(), None);
    }

    /// `main.c` compiled by gcc with `-gsplit-dwarf` in DWARF `version`
    /// (`-c`, then linked), in a fresh directory; `None` without gcc
    /// (an error under CI).
    fn gcc_split(version: &str) -> Option<std::path::PathBuf> {
        use std::process::Command;
        let dir = std::env::temp_dir().join(format!("dwarf-{version}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("main.c"), "int main(void) { return 0; }\n").unwrap();
        let run = |args: &[&str]| Command::new("gcc").args(args).current_dir(&dir).status();
        let flags = ["-O2", "-g", "-gsplit-dwarf", version, "-c", "main.c"];
        match run(&flags) {
            Ok(st) => assert!(st.success(), "gcc {flags:?}"),
            Err(e) => {
                assert_ne!(std::env::var("CI").as_deref(), Ok("true"), "gcc: {e}");
                eprintln!("SKIPPED: gcc is missing ({e})");
                return None;
            }
        }
        assert!(run(&["main.o", "-o", "main"]).unwrap().success());
        Some(dir)
    }

    #[test]
    fn gcc_split_units_name_their_dwo_file_which_holds_that_unit() {
        for version in ["-gdwarf-5", "-gdwarf-4"] {
            let Some(dir) = gcc_split(version) else {
                return;
            };
            let units = skeletons(&mut File::open(dir.join("main")).unwrap()).unwrap();
            assert_eq!(units.len(), 1, "{version}: {units:?}");
            let dwo = dir.join("main.dwo");
            assert_eq!(units[0].path().as_deref(), dwo.to_str(), "{version}");
            assert!(units[0].dwo_id.is_some(), "{version}: {units:?}");
            let id = split_unit_id(&mut File::open(&dwo).unwrap()).unwrap();
            assert_eq!(id, units[0].dwo_id, "{version}");
            // The .dwo itself has no skeletons; the object file's is the
            // binary's.
            assert!(skeletons(&mut File::open(&dwo).unwrap())
                .unwrap()
                .is_empty());
            std::fs::remove_dir_all(&dir).unwrap();
        }
    }
}
