//! `jobprof fold`: the peers' own test suites in compat mode, differential
//! tests against the inferno library, expected outputs for the default mode
//! (bless with `JOBPROF_BLESS=1`), the loss fixes, and the CLI's handling of
//! bad input. Every folding case runs with 1 and N threads.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use jobprof::text::fold::{Compat, Folder, Options};

use crate::util::jobprof;
use crate::util::{self, read, shared_compat};

const THREADS: [usize; 2] = [1, 4];

/// Decompresses `.gz`/`.zst` fixtures so the inferno library sees plain text.
pub fn load(path: &Path) -> Vec<u8> {
    let raw = read(path);
    let name = path.to_string_lossy();
    if name.ends_with(".gz") {
        let mut out = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::MultiGzDecoder::new(&raw[..]), &mut out)
            .unwrap();
        out
    } else if name.ends_with(".zst") {
        zstd::decode_all(&raw[..]).unwrap()
    } else {
        raw
    }
}

/// Option sets with inferno-collapse-perf's flags, by the suffix FlameGraph's
/// results use.
pub fn option_sets() -> Vec<(&'static str, Options)> {
    // Options is #[non_exhaustive]: each set is the default with a change.
    fn with(change: fn(&mut Options)) -> Options {
        let mut o = Options::default();
        change(&mut o);
        o
    }
    vec![
        ("plain", Options::default()),
        ("pid", with(|o| o.include_pid = true)),
        ("tid", with(|o| o.include_tid = true)),
        ("kernel", with(|o| o.annotate_kernel = true)),
        ("jit", with(|o| o.annotate_jit = true)),
        (
            "all",
            with(|o| {
                o.annotate_kernel = true;
                o.annotate_jit = true;
            }),
        ),
        ("addrs", with(|o| o.include_addrs = true)),
    ]
}

/// Folds with inferno 0.12.8's library and the same options.
pub fn inferno_fold(data: &[u8], o: &Options, threads: usize) -> Vec<u8> {
    use inferno::collapse::Collapse;
    let mut io = inferno::collapse::perf::Options::default();
    io.include_pid = o.include_pid;
    io.include_tid = o.include_tid;
    io.annotate_kernel = o.annotate_kernel;
    io.annotate_jit = o.annotate_jit;
    io.include_addrs = o.include_addrs;
    io.event_filter = o.event_filter.clone();
    io.skip_after = o.skip_after.clone();
    io.nthreads = threads;
    let mut out = Vec::new();
    inferno::collapse::perf::Folder::from(io)
        .collapse(data, &mut out)
        .expect("inferno folds in memory");
    out
}

/// Folds with inferno, or `None` where inferno panics (it asserts that the
/// first sample names an event).
pub fn inferno_fold_checked(data: &[u8], o: &Options, threads: usize) -> Option<Vec<u8>> {
    static QUIET: std::sync::Once = std::sync::Once::new();
    QUIET.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let inferno = info
                .location()
                .is_some_and(|l| l.file().contains("inferno"));
            if !inferno {
                default(info);
            }
        }));
    });
    std::panic::catch_unwind(|| inferno_fold(data, o, threads)).ok()
}

/// Folds with jobprof's library.
pub fn jobprof_fold(data: &[u8], o: &Options, threads: usize, chunk: usize) -> Vec<u8> {
    let opts = {
        let mut o = o.clone();
        o.threads = threads;
        o.chunk_size = chunk;
        o
    };
    Folder::new(opts).fold_bytes(data).to_bytes()
}

fn compat(o: Options) -> Options {
    {
        let mut o = o;
        o.compat = Compat::Inferno;
        o
    }
}

fn strip_quotes(b: &[u8]) -> Vec<u8> {
    b.iter()
        .copied()
        .filter(|&c| c != b'\'' && c != b'"')
        .collect()
}

// ---------------------------------------------------------------------------
// The peers' own suites (../shared/compat): 100% must match.

#[test]
fn flamegraph_golden_results_match_in_compat_mode() {
    let Some(compat_dir) = shared_compat() else {
        util::require(
            false,
            "../shared/compat (the peers' suites: FlameGraph golden results)",
        );
        return;
    };
    let dir = compat_dir.join("flamegraph-57207af");
    let mut checked = 0;
    for entry in std::fs::read_dir(dir.join("results")).unwrap() {
        let result = entry.unwrap().path();
        let stem = result.file_stem().unwrap().to_string_lossy().into_owned();
        let (name, flag) = stem.rsplit_once("-collapsed-").unwrap();
        // inferno's own results replace Perl's for this input (README of compat/).
        if name == "perf-rust-Yamakaky-dcpu" {
            continue;
        }
        let input = [format!("{name}.txt"), format!("{name}.txt.gz")]
            .iter()
            .map(|f| dir.join(f))
            .find(|p| p.exists())
            .unwrap();
        let data = load(&input);
        let (_, opts) = option_sets().into_iter().find(|(n, _)| *n == flag).unwrap();
        let want = strip_quotes(&read(&result));
        for t in THREADS {
            let got = strip_quotes(&jobprof_fold(&data, &compat(opts.clone()), t, 1 << 12));
            assert!(
                got == want,
                "{stem} with {t} thread(s) differs from FlameGraph's result"
            );
        }
        checked += 1;
    }
    assert!(checked >= 60, "only {checked} FlameGraph results found");
}

#[test]
fn inferno_golden_results_match_in_compat_mode() {
    let Some(compat_dir) = shared_compat() else {
        util::require(
            false,
            "../shared/compat (the peers' suites: inferno golden results)",
        );
        return;
    };
    let dir = compat_dir.join("inferno-0.12.8");
    let fg = compat_dir.join("flamegraph-57207af");
    let mut checked = 0;
    for entry in std::fs::read_dir(dir.join("results")).unwrap() {
        let result = entry.unwrap().path();
        let stem = result.file_stem().unwrap().to_string_lossy().into_owned();
        let (name, flag) = match stem.rsplit_once("-collapsed-") {
            Some((n, f)) => (n.to_string(), f.to_string()),
            None => (
                stem.trim_end_matches("-collapsed").to_string(),
                "plain".to_string(),
            ),
        };
        let input = [
            dir.join(format!("{name}.txt")),
            fg.join(format!("{name}.txt")),
            fg.join(format!("{name}.txt.gz")),
        ]
        .into_iter()
        .find(|p| p.exists())
        .unwrap_or_else(|| panic!("no input for {stem}"));
        let data = load(&input);
        let (_, opts) = option_sets().into_iter().find(|(n, _)| *n == flag).unwrap();
        let want = read(&result);
        for t in THREADS {
            let got = jobprof_fold(&data, &compat(opts.clone()), t, 1 << 12);
            assert!(
                got == want,
                "{stem} with {t} thread(s) differs from inferno's result"
            );
        }
        checked += 1;
    }
    assert!(checked >= 15, "only {checked} inferno results found");
}

// ---------------------------------------------------------------------------
// Differential: every input we have, every option set, 1 and N threads.

fn all_inputs() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = Vec::new();
    let mut add_dir = |d: PathBuf| {
        if let Ok(rd) = std::fs::read_dir(&d) {
            for e in rd {
                let p = e.unwrap().path();
                let n = p.file_name().unwrap().to_string_lossy().into_owned();
                if n.ends_with(".txt") || n.ends_with(".txt.gz") || n.ends_with(".txt.zst") {
                    v.push(p);
                }
            }
        }
    };
    add_dir(util::fixtures());
    if let Some(c) = shared_compat() {
        add_dir(c.join("flamegraph-57207af"));
        add_dir(c.join("inferno-0.12.8"));
    }
    v.sort();
    v
}

/// Inputs that inferno can read without panicking: every input but
/// simpleperf's layout (see `simpleperf_text_is_folded_by_default_only`).
fn inferno_inputs() -> Vec<PathBuf> {
    all_inputs()
        .into_iter()
        .filter(|p| !p.ends_with("simpleperf.perf.txt"))
        .collect()
}

#[test]
fn compat_mode_equals_inferno_library_on_every_input_and_option_set() {
    let inputs = inferno_inputs();
    assert!(!inputs.is_empty());
    for input in &inputs {
        let data = load(input);
        for (flag, opts) in option_sets() {
            let want = inferno_fold(&data, &opts, 1);
            for t in THREADS {
                for chunk in [1 << 10, 1 << 20] {
                    let got = jobprof_fold(&data, &compat(opts.clone()), t, chunk);
                    assert!(
                        got == want,
                        "{} --{flag}: jobprof (threads {t}, chunk {chunk}) differs from inferno",
                        input.display()
                    );
                }
            }
        }
    }
}

#[test]
fn compat_mode_equals_inferno_with_event_filter_and_skip_after() {
    let inputs = inferno_inputs();
    for input in &inputs {
        let data = load(input);
        let opts = {
            let mut o = Options::default();
            o.event_filter = Some("cpu-clock".into());
            o.skip_after = vec!["main".into(), "start_thread".into()];
            o
        };
        let want = inferno_fold(&data, &opts, 1);
        for t in THREADS {
            let got = jobprof_fold(&data, &compat(opts.clone()), t, 1 << 11);
            assert!(got == want, "{}: differs from inferno", input.display());
        }
    }
}

// ---------------------------------------------------------------------------
// Default mode: expected outputs, blessed with JOBPROF_BLESS=1.

#[test]
fn default_mode_expected_outputs() {
    let bless = std::env::var_os("JOBPROF_BLESS").is_some();
    let expected_dir = util::repo_root().join("tests/expected/fold");
    let mut seen = 0;
    for input in all_inputs()
        .iter()
        .filter(|p| p.starts_with(util::fixtures()))
    {
        let name = input.file_name().unwrap().to_string_lossy().into_owned();
        let base = name
            .trim_end_matches(".zst")
            .trim_end_matches(".gz")
            .trim_end_matches(".txt");
        let data = load(input);
        let got = jobprof_fold(&data, &Options::default(), 1, 1 << 20);
        for t in THREADS {
            assert_eq!(
                jobprof_fold(&data, &Options::default(), t, 1 << 10),
                got,
                "{name}: output depends on threads/chunking"
            );
        }
        let expected = expected_dir.join(format!("{base}.folded"));
        if bless {
            std::fs::create_dir_all(&expected_dir).unwrap();
            std::fs::write(&expected, &got).unwrap();
        } else {
            let want = std::fs::read(&expected).unwrap_or_else(|_| {
                panic!(
                    "{} missing: run with JOBPROF_BLESS=1 to create it",
                    expected.display()
                )
            });
            assert!(
                got == want,
                "{name}: default-mode output changed (JOBPROF_BLESS=1 to accept)"
            );
        }
        seen += 1;
    }
    if !util::fixtures().join("README.md").exists() {
        eprintln!("*** no fixtures yet: default-mode expected outputs not checked ***");
    } else {
        assert!(seen > 0, "fixtures/ has no perf script text");
    }
}

// ---------------------------------------------------------------------------
// The peers' losses, fixed in the default mode (each also checked in compat
// mode to show the loss is real there).

fn both(text: &str) -> (String, String) {
    let d = jobprof_fold(text.as_bytes(), &Options::default(), 1, 1 << 20);
    let c = jobprof_fold(text.as_bytes(), &compat(Options::default()), 1, 1 << 20);
    assert_eq!(c, inferno_fold(text.as_bytes(), &Options::default(), 1));
    (String::from_utf8(d).unwrap(), String::from_utf8(c).unwrap())
}

#[test]
fn header_only_samples_are_kept_as_bare_process_stacks() {
    let text = "worker 10 1.0: 100 cpu-clock:\n\tffff f (/bin/w)\n\nworker 10 1.1: 250 cpu-clock:\n\nworker 10 1.2: 5 cpu-clock:\n";
    let (d, c) = both(text);
    assert_eq!(d, "worker 255\nworker;f 100\n");
    assert_eq!(c, "worker;f 100\n");
}

#[test]
fn anonymous_namespace_frames_are_kept() {
    let text = "q 1 1.0: 1 cpu-clock:\n\t1 (anonymous namespace)::scan(int) (/bin/q)\n\t2 main (/bin/q)\n\nq 1 1.1: 1 cpu-clock:\n\t1 (anonymous namespace)::only() (/bin/q)\n\n";
    let (d, c) = both(text);
    assert_eq!(
        d,
        "q;(anonymous namespace)::only 1\nq;main;(anonymous namespace)::scan 1\n"
    );
    assert_eq!(c, "q;main 1\n");
}

#[test]
fn anonymous_executable_memory_is_jit_code_by_default_only() {
    // Real perf text of a JIT runtime without a perf map (Firefox profiler's
    // graphviz capture has the same frames): `[unknown] (//anon)`.
    let text = "node 7/7 1.0: 1 cpu-clock:\n\t7f3a2c001234 [unknown] (//anon)\n\t55d0 main (/usr/bin/node)\n\n";
    let mut o = Options::default();
    o.annotate_kernel = true;
    o.annotate_jit = true;
    let d = jobprof_fold(text.as_bytes(), &o, 1, 1 << 20);
    let c = jobprof_fold(text.as_bytes(), &compat(o.clone()), 1, 1 << 20);
    assert_eq!(
        String::from_utf8(c.clone()).unwrap(),
        "node;main;[anon] 1\n"
    );
    assert_eq!(c, inferno_fold(text.as_bytes(), &o, 1));
    assert_eq!(String::from_utf8(d).unwrap(), "node;main;[anon]_[j] 1\n");
}

#[test]
fn tracepoint_events_with_colons_are_parsed() {
    let text = "cat 7 [000] 1.0: 1 syscalls:sys_enter_openat: dfd: 0xffffff9c, filename: 0x7f\n\t1 do_open (/bin/cat)\n\ncat 7 [000] 1.1: 1 syscalls:sys_enter_close: fd: 3\n\t2 do_close (/bin/cat)\n\n";
    let (d, _c) = both(text);
    // Only the first event is folded, with its own frames; inferno lumps
    // every syscalls:* tracepoint into one event.
    assert_eq!(d, "cat;do_open 1\n");
    let close = {
        let mut o = Options::default();
        o.event_filter = Some("syscalls:sys_enter_close".into());
        o
    };
    let d = jobprof_fold(text.as_bytes(), &close, 1, 1 << 20);
    assert_eq!(String::from_utf8(d).unwrap(), "cat;do_close 1\n");
}

#[test]
fn exiting_tasks_and_dso_paths_with_spaces_are_kept() {
    let text = ":-1    -1 [001] 1.0: 1 cpu-clock:\n\tffff exit_mm (/lib/modules/x.ko)\n\napp 3 1.1: 1 cpu-clock:\n\t1 work+0x1 (/opt/my app/bin/app)\n\n";
    let (d, c) = both(text);
    assert_eq!(d, ":-1;exit_mm 1\napp;work 1\n");
    // inferno takes the period for the pid, mangles the process name, reads
    // an empty event name, and then filters out every later sample.
    assert_eq!(c, ":-1____-1_[001]_1.0:;exit_mm 1\n");
}

#[test]
fn samples_without_blank_lines_between_them_are_all_kept() {
    // `perf script -F comm,tid,time,event` without callchains.
    let text = "a 1 1.0: 1 cpu-clock:\na 1 1.1: 1 cpu-clock:\nb 2 1.2: 1 cpu-clock:\n";
    let (d, c) = both(text);
    assert_eq!(d, "a 2\nb 1\n");
    assert_eq!(c, "");
}

#[test]
fn capture_cut_at_the_start_keeps_the_samples_that_follow() {
    // The tail of a sample whose header was cut off, as `tail -c` or a
    // split file leaves it: a C++ frame with `::` parses as a header whose
    // event is the DSO group.
    let text = "x-gnu/lib/libLLVM.so.22)\n\t    7f11b47bc520 [unknown] ([unknown])\n\t         8097940 llvm::X86Subtarget::~X86Subtarget+0x0 (/lib/libLLVM.so.22)\n\n\
                rustc 23698 [000]   689.134628:    1001001 cpu-clock: \n\t  58ff475 main+0xb5 (/bin/rustc)\n\n\
                xz 23655 [001]   689.135546:    1001001 cpu-clock: \n\t  15a20 lzma+0x1 (/lib/liblzma.so)\n\n";
    let (d, c) = both(text);
    assert_eq!(d, "rustc;main 1001001\nxz;lzma 1001001\n");
    assert_eq!(c, "", "inferno filters every real sample out");
    let f = Folder::new(Options::default()).fold_bytes(text.as_bytes());
    assert_eq!(f.stats.skipped_lines, 3);
    assert_eq!(
        f.stats.first_skipped[1].kind,
        jobprof::text::fold::SkippedKind::OrphanFrame
    );
}

#[test]
fn event_filter_base_name_matches_modifiers() {
    let text = "a 1 1.0: 3 cycles:u:\n\t1 f (/x)\n\na 1 1.1: 4 cycles:k:\n\t1 g (/x)\n\na 1 1.2: 9 instructions:u:\n\t1 h (/x)\n\n";
    let d = jobprof_fold(text.as_bytes(), &Options::default(), 1, 1 << 20);
    assert_eq!(String::from_utf8(d).unwrap(), "a;f 3\na;g 4\n");
    let i = {
        let mut o = Options::default();
        o.event_filter = Some("instructions".into());
        o
    };
    assert_eq!(jobprof_fold(text.as_bytes(), &i, 2, 8), b"a;h 9\n");
}

#[test]
fn totals_equal_the_sum_of_periods_of_the_selected_event() {
    let text = "w 1 1.0: 10 cpu-clock:\n\t1 f (/x)\n\nw 1 1.1: 20 cpu-clock:\n\nw 1 1.2: 30 cpu-clock:\n\t1 (anonymous namespace)::g() (/x)\n\nw 1 1.3: 99 page-faults:\n\t1 f (/x)\n\n";
    let f = Folder::new(Options::default()).fold_bytes(text.as_bytes());
    assert_eq!(f.total(), 60);
    assert_eq!(f.stats.samples, 3);
    assert_eq!(f.stats.filtered_samples, 1);
}

// ---------------------------------------------------------------------------
// The CLI: outputs, statistics and bad input.

fn write_tmp(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

const SMALL: &str = "w 1 1.0: 10 cpu-clock:\n\t1 f (/x)\n\t2 main (/x)\n\n";

#[test]
fn cli_folds_file_to_stdout_and_output_file() {
    let dir = tempfile::tempdir().unwrap();
    let input = write_tmp(dir.path(), "in.txt", SMALL.as_bytes());
    let out = jobprof().arg("fold").arg(&input).output().unwrap();
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "# counts: ns\nw;main;f 10\n"
    );
    let dest = dir.path().join("out.folded");
    let st = jobprof()
        .args(["fold", "-o"])
        .arg(&dest)
        .arg(&input)
        .status()
        .unwrap();
    assert!(st.success());
    assert_eq!(
        std::fs::read_to_string(&dest).unwrap(),
        "# counts: ns\nw;main;f 10\n"
    );
}

#[test]
fn cli_output_to_a_fifo_is_written_in_place_not_replaced() {
    // What `-o /dev/null` or `-o >(gzip > x.gz)` needs: a temporary file
    // renamed over /dev/null would replace the device for the whole machine
    // (the FIFO stands in for it here, harmlessly).
    use std::os::unix::fs::FileTypeExt;
    let dir = tempfile::tempdir().unwrap();
    let input = write_tmp(dir.path(), "in.txt", SMALL.as_bytes());
    let fifo = dir.path().join("out.pipe");
    let status = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(status.success());
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read_to_string(fifo).unwrap())
    };
    let st = jobprof()
        .args(["fold", "-o"])
        .arg(&fifo)
        .arg(&input)
        .status()
        .unwrap();
    assert!(st.success());
    // Checked before joining: had the FIFO been replaced, the reader would
    // wait for a writer forever.
    assert!(std::fs::symlink_metadata(&fifo)
        .unwrap()
        .file_type()
        .is_fifo());
    assert_eq!(reader.join().unwrap(), "# counts: ns\nw;main;f 10\n");
}

#[test]
fn cli_refuses_an_output_that_is_an_input_and_leaves_it_alone() {
    let dir = tempfile::tempdir().unwrap();
    let input = write_tmp(dir.path(), "in.txt", SMALL.as_bytes());
    let other = write_tmp(dir.path(), "other.txt", SMALL.as_bytes());
    // Also through a second name for the same file.
    let alias = dir.path().join("alias.txt");
    std::os::unix::fs::symlink(&input, &alias).unwrap();
    for out in [&input, &alias] {
        let o = jobprof()
            .args(["fold", "-o"])
            .arg(out)
            .arg(&other)
            .arg(&input)
            .output()
            .unwrap();
        assert_eq!(
            o.status.code(),
            Some(2),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(String::from_utf8_lossy(&o.stderr).contains("the output is also an input"));
        assert_eq!(std::fs::read_to_string(&input).unwrap(), SMALL);
    }
}

#[test]
fn cli_merges_shards_and_reads_gzip_zstd_and_stdin() {
    let dir = tempfile::tempdir().unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(SMALL.as_bytes()).unwrap();
    let a = write_tmp(dir.path(), "a.data", &gz.finish().unwrap());
    let b = write_tmp(
        dir.path(),
        "b",
        &zstd::encode_all(SMALL.as_bytes(), 3).unwrap(),
    );
    let mut child = jobprof()
        .args(["fold", "-j", "2"])
        .arg(&a)
        .arg(&b)
        .arg("-")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(SMALL.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "# counts: ns\nw;main;f 30\n"
    );
}

/// A perf.data is symbolized natively (tests/perf_data.rs); a damaged one
/// is exit 2 naming it and saying it cannot be symbolized.
#[test]
fn cli_names_a_damaged_perf_data_with_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let p = write_tmp(dir.path(), "perf.data", b"PERFILE2\x68\0\0\0\0\0\0\0rest");
    let out = jobprof().arg("fold").arg(&p).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&p.display().to_string()) && err.contains("cannot be symbolized"),
        "{err}"
    );
}

#[test]
fn simpleperf_text_is_folded_by_default_only() {
    // Android simpleperf's report_sample.py layout: a tab after the comm and
    // before the period, frames `%16x\tSYMBOL (DSO)`.
    let input = util::fixtures().join("simpleperf.perf.txt");
    let data = load(&input);
    let got = String::from_utf8(jobprof_fold(&data, &Options::default(), 1, 1 << 20)).unwrap();
    assert_eq!(
        got,
        "Binder_thread_#2;__start_thread;ioctl;el0_svc_handler 250000\n\
         RenderThread;__start_thread;android::Looper::loop;android::Looper::pollOnce 500000\n"
    );
    // inferno cannot read it (it panics), and --compat inferno stays as
    // inferno reads the lines: not one is a sample, nothing is folded.
    assert_eq!(inferno_fold_checked(&data, &Options::default(), 1), None);
    assert!(jobprof_fold(&data, &compat(Options::default()), 1, 1 << 20).is_empty());
    let out = jobprof()
        .args(["fold", "--compat", "inferno"])
        .arg(&input)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", util::output_text(&out));
    assert!(out.stdout.is_empty());
}

#[test]
fn cli_input_without_one_sample_is_exit_2_naming_what_it_is() {
    let dir = tempfile::tempdir().unwrap();
    let folded = write_tmp(dir.path(), "stacks.folded", b"w;main;f 30\nw;main 2\n");
    let out = jobprof().arg("fold").arg(&folded).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", util::output_text(&out));
    assert!(out.stdout.is_empty(), "no output on error");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("stacks.folded")
            && err.contains("not one line is a `perf script` sample")
            && err.contains("folded stacks")
            && err.contains("jobprof render"),
        "{err}"
    );
    // Into a file: nothing is written.
    let dst = dir.path().join("out.folded");
    let out = jobprof()
        .arg("fold")
        .arg(&folded)
        .arg("-o")
        .arg(&dst)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(!dst.exists());
    let report = write_tmp(
        dir.path(),
        "report.txt",
        b"# Overhead  Command  Shared Object\n    45.10%  worker  libc.so.6  [.] memcpy\n",
    );
    let out = jobprof().arg("fold").arg(&report).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("`perf report` output"));
    // Empty or comment-only text is an empty capture, not an error; and
    // samples of another event are samples.
    for (name, text) in [
        ("empty.txt", &b""[..]),
        ("comments.txt", &b"# perf script header only\n"[..]),
    ] {
        let p = write_tmp(dir.path(), name, text);
        let out = jobprof().arg("fold").arg(&p).output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{name}: {}",
            util::output_text(&out)
        );
    }
    let other = write_tmp(
        dir.path(),
        "other-event.txt",
        b"w 1/1 [000] 1.0: 1 cycles:\n\t1 f+0x1 (/w)\n\n",
    );
    let out = jobprof()
        .args(["fold", "--event-filter", "cpu-clock"])
        .arg(&other)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", util::output_text(&out));
    // inferno's mode prints an empty fold, as inferno does.
    let out = jobprof()
        .args(["fold", "--compat", "inferno"])
        .arg(&folded)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", util::output_text(&out));
}

#[test]
fn cli_refuses_other_binary_data() {
    let dir = tempfile::tempdir().unwrap();
    let p = write_tmp(dir.path(), "x.bin", b"\x7fELF\x02\x01\x01\0\0\0");
    let out = jobprof().arg("fold").arg(&p).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("x.bin"));
}

#[test]
fn cli_missing_file_names_the_path_exit_2() {
    let out = jobprof()
        .args(["fold", "/nonexistent/jobprof/in.txt"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/jobprof/in.txt"));
}

#[test]
fn cli_corrupt_compressed_input_leaves_no_output_file() {
    let dir = tempfile::tempdir().unwrap();
    let mut z = zstd::encode_all(SMALL.repeat(2000).as_bytes(), 3).unwrap();
    z.truncate(z.len() / 2);
    let zst = write_tmp(dir.path(), "cut.zst", &z);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(SMALL.repeat(2000).as_bytes()).unwrap();
    let mut g = gz.finish().unwrap();
    let mid = g.len() / 2;
    g[mid] ^= 0xff;
    g[mid + 1] ^= 0xff;
    let gzp = write_tmp(dir.path(), "bad.gz", &g);
    for input in [zst, gzp] {
        let dest = dir.path().join("out.folded");
        let out = jobprof()
            .args(["fold", "-o"])
            .arg(&dest)
            .arg(&input)
            .output()
            .unwrap();
        assert_ne!(out.status.code(), Some(0), "{}", input.display());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(&*input.to_string_lossy()), "{err}");
        assert!(!dest.exists());
        // Nothing half-written left behind either.
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert!(
            names
                .iter()
                .all(|n| !n.to_string_lossy().contains("out.folded")),
            "{names:?}"
        );
    }
}

#[test]
fn cli_empty_input_gives_empty_output() {
    let dir = tempfile::tempdir().unwrap();
    let p = write_tmp(dir.path(), "empty.txt", b"");
    let out = jobprof().arg("fold").arg(&p).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(out.stdout.is_empty());
}

#[test]
fn cli_capture_cut_mid_line_folds_what_is_complete() {
    let dir = tempfile::tempdir().unwrap();
    let text = format!("{SMALL}w 1 1.1: 5 cpu-clock:\n\t1 g (/x)\n\t2 main (/x");
    let p = write_tmp(dir.path(), "cut.txt", text.as_bytes());
    let out = jobprof()
        .args(["fold", "--stats"])
        .arg(&p)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "# counts: ns\nw;g 5\nw;main;f 10\n"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cut.txt:7") && err.contains("mid-line"),
        "{err}"
    );
}

#[test]
fn cli_non_utf8_and_unrecognised_lines_are_counted_never_fatal() {
    let dir = tempfile::tempdir().unwrap();
    let mut text = b"w 1 1.0: 1 cpu-clock:\n\t1 f\xff\xfe (/x)\n\tnot a frame\n\n".to_vec();
    text.extend_from_slice(b"garbage header line\n\n");
    text.extend_from_slice(SMALL.as_bytes());
    let p = write_tmp(dir.path(), "odd.txt", &text);
    let out = jobprof()
        .args(["fold", "--stats"])
        .arg(&p)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("w;f\u{fffd}\u{fffd} 1"), "{stdout}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("odd.txt:3: not a frame line"), "{err}");
    assert!(err.contains("odd.txt:5: not a sample header"), "{err}");
    assert!(err.contains("2 skipped lines"), "{err}");
    assert!(err.contains("not valid UTF-8"), "{err}");
}

#[test]
fn cli_stats_line_has_every_figure() {
    let dir = tempfile::tempdir().unwrap();
    let p = write_tmp(dir.path(), "in.txt", SMALL.repeat(10).as_bytes());
    let out = jobprof()
        .args(["fold", "--stats", "-q", "-o"])
        .arg(dir.path().join("o"))
        .arg(&p)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let want = format!(
        "{} bytes, 10 samples, 1 unique stacks, 0 skipped lines",
        SMALL.len() * 10
    );
    assert!(
        err.contains(&want) && err.contains(" s, ") && err.contains("MB/s"),
        "{err}"
    );
}

#[test]
fn cli_broken_pipe_exits_zero() {
    let dir = tempfile::tempdir().unwrap();
    let mut text = String::new();
    for i in 0..20000 {
        text.push_str(&format!("w 1 1.0: 1 cpu-clock:\n\t1 f{i} (/x)\n\n"));
    }
    let p = write_tmp(dir.path(), "many.txt", text.as_bytes());
    let status = std::process::Command::new("bash")
        .arg("-c")
        .arg(format!(
            "'{}' fold '{}' | head -n 1 >/dev/null; exit ${{PIPESTATUS[0]}}",
            env!("CARGO_BIN_EXE_jobprof"),
            p.display()
        ))
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(0));
}

#[test]
fn cli_usage_errors_exit_2() {
    let out = jobprof().args(["fold", "--threads", "0"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = jobprof().args(["fold", "--no-such-flag"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn a_line_after_replayed_blocks_is_reported_at_its_own_line() {
    // The second and third samples' frames are a block folded before
    // (replayed from the folder's block cache): lines are still counted.
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.script");
    let sample = "w 1 1.0: 1 cpu-clock:\n\t1 a (/bin/w)\n\t2 b (/bin/w)\n\n";
    fs::write(&input, format!("{sample}{sample}{sample}\tnot a frame\n")).unwrap();
    let out = jobprof().arg("fold").arg(&input).output().unwrap();
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout), "w;b;a 3\n");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("in.script:13: frame line outside a sample"),
        "{err}"
    );
}
