//! Result directories: finding the captures in them, deciding whether each
//! one may be post-processed, and the completion marker.
//!
//! A result directory holds one capture per worker and query at
//! `RESULT_DIR/profiles/perf/worker_N/Q/`, written either by
//! `jobprof-record` (`capture.json`, `perf-shards.tsv`) or by the old shell
//! pipeline (`capture-metadata.txt`, key=value lines; see [`legacy`]). This
//! module names the files of a capture directory and where outputs go
//! ([`layout`]), finds those directories ([`walk`]: [`discover`],
//! [`find`]), validates each capture before any time is spent on it
//! ([`validate()`]; a refusal is one line that says why), owns
//! `.postprocess-complete`, the marker written last that says a capture's
//! outputs are complete and which output version made them ([`marker`]),
//! and the per-capture [`Outcome`] of a run ([`outcome`]). It neither runs
//! perf nor writes any other output.

pub mod capturing;
pub mod layout;
pub mod legacy;
pub mod marker;
pub mod outcome;
/// The replicate naming rule (`Q1_iter2` is replicate 2 of `Q1`), shared
/// with `jobprof-record`: the job views, `diff` and `trend` group by it.
pub use jobprof_capture_format::replicate;
pub mod stamp;
pub mod validate;
pub mod walk;

pub use layout::{
    ensure_output_dir, flat_layout_dir, is_plain_file, numbered_data_files, output_dir,
    plain_output_dir, read_plain, CaptureDir, PlainData, FOLDED, HTML, KALLSYMS, LEGACY_METADATA,
    LEGACY_OUTPUT_DIR, SCRIPT_GZ, SCRIPT_ZST, SPEEDSCOPE, SUMMARY, SVG,
};
pub use marker::{
    clear_marker, completion, previous_inputs, previous_quality, remove_stale_temporaries,
    write_marker, Completion, Marker, Quality, MARKER, OUTPUT_VERSION,
};
pub use outcome::{run_exit_code, KeptStacks, Outcome, Status};
pub use validate::{validate, Layout, Refusal, Shard, ValidCapture};
pub use walk::{discover, find, root_problem, Filter, Found, Item, Kind};
