//! `jobprof diff` with replicates on real runs (issue 59, part 2): the
//! DuckDB runs `tests/trend.rs` records, each query run 4 times a run. Two
//! unchanged runs: nearly nothing is coloured, where colouring every
//! change colours most frames; the run with injected work in q1: its
//! frame (`duckdb::FindStrInStr`) and its callers are red. Here, and not
//! in tests/diff_noise.rs, so that the runs are recorded once for both
//! and the tests run in CI's one-at-a-time `trend::` group.

use std::path::Path;

use crate::render::{frames_named, is_grey, is_red, parse_svg, SvgFrame};
use crate::util::{self, jobprof, stderr};

/// `jobprof diff BEFORE AFTER --query q1` of two runs, its SVG's frames
/// and stderr.
fn diff_q1(before: &Path, after: &Path, out: &Path, extra: &[&str]) -> (Vec<SvgFrame>, String) {
    let o = jobprof()
        .arg("diff")
        .args([before, after])
        .args(["--query", "q1", "-o"])
        .arg(out)
        .args(extra)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let (frames, _) = parse_svg(&util::read(out));
    (frames, stderr(&o))
}

/// The widest coloured frame's samples as a share of the root's: how much
/// of the profile a reader is told changed (its coloured callees lie
/// inside it).
fn coloured_share(frames: &[SvgFrame]) -> f64 {
    let root = frames.iter().map(|f| f.width_samples).max().unwrap_or(1);
    let widest = frames
        .iter()
        .filter(|f| !is_grey(&f.fill))
        .map(|f| f.width_samples)
        .max()
        .unwrap_or(0);
    widest as f64 / root as f64
}

#[test]
fn diff_of_two_unchanged_real_runs_colours_nearly_nothing() {
    let Some(runs) = super::runs() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (frames, err) = diff_q1(
        &runs.base[0],
        &runs.base[1],
        &dir.path().join("same.svg"),
        &[],
    );
    assert!(err.contains("4 and 4 replicates"), "{err}");
    let judged = frames.iter().filter(|f| !is_grey(&f.fill)).count();
    let (every, _) = diff_q1(
        &runs.base[0],
        &runs.base[1],
        &dir.path().join("every.svg"),
        &["--every-change"],
    );
    let noisy = every.iter().filter(|f| !is_grey(&f.fill)).count();
    eprintln!(
        "unchanged real runs, q1: {judged} of {} frames coloured beyond the noise \
         ({:.1}% of the samples at most); {noisy} of {} by every change",
        frames.len(),
        100.0 * coloured_share(&frames),
        every.len()
    );
    assert!(
        judged * 50 <= frames.len(),
        "{judged} of {} frames coloured between unchanged runs",
        frames.len()
    );
    assert!(
        coloured_share(&frames) < 0.05,
        "{:.3}",
        coloured_share(&frames)
    );
    assert!(
        noisy >= 5 * judged.max(1),
        "every change coloured only {noisy} frames: the test shows nothing"
    );
}

#[test]
fn diff_of_a_real_run_with_injected_work_colours_it_and_its_callers() {
    let Some(runs) = super::runs() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (frames, err) = diff_q1(
        &runs.base[0],
        &runs.injected,
        &dir.path().join("q1.svg"),
        &[],
    );
    assert!(err.contains("4 and 4 replicates"), "{err}");
    // The injected frame where the new expression calls it (it is drawn
    // in smaller places too, under the floor of the test and grey).
    let injected = frames_named(&frames, super::INJECTED)
        .into_iter()
        .max_by_key(|f| f.width_samples)
        .unwrap_or_else(|| panic!("{} not drawn", super::INJECTED));
    assert!(is_red(&injected.fill), "{injected:?}");
    assert!(
        injected.title.contains("beyond the noise"),
        "{}",
        injected.title
    );
    // Its callers: the frames at least as wide as it, the root's own frames
    // among them, are red as well.
    let widest = injected.width_samples;
    let callers_red = frames
        .iter()
        .filter(|f| f.width_samples >= widest && is_red(&f.fill))
        .count();
    assert!(
        callers_red >= 3,
        "only {callers_red} red frames at least as wide as the injected one"
    );
    eprintln!(
        "injected real run, q1: {} of {} frames coloured, {callers_red} red at least as wide as {}",
        frames.iter().filter(|f| !is_grey(&f.fill)).count(),
        frames.len(),
        super::INJECTED
    );
}
