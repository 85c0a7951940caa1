//! `jobprof process` end to end, on real captures: a real multi-threaded
//! program (fixtures/src/demo_worker.c) recorded by the real capture sidecar
//! (`jobprof-record sidecar`, driven by `start`/`stop`/`shutdown` as a job
//! does) into 3 shards, then processed by the real binary with real
//! `perf script`. The capture is made once per test run; every test works
//! on its own copy. The program's binary is deleted after recording, so
//! symbols come from the capture's symfs/ as they would after a job.
//! Expected numbers come from perf itself (`perf script -F period`).

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant, SystemTime};

use crate::util::{self, copy_tree, output_text as text};
use crate::util::{base, capture_dir, copy_base, data_files, edit_json, perf_counts, summary};
use crate::util::{folded_total, jobprof};

fn run(args: &[&str], dirs: &[&Path]) -> Output {
    jobprof()
        .arg("process")
        .args(dirs)
        .args(args)
        .output()
        .unwrap()
}

fn mtimes(dir: &Path) -> BTreeMap<String, SystemTime> {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                e.metadata().unwrap().modified().unwrap(),
            )
        })
        .collect()
}

/// Asserts `svg` is well-formed XML (inferno's SVG has a DOCTYPE).
fn parse_svg(svg: &str) {
    let opts = roxmltree::ParsingOptions {
        allow_dtd: true,
        ..Default::default()
    };
    let doc = roxmltree::Document::parse_with_options(svg, opts)
        .unwrap_or_else(|e| panic!("flamegraph.svg is not well-formed XML: {e}"));
    assert_eq!(doc.root_element().tag_name().name(), "svg");
}

/// Asserts the HTML page loads nothing from the network.
fn assert_offline_html(html: &str) {
    let lower = html.to_ascii_lowercase();
    for bad in [
        "src=\"http",
        "src='http",
        "src=\"//",
        "href=\"http",
        "href='http",
        "href=\"//",
        "url(http",
        "url(//",
        "@import",
        "<link",
        "fetch(",
        "xmlhttprequest",
        "<iframe",
    ] {
        assert!(
            !lower.contains(bad),
            "flamegraph.html references the network: {bad}"
        );
    }
}

#[test]
fn real_capture_every_output_checked() {
    let Some(base) = base() else { return };
    let (_t, result) = copy_base(base);
    let dir = capture_dir(&result, 0, "q1");
    let out = run(&[], &[&result]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("processed"), "{}", text(&out));

    let symfs = result.join("profiles/perf/worker_0/symfs");
    let shards = data_files(&dir);
    assert_eq!(shards.len(), 3);
    let (samples, periods) = perf_counts(&shards, &symfs);
    assert!(samples > 50, "too few samples recorded: {samples}");

    // stacks.folded: every sample of every shard, nothing more.
    assert_eq!(folded_total(&dir.join("stacks.folded")), periods);

    // perf.script.zst: the symbolized text of all shards.
    let archive = zstd::decode_all(&util::read(&dir.join("perf.script.zst"))[..]).unwrap();
    let archive = String::from_utf8_lossy(&archive);
    let headers = archive
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with(['\t', ' ']))
        .count() as u64;
    assert_eq!(headers, samples);

    // flamegraph.svg: well-formed XML, the workload's functions, its script.
    let svg = fs::read_to_string(dir.join("flamegraph.svg")).unwrap();
    parse_svg(&svg);
    for f in ["demo_run_query", "demo_hash_key", "demo_sort_results"] {
        assert!(svg.contains(f), "flamegraph.svg lacks {f}");
    }
    assert!(svg.contains("<script"), "flamegraph.svg has no script");
    assert!(
        svg.contains("4242") && svg.contains("q1"),
        "title names job and query"
    );

    // flamegraph.html: self-contained.
    let html = fs::read_to_string(dir.join("flamegraph.html")).unwrap();
    assert!(html.contains("<svg") && html.contains("demo_run_query"));
    assert_offline_html(&html);

    // summary.json: the right counts.
    let s = summary(&dir);
    assert_eq!(s["samples"], samples);
    assert_eq!(s["period_total"], periods);
    assert_eq!(s["job_id"], "4242");
    assert_eq!(s["worker"], 0);
    assert_eq!(s["shards"].as_array().unwrap().len(), 3);
    assert!(s["shards"]
        .as_array()
        .unwrap()
        .iter()
        .all(|x| x["status"] == "ok"));
    assert!(s["symbolized_ratio"].as_f64().unwrap() > 0.9);
    let top: Vec<&str> = s["top_total"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert!(top.contains(&"demo_run_query"), "{top:?}");
    assert!(!s["top_self"].as_array().unwrap().is_empty());
    let inputs = s["inputs"].as_array().unwrap();
    for f in &shards {
        let name = f.file_name().unwrap().to_string_lossy();
        let i = inputs
            .iter()
            .find(|i| i["name"] == *name)
            .expect("input listed");
        assert_eq!(i["bytes"], fs::metadata(f).unwrap().len());
        let sum = Command::new("sha256sum").arg(f).output().unwrap();
        let sum = String::from_utf8_lossy(&sum.stdout);
        assert_eq!(
            i["sha256"].as_str().unwrap(),
            sum.split_whitespace().next().unwrap()
        );
    }
    // auto: the native symbolizer read this frame-pointer capture and perf
    // did not run (tests/native.rs covers --symbolizer perf).
    assert_eq!(s["symbolized_from"], "native");
    assert!(s["perf_version"].is_null());
    assert_eq!(s["tool_version"], env!("CARGO_PKG_VERSION"));

    // The marker, last, lists the outputs.
    let m: serde_json::Value =
        serde_json::from_slice(&util::read(&dir.join(".postprocess-complete"))).unwrap();
    assert_eq!(m["output_version"], 3);
    // No temporary file is left.
    assert!(mtimes(&dir).keys().all(|n| !n.ends_with(".tmp")));
}

/// A fake perf that logs its argv and then runs the real one.
fn logging_perf(dir: &Path) -> (PathBuf, PathBuf) {
    let log = dir.join("perf-argv.log");
    let exe = dir.join("perf");
    fs::write(
        &exe,
        format!(
            "#!/bin/sh\necho \"$*\" >> '{}'\nexec perf \"$@\"\n",
            log.display()
        ),
    )
    .unwrap();
    fs::set_permissions(&exe, fs::Permissions::from_mode(0o755)).unwrap();
    (exe, log)
}

#[test]
fn rerun_without_force_changes_nothing() {
    let Some(base) = base() else { return };
    let (t, result) = copy_base(base);
    let dir = capture_dir(&result, 0, "q1");
    let out = run(&[], &[&result]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let before = mtimes(&dir);
    let (fake, log) = logging_perf(t.path());
    let start = Instant::now();
    let out = run(&["--perf", fake.to_str().unwrap()], &[&result]);
    let took = start.elapsed();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("skipped"),
        "{}",
        text(&out)
    );
    assert_eq!(
        mtimes(&dir),
        before,
        "a rerun without --force touched files"
    );
    let argv = fs::read_to_string(&log).unwrap_or_default();
    assert!(!argv.contains("script"), "a rerun ran perf script: {argv}");
    assert!(took < Duration::from_secs(10), "a skip took {took:?}");

    // --force does the work again.
    // (--symbolizer perf: this is about perf script being run again.)
    let out = run(
        &[
            "--force",
            "--symbolizer",
            "perf",
            "--perf",
            fake.to_str().unwrap(),
        ],
        &[&result],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(fs::read_to_string(&log).unwrap().contains("script"));
    let after = mtimes(&dir);
    assert_ne!(after["summary.json"], before["summary.json"]);
}

#[test]
fn invalid_captures_refused_with_reasons_valid_one_processed() {
    let Some(base) = base() else { return };
    let (_t, result) = copy_base(base);
    let good = capture_dir(&result, 0, "q1");
    let invalid = capture_dir(&result, 0, "q2");
    let killed = capture_dir(&result, 0, "q3");
    let unpublished = capture_dir(&result, 0, "q4");
    for d in [&invalid, &killed, &unpublished] {
        copy_tree(&good, d);
    }
    edit_json(&invalid.join("capture.json"), |v| {
        v["valid"] = false.into();
        v["reason"] = "the worker exited during the capture".into();
    });
    // Shard 1's perf was killed by the watchdog's SIGTERM (exit 143).
    let tsv = fs::read_to_string(killed.join("perf-shards.tsv")).unwrap();
    let tsv: Vec<String> = tsv
        .lines()
        .map(|l| {
            let mut f: Vec<&str> = l.split('\t').collect();
            if f[0] == "1" {
                f[6] = "143";
            }
            f.join("\t")
        })
        .collect();
    fs::write(killed.join("perf-shards.tsv"), tsv.join("\n") + "\n").unwrap();
    edit_json(&unpublished.join("capture.json"), |v| {
        v["phases"]
            .as_array_mut()
            .unwrap()
            .retain(|p| p["phase"] != "published");
    });
    let out = run(&[], &[&result]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = |q: &str| {
        stdout
            .lines()
            .find(|l| l.contains(&format!("worker_0/{q}:")))
            .unwrap_or_else(|| panic!("no line for {q}: {}", text(&out)))
            .to_string()
    };
    assert!(line("q1").contains("processed"));
    assert!(line("q2").contains("refused") && line("q2").contains("the worker exited"));
    assert!(
        line("q3").contains("refused")
            && line("q3").contains("shard 1")
            && line("q3").contains("143")
    );
    assert!(line("q4").contains("refused") && line("q4").contains("published"));
    assert!(good.join(".postprocess-complete").exists());
    for d in [&invalid, &killed, &unpublished] {
        assert!(!d.join("stacks.folded").exists() && !d.join(".postprocess-complete").exists());
    }
}

#[test]
fn corrupt_shard_reported_others_processed() {
    let Some(base) = base() else { return };
    let (_t, result) = copy_base(base);
    let dir = capture_dir(&result, 0, "q1");
    let symfs = result.join("profiles/perf/worker_0/symfs");
    let shards = data_files(&dir);
    let (_, expected_ok) = perf_counts(&[shards[0].clone(), shards[2].clone()], &symfs);
    let bad = &shards[1];
    let len = fs::metadata(bad).unwrap().len();
    let f = fs::OpenOptions::new().write(true).open(bad).unwrap();
    f.set_len(len / 2).unwrap();
    drop(f);
    let out = run(&[], &[&result]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("failed") && stdout.contains("perf.data.part001"),
        "{}",
        text(&out)
    );
    let s = summary(&dir);
    assert_eq!(s["shards"][1]["status"], "failed");
    assert_eq!(s["shards"][0]["status"], "ok");
    assert_eq!(s["shards"][2]["status"], "ok");
    // The healthy shards are all there (whatever perf salvaged of the
    // truncated one comes on top).
    assert!(folded_total(&dir.join("stacks.folded")) >= expected_ok);
    assert!(dir.join("flamegraph.svg").exists());
    assert!(
        !dir.join(".postprocess-complete").exists(),
        "a failed capture is not complete"
    );
}

/// Turns the base capture into a single-shard one (shard 0's real data).
fn single_shard(result: &Path) -> PathBuf {
    let dir = capture_dir(result, 0, "q1");
    fs::rename(dir.join("perf.data.part000"), dir.join("perf.data")).unwrap();
    fs::remove_file(dir.join("perf.data.part001")).unwrap();
    fs::remove_file(dir.join("perf.data.part002")).unwrap();
    let tsv = fs::read_to_string(dir.join("perf-shards.tsv")).unwrap();
    let mut lines: Vec<String> = tsv.lines().take(2).map(str::to_string).collect();
    lines[1] = lines[1].replace("perf.data.part000", "perf.data");
    fs::write(dir.join("perf-shards.tsv"), lines.join("\n") + "\n").unwrap();
    edit_json(&dir.join("capture.json"), |v| v["shard_count"] = 1.into());
    dir
}

#[test]
fn time_slices_give_the_same_stacks() {
    let Some(base) = base() else { return };
    let (_t, result) = copy_base(base);
    let dir = single_shard(&result);
    let symfs = result.join("profiles/perf/worker_0/symfs");
    let (samples, periods) = perf_counts(&[dir.join("perf.data")], &symfs);

    let out = run(&["--time-slices", "1"], &[&result]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let whole = fs::read(dir.join("stacks.folded")).unwrap();
    assert_eq!(summary(&dir)["shards"][0]["slices"], 1);

    let out = run(
        &["--force", "--time-slices", "5", "--jobs", "2"],
        &[&result],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let sliced = fs::read(dir.join("stacks.folded")).unwrap();
    let s = summary(&dir);
    assert_eq!(s["shards"][0]["slices"], 5, "{}", text(&out));
    assert_eq!(
        s["samples"], samples,
        "a sample lost or duplicated at a slice edge"
    );
    assert_eq!(folded_total(&dir.join("stacks.folded")), periods);
    assert_eq!(
        String::from_utf8_lossy(&sliced),
        String::from_utf8_lossy(&whole)
    );
    // The archive holds every sample once, in time order.
    let archive = zstd::decode_all(&util::read(&dir.join("perf.script.zst"))[..]).unwrap();
    let times: Vec<f64> = String::from_utf8_lossy(&archive)
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with(['\t', ' ']))
        .filter_map(|l| {
            l.split_whitespace()
                .find(|w| w.ends_with(':') && w.contains('.'))
                .and_then(|w| w.trim_end_matches(':').parse().ok())
        })
        .collect();
    assert_eq!(times.len() as u64, samples);
    assert!(
        times.windows(2).all(|w| w[0] <= w[1]),
        "slices archived out of order"
    );
}

#[test]
fn killed_run_leaves_nothing_half_written_and_is_completed_next_time() {
    let Some(base) = base() else { return };
    let (t, result) = copy_base(base);
    let dir = capture_dir(&result, 0, "q1");
    // A perf whose `script` hangs after announcing itself.
    let started = t.path().join("script-started");
    let slow = t.path().join("slow-perf");
    fs::write(
        &slow,
        format!(
            "#!/bin/sh\nif [ \"$1\" = script ]; then echo $$ >> '{}'; exec sleep 60; fi\nexec perf \"$@\"\n",
            started.display()
        ),
    )
    .unwrap();
    fs::set_permissions(&slow, fs::Permissions::from_mode(0o755)).unwrap();
    let mut child = jobprof()
        .args(["process", "--symbolizer", "perf", "--perf"])
        .arg(&slow)
        .arg(&result)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    util::wait_for("perf script to start", Duration::from_secs(30), || {
        fs::read_to_string(&started).map_or(0, |s| s.lines().count()) >= 1
    });
    child.kill().unwrap();
    child.wait().unwrap();
    for pid in fs::read_to_string(&started).unwrap().lines() {
        let _ = Command::new("kill").arg(pid).status();
    }
    let names: Vec<String> = mtimes(&dir).into_keys().collect();
    for out in [
        "stacks.folded",
        "flamegraph.svg",
        "flamegraph.html",
        "summary.json",
        "perf.script.zst",
        ".postprocess-complete",
    ] {
        assert!(
            !names.contains(&out.to_string()),
            "{out} written by a killed run"
        );
    }
    assert!(names.iter().all(|n| !n.ends_with(".tmp")), "{names:?}");
    let out = run(&[], &[&result]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(dir.join(".postprocess-complete").exists());
}

#[test]
fn too_few_symbols_refuses_to_render_but_keeps_folded_and_summary() {
    let Some(base) = base() else { return };
    let (_t, result) = copy_base(base);
    let dir = capture_dir(&result, 0, "q1");
    // Post-processing without the capture's symbols: none of the worker's
    // own frames can be named (its binary is gone); only samples taken in
    // the kernel have a named leaf (perf reads /proc/kallsyms itself when
    // no symfs/ is passed), a small share of this workload's weight.
    fs::remove_dir_all(result.join("profiles/perf/worker_0/symfs")).unwrap();
    let out = run(&["--min-symbolized", "50"], &[&result]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let s = summary(&dir);
    assert!(s["symbolized_ratio"].as_f64().unwrap() < 0.5, "{s:#}");
    assert_eq!(s["unnamed_by_dso"][0]["dso"], "demo_worker", "{s:#}");
    assert!(
        s["warnings"]
            .to_string()
            .contains("unnamed frames in demo_worker"),
        "{s:#}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("not rendered") && stdout.contains("symfs"),
        "{}",
        text(&out)
    );
    assert!(dir.join("stacks.folded").exists());
    assert!(summary(&dir)["render_refused"].is_string());
    assert!(!dir.join("flamegraph.svg").exists() && !dir.join("flamegraph.html").exists());
    assert!(!dir.join(".postprocess-complete").exists());
    // With the threshold at 0 it renders whatever there is.
    let out = run(&["--min-symbolized", "0"], &[&result]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(dir.join("flamegraph.svg").exists());
}

#[test]
fn legacy_layout_with_data_and_with_only_its_gzip_text() {
    let Some(base) = base() else { return };
    let (_t, result) = copy_base(base);
    let q1 = capture_dir(&result, 0, "q1");
    let q2 = capture_dir(&result, 0, "q2");
    // The old pipeline's files: key=value metadata, a manifest with the
    // open_fds column, no capture.json.
    let cap: serde_json::Value =
        serde_json::from_slice(&util::read(&q1.join("capture.json"))).unwrap();
    fs::remove_file(q1.join("capture.json")).unwrap();
    fs::write(
        q1.join("capture-metadata.txt"),
        util::old_pipeline_metadata(3, "777", cap["event"].as_str().unwrap()),
    )
    .unwrap();
    let tsv = fs::read_to_string(q1.join("perf-shards.tsv")).unwrap();
    let legacy: Vec<String> = tsv
        .lines()
        .enumerate()
        .map(|(i, l)| {
            let mut f: Vec<&str> = l.split('\t').collect();
            f.insert(6, if i == 0 { "open_fds" } else { "512" });
            f.join("\t")
        })
        .collect();
    fs::write(q1.join("perf-shards.tsv"), legacy.join("\n") + "\n").unwrap();
    copy_tree(&q1, &q2);
    let symfs = result.join("profiles/perf/worker_0/symfs");
    let (samples, periods) = perf_counts(&data_files(&q1), &symfs);

    // q2 as the old pipeline left it after its own post-processing: only
    // perf.script.gz, the perf.data files gone. Symbolized as jobprof does
    // (with the snapshot's kernel table), so that the two fold the same.
    let kallsyms = result.join("profiles/perf/worker_0/kallsyms");
    assert!(kallsyms.is_file(), "the sidecar snapshots kallsyms");
    let mut script = Vec::new();
    for f in data_files(&q2) {
        let o = Command::new("perf")
            .args(["script", "-f", "--no-inline", "--symfs"])
            .arg(&symfs)
            .arg("--kallsyms")
            .arg(&kallsyms)
            .arg("-i")
            .arg(&f)
            .output()
            .unwrap();
        script.extend_from_slice(&o.stdout);
        fs::remove_file(&f).unwrap();
    }
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut gz, &script).unwrap();
    fs::write(q2.join("perf.script.gz"), gz.finish().unwrap()).unwrap();

    // q1 symbolized by `perf script` as well: this test is about reading the
    // legacy layout both ways, not about the native symbolizer (whose
    // agreement with perf is tests/native.rs's business).
    let out = run(&["--symbolizer", "perf", "-v"], &[&result]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("folding the capture's symbolized text perf.script.gz"),
        "{}",
        text(&out)
    );
    // jobprof's outputs of an old-pipeline capture are in its jobprof/.
    let (q1, q2) = (q1.join("jobprof"), q2.join("jobprof"));
    for d in [&q1, &q2] {
        let s = summary(d);
        assert_eq!(s["layout"], "legacy");
        assert_eq!(s["job_id"], "777");
        assert_eq!(s["samples"], samples);
        assert_eq!(folded_total(&d.join("stacks.folded")), periods);
        assert!(d.join("flamegraph.html").exists());
    }
    assert_eq!(summary(&q2)["symbolized_from"], "perf.script.gz");
    let (a, b) = (
        fs::read_to_string(q1.join("stacks.folded")).unwrap(),
        fs::read_to_string(q2.join("stacks.folded")).unwrap(),
    );
    if a != b {
        let only = |x: &str, y: &str| -> Vec<String> {
            let ys: std::collections::HashSet<&str> = y.lines().collect();
            x.lines()
                .filter(|l| !ys.contains(l))
                .map(String::from)
                .collect()
        };
        panic!(
            "perf.data (native) and perf.script.gz fold differently\nonly from perf.data:\n{}\nonly from perf.script.gz:\n{}",
            only(&a, &b).join("\n"),
            only(&b, &a).join("\n")
        );
    }
}

#[test]
fn worker_and_query_narrow_the_run() {
    let Some(base) = base() else { return };
    let (_t, result) = copy_base(base);
    let q1 = capture_dir(&result, 0, "q1");
    copy_tree(&q1, &capture_dir(&result, 0, "q2"));
    copy_tree(&q1, &capture_dir(&result, 3, "q1"));
    let out = run(
        &["--worker", "3", "--formats", "folded,summary"],
        &[&result],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(capture_dir(&result, 3, "q1").join("stacks.folded").exists());
    assert!(!capture_dir(&result, 3, "q1")
        .join("flamegraph.svg")
        .exists());
    assert!(!q1.join("stacks.folded").exists());
    let out = run(&["--query", "q2"], &[&result]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(capture_dir(&result, 0, "q2")
        .join("flamegraph.svg")
        .exists());
    assert!(!q1.join("stacks.folded").exists());
    let out = run(&["--query", "nope"], &[&result]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
}

#[test]
fn demo_fixture_processes_without_perf() {
    let t = tempfile::tempdir().unwrap();
    let result = t.path().join("result_dir_demo");
    // Without the outputs of a demo run in the checkout (the README's first
    // command): this test must process the capture, not skip it.
    util::copy_demo(&result);
    let no_perf = t.path().join("bin");
    fs::create_dir_all(&no_perf).unwrap();
    let out = jobprof()
        .args(["process", "-v"])
        .arg(&result)
        .env("PATH", &no_perf)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("folding the capture's symbolized text perf.script.zst"),
        "{}",
        text(&out)
    );
    let dir = capture_dir(&result, 0, "q01");
    let svg = fs::read_to_string(dir.join("flamegraph.svg")).unwrap();
    parse_svg(&svg);
    assert!(svg.contains("demo_run_query"));
    let html = fs::read_to_string(dir.join("flamegraph.html")).unwrap();
    assert_offline_html(&html);
    let s = summary(&dir);
    assert_eq!(s["symbolized_from"], "perf.script.zst");
    assert!(s["samples"].as_u64().unwrap() > 0);
    // The first picture a new user sees is whole and names the kernel.
    assert!(s["truncated_ratio"].as_f64().unwrap() <= 0.05, "{s:#}");
    assert_eq!(s["unnamed_stack_ratio"].as_f64().unwrap(), 0.0, "{s:#}");
    assert!(svg.contains("do_syscall_64") && svg.contains("demo_read_input"));
}

#[test]
fn demo_fixture_with_perf_names_kernel_frames_from_its_snapshot() {
    let Some(_) = base() else { return };
    // Both symbolizers, from the raw shards, give the very text shipped for
    // machines without perf.
    for (symbolizer, from) in [("perf", "perf script"), ("native", "native")] {
        let t = tempfile::tempdir().unwrap();
        let result = t.path().join("result_dir_demo");
        util::copy_demo(&result);
        let dir = capture_dir(&result, 0, "q01");
        let shipped = fs::read(dir.join("perf.script.zst")).unwrap();
        fs::remove_file(dir.join("perf.script.zst")).unwrap();
        let out = run(&["--symbolizer", symbolizer], &[&result]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
        let s = summary(&dir);
        assert_eq!(s["symbolized_from"], from);
        let kernel = s["kernel_symbols"].as_str().unwrap();
        assert!(kernel.starts_with("snapshot ") && kernel.ends_with("worker_0/kallsyms"));
        assert_eq!(s["unnamed_stack_ratio"].as_f64().unwrap(), 0.0, "{s:#}");
        assert!(s["truncated_ratio"].as_f64().unwrap() <= 0.05, "{s:#}");
        let again = zstd::decode_all(&fs::read(dir.join("perf.script.zst")).unwrap()[..]).unwrap();
        assert!(
            again == zstd::decode_all(&shipped[..]).unwrap(),
            "{symbolizer}: the text differs from the shipped perf.script.zst"
        );
    }
}

#[test]
fn missing_dir_and_bad_options_are_usage_errors() {
    let out = run(&[], &[Path::new("/nonexistent/result_dir")]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("does not exist"));
    let t = tempfile::tempdir().unwrap();
    let out = run(&[], &[t.path()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no captures found"));
    let out = run(&["--formats", "png"], &[t.path()]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn zstd_level_changes_the_archive_size_not_its_text() {
    let Some(base) = base() else { return };
    let archive = |level: &str| {
        let (_t, result) = copy_base(base);
        let out = run(&["--zstd-level", level], &[&result]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
        util::read(&capture_dir(&result, 0, "q1").join("perf.script.zst"))
    };
    let (fast, small) = (archive("1"), archive("19"));
    assert_eq!(
        zstd::decode_all(&fast[..]).unwrap(),
        zstd::decode_all(&small[..]).unwrap()
    );
    assert!(
        small.len() < fast.len(),
        "{} vs {}",
        small.len(),
        fast.len()
    );
    let (_t, result) = copy_base(base);
    let out = run(&["--zstd-level", "20"], &[&result]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
}

/// A rerun takes an unchanged input's SHA-256 from the marker (size, mtime
/// and inode match) instead of reading the file again; a changed input is
/// hashed again.
#[test]
fn rerun_reuses_the_hash_of_unchanged_inputs() {
    let t = tempfile::tempdir().unwrap();
    let result = t.path().join("result_dir_demo");
    util::copy_demo(&result);
    let run = || {
        let o = jobprof()
            .args(["process", "--force"])
            .arg(&result)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    };
    run();
    let dir = capture_dir(&result, 0, "q01");
    let marker = dir.join(".postprocess-complete");
    let m: serde_json::Value = serde_json::from_slice(&fs::read(&marker).unwrap()).unwrap();
    let (name, stamp) = m["inputs"]
        .as_object()
        .and_then(|o| o.iter().next())
        .map(|(k, v)| (k.clone(), v.clone()))
        .expect("the marker stamps the inputs");
    let listed = |s: &serde_json::Value| {
        s["inputs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["name"] == name.as_str())
            .map(|i| i["sha256"].as_str().unwrap().to_string())
            .unwrap()
    };
    assert_eq!(listed(&summary(&dir)), stamp["sha256"].as_str().unwrap());
    // A recorded hash that matches no content: believed while the file is
    // unchanged (so it was not read again) ...
    edit_json(&marker, |m| {
        m["inputs"][&name]["sha256"] = "recorded".into()
    });
    run();
    assert_eq!(listed(&summary(&dir)), "recorded");
    // ... and replaced once the file's mtime changes.
    let f = fs::File::options()
        .write(true)
        .open(dir.join(&name))
        .unwrap();
    f.set_modified(SystemTime::UNIX_EPOCH + Duration::from_secs(7))
        .unwrap();
    run();
    assert_eq!(listed(&summary(&dir)), stamp["sha256"].as_str().unwrap());
}

/// A query shorter than one sampling period (here a worker that only
/// sleeps: no thread of it runs, so perf takes no sample) is a valid capture
/// with nothing in it: exit 0, the empty graph drawn with the advice, the
/// marker written. It used to be "failed: no samples to fold".
#[test]
fn a_capture_without_one_sample_is_valid_and_drawn_empty_with_advice() {
    if !util::require(util::perf_can_record(), "perf record (root)") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let mut worker = Command::new("sleep")
        .arg("120")
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let rd = tmp.path().join("result");
    util::capture_q1(
        tmp.path(),
        &rd.join("profiles/perf"),
        &mut worker,
        "--frequency 99 --start-timeout 30 --stop-timeout 20",
        &[],
        1,
        Duration::from_secs(60),
    );
    let q = capture_dir(&rd, 0, "q1");
    let out = run(&[], &[&rd]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let s = summary(&q);
    assert_eq!(s["samples"], 0, "{s:#}");
    assert!(s["render_refused"].is_null(), "{s:#}");
    for o in ["flamegraph.html", "flamegraph.svg", "stacks.folded"] {
        assert!(s["outputs"].to_string().contains(o), "{o}: {s:#}");
    }
    assert!(
        s["warnings"].to_string().contains("Raise --frequency"),
        "{s:#}"
    );
    let page = fs::read_to_string(q.join("flamegraph.html")).unwrap();
    assert!(page.contains("Raise --frequency"), "{page}");
    parse_svg(&fs::read_to_string(q.join("flamegraph.svg")).unwrap());
    assert_eq!(fs::read(q.join("stacks.folded")).unwrap(), b"");
    assert!(q.join(".postprocess-complete").exists());
    assert!(
        text(&out).contains("no sample in this capture"),
        "{}",
        text(&out)
    );
}

/// The `N load(s), M reuse(s)` of the symbol store's log line.
fn store_figures(stderr: &str) -> (u64, u64) {
    let line = stderr
        .lines()
        .find(|l| l.contains("symbol store:"))
        .unwrap_or_else(|| panic!("no symbol store line in:\n{stderr}"));
    let before = |word: &str| -> u64 {
        let at = line.find(word).unwrap_or_else(|| panic!("{line}"));
        let head = line[..at].trim_end();
        head[head.rfind(' ').map_or(0, |i| i + 1)..]
            .parse()
            .unwrap()
    };
    (before("load(s)"), before("reuse(s)"))
}

#[test]
fn captures_of_one_run_share_the_symbol_store_and_keep_their_order() {
    if !util::require(util::perf_available(), "perf") {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let one = t.path().join("one");
    util::copy_demo(&one);
    let out = jobprof()
        .args(["process", "-v"])
        .arg(&one)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let (loads_one, _) = store_figures(&util::stderr(&out));
    assert!(loads_one > 0, "{}", text(&out));
    // The same capture three times over: its files are loaded once.
    let three = t.path().join("three");
    util::copy_demo(&three);
    let worker = three.join("profiles/perf/worker_0");
    for q in ["q02", "q03"] {
        copy_tree(&worker.join("q01"), &worker.join(q));
    }
    let out = jobprof()
        .args(["process", "-v", "--jobs", "2"])
        .arg(&three)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let (loads, reuses) = store_figures(&util::stderr(&out));
    assert_eq!(loads, loads_one, "{}", text(&out));
    assert!(reuses > 0, "{}", text(&out));
    // Result lines in discovery order, whichever capture ended first.
    let lines: Vec<String> = util::stdout(&out)
        .lines()
        .filter(|l| l.contains("/worker_0/q0"))
        .map(str::to_string)
        .collect();
    assert_eq!(lines.len(), 3, "{}", text(&out));
    for (line, q) in lines.iter().zip(["q01", "q02", "q03"]) {
        assert!(
            line.contains(&format!("/worker_0/{q}: processed")),
            "{line}"
        );
    }
    let folded = |r: &Path, q: &str| fs::read(capture_dir(r, 0, q).join("stacks.folded")).unwrap();
    for q in ["q01", "q02", "q03"] {
        assert_eq!(folded(&three, q), folded(&one, "q01"), "{q}");
    }
}
