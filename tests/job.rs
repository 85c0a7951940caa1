//! Job-level views end to end, on real captures: two runs of a job with 2
//! workers x 3 queries, each worker a real program
//! (tests/programs/job_queries.c: a fixed amount of work per query, one
//! function per query: query_alpha_work for q1, query_beta_work for q2,
//! query_gamma_work for q3) recorded by its own real `jobprof-record`
//! sidecar, then processed by the real binary with real `perf script`. The
//! second run's q2 does twice the work (its phase is twice as long in CPU
//! time, whatever the machine's load). Expected numbers come from the
//! captures' own summary.json, capture.json and stacks.folded files.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::Value;

use crate::util::jobprof;
use crate::util::{self, copy_tree, output_text, perf_can_record, require};
use crate::util::{dump_dom, ok, wait_for};

const QUERIES: [(&str, char, &str); 3] = [
    ("q1", 'A', "query_alpha_work"),
    ("q2", 'B', "query_beta_work"),
    ("q3", 'C', "query_gamma_work"),
];

/// Waits generously: on a loaded shared machine a sidecar can take a
/// minute to get ready.
const SIDECAR_WAIT: Duration = Duration::from_secs(300);

fn queries_program(dir: &Path) -> PathBuf {
    let exe = dir.join("job_queries");
    util::gcc("tests/programs/job_queries.c", &exe, &["-O1"]).unwrap_or_else(|e| panic!("{e}"));
    exe
}

/// Kills what it holds when a recording panics half-way.
struct Reaper(Vec<Child>);

impl Drop for Reaper {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// One worker of a job: the program, its sidecar, and the driver's
/// start/stop per query, as a benchmark job runs them.
fn record_worker(
    prog: &Path,
    scratch: &Path,
    perf_root: &Path,
    job: &str,
    w: u32,
    units: [u32; 3],
) {
    let cue = scratch.join(format!("cue{w}"));
    let ack = scratch.join(format!("cue{w}.ack"));
    let tokens = scratch.join(format!("tokens{w}"));
    fs::create_dir_all(&tokens).unwrap();
    // 2 working threads + the main thread.
    let worker = Command::new(prog).arg("2").arg(&cue).spawn().unwrap();
    let pid = worker.id();
    let mut reaper = Reaper(vec![worker]);
    let acked = |seq: usize| fs::read_to_string(&ack).is_ok_and(|s| s.trim() == seq.to_string());
    wait_for("the worker to start", SIDECAR_WAIT, || acked(0));
    let staging = scratch.join(format!("staging{w}"));
    let sidecar = util::sidecar_command(&tokens, w, pid, perf_root, &staging)
        .args(["--frequency", "499", "--threads-per-shard", "3"])
        .args(["--start-timeout", "120", "--stop-timeout", "60"])
        .env("SLURM_JOB_ID", job)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    reaper.0.push(sidecar);
    let ready = tokens.join(format!(".perf_sidecar_ready_w{w}"));
    wait_for("the sidecar to be ready", SIDECAR_WAIT, || ready.exists());
    let rec = |args: &[&str]| util::record_driver(&tokens, w, args);
    for (i, ((q, phase, _), n)) in QUERIES.iter().zip(units).enumerate() {
        rec(&["start", "--query", q]);
        // The query: a fixed amount of work, then its window closes.
        fs::write(&cue, format!("{} {phase} {n}\n", i + 1)).unwrap();
        wait_for("the worker to finish the query", SIDECAR_WAIT, || {
            acked(i + 1)
        });
        rec(&["stop", "--query", q]);
    }
    rec(&["shutdown"]);
    let mut sidecar = reaper.0.pop().unwrap();
    let st = sidecar.wait().unwrap();
    assert!(st.success(), "sidecar of worker {w}: {st:?}");
    fs::write(&cue, "9 Q 0\n").unwrap();
}

/// A raw (unprocessed) run of the job: `<dir>/profiles/perf/worker_{0,1}/q{1,2,3}`.
fn record_run(prog: &Path, dir: &Path, job: &str, units: [u32; 3]) {
    let perf_root = dir.join("profiles/perf");
    fs::create_dir_all(&perf_root).unwrap();
    let scratch = tempfile::tempdir().unwrap();
    std::thread::scope(|s| {
        for w in 0..2 {
            let (scratch, perf_root) = (scratch.path(), &perf_root);
            s.spawn(move || record_worker(prog, scratch, perf_root, job, w, units));
        }
    });
}

fn process(dir: &Path, extra: &[&str]) -> Output {
    jobprof()
        .arg("process")
        .arg(dir)
        .args(["-j", "2"])
        .args(extra)
        .output()
        .unwrap()
}

/// Run A (raw and processed) and run B (processed; q2 twice as long).
struct Runs {
    _keep: tempfile::TempDir,
    raw_a: PathBuf,
    a: PathBuf,
    b: PathBuf,
}

fn runs() -> Option<&'static Runs> {
    static RUNS: OnceLock<Option<Runs>> = OnceLock::new();
    RUNS.get_or_init(|| {
        if !require(perf_can_record(), "perf that can record, for tests/job.rs") {
            return None;
        }
        let keep = tempfile::tempdir().unwrap();
        let prog = queries_program(keep.path());
        let raw_a = keep.path().join("raw_a/result_5001");
        let a = keep.path().join("a/result_5001");
        let b = keep.path().join("b/result_5002");
        // Units of about 1 ms of CPU each per thread (more when the
        // machine is busy, but the CPU time stays the same).
        record_run(&prog, &raw_a, "5001", [150, 150, 150]);
        record_run(&prog, &b, "5002", [150, 300, 150]);
        copy_tree(&raw_a, &a);
        ok(&process(&a, &[]));
        ok(&process(&b, &[]));
        Some(Runs {
            _keep: keep,
            raw_a,
            a,
            b,
        })
    })
    .as_ref()
}

fn json(path: &Path) -> Value {
    serde_json::from_slice(&util::read(path)).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn folded(path: &Path) -> Vec<(String, u64)> {
    fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(|l| {
            let (s, c) = l.rsplit_once(' ').unwrap();
            (s.to_string(), c.parse().unwrap())
        })
        .collect()
}

fn total(stacks: &[(String, u64)]) -> u64 {
    stacks.iter().map(|(_, c)| c).sum()
}

/// Every `href` of a page, which must name existing files relative to it.
fn assert_links_resolve(page: &Path) -> Vec<String> {
    let html = fs::read_to_string(page).unwrap();
    assert!(!html.contains("://"), "the page names a URL");
    let mut hrefs = Vec::new();
    for part in html.split("href=\"").skip(1) {
        let href = &part[..part.find('"').unwrap()];
        let target = page.parent().unwrap().join(href);
        assert!(
            target.is_file(),
            "{}: link {href} does not resolve",
            page.display()
        );
        hrefs.push(href.to_string());
    }
    hrefs
}

fn rows_by_capture(index: &Value) -> BTreeMap<String, Value> {
    index["captures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["capture"].as_str().unwrap().to_string(), r.clone()))
        .collect()
}

#[test]
fn index_lists_every_capture_with_its_numbers_and_links() {
    let Some(runs) = runs() else { return };
    let perf = runs.a.join("profiles/perf");
    let index = json(&perf.join("index.json"));
    let rows = rows_by_capture(&index);
    assert_eq!(rows.len(), 6, "{index:#}");
    for w in 0..2 {
        for (q, _, function) in QUERIES {
            let label = format!("worker_{w}/{q}");
            let r = &rows[&label];
            let dir = perf.join(&label);
            let summary = json(&dir.join("summary.json"));
            let capture = json(&dir.join("capture.json"));
            assert_eq!(r["state"], "processed", "{r}");
            assert_eq!(r["samples"], summary["samples"], "{label}");
            assert!(r["samples"].as_u64().unwrap() > 50, "{label}: {r}");
            assert_eq!(
                r["symbolized_share"], summary["symbolized_ratio"],
                "{label}"
            );
            let window = (capture["disabled_unix_ns"].as_u64().unwrap()
                - capture["enabled_unix_ns"].as_u64().unwrap()) as f64
                / 1e9;
            assert!((r["window_seconds"].as_f64().unwrap() - window).abs() < 1e-6);
            assert!(window > 0.0, "{label}: window {window}");
            assert_eq!(r["top_self"][0]["name"], summary["top_self"][0]["name"]);
            assert_eq!(r["top_self"][0]["name"], function, "{label}: {r}");
            assert_eq!(r["flamegraph"], format!("{label}/flamegraph.html"));
            assert_eq!(r["host"], capture["host"]);
        }
    }
    assert_eq!(index["job"]["job_ids"], serde_json::json!(["5001"]));
    assert_eq!(index["job"]["workers"], serde_json::json!([0, 1]));

    // One merged flamegraph per query: both workers, each under its own
    // root frame, counts summed exactly.
    for (q, _, _) in QUERIES {
        let view = index["queries"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["query"] == q)
            .unwrap();
        assert_eq!(view["workers_merged"], serde_json::json!([0, 1]), "{view}");
        let merged = folded(&perf.join(format!("queries/{q}/stacks.folded")));
        for w in 0..2 {
            let own = folded(&perf.join(format!("worker_{w}/{q}/stacks.folded")));
            let prefix = format!("worker_{w};");
            let part: Vec<(String, u64)> = merged
                .iter()
                .filter_map(|(s, c)| Some((s.strip_prefix(&prefix)?.to_string(), *c)))
                .collect();
            assert_eq!(part, own, "{q}: worker {w}'s stacks under its root frame");
        }
        let sum: u64 = (0..2)
            .map(|w| total(&folded(&perf.join(format!("worker_{w}/{q}/stacks.folded")))))
            .sum();
        assert_eq!(total(&merged), sum);
        let html = fs::read_to_string(perf.join(format!("queries/{q}/flamegraph.html"))).unwrap();
        assert!(html.contains("worker_1"), "{q}: no worker frame");
    }

    // Links: 6 capture flamegraphs and 3 query flamegraphs, all there.
    let hrefs = assert_links_resolve(&perf.join("index.html"));
    assert_eq!(hrefs.len(), 9, "{hrefs:?}");
    let html = fs::read_to_string(perf.join("index.html")).unwrap();
    assert!(html.contains("job 5001"), "no job header");
}

fn selftest(html: &Path, table: &str) -> Vec<Value> {
    let dom = dump_dom(html, &format!("jobprof-selftest=sort&table={table}"));
    let tag = r#"<pre id="jp-selftest">"#;
    let start = dom.find(tag).expect("no self-test result in the DOM") + tag.len();
    let text = &dom[start..start + dom[start..].find("</pre>").unwrap()];
    let v: Value =
        serde_json::from_str(&text.replace("&quot;", "\"").replace("&amp;", "&")).unwrap();
    v.as_array().unwrap().clone()
}

fn is_sorted_by(values: &[Value], num: bool, desc: bool) -> bool {
    let key = |v: &Value| v.as_str().unwrap().to_string();
    values.windows(2).all(|w| {
        let ord = if num {
            let (a, b) = (
                key(&w[0]).parse::<f64>().unwrap(),
                key(&w[1]).parse::<f64>().unwrap(),
            );
            a.total_cmp(&b)
        } else {
            key(&w[0]).to_lowercase().cmp(&key(&w[1]).to_lowercase())
        };
        if desc {
            ord.is_ge()
        } else {
            ord.is_le()
        }
    })
}

#[test]
fn chromium_sorts_the_index_offline() {
    if !util::require_chromium() {
        return;
    }
    let Some(runs) = runs() else { return };
    let page = runs.a.join("profiles/perf/index.html");
    let steps = selftest(&page, "jp-captures");
    let numeric = ["worker", "samples", "window", "symbolized"];
    for key in [
        "query",
        "worker",
        "samples",
        "window",
        "symbolized",
        "state",
    ] {
        let clicks: Vec<&Value> = steps.iter().filter(|s| s["key"] == key).collect();
        assert_eq!(clicks.len(), 2, "{key}: {steps:?}");
        let num = numeric.contains(&key);
        for c in clicks {
            let values = c["values"].as_array().unwrap();
            assert_eq!(values.len(), 6, "{c}");
            let desc = c["sort"] == "descending";
            assert!(is_sorted_by(values, num, desc), "{key} not sorted: {c}");
        }
    }
    // Numbers sort descending on the first click, by number, not text.
    let first = steps.iter().find(|s| s["key"] == "samples").unwrap();
    assert_eq!(first["sort"], "descending");
    // `?sort=` sorts on load.
    let dom = dump_dom(&page, "sort=-window&table=jp-captures");
    let th = &dom[dom.find(r#"<th data-key="window""#).unwrap()..];
    let th = &th[..th.find('>').unwrap()];
    assert!(
        th.contains(r#"aria-sort="descending""#),
        "not sorted on load: {th}"
    );
}

#[test]
fn partial_and_concurrent_processing_give_a_correct_index() {
    let Some(runs) = runs() else { return };
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("result_5001");
    copy_tree(&runs.raw_a, &dir);
    let perf = dir.join("profiles/perf");
    ok(&process(&dir, &["--worker", "0"]));
    let index = json(&perf.join("index.json"));
    let rows = rows_by_capture(&index);
    assert_eq!(rows.len(), 6);
    for (label, r) in &rows {
        let want = if label.starts_with("worker_0/") {
            "processed"
        } else {
            "not-processed"
        };
        assert_eq!(r["state"], want, "{label}: {r}");
    }
    for v in index["queries"].as_array().unwrap() {
        assert_eq!(v["workers_merged"], serde_json::json!([0]), "{v}");
    }
    let q1 = folded(&perf.join("queries/q1/stacks.folded"));
    assert!(q1.iter().all(|(s, _)| s.starts_with("worker_0;")));
    assert_links_resolve(&perf.join("index.html"));

    // A capture the recorder marked invalid is refused, with the reason.
    let meta = perf.join("worker_1/q3/capture.json");
    let mut m = json(&meta);
    m["valid"] = Value::Bool(false);
    m["reason"] = Value::String("worker exited during the capture".into());
    fs::write(&meta, serde_json::to_string_pretty(&m).unwrap()).unwrap();

    // Two array tasks at once, each with its share of worker 1.
    let spawn = |args: &[&str]| {
        jobprof()
            .arg("process")
            .arg(&dir)
            .args(["-j", "1"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let one = spawn(&["--worker", "1", "--query", "q1"]);
    let two = spawn(&["--worker", "1", "--query", "q2", "--query", "q3"]);
    ok(&one.wait_with_output().unwrap());
    let out = two.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "q3 is refused: {}",
        output_text(&out)
    );

    let index = json(&perf.join("index.json"));
    let rows = rows_by_capture(&index);
    for (label, r) in &rows {
        if label == "worker_1/q3" {
            assert_eq!(r["state"], "refused", "{r}");
            assert!(
                r["reason"]
                    .as_str()
                    .unwrap()
                    .contains("worker exited during the capture"),
                "{r}"
            );
        } else {
            assert_eq!(r["state"], "processed", "{label}: {r}");
        }
    }
    for v in index["queries"].as_array().unwrap() {
        let want = if v["query"] == "q3" {
            serde_json::json!([0])
        } else {
            serde_json::json!([0, 1])
        };
        assert_eq!(v["workers_merged"], want, "{v}");
    }
    let q2 = folded(&perf.join("queries/q2/stacks.folded"));
    assert!(q2.iter().any(|(s, _)| s.starts_with("worker_1;")));
    let sources = json(&perf.join("queries/q2/sources.json"));
    assert_eq!(sources["captures"].as_array().unwrap().len(), 2);
    let html = fs::read_to_string(perf.join("index.html")).unwrap();
    assert!(html.contains("worker exited during the capture"));
    assert_links_resolve(&perf.join("index.html"));
}

/// The fill of the frame named `name` in a differential SVG.
fn fill_of(svg: &str, name: &str) -> (u8, u8, u8) {
    let at = svg
        .find(&format!("<title>{name} ("))
        .unwrap_or_else(|| panic!("no frame {name}"));
    let rect = &svg[at..];
    let i = rect.find("fill=\"rgb(").unwrap() + "fill=\"rgb(".len();
    let v: Vec<u8> = rect[i..i + rect[i..].find(')').unwrap()]
        .split(',')
        .map(|x| x.trim().parse().unwrap())
        .collect();
    (v[0], v[1], v[2])
}

#[test]
fn diff_of_two_runs_puts_the_changed_query_on_top_in_red() {
    let Some(runs) = runs() else { return };
    let t = tempfile::tempdir().unwrap();
    let out = t.path().join("diff");
    let o = jobprof()
        .arg("diff")
        .arg(&runs.a)
        .arg(&runs.b)
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    ok(&o);
    let index = json(&out.join("index.json"));
    let queries = index["queries"].as_array().unwrap();
    assert_eq!(queries.len(), 3, "{index:#}");
    assert_eq!(queries[0]["query"], "q2", "q2 changed most: {index:#}");
    let q2 = &queries[0];
    let ratio = q2["after_total"].as_f64().unwrap() / q2["before_total"].as_f64().unwrap();
    assert!(ratio > 1.5 && ratio < 2.5, "q2 did twice the work: {q2}");
    assert_eq!(q2["top_function"][0], "query_beta_work", "{q2}");
    assert!(q2["top_function"][1].as_f64().unwrap() > 0.0);
    // Totals are the sums of both workers' folded files.
    let sum = |run: &Path| -> u64 {
        (0..2)
            .map(|w| {
                total(&folded(
                    &run.join(format!("profiles/perf/worker_{w}/q2/stacks.folded")),
                ))
            })
            .sum()
    };
    assert_eq!(q2["before_total"].as_u64(), Some(sum(&runs.a)));
    assert_eq!(q2["after_total"].as_u64(), Some(sum(&runs.b)));
    let hrefs = assert_links_resolve(&out.join("index.html"));
    assert_eq!(hrefs[0], "q2.diff.html", "first row is q2: {hrefs:?}");
    assert_eq!(hrefs.len(), 3);

    // One query into one file: the changed function is red.
    let svg = t.path().join("q2.svg");
    let o = jobprof()
        .arg("diff")
        .arg(&runs.a)
        .arg(&runs.b)
        .args(["--query", "q2", "-o"])
        .arg(&svg)
        .output()
        .unwrap();
    ok(&o);
    let text = fs::read_to_string(&svg).unwrap();
    let (r, g, b) = fill_of(&text, "query_beta_work");
    assert!(
        r == 255 && g < 120 && g == b,
        "query_beta_work is not red: rgb({r},{g},{b})"
    );

    // Two capture directories are compared directly.
    let one = t.path().join("w0.folded");
    let o = jobprof()
        .arg("diff")
        .arg(runs.a.join("profiles/perf/worker_0/q2"))
        .arg(runs.b.join("profiles/perf/worker_0/q2"))
        .arg("-o")
        .arg(&one)
        .output()
        .unwrap();
    ok(&o);
    assert!(fs::read_to_string(&one)
        .unwrap()
        .contains("query_beta_work"));

    // Asking for a query one run lacks names the queries it has.
    let o = jobprof()
        .arg("diff")
        .arg(&runs.a)
        .arg(&runs.b)
        .args(["--query", "q9", "-o"])
        .arg(t.path().join("x.html"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", output_text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("q1, q2, q3"));
    // A folded file against a directory is refused.
    let o = jobprof()
        .arg("diff")
        .arg(&one)
        .arg(&runs.b)
        .arg("-o")
        .arg(t.path().join("y.html"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", output_text(&o));
}

#[test]
fn a_page_that_cannot_be_written_fails_the_run_and_old_dirs_get_views() {
    let Some(runs) = runs() else { return };
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("result_5001");
    copy_tree(&runs.a, &dir);
    let perf = dir.join("profiles/perf");
    // A directory processed before job views existed: only the captures.
    fs::remove_dir_all(perf.join("queries")).unwrap();
    fs::remove_file(perf.join("index.json")).unwrap();
    fs::remove_file(perf.join("index.html")).unwrap();
    let o = jobprof().arg("reprocess").arg(t.path()).output().unwrap();
    ok(&o);
    assert!(perf.join("index.html").is_file() && perf.join("queries/q2/flamegraph.html").is_file());
    assert_eq!(
        json(&perf.join("index.json"))["captures"]
            .as_array()
            .unwrap()
            .len(),
        6
    );
    // Nothing changed: nothing is redrawn.
    let o = process(&dir, &[]);
    ok(&o);
    assert!(String::from_utf8_lossy(&o.stdout).contains("3 query flamegraph(s), 0 redrawn"));

    // The page's place is taken: the run says so and fails.
    fs::remove_file(perf.join("index.html")).unwrap();
    fs::create_dir(perf.join("index.html")).unwrap();
    let o = process(&dir, &[]);
    assert_eq!(o.status.code(), Some(1), "{}", output_text(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("index.html: not written"),
        "{}",
        output_text(&o)
    );
}

/// Every table of every page the job views write (the job index, the
/// per-query pages, a run-versus-run diff, a trend over the two runs) has
/// as many cells in each row as it has headers.
#[test]
fn every_table_of_the_generated_pages_lines_up() {
    let Some(runs) = runs() else { return };
    let t = tempfile::tempdir().unwrap();
    let (diff, trend) = (t.path().join("diff"), t.path().join("trend"));
    ok(&jobprof()
        .arg("diff")
        .arg(&runs.a)
        .arg(&runs.b)
        .arg("-o")
        .arg(&diff)
        .output()
        .unwrap());
    let mut o = jobprof();
    o.arg("trend")
        .args([&runs.a, &runs.b])
        .arg("-o")
        .arg(&trend);
    ok(&o.args(["--order", "args"]).output().unwrap());
    let perf = runs.a.join("profiles/perf");
    let mut pages = vec![perf.join("index.html"), diff.join("index.html")];
    pages.push(trend.join("trend.html"));
    for (q, _, _) in QUERIES {
        pages.push(perf.join(format!("queries/{q}/flamegraph.html")));
    }
    let tables: usize = pages.iter().map(|p| util::assert_tables_line_up(p)).sum();
    // The index's two, the diff's one, the trend's findings.
    assert!(tables >= 4, "{tables} tables in {pages:?}");
}

/// A result directory made of the demo capture (fixtures/result_dir_demo)
/// copied under each of `names` in `worker_0`, processed (the demo's
/// shipped `perf.script.zst` needs no perf).
fn replicate_run(dir: &Path, names: &[&str]) {
    let scratch = tempfile::tempdir().unwrap();
    util::copy_demo(scratch.path());
    let demo = scratch.path().join("profiles/perf/worker_0/q01");
    let worker = dir.join("profiles/perf/worker_0");
    copy_tree(&scratch.path().join("profiles/perf/worker_0"), &worker);
    fs::remove_dir_all(worker.join("q01")).unwrap();
    for n in names {
        copy_tree(&demo, &worker.join(n));
        util::edit_json(&worker.join(n).join("capture.json"), |v| {
            v["query"] = Value::from(*n)
        });
    }
    ok(&process(dir, &[]));
}

/// Replicates are one query (issue 49, item 5): `q01_iter1..3` get one
/// merged view, `queries/q01/`, their stacks summed and the page saying so;
/// the index lists q01 with its replicates; `diff` pairs q01 of a run with
/// three replicates and of one with two in the old `q01.2` spelling,
/// scaling BEFORE by 2/3.
#[test]
fn replicates_are_one_query_in_the_views_and_diff() {
    let t = tempfile::tempdir().unwrap();
    let (a, b) = (t.path().join("a"), t.path().join("b"));
    let reps = ["q01_iter1", "q01_iter2", "q01_iter3"];
    replicate_run(&a, &reps);
    replicate_run(&b, &["q01", "q01.2"]);
    let perf = a.join("profiles/perf");
    let index = json(&perf.join("index.json"));
    assert_eq!(
        index["job"]["queries"],
        serde_json::json!(["q01"]),
        "{index:#}"
    );
    let views = index["queries"].as_array().unwrap();
    assert_eq!(views.len(), 1, "{index:#}");
    assert_eq!(views[0]["replicates"], serde_json::json!(reps), "{index:#}");
    assert_eq!(views[0]["captures_merged"], 3, "{index:#}");
    let merged = folded(&perf.join("queries/q01/stacks.folded"));
    let own: u64 = reps
        .iter()
        .map(|q| total(&folded(&perf.join(format!("worker_0/{q}/stacks.folded")))))
        .sum();
    assert!(own > 0);
    assert_eq!(total(&merged), own, "the replicates' stacks are summed");
    for q in reps {
        assert!(
            !perf.join("queries").join(q).exists(),
            "{q} has its own view"
        );
    }
    let page = fs::read_to_string(perf.join("queries/q01/flamegraph.html")).unwrap();
    assert!(
        page.contains("3 replicates summed"),
        "the page says what it holds"
    );
    let html = fs::read_to_string(perf.join("index.html")).unwrap();
    assert!(
        html.contains("q01_iter1, q01_iter2, q01_iter3"),
        "index lists the replicates"
    );

    let out = t.path().join("diff");
    let o = jobprof()
        .arg("diff")
        .arg(&a)
        .arg(&b)
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    ok(&o);
    let d = json(&out.join("index.json"));
    let q = d["queries"].as_array().unwrap();
    assert_eq!(q.len(), 1, "{d:#}");
    assert_eq!(q[0]["query"], "q01", "{d:#}");
    assert_eq!(q[0]["before_replicates"], 3, "{d:#}");
    assert_eq!(q[0]["after_replicates"], 2, "{d:#}");
    assert!(
        (q[0]["scale"].as_f64().unwrap() - 2.0 / 3.0).abs() < 1e-9,
        "{d:#}"
    );
    // The same capture in every replicate: no change per replicate.
    assert!(q[0]["change"].as_f64().unwrap().abs() < 1.0, "{d:#}");
    assert_eq!(q[0]["after_total"].as_u64(), Some(own * 2 / 3), "{d:#}");
}

/// Runs `jobprof process DIR` under `strace -e trace=openat` and returns
/// the lines that open a capture's `stacks.folded` (below `worker_0/`)
/// for reading.
fn folded_reads_of_process(dir: &Path, trace: &Path) -> Vec<String> {
    let o = Command::new("strace")
        .args(["-f", "-qq", "-e", "trace=openat", "-o"])
        .arg(trace)
        .arg(env!("CARGO_BIN_EXE_jobprof"))
        .arg("process")
        .arg(dir)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    ok(&o);
    fs::read_to_string(trace)
        .unwrap()
        .lines()
        .filter(|l| {
            l.contains("worker_0/") && l.contains("/stacks.folded\"") && l.contains("O_RDONLY")
        })
        .map(str::to_string)
        .collect()
}

/// The views take the folded stacks a run has just written from memory
/// (issue 47): the run that processes the captures opens none of their
/// `stacks.folded` to read it back, and a later refresh with nothing to
/// process (the query view's `sources.json` removed, so it is drawn
/// again) reads them from disk and draws the same view byte for byte.
#[test]
fn the_views_take_the_runs_stacks_from_memory_and_others_from_disk() {
    if !require(util::have("strace"), "strace") {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let scratch = tempfile::tempdir().unwrap();
    util::copy_demo(scratch.path());
    let demo = scratch.path().join("profiles/perf/worker_0/q01");
    let dir = t.path().join("run");
    let worker = dir.join("profiles/perf/worker_0");
    for n in ["q01_iter1", "q01_iter2"] {
        copy_tree(&demo, &worker.join(n));
        util::edit_json(&worker.join(n).join("capture.json"), |v| {
            v["query"] = Value::from(n)
        });
    }
    let reads = folded_reads_of_process(&dir, &t.path().join("first.strace"));
    assert!(reads.is_empty(), "read back: {reads:#?}");
    let view = dir.join("profiles/perf/queries/q01");
    let merged = fs::read(view.join("stacks.folded")).unwrap();
    assert!(!merged.is_empty());
    let page = fs::read(view.join("flamegraph.html")).unwrap();
    fs::remove_file(view.join("sources.json")).unwrap();
    let reads = folded_reads_of_process(&dir, &t.path().join("second.strace"));
    assert_eq!(reads.len(), 2, "{reads:#?}");
    assert_eq!(fs::read(view.join("stacks.folded")).unwrap(), merged);
    assert_eq!(fs::read(view.join("flamegraph.html")).unwrap(), page);
}
