//! Arming ahead of the query: what arming saw, and at `start` what
//! changed since (threads created or exited, files mapped), the armed
//! shards caught up with it or attached anew.

use std::collections::BTreeSet;
use std::fs;

use jobprof_capture_format::{data_file_name, DroppedTid};

use super::{exec_file_maps, plural, spread, ActiveCapture, Context};
use crate::sys;

/// What arming saw, to tell at `start` whether the armed shards' records
/// are complete: perf (6.1) records no `MMAP`, `FORK` or `COMM` while its
/// events are disabled, and its control FIFO cannot switch its tracking
/// (dummy) event on alone.
pub(super) struct ArmedView {
    /// The threads listed.
    pub(super) tids: Vec<u32>,
    /// When (clock ticks since boot) the first perf was started.
    pub(super) ticks: u64,
    /// The worker's executable file mappings before the first perf started
    /// (every shard synthesized these when it attached).
    pub(super) maps: BTreeSet<String>,
}

impl ActiveCapture {
    /// What the armed shards have no record of, counted, or `None` when
    /// nothing: executable files the worker mapped since arming (no `MMAP`:
    /// their frames would be `[unknown]`) and live threads created since
    /// the first perf started (followed through `--inherit`, but with no
    /// `FORK` or `COMM`: perf would name them `:TID`). Threads that exited
    /// while armed and libraries unmapped while armed lose nothing.
    /// `now`: the worker's threads, listed last.
    pub(super) fn changed_while_armed(
        &mut self,
        pid: u32,
        now: &[u32],
    ) -> Result<Option<String>, String> {
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
    pub(super) fn attach_anew(&mut self, ctx: &Context, why: String) -> Result<(), String> {
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
    pub(super) fn catch_up(&mut self, ctx: &Context) -> Result<Vec<u32>, String> {
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
    pub(super) fn prune_armed(
        &mut self,
        live: &BTreeSet<u32>,
        known: &mut BTreeSet<u32>,
    ) -> (u32, Vec<u32>) {
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
    pub(super) fn rename_data_files(&mut self, count: u32) -> Result<(), String> {
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
}
