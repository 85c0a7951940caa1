//! `jobprof reprocess` on trees of result directories made from the demo
//! capture (fixtures/result_dir_demo, a real perf capture) and from the old
//! pipeline's layouts. The array job on a real cluster is in slurm_e2e.rs.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::util;

fn jobprof(args: &[&str], roots: &[&Path]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_jobprof"))
        .arg("reprocess")
        .args(args)
        .args(roots)
        .env_remove("SLURM_ARRAY_TASK_ID")
        .env_remove("SLURM_CPUS_PER_TASK")
        .output()
        .unwrap()
}

/// result_dir_N with the demo capture, as symbolized text only (no
/// perf.data: these tests need no perf); `old` gives it the old pipeline's
/// layout (capture-metadata.txt, perf.script.gz).
fn result_dir(root: &Path, name: &str, old: bool) -> PathBuf {
    let rd = root.join(name);
    let q = rd.join("profiles/perf/worker_0/q01");
    fs::create_dir_all(&q).unwrap();
    let demo = util::fixtures().join("result_dir_demo/profiles/perf/worker_0/q01");
    let zst = fs::read(demo.join("perf.script.zst")).unwrap();
    fs::write(
        q.join("perf-shards.tsv"),
        util::read(&demo.join("perf-shards.tsv")),
    )
    .unwrap();
    if old {
        let text = zstd::decode_all(&zst[..]).unwrap();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut gz, &text).unwrap();
        fs::write(q.join("perf.script.gz"), gz.finish().unwrap()).unwrap();
        fs::write(
            q.join("capture-metadata.txt"),
            util::old_pipeline_metadata(2, "unknown", "cpu-clock"),
        )
        .unwrap();
    } else {
        fs::write(q.join("perf.script.zst"), zst).unwrap();
        fs::write(
            q.join("capture.json"),
            util::read(&demo.join("capture.json")),
        )
        .unwrap();
    }
    q
}

#[test]
fn reprocess_finds_all_layouts_at_any_depth_and_a_second_run_does_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let new = result_dir(&root.join("a/b"), "result_dir_1", false);
    let old = result_dir(&root.join("a"), "result_dir_2", true);
    // Only stacks.folded left: drawn again.
    let folded_only = root.join("c/result_dir_3/profiles/perf/worker_1/q7");
    fs::create_dir_all(&folded_only).unwrap();
    fs::write(
        folded_only.join("stacks.folded"),
        "main;work;spin 40\nmain;idle 2\n",
    )
    .unwrap();
    // A refused capture: marked invalid by the old pipeline.
    let bad = result_dir(root, "result_dir_4", true);
    fs::write(
        bad.join("capture-metadata.txt"),
        util::old_pipeline_metadata(2, "unknown", "cpu-clock")
            .replace("capture_valid=1", "capture_valid=0\nreason=worker exited"),
    )
    .unwrap();
    // symfs/ trees are never walked into as result dirs.
    fs::create_dir_all(root.join("a/result_dir_2/profiles/perf/worker_0/symfs/result_dir_9"))
        .unwrap();

    let dry = jobprof(&["--dry-run"], &[root]);
    assert_eq!(dry.status.code(), Some(1), "{}", util::output_text(&dry));
    let s = String::from_utf8_lossy(&dry.stdout);
    assert!(s.contains("4 capture(s) in 4 result dir(s)"), "{s}");
    assert!(s.contains("worker exited"), "{s}");
    assert!(
        !new.join("stacks.folded").exists(),
        "--dry-run wrote outputs"
    );

    let out = jobprof(&["--jobs", "2"], &[root]);
    assert_eq!(out.status.code(), Some(1), "{}", util::output_text(&out));
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(s.contains("processed         3"), "{s}");
    assert!(s.contains("refused           1"), "{s}");
    assert!(
        s.contains(&format!("{}: capture-metadata.txt marks", bad.display())),
        "{s}"
    );
    // The old pipeline's capture gets jobprof's outputs in its jobprof/.
    let old_out = old.join("jobprof");
    for q in [&new, &old_out] {
        for f in [
            ".postprocess-complete",
            "stacks.folded",
            "flamegraph.svg",
            "flamegraph.html",
            "summary.json",
        ] {
            assert!(q.join(f).is_file(), "{}: {f} missing", q.display());
        }
    }
    assert_eq!(
        fs::read(new.join("stacks.folded")).unwrap(),
        fs::read(old_out.join("stacks.folded")).unwrap(),
        "the .gz and .zst texts fold alike"
    );
    assert!(old.join("perf.script.gz").is_file() && !old.join("perf.script.zst").exists());
    let svg = fs::read_to_string(folded_only.join("flamegraph.svg")).unwrap();
    assert!(svg.contains("spin"), "render-only dir not drawn");
    assert!(folded_only.join(".postprocess-complete").is_file());

    let again = jobprof(&[], &[root]);
    let s = String::from_utf8_lossy(&again.stdout);
    assert!(
        s.contains("processed         0") && s.contains("skipped           3"),
        "{s}"
    );
}

#[test]
fn reprocess_recompress_keeps_the_gz_and_replace_archives_deletes_it_last() {
    let tmp = tempfile::tempdir().unwrap();
    let q = result_dir(tmp.path(), "result_dir_1", true);
    let script_text = {
        let mut v = Vec::new();
        std::io::Read::read_to_end(
            &mut flate2::read::MultiGzDecoder::new(&util::read(&q.join("perf.script.gz"))[..]),
            &mut v,
        )
        .unwrap();
        v
    };
    let out = jobprof(&["--recompress"], &[tmp.path()]);
    assert_eq!(out.status.code(), Some(0), "{}", util::output_text(&out));
    assert!(q.join("perf.script.gz").is_file());
    // An old-pipeline capture: jobprof's files are in its jobprof/.
    let out_dir = q.join("jobprof");
    let zst = zstd::decode_all(&util::read(&out_dir.join("perf.script.zst"))[..]).unwrap();
    assert_eq!(zst, script_text, "perf.script.zst holds the same text");
    // Complete and recompressed: --recompress has nothing more to do.
    let out = jobprof(&["--recompress"], &[tmp.path()]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("skipped           1"),
        "{}",
        util::output_text(&out)
    );
    let out = jobprof(&["--replace-archives"], &[tmp.path()]);
    assert_eq!(out.status.code(), Some(0), "{}", util::output_text(&out));
    assert!(!q.join("perf.script.gz").exists());
    assert!(
        out_dir.join("perf.script.zst").is_file()
            && out_dir.join(".postprocess-complete").is_file()
    );
}

#[test]
fn reprocess_array_split_covers_every_capture_once_and_resumes() {
    let tmp = tempfile::tempdir().unwrap();
    let caps: Vec<PathBuf> = (0..5)
        .map(|i| result_dir(tmp.path(), &format!("result_dir_{i}"), i % 2 == 0))
        .collect();
    // A run killed half-way: a temporary file and no marker.
    fs::write(caps[1].join(".stacks.folded.abc123.tmp"), "partial").unwrap();
    let mut counts = vec![0; caps.len()];
    for i in 0..2 {
        let out = Command::new(env!("CARGO_BIN_EXE_jobprof"))
            .args(["reprocess", "--jobs", "1"])
            .arg(tmp.path())
            .env("SLURM_ARRAY_TASK_ID", (i + 10).to_string())
            .env("SLURM_ARRAY_TASK_MIN", "10")
            .env("SLURM_ARRAY_TASK_COUNT", "2")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", util::output_text(&out));
        let s = String::from_utf8_lossy(&out.stdout);
        assert!(s.contains(&format!("array task {i} of 2")), "{s}");
        for (n, c) in caps.iter().enumerate() {
            counts[n] += s.matches(&format!("{}: processed", c.display())).count();
        }
    }
    assert_eq!(counts, [1, 1, 1, 1, 1]);
    assert!(!caps[1].join(".stacks.folded.abc123.tmp").exists());
}

#[test]
fn reprocess_sbatch_prints_a_quoted_array_script() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("odd 'name'");
    result_dir(&root, "result_dir_1", true);
    let out = jobprof(
        &[
            "--sbatch",
            "--array-count",
            "3",
            "--partition",
            "cpu",
            "--time",
            "1h30m",
            "--recompress",
        ],
        &[&root],
    );
    assert_eq!(out.status.code(), Some(0), "{}", util::output_text(&out));
    let script = String::from_utf8_lossy(&out.stdout);
    for line in [
        "#SBATCH --array=0-2",
        "#SBATCH --partition=cpu",
        // The one duration parser; Slurm gets its own HH:MM:SS form.
        "#SBATCH --time=01:30:00",
        // How captures go to tasks, as docs/slurm.md says (issue 49): by a
        // hash of their path, not by position.
        "hashes to",
        "FNV-1a",
    ] {
        assert!(script.contains(line), "{script}");
    }
    assert!(!script.contains("th capture"), "{script}");
    let exec = script.lines().find(|l| l.starts_with("exec ")).unwrap();
    assert!(exec.contains("reprocess --recompress -- "), "{exec}");
    // bash reads the root back verbatim.
    let words = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "printf '%s\\n' {}",
            exec.trim_start_matches("exec ")
        ))
        .output()
        .unwrap();
    let words = String::from_utf8_lossy(&words.stdout);
    let canon = root.canonicalize().unwrap();
    assert_eq!(
        words.lines().last(),
        Some(canon.to_str().unwrap()),
        "{exec}"
    );
    let bad = jobprof(&["--sbatch", "--partition", "a b"], &[&root]);
    assert_eq!(bad.status.code(), Some(2), "{}", util::output_text(&bad));
}

#[test]
fn reprocess_passes_inline_and_min_symbolized_to_the_pipeline_and_the_array() {
    let tmp = tempfile::tempdir().unwrap();
    let rd = tmp.path().join("result_dir_demo");
    util::copy_demo(&rd);
    // Without its symfs/ the demo's user frames go unnamed: below 100%.
    fs::remove_dir_all(rd.join("profiles/perf/worker_0/symfs")).unwrap();
    let args = ["--no-inline", "--min-symbolized", "100"];
    let out = jobprof(
        &[&args[..], &["-v", "--symbolizer", "native"]].concat(),
        &[&rd],
    );
    assert_eq!(out.status.code(), Some(1), "{}", util::output_text(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("not rendered"));
    assert!(
        util::stderr(&out).contains("inline frames: none (--no-inline)"),
        "{}",
        util::output_text(&out)
    );
    let q = rd.join("profiles/perf/worker_0/q01");
    let summary: serde_json::Value =
        serde_json::from_slice(&util::read(&q.join("summary.json"))).unwrap();
    assert!(summary["render_refused"].is_string(), "{summary}");
    assert_eq!(summary["shards"][0]["inline"], false);
    // The array's tasks get the same options.
    let out = jobprof(
        &[
            &args[..],
            &["--sbatch", "--array-count", "2", "--zstd-level", "3"],
        ]
        .concat(),
        &[&rd],
    );
    assert_eq!(out.status.code(), Some(0), "{}", util::output_text(&out));
    let script = String::from_utf8_lossy(&out.stdout);
    let exec = script.lines().find(|l| l.starts_with("exec ")).unwrap();
    assert!(
        exec.contains("reprocess --no-inline --zstd-level=3 --min-symbolized=100 -- "),
        "{exec}"
    );
    // A bad percentage is refused before anything runs, --sbatch included.
    let out = jobprof(&["--sbatch", "--min-symbolized", "150"], &[&rd]);
    assert_eq!(out.status.code(), Some(2), "{}", util::output_text(&out));
}

/// An old-pipeline capture that kept only `stacks.folded` (cpu-clock
/// periods: ns) is drawn again with its counts named `ns`, on the line and
/// in the flamegraph, not `samples`.
#[test]
fn a_redrawn_folded_file_names_what_its_counts_are() {
    let tmp = tempfile::tempdir().unwrap();
    let q = tmp.path().join("result_dir_1/profiles/perf/worker_0/q1");
    fs::create_dir_all(&q).unwrap();
    fs::write(
        q.join("stacks.folded"),
        "main;work;spin 40000000\nmain;idle 2000000\n",
    )
    .unwrap();
    fs::write(
        q.join("capture-metadata.txt"),
        util::old_pipeline_metadata(1, "unknown", "cpu-clock"),
    )
    .unwrap();
    let out = jobprof(&[], &[tmp.path()]);
    let s = util::output_text(&out);
    assert!(s.contains("drawn from stacks.folded (42000000 ns)"), "{s}");
    let html = fs::read_to_string(q.join("flamegraph.html")).unwrap();
    // ns written as time (issue 58, item 4).
    assert!(html.contains("42.0 ms in "), "the page names ns as time");
    assert!(!html.contains("42,000,000 samples"), "ns called samples");
}
