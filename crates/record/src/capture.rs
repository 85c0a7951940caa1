//! One query's capture, from `start` to `queued`: list the worker's threads,
//! cut them into shards, attach every shard disabled, enable them all (the
//! attach barrier behind `started`), watch them while recording, stop them
//! (disable, FIFO `stop`, SIGINT, watchdog), and write the capture's files
//! into its staging directory. Publishing is not done here (see `publish`).
//!
//! A capture can also be armed ahead of its query ([`ActiveCapture::arm`]):
//! its shards are attached disabled under a staging name, and `start` then
//! only renames it to the query id, attaches what is new and enables every
//! shard. Attaching runs the shards in parallel (see `pool`).

use std::collections::BTreeSet;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use jobprof_capture_format::{
    write_dropped_tsv, write_shards_tsv, Capture, DroppedTid, EndCause, Phase, ShardCut, ShardRow,
    CAPTURE_JSON, DROPPED_TIDS_TSV, FORMAT_VERSION, SHARDS_TSV, TARGET_TIDS_TXT,
};

mod armed;
mod attach;
mod stop;

use armed::ArmedView;
pub use attach::{Progress, ATTACHING};

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
    /// The worker's start time (clock ticks since boot): tells it from a
    /// later process with its PID.
    pub start_time: u64,
    /// The worker's effective uid and gid when the sidecar started
    /// (`None`: they could not be read); each capture reads them again.
    pub worker_ids: Option<(u32, u32)>,
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
    /// Where attaching says how far it got (`None`: nowhere).
    pub progress: Option<Progress>,
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
        let ids = worker_ids(ctx);
        let meta = Capture {
            format_version: FORMAT_VERSION,
            recorder_version: env!("CARGO_PKG_VERSION").to_string(),
            query: query.to_string(),
            worker: ctx.worker,
            host: ctx.host.clone(),
            boot_id: ctx.boot_id.clone(),
            slurm_job_id: ctx.slurm_job_id.clone(),
            pid: ctx.pid,
            worker_uid: ids.map(|(u, _)| u),
            worker_gid: ids.map(|(_, g)| g),
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
            warnings: vec![],
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

/// The worker's effective uid and gid for `capture.json`: read when the
/// capture is set up (the process pinned as for every read of its files,
/// [`crate::confine::Worker::pin`]), else those read when the sidecar
/// started. The DSO paths a capture records are this user's mmaps, so
/// `jobprof process` reads this host's files at them with this user's
/// rights, though the published capture is root's.
fn worker_ids(ctx: &Context) -> Option<(u32, u32)> {
    match crate::confine::Worker::pin(ctx.pid, ctx.start_time) {
        Ok(w) => Some((w.uid, w.gid)),
        Err(_) => ctx.worker_ids,
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
