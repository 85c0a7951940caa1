//! Captures written by the old shell pipeline, a first-class input.
//!
//! Its `capture-metadata.txt` holds `key=value` lines (`#` starts a comment;
//! keys are matched case-insensitively, `-` and `_` alike). The keys read:
//!
//! | key | meaning |
//! |---|---|
//! | `valid` (or `capture_valid`) | `1`/`true`/`yes` or `0`/`false`/`no`; required |
//! | `reason` (or `invalid_reason`) | why it is invalid |
//! | `handshake` (or `handshake_state`) | must be `enabled` (or `handshake_enabled=1`); required |
//! | `phases` | the phases reached, comma or space separated; or one `phase_NAME=...` line per phase; must include `queued` and `published` |
//! | `shard_count` (or `shards`) | number of shards; required |
//! | `job_id` / `slurm_job_id`, `event`, `perf_version` | facts for the summary |
//!
//! Its `perf-shards.tsv` has the columns `shard, phase, perf_pid,
//! thread_count, first_tid, last_tid, open_fds, exit_status, data_file,
//! data_bytes`: read by header name when a header line is present,
//! otherwise by that position. Only `exit_status` (0 or 130 are clean),
//! `shard`, `data_file` and `data_bytes` matter here. This module only
//! reads; it never writes the old formats.

use std::collections::HashMap;
use std::path::Path;

use super::{refuse, CaptureDir, Layout, Refusal, Shard, ValidCapture};

type Checked<T> = std::result::Result<T, Refusal>;

fn norm(key: &str) -> String {
    key.trim().to_ascii_lowercase().replace('-', "_")
}

/// Parses `key=value` lines into a map with normalized keys.
pub fn parse_metadata(text: &str) -> HashMap<String, String> {
    let mut map = HashMap::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some((k, v)) = line.split_once('=') {
            let v = v.trim().trim_matches('"').to_string();
            map.insert(norm(k), v);
        }
    }
    map
}

fn get<'a>(m: &'a HashMap<String, String>, keys: &[&str]) -> Option<&'a str> {
    keys.iter().find_map(|k| m.get(*k).map(String::as_str))
}

fn truthy(v: &str) -> Option<bool> {
    match v.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "y" | "valid" | "ok" => Some(true),
        "0" | "false" | "no" | "n" | "invalid" => Some(false),
        _ => None,
    }
}

/// Validates an old-pipeline capture (see the module docs for the keys).
pub fn validate(found: &CaptureDir, meta_path: &Path) -> Checked<ValidCapture> {
    let text = super::read_plain(meta_path)
        .map_err(|e| refuse(format!("cannot read {}: {e}", meta_path.display())))?;
    let m = parse_metadata(&text);
    check_valid(&m)?;
    check_handshake(&m)?;
    check_phases(&m)?;
    let rows = checked_shards(found, &m)?;
    Ok(ValidCapture {
        found: found.clone(),
        layout: Layout::Legacy,
        job_id: get(&m, &["slurm_job_id", "job_id", "jobid"]).map(str::to_string),
        event: get(&m, &["event", "perf_event"]).map(str::to_string),
        recorded_with: get(&m, &["perf_version"]).map(str::to_string),
        shards: rows
            .into_iter()
            .map(|r| {
                Ok(Shard {
                    index: r.shard,
                    data_file: super::plain_data_file(&found.dir, r.shard, &r.data_file)?,
                    manifest_bytes: r.data_bytes,
                    bytes: None,
                })
            })
            .collect::<Checked<Vec<_>>>()?,
        symfs: None,
        kallsyms: None,
        host: get(&m, &["host", "hostname", "node"]).map(str::to_string),
        boot_id: None,
        script_text: None,
        warnings: Vec::new(),
        validated: true,
    })
}

/// `valid=` says the capture is valid.
fn check_valid(m: &HashMap<String, String>) -> Checked<()> {
    let name = super::LEGACY_METADATA;
    let valid = get(m, &["valid", "capture_valid"])
        .ok_or_else(|| refuse(format!("{name} has no `valid=` line")))?;
    match truthy(valid) {
        Some(true) => {}
        Some(false) => {
            return Err(refuse(format!(
                "{name} marks the capture invalid: {}",
                get(m, &["reason", "invalid_reason"]).unwrap_or("no reason given")
            )))
        }
        None => {
            return Err(refuse(format!(
                "{name}: `valid={valid}` is not 1/0 or true/false"
            )))
        }
    }
    Ok(())
}

/// The handshake enabled sampling.
fn check_handshake(m: &HashMap<String, String>) -> Checked<()> {
    let name = super::LEGACY_METADATA;
    let enabled = match (
        get(m, &["handshake", "handshake_state"]),
        get(m, &["handshake_enabled"]),
    ) {
        (Some(h), _) => h.eq_ignore_ascii_case("enabled"),
        (None, Some(e)) => truthy(e) == Some(true),
        (None, None) => return Err(refuse(format!("{name} has no `handshake=` line"))),
    };
    if !enabled {
        return Err(refuse(format!(
            "handshake never enabled sampling ({name}: handshake={})",
            get(m, &["handshake", "handshake_state", "handshake_enabled"]).unwrap_or("")
        )));
    }
    Ok(())
}

/// The capture went through the `queued` and `published` phases.
fn check_phases(m: &HashMap<String, String>) -> Checked<()> {
    let name = super::LEGACY_METADATA;
    let mut phases: Vec<String> = get(m, &["phases"])
        .map(|p| {
            p.split([',', ' ', ';'])
                .filter(|s| !s.is_empty())
                .map(|s| s.to_ascii_lowercase())
                .collect()
        })
        .unwrap_or_default();
    phases.extend(
        m.keys()
            .filter_map(|k| k.strip_prefix("phase_").map(str::to_string)),
    );
    let missing: Vec<&str> = ["queued", "published"]
        .into_iter()
        .filter(|p| !phases.iter().any(|q| q == p))
        .collect();
    if !missing.is_empty() {
        return Err(refuse(format!(
            "{name} misses phase(s) {}: the capture was not queued and published completely",
            missing.join(", ")
        )));
    }
    Ok(())
}

/// The shard manifest: as many shards as `shard_count=` says, each ended
/// by exit status 0 or 130.
fn checked_shards(found: &CaptureDir, m: &HashMap<String, String>) -> Checked<Vec<LegacyShard>> {
    let name = super::LEGACY_METADATA;
    let count: usize = get(m, &["shard_count", "shards"])
        .ok_or_else(|| refuse(format!("{name} has no `shard_count=` line")))?
        .parse()
        .map_err(|_| refuse(format!("{name}: shard_count is not a number")))?;
    let tsv = found.dir.join(jobprof_capture_format::SHARDS_TSV);
    let manifest = super::read_plain(&tsv).map_err(|e| {
        refuse(format!(
            "cannot read the shard manifest {}: {e}",
            tsv.display()
        ))
    })?;
    let rows = parse_shards(&manifest).map_err(|e| refuse(format!("{}: {e}", tsv.display())))?;
    if rows.len() != count {
        return Err(refuse(format!(
            "perf-shards.tsv lists {} shard(s), {name} says {count}",
            rows.len()
        )));
    }
    if let Some(bad) = rows
        .iter()
        .find(|r| !matches!(r.exit_status, Some(0) | Some(130)))
    {
        return Err(refuse(format!(
            "shard {} ended with exit status {}, not 0 or 130: its data is incomplete",
            bad.shard,
            bad.exit_status
                .map(|s| s.to_string())
                .unwrap_or_else(|| "none".into())
        )));
    }
    Ok(rows)
}

/// One row of an old `perf-shards.tsv`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LegacyShard {
    /// Shard number.
    pub shard: u32,
    /// perf's exit status (`None` when the column is empty or `-`).
    pub exit_status: Option<i32>,
    /// Data file name, relative to the capture directory.
    pub data_file: String,
    /// Recorded size, when present.
    pub data_bytes: Option<u64>,
}

/// The old pipeline's columns, for a manifest without a header line. Not
/// `jobprof_capture_format::SHARDS_HEADER`, on purpose: the old scripts
/// wrote `open_fds` too, and these files are history that does not follow
/// the recorder's format when it changes.
const POSITIONAL: [&str; 10] = [
    "shard",
    "phase",
    "perf_pid",
    "thread_count",
    "first_tid",
    "last_tid",
    "open_fds",
    "exit_status",
    "data_file",
    "data_bytes",
];

/// Parses an old-pipeline shard manifest (tab separated; header optional).
pub fn parse_shards(text: &str) -> std::result::Result<Vec<LegacyShard>, String> {
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty() && !l.starts_with('#'))
        .peekable();
    let has_header = lines
        .peek()
        .is_some_and(|(_, l)| !l.trim_start().starts_with(|c: char| c.is_ascii_digit()));
    let columns: Vec<String> = if has_header {
        let (_, h) = lines.next().expect("peeked");
        h.split('\t').map(|c| norm(c).replace(' ', "_")).collect()
    } else {
        POSITIONAL.iter().map(|s| s.to_string()).collect()
    };
    let col = |name: &str| columns.iter().position(|c| c == name);
    let (Some(c_shard), Some(c_status), Some(c_file)) =
        (col("shard"), col("exit_status"), col("data_file"))
    else {
        return Err("the header needs the columns shard, exit_status and data_file".into());
    };
    let c_bytes = col("data_bytes");
    let mut out = Vec::new();
    for (i, line) in lines {
        let f: Vec<&str> = line.split('\t').map(str::trim).collect();
        let field = |c: usize| {
            f.get(c)
                .copied()
                .ok_or_else(|| format!("line {}: only {} fields", i + 1, f.len()))
        };
        let shard = field(c_shard)?
            .parse()
            .map_err(|_| format!("line {}: shard `{}` is not a number", i + 1, f[c_shard]))?;
        let status = field(c_status)?;
        let exit_status =
            if status.is_empty() || status == "-" {
                None
            } else {
                Some(status.parse().map_err(|_| {
                    format!("line {}: exit_status `{status}` is not a number", i + 1)
                })?)
            };
        let data_file = field(c_file)?.to_string();
        if data_file.is_empty() || data_file.contains("..") || data_file.starts_with('/') {
            return Err(format!(
                "line {}: data_file `{data_file}` must be a file name in the capture directory",
                i + 1
            ));
        }
        let data_bytes = c_bytes.and_then(|c| f.get(c)).and_then(|s| s.parse().ok());
        out.push(LegacyShard {
            shard,
            exit_status,
            data_file,
            data_bytes,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_keys_are_normalized() {
        let m = parse_metadata("# c\nValid=1\nhandshake-state = enabled\nphases=a, b\n\nx");
        assert_eq!(m.get("valid").unwrap(), "1");
        assert_eq!(m.get("handshake_state").unwrap(), "enabled");
        assert_eq!(m.get("phases").unwrap(), "a, b");
    }

    #[test]
    fn shards_with_and_without_header() {
        let with = "shard\tphase\tperf_pid\tthread_count\tfirst_tid\tlast_tid\topen fds\texit_status\tdata_file\tdata_bytes\n\
                    0\tstopped\t10\t128\t1\t128\t300\t130\tperf.data.part000\t4096\n";
        let rows = parse_shards(with).unwrap();
        assert_eq!(
            rows,
            vec![LegacyShard {
                shard: 0,
                exit_status: Some(130),
                data_file: "perf.data.part000".into(),
                data_bytes: Some(4096)
            }]
        );
        let without = "1\tstopped\t10\t3\t1\t3\t9\t0\tperf.data\t7\n";
        assert_eq!(parse_shards(without).unwrap()[0].shard, 1);
        assert!(parse_shards("0\tx\t1\t1\t1\t1\t1\t0\t../etc\t1\n").is_err());
    }
}
