//! A thread sampled inside `clone3` while it starts another, where jobprof
//! names more than perf on purpose (docs/symbols.md): glibc ends `clone3`'s
//! unwind table before its system call (the child's stack is new), so
//! perf's libunwind finds no FDE for the parent's return point and prints
//! `clone3` alone; jobprof's unwinder takes the return address at the
//! stack pointer there, as at any address without a table in the sampled
//! frame, and goes on through `pthread_create` to its callers.
//! tests/programs/thread_starter.c starts and joins 8 short threads over
//! and over (about half its samples fall in the parent's `clone3`),
//! recorded with `perf record --call-graph dwarf`, each sample compared
//! with the same sample (thread and time) of `perf script --no-inline`.

use std::collections::HashMap;
use std::fs;
use std::process::Command;

use super::{copy, perf_script, process, record_worker};
use crate::util::{self, output_text as text};

/// One sample's frames (symbol+offset, callee first, kernel frames cut
/// off) by (thread, time), from `perf script` text.
fn samples(script: &str) -> HashMap<(String, String), Vec<String>> {
    let mut out = HashMap::new();
    for block in script.split("\n\n") {
        let mut lines = block.lines().filter(|l| !l.trim().is_empty());
        let Some(header) = lines.next() else { continue };
        let mut words = header.split_whitespace().skip_while(|w| !is_tid(w));
        let (Some(tid), Some(time)) = (words.next(), words.next()) else {
            continue;
        };
        let frames = lines
            .filter(|l| !l.ends_with("([kernel.kallsyms])"))
            .filter_map(|l| l.trim().split_once(' ').map(|(_, f)| f))
            .map(|f| f.rsplit_once(" (").map_or(f, |(s, _)| s).to_string())
            .collect();
        out.insert((tid.to_string(), time.to_string()), frames);
    }
    out
}

/// A header's thread id (`TID` or `PID/TID`, all digits).
fn is_tid(w: &str) -> bool {
    w.split('/').all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

/// The function of a `symbol+0xOFF` frame.
fn function(frame: &str) -> &str {
    frame.rsplit_once("+0x").map_or(frame, |(f, _)| f)
}

#[test]
fn dwarf_stacks_in_clone3_go_on_to_pthread_create_s_callers_where_perf_s_stop() {
    let exe = util::program(
        "thread_starter",
        "tests/programs/thread_starter.c",
        &["-O2", "-g"],
    );
    if !util::require(exe.is_some(), "gcc for tests/programs/thread_starter.c") {
        return;
    }
    let Some(r) = record_worker(&mut Command::new(exe.unwrap()), &["--call-graph", "dwarf"]) else {
        return;
    };
    let (t, data) = copy(&r);
    let o = process(&[data.as_os_str()]);
    assert!(o.status.success(), "{}", text(&o));
    let zst = fs::read(t.path().join("perf.data.jobprof/perf.script.zst")).unwrap();
    let ours = samples(&String::from_utf8_lossy(&zstd::decode_all(&zst[..]).unwrap()));
    let reference = t.path().join("reference.script");
    perf_script(&data, &reference);
    let theirs = samples(&fs::read_to_string(&reference).unwrap());
    assert_eq!(ours.len(), theirs.len(), "samples: ours, perf's");
    // The starting thread: the one perf unwinds through start_batch.
    let starter: Vec<&String> = (theirs.iter())
        .filter(|(_, f)| f.iter().any(|f| function(f) == "start_batch"))
        .map(|((tid, _), _)| tid)
        .collect();
    let (mut inside, mut others) = (0, 0);
    for (key, perf) in &theirs {
        let mine = &ours[key];
        let in_clone3 = starter.contains(&&key.0)
            && mine.first().is_some_and(|f| function(f) == "clone3");
        if !in_clone3 {
            // Everywhere else, the same frames as perf.
            assert_eq!(mine, perf, "sample {key:?}");
            others += 1;
            continue;
        }
        inside += 1;
        assert_eq!(perf.len(), 1, "perf script now unwinds past clone3: {perf:?}");
        let names: Vec<&str> = mine.iter().map(|f| function(f)).collect();
        let at = |name: &str| names.iter().position(|n| n.starts_with(name));
        let order = [
            at("pthread_create"),
            at("start_batch"),
            at("start_forever"),
            at("main"),
        ];
        assert!(
            order.iter().all(Option::is_some) && order.is_sorted(),
            "sample {key:?} in clone3: {names:?}"
        );
    }
    eprintln!("clone3: {inside} samples of the starting thread in clone3, {others} others");
    assert!(inside >= 5, "{inside} samples in clone3 of {}", theirs.len());
}
