//! A capture's `profile.pb.gz` from its symbolized text: the facts of the
//! capture (labels, window, frequency, build ids of its shards) and one walk
//! over the text ([`crate::text::samples::walk`]) feeding [`TextProfile`]; other
//! per-sample consumers (the page's timeline) ride along on the same walk.

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

use super::{Facts, TextProfile};
use crate::capture::ValidCapture;
use crate::error::{Error, Result};
use crate::text::fold;
use crate::text::samples::{self, Sample};

/// The facts of `cap` for its profile; `event` is the folded event,
/// `build_ids` the shards' build ids by DSO path (as read once for the
/// capture: [`crate::symbolize::build_ids::ShardIds::by_path`]).
pub fn facts(
    cap: &ValidCapture,
    event: Option<String>,
    build_ids: HashMap<String, String>,
) -> Facts {
    let mut labels = Vec::new();
    if let Some(w) = cap.found.worker {
        labels.push(("worker".to_string(), w.to_string()));
    }
    labels.push(("query".to_string(), cap.found.query.clone()));
    if let Some(h) = &cap.host {
        labels.push(("node".to_string(), h.clone()));
    }
    let json: Option<serde_json::Value> =
        std::fs::read_to_string(cap.found.dir.join(jobprof_capture_format::CAPTURE_JSON))
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok());
    let field = |k: &str| {
        json.as_ref()
            .and_then(|j| j.get(k))
            .and_then(|v| v.as_u64())
    };
    Facts {
        labels,
        event,
        start_unix_ns: field("enabled_unix_ns"),
        end_unix_ns: field("disabled_unix_ns"),
        frequency: field("frequency"),
        build_ids,
    }
}

/// Writes the profile of the perf script text at `text` (folded with
/// `opts`) to `out` (the file `out_path`), calling `tap` with every sample
/// too; with `off_cpu` (the off-CPU pass's stacks, as in `offcpu.folded`,
/// of a capture with switch data) the off-CPU and wall columns too.
/// Returns `out` and the samples written.
pub fn write<W: Write>(
    text: &Path,
    out_path: &Path,
    opts: &fold::Options,
    facts: Facts,
    off_cpu: Option<&[(String, u64)]>,
    out: W,
    tap: impl FnMut(&Sample<'_>),
) -> Result<(W, u64)> {
    let to = (out_path, off_cpu, out);
    write_with_text(text, opts, facts, to, |_| {}, tap)
}

/// [`write`], also handing `raw` every sample's text as
/// [`samples::walk_with_text`] does; `to`: the output's path (for
/// messages), the off-CPU stacks, and where the profile goes.
pub fn write_with_text<W: Write>(
    text: &Path,
    opts: &fold::Options,
    facts: Facts,
    to: (&Path, Option<&[(String, u64)]>, W),
    raw: impl FnMut(&[u8]),
    mut tap: impl FnMut(&Sample<'_>),
) -> Result<(W, u64)> {
    let (out_path, off_cpu, out) = to;
    let mut profile = TextProfile::new(facts, off_cpu.is_some(), out);
    let mut failed = None;
    let n = samples::walk_with_text(text, opts, raw, |s| {
        tap(s);
        if failed.is_none() {
            failed = profile.add(s).err();
        }
    })?;
    if let Some(e) = failed {
        return Err(Error::io(out_path, e));
    }
    for (stack, ns) in off_cpu.unwrap_or_default() {
        profile
            .add_off_cpu(stack, *ns)
            .map_err(|e| Error::io(out_path, e))?;
    }
    let out = profile.finish().map_err(|e| Error::io(out_path, e))?;
    Ok((out, n))
}
