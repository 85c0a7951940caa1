//! Which frames of a differential flamegraph changed beyond the noise of
//! the replicates. Each frame (a call path) is judged as `jobprof trend`
//! judges a function's total share: per replicate, its share of the
//! replicate's samples in stacks through that path; a two-sided
//! permutation test of AFTER's replicates against BEFORE's
//! ([`stats::permutation`]); Benjamini-Hochberg over the frames tested
//! ([`stats::benjamini_hochberg`]). Unless the counts are normalised, the
//! frame's samples per replicate must have moved too (the same test on
//! them; a frame's p is the larger of the two, an intersection-union
//! test, and both changes must have the same sign): when one frame grows,
//! every other frame's share falls although its time did not change, and
//! that dilution is not a change of the other frames.
//!
//! Only frames drawn (AFTER reached them) whose share exceeds the floor in
//! at least as many replicates as the smaller side has are tested (a
//! filter on the pooled replicates, which a permutation leaves unchanged,
//! so it does not bias the test). A frame with the same share in every
//! replicate (the thread's frame, `main`, at 100%) is judged by its
//! samples per replicate alone, or with normalised counts not tested (it
//! cannot change).

use crate::sys::stats;

use super::Tree;

/// How frames are judged.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Noise {
    /// The false discovery rate (Benjamini-Hochberg) over the frames tested.
    pub alpha: f64,
    /// Frames under this share (percent) of most replicates are not tested.
    pub floor_pct: f64,
}

impl Default for Noise {
    fn default() -> Self {
        Noise {
            alpha: 0.05,
            floor_pct: 1.0,
        }
    }
}

/// What was found about one frame.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Verdict {
    /// Not tested: under the floor in most replicates.
    Rare,
    /// Not tested: the same share in every replicate (shares only).
    Constant,
    /// Tested.
    Tested {
        /// Mean share (percent) over BEFORE's replicates.
        before: f64,
        /// Mean share (percent) over AFTER's replicates.
        after: f64,
        /// The test's p.
        p: f64,
        /// The Benjamini-Hochberg adjusted p.
        q: f64,
        /// Beyond the noise (q <= alpha, share and samples moved the same way).
        significant: bool,
    },
}

/// Numbers about the judgement, for the legend and the command's note.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NoiseSummary {
    /// Replicates of BEFORE.
    pub before_replicates: usize,
    /// Replicates of AFTER.
    pub after_replicates: usize,
    /// The false discovery rate.
    pub alpha: f64,
    /// Frames drawn.
    pub frames: usize,
    /// Frames tested (over the floor, not constant).
    pub tested: usize,
    /// Frames coloured: changed beyond the noise.
    pub significant: usize,
    /// The smallest p-value a permutation of these replicates can give
    /// (above `alpha`, nothing can be coloured).
    pub smallest_p: f64,
}

/// Each replicate's total through every node of `tree` (which holds the
/// pooled stacks of all of them, so every path is there).
fn node_counts(tree: &Tree<'_>, stacks: &[(&str, u64)]) -> Vec<f64> {
    let mut counts = vec![0.0; tree.nodes.len()];
    for (stack, count) in stacks {
        let c = *count as f64;
        counts[0] += c;
        let mut id = 0u32;
        for name in stack.split(';') {
            match tree.children.get(&(id, name)) {
                Some(&child) => id = child,
                None => break,
            }
            counts[id as usize] += c;
        }
    }
    counts
}

/// The smallest two-sided p of a permutation test of `k` against `n`
/// values (two of the splits, the one seen and its mirror, are extreme
/// when `k` = `n`).
pub fn smallest_p(k: usize, n: usize) -> f64 {
    let ways = stats::choose((k + n) as u64, k as u64);
    if ways > stats::EXACT_LIMIT {
        return 1.0 / (stats::RANDOM_SPLITS + 1) as f64;
    }
    (if k == n { 2.0 } else { 1.0 }) / ways as f64
}

/// Judges every node AFTER reached: `before` and `after` are each side's
/// replicates (frame-ordered stacks); `shares_only` tests the shares alone
/// (the counts were normalised, so the samples per replicate do not
/// matter).
pub(super) fn judge(
    tree: &Tree<'_>,
    before: &[Vec<(&str, u64)>],
    after: &[Vec<(&str, u64)>],
    noise: &Noise,
    shares_only: bool,
) -> (Vec<Option<Verdict>>, NoiseSummary) {
    let counts_b: Vec<Vec<f64>> = before.iter().map(|r| node_counts(tree, r)).collect();
    let counts_a: Vec<Vec<f64>> = after.iter().map(|r| node_counts(tree, r)).collect();
    let share = |c: &Vec<f64>, id: usize| {
        if c[0] > 0.0 {
            100.0 * c[id] / c[0]
        } else {
            0.0
        }
    };
    let need = before.len().min(after.len()).max(1);
    let mut verdicts: Vec<Option<Verdict>> = vec![None; tree.nodes.len()];
    let mut drawn: Vec<u32> = tree.at.values().copied().filter(|&id| id != 0).collect();
    drawn.sort_unstable();
    let mut tested: Vec<(usize, f64, f64, f64, bool)> = Vec::new();
    for &id in &drawn {
        let id = id as usize;
        let xs: Vec<f64> = counts_a.iter().map(|c| share(c, id)).collect();
        let ys: Vec<f64> = counts_b.iter().map(|c| share(c, id)).collect();
        let mut pooled: Vec<f64> = xs.iter().chain(&ys).copied().collect();
        pooled.sort_by(|a, b| b.total_cmp(a));
        if pooled[need - 1] <= noise.floor_pct {
            verdicts[id] = Some(Verdict::Rare);
            continue;
        }
        // The same share everywhere (the thread's frame at 100%): with
        // counts, judged by its samples per replicate alone.
        let constant = pooled[0] - pooled[pooled.len() - 1] < 1e-9;
        if constant && shares_only {
            verdicts[id] = Some(Verdict::Constant);
            continue;
        }
        let seed = stats::seed_of(tree.nodes[id].name) ^ id as u64;
        let Some(by_share) = stats::permutation(&xs, &ys, seed) else {
            continue;
        };
        let (mut p, mut agree) = (if constant { 0.0 } else { by_share.p }, true);
        if !shares_only {
            let cx: Vec<f64> = counts_a.iter().map(|c| c[id]).collect();
            let cy: Vec<f64> = counts_b.iter().map(|c| c[id]).collect();
            if let Some(by_count) = stats::permutation(&cx, &cy, seed.rotate_left(1)) {
                p = p.max(by_count.p);
            }
            let moved = stats::mean(&cx) - stats::mean(&cy);
            let shifted = stats::mean(&xs) - stats::mean(&ys);
            agree = constant || moved * shifted > 0.0;
        }
        tested.push((id, stats::mean(&ys), stats::mean(&xs), p, agree));
    }
    let qs = stats::benjamini_hochberg(&tested.iter().map(|t| t.3).collect::<Vec<_>>());
    let mut significant = 0;
    for ((id, before, after, p, agree), q) in tested.iter().copied().zip(qs) {
        let sig = agree && q <= noise.alpha;
        significant += usize::from(sig);
        verdicts[id] = Some(Verdict::Tested {
            before,
            after,
            p,
            q,
            significant: sig,
        });
    }
    let summary = NoiseSummary {
        before_replicates: before.len(),
        after_replicates: after.len(),
        alpha: noise.alpha,
        frames: drawn.len(),
        tested: tested.len(),
        significant,
        smallest_p: smallest_p(after.len(), before.len()),
    };
    (verdicts, summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn smallest_p_of_five_against_five_is_two_of_252() {
        assert!((smallest_p(5, 5) - 2.0 / 252.0).abs() < 1e-12);
        assert!((smallest_p(3, 4) - 1.0 / 35.0).abs() < 1e-12);
        assert!(smallest_p(3, 3) > 0.05, "3 against 3 can never reach 0.05");
    }
}
