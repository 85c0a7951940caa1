//! Thin wrappers around the operating system: clocks, /proc, signals,
//! FIFOs, file locks, process exit statuses and directory copies. No policy
//! lives here.

use std::ffi::CString;
use std::fs;
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::ExitStatus;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Wall-clock time in nanoseconds since the Unix epoch.
pub fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// The node's host name.
pub fn hostname() -> String {
    fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

/// The node's boot id (`/proc/sys/kernel/random/boot_id`): changes at
/// every boot, so host + boot id say whether `/proc/kallsyms` is still the
/// table of the kernel that was sampled.
pub fn boot_id() -> Option<String> {
    fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// Effective uid of this process.
pub fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// State letter and start time (clock ticks since boot) of a process, from
/// `/proc/PID/stat`; `None` when it does not exist.
pub fn proc_stat(pid: u32) -> Option<(char, u64)> {
    let s = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may contain spaces and parentheses: fields start after
    // the last `)`.
    let rest = &s[s.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let state = fields.first()?.chars().next()?;
    let start = fields.get(19)?.parse().ok()?;
    Some((state, start))
}

/// True while the process that had start time `start` is alive (not gone,
/// not a zombie, not replaced by a new process with the same PID).
pub fn alive(pid: u32, start: u64) -> bool {
    matches!(proc_stat(pid), Some((state, s)) if s == start && state != 'Z' && state != 'X')
}

/// Owner uid of a process.
pub fn proc_uid(pid: u32) -> Option<u32> {
    fs::metadata(format!("/proc/{pid}")).ok().map(|m| m.uid())
}

/// The thread ids of a process, sorted numerically.
pub fn list_tids(pid: u32) -> io::Result<Vec<u32>> {
    let mut tids: Vec<u32> = fs::read_dir(format!("/proc/{pid}/task"))?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    tids.sort_unstable();
    Ok(tids)
}

/// True while thread `tid` of process `pid` exists.
pub fn tid_exists(pid: u32, tid: u32) -> bool {
    Path::new(&format!("/proc/{pid}/task/{tid}")).exists()
}

/// An exit status in shell convention: the code, or 128 + signal number.
pub fn shell_status(status: ExitStatus) -> i32 {
    status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
}

/// Describes a shell-convention exit status for messages.
pub fn describe_status(code: i32) -> String {
    let name = match code - 128 {
        1 => "SIGHUP",
        2 => "SIGINT",
        6 => "SIGABRT",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        13 => "SIGPIPE",
        15 => "SIGTERM",
        _ => "",
    };
    if code > 128 && !name.is_empty() {
        format!("status {code} (killed by {name})")
    } else {
        format!("status {code}")
    }
}

/// Sends `sig` to `pid`; a vanished process is not an error.
pub fn kill(pid: u32, sig: i32) {
    // SAFETY: kill has no memory-safety preconditions.
    unsafe {
        libc::kill(pid as libc::pid_t, sig);
    }
}

/// Creates a FIFO at `path` (mode 0600).
pub fn mkfifo(path: &Path) -> io::Result<()> {
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in path"))?;
    // SAFETY: `c` is a valid NUL-terminated string.
    if unsafe { libc::mkfifo(c.as_ptr(), 0o600) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Waits up to `timeout_ms` for `fd` to become readable; true when it is.
pub fn poll_readable(fd: i32, timeout_ms: i32) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    let n = unsafe { libc::poll(&mut p, 1, timeout_ms) };
    n > 0 && p.revents & libc::POLLIN != 0
}

fn whole_file_lock(kind: i32) -> libc::flock {
    // SAFETY: an all-zero flock is a valid value; the fields are set below.
    let mut l: libc::flock = unsafe { std::mem::zeroed() };
    l.l_type = kind as libc::c_short;
    l.l_whence = libc::SEEK_SET as libc::c_short;
    l
}

/// Tries to take an exclusive POSIX record lock (`fcntl(F_SETLK)`) on the
/// whole of an open file without waiting. The kernel drops it when the
/// process dies; other processes can test it without taking it
/// ([`lock_holder`]), so a driver probing for a live sidecar never races
/// a sidecar that is starting.
///
/// Why not std's `File::try_lock` (the recorder's only lock, kept on
/// `fcntl` on purpose): std locks with `flock(2)`, which has no way to
/// test a lock without taking it and does not say who holds it, while
/// `F_GETLK` does both ([`lock_holder`]: the driver's probe must neither
/// take the lock from a sidecar that is starting nor miss the holder's
/// pid). `fcntl` locks also work across the hosts of NFS and Lustre token
/// directories, where `flock` is emulated per host or not at all. Their
/// one trap, being dropped when *any* descriptor of the file is closed by
/// the process, does not bite: the lock file is opened once, by
/// `identity::take_lock`, and kept open for the sidecar's life.
pub fn try_lock(file: &fs::File) -> bool {
    use std::os::unix::io::AsRawFd;
    let l = whole_file_lock(libc::F_WRLCK);
    // SAFETY: the fd is valid for the lifetime of `file`; `l` is a valid flock.
    unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETLK, &l) == 0 }
}

/// Whether someone holds a lock on `file` (`fcntl(F_GETLK)`, which takes
/// nothing): `Ok(Some(pid))` when it is held (the pid is 0 or meaningless
/// when the holder runs on another host of a network file system),
/// `Ok(None)` when nobody holds it, `Err` when the file system cannot say.
pub fn lock_holder(file: &fs::File) -> io::Result<Option<i32>> {
    use std::os::unix::io::AsRawFd;
    let mut l = whole_file_lock(libc::F_WRLCK);
    // SAFETY: the fd is valid for the lifetime of `file`; `l` is a valid flock.
    if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GETLK, &mut l) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((l.l_type != libc::F_UNLCK as libc::c_short).then_some(l.l_pid))
}

/// 64 random bits from the kernel (`getrandom`), for unguessable temporary
/// names; falls back to time and pid mixed when the call fails.
pub fn random_u64() -> u64 {
    let mut buf = [0u8; 8];
    // SAFETY: `buf` is valid for 8 bytes of writes.
    let n = unsafe { libc::getrandom(buf.as_mut_ptr().cast(), buf.len(), 0) };
    if n == 8 {
        u64::from_ne_bytes(buf)
    } else {
        now_ns() ^ (u64::from(std::process::id()) << 32)
    }
}

/// Creates a new file at `path` for writing with `O_CREAT | O_EXCL |
/// O_NOFOLLOW` and `mode`: it fails when anything (a file, a planted
/// symlink) is already there, so it never writes through someone else's
/// link.
pub fn create_new(path: &Path, mode: u32) -> io::Result<fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
}

/// Reads a small text file without following a symlink at `path` (tokens
/// live in directories other users may write to: a planted link must not
/// make us read, and print, a file it points to).
pub fn read_nofollow(path: &Path) -> io::Result<String> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut s = String::new();
    fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)?
        .read_to_string(&mut s)?;
    Ok(s)
}

/// Reads a small text file the user named (links followed), opened with
/// `O_NONBLOCK` and checked with `fstat`: a FIFO, device or directory is an
/// error of kind `InvalidInput` saying what it is, never a wait.
pub fn read_regular(path: &Path) -> io::Result<String> {
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let mut f = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    let t = f.metadata()?.file_type();
    if !t.is_file() {
        let what = if t.is_fifo() {
            "a FIFO"
        } else if t.is_dir() {
            "a directory"
        } else if t.is_char_device() || t.is_block_device() {
            "a device"
        } else {
            "a special file"
        };
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("is {what}, not a regular file"),
        ));
    }
    let mut s = String::new();
    f.read_to_string(&mut s)?;
    Ok(s)
}

/// Creates the new file `dst` ([`create_new`]), lets `fill` write it and
/// flushes it to disk. When writing fails (a full disk), the half-written
/// file is removed: nothing partial is left to be published. A `dst` that
/// already existed is never touched.
pub fn write_new(
    dst: &Path,
    mode: u32,
    fill: impl FnOnce(&mut fs::File) -> io::Result<u64>,
) -> io::Result<u64> {
    let mut to = create_new(dst, mode)?;
    let written = fill(&mut to).and_then(|n| to.sync_all().map(|()| n));
    if written.is_err() {
        let _ = fs::remove_file(dst);
    }
    written
}

/// Copies the regular file `src` to the new file `dst` ([`write_new`], the
/// mode of `src`).
pub fn copy_new(src: &Path, dst: &Path) -> io::Result<u64> {
    let mut from = fs::File::open(src)?;
    let mode = from.metadata()?.mode() & 0o777;
    write_new(dst, mode, |to| io::copy(&mut from, to))
}

/// Creates the directory `dir` and any missing parents (mode 0700 for new
/// ones), refusing to pass through a symlink: every existing component
/// below `base` must be a real directory. `dir` must lie below `base`.
pub fn create_dirs_nofollow(base: &Path, dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    let rel = dir.strip_prefix(base).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} is not below {}", dir.display(), base.display()),
        )
    })?;
    let mut cur = base.to_path_buf();
    for part in rel.components() {
        cur.push(part);
        match fs::symlink_metadata(&cur) {
            Ok(m) if m.file_type().is_dir() => continue,
            Ok(_) => {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    format!(
                        "{} exists and is not a directory (a symlink?)",
                        cur.display()
                    ),
                ))
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                fs::DirBuilder::new().mode(0o700).create(&cur)?
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Raises the soft open-files limit to the hard limit; returns (soft, hard)
/// after the change.
pub fn raise_nofile() -> (u64, u64) {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: valid pointer to an rlimit.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut r);
        if r.rlim_cur < r.rlim_max {
            let want = libc::rlimit {
                rlim_cur: r.rlim_max,
                rlim_max: r.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &want) == 0 {
                r = want;
            }
        }
    }
    (r.rlim_cur, r.rlim_max)
}

static SIGNAL: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    SIGNAL.store(sig, Ordering::SeqCst);
}

/// Catches SIGTERM and SIGINT: they only set a flag the sidecar polls
/// ([`pending_signal`]), so it can stop perf and publish before exiting.
pub fn catch_termination() {
    // SAFETY: the handler only stores into an atomic (async-signal-safe).
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(libc::SIGTERM, &sa, std::ptr::null_mut());
        libc::sigaction(libc::SIGINT, &sa, std::ptr::null_mut());
    }
}

/// The SIGTERM or SIGINT received, if any.
pub fn pending_signal() -> Option<i32> {
    match SIGNAL.load(Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}

/// Name of a termination signal for messages.
pub fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGTERM => "SIGTERM",
        libc::SIGINT => "SIGINT",
        _ => "a signal",
    }
}

/// The last `lines` non-empty lines of a text file, joined with ` | `.
pub fn tail(path: &Path, lines: usize) -> String {
    let mut f = match fs::File::open(path) {
        Ok(f) => f,
        Err(_) => return String::new(),
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let _ = f.seek(SeekFrom::Start(len.saturating_sub(8192)));
    let mut buf = Vec::new();
    let _ = f.read_to_end(&mut buf);
    let text = String::from_utf8_lossy(&buf);
    let kept: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    kept[kept.len().saturating_sub(lines)..].join(" | ")
}

/// Copies the directory tree `src` to `dst` (which must not exist), hard
/// linking files where the filesystem allows and copying otherwise, and
/// flushing every copied file to disk. Skips FIFOs and other special files.
/// Nothing is ever written through a symlink at the destination: `dst` is
/// created new and files are created with `O_EXCL | O_NOFOLLOW`.
pub fn copy_tree(src: &Path, dst: &Path) -> io::Result<()> {
    fs::create_dir(dst)?;
    for entry in fs::read_dir(src)? {
        let entry = entry?;
        let from = entry.path();
        let to = dst.join(entry.file_name());
        let ft = entry.file_type()?;
        if ft.is_dir() {
            copy_tree(&from, &to)?;
        } else if ft.is_file() {
            // Both fail on anything already at `to`: never written through.
            if fs::hard_link(&from, &to).is_err() {
                copy_new(&from, &to)?;
            }
        } else if ft.is_symlink() {
            std::os::unix::fs::symlink(fs::read_link(&from)?, &to)?;
        }
    }
    fs::File::open(dst)?.sync_all()?;
    Ok(())
}

/// Fsyncs a directory so that renames inside it are durable.
pub fn sync_dir(dir: &Path) {
    if let Ok(f) = fs::File::open(dir) {
        let _ = f.sync_all();
    }
}

/// The open-files soft limit of this process (inherited by perf).
pub fn nofile_soft() -> u64 {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: valid pointer to an rlimit.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut r);
    }
    r.rlim_cur
}

/// Clock ticks per second (`_SC_CLK_TCK`), the unit of start times in /proc.
fn clock_ticks() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as u64
    } else {
        100
    }
}

/// Now, in clock ticks since boot: comparable with [`tid_start_ticks`].
pub fn boot_ticks() -> u64 {
    // SAFETY: an all-zero timespec is valid; clock_gettime fills it.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer to a timespec.
    unsafe {
        libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts);
    }
    let ns = ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64;
    ns / (1_000_000_000 / clock_ticks())
}

/// When thread `tid` of `pid` was created (clock ticks since boot, as
/// [`boot_ticks`]); `None` when it no longer exists.
pub fn tid_start_ticks(pid: u32, tid: u32) -> Option<u64> {
    let s = fs::read_to_string(format!("/proc/{pid}/task/{tid}/stat")).ok()?;
    let rest = &s[s.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Wakes the caller when a file is created in or renamed into a directory
/// (inotify), so that a token written by a driver on this node is seen at
/// once instead of at the next poll. Writers on other nodes (a shared
/// file system) are not seen by inotify: callers still poll.
pub struct DirWatch {
    fd: i32,
}

impl DirWatch {
    /// Watches `dir`; `None` when inotify is not available.
    pub fn new(dir: &Path) -> Option<DirWatch> {
        let c = CString::new(dir.as_os_str().as_bytes()).ok()?;
        // SAFETY: plain syscalls on a valid NUL-terminated path.
        unsafe {
            let fd = libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC);
            if fd < 0 {
                return None;
            }
            let mask = libc::IN_CREATE | libc::IN_MOVED_TO | libc::IN_CLOSE_WRITE;
            if libc::inotify_add_watch(fd, c.as_ptr(), mask) < 0 {
                libc::close(fd);
                return None;
            }
            Some(DirWatch { fd })
        }
    }

    /// Waits up to `timeout_ms` for a change, then drains the events.
    pub fn wait(&self, timeout_ms: i32) {
        self.wait_for(timeout_ms, &|_| true);
    }

    /// Waits up to `timeout_ms` for a change to an entry whose name is
    /// `wanted` (or for lost events: the queue overflowed); changes to
    /// other entries (the caller's own writes) are drained and waited past.
    pub fn wait_for(&self, timeout_ms: i32, wanted: &dyn Fn(&[u8]) -> bool) {
        let deadline = Instant::now() + Duration::from_millis(timeout_ms.max(0) as u64);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if !poll_readable(self.fd, left.as_millis() as i32) || self.drain(wanted) {
                return;
            }
            if left.is_zero() {
                return;
            }
        }
    }

    /// Reads every pending event; whether one names a `wanted` entry or
    /// says events were lost.
    fn drain(&self, wanted: &dyn Fn(&[u8]) -> bool) -> bool {
        // struct inotify_event: wd, mask, cookie, len (4 bytes each), then
        // `len` bytes of NUL-padded name; a read returns whole events.
        const HEAD: usize = 16;
        let mut buf = [0u8; 4096];
        let mut hit = false;
        loop {
            // SAFETY: reading into a buffer of the given size.
            let n = unsafe { libc::read(self.fd, buf.as_mut_ptr().cast(), buf.len()) };
            if n <= 0 {
                return hit;
            }
            let events = &buf[..n as usize];
            let mut at = 0;
            while at + HEAD <= events.len() {
                let word = |i: usize| {
                    u32::from_ne_bytes(events[at + i..at + i + 4].try_into().expect("4 bytes"))
                };
                let (mask, len) = (word(4), word(12) as usize);
                let end = (at + HEAD + len).min(events.len());
                let name = &events[at + HEAD..end];
                let name = &name[..name.iter().position(|&b| b == 0).unwrap_or(name.len())];
                hit |= mask & libc::IN_Q_OVERFLOW != 0 || wanted(name);
                at = end;
            }
        }
    }
}

impl Drop for DirWatch {
    fn drop(&mut self) {
        // SAFETY: we own the descriptor.
        unsafe {
            libc::close(self.fd);
        }
    }
}

/// The number of online CPUs (`/sys/devices/system/cpu/online`); 1 when
/// unreadable.
pub fn online_cpus() -> usize {
    fs::read_to_string("/sys/devices/system/cpu/online")
        .map(|s| count_cpu_list(&s))
        .unwrap_or(1)
        .max(1)
}

/// The number of CPUs in a kernel CPU list such as `0-63,128-191` or `0`.
fn count_cpu_list(list: &str) -> usize {
    list.trim()
        .split(',')
        .filter_map(|r| match r.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (a.parse::<usize>().ok()?, b.parse::<usize>().ok()?);
                b.checked_sub(a).map(|d| d + 1)
            }
            None => r.parse::<usize>().ok().map(|_| 1),
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::{count_cpu_list, write_new, DirWatch};
    use std::fs;
    use std::io::{self, Write};
    use std::time::{Duration, Instant};

    #[test]
    fn a_write_that_fails_leaves_no_half_file_and_never_touches_what_was_there() {
        let dir = std::env::temp_dir().join(format!("jobprof-write-new-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir(&dir).unwrap();
        let dst = dir.join("libx.so");
        let full = write_new(&dst, 0o644, |f| {
            f.write_all(b"half an ELF")?;
            Err(io::Error::from_raw_os_error(28)) // ENOSPC
        });
        assert_eq!(full.unwrap_err().raw_os_error(), Some(28));
        assert!(fs::symlink_metadata(&dst).is_err(), "the half file is gone");
        // Someone else's link at the destination: refused, left alone.
        std::os::unix::fs::symlink("/etc/passwd", &dst).unwrap();
        assert!(write_new(&dst, 0o644, |_| Ok(0)).is_err());
        assert!(fs::symlink_metadata(&dst).unwrap().file_type().is_symlink());
        assert_eq!(
            write_new(&dir.join("ok"), 0o644, |f| f.write_all(b"abc").map(|()| 3)).unwrap(),
            3
        );
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn cpu_lists_are_counted() {
        assert_eq!(count_cpu_list("0-1\n"), 2);
        assert_eq!(count_cpu_list("0"), 1);
        assert_eq!(count_cpu_list("0-63,128-191"), 128);
        assert_eq!(count_cpu_list("0,2,4-5"), 4);
        assert_eq!(count_cpu_list(""), 0);
        assert_eq!(count_cpu_list("5-3"), 0);
    }

    #[test]
    fn a_watch_waits_past_the_changes_it_does_not_want() {
        let dir = std::env::temp_dir().join(format!("jobprof-watch-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir(&dir).unwrap();
        let w = DirWatch::new(&dir).unwrap();
        let wanted = |n: &[u8]| n.starts_with(b"req");
        // Our own writes: drained, waited past, up to the time limit.
        fs::write(dir.join("own"), "x").unwrap();
        fs::rename(dir.join("own"), dir.join("own2")).unwrap();
        let t = Instant::now();
        w.wait_for(300, &wanted);
        assert!(
            t.elapsed() >= Duration::from_millis(290),
            "{:?}",
            t.elapsed()
        );
        // A request: at once.
        fs::write(dir.join("own3"), "x").unwrap();
        fs::write(dir.join("req1"), "x").unwrap();
        let t = Instant::now();
        w.wait_for(5000, &wanted);
        assert!(
            t.elapsed() < Duration::from_millis(1000),
            "{:?}",
            t.elapsed()
        );
        fs::remove_dir_all(&dir).unwrap();
    }
}
