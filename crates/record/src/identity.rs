//! Who the sidecar of a worker is, and whether it is alive.
//!
//! A running sidecar holds a POSIX lock on `.perf_sidecar_lock_wN` for its
//! whole life (the kernel drops it when the process dies, SIGKILL included)
//! and writes its identity there: pid, host, boot id and the process's start
//! time. Its lifecycle tokens (`ready`, `error`, `done`) carry the same
//! identity on their first line. A driver trusts a lifecycle token only when
//! its identity is the lock's: tokens of a dead sidecar (a requeued job
//! reusing the token directory) are recognised as stale by who wrote them,
//! not by timing. [`probe`] tests the lock without taking it, so probing
//! never disturbs a sidecar that is starting.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::Path;

use crate::sys;
use crate::tokens::Tokens;

/// The identity of one sidecar process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SidecarId {
    /// Its pid.
    pub pid: u32,
    /// The host it runs on.
    pub host: String,
    /// The boot id of that host.
    pub boot_id: String,
    /// Its start time (clock ticks since boot, `/proc/PID/stat` field 22).
    pub start_time: u64,
}

impl SidecarId {
    /// This process.
    pub fn me() -> SidecarId {
        let pid = std::process::id();
        SidecarId {
            pid,
            host: sys::hostname(),
            boot_id: sys::boot_id().unwrap_or_else(|| "unknown".into()),
            start_time: sys::proc_stat(pid).map_or(0, |(_, t)| t),
        }
    }

    /// `sidecar pid=P host=H boot_id=B start_time=T`.
    pub fn line(&self) -> String {
        format!(
            "sidecar pid={} host={} boot_id={} start_time={}",
            self.pid, self.host, self.boot_id, self.start_time
        )
    }

    /// Parses [`SidecarId::line`]; `None` for anything else.
    pub fn parse(line: &str) -> Option<SidecarId> {
        let rest = line.trim().strip_prefix("sidecar ")?;
        let (mut pid, mut host, mut boot, mut start) = (None, None, None, None);
        for field in rest.split_whitespace() {
            let (k, v) = field.split_once('=')?;
            match k {
                "pid" => pid = v.parse().ok(),
                "host" => host = Some(v.to_string()),
                "boot_id" => boot = Some(v.to_string()),
                "start_time" => start = v.parse().ok(),
                _ => {}
            }
        }
        Some(SidecarId {
            pid: pid?,
            host: host?,
            boot_id: boot?,
            start_time: start?,
        })
    }

    /// `pid P on H`, for messages.
    pub fn short(&self) -> String {
        format!("pid {} on {}", self.pid, self.host)
    }

    /// On this host and boot: whether the process still runs. `None` when
    /// it ran on another host (or boot) and cannot be checked from here.
    pub fn alive_here(&self) -> Option<bool> {
        (self.host == sys::hostname() && Some(&self.boot_id) == sys::boot_id().as_ref())
            .then(|| sys::alive(self.pid, self.start_time))
    }
}

/// Writes a lifecycle token signed with `id`: the identity line, then `msg`.
pub fn write_signed(tokens: &Tokens, path: &Path, id: &SidecarId, msg: &str) -> io::Result<()> {
    tokens.write(path, &format!("{}\n{}", id.line(), msg.trim_end()))
}

/// A lifecycle token's signer and message; `None` when the token is missing
/// or unsigned (written by an older recorder, or by hand).
pub fn read_signed(path: &Path) -> Option<(SidecarId, String)> {
    let text = sys::read_nofollow(path).ok()?;
    let (first, rest) = text.split_once('\n').unwrap_or((&text, ""));
    Some((SidecarId::parse(first)?, rest.trim().to_string()))
}

fn open_lock(path: &Path, create: bool) -> io::Result<File> {
    let file = OpenOptions::new()
        .read(true)
        .write(create)
        .create(create)
        .truncate(false)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.file_type().is_file() {
        return Err(io::Error::other(format!(
            "{} is not a regular file",
            path.display()
        )));
    }
    if create && meta.uid() != sys::euid() {
        return Err(io::Error::other(format!(
            "{} belongs to uid {}, not to us (uid {}); remove it",
            path.display(),
            meta.uid(),
            sys::euid()
        )));
    }
    Ok(file)
}

/// The held per-worker lock of a running sidecar (released on drop or death).
pub struct Lock {
    _file: File,
}

/// Takes the per-worker lock and writes `id` into the lock file.
/// `Ok(None)` when another live process holds it.
pub fn take_lock(path: &Path, id: &SidecarId) -> io::Result<Option<Lock>> {
    let file = open_lock(path, true)?;
    if !sys::try_lock(&file) {
        return Ok(None);
    }
    file.set_len(0)?;
    file.write_all_at(format!("{}\n", id.line()).as_bytes(), 0)?;
    (&file).flush()?;
    Ok(Some(Lock { _file: file }))
}

/// What a driver can tell about the sidecar of a worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Probe {
    /// A sidecar holds the lock; its identity once it has written it.
    Alive(Option<SidecarId>),
    /// No process holds the lock (never started, exited, or killed); the
    /// identity of the last holder when known.
    Gone(Option<SidecarId>),
}

/// Tests the lock of `tokens` without taking it. A sidecar on this host is
/// checked by pid and start time instead, so a file system that cannot
/// report locks still gives the right answer there.
pub fn probe(tokens: &Tokens) -> Probe {
    let path = tokens.sidecar("lock");
    let Ok(file) = open_lock(&path, false) else {
        return Probe::Gone(None);
    };
    let mut text = String::new();
    let id = (&file)
        .read_to_string(&mut text)
        .ok()
        .and_then(|_| SidecarId::parse(text.lines().next().unwrap_or("")));
    // On the holder's own host the pid and start time decide (they name
    // the process exactly); elsewhere the lock does.
    match id.as_ref().and_then(SidecarId::alive_here) {
        Some(true) => return Probe::Alive(id),
        Some(false) => return Probe::Gone(id),
        None => {}
    }
    match sys::lock_holder(&file) {
        Ok(None) => Probe::Gone(id),
        // Held, or the file system cannot say: assume alive.
        _ => Probe::Alive(id),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn identity_lines_round_trip() {
        let me = SidecarId::me();
        assert_eq!(SidecarId::parse(&me.line()), Some(me.clone()));
        assert_eq!(me.alive_here(), Some(true));
        assert_eq!(SidecarId::parse("stale"), None);
        assert_eq!(SidecarId::parse("sidecar pid=1 host=h"), None);
        let other = SidecarId {
            host: "elsewhere".into(),
            ..me
        };
        assert_eq!(other.alive_here(), None);
    }

    #[test]
    fn the_lock_is_seen_held_and_free() {
        let dir = std::env::temp_dir().join(format!("identity-test-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let t = Tokens::new(&dir, 0);
        assert_eq!(probe(&t), Probe::Gone(None));
        let me = SidecarId::me();
        let lock = take_lock(&t.sidecar("lock"), &me).unwrap().unwrap();
        // Same host: the pid check says we are alive (POSIX locks are per
        // process, so F_GETLK would not see our own).
        assert_eq!(probe(&t), Probe::Alive(Some(me.clone())));
        drop(lock);
        // A dead holder: a pid that cannot exist.
        let dead = SidecarId {
            pid: u32::MAX - 1,
            ..me
        };
        drop(take_lock(&t.sidecar("lock"), &dead).unwrap().unwrap());
        assert_eq!(probe(&t), Probe::Gone(Some(dead)));
        fs::remove_dir_all(&dir).unwrap();
    }
}
