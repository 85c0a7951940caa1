//! The shard files of a capture: `perf-shards.tsv` (one row per perf
//! process: how it ended, its threads and its data file) and
//! `perf-dropped-tids.tsv` (the threads that were not attached, and why),
//! with their headers, writers and readers; a malformed file is a
//! [`TsvError`] naming the line and column.

use std::fmt;

/// How a shard (one perf process) ended, column `phase` of `perf-shards.tsv`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(rename_all = "kebab-case")
)]
pub enum ShardPhase {
    /// perf was told to stop (control FIFO or SIGINT) and exited by itself.
    Stopped,
    /// perf exited on its own before it was told to stop (its targets
    /// exited, or it failed).
    Exited,
    /// The stop watchdog had to send SIGTERM or SIGKILL.
    Killed,
    /// perf stopped by itself, cleanly, because its data file reached
    /// `--max-shard-size`: complete data for a shorter window.
    SizeLimit,
    /// perf never acknowledged readiness: the shard was not recorded.
    Failed,
}

impl ShardPhase {
    /// The spelling used in `perf-shards.tsv`.
    pub fn as_str(self) -> &'static str {
        match self {
            ShardPhase::Stopped => "stopped",
            ShardPhase::Exited => "exited",
            ShardPhase::Killed => "killed",
            ShardPhase::SizeLimit => "size-limit",
            ShardPhase::Failed => "failed",
        }
    }

    /// Parses the spelling used in `perf-shards.tsv`.
    pub fn parse(s: &str) -> Option<ShardPhase> {
        [
            ShardPhase::Stopped,
            ShardPhase::Exited,
            ShardPhase::Killed,
            ShardPhase::SizeLimit,
            ShardPhase::Failed,
        ]
        .into_iter()
        .find(|p| p.as_str() == s)
    }
}

impl fmt::Display for ShardPhase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One row of `perf-shards.tsv`: one perf process of a capture.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct ShardRow {
    /// Shard number, 0-based (`partNNN`).
    pub shard: u32,
    /// How the shard ended.
    pub phase: ShardPhase,
    /// PID of the perf process of the last attempt (0 when none started).
    pub perf_pid: u32,
    /// Number of threads given to perf with `-t` (after dropping vanished
    /// ones); threads they create later are covered by `--inherit`.
    pub thread_count: u32,
    /// Smallest TID of the shard (0 when it has none left).
    pub first_tid: u32,
    /// Largest TID of the shard (0 when it has none left).
    pub last_tid: u32,
    /// perf's exit status in shell convention (128 + signal number when it
    /// was killed by a signal; 0 and 130 are clean); `None` (`-`) when no
    /// perf process ran.
    pub exit_status: Option<i32>,
    /// The data file, relative to the capture directory (`perf.data` or
    /// `perf.data.partNNN`).
    pub data_file: String,
    /// Size of the data file in bytes (0 when missing).
    pub data_bytes: u64,
}

impl ShardRow {
    /// True when perf ended cleanly (exit 0 or 130, the SIGINT exit).
    pub fn clean_exit(&self) -> bool {
        matches!(self.exit_status, Some(0) | Some(130))
    }
}

/// The header line of `perf-shards.tsv`.
pub const SHARDS_HEADER: [&str; 9] = [
    "shard",
    "phase",
    "perf_pid",
    "thread_count",
    "first_tid",
    "last_tid",
    "exit_status",
    "data_file",
    "data_bytes",
];

/// One row of `perf-dropped-tids.tsv`: a thread that was not attached.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct DroppedTid {
    /// Shard the thread belonged to.
    pub shard: u32,
    /// The attempt (1-3) before which it was found gone, or that failed.
    pub attempt: u32,
    /// The thread id.
    pub tid: u32,
    /// Why it was dropped, e.g. `exited before attach`.
    pub reason: String,
}

/// The header line of `perf-dropped-tids.tsv`.
pub const DROPPED_HEADER: [&str; 4] = ["shard", "attempt", "tid", "reason"];

/// A malformed TSV file: the 1-based line and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TsvError {
    /// 1-based line number (1 is the header).
    pub line: usize,
    /// What is wrong with it.
    pub message: String,
}

impl fmt::Display for TsvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

impl std::error::Error for TsvError {}

/// A TSV field: tabs and line breaks (which would break the format) become
/// spaces.
fn tsv_field(s: &str) -> String {
    s.replace(['\t', '\n', '\r'], " ")
}

/// `perf-shards.tsv` for `rows`: a header line, then one line per shard.
pub fn write_shards_tsv(rows: &[ShardRow]) -> String {
    let mut out = SHARDS_HEADER.join("\t");
    out.push('\n');
    for r in rows {
        let status = r
            .exit_status
            .map(|s| s.to_string())
            .unwrap_or_else(|| "-".into());
        out.push_str(&format!(
            "{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\n",
            r.shard,
            r.phase,
            r.perf_pid,
            r.thread_count,
            r.first_tid,
            r.last_tid,
            status,
            tsv_field(&r.data_file),
            r.data_bytes
        ));
    }
    out
}

/// `perf-dropped-tids.tsv` for `rows`: a header line, then one line per thread.
pub fn write_dropped_tsv(rows: &[DroppedTid]) -> String {
    let mut out = DROPPED_HEADER.join("\t");
    out.push('\n');
    for r in rows {
        out.push_str(&format!(
            "{}\t{}\t{}\t{}\n",
            r.shard,
            r.attempt,
            r.tid,
            tsv_field(&r.reason)
        ));
    }
    out
}

/// Splits `text` into rows of exactly `header.len()` fields after checking
/// the header line. Returns (line number, fields) pairs; empty lines are
/// skipped.
fn tsv_rows<'a>(text: &'a str, header: &[&str]) -> Result<Vec<(usize, Vec<&'a str>)>, TsvError> {
    let mut lines = text.lines().enumerate();
    let first = lines.next().map(|(_, l)| l).unwrap_or("");
    let got: Vec<&str> = first.split('\t').collect();
    if got != header {
        return Err(TsvError {
            line: 1,
            message: format!(
                "expected the header `{}`, found `{}`",
                header.join("\\t"),
                first
            ),
        });
    }
    let mut rows = Vec::new();
    for (i, line) in lines {
        if line.is_empty() {
            continue;
        }
        let fields: Vec<&str> = line.split('\t').collect();
        if fields.len() != header.len() {
            return Err(TsvError {
                line: i + 1,
                message: format!(
                    "expected {} tab-separated fields, found {}",
                    header.len(),
                    fields.len()
                ),
            });
        }
        rows.push((i + 1, fields));
    }
    Ok(rows)
}

fn num<T: std::str::FromStr>(line: usize, column: &str, s: &str) -> Result<T, TsvError> {
    s.parse().map_err(|_| TsvError {
        line,
        message: format!("column {column}: `{s}` is not a valid number"),
    })
}

/// Parses `perf-shards.tsv` (as written by [`write_shards_tsv`]).
pub fn parse_shards_tsv(text: &str) -> Result<Vec<ShardRow>, TsvError> {
    tsv_rows(text, &SHARDS_HEADER)?
        .into_iter()
        .map(|(line, f)| {
            Ok(ShardRow {
                shard: num(line, "shard", f[0])?,
                phase: ShardPhase::parse(f[1]).ok_or_else(|| TsvError {
                    line,
                    message: format!(
                        "column phase: `{}` is not one of stopped, exited, killed, size-limit, failed",
                        f[1]
                    ),
                })?,
                perf_pid: num(line, "perf_pid", f[2])?,
                thread_count: num(line, "thread_count", f[3])?,
                first_tid: num(line, "first_tid", f[4])?,
                last_tid: num(line, "last_tid", f[5])?,
                exit_status: if f[6] == "-" {
                    None
                } else {
                    Some(num(line, "exit_status", f[6])?)
                },
                data_file: f[7].to_string(),
                data_bytes: num(line, "data_bytes", f[8])?,
            })
        })
        .collect()
}

/// Parses `perf-dropped-tids.tsv` (as written by [`write_dropped_tsv`]).
pub fn parse_dropped_tsv(text: &str) -> Result<Vec<DroppedTid>, TsvError> {
    tsv_rows(text, &DROPPED_HEADER)?
        .into_iter()
        .map(|(line, f)| {
            Ok(DroppedTid {
                shard: num(line, "shard", f[0])?,
                attempt: num(line, "attempt", f[1])?,
                tid: num(line, "tid", f[2])?,
                reason: f[3].to_string(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample_shards() -> Vec<ShardRow> {
        vec![
            ShardRow {
                shard: 0,
                phase: ShardPhase::Stopped,
                perf_pid: 100,
                thread_count: 128,
                first_tid: 1000,
                last_tid: 1127,
                exit_status: Some(130),
                data_file: "perf.data.part000".into(),
                data_bytes: 123_456_789_012,
            },
            ShardRow {
                shard: 1,
                phase: ShardPhase::Failed,
                perf_pid: 0,
                thread_count: 0,
                first_tid: 0,
                last_tid: 0,
                exit_status: None,
                data_file: "perf.data.part001".into(),
                data_bytes: 0,
            },
        ]
    }

    #[test]
    fn shards_tsv_round_trips() {
        let rows = sample_shards();
        let text = write_shards_tsv(&rows);
        assert!(text.starts_with("shard\tphase\tperf_pid\t"));
        assert_eq!(parse_shards_tsv(&text).unwrap(), rows);
        assert!(rows[0].clean_exit());
        assert!(!rows[1].clean_exit());
    }

    #[test]
    fn dropped_tsv_round_trips_and_sanitizes_reasons() {
        let rows = vec![DroppedTid {
            shard: 2,
            attempt: 1,
            tid: 4711,
            reason: "exited before attach".into(),
        }];
        assert_eq!(parse_dropped_tsv(&write_dropped_tsv(&rows)).unwrap(), rows);
        let odd = vec![DroppedTid {
            shard: 0,
            attempt: 3,
            tid: 1,
            reason: "a\tb\nc".into(),
        }];
        let back = parse_dropped_tsv(&write_dropped_tsv(&odd)).unwrap();
        assert_eq!(back[0].reason, "a b c");
    }

    #[test]
    fn tsv_errors_name_the_line_and_column() {
        let e = parse_shards_tsv("nope\n").unwrap_err();
        assert_eq!(e.line, 1);
        let mut text = write_shards_tsv(&sample_shards());
        text.push_str("2\tstopped\tx\t1\t1\t1\t0\tf\t0\n");
        let e = parse_shards_tsv(&text).unwrap_err();
        assert_eq!(e.line, 4);
        assert!(e.message.contains("perf_pid"), "{e}");
        let e = parse_dropped_tsv("shard\tattempt\ttid\treason\n1\t2\n").unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.to_string().contains("4 tab-separated fields"), "{e}");
        let e = parse_shards_tsv(&text.replace("\tstopped\tx", "\tbogus\t1")).unwrap_err();
        assert!(e.message.contains("phase"), "{e}");
    }
}
