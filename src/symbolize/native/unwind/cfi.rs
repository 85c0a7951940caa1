//! The x86-64 CFI rows framehop cannot take, evaluated here as perf's
//! libunwind evaluates them: a CFA given by a DWARF expression
//! (`DW_CFA_def_cfa_expression`), or by a register framehop does not track,
//! and a saved RBP or return address given by one (`DW_CFA_expression`).
//! GCC's stack-realigning prologues (`-mstackrealign`,
//! `force_align_arg_pointer`, an over-aligned local; jemalloc's
//! `do_rallocx`) write exactly these:
//!
//! ```text
//! lea  0x8(%rsp),%r10     CFA = r10
//! and  $-64,%rsp
//! push -0x8(%r10)
//! push %rbp               rbp = [rbp]  (DW_OP_breg6 0, once rbp is set)
//! mov  %rsp,%rbp
//! push %r10               CFA = [rbp - 8]  (DW_OP_breg6 -8; DW_OP_deref)
//! ```
//!
//! framehop 0.15 evaluates no expression that reads memory: it falls back
//! to the frame pointer there, which gets the return address right but not
//! the caller's stack pointer, and the walk derails one frame later. One
//! step through such a row is taken here (gimli's expression evaluator,
//! reading the stack copy); the registers it recovers go back to framehop
//! for the next frames. As in libunwind, the return address is read at
//! once and the saved RBP only as far as it can be: the epilogue's rows
//! keep `RBP = [RBP]` after `pop %rbp`, where the slot may be anything.

use gimli::{
    BaseAddresses, CfaRule, EhFrame, EhFrameHdr, EndianSlice, Evaluation, EvaluationResult,
    Expression, LittleEndian, Location, Register, RegisterRule, UnitOffset, UnwindContext,
    UnwindSection, Value, X86_64,
};

use super::DsoUnwind;

type Slice<'a> = EndianSlice<'a, LittleEndian>;

/// The rules of one CFI row that need this module.
#[derive(Debug, Clone)]
pub struct Row {
    cfa: CfaRule<usize>,
    bp: RegisterRule<usize>,
    ra: RegisterRule<usize>,
}

/// Why a step through a [`Row`] could not be taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fail {
    /// A rule or an expression operation this evaluator does not know, or
    /// a register it cannot know in a caller's frame.
    Unsupported,
    /// A read outside the stack copy.
    Read(u64),
    /// A read outside the stack copy while computing the CFA (perf reads
    /// it as 0 or fails; either way it cannot read the return address).
    ReadCfa,
    /// The caller's stack pointer (the CFA) lies below the frame's.
    Backwards,
}

/// The row at `svma` (an address of `t`'s ELF address space) when it needs
/// this module: a CFA that is an expression or comes from a register other
/// than RSP and RBP, an expression for the saved RBP or return address, or
/// a return address in another register.
/// `None`: framehop's rules cover it (or `t` has no `.eh_frame_hdr`, or no
/// FDE covers the address).
pub fn expr_row(t: &DsoUnwind, svma: u64, ctx: &mut UnwindContext<usize>) -> Option<Row> {
    let (hdr_at, hdr) = t.eh_frame_hdr.as_ref()?;
    let (eh_at, eh) = t.eh_frame.as_ref()?;
    let mut bases = BaseAddresses::default()
        .set_eh_frame_hdr(hdr_at.start)
        .set_eh_frame(eh_at.start);
    if let Some(text) = &t.text {
        bases = bases.set_text(text.start);
    }
    if let Some(got) = &t.got {
        bases = bases.set_got(got.start);
    }
    let hdr = EhFrameHdr::new(hdr, LittleEndian).parse(&bases, 8).ok()?;
    let mut section = EhFrame::new(eh, LittleEndian);
    section.set_address_size(8);
    let row = hdr
        .table()?
        .unwind_info_for_address(&section, &bases, ctx, svma, EhFrame::cie_from_offset)
        .ok()?;
    let is_expr = |r: &RegisterRule<usize>| {
        matches!(
            r,
            RegisterRule::Expression(_) | RegisterRule::ValExpression(_)
        )
    };
    let (bp, ra) = (row.register(X86_64::RBP), row.register(X86_64::RA));
    let needed = match row.cfa() {
        CfaRule::RegisterAndOffset { register, .. } => {
            !matches!(*register, X86_64::RSP | X86_64::RBP)
        }
        CfaRule::Expression(_) => true,
    };
    // A return address kept in a register (`DW_CFA_register`: glibc's
    // `__vfork` pops it into RDI around the syscall) is known in the
    // sampled frame only; framehop takes no such rule and stops there.
    let in_reg = matches!(ra, RegisterRule::Register(_));
    (needed || is_expr(&bp) || is_expr(&ra) || in_reg).then(|| Row {
        cfa: row.cfa().clone(),
        bp,
        ra,
    })
}

/// The registers one step works with: the frame's RSP, RBP and IP, the
/// sampled registers (by DWARF number) in the first frame only, and the
/// stack copy.
pub struct Frame<'f> {
    pub sp: u64,
    pub bp: u64,
    pub ip: u64,
    /// Another register by DWARF number (`None` in a caller's frame:
    /// nothing saved it).
    pub other: &'f dyn Fn(u16) -> Option<u64>,
    pub read: &'f mut dyn FnMut(u64) -> Result<u64, ()>,
}

impl Frame<'_> {
    fn reg(&self, r: Register) -> Result<u64, Fail> {
        match r {
            X86_64::RSP => Ok(self.sp),
            X86_64::RBP => Ok(self.bp),
            X86_64::RA => Ok(self.ip),
            Register(n) => (self.other)(n).ok_or(Fail::Unsupported),
        }
    }

    fn load(&mut self, a: u64) -> Result<u64, Fail> {
        (self.read)(a).map_err(|()| Fail::Read(a))
    }
}

/// The caller's (CFA, RBP, return address) by `row` from `f`, the CFI
/// rows' expressions taken from `t`'s `.eh_frame`; a return address of
/// `None`: the row says there is no caller (an undefined return address).
pub fn step(t: &DsoUnwind, row: &Row, f: &mut Frame<'_>) -> Result<(u64, u64, Option<u64>), Fail> {
    let eh = t.eh_frame.as_ref().map_or(&[][..], |(_, b)| &b[..]);
    let mut section = EhFrame::new(eh, LittleEndian);
    section.set_address_size(8);
    let expr = |e: &gimli::UnwindExpression<usize>| e.get(&section).map_err(|_| Fail::Unsupported);
    let cfa = match &row.cfa {
        CfaRule::RegisterAndOffset { register, offset } => {
            f.reg(*register)?.wrapping_add(*offset as u64)
        }
        CfaRule::Expression(e) => eval(expr(e)?, None, f).map_err(|e| match e {
            Fail::Read(_) => Fail::ReadCfa,
            e => e,
        })?,
    };
    let saved = |rule: &RegisterRule<usize>, f: &mut Frame<'_>| -> Result<Saved, Fail> {
        Ok(match rule {
            RegisterRule::Undefined => Saved::Undefined,
            RegisterRule::Offset(n) => Saved::At(cfa.wrapping_add(*n as u64)),
            RegisterRule::ValOffset(n) => Saved::Value(cfa.wrapping_add(*n as u64)),
            RegisterRule::Register(r) => Saved::Value(f.reg(*r)?),
            RegisterRule::Expression(e) => Saved::At(eval(expr(e)?, Some(cfa), f)?),
            RegisterRule::ValExpression(e) => Saved::Value(eval(expr(e)?, Some(cfa), f)?),
            _ => return Err(Fail::Unsupported),
        })
    };
    // libunwind keeps where the caller's RBP was saved and reads it only
    // when a later frame needs the register: a slot it cannot read does
    // not end the stack (0 here: the walk forgets the register, as it
    // does a frame pointer whose slot lies outside the copy). GCC's
    // realigning epilogues need this: after `pop %rbp` their rows still
    // say RBP = [RBP], and the caller's RBP is often no pointer at all.
    let bp = match &row.bp {
        RegisterRule::SameValue => f.bp,
        rule => match saved(rule, f)? {
            Saved::Undefined => f.bp,
            Saved::Value(v) => v,
            Saved::At(a) => f.load(a).unwrap_or(0),
        },
    };
    // The return address is read at once (libunwind needs it to go on).
    let ra = match &row.ra {
        RegisterRule::SameValue => return Err(Fail::Unsupported),
        rule => match saved(rule, f)? {
            Saved::Undefined => None,
            Saved::Value(v) => Some(v),
            Saved::At(a) => Some(f.load(a)?),
        },
    };
    Ok((cfa, bp, ra))
}

/// Where a register rule puts the caller's value.
enum Saved {
    /// Nowhere: the register is undefined in the caller.
    Undefined,
    /// In the stack word at this address.
    At(u64),
    /// This value itself.
    Value(u64),
}

/// The address a CFI expression computes (with `push` on its stack first:
/// the CFA, for a register rule's expression).
fn eval(e: Expression<Slice<'_>>, push: Option<u64>, f: &mut Frame<'_>) -> Result<u64, Fail> {
    let encoding = gimli::Encoding {
        format: gimli::Format::Dwarf32,
        version: 4,
        address_size: 8,
    };
    let mut ev = Evaluation::new(e.0, encoding);
    if let Some(v) = push {
        ev.set_initial_value(v);
    }
    let no = |_| Fail::Unsupported;
    let mut r = ev.evaluate().map_err(no)?;
    loop {
        r = match r {
            EvaluationResult::Complete => break,
            EvaluationResult::RequiresRegister {
                register,
                base_type: UnitOffset(0),
            } => ev
                .resume_with_register(Value::Generic(f.reg(register)?))
                .map_err(no)?,
            EvaluationResult::RequiresMemory {
                address,
                size,
                space: None,
                base_type: UnitOffset(0),
            } => {
                let v = f.load(address)?;
                let v = if size >= 8 {
                    v
                } else {
                    v & ((1u64 << (8 * u32::from(size))) - 1)
                };
                ev.resume_with_memory(Value::Generic(v)).map_err(no)?
            }
            _ => return Err(Fail::Unsupported),
        };
    }
    match ev.as_result() {
        [piece] => match piece.location {
            Location::Address { address } => Ok(address),
            _ => Err(Fail::Unsupported),
        },
        _ => Err(Fail::Unsupported),
    }
}

/// The perf register number (`PERF_SAMPLE_REGS_USER`, x86-64) of DWARF
/// register `n`: DWARF counts rax, rdx, rcx, rbx, rsi, rdi, rbp, rsp,
/// r8-r15; perf ax, bx, cx, dx, si, di, bp, sp, ip, flags, segments, r8-r15.
pub fn perf_reg(n: u16) -> Option<u64> {
    Some(match n {
        0 => 0,
        1 => 3,
        2 => 2,
        3 => 1,
        4..=7 => u64::from(n),
        8..=15 => u64::from(n) + 8,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// A caller's frame (no other registers) reading with `read`.
    fn on<'f>(sp: u64, bp: u64, read: &'f mut dyn FnMut(u64) -> Result<u64, ()>) -> Frame<'f> {
        Frame {
            sp,
            bp,
            ip: 0x40_1234,
            other: &|_| None,
            read,
        }
    }

    /// Reads `stack`, words from address 0x1000.
    fn reader(stack: &[u64]) -> impl FnMut(u64) -> Result<u64, ()> + '_ {
        move |a| {
            let i = a.checked_sub(0x1000).ok_or(())? / 8;
            stack.get(i as usize).copied().ok_or(())
        }
    }

    /// A `DsoUnwind` whose `.eh_frame` is `bytes` (the expressions a row
    /// points to live there).
    fn with_eh(bytes: &[u8]) -> DsoUnwind {
        DsoUnwind {
            eh_frame: Some((0..bytes.len() as u64, std::sync::Arc::from(bytes))),
            ..Default::default()
        }
    }

    #[test]
    fn a_realigned_frame_is_stepped_through_its_cfa_expression() {
        // GCC's realigning prologue, after `push %r10`: CFA = [rbp - 8]
        // (DW_OP_breg6 -8; DW_OP_deref), rbp = [rbp] (DW_OP_breg6 0),
        // return address at CFA - 8.
        let code = [0x76, 0x78, 0x06, 0x76, 0x00];
        let t = with_eh(&code);
        let row = Row {
            cfa: CfaRule::Expression(gimli::UnwindExpression {
                offset: 0,
                length: 3,
            }),
            bp: RegisterRule::Expression(gimli::UnwindExpression {
                offset: 3,
                length: 2,
            }),
            ra: RegisterRule::Offset(-8),
        };
        // rbp = 0x1040: [0x1040] = caller's rbp, [0x1038] = saved r10
        // (the CFA, 0x1080); the return address at 0x1078.
        let mut stack = [0u64; 32];
        stack[8] = 0x2000; // 0x1040
        stack[7] = 0x1080; // 0x1038
        stack[15] = 0x40_5678; // 0x1078
        let mut read = reader(&stack);
        let mut f = on(0x1020, 0x1040, &mut read);
        assert_eq!(
            step(&t, &row, &mut f),
            Ok((0x1080, 0x2000, Some(0x40_5678)))
        );
        // The same with the saved r10 outside the copy: the CFA cannot be
        // read (perf ends the stack there, with no frame).
        let short = &stack[..7];
        let mut read = reader(short);
        let mut f = on(0x1020, 0x1040, &mut read);
        assert_eq!(step(&t, &row, &mut f), Err(Fail::ReadCfa));
    }

    #[test]
    fn the_first_frame_may_take_its_cfa_from_a_sampled_register() {
        // Between `lea 0x8(%rsp),%r10` and `push %r10`: CFA = r10.
        let t = with_eh(&[]);
        let row = Row {
            cfa: CfaRule::RegisterAndOffset {
                register: Register(10),
                offset: 0,
            },
            bp: RegisterRule::SameValue,
            ra: RegisterRule::Offset(-8),
        };
        let stack = [0u64, 0x40_9999];
        let mut read = reader(&stack);
        let mut f = on(0x1000, 0x3000, &mut read);
        // A caller's frame knows no r10.
        assert_eq!(step(&t, &row, &mut f), Err(Fail::Unsupported));
        f.other = &|n| (n == 10).then_some(0x1010);
        assert_eq!(
            step(&t, &row, &mut f),
            Ok((0x1010, 0x3000, Some(0x40_9999)))
        );
    }

    #[test]
    fn unknown_operations_are_unsupported_and_undefined_ra_ends_the_stack() {
        // DW_OP_call_frame_cfa inside a CFA expression: not evaluable.
        let t = with_eh(&[0x9c]);
        let row = Row {
            cfa: CfaRule::Expression(gimli::UnwindExpression {
                offset: 0,
                length: 1,
            }),
            bp: RegisterRule::SameValue,
            ra: RegisterRule::Offset(-8),
        };
        let mut read = reader(&[]);
        let mut f = on(0x1000, 0, &mut read);
        assert_eq!(step(&t, &row, &mut f), Err(Fail::Unsupported));
        let row = Row {
            cfa: CfaRule::RegisterAndOffset {
                register: X86_64::RSP,
                offset: 8,
            },
            bp: RegisterRule::Undefined,
            ra: RegisterRule::Undefined,
        };
        assert_eq!(step(&t, &row, &mut f), Ok((0x1008, 0, None)));
    }

    /// A `DsoUnwind` whose `.eh_frame` (at 0x200) holds one FDE over
    /// `pc` with `instructions`, under GCC's x86-64 CIE (CFA = RSP + 8,
    /// return address at CFA - 8), and whose `.eh_frame_hdr` (at 0x100)
    /// indexes it, as the linker writes them.
    fn one_fde(pc: std::ops::Range<u64>, instructions: &[u8]) -> DsoUnwind {
        let (hdr_at, eh_at) = (0x100u64, 0x200u64);
        let pad = |v: &mut Vec<u8>| v.resize(v.len().next_multiple_of(8), 0);
        let rel = |to: u64, from: u64| (to.wrapping_sub(from) as i32).to_le_bytes();
        // CIE: id 0, version 1, "zR", code 1, data -8, RA r16, pointers
        // pc-relative sdata4; def_cfa rsp+8, offset r16 at cfa-8.
        let mut cie = vec![0, 0, 0, 0, 1, b'z', b'R', 0, 1, 0x78, 16, 1, 0x1b];
        cie.extend([0x0c, 7, 8, 0x90, 1]);
        pad(&mut cie);
        let mut eh = (cie.len() as u32).to_le_bytes().to_vec();
        eh.extend(&cie);
        let fde_at = eh.len() as u64;
        let mut fde = ((fde_at + 4) as u32).to_le_bytes().to_vec(); // to the CIE
        fde.extend(rel(pc.start, eh_at + fde_at + 8));
        fde.extend(((pc.end - pc.start) as u32).to_le_bytes());
        fde.push(0); // no augmentation data
        fde.extend(instructions);
        pad(&mut fde);
        eh.extend((fde.len() as u32).to_le_bytes());
        eh.extend(fde);
        eh.extend([0; 4]);
        // version 1; eh_frame_ptr pcrel sdata4, count udata4, table
        // datarel sdata4; one entry.
        let mut hdr = vec![1, 0x1b, 0x03, 0x3b];
        hdr.extend(rel(eh_at, hdr_at + 4));
        hdr.extend(1u32.to_le_bytes());
        hdr.extend(rel(pc.start, hdr_at));
        hdr.extend(rel(eh_at + fde_at, hdr_at));
        let section = |at: u64, b: Vec<u8>| Some((at..at + b.len() as u64, Arc::from(b)));
        DsoUnwind {
            eh_frame_hdr: section(hdr_at, hdr),
            eh_frame: section(eh_at, eh),
            ..Default::default()
        }
    }

    /// The FDE of a stack-realigning function of pyvelox 0.2.0's
    /// `libvelox.so` (at 0x52c5250, in `rewriteSplitToMapCall`), its
    /// instructions as the file has them. Its epilogue:
    ///
    /// ```text
    /// 52c570e pop %rbx; pop %r10; pop %r12; ... pop %rbp   CFA = r10
    /// 52c571a lea -0x8(%r10),%rsp
    /// 52c571e ret                                           CFA = rsp + 8
    /// ```
    ///
    /// Its rows keep `RBP = [RBP]` (`DW_CFA_expression rbp: DW_OP_breg6 0`)
    /// after `pop %rbp`, where RBP is the caller's own register.
    const VELOX_REALIGNED: [u8; 58] = [
        0x45, 0x0c, 0x0a, 0x00, 0x50, 0x10, 0x06, 0x02, 0x76, 0x00, 0x48, 0x10, 0x0f, 0x02, 0x76,
        0x78, 0x10, 0x0e, 0x02, 0x76, 0x70, 0x10, 0x0d, 0x02, 0x76, 0x68, 0x10, 0x0c, 0x02, 0x76,
        0x60, 0x46, 0x0f, 0x03, 0x76, 0x58, 0x06, 0x48, 0x10, 0x03, 0x02, 0x76, 0x50, 0x03, 0x96,
        0x04, 0x0a, 0x0c, 0x0a, 0x00, 0x4d, 0x0c, 0x07, 0x08, 0x42, 0x0b, 0x00, 0x00,
    ];

    #[test]
    fn an_unreadable_saved_rbp_does_not_end_the_stack() {
        // The sample of CI's q4 (thread CPUThreadPool1): IP at the `ret`,
        // RBP 0xc350 (the caller keeps a count in it), the return address
        // at RSP. perf's libunwind keeps RBP's location, never reads it
        // (the callers save and restore RBP themselves) and unwinds the
        // stack whole; jobprof read [0xc350], failed and stopped at the
        // leaf.
        let t = one_fde(0x52c_5250..0x52c_584c, &VELOX_REALIGNED);
        let mut ctx = UnwindContext::new();
        let row = expr_row(&t, 0x52c_571e, &mut ctx).expect("RBP's rule is an expression");
        assert_eq!(
            row.cfa,
            CfaRule::RegisterAndOffset {
                register: X86_64::RSP,
                offset: 8
            }
        );
        let stack = [0x52c_8ace_u64, 0x1234];
        let mut read = reader(&stack);
        let mut f = on(0x1000, 0xc350, &mut read);
        // The caller's RSP and return address; its RBP unknown (0).
        assert_eq!(step(&t, &row, &mut f), Ok((0x1008, 0, Some(0x52c_8ace))));
        // Where RBP's slot is in the copy, its word is the caller's RBP.
        let mut read = reader(&stack);
        let mut f = on(0x1000, 0x1008, &mut read);
        assert_eq!(
            step(&t, &row, &mut f),
            Ok((0x1008, 0x1234, Some(0x52c_8ace)))
        );
        // The return address itself must be read: past the copy, no step.
        let mut read = reader(&[]);
        let mut f = on(0x1000, 0xc350, &mut read);
        assert_eq!(step(&t, &row, &mut f), Err(Fail::Read(0x1000)));
    }

    #[test]
    fn the_velox_fde_s_rows_are_read_as_readelf_reads_them() {
        let t = one_fde(0x52c_5250..0x52c_584c, &VELOX_REALIGNED);
        let mut ctx = UnwindContext::new();
        // The prologue's first instruction: CFA = RSP + 8, nothing for us.
        assert!(expr_row(&t, 0x52c_5250, &mut ctx).is_none());
        // The body: CFA = [RBP - 40] (DW_OP_breg6 -40; DW_OP_deref).
        let body = expr_row(&t, 0x52c_5300, &mut ctx).unwrap();
        assert!(matches!(body.cfa, CfaRule::Expression(_)));
        // The epilogue after `pop %r10`: CFA = r10.
        let epilogue = expr_row(&t, 0x52c_5711, &mut ctx).unwrap();
        assert_eq!(
            epilogue.cfa,
            CfaRule::RegisterAndOffset {
                register: Register(10),
                offset: 0
            }
        );
        // Past the FDE: no row.
        assert!(expr_row(&t, 0x52c_584c, &mut ctx).is_none());
    }

    #[test]
    fn dwarf_registers_map_to_perf_registers() {
        assert_eq!(perf_reg(1), Some(3)); // rdx
        assert_eq!(perf_reg(3), Some(1)); // rbx
        assert_eq!(perf_reg(7), Some(7)); // rsp
        assert_eq!(perf_reg(10), Some(18)); // r10
        assert_eq!(perf_reg(16), None);
    }
}
