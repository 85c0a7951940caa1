//! The off-CPU stage of the per-capture pipeline: for captures recorded with
//! `--off-cpu`, a second pass per shard ([`crate::text::offcpu`]: the native
//! symbolizer where `--symbolizer` allows and it takes the shard, else
//! `perf script`)
//! and the `offcpu.*` and `wallclock.*` outputs in the formats asked for,
//! state frames in their fixed colours. A capture whose shards hold no
//! switch data says so (log line, summary warning) instead of drawing
//! nothing.

use std::io::Write;
use std::path::Path;
use std::time::Instant;

use super::{Pass, Pipeline};
use crate::error::{Error, Result};
use crate::output::render::{self, Format, RenderOptions};
use crate::symbolize::native;
use crate::symbolize::perf::ScriptOptions;
use crate::text::offcpu::{self, Profiles};

impl Pipeline<'_> {
    /// Whether any shard was recorded with `--off-cpu`.
    pub(super) fn off_cpu_shards(&self) -> bool {
        self.shard_files().iter().any(|d| offcpu::recorded(d))
    }

    fn shard_files(&self) -> Vec<&Path> {
        self.cap
            .shards
            .iter()
            .filter(|s| s.bytes.is_some())
            .map(|s| s.data_file.as_path())
            .collect()
    }

    /// Makes and writes the off-CPU and wall-clock profiles; returns them
    /// (for `profile.pb.gz`) with their summary section, or `None` for a
    /// capture recorded without `--off-cpu`.
    pub(super) fn off_cpu_outputs(
        &self,
        pass: &mut Pass,
        outputs: &mut Vec<String>,
    ) -> Result<Option<Profiles>> {
        if !self.off_cpu_shards() {
            return Ok(None);
        }
        // perf only for a shard the native symbolizer does not read.
        let perf = self.perf;
        let script = ScriptOptions {
            inline: self.opts.inline,
            symfs: self.perf_symfs(),
            kallsyms: self.kernel_symbols().file().map(Path::to_path_buf),
        };
        let started = Instant::now();
        let shards = self.shard_files();
        let event = self.cap.event.as_deref();
        // The on-CPU pass's rule: native unless `--symbolizer perf`.
        let natively = (self.opts.symbolizer != native::Choice::Perf).then(|| {
            native::Symbolizer::with_store(
                native::Options {
                    sources: self.sources().search.clone(),
                    kallsyms: script.kallsyms.clone(),
                    inline: script.inline,
                    jit: Some(self.cap.found.dir.clone()),
                },
                self.store.clone(),
            )
        });
        let jobs = self.opts.jobs();
        let sym = natively.as_ref();
        let profiles = match offcpu::analyze_capture(perf, &script, sym, &shards, event, jobs) {
            Ok(Some(p)) => p,
            Ok(None) => return Ok(None),
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
