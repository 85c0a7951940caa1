//! Whether the native symbolizer can stand in for `perf script` on a shard
//! ([`check`]): decided from the file's header (the events' sample formats
//! and user-register masks, the architecture) and a walk over the record
//! headers of the data section with small positioned reads (no payload is
//! parsed, no page of a stack copy is faulted in). A refusal carries the
//! reason for the fallback warning; the caller then runs `perf script` for
//! that shard.

use std::fs::File;
use std::io;
use std::path::Path;

use linux_perf_data::linux_perf_event_reader::SampleFormat;

use super::error::Error;
use super::header::{self, u64_at};
use super::{arch, open_and_map, unwind};

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
pub(super) fn data_section(b: &[u8]) -> Option<(usize, &[u8])> {
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

#[cfg(test)]
mod tests {
    use super::*;

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
        // A data section that ends past the file: a file cut short.
        put(&mut h, 48, 54_016);
        std::fs::write(&p, &h).unwrap();
        assert!(check(&p)
            .unwrap_err()
            .to_string()
            .contains("the file is truncated"));
        put(&mut h, 48, 54_000);
        std::fs::write(&p, &h).unwrap();
        assert!(check(&p).is_ok());
    }
}
