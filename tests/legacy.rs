//! The old shell pipeline's real result directories
//! (`../shared/seed-captures`: `result_dir_4242` post-processed by the old
//! pipeline, fp, 3 shards, 2 queries; `result_dir_4243` raw, dwarf, one
//! shard published as `perf.data`): processed and reprocessed with both
//! symbolizers, from `perf.script.gz` when perf or the shards are gone,
//! refused by the old pipeline's own rule, the old files never touched, a
//! rerun a no-op, and the stacks the same as the old `stacks.folded`.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;

use crate::util::{self, jobprof, output_text};
use crate::util::{copy_seed, parse_folded, seeds};

mod symbol_files;

fn capture(rd: &Path, q: &str) -> PathBuf {
    rd.join("profiles/perf/worker_0").join(q)
}

/// Every file of `rd` outside jobprof's own outputs (`jobprof/`
/// subdirectories and the job views), with its content.
fn old_files(rd: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    fn walk(d: &Path, rd: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
        for e in fs::read_dir(d).unwrap().flatten() {
            let p = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            let t = e.file_type().unwrap();
            if t.is_dir() {
                if name != "jobprof" && name != "queries" {
                    walk(&p, rd, out);
                }
            } else if !(p.parent() == Some(&rd.join("profiles/perf"))
                && (name.starts_with("index.") || name.starts_with('.')))
            {
                out.insert(
                    p.strip_prefix(rd).unwrap().to_path_buf(),
                    fs::read(&p).unwrap(),
                );
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(rd, rd, &mut out);
    out
}

fn process(args: &[&str], dirs: &[&Path]) -> Output {
    jobprof()
        .arg("process")
        .args(dirs)
        .args(args)
        .output()
        .unwrap()
}

fn summary(q: &Path) -> serde_json::Value {
    util::summary(&q.join("jobprof"))
}

/// Stacks and their share of the total (percent).
fn shares(stacks: HashMap<String, u64>) -> HashMap<String, f64> {
    let total: u64 = stacks.values().sum();
    stacks
        .into_iter()
        .map(|(s, n)| (s, 100.0 * n as f64 / total as f64))
        .collect()
}

/// jobprof's folded stacks (folded with `--kernel`) in the old pipeline's
/// naming: no process-name root, unnamed frames `[unknown:<dso file
/// name>]`, kernel frames all unnamed (it had no kernel table; jobprof
/// names them when this machine runs the sampled kernel), `;` inside names
/// (there are none in these captures) left alone.
fn in_old_naming(text: &str) -> HashMap<String, u64> {
    let mut m = HashMap::new();
    for (stack, n) in parse_folded(text) {
        let frames: Vec<String> = stack
            .split(';')
            .skip(1)
            .map(|f| {
                if f.ends_with("_[k]") {
                    return "[unknown:[kernel.kallsyms]]".to_string();
                }
                match f.strip_prefix('[').and_then(|x| x.strip_suffix(']')) {
                    Some(dso) => format!("[unknown:{dso}]"),
                    None => f.to_string(),
                }
            })
            .collect();
        *m.entry(frames.join(";")).or_default() += n;
    }
    m
}

/// jobprof's stacks of capture `q`, folded again from the text it folded
/// (its archive, else the old pipeline's `perf.script.gz`) with kernel
/// frames marked `_[k]`, and libc's frames unnamed as the old pipeline
/// left them: it had no debug files, jobprof takes this host's by build id
/// (`libc_frames_of_old_captures_are_named_...` checks those names).
fn folded_with_kernel_marks(q: &Path) -> String {
    use std::io::Read;
    let archive = q.join("jobprof/perf.script.zst");
    let mut text = String::new();
    if archive.is_file() {
        zstd::Decoder::new(fs::File::open(&archive).unwrap())
            .unwrap()
            .read_to_string(&mut text)
            .unwrap();
    } else {
        flate2::read::GzDecoder::new(fs::File::open(q.join("perf.script.gz")).unwrap())
            .read_to_string(&mut text)
            .unwrap();
    }
    let unnamed: String = text
        .lines()
        .map(
            |l| match l.strip_suffix("(/usr/lib/x86_64-linux-gnu/libc.so.6)") {
                Some(rest) if l.starts_with('\t') => {
                    let addr = rest.split_whitespace().next().unwrap_or("0");
                    format!("\t{addr:>16} [unknown] (/usr/lib/x86_64-linux-gnu/libc.so.6)\n")
                }
                _ => format!("{l}\n"),
            },
        )
        .collect();
    // Beside the capture, never in it: the old files must stay as they were.
    let plain = tempfile::NamedTempFile::new().unwrap();
    fs::write(plain.path(), unnamed).unwrap();
    let out = jobprof()
        .args(["fold", "--kernel"])
        .arg(plain.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", output_text(&out));
    String::from_utf8(out.stdout).unwrap()
}

/// The stacks of jobprof's output and of the old `stacks.folded` are the
/// same, each with the same share within 0.5 points.
fn assert_same_stacks_as_old(q: &Path) {
    let old = shares(parse_folded(
        &fs::read_to_string(q.join("stacks.folded")).unwrap(),
    ));
    let new = shares(in_old_naming(&folded_with_kernel_marks(q)));
    let mut keys: Vec<&String> = old.keys().chain(new.keys()).collect();
    keys.sort();
    keys.dedup();
    for k in keys {
        let (a, b) = (old.get(k).copied(), new.get(k).copied());
        let close = matches!((a, b), (Some(a), Some(b)) if (a - b).abs() <= 0.5)
            || a.unwrap_or(0.0).max(b.unwrap_or(0.0)) < 0.5;
        assert!(
            close,
            "{}: stack {k}: old {a:?}%, jobprof {b:?}%",
            q.display()
        );
    }
}

/// The facts of `capture-metadata.txt` in summary.json.
fn assert_facts(q: &Path, call_graph: &str, shards: u64) {
    let s = summary(q);
    let old = &s["old_pipeline"];
    assert_eq!(s["layout"], "legacy", "{s:#}");
    assert_eq!(s["validated"], true);
    assert!(s["job_id"].is_null(), "slurm_job_id=unknown is no job id");
    assert_eq!(old["slurm_job_id"], "unknown");
    assert_eq!(old["event"], "cpu-clock");
    assert_eq!(old["frequency"], "499");
    assert_eq!(old["call_graph"], call_graph);
    assert_eq!(old["sample_loss"], "0%");
    assert_eq!(old["shard_count"], shards);
    assert_eq!(old["worker_exe"], "/opt/presto/bin/presto_server");
    assert_eq!(
        old["phases"],
        serde_json::json!(["start", "stop", "queued", "publish_start", "published"])
    );
    assert_eq!(s["shards"].as_array().unwrap().len() as u64, shards);
    assert!(s["samples"].as_u64().unwrap() > 500, "{s:#}");
}

#[test]
fn old_result_dirs_process_and_reprocess_with_both_symbolizers_untouched_and_a_rerun_does_nothing()
{
    let Some(seeds) = seeds() else { return };
    if !util::require(util::perf_available(), "perf") {
        return;
    }
    let run = |cmd: &str, symbolizer: &str, dirs: &[&Path]| {
        jobprof()
            .args([cmd, "--symbolizer", symbolizer])
            .args(dirs)
            .output()
            .unwrap()
    };
    for (cmd, symbolizer) in [
        ("process", "native"),
        ("process", "perf"),
        ("reprocess", "native"),
        ("reprocess", "perf"),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let a = copy_seed(&seeds, "result_dir_4242", tmp.path());
        let b = copy_seed(&seeds, "result_dir_4243", tmp.path());
        let (before_a, before_b) = (old_files(&a), old_files(&b));
        let out = run(cmd, symbolizer, &[&a, &b]);
        assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
        for q in ["Q1_iter1", "Q2_iter1"] {
            let q = capture(&a, q);
            assert_facts(&q, "fp", 3);
            assert_same_stacks_as_old(&q);
            assert!(q.join("jobprof/flamegraph.html").is_file());
        }
        let q5 = capture(&b, "Q5_iter1");
        assert_facts(&q5, "dwarf,8192", 1);
        assert_eq!(summary(&q5)["shards"][0]["data_file"], "perf.data");
        assert_eq!(old_files(&a), before_a, "the old pipeline's files changed");
        assert_eq!(old_files(&b), before_b, "the old pipeline's files changed");
        // The job page carries the old pipeline's facts.
        let page = fs::read_to_string(a.join("profiles/perf/index.html")).unwrap();
        for fact in [
            "499 Hz",
            "old shell pipeline",
            "sample loss 0%",
            "worker exe",
        ] {
            assert!(page.contains(fact), "job page lacks {fact}");
        }
        // A rerun is a no-op: every capture skipped, nothing rewritten.
        let outputs = fs::read(capture(&a, "Q1_iter1").join("jobprof/summary.json")).unwrap();
        let again = run(cmd, symbolizer, &[&a, &b]);
        assert_eq!(again.status.code(), Some(0), "{}", output_text(&again));
        let text = String::from_utf8_lossy(&again.stdout);
        let skipped = if cmd == "process" {
            text.matches(": skipped").count() == 3
        } else {
            text.contains("processed         0") && text.contains("skipped           3")
        };
        assert!(skipped, "{cmd} {symbolizer}: {}", output_text(&again));
        assert_eq!(
            fs::read(capture(&a, "Q1_iter1").join("jobprof/summary.json")).unwrap(),
            outputs
        );
        assert_eq!(old_files(&a), before_a);
    }
}

#[test]
fn old_result_dir_without_perf_and_without_its_shards_folds_its_perf_script_gz() {
    let Some(seeds) = seeds() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let a = copy_seed(&seeds, "result_dir_4242", tmp.path());
    let no_perf = tempfile::tempdir().unwrap();
    // Without perf on PATH: the native symbolizer reads the shards.
    let out = jobprof()
        .arg("process")
        .arg(&a)
        .env("PATH", no_perf.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    assert_same_stacks_as_old(&capture(&a, "Q1_iter1"));
    // Without the shards (and without perf): perf.script.gz is folded.
    let b = tmp.path().join("noshards");
    fs::create_dir(&b).unwrap();
    let b = copy_seed(&seeds, "result_dir_4242", &b);
    for q in ["Q1_iter1", "Q2_iter1"] {
        for n in [
            "perf.data.part000",
            "perf.data.part001",
            "perf.data.part002",
        ] {
            fs::remove_file(capture(&b, q).join(n)).unwrap();
        }
    }
    let before = old_files(&b);
    let out = jobprof()
        .args(["reprocess", "-v"])
        .arg(&b)
        .env("PATH", no_perf.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    for q in ["Q1_iter1", "Q2_iter1"] {
        let q = capture(&b, q);
        assert_eq!(summary(&q)["symbolized_from"], "perf.script.gz");
        // Its postprocess-metadata.txt says the text has inline frames.
        assert_eq!(summary(&q)["shards"][0]["inline"], true);
        assert!(util::stderr(&out).contains("postprocess_inline_expansion=enabled"));
        assert_facts(&q, "fp", 3);
        assert_same_stacks_as_old(&q);
    }
    assert_eq!(old_files(&b), before, "the old pipeline's files changed");
    // One read of perf.script.gz feeds the fold, the report and pprof.
    let all = jobprof()
        .args(["process", "-v", "--force", "--formats", "all"])
        .arg(&b)
        .env("PATH", no_perf.path())
        .output()
        .unwrap();
    assert_eq!(all.status.code(), Some(0), "{}", output_text(&all));
    let log = util::stderr(&all);
    assert_eq!(
        log.matches("profile.pb.gz: from the samples as they were read")
            .count(),
        2,
        "{log}"
    );
    for q in ["Q1_iter1", "Q2_iter1"] {
        let q = capture(&b, q);
        assert_same_stacks_as_old(&q);
        let report = fs::read_to_string(q.join("jobprof/report.txt")).unwrap();
        assert!(report.contains("presto_server"), "{report}");
    }
    let again = jobprof()
        .arg("reprocess")
        .arg(&b)
        .env("PATH", no_perf.path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&again.stdout);
    assert!(
        text.contains("processed         0") && text.contains("skipped           2"),
        "{}",
        output_text(&again)
    );
}

/// A change to a capture's metadata text.
type Edit = Box<dyn Fn(&str) -> String>;

/// Rewrites the capture's metadata (a copy) with `edit`.
fn edit_metadata(q: &Path, edit: impl Fn(&str) -> String) {
    let p = q.join("capture-metadata.txt");
    let text = fs::read_to_string(&p).unwrap();
    let mut perm = fs::metadata(&p).unwrap().permissions();
    #[allow(clippy::permissions_set_readonly_false)]
    perm.set_readonly(false);
    fs::set_permissions(&p, perm).unwrap();
    fs::write(&p, edit(&text)).unwrap();
}

#[test]
fn kernel_frames_its_report_left_as_addresses_are_named_only_on_a_node_running_that_kernel() {
    let Some(seeds) = seeds() else { return };
    if !util::require(util::perf_available(), "perf") {
        return;
    }
    let q1 = capture(&seeds.join("result_dir_4242"), "Q1_iter1");
    let ids = fs::read_to_string(q1.join("build-ids.txt")).unwrap();
    let sampled = ids
        .lines()
        .find_map(|l| l.strip_suffix(" [kernel.kallsyms]"));
    let running = jobprof::symbolize::kernel::running_kernel_build_id();
    // A property of the machine, not a missing tool: on the seed's kernel
    // its frames are named from this machine's core table; on any other,
    // they must stay addresses (never named from the wrong kernel), and
    // the summary says why.
    let same_kernel = sampled.is_some() && running.as_deref() == sampled;
    eprintln!("seed's kernel {sampled:?}, this machine's {running:?}");
    let raw = |report: &str| report.lines().filter(|l| l.contains("[k] 0x")).count();
    let old = fs::read_to_string(q1.join("perf-report.txt")).unwrap();
    assert!(raw(&old) > 0, "the old report names kernel frames already");
    let mut folded = Vec::new();
    for symbolizer in ["native", "perf"] {
        let tmp = tempfile::tempdir().unwrap();
        let a = copy_seed(&seeds, "result_dir_4242", tmp.path());
        let out = process(&["--symbolizer", symbolizer], &[&a]);
        assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
        let q = capture(&a, "Q1_iter1");
        let from = summary(&q)["kernel_symbols"].as_str().unwrap().to_string();
        let report = fs::read_to_string(q.join("jobprof/report.txt")).unwrap();
        if same_kernel {
            assert!(
                from.starts_with("/proc/kallsyms, core kernel only"),
                "{from}"
            );
            assert_eq!(raw(&report), 0, "{symbolizer}: {report}");
            assert!(report.contains("[k] finish_task_switch"), "{report}");
        } else {
            assert!(
                from.contains("is not this machine's") || from.contains("cannot be read"),
                "{symbolizer}: {from}"
            );
            assert!(from.contains("kernel frames stay unnamed"), "{from}");
            // Every kernel frame stays unnamed (an address or `[unknown]`).
            let named = report
                .lines()
                .filter(|l| l.contains("[k] ") && !l.contains("[k] 0x"))
                .filter(|l| !l.contains("[k] [unknown]"))
                .count();
            assert!(
                report.contains("[k] "),
                "{symbolizer}: no kernel frame: {report}"
            );
            assert_eq!(named, 0, "{symbolizer}: kernel frames named: {report}");
        }
        folded.push(fs::read_to_string(q.join("jobprof/stacks.folded")).unwrap());
    }
    assert_eq!(
        folded[0], folded[1],
        "native and perf script name the kernel differently"
    );
}

#[test]
fn old_result_dirs_are_refused_by_the_old_rule_with_its_reasons() {
    let Some(seeds) = seeds() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let a = copy_seed(&seeds, "result_dir_4242", tmp.path());
    let q1 = capture(&a, "Q1_iter1");
    let q2 = capture(&a, "Q2_iter1");
    let cases: Vec<(Edit, &str)> = vec![
        (
            Box::new(|t: &str| {
                let start = t.split("capture_phase=stop").next().unwrap();
                format!("{start}capture_phase=attach_failed\ntimestamp_utc=x\n")
            }),
            "phase attach_failed after start",
        ),
        (
            Box::new(|t: &str| t.replace("capture_valid=1", "capture_valid=0")),
            "capture_valid=0 in phase queued",
        ),
        (
            Box::new(|t: &str| {
                t.replace(
                    "perf_control_handshake=enabled",
                    "perf_control_handshake=timeout",
                )
            }),
            "perf_control_handshake=timeout",
        ),
        (
            Box::new(|t: &str| t.split("capture_phase=published").next().unwrap().into()),
            "misses phase(s) published",
        ),
        (
            Box::new(|t: &str| t.replace("perf_data_shards=3", "perf_data_shards=2")),
            "perf-shards.tsv lists 3 shard(s)",
        ),
    ];
    let original = fs::read_to_string(q1.join("capture-metadata.txt")).unwrap();
    for (edit, reason) in cases {
        edit_metadata(&q1, |_| edit(&original));
        let out = process(&["--query", "Q1_iter1"], &[&a]);
        // The one capture asked for refused: nothing could be done, 2.
        assert_eq!(out.status.code(), Some(2), "{}", output_text(&out));
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains("Q1_iter1: refused") && text.contains(reason),
            "expected `{reason}`: {}",
            output_text(&out)
        );
        assert!(
            !q1.join("jobprof").exists(),
            "a refused capture got outputs"
        );
    }
    // A shard that did not stop cleanly, and a data file too few.
    let tsv = q2.join("perf-shards.tsv");
    let rows = fs::read_to_string(&tsv).unwrap();
    fs::remove_file(&tsv).unwrap();
    fs::write(
        &tsv,
        rows.replacen("\t0\tperf.data.part001", "\t1\tperf.data.part001", 1),
    )
    .unwrap();
    let out = process(&["--query", "Q2_iter1"], &[&a]);
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .contains("shard 1 (phase stopped) ended with exit status 1"),
        "{}",
        output_text(&out)
    );
    fs::remove_file(&tsv).unwrap();
    fs::write(&tsv, &rows).unwrap();
    fs::remove_file(q2.join("perf.data.part002")).unwrap();
    let out = process(&["--query", "Q2_iter1"], &[&a]);
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .contains("the capture holds perf.data.part000, perf.data.part001"),
        "{}",
        output_text(&out)
    );
}

#[test]
fn every_capture_is_drawn_with_the_symbol_figures_and_min_symbolized_refuses_only_when_given() {
    let Some(seeds) = seeds() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let a = copy_seed(&seeds, "result_dir_4242", tmp.path());
    // Without the worker's binary none of its frames are named: almost
    // no named leaf, yet every stack says in which DSO its time went.
    fs::remove_dir_all(a.join("profiles/perf/worker_0/symfs")).unwrap();
    let out = process(&["--symbolizer", "native"], &[&a]);
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let q = capture(&a, "Q1_iter1");
    let s = summary(&q);
    assert!(s["symbolized_ratio"].as_f64().unwrap() < 0.05, "{s:#}");
    let warning = s["symbol_warning"].as_str().expect("symbol_warning");
    assert!(
        warning.contains("few symbols") && warning.contains("presto_server"),
        "{warning}"
    );
    assert!(s["render_refused"].is_null());
    let page = fs::read_to_string(q.join("jobprof/flamegraph.html")).unwrap();
    assert!(page.contains("named leaves") && page.contains("warning: few symbols"));
    let index = fs::read_to_string(a.join("profiles/perf/index.html")).unwrap();
    assert!(
        index.contains("few symbols"),
        "the job page shows the warning"
    );
    assert!(util::stderr(&out).contains("warning: few symbols"));
    // Given, --min-symbolized refuses to draw below it.
    let out = process(&["--force", "--min-symbolized", "5"], &[&a]);
    assert_eq!(out.status.code(), Some(1), "{}", output_text(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("not rendered"));
    assert!(summary(&q)["render_refused"].is_string());
}

/// `perf buildid-list` of the shards (each line once).
fn perf_buildid_list(q: &Path, hits: bool) -> std::collections::BTreeSet<String> {
    let mut out = std::collections::BTreeSet::new();
    for e in fs::read_dir(q).unwrap().flatten() {
        let n = e.file_name().to_string_lossy().into_owned();
        if n == "perf.data" || n.starts_with("perf.data.part") {
            let mut c = std::process::Command::new("perf");
            c.args(["buildid-list", "-i"]).arg(e.path());
            if hits {
                c.arg("--with-hits");
            }
            let o = c.output().unwrap();
            out.extend(String::from_utf8_lossy(&o.stdout).lines().map(String::from));
        }
    }
    out
}

#[test]
fn build_ids_of_the_dsos_samples_hit_as_perf_buildid_list_prints_them() {
    let Some(seeds) = seeds() else { return };
    if !util::require(util::perf_available(), "perf") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let a = copy_seed(&seeds, "result_dir_4242", tmp.path());
    let b = copy_seed(&seeds, "result_dir_4243", tmp.path());
    let out = process(&[], &[&a, &b]);
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    for q in [capture(&a, "Q1_iter1"), capture(&b, "Q5_iter1")] {
        let text = fs::read_to_string(q.join("jobprof/build-ids.txt")).unwrap();
        let ours: std::collections::BTreeSet<String> = text.lines().map(String::from).collect();
        // Every DSO a sampled address is in (perf's --with-hits), and only
        // DSOs of the header's table (what `perf buildid-list` prints):
        // here also libc, whose frames are in every call chain, but not
        // the vDSO or the dynamic loader no sample touched.
        let hits = perf_buildid_list(&q, true);
        let all = perf_buildid_list(&q, false);
        assert!(ours.is_superset(&hits), "{ours:?} lacks some of {hits:?}");
        assert!(ours.is_subset(&all), "{ours:?} not in {all:?}");
        assert!(
            text.contains("/usr/lib/x86_64-linux-gnu/libc.so.6\n"),
            "{text}"
        );
        assert!(
            !text.contains("[vdso]") && !text.contains("ld-linux"),
            "{text}"
        );
        let s = summary(&q);
        let listed: Vec<String> = s["build_ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| {
                format!(
                    "{} {}",
                    b["build_id"].as_str().unwrap(),
                    b["path"].as_str().unwrap()
                )
            })
            .collect();
        assert_eq!(listed, text.lines().collect::<Vec<_>>());
    }
}

#[test]
fn inline_frames_by_default_natively_and_perf_script_only_with_inline() {
    let Some(seeds) = seeds() else { return };
    if !util::require(util::perf_available(), "perf") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let b = copy_seed(&seeds, "result_dir_4243", tmp.path());
    let q = capture(&b, "Q5_iter1");
    let cases: [(&[&str], bool, &str); 5] = [
        (&[], true, "inline frames: in every shard"),
        (&["--inline"], true, "inline frames: in every shard"),
        (&["--no-inline"], false, "inline frames: none (--no-inline)"),
        (
            &["--symbolizer", "perf"],
            false,
            "inline frames: none (perf script expands them only with --inline)",
        ),
        (
            &["--symbolizer", "perf", "--inline"],
            true,
            "inline frames: in every shard",
        ),
    ];
    let mut folded = Vec::new();
    for (args, inline, log) in cases {
        let out = process(&[&["--force", "-v"], args].concat(), &[&b]);
        assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
        assert!(
            util::stderr(&out).contains(log),
            "{args:?}: {}",
            output_text(&out)
        );
        assert_eq!(summary(&q)["shards"][0]["inline"], inline, "{args:?}");
        folded.push(fs::read_to_string(q.join("jobprof/stacks.folded")).unwrap());
    }
    // The native default is `--inline`; without inline frames both
    // symbolizers agree (how native inline frames compare with `perf
    // script --inline` is tests/native.rs's business).
    assert_eq!(folded[0], folded[1], "native default differs from --inline");
    assert_eq!(
        folded[2], folded[3],
        "--no-inline native and perf script differ"
    );
}

#[test]
fn jobprof_record_takes_the_old_samplers_event_cpu_clock_u() {
    if !util::require(util::perf_can_record(), "perf record") {
        return;
    }
    let Some(exe) = util::program(
        "legacy_demo_worker",
        "fixtures/src/demo_worker.c",
        &["-O2", "-g"],
    ) else {
        util::require(false, "gcc (to build fixtures/src/demo_worker.c)");
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let mut worker = std::process::Command::new(&exe)
        .args(["60", "4"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let rd = tmp.path().join("result");
    // The old sampler's event and stack size, at a frequency that gives a
    // few hundred samples in 2 s.
    util::capture_q1(
        tmp.path(),
        &rd.join("profiles/perf"),
        &mut worker,
        "--event cpu-clock:u --frequency 499 --call-graph dwarf,8192 --start-timeout 30 \
         --stop-timeout 20",
        &[],
        2,
        std::time::Duration::from_secs(60),
    );
    let q = rd.join("profiles/perf/worker_0/q1");
    let cap: serde_json::Value =
        serde_json::from_slice(&util::read(&q.join("capture.json"))).unwrap();
    assert_eq!(cap["event"], "cpu-clock:u");
    let out = process(&[], &[&rd]);
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let s: serde_json::Value =
        serde_json::from_slice(&util::read(&q.join("summary.json"))).unwrap();
    assert_eq!(s["event"], "cpu-clock:u", "{s:#}");
    assert!(s["samples"].as_u64().unwrap() > 50, "{s:#}");
    // `:u`: user space only, no kernel frame anywhere.
    let folded = fs::read_to_string(q.join("stacks.folded")).unwrap();
    assert!(!folded.contains("kernel.kallsyms"), "{folded}");
    assert!(folded.contains("demo_"), "{folded}");
}
