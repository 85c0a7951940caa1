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

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The directory of a capture that holds its JIT symbol snapshot.
pub const JIT_DIR: &str = "jit";

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
        let mut syms: Vec<JitSymbol> = text.lines().filter_map(parse_line).collect();
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

fn parse_line(line: &str) -> Option<JitSymbol> {
    let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok();
    let mut parts = line.splitn(3, ' ');
    let start = hex(parts.next()?)?;
    let size = hex(parts.next()?)?;
    let name = parts.next().unwrap_or("").trim_end();
    (size > 0).then(|| JitSymbol {
        start,
        end: start.saturating_add(size),
        name: name.to_string(),
    })
}

/// `JIT_CODE_LOAD` records of a jitdump file (perf's `jitdump.h`: a file
/// header of `total_size` bytes, then records of `id: u32, total_size: u32,
/// timestamp: u64`, a code load being `pid: u32, tid: u32, vma, code_addr,
/// code_size, code_index: u64`, a NUL-terminated name, the code). A damaged
/// or foreign file gives what could be read up to the damage.
fn jitdump_loads(b: &[u8]) -> Vec<JitSymbol> {
    const MAGIC: u32 = 0x4A69_5444; // "JiTD"
    const CODE_LOAD: u32 = 0;
    let u32_at = |at: usize| -> Option<u32> {
        Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
    };
    let u64_at = |at: usize| -> Option<u64> {
        Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
    };
    let mut out = Vec::new();
    if u32_at(0) != Some(MAGIC) {
        return out;
    }
    let Some(mut at) = u32_at(8).map(|n| n as usize) else {
        return out;
    };
    while let (Some(id), Some(size)) = (u32_at(at), u32_at(at + 4)) {
        let size = size as usize;
        if size < 16 || at + size > b.len() {
            break;
        }
        if id == CODE_LOAD {
            let body = at + 16;
            if let (Some(addr), Some(len)) = (u64_at(body + 16), u64_at(body + 24)) {
                let name_at = body + 40;
                let rest = &b[name_at.min(at + size)..at + size];
                let name = rest.split(|&c| c == 0).next().unwrap_or(&[]);
                if len > 0 {
                    out.push(JitSymbol {
                        start: addr,
                        end: addr.saturating_add(len),
                        name: String::from_utf8_lossy(name).into_owned(),
                    });
                }
            }
        }
        at += size;
    }
    out
}

/// The JIT symbol snapshot of one capture, by the PID the samples carry.
#[derive(Debug, Default)]
pub struct JitMaps {
    /// `Q/jit/`, or `None` for a capture without one (made before it was
    /// taken, or with `--jit-maps off`).
    pub dir: Option<PathBuf>,
    maps: HashMap<u32, Arc<PerfMap>>,
}

impl JitMaps {
    /// Reads `capture_dir/jit/perf-PID.map` and `jit-PID.dump` files. A
    /// file that cannot be read names nothing (its frames stay unnamed).
    pub fn load(capture_dir: &Path) -> JitMaps {
        let dir = capture_dir.join(JIT_DIR);
        let Ok(entries) = std::fs::read_dir(&dir) else {
            return JitMaps::default();
        };
        let mut maps: HashMap<u32, PerfMap> = HashMap::new();
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if let Some(pid) = pid_in(&name, "perf-", ".map") {
                if let Ok(text) = std::fs::read_to_string(e.path()) {
                    let parsed = PerfMap::parse(&text);
                    let m = maps.entry(pid).or_default();
                    let mut syms = std::mem::take(&mut m.syms);
                    syms.extend(parsed.syms);
                    syms.sort_by_key(|s| s.start);
                    *m = PerfMap::from_sorted(syms);
                }
            } else if let Some(pid) = pid_in(&name, "jit-", ".dump") {
                if let Ok(bytes) = std::fs::read(e.path()) {
                    maps.entry(pid).or_default().add_jitdump(&bytes);
                }
            }
        }
        JitMaps {
            dir: Some(dir),
            maps: maps.into_iter().map(|(k, v)| (k, Arc::new(v))).collect(),
        }
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
    match std::fs::read_dir(capture_dir.join(JIT_DIR)) {
        Ok(entries) => {
            let files = entries.flatten().count();
            Ok(format!("snapshot {JIT_DIR}/: {files} file(s)"))
        }
        Err(_) => Err(NoSnapshot),
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
        let mut b = Vec::new();
        b.extend_from_slice(&0x4A69_5444u32.to_le_bytes());
        b.extend_from_slice(&1u32.to_le_bytes()); // version
        b.extend_from_slice(&40u32.to_le_bytes()); // header size
        b.resize(40, 0);
        for (i, (addr, len, name)) in loads.iter().enumerate() {
            let size = 16 + 40 + name.len() + 1 + *len as usize;
            b.extend_from_slice(&0u32.to_le_bytes());
            b.extend_from_slice(&(size as u32).to_le_bytes());
            b.extend_from_slice(&0u64.to_le_bytes());
            b.extend_from_slice(&1u32.to_le_bytes());
            b.extend_from_slice(&1u32.to_le_bytes());
            b.extend_from_slice(&addr.to_le_bytes());
            b.extend_from_slice(&addr.to_le_bytes());
            b.extend_from_slice(&len.to_le_bytes());
            b.extend_from_slice(&(i as u64).to_le_bytes());
            b.extend_from_slice(name.as_bytes());
            b.push(0);
            b.resize(b.len() + *len as usize, 0x90);
        }
        b
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
