//! Arming a switch-heavy worker (issue 35, item 9): sleeping threads and
//! threads that create short-lived threads all the time
//! (tests/programs/switchy.c), with `--off-cpu`. The documented
//! `wait-ready --timeout 180` must see the sidecar ready, the driver must
//! have been told how far attaching got, and the capture must be valid with
//! the query's own window. No timed assertions: how long arming takes is
//! measured by benches/arm.sh.

use std::thread::sleep;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use jobprof_capture_format::{parse_shards_tsv, Phase, ShardPhase};

use super::{components, counters_agree, serial, Rig};
use crate::util::{self, ok, program, require};

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

/// The switch-heavy worker, or a loud skip (with perf and tracefs).
fn switchy() -> Option<std::path::PathBuf> {
    components()?;
    if !util::tracefs_sched_switch() {
        return None;
    }
    let prog = program(
        "record-switchy",
        "tests/programs/switchy.c",
        &["-O1", "-fno-omit-frame-pointer"],
    );
    require(prog.is_some(), "gcc (to build tests/programs/switchy.c)").then_some(prog?)
}

#[test]
fn record_switch_heavy_worker_arms_and_captures_within_the_documented_timeout() {
    let Some(prog) = switchy() else { return };
    let _serial = serial();
    // 300 sleeping threads, 4 threads creating one every 0.5 ms: shards of
    // 32 threads, about 10 of them.
    let mut rig = Rig::launch(&prog, |cue| {
        vec![
            "300".into(),
            cue.display().to_string(),
            "4".into(),
            "500".into(),
        ]
    });
    let args = rig.default_args(&["--off-cpu", "--threads-per-shard", "32"]);
    rig.sidecar = Some(rig.spawn_sidecar(&args));
    let tokens = rig.tokens().display().to_string();
    // What docs/capture.md tells batch scripts to run.
    let ready = rig.rec(&[
        "wait-ready",
        "--token-dir",
        &tokens,
        "--worker",
        "0",
        "--timeout",
        "180",
    ]);
    if !ready.status.success() {
        let out = rig.finish_sidecar();
        panic!(
            "wait-ready failed: {}\nsidecar: {}",
            String::from_utf8_lossy(&ready.stderr),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // The sidecar said how far arming got, shard by shard, up to the end.
    let progress = std::fs::read_to_string(rig.token(".perf_sidecar_attaching_w0")).unwrap();
    let last = progress.lines().last().unwrap_or_default();
    let (done, total) = last
        .strip_prefix(".armed-1: ")
        .and_then(|r| r.strip_suffix(" shards attached"))
        .and_then(|r| r.split_once('/'))
        .unwrap_or_else(|| panic!("no progress of arming: {progress:?}"));
    assert_eq!(done, total, "{progress:?}");
    assert!(total.parse::<u32>().unwrap() >= 9, "{progress:?}");

    let asked = now_ns();
    ok(&rig.driver("start", "q1"));
    sleep(Duration::from_secs(1));
    ok(&rig.driver("stop", "q1"));
    let answered = now_ns();
    let meta = rig.capture("q1");
    assert!(meta.valid, "{meta:?}");
    assert!(meta.reached(Phase::Published), "{meta:?}");
    assert_eq!(meta.event, "cpu-clock");
    // The window is the query's: switched on after `start` was asked and
    // off before `stop` answered, not stretched by arming or disabling.
    let (on, off) = (
        meta.enabled_unix_ns.unwrap(),
        meta.disabled_unix_ns.unwrap(),
    );
    assert!(
        asked <= on && on < off && off <= answered,
        "window {on}..{off} outside the query {asked}..{answered}"
    );
    counters_agree(&rig, "q1");
    let rows = parse_shards_tsv(
        &std::fs::read_to_string(rig.capture_dir("q1").join("perf-shards.tsv")).unwrap(),
    )
    .unwrap();
    assert!(
        rows.iter()
            .all(|r| matches!(r.phase, ShardPhase::Stopped | ShardPhase::Exited)),
        "{rows:?}"
    );
    ok(&rig.shutdown());
    ok(&rig.finish_sidecar());
}
