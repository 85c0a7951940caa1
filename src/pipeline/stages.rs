//! One capture's run, stage by stage: symbolize and fold (or fold the
//! capture's own text), keep the previous complete outputs when this run
//! came out worse, write the outputs, and finish with the outcome and, last,
//! the marker. What each stage does is in the sibling files: `plan` and
//! `units` symbolize, `publish` and `off_cpu` write, `inputs` hashes.

use std::path::Path;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use super::inputs::{hash_all, join_hasher, Hashed, Stamps};
use super::plan::Plan;
use super::units::{shard_summary, Symbolized};
use super::{file_name, Done, Pass, Pipeline};
use crate::capture::{self, KeptStacks, Marker, Quality, Status, SUMMARY};
use crate::error::Result;
use crate::output::render::{self, Format};
use crate::output::summary::StackStats;
use crate::symbolize::kernel::{self, KernelSymbols};
use crate::symbolize::native;
use crate::text::fold;

impl Pipeline<'_> {
    pub(super) fn run(self) -> Result<Done> {
        self.cap.found.ensure_out_dir()?;
        self.remove_leftovers();
        // Read before anything changes: what the outputs on disk are worth.
        let previous = capture::previous_quality(&self.dir);
        for w in &self.cap.warnings {
            self.log(format!("warning: {w}"));
        }
        let hasher = self.spawn_hasher();
        // Stopping early: not left hashing in the background of a bulk
        // reprocess.
        let stop = |hasher: Option<JoinHandle<_>>, done: Done| {
            if let Some(h) = hasher {
                let _ = h.join();
            }
            Ok(done)
        };
        let mut pass = match self.symbolize_or_fold()? {
            Ok(pass) => pass,
            Err(done) => return stop(hasher, done),
        };
        self.warn_of_stacks(&mut pass);
        let quality = pass.quality();
        if let Some(done) = self.keep_previous(&pass, &quality, previous.as_ref()) {
            return stop(hasher, done);
        }
        self.write_outputs(pass, quality, hasher)
    }

    /// Hashing the inputs runs beside symbolization instead of after
    /// it.
    fn spawn_hasher(&self) -> Option<JoinHandle<Hashed>> {
        self.opts.formats.summary.then(|| {
            let paths = self.input_paths();
            let jobs = self.opts.jobs();
            // Read before the marker is cleared: unchanged inputs keep their hash.
            let known = capture::previous_inputs(&self.dir);
            std::thread::spawn(move || hash_all(&paths, jobs, &known))
        })
    }

    /// Logs and records what the folded stacks warn of: the call-graph
    /// mode's and the symbols' warnings, and the JIT frames'.
    fn warn_of_stacks(&self, pass: &mut Pass) {
        let facts = self.capture_facts();
        for w in pass
            .stats
            .warnings_for(facts.as_ref().map(|f| f.call_graph()))
            .into_iter()
            .chain(pass.stats.symbol_warning())
        {
            self.log(format!("warning: {w}"));
            pass.warnings.push(w);
        }
        if let Some(w) = pass
            .jit
            .as_ref()
            .and_then(crate::output::summary::jit::warning)
        {
            self.log(format!("warning: {w}"));
            pass.warnings.push(w);
        }
    }

    /// Replaces the outputs: archive, rendered outputs, off-CPU ones,
    /// report and build ids, summary; then [`Self::finish`].
    fn write_outputs(
        &self,
        mut pass: Pass,
        quality: Quality,
        hasher: Option<JoinHandle<Hashed>>,
    ) -> Result<Done> {
        // From here on outputs change: no marker may vouch for a mix.
        capture::clear_marker(&self.dir)?;
        let mut outputs = Vec::new();
        // Folded from the capture's own text: what it read stays on disk.
        let own_text = pass.parts.is_none();
        let archive_bytes = self.publish_archive(&mut pass)?;
        if archive_bytes.is_some() {
            outputs.push(capture::SCRIPT_ZST.to_string());
        } else if !own_text {
            // The report's profile read as the units streamed is of text
            // not archived (a shard failed): the report reads what is on
            // disk, as before; the profile streamed is dropped alike.
            pass.report = None;
            pass.pprof = None;
        }
        let render_start = Instant::now();
        let render_refused = self.render_refusal(&mut pass);
        let text = self.folded_text(&pass, archive_bytes.is_some());
        // The off-CPU pass first: profile.pb.gz has its stacks too. Its
        // outputs are listed after the rendered ones all the same.
        let mut off_cpu_names = Vec::new();
        let off_cpu = self.off_cpu_outputs(&mut pass, &mut off_cpu_names)?;
        let switch_stacks = off_cpu
            .as_ref()
            .filter(|p| p.summary.not_drawn.is_none())
            .map(|p| &p.off_cpu[..]);
        let walked_report = self.render_outputs(
            &mut pass,
            render_refused.is_some(),
            text.as_deref(),
            switch_stacks,
            &mut outputs,
        )?;
        outputs.extend(off_cpu_names);
        let off_cpu = off_cpu.map(|p| p.summary);
        let mut build_ids = Vec::new();
        if self.opts.formats.report {
            let profile = self.report_profile(&mut pass, archive_bytes.is_some(), walked_report)?;
            self.write_report(&profile, off_cpu.as_ref())?;
            outputs.push(crate::output::report::REPORT_TXT.to_string());
            build_ids = self.write_build_ids(&profile, &mut pass.warnings, &mut outputs)?;
        }
        let render_time = render_start.elapsed();
        let mut stamps = Stamps::new();
        if self.opts.formats.summary {
            let (inputs, hash_warnings, s) = hasher.map(join_hasher).unwrap_or_default();
            pass.warnings.extend(hash_warnings);
            stamps = s;
            let written = (&outputs[..], &render_refused, render_time, off_cpu);
            self.write_summary(&pass, inputs, written, build_ids)?;
            outputs.push(SUMMARY.to_string());
        }
        self.finish(
            pass,
            render_refused,
            outputs,
            quality,
            archive_bytes,
            stamps,
        )
    }

    /// Removes temporary files a killed run left behind.
    fn remove_leftovers(&self) {
        let mut names: Vec<&str> = vec![
            capture::SCRIPT_ZST,
            capture::MARKER,
            crate::symbolize::build_ids::BUILD_IDS_TXT,
        ];
        let formats = self.opts.formats.names();
        names.extend(formats.iter().map(String::as_str));
        let stale = capture::remove_stale_temporaries(&self.dir, &names);
        if stale > 0 {
            self.log(format!(
                "removed {stale} temporary file(s) left by an interrupted run"
            ));
        }
    }

    /// Runs `perf script` over every shard (and archives its text), or
    /// folds the capture's own symbolized text when perf or the data files
    /// are missing. `Ok(Err(done))` when neither is possible.
    pub(super) fn symbolize_or_fold(&self) -> Result<std::result::Result<Pass, Done>> {
        let mut warnings = self.cap.warnings.clone();
        let prepare_start = Instant::now();
        let mut cross = None;
        if let Some(plan) = self.plan(&mut warnings, &mut cross) {
            return self.symbolize(&plan, warnings, prepare_start).map(Ok);
        }
        match &self.cap.script_text {
            Some(text) => self.fold_script_text(text, warnings, prepare_start).map(Ok),
            // Stacks perf would draw wrongly are refused, never drawn.
            None if cross.is_some() => Ok(Err(Done {
                status: Status::Failed,
                message: cross.unwrap_or_default(),
                stacks: None,
            })),
            None => {
                let why = match self.perf.get() {
                    Err(e) => e.to_string(),
                    Ok(_) => "shard data files are missing".into(),
                };
                Ok(Err(Done {
                    status: Status::Failed,
                    message: format!(
                        "cannot symbolize: {why}; and there is no {} to fold instead",
                        capture::SCRIPT_ZST
                    ),
                    stacks: None,
                }))
            }
        }
    }

    /// Symbolizes the shards as `plan` says (native or `perf script`) and
    /// folds the text on the way.
    fn symbolize(
        &self,
        plan: &Plan<'_>,
        mut warnings: Vec<String>,
        prepare_start: Instant,
    ) -> Result<Pass> {
        let kernel = self.kernel_symbols().clone();
        if let KernelSymbols::Unavailable(why) = &kernel {
            warnings.push(format!("kernel frames unnamed: {why}"));
        }
        let units = self.plan_units(plan);
        let prepare = prepare_start.elapsed();
        let t = Instant::now();
        let Symbolized {
            mut folded,
            mut shards,
            failures,
            archive: parts,
            warnings: jit_warnings,
            unwound,
            report,
            pprof,
            off_cpu,
        } = self.symbolize_all(plan, &units)?;
        warnings.extend(jit_warnings);
        let jit = crate::output::summary::jit::take_figures(&mut folded, &self.cap.found.dir);
        self.note_inline(plan, &mut shards);
        let mut stats = StackStats::from_stacks(&folded.stacks);
        // The unwinder's verdict where it unwound every stack, else the
        // call chains' own (frame pointers, perf script's unwinds).
        stats.judged_by_chains(&folded.stats.chains);
        stats.discarded_chains = unwound.map(|t| crate::output::summary::DiscardedChains {
            samples: t.discarded,
            period: t.discarded_weight,
        });
        if let Some(t) = unwound.filter(|t| t.weight > 0) {
            let causes: Vec<(&str, u64)> = native::unwind::Stop::SHORT
                .iter()
                .zip(t.short)
                .map(|(s, w)| (s.as_str(), w))
                .collect();
            stats.judged_by_unwinder(&causes, t.weight);
        }
        Ok(Pass {
            jit,
            stats,
            folded,
            shards,
            symbolized_from: plan.symbolized_from(),
            // Only when perf script ran for at least one shard.
            perf_version: plan
                .perf
                .filter(|_| plan.native.contains(&false))
                .map(|p| p.version.clone()),
            failures,
            warnings,
            prepare,
            pass: t.elapsed(),
            parts,
            kernel: Some(kernel),
            report,
            pprof,
            off_cpu,
        })
    }

    /// Folds the capture's symbolized text `text` (perf.script.zst), where
    /// the shards cannot be symbolized here.
    fn fold_script_text(
        &self,
        text: &Path,
        mut warnings: Vec<String>,
        prepare_start: Instant,
    ) -> Result<Pass> {
        let why = match self.perf.get() {
            Err(e) => format!("perf is not usable: {e}"),
            Ok(_) if self.cap.shards.is_empty() => "the capture has no perf.data files".to_string(),
            Ok(_) => "the perf.data files are not there".to_string(),
        };
        let name = file_name(text);
        self.log(format!(
            "folding the capture's symbolized text {name} instead of running perf script ({why})"
        ));
        warnings.push(format!(
            "folded {name} instead of running perf script: {why}"
        ));
        let prepare = prepare_start.elapsed();
        let t = Instant::now();
        // One read for the fold, the report and the profile.
        let own = self.read_own_text(text)?;
        let mut folded = own.folded;
        let jit = crate::output::summary::jit::take_figures(&mut folded, &self.cap.found.dir);
        // The old post-processing's text says whether it has inline frames.
        let inline = (name == capture::SCRIPT_GZ)
            .then(|| capture::legacy::postprocess_inline(&self.cap.found.dir))
            .flatten();
        if let Some(inline) = inline {
            let has = if inline { "in every shard" } else { "none" };
            self.log(format!(
                "inline frames: {has} (the old post-processing's {name}, \
                 postprocess_inline_expansion={})",
                if inline { "enabled" } else { "disabled" }
            ));
        }
        let shards = self
            .cap
            .shards
            .iter()
            .map(|s| crate::output::summary::ShardSummary {
                inline,
                ..shard_summary(s, "not symbolized")
            })
            .collect();
        Ok(Pass {
            jit,
            stats: {
                let mut stats = StackStats::from_stacks(&folded.stacks);
                stats.judged_by_chains(&folded.stats.chains);
                stats
            },
            folded,
            shards,
            symbolized_from: name,
            perf_version: None,
            failures: Vec::new(),
            warnings,
            prepare,
            pass: t.elapsed(),
            parts: None,
            kernel: None,
            report: own.report,
            pprof: own.pprof,
            off_cpu: Vec::new(),
        })
    }

    /// Never a worse result than the complete one on disk: when shards
    /// failed, or fewer samples or a smaller named share came out than the
    /// marker recorded, every previous output is kept (marker included)
    /// and the capture is reported failed, saying so.
    fn keep_previous(
        &self,
        pass: &Pass,
        now: &Quality,
        previous: Option<&Quality>,
    ) -> Option<Done> {
        let before = previous?;
        let why = if !pass.failures.is_empty() {
            pass.failures.join("; ")
        } else if now.samples < before.samples || now.symbolized_ppm < before.symbolized_ppm {
            format!(
                "this run symbolized worse ({} samples, {:.1}% with a named frame) than the \
                 complete outputs on disk ({} samples, {:.1}%): is symfs/ missing or perf \
                 different? Remove {} to accept the worse result",
                now.samples,
                now.symbolized_ppm as f64 / 1e4,
                before.samples,
                before.symbolized_ppm as f64 / 1e4,
                capture::MARKER
            )
        } else {
            return None;
        };
        Some(Done {
            status: Status::Failed,
            message: format!("{why}; kept the previous complete outputs unchanged"),
            stacks: None,
        })
    }

    /// The outcome; the marker, last, only when everything was written.
    fn finish(
        &self,
        pass: Pass,
        render_refused: Option<String>,
        outputs: Vec<String>,
        quality: Quality,
        archive_bytes: Option<u64>,
        stamps: Stamps,
    ) -> Result<Done> {
        let samples = pass.folded.stats.samples;
        if !pass.failures.is_empty() {
            return Ok(Done {
                status: Status::Failed,
                message: pass.failures.join("; "),
                stacks: None,
            });
        }
        if let Some(why) = render_refused {
            return Ok(Done {
                status: Status::RenderRefused,
                message: format!("flamegraph not rendered: {why}"),
                stacks: None,
            });
        }
        let mut marker = Marker::new(
            outputs.clone(),
            Some(capture::Quality {
                archive_text_bytes: archive_bytes,
                ..quality
            }),
        );
        marker.inputs = stamps;
        capture::write_marker(&self.dir, &marker, self.raw_mode)?;
        let shards_word = match self.cap.shards.len() {
            1 => "1 shard".to_string(),
            n => format!("{n} shards"),
        };
        let symbolized_pct = 100.0 * pass.stats.symbolized_ratio;
        let from = if pass.kernel.is_some() {
            String::new()
        } else {
            format!(", folded from {}", pass.symbolized_from)
        };
        // Without call chains nothing is truncated: there are no callers.
        let flat = self
            .capture_facts()
            .is_some_and(|f| f.call_graph() == "none");
        let truncated = if flat {
            "no call graph (recorded without -g)".to_string()
        } else {
            format!("{:.1}% truncated", 100.0 * pass.stats.truncated_ratio)
        };
        Ok(Done {
            status: Status::Processed,
            message: format!(
                "{samples} samples, {shards_word}{from}, {symbolized_pct:.1}% named at the leaf, \
                 {:.1}% with an unnamed frame, {truncated} -> {}",
                100.0 * pass.stats.unnamed_stack_ratio,
                outputs.join(", ")
            ),
            stacks: self.keep_stacks(pass),
        })
    }

    /// The folded stacks this run wrote, for the job views, when the run
    /// may keep them ([`super::Options::keep_stacks`]: each capture takes
    /// its share of the run's budget, and one that does not fit is read
    /// back from disk by the views) and reading the file back would give
    /// the same ([`render::folded::as_read_back`]).
    fn keep_stacks(&self, pass: Pass) -> Option<Arc<KeptStacks>> {
        use std::sync::atomic::Ordering;
        let budget = self.opts.keep_stacks.as_ref()?;
        let file = *self.folded_file.get()?;
        let need: u64 = (pass.folded.stacks.iter())
            .map(|(s, _)| s.len() as u64 + 16)
            .sum();
        budget
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |left| {
                left.checked_sub(need)
            })
            .ok()?;
        let mut held = Vec::new();
        let Some(lines) = render::folded::as_read_back(&pass.folded.stacks, &mut held) else {
            budget.fetch_add(need, Ordering::SeqCst);
            return None;
        };
        Some(Arc::new(KeptStacks::new(file, lines.into_iter())))
    }

    /// Where kernel frames get their names ([`kernel::kernel_symbols`]),
    /// decided at the first call.
    pub(super) fn kernel_symbols(&self) -> &KernelSymbols {
        self.kernel.get_or_init(|| {
            let (host, boot) = kernel::this_host_and_boot();
            // A plain perf.data has no symfs/ but is named from this
            // host's files all the same: its kernel only when it runs here.
            let plain = self.cap.layout == capture::Layout::Plain;
            let uses_symfs = self.cap.symfs.is_some() || plain;
            let needs_ids = self.cap.kallsyms.is_none() && uses_symfs;
            let (recorded, running) = match needs_ids {
                true => (self.shard_ids().kernel(), kernel::running_kernel_build_id()),
                false => (None, None),
            };
            let machines = kernel::Machines {
                recorded: (self.cap.host.as_deref(), self.cap.boot_id.as_deref()),
                here: (host.as_deref(), boot.as_deref()),
                recorded_kernel: recorded.as_deref(),
                running_kernel: running.as_deref(),
                plain,
            };
            kernel::kernel_symbols(
                self.cap.kallsyms.as_deref(),
                uses_symfs,
                machines,
                kernel::core_table,
            )
        })
    }

    pub(super) fn fold_options(&self) -> fold::Options {
        fold::Options {
            // Off-CPU captures also hold switch-out samples; the on-CPU
            // profile is the sampling event's alone.
            event_filter: self
                .off_cpu_shards()
                .then(|| self.cap.event.clone())
                .flatten(),
            threads: self.opts.jobs(),
            // Streamed text is folded in 8 MiB steps (1 MiB tasks): enough
            // for every thread, and peak memory stays a few blocks.
            block_size: 8 << 20,
            // Marked to count them (crate::output::summary::jit::take_figures), then unmarked.
            annotate_jit: true,
            ..fold::Options::default()
        }
    }

    /// [`Self::fold_options`], counting the timeline's cells when the
    /// flamegraph page is drawn: its timeline comes from the fold's walk.
    pub(super) fn fold_options_with_cells(&self) -> fold::Options {
        let page = self.opts.formats.render.contains(&Format::Html);
        fold::Options {
            time_cells: page.then_some(crate::output::render::timeline::CELL_NS),
            ..self.fold_options()
        }
    }

    /// The first shard's header facts (architecture, call-graph mode).
    pub(super) fn capture_facts(&self) -> Option<native::arch::Facts> {
        native::arch::facts(&self.cap.shards.first()?.data_file)
    }
}
