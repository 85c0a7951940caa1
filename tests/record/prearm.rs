//! Pre-arming (issue 18): the sidecar attaches the next capture's shards
//! disabled ahead of its query, so that `start` only enables them. Real
//! perf on real multi-threaded workers; no timed assertions (the latency
//! is measured by benches/prearm.sh).

use std::collections::BTreeSet;
use std::fs;
use std::process::{Command, Stdio};
use std::thread::sleep;
use std::time::Duration;

use jobprof_capture_format::{parse_dropped_tsv, EndCause, Phase};

use super::{components, counters_agree, perf_children, serial, total_samples, Rig};
use crate::util::{ok, wait_for};

/// The staging directories of armed captures (`.armed-N`).
fn armed_dirs(rig: &Rig) -> Vec<String> {
    fs::read_dir(rig.path("staging/worker_0"))
        .map(|d| {
            d.filter_map(|e| {
                let n = e.ok()?.file_name().to_string_lossy().into_owned();
                n.starts_with(".armed-").then_some(n)
            })
            .collect()
        })
        .unwrap_or_default()
}

fn tids(pid: u32) -> BTreeSet<u32> {
    fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect()
}

fn open_fds(pid: u32) -> usize {
    fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

#[test]
fn record_prearmed_1000_threads_start_enables_and_shutdown_publishes_nothing_extra() {
    let Some(prog) = components() else { return };
    let _serial = serial();
    // 999 threads + main: 8 shards of at most 128, all attached before
    // `ready`.
    let mut rig = Rig::worker(&prog, 999, 200, 200_000);
    rig.cue('C');
    rig.sidecar(&[]);
    let sidecar = rig.sidecar.as_ref().unwrap().id();
    assert_eq!(armed_dirs(&rig), vec![".armed-1".to_string()]);
    let perfs = perf_children(sidecar);
    assert_eq!(perfs.len(), 8, "armed perf processes: {perfs:?}");
    let fds: usize = perfs.iter().map(|&p| open_fds(p)).sum();
    eprintln!(
        "armed: 8 perf processes hold {fds} descriptors for 1000 threads, the sidecar {}",
        open_fds(sidecar)
    );
    // Phase C runs only while armed: nothing of it may be sampled.
    sleep(Duration::from_millis(1500));
    rig.cue('A');
    ok(&rig.driver("start", "q1"));
    assert!(armed_dirs(&rig).is_empty(), "the armed capture became q1");
    rig.cue('B');
    sleep(Duration::from_millis(1500));
    ok(&rig.driver("stop", "q1"));
    rig.cue('C');
    // The next capture is armed right after q1 was published.
    // (Its directory appears when arming begins; capture.json is written
    // once every shard is attached.)
    let next = rig.path("staging/worker_0/.armed-2/capture.json");
    wait_for(
        "the next capture to be armed",
        Duration::from_secs(300),
        || fs::read_to_string(&next).is_ok_and(|j| j.contains("\"armed_unix_ns\": 1")),
    );
    assert_eq!(armed_dirs(&rig), vec![".armed-2".to_string()]);
    ok(&rig.shutdown());
    let out = rig.finish_sidecar();
    ok(&out);
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(
        log.contains("the armed capture (shutdown) never sampled"),
        "{log}"
    );

    let meta = rig.capture("q1");
    assert!(meta.valid, "{meta:?}");
    assert_eq!(meta.ended_by, Some(EndCause::Stop));
    let armed = meta.armed_unix_ns.expect("armed_unix_ns");
    let requested = meta
        .phases
        .iter()
        .find(|p| p.phase == Phase::Requested)
        .unwrap();
    assert!(armed < requested.unix_ns, "{meta:?}");
    for p in Phase::ALL {
        assert!(meta.reached(p), "phase {p} missing: {meta:?}");
    }
    // Nothing was mapped and no thread created while armed: the armed
    // shards sampled.
    assert_eq!(meta.reattached_because, None, "{meta:?}");
    assert_eq!(meta.shard_count, 8);
    assert_eq!(meta.target_thread_count, 1000);
    counters_agree(&rig, "q1");
    let dir = rig.capture_dir("q1");
    let (_, b, c) = total_samples(&dir, &rig.shards("q1"));
    eprintln!("samples: beta {b}, gamma {c}");
    assert!(b > 0, "no samples of the query");
    assert_eq!(c, 0, "armed shards sampled");

    // Shutdown while armed: only q1 is published, nothing is left.
    let published: Vec<String> = fs::read_dir(rig.path("out/worker_0"))
        .unwrap()
        .filter_map(|e| {
            let e = e.ok()?;
            e.file_type()
                .ok()?
                .is_dir()
                .then(|| e.file_name().to_string_lossy().into_owned())
        })
        .filter(|n| n != "symfs")
        .collect();
    assert_eq!(published, vec!["q1".to_string()]);
    assert!(
        !rig.path("staging/worker_0").exists(),
        "staging left behind"
    );
    assert!(perf_children(sidecar).is_empty());
}

#[test]
fn record_threads_that_exit_while_armed_are_dropped() {
    let Some(prog) = components() else { return };
    let _serial = serial();
    // One thread per shard: the 4 threads that end while armed take their
    // shards with them.
    let mut rig = Rig::worker(&prog, 8, 2000, 20_000);
    rig.sidecar(&["--threads-per-shard", "1"]);
    let pid = rig.pid();
    let first = tids(pid);
    assert_eq!(first.len(), 9);
    rig.cue('E');
    wait_for("4 threads to end", Duration::from_secs(30), || {
        tids(pid).len() == 5
    });
    let survivors = tids(pid);
    let ended: BTreeSet<u32> = first.difference(&survivors).copied().collect();
    ok(&rig.driver("start", "q1"));
    rig.cue('B');
    sleep(Duration::from_millis(1500));
    ok(&rig.driver("stop", "q1"));
    ok(&rig.shutdown());
    ok(&rig.finish_sidecar());

    let meta = rig.capture("q1");
    assert!(meta.valid, "{meta:?}");
    counters_agree(&rig, "q1");
    let dir = rig.capture_dir("q1");
    let dropped =
        parse_dropped_tsv(&fs::read_to_string(dir.join("perf-dropped-tids.tsv")).unwrap()).unwrap();
    let gone: BTreeSet<u32> = dropped.iter().map(|d| d.tid).collect();
    assert_eq!(gone, ended, "{dropped:?}");
    assert!(
        dropped.iter().all(|d| d.reason == "exited while armed"),
        "{dropped:?}"
    );
    assert_eq!(meta.dropped_shard_count, 4);
    // Threads ending while armed leave perf's records complete: the armed
    // shards are used, not attached again.
    assert_eq!(meta.reattached_because, None);
    let rows = rig.shards("q1");
    assert_eq!(rows.len(), 5, "{rows:?}");
    assert!(
        rows.iter().all(|r| r.clean_exit() && r.thread_count == 1),
        "{rows:?}"
    );
    let (_, b, _) = total_samples(&dir, &rows);
    assert!(b > 0);
}

#[test]
fn record_no_prearm_attaches_at_start() {
    let Some(prog) = components() else { return };
    let _serial = serial();
    let mut rig = Rig::worker(&prog, 300, 2000, 1_000_000);
    rig.sidecar(&["--no-prearm"]);
    let sidecar = rig.sidecar.as_ref().unwrap().id();
    assert!(armed_dirs(&rig).is_empty());
    assert!(perf_children(sidecar).is_empty(), "perf runs before start");
    ok(&rig.driver("start", "q1"));
    rig.cue('B');
    sleep(Duration::from_millis(1000));
    ok(&rig.driver("stop", "q1"));
    assert!(armed_dirs(&rig).is_empty());
    ok(&rig.shutdown());
    ok(&rig.finish_sidecar());
    let meta = rig.capture("q1");
    assert!(meta.valid, "{meta:?}");
    assert_eq!(meta.armed_unix_ns, None);
    assert_eq!(meta.shard_count, 3);
    counters_agree(&rig, "q1");
}

#[test]
fn record_sigkill_while_armed_leaves_nothing_the_next_sidecar_keeps() {
    let Some(prog) = components() else { return };
    let _serial = serial();
    let mut rig = Rig::worker(&prog, 8, 2000, 20_000);
    rig.sidecar(&[]);
    let sidecar = rig.sidecar.as_ref().unwrap().id();
    let perfs = perf_children(sidecar);
    assert!(!perfs.is_empty());
    super::unsafe_kill(sidecar, 9);
    rig.finish_sidecar();
    // perf gets SIGTERM from the kernel (PR_SET_PDEATHSIG) and exits.
    wait_for(
        "the armed perf processes to exit",
        Duration::from_secs(60),
        || {
            perfs.iter().all(|p| {
                fs::read_to_string(format!("/proc/{p}/stat"))
                    .map_or(true, |s| s.contains(") Z ") || !s.contains("(perf)"))
            })
        },
    );
    assert_eq!(armed_dirs(&rig), vec![".armed-1".to_string()]);

    // A new sidecar on the same staging removes it (it never sampled) and
    // arms its own.
    rig.sidecar(&[]);
    ok(&rig.driver("start", "q1"));
    ok(&rig.driver("stop", "q1"));
    ok(&rig.shutdown());
    let out = rig.finish_sidecar();
    ok(&out);
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(
        log.contains(".armed-1 (armed by an earlier sidecar, never sampled)"),
        "{log}"
    );
    assert!(rig.capture("q1").valid);
    counters_agree(&rig, "q1");
    assert!(
        !rig.path("staging/worker_0").exists(),
        "staging left behind"
    );
}

#[test]
fn record_nofile_limit_too_low_for_arming_says_so_and_does_not_arm() {
    let Some(prog) = components() else { return };
    let _serial = serial();
    // 100 threads in one shard need about 6 descriptors each (more with
    // more CPUs): far above a limit of 256.
    let mut rig = Rig::worker(&prog, 99, 2000, 1_000_000);
    let args = rig.default_args(&[]);
    let child = std::process::Command::new("sh")
        .arg("-c")
        .arg("ulimit -n 256 && exec \"$0\" \"$@\"")
        .arg(crate::util::recorder())
        .args(&args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    rig.sidecar = Some(child);
    let ready = rig.token(".perf_sidecar_ready_w0");
    wait_for("ready", Duration::from_secs(120), || ready.exists());
    assert!(armed_dirs(&rig).is_empty());
    let sidecar = rig.sidecar.as_ref().unwrap().id();
    assert!(
        perf_children(sidecar).is_empty(),
        "perf runs though not armed"
    );
    ok(&rig.shutdown());
    let out = rig.finish_sidecar();
    ok(&out);
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(
        log.contains("not pre-arming: 100 threads in shards of 128 need about")
            && log.contains("the open-files limit is 256"),
        "{log}"
    );
}

/// A worker that loads a library (`dlopen`) and starts named threads while
/// the capture is armed: perf 6.1 writes no `MMAP`, `FORK` or `COMM` record
/// while its events are disabled, so the sidecar attaches the capture anew
/// at `start`, and after `jobprof process` libm's `cos` is named and every
/// stack's root is a thread's name, none `:TID`.
#[test]
fn record_library_and_threads_new_while_armed_are_named() {
    let Some(late) = late_loader_capture(Cue::WhileArmed) else {
        return;
    };
    let (root, log, folded) = (&late.root, &late.log, &late.folded);
    let q1 = root.join("worker_0/q1");
    // libm was mapped after the symbol snapshot (taken before `ready`): the
    // sidecar adds it (and its debug file) to symfs/ when the capture ends,
    // so its frames are named by function (`__cos_fma`...), not only by
    // the file (`[libm.so.6]`); without its MMAP record they would be
    // `[unknown]`.
    let (mut total, mut named_root, mut in_libm) = (0u64, 0u64, 0u64);
    for line in folded.lines() {
        let (stack, n) = line.rsplit_once(' ').unwrap();
        let n: u64 = n.parse().unwrap();
        total += n;
        let root = stack.split(';').next().unwrap();
        assert!(!root.starts_with(':'), "a thread without its name: {line}");
        if root.starts_with("late_cos") {
            named_root += n;
            assert!(!stack.contains("[unknown]"), "an unnamed frame: {line}");
        }
        if stack
            .split(';')
            .any(|f| f.contains("libm") || f == "cos" || f.starts_with("__cos"))
        {
            in_libm += n;
        }
    }
    let (_, in_cos) = late_cos_samples(folded);
    eprintln!(
        "samples: {total}, in late_cos threads {named_root}, in libm {in_libm}, in cos {in_cos}"
    );
    assert!(
        named_root > 0,
        "no sample under the threads' names:\n{folded}"
    );
    assert!(
        in_libm * 2 > named_root,
        "libm's frames are not named:\n{folded}"
    );
    assert!(
        in_cos * 2 > named_root,
        "libm's functions are not named (named by file only?):\n{folded}"
    );
    assert!(log.contains("symfs: added "), "{log}");
    assert_libm_added(root, "q1");
    // The sidecar says why it attached again, counted.
    assert!(log.contains("attached anew at `start`"), "{log}");

    let meta: jobprof_capture_format::Capture =
        serde_json::from_slice(&crate::util::read(&q1.join("capture.json"))).unwrap();
    assert!(meta.valid, "{meta:?}");
    assert!(meta.armed_unix_ns.is_some(), "{meta:?}");
    let why = meta.reattached_because.clone().unwrap_or_default();
    assert!(
        why.contains("1 executable mapping") && why.contains("2 threads"),
        "{meta:?}"
    );
    assert_eq!(meta.target_thread_count, 3, "{meta:?}");
}

/// A library loaded (and threads started) DURING a capture: the capture
/// ends, the sidecar adds the library to symfs/ before publishing it, and
/// its functions are named in the processed stacks.
#[test]
fn record_library_loaded_during_a_capture_is_named() {
    let Some(late) = late_loader_capture(Cue::DuringCapture) else {
        return;
    };
    let (root, log, folded) = (&late.root, &late.log, &late.folded);
    assert!(log.contains("symfs: added "), "{log}");
    assert_libm_added(root, "q1");
    let (in_threads, in_cos) = late_cos_samples(folded);
    eprintln!("in late_cos threads {in_threads}, in cos {in_cos}");
    assert!(
        in_threads > 0,
        "no sample under the threads' names:\n{folded}"
    );
    assert!(
        in_cos * 2 > in_threads,
        "libm's functions are not named (named by file only?):\n{folded}"
    );
}

/// When tests/programs/late_loader.c is told to load libm and start its
/// `late_cos` threads.
#[derive(PartialEq)]
enum Cue {
    /// After `ready`, before `start`: while the capture is armed.
    WhileArmed,
    /// After `start`.
    DuringCapture,
}

/// A late_loader capture `q1` (2 s), processed into stacks.folded.
struct LateCapture {
    _tmp: tempfile::TempDir,
    /// The published perf root.
    root: std::path::PathBuf,
    /// The sidecar's stderr.
    log: String,
    /// q1's stacks.folded.
    folded: String,
}

/// Records tests/programs/late_loader.c with the sidecar, cued as `cue`
/// says, and processes the capture; None without perf.
fn late_loader_capture(cue_at: Cue) -> Option<LateCapture> {
    components()?;
    let Some(prog) = crate::util::program(
        "record-late-loader",
        "tests/programs/late_loader.c",
        &["-O1", "-ldl"],
    ) else {
        panic!("cannot build tests/programs/late_loader.c");
    };
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let cue = tmp.path().join("load");
    let (tokens, root, staging) = (
        tmp.path().join("tokens"),
        tmp.path().join("perf"),
        tmp.path().join("staging"),
    );
    fs::create_dir_all(&tokens).unwrap();
    let mut worker = Command::new(&prog)
        .arg(&cue)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let pid = worker.id();
    let mut sidecar = crate::util::sidecar_command(&tokens, 0, pid, &root, &staging)
        .args(["--frequency", "999", "--start-timeout", "120"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // `ready` comes after arming: from here on the shards are armed.
    crate::util::wait_sidecar_ready(&mut sidecar, &mut worker, &tokens, Duration::from_secs(300));
    let start = || crate::util::record_driver(&tokens, 0, &["start", "--query", "q1"]);
    if cue_at == Cue::DuringCapture {
        start();
    }
    fs::write(&cue, "").unwrap();
    wait_for(
        "libm loaded and 2 threads started",
        Duration::from_secs(30),
        || tids(pid).len() == 3,
    );
    if cue_at == Cue::WhileArmed {
        start();
    }
    sleep(Duration::from_millis(2000));
    crate::util::record_driver(&tokens, 0, &["stop", "--query", "q1"]);
    crate::util::record_driver(&tokens, 0, &["shutdown"]);
    let out = sidecar.wait_with_output().unwrap();
    let _ = worker.kill();
    let _ = worker.wait();
    ok(&out);
    let log = String::from_utf8_lossy(&out.stderr).into_owned();
    let out = crate::util::jobprof()
        .arg("process")
        .arg(&root)
        .args(["--formats", "folded", "--min-symbolized", "0"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        crate::util::output_text(&out)
    );
    let folded = fs::read_to_string(root.join("worker_0/q1/stacks.folded")).unwrap();
    Some(LateCapture {
        _tmp: tmp,
        root,
        log,
        folded,
    })
}

/// (weight under the `late_cos` threads, weight with a libm `cos` frame
/// named by function) in a folded text.
fn late_cos_samples(folded: &str) -> (u64, u64) {
    let (mut in_threads, mut in_cos) = (0, 0);
    for line in folded.lines() {
        let (stack, n) = line.rsplit_once(' ').unwrap();
        let n: u64 = n.parse().unwrap();
        let mut frames = stack.split(';');
        if frames.next().is_some_and(|r| r.starts_with("late_cos")) {
            in_threads += n;
            if frames.any(|f| f == "cos" || f.starts_with("__cos")) {
                in_cos += n;
            }
        }
    }
    (in_threads, in_cos)
}

/// The published manifest lists libm (mapped after `ready`) as added when
/// capture `q` ended, and the published symfs/ holds it.
fn assert_libm_added(root: &std::path::Path, q: &str) {
    let manifest = fs::read_to_string(root.join("worker_0/symbol-manifest.tsv")).unwrap();
    let row = manifest
        .lines()
        .find(|l| l.starts_with("binary\t") && l.contains("/libm.so.6\t"))
        .unwrap_or_else(|| panic!("no row for libm:\n{manifest}"));
    assert!(
        row.ends_with(&format!(
            "\tcopied [mapped after ready; added when {q} ended]"
        )),
        "{manifest}"
    );
    let path = row.split('\t').nth(1).unwrap();
    let copy = root
        .join("worker_0/symfs")
        .join(path.trim_start_matches('/'));
    assert_eq!(
        fs::metadata(&copy).unwrap().len(),
        fs::metadata(path).unwrap().len()
    );
}
