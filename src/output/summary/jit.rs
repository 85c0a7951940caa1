//! The JIT figures of `summary.json` (`jit`) and the log: what share of a
//! capture's weight is JIT-compiled code and how much of it is named. The
//! fold marks JIT frames with `_[j]` (from the DSOs that
//! [`crate::symbolize::jit`] knows as JIT code); [`take_figures`] counts
//! them, takes the marks off and merges the stacks that become equal.

use std::path::Path;

use super::{is_unknown_frame, DSO_WARN_PCT};
use crate::text::fold::Folded;

/// The JIT figures of `summary.json` (`jit`).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct JitFigures {
    /// Share (0..1) of the weight whose leaf frame is JIT-compiled code.
    pub ratio: f64,
    /// Share (0..1) of that weight whose leaf is named.
    pub named_ratio: f64,
    /// Share (0..1) of the weight whose stack has a JIT frame anywhere
    /// (Python's perf map names trampolines, never leaves).
    pub stack_ratio: f64,
    /// Share (0..1) of the JIT frames, each weighted by its sample's
    /// period, that are named.
    pub frames_named_ratio: f64,
    /// Where JIT frames were named from (`snapshot Q/jit: ...`), or
    /// `none: why`.
    pub symbols: String,
}

/// Takes the `_[j]` marks the fold put on JIT frames off `folded` (merging
/// stacks that become equal) and returns the JIT figures; `None` when no
/// frame is JIT code.
pub fn take_figures(folded: &mut Folded, capture_dir: &Path) -> Option<JitFigures> {
    const MARK: &str = "_[j]";
    let (mut total, mut jit, mut named) = (0u128, 0u128, 0u128);
    let (mut stacks, mut frames, mut frames_named) = (0u128, 0u128, 0u128);
    let mut any = false;
    for (stack, n) in &mut folded.stacks {
        total += u128::from(*n);
        if !stack.contains(MARK) {
            continue;
        }
        any = true;
        stacks += u128::from(*n);
        for f in stack.split(';').filter_map(|f| f.strip_suffix(MARK)) {
            frames += u128::from(*n);
            if !is_unknown_frame(f) {
                frames_named += u128::from(*n);
            }
        }
        let leaf = stack.rsplit(';').next().unwrap_or("");
        if let Some(name) = leaf.strip_suffix(MARK) {
            jit += u128::from(*n);
            if !is_unknown_frame(name) {
                named += u128::from(*n);
            }
        }
        *stack = stack.replace("_[j];", ";");
        if let Some(s) = stack.strip_suffix(MARK) {
            *stack = s.to_string();
        }
    }
    if !any {
        return None;
    }
    folded.stacks.sort_by(|a, b| a.0.cmp(&b.0));
    folded.stacks.dedup_by(|later, kept| {
        let same = later.0 == kept.0;
        if same {
            kept.1 = crate::sys::counts::add(kept.1, later.1);
        }
        same
    });
    folded.stats.unique_stacks = folded.stacks.len() as u64;
    let ratio = |a: u128, b: u128| if b == 0 { 0.0 } else { a as f64 / b as f64 };
    Some(JitFigures {
        ratio: ratio(jit, total),
        named_ratio: ratio(named, jit),
        stack_ratio: ratio(stacks, total),
        frames_named_ratio: ratio(frames_named, frames),
        symbols: crate::symbolize::jit::describe_snapshot(capture_dir)
            .unwrap_or_else(|why| format!("none: {why}")),
    })
}

/// The warning for JIT weight a capture without a snapshot cannot name.
pub fn warning(f: &JitFigures) -> Option<String> {
    let unnamed = 100.0 * f.ratio * (1.0 - f.named_ratio);
    let why = f.symbols.strip_prefix("none: ")?;
    (unnamed > DSO_WARN_PCT)
        .then(|| format!("{unnamed:.1}% of the weight is in unnamed JIT code: {why}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_count_marked_frames_and_take_the_marks_off() {
        let dir = tempfile::tempdir().unwrap();
        let mut f = Folded {
            stacks: vec![
                ("java;main;Hot.alpha_[j]".into(), 6),
                ("java;main;[perf-1.map]_[j]".into(), 2),
                ("java;main;Hot.alpha".into(), 1),
                ("py;eval;py::f_[j];eval".into(), 1),
            ],
            ..Default::default()
        };
        let j = take_figures(&mut f, dir.path()).unwrap();
        assert_eq!((j.ratio, j.named_ratio), (0.8, 0.75));
        assert_eq!((j.stack_ratio, j.frames_named_ratio), (0.9, 7.0 / 9.0));
        assert!(j.symbols.starts_with("none: "), "{}", j.symbols);
        // 20% of the weight in unnamed JIT code, and no snapshot: said.
        let w = warning(&j).unwrap();
        assert!(
            w.starts_with("20.0% of the weight is in unnamed JIT code: the capture has no JIT"),
            "{w}"
        );
        let stacks: Vec<_> = f.stacks.iter().map(|(s, n)| (s.as_str(), *n)).collect();
        assert_eq!(
            stacks,
            [
                ("java;main;Hot.alpha", 7),
                ("java;main;[perf-1.map]", 2),
                ("py;eval;py::f;eval", 1)
            ]
        );
        assert_eq!(f.stats.unique_stacks, 3);
        let mut plain = Folded {
            stacks: vec![("a;b".into(), 1)],
            ..Default::default()
        };
        assert!(take_figures(&mut plain, dir.path()).is_none());
    }
}
