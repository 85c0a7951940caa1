//! Validation: whether a capture found on disk may be post-processed,
//! decided before any time is spent on it. A capture of `jobprof-record`
//! must have gone through the whole handshake with clean shards; the old
//! pipeline's captures are checked by its own rule ([`legacy`]); a refusal is one
//! line that says why ([`Refusal`]).

use std::fs;
use std::path::{Path, PathBuf};

use jobprof_capture_format::{self as format, Capture, Phase};
use serde::Serialize;

use crate::sys::input::{self, Links};

use super::layout::{
    is_data_file, is_plain_dir, is_plain_file, numbered_data_files, read_plain, CaptureDir,
    KALLSYMS, LEGACY_METADATA, SCRIPT_GZ, SCRIPT_ZST,
};
pub mod legacy;

/// Which writer made a capture.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Layout {
    /// `jobprof-record`: `capture.json` and its `perf-shards.tsv`.
    Record,
    /// The old shell pipeline: `capture-metadata.txt` (key=value).
    Legacy,
    /// A plain `perf record` output: one `perf.data` file, no metadata,
    /// no `symfs/`, no kernel symbol snapshot.
    Plain,
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
    /// The worker's effective uid (`capture.json`'s `worker_uid`), when
    /// recorded: this host's files at the DSO paths the capture names are
    /// read with its rights ([`crate::sys::creds::Creds::of_capture`]).
    pub worker_uid: Option<u32>,
    /// The worker's effective gid (`worker_gid`), when recorded.
    pub worker_gid: Option<u32>,
    /// Symbolized text already in the capture (`perf.script.zst`, else the
    /// old pipeline's `perf.script.gz`).
    pub script_text: Option<PathBuf>,
    /// The old pipeline's facts (`capture-metadata.txt`), for its captures.
    pub legacy: Option<crate::capture::legacy::Facts>,
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

pub(super) fn refuse(msg: impl Into<String>) -> Refusal {
    Refusal(msg.into())
}

/// Checks a capture before any time is spent on it: metadata readable and
/// valid, the handshake enabled sampling, phases `queued` and `published`
/// reached, every shard stopped with exit 0 or 130, and as many shards in
/// the manifest as the metadata says. Returns the capture's facts, or the
/// one-line reason it is refused.
pub fn validate(found: &CaptureDir) -> std::result::Result<ValidCapture, Refusal> {
    if let Some(p) = &found.plain {
        return plain(found, &p.file);
    }
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
    let mut unreadable_files = Vec::new();
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
        if let Some(why) = s
            .bytes
            .and_then(|_| unreadable(&s.data_file, Links::Refuse))
        {
            // Data jobprof may not read is no data: the text, if any, is
            // folded instead, else the capture is refused naming the file.
            s.bytes = None;
            v.warnings.push(format!(
                "shard {}: cannot read {}: {why}",
                s.index,
                s.data_file.display()
            ));
            unreadable_files.push(format!("{}: {why}", s.data_file.display()));
        }
        match (s.bytes, s.manifest_bytes) {
            (Some(now), Some(then)) if now != then => v.warnings.push(format!(
                "shard {}: {} has {now} bytes, the manifest says {then} (truncated or replaced copy?)",
                s.index,
                s.data_file.display()
            )),
            _ => {}
        }
    }
    if !unreadable_files.is_empty() && v.script_text.is_none() {
        return Err(refuse(format!(
            "cannot read {} (and no {SCRIPT_ZST} or {SCRIPT_GZ} to fold instead)",
            unreadable_files.join(", ")
        )));
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

/// Why `file` cannot be opened for reading (permissions; a file swapped
/// for a link or a FIFO since it was looked at), or None. Opened as every
/// input is ([`input::open_regular`]: never blocking, `links` as given).
fn unreadable(file: &Path, links: Links) -> Option<String> {
    match input::open_regular(file, links) {
        Ok(_) => None,
        Err(crate::error::Error::Io { source, .. }) => Some(source.to_string()),
        Err(e) => Some(e.to_string()),
    }
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
        worker_uid: None,
        worker_gid: None,
        script_text: None,
        warnings: vec![warning.to_string()],
        validated: false,
        legacy: None,
    })
}

/// A plain `perf record` output: one shard, the file itself (read through
/// a link: the user named it), nothing else. Nothing vouches that the
/// recording ended cleanly; a damaged file fails its shard.
fn plain(found: &CaptureDir, file: &Path) -> std::result::Result<ValidCapture, Refusal> {
    let bytes = match fs::metadata(file) {
        Ok(m) if m.is_file() => m.len(),
        Ok(_) => return Err(refuse(format!("{} is not a regular file", file.display()))),
        Err(e) => return Err(refuse(format!("cannot read {}: {e}", file.display()))),
    };
    if let Some(e) = unreadable(file, Links::Follow) {
        return Err(refuse(format!("cannot read {}: {e}", file.display())));
    }
    Ok(ValidCapture {
        found: found.clone(),
        layout: Layout::Plain,
        job_id: None,
        event: None,
        recorded_with: None,
        shards: vec![Shard {
            index: 0,
            data_file: file.to_path_buf(),
            manifest_bytes: None,
            bytes: Some(bytes),
        }],
        symfs: None,
        kallsyms: None,
        host: None,
        boot_id: None,
        worker_uid: None,
        worker_gid: None,
        script_text: None,
        warnings: Vec::new(),
        validated: false,
        legacy: None,
    })
}

pub(super) fn file_name(p: &Path) -> String {
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
        worker_uid: cap.worker_uid,
        worker_gid: cap.worker_gid,
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

/// `perf.data` and `perf.data.partNNN` files in `dir`, sorted by name.
pub(super) fn data_files_in(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
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
