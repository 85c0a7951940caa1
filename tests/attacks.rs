//! Attacks of issue 23 that got through before: outputs of the job views
//! written through links another user planted, FIFOs and devices among the
//! inputs, flat stream input, shifting array shares, runs that delete each
//! other's temporaries, absurd counts. Each test plants the attack as the
//! issue's reproducer does (links by `nobody` through `setpriv` while
//! jobprof runs as root) and checks the clean behaviour:
//! docs/reliability.md lists the guarantee each one proves.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::util::{self, copy_demo, jobprof, output_text};
use crate::util::{as_nobody, have, is_root};

/// The demo result directory copied into a 0755 temporary directory,
/// writable by everyone below (a shared results tree), with `victim`
/// (a file) and `vdir` (a directory) beside it, outside the tree.
struct Shared {
    _t: tempfile::TempDir,
    result: PathBuf,
    victim: PathBuf,
    vdir: PathBuf,
}

/// `chmod -R a+rwX`: anyone may plant there.
fn chmod_shared(dir: &Path) {
    let st = std::process::Command::new("chmod")
        .args(["-R", "a+rwX"])
        .arg(dir)
        .status()
        .unwrap();
    assert!(st.success());
}

impl Shared {
    fn new() -> Shared {
        let t = tempfile::tempdir().unwrap();
        fs::set_permissions(t.path(), fs::Permissions::from_mode(0o755)).unwrap();
        let result = t.path().join("r");
        copy_demo(&result);
        chmod_shared(&result);
        let victim = t.path().join("victim");
        fs::write(&victim, "precious\n").unwrap();
        fs::set_permissions(&victim, fs::Permissions::from_mode(0o666)).unwrap();
        let vdir = t.path().join("vdir");
        fs::create_dir(&vdir).unwrap();
        fs::set_permissions(&vdir, fs::Permissions::from_mode(0o777)).unwrap();
        Shared {
            _t: t,
            result,
            victim,
            vdir,
        }
    }

    fn perf(&self) -> PathBuf {
        self.result.join("profiles/perf")
    }

    fn untouched(&self, context: &str) {
        assert_eq!(
            fs::read_to_string(&self.victim).unwrap(),
            "precious\n",
            "{context}: the victim outside the tree was written"
        );
        let inside: Vec<_> = fs::read_dir(&self.vdir).unwrap().collect();
        assert!(
            inside.is_empty(),
            "{context}: written into the outside dir: {inside:?}"
        );
    }
}

fn setpriv_ready() -> bool {
    util::require(is_root() && have("setpriv"), "root and setpriv")
}

#[test]
fn job_views_are_never_written_through_links_planted_by_another_user() {
    if !setpriv_ready() {
        return;
    }
    // (what to plant, relative to profiles/perf; a first run before it)
    let cases: [(&str, bool); 5] = [
        ("ln -s {victim} index.html", false),
        ("ln -s {victim} index.json", false),
        ("ln -s {vdir} queries", false),
        ("mkdir -p queries && ln -s {vdir} queries/q01", false),
        ("ln -sf {victim} queries/q01/flamegraph.html", true),
    ];
    for (plant, first) in cases {
        for cmd in ["process", "reprocess"] {
            let s = Shared::new();
            let perf = s.perf();
            if first {
                let o = jobprof().arg("process").arg(&s.result).output().unwrap();
                assert!(o.status.success(), "{}", output_text(&o));
                chmod_shared(&perf.join("queries"));
            }
            let script = plant
                .replace("{victim}", &s.victim.to_string_lossy())
                .replace("{vdir}", &s.vdir.to_string_lossy());
            as_nobody(&format!("cd {} && {script}", perf.display()));
            let mut c = jobprof();
            c.arg(cmd).arg(&s.result);
            if cmd == "reprocess" || first {
                c.arg("--force");
            }
            let o = c.output().unwrap();
            let text = output_text(&o);
            let context = format!("{cmd} after `{plant}`");
            s.untouched(&context);
            assert_eq!(o.status.code(), Some(1), "{context}: {text}");
            assert!(
                text.contains("is a symbolic link") && text.contains("not written"),
                "{context}: {text}"
            );
            assert!(!text.contains("panicked"), "{context}: {text}");
        }
    }
}

/// The pid of a process that ran and is gone.
fn dead_pid() -> u32 {
    let mut c = std::process::Command::new("true").spawn().unwrap();
    let pid = c.id();
    c.wait().unwrap();
    pid
}

fn hostname() -> String {
    let o = std::process::Command::new("hostname").output().unwrap();
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

#[test]
fn leftovers_of_killed_job_view_writers_are_removed_live_ones_kept() {
    let t = tempfile::tempdir().unwrap();
    let result = t.path().join("r");
    copy_demo(&result);
    let o = jobprof().arg("process").arg(&result).output().unwrap();
    assert!(o.status.success(), "{}", output_text(&o));
    let perf = result.join("profiles/perf");
    let q = perf.join("queries/q01");
    let host = hostname();
    let dead = dead_pid();
    let mut sleeper = std::process::Command::new("sleep")
        .arg("60")
        .spawn()
        .unwrap();
    let stale = [
        q.join(".flamegraph.html.a1B2c3.tmp"),
        q.join(format!(".stacks.folded.{host}-{dead}-0.tmp")),
        perf.join(format!(".index.html.{host}-{dead}-3.tmp")),
        perf.join(".index.json.Xy12zz.tmp"),
    ];
    let live = [
        q.join(format!(".sources.json.{host}-{}-0.tmp", sleeper.id())),
        perf.join(format!(".index.html.{host}-{}-1.tmp", sleeper.id())),
    ];
    for p in stale.iter().chain(&live) {
        fs::write(p, "half").unwrap();
    }
    let o = jobprof().arg("process").arg(&result).output().unwrap();
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    assert!(o.status.success(), "{}", output_text(&o));
    for p in &stale {
        assert!(!p.exists(), "a killed writer's {} survived", p.display());
    }
    for p in &live {
        assert!(p.exists(), "a running writer's {} was removed", p.display());
    }
}

#[test]
fn a_run_never_removes_the_temporaries_of_another_run_on_the_same_capture() {
    let t = tempfile::tempdir().unwrap();
    let result = t.path().join("r");
    copy_demo(&result);
    let cap = result.join("profiles/perf/worker_0/q01");
    let host = hostname();
    let mut sleeper = std::process::Command::new("sleep")
        .arg("60")
        .spawn()
        .unwrap();
    let theirs = cap.join(format!(".perf.script.zst.{host}-{}-0.tmp", sleeper.id()));
    let killed = cap.join(format!(".perf.script.zst.{host}-{}-0.tmp", dead_pid()));
    fs::write(&theirs, "being written").unwrap();
    fs::write(&killed, "left").unwrap();
    let o = jobprof().arg("process").arg(&result).output().unwrap();
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    assert!(o.status.success(), "{}", output_text(&o));
    assert!(
        theirs.exists(),
        "the other run's temporary was removed as a leftover"
    );
    assert!(!killed.exists(), "a killed run's temporary survived");
}

fn mkfifo(p: &Path) {
    let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    let r = unsafe { libc::mkfifo(c.as_ptr(), 0o666) };
    assert_eq!(r, 0, "{}", p.display());
}

/// Runs `c` to its end or kills it after `secs` (then: `None`).
fn within(mut c: std::process::Command, secs: u64) -> Option<std::process::Output> {
    use std::process::Stdio;
    let mut child = c
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    loop {
        if child.try_wait().unwrap().is_some() {
            return Some(child.wait_with_output().unwrap());
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

const DEMO_EXE: &str = "opt/jobprof-demo/demo_worker";

#[test]
fn a_fifo_among_the_symbol_files_never_hangs_a_run() {
    for cmd in ["process", "reprocess"] {
        let t = tempfile::tempdir().unwrap();
        let result = t.path().join("r");
        copy_demo(&result);
        let symfs = result.join("profiles/perf/worker_0/symfs");
        let debug = symfs
            .join("usr/lib/debug")
            .join(format!("{DEMO_EXE}.debug"));
        fs::create_dir_all(debug.parent().unwrap()).unwrap();
        mkfifo(&debug);
        let mut c = jobprof();
        c.arg(cmd).arg(&result);
        let o =
            within(c, 120).unwrap_or_else(|| panic!("{cmd}: hung on the FIFO {}", debug.display()));
        assert!(o.status.success(), "{cmd}: {}", output_text(&o));
        assert!(
            output_text(&o).contains("100.0% named at the leaf"),
            "{cmd}: the real file beside the FIFO names the frames: {}",
            output_text(&o)
        );
    }
}

#[test]
fn a_fifo_at_index_json_or_sources_json_never_hangs_the_locked_refresh() {
    for name in ["index.json", "queries/q01/sources.json"] {
        let t = tempfile::tempdir().unwrap();
        let result = t.path().join("r");
        copy_demo(&result);
        let perf = result.join("profiles/perf");
        if name.starts_with("queries") {
            let o = jobprof().arg("process").arg(&result).output().unwrap();
            assert!(o.status.success(), "{}", output_text(&o));
            fs::remove_file(perf.join(name)).unwrap();
        }
        mkfifo(&perf.join(name));
        let mut c = jobprof();
        c.arg("process").arg("--force").arg(&result);
        let o = within(c, 120).unwrap_or_else(|| panic!("hung on a FIFO at {name}"));
        let text = output_text(&o);
        assert_eq!(o.status.code(), Some(1), "{name}: {text}");
        assert!(
            text.contains(name) && text.contains("special file"),
            "{name}: the error names the FIFO: {text}"
        );
    }
}

#[test]
fn a_symbolic_link_inside_symfs_is_not_followed() {
    let t = tempfile::tempdir().unwrap();
    let result = t.path().join("r");
    copy_demo(&result);
    let exe = result.join("profiles/perf/worker_0/symfs").join(DEMO_EXE);
    // The real file moved outside the tree, a link left in its place.
    let private = t.path().join("priv");
    fs::rename(&exe, &private).unwrap();
    fs::set_permissions(&private, fs::Permissions::from_mode(0o600)).unwrap();
    std::os::unix::fs::symlink(&private, &exe).unwrap();
    let o = jobprof().arg("process").arg(&result).output().unwrap();
    let text = output_text(&o);
    assert!(o.status.success(), "{text}");
    assert!(
        !text.contains("100.0% named at the leaf"),
        "the linked file's symbols were read: {text}"
    );
    let folded = fs::read_to_string(exe.parent().unwrap().join("../../../q01/stacks.folded"));
    let folded = folded.unwrap_or_default();
    assert!(
        !folded.contains("main"),
        "a symbol of the linked file: {folded}"
    );
}

#[test]
fn the_recorder_never_waits_on_a_fifo_pid_file() {
    let t = tempfile::tempdir().unwrap();
    let fifo = t.path().join("pid");
    mkfifo(&fifo);
    let sidecar = [
        "--token-dir",
        "T",
        "--worker",
        "0",
        "--out",
        "O",
        "--staging",
        "S",
        "--start-timeout",
        "30",
    ];
    for (sub, extra) in [("preflight", &[][..]), ("sidecar", &sidecar[..])] {
        let mut c = std::process::Command::new(util::recorder());
        c.current_dir(t.path())
            .arg(sub)
            .arg("--pid-file")
            .arg(&fifo);
        for d in ["T", "O"] {
            let _ = fs::create_dir(t.path().join(d));
        }
        c.args(extra);
        let o = within(c, 20).unwrap_or_else(|| panic!("{sub}: waits on the FIFO pid file"));
        let text = output_text(&o);
        assert_eq!(o.status.code(), Some(2), "{sub}: {text}");
        assert!(text.contains("is a FIFO"), "{sub}: {text}");
    }
}

#[test]
fn flat_stream_input_over_a_block_folds_and_never_spins() {
    use std::io::Write;
    let t = tempfile::tempdir().unwrap();
    // 33 MiB without a blank line: more than one 32 MiB stream block (long
    // lines: fewer of them for the debug build to fold).
    let lib = "x".repeat(200);
    let mut text = Vec::new();
    for i in 0..160_000 {
        writeln!(
            text,
            "prog 1 {i}.000001: 1 cpu-clock: 4004 main+0x4 (/{lib}/prog)"
        )
        .unwrap();
    }
    assert!(text.len() > 32 << 20);
    let plain = t.path().join("flat.txt");
    fs::write(&plain, &text).unwrap();
    let gz = t.path().join("flat.txt.gz");
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(&text).unwrap();
    fs::write(&gz, enc.finish().unwrap()).unwrap();
    let zst = t.path().join("flat.txt.zst");
    fs::write(&zst, zstd::encode_all(&text[..], 1).unwrap()).unwrap();
    for (what, arg, stdin) in [
        ("stdin", None, Some(&plain)),
        (".gz", Some(&gz), None),
        (".zst", Some(&zst), None),
    ] {
        let mut c = jobprof();
        c.arg("fold");
        if let Some(a) = arg {
            c.arg(a);
        }
        if let Some(p) = stdin {
            c.stdin(fs::File::open(p).unwrap());
        }
        let o = within(c, 300).unwrap_or_else(|| panic!("{what}: still folding after 300 s"));
        assert!(o.status.success(), "{what}: {}", output_text(&o));
        assert_eq!(
            String::from_utf8_lossy(&o.stdout),
            "prog;main 160000\n",
            "{what}"
        );
    }
}

#[test]
fn array_shares_stay_put_when_a_result_dir_appears_between_task_starts() {
    let t = tempfile::tempdir().unwrap();
    let rp = t.path().join("rp");
    for i in 1..=6 {
        copy_demo(&rp.join(format!("result_dir_{i}")));
    }
    let task = |index: &str| {
        let o = jobprof()
            .args([
                "reprocess",
                "-q",
                "--jobs",
                "1",
                "--array-count",
                "2",
                "--array-index",
                index,
            ])
            .arg(&rp)
            .output()
            .unwrap();
        assert!(o.status.success(), "task {index}: {}", output_text(&o));
    };
    task("0");
    copy_demo(&rp.join("result_dir_0"));
    task("1");
    for i in 1..=6 {
        let cap = rp.join(format!("result_dir_{i}/profiles/perf/worker_0/q01"));
        assert!(
            cap.join(".postprocess-complete").is_file(),
            "{}: given to no task once result_dir_0 appeared",
            cap.display()
        );
    }
}

#[test]
fn absurd_counts_are_usage_errors_naming_the_limit() {
    let t = tempfile::tempdir().unwrap();
    let result = t.path().join("r");
    copy_demo(&result);
    for args in [
        &["process", "--time-slices", "4000000000"][..],
        &["process", "--time-slices", "1000000"],
        &["process", "--jobs", "1000000"],
        &["reprocess", "--jobs", "1000000"],
    ] {
        let mut c = jobprof();
        c.args(args).arg(&result);
        let o = within(c, 60).unwrap_or_else(|| panic!("{args:?}: still running after 60 s"));
        let text = output_text(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {text}");
        assert!(
            text.contains("more than the limit of 1024"),
            "{args:?}: {text}"
        );
        assert!(
            !text.contains("panicked") && !text.contains("backtrace"),
            "{text}"
        );
    }
}

#[test]
fn odd_query_directory_names_never_break_the_job_views_or_the_result_lines() {
    use std::os::unix::ffi::OsStrExt;
    let t = tempfile::tempdir().unwrap();
    let result = t.path().join("r");
    copy_demo(&result);
    let worker = result.join("profiles/perf/worker_0");
    let bad = worker.join(std::ffi::OsStr::from_bytes(b"q\xff"));
    let newline = worker.join("q\nFORGED: failed");
    util::copy_tree(&worker.join("q01"), &bad);
    util::copy_tree(&worker.join("q01"), &newline);
    let o = jobprof().arg("process").arg(&result).output().unwrap();
    let text = output_text(&o);
    assert!(o.status.success(), "{text}");
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains("job index of 3 capture(s), 2 processed"),
        "{text}"
    );
    assert!(
        stdout.lines().all(|l| !l.starts_with("FORGED")),
        "a newline in a name split a result line: {stdout}"
    );
    assert!(stdout.contains("q\\nFORGED: failed: processed"), "{stdout}");
    let index = fs::read_to_string(result.join("profiles/perf/index.json")).unwrap();
    assert!(index.contains("is not UTF-8"), "{index}");
    assert!(result
        .join("profiles/perf/queries/q01/flamegraph.html")
        .is_file());
}

// Issue 35, the processor's side: jit/ read without the rules, bombs that
// aborted the root post-processor.

/// The demo's one capture directory.
fn demo_q01(result: &Path) -> PathBuf {
    result.join("profiles/perf/worker_0/q01")
}

/// Runs `jobprof ARGS` to its end within `secs`, or fails naming `what`.
fn run_within(args: &[&std::ffi::OsStr], secs: u64, what: &str) -> std::process::Output {
    let mut c = jobprof();
    c.args(args);
    within(c, secs).unwrap_or_else(|| panic!("{what}: still running after {secs} s (hung?)"))
}

#[test]
fn jit_files_planted_as_links_fifos_and_devices_are_refused_and_never_block() {
    use std::os::unix::fs::symlink;
    for cmd in ["process", "reprocess"] {
        let s = Shared::new();
        let q = demo_q01(&s.result);
        let jit = q.join("jit");
        fs::create_dir(&jit).unwrap();
        // A root-only perf map outside the tree, linked in.
        let secret = s.vdir.parent().unwrap().join("secret.map");
        fs::write(&secret, "401000 100000 root-only-secret\n").unwrap();
        fs::set_permissions(&secret, fs::Permissions::from_mode(0o600)).unwrap();
        symlink(&secret, jit.join("perf-1.map")).unwrap();
        mkfifo(&jit.join("perf-2.map"));
        symlink("/dev/zero", jit.join("jit-3.dump")).unwrap();
        let mut planted = vec![
            ("perf-1.map", "symbolic link"),
            ("perf-2.map", "FIFO"),
            ("jit-3.dump", "symbolic link"),
        ];
        let node =
            std::ffi::CString::new(jit.join("jit-4.dump").as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid path; /dev/zero's device numbers (root only).
        if unsafe { libc::mknod(node.as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(1, 5)) } == 0 {
            planted.push(("jit-4.dump", "a device"));
        }
        let o = run_within(&[cmd.as_ref(), s.result.as_os_str()], 120, cmd);
        let text = output_text(&o);
        assert_eq!(o.status.code(), Some(0), "{cmd}: {text}");
        for (file, what) in &planted {
            let named = format!("q01/jit/{file}");
            assert!(
                text.lines()
                    .any(|l| l.contains("warning") && l.contains(&named) && l.contains(what)),
                "{cmd}: no warning naming {named} ({what}): {text}"
            );
        }
        let summary = fs::read_to_string(q.join("summary.json")).unwrap();
        assert!(summary.contains("q01/jit/perf-2.map"), "{cmd}: {summary}");
        for out in ["stacks.folded", "summary.json", "report.txt"] {
            let bytes = fs::read(q.join(out)).unwrap();
            assert!(
                !String::from_utf8_lossy(&bytes).contains("root-only-secret"),
                "{cmd}: the linked secret reached {out}"
            );
        }
        s.untouched(cmd);
    }
    // A link at jit/ itself.
    let s = Shared::new();
    let q = demo_q01(&s.result);
    let elsewhere = s.vdir.join("jit");
    fs::create_dir(&elsewhere).unwrap();
    fs::write(elsewhere.join("perf-1.map"), "401000 100000 outside-name\n").unwrap();
    symlink(&elsewhere, q.join("jit")).unwrap();
    let o = run_within(&["process".as_ref(), s.result.as_os_str()], 120, "jit link");
    let text = output_text(&o);
    assert_eq!(o.status.code(), Some(0), "{text}");
    assert!(
        text.contains("q01/jit: is a symbolic link"),
        "no warning naming the jit/ link: {text}"
    );
    let folded = fs::read_to_string(q.join("stacks.folded")).unwrap();
    assert!(!folded.contains("outside-name"));
}

/// gzip members of 1 MiB of `piece` (after `head`), past 64 MiB in all.
fn gzip_bomb(path: &Path, head: &[u8], piece: &[u8]) {
    use std::io::Write;
    let member = |bytes: &[u8]| {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(bytes).unwrap();
        enc.finish().unwrap()
    };
    let body: Vec<u8> = piece.iter().copied().cycle().take(1 << 20).collect();
    let mut f = fs::File::create(path).unwrap();
    f.write_all(&member(&[head, &body].concat())).unwrap();
    let rest = member(&body);
    for _ in 0..65 {
        f.write_all(&rest).unwrap();
    }
}

#[test]
fn gzip_bombs_in_old_dirs_are_their_captures_errors_and_the_tree_goes_on() {
    use std::io::Write;
    let t = tempfile::tempdir().unwrap();
    let worker = t.path().join("old/profiles/perf/worker_0");
    let (line, sample, good) = (worker.join("q01"), worker.join("q02"), worker.join("q03"));
    for d in [&line, &sample, &good] {
        fs::create_dir_all(d).unwrap();
    }
    // 66 MiB without a newline; one sample of 66 MiB of frame lines.
    gzip_bomb(&line.join("perf.script.gz"), b"", b"A");
    gzip_bomb(
        &sample.join("perf.script.gz"),
        b"w 1 1.0: 1 cpu-clock: \n",
        b"\t    1234 leaf+0x4 (/bin/w)\n",
    );
    let text = util::read(&util::fixtures().join("mt-fp.perf.txt"));
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(&text).unwrap();
    fs::write(good.join("perf.script.gz"), enc.finish().unwrap()).unwrap();
    let o = run_within(
        &["reprocess".as_ref(), t.path().join("old").as_os_str()],
        300,
        "reprocess",
    );
    let out = output_text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    for (q, what) in [("q01", "a sample"), ("q02", "a sample")] {
        let named = format!("{q}/perf.script.gz: {what} longer than 64 MiB");
        assert!(
            out.lines()
                .any(|l| l.contains("failed") && l.contains(&named)),
            "no failure naming {named}: {out}"
        );
    }
    assert!(good.join("stacks.folded").exists(), "{out}");
    assert!(!line.join("stacks.folded").exists() && !sample.join("stacks.folded").exists());
    // `jobprof report` and `render` on such input: the same error, exit 2.
    for sub in ["report", "render"] {
        let o = run_within(
            &[sub.as_ref(), line.join("perf.script.gz").as_os_str()],
            120,
            sub,
        );
        let msg = output_text(&o);
        assert_eq!(o.status.code(), Some(2), "{sub}: {msg}");
        assert!(msg.contains("longer than 64 MiB"), "{sub}: {msg}");
    }
}

#[test]
fn a_feature_section_of_two_to_the_62_bytes_never_aborts_process() {
    let t = tempfile::tempdir().unwrap();
    let result = t.path().join("r");
    copy_demo(&result);
    let shard = demo_q01(&result).join("perf.data.part000");
    let mut b = fs::read(&shard).unwrap();
    let u64_at = |b: &[u8], at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap());
    // The feature table follows the data section; its first entry's size.
    let table = (u64_at(&b, 40) + u64_at(&b, 48)) as usize;
    b[table + 8..table + 16].copy_from_slice(&(1u64 << 62).to_le_bytes());
    fs::write(&shard, &b).unwrap();
    let o = run_within(
        &[
            "process".as_ref(),
            "--formats".as_ref(),
            "all".as_ref(),
            result.as_os_str(),
        ],
        120,
        "process",
    );
    let text = output_text(&o);
    assert!(
        matches!(o.status.code(), Some(0 | 1)),
        "killed by a signal: {:?} {text}",
        o.status
    );
    assert!(!text.contains("memory allocation"), "{text}");
    assert!(
        text.contains("damaged file header: feature section") && text.contains("q01"),
        "{text}"
    );
}

/// The path the demo capture records for its worker.
const DEMO_RECORDED: &str = "/opt/jobprof-demo/demo_worker";
/// The demo worker's build id, as the demo capture records it.
const DEMO_BUILD_ID: &str = "3aa3336b5269bbf5b2d7d4ad345bf5f51cf70e1d";

/// Rewrites every `from` in bytes `lo..hi` of the file `p` to `to` (of the
/// same length); how many.
fn patch_bytes(p: &Path, (lo, hi): (usize, usize), from: &[u8], to: &[u8]) -> usize {
    assert_eq!(from.len(), to.len());
    let mut data = fs::read(p).unwrap();
    let hi = hi.min(data.len());
    let mut n = 0;
    let mut i = lo;
    while let Some(at) = data[i..hi].windows(from.len()).position(|w| w == from) {
        data[i + at..i + at + from.len()].copy_from_slice(to);
        i += at + from.len();
        n += 1;
    }
    fs::write(p, data).unwrap();
    n
}

/// The data section of the perf.data file `p`: (start, end).
fn data_section(p: &Path) -> (usize, usize) {
    let head = fs::read(p).unwrap();
    let u64_at = |i: usize| u64::from_le_bytes(head[i..i + 8].try_into().unwrap()) as usize;
    (u64_at(40), u64_at(40) + u64_at(48))
}

/// The demo capture at `result` rewritten as issue 45's reproducer does:
/// the worker's path in its MMAP records is `secret` (of the same length),
/// its build id zeros (and the build-id table names it at the old path
/// only: no build id is recorded for `secret`), its snapshot copy gone.
fn point_demo_at(result: &Path, secret: &Path) {
    let q = demo_q01(result);
    let id: Vec<u8> = (0..20)
        .map(|i| u8::from_str_radix(&DEMO_BUILD_ID[2 * i..2 * i + 2], 16).unwrap())
        .collect();
    let (mut paths, mut ids) = (0, 0);
    for part in ["perf.data.part000", "perf.data.part001"] {
        let p = q.join(part);
        let to = secret.as_os_str().as_encoded_bytes();
        paths += patch_bytes(&p, data_section(&p), DEMO_RECORDED.as_bytes(), to);
        ids += patch_bytes(&p, (0, usize::MAX), &id, &[0; 20]);
    }
    assert!(
        paths >= 2 && ids >= 1,
        "{paths} paths, {ids} build ids patched"
    );
    fs::remove_file(result.join("profiles/perf/worker_0/symfs").join(DEMO_EXE)).unwrap();
}

#[test]
fn a_recorded_path_without_a_build_id_never_reads_a_root_only_host_file_as_root() {
    if !util::require(is_root(), "root") {
        return;
    }
    let t = tempfile::Builder::new().tempdir_in("/tmp").unwrap();
    fs::set_permissions(t.path(), fs::Permissions::from_mode(0o755)).unwrap();
    // A root-only copy of the worker in a 0700 directory, at a path as
    // long as the recorded one.
    let base = t.path().as_os_str().len() + "/".len() + "/demo_worker".len();
    let pad = DEMO_RECORDED.len().checked_sub(base).filter(|&n| n > 0);
    let pad = pad.unwrap_or_else(|| panic!("{} is too long a tempdir", t.path().display()));
    let private = t.path().join("s".repeat(pad));
    fs::create_dir(&private).unwrap();
    fs::set_permissions(&private, fs::Permissions::from_mode(0o700)).unwrap();
    let secret = private.join("demo_worker");
    let real = util::fixtures().join("result_dir_demo/profiles/perf/worker_0/symfs");
    fs::copy(real.join(DEMO_EXE), &secret).unwrap();
    // (owner, symbolizer, the capture keeps its symfs/): root's own
    // capture names the file by path, as perf does; nobody's never, with
    // either symbolizer, with or without a snapshot.
    let mut cases = vec![("root", "auto", true), ("nobody", "auto", true)];
    if util::require(have("perf"), "perf") {
        cases.extend([("nobody", "perf", true), ("nobody", "perf", false)]);
    }
    for (i, (owner, symbolizer, symfs)) in cases.into_iter().enumerate() {
        let case = format!("{owner}'s capture, --symbolizer {symbolizer}, symfs/ {symfs}");
        let result = t.path().join(format!("r{i}"));
        copy_demo(&result);
        point_demo_at(&result, &secret);
        if !symfs {
            fs::remove_dir_all(result.join("profiles/perf/worker_0/symfs")).unwrap();
        }
        if owner == "nobody" {
            let st = std::process::Command::new("chown")
                .args(["-R", "nobody:nogroup"])
                .arg(&result)
                .status()
                .unwrap();
            assert!(st.success());
        }
        let mut c = jobprof();
        c.args(["process", "--symbolizer", symbolizer]).arg(&result);
        let o = c.output().unwrap();
        let text = output_text(&o);
        assert!(o.status.success(), "{case}: {text}");
        let folded = fs::read_to_string(demo_q01(&result).join("stacks.folded")).unwrap();
        for name in ["demo_run_query", "demo_sort_results"] {
            assert_eq!(
                folded.contains(name),
                owner == "root",
                "{case}: {name} of the root-only file in stacks.folded: {text}"
            );
        }
    }
}

/// Writes the worker's uid and gid into the demo capture's `capture.json`
/// as the recorder does (`None`: left as older recorders wrote it).
fn record_worker_ids(result: &Path, ids: Option<(u32, u32)>) {
    let Some((uid, gid)) = ids else {
        return;
    };
    let p = demo_q01(result).join("capture.json");
    let mut v: serde_json::Value = serde_json::from_str(&fs::read_to_string(&p).unwrap()).unwrap();
    v["worker_uid"] = uid.into();
    v["worker_gid"] = gid.into();
    fs::write(&p, serde_json::to_string_pretty(&v).unwrap()).unwrap();
}

#[test]
fn a_root_owned_capture_of_another_users_worker_never_reads_a_root_only_host_file_as_root() {
    // Issue 55: the root sidecar publishes a root-owned capture of a
    // worker that ran as `nobody`; the DSO paths in it are the worker's
    // own mmaps. One the snapshot lacks, recorded without a build id,
    // points at a root-only file, directly or through a link `nobody`
    // planted in a directory of its own after the capture.
    if !util::require(is_root(), "root") {
        return;
    }
    let t = tempfile::Builder::new().tempdir_in("/tmp").unwrap();
    fs::set_permissions(t.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let base = t.path().as_os_str().len() + "/".len() + "/demo_worker".len();
    let pad = DEMO_RECORDED.len().checked_sub(base).filter(|&n| n > 0);
    let pad = pad.unwrap_or_else(|| panic!("{} is too long a tempdir", t.path().display()));
    // The root-only file, in a 0700 directory.
    let private = t.path().join("s".repeat(pad));
    fs::create_dir(&private).unwrap();
    fs::set_permissions(&private, fs::Permissions::from_mode(0o700)).unwrap();
    let secret = private.join("demo_worker");
    let real = util::fixtures().join("result_dir_demo/profiles/perf/worker_0/symfs");
    fs::copy(real.join(DEMO_EXE), &secret).unwrap();
    // nobody's directory, where the worker mapped its library, now a link.
    let theirs = t.path().join("n".repeat(pad));
    fs::create_dir(&theirs).unwrap();
    std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
    let link = theirs.join("demo_worker");
    as_nobody(&format!("ln -s {} {}", secret.display(), link.display()));
    const NOBODY: Option<(u32, u32)> = Some((65534, 65534));
    const ROOT: Option<(u32, u32)> = Some((0, 0));
    // (worker ids recorded, recorded path, symbolizer, keeps symfs/,
    // named): a worker of root's names the file by path, as perf does, and
    // so does a capture made before the ids were recorded (today's rule);
    // nobody's worker never, with either symbolizer.
    let mut cases = vec![
        (NOBODY, &secret, "auto", true, false),
        (NOBODY, &link, "auto", true, false),
        (NOBODY, &link, "auto", false, false),
        (ROOT, &secret, "auto", true, true),
        (None, &secret, "auto", true, true),
    ];
    if util::require(have("perf"), "perf") {
        cases.extend([
            (NOBODY, &secret, "perf", true, false),
            (NOBODY, &secret, "perf", false, false),
            (NOBODY, &link, "perf", false, false),
            (ROOT, &secret, "perf", false, true),
        ]);
    }
    let traced = have("strace");
    for (i, (ids, path, symbolizer, symfs, named)) in cases.into_iter().enumerate() {
        let case = format!(
            "worker {ids:?}, path {}, --symbolizer {symbolizer}, symfs/ {symfs}",
            path.display()
        );
        let result = t.path().join(format!("r{i}"));
        copy_demo(&result);
        point_demo_at(&result, path);
        record_worker_ids(&result, ids);
        if !symfs {
            fs::remove_dir_all(result.join("profiles/perf/worker_0/symfs")).unwrap();
        }
        // Under strace (-z: successful calls only), every process.
        let trace = t.path().join(format!("r{i}.strace"));
        let mut c = jobprof();
        if traced {
            c = std::process::Command::new("strace");
            c.args(["-f", "-qq", "-z", "-e", "trace=open,openat,openat2", "-o"]);
            c.arg(&trace).arg(env!("CARGO_BIN_EXE_jobprof"));
            c.stdin(std::process::Stdio::null())
                .env_remove("CI_FAKE_LOG");
        }
        c.args(["process", "--symbolizer", symbolizer]).arg(&result);
        let o = c.output().unwrap();
        let text = output_text(&o);
        assert!(o.status.success(), "{case}: {text}");
        let folded = fs::read_to_string(demo_q01(&result).join("stacks.folded")).unwrap();
        for name in ["demo_run_query", "demo_sort_results"] {
            assert_eq!(
                folded.contains(name),
                named,
                "{case}: {name} of the root-only file in stacks.folded: {text}"
            );
        }
        if traced {
            // Opened (with root's rights) only where it is named.
            let needle = format!("\"{}\"", path.display());
            let trace = fs::read_to_string(&trace).unwrap();
            let opened: Vec<&str> = trace.lines().filter(|l| l.contains(&needle)).collect();
            assert_eq!(!opened.is_empty(), named, "{case}: {opened:#?}");
        }
    }
}
