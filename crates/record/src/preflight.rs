//! The checks run before anything is attached, in the order an operator
//! would fix them, and the readable report (`preflight.txt`). Also finds the
//! worker's PID (waiting for the PID file) and the staging directory, and
//! defines the target options the sidecar and `preflight` share
//! ([`TargetOpts`]; `cli` fills them in, and imports them from here, so that
//! no import loops back to `cli`).
//!
//! A failed check names itself and the fix; warnings never stop the sidecar.
//! This module does not copy symbols (see `symfs`) and does not start the
//! long-running perf processes (see `shard`).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use crate::elf;
use crate::fail::Fail;
use crate::symfs;
use crate::sys;

/// Where the worker's PID comes from.
#[derive(Debug, Clone)]
pub enum PidSource {
    /// `--pid`.
    Pid(u32),
    /// `--pid-file`.
    File(PathBuf),
}

/// Options shared by the sidecar and the preflight subcommand.
#[derive(Debug, Clone)]
pub struct TargetOpts {
    /// The worker's PID or PID file.
    pub pid: PidSource,
    /// Expected executable name or path.
    pub exe_name: Option<String>,
    /// perf event.
    pub event: String,
    /// Sampling frequency in Hz.
    pub frequency: u32,
    /// Fail without symbols.
    pub require_symbols: bool,
    /// `--off-cpu`: record switch-outs and switch events too.
    pub off_cpu: bool,
    /// Explicit staging directory.
    pub staging: Option<PathBuf>,
    /// Seconds to wait for the PID file and for a shard's ping.
    pub start_timeout: u64,
    /// `fp` or `dwarf[,SIZE]` (the test record uses it too).
    pub call_graph: String,
    /// `--user-regs` as given (`None`: the automatic rule, [`crate::regs`]).
    pub explicit_user_regs: Option<String>,
}

impl TargetOpts {
    /// The `--user-regs` perf is given on this node, and why.
    pub fn user_regs(&self) -> Option<crate::regs::UserRegs> {
        crate::regs::user_regs(
            &self.call_graph,
            &self.event,
            std::env::consts::ARCH,
            self.explicit_user_regs.as_deref(),
        )
    }
}

/// The perf executable (looked up on PATH).
pub const PERF: &str = "perf";

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// Fine.
    Ok,
    /// Worth knowing; does not stop the capture.
    Warn,
    /// Stops the capture.
    Fail,
}

/// One check's result.
#[derive(Debug, Clone)]
pub struct Check {
    /// Short name, e.g. `perf`.
    pub name: &'static str,
    /// Outcome.
    pub level: Level,
    /// What was found.
    pub detail: String,
    /// What to do when it is not ok (empty when ok).
    pub fix: String,
}

/// All checks, in order, plus what later steps need to know.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// The checks.
    pub checks: Vec<Check>,
    /// `perf --version`.
    pub perf_version: String,
    /// The worker's executable (`/proc/PID/exe`).
    pub exe: String,
}

impl Report {
    fn push(&mut self, name: &'static str, level: Level, detail: String, fix: &str) {
        self.checks.push(Check {
            name,
            level,
            detail,
            fix: if level == Level::Ok {
                String::new()
            } else {
                fix.to_string()
            },
        });
    }

    /// The report as text, one line per check (the content of `preflight.txt`).
    pub fn text(&self, pid: u32) -> String {
        let mut out = format!(
            "jobprof-record {} preflight for pid {pid} on {} (uid {})\n",
            env!("CARGO_PKG_VERSION"),
            sys::hostname(),
            sys::euid()
        );
        for c in &self.checks {
            let tag = match c.level {
                Level::Ok => "ok  ",
                Level::Warn => "WARN",
                Level::Fail => "FAIL",
            };
            out.push_str(&format!("[{tag}] {:<14} {}\n", c.name, c.detail));
            if !c.fix.is_empty() {
                out.push_str(&format!("       {:<14} fix: {}\n", "", c.fix));
            }
        }
        let failed = self.failed().len();
        out.push_str(&if failed == 0 {
            "preflight: all checks passed\n".to_string()
        } else {
            format!("preflight: {failed} check(s) failed\n")
        });
        out
    }

    /// The failed checks.
    pub fn failed(&self) -> Vec<&Check> {
        self.checks
            .iter()
            .filter(|c| c.level == Level::Fail)
            .collect()
    }

    /// One message naming every failed check and its fix.
    pub fn failure_message(&self) -> String {
        let parts: Vec<String> = self
            .failed()
            .iter()
            .map(|c| {
                format!(
                    "preflight check `{}` failed: {} (fix: {})",
                    c.name, c.detail, c.fix
                )
            })
            .collect();
        parts.join("; ")
    }
}

/// The worker's PID: `--pid`, or the content of `--pid-file`, waiting up to
/// `timeout` seconds for the file to appear and hold a number.
pub fn resolve_pid(src: &PidSource, timeout: u64) -> Result<u32, Fail> {
    let file = match src {
        PidSource::Pid(p) => return Ok(*p),
        PidSource::File(f) => f,
    };
    let deadline = Instant::now() + Duration::from_secs(timeout);
    loop {
        match sys::read_regular(file) {
            Ok(s) => {
                if let Ok(p) = s.trim().parse::<u32>() {
                    if p > 0 {
                        return Ok(p);
                    }
                }
            }
            // A FIFO or device never becomes a PID file: no waiting on it.
            Err(e) if e.kind() == std::io::ErrorKind::InvalidInput => {
                return Err(Fail::usage(format!(
                    "--pid-file {}: {e}; the driver must write the worker's PID into a \
                     regular file",
                    file.display()
                )));
            }
            Err(_) => {}
        }
        if Instant::now() >= deadline {
            return Err(Fail::timeout(format!(
                "{}: no PID appeared in the PID file within {timeout} s; \
                 the driver must write the worker's PID there (atomically), or pass --pid",
                file.display()
            )));
        }
        if let Some(sig) = sys::pending_signal() {
            return Err(Fail::failed(format!(
                "got {} while waiting for the PID file {}",
                sys::signal_name(sig),
                file.display()
            )));
        }
        sleep(Duration::from_millis(200));
    }
}

/// The staging root: `--staging`, else `$SLURM_TMPDIR`, `$TMPDIR` or `/tmp`
/// plus `jobprof-record.<SLURM_JOB_ID or our PID>`.
pub fn staging_root(explicit: Option<&Path>) -> PathBuf {
    if let Some(p) = explicit {
        return p.to_path_buf();
    }
    let base = ["SLURM_TMPDIR", "TMPDIR"]
        .iter()
        .filter_map(std::env::var_os)
        .find(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/tmp"));
    let id = std::env::var("SLURM_JOB_ID").unwrap_or_else(|_| std::process::id().to_string());
    base.join(format!("jobprof-record.{id}"))
}

/// `perf --version`, when perf runs at all.
pub fn perf_version() -> Option<String> {
    let out = Command::new(PERF)
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .ok()?;
    let v = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (out.status.success() && !v.is_empty()).then_some(v)
}

/// The executable of `pid`, as `/proc/PID/exe` names it.
pub fn exe_of(pid: u32) -> Option<String> {
    fs::read_link(format!("/proc/{pid}/exe"))
        .ok()
        .map(|p| p.to_string_lossy().into_owned())
}

/// Creates `dir` with mode 0700 (missing parents too) or checks the one
/// that exists: it must be a real directory (not a symlink), owned by us,
/// and not writable by group or others, since we write into it as root.
/// The error names the path, what it is and its owner.
pub fn private_dir(dir: &Path) -> Result<(), String> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    let me = sys::euid();
    match fs::symlink_metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
                fs::create_dir_all(parent)
                    .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
            }
            // A racing creator makes this fail (EEXIST): never adopted.
            fs::DirBuilder::new()
                .mode(0o700)
                .create(dir)
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))
        }
        Err(e) => Err(format!("{}: {e}", dir.display())),
        Ok(m) if m.file_type().is_symlink() => Err(format!(
            "{} is a symlink (owner uid {}), not a directory; refusing to write through it",
            dir.display(),
            m.uid()
        )),
        Ok(m) if !m.is_dir() => Err(format!("{} exists and is not a directory", dir.display())),
        Ok(m) if m.uid() != me => Err(format!(
            "{} already exists and belongs to uid {}, not to us (uid {me}); someone else \
             created it",
            dir.display(),
            m.uid()
        )),
        Ok(m) if m.mode() & 0o022 != 0 => Err(format!(
            "{} is writable by group or others (mode {:o}); others could plant files there",
            dir.display(),
            m.mode() & 0o7777
        )),
        Ok(_) => Ok(()),
    }
}

/// Runs every check against `pid`. The staging checks create `staging`
/// and then `worker_dir` (when given) below it as private directories;
/// the deeper one is used for the writability check and the test recording.
pub fn run(opts: &TargetOpts, pid: u32, staging_root: &Path, worker_dir: Option<&Path>) -> Report {
    let staging = worker_dir.unwrap_or(staging_root);
    let mut r = Report::default();
    check_perf(&mut r);
    check_permissions(&mut r);
    if opts.off_cpu {
        check_tracefs(&mut r);
    }
    check_nofile(&mut r);
    check_staging(&mut r, staging_root, worker_dir);
    let exe = exe_of(pid);
    check_process(&mut r, opts, pid, exe.as_deref());
    check_uid(&mut r, pid);
    if exe.is_some() {
        symbol_checks(&mut r, opts, pid);
    }
    check_user_regs(&mut r, opts);
    if r.failed().is_empty() {
        check_test_record(&mut r, opts, pid, staging);
    }
    r
}

/// `perf`: present, and new enough for the control FIFO.
fn check_perf(r: &mut Report) {
    let Some(v) = perf_version() else {
        r.push(
            "perf",
            Level::Fail,
            "`perf --version` did not run".into(),
            "install perf (Debian: apt-get install linux-perf) and put it on PATH",
        );
        return;
    };
    r.perf_version = v.clone();
    let help = Command::new(PERF)
        .args(["record", "-h"])
        .stdin(Stdio::null())
        .output()
        .map(|o| {
            let mut s = String::from_utf8_lossy(&o.stdout).into_owned();
            s.push_str(&String::from_utf8_lossy(&o.stderr));
            s
        })
        .unwrap_or_default();
    let has = |f: &str| help.contains(f);
    if has("--control") && has("--delay") {
        r.push(
            "perf",
            Level::Ok,
            format!("{v}; supports --control and --delay"),
            "",
        );
    } else {
        r.push(
            "perf",
            Level::Fail,
            format!("{v}: `perf record -h` lists no --control/--delay"),
            "install a newer perf (5.10 or later, Debian: linux-perf)",
        );
    }
}

/// `permissions`: root, or a perf_event_paranoid that lets us sample.
fn check_permissions(r: &mut Report) {
    let paranoid = fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into());
    let root = sys::euid() == 0;
    let level = if root || paranoid.parse::<i32>().is_ok_and(|p| p <= 1) {
        Level::Ok
    } else {
        Level::Warn
    };
    r.push(
        "permissions",
        level,
        format!(
            "perf_event_paranoid={paranoid}, {}",
            if root {
                "running as root (paranoid ignored)"
            } else {
                "not root"
            }
        ),
        "run as root or lower /proc/sys/kernel/perf_event_paranoid to 1 (kernel samples need <= 1)",
    );
}

/// `tracefs` (with `--off-cpu`): the switch tracepoint can be opened.
fn check_tracefs(r: &mut Report) {
    match crate::offcpu::check_tracefs() {
        Ok(detail) => r.push("tracefs", Level::Ok, detail, ""),
        Err((detail, fix)) => r.push("tracefs", Level::Fail, detail, &fix),
    }
}

/// `nofile`: one fd per thread per shard, plus ring buffers (the soft limit
/// is raised to the hard one here).
fn check_nofile(r: &mut Report) {
    let (soft, hard) = sys::raise_nofile();
    r.push(
        "nofile",
        if soft >= 65536 { Level::Ok } else { Level::Warn },
        format!("open-files limit soft={soft} hard={hard} (soft raised to hard)"),
        "raise the hard limit to >= 65536 (ulimit -Hn / limits.conf / Slurm PropagateResourceLimits)",
    );
}

/// `staging`: private directories, then a write probe in the deeper one.
fn check_staging(r: &mut Report, staging_root: &Path, worker_dir: Option<&Path>) {
    let staging = worker_dir.unwrap_or(staging_root);
    let probe = staging.join(format!(".write-test.{:016x}", sys::random_u64()));
    let checked = private_dir(staging_root)
        .and_then(|_| worker_dir.map_or(Ok(()), private_dir))
        .and_then(|_| {
            sys::create_new(&probe, 0o600)
                .map(drop)
                .map_err(|e| format!("cannot write in {}: {e}", staging.display()))
        });
    match checked {
        Ok(()) => {
            let _ = fs::remove_file(&probe);
            r.push(
                "staging",
                Level::Ok,
                format!(
                    "{} is private (mode 0700, ours) and writable",
                    staging.display()
                ),
                "",
            );
        }
        Err(e) => r.push(
            "staging",
            Level::Fail,
            e,
            "pass a node-local directory of your own with --staging (or set \
             SLURM_TMPDIR/TMPDIR), or remove the one someone else made",
        ),
    }
}

/// `process`: the PID runs, and runs the expected executable (`exe`, its
/// `/proc/PID/exe`, None when unreadable).
fn check_process(r: &mut Report, opts: &TargetOpts, pid: u32, exe: Option<&str>) {
    let Some(exe) = exe else {
        r.push(
            "process",
            Level::Fail,
            format!("/proc/{pid}/exe cannot be read: no such process, or not ours"),
            "pass the worker's PID (--pid or --pid-file), and run the sidecar on the worker's node",
        );
        return;
    };
    r.exe = exe.to_string();
    let clean = exe.trim_end_matches(" (deleted)");
    let matches = match &opts.exe_name {
        None => true,
        Some(n) if n.contains('/') => clean == n,
        Some(n) => Path::new(clean)
            .file_name()
            .is_some_and(|b| b == n.as_str()),
    };
    if matches {
        r.push("process", Level::Ok, format!("pid {pid} runs {exe}"), "");
    } else {
        r.push(
            "process",
            Level::Fail,
            format!(
                "pid {pid} runs {exe}, not `{}`",
                opts.exe_name.as_deref().unwrap_or("")
            ),
            "the PID file points at the wrong process (a wrapper?); write the worker's own PID",
        );
    }
}

/// `uid`: we may attach to the worker (same user, or root). No line when
/// the worker's uid cannot be read (the process check already failed).
fn check_uid(r: &mut Report, pid: u32) {
    let Some(uid) = sys::proc_uid(pid) else {
        return;
    };
    let me = sys::euid();
    if uid == me || me == 0 {
        r.push(
            "uid",
            Level::Ok,
            format!(
                "worker uid {uid}, ours {me}{}",
                if me == 0 { " (root)" } else { "" }
            ),
            "",
        );
    } else {
        r.push(
            "uid",
            Level::Fail,
            format!("worker runs as uid {uid}, we run as uid {me}"),
            "run the sidecar as the worker's user (same srun step user) or as root",
        );
    }
}

/// The call-graph and `--user-regs` options of the capture's `perf record`.
fn record_options(opts: &TargetOpts) -> Vec<String> {
    let mut v = match opts.call_graph.as_str() {
        "fp" => vec!["-g".to_string()],
        cg => vec!["--call-graph".to_string(), cg.to_string()],
    };
    if let Some(r) = opts.user_regs() {
        v.push(format!("--user-regs={}", r.regs));
    }
    v
}

/// `user regs`: which `--user-regs` the capture passes, and why (a note;
/// the test record checks that perf takes it).
fn check_user_regs(r: &mut Report, opts: &TargetOpts) {
    let detail = match opts.user_regs() {
        Some(u) => format!("--user-regs={} ({})", u.regs, u.why),
        None => "perf's own (no --user-regs)".to_string(),
    };
    r.push("user regs", Level::Ok, detail, "");
}

/// `test record`: a real, short recording of the target in `staging`.
fn check_test_record(r: &mut Report, opts: &TargetOpts, pid: u32, staging: &Path) {
    let tag = sys::random_u64();
    let data = staging.join(format!(".preflight.{tag:016x}.perf.data"));
    let log = staging.join(format!(".preflight.{tag:016x}.log"));
    let started = Instant::now();
    // The worker's start time: a failure after it exited is its exit, not
    // the event's or perf's permissions.
    let born = sys::proc_stat(pid).map(|(_, start)| start);
    // The capture's own options: a mask or call graph perf or the kernel
    // refuses fails here, not at the first `start`.
    let extra = record_options(opts);
    let shown = format!("-e {} {}", opts.event, extra.join(" "));
    let status = sys::create_new(&log, 0o600).and_then(|l| {
        let mut cmd = Command::new(PERF);
        cmd.args(["record", "-q"]);
        crate::offcpu::event_args(&mut cmd, &opts.event, opts.frequency, opts.off_cpu);
        cmd.args(&extra)
            .arg("-t")
            .arg(pid.to_string())
            .arg("-o")
            .arg(&data)
            .args(["--", "sleep", "0.2"])
            .stdin(Stdio::null())
            .stdout(l.try_clone()?)
            .stderr(l)
            .status()
    });
    let why = sys::tail(&log, 3);
    let ok = matches!(&status, Ok(s) if s.success()) && data.exists();
    if ok {
        r.push(
            "test record",
            Level::Ok,
            format!(
                "0.2 s `perf record {shown} -t {pid}` succeeded ({} ms)",
                started.elapsed().as_millis()
            ),
            "",
        );
    } else {
        let st = match &status {
            Ok(s) => sys::describe_status(sys::shell_status(*s)),
            Err(e) => e.to_string(),
        };
        let gone = born.is_none_or(|start| !sys::alive(pid, start));
        let (detail, fix) = if gone {
            (
                format!(
                    "the worker (pid {pid}) exited during the preflight, so \
                     `perf record {shown} -t {pid}` had nothing to record ({st}: {why})"
                ),
                "the worker ended before the capture could start: start the sidecar while \
                 the worker runs (or check why the worker exits this early)",
            )
        } else {
            (
                format!("`perf record {shown} -t {pid}` failed with {st}: {why}"),
                "check the event (-e cpu-clock works without a hardware PMU) and perf permissions",
            )
        };
        r.push("test record", Level::Fail, detail, fix);
    }
    let _ = fs::remove_file(&data);
    let _ = fs::remove_file(&log);
}

/// The `symbols` lines, one per class of frame: what will be named in the
/// main binary, in the shared libraries, and in the kernel, with the fix
/// when something will not be. Only the main binary can fail (with
/// `--require-symbols`); the others warn.
fn symbol_checks(r: &mut Report, opts: &TargetOpts, pid: u32) {
    let exe_path = fs::read_link(format!("/proc/{pid}/exe"))
        .map(|p| {
            p.to_string_lossy()
                .trim_end_matches(" (deleted)")
                .to_string()
        })
        .unwrap_or_default();
    check_main_binary_symbols(r, opts, pid, &exe_path);
    check_library_symbols(r, pid, &exe_path);
    check_kernel_symbols(r, opts);
    if let Some((ok, detail, fix)) = crate::jit::preflight(pid) {
        let level = if ok { Level::Ok } else { Level::Warn };
        r.push("jit", level, detail, fix);
    }
}

/// `symbols`, main binary: its own .symtab/.debug_info or separate debug
/// info; a failure with `--require-symbols`, a warning otherwise.
fn check_main_binary_symbols(r: &mut Report, opts: &TargetOpts, pid: u32, exe_path: &str) {
    let fail_level = if opts.require_symbols {
        Level::Fail
    } else {
        Level::Warn
    };
    match elf::inspect(&PathBuf::from(format!("/proc/{pid}/exe"))) {
        Ok(info) if info.symtab || info.debug_info => r.push(
            "symbols",
            Level::Ok,
            format!(
                "main binary: named (has{}{})",
                if info.symtab { " .symtab" } else { "" },
                if info.debug_info { " .debug_info" } else { "" }
            ),
            "",
        ),
        Ok(info) if has_debug_file(pid, exe_path, &info) => r.push(
            "symbols",
            Level::Ok,
            "main binary: named from its separate debug info".into(),
            "",
        ),
        Ok(_) => r.push(
            "symbols",
            fail_level,
            "main binary: stripped (no .symtab, no .debug_info, no separate debug info): \
             flamegraphs would show addresses"
                .into(),
            "profile an unstripped build (keep .symtab, e.g. -g1 or no `strip`), or install its debug info",
        ),
        Err(e) => r.push(
            "symbols",
            fail_level,
            format!("main binary: cannot read its sections: {e}"),
            "profile an unstripped ELF build of the worker",
        ),
    }
}

/// `symbols`, shared libraries: full symbols in the file or in separate
/// debug info, else only their exported (.dynsym) symbols (a warning).
fn check_library_symbols(r: &mut Report, pid: u32, exe_path: &str) {
    let maps = fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
    let mappings = symfs::executable_mappings(&maps);
    let mut without = Vec::new();
    let mut libs = 0;
    // Read as the worker, through its mappings (see `confine`): never a
    // FIFO or a file mounted over a library's path.
    let worker = sys::proc_stat(pid).and_then(|(_, t)| crate::confine::Worker::pin(pid, t).ok());
    for (path, (range, _)) in mappings.iter().filter(|(p, _)| **p != exe_path) {
        let Some(Ok((mut f, _))) = worker.as_ref().map(|w| w.open_mapped(range, path)) else {
            continue;
        };
        let Ok(info) = elf::inspect_file(&mut f) else {
            continue;
        };
        libs += 1;
        if !(info.symtab || info.debug_info || has_debug_file(pid, path, &info)) {
            without.push(path.rsplit('/').next().unwrap_or(path).to_string());
        }
    }
    if without.is_empty() {
        r.push(
            "symbols",
            Level::Ok,
            format!("shared libraries: all {libs} named (own symbols or separate debug info)"),
            "",
        );
    } else {
        r.push(
            "symbols",
            Level::Warn,
            format!(
                "shared libraries: {} of {libs} have neither symbols nor separate debug info, only \
                 their exported functions will be named: {}",
                without.len(),
                without.join(", ")
            ),
            "install their debug packages on the node (Debian: libc6-dbg, or the -dbgsym \
             packages; files under /usr/lib/debug/.build-id/) before the job",
        );
    }
}

/// `symbols`, kernel: /proc/kallsyms shows addresses (a warning when it
/// hides them), unless the event samples user space only.
fn check_kernel_symbols(r: &mut Report, opts: &TargetOpts) {
    let restrict = fs::read_to_string("/proc/sys/kernel/kptr_restrict")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "?".into());
    let head = read_head("/proc/kallsyms", 64 << 10);
    if opts.event.ends_with(":u") {
        r.push(
            "symbols",
            Level::Ok,
            format!(
                "kernel: event {} samples user space only, no kernel frames",
                opts.event
            ),
            "",
        );
    } else if symfs::kallsyms_has_addresses(&head) {
        r.push(
            "symbols",
            Level::Ok,
            format!("kernel: named (/proc/kallsyms shows addresses, kptr_restrict={restrict}; snapshotted with the capture)"),
            "",
        );
    } else {
        r.push(
            "symbols",
            Level::Warn,
            format!(
                "kernel: frames will be unnamed, /proc/kallsyms hides its addresses \
                 (kptr_restrict={restrict}, {})",
                if sys::euid() == 0 { "root" } else { "not root" }
            ),
            "run the sidecar as root, or lower kernel.kptr_restrict to 0 (sysctl -w kernel.kptr_restrict=0)",
        );
    }
}

/// Whether separate debug info for the file at `path` (as the worker sees
/// it) exists where perf looks for it.
fn has_debug_file(pid: u32, path: &str, info: &elf::ElfInfo) -> bool {
    symfs::debug_candidates(path, info.build_id.as_deref(), info.debuglink.as_deref())
        .iter()
        .any(|c| Path::new(&format!("/proc/{pid}/root{c}")).is_file())
}

/// The first `limit` bytes of a file (empty when it cannot be read).
fn read_head(path: &str, limit: u64) -> Vec<u8> {
    use std::io::Read;
    let mut buf = Vec::new();
    if let Ok(f) = fs::File::open(path) {
        let _ = f.take(limit).read_to_end(&mut buf);
    }
    buf
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(event: &str) -> TargetOpts {
        TargetOpts {
            pid: PidSource::Pid(std::process::id()),
            exe_name: None,
            event: event.into(),
            frequency: 99,
            require_symbols: false,
            off_cpu: false,
            staging: None,
            start_timeout: 1,
            call_graph: "fp".into(),
            explicit_user_regs: None,
        }
    }

    #[test]
    fn a_worker_that_exits_during_the_test_record_is_named_as_exited() {
        let staging = std::env::temp_dir().join(format!(
            "jobprof-preflight-exit-{}-{:x}",
            std::process::id(),
            sys::random_u64()
        ));
        fs::create_dir(&staging).unwrap();
        // A reaped child: its pid names no process any more.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        let mut r = Report::default();
        check_test_record(&mut r, &opts("cpu-clock"), pid, &staging);
        let c = &r.checks[0];
        assert_eq!(c.level, Level::Fail);
        assert!(
            c.detail.contains(&format!("the worker (pid {pid}) exited")),
            "{}",
            c.detail
        );
        assert!(!c.fix.contains("permissions"), "{}", c.fix);
        // A live worker with an event perf refuses is still the event's fault.
        let mut r = Report::default();
        let me = std::process::id();
        check_test_record(&mut r, &opts("no-such-event"), me, &staging);
        assert_eq!(r.checks[0].level, Level::Fail);
        assert!(
            r.checks[0].fix.contains("permissions"),
            "{}",
            r.checks[0].fix
        );
        assert!(!r.checks[0].detail.contains("exited"));
        fs::remove_dir(&staging).unwrap();
    }

    #[test]
    fn the_test_record_uses_the_captures_call_graph_and_registers() {
        let mut o = opts("cpu-clock");
        assert_eq!(record_options(&o), ["-g"]);
        o.call_graph = "dwarf,8192".into();
        let v = record_options(&o);
        assert_eq!(v[..2], ["--call-graph", "dwarf,8192"]);
        // The automatic aarch64 rule where this test runs on aarch64.
        let auto = std::env::consts::ARCH == "aarch64";
        assert_eq!(v.len() == 3, auto, "{v:?}");
        o.explicit_user_regs = Some("sp,pc".into());
        assert_eq!(record_options(&o)[2], "--user-regs=sp,pc");
        let mut r = Report::default();
        check_user_regs(&mut r, &o);
        assert!(r.checks[0]
            .detail
            .contains("--user-regs=sp,pc (given with --user-regs)"));
    }

    #[test]
    fn one_symbols_line_per_class_of_frame() {
        let mut r = Report::default();
        symbol_checks(&mut r, &opts("cpu-clock"), std::process::id());
        let lines: Vec<&Check> = r.checks.iter().filter(|c| c.name == "symbols").collect();
        assert_eq!(lines.len(), 3, "{:?}", r.checks);
        assert!(
            lines[0].detail.starts_with("main binary: named"),
            "{:?}",
            lines[0]
        );
        assert!(lines[1].detail.starts_with("shared libraries: "));
        assert!(lines[2].detail.starts_with("kernel: "));
        // The kernel line says what this process can see, with the fix.
        let live = fs::read("/proc/kallsyms").unwrap_or_default();
        if symfs::kallsyms_has_addresses(&live) {
            assert_eq!(lines[2].level, Level::Ok);
        } else {
            assert_eq!(lines[2].level, Level::Warn);
            assert!(lines[2].fix.contains("kptr_restrict"));
        }
        // Libraries without symbols are named, with the package fix.
        if lines[1].level == Level::Warn {
            assert!(lines[1].fix.contains("debug packages"));
        }
        let mut r = Report::default();
        symbol_checks(&mut r, &opts("cpu-clock:u"), std::process::id());
        assert!(r.checks[2].detail.contains("user space only"));
    }
}
