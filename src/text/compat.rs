//! What `--compat inferno` turns off: every way jobprof's default fold
//! differs from `inferno-collapse-perf` 0.12.8, each named here and covered
//! by a test in `tests/fold.rs`.
//!
//! Under `--compat inferno` jobprof reproduces inferno byte for byte,
//! including these losses; the default mode fixes them. The one place where
//! compat mode cannot match is an input whose first sample names no event:
//! inferno then panics (`assertion failed: self.event_filter.is_some()`),
//! while jobprof folds with the first event it sees later. Nor does compat
//! mode keep control characters in names raw, as inferno does: they are
//! escaped in every mode (`crate::sys::printable`), so a name never splits
//! a folded line. This module only
//! documents; the behaviour lives in `crate::text::perf_script` and `crate::text::fold`.

/// One difference between the default mode and `--compat inferno`.
#[derive(Debug, Clone, Copy)]
pub struct Difference {
    /// Short name.
    pub name: &'static str,
    /// What inferno (and so `--compat inferno`) does.
    pub inferno: &'static str,
    /// What jobprof's default mode does.
    pub jobprof: &'static str,
    /// The test in `tests/fold.rs` that shows both behaviours.
    pub test: &'static str,
}

/// Every difference, in the order the README lists them.
pub const DIFFERENCES: &[Difference] = &[
    Difference {
        name: "header-only samples",
        inferno: "a sample with a header but no frames is dropped (~1% of real samples)",
        jobprof: "kept as a bare process-name stack; totals equal the sum of periods of the selected event",
        test: "header_only_samples_are_kept_as_bare_process_stacks",
    },
    Difference {
        name: "(anonymous namespace) frames",
        inferno: "frames whose symbol starts with `(` are skipped, deleting every C++ `(anonymous namespace)::f` frame (and the sample when it was the only one)",
        jobprof: "kept; only `(/path...)` pseudo-frames of very old perf output are skipped",
        test: "anonymous_namespace_frames_are_kept",
    },
    Difference {
        name: "anonymous executable memory as JIT code",
        inferno: "`--annotate-jit` marks only `/tmp/perf-N.map` and `jitted-*.so` frames: `[unknown] (//anon)` frames (JIT code without a perf map) become a bare `[anon]`",
        jobprof: "`//anon` frames are JIT code too: `[anon]_[j]` under `--annotate-jit` / `--all`",
        test: "anonymous_executable_memory_is_jit_code_by_default_only",
    },
    Difference {
        name: "event names with colons",
        inferno: "the event name ends at the first colon, so every `syscalls:*` tracepoint is one event and tracepoint arguments become a bogus frame (inferno issue #308)",
        jobprof: "the event ends at the colon followed by a space (`syscalls:sys_enter_openat`); modifiers (`cycles:u`) still match `cycles`; arguments are not frames",
        test: "tracepoint_events_with_colons_are_parsed",
    },
    Difference {
        name: "exiting tasks and DSO paths with spaces",
        inferno: "`:-1  -1` headers are misread (the period becomes the pid, an empty event name filters out every later sample); a DSO path with a space makes the frame line unreadable",
        jobprof: "negative ids are ids; the DSO is the last ` (...)` group",
        test: "exiting_tasks_and_dso_paths_with_spaces_are_kept",
    },
    Difference {
        name: "samples without blank lines",
        inferno: "without a blank line between samples (perf script -F without callchains) the next header is read as a frame and its sample is lost",
        jobprof: "an unindented line that parses as a header starts the next sample",
        test: "samples_without_blank_lines_between_them_are_all_kept",
    },
    Difference {
        name: "event filter by base name",
        inferno: "`--event-filter` must equal the parsed name",
        jobprof: "`--event-filter cycles` also matches `cycles:u` and `cycles:k`",
        test: "event_filter_base_name_matches_modifiers",
    },
    Difference {
        name: "capture cut at the start",
        inferno: "the frame lines of a sample whose header is missing are read as headers; a C++ `a::b` symbol among them becomes the event filter (`(/path/to/dso)`), and every real sample after it is filtered out",
        jobprof: "a tab-indented line outside a sample is a frame whose header is missing: counted and reported as skipped, never a header",
        test: "capture_cut_at_the_start_keeps_the_samples_that_follow",
    },
    Difference {
        name: "capture cut mid-line",
        inferno: "the partial last line is parsed as if complete (a cut header can carry a wrong period or event)",
        jobprof: "the partial last line is reported with its line number and not folded; complete samples are",
        test: "cli_capture_cut_mid_line_folds_what_is_complete",
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_difference_names_an_existing_test() {
        let tests = include_str!("../../tests/fold.rs");
        for d in DIFFERENCES {
            assert!(
                tests.contains(&format!("fn {}()", d.test)),
                "{}: test {} not found",
                d.name,
                d.test
            );
        }
    }
}
