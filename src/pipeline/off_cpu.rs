//! The off-CPU stage of the per-capture pipeline: for captures recorded with
//! `--off-cpu`, the accounting of each shard's switch and task records
//! ([`crate::text::offcpu`]): from what the native symbolizer logged of
//! them in the symbolizing pass ([`Pipeline::off_cpu_inputs`]), else from
//! `perf script` run once more over the shard; and the `offcpu.*` and
//! `wallclock.*` outputs in the formats asked for, state frames in their
//! fixed colours. A capture whose shards hold no switch data says so (log
//! line, summary warning) instead of drawing nothing.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use super::plan::Unit;
use super::units::UnitResult;
use super::{Pass, Pipeline};
use crate::error::{Error, Result};
use crate::output::render::{self, Format, RenderOptions};
use crate::symbolize::native::{self, OffCpuRecords};
use crate::symbolize::perf::ScriptOptions;
use crate::text::offcpu::{self, Profiles, ShardInput};

impl Pipeline<'_> {
    /// Whether any shard was recorded with `--off-cpu` (from the headers
    /// read once per capture).
    pub(super) fn off_cpu_shards(&self) -> bool {
        self.shard_ids().any_off_cpu()
    }

    /// How the off-CPU accounting reads each shard recorded with
    /// `--off-cpu`: from the logs of its units (taken from `results`) when
    /// the native symbolizer read all of it and handed its records on,
    /// else with `perf script`.
    pub(super) fn off_cpu_inputs(
        &self,
        units: &[Unit],
        results: &mut [UnitResult],
    ) -> Vec<(PathBuf, ShardInput)> {
        let mut inputs = Vec::new();
        for (pos, shard) in self.cap.shards.iter().enumerate() {
            if shard.bytes.is_none() {
                continue;
            }
            let data = &shard.data_file;
            if !self.shard_ids().off_cpu(data) {
                continue;
            }
            let mine: Vec<usize> = (0..units.len())
                .filter(|&i| units[i].shard_pos == pos)
                .collect();
            if mine.is_empty() {
                continue;
            }
            let read = |i: usize| match (&results[i].outcome, &results[i].off_cpu) {
                (Ok(o), Some((r, _))) if o.ok() => Ok(r.clone()),
                (Ok(o), _) if units[i].native && !o.ok() => Err(Some(o.failure())),
                _ => Err(None),
            };
            let verdicts: Vec<_> = mine.iter().map(|&i| read(i)).collect();
            let all_read = verdicts.iter().all(|v| *v == Ok(OffCpuRecords::Handed));
            let last = mine[mine.len() - 1];
            let read = all_read
                .then(|| results[last].log.take()?.into_accounts())
                .flatten();
            let input = if let Some(accounts) = read {
                let header = results[mine[0]].off_cpu.as_ref().and_then(|o| o.1);
                ShardInput::Read(Box::new(accounts), header)
            } else {
                ShardInput::Perf(self.why_perf_reads(data, &verdicts))
            };
            inputs.push((data.clone(), input));
        }
        inputs
    }

    /// Why `perf script` reads the off-CPU records of shard `data`, whose
    /// units ended as `verdicts` say, when the native symbolizer was meant
    /// to (`None`: `--symbolizer perf`).
    fn why_perf_reads(
        &self,
        data: &Path,
        verdicts: &[std::result::Result<OffCpuRecords, Option<String>>],
    ) -> Option<String> {
        if self.opts.symbolizer == native::Choice::Perf {
            return None;
        }
        let told = verdicts.iter().find_map(|v| match v {
            Ok(OffCpuRecords::Refused(why)) => Some(why.clone()),
            Err(Some(failed)) => Some(failed.clone()),
            _ => None,
        });
        Some(told.unwrap_or_else(|| match native::check(data) {
            Err(why) => why.to_string(),
            Ok(()) => "the symbolizing pass ran perf script on it".into(),
        }))
    }

    /// Makes and writes the off-CPU and wall-clock profiles; returns them
    /// (for `profile.pb.gz`) with their summary section, or `None` for a
    /// capture recorded without `--off-cpu`.
    pub(super) fn off_cpu_outputs(
        &self,
        pass: &mut Pass,
        outputs: &mut Vec<String>,
    ) -> Result<Option<Profiles>> {
        let shards = std::mem::take(&mut pass.off_cpu);
        if shards.is_empty() {
            return Ok(None);
        }
        // perf only for a shard the native symbolizer did not read, as
        // the symbolizing pass runs it.
        let script = ScriptOptions {
            inline: self.perf_inline(),
            symfs: self.perf_symfs(),
            kallsyms: self.kernel_symbols().file().map(Path::to_path_buf),
        };
        let started = Instant::now();
        let event = self.cap.event.as_deref();
        let jobs = self.opts.jobs();
        let profiles = match offcpu::analyze_capture(self.perf, &script, shards, event, jobs) {
            Ok(p) => p,
            Err(e) => {
                pass.failures.push(format!("off-CPU pass: {e}"));
                return Ok(None);
            }
        };
        for w in &profiles.warnings {
            self.log(format!("warning: {w}"));
            pass.warnings.push(w.clone());
        }
        let s = &profiles.summary;
        if let Some(why) = &s.not_drawn {
            self.log(format!("warning: off-CPU: {why}"));
            pass.warnings.push(format!("off-CPU: {why}"));
        } else {
            self.write_profiles(pass, &profiles, outputs)?;
            forgive_no_samples(pass);
        }
        self.log(format!(
            "off-CPU: {} switch-outs of {} threads over {:.1} ms ({:.2} s)",
            s.switch_samples,
            s.thread_count,
            s.window_ns as f64 / 1e6,
            started.elapsed().as_secs_f64()
        ));
        Ok(Some(profiles))
    }

    fn write_profiles(
        &self,
        pass: &mut Pass,
        p: &Profiles,
        outputs: &mut Vec<String>,
    ) -> Result<()> {
        let base = self.render_options(&pass.folded, &pass.stats);
        let window_ms = p.summary.window_ns as f64 / 1e6;
        let kinds = [
            ("offcpu", &p.off_cpu, "off-CPU", "io"),
            ("wallclock", &p.wall_clock, "wall-clock", "hot"),
        ];
        for (stem, stacks, what, palette) in kinds {
            let mut o = RenderOptions {
                title: format!("{} · {what}", base.title),
                subtitle: Some(format!(
                    "{what} ns · {} threads · window {window_ms:.1} ms · {} switch-outs",
                    p.summary.thread_count, p.summary.switch_samples
                )),
                count_name: "ns".into(),
                ..base.clone()
            };
            o.colors = RenderOptions::parse_palette(palette)?;
            for format in &self.opts.formats.render {
                let name = format!("{stem}.{}", format.extension());
                if stacks.is_empty() {
                    continue;
                }
                self.write_one(pass, &name, *format, stacks, &o)?;
                if !pass.failures.iter().any(|f| f.starts_with(&name)) {
                    outputs.push(name);
                }
            }
        }
        Ok(())
    }

    fn write_one(
        &self,
        pass: &mut Pass,
        name: &str,
        format: Format,
        stacks: &[(String, u64)],
        o: &RenderOptions,
    ) -> Result<()> {
        let mut f = self.output(name)?;
        let marked = render::marked::offcpu_frames();
        if let Err(e) = render::marked::render_marked(format, stacks, o, &marked, &mut f) {
            pass.failures.push(format!("{name}: {e}"));
            return Ok(());
        }
        f.flush().map_err(|e| Error::io(self.dir.join(name), e))?;
        f.commit()
    }
}

/// A capture whose threads each ran less than one sampling period has no
/// on-CPU sample, but its off-CPU and wall-clock profiles say where the
/// time went: a warning then, not a failure.
fn forgive_no_samples(pass: &mut Pass) {
    if let Some(i) = pass
        .warnings
        .iter()
        .position(|w| w == super::publish::NO_SAMPLES)
    {
        pass.warnings.remove(i);
        pass.warnings.push(
            "no on-CPU sample (per-thread sampling: no thread ran a whole sampling period); \
             the off-CPU and wall-clock profiles are drawn"
                .into(),
        );
    }
}
