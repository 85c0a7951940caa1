//! `build-ids.txt`: the build id and path of each DSO that a capture's
//! samples hit, one `BUILD_ID PATH` line each, as `perf buildid-list`
//! prints them, and the same list for `summary.json`.
//!
//! The ids come from the build-id table in each shard's `perf.data` header
//! (union over the shards, sorted by path, one line per path and id). `perf
//! record --buildid-all` (the old sampler's and `jobprof-record`'s way)
//! lists every DSO mapped, hit or not; [`hit_only`] keeps those a sample
//! hit, judged by the DSO file names in the symbolized text. This module
//! reads headers only; it never runs perf.

use std::collections::{BTreeSet, HashSet};
use std::path::{Path, PathBuf};

use linux_perf_data::PerfFileReader;
use serde::Serialize;

/// Name of the file beside the other outputs.
pub const BUILD_IDS_TXT: &str = "build-ids.txt";

/// One DSO's build id.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct BuildId {
    /// The DSO's path as recorded (`/usr/lib/x86_64-linux-gnu/libc.so.6`,
    /// `[kernel.kallsyms]`, `[vdso]`).
    pub path: String,
    /// Hex digits.
    pub build_id: String,
}

/// The build ids in the headers of `shards`, sorted by path; a shard whose
/// header cannot be read is a warning naming it.
pub fn of_shards(shards: &[PathBuf]) -> (Vec<BuildId>, Vec<String>) {
    let mut all = BTreeSet::new();
    let mut warnings = Vec::new();
    for s in shards {
        match of_shard(s) {
            Ok(ids) => all.extend(ids),
            Err(e) => warnings.push(format!("build ids of {}: {e}", s.display())),
        }
    }
    (all.into_iter().collect(), warnings)
}

/// Why a shard's build ids could not be read.
#[derive(Debug, thiserror::Error)]
enum ShardError {
    #[error("{0}")]
    Damaged(#[source] crate::symbolize::native::Error),
    #[error("cannot read the header: {0}")]
    Header(#[source] linux_perf_data::Error),
    #[error("cannot read the build-id table: {0}")]
    Table(#[source] linux_perf_data::Error),
}

fn of_shard(path: &Path) -> Result<Vec<BuildId>, ShardError> {
    // The header is checked before linux-perf-data allocates what it says.
    let (_file, map) = crate::symbolize::native::open_checked(path).map_err(ShardError::Damaged)?;
    let PerfFileReader { perf_file, .. } =
        PerfFileReader::parse_file(crate::sys::input::MappedReader::new(&map))
            .map_err(ShardError::Header)?;
    let table = perf_file.build_ids().map_err(ShardError::Table)?;
    Ok(table
        .into_values()
        .map(|d| BuildId {
            path: String::from_utf8_lossy(&d.path).into_owned(),
            build_id: d.build_id.iter().map(|b| format!("{b:02x}")).collect(),
        })
        .collect())
}

/// The ids of DSOs that a sample hit: those whose file name (the last path
/// component, or the whole `[kernel.kallsyms]`-style name) is in `hit`.
pub fn hit_only(ids: Vec<BuildId>, hit: &HashSet<String>) -> Vec<BuildId> {
    ids.into_iter()
        .filter(|b| {
            let name = if b.path.starts_with('[') {
                b.path.as_str()
            } else {
                b.path.rsplit('/').next().unwrap_or(&b.path)
            };
            hit.contains(name)
        })
        .collect()
}

/// The text of `build-ids.txt`.
pub fn text(ids: &[BuildId]) -> String {
    ids.iter()
        .map(|b| format!("{} {}\n", b.build_id, b.path))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hits_by_file_name_and_perf_buildid_list_lines() {
        let ids = vec![
            BuildId {
                path: "/usr/lib/libc.so.6".into(),
                build_id: "93ac".into(),
            },
            BuildId {
                path: "[kernel.kallsyms]".into(),
                build_id: "a3e4".into(),
            },
            BuildId {
                path: "[vdso]".into(),
                build_id: "c00c".into(),
            },
        ];
        let hit: HashSet<String> = ["libc.so.6", "[kernel.kallsyms]"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let kept = hit_only(ids, &hit);
        assert_eq!(
            text(&kept),
            "93ac /usr/lib/libc.so.6\na3e4 [kernel.kallsyms]\n"
        );
    }
}
