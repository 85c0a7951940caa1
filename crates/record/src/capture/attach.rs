//! Attaching shards (disabled, in parallel: [`pool`]) and enabling them
//! all: the attach barrier behind `started`. How far attaching got is
//! written, shard by shard, into the sidecar's signed `attaching` token
//! ([`Progress`]), so that a driver waiting for `ready` or `started` tells
//! a long attach that progresses from a stuck one.

use std::collections::BTreeSet;
use std::fs;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jobprof_capture_format::{
    data_file_name, shard_log_name, DroppedTid, ShardPhase, ShardRow, TARGET_TIDS_TXT,
};

use super::{ActiveCapture, Context};
use crate::identity::{write_signed, SidecarId};
use crate::pool;
use crate::shard::Shard;
use crate::sys::{self, now_ns};
use crate::tokens::{write_atomic, Tokens};

/// Where attaching says how far it got: the sidecar's `attaching` token
/// (`.perf_sidecar_attaching_wN`), signed with its identity and rewritten
/// after each shard (`NAME: K/N shards attached`). A driver waiting for
/// `ready` or `started` gives the sidecar its whole `--timeout` again each
/// time it changes (see `driver`).
#[derive(Debug, Clone)]
pub struct Progress {
    /// The worker's tokens.
    pub tokens: Tokens,
    /// The sidecar's identity, to sign with.
    pub id: SidecarId,
}

impl Progress {
    /// The token's path.
    pub fn path(&self) -> PathBuf {
        self.tokens.sidecar(ATTACHING)
    }

    /// Says that `done` of `total` shards of capture `name` are attached
    /// (a failure to write it only costs the driver its news).
    fn say(&self, name: &str, done: u32, total: u32) {
        let _ = write_signed(
            &self.tokens,
            &self.path(),
            &self.id,
            &format!("{name}: {done}/{total} shards attached"),
        );
    }
}

/// The kind of the progress token.
pub const ATTACHING: &str = "attaching";

/// What attaching a set of shards gave.
#[derive(Default)]
pub(super) struct Attached {
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
pub(super) type AttachResult = (
    u32,
    Vec<u32>,
    Vec<DroppedTid>,
    Result<Option<Shard>, String>,
);

impl Attached {
    /// Sorts the results of a capture of `count` shards into started,
    /// dropped, skipped and failed shards.
    pub(super) fn of(results: Vec<AttachResult>, count: u32) -> Attached {
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
    /// Lists the worker's threads into `perf-target-tids.txt` (with
    /// `also`: threads listed earlier); returns the listing.
    pub(super) fn list_and_write_targets(
        &mut self,
        pid: u32,
        also: &[u32],
    ) -> Result<Vec<u32>, String> {
        let tids = sys::list_tids(pid).map_err(|e| format!("cannot list /proc/{pid}/task: {e}"))?;
        self.write_targets(&tids, also)?;
        Ok(tids)
    }

    /// Writes `perf-target-tids.txt`: the threads given to perf (attached
    /// or dropped), `a` and `b` together.
    pub(super) fn write_targets(&mut self, a: &[u32], b: &[u32]) -> Result<(), String> {
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

    /// Attaches the shards `jobs` (index, threads) disabled, in parallel (as
    /// many at once as there are cores: [`pool`]), each answering `ping`. A
    /// shard whose threads all exited is dropped; the first failure is returned
    /// (shards attached by then stay, to be stopped by the caller). Once the
    /// `shutdown` token or SIGTERM/SIGINT is there, no further shard is
    /// started and attaching fails, so that a long arming never delays the
    /// end of a job.
    pub(super) fn attach(
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
        let (progress, name) = (ctx.progress.clone(), self.query.clone());
        let total = jobs.len() as u32;
        // Counted and written under one lock, so that the token never goes
        // back (two shards' writes renamed out of order).
        let done = Arc::new(Mutex::new(0u32));
        if let Some(p) = &progress {
            p.say(&name, 0, total);
        }
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
            if let Ok(mut k) = done.lock() {
                *k += 1;
                if let Some(p) = &progress {
                    p.say(&name, *k, total);
                }
            }
            (i, chunk, dropped, result)
        });
        self.take_attached(Attached::of(results, count))
    }

    /// Adds what attaching gave to the capture; the first failure, or the
    /// interruption, is the error.
    pub(super) fn take_attached(&mut self, mut o: Attached) -> Result<(), String> {
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
    pub(super) fn enable_all(&mut self, ctx: &Context) -> Result<(), String> {
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
}
