//! `profile.pb.gz` written during the symbolize pass, from the structured
//! samples the runs hand the fold and the report (the native symbolizer's,
//! or `perf script`'s text parsed once): no text is read back for it. Runs go side by side; the profile takes their samples in
//! unit order (the archive's), holding a later run's batches until the runs
//! before it are done, so it is the profile a walk over the archive writes.
//! Its columns are fixed at its first sample: a capture recorded with
//! `--off-cpu` gets the off-CPU and wall columns, and when its off-CPU pass
//! then draws nothing, or a block of `perf script` text was not parsed
//! into samples ([`StreamedPprof::spoil`]), the profile is written from
//! the archive instead ([`StreamedPprof::fits`]).

use std::path::PathBuf;

use super::Pipeline;
use crate::error::Result;
use crate::output::pprof::capture::SampleProfile;
use crate::output::pprof::{Facts, PPROF};
use crate::symbolize::sample::Batch;
use crate::sys::atomic::AtomicFile;
use crate::text::fold;

/// The capture's profile as its runs' samples stream; see the module docs.
pub(super) struct StreamedPprof {
    /// The output, until the first sample starts the profile.
    file: Option<AtomicFile>,
    path: PathBuf,
    facts: Facts,
    opts: fold::Options,
    off_cpu: bool,
    profile: Option<SampleProfile<AtomicFile>>,
    /// The unit whose samples go in now.
    current: usize,
    done: Vec<bool>,
    held: Vec<Vec<Batch>>,
    /// A unit handed on text: the profile misses its samples.
    spoiled: bool,
}

impl StreamedPprof {
    /// Hands on `batch` of unit `unit`; the first batch with a sample starts
    /// the profile, with the fold's event (the filter's, or that sample's).
    pub(super) fn push(&mut self, unit: usize, batch: Batch) {
        if self.spoiled {
            return;
        }
        if let (None, Some(first)) = (&self.profile, batch.samples.first()) {
            let event = (self.opts.event_filter.clone())
                .unwrap_or_else(|| crate::text::perf_script::event_base(&first.event).into());
            self.opts.event_filter = Some(event.clone());
            let facts = Facts {
                event: Some(event),
                ..std::mem::take(&mut self.facts)
            };
            if let Some(f) = self.file.take() {
                self.profile = Some(SampleProfile::new(facts, &self.opts, self.off_cpu, f));
            }
        }
        if let Some(held) = self.held.get_mut(unit) {
            held.push(batch);
        }
        self.drain();
    }

    /// Unit `unit` sent its last batch.
    pub(super) fn done(&mut self, unit: usize) {
        if let Some(d) = self.done.get_mut(unit) {
            *d = true;
        }
        self.drain();
    }

    /// Every unit ended (those that never said so too).
    pub(super) fn all_done(&mut self) {
        self.done.iter_mut().for_each(|d| *d = true);
        self.drain();
    }

    /// Adds what the current unit holds, moving on past the units done.
    fn drain(&mut self) {
        let Some(p) = self.profile.as_mut() else {
            return;
        };
        while let Some(held) = self.held.get_mut(self.current) {
            for mut b in held.drain(..) {
                p.add(&mut b);
            }
            if !self.done[self.current] || self.current + 1 == self.held.len() {
                return;
            }
            self.current += 1;
            p.next_run();
        }
    }

    /// A unit handed on a block as text, which the profile does not take:
    /// it is not written (held samples are dropped).
    pub(super) fn spoil(&mut self) {
        self.spoiled = true;
        self.held.iter_mut().for_each(Vec::clear);
    }

    /// Whether the profile written has all the samples and the columns the
    /// capture's outputs call for: the off-CPU ones exactly when there are
    /// off-CPU stacks.
    pub(super) fn fits(&self, off_cpu: bool) -> bool {
        self.profile.is_some() && !self.spoiled && self.off_cpu == off_cpu
    }

    /// Finishes the profile with the off-CPU stacks `off_cpu` and publishes
    /// it. Nothing happens when no sample started it.
    pub(super) fn commit(self, off_cpu: Option<&[(String, u64)]>) -> Result<()> {
        let Some(p) = self.profile else {
            return Ok(());
        };
        let (mut f, _) = p.finish(&self.path, off_cpu)?;
        std::io::Write::flush(&mut f).map_err(|e| crate::error::Error::io(&self.path, e))?;
        f.commit()
    }
}

impl Pipeline<'_> {
    /// The profile to write as the `units` runs stream, when pprof is
    /// asked for.
    pub(super) fn streamed_pprof(&self, units: usize) -> Result<Option<StreamedPprof>> {
        let wanted = self
            .opts
            .formats
            .render
            .contains(&crate::output::render::Format::Pprof);
        if !wanted || units == 0 {
            return Ok(None);
        }
        let ids = self.shard_ids().by_path();
        Ok(Some(StreamedPprof {
            file: Some(self.output(PPROF)?),
            path: self.dir.join(PPROF),
            facts: crate::output::pprof::capture::facts(self.cap, None, ids),
            opts: self.fold_options(),
            off_cpu: self.off_cpu_shards(),
            profile: None,
            current: 0,
            done: vec![false; units],
            held: (0..units).map(|_| Vec::new()).collect(),
            spoiled: false,
        }))
    }
}
