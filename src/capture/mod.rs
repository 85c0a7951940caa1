//! Result directories: finding the captures in them, deciding whether each
//! one may be post-processed, and the completion marker.
//!
//! A result directory holds one capture per worker and query at
//! `RESULT_DIR/profiles/perf/worker_N/Q/`, written either by
//! `jobprof-record` (`capture.json`, `perf-shards.tsv`) or by the old shell
//! pipeline (`capture-metadata.txt`, key=value lines; see [`legacy`]). This
//! module discovers those directories ([`discover`]), validates each capture
//! before any time is spent on it ([`validate`]; a refusal is one line that
//! says why), and owns `.postprocess-complete`, the marker written last that
//! says a capture's outputs are complete and which output version made them
//! ([`Marker`]). It neither runs perf nor writes any other output.

pub mod legacy;
pub mod stamp;

use std::fs;
use std::path::{Path, PathBuf};

use jobprof_capture_format::{self as format, Capture, Phase};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Name of the completion marker, written last into a processed capture.
pub const MARKER: &str = ".postprocess-complete";

/// Version of the set of outputs `jobprof process` writes. Raise it when an
/// output changes meaning or a new output is added, so that captures
/// completed by an older jobprof are processed again (without `--force`).
pub const OUTPUT_VERSION: u32 = 1;

/// Symbolized text written by `jobprof process` (zstd, concatenated frames).
pub const SCRIPT_ZST: &str = "perf.script.zst";
/// Symbolized text written by the old shell pipeline (gzip).
pub const SCRIPT_GZ: &str = "perf.script.gz";
/// The old pipeline's capture metadata (key=value lines).
pub const LEGACY_METADATA: &str = "capture-metadata.txt";

/// Which narrowing the user asked for (`--worker`, `--query`); empty lists
/// mean "all".
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// Worker indices to keep.
    pub workers: Vec<u32>,
    /// Query ids to keep.
    pub queries: Vec<String>,
}

impl Filter {
    fn keeps(&self, worker: Option<u32>, query: &str) -> bool {
        (self.workers.is_empty() || worker.is_some_and(|w| self.workers.contains(&w)))
            && (self.queries.is_empty() || self.queries.iter().any(|q| q == query))
    }
}

/// One capture directory found by [`discover`] (not yet validated).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaptureDir {
    /// `.../worker_N/Q`.
    pub dir: PathBuf,
    /// N, when the parent is named `worker_N`.
    pub worker: Option<u32>,
    /// Q: the directory's name.
    pub query: String,
}

impl CaptureDir {
    /// `worker_N/Q` (or just `Q`), for messages.
    pub fn label(&self) -> String {
        match self.worker {
            Some(w) => format!("worker_{w}/{}", self.query),
            None => self.query.clone(),
        }
    }

    /// Where jobprof writes this capture's outputs: [`output_dir`].
    pub fn out_dir(&self) -> PathBuf {
        output_dir(&self.dir)
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
fn is_plain_dir(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok_and(|m| m.is_dir())
}

/// A shard's `data_file` as the manifest gives it: it must be a plain file
/// name in the capture directory (no `/`, no `..`), or the capture is
/// refused: a manifest must not make jobprof read files elsewhere.
fn plain_data_file(dir: &Path, shard: u32, name: &str) -> std::result::Result<PathBuf, Refusal> {
    let plain = !name.is_empty()
        && name != "."
        && name != ".."
        && !name.contains('/')
        && !name.contains('\0');
    if plain {
        Ok(dir.join(name))
    } else {
        Err(refuse(format!(
            "shard {shard}: data_file `{name}` is not a plain file name in the capture directory \
             (absolute paths and `..` are refused)"
        )))
    }
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
            let name = e.file_name().to_string_lossy().into_owned();
            let n = name.strip_prefix("perf.data.")?;
            if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            let regular = e.file_type().ok()?.is_file();
            Some((n.parse().ok()?, e.path())).filter(|_| regular)
        })
        .collect();
    out.sort();
    out
}

/// `root/perf` when `root` is a result directory of the original pipeline
/// (`result_dir_<jobid>/perf/perf.data.<n>`).
pub fn flat_layout_dir(root: &Path) -> Option<PathBuf> {
    let perf = root.join("perf");
    (is_plain_dir(&perf) && !numbered_data_files(&perf).is_empty()).then_some(perf)
}

/// Files that make a directory a capture.
fn looks_like_capture(dir: &Path) -> bool {
    [
        format::CAPTURE_JSON,
        LEGACY_METADATA,
        format::SHARDS_TSV,
        SCRIPT_ZST,
        SCRIPT_GZ,
    ]
    .iter()
    .any(|n| dir.join(n).is_file())
        || data_files_in(dir).map(|v| !v.is_empty()).unwrap_or(false)
        || !numbered_data_files(dir).is_empty()
}

/// `perf.data` and `perf.data.partNNN` files in `dir`, sorted by name.
fn data_files_in(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for e in fs::read_dir(dir)? {
        let e = e?;
        let name = e.file_name();
        let name = name.to_string_lossy();
        if is_data_file(&name) && e.path().is_file() {
            out.push(e.path());
        }
    }
    out.sort();
    Ok(out)
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

/// Sorted subdirectories of `dir` that are not hidden (`.Q.publishing` is
/// a capture still being published).
pub(crate) fn subdirs(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for e in fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        let e = e.map_err(|e| Error::io(dir, e))?;
        let name = e.file_name();
        if name.to_string_lossy().starts_with('.') {
            continue;
        }
        // Not through a symbolic link: a planted `worker_0/q9 -> /etc`
        // must not make jobprof write there.
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            out.push(e.path());
        }
    }
    out.sort();
    Ok(out)
}

fn captures_of_worker(worker_dir: &Path, worker: Option<u32>) -> Result<Vec<CaptureDir>> {
    let mut out = Vec::new();
    for d in subdirs(worker_dir)? {
        let name = d
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        if name == "symfs" || !looks_like_capture(&d) {
            continue;
        }
        out.push(CaptureDir {
            dir: d,
            worker,
            query: name,
        });
    }
    Ok(out)
}

/// Finds the captures under each root. A root may be a result directory
/// (`RESULT_DIR/profiles/perf/worker_N/Q/`), the `profiles/perf` directory
/// itself, one `worker_N` directory, or one capture directory. Captures are
/// returned sorted by worker and query, narrowed by `filter`.
///
/// Errors (exit code 2) when a root does not exist or holds no capture at
/// all (before narrowing): that is a wrong path, not an empty result.
pub fn discover(roots: &[PathBuf], filter: &Filter) -> Result<Vec<CaptureDir>> {
    let mut all = Vec::new();
    for root in roots {
        if !root.is_dir() {
            let what = if root.exists() {
                "is not a directory"
            } else {
                "does not exist"
            };
            return Err(Error::Usage(format!(
                "{}: {what}; pass a result directory (the one holding profiles/perf/worker_N/)",
                root.display()
            )));
        }
        let name = root
            .canonicalize()
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_default();
        let perf_root = root.join("profiles").join("perf");
        let found = if perf_root.is_dir() {
            perf_root_captures(&perf_root)?
        } else if let Some(w) = worker_index(&name) {
            captures_of_worker(root, Some(w))?
        } else if let Some(flat) = flat_layout_dir(root) {
            vec![CaptureDir {
                dir: flat,
                worker: None,
                query: name,
            }]
        } else if looks_like_capture(root) {
            let canon = root.canonicalize().map_err(|e| Error::io(root, e))?;
            let worker = canon
                .parent()
                .and_then(|p| p.file_name())
                .and_then(|n| worker_index(&n.to_string_lossy()));
            vec![CaptureDir {
                dir: root.clone(),
                worker,
                query: name,
            }]
        } else {
            perf_root_captures(root)?
        };
        if found.is_empty() {
            return Err(Error::Usage(format!(
                "{}: no captures found; expected RESULT_DIR/profiles/perf/worker_N/QUERY/ \
                 directories holding capture.json or capture-metadata.txt and perf.data files",
                root.display()
            )));
        }
        all.extend(found);
    }
    all.retain(|c| filter.keeps(c.worker, &c.query));
    all.dedup_by(|a, b| a.dir == b.dir);
    Ok(all)
}

fn perf_root_captures(perf_root: &Path) -> Result<Vec<CaptureDir>> {
    let mut workers: Vec<(u32, PathBuf)> = subdirs(perf_root)?
        .into_iter()
        .filter_map(|d| {
            let n = worker_index(&d.file_name()?.to_string_lossy())?;
            Some((n, d))
        })
        .collect();
    workers.sort();
    let mut out = Vec::new();
    for (n, d) in workers {
        out.extend(captures_of_worker(&d, Some(n))?);
    }
    Ok(out)
}

/// Which writer made a capture.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Layout {
    /// `jobprof-record`: `capture.json` and its `perf-shards.tsv`.
    Record,
    /// The old shell pipeline: `capture-metadata.txt` (key=value).
    Legacy,
}

/// One shard (perf process) of a validated capture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shard {
    /// Shard number (0-based).
    pub index: u32,
    /// The data file (absolute or relative to the working directory).
    pub data_file: PathBuf,
    /// Size the manifest recorded, when it did.
    pub manifest_bytes: Option<u64>,
    /// Size on disk now (`None` when the file is missing).
    pub bytes: Option<u64>,
}

/// The kernel symbol table `jobprof-record` snapshots next to `symfs/`.
pub const KALLSYMS: &str = "kallsyms";

/// A capture that passed validation: everything the pipeline needs to know.
#[derive(Debug, Clone)]
pub struct ValidCapture {
    /// Where it was found.
    pub found: CaptureDir,
    /// Who wrote it.
    pub layout: Layout,
    /// The Slurm job id, when recorded.
    pub job_id: Option<String>,
    /// The sampled event (`cpu-clock`), when recorded.
    pub event: Option<String>,
    /// The perf that recorded, when recorded.
    pub recorded_with: Option<String>,
    /// The shards, in order.
    pub shards: Vec<Shard>,
    /// `symfs/` of the capture, or of its worker directory.
    pub symfs: Option<PathBuf>,
    /// The kernel symbol table snapshot (`kallsyms` next to that `symfs/`).
    pub kallsyms: Option<PathBuf>,
    /// The node the capture was made on, when recorded.
    pub host: Option<String>,
    /// The node's boot id at capture time, when recorded.
    pub boot_id: Option<String>,
    /// Symbolized text already in the capture (`perf.script.zst`, else the
    /// old pipeline's `perf.script.gz`).
    pub script_text: Option<PathBuf>,
    /// The old pipeline's facts (`capture-metadata.txt`), for its captures.
    pub legacy: Option<legacy::Facts>,
    /// Things worth saying that do not stop processing (size mismatches).
    pub warnings: Vec<String>,
    /// False when the directory has no capture metadata (derived files
    /// only, or the original pipeline's flat layout): processed, but
    /// nothing vouches that the capture was complete.
    pub validated: bool,
}

impl ValidCapture {
    /// True when every shard's data file is present.
    pub fn has_all_data(&self) -> bool {
        !self.shards.is_empty() && self.shards.iter().all(|s| s.bytes.is_some())
    }
}

/// Why a capture is not processed: one line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal(pub String);

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

fn refuse(msg: impl Into<String>) -> Refusal {
    Refusal(msg.into())
}

/// Checks a capture before any time is spent on it: metadata readable and
/// valid, the handshake enabled sampling, phases `queued` and `published`
/// reached, every shard stopped with exit 0 or 130, and as many shards in
/// the manifest as the metadata says. Returns the capture's facts, or the
/// one-line reason it is refused.
pub fn validate(found: &CaptureDir) -> std::result::Result<ValidCapture, Refusal> {
    let dir = &found.dir;
    let json = dir.join(format::CAPTURE_JSON);
    let legacy_meta = dir.join(LEGACY_METADATA);
    let exists = |p: &Path| fs::symlink_metadata(p).is_ok();
    let mut v = if exists(&json) {
        validate_record(found, &json)?
    } else if exists(&legacy_meta) {
        legacy::validate(found, &legacy_meta)?
    } else {
        unvalidated(found)?
    };
    v.symfs = std::iter::once(dir.join("symfs"))
        .chain(found.worker_dir().map(|w| w.join("symfs")))
        .find(|p| is_plain_dir(p));
    v.kallsyms = v
        .symfs
        .as_ref()
        .and_then(|s| s.parent())
        .map(|d| d.join(KALLSYMS))
        .filter(|p| is_plain_file(p));
    v.script_text = [
        found.out_dir().join(SCRIPT_ZST),
        dir.join(SCRIPT_ZST),
        dir.join(SCRIPT_GZ),
    ]
    .into_iter()
    .find(|p| is_plain_file(p));
    for s in &mut v.shards {
        s.bytes = match fs::symlink_metadata(&s.data_file) {
            Ok(m) if m.is_file() => Some(m.len()),
            Ok(m) => {
                let what = if m.file_type().is_symlink() {
                    "a symbolic link"
                } else {
                    "not a regular file"
                };
                return Err(refuse(format!(
                    "shard {}: {} is {what}; refusing to read it (planted by someone?)",
                    s.index,
                    s.data_file.display()
                )));
            }
            Err(_) => None,
        };
        match (s.bytes, s.manifest_bytes) {
            (Some(now), Some(then)) if now != then => v.warnings.push(format!(
                "shard {}: {} has {now} bytes, the manifest says {then} (truncated or replaced copy?)",
                s.index,
                s.data_file.display()
            )),
            _ => {}
        }
    }
    if !v.has_all_data() && v.script_text.is_none() {
        let missing: Vec<String> = v
            .shards
            .iter()
            .filter(|s| s.bytes.is_none())
            .map(|s| file_name(&s.data_file))
            .collect();
        return Err(refuse(format!(
            "data file(s) missing: {} (and no {SCRIPT_ZST} or {SCRIPT_GZ} to fold instead)",
            missing.join(", ")
        )));
    }
    Ok(v)
}

/// A directory without capture metadata: the original pipeline's flat
/// layout (`result_dir_<jobid>/perf/perf.data.<n>`, shards = the numbered
/// files) or a capture holding only derived text (`perf.script.gz`).
/// Processed with a warning; refused when it holds neither.
fn unvalidated(found: &CaptureDir) -> std::result::Result<ValidCapture, Refusal> {
    let dir = &found.dir;
    let flat = numbered_data_files(dir);
    let has_text = [SCRIPT_ZST, SCRIPT_GZ]
        .iter()
        .any(|n| is_plain_file(&dir.join(n)));
    let (warning, job_id) = if !flat.is_empty() {
        let job = dir
            .canonicalize()
            .ok()
            .and_then(|d| {
                d.parent()
                    .and_then(|p| p.file_name())
                    .map(|n| n.to_string_lossy().into_owned())
            })
            .and_then(|n| n.strip_prefix("result_dir_").map(str::to_string));
        (
            "not validated: no capture metadata (the original pipeline's \
             result_dir_<jobid>/perf/perf.data.<n> layout)",
            job,
        )
    } else if has_text {
        (
            "not validated: no capture metadata (only derived files)",
            None,
        )
    } else {
        return Err(refuse(format!(
            "no {} or {} in {}: not a published capture (still being written, or not a capture)",
            format::CAPTURE_JSON,
            LEGACY_METADATA,
            dir.display()
        )));
    };
    Ok(ValidCapture {
        found: found.clone(),
        layout: Layout::Legacy,
        job_id,
        event: None,
        recorded_with: None,
        shards: flat
            .into_iter()
            .map(|(n, p)| Shard {
                index: n,
                data_file: p,
                manifest_bytes: None,
                bytes: None,
            })
            .collect(),
        symfs: None,
        kallsyms: None,
        host: None,
        boot_id: None,
        script_text: None,
        warnings: vec![warning.to_string()],
        validated: false,
        legacy: None,
    })
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| p.display().to_string())
}

fn validate_record(found: &CaptureDir, json: &Path) -> std::result::Result<ValidCapture, Refusal> {
    let cap = read_capture_json(json)?;
    check_record_phases(&cap)?;
    let shards = record_shards(found, &cap)?;
    Ok(ValidCapture {
        found: found.clone(),
        layout: Layout::Record,
        job_id: cap.slurm_job_id.clone(),
        event: Some(cap.event.clone()),
        recorded_with: Some(cap.perf_version.clone()),
        shards,
        symfs: None,
        kallsyms: None,
        host: Some(cap.host.clone()),
        boot_id: cap.boot_id.clone(),
        script_text: None,
        warnings: size_limit_warnings(&cap),
        validated: true,
        legacy: None,
    })
}

/// `capture.json`, parsed; a refusal names a newer format version when
/// that is why it does not parse.
fn read_capture_json(json: &Path) -> std::result::Result<Capture, Refusal> {
    let text =
        read_plain(json).map_err(|e| refuse(format!("cannot read {}: {e}", json.display())))?;
    serde_json::from_str(&text).map_err(|e| {
        // An unknown future format fails here too; say so when the version
        // field is readable.
        let version = serde_json::from_str::<serde_json::Value>(&text)
            .ok()
            .and_then(|v| v.get("format_version").and_then(|v| v.as_u64()));
        match version {
            Some(n) if n > u64::from(format::FORMAT_VERSION) => refuse(format!(
                "{}: format version {n} is newer than this jobprof understands ({}); upgrade jobprof",
                json.display(),
                format::FORMAT_VERSION
            )),
            _ => refuse(format!("{} is not valid capture metadata: {e}", json.display())),
        }
    })
}

/// A capture marked valid that went through the whole handshake: enabled,
/// stopped, queued and published.
fn check_record_phases(cap: &Capture) -> std::result::Result<(), Refusal> {
    if !cap.valid {
        return Err(refuse(format!(
            "capture.json marks the capture invalid: {}",
            cap.reason.as_deref().unwrap_or("no reason given")
        )));
    }
    if !cap.reached(Phase::Enabled) {
        return Err(refuse(
            "handshake never enabled sampling (phase `enabled` missing in capture.json)",
        ));
    }
    let missing: Vec<&str> = [Phase::Stopped, Phase::Queued, Phase::Published]
        .into_iter()
        .filter(|p| !cap.reached(*p))
        .map(Phase::as_str)
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    // A capture still in (or left in) the sidecar's staging directory.
    let what = if !cap.reached(Phase::Stopped) {
        "a capture that was never stopped: it is still recording, or its sidecar died \
         during it (staged, unpublished data)"
    } else {
        "a stopped capture that was never published (still in the sidecar's staging \
         directory)"
    };
    Err(refuse(format!(
        "capture.json misses phase(s) {}: {what}; query {} of worker {} on {}",
        missing.join(", "),
        cap.query,
        cap.worker,
        cap.host
    )))
}

/// The shards of the manifest (`perf-shards.tsv`): as many as
/// capture.json says, each ended cleanly, each data file plain.
fn record_shards(found: &CaptureDir, cap: &Capture) -> std::result::Result<Vec<Shard>, Refusal> {
    let tsv = found.dir.join(format::SHARDS_TSV);
    let manifest = read_plain(&tsv).map_err(|e| {
        refuse(format!(
            "cannot read the shard manifest {}: {e}",
            tsv.display()
        ))
    })?;
    let rows = format::parse_shards_tsv(&manifest)
        .map_err(|e| refuse(format!("{}: {e}", tsv.display())))?;
    if rows.len() != cap.shard_count as usize {
        return Err(refuse(format!(
            "{} lists {} shard(s), capture.json says {}",
            format::SHARDS_TSV,
            rows.len(),
            cap.shard_count
        )));
    }
    if let Some(bad) = rows.iter().find(|r| !r.clean_exit()) {
        return Err(refuse(format!(
            "shard {} (phase {}) ended with exit status {}, not 0 or 130: its data is incomplete",
            bad.shard,
            bad.phase,
            bad.exit_status
                .map(|s| s.to_string())
                .unwrap_or_else(|| "none (perf never ran)".into())
        )));
    }
    rows.iter()
        .map(|r| {
            Ok(Shard {
                index: r.shard,
                data_file: plain_data_file(&found.dir, r.shard, &r.data_file)?,
                manifest_bytes: Some(r.data_bytes),
                bytes: None,
            })
        })
        .collect()
}

/// One warning per shard that reached `--max-shard-size`, with how far
/// into the capture it stopped.
fn size_limit_warnings(cap: &Capture) -> Vec<String> {
    cap.size_limited
        .iter()
        .map(|c| {
            let secs = cap
                .enabled_unix_ns
                .map(|on| c.unix_ns.saturating_sub(on) as f64 / 1e9)
                .unwrap_or(0.0);
            format!(
                "shard {} reached --max-shard-size ({} bytes) {secs:.1} s into the capture: \
                 its threads are sampled over a shorter window than the others",
                c.shard,
                cap.max_shard_size.unwrap_or(0)
            )
        })
        .collect()
}

/// The content of `.postprocess-complete`: who completed the capture, when,
/// and which outputs it wrote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Marker {
    /// `jobprof`.
    pub tool: String,
    /// The jobprof version that wrote the outputs.
    pub tool_version: String,
    /// [`OUTPUT_VERSION`] of that jobprof.
    pub output_version: u32,
    /// When processing completed (RFC 3339, UTC).
    pub completed: String,
    /// The output files written (names in the capture directory).
    pub outputs: Vec<String>,
    /// Each output's size when the marker was written. Outputs are not
    /// fsynced one by one (that made bulk reprocessing wait on the disk);
    /// after a crash an output can come back empty or short, and this is
    /// how the next run notices and redoes the capture.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub sizes: std::collections::BTreeMap<String, u64>,
    /// What the outputs are worth, so that a later run never replaces them
    /// with worse ones (`None` in markers of older versions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quality: Option<Quality>,
    /// Each input's size, mtime, inode and SHA-256 (by the name
    /// `summary.json` lists it under): a rerun does not hash an unchanged
    /// input again ([`crate::capture::stamp`]).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub inputs: std::collections::BTreeMap<String, crate::capture::stamp::InputStamp>,
}

impl Marker {
    /// The marker this jobprof writes now over `outputs` (their sizes are
    /// filled in by [`write_marker`]).
    pub fn new(outputs: Vec<String>, quality: Option<Quality>) -> Marker {
        Marker {
            tool: "jobprof".into(),
            tool_version: env!("CARGO_PKG_VERSION").into(),
            output_version: OUTPUT_VERSION,
            completed: crate::sys::units::utc_timestamp(),
            outputs,
            sizes: Default::default(),
            quality,
            inputs: Default::default(),
        }
    }
}

/// The figures a later run compares its own result with before replacing
/// a complete capture's outputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Quality {
    /// Samples folded.
    pub samples: u64,
    /// Share of the period total in stacks with any named frame, in parts
    /// per million.
    pub symbolized_ppm: u64,
    /// Text bytes in `perf.script.zst`, when this run wrote it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archive_text_bytes: Option<u64>,
}

/// Whether a capture needs processing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Completion {
    /// No marker: never completed (or an earlier run was interrupted).
    NotDone,
    /// Complete with every wanted output; skip unless forced.
    Done(Marker),
    /// A marker exists but the outputs must be redone; says why.
    Stale(String),
}

/// Reads the marker of `dir` and decides whether outputs `wanted` are all
/// there and current.
pub fn completion(dir: &Path, wanted: &[String]) -> Completion {
    let path = dir.join(MARKER);
    let Ok(text) = read_plain(&path) else {
        return Completion::NotDone;
    };
    let marker: Marker = match serde_json::from_str(&text) {
        Ok(m) => m,
        Err(_) => {
            return Completion::Stale(
                "completed by the old post-processing pipeline (output version 0)".into(),
            )
        }
    };
    if marker.output_version < OUTPUT_VERSION {
        return Completion::Stale(format!(
            "completed by jobprof {} (output version {}, now {OUTPUT_VERSION})",
            marker.tool_version, marker.output_version
        ));
    }
    if let Some(missing) = wanted
        .iter()
        .find(|w| !marker.outputs.contains(w) || !dir.join(w.as_str()).is_file())
    {
        return Completion::Stale(format!("{missing} is missing"));
    }
    if let Some(why) = size_mismatch(dir, &marker) {
        return Completion::Stale(why);
    }
    Completion::Done(marker)
}

/// The first output whose size differs from what the marker recorded.
fn size_mismatch(dir: &Path, marker: &Marker) -> Option<String> {
    marker.sizes.iter().find_map(|(name, &size)| {
        let now = fs::symlink_metadata(dir.join(name))
            .ok()
            .filter(|m| m.is_file())
            .map(|m| m.len());
        (now != Some(size)).then(|| {
            format!(
                "{name} has {} bytes, the marker recorded {size} (written incompletely, a crash?)",
                now.map_or("no".to_string(), |n| n.to_string())
            )
        })
    })
}

/// What the complete outputs on disk are worth: the marker's [`Quality`],
/// when a marker is there and every output it lists still has its
/// recorded size. `None` when nothing complete is there to protect.
pub fn previous_quality(dir: &Path) -> Option<Quality> {
    let text = read_plain(&dir.join(MARKER)).ok()?;
    let marker: Marker = serde_json::from_str(&text).ok()?;
    if size_mismatch(dir, &marker).is_some() {
        return None;
    }
    marker.quality
}

/// The input stamps the marker recorded (empty without a readable marker).
pub fn previous_inputs(
    dir: &Path,
) -> std::collections::BTreeMap<String, crate::capture::stamp::InputStamp> {
    read_plain(&dir.join(MARKER))
        .ok()
        .and_then(|t| serde_json::from_str::<Marker>(&t).ok())
        .map(|m| m.inputs)
        .unwrap_or_default()
}

/// Removes the marker before outputs are rewritten, so an interrupted run
/// never leaves a marker over a mix of old and new outputs.
pub fn clear_marker(dir: &Path) -> Result<()> {
    match fs::remove_file(dir.join(MARKER)) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io(dir.join(MARKER), e)),
    }
}

/// Writes the marker (atomically): the last file of a processed capture.
/// It records each output's size, so that [`completion`] can tell an output
/// that a crash left empty or short (outputs and marker are renamed into
/// place without fsync) and have the capture redone.
pub fn write_marker(dir: &Path, marker: &Marker, mode_limit: Option<u32>) -> Result<()> {
    let mut marker = marker.clone();
    for name in &marker.outputs {
        // A missing output gets no size; `completion` reports it missing.
        if let Ok(m) = fs::symlink_metadata(dir.join(name)) {
            marker.sizes.insert(name.clone(), m.len());
        }
    }
    let mut json = serde_json::to_string_pretty(&marker).expect("a marker always serializes");
    json.push('\n');
    let path = dir.join(MARKER);
    let mut f = crate::sys::atomic::AtomicFile::open(
        &path,
        crate::sys::atomic::Destination::Confined,
        false,
    )?;
    if let Some(m) = mode_limit {
        f.limit_mode(m);
    }
    std::io::Write::write_all(&mut f, json.as_bytes()).map_err(|e| Error::io(&path, e))?;
    f.commit()
}

/// Removes temporary files left by a killed run (`.NAME.XXXXXX.tmp`, as
/// [`crate::sys::atomic::AtomicFile`] names them) for the given output names.
/// Returns how many were removed.
pub fn remove_stale_temporaries(dir: &Path, names: &[&str]) -> usize {
    // A temporary whose writer still runs (another run on the same
    // capture) is not a leftover: see crate::sys::atomic::leftover_is_stale.
    match crate::sys::confined::Dir::open(dir) {
        Ok(d) => crate::sys::atomic::remove_leftovers_in(&d, names),
        Err(_) => 0,
    }
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

    #[test]
    fn filter_narrows_by_worker_and_query() {
        let f = Filter {
            workers: vec![1],
            queries: vec!["q2".into()],
        };
        assert!(f.keeps(Some(1), "q2"));
        assert!(!f.keeps(Some(0), "q2"));
        assert!(!f.keeps(Some(1), "q1"));
        assert!(!f.keeps(None, "q2"));
        assert!(Filter::default().keeps(None, "x"));
    }

    #[test]
    fn marker_decides_skip_and_redo() {
        let dir = tempfile::tempdir().unwrap();
        let wanted = vec!["stacks.folded".to_string()];
        assert_eq!(completion(dir.path(), &wanted), Completion::NotDone);
        fs::write(dir.path().join(MARKER), "").unwrap();
        assert!(matches!(
            completion(dir.path(), &wanted),
            Completion::Stale(s) if s.contains("old post-processing")
        ));
        let m = Marker {
            tool: "jobprof".into(),
            tool_version: "0.1.0".into(),
            output_version: OUTPUT_VERSION,
            completed: "2026-11-30T00:00:00Z".into(),
            outputs: wanted.clone(),
            sizes: Default::default(),
            quality: None,
            inputs: Default::default(),
        };
        write_marker(dir.path(), &m, None).unwrap();
        assert!(
            matches!(completion(dir.path(), &wanted), Completion::Stale(s) if s.contains("missing"))
        );
        fs::write(dir.path().join("stacks.folded"), "a 1\n").unwrap();
        assert_eq!(completion(dir.path(), &wanted), Completion::Done(m.clone()));
        let older = Marker {
            output_version: 0,
            ..m
        };
        write_marker(dir.path(), &older, None).unwrap();
        assert!(
            matches!(completion(dir.path(), &wanted), Completion::Stale(s) if s.contains("output version 0"))
        );
        clear_marker(dir.path()).unwrap();
        assert_eq!(completion(dir.path(), &wanted), Completion::NotDone);
    }

    #[test]
    fn marker_sizes_reveal_an_output_a_crash_cut_short() {
        let dir = tempfile::tempdir().unwrap();
        let wanted = vec!["stacks.folded".to_string()];
        fs::write(dir.path().join("stacks.folded"), "a;b 1\n").unwrap();
        let m = Marker {
            tool: "jobprof".into(),
            tool_version: "0.1.0".into(),
            output_version: OUTPUT_VERSION,
            completed: "2026-11-30T00:00:00Z".into(),
            outputs: wanted.clone(),
            sizes: Default::default(),
            quality: None,
            inputs: Default::default(),
        };
        write_marker(dir.path(), &m, None).unwrap();
        let Completion::Done(read) = completion(dir.path(), &wanted) else {
            panic!("complete capture not recognised");
        };
        assert_eq!(read.sizes.get("stacks.folded"), Some(&6));
        // After a power cut, an output that was never flushed comes back empty.
        fs::write(dir.path().join("stacks.folded"), "").unwrap();
        assert!(matches!(
            completion(dir.path(), &wanted),
            Completion::Stale(s) if s.contains("incompletely")
        ));
    }

    #[test]
    fn stale_temporaries_are_removed_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        for n in [".stacks.folded.abc123.tmp", "stacks.folded", ".other.x.tmp"] {
            fs::write(dir.path().join(n), "x").unwrap();
        }
        assert_eq!(remove_stale_temporaries(dir.path(), &["stacks.folded"]), 1);
        assert!(dir.path().join("stacks.folded").exists());
        assert!(dir.path().join(".other.x.tmp").exists());
    }
}
