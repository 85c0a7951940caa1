//! The token files shared by the benchmark driver and the sidecar, with the
//! names the old shell sidecar used (so existing drivers work unchanged):
//!
//! - `.perf_sidecar_{ready,error,shutdown,done}_wN`: sidecar lifecycle;
//! - `.perf_{start,started,stop,finished,error}_wN_Q`: per-query handshake;
//! - `.perf_record_stop_forced_wN`: the stop watchdog had to signal perf;
//! - `.perf_sidecar_lock_wN`: held (a POSIX `fcntl` lock) by the running sidecar.
//!
//! The nsys sidecar (`--tool nsys`) keeps the Nsight Systems shell loop's
//! per-query names, `.nsys_{start,started,stop}_token_wN_Q`, adds
//! `.nsys_{finished,error}_token_wN_Q`, and has its own lifecycle tokens and
//! lock, `.nsys_sidecar_{ready,error,shutdown,done,lock}_wN`: a perf and an
//! nsys sidecar of one worker share a token directory without a clash.
//!
//! Every token is written atomically (temporary file + rename), so a reader
//! sees it whole or not at all; error tokens always hold a non-empty message.
//! A request is a regular file: anything else under a request's name (a
//! directory, a link, a FIFO), or a request that cannot be removed, is
//! refused once with the query's error token and remembered by name and
//! identity ([`Refused`]), so the sidecars never answer it again and again.
//! This module also validates query ids and worker indexes; it does not
//! decide when tokens are written.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fs;
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use crate::fail::Fail;
use crate::sys;

/// How a per-query error token starts when the capture ended on its own
/// and is invalid (the driver then exits 5, not 1).
pub const INVALID_PREFIX: &str = "capture invalid: ";

/// The longest query id: it names a directory and is part of token and
/// temporary file names, which must stay below the 255-byte name limit.
pub const MAX_QUERY_LEN: usize = 128;

/// True when `q` is a safe query id: `^[A-Za-z0-9_-][A-Za-z0-9_.-]*$`, at
/// most [`MAX_QUERY_LEN`] bytes. A leading `.` is refused: it would make a
/// hidden directory, which `jobprof process` skips (and `.`/`..` are paths).
pub fn query_ok(q: &str) -> bool {
    !q.is_empty()
        && q.len() <= MAX_QUERY_LEN
        && !q.starts_with('.')
        && q.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

/// What a sidecar answers (in its error token) for a query id that breaks
/// [`query_ok`]'s rule: the token is ignored.
pub fn query_refused(q: &str) -> String {
    format!(
        "query id `{q}` is not allowed (^[A-Za-z0-9_.-]+$, not starting with `.`, at most \
         {MAX_QUERY_LEN} bytes); ignored"
    )
}

/// Checks a query id, explaining the rule when it is broken (exit 2).
pub fn validate_query(q: &str) -> Result<(), Fail> {
    if query_ok(q) {
        Ok(())
    } else if q.len() > MAX_QUERY_LEN {
        Err(Fail::usage(format!(
            "query id `{}...` is {} bytes long; the limit is {MAX_QUERY_LEN} (it names a directory \
             and token files)",
            &q[..q.char_indices().nth(32).map_or(q.len(), |(i, _)| i)],
            q.len()
        )))
    } else {
        Err(Fail::usage(format!(
            "query id `{q}` is not allowed: use only letters, digits, `_`, `.` and `-` \
             (^[A-Za-z0-9_.-]+$), not starting with `.` (it names a directory, and \
             hidden directories are never processed)"
        )))
    }
}

/// What a sidecar answers for a query id it already served (`done`: what
/// it did with it, `captured` or `served`): the next replicate name
/// ([`jobprof_capture_format::replicate::next_name`], `q01` -> `q01_iter2`)
/// that this sidecar has not seen.
pub fn query_seen(q: &str, done: &str, seen: &std::collections::BTreeSet<String>) -> String {
    let mut next = jobprof_capture_format::replicate::next_name(q);
    while seen.contains(&next) {
        next = jobprof_capture_format::replicate::next_name(&next);
    }
    format!(
        "query id {q} was already {done} by this sidecar; use a unique id per query run: \
         replicates are named BASE_iterN (e.g. {next})"
    )
}

/// Parses a worker index (digits only, exit 2 otherwise).
pub fn validate_worker(s: &str) -> Result<u32, Fail> {
    if !s.is_empty() && s.len() <= 9 && s.bytes().all(|b| b.is_ascii_digit()) {
        Ok(s.parse().expect("checked digits"))
    } else {
        Err(Fail::usage(format!(
            "worker index `{s}` is not a number: pass the worker's index, e.g. --worker 0"
        )))
    }
}

/// A per-query request the sidecar acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request {
    /// `.perf_start_wN_Q`.
    Start,
    /// `.perf_stop_wN_Q`.
    Stop,
}

impl Request {
    /// The kind of the request's token: `start` or `stop`.
    pub fn kind(self) -> &'static str {
        match self {
            Request::Start => "start",
            Request::Stop => "stop",
        }
    }
}

/// Request tokens refused and still in the token directory, by name and
/// identity (inode, type and change time: an inode number freed by a
/// removal is soon another file's): each is refused once, not on every
/// pass. (A directory planted under a request's name cannot be removed:
/// answered on every pass, it kept the sidecars busy rewriting tokens.)
/// An entry is forgotten once it is gone or replaced.
#[derive(Debug, Default)]
pub struct Refused(BTreeMap<OsString, Identity>);

/// What tells one directory entry from a later one under the same name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Identity {
    ino: u64,
    mode: u32,
    ctime: (i64, i64),
}

impl Identity {
    fn of(m: &fs::Metadata) -> Identity {
        Identity {
            ino: m.ino(),
            mode: m.mode(),
            ctime: (m.ctime(), m.ctime_nsec()),
        }
    }
}

impl Refused {
    /// Remembers the entry at `path` as it is now (a link not followed),
    /// when it still exists.
    fn remember(&mut self, path: &Path) {
        if let (Some(name), Ok(m)) = (path.file_name(), fs::symlink_metadata(path)) {
            self.0.insert(name.to_os_string(), Identity::of(&m));
        }
    }
}

/// What one look at the token directory found.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Scan {
    /// The `start` and `stop` requests (regular files), sorted by query id.
    /// Query ids are returned as found (the caller validates them:
    /// `.perf_start_w0_..` is a legal file name).
    pub requests: Vec<(Request, String)>,
    /// Entries under a request's name that are no regular file, refused
    /// for the first time: the query id and the refusal, for the query's
    /// error token.
    pub refused: Vec<(String, String)>,
}

/// What a file type is, for messages: `a directory`, `a FIFO`...
fn kind_of(t: fs::FileType) -> &'static str {
    if t.is_dir() {
        "a directory"
    } else if t.is_symlink() {
        "a symbolic link"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_block_device() || t.is_char_device() {
        "a device"
    } else {
        "not a regular file"
    }
}

/// Which profiler a sidecar drives: decides the token names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Tool {
    /// `perf record` (the default).
    #[default]
    Perf,
    /// Nsight Systems (`nsys start` / `nsys stop`).
    Nsys,
}

impl Tool {
    /// `perf` or `nsys`: the tokens' first word.
    pub fn name(self) -> &'static str {
        match self {
            Tool::Perf => "perf",
            Tool::Nsys => "nsys",
        }
    }

    /// Parses `--tool`.
    pub fn parse(s: &str) -> Option<Tool> {
        match s {
            "perf" => Some(Tool::Perf),
            "nsys" => Some(Tool::Nsys),
            _ => None,
        }
    }
}

/// The tokens of one worker in one token directory.
#[derive(Debug, Clone)]
pub struct Tokens {
    /// The token directory.
    pub dir: PathBuf,
    /// The worker index.
    pub worker: u32,
    /// Whose tokens: perf's or nsys's names.
    pub tool: Tool,
}

impl Tokens {
    /// perf tokens of worker `worker` in `dir` (the tests' shorthand; the
    /// sidecars use [`Tokens::for_sidecar`]).
    #[cfg(test)]
    pub fn new(dir: &Path, worker: u32) -> Tokens {
        Tokens::of(Tool::Perf, dir, worker)
    }

    /// `tool`'s tokens of worker `worker` in `dir`.
    pub fn of(tool: Tool, dir: &Path, worker: u32) -> Tokens {
        Tokens {
            dir: dir.to_path_buf(),
            worker,
            tool,
        }
    }

    /// `.perf_sidecar_{kind}_wN` (`ready`, `error`, `shutdown`, `done`,
    /// `attaching`, `lock`); `.nsys_sidecar_{kind}_wN` for nsys.
    pub fn sidecar(&self, kind: &str) -> PathBuf {
        self.dir.join(format!(
            ".{}_sidecar_{kind}_w{}",
            self.tool.name(),
            self.worker
        ))
    }

    /// The name prefix of per-query tokens of `kind`: `.perf_{kind}_wN_`,
    /// or `.nsys_{kind}_token_wN_` (the shell loop's names).
    fn query_prefix(&self, kind: &str) -> String {
        match self.tool {
            Tool::Perf => format!(".perf_{kind}_w{}_", self.worker),
            Tool::Nsys => format!(".nsys_{kind}_token_w{}_", self.worker),
        }
    }

    /// `.perf_{kind}_wN_Q` (`start`, `started`, `stop`, `finished`,
    /// `error`); `.nsys_{kind}_token_wN_Q` for nsys.
    pub fn query(&self, kind: &str, q: &str) -> PathBuf {
        self.dir.join(format!("{}{q}", self.query_prefix(kind)))
    }

    /// `.perf_record_stop_forced_wN`.
    pub fn forced(&self) -> PathBuf {
        self.dir
            .join(format!(".perf_record_stop_forced_w{}", self.worker))
    }

    /// A sidecar's tokens: `tool`'s of worker `worker` in `dir`, which must
    /// be a directory (`--token-dir`; exit 2 when it is not).
    pub fn for_sidecar(tool: Tool, dir: &Path, worker: u32) -> Result<Tokens, Fail> {
        if !dir.is_dir() {
            return Err(Fail::usage(format!(
                "--token-dir {}: not a directory; create it (shared with the driver) first",
                dir.display()
            )));
        }
        Ok(Tokens::of(tool, dir, worker))
    }

    /// [`Tokens::clear_all`] as a sidecar's start-up does it: what an
    /// earlier run left is removed, or the sidecar fails (exit 1).
    pub fn clear_stale(&self) -> Result<(), Fail> {
        self.clear_all().map_err(|e| {
            Fail::failed(format!(
                "cannot clear stale tokens in {}: {e}",
                self.dir.display()
            ))
        })
    }

    /// Writes a token atomically with `content` (a line is added).
    pub fn write(&self, path: &Path, content: &str) -> io::Result<()> {
        let mut data = content.trim_end().to_string();
        data.push('\n');
        write_atomic(path, data.as_bytes())
    }

    /// True when the token exists.
    pub fn exists(path: &Path) -> bool {
        path.exists()
    }

    /// The token's content when it exists and is not blank (a symlink
    /// planted at its name is not followed).
    pub fn message(path: &Path) -> Option<String> {
        let s = sys::read_nofollow(path).ok()?;
        let s = s.trim();
        (!s.is_empty()).then(|| s.to_string())
    }

    /// True when the token is a regular file (a link is not followed).
    pub fn is_file(path: &Path) -> bool {
        fs::symlink_metadata(path).is_ok_and(|m| m.is_file())
    }

    /// Takes request `req` of query `q`: removes its token (it has been
    /// seen) and checks the query id; `Err` holds the refusal, for the
    /// query's error token: of a token that cannot be removed (it is
    /// remembered in `refused`, so it is refused once), or of an id that
    /// breaks [`query_ok`]'s rule.
    pub fn take_request(&self, req: Request, q: &str, refused: &mut Refused) -> Result<(), String> {
        let path = self.query(req.kind(), q);
        if let Err(e) = Tokens::remove(&path) {
            refused.remember(&path);
            return Err(format!(
                "cannot remove the request {}: {e}; refused, not acted on",
                path.display()
            ));
        }
        if query_ok(q) {
            Ok(())
        } else {
            Err(query_refused(q))
        }
    }

    /// Answers query `q` with its error token, holding `msg` (the one
    /// `error` token of both sidecars; the caller logs the message).
    pub fn answer_error(&self, q: &str, msg: &str) {
        let _ = self.write(&self.query("error", q), msg);
    }

    /// Removes a token; a missing one is fine.
    pub fn remove(path: &Path) -> io::Result<()> {
        match fs::remove_file(path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    /// Whether a sidecar acts on an entry named `name` (a `start` or `stop`
    /// request of this worker, or its `shutdown`): what wakes its watch.
    /// Its own answers do not, so writing them never starts another pass.
    pub fn wakes(&self, name: &[u8]) -> bool {
        [Request::Start, Request::Stop]
            .iter()
            .any(|r| name.starts_with(self.query_prefix(r.kind()).as_bytes()))
            || self
                .sidecar("shutdown")
                .file_name()
                .is_some_and(|n| n.as_bytes() == name)
    }

    /// The `start` and `stop` requests of this worker now in the directory
    /// (see [`Scan`]); an entry under a request's name that is no regular
    /// file is refused, once: `refused` remembers it while it stays.
    pub fn requests(&self, refused: &mut Refused) -> io::Result<Scan> {
        let start = self.query_prefix(Request::Start.kind());
        let stop = self.query_prefix(Request::Stop.kind());
        let mut found = Scan::default();
        let mut still = BTreeMap::new();
        for entry in fs::read_dir(&self.dir)? {
            let entry = entry?;
            let name = entry.file_name();
            let Some(text) = name.to_str() else { continue };
            let (req, q) = if let Some(q) = text.strip_prefix(&start) {
                (Request::Start, q.to_string())
            } else if let Some(q) = text.strip_prefix(&stop) {
                (Request::Stop, q.to_string())
            } else {
                continue;
            };
            // Gone since the listing: nothing to take.
            let Ok(meta) = entry.metadata() else { continue };
            let id = Identity::of(&meta);
            if refused.0.get(&name) == Some(&id) {
                still.insert(name, id);
                continue;
            }
            let kind = meta.file_type();
            if kind.is_file() {
                found.requests.push((req, q));
                continue;
            }
            found.refused.push((
                q,
                format!(
                    "{} is {}, not a regular file: refused, not acted on (remove it)",
                    self.dir.join(&name).display(),
                    kind_of(kind)
                ),
            ));
            still.insert(name, id);
        }
        refused.0 = still;
        found.requests.sort_by(|a, b| a.1.cmp(&b.1));
        found.refused.sort();
        Ok(found)
    }

    /// Removes every lifecycle and per-query token of this worker (not the
    /// worker PID file, not the lock): what an earlier run left behind.
    pub fn clear_all(&self) -> io::Result<()> {
        let forced = self.forced();
        for entry in fs::read_dir(&self.dir)? {
            let name = entry?.file_name();
            let Some(name) = name.to_str() else { continue };
            let path = self.dir.join(name);
            let lifecycle = ["ready", "error", "shutdown", "done", "attaching"]
                .iter()
                .any(|k| path == self.sidecar(k))
                || (self.tool == Tool::Perf && path == forced);
            let per_query = ["start", "started", "stop", "finished", "error"]
                .iter()
                .any(|k| name.starts_with(&self.query_prefix(k)));
            if lifecycle || per_query {
                Tokens::remove(&self.dir.join(name))?;
            }
        }
        Ok(())
    }

    /// Removes the tokens of query `q` an earlier run may have left.
    pub fn clear_query(&self, q: &str) -> io::Result<()> {
        for kind in ["start", "started", "stop", "finished", "error"] {
            Tokens::remove(&self.query(kind, q))?;
        }
        Ok(())
    }
}

/// Writes `path` atomically: a new hidden temporary file with a random name
/// in the same directory (created with `O_EXCL | O_NOFOLLOW`, so a planted
/// file or symlink is never written through), flushed to disk, then renamed
/// over `path` (a rename replaces a symlink at `path`, never its target).
pub fn write_atomic(path: &Path, data: &[u8]) -> io::Result<()> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let tmp = dir.join(format!(".tmp.jobprof.{:016x}", sys::random_u64()));
    // write_new removes a half-written `tmp` itself (and never touches a
    // file that was already there); a failed rename leaves a whole one.
    sys::write_new(&tmp, 0o644, |f| f.write_all(data).map(|()| 0))?;
    fs::rename(&tmp, path).inspect_err(|_| {
        let _ = fs::remove_file(&tmp);
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seen_query_suggests_the_next_free_replicate() {
        let seen: std::collections::BTreeSet<String> =
            ["q01", "q01_iter2", "Q1_iter1"].map(String::from).into();
        let m = query_seen("q01", "captured", &seen);
        assert!(m.contains("(e.g. q01_iter3)"), "{m}");
        let m = query_seen("Q1_iter1", "served", &seen);
        assert!(
            m.contains("already served") && m.contains("(e.g. Q1_iter2)"),
            "{m}"
        );
    }

    #[test]
    fn query_ids_follow_the_rule() {
        let longest = "q".repeat(MAX_QUERY_LEN);
        for ok in [
            "q1",
            "Q_01.warm-2",
            "a.b",
            "x.",
            "-x",
            "_x",
            longest.as_str(),
        ] {
            assert!(query_ok(ok), "{ok}");
        }
        let too_long = "q".repeat(MAX_QUERY_LEN + 1);
        for bad in [
            "",
            ".",
            "..",
            "...",
            ".warmup",
            "a/b",
            "../x",
            "a b",
            "q\n",
            "ü",
            "a\\b",
            too_long.as_str(),
        ] {
            assert!(!query_ok(bad), "{bad:?}");
        }
        assert_eq!(validate_query("..").unwrap_err().code, 2);
        assert!(validate_query(".warmup")
            .unwrap_err()
            .message
            .contains("not starting with `.`"));
        assert!(validate_query(&too_long)
            .unwrap_err()
            .message
            .contains("the limit is 128"));
    }

    #[test]
    fn worker_indexes_are_digits() {
        assert_eq!(validate_worker("12").unwrap(), 12);
        for bad in ["", "-1", "1a", "w1", " 1", "99999999999"] {
            assert!(validate_worker(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn names_match_the_old_sidecar() {
        let t = Tokens::new(Path::new("/t"), 2);
        assert_eq!(t.sidecar("ready"), Path::new("/t/.perf_sidecar_ready_w2"));
        assert_eq!(
            t.query("started", "q7"),
            Path::new("/t/.perf_started_w2_q7")
        );
        assert_eq!(t.forced(), Path::new("/t/.perf_record_stop_forced_w2"));
    }

    #[test]
    fn nsys_names_match_the_shell_loop_and_never_perfs() {
        let n = Tokens::of(Tool::Nsys, Path::new("/t"), 2);
        assert_eq!(
            n.query("start", "q7"),
            Path::new("/t/.nsys_start_token_w2_q7")
        );
        assert_eq!(
            n.query("started", "q7"),
            Path::new("/t/.nsys_started_token_w2_q7")
        );
        assert_eq!(n.sidecar("lock"), Path::new("/t/.nsys_sidecar_lock_w2"));
        let p = Tokens::new(Path::new("/t"), 2);
        for kind in ["start", "started", "stop", "finished", "error"] {
            assert_ne!(n.query(kind, "q7"), p.query(kind, "q7"));
        }
        for kind in ["ready", "error", "shutdown", "done", "lock"] {
            assert_ne!(n.sidecar(kind), p.sidecar(kind));
        }
    }

    #[test]
    fn clearing_one_tool_leaves_the_others_tokens() {
        let dir = std::env::temp_dir().join(format!("tokens-tools-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let (n, p) = (Tokens::of(Tool::Nsys, &dir, 0), Tokens::new(&dir, 0));
        for t in [&n, &p] {
            t.write(&t.query("started", "q1"), "").unwrap();
            t.write(&t.sidecar("ready"), "").unwrap();
        }
        n.clear_all().unwrap();
        assert!(!n.query("started", "q1").exists() && !n.sidecar("ready").exists());
        assert!(p.query("started", "q1").exists() && p.sidecar("ready").exists());
        assert_eq!(
            n.requests(&mut Refused::default()).unwrap(),
            Scan::default(),
            "perf's tokens are no nsys requests"
        );
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_request_that_is_no_regular_file_is_refused_once_until_replaced() {
        let dir = std::env::temp_dir().join(format!("tokens-refused-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let t = Tokens::new(&dir, 0);
        let planted = t.query("start", "qa");
        fs::create_dir(&planted).unwrap();
        t.write(&t.query("stop", "qb"), "").unwrap();
        let mut refused = Refused::default();
        let scan = t.requests(&mut refused).unwrap();
        assert_eq!(scan.requests, [(Request::Stop, "qb".to_string())]);
        let [(q, why)] = &scan.refused[..] else {
            panic!("{scan:?}")
        };
        assert_eq!(q, "qa");
        assert!(
            why.contains(&format!("{} is a directory", planted.display())),
            "{why}"
        );
        // Refused once: the next passes do not see it.
        for _ in 0..3 {
            assert!(t.requests(&mut refused).unwrap().refused.is_empty());
        }
        // Replaced (here by a socket, maybe with the same inode number):
        // refused again.
        fs::remove_dir(&planted).unwrap();
        std::os::unix::net::UnixListener::bind(&planted).unwrap();
        let scan = t.requests(&mut refused).unwrap();
        assert!(scan.refused[0].1.contains("is a socket"), "{scan:?}");
        // A request whose token cannot be removed is refused once as well.
        fs::remove_file(&planted).unwrap();
        fs::create_dir_all(planted.join("x")).unwrap();
        let e = t
            .take_request(Request::Start, "qa", &mut refused)
            .unwrap_err();
        assert!(
            e.contains("cannot remove the request") && e.contains(".perf_start_w0_qa"),
            "{e}"
        );
        assert!(t.requests(&mut refused).unwrap().refused.is_empty());
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn only_requests_and_shutdown_wake_a_sidecar() {
        for tool in [Tool::Perf, Tool::Nsys] {
            let t = Tokens::of(tool, Path::new("/t"), 1);
            let name = |p: PathBuf| p.file_name().unwrap().as_bytes().to_vec();
            for wakes in [
                name(t.query("start", "q")),
                name(t.query("stop", "q")),
                name(t.sidecar("shutdown")),
            ] {
                assert!(t.wakes(&wakes), "{}", String::from_utf8_lossy(&wakes));
            }
            for own in [
                name(t.query("started", "q")),
                name(t.query("finished", "q")),
                name(t.query("error", "q")),
                name(t.sidecar("ready")),
                name(Tokens::of(tool, Path::new("/t"), 2).query("start", "q")),
                b".tmp.jobprof.0123456789abcdef".to_vec(),
            ] {
                assert!(!t.wakes(&own), "{}", String::from_utf8_lossy(&own));
            }
        }
    }
}
