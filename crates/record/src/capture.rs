//! One query's capture, from `start` to `queued`: list the worker's threads,
//! cut them into shards, attach every shard disabled, enable them all (the
//! attach barrier behind `started`), watch them while recording, stop them
//! (disable, FIFO `stop`, SIGINT, watchdog), and write the capture's files
//! into its staging directory. Publishing is not done here (see `publish`).
//!
//! A capture can also be armed ahead of its query ([`ActiveCapture::arm`]):
//! its shards are attached disabled under a staging name, and `start` then
//! only renames it to the query id, attaches what is new and enables every
//! shard. Attaching runs the shards in parallel, bounded by the cores.

use std::collections::BTreeSet;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use jobprof_capture_format::{
    data_file_name, shard_log_name, write_dropped_tsv, write_shards_tsv, Capture, DroppedTid,
    EndCause, Phase, ShardCut, ShardPhase, ShardRow, CAPTURE_JSON, DROPPED_TIDS_TSV,
    FORMAT_VERSION, SHARDS_TSV, TARGET_TIDS_TXT,
};

use crate::pool;
use crate::shard::{RecordSpec, Shard};
use crate::symfs;
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
    /// The `shutdown` token: attaching stops starting shards once it (or
    /// SIGTERM/SIGINT) is there.
    pub shutdown_token: PathBuf,
}

/// Whether perf is recording.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Attached ahead of the query, disabled, under a staging name.
    Armed,
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
    dropped_shards: u32,
    /// When sampling was switched on.
    pub enabled_at: Option<Instant>,
    /// Armed, recording or queued.
    pub state: State,
    /// The directory of the shards' control FIFOs.
    fifo_dir: PathBuf,
    /// What arming saw (`None` once used, or when not armed).
    armed: Option<ArmedView>,
}

/// What arming saw, to tell at `start` whether the armed shards' records
/// are complete: perf (6.1) records no `MMAP`, `FORK` or `COMM` while its
/// events are disabled, and its control FIFO cannot switch its tracking
/// (dummy) event on alone.
struct ArmedView {
    /// The threads listed.
    tids: Vec<u32>,
    /// When (clock ticks since boot) the first perf was started.
    ticks: u64,
    /// The worker's executable file mappings before the first perf started
    /// (every shard synthesized these when it attached).
    maps: BTreeSet<String>,
}

/// What attaching a set of shards gave.
#[derive(Default)]
struct Attached {
    shards: Vec<Shard>,
    failed: Vec<ShardRow>,
    dropped: Vec<DroppedTid>,
    dropped_shards: u32,
    /// Shards not started: another failed, or shutdown came.
    skipped: u32,
    error: Option<String>,
}

/// One attach job's result: shard number, threads, threads dropped, and
/// the shard (`None`: all its threads exited; `Err("")`: skipped).
type AttachResult = (
    u32,
    Vec<u32>,
    Vec<DroppedTid>,
    Result<Option<Shard>, String>,
);

impl Attached {
    /// Sorts the results of a capture of `count` shards into started,
    /// dropped, skipped and failed shards.
    fn of(results: Vec<AttachResult>, count: u32) -> Attached {
        let mut o = Attached::default();
        for (i, chunk, dropped, result) in results {
            o.dropped.extend(dropped);
            match result {
                Ok(Some(s)) => o.shards.push(s),
                // Every thread of the shard exited before perf attached:
                // the shard is dropped (its threads are listed), the
                // capture goes on.
                Ok(None) => o.dropped_shards += 1,
                // Skipped after another shard failed.
                Err(e) if e.is_empty() => o.skipped += 1,
                Err(e) => {
                    o.failed.push(ShardRow {
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
                    o.error.get_or_insert(e);
                }
            }
        }
        o
    }
}

impl ActiveCapture {
    /// Prepares the capture of `query`: its staging directory (mode 0700)
    /// and metadata, written at once (`capture.json` with phase
    /// `requested`), so that a capture whose sidecar dies says what it is.
    /// A directory of the same query left in staging by a dead sidecar (a
    /// requeued job) is kept, renamed to `Q.abandoned-<unix time>`.
    pub fn new(ctx: &Context, query: &str) -> io::Result<ActiveCapture> {
        let mut c = ActiveCapture::staged(ctx, query)?;
        c.meta.reach(Phase::Requested, now_ns());
        c.save()?;
        Ok(c)
    }

    /// The staging directory `name` (mode 0700, an earlier one moved aside)
    /// and the capture's metadata, no phase reached yet.
    fn staged(ctx: &Context, query: &str) -> io::Result<ActiveCapture> {
        use std::os::unix::fs::DirBuilderExt;
        let dir = ctx.worker_dir.join(query);
        set_aside(&ctx.worker_dir, query)?;
        fs::DirBuilder::new().mode(0o700).create(&dir)?;
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
            user_regs: ctx.spec.user_regs.clone(),
            perf_version: ctx.perf_version.clone(),
            threads_per_shard: ctx.threads_per_shard as u32,
            shard_count: 0,
            target_thread_count: 0,
            dropped_thread_count: 0,
            dropped_shard_count: 0,
            max_shard_size: ctx.spec.max_size,
            armed_unix_ns: None,
            reattached_because: None,
            size_limited: vec![],
            enable_requested_unix_ns: None,
            enabled_unix_ns: None,
            disable_requested_unix_ns: None,
            disabled_unix_ns: None,
            phases: vec![],
            ended_by: None,
            valid: true,
            reason: None,
        };
        Ok(ActiveCapture {
            query: query.to_string(),
            meta,
            dir,
            shards: vec![],
            failed: vec![],
            dropped: vec![],
            dropped_shards: 0,
            enabled_at: None,
            state: State::Recording,
            fifo_dir: ctx.worker_dir.join(format!(".fifo.{query}")),
            armed: None,
        })
    }

    /// Arms a capture ahead of its query: lists the worker's threads and
    /// attaches every shard disabled (in parallel) into the staging
    /// directory `name` (a name no query id can have). Nothing samples
    /// until `start` enables the shards. On error every attached shard is
    /// killed and the staging directory removed ([`ActiveCapture::discard`]).
    pub fn arm(ctx: &Context, name: &str) -> Result<ActiveCapture, String> {
        let mut c = ActiveCapture::staged(ctx, name)
            .map_err(|e| format!("cannot create {}: {e}", ctx.worker_dir.join(name).display()))?;
        c.state = State::Armed;
        let result = c.try_arm(ctx);
        match result {
            Ok(()) => Ok(c),
            Err(e) => {
                c.discard();
                Err(e)
            }
        }
    }

    fn try_arm(&mut self, ctx: &Context) -> Result<(), String> {
        let tids = self.list_and_write_targets(ctx.pid, &[])?;
        let (jobs, count) = numbered_shards(&tids, ctx.threads_per_shard);
        // Before the first perf starts: no thread created before this can
        // be followed through --inherit, and every shard synthesizes these
        // mappings.
        let before_attach = sys::boot_ticks();
        let maps = exec_file_maps(ctx.pid)
            .map_err(|e| format!("cannot read /proc/{}/maps: {e}", ctx.pid))?;
        self.attach(ctx, jobs, count)?;
        if self.shards.is_empty() {
            return Err(format!(
                "all {} threads of pid {} exited before perf could attach",
                tids.len(),
                ctx.pid
            ));
        }
        self.armed = Some(ArmedView {
            tids,
            ticks: before_attach,
            maps,
        });
        self.meta.armed_unix_ns = Some(now_ns());
        self.count();
        self.save().map_err(|e| {
            format!(
                "cannot write {}: {e}",
                self.dir.join(CAPTURE_JSON).display()
            )
        })
    }

    /// The armed capture becomes the capture of `query`: its staging
    /// directory is renamed (perf keeps writing into its open files) and
    /// phase `requested` is stamped.
    pub fn begin(&mut self, ctx: &Context, query: &str) -> io::Result<()> {
        set_aside(&ctx.worker_dir, query)?;
        let dir = ctx.worker_dir.join(query);
        fs::rename(&self.dir, &dir)?;
        for s in &mut self.shards {
            let data = dir.join(s.data.file_name().unwrap_or_default());
            let log = dir.join(s.log.file_name().unwrap_or_default());
            s.moved(data, log);
        }
        self.dir = dir;
        self.query = query.to_string();
        self.meta.query = query.to_string();
        // capture.json is written again once the shards are enabled.
        self.meta.reach(Phase::Requested, now_ns());
        Ok(())
    }

    /// Kills the shards of an armed capture that never sampled and removes
    /// its staging directory: nothing of it is published.
    pub fn discard(mut self) {
        // Their data is thrown away: perf is killed (at once, even when
        // the machine is loaded) rather than asked to finish its file.
        self.shards.clear();
        let _ = fs::remove_dir(&self.fifo_dir);
        let _ = fs::remove_dir_all(&self.dir);
    }

    /// Threads attached (and shards) while armed, for the log.
    pub fn armed_summary(&self) -> String {
        format!(
            "{} shards, {} threads, {} dropped",
            self.shards.len(),
            self.shards.iter().map(|s| s.tids.len()).sum::<usize>(),
            self.dropped.len()
        )
    }

    /// Writes `capture.json` as it stands (phases so far) into staging.
    pub fn save(&self) -> io::Result<()> {
        write_atomic(&self.dir.join(CAPTURE_JSON), self.meta.to_json().as_bytes())
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
        if self.state == State::Armed {
            let now = self.catch_up(ctx)?;
            // Checked last, right before `enable`, so that the window in
            // which a change goes unseen is as short as can be.
            if let Some(why) = self.changed_while_armed(ctx.pid, &now)? {
                self.attach_anew(ctx, why)?;
            }
        } else {
            self.attach_listed(ctx)?;
        }
        self.state = State::Recording;
        if self.shards.is_empty() {
            return Err(format!(
                "all {} threads of pid {} exited before perf could attach",
                self.meta.target_thread_count, ctx.pid
            ));
        }
        self.meta.reach(Phase::Attached, now_ns());
        self.enable_all(ctx)?;
        let now = now_ns();
        self.meta.enabled_unix_ns = Some(now);
        self.meta.reach(Phase::Enabled, now);
        self.enabled_at = Some(Instant::now());
        self.count();
        // The caller saves capture.json (it says the capture is recording,
        // should the sidecar die) once `started` is written.
        Ok(())
    }

    /// Lists the worker's threads and attaches them all (the capture not
    /// armed).
    fn attach_listed(&mut self, ctx: &Context) -> Result<(), String> {
        let tids = self.list_and_write_targets(ctx.pid, &[])?;
        let (jobs, count) = numbered_shards(&tids, ctx.threads_per_shard);
        self.attach(ctx, jobs, count)
    }

    /// What the armed shards have no record of, counted, or `None` when
    /// nothing: executable files the worker mapped since arming (no `MMAP`:
    /// their frames would be `[unknown]`) and live threads created since
    /// the first perf started (followed through `--inherit`, but with no
    /// `FORK` or `COMM`: perf would name them `:TID`). Threads that exited
    /// while armed and libraries unmapped while armed lose nothing.
    /// `now`: the worker's threads, listed last.
    fn changed_while_armed(&mut self, pid: u32, now: &[u32]) -> Result<Option<String>, String> {
        let Some(view) = self.armed.take() else {
            return Ok(None);
        };
        let maps = exec_file_maps(pid).map_err(|e| format!("cannot read /proc/{pid}/maps: {e}"))?;
        let new_maps = maps.difference(&view.maps).count();
        let known: BTreeSet<u32> = view
            .tids
            .iter()
            .chain(self.shards.iter().flat_map(|s| s.tids.iter()))
            .copied()
            .collect();
        // Created in or after the clock tick the first perf started in (the
        // same tick counts: it cannot be told apart).
        let created = now
            .iter()
            .filter(|t| !known.contains(t))
            .filter(|&&t| sys::tid_start_ticks(pid, t).is_some_and(|st| st >= view.ticks))
            .count();
        let mut what = Vec::new();
        if new_maps > 0 {
            what.push(format!(
                "{new_maps} executable mapping{} new",
                plural(new_maps)
            ));
        }
        if created > 0 {
            what.push(format!("{created} thread{} created", plural(created)));
        }
        Ok((!what.is_empty()).then(|| format!("{} while armed", what.join(", "))))
    }

    /// The armed shards lack records of what changed while armed (`why`):
    /// they are killed (they never sampled), their files removed, and the
    /// capture is attached anew, as without arming (in parallel). Says so
    /// in the log and in `capture.json` (`reattached_because`).
    fn attach_anew(&mut self, ctx: &Context, why: String) -> Result<(), String> {
        eprintln!(
            "jobprof-record sidecar: capture {}: {why}, which perf does not record while \
             disabled: the armed shards are discarded and the capture attached anew at `start`",
            self.query
        );
        self.meta.reattached_because = Some(why);
        for s in std::mem::take(&mut self.shards) {
            let data = s.data.clone();
            drop(s);
            let _ = fs::remove_file(data);
        }
        self.failed.clear();
        self.dropped.clear();
        self.dropped_shards = 0;
        self.attach_listed(ctx)
    }

    /// Lists the worker's threads into `perf-target-tids.txt` (with
    /// `also`: threads listed earlier); returns the listing.
    fn list_and_write_targets(&mut self, pid: u32, also: &[u32]) -> Result<Vec<u32>, String> {
        let tids = sys::list_tids(pid).map_err(|e| format!("cannot list /proc/{pid}/task: {e}"))?;
        self.write_targets(&tids, also)?;
        Ok(tids)
    }

    /// Writes `perf-target-tids.txt`: the threads given to perf (attached
    /// or dropped), `a` and `b` together.
    fn write_targets(&mut self, a: &[u32], b: &[u32]) -> Result<(), String> {
        let all: BTreeSet<u32> = a.iter().chain(b).copied().collect();
        let mut listing = String::new();
        for t in &all {
            listing.push_str(&format!("{t}\n"));
        }
        let path = self.dir.join(TARGET_TIDS_TXT);
        write_atomic(&path, listing.as_bytes())
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        self.meta.target_thread_count = all.len() as u32;
        Ok(())
    }

    /// At `start` of an armed capture: shards whose perf ended while armed
    /// (all their threads exited) are dropped, threads that exited while
    /// armed are dropped from their shards (both listed in
    /// `perf-dropped-tids.tsv`), and threads perf does not follow are
    /// attached in new shards: the live threads of a shard whose perf ended
    /// otherwise, and threads created after the listing but in a clock
    /// tick before the first perf started (no perf could follow them).
    /// Threads created later are not attached here: perf follows those
    /// created by a thread it records (`--inherit`), but without their
    /// `FORK`/`COMM` while armed, so [`ActiveCapture::changed_while_armed`]
    /// has the capture attached anew when there are any.
    ///
    /// Returns the worker's threads as listed last: at the start of this,
    /// or after attaching when it attached new shards.
    fn catch_up(&mut self, ctx: &Context) -> Result<Vec<u32>, String> {
        let Some(view) = self.armed.as_ref() else {
            return Ok(Vec::new());
        };
        let (listed, armed_ticks) = (view.tids.clone(), view.ticks);
        let pid = ctx.pid;
        // One listing, not one lookup per thread: this is `start`'s path.
        let now = sys::list_tids(pid).map_err(|e| format!("cannot list /proc/{pid}/task: {e}"))?;
        let live: BTreeSet<u32> = now.iter().copied().collect();
        let mut known: BTreeSet<u32> = listed.iter().copied().collect();
        let (next_index, again) = self.prune_armed(&live, &mut known);
        let mut fresh: Vec<u32> = now
            .iter()
            .copied()
            .filter(|t| !known.contains(t))
            .filter(|&t| sys::tid_start_ticks(pid, t).is_some_and(|st| st < armed_ticks))
            .collect();
        fresh.extend(again);
        fresh.sort_unstable();
        fresh.dedup();
        // Threads followed by --inherit are not targets (as for a capture
        // attached at start: the threads created during it). The file
        // written when arming stands unless threads were added.
        if !fresh.is_empty() {
            self.write_targets(&listed, &fresh)?;
        }
        let planned = spread(&fresh, ctx.threads_per_shard);
        let count = next_index + planned.len() as u32;
        self.rename_data_files(count)?;
        let jobs = planned
            .into_iter()
            .enumerate()
            .map(|(i, t)| (next_index + i as u32, t))
            .collect::<Vec<_>>();
        if jobs.is_empty() {
            return Ok(now);
        }
        self.attach(ctx, jobs, count)?;
        sys::list_tids(pid).map_err(|e| format!("cannot list /proc/{pid}/task: {e}"))
    }

    /// Takes out of the armed shards the threads that exited while armed
    /// (listed as dropped), and the shards that cannot sample: those whose
    /// threads all exited (dropped, as at attach) and those whose perf
    /// ended for another reason (their live threads are returned, to be
    /// attached again). Adds every armed shard's threads to `known`;
    /// returns the next free shard number too.
    fn prune_armed(&mut self, live: &BTreeSet<u32>, known: &mut BTreeSet<u32>) -> (u32, Vec<u32>) {
        let mut again = Vec::new();
        let mut next_index = 0;
        let mut kept = Vec::new();
        for mut s in std::mem::take(&mut self.shards) {
            next_index = next_index.max(s.index + 1);
            known.extend(s.tids.iter().copied());
            let ended = s.poll_exit();
            let dropped = &mut self.dropped;
            s.tids.retain(|tid| {
                let alive = live.contains(tid);
                if !alive {
                    dropped.push(DroppedTid {
                        shard: s.index,
                        attempt: 0,
                        tid: *tid,
                        reason: "exited while armed".into(),
                    });
                }
                alive
            });
            if ended && !s.tids.is_empty() {
                // perf ended for another reason: its live threads are
                // attached anew.
                eprintln!(
                    "jobprof-record sidecar: shard {} of {} ended while armed ({}); \
                     attaching its {} threads again: {}",
                    s.index,
                    self.query,
                    sys::describe_status(s.status.unwrap_or(-1)),
                    s.tids.len(),
                    s.log_tail()
                );
                again.append(&mut s.tids);
            } else if s.tids.is_empty() {
                // Every thread exited while armed: dropped, as at attach.
                self.dropped_shards += 1;
            }
            if ended || s.tids.is_empty() {
                // It never sampled: killed (see `discard`), its file removed.
                let data = s.data.clone();
                drop(s);
                let _ = fs::remove_file(data);
            } else {
                kept.push(s);
            }
        }
        self.shards = kept;
        (next_index, again)
    }

    /// Renames the shards' data files for a capture of `count` shards: the
    /// names depend on the count (one shard: perf.data).
    fn rename_data_files(&mut self, count: u32) -> Result<(), String> {
        for s in &mut self.shards {
            let want = self.dir.join(data_file_name(s.index, count));
            if want != s.data {
                fs::rename(&s.data, &want)
                    .map_err(|e| format!("cannot rename {}: {e}", s.data.display()))?;
                let log = s.log.clone();
                s.moved(want, log);
            }
        }
        Ok(())
    }

    /// Attaches the shards `jobs` (index, threads) disabled, in parallel (as
    /// many at once as there are cores: [`pool`]), each answering `ping`. A
    /// shard whose threads all exited is dropped; the first failure is returned
    /// (shards attached by then stay, to be stopped by the caller). Once the
    /// `shutdown` token or SIGTERM/SIGINT is there, no further shard is
    /// started and attaching fails, so that a long arming never delays the
    /// end of a job.
    fn attach(
        &mut self,
        ctx: &Context,
        jobs: Vec<(u32, Vec<u32>)>,
        count: u32,
    ) -> Result<(), String> {
        if jobs.is_empty() {
            return Ok(());
        }
        fs::create_dir_all(&self.fifo_dir)
            .map_err(|e| format!("cannot create {}: {e}", self.fifo_dir.display()))?;
        // After a failure, shards not started yet are skipped.
        let failed = Arc::new(AtomicBool::new(false));
        let (spec, pid) = (ctx.spec.clone(), ctx.pid);
        let (dir, fifo_dir) = (self.dir.clone(), self.fifo_dir.clone());
        let shutdown_token = ctx.shutdown_token.clone();
        let results = pool::run_all(jobs, move |(i, chunk): (u32, Vec<u32>)| {
            if failed.load(Ordering::SeqCst)
                || sys::pending_signal().is_some()
                || shutdown_token.exists()
            {
                return (i, chunk, Vec::new(), Err(String::new()));
            }
            let mut dropped = Vec::new();
            let result = Shard::start(
                &spec,
                pid,
                i,
                &chunk,
                dir.join(data_file_name(i, count)),
                dir.join(shard_log_name(i)),
                &fifo_dir,
                &mut dropped,
            );
            if result.is_err() {
                failed.store(true, Ordering::SeqCst);
            }
            (i, chunk, dropped, result)
        });
        self.take_attached(Attached::of(results, count))
    }

    /// Adds what attaching gave to the capture; the first failure, or the
    /// interruption, is the error.
    fn take_attached(&mut self, mut o: Attached) -> Result<(), String> {
        self.shards.append(&mut o.shards);
        self.shards.sort_by_key(|s| s.index);
        self.failed.append(&mut o.failed);
        self.dropped.append(&mut o.dropped);
        self.dropped.sort_by_key(|d| (d.shard, d.attempt, d.tid));
        self.dropped_shards += o.dropped_shards;
        match o.error {
            Some(e) => Err(e),
            None if o.skipped > 0 => Err(format!(
                "attaching was interrupted by shutdown or a signal ({} shards not started)",
                o.skipped
            )),
            None => Ok(()),
        }
    }

    /// Sends `enable` to every shard, then collects the answers. A shard
    /// whose perf ended because all its threads exited in the meantime is
    /// not a failure.
    fn enable_all(&mut self, ctx: &Context) -> Result<(), String> {
        self.meta.enable_requested_unix_ns = Some(now_ns());
        let timeout = Duration::from_secs(ctx.spec.ready_timeout);
        for s in &mut self.shards {
            s.send("enable")
                .map_err(|e| format!("shard {}: {e}", s.index))?;
        }
        for s in &mut self.shards {
            // A shard whose threads all exited after perf attached: perf
            // ended by itself, cleanly, with nothing to record.
            if let Err(e) = s.wait_ack("enable", timeout) {
                if !s.gone_with_its_threads(ctx.pid) {
                    return Err(format!("shard {}: {e}", s.index));
                }
            }
        }
        if self.shards.iter().all(|s| s.targets_gone) {
            return Err(format!(
                "every thread of pid {} exited before sampling could start",
                ctx.pid
            ));
        }
        Ok(())
    }

    /// Sets the counters of `capture.json` from what the TSV files list.
    fn count(&mut self) {
        self.meta.shard_count = (self.shards.len() + self.failed.len()) as u32;
        self.meta.dropped_thread_count = self.dropped.len() as u32;
        self.meta.dropped_shard_count = self.dropped_shards;
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
    /// is not a failure (its data is complete) and is only logged. Neither
    /// is a shard stopped by `--max-shard-size`: its window is recorded as
    /// shorter in `capture.json`.
    pub fn dead_shard(&mut self) -> Option<String> {
        let pid = self.meta.pid;
        for s in &mut self.shards {
            if s.poll_exit()
                && s.stop_requested.is_none()
                && !s.targets_gone
                && s.size_limited.is_none()
            {
                if s.hit_size_limit() {
                    let at = now_ns();
                    s.size_limited = Some(at);
                    self.meta.size_limited.push(ShardCut {
                        shard: s.index,
                        unix_ns: at,
                    });
                    eprintln!(
                        "jobprof-record sidecar: shard {} of {} reached --max-shard-size ({} bytes); \
                         its window ends here",
                        s.index,
                        self.query,
                        self.meta.max_shard_size.unwrap_or(0)
                    );
                    continue;
                }
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
        self.invalidate_for(cause);
        self.disable_all(stop_timeout);
        self.stop_all(stop_timeout, on_forced);
        self.judge_exits();
    }

    /// What ending by `cause` says of the capture's validity.
    fn invalidate_for(&mut self, cause: EndCause) {
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
    }

    /// Switches sampling off everywhere first, so that the window ends at
    /// one moment (perf may take a while to write its file after `stop`).
    fn disable_all(&mut self, stop_timeout: Duration) {
        let was_enabled = self.meta.reached(Phase::Enabled);
        if was_enabled {
            self.meta.disable_requested_unix_ns = Some(now_ns());
        }
        // A perf that does not acknowledge within 5 s (or the stop timeout,
        // when shorter) is left to the stop escalation of `stop_all`.
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
    }

    /// Asks every shard to stop and drives each to its end (FIFO `stop`,
    /// SIGINT, then the watchdog's SIGTERM/SIGKILL, reported to
    /// `on_forced`).
    fn stop_all(&mut self, stop_timeout: Duration, on_forced: &mut dyn FnMut(&str)) {
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
        let _ = fs::remove_dir(&self.fifo_dir);
        if !self.shards.is_empty() {
            self.meta.reach(Phase::Stopped, now_ns());
        }
    }

    /// What the shards' exits say of the capture: a perf that died on its
    /// own, or with a status other than 0 or SIGINT's, invalidates it.
    fn judge_exits(&mut self) {
        if self.meta.ended_by == Some(EndCause::Stop)
            && self.shards.iter().any(Shard::failed_on_its_own)
        {
            // perf died just before `stop` was seen (a kill the sidecar's
            // last check had not noticed yet): what ended it was perf.
            self.meta.ended_by = Some(EndCause::PerfFailure);
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
    /// (with phase `queued`, its counters matching the TSV files) into the
    /// staging directory.
    pub fn write_files(&mut self) -> io::Result<()> {
        let mut rows: Vec<ShardRow> = self
            .shards
            .iter()
            .map(|s| {
                let name = s.data.file_name().unwrap_or_default().to_string_lossy();
                s.row(&name)
            })
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
        self.count();
        self.meta.reach(Phase::Queued, now_ns());
        self.save()
    }
}

/// Moves a staging directory `name` left by an earlier sidecar (a requeued
/// job) aside, to `name.abandoned-<unix time>`, so that nothing is lost.
fn set_aside(worker_dir: &Path, name: &str) -> io::Result<()> {
    let dir = worker_dir.join(name);
    if fs::symlink_metadata(&dir).is_ok() {
        let aside = worker_dir.join(format!("{name}.abandoned-{}", now_ns() / 1_000_000_000));
        fs::rename(&dir, &aside)?;
        eprintln!(
            "jobprof-record sidecar: {} was left by an earlier sidecar; kept as {}",
            dir.display(),
            aside.display()
        );
    }
    Ok(())
}

/// The worker's executable file mappings ([`symfs::executable_mapping_lines`]).
fn exec_file_maps(pid: u32) -> io::Result<BTreeSet<String>> {
    let maps = fs::read_to_string(format!("/proc/{pid}/maps"))?;
    Ok(symfs::executable_mapping_lines(&maps))
}

/// "s" unless `n` is 1.
fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// Cuts the sorted `tids` into the fewest shards of at most `per` threads,
/// dealt out in turn (thread i goes to shard i mod n), so that the newest
/// threads (the highest TIDs, the most likely to be short-lived) are spread
/// over every shard instead of filling the last one.
pub fn spread(tids: &[u32], per: usize) -> Vec<Vec<u32>> {
    let n = tids.len().div_ceil(per.max(1));
    let mut shards = vec![Vec::new(); n];
    for (i, &t) in tids.iter().enumerate() {
        shards[i % n].push(t);
    }
    shards
}

/// `tids` spread into shards numbered from 0 (the jobs of
/// [`Capture::attach`]), and their count.
fn numbered_shards(tids: &[u32], per: usize) -> (Vec<(u32, Vec<u32>)>, u32) {
    let planned = spread(tids, per);
    let count = planned.len() as u32;
    let jobs = (0..count).zip(planned).collect();
    (jobs, count)
}

#[cfg(test)]
mod tests {
    use super::spread;

    #[test]
    fn newest_threads_are_spread_over_every_shard() {
        let tids: Vec<u32> = (1..=133).collect();
        let shards = spread(&tids, 128);
        assert_eq!(shards.len(), 2);
        assert_eq!(shards[0].len(), 67);
        assert_eq!(shards[1].len(), 66);
        // The five newest threads land in both shards.
        assert!(shards[0].contains(&133) && shards[1].contains(&132));
        assert!(shards.iter().all(|s| s.windows(2).all(|w| w[0] < w[1])));
        assert_eq!(spread(&tids, 200).len(), 1);
        assert_eq!(spread(&(1..=256).collect::<Vec<_>>(), 128)[1].len(), 128);
        assert!(spread(&[], 128).is_empty());
    }
}
