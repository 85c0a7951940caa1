//! The benchmark driver's side of the handshake: `start`, `stop`,
//! `shutdown` and `wait-ready`. Each writes (at most) one token and polls
//! (every 0.1 s) for the sidecar's answer; `start` and `stop` also watch
//! the token directory (inotify), so an answer written on this node is
//! seen at once. It fails early with the
//! sidecar's own message when an error token appears, fast (exit 4) when no
//! live sidecar holds the worker's lock for [`GRACE`], and with a timeout
//! message that says what was awaited and where otherwise.
//!
//! Lifecycle tokens (`ready`, `error`, `done`) count only when they are
//! signed by the sidecar that holds (or last held) the lock: those of a
//! dead sidecar, e.g. of the first run of a requeued job, are stale.
//!
//! While the sidecar attaches shards (arming before `ready`, or attaching
//! at `start`), each shard it attaches gives the wait for `ready` or
//! `started` its whole `--timeout` again ([`Deadline`]): a slow attach that
//! progresses never fails the driver, a stuck one fails it after
//! `--timeout`.

use std::path::Path;
use std::thread::sleep;
use std::time::{Duration, Instant};

use crate::capture::ATTACHING;
use crate::cli::{DriverOpts, ShutdownOpts, WaitOpts};
use crate::fail::Fail;
use crate::identity::{self, read_signed, Probe, SidecarId};
use crate::sys;
use crate::tokens::{Tokens, INVALID_PREFIX};

const POLL: Duration = Duration::from_millis(100);

/// Looks for an answer token this many times per [`POLL`].
const QUICK_PER_POLL: u32 = 10;

/// How long no sidecar may hold the lock before a command gives up (exit 4):
/// long enough for a sidecar that is being launched to take it.
pub const GRACE: Duration = Duration::from_secs(5);

fn io_fail(what: &str, path: &Path, e: std::io::Error) -> Fail {
    Fail::failed(format!("cannot {what} {}: {e}", path.display()))
}

/// What is known about a worker's sidecar right now.
enum Sidecar {
    /// Alive and serving.
    Ready,
    /// Alive, its `ready` not written yet (a fresh sidecar, or a stale token).
    Starting,
    /// It reported an error (the message).
    Error(String),
    /// It shut down (the `done` message).
    Done(String),
    /// No process holds the lock; why, for the message.
    Dead(String),
}

fn signed(t: &Tokens, kind: &str, id: &SidecarId) -> Option<String> {
    read_signed(&t.sidecar(kind)).and_then(|(who, msg)| (&who == id).then_some(msg))
}

fn look(t: &Tokens) -> Sidecar {
    let (alive, id) = match identity::probe(t) {
        Probe::Alive(id) => (true, id),
        Probe::Gone(id) => (false, id),
    };
    if let Some(id) = &id {
        if let Some(msg) = signed(t, "error", id) {
            return Sidecar::Error(msg);
        }
        if let Some(msg) = signed(t, "done", id) {
            return Sidecar::Done(msg);
        }
        if alive && signed(t, "ready", id).is_some() {
            return Sidecar::Ready;
        }
    }
    if alive {
        return Sidecar::Starting;
    }
    let lock = t.sidecar("lock");
    Sidecar::Dead(match id {
        None => format!(
            "no sidecar is running for worker {} in {} ({} is not held); start \
             `jobprof-record sidecar --token-dir {} --worker {}` first",
            t.worker,
            t.dir.display(),
            lock.display(),
            t.dir.display(),
            t.worker
        ),
        Some(id) => {
            let staging = read_signed(&t.sidecar("ready"))
                .filter(|(who, _)| who == &id)
                .and_then(|(_, m)| {
                    m.split_whitespace()
                        .find_map(|w| w.strip_prefix("staging=").map(String::from))
                });
            format!(
                "the sidecar of worker {} ({}) is no longer running and wrote no `done` \
                 (killed?); captures it had not published stay in {}",
                t.worker,
                id.short(),
                staging.unwrap_or_else(|| "its staging directory".into())
            )
        }
    })
}

/// When a wait gives up: `timeout` after it began, or after the sidecar
/// last said it attached a shard (its signed `attaching` token changed),
/// whichever is later.
struct Deadline {
    at: Instant,
    timeout: Duration,
    /// The `attaching` token as last seen (`None`: none, or not signed by
    /// a live sidecar).
    seen: Option<String>,
    /// Whether it ever changed while we waited.
    moved: bool,
}

impl Deadline {
    fn new(t: &Tokens, timeout: u64) -> Deadline {
        let timeout = Duration::from_secs(timeout);
        Deadline {
            at: Instant::now() + timeout,
            timeout,
            seen: attaching(t),
            moved: false,
        }
    }

    /// Whether the wait is over; a new `attaching` message first moves the
    /// deadline to `timeout` from now.
    fn passed(&mut self, t: &Tokens) -> bool {
        let now = attaching(t);
        if now.is_some() && now != self.seen {
            self.at = self.at.max(Instant::now() + self.timeout);
            self.seen = now;
            self.moved = true;
        }
        Instant::now() >= self.at
    }

    /// For the timeout message: how far attaching got, when it moved.
    fn progress(&self) -> String {
        match (&self.seen, self.moved) {
            (Some(m), true) => format!(
                "; the sidecar was attaching shards ({m}) but attached none for {} s",
                self.timeout.as_secs()
            ),
            _ => String::new(),
        }
    }
}

/// The sidecar's `attaching` message, when signed by a sidecar that may be
/// alive (one on another host cannot be checked from here).
fn attaching(t: &Tokens) -> Option<String> {
    let (who, msg) = read_signed(&t.sidecar(ATTACHING))?;
    (who.alive_here() != Some(false)).then_some(msg)
}

/// Fails once the sidecar has been dead for [`GRACE`].
struct DeadClock(Option<Instant>);

impl DeadClock {
    fn check(&mut self, s: &Sidecar) -> Result<(), Fail> {
        match s {
            Sidecar::Dead(why) => {
                let since = *self.0.get_or_insert_with(Instant::now);
                if since.elapsed() >= GRACE {
                    return Err(Fail::no_sidecar(why.clone()));
                }
            }
            _ => self.0 = None,
        }
        Ok(())
    }
}

fn sidecar_error(worker: u32, msg: &str) -> Fail {
    Fail::failed(format!("sidecar of worker {worker}: {msg}"))
}

/// `start` and `stop`.
pub fn run(opts: DriverOpts) -> Result<(), Fail> {
    let t = Tokens::of(opts.tool, &opts.token_dir, opts.worker);
    let q = &opts.query;
    let mut deadline = Deadline::new(&t, opts.timeout);
    if opts.start {
        // Tokens of an earlier run of this query must not answer for this one.
        t.clear_query(q)
            .map_err(|e| io_fail("clear stale tokens in", &opts.token_dir, e))?;
        wait_ready(&t, &mut deadline, opts.timeout, &format!("start {q}"), true)?;
        let start = t.query("start", q);
        t.write(&start, "")
            .map_err(|e| io_fail("write", &start, e))?;
        wait(&t, q, "started", &mut deadline, opts.timeout)
    } else {
        // A sidecar that has shut down answers nothing: its old per-query
        // tokens (an error for a reused id, a `finished`) must not be taken
        // for an answer to this `stop` (exit 4, as for `start`).
        if let Sidecar::Done(_) = look(&t) {
            return Err(Fail::no_sidecar(format!(
                "stop {q}: the sidecar of worker {} has already shut down ({} exists); \
                 nothing is being captured",
                t.worker,
                t.sidecar("done").display()
            )));
        }
        let stop = t.query("stop", q);
        let _ = Tokens::remove(&t.query("finished", q));
        if let Some(msg) = Tokens::message(&t.query("error", q)) {
            return Err(query_error(q, &msg));
        }
        t.write(&stop, "").map_err(|e| io_fail("write", &stop, e))?;
        wait(&t, q, "finished", &mut deadline, opts.timeout)?;
        let finished = Tokens::message(&t.query("finished", q)).unwrap_or_default();
        if finished.contains("valid=false") {
            let reason = finished
                .lines()
                .find_map(|l| l.strip_prefix("reason: "))
                .unwrap_or("see capture.json");
            return Err(Fail::invalid(format!(
                "query {q}: the capture is invalid: {reason} (its data is kept, marked invalid)"
            )));
        }
        if let Some(note) = finished
            .lines()
            .find_map(|l| l.strip_prefix("not published: "))
        {
            eprintln!(
                "jobprof-record stop: warning: query {q} is not published yet: {note}; \
                 the sidecar retries at shutdown"
            );
        }
        Ok(())
    }
}

/// A per-query error token as a failure: exit 5 when it says the capture
/// ended invalid, 1 otherwise.
fn query_error(q: &str, msg: &str) -> Fail {
    let text = format!("query {q}: {msg}");
    if msg.starts_with(INVALID_PREFIX) {
        Fail::invalid(text)
    } else {
        Fail::failed(text)
    }
}

/// Waits until a live sidecar has written its own `ready`. With
/// `fail_dead`, fails (exit 4) once no sidecar held the lock for [`GRACE`];
/// otherwise only once one that was seen alive is gone.
fn wait_ready(
    t: &Tokens,
    deadline: &mut Deadline,
    timeout: u64,
    what: &str,
    fail_dead: bool,
) -> Result<(), Fail> {
    let mut dead = DeadClock(None);
    let mut seen_alive = false;
    loop {
        let s = look(t);
        match &s {
            Sidecar::Ready => return Ok(()),
            Sidecar::Error(msg) => return Err(sidecar_error(t.worker, msg)),
            Sidecar::Done(_) => {
                return Err(Fail::no_sidecar(format!(
                    "{what}: the sidecar of worker {} has already shut down ({} exists)",
                    t.worker,
                    t.sidecar("done").display()
                )))
            }
            Sidecar::Starting => seen_alive = true,
            Sidecar::Dead(_) => {}
        }
        if fail_dead || seen_alive {
            dead.check(&s)?;
        }
        if deadline.passed(t) {
            return Err(Fail::timeout(format!(
                "{what}: the sidecar of worker {} was not ready within {timeout} s (no `ready` \
                 token of a live sidecar in {}{}); is `jobprof-record sidecar` running with \
                 --token-dir {}?",
                t.worker,
                t.dir.display(),
                deadline.progress(),
                t.dir.display()
            )));
        }
        sleep(POLL);
    }
}

/// Waits for the per-query token `kind`, failing on error tokens and when
/// the sidecar is gone.
fn wait(
    t: &Tokens,
    q: &str,
    kind: &str,
    deadline: &mut Deadline,
    timeout: u64,
) -> Result<(), Fail> {
    let want = t.query(kind, q);
    let mut dead = DeadClock(None);
    let mut quick = 0;
    // Watched before the first look, so that an answer written on this
    // node wakes us at once (no wake-up is lost between look and wait).
    let watch = sys::DirWatch::new(&t.dir);
    loop {
        // An error outranks the answer: e.g. a capture cut by --max-capture
        // is `finished` but not what the driver asked for.
        if let Some(msg) = Tokens::message(&t.query("error", q)) {
            return Err(query_error(q, &msg));
        }
        if Tokens::exists(&want) {
            return Ok(());
        }
        // The answer is looked for as soon as a token is written on this
        // node (inotify), at least every 10 ms (`start` of an armed capture
        // takes milliseconds; a token written on another node through a
        // shared file system wakes no watch); the sidecar's liveness every
        // 100 ms.
        if quick < QUICK_PER_POLL {
            quick += 1;
            let step = POLL / QUICK_PER_POLL;
            match &watch {
                Some(w) => w.wait(step.as_millis() as i32),
                None => sleep(step),
            }
            continue;
        }
        quick = 0;
        let s = look(t);
        match &s {
            Sidecar::Error(msg) => return Err(sidecar_error(t.worker, msg)),
            Sidecar::Done(_) => {
                return Err(Fail::no_sidecar(format!(
                    "query {q}: the sidecar of worker {} shut down before answering `{kind}`",
                    t.worker
                )))
            }
            Sidecar::Dead(why) => {
                if let Err(mut e) = dead.check(&s) {
                    e.message = format!("query {q}: no `{kind}`: {why}");
                    return Err(e);
                }
            }
            Sidecar::Ready | Sidecar::Starting => dead.0 = None,
        }
        if deadline.passed(t) {
            return Err(Fail::timeout(format!(
                "query {q}: no `{kind}` from the sidecar of worker {} within {timeout} s ({} never \
                 appeared{})",
                t.worker,
                want.display(),
                deadline.progress()
            )));
        }
    }
}

/// `shutdown`.
pub fn shutdown(opts: ShutdownOpts) -> Result<(), Fail> {
    let t = Tokens::of(opts.tool, &opts.token_dir, opts.worker);
    let token = t.sidecar("shutdown");
    t.write(&token, "")
        .map_err(|e| io_fail("write", &token, e))?;
    let deadline = Instant::now() + Duration::from_secs(opts.timeout);
    let mut dead = DeadClock(None);
    let mut error_seen: Option<Instant> = None;
    loop {
        let s = look(&t);
        match &s {
            Sidecar::Done(msg) => {
                println!("{msg}");
                return Ok(());
            }
            Sidecar::Error(msg) => {
                // `done` follows an error token within moments when the
                // sidecar still published (worker exit); otherwise the
                // error is final.
                let seen = *error_seen.get_or_insert_with(Instant::now);
                let id = match identity::probe(&t) {
                    Probe::Alive(id) | Probe::Gone(id) => id,
                };
                if let Some(done) =
                    id.and_then(|id| read_signed(&t.sidecar("done")).filter(|(w, _)| *w == id))
                {
                    eprintln!("jobprof-record shutdown: note from the sidecar: {msg}");
                    println!("{}", done.1);
                    return Ok(());
                }
                if seen.elapsed() >= Duration::from_millis(500) {
                    return Err(sidecar_error(opts.worker, msg));
                }
            }
            _ => dead.check(&s)?,
        }
        if Instant::now() >= deadline {
            return Err(Fail::timeout(format!(
                "shutdown: no `done` from the sidecar of worker {} within {} s ({} never appeared)",
                opts.worker,
                opts.timeout,
                t.sidecar("done").display()
            )));
        }
        sleep(POLL);
    }
}

/// `wait-ready`: for batch scripts, between launching the sidecars and the
/// first `start`.
pub fn wait_ready_cmd(opts: WaitOpts) -> Result<(), Fail> {
    let t = Tokens::of(opts.tool, &opts.token_dir, opts.worker);
    let mut deadline = Deadline::new(&t, opts.timeout);
    wait_ready(&t, &mut deadline, opts.timeout, "wait-ready", false)?;
    println!("sidecar of worker {} is ready", opts.worker);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::write_signed;

    fn token_dir(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("driver-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// A deadline already passed, seen with the token as it is now.
    fn passed_deadline(t: &Tokens) -> Deadline {
        let mut d = Deadline::new(t, 60);
        d.at = Instant::now() - Duration::from_secs(1);
        d
    }

    #[test]
    fn attaching_progress_moves_the_deadline_and_a_stall_does_not() {
        let dir = token_dir("progress");
        let t = Tokens::new(&dir, 3);
        let me = SidecarId::me();
        let say = |m: &str| write_signed(&t, &t.sidecar(ATTACHING), &me, m).unwrap();
        say(".armed-1: 0/16 shards attached");
        let mut d = passed_deadline(&t);
        // Nothing new since the wait began: over.
        assert!(d.passed(&t));
        assert_eq!(d.progress(), "");
        // A shard attached: 60 s more.
        say(".armed-1: 1/16 shards attached");
        assert!(!d.passed(&t));
        assert!(d.at > Instant::now() + Duration::from_secs(50));
        // Stuck since: over again once that is spent, and the message says
        // how far attaching got.
        d.at = Instant::now() - Duration::from_secs(1);
        assert!(d.passed(&t));
        assert!(
            d.progress()
                .contains("(.armed-1: 1/16 shards attached) but attached none for 60 s"),
            "{}",
            d.progress()
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn attaching_progress_of_a_dead_sidecar_is_ignored() {
        let dir = token_dir("dead");
        let t = Tokens::new(&dir, 0);
        // This process, with another start time: a sidecar that is gone.
        let gone = SidecarId {
            start_time: SidecarId::me().start_time + 1,
            ..SidecarId::me()
        };
        let mut d = passed_deadline(&t);
        write_signed(&t, &t.sidecar(ATTACHING), &gone, "q: 5/9 shards attached").unwrap();
        assert!(d.passed(&t));
        // Unsigned (written by hand): ignored too.
        t.write(&t.sidecar(ATTACHING), "q: 6/9 shards attached")
            .unwrap();
        assert!(d.passed(&t));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
