//! The native symbolizer: reads a `perf.data` shard directly and prints the
//! same text `perf script` prints for it (default fields, with or without
//! `--inline`: [`inline`]), without running `perf`.
//!
//! [`check`] (in `check.rs`) decides, from the file's header and a walk over its record
//! headers (no payload is parsed), whether this module can stand in for
//! `perf script` on a shard: frame-pointer call chains (`-g`), user register
//! and stack copies (`--call-graph dwarf`, x86-64, unwound by [`unwind`]),
//! the records that place code in memory (`MMAP`, `MMAP2`, `COMM`, `FORK`,
//! `EXIT`) and the ones perf script prints nothing for. Anything else
//! (samples without call chains, dwarf captures of another architecture,
//! compressed or pipe-mode files, `KSYMBOL`, `AUX`, `TEXT_POKE`, an unknown
//! record type) is refused with the reason, and the caller runs
//! `perf script` for that shard instead.
//!
//! [`Symbolizer::run`] then replays the records (`run.rs`) in time order, read in
//! place from a mapping of the file and sorted per flush round as perf and
//! linux-perf-data sort them ([`records`]; linux-perf-data reads the
//! header, attributes and build ids), tracks
//! threads and maps ([`threads`]), and names each call-chain address from
//! the capture's symbol files ([`elf`], perf's file search and symbol
//! selection) or the kernel symbol table ([`symbols::parse_kallsyms`]).
//! Symbol tables, unwind tables, DWARF and kernel tables are loaded once per
//! DSO and run and shared by every shard, time slice and capture whose
//! symbolizers share one [`store::Store`]; each run caches finished frame
//! lines by address, and the frame text of whole frame-pointer stacks by
//! call chain (most samples repeat a stack). Text goes to a callback in
//! blocks that end at sample boundaries; [`Symbolizer::recycle`] takes the
//! blocks back for reuse.

pub mod arch;
pub mod cache;
mod check;
pub mod demangle;
pub mod elf;
mod error;
mod header;
pub mod inline;
pub mod once_map;
mod order;
pub mod records;
mod run;
pub mod store;
pub mod symbols;
pub mod threads;
pub mod tracepoint;
pub mod unwind;

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use linux_perf_data::linux_perf_event_reader::RecordType;
use linux_perf_data::{PerfFileReader, PerfFileRecord};

use crate::symbolize::perf::TimeSlice;
use crate::symbolize::sample::{Batch, Frame, Line};
use crate::symbolize::sources::Resolved;
pub use check::check;
pub use error::{Error, HeaderDamage, SampleDamage};
pub use header::{open_checked, truncation};
use symbols::SymbolTable;
pub use unwind::UnwindTally;

/// Where symbols come from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Options {
    /// Where each DSO's symbol files are looked for: the capture's
    /// `symfs/`, this host's debug directories and files, all taken by
    /// build id ([`crate::symbolize::sources`]).
    pub sources: crate::symbolize::sources::Search,
    /// A kernel symbol table (kallsyms format): the capture's snapshot,
    /// or `/proc/kallsyms` where that is right. `None` leaves kernel
    /// frames unnamed (`[unknown]`), as perf does under `--symfs`.
    pub kallsyms: Option<PathBuf>,
    /// Print inline frames where `perf script --inline` prints them
    /// ([`inline`]).
    pub inline: bool,
    /// The capture directory whose `jit/` snapshot names JIT code
    /// ([`crate::symbolize::jit`]); `None`, or a capture without `jit/`, leaves
    /// anonymous executable memory `[unknown] (//anon)` as before.
    pub jit: Option<PathBuf>,
}

/// Which symbolizer `process` and `reprocess` run (`--symbolizer`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Choice {
    /// Native for every shard [`check`] accepts, `perf script` for the
    /// rest.
    #[default]
    Auto,
    /// Native; a shard it cannot read still falls back to `perf script`,
    /// with a warning.
    Native,
    /// `perf script` for every shard.
    Perf,
}

impl std::str::FromStr for Choice {
    type Err = Error;

    fn from_str(s: &str) -> Result<Choice, Error> {
        match s {
            "auto" => Ok(Choice::Auto),
            "native" => Ok(Choice::Native),
            "perf" => Ok(Choice::Perf),
            _ => Err(Error::UnknownChoice(s.to_string())),
        }
    }
}

impl Choice {
    /// The word used on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Choice::Auto => "auto",
            Choice::Native => "native",
            Choice::Perf => "perf",
        }
    }
}

/// The kernel symbol table native symbolization uses for a capture whose
/// symbol files are under `symfs`: the capture's snapshot (`kallsyms` next
/// to `symfs/`) when there is one; with no symfs at all, the live
/// `/proc/kallsyms`, which is what `perf script` without `--symfs` reads.
pub fn kallsyms_for(symfs: Option<&Path>) -> Option<PathBuf> {
    match symfs {
        Some(s) => s
            .parent()
            .map(|d| d.join("kallsyms"))
            .filter(|p| p.is_file()),
        None => Some(PathBuf::from("/proc/kallsyms")).filter(|p| p.is_file()),
    }
}

/// The time of the first and last sample, for cutting a shard into time
/// slices: from the file's header (perf's `HEADER_SAMPLE_TIME`) when it has
/// it, else from a pass over the records that reads only sample times.
pub fn time_range(data: &Path) -> Result<(u64, u64), Error> {
    let (_file, map) = open_and_map(data, None)?;
    header::check(&map)?;
    let PerfFileReader {
        mut perf_file,
        mut record_iter,
    } = PerfFileReader::parse_file(crate::sys::input::MappedReader::new(&map))
        .map_err(Error::Header)?;
    if let Ok(Some(t)) = perf_file.sample_time_range() {
        if t.last_sample_time >= t.first_sample_time && t.last_sample_time > 0 {
            return Ok((t.first_sample_time, t.last_sample_time));
        }
    }
    let mut range: Option<(u64, u64)> = None;
    while let Some(rec) = record_iter
        .next_record(&mut perf_file)
        .map_err(Error::Record)?
    {
        let PerfFileRecord::EventRecord { record, .. } = rec else {
            continue;
        };
        if record.record_type != RecordType::SAMPLE {
            continue;
        }
        if let Some(t) = record.timestamp() {
            range = Some(range.map_or((t, t), |(a, b)| (a.min(t), b.max(t))));
        }
    }
    range.ok_or(Error::NoTimedSamples)
}

/// Opens and maps `data`; `named`: the path the errors name, if any.
fn open_and_map(
    data: &Path,
    named: Option<&Path>,
) -> Result<(File, crate::sys::input::Mapping), Error> {
    let path = || named.map(Path::to_path_buf);
    let file = File::open(data).map_err(|source| Error::Open {
        path: path(),
        source,
    })?;
    // SAFETY: `data` is a perf.data shard of a finished capture, which
    // jobprof never writes but the capture's owner may truncate or rewrite
    // at any time: a truncation is survived (the SIGBUS guard's zero pages;
    // a run then fails with `Error::ShrankUnderMap`), and the records are parsed
    // as untrusted input (bounds-checked), never relied on for memory
    // safety.
    let map =
        unsafe { crate::sys::input::Mapping::of_shrinkable(&file, data) }.map_err(|source| {
            Error::Map {
                path: path(),
                source,
            }
        })?;
    Ok((file, map))
}

/// How one native run ended.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// Bytes of text produced.
    pub bytes: u64,
    /// Samples printed.
    pub samples: u64,
    /// Wall time.
    pub elapsed: Duration,
    /// How the unwinds of the samples with stack copies ended.
    pub unwound: UnwindTally,
    /// Whether the batches carried the switch and task records.
    pub off_cpu: OffCpuRecords,
    /// The first and last sample's time, when the file's header has them
    /// (`HEADER_SAMPLE_TIME`).
    pub sample_times: Option<(u64, u64)>,
}

/// Whether a run handed on the switch and task records of its shard
/// ([`crate::symbolize::sample::Batch::tasks`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OffCpuRecords {
    /// The shard was recorded without `--off-cpu` (no
    /// `sched:sched_switch` event).
    NotRecorded,
    /// Every batch carries them.
    Handed,
    /// The shard has them but they were not read: why.
    Refused(String),
}

/// The largest kernel symbol table read (a kallsyms snapshot is about
/// 10 MB; one past this names no kernel frame).
const MAX_KALLSYMS: u64 = 256 << 20;
/// Text is handed on in blocks of about this size (the size of the blocks
/// `process` folds).
const FLUSH: usize = 4 << 20;
/// Blocks kept for reuse ([`Symbolizer::recycle`]).
const SPARE_BLOCKS: usize = 8;

/// A DSO by path and build id.
pub type DsoKey = (String, Vec<u8>);

/// One capture's symbolizer, shared by its shards and slices; what it
/// reads from symbol files comes from a [`store::Store`] it may share with
/// other captures.
#[derive(Debug)]
pub struct Symbolizer {
    opts: Options,
    kernel: OnceLock<Arc<SymbolTable>>,
    jit: OnceLock<crate::symbolize::jit::JitMaps>,
    /// Each DSO's entry in the store, looked up once per capture.
    dsos: once_map::OnceMap<DsoKey, Arc<store::Entry>>,
    store: Arc<store::Store>,
    /// Each shard's inline naming order, by its path ([`order`]); the
    /// frames [`Symbolizer::user_frame`] names have one of their own.
    orders: Mutex<std::collections::HashMap<PathBuf, Arc<order::ShardOrder>>>,
    /// Text buffers handed back by the consumer ([`Symbolizer::recycle`]):
    /// reusing them spares the page faults of a fresh 4 MiB per block.
    spare: Mutex<Vec<Vec<u8>>>,
}

impl Symbolizer {
    /// A symbolizer reading symbols as `opts` says, with a store of its
    /// own.
    pub fn new(opts: Options) -> Symbolizer {
        Symbolizer::with_store(opts, Arc::default())
    }

    /// A symbolizer reading symbols as `opts` says through `store`
    /// (shared with the other captures of a run).
    pub fn with_store(opts: Options, store: Arc<store::Store>) -> Symbolizer {
        Symbolizer {
            opts,
            kernel: OnceLock::new(),
            jit: OnceLock::new(),
            dsos: once_map::OnceMap::default(),
            store,
            orders: Mutex::default(),
            spare: Mutex::new(Vec::new()),
        }
    }

    /// The inline naming order of the shard at `data` (the same for each
    /// of its time slices).
    fn order(&self, data: &Path) -> Arc<order::ShardOrder> {
        let mut orders = self.orders.lock().unwrap_or_else(|e| e.into_inner());
        orders.entry(data.to_path_buf()).or_default().clone()
    }

    /// The store this symbolizer reads through.
    pub fn store(&self) -> &Arc<store::Store> {
        &self.store
    }

    fn kernel(&self) -> &SymbolTable {
        self.kernel.get_or_init(|| match &self.opts.kallsyms {
            // The snapshot beside symfs/ is never read through a link;
            // a FIFO or device is refused without blocking.
            Some(p) => {
                use std::io::Read;
                let links = match p.starts_with("/proc") {
                    true => crate::sys::input::Links::Follow,
                    false => crate::sys::input::Links::Refuse,
                };
                let Ok(f) = crate::sys::input::open_regular(p, links) else {
                    return Arc::default();
                };
                let read = |f: std::fs::File| {
                    let mut text = Vec::new();
                    let n = f.take(MAX_KALLSYMS).read_to_end(&mut text).ok()?;
                    ((n as u64) < MAX_KALLSYMS).then_some(text)
                };
                // A snapshot file is read once per run; /proc/kallsyms
                // (no size) each time.
                let id = f.metadata().ok().filter(|m| m.len() > 0);
                let table = match id {
                    Some(m) => self.store.kernel_file(store::file_id(&m), || read(f)),
                    None => read(f).map(|text| self.store.kernel(text)),
                };
                table.unwrap_or_default()
            }
            None => Arc::default(),
        })
    }

    /// The capture's JIT snapshot (empty without one).
    fn jit(&self) -> &crate::symbolize::jit::JitMaps {
        self.jit.get_or_init(|| match &self.opts.jit {
            Some(dir) => crate::symbolize::jit::JitMaps::load(dir),
            None => crate::symbolize::jit::JitMaps::default(),
        })
    }

    /// The files that name the DSO recorded at `path` with `build_id`
    /// (possibly empty), resolved by the first capture of the run that
    /// asks ([`store::Store::resolved`]).
    pub fn resolved(&self, path: &str, build_id: &[u8]) -> Arc<Resolved> {
        self.store.resolved(path, build_id, &self.opts.sources)
    }

    /// The store's entry of the DSO recorded at `path` with `build_id`,
    /// looked up once per capture.
    fn dso(&self, path: &str, build_id: &[u8]) -> Arc<store::Entry> {
        self.dsos
            .get_or_load((path.to_string(), build_id.to_vec()), || {
                self.store.dso(path, &self.resolved(path, build_id))
            })
    }

    /// The unwind tables of the DSO recorded at `path` with `build_id`.
    fn unwind_tables(&self, path: &str, build_id: &[u8]) -> Option<Arc<unwind::DsoUnwind>> {
        self.dso(path, build_id).unwind().cloned()
    }

    /// The symbol files that shrank while this capture's DSOs were read
    /// from them (truncated by another process): what they gave was
    /// thrown away, so those DSOs' frames are unnamed (or not unwound).
    pub fn shrunk_files(&self) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = self.dsos.loaded().iter().flat_map(|e| e.shrunk()).collect();
        v.sort();
        v.dedup();
        v
    }

    /// Takes back a block [`Symbolizer::run`] handed out, once its text is
    /// used, to fill it again (a few are kept; others are dropped).
    pub fn recycle(&self, mut block: Vec<u8>) {
        if block.capacity() < FLUSH {
            return;
        }
        block.clear();
        let mut spare = self.spare.lock().unwrap_or_else(|e| e.into_inner());
        if spare.len() < SPARE_BLOCKS {
            spare.push(block);
        }
    }

    fn block(&self) -> Vec<u8> {
        let mut spare = self.spare.lock().unwrap_or_else(|e| e.into_inner());
        spare
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(FLUSH + (64 << 10)))
    }

    /// The lines `perf script` prints for file offset `offset` of the DSO
    /// mapped from `path` (with `build_id`, possibly empty), with inline
    /// frames expanded when `expand` (as for an unwound call chain under
    /// `--inline`).
    pub fn user_frame(&self, path: &str, build_id: &[u8], offset: u64, expand: bool) -> Vec<u8> {
        let mut line = Vec::new();
        let entry = self.dso(path, build_id);
        let lines = match user_frame_lines(&entry, path, offset, expand) {
            order::Naming::Lines(l) => l,
            order::Naming::Ordered(o) => self.order(Path::new("")).lines(&o),
        };
        let frame = Frame {
            address: offset,
            lines,
            function: None,
        };
        frame.write_text(&mut line);
        line
    }

    /// Reads the samples of `data` (those in `slice`, when given), handing
    /// them to `consume` in [`Batch`]es, in order: the samples, the frames
    /// they meet first, and their text as `perf script` would print it
    /// (owned, so that it can be passed on without a copy; give it back
    /// with [`Self::recycle`]), and in a shard recorded with `--off-cpu`
    /// its switch and task records ([`Batch::tasks`]; [`Outcome::off_cpu`]
    /// says whether they were read).
    pub fn run(
        &self,
        data: &Path,
        slice: Option<&TimeSlice>,
        consume: impl FnMut(Batch) -> io::Result<()>,
    ) -> Result<Outcome, Error> {
        run::replay(self, data, slice, consume)
    }
}

/// The line (or, with `expand`, the inline frames and the line) `perf
/// script` prints for file offset `addr` of the DSO `entry` holds, named
/// `dso`: kept in the entry, so that every capture sharing it demangles
/// and resolves each address once; or, where the inline names depend on
/// what was asked before, what naming them takes in the shard's order
/// ([`order`]), never kept there.
fn user_frame_lines(
    entry: &Arc<store::Entry>,
    dso: &str,
    addr: u64,
    expand: bool,
) -> order::Naming {
    let mut ordered = None;
    let lines = entry.line(addr, expand, || {
        name_user_frame(entry, dso, addr, expand).map_err(|o| ordered = Some(o))
    });
    match (lines, ordered) {
        (Some(l), _) => order::Naming::Lines(l),
        (None, Some(o)) => order::Naming::Ordered(o),
        (None, None) => order::Naming::Lines(Arc::new([])),
    }
}

/// [`user_frame_lines`]' naming: the lines, or what naming them in order
/// takes.
fn name_user_frame(
    entry: &Arc<store::Entry>,
    dso: &str,
    addr: u64,
    expand: bool,
) -> Result<Vec<Line>, Box<order::Ordered>> {
    let syms = entry.symbols();
    let vaddr = syms.to_vaddr(addr);
    let Some(h) = syms.table.find(vaddr) else {
        return Ok(vec![Line::new("[unknown]", dso)]);
    };
    let base = demangle::demangle(h.name);
    if expand {
        if let Some(d) = entry.debug() {
            let names = match d.lookup(vaddr, h.name) {
                inline::Lookup::Names(names) => names,
                inline::Lookup::Ordered(records) => {
                    return Err(Box::new(order::Ordered {
                        key: (Arc::as_ptr(entry) as usize, addr),
                        records,
                        symbol: h.name.to_string(),
                        base: base.into_owned(),
                        offset: h.offset,
                        dso: dso.to_string(),
                    }))
                }
            };
            let lines = inline::frame_lines(&names, &base, h.offset, dso);
            if !lines.is_empty() {
                return Ok(lines);
            }
        }
        // No line for the address: perf still prints addr2line's function,
        // binutils' pick of the symbols starting there; it asks addr2line
        // nothing about `[vdso]` or a `/tmp/perf-PID.map` (`dso__name`).
        let asked = !dso.starts_with('[') && !dso.starts_with("/tmp/perf-");
        if let Some(name) = syms.table.bfd_name(vaddr).filter(|_| asked) {
            return Ok(inline::frame_lines(
                &[name.to_string()],
                &base,
                h.offset,
                dso,
            ));
        }
    }
    Ok(vec![Line::new(format!("{base}+{:#x}", h.offset), dso)])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn choice_parses_the_three_words() {
        for c in [Choice::Auto, Choice::Native, Choice::Perf] {
            assert_eq!(c.as_str().parse::<Choice>().ok(), Some(c));
        }
        assert!("fast"
            .parse::<Choice>()
            .unwrap_err()
            .to_string()
            .contains("native, perf or auto"));
    }

    #[test]
    fn kallsyms_snapshot_beside_symfs() {
        let dir = tempfile::tempdir().unwrap();
        let symfs = dir.path().join("symfs");
        std::fs::create_dir(&symfs).unwrap();
        assert_eq!(kallsyms_for(Some(&symfs)), None);
        std::fs::write(dir.path().join("kallsyms"), "").unwrap();
        assert_eq!(
            kallsyms_for(Some(&symfs)),
            Some(dir.path().join("kallsyms"))
        );
    }
}
