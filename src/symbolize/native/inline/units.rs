//! Which compilation units of a file cover an address, known without
//! parsing the units: what lets inline frames be looked up in the few
//! units a capture's samples land in instead of all of them.
//!
//! addr2line parses every unit of a file (its abbreviations and line
//! program header) when its context is made: 4,126 units for a libc debug
//! file, most of the cost of the first inline frame. The index is built
//! once per build (the same parse, cold) and kept in the persistent cache
//! ([`super::super::cache`]); then a context is made over only the units
//! that cover the addresses asked, in a copy of `.debug_info` where every
//! other unit is replaced by an empty unit of the same length, so that
//! every offset stays where it was. The ranges are addr2line's own rule
//! (`DW_AT_ranges`, else `.debug_aranges`, else `DW_AT_low_pc`/`high_pc`,
//! else the unit's line sequences); a file with partial, type or split
//! units, or 64-bit DWARF, gets no index and keeps the whole-file context. A lookup in the smaller context that
//! meets an error (a name in a unit left out) is done again in the whole.

use super::super::cache::{put_u32, put_u64, Cursor};
use super::Reader;

/// The units of a file and the address ranges each covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnitIndex {
    /// Each unit: offset in `.debug_info`, length with its header, its
    /// abbreviation table's offset and its address size.
    units: Vec<(usize, usize, u64, u8)>,
    /// (begin, end, unit), by begin.
    ranges: Vec<(u64, u64, u32)>,
    /// The largest end among `ranges[..=i]`.
    max_end: Vec<u64>,
}

/// An empty unit's header: DWARF 4, 32-bit.
const STUB_HEADER: usize = 11;
/// The ULEB128 abbreviation code an empty unit's first entry carries:
/// `u64::MAX >> 1`, in no table. Reading the unit fails at once (gimli
/// would scan a unit of null entries to its end), so addr2line leaves it
/// out, and a reference into it is an error, never a wrong entry.
const STUB_CODE: [u8; 9] = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f];

impl UnitIndex {
    fn new(units: Vec<(usize, usize, u64, u8)>, mut ranges: Vec<(u64, u64, u32)>) -> UnitIndex {
        ranges.sort_by_key(|r| (r.0, r.2));
        let mut end = 0;
        let max_end = ranges
            .iter()
            .map(|r| {
                end = end.max(r.1);
                end
            })
            .collect();
        UnitIndex {
            units,
            ranges,
            max_end,
        }
    }

    /// The index of the units of `dwarf`, or `None` when addr2line's rule
    /// needs more than the units' own attributes and `.debug_aranges`.
    pub fn build(dwarf: &gimli::Dwarf<Reader>) -> Option<UnitIndex> {
        let mut aranges = Vec::new();
        let mut headers = dwarf.debug_aranges.headers();
        while let Some(h) = headers.next().ok()? {
            aranges.push((h.debug_info_offset().0, h.offset()));
        }
        aranges.sort_by_key(|a| a.0);
        let mut units = Vec::new();
        let mut ranges = Vec::new();
        let mut iter = dwarf.units();
        while let Some(header) = iter.next().ok()? {
            let offset = header.offset().as_debug_info_offset()?.0;
            let plain = header.format() == gimli::Format::Dwarf32
                && matches!(header.type_(), gimli::UnitType::Compilation);
            if !plain {
                return None;
            }
            let id = u32::try_from(units.len()).ok()?;
            let abbrev = header.debug_abbrev_offset().0 as u64;
            units.push((
                offset,
                header.length_including_self(),
                abbrev,
                header.address_size(),
            ));
            // addr2line leaves out a unit it cannot parse.
            let Ok(unit) = dwarf.unit(header) else {
                continue;
            };
            let unit = gimli::UnitRef::new(dwarf, &unit);
            unit_ranges(unit, offset, &aranges, dwarf, |b, e| {
                ranges.push((b, e, id))
            })?;
        }
        Some(UnitIndex::new(units, ranges))
    }

    /// The units whose ranges hold `addr`, in section order.
    pub fn units_at(&self, addr: u64) -> Vec<u32> {
        let mut out = Vec::new();
        let mut i = self.ranges.partition_point(|r| r.0 <= addr);
        while i > 0 {
            i -= 1;
            if self.max_end[i] <= addr {
                break;
            }
            let (_, end, unit) = self.ranges[i];
            if addr < end {
                out.push(unit);
            }
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    /// A copy of `.debug_info` (`info`, of byte order `big`) holding the
    /// units `set` (in section order) where they were, every unit before
    /// and between them replaced by one empty unit; `None` when a gap is
    /// too small or too large for one, or the memory cannot be had. The
    /// copy is an anonymous map: the pages of a gap past its first are
    /// never written, and cost nothing.
    pub fn restricted(&self, info: &[u8], set: &[u32], big: bool) -> Option<memmap2::Mmap> {
        let mut at = 0;
        let end = self.copy_len(set);
        let mut out = memmap2::MmapMut::map_anon(end).ok().filter(|_| end > 0)?;
        for &u in set {
            let (offset, len, abbrev, size) = *self.units.get(u as usize)?;
            if offset < at {
                return None;
            }
            if offset > at {
                stub(&mut out[at..offset], abbrev, size, big)?;
            }
            out[offset..offset + len].copy_from_slice(info.get(offset..offset + len)?);
            at = offset + len;
        }
        out.make_read_only().ok()
    }

    /// The bytes a copy of `.debug_info` for `set` takes
    /// ([`UnitIndex::restricted`]): up to the end of its last unit.
    pub fn copy_len(&self, set: &[u32]) -> usize {
        set.iter()
            .filter_map(|&u| self.units.get(u as usize).map(|&(o, l, ..)| o + l))
            .max()
            .unwrap_or(0)
    }

    /// These ranges as bytes for the persistent cache.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        put_u64(&mut out, self.units.len() as u64);
        for &(offset, len, abbrev, size) in &self.units {
            put_u64(&mut out, offset as u64);
            put_u64(&mut out, len as u64);
            put_u64(&mut out, abbrev);
            out.push(size);
        }
        put_u64(&mut out, self.ranges.len() as u64);
        for &(begin, end, unit) in &self.ranges {
            put_u64(&mut out, begin);
            put_u64(&mut out, end);
            put_u32(&mut out, unit);
        }
        out
    }

    /// An index [`UnitIndex::encode`] wrote; `None` when `bytes` are not
    /// one (units out of order or overlapping, a range of no unit).
    pub fn decode(bytes: &[u8]) -> Option<UnitIndex> {
        let mut c = Cursor::new(bytes);
        let n = c.usize()?;
        let mut units = Vec::with_capacity(n.min(bytes.len() / 25));
        let mut at = 0;
        for _ in 0..n {
            let (offset, len, abbrev) = (c.usize()?, c.usize()?, c.u64()?);
            let size = c.bytes(1)?[0];
            if offset < at || len == 0 {
                return None;
            }
            at = offset.checked_add(len)?;
            units.push((offset, len, abbrev, size));
        }
        let m = c.usize()?;
        let mut ranges = Vec::with_capacity(m.min(bytes.len() / 20));
        for _ in 0..m {
            let r = (c.u64()?, c.u64()?, c.u32()?);
            if r.2 as usize >= units.len() {
                return None;
            }
            ranges.push(r);
        }
        c.is_done().then(|| UnitIndex::new(units, ranges))
    }
}

/// Calls `add` with each range addr2line takes for the unit at `offset`:
/// `DW_AT_ranges`, else its `.debug_aranges` sets, else `DW_AT_low_pc` and
/// `DW_AT_high_pc`, else its line sequences. `None` when it is not a
/// compilation unit or its attributes cannot be read.
fn unit_ranges(
    unit: gimli::UnitRef<'_, Reader>,
    offset: usize,
    aranges: &[(usize, gimli::DebugArangesOffset<usize>)],
    dwarf: &gimli::Dwarf<Reader>,
    mut add: impl FnMut(u64, u64),
) -> Option<()> {
    let mut entries = unit.entries_raw(None).ok()?;
    let Some(abbrev) = entries.read_abbreviation().ok()? else {
        return Some(());
    };
    if abbrev.tag() != gimli::DW_TAG_compile_unit {
        return None;
    }
    let (mut low, mut high, mut size, mut rnglist) = (None, None, None, None);
    for spec in abbrev.attributes() {
        let attr = entries.read_attribute(*spec).ok()?;
        match (attr.name(), attr.value()) {
            (gimli::DW_AT_low_pc, gimli::AttributeValue::Addr(v)) => low = Some(v),
            (gimli::DW_AT_low_pc, gimli::AttributeValue::DebugAddrIndex(i)) => {
                low = Some(unit.address(i).ok()?)
            }
            (gimli::DW_AT_high_pc, gimli::AttributeValue::Addr(v)) => high = Some(v),
            (gimli::DW_AT_high_pc, gimli::AttributeValue::DebugAddrIndex(i)) => {
                high = Some(unit.address(i).ok()?)
            }
            (gimli::DW_AT_high_pc, gimli::AttributeValue::Udata(v)) => size = Some(v),
            (gimli::DW_AT_ranges, v) => rnglist = unit.attr_ranges_offset(v).ok()?,
            _ => {}
        }
    }
    let mut any = false;
    if rnglist.is_none() {
        let first = aranges.partition_point(|a| a.0 < offset);
        for &(_, at) in aranges[first..].iter().take_while(|a| a.0 == offset) {
            let header = dwarf.debug_aranges.header(at).ok()?;
            let mut list = header.entries();
            // addr2line skips entries it cannot read (address overflow).
            while let Some(e) = list.next().transpose() {
                if let Some(e) = e.ok().filter(|e| e.length() != 0) {
                    let r = e.range();
                    add(r.begin, r.end);
                    any = true;
                }
            }
        }
    }
    if !any {
        let mut take = |b: u64, e: u64| {
            if b < e {
                add(b, e);
                any = true;
            }
        };
        if let Some(r) = rnglist {
            let mut list = unit.ranges(r).ok()?;
            while let Some(r) = list.next().ok()? {
                take(r.begin, r.end);
            }
        } else if let (Some(b), Some(e)) = (low, high) {
            take(b, e);
        } else if let (Some(b), Some(s)) = (low, size) {
            take(b, b.wrapping_add(s));
        }
    }
    if !any {
        // addr2line then takes the unit's line sequences, when its line
        // table reads whole (rows and file names).
        for (begin, end) in sequences(unit).unwrap_or_default() {
            add(begin, end);
        }
    }
    Some(())
}

/// The (start, end) of each sequence of the unit's line program as
/// addr2line's line table has them (a sequence with a row; `None` when
/// the table or a file name cannot be read, and addr2line takes none).
fn sequences(unit: gimli::UnitRef<'_, Reader>) -> Option<Vec<(u64, u64)>> {
    use gimli::Reader as _;
    let program = unit.line_program.clone()?;
    let mut rows = program.rows();
    let mut out = Vec::new();
    let mut start = None;
    while let Some((_, row)) = rows.next_row().ok()? {
        if row.end_sequence() {
            if let Some(s) = start.take() {
                out.push((s, row.address()));
            }
        } else if start.is_none() {
            start = Some(row.address());
        }
    }
    let header = rows.header();
    let mut i = u64::from(header.file(0).is_none());
    while let Some(file) = header.file(i) {
        if let Some(dir) = &unit.comp_dir {
            dir.to_string_lossy().ok()?;
        }
        if file.directory_index() != 0 {
            if let Some(d) = file.directory(header) {
                unit.attr_string(d).ok()?.to_string_lossy().ok()?;
            }
        }
        unit.attr_string(file.path_name())
            .ok()?
            .to_string_lossy()
            .ok()?;
        i += 1;
    }
    Some(out)
}

/// Writes an empty DWARF 4 unit over `area` (its length with the header):
/// an entry of an unknown abbreviation ([`STUB_CODE`]), abbreviations at
/// `abbrev`, addresses of `size` bytes. The bytes after the entry are left
/// as they are: reading the unit stops at its first entry.
fn stub(area: &mut [u8], abbrev: u64, size: u8, big: bool) -> Option<()> {
    let length = u32::try_from(area.len().checked_sub(4)?).ok()?;
    if area.len() < STUB_HEADER + STUB_CODE.len() || length >= 0xffff_fff0 {
        return None;
    }
    let abbrev = u32::try_from(abbrev).ok()?;
    let (l, v, a) = if big {
        (
            length.to_be_bytes(),
            4u16.to_be_bytes(),
            abbrev.to_be_bytes(),
        )
    } else {
        (
            length.to_le_bytes(),
            4u16.to_le_bytes(),
            abbrev.to_le_bytes(),
        )
    };
    area[..4].copy_from_slice(&l);
    area[4..6].copy_from_slice(&v);
    area[6..10].copy_from_slice(&a);
    area[10] = size;
    area[STUB_HEADER..STUB_HEADER + STUB_CODE.len()].copy_from_slice(&STUB_CODE);
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index() -> UnitIndex {
        UnitIndex::new(
            vec![(0, 40, 0, 8), (40, 60, 0, 8), (100, 30, 7, 8)],
            vec![(0x100, 0x200, 0), (0x150, 0x160, 2), (0x300, 0x400, 1)],
        )
    }

    #[test]
    fn the_units_of_an_address_are_every_one_whose_range_holds_it() {
        let i = index();
        assert_eq!(i.units_at(0x155), vec![0, 2]);
        assert_eq!(i.units_at(0x1ff), vec![0]);
        assert_eq!(i.units_at(0x200), Vec::<u32>::new());
        assert_eq!(i.units_at(0x300), vec![1]);
        assert_eq!(i.units_at(0x50), Vec::<u32>::new());
    }

    #[test]
    fn an_index_reads_back_as_written_and_damage_is_refused() {
        let i = index();
        assert_eq!(UnitIndex::decode(&i.encode()), Some(i.clone()));
        let bytes = i.encode();
        assert_eq!(UnitIndex::decode(&bytes[..bytes.len() - 1]), None);
        let mut extra = bytes.clone();
        extra.push(0);
        assert_eq!(UnitIndex::decode(&extra), None);
    }

    #[test]
    fn a_restricted_copy_keeps_the_units_in_place_and_stubs_the_gaps() {
        let i = index();
        let info: Vec<u8> = (0..130u32).map(|b| b as u8 | 1).collect();
        let r = i.restricted(&info, &[1], false).unwrap();
        assert_eq!(r.len(), 100);
        assert_eq!(&r[40..100], &info[40..100]);
        // One empty DWARF 4 unit over bytes 0..40.
        assert_eq!(&r[..4], &36u32.to_le_bytes());
        assert_eq!(&r[4..6], &4u16.to_le_bytes());
        assert_eq!(r[10], 8);
        assert_eq!(&r[11..20], &STUB_CODE);
        assert!(r[20..40].iter().all(|&b| b == 0));
        let r = i.restricted(&info, &[0, 2], true).unwrap();
        assert_eq!(&r[..40], &info[..40]);
        assert_eq!(&r[40..44], &56u32.to_be_bytes());
        assert_eq!(&r[46..50], &7u32.to_be_bytes());
        assert_eq!(&r[100..130], &info[100..130]);
        assert!(
            i.restricted(&info[..120], &[2], false).is_none(),
            "a unit past the section"
        );
    }
}
