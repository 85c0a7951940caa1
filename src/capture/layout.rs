//! Where things are in a result directory: the file names jobprof reads
//! and writes in a capture directory, [`CaptureDir`] (one capture found on
//! disk) and where its outputs go ([`output_dir`]), and the careful way
//! jobprof opens its own small files ([`read_plain`]).

use std::fs;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// Symbolized text written by `jobprof process` (zstd, concatenated frames).
pub const SCRIPT_ZST: &str = "perf.script.zst";
/// Symbolized text written by the old shell pipeline (gzip).
pub const SCRIPT_GZ: &str = "perf.script.gz";
/// The old pipeline's capture metadata (key=value lines).
pub const LEGACY_METADATA: &str = "capture-metadata.txt";
/// The old post-processing's own record of how it made its outputs.
pub const LEGACY_POSTPROCESS_METADATA: &str = "postprocess-metadata.txt";

/// Name of the folded stacks output.
pub const FOLDED: &str = "stacks.folded";
/// Name of the SVG flamegraph.
pub const SVG: &str = "flamegraph.svg";
/// Name of the offline HTML page.
pub const HTML: &str = "flamegraph.html";
/// Name of the speedscope profile.
pub const SPEEDSCOPE: &str = "profile.speedscope.json";
/// Name of the summary.
pub const SUMMARY: &str = "summary.json";
/// The kernel symbol table `jobprof-record` snapshots next to `symfs/`.
pub const KALLSYMS: &str = "kallsyms";

/// One capture directory found by [`super::discover`] (not yet validated).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaptureDir {
    /// `.../worker_N/Q`.
    pub dir: PathBuf,
    /// N, when the parent is named `worker_N`.
    pub worker: Option<u32>,
    /// Q: the directory's name.
    pub query: String,
    /// Set for a plain `perf record` output (no capture metadata): the
    /// file, and where its outputs go.
    pub plain: Option<PlainData>,
}

/// A plain `perf record` output found by [`super::discover`]: `jobprof
/// process PATH/perf.data`, or a directory holding `perf.data` or
/// `perf.data.*` without capture metadata. It is a capture of one shard
/// (the file), with no `symfs/` and no kernel symbol snapshot: names come
/// from this host's files by build id, as `perf report` takes them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlainData {
    /// The `perf.data` file.
    pub file: PathBuf,
    /// Where its outputs go: [`plain_output_dir`], or `-o DIR`.
    pub out: PathBuf,
}

/// Suffix of the directory beside a plain `perf.data` that holds its
/// outputs (`perf.data.jobprof/`); the input is never modified.
pub const PLAIN_OUTPUT_SUFFIX: &str = ".jobprof";

/// `FILE.jobprof`, beside `file`: where the outputs of a plain `perf.data`
/// go unless `-o DIR` says otherwise.
pub fn plain_output_dir(file: &Path) -> PathBuf {
    let mut name = file.file_name().unwrap_or_default().to_os_string();
    name.push(PLAIN_OUTPUT_SUFFIX);
    file.with_file_name(name)
}

impl CaptureDir {
    /// `worker_N/Q` (or just `Q`; the file for a plain `perf.data`), for
    /// messages.
    pub fn label(&self) -> String {
        if let Some(p) = &self.plain {
            return p.file.display().to_string();
        }
        match self.worker {
            Some(w) => format!("worker_{w}/{}", self.query),
            None => self.query.clone(),
        }
    }

    /// Where jobprof writes this capture's outputs: [`output_dir`], or a
    /// plain `perf.data`'s own ([`PlainData::out`]).
    pub fn out_dir(&self) -> PathBuf {
        match &self.plain {
            Some(p) => p.out.clone(),
            None => output_dir(&self.dir),
        }
    }

    /// What the capture is, for result lines: its directory, or the plain
    /// `perf.data` file.
    pub fn subject(&self) -> &Path {
        match &self.plain {
            Some(p) => &p.file,
            None => &self.dir,
        }
    }

    /// [`ensure_output_dir`], or a plain `perf.data`'s output directory
    /// created (with its parents for `-o DIR`), never through a link.
    pub fn ensure_out_dir(&self) -> Result<PathBuf> {
        let Some(p) = &self.plain else {
            return ensure_output_dir(&self.dir);
        };
        match fs::symlink_metadata(&p.out) {
            Ok(m) if m.is_dir() => Ok(p.out.clone()),
            Ok(_) => Err(Error::Usage(format!(
                "{}: is not a directory (a symbolic link or a file); jobprof writes the \
                 outputs of {} there and refuses to follow it",
                p.out.display(),
                p.file.display()
            ))),
            Err(_) => {
                fs::create_dir_all(&p.out).map_err(|e| Error::io(&p.out, e))?;
                Ok(p.out.clone())
            }
        }
    }

    /// The worker directory (`worker_N/`), holding the shared `symfs/`.
    pub fn worker_dir(&self) -> Option<&Path> {
        self.dir.parent()
    }
}

/// The subdirectory of an old-pipeline capture that holds jobprof's
/// outputs: the old post-processing wrote `stacks.folded`,
/// `flamegraph.html`, `build-ids.txt` and its own `.postprocess-complete`
/// in the capture directory, and jobprof never modifies those.
pub const LEGACY_OUTPUT_DIR: &str = "jobprof";

/// Where jobprof writes a capture's outputs: the capture directory itself,
/// or [`LEGACY_OUTPUT_DIR`] inside it for a capture of the old pipeline
/// (one with `capture-metadata.txt`), whose own files stay untouched.
pub fn output_dir(dir: &Path) -> PathBuf {
    if is_plain_file(&dir.join(LEGACY_METADATA)) {
        dir.join(LEGACY_OUTPUT_DIR)
    } else {
        dir.to_path_buf()
    }
}

/// Creates [`output_dir`] when it is a subdirectory that is not there yet;
/// refuses one that is a symbolic link or not a directory.
pub fn ensure_output_dir(dir: &Path) -> Result<PathBuf> {
    let out = output_dir(dir);
    if out == dir {
        return Ok(out);
    }
    match fs::symlink_metadata(&out) {
        Ok(m) if m.is_dir() => Ok(out),
        Ok(_) => Err(Error::Usage(format!(
            "{}: is not a directory (a symbolic link or a file); jobprof writes the outputs of \
             an old-pipeline capture there and refuses to follow it",
            out.display()
        ))),
        Err(_) => match fs::create_dir(&out) {
            Ok(()) => Ok(out),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(out),
            Err(e) => Err(Error::io(&out, e)),
        },
    }
}

/// Reads a small file jobprof opens on its own (metadata, manifest,
/// marker) without following a symbolic link and without blocking on a
/// FIFO: anything but a regular file is an error.
pub fn read_plain(path: &Path) -> std::io::Result<String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "is a symbolic link; refusing to follow it",
            ),
            _ => e,
        })?;
    if !f.metadata()?.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "is not a regular file",
        ));
    }
    let mut text = String::new();
    f.read_to_string(&mut text)?;
    Ok(text)
}

/// True when `path` is a regular file itself (a symbolic link is not).
pub fn is_plain_file(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok_and(|m| m.is_file())
}

/// True when `path` is a directory itself (a symbolic link is not).
pub(crate) fn is_plain_dir(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok_and(|m| m.is_dir())
}

/// The original pipeline's flat layout: `result_dir_<jobid>/perf/perf.data.<n>`.
/// Returns the `perf.data.<n>` files of `dir`, sorted by `n`.
pub fn numbered_data_files(dir: &Path) -> Vec<(u32, PathBuf)> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<(u32, PathBuf)> = entries
        .flatten()
        .filter_map(|e| {
            let n = numbered_data_file(&e.file_name().to_string_lossy())?;
            let regular = e.file_type().ok()?.is_file();
            Some((n, e.path())).filter(|_| regular)
        })
        .collect();
    out.sort();
    out
}

/// N of a `perf.data.<n>` file name (the original pipeline's flat layout).
pub(crate) fn numbered_data_file(name: &str) -> Option<u32> {
    let n = name.strip_prefix("perf.data.")?;
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    n.parse().ok()
}

/// `root/perf` when `root` is a result directory of the original pipeline
/// (`result_dir_<jobid>/perf/perf.data.<n>`).
pub fn flat_layout_dir(root: &Path) -> Option<PathBuf> {
    let perf = root.join("perf");
    (is_plain_dir(&perf) && !numbered_data_files(&perf).is_empty()).then_some(perf)
}

/// `perf.data` or `perf.data.partNNN`: a capture's data file.
pub(crate) fn is_data_file(name: &str) -> bool {
    name == "perf.data"
        || name
            .strip_prefix("perf.data.part")
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// N of a `worker_N` directory name.
pub(crate) fn worker_index(name: &str) -> Option<u32> {
    let n = name.strip_prefix("worker_")?;
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    n.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worker_names() {
        assert_eq!(worker_index("worker_0"), Some(0));
        assert_eq!(worker_index("worker_12"), Some(12));
        assert_eq!(worker_index("worker_"), None);
        assert_eq!(worker_index("worker_1a"), None);
        assert_eq!(worker_index("symfs"), None);
    }
}
