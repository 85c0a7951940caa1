//! `jobprof trend`: what regressed across a series of processed runs, with
//! a gate for CI (`--fail-on-regression`).

use std::path::PathBuf;

use clap::Args;

use jobprof::trend::{
    self, Baseline, Finding, LoadOptions, Options, PlanChange, TimeFinding, Trend,
};
use jobprof::ExitCode;

/// Which function got slower in which query across a series of runs (trend.html).
///
/// Which function got slower, in which query, across a series of runs of
/// the same queries: per query and function, the self and total share of
/// the query's samples in each run (the mean over the run's replicates,
/// e.g. `Q3_iter1`, `Q3_iter2`), and the changes of the newest run from the
/// baseline (the median of the earlier runs) that exceed the threshold and
/// the noise (a permutation test over replicates, Benjamini-Hochberg
/// adjusted). Writes trend.html (a chart per query; click a point to open
/// that run's flamegraph or its diff against the baseline) and trend.json,
/// and prints one `regressed` or `improved` line per significant change
/// (a caller's `[total]` folded under the function that explains it) and
/// one `plan change` line per query whose functions appeared and vanished.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  jobprof trend results/run_* -o trend/
  jobprof trend nightly/2026-11-* --query q01 --query q17 -o q01-q17/
  jobprof trend base_run new_run --baseline 1 --order args -o vs-base/
  jobprof trend runs/* --label commit=$GIT_SHA --fail-on-regression 2 -o trend/   # CI gate
  jobprof trend runs/* --each-run --json trend.json -o trend/

Replicates: a capture named BASE_iterN (also BASE.repN, BASE-runN,
iteration, repeat, any case, and BASE.N) is replicate N of query BASE; any
other name is a query with one replicate (docs/capture.md, Replicates).
Workers are merged per replicate.

Nsight Systems profiles (profiles/nsys/worker_N/Q/jobprof/, made by
`jobprof process`) are followed too, a run may hold nothing else: per query
`Q [nsys]` (CPU stacks), `Q [gpu-kernels]`, `Q [gpu-memcpy]` and `Q [nvtx]`
(each name's total time per replicate), judged and gated alike
(docs/trend.md, Nsight Systems profiles). A report cut with `--slice-by`
adds a query per slice (jobprof/slices/NAME, as its summary lists them),
and a report's own profile directory (REPORT.nsys-rep.jobprof) is a run.

Nothing to judge: a query of the baseline runs that a run tested has no
processed, non-empty capture of, or too few replicates for any test (one
replicate against one baseline run of one; 3 against 3, whose permutation
test gives no p below 0.1), is named on stderr (with -q too) and in
trend.json's `unjudged`; the gate fails closed on it. Give 4 or more
replicates per run (BASE_iterN), or more baseline runs.

Exit status: 0 done (whatever changed, unless gated; a query with nothing
to judge is said, not failed, without the gate); 1 done, but some folded
lines were unusable; 2 bad usage or an unreadable run (nothing is written);
3 --fail-on-regression: a significant regression of more than PTS points
(each is named on stderr); 6 --fail-on-regression: no regression, but a run
tested has nothing to judge of a query its baseline runs have (not
processed, empty, missing, or too few replicates to test; each is named on
stderr).")]
pub struct TrendArgs {
    /// The runs: result directories (or their profiles/perf) processed by
    /// `jobprof process` or `reprocess`, at least two.
    #[arg(value_name = "RESULT_DIR", required = true, num_args = 1..)]
    pub runs: Vec<PathBuf>,

    /// Output directory (created): trend.html, trend.json, diffs/.
    #[arg(short, long, value_name = "DIR", default_value = "trend")]
    pub output: PathBuf,

    /// Only query Q (a base name such as Q3, or a capture name); repeat
    /// for more.
    #[arg(long = "query", value_name = "Q")]
    pub queries: Vec<String>,

    /// Compare with this run only: its position in the series (1 = oldest)
    /// or its directory [default: the median of the earlier runs].
    #[arg(long, value_name = "N|DIR")]
    pub baseline: Option<String>,

    /// Exit 3 when a function's share rose significantly by more than PTS
    /// points (the CI gate), else 6 when a run tested has nothing to judge
    /// of a query its baseline runs have, or too few replicates to test
    /// it; also tests changes down to PTS.
    #[arg(long, value_name = "PTS")]
    pub fail_on_regression: Option<f64>,

    /// Write trend.json here instead of into the output directory.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,

    /// The series' order: by the time the runs' captures started, or as
    /// given.
    #[arg(long, value_name = "ORDER", default_value = "time", value_parser = ["time", "args"])]
    pub order: String,

    /// A label of the newest run (commit, image digest), shown with the
    /// labels of each run's run-labels.json; repeat for more.
    #[arg(long = "label", value_name = "KEY=VALUE")]
    pub labels: Vec<String>,

    /// Which profile: on-cpu (stacks.folded), off-cpu (offcpu.folded) or
    /// wall-clock (wallclock.folded; captures recorded with --off-cpu).
    #[arg(long, value_name = "KIND", default_value = "on-cpu",
          value_parser = ["on-cpu", "off-cpu", "wall-clock"])]
    pub kind: String,

    /// Smallest change of a share worth reporting, in points.
    #[arg(long, value_name = "PTS", default_value_t = 1.0)]
    pub min_change: f64,

    /// Smallest change of a query's total worth reporting, in percent.
    #[arg(long, value_name = "PCT", default_value_t = 10.0)]
    pub min_time_change: f64,

    /// False discovery rate of the Benjamini-Hochberg adjustment.
    #[arg(long, value_name = "ALPHA", default_value_t = 0.05)]
    pub alpha: f64,

    /// Test every run against its own baseline (the earlier runs), not
    /// only the newest.
    #[arg(long)]
    pub each_run: bool,

    /// Functions charted per query (besides those with a finding).
    #[arg(long, value_name = "N", default_value_t = 8)]
    pub top: usize,

    /// Print only the findings (no header, no notes; what a run tested had
    /// nothing to judge of is still named on stderr).
    #[arg(short, long)]
    pub quiet: bool,
}

fn usage(msg: String) -> anyhow::Error {
    jobprof::Error::Usage(msg).into()
}

pub fn run(args: TrendArgs) -> anyhow::Result<ExitCode> {
    check(&args)?;
    let labels = args
        .labels
        .iter()
        .map(|l| match l.split_once('=') {
            Some((k, v)) if !k.is_empty() => Ok((trend::load::short(k), trend::load::short(v))),
            _ => Err(usage(format!(
                "--label {l}: write KEY=VALUE (e.g. commit=abc123)"
            ))),
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let folded = match args.kind.as_str() {
        "off-cpu" => jobprof::text::offcpu::OFFCPU_FOLDED,
        "wall-clock" => jobprof::text::offcpu::WALLCLOCK_FOLDED,
        _ => jobprof::capture::FOLDED,
    };
    let series = trend::load::load(
        &args.runs,
        &LoadOptions {
            folded: folded.to_string(),
            queries: args.queries.clone(),
            keep_order: args.order == "args",
            labels,
        },
    )?;
    if series.queries.is_empty() {
        let on_cpu_only = series.runs.iter().any(|r| r.on_cpu_only > 0);
        return Err(usage(nothing_to_read(
            &args.kind,
            folded,
            &args.queries,
            on_cpu_only,
        )));
    }
    let opts = Options {
        min_change: args
            .fail_on_regression
            .map_or(args.min_change, |g| g.min(args.min_change)),
        alpha: args.alpha,
        baseline: baseline(&args, &series)?,
        each_run: args.each_run,
        min_time_change: args.min_time_change,
        top: args.top,
        ..Options::default()
    };
    let count = count_name(&args.kind, &series);
    let mut t = Trend::new(&series, &opts, &args.kind, &count);
    trend::write(&mut t, &series, &args.output, args.json.as_deref())?;
    let bad = warn_unprocessed(&series, args.quiet);
    print_summary(&t, &args)?;
    warn_unjudged(&t, args.fail_on_regression);
    if let Some(gate) = args.fail_on_regression {
        // Each named by its cause (a caller's total rose with it).
        if say_regressions(&t, gate) {
            return Ok(ExitCode::Regression);
        }
        if !t.assessment.unjudged.is_empty() {
            jobprof::errln!(
                "jobprof: --fail-on-regression {gate}: failing closed: {} query(s) not judged \
                 (exit {})",
                t.assessment.unjudged.len(),
                ExitCode::NothingToJudge.code()
            );
            return Ok(ExitCode::NothingToJudge);
        }
    }
    Ok(if bad > 0 {
        ExitCode::Failed
    } else {
        ExitCode::Success
    })
}

/// Names on stderr the significant regressions of more than `gate`
/// points, each by its cause (a caller's total rose with it) or its
/// query's plan change, once; `false` when there is none.
fn say_regressions(t: &Trend, gate: f64) -> bool {
    let mut over: Vec<&Finding> = Vec::new();
    let mut plans: Vec<&PlanChange> = Vec::new();
    for f in t.significant().filter(|f| f.change > gate) {
        let r = t.reported_for(f);
        if let Some(p) = r.plan_change.and_then(|_| plan_of(t, r)) {
            if !plans.iter().any(|s| std::ptr::eq(*s, p)) {
                plans.push(p);
            }
        } else if !over.iter().any(|o| std::ptr::eq(*o, r)) {
            over.push(r);
        }
    }
    if over.is_empty() && plans.is_empty() {
        return false;
    }
    jobprof::errln!(
        "jobprof: --fail-on-regression {gate}: {} significant regression(s) of more than {gate} points:",
        over.len() + plans.len()
    );
    for f in over {
        jobprof::errln!("  {}", finding_line(f, t, usize::MAX));
        for l in callers_lines(f, usize::MAX) {
            jobprof::errln!("  {l}");
        }
    }
    for p in plans {
        for l in plan_lines(p, t, usize::MAX) {
            jobprof::errln!("  {l}");
        }
    }
    true
}

/// The plan change that names `f`'s function.
fn plan_of<'a>(t: &'a Trend, f: &Finding) -> Option<&'a PlanChange> {
    t.assessment
        .plan_changes
        .iter()
        .find(|p| p.query == f.query && p.run == f.run)
}

/// Why no capture could be read: not processed, or (`--kind off-cpu` or
/// `wall-clock` over captures that have their on-CPU `stacks.folded`)
/// recorded without `--off-cpu`, which `jobprof process` cannot mend.
fn nothing_to_read(kind: &str, folded: &str, queries: &[String], on_cpu_only: bool) -> String {
    let of = if queries.is_empty() {
        String::new()
    } else {
        format!(" of {}", queries.join(", "))
    };
    if kind != "on-cpu" && on_cpu_only {
        return format!(
            "--kind {kind}: no capture{of} in the runs has {folded}: they were recorded \
             without off-CPU data (record with `jobprof-record sidecar --off-cpu`, then \
             `jobprof process`); their on-CPU trend is `--kind on-cpu`"
        );
    }
    format!(
        "no processed capture{of} in the runs (no {folded}); run `jobprof process` on them first"
    )
}

/// Usage errors clap cannot catch.
fn check(args: &TrendArgs) -> anyhow::Result<()> {
    if args.runs.len() < 2 {
        return Err(usage(
            "a trend needs at least two runs (the baseline and the run to test)".into(),
        ));
    }
    for (name, v) in [
        ("--min-change", args.min_change),
        ("--min-time-change", args.min_time_change),
    ] {
        if !(v.is_finite() && v >= 0.0) {
            return Err(usage(format!("{name} {v}: give a number of at least 0")));
        }
    }
    if let Some(g) = args
        .fail_on_regression
        .filter(|g| !(g.is_finite() && *g >= 0.0))
    {
        return Err(usage(format!(
            "--fail-on-regression {g}: give points of at least 0 (e.g. 2)"
        )));
    }
    if !(args.alpha > 0.0 && args.alpha < 1.0) {
        return Err(usage(format!(
            "--alpha {}: give a rate between 0 and 1 (e.g. 0.05)",
            args.alpha
        )));
    }
    if args.output.is_file() {
        return Err(usage(format!(
            "{}: -o names the output directory (trend.html, trend.json); this is a file",
            args.output.display()
        )));
    }
    // Never write into a run: jobprof does not modify its inputs.
    let out = resolved(&args.output);
    for r in &args.runs {
        if let (Some(o), Ok(r2)) = (&out, std::fs::canonicalize(r)) {
            if o.starts_with(&r2) {
                return Err(usage(format!(
                    "-o {}: inside the run {}; write the trend elsewhere (jobprof never \
                     modifies its inputs)",
                    args.output.display(),
                    r.display()
                )));
            }
        }
    }
    Ok(())
}

/// `path` made absolute through its nearest existing ancestor (links
/// resolved), the missing rest appended.
fn resolved(path: &std::path::Path) -> Option<PathBuf> {
    let abs = std::path::absolute(path).ok()?;
    let mut existing = abs.as_path();
    let mut rest = Vec::new();
    while !existing.exists() {
        rest.push(existing.file_name()?.to_owned());
        existing = existing.parent()?;
    }
    let mut out = existing.canonicalize().ok()?;
    for part in rest.iter().rev() {
        out.push(part);
    }
    Some(out)
}

/// `--baseline N|DIR` as an index of the series.
fn baseline(args: &TrendArgs, series: &jobprof::trend::Series) -> anyhow::Result<Baseline> {
    let Some(b) = &args.baseline else {
        return Ok(Baseline::Earlier);
    };
    let n = series.runs.len();
    if !b.is_empty() && b.bytes().all(|c| c.is_ascii_digit()) {
        return match b.parse::<usize>() {
            Ok(i) if (1..=n).contains(&i) => Ok(Baseline::Run(i - 1)),
            _ => Err(usage(format!(
                "--baseline {b}: give a run's position between 1 (oldest) and {n}, or its directory"
            ))),
        };
    }
    let want = std::fs::canonicalize(b).map_err(|e| usage(format!("--baseline {b}: {e}")))?;
    series
        .runs
        .iter()
        .position(|r| std::fs::canonicalize(&r.dir).is_ok_and(|d| d == want))
        .map(Baseline::Run)
        .ok_or_else(|| usage(format!("--baseline {b}: not one of the runs given")))
}

/// What the counts are: `ns` for the clocks and the off-CPU profiles.
fn count_name(kind: &str, series: &jobprof::trend::Series) -> String {
    if kind != "on-cpu" {
        return "ns".into();
    }
    let events: std::collections::BTreeSet<&str> = series
        .runs
        .iter()
        .filter_map(|r| r.event.as_deref())
        .map(jobprof::text::perf_script::event_base)
        .collect();
    match events.iter().next() {
        Some(e) if events.len() == 1 && e.ends_with("-clock") => "ns".into(),
        Some(e) if events.len() == 1 => e.to_string(),
        _ => "samples".into(),
    }
}

/// Warns about captures left out; returns the unusable folded lines.
fn warn_unprocessed(series: &jobprof::trend::Series, quiet: bool) -> u64 {
    let mut bad = 0;
    for r in &series.runs {
        bad += r.bad_lines;
        if !quiet && !r.unprocessed.is_empty() {
            jobprof::errln!(
                "jobprof: warning: {}: {} capture(s) not processed, left out: {}",
                r.dir.display(),
                r.unprocessed.len(),
                r.unprocessed.join(", ")
            );
        }
    }
    bad
}

/// Names, on stderr whatever `--quiet` says, each query of the baseline
/// runs that a run tested has nothing of (the gate fails closed on them).
fn warn_unjudged(t: &Trend, gate: Option<f64>) {
    let unjudged = &t.assessment.unjudged;
    if unjudged.is_empty() {
        return;
    }
    let what = if gate.is_some() { "error" } else { "warning" };
    jobprof::errln!(
        "jobprof: {what}: {} query(s) of the baseline runs not judged (nothing to judge, \
         or no test possible):",
        unjudged.len()
    );
    for u in unjudged {
        jobprof::errln!(
            "  run {} ({}), query {}: {}",
            u.run + 1,
            t.runs[u.run].name,
            u.query,
            u.reason
        );
    }
    if gate.is_none() {
        jobprof::errln!(
            "jobprof: warning: not judged, so not gated: with --fail-on-regression this exits {}",
            ExitCode::NothingToJudge.code()
        );
    }
}

/// At most `width` characters: the start of `s` replaced by `…` (a
/// function's own name is at the end of its qualified name).
fn fit(s: &str, width: usize) -> String {
    let n = s.chars().count();
    if n <= width || width < 5 {
        return s.to_string();
    }
    let t: String = s.chars().skip(n - (width - 1)).collect();
    format!("…{t}")
}

/// One `regressed`/`improved` line, the function shortened so that the
/// line fits `width` columns.
pub fn finding_line(f: &Finding, t: &Trend, width: usize) -> String {
    let kind = if f.kind == trend::Kind::Total {
        " [total]"
    } else {
        ""
    };
    let run = if t.assessment.tested_runs.len() > 1 {
        format!(", run {}", f.run + 1)
    } else {
        String::new()
    };
    let tail = format!(
        "{kind} {:.1}% -> {:.1}% ({:+.1} points, {}{run})",
        f.baseline,
        f.new,
        f.change,
        trend::p_is(f.p)
    );
    let head = format!("{} {} ", f.verdict, f.query);
    let room = width.saturating_sub(head.chars().count() + tail.chars().count());
    format!("{head}{}{tail}", fit(&f.function, room.max(12)))
}

/// The `  called from: a <- b <- c` lines under a cause (none when it has
/// no callers; the nearest [`trend::CALLERS_SHOWN`], the rest counted),
/// each at most `width` columns: long names keep their end.
pub fn callers_lines(f: &Finding, width: usize) -> Vec<String> {
    if f.callers.is_empty() {
        return Vec::new();
    }
    let shown = trend::CALLERS_SHOWN;
    let mut names: Vec<String> = f.callers.iter().take(shown).map(|c| fit(c, 60)).collect();
    if f.callers.len() > shown {
        names.push(format!("... ({} more)", f.callers.len() - shown));
    }
    let mut lines = vec![format!("  called from: {}", names[0])];
    for n in &names[1..] {
        let cur = lines.last_mut().expect("one line");
        if cur.chars().count() + 4 + n.chars().count() <= width {
            cur.push_str(&format!(" <- {n}"));
        } else {
            lines.push(format!("    <- {n}"));
        }
    }
    lines
}

/// Functions named per list of a `plan change` line (largest first; the
/// rest counted, `trend.json` and the page have them all).
const PLAN_SHOWN: usize = 4;

/// The `plan change` line of a query and run, wrapped at `width`
/// columns: `plan change q1: appeared A 12.1%, B 3.0%; vanished C 15.3%`
/// (each function's share in the run where it appeared, in the baseline
/// where it vanished; long names keep their end).
pub fn plan_lines(p: &PlanChange, t: &Trend, width: usize) -> Vec<String> {
    plan_text(p, t.assessment.tested_runs.len() > 1, width)
}

/// [`plan_lines`], the run named when `name_run`.
fn plan_text(p: &PlanChange, name_run: bool, width: usize) -> Vec<String> {
    let run = if name_run {
        format!(", run {}", p.run + 1)
    } else {
        String::new()
    };
    let list = |word: &str, v: &[trend::PlanFunction]| -> Option<String> {
        let mut names: Vec<String> = v
            .iter()
            .take(PLAN_SHOWN)
            .map(|e| format!("{} {:.1}%", fit(&e.function, 60), e.share))
            .collect();
        if v.len() > PLAN_SHOWN {
            names.push(format!("... ({} more)", v.len() - PLAN_SHOWN));
        }
        (!names.is_empty()).then(|| format!("{word} {}", names.join(", ")))
    };
    let parts: Vec<String> = [list("appeared", &p.appeared), list("vanished", &p.vanished)]
        .into_iter()
        .flatten()
        .collect();
    let text = format!("plan change {}{run}: {}", p.query, parts.join("; "));
    let mut lines = vec![String::new()];
    for w in text.split(' ') {
        let cur = lines.last_mut().expect("one line");
        if !cur.trim().is_empty() && cur.chars().count() + 1 + w.chars().count() > width {
            lines.push("  ".to_string());
        }
        let cur = lines.last_mut().expect("one line");
        if !cur.trim().is_empty() {
            cur.push(' ');
        }
        cur.push_str(w);
    }
    lines
}

fn time_line(f: &TimeFinding, t: &Trend) -> String {
    let amount = |x: f64| trend::amount(x, trend::count_name_of(&f.query, &t.settings.count_name));
    let run = if t.assessment.tested_runs.len() > 1 {
        format!(", run {}", f.run + 1)
    } else {
        String::new()
    };
    format!(
        "{} {} {} -> {} per replicate ({:+.0}%, {}{run})",
        if f.significant { f.verdict } else { "total" },
        fit(&f.query, 24),
        amount(f.baseline),
        amount(f.new),
        f.change_pct,
        trend::p_is(f.p)
    )
}

/// Words of `text` in lines of at most 80 columns.
fn wrap(text: &str) -> Vec<String> {
    let mut lines = vec![String::new()];
    for w in text.split_whitespace() {
        let cur = lines.last_mut().expect("one line");
        if !cur.is_empty() && cur.chars().count() + 1 + w.chars().count() > 80 {
            lines.push(String::new());
        }
        let cur = lines.last_mut().expect("one line");
        if !cur.is_empty() {
            cur.push(' ');
        }
        cur.push_str(w);
    }
    lines
}

fn print_summary(t: &Trend, args: &TrendArgs) -> anyhow::Result<()> {
    let s = &t.settings;
    if !args.quiet {
        let (a, b) = (&t.runs[0], &t.runs[t.runs.len() - 1]);
        let tested: Vec<String> = t
            .assessment
            .tested_runs
            .iter()
            .map(|i| (i + 1).to_string())
            .collect();
        let head = format!(
            "trend of {} runs ({} .. {}), {} queries, {}. Tested run {} against {}: \
             changes over {} points and {} sd of the baseline runs, significant by a \
             permutation test over replicates (false discovery rate {} over queries and \
             functions).",
            t.runs.len(),
            a.name,
            b.name,
            t.assessment.queries.len(),
            s.profile,
            tested.join(", "),
            s.baseline,
            s.min_change,
            s.noise_sigmas,
            s.alpha
        );
        for l in wrap(&head) {
            jobprof::outln!("{l}")?;
        }
    }
    let mut any = false;
    // Causes, their callers folded under them ([`Finding::reported`]).
    let sig: Vec<&Finding> = t.reported().collect();
    for f in sig
        .iter()
        .filter(|f| f.change > 0.0)
        .chain(sig.iter().filter(|f| f.change < 0.0))
    {
        jobprof::outln!("{}", finding_line(f, t, 80))?;
        for l in callers_lines(f, 80) {
            jobprof::outln!("{l}")?;
        }
        any = true;
    }
    // One line (wrapped) per query whose plan changed.
    for p in &t.assessment.plan_changes {
        for l in plan_lines(p, t, 80) {
            jobprof::outln!("{l}")?;
        }
        any = true;
    }
    // Every query whose total moved beyond the threshold, with its
    // figure; `slower`/`faster` only when significant.
    for f in &t.assessment.time_findings {
        jobprof::outln!("{}", time_line(f, t))?;
        any |= f.significant;
    }
    if !any && !args.quiet {
        if t.assessment.unjudged.is_empty() {
            jobprof::outln!("no significant change")?;
        } else {
            let names: std::collections::BTreeSet<&str> = t
                .assessment
                .unjudged
                .iter()
                .map(|u| u.query.as_str())
                .collect();
            let names: Vec<&str> = names.into_iter().collect();
            let line = format!(
                "nothing significant in the queries judged; not judged (nothing to judge, \
                 or no test possible; see stderr): {}",
                names.join(", ")
            );
            for l in wrap(&line) {
                jobprof::outln!("{l}")?;
            }
        }
    }
    if !args.quiet {
        for n in &t.assessment.notes {
            for l in wrap(&format!("note: {n}")) {
                jobprof::outln!("{l}")?;
            }
        }
        jobprof::outln!("{}", args.output.join(trend::TREND_HTML).display())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_names_keep_their_end() {
        assert_eq!(fit("abcdefghij", 20), "abcdefghij");
        assert_eq!(fit("duckdb::Hash::Sink", 10), "…ash::Sink");
        assert_eq!(fit("abcdefghijkl", 7).chars().count(), 7);
    }

    #[test]
    fn a_missing_off_cpu_profile_says_how_to_record_it() {
        let m = nothing_to_read("off-cpu", "offcpu.folded", &[], true);
        assert!(
            m.contains("--kind off-cpu") && m.contains("offcpu.folded"),
            "{m}"
        );
        assert!(
            m.contains("--off-cpu") && !m.contains("on them first"),
            "{m}"
        );
        let q = ["q1".to_string()];
        let m = nothing_to_read("wall-clock", "wallclock.folded", &q, true);
        assert!(
            m.contains("no capture of q1 in the runs has wallclock.folded"),
            "{m}"
        );
        // Not processed at all: processing is the fix, whatever the kind.
        for (kind, folded) in [("off-cpu", "offcpu.folded"), ("on-cpu", "stacks.folded")] {
            let m = nothing_to_read(kind, folded, &[], false);
            assert!(
                m.contains(folded) && m.contains("run `jobprof process`"),
                "{m}"
            );
        }
    }

    #[test]
    fn callers_fit_80_columns_nearest_first_the_rest_counted() {
        let stat = jobprof::trend::assess::Stat {
            mean: 1.0,
            sd: 0.0,
            min: 1.0,
            max: 1.0,
            n: 1,
        };
        let mut f = Finding {
            verdict: "regressed",
            significant: true,
            query: "q1".into(),
            function: "leaf".into(),
            kind: trend::Kind::Own,
            run: 1,
            baseline_runs: vec![0],
            baseline: 1.0,
            new: 2.0,
            new_spread: stat,
            change: 1.0,
            baseline_time: 1.0,
            new_time: 2.0,
            own_time_change: 1.0,
            own_time_moved: true,
            noise: 0.0,
            threshold: 1.0,
            p: 0.01,
            q: 0.01,
            method: jobprof::sys::stats::Method::ExactPermutation,
            cause: None,
            plan_change: None,
            callers: Vec::new(),
        };
        assert!(callers_lines(&f, 80).is_empty());
        f.callers = (0..12)
            .map(|i| format!("duckdb::PhysicalHashAggregate::Sink{i}"))
            .collect();
        let lines = callers_lines(&f, 80);
        assert_eq!(
            lines[0],
            "  called from: duckdb::PhysicalHashAggregate::Sink0"
        );
        assert_eq!(lines[1], "    <- duckdb::PhysicalHashAggregate::Sink1");
        assert!(lines.iter().all(|l| l.chars().count() <= 80), "{lines:#?}");
        let all = lines.join(" ");
        assert!(all.contains("Sink7") && !all.contains("Sink8"), "{all}");
        assert!(all.ends_with("<- ... (4 more)"), "{all}");
    }

    #[test]
    fn a_plan_change_fits_80_columns_largest_first_the_rest_counted() {
        let f = |n: &str, share: f64| trend::PlanFunction {
            function: n.to_string(),
            share,
        };
        let p = PlanChange {
            query: "q1".into(),
            run: 3,
            appeared: (0..6)
                .map(|k| {
                    f(
                        &format!("duckdb::GroupedAggregateHashTable::Op{k}"),
                        9.0 - k as f64,
                    )
                })
                .collect(),
            vanished: vec![f(&format!("duckdb::{}", "x".repeat(90)), 12.0)],
        };
        let lines = plan_text(&p, true, 80);
        assert!(
            lines[0].starts_with(
                "plan change q1, run 4: appeared duckdb::GroupedAggregateHashTable::Op0 9.0%,"
            ),
            "{lines:#?}"
        );
        assert!(lines.iter().all(|l| l.chars().count() <= 80), "{lines:#?}");
        assert!(lines[1..]
            .iter()
            .all(|l| l.starts_with("  ") && !l.starts_with("   ")));
        let text = lines.join("\n");
        assert!(
            text.contains("Op3 6.0%, ... (2 more); vanished") && !text.contains("Op4"),
            "{text}"
        );
        assert!(text.ends_with("xxx 12.0%") && text.contains("…"), "{text}");
    }

    #[test]
    fn wrapped_lines_fit_80_columns() {
        let text = "word ".repeat(60);
        for l in wrap(&text) {
            assert!(l.chars().count() <= 80);
        }
    }
}
