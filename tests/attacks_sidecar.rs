//! Attacks of issue 35 on the root sidecar: a worker (as `nobody`, as on a
//! cluster node) that plants a `jcmd` next to a fake `libjvm.so`,
//! bind-mounts a root-only file over its perf map (`unshare -Urm`), swaps
//! the directory of its mapped jitdump for a link to a root-only one, or
//! mounts a FIFO and a root-only file over the files it maps. The real
//! sidecar (as root) captures it; each test checks that nothing of the
//! worker's choosing ran, nothing root-only (a canary) reached the
//! published capture, nothing hung, and the manifest says what was not
//! copied. Issue 45, item 6: a directory `nobody` plants under a request's
//! name in the shared token directory is refused once and spins nothing.
//! Issue 57, item 5: a `.dwo` the worker links to a root-only file is not
//! copied.
//! docs/reliability.md lists the guarantee each one proves.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::util::{self, have, is_root, output_text};

fn ready() -> bool {
    util::require(
        is_root() && have("setpriv") && have("unshare") && have(python()),
        "root, setpriv, unshare and python3",
    ) && util::require(util::perf_can_record(), "perf that can record")
}

/// A Python 3 that `nobody` can run (the system's, not a per-user shim).
fn python() -> &'static str {
    ["/usr/bin/python3", "/bin/python3"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .unwrap_or("python3")
}

/// A root-only file (0600 in a 0755 directory: others can look it up, not
/// read it) holding a unique text.
struct Canary {
    _dir: tempfile::TempDir,
    path: PathBuf,
    text: String,
}

impl Canary {
    fn new() -> Canary {
        let dir = tempfile::tempdir().unwrap();
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
        let text = format!("JOBPROF-CANARY-{}-{:?}", std::process::id(), dir.path());
        let path = dir.path().join("secret");
        fs::write(&path, &text).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
        Canary {
            _dir: dir,
            path,
            text,
        }
    }

    /// Panics naming the first file below `tree` that holds the canary.
    fn absent_from(&self, tree: &Path) {
        for e in fs::read_dir(tree).unwrap() {
            let p = e.unwrap().path();
            let m = fs::symlink_metadata(&p).unwrap();
            if m.is_dir() {
                self.absent_from(&p);
            } else if m.is_file() {
                let bytes = fs::read(&p).unwrap();
                assert!(
                    !bytes
                        .windows(self.text.len())
                        .any(|w| w == self.text.as_bytes()),
                    "the root-only canary was published in {}",
                    p.display()
                );
            }
        }
    }
}

/// A directory everyone may write to (where `nobody` plants).
fn open_dir() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    fs::set_permissions(d.path(), fs::Permissions::from_mode(0o777)).unwrap();
    d
}

/// Python that maps anonymous executable memory (what JIT code is), then
/// says `started` and sleeps.
const JIT_LIKE: &str = "
import mmap, sys, time
anon = mmap.mmap(-1, 65536, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
print('started', flush=True)
time.sleep(600)
";

/// Python that maps `argv[1]` executable, then runs [`JIT_LIKE`].
const MAPS_A_FILE: &str = "
import mmap, sys
f = open(sys.argv[1], 'rb')
lib = mmap.mmap(f.fileno(), 4096, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_EXEC)
";

/// Starts `argv` as `nobody` (through `setpriv`, which execs it: the PID is
/// the worker's) and waits for its `started` line.
fn as_nobody(argv: &[&str]) -> Child {
    let mut child = Command::new("setpriv")
        .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups"])
        .args(argv)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    util::wait_started(&mut child, &format!("{argv:?}"));
    child
}

/// One published capture `q1` of a worker.
struct Run {
    keep: tempfile::TempDir,
    log: String,
}

impl Run {
    fn root(&self) -> PathBuf {
        self.keep.path().join("result")
    }
    fn manifest(&self) -> String {
        fs::read_to_string(self.root().join("worker_0/symbol-manifest.tsv")).unwrap()
    }
    fn row(&self, kind: &str) -> String {
        let m = self.manifest();
        m.lines()
            .find(|l| l.starts_with(&format!("{kind}\t")))
            .unwrap_or_else(|| panic!("no {kind} row:\n{m}\n{}", self.log))
            .to_string()
    }
}

/// The real sidecar (defaults, `env` added) captures one second of
/// `worker`, which must be ready within 90 s (a sidecar that hangs before
/// `ready` fails here), then the worker is killed.
fn capture(worker: Child, env: &[(&str, &str)]) -> Run {
    capture_with(worker, env, "", true)
}

/// [`capture`] with `options`; `stop_ok`: `stop` must succeed.
fn capture_with(mut worker: Child, env: &[(&str, &str)], options: &str, stop_ok: bool) -> Run {
    let keep = tempfile::tempdir().unwrap();
    let (tokens, root) = (keep.path().join("tokens"), keep.path().join("result"));
    fs::create_dir_all(&tokens).unwrap();
    fs::create_dir_all(&root).unwrap();
    let pid = worker.id();
    let mut sidecar = util::sidecar_command(&tokens, 0, pid, &root, &keep.path().join("staging"))
        .args(["--frequency", "99", "--start-timeout", "60"])
        .args(options.split_whitespace())
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    util::wait_sidecar_ready(&mut sidecar, &mut worker, &tokens, Duration::from_secs(90));
    util::record_driver(&tokens, 0, &["start", "--query", "q1"]);
    std::thread::sleep(Duration::from_secs(1));
    if stop_ok {
        util::record_driver(&tokens, 0, &["stop", "--query", "q1"]);
    } else {
        let _ = Command::new(util::recorder())
            .args(["stop", "--query", "q1", "--token-dir"])
            .arg(&tokens)
            .args(["--worker", "0", "--timeout", "300"])
            .output()
            .unwrap();
    }
    util::record_driver(&tokens, 0, &["shutdown"]);
    let out = sidecar.wait_with_output().unwrap();
    let _ = worker.kill();
    let _ = worker.wait();
    let log = output_text(&out);
    assert!(out.status.success(), "sidecar: {log}");
    if stop_ok {
        // The root-owned capture names the worker, whose rights `jobprof
        // process` reads this host's files with (issue 55).
        let c = util::json(&root.join("worker_0/q1/capture.json"));
        let ids = (c["worker_uid"].as_u64(), c["worker_gid"].as_u64());
        assert_eq!(ids, (Some(65534), Some(65534)), "{c:#}");
    }
    Run { keep, log }
}

/// Issue 35, item 1: a worker maps a file named `.../lib/server/libjvm.so`
/// and plants `.../bin/jcmd` beside it. Before, the sidecar ran that
/// `jcmd` (as root when the worker's status could not be read): it must
/// never run; a `jcmd` only root can change is run instead (or none).
#[test]
fn a_jcmd_the_worker_planted_is_never_run() {
    if !ready() {
        return;
    }
    let evil = open_dir();
    let e = evil.path();
    let lib = e.join("lib/server/libjvm.so");
    let jcmd = e.join("bin/jcmd");
    let ran = e.join("ran");
    let plant = format!(
        "mkdir -p {0}/lib/server {0}/bin && head -c 8192 /dev/urandom > {1} && \
         printf '#!/bin/sh\\nid > {2}\\n' > {3} && chmod 755 {3}",
        e.display(),
        lib.display(),
        ran.display(),
        jcmd.display()
    );
    util::as_nobody(&plant);
    let code = format!("{MAPS_A_FILE}{JIT_LIKE}");
    let worker = as_nobody(&[python(), "-c", &code, lib.to_str().unwrap()]);
    let run = capture(worker, &[]);
    assert!(
        !ran.exists(),
        "the planted jcmd ran: {}",
        fs::read_to_string(&ran).unwrap_or_default()
    );
    let row = run.row("perfmap");
    assert!(!row.contains(jcmd.to_str().unwrap()), "{row}");
    // The system's jcmd (if any) as the worker, else nothing, and said.
    assert!(
        row.contains("(uid 65534") || row.contains("not requested: no jcmd"),
        "{row}"
    );
}

/// Issue 35, Low: whatever `jcmd` runs inherited the sidecar's whole
/// environment. A trusted (root-owned) JDK's `jcmd` runs as the worker's
/// user, with `PATH` alone.
#[test]
fn jcmd_runs_as_the_worker_with_path_as_its_only_environment() {
    if !ready() {
        return;
    }
    let Some(jdk) = util::root_only_dir() else {
        util::require(false, "a root-only directory for a trusted JDK");
        return;
    };
    let out = open_dir();
    let ran = out.path().join("ran");
    let lib = jdk.path().join("lib/server/libjvm.so");
    let jcmd = jdk.path().join("bin/jcmd");
    for d in [lib.parent().unwrap(), jcmd.parent().unwrap()] {
        fs::create_dir_all(d).unwrap();
        fs::set_permissions(d, fs::Permissions::from_mode(0o755)).unwrap();
        fs::set_permissions(d.parent().unwrap(), fs::Permissions::from_mode(0o755)).unwrap();
    }
    fs::write(&lib, vec![0u8; 8192]).unwrap();
    fs::set_permissions(&lib, fs::Permissions::from_mode(0o644)).unwrap();
    fs::write(
        &jcmd,
        format!("#!/bin/sh\n{{ id -u; env; }} > {}\n", ran.display()),
    )
    .unwrap();
    fs::set_permissions(&jcmd, fs::Permissions::from_mode(0o755)).unwrap();
    let code = format!("{MAPS_A_FILE}{JIT_LIKE}");
    let worker = as_nobody(&[python(), "-c", &code, lib.to_str().unwrap()]);
    let run = capture(
        worker,
        &[("JOBPROF_TEST_SECRET", "s3cret"), ("HOME", "/root")],
    );
    let text = fs::read_to_string(&ran).unwrap_or_else(|_| panic!("jcmd did not run: {}", run.log));
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("65534"), "{text}");
    let env: Vec<&str> = lines.filter(|l| !l.starts_with("PWD=")).collect();
    assert_eq!(env, ["PATH=/usr/bin:/bin"], "{text}");
    let row = run.row("perfmap");
    assert!(row.contains("Compiler.perfmap (uid 65534)"), "{row}");
}

/// Issue 35, item 2: in its own user and mount namespaces, the worker
/// bind-mounts a root-only file over its `/tmp/perf-PID.map`. Before, the
/// secret was published (0644) as the capture's JIT map.
#[test]
fn a_secret_mounted_over_the_perf_map_is_not_copied() {
    if !ready() {
        return;
    }
    let canary = Canary::new();
    let script = "d=$(mktemp -d) && touch $d/perf-$$.map && mount --bind \"$1\" $d/perf-$$.map \
                  && mount --rbind $d /tmp && exec \"$3\" -c \"$2\"";
    let worker = as_nobody(&[
        "unshare",
        "-Urm",
        "sh",
        "-c",
        script,
        "sh",
        canary.path.to_str().unwrap(),
        JIT_LIKE,
        python(),
    ]);
    let run = capture(worker, &[]);
    canary.absent_from(&run.root());
    let row = run.row("perfmap");
    assert!(
        row.contains("not copied: /tmp/perf-") && row.contains("is a mount point"),
        "{row}"
    );
}

/// Issue 35, item 3: the worker maps its `jit-PID.dump`, deletes it and
/// its directory, and puts a link to a root-only directory (holding a
/// `jit-PID.dump` of its own) in its place. Before, the root-only file was
/// copied; now the file the worker maps is.
#[test]
fn a_jitdump_is_read_through_its_mapping_not_a_planted_link() {
    if !ready() {
        return;
    }
    let base = open_dir();
    let secret_dir = tempfile::tempdir().unwrap(); // 0700, root's
    let own = "WORKER-OWN-DUMP-".repeat(64);
    let code = format!(
        "
import mmap, os, sys, time
base, secret = sys.argv[1], sys.argv[2]
os.mkdir(base + '/d')
p = '%s/d/jit-%d.dump' % (base, os.getpid())
with open(p, 'w') as f:
    f.write('{own}')
f = open(p, 'rb')
m = mmap.mmap(f.fileno(), 0, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_EXEC)
os.remove(p)
os.rmdir(base + '/d')
os.symlink(secret, base + '/d')
# Its own perf map, readable by it alone.
fd = os.open('/tmp/perf-%d.map' % os.getpid(), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
os.write(fd, b'7f0000000000 10 own_function\\n')
os.close(fd)
print('started', flush=True)
time.sleep(600)
"
    );
    let worker = as_nobody(&[
        python(),
        "-c",
        &code,
        base.path().to_str().unwrap(),
        secret_dir.path().to_str().unwrap(),
    ]);
    let pid = worker.id();
    let canary = Canary::new();
    let planted = secret_dir.path().join(format!("jit-{pid}.dump"));
    fs::copy(&canary.path, &planted).unwrap();
    fs::set_permissions(&planted, fs::Permissions::from_mode(0o600)).unwrap();
    let run = capture(worker, &[]);
    canary.absent_from(&run.root());
    let row = run.row("jitdump");
    assert!(row.contains("\tcopied [taken when q1 ended]"), "{row}");
    let copy = run.root().join(format!("worker_0/q1/jit/jit-{pid}.dump"));
    assert_eq!(fs::read_to_string(&copy).unwrap(), own);
    // The worker's own map, opened as the worker, copied no more readable
    // than it was (0600).
    let _ = fs::remove_file(format!("/tmp/perf-{pid}.map"));
    let row = run.row("perfmap");
    assert!(row.contains("\tcopied [taken when q1 ended]"), "{row}");
    let map = run.root().join(format!("worker_0/q1/jit/perf-{pid}.map"));
    assert_eq!(
        fs::read_to_string(&map).unwrap(),
        "7f0000000000 10 own_function\n"
    );
    assert_eq!(fs::metadata(&map).unwrap().mode() & 0o777, 0o600);
}

/// Issue 35, item 4: in its own user and mount namespaces, the worker
/// mounts a FIFO over its own executable and a root-only file over a
/// library it maps. Before, the sidecar blocked on the FIFO before `ready`
/// (or copied the secret into symfs/); now it reads what is mapped.
#[test]
fn a_fifo_or_a_secret_mounted_over_mapped_files_neither_hangs_nor_leaks() {
    if !ready() {
        return;
    }
    let canary = Canary::new();
    let dir = open_dir();
    let fifo = dir.path().join("fifo");
    let code = "
import os, subprocess, sys, time
canary, fifo = sys.argv[1], sys.argv[2]
exe = os.readlink('/proc/self/exe')
maps = [l.split() for l in open('/proc/self/maps')]
libs = sorted({m[5] for m in maps if len(m) >= 6 and 'x' in m[1] and m[5].startswith('/')})
needed = ('libc.', 'ld-linux', 'libmount', 'libselinux', 'libblkid', 'libpcre')
other = [p for p in libs if p != exe and not os.path.basename(p).startswith(needed)]
os.mkfifo(fifo)
subprocess.run(['mount', '--bind', fifo, exe], check=True)
if other:
    subprocess.run(['mount', '--bind', canary, other[0]], check=True)
print('started', flush=True)
time.sleep(600)
";
    let worker = as_nobody(&[
        "unshare",
        "-Urm",
        python(),
        "-c",
        code,
        canary.path.to_str().unwrap(),
        fifo.to_str().unwrap(),
    ]);
    let exe = fs::read_link(format!("/proc/{}/exe", worker.id())).unwrap();
    // perf itself, reading build ids at stop, blocks on the FIFO until the
    // stop watchdog ends it: that capture is invalid, and says so.
    let run = capture_with(worker, &[], "--stop-timeout 5", false);
    canary.absent_from(&run.root());
    // The executable the worker runs, copied through its mapping.
    let copy = run
        .root()
        .join("worker_0/symfs")
        .join(exe.strip_prefix("/").unwrap());
    assert_eq!(fs::read(&copy).unwrap(), fs::read(&exe).unwrap());
}

/// Issue 57, item 5: the worker maps a binary built with `-gsplit-dwarf`
/// whose skeleton names a `.dwo` the worker replaced by a link to a
/// root-only file: the real `.dwo` (it holds the unit the skeleton asks
/// for, and the canary after it). As root the sidecar would copy it into
/// symfs/; opened as the worker it is refused, and the manifest says so.
#[test]
fn a_dwo_linked_to_a_root_only_file_is_not_read_as_root() {
    if !ready() || !util::require(have("gcc"), "gcc") {
        return;
    }
    let dir = open_dir();
    let d = dir.path();
    fs::write(d.join("split.c"), "int main(void) { return 0; }\n").unwrap();
    let gcc = |args: &[&str]| {
        let o = Command::new("gcc")
            .args(args)
            .current_dir(d)
            .output()
            .unwrap();
        assert!(o.status.success(), "gcc {args:?}: {}", output_text(&o));
    };
    gcc(&["-O2", "-g", "-gsplit-dwarf", "-c", "split.c"]);
    gcc(&["split.o", "-o", "split"]);
    let canary = Canary::new();
    let mut dwo = fs::read(d.join("split.dwo")).unwrap();
    dwo.extend_from_slice(canary.text.as_bytes());
    fs::write(&canary.path, dwo).unwrap();
    fs::remove_file(d.join("split.dwo")).unwrap();
    std::os::unix::fs::symlink(&canary.path, d.join("split.dwo")).unwrap();
    let exe = d.join("split");
    let code = format!("{MAPS_A_FILE}{JIT_LIKE}");
    let worker = as_nobody(&[python(), "-c", &code, exe.to_str().unwrap()]);
    let run = capture(worker, &[]);
    canary.absent_from(&run.root());
    let row = run.row("dwo");
    let at = d.join("split.dwo");
    assert!(
        row.starts_with(&format!("dwo\t{}\t", at.display()))
            && row.contains("not copied: Permission denied"),
        "{row}"
    );
    let copy = run
        .root()
        .join("worker_0/symfs")
        .join(at.strip_prefix("/").unwrap());
    assert!(!copy.exists(), "{} was copied", copy.display());
}

/// The perf processes the sidecar `pid` started (its children, from any of
/// its threads).
fn children(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for t in fs::read_dir(format!("/proc/{pid}/task")).unwrap().flatten() {
        let kids = fs::read_to_string(t.path().join("children")).unwrap_or_default();
        out.extend(
            kids.split_whitespace()
                .filter_map(|k| k.parse::<u32>().ok()),
        );
    }
    out
}

/// Issue 35, item 9: a shard that answers `disable` late (here: its perf
/// stopped with SIGSTOP during the query, continued 8 s after `stop`)
/// samples until then. Before, the window ended 5 s after `stop` was
/// asked, whatever perf did, and nothing was said; now it ends when perf
/// stopped, and `capture.json` says why the window is not the query's.
#[test]
fn a_shard_that_disables_late_moves_the_window_and_says_so() {
    if !ready() {
        return;
    }
    let mut worker = as_nobody(&[python(), "-c", JIT_LIKE]);
    let keep = tempfile::tempdir().unwrap();
    let (tokens, root) = (keep.path().join("tokens"), keep.path().join("result"));
    fs::create_dir_all(&tokens).unwrap();
    fs::create_dir_all(&root).unwrap();
    let mut sidecar =
        util::sidecar_command(&tokens, 0, worker.id(), &root, &keep.path().join("staging"))
            .args(["--frequency", "99", "--start-timeout", "60", "--no-prearm"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
    util::wait_sidecar_ready(&mut sidecar, &mut worker, &tokens, Duration::from_secs(90));
    util::record_driver(&tokens, 0, &["start", "--query", "q1"]);
    std::thread::sleep(Duration::from_secs(1));
    let perfs = children(sidecar.id());
    assert!(!perfs.is_empty(), "no perf shard found");
    for &p in &perfs {
        // SAFETY: kill has no memory-safety preconditions.
        unsafe { libc::kill(p as i32, libc::SIGSTOP) };
    }
    let resume = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(8));
        for p in perfs {
            // SAFETY: kill has no memory-safety preconditions.
            unsafe { libc::kill(p as i32, libc::SIGCONT) };
        }
    });
    util::record_driver(&tokens, 0, &["stop", "--query", "q1"]);
    resume.join().unwrap();
    util::record_driver(&tokens, 0, &["shutdown"]);
    let out = sidecar.wait_with_output().unwrap();
    let _ = worker.kill();
    let _ = worker.wait();
    let log = output_text(&out);
    assert!(out.status.success(), "sidecar: {log}");
    let c = util::json(&root.join("worker_0/q1/capture.json"));
    let warnings = c["warnings"].to_string();
    assert!(warnings.contains("did not acknowledge `disable`"), "{c:#}");
    assert!(warnings.contains("disabling took"), "{c:#}");
    let (asked, off) = (
        c["disable_requested_unix_ns"].as_u64().unwrap(),
        c["disabled_unix_ns"].as_u64().unwrap(),
    );
    assert!(
        off - asked >= 7_000_000_000,
        "the window ends when perf stopped: {c:#}"
    );
    assert!(log.contains("disabling took"), "{log}");
}

/// Issue 45, item 6: during the capture of `qa`, `nobody` makes a
/// directory named `.perf_start_w0_qa` in the shared (1777) token
/// directory. Before, the sidecar answered it on every pass (the unlink
/// failed, unnoticed), each answer (its `started`, rewritten and fsynced)
/// waking its own watch into the next pass: thousands of writes a second.
/// It is refused once, the query's error token naming it, and the sidecar
/// then waits as quietly as it does idle (no write at all).
#[test]
fn a_directory_planted_as_a_start_token_is_refused_once_and_spins_nothing() {
    if !ready() {
        return;
    }
    let mut worker = as_nobody(&["sh", "-c", "echo started; exec sleep 600"]);
    let keep = tempfile::tempdir().unwrap();
    let (tokens, root) = (keep.path().join("tokens"), keep.path().join("result"));
    fs::create_dir_all(&tokens).unwrap();
    fs::set_permissions(&tokens, fs::Permissions::from_mode(0o1777)).unwrap();
    fs::create_dir_all(&root).unwrap();
    let mut sidecar =
        util::sidecar_command(&tokens, 0, worker.id(), &root, &keep.path().join("staging"))
            .args(["--frequency", "99", "--start-timeout", "60"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
    util::wait_sidecar_ready(&mut sidecar, &mut worker, &tokens, Duration::from_secs(90));
    util::record_driver(&tokens, 0, &["start", "--query", "qa"]);
    let planted = tokens.join(".perf_start_w0_qa");
    util::as_nobody(&format!("mkdir {}", planted.display()));
    std::thread::sleep(Duration::from_millis(500));
    let writes = util::writes_during(sidecar.id(), Duration::from_secs(2));
    let refusal = fs::read_to_string(tokens.join(".perf_error_w0_qa")).unwrap_or_default();
    util::record_driver(&tokens, 0, &["shutdown"]);
    let out = sidecar.wait_with_output().unwrap();
    let _ = worker.kill();
    let _ = worker.wait();
    let log = output_text(&out);
    assert!(out.status.success(), "sidecar: {log}");
    assert!(
        writes < 5,
        "the sidecar made {writes} write calls in 2 s beside a planted directory token \
         (0 when it waits idle): {log}"
    );
    assert!(
        refusal.contains(&format!("{} is a directory", planted.display())),
        "the error token does not name the planted directory: {refusal:?}\n{log}"
    );
    assert_eq!(
        log.matches(".perf_start_w0_qa is a directory").count(),
        1,
        "refused once: {log}"
    );
}
