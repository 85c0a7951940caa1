//! The event records of a mapped `perf.data`, in the order perf script
//! handles them, borrowed from the mapping instead of copied out of it.
//!
//! linux-perf-data's record iterator reads every record body into a buffer
//! of its own (zeroed, then copied from the reader) before sorting a round:
//! on a `--call-graph dwarf` capture, whose samples carry kilobytes of
//! stack each, that copy was 16% of the native symbolizer's CPU time. This
//! iterator walks the data section of the mapping in place and orders the
//! records as linux-perf-data does (and perf's `ordered_events` before it):
//! the records of a flush round (ended by `FINISHED_ROUND`) are sorted by
//! (time, file offset), and those up to the newest time of the round before
//! are handed out, the rest wait for the next round. User records (the
//! round marks, build ids and the like) carry no sample and are skipped:
//! the symbolizer reads build ids from the file's header. Only what
//! [`super::check`] accepts comes here (file mode, little-endian, no
//! compressed or AUX records).

use std::collections::{HashMap, VecDeque};

use byteorder::LittleEndian;
use linux_perf_data::linux_perf_event_reader::{
    get_record_id, get_record_identifier, get_record_timestamp, RawData, RawEventRecord,
    RecordParseInfo, RecordType,
};
use linux_perf_data::{AttributeDescription, Endianness};

use super::error::{Error, SampleDamage};

/// `PERF_RECORD_FINISHED_ROUND`.
const FINISHED_ROUND: u32 = 68;
/// Size of a record header (type, misc, size).
const HEADER: usize = 8;

/// A record waiting in the current or next round: where its body lies in
/// the data section, and what it is.
#[derive(Debug, Clone, Copy)]
struct Pending {
    body: usize,
    len: usize,
    ty: u32,
    misc: u16,
    attr: usize,
}

/// The sort key linux-perf-data uses: time (records without one first),
/// then the offset in the data section.
type Key = (Option<u64>, usize);

/// How a record's event (attribute) is found, as linux-perf-data finds it.
enum Ids {
    /// One attribute: every record is its.
    One,
    /// Several, with the event id at the same place for all of them.
    Same(linux_perf_data::linux_perf_event_reader::RecordIdParseInfo),
    /// Several, each with `PERF_SAMPLE_IDENTIFIER` (the flag:
    /// `sample_id_all`).
    Identifier(bool),
}

/// Time-ordered event records borrowed from `data`, the data section of a
/// mapped perf.data file.
pub struct OrderedRecords<'a> {
    data: &'a [u8],
    at: usize,
    infos: Vec<RecordParseInfo>,
    ids: Ids,
    attr_of_id: HashMap<u64, usize>,
    incoming: Vec<(Key, Pending)>,
    outgoing: VecDeque<Pending>,
    prev_max: Key,
    cur_max: Key,
    /// How many of `incoming` sort at or below `prev_max`.
    settled: usize,
    /// The lowest offset of a record pending when the last round ended: a
    /// lower bound of [`OrderedRecords::low_water`] until the next round
    /// (records read since lie above it, handing out only raises it).
    low: usize,
}

impl<'a> OrderedRecords<'a> {
    /// Records of `data` (the file's data section) described by `attrs`
    /// (the file's event attributes, in header order).
    pub fn new(data: &'a [u8], attrs: &[AttributeDescription]) -> Result<Self, Error> {
        let infos: Vec<RecordParseInfo> = attrs
            .iter()
            .map(|a| RecordParseInfo::new(&a.attr, Endianness::LittleEndian))
            .collect();
        let Some((first, rest)) = infos.split_first() else {
            return Err(Error::NoEvent);
        };
        let ids = if rest.is_empty() {
            Ids::One
        } else if rest.iter().all(|i| i.id_parse_info == first.id_parse_info) {
            Ids::Same(first.id_parse_info)
        } else {
            use linux_perf_data::linux_perf_event_reader::{AttrFlags, SampleFormat};
            let id_all = |a: &AttributeDescription| a.attr.flags.contains(AttrFlags::SAMPLE_ID_ALL);
            let same = attrs.iter().all(|a| {
                a.attr.sample_format.contains(SampleFormat::IDENTIFIER)
                    && id_all(a) == id_all(&attrs[0])
            });
            if !same {
                return Err(Error::EventsIndistinct);
            }
            Ids::Identifier(id_all(&attrs[0]))
        };
        let attr_of_id = attrs
            .iter()
            .enumerate()
            .flat_map(|(i, a)| a.event_ids.iter().map(move |&id| (id, i)))
            .collect();
        Ok(OrderedRecords {
            data,
            at: 0,
            infos,
            ids,
            attr_of_id,
            incoming: Vec::new(),
            outgoing: VecDeque::new(),
            prev_max: (None, 0),
            cur_max: (None, 0),
            settled: 0,
            low: 0,
        })
    }

    /// The next event record and the index of its attribute; `None` at the
    /// end of the data section.
    pub fn next_record(&mut self) -> Result<Option<(usize, RawEventRecord<'a>)>, Error> {
        while self.outgoing.is_empty() {
            if !self.read_round()? {
                self.finish();
                if self.outgoing.is_empty() {
                    return Ok(None);
                }
            }
        }
        let p = self.outgoing.pop_front().expect("not empty");
        let body = RawData::Single(&self.data[p.body..p.body + p.len]);
        let record = RawEventRecord::new(RecordType(p.ty), p.misc, body, self.infos[p.attr]);
        Ok(Some((p.attr, record)))
    }

    /// Where in the data section the oldest record not yet handed out
    /// begins, or a little before it: everything before it has been read
    /// for the last time. Called once per record, so it only reads a
    /// field: the scan of the pending records happens once per round
    /// ([`OrderedRecords::mark_low`]; a scan per record made an
    /// `--off-cpu` capture's pass quadratic in its round size).
    pub fn low_water(&self) -> usize {
        if self.outgoing.is_empty() && self.incoming.is_empty() {
            self.at
        } else {
            self.low
        }
    }

    fn mark_low(&mut self) {
        let pending = self
            .outgoing
            .iter()
            .chain(self.incoming.iter().map(|(_, p)| p));
        self.low = pending.map(|p| p.body - HEADER).min().unwrap_or(self.at);
    }

    /// Reads records up to the next round mark that leaves records to hand
    /// out; false at the end of the data.
    fn read_round(&mut self) -> Result<bool, Error> {
        while self.at + HEADER <= self.data.len() {
            let offset = self.at;
            let h = &self.data[offset..offset + HEADER];
            let ty = u32::from_le_bytes([h[0], h[1], h[2], h[3]]);
            let misc = u16::from_le_bytes([h[4], h[5]]);
            let size = usize::from(u16::from_le_bytes([h[6], h[7]]));
            if size < HEADER || offset + size > self.data.len() {
                return Err(Error::DamagedRecordInData(offset));
            }
            self.at += size;
            if ty == FINISHED_ROUND {
                self.finish_round();
                if !self.outgoing.is_empty() {
                    return Ok(true);
                }
                continue;
            }
            let ty_r = RecordType(ty);
            if ty_r.is_user_type() {
                continue;
            }
            let body = RawData::Single(&self.data[offset + HEADER..offset + size]);
            let attr = self.attr_of(ty_r, body);
            let time = get_record_timestamp::<LittleEndian>(ty_r, body, &self.infos[attr]);
            self.insert(
                (time, offset),
                Pending {
                    body: offset + HEADER,
                    len: size - HEADER,
                    ty,
                    misc,
                    attr,
                },
            );
        }
        Ok(false)
    }

    fn attr_of(&self, ty: RecordType, body: RawData) -> usize {
        let id = match &self.ids {
            Ids::One => return 0,
            Ids::Same(info) => get_record_id::<LittleEndian>(ty, body, info),
            Ids::Identifier(id_all) => get_record_identifier::<LittleEndian>(ty, body, *id_all),
        };
        id.and_then(|id| self.attr_of_id.get(&id).copied())
            .unwrap_or(0)
    }

    // The round logic of linux-perf-data's `Sorter` (round N never overlaps
    // round N + 2, so at the end of a round everything up to the newest key
    // of the round before is final).

    fn insert(&mut self, key: Key, p: Pending) {
        if key <= self.prev_max {
            self.settled += 1;
        } else if key > self.cur_max {
            self.cur_max = key;
        }
        self.incoming.push((key, p));
    }

    fn finish_round(&mut self) {
        if self.settled > 0 {
            let n = self.settled;
            self.incoming.select_nth_unstable_by_key(n - 1, |(k, _)| *k);
            self.incoming[..n].sort_unstable_by_key(|(k, _)| *k);
            self.outgoing
                .extend(self.incoming.drain(..n).map(|(_, p)| p));
        }
        self.prev_max = self.cur_max;
        self.settled = self.incoming.len();
        self.mark_low();
    }

    fn finish(&mut self) {
        self.incoming.sort_unstable_by_key(|(k, _)| *k);
        self.outgoing
            .extend(self.incoming.drain(..).map(|(_, p)| p));
        self.prev_max = self.cur_max;
        self.settled = 0;
        self.mark_low();
    }
}

/// An MMAP2 record that carries a build id (`PERF_RECORD_MISC_MMAP_BUILD_ID`)
/// gives its length in the byte after pid, tid, address, length and page
/// offset; linux-perf-event-reader (0.10) asserts it is at most 20.
fn check_mmap2_build_id(record: &RawEventRecord<'_>) -> Result<(), Error> {
    const MISC_MMAP_BUILD_ID: u16 = 1 << 14;
    if record.record_type != RecordType::MMAP2 || record.misc & MISC_MMAP_BUILD_ID == 0 {
        return Ok(());
    }
    match record.data.as_slice().get(32) {
        Some(&len) if len > 20 => Err(Error::DamagedRecord {
            ty: record.record_type,
            source: std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("an MMAP2 build id of {len} bytes (at most 20)"),
            ),
        }),
        _ => Ok(()),
    }
}

/// Checks what linux-perf-event-reader (0.10) takes on trust in a sample
/// before it parses it: the callchain length, which it multiplies by 8
/// without a check, so that a damaged one overflows (a panic where
/// overflow checks are on, a wrapped and wrong length where they are not).
/// `Err` names the record as damaged; samples without a callchain, and
/// every other record, pass. An MMAP2 record's build id length is checked
/// too: the reader asserts it is at most 20 (a panic on damaged data).
pub fn check_sample_layout(record: &RawEventRecord<'_>) -> Result<(), Error> {
    use linux_perf_data::linux_perf_event_reader::{ReadFormat, SampleFormat};
    check_mmap2_build_id(record)?;
    let info = &record.parse_info;
    let format = info.sample_format;
    if record.record_type != RecordType::SAMPLE || !format.contains(SampleFormat::CALLCHAIN) {
        return Ok(());
    }
    let body = record.data.as_slice();
    let u64_at = |at: usize| super::header::u64_at(&body, at);
    let damaged = Error::DamagedSample;
    let fixed = [
        SampleFormat::IDENTIFIER,
        SampleFormat::IP,
        SampleFormat::TID,
        SampleFormat::TIME,
        SampleFormat::ADDR,
        SampleFormat::ID,
        SampleFormat::STREAM_ID,
        SampleFormat::CPU,
        SampleFormat::PERIOD,
    ];
    let mut at = 8 * fixed.iter().filter(|&&f| format.contains(f)).count();
    if format.contains(SampleFormat::READ) {
        // As the reader walks it (a value, or a count and that many).
        let read = info.read_format;
        let times = [
            ReadFormat::TOTAL_TIME_ENABLED,
            ReadFormat::TOTAL_TIME_RUNNING,
        ]
        .iter()
        .filter(|&&f| read.contains(f))
        .count();
        let with_id = usize::from(read.contains(ReadFormat::ID));
        at = if read.contains(ReadFormat::GROUP) {
            at + 8 * (1 + times + with_id)
        } else {
            let nr = u64_at(at).ok_or(damaged(SampleDamage::CutInReadValues))?;
            usize::try_from(nr)
                .ok()
                .and_then(|n| n.checked_mul(8 * (1 + with_id)))
                .and_then(|n| n.checked_add(at + 8 * (1 + times)))
                .ok_or(damaged(SampleDamage::ReadValues(nr)))?
        };
    }
    let nr = u64_at(at).ok_or(damaged(SampleDamage::CutBeforeCallchain))?;
    let fits = usize::try_from(nr)
        .ok()
        .and_then(|n| n.checked_mul(8))
        .is_some_and(|bytes| bytes <= body.len() - (at + 8));
    if fits {
        Ok(())
    } else {
        Err(damaged(SampleDamage::Callchain {
            nr,
            bytes: body.len() + HEADER,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record of type `ty` whose body is `body`.
    fn record(ty: u32, body: &[u8]) -> Vec<u8> {
        let mut r = ty.to_le_bytes().to_vec();
        r.extend_from_slice(&0u16.to_le_bytes());
        r.extend_from_slice(&((HEADER + body.len()) as u16).to_le_bytes());
        r.extend_from_slice(body);
        r
    }

    fn keys_in_order(rounds: &[&[u64]]) -> Vec<u64> {
        let mut s = OrderedRecords {
            data: &[],
            at: 0,
            infos: Vec::new(),
            ids: Ids::One,
            attr_of_id: HashMap::new(),
            incoming: Vec::new(),
            outgoing: VecDeque::new(),
            prev_max: (None, 0),
            cur_max: (None, 0),
            settled: 0,
            low: 0,
        };
        let mut out = Vec::new();
        let mut offset = 0;
        for round in rounds {
            for &t in *round {
                offset += 16;
                s.at = offset + 16;
                s.insert(
                    (Some(t), offset),
                    Pending {
                        body: offset,
                        len: 0,
                        ty: t as u32,
                        misc: 0,
                        attr: 0,
                    },
                );
            }
            s.finish_round();
            drain_checking_low_water(&mut s, &mut out);
        }
        s.finish();
        drain_checking_low_water(&mut s, &mut out);
        assert_eq!(s.low_water(), s.at, "nothing pending: all read");
        out
    }

    /// Hands out the round's records one by one, checking that the low
    /// water never passes a record still pending (else its pages would be
    /// released before it is read).
    fn drain_checking_low_water(s: &mut OrderedRecords<'_>, out: &mut Vec<u64>) {
        while let Some(p) = s.outgoing.pop_front() {
            out.push(u64::from(p.ty));
            let pending = s.outgoing.iter().chain(s.incoming.iter().map(|(_, p)| p));
            if let Some(min) = pending.map(|p| p.body - HEADER).min() {
                assert!(s.low_water() <= min, "{} > {min}", s.low_water());
            }
        }
    }

    #[test]
    fn rounds_hand_out_what_later_rounds_cannot_precede() {
        // linux-perf-data's own sorter test: two CPUs' buffers per round.
        let order = keys_in_order(&[&[1, 2, 3, 2, 4], &[3, 5, 6, 7, 4, 5], &[6, 8, 9, 7, 10]]);
        assert_eq!(order, [1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 9, 10]);
    }

    #[test]
    fn a_damaged_header_is_an_error_naming_its_offset() {
        let mut data = record(3, &[0; 16]);
        data.extend_from_slice(&[9, 0, 0, 0, 0, 0, 4, 0]); // size 4 < 8
        let attrs = [];
        assert!(OrderedRecords::new(&data, &attrs).is_err());
        let mut it = OrderedRecords {
            data: &data,
            ..OrderedRecords::new(&data, &[dummy_attr()]).unwrap()
        };
        let err = it.next_record().unwrap_err();
        assert!(err.to_string().contains("byte 24"), "{err}");
    }

    proptest::proptest! {
        /// Whatever the bytes, reading and parsing them ends in records or
        /// an error, never a panic, and every record lies inside the data.
        #[test]
        fn arbitrary_bytes_never_panic(
            chunks in proptest::collection::vec(
                (0u32..80, proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64)),
                0..40,
            ),
            sizes_lie in proptest::prelude::any::<bool>(),
        ) {
            let mut data = Vec::new();
            for (ty, body) in &chunks {
                let mut r = record(*ty, body);
                if sizes_lie && body.len() > 3 {
                    r[6] = body[0];
                    r[7] = body[1] & 3;
                }
                data.extend_from_slice(&r);
            }
            let attrs = [dummy_attr()];
            let mut it = OrderedRecords::new(&data, &attrs).unwrap();
            let mut n = 0;
            while let Ok(Some((attr, rec))) = it.next_record() {
                proptest::prop_assert_eq!(attr, 0);
                let _ = rec.parse();
                n += 1;
                proptest::prop_assert!(n <= chunks.len());
            }
        }
    }

    /// A damaged MMAP2 build id length is the record's error, not the
    /// reader's assertion (a panic: proptest found it by flipping a byte).
    #[test]
    fn an_mmap2_build_id_over_20_bytes_is_a_damaged_record_not_a_panic() {
        let info = RecordParseInfo::new(&dummy_attr().attr, Endianness::LittleEndian);
        for (len, ok) in [(20u8, true), (21, false), (64, false)] {
            let mut body = vec![0u8; 32 + 24 + 8 + 8 + 2];
            body[32] = len;
            let rec = RawEventRecord::new(RecordType::MMAP2, 1 << 14, RawData::Single(&body), info);
            assert_eq!(check_sample_layout(&rec).is_ok(), ok, "{len}");
            if ok {
                assert!(rec.parse().is_ok());
            }
        }
    }

    fn dummy_attr() -> AttributeDescription {
        let mut bytes = [0u8; 128];
        bytes[4..8].copy_from_slice(&128u32.to_le_bytes());
        let attr =
            linux_perf_data::linux_perf_event_reader::PerfEventAttr::parse::<_, LittleEndian>(
                &bytes[..],
            )
            .unwrap()
            .0;
        AttributeDescription {
            attr,
            name: None,
            event_ids: Vec::new(),
        }
    }
}
