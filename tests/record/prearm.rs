//! Pre-arming (issue 18): the sidecar attaches the next capture's shards
//! disabled ahead of its query, so that `start` only enables them. Real
//! perf on real multi-threaded workers; no timed assertions (the latency
//! is measured by benches/prearm.sh).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;
use std::process::Command;
use std::thread::sleep;
use std::time::Duration;

use jobprof_capture_format::{parse_dropped_tsv, EndCause, Phase};

use super::{components, counters_agree, ok, perf_children, serial, total_samples, wait_for, Rig};

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

/// Samples per thread id in one data file.
fn samples_by_tid(data: &Path) -> BTreeMap<u32, usize> {
    let out = Command::new("perf")
        .args(["script", "-F", "tid", "-i"])
        .arg(data)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut by = BTreeMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        if let Ok(t) = line.trim().parse::<u32>() {
            *by.entry(t).or_insert(0) += 1;
        }
    }
    by
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
fn record_threads_that_exit_or_start_while_armed() {
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
    // 8 new threads, created by the main thread while armed: followed by
    // --inherit, not attached again.
    rig.cue('N');
    let created: BTreeSet<u32> = tids(pid).difference(&survivors).copied().collect();
    assert_eq!(created.len(), 8);
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
    let rows = rig.shards("q1");
    assert_eq!(rows.len(), 5, "{rows:?}");
    assert!(
        rows.iter().all(|r| r.clean_exit() && r.thread_count == 1),
        "{rows:?}"
    );
    // Every new thread was sampled, each in exactly one shard (no thread
    // recorded twice).
    let mut files_per_tid: BTreeMap<u32, usize> = BTreeMap::new();
    let mut new_samples = 0;
    for r in &rows {
        for (tid, n) in samples_by_tid(&dir.join(&r.data_file)) {
            *files_per_tid.entry(tid).or_default() += 1;
            if created.contains(&tid) {
                new_samples += n;
            }
        }
    }
    eprintln!("samples of the 8 threads created while armed: {new_samples}");
    assert!(
        new_samples > 0,
        "threads created while armed were not followed"
    );
    assert!(files_per_tid.values().all(|&n| n == 1), "{files_per_tid:?}");
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
