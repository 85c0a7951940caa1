//! The serving loop of a ready sidecar ([`Server`]): requests read from
//! the token directory and answered one at a time, the next capture armed
//! between them, each ended capture published before its answer, and
//! the end (shutdown, signal, the worker's exit) with what is left to
//! publish. Its parent holds the life around it (lock, preflight, symbols).

use super::*;

pub(super) struct Server {
    tokens: Tokens,
    ctx: Context,
    out_worker: PathBuf,
    stop_timeout: Duration,
    max_capture: u64,
    pid: u32,
    start_time: u64,
    active: Option<ActiveCapture>,
    /// Ended captures whose publication failed (retried at shutdown).
    unpublished: Vec<ActiveCapture>,
    /// Captures published so far.
    pub(super) published: usize,
    /// Query ids captured (or attempted) in this sidecar's life.
    seen: BTreeSet<String>,
    /// The `finished` answer of every ended capture, by query id.
    ended: BTreeMap<String, String>,
    /// Armed captures so far (their staging names).
    arm_seq: u32,
    /// Pre-arming is on (`--no-prearm` turns it off; so does a nofile limit
    /// too low for it).
    prearm: bool,
    /// The next capture is to be armed (at ready, after each capture).
    arm_wanted: bool,
    /// The next capture, attached and disabled.
    armed: Option<ActiveCapture>,
    /// Wakes the loop when a request is written on this node.
    watch: Option<sys::DirWatch>,
    /// Requests refused and still there (refused once).
    refused: Refused,
    /// `STAGING/worker_N`, where the symbol snapshot is.
    worker_dir: PathBuf,
    /// What the symbol snapshot holds (grown as the worker maps more).
    symbols: symfs::Held,
    symfs_limit: u64,
    /// `--jit-maps auto`: snapshot JIT maps at each stop.
    jit_maps: bool,
    /// The worker files were published at start-up (else they are, whole,
    /// at shutdown).
    files_published: bool,
}

impl Server {
    pub(super) fn new(
        opts: &SidecarOpts,
        tokens: &Tokens,
        me: &SidecarId,
        worker: &Worker,
    ) -> Server {
        Server {
            prearm: opts.prearm,
            arm_wanted: false,
            armed: None,
            watch: sys::DirWatch::new(&opts.token_dir),
            refused: Refused::default(),
            tokens: tokens.clone(),
            ctx: context(opts, tokens, me, worker),
            out_worker: worker.out.clone(),
            stop_timeout: Duration::from_secs(opts.stop_timeout),
            max_capture: opts.max_capture,
            pid: worker.pid,
            start_time: worker.start_time,
            active: None,
            unpublished: Vec::new(),
            published: 0,
            seen: BTreeSet::new(),
            ended: BTreeMap::new(),
            arm_seq: 0,
            worker_dir: worker.dir.clone(),
            symbols: worker.symbols.clone(),
            symfs_limit: opts.symfs_limit,
            jit_maps: opts.jit_maps,
            files_published: worker.files_published,
        }
    }

    /// Adds to the symbol snapshot the files the worker maps now that it
    /// has not looked at yet (libraries loaded after `ready`, even during
    /// the capture of `q`), and publishes them: called when a capture has
    /// ended, before it is published, so that its frames in them are named.
    fn add_late_symbols(&mut self, q: &str) {
        // The worker exited (its pid maybe reused): nothing of it to add.
        if sys::proc_stat(self.pid).map(|(_, t)| t) != Some(self.start_time) {
            return;
        }
        let note = format!(" [mapped after ready; added when {q} ended]");
        let added = symfs::add_new(
            self.pid,
            self.start_time,
            &self.worker_dir,
            self.symfs_limit,
            &mut self.symbols,
            &note,
        );
        let a = match added {
            Ok(a) if a.summary == symfs::Summary::default() => return,
            Ok(a) => a,
            Err(e) => {
                log(&format!(
                    "symfs: cannot look for files mapped since the snapshot (pid {}): {e}",
                    self.pid
                ));
                return;
            }
        };
        let s = &a.summary;
        log(&format!(
            "symfs: added {} file(s) mapped since the snapshot ({} bytes, {} separate debug file(s)) when {q} ended, skipped {}",
            s.copied, s.bytes, s.debug_files, s.skipped
        ));
        if self.files_published {
            if let Err(e) = publish::symfs_additions(&self.worker_dir, &self.out_worker, &a.files) {
                // Published whole at shutdown instead.
                log(&format!(
                    "symfs: cannot publish the added files yet (retried at shutdown): {e}"
                ));
                self.files_published = false;
            }
        }
    }

    /// Copies the worker's JIT maps into the capture (asking a JVM to write
    /// its map first), within what is left of `--symfs-limit`, and lists
    /// them in the manifest: after the query, before the capture is
    /// published and `stop` returns.
    fn snapshot_jit(&mut self, c: &ActiveCapture) {
        if !self.jit_maps || sys::proc_stat(self.pid).map(|(_, t)| t) != Some(self.start_time) {
            return;
        }
        let since = c
            .enabled_at
            .and_then(|t| std::time::SystemTime::now().checked_sub(t.elapsed()))
            .unwrap_or(std::time::UNIX_EPOCH);
        let room = self.symfs_limit.saturating_sub(self.symbols.bytes());
        let note = format!(" [taken when {} ended]", c.query);
        let t = crate::jit::snapshot(self.pid, self.start_time, &c.dir, room, since, true, &note);
        if !t.log.is_empty() {
            log(&t.log);
        }
        if t.rows.is_empty() {
            return;
        }
        self.symbols.count(t.bytes);
        if let Err(e) = crate::jit::append_manifest(&self.worker_dir, &t.rows) {
            log(&format!(
                "jit: cannot list the JIT maps in the manifest: {e}"
            ));
            return;
        }
        if self.files_published {
            if let Err(e) = publish::symfs_additions(&self.worker_dir, &self.out_worker, &[]) {
                log(&format!(
                    "jit: cannot publish the manifest yet (retried at shutdown): {e}"
                ));
                self.files_published = false;
            }
        }
    }

    /// Once serving ended: the armed capture is discarded (it never
    /// sampled); a running one is ended, marked invalid with the reason,
    /// and published, and its driver gets the error token.
    pub(super) fn wind_down(&mut self, ending: &Ending) {
        let pid = self.pid;
        if let Some(a) = self.armed.take() {
            let dir = a.dir.clone();
            a.discard();
            log(&format!(
                "the armed capture ({}) never sampled: its perf processes killed, {} removed, nothing published",
                ending_name(ending, pid),
                dir.display()
            ));
        }
        let cause = match ending {
            Ending::Shutdown => EndCause::Shutdown,
            Ending::Signal(_) => EndCause::Signal,
            Ending::WorkerExit => EndCause::WorkerExit,
        };
        if let Some(mut c) = self.active.take() {
            let msg = match ending {
                Ending::WorkerExit => format!(
                    "{INVALID_PREFIX}the worker (pid {pid}) exited during the capture of {}; capture kept, marked invalid",
                    c.query
                ),
                _ => format!(
                    "{INVALID_PREFIX}the sidecar was ended ({}) during the capture of {}; capture kept, marked invalid",
                    ending_name(ending, pid),
                    c.query
                ),
            };
            let q = c.query.clone();
            self.end(&mut c, cause);
            self.settle(c);
            let _ = self.tokens.write(&self.tokens.query("error", &q), &msg);
        }
    }

    /// Publishes what could not be published yet (the worker files, ended
    /// captures); returns what failed.
    pub(super) fn publish_rest(&mut self, worker: &Worker) -> Vec<String> {
        let mut errors = Vec::new();
        if !self.files_published {
            if let Err(e) = publish::worker_files(&worker.dir, &worker.out) {
                errors.push(e);
            }
        }
        for c in std::mem::take(&mut self.unpublished) {
            match publish::capture(&c.dir, &worker.out, &c.meta) {
                Ok(()) => {
                    self.published += 1;
                    log(&format!(
                        "published {}",
                        worker.out.join(&c.query).display()
                    ));
                }
                Err(e) => errors.push(e),
            }
        }
        errors
    }

    pub(super) fn serve(&mut self) -> Ending {
        let (pid, start_time) = (self.pid, self.start_time);
        loop {
            if let Some(sig) = sys::pending_signal() {
                log(&format!("got {}: stopping", sys::signal_name(sig)));
                return Ending::Signal(sig);
            }
            if Tokens::exists(&self.tokens.sidecar("shutdown")) {
                log("shutdown requested");
                return Ending::Shutdown;
            }
            if !sys::alive(pid, start_time) {
                log(&format!("worker pid {pid} exited"));
                return Ending::WorkerExit;
            }
            // Armed in the turn after a capture ended, so that a shutdown
            // written right after the last `stop` is seen first.
            if self.active.is_none() && self.arm_wanted {
                self.arm_wanted = false;
                self.arm();
            }
            self.watch_active();
            if let Ok(scan) = self.tokens.requests(&mut self.refused) {
                for (q, refusal) in scan.refused {
                    self.error(&q, &refusal);
                }
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

    /// Arms the next capture (see `capture`); when that is impossible the
    /// next `start` attaches instead, and the log says why.
    pub(super) fn arm(&mut self) {
        if !self.prearm || self.armed.is_some() || !sys::alive(self.pid, self.start_time) {
            return;
        }
        if let Some(why) = self.nofile_shortfall() {
            log(&format!(
                "not pre-arming: {why}; each capture attaches at `start` instead"
            ));
            self.prearm = false;
            return;
        }
        self.arm_seq += 1;
        let name = format!("{ARMED_PREFIX}{}", self.arm_seq);
        let t = Instant::now();
        match ActiveCapture::arm(&self.ctx, &name) {
            Ok(c) => {
                log(&format!(
                    "armed the next capture in {} ms: {}",
                    t.elapsed().as_millis(),
                    c.armed_summary()
                ));
                self.armed = Some(c);
            }
            Err(e) => log(&format!(
                "cannot pre-arm the next capture (it attaches at `start` instead): {e}"
            )),
        }
    }

    /// Why arming would pass the open-files limit, if it would. perf opens
    /// descriptors per thread, per event (ours plus its dummy side-band
    /// event) and per CPU plus one: measured with perf 6.1 on 2 CPUs, 6
    /// per thread (759 for a shard of 125 threads); the sidecar holds two
    /// FIFOs per shard.
    fn nofile_shortfall(&self) -> Option<String> {
        let soft = sys::nofile_soft();
        let threads = sys::list_tids(self.pid).map(|t| t.len()).unwrap_or(0);
        let per = self.ctx.threads_per_shard;
        let per_thread = perf_fds_per_thread(&self.ctx.spec.event);
        let perf_needs = (per.min(threads.max(1)) * per_thread + NOFILE_MARGIN) as u64;
        let sidecar_needs = (2 * threads.div_ceil(per.max(1)) + NOFILE_MARGIN) as u64;
        let need = perf_needs.max(sidecar_needs);
        (need > soft).then(|| {
            format!(
                "{threads} threads in shards of {per} need about {need} open files per perf \
                 process ({per_thread} per thread) and the open-files limit is {soft} (raise \
                 `ulimit -n` or lower --threads-per-shard)"
            )
        })
    }

    /// Ends the capture, naming the watchdog in the forced token if it fired.
    fn end(&self, c: &mut ActiveCapture, cause: EndCause) {
        let tokens = self.tokens.clone();
        c.end(cause, self.stop_timeout, &mut |msg| {
            log(msg);
            let _ = tokens.write(&tokens.forced(), msg);
        });
        if let Err(e) = c.write_files() {
            log(&format!(
                "cannot write the files of {} in {}: {e}",
                c.query,
                c.dir.display()
            ));
        }
    }

    /// Checks the running capture: dead perf, `stop`, `--max-capture`.
    /// An ended capture is published at once; the driver's answer
    /// (`finished` or the error token) comes after that.
    fn watch_active(&mut self) {
        let Some(mut c) = self.active.take() else {
            return;
        };
        let stop = self.tokens.query("stop", &c.query);
        if let Some(msg) = c.dead_shard() {
            // perf also ends when the worker dies; give the worker check a
            // moment so that case is reported as what it is.
            sleep(Duration::from_millis(300));
            if !sys::alive(self.pid, self.start_time) {
                self.active = Some(c);
                return;
            }
            log(&msg);
            c.meta.invalidate(msg.clone());
            self.end(&mut c, EndCause::PerfFailure);
            let q = c.query.clone();
            self.settle(c);
            self.error(&q, &format!("{INVALID_PREFIX}{msg}"));
        } else if Tokens::is_file(&stop) {
            // Anything else under its name is refused by the requests' scan.
            let _ = Tokens::remove(&stop);
            self.end(&mut c, EndCause::Stop);
            let q = c.query.clone();
            self.settle(c);
            self.answer_finished(&q);
        } else if self.max_capture > 0
            && c.enabled_at
                .is_some_and(|t| t.elapsed().as_secs() >= self.max_capture)
        {
            let msg = format!(
                "{INVALID_PREFIX}capture of {} ended by --max-capture after {} s: stop never came; capture kept, marked invalid",
                c.query, self.max_capture
            );
            self.end(&mut c, EndCause::MaxCapture);
            let q = c.query.clone();
            self.settle(c);
            self.error(&q, &msg);
        } else {
            self.active = Some(c);
        }
    }

    /// Publishes an ended capture and remembers its `finished` answer; a
    /// capture that cannot be published yet stays in staging and is
    /// retried at shutdown.
    fn settle(&mut self, c: ActiveCapture) {
        let mut answer = format!(
            "query={} ended_by={} valid={}",
            c.query,
            c.meta.ended_by.map(|e| e.as_str()).unwrap_or("-"),
            c.meta.valid
        );
        if let Some(r) = &c.meta.reason {
            answer.push_str(&format!("\nreason: {r}"));
        }
        self.snapshot_jit(&c);
        self.add_late_symbols(&c.query);
        let result = publish::capture(&c.dir, &self.out_worker, &c.meta);
        // Published, or left in staging for shutdown: no longer written.
        if let Err(e) = publish::unmark_capturing(&self.out_worker) {
            log(&e);
        }
        let q = c.query.clone();
        match result {
            Ok(()) => {
                self.published += 1;
                log(&format!(
                    "published {}",
                    self.out_worker.join(&c.query).display()
                ));
                answer.push_str(&format!(
                    "\npublished: {}",
                    self.out_worker.join(&c.query).display()
                ));
            }
            Err(e) => {
                log(&format!("cannot publish {} yet: {e}", c.query));
                answer.push_str(&format!("\nnot published: {e}"));
                self.unpublished.push(c);
            }
        }
        self.ended.insert(q, answer);
    }

    fn answer_finished(&self, q: &str) {
        if let Some(answer) = self.ended.get(q) {
            let _ = self.tokens.write(&self.tokens.query("finished", q), answer);
        }
    }

    fn error(&self, q: &str, msg: &str) {
        log(msg);
        self.tokens.answer_error(q, msg);
    }

    fn handle(&mut self, req: Request, q: &str) {
        if let Some(c) = self.active.as_ref().filter(|c| c.query == q) {
            // The running capture's stop is handled by watch_active; a
            // repeated start for it (the driver retried, clearing `started`)
            // is answered again.
            if req == Request::Start {
                match self.tokens.take_request(req, q, &mut self.refused) {
                    Ok(()) => {
                        let _ = self
                            .tokens
                            .write(&self.tokens.query("started", q), &c.summary());
                    }
                    Err(refused) => self.error(q, &refused),
                }
            }
            return;
        }
        if let Err(refused) = self.tokens.take_request(req, q, &mut self.refused) {
            self.error(q, &refused);
            return;
        }
        match req {
            Request::Stop => {
                if self.ended.contains_key(q) {
                    // Ended earlier (max-capture, perf failure): say so again.
                    self.answer_finished(q);
                } else {
                    self.error(
                        q,
                        &format!("stop for query {q}, but no capture of {q} is running"),
                    );
                }
            }
            Request::Start => {
                if let Some(other) = &self.active {
                    let msg = format!(
                        "cannot start {q}: the capture of {} is still running; stop it first",
                        other.query
                    );
                    self.error(q, &msg);
                    return;
                }
                if self.seen.contains(q) {
                    let msg = crate::tokens::query_seen(q, "captured", &self.seen);
                    self.error(q, &msg);
                    return;
                }
                self.seen.insert(q.to_string());
                self.start(q);
            }
        }
    }

    fn start(&mut self, q: &str) {
        log(&format!("start {q}"));
        let armed = self
            .armed
            .take()
            .and_then(|mut a| match a.begin(&self.ctx, q) {
                Ok(()) => Some(a),
                Err(e) => {
                    log(&format!(
                        "cannot take the armed capture {} as {q} ({e}); attaching at start",
                        a.dir.display()
                    ));
                    a.discard();
                    None
                }
            });
        let created = match armed {
            Some(a) => Ok(a),
            None => ActiveCapture::new(&self.ctx, q),
        };
        // Whatever happens to this capture, the next one is armed after it.
        self.arm_wanted = self.prearm;
        let mut c = match created {
            Ok(c) => c,
            Err(e) => {
                let dir: PathBuf = self.ctx.worker_dir.join(q);
                self.error(q, &format!("cannot create {}: {e}", dir.display()));
                return;
            }
        };
        // `jobprof process` meanwhile says the capture is being written.
        if let Err(e) = publish::mark_capturing(&self.out_worker, q, &c.dir) {
            log(&format!("cannot mark {q} as being written: {e}"));
        }
        match c.attach_and_enable(&self.ctx, self.stop_timeout) {
            Ok(()) => {
                let _ = self
                    .tokens
                    .write(&self.tokens.query("started", q), &c.summary());
                // After the answer: the driver does not wait for this.
                let _ = c.save();
                log(&format!("started {}", c.summary()));
                self.active = Some(c);
            }
            Err(e) => {
                if let Err(e) = c.write_files() {
                    log(&format!("cannot write the files of {q}: {e}"));
                }
                debug_assert_eq!(c.state, State::Queued);
                self.settle(c);
                self.error(q, &format!("cannot start the capture of {q}: {e}"));
            }
        }
    }
}
