//! What each directory found needs (outputs, recompression, deletion of
//! the old archive), decided from file names and the marker only, before
//! any work starts; a dry run's outcomes; and the job array that shares
//! what is to do.

use std::time::Duration;

use super::Options;
use crate::capture::{self, Completion, Item, Kind, Outcome, Status, HTML, SVG};
use crate::error::{Error, Result};
use crate::output::render::Format;
use crate::pipeline;
use crate::sys::slurm::array::{self, ArrayJob};

/// What one directory needs, decided from file names and the marker only.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// Why the outputs must be (re)made; `None` when they are complete.
    pub outputs: Option<String>,
    /// Write `perf.script.zst` from `perf.script.gz`.
    pub recompress: bool,
    /// Delete `perf.script.gz` afterwards.
    pub replace: bool,
}

impl Plan {
    /// True when nothing is to be done.
    pub fn is_empty(&self) -> bool {
        self.outputs.is_none() && !self.recompress && !self.replace
    }

    /// The work in words (`process (never processed), recompress`).
    pub fn describe(&self, kind: Kind) -> String {
        let mut v = Vec::new();
        if let Some(why) = &self.outputs {
            let verb = match kind {
                Kind::Capture => "process",
                Kind::RenderOnly => "render stacks.folded",
            };
            v.push(format!("{verb} ({why})"));
        }
        if self.recompress {
            v.push(format!(
                "recompress {} to {}",
                capture::SCRIPT_GZ,
                capture::SCRIPT_ZST
            ));
        }
        if self.replace {
            v.push(format!("delete {}", capture::SCRIPT_GZ));
        }
        v.join(", ")
    }
}

/// Outputs a render-only directory gets.
pub(super) fn render_only_outputs(formats: &pipeline::Formats) -> Vec<String> {
    let mut v: Vec<String> = formats
        .render
        .iter()
        .filter(|f| **f != Format::Folded)
        .map(|f| pipeline::output_name(*f).to_string())
        .collect();
    if v.is_empty() {
        // Asked only for folded/summary: the stacks are already there, the
        // pictures are still what such a directory lacks.
        v = vec![SVG.to_string(), HTML.to_string()];
    }
    v
}

/// Decides what `item` needs.
pub fn plan(item: &Item, opts: &Options) -> Plan {
    let dir = &item.capture.dir;
    let wanted = match item.kind {
        Kind::Capture => opts.process.formats.names(),
        Kind::RenderOnly => render_only_outputs(&opts.process.formats),
    };
    let outputs = if opts.force {
        Some("--force".to_string())
    } else {
        match capture::completion(&item.capture.out_dir(), &wanted) {
            Completion::Done(_) => None,
            Completion::NotDone => Some("not processed yet".to_string()),
            Completion::Stale(why) => Some(why),
        }
    };
    let gz = dir.join(capture::SCRIPT_GZ).is_file();
    let zst = item.capture.out_dir().join(capture::SCRIPT_ZST).is_file();
    let is_capture = item.kind == Kind::Capture;
    Plan {
        outputs,
        recompress: is_capture && opts.recompress() && gz && !zst,
        replace: is_capture && opts.replace_archives && gz,
    }
}

/// What a dry run says of `item`: what would be done, or why not.
pub(super) fn dry_run(item: &Item, plan: &Plan) -> Outcome {
    let mut o = Outcome {
        dir: item.capture.subject().to_path_buf(),
        status: Status::Skipped,
        message: "already complete".into(),
        elapsed: Duration::ZERO,
        stacks: None,
    };
    if plan.is_empty() {
        return o;
    }
    if item.kind == Kind::Capture && plan.outputs.is_some() {
        if let Err(refusal) = capture::validate(&item.capture) {
            o.status = Status::Refused;
            o.message = refusal.0;
            return o;
        }
    }
    o.status = Status::Processed;
    o.message = format!("would {}", plan.describe(item.kind));
    o
}

/// The sbatch script of a job array that runs `jobprof reprocess` over
/// `job.roots` ([`array::script`]): the roots made absolute, the array as
/// large as the captures with work to do (at most
/// [`array::DEFAULT_MAX_ARRAY`]) unless told. Each task finds its share
/// ([`super::Split`]) from `SLURM_ARRAY_TASK_ID`.
pub fn array_script(job: &ArrayJob) -> Result<String> {
    let mut roots = Vec::new();
    for r in &job.roots {
        let abs = r.canonicalize().map_err(|e| Error::io(r, e))?;
        roots.push(abs);
    }
    let found = capture::find(&roots)?;
    let opts = Options {
        recompress: job.extra_args.iter().any(|a| a == "--recompress"),
        replace_archives: job.extra_args.iter().any(|a| a == "--replace-archives"),
        force: job.extra_args.iter().any(|a| a == "--force"),
        ..Options::default()
    };
    let pending = found
        .items
        .iter()
        .filter(|i| !plan(i, &opts).is_empty())
        .count();
    array::script(job, &roots, found.items.len(), pending)
}
