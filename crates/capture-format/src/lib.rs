//! The on-disk formats that `jobprof-record` writes and `jobprof` reads:
//! capture metadata (`capture.json`), the shard manifest (`perf-shards.tsv`)
//! and the list of threads that could not be attached
//! (`perf-dropped-tids.tsv`). Dependency-free so that the capture-side binary
//! stays tiny: the JSON writer and the TSV writer and reader are written by
//! hand here. With the `serde` feature the types also derive
//! `Serialize`/`Deserialize`, so `jobprof` reads `capture.json` with
//! `serde_json`; the field names of the hand-written writer and of the derive
//! are the same (tested by round trips).
//!
//! This crate knows nothing about perf, tokens or Slurm: it only defines what
//! the files contain and how they are spelled.
//!
//! [`mod@capture`] holds `capture.json` (the phases, how a capture ended,
//! the metadata and its writer), [`mod@shards`] the two TSV files (rows,
//! headers, writers and readers), and `json` the hand-written JSON writer
//! both `capture.json` and `nsys-capture.json` ([`mod@nsys`]) use.
//! [`mod@build_id`] is the one reader of the GNU build id in an ELF note
//! section, for both sides. [`Capturing`] is the marker of a capture in
//! progress (`PERF_ROOT/worker_N/.capturing`). [`mod@replicate`] is the replicate naming
//! convention (`Q1_iter2`): the recorder suggests names by it, jobprof groups
//! captures by it. With the `libc` feature, [`mod@fs_creds`] is the one
//! home of the `setfsuid`/`setfsgid` code both sides use to read another
//! user's files with that user's rights.

pub mod build_id;
mod capture;
mod capturing;
#[cfg(feature = "libc")]
pub mod fs_creds;
mod json;
pub mod nsys;
pub mod replicate;
pub mod settle;
pub mod sha256;
mod shards;

pub use capture::{Capture, EndCause, Phase, PhaseStamp, ShardCut};
pub use capturing::{Capturing, CAPTURING, MAX_CAPTURING_BYTES};
pub use json::json_string;
pub use shards::{
    parse_dropped_tsv, parse_shards_tsv, write_dropped_tsv, write_shards_tsv, DroppedTid,
    ShardPhase, ShardRow, TsvError, DROPPED_HEADER, SHARDS_HEADER,
};

/// Name of the capture metadata file in every published capture directory.
pub const CAPTURE_JSON: &str = "capture.json";
/// Name of the shard manifest in every published capture directory.
pub const SHARDS_TSV: &str = "perf-shards.tsv";
/// Name of the list of dropped threads in every published capture directory.
pub const DROPPED_TIDS_TSV: &str = "perf-dropped-tids.tsv";
/// Name of the list of all threads found at `start` (one TID per line).
pub const TARGET_TIDS_TXT: &str = "perf-target-tids.txt";
/// The version of `capture.json` this crate writes ([`Capture::format_version`]).
pub const FORMAT_VERSION: u32 = 1;

/// The perf data file of shard `shard` (0-based) of a capture with
/// `shard_count` shards: `perf.data` when there is one shard, otherwise
/// `perf.data.partNNN`.
pub fn data_file_name(shard: u32, shard_count: u32) -> String {
    if shard_count == 1 {
        "perf.data".to_string()
    } else {
        format!("perf.data.part{shard:03}")
    }
}

/// The log of perf's stdout and stderr for shard `shard` (0-based):
/// `perf-record.partNNN.log`, for every shard count.
pub fn shard_log_name(shard: u32) -> String {
    format!("perf-record.part{shard:03}.log")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_file_names_follow_the_shard_count() {
        assert_eq!(data_file_name(0, 1), "perf.data");
        assert_eq!(data_file_name(0, 3), "perf.data.part000");
        assert_eq!(data_file_name(12, 13), "perf.data.part012");
    }
}
