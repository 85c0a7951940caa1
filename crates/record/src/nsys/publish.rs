//! Publishing one settled report: `NSYS_ROOT/worker_N/Q/` appears all at
//! once, holding the report (hard-linked from staging on the same file
//! system, else copied and flushed) and `nsys-capture.json`, or not at
//! all. Built in the hidden `worker_N/.Q.publishing` and renamed into
//! place, as perf captures are (`crate::publish`, whose checks of
//! `worker_N` it uses: a real directory of ours, nothing written through
//! a symlink, an existing `Q` never replaced). On a full disk nothing
//! partial stays and the staged report is untouched.

use std::fs;
use std::path::{Path, PathBuf};

use jobprof_capture_format::nsys::{NsysCapture, NSYS_CAPTURE_JSON};
use jobprof_capture_format::CAPTURE_JSON;

use crate::publish::{clear_stale, out_dir};
use crate::sys;
use crate::tokens::write_atomic;

/// Publishes the staged report `staged` with `meta` into
/// `out_worker/<query>`; returns that directory, or why not (the staged
/// report then stays where it is).
pub fn report(staged: &Path, out_worker: &Path, meta: &NsysCapture) -> Result<PathBuf, String> {
    let q = &meta.query;
    let keep = || format!("the report stays in {}", staged.display());
    out_dir(out_worker).map_err(|e| format!("{e}; {}", keep()))?;
    let final_dir = out_worker.join(q);
    if fs::symlink_metadata(&final_dir).is_ok() {
        let whose = if final_dir.join(CAPTURE_JSON).exists() {
            " and holds a perf capture: give the nsys sidecar its own --out \
             (e.g. RESULT/profiles/nsys)"
        } else {
            " (an earlier run?); not overwritten"
        };
        return Err(format!(
            "{} already exists{whose}; {}",
            final_dir.display(),
            keep()
        ));
    }
    let tmp = out_worker.join(format!(".{q}.publishing"));
    clear_stale(&tmp)?;
    let result = (|| -> Result<(), String> {
        let ctx = |what: &str, p: &Path, e: std::io::Error| format!("{what} {}: {e}", p.display());
        fs::create_dir(&tmp).map_err(|e| ctx("cannot create", &tmp, e))?;
        let dst = tmp.join(&meta.file);
        if fs::hard_link(staged, &dst).is_err() {
            sys::copy_new(staged, &dst).map_err(|e| ctx("cannot copy the report into", &dst, e))?;
        }
        let json = tmp.join(NSYS_CAPTURE_JSON);
        write_atomic(&json, meta.to_json().as_bytes())
            .map_err(|e| ctx("cannot write", &json, e))?;
        sys::sync_dir(&tmp);
        fs::rename(&tmp, &final_dir).map_err(|e| ctx("cannot rename into", &final_dir, e))?;
        sys::sync_dir(out_worker);
        Ok(())
    })();
    match result {
        Ok(()) => Ok(final_dir),
        Err(e) => {
            let _ = fs::remove_dir_all(&tmp);
            Err(format!("{e}; {}", keep()))
        }
    }
}
