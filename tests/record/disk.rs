//! What the sidecar leaves on disk: never a write through symlinks planted
//! by another user (`setpriv`) while it runs as root, never a half file in
//! `symfs/` when the disk fills up during the symbol snapshot, and the
//! `.capturing` marker by which `jobprof process` says that a capture is
//! being written.

use std::fs;
use std::process::Command;

use super::{components, fails_with, serial, Rig};
use crate::util::{as_nobody, ok};
use crate::util::{recorder, require, Tmpfs};

#[test]
fn record_planted_symlinks_are_never_written_through() {
    let Some(prog) = components() else { return };
    if !require(
        Command::new("setpriv")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success()),
        "setpriv (util-linux), to plant files as another user",
    ) {
        return;
    }
    if !require(
        unsafe_euid() == 0,
        "root, to show that root never writes through another user's symlinks",
    ) {
        return;
    }
    let _serial = serial();
    let mut rig = Rig::worker(&prog, 2, 2000, 20_000);
    // What the attacker wants overwritten: a root-only file and directory.
    let vault = rig.path("vault");
    fs::create_dir(&vault).unwrap();
    let victim = vault.join("victim");
    fs::write(&victim, "precious\n").unwrap();
    let victim_dir = vault.join("dir");
    fs::create_dir(&victim_dir).unwrap();
    let untouched = || {
        assert_eq!(fs::read_to_string(&victim).unwrap(), "precious\n");
        assert_eq!(fs::read_dir(&victim_dir).unwrap().count(), 0);
    };
    // The attacker can write where everybody can (like /tmp).
    let public = rig.path("public");
    fs::create_dir(&public).unwrap();
    Command::new("chmod")
        .arg("1777")
        .arg(&public)
        .status()
        .unwrap();
    Command::new("chmod")
        .arg("1777")
        .arg(rig.tokens())
        .status()
        .unwrap();
    Command::new("chmod")
        .arg("1777")
        .arg(rig.path("out"))
        .status()
        .unwrap();
    Command::new("chmod")
        .arg("0711")
        .arg(rig.path(""))
        .status()
        .unwrap();

    // (1) The predictable staging directory, pre-created with a symlink
    // where the symbol snapshot goes: refused by the preflight, by name.
    let staging = public.join("jobprof-record.4242");
    as_nobody(&format!(
        "mkdir -p {s}/worker_0 && ln -s {v} {s}/worker_0/symfs && ln -s {f} {s}/worker_0/preflight.txt",
        s = staging.display(),
        v = victim_dir.display(),
        f = victim.display()
    ));
    let mut args = rig.default_args(&[]);
    let at = args.iter().position(|a| a == "--staging").unwrap();
    args.drain(at..at + 2);
    let out = Command::new(recorder())
        .args(&args)
        .env("TMPDIR", &public)
        .env_remove("SLURM_TMPDIR")
        .env("SLURM_JOB_ID", "4242")
        .output()
        .unwrap();
    fails_with(&out, 1, &staging.display().to_string());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("uid 65534"), "{err}");
    untouched();
    let preflight = rig.rec(&[
        "preflight",
        "--pid",
        &rig.pid().to_string(),
        "--staging",
        &staging.join("worker_0").display().to_string(),
    ]);
    fails_with(&preflight, 1, "staging");
    untouched();

    // (2) A symlink at the lock file: refused, nothing written.
    let lock = rig.token(".perf_sidecar_lock_w0");
    let _ = fs::remove_file(&lock); // left by (1)
    as_nobody(&format!("ln -s {} {}", victim.display(), lock.display()));
    let out = Command::new(recorder())
        .args(rig.default_args(&[]))
        .output()
        .unwrap();
    fails_with(&out, 1, "lock");
    untouched();
    fs::remove_file(&lock).unwrap();

    // (3) Symlinks at every token name, at the old predictable temporary
    // names, and at PERF_ROOT/worker_0: a whole session runs, writes only
    // its own files, and refuses to publish through the planted directory.
    let mut plant = String::new();
    for name in [
        ".perf_sidecar_ready_w0",
        ".perf_sidecar_done_w0",
        ".perf_started_w0_q1",
        ".perf_finished_w0_q1",
        ".perf_record_stop_forced_w0",
    ] {
        let tmp_name = format!(".tmp.{name}.{}", std::process::id());
        for n in [name, tmp_name.as_str()] {
            plant.push_str(&format!(
                "ln -s {} {}; ",
                victim.display(),
                rig.token(n).display()
            ));
        }
    }
    plant.push_str(&format!(
        "ln -s {} {}",
        victim_dir.display(),
        rig.path("out/worker_0").display()
    ));
    as_nobody(&plant);
    rig.sidecar(&[]);
    ok(&rig.driver("start", "q1"));
    let stop = rig.driver("stop", "q1");
    ok(&stop);
    assert!(
        String::from_utf8_lossy(&stop.stderr).contains("not published yet"),
        "{}",
        String::from_utf8_lossy(&stop.stderr)
    );
    let shut = rig.shutdown();
    fails_with(&shut, 1, "refusing to publish");
    rig.finish_sidecar();
    untouched();
    // The tokens it wrote replaced the planted links.
    let ready = fs::symlink_metadata(rig.token(".perf_sidecar_ready_w0")).unwrap();
    assert!(ready.file_type().is_file());
    // The data stays in staging, safe.
    assert!(rig.path("staging/worker_0/q1/capture.json").is_file());
    // (4) Nor are planted tokens followed when read: the driver would
    // print the file an error token points to.
    as_nobody(&format!(
        "ln -s {} {}",
        victim.display(),
        rig.token(".perf_error_w0_q9").display()
    ));
    let stop = rig.driver("stop", "q9");
    assert!(!stop.status.success());
    let text = crate::util::output_text(&stop);
    assert!(!text.contains("precious"), "{text}");
}

fn unsafe_euid() -> u32 {
    let status = fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|u| u.parse().ok())
        .unwrap()
}

/// The symbol snapshot on a disk that fills up in the middle of it (a
/// tmpfs of 1.6 MB: the worker's small files fit, libc and the kernel
/// table do not): every file published in symfs/ is whole (the bytes of
/// the file it copies), what did not fit is listed as an error and is not
/// there, not even half of it; the sidecar still serves a capture.
#[test]
fn record_full_disk_during_the_symbol_snapshot_leaves_no_half_file() {
    let Some(prog) = components() else { return };
    if !require(
        // SAFETY: geteuid has no preconditions.
        unsafe { libc::geteuid() } == 0,
        "root (to mount tmpfs)",
    ) {
        return;
    }
    let Some(disk) = Tmpfs::mount(1600 << 10) else {
        return;
    };
    let _serial = serial();
    let mut rig = Rig::worker(&prog, 2, 2000, 20_000);
    let (out, staging) = (disk.mnt.join("out"), disk.mnt.join("staging"));
    fs::create_dir(&out).unwrap();
    fs::create_dir(&staging).unwrap();
    let mut args = rig.default_args(&[]);
    for (flag, dir) in [("--out", &out), ("--staging", &staging)] {
        let i = args.iter().position(|a| a == flag).unwrap();
        args[i + 1] = dir.display().to_string();
    }
    rig.sidecar_with(args);
    ok(&rig.driver("start", "q1"));
    ok(&rig.driver("stop", "q1"));
    ok(&rig.shutdown());
    assert_eq!(rig.finish_sidecar().status.code(), Some(0));

    let worker = out.join("worker_0");
    let manifest = fs::read_to_string(worker.join("symbol-manifest.tsv")).unwrap();
    let mut listed = Vec::new();
    let mut full = 0;
    for row in manifest.lines().skip(1) {
        let f: Vec<&str> = row.split('\t').collect();
        let (kind, path, status) = (f[0], f[1], f[4]);
        if !matches!(kind, "binary" | "debuginfo" | "vdso") || path.contains(' ') {
            full += usize::from(status.contains("No space left"));
            continue;
        }
        let copy = worker.join("symfs").join(path.trim_start_matches('/'));
        if status.starts_with("copied") {
            if kind != "vdso" {
                assert!(
                    fs::read(&copy).unwrap() == fs::read(path).unwrap(),
                    "{} is not a whole copy of {path}",
                    copy.display()
                );
            }
            listed.push(copy);
        } else {
            full += usize::from(status.contains("No space left"));
            assert!(
                fs::symlink_metadata(&copy).is_err(),
                "{} is there though its copy failed: {row}",
                copy.display()
            );
        }
    }
    assert!(full > 0, "the disk never filled up:\n{manifest}");
    assert!(!listed.is_empty(), "nothing fitted:\n{manifest}");
    // Nothing in symfs/ the manifest does not vouch for.
    let mut found = Vec::new();
    let mut dirs = vec![worker.join("symfs")];
    while let Some(d) = dirs.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else {
                found.push(p);
            }
        }
    }
    found.sort();
    listed.sort();
    assert_eq!(found, listed, "\n{manifest}");
    assert!(worker.join("q1/capture.json").is_file());
}

/// `jobprof process` during a capture (issue 49, item 9): the capture
/// lives in staging until its `stop` publishes it, so the sidecar leaves
/// `PERF_ROOT/worker_0/.capturing` while it runs. With nothing else there
/// `process` says "a capture is being written (worker 0, q03; staged in
/// ...)" (exit 2, as for no captures); next to a published capture it lists
/// the running one as "being written"; the marker goes with each `stop`.
/// A query id captured before is refused with the next replicate's name.
#[test]
fn record_process_during_a_capture_says_it_is_being_written() {
    let Some(prog) = components() else { return };
    let _serial = serial();
    let mut rig = Rig::worker(&prog, 4, 2000, 20_000);
    rig.sidecar(&[]);
    let out = rig.path("out");
    let marker = out.join("worker_0/.capturing");
    let process = || {
        crate::util::jobprof()
            .args(["process", "-j", "1"])
            .arg(&out)
            .output()
            .unwrap()
    };
    ok(&rig.driver("start", "q03"));
    assert!(marker.is_file(), "no marker while q03 is captured");
    let o = process();
    let text = crate::util::output_text(&o);
    assert_eq!(o.status.code(), Some(2), "{text}");
    assert!(
        text.contains("a capture is being written (worker 0, q03; staged in ")
            && text.contains("worker_0/q03"),
        "{text}"
    );
    assert!(!text.contains("no captures found"), "{text}");
    ok(&rig.driver("stop", "q03"));
    assert!(!marker.exists(), "the marker outlived q03's publication");

    ok(&rig.driver("start", "q04"));
    let o = process();
    let text = crate::util::output_text(&o);
    assert_ne!(o.status.code(), Some(2), "{text}");
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains("worker_0/q04: being written (jobprof-record is capturing it: worker 0, q04; staged in "),
        "{text}"
    );
    assert!(
        rig.capture_dir("q03").join("stacks.folded").is_file(),
        "{text}"
    );
    ok(&rig.driver("stop", "q04"));
    assert!(!marker.exists(), "the marker outlived q04's publication");
    // A query id used again is refused, suggesting the next replicate in
    // the one convention (issue 49, item 5; docs/capture.md, Replicates).
    fails_with(&rig.driver("start", "q03"), 1, "(e.g. q03_iter2)");
    assert!(!marker.exists(), "a refused start left a marker");
    ok(&rig.shutdown());
    ok(&rig.finish_sidecar());
    assert!(!marker.exists());
}
