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
//! `jcmd PID Compiler.perfmap` as the worker's user, within
//! [`JCMD_TIMEOUT`], and the manifest says what was done and how long it
//! took. Node (`--perf-basic-prof`) and Python 3.12+ (`-X perf`) keep their
//! map current themselves: it is only copied.

use std::fs;
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

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
        /// The JDK's `jcmd` when this machine has it, else `jcmd`.
        jcmd: String,
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
            let jcmd = own_jcmd
                .clone()
                .filter(|j| Path::new(j).is_file())
                .unwrap_or_else(|| "jcmd".to_string());
            return Runtime::HotSpot { jcmd, own_jcmd };
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

/// The jitdump files a maps text shows mapped (`.../jit-N.dump`).
pub fn jitdump_paths(maps: &str) -> Vec<String> {
    let mut out: Vec<String> = maps
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .filter(|p| {
            let f = p.rsplit('/').next().unwrap_or("");
            p.starts_with('/') && f.starts_with("jit-") && f.ends_with(".dump")
        })
        .map(str::to_string)
        .collect();
    out.dedup();
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

/// The worker's effective uid and gid (`/proc/PID/status`).
fn ids_of(pid: u32) -> Option<(u32, u32)> {
    let s = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| -> Option<u32> {
        s.lines()
            .find(|l| l.starts_with(name))?
            .split_whitespace()
            .nth(2)?
            .parse()
            .ok()
    };
    Some((field("Uid:")?, field("Gid:")?))
}

/// What was done to get a HotSpot JVM's map written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Asked {
    /// The command line.
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

/// Runs `jcmd PID Compiler.perfmap` as the worker's user, killed after
/// `timeout`. A worker in another mount namespace but in ours of PIDs (a
/// private `/tmp`: `unshare -m`, systemd's PrivateTmp) is asked from inside
/// its mount namespace, with its own JDK's `jcmd`: JDK 17's attach looks
/// for the JVM's socket in the caller's `/tmp` unless the PIDs differ (a
/// container of its own PID namespace, which jcmd handles itself through
/// `/proc/PID/root`).
pub fn ask_hotspot(runtime: &Runtime, pid: u32, timeout: Duration) -> Asked {
    let Runtime::HotSpot { jcmd, own_jcmd } = runtime else {
        return Asked {
            command: String::new(),
            elapsed: Duration::ZERO,
            failure: Some("not a HotSpot JVM".into()),
        };
    };
    let enter = other_mount_ns(pid) && ns_pid(pid) == pid && sys::euid() == 0;
    let jcmd = match (enter, own_jcmd) {
        (true, Some(own)) => own.as_str(),
        _ => jcmd.as_str(),
    };
    let command = format!(
        "{jcmd} {pid} Compiler.perfmap{}",
        if enter {
            " (in its mount namespace)"
        } else {
            ""
        }
    );
    let start = Instant::now();
    let mut cmd = Command::new(jcmd);
    cmd.arg(pid.to_string())
        .arg("Compiler.perfmap")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let ids = ids_of(pid).filter(|&(uid, _)| sys::euid() == 0 && uid != 0);
    let mnt = if enter {
        match fs::File::open(format!("/proc/{pid}/ns/mnt")) {
            Ok(f) => Some(f),
            Err(e) => {
                return Asked {
                    command,
                    elapsed: start.elapsed(),
                    failure: Some(format!("cannot open its mount namespace: {e}")),
                }
            }
        }
    } else {
        None
    };
    match mnt {
        Some(f) => {
            use std::os::fd::AsRawFd;
            let fd = f.as_raw_fd();
            // SAFETY: between fork and exec only async-signal-safe system
            // calls run (setns, setgroups, setgid, setuid); `f` outlives
            // the spawn. The namespace is entered as root, then the
            // worker's user is taken.
            unsafe {
                cmd.pre_exec(move || {
                    if libc::setns(fd, libc::CLONE_NEWNS) != 0 {
                        return Err(io::Error::last_os_error());
                    }
                    if let Some((uid, gid)) = ids {
                        if libc::setgroups(0, std::ptr::null()) != 0
                            || libc::setgid(gid) != 0
                            || libc::setuid(uid) != 0
                        {
                            return Err(io::Error::last_os_error());
                        }
                    }
                    Ok(())
                });
            }
            let failure = spawn_and_wait(&mut cmd, timeout);
            drop(f);
            Asked {
                command,
                elapsed: start.elapsed(),
                failure,
            }
        }
        None => {
            if let Some((uid, gid)) = ids {
                cmd.uid(uid).gid(gid);
            }
            let failure = spawn_and_wait(&mut cmd, timeout);
            Asked {
                command,
                elapsed: start.elapsed(),
                failure,
            }
        }
    }
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
                if let Some(mut o) = child.stdout.take() {
                    let _ = io::Read::read_to_string(&mut o, &mut out);
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

/// Takes the JIT snapshot of `pid` into `capture_dir/jit/` within `room`
/// bytes; `since` is when the capture started (an older map is stale);
/// `ask` allows asking a JVM for its map; `note` ends every status.
pub fn snapshot(
    pid: u32,
    capture_dir: &Path,
    room: u64,
    since: SystemTime,
    ask: bool,
    note: &str,
) -> Taken {
    let mut t = Taken::default();
    let Ok(maps) = fs::read_to_string(format!("/proc/{pid}/maps")) else {
        return t;
    };
    let exe = fs::read_link(format!("/proc/{pid}/exe"))
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default();
    let runtime = Runtime::of(&exe, &maps);
    let dumps = jitdump_paths(&maps);
    if anon_exec_bytes(&maps) == 0 && dumps.is_empty() {
        return t;
    }
    let nspid = ns_pid(pid);
    let shown = format!("/tmp/perf-{nspid}.map");
    let src = PathBuf::from(format!("/proc/{pid}/root{shown}"));
    let fresh = |p: &Path| {
        fs::symlink_metadata(p)
            .and_then(|m| m.modified())
            .is_ok_and(|m| m >= since)
    };
    let mut how = String::new();
    if let (Runtime::HotSpot { .. }, true, false) = (&runtime, ask, fresh(&src)) {
        let asked = ask_hotspot(&runtime, pid, JCMD_TIMEOUT);
        how = format!(", {}", asked.describe());
    }
    let dst = capture_dir.join(JIT_DIR).join(format!("perf-{pid}.map"));
    let status = copy_in(&src, &dst, capture_dir, room, &mut t);
    let status = match (status.as_str(), fresh(&src) || how.is_empty()) {
        ("copied", true) => format!("copied{how}"),
        ("copied", false) => format!("copied (older than the capture){how}"),
        (s, _) if s.starts_with("absent") && !dumps.is_empty() => {
            format!("{s}{how}; named from its jitdump")
        }
        (s, _) if s.starts_with("absent") => format!("{s}{how}; {}", advice(&runtime)),
        (s, _) => format!("{s}{how}"),
    };
    let size = fs::metadata(&dst).ok().map(|m| m.len());
    t.rows
        .push_str(&row("perfmap", &shown, size, &format!("{status}{note}")));
    // One jitdump per process (the runtime writes one).
    for d in dumps.into_iter().take(1) {
        let dst = capture_dir.join(JIT_DIR).join(format!("jit-{pid}.dump"));
        let src = PathBuf::from(format!("/proc/{pid}/root{d}"));
        let status = copy_in(&src, &dst, capture_dir, room, &mut t);
        let size = fs::metadata(&dst).ok().map(|m| m.len());
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

/// Copies the worker's file `src` (never through a symbolic link: the
/// worker's file system is not ours to trust) to `dst` below `base`, within
/// `room` bytes in all; the manifest status.
fn copy_in(src: &Path, dst: &Path, base: &Path, room: u64, t: &mut Taken) -> String {
    let mut f = match fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(src)
    {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return "absent".to_string(),
        Err(e) => return format!("error: {e}"),
    };
    let size = match f.metadata() {
        Ok(m) if m.is_file() => m.len(),
        Ok(_) => return "error: not a regular file".to_string(),
        Err(e) => return format!("error: {e}"),
    };
    if t.bytes + size > room {
        return "skipped: --symfs-limit reached".to_string();
    }
    let copied = dst
        .parent()
        .map_or(Ok(()), |p| sys::create_dirs_nofollow(base, p))
        .and_then(|()| sys::write_new(dst, 0o644, |to| io::copy(&mut f, to)));
    match copied {
        Ok(n) => {
            t.bytes += n;
            t.copied += 1;
            "copied".to_string()
        }
        Err(e) => format!("error: {e}"),
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
    let dumps = jitdump_paths(&maps);
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
        assert_eq!(jitdump_paths(JVM_MAPS), ["/tmp/jit-77.dump"]);
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
        let t = snapshot(me, &dir, u64::MAX, SystemTime::now(), true, "");
        assert_eq!(t, Taken::default());
        assert!(preflight(me).is_none());
    }

    #[test]
    fn copies_never_follow_a_link_and_respect_the_room() {
        let d = tempfile_dir("copy");
        let (src, link, dst) = (d.join("map"), d.join("link"), d.join("out/jit/perf-1.map"));
        fs::write(&src, "1000 10 f\n").unwrap();
        std::os::unix::fs::symlink(&src, &link).unwrap();
        fs::create_dir_all(d.join("out")).unwrap();
        let mut t = Taken::default();
        let s = copy_in(&link, &dst, &d.join("out"), u64::MAX, &mut t);
        assert!(s.starts_with("error"), "{s}");
        assert_eq!(
            copy_in(&src, &dst, &d.join("out"), 3, &mut t),
            "skipped: --symfs-limit reached"
        );
        assert_eq!(copy_in(&src, &dst, &d.join("out"), 100, &mut t), "copied");
        assert_eq!(fs::read_to_string(&dst).unwrap(), "1000 10 f\n");
        assert_eq!((t.bytes, t.copied), (10, 1));
        assert_eq!(
            copy_in(&d.join("none"), &dst, &d.join("out"), 100, &mut t),
            "absent"
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
