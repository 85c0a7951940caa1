//! Issue 11 against real perf: a worker churning ~300 short-lived threads a
//! second (tests/programs/churn.c) publishes valid captures for every query, a
//! sidecar SIGKILLed after `stop` keeps the published capture, stale tokens of
//! a dead sidecar are not trusted, and `--max-shard-size` stops a shard
//! cleanly.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use jobprof_capture_format::{Capture, Phase};

use super::{components, counters_agree, fails_with, perf_children, serial, unsafe_kill, Rig};
use crate::util::{ok, wait_for};
use crate::util::{recorder, require};

/// The thread-churning worker (tests/programs/churn.c), compiled once.
fn churn_program() -> Option<PathBuf> {
    crate::util::program("record-churn", "tests/programs/churn.c", &["-O1"])
}

/// Runs `jobprof ARGS`.
fn jobprof(args: &[&Path]) -> Output {
    crate::util::jobprof().args(args).output().unwrap()
}

#[test]
fn record_churning_worker_all_queries_publish_valid_captures() {
    let Some(_) = components() else { return };
    let Some(prog) = churn_program() else {
        require(false, "gcc (to build tests/programs/churn.c)");
        return;
    };
    let _serial = serial();
    // 127 long-lived threads, ~300 short-lived ones a second (1-20 ms each):
    // the newest TIDs vanish while perf attaches.
    let mut rig = Rig::launch(&prog, |cue| {
        vec!["127".into(), cue.display().to_string(), "300".into()]
    });
    rig.sidecar(&[]);
    let queries = ["q1", "q2", "q3", "q4", "q5", "q6"];
    for q in queries {
        ok(&rig.driver("start", q));
        sleep(Duration::from_millis(400));
        ok(&rig.driver("stop", q));
        // Published before `stop` returned.
        assert!(rig.capture(q).reached(Phase::Published), "{q}");
    }
    ok(&rig.shutdown());
    ok(&rig.finish_sidecar());
    let mut most = 0;
    for q in queries {
        let meta = rig.capture(q);
        assert!(meta.valid, "{q}: {meta:?}");
        // The 127 long-lived threads and the main one, at least; a
        // short-lived one only when one was alive at that instant (about 3
        // are on average: a capture attached anew at start, because
        // threads were created while armed, can list none of them).
        assert!(meta.target_thread_count >= 128, "{q}: {meta:?}");
        most = most.max(meta.target_thread_count);
        counters_agree(&rig, q);
    }
    assert!(most >= 129, "no capture targeted a short-lived thread");
    let out = jobprof(&[Path::new("process"), &rig.path("out")]);
    ok(&out);
    for q in queries {
        let dir = rig.capture_dir(q);
        let svg = fs::read_to_string(dir.join("flamegraph.svg"))
            .unwrap_or_else(|e| panic!("{q}: no flamegraph.svg: {e}"));
        assert!(svg.contains("churn_long_work"), "{q}: no long-lived frames");
    }
}

#[test]
fn record_sigkill_after_stop_keeps_the_published_capture() {
    let Some(prog) = components() else { return };
    let _serial = serial();
    let mut rig = Rig::worker(&prog, 4, 2000, 20_000);
    rig.sidecar(&[]);
    ok(&rig.driver("start", "q1"));
    sleep(Duration::from_millis(500));
    ok(&rig.driver("stop", "q1"));
    ok(&rig.driver("start", "q2"));
    sleep(Duration::from_millis(300));
    // The sidecar dies mid-capture: no signal handler runs, no `done`.
    let sidecar = rig.sidecar.as_ref().unwrap().id();
    unsafe_kill(sidecar, 9);
    rig.finish_sidecar();

    let began = Instant::now();
    let start = rig.driver("start", "q3");
    let took = began.elapsed();
    fails_with(&start, 4, "no longer running");
    assert!(took < Duration::from_secs(15), "start took {took:?}");
    fails_with(&rig.driver("stop", "q2"), 4, "no longer running");
    fails_with(&rig.shutdown(), 4, "no longer running");

    // q1 was published when its stop was acknowledged, and processes.
    assert!(rig.capture("q1").valid);
    ok(&jobprof(&[Path::new("process"), &rig.path("out")]));
    assert!(rig.capture_dir("q1").join("flamegraph.svg").is_file());
    // q2 stays in staging and says what it is.
    let staged = rig.path("staging/worker_0/q2");
    let meta: Capture =
        serde_json::from_slice(&fs::read(staged.join("capture.json")).unwrap()).unwrap();
    assert!(meta.reached(Phase::Enabled) && !meta.reached(Phase::Stopped));
    let out = jobprof(&[Path::new("process"), &staged]);
    assert!(!out.status.success());
    let text = crate::util::output_text(&out);
    assert!(text.contains("never stopped"), "{text}");
    // A new sidecar for the same worker starts over cleanly.
    rig.sidecar(&[]);
    ok(&rig.driver("start", "q3"));
    ok(&rig.driver("stop", "q3"));
    ok(&rig.shutdown());
    ok(&rig.finish_sidecar());
    assert!(rig.capture("q3").valid);
}

#[test]
fn record_stale_tokens_of_a_dead_sidecar_are_not_trusted() {
    let Some(prog) = components() else { return };
    let _serial = serial();
    let mut rig = Rig::worker(&prog, 2, 2000, 20_000);
    rig.sidecar(&[]);
    ok(&rig.driver("start", "q1"));
    ok(&rig.driver("stop", "q1"));
    unsafe_kill(rig.sidecar.as_ref().unwrap().id(), 9);
    rig.finish_sidecar();
    // Its `ready` stays behind, as in a requeued job's token directory.
    assert!(rig.token(".perf_sidecar_ready_w0").exists());
    // A driver that starts before the new sidecar is ready must wait for
    // the new one's own `ready` instead of writing `start` into the old
    // one's tokens (which the new sidecar's start-up would clear).
    let args = rig.default_args(&[]);
    let t = rig.tokens().display().to_string();
    let driver = Command::new(recorder())
        .args(["start", "--token-dir", &t, "--worker", "0", "--query", "q2"])
        .args(["--timeout", "120"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    sleep(Duration::from_millis(500));
    rig.sidecar = Some(rig.spawn_sidecar(&args));
    let out = driver.wait_with_output().unwrap();
    ok(&out);
    ok(&rig.driver("stop", "q2"));
    ok(&rig.shutdown());
    ok(&rig.finish_sidecar());
    assert!(rig.capture("q1").valid && rig.capture("q2").valid);
    // wait-ready after shutdown: that sidecar is done.
    let wait = rig.rec(&[
        "wait-ready",
        "--token-dir",
        &t,
        "--worker",
        "0",
        "--timeout",
        "30",
    ]);
    fails_with(&wait, 4, "already shut down");
    // So are `stop` and `start` after shutdown (issue 49): exit 4, never
    // an old token of q1 or q2 taken for an answer.
    fails_with(&rig.driver("stop", "q2"), 4, "already shut down");
    fails_with(&rig.driver("stop", "q1"), 4, "already shut down");
    fails_with(&rig.driver("start", "q3"), 4, "already shut down");
}

#[test]
fn record_max_shard_size_stops_a_shard_cleanly() {
    let Some(prog) = components() else { return };
    let _serial = serial();
    // 5 threads + main, 2 per shard: 3 shards.
    let mut rig = Rig::worker(&prog, 5, 2000, 5_000);
    rig.sidecar(&["--max-shard-size", "64K", "--threads-per-shard", "2"]);
    ok(&rig.driver("start", "q1"));
    let sidecar = rig.sidecar.as_ref().unwrap().id();
    wait_for(
        "a shard to reach --max-shard-size",
        Duration::from_secs(60),
        || perf_children(sidecar).len() < 3,
    );
    sleep(Duration::from_millis(500));
    ok(&rig.driver("stop", "q1"));
    ok(&rig.shutdown());
    ok(&rig.finish_sidecar());
    let meta = rig.capture("q1");
    assert!(meta.valid, "{meta:?}");
    assert_eq!(meta.max_shard_size, Some(64 << 10));
    assert!(!meta.size_limited.is_empty(), "{meta:?}");
    let rows = rig.shards("q1");
    for cut in &meta.size_limited {
        assert!(cut.unix_ns > meta.enabled_unix_ns.unwrap());
        assert!(cut.unix_ns <= meta.disabled_unix_ns.unwrap());
        let row = rows.iter().find(|r| r.shard == cut.shard).unwrap();
        assert_eq!(row.phase, jobprof_capture_format::ShardPhase::SizeLimit);
        assert!(row.clean_exit(), "{row:?}");
    }
    // The summary says which shard's window is shorter.
    ok(&jobprof(&[Path::new("process"), &rig.path("out")]));
    let summary = fs::read_to_string(rig.capture_dir("q1").join("summary.json")).unwrap();
    assert!(summary.contains("--max-shard-size"), "{summary}");
}
