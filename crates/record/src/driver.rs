//! The benchmark driver's side of the handshake: `start`, `stop` and
//! `shutdown`. Each writes one token and polls (every 0.1 s) for the
//! sidecar's answer, failing early with the sidecar's own message when an
//! error token appears, and with a timeout message that says what was
//! awaited and where.

use std::path::Path;
use std::thread::sleep;
use std::time::{Duration, Instant};

use crate::cli::{DriverOpts, ShutdownOpts};
use crate::fail::Fail;
use crate::tokens::Tokens;

const POLL: Duration = Duration::from_millis(100);

fn io_fail(what: &str, path: &Path, e: std::io::Error) -> Fail {
    Fail::failed(format!("cannot {what} {}: {e}", path.display()))
}

/// `start` and `stop`.
pub fn run(opts: DriverOpts) -> Result<(), Fail> {
    let t = Tokens::new(&opts.token_dir, opts.worker);
    let q = &opts.query;
    let deadline = Instant::now() + Duration::from_secs(opts.timeout);
    let sidecar_error = t.sidecar("error");
    let query_error = t.query("error", q);
    if opts.start {
        // Tokens of an earlier run of this query must not answer for this one.
        t.clear_query(q)
            .map_err(|e| io_fail("clear stale tokens in", &opts.token_dir, e))?;
        let ready = t.sidecar("ready");
        loop {
            if let Some(msg) = Tokens::message(&sidecar_error) {
                return Err(Fail::failed(format!(
                    "sidecar of worker {}: {msg}",
                    opts.worker
                )));
            }
            if Tokens::exists(&t.sidecar("done")) {
                return Err(Fail::failed(format!(
                    "the sidecar of worker {} has already shut down ({} exists)",
                    opts.worker,
                    t.sidecar("done").display()
                )));
            }
            if Tokens::exists(&ready) {
                break;
            }
            if Instant::now() >= deadline {
                return Err(Fail::timeout(format!(
                    "start {q}: the sidecar of worker {} was not ready within {} s ({} never appeared); \
                     is `jobprof-record sidecar` running with --token-dir {}?",
                    opts.worker,
                    opts.timeout,
                    ready.display(),
                    opts.token_dir.display()
                )));
            }
            sleep(POLL);
        }
        let start = t.query("start", q);
        t.write(&start, "")
            .map_err(|e| io_fail("write", &start, e))?;
        wait(&t, q, "started", deadline, opts.timeout)
    } else {
        let stop = t.query("stop", q);
        let _ = Tokens::remove(&t.query("finished", q));
        if let Some(msg) = Tokens::message(&query_error) {
            return Err(Fail::failed(format!("query {q}: {msg}")));
        }
        t.write(&stop, "").map_err(|e| io_fail("write", &stop, e))?;
        wait(&t, q, "finished", deadline, opts.timeout)
    }
}

/// Waits for the per-query token `kind`, failing on error tokens.
fn wait(t: &Tokens, q: &str, kind: &str, deadline: Instant, timeout: u64) -> Result<(), Fail> {
    let want = t.query(kind, q);
    loop {
        // An error outranks the answer: e.g. a capture cut by --max-capture
        // is `finished` but not what the driver asked for.
        if let Some(msg) = Tokens::message(&t.query("error", q)) {
            return Err(Fail::failed(format!("query {q}: {msg}")));
        }
        if Tokens::exists(&want) {
            return Ok(());
        }
        if let Some(msg) = Tokens::message(&t.sidecar("error")) {
            return Err(Fail::failed(format!(
                "sidecar of worker {}: {msg}",
                t.worker
            )));
        }
        if Tokens::exists(&t.sidecar("done")) {
            return Err(Fail::failed(format!(
                "query {q}: the sidecar of worker {} shut down before answering `{kind}`",
                t.worker
            )));
        }
        if Instant::now() >= deadline {
            return Err(Fail::timeout(format!(
                "query {q}: no `{kind}` from the sidecar of worker {} within {timeout} s ({} never appeared)",
                t.worker,
                want.display()
            )));
        }
        sleep(POLL);
    }
}

/// `shutdown`.
pub fn shutdown(opts: ShutdownOpts) -> Result<(), Fail> {
    let t = Tokens::new(&opts.token_dir, opts.worker);
    let done = t.sidecar("done");
    let error = t.sidecar("error");
    let token = t.sidecar("shutdown");
    t.write(&token, "")
        .map_err(|e| io_fail("write", &token, e))?;
    let deadline = Instant::now() + Duration::from_secs(opts.timeout);
    let mut error_seen: Option<Instant> = None;
    loop {
        if let Some(msg) = Tokens::message(&done) {
            if let Some(e) = Tokens::message(&error) {
                eprintln!("jobprof-record shutdown: note from the sidecar: {e}");
            }
            println!("{msg}");
            return Ok(());
        }
        if let Some(msg) = Tokens::message(&error) {
            // `done` follows an error token within moments when the sidecar
            // still published (worker exit); otherwise the error is final.
            let seen = *error_seen.get_or_insert_with(Instant::now);
            if seen.elapsed() >= Duration::from_millis(500) {
                return Err(Fail::failed(format!(
                    "sidecar of worker {}: {msg}",
                    opts.worker
                )));
            }
        }
        if Instant::now() >= deadline {
            return Err(Fail::timeout(format!(
                "shutdown: no `done` from the sidecar of worker {} within {} s ({} never appeared)",
                opts.worker,
                opts.timeout,
                done.display()
            )));
        }
        sleep(POLL);
    }
}
