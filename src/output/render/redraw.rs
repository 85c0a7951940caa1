//! Flamegraphs drawn again from a directory's `stacks.folded` alone (the
//! old pipeline's directories whose raw data and texts are gone).

use std::path::Path;

use super::folded::{count_name_beside, read_folded};
use super::{capture_title, render, Format, RenderOptions};
use crate::capture::{CaptureDir, FOLDED};
use crate::error::Result;
use crate::sys::atomic::{AtomicFile, Destination};
use crate::sys::input::Source;

/// Draws the outputs `names` (flamegraph file names: the format is
/// known by the extension) of `cap` from its `stacks.folded`, each written
/// atomically. Returns the total drawn and what it counts (`ns` for a
/// `cpu-clock` capture, [`count_name_beside`]); an error when the file
/// holds no usable stack.
pub fn from_folded(cap: &CaptureDir, names: &[String]) -> Result<(u64, String)> {
    let dir = &cap.dir;
    let folded = dir.join(FOLDED);
    let count_name = count_name_beside(&folded).unwrap_or_else(|| "samples".into());
    let input = read_folded(&[Source::Path(folded)])?;
    if input.stacks.is_empty() {
        return Err(input.nothing_usable(FOLDED).into());
    }
    let worker = cap.worker.map(|w| w.to_string());
    let opts = RenderOptions {
        title: capture_title(None, worker.as_deref(), Some(&cap.query)),
        subtitle: Some(format!(
            "{} {count_name} · drawn from stacks.folded",
            input.total()
        )),
        count_name: count_name.clone(),
        ..RenderOptions::default()
    };
    for name in names {
        let format = Format::from_path(Path::new(name))?;
        let mut f = AtomicFile::open(&dir.join(name), Destination::Confined, false)?;
        render(format, &input.stacks, &opts, &mut f)?;
        f.commit()?;
    }
    Ok((input.total(), count_name))
}
