//! Writing a pass's outputs into the capture directory: the archive
//! (published only when every shard succeeded), the rendered outputs and the
//! pprof profile, `report.txt`, `build-ids.txt` and `summary.json`, each
//! through an `AtomicFile` never more readable than the raw data.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{output_name, secs, Pass, Pipeline};
use crate::capture::{self, SUMMARY};
use crate::error::{Error, Result};
use crate::output::archive;
use crate::output::render::{self, Format, RenderOptions};
use crate::output::report::read::SampleReader;
use crate::output::summary::{InputFile, StackStats, Summary, Timings};
use crate::symbolize::native;
use crate::sys::atomic::{AtomicFile, Destination};
use crate::text::fold::{self, Folded};

/// What `write_summary` records of the outputs: their names, why the
/// flamegraph was refused, render time, the off-CPU section.
type Written<'a> = (
    &'a [String],
    &'a Option<String>,
    Duration,
    Option<crate::text::offcpu::Summary>,
);

/// A capture's off-CPU stacks (as in `offcpu.folded`) when it has switch
/// data, for its `profile.pb.gz`.
pub(super) type SwitchStacks<'a> = Option<&'a [(String, u64)]>;

/// The warning (and the empty graph's note) of a capture with no sample.
pub(super) use crate::output::render::NO_SAMPLES;

impl Pipeline<'_> {
    /// Publishes the new archive when `perf script` produced one and every
    /// shard succeeded; returns its text bytes. With a failed shard the
    /// previous archive (if any) stays: it is never replaced by one that
    /// misses a shard.
    pub(super) fn publish_archive(&self, pass: &mut Pass) -> Result<Option<u64>> {
        let Some(parts) = pass.parts.take() else {
            return Ok(None);
        };
        if !pass.failures.is_empty() {
            self.log(format!(
                "{} not replaced: a shard failed",
                capture::SCRIPT_ZST
            ));
            return Ok(None);
        }
        let (spool, parts) = parts;
        let sizes = archive::publish(
            &self.dir.join(capture::SCRIPT_ZST),
            spool,
            &parts,
            self.raw_mode,
        )?;
        self.log(format!(
            "{}: {} of text in {}",
            capture::SCRIPT_ZST,
            crate::sys::units::format_bytes(sizes.raw_bytes),
            crate::sys::units::format_bytes(sizes.compressed_bytes)
        ));
        Ok(Some(sizes.raw_bytes))
    }

    /// `report.txt`: from the text just archived or the capture's own text
    /// that was folded (read as it was symbolized or folded, else read
    /// again), which keep each frame's DSO; from the folded stacks when there is neither.
    pub(super) fn report_profile(
        &self,
        pass: &mut Pass,
        archived: bool,
        walked: Option<Result<crate::output::report::Profile>>,
    ) -> Result<crate::output::report::Profile> {
        // Read in the walk that drew the timeline and the pprof profile
        // when there was one: the same text, not read a second time.
        if let Some(profile) = walked {
            let mut profile = profile?;
            profile.source = self.label.clone();
            profile.shards = Some(self.cap.shards.len());
            pass.stats.top_self = crate::output::summary::top_self_of(&profile);
            return Ok(profile);
        }
        // A capture without samples (an off-CPU capture of a thread that
        // only slept) gets a report of nothing, not a failure.
        let text = if pass.folded.stacks.is_empty() {
            None
        } else if archived {
            Some(self.dir.join(capture::SCRIPT_ZST))
        } else if pass.kernel.is_none() {
            self.cap.script_text.clone()
        } else {
            None
        };
        self.profile_of(pass, text)
    }

    /// The report's profile of `pass`: read as the samples of `text` (the
    /// text they were symbolized into, or the capture's own) streamed,
    /// else from `text` read again; from the folded stacks when there is
    /// no text (`None`).
    pub(super) fn profile_of(
        &self,
        pass: &mut Pass,
        text: Option<PathBuf>,
    ) -> Result<crate::output::report::Profile> {
        // Off-CPU captures: the sampling event's, as the folded stacks.
        let event = self.fold_options().event_filter;
        // Read as the text was symbolized or folded: dropped already when
        // that text was not archived.
        let streamed = pass.report.take();
        let from_text = text.is_some();
        let mut profile = match (text, streamed) {
            (Some(t), Some(r)) => r.finish(&t)?,
            (Some(t), None) => crate::output::report::read::of_event(&t, event.as_deref())?,
            // The folded stacks' leaves are all the summary has: its
            // top_self stays theirs.
            (None, _) => {
                let mut p = crate::output::report::read::folded_stacks(&pass.folded.stacks, "");
                // The fold counted the samples its stacks were made of.
                p.samples = Some(pass.folded.stats.samples);
                p.event.clone_from(&pass.folded.stats.event);
                p
            }
        };
        if from_text {
            // The samples' own call chains: self time charged as perf
            // report and the report charge it.
            pass.stats.top_self = crate::output::summary::top_self_of(&profile);
        }
        profile.source = self.label.clone();
        profile.shards = Some(self.cap.shards.len());
        Ok(profile)
    }

    pub(super) fn write_report(
        &self,
        profile: &crate::output::report::Profile,
        off_cpu: Option<&crate::text::offcpu::Summary>,
    ) -> Result<()> {
        let opts = crate::output::report::Options {
            sections: Self::report_sections(off_cpu),
            ..crate::output::report::Options::default()
        };
        let name = crate::output::report::REPORT_TXT;
        let mut f = self.output(name)?;
        crate::output::report::write(profile, &opts, &mut f)
            .map_err(|e| Error::io(self.dir.join(name), e))?;
        f.flush().map_err(|e| Error::io(self.dir.join(name), e))?;
        f.commit()
    }

    /// `build-ids.txt`: the build ids of the DSOs a sample hit, from the
    /// shards' headers (none when the shards are gone). Returns the list
    /// for `summary.json`.
    pub(super) fn write_build_ids(
        &self,
        profile: &crate::output::report::Profile,
        warnings: &mut Vec<String>,
        outputs: &mut Vec<String>,
    ) -> Result<Vec<crate::symbolize::build_ids::BuildId>> {
        if !self.cap.has_all_data() {
            return Ok(Vec::new());
        }
        let (ids, problems) = self.shard_ids().union();
        warnings.extend(problems);
        let hit: std::collections::HashSet<String> =
            profile.frames.iter().map(|f| f.dso.clone()).collect();
        let ids = crate::symbolize::build_ids::hit_only(ids, &hit);
        let name = crate::symbolize::build_ids::BUILD_IDS_TXT;
        let mut f = self.output(name)?;
        f.write_all(crate::symbolize::build_ids::text(&ids).as_bytes())
            .and_then(|()| f.flush())
            .map_err(|e| Error::io(self.dir.join(name), e))?;
        f.commit()?;
        outputs.push(name.to_string());
        Ok(ids)
    }

    /// The report's sections after the functions: the per-thread on-CPU,
    /// runnable and blocked time of a capture recorded with `--off-cpu`.
    fn report_sections(
        off_cpu: Option<&crate::text::offcpu::Summary>,
    ) -> Vec<crate::output::report::Section> {
        off_cpu
            .map(|s| crate::output::report::Section {
                title: "time per thread (on-CPU, runnable, blocked; from --off-cpu)".into(),
                lines: crate::text::offcpu::thread_table(s)
                    .lines()
                    .map(str::to_string)
                    .collect(),
            })
            .into_iter()
            .collect()
    }

    /// Why pictures are not drawn (too little symbolized), if so. A fold
    /// with no samples is a valid, empty capture: a warning with advice.
    pub(super) fn render_refusal(&self, pass: &mut Pass) -> Option<String> {
        let stats = &pass.stats;
        let symbolized_pct = 100.0 * stats.symbolized_ratio;
        let renders_pictures = self
            .opts
            .formats
            .render
            .iter()
            .any(|f| *f != Format::Folded);
        if pass.folded.stacks.is_empty() {
            // A capture that failed is not one that ran too briefly.
            if pass.failures.is_empty() {
                self.log(format!("warning: {NO_SAMPLES}"));
                pass.warnings.push(NO_SAMPLES.into());
            }
            return None;
        }
        self.opts
            .min_symbolized_pct
            .filter(|min| renders_pictures && symbolized_pct < *min)
            .map(|min| {
                format!(
                    "only {symbolized_pct:.1}% of the weight has a named leaf frame \
                     (--min-symbolized {min}%): symbols are missing; check that symfs/ was \
                     published with the capture and holds the worker's binaries with .symtab or \
                     .debug_info, that perf runs on the capture's architecture, or lower \
                     --min-symbolized"
                )
            })
    }

    /// An output file in the capture directory: never through a planted
    /// link, never more readable than the raw data.
    pub(super) fn output(&self, name: &str) -> Result<AtomicFile> {
        let mut f = AtomicFile::open(&self.dir.join(name), Destination::Confined, false)?;
        if let Some(m) = self.raw_mode {
            f.limit_mode(m);
        }
        Ok(f)
    }

    /// One walk over the perf script text `text` (what was folded) for
    /// the capture's profile.pb.gz (with addresses, mappings and per-thread
    /// labels, and the `off_cpu` stacks of a capture with switch data) when
    /// `pprof` is open, and for the report's profile. Only pprof needs each
    /// sample folded again; the page's timeline comes from the fold itself
    /// ([`fold::Options::time_cells`]).
    fn walk_text(
        &self,
        pass: &Pass,
        text: &Path,
        pprof: Option<(&mut AtomicFile, SwitchStacks<'_>)>,
        mut report: Option<&mut SampleReader>,
    ) -> Result<()> {
        let event = pass.folded.stats.event.clone();
        let opts = fold::Options {
            event_filter: event.clone(),
            ..self.fold_options()
        };
        let reads = report.is_some();
        let raw = |s: &[u8]| {
            if let Some(r) = report.as_mut() {
                r.sample(s);
            }
        };
        match pprof {
            Some((f, off_cpu)) => {
                let ids = self.shard_ids().by_path();
                let facts = crate::output::pprof::capture::facts(self.cap, event, ids);
                let out = self.dir.join(crate::output::pprof::PPROF);
                let to = (out.as_path(), off_cpu, &mut *f);
                crate::output::pprof::capture::write_with_text(
                    text,
                    &opts,
                    facts,
                    to,
                    raw,
                    |_| {},
                )?;
                f.flush().map_err(|e| Error::io(&out, e))?;
            }
            None if reads => crate::text::samples::walk_raw(text, raw)?,
            None => {}
        }
        Ok(())
    }

    /// The perf script text this pass folded, when it is on disk: the
    /// archive just published, or the capture's own text.
    pub(super) fn folded_text(&self, pass: &Pass, archive_published: bool) -> Option<PathBuf> {
        if archive_published {
            Some(self.dir.join(capture::SCRIPT_ZST))
        } else if pass.kernel.is_none() {
            self.cap.script_text.clone()
        } else {
            None
        }
    }

    /// Writes the rendered formats asked for (pictures only when not
    /// `refused`), with the pprof profile (and its off-CPU stacks, `off_cpu`:
    /// the one streamed from the runs' samples, else from one walk
    /// over `text`), the page's timeline and the report's profile, when
    /// `text` is on disk; returns that profile (`None`: no walk,
    /// or no report asked for). The profile read as the text was
    /// symbolized or folded ([`Pass::report`]) is taken instead of reading
    /// it again.
    /// A format that fails to draw fails the pass, not the run.
    pub(super) fn render_outputs(
        &self,
        pass: &mut Pass,
        refused: bool,
        text: Option<&Path>,
        off_cpu: SwitchStacks<'_>,
        outputs: &mut Vec<String>,
    ) -> Result<Option<Result<crate::output::report::Profile>>> {
        let render_opts = self.render_options(&pass.folded, &pass.stats);
        let wants = |f: Format| self.opts.formats.render.contains(&f);
        let mut timeline = None;
        let mut report = None;
        if let Some(text) = text.filter(|_| !pass.folded.stacks.is_empty() && !refused) {
            // Only over text on disk, as when it came from a walk over it.
            timeline = (pass.folded.cells.as_ref())
                .filter(|_| wants(Format::Html))
                .map(render::timeline::Timeline::from_cells);
            // Written as the runs streamed, unless its columns do
            // not fit or a block stayed text (then from the text).
            let streamed_pprof = pass.pprof.take().filter(|p| p.fits(off_cpu.is_some()));
            let mut pprof = (wants(Format::Pprof) && streamed_pprof.is_none())
                .then(|| self.output(crate::output::pprof::PPROF))
                .transpose()?;
            if let Some(p) = streamed_pprof {
                p.commit(off_cpu)?;
                self.log(format!(
                    "{}: from the samples as they were read",
                    crate::output::pprof::PPROF
                ));
            }
            let to = pprof.as_mut().map(|f| (f, off_cpu));
            // Off-CPU captures: the sampling event's, as the folded stacks.
            let event = self.fold_options().event_filter;
            let streamed = pass.report.take();
            let mut reader = (self.opts.formats.report && streamed.is_none())
                .then(|| SampleReader::of_event(event.as_deref()));
            self.walk_text(pass, text, to, reader.as_mut())?;
            report = streamed.or(reader).map(|r| r.finish(text));
            if let Some(f) = pprof {
                f.commit()?;
            }
        }
        let mut drawing = None;
        for format in &self.opts.formats.render {
            let is_picture = *format != Format::Folded;
            let empty = pass.folded.stacks.is_empty();
            if (is_picture && refused) || (empty && *format == Format::Pprof) {
                continue;
            }
            let name = output_name(*format);
            if empty {
                let mut f = self.output(name)?;
                if let Err(e) = render::render_empty(*format, &render_opts, NO_SAMPLES, &mut f) {
                    pass.failures.push(format!("{name}: {e}"));
                    continue;
                }
                f.flush().map_err(|e| Error::io(self.dir.join(name), e))?;
                f.commit()?;
                outputs.push(name.to_string());
                continue;
            }
            if *format == Format::Pprof && text.is_some() {
                outputs.push(name.to_string());
                continue;
            }
            let mut f = self.output(name)?;
            // The SVG file and the page's SVG are one drawing.
            let both = wants(Format::Svg) && wants(Format::Html);
            let drawn = match format {
                Format::Svg | Format::Html if both => {
                    let stacks = &pass.folded.stacks;
                    let d = drawing.get_or_insert_with(|| {
                        render::drawing(stacks, &render_opts).map_err(|e| e.to_string())
                    });
                    match (d.as_ref(), format) {
                        (Err(e), _) => Err(e.clone()),
                        (Ok(d), Format::Svg) => f.write_all(&d.svg).map_err(|e| e.to_string()),
                        (Ok(d), _) => d
                            .page(&render_opts, &page_extras(timeline.as_ref()), &mut f)
                            .map_err(|e| e.to_string()),
                    }
                }
                Format::Html => render::render_html_with(
                    &pass.folded.stacks,
                    &render_opts,
                    &page_extras(timeline.as_ref()),
                    &mut f,
                )
                .map_err(|e| e.to_string()),
                _ => render::render(*format, &pass.folded.stacks, &render_opts, &mut f)
                    .map_err(|e| e.to_string()),
            };
            if let Err(e) = drawn {
                pass.failures.push(format!("{name}: {e}"));
                continue;
            }
            f.flush().map_err(|e| Error::io(self.dir.join(name), e))?;
            let file = f.commit_identified()?;
            if let Some(file) = file.filter(|_| *format == Format::Folded) {
                let _ = self.folded_file.set(file);
            }
            outputs.push(name.to_string());
        }
        Ok(report)
    }

    /// Writes `summary.json`.
    pub(super) fn write_summary(
        &self,
        pass: &Pass,
        inputs: Vec<InputFile>,
        written: Written<'_>,
        build_ids: Vec<crate::symbolize::build_ids::BuildId>,
    ) -> Result<()> {
        let s = self.summary(pass, inputs, written, build_ids);
        let mut f = self.output(SUMMARY)?;
        f.write_all(s.to_json().as_bytes())
            .and_then(|()| f.flush())
            .map_err(|e| Error::io(self.dir.join(SUMMARY), e))?;
        f.commit()
    }

    /// What `summary.json` says of this pass and its outputs.
    fn summary(
        &self,
        pass: &Pass,
        inputs: Vec<InputFile>,
        written: Written<'_>,
        build_ids: Vec<crate::symbolize::build_ids::BuildId>,
    ) -> Summary {
        let (outputs, render_refused, render_time, off_cpu) = written;
        let (folded, stats) = (&pass.folded, &pass.stats);
        let facts = self.capture_facts();
        Summary {
            tool: "jobprof".into(),
            tool_version: env!("CARGO_PKG_VERSION").into(),
            output_version: capture::OUTPUT_VERSION,
            created: crate::sys::units::utc_timestamp(),
            capture: self.label.clone(),
            worker: self.cap.found.worker,
            query: self.cap.found.query.clone(),
            job_id: self.cap.job_id.clone(),
            layout: self.cap.layout,
            validated: self.cap.validated,
            samples: folded.stats.samples,
            event: self.event(folded),
            period_total: stats.period_total,
            unique_stacks: folded.stats.unique_stacks,
            symbolized_ratio: stats.symbolized_ratio,
            named_stack_ratio: stats.named_stack_ratio,
            symbol_warning: stats.symbol_warning(),
            unnamed_stack_ratio: stats.unnamed_stack_ratio,
            unknown_frame_ratio: stats.unknown_frame_ratio,
            truncated_ratio: stats.truncated_ratio,
            unnamed_by_dso: stats.unnamed_by_dso.clone(),
            truncated_roots: stats.truncated_roots.clone(),
            discarded_chains: stats.discarded_chains,
            kernel_symbols: pass.kernel.as_ref().map(|k| k.describe()),
            jit: pass.jit.clone(),
            skipped_lines: folded.stats.skipped_lines,
            shards: pass.shards.clone(),
            symbolized_from: pass.symbolized_from.clone(),
            top_self: stats.top_self.clone(),
            top_total: stats.top_total.clone(),
            inputs,
            perf_version: pass.perf_version.clone(),
            recorded_with: self.cap.recorded_with.clone(),
            capture_arch: facts.as_ref().and_then(|f| f.arch.clone()),
            host_arch: native::arch::host().to_string(),
            call_graph: facts.map(|f| f.call_graph().to_string()),
            outputs: outputs.to_vec(),
            render_refused: render_refused.clone(),
            warnings: pass
                .warnings
                .iter()
                .chain(pass.failures.iter())
                .cloned()
                .collect(),
            timings: self.timings(pass, render_time),
            old_pipeline: self.cap.legacy.clone(),
            build_ids,
            symbol_sources: self.sources().summary(),
            off_cpu,
        }
    }

    /// The summary's timings in seconds, the total up to now.
    fn timings(&self, pass: &Pass, render_time: Duration) -> Timings {
        Timings {
            prepare: secs(pass.prepare),
            symbolize_fold: secs(pass.pass),
            render: secs(render_time),
            total: secs(self.start.elapsed()),
        }
    }

    /// The event folded, as the capture recorded it when that is the same
    /// event (`cpu-clock:u`: the text may name it without its modifier).
    fn event(&self, folded: &Folded) -> Option<String> {
        let base = crate::text::perf_script::event_base;
        match (&folded.stats.event, &self.cap.event) {
            (Some(f), Some(c)) if base(f) == base(c) => Some(c.clone()),
            (Some(f), _) => Some(f.clone()),
            (None, c) => c.clone(),
        }
    }

    /// The flamegraphs' title, subtitle (event, samples, shards, symbol
    /// figures) and count unit.
    pub(super) fn render_options(&self, folded: &Folded, stats: &StackStats) -> RenderOptions {
        let worker = self.cap.found.worker.map(|w| w.to_string());
        let event = self.event(folded);
        let mut o = RenderOptions {
            title: render::capture_title(
                self.cap.job_id.as_deref(),
                worker.as_deref(),
                Some(&self.cap.found.query),
            ),
            ..RenderOptions::default()
        };
        if let Some(ev) = &event {
            o.subtitle = Some(format!(
                "{ev} · {} samples · {} shard(s) · {}{}",
                folded.stats.samples,
                self.cap.shards.len(),
                stats.symbol_figures(),
                stats
                    .symbol_warning()
                    .map(|_| " · warning: few symbols, see summary.json")
                    .unwrap_or_default()
            ));
            // Folded counts are sample periods.
            o.count_name = crate::text::perf_script::period_unit(ev).into();
        }
        o
    }
}

/// The capture page's extras: its timeline.
fn page_extras(timeline: Option<&render::timeline::Timeline>) -> render::PageExtras<'_> {
    render::PageExtras {
        timeline,
        ..Default::default()
    }
}
