//! perf's arm64 rule for frame-pointer call chains (perf 6.1,
//! `tools/perf/util/arm64-frame-pointer-unwind-support.c` and
//! `thread__resolve_callchain_sample` in `machine.c`): the kernel's
//! frame-record walk misses the caller of a leaf function that has not
//! pushed a frame record (its return address is still in the link
//! register), so on arm64 perf records LR with `-g` and, when it prints
//! the chain, unwinds one step with libunwind (1.6.2, Debian 12) from PC
//! (the chain's first user entry), LR and SP = 0: no other register, and
//! no memory but the executable mappings of files. On success the frame
//! LR - 1 (libunwind's caller address) goes before the chain's second user
//! entry, unless it equals that entry.
//!
//! Whether that step yields LR follows libunwind's `unw_step` for aarch64:
//! when its DWARF step fails before any register location was replaced
//! (no FDE covers PC; the FDE's CIE or FDE needs a pointer read from
//! memory perf does not have, as the indirect personality pointer of C++
//! code, `DW.ref.__gxx_personality_v0` in `.data`; the CFA is computed
//! from a register other than SP, e.g. x29), it falls back to LR. When the
//! step gets as far as the return address, that is LR only where the row
//! leaves x30 alone (a frameless leaf, a prologue before the push); a saved
//! x30 must be read from the stack, which fails, and an explicit
//! `DW_CFA_undefined x30` (the outermost frame, `_start`) ends the stack.

use gimli::{
    AArch64, BaseAddresses, CallFrameInstruction, CfaRule, DebugFrame, EhFrame, EhFrameHdr,
    EndianSlice, FrameDescriptionEntry, LittleEndian, Pointer, RegisterRule, UnwindContext,
    UnwindSection, UnwindTableRow,
};

use super::DsoUnwind;

type Fde<'a> = FrameDescriptionEntry<EndianSlice<'a, LittleEndian>>;

impl DsoUnwind {
    /// Whether libunwind's one step from `svma` (an address in this DSO's
    /// own address space) with only PC, LR and SP = 0 known takes the
    /// return address from LR.
    pub fn return_address_in_lr(&self, svma: u64) -> bool {
        let mut ctx = Box::new(UnwindContext::new());
        if let Some((range, bytes)) = &self.eh_frame {
            let eh = EhFrame::new(bytes, LittleEndian);
            let bases = self.eh_bases(range.start);
            let Some(fde) = self.eh_fde(&eh, &bases, svma) else {
                return true;
            };
            return self.takes_lr(&eh, &bases, &fde, &mut ctx, svma);
        }
        let Some(bytes) = &self.debug_frame else {
            return true;
        };
        let df = DebugFrame::new(bytes, LittleEndian);
        let bases = BaseAddresses::default();
        match df.fde_for_address(&bases, svma, DebugFrame::cie_from_offset) {
            Ok(fde) => self.takes_lr(&df, &bases, &fde, &mut ctx, svma),
            Err(_) => true,
        }
    }

    fn eh_bases(&self, eh_frame: u64) -> BaseAddresses {
        let mut bases = BaseAddresses::default().set_eh_frame(eh_frame);
        if let Some(t) = &self.text {
            bases = bases.set_text(t.start);
        }
        if let Some(g) = &self.got {
            bases = bases.set_got(g.start);
        }
        if let Some((hr, _)) = &self.eh_frame_hdr {
            bases = bases.set_eh_frame_hdr(hr.start);
        }
        bases
    }

    /// The FDE covering `svma`, found through `.eh_frame_hdr` as perf's
    /// `find_proc_info` does (else by a scan of `.eh_frame`).
    fn eh_fde<'a>(
        &'a self,
        eh: &EhFrame<EndianSlice<'a, LittleEndian>>,
        bases: &BaseAddresses,
        svma: u64,
    ) -> Option<Fde<'a>> {
        let Some((_, hb)) = &self.eh_frame_hdr else {
            return eh
                .fde_for_address(bases, svma, EhFrame::cie_from_offset)
                .ok();
        };
        let hdr = EhFrameHdr::new(hb, LittleEndian).parse(bases, 8).ok()?;
        hdr.table()?
            .fde_for_address(eh, bases, svma, EhFrame::cie_from_offset)
            .ok()
    }

    /// libunwind's step from `svma` under `fde`: LR unless it got past the
    /// point of no return (register locations replaced) first.
    fn takes_lr<'a, S: UnwindSection<EndianSlice<'a, LittleEndian>>>(
        &self,
        section: &S,
        bases: &BaseAddresses,
        fde: &Fde<'a>,
        ctx: &mut UnwindContext<usize>,
        svma: u64,
    ) -> bool {
        if self.reads_unmapped(fde) {
            return true;
        }
        let Ok(row) = fde.unwind_info_for_address(section, bases, ctx, svma) else {
            return true;
        };
        if !sp_based(row) {
            return true;
        }
        match row.register(AArch64::X30) {
            RegisterRule::Undefined => !undefines_lr(section, bases, fde),
            RegisterRule::SameValue => true,
            RegisterRule::Register(r) => r == AArch64::X30,
            _ => false,
        }
    }

    /// Parsing the CIE and FDE reads an indirect personality or LSDA
    /// pointer from outside the file's executable segments (perf records
    /// only executable mappings): libunwind cannot read the FDE.
    fn reads_unmapped(&self, fde: &Fde<'_>) -> bool {
        [fde.cie().personality(), fde.lsda()]
            .into_iter()
            .flatten()
            .any(|p| match p {
                Pointer::Indirect(a) => !self.exec.iter().any(|r| r.contains(&a)),
                Pointer::Direct(_) => false,
            })
    }
}

/// The row computes the CFA from SP (the one register perf gives besides
/// PC and LR).
fn sp_based(row: &UnwindTableRow<usize>) -> bool {
    matches!(row.cfa(), CfaRule::RegisterAndOffset { register, .. } if *register == AArch64::SP)
}

/// The CIE or FDE says `DW_CFA_undefined x30` (the outermost frame, as in
/// `_start`): libunwind ends the stack there instead of taking LR (gimli
/// reads an explicit "undefined" as no rule, so the instructions are
/// looked at).
fn undefines_lr<'a, S: UnwindSection<EndianSlice<'a, LittleEndian>>>(
    section: &S,
    bases: &BaseAddresses,
    fde: &Fde<'a>,
) -> bool {
    let undefined = |i: &CallFrameInstruction<usize>| matches!(i, CallFrameInstruction::Undefined { register } if *register == AArch64::X30);
    let mut cie = fde.cie().instructions(section, bases);
    let mut own = fde.instructions(section, bases);
    std::iter::from_fn(|| cie.next().ok().flatten())
        .chain(std::iter::from_fn(|| own.next().ok().flatten()))
        .any(|i| undefined(&i))
}
