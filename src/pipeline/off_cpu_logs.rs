//! The off-CPU accounting's side of the symbolizing pass: each unit's
//! switch and task records and samples ([`crate::symbolize::sample::Tasks`])
//! go into its shard's accounts as they stream (`crate::text::offcpu::log`);
//! a shard cut into time slices read side by side is accounted in slice
//! order all the same. [`super::Pipeline::off_cpu_inputs`] takes the
//! result.

use super::plan::Unit;
use crate::symbolize::sample::{Batch, Frames};
use crate::text::offcpu::{Accounts, ShardLog};

/// The off-CPU accounting of each unit's records as they stream: a
/// shard's first unit reads into the shard's accounts as its batches
/// come; a later time slice's unit holds its records until the units
/// before it are done, then takes the accounts over.
pub(super) struct OffCpuLogs {
    logs: Vec<Option<ShardLog>>,
    /// Per unit: its shard was recorded with `--off-cpu` (the others have
    /// nothing to account); the first of its shard; the next unit is of
    /// its shard.
    recorded: Vec<bool>,
    first: Vec<bool>,
    next_same: Vec<bool>,
    done: Vec<bool>,
    /// The sampling event.
    event: Option<String>,
}

impl OffCpuLogs {
    /// For `units` (a shard's units next to each other, in slice order),
    /// those of the shards `recorded` says were recorded with `--off-cpu`.
    pub(super) fn new(
        units: &[Unit],
        recorded: impl Fn(&Unit) -> bool,
        event: Option<&str>,
    ) -> OffCpuLogs {
        let same = |a: usize, b: usize| units[a].shard_pos == units[b].shard_pos;
        OffCpuLogs {
            logs: units.iter().map(|_| None).collect(),
            recorded: units.iter().map(recorded).collect(),
            first: (0..units.len())
                .map(|u| u == 0 || !same(u - 1, u))
                .collect(),
            next_same: (0..units.len())
                .map(|u| u + 1 < units.len() && same(u, u + 1))
                .collect(),
            done: vec![false; units.len()],
            event: event.map(String::from),
        }
    }

    fn log(&mut self, unit: usize) -> &mut ShardLog {
        let (first, event) = (self.first[unit], self.event.as_deref());
        self.logs[unit].get_or_insert_with(|| match first {
            true => ShardLog::live(Accounts::new(event)),
            false => ShardLog::default(),
        })
    }

    /// Takes in unit `unit`'s next batch (its frames in `frames`).
    pub(super) fn push(&mut self, unit: usize, batch: &Batch, frames: &Frames) {
        if batch.tasks.is_some() {
            self.log(unit).push(batch, frames);
        }
    }

    /// Unit `unit` is done: the shard's accounts go on to the next units
    /// of its shard, as far as they are done too.
    pub(super) fn done(&mut self, unit: usize) {
        self.done[unit] = true;
        if !self.recorded[unit] {
            return;
        }
        let mut u = unit;
        while self.done[u] && self.next_same[u] && self.log(u).is_live() {
            let Some(acc) = self.logs[u].take().and_then(ShardLog::into_accounts) else {
                return;
            };
            self.log(u + 1).go_live(acc);
            u += 1;
        }
    }

    /// Unit `unit`'s log (the shard's accounts, in its last unit's).
    pub(super) fn take(&mut self, unit: usize) -> Option<ShardLog> {
        self.logs[unit].take()
    }
}
