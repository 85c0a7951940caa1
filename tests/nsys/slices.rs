//! `--slice-by` on the fixture export of `profiles` (whose every row's
//! time is known): which ranges cut it (any domain, one domain, the
//! default domain), the replicate names, the rule that an event counts in
//! the window it starts in (a call crossing the window's end counts whole),
//! a bad spec, and `jobprof trend` following the slices per query. The
//! real nsys check is `real_slices`.

use std::fs;
use std::path::{Path, PathBuf};

use super::profiles::{export, DATA, SCHEMA};
use crate::util::{self, output_text};

/// The fixture's report in `dir`, processed with `args`.
fn sliced(dir: &Path, args: &[&str]) -> (std::process::Output, PathBuf) {
    fs::create_dir_all(dir).unwrap();
    let report = export(dir, "r", SCHEMA, DATA);
    let o = util::jobprof()
        .arg("process")
        .arg(&report)
        .args(args)
        .env("PATH", "/nonexistent")
        .output()
        .unwrap();
    (o, dir.join("r.nsys-rep.jobprof"))
}

fn read(dir: &Path, f: &str) -> String {
    fs::read_to_string(dir.join(f)).unwrap_or_else(|e| panic!("{}: {e}", dir.join(f).display()))
}

/// The queries `jobprof trend RUNS -o OUT` followed (it must succeed).
fn trend_queries(runs: &[&Path], out: &Path) -> Vec<String> {
    let o = util::jobprof()
        .arg("trend")
        .args(runs)
        .arg("-o")
        .arg(out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", output_text(&o));
    let json = util::json(&out.join("trend.json"));
    (json["queries"].as_array().unwrap().iter())
        .map(|q| q["query"].as_str().unwrap().to_string())
        .collect()
}

/// A result directory under `dir` whose worker 0 published the fixture's
/// report as query `all`: the result directory and the query's.
fn published(dir: &Path) -> (PathBuf, PathBuf) {
    let root = dir.join("result");
    let q = root.join("profiles/nsys/worker_0/all");
    fs::create_dir_all(&q).unwrap();
    export(&q, "nsys_worker_w0_all", SCHEMA, DATA);
    let m = super::profiles::manifest("all", "nsys_worker_w0_all.nsys-rep", "nsys-rep");
    fs::write(q.join("nsys-capture.json"), m).unwrap();
    (root, q)
}

/// `jobprof process ROOT ARGS` with no nsys on PATH (it must succeed).
fn process(root: &Path, args: &[&str]) {
    let o = util::jobprof()
        .arg("process")
        .arg(root)
        .args(args)
        .env("PATH", "/nonexistent")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", output_text(&o));
}

/// The fixture's `query` ranges are [100, 600), [700, 1000), [1000,
/// 1400); its samples at 100, 200 (main thread), 300, 400 (the other);
/// its OS runtime call at 100 lasts to 1100; `engine:scan` is [200, 300).
#[test]
fn a_report_cut_by_nvtx_ranges_counts_each_event_in_the_window_it_starts_in() {
    let t = tempfile::tempdir().unwrap();
    let (o, out) = sliced(t.path(), &["--slice-by", "nvtx:que*"]);
    let text = output_text(&o);
    assert!(o.status.success(), "{text}");
    assert!(text.contains("3 slices by nvtx:que* (slices/)"), "{text}");
    let s = out.join("slices");
    let whole = util::json(&out.join("summary.json"));
    assert_eq!(
        whole["slices"],
        serde_json::json!(["slices/query", "slices/query_iter2", "slices/query_iter3"])
    );
    // All four samples, of both threads, start in the first window.
    assert_eq!(
        read(&s.join("query"), "stacks.folded"),
        read(&out, "stacks.folded")
    );
    let q1 = util::json(&s.join("query/summary.json"));
    assert_eq!(q1["samples"], 4);
    assert_eq!(q1["query"], "query");
    assert_eq!(
        q1["slice"],
        serde_json::json!({"by": "nvtx:que*", "range": "query", "start_ns": 100, "end_ns": 600})
    );
    // The call from 100 to 1100 counts whole in the window it began in.
    assert_eq!(
        read(&s.join("query"), "osrt.tsv"),
        "name\tcount\ttotal_ns\tmedian_ns\npthread_cond_wait\t1\t1000\t1000\n"
    );
    assert_eq!(
        read(&s.join("query"), "nvtx.tsv"),
        "name\tcount\ttotal_ns\tmedian_ns\nquery\t1\t500\t500\nengine:scan\t1\t100\t100\n"
    );
    // Touching windows: the range starting at 1000 is the third's only.
    let q3 = util::json(&s.join("query_iter3/summary.json"));
    assert_eq!(q3["samples"], 0);
    assert_eq!(
        read(&s.join("query_iter3"), "nvtx.tsv"),
        "name\tcount\ttotal_ns\tmedian_ns\nquery\t1\t400\t400\n"
    );
    assert!(!s.join("query_iter2/stacks.folded").exists());
    // The kernels all start before the first window.
    assert!(!s.join("query/gpu-kernels.tsv").exists());
    assert!(out.join("gpu-kernels.tsv").is_file());
}

#[test]
fn a_domain_narrows_the_ranges_and_a_bad_spec_is_a_usage_error() {
    let t = tempfile::tempdir().unwrap();
    let (o, out) = sliced(&t.path().join("a"), &["--slice-by", "nvtx:engine:*"]);
    assert!(o.status.success(), "{}", output_text(&o));
    let scan = util::json(&out.join("slices/scan/summary.json"));
    assert_eq!(scan["slice"]["range"], "engine:scan");
    assert_eq!(scan["samples"], 1);
    assert!(!out.join("slices/query").exists());

    // The default domain's only: `scan` is in `engine`.
    let (o, out) = sliced(&t.path().join("b"), &["--slice-by", "nvtx::scan"]);
    let text = output_text(&o);
    assert!(o.status.success(), "{text}");
    assert!(text.contains("no NVTX range matches nvtx::scan"), "{text}");
    assert!(!out.join("slices").exists());

    // A range never ended lasts to the last NVTX time (9000).
    let (o, out) = sliced(&t.path().join("c"), &["--slice-by", "nvtx:open"]);
    assert!(o.status.success(), "{}", output_text(&o));
    let open = util::json(&out.join("slices/open/summary.json"));
    assert_eq!(
        (
            open["slice"]["start_ns"].clone(),
            open["slice"]["end_ns"].clone()
        ),
        (5000.into(), 9000.into())
    );

    let (o, _) = sliced(&t.path().join("d"), &["--slice-by", "query"]);
    assert_eq!(o.status.code(), Some(2), "{}", output_text(&o));
    assert!(
        output_text(&o).contains("give nvtx:PATTERN, nvtx:DOMAIN:PATTERN or nvtx::PATTERN"),
        "{}",
        output_text(&o)
    );
}

/// Each report's profile directory given to `trend` as a run: its slices
/// are its queries, `query_iterN` replicates of `query`.
#[test]
fn trend_follows_the_slices_per_query() {
    let t = tempfile::tempdir().unwrap();
    let runs: Vec<PathBuf> = (1..=3)
        .map(|n| {
            let (o, out) = sliced(
                &t.path().join(format!("run{n}")),
                &["--slice-by", "nvtx:query"],
            );
            assert!(o.status.success(), "{}", output_text(&o));
            out
        })
        .collect();
    let runs: Vec<&Path> = runs.iter().map(PathBuf::as_path).collect();
    let queries = trend_queries(&runs, &t.path().join("trend"));
    for want in ["query [nsys]", "query [nvtx]"] {
        assert!(queries.iter().any(|q| q == want), "{want}: {queries:?}");
    }
    assert!(!queries.iter().any(|q| q.contains("iter")), "{queries:?}");
}

/// A whole-run report the sidecar published as query `all`: each slice is
/// a row of the job page (its own profile, the report's link) and a query
/// of `trend`.
#[test]
fn the_slices_of_a_published_report_are_queries_of_the_job_page_and_trend() {
    let t = tempfile::tempdir().unwrap();
    let (root, _) = published(t.path());
    process(&root, &["--slice-by", "nvtx:query"]);
    let perf_root = root.join("profiles/perf");
    let index = util::json(&perf_root.join("index.json"));
    let rows = index["captures"].as_array().unwrap();
    let captures: Vec<&str> = rows
        .iter()
        .map(|r| r["capture"].as_str().unwrap())
        .collect();
    assert_eq!(
        captures,
        [
            "worker_0/all",
            "worker_0/query",
            "worker_0/query_iter2",
            "worker_0/query_iter3"
        ],
        "{index}"
    );
    let query = &rows[1];
    assert_eq!(query["base"], "query");
    assert_eq!(query["nsys"]["profile"]["samples"], 4, "{index}");
    assert_eq!(rows[2]["nsys"]["profile"]["samples"], 0, "{index}");
    let html = fs::read_to_string(perf_root.join("index.html")).unwrap();
    let link =
        "href=\"../nsys/worker_0/all/jobprof/slices/query/flamegraph.html\">CPU 4 samples</a>";
    assert!(html.contains(link), "{html}");
    assert!(perf_root
        .join(&link[6..link.find("\">").unwrap()])
        .is_file());

    let queries = trend_queries(&[&root, &root], &t.path().join("trend"));
    for want in ["query [nsys]", "all [nsys]"] {
        assert!(queries.iter().any(|q| q == want), "{want}: {queries:?}");
    }
}

/// A pattern that matches more ranges than a report is cut into fails the
/// report (exit 1) naming the count and the limit, and writes nothing.
#[test]
fn more_matching_ranges_than_the_limit_fail_the_report() {
    let t = tempfile::tempdir().unwrap();
    let many = format!(
        "{DATA}\nWITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 10001) \
         INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, domainId) \
         SELECT 10000 + x, 10001 + x, 59, 'tiny', MAIN, 0 FROM c;"
    );
    export(t.path(), "r", SCHEMA, &many);
    let o = util::jobprof()
        .arg("process")
        .arg(t.path().join("r.nsys-rep"))
        .args(["--slice-by", "nvtx:t*"])
        .env("PATH", "/nonexistent")
        .output()
        .unwrap();
    let text = output_text(&o);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(
        text.contains("nvtx:t* matches 10001 NVTX ranges, more than the 10000 windows"),
        "{text}"
    );
    assert!(!t.path().join("r.nsys-rep.jobprof/slices").exists());
}

/// A report cut again another way (`--force`, here without `--slice-by`):
/// the slices of the earlier cut stay on disk but are no query of the job
/// page or of `trend` any more, which list what the report's summary.json
/// lists; a link planted as a slice is not followed.
#[test]
fn slices_of_an_earlier_cut_and_links_are_not_queries() {
    let t = tempfile::tempdir().unwrap();
    let (root, q) = published(t.path());
    let captures = || -> Vec<String> {
        let index = util::json(&root.join("profiles/perf/index.json"));
        (index["captures"].as_array().unwrap().iter())
            .map(|r| r["capture"].as_str().unwrap().to_string())
            .collect()
    };
    process(&root, &["--slice-by", "nvtx:query"]);
    assert_eq!(captures().len(), 4, "{:?}", captures());
    let slices = q.join("jobprof/slices");
    std::os::unix::fs::symlink(slices.join("query"), slices.join("planted")).unwrap();
    process(&root, &["--force"]);
    assert!(slices.join("query_iter2/summary.json").is_file());
    assert_eq!(captures(), ["worker_0/all"]);
    let queries = trend_queries(&[&root, &root], &t.path().join("trend"));
    assert!(queries.iter().any(|q| q == "all [nsys]"), "{queries:?}");
    assert!(
        queries.iter().all(|q| q.starts_with("all ")),
        "a slice of the earlier cut followed: {queries:?}"
    );
}
