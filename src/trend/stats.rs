//! The statistics of the trend: means, medians and spreads, the
//! permutation tests over replicates (exact enumeration when the number of
//! ways to split the replicates is small, otherwise a fixed number of
//! random splits from a seeded generator, so a rerun prints the same
//! p-values); the prediction test of one new value against earlier runs
//! (Student's t, for runs with one replicate each); Simes' combination
//! and Benjamini-Hochberg.

/// Exact enumeration up to this many ways to pick the new run's
/// replicates out of all of them; random splits above it.
pub const EXACT_LIMIT: u64 = 20_000;
/// Random splits drawn when enumeration is too large.
pub const RANDOM_SPLITS: u64 = 19_999;

/// The mean (0 for no values).
pub fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

/// The sample standard deviation (n - 1), 0 for fewer than two values.
pub fn sd(v: &[f64]) -> f64 {
    if v.len() < 2 {
        return 0.0;
    }
    let m = mean(v);
    (v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (v.len() - 1) as f64).sqrt()
}

/// The median (0 for no values).
pub fn median(v: &[f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

/// How a p-value was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Method {
    /// Every split of the replicates enumerated.
    ExactPermutation,
    /// [`RANDOM_SPLITS`] seeded random splits.
    RandomPermutation,
    /// One replicate per run: the new value against the spread of the
    /// baseline runs (Student's t prediction test; weaker).
    BetweenRuns,
}

/// A test's outcome.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tested {
    /// Two-sided p-value.
    pub p: f64,
    /// How.
    pub method: Method,
}

/// SplitMix64: a small, well-mixed, seedable generator (no dependency,
/// the same sequence on every platform).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform integer below `n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        ((self.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * n as f64) as usize % n
    }

    /// A uniform float in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// FNV-1a of `s`: a seed that depends on a name only.
pub fn seed_of(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// n choose k, saturating.
pub fn choose(n: u64, k: u64) -> u64 {
    let k = k.min(n - k.min(n));
    let mut c: u128 = 1;
    for i in 0..k {
        c = c * u128::from(n - i) / u128::from(i + 1);
        if c > u128::from(u64::MAX) {
            return u64::MAX;
        }
    }
    c as u64
}

/// The smallest p-value [`permutation`] can give for groups of `k` and
/// `n` values: one split in all (two when the groups are the same size,
/// whose mirror split gives the same difference), or one in
/// `RANDOM_SPLITS + 1` when the splits are drawn.
pub fn smallest_permutation_p(k: usize, n: usize) -> f64 {
    let ways = choose((k + n) as u64, k as u64);
    if ways > EXACT_LIMIT {
        return 1.0 / (RANDOM_SPLITS + 1) as f64;
    }
    let extreme = if k == n { 2.0 } else { 1.0 };
    (extreme / ways as f64).min(1.0)
}

/// Two-sided permutation test of `x` (the new run's replicates) against
/// `y` (the baseline's replicates): how often a random split of all the
/// values into groups of their sizes gives a difference of means at least
/// as large as the one seen. `None` when a group is empty.
pub fn permutation(x: &[f64], y: &[f64], seed: u64) -> Option<Tested> {
    let (k, n) = (x.len(), y.len());
    if k == 0 || n == 0 {
        return None;
    }
    let all: Vec<f64> = x.iter().chain(y).copied().collect();
    let total: f64 = all.iter().sum();
    let diff = |sx: f64| (sx / k as f64 - (total - sx) / n as f64).abs();
    let seen = diff(x.iter().sum());
    // Ties count as extreme: the same value summed in another order.
    let eps = 1e-9 * (1.0 + all.iter().map(|v| v.abs()).fold(0.0, f64::max));
    let ways = choose((k + n) as u64, k as u64);
    if ways <= EXACT_LIMIT {
        let mut idx: Vec<usize> = (0..k).collect();
        let mut extreme = 0u64;
        let mut count = 0u64;
        loop {
            count += 1;
            if diff(idx.iter().map(|&i| all[i]).sum()) >= seen - eps {
                extreme += 1;
            }
            if !next_combination(&mut idx, k + n) {
                break;
            }
        }
        return Some(Tested {
            p: extreme as f64 / count as f64,
            method: Method::ExactPermutation,
        });
    }
    let mut rng = Rng::new(seed);
    let mut pool = all.clone();
    let mut extreme = 0u64;
    for _ in 0..RANDOM_SPLITS {
        // A partial Fisher-Yates shuffle: the first k are the new group.
        let mut sx = 0.0;
        for i in 0..k {
            let j = i + rng.below(pool.len() - i);
            pool.swap(i, j);
            sx += pool[i];
        }
        if diff(sx) >= seen - eps {
            extreme += 1;
        }
    }
    Some(Tested {
        p: (extreme + 1) as f64 / (RANDOM_SPLITS + 1) as f64,
        method: Method::RandomPermutation,
    })
}

/// The next k-subset of 0..n in lexicographic order; false after the last.
fn next_combination(idx: &mut [usize], n: usize) -> bool {
    let k = idx.len();
    let mut i = k;
    while i > 0 {
        i -= 1;
        if idx[i] < n - k + i {
            idx[i] += 1;
            for j in i + 1..k {
                idx[j] = idx[j - 1] + 1;
            }
            return true;
        }
    }
    false
}

/// One new value against the means of the baseline runs (at least two):
/// Student's t prediction test, two-sided. The weaker test used when every
/// run has one replicate: it knows the noise only from the spread between
/// baseline runs.
pub fn between_runs(new: f64, runs: &[f64]) -> Option<Tested> {
    let m = runs.len();
    if m < 2 {
        return None;
    }
    Some(prediction(new, mean(runs), sd(runs), m, m - 1))
}

/// Student's t prediction test of one new value against `m` baseline
/// values with mean `mean`, whose spread `sd` was estimated with `df`
/// degrees of freedom (possibly pooled from more than these `m`).
pub fn prediction(new: f64, mean: f64, sd: f64, m: usize, df: usize) -> Tested {
    let s = sd * (1.0 + 1.0 / m.max(1) as f64).sqrt();
    let d = (new - mean).abs();
    let p = if s == 0.0 {
        if d > 1e-12 {
            0.0
        } else {
            1.0
        }
    } else {
        2.0 * t_upper(d / s, df.max(1) as f64)
    };
    Tested {
        p: p.clamp(0.0, 1.0),
        method: Method::BetweenRuns,
    }
}

/// P(T > t) for Student's t with `df` degrees of freedom (t >= 0).
pub fn t_upper(t: f64, df: f64) -> f64 {
    0.5 * inc_beta(df / 2.0, 0.5, df / (df + t * t))
}

/// The regularized incomplete beta function I_x(a, b) (Numerical Recipes'
/// continued fraction).
fn inc_beta(a: f64, b: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let ln_front = ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln();
    let front = ln_front.exp();
    if x < (a + 1.0) / (a + b + 2.0) {
        front * beta_cf(a, b, x) / a
    } else {
        1.0 - front * beta_cf(b, a, 1.0 - x) / b
    }
}

fn beta_cf(a: f64, b: f64, x: f64) -> f64 {
    const TINY: f64 = 1e-300;
    let (qab, qap, qam) = (a + b, a + 1.0, a - 1.0);
    let mut c = 1.0;
    let mut d = 1.0 - qab * x / qap;
    if d.abs() < TINY {
        d = TINY;
    }
    d = 1.0 / d;
    let mut h = d;
    for m in 1..300 {
        let m = f64::from(m);
        let m2 = 2.0 * m;
        let aa = m * (b - m) * x / ((qam + m2) * (a + m2));
        d = 1.0 + aa * d;
        d = if d.abs() < TINY { TINY } else { d };
        c = 1.0 + aa / c;
        c = if c.abs() < TINY { TINY } else { c };
        d = 1.0 / d;
        h *= d * c;
        let aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
        d = 1.0 + aa * d;
        d = if d.abs() < TINY { TINY } else { d };
        c = 1.0 + aa / c;
        c = if c.abs() < TINY { TINY } else { c };
        d = 1.0 / d;
        let del = d * c;
        h *= del;
        if (del - 1.0).abs() < 1e-12 {
            break;
        }
    }
    h
}

/// ln Γ(x) for x > 0 (Lanczos, g = 7).
fn ln_gamma(x: f64) -> f64 {
    const G: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        let pi = std::f64::consts::PI;
        return (pi / (pi * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut a = G[0];
    let t = x + 7.5;
    for (i, g) in G.iter().enumerate().skip(1) {
        a += g / (x + i as f64);
    }
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + a.ln()
}

/// Simes' combined p-value of a family: min over ranks j of m p_(j) / j
/// (1 for an empty family).
pub fn simes(p: &[f64]) -> f64 {
    let mut s = p.to_vec();
    s.sort_by(f64::total_cmp);
    let m = s.len() as f64;
    s.iter()
        .enumerate()
        .map(|(j, p)| m * p / (j + 1) as f64)
        .fold(1.0, f64::min)
}

/// Benjamini-Hochberg adjusted p-values (q-values), in the order given.
pub fn benjamini_hochberg(p: &[f64]) -> Vec<f64> {
    let m = p.len();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&a, &b| p[a].total_cmp(&p[b]));
    let mut q = vec![1.0; m];
    let mut running = 1.0f64;
    for (rank, &i) in order.iter().enumerate().rev() {
        running = running.min(p[i] * m as f64 / (rank + 1) as f64);
        q[i] = running.min(1.0);
    }
    q
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_means_and_spreads() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(mean(&[1.0, 2.0, 3.0]), 2.0);
        assert!((sd(&[1.0, 2.0, 3.0]) - 1.0).abs() < 1e-12);
        assert_eq!(sd(&[5.0]), 0.0);
    }

    #[test]
    fn choose_counts_and_saturates() {
        assert_eq!(choose(12, 4), 495);
        assert_eq!(choose(5, 0), 1);
        assert_eq!(choose(5, 5), 1);
        assert_eq!(choose(200, 100), u64::MAX);
    }

    #[test]
    fn exact_permutation_p_is_the_share_of_extreme_splits() {
        // 3 new values above all 6 baseline values: only this split and its
        // mirror image (the 3 lowest)... are as extreme: 1 of C(9,3) = 84
        // on the high side; the low side cannot reach it.
        let x = [10.0, 11.0, 12.0];
        let y = [1.0, 2.0, 3.0, 2.0, 1.0, 3.0];
        let t = permutation(&x, &y, 1).unwrap();
        assert_eq!(t.method, Method::ExactPermutation);
        assert!((t.p - 1.0 / 84.0).abs() < 1e-12, "{}", t.p);
        // The same values in both groups: every split is as extreme.
        let t = permutation(&[2.0, 2.0], &[2.0, 2.0, 2.0], 1).unwrap();
        assert_eq!(t.p, 1.0);
        assert!(permutation(&[], &[1.0], 1).is_none());
    }

    #[test]
    fn random_permutation_is_seeded_and_close_to_exact() {
        let x: Vec<f64> = (0..8).map(|i| 6.0 + f64::from(i) * 0.1).collect();
        let y: Vec<f64> = (0..40).map(|i| 4.0 + f64::from(i % 10) * 0.2).collect();
        let a = permutation(&x, &y, 7).unwrap();
        let b = permutation(&x, &y, 7).unwrap();
        assert_eq!(a.method, Method::RandomPermutation);
        assert_eq!(a.p, b.p, "the same seed gives the same p");
        assert!(a.p < 0.01, "{}", a.p);
    }

    #[test]
    fn permutation_p_values_are_uniform_under_the_null() {
        // Exchangeable replicates: P(p <= 0.05) must be about 0.05.
        let mut rng = Rng::new(3);
        let trials = 2000;
        let mut small = 0;
        for i in 0..trials {
            let draw = |rng: &mut Rng| 10.0 + rng.unit() * 4.0;
            let x: Vec<f64> = (0..4).map(|_| draw(&mut rng)).collect();
            let y: Vec<f64> = (0..8).map(|_| draw(&mut rng)).collect();
            if permutation(&x, &y, i).unwrap().p <= 0.05 {
                small += 1;
            }
        }
        let rate = f64::from(small) / trials as f64;
        assert!((0.03..=0.07).contains(&rate), "{rate}");
    }

    #[test]
    fn the_smallest_permutation_p_is_one_split_or_its_mirror() {
        // 1 against 1: the two splits mirror each other.
        assert_eq!(smallest_permutation_p(1, 1), 1.0);
        assert!((smallest_permutation_p(1, 2) - 1.0 / 3.0).abs() < 1e-12);
        // 3 against 3: 20 splits, the seen one and its mirror.
        assert!((smallest_permutation_p(3, 3) - 0.1).abs() < 1e-12);
        assert!((smallest_permutation_p(4, 4) - 2.0 / 70.0).abs() < 1e-12);
        assert!((smallest_permutation_p(3, 6) - 1.0 / 84.0).abs() < 1e-12);
        // As the test itself finds when every split but the seen differs.
        let x = [10.0, 11.0, 12.0];
        let y = [1.0, 2.0, 3.0];
        let p = permutation(&x, &y, 1).unwrap().p;
        assert!((p - smallest_permutation_p(3, 3)).abs() < 1e-12, "{p}");
    }

    #[test]
    fn student_t_tail_matches_tables() {
        // t(0.975, 4) = 2.776; t(0.95, 10) = 1.812; t(0.995, 2) = 9.925.
        assert!((t_upper(2.776, 4.0) - 0.025).abs() < 2e-4);
        assert!((t_upper(1.812, 10.0) - 0.05).abs() < 2e-4);
        assert!((t_upper(9.925, 2.0) - 0.005).abs() < 2e-4);
        assert!((t_upper(0.0, 3.0) - 0.5).abs() < 1e-9);
    }

    #[test]
    fn between_runs_needs_two_baseline_runs() {
        assert!(between_runs(5.0, &[1.0]).is_none());
        let t = between_runs(10.0, &[1.0, 1.2, 0.9, 1.1]).unwrap();
        assert_eq!(t.method, Method::BetweenRuns);
        assert!(t.p < 0.001, "{}", t.p);
        let t = between_runs(1.05, &[1.0, 1.2, 0.9, 1.1]).unwrap();
        assert!(t.p > 0.5, "{}", t.p);
    }

    #[test]
    fn simes_takes_the_best_rank() {
        assert!((simes(&[0.01, 0.04, 0.03, 0.5]) - 0.04).abs() < 1e-12);
        assert!((simes(&[0.02, 0.02]) - 0.02).abs() < 1e-12);
        assert_eq!(simes(&[]), 1.0);
    }

    #[test]
    fn benjamini_hochberg_adjusts_in_place() {
        let q = benjamini_hochberg(&[0.01, 0.04, 0.03, 0.5]);
        // Sorted 0.01, 0.03, 0.04, 0.5: 0.04, 0.0533, 0.0533, 0.5.
        assert!((q[0] - 0.04).abs() < 1e-12);
        assert!((q[1] - 0.16 / 3.0).abs() < 1e-12);
        assert!((q[2] - 0.16 / 3.0).abs() < 1e-12);
        assert!((q[3] - 0.5).abs() < 1e-12);
        assert!(benjamini_hochberg(&[]).is_empty());
    }
}
