//! Fault injection: `jobprof process` and `reprocess` attacked as
//! docs/reliability.md promises they survive. A real tmpfs with 0 B to
//! 1 MiB free around every write, `kill -9` at random points then a rerun,
//! links and `..` data files planted by another user (`setpriv
//! --reuid=nobody`) while jobprof runs as root (checked by content and with
//! strace), 1,500 shards under `ulimit -n 1024`, closed standard streams,
//! old result layouts, and counts whose sums pass 2^64.
//!
//! The real capture is the one tests/process.rs records (real perf, real
//! sidecar). Mounting needs root; under CI a missing capability fails.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::util::{self, copy_tree, output_text, Tmpfs};
use crate::util::{as_nobody, have, is_root, jobprof};
use crate::util::{base, capture_dir, copy_base, data_files, edit_json, perf_counts, summary};

const OUTPUTS: [&str; 6] = [
    "perf.script.zst",
    "stacks.folded",
    "flamegraph.svg",
    "flamegraph.html",
    "summary.json",
    ".postprocess-complete",
];

/// Sample headers in an archive's text (`perf script` default output).
fn archive_samples(path: &Path) -> u64 {
    let text = zstd::decode_all(&util::read(path)[..])
        .unwrap_or_else(|e| panic!("{} does not decompress: {e}", path.display()));
    // One header line per sample (frames, when recorded, start with a tab).
    String::from_utf8_lossy(&text)
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('\t'))
        .count() as u64
}

/// A capture's promises: a marker vouches only for complete outputs (every
/// recorded size matches, the archive holds every sample); an archive,
/// marker or not, is never short; no temporary file is left behind.
fn assert_whole(dir: &Path, samples: u64, context: &str) {
    let archive = dir.join("perf.script.zst");
    if archive.exists() {
        assert_eq!(
            archive_samples(&archive),
            samples,
            "{context}: short archive"
        );
    }
    let marker = dir.join(".postprocess-complete");
    if marker.exists() {
        let m: serde_json::Value = serde_json::from_slice(&util::read(&marker)).unwrap();
        for (name, size) in m["sizes"].as_object().expect("sizes recorded") {
            let now = fs::metadata(dir.join(name)).map(|m| m.len()).ok();
            assert_eq!(
                now,
                size.as_u64(),
                "{context}: {name} differs from the marker"
            );
        }
        assert!(archive.exists(), "{context}: marker without archive");
        assert_eq!(summary(dir)["samples"], samples, "{context}");
        assert_eq!(m["quality"]["samples"], samples, "{context}");
    }
    let leftovers: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{context}: {leftovers:?}");
}

fn reference_samples(result: &Path) -> u64 {
    let dir = capture_dir(result, 0, "q1");
    let symfs = result.join("profiles/perf/worker_0/symfs");
    perf_counts(&data_files(&dir), &symfs).0
}

#[test]
fn full_disk_never_leaves_a_marker_over_short_outputs_or_a_worse_archive() {
    let Some(base) = base() else { return };
    if !util::require(is_root(), "root (to mount tmpfs)") {
        return;
    }
    let samples = reference_samples(&base.result_dir);
    // How much a complete run writes.
    let (_t, roomy) = copy_base(base);
    let out = jobprof().arg("process").arg(&roomy).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let dir = capture_dir(&roomy, 0, "q1");
    let written: u64 = OUTPUTS
        .iter()
        .map(|n| fs::metadata(dir.join(n)).map(|m| m.len()).unwrap_or(0))
        .sum();
    let capture_bytes: u64 = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum();
    let Some(fs_) = Tmpfs::mount(4 * (capture_bytes + written) + (64 << 20)) else {
        return;
    };
    // 0 B to 1 MiB free, and fractions of what a run writes.
    let mut levels: Vec<u64> = vec![0, 4 << 10, 12 << 10, 64 << 10, 256 << 10, 1 << 20];
    levels.extend((1..=6).map(|k| written * k / 6));
    levels.sort_unstable();
    levels.dedup();
    let (mut failed, mut succeeded) = (0, 0);
    for (i, &free) in levels.iter().enumerate() {
        let result = fs_.mnt.join("result");
        let _ = fs::remove_dir_all(&result);
        fs_.free_all();
        copy_tree(&base.result_dir, &result);
        let cap = capture_dir(&result, 0, "q1");
        let reprocess = i % 2 == 1;
        // Every other level replaces a complete earlier result.
        let previous = (i / 2) % 2 == 1;
        let before = previous.then(|| {
            let o = jobprof().arg("process").arg(&result).output().unwrap();
            assert_eq!(o.status.code(), Some(0), "{}", output_text(&o));
            util::read(&cap.join("perf.script.zst"))
        });
        fs_.leave_free(free);
        let mut cmd = jobprof();
        if reprocess {
            cmd.arg("reprocess").arg(&fs_.mnt);
        } else {
            cmd.arg("process").arg(&result);
        }
        cmd.arg("--force");
        let out = cmd.output().unwrap();
        let context = format!(
            "{} with {free} bytes free{}",
            if reprocess { "reprocess" } else { "process" },
            if previous {
                " over a complete result"
            } else {
                ""
            }
        );
        let text = output_text(&out);
        match out.status.code() {
            Some(0) => succeeded += 1,
            Some(1) => {
                failed += 1;
                assert!(
                    text.contains("No space left on device")
                        && text.contains(&*fs_.mnt.to_string_lossy()),
                    "{context}: a full disk must be named with its path: {text}"
                );
                assert!(
                    !cap.join(".postprocess-complete").exists() || before.is_some(),
                    "{context}: marker after a failed run: {text}"
                );
            }
            other => panic!("{context}: exit {other:?}: {text}"),
        }
        assert_whole(&cap, samples, &context);
        if let Some(before) = before {
            let now = util::read(&cap.join("perf.script.zst"));
            assert_eq!(
                zstd::decode_all(&now[..]).unwrap(),
                zstd::decode_all(&before[..]).unwrap(),
                "{context}: the archive changed"
            );
        }
    }
    assert!(
        failed > 0 && succeeded > 0,
        "{failed} failed, {succeeded} succeeded: the sweep missed a side"
    );
}

#[test]
fn killed_at_random_points_then_rerun_gives_identical_outputs() {
    let Some(base) = base() else { return };
    let (_t, reference) = copy_base(base);
    let started = Instant::now();
    let out = jobprof().arg("process").arg(&reference).output().unwrap();
    let took = started.elapsed();
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let ref_dir = capture_dir(&reference, 0, "q1");
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos() as u64
        | 1;
    eprintln!("kill points from seed {seed} over a {took:?} run");
    let mut x = seed;
    for round in 0..5 {
        // xorshift: a different point each round, reproducible from the seed.
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let at = took.mul_f64((x % 1000) as f64 / 1000.0);
        let (_t, result) = copy_base(base);
        let dir = capture_dir(&result, 0, "q1");
        let mut child = jobprof()
            .arg("process")
            .arg(&result)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(at);
        let _ = child.kill(); // SIGKILL
        child.wait().unwrap();
        let out = jobprof().arg("process").arg(&result).output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "round {round} (killed at {at:?}): {}",
            output_text(&out)
        );
        for name in ["stacks.folded", "flamegraph.svg"] {
            assert!(
                util::read(&dir.join(name)) == util::read(&ref_dir.join(name)),
                "round {round} (killed at {at:?}): {name} differs"
            );
        }
        assert_eq!(
            zstd::decode_all(&util::read(&dir.join("perf.script.zst"))[..]).unwrap(),
            zstd::decode_all(&util::read(&ref_dir.join("perf.script.zst"))[..]).unwrap(),
            "round {round}: archive text differs"
        );
        assert!(dir.join(".postprocess-complete").exists());
        assert_whole(
            &dir,
            summary(&ref_dir)["samples"].as_u64().unwrap(),
            "after the rerun",
        );
    }
}

/// Everything under `dir`: name, mode and content.
fn snapshot(dir: &Path) -> Vec<(PathBuf, u32, Vec<u8>)> {
    let mut v = Vec::new();
    for e in fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        let m = fs::symlink_metadata(e.path()).unwrap();
        if m.is_dir() {
            v.extend(snapshot(&e.path()));
        } else {
            v.push((
                e.path(),
                m.permissions().mode(),
                fs::read(e.path()).unwrap_or_default(),
            ));
        }
    }
    v.sort();
    v
}

/// Lines of an strace log that name `outside`.
fn touching(trace: &Path, outside: &Path) -> Vec<String> {
    let needle = outside.to_string_lossy().into_owned();
    fs::read_to_string(trace)
        .unwrap()
        .lines()
        .filter(|l| l.contains(&needle))
        .map(str::to_string)
        .collect()
}

fn traced(trace: &Path, args: &[&std::ffi::OsStr]) -> Output {
    Command::new("strace")
        .args(["-f", "-qq", "-e"])
        .arg("trace=open,openat,openat2,creat,truncate,rename,renameat,renameat2,link,linkat,unlink,unlinkat,chmod,fchmodat,mkdir,mkdirat")
        .arg("-o")
        .arg(trace)
        .arg(env!("CARGO_BIN_EXE_jobprof"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn links_and_dotdot_data_files_planted_by_another_user_reach_nothing_outside() {
    let Some(base) = base() else { return };
    let tools = is_root() && have("setpriv") && have("strace");
    if !util::require(tools, "root, setpriv and strace") {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    fs::set_permissions(t.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let result = t.path().join("result");
    copy_tree(&base.result_dir, &result);
    let worker = result.join("profiles/perf/worker_0");
    for q in ["q2", "q3", "q4"] {
        copy_tree(&worker.join("q1"), &worker.join(q));
    }
    // Another user's writable share, as on a shared results tree.
    Command::new("chmod")
        .args(["-R", "a+rwX"])
        .arg(&result)
        .status()
        .unwrap();
    // Outside the tree: root's files.
    let victim = tempfile::tempdir().unwrap();
    let v = victim.path();
    fs::write(v.join("secret.out"), b"precious\n").unwrap();
    fs::copy(
        worker.join("q1/perf.data.part001"),
        v.join("root-only.data"),
    )
    .unwrap();
    fs::set_permissions(v.join("root-only.data"), fs::Permissions::from_mode(0o600)).unwrap();
    copy_tree(&worker.join("q1"), &v.join("capture"));
    let before = snapshot(v);

    let w = worker.display();
    let vd = v.display();
    as_nobody(&format!(
        "ln -s {vd}/secret.out {w}/q1/stacks.folded && ln -s {vd}/secret.out {w}/q1/flamegraph.html \
         && sed -i 's#perf.data.part001#../../../../../../{vd}/root-only.data#' {w}/q2/perf-shards.tsv \
         && rm {w}/q3/perf.data.part001 && ln -s {vd}/root-only.data {w}/q3/perf.data.part001 \
         && ln -s {vd}/capture {w}/q5"
    ));
    let trace = t.path().join("process.strace");
    let out = traced(&trace, &["process".as_ref(), result.as_os_str()]);
    let text = output_text(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    let line = |q: &str| {
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .find(|l| l.contains(&format!("worker_0/{q}:")))
            .unwrap_or_else(|| panic!("no line for {q}: {text}"))
            .to_string()
    };
    assert!(line("q1").contains("symbolic link"), "{text}");
    assert!(line("q2").contains("not a plain file name"), "{text}");
    assert!(line("q3").contains("symbolic link"), "{text}");
    assert!(line("q4").contains("processed"), "{text}");
    assert!(
        !text.contains("worker_0/q5"),
        "a linked capture dir was followed: {text}"
    );
    assert_eq!(snapshot(v), before, "something outside the tree changed");
    let touched = touching(&trace, v);
    assert!(touched.is_empty(), "outside the tree: {touched:#?}");
    // Derived files are never more readable than the raw data.
    let q4 = worker.join("q4");
    fs::set_permissions(
        q4.join("perf.data.part000"),
        fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    let out = jobprof()
        .args(["process", "--force"])
        .arg(&q4)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    for name in OUTPUTS {
        let mode = fs::metadata(q4.join(name)).unwrap().permissions().mode();
        assert_eq!(mode & 0o077, 0, "{name} is open to others: {mode:o}");
    }

    // nsys collect: a linked report and a planted manifest link.
    let reports = t.path().join("reports");
    fs::create_dir_all(&reports).unwrap();
    fs::set_permissions(&reports, fs::Permissions::from_mode(0o777)).unwrap();
    fs::write(reports.join("7_n0_rank0.nsys-rep"), b"rank zero report").unwrap();
    fs::write(v.join("root-only.nsys-rep"), b"root's report").unwrap();
    fs::set_permissions(
        v.join("root-only.nsys-rep"),
        fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    let before = snapshot(v);
    let rd = reports.display();
    as_nobody(&format!(
        "ln -s {vd}/root-only.nsys-rep {rd}/7_n1_rank1.nsys-rep"
    ));
    let collect = |trace: &Path| {
        traced(
            trace,
            &[
                "nsys".as_ref(),
                "collect".as_ref(),
                "--report-root".as_ref(),
                reports.as_os_str(),
                "--settle".as_ref(),
                "1s".as_ref(),
                "--poll".as_ref(),
                "200ms".as_ref(),
                "--timeout".as_ref(),
                "20s".as_ref(),
                "--archive".as_ref(),
            ],
        )
    };
    let trace = t.path().join("collect.strace");
    let out = collect(&trace);
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let m = fs::read_to_string(reports.join("manifest.json")).unwrap();
    assert!(m.contains("7_n0_rank0") && !m.contains("7_n1_rank1"), "{m}");
    assert!(touching(&trace, v).is_empty(), "{:#?}", touching(&trace, v));
    fs::remove_file(reports.join("manifest.json")).unwrap();
    as_nobody(&format!("ln -s {vd}/secret.out {rd}/manifest.json"));
    let trace = t.path().join("collect2.strace");
    let out = collect(&trace);
    let text = output_text(&out);
    assert_ne!(out.status.code(), Some(0), "{text}");
    assert!(
        text.contains("manifest.json") && text.contains("symbolic link"),
        "{text}"
    );
    assert_eq!(
        snapshot(v),
        before,
        "something outside the report tree changed"
    );
    assert!(touching(&trace, v).is_empty(), "{:#?}", touching(&trace, v));
}

#[test]
fn fifteen_hundred_shards_under_ulimit_1024() {
    if !util::require(util::perf_can_record(), "perf record") {
        return;
    }
    let Some(base) = base() else { return };
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("profiles/perf/worker_0/q1");
    fs::create_dir_all(&dir).unwrap();
    let one = t.path().join("one.data");
    let st = Command::new("perf")
        // User-space samples only: `perf script` then needs no kernel
        // symbols, and 1,500 runs of it stay within the CI budget.
        .args(["record", "-q", "-e", "cpu-clock:u", "-F", "999", "-o"])
        .arg(&one)
        .args([
            "--",
            "sh",
            "-c",
            "i=0; while [ $i -lt 5000 ]; do i=$((i+1)); done",
        ])
        .status()
        .unwrap();
    assert!(st.success());
    let n = perf_counts(std::slice::from_ref(&one), t.path()).0;
    assert!(n > 0, "the tiny shard has no sample");
    const SHARDS: u32 = 1500;
    let base_dir = capture_dir(&base.result_dir, 0, "q1");
    fs::copy(base_dir.join("capture.json"), dir.join("capture.json")).unwrap();
    edit_json(&dir.join("capture.json"), |v| {
        v["shard_count"] = SHARDS.into()
    });
    let tsv = fs::read_to_string(base_dir.join("perf-shards.tsv")).unwrap();
    let mut lines = tsv.lines();
    let header = lines.next().unwrap();
    let row: Vec<&str> = lines.next().unwrap().split('\t').collect();
    let col = |name: &str| header.split('\t').position(|h| h == name).unwrap();
    let (shard_col, file_col, bytes_col) = (col("shard"), col("data_file"), col("data_bytes"));
    let size = fs::metadata(&one).unwrap().len().to_string();
    let mut out = format!("{header}\n");
    for s in 0..SHARDS {
        let name = format!("perf.data.part{s:04}");
        fs::hard_link(&one, dir.join(&name)).unwrap();
        let mut r = row.clone();
        let s = s.to_string();
        r[shard_col] = &s;
        r[file_col] = &name;
        r[bytes_col] = &size;
        out.push_str(&r.join("\t"));
        out.push('\n');
    }
    fs::write(dir.join("perf-shards.tsv"), out).unwrap();
    let out = Command::new("sh")
        .arg("-c")
        .arg("ulimit -n 1024 && exec \"$0\" process \"$1\" --jobs 4 --formats folded,summary")
        .arg(env!("CARGO_BIN_EXE_jobprof"))
        .arg(t.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let s = summary(&dir);
    assert_eq!(s["samples"], n * u64::from(SHARDS));
    assert_eq!(s["shards"].as_array().unwrap().len(), SHARDS as usize);
    assert_eq!(
        archive_samples(&dir.join("perf.script.zst")),
        n * u64::from(SHARDS)
    );
}

#[test]
fn the_open_file_soft_limit_is_raised_to_the_hard_one() {
    let Some(base) = base() else { return };
    let (t, result) = copy_base(base);
    let started = t.path().join("started");
    let slow = t.path().join("slow-perf");
    fs::write(
        &slow,
        format!(
            "#!/bin/sh\nif [ \"$1\" = script ]; then echo $PPID >> '{}'; exec sleep 30; fi\nexec perf \"$@\"\n",
            started.display()
        ),
    )
    .unwrap();
    fs::set_permissions(&slow, fs::Permissions::from_mode(0o755)).unwrap();
    let mut child = Command::new("sh")
        .arg("-c")
        .arg("ulimit -S -n 256 && exec \"$0\" process --symbolizer perf --perf \"$1\" \"$2\"")
        .arg(env!("CARGO_BIN_EXE_jobprof"))
        .arg(&slow)
        .arg(&result)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    util::wait_for("perf script to start", Duration::from_secs(60), || {
        started.exists()
    });
    let limits = fs::read_to_string(format!("/proc/{}/limits", child.id())).unwrap();
    let _ = child.kill();
    let _ = child.wait();
    let _ = Command::new("pkill")
        .arg("-P")
        .arg(child.id().to_string())
        .status();
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap();
    let f: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(f[3], f[4], "soft limit not raised: {line}");
    assert_ne!(f[3], "256", "{line}");
}

/// The demo result directory (`fixtures/result_dir_demo`), copied.
fn demo() -> (tempfile::TempDir, PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let result = t.path().join("result_dir_demo");
    util::copy_demo(&result);
    (t, result)
}

#[test]
fn closed_or_broken_standard_streams_never_panic() {
    for redirect in ["2>&-", "2>/dev/full", ">&- 2>&-", ">/dev/full", "| true"] {
        let (t, result) = demo();
        let no_perf = t.path().join("bin");
        fs::create_dir_all(&no_perf).unwrap();
        let out = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "PATH={} \"$0\" process \"$1\" {redirect}; echo \"exit $?\" >&3",
                no_perf.display()
            ))
            .arg(env!("CARGO_BIN_EXE_jobprof"))
            .arg(&result)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .output_with_fd3();
        let dir = capture_dir(&result, 0, "q01");
        assert!(
            out.contains("exit 0") || (redirect == ">/dev/full" && out.contains("exit 1")),
            "{redirect}: {out}"
        );
        assert!(
            dir.join(".postprocess-complete").exists(),
            "{redirect}: {out}"
        );
        // Nothing jobprof printed ended up inside an output.
        let folded = fs::read_to_string(dir.join("stacks.folded")).unwrap();
        assert!(!folded.contains("[jobprof"), "{redirect}");
    }
}

/// Runs a command whose fd 3 is a pipe, returning what was written to it.
trait Fd3 {
    fn output_with_fd3(&mut self) -> String;
}

impl Fd3 for Command {
    fn output_with_fd3(&mut self) -> String {
        use std::io::Read;
        use std::os::fd::FromRawFd;
        use std::os::unix::process::CommandExt;
        let mut fds = [0; 2];
        // SAFETY: a valid two-element array.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        let w = fds[1];
        // SAFETY: dup2 in the child before exec is async-signal-safe.
        unsafe {
            self.pre_exec(move || {
                if libc::dup2(w, 3) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let mut child = self.spawn().unwrap();
        // SAFETY: our ends of the pipe.
        unsafe { libc::close(w) };
        // SAFETY: the pipe's read end, owned by nothing else.
        let mut r = unsafe { fs::File::from_raw_fd(fds[0]) };
        let mut s = String::new();
        r.read_to_string(&mut s).unwrap();
        child.wait().unwrap();
        s
    }
}

#[test]
fn old_layouts_derived_only_and_flat_perf_data_n_are_processed() {
    let Some(base) = base() else { return };
    // A capture dir with only derived text, no metadata.
    let (_t, result) = demo();
    let q = capture_dir(&result, 0, "q01");
    for e in fs::read_dir(&q).unwrap() {
        let p = e.unwrap().path();
        if p.file_name().unwrap() != "perf.script.zst" {
            fs::remove_file(p).unwrap();
        }
    }
    let out = jobprof().arg("process").arg(&result).output().unwrap();
    let text = output_text(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(
        text.contains("not validated: no capture metadata"),
        "{text}"
    );
    assert_eq!(summary(&q)["validated"], false);
    assert!(q.join("flamegraph.html").exists());

    // The original pipeline's result_dir_<jobid>/perf/perf.data.<n>.
    let t = tempfile::tempdir().unwrap();
    let flat = t.path().join("results/result_dir_777/perf");
    fs::create_dir_all(&flat).unwrap();
    let shards = data_files(&capture_dir(&base.result_dir, 0, "q1"));
    for (i, s) in shards.iter().enumerate() {
        fs::copy(s, flat.join(format!("perf.data.{i}"))).unwrap();
    }
    let symfs = base.result_dir.join("profiles/perf/worker_0/symfs");
    let samples = perf_counts(&shards, &symfs).0;
    let out = jobprof()
        .args(["process", "--formats", "folded,summary"])
        .arg(flat.parent().unwrap())
        .output()
        .unwrap();
    let text = output_text(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    let s = summary(&flat);
    assert_eq!(s["validated"], false);
    assert_eq!(s["job_id"], "777");
    assert_eq!(s["samples"], samples);
    assert_eq!(s["shards"].as_array().unwrap().len(), shards.len());
    assert_eq!(archive_samples(&flat.join("perf.script.zst")), samples);
    // reprocess finds it too, at any depth.
    fs::remove_file(flat.join(".postprocess-complete")).unwrap();
    let out = jobprof()
        .args(["reprocess", "--formats", "folded,summary"])
        .arg(t.path())
        .output()
        .unwrap();
    let text = output_text(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(flat.join(".postprocess-complete").exists(), "{text}");
}

#[test]
fn sums_past_two_to_the_64_never_wrap() {
    let t = tempfile::tempdir().unwrap();
    let big = t.path().join("big.folded");
    let small = t.path().join("small.folded");
    fs::write(&big, "a;b 18446744073709551615\na;c 18446744073709551615\n").unwrap();
    fs::write(&small, "a;b 5\na;c 7\n").unwrap();
    let out = jobprof()
        .arg("render")
        .arg(&big)
        .arg("-o")
        .arg(t.path().join("b.svg"))
        .output()
        .unwrap();
    let text = output_text(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("exceeded 18446744073709551615"), "{text}");
    for (before, after) in [(&small, &big), (&big, &small)] {
        for ext in ["svg", "html", "folded"] {
            let o = t.path().join(format!("d.{ext}"));
            let out = jobprof()
                .arg("diff")
                .arg(before)
                .arg(after)
                .arg("-o")
                .arg(&o)
                .output()
                .unwrap();
            assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
        }
    }
    // The folded diff keeps the exact counts.
    let d = fs::read_to_string(t.path().join("d.folded")).unwrap();
    assert!(d.contains("a;b 18446744073709551615 5"), "{d}");
}

#[test]
fn a_report_that_vanishes_during_collect_is_missing_with_a_warning() {
    let t = tempfile::tempdir().unwrap();
    let reports = t.path().join("reports");
    fs::create_dir_all(&reports).unwrap();
    fs::write(reports.join("7_n0_rank0.nsys-rep"), b"rank zero").unwrap();
    let gone = reports.join("7_n1_rank1.nsys-rep");
    fs::write(&gone, b"rank one").unwrap();
    let child = jobprof()
        .args(["nsys", "collect", "--report-root"])
        .arg(&reports)
        .args(["--poll", "100ms", "--settle", "2s", "--timeout", "60s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Polling starts once the collector holds its lock.
    util::wait_for("the collector to start", Duration::from_secs(60), || {
        reports.join(".jobprof-nsys.lock").exists()
    });
    std::thread::sleep(Duration::from_millis(500));
    fs::remove_file(&gone).unwrap();
    let out = child.wait_with_output().unwrap();
    let text = output_text(&out);
    assert_eq!(out.status.code(), Some(5), "{text}");
    assert!(
        text.contains("7_n1_rank1.nsys-rep") && text.contains("vanished"),
        "{text}"
    );
    let m: serde_json::Value =
        serde_json::from_slice(&util::read(&reports.join("manifest.json"))).unwrap();
    let e = m["reports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["path"] == "7_n1_rank1.nsys-rep")
        .unwrap_or_else(|| panic!("vanished report not in the manifest: {m}"));
    assert_eq!(e["status"], "missing");
}

#[test]
fn a_forced_rerun_never_downgrades_a_complete_result() {
    let Some(base) = base() else { return };
    let (_t, result) = copy_base(base);
    let dir = capture_dir(&result, 0, "q1");
    let out = jobprof().arg("process").arg(&result).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let snapshot_outputs =
        || -> Vec<Vec<u8>> { OUTPUTS.iter().map(|n| util::read(&dir.join(n))).collect() };
    let complete = snapshot_outputs();
    // symfs/ gone: perf names fewer frames than the archive on disk has.
    let symfs = result.join("profiles/perf/worker_0/symfs");
    let moved = result.join("symfs.away");
    fs::rename(&symfs, &moved).unwrap();
    let out = jobprof()
        .args(["process", "--force"])
        .arg(&result)
        .output()
        .unwrap();
    let text = output_text(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("symbolized worse") && text.contains("kept the previous"),
        "{text}"
    );
    assert!(snapshot_outputs() == complete, "outputs changed: {text}");
    fs::rename(&moved, &symfs).unwrap();
    // One shard corrupted after the complete run.
    let shard = dir.join("perf.data.part001");
    let len = fs::metadata(&shard).unwrap().len();
    fs::OpenOptions::new()
        .write(true)
        .open(&shard)
        .unwrap()
        .set_len(len / 2)
        .unwrap();
    let out = jobprof()
        .args(["process", "--force"])
        .arg(&result)
        .output()
        .unwrap();
    let text = output_text(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("perf.data.part001") && text.contains("kept the previous"),
        "{text}"
    );
    assert!(snapshot_outputs() == complete, "outputs changed: {text}");
    // Still complete: a plain rerun skips it.
    let out = jobprof().arg("process").arg(&result).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("skipped"));
}

/// A permission error names the user's file: the output `fold` could not
/// write (not the temporary file beside it), the shard jobprof could not
/// open (not "cannot open" alone; its text is folded instead).
#[test]
fn permission_errors_name_the_users_file() {
    if !util::require(is_root() && have("setpriv"), "root and setpriv") {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    fs::set_permissions(t.path(), fs::Permissions::from_mode(0o755)).unwrap();
    util::copy_demo(&t.path().join("r"));
    Command::new("chown")
        .args(["-R", "nobody"])
        .arg(t.path().join("r"))
        .status()
        .unwrap();
    let q = t.path().join("r/profiles/perf/worker_0/q01");
    let script = q.join("perf.script.zst");
    let out = t.path().join("nope.folded");
    let o = util::jobprof_as_nobody(&[
        "fold".as_ref(),
        script.as_os_str(),
        "-o".as_ref(),
        out.as_os_str(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", output_text(&o));
    let err = util::stderr(&o);
    assert!(
        err.contains(&format!("{}: Permission denied", out.display())),
        "{err}"
    );
    assert!(
        !err.contains(".nope.folded."),
        "names a temporary file: {err}"
    );

    let shard = q.join("perf.data.part000");
    fs::set_permissions(&shard, fs::Permissions::from_mode(0o000)).unwrap();
    let o = util::jobprof_as_nobody(&["process".as_ref(), t.path().join("r").as_os_str()]);
    let text = output_text(&o);
    // Named by its path; the capture's symbolized text is folded instead.
    assert!(
        text.contains(&format!(
            "shard 0: cannot read {}: Permission denied",
            shard.display()
        )),
        "{text}"
    );
    assert!(text.contains("q01: processed"), "{text}");
}
