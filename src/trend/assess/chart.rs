//! The chart series of each query: its totals per run and its top
//! functions' self and total shares, with their spread over replicates
//! (and every function with a significant finding), for `trend.html`.

use serde::Serialize;

use super::{Finding, Kind, Stat};
use crate::trend::load::QuerySeries;

/// One function's share across the runs.
#[derive(Debug, Clone, Serialize)]
pub struct FnSeries {
    /// The function.
    pub function: String,
    /// Per run: its share (percent), `null` where the run lacks the query.
    pub points: Vec<Option<Stat>>,
}

/// One query across the runs.
#[derive(Debug, Clone, Serialize)]
pub struct QueryTrend {
    /// The base query name.
    pub query: String,
    /// Per run: its total (counts per replicate, workers summed).
    pub totals: Vec<Option<Stat>>,
    /// The charted functions' self shares.
    pub self_series: Vec<FnSeries>,
    /// The charted functions' total shares.
    pub total_series: Vec<FnSeries>,
    /// Per run: the replicates' capture names.
    pub replicates: Vec<Vec<String>>,
    /// Per run: its flamegraph, relative to the output directory.
    pub flamegraphs: Vec<Option<String>>,
    /// Per run: its diff against the baseline, relative to the output
    /// directory (drawn for runs with a significant finding).
    pub diffs: Vec<Option<String>>,
}

/// Query `name`'s chart: its totals and its top functions per run.
pub(super) fn chart(
    name: &str,
    q: &QuerySeries,
    n: usize,
    top: usize,
    findings: &[Finding],
) -> QueryTrend {
    let totals = (0..n)
        .map(|i| {
            let v: Vec<f64> = q
                .runs
                .get(i)
                .map(|r| r.iter().map(|r| r.total as f64).collect())
                .unwrap_or_default();
            Stat::of(&v)
        })
        .collect();
    let series = |kind: Kind| {
        let mut best = vec![0f64; q.names.len()];
        for reps in &q.runs {
            let mut sum = vec![0f64; q.names.len()];
            for r in reps {
                for &(id, s, t) in &r.shares {
                    sum[id as usize] += f64::from(if kind == Kind::Own { s } else { t });
                }
            }
            for (b, s) in best.iter_mut().zip(sum) {
                *b = b.max(s / reps.len().max(1) as f64);
            }
        }
        let mut ids: Vec<u32> = (0..q.names.len() as u32).collect();
        ids.sort_by(|&a, &b| {
            best[b as usize]
                .total_cmp(&best[a as usize])
                .then(a.cmp(&b))
        });
        let mut chosen: Vec<u32> = ids.into_iter().take(top).collect();
        for f in findings
            .iter()
            .filter(|f| f.significant && f.kind == kind && f.query == name)
        {
            if let Some(id) = q.id(&f.function) {
                if !chosen.contains(&id) {
                    chosen.push(id);
                }
            }
        }
        chosen
            .into_iter()
            .map(|id| FnSeries {
                function: q.names[id as usize].clone(),
                points: (0..n)
                    .map(|i| {
                        let reps = q.runs.get(i).map(Vec::as_slice).unwrap_or_default();
                        let v: Vec<f64> = reps
                            .iter()
                            .map(|r| {
                                let (s, t) = r.share(id);
                                if kind == Kind::Own {
                                    s
                                } else {
                                    t
                                }
                            })
                            .collect();
                        Stat::of(&v)
                    })
                    .collect(),
            })
            .collect()
    };
    QueryTrend {
        query: name.to_string(),
        totals,
        self_series: series(Kind::Own),
        total_series: series(Kind::Total),
        replicates: (0..n)
            .map(|i| {
                q.runs
                    .get(i)
                    .map(|r| r.iter().map(|r| r.name.clone()).collect())
                    .unwrap_or_default()
            })
            .collect(),
        flamegraphs: vec![None; n],
        diffs: vec![None; n],
    }
}
