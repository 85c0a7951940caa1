//! Google's pprof format (gzipped `profile.proto`), which `go tool pprof`,
//! Grafana Pyroscope and Parca read: `profile.pb.gz` per capture (from its
//! samples, the native symbolizer's structured ones or its perf script
//! text's, with addresses, mappings, inline frames and per-thread labels)
//! and per merged query or folded input (from folded stacks).
//!
//! Value columns are `samples/count` and the folded weight: `cpu/nanoseconds`
//! for the software clocks (`cpu-clock`, `task-clock`, whose periods are
//! nanoseconds), `EVENT/count` otherwise; a capture (or query) with switch
//! data adds `off_cpu/nanoseconds` and `wall/nanoseconds` after them, with
//! the weight kept as the default sample type. [`Columns`] is the one place
//! that says which columns a profile has and what an on-CPU sample or an
//! off-CPU stack adds to each. Function names are the frames of
//! `stacks.folded` (and `offcpu.folded`), so pprof's totals and top
//! functions equal jobprof's folded figures.

pub mod capture;
pub mod columns;
pub mod proto;
pub mod writer;

use std::collections::HashMap;
use std::io::{self, Write};

pub use columns::{from_stacks, Columns, FoldedSample};
pub use writer::{MappingKey, Meta, Writer};

use crate::text::samples::Sample;

/// The file name of a pprof output.
pub const PPROF: &str = "profile.pb.gz";

/// What a capture's profile says besides its samples.
#[derive(Debug, Clone, Default)]
pub struct Facts {
    /// Labels of every sample (`worker`, `query`, `node`).
    pub labels: Vec<(String, String)>,
    /// The sampled event.
    pub event: Option<String>,
    /// When sampling was enabled, nanoseconds since the Unix epoch.
    pub start_unix_ns: Option<u64>,
    /// When it was disabled.
    pub end_unix_ns: Option<u64>,
    /// Sampling frequency (Hz), when recorded.
    pub frequency: Option<u64>,
    /// Build ids (hex) by DSO path, from the shards' perf.data headers.
    pub build_ids: HashMap<String, String>,
}

/// A capture's profile being written from its samples, one at a time.
pub struct TextProfile<W: Write> {
    w: Writer<W>,
    facts: Facts,
    columns: Columns,
    first_ns: Option<u64>,
    last_ns: Option<u64>,
    mappings: HashMap<String, MappingKey>,
}

impl<W: Write> TextProfile<W> {
    /// Starts the profile of a capture with `facts`, written to `out`;
    /// with the off-CPU and wall columns when `off_cpu` (the capture has
    /// switch data: [`Self::add_off_cpu`]).
    pub fn new(facts: Facts, off_cpu: bool, out: W) -> Self {
        let columns = Columns::for_event(facts.event.as_deref()).with_off_cpu(off_cpu);
        let meta = Meta {
            sample_types: columns.sample_types(),
            default_sample_type: columns.default_sample_type().map(String::from),
            ..Meta::default()
        };
        TextProfile {
            w: Writer::new(meta, out),
            facts,
            columns,
            first_ns: None,
            last_ns: None,
            mappings: HashMap::new(),
        }
    }

    /// Adds one sample.
    pub fn add(&mut self, s: &Sample<'_>) -> io::Result<()> {
        if let Some(t) = s.time_ns {
            self.first_ns = Some(self.first_ns.map_or(t, |f| f.min(t)));
            self.last_ns = Some(self.last_ns.map_or(t, |l| l.max(t)));
        }
        let locations = self.locations(s);
        let mut labels = Self::capture_labels(&self.facts);
        labels.push(("comm", s.comm));
        if s.pid != "?" {
            labels.push(("pid", s.pid));
        }
        labels.push(("tid", s.tid));
        let values = self.columns.on_cpu(s.weight, true);
        self.w.sample(&locations, &values, &labels)
    }

    /// The capture's own labels (worker, query, node), each sample's first.
    fn capture_labels(facts: &Facts) -> Vec<(&str, &str)> {
        let labels = facts.labels.iter();
        labels.map(|(k, v)| (k.as_str(), v.as_str())).collect()
    }

    /// Adds `ns` off the CPU at the folded `stack` (root first: the comm,
    /// the frames, the state's leaf frame, as in `offcpu.folded`), one
    /// location per frame, labelled with the capture's labels and the
    /// comm (the off-CPU stacks are summed over threads: no tid).
    pub fn add_off_cpu(&mut self, stack: &str, ns: u64) -> io::Result<()> {
        let names: Vec<&str> = stack.split(';').rev().collect();
        let locations: Vec<u64> = names
            .iter()
            .map(|n| self.w.location(&[n], 0, None))
            .collect();
        let mut labels = Self::capture_labels(&self.facts);
        if let Some(comm) = names.last() {
            labels.push(("comm", comm));
        }
        let values = self.columns.off_cpu_values(ns);
        self.w.sample(&locations, &values, &labels)
    }

    /// The sample's locations, leaf first. Where the frame lines match the
    /// folded frames one to one (the root being the comm), each location
    /// gets its address and mapping, with inlined functions as extra lines
    /// of the location they were inlined at; otherwise one location per
    /// folded frame, without an address.
    fn locations(&mut self, s: &Sample<'_>) -> Vec<u64> {
        let names: Vec<&str> = s.stack.split(';').rev().collect();
        if names.len() != s.frames.len() + 1 {
            return names
                .iter()
                .map(|n| self.w.location(&[n], 0, None))
                .collect();
        }
        let mut out = Vec::with_capacity(names.len());
        let mut group: Vec<&str> = Vec::new();
        for (frame, name) in s.frames.iter().zip(&names) {
            group.push(name);
            if frame.is_inlined() {
                continue;
            }
            let mapping = self.mapping(frame.module);
            out.push(self.w.location(&group, frame.address, mapping.as_ref()));
            group.clear();
        }
        // Inlined lines with no frame after them, then the comm root.
        for n in group.iter().chain(names.last()) {
            out.push(self.w.location(&[n], 0, None));
        }
        out
    }

    fn mapping(&mut self, module: &str) -> Option<MappingKey> {
        if module.is_empty() || module == "unknown" || module == "[unknown]" {
            return None;
        }
        if let Some(m) = self.mappings.get(module) {
            return Some(m.clone());
        }
        let key = MappingKey {
            file: module.to_string(),
            build_id: self.facts.build_ids.get(module).cloned(),
        };
        self.mappings.insert(module.to_string(), key.clone());
        Some(key)
    }

    /// Writes the tables and window, and returns the output.
    pub fn finish(mut self) -> io::Result<W> {
        let f = &self.facts;
        let span = match (self.first_ns, self.last_ns, f.start_unix_ns, f.end_unix_ns) {
            (Some(a), Some(b), _, _) => b - a,
            (_, _, Some(a), Some(b)) if b > a => b - a,
            _ => 0,
        };
        let period = match f.frequency {
            Some(hz) if hz > 0 && self.columns.weight.1 == "nanoseconds" => 1_000_000_000 / hz,
            _ => 0,
        };
        let mut comments: Vec<String> = f.event.iter().map(|ev| format!("event: {ev}")).collect();
        comments.push(format!("jobprof {}", env!("CARGO_PKG_VERSION")));
        let time_nanos = f.start_unix_ns.map_or(0, |t| t as i64);
        let meta = self.w.meta_mut();
        meta.time_nanos = time_nanos;
        meta.duration_nanos = span as i64;
        meta.period_type = Some(self.columns.weight.clone());
        meta.period = period as i64;
        meta.comments = comments;
        self.w.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;
    use std::path::Path;

    fn decode(gz: &[u8]) -> proto::Profile {
        let mut raw = Vec::new();
        io::Read::read_to_end(&mut flate2::read::GzDecoder::new(gz), &mut raw).unwrap();
        proto::Profile::decode(&raw[..]).unwrap()
    }

    /// With switch data, `off_cpu` and `wall` follow the on-CPU columns,
    /// on-CPU samples count in `wall` too, and `cpu` stays the default.
    #[test]
    fn off_cpu_columns_follow_the_on_cpu_ones() {
        let c = Columns::for_event(Some("cpu-clock:u")).with_off_cpu(true);
        let types: Vec<String> = c.sample_types().iter().map(|t| t.0.clone()).collect();
        assert_eq!(types, ["samples", "cpu", "off_cpu", "wall"]);
        assert_eq!(c.on_cpu(7, true), [1, 7, 0, 7]);
        assert_eq!(c.off_cpu_values(9), [0, 0, 9, 9]);
        assert_eq!(c.default_sample_type(), Some("cpu"));
        let q = Columns::for_count_name("ns").with_off_cpu(true);
        assert_eq!(q.on_cpu(7, false), [7, 0, 0]);
        assert_eq!(q.off_cpu_values(9), [0, 9, 9]);
        let rows = [
            ("w;main;work", q.on_cpu(5, true), Vec::new()),
            (
                "w;main;sleep;[off-cpu S: sleeping]",
                q.off_cpu_values(20),
                Vec::new(),
            ),
        ];
        let prof = decode(&from_stacks(rows, &q, Vec::new()).unwrap());
        let cpu = prof.string_table.iter().position(|s| s == "cpu").unwrap();
        assert_eq!(prof.default_sample_type, cpu as i64);
        let sum = |i: usize| prof.sample.iter().map(|s| s.value[i]).sum::<i64>();
        assert_eq!((sum(0), sum(1), sum(2)), (5, 20, 25));
        // Without switch data: as before, no default set.
        let plain = Columns::for_event(Some("cpu-clock"));
        assert_eq!(plain.sample_types().len(), 2);
        assert_eq!(plain.default_sample_type(), None);
    }

    /// fixtures/dwarf-inline.perf.txt (perf script --inline of a
    /// `--call-graph dwarf` capture): inlined functions become extra lines
    /// of the location they were inlined at, and the weights are the fold's.
    #[test]
    fn inline_frames_are_lines_of_one_location() {
        let text = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/dwarf-inline.perf.txt");
        let folded = crate::text::fold::Folder::default()
            .fold_sources(&[crate::sys::input::Source::Path(text.clone())])
            .unwrap();
        let opts = crate::text::fold::Options {
            event_filter: folded.stats.event.clone(),
            ..Default::default()
        };
        let facts = Facts {
            event: folded.stats.event.clone(),
            ..Facts::default()
        };
        let mut p = TextProfile::new(facts, false, Vec::new());
        let n = crate::text::samples::walk(&text, &opts, |s| p.add(s).unwrap()).unwrap();
        assert_eq!(n, folded.stats.samples);
        let prof = decode(&p.finish().unwrap());
        let weight: i64 = prof.sample.iter().map(|s| s.value[1]).sum();
        assert_eq!(weight as u64, folded.total());
        let count: i64 = prof.sample.iter().map(|s| s.value[0]).sum();
        assert_eq!(count as u64, folded.stats.samples);
        let name = |l: &proto::Line| {
            let f = &prof.function[l.function_id as usize - 1];
            prof.string_table[f.name as usize].clone()
        };
        let inlined = prof
            .location
            .iter()
            .find(|l| l.line.len() >= 3)
            .expect("a location with inlined functions");
        assert_ne!(inlined.address, 0);
        let names: Vec<String> = inlined.line.iter().map(name).collect();
        assert!(names.contains(&"rotl".to_string()), "{names:?}");
        assert!(prof.mapping.iter().any(|m| m.has_inline_frames));
    }
}
