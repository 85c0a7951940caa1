//! The JIT symbol snapshot, taken at the end of every capture (after the
//! query, before `stop` returns: a map is only as good as its age). JIT
//! runtimes name their compiled code in a perf map, `/tmp/perf-PID.map`
//! (PID and `/tmp` as the worker sees them: its PID namespace's number,
//! from `NSpid` in `/proc/PID/status`, read through `/proc/PID/root`), or a
//! jitdump file (`jit-PID.dump`, which the runtime maps executable, so it
//! is found in `/proc/PID/maps`). Both are copied into the capture's `jit/`
//! as `perf-PID.map` and `jit-PID.dump`, PID being the one the samples
//! carry; their rows are appended to `symbol-manifest.tsv` and their bytes
//! counted against `--symfs-limit`.
//!
//! A HotSpot JVM (JDK 17+) writes its map only when asked: with `--jit-maps
//! auto`, when it has none newer than the capture's start, the sidecar runs
//! `jcmd PID Compiler.perfmap` within [`JCMD_TIMEOUT`], and the manifest
//! says what was done and how long it took. Node (`--perf-basic-prof`) and
//! Python 3.12+ (`-X perf`) keep their map current themselves: it is only
//! copied.
//!
//! Nothing the worker chooses runs as root, and nothing it names is read as
//! root ([`crate::confine`]): its credentials are taken first, the process
//! pinned, and without them nothing is run or copied. The `jcmd` run is
//! one only root can change (the worker's JDK's, else the system's in
//! `/usr/bin` or `/bin`), run with the worker's uid, gid and groups, no new
//! privileges and an environment of `PATH` alone; when there is none, the
//! manifest and the log say the map was not requested and why. The map is
//! opened below the worker's root as the worker (no links, nothing mounted
//! over it, no FIFO), the jitdump through the mapping itself
//! (`/proc/PID/map_files/`), and each is copied up to the size checked.

use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use crate::confine::{self, Worker};
use crate::sys;
use crate::tokens::write_atomic;

/// The capture's directory for the snapshot.
pub const JIT_DIR: &str = "jit";

/// Longest wait for `jcmd PID Compiler.perfmap`.
pub const JCMD_TIMEOUT: Duration = Duration::from_secs(20);

/// The JIT runtime a worker is, from what it maps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Runtime {
    /// A HotSpot JVM (`libjvm.so`), with the `jcmd` next to its `java`.
    HotSpot {
        /// The JDK's `jcmd` as the worker sees it.
        own_jcmd: Option<String>,
    },
    /// Node.js (V8).
    Node,
    /// CPython, with its version (`3.12`) when the name says it.
    Python(Option<String>),
    /// Anything else.
    Other,
}

impl Runtime {
    /// What the worker maps and runs says which runtime it is.
    pub fn of(exe: &str, maps: &str) -> Runtime {
        let base = exe.rsplit('/').next().unwrap_or(exe);
        if let Some(jvm) = maps
            .lines()
            .filter_map(|l| l.split_whitespace().nth(5))
            .find(|p| p.ends_with("/libjvm.so"))
        {
            // .../lib/server/libjvm.so -> .../bin/jcmd
            let home = Path::new(jvm)
                .parent()
                .and_then(Path::parent)
                .and_then(Path::parent);
            let own_jcmd = home.map(|h| h.join("bin/jcmd").to_string_lossy().into_owned());
            return Runtime::HotSpot { own_jcmd };
        }
        if base == "node" || base == "nodejs" {
            return Runtime::Node;
        }
        let libpython = maps
            .lines()
            .filter_map(|l| l.split_whitespace().nth(5))
            .filter_map(|p| p.rsplit('/').next())
            .find_map(|f| f.strip_prefix("libpython"));
        if base.starts_with("python") || libpython.is_some() {
            let version = base
                .strip_prefix("python")
                .filter(|v| v.contains('.'))
                .or_else(|| libpython.and_then(|l| l.split(".so").next()))
                .map(str::to_string);
            return Runtime::Python(version);
        }
        Runtime::Other
    }

    /// The runtime's name in messages.
    pub fn name(&self) -> &'static str {
        match self {
            Runtime::HotSpot { .. } => "JVM (HotSpot)",
            Runtime::Node => "Node.js",
            Runtime::Python(_) => "Python",
            Runtime::Other => "JIT runtime",
        }
    }
}

/// Bytes of anonymous executable memory in a maps text: where JIT
/// runtimes put compiled code (perf names it `/tmp/perf-PID.map`).
pub fn anon_exec_bytes(maps: &str) -> u64 {
    maps.lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let (range, perms) = (f.next()?, f.next()?);
            let path = f.nth(3).unwrap_or("");
            let anon = path.is_empty() || path.starts_with("[anon");
            if !perms.contains('x') || !anon {
                return None;
            }
            let (a, b) = range.split_once('-')?;
            Some(u64::from_str_radix(b, 16).ok()? - u64::from_str_radix(a, 16).ok()?)
        })
        .sum()
}

/// The jitdump files a maps text shows mapped (`.../jit-N.dump`): the
/// address range of a mapping of each, and its path.
pub fn jitdumps(maps: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = maps
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            Some((f.next()?, f.nth(4)?))
        })
        .filter(|(_, p)| {
            let f = p.rsplit('/').next().unwrap_or("");
            p.starts_with('/') && f.starts_with("jit-") && f.ends_with(".dump")
        })
        .map(|(r, p)| (r.to_string(), p.to_string()))
        .collect();
    out.dedup_by(|a, b| a.1 == b.1);
    out
}

/// The worker's PID in its own PID namespace (the last `NSpid` field),
/// which names its perf map; `pid` itself when there is no such line.
pub fn ns_pid(pid: u32) -> u32 {
    fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("NSpid:"))?;
            line.split_whitespace().last()?.parse().ok()
        })
        .unwrap_or(pid)
}

/// What was done to get a HotSpot JVM's map written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Asked {
    /// The command line (empty when nothing was run).
    pub command: String,
    /// How long it took.
    pub elapsed: Duration,
    /// `None` when it succeeded, else why not.
    pub failure: Option<String>,
}

impl Asked {
    /// For the manifest and the log: `written on request (jcmd 12
    /// Compiler.perfmap, 0.52 s)`.
    pub fn describe(&self) -> String {
        let secs = self.elapsed.as_secs_f64();
        match &self.failure {
            Some(why) if self.command.is_empty() => format!("not requested: {why}"),
            None => format!("written on request ({}, {secs:.2} s)", self.command),
            Some(why) => format!("{} failed after {secs:.2} s: {why}", self.command),
        }
    }
}

/// True when `pid` lives in another mount namespace than this process.
fn other_mount_ns(pid: u32) -> bool {
    let ns = |p: &str| fs::read_link(format!("/proc/{p}/ns/mnt")).ok();
    let (ours, theirs) = (ns("self"), ns(&pid.to_string()));
    ours.is_some() && theirs.is_some() && ours != theirs
}

/// Where a `jcmd` not the worker's JDK's is looked for.
const SYSTEM_JCMD: [&str; 2] = ["/usr/bin/jcmd", "/bin/jcmd"];

/// The first `jcmd` of `candidates` (paths below `root`) that only root
/// can change, links resolved; else why none is.
fn trusted_jcmd(root: &fs::File, candidates: &[&str]) -> Result<String, String> {
    let mut why = Vec::new();
    for c in candidates {
        match confine::root_only(root, c) {
            Ok(p) => return Ok(p),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => why.push(format!("{c}: {e}")),
        }
    }
    if why.is_empty() {
        why.push(format!("none of {} exists", candidates.join(", ")));
    }
    Err(format!(
        "no jcmd that only root can change ({})",
        why.join("; ")
    ))
}

/// Not run, and why.
fn not_asked(why: String) -> Asked {
    Asked {
        command: String::new(),
        elapsed: Duration::ZERO,
        failure: Some(why),
    }
}

/// Runs `jcmd PID Compiler.perfmap` with the worker's credentials, killed
/// after `timeout`: a `jcmd` only root can change (the worker's JDK's,
/// else the system's), no new privileges, `PATH` its only environment. A
/// worker in another mount namespace but in ours of PIDs (a private `/tmp`:
/// `unshare -m`, systemd's PrivateTmp) is asked from inside its mount
/// namespace, with a `jcmd` found there: JDK 17's attach looks for the
/// JVM's socket in the caller's `/tmp` unless the PIDs differ (a container
/// of its own PID namespace, which jcmd handles itself through
/// `/proc/PID/root`). Nothing is run when the worker is gone.
pub fn ask_hotspot(w: &Worker, runtime: &Runtime, timeout: Duration) -> Asked {
    let Runtime::HotSpot { own_jcmd } = runtime else {
        return not_asked("not a HotSpot JVM".into());
    };
    let pid = w.pid;
    let root = sys::euid() == 0;
    if !root && w.uid != sys::euid() {
        return not_asked(format!(
            "the worker runs as uid {}, the sidecar (not root) as uid {}",
            w.uid,
            sys::euid()
        ));
    }
    let enter = other_mount_ns(pid) && ns_pid(pid) == pid && root;
    let dir = if enter { w.root() } else { fs::File::open("/") };
    let dir = match dir {
        Ok(d) => d,
        Err(e) => return not_asked(format!("cannot open its root: {e}")),
    };
    let mut candidates: Vec<&str> = own_jcmd.iter().map(String::as_str).collect();
    candidates.extend(SYSTEM_JCMD);
    let jcmd = match trusted_jcmd(&dir, &candidates) {
        Ok(j) => j,
        Err(why) => return not_asked(why),
    };
    let mnt = match enter {
        true => match fs::File::open(format!("/proc/{pid}/ns/mnt")) {
            Ok(f) => Some(f),
            Err(e) => return not_asked(format!("cannot open its mount namespace: {e}")),
        },
        false => None,
    };
    if !w.alive() {
        return not_asked("the worker exited".into());
    }
    let command = format!(
        "{jcmd} {pid} Compiler.perfmap (uid {}{})",
        w.uid,
        if enter {
            ", in its mount namespace"
        } else {
            ""
        }
    );
    let start = Instant::now();
    // The child execs jcmd itself, with `PATH` as its whole environment.
    let c = |s: &str| std::ffi::CString::new(s).unwrap_or_default();
    let argv = [c(&jcmd), c(&pid.to_string()), c("Compiler.perfmap")];
    let path = c("PATH=/usr/bin:/bin");
    let mut cmd = Command::new(&jcmd);
    cmd.current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let ids = root.then(|| (w.uid, w.gid, w.groups.clone()));
    let ns = mnt.as_ref().map(std::os::fd::AsRawFd::as_raw_fd);
    // SAFETY: between fork and exec only async-signal-safe system calls
    // run (setns, setgroups, setresgid, setresuid, prctl, execve), nothing
    // is allocated; `mnt`, the groups and the strings outlive the spawn.
    // The namespace is entered as root, then the worker's credentials are
    // taken, for good.
    unsafe {
        cmd.pre_exec(move || {
            become_worker(ns, ids.as_ref())?;
            let args = [
                argv[0].as_ptr(),
                argv[1].as_ptr(),
                argv[2].as_ptr(),
                std::ptr::null(),
            ];
            let env = [path.as_ptr(), std::ptr::null()];
            libc::execve(argv[0].as_ptr(), args.as_ptr(), env.as_ptr());
            Err(io::Error::last_os_error())
        });
    }
    let failure = spawn_and_wait(&mut cmd, timeout);
    drop(mnt);
    Asked {
        command,
        elapsed: start.elapsed(),
        failure,
    }
}

/// In the child, before exec: enters the mount namespace `ns`, takes the
/// credentials `ids` (uid, gid, groups) for good, and forbids gaining
/// privileges.
fn become_worker(ns: Option<i32>, ids: Option<&(u32, u32, Vec<u32>)>) -> io::Result<()> {
    let check = |r: libc::c_long| {
        if r != 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    };
    // SAFETY: raw system calls on this (forked, single-threaded) process;
    // `groups` is a valid array of its length.
    unsafe {
        if let Some(fd) = ns {
            check(libc::setns(fd, libc::CLONE_NEWNS).into())?;
        }
        if let Some((uid, gid, groups)) = ids {
            check(libc::syscall(
                libc::SYS_setgroups,
                groups.len(),
                groups.as_ptr(),
            ))?;
            check(libc::syscall(libc::SYS_setresgid, *gid, *gid, *gid))?;
            check(libc::syscall(libc::SYS_setresuid, *uid, *uid, *uid))?;
        }
        check(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0).into())?;
    }
    Ok(())
}

/// Spawns `cmd` and waits for it up to `timeout`; `None` on success.
fn spawn_and_wait(cmd: &mut Command, timeout: Duration) -> Option<String> {
    match cmd.spawn() {
        Err(e) => Some(format!("cannot run it: {e}")),
        Ok(mut child) => wait_for(&mut child, timeout),
    }
}

/// Waits for `child` up to `timeout` (then kills it); `None` on success.
fn wait_for(child: &mut std::process::Child, timeout: Duration) -> Option<String> {
    let deadline = Instant::now() + timeout;
    loop {
        match child.try_wait() {
            Ok(Some(st)) => {
                let mut out = String::new();
                if let Some(o) = child.stdout.take() {
                    let _ = io::Read::read_to_string(&mut io::Read::take(o, 64 << 10), &mut out);
                }
                // jcmd exits 0 even when the JVM refuses; it says so.
                let refused = out.contains("Exception") || out.contains("Unknown diagnostic");
                return match (st.success(), refused) {
                    (true, false) => None,
                    _ => Some(format!("{st}: {}", out.lines().last().unwrap_or("").trim())),
                };
            }
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Some(format!("no answer within {} s; killed", timeout.as_secs()));
            }
            Err(e) => return Some(e.to_string()),
        }
    }
}

/// What [`snapshot`] did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Taken {
    /// Manifest rows (kind `perfmap` or `jitdump`), newline-terminated.
    pub rows: String,
    /// Bytes copied (counted against `--symfs-limit`).
    pub bytes: u64,
    /// Files copied.
    pub copied: usize,
    /// The log line (empty when the worker runs no JIT code).
    pub log: String,
}

/// Takes the JIT snapshot of `pid` (started at `start`, clock ticks since
/// boot) into `capture_dir/jit/` within `room` bytes; `since` is when the
/// capture started (an older map is stale); `ask` allows asking a JVM for
/// its map; `note` ends every status. Nothing is run or copied unless the
/// worker's credentials are had first (the log says why not).
pub fn snapshot(
    pid: u32,
    start: u64,
    capture_dir: &Path,
    room: u64,
    since: SystemTime,
    ask: bool,
    note: &str,
) -> Taken {
    let mut t = Taken::default();
    let w = match Worker::pin(pid, start) {
        Ok(w) => w,
        Err(why) => {
            t.log = format!("jit: no JIT snapshot (nothing run, nothing copied): {why}");
            return t;
        }
    };
    let Ok(maps) = fs::read_to_string(format!("/proc/{pid}/maps")) else {
        return t;
    };
    let exe = fs::read_link(format!("/proc/{pid}/exe"))
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default();
    let runtime = Runtime::of(&exe, &maps);
    let dumps = jitdumps(&maps);
    if anon_exec_bytes(&maps) == 0 && dumps.is_empty() {
        return t;
    }
    let nspid = ns_pid(pid);
    let shown = format!("/tmp/perf-{nspid}.map");
    let open_map = || w.root().and_then(|r| w.open_path(&r, &shown, false));
    let fresh = |m: &fs::Metadata| m.modified().is_ok_and(|m| m >= since);
    let mut how = String::new();
    let mut map = open_map();
    if let (Runtime::HotSpot { .. }, true) = (&runtime, ask) {
        if !map.as_ref().is_ok_and(|(_, m)| fresh(m)) {
            let asked = ask_hotspot(&w, &runtime, JCMD_TIMEOUT);
            how = format!(", {}", asked.describe());
            map = open_map();
        }
    }
    let is_fresh = map.as_ref().is_ok_and(|(_, m)| fresh(m));
    let dst = capture_dir.join(JIT_DIR).join(format!("perf-{pid}.map"));
    let (size, status) = copy_in(map, &dst, capture_dir, room, &mut t);
    let status = match (status.as_str(), is_fresh || how.is_empty()) {
        ("copied", true) => format!("copied{how}"),
        ("copied", false) => format!("copied (older than the capture){how}"),
        (s, _) if s.starts_with("absent") && !dumps.is_empty() => {
            format!("{s}{how}; named from its jitdump")
        }
        (s, _) if s.starts_with("absent") => format!("{s}{how}; {}", advice(&runtime)),
        (s, _) => format!("{s}{how}"),
    };
    t.rows
        .push_str(&row("perfmap", &shown, size, &format!("{status}{note}")));
    // One jitdump per process (the runtime writes one), read through the
    // mapping: the file the worker maps, whatever its path leads to now.
    for (range, d) in dumps.into_iter().take(1) {
        let dst = capture_dir.join(JIT_DIR).join(format!("jit-{pid}.dump"));
        let (size, status) = copy_in(w.open_mapped(&range, &d), &dst, capture_dir, room, &mut t);
        t.rows
            .push_str(&row("jitdump", &d, size, &format!("{status}{note}")));
    }
    t.log = format!(
        "jit: {} (pid {pid}, {shown} in its namespace): {status}; {} file(s), {} bytes",
        runtime.name(),
        t.copied,
        t.bytes
    );
    t
}

fn row(kind: &str, path: &str, size: Option<u64>, status: &str) -> String {
    let size = size.map_or_else(|| "-".to_string(), |n| n.to_string());
    format!("{kind}\t{path}\t{size}\t-\t{status}\n")
}

/// How to get the JIT frames of `runtime` named.
pub fn advice(runtime: &Runtime) -> &'static str {
    match runtime {
        Runtime::HotSpot { .. } => {
            "its frames stay unnamed: JDK 17+ writes it on `jcmd PID Compiler.perfmap` \
             (kept on with --jit-maps auto); start java with -XX:+PreserveFramePointer \
             so that stacks pass through JIT code"
        }
        Runtime::Node => "its frames stay unnamed: start node with --perf-basic-prof",
        Runtime::Python(_) => {
            "its frames stay unnamed: Python 3.12+ writes it with -X perf (or PYTHONPERFSUPPORT=1)"
        }
        Runtime::Other => {
            "its frames stay unnamed: the runtime must write /tmp/perf-PID.map (perf's JIT map)"
        }
    }
}

/// Copies the worker's file, opened as the worker ([`confine`]), to `dst`
/// below `base`, at most the size it had when opened and within `room`
/// bytes in all; the copy's size and the manifest status.
fn copy_in(
    opened: io::Result<(fs::File, fs::Metadata)>,
    dst: &Path,
    base: &Path,
    room: u64,
    t: &mut Taken,
) -> (Option<u64>, String) {
    let (mut f, meta) = match opened {
        Ok(o) => o,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return (None, "absent".to_string()),
        Err(e) => return (None, format!("not copied: {e}")),
    };
    let size = meta.len();
    if t.bytes + size > room {
        return (Some(size), "skipped: --symfs-limit reached".to_string());
    }
    match confine::copy_bounded(&mut f, size, meta.mode(), base, dst) {
        Ok(n) => {
            t.bytes += n;
            t.copied += 1;
            (Some(n), "copied".to_string())
        }
        Err(e) => (Some(size), format!("error: {e}")),
    }
}

/// Appends `rows` to `worker_dir/symbol-manifest.tsv`.
pub fn append_manifest(worker_dir: &Path, rows: &str) -> io::Result<()> {
    let path = worker_dir.join("symbol-manifest.tsv");
    let mut text = match fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            format!("{}\n", crate::symfs::MANIFEST_HEADER)
        }
        Err(e) => return Err(e),
    };
    text.push_str(rows);
    write_atomic(&path, text.as_bytes())
}

/// The preflight's `jit` line for `pid`: `None` when it runs no JIT code;
/// else whether the line is fine, what it says and the fix.
pub fn preflight(pid: u32) -> Option<(bool, String, &'static str)> {
    let maps = fs::read_to_string(format!("/proc/{pid}/maps")).ok()?;
    let exe = fs::read_link(format!("/proc/{pid}/exe"))
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default();
    let anon = anon_exec_bytes(&maps);
    let dumps = jitdumps(&maps);
    if anon == 0 && dumps.is_empty() {
        return None;
    }
    let runtime = Runtime::of(&exe, &maps);
    let cmdline = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let args: Vec<String> = cmdline
        .split(|&b| b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    let has = |a: &str| {
        args.iter()
            .any(|x| x == a || x.starts_with(&format!("{a}=")))
    };
    let map = format!("/tmp/perf-{}.map", ns_pid(pid));
    let have_map = Path::new(&format!("/proc/{pid}/root{map}")).is_file();
    let seen = format!(
        "{}: JIT code seen ({} KiB anonymous executable memory{})",
        runtime.name(),
        anon >> 10,
        if dumps.is_empty() {
            ""
        } else {
            ", a jitdump file"
        }
    );
    Some(match &runtime {
        Runtime::HotSpot { .. } if !has("-XX:+PreserveFramePointer") => (
            false,
            format!("{seen}; named from {map}, written on request at each stop, but stacks stop at JIT frames without frame pointers"),
            "start java with -XX:+PreserveFramePointer",
        ),
        Runtime::HotSpot { .. } => (
            true,
            format!("{seen}; named from {map}, written on request at each stop (jcmd PID Compiler.perfmap; needs JDK 17+, --jit-maps auto)"),
            "",
        ),
        Runtime::Node if !has("--perf-basic-prof") && !has("--perf-basic-prof-only-functions") && !have_map && dumps.is_empty() => (
            false,
            format!("{seen}; no perf map: its frames will be [perf-PID.map]"),
            "start node with --perf-basic-prof (and --interpreted-frames-native-stack for interpreted frames)",
        ),
        Runtime::Python(v) if !have_map && !has("perf") => (
            false,
            format!(
                "{seen} (Python {}); no perf map: its frames will be unnamed",
                v.as_deref().unwrap_or("?")
            ),
            "Python 3.12+: run with -X perf (or PYTHONPERFSUPPORT=1)",
        ),
        _ if have_map => (
            true,
            format!("{seen}; named from {map}, copied at each stop"),
            "",
        ),
        _ if !dumps.is_empty() => (
            true,
            format!("{seen}; named from its jitdump, copied at each stop (what the runtime has flushed to it)"),
            "",
        ),
        _ => (
            false,
            format!("{seen}; no perf map yet ({map}): its frames will be unnamed unless the runtime writes one"),
            "have the runtime write /tmp/perf-PID.map (Node --perf-basic-prof, Python 3.12+ -X perf, JVM jcmd PID Compiler.perfmap)",
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    const JVM_MAPS: &str = "\
55d0-55d1 r-xp 00000000 08:01 10 /usr/lib/jvm/java-17/bin/java
7f00-7f10 rwxp 00000000 00:00 0 \n\
7f20-7f21 r-xp 00000000 08:01 11 /usr/lib/jvm/java-17/lib/server/libjvm.so
7f30-7f31 rw-p 00000000 00:00 0 \n\
7f40-7f41 r-xp 00000000 08:01 12 /tmp/jit-77.dump
";

    #[test]
    fn runtimes_from_what_they_map() {
        assert!(matches!(
            Runtime::of("/usr/lib/jvm/java-17/bin/java", JVM_MAPS),
            Runtime::HotSpot { .. }
        ));
        assert_eq!(Runtime::of("/usr/bin/node", ""), Runtime::Node);
        assert_eq!(
            Runtime::of("/usr/bin/python3.12", ""),
            Runtime::Python(Some("3.12".into()))
        );
        assert_eq!(
            Runtime::of(
                "/opt/app",
                "1-2 r-xp 0 08:01 1 /usr/lib/libpython3.13.so.1.0\n"
            ),
            Runtime::Python(Some("3.13".into()))
        );
        assert_eq!(Runtime::of("/bin/sleep", ""), Runtime::Other);
    }

    #[test]
    fn anonymous_executable_memory_and_jitdumps() {
        assert_eq!(anon_exec_bytes(JVM_MAPS), 0x10);
        assert_eq!(
            jitdumps(JVM_MAPS),
            [("7f40-7f41".to_string(), "/tmp/jit-77.dump".to_string())]
        );
        assert_eq!(anon_exec_bytes("1-2 r-xp 0 08:01 1 /bin/x\n"), 0);
    }

    #[test]
    fn own_ns_pid_and_no_jit() {
        let me = std::process::id();
        // Not in a PID namespace of its own: the same number (in a
        // container, the last NSpid field).
        let status = fs::read_to_string("/proc/self/status").unwrap();
        let last: u32 = status
            .lines()
            .find(|l| l.starts_with("NSpid:"))
            .and_then(|l| l.split_whitespace().last()?.parse().ok())
            .unwrap_or(me);
        assert_eq!(ns_pid(me), last);
        // This test binary runs no JIT code: nothing taken, no line.
        let dir = std::env::temp_dir().join(format!("jit-none-{me}"));
        let (_, start) = sys::proc_stat(me).unwrap();
        let t = snapshot(me, start, &dir, u64::MAX, SystemTime::now(), true, "");
        assert_eq!(t, Taken::default());
        // Another process of that pid: nothing run or copied, and said.
        let t = snapshot(me, start + 1, &dir, u64::MAX, SystemTime::now(), true, "");
        assert!(t.rows.is_empty() && t.copied == 0, "{t:?}");
        assert!(t.log.contains("no longer the worker"), "{}", t.log);
        assert!(preflight(me).is_none());
    }

    #[test]
    fn copies_respect_the_room_and_say_what_was_refused() {
        let d = tempfile_dir("copy");
        let (src, dst) = (d.join("map"), d.join("out/jit/perf-1.map"));
        fs::write(&src, "1000 10 f\n").unwrap();
        fs::create_dir_all(d.join("out")).unwrap();
        let open = || {
            let f = fs::File::open(&src)?;
            let m = f.metadata()?;
            Ok((f, m))
        };
        let mut t = Taken::default();
        let refused = Err(io::Error::other("map is a symbolic link (not followed)"));
        let (_, s) = copy_in(refused, &dst, &d.join("out"), u64::MAX, &mut t);
        assert_eq!(s, "not copied: map is a symbolic link (not followed)");
        let (_, s) = copy_in(open(), &dst, &d.join("out"), 3, &mut t);
        assert_eq!(s, "skipped: --symfs-limit reached");
        assert_eq!(
            copy_in(open(), &dst, &d.join("out"), 100, &mut t),
            (Some(10), "copied".into())
        );
        assert_eq!(fs::read_to_string(&dst).unwrap(), "1000 10 f\n");
        assert_eq!((t.bytes, t.copied), (10, 1));
        let gone = Err(io::Error::from(io::ErrorKind::NotFound));
        assert_eq!(copy_in(gone, &dst, &d.join("out"), 100, &mut t).1, "absent");
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_jcmd_others_can_change_is_never_run() {
        let d = tempfile_dir("jcmd");
        let jcmd = d.join("bin/jcmd");
        fs::create_dir_all(jcmd.parent().unwrap()).unwrap();
        fs::write(&jcmd, "#!/bin/sh\ntouch ran\n").unwrap();
        let exec = std::os::unix::fs::PermissionsExt::from_mode(0o755);
        fs::set_permissions(&jcmd, exec).unwrap();
        let slash = fs::File::open("/").unwrap();
        let e = trusted_jcmd(&slash, &[jcmd.to_str().unwrap(), "/nonexistent/jcmd"]).unwrap_err();
        assert!(
            e.contains("no jcmd that only root can change") && e.contains("others can change it"),
            "{e}"
        );
        let e = trusted_jcmd(&slash, &["/nonexistent/jcmd"]).unwrap_err();
        assert!(e.contains("none of /nonexistent/jcmd exists"), "{e}");
        let asked = not_asked(e);
        assert!(
            asked.describe().starts_with("not requested: no jcmd"),
            "{}",
            asked.describe()
        );
        fs::remove_dir_all(&d).unwrap();
    }

    fn tempfile_dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("jit-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }
}
