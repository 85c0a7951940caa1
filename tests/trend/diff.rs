//! `jobprof diff` with replicates on real runs (issue 59, part 2): the
//! DuckDB runs `tests/trend.rs` records, each query run 4 times a run,
//! each iteration's profile a replicate. Unchanged runs (8 replicates
//! against 4): nearly nothing is coloured, where colouring every change
//! colours most frames; the run with injected work in q1 against the three
//! unchanged ones (4 against 12: with 4 against 4 the smallest p a
//! permutation test can give, 0.029, passes the false-discovery control
//! over the 150 frames tested only when many frames changed): its frame
//! (`duckdb::FindStrInStr`) and the frames under it are red. Here, and not
//! in tests/diff_noise.rs, so that the runs are recorded once for both and
//! the tests run in CI's one-at-a-time `trend::` group.

use std::path::{Path, PathBuf};

use crate::render::{frames_named, is_grey, is_red, parse_svg, SvgFrame};
use crate::util::{self, jobprof, stderr};

/// The folded stacks of each iteration of q1 in `runs`.
fn q1_replicates(runs: &[&PathBuf]) -> Vec<PathBuf> {
    let files: Vec<PathBuf> = (runs.iter())
        .flat_map(|r| (1..=super::ITERATIONS).map(move |k| (r, k)))
        .map(|(r, k)| r.join(format!("profiles/perf/worker_0/q1_iter{k}/stacks.folded")))
        .collect();
    for f in &files {
        assert!(f.is_file(), "{}", f.display());
    }
    files
}

/// `jobprof diff BEFORE... --vs AFTER...`, its SVG's frames and stderr.
fn diff(
    before: &[PathBuf],
    after: &[PathBuf],
    out: &Path,
    extra: &[&str],
) -> (Vec<SvgFrame>, String) {
    let o = jobprof()
        .arg("diff")
        .args(before)
        .arg("--vs")
        .args(after)
        .arg("-o")
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
fn diff_of_unchanged_real_runs_colours_nearly_nothing() {
    let Some(runs) = super::runs() else { return };
    let dir = tempfile::tempdir().unwrap();
    let before = q1_replicates(&[&runs.base[0], &runs.base[1]]);
    let after = q1_replicates(&[&runs.base[2]]);
    let (frames, err) = diff(&before, &after, &dir.path().join("same.svg"), &[]);
    assert!(err.contains("8 and 4 replicates"), "{err}");
    let judged = frames.iter().filter(|f| !is_grey(&f.fill)).count();
    let every_change = ["--every-change"];
    let (every, _) = diff(
        &before,
        &after,
        &dir.path().join("every.svg"),
        &every_change,
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
    let before = q1_replicates(&runs.base.iter().collect::<Vec<_>>());
    let after = q1_replicates(&[&runs.injected]);
    let (frames, err) = diff(&before, &after, &dir.path().join("q1.svg"), &[]);
    assert!(err.contains("12 and 4 replicates"), "{err}");
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
    // The frames under it, the root's own among them, are at least as wide
    // and red as well.
    let widest = injected.width_samples;
    let callers_red = frames
        .iter()
        .filter(|f| f.width_samples >= widest && is_red(&f.fill))
        .count();
    assert!(
        callers_red >= 2,
        "only {callers_red} red frames at least as wide as the injected one"
    );
    eprintln!(
        "injected real run, q1: {} of {} frames coloured, {callers_red} red at least as wide as {}",
        frames.iter().filter(|f| !is_grey(&f.fill)).count(),
        frames.len(),
        super::INJECTED
    );
}
