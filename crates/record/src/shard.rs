//! One shard: one `perf record` process for at most `--threads-per-shard`
//! threads of the worker, started disabled (`--delay=-1`) and driven through
//! a control FIFO pair (`--control fifo:CTL,ACK`): `ping`, `enable`,
//! `disable` and `stop`, each answered `ack`.
//!
//! Both FIFOs are opened read-write by us before perf starts, so neither
//! side ever blocks in `open` and a dead perf never gives us SIGPIPE; we
//! detect a dead perf by reaping it instead. This module knows nothing about
//! tokens or captures: it starts, commands, stops and reports one process.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::io::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use jobprof_capture_format::{DroppedTid, ShardPhase, ShardRow};

use crate::preflight::PERF;
use crate::sys;

/// How perf is to record (the same for every shard of a capture).
#[derive(Debug, Clone)]
pub struct RecordSpec {
    /// `-e`.
    pub event: String,
    /// `-F`.
    pub frequency: u32,
    /// `fp` or `dwarf[,SIZE]`.
    pub call_graph: String,
    /// `--user-regs` (`None`: perf's own mask), [`crate::regs`].
    pub user_regs: Option<String>,
    /// Seconds to wait for the ping answer of one attempt.
    pub ready_timeout: u64,
    /// `--max-size` in bytes: perf stops by itself when its file reaches it.
    pub max_size: Option<u64>,
    /// `--off-cpu`: also record `sched:sched_switch` and switch events.
    pub off_cpu: bool,
}

/// What perf prints when `--max-size` stopped it.
const SIZE_LIMIT_MESSAGE: &str = "size limit reached";

/// Attempts per shard before the capture gives up.
pub const ATTEMPTS: u32 = 3;

/// A running (or ended) perf process of one shard.
pub struct Shard {
    /// 0-based shard number.
    pub index: u32,
    /// The threads given to perf (`-t`).
    pub tids: Vec<u32>,
    /// The data file (absolute).
    pub data: PathBuf,
    /// perf's stdout+stderr log.
    pub log: PathBuf,
    child: Option<Child>,
    /// PID of the perf process.
    pub pid: u32,
    ctl: Option<File>,
    ack: Option<File>,
    ctl_path: PathBuf,
    ack_path: PathBuf,
    acks: Vec<u8>,
    /// Shell-convention exit status, once perf exited.
    pub status: Option<i32>,
    /// When we asked perf to stop (FIFO `stop`).
    pub stop_requested: Option<Instant>,
    sigint_sent: bool,
    term_sent: Option<Instant>,
    kill_sent: bool,
    /// perf exited before we asked it to stop.
    pub exited_early: bool,
    /// perf exited (status 0) because every thread it recorded exited.
    pub targets_gone: bool,
    /// When perf was found stopped by `--max-size` (ns since the epoch).
    pub size_limited: Option<u64>,
}

impl Shard {
    /// Starts perf for `tids` (dropping those that exited; they are added to
    /// `dropped`), up to [`ATTEMPTS`] times, and waits until it answers
    /// `ping`. `fifo_dir` holds the control FIFOs, `capture_dir` the data
    /// file and the log. `Ok(None)` when every thread exited before perf
    /// could attach (the shard is dropped, not failed); on failure returns
    /// the reason of the last attempt.
    #[allow(clippy::too_many_arguments)]
    pub fn start(
        spec: &RecordSpec,
        pid: u32,
        index: u32,
        tids: &[u32],
        data: PathBuf,
        log: PathBuf,
        fifo_dir: &Path,
        dropped: &mut Vec<DroppedTid>,
    ) -> Result<Option<Shard>, String> {
        let mut remaining: Vec<u32> = tids.to_vec();
        let mut last_error = String::new();
        for attempt in 1..=ATTEMPTS {
            remaining.retain(|&tid| {
                let alive = sys::tid_exists(pid, tid);
                if !alive {
                    dropped.push(DroppedTid {
                        shard: index,
                        attempt,
                        tid,
                        reason: "exited before attach".into(),
                    });
                }
                alive
            });
            if remaining.is_empty() {
                return Ok(None);
            }
            let mut shard = Shard {
                index,
                tids: remaining.clone(),
                data: data.clone(),
                log: log.clone(),
                child: None,
                pid: 0,
                ctl: None,
                ack: None,
                ctl_path: fifo_dir.join(format!("part{index:03}.ctl")),
                ack_path: fifo_dir.join(format!("part{index:03}.ack")),
                acks: Vec::new(),
                status: None,
                stop_requested: None,
                sigint_sent: false,
                term_sent: None,
                kill_sent: false,
                exited_early: false,
                targets_gone: false,
                size_limited: None,
            };
            match shard.spawn(spec, attempt) {
                Ok(()) => return Ok(Some(shard)),
                Err(e) => {
                    last_error = e;
                    shard.kill_now();
                }
            }
        }
        Err(format!(
            "shard {index} failed to attach after {ATTEMPTS} attempts: {last_error}"
        ))
    }

    fn spawn(&mut self, spec: &RecordSpec, attempt: u32) -> Result<(), String> {
        self.open_fifos()?;
        let _ = fs::remove_file(&self.data);
        let mut log = OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o644)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&self.log)
            .map_err(|e| format!("cannot write {}: {e}", self.log.display()))?;
        let mut cmd = self.perf_command(spec);
        let _ = writeln!(log, "# attempt {attempt}: {cmd:?}");
        cmd.stdin(Stdio::null())
            .stdout(log.try_clone().map_err(|e| e.to_string())?)
            .stderr(log)
            // Its own process group: a Ctrl-C meant for the sidecar must not
            // reach perf directly; the sidecar stops perf in order.
            .process_group(0);
        // If the sidecar itself is killed (SIGKILL, OOM), perf must not
        // record on forever: it gets SIGTERM, finalises its file and exits.
        // SAFETY: prctl is async-signal-safe; nothing else runs in the child.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                Ok(())
            });
        }
        let child = cmd
            .spawn()
            .map_err(|e| format!("cannot run `{PERF} record`: {e}"))?;
        self.pid = child.id();
        self.child = Some(child);
        self.command("ping", Duration::from_secs(spec.ready_timeout))
    }

    /// Creates the control FIFO pair anew and opens both ends read-write
    /// (see the module doc).
    fn open_fifos(&mut self) -> Result<(), String> {
        for p in [&self.ctl_path, &self.ack_path] {
            let _ = fs::remove_file(p);
            sys::mkfifo(p).map_err(|e| format!("cannot create FIFO {}: {e}", p.display()))?;
        }
        let open = |p: &Path| {
            OpenOptions::new()
                .read(true)
                .write(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(p)
                .map_err(|e| format!("cannot open FIFO {}: {e}", p.display()))
        };
        self.ctl = Some(open(&self.ctl_path)?);
        self.ack = Some(open(&self.ack_path)?);
        Ok(())
    }

    /// The `perf record` command line of this shard.
    fn perf_command(&self, spec: &RecordSpec) -> Command {
        let tids: Vec<String> = self.tids.iter().map(u32::to_string).collect();
        let mut cmd = Command::new(PERF);
        cmd.arg("record")
            // Start with events disabled; the FIFO switches them.
            .arg("--delay=-1")
            .arg(format!(
                "--control=fifo:{},{}",
                self.ctl_path.display(),
                self.ack_path.display()
            ))
            // Threads the worker creates during the query are covered too.
            .arg("--inherit")
            // Build ids from the mmap events instead of re-reading the whole
            // data file at exit, and no copying of DSOs into ~/.debug: symfs/
            // already holds them. Both keep `stop` fast.
            .arg("--buildid-all")
            .arg("--no-buildid-cache")
            .arg("-t")
            .arg(tids.join(","));
        crate::offcpu::event_args(&mut cmd, &spec.event, spec.frequency, spec.off_cpu);
        if spec.call_graph == "fp" {
            cmd.arg("-g");
        } else {
            cmd.arg("--call-graph").arg(&spec.call_graph);
        }
        if let Some(r) = &spec.user_regs {
            cmd.arg(format!("--user-regs={r}"));
        }
        if let Some(max) = spec.max_size {
            // perf wants a unit letter; B is bytes.
            cmd.arg(format!("--max-size={max}B"));
        }
        cmd.arg("-o").arg(&self.data);
        cmd
    }

    /// Sends a control command and waits for its `ack`.
    pub fn command(&mut self, cmd: &str, timeout: Duration) -> Result<(), String> {
        self.send(cmd)?;
        self.wait_ack(cmd, timeout)
    }

    /// Writes a control command without waiting for its answer (several
    /// shards are commanded first and their answers collected after).
    pub fn send(&mut self, cmd: &str) -> Result<(), String> {
        let ctl = self.ctl.as_mut().ok_or("control FIFO closed")?;
        ctl.write_all(format!("{cmd}\n").as_bytes())
            .map_err(|e| format!("cannot write `{cmd}` to {}: {e}", self.ctl_path.display()))
    }

    /// Waits for the `ack` of a command sent with [`Shard::send`].
    pub fn wait_ack(&mut self, cmd: &str, timeout: Duration) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        loop {
            // perf answers "ack\n" followed by a NUL byte.
            self.acks.retain(|&b| b != 0);
            if let Some(pos) = self.acks.windows(4).position(|w| w == b"ack\n") {
                self.acks.drain(..pos + 4);
                return Ok(());
            }
            if self.poll_exit() {
                return Err(format!(
                    "perf (pid {}) exited with {} before acknowledging `{cmd}`: {}",
                    self.pid,
                    sys::describe_status(self.status.unwrap_or(-1)),
                    self.log_tail()
                ));
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "perf (pid {}) did not acknowledge `{cmd}` within {} s: {}",
                    self.pid,
                    timeout.as_secs(),
                    self.log_tail()
                ));
            }
            let Some(ack) = self.ack.as_mut() else {
                return Err("ack FIFO closed".into());
            };
            if sys::poll_readable(ack.as_raw_fd(), 50) {
                let mut buf = [0u8; 256];
                if let Ok(n) = ack.read(&mut buf) {
                    self.acks.extend_from_slice(&buf[..n]);
                }
            }
        }
    }

    /// True when perf exited by itself with status 0 because every thread it
    /// was given has exited (marks the shard so); such a shard's data is
    /// complete and its end is not a failure.
    pub fn gone_with_its_threads(&mut self, pid: u32) -> bool {
        if self.poll_exit()
            && self.status == Some(0)
            && self.tids.iter().all(|&t| !sys::tid_exists(pid, t))
        {
            self.targets_gone = true;
        }
        self.targets_gone
    }

    /// The data file and log moved (their directory was renamed while perf
    /// holds them open): later reads use the new paths.
    pub fn moved(&mut self, data: PathBuf, log: PathBuf) {
        self.data = data;
        self.log = log;
    }

    /// True when perf exited cleanly because its data file reached
    /// `--max-size` (it says so in its log).
    pub fn hit_size_limit(&self) -> bool {
        self.status == Some(0)
            && fs::read_to_string(&self.log).is_ok_and(|l| l.contains(SIZE_LIMIT_MESSAGE))
    }

    /// The last lines perf wrote to its log.
    pub fn log_tail(&self) -> String {
        let t = sys::tail(&self.log, 3);
        if t.is_empty() {
            "(perf printed nothing)".into()
        } else {
            t
        }
    }

    /// Reaps perf if it exited; true once it has.
    pub fn poll_exit(&mut self) -> bool {
        if self.status.is_some() {
            return true;
        }
        let Some(child) = self.child.as_mut() else {
            return true;
        };
        match child.try_wait() {
            Ok(Some(st)) => {
                self.status = Some(sys::shell_status(st));
                if self.stop_requested.is_none() {
                    self.exited_early = true;
                }
                true
            }
            _ => false,
        }
    }

    /// Whether perf ended with an error or a signal the sidecar did not
    /// send (the stop watchdog's SIGTERM/SIGKILL are the sidecar's).
    pub fn failed_on_its_own(&self) -> bool {
        let by_watchdog = self.term_sent.is_some() || self.kill_sent;
        self.status.is_some_and(|st| st != 0 && st != 130) && !by_watchdog
    }

    /// Asks perf to stop: `disable` was sent before; now the FIFO `stop`.
    pub fn request_stop(&mut self) {
        if self.stop_requested.is_some() {
            return;
        }
        if !self.poll_exit() {
            let _ = self.send("stop");
        }
        self.stop_requested = Some(Instant::now());
    }

    /// Drives the stop escalation once: SIGINT when the FIFO `stop` was not
    /// obeyed within 5 s, SIGTERM after `stop_timeout`, SIGKILL 10 s after
    /// that. Returns true when perf has exited, and whether the watchdog
    /// (TERM/KILL) fired just now.
    pub fn drive_stop(&mut self, stop_timeout: Duration) -> (bool, bool) {
        if self.poll_exit() {
            return (true, false);
        }
        let Some(asked) = self.stop_requested else {
            return (false, false);
        };
        let waited = asked.elapsed();
        let mut fired = false;
        if !self.sigint_sent && waited >= Duration::from_secs(5).min(stop_timeout) {
            sys::kill(self.pid, libc::SIGINT);
            self.sigint_sent = true;
        }
        if self.term_sent.is_none() && waited >= stop_timeout {
            sys::kill(self.pid, libc::SIGTERM);
            self.term_sent = Some(Instant::now());
            fired = true;
        }
        if let Some(t) = self.term_sent {
            if !self.kill_sent && t.elapsed() >= Duration::from_secs(10) {
                sys::kill(self.pid, libc::SIGKILL);
                self.kill_sent = true;
                fired = true;
            }
        }
        (false, fired)
    }

    /// Kills perf at once (a failed attempt) and reaps it.
    fn kill_now(&mut self) {
        if let Some(child) = self.child.as_mut() {
            if self.status.is_none() {
                let _ = child.kill();
                if let Ok(st) = child.wait() {
                    self.status = Some(sys::shell_status(st));
                }
            }
        }
        self.close_fifos();
    }

    /// Closes and removes the control FIFOs (after perf exited).
    pub fn close_fifos(&mut self) {
        self.ctl = None;
        self.ack = None;
        let _ = fs::remove_file(&self.ctl_path);
        let _ = fs::remove_file(&self.ack_path);
    }

    /// The manifest row for this shard.
    pub fn row(&self, data_file: &str) -> ShardRow {
        let phase = if self.term_sent.is_some() || self.kill_sent {
            ShardPhase::Killed
        } else if self.size_limited.is_some() {
            ShardPhase::SizeLimit
        } else if self.exited_early {
            ShardPhase::Exited
        } else {
            ShardPhase::Stopped
        };
        ShardRow {
            shard: self.index,
            phase,
            perf_pid: self.pid,
            thread_count: self.tids.len() as u32,
            first_tid: self.tids.first().copied().unwrap_or(0),
            last_tid: self.tids.last().copied().unwrap_or(0),
            exit_status: self.status,
            data_file: data_file.to_string(),
            data_bytes: fs::metadata(&self.data).map(|m| m.len()).unwrap_or(0),
        }
    }
}

impl Drop for Shard {
    /// A shard is never left running: if the sidecar unwinds, perf is
    /// killed (its data file is then incomplete, and says so in the manifest).
    fn drop(&mut self) {
        if self.status.is_none() {
            self.kill_now();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shard_whose_threads_all_exited_is_dropped_not_failed() {
        let spec = RecordSpec {
            event: "cpu-clock".into(),
            frequency: 99,
            call_graph: "fp".into(),
            user_regs: None,
            ready_timeout: 1,
            max_size: None,
            off_cpu: false,
        };
        let dir = std::env::temp_dir();
        let mut dropped = Vec::new();
        // TIDs that cannot exist in this process: nothing is started.
        let gone = [u32::MAX - 7, u32::MAX - 3];
        let shard = Shard::start(
            &spec,
            std::process::id(),
            4,
            &gone,
            dir.join("never.data"),
            dir.join("never.log"),
            &dir,
            &mut dropped,
        );
        assert!(matches!(shard, Ok(None)));
        assert_eq!(dropped.len(), 2);
        assert!(dropped
            .iter()
            .all(|d| d.shard == 4 && d.attempt == 1 && d.reason == "exited before attach"));
        assert!(!dir.join("never.log").exists());
    }
}
