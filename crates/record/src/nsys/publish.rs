//! Publishing one settled report: `NSYS_ROOT/worker_N/Q/` appears all at
//! once, holding the report (hard-linked from staging on the same file
//! system, else copied and flushed) and `nsys-capture.json`, or not at
//! all. Built in the hidden `worker_N/.Q.publishing` and renamed into
//! place by the publication perf captures use too
//! (`crate::publish::query_dir`: a real directory of ours, nothing written
//! through a symlink, an existing `Q` never replaced). On a full disk
//! nothing partial stays and the staged report is untouched.

use std::fs;
use std::path::{Path, PathBuf};

use jobprof_capture_format::nsys::{NsysCapture, NSYS_CAPTURE_JSON};
use jobprof_capture_format::CAPTURE_JSON;

use crate::publish::{ctx, query_dir, write_meta};
use crate::sys;

/// Publishes the staged report `staged` with `meta` into
/// `out_worker/<query>`; returns that directory, or why not (the staged
/// report then stays where it is).
pub fn report(staged: &Path, out_worker: &Path, meta: &NsysCapture) -> Result<PathBuf, String> {
    let keep = format!("the report stays in {}", staged.display());
    let taken = |final_dir: &Path| {
        if final_dir.join(CAPTURE_JSON).exists() {
            " and holds a perf capture: give the nsys sidecar its own --out \
             (e.g. RESULT/profiles/nsys)"
        } else {
            " (an earlier run?); not overwritten"
        }
    };
    query_dir(out_worker, &meta.query, &keep, taken, |tmp| {
        fs::create_dir(tmp).map_err(|e| ctx("cannot create", tmp, e))?;
        let dst = tmp.join(&meta.file);
        if fs::hard_link(staged, &dst).is_err() {
            sys::copy_new(staged, &dst).map_err(|e| ctx("cannot copy the report into", &dst, e))?;
        }
        write_meta(tmp, NSYS_CAPTURE_JSON, &meta.to_json())
    })
}
