//! `jobprof trend` on real captures of a real engine: DuckDB (from PyPI,
//! tests/programs/trend_duckdb.py) runs two TPC-H-shaped queries (q1, an
//! aggregation; q6, a filtered sum), 4 iterations each, every iteration
//! captured by the real `jobprof-record` sidecar as `qN_iterK`, and the runs
//! are processed by the real binary (with `perf script`). Three runs are
//! unchanged; a fourth computes one more expression in q1 (a substring
//! search in a quarter of the rows, whose compare loop is the named
//! `duckdb::FindStrInStr`; with its memchr, about half of that run's q1
//! samples). The unchanged series
//! must flag nothing, the series ending with the injected run must flag q1
//! and `duckdb::FindStrInStr`, and the false-positive rate is measured over
//! many series resampled from the real replicates. A second series,
//! recorded with DWARF stacks, ends with a run whose q1 changes its plan
//! (a hash aggregate for the perfect hash aggregate): it must be said in a
//! few lines, the hashing named and the Python frames folded under it.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::sync::OnceLock;

use serde_json::Value;

use crate::util::{self, chromium, dump_dom, jobprof, ok, output_text, perf_can_record, require};

mod diff;

const INJECTED: &str = "duckdb::FindStrInStr";
const ITERATIONS: u32 = 4;

/// Three unchanged runs and one with injected work in q1, processed.
struct Runs {
    /// Where the runs are (a temporary directory, or
    /// JOBPROF_TEST_TREND_RUNS).
    root: PathBuf,
    _keep: tempfile::TempDir,
    base: [PathBuf; 3],
    injected: PathBuf,
}

/// One run: DuckDB under its sidecar (call graph fp: DuckDB has no frame
/// pointers, but the leaf, which self shares count, is exact).
fn record_run(py: &Path, dir: &Path, job: &str, inject: &str, call_graph: &str) {
    util::record_python(
        py,
        "tests/programs/trend_duckdb.py",
        &[&ITERATIONS.to_string(), inject],
        &dir.join("profiles/perf"),
        &[
            "--frequency",
            "997",
            "--start-timeout",
            "120",
            "--stop-timeout",
            "60",
            "--call-graph",
            call_graph,
        ],
        &[("SLURM_JOB_ID", job)],
    );
}

fn runs() -> Option<&'static Runs> {
    static RUNS: OnceLock<Option<Runs>> = OnceLock::new();
    RUNS.get_or_init(|| {
        if !require(
            perf_can_record(),
            "perf that can record, for tests/trend.rs",
        ) {
            return None;
        }
        let py = util::duckdb_python()?;
        let keep = tempfile::tempdir().unwrap();
        // JOBPROF_TEST_TREND_RUNS=DIR keeps the processed runs there and
        // reuses them (for working on the trend itself).
        let kept = std::env::var_os("JOBPROF_TEST_TREND_RUNS").map(PathBuf::from);
        let root = kept.clone().unwrap_or_else(|| keep.path().to_path_buf());
        let dir = |n: &str| root.join(n);
        let base = [dir("run_7001"), dir("run_7002"), dir("run_7003")];
        let injected = dir("run_7004");
        if kept.is_some() && injected.join("profiles/perf/index.html").is_file() {
            return Some(Runs {
                root,
                _keep: keep,
                base,
                injected,
            });
        }
        record_series(&py, &base, &injected, ("700", "1"), "fp");
        Some(Runs {
            root,
            _keep: keep,
            base,
            injected,
        })
    })
    .as_ref()
}

/// Records the unchanged runs `base` (jobs `{job}1`..`{job}3`) and `last`
/// (job `{job}4`, trend_duckdb.py's INJECT `inject`) with `call_graph`,
/// and processes them.
fn record_series(
    py: &Path,
    base: &[PathBuf; 3],
    last: &Path,
    (job, inject): (&str, &str),
    call_graph: &str,
) {
    for (i, b) in base.iter().enumerate() {
        record_run(py, b, &format!("{job}{}", i + 1), "0", call_graph);
    }
    record_run(py, last, &format!("{job}4"), inject, call_graph);
    let out = jobprof()
        .arg("process")
        .args(base)
        .arg(last)
        .args(["-j", "2", "--symbolizer", "perf"])
        .output()
        .unwrap();
    ok(&out);
}

/// Three unchanged runs and one whose q1 changes its plan
/// (trend_duckdb.py INJECT=2: a grouping key that hashes every row, and a
/// hash aggregate where the others run a perfect hash aggregate), recorded
/// with DWARF call graphs (the stacks walk through DuckDB, whose wheel has
/// no frame pointers, to the Python frames every sample passes through:
/// `Py_RunMain`, `PyEval_EvalCode`, ...) and processed; only for the tests
/// that use them.
struct PlanRuns {
    base: [PathBuf; 3],
    plan: PathBuf,
}

fn plan_runs() -> Option<&'static PlanRuns> {
    static RUNS: OnceLock<Option<PlanRuns>> = OnceLock::new();
    RUNS.get_or_init(|| {
        let r = runs()?;
        let py = util::duckdb_python()?;
        let dir = |n: &str| r.root.join(n);
        let base = [dir("run_7101"), dir("run_7102"), dir("run_7103")];
        let plan = dir("run_7104");
        if !plan.join("profiles/perf/index.html").is_file() {
            record_series(&py, &base, &plan, ("710", "2"), "dwarf");
        }
        Some(PlanRuns { base, plan })
    })
    .as_ref()
}

pub(crate) fn trend(runs: &[&Path], out: &Path, extra: &[&str]) -> Output {
    jobprof()
        .arg("trend")
        .args(runs)
        .arg("-o")
        .arg(out)
        .args(extra)
        .output()
        .unwrap()
}

pub(crate) fn json(path: &Path) -> Value {
    serde_json::from_slice(&util::read(path)).unwrap()
}

/// The stdout line that says q1's injected function regressed.
fn regressed_line(out: &Output) -> String {
    let text = util::stdout(out);
    let line = text
        .lines()
        .find(|l| l.starts_with("regressed q1 ") && l.contains("FindStrInStr"));
    line.unwrap_or_else(|| panic!("no regressed line for q1 and {INJECTED}:\n{text}"))
        .to_string()
}

pub(crate) fn significant(t: &Value) -> Vec<&Value> {
    t["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["significant"] == true)
        .collect()
}

/// Whether a finding (or a printed line) is about the clock reads of
/// DuckDB's adaptive filters. They time their conjuncts with
/// `steady_clock::now` (`RowGroup::ProcessPreparedScan`,
/// `ExpressionExecutor::Select`) and reorder them by what they measured,
/// so how often the clock is read, and what a read costs in this VM, moves
/// with the machine at the time of the run: in one CI run all four q6
/// replicates of an unchanged run had `__vdso_clock_gettime` at 2.2%
/// against 0.4% in the two before it, a true change of that run's profile
/// that the trend rightly flagged, caused by nothing the test changed.
fn clock_read(function: &str) -> bool {
    function.contains("clock_gettime")
}

#[test]
fn unchanged_runs_flag_nothing() {
    let Some(r) = runs() else { return };
    let out_dir = tempfile::tempdir().unwrap();
    let base: Vec<&Path> = r.base.iter().map(PathBuf::as_path).collect();
    let out = trend(&base, out_dir.path(), &["--fail-on-regression", "1"]);
    let text = util::stdout(&out);
    let t = json(&out_dir.path().join("trend.json"));
    let flagged: Vec<&Value> = significant(&t)
        .into_iter()
        .filter(|f| !clock_read(f["function"].as_str().unwrap_or("")))
        .collect();
    assert!(flagged.is_empty(), "{flagged:#?}");
    let clock_only = significant(&t).len() > flagged.len();
    if clock_only {
        // The clock reads alone moved: a regression of them fails the
        // gate, as it should; nothing else may be flagged.
        assert!(
            matches!(out.status.code(), Some(0 | 3)),
            "{}",
            output_text(&out)
        );
    } else {
        assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
        assert!(text.contains("no significant change"), "{text}");
    }
    for l in text.lines() {
        assert!(l.chars().count() <= 80, "wider than 80 columns: {l}");
        assert!(
            !(l.starts_with("regressed") || l.starts_with("improved")) || clock_read(l),
            "{text}"
        );
    }
    assert_eq!(t["runs"].as_array().unwrap().len(), 3);
    let queries: Vec<&str> = t["queries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| q["query"].as_str().unwrap())
        .collect();
    assert_eq!(
        queries,
        ["q1", "q6"],
        "replicates grouped by the naming rule"
    );
    assert_eq!(
        t["queries"][0]["replicates"][2].as_array().unwrap().len(),
        ITERATIONS as usize
    );
}

#[test]
fn injected_work_is_flagged_for_its_query_and_function() {
    let Some(r) = runs() else { return };
    let out_dir = tempfile::tempdir().unwrap();
    let runs = [r.base[0].as_path(), &r.base[1], &r.injected];
    let out = trend(&runs, out_dir.path(), &["--fail-on-regression", "1"]);
    assert_eq!(out.status.code(), Some(3), "{}", output_text(&out));
    let line = regressed_line(&out);
    assert!(line.contains("points, p="), "{line}");
    assert!(line.chars().count() <= 80, "{line}");
    // The cause, not every caller: the functions whose own time moved (the
    // injected expression's: the search and memchr; and as the run's
    // noise has it the CASE, the modulo, the scan of the padded column, or
    // a string segment check the changed plan runs less: "improved q1
    // ...ValidateRange 4.1% -> 0.7%" in one CI run), their callers'
    // `[total]` findings (and their own) folded under them ("called from:
    // ..." where the stacks name callers). DuckDB has no frame pointers,
    // so past the leaf these fp stacks name whatever return addresses the
    // walk meets: a `[total]` finding of such a "caller" is that noise
    // ("improved q1 ...Info::~LogicalTypeInfo [total] 11.1% -> 1.9%" in
    // one CI run), and may stand among the few lines allowed; the roots
    // every sample shares (Py_RunMain) never do. The folding of true
    // callers is tested on exact stacks (trend_synthetic). Nothing only
    // diluted is flagged, nor anything of q6.
    let text = util::stdout(&out);
    let flagged: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("regressed ") || l.starts_with("improved "))
        .collect();
    assert!(flagged.len() <= 6, "{text}");
    assert!(
        flagged.iter().all(
            |l| ((l.starts_with("regressed q1 ") || l.starts_with("improved q1 "))
                && !l.contains("Py_RunMain"))
                || clock_read(l)
        ),
        "{text}"
    );
    let err = util::stderr(&out);
    assert!(
        err.contains("--fail-on-regression 1") && err.contains(INJECTED) && err.contains("p="),
        "{err}"
    );
    let t = json(&out_dir.path().join("trend.json"));
    let sig = significant(&t);
    let hit = sig
        .iter()
        .find(|f| f["function"] == INJECTED && f["kind"] == "self")
        .unwrap_or_else(|| panic!("{INJECTED} not flagged: {sig:#?}"));
    assert_eq!(hit["query"], "q1");
    assert_eq!(hit["verdict"], "regressed");
    assert!(hit["baseline"].as_f64().unwrap() < 0.5, "{hit}");
    assert!(hit["p"].as_f64().unwrap() < 0.05, "{hit}");
    assert!(
        sig.iter()
            .all(|f| f["query"] == "q1" || clock_read(f["function"].as_str().unwrap_or(""))),
        "q6 did not change: {sig:#?}"
    );
    // The run's diff against its baseline was drawn, and q1 took longer.
    let diff = t["queries"][0]["diffs"][2]
        .as_str()
        .expect("a diff for run 3");
    assert!(out_dir.path().join(diff).is_file());
    let times = t["time_findings"].as_array().unwrap();
    assert!(
        times
            .iter()
            .any(|f| f["query"] == "q1" && f["verdict"] == "slower"),
        "{times:#?}"
    );
    assert!(
        !times
            .iter()
            .any(|f| f["query"] == "q6" && f["significant"] == true),
        "{times:#?}"
    );
}

#[test]
fn the_page_draws_charts_and_a_click_opens_the_runs_flamegraph() {
    let Some(r) = runs() else { return };
    if !util::require_chromium() {
        return;
    }
    let out_dir = tempfile::tempdir().unwrap();
    let runs = [r.base[0].as_path(), &r.base[1], &r.injected];
    let out = trend(&runs, out_dir.path(), &[]);
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let page = out_dir.path().join("trend.html");
    let html = fs::read_to_string(&page).unwrap();
    assert!(!html.contains("://"), "the page names a URL");
    let dom = dump_dom(&page, "jobprof-selftest=chart");
    let st = dom
        .split("<pre id=\"jp-selftest\">")
        .nth(1)
        .expect("self-test ran");
    let st: Value = serde_json::from_str(&st[..st.find("</pre>").unwrap()]).unwrap();
    for q in st.as_array().unwrap() {
        assert!(q["lines"].as_u64().unwrap() >= 3, "{q}");
        assert!(q["points"].as_u64().unwrap() >= 9, "3 runs per line: {q}");
    }
    assert!(
        st[0]["flagged"].as_u64().unwrap() >= 1,
        "q1's regression is circled: {st}"
    );
    // A point of run 2 opens run 2's merged flamegraph (job 7002): the
    // job views' page of q6, its replicates summed.
    let dom = dump_dom(&page, "jobprof-selftest=click&query=q6&run=2");
    assert!(
        dom.contains("job 7002 · query q6 · all workers"),
        "{}",
        &dom[..dom.len().min(600)]
    );
    // In diff mode the injected run's point opens its diff.
    let dom = dump_dom(&page, "jobprof-selftest=click&query=q1&run=3&mode=diff");
    assert!(
        dom.contains("query q1 · run 3 (run_7004) against run 2 (run_7002)"),
        "{}",
        &dom[..dom.len().min(600)]
    );
}

/// The false-positive rate over many unchanged series: each synthesized
/// from the real replicates of the three unchanged runs, drawn with
/// replacement into 3 runs x 4 replicates; and the detection rate when the
/// last run's replicates come from the injected run.
#[test]
fn false_positives_are_rare_over_many_resampled_real_series() {
    use jobprof::trend::{self, load::LoadOptions, stats::Rng, Options};
    let Some(r) = runs() else { return };
    let load = |dirs: &[PathBuf]| {
        trend::load::load(
            dirs,
            &LoadOptions {
                folded: "stacks.folded".into(),
                keep_order: true,
                ..LoadOptions::default()
            },
        )
        .unwrap()
    };
    let base = load(&r.base);
    let mut all = r.base.to_vec();
    all.push(r.injected.clone());
    let with_injected = load(&all);
    let mut rng = Rng::new(42);
    let trials = 200;
    let (mut false_pos, mut detected) = (0, 0);
    for i in 0..trials {
        // Unchanged: every run's replicates drawn from the 3 real runs.
        let s = resample(&base, &[&[0, 1, 2], &[0, 1, 2], &[0, 1, 2]], &mut rng);
        let t = trend::Trend::new(&s, &Options::default(), "on-cpu", "ns");
        if t.significant().next().is_some() {
            false_pos += 1;
            if std::env::var_os("JOBPROF_TEST_TREND_SHOW").is_some() {
                for f in t.significant() {
                    eprintln!("{f:?}");
                }
            }
        }
        if i < 50 {
            let s = resample(&with_injected, &[&[0, 1, 2], &[0, 1, 2], &[3]], &mut rng);
            let t = trend::Trend::new(&s, &Options::default(), "on-cpu", "ns");
            if t.significant()
                .any(|f| f.query == "q1" && f.function == INJECTED)
            {
                detected += 1;
            }
        }
    }
    let rate = f64::from(false_pos) / f64::from(trials);
    eprintln!(
        "trend: {false_pos} of {trials} unchanged series flagged something ({:.1}%); \
         the injected function found in {detected} of 50",
        100.0 * rate
    );
    assert!(rate <= 0.05, "false-positive rate {rate}");
    assert!(detected >= 45, "detected in {detected} of 50");
}

/// A series whose run k's ITERATIONS replicates are drawn from the
/// replicates of the runs `from[k]` of `s`: without replacement across the
/// whole series (a shuffle of real replicates, each used at most once)
/// when the runs draw from the same pool, so every replicate is real and
/// independent of the others.
fn resample(
    s: &jobprof::trend::Series,
    from: &[&[usize]],
    rng: &mut jobprof::trend::stats::Rng,
) -> jobprof::trend::Series {
    let mut out = s.clone();
    out.runs = (0..from.len())
        .map(|k| s.runs[k.min(s.runs.len() - 1)].clone())
        .collect();
    for (name, q) in &mut out.queries {
        let src = &s.queries[name];
        let mut pools: std::collections::BTreeMap<&[usize], Vec<_>> = Default::default();
        q.runs = from
            .iter()
            .map(|runs| {
                let pool = pools
                    .entry(runs)
                    .or_insert_with(|| runs.iter().flat_map(|&i| src.runs[i].iter()).collect());
                (0..ITERATIONS)
                    .map(|_| pool.swap_remove(rng.below(pool.len())).clone())
                    .collect()
            })
            .collect();
    }
    out
}

#[test]
fn hostile_function_names_stay_text() {
    let Some(r) = runs() else { return };
    let tmp = tempfile::tempdir().unwrap();
    // The three unchanged runs, then a copy of the first whose q6 spends a
    // third of its time in a hostile name (4 runs: enough replicates for
    // the test to resolve it among q6's functions).
    let mut copies: Vec<PathBuf> = r
        .base
        .iter()
        .map(|b| {
            let to = tmp.path().join(b.file_name().unwrap());
            util::copy_tree(b, &to);
            to
        })
        .collect();
    let evil_run = tmp.path().join("run_evil");
    util::copy_tree(&r.base[0], &evil_run);
    copies.push(evil_run.clone());
    let evil = "</script><img src=x onerror=alert(1)>";
    for k in 1..=ITERATIONS {
        let f = evil_run.join(format!("profiles/perf/worker_0/q6_iter{k}/stacks.folded"));
        let total = util::folded_total(&f);
        let mut text = fs::read_to_string(&f).unwrap();
        text.push_str(&format!("python;{evil} {}\n", total / 2));
        fs::write(&f, text).unwrap();
    }
    let out_dir = tmp.path().join("out");
    let runs: Vec<&Path> = copies.iter().map(PathBuf::as_path).collect();
    let out = trend(&runs, &out_dir, &["--order", "args"]);
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    assert!(
        util::stdout(&out)
            .lines()
            .any(|l| l.starts_with("regressed q6 ") && l.contains("onerror=alert(1)> 0.0%")),
        "{}",
        output_text(&out)
    );
    let html = fs::read_to_string(out_dir.join("trend.html")).unwrap();
    assert!(!html.contains("<img"), "unescaped markup in the page");
    assert_eq!(
        html.matches("</script>").count(),
        2,
        "only the page's own scripts end"
    );
    if chromium().is_some() {
        let dom = dump_dom(&out_dir.join("trend.html"), "jobprof-selftest=chart");
        assert!(!dom.contains("<img"), "the script made markup of a name");
        assert!(dom.contains("&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;"));
    }
}

#[test]
fn bad_usage_is_refused_with_code_2() {
    let Some(r) = runs() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let out = trend(&[&r.base[0]], tmp.path(), &[]);
    assert_eq!(out.status.code(), Some(2), "one run: {}", output_text(&out));
    let two = [r.base[0].as_path(), &r.base[1]];
    let out = trend(&two, tmp.path(), &["--baseline", "9"]);
    assert_eq!(out.status.code(), Some(2), "{}", output_text(&out));
    assert!(util::stderr(&out).contains("--baseline 9"));
    let inside = r.base[0].join("trend-out");
    let out = trend(&two, &inside, &[]);
    assert_eq!(out.status.code(), Some(2), "{}", output_text(&out));
    assert!(!inside.exists(), "nothing written into a run");
    // A broken run-labels.json names its file.
    let copy = tmp.path().join("run_copy");
    util::copy_tree(&r.base[1], &copy);
    fs::write(copy.join("run-labels.json"), "{\"commit\": [").unwrap();
    let out = trend(&[&r.base[0], &copy], &tmp.path().join("o"), &[]);
    assert_eq!(out.status.code(), Some(2), "{}", output_text(&out));
    assert!(
        util::stderr(&out).contains("run-labels.json"),
        "{}",
        output_text(&out)
    );
    // Labels: from the file and --label, shown per run.
    fs::write(copy.join("run-labels.json"), "{\"commit\": \"abc123\"}").unwrap();
    let o = tmp.path().join("o2");
    let out = trend(&[&r.base[0], &copy], &o, &["--label", "image=sha256:f00"]);
    ok(&out);
    let t = json(&o.join("trend.json"));
    assert_eq!(t["runs"][1]["labels"]["commit"], "abc123");
    assert_eq!(t["runs"][1]["labels"]["image"], "sha256:f00");
    assert_eq!(t["runs"][1]["job_ids"][0], "7002");
}

/// The significant self-share findings of `INJECTED` in q1.
fn injected_hits(t: &Value) -> Vec<&Value> {
    significant(t)
        .into_iter()
        .filter(|f| f["query"] == "q1" && f["function"] == INJECTED && f["kind"] == "self")
        .collect()
}

/// The injected run in the middle of the series (`--order args`: base1,
/// base2, injected, base3): the newest run, tested by default, is
/// unchanged, and only `--each-run` tests the injected run (against its
/// two earlier runs, as `injected_work_is_flagged_for_its_query_and_function`
/// does). The newest run's baseline holds the injected run, but its
/// median of run means is an unchanged run's, so nothing is flagged there.
/// `--query q1`: each tested run is a family of the adjustment, and q6's
/// families would only raise q (the injected run's p is the smallest a
/// permutation of 4 against 8 replicates gives, 1/495; its q is that x
/// the family's tests over its smallest p's x the families).
#[test]
fn each_run_flags_the_injected_run_in_the_middle() {
    let Some(r) = runs() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let series = [r.base[0].as_path(), &r.base[1], &r.injected, &r.base[2]];
    // Default: only run 4 (unchanged) is tested.
    let newest = tmp.path().join("newest");
    let out = trend(&series, &newest, &["--order", "args", "--query", "q1"]);
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let t = json(&newest.join("trend.json"));
    assert_eq!(
        t["tested_runs"],
        serde_json::json!([3]),
        "{}",
        t["tested_runs"]
    );
    assert_eq!(t["runs"][2]["name"], "run_7004", "the order as given");
    assert!(injected_hits(&t).is_empty(), "{:#?}", injected_hits(&t));
    assert!(
        t["findings"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["run"] == 3),
        "only the newest run is tested"
    );
    let text = util::stdout(&out);
    assert!(
        !text
            .lines()
            .any(|l| l.starts_with("regressed") && l.contains("FindStrInStr")),
        "{text}"
    );
    // --each-run: runs 2, 3 and 4 tested; the injected run 3 is flagged.
    let each = tmp.path().join("each");
    let out = trend(
        &series,
        &each,
        &["--order", "args", "--query", "q1", "--each-run"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let t = json(&each.join("trend.json"));
    assert_eq!(t["tested_runs"], serde_json::json!([1, 2, 3]));
    let hits = injected_hits(&t);
    assert!(
        hits.iter().any(|f| f["run"] == 2
            && f["verdict"] == "regressed"
            && f["baseline_runs"] == serde_json::json!([0, 1])),
        "{INJECTED} not flagged for run 3: {:#?}",
        significant(&t)
    );
    assert!(
        hits.iter().all(|f| f["run"] == 2),
        "flagged in an unchanged run: {hits:#?}"
    );
    let line = regressed_line(&out);
    assert!(line.ends_with(", run 3)"), "the run is named: {line}");
    assert!(line.chars().count() <= 80, "{line}");
    // The injected run's diff (against its own baseline) was drawn.
    let diff = t["queries"][0]["diffs"][2]
        .as_str()
        .expect("a diff for run 3");
    assert!(each.join(diff).is_file());
}

/// `--each-run` over the unchanged runs tests runs 2 and 3 and flags
/// nothing.
#[test]
fn each_run_over_unchanged_runs_flags_nothing() {
    let Some(r) = runs() else { return };
    let out_dir = tempfile::tempdir().unwrap();
    let base: Vec<&Path> = r.base.iter().map(PathBuf::as_path).collect();
    let out = trend(
        &base,
        out_dir.path(),
        &["--each-run", "--fail-on-regression", "1"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let text = util::stdout(&out);
    assert!(text.contains("Tested run 2, 3"), "{text}");
    assert!(text.contains("no significant change"), "{text}");
    let t = json(&out_dir.path().join("trend.json"));
    assert_eq!(t["tested_runs"], serde_json::json!([1, 2]));
    assert!(significant(&t).is_empty(), "{:#?}", significant(&t));
}

/// `--kind off-cpu` and `wall-clock` over runs recorded without
/// `--off-cpu`: refused (code 2, nothing written), naming the missing file
/// and how to record it.
#[test]
fn off_cpu_kinds_without_off_cpu_data_are_refused_naming_the_file() {
    let Some(r) = runs() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let base: Vec<&Path> = r.base.iter().map(PathBuf::as_path).collect();
    for (kind, file) in [
        ("off-cpu", "offcpu.folded"),
        ("wall-clock", "wallclock.folded"),
    ] {
        let o = tmp.path().join(kind);
        let out = trend(&base, &o, &["--kind", kind]);
        assert_eq!(out.status.code(), Some(2), "{kind}: {}", output_text(&out));
        let err = util::stderr(&out);
        assert!(
            err.contains(&format!("--kind {kind}: no capture in the runs has {file}"))
                && err.contains("--off-cpu"),
            "{err}"
        );
        assert!(!o.exists(), "{kind}: nothing written");
    }
}

/// `--kind off-cpu` over real `--off-cpu` captures: tests/programs/offcpu.c
/// (a query thread that sleeps and waits on a condition variable, its main
/// thread blocked in pthread_join) recorded as 3 runs of 3 replicates of
/// q1 (1 s each) and processed; a copy of the last run whose replicates'
/// `offcpu.folded` gain a wait of half their off-CPU time in a new
/// function is the newest run. `--kind off-cpu` finds that function
/// regressed in the newest run; the on-CPU and wall-clock trends of the
/// same runs (their files untouched) do not name it.
#[test]
fn off_cpu_kind_reads_the_off_cpu_profiles() {
    let Some((s, mut worker)) = crate::offcpu::offcpu_worker() else {
        return;
    };
    let tmp = s.dir.path();
    let mut runs: Vec<PathBuf> = (1..=3)
        .map(|k| {
            let run = tmp.join(format!("run_{k}"));
            record_off_cpu_run(&tmp.join(format!("scratch_{k}")), &run, &mut worker);
            run
        })
        .collect();
    let _ = worker.kill();
    let _ = worker.wait();
    ok(&jobprof().arg("process").args(&runs).output().unwrap());
    let injected = tmp.join("run_4");
    util::copy_tree(&runs[2], &injected);
    runs.push(injected.clone());
    let wait = "jp_injected_wait";
    for k in 1..=3 {
        let f = injected.join(format!("profiles/perf/worker_0/q1_iter{k}/offcpu.folded"));
        let total = util::folded_total(&f);
        assert!(total > 0, "{} is empty", f.display());
        let mut text = fs::read_to_string(&f).unwrap();
        text.push_str(&format!("offcpu-worker;{wait} {}\n", total / 2));
        fs::write(&f, text).unwrap();
    }
    let dirs: Vec<&Path> = runs.iter().map(PathBuf::as_path).collect();
    let names = |t: &Value| -> Vec<String> {
        t["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["function"].as_str().unwrap().to_string())
            .collect()
    };
    let o = tmp.join("off");
    let out = trend(&dirs, &o, &["--order", "args", "--kind", "off-cpu"]);
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let t = json(&o.join("trend.json"));
    assert_eq!(t["settings"]["profile"], "off-cpu");
    assert_eq!(t["settings"]["count_name"], "ns");
    assert_eq!(t["queries"][0]["query"], "q1");
    assert_eq!(
        t["queries"][0]["replicates"][3].as_array().unwrap().len(),
        3
    );
    let hit = t["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["function"] == wait && f["kind"] == "self")
        .unwrap_or_else(|| panic!("{wait} not found: {:?}", names(&t)));
    assert_eq!(hit["verdict"], "regressed", "{hit}");
    assert_eq!(hit["run"], 3, "{hit}");
    assert!(hit["change"].as_f64().unwrap() > 25.0, "{hit}");
    for kind in ["on-cpu", "wall-clock"] {
        let o = tmp.join(kind);
        let out = trend(&dirs, &o, &["--order", "args", "--kind", kind]);
        assert_eq!(out.status.code(), Some(0), "{kind}: {}", output_text(&out));
        let t = json(&o.join("trend.json"));
        assert_eq!(t["settings"]["profile"], kind);
        assert!(
            !names(&t).iter().any(|n| n == wait),
            "{kind}: {:?}",
            names(&t)
        );
        assert!(!util::stdout(&out).contains(wait), "{kind}");
    }
}

/// One run of `worker` under a `--off-cpu` sidecar: replicates q1_iter1..3
/// of 1 s each.
fn record_off_cpu_run(scratch: &Path, run: &Path, worker: &mut std::process::Child) {
    let tokens = scratch.join("tokens");
    let perf_root = run.join("profiles/perf");
    fs::create_dir_all(&tokens).unwrap();
    fs::create_dir_all(&perf_root).unwrap();
    let mut sidecar = util::sidecar_command(
        &tokens,
        0,
        worker.id(),
        &perf_root,
        &scratch.join("staging"),
    )
    .arg("--off-cpu")
    .stdout(Stdio::null())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    util::wait_sidecar_ready(
        &mut sidecar,
        worker,
        &tokens,
        std::time::Duration::from_secs(120),
    );
    for k in 1..=3 {
        let q = format!("q1_iter{k}");
        util::record_driver(&tokens, 0, &["start", "--query", &q]);
        std::thread::sleep(std::time::Duration::from_secs(1));
        util::record_driver(&tokens, 0, &["stop", "--query", &q]);
    }
    util::record_driver(&tokens, 0, &["shutdown"]);
    let out = sidecar.wait_with_output().unwrap();
    assert!(out.status.success(), "sidecar: {}", output_text(&out));
}

/// Issue 58, item 2: a plan change (run_7104's q1 groups by one more key,
/// the parity of a hash of every row's pad, so DuckDB reads the padded
/// column, hashes each row and runs a hash aggregate where the baseline ran
/// a perfect hash aggregate) is said in a few lines: q1 slower, the
/// hashing named, its callers' `[total]` findings (down to `Py_RunMain`
/// and the Python frames every sample passes through, which DWARF stacks
/// reach) folded under the causes whose stacks explain their change, and
/// one `plan change` line for the functions that appeared and vanished
/// (each once, not once as self and once as `[total]`). Before: 19
/// `regressed` lines for q1, `[total]` findings of every Python frame, and
/// each operator twice. The unchanged runs of the same series flag
/// nothing.
#[test]
fn a_plan_change_is_said_in_a_few_lines_naming_the_hashing() {
    let Some(r) = plan_runs() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let o = tmp.path().join("plan");
    let runs = [r.base[0].as_path(), &r.base[1], &r.base[2], &r.plan];
    let out = trend(&runs, &o, &["--order", "args"]);
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let text = util::stdout(&out);
    let q1: Vec<&str> = text
        .lines()
        .filter(|l| {
            [
                "regressed",
                "improved",
                "plan change",
                "slower",
                "faster",
                "total",
            ]
            .iter()
            .any(|w| l.starts_with(&format!("{w} q1")))
        })
        .collect();
    assert!(q1.len() <= 5, "{} lines for q1:\n{text}", q1.len());
    assert!(q1.iter().any(|l| l.starts_with("slower q1 ")), "{text}");
    assert!(
        !q1.iter().any(|l| l.contains("[total]")),
        "a [total] finding not folded:\n{text}"
    );
    for python in ["Py_RunMain", "PyEval_EvalCode", "pymain_run_file"] {
        assert!(
            !text
                .lines()
                .any(|l| !l.starts_with(' ') && l.contains(python)),
            "{python} on a line of its own:\n{text}"
        );
    }
    // The hashing is named: a cause of its own, or first among what
    // appeared where no baseline replicate hashes.
    // (The text wraps: a long first name goes to the next line.)
    let plan_at = text.find("plan change q1: appeared").expect(&text);
    let plan = &text[plan_at..];
    let plan = &plan[..plan
        .find("\nslower")
        .or(plan.find("\nnote"))
        .unwrap_or(plan.len())];
    assert!(
        q1.iter()
            .any(|l| l.starts_with("regressed q1 ") && l.contains("VectorOperations::Hash "))
            || plan.contains("VectorOperations::Hash "),
        "the hashing not named:\n{text}"
    );
    // The text lists the largest few; which hash-table function has the
    // most own time varies by recording, the vanished perfect hash
    // aggregate's Sink does not.
    assert!(
        plan.contains("vanished") && plan.contains("PhysicalPerfectHashAggregate::Sink"),
        "{plan}"
    );
    let t = json(&o.join("trend.json"));
    let plans = t["plan_changes"].as_array().unwrap();
    assert_eq!(plans.len(), 1, "{plans:#?}");
    let named = |list: &str| -> Vec<&str> {
        plans[0][list]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["function"].as_str().unwrap())
            .collect()
    };
    let (appeared, vanished) = (named("appeared"), named("vanished"));
    // The hash aggregate's own functions appeared (its Sink has own time
    // on some recordings, on others only its hash table's functions do).
    assert!(
        appeared.iter().any(|f| {
            f.starts_with("duckdb::PhysicalHashAggregate::")
                || f.starts_with("duckdb::GroupedAggregateHashTable::")
        }),
        "{appeared:?}"
    );
    assert!(
        vanished.contains(&"duckdb::PhysicalPerfectHashAggregate::Sink"),
        "{vanished:?}"
    );
    let mut once = appeared.clone();
    once.extend(&vanished);
    once.sort_unstable();
    once.dedup();
    assert_eq!(
        once.len(),
        appeared.len() + vanished.len(),
        "each function once"
    );
    // trend.json keeps every finding: the Python frames' `[total]` ones
    // name the cause whose stacks explain them.
    let sig = significant(&t);
    let py = sig
        .iter()
        .find(|f| f["function"] == "Py_RunMain" && f["kind"] == "total");
    if let Some(py) = py {
        assert!(py["cause"].is_string(), "{py}");
    }
    assert!(
        sig.iter()
            .all(|f| f["query"] == "q1" || clock_read(f["function"].as_str().unwrap_or(""))),
        "q6 did not change: {sig:#?}"
    );
    // The page has the plan change once, as a table.
    let html = fs::read_to_string(o.join("trend.html")).unwrap();
    assert_eq!(html.matches("<table id=\"jp-plan\">").count(), 1);
    // The unchanged runs of the same (DWARF) series flag nothing.
    let o = tmp.path().join("unchanged");
    let base: Vec<&Path> = r.base.iter().map(PathBuf::as_path).collect();
    let out = trend(&base, &o, &["--order", "args"]);
    let t = json(&o.join("trend.json"));
    let flagged: Vec<&Value> = significant(&t)
        .into_iter()
        .filter(|f| !clock_read(f["function"].as_str().unwrap_or("")))
        .collect();
    assert!(flagged.is_empty(), "{flagged:#?}\n{}", output_text(&out));
    assert!(t["plan_changes"].as_array().unwrap().is_empty());
}

// ---------------------------------------------------------------------------
