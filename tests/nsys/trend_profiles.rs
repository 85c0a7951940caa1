//! `jobprof trend` on Nsight Systems profiles: runs made only of nsys
//! reports (the fixture export of `profiles`, its GPU kernel and NVTX
//! durations changed per run), their CPU stacks, GPU kernels and NVTX
//! ranges followed per query, and the gate on them.

use std::fs;
use std::path::{Path, PathBuf};

use super::profiles::{export, manifest, process, DATA, SCHEMA};
use crate::util::{self, output_text};

/// One run: `q1` in 3 replicates on worker 0, each a report whose
/// `reduce(float*)` kernel lasts `reduce_ns` (+ the replicate's jitter)
/// and whose `engine:scan` NVTX range lasts `scan_ns`; processed.
fn run(dir: &Path, n: u64, reduce_ns: u64, scan_ns: u64) -> PathBuf {
    let root = dir.join(format!("run_{n}"));
    for rep in 1..=3u64 {
        let name = format!("q1_iter{rep}");
        let q = root.join("profiles/nsys/worker_0").join(&name);
        fs::create_dir_all(&q).unwrap();
        let data = DATA
            .replace(
                "(80, 85, 0, 1, 7, 16",
                &format!("(80, {}, 0, 1, 7, 16", 80 + reduce_ns + rep),
            )
            .replace(
                "(200, 300, 60, 'scan'",
                &format!("(200, {}, 60, 'scan'", 200 + scan_ns + rep),
            );
        let file = format!("nsys_worker_w0_{name}");
        export(&q, &file, SCHEMA, &data);
        let m = manifest(&name, &format!("{file}.nsys-rep"), "nsys-rep").replace(
            "\"unix_ns\": 1000",
            &format!("\"unix_ns\": {}", n * 1_000_000_000),
        );
        fs::write(q.join("nsys-capture.json"), m).unwrap();
    }
    let o = process(&[&root]);
    assert!(o.status.success(), "{}", output_text(&o));
    root
}

fn trend(runs: &[PathBuf], out: &Path) -> std::process::Output {
    util::jobprof()
        .arg("trend")
        .args(runs)
        .args(["--fail-on-regression", "2", "-o"])
        .arg(out)
        .output()
        .unwrap()
}

/// A series of nsys-only runs: unchanged, the gate passes; with one kernel
/// and one NVTX range slower in the last run, it fails (exit 3) naming
/// both, and the CPU stacks are followed as perf's are.
#[test]
fn trend_follows_nsys_stacks_kernels_and_nvtx_and_gates_on_them() {
    let t = tempfile::tempdir().unwrap();
    let mut runs: Vec<PathBuf> = (1..=3).map(|n| run(t.path(), n, 5, 100)).collect();
    let same = run(t.path(), 4, 5, 100);
    let slow = run(&t.path().join("slow"), 5, 60, 700);

    runs.push(same);
    let o = trend(&runs, &t.path().join("unchanged"));
    let text = output_text(&o);
    assert_eq!(o.status.code(), Some(0), "{text}");
    assert!(!text.contains("regressed"), "{text}");
    let json = util::json(&t.path().join("unchanged/trend.json"));
    let queries: Vec<&str> = json["queries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| q["query"].as_str().unwrap())
        .collect();
    for want in ["q1 [nsys]", "q1 [gpu-kernels]", "q1 [nvtx]"] {
        assert!(queries.contains(&want), "{want}: {queries:?}");
    }

    runs[3] = slow;
    let o = trend(&runs, &t.path().join("slower"));
    let text = output_text(&o);
    assert_eq!(o.status.code(), Some(3), "{text}");
    let stderr = String::from_utf8_lossy(&o.stderr);
    for want in [
        "regressed q1 [gpu-kernels] reduce(float*)",
        "regressed q1 [nvtx] engine:scan",
    ] {
        assert!(stderr.contains(want), "{want}\n{text}");
    }
    assert!(!text.contains("regressed q1 [nsys]"), "{text}");
    // A table's total is time, whatever the perf captures count.
    assert!(
        text.contains("slower q1 [gpu-kernels] 0 µs -> 0 µs per replicate"),
        "{text}"
    );
    // Each regressed table links its rows side by side, run 4 against
    // run 3, as a regressed stack links its differential flamegraph.
    let kernels = table_diff(&t.path().join("slower"), "q1 [gpu-kernels]");
    assert!(
        kernels.contains("<tr><td>reduce(float*)</td><td class=\"num\">7</td><td class=\"num\">62</td><td class=\"num\">+55</td><td class=\"num\">+785.7%</td></tr>"),
        "{kernels}"
    );
    // An unchanged row is listed too, after the grown one, its name
    // escaped.
    let gemm = "<tr><td>void gemm&lt;float&gt;(int)</td><td class=\"num\">60</td>\
                <td class=\"num\">60</td><td class=\"num\">+0</td><td class=\"num\">+0.0%</td></tr>";
    let at = |row: &str| {
        kernels
            .find(row)
            .unwrap_or_else(|| panic!("{row}\n{kernels}"))
    };
    assert!(at("<tr><td>reduce(float*)</td>") < at(gemm), "{kernels}");
    let nvtx = table_diff(&t.path().join("slower"), "q1 [nvtx]");
    assert!(nvtx.contains("<tr><td>engine:scan</td>"), "{nvtx}");
    // The most grown row first.
    let first = nvtx.find("<tr><td>").unwrap();
    assert!(
        nvtx[first..].starts_with("<tr><td>engine:scan</td>"),
        "{nvtx}"
    );
}

/// The run-versus-baseline page of `query`'s run 4 in the trend written
/// to `out`, read through the link `trend.json` gives it.
fn table_diff(out: &Path, query: &str) -> String {
    let json = util::json(&out.join("trend.json"));
    let q = json["queries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["query"] == query)
        .unwrap_or_else(|| panic!("{query}: {json}"));
    let href = q["diffs"][3]
        .as_str()
        .unwrap_or_else(|| panic!("no diff of {query}'s run 4: {q}"));
    let page = fs::read_to_string(out.join(href)).unwrap_or_else(|e| panic!("{href}: {e}"));
    assert!(page.contains(&format!("query {query} · run 4")), "{page}");
    page
}
