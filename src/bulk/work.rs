//! The work itself: the directories with something to do, several at a
//! time, each through its steps (outputs by the per-capture pipeline or
//! drawn from `stacks.folded`, recompression, deletion of the old archive),
//! into one [`Outcome`] each.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use super::plan::{render_only_outputs, Plan};
use super::Options;
use crate::capture::{
    self, CaptureDir, Completion, Item, KeptStacks, Kind, Marker, Outcome, Status, FOLDED,
};
use crate::output::{archive, render::redraw};
use crate::pipeline;
use crate::symbolize::perf::PerfProbe;
use crate::sys::progress::{Counts, NoBars, Progress};

/// Why a step of bringing a directory up to date failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `perf.script.gz` could not be recompressed.
    #[error("recompressing {}: {source}", gz.display())]
    Recompress {
        /// The old archive.
        gz: PathBuf,
        /// What went wrong.
        source: Box<crate::Error>,
    },
    /// `perf.script.gz` could not be deleted.
    #[error("cannot delete {}: {source}", gz.display())]
    Delete {
        /// The old archive.
        gz: PathBuf,
        /// What went wrong.
        source: io::Error,
    },
    /// The output directory could not be made, or an output written.
    #[error(transparent)]
    Output(#[from] crate::Error),
}

/// Brings `todo` up to date, `opts.jobs()` captures at a time, with one
/// progress bar overall; the outcomes in the order they finished.
pub(super) fn work_all(
    todo: &[(Item, Plan)],
    opts: &Options,
    perf: &PerfProbe,
    progress: &dyn Progress,
) -> Vec<Outcome> {
    let jobs = opts.jobs().min(todo.len()).max(1);
    // Captures run side by side; the cores left over (fewer captures than
    // jobs) go to each capture's own perf script and fold threads.
    // One symbol store for every capture of this run (or array task).
    let (mut popts, store) = opts.process.with_store();
    popts.jobs = (opts.jobs() / jobs).max(1);
    popts.force = true; // plan() already decided what needs doing
    let bar = progress.bar(Some(todo.len() as u64), Counts::Items, "reprocess");
    // Per-capture bars stay hidden: one bar overall.
    let hidden = NoBars(progress);
    let next = AtomicUsize::new(0);
    let results = Mutex::new(Vec::with_capacity(todo.len()));
    std::thread::scope(|s| {
        for _ in 0..jobs {
            s.spawn(|| {
                while let Some((item, plan)) = todo.get(next.fetch_add(1, Ordering::Relaxed)) {
                    let o = work_on(item, plan, opts, &popts, perf, &hidden);
                    progress.result(&o.line());
                    bar.inc(1);
                    results.lock().expect("no panics hold it").push(o);
                }
            });
        }
    });
    bar.finish();
    store.log_to(progress);
    results.into_inner().expect("no panics hold it")
}

fn work_on(
    item: &Item,
    plan: &Plan,
    opts: &Options,
    popts: &pipeline::Options,
    perf: &PerfProbe,
    progress: &dyn Progress,
) -> Outcome {
    let start = Instant::now();
    let mut stacks = None;
    let mut steps = || -> std::result::Result<Vec<String>, (Status, String)> {
        let mut done = Vec::new();
        if plan.outputs.is_some() {
            let (line, kept) = write_outputs(item, popts, perf, progress)?;
            done.push(line);
            stacks = kept;
        }
        let dir = &item.capture.dir;
        if plan.recompress {
            done.extend(recompress_step(dir, popts).map_err(|e| (Status::Failed, e.to_string()))?);
        }
        if plan.replace && opts.replace_archives {
            done.extend(replace_step(dir, opts).map_err(|e| (Status::Failed, e.to_string()))?);
        }
        Ok(done)
    };
    let (status, message) = match steps() {
        Ok(done) => (Status::Processed, done.join("; ")),
        Err(failed) => failed,
    };
    Outcome {
        dir: item.capture.subject().to_path_buf(),
        status,
        message,
        elapsed: start.elapsed(),
        stacks,
    }
}

/// What [`write_outputs`] did, and the folded stacks kept for the views.
type Written = (String, Option<Arc<KeptStacks>>);

/// The outputs: the whole pipeline for a capture, the renders alone for a
/// render-only directory (with the folded stacks kept for the views).
/// Err: the status and message when not processed.
fn write_outputs(
    item: &Item,
    popts: &pipeline::Options,
    perf: &PerfProbe,
    progress: &dyn Progress,
) -> std::result::Result<Written, (Status, String)> {
    let (status, message, stacks) = match item.kind {
        Kind::Capture => {
            let r = pipeline::process_capture(&item.capture, popts, perf, progress);
            (r.status, r.message, r.stacks)
        }
        Kind::RenderOnly => match redraw(&item.capture, &popts.formats) {
            Ok(msg) => (Status::Processed, msg, None),
            Err(e) => (Status::Failed, e.to_string(), None),
        },
    };
    if status == Status::Processed {
        Ok((message, stacks))
    } else {
        Err((status, message))
    }
}

/// perf.script.gz recompressed to perf.script.zst, unless processing has
/// just written a fresh perf.script.zst (then recompressing the old text
/// is pointless: None).
fn recompress_step(dir: &Path, popts: &pipeline::Options) -> Result<Option<String>, Error> {
    let gz = dir.join(capture::SCRIPT_GZ);
    let out = capture::ensure_output_dir(dir)?;
    let zst = out.join(capture::SCRIPT_ZST);
    if capture::is_plain_file(&zst) {
        return Ok(None);
    }
    capture::remove_stale_temporaries(&out, &[capture::SCRIPT_ZST]);
    let (raw, packed) =
        archive::recompress(&gz, &zst, popts.zstd_level).map_err(|source| Error::Recompress {
            gz: gz.clone(),
            source: Box::new(source),
        })?;
    Ok(Some(format!(
        "{} recompressed to {} ({raw} bytes of text, {} -> {packed} bytes)",
        capture::SCRIPT_GZ,
        capture::SCRIPT_ZST,
        fs::metadata(&gz).map(|m| m.len()).unwrap_or(0),
    )))
}

/// perf.script.gz deleted (None when it was already gone), but only once the new archive and the outputs
/// are complete: the .gz is the last copy of the symbolized text otherwise.
fn replace_step(dir: &Path, opts: &Options) -> Result<Option<String>, Error> {
    let gz = dir.join(capture::SCRIPT_GZ);
    let out = capture::output_dir(dir);
    let zst = out.join(capture::SCRIPT_ZST);
    let complete = matches!(
        capture::completion(&out, &opts.process.formats.names()),
        Completion::Done(_)
    );
    if !(capture::is_plain_file(&zst) && complete) {
        return Ok(Some(format!(
            "{} kept: no complete {} and outputs to replace it with",
            capture::SCRIPT_GZ,
            capture::SCRIPT_ZST
        )));
    }
    match fs::remove_file(&gz) {
        Ok(()) => Ok(Some(format!("{} deleted", capture::SCRIPT_GZ))),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(Error::Delete { gz, source }),
    }
}

/// Draws the flamegraphs of a directory that only kept `stacks.folded`,
/// then writes the marker.
fn redraw(cap: &CaptureDir, formats: &pipeline::Formats) -> crate::Result<String> {
    let dir = &cap.dir;
    let names = render_only_outputs(formats);
    let mut refs: Vec<&str> = names.iter().map(String::as_str).collect();
    refs.push(capture::MARKER);
    capture::remove_stale_temporaries(dir, &refs);
    capture::clear_marker(dir)?;
    let (total, count_name) = redraw::from_folded(cap, &names)?;
    capture::write_marker(dir, &Marker::new(names.clone(), None), None)?;
    Ok(format!(
        "drawn from {FOLDED} ({total} {count_name}): {}",
        names.join(", ")
    ))
}
