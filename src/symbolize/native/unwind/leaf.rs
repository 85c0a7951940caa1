//! perf's arm64 rule for frame-pointer call chains (perf 6.1,
//! `tools/perf/util/arm64-frame-pointer-unwind-support.c` and
//! `thread__resolve_callchain_sample` in `machine.c`): the kernel's
//! frame-record walk misses the caller of a leaf function that has not
//! pushed a frame record (its return address is still in the link
//! register), so on arm64 perf records LR with `-g` and, when it prints
//! the chain, unwinds one step with libunwind from PC (the chain's first
//! user entry), LR and SP = 0, with no stack memory and no other register.
//! That step succeeds only where the CFI at PC keeps the return address in
//! LR and computes the CFA from SP (a frameless leaf, or a prologue before
//! the push); it fails wherever a register must be read from memory or
//! x29 is needed. Where no FDE covers PC, libunwind recognizes the first
//! instruction of a PLT entry (`adrp x16; ldr x17; add x16; br x17`) and
//! takes LR there too. On success the frame LR - 1 (libunwind's caller
//! address) goes before the chain's second user entry, unless it equals
//! that entry.

use gimli::{
    AArch64, BaseAddresses, CallFrameInstruction, CfaRule, DebugFrame, EhFrame, EhFrameHdr,
    EndianSlice, FrameDescriptionEntry, LittleEndian, RegisterRule, UnwindContext, UnwindSection,
    UnwindTableRow,
};

use super::DsoUnwind;

impl DsoUnwind {
    /// Whether libunwind's one step from `svma` (an address in this DSO's
    /// own address space) with only PC, LR and SP = 0 known takes the
    /// return address from LR.
    pub fn return_address_in_lr(&self, svma: u64) -> bool {
        match self.row_rule(svma) {
            Some(in_lr) => in_lr,
            None => self.plt_entry_start(svma),
        }
    }

    /// `Some(in LR)` when an FDE covers `svma`, `None` when none does.
    fn row_rule(&self, svma: u64) -> Option<bool> {
        let mut ctx = Box::new(UnwindContext::new());
        if let Some((range, bytes)) = &self.eh_frame {
            let eh = EhFrame::new(bytes, LittleEndian);
            let mut bases = BaseAddresses::default().set_eh_frame(range.start);
            if let Some(t) = &self.text {
                bases = bases.set_text(t.start);
            }
            if let Some(g) = &self.got {
                bases = bases.set_got(g.start);
            }
            let fde = match &self.eh_frame_hdr {
                Some((hr, hb)) => {
                    bases = bases.set_eh_frame_hdr(hr.start);
                    let hdr = EhFrameHdr::new(hb, LittleEndian).parse(&bases, 8).ok()?;
                    let table = hdr.table()?;
                    table
                        .fde_for_address(&eh, &bases, svma, EhFrame::cie_from_offset)
                        .ok()?
                }
                None => eh
                    .fde_for_address(&bases, svma, EhFrame::cie_from_offset)
                    .ok()?,
            };
            let row = fde
                .unwind_info_for_address(&eh, &bases, &mut ctx, svma)
                .ok()?;
            return Some(lr_only(row) && !undefines_lr(&eh, &bases, &fde));
        }
        let bytes = self.debug_frame.as_ref()?;
        let df = DebugFrame::new(bytes, LittleEndian);
        let bases = BaseAddresses::default();
        let fde = df
            .fde_for_address(&bases, svma, DebugFrame::cie_from_offset)
            .ok()?;
        let row = fde
            .unwind_info_for_address(&df, &bases, &mut ctx, svma)
            .ok()?;
        Some(lr_only(row) && !undefines_lr(&df, &bases, &fde))
    }

    /// The first instruction of a PLT entry (after the 32-byte PLT0 header,
    /// entries of 16 bytes): what libunwind's `is_plt_entry` matches.
    fn plt_entry_start(&self, svma: u64) -> bool {
        self.plt.as_ref().is_some_and(|p| {
            svma >= p.start + 32 && svma < p.end && (svma - p.start).is_multiple_of(16)
        })
    }
}

/// The row computes the CFA from SP and leaves the return address in LR
/// (no rule, or "same value").
fn lr_only(row: &UnwindTableRow<usize>) -> bool {
    let sp_based = matches!(row.cfa(), CfaRule::RegisterAndOffset { register, .. } if *register == AArch64::SP);
    let lr = matches!(
        row.register(AArch64::X30),
        RegisterRule::Undefined | RegisterRule::SameValue
    );
    sp_based && lr
}

/// The CIE or FDE says `DW_CFA_undefined x30` (the outermost frame, as in
/// `_start`): libunwind ends the stack there instead of taking LR (gimli
/// reads an explicit "undefined" as no rule, so the instructions are
/// looked at).
fn undefines_lr<'a, S: UnwindSection<EndianSlice<'a, LittleEndian>>>(
    section: &S,
    bases: &BaseAddresses,
    fde: &FrameDescriptionEntry<EndianSlice<'a, LittleEndian>>,
) -> bool {
    let undefined = |i: &CallFrameInstruction<usize>| matches!(i, CallFrameInstruction::Undefined { register } if *register == AArch64::X30);
    let mut cie = fde.cie().instructions(section, bases);
    let mut own = fde.instructions(section, bases);
    std::iter::from_fn(|| cie.next().ok().flatten())
        .chain(std::iter::from_fn(|| own.next().ok().flatten()))
        .any(|i| undefined(&i))
}
