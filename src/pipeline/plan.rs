//! Planning a capture's symbolization: which symbolizer takes each shard
//! (native where `--symbolizer` allows and [`native::check`] accepts it,
//! else `perf script`, refused where `perf script` here cannot unwind the
//! capture's architecture), with which options (symbol files, kernel table,
//! inline frames), and the units of work: the shards, cut into time slices
//! when there are fewer shards than jobs.

use std::path::{Path, PathBuf};

use super::{file_name, Pipeline};
use crate::capture;
use crate::output::summary::ShardSummary;
use crate::symbolize::native;
use crate::symbolize::perf::{self, PerfTool, ScriptOptions, TimeSlice};

/// One unit of symbolizing work: a shard, or a time slice of one, by
/// `perf script` or natively.
#[derive(Debug, Clone)]
pub(super) struct Unit {
    pub(super) shard_pos: usize,
    pub(super) data: PathBuf,
    pub(super) slice: Option<TimeSlice>,
    pub(super) native: bool,
}

/// Which shards are symbolized natively, and the perf for the others.
pub(super) struct Plan<'p> {
    pub(super) native: Vec<bool>,
    pub(super) perf: Option<&'p PerfTool>,
}

impl Plan<'_> {
    /// `perf script`, `native`, or both with shard counts.
    pub(super) fn symbolized_from(&self) -> String {
        let n = self.native.iter().filter(|&&x| x).count();
        match (n, self.native.len() - n) {
            (_, 0) => "native".into(),
            (0, _) => "perf script".into(),
            (n, p) => format!("native ({n} shards), perf script ({p} shards)"),
        }
    }
}

impl<'a> Pipeline<'a> {
    /// Per shard: native or `perf script` (`--symbolizer`, and what
    /// [`native::check`] says of the shard). `None` when the text must come
    /// from the capture's symbolized text instead (data files missing, or
    /// perf needed and unusable).
    /// `cross` gets the refusal when a shard would go to `perf script` on a
    /// host that cannot unwind its architecture ([`native::arch`]).
    pub(super) fn plan(
        &self,
        warnings: &mut Vec<String>,
        cross: &mut Option<String>,
    ) -> Option<Plan<'a>> {
        if !self.cap.has_all_data() {
            return None;
        }
        let choice = self.opts.symbolizer;
        // Without perf, `auto` keeps folding the text a capture carries (it
        // was symbolized where the capture's files were); native then runs
        // only on captures that carry none, or when asked for by name.
        if choice == native::Choice::Auto
            && self.cap.script_text.is_some()
            && self.perf.get().is_err()
        {
            return None;
        }
        let native = self.native_shards(choice, warnings);
        if let Some(why) = self.cross_arch(&native) {
            let msg = format!(
                "{why}; process it on a node of that architecture, or with --symbolizer native \
                 (auto) where the native symbolizer takes the shard"
            );
            self.log(format!("warning: {msg}"));
            *cross = Some(msg);
            return None;
        }
        // perf is waited for only when a shard needs `perf script`.
        let perf = match native.iter().any(|n| !n) {
            true => Some(self.perf.get().ok()?),
            false => None,
        };
        Some(Plan { native, perf })
    }

    /// Per shard: whether the native symbolizer takes it (`choice`, and
    /// what [`native::check`] says); each reason it refuses shards for is
    /// logged and warned of once, naming them.
    fn native_shards(&self, choice: native::Choice, warnings: &mut Vec<String>) -> Vec<bool> {
        let mut native = Vec::new();
        // Each reason with the shards it names: `0 (perf.data.part000)`
        // (the reason may be about the file: "cannot open: ...").
        let mut refused: Vec<(String, Vec<String>)> = Vec::new();
        let verdicts = match choice {
            native::Choice::Perf => Vec::new(),
            // Jobs at a time: each check walks its whole file.
            _ => crate::sys::jobs::map_jobs(&self.cap.shards, self.opts.jobs(), |s| {
                native::check(&s.data_file)
            }),
        };
        for (i, s) in self.cap.shards.iter().enumerate() {
            let ok = match choice {
                native::Choice::Perf => false,
                _ => match &verdicts[i] {
                    Ok(()) => true,
                    Err(why) => {
                        let why = why.to_string();
                        let name = s.data_file.file_name().unwrap_or_default();
                        let shard = format!("{} ({})", s.index, name.to_string_lossy());
                        match refused.iter_mut().find(|(w, _)| *w == why) {
                            Some((_, v)) => v.push(shard),
                            None => refused.push((why, vec![shard])),
                        }
                        false
                    }
                },
            };
            native.push(ok);
        }
        for (why, shards) in refused {
            let msg = format!(
                "perf script symbolizes shard(s) {} instead of the native symbolizer: {why}",
                shards.join(", ")
            );
            self.log(format!("warning: {msg}"));
            warnings.push(msg);
        }
        native
    }

    /// Why `perf script` here would draw the stacks of the shards that would
    /// go to it (`native[i]` false) wrongly, naming them (`None`: it would not).
    fn cross_arch(&self, native: &[bool]) -> Option<String> {
        let mut bad: Vec<String> = Vec::new();
        let mut reason = None;
        for (s, _) in self.cap.shards.iter().zip(native).filter(|(_, n)| !**n) {
            if let Some(why) = native::arch::perf_mismatch(&s.data_file) {
                bad.push(s.index.to_string());
                reason.get_or_insert(why);
            }
        }
        reason.map(|why| {
            format!(
                "cannot symbolize shard(s) {} with perf script: {why}",
                bad.join(", ")
            )
        })
    }

    /// Shards, cut into time slices when there are fewer shards than jobs.
    pub(super) fn plan_units(&self, plan: &Plan<'_>) -> Vec<Unit> {
        let jobs = self.opts.jobs();
        let shards = &self.cap.shards;
        let total: u64 = shards
            .iter()
            .map(|s| s.bytes.unwrap_or(0))
            .sum::<u64>()
            .max(1);
        let mut units = Vec::new();
        for (pos, s) in shards.iter().enumerate() {
            let bytes = s.bytes.unwrap_or(0);
            let want = match self.opts.time_slices {
                Some(n) => n.max(1),
                None if shards.len() < jobs && bytes >= self.opts.slice_min_bytes => {
                    let share = (jobs as f64 * bytes as f64 / total as f64).round() as usize;
                    let by_size = (bytes / self.opts.slice_min_bytes.max(1)) as usize;
                    share.clamp(1, by_size.max(1))
                }
                None => 1,
            };
            let is_native = plan.native[pos];
            let slices = self.time_slices(plan, s, is_native, want);
            if slices.len() > 1 {
                self.log(format!(
                    "shard {} ({}): {} time slices",
                    s.index,
                    file_name(&s.data_file),
                    slices.len()
                ));
                units.extend(slices.into_iter().map(|sl| Unit {
                    shard_pos: pos,
                    data: s.data_file.clone(),
                    slice: Some(sl),
                    native: is_native,
                }));
            } else {
                units.push(Unit {
                    shard_pos: pos,
                    data: s.data_file.clone(),
                    slice: None,
                    native: is_native,
                });
            }
        }
        units
    }

    /// `want` time slices of shard `s`, from its time range; none when
    /// `want` is 1 or the range cannot be read.
    fn time_slices(
        &self,
        plan: &Plan<'_>,
        s: &capture::Shard,
        is_native: bool,
        want: usize,
    ) -> Vec<TimeSlice> {
        if want <= 1 {
            return Vec::new();
        }
        let range = match plan.perf {
            _ if is_native => native::time_range(&s.data_file).map_err(|e| e.to_string()),
            Some(perf) => perf::time_range(perf, &s.data_file).map_err(|e| e.to_string()),
            None => Err("no perf".to_string()),
        };
        match range {
            Ok((first, last)) => perf::plan_slices(first, last, want),
            Err(e) => {
                self.log(format!(
                    "shard {}: not split into time slices ({e})",
                    s.index
                ));
                Vec::new()
            }
        }
    }

    /// Inline frames from the native symbolizer: they cost about nothing
    /// there, so on unless `--no-inline`.
    fn native_inline(&self) -> bool {
        !self.opts.no_inline
    }

    /// Inline frames from `perf script`: it can get 100 times slower, so
    /// only with `--inline`.
    pub(super) fn perf_inline(&self) -> bool {
        self.opts.inline && !self.opts.no_inline
    }

    /// Marks each shard with whether it has inline frames, and logs which.
    pub(super) fn note_inline(&self, plan: &Plan<'_>, shards: &mut [ShardSummary]) {
        let mut with = Vec::new();
        let mut without = Vec::new();
        for (pos, s) in self.cap.shards.iter().enumerate() {
            let native = plan.native.get(pos).copied().unwrap_or(false);
            let inline = if native {
                self.native_inline()
            } else {
                self.perf_inline()
            };
            if let Some(sum) = shards.iter_mut().find(|x| x.index == s.index) {
                sum.inline = Some(inline);
            }
            let who = if native { "native" } else { "perf script" };
            if inline {
                with.push(format!("{} ({who})", s.index));
            } else {
                without.push(format!("{} ({who})", s.index));
            }
        }
        let why = if self.opts.no_inline {
            "--no-inline"
        } else {
            "perf script expands them only with --inline"
        };
        match (with.is_empty(), without.is_empty()) {
            (_, true) => self.log("inline frames: in every shard"),
            (true, _) => self.log(format!("inline frames: none ({why})")),
            _ => self.log(format!(
                "inline frames: in shard(s) {}; not in shard(s) {} ({why})",
                with.join(", "),
                without.join(", ")
            )),
        }
    }

    /// The `perf script` options and the native symbolizer for this
    /// capture, both reading the same symbol files and kernel table; the
    /// tree of links `perf script` reads is made only for `perf_runs`.
    pub(super) fn symbolizers(&self, perf_runs: bool) -> (ScriptOptions, native::Symbolizer) {
        let sources = self.sources();
        let script_opts = ScriptOptions {
            inline: self.perf_inline(),
            symfs: perf_runs.then(|| self.perf_symfs()).flatten(),
            kallsyms: self.kernel_symbols().file().map(Path::to_path_buf),
        };
        if let Some(s) = &self.cap.symfs {
            self.log(format!("symbols from {}", s.display()));
        }
        self.log(format!(
            "kernel symbols: {}",
            self.kernel_symbols().describe()
        ));
        // The native symbolizer names kernel frames from the same table as
        // `perf script` (the snapshot, or the live one on the same boot).
        let natively = native::Symbolizer::with_store(
            native::Options {
                sources: sources.search.clone(),
                kallsyms: self.kernel_symbols().file().map(Path::to_path_buf),
                inline: self.native_inline(),
                jit: Some(self.cap.found.dir.clone()),
            },
            self.store.clone(),
        );
        (script_opts, natively)
    }
}
