//! Profiles from folded stacks, and the value columns every profile has:
//! [`Columns`] (which columns, and what an on-CPU sample or an off-CPU
//! stack adds to each) and [`from_stacks`] (one sample per stack, one
//! location per frame). Reads nothing: `render` writes `.pb.gz` through
//! here without reaching the capture readers of the parent module.

use std::io::{self, Write};

use super::writer::{Meta, Writer};

/// Which value columns a profile has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Columns {
    /// Whether `samples/count` comes first (a capture's samples; folded
    /// text has one number per stack, the weight alone).
    pub counted: bool,
    /// `(type, unit)` of the folded weight's column.
    pub weight: (String, String),
    /// Whether `off_cpu/nanoseconds` and `wall/nanoseconds` follow (a
    /// capture, or query, with switch data).
    pub off_cpu: bool,
}

/// The `samples/count` column.
fn samples_type() -> (String, String) {
    ("samples".into(), "count".into())
}

impl Columns {
    /// The columns for samples of `event` (`None`: unknown, counted only).
    pub fn for_event(event: Option<&str>) -> Columns {
        let base = event.map(crate::text::perf_script::event_base);
        let weight = match base {
            Some(b) if b.ends_with("-clock") => ("cpu".into(), "nanoseconds".into()),
            Some(b) => (b.to_string(), "count".into()),
            None => ("weight".into(), "count".into()),
        };
        Columns {
            counted: weight != samples_type(),
            weight,
            off_cpu: false,
        }
    }

    /// The columns for folded stacks whose counts are `count_name`
    /// (`ns` for the clocks, `samples` when counted): the weight alone.
    pub fn for_count_name(count_name: &str) -> Columns {
        let weight = match count_name {
            "ns" | "nanoseconds" => ("cpu".into(), "nanoseconds".into()),
            "" | "samples" => samples_type(),
            other => (other.to_string(), "count".into()),
        };
        Columns {
            counted: false,
            weight,
            off_cpu: false,
        }
    }

    /// These columns, with the off-CPU and wall ones when `off_cpu`.
    pub fn with_off_cpu(self, off_cpu: bool) -> Columns {
        Columns { off_cpu, ..self }
    }

    /// The sample types, in order: `samples/count` (when counted), the
    /// weight, then `off_cpu/nanoseconds` and `wall/nanoseconds` (when
    /// off-CPU). The columns before the off-CPU ones are those of a
    /// profile without switch data, so `-sample_index` numbers stay.
    pub fn sample_types(&self) -> Vec<(String, String)> {
        let mut v = Vec::with_capacity(4);
        if self.counted {
            v.push(samples_type());
        }
        v.push(self.weight.clone());
        if self.off_cpu {
            v.push(("off_cpu".into(), "nanoseconds".into()));
            v.push(("wall".into(), "nanoseconds".into()));
        }
        v
    }

    /// The type `go tool pprof` shows without `-sample_index`: the weight,
    /// as in a profile without the off-CPU columns (where it is the last
    /// column, pprof's default). `None` there, so those profiles stay as
    /// they were.
    pub fn default_sample_type(&self) -> Option<&str> {
        self.off_cpu.then_some(self.weight.0.as_str())
    }

    /// The values one on-CPU sample of weight `weight` adds; its wall
    /// column (when there is one) gets the weight when `wall`, 0 otherwise
    /// (a merged query's worker without switch data).
    pub fn on_cpu(&self, weight: u64, wall: bool) -> Vec<i64> {
        let w = i64::try_from(weight).unwrap_or(i64::MAX);
        let mut v = Vec::with_capacity(4);
        if self.counted {
            v.push(1);
        }
        v.push(w);
        if self.off_cpu {
            v.extend([0, if wall { w } else { 0 }]);
        }
        v
    }

    /// The values of `ns` off the CPU: no sample, no weight, `ns` in the
    /// off-CPU and wall columns.
    pub fn off_cpu_values(&self, ns: u64) -> Vec<i64> {
        let ns = i64::try_from(ns).unwrap_or(i64::MAX);
        let mut v = vec![0; usize::from(self.counted) + 1];
        v.extend([ns, ns]);
        v
    }
}

/// One stack of folded text as a profile's sample: the stack (root first,
/// `;`-joined), its values (from [`Columns::on_cpu`] or
/// [`Columns::off_cpu_values`]) and its labels.
pub type FoldedSample<'a> = (&'a str, Vec<i64>, Vec<(String, String)>);

/// Writes folded stacks as a profile: one sample per stack, each with its
/// own labels, one location per frame (no addresses: folded text has none).
/// Stacks whose values are all 0 are left out.
pub fn from_stacks<'a, W: Write>(
    stacks: impl IntoIterator<Item = FoldedSample<'a>>,
    columns: &Columns,
    w: W,
) -> io::Result<W> {
    let meta = Meta {
        sample_types: columns.sample_types(),
        period_type: Some(columns.weight.clone()),
        comments: vec![format!("jobprof {}", env!("CARGO_PKG_VERSION"))],
        default_sample_type: columns.default_sample_type().map(String::from),
        ..Meta::default()
    };
    let mut w = Writer::new(meta, w);
    // A frame name is one location whatever the stack: looked up once.
    let mut by_name: rustc_hash::FxHashMap<&str, u64> = Default::default();
    let mut locations = Vec::new();
    for (stack, values, labels) in stacks {
        if values.iter().all(|&v| v == 0) || stack.trim().is_empty() {
            continue;
        }
        locations.clear();
        for n in stack.trim().split(';').rev() {
            let id = *by_name
                .entry(n)
                .or_insert_with(|| w.location(&[n], 0, None));
            locations.push(id);
        }
        let labels: Vec<(&str, &str)> = labels
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        w.sample(&locations, &values, &labels)?;
    }
    w.finish()
}
