//! The native symbolizer against `perf script`, on real captures: a
//! dynamically linked C worker (tests/programs/libc_worker.c: its own
//! functions, libc, system calls) recorded by the real capture sidecar with
//! frame pointers and with `--call-graph dwarf`, and a Rust worker
//! (tests/programs/rust_worker.rs, no frame pointers) with
//! `--call-graph dwarf`.
//! The reference is `perf script` run the way `jobprof process` runs it
//! (`-f --symfs <capture symfs> --no-inline`, plus `--kallsyms` with the
//! kernel symbol snapshot), folded by `jobprof fold`; native output must put
//! at least 99.5% of the sample weight on identical stacks.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use crate::util::{self, jobprof, output_text as text};
use crate::util::{folded, parse_folded, summary};

mod damaged;
mod inline;
mod split;

/// One recorded result directory and the capture directory in it.
struct Capture {
    _keep: tempfile::TempDir,
    result_dir: PathBuf,
}

impl Capture {
    fn capture_dir(&self) -> PathBuf {
        self.result_dir.join("profiles/perf/worker_0/q1")
    }
}

static FP: OnceLock<Option<Capture>> = OnceLock::new();
static DWARF: OnceLock<Option<Capture>> = OnceLock::new();
static RUST_DWARF: OnceLock<Option<Capture>> = OnceLock::new();
static REALIGN_DWARF: OnceLock<Option<Capture>> = OnceLock::new();
static BAD_FP: OnceLock<Option<Capture>> = OnceLock::new();

fn fp() -> Option<&'static Capture> {
    FP.get_or_init(|| make("fp", 3)).as_ref()
}

fn dwarf() -> Option<&'static Capture> {
    DWARF.get_or_init(|| make("dwarf,4096", 2)).as_ref()
}

fn rust_dwarf() -> Option<&'static Capture> {
    RUST_DWARF
        .get_or_init(|| make_with(Worker::Rust, "dwarf,8192", 2))
        .as_ref()
}

fn realign_dwarf() -> Option<&'static Capture> {
    REALIGN_DWARF
        .get_or_init(|| make_with(Worker::Realign, "dwarf,8192", 2))
        .as_ref()
}

fn bad_fp() -> Option<&'static Capture> {
    BAD_FP
        .get_or_init(|| make_with(Worker::BadFp, "fp", 2))
        .as_ref()
}

/// The program recorded.
#[derive(Clone, Copy)]
enum Worker {
    /// tests/programs/libc_worker.c, built with gcc and frame pointers.
    C,
    /// tests/programs/rust_worker.rs, built with rustc (no frame pointers).
    Rust,
    /// tests/programs/realign_worker.c, built with gcc without frame
    /// pointers: a function that realigns its stack through r10 (CFA
    /// expressions) between callers that keep none.
    Realign,
    /// tests/programs/bad_fp_worker.c: half its frame-pointer chains end
    /// in 0xffffffffffffffff.
    BadFp,
}

impl Worker {
    /// Builds the worker into `dir`.
    fn build(self, dir: &Path) -> PathBuf {
        let (name, mut cmd) = match self {
            Worker::C => {
                let exe = dir.join("libc_worker");
                util::gcc("tests/programs/libc_worker.c", &exe, &["-O2", "-g"])
                    .unwrap_or_else(|e| panic!("building the test workload: {e}"));
                return exe;
            }
            Worker::BadFp => {
                let mut c = Command::new("gcc");
                c.args(["-O2", "-g", "-fno-omit-frame-pointer", "-mno-red-zone"]);
                c.args(["-pthread"]);
                c.arg(util::repo_root().join("tests/programs/bad_fp_worker.c"));
                ("bad_fp_worker", c)
            }
            Worker::Realign => {
                let mut c = Command::new("gcc");
                c.args(["-O2", "-g", "-fomit-frame-pointer", "-pthread"]);
                c.arg(util::repo_root().join("tests/programs/realign_worker.c"));
                ("realign_worker", c)
            }
            Worker::Rust => {
                let mut c = Command::new(std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into()));
                c.args(["--edition", "2021", "-C", "opt-level=2", "-g"]);
                c.arg(util::repo_root().join("tests/programs/rust_worker.rs"));
                ("rust_worker", c)
            }
        };
        let exe = dir.join(name);
        let st = cmd
            .arg("-o")
            .arg(&exe)
            .status()
            .expect("a compiler for the test workload");
        assert!(st.success(), "building {name}");
        exe
    }
}

/// Records the worker (4 threads, 2 per shard) for `seconds` with the
/// sidecar, then deletes the binary: only symfs/ can name its frames. A
/// copy of /proc/kallsyms is put next to symfs/ as the kernel snapshot.
fn make(call_graph: &str, seconds: u64) -> Option<Capture> {
    make_with(Worker::C, call_graph, seconds)
}

fn make_with(which: Worker, call_graph: &str, seconds: u64) -> Option<Capture> {
    if !util::require(
        util::perf_available(),
        "perf (linux-perf) for tests/native.rs",
    ) {
        return None;
    }
    let keep = tempfile::tempdir().unwrap();
    let bin_dir = keep.path().join("bin");
    fs::create_dir_all(&bin_dir).unwrap();
    let exe = which.build(&bin_dir);
    let options = format!("--threads-per-shard 2 --call-graph {call_graph}");
    let result_dir = capture_exe(keep.path(), &exe, &options, seconds);
    fs::remove_dir_all(&bin_dir).unwrap();
    let c = Capture {
        _keep: keep,
        result_dir,
    };
    let symfs = symfs_of(&c.capture_dir());
    fs::copy("/proc/kallsyms", symfs.parent().unwrap().join("kallsyms")).unwrap();
    Some(c)
}

/// Runs `exe 3` (its thread count) and captures it as `q1` for `seconds`
/// with the sidecar (`--frequency 499`, `options` added) into
/// `keep/result`, one capture at a time: on a loaded 2-core machine,
/// parallel captures starve each other's workers of samples (and of kernel
/// frames).
fn capture_exe(keep: &Path, exe: &Path, options: &str, seconds: u64) -> PathBuf {
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mut worker = Command::new(exe)
        .arg("3")
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let result_dir = keep.join("result");
    util::capture_q1(
        keep,
        &result_dir.join("profiles/perf"),
        &mut worker,
        &format!("--frequency 499 --start-timeout 30 --stop-timeout 30 {options}"),
        &[("SLURM_JOB_ID", "4343")],
        seconds,
        Duration::from_secs(90),
    );
    result_dir
}

fn symfs_of(capture: &Path) -> PathBuf {
    [
        capture.join("symfs"),
        capture.parent().unwrap().join("symfs"),
    ]
    .into_iter()
    .find(|p| p.is_dir())
    .expect("the capture has a symfs/")
}

/// A private copy of the result directory.
fn copy(c: &Capture) -> (tempfile::TempDir, PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let dst = t.path().join("result");
    let st = Command::new("cp")
        .arg("-a")
        .arg(&c.result_dir)
        .arg(&dst)
        .status()
        .unwrap();
    assert!(st.success());
    (t, dst)
}

fn process(result: &Path, args: &[&str]) -> Output {
    // The native symbolizer expands inline frames by default; these tests
    // compare with `perf script --no-inline` unless they ask for --inline.
    let inline = if args.contains(&"--inline") {
        None
    } else {
        Some("--no-inline")
    };
    jobprof()
        .arg("process")
        .arg(result)
        .args(["--formats", "folded,summary"])
        .args(inline)
        .args(args)
        .output()
        .unwrap()
}

fn data_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy().into_owned();
            n.starts_with("perf.data") && !n.ends_with(".log")
        })
        .collect();
    v.sort();
    v
}

/// `perf script` on every shard as `jobprof process` runs it (with the
/// kernel snapshot), folded by `jobprof fold`.
fn perf_reference(capture: &Path) -> HashMap<String, u64> {
    perf_reference_with(capture, "--no-inline")
}

/// [`perf_reference`] with `flag` (`--inline` or `--no-inline`).
fn perf_reference_with(capture: &Path, flag: &str) -> HashMap<String, u64> {
    let symfs = symfs_of(capture);
    let kallsyms = symfs.parent().unwrap().join("kallsyms");
    let script = capture.join("reference.script");
    let mut all = Vec::new();
    for f in data_files(capture) {
        let out = Command::new("perf")
            .args(["script", "-f", "-i"])
            .arg(&f)
            .arg("--symfs")
            .arg(&symfs)
            .arg("--kallsyms")
            .arg(&kallsyms)
            .arg(flag)
            .stderr(Stdio::null())
            .output()
            .unwrap();
        assert!(out.status.success(), "perf script -i {}", f.display());
        all.extend_from_slice(&out.stdout);
    }
    fs::write(&script, all).unwrap();
    let folded = capture.join("reference.folded");
    util::fold_file(&script, &folded)
}

/// Share of the reference weight on stacks both sides have with the same
/// weight (min of the two per stack), and the biggest differences.
fn agreement(
    native: &HashMap<String, u64>,
    perf: &HashMap<String, u64>,
) -> (f64, Vec<(i64, String)>) {
    let total: u64 = perf.values().sum();
    let same: u64 = perf
        .iter()
        .map(|(s, &w)| w.min(native.get(s).copied().unwrap_or(0)))
        .sum();
    let mut diffs: Vec<(i64, String)> = perf
        .keys()
        .chain(native.keys())
        .map(|s| {
            let d = native.get(s).copied().unwrap_or(0) as i64
                - perf.get(s).copied().unwrap_or(0) as i64;
            (d, s.clone())
        })
        .filter(|(d, _)| *d != 0)
        .collect();
    diffs.sort_by_key(|(d, s)| (std::cmp::Reverse(d.abs()), s.clone()));
    diffs.dedup();
    diffs.truncate(10);
    (same as f64 / total.max(1) as f64, diffs)
}

/// Prints the [`agreement`] of `native` with `perf` under `label` and
/// requires at least 99.5% of the weight on identical stacks, listing the
/// top differences otherwise.
pub fn assert_agreement(label: &str, native: &HashMap<String, u64>, perf: &HashMap<String, u64>) {
    let (share, diffs) = agreement(native, perf);
    eprintln!(
        "{label}: {:.3}% of the weight on identical stacks",
        100.0 * share
    );
    // The differences within the tolerance too: the next one to explain.
    for (d, s) in &diffs {
        eprintln!("  native - perf: {d:+} {s}");
    }
    assert!(
        share >= 0.995,
        "only {:.3}% of the weight on identical stacks; top differences (native - perf):\n{}",
        100.0 * share,
        diffs
            .iter()
            .map(|(d, s)| format!("{d:+} {s}"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// Processes a copy of `c` natively (no fallback, no perf run) and checks
/// that at least 99.5% of the weight lies on the stacks `perf script`
/// gives; returns the native folded stacks.
fn native_agrees_with_perf(c: &Capture) -> HashMap<String, u64> {
    let (_t, result) = copy(c);
    let cap = result.join("profiles/perf/worker_0/q1");
    let o = process(&result, &["--symbolizer", "native"]);
    assert!(o.status.success(), "{}", text(&o));
    let s = summary(&cap);
    assert_eq!(s["symbolized_from"], "native", "{s}");
    assert!(s["perf_version"].is_null(), "perf did not run: {s}");
    let native = folded(&cap.join("stacks.folded"));
    let perf = perf_reference(&cap);
    assert_agreement("native vs perf script", &native, &perf);
    native
}

#[test]
fn fp_capture_native_matches_perf_script() {
    let Some(c) = fp() else { return };
    let native = native_agrees_with_perf(c);
    // The capture really has what the comparison is about: the worker's own
    // frames (named from symfs/ only), libc frames and named kernel frames.
    let all: String = native.keys().cloned().collect::<Vec<_>>().join("\n");
    assert!(all.contains("compute_stage"), "no worker frame in:\n{all}");
    // libc frames, named (from libc's debug file when it is installed) or not.
    let libc = [
        "libc.so.6",
        "start_thread",
        "__libc_start_call_main",
        "__vfprintf_internal",
        "msort_with_tmp",
    ];
    assert!(
        libc.iter().any(|f| all.contains(f)),
        "no libc frame in:\n{all}"
    );
    let kernel = [
        "entry_SYSCALL",
        "do_syscall",
        "asm_sysvec",
        "irqentry",
        "schedule",
    ];
    assert!(
        kernel.iter().any(|k| all.contains(k)),
        "no named kernel frame in:\n{all}"
    );
    // The vDSO, named from the snapshot's symfs/[vdso].
    assert!(
        all.contains("__vdso_clock_gettime"),
        "no named vDSO frame in:\n{all}"
    );
}

#[test]
fn auto_picks_native_for_fp_and_agrees_with_perf_mode() {
    let Some(c) = fp() else { return };
    let (_t, result) = copy(c);
    let cap = result.join("profiles/perf/worker_0/q1");
    let o = process(&result, &[]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(summary(&cap)["symbolized_from"], "native");
    let auto = fs::read(cap.join("stacks.folded")).unwrap();
    let o = process(&result, &["--force", "--symbolizer", "perf"]);
    assert!(o.status.success(), "{}", text(&o));
    let s = summary(&cap);
    assert_eq!(s["symbolized_from"], "perf script", "{s}");
    assert!(s["perf_version"]
        .as_str()
        .unwrap()
        .starts_with("perf version"));
    // perf as process runs it has no --kallsyms in this version: compare
    // sample counts and the user-space part of the stacks only.
    let samples = |b: &[u8]| -> u64 { parse_folded(&String::from_utf8_lossy(b)).values().sum() };
    let perf_mode = fs::read(cap.join("stacks.folded")).unwrap();
    assert_eq!(samples(&auto), samples(&perf_mode));
}

#[test]
fn native_needs_no_perf_and_slices_lose_nothing() {
    let Some(c) = fp() else { return };
    let (_t, result) = copy(c);
    let cap = result.join("profiles/perf/worker_0/q1");
    // No perf on PATH at all.
    let empty = tempfile::tempdir().unwrap();
    let o = jobprof()
        .arg("process")
        .arg(&result)
        .args(["--formats", "folded,summary", "--symbolizer", "native"])
        .args(["--time-slices", "3"])
        .env("PATH", empty.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let s = summary(&cap);
    for sh in s["shards"].as_array().unwrap() {
        assert_eq!(sh["slices"], 3, "{s}");
    }
    assert!(s["perf_version"].is_null(), "{s}");
    let sliced = folded(&cap.join("stacks.folded"));
    let o = process(&result, &["--force", "--symbolizer", "native"]);
    assert!(o.status.success(), "{}", text(&o));
    let whole = folded(&cap.join("stacks.folded"));
    assert_eq!(sliced, whole, "time slices changed the stacks");
    let s = summary(&cap);
    assert!(s["shards"].as_array().unwrap().len() >= 2, "{s}");
}

/// Stacks holding all of `frames`, in this order (callers first).
fn weight_through(native: &HashMap<String, u64>, frames: &[&str]) -> u64 {
    native
        .iter()
        .filter(|(s, _)| {
            let mut rest = s.as_str();
            frames.iter().all(|f| match rest.find(f) {
                Some(i) => {
                    rest = &rest[i + f.len()..];
                    true
                }
                None => false,
            })
        })
        .map(|(_, &w)| w)
        .sum()
}

#[test]
fn dwarf_capture_native_matches_perf_script() {
    let Some(c) = dwarf() else { return };
    let native = native_agrees_with_perf(c);
    // Unwound through libc back into the worker (qsort calling back), from
    // the thread start down, and kernel frames on top of unwound user ones.
    let total: u64 = native.values().sum();
    let deep = weight_through(&native, &["start_thread", "worker", "sort_stage"]);
    assert!(deep > 0, "no unwound worker stacks of {total}: {native:?}");
    // (libc's own frames are named only where its debug file is installed.)
    let callback = weight_through(&native, &["sort_stage", "compare_keys"]);
    assert!(
        callback > 0,
        "no stack through qsort back into the worker: {native:?}"
    );
    let kernel: u64 = [
        "entry_SYSCALL",
        "asm_sysvec",
        "asm_common_interrupt",
        "irqentry",
    ]
    .iter()
    .map(|k| weight_through(&native, &["worker", k]))
    .sum();
    assert!(
        kernel > 0,
        "no kernel frames above unwound user frames: {native:?}"
    );
    // The vDSO named from the snapshot's symfs/[vdso], on stacks unwound
    // through it back into the worker.
    let vdso = weight_through(&native, &["clock_stage", "__vdso_clock_gettime"]);
    assert!(
        vdso > 0,
        "no named vDSO frame under clock_stage: {native:?}"
    );
}

#[test]
fn dwarf_rust_capture_native_matches_perf_script() {
    let Some(c) = rust_dwarf() else { return };
    let native = native_agrees_with_perf(c);
    let deep = weight_through(&native, &["rust_worker::main", "rust_worker::sort_stage"]);
    assert!(deep > 0, "no unwound Rust stacks: {native:?}");
}

/// jemalloc's `do_rallocx` realigns its stack through r10, and its CFI
/// says so with DWARF expressions (`DW_CFA_def_cfa_expression: DW_OP_breg6
/// -16; DW_OP_deref`, `DW_CFA_expression` for the saved registers): perf's
/// libunwind evaluates them and unwinds on to the thread's first frame, and
/// so must the native unwinder (framehop alone fell back to the frame
/// pointer there and lost the caller's stack pointer).
#[test]
fn dwarf_stacks_unwind_through_a_stack_realigning_function() {
    let Some(c) = realign_dwarf() else { return };
    let native = native_agrees_with_perf(c);
    let total: u64 = native.values().sum();
    let main = ["main", "outer", "middle", "realigned", "leaf_work"];
    let thread = ["start_thread", "outer", "middle", "realigned"];
    assert!(
        weight_through(&native, &main) > 0 && weight_through(&native, &thread) > 0,
        "no stack through realigned() from main and from a thread's start, of {total}: \
         {native:?}"
    );
    // Nothing stops inside it: every stack through it reaches the start.
    let (_t, result) = copy(c);
    let cap = result.join("profiles/perf/worker_0/q1");
    let o = process(&result, &["--symbolizer", "native"]);
    assert!(o.status.success(), "{}", text(&o));
    let s = summary(&cap);
    let truncated = s["truncated_ratio"].as_f64().unwrap();
    assert!(truncated < 0.005, "truncated {truncated}: {s}");
}

/// A frame-pointer chain whose walk read 0xffffffffffffffff as a return
/// address: perf 6.1 takes it for corrupted and prints the sample without
/// frames; native does the same (it used to keep the leaf) and counts
/// those samples in summary.json.
#[test]
fn fp_chains_ending_in_minus_one_are_discarded_as_perf_discards_them() {
    let Some(c) = bad_fp() else { return };
    let native = native_agrees_with_perf(c);
    assert!(
        weight_through(&native, &["honest"]) > 0,
        "no honest stacks: {native:?}"
    );
    let (_t, result) = copy(c);
    let cap = result.join("profiles/perf/worker_0/q1");
    let o = process(&result, &["--symbolizer", "native"]);
    assert!(o.status.success(), "{}", text(&o));
    let s = summary(&cap);
    let d = &s["discarded_chains"];
    let (n, w) = (
        d["samples"].as_u64().unwrap(),
        d["period"].as_u64().unwrap(),
    );
    let total = s["period_total"].as_u64().unwrap();
    // spin() takes about half the time.
    assert!(n > 0 && w > total / 10 && w < total, "{d} of {total}: {s}");
    // perf script (with --symbolizer perf) cannot say how many.
    let (_t, result) = copy(c);
    let o = process(&result, &["--symbolizer", "perf"]);
    assert!(o.status.success(), "{}", text(&o));
    let s = summary(&result.join("profiles/perf/worker_0/q1"));
    assert_eq!(s["symbolized_from"], "perf script", "{s}");
    assert!(s["discarded_chains"].is_null(), "{s}");
}

#[test]
fn auto_picks_native_for_dwarf() {
    let Some(c) = dwarf() else { return };
    let (_t, result) = copy(c);
    let cap = result.join("profiles/perf/worker_0/q1");
    let o = process(&result, &[]);
    assert!(o.status.success(), "{}", text(&o));
    let s = summary(&cap);
    assert_eq!(s["symbolized_from"], "native", "{s}");
    assert!(s["samples"].as_u64().unwrap() > 0, "{s}");
}

#[test]
fn an_unknown_symbolizer_is_a_usage_error() {
    let o = jobprof()
        .args(["process", "/nonexistent", "--symbolizer", "fast"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
}

/// Every event record of `data` as (attribute, type, misc, body), in the
/// order linux-perf-data's own iterator hands them out.
fn records_by_linux_perf_data(data: &Path) -> Vec<(usize, u32, u16, Vec<u8>)> {
    use linux_perf_data::{PerfFileReader, PerfFileRecord};
    let file = fs::File::open(data).unwrap();
    let PerfFileReader {
        mut perf_file,
        mut record_iter,
    } = PerfFileReader::parse_file(std::io::BufReader::new(file)).unwrap();
    let mut out = Vec::new();
    while let Some(rec) = record_iter.next_record(&mut perf_file).unwrap() {
        if let PerfFileRecord::EventRecord { attr_index, record } = rec {
            let body = record.data.as_slice().into_owned();
            out.push((attr_index, record.record_type.0, record.misc, body));
        }
    }
    out
}

/// The same through the symbolizer's in-place reader.
fn records_in_place(data: &Path) -> Vec<(usize, u32, u16, Vec<u8>)> {
    use linux_perf_data::PerfFileReader;
    let bytes = fs::read(data).unwrap();
    let PerfFileReader { perf_file, .. } =
        PerfFileReader::parse_file(std::io::Cursor::new(&bytes[..])).unwrap();
    let off = u64::from_le_bytes(bytes[40..48].try_into().unwrap()) as usize;
    let len = u64::from_le_bytes(bytes[48..56].try_into().unwrap()) as usize;
    let mut it = jobprof::symbolize::native::records::OrderedRecords::new(
        &bytes[off..off + len],
        perf_file.event_attributes(),
    )
    .unwrap();
    let mut out = Vec::new();
    while let Some((attr, record)) = it.next_record().unwrap() {
        let body = record.data.as_slice().into_owned();
        out.push((attr, record.record_type.0, record.misc, body));
    }
    out
}

#[test]
fn records_in_place_come_in_linux_perf_data_order() {
    for c in [fp(), dwarf()].into_iter().flatten() {
        for data in data_files(&c.capture_dir()) {
            let theirs = records_by_linux_perf_data(&data);
            let ours = records_in_place(&data);
            assert!(
                theirs.len() > 100,
                "{}: {} records",
                data.display(),
                theirs.len()
            );
            let first_difference = theirs.iter().zip(&ours).position(|(a, b)| a != b);
            assert_eq!(
                (theirs.len(), first_difference),
                (ours.len(), None),
                "{}: record counts, and the first record that differs",
                data.display()
            );
        }
    }
}

/// The live machine's vDSO is copied (a `memfd_create` named
/// `jobprof-vdso`) only when a capture's `[vdso]` needs it, never up
/// front: a recorder's capture names its `[vdso]` from the snapshot's
/// `symfs/[vdso]`, and is processed without the copy.
#[test]
fn the_live_vdso_is_copied_only_when_a_capture_needs_it() {
    let Some(base) = util::base() else { return };
    if !util::require(util::have("strace"), "strace") {
        return;
    }
    let (t, result) = util::copy_base(base);
    let worker = result.join("profiles/perf/worker_0");
    assert!(
        worker.join("symfs/[vdso]").is_file(),
        "no snapshot of the vDSO"
    );
    let trace = t.path().join("process.strace");
    let o = Command::new("strace")
        .args(["-f", "-qq", "-e", "trace=memfd_create", "-o"])
        .arg(&trace)
        .arg(env!("CARGO_BIN_EXE_jobprof"))
        .arg("process")
        .arg(worker.join("q1"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let log = fs::read_to_string(&trace).unwrap();
    assert!(
        !log.contains("jobprof-vdso"),
        "the live vDSO was copied although the snapshot names [vdso]:\n{log}"
    );
    let sources = summary(&worker.join("q1"))["symbol_sources"].to_string();
    assert!(
        sources.contains("[vdso]") && !sources.contains("vDSO"),
        "{sources}"
    );
}

/// An address whose DWARF has a line but no function (no
/// `DW_TAG_subprogram` covers it: tests/programs/unnamed_asm.S) is named
/// by binutils' `addr2line` from the symbol table, and perf `--inline`
/// prints that as the plain frame line: the inline chain is the ELF
/// symbol, never `??` (the `??+0x26 (inlined)` that stood for
/// `PyLong_FromUnsignedLongLong` in an LTO-built libpython).
#[test]
fn an_address_with_a_line_but_no_function_is_named_by_its_symbol() {
    use jobprof::symbolize::native::inline::Debug;
    let tmp = tempfile::tempdir().unwrap();
    let exe = tmp.path().join("unnamed");
    let asm = util::repo_root().join("tests/programs/unnamed_asm.S");
    let built = util::gcc(
        "tests/programs/unnamed_main.c",
        &exe,
        &["-O1", "-g", asm.to_str().unwrap()],
    );
    if !util::require(built.is_ok(), "gcc (tests/programs/unnamed_asm.S)") {
        return;
    }
    let nm = Command::new("nm").arg(&exe).output().unwrap();
    let nm = String::from_utf8_lossy(&nm.stdout).into_owned();
    let start = nm
        .lines()
        .find(|l| l.ends_with(" unnamed_spin"))
        .and_then(|l| u64::from_str_radix(l.split(' ').next()?, 16).ok())
        .unwrap_or_else(|| panic!("no unnamed_spin in nm {}:\n{nm}", exe.display()));
    // The second instruction (`mov %rdi,%rax` is 3 bytes): line 6.
    let at = start + 3;
    let a2l = Command::new("addr2line")
        .arg("-e")
        .arg(&exe)
        .args(["-f", "-i", &format!("{at:#x}")])
        .output()
        .unwrap();
    let a2l = String::from_utf8_lossy(&a2l.stdout).into_owned();
    assert!(a2l.starts_with("unnamed_spin\n"), "binutils: {a2l}");
    assert!(a2l.contains("unnamed_asm.c:6"), "binutils: {a2l}");
    let d = Debug::load(Path::new("/"), &exe, None, None)
        .unwrap()
        .expect("the test program's DWARF");
    assert_eq!(d.chain(at, "unnamed_spin"), ["unnamed_spin"]);
}

/// The `(offset of the sh_entsize field, sh_entsize)` of section `name` of
/// the 64-bit little-endian ELF `bytes`.
fn section_entsize(bytes: &[u8], name: &str) -> (usize, u64) {
    let u16_at = |o: usize| u16::from_le_bytes(bytes[o..o + 2].try_into().unwrap()) as usize;
    let u64_at = |o: usize| u64::from_le_bytes(bytes[o..o + 8].try_into().unwrap());
    let (shoff, shentsize) = (u64_at(0x28) as usize, u16_at(0x3a));
    let (shnum, shstrndx) = (u16_at(0x3c), u16_at(0x3e));
    let strtab = u64_at(shoff + shstrndx * shentsize + 0x18) as usize;
    (0..shnum)
        .map(|i| shoff + i * shentsize)
        .find(|h| {
            let at = strtab + u32::from_le_bytes(bytes[*h..*h + 4].try_into().unwrap()) as usize;
            bytes[at..].starts_with(name.as_bytes()) && bytes[at + name.len()] == 0
        })
        .map(|h| (h + 0x38, u64_at(h + 0x38)))
        .unwrap_or_else(|| panic!("no section {name}"))
}

/// perf 6.1 sizes x86-64 PLT entries by the `.plt` section's `sh_entsize`
/// (its header too): 16 as GNU ld writes it names every stub `NAME@plt`;
/// 0, as the linker of polars' `_polars_runtime.abi3.so` wrote it, makes
/// zero-length entries that name no sampled address (perf printed
/// `[unknown]` where jobprof printed `__tls_get_addr@plt`).
#[test]
fn plt_stubs_are_sized_by_the_plt_sections_entry_size_as_perf_6_1_sizes_them() {
    use jobprof::symbolize::native::elf;
    use jobprof::symbolize::sources::{resolve, Search};
    let tmp = tempfile::tempdir().unwrap();
    let exe = tmp.path().join("libc_worker");
    let built = util::gcc("tests/programs/libc_worker.c", &exe, &["-O1"]);
    if !util::require(built.is_ok(), "gcc (tests/programs/libc_worker.c)") {
        return;
    }
    let stubs = |path: &Path| {
        let search = Search {
            host: Some("/".into()),
            ..Default::default()
        };
        let syms = elf::load(&resolve(path.to_str().unwrap(), &[], &search));
        let bytes = fs::read(path).unwrap();
        let (_, entsize) = section_entsize(&bytes, ".plt");
        // The stubs after the 16-byte header of GNU ld's .plt.
        let start = {
            let out = Command::new("objdump")
                .args(["-h"])
                .arg(path)
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            let l = text
                .lines()
                .find(|l| l.split_whitespace().nth(1) == Some(".plt"))
                .unwrap();
            u64::from_str_radix(l.split_whitespace().nth(3).unwrap(), 16).unwrap()
        };
        let names: Vec<String> = (1..4)
            .filter_map(|i| syms.table.find(start + 16 * i).map(|h| h.name.to_string()))
            .collect();
        (entsize, names)
    };
    let (entsize, named) = stubs(&exe);
    assert_eq!(entsize, 16, "GNU ld's .plt");
    assert!(
        named.len() == 3 && named.iter().all(|n| n.ends_with("@plt")),
        "{named:?}"
    );
    let mut bytes = fs::read(&exe).unwrap();
    let (at, _) = section_entsize(&bytes, ".plt");
    bytes[at..at + 8].copy_from_slice(&0u64.to_le_bytes());
    let zero = tmp.path().join("libc_worker_entsize0");
    fs::write(&zero, &bytes).unwrap();
    let (entsize, named) = stubs(&zero);
    assert_eq!(entsize, 0);
    assert!(
        named.iter().all(|n| !n.ends_with("@plt")),
        "perf 6.1 names no stub of a .plt with sh_entsize 0: {named:?}"
    );
}
