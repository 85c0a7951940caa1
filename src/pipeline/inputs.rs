//! The capture's inputs as `summary.json` lists them: which files count,
//! their sizes and SHA-256 hashes (computed beside symbolization; an
//! unchanged file keeps the previous run's hash), and the raw data's
//! permission bits, which derived outputs never exceed.

use std::path::PathBuf;

use super::{file_name, Pipeline};
use crate::capture::{self, ValidCapture};
use crate::output::summary::{self, InputFile};

impl Pipeline<'_> {
    /// The capture's inputs worth a hash: metadata, manifest, data files,
    /// and the symbolized text when it is what gets folded.
    pub(super) fn input_paths(&self) -> Vec<PathBuf> {
        let mut paths: Vec<PathBuf> = [
            jobprof_capture_format::CAPTURE_JSON,
            capture::LEGACY_METADATA,
            jobprof_capture_format::SHARDS_TSV,
        ]
        .iter()
        .map(|n| self.cap.found.dir.join(n))
        .filter(|p| capture::is_plain_file(p))
        .collect();
        paths.extend(
            self.cap
                .shards
                .iter()
                .filter(|s| s.bytes.is_some())
                .map(|s| s.data_file.clone()),
        );
        if let Some(t) = &self.cap.script_text {
            if !self.cap.has_all_data() || self.perf.get().is_err() {
                paths.push(t.clone());
            }
        }
        paths
    }
}

/// The capture's raw data modes (metadata and data files, not following
/// links), ANDed; `None` when none can be read.
pub(super) fn raw_mode(cap: &ValidCapture) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    let dir = &cap.found.dir;
    [
        jobprof_capture_format::CAPTURE_JSON,
        capture::LEGACY_METADATA,
    ]
    .iter()
    .map(|n| dir.join(n))
    .chain(cap.shards.iter().map(|s| s.data_file.clone()))
    .filter_map(|p| std::fs::symlink_metadata(p).ok())
    .filter(|m| m.is_file())
    .map(|m| m.mode() & 0o7777)
    .reduce(|a, b| a & b)
}

/// Sizes and SHA-256 hashes of `paths`, `jobs` files at a time, and a
/// warning per unreadable one. One file after the other, the hash of a
/// few GB of shards (1.4 GB/s per core with SHA-NI) was still running
/// alone on one core when symbolizing had ended.
/// An input whose size, mtime and inode match its stamp in `known` (the
/// previous run's marker) keeps the recorded hash ([`crate::capture::stamp`]).
pub(super) fn hash_all(paths: &[PathBuf], jobs: usize, known: &Stamps) -> Hashed {
    let mut out = Vec::new();
    let mut warnings = Vec::new();
    let mut stamps = Stamps::new();
    let hashes = crate::sys::jobs::map_jobs(paths, jobs, |p| {
        let prev = known.get(&file_name(p));
        crate::capture::stamp::hash_reusing(p, prev, summary::hash_file)
    });
    for (p, hash) in paths.iter().zip(hashes) {
        match hash {
            Ok((bytes, sha256, stamp)) => {
                if let Some(s) = stamp {
                    stamps.insert(file_name(p), s);
                }
                out.push(InputFile {
                    name: file_name(p),
                    bytes,
                    sha256,
                })
            }
            Err(e) => warnings.push(format!("cannot hash {}: {e}", p.display())),
        }
    }
    (out, warnings, stamps)
}

/// Input stamps by the name `summary.json` lists the input under.
pub(super) type Stamps = std::collections::BTreeMap<String, crate::capture::stamp::InputStamp>;

/// The inputs' sizes and hashes, warnings, and the stamps for the marker.
pub(super) type Hashed = (Vec<InputFile>, Vec<String>, Stamps);

/// The hashing thread's result. A panic there (a bug) is not an empty
/// inputs list in silence: the summary then lists no inputs and says why.
pub(super) fn join_hasher(h: std::thread::JoinHandle<Hashed>) -> Hashed {
    h.join().unwrap_or_else(|panic| {
        let why = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "no message".to_string());
        let warning = format!("hashing the inputs failed (a bug: {why}); no inputs are listed");
        (Vec::new(), vec![warning], Stamps::new())
    })
}
