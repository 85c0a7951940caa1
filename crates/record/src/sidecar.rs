//! The sidecar's life: take the per-worker lock (writing our identity into
//! it), clear stale tokens, find the worker, run the preflight, snapshot
//! symbols and publish them, write `ready` (signed with our identity); then
//! poll the token directory every 0.2 s (idle cost: one `readdir` and one
//! `/proc` read per poll) and serve `start`/`stop` for any number of
//! queries, one at a time. Each capture is published as soon as it ends,
//! before the driver is answered; at the end only what could not be
//! published yet is retried, then `done` is written.
//!
//! Between captures the next capture is pre-armed (see `capture`): when the
//! sidecar is ready and right after each capture is published, its shards
//! are attached disabled under a staging name (`.armed-N`), so that `start`
//! costs only the enabling. The token directory is watched with inotify, so
//! a request written on this node is seen at once. An armed capture that
//! never sampled is discarded at the end (perf stopped, its staging
//! removed, nothing published).
//!
//! Ends on the `shutdown` token, SIGTERM/SIGINT, or when the worker exits;
//! a capture running at that moment is stopped cleanly and published,
//! marked invalid with the reason. Exit status: 0 when everything that was
//! captured was published, 1 otherwise (the error token says what and where
//! the raw data stays).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::thread::sleep;
use std::time::{Duration, Instant};

use jobprof_capture_format::EndCause;

use crate::capture::{ActiveCapture, Context, Progress, State};
use crate::cli::SidecarOpts;
use crate::fail::Fail;
use crate::identity::{self, write_signed, Lock, SidecarId};
use crate::preflight;
use crate::publish;
use crate::shard::RecordSpec;
use crate::symfs;
use crate::sys;
use crate::tokens::{write_atomic, Refused, Request, Tokens, Tool, INVALID_PREFIX};

mod server;

use server::Server;

const POLL: Duration = Duration::from_millis(200);

/// Staging names of armed captures: no query id starts with `.`.
const ARMED_PREFIX: &str = ".armed-";

/// Descriptors perf and the sidecar hold besides the per-thread and
/// per-shard ones (measured: perf holds about 20 of its own).
const NOFILE_MARGIN: usize = 64;

fn log(msg: &str) {
    eprintln!("jobprof-record sidecar: {msg}");
}

/// Why the serving loop ended.
enum Ending {
    Shutdown,
    Signal(i32),
    WorkerExit,
}

/// Runs the sidecar to the end: set up (lock, preflight, symbols), arm the
/// first capture, write `ready`, serve captures until the end, then end
/// what runs and publish what is left.
pub fn run(opts: SidecarOpts) -> Result<(), Fail> {
    let tokens = Tokens::for_sidecar(Tool::Perf, &opts.token_dir, opts.worker)?;
    let me = SidecarId::me();
    let lock = lock_worker(&opts, &tokens, &me)?;
    sys::catch_termination();
    tokens.clear_stale()?;
    let worker = prepare(&opts, &tokens, &me)?;
    // A marker left by a sidecar of this worker killed mid-capture: that
    // capture is not being written any more (the lock is ours).
    if let Err(e) = publish::unmark_capturing(&worker.out) {
        log(&e);
    }
    let mut server = Server::new(&opts, &tokens, &me, &worker);
    // The first capture is armed before `ready`: a driver that waits for
    // `ready` (wait-ready) then starts its first query in milliseconds.
    server.arm();
    write_ready(&tokens, &me, &worker)?;
    let ending = server.serve();
    server.wind_down(&ending);
    let errors = server.publish_rest(&worker);
    finish(&tokens, &me, &worker, server.published, &ending, errors)?;
    drop(lock);
    Ok(())
}

/// What the set-up found out about the worker, and where its files go.
struct Worker {
    pid: u32,
    /// The worker's start time (tells it from a later process of that pid).
    start_time: u64,
    /// The staging root.
    staging: PathBuf,
    /// `STAGING/worker_N`.
    dir: PathBuf,
    /// `OUT/worker_N`.
    out: PathBuf,
    report: preflight::Report,
    /// The worker files (symbols, maps) were published at start-up.
    files_published: bool,
    /// What the symbol snapshot holds.
    symbols: symfs::Held,
}

/// Writes the signed error token and returns the failure (exit 1).
fn fail(tokens: &Tokens, me: &SidecarId, msg: String) -> Fail {
    let _ = write_signed(tokens, &tokens.sidecar("error"), me, &msg);
    Fail::failed(msg)
}

/// One sidecar per worker and token directory: the lock lives as long as
/// this process (the kernel drops it when we die, so no stale locks), and
/// names us, so that drivers can tell our tokens from a dead sidecar's.
fn lock_worker(opts: &SidecarOpts, tokens: &Tokens, me: &SidecarId) -> Result<Lock, Fail> {
    let lock_path = tokens.sidecar("lock");
    match identity::take_lock(&lock_path, me) {
        Ok(Some(lock)) => Ok(lock),
        Ok(None) => Err(Fail::failed(format!(
            "another sidecar for worker {} already runs with token directory {} (it holds {}); \
             not starting a second one",
            opts.worker,
            opts.token_dir.display(),
            lock_path.display()
        ))),
        Err(e) => Err(Fail::failed(format!(
            "cannot lock {}: {e}",
            lock_path.display()
        ))),
    }
}

/// Finds the worker, runs the preflight (its report is printed and kept in
/// staging), removes what an earlier sidecar armed, snapshots the symbols
/// and publishes the worker files.
fn prepare(opts: &SidecarOpts, tokens: &Tokens, me: &SidecarId) -> Result<Worker, Fail> {
    let pid = match preflight::resolve_pid(&opts.target.pid, opts.target.start_timeout) {
        Ok(p) => p,
        Err(e) => {
            let _ = write_signed(tokens, &tokens.sidecar("error"), me, &e.message);
            return Err(e);
        }
    };
    let Some((_, start_time)) = sys::proc_stat(pid) else {
        return Err(fail(
            tokens,
            me,
            format!("worker pid {pid}: no such process"),
        ));
    };
    let staging = preflight::staging_root(opts.target.staging.as_deref());
    let dir = staging.join(format!("worker_{}", opts.worker));
    let report = preflight::run(&opts.target, pid, &staging, Some(&dir));
    let text = report.text(pid);
    eprint!("{text}");
    if !report.failed().is_empty() {
        return Err(fail(tokens, me, report.failure_message()));
    }
    let _ = write_atomic(&dir.join("preflight.txt"), text.as_bytes());
    remove_armed_leftovers(&dir);
    let symbols = snapshot_symbols(pid, start_time, &dir, opts.symfs_limit)
        .map_err(|m| fail(tokens, me, m))?;
    let out = opts.out.join(format!("worker_{}", opts.worker));
    let files_published = publish_worker_files(&dir, &out);
    Ok(Worker {
        pid,
        start_time,
        staging,
        dir,
        out,
        report,
        files_published,
        symbols,
    })
}

/// Snapshots the worker's symbols into `worker_dir/symfs` (replacing one an
/// earlier sidecar left on the same staging) and logs what was copied.
fn snapshot_symbols(
    pid: u32,
    start: u64,
    worker_dir: &Path,
    limit: u64,
) -> Result<symfs::Held, String> {
    let _ = fs::remove_dir_all(worker_dir.join("symfs"));
    let (s, held) = symfs::snapshot(pid, start, worker_dir, limit).map_err(|e| {
        format!(
            "cannot snapshot symbols of pid {pid} into {}: {e}",
            worker_dir.display()
        )
    })?;
    log(&format!(
        "symfs: copied {} files ({} bytes, {} separate debug file(s), kernel symbols {}), skipped {}",
        s.copied,
        s.bytes,
        s.debug_files,
        if s.kallsyms { "kept" } else { "not available" },
        s.skipped
    ));
    Ok(held)
}

/// Publishes the worker files now, so that captures published later
/// symbolize even if this sidecar is killed; false (retried at shutdown)
/// when that fails.
fn publish_worker_files(worker_dir: &Path, out_worker: &Path) -> bool {
    match publish::worker_files(worker_dir, out_worker) {
        Ok(()) => true,
        Err(e) => {
            log(&format!(
                "cannot publish the worker files yet (retried at shutdown): {e}"
            ));
            false
        }
    }
}

/// What every capture of this sidecar shares.
fn context(opts: &SidecarOpts, tokens: &Tokens, me: &SidecarId, worker: &Worker) -> Context {
    Context {
        worker: opts.worker,
        pid: worker.pid,
        start_time: worker.start_time,
        worker_ids: crate::confine::Worker::pin(worker.pid, worker.start_time)
            .ok()
            .map(|w| (w.uid, w.gid)),
        exe: worker.report.exe.clone(),
        host: me.host.clone(),
        boot_id: sys::boot_id(),
        slurm_job_id: std::env::var("SLURM_JOB_ID").ok().filter(|s| !s.is_empty()),
        perf_version: worker.report.perf_version.clone(),
        spec: RecordSpec {
            event: opts.target.event.clone(),
            frequency: opts.target.frequency,
            call_graph: opts.call_graph.clone(),
            user_regs: opts.target.user_regs().map(|r| r.regs),
            ready_timeout: opts.target.start_timeout.max(1),
            max_size: opts.max_shard_size,
            off_cpu: opts.target.off_cpu,
        },
        threads_per_shard: opts.threads_per_shard,
        worker_dir: worker.dir.clone(),
        shutdown_token: tokens.sidecar("shutdown"),
        progress: Some(Progress {
            tokens: tokens.clone(),
            id: me.clone(),
        }),
    }
}

/// Writes the `ready` token (signed with our identity).
fn write_ready(tokens: &Tokens, me: &SidecarId, worker: &Worker) -> Result<(), Fail> {
    let pid = worker.pid;
    write_signed(
        tokens,
        &tokens.sidecar("ready"),
        me,
        &format!("worker_pid={pid} staging={}", worker.dir.display()),
    )
    .map_err(|e| {
        Fail::failed(format!(
            "cannot write the ready token in {}: {e}",
            tokens.dir.display()
        ))
    })?;
    log(&format!(
        "ready: worker pid {pid}, staging {}",
        worker.dir.display()
    ));
    Ok(())
}

/// The last step: fails (error token) when something could not be
/// published, else writes `done` (and, when the worker exited, the error
/// token that tells later drivers why) and frees the node-local disk.
fn finish(
    tokens: &Tokens,
    me: &SidecarId,
    worker: &Worker,
    published: usize,
    ending: &Ending,
    errors: Vec<String>,
) -> Result<(), Fail> {
    let pid = worker.pid;
    if !errors.is_empty() {
        let msg = format!(
            "publishing into {} failed: {}; raw data left in {}",
            worker.out.display(),
            errors.join("; "),
            worker.dir.display()
        );
        return Err(fail(tokens, me, msg));
    }
    if let Ending::WorkerExit = ending {
        // Drivers calling start after this learn why at once.
        let _ = write_signed(
            tokens,
            &tokens.sidecar("error"),
            me,
            &format!(
                "the worker (pid {pid}) exited; the sidecar published its captures and stopped"
            ),
        );
    }
    let done = format!(
        "published {published} capture(s) into {} ({})",
        worker.out.display(),
        ending_name(ending, pid)
    );
    write_signed(tokens, &tokens.sidecar("done"), me, &done)
        .map_err(|e| Fail::failed(format!("cannot write the done token: {e}")))?;
    log(&done);
    free_staging(worker);
    Ok(())
}

/// Everything is published: frees the node-local disk.
fn free_staging(worker: &Worker) {
    for name in [
        "preflight.txt",
        "worker.maps",
        "symbol-manifest.tsv",
        symfs::KALLSYMS,
        symfs::MODULES,
    ] {
        let _ = fs::remove_file(worker.dir.join(name));
    }
    let _ = fs::remove_dir_all(worker.dir.join("symfs"));
    let _ = fs::remove_dir(&worker.dir);
    let _ = fs::remove_dir(&worker.staging);
}

/// Removes the armed captures (and their FIFO directories) an earlier
/// sidecar left in this staging (killed, or a requeued job): they never
/// sampled (a capture is renamed to its query id before it is enabled).
fn remove_armed_leftovers(worker_dir: &Path) {
    let Ok(entries) = fs::read_dir(worker_dir) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let name = name.to_string_lossy();
        if name.starts_with(ARMED_PREFIX) || name.starts_with(&format!(".fifo.{ARMED_PREFIX}")) {
            // remove_dir_all does not follow symbolic links.
            let _ = fs::remove_dir_all(e.path());
            log(&format!(
                "removed {} (armed by an earlier sidecar, never sampled)",
                e.path().display()
            ));
        }
    }
}

/// Descriptors one perf process opens per thread it records (see
/// `Server::nofile_shortfall`).
fn perf_fds_per_thread(event: &str) -> usize {
    (event.split(',').count() + 1) * (sys::online_cpus() + 1)
}

fn ending_name(ending: &Ending, pid: u32) -> String {
    match ending {
        Ending::Shutdown => "shutdown".to_string(),
        Ending::Signal(s) => sys::signal_name(*s).to_string(),
        Ending::WorkerExit => format!("worker pid {pid} exited"),
    }
}
