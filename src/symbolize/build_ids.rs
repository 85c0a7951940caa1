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

use std::collections::{BTreeSet, HashMap, HashSet};
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
    ShardIds::read(shards).union()
}

/// Each shard's build-id table, and whether it was recorded with
/// `--off-cpu`, read once per capture from its header and handed to every
/// stage that needs them (the symbol sources, the kernel table's choice,
/// `build-ids.txt`, pprof's mappings and columns, the off-CPU pass).
#[derive(Debug, Default)]
pub struct ShardIds {
    shards: Vec<(PathBuf, Result<Vec<BuildId>, String>)>,
    /// Per shard: it has the `sched:sched_switch` event (`--off-cpu`).
    off_cpu: Vec<bool>,
}

impl ShardIds {
    /// Reads the table of each of `shards`, in order.
    pub fn read(shards: &[PathBuf]) -> ShardIds {
        let (shards, off_cpu) = shards
            .iter()
            .map(|s| {
                let (ids, off_cpu) = of_shard(s);
                ((s.clone(), ids.map_err(|e| e.to_string())), off_cpu)
            })
            .unzip();
        ShardIds { shards, off_cpu }
    }

    /// The ids of every shard, sorted by path, and a warning naming each
    /// shard whose header could not be read ([`of_shards`]).
    pub fn union(&self) -> (Vec<BuildId>, Vec<String>) {
        let mut all = BTreeSet::new();
        let mut warnings = Vec::new();
        for (s, ids) in &self.shards {
            match ids {
                Ok(ids) => all.extend(ids.iter().cloned()),
                Err(e) => warnings.push(format!("build ids of {}: {e}", s.display())),
            }
        }
        (all.into_iter().collect(), warnings)
    }

    /// The sampled kernel's build id: `[kernel.kallsyms]` in the first
    /// shard whose header has it.
    pub fn kernel(&self) -> Option<String> {
        self.shards.iter().find_map(|(_, ids)| {
            let ids = ids.as_ref().ok()?;
            ids.iter()
                .find(|id| id.path == "[kernel.kallsyms]")
                .map(|id| id.build_id.clone())
        })
    }

    /// The ids that are not all zeros, by path (a later shard's over an
    /// earlier one's): the profile's mappings.
    pub fn by_path(&self) -> HashMap<String, String> {
        let mut m = HashMap::new();
        for (_, ids) in &self.shards {
            let Ok(ids) = ids else { continue };
            let nonzero = ids.iter().filter(|b| b.build_id.bytes().any(|c| c != b'0'));
            m.extend(nonzero.map(|b| (b.path.clone(), b.build_id.clone())));
        }
        m
    }

    /// Whether shard `data` was recorded with `--off-cpu` (a shard whose
    /// header could not be read says no: the symbolizing pass reports it).
    pub fn off_cpu(&self, data: &Path) -> bool {
        let mut shards = self.shards.iter().zip(&self.off_cpu);
        shards.any(|((s, _), &off_cpu)| s == data && off_cpu)
    }

    /// Whether any shard was recorded with `--off-cpu`.
    pub fn any_off_cpu(&self) -> bool {
        self.off_cpu.contains(&true)
    }
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

/// A shard's build-id table, and whether its events include the switch
/// tracepoint (no when the header cannot be read).
fn of_shard(path: &Path) -> (Result<Vec<BuildId>, ShardError>, bool) {
    // The header is checked before linux-perf-data allocates what it says.
    let perf_file = crate::symbolize::native::open_checked(path)
        .map_err(ShardError::Damaged)
        .and_then(|(_file, map)| {
            PerfFileReader::parse_file(crate::sys::input::MappedReader::new(&map))
                .map(|r| r.perf_file)
                .map_err(ShardError::Header)
        });
    let perf_file = match perf_file {
        Ok(f) => f,
        Err(e) => return (Err(e), false),
    };
    let off_cpu = perf_file
        .event_attributes()
        .iter()
        .any(|a| a.name() == Some(crate::symbolize::sample::SWITCH_EVENT));
    let ids = perf_file
        .build_ids()
        .map_err(ShardError::Table)
        .map(|table| {
            table
                .into_values()
                .map(|d| BuildId {
                    path: String::from_utf8_lossy(&d.path).into_owned(),
                    build_id: d.build_id.iter().map(|b| format!("{b:02x}")).collect(),
                })
                .collect()
        });
    (ids, off_cpu)
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

/// The text of `build-ids.txt` (a path's control characters escaped,
/// [`crate::sys::printable`]: one line a file).
pub fn text(ids: &[BuildId]) -> String {
    ids.iter()
        .map(|b| {
            let path = crate::sys::printable::printable_text(&b.path);
            format!("{} {path}\n", b.build_id)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_read_serves_the_union_the_kernel_and_the_mappings() {
        let id = |path: &str, build_id: &str| BuildId {
            path: path.into(),
            build_id: build_id.into(),
        };
        let ids = ShardIds {
            shards: vec![
                (
                    "a".into(),
                    Ok(vec![id("/lib/x.so", "aa"), id("[vdso]", "0000")]),
                ),
                ("b".into(), Err("damaged".into())),
                (
                    "c".into(),
                    Ok(vec![id("[kernel.kallsyms]", "k1"), id("/lib/x.so", "bb")]),
                ),
                ("d".into(), Ok(vec![id("[kernel.kallsyms]", "k2")])),
            ],
            off_cpu: vec![false, false, true, false],
        };
        let (all, warnings) = ids.union();
        assert_eq!(all.len(), 5, "{all:?}");
        assert_eq!(warnings, ["build ids of b: damaged"]);
        assert_eq!(ids.kernel().as_deref(), Some("k1"));
        let m = ids.by_path();
        assert_eq!(m.get("/lib/x.so").map(String::as_str), Some("bb"));
        assert!(!m.contains_key("[vdso]"), "all zeros: no build id");
        assert!(ids.any_off_cpu() && ids.off_cpu(Path::new("c")) && !ids.off_cpu(Path::new("a")));
        // The fixture's shards read alike through either door.
        let demo = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures/result_dir_demo/profiles/perf/worker_0/q01");
        let shards = [
            demo.join("perf.data.part000"),
            demo.join("perf.data.part001"),
        ];
        let read = ShardIds::read(&shards);
        assert_eq!(read.union(), of_shards(&shards));
        assert!(!read.union().0.is_empty());
        // The demo was recorded without --off-cpu.
        assert!(!read.any_off_cpu());
    }

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
