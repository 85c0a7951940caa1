//! Captures written by the old shell pipeline, a first-class input.
//!
//! Its sampler appends `capture-metadata.txt` one block per phase: each
//! block starts `capture_phase=<phase>` (`start`, `stop`, `queued`,
//! `publish_start`, `published`; a start that failed ends at
//! `attach_failed`) and repeats the capture's facts (`timestamp_utc`,
//! `hostname`, `slurm_job_id`, `worker_pid`, `event`, `frequency`,
//! `call_graph`, `user_regs`, `worker_exe`, ...) before the keys of its
//! phase (`perf_control_handshake` and `perf_shard_count` at `start`,
//! `sample_loss` and `capture_valid` at `queued`, `perf_data_shards` and
//! `perf_data_files` at `publish_start`). Keys repeat from block to block,
//! so the file is read as a list of blocks ([`parse_blocks`]), never as one
//! map. Its `perf-shards.tsv` has the header `shard phase perf_pid
//! thread_count first_tid last_tid current_open_fds open_fds_at_enable
//! exit_status data_file data_bytes` (read by column name).
//!
//! Its validity rule is in [`super::validate::legacy`]. This module only
//! reads; it never writes or removes the old pipeline's files.

use std::path::Path;

use serde::{Deserialize, Serialize};

/// One phase block of `capture-metadata.txt`, its `key=value` lines in
/// file order (`capture_phase` itself excluded).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    /// The block's `capture_phase=` value (empty for lines before the
    /// first one).
    pub phase: String,
    /// Its lines, keys trimmed, in order.
    pub entries: Vec<(String, String)>,
}

impl Block {
    /// The value of `key` in this block (the last one when it repeats).
    pub fn get(&self, key: &str) -> Option<&str> {
        self.entries
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// Splits `capture-metadata.txt` into its phase blocks.
pub fn parse_blocks(text: &str) -> Vec<Block> {
    let mut blocks: Vec<Block> = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some((k, v)) = line.split_once('=') else {
            continue;
        };
        let (k, v) = (k.trim(), v.trim());
        if k == "capture_phase" {
            blocks.push(Block {
                phase: v.to_string(),
                entries: Vec::new(),
            });
            continue;
        }
        if blocks.is_empty() {
            blocks.push(Block {
                phase: String::new(),
                entries: Vec::new(),
            });
        }
        let last = blocks.last_mut().expect("pushed above");
        last.entries.push((k.to_string(), v.to_string()));
    }
    blocks
}

/// The capture's facts, as the old pipeline recorded them: what
/// `summary.json` (`old_pipeline`) and the job page carry.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Facts {
    /// The phases reached, in file order.
    pub phases: Vec<String>,
    /// `slurm_job_id` (`unknown` outside Slurm).
    pub slurm_job_id: Option<String>,
    /// `hostname`.
    pub hostname: Option<String>,
    /// `worker_id`.
    pub worker_id: Option<String>,
    /// `worker_pid`.
    pub worker_pid: Option<String>,
    /// `worker_exe`.
    pub worker_exe: Option<String>,
    /// `query_profile_id`.
    pub query_profile_id: Option<String>,
    /// `event` (perf `-e`).
    pub event: Option<String>,
    /// `frequency` (perf `-F`, Hz).
    pub frequency: Option<String>,
    /// `call_graph` (`fp`, `dwarf,8192`).
    pub call_graph: Option<String>,
    /// `user_regs`.
    pub user_regs: Option<String>,
    /// `sample_loss` (phase `queued`).
    pub sample_loss: Option<String>,
    /// `perf_shard_count` (phase `start`).
    pub shard_count: Option<u32>,
    /// `perf_threads_per_shard` (phase `start`).
    pub threads_per_shard: Option<u32>,
    /// `perf_data_bytes` (phase `publish_start`).
    pub data_bytes: Option<u64>,
    /// `timestamp_utc` of phase `start`.
    pub started_utc: Option<String>,
    /// `timestamp_utc` of phase `stop`.
    pub stopped_utc: Option<String>,
}

impl Facts {
    /// Reads the facts from the blocks: each key from the last block that
    /// has it, the phase keys from their phase.
    pub fn of(blocks: &[Block]) -> Facts {
        let any = |key: &str| blocks.iter().rev().find_map(|b| b.get(key));
        let own = |key: &str| any(key).map(str::to_string);
        let in_phase = |phase: &str, key: &str| {
            blocks
                .iter()
                .filter(|b| b.phase == phase)
                .find_map(|b| b.get(key))
                .map(str::to_string)
        };
        Facts {
            phases: blocks
                .iter()
                .filter(|b| !b.phase.is_empty())
                .map(|b| b.phase.clone())
                .collect(),
            slurm_job_id: own("slurm_job_id"),
            hostname: own("hostname"),
            worker_id: own("worker_id"),
            worker_pid: own("worker_pid"),
            worker_exe: own("worker_exe"),
            query_profile_id: own("query_profile_id"),
            event: own("event"),
            frequency: own("frequency"),
            call_graph: own("call_graph"),
            user_regs: own("user_regs"),
            sample_loss: own("sample_loss"),
            shard_count: any("perf_shard_count").and_then(|v| v.parse().ok()),
            threads_per_shard: any("perf_threads_per_shard").and_then(|v| v.parse().ok()),
            data_bytes: any("perf_data_bytes").and_then(|v| v.parse().ok()),
            started_utc: in_phase("start", "timestamp_utc"),
            stopped_utc: in_phase("stop", "timestamp_utc"),
        }
    }

    /// The Slurm job id, `None` for the `unknown` written outside Slurm.
    pub fn job_id(&self) -> Option<String> {
        self.slurm_job_id
            .clone()
            .filter(|j| !j.is_empty() && j != "unknown")
    }

    /// One line for the job page: `cpu-clock 499 Hz, fp, 3 shard(s), ...`.
    pub fn line(&self) -> String {
        let mut v = Vec::new();
        if let Some(e) = &self.event {
            v.push(e.clone());
        }
        if let Some(f) = &self.frequency {
            v.push(format!("{f} Hz"));
        }
        if let Some(c) = &self.call_graph {
            v.push(format!("call graph {c}"));
        }
        if let Some(n) = self.shard_count {
            v.push(format!("{n} shard(s)"));
        }
        if let Some(l) = &self.sample_loss {
            v.push(format!("sample loss {l}"));
        }
        if let Some(x) = &self.worker_exe {
            v.push(x.clone());
        }
        v.join(", ")
    }
}

/// The event the old pipeline recorded the capture in `dir` with (`event=`
/// of its `capture-metadata.txt`); `None` when it does not say.
pub fn recorded_event(dir: &Path) -> Option<String> {
    let text = super::read_plain(&dir.join(super::layout::LEGACY_METADATA)).ok()?;
    Facts::of(&parse_blocks(&text))
        .event
        .filter(|e| !e.is_empty())
}

/// Whether the old post-processing expanded inline frames in the
/// `perf.script.gz` it left in `dir` (`postprocess_inline_expansion=` of
/// its `postprocess-metadata.txt`: `enabled` or `disabled`); `None` when it
/// did not say.
pub fn postprocess_inline(dir: &Path) -> Option<bool> {
    let text = super::read_plain(&dir.join(super::layout::LEGACY_POSTPROCESS_METADATA)).ok()?;
    let value = text
        .lines()
        .rev()
        .find_map(|l| l.trim().strip_prefix("postprocess_inline_expansion="))?;
    match value.trim() {
        "enabled" | "1" | "true" => Some(true),
        "disabled" | "0" | "false" => Some(false),
        _ => None,
    }
}

/// True when `text` is the old pipeline's phased metadata.
pub fn is_phased(text: &str) -> bool {
    text.lines()
        .any(|l| l.trim_start().starts_with("capture_phase="))
}

/// The data files of `count` shards as the old sampler published them:
/// `perf.data` for one, `perf.data.partNNN` for several.
pub fn data_file_names(count: usize) -> Vec<String> {
    if count == 1 {
        vec!["perf.data".into()]
    } else {
        (0..count)
            .map(|i| format!("perf.data.part{i:03}"))
            .collect()
    }
}

/// One row of an old `perf-shards.tsv`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LegacyShard {
    /// Shard number.
    pub shard: u32,
    /// The shard's last phase (`stopped`).
    pub phase: String,
    /// perf's exit status (`None` when the column is empty or `-`).
    pub exit_status: Option<i32>,
    /// The data file the row names (`perf.data.partNNN`, even for a single
    /// shard published as `perf.data`).
    pub data_file: String,
    /// Recorded size, when present.
    pub data_bytes: Option<u64>,
}

/// What is wrong with an old-pipeline shard manifest.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ManifestError {
    /// No header line.
    #[error("empty: no header line")]
    Empty,
    /// The header lacks a column the rows need.
    #[error("the header needs the columns shard, phase, exit_status and data_file")]
    Columns,
    /// A row (1-based line) with too few fields.
    #[error("line {line}: only {fields} fields")]
    Fields {
        /// The line number.
        line: usize,
        /// Fields it has.
        fields: usize,
    },
    /// A shard number that is not one.
    #[error("line {line}: shard `{value}` is not a number")]
    Shard {
        /// The line number.
        line: usize,
        /// What the field says.
        value: String,
    },
    /// An exit status that is not a number.
    #[error("line {line}: exit_status `{value}` is not a number")]
    ExitStatus {
        /// The line number.
        line: usize,
        /// What the field says.
        value: String,
    },
}

/// Parses an old-pipeline shard manifest (tab separated, with its header).
pub fn parse_shards(text: &str) -> std::result::Result<Vec<LegacyShard>, ManifestError> {
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty() && !l.starts_with('#'));
    let Some((_, header)) = lines.next() else {
        return Err(ManifestError::Empty);
    };
    let columns: Vec<&str> = header.split('\t').map(str::trim).collect();
    let col = |name: &str| columns.iter().position(|c| *c == name);
    let (Some(c_shard), Some(c_phase), Some(c_status), Some(c_file)) = (
        col("shard"),
        col("phase"),
        col("exit_status"),
        col("data_file"),
    ) else {
        return Err(ManifestError::Columns);
    };
    let c_bytes = col("data_bytes");
    let mut out = Vec::new();
    for (i, line) in lines {
        let f: Vec<&str> = line.split('\t').map(str::trim).collect();
        let field = |c: usize| {
            f.get(c).copied().ok_or(ManifestError::Fields {
                line: i + 1,
                fields: f.len(),
            })
        };
        let shard = field(c_shard)?.parse().map_err(|_| ManifestError::Shard {
            line: i + 1,
            value: f[c_shard].to_string(),
        })?;
        let status = field(c_status)?;
        let exit_status = match status {
            "" | "-" => None,
            s => Some(s.parse().map_err(|_| ManifestError::ExitStatus {
                line: i + 1,
                value: s.to_string(),
            })?),
        };
        out.push(LegacyShard {
            shard,
            phase: field(c_phase)?.to_string(),
            exit_status,
            data_file: field(c_file)?.to_string(),
            data_bytes: c_bytes.and_then(|c| f.get(c)).and_then(|s| s.parse().ok()),
        });
    }
    Ok(out)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A complete capture's phase blocks (also for the validity rule's tests).
    pub(crate) const META: &str = "capture_phase=start\nslurm_job_id=unknown\nevent=cpu-clock\n\
        perf_control_handshake=enabled\nperf_shard_count=3\ncapture_phase=stop\n\
        event=cpu-clock\ncapture_phase=queued\nsample_loss=0%\ncapture_valid=1\n\
        capture_phase=publish_start\nperf_data_shards=3\ncapture_phase=published\n";

    #[test]
    fn blocks_keep_repeated_keys_per_phase() {
        let b = parse_blocks(META);
        let phases: Vec<&str> = b.iter().map(|b| b.phase.as_str()).collect();
        assert_eq!(
            phases,
            ["start", "stop", "queued", "publish_start", "published"]
        );
        assert_eq!(b[0].get("event"), Some("cpu-clock"));
        assert_eq!(b[1].get("event"), Some("cpu-clock"));
        let f = Facts::of(&b);
        assert_eq!(f.job_id(), None, "`unknown` is no job id");
        assert_eq!(f.shard_count, Some(3));
        assert_eq!(f.sample_loss.as_deref(), Some("0%"));
        assert!(is_phased(META) && !is_phased("valid=1\n"));
    }

    #[test]
    fn shards_by_header_and_the_single_shard_name() {
        let tsv = "shard\tphase\tperf_pid\tthread_count\tfirst_tid\tlast_tid\tcurrent_open_fds\t\
                   open_fds_at_enable\texit_status\tdata_file\tdata_bytes\n\
                   000\tstopped\t30746\t17\t1\t17\t0\t117\t130\tperf.data.part000\t4096\n";
        let rows = parse_shards(tsv).unwrap();
        assert_eq!(
            rows,
            vec![LegacyShard {
                shard: 0,
                phase: "stopped".into(),
                exit_status: Some(130),
                data_file: "perf.data.part000".into(),
                data_bytes: Some(4096)
            }]
        );
        assert_eq!(data_file_names(1), ["perf.data"]);
        assert_eq!(
            data_file_names(2),
            ["perf.data.part000", "perf.data.part001"]
        );
        assert!(parse_shards("0\tstopped\t1\n").is_err());
    }
}
