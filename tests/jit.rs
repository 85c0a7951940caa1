//! JIT-compiled code named as the node's own `perf script` names it. Real
//! runtimes (OpenJDK 17 with `-XX:+PreserveFramePointer`, Node with
//! `--perf-basic-prof`, Python 3.12+ with `-X perf` where the machine has
//! one), each running two known hot functions, captured by the real
//! sidecar and processed by both symbolizers; the reference is `perf script`
//! on the raw shards with the worker's map in this machine's `/tmp` (as on
//! the node). The processing itself must not read `/tmp`: it runs with the
//! map gone, or with a planted map of other names there. Also: the JVM's
//! map written only on request (`jcmd`) or beforehand, a worker in its own
//! mount namespace (a private `/tmp`), and a capture without the snapshot.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::util::{self, jobprof, output_text};
use crate::util::{agreement, folded, stack_share, summary};

/// Seconds of sampling per capture.
const SECONDS: u64 = 3;

fn java_ready() -> bool {
    let ok = Command::new("javac").arg("-version").output().is_ok()
        && Command::new("jcmd").arg("-h").output().is_ok();
    util::require(
        ok,
        "OpenJDK 17+ (java, javac, jcmd: apt-get install openjdk-17-jdk-headless)",
    ) && util::require(util::perf_can_record(), "perf that can record")
}

fn node_ready() -> bool {
    let ok = Command::new("node").arg("--version").output().is_ok();
    util::require(ok, "node (apt-get install nodejs)")
        && util::require(util::perf_can_record(), "perf that can record")
}

/// `Hot.class` compiled into `dir`.
fn javac(dir: &Path) {
    let out = Command::new("javac")
        .arg("-d")
        .arg(dir)
        .arg(util::repo_root().join("tests/programs/Hot.java"))
        .output()
        .unwrap();
    assert!(out.status.success(), "javac: {}", output_text(&out));
}

/// Starts `argv` (under `unshare -m` with a private tmpfs on `/tmp` when
/// `private_tmp`) and waits for its `started` line.
fn spawn(argv: &[&str], private_tmp: bool) -> Child {
    spawn_in(argv, private_tmp, &util::repo_root())
}

/// [`spawn`] in the working directory `cwd`.
fn spawn_in(argv: &[&str], private_tmp: bool, cwd: &Path) -> Child {
    let mut cmd = if private_tmp {
        // `unshare` execs the shell, which execs the runtime: the PID is the
        // worker's, and its /tmp is no one else's.
        let mut c = Command::new("unshare");
        c.args(["-m", "--propagation", "private", "sh", "-c"])
            .arg("mount -t tmpfs jobprof-test /tmp && exec \"$@\"")
            .arg("sh")
            .args(argv);
        c
    } else {
        let mut c = Command::new(argv[0]);
        c.args(&argv[1..]);
        c
    };
    let mut child = cmd
        .current_dir(cwd)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    util::wait_started(&mut child, &format!("{argv:?}"));
    child
}

/// One published capture, `q1`, of a JIT worker.
struct Captured {
    keep: tempfile::TempDir,
    pid: u32,
    /// The worker's perf map as it saw it at stop.
    worker_map: Option<Vec<u8>>,
}

impl Captured {
    fn root(&self) -> PathBuf {
        self.keep.path().join("result")
    }
    fn capture_dir(&self) -> PathBuf {
        self.root().join("worker_0/q1")
    }
    fn manifest(&self) -> String {
        fs::read_to_string(self.root().join("worker_0/symbol-manifest.tsv")).unwrap()
    }
}

/// Captures `SECONDS` of `worker` with the real sidecar (`options` added);
/// `during` runs while it samples. The worker's own map is read (through
/// its `/proc/PID/root`) after `stop`, before it is killed.
fn capture(worker: Child, options: &str, during: impl FnOnce(u32)) -> Captured {
    capture_then(worker, options, during, |w| {
        let _ = w.kill();
    })
}

/// [`capture`], ending the worker with `end` (then waiting for it).
fn capture_then(
    mut worker: Child,
    options: &str,
    during: impl FnOnce(u32),
    end: impl FnOnce(&mut Child),
) -> Captured {
    let keep = tempfile::tempdir().unwrap();
    let (tokens, root) = (keep.path().join("tokens"), keep.path().join("result"));
    fs::create_dir_all(&tokens).unwrap();
    fs::create_dir_all(&root).unwrap();
    let pid = worker.id();
    let mut sidecar = util::sidecar_command(&tokens, 0, pid, &root, &keep.path().join("staging"))
        .args("--frequency 499 --start-timeout 60 --stop-timeout 60".split(' '))
        .args(options.split_whitespace())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    util::wait_sidecar_ready(&mut sidecar, &mut worker, &tokens, Duration::from_secs(120));
    util::record_driver(&tokens, 0, &["start", "--query", "q1"]);
    std::thread::sleep(Duration::from_secs(SECONDS));
    during(pid);
    util::record_driver(&tokens, 0, &["stop", "--query", "q1"]);
    let nspid = ns_pid(pid);
    let worker_map = fs::read(format!("/proc/{pid}/root/tmp/perf-{nspid}.map")).ok();
    util::record_driver(&tokens, 0, &["shutdown"]);
    let out = sidecar.wait_with_output().unwrap();
    end(&mut worker);
    let _ = worker.wait();
    assert!(out.status.success(), "sidecar: {}", output_text(&out));
    let log = output_text(&out);
    eprintln!(
        "{}",
        log.lines()
            .filter(|l| l.contains("jit"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    Captured {
        keep,
        pid,
        worker_map,
    }
}

fn ns_pid(pid: u32) -> u32 {
    fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            let l = s.lines().find(|l| l.starts_with("NSpid:"))?.to_string();
            l.split_whitespace().last()?.parse().ok()
        })
        .unwrap_or(pid)
}

/// Share of the weight whose leaf satisfies `pred`.
fn leaf_share(stacks: &HashMap<String, u64>, pred: impl Fn(&str) -> bool) -> f64 {
    let total: u64 = stacks.values().sum();
    let hit: u64 = stacks
        .iter()
        .filter(|(s, _)| pred(s.rsplit(';').next().unwrap_or("")))
        .map(|(_, n)| n)
        .sum();
    hit as f64 / total.max(1) as f64
}

/// The host's `/tmp/perf-PID.map` holds `text` while `f` runs (then it is
/// removed): how the node's own perf finds it.
fn with_host_map<T>(pid: u32, text: &[u8], f: impl FnOnce() -> T) -> T {
    let path = PathBuf::from(format!("/tmp/perf-{pid}.map"));
    fs::write(&path, text).unwrap();
    let r = f();
    let _ = fs::remove_file(&path);
    r
}

/// What the node's perf names: `perf script` on the raw shards, no
/// `--symfs`, with the worker's map in `/tmp`, folded by `jobprof fold`.
fn reference(c: &Captured, tmp: &Path) -> HashMap<String, u64> {
    let map = c
        .worker_map
        .clone()
        .expect("the worker had a perf map at stop");
    let text = with_host_map(c.pid, &map, || {
        let mut all = Vec::new();
        for e in fs::read_dir(c.capture_dir()).unwrap() {
            let p = e.unwrap().path();
            if !p
                .file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("perf.data")
            {
                continue;
            }
            let out = Command::new("perf")
                .args(["script", "-f", "--no-inline", "-i"])
                .arg(&p)
                .output()
                .unwrap();
            assert!(out.status.success(), "perf script: {}", output_text(&out));
            all.extend_from_slice(&out.stdout);
        }
        all
    });
    let (txt, out) = (tmp.join("reference.txt"), tmp.join("reference.folded"));
    fs::write(&txt, text).unwrap();
    let o = jobprof()
        .arg("fold")
        .arg(&txt)
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", output_text(&o));
    folded(&out)
}

/// `jobprof process` of a copy of the capture with `symbolizer`, while
/// this machine's `/tmp/perf-PID.map` names every address `HOST_TMP_MAP`
/// (which must never show). Returns the copy's capture directory.
fn process(c: &Captured, tmp: &Path, symbolizer: &str, edit: impl Fn(&Path)) -> PathBuf {
    let dst = tmp.join(format!("result-{symbolizer}"));
    util::copy_tree(&c.root(), &dst);
    let dir = dst.join("worker_0/q1");
    edit(&dir);
    let planted = b"0 7fffffffffffffff HOST_TMP_MAP\n";
    let out = with_host_map(c.pid, planted, || {
        jobprof()
            .arg("process")
            .arg(&dst)
            .args(["--formats", "folded,summary", "--min-symbolized", "0"])
            // The truth is `perf script` without inline frames; native
            // runs expand them by default.
            .arg("--no-inline")
            .arg(format!("--symbolizer={symbolizer}"))
            .output()
            .unwrap()
    });
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let text = fs::read_to_string(dir.join("stacks.folded")).unwrap();
    assert!(
        !text.contains("HOST_TMP_MAP"),
        "named from this host's /tmp"
    );
    dir
}

/// Both symbolizers against the reference: >= 95% of the weight on the
/// same stacks, >= 90% of the leaves named, `hot` functions named (at the
/// leaf, most weight in JIT code; in the stack, for Python, whose perf
/// map names trampolines into its interpreter).
fn check(c: &Captured, what: &str, hot: &[&str]) {
    check_as(c, what, hot, true)
}

fn check_as(c: &Captured, what: &str, hot: &[&str], leaves: bool) {
    let tmp = tempfile::tempdir().unwrap();
    let theirs = reference(c, tmp.path());
    for symbolizer in ["native", "perf"] {
        let dir = process(c, tmp.path(), symbolizer, |_| {});
        let ours = folded(&dir.join("stacks.folded"));
        let a = agreement(&ours, &theirs);
        let s = summary(&dir);
        let named = s["symbolized_ratio"].as_f64().unwrap();
        eprintln!(
            "jit {what} ({symbolizer}): {:.2}% of the weight on the reference's stacks, \
             {:.2}% named at the leaf, jit {}",
            100.0 * a,
            100.0 * named,
            s["jit"]
        );
        let mut diff: Vec<_> = ours
            .iter()
            .filter(|(k, v)| theirs.get(*k) != Some(v))
            .collect();
        diff.sort_by(|x, y| y.1.cmp(x.1));
        diff.truncate(8);
        assert!(
            a >= 0.95,
            "{what} {symbolizer}: agreement {a:.4}; {diff:#?}"
        );
        assert!(
            named >= 0.90,
            "{what} {symbolizer}: {named:.3} named: {s:#}"
        );
        if !leaves {
            // Python's map names trampolines into the interpreter: they show
            // where the interpreter has frame pointers to walk through.
            for f in hot {
                let (a, b) = (
                    stack_share(&ours, |fr| fr.contains(f)),
                    stack_share(&theirs, |fr| fr.contains(f)),
                );
                eprintln!("{what} {symbolizer}: {f} in {a:.3} of the weight (perf script: {b:.3})");
                assert!(
                    a > 0.05 && (a - b).abs() < 0.02,
                    "{what} {symbolizer}: {f} {a:.3} vs {b:.3}"
                );
            }
            let jit = &s["jit"];
            assert!(jit["stack_ratio"].as_f64().unwrap() > 0.9, "{s:#}");
            assert!(jit["frames_named_ratio"].as_f64().unwrap() > 0.9, "{s:#}");
            continue;
        }
        for f in hot {
            let share = leaf_share(&ours, |l| l.contains(f));
            assert!(share > 0.05, "{what} {symbolizer}: {f} {share:.3}");
        }
        let jit = &s["jit"];
        assert!(jit["ratio"].as_f64().unwrap() > 0.5, "{s:#}");
        assert!(jit["named_ratio"].as_f64().unwrap() > 0.9, "{s:#}");
    }
}

/// A directory for the classes outside `/tmp` (which a private-`/tmp`
/// worker does not see).
fn classes_dir() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

/// A classes dir that a private `/tmp` does not hide: under the target
/// dir, unless the checkout lives under `/tmp` (a tmpfs mounted over `/tmp`
/// hides every path below it, and the JVM opens its class path by name),
/// then under `/var/tmp` or `/dev/shm`.
fn classes_dir_outside_tmp() -> tempfile::TempDir {
    let under_tmp = |p: &Path| {
        fs::canonicalize(p)
            .unwrap_or_else(|_| p.to_path_buf())
            .starts_with("/tmp")
    };
    let target = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let dir = [target, Path::new("/var/tmp"), Path::new("/dev/shm")]
        .into_iter()
        .find(|d| d.is_dir() && !under_tmp(d))
        .expect("a directory outside /tmp for the JVM's classes");
    tempfile::tempdir_in(dir).unwrap()
}

fn java_worker(dir: &Path, private_tmp: bool) -> Child {
    javac(dir);
    let cp = dir.to_str().unwrap();
    spawn(
        &["java", "-XX:+PreserveFramePointer", "-cp", cp, "Hot", "300"],
        private_tmp,
    )
}

fn manifest_row(manifest: &str, kind: &str) -> String {
    manifest
        .lines()
        .find(|l| l.starts_with(&format!("{kind}\t")))
        .unwrap_or_else(|| panic!("no {kind} row:\n{manifest}"))
        .to_string()
}

#[test]
fn jvm_map_written_on_request() {
    if !java_ready() {
        return;
    }
    let classes = classes_dir();
    let c = capture(java_worker(classes.path(), false), "", |_| {});
    let row = manifest_row(&c.manifest(), "perfmap");
    assert!(
        row.contains("copied, written on request (") && row.contains("Compiler.perfmap"),
        "{row}"
    );
    assert!(row.ends_with("[taken when q1 ended]"), "{row}");
    check(&c, "JVM, map on request", &["Hot.alpha", "Hot.beta"]);

    // The same capture without its snapshot (made before it existed): JIT
    // frames as before, `[anon]`, and the summary says why.
    let tmp = tempfile::tempdir().unwrap();
    let dir = process(&c, tmp.path(), "native", |d| {
        fs::remove_dir_all(d.join("jit")).unwrap();
    });
    let ours = folded(&dir.join("stacks.folded"));
    assert!(leaf_share(&ours, |l| l == "[anon]") > 0.5);
    let s = summary(&dir);
    assert_eq!(s["jit"]["named_ratio"].as_f64(), Some(0.0), "{s:#}");
    let warnings = s["warnings"].to_string();
    assert!(warnings.contains("no JIT symbol snapshot"), "{warnings}");
    assert!(
        !warnings.contains("install its debug package"),
        "{warnings}"
    );
}

#[test]
fn jvm_map_written_beforehand() {
    if !java_ready() {
        return;
    }
    let classes = classes_dir();
    let jcmd = |pid: u32| {
        let o = Command::new("jcmd")
            .args([&pid.to_string(), "Compiler.perfmap"])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", output_text(&o));
    };
    let c = capture(java_worker(classes.path(), false), "", jcmd);
    let row = manifest_row(&c.manifest(), "perfmap");
    assert!(row.contains("\tcopied [taken when q1 ended]"), "{row}");
    check(
        &c,
        "JVM, map written beforehand",
        &["Hot.alpha", "Hot.beta"],
    );
}

#[test]
fn jvm_in_its_own_mount_namespace() {
    if !java_ready() {
        return;
    }
    let classes = classes_dir_outside_tmp();
    let c = capture(java_worker(classes.path(), true), "", |pid| {
        assert!(!Path::new(&format!("/tmp/perf-{pid}.map")).exists());
    });
    assert!(
        !Path::new(&format!("/tmp/perf-{}.map", c.pid)).exists(),
        "its /tmp is private"
    );
    let row = manifest_row(&c.manifest(), "perfmap");
    assert!(row.contains("copied, written on request ("), "{row}");
    check(&c, "JVM, private /tmp", &["Hot.alpha", "Hot.beta"]);
}

#[test]
fn node_with_perf_basic_prof() {
    if !node_ready() {
        return;
    }
    let js = util::repo_root().join("tests/programs/hot.js");
    // V8 leaves its isolate log in its working directory.
    let cwd = classes_dir();
    let worker = spawn_in(
        &["node", "--perf-basic-prof", js.to_str().unwrap(), "300"],
        false,
        cwd.path(),
    );
    let c = capture(worker, "", |_| {});
    let _ = fs::remove_file(format!("/tmp/perf-{}.map", c.pid));
    let row = manifest_row(&c.manifest(), "perfmap");
    assert!(row.contains("\tcopied [taken when q1 ended]"), "{row}");
    check(&c, "Node", &["alpha", "beta"]);
}

/// Node with `--perf-prof`: no perf map, a jitdump file (`jit-PID.dump` in
/// its working directory, mapped executable) that the sidecar copies and
/// both symbolizers read the code loads of. (The node's own perf names
/// these only after `perf inject --jit`: not compared here.)
#[test]
fn node_with_a_jitdump() {
    if !node_ready() {
        return;
    }
    let cwd = classes_dir();
    let js = util::repo_root().join("tests/programs/hot.js");
    // V8 writes the dump through a stdio buffer: what it holds at stop
    // depends on when it was last flushed. The worker runs on to its own
    // end (the whole dump written), and that dump then stands in for the
    // snapshot's, to check the code loads name the hot functions.
    let seconds = 45;
    let worker = spawn_in(
        &[
            "node",
            "--perf-prof",
            js.to_str().unwrap(),
            &seconds.to_string(),
        ],
        false,
        cwd.path(),
    );
    let started = std::time::Instant::now();
    let c = capture_then(
        worker,
        "",
        |_| {},
        |w| {
            let left = Duration::from_secs(seconds + 30).saturating_sub(started.elapsed());
            let deadline = std::time::Instant::now() + left;
            while w.try_wait().unwrap().is_none() && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(100));
            }
        },
    );
    let manifest = c.manifest();
    let row = manifest_row(&manifest, "jitdump");
    assert!(row.contains(&format!("/jit-{}.dump\t", c.pid)), "{row}");
    assert!(row.contains("\tcopied [taken when q1 ended]"), "{row}");
    let snap = c.capture_dir().join(format!("jit/jit-{}.dump", c.pid));
    assert!(snap.is_file());
    let whole = cwd.path().join(format!("jit-{}.dump", c.pid));
    assert!(
        fs::metadata(&whole).unwrap().len() >= fs::metadata(&snap).unwrap().len(),
        "the snapshot is a prefix of the dump"
    );
    let tmp = tempfile::tempdir().unwrap();
    for symbolizer in ["native", "perf"] {
        let dir = process(&c, tmp.path(), symbolizer, |d| {
            fs::copy(&whole, d.join(format!("jit/jit-{}.dump", c.pid))).unwrap();
        });
        let ours = folded(&dir.join("stacks.folded"));
        let s = summary(&dir);
        eprintln!("jit Node jitdump ({symbolizer}): jit {}", s["jit"]);
        for f in ["alpha", "beta"] {
            let share = leaf_share(&ours, |l| l.contains(f));
            assert!(share > 0.05, "jitdump {symbolizer}: {f} leaves {share:.3}");
        }
        assert!(s["jit"]["named_ratio"].as_f64().unwrap() > 0.9, "{s:#}");
    }
}

/// Python 3.12+ with `-X perf`, where the machine has one (Debian 12 has
/// 3.11, which cannot; pyenv's are found too): skipped, loudly, elsewhere,
/// also under CI. Recorded with `--call-graph dwarf`; its map names the
/// trampoline frame of each Python function.
#[test]
fn python_with_x_perf_where_there_is_one() {
    // On PATH, or installed by pyenv (this machine's Debian 12 has 3.11).
    let mut candidates: Vec<PathBuf> = ["python3.13", "python3.12", "python3"]
        .iter()
        .map(PathBuf::from)
        .collect();
    let pyenv = std::env::var("PYENV_ROOT")
        .map(PathBuf::from)
        .or_else(|_| std::env::var("HOME").map(|h| Path::new(&h).join(".pyenv")));
    if let Some(versions) = pyenv
        .ok()
        .and_then(|r| fs::read_dir(r.join("versions")).ok())
    {
        let mut found: Vec<PathBuf> = versions
            .flatten()
            .map(|e| e.path().join("bin/python3"))
            .collect();
        found.sort();
        candidates.extend(found.into_iter().rev());
    }
    let python = candidates.into_iter().find(|p| {
        Command::new(p)
            .args([
                "-c",
                "import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)",
            ])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    });
    let Some(python) = python else {
        util::require(false, "Python 3.12+ (-X perf), on PATH or under pyenv");
        return;
    };
    if !util::require(util::perf_can_record(), "perf that can record") {
        return;
    }
    let py = util::repo_root().join("tests/programs/hot.py");
    let python = python.to_str().unwrap();
    eprintln!("python: {python}");
    let worker = spawn(&[python, "-X", "perf", py.to_str().unwrap(), "300"], false);
    // Frame pointers do not pass through an interpreter built without
    // them (pyenv's, most distributions'): DWARF unwinds to the trampoline.
    let c = capture(worker, "--call-graph dwarf", |_| {});
    let _ = fs::remove_file(format!("/tmp/perf-{}.map", c.pid));
    check_as(&c, "Python", &["py::alpha", "py::beta"], false);
}

/// Issue 35: one very long JIT name. Node's hot functions renamed in the
/// capture's snapshot to their names followed by 1 MiB of `X` (every
/// sample in them used to copy the whole name into the text: a minute per
/// MiB), then processed by both symbolizers: each such frame is cut at
/// `MAX_NAME` bytes and `...`, and still names its function.
#[test]
fn node_with_mebibyte_names_in_its_map_has_them_cut() {
    if !node_ready() {
        return;
    }
    let js = util::repo_root().join("tests/programs/hot.js");
    let cwd = classes_dir();
    let worker = spawn_in(
        &["node", "--perf-basic-prof", js.to_str().unwrap(), "300"],
        false,
        cwd.path(),
    );
    let c = capture(worker, "", |_| {});
    let _ = fs::remove_file(format!("/tmp/perf-{}.map", c.pid));
    let tmp = tempfile::tempdir().unwrap();
    let long = "X".repeat(1 << 20);
    let lengthen = |q: &Path| {
        let map = q.join(format!("jit/perf-{}.map", c.pid));
        let text = fs::read_to_string(&map).unwrap();
        let mut out = String::new();
        for line in text.lines() {
            out.push_str(line);
            if line.contains("alpha") || line.contains("beta") {
                out.push_str(&long);
            }
            out.push('\n');
        }
        fs::write(&map, out).unwrap();
    };
    for symbolizer in ["native", "perf"] {
        let dir = process(&c, tmp.path(), symbolizer, lengthen);
        let text = fs::read_to_string(dir.join("stacks.folded")).unwrap();
        let frames = text
            .lines()
            .flat_map(|l| l.rsplit_once(' ').unwrap().0.split(';'));
        let longest = frames.clone().map(str::len).max().unwrap();
        assert!(
            longest <= 4096 + 3,
            "{symbolizer}: a frame of {longest} bytes"
        );
        // Every renamed function sampled is cut (at least one was).
        let cut: Vec<&str> = frames.clone().filter(|f| f.contains("XXX")).collect();
        assert!(
            !cut.is_empty() && cut.iter().all(|f| f.ends_with("XXX...")),
            "{symbolizer}: {} frames with the long names, not all cut",
            cut.len()
        );
        assert!(
            cut.iter()
                .any(|f| f.contains("alpha") || f.contains("beta")),
            "{symbolizer}: the cut frames lost their names"
        );
    }
}
