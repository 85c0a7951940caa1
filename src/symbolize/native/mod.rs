//! The native symbolizer: reads a `perf.data` shard directly and prints the
//! same text `perf script` prints for it (default fields, with or without
//! `--inline`: [`inline`]), without running `perf`.
//!
//! [`check`] decides, from the file's header and a walk over its record
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
//! [`Symbolizer::run`] then replays the records in time order, read in
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
pub mod elf;
mod error;
mod header;
use header::u64_at;
pub mod inline;
mod offcpu;
pub mod once_map;
pub mod records;
pub mod store;
pub mod symbols;
pub mod threads;
pub mod tracepoint;
pub mod unwind;

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use linux_perf_data::linux_perf_event_reader::{
    CpuMode, EventRecord, Mmap2FileId, RecordType, SampleFormat,
};
use linux_perf_data::{PerfFileReader, PerfFileRecord};

use crate::symbolize::perf::TimeSlice;
use crate::symbolize::sources::Resolved;
pub use error::{Error, HeaderDamage, SampleDamage};
pub use header::open_checked;
use symbols::SymbolTable;
use threads::{Machine, Map};
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
    // SAFETY: `data` is a perf.data shard of a finished capture: perf has
    // closed it and jobprof never writes it. A truncation anyway ends the
    // process with a message naming the file (the SIGBUS guard).
    let map =
        unsafe { crate::sys::input::Mapping::of(&file, data) }.map_err(|source| Error::Map {
            path: path(),
            source,
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
}

const PERF_CONTEXT_MAX: u64 = -4095i64 as u64;
const PERF_CONTEXT_HV: u64 = -32i64 as u64;
const PERF_CONTEXT_KERNEL: u64 = -128i64 as u64;
const PERF_CONTEXT_USER: u64 = -512i64 as u64;
/// perf script resolves at most this many call-chain entries.
const MAX_STACK: usize = 127;
/// The largest kernel symbol table read (a kallsyms snapshot is about
/// 10 MB; one past this names no kernel frame).
const MAX_KALLSYMS: u64 = 256 << 20;
/// Text is handed on in blocks of about this size (the size of the blocks
/// `process` folds).
const FLUSH: usize = 4 << 20;
/// Blocks kept for reuse ([`Symbolizer::recycle`]).
const SPARE_BLOCKS: usize = 8;

/// Record types whose effect on `perf script`'s default output is fully
/// reproduced (most print nothing).
fn handled(ty: u32) -> bool {
    matches!(
        ty,
        1..=10 // MMAP LOST COMM EXIT THROTTLE UNTHROTTLE FORK READ SAMPLE MMAP2
        | 13..=16 // LOST_SAMPLES SWITCH SWITCH_CPU_WIDE NAMESPACES
        // KSYMBOL: kernel symbols of BPF programs and trampolines (systemd
        // loads some on every boot); samples in them print as `[unknown]`
        // where perf names the program (docs/native-symbolizer.md).
        | 17 | 18 | 19 // KSYMBOL BPF_EVENT CGROUP
        | 64..=69 // HEADER_ATTR EVENT_TYPE TRACING_DATA BUILD_ID FINISHED_ROUND ID_INDEX
        | 72..=80 // AUXTRACE_ERROR THREAD_MAP CPU_MAP STAT_CONFIG STAT STAT_ROUND EVENT_UPDATE TIME_CONV HEADER_FEATURE
        | 82 // FINISHED_INIT
    )
}

/// The data section of a perf.data file's bytes: its offset and its bytes
/// (`None`: a header too short or a section past the end of the file).
fn data_section(b: &[u8]) -> Option<(usize, &[u8])> {
    header::section(b, 40).map(|r| (r.start, &b[r]))
}

/// Whether the native symbolizer can print `data` exactly as perf script
/// would; `Err` says why not (for the fallback warning).
pub fn check(data: &Path) -> Result<(), Error> {
    let (file, map) = open_and_map(data, None)?;
    let b: &[u8] = &map;
    if b.get(..8) != Some(b"PERFILE2") {
        return Err(Error::NotPerfFile);
    }
    header::check(b)?;
    let bad = || Error::TruncatedHeader;
    let attr_size = u64_at(b, 16).ok_or_else(bad)? as usize;
    let (attrs_off, attrs_len) = (
        u64_at(b, 24).ok_or_else(bad)?,
        u64_at(b, 32).ok_or_else(bad)?,
    );
    let (data_off, data_len) = (
        u64_at(b, 40).ok_or_else(bad)?,
        u64_at(b, 48).ok_or_else(bad)?,
    );
    if attr_size < 48 || attrs_len == 0 {
        return Err(bad());
    }
    // (sample format, sample_regs_user) of the events with user registers.
    let mut with_regs = Vec::new();
    let mut at = attrs_off as usize;
    let attrs_end = (attrs_off + attrs_len) as usize;
    while at + attr_size <= attrs_end {
        let sample_type = u64_at(b, at + 24).ok_or_else(bad)?;
        let f = SampleFormat::from_bits_truncate(sample_type);
        let never_samples = is_dummy(b, at).ok_or_else(bad)?;
        if f.intersects(SampleFormat::REGS_USER | SampleFormat::STACK_USER) && !never_samples {
            // perf_event_attr.sample_regs_user, after the first 80 bytes.
            let regs = (attr_size >= 96).then(|| u64_at(b, at + 80)).flatten();
            with_regs.push((f, regs));
        }
        if !f.contains(SampleFormat::CALLCHAIN) {
            return Err(Error::NoCallChains);
        }
        at += attr_size;
    }
    if !with_regs.is_empty() {
        let arch = arch::facts(data).and_then(|f| f.arch);
        for &(f, regs) in &with_regs {
            check_regs(arch.as_deref(), f, regs)?;
        }
    }
    if data_len == 0 && b.len() as u64 > data_off {
        return Err(Error::EmptyData);
    }
    let end = data_off.saturating_add(data_len);
    if end > b.len() as u64 {
        return Err(Error::DataPastEnd { end, len: b.len() });
    }
    check_records(&file, data_off, end)
}

/// Walks the record headers of the data section `start..end` with small
/// positioned reads: a walk over the mapping would fault in (and map, and
/// unmap) every page of a multi-GB dwarf capture to read 8 bytes of each
/// 16 KB sample.
fn check_records(file: &File, start: u64, end: u64) -> Result<(), Error> {
    use std::os::unix::fs::FileExt;
    const BLOCK: usize = 4096;
    let mut buf = vec![0u8; BLOCK];
    // `buf[..filled]` holds the file's bytes from `base` on.
    let (mut base, mut filled) = (start, 0usize);
    let mut at = start;
    while at + 8 <= end {
        if at + 8 > base + filled as u64 {
            // Past a big record the next is likely big too (dwarf samples):
            // read its header alone rather than 4 KiB of stack copy.
            let block = if at - base > BLOCK as u64 { 64 } else { BLOCK };
            filled = block.min((end - at) as usize);
            base = at;
            file.read_exact_at(&mut buf[..filled], at)
                .map_err(|source| match source.kind() {
                    io::ErrorKind::UnexpectedEof => Error::Shrank { end },
                    _ => Error::ReadAt { at, source },
                })?;
        }
        let i = (at - base) as usize;
        let ty = u32::from_le_bytes(buf[i..i + 4].try_into().expect("4 bytes"));
        let size = u16::from_le_bytes(buf[i + 6..i + 8].try_into().expect("2 bytes"));
        if size < 8 {
            return Err(Error::DamagedRecordHeader(at));
        }
        if !handled(ty) {
            return Err(Error::Unhandled(ty));
        }
        at += u64::from(size);
    }
    Ok(())
}

/// Whether the attribute at `at` is perf's tracking event (`dummy:HG`, the
/// software event PERF_COUNT_SW_DUMMY that `--delay` and `--control` add):
/// it carries the side-band records and takes no samples, so its register
/// mask does not matter. perf 6.1 on aarch64 gives it only SP and PC
/// whatever `--user-regs` says, which made every jobprof-record dwarf
/// capture fall back to `perf script`.
fn is_dummy(b: &[u8], at: usize) -> Option<bool> {
    const PERF_TYPE_SOFTWARE: u64 = 1;
    const PERF_COUNT_SW_DUMMY: u64 = 9;
    // perf_event_attr: type (u32) and size (u32), then config (u64).
    let ty = u64_at(b, at)? & 0xffff_ffff;
    Some(ty == PERF_TYPE_SOFTWARE && u64_at(b, at + 8)? == PERF_COUNT_SW_DUMMY)
}

/// Whether the user registers (and stack copies) of an event with sample
/// format `f` and register mask `regs`, recorded on `arch`, can be
/// unwound: x86-64 and aarch64 dwarf samples with the registers unwinding
/// needs, and aarch64 frame-pointer samples with the link register perf
/// records for its leaf rule ([`unwind`]).
fn check_regs(arch: Option<&str>, f: SampleFormat, regs: Option<u64>) -> Result<(), Error> {
    let dwarf = f.contains(SampleFormat::REGS_USER | SampleFormat::STACK_USER);
    let has = |need: u64| regs.is_some_and(|r| r & need == need);
    match arch.map(arch::normalized) {
        Some("x86_64") if dwarf && has(unwind::NEEDED_REGS) => Ok(()),
        Some("x86_64") if dwarf => Err(Error::RegsLacking("IP, SP or BP")),
        Some("aarch64") if dwarf && has(unwind::A64_NEEDED_REGS) => Ok(()),
        Some("aarch64") if dwarf => Err(Error::RegsLacking("PC, SP, x29 or LR")),
        Some("aarch64") if !f.contains(SampleFormat::STACK_USER) => Ok(()),
        _ if !dwarf => Err(Error::RegsOrStack),
        Some(a) => Err(Error::DwarfArch(a.to_string())),
        None => Err(Error::NoArch),
    }
}

/// A DSO by path and build id.
pub type DsoKey = (String, Vec<u8>);

/// One capture's symbolizer, shared by its shards and slices; what it
/// reads from symbol files comes from a [`store::Store`] it may share with
/// other captures.
#[derive(Debug)]
pub struct Symbolizer {
    opts: Options,
    /// Which files name each DSO, resolved once.
    resolved: once_map::OnceMap<DsoKey, Arc<Resolved>>,
    kernel: OnceLock<Arc<SymbolTable>>,
    jit: OnceLock<crate::symbolize::jit::JitMaps>,
    /// Each DSO's entry in the store, looked up once per capture.
    dsos: once_map::OnceMap<DsoKey, Arc<store::Entry>>,
    store: Arc<store::Store>,
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
            resolved: once_map::OnceMap::default(),
            kernel: OnceLock::new(),
            jit: OnceLock::new(),
            dsos: once_map::OnceMap::default(),
            store,
            spare: Mutex::new(Vec::new()),
        }
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
                let mut text = Vec::new();
                let read = crate::sys::input::open_regular(p, links).is_ok_and(|f| {
                    f.take(MAX_KALLSYMS)
                        .read_to_end(&mut text)
                        .is_ok_and(|n| (n as u64) < MAX_KALLSYMS)
                });
                match read {
                    true => self.store.kernel(text),
                    false => Arc::default(),
                }
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
    /// (possibly empty), resolved by the first run that asks.
    pub fn resolved(&self, path: &str, build_id: &[u8]) -> Arc<Resolved> {
        self.resolved
            .get_or_load((path.to_string(), build_id.to_vec()), || {
                Arc::new(crate::symbolize::sources::resolve(
                    path,
                    build_id,
                    &self.opts.sources,
                ))
            })
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
        write_user_frame(&mut line, &entry, path, offset, expand);
        line
    }

    /// Prints the samples of `data` (those in `slice`, when given) as
    /// `perf script` would, handing the text to `consume` in blocks (owned,
    /// so they can be passed on without a copy) that end at sample
    /// boundaries.
    pub fn run(
        &self,
        data: &Path,
        slice: Option<&TimeSlice>,
        consume: impl FnMut(Vec<u8>) -> io::Result<()>,
    ) -> Result<Outcome, Error> {
        self.run_records(data, slice, false, consume)
    }

    /// Prints all of `data` as `perf script --ns --show-switch-events
    /// --show-task-events` would (the off-CPU pass, [`offcpu`]): the
    /// samples with `sched:sched_switch`'s fields decoded
    /// ([`tracepoint`]), and the `SWITCH`, `COMM`, `FORK` and `EXIT`
    /// records. Refuses a file whose `sched_switch` format it cannot read.
    pub fn run_off_cpu(
        &self,
        data: &Path,
        consume: impl FnMut(Vec<u8>) -> io::Result<()>,
    ) -> Result<Outcome, Error> {
        self.run_records(data, None, true, consume)
    }

    fn run_records(
        &self,
        data: &Path,
        slice: Option<&TimeSlice>,
        off_cpu: bool,
        mut consume: impl FnMut(Vec<u8>) -> io::Result<()>,
    ) -> Result<Outcome, Error> {
        let start = Instant::now();
        // Records are read in place in a mapping of the page cache
        // ([`records`]): no copy at all.
        let (_file, map) = open_and_map(data, Some(data))?;
        header::check(&map)?;
        let PerfFileReader { perf_file, .. } =
            PerfFileReader::parse_file(io::Cursor::new(&map[..])).map_err(Error::Read)?;
        let section = data_section(&map).ok_or(Error::TruncatedHeader)?;
        let mut records = records::OrderedRecords::new(section.1, perf_file.event_attributes())?;
        let events: Vec<String> = perf_file
            .event_attributes()
            .iter()
            .enumerate()
            .map(|(i, a)| a.name().map_or_else(|| format!("event{i}"), str::to_string))
            .collect();
        let build_ids: HashMap<Vec<u8>, Vec<u8>> = perf_file
            .build_ids()
            .map(|m| m.into_values().map(|d| (d.path, d.build_id)).collect())
            .unwrap_or_default();
        let aarch64 = perf_file.arch().ok().flatten().map(arch::normalized) == Some("aarch64");
        let mut run = Run::new(self, build_ids, aarch64);
        if off_cpu {
            run.off_cpu = Some(offcpu::OffCpu::of(&perf_file)?);
        }
        let (lo, hi) = (
            slice.and_then(|s| s.start_ns).unwrap_or(0),
            slice.and_then(|s| s.end_ns).unwrap_or(u64::MAX),
        );
        let mut released = 0;
        while let Some((attr_index, record)) = records.next_record()? {
            let low = section.0 + records.low_water();
            if low >= released + crate::sys::input::RELEASE_STEP {
                map.release(released, low);
                released = low;
            }
            let ty = record.record_type;
            records::check_sample_layout(&record)?;
            let parsed = record
                .parse()
                .map_err(|source| Error::DamagedRecord { ty, source })?;
            let EventRecord::Sample(s) = parsed else {
                run.side_band(&parsed);
                if run.off_cpu.is_some() {
                    run.side_band_line(&parsed, &record, attr_index);
                }
                continue;
            };
            let t = s.timestamp.unwrap_or(0);
            if t < lo || t > hi {
                continue;
            }
            let attr = &perf_file.event_attributes()[attr_index];
            run.sample(&s, attr.attributes().sample_format, &events[attr_index]);
            if run.out.len() >= FLUSH {
                run.flush(&mut consume)?;
            }
        }
        run.flush(&mut consume)?;
        Ok(Outcome {
            bytes: run.bytes,
            samples: run.samples,
            elapsed: start.elapsed(),
            unwound: run.unwound,
        })
    }
}

/// Writes the line (or, with `expand`, the inline frames and the line)
/// `perf script` prints for file offset `addr` of the DSO `entry` holds,
/// named `dso`: kept in the entry, so that every capture sharing it
/// demangles and resolves each address once.
fn write_user_frame(line: &mut Vec<u8>, entry: &store::Entry, dso: &str, addr: u64, expand: bool) {
    let text = entry.line(addr, expand, || {
        let mut line = Vec::with_capacity(96);
        format_user_frame(&mut line, entry, dso, addr, expand);
        line
    });
    line.extend_from_slice(&text);
}

fn format_user_frame(line: &mut Vec<u8>, entry: &store::Entry, dso: &str, addr: u64, expand: bool) {
    let syms = entry.symbols();
    let vaddr = syms.to_vaddr(addr);
    let Some(h) = syms.table.find(vaddr) else {
        let _ = writeln!(line, "\t{addr:16x} [unknown] ({dso})");
        return;
    };
    let base = symbols::demangle(h.name);
    if expand {
        if let Some(d) = entry.debug() {
            if inline::write_frame(line, addr, &d.chain(vaddr, h.name), &base, h.offset, dso) {
                return;
            }
        }
    }
    let _ = writeln!(line, "\t{addr:16x} {base}+{:#x} ({dso})", h.offset);
}

/// The frame perf's arm64 rule puts after the leaf at `pc` of a
/// frame-pointer chain: LR - 1 where one libunwind step from PC, LR and
/// SP = 0 takes the return address from LR ([`unwind`]'s `leaf`); `cache`
/// keeps the answer per (DSO, address).
fn leaf_caller(
    sym: &Symbolizer,
    dsos: &[Dso],
    cache: &mut rustc_hash::FxHashMap<(u32, u64), bool>,
    maps: Option<&threads::Maps>,
    pc: u64,
    lr: u64,
) -> Option<u64> {
    let m = maps?.find(pc)?;
    let key = (m.dso, m.rel(pc));
    let in_lr = *cache.entry(key).or_insert_with(|| {
        let Some(d) = dsos.get(m.dso as usize) else {
            return false;
        };
        // No unwind tables: libunwind finds no FDE and falls back to LR.
        let Some(t) = d
            .path
            .as_deref()
            .and_then(|p| sym.unwind_tables(p, &d.build_id))
        else {
            return true;
        };
        t.base_avma(m.start, m.pgoff, m.end - m.start)
            .is_some_and(|base| t.return_address_in_lr(pc.wrapping_sub(base)))
    });
    (in_lr && lr != 0).then(|| lr - 1)
}

/// A DSO as one run knows it.
struct Dso {
    /// The name perf prints in parentheses.
    name: String,
    /// The path to look up (`None`: nothing to read, e.g. `[vdso]`).
    path: Option<String>,
    build_id: Vec<u8>,
    symbols: Option<Arc<store::Entry>>,
    /// JIT code: its process's functions from the snapshot (addresses are
    /// absolute, as in a perf map).
    jit: Option<Option<Arc<crate::symbolize::jit::PerfMap>>>,
}

const KERNEL_DSO: u32 = u32::MAX;
const NO_DSO: u32 = u32::MAX - 1;
/// Frame lines cached per run before the cache starts over (bounds memory
/// on captures with millions of distinct addresses).
const FRAME_CACHE: usize = 1 << 20;
/// Bytes of whole-stack text cached per run before that cache starts over.
const STACK_CACHE_BYTES: usize = 64 << 20;

struct Run<'a> {
    sym: &'a Symbolizer,
    machine: Machine,
    dsos: Vec<Dso>,
    dso_ids: HashMap<Vec<u8>, u32>,
    build_ids: HashMap<Vec<u8>, Vec<u8>>,
    /// Finished frame lines by (DSO, address).
    frames: rustc_hash::FxHashMap<(u32, u64), Box<[u8]>>,
    /// The same with inline frames expanded.
    inline_frames: rustc_hash::FxHashMap<(u32, u64), Box<[u8]>>,
    /// Whether the current sample's user frames get inline frames: under
    /// `--inline`, for call chains unwound from stack copies only, as in
    /// perf 6.1 ([`inline`]).
    expand: bool,
    /// Per-sample call chain, resolved.
    scratch: Vec<(u32, u64)>,
    /// Dwarf unwinding of user stack copies.
    unwind: unwind::Unwinding,
    /// An aarch64 capture: frame-pointer chains get perf's LR rule.
    aarch64: bool,
    /// Per (DSO, address): whether perf's LR rule takes LR there.
    lr_rule: rustc_hash::FxHashMap<(u32, u64), bool>,
    /// Per-sample unwound user addresses.
    user: Vec<u64>,
    /// The core kernel's map as perf recorded it (start, end, and `pgoff`:
    /// the sampled boot's `_text`).
    kernel_text: Option<(u64, u64, u64)>,
    /// Frame text of whole frame-pointer stacks by (pid, CPU mode, call
    /// chain); emptied when maps change.
    stacks: rustc_hash::FxHashMap<Box<[u64]>, Box<[u8]>>,
    /// The current sample's key into `stacks`.
    stack_key: Vec<u64>,
    /// Bytes held by `stacks`, about.
    stack_bytes: usize,
    out: Vec<u8>,
    bytes: u64,
    samples: u64,
    /// An off-CPU run: what it prints besides the samples.
    off_cpu: Option<offcpu::OffCpu>,
    /// How the dwarf unwinds ended.
    unwound: UnwindTally,
}

impl<'a> Run<'a> {
    fn new(sym: &'a Symbolizer, build_ids: HashMap<Vec<u8>, Vec<u8>>, aarch64: bool) -> Run<'a> {
        Run {
            sym,
            machine: Machine::default(),
            kernel_text: None,
            dsos: Vec::new(),
            dso_ids: HashMap::new(),
            build_ids,
            frames: rustc_hash::FxHashMap::default(),
            inline_frames: rustc_hash::FxHashMap::default(),
            expand: false,
            stacks: rustc_hash::FxHashMap::default(),
            stack_key: Vec::new(),
            stack_bytes: 0,
            scratch: Vec::new(),
            unwind: unwind::Unwinding::new(aarch64),
            aarch64,
            lr_rule: rustc_hash::FxHashMap::default(),
            user: Vec::new(),
            out: sym.block(),
            bytes: 0,
            samples: 0,
            off_cpu: None,
            unwound: UnwindTally::default(),
        }
    }

    /// Takes in a record that is not a sample: what maps addresses and
    /// names threads (the others, `EXIT` among them, change nothing
    /// `perf script` prints).
    fn side_band(&mut self, record: &EventRecord<'_>) {
        match record {
            EventRecord::Comm(c) => {
                self.machine
                    .comm(c.tid, &String::from_utf8_lossy(&c.name.as_slice()));
            }
            EventRecord::Fork(f) => {
                self.machine.fork(f.pid, f.ppid, f.tid, f.ptid);
                if f.pid != f.ppid {
                    // A new process (a new thread shares its maps).
                    self.maps_changed();
                    self.unwind.maps_changed(f.pid);
                }
            }
            EventRecord::Mmap(m) => {
                let path = m.path.as_slice();
                let path = self.jit_name(m.pid, m.is_executable, &path);
                self.mmap(m.pid, m.address, m.length, m.page_offset, &path, None);
            }
            EventRecord::Mmap2(m) => {
                let path = m.path.as_slice();
                let id = match &m.file_id {
                    Mmap2FileId::BuildId(b) => Some(b.clone()),
                    Mmap2FileId::InodeAndVersion(_) => None,
                };
                let exec = m.protection & 4 != 0; // PROT_EXEC
                let path = self.jit_name(m.pid, exec, &path);
                self.mmap(m.pid, m.address, m.length, m.page_offset, &path, id);
            }
            _ => {}
        }
    }

    fn flush(&mut self, consume: &mut impl FnMut(Vec<u8>) -> io::Result<()>) -> Result<(), Error> {
        if self.out.is_empty() {
            return Ok(());
        }
        self.bytes += self.out.len() as u64;
        let block = std::mem::replace(&mut self.out, self.sym.block());
        consume(block).map_err(Error::Consume)
    }

    /// A map was added or a process copied its parent's: stacks printed
    /// before may read differently now.
    fn maps_changed(&mut self) {
        if !self.stacks.is_empty() {
            self.stacks.clear();
            self.stack_bytes = 0;
        }
    }

    /// The name perf gives an anonymous executable mapping when the
    /// capture has a JIT snapshot: `/tmp/perf-PID.map` (perf 6.1's
    /// `map__new`); other mappings keep theirs.
    fn jit_name<'p>(&self, pid: i32, exec: bool, path: &'p [u8]) -> std::borrow::Cow<'p, [u8]> {
        let anon = path == b"//anon"
            || path.starts_with(b"/dev/zero")
            || path.starts_with(b"/anon_hugepage");
        if exec && anon && pid > 0 && self.sym.jit().dir.is_some() {
            std::borrow::Cow::Owned(format!("/tmp/perf-{pid}.map").into_bytes())
        } else {
            std::borrow::Cow::Borrowed(path)
        }
    }

    fn dso_id(&mut self, path: &[u8], build_id: Option<Vec<u8>>) -> u32 {
        if let Some(&id) = self.dso_ids.get(path) {
            return id;
        }
        let name = String::from_utf8_lossy(path).into_owned();
        // `[vdso]`: the snapshot's copy `symfs/[vdso]`, where perf --symfs
        // looks for it too.
        let readable = (name.starts_with('/') && !name.starts_with("//")) || name == "[vdso]";
        let build_id = build_id
            .or_else(|| self.build_ids.get(path).cloned())
            .unwrap_or_default();
        let jit = crate::symbolize::jit::pid_in(&name, "/tmp/perf-", ".map")
            .map(|pid| self.sym.jit().of(pid).cloned());
        let id = self.dsos.len() as u32;
        self.dsos.push(Dso {
            path: (readable && jit.is_none()).then(|| name.clone()),
            name,
            build_id,
            symbols: None,
            jit,
        });
        self.dso_ids.insert(path.to_vec(), id);
        id
    }

    fn mmap(
        &mut self,
        pid: i32,
        start: u64,
        len: u64,
        pgoff: u64,
        path: &[u8],
        id: Option<Vec<u8>>,
    ) {
        self.maps_changed();
        let end = start.saturating_add(len);
        if pid == -1 {
            // Kernel and module maps: kallsyms names them all.
            if path.starts_with(b"[kernel.kallsyms]") {
                self.kernel_text = Some((start, end, pgoff));
            }
            self.machine.kernel.insert(Map {
                start,
                end,
                pgoff,
                dso: KERNEL_DSO,
            });
            return;
        }
        let dso = self.dso_id(path, id);
        // A perf map holds absolute addresses.
        let pgoff = if self.dsos[dso as usize].jit.is_some() {
            start
        } else {
            pgoff
        };
        // Anonymous memory (heap, stacks, malloc arenas: `--call-graph
        // dwarf` records data maps too) has no unwind tables; a sample whose
        // stack runs into it stops there whatever the unwinder holds.
        if self.dsos[dso as usize].path.is_some() {
            self.unwind.maps_changed(pid);
        }
        self.machine.mmap(
            pid,
            Map {
                start,
                end,
                pgoff,
                dso,
            },
        );
    }

    fn sample(
        &mut self,
        s: &linux_perf_data::linux_perf_event_reader::SampleRecord<'_>,
        has: SampleFormat,
        event: &str,
    ) {
        self.samples += 1;
        let pid = s.pid.unwrap_or(-1);
        self.write_header(s, has, event);
        self.expand = self.sym.opts.inline && has.contains(SampleFormat::STACK_USER);
        // A frame-pointer chain's text depends only on the process's maps
        // and the chain: most samples repeat one printed before.
        let cacheable = !has.contains(SampleFormat::STACK_USER);
        // perf's arm64 rule: the leaf's caller from the sampled LR.
        let lr = match (&s.user_regs, self.aarch64 && cacheable) {
            (Some(r), true) => r.get(unwind::A64_LR),
            _ => None,
        };
        if cacheable && self.cached_stack(pid, s, lr) {
            return;
        }
        let start = self.out.len();
        // Resolve the chain to (DSO, address) with the process's maps looked
        // up once, then print each frame from the cache.
        let mut resolved = std::mem::take(&mut self.scratch);
        resolved.clear();
        self.resolve_chain(s, pid, lr, &mut resolved);
        if let (Some(regs), Some((stack, size))) = (&s.user_regs, &s.user_stack) {
            if let Some(stop) = self.user_frames(pid, regs, &stack.as_slice(), *size, &mut resolved)
            {
                self.unwound.count(stop, s.period.unwrap_or(1));
            }
        }
        for &(dso, key) in &resolved {
            self.frame(dso, key);
        }
        self.scratch = resolved;
        if cacheable {
            self.keep_stack(start);
        }
        self.out.push(b'\n');
    }

    /// The sample's header line, as `perf script` prints it: comm, TID, CPU,
    /// time, period (each when recorded) and the event.
    fn write_header(
        &mut self,
        s: &linux_perf_data::linux_perf_event_reader::SampleRecord<'_>,
        has: SampleFormat,
        event: &str,
    ) {
        if let Some(o) = &self.off_cpu {
            o.write_header(&mut self.out, &self.machine, s, has, event);
            return;
        }
        let tid = s.tid.unwrap_or(-1);
        let comm = self.machine.comm_of(tid);
        let out = &mut self.out;
        let _ = write!(out, "{comm} {tid:5} ");
        if has.contains(SampleFormat::CPU) {
            let _ = write!(out, "[{:03}] ", s.cpu.unwrap_or(0));
        }
        if has.contains(SampleFormat::TIME) {
            let t = s.timestamp.unwrap_or(0);
            let _ = write!(
                out,
                "{:5}.{:06}: ",
                t / 1_000_000_000,
                t % 1_000_000_000 / 1000
            );
        }
        if has.contains(SampleFormat::PERIOD) {
            let _ = write!(out, "{:10} ", s.period.unwrap_or(0));
        }
        let _ = writeln!(out, "{event}: ");
    }

    /// The sample's call chain as (DSO, address) pairs in `resolved`, with
    /// perf's context markers followed and, on aarch64, the leaf's caller
    /// from `lr` put in where perf's rule puts it.
    fn resolve_chain(
        &mut self,
        s: &linux_perf_data::linux_perf_event_reader::SampleRecord<'_>,
        pid: i32,
        lr: Option<u64>,
        resolved: &mut Vec<(u32, u64)>,
    ) {
        let mut mode = s.cpu_mode;
        let mut n = 0;
        let maps = self.machine.maps_of(pid);
        if let Some(chain) = &s.callchain {
            for i in 0..chain.len() {
                if n >= MAX_STACK {
                    break;
                }
                let Some(ip) = chain.get(i) else { break };
                if ip >= PERF_CONTEXT_MAX {
                    mode = match ip {
                        PERF_CONTEXT_KERNEL => CpuMode::Kernel,
                        PERF_CONTEXT_USER => CpuMode::User,
                        PERF_CONTEXT_HV => CpuMode::Hypervisor,
                        _ => break,
                    };
                    continue;
                }
                n += 1;
                if let (Some(lr), CpuMode::User, true) = (lr, mode, i >= 2) {
                    if chain.get(i - 2) == Some(PERF_CONTEXT_USER) {
                        let pc = chain.get(i - 1).unwrap_or(0);
                        let (sym, dsos, cache) = (self.sym, &self.dsos, &mut self.lr_rule);
                        if let Some(c) =
                            leaf_caller(sym, dsos, cache, maps, pc, lr).filter(|&c| c != ip)
                        {
                            resolved.push(match maps.and_then(|m| m.find(c)) {
                                Some(m) => (m.dso, m.rel(c)),
                                None => (NO_DSO, c),
                            });
                        }
                    }
                }
                resolved.push(match mode {
                    CpuMode::Kernel if self.machine.kernel.find(ip).is_some() => (KERNEL_DSO, ip),
                    CpuMode::User => match maps.and_then(|m| m.find(ip)) {
                        Some(m) => (m.dso, m.rel(ip)),
                        None => (NO_DSO, ip),
                    },
                    _ => (NO_DSO, ip),
                });
            }
        }
    }

    /// Appends the user frames unwound from a dwarf sample's registers and
    /// stack copy (`size`: the valid part of `stack`; none when it is 0, as
    /// in perf), and says why the unwind ended (`None`: no copy, nothing
    /// unwound: a kernel thread).
    fn user_frames(
        &mut self,
        pid: i32,
        regs: &linux_perf_data::linux_perf_event_reader::Regs<'_>,
        stack: &[u8],
        size: u64,
        resolved: &mut Vec<(u32, u64)>,
    ) -> Option<unwind::Stop> {
        let stack = &stack[..stack.len().min(size as usize)];
        if stack.is_empty() {
            return None;
        }
        let Run {
            sym,
            machine,
            dsos,
            unwind,
            user,
            ..
        } = self;
        let maps = machine.maps_of(pid);
        let mut load = |id: u32| {
            let d = dsos.get(id as usize)?;
            sym.unwind_tables(d.path.as_deref()?, &d.build_id)
        };
        user.clear();
        let stop = unwind.user_frames(pid, maps, &mut load, regs, stack, user);
        resolved.extend(user.iter().map(|&ip| match maps.and_then(|m| m.find(ip)) {
            Some(m) => (m.dso, m.rel(ip)),
            None => (NO_DSO, ip),
        }));
        Some(stop)
    }

    /// Prints the frames of a stack printed before for the same process
    /// and call chain (its key left in `stack_key` either way).
    fn cached_stack(
        &mut self,
        pid: i32,
        s: &linux_perf_data::linux_perf_event_reader::SampleRecord<'_>,
        lr: Option<u64>,
    ) -> bool {
        let key = &mut self.stack_key;
        key.clear();
        key.push(pid as u64);
        key.push(s.cpu_mode as u64);
        // The frame perf adds from LR depends on it.
        key.extend(lr);
        if let Some(chain) = &s.callchain {
            key.extend((0..chain.len()).map_while(|i| chain.get(i)));
        }
        match self.stacks.get(key.as_slice()) {
            Some(text) => {
                self.out.extend_from_slice(text);
                self.out.push(b'\n');
                true
            }
            None => false,
        }
    }

    /// Remembers the frames printed since `start` under `stack_key`.
    fn keep_stack(&mut self, start: usize) {
        let text: Box<[u8]> = self.out[start..].into();
        self.stack_bytes += text.len() + 8 * self.stack_key.len();
        if self.stack_bytes > STACK_CACHE_BYTES {
            self.stacks.clear();
            self.stack_bytes = 0;
        }
        self.stacks.insert(self.stack_key.as_slice().into(), text);
    }

    fn frame(&mut self, dso: u32, key: u64) {
        let cache = if self.expand {
            &mut self.inline_frames
        } else {
            &mut self.frames
        };
        if let Some(line) = cache.get(&(dso, key)) {
            self.out.extend_from_slice(line);
            return;
        }
        let line = self.format_frame((dso != NO_DSO).then_some(dso), key);
        self.out.extend_from_slice(&line);
        let cache = if self.expand {
            &mut self.inline_frames
        } else {
            &mut self.frames
        };
        if cache.len() >= FRAME_CACHE {
            cache.clear();
        }
        cache.insert((dso, key), line);
    }

    fn format_frame(&mut self, dso: Option<u32>, addr: u64) -> Box<[u8]> {
        let mut line = Vec::with_capacity(96);
        if let Some(id) = dso.filter(|&d| d != KERNEL_DSO) {
            let d = &mut self.dsos[id as usize];
            if let Some(jit) = &d.jit {
                match jit.as_ref().and_then(|m| m.find(addr)) {
                    Some((name, off)) => {
                        let _ = writeln!(line, "\t{addr:16x} {name}+{off:#x} ({})", d.name);
                    }
                    None => {
                        let _ = writeln!(line, "\t{addr:16x} [unknown] ({})", d.name);
                    }
                }
                return line.into_boxed_slice();
            }
            let syms = d.symbols.get_or_insert_with(|| match &d.path {
                Some(p) => self.sym.dso(p, &d.build_id),
                None => store::Entry::empty(),
            });
            write_user_frame(&mut line, syms, &d.name, addr, self.expand);
            return line.into_boxed_slice();
        }
        let _ = write!(line, "\t{addr:16x} ");
        match dso {
            Some(KERNEL_DSO) => {
                let table = self.sym.kernel();
                match table.find(kernel_address(addr, self.kernel_text, table.text())) {
                    Some(h) => {
                        let _ = write!(
                            line,
                            "{}+{:#x} ({})",
                            h.name,
                            h.offset,
                            h.module.unwrap_or("[kernel.kallsyms]")
                        );
                    }
                    None => line.extend_from_slice(b"[unknown] ([kernel.kallsyms])"),
                }
            }
            _ => line.extend_from_slice(b"[unknown] ([unknown])"),
        }
        line.push(b'\n');
        line.into_boxed_slice()
    }
}

/// `addr` moved by KASLR's offset from the sampled boot to the boot a
/// kernel table describes (its `_text`, `text`, against the `_text` perf
/// recorded as the core kernel map's `pgoff`), as perf does; module
/// addresses, and tables without `_text`, stay as they are.
fn kernel_address(addr: u64, core: Option<(u64, u64, u64)>, text: Option<u64>) -> u64 {
    match (core, text) {
        (Some((start, end, pgoff)), Some(text)) if (start..end).contains(&addr) => {
            addr.wrapping_sub(pgoff).wrapping_add(text)
        }
        _ => addr,
    }
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
    fn registers_unwinding_needs_per_architecture() {
        let dwarf = SampleFormat::CALLCHAIN | SampleFormat::REGS_USER | SampleFormat::STACK_USER;
        let fp_lr = SampleFormat::CALLCHAIN | SampleFormat::REGS_USER;
        let lr = 1 << unwind::A64_LR;
        assert!(check_regs(Some("x86_64"), dwarf, Some(unwind::NEEDED_REGS)).is_ok());
        assert!(check_regs(Some("x86_64"), dwarf, Some(0))
            .unwrap_err()
            .to_string()
            .contains("IP, SP or BP"));
        assert!(check_regs(Some("x86_64"), fp_lr, Some(lr))
            .unwrap_err()
            .to_string()
            .contains("not both"));
        assert!(check_regs(Some("aarch64"), dwarf, Some(unwind::A64_NEEDED_REGS)).is_ok());
        assert!(check_regs(Some("aarch64"), dwarf, Some(lr))
            .unwrap_err()
            .to_string()
            .contains("x29 or LR"));
        // aarch64 -g: perf records LR for its leaf rule.
        assert!(check_regs(Some("aarch64"), fp_lr, Some(lr)).is_ok());
        let stack_only = SampleFormat::CALLCHAIN | SampleFormat::STACK_USER;
        assert!(check_regs(Some("aarch64"), stack_only, None)
            .unwrap_err()
            .to_string()
            .contains("not both"));
        assert!(check_regs(Some("riscv64"), dwarf, Some(u64::MAX))
            .unwrap_err()
            .to_string()
            .contains("riscv64"));
    }

    #[test]
    fn check_refuses_what_it_cannot_read_with_the_reason() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("perf.data");
        std::fs::write(&p, b"not perf at all").unwrap();
        assert!(check(&p)
            .unwrap_err()
            .to_string()
            .contains("not a little-endian perf.data"));
        // A header whose attribute section asks for user stack copies.
        let mut h = vec![0u8; 104 + 136];
        h[..8].copy_from_slice(b"PERFILE2");
        let put =
            |h: &mut Vec<u8>, at: usize, v: u64| h[at..at + 8].copy_from_slice(&v.to_le_bytes());
        put(&mut h, 8, 104);
        put(&mut h, 16, 136 - 16); // attr_size (the attr; ids follow)
        put(&mut h, 24, 104);
        put(&mut h, 32, 120);
        put(&mut h, 40, 240);
        put(&mut h, 48, 0);
        let dwarf =
            (SampleFormat::CALLCHAIN | SampleFormat::REGS_USER | SampleFormat::STACK_USER).bits();
        put(&mut h, 104 + 24, dwarf);
        std::fs::write(&p, &h).unwrap();
        // Which registers unwinding needs depends on the architecture, which
        // the header must give (this one has no feature sections at all).
        assert!(check(&p)
            .unwrap_err()
            .to_string()
            .contains("no architecture"));
        // perf's tracking event (dummy:HG) takes no samples: its registers
        // are not checked (perf 6.1 on aarch64 gives it SP and PC only).
        put(&mut h, 104, 1); // type PERF_TYPE_SOFTWARE
        put(&mut h, 104 + 8, 9); // config PERF_COUNT_SW_DUMMY
        std::fs::write(&p, &h).unwrap();
        assert!(check(&p).is_ok());
        put(&mut h, 104 + 8, 0); // cpu-clock: checked again
        std::fs::write(&p, &h).unwrap();
        assert!(check(&p).is_err());
        put(&mut h, 104, 0);
        put(&mut h, 104 + 80, unwind::NEEDED_REGS);
        std::fs::write(&p, &h).unwrap();
        assert!(check(&p).is_err());
        put(&mut h, 104 + 80, 0);
        put(
            &mut h,
            104 + 24,
            (SampleFormat::CALLCHAIN | SampleFormat::REGS_USER).bits(),
        );
        std::fs::write(&p, &h).unwrap();
        assert!(check(&p).unwrap_err().to_string().contains("not both"));
        put(&mut h, 104 + 24, dwarf);
        put(&mut h, 104 + 24, SampleFormat::IP.bits());
        std::fs::write(&p, &h).unwrap();
        assert!(check(&p)
            .unwrap_err()
            .to_string()
            .contains("no call chains"));
        // Call chains, and one AUX record in the data section.
        put(&mut h, 104 + 24, SampleFormat::CALLCHAIN.bits());
        h.extend_from_slice(&11u32.to_le_bytes());
        h.extend_from_slice(&0u16.to_le_bytes());
        h.extend_from_slice(&8u16.to_le_bytes());
        put(&mut h, 48, 8);
        std::fs::write(&p, &h).unwrap();
        assert!(check(&p).unwrap_err().to_string().contains("AUX"));
        h[240..244].copy_from_slice(&68u32.to_le_bytes()); // FINISHED_ROUND
        std::fs::write(&p, &h).unwrap();
        assert!(check(&p).is_ok());
        // Records of 24 bytes straddle the reads' 4 KiB blocks; the AUX
        // after 1,000 of them and 3 big ones is still found, and a data
        // section longer than the file is named.
        h.truncate(240);
        for _ in 0..1000 {
            h.extend_from_slice(&4u32.to_le_bytes()); // EXIT
            h.extend_from_slice(&0u16.to_le_bytes());
            h.extend_from_slice(&24u16.to_le_bytes());
            h.extend_from_slice(&[0; 16]);
        }
        for _ in 0..3 {
            // Big records (dwarf samples are): read header by header.
            h.extend_from_slice(&9u32.to_le_bytes()); // SAMPLE
            h.extend_from_slice(&0u16.to_le_bytes());
            h.extend_from_slice(&10_000u16.to_le_bytes());
            h.extend_from_slice(&[0; 9_992]);
        }
        h.extend_from_slice(&11u32.to_le_bytes());
        h.extend_from_slice(&0u16.to_le_bytes());
        h.extend_from_slice(&8u16.to_le_bytes());
        put(&mut h, 48, 54_008);
        std::fs::write(&p, &h).unwrap();
        assert!(check(&p).unwrap_err().to_string().contains("AUX"));
        put(&mut h, 48, 54_016);
        std::fs::write(&p, &h).unwrap();
        assert!(check(&p)
            .unwrap_err()
            .to_string()
            .contains("past the end of the file"));
        put(&mut h, 48, 54_000);
        std::fs::write(&p, &h).unwrap();
        assert!(check(&p).is_ok());
    }

    #[test]
    fn kernel_addresses_move_by_the_kaslr_offset_modules_do_not() {
        let core = Some((
            0xffff_ffff_a100_0000,
            0xffff_ffff_a200_0000,
            0xffff_ffff_a100_0000,
        ));
        let here = Some(0xffff_ffff_8100_0000);
        assert_eq!(
            kernel_address(0xffff_ffff_a13a_e453, core, here),
            0xffff_ffff_813a_e453
        );
        assert_eq!(
            kernel_address(0xffff_ffff_c000_0010, core, here),
            0xffff_ffff_c000_0010
        );
        assert_eq!(
            kernel_address(0xffff_ffff_a13a_e453, core, None),
            0xffff_ffff_a13a_e453
        );
        assert_eq!(
            kernel_address(0xffff_ffff_a13a_e453, None, here),
            0xffff_ffff_a13a_e453
        );
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
