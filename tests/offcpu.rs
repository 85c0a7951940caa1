//! Off-CPU and wall-clock profiles (issue 28) from real captures: the real
//! sidecar with `--off-cpu` next to real workers, then `jobprof process`.
//!
//! - tests/programs/offcpu.c: a query thread that per 200 ms burns 50 ms,
//!   sleeps 100 ms in nanosleep and waits 50 ms on a condition variable
//!   signalled by another thread, self-timed against the clock so that the
//!   shares hold on a loaded machine; its main thread blocks in
//!   pthread_join for the whole window.
//! - tests/programs/churn.c: threads born and ending during the window.
//!
//! Needs perf that can record, tracefs and gcc; without them each test says
//! so loudly and fails under CI=true. One capture at a time (a lock), so
//! that perf sessions do not starve each other on a small machine.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use jobprof::symbolize::native::OffCpuRecords;
use jobprof::symbolize::sample::Frames;
use jobprof::text::offcpu::parse::{Event, LineParser};
use jobprof::text::offcpu::ShardLog;
use serde_json::Value;

use crate::util::{self, summary};
use crate::util::{capture_q1, jobprof, output_text, perf_can_record, program, require};

static LOCK: Mutex<()> = Mutex::new(());

const OFFCPU_C: &str = "tests/programs/offcpu.c";

/// perf, tracefs and the worker program, or a loud skip.
fn components(name: &str, src: &str, flags: &[&str]) -> Option<PathBuf> {
    if !require(
        perf_can_record(),
        "perf that can record (install linux-perf, run as root)",
    ) {
        return None;
    }
    if !util::tracefs_sched_switch() {
        return None;
    }
    let prog = program(name, src, flags);
    require(prog.is_some(), &format!("gcc (to build {src})")).then_some(prog?)
}

/// What every test here starts from: the worker program built, the lock
/// that keeps captures one at a time held, a temporary directory and the
/// worker's cue path in it.
pub(crate) struct Setup {
    prog: PathBuf,
    pub(crate) dir: tempfile::TempDir,
    cue: PathBuf,
    _one: MutexGuard<'static, ()>,
}

/// [`Setup`] with the worker `name` built from `src`, or a loud skip.
fn setup(name: &str, src: &str, flags: &[&str]) -> Option<Setup> {
    let prog = components(name, src, flags)?;
    let _one = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let cue = dir.path().join("cue");
    Some(Setup {
        prog,
        dir,
        cue,
        _one,
    })
}

/// [`Setup`] for tests/programs/offcpu.c, and the worker started.
pub(crate) fn offcpu_worker() -> Option<(Setup, Child)> {
    let s = setup("offcpu-worker", OFFCPU_C, &["-O0", "-g"])?;
    let worker = launch(&s.prog, &s.cue, &[s.cue.to_str().unwrap()]);
    Some((s, worker))
}

/// Starts `prog ARGS` and waits for its `CUE.ack`.
fn launch(prog: &Path, cue: &Path, args: &[&str]) -> Child {
    let mut child = Command::new(prog)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let ack = PathBuf::from(format!("{}.ack", cue.display()));
    if util::poll_until(Duration::from_secs(10), Duration::from_millis(20), || {
        ack.exists()
    }) {
        return child;
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("{} never wrote {}", prog.display(), ack.display());
}

/// Captures q1 of `worker` for `seconds` with `options`, processes it and
/// returns the capture directory.
fn capture_and_process(dir: &Path, worker: &mut Child, options: &str, seconds: u64) -> PathBuf {
    capture_and_process_with(dir, worker, options, seconds, &[])
}

/// [`capture_and_process`], with `process_args` after `process ROOT`.
pub(crate) fn capture_and_process_with(
    dir: &Path,
    worker: &mut Child,
    options: &str,
    seconds: u64,
    process_args: &[&str],
) -> PathBuf {
    let root = dir.join("out");
    capture_q1(
        dir,
        &root,
        worker,
        options,
        &[],
        seconds,
        Duration::from_secs(120),
    );
    let out = jobprof()
        .arg("process")
        .arg(&root)
        .args(process_args)
        .output()
        .unwrap();
    assert!(out.status.success(), "process: {}", output_text(&out));
    root.join("worker_0/q1")
}

/// The share of `window` that the stacks of `folded` containing `frame` hold.
fn share(folded: &Path, frame: &str, window: u64) -> f64 {
    let text = fs::read_to_string(folded).unwrap();
    let ns: u64 = text
        .lines()
        .filter(|l| l.split(';').any(|f| f.starts_with(frame)))
        .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
        .sum();
    ns as f64 / window as f64
}

fn threads(s: &Value) -> &Vec<Value> {
    s["off_cpu"]["threads"].as_array().unwrap()
}

fn total(t: &Value) -> u64 {
    [
        "on_cpu_ns",
        "runnable_ns",
        "sleeping_ns",
        "uninterruptible_ns",
        "other_ns",
        "unknown_ns",
    ]
    .iter()
    .map(|k| t[k].as_u64().unwrap())
    .sum()
}

#[test]
fn offcpu_burn_sleep_wait_shares_and_a_thread_blocked_all_window() {
    let Some((s, mut worker)) = offcpu_worker() else {
        return;
    };
    let dir = &s.dir;
    // dwarf: glibc has no frame pointers, and the condvar wait's user
    // frames are below pthread_cond_wait.
    let cap = capture_and_process(dir.path(), &mut worker, "--off-cpu --call-graph dwarf", 4);
    let s = summary(&cap);
    let window = s["off_cpu"]["window_ns"].as_u64().unwrap();
    assert!(window > 3_000_000_000, "window {window} ns");
    for name in [
        "offcpu.folded",
        "offcpu.svg",
        "offcpu.html",
        "wallclock.folded",
    ] {
        assert!(cap.join(name).is_file(), "{name} missing");
    }
    // report.txt ends with the per-thread totals.
    let text = fs::read_to_string(cap.join("report.txt")).unwrap();
    assert!(text.contains("# time per thread"), "{text}");
    assert!(text.contains("Off-CPU: window"), "{text}");
    // Its table is of the sampling event, as the flamegraph, not of the
    // switch tracepoint that comes first in the text.
    assert!(text.contains("  of event 'cpu-clock'"), "{text}");
    assert!(!text.contains("of event 'sched:sched_switch'"), "{text}");
    let sleep = share(&cap.join("offcpu.folded"), "phase_sleep", window);
    let wait = share(&cap.join("offcpu.folded"), "phase_wait", window);
    let burn = share(&cap.join("wallclock.folded"), "phase_burn", window);
    let report = format!("sleep {sleep:.3} wait {wait:.3} burn {burn:.3}");
    assert!((sleep - 0.50).abs() <= 0.10, "{report}");
    assert!((wait - 0.25).abs() <= 0.05, "{report}");
    assert!((burn - 0.25).abs() <= 0.06, "{report}");
    // The sleep is S, on the nanosleep path; the wait is on a futex.
    let off = fs::read_to_string(cap.join("offcpu.folded")).unwrap();
    assert!(off.lines().any(|l| l.contains("phase_sleep")
        && l.contains("nanosleep")
        && l.contains("[off-cpu S: sleeping]")));
    assert!(off
        .lines()
        .any(|l| l.contains("phase_wait") && l.contains("futex")));
    // Every thread lived the whole window: its time adds up to it.
    let ts = threads(&s);
    assert!(ts.len() >= 4, "{ts:?}");
    for t in ts {
        let tot = total(t);
        assert!(
            tot.abs_diff(window) <= window / 100,
            "{t} vs window {window}"
        );
    }
    // The main thread sat in pthread_join: no switch in the window.
    let blocked = ts
        .iter()
        .filter(|t| t["switches"] == 0 && t["unknown_ns"].as_u64() == Some(window))
        .count();
    assert_eq!(blocked, 1, "{ts:?}");
    assert!(off.contains("[blocked since before the window]"));
    // The colours: the state frames are drawn blue/purple.
    let svg = fs::read_to_string(cap.join("wallclock.svg")).unwrap();
    assert!(svg.contains("rgb(79,127,208)"), "no blue off-CPU frame");
    job_views_and_diff(&cap);
}

/// The query's merged views, the job page's columns and `jobprof diff
/// --kind` of a processed `--off-cpu` capture.
fn job_views_and_diff(cap: &Path) {
    let root = cap.parent().unwrap().parent().unwrap();
    let q = root.join("queries/q1");
    for name in [
        "offcpu.folded",
        "offcpu.html",
        "wallclock.folded",
        "wallclock.html",
    ] {
        assert!(q.join(name).is_file(), "queries/q1/{name} missing");
    }
    // One worker, root frame = worker: the merged view is the capture's.
    let merged = crate::util::folded_total(&q.join("offcpu.folded"));
    assert_eq!(
        merged,
        crate::util::folded_total(&cap.join("offcpu.folded"))
    );
    let page = fs::read_to_string(root.join("index.html")).unwrap();
    assert!(page.contains("On-CPU") && page.contains("worker_0/q1/offcpu.html"));
    for kind in ["off-cpu", "wall-clock"] {
        let out = root.join(format!("diff-{kind}.folded"));
        let o = jobprof()
            .args(["diff", "--kind", kind, "--query", "q1"])
            .arg(root)
            .arg(root)
            .arg("-o")
            .arg(&out)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "diff --kind {kind}: {}",
            output_text(&o)
        );
        let text = fs::read_to_string(&out).unwrap();
        let wanted = if kind == "off-cpu" {
            "[off-cpu S: sleeping]"
        } else {
            "phase_burn"
        };
        assert!(text.contains(wanted), "diff --kind {kind}");
    }
}

#[test]
fn offcpu_churning_worker_accounts_each_thread_within_the_window() {
    let Some(Setup {
        prog,
        dir,
        cue,
        _one,
    }) = setup("offcpu-churn", "tests/programs/churn.c", &["-O1"])
    else {
        return;
    };
    let mut worker = launch(&prog, &cue, &["15", cue.to_str().unwrap(), "200"]);
    let cap = capture_and_process(dir.path(), &mut worker, "--off-cpu --frequency 999", 2);
    let s = summary(&cap);
    let o = &s["off_cpu"];
    let window = o["window_ns"].as_u64().unwrap();
    let ts = threads(&s);
    // The 16 long-lived threads and short-lived ones born in the window.
    assert!(ts.len() > 30, "{} threads", ts.len());
    let mut short = 0;
    for t in ts {
        let tot = total(t);
        assert!(
            tot <= window + window / 100,
            "{t}: more than the window {window}"
        );
        if tot < window / 2 {
            short += 1;
        }
    }
    assert!(
        short > 10,
        "only {short} threads lived less than half the window"
    );
    assert!(o["switch_samples"].as_u64().unwrap() > 100, "{o}");
    let wall = crate::util::folded_total(&cap.join("wallclock.folded"));
    assert!(wall > 0);
    assert!(fs::read_to_string(cap.join("offcpu.folded"))
        .unwrap()
        .contains("churn_"));
}

#[test]
fn offcpu_capture_without_off_cpu_has_no_off_cpu_outputs() {
    let Some((s, mut worker)) = offcpu_worker() else {
        return;
    };
    let dir = &s.dir;
    let cap = capture_and_process(dir.path(), &mut worker, "", 1);
    assert!(!cap.join("offcpu.folded").exists());
    assert!(summary(&cap).get("off_cpu").is_none());
    // The on-CPU profile is unchanged by the option's existence.
    assert!(fs::read_to_string(cap.join("stacks.folded"))
        .unwrap()
        .contains("burn_loop"));
}

#[test]
fn offcpu_capture_without_switch_data_says_so() {
    let Some(Setup { dir, cue, _one, .. }) = setup("offcpu-worker", OFFCPU_C, &["-O0", "-g"])
    else {
        return;
    };
    // One thread asleep the whole capture: no sample, no switch.
    let script = format!("touch '{}.ack'; exec sleep 120", cue.display());
    let mut worker = Command::new("sh")
        .args(["-c", &script])
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let root = dir.path().join("out");
    capture_q1(
        dir.path(),
        &root,
        &mut worker,
        "--off-cpu",
        &[],
        1,
        Duration::from_secs(120),
    );
    let out = jobprof().arg("process").arg(&root).output().unwrap();
    let cap = root.join("worker_0/q1");
    assert!(
        cap.join("summary.json").is_file(),
        "no summary.json: {}",
        output_text(&out)
    );
    let s = summary(&cap);
    let why = s["off_cpu"]["not_drawn"].as_str().unwrap_or_default();
    assert!(why.contains("no off-CPU time to draw"), "{s}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no off-CPU time to draw"),
        "{}",
        output_text(&out)
    );
    assert!(!cap.join("offcpu.svg").exists());
}

/// The perf.data shards of a capture directory (`perf.data`,
/// `perf.data.partNNN`).
fn shards_of(cap: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(cap)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            name == "perf.data" || name.starts_with("perf.data.part")
        })
        .collect();
    v.sort();
    v
}

/// The records of `perf script --ns --show-switch-events
/// --show-task-events` text as the off-CPU accounting reads them, without
/// the samples' stacks.
fn events_of_text(text: &str) -> Vec<Event> {
    let mut p = LineParser::default();
    let mut v = Vec::new();
    for l in text.lines() {
        p.line(l, &mut |e| v.push(e));
    }
    p.finish(&mut |e| v.push(e));
    for e in &mut v {
        if let Event::Sample { stack, .. } = e {
            stack.clear();
        }
    }
    v
}

/// What the native symbolizer's run over shard `d` logs for the off-CPU
/// accounting, as the pipeline logs it.
fn events_logged(d: &Path) -> Vec<Event> {
    let sym = jobprof::symbolize::native::Symbolizer::new(Default::default());
    let (mut frames, mut log) = (Frames::default(), ShardLog::default());
    let o = sym
        .run(d, None, |mut batch| {
            frames.take(&mut batch);
            log.push(&batch, &frames);
            Ok(())
        })
        .unwrap();
    assert_eq!(o.off_cpu, OffCpuRecords::Handed, "{}", d.display());
    log.events()
}

#[test]
fn offcpu_native_pass_reads_what_perf_script_prints_and_accounts_the_same() {
    let Some((s, mut worker)) = offcpu_worker() else {
        return;
    };
    let cap = capture_and_process(s.dir.path(), &mut worker, "--off-cpu", 2);
    let native_summary = summary(&cap);
    let warnings = native_summary["warnings"].to_string();
    assert!(
        !warnings.contains("off-CPU pass: perf script"),
        "{warnings}"
    );
    let read = |name: &str| fs::read_to_string(cap.join(name)).unwrap();
    let (off, wall) = (read("offcpu.folded"), read("wallclock.folded"));
    // The wall-clock profile's on-CPU part is the flame graph's stacks,
    // inline frames included (before the off-CPU pass was its own, its
    // stacks lacked the inline frames the flame graph has).
    let sorted = |t: &str, keep: &dyn Fn(&str) -> bool| {
        let mut v: Vec<String> = t.lines().filter(|l| keep(l)).map(String::from).collect();
        v.sort();
        v
    };
    assert_eq!(
        sorted(&wall, &|l| !l.contains("[off-cpu")),
        sorted(&read("stacks.folded"), &|_| true),
        "{}",
        cap.display()
    );
    // The samples (times, threads, events, periods, switch-out states)
    // and the SWITCH, COMM, FORK and EXIT records, in order, as the
    // accounting reads them from perf script's text.
    let shards = shards_of(&cap);
    assert!(!shards.is_empty(), "no shard in {}", cap.display());
    for d in &shards {
        let perf = Command::new("perf")
            .args([
                "script",
                "--ns",
                "--show-switch-events",
                "--show-task-events",
                "-i",
            ])
            .arg(d)
            .output()
            .unwrap();
        let theirs = events_of_text(&String::from_utf8_lossy(&perf.stdout));
        let switch = |e: &&Event| matches!(e, Event::Switch { .. });
        let state = |e: &&Event| {
            matches!(
                e,
                Event::Sample {
                    prev_state: Some(_),
                    ..
                }
            )
        };
        assert!(theirs.iter().any(|e| switch(&e)), "{}", d.display());
        assert!(theirs.iter().any(|e| state(&e)), "{}", d.display());
        let mine = events_logged(d);
        for (k, (x, y)) in mine.iter().zip(&theirs).enumerate() {
            assert_eq!(x, y, "record {k} of {}", d.display());
        }
        assert_eq!(mine.len(), theirs.len(), "{}", d.display());
    }
    // The same profiles and totals from `--symbolizer perf`.
    let root = cap.parent().unwrap().parent().unwrap();
    let out = jobprof()
        .args(["process", "--force", "--symbolizer", "perf"])
        .arg(root)
        .output()
        .unwrap();
    assert!(out.status.success(), "process: {}", output_text(&out));
    let perf_summary = summary(&cap);
    assert!(
        perf_summary["symbolized_from"] != native_summary["symbolized_from"],
        "not processed again with perf script: {}",
        perf_summary["symbolized_from"]
    );
    assert_eq!(read("offcpu.folded"), off);
    assert_eq!(read("wallclock.folded"), wall);
    for key in [
        "window_ns",
        "switch_samples",
        "switch_records",
        "totals",
        "threads",
    ] {
        assert_eq!(
            perf_summary["off_cpu"][key], native_summary["off_cpu"][key],
            "{key}"
        );
    }
}

/// `offset:NN;` of the two-digit fields of the `sched_switch` format in
/// `b` (a shard's tracing data) made `offset:99;`: those fields lie past
/// the end of every record. How many were changed.
fn damage_switch_format(b: &mut [u8]) -> usize {
    let find = |hay: &[u8], what: &[u8]| hay.windows(what.len()).position(|w| w == what);
    let Some(at) = find(b, b"name: sched_switch\n") else {
        return 0;
    };
    let end = at + find(&b[at..], b"print fmt:").unwrap();
    let (mut i, mut n) = (at, 0);
    while let Some(k) = find(&b[i..end], b"offset:") {
        let d = i + k + 7;
        if b[d].is_ascii_digit() && b[d + 1].is_ascii_digit() && b[d + 2] == b';' {
            b[d..d + 2].copy_from_slice(b"99");
            n += 1;
        }
        i = d;
    }
    n
}

/// Issue 35: a damaged tracepoint format (field offsets of 99 in a record
/// of 68 bytes) was folded silently; it is a warning naming the capture.
#[test]
fn offcpu_damaged_switch_fields_are_a_warning_naming_the_capture() {
    let Some((s, mut worker)) = offcpu_worker() else {
        return;
    };
    let cap = capture_and_process(s.dir.path(), &mut worker, "--off-cpu", 2);
    let mut damaged = 0;
    for shard in shards_of(&cap) {
        let mut b = fs::read(&shard).unwrap();
        damaged += damage_switch_format(&mut b);
        fs::write(&shard, b).unwrap();
    }
    assert!(damaged > 0, "no sched_switch format found in the shards");
    let out = jobprof()
        .args(["process", "--force"])
        .arg(cap.parent().unwrap().parent().unwrap())
        .output()
        .unwrap();
    let text = output_text(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    let warned = text.lines().find(|l| {
        l.contains("warning") && l.contains("sched:sched_switch samples have no readable fields")
    });
    let warned = warned.unwrap_or_else(|| panic!("no warning: {text}"));
    assert!(warned.contains("worker_0/q1"), "{warned}");
    let s = summary(&cap);
    assert!(
        s["warnings"].to_string().contains("no readable fields"),
        "{s}"
    );
}

/// With no `perf` anywhere on PATH, the native symbolizer makes the
/// off-CPU pass too, as it makes the on-CPU one: the off-CPU and
/// wall-clock profiles are drawn (they were dropped, "not made", before).
#[test]
fn offcpu_pass_needs_no_perf_when_native_reads_every_shard() {
    let Some((s, mut worker)) = offcpu_worker() else {
        return;
    };
    let dir = s.dir.path();
    let root = dir.join("out");
    let timeout = Duration::from_secs(120);
    capture_q1(dir, &root, &mut worker, "--off-cpu", &[], 2, timeout);
    let empty = tempfile::tempdir().unwrap();
    let out = jobprof()
        .arg("process")
        .arg(&root)
        .env("PATH", empty.path())
        .output()
        .unwrap();
    let log = output_text(&out);
    assert!(out.status.success(), "process: {log}");
    let cap = root.join("worker_0/q1");
    let s = summary(&cap);
    assert!(s["perf_version"].is_null(), "perf was found: {s}");
    assert!(cap.join("offcpu.folded").is_file(), "{log}");
    assert!(cap.join("wallclock.folded").is_file(), "{log}");
    assert!(s["off_cpu"]["switch_samples"].as_u64() > Some(0), "{s}");
}
