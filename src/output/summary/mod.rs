//! `summary.json`: the numbers a person or a script reads first about one
//! processed capture (samples, event, period total, shards, how much was
//! symbolized, the top functions by self and total time, the inputs with
//! sizes and hashes, versions and timings).
//!
//! [`StackStats::from_stacks`] derives the symbol statistics from folded
//! stacks; [`Summary`] is the serde type written to disk. The first frame of
//! every folded stack is the process name (the fold's root), not a function:
//! it is left out of the function lists and of every ratio. A frame is
//! unnamed when perf could not name it: the fold spells those `[unknown]`
//! or `[dso-name]`, and the DSO in the brackets is what the per-DSO figures
//! count. The headline figure is the share of weight whose leaf frame is
//! named. Truncation is judged from how the stacks were unwound, never
//! from what their frames are called: by the unwinder for dwarf stacks it
//! unwound ([`StackStats::judged_by_unwinder`]), else from where each call
//! chain ended in the text ([`StackStats::judged_by_chains`]).
//! [`StackStats::warnings`] turns bad figures into one warning each, with
//! the likely fix (the statistics live in `stats.rs`, the file's types
//! here). The JIT figures are counted in [`jit`]. This module does not
//! read captures.

pub mod jit;
mod stats;

pub use stats::{
    is_unknown_frame, top_self_of, unnamed_dso, DiscardedChains, DsoShare, FunctionShare, Judge,
    StackStats, DSO_WARN_PCT, SYMBOL_WARN_PCT, TOP_DSOS, TOP_N, TRUNCATED_WARN_PCT,
};

use std::fs::File;
use std::io::{self, BufReader};
use std::path::Path;

use serde::Serialize;

/// One input file of the capture.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InputFile {
    /// Name relative to the capture directory.
    pub name: String,
    /// Size in bytes.
    pub bytes: u64,
    /// SHA-256 of the content, hex (what `sha256sum` prints).
    pub sha256: String,
}

/// Hashes a file (SHA-256): its size and hex digest.
pub fn hash_file(path: &Path) -> io::Result<(u64, String)> {
    let file = File::open(path)?;
    // These are perf.data files of up to gigabytes: hashed from a mapping
    // of the page cache, not copied out of it (a tenth less CPU than
    // reading them); anything that cannot be mapped is streamed.
    let meta = file.metadata()?;
    if meta.is_file() && meta.len() > 0 {
        // SAFETY: the files hashed are a capture's published perf.data
        // shards: never written by jobprof, but their owner may truncate
        // or rewrite them at any time. A truncation is survived (the
        // SIGBUS guard's zero pages) and is an error below; a change in
        // place only changes the digest.
        if let Ok(map) = unsafe { crate::sys::input::Mapping::of_shrinkable(&file, path) } {
            let _ = map.advise(memmap2::Advice::Sequential);
            let digest = crate::sys::digest::sha256_hex_mapped(&map);
            if map.shrank() {
                return Err(io::Error::other(
                    "the file shrank while it was hashed (truncated by another process?)",
                ));
            }
            return Ok((map.len() as u64, digest));
        }
    }
    let file = BufReader::with_capacity(1 << 20, file);
    let mut r = crate::sys::digest::Sha256Reader::new(file);
    io::copy(&mut r, &mut io::sink())?;
    Ok((r.bytes_read(), r.hex_digest()))
}

/// One shard (or the symbolized text it came from) as processed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ShardSummary {
    /// Shard number.
    pub index: u32,
    /// The data file's name.
    pub data_file: String,
    /// Its size (0 when it was not there).
    pub data_bytes: u64,
    /// `perf script` runs (time slices) it was split into.
    pub slices: usize,
    /// Text bytes `perf script` printed for it.
    pub text_bytes: u64,
    /// Seconds spent in its slowest `perf script` run.
    pub seconds: f64,
    /// `ok` or `failed`.
    pub status: String,
    /// Why it failed.
    pub error: Option<String>,
    /// Whether its stacks have inline frames (expanded where perf 6.1
    /// prints them); `None` when the capture's own text was folded.
    pub inline: Option<bool>,
}

/// Where the time went, in seconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Timings {
    /// Validation and planning (time ranges).
    pub prepare: f64,
    /// Symbolizing, folding and archiving (one pass).
    pub symbolize_fold: f64,
    /// Rendering.
    pub render: f64,
    /// Everything, up to writing the summary.
    pub total: f64,
}

/// The content of `summary.json`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    /// `jobprof`.
    pub tool: String,
    /// jobprof's version.
    pub tool_version: String,
    /// [`crate::capture::OUTPUT_VERSION`].
    pub output_version: u32,
    /// When the summary was written (UTC).
    pub created: String,
    /// `worker_N/Q`.
    pub capture: String,
    /// Worker index.
    pub worker: Option<u32>,
    /// Query id.
    pub query: String,
    /// Slurm job id, when recorded.
    pub job_id: Option<String>,
    /// `record` (jobprof-record) or `legacy` (old shell pipeline).
    pub layout: crate::capture::Layout,
    /// False when the capture had no metadata to validate (derived files
    /// only, or the original pipeline's flat layout): nothing vouches that
    /// it was complete.
    pub validated: bool,
    /// Samples folded.
    pub samples: u64,
    /// The event folded.
    pub event: Option<String>,
    /// Sum of sample periods (the folded file's total).
    pub period_total: u64,
    /// Distinct stacks.
    pub unique_stacks: u64,
    /// Share of the period whose leaf frame is named (0..1).
    pub symbolized_ratio: f64,
    /// Share of the period whose stack has at least one named frame (0..1).
    pub named_stack_ratio: f64,
    /// The few-symbols warning ([`StackStats::symbol_warning`]), when the
    /// named leaf share is below 5%: the pictures are drawn anyway.
    pub symbol_warning: Option<String>,
    /// Share of the period whose stack has at least one unnamed frame
    /// (0..1).
    pub unnamed_stack_ratio: f64,
    /// Share of frames perf could not name (0..1).
    pub unknown_frame_ratio: f64,
    /// Share of the period whose stack was cut short before the thread's
    /// first frame, as the unwinder or the call chains say (0..1).
    pub truncated_ratio: f64,
    /// The DSOs with unnamed frames (top 10), with the weight of the stacks
    /// that have one.
    pub unnamed_by_dso: Vec<DsoShare>,
    /// Why the truncated stacks stop, by weight (the name is kept from
    /// when it held their root frames).
    pub truncated_roots: Vec<FunctionShare>,
    /// Call chains discarded as corrupted, as perf discards them (`None`:
    /// not known, `perf script` symbolized a shard).
    pub discarded_chains: Option<DiscardedChains>,
    /// Where kernel frames were named from (`snapshot PATH`, the live
    /// `/proc/kallsyms`, perf's default, or `none: why`).
    pub kernel_symbols: Option<String>,
    /// JIT-compiled code: its share of the weight, the share of it named,
    /// and where the names came from (`None`: no JIT frame).
    pub jit: Option<crate::output::summary::jit::JitFigures>,
    /// Lines of `perf script` output that were not understood.
    pub skipped_lines: u64,
    /// Shards.
    pub shards: Vec<ShardSummary>,
    /// How the text was obtained: `perf script` or the name of the
    /// symbolized text file folded instead.
    pub symbolized_from: String,
    /// Top functions by self time: each sample charged to its leaf
    /// frame's function, as `perf report --no-children` and `report.txt`
    /// charge it ([`top_self_of`]; from the folded stacks' leaves when
    /// there was no text to read).
    pub top_self: Vec<FunctionShare>,
    /// Top functions by total time.
    pub top_total: Vec<FunctionShare>,
    /// Input files with sizes and hashes.
    pub inputs: Vec<InputFile>,
    /// `perf --version` of the perf that symbolized (none when the text was
    /// folded from an archive).
    pub perf_version: Option<String>,
    /// `perf --version` of the perf that recorded, when known.
    pub recorded_with: Option<String>,
    /// The recording machine's architecture from the first shard's header
    /// (`x86_64`, `aarch64`; `None`: no data file, or not in the header).
    pub capture_arch: Option<String>,
    /// The architecture of the host that processed it.
    pub host_arch: String,
    /// `fp` or `dwarf`, from the first shard's header (`None`: no data file).
    pub call_graph: Option<String>,
    /// Output files written, besides this one and the marker.
    pub outputs: Vec<String>,
    /// Why the flamegraph was not rendered, when it was not.
    pub render_refused: Option<String>,
    /// Things that went wrong without stopping the capture.
    pub warnings: Vec<String>,
    /// Timings.
    pub timings: Timings,
    /// The old shell pipeline's facts (`capture-metadata.txt`), for its
    /// captures.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub old_pipeline: Option<crate::capture::legacy::Facts>,
    /// Build id and path of each DSO a sample hit (`build-ids.txt`).
    pub build_ids: Vec<crate::symbolize::build_ids::BuildId>,
    /// Where each recorded user-space DSO's symbols came from (files
    /// taken by build id), or why none were taken.
    pub symbol_sources: Vec<SymbolSource>,
    /// Off-CPU totals per thread, for captures recorded with `--off-cpu`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub off_cpu: Option<crate::text::offcpu::Summary>,
}

/// Where one DSO's symbols came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SymbolSource {
    /// The DSO's path as recorded.
    pub dso: String,
    /// The build id the capture recorded (hex; empty: none).
    pub build_id: String,
    /// The files taken (`snapshot …/symfs/usr/lib/libc.so.6 + host debug
    /// file /usr/lib/debug/.build-id/…`), or `none: why` (a mismatch names
    /// both build ids).
    pub source: String,
}

impl Summary {
    /// Pretty JSON with a trailing newline.
    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).expect("a summary always serializes");
        s.push('\n');
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shard_truncated_while_it_is_hashed_is_an_error_not_a_crash() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("perf.data.part000");
        std::fs::write(&p, vec![7u8; 3 << 16]).unwrap();
        assert_eq!(hash_file(&p).unwrap().0, 3 << 16);
        let hashed = crate::sys::input::tests::truncated_after_map(&p, || hash_file(&p));
        let e = hashed.unwrap_err();
        assert!(e.to_string().contains("shrank"), "{e}");
    }
}
