//! JIT-compiled code (JVM, Node, Python 3.12+) named from the capture's own
//! snapshot of the runtime's symbol files, never from the processing host's
//! `/tmp`. `jobprof-record` copies, at the end of each capture, the worker's
//! perf map (`/tmp/perf-PID.map`, one `START SIZE name` line per compiled
//! function, hexadecimal) and jitdump file (`jit-PID.dump`, code-load
//! records) into `Q/jit/`, named by the PID the samples carry.
//! [`JitMaps::load`] reads them; the native symbolizer looks JIT addresses up
//! in them, and [`ScriptRewrite`] renames the JIT frames of `perf script`'s
//! text from them (perf 6.1 reads `/tmp/perf-PID.map` of the machine it runs
//! on, whatever `--symfs` says).
//!
//! `jit/` is written by a worker's runtime and copied by the sidecar: it is
//! read as every other capture input is, through [`crate::sys::confined`]:
//! no link followed (at `jit/` itself or at a file in it), regular files
//! only (a FIFO or device is refused without blocking), at most
//! [`MAX_FILE`] bytes of each file, each name cut at [`MAX_NAME`] bytes. A
//! file that cannot be read is a warning naming it; the rest is read.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use linux_perf_data::jitdump::{JitDumpReader, JitDumpRecord, JitDumpRecordHeader};

use crate::sys::confined::Dir;

/// The directory of a capture that holds its JIT symbol snapshot.
pub const JIT_DIR: &str = "jit";

/// Most bytes read of one file in `jit/` (1 GiB): a bigger one is read up
/// to there, with a warning.
pub const MAX_FILE: u64 = 1 << 30;

/// Longest JIT name kept, in bytes (4 KiB, longer than any method
/// signature a JVM, V8 or CPython writes): a longer one is cut there and
/// ends in `...`. perf itself has no limit to match: its perf-map reader
/// (`dso__load_perf_map`, tools/perf/util/symbol.c, in 6.1 as now) reads
/// each line with `getline` and `symbol__new` keeps the whole name, and a
/// jitdump name is bounded only by its record's 32-bit size (only perf's
/// kallsyms reader stops, at `KSYM_NAME_LEN`, 512). So the cap is ours:
/// every sample in such a function copies the name into the text, the
/// folded stacks and the pictures, and one name of 1 MiB made `process`
/// take a minute. The sidecar copies `jit/` byte for byte (within
/// `--symfs-limit`) and never reads a name: this is the one place names
/// are cut.
pub const MAX_NAME: usize = 4096;

/// One compiled function: `[start, end)` and its name.
#[derive(Debug, Clone, PartialEq, Eq)]
struct JitSymbol {
    start: u64,
    end: u64,
    name: String,
}

/// The JIT symbols of one process: its perf map and jitdump code loads.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PerfMap {
    /// Sorted by start; among equal starts, in the order listed.
    syms: Vec<JitSymbol>,
    /// The longest symbol (bounds the backward search).
    longest: u64,
}

/// How far [`PerfMap::find`] looks back past entries that end before the
/// address (overlapping entries: code moved or recompiled at the same place).
const LOOK_BACK: usize = 256;

impl PerfMap {
    /// Parses a perf map text: `START SIZE NAME` per line, hexadecimal, with
    /// or without `0x`, as perf reads it. Lines it cannot read are skipped,
    /// as perf skips them.
    pub fn parse(text: &str) -> PerfMap {
        let mut syms: Vec<JitSymbol> = perf_map_lines(text.as_bytes()).collect();
        syms.sort_by_key(|s| s.start);
        PerfMap::from_sorted(syms)
    }

    fn from_sorted(syms: Vec<JitSymbol>) -> PerfMap {
        let longest = syms.iter().map(|s| s.end - s.start).max().unwrap_or(0);
        PerfMap { syms, longest }
    }

    /// Adds the functions of a jitdump file (its `JIT_CODE_LOAD` records).
    pub fn add_jitdump(&mut self, bytes: &[u8]) {
        let mut syms = std::mem::take(&mut self.syms);
        syms.extend(jitdump_loads(bytes));
        syms.sort_by_key(|s| s.start);
        *self = PerfMap::from_sorted(syms);
    }

    /// Number of functions.
    pub fn len(&self) -> usize {
        self.syms.len()
    }

    /// True when the map names nothing.
    pub fn is_empty(&self) -> bool {
        self.syms.is_empty()
    }

    /// The function at `addr` and the offset into it: the last one listed
    /// that holds it (the newest code at that place).
    pub fn find(&self, addr: u64) -> Option<(&str, u64)> {
        let upto = self.syms.partition_point(|s| s.start <= addr);
        for (seen, s) in self.syms[..upto].iter().rev().enumerate() {
            if addr - s.start >= self.longest || seen > LOOK_BACK {
                break;
            }
            if addr < s.end {
                return Some((s.name.as_str(), addr - s.start));
            }
        }
        None
    }
}

/// The symbols of a perf map's bytes, one line each.
fn perf_map_lines(text: &[u8]) -> impl Iterator<Item = JitSymbol> + '_ {
    text.split(|&b| b == b'\n').filter_map(parse_line)
}

fn parse_line(line: &[u8]) -> Option<JitSymbol> {
    let hex = |s: &[u8]| {
        let s = std::str::from_utf8(s).ok()?;
        u64::from_str_radix(s.trim_start_matches("0x"), 16).ok()
    };
    let mut parts = line.splitn(3, |&b| b == b' ');
    let start = hex(parts.next()?)?;
    let size = hex(parts.next()?)?;
    let name = parts.next().unwrap_or_default().trim_ascii_end();
    (size > 0).then(|| JitSymbol {
        start,
        end: start.saturating_add(size),
        name: capped_name(name),
    })
}

/// `raw` as a name of at most [`MAX_NAME`] bytes (cut at a character
/// boundary, then `...`); invalid UTF-8 replaced.
fn capped_name(raw: &[u8]) -> String {
    if raw.len() <= MAX_NAME {
        return String::from_utf8_lossy(raw).into_owned();
    }
    let mut end = MAX_NAME;
    // Back off a UTF-8 continuation byte or three.
    while end > MAX_NAME - 3 && raw[end] & 0xc0 == 0x80 {
        end -= 1;
    }
    let mut name = String::from_utf8_lossy(&raw[..end]).into_owned();
    name.push_str("...");
    name
}

/// `JIT_CODE_LOAD` records of a jitdump file (perf's `jitdump.h`), read
/// with `linux-perf-data`'s [`JitDumpReader`] in either byte order, as
/// perf reads them. A damaged or foreign file gives what could be read up
/// to the damage. No size the file states is trusted: the header's must
/// fit the reader's first read, and each record's is checked against the
/// bytes the file has before the reader is asked for it (the reader
/// itself subtracts its header from it unchecked, and would gather a
/// record past the end before finding it short).
fn jitdump_loads(b: &[u8]) -> Vec<JitSymbol> {
    let mut out = Vec::new();
    if jitdump_header_size(b).is_none_or(|n| n >= JITDUMP_FIRST_READ) {
        return out;
    }
    let Ok(mut reader) = JitDumpReader::new_with_buffer_size(b, JITDUMP_FIRST_READ) else {
        return out;
    };
    while let Ok(Some(header)) = reader.next_record_header() {
        let size = u64::from(header.total_size);
        let end = reader.next_record_offset().saturating_add(size);
        if size < JitDumpRecordHeader::SIZE as u64 || end > b.len() as u64 {
            break;
        }
        let Ok(Some(record)) = reader.next_record() else {
            break;
        };
        let Ok(JitDumpRecord::CodeLoad(load)) = record.parse() else {
            continue;
        };
        let len = load.code_bytes.len() as u64;
        if len > 0 {
            out.push(JitSymbol {
                start: load.code_addr,
                end: load.code_addr.saturating_add(len),
                name: capped_name(&load.function_name.as_slice()),
            });
        }
    }
    out
}

/// How much of a jitdump [`JitDumpReader`] reads first: its header must
/// fit in it (perf writes 40 bytes).
const JITDUMP_FIRST_READ: usize = 4096;

/// The header size a jitdump file states, in its byte order (its magic);
/// `None` for no jitdump.
fn jitdump_header_size(b: &[u8]) -> Option<usize> {
    let n: [u8; 4] = b.get(8..12)?.try_into().ok()?;
    match b.get(..4)? {
        b"DTiJ" => Some(u32::from_le_bytes(n) as usize),
        b"JiTD" => Some(u32::from_be_bytes(n) as usize),
        _ => None,
    }
}

/// The JIT symbol snapshot of one capture, by the PID the samples carry.
#[derive(Debug, Default)]
pub struct JitMaps {
    /// `Q/jit/`, or `None` for a capture without one (made before it was
    /// taken, or with `--jit-maps off`).
    pub dir: Option<PathBuf>,
    maps: HashMap<u32, Arc<PerfMap>>,
    /// Files (or `jit/` itself) refused or cut short, each naming it.
    pub warnings: Vec<String>,
}

impl JitMaps {
    /// Reads `capture_dir/jit/perf-PID.map` and `jit-PID.dump` files (in
    /// name order) as the module doc says. A file that cannot be read names
    /// nothing (its frames stay unnamed) and is a warning naming it; a link
    /// at `jit/` itself is a warning and no snapshot.
    pub fn load(capture_dir: &Path) -> JitMaps {
        let mut out = JitMaps::default();
        let dir = match snapshot_dir(capture_dir) {
            Ok(Some(d)) => d,
            Ok(None) => return out,
            Err(e) => {
                out.warnings.push(format!("JIT symbols not read: {e}"));
                return out;
            }
        };
        let mut names = match dir.names() {
            Ok(n) => n,
            Err(e) => {
                out.warnings.push(format!("JIT symbols not read: {e}"));
                return out;
            }
        };
        names.sort();
        let mut maps: HashMap<u32, Vec<JitSymbol>> = HashMap::new();
        for name in &names {
            let Some(text) = name.to_str() else { continue };
            let (pid, dump) = match (pid_in(text, "perf-", ".map"), pid_in(text, "jit-", ".dump")) {
                (Some(pid), _) => (pid, false),
                (_, Some(pid)) => (pid, true),
                _ => continue,
            };
            let syms = maps.entry(pid).or_default();
            let (read, warning) = read_capped(&dir, name, |bytes| match dump {
                true => jitdump_loads(bytes),
                false => perf_map_lines(bytes).collect(),
            });
            syms.extend(read);
            out.warnings.extend(warning);
        }
        out.dir = Some(dir.path().to_path_buf());
        out.maps = maps
            .into_iter()
            .filter(|(_, syms)| !syms.is_empty())
            .map(|(pid, mut syms)| {
                syms.sort_by_key(|s| s.start);
                (pid, Arc::new(PerfMap::from_sorted(syms)))
            })
            .collect();
        out
    }

    /// The symbols of process `pid`, when the snapshot has them.
    pub fn of(&self, pid: u32) -> Option<&Arc<PerfMap>> {
        self.maps.get(&pid)
    }

    /// Number of processes with JIT symbols.
    pub fn processes(&self) -> usize {
        self.maps.len()
    }
}

/// `capture_dir/jit`, reached without following a link (`None`: there is
/// none).
fn snapshot_dir(capture_dir: &Path) -> crate::Result<Option<Dir>> {
    let capture = Dir::open(capture_dir)?;
    if capture.entry(JIT_DIR)?.is_none() {
        return Ok(None);
    }
    capture.sub(JIT_DIR).map(Some)
}

/// What `parse` makes of the first [`MAX_FILE`] bytes of the regular
/// file `name` in `dir` (mapped, never through a link, never blocking),
/// and the warning naming the file when there is one: refused or
/// unreadable (nothing read), cut short (what was kept is read), or
/// truncated while read (nothing kept: what was read is not the file's).
fn read_capped<T: Default>(
    dir: &Dir,
    name: &OsStr,
    parse: impl FnOnce(&[u8]) -> T,
) -> (T, Option<String>) {
    let path = dir.join(name);
    let refused = |e: crate::Error| (T::default(), Some(format!("JIT symbols not read: {e}")));
    let file = match dir.open_read(name) {
        Ok(f) => f,
        Err(e) => return refused(e),
    };
    let size = match file.metadata() {
        Ok(m) => m.len(),
        Err(e) => return refused(crate::Error::io(&path, e)),
    };
    if size == 0 {
        return (T::default(), None);
    }
    // SAFETY: a file of a finished capture, which jobprof never writes but
    // its owner may truncate or rewrite at any time: a truncation is
    // survived (the SIGBUS guard's zero pages, and what was read is
    // dropped below); the bytes are parsed as untrusted text and records.
    let map = match unsafe { crate::sys::input::Mapping::of_shrinkable(&file, &path) } {
        Ok(m) => m,
        Err(e) => return refused(crate::Error::io(&path, e)),
    };
    let keep = usize::try_from(size.min(MAX_FILE)).unwrap_or(usize::MAX);
    let read = parse(&map[..keep.min(map.len())]);
    let shown = crate::sys::progress::printable(&path);
    if map.shrank() {
        let why = format!(
            "JIT symbols not read: {shown}: the file shrank while it was read \
             (truncated by another process?)"
        );
        return (T::default(), Some(why));
    }
    if size > MAX_FILE {
        let why = format!(
            "{shown}: {size} bytes, more than the {} MiB read of a JIT symbol file; \
             functions listed past there stay unnamed",
            MAX_FILE >> 20
        );
        return (read, Some(why));
    }
    (read, None)
}

/// The PID in `perf-1234.map` (with `prefix`, `suffix`).
pub fn pid_in(name: &str, prefix: &str, suffix: &str) -> Option<u32> {
    name.strip_prefix(prefix)?
        .strip_suffix(suffix)?
        .parse()
        .ok()
}

/// True when a DSO name perf prints is JIT code: a perf map's name (what
/// perf calls an anonymous executable mapping), the native symbolizer's
/// `//anon` for captures without a snapshot, or a `perf inject --jit` file.
pub fn is_jit_dso(dso: &str) -> bool {
    (dso.starts_with("/tmp/perf-") && dso.ends_with(".map"))
        || dso == "//anon"
        || (dso.contains("/jitted-") && dso.ends_with(".so"))
}

/// Renames the JIT frames of `perf script`'s text from the capture's
/// snapshot: every frame line whose DSO is `/tmp/perf-PID.map` gets the
/// snapshot's name for its address, or `[unknown]` when the snapshot has
/// none (never the name perf found in this machine's `/tmp`). Text arrives
/// in arbitrary pieces; whole lines leave.
#[derive(Debug)]
pub struct ScriptRewrite {
    maps: Arc<JitMaps>,
    partial: Vec<u8>,
}

impl ScriptRewrite {
    /// A rewriter naming from `maps`.
    pub fn new(maps: Arc<JitMaps>) -> ScriptRewrite {
        ScriptRewrite {
            maps,
            partial: Vec::new(),
        }
    }

    /// Appends to `out` the whole lines of what arrived so far, rewritten.
    pub fn push(&mut self, bytes: &[u8], out: &mut Vec<u8>) {
        let mut rest = bytes;
        if !self.partial.is_empty() {
            let Some(nl) = rest.iter().position(|&b| b == b'\n') else {
                self.partial.extend_from_slice(rest);
                return;
            };
            let mut line = std::mem::take(&mut self.partial);
            line.extend_from_slice(&rest[..=nl]);
            self.line(&line, out);
            rest = &rest[nl + 1..];
        }
        let whole = rest.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        for line in rest[..whole].split_inclusive(|&b| b == b'\n') {
            self.line(line, out);
        }
        self.partial.extend_from_slice(&rest[whole..]);
    }

    /// What is left (a last line without its newline), rewritten.
    pub fn finish(mut self, out: &mut Vec<u8>) {
        let line = std::mem::take(&mut self.partial);
        if !line.is_empty() {
            self.line(&line, out);
        }
    }

    fn line(&self, line: &[u8], out: &mut Vec<u8>) {
        match self.renamed(line) {
            Some(new) => out.extend_from_slice(new.as_bytes()),
            None => out.extend_from_slice(line),
        }
    }

    /// The line with the snapshot's name, for a JIT frame line.
    fn renamed(&self, line: &[u8]) -> Option<String> {
        if !line.starts_with(b"\t") || !line.trim_ascii_end().ends_with(b".map)") {
            return None;
        }
        let text = std::str::from_utf8(line).ok()?;
        let body = text.trim_end_matches(['\n', '\r']);
        let open = body.rfind(" (/tmp/perf-")?;
        let dso = &body[open + 2..body.len() - 1];
        let pid = pid_in(dso, "/tmp/perf-", ".map")?;
        let lead = body.len() - body.trim_start().len();
        let addr_text = body[lead..].split(' ').next()?;
        let addr = u64::from_str_radix(addr_text, 16).ok()?;
        let prefix = &body[..lead + addr_text.len()];
        let name = match self.maps.of(pid).and_then(|m| m.find(addr)) {
            Some((name, off)) => format!("{name}+{off:#x}"),
            None => "[unknown]".to_string(),
        };
        Some(format!("{prefix} {name} ({dso})\n"))
    }
}

/// The capture has no JIT snapshot: why its JIT frames stay unnamed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the capture has no JIT symbol snapshot (jit/): it was recorded before \
     jobprof-record took one, or with --jit-maps off, so JIT frames stay unnamed \
     ([anon], [perf-PID.map]); re-record with jobprof-record --jit-maps auto"
)]
pub struct NoSnapshot;

/// What `capture_dir/jit/` holds, for `summary.json` and the log; `Err`
/// when there is none.
pub fn describe_snapshot(capture_dir: &Path) -> Result<String, NoSnapshot> {
    match snapshot_dir(capture_dir) {
        Ok(Some(dir)) => {
            let files = dir.names().map_or(0, |n| n.len());
            Ok(format!("snapshot {JIT_DIR}/: {files} file(s)"))
        }
        Ok(None) => Err(NoSnapshot),
        Err(e) => Ok(format!("snapshot {JIT_DIR}/ not read: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perf_map_lines_as_perf_reads_them() {
        let m = PerfMap::parse(
            "7f0000001000 40 long Hot.alpha(long)\n\
             0x7f0000002000 0x20 LazyCompile:*beta /app/x.js:3\n\
             junk line\n\
             7f0000003000 0 empty\n",
        );
        assert_eq!(m.len(), 2);
        assert_eq!(m.find(0x7f0000001000), Some(("long Hot.alpha(long)", 0)));
        assert_eq!(m.find(0x7f000000103f), Some(("long Hot.alpha(long)", 0x3f)));
        assert_eq!(m.find(0x7f0000001040), None);
        assert_eq!(
            m.find(0x7f0000002010),
            Some(("LazyCompile:*beta /app/x.js:3", 0x10))
        );
        assert_eq!(m.find(0x7f0000000fff), None);
        assert_eq!(m.find(0x7f0000003000), None);
    }

    #[test]
    fn overlapping_entries_name_the_newest_code() {
        // A big stub region, then code recompiled at the same place.
        let m = PerfMap::parse("1000 1000 Interpreter\n1100 10 old\n1100 10 new\n");
        assert_eq!(m.find(0x1105), Some(("new", 5)));
        assert_eq!(m.find(0x1200), Some(("Interpreter", 0x200)));
        assert_eq!(m.find(0x1000), Some(("Interpreter", 0)));
    }

    fn jitdump(loads: &[(u64, u64, &str)]) -> Vec<u8> {
        jitdump_in(false, loads)
    }

    /// A jitdump file of `loads` (address, code size, name), written in
    /// big-endian byte order when `big` (perf reads either, by the magic).
    fn jitdump_in(big: bool, loads: &[(u64, u64, &str)]) -> Vec<u8> {
        let u32b = |v: u32| {
            if big {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            }
        };
        let u64b = |v: u64| {
            if big {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            }
        };
        let mut b = Vec::new();
        b.extend_from_slice(&u32b(0x4A69_5444));
        b.extend_from_slice(&u32b(1)); // version
        b.extend_from_slice(&u32b(40)); // header size
        b.resize(40, 0);
        for (i, (addr, len, name)) in loads.iter().enumerate() {
            let size = 16 + 40 + name.len() + 1 + *len as usize;
            b.extend_from_slice(&u32b(0));
            b.extend_from_slice(&u32b(size as u32));
            b.extend_from_slice(&u64b(0));
            b.extend_from_slice(&u32b(1));
            b.extend_from_slice(&u32b(1));
            b.extend_from_slice(&u64b(*addr));
            b.extend_from_slice(&u64b(*addr));
            b.extend_from_slice(&u64b(*len));
            b.extend_from_slice(&u64b(i as u64));
            b.extend_from_slice(name.as_bytes());
            b.push(0);
            b.resize(b.len() + *len as usize, 0x90);
        }
        b
    }

    #[test]
    fn a_big_endian_jitdump_names_its_code_as_perf_reads_it() {
        let mut m = PerfMap::default();
        m.add_jitdump(&jitdump_in(true, &[(0x5000, 0x10, "js:fast")]));
        assert_eq!(m.find(0x5004), Some(("js:fast", 4)));
    }

    #[test]
    fn sizes_in_a_jitdump_are_checked_against_the_file_never_trusted() {
        let good = jitdump(&[(0x5000, 0x10, "js:fast"), (0x6000, 0x8, "js:other")]);
        let first = 16 + 40 + "js:fast".len() + 1 + 0x10;
        let loads = |b: &[u8]| {
            let mut m = PerfMap::default();
            m.add_jitdump(b);
            m.len()
        };
        // The header's size: larger than the reader's first read, or than
        // the whole file.
        for header in [4096u32, 1 << 20, u32::MAX, 39, 0] {
            let mut b = good.clone();
            b.resize(b.len().max(8192), 0);
            b[8..12].copy_from_slice(&header.to_le_bytes());
            assert_eq!(loads(&b), 0, "header size {header}");
        }
        // The second record's size: shorter than a record header, or past
        // the end of the file: the first record is kept.
        for size in [0u32, 8, 15, u32::MAX, 1 << 30] {
            let mut b = good.clone();
            b[40 + first + 4..40 + first + 8].copy_from_slice(&size.to_le_bytes());
            assert_eq!(loads(&b), 1, "record size {size}");
        }
    }

    #[test]
    fn jitdump_code_loads_name_their_code() {
        let mut m = PerfMap::default();
        let mut b = jitdump(&[(0x5000, 0x10, "js:fast"), (0x6000, 0x8, "js:other")]);
        m.add_jitdump(&b);
        assert_eq!(m.find(0x5004), Some(("js:fast", 4)));
        assert_eq!(m.find(0x6007), Some(("js:other", 7)));
        // Damaged: what comes before the damage is kept.
        b.truncate(b.len() - 3);
        let mut d = PerfMap::default();
        d.add_jitdump(&b);
        assert_eq!(d.len(), 1);
        let mut none = PerfMap::default();
        none.add_jitdump(b"not a jitdump");
        assert!(none.is_empty());
    }

    #[test]
    fn perf_script_jit_frames_named_from_the_snapshot_only() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(JIT_DIR)).unwrap();
        std::fs::write(
            dir.path().join("jit/perf-42.map"),
            "7f0000001000 40 long Hot.alpha(long)\n",
        )
        .unwrap();
        let maps = Arc::new(JitMaps::load(dir.path()));
        assert_eq!(maps.processes(), 1);
        let text = "java 43 1.0: 1 cpu-clock: \n\
            \t    7f0000001010 [unknown] (/tmp/perf-42.map)\n\
            \t    7f0000005000 host-name+0x1 (/tmp/perf-42.map)\n\
            \t    7f0000001010 elsewhere+0x3 (/tmp/perf-7.map)\n\
            \t          8282d2 JavaCalls::call_helper+0x302 (/usr/lib/libjvm.so)\n\n";
        let mut out = Vec::new();
        let mut r = ScriptRewrite::new(maps);
        // In pieces that cut lines anywhere.
        for piece in text.as_bytes().chunks(7) {
            r.push(piece, &mut out);
        }
        r.finish(&mut out);
        let out = String::from_utf8(out).unwrap();
        assert_eq!(
            out,
            "java 43 1.0: 1 cpu-clock: \n\
            \t    7f0000001010 long Hot.alpha(long)+0x10 (/tmp/perf-42.map)\n\
            \t    7f0000005000 [unknown] (/tmp/perf-42.map)\n\
            \t    7f0000001010 [unknown] (/tmp/perf-7.map)\n\
            \t          8282d2 JavaCalls::call_helper+0x302 (/usr/lib/libjvm.so)\n\n"
        );
    }

    fn mkfifo(p: &Path) {
        use std::os::unix::ffi::OsStrExt;
        let c = std::ffi::CString::new(p.as_os_str().as_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o666) }, 0);
    }

    /// [`JitMaps::load`] on another thread, given 20 s (a FIFO read the
    /// old way blocked forever).
    fn load_within(dir: &Path) -> JitMaps {
        let dir = dir.to_path_buf();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || tx.send(JitMaps::load(&dir)));
        rx.recv_timeout(std::time::Duration::from_secs(20))
            .expect("JitMaps::load blocked")
    }

    #[test]
    fn jit_files_are_read_without_links_fifos_or_devices() {
        use std::os::unix::fs::symlink;
        let t = tempfile::tempdir().unwrap();
        let secret = t.path().join("secret");
        std::fs::write(&secret, "7f0000009000 40 root-only-secret\n").unwrap();
        let cap = t.path().join("q1");
        let jit = cap.join(JIT_DIR);
        std::fs::create_dir_all(&jit).unwrap();
        symlink(&secret, jit.join("perf-1.map")).unwrap();
        mkfifo(&jit.join("perf-2.map"));
        std::fs::write(jit.join("perf-3.map"), "7f0000001000 40 good\n").unwrap();
        symlink("/dev/zero", jit.join("jit-4.dump")).unwrap();
        let maps = load_within(&cap);
        assert_eq!(maps.processes(), 1, "{:?}", maps.warnings);
        assert_eq!(maps.of(3).unwrap().find(0x7f0000001000), Some(("good", 0)));
        let w = maps.warnings.join("\n");
        for (file, what) in [
            ("perf-1.map", "symbolic link"),
            ("perf-2.map", "FIFO"),
            ("jit-4.dump", "symbolic link"),
        ] {
            assert!(
                maps.warnings
                    .iter()
                    .any(|l| l.contains(&format!("jit/{file}")) && l.contains(what)),
                "{file}: {w}"
            );
        }
        assert!(!format!("{maps:?}").contains("root-only-secret"));
        // A link at jit/ itself: no snapshot, a warning naming it.
        let other = t.path().join("q2");
        std::fs::create_dir(&other).unwrap();
        symlink(&jit, other.join(JIT_DIR)).unwrap();
        let maps = load_within(&other);
        assert_eq!(maps.processes(), 0);
        assert!(maps.dir.is_none());
        assert!(
            maps.warnings.len() == 1
                && maps.warnings[0].contains("q2/jit")
                && maps.warnings[0].contains("symbolic link"),
            "{:?}",
            maps.warnings
        );
        assert!(describe_snapshot(&other).unwrap().contains("not read"));
    }

    #[test]
    fn a_jit_file_truncated_while_it_is_read_names_nothing_and_is_a_warning() {
        let t = tempfile::tempdir().unwrap();
        let jit = t.path().join(JIT_DIR);
        std::fs::create_dir_all(&jit).unwrap();
        let map = jit.join("perf-5.map");
        let lines = "7f0000001000 40 good\n".repeat(1000);
        std::fs::write(&map, &lines).unwrap();
        assert_eq!(JitMaps::load(t.path()).processes(), 1, "intact, it is read");
        let maps = crate::sys::input::tests::truncated_after_map(&map, || JitMaps::load(t.path()));
        assert_eq!(maps.processes(), 0, "{maps:?}");
        let w = maps.warnings.join("\n");
        assert!(w.contains("jit/perf-5.map") && w.contains("shrank"), "{w}");
    }

    #[test]
    fn a_character_device_in_jit_is_refused_unread() {
        // /dev/zero itself, as a device node in jit/ (root can make one).
        let t = tempfile::tempdir().unwrap();
        let jit = t.path().join(JIT_DIR);
        std::fs::create_dir(&jit).unwrap();
        let node = jit.join("jit-5.dump");
        let c = std::ffi::CString::new(node.to_str().unwrap()).unwrap();
        // SAFETY: a valid path; mknod of /dev/zero's numbers (1, 5).
        let made = unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(1, 5)) };
        if made != 0 {
            eprintln!("skipped: mknod needs root");
            return;
        }
        let maps = load_within(t.path());
        assert_eq!(maps.processes(), 0);
        assert!(
            maps.warnings[0].contains("jit-5.dump") && maps.warnings[0].contains("a device"),
            "{:?}",
            maps.warnings
        );
    }

    #[test]
    fn names_are_cut_at_max_name_bytes() {
        let long = "A".repeat(32 << 20);
        let m = PerfMap::parse(&format!("1000 10 {long}\n2000 10 short\n"));
        let (name, off) = m.find(0x1004).unwrap();
        assert_eq!((name.len(), off), (MAX_NAME + 3, 4));
        assert!(name.ends_with("A..."));
        assert_eq!(m.find(0x2000), Some(("short", 0)));
        // Cut at a character boundary.
        let wide = "\u{e9}".repeat(MAX_NAME);
        let m = PerfMap::parse(&format!("1000 10 {wide}\n"));
        let name = m.find(0x1000).unwrap().0;
        assert!(
            name.len() <= MAX_NAME + 3 && name.ends_with("\u{e9}..."),
            "{name}"
        );
        // A jitdump's names too.
        let mut d = PerfMap::default();
        d.add_jitdump(&jitdump(&[(0x5000, 0x10, &long[..MAX_NAME + 100])]));
        assert_eq!(d.find(0x5000).unwrap().0.len(), MAX_NAME + 3);
    }

    #[test]
    fn jit_dsos() {
        assert!(is_jit_dso("/tmp/perf-12.map"));
        assert!(is_jit_dso("//anon"));
        assert!(is_jit_dso("/root/.debug/jit/java-jit-1/jitted-12-3.so"));
        assert!(!is_jit_dso("/usr/lib/libc.so.6"));
        assert_eq!(pid_in("perf-12.map", "perf-", ".map"), Some(12));
        assert_eq!(pid_in("perf-x.map", "perf-", ".map"), None);
    }
}
