//! The completion marker, `.postprocess-complete`: written last into a
//! processed capture, it says that the capture's outputs are complete,
//! which output version made them, what they are worth ([`Quality`]) and
//! which inputs they were made from; [`completion`] reads it to decide
//! whether a capture needs processing.

use std::fs;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::layout::read_plain;
use crate::error::{Error, Result};

/// Name of the completion marker, written last into a processed capture.
pub const MARKER: &str = ".postprocess-complete";

/// Version of the set of outputs `jobprof process` writes. Raise it when an
/// output changes meaning or a new output is added, so that captures
/// completed by an older jobprof are processed again (without `--force`).
/// 2: `report.txt`, `build-ids.txt`, the off-CPU and wall-clock profiles,
/// `profile.pb.gz`, and kernel frames named from the running kernel's
/// table when the capture's kernel build id is its.
/// 3: names by build id (this host's debug files for old captures, never a
/// different binary at the recorded path), `summary.json`'s
/// `symbol_sources`, and `truncated_ratio`/`truncated_roots` judged from
/// the unwind instead of the root frame's name.
pub const OUTPUT_VERSION: u32 = 3;

/// The content of `.postprocess-complete`: who completed the capture, when,
/// and which outputs it wrote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Marker {
    /// `jobprof`.
    pub tool: String,
    /// The jobprof version that wrote the outputs.
    pub tool_version: String,
    /// [`OUTPUT_VERSION`] of that jobprof.
    pub output_version: u32,
    /// When processing completed (RFC 3339, UTC).
    pub completed: String,
    /// The output files written (names in the capture directory).
    pub outputs: Vec<String>,
    /// Each output's size when the marker was written. Outputs are not
    /// fsynced one by one (that made bulk reprocessing wait on the disk);
    /// after a crash an output can come back empty or short, and this is
    /// how the next run notices and redoes the capture.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub sizes: std::collections::BTreeMap<String, u64>,
    /// What the outputs are worth, so that a later run never replaces them
    /// with worse ones (`None` in markers of older versions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quality: Option<Quality>,
    /// Each input's size, mtime, inode and SHA-256 (by the name
    /// `summary.json` lists it under): a rerun does not hash an unchanged
    /// input again ([`crate::capture::stamp`]).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub inputs: std::collections::BTreeMap<String, crate::capture::stamp::InputStamp>,
}

impl Marker {
    /// The marker this jobprof writes now over `outputs` (their sizes are
    /// filled in by [`write_marker`]).
    pub fn new(outputs: Vec<String>, quality: Option<Quality>) -> Marker {
        Marker {
            tool: "jobprof".into(),
            tool_version: env!("CARGO_PKG_VERSION").into(),
            output_version: OUTPUT_VERSION,
            completed: crate::sys::units::utc_timestamp(),
            outputs,
            sizes: Default::default(),
            quality,
            inputs: Default::default(),
        }
    }
}

/// The figures a later run compares its own result with before replacing
/// a complete capture's outputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Quality {
    /// Samples folded.
    pub samples: u64,
    /// Share of the period total in stacks with any named frame, in parts
    /// per million.
    pub symbolized_ppm: u64,
    /// Text bytes in `perf.script.zst`, when this run wrote it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archive_text_bytes: Option<u64>,
}

/// Whether a capture needs processing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Completion {
    /// No marker: never completed (or an earlier run was interrupted).
    NotDone,
    /// Complete with every wanted output; skip unless forced.
    Done(Marker),
    /// A marker exists but the outputs must be redone; says why.
    Stale(String),
}

/// Reads the marker of `dir` and decides whether outputs `wanted` are all
/// there and current.
pub fn completion(dir: &Path, wanted: &[String]) -> Completion {
    let path = dir.join(MARKER);
    let Ok(text) = read_plain(&path) else {
        return Completion::NotDone;
    };
    let marker: Marker = match serde_json::from_str(&text) {
        Ok(m) => m,
        Err(_) => {
            return Completion::Stale(
                "completed by the old post-processing pipeline (output version 0)".into(),
            )
        }
    };
    if marker.output_version < OUTPUT_VERSION {
        return Completion::Stale(format!(
            "completed by jobprof {} (output version {}, now {OUTPUT_VERSION})",
            marker.tool_version, marker.output_version
        ));
    }
    if let Some(missing) = wanted
        .iter()
        .find(|w| !marker.outputs.contains(w) || !dir.join(w.as_str()).is_file())
    {
        return Completion::Stale(format!("{missing} is missing"));
    }
    if let Some(why) = size_mismatch(dir, &marker) {
        return Completion::Stale(why);
    }
    Completion::Done(marker)
}

/// The first output whose size differs from what the marker recorded.
fn size_mismatch(dir: &Path, marker: &Marker) -> Option<String> {
    marker.sizes.iter().find_map(|(name, &size)| {
        let now = fs::symlink_metadata(dir.join(name))
            .ok()
            .filter(|m| m.is_file())
            .map(|m| m.len());
        (now != Some(size)).then(|| {
            format!(
                "{name} has {} bytes, the marker recorded {size} (written incompletely, a crash?)",
                now.map_or("no".to_string(), |n| n.to_string())
            )
        })
    })
}

/// What the complete outputs on disk are worth: the marker's [`Quality`],
/// when a marker is there and every output it lists still has its
/// recorded size. `None` when nothing complete is there to protect.
pub fn previous_quality(dir: &Path) -> Option<Quality> {
    let text = read_plain(&dir.join(MARKER)).ok()?;
    let marker: Marker = serde_json::from_str(&text).ok()?;
    if size_mismatch(dir, &marker).is_some() {
        return None;
    }
    marker.quality
}

/// The input stamps the marker recorded (empty without a readable marker).
pub fn previous_inputs(
    dir: &Path,
) -> std::collections::BTreeMap<String, crate::capture::stamp::InputStamp> {
    read_plain(&dir.join(MARKER))
        .ok()
        .and_then(|t| serde_json::from_str::<Marker>(&t).ok())
        .map(|m| m.inputs)
        .unwrap_or_default()
}

/// Removes the marker before outputs are rewritten, so an interrupted run
/// never leaves a marker over a mix of old and new outputs.
pub fn clear_marker(dir: &Path) -> Result<()> {
    match fs::remove_file(dir.join(MARKER)) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io(dir.join(MARKER), e)),
    }
}

/// Writes the marker (atomically): the last file of a processed capture.
/// It records each output's size, so that [`completion`] can tell an output
/// that a crash left empty or short (outputs and marker are renamed into
/// place without fsync) and have the capture redone.
pub fn write_marker(dir: &Path, marker: &Marker, mode_limit: Option<u32>) -> Result<()> {
    let mut marker = marker.clone();
    for name in &marker.outputs {
        // A missing output gets no size; `completion` reports it missing.
        if let Ok(m) = fs::symlink_metadata(dir.join(name)) {
            marker.sizes.insert(name.clone(), m.len());
        }
    }
    let mut json = serde_json::to_string_pretty(&marker).expect("a marker always serializes");
    json.push('\n');
    let path = dir.join(MARKER);
    let mut f = crate::sys::atomic::AtomicFile::open(
        &path,
        crate::sys::atomic::Destination::Confined,
        false,
    )?;
    if let Some(m) = mode_limit {
        f.limit_mode(m);
    }
    std::io::Write::write_all(&mut f, json.as_bytes()).map_err(|e| Error::io(&path, e))?;
    f.commit()
}

/// Removes temporary files left by a killed run (`.NAME.XXXXXX.tmp`, as
/// [`crate::sys::atomic::AtomicFile`] names them) for the given output names.
/// Returns how many were removed.
pub fn remove_stale_temporaries(dir: &Path, names: &[&str]) -> usize {
    // A temporary whose writer still runs (another run on the same
    // capture) is not a leftover: see crate::sys::atomic::leftover_is_stale.
    match crate::sys::confined::Dir::open(dir) {
        Ok(d) => crate::sys::atomic::remove_leftovers_in(&d, names),
        Err(_) => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marker_decides_skip_and_redo() {
        let dir = tempfile::tempdir().unwrap();
        let wanted = vec!["stacks.folded".to_string()];
        assert_eq!(completion(dir.path(), &wanted), Completion::NotDone);
        fs::write(dir.path().join(MARKER), "").unwrap();
        assert!(matches!(
            completion(dir.path(), &wanted),
            Completion::Stale(s) if s.contains("old post-processing")
        ));
        let m = Marker::new(wanted.clone(), None);
        write_marker(dir.path(), &m, None).unwrap();
        assert!(
            matches!(completion(dir.path(), &wanted), Completion::Stale(s) if s.contains("missing"))
        );
        fs::write(dir.path().join("stacks.folded"), "a 1\n").unwrap();
        assert_eq!(completion(dir.path(), &wanted), Completion::Done(m.clone()));
        let older = Marker {
            output_version: 0,
            ..m
        };
        write_marker(dir.path(), &older, None).unwrap();
        assert!(
            matches!(completion(dir.path(), &wanted), Completion::Stale(s) if s.contains("output version 0"))
        );
        clear_marker(dir.path()).unwrap();
        assert_eq!(completion(dir.path(), &wanted), Completion::NotDone);
    }

    #[test]
    fn marker_sizes_reveal_an_output_a_crash_cut_short() {
        let dir = tempfile::tempdir().unwrap();
        let wanted = vec!["stacks.folded".to_string()];
        fs::write(dir.path().join("stacks.folded"), "a;b 1\n").unwrap();
        let m = Marker::new(wanted.clone(), None);
        write_marker(dir.path(), &m, None).unwrap();
        let Completion::Done(read) = completion(dir.path(), &wanted) else {
            panic!("complete capture not recognised");
        };
        assert_eq!(read.sizes.get("stacks.folded"), Some(&6));
        // After a power cut, an output that was never flushed comes back empty.
        fs::write(dir.path().join("stacks.folded"), "").unwrap();
        assert!(matches!(
            completion(dir.path(), &wanted),
            Completion::Stale(s) if s.contains("incompletely")
        ));
    }

    #[test]
    fn stale_temporaries_are_removed_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        for n in [".stacks.folded.abc123.tmp", "stacks.folded", ".other.x.tmp"] {
            fs::write(dir.path().join(n), "x").unwrap();
        }
        assert_eq!(remove_stale_temporaries(dir.path(), &["stacks.folded"]), 1);
        assert!(dir.path().join("stacks.folded").exists());
        assert!(dir.path().join(".other.x.tmp").exists());
    }
}
