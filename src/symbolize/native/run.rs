//! One replay of a shard's records ([`replay`]): the threads and maps they
//! build ([`super::threads`]), each sample's header line, its call chain
//! resolved to (DSO, address) with perf's context markers and arm64 leaf
//! rule followed, user frames unwound from stack copies
//! ([`super::unwind`]), and each frame printed from the per-run caches
//! (frame lines by address, whole frame-pointer stacks by call chain) or
//! named through the [`Symbolizer`]'s store and kernel table.

use std::collections::HashMap;
use std::io::{self, Write};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use linux_perf_data::linux_perf_event_reader::{CpuMode, EventRecord, Mmap2FileId, SampleFormat};
use linux_perf_data::PerfFileReader;

use super::check::data_section;
use super::order::Naming;
use super::threads::{self, Machine, Map};
use super::{
    arch, header, open_and_map, records, store, unwind, user_frame_lines, Error, OffCpuRecords,
    Outcome, Symbolizer, UnwindTally, FLUSH,
};
use crate::symbolize::perf::TimeSlice;
use crate::symbolize::sample::{Batch, Frame, Line, Sample};

mod held;
mod offcpu;

const PERF_CONTEXT_MAX: u64 = -4095i64 as u64;
const PERF_CONTEXT_HV: u64 = -32i64 as u64;
const PERF_CONTEXT_KERNEL: u64 = -128i64 as u64;
const PERF_CONTEXT_USER: u64 = -512i64 as u64;
/// perf script resolves at most this many call-chain entries.
const MAX_STACK: usize = 127;

/// Reads the records of `data` (the samples in `slice`, when given) in
/// time order, handing the samples, their text and (in a capture recorded
/// with `--off-cpu`) the switch and task records to `consume` in batches
/// that end at sample boundaries ([`Symbolizer::run`]).
pub(super) fn replay(
    sym: &Symbolizer,
    data: &Path,
    slice: Option<&TimeSlice>,
    consume: impl FnMut(Batch) -> io::Result<()>,
) -> Result<Outcome, Error> {
    let start = Instant::now();
    // Records are read in place in a mapping of the page cache
    // ([`records`]): no copy at all.
    let (_file, map) = open_and_map(data, Some(data))?;
    let held = held::Held::new(sym.order(data), slice);
    let out = replay_mapped(sym, &map, (slice, held), consume, start);
    // A shard truncated while it was read gave zeros: the run is its
    // error, whatever it made of them.
    if map.shrank() {
        return Err(Error::ShrankUnderMap {
            path: data.to_path_buf(),
        });
    }
    out
}

/// [`replay`] of the mapped shard `map`.
fn replay_mapped(
    sym: &Symbolizer,
    map: &crate::sys::input::Mapping,
    (slice, held): (Option<&TimeSlice>, held::Held),
    mut consume: impl FnMut(Batch) -> io::Result<()>,
    start: Instant,
) -> Result<Outcome, Error> {
    header::check(map)?;
    let PerfFileReader { perf_file, .. } =
        PerfFileReader::parse_file(io::Cursor::new(&map[..])).map_err(Error::Read)?;
    let section = data_section(map).ok_or(Error::TruncatedHeader)?;
    let mut records = records::OrderedRecords::new(section.1, perf_file.event_attributes())?;
    let events: Vec<Arc<str>> = perf_file
        .event_attributes()
        .iter()
        .enumerate()
        .map(|(i, a)| {
            a.name()
                .map_or_else(|| format!("event{i}").into(), Arc::from)
        })
        .collect();
    let build_ids: HashMap<Vec<u8>, Vec<u8>> = perf_file
        .build_ids()
        .map(|m| m.into_values().map(|d| (d.path, d.build_id)).collect())
        .unwrap_or_default();
    let aarch64 = perf_file.arch().ok().flatten().map(arch::normalized) == Some("aarch64");
    let mut run = Run::new(sym, build_ids, aarch64);
    run.held = held;
    let off_cpu = match offcpu::OffCpu::of(&perf_file) {
        Ok(None) => OffCpuRecords::NotRecorded,
        Ok(Some(o)) => {
            run.off_cpu = Some(o);
            OffCpuRecords::Handed
        }
        Err(why) => OffCpuRecords::Refused(why.to_string()),
    };
    run.start_tasks();
    let sample_times = perf_file
        .sample_time_range()
        .ok()
        .flatten()
        .filter(|t| t.last_sample_time >= t.first_sample_time && t.last_sample_time > 0)
        .map(|t| (t.first_sample_time, t.last_sample_time));
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
            run.task(&parsed, &record, lo, hi);
            continue;
        };
        let t = s.timestamp.unwrap_or(0);
        if t < lo || t > hi {
            continue;
        }
        if run.table.len() >= FRAME_CACHE {
            // The frame table starts over between two batches.
            run.flush(&mut consume)?;
            run.reset_frames();
        }
        let attr = &perf_file.event_attributes()[attr_index];
        run.sample(&s, attr.attributes().sample_format, &events[attr_index]);
        run.switch_state(&s, attr_index);
        if run.out.len() >= FLUSH {
            run.flush(&mut consume)?;
        }
    }
    run.end_turn(&mut consume)?;
    Ok(Outcome {
        bytes: run.bytes,
        samples: run.samples,
        elapsed: start.elapsed(),
        unwound: run.unwound,
        off_cpu,
        sample_times,
    })
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
/// Frames kept per run before its frame table starts over (bounds memory
/// on captures with millions of distinct addresses).
#[cfg(not(test))]
const FRAME_CACHE: usize = 1 << 20;
/// Small in tests, so that the table starts over in every run.
#[cfg(test)]
const FRAME_CACHE: usize = 16;
/// Bytes of whole-stack text cached per run before that cache starts over.
const STACK_CACHE_BYTES: usize = 64 << 20;

/// A whole frame-pointer stack printed before: its frames' text and ids.
type CachedStack = (Box<[u8]>, Box<[u32]>);

pub(super) struct Run<'a> {
    sym: &'a Symbolizer,
    machine: Machine,
    dsos: Vec<Dso>,
    dso_ids: HashMap<Vec<u8>, u32>,
    build_ids: HashMap<Vec<u8>, Vec<u8>>,
    /// Frame ids by (DSO, address).
    frames: rustc_hash::FxHashMap<(u32, u64), u32>,
    /// The same with inline frames expanded.
    inline_frames: rustc_hash::FxHashMap<(u32, u64), u32>,
    /// The text of each frame, by id (the frames themselves go out in the
    /// batch that first meets them).
    table: Vec<Box<[u8]>>,
    /// The samples being gathered (their text in `out`).
    batch: Batch,
    /// Command names, shared by the samples that carry them.
    comms: std::collections::HashSet<Arc<str>>,
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
    /// Frame text and ids of whole frame-pointer stacks by (pid, CPU
    /// mode, call chain); emptied when maps change.
    stacks: rustc_hash::FxHashMap<Box<[u64]>, CachedStack>,
    /// The current sample's key into `stacks`.
    stack_key: Vec<u64>,
    /// Bytes held by `stacks`, about.
    stack_bytes: usize,
    out: Vec<u8>,
    bytes: u64,
    samples: u64,
    /// A capture recorded with `--off-cpu`: how its switch and task
    /// records are read.
    off_cpu: Option<offcpu::OffCpu>,
    /// How the dwarf unwinds ended.
    unwound: UnwindTally,
    /// The slice's turn to name frames in its shard's order, and what it
    /// holds until then.
    held: held::Held,
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
            table: Vec::new(),
            batch: Batch::default(),
            comms: Default::default(),
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
            held: held::Held::new(Arc::default(), None),
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

    fn flush(&mut self, consume: &mut impl FnMut(Batch) -> io::Result<()>) -> Result<(), Error> {
        if self.out.is_empty() && self.batch.is_empty() {
            return Ok(());
        }
        let mut batch = std::mem::take(&mut self.batch);
        self.start_tasks();
        batch.text_bytes = self.out.len() as u64;
        batch.text = std::mem::replace(&mut self.out, self.sym.block());
        self.hand_on(batch, consume)
    }

    /// Starts the frame table over (between two batches): the next batch
    /// says so.
    fn reset_frames(&mut self) {
        self.frames.clear();
        self.inline_frames.clear();
        self.table.clear();
        self.stacks.clear();
        self.stack_bytes = 0;
        self.batch.reset = true;
        self.held.reset();
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
        event: &Arc<str>,
    ) {
        self.samples += 1;
        let pid = s.pid.unwrap_or(-1);
        self.write_header(s, has, event);
        self.begin_sample(s, has, event);
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
            self.end_sample();
            return;
        }
        let start = (self.out.len(), self.batch.stacks.len());
        // Resolve the chain to (DSO, address) with the process's maps looked
        // up once, then print each frame from the cache.
        let mut resolved = std::mem::take(&mut self.scratch);
        resolved.clear();
        let kept = self.resolve_chain(s, pid, lr, &mut resolved);
        if !kept {
            // perf still appends the frames unwound from a stack copy.
            self.unwound.discard(s.period.unwrap_or(1));
        }
        if let (Some(regs), Some((stack, size))) = (&s.user_regs, &s.user_stack) {
            if let Some(stop) = self.user_frames(pid, regs, &stack.as_slice(), *size, &mut resolved)
            {
                self.unwound.count(stop, s.period.unwrap_or(1));
            }
        }
        self.warm(&resolved);
        for &(dso, key) in &resolved {
            let id = self.frame(dso, key);
            self.batch.stacks.push(id);
        }
        self.scratch = resolved;
        // A discarded chain is not cached: each one is counted.
        if cacheable && kept {
            self.keep_stack(start);
        }
        self.out.push(b'\n');
        self.end_sample();
    }

    /// Starts the sample's entry in the batch (its frames follow in
    /// `batch.stacks`).
    fn begin_sample(
        &mut self,
        s: &linux_perf_data::linux_perf_event_reader::SampleRecord<'_>,
        has: SampleFormat,
        event: &Arc<str>,
    ) {
        let tid = s.tid.unwrap_or(-1);
        let comm = self.machine.comm_of(tid);
        let comm = match self.comms.get(&*comm) {
            Some(c) => c.clone(),
            None => {
                let c: Arc<str> = Arc::from(&*comm);
                self.comms.insert(c.clone());
                c
            }
        };
        let at = self.batch.stacks.len() as u32;
        self.batch.samples.push(Sample {
            comm,
            tid,
            cpu: has.contains(SampleFormat::CPU).then(|| s.cpu.unwrap_or(0)),
            time_ns: has
                .contains(SampleFormat::TIME)
                .then(|| s.timestamp.unwrap_or(0)),
            period: has
                .contains(SampleFormat::PERIOD)
                .then(|| s.period.unwrap_or(0)),
            event: event.clone(),
            frames: at..at,
        });
    }

    /// Ends the sample's entry: its frames are those pushed since.
    fn end_sample(&mut self) {
        let end = self.batch.stacks.len() as u32;
        if let Some(last) = self.batch.samples.last_mut() {
            last.frames.end = end;
        }
    }

    /// The sample's header line, as `perf script` prints it: comm, TID, CPU,
    /// time, period (each when recorded) and the event.
    fn write_header(
        &mut self,
        s: &linux_perf_data::linux_perf_event_reader::SampleRecord<'_>,
        has: SampleFormat,
        event: &Arc<str>,
    ) {
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
    /// from `lr` put in where perf's rule puts it. `false`: the chain held
    /// an entry at or above `PERF_CONTEXT_MAX` that is no context perf
    /// knows (a user stack's `0xffffffffffffffff`): perf 6.1
    /// (`add_callchain_ip`) takes the chain for corrupted and discards all
    /// of it, so `resolved` is left empty.
    fn resolve_chain(
        &mut self,
        s: &linux_perf_data::linux_perf_event_reader::SampleRecord<'_>,
        pid: i32,
        lr: Option<u64>,
        resolved: &mut Vec<(u32, u64)>,
    ) -> bool {
        match &s.callchain {
            Some(chain) => self.resolve_ips(
                s.cpu_mode,
                chain.len(),
                &|i| chain.get(i),
                pid,
                lr,
                resolved,
            ),
            None => true,
        }
    }

    /// [`Self::resolve_chain`] over the `len` entries `ip(i)`, starting in
    /// CPU mode `mode`.
    fn resolve_ips(
        &mut self,
        mut mode: CpuMode,
        len: usize,
        chain: &dyn Fn(usize) -> Option<u64>,
        pid: i32,
        lr: Option<u64>,
        resolved: &mut Vec<(u32, u64)>,
    ) -> bool {
        let mut n = 0;
        let maps = self.machine.maps_of(pid);
        for i in 0..len {
            if n >= MAX_STACK {
                break;
            }
            let Some(ip) = chain(i) else { break };
            if ip >= PERF_CONTEXT_MAX {
                mode = match ip {
                    PERF_CONTEXT_KERNEL => CpuMode::Kernel,
                    PERF_CONTEXT_USER => CpuMode::User,
                    PERF_CONTEXT_HV => CpuMode::Hypervisor,
                    _ => {
                        resolved.clear();
                        return false;
                    }
                };
                continue;
            }
            n += 1;
            if let (Some(lr), CpuMode::User, true) = (lr, mode, i >= 2) {
                if chain(i - 2) == Some(PERF_CONTEXT_USER) {
                    let pc = chain(i - 1).unwrap_or(0);
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
        true
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
        let mut last = None;
        resolved.extend(user.iter().map(
            |&ip| match maps.and_then(|m| m.find_after(ip, &mut last)) {
                Some(m) => (m.dso, m.rel(ip)),
                None => (NO_DSO, ip),
            },
        ));
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
            Some((text, ids)) => {
                self.out.extend_from_slice(text);
                self.out.push(b'\n');
                self.batch.stacks.extend_from_slice(ids);
                true
            }
            None => false,
        }
    }

    /// Remembers the frames printed since `start` (text, ids) under
    /// `stack_key`.
    fn keep_stack(&mut self, (text_at, ids_at): (usize, usize)) {
        let text: Box<[u8]> = self.out[text_at..].into();
        let ids: Box<[u32]> = self.batch.stacks[ids_at..].into();
        self.stack_bytes += text.len() + 4 * ids.len() + 8 * self.stack_key.len();
        if self.stack_bytes > STACK_CACHE_BYTES {
            self.stacks.clear();
            self.stack_bytes = 0;
        }
        self.stacks
            .insert(self.stack_key.as_slice().into(), (text, ids));
    }

    /// Takes the store's entry of each DSO of the chain met for the first
    /// time, and has the store load its symbols (and DWARF) in the
    /// background ([`store::Store::warm`]) while the frames before it are
    /// written.
    fn warm(&mut self, chain: &[(u32, u64)]) {
        for &(id, _) in chain {
            let Some(d) = self.dsos.get_mut(id as usize) else {
                continue;
            };
            if let (None, Some(p)) = (&d.symbols, &d.path) {
                let e = self.sym.dso(p, &d.build_id);
                self.sym.store().warm(&e, self.expand);
                d.symbols = Some(e);
            }
        }
    }

    /// Prints the frame of `key` in DSO `dso` and gives its id: from the
    /// run's table, or named now, added to the table and to the batch.
    fn frame(&mut self, dso: u32, key: u64) -> u32 {
        let cache = if self.expand {
            &mut self.inline_frames
        } else {
            &mut self.frames
        };
        if let Some(&id) = cache.get(&(dso, key)) {
            match self.held.pending(id) {
                Some(p) => self.held.gap(self.out.len(), p),
                None => self.out.extend_from_slice(&self.table[id as usize]),
            }
            return id;
        }
        let in_dso = (dso != NO_DSO).then_some(dso);
        let lines = match self.name_frame(in_dso, key, self.expand) {
            Naming::Lines(l) => l,
            Naming::Ordered(o) if self.held.live() => self.held.lines(&o),
            Naming::Ordered(o) => return self.hold_frame((dso, key), o),
        };
        // Every line inlined: the ELF symbol's own line, which perf
        // report names the frame by (`Frame::function`).
        let function = (self.expand && lines.iter().all(Line::is_inlined))
            .then(|| self.plain_line(in_dso, key))
            .flatten();
        let frame = Frame {
            address: key,
            lines,
            function,
        };
        let mut text = Vec::with_capacity(96);
        frame.write_text(&mut text);
        self.out.extend_from_slice(&text);
        let id = self.table.len() as u32;
        self.table.push(text.into_boxed_slice());
        self.batch.new_frames.push(frame);
        let cache = if self.expand {
            &mut self.inline_frames
        } else {
            &mut self.frames
        };
        cache.insert((dso, key), id);
        id
    }

    /// A frame named in its shard's order met before the slice's turn:
    /// added to the table and the batch without lines, a gap in the text.
    fn hold_frame(&mut self, (dso, key): (u32, u64), frame: Box<super::order::Ordered>) -> u32 {
        let function = self.plain_line((dso != NO_DSO).then_some(dso), key);
        let id = self.table.len() as u32;
        self.table.push(Box::default());
        let at = self.batch.new_frames.len();
        let p = self.held.hold(frame, id, at, function);
        self.held.gap(self.out.len(), p);
        self.batch.new_frames.push(Frame {
            address: key,
            lines: Arc::new([]),
            function: None,
        });
        self.inline_frames.insert((dso, key), id);
        id
    }

    /// The line of the ELF symbol at `addr` in `dso`, as without inline
    /// frames.
    fn plain_line(&mut self, dso: Option<u32>, addr: u64) -> Option<Line> {
        match self.name_frame(dso, addr, false) {
            Naming::Lines(l) => l.first().cloned(),
            Naming::Ordered(_) => None,
        }
    }

    /// The lines of the frame at `addr` in DSO `dso` (`None`: in no
    /// mapping), inline frames expanded when `expand`, or what naming
    /// them in the shard's order takes.
    fn name_frame(&mut self, dso: Option<u32>, addr: u64, expand: bool) -> Naming {
        if let Some(id) = dso.filter(|&d| d != KERNEL_DSO) {
            let d = &mut self.dsos[id as usize];
            if let Some(jit) = &d.jit {
                let symbol = match jit.as_ref().and_then(|m| m.find(addr)) {
                    Some((name, off)) => format!("{name}+{off:#x}"),
                    None => "[unknown]".to_string(),
                };
                return Naming::Lines(vec![Line::new(symbol, d.name.as_str())].into());
            }
            let syms = d.symbols.get_or_insert_with(|| match &d.path {
                Some(p) => self.sym.dso(p, &d.build_id),
                None => store::Entry::empty(),
            });
            return user_frame_lines(syms, &d.name, addr, expand);
        }
        let line = match dso {
            Some(KERNEL_DSO) => {
                let table = self.sym.kernel();
                match table.find(kernel_address(addr, self.kernel_text, table.text())) {
                    Some(h) => Line::new(
                        format!("{}+{:#x}", h.name, h.offset),
                        h.module.unwrap_or("[kernel.kallsyms]"),
                    ),
                    None => Line::new("[unknown]", "[kernel.kallsyms]"),
                }
            }
            _ => Line::new("[unknown]", "[unknown]"),
        };
        Naming::Lines(vec![line].into())
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
mod tests;
