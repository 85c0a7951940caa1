//! `jobprof-record sidecar --tool nsys`: the per-query Nsight Systems loop
//! of a worker that runs under `nsys launch` (collection off), as a
//! drop-in for the shell loop beside it. Keeps that loop's token names, so
//! the driver's `start_profiler`/`stop_profiler` work unchanged, and the
//! perf sidecar's lifecycle: the lock `.nsys_sidecar_lock_wN` signed with
//! our identity, stale tokens of a dead sidecar cleared, `ready`, `error`,
//! `done` signed on their first line (so `wait-ready`/`shutdown --tool
//! nsys` tell ours from a dead one's).
//!
//! The serving loop (this file) runs `nsys start`/`nsys stop` one query at
//! a time, any query id, each once; a stopped collection goes to the
//! settling thread ([`settler`]), which publishes its report ([`publish`])
//! when it has settled. At the end a running collection is stopped, and
//! the sidecar waits for the thread: every report is published or given
//! up before `done` (or the error token) is written.

mod call;
mod opts;
mod publish;
mod settler;

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Sender};
use std::thread::sleep;
use std::time::{Duration, Instant};

use jobprof_capture_format::nsys::NsysCall;

pub use opts::{NsysOpts, RawOpts, SIDECAR_HELP};

use crate::fail::Fail;
use crate::identity::{self, write_signed, SidecarId};
use crate::preflight::{private_dir, staging_root};
use crate::sys;
use crate::tokens::{Refused, Request, Tokens, Tool};

const POLL: Duration = Duration::from_millis(200);

fn log(msg: &str) {
    eprintln!("jobprof-record sidecar (nsys): {msg}");
}

/// Runs the sidecar to the end (see the module doc).
pub fn run(mut opts: NsysOpts) -> Result<(), Fail> {
    let tokens = Tokens::for_sidecar(Tool::Nsys, &opts.token_dir, opts.worker)?;
    let me = SidecarId::me();
    let lock_path = tokens.sidecar("lock");
    let lock = match identity::take_lock(&lock_path, &me) {
        Ok(Some(l)) => l,
        Ok(None) => {
            return Err(Fail::failed(format!(
                "another nsys sidecar for worker {} already runs with token directory {} \
                 (it holds {}); not starting a second one",
                opts.worker,
                opts.token_dir.display(),
                lock_path.display()
            )))
        }
        Err(e) => {
            return Err(Fail::failed(format!(
                "cannot lock {}: {e}",
                lock_path.display()
            )))
        }
    };
    sys::catch_termination();
    tokens.clear_stale()?;
    let fail = |msg: String| {
        let _ = write_signed(&tokens, &tokens.sidecar("error"), &me, &msg);
        Fail::failed(msg)
    };
    let setup = prepare(&mut opts).map_err(fail)?;
    let (tx, rx) = mpsc::channel();
    let settler = settler::spawn(
        settler::Config {
            tokens: tokens.clone(),
            out_worker: setup.out_worker.clone(),
            settle: opts.settle,
            report_timeout: opts.report_timeout,
            host: me.host.clone(),
            importer: opts.importer.clone(),
            call_timeout: opts.call_timeout,
            importer_home: setup.importer_home.clone(),
        },
        rx,
    );
    let ready = format!(
        "nsys={} staging={} out={} session={} importer={}",
        setup.version,
        setup.staging.display(),
        setup.out_worker.display(),
        opts.session.as_deref().unwrap_or("(default)"),
        opts.importer
            .as_ref()
            .map_or("(none)".into(), |p| p.display().to_string())
    );
    write_signed(&tokens, &tokens.sidecar("ready"), &me, &ready)
        .map_err(|e| Fail::failed(format!("cannot write the ready token: {e}")))?;
    log(&format!("ready: {ready}"));
    let mut server = Server {
        opts: &opts,
        tokens: tokens.clone(),
        staging: setup.staging.clone(),
        tx,
        active: None,
        seen: BTreeSet::new(),
        start_failed: BTreeSet::new(),
        watch: sys::DirWatch::new(&opts.token_dir),
        refused: Refused::default(),
        stuck: None,
    };
    let ending = server.serve();
    server.wind_down(&ending);
    drop(server);
    log("waiting for the reports still being written");
    let summary = settler.join().unwrap_or_else(|_| settler::Summary {
        published: 0,
        errors: vec!["the settling thread panicked".into()],
    });
    let result = if summary.errors.is_empty() {
        let done = format!(
            "published {} report(s) into {} ({ending})",
            summary.published,
            setup.out_worker.display()
        );
        log(&done);
        let _ = fs::remove_dir_all(&setup.importer_home);
        let _ = fs::remove_dir(&setup.staging);
        write_signed(&tokens, &tokens.sidecar("done"), &me, &done)
            .map_err(|e| Fail::failed(format!("cannot write the done token: {e}")))
    } else {
        let msg = format!(
            "published {} report(s) into {}; not published: {}; what exists stays in {}",
            summary.published,
            setup.out_worker.display(),
            summary.errors.join("; "),
            setup.staging.display()
        );
        Err(fail(msg))
    };
    drop(lock);
    result
}

/// What the set-up found.
struct Setup {
    version: String,
    /// `STAGING/nsys_worker_N`.
    staging: PathBuf,
    /// `NSYS_ROOT/worker_N`.
    out_worker: PathBuf,
    /// `STAGING/.importer-home`: QdstrmImporter's `HOME`.
    importer_home: PathBuf,
}

/// Resolves nsys once (`opts.nsys_bin` becomes the absolute path run from
/// then on; as root one only root can change, see [`call::resolve`]),
/// checks it runs, makes the private staging directory, checks the output
/// directory, and deals with what a killed sidecar left.
fn prepare(opts: &mut NsysOpts) -> Result<Setup, String> {
    let path = std::env::var_os("PATH");
    let root = sys::euid() == 0;
    // The path as found (links not resolved): the importer is looked for
    // along its links.
    let found = call::resolve(&opts.nsys_bin, path.as_deref(), false)?;
    opts.nsys_bin = call::resolve(&found, path.as_deref(), root)?;
    opts.importer = call::importer(opts.importer.as_deref(), &found, path.as_deref(), root)?;
    let root = staging_root(opts.staging.as_deref());
    private_dir(&root)?;
    let staging = root.join(format!("nsys_worker_{}", opts.worker));
    private_dir(&staging)?;
    let ran = call::run(
        &opts.nsys_bin,
        &["--version"],
        &staging.join(".nsys-call.log"),
        opts.call_timeout,
    );
    if !ran.ok() {
        return Err(format!(
            "nsys does not run ({}): {}; pass --nsys-bin PATH",
            opts.nsys_bin.display(),
            ran.describe()
        ));
    }
    if opts::perf_off_by_default(&ran.output, &opts.start_args) {
        opts.start_args
            .splice(0..0, opts::PERF_OFF.map(String::from));
        log(&format!(
            "{}: every nsys start gets {} (nsys 2022.4's stop of CPU sampling or context \
             switches can hang; pass --start-arg --sample=cpu to sample anyway)",
            ran.output,
            opts::PERF_OFF.join(" ")
        ));
    }
    let out_worker = opts.out.join(format!("worker_{}", opts.worker));
    if out_worker.join("preflight.txt").exists() || out_worker.join("symfs").exists() {
        return Err(format!(
            "{} holds a perf sidecar's worker files: give the nsys sidecar its own --out \
             (e.g. RESULT/profiles/nsys beside RESULT/profiles/perf)",
            out_worker.display()
        ));
    }
    crate::publish::out_dir(&out_worker)?;
    set_aside_leftovers(opts, &staging);
    let importer_home = staging.join(".importer-home");
    private_dir(&importer_home)?;
    Ok(Setup {
        importer_home,
        version: ran.output.replace(' ', "_"),
        staging,
        out_worker,
    })
}

/// Query directories an earlier (killed) sidecar left in staging: its
/// collection may still run in the nsys session, so it is stopped (or
/// our first `nsys start` would fail), and the directories are moved
/// aside (`.earlier-TIME-Q`), kept, not published: their query ids are
/// this run's to use.
fn set_aside_leftovers(opts: &NsysOpts, staging: &Path) {
    let Ok(entries) = fs::read_dir(staging) else {
        return;
    };
    let left: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .map(|e| e.path())
        .collect();
    if left.is_empty() {
        return;
    }
    let mut args = vec!["stop".to_string()];
    args.extend(opts.session_arg());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let ran = call::run(
        &opts.nsys_bin,
        &args,
        &staging.join(".nsys-call.log"),
        opts.call_timeout,
    );
    log(&format!(
        "an earlier sidecar left {} collection(s) in {}; nsys stop: {}",
        left.len(),
        staging.display(),
        ran.describe()
    ));
    let now = sys::now_ns();
    for dir in left {
        let name = dir
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let aside = staging.join(format!(".earlier-{now}-{name}"));
        match fs::rename(&dir, &aside) {
            Ok(()) => log(&format!("kept (not published): {}", aside.display())),
            Err(e) => log(&format!("cannot move {} aside: {e}", dir.display())),
        }
    }
}

/// The collection running now.
struct Active {
    query: String,
    dir: PathBuf,
    base: PathBuf,
    start: NsysCall,
}

struct Server<'a> {
    opts: &'a NsysOpts,
    tokens: Tokens,
    staging: PathBuf,
    tx: Sender<settler::Job>,
    active: Option<Active>,
    /// Query ids served (or attempted) in this sidecar's life.
    seen: BTreeSet<String>,
    /// Queries whose `nsys start` failed (their stop is expected, ignored).
    start_failed: BTreeSet<String>,
    watch: Option<sys::DirWatch>,
    /// Requests refused and still there (refused once).
    refused: Refused,
    /// Why the session may be stuck (a failed `stop`), for the messages of
    /// the starts that then fail; cleared by the next good start.
    stuck: Option<String>,
}

impl Server<'_> {
    fn serve(&mut self) -> String {
        loop {
            if let Some(sig) = sys::pending_signal() {
                log(&format!("got {}: stopping", sys::signal_name(sig)));
                return sys::signal_name(sig).to_string();
            }
            if Tokens::exists(&self.tokens.sidecar("shutdown")) {
                log("shutdown requested");
                return "shutdown".into();
            }
            if let Ok(mut scan) = self.tokens.requests(&mut self.refused) {
                for (q, refusal) in scan.refused {
                    self.error(&q, &refusal);
                }
                // A start before the stop of the same query.
                scan.requests.sort_by(|a, b| {
                    a.1.cmp(&b.1)
                        .then((a.0 != Request::Start).cmp(&(b.0 != Request::Start)))
                });
                for (req, q) in scan.requests {
                    self.handle(req, &q);
                }
            }
            // Woken by requests and shutdown only: our own answers never
            // start another pass.
            match &self.watch {
                Some(w) => w.wait_for(POLL.as_millis() as i32, &|n| self.tokens.wakes(n)),
                None => sleep(POLL),
            }
        }
    }

    fn call(&self, args: &[&str]) -> call::Ran {
        call::run(
            &self.opts.nsys_bin,
            args,
            &self.staging.join(".nsys-call.log"),
            self.opts.call_timeout,
        )
    }

    fn error(&self, q: &str, msg: &str) {
        log(msg);
        self.tokens.answer_error(q, msg);
    }

    fn handle(&mut self, req: Request, q: &str) {
        if let Err(refused) = self.tokens.take_request(req, q, &mut self.refused) {
            self.error(q, &refused);
            return;
        }
        match req {
            Request::Start => self.start(q),
            Request::Stop => self.stop(q, None),
        }
    }

    fn start(&mut self, q: &str) {
        if let Some(a) = &self.active {
            if a.query == q {
                // The driver retried: answer again.
                let _ = self
                    .tokens
                    .write(&self.tokens.query("started", q), &started(a));
            } else {
                let msg = format!(
                    "cannot start {q}: the collection of {} is still running; stop it first",
                    a.query
                );
                self.error(q, &msg);
            }
            return;
        }
        if self.seen.contains(q) {
            let msg = crate::tokens::query_seen(q, "served", &self.seen);
            self.error(q, &msg);
            return;
        }
        self.seen.insert(q.to_string());
        let dir = self.staging.join(q);
        if let Err(e) = fs::create_dir(&dir) {
            self.start_failed.insert(q.to_string());
            self.error(
                q,
                &format!(
                    "cannot create {}: {e}; query {q} runs unprofiled",
                    dir.display()
                ),
            );
            return;
        }
        let base = dir.join(format!("nsys_worker_w{}_{q}", self.tokens.worker));
        let out = base.to_string_lossy().into_owned();
        // The session first: nsys 2022.4's `start -o OUT -f true
        // --session=S` starts a collection whose `stop` hangs.
        let mut args = vec!["start".to_string()];
        args.extend(self.opts.session_arg());
        args.extend(self.opts.start_args.iter().cloned());
        args.extend(["-o", &out, "-f", "true"].map(String::from));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let ran = self.call(&args);
        if !ran.ok() {
            let stuck = self
                .stuck
                .as_ref()
                .map_or(String::new(), |s| format!("; {s}"));
            let _ = fs::remove_dir_all(&dir);
            self.start_failed.insert(q.to_string());
            self.error(
                q,
                &format!(
                    "nsys start failed for query {q} ({}); no collection runs, the query is \
                     not profiled{stuck}",
                    ran.describe()
                ),
            );
            return;
        }
        let a = Active {
            query: q.to_string(),
            dir,
            base,
            start: ran.call,
        };
        let _ = self
            .tokens
            .write(&self.tokens.query("started", q), &started(&a));
        log(&format!("started {q}: {}", a.base.display()));
        self.stuck = None;
        self.active = Some(a);
    }

    /// Stops the collection of `q` and hands it to the settling thread;
    /// `note`: why, when not by its stop token.
    fn stop(&mut self, q: &str, note: Option<String>) {
        if self.active.as_ref().is_none_or(|a| a.query != q) {
            if self.start_failed.contains(q) {
                log(&format!(
                    "stop for {q}, whose start failed: nothing to stop"
                ));
            } else {
                self.error(
                    q,
                    &format!("stop for query {q}, but no collection of {q} is running"),
                );
            }
            return;
        }
        let a = self.active.take().expect("checked");
        let mut args = vec!["stop".to_string()];
        args.extend(self.opts.session_arg());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let ran = self.call(&args);
        if !ran.ok() {
            log(&format!(
                "nsys stop for {q}: {}; watching for its report anyway",
                ran.describe()
            ));
            self.unstick(q, &ran);
        }
        let job = settler::Job {
            query: a.query,
            dir: a.dir,
            base: a.base,
            start: a.start,
            stop: ran.call,
            stop_output: ran.output,
            stopped: Instant::now(),
            note,
        };
        if self.tx.send(job).is_err() {
            log(&format!(
                "the settling thread is gone: the report of {q} stays in staging"
            ));
        }
    }

    /// A collection running at the end is stopped and its report settled
    /// like any other, marked with why it ended; a stop token written with
    /// the shutdown (a driver that stops its last query and shuts down at
    /// once) is taken as the stop it is.
    fn wind_down(&mut self, ending: &str) {
        if let Ok(scan) = self.tokens.requests(&mut self.refused) {
            for (req, q) in scan.requests {
                if req == Request::Stop && self.active.as_ref().is_some_and(|a| a.query == q) {
                    self.handle(req, &q);
                }
            }
        }
        if let Some(q) = self.active.as_ref().map(|a| a.query.clone()) {
            let note = format!(
                "the sidecar was ended ({ending}) during the collection of {q}: no stop token came"
            );
            log(&note);
            self.stop(&q, Some(note));
        }
    }
}

impl Server<'_> {
    /// After a failed or timed-out `stop` the session can stay in its
    /// `Generation` state, refusing every later `start` ("Configuring is
    /// not allowed in this state"): `nsys cancel` is tried (2022.4 answers
    /// "not implemented"), and the error token of `q`, the log and every
    /// later failed start say so, naming the session.
    fn unstick(&mut self, q: &str, stop: &call::Ran) {
        let mut args = vec!["cancel".to_string()];
        args.extend(self.opts.session_arg());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let cancel = self.call(&args);
        let session = self
            .opts
            .session
            .as_deref()
            .unwrap_or("the default session");
        let msg = format!(
            "nsys stop of query {q} failed ({}): nsys session {session} may be stuck; \
             nsys cancel: {}{}",
            stop.describe(),
            cancel.describe(),
            if cancel.ok() {
                ""
            } else {
                "; if later starts fail, end the session (nsys shutdown --session=NAME \
                 --kill=none) or restart the worker"
            }
        );
        log(&msg);
        self.stuck = Some(msg);
    }
}

fn started(a: &Active) -> String {
    format!("query={} output={}", a.query, a.base.display())
}
