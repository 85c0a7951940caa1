//! A streaming pprof writer: samples are encoded into the gzip stream as
//! they come (each one a `Profile.sample` field), and the tables they refer
//! to (strings, functions, locations, mappings) follow at the end, as one
//! more encoded `Profile` message. Concatenated protobuf messages decode as
//! one, with repeated fields appended, so readers see a single profile;
//! memory holds only the distinct frames, never the samples.

use rustc_hash::FxHashMap as HashMap;
use std::io::{self, Write};

use flate2::write::GzEncoder;
use prost::Message;

use super::proto;

/// A binary a location's address is in.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MappingKey {
    /// The file as the capture saw it.
    pub file: String,
    /// Its build id in hexadecimal, when known.
    pub build_id: Option<String>,
}

/// Profile-wide facts written with the tables.
#[derive(Debug, Clone, Default)]
pub struct Meta {
    /// `(type, unit)` of each value column, e.g. `("samples", "count")`.
    pub sample_types: Vec<(String, String)>,
    /// `(type, unit)` of the sampling period, e.g. `("cpu", "nanoseconds")`.
    pub period_type: Option<(String, String)>,
    /// The sampling period in `period_type` units (0 when unknown).
    pub period: i64,
    /// Start of the profile, nanoseconds since the Unix epoch (0: unknown).
    pub time_nanos: i64,
    /// How long the profile covers, in nanoseconds (0: unknown).
    pub duration_nanos: i64,
    /// Free-form lines (`go tool pprof` shows them in its header).
    pub comments: Vec<String>,
    /// The type of the column readers show by default (`None`: unset,
    /// which pprof reads as the last column).
    pub default_sample_type: Option<String>,
}

/// Writes one gzipped pprof profile; see the module docs.
pub struct Writer<W: Write> {
    out: GzEncoder<io::BufWriter<W>>,
    columns: usize,
    strings: HashMap<String, i64>,
    string_table: Vec<String>,
    functions: HashMap<i64, u64>,
    function_table: Vec<proto::Function>,
    locations: HashMap<(u64, u64, Vec<u64>), u64>,
    location_table: Vec<proto::Location>,
    mappings: HashMap<MappingKey, u64>,
    mapping_table: Vec<proto::Mapping>,
    meta: Meta,
    buf: Vec<u8>,
    samples: u64,
}

impl<W: Write> Writer<W> {
    /// A writer of a profile described by `meta` into `w`.
    pub fn new(meta: Meta, w: W) -> Self {
        let mut me = Writer {
            // gzip's fastest level, as Go's runtime/pprof writes profiles
            // (`gzip.BestSpeed`): a few percent larger, several times less
            // CPU than the default level.
            out: GzEncoder::new(io::BufWriter::new(w), flate2::Compression::fast()),
            columns: meta.sample_types.len(),
            strings: HashMap::default(),
            string_table: Vec::new(),
            functions: HashMap::default(),
            function_table: Vec::new(),
            locations: HashMap::default(),
            location_table: Vec::new(),
            mappings: HashMap::default(),
            mapping_table: Vec::new(),
            meta,
            buf: Vec::with_capacity(256),
            samples: 0,
        };
        me.string("");
        me
    }

    /// The index of `s` in the string table, where it is written with its
    /// control characters escaped ([`crate::sys::printable`]): every
    /// function, file, label and comment of a profile goes through here.
    pub fn string(&mut self, s: &str) -> i64 {
        if let Some(&i) = self.strings.get(s) {
            return i;
        }
        let i = self.string_table.len() as i64;
        let shown = crate::sys::printable::printable_text(s).into_owned();
        self.string_table.push(shown);
        self.strings.insert(s.to_string(), i);
        i
    }

    fn function(&mut self, name: &str) -> u64 {
        let n = self.string(name);
        if let Some(&id) = self.functions.get(&n) {
            return id;
        }
        let id = self.function_table.len() as u64 + 1;
        self.function_table.push(proto::Function {
            id,
            name: n,
            system_name: n,
            ..Default::default()
        });
        self.functions.insert(n, id);
        id
    }

    fn mapping(&mut self, key: &MappingKey) -> u64 {
        if let Some(&id) = self.mappings.get(key) {
            return id;
        }
        let id = self.mapping_table.len() as u64 + 1;
        let filename = self.string(&key.file);
        let build_id = key.build_id.as_deref().map_or(0, |b| self.string(b));
        self.mapping_table.push(proto::Mapping {
            id,
            filename,
            build_id,
            has_functions: true,
            ..Default::default()
        });
        self.mappings.insert(key.clone(), id);
        id
    }

    /// The id of the location at `address` in `mapping` whose functions are
    /// `names`, innermost (inlined) first; one `Line` per name.
    pub fn location(&mut self, names: &[&str], address: u64, mapping: Option<&MappingKey>) -> u64 {
        let mapping_id = mapping.map_or(0, |m| self.mapping(m));
        let functions: Vec<u64> = names.iter().map(|n| self.function(n)).collect();
        let key = (address, mapping_id, functions);
        if let Some(&id) = self.locations.get(&key) {
            return id;
        }
        let id = self.location_table.len() as u64 + 1;
        if key.2.len() > 1 {
            let at = (mapping_id as usize).checked_sub(1);
            if let Some(m) = at.and_then(|i| self.mapping_table.get_mut(i)) {
                m.has_inline_frames = true;
            }
        }
        self.location_table.push(proto::Location {
            id,
            mapping_id,
            address,
            line: key
                .2
                .iter()
                .map(|&function_id| proto::Line {
                    function_id,
                    ..Default::default()
                })
                .collect(),
            is_folded: false,
        });
        self.locations.insert(key, id);
        id
    }

    /// Writes one sample: `locations` leaf first, one value per sample
    /// type, and `(key, value)` string labels.
    pub fn sample(
        &mut self,
        locations: &[u64],
        values: &[i64],
        labels: &[(&str, &str)],
    ) -> io::Result<()> {
        if values.len() != self.columns {
            return Err(io::Error::other(format!(
                "a sample with {} values in a profile of {} sample types",
                values.len(),
                self.columns
            )));
        }
        let label = labels
            .iter()
            .map(|(k, v)| proto::Label {
                key: self.string(k),
                str: self.string(v),
                ..Default::default()
            })
            .collect();
        let s = proto::Sample {
            location_id: locations.to_vec(),
            value: values.to_vec(),
            label,
        };
        self.buf.clear();
        prost::encoding::message::encode(2, &s, &mut self.buf);
        self.samples += 1;
        self.out.write_all(&self.buf)
    }

    /// The profile-wide facts, to complete before [`Self::finish`].
    pub fn meta_mut(&mut self) -> &mut Meta {
        &mut self.meta
    }

    /// Samples written so far.
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// Writes the tables and the profile-wide fields, ends the gzip stream
    /// and returns the inner writer, flushed.
    pub fn finish(mut self) -> io::Result<W> {
        let vt = |me: &mut Self, (t, u): &(String, String)| proto::ValueType {
            r#type: me.string(t),
            unit: me.string(u),
        };
        let meta = std::mem::take(&mut self.meta);
        let sample_type = meta.sample_types.iter().map(|x| vt(&mut self, x)).collect();
        let period_type = meta.period_type.as_ref().map(|x| vt(&mut self, x));
        let comment = meta.comments.iter().map(|c| self.string(c)).collect();
        let default_sample_type = meta
            .default_sample_type
            .as_deref()
            .map_or(0, |t| self.string(t));
        let tail = proto::Profile {
            sample_type,
            mapping: std::mem::take(&mut self.mapping_table),
            location: std::mem::take(&mut self.location_table),
            function: std::mem::take(&mut self.function_table),
            string_table: std::mem::take(&mut self.string_table),
            time_nanos: meta.time_nanos,
            duration_nanos: meta.duration_nanos,
            period_type,
            period: meta.period,
            comment,
            default_sample_type,
            ..Default::default()
        };
        self.out.write_all(&tail.encode_to_vec())?;
        let mut inner = self.out.finish()?;
        inner.flush()?;
        inner.into_inner().map_err(|e| e.into_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streamed_samples_decode_as_one_profile() {
        let meta = Meta {
            sample_types: vec![("samples".into(), "count".into())],
            ..Meta::default()
        };
        let mut w = Writer::new(meta, Vec::new());
        let leaf = w.location(&["inl", "leaf"], 0x10, None);
        let root = w.location(&["main"], 0x20, None);
        w.sample(&[leaf, root], &[3], &[("tid", "7")]).unwrap();
        w.sample(&[root], &[2], &[]).unwrap();
        assert!(w.sample(&[root], &[1, 2], &[]).is_err());
        let gz = w.finish().unwrap();
        let mut raw = Vec::new();
        io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&gz[..]), &mut raw).unwrap();
        let p = proto::Profile::decode(&raw[..]).unwrap();
        assert_eq!(p.sample.len(), 2);
        assert_eq!(p.string_table[0], "");
        assert_eq!(p.location[0].line.len(), 2);
        let name = |i: usize| &p.string_table[p.function[i].name as usize];
        assert_eq!((name(0).as_str(), name(1).as_str()), ("inl", "leaf"));
        let l = &p.sample[0].label[0];
        assert_eq!(p.string_table[l.str as usize], "7");
    }
}
