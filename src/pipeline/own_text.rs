//! A capture folded from its own symbolized text (the old pipeline's
//! `perf.script.gz`, a `perf.script.zst` whose shards are gone) in one
//! read: each block, cut at sample boundaries, is parsed once into the
//! sample model ([`crate::text::script_samples`]) and handed to the fold,
//! the report's reader and the pprof profile together, as a symbolizing
//! run's samples are ([`Consumers`]). A block the model does not print
//! back goes to the fold and the reader as text; the profile is then
//! written from one walk over the text after the pass
//! ([`StreamedPprof::fits`]).

use std::path::Path;

use super::off_cpu_logs::OffCpuLogs;
use super::pprof_stream::StreamedPprof;
use super::Pipeline;
use crate::error::Result;
use crate::output::report::read::SampleReader;
use crate::symbolize::sample::{Batch, Frames};
use crate::text::fold::{Folded, Folder, StreamFolder};
use crate::text::script_samples::ScriptSamples;

/// The readers a run's samples go to, each in the order of the text:
/// the fold, the report's reader of the unit, the profile.
pub(super) struct Consumers<'a> {
    pub stream: &'a mut StreamFolder,
    /// The fold's number of unit 0 (a caller's fold of several inputs
    /// numbers their units on, [`super::memory`]; else 0).
    pub unit_base: usize,
    pub reader: Option<&'a mut SampleReader>,
    pub pprof: Option<&'a mut StreamedPprof>,
    /// The off-CPU accounting of the units' records (a run's only).
    pub off_cpu: Option<&'a mut OffCpuLogs>,
}

impl Consumers<'_> {
    /// Hands on `batch`, the next of unit `unit`, whose frame table on
    /// this side is `frames` (its new frames taken in).
    pub fn samples(self, unit: usize, frames: &mut Frames, mut batch: Batch) {
        // The profile keeps a table of its own: it may take the batch
        // after later ones.
        let new_frames = self.pprof.as_ref().map(|_| batch.new_frames.clone());
        frames.take(&mut batch);
        if let Some(logs) = self.off_cpu {
            logs.push(unit, &batch, frames);
        }
        self.stream
            .push_samples(self.unit_base + unit, &batch, frames);
        if let Some(r) = self.reader {
            r.samples(&batch, frames);
        }
        if let (Some(p), Some(new)) = (self.pprof, new_frames) {
            batch.new_frames = new;
            // The profile may hold the batch a while: not its records.
            batch.tasks = None;
            p.push(unit, batch);
        }
    }

    /// Hands on `block`, the next of unit `unit`, as text: the profile,
    /// which cannot take it, is written from the text instead.
    pub fn text(self, unit: usize, block: &[u8]) {
        if let Some(p) = self.pprof {
            p.spoil();
        }
        self.stream.push_whole_of(self.unit_base + unit, block);
        if let Some(r) = self.reader {
            r.sample(block);
        }
    }
}

/// What one read of a capture's own text gives.
pub(super) struct OwnText {
    pub folded: Folded,
    /// The report's reader (`None`: no report asked for).
    pub report: Option<SampleReader>,
    /// The profile (`None`: not asked for).
    pub pprof: Option<StreamedPprof>,
}

impl Pipeline<'_> {
    /// Reads the capture's own text `text` once for the fold, the report
    /// and the profile; see the module docs.
    pub(super) fn read_own_text(&self, text: &Path) -> Result<OwnText> {
        let mut pprof = self.streamed_pprof(1)?;
        // Off-CPU captures: the sampling event's, as the folded stacks.
        let event = self.fold_options().event_filter;
        let mut report =
            (self.opts.formats.report).then(|| SampleReader::of_event(event.as_deref()));
        let folder = Folder::new(self.fold_options_with_cells());
        let mut stream = folder.stream();
        let mut parsed = ScriptSamples::default();
        let mut frames = Frames::default();
        crate::text::samples::blocks(text, |block| {
            let to = Consumers {
                stream: &mut stream,
                unit_base: 0,
                reader: report.as_mut(),
                pprof: pprof.as_mut(),
                off_cpu: None,
            };
            match parsed.parse(block) {
                Some(batch) => to.samples(0, &mut frames, batch),
                None => to.text(0, block),
            }
        })?;
        if let Some(p) = pprof.as_mut() {
            p.all_done();
        }
        Ok(OwnText {
            folded: stream.finish(),
            report,
            pprof,
        })
    }
}
