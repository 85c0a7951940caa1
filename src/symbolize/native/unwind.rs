//! Dwarf unwinding of `--call-graph dwarf` samples, as `perf script` (6.1,
//! built with libunwind) does it: each sample carries the user registers
//! and a copy of the top of the user stack; the user part of its call chain
//! is recovered from the CFI of the mapped files (framehop over
//! `.eh_frame_hdr` + `.eh_frame` of the capture's copy of the file, else
//! `.debug_frame` of the file or of its separate debug file, found as
//! [`super::elf`] finds symbols; on x86-64, the rows framehop cannot
//! evaluate, CFA expressions of stack-realigning functions among them, are
//! stepped through by [`cfi`]). perf's conventions are kept: the first
//! frame is the sampled IP itself, every later one is its return address
//! minus one (so it names the calling instruction), at most 127 user frames,
//! a null address ends the chain, and unwinding stops at an address in no
//! mapped file or in a file without unwind tables (where perf's libunwind
//! stops too) or where a stack read falls outside the copy (perf never
//! reads the copy's last word; a return address past the copy, in a map
//! perf knows, reads as 0, which perf prints as one last `ffffffffffffffff
//! [unknown]` frame, and in no map ends the stack there, as does a CFA
//! read past it (a stack-realigning function's); and a
//! frame pointer whose save slot lies below the copy poisons the frames
//! that need it). The tables are read once per DSO and shared
//! by every shard, time slice and capture of a run ([`super::store`]); each run keeps one
//! framehop unwinder per process, rebuilt when the process's maps change.

use crate::symbolize::sources::{Resolved, Shrank};
use std::ops::Range;
use std::sync::Arc;

use framehop::aarch64::{CacheAarch64, PtrAuthMask, UnwindRegsAarch64, UnwinderAarch64};
use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64};
use framehop::{ExplicitModuleSectionInfo, FrameAddress, Module, Unwinder};
use linux_perf_data::linux_perf_event_reader::Regs;
use object::read::elf::{ElfFile64, ProgramHeader};
use object::{Endianness, Object, ObjectSection};
use rustc_hash::FxHashMap;

mod cfi;
mod go;
mod leaf;
mod root;

use super::elf::load_segments;
use super::threads::Maps;
use go::go_roots;

/// The most user frames perf script takes from one unwinding (libunwind's
/// `ips[]`, `PERF_MAX_STACK_DEPTH`).
pub const MAX_USER_FRAMES: usize = 127;

/// x86-64 register numbers in `PERF_SAMPLE_REGS_USER`.
const REG_BP: u64 = 6;
const REG_SP: u64 = 7;
const REG_IP: u64 = 8;
/// The registers unwinding needs (frame pointer, stack pointer, IP).
pub const NEEDED_REGS: u64 = (1 << REG_BP) | (1 << REG_SP) | (1 << REG_IP);

/// aarch64 register numbers in `PERF_SAMPLE_REGS_USER` (x0-x30, sp, pc).
const A64_FP: u64 = 29;
/// The link register, x30.
pub const A64_LR: u64 = 30;
const A64_SP: u64 = 31;
const A64_PC: u64 = 32;
/// The aarch64 registers dwarf unwinding needs (x29, LR, SP, PC).
pub const A64_NEEDED_REGS: u64 = (1 << A64_FP) | (1 << A64_LR) | (1 << A64_SP) | (1 << A64_PC);

type Bytes = Arc<[u8]>;

/// The unwind tables of one DSO, in its own (ELF) address space.
#[derive(Debug, Default)]
pub struct DsoUnwind {
    /// `PT_LOAD` segments: (file offset, file size, vaddr).
    segments: Vec<(u64, u64, u64)>,
    text: Option<Range<u64>>,
    got: Option<Range<u64>>,
    /// The executable `PT_LOAD` segments, page-aligned: what perf maps of
    /// the file (perf's arm64 LR rule reads nothing else, [`leaf`]).
    exec: Vec<Range<u64>>,
    eh_frame: Option<(Range<u64>, Bytes)>,
    eh_frame_hdr: Option<(Range<u64>, Bytes)>,
    debug_frame: Option<Bytes>,
    /// Go's outermost functions ([`go_roots`]), by address: a stack ends
    /// in them.
    roots: Vec<Range<u64>>,
}

impl DsoUnwind {
    /// Bytes its sections hold (what the symbol store counts).
    pub fn bytes(&self) -> usize {
        let len = |s: &Option<(Range<u64>, Bytes)>| s.as_ref().map_or(0, |(_, b)| b.len());
        len(&self.eh_frame)
            + len(&self.eh_frame_hdr)
            + self.debug_frame.as_ref().map_or(0, |b| b.len())
            + 24 * (self.segments.len() + self.exec.len())
            + 16 * self.roots.len()
    }

    /// Whether ELF address `svma` lies in one of Go's outermost functions.
    fn is_root(&self, svma: u64) -> bool {
        self.roots.iter().any(|r| r.contains(&svma))
    }

    /// Where the ELF's address 0 lies in a process that maps `len` bytes
    /// of the file from offset `pgoff` at `start`: from the segment that
    /// begins inside the mapping (mappings start on a page boundary below
    /// their segment, which lld does not align to pages), else the one
    /// holding `pgoff`.
    pub fn base_avma(&self, start: u64, pgoff: u64, len: u64) -> Option<u64> {
        let inside = |&&(o, _, _): &&(u64, u64, u64)| o >= pgoff && o - pgoff < len;
        let holding = |&&(o, sz, _): &&(u64, u64, u64)| pgoff >= o && pgoff < o + sz.max(1);
        let &(o, _, v) = self
            .segments
            .iter()
            .find(inside)
            .or_else(|| self.segments.iter().find(holding))?;
        Some(start.wrapping_add(o).wrapping_sub(pgoff).wrapping_sub(v))
    }

    fn section_info(&self) -> ExplicitModuleSectionInfo<Bytes> {
        let (eh_frame_svma, eh_frame) = split(&self.eh_frame);
        let (eh_frame_hdr_svma, eh_frame_hdr) = split(&self.eh_frame_hdr);
        ExplicitModuleSectionInfo {
            base_svma: 0,
            text_svma: self.text.clone(),
            got_svma: self.got.clone(),
            eh_frame_svma,
            eh_frame,
            eh_frame_hdr_svma,
            eh_frame_hdr,
            debug_frame: self.debug_frame.clone(),
            ..Default::default()
        }
    }
}

fn split(s: &Option<(Range<u64>, Bytes)>) -> (Option<Range<u64>>, Option<Bytes>) {
    match s {
        Some((r, b)) => (Some(r.clone()), Some(b.clone())),
        None => (None, None),
    }
}

/// Reads the unwind tables of a DSO from the files
/// [`crate::symbolize::sources::resolve`] took for it: `.eh_frame_hdr` +
/// `.eh_frame` of the binary itself, as perf reads them; without those, the
/// first `.debug_frame` among its debug files and the binary. `None`:
/// nothing to unwind with (perf stops there); [`Shrank`]: a file shrank
/// while its tables were read (they are thrown away).
pub fn load(resolved: &Resolved) -> Result<Option<DsoUnwind>, Shrank> {
    let mut t = DsoUnwind::default();
    if let Some(b) = &resolved.binary {
        if let Some(map) = b.map() {
            if let Ok(file) = ElfFile64::<Endianness>::parse(&map[..]) {
                t.segments = load_segments(&file);
                t.text = file.section_by_name(".text").map(|s| svma_range(&s));
                t.got = file.section_by_name(".got").map(|s| svma_range(&s));
                t.exec = exec_segments(&file);
                t.roots = go_roots(&file);
                if let (Some(hdr), Some(eh)) =
                    (section(&file, ".eh_frame_hdr"), section(&file, ".eh_frame"))
                {
                    t.eh_frame_hdr = Some(hdr);
                    t.eh_frame = Some(eh);
                } else {
                    t.debug_frame = section(&file, ".debug_frame").map(|(_, b)| b);
                }
            }
            if map.shrank() {
                return Err(Shrank(b.path.clone()));
            }
        }
    }
    if t.eh_frame_hdr.is_none() && t.debug_frame.is_none() {
        for f in resolved.files() {
            let Some(map) = f.map() else {
                continue;
            };
            let Ok(file) = ElfFile64::<Endianness>::parse(&map[..]) else {
                continue;
            };
            if let Some((_, b)) = section(&file, ".debug_frame") {
                if map.shrank() {
                    return Err(Shrank(f.path.clone()));
                }
                t.debug_frame = Some(b);
                if t.segments.is_empty() {
                    t.segments = load_segments(&file);
                    t.exec = exec_segments(&file);
                }
                break;
            }
        }
    }
    let usable = t.eh_frame_hdr.is_some() || t.debug_frame.is_some();
    Ok((usable && !t.segments.is_empty()).then_some(t))
}

/// The executable `PT_LOAD` segments' addresses, widened to 4 KiB pages
/// as the kernel maps them.
fn exec_segments(file: &ElfFile64<'_, Endianness>) -> Vec<Range<u64>> {
    let e = file.endian();
    file.elf_program_headers()
        .iter()
        .filter(|p| p.p_type(e) == object::elf::PT_LOAD && p.p_flags(e) & object::elf::PF_X != 0)
        .map(|p| {
            let (v, n) = (p.p_vaddr(e), p.p_memsz(e));
            (v & !0xfff)..(v.saturating_add(n).saturating_add(0xfff) & !0xfff)
        })
        .collect()
}

fn svma_range<'d>(s: &impl ObjectSection<'d>) -> Range<u64> {
    s.address()..s.address() + s.size()
}

/// A section's address range and (uncompressed) bytes; `None` when it is
/// missing, empty, or has no bytes in the file (a debug file's `NOBITS`).
fn section(file: &ElfFile64<'_, Endianness>, name: &str) -> Option<(Range<u64>, Bytes)> {
    let s = file.section_by_name(name)?;
    let data = s.uncompressed_data().ok()?;
    if data.is_empty() {
        return None;
    }
    Some((s.address()..s.address() + s.size(), Arc::from(&*data)))
}

/// What unwinding one architecture's stacks takes: framehop's unwinder,
/// registers and rule cache for it, and where perf puts the registers.
trait UnwindArch {
    type Unwinder: Unwinder<UnwindRegs = Self::Regs, Cache = Self::Cache, Module = Module<Bytes>>
        + Default;
    type Regs;
    type Cache: Default;
    /// The sampled IP and the registers unwinding starts from.
    fn regs(r: &Regs<'_>) -> Option<(u64, Self::Regs)>;
    /// Forgets the frame pointer (its save slot lay outside the copy).
    fn poison_fp(r: &mut Self::Regs);
    /// The stack pointer (where the stack copy starts).
    fn sp(r: &Self::Regs) -> u64;
    /// The root of the stack from a frame record with a null frame
    /// pointer that ended it ([`root`]), as perf's libunwind takes it.
    fn root(_trail: &root::Trail) -> Option<u64> {
        None
    }
    /// The registers a [`cfi`] step works on (x86-64 only: `None`, framehop
    /// takes every row).
    fn cfi_regs(_r: &mut Self::Regs) -> Option<&mut UnwindRegsX86_64> {
        None
    }
}

/// x86-64: IP, SP and BP.
struct X86;
impl UnwindArch for X86 {
    type Unwinder = UnwinderX86_64<Bytes>;
    type Regs = UnwindRegsX86_64;
    type Cache = CacheX86_64;
    fn regs(r: &Regs<'_>) -> Option<(u64, UnwindRegsX86_64)> {
        let (ip, sp, bp) = (r.get(REG_IP)?, r.get(REG_SP)?, r.get(REG_BP)?);
        Some((ip, UnwindRegsX86_64::new(ip, sp, bp)))
    }
    fn poison_fp(r: &mut UnwindRegsX86_64) {
        r.set_bp(0);
    }
    fn sp(r: &UnwindRegsX86_64) -> u64 {
        r.sp()
    }
    fn cfi_regs(r: &mut UnwindRegsX86_64) -> Option<&mut UnwindRegsX86_64> {
        Some(r)
    }
}

/// aarch64: PC, SP, x29 (frame pointer) and LR (x30), the pointer
/// authentication code stripped from return addresses as the kernel does
/// (user addresses have at most 48 bits).
struct A64;
impl UnwindArch for A64 {
    type Unwinder = UnwinderAarch64<Bytes>;
    type Regs = UnwindRegsAarch64;
    type Cache = CacheAarch64;
    fn regs(r: &Regs<'_>) -> Option<(u64, UnwindRegsAarch64)> {
        let (pc, sp) = (r.get(A64_PC)?, r.get(A64_SP)?);
        let (fp, lr) = (r.get(A64_FP)?, r.get(A64_LR)?);
        let regs = UnwindRegsAarch64::new_with_ptr_auth_mask(PAC_MASK, lr, sp, fp);
        Some((PAC_MASK.strip_ptr_auth(pc), regs))
    }
    fn poison_fp(r: &mut UnwindRegsAarch64) {
        r.set_fp(0);
    }
    fn sp(r: &UnwindRegsAarch64) -> u64 {
        r.sp()
    }
    fn root(trail: &root::Trail) -> Option<u64> {
        trail.root(|a| PAC_MASK.strip_ptr_auth(a))
    }
}

/// Return addresses keep their low 48 bits (the PAC lives above them).
const PAC_MASK: PtrAuthMask = PtrAuthMask(u64::MAX >> 16);

/// One architecture's unwinders (one per process) and rule cache, and
/// the CFI rows framehop cannot take by (DSO, address) ([`cfi`]).
struct State<A: UnwindArch> {
    procs: FxHashMap<i32, A::Unwinder>,
    cache: A::Cache,
    rows: FxHashMap<(u32, u64), Option<Arc<cfi::Row>>>,
    cfi: Box<gimli::UnwindContext<usize>>,
}

impl<A: UnwindArch> Default for State<A> {
    fn default() -> Self {
        State {
            procs: FxHashMap::default(),
            cache: A::Cache::default(),
            rows: FxHashMap::default(),
            cfi: Box::new(gimli::UnwindContext::new()),
        }
    }
}

/// One run's unwinding state: an unwinder per process, the tables of each
/// DSO id of the run, framehop's rule cache; for x86-64 or aarch64 stacks.
#[derive(Default)]
pub struct Unwinding {
    aarch64: bool,
    x86: State<X86>,
    a64: State<A64>,
    tables: Vec<Option<Option<Arc<DsoUnwind>>>>,
}

impl std::fmt::Debug for Unwinding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Unwinding")
            .field("aarch64", &self.aarch64)
            .field("processes", &(self.x86.procs.len() + self.a64.procs.len()))
            .finish()
    }
}

/// Why a dwarf unwind of one sample ended: at the thread's first frame, or
/// before it (the stack is truncated, whatever its frames are called), and
/// then what stopped it: each cause has its own fix, and only one of them
/// is a larger stack copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// The unwind tables say the last frame has no caller (`_start`,
    /// `clone3`), or a return address of 0 ends it: the whole stack.
    Outermost,
    /// A read fell outside the stack copy before the outermost frame
    /// (`--call-graph dwarf,SIZE` too small): the one cause a larger copy
    /// fixes.
    StackCopy,
    /// An address in a mapping without unwind tables (a file without
    /// `.eh_frame`, anonymous or JIT code), or the sampled address in no
    /// mapping at all.
    NoTables,
    /// The function has unwind tables, but its CFI row is one this
    /// unwinder cannot evaluate (a DWARF expression operation it does not
    /// know, a register a caller's frame cannot recover).
    Unsupported,
    /// A step gave a return address in no mapping (a damaged stack, or
    /// CFI that does not describe the code).
    BadAddress,
    /// A step failed otherwise (the stack pointer moved backwards, nothing
    /// advanced).
    Lost,
    /// More frames than perf prints (127): the root is not in the picture.
    Depth,
}

impl Stop {
    /// Every way a stack stops short, for tallies.
    pub const SHORT: [Stop; 6] = [
        Stop::StackCopy,
        Stop::NoTables,
        Stop::Unsupported,
        Stop::BadAddress,
        Stop::Lost,
        Stop::Depth,
    ];

    /// The words the summary and the warning use.
    pub fn as_str(self) -> &'static str {
        match self {
            Stop::Outermost => "outermost frame",
            Stop::StackCopy => "stack copy exhausted",
            Stop::NoTables => "no unwind tables",
            Stop::Unsupported => "unsupported CFA rule",
            Stop::BadAddress => "return address in no mapping",
            Stop::Lost => "unwinding failed",
            Stop::Depth => "call chain at the depth limit",
        }
    }

    /// Why the walk stopped at the address it reached: `mapped` (in a
    /// mapping at all), `tables` (its file has unwind tables); `first`:
    /// it is the sampled address, not a return address. `None`: it can go
    /// on.
    fn at(mapped: bool, tables: bool, first: bool) -> Option<Stop> {
        match (mapped, tables) {
            (_, true) => None,
            (false, false) if !first => Some(Stop::BadAddress),
            _ => Some(Stop::NoTables),
        }
    }

    /// Why a step failed with `e`: `missed` when a read fell outside the
    /// copy.
    fn failed(e: &framehop::Error, missed: bool) -> Stop {
        match e {
            _ if missed => Stop::StackCopy,
            framehop::Error::CouldNotReadStack(_) => Stop::StackCopy,
            _ => Stop::Lost,
        }
    }
}

/// How the dwarf unwinds of a run ended, weighted by the samples' periods:
/// a stack is truncated when the unwinder stopped before the thread's
/// first frame ([`Stop`]), whatever its frames are called; and the call
/// chains discarded as corrupted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UnwindTally {
    /// Weight of the samples unwound from a stack copy.
    pub weight: u64,
    /// Of that, the weight whose unwind stopped short, by
    /// [`Stop::SHORT`].
    pub short: [u64; Stop::SHORT.len()],
    /// Samples whose recorded call chain held an entry at or above
    /// `PERF_CONTEXT_MAX` that is no context marker (a frame-pointer walk
    /// that read `0xffffffffffffffff`): perf 6.1 discards the whole chain
    /// (`add_callchain_ip`: "the callchain is corrupted"), and so does the
    /// native symbolizer; frames unwound from a stack copy are kept.
    pub discarded: u64,
    /// Their weight.
    pub discarded_weight: u64,
}

impl UnwindTally {
    /// Adds `other`'s counts.
    pub fn add(&mut self, other: &UnwindTally) {
        self.weight = self.weight.saturating_add(other.weight);
        for (a, b) in self.short.iter_mut().zip(other.short) {
            *a = a.saturating_add(b);
        }
        self.discarded = self.discarded.saturating_add(other.discarded);
        self.discarded_weight = self.discarded_weight.saturating_add(other.discarded_weight);
    }

    /// Counts a call chain of weight `weight` discarded as corrupted.
    pub(super) fn discard(&mut self, weight: u64) {
        self.discarded = self.discarded.saturating_add(1);
        self.discarded_weight = self.discarded_weight.saturating_add(weight);
    }

    pub(super) fn count(&mut self, stop: Stop, weight: u64) {
        self.weight = self.weight.saturating_add(weight);
        if let Some(i) = Stop::SHORT.iter().position(|&s| s == stop) {
            self.short[i] = self.short[i].saturating_add(weight);
        }
    }

    /// The weight of truncated stacks.
    pub fn truncated(&self) -> u64 {
        self.short.iter().fold(0u64, |a, &b| a.saturating_add(b))
    }
}

/// Looks up the unwind tables of DSO `dso`, loading them once per run.
fn table<'t>(
    tables: &'t mut Vec<Option<Option<Arc<DsoUnwind>>>>,
    dso: u32,
    load: &mut dyn FnMut(u32) -> Option<Arc<DsoUnwind>>,
) -> Option<&'t Arc<DsoUnwind>> {
    let i = dso as usize;
    if tables.len() <= i {
        tables.resize(i + 1, None);
    }
    if tables[i].is_none() {
        tables[i] = Some(load(dso));
    }
    tables[i].as_ref().and_then(Option::as_ref)
}

impl Unwinding {
    /// Unwinding of aarch64 stacks (`true`) or x86-64 ones.
    pub fn new(aarch64: bool) -> Unwinding {
        Unwinding {
            aarch64,
            ..Unwinding::default()
        }
    }

    /// Process `pid`'s maps changed (a new map, a fork): its unwinder is
    /// rebuilt at its next sample.
    pub fn maps_changed(&mut self, pid: i32) {
        self.x86.procs.remove(&pid);
        self.a64.procs.remove(&pid);
    }

    /// The user frames of one sample of process `pid`, callee first, as
    /// perf script prints them (the IP, then return addresses minus one),
    /// appended to `out`, and why the unwind ended. `load` gives the
    /// unwind tables of a DSO id.
    pub fn user_frames(
        &mut self,
        pid: i32,
        maps: Option<&Maps>,
        load: &mut dyn FnMut(u32) -> Option<Arc<DsoUnwind>>,
        regs: &Regs<'_>,
        stack: &[u8],
        out: &mut Vec<u64>,
    ) -> Stop {
        let tables = &mut self.tables;
        if self.aarch64 {
            walk::<A64>(&mut self.a64, tables, pid, maps, load, regs, stack, out)
        } else {
            walk::<X86>(&mut self.x86, tables, pid, maps, load, regs, stack, out)
        }
    }
}

/// [`Unwinding::user_frames`] for architecture `A`.
#[allow(clippy::too_many_arguments)]
fn walk<A: UnwindArch>(
    st: &mut State<A>,
    tables: &mut Vec<Option<Option<Arc<DsoUnwind>>>>,
    pid: i32,
    maps: Option<&Maps>,
    load: &mut dyn FnMut(u32) -> Option<Arc<DsoUnwind>>,
    sampled: &Regs<'_>,
    stack: &[u8],
    out: &mut Vec<u64>,
) -> Stop {
    let Some((ip, mut regs)) = A::regs(sampled) else {
        return Stop::Lost;
    };
    let sp = A::sp(&regs);
    if ip != 0 {
        out.push(ip);
    }
    let Some(maps) = maps else {
        return Stop::NoTables;
    };
    st.procs
        .entry(pid)
        .or_insert_with(|| build::<A>(tables, maps, load));
    // perf reads a word only when it ends before the copy's last byte.
    let end = sp.saturating_add(stack.len() as u64);
    let missed = std::cell::Cell::new(false);
    let trail = std::cell::Cell::new(root::Trail::default());
    let mut read = |a: u64| -> Result<u64, ()> {
        if a < sp || a.checked_add(8).is_none_or(|e| e >= end) {
            missed.set(true);
            return Err(());
        }
        let at = (a - sp) as usize;
        let w = stack.get(at..at + 8).ok_or(())?;
        let v = u64::from_le_bytes(w.try_into().map_err(|_| ())?);
        let mut t = trail.get();
        t.read(a, v);
        trail.set(t);
        Ok(v)
    };
    let mut addr = FrameAddress::from_instruction_pointer(ip);
    let mut last = None;
    for _ in 1..MAX_USER_FRAMES {
        let first = !addr.is_return_address();
        let m = maps.find_after(addr.address_for_lookup(), &mut last);
        // Borrowed, not cloned: the symbolizing threads share these
        // tables, and a reference count bumped per frame bounced one cache
        // line between the cores (a third of a dwarf capture's CPU).
        let t = m.and_then(|m| table(tables, m.dso, load));
        let (Some(m), Some(t)) = (m, t) else {
            return Stop::at(m.is_some(), false, first).unwrap_or(Stop::NoTables);
        };
        // Go's outermost functions end the stack (their CFI would step
        // on into the word above).
        if !t.roots.is_empty() {
            let base = t.base_avma(m.start, m.pgoff, m.end - m.start);
            if base.is_some_and(|b| t.is_root(addr.address_for_lookup().wrapping_sub(b))) {
                return Stop::Outermost;
            }
        }
        missed.set(false);
        trail.take();
        let row = expr_row::<A>(st, m, t, addr.address_for_lookup(), &mut regs);
        let step = match row {
            Some(row) => match cfi_step::<A>(t, &row, &mut regs, first, sampled, &mut read) {
                Ok(r) => Ok(r),
                Err(cfi::Fail::Read(a)) => Err(framehop::Error::CouldNotReadStack(a)),
                // perf reads such a word as 0 (or fails): a CFA of 0 whose
                // return address it cannot read. The stack ends, no frame.
                Err(cfi::Fail::ReadCfa) => return Stop::StackCopy,
                Err(cfi::Fail::Unsupported) => return Stop::Unsupported,
                Err(cfi::Fail::Backwards) => return Stop::Lost,
            },
            None => st.procs[&pid].unwind_frame(addr, &mut regs, &mut st.cache, &mut read),
        };
        match step {
            Ok(Some(ra)) => match FrameAddress::from_return_address(ra) {
                Some(next) => {
                    out.push(ra - 1);
                    addr = next;
                }
                // A return address of 0 ends a stack as the ABI says.
                None => return Stop::Outermost,
            },
            // A return address beyond the copy, in a map perf knows (the
            // thread's stack, recorded as a data map), reads as 0 in perf,
            // which libunwind takes as one more frame (printed as 0 - 1);
            // in no map, the read fails and the stack ends there.
            Err(framehop::Error::CouldNotReadStack(a)) if a >= sp && a.saturating_add(8) >= end => {
                if maps.find(a).is_some() {
                    out.push(u64::MAX);
                }
                return Stop::StackCopy;
            }
            Ok(None) => {
                if let Some(ra) = A::root(&trail.get()) {
                    out.push(ra - 1);
                }
                return Stop::Outermost;
            }
            Err(e) => return Stop::failed(&e, missed.get()),
        }
        if missed.get() {
            // The step went on without the caller's frame pointer (its
            // save slot lies outside the copy; framehop keeps the old
            // value). libunwind keeps the slot's address instead and
            // fails when a later frame needs the register: poison it.
            A::poison_fp(&mut regs);
        }
    }
    // More frames than perf prints: the root is not in the picture.
    Stop::Depth
}

/// Addresses whose [`cfi`] verdict is kept before that cache starts over
/// (about 40 MiB).
const ROWS_CACHED: usize = 1 << 20;

/// The CFI row at `lookup` (in map `m` of DSO tables `t`) when framehop
/// cannot take it ([`cfi::expr_row`]), looked up once per (DSO, address).
fn expr_row<A: UnwindArch>(
    st: &mut State<A>,
    m: &super::threads::Map,
    t: &DsoUnwind,
    lookup: u64,
    regs: &mut A::Regs,
) -> Option<Arc<cfi::Row>> {
    A::cfi_regs(regs)?;
    let base = t.base_avma(m.start, m.pgoff, m.end - m.start)?;
    let svma = lookup.wrapping_sub(base);
    if st.rows.len() >= ROWS_CACHED {
        st.rows.clear();
    }
    let cfi = &mut st.cfi;
    st.rows
        .entry((m.dso, svma))
        .or_insert_with(|| cfi::expr_row(t, svma, cfi).map(Arc::new))
        .clone()
}

/// One step through `row` ([`cfi::step`]): framehop's registers set to the
/// caller's, and its return address (`None`: the outermost frame).
fn cfi_step<A: UnwindArch>(
    t: &DsoUnwind,
    row: &cfi::Row,
    regs: &mut A::Regs,
    first: bool,
    sampled: &Regs<'_>,
    read: &mut dyn FnMut(u64) -> Result<u64, ()>,
) -> Result<Option<u64>, cfi::Fail> {
    let r = A::cfi_regs(regs).ok_or(cfi::Fail::Unsupported)?;
    let other = |n: u16| {
        first
            .then(|| cfi::perf_reg(n).and_then(|p| sampled.get(p)))
            .flatten()
    };
    let mut f = cfi::Frame {
        sp: r.sp(),
        bp: r.bp(),
        ip: r.ip(),
        other: &other,
        read,
    };
    let (cfa, bp, ra) = cfi::step(t, row, &mut f)?;
    if let Some(ra) = ra {
        if !first && cfa < r.sp() {
            return Err(cfi::Fail::Backwards);
        }
        r.set_sp(cfa);
        r.set_bp(bp);
        r.set_ip(ra);
    }
    Ok(ra)
}

fn build<A: UnwindArch>(
    tables: &mut Vec<Option<Option<Arc<DsoUnwind>>>>,
    maps: &Maps,
    load: &mut dyn FnMut(u32) -> Option<Arc<DsoUnwind>>,
) -> A::Unwinder {
    let mut u = A::Unwinder::default();
    for m in maps.iter() {
        let Some(t) = table(tables, m.dso, load).cloned() else {
            continue;
        };
        let Some(base) = t.base_avma(m.start, m.pgoff, m.end - m.start) else {
            continue;
        };
        u.add_module(Module::new(
            String::new(),
            m.start..m.end,
            base,
            t.section_info(),
        ));
    }
    u
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_test_binary_has_eh_frame_tables() {
        let exe = std::env::current_exe().unwrap();
        let t = load(&host_file(exe.to_str().unwrap(), None))
            .unwrap()
            .expect("tables");
        assert!(t.eh_frame_hdr.is_some() && t.eh_frame.is_some());
        // A mapping of the text segment from its page puts the ELF's
        // address 0 where the file's start would be, less the segment's
        // vaddr - offset shift.
        let &(off, _, vaddr) = t.segments.iter().find(|s| s.0 > 0).unwrap();
        let page = off & !0xfff;
        let base = t.base_avma(0x7f00_0000_0000, page, 0x10_0000).unwrap();
        assert_eq!(base, 0x7f00_0000_0000 - page + off - vaddr);
    }

    #[test]
    fn a_binary_not_of_go_has_no_go_roots() {
        let exe = std::env::current_exe().unwrap();
        let t = load(&host_file(exe.to_str().unwrap(), None))
            .unwrap()
            .unwrap();
        assert!(t.roots.is_empty());
    }

    #[test]
    fn where_the_walk_stopped_names_the_cause() {
        // An address in a file with tables: the walk goes on.
        assert_eq!(Stop::at(true, true, true), None);
        assert_eq!(Stop::at(true, true, false), None);
        // Mapped, but no tables (a stripped .eh_frame, anonymous or JIT
        // code); the sampled address in no mapping at all.
        assert_eq!(Stop::at(true, false, false), Some(Stop::NoTables));
        assert_eq!(Stop::at(false, false, true), Some(Stop::NoTables));
        // A return address in no mapping: a bad step, not missing tables.
        assert_eq!(Stop::at(false, false, false), Some(Stop::BadAddress));
        // A read outside the copy, and any failure after one: the copy.
        let read = framehop::Error::CouldNotReadStack(0x10);
        assert_eq!(Stop::failed(&read, false), Stop::StackCopy);
        let back = framehop::Error::FramepointerUnwindingMovedBackwards;
        assert_eq!(Stop::failed(&back, true), Stop::StackCopy);
        assert_eq!(Stop::failed(&back, false), Stop::Lost);
        assert_eq!(
            Stop::failed(&framehop::Error::DidNotAdvance, false),
            Stop::Lost
        );
        // Each cause has its own words, counted apart.
        let mut t = UnwindTally::default();
        for (i, s) in Stop::SHORT.iter().enumerate() {
            t.count(*s, 1 << i);
        }
        t.count(Stop::Outermost, 1000);
        assert_eq!(t.short, [1, 2, 4, 8, 16, 32]);
        assert_eq!(t.truncated(), 63);
        let words: std::collections::HashSet<_> = Stop::SHORT.iter().map(|s| s.as_str()).collect();
        assert_eq!(words.len(), Stop::SHORT.len());
    }

    #[test]
    fn base_from_the_segment_that_starts_in_the_mapping() {
        // lld's layout: the text segment starts mid-page, 0x1000 above its
        // file offset.
        let t = DsoUnwind {
            segments: vec![(0, 0x16be4, 0), (0x16bf0, 0x477f0, 0x17bf0)],
            ..Default::default()
        };
        let start = 0x5592_7cf5_d000;
        assert_eq!(t.base_avma(start, 0x16000, 0x49000), Some(start - 0x17000));
        assert_eq!(
            t.base_avma(0x5592_7cf4_6000, 0, 0x17000),
            Some(0x5592_7cf4_6000)
        );
        assert_eq!(t.base_avma(start, 0x90000, 0x1000), None);
    }

    /// The files of `path` on this host (or under `symfs`).
    fn host_file(path: &str, symfs: Option<&std::path::Path>) -> Resolved {
        let search = crate::symbolize::sources::Search {
            symfs: symfs.map(std::path::Path::to_path_buf),
            host: symfs.is_none().then(|| "/".into()),
            ..Default::default()
        };
        crate::symbolize::sources::resolve(path, &[], &search)
    }

    /// glibc's `__vfork` pops its return address into RDI around the
    /// syscall (`DW_CFA_register`): in the sampled frame the step takes
    /// it from the sampled RDI, as perf does, where framehop stopped.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn a_return_address_in_a_register_is_read_from_the_sampled_one() {
        use object::{Object, ObjectSymbol};
        let libc = "/usr/lib/x86_64-linux-gnu/libc.so.6";
        let t = load(&host_file(libc, None))
            .unwrap()
            .expect("libc's tables");
        let bytes = std::fs::read(libc).unwrap();
        let elf = object::File::parse(&*bytes).unwrap();
        let vfork = (elf.dynamic_symbols())
            .find(|s| s.name() == Ok("__vfork"))
            .expect("__vfork in libc's .dynsym")
            .address();
        let mut ctx = gimli::UnwindContext::new();
        let rdi = |n: u16| (n == 5).then_some(0x7f00_1234_5678);
        let stepped = (vfork..vfork + 0x20).any(|svma| {
            let Some(row) = cfi::expr_row(&t, svma, &mut ctx) else {
                return false;
            };
            let mut read = |_| Err(());
            let mut f = cfi::Frame {
                sp: 0x1000,
                bp: 0,
                ip: svma,
                other: &rdi,
                read: &mut read,
            };
            matches!(
                cfi::step(&t, &row, &mut f),
                Ok((0x1000, _, Some(0x7f00_1234_5678)))
            )
        });
        assert!(
            stepped,
            "no row of __vfork ({vfork:#x}) took its return address from RDI"
        );
    }

    #[test]
    fn missing_or_climbing_paths_have_no_tables() {
        let root = tempfile::tempdir().unwrap();
        assert!(matches!(
            load(&host_file("/no/such/lib.so", Some(root.path()))),
            Ok(None)
        ));
        assert!(matches!(
            load(&host_file("/../../proc/self/exe", Some(root.path()))),
            Ok(None)
        ));
        assert!(matches!(load(&Resolved::default()), Ok(None)));
    }
}
