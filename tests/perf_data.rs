//! `jobprof process` on plain `perf record` outputs (issue 49, item 1): a
//! `perf.data` written by `perf record -g` or `--call-graph dwarf` of a
//! small C program (tests/programs/libc_worker.c: its own functions, libc,
//! the vDSO, system calls) is symbolized natively with this host's files
//! by build id (and so are a C++ worker, tests/programs/cxx_worker.cc, and a
//! DuckDB worker from PyPI) and must agree with `perf script | jobprof fold` of the same
//! file on at least 99% of the weight of the user-space part of the stacks
//! (kernel frames are cut off: module frames stay unnamed unless the
//! capture has a kernel table, docs/process.md). The input is never
//! modified; a missing or garbage file is exit code 2 naming it.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

use crate::util::{self, jobprof, output_text as text};

mod per_sample;

/// One recording: the directory holding its `perf.data` (kept alive).
struct Recording {
    _keep: tempfile::TempDir,
    data: PathBuf,
}

static FP: OnceLock<Option<Recording>> = OnceLock::new();
static DWARF: OnceLock<Option<Recording>> = OnceLock::new();

fn fp() -> Option<&'static Recording> {
    FP.get_or_init(|| record(&["-g"])).as_ref()
}

fn dwarf() -> Option<&'static Recording> {
    DWARF
        .get_or_init(|| record(&["--call-graph", "dwarf,4096"]))
        .as_ref()
}

/// `perf record CALL_GRAPH -F 499 -p PID -- sleep 2` of the libc worker
/// (2 threads and its main thread), into `DIR/perf.data`.
fn record(call_graph: &[&str]) -> Option<Recording> {
    let exe = util::program(
        "libc_worker",
        "tests/programs/libc_worker.c",
        &["-O2", "-g"],
    );
    if !util::require(exe.is_some(), "gcc for tests/programs/libc_worker.c") {
        return None;
    }
    record_worker(Command::new(exe.unwrap()).arg("2"), call_graph)
}

/// tests/programs/cxx_worker.cc built with g++ (once).
fn cxx_worker() -> Option<PathBuf> {
    static BUILT: OnceLock<Option<PathBuf>> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let exe = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cxx_worker");
            let src = util::repo_root().join("tests/programs/cxx_worker.cc");
            let built = Command::new("g++")
                .args(["-O2", "-g", "-fno-omit-frame-pointer", "-pthread", "-o"])
                .arg(&exe)
                .arg(src)
                .output()
                .is_ok_and(|o| o.status.success());
            util::require(built, "g++ for tests/programs/cxx_worker.cc").then_some(exe)
        })
        .clone()
}

/// `perf record CALL_GRAPH -F 499 -p PID -- sleep 2` of the C++ worker
/// (2 threads and its main thread).
fn record_cxx(call_graph: &[&str]) -> Option<Recording> {
    let exe = cxx_worker()?;
    record_worker(Command::new(exe).arg("2"), call_graph)
}

/// `perf record --call-graph dwarf,8192` of tests/programs/cxx_thread_lambda.cc
/// (2 threads), built with g++ `-O2 -g` (once).
fn record_cxx_thread_lambda() -> Option<Recording> {
    static BUILT: OnceLock<Option<PathBuf>> = OnceLock::new();
    let exe = BUILT
        .get_or_init(|| {
            let exe = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cxx_thread_lambda");
            let src = util::repo_root().join("tests/programs/cxx_thread_lambda.cc");
            let built = Command::new("g++")
                .args(["-O2", "-g", "-pthread", "-o"])
                .arg(&exe)
                .arg(src)
                .output()
                .is_ok_and(|o| o.status.success());
            util::require(built, "g++ for tests/programs/cxx_thread_lambda.cc").then_some(exe)
        })
        .clone()?;
    record_worker(Command::new(exe).arg("2"), &["--call-graph", "dwarf,8192"])
}

/// `perf record CALL_GRAPH -F 499 -p PID -- sleep 2` of `worker`, started
/// here and killed after, into `DIR/perf.data`.
fn record_worker(worker: &mut Command, call_graph: &[&str]) -> Option<Recording> {
    if !util::require(
        util::perf_can_record(),
        "perf record (linux-perf, allowed to sample)",
    ) {
        return None;
    }
    // One recording at a time: parallel ones starve each other's workers.
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let keep = tempfile::tempdir().unwrap();
    let data = keep.path().join("perf.data");
    let mut worker = worker.stdout(Stdio::null()).spawn().unwrap();
    let out = Command::new("perf")
        .arg("record")
        .args(call_graph)
        .args(["-q", "-F", "499", "-o"])
        .arg(&data)
        .arg("-p")
        .arg(worker.id().to_string())
        .args(["--", "sleep", "2"])
        .output()
        .unwrap();
    let _ = worker.kill();
    let _ = worker.wait();
    assert!(out.status.success(), "perf record: {}", text(&out));
    Some(Recording { _keep: keep, data })
}

/// A DuckDB worker from PyPI (tests/util.rs's pinned venv): a group-by, a
/// join and a sort on 2 threads, in a loop until killed.
const DUCKDB_WORKER: &str = "\
import duckdb
con = duckdb.connect()
con.execute('SET threads=2')
con.execute('CREATE TABLE t AS SELECT i AS k, i % 97 AS g, (i * 13) % 1000 AS v FROM range(400000) r(i)')
while True:
    con.execute('SELECT g, sum(v), count(*) FROM t GROUP BY g').fetchall()
    con.execute('SELECT count(*) FROM t a JOIN t b ON a.k = b.v').fetchall()
    con.execute('SELECT k FROM t ORDER BY v, k LIMIT 10').fetchall()
";

/// A private copy of the recording's `perf.data` in a fresh directory.
fn copy(r: &Recording) -> (tempfile::TempDir, PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let data = t.path().join("perf.data");
    fs::copy(&r.data, &data).unwrap();
    (t, data)
}

fn process(args: &[&std::ffi::OsStr]) -> Output {
    jobprof()
        .arg("process")
        .args(args)
        .arg("--no-inline")
        .output()
        .unwrap()
}

/// Folded stacks with kernel frames marked (`jobprof fold --kernel`), each
/// cut at its first kernel frame: the user-space part.
fn user_part(script: &Path, folded: &Path) -> HashMap<String, u64> {
    let o = jobprof()
        .arg("fold")
        .arg(script)
        .arg("--kernel")
        .arg("-o")
        .arg(folded)
        .output()
        .unwrap();
    assert!(o.status.success(), "jobprof fold: {}", text(&o));
    let mut user = HashMap::new();
    for (stack, n) in util::folded(folded) {
        let cut: Vec<&str> = stack
            .split(';')
            .take_while(|f| !f.ends_with("_[k]"))
            .collect();
        *user.entry(cut.join(";")).or_default() += n;
    }
    user
}

/// `perf script --no-inline` of `data`, as a user would pipe it.
fn perf_script(data: &Path, out: &Path) {
    let o = Command::new("perf")
        .args(["script", "--no-inline", "-i"])
        .arg(data)
        .stderr(Stdio::null())
        .output()
        .unwrap();
    assert!(o.status.success(), "perf script -i {}", data.display());
    fs::write(out, o.stdout).unwrap();
}

/// Processes a copy of `r` and requires 99% of the user-space weight on
/// the stacks `perf script | jobprof fold` gives, the same total, and a
/// stack through each of `named`.
fn agrees_with_perf_script(r: &Recording, named: &[&str]) {
    let (t, data) = copy(r);
    let o = process(&[data.as_os_str()]);
    assert!(o.status.success(), "{}", text(&o));
    let out = t.path().join("perf.data.jobprof");
    let s = util::summary(&out);
    assert_eq!(s["symbolized_from"], "native", "{s}");
    let tmp = t.path();
    let zst = fs::read(out.join("perf.script.zst")).unwrap();
    let native_text = tmp.join("native.script");
    fs::write(&native_text, zstd::decode_all(&zst[..]).unwrap()).unwrap();
    let native = user_part(&native_text, &tmp.join("native.folded"));
    let reference_text = tmp.join("reference.script");
    perf_script(&data, &reference_text);
    let reference = user_part(&reference_text, &tmp.join("reference.folded"));
    crate::native::assert_agreement("perf.data vs perf script", &native, &reference);
    // stacks.folded is the fold of that text: the same weight as perf's.
    let total: u64 = reference.values().sum();
    assert_eq!(util::folded_total(&out.join("stacks.folded")), total);
    // The worker's own frames and its libraries' are named.
    let stacks = util::folded(&out.join("stacks.folded"));
    for &f in named {
        let share = util::stack_share(&stacks, |x| x == f);
        assert!(share > 0.0, "no stack through {f}: {stacks:?}");
    }
}

#[test]
fn fp_perf_data_agrees_with_perf_script() {
    let Some(r) = fp() else { return };
    agrees_with_perf_script(r, C_NAMES);
}

#[test]
fn dwarf_perf_data_agrees_with_perf_script() {
    let Some(r) = dwarf() else { return };
    agrees_with_perf_script(r, C_NAMES);
}

/// A library met only in call chains: tests/programs/own_code.c spends
/// its time in its own code, so libc is only the root of its stacks
/// (`__libc_start_call_main`), never where a sample hit, and perf records
/// no build id for it. perf script reads the id of the live file and names
/// those frames from this host's debug file by that id; so must jobprof
/// (it left them `[libc.so.6]`).
#[test]
fn a_library_only_in_call_chains_is_named_from_its_debug_file_by_the_live_id() {
    let exe = util::program("own_code", "tests/programs/own_code.c", &["-O1", "-g"]);
    if !util::require(exe.is_some(), "gcc for tests/programs/own_code.c") {
        return;
    }
    let Some(r) = record_worker(&mut Command::new(exe.unwrap()), &["--call-graph", "dwarf"]) else {
        return;
    };
    let ids = Command::new("perf")
        .args(["buildid-list", "-i"])
        .arg(&r.data)
        .output()
        .unwrap();
    let ids = String::from_utf8_lossy(&ids.stdout);
    assert!(
        !ids.contains("libc.so"),
        "libc was recorded with a build id, the case is not met: {ids}"
    );
    agrees_with_perf_script(&r, &["spin", "__libc_start_call_main"]);
}

/// Folded code without debug information (tests/programs/folded.c: three
/// local symbols at one address): perf names the address by the longest
/// name, and with inline frames (its default, on call chains unwound from
/// stack copies) prints what binutils' `addr2line` answers, the first
/// listed, as an inlined frame; so must jobprof (it printed the longest:
/// pyarrow's `CTypeImpl<UInt32Type>::layout` where perf printed
/// `CTypeImpl<FloatType>::layout`).
#[test]
fn folded_code_is_named_as_perf_script_names_it_with_inline_frames() {
    let exe = util::program("folded", "tests/programs/folded.c", &["-O1"]);
    if !util::require(exe.is_some(), "gcc for tests/programs/folded.c") {
        return;
    }
    let Some(r) = record_worker(&mut Command::new(exe.unwrap()), &["--call-graph", "dwarf"]) else {
        return;
    };
    let native = agrees_with_perf_script_inline(&r);
    let through = |f: &str| native.keys().any(|s| s.split(';').any(|x| x == f));
    assert!(through("b_spin"), "binutils' name: {native:?}");
    assert!(!through("a_spin_with_a_much_longer_name"), "{native:?}");
}

/// `jobprof fold` of `r` (inline frames, its default) against `perf script
/// --inline`: 99% of the user-space weight on the same stacks. The
/// native side's stacks.
fn agrees_with_perf_script_inline(r: &Recording) -> HashMap<String, u64> {
    let tmp = tempfile::tempdir().unwrap();
    let native = user_part(&r.data, &tmp.path().join("native.folded"));
    let reference = perf_script_inline(r, tmp.path());
    crate::native::assert_agreement(
        "fold perf.data vs perf script --inline",
        &native,
        &reference,
    );
    native
}

/// The user-space stacks of `perf script --inline` over `r`, in `tmp`.
fn perf_script_inline(r: &Recording, tmp: &Path) -> HashMap<String, u64> {
    let reference_text = tmp.join("reference.script");
    let o = Command::new("perf")
        .args(["script", "--inline", "-i"])
        .arg(&r.data)
        .stderr(Stdio::null())
        .output()
        .unwrap();
    assert!(o.status.success(), "perf script --inline: {}", text(&o));
    fs::write(&reference_text, o.stdout).unwrap();
    user_part(&reference_text, &tmp.join("reference.folded"))
}

/// The C++ worker's agreement with `perf script --inline`, whole, cut into
/// 8 time slices, and beside other captures of it in one run: 100% on
/// each of 12 recordings, the text byte-identical to perf's (before each
/// shard's lookups were named in its own sample order, `order.rs`: 91.5-
/// 99.4% in 8 slices, 84.9-95.5% for 6 captures processed together, as
/// slices and captures asked binutils in another order than perf; 41.6%
/// before `inline::names`).
const CXX_INLINE_AGREEMENT: f64 = 0.99;

/// One `jobprof process --time-slices 8` of copies of `recs` (one store
/// for all, as a job's captures of the same binary share it; inline
/// frames, the default for native shards): the user-space stacks of each
/// one's text.
fn processed_together(recs: &[&Recording]) -> Vec<HashMap<String, u64>> {
    let copies: Vec<_> = recs.iter().map(|r| copy(r)).collect();
    let o = jobprof()
        .arg("process")
        .args(copies.iter().map(|(_, data)| data))
        .args(["--time-slices", "8"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let stacks = |(t, _): &(tempfile::TempDir, PathBuf)| {
        let zst = fs::read(t.path().join("perf.data.jobprof/perf.script.zst")).unwrap();
        let script = t.path().join("sliced.script");
        fs::write(&script, zstd::decode_all(&zst[..]).unwrap()).unwrap();
        user_part(&script, &t.path().join("sliced.folded"))
    };
    copies.iter().map(stacks).collect()
}

/// `r` folded, and `r` and `second` processed in one run cut into 8 time
/// slices, each against its `perf script --inline`: [`CXX_INLINE_AGREEMENT`]
/// of the user-space weight on identical stacks. `r`'s folded stacks.
fn inline_agreement(r: &Recording, second: &Recording) -> HashMap<String, u64> {
    let tmp = tempfile::tempdir().unwrap();
    let native = user_part(&r.data, &tmp.path().join("native.folded"));
    let reference = perf_script_inline(r, tmp.path());
    let tmp2 = tempfile::tempdir().unwrap();
    let reference2 = perf_script_inline(second, tmp2.path());
    // Cut into time slices replayed side by side, and beside another
    // capture of the same binary, each shard is still named as one replay
    // of it alone in sample order.
    let together = processed_together(&[r, second]);
    let runs = [
        ("fold", &native, &reference),
        ("8 time slices", &together[0], &reference),
        ("8 time slices, second capture", &together[1], &reference2),
    ];
    for (how, stacks, reference) in runs {
        let share = util::agreement(stacks, reference);
        eprintln!(
            "C++ inline frames ({how}) vs perf script --inline: {:.2}% of the weight on identical stacks",
            100.0 * share
        );
        assert!(
            share >= CXX_INLINE_AGREEMENT,
            "{how}: {share}: {stacks:#?}\nperf: {reference:#?}"
        );
    }
    native
}

/// Thread bodies inlined into `std::thread::_State_impl<...>::_M_run`
/// (tests/programs/cxx_thread_lambda.cc): perf names the lambda and what
/// is inlined into it `operator() (inlined)`, `_M_run (inlined)` after
/// their first lookup, the function holding them by its ELF symbol; so
/// must jobprof, whole, in time slices and beside another capture (issue
/// 57 saw `_M_run` where perf printed `consume`/`operator()`; 97.5% in 8
/// time slices before each shard was named in its own order).
#[test]
fn cxx_thread_lambdas_inlined_into_m_run_are_named_as_perf_names_them() {
    let (Some(r), Some(second)) = (record_cxx_thread_lambda(), record_cxx_thread_lambda()) else {
        return;
    };
    let native = inline_agreement(&r, &second);
    let through = |f: &dyn Fn(&str) -> bool| native.keys().any(|s| s.split(';').any(f));
    // (Folded frames drop the parameter list: `operator` for
    // `operator() (inlined)`.)
    assert!(through(&|f| f == "operator"), "no operator(): {native:?}");
    assert!(
        through(&|f| f.starts_with("std::thread::_State_impl<") && f.ends_with("::_M_run")),
        "no _M_run by its symbol: {native:?}"
    );
}

/// Templates and lambdas inlined into `std::sort` (the C++ worker, `-O2
/// -g`, `--call-graph dwarf`) named as `perf script --inline` names them:
/// the function holding the code by its ELF symbol, demangled
/// (`std::__introsort_loop<..., long, ...{lambda(long, long)#1}>`, where
/// its DWARF name is `__introsort_loop<..., long int, ...<lambda(long
/// int, long int)>>`) once binutils met its own code, the functions
/// inlined into it by their DWARF names (the comparison lambda's
/// `operator()`) after their first lookup (`inline::names`).
#[test]
fn cxx_dwarf_inline_frames_name_the_function_by_its_symbol() {
    let Some(r) = record_cxx(&["--call-graph", "dwarf,8192"]) else {
        return;
    };
    let Some(second) = record_cxx(&["--call-graph", "dwarf,8192"]) else {
        return;
    };
    let native = inline_agreement(&r, &second);
    let frames = |f: &dyn Fn(&str) -> bool| -> u64 {
        native
            .iter()
            .filter(|(s, _)| s.split(';').any(f))
            .map(|(_, n)| n)
            .sum()
    };
    let symbol = frames(&|f| f.starts_with("std::__introsort_loop<") && f.contains("{lambda("));
    assert!(symbol > 0, "no frame named by its symbol: {native:?}");
    // DWARF's name only where perf asked before the function's own code
    // was met (its first samples).
    let dwarf = frames(&|f| f.starts_with("__introsort_loop<"));
    assert!(dwarf < symbol, "{dwarf} under the DWARF name: {native:?}");
}

/// The C worker's own frames, libc's and the vDSO's.
const C_NAMES: &[&str] = &["compute_stage", "__vdso_clock_gettime"];

/// The C++ worker's: a lambda in a template argument, spelled as perf
/// (and `c++filt`) spell it, and a `std::function` handler.
const CXX_NAMES: &[&str] = &[
    "engine::sort_stage",
    "engine::run_task",
    "std::_Function_handler<engine::Status (), engine::worker(int)::{lambda()#2}>::_M_invoke",
];

#[test]
fn cxx_fp_perf_data_agrees_with_perf_script() {
    let Some(r) = record_cxx(&["-g"]) else { return };
    agrees_with_perf_script(&r, CXX_NAMES);
}

#[test]
fn cxx_dwarf_perf_data_agrees_with_perf_script() {
    let Some(r) = record_cxx(&["--call-graph", "dwarf,8192"]) else {
        return;
    };
    agrees_with_perf_script(&r, CXX_NAMES);
}

/// tests/programs/go_worker.go built with Debian's Go (once).
fn go_worker() -> Option<PathBuf> {
    static BUILT: OnceLock<Option<PathBuf>> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
            let exe = dir.join("go_worker");
            let built = Command::new("go")
                .args(["build", "-o"])
                .arg(&exe)
                .arg(util::repo_root().join("tests/programs/go_worker.go"))
                .env("GOCACHE", dir.join("go-cache"))
                .env("GO111MODULE", "off")
                .output()
                .is_ok_and(|o| o.status.success());
            util::require(built, "go (golang-go) for tests/programs/go_worker.go").then_some(exe)
        })
        .clone()
}

/// The functions a Go stack starts in (`unwind::go_roots`).
const GO_ROOTS: &[&str] = &[
    "runtime.goexit.abi0",
    "runtime.mstart.abi0",
    "runtime.rt0_go.abi0",
    "runtime.systemstack.abi0",
    "runtime.mcall",
    "runtime.morestack.abi0",
];

/// Go with `--call-graph dwarf`, where jobprof names more than perf on
/// purpose (docs/symbols.md): Go keeps its unwind tables in `.debug_frame`
/// only, so `perf script` 6.1 prints each sample as its leaf alone, while
/// jobprof unwinds to where Go's own traceback stops (`runtime.goexit`
/// under every goroutine, the scheduler's roots), never on into an
/// `[unknown]` above them, and the summary does not call those stacks
/// truncated.
#[test]
fn go_dwarf_stacks_end_at_the_runtime_s_outermost_functions() {
    let Some(exe) = go_worker() else { return };
    let Some(r) = record_worker(Command::new(exe).arg("2"), &["--call-graph", "dwarf"]) else {
        return;
    };
    let (t, data) = copy(&r);
    let o = process(&[data.as_os_str()]);
    assert!(o.status.success(), "{}", text(&o));
    let out = t.path().join("perf.data.jobprof");
    let stacks = util::folded(&out.join("stacks.folded"));
    let total: u64 = stacks.values().sum();
    let rooted = |f: &dyn Fn(&[&str]) -> bool| -> u64 {
        stacks
            .iter()
            .filter(|(s, _)| f(&s.split(';').skip(1).collect::<Vec<_>>()))
            .map(|(_, n)| n)
            .sum()
    };
    let at_root = rooted(&|f| f.first().is_some_and(|r| GO_ROOTS.contains(r)));
    let goexit = rooted(&|f| f.first() == Some(&"runtime.goexit.abi0"));
    let above = rooted(&|f| f.len() > 1 && GO_ROOTS.contains(&f[1]));
    eprintln!(
        "go dwarf: {:.1}% of the weight from a Go root, {:.1}% from runtime.goexit",
        100.0 * at_root as f64 / total as f64,
        100.0 * goexit as f64 / total as f64
    );
    assert!(at_root as f64 >= 0.9 * total as f64, "{stacks:#?}");
    assert!(goexit as f64 >= 0.5 * total as f64, "{stacks:#?}");
    assert_eq!(above, 0, "a frame above a Go root: {stacks:#?}");
    let truncated = util::summary(&out)["truncated_ratio"].as_f64().unwrap();
    assert!(truncated < 0.05, "truncated_ratio {truncated}");
    // perf script: the leaf alone, no Go root (the difference is on
    // purpose; if perf learns .debug_frame, this says so).
    let reference_text = t.path().join("reference.script");
    perf_script(&data, &reference_text);
    let reference = user_part(&reference_text, &t.path().join("reference.folded"));
    let perf_rooted: u64 = reference
        .iter()
        .filter(|(s, _)| s.split(';').any(|f| f == "runtime.goexit.abi0"))
        .map(|(_, n)| n)
        .sum();
    assert!(
        perf_rooted * 10 < goexit,
        "perf script now unwinds Go: {reference:#?}"
    );
}

/// A real engine with a thread pool: DuckDB's wheel (its library stripped
/// to `.dynsym`) under CPython, `--call-graph dwarf`.
#[test]
fn duckdb_dwarf_perf_data_agrees_with_perf_script() {
    let Some(py) = util::duckdb_python() else {
        return;
    };
    let mut worker = Command::new(py);
    worker.args(["-c", DUCKDB_WORKER]);
    let Some(r) = record_worker(&mut worker, &["--call-graph", "dwarf,16384"]) else {
        return;
    };
    agrees_with_perf_script(&r, &["PyEval_EvalCode"]);
}

/// SHA-256 of every file under `dir` (not in `skip`), by relative path.
fn hashes(dir: &Path) -> Vec<(String, Vec<u8>)> {
    use sha2::Digest;
    let mut v: Vec<(String, Vec<u8>)> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, sha2::Sha256::digest(fs::read(&p).unwrap()).to_vec())
        })
        .collect();
    v.sort();
    v
}

#[test]
fn the_input_is_never_modified_and_outputs_go_beside_it_or_to_o() {
    let Some(r) = fp() else { return };
    let (t, data) = copy(r);
    // perf record keeps the previous recording as perf.data.old.
    fs::copy(&data, t.path().join("perf.data.old")).unwrap();
    let before = hashes(t.path());
    // A directory of perf record outputs: one capture per file.
    let o = process(&[t.path().as_os_str()]);
    assert!(o.status.success(), "{}", text(&o));
    let lines = util::stdout(&o);
    assert_eq!(lines.lines().count(), 2, "{lines}");
    assert!(lines.contains("perf.data: processed"), "{lines}");
    assert!(lines.contains("perf.data.old: processed"), "{lines}");
    for out in ["perf.data.jobprof", "perf.data.old.jobprof"] {
        for f in [
            "stacks.folded",
            "flamegraph.html",
            "flamegraph.svg",
            "summary.json",
            "report.txt",
        ] {
            assert!(t.path().join(out).join(f).is_file(), "{out}/{f}");
        }
    }
    // A second run finds them complete; -o puts one file's elsewhere.
    let again = process(&[data.as_os_str()]);
    assert!(util::stdout(&again).contains("skipped"), "{}", text(&again));
    // A new recording at the same path (perf record renames the old one
    // and writes a new perf.data) is processed again, not skipped.
    let newer = t.path().join("newer/perf.data");
    fs::create_dir(newer.parent().unwrap()).unwrap();
    fs::copy(&data, &newer).unwrap();
    assert!(process(&[newer.as_os_str()]).status.success());
    fs::rename(&newer, newer.with_extension("data.old")).unwrap();
    fs::copy(&data, &newer).unwrap();
    let renewed = process(&[newer.as_os_str()]);
    let line = util::stdout(&renewed);
    assert!(line.contains("perf.data: processed"), "{}", text(&renewed));
    fs::remove_dir_all(newer.parent().unwrap()).unwrap();
    let elsewhere = t.path().join("elsewhere/profile");
    let o = process(&[data.as_os_str(), "-o".as_ref(), elsewhere.as_os_str()]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(elsewhere.join("flamegraph.html").is_file());
    // -o with two files is bad usage.
    let two = process(&[t.path().as_os_str(), "-o".as_ref(), elsewhere.as_os_str()]);
    assert_eq!(two.status.code(), Some(2), "{}", text(&two));
    assert_eq!(hashes(t.path()), before, "the inputs changed");
}

/// Issue 58, item 6: the advice fits what is wrong. A capture recorded
/// without `-g` has no call graph (it was "93.4% truncated ... a frame
/// pointer led nowhere ... -fno-omit-frame-pointer"); a perf.data cut short
/// is truncated (it was "ran for less than one sampling period ... raise
/// --frequency"); a `.qdstrm` is converted with `QdstrmImporter -i FILE`
/// (it was "not a perf.data file").
#[test]
fn the_advice_fits_no_call_graph_a_truncated_file_and_a_qdstrm() {
    let Some(nog) = record(&[]) else { return };
    let (_t, data) = copy(&nog);
    let o = process(&[data.as_os_str()]);
    let all = text(&o);
    assert_eq!(o.status.code(), Some(0), "{all}");
    assert!(
        all.contains("no call graph") && all.contains("record with `perf record -g`"),
        "{all}"
    );
    assert!(
        !all.contains("frame pointer") && !all.contains("% truncated"),
        "{all}"
    );

    let Some(fp) = fp() else { return };
    let (t, full) = copy(fp);
    let cut = t.path().join("cut.data");
    let bytes = fs::read(&full).unwrap();
    fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let o = process(&[cut.as_os_str()]);
    let all = text(&o);
    assert!(all.contains("the file is truncated"), "{all}");
    assert!(
        !all.contains("sampling period") && !all.contains("--frequency"),
        "{all}"
    );

    let qdstrm = t.path().join("q7.qdstrm");
    fs::write(&qdstrm, b"not a report yet").unwrap();
    let o = process(&[qdstrm.as_os_str()]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let err = util::stderr(&o);
    assert!(
        err.contains(&format!("QdstrmImporter -i {}", qdstrm.display())),
        "{err}"
    );
}

/// Issue 58, item 7: errors say the fix, and a batch does the rest. A
/// perf.data in a folder its user cannot write says `-o DIR`; `process
/// fp.data nope.data` processed nothing (exit 2) and now processes fp.data,
/// names nope.data and exits 1, as `cp` does; `report nope.data` printed a
/// raw "(os error 2)" and now says what `process` says; an empty file is
/// said to be empty.
#[test]
fn errors_say_the_fix_and_a_batch_does_the_rest() {
    use std::os::unix::fs::PermissionsExt;
    let Some(fp) = fp() else { return };
    if util::require(
        util::have("setpriv"),
        "setpriv (util-linux), to run as nobody",
    ) {
        let t = tempfile::tempdir().unwrap();
        let ro = t.path().join("ro");
        fs::create_dir(&ro).unwrap();
        let data = ro.join("fp.data");
        fs::copy(&fp.data, &data).unwrap();
        fs::set_permissions(&data, fs::Permissions::from_mode(0o644)).unwrap();
        fs::set_permissions(&ro, fs::Permissions::from_mode(0o555)).unwrap();
        fs::set_permissions(t.path(), fs::Permissions::from_mode(0o755)).unwrap();
        let o = Command::new("setpriv")
            .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups"])
            .arg(env!("CARGO_BIN_EXE_jobprof"))
            .arg("process")
            .arg(&data)
            .env("HOME", t.path())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let all = text(&o);
        assert_eq!(o.status.code(), Some(1), "{all}");
        assert!(
            all.contains("Permission denied") && all.contains("-o DIR"),
            "{all}"
        );
    }

    let (t, data) = copy(fp);
    let nope = t.path().join("nope.data");
    let o = process(&[data.as_os_str(), nope.as_os_str()]);
    let all = text(&o);
    assert_eq!(o.status.code(), Some(1), "{all}");
    assert!(
        t.path().join("perf.data.jobprof/flamegraph.html").is_file(),
        "{all}"
    );
    let err = util::stderr(&o);
    assert!(
        err.contains(&format!("{}: does not exist", nope.display())),
        "{err}"
    );

    let o = jobprof().arg("report").arg(&nope).output().unwrap();
    let err = util::stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("does not exist") && !err.contains("os error"),
        "{err}"
    );
    let empty = t.path().join("empty.data");
    fs::write(&empty, b"").unwrap();
    for cmd in ["process", "report"] {
        let o = jobprof().arg(cmd).arg(&empty).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{cmd}: {}", text(&o));
        assert!(
            util::stderr(&o).contains("the file is empty (0 bytes)"),
            "{cmd}: {}",
            text(&o)
        );
    }
}

#[test]
fn a_missing_or_garbage_perf_data_is_exit_2_naming_it() {
    let t = tempfile::tempdir().unwrap();
    let missing = t.path().join("nope/perf.data");
    let garbage = t.path().join("perf.data");
    fs::write(&garbage, b"this is not perf.data\n").unwrap();
    let empty = t.path().join("empty.data");
    fs::write(&empty, b"").unwrap();
    for (file, why) in [
        (&missing, "does not exist"),
        (&garbage, "not a perf.data file"),
        (&empty, "the file is empty (0 bytes)"),
    ] {
        let o = process(&[file.as_os_str()]);
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        let err = util::stderr(&o);
        assert!(err.contains(&file.display().to_string()), "{err}");
        assert!(err.contains(why), "{err}");
    }
    // A directory whose only perf.data is garbage names it too.
    let o = process(&[t.path().as_os_str()]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        util::stderr(&o).contains(&garbage.display().to_string()),
        "{}",
        text(&o)
    );
    assert!(!t.path().join("perf.data.jobprof").exists());
}

#[test]
fn fold_symbolizes_a_perf_data_natively() {
    let Some(r) = fp() else { return };
    let (t, data) = copy(r);
    let before = hashes(t.path());
    let tmp = tempfile::tempdir().unwrap();
    // `jobprof fold perf.data --kernel`, user-space part.
    let native = user_part(&data, &tmp.path().join("native.folded"));
    let reference_text = tmp.path().join("reference.script");
    let o = Command::new("perf")
        .args(["script", "-i"])
        .arg(&data)
        .stderr(Stdio::null())
        .output()
        .unwrap();
    assert!(o.status.success());
    fs::write(&reference_text, o.stdout).unwrap();
    let reference = user_part(&reference_text, &tmp.path().join("reference.folded"));
    crate::native::assert_agreement("fold perf.data vs perf script | fold", &native, &reference);
    assert_eq!(hashes(t.path()), before, "fold wrote beside its input");
}

#[test]
fn render_and_report_read_a_perf_data() {
    let Some(r) = fp() else { return };
    let (t, data) = copy(r);
    let before = hashes(t.path());
    let tmp = tempfile::tempdir().unwrap();
    let folded = tmp.path().join("fold.folded");
    let o = jobprof()
        .arg("fold")
        .arg(&data)
        .arg("-o")
        .arg(&folded)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let rendered = tmp.path().join("render.folded");
    let o = jobprof()
        .arg("render")
        .arg(&data)
        .arg("-o")
        .arg(&rendered)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(util::folded(&rendered), util::folded(&folded));
    let html = tmp.path().join("flamegraph.html");
    let o = jobprof()
        .arg("render")
        .arg(&data)
        .arg("-o")
        .arg(&html)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let o = jobprof().arg("report").arg(&data).output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let report = util::stdout(&o);
    let head = format!("# jobprof report: {}", data.display());
    assert!(report.starts_with(&head), "{report}");
    assert!(report.contains("[.] compute_stage"), "{report}");
    assert_eq!(
        hashes(t.path()),
        before,
        "render or report wrote beside the input"
    );
}

/// Issue 56: `fold`, `render`, `report` and `diff` on a perf.data run in
/// memory, its samples handed from the symbolizer to the command: with
/// `TMPDIR` naming no directory (they made one there for a whole
/// `process` run to write into and read back) each still works, names
/// the worker's functions and writes nothing beside the input.
#[test]
fn file_commands_on_a_perf_data_need_no_temporary_directory() {
    let Some(r) = fp() else { return };
    let (t, data) = copy(r);
    let before = hashes(t.path());
    let none = t.path().join("no-such-tmp");
    let data = data.to_str().unwrap();
    let commands: [&[&str]; 4] = [
        &["fold", data],
        &["render", data],
        &["report", data],
        &["diff", data, data],
    ];
    for args in commands {
        let o = jobprof().args(args).env("TMPDIR", &none).output().unwrap();
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", text(&o));
        let out = util::stdout(&o);
        assert!(out.contains("compute_stage"), "{args:?}: {out}");
    }
    assert!(!none.exists());
    assert_eq!(hashes(t.path()), before, "a command wrote beside its input");
}

/// `jobprof fold perf.data` folds the samples in memory as it folds the
/// `perf script` text the same symbolizer prints for them (the archive
/// `process` writes), byte for byte: from the samples' fields by default,
/// from that text under `--compat inferno` (inferno reads text).
#[test]
fn fold_of_a_perf_data_is_the_fold_of_its_text() {
    let Some(r) = fp() else { return };
    let (t, data) = copy(r);
    let out = t.path().join("out");
    let o = jobprof()
        .arg("process")
        .arg("-o")
        .arg(&out)
        .arg(&data)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let archive = out.join("perf.script.zst");
    for opts in [&[][..], &["--compat", "inferno"], &["--all", "--addrs"]] {
        let fold = |input: &Path| {
            let o = jobprof()
                .arg("fold")
                .args(opts)
                .arg(input)
                .output()
                .unwrap();
            assert_eq!(o.status.code(), Some(0), "{opts:?}: {}", text(&o));
            o.stdout
        };
        let (in_memory, of_text) = (fold(&data), fold(&archive));
        assert!(!in_memory.is_empty(), "{opts:?}");
        assert!(in_memory == of_text, "{opts:?}: the folds differ");
    }
}

/// `stack before after` lines of a `.folded` diff: each side's weight by
/// stack.
fn diff_sides(diff: &Path) -> [HashMap<String, u64>; 2] {
    let mut sides = [HashMap::new(), HashMap::new()];
    for line in fs::read_to_string(diff).unwrap().lines() {
        let mut it = line.rsplitn(3, ' ');
        let (after, before, stack) = (it.next(), it.next(), it.next());
        let (Some(a), Some(b), Some(stack)) = (after, before, stack) else {
            panic!("not a diff line: {line}");
        };
        for (side, n) in sides.iter_mut().zip([b, a]) {
            *side.entry(stack.to_string()).or_default() += n.parse::<u64>().unwrap();
        }
    }
    sides
}

#[test]
fn diff_reads_two_perf_data_files_as_perf_script_folds_them() {
    let Some(fp) = fp() else { return };
    let (ta, a) = copy(fp);
    let (tb, b) = copy(fp);
    let inputs = [hashes(ta.path()), hashes(tb.path())];
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("diff.folded");
    let o = jobprof()
        .arg("diff")
        .arg(&a)
        .arg(&b)
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let [before, after] = diff_sides(&out);
    for (data, side, name) in [(&a, before, "BEFORE"), (&b, after, "AFTER")] {
        let script = tmp.path().join(format!("{name}.script"));
        perf_script(data, &script);
        let folded = tmp.path().join(format!("{name}.folded"));
        let o = jobprof()
            .arg("fold")
            .arg(&script)
            .arg("-o")
            .arg(&folded)
            .output()
            .unwrap();
        assert!(o.status.success(), "jobprof fold: {}", text(&o));
        let reference = util::folded(&folded);
        let side: HashMap<String, u64> = side.into_iter().filter(|(_, n)| *n > 0).collect();
        crate::native::assert_agreement(&format!("diff {name} vs perf script"), &side, &reference);
    }
    // An HTML page too, and nothing written beside the inputs.
    let html = tmp.path().join("diff.html");
    let o = jobprof()
        .arg("diff")
        .arg(&a)
        .arg(&b)
        .arg("-o")
        .arg(&html)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert!(fs::read_to_string(&html).unwrap().contains("compute_stage"));
    assert_eq!([hashes(ta.path()), hashes(tb.path())], inputs);
}

#[test]
fn a_directory_of_perf_record_outputs_is_processed_and_reprocessed() {
    let Some(r) = fp() else { return };
    let (t, data) = copy(r);
    let q1 = t.path().join("q1.perf.data");
    fs::copy(&data, &q1).unwrap();
    let before = hashes(t.path());
    let o = process(&[t.path().as_os_str()]);
    assert!(o.status.success(), "{}", text(&o));
    let lines = util::stdout(&o);
    assert!(lines.contains("/perf.data: processed"), "{lines}");
    assert!(lines.contains("q1.perf.data: processed"), "{lines}");
    // q1's flamegraph is perf script's.
    let tmp = tempfile::tempdir().unwrap();
    let script = tmp.path().join("q1.script");
    perf_script(&q1, &script);
    let reference = user_part(&script, &tmp.path().join("q1.folded"));
    let zst = fs::read(t.path().join("q1.perf.data.jobprof/perf.script.zst")).unwrap();
    let native_text = tmp.path().join("native.script");
    fs::write(&native_text, zstd::decode_all(&zst[..]).unwrap()).unwrap();
    let native = user_part(&native_text, &tmp.path().join("native.folded"));
    crate::native::assert_agreement("q1.perf.data vs perf script", &native, &reference);
    // reprocess finds both complete (their output directories are not
    // captures of their own), then redoes both with --force.
    let reprocess = |args: &[&str]| {
        jobprof()
            .arg("reprocess")
            .args(args)
            .arg(t.path())
            .env_remove("SLURM_ARRAY_TASK_ID")
            .output()
            .unwrap()
    };
    let counts = |o: &Output| -> Vec<(String, u64)> {
        let out = util::stdout(o);
        out.lines()
            .filter_map(|l| {
                let (name, n) = l.trim().rsplit_once(' ')?;
                Some((name.trim().to_string(), n.parse().ok()?))
            })
            .collect()
    };
    let o = reprocess(&[]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(util::stdout(&o).contains(" 2 capture(s)"), "{}", text(&o));
    assert!(counts(&o).contains(&("skipped".into(), 2)), "{}", text(&o));
    fs::remove_dir_all(t.path().join("q1.perf.data.jobprof")).unwrap();
    let o = reprocess(&["--no-inline"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(util::stdout(&o).contains(" 2 capture(s)"), "{}", text(&o));
    assert!(
        counts(&o).contains(&("processed".into(), 1)),
        "{}",
        text(&o)
    );
    assert!(counts(&o).contains(&("skipped".into(), 1)), "{}", text(&o));
    let again = util::folded(&t.path().join("q1.perf.data.jobprof/stacks.folded"));
    assert_eq!(
        again.values().sum::<u64>(),
        util::folded_total(&t.path().join("perf.data.jobprof/stacks.folded"))
    );
    let now: Vec<_> = hashes(t.path());
    assert_eq!(now, before, "the inputs changed");
}
