//! Real engines named exactly as perf names them. Four engines from PyPI
//! (target/engines-venv and target/velox-venv, pinned below): polars (Rust,
//! rayon, v0-mangled symbols, jemalloc), DataFusion (Rust, tokio, `.dynsym`
//! only), pyarrow (Arrow C++ compute and Acero) and Velox (pyvelox: a
//! 274 MB C++ library with only `.dynsym`, 214,000 symbols, folly thread
//! pools), each running 4 queries on a 4-thread pool
//! (tests/engines/engine_*.py), every query captured by the real
//! `jobprof-record` sidecar with `--call-graph dwarf` and with frame
//! pointers. `jobprof process` on each capture, inline and `--no-inline`,
//! must give the stacks the node's own `perf script` gives over the same
//! perf.data and snapshot (`--symfs`, `--kallsyms`), folded by the same
//! folder, on >= 99.5% of the weight per engine, call graph and query,
//! compared on the user-space part of each stack (the run of kernel frames
//! at the leaf end cut from both); and no address may be put in another
//! library than perf puts it. Velox is compared `--no-inline` only: `perf
//! script --inline` hangs on its dwarf captures (perf waits on its
//! `addr2line` pipe; 5 minutes for one query's shard were not enough).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use crate::util::{self, jobprof, output_text, require};

const QUERIES: [&str; 4] = ["q1", "q2", "q3", "q4"];

/// The least share of a query's weight on identical stacks.
const AGREEMENT: f64 = 0.995;

/// Pinned (keep in step with .ci/run): the agreement is measured on these
/// builds (their symbol tables, mangling schemes and unwind tables); a new
/// release is a new measurement, not a drop-in.
const PINS: &[(&str, &str, &str)] = &[
    ("polars", "polars", "2.1.0"),
    ("datafusion", "datafusion", "55.0.0"),
    ("pyarrow", "pyarrow", "26.0.1"),
];

/// Velox's own venv (keep in step with .ci/run): pyvelox 0.2.0 links
/// `libarrow_python.so.1900`, so it needs pyarrow 19 exactly, beside the
/// other engines' pyarrow 26.
const VELOX_PINS: &[(&str, &str, &str)] = &[
    ("pyvelox", "pyvelox", "0.2.0"),
    ("pyarrow", "pyarrow", "19.0.1"),
];

/// The Python with `engine` installed.
fn python(engine: &str) -> Option<PathBuf> {
    static PY: OnceLock<Option<PathBuf>> = OnceLock::new();
    static VELOX: OnceLock<Option<PathBuf>> = OnceLock::new();
    let (cell, venv, pins) = match engine {
        "velox" => (&VELOX, "velox-venv", VELOX_PINS),
        _ => (&PY, "engines-venv", PINS),
    };
    cell.get_or_init(|| {
        if !require(
            util::perf_can_record(),
            "perf that can record, for tests/engines.rs",
        ) {
            return None;
        }
        util::pinned_venv(venv, pins)
    })
    .clone()
}

/// One engine's 4 queries captured with one call graph:
/// `<root>/worker_0/qN`, with the worker's `symfs/` and `kallsyms`.
struct Captured {
    _keep: tempfile::TempDir,
    root: PathBuf,
}

impl Captured {
    fn worker(&self) -> PathBuf {
        self.root.join("worker_0")
    }
}

fn capture(py: &Path, engine: &str, call_graph: &str) -> Captured {
    let keep = tempfile::tempdir().unwrap();
    let root = keep.path().join("result");
    // JOBPROF_TEST_ENGINE_WINDOW=SECONDS: longer windows (more samples,
    // rarer stacks met) when working on the agreement itself.
    let window = std::env::var("JOBPROF_TEST_ENGINE_WINDOW").unwrap_or_else(|_| "0.3".into());
    // Short windows at 499 Hz: perf script --inline asks addr2line about
    // every distinct address, about a second each in a large library.
    util::record_python(
        py,
        &format!("tests/engines/engine_{engine}.py"),
        &[&window],
        &root,
        &[
            "--call-graph",
            call_graph,
            "--frequency",
            "499",
            "--start-timeout",
            "120",
            "--stop-timeout",
            "60",
        ],
        &[],
    );
    // JOBPROF_TEST_ENGINE_KEEP=DIR copies the capture there (to study the
    // differences with perf script by hand).
    if let Some(dir) = std::env::var_os("JOBPROF_TEST_ENGINE_KEEP") {
        util::copy_tree(
            &root,
            &Path::new(&dir).join(format!("{engine}-{call_graph}")),
        );
    }
    Captured { _keep: keep, root }
}

/// `jobprof process` on a copy of the capture under `tmp`, inline or not;
/// the copy's worker directory.
fn process(c: &Captured, tmp: &Path, inline: bool) -> PathBuf {
    let dst = tmp.join(if inline { "inline" } else { "no-inline" });
    util::copy_tree(&c.root, &dst);
    let out = jobprof()
        .arg("process")
        .arg(&dst)
        .args(["--formats", "folded,summary", "--min-symbolized", "0"])
        .arg("--no-cache")
        .args((!inline).then_some("--no-inline"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    dst.join("worker_0")
}

/// The node's own `perf script` over query `q`'s shards with the
/// capture's snapshot: its text.
fn perf_script(c: &Captured, q: &str, inline: bool) -> String {
    let w = c.worker();
    let mut text = String::new();
    for shard in util::data_files(&w.join(q)) {
        let out = Command::new("perf")
            .args(["script", "-f", "--symfs"])
            .arg(w.join("symfs"))
            .arg("--kallsyms")
            .arg(w.join("kallsyms"))
            .arg(if inline { "--inline" } else { "--no-inline" })
            .arg("-i")
            .arg(&shard)
            .output()
            .unwrap();
        assert!(out.status.success(), "perf script: {}", output_text(&out));
        text.push_str(&String::from_utf8_lossy(&out.stdout));
    }
    text
}

/// `text` folded by `jobprof fold`.
fn fold(text: &str, tmp: &Path) -> HashMap<String, u64> {
    let input = tmp.join("perf.txt");
    fs::write(&input, text).unwrap();
    util::fold_file(&input, &tmp.join("perf.folded"))
}

/// The names of the capture's kernel symbol table.
fn kernel_names(c: &Captured) -> HashSet<String> {
    fs::read_to_string(c.worker().join("kallsyms"))
        .unwrap()
        .lines()
        .filter_map(|l| l.split_whitespace().nth(2).map(str::to_string))
        .collect()
}

/// The user-space part of each stack: the run of kernel frames at the leaf
/// end cut (only that run: `start_thread`, `memcpy` and `memset` are
/// kernel names too).
fn user_part(stacks: &HashMap<String, u64>, kernel: &HashSet<String>) -> HashMap<String, u64> {
    let mut out = HashMap::new();
    for (s, n) in stacks {
        let mut frames: Vec<&str> = s.split(';').collect();
        while frames.len() > 1 && kernel.contains(*frames.last().unwrap()) {
            frames.pop();
        }
        *out.entry(frames.join(";")).or_default() += n;
    }
    out
}

/// Address to library of every frame line of `perf script` text
/// (`\tADDR SYMBOL (LIBRARY)`).
fn libraries(text: &str) -> HashMap<String, String> {
    let mut out = HashMap::new();
    for l in text.lines().filter(|l| l.starts_with('\t')) {
        let l = l.trim();
        let (Some((addr, _)), Some(open)) = (l.split_once(' '), l.rfind(" (")) else {
            continue;
        };
        out.insert(addr.to_string(), l[open + 2..].trim_end_matches(')').into());
    }
    out
}

/// Addresses `ours` puts in another library than `theirs` does.
fn wrong_library(ours: &str, theirs: &str) -> Vec<String> {
    let theirs = libraries(theirs);
    let mut wrong: Vec<String> = libraries(ours)
        .into_iter()
        .filter_map(|(a, lib)| {
            let t = theirs.get(&a)?;
            (*t != lib).then(|| format!("{a}: ours {lib}, perf {t}"))
        })
        .collect();
    wrong.sort();
    wrong
}

/// The stacks of one side that the other lacks, heaviest first.
fn differing(a: &HashMap<String, u64>, b: &HashMap<String, u64>) -> Vec<(u64, String)> {
    let mut d: Vec<(u64, String)> = a
        .iter()
        .filter(|(s, n)| b.get(*s) != Some(n))
        .map(|(s, n)| (n - (*n).min(b.get(s).copied().unwrap_or(0)), s.clone()))
        .collect();
    d.sort_by(|x, y| y.cmp(x));
    d.truncate(5);
    d
}

/// One query in one mode: the agreement, and what failed (empty when
/// nothing did).
fn compare(c: &Captured, ours: &Path, q: &str, inline: bool) -> (f64, String) {
    let tmp = tempfile::tempdir().unwrap();
    let theirs_text = perf_script(c, q, inline);
    let kernel = kernel_names(c);
    let theirs = user_part(&fold(&theirs_text, tmp.path()), &kernel);
    let ours_stacks = user_part(&util::folded(&ours.join(q).join("stacks.folded")), &kernel);
    let a = util::agreement(&ours_stacks, &theirs);
    let archive = zstd::decode_all(&util::read(&ours.join(q).join("perf.script.zst"))[..]).unwrap();
    let wrong = wrong_library(&String::from_utf8_lossy(&archive), &theirs_text);
    let mut failed = String::new();
    let (total, perf_total) = (
        ours_stacks.values().sum::<u64>(),
        theirs.values().sum::<u64>(),
    );
    if total == 0 || total != perf_total {
        failed += &format!("{q}: weight {total}, perf's {perf_total}\n");
    }
    if a < AGREEMENT {
        failed += &format!(
            "{q}: agreement {:.2}%; ours: {:#?}\nperf's: {:#?}\n",
            100.0 * a,
            differing(&ours_stacks, &theirs),
            differing(&theirs, &ours_stacks)
        );
    }
    if !wrong.is_empty() {
        failed += &format!("{q}: frames in the wrong library: {wrong:#?}\n");
    }
    (a, failed)
}

/// Captures `engine` with `call_graph`, compares every query inline and
/// `--no-inline`, prints the table row and fails with every difference.
fn check(engine: &str, call_graph: &str) {
    check_modes(engine, call_graph, &[false, true]);
}

/// [`check`] in the modes `inlines` (`true`: with inline frames).
fn check_modes(engine: &str, call_graph: &str, inlines: &[bool]) {
    let Some(py) = python(engine) else { return };
    let c = capture(&py, engine, call_graph);
    let tmp = tempfile::tempdir().unwrap();
    let mut failed = String::new();
    let mut row = BTreeMap::new();
    for &inline in inlines {
        let ours = process(&c, tmp.path(), inline);
        for q in QUERIES {
            let (a, f) = compare(&c, &ours, q, inline);
            row.insert((inline, q), a);
            failed += &f;
        }
    }
    let cells: Vec<String> = row
        .iter()
        .map(|((inline, q), a)| {
            let mode = if *inline { "inline" } else { "no-inline" };
            format!("{q} {mode} {:.2}%", 100.0 * a)
        })
        .collect();
    eprintln!("engines: {engine}, {call_graph}: {}", cells.join(", "));
    assert!(failed.is_empty(), "{engine}, {call_graph}:\n{failed}");
}

#[test]
fn polars_dwarf_names_what_perf_script_names() {
    check("polars", "dwarf");
}

#[test]
fn polars_fp_names_what_perf_script_names() {
    check("polars", "fp");
}

#[test]
fn datafusion_dwarf_names_what_perf_script_names() {
    check("datafusion", "dwarf");
}

#[test]
fn datafusion_fp_names_what_perf_script_names() {
    check("datafusion", "fp");
}

#[test]
fn pyarrow_dwarf_names_what_perf_script_names() {
    check("pyarrow", "dwarf");
}

#[test]
fn pyarrow_fp_names_what_perf_script_names() {
    check("pyarrow", "fp");
}

#[test]
fn velox_dwarf_names_what_perf_script_names() {
    check_modes("velox", "dwarf", &[false]);
}

#[test]
fn velox_fp_names_what_perf_script_names() {
    check_modes("velox", "fp", &[false]);
}
