//! One query's capture, from `start` to `queued`: list the worker's threads,
//! cut them into shards, attach every shard disabled, enable them all (the
//! attach barrier behind `started`), watch them while recording, stop them
//! (disable, FIFO `stop`, SIGINT, watchdog), and write the capture's files
//! into its staging directory. Publishing is not done here (see `publish`).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use jobprof_capture_format::{
    data_file_name, shard_log_name, write_dropped_tsv, write_shards_tsv, Capture, DroppedTid,
    EndCause, Phase, ShardPhase, ShardRow, CAPTURE_JSON, DROPPED_TIDS_TSV, FORMAT_VERSION,
    SHARDS_TSV, TARGET_TIDS_TXT,
};

use crate::shard::{RecordSpec, Shard};
use crate::sys::{self, now_ns};
use crate::tokens::write_atomic;

/// What every capture of one sidecar shares.
#[derive(Debug, Clone)]
pub struct Context {
    /// Worker index.
    pub worker: u32,
    /// Worker PID.
    pub pid: u32,
    /// `/proc/PID/exe`.
    pub exe: String,
    /// Host name.
    pub host: String,
    /// The node's boot id.
    pub boot_id: Option<String>,
    /// `SLURM_JOB_ID`.
    pub slurm_job_id: Option<String>,
    /// `perf --version`.
    pub perf_version: String,
    /// How perf records.
    pub spec: RecordSpec,
    /// Most threads per shard.
    pub threads_per_shard: usize,
    /// The worker's staging directory (`STAGING/worker_N`).
    pub worker_dir: PathBuf,
}

/// Whether perf is recording.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Enabled and sampling.
    Recording,
    /// Ended; files written (`queued`).
    Queued,
}

/// A capture in progress (or ended and queued for publication).
pub struct ActiveCapture {
    /// Query id.
    pub query: String,
    /// `capture.json` as it stands.
    pub meta: Capture,
    /// The staging directory of this capture.
    pub dir: PathBuf,
    shards: Vec<Shard>,
    failed: Vec<ShardRow>,
    dropped: Vec<DroppedTid>,
    /// When sampling was switched on.
    pub enabled_at: Option<Instant>,
    /// Recording or queued.
    pub state: State,
}

impl ActiveCapture {
    /// Prepares the capture of `query`: its staging directory and metadata.
    pub fn new(ctx: &Context, query: &str) -> io::Result<ActiveCapture> {
        let dir = ctx.worker_dir.join(query);
        fs::create_dir_all(&dir)?;
        let meta = Capture {
            format_version: FORMAT_VERSION,
            recorder_version: env!("CARGO_PKG_VERSION").to_string(),
            query: query.to_string(),
            worker: ctx.worker,
            host: ctx.host.clone(),
            boot_id: ctx.boot_id.clone(),
            slurm_job_id: ctx.slurm_job_id.clone(),
            pid: ctx.pid,
            exe: ctx.exe.clone(),
            event: ctx.spec.event.clone(),
            frequency: ctx.spec.frequency,
            call_graph: ctx.spec.call_graph.clone(),
            perf_version: ctx.perf_version.clone(),
            threads_per_shard: ctx.threads_per_shard as u32,
            shard_count: 0,
            target_thread_count: 0,
            dropped_thread_count: 0,
            enable_requested_unix_ns: None,
            enabled_unix_ns: None,
            disable_requested_unix_ns: None,
            disabled_unix_ns: None,
            phases: vec![],
            ended_by: None,
            valid: true,
            reason: None,
        };
        let mut c = ActiveCapture {
            query: query.to_string(),
            meta,
            dir,
            shards: vec![],
            failed: vec![],
            dropped: vec![],
            enabled_at: None,
            state: State::Recording,
        };
        c.meta.reach(Phase::Requested, now_ns());
        Ok(c)
    }

    /// Attaches every shard (disabled) and enables them all. On error the
    /// capture is ended (attached shards stopped, files written) and the
    /// message says which shard failed and why.
    pub fn attach_and_enable(
        &mut self,
        ctx: &Context,
        stop_timeout: Duration,
    ) -> Result<(), String> {
        let result = self.try_attach_and_enable(ctx);
        if let Err(e) = &result {
            self.meta.invalidate(e.clone());
            self.end(EndCause::AttachFailure, stop_timeout, &mut |_| {});
        }
        result
    }

    fn try_attach_and_enable(&mut self, ctx: &Context) -> Result<(), String> {
        let tids = sys::list_tids(ctx.pid)
            .map_err(|e| format!("cannot list /proc/{}/task: {e}", ctx.pid))?;
        let mut listing = String::new();
        for t in &tids {
            listing.push_str(&format!("{t}\n"));
        }
        write_atomic(&self.dir.join(TARGET_TIDS_TXT), listing.as_bytes()).map_err(|e| {
            format!(
                "cannot write {}: {e}",
                self.dir.join(TARGET_TIDS_TXT).display()
            )
        })?;
        self.meta.target_thread_count = tids.len() as u32;
        let chunks: Vec<&[u32]> = tids.chunks(ctx.threads_per_shard).collect();
        let count = chunks.len() as u32;
        self.meta.shard_count = count;
        let fifo_dir = ctx.worker_dir.join(format!(".fifo.{}", self.query));
        fs::create_dir_all(&fifo_dir)
            .map_err(|e| format!("cannot create {}: {e}", fifo_dir.display()))?;
        for (i, chunk) in chunks.iter().enumerate() {
            let i = i as u32;
            let data = self.dir.join(data_file_name(i, count));
            let log = self.dir.join(shard_log_name(i));
            match Shard::start(
                &ctx.spec,
                ctx.pid,
                i,
                chunk,
                data,
                log,
                &fifo_dir,
                &mut self.dropped,
            ) {
                Ok(s) => self.shards.push(s),
                Err(e) => {
                    self.failed.push(ShardRow {
                        shard: i,
                        phase: ShardPhase::Failed,
                        perf_pid: 0,
                        thread_count: 0,
                        first_tid: chunk.first().copied().unwrap_or(0),
                        last_tid: chunk.last().copied().unwrap_or(0),
                        exit_status: None,
                        data_file: data_file_name(i, count),
                        data_bytes: 0,
                    });
                    return Err(e);
                }
            }
        }
        self.meta.dropped_thread_count = self.dropped.len() as u32;
        self.meta.reach(Phase::Attached, now_ns());
        self.meta.enable_requested_unix_ns = Some(now_ns());
        let timeout = Duration::from_secs(ctx.spec.ready_timeout);
        for s in &mut self.shards {
            s.command("enable", timeout)
                .map_err(|e| format!("shard {}: {e}", s.index))?;
        }
        let now = now_ns();
        self.meta.enabled_unix_ns = Some(now);
        self.meta.reach(Phase::Enabled, now);
        self.enabled_at = Some(Instant::now());
        Ok(())
    }

    /// Threads attached and shards, for the `started` token.
    pub fn summary(&self) -> String {
        format!(
            "query={} shards={} threads={} dropped={}",
            self.query,
            self.shards.len(),
            self.shards.iter().map(|s| s.tids.len()).sum::<usize>(),
            self.dropped.len()
        )
    }

    /// While recording: the first shard whose perf exited on its own, as a
    /// message naming the shard and why.
    /// A shard whose threads all exited ends by itself with status 0; that
    /// is not a failure (its data is complete) and is only logged.
    pub fn dead_shard(&mut self) -> Option<String> {
        let pid = self.meta.pid;
        for s in &mut self.shards {
            if s.poll_exit() && s.stop_requested.is_none() && !s.targets_gone {
                if s.status == Some(0) && s.tids.iter().all(|&t| !sys::tid_exists(pid, t)) {
                    s.targets_gone = true;
                    eprintln!(
                        "jobprof-record sidecar: shard {} of {}: all its threads exited; perf finished",
                        s.index, self.query
                    );
                    continue;
                }
                return Some(format!(
                    "shard {} (perf pid {}, threads {}..{}) exited with {} while recording: {}",
                    s.index,
                    s.pid,
                    s.tids.first().copied().unwrap_or(0),
                    s.tids.last().copied().unwrap_or(0),
                    sys::describe_status(s.status.unwrap_or(-1)),
                    s.log_tail()
                ));
            }
        }
        None
    }

    /// Ends the capture: `disable` everywhere, FIFO `stop`, then SIGINT and
    /// the watchdog (`on_forced` is called with a message when SIGTERM or
    /// SIGKILL had to be sent); then writes the manifests and `capture.json`
    /// (phase `queued`). Calling it again does nothing.
    pub fn end(
        &mut self,
        cause: EndCause,
        stop_timeout: Duration,
        on_forced: &mut dyn FnMut(&str),
    ) {
        if self.state == State::Queued {
            return;
        }
        self.state = State::Queued;
        if self.meta.reached(Phase::Enabled) {
            self.meta.ended_by = Some(cause);
        }
        match cause {
            EndCause::Stop | EndCause::AttachFailure => {}
            EndCause::MaxCapture => self.meta.invalidate(format!(
                "stop never came: ended by --max-capture after {} s",
                self.enabled_at.map(|t| t.elapsed().as_secs()).unwrap_or(0)
            )),
            EndCause::WorkerExit => self.meta.invalidate(format!(
                "the worker (pid {}) exited during the capture",
                self.meta.pid
            )),
            EndCause::PerfFailure => self.meta.invalidate("a perf shard exited while recording"),
            EndCause::Shutdown => self.meta.invalidate("shutdown came before stop"),
            EndCause::Signal => self
                .meta
                .invalidate("the sidecar was signalled before stop"),
        }

        // Switch sampling off everywhere first, so the window ends at one
        // moment; perf may take a while to write its file after `stop`.
        let was_enabled = self.meta.reached(Phase::Enabled);
        if was_enabled {
            self.meta.disable_requested_unix_ns = Some(now_ns());
        }
        // A perf that does not acknowledge within 5 s (or the stop timeout,
        // when shorter) is left to the stop escalation below.
        let ack_wait = Duration::from_secs(5).min(stop_timeout);
        for s in &mut self.shards {
            if !s.poll_exit() {
                let _ = s.command("disable", ack_wait);
            }
        }
        if was_enabled {
            let now = now_ns();
            self.meta.disabled_unix_ns = Some(now);
            self.meta.reach(Phase::Disabled, now);
        }
        for s in &mut self.shards {
            s.request_stop();
        }
        loop {
            let mut all = true;
            for s in &mut self.shards {
                let (exited, fired) = s.drive_stop(stop_timeout);
                if fired {
                    on_forced(&format!(
                        "query {} shard {} (perf pid {}): perf did not stop within {} s; watchdog sent SIGTERM/SIGKILL",
                        self.query,
                        s.index,
                        s.pid,
                        stop_timeout.as_secs()
                    ));
                }
                all &= exited;
            }
            if all {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        for s in &mut self.shards {
            s.close_fifos();
        }
        let _ = fs::remove_dir(
            self.dir
                .parent()
                .unwrap_or(Path::new("/"))
                .join(format!(".fifo.{}", self.query)),
        );
        if !self.shards.is_empty() {
            self.meta.reach(Phase::Stopped, now_ns());
        }
        for s in &self.shards {
            if !matches!(s.status, Some(0) | Some(130)) {
                self.meta.invalidate(format!(
                    "shard {} (perf pid {}) ended with {}",
                    s.index,
                    s.pid,
                    sys::describe_status(s.status.unwrap_or(-1))
                ));
            }
        }
        if !self.meta.reached(Phase::Enabled) {
            self.meta.invalidate("sampling was never enabled");
        }
    }

    /// Writes `perf-shards.tsv`, `perf-dropped-tids.tsv` and `capture.json`
    /// (with phase `queued`) into the staging directory.
    pub fn write_files(&mut self) -> io::Result<()> {
        let count = self.meta.shard_count;
        let mut rows: Vec<ShardRow> = self
            .shards
            .iter()
            .map(|s| s.row(&data_file_name(s.index, count)))
            .collect();
        rows.extend(self.failed.iter().cloned());
        rows.sort_by_key(|r| r.shard);
        write_atomic(
            &self.dir.join(SHARDS_TSV),
            write_shards_tsv(&rows).as_bytes(),
        )?;
        write_atomic(
            &self.dir.join(DROPPED_TIDS_TSV),
            write_dropped_tsv(&self.dropped).as_bytes(),
        )?;
        if !self.dir.join(TARGET_TIDS_TXT).exists() {
            write_atomic(&self.dir.join(TARGET_TIDS_TXT), b"")?;
        }
        self.meta.reach(Phase::Queued, now_ns());
        write_atomic(&self.dir.join(CAPTURE_JSON), self.meta.to_json().as_bytes())
    }
}
