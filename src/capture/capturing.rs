//! Captures `jobprof-record` is writing now: the marker a sidecar leaves in
//! `PERF_ROOT/worker_N/.capturing` while a capture runs
//! ([`jobprof_capture_format::Capturing`]). The capture itself lives in the
//! sidecar's staging directory until its `stop` publishes it, so without
//! the marker a result directory looks empty; with it, `jobprof process`
//! and `reprocess` say what is going on.

use std::fs;
use std::path::{Path, PathBuf};

use jobprof_capture_format::{Capturing, CAPTURING, MAX_CAPTURING_BYTES};

use super::layout::{read_plain, worker_index};

/// One capture in progress.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BeingWritten {
    /// `PERF_ROOT/worker_N`, where it will be published.
    pub worker_dir: PathBuf,
    /// N.
    pub worker: Option<u32>,
    /// What the marker says.
    pub marker: Capturing,
}

impl BeingWritten {
    /// `worker 0, q03; staged in STAGING/worker_0/q03 on node1 since TIME`.
    pub fn describe(&self) -> String {
        let who = match self.worker {
            Some(w) => format!("worker {w}, {}", self.marker.query),
            None => self.marker.query.clone(),
        };
        let mut s = format!("{who}; staged in {}", self.marker.staging);
        if !self.marker.host.is_empty() {
            s.push_str(&format!(" on {}", self.marker.host));
        }
        if self.marker.since_unix_ns > 0 {
            let since = crate::sys::units::format_utc(self.marker.since_unix_ns / 1_000_000_000);
            s.push_str(&format!(" since {since}"));
        }
        s
    }

    /// Where it will appear once published: `PERF_ROOT/worker_N/Q`.
    pub fn capture_dir(&self) -> PathBuf {
        self.worker_dir.join(&self.marker.query)
    }
}

/// The captures being written under `root`: a `worker_N` directory, a
/// `profiles/perf` directory, a result directory, or a directory of result
/// directories (one level down), sorted by worker directory.
pub fn being_written(root: &Path) -> Vec<BeingWritten> {
    let mut workers = Vec::new();
    let mut perf_roots = vec![root.to_path_buf(), root.join("profiles/perf")];
    if is_worker_dir(root) {
        workers.push(root.to_path_buf());
    } else if let Ok(rd) = fs::read_dir(root) {
        for e in rd.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                perf_roots.push(e.path().join("profiles/perf"));
            }
        }
    }
    for perf_root in perf_roots {
        let Ok(rd) = fs::read_dir(&perf_root) else {
            continue;
        };
        for e in rd.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) && is_worker_dir(&e.path()) {
                workers.push(e.path());
            }
        }
    }
    workers.sort();
    workers.dedup();
    workers
        .into_iter()
        .filter_map(|w| read_marker(&w))
        .collect()
}

fn is_worker_dir(p: &Path) -> bool {
    p.file_name()
        .and_then(|n| n.to_str())
        .and_then(worker_index)
        .is_some()
}

/// The marker of `worker_dir`, when it holds a readable one (a link, a
/// special file or an oversized file is not one).
fn read_marker(worker_dir: &Path) -> Option<BeingWritten> {
    let path = worker_dir.join(CAPTURING);
    let size = fs::symlink_metadata(&path).ok()?.len();
    if size > MAX_CAPTURING_BYTES {
        return None;
    }
    let marker = Capturing::parse(&read_plain(&path).ok()?)?;
    Some(BeingWritten {
        worker: worker_dir
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(worker_index),
        worker_dir: worker_dir.to_path_buf(),
        marker,
    })
}

/// "a capture is being written (worker 0, q03; staged in ...)" for each of
/// `found`, joined with "; " (empty when there is none).
pub fn sentence(found: &[BeingWritten]) -> String {
    found
        .iter()
        .map(|b| format!("a capture is being written ({})", b.describe()))
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_are_found_from_every_kind_of_root() {
        let t = tempfile::tempdir().unwrap();
        let w = t.path().join("result_1/profiles/perf/worker_3");
        fs::create_dir_all(&w).unwrap();
        let m = Capturing {
            query: "q03".into(),
            staging: "/stage/worker_3/q03".into(),
            host: "n1".into(),
            pid: 5,
            since_unix_ns: 0,
        };
        fs::write(w.join(CAPTURING), m.to_text()).unwrap();
        for root in [
            t.path().to_path_buf(),
            t.path().join("result_1"),
            t.path().join("result_1/profiles/perf"),
            w.clone(),
        ] {
            let found = being_written(&root);
            assert_eq!(found.len(), 1, "{}", root.display());
            assert_eq!(found[0].worker, Some(3));
            assert_eq!(
                sentence(&found),
                "a capture is being written (worker 3, q03; staged in /stage/worker_3/q03 on n1)"
            );
        }
        fs::remove_file(w.join(CAPTURING)).unwrap();
        std::os::unix::fs::symlink("/etc/hostname", w.join(CAPTURING)).unwrap();
        assert!(being_written(t.path()).is_empty(), "a link is not a marker");
        fs::remove_file(w.join(CAPTURING)).unwrap();
        let fifo = std::ffi::CString::new(w.join(CAPTURING).into_os_string().into_encoded_bytes())
            .unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        assert!(being_written(t.path()).is_empty(), "a FIFO is not read");
    }
}
