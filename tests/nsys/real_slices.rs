//! One real whole-run report cut per query (`jobprof process
//! --slice-by nvtx:q*`), against the ground truth of the same nsys: each
//! slice's window is its NVTX range in the export, its CPU samples the
//! export's `COMPOSITE_EVENTS` inside the window (SQL), its OS runtime and
//! NVTX tables `nsys stats -r osrtsum`/`nvtxsum` of the export with the
//! events that start outside the window deleted (nsys 2022.4's `stats`
//! has no time filter), and the slices with what lies outside them add up
//! to the whole report.
//!
//! The worker runs three queries three times each in NVTX ranges (CPU
//! work, a sleep and file calls in each), CPU work outside them, and a
//! second thread whose sleeps straddle the ranges' edges (counted in the
//! window they start in).

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use super::real_profiles::{
    export_stats, jobprof_process_with, real_report, report_names, require_real, stats, table,
};
use crate::util::{self, output_text};

const WORKER: &str = r#"
#include <nvtx3/nvToolsExt.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>
static volatile double sink;
static volatile int done;
__attribute__((noinline)) static void spin(long n) {
    double s = 0;
    for (long i = 0; i < n; i++) s += i * 0.5;
    sink = s;
}
__attribute__((noinline)) static void query(const char *name, long n) {
    nvtxRangePushA(name);
    spin(n);
    usleep(3000);
    FILE *f = fopen("/dev/null", "w");
    fputs("x", f);
    fclose(f);
    nvtxRangePop();
}
static void *sleeper(void *arg) {
    (void)arg;
    while (!done) usleep(7000);
    return 0;
}
int main(void) {
    pthread_t t;
    pthread_create(&t, 0, sleeper, 0);
    spin(20000000);
    for (int r = 0; r < 3; r++) {
        query("q1", 40000000);
        query("q2", 80000000);
        query("q3", 20000000);
        spin(10000000);
    }
    done = 1;
    pthread_join(t, 0);
    return 0;
}
"#;

/// A window of a slice's `summary.json`: (start, end) ns.
fn window(summary: &serde_json::Value) -> (i64, i64) {
    let w = &summary["slice"];
    (
        w["start_ns"].as_i64().unwrap(),
        w["end_ns"].as_i64().unwrap(),
    )
}

/// One number of SQL on the export.
fn sql(db: &rusqlite::Connection, q: &str) -> i64 {
    db.query_row(q, [], |r| r.get::<_, Option<i64>>(0))
        .unwrap_or_else(|e| panic!("{q}: {e}"))
        .unwrap_or(0)
}

/// A copy of the export holding only the OS runtime calls and NVTX ranges
/// that start in `[start, end)`, as `nsys stats` of a window would read it.
fn windowed_copy(sqlite: &Path, to: &Path, (start, end): (i64, i64)) {
    fs::copy(sqlite, to).unwrap();
    let db = rusqlite::Connection::open(to).unwrap();
    let out = format!("NOT (start >= {start} AND start < {end})");
    db.execute_batch(&format!(
        "DELETE FROM OSRT_API WHERE {out}; \
         DELETE FROM NVTX_EVENTS WHERE eventType IN (59, 60, 70, 71) AND {out};"
    ))
    .unwrap();
}

/// Name -> (count, total ns) summed over several tables.
fn add(into: &mut BTreeMap<String, (u64, u64)>, t: &BTreeMap<String, (u64, u64)>) {
    for (k, (c, ns)) in t {
        let e = into.entry(k.clone()).or_default();
        e.0 += c;
        e.1 += ns;
    }
}

#[test]
fn a_real_report_cut_per_nvtx_range_matches_the_export_and_nsys_stats() {
    if !require_real() {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let report = real_report(t.path(), WORKER);
    let o = jobprof_process_with(&report, &["--slice-by", "nvtx:q*"]);
    assert!(o.status.success(), "{}", output_text(&o));
    assert!(
        output_text(&o).contains("9 slices by nvtx:q* (slices/)"),
        "{}",
        output_text(&o)
    );
    eprint!("{}", String::from_utf8_lossy(&o.stdout));
    let out = t.path().join("r.nsys-rep.jobprof");
    // JOBPROF_TEST_KEEP_SLICES=DIR keeps the outputs there (the picture in
    // docs/nsys.md is one slice's page: scripts/screenshots.sh).
    if let Some(keep) = std::env::var_os("JOBPROF_TEST_KEEP_SLICES") {
        let status = std::process::Command::new("cp")
            .args(["-a", "--"])
            .arg(&out)
            .arg(&keep)
            .status()
            .unwrap();
        assert!(status.success());
    }
    let sqlite = t.path().join("stats.sqlite");
    let (osrt, nvtx) = report_names();
    let whole_osrt = stats(&report, osrt, &sqlite);
    let db = rusqlite::Connection::open(&sqlite).unwrap();

    let whole = util::json(&out.join("summary.json"));
    let names: Vec<&str> = (whole["slices"].as_array().unwrap().iter())
        .map(|v| v.as_str().unwrap())
        .collect();
    let expected: Vec<String> = ["q1", "q2", "q3"]
        .iter()
        .flat_map(|q| [q.to_string(), format!("{q}_iter2"), format!("{q}_iter3")])
        .map(|n| format!("slices/{n}"))
        .collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(sorted, expected);

    // The ranges in the export, by text, in start order.
    let mut ranges: BTreeMap<String, Vec<(i64, i64)>> = BTreeMap::new();
    let mut st = db
        .prepare("SELECT text, start, end FROM NVTX_EVENTS WHERE eventType = 59 ORDER BY start")
        .unwrap();
    let rows = st
        .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get(1)?, r.get(2)?)))
        .unwrap();
    for r in rows {
        let (text, s, e) = r.unwrap();
        ranges.entry(text).or_default().push((s, e));
    }

    let (mut samples_in, mut osrt_in) = (0u64, BTreeMap::new());
    let mut windows = Vec::new();
    let mut straddling = 0;
    for name in &names {
        let dir = out.join(name);
        let s = util::json(&dir.join("summary.json"));
        let (start, end) = window(&s);
        windows.push((start, end));
        // The window is the range's, the Nth of its text for _iterN.
        let q = name.trim_start_matches("slices/");
        let (base, n) = jobprof::capture::replicate::split(q);
        assert_eq!(ranges[base][n as usize - 1], (start, end), "{name}");
        assert_eq!(s["slice"]["range"], base, "{s}");
        assert_eq!(s["query"], q, "{s}");

        // CPU samples: COMPOSITE_EVENTS inside the window.
        let count = sql(
            &db,
            &format!(
                "SELECT count(*) FROM COMPOSITE_EVENTS WHERE start >= {start} AND start < {end}"
            ),
        ) as u64;
        assert!(count > 5, "{name}: only {count} CPU samples in the window");
        assert_eq!(
            util::folded_total(&dir.join("stacks.folded")),
            count,
            "{name}"
        );
        assert_eq!(s["samples"], count, "{name}");
        samples_in += count;

        // OS runtime and NVTX tables: nsys stats of the windowed export.
        let copy = t.path().join(format!("{}.sqlite", q));
        windowed_copy(&sqlite, &copy, (start, end));
        let osrt_w = export_stats(&copy, osrt);
        assert_eq!(table(&dir.join("osrt.tsv")), osrt_w, "{name}");
        assert!(osrt_w.contains_key("usleep"), "{name}: {osrt_w:?}");
        assert_eq!(
            table(&dir.join("nvtx.tsv")),
            export_stats(&copy, nvtx),
            "{name}"
        );
        add(&mut osrt_in, &osrt_w);
        eprintln!(
            "{name}: [{start}, {end}) {count} CPU samples, osrt {:?}",
            osrt_w.get("usleep")
        );
        straddling += sql(
            &db,
            &format!(
                "SELECT count(*) FROM OSRT_API WHERE start >= {start} AND start < {end} \
                 AND end > {end}"
            ),
        );
        // The query's own frames are in its flamegraph.
        let folded = fs::read_to_string(dir.join("stacks.folded")).unwrap();
        assert!(folded.contains(";main;query;spin "), "{name}: {folded}");
    }
    assert!(straddling > 0, "no OS runtime call crossed a window's end");

    // The slices and what starts outside every window add up to the report.
    let outside: Vec<String> = windows
        .iter()
        .map(|(s, e)| format!("NOT (start >= {s} AND start < {e})"))
        .collect();
    let outside = outside.join(" AND ");
    let total = sql(&db, "SELECT count(*) FROM COMPOSITE_EVENTS") as u64;
    let samples_out = sql(
        &db,
        &format!("SELECT count(*) FROM COMPOSITE_EVENTS WHERE {outside}"),
    ) as u64;
    assert!(samples_out > 0, "no sample outside the queries");
    assert_eq!(samples_in + samples_out, total);
    assert_eq!(whole["samples"], total);
    let mut outside_osrt = BTreeMap::new();
    let mut st = db
        .prepare(&format!(
            "SELECT s.value, count(*), sum(o.end - o.start) FROM OSRT_API o \
             JOIN StringIds s ON s.id = o.nameId WHERE o.eventClass = 27 AND {} \
             GROUP BY s.value",
            outside.replace("start", "o.start")
        ))
        .unwrap();
    for r in st
        .query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, i64>(2)?,
            ))
        })
        .unwrap()
    {
        let (n, c, ns) = r.unwrap();
        outside_osrt.insert(n, (c as u64, ns as u64));
    }
    add(&mut osrt_in, &outside_osrt);
    assert_eq!(osrt_in, whole_osrt);
    assert_eq!(table(&out.join("osrt.tsv")), whole_osrt);
    eprintln!(
        "{total} CPU samples: {samples_in} in the 9 slices, {samples_out} outside; \
         {straddling} OS runtime calls cross a window's end"
    );
}
