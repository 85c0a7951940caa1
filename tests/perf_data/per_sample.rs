//! Recordings compared with `perf script --no-inline` sample by sample
//! (thread and time), where a fold would hide which sample differs: a
//! stack-realigning function's epilogue (the case of Velox's
//! `libvelox.so`), and a thread sampled inside `clone3` while it starts
//! another, where jobprof names more than perf on purpose
//! (docs/symbols.md).

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::{copy, perf_script, process, record_worker};
use crate::util::{self, output_text as text};

/// One sample's frames (symbol+offset, callee first, kernel frames cut
/// off) by (thread, time), from `perf script` text.
fn samples(script: &str) -> Samples {
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
        let time = time.trim_end_matches(':').to_string();
        out.insert((tid.to_string(), time), frames);
    }
    out
}

/// A header's thread id (`TID` or `PID/TID`, all digits).
fn is_tid(w: &str) -> bool {
    w.split('/')
        .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

/// The function of a `symbol+0xOFF` frame.
fn function(frame: &str) -> &str {
    frame.rsplit_once("+0x").map_or(frame, |(f, _)| f)
}

/// One sample's frames by (thread, time), jobprof's and perf's.
type Samples = HashMap<(String, String), Vec<String>>;

/// `worker` recorded with `--call-graph dwarf`, processed by jobprof
/// (`--no-inline`) and printed by `perf script --no-inline`: jobprof's
/// samples and perf's, the same ones.
fn compared(worker: &mut Command) -> Option<(Samples, Samples)> {
    let r = record_worker(worker, &["--call-graph", "dwarf"])?;
    let (t, data) = copy(&r);
    let o = process(&[data.as_os_str()]);
    assert!(o.status.success(), "{}", text(&o));
    let zst = fs::read(t.path().join("perf.data.jobprof/perf.script.zst")).unwrap();
    let ours = samples(&String::from_utf8_lossy(
        &zstd::decode_all(&zst[..]).unwrap(),
    ));
    let reference = t.path().join("reference.script");
    perf_script(&data, &reference);
    let theirs = samples(&fs::read_to_string(&reference).unwrap());
    assert_eq!(ours.len(), theirs.len(), "samples: ours, perf's");
    Some((ours, theirs))
}

/// glibc ends `clone3`'s unwind table before its system call (the
/// child's stack is new), so perf's libunwind finds no FDE for the
/// parent's return point and prints `clone3` alone; jobprof's unwinder
/// takes the return address at the stack pointer there, as at any address
/// without a table in the sampled frame, and goes on through
/// `pthread_create` to its callers. tests/programs/thread_starter.c starts
/// and joins 8 short threads over and over (about half its samples fall in
/// the parent's `clone3`), after a second with none, for `perf record -p`
/// to attach to one thread.
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
    let Some((ours, theirs)) = compared(&mut Command::new(exe.unwrap())) else {
        return;
    };
    // Every sample has perf's frames, but where perf's stack is clone3
    // alone: there jobprof's goes on to pthread_create and its callers.
    let (mut inside, mut others) = (0, 0);
    for (key, perf) in &theirs {
        let mine = ours
            .get(key)
            .unwrap_or_else(|| panic!("sample {key:?}: not in ours"));
        if mine == perf {
            others += 1;
            continue;
        }
        inside += 1;
        let names: Vec<&str> = mine.iter().map(|f| function(f)).collect();
        let perfs: Vec<&str> = perf.iter().map(|f| function(f)).collect();
        assert_eq!(perfs, ["clone3"], "sample {key:?}: ours {names:?}");
        let at = |name: &str| names.iter().position(|n| n.starts_with(name));
        let order = [
            at("clone3"),
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
    eprintln!("clone3: {inside} samples unwound past clone3, {others} as perf's");
    // Fewer: perf now unwinds past clone3 too, or jobprof stops there.
    assert!(
        inside >= 5,
        "{inside} samples past clone3 of {}",
        theirs.len()
    );
}

/// The offset in `exe`'s `func` of its `leave` (objdump's disassembly).
fn leave_offset(exe: &Path, func: &str) -> Option<u64> {
    let o = Command::new("objdump")
        .args(["-d", "--no-show-raw-insn"])
        .arg(format!("--disassemble={func}"))
        .arg(exe)
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&o.stdout);
    let addr = |l: &str| u64::from_str_radix(l.trim().split([' ', ':']).next()?, 16).ok();
    let start = text
        .lines()
        .find(|l| l.ends_with(&format!("<{func}>:")))
        .and_then(addr)?;
    let leave = text
        .lines()
        .find(|l| l.contains("\tleave"))
        .and_then(addr)?;
    Some(leave - start)
}

/// tests/programs/realign_epilogue.c built as its comment says (no frame
/// pointers: its caller keeps a count in RBP).
fn realign_epilogue() -> Option<PathBuf> {
    let exe = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("realign_epilogue");
    let built = Command::new("gcc")
        .args(["-O2", "-g", "-fomit-frame-pointer", "-o"])
        .arg(&exe)
        .arg(util::repo_root().join("tests/programs/realign_epilogue.c"))
        .output()
        .is_ok_and(|o| o.status.success());
    util::require(built, "gcc for tests/programs/realign_epilogue.c").then_some(exe)
}

/// The construct of the one Velox dwarf sample that jobprof stopped at
/// its leaf (a CI recording's q4, 99.48%): gcc's rows for a realigning
/// function's epilogue keep RBP = [RBP] after `leave` has restored the
/// caller's RBP, here a count (no pointer). perf's libunwind keeps the
/// location and never reads it (the caller restores RBP from its own
/// slot); jobprof read it at once, failed and printed the leaf alone (9
/// samples of 98 on one recording). Every sample must be perf's, and
/// some must lie past `leave`.
#[test]
fn dwarf_stacks_from_a_realigning_epilogue_go_on_past_a_caller_s_rbp() {
    let Some(exe) = realign_epilogue() else {
        return;
    };
    if !util::require(util::have("objdump"), "objdump (binutils)") {
        return;
    }
    let leave = leave_offset(&exe, "realigned_small").expect("realigned_small's leave");
    let Some((ours, theirs)) = compared(&mut Command::new(&exe)) else {
        return;
    };
    let mut past_leave = 0;
    for (key, perf) in &theirs {
        assert_eq!(&ours[key], perf, "sample {key:?}");
        let Some((f, off)) = perf.first().and_then(|l| l.rsplit_once("+0x")) else {
            continue;
        };
        if f == "realigned_small" && u64::from_str_radix(off, 16).is_ok_and(|o| o > leave) {
            past_leave += 1;
            let names: Vec<&str> = perf.iter().map(|f| function(f)).collect();
            assert!(names.contains(&"main"), "{key:?}: {names:?}");
        }
    }
    eprintln!(
        "realign epilogue: {past_leave} of {} samples past leave",
        theirs.len()
    );
    assert!(
        past_leave >= 3,
        "{past_leave} samples past leave of {}",
        theirs.len()
    );
}
