//! speedscope's JSON file format
//! (<https://www.speedscope.app/file-format-schema.json>), as serde types.
//!
//! Only what jobprof writes is modelled: shared frames with names and
//! "sampled" profiles. Huge profiles open in speedscope without freezing the
//! browser the way a 10 MB SVG does. The types also deserialize, so tests and
//! tools can read the files back.

use serde::{Deserialize, Serialize};

/// The `$schema` value speedscope expects.
pub const SCHEMA: &str = "https://www.speedscope.app/file-format-schema.json";

/// A whole speedscope file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct File {
    /// Always [`SCHEMA`].
    #[serde(rename = "$schema")]
    pub schema: String,
    /// Data shared by all profiles.
    pub shared: Shared,
    /// The profiles (jobprof writes one).
    pub profiles: Vec<Profile>,
    /// Name shown in the viewer's title bar.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Profile shown first.
    #[serde(
        rename = "activeProfileIndex",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub active_profile_index: Option<usize>,
    /// The tool that wrote the file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exporter: Option<String>,
}

/// Data shared by all profiles of a file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Shared {
    /// Every distinct frame; samples refer to them by index.
    pub frames: Vec<Frame>,
}

/// One frame (function).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Frame {
    /// The function name as it appears in the folded stacks.
    pub name: String,
}

/// A "sampled" profile: stacks with weights.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Profile {
    /// Always `"sampled"`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Name of the profile.
    pub name: String,
    /// Unit of the weights; `"none"` for sample counts.
    pub unit: String,
    /// First value of the profile (0).
    #[serde(rename = "startValue")]
    pub start_value: u64,
    /// Last value: the sum of all weights.
    #[serde(rename = "endValue")]
    pub end_value: u64,
    /// Each sample: frame indexes into `shared.frames`, root first.
    pub samples: Vec<Vec<usize>>,
    /// Weight of each sample, parallel to `samples`.
    pub weights: Vec<u64>,
}

/// speedscope's unit for a count name: `ns`/`nanoseconds`, `us`,
/// `ms`, `s`/`seconds` and `bytes` are shown as times or sizes; anything
/// else (`samples`, ...) is `"none"`.
pub fn unit_for(count_name: &str) -> &'static str {
    match count_name.to_ascii_lowercase().as_str() {
        "ns" | "nanoseconds" => "nanoseconds",
        "us" | "µs" | "microseconds" => "microseconds",
        "ms" | "milliseconds" => "milliseconds",
        "s" | "seconds" => "seconds",
        "bytes" | "b" => "bytes",
        _ => "none",
    }
}

impl File {
    /// Builds a file with one profile from `(stack, count)` pairs (stacks
    /// root first, frames separated by `;`). The unit follows `count_name`
    /// when speedscope knows it (see [`unit_for`]), else counts are "none".
    pub fn from_stacks(stacks: &[(&str, u64)], title: &str, count_name: &str) -> File {
        let mut index: rustc_hash::FxHashMap<&str, usize> = Default::default();
        let mut frames = Vec::new();
        let mut samples = Vec::with_capacity(stacks.len());
        let mut weights = Vec::with_capacity(stacks.len());
        for (stack, count) in stacks {
            let sample: Vec<usize> = stack
                .split(';')
                .map(|name| {
                    *index.entry(name).or_insert_with(|| {
                        frames.push(Frame {
                            name: name.to_string(),
                        });
                        frames.len() - 1
                    })
                })
                .collect();
            samples.push(sample);
            weights.push(*count);
        }
        let end_value = crate::sys::counts::sum(weights.iter().copied());
        File {
            schema: SCHEMA.to_string(),
            shared: Shared { frames },
            profiles: vec![Profile {
                kind: "sampled".to_string(),
                name: format!("{title} ({count_name})"),
                unit: unit_for(count_name).to_string(),
                start_value: 0,
                end_value,
                samples,
                weights,
            }],
            name: Some(title.to_string()),
            active_profile_index: Some(0),
            exporter: Some(format!("jobprof {}", env!("CARGO_PKG_VERSION"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_shared_and_samples_root_first() {
        let f = File::from_stacks(&[("a;b", 2), ("a;c;b", 3)], "t", "samples");
        let names: Vec<&str> = f.shared.frames.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["a", "b", "c"]);
        assert_eq!(f.profiles[0].samples, vec![vec![0, 1], vec![0, 2, 1]]);
        assert_eq!(f.profiles[0].weights, vec![2, 3]);
        assert_eq!(f.profiles[0].end_value, 5);
        assert_eq!(f.profiles[0].unit, "none");
        let ns = File::from_stacks(&[("a", 1)], "t", "ns");
        assert_eq!(ns.profiles[0].unit, "nanoseconds");
    }
}
