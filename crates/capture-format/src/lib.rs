//! The on-disk formats that `jobprof-record` writes and `jobprof` reads:
//! capture metadata (`capture.json`), the shard manifest (`perf-shards.tsv`)
//! and the list of threads that could not be attached
//! (`perf-dropped-tids.tsv`). Dependency-free so that the capture-side binary
//! stays tiny: the JSON writer and the TSV writer and reader are written by
//! hand here. With the `serde` feature the types also derive
//! `Serialize`/`Deserialize`, so `jobprof` reads `capture.json` with
//! `serde_json`; the field names of the hand-written writer and of the derive
//! are the same (tested by round trips).
//!
//! This crate knows nothing about perf, tokens or Slurm: it only defines what
//! the files contain and how they are spelled.

use std::fmt;

pub mod nsys;
pub mod settle;
pub mod sha256;

/// Name of the capture metadata file in every published capture directory.
pub const CAPTURE_JSON: &str = "capture.json";
/// Name of the shard manifest in every published capture directory.
pub const SHARDS_TSV: &str = "perf-shards.tsv";
/// Name of the list of dropped threads in every published capture directory.
pub const DROPPED_TIDS_TSV: &str = "perf-dropped-tids.tsv";
/// Name of the list of all threads found at `start` (one TID per line).
pub const TARGET_TIDS_TXT: &str = "perf-target-tids.txt";
/// The version of `capture.json` this crate writes ([`Capture::format_version`]).
pub const FORMAT_VERSION: u32 = 1;

/// The perf data file of shard `shard` (0-based) of a capture with
/// `shard_count` shards: `perf.data` when there is one shard, otherwise
/// `perf.data.partNNN`.
pub fn data_file_name(shard: u32, shard_count: u32) -> String {
    if shard_count == 1 {
        "perf.data".to_string()
    } else {
        format!("perf.data.part{shard:03}")
    }
}

/// The log of perf's stdout and stderr for shard `shard` (0-based):
/// `perf-record.partNNN.log`, for every shard count.
pub fn shard_log_name(shard: u32) -> String {
    format!("perf-record.part{shard:03}.log")
}

/// The steps a capture went through, in order. `capture.json` lists every
/// phase that was reached with its time ([`PhaseStamp`]); post-processing
/// refuses captures that miss `queued` or `published`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(rename_all = "kebab-case")
)]
pub enum Phase {
    /// The driver's `start` token was seen.
    Requested,
    /// Every shard's perf process answered `ping` (events open, disabled).
    Attached,
    /// Every shard acknowledged `enable`: sampling is on.
    Enabled,
    /// Every running shard acknowledged `disable`: sampling is off.
    Disabled,
    /// Every perf process has exited and its data file is final.
    Stopped,
    /// The capture's files (manifests, `capture.json`) are complete in the
    /// node-local staging directory, waiting for publication at shutdown.
    Queued,
    /// The capture was moved into the result directory.
    Published,
}

impl Phase {
    /// Every phase, in order.
    pub const ALL: [Phase; 7] = [
        Phase::Requested,
        Phase::Attached,
        Phase::Enabled,
        Phase::Disabled,
        Phase::Stopped,
        Phase::Queued,
        Phase::Published,
    ];

    /// The spelling used in `capture.json`.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Requested => "requested",
            Phase::Attached => "attached",
            Phase::Enabled => "enabled",
            Phase::Disabled => "disabled",
            Phase::Stopped => "stopped",
            Phase::Queued => "queued",
            Phase::Published => "published",
        }
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One reached phase and when it was reached.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct PhaseStamp {
    /// The phase.
    pub phase: Phase,
    /// When it was reached: nanoseconds since the Unix epoch (wall clock of
    /// the capture node).
    pub unix_ns: u64,
}

/// A shard whose sampling window ended early, and when.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct ShardCut {
    /// The shard (the `shard` column of `perf-shards.tsv`).
    pub shard: u32,
    /// When its window ended (ns since the Unix epoch; noticed by the
    /// sidecar within its 0.2 s poll).
    pub unix_ns: u64,
}

/// What ended the sampling window of a capture.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(rename_all = "kebab-case")
)]
pub enum EndCause {
    /// The driver's `stop` token: the normal case.
    Stop,
    /// `stop` did not come within `--max-capture` seconds.
    MaxCapture,
    /// The profiled worker process exited during the capture.
    WorkerExit,
    /// A perf process exited on its own while recording.
    PerfFailure,
    /// A shard could not be attached (perf failed to start 3 times).
    AttachFailure,
    /// The sidecar was asked to shut down before `stop` came.
    Shutdown,
    /// The sidecar received SIGTERM or SIGINT before `stop` came.
    Signal,
}

impl EndCause {
    /// The spelling used in `capture.json`.
    pub fn as_str(self) -> &'static str {
        match self {
            EndCause::Stop => "stop",
            EndCause::MaxCapture => "max-capture",
            EndCause::WorkerExit => "worker-exit",
            EndCause::PerfFailure => "perf-failure",
            EndCause::AttachFailure => "attach-failure",
            EndCause::Shutdown => "shutdown",
            EndCause::Signal => "signal",
        }
    }
}

impl fmt::Display for EndCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `capture.json`: everything known about one query's capture of one worker.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Capture {
    /// Version of this format; [`FORMAT_VERSION`] when written by this crate.
    pub format_version: u32,
    /// Version of the `jobprof-record` that made the capture.
    pub recorder_version: String,
    /// The query id (`^[A-Za-z0-9_.-]+$`, never `.` or `..`); also the name of
    /// the capture directory.
    pub query: String,
    /// The worker index (`worker_N`).
    pub worker: u32,
    /// Host name of the node the worker ran on.
    pub host: String,
    /// `/proc/sys/kernel/random/boot_id` of the node when the capture was
    /// made: with the host, it tells `jobprof process` whether the live
    /// `/proc/kallsyms` still describes the kernel that was sampled.
    /// `None` in captures made before it was recorded.
    #[cfg_attr(feature = "serde", serde(default))]
    pub boot_id: Option<String>,
    /// `SLURM_JOB_ID` of the sidecar, when it ran inside a Slurm job.
    pub slurm_job_id: Option<String>,
    /// PID of the profiled worker process (in the sidecar's PID namespace).
    pub pid: u32,
    /// The worker's executable (`/proc/PID/exe`).
    pub exe: String,
    /// The perf event sampled (`-e`), e.g. `cpu-clock`.
    pub event: String,
    /// Sampling frequency in Hz (`-F`).
    pub frequency: u32,
    /// Call-graph mode: `fp` or `dwarf[,SIZE]`.
    pub call_graph: String,
    /// `perf record --user-regs` when the recorder passed one (on aarch64,
    /// dwarf with a software event gets the VG-free mask
    /// `x0,...,x28,x29,lr,sp,pc`); `None`: perf's own choice, and in
    /// captures made before it was recorded.
    #[cfg_attr(feature = "serde", serde(default))]
    pub user_regs: Option<String>,
    /// `perf --version` of the perf that recorded.
    pub perf_version: String,
    /// The most threads one perf process (shard) was given.
    pub threads_per_shard: u32,
    /// Number of shards (perf processes and data files) of this capture.
    pub shard_count: u32,
    /// Number of threads given to perf: found in `/proc/PID/task` at
    /// `start`, or, for a pre-armed capture, when it was armed plus those
    /// attached at `start` (listed in `perf-target-tids.txt`). Threads
    /// perf follows through `--inherit` are not counted.
    pub target_thread_count: u32,
    /// Number of those threads that exited before perf could attach, or
    /// while the capture was armed (the rows of `perf-dropped-tids.tsv`).
    pub dropped_thread_count: u32,
    /// Number of shards left out because every one of their threads exited
    /// before perf could attach (their threads are in
    /// `perf-dropped-tids.tsv`; they have no row in `perf-shards.tsv`).
    #[cfg_attr(feature = "serde", serde(default))]
    pub dropped_shard_count: u32,
    /// `--max-shard-size` in bytes: the most data one shard may write
    /// (`perf record --max-size`); `None` when unlimited.
    #[cfg_attr(feature = "serde", serde(default))]
    pub max_shard_size: Option<u64>,
    /// Shards that stopped early because they reached `max_shard_size`, with
    /// when that was noticed: their sampling window ends there, before
    /// `disabled_unix_ns` (phase `size-limit` in `perf-shards.tsv`). Not a
    /// reason to call the capture invalid.
    #[cfg_attr(feature = "serde", serde(default))]
    pub size_limited: Vec<ShardCut>,
    /// When the shards were attached ahead of the query, disabled (the
    /// sidecar's pre-arming, ns since the Unix epoch); `None` when they were
    /// attached at `start`. Threads that exited between this and `start`
    /// are in `perf-dropped-tids.tsv` (reason `exited while armed`), unless
    /// the capture was attached anew at `start` (`reattached_because`).
    #[cfg_attr(feature = "serde", serde(default))]
    pub armed_unix_ns: Option<u64>,
    /// Set when the capture was armed but its shards were attached anew at
    /// `start`, and why, counted: the worker mapped executable files or
    /// created threads while armed (for example "1 executable mapping new,
    /// 2 threads created while armed"), which perf records nothing of
    /// while its events are disabled. `None` when the armed shards sampled
    /// (or the capture was not armed).
    #[cfg_attr(feature = "serde", serde(default))]
    pub reattached_because: Option<String>,
    /// When `enable` was sent to the first shard (ns since the Unix epoch).
    pub enable_requested_unix_ns: Option<u64>,
    /// When the last shard acknowledged `enable`: sampling is on everywhere
    /// from here (ns since the Unix epoch).
    pub enabled_unix_ns: Option<u64>,
    /// When `disable` was sent to the first shard (ns since the Unix epoch).
    pub disable_requested_unix_ns: Option<u64>,
    /// When the last shard acknowledged `disable` (or had exited): sampling
    /// is off everywhere from here (ns since the Unix epoch).
    pub disabled_unix_ns: Option<u64>,
    /// What the recorder noticed that makes the window other than the
    /// query's, said in words: shards that acknowledged `disable` late
    /// (sampling went on until then, and the window runs to it), or
    /// disabling that took far longer than the query itself. Empty when
    /// nothing was noticed, and in captures made before it was recorded.
    #[cfg_attr(feature = "serde", serde(default))]
    pub warnings: Vec<String>,
    /// Every phase reached, in order.
    pub phases: Vec<PhaseStamp>,
    /// What ended the sampling window; `None` when sampling never started.
    pub ended_by: Option<EndCause>,
    /// True when the capture covers exactly the window between the driver's
    /// `start` and `stop` with every shard stopped cleanly (exit 0 or 130).
    pub valid: bool,
    /// Why the capture is not valid (`None` when it is).
    pub reason: Option<String>,
}

impl Capture {
    /// True when `phase` was reached.
    pub fn reached(&self, phase: Phase) -> bool {
        self.phases.iter().any(|p| p.phase == phase)
    }

    /// Records that `phase` was reached at `unix_ns` (once; later calls for
    /// the same phase are ignored).
    pub fn reach(&mut self, phase: Phase, unix_ns: u64) {
        if !self.reached(phase) {
            self.phases.push(PhaseStamp { phase, unix_ns });
        }
    }

    /// Marks the capture invalid for `reason`; the first reason given wins
    /// (it is the cause, later ones are consequences).
    pub fn invalidate(&mut self, reason: impl Into<String>) {
        if self.valid {
            self.valid = false;
            self.reason = Some(reason.into());
        }
    }

    /// The capture as pretty-printed JSON (with a trailing newline).
    pub fn to_json(&self) -> String {
        let mut w = JsonObject::new(0);
        w.num("format_version", self.format_version as u64);
        w.str("recorder_version", &self.recorder_version);
        w.str("query", &self.query);
        w.num("worker", self.worker as u64);
        w.str("host", &self.host);
        w.opt_str("boot_id", self.boot_id.as_deref());
        w.opt_str("slurm_job_id", self.slurm_job_id.as_deref());
        w.num("pid", self.pid as u64);
        w.str("exe", &self.exe);
        w.str("event", &self.event);
        w.num("frequency", self.frequency as u64);
        w.str("call_graph", &self.call_graph);
        w.opt_str("user_regs", self.user_regs.as_deref());
        w.str("perf_version", &self.perf_version);
        w.num("threads_per_shard", self.threads_per_shard as u64);
        w.num("shard_count", self.shard_count as u64);
        w.num("target_thread_count", self.target_thread_count as u64);
        w.num("dropped_thread_count", self.dropped_thread_count as u64);
        w.num("dropped_shard_count", self.dropped_shard_count as u64);
        w.opt_num("max_shard_size", self.max_shard_size);
        let cuts: Vec<String> = self
            .size_limited
            .iter()
            .map(|c| format!("{{\"shard\": {}, \"unix_ns\": {}}}", c.shard, c.unix_ns))
            .collect();
        w.array("size_limited", &cuts);
        w.opt_num("armed_unix_ns", self.armed_unix_ns);
        w.opt_str("reattached_because", self.reattached_because.as_deref());
        w.opt_num("enable_requested_unix_ns", self.enable_requested_unix_ns);
        w.opt_num("enabled_unix_ns", self.enabled_unix_ns);
        w.opt_num("disable_requested_unix_ns", self.disable_requested_unix_ns);
        w.opt_num("disabled_unix_ns", self.disabled_unix_ns);
        let warnings: Vec<String> = self.warnings.iter().map(|t| json_string(t)).collect();
        w.array("warnings", &warnings);
        let phases: Vec<String> = self
            .phases
            .iter()
            .map(|p| {
                format!(
                    "{{\"phase\": {}, \"unix_ns\": {}}}",
                    json_string(p.phase.as_str()),
                    p.unix_ns
                )
            })
            .collect();
        w.array("phases", &phases);
        w.opt_str("ended_by", self.ended_by.map(EndCause::as_str));
        w.raw("valid", if self.valid { "true" } else { "false" });
        w.opt_str("reason", self.reason.as_deref());
        let mut out = w.finish();
        out.push('\n');
        out
    }
}

/// A JSON string literal for `s` (quotes included), escaped per RFC 8259.
pub fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!("\\u{:04x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Writes the members of one JSON object, one per line.
struct JsonObject {
    members: Vec<String>,
    indent: usize,
}

impl JsonObject {
    fn new(indent: usize) -> Self {
        JsonObject {
            members: Vec::new(),
            indent,
        }
    }
    fn raw(&mut self, key: &str, value: &str) {
        self.members
            .push(format!("{}: {}", json_string(key), value));
    }
    fn str(&mut self, key: &str, value: &str) {
        self.raw(key, &json_string(value));
    }
    fn opt_str(&mut self, key: &str, value: Option<&str>) {
        match value {
            Some(v) => self.str(key, v),
            None => self.raw(key, "null"),
        }
    }
    fn num(&mut self, key: &str, value: u64) {
        self.raw(key, &value.to_string());
    }
    fn opt_num(&mut self, key: &str, value: Option<u64>) {
        match value {
            Some(v) => self.num(key, v),
            None => self.raw(key, "null"),
        }
    }
    fn array(&mut self, key: &str, items: &[String]) {
        if items.is_empty() {
            self.raw(key, "[]");
            return;
        }
        let pad = " ".repeat(self.indent + 4);
        let close = " ".repeat(self.indent + 2);
        let body: Vec<String> = items.iter().map(|i| format!("{pad}{i}")).collect();
        self.raw(key, &format!("[\n{}\n{close}]", body.join(",\n")));
    }
    fn finish(self) -> String {
        let pad = " ".repeat(self.indent + 2);
        let close = " ".repeat(self.indent);
        let body: Vec<String> = self.members.iter().map(|m| format!("{pad}{m}")).collect();
        format!("{{\n{}\n{close}}}", body.join(",\n"))
    }
}

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

    pub(crate) fn sample_capture() -> Capture {
        Capture {
            format_version: FORMAT_VERSION,
            recorder_version: "0.1.0".into(),
            query: "q01.warm-2".into(),
            worker: 3,
            host: "node-17".into(),
            boot_id: Some("7b1d119e-cdef-4276-a422-00234f072303".into()),
            slurm_job_id: Some("4242".into()),
            pid: 123456,
            exe: "/opt/presto/bin/presto_server (deleted)".into(),
            event: "cpu-clock".into(),
            frequency: 99,
            call_graph: "dwarf,8192".into(),
            user_regs: None,
            perf_version: "perf version 6.1.187".into(),
            threads_per_shard: 128,
            shard_count: 3,
            target_thread_count: 301,
            dropped_thread_count: 2,
            dropped_shard_count: 1,
            max_shard_size: Some(1 << 30),
            armed_unix_ns: Some(1_700_000_000_000_000_000),
            reattached_because: None,
            size_limited: vec![ShardCut {
                shard: 2,
                unix_ns: 1_790_000_000_323_456_789,
            }],
            enable_requested_unix_ns: Some(1_790_000_000_123_456_789),
            enabled_unix_ns: Some(1_790_000_000_223_456_789),
            disable_requested_unix_ns: Some(u64::MAX),
            disabled_unix_ns: None,
            warnings: vec!["disabling took 9.1 s, \"late\"\n".into()],
            phases: vec![
                PhaseStamp {
                    phase: Phase::Requested,
                    unix_ns: 1,
                },
                PhaseStamp {
                    phase: Phase::Attached,
                    unix_ns: 2,
                },
            ],
            ended_by: Some(EndCause::MaxCapture),
            valid: false,
            reason: Some("tab\there, \"quotes\", back\\slash, nl\n, bell\u{7}, ünï €".into()),
        }
    }

    #[test]
    fn data_file_names_follow_the_shard_count() {
        assert_eq!(data_file_name(0, 1), "perf.data");
        assert_eq!(data_file_name(0, 3), "perf.data.part000");
        assert_eq!(data_file_name(12, 13), "perf.data.part012");
    }

    #[test]
    fn json_strings_escape_what_json_requires() {
        assert_eq!(json_string("a\"b\\c\n\u{1}"), "\"a\\\"b\\\\c\\n\\u0001\"");
        assert_eq!(json_string("ü"), "\"ü\"");
    }

    #[test]
    fn reach_and_invalidate_keep_the_first() {
        let mut c = sample_capture();
        c.valid = true;
        c.reason = None;
        c.reach(Phase::Requested, 99);
        assert_eq!(c.phases.len(), 2);
        c.invalidate("first");
        c.invalidate("second");
        assert_eq!(c.reason.as_deref(), Some("first"));
    }

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

    #[cfg(feature = "serde")]
    mod serde_round_trip {
        use super::*;

        #[test]
        fn capture_json_written_by_hand_parses_to_the_same_value() {
            let c = sample_capture();
            let json = c.to_json();
            let back: Capture = serde_json::from_str(&json).unwrap();
            assert_eq!(back, c);
        }

        #[test]
        fn capture_json_without_boot_id_is_read_as_unknown_boot() {
            // Captures made before the boot id was recorded.
            let mut c = sample_capture();
            let mut v: serde_json::Value = serde_json::from_str(&c.to_json()).unwrap();
            v.as_object_mut().unwrap().remove("boot_id").unwrap();
            let back: Capture = serde_json::from_value(v).unwrap();
            c.boot_id = None;
            assert_eq!(back, c);
        }

        #[test]
        fn hand_written_json_equals_serde_json_output() {
            let mut c = sample_capture();
            for (valid, reason, slurm, ended) in [
                (true, None, None, None),
                (
                    false,
                    Some("x".to_string()),
                    Some("1".to_string()),
                    Some(EndCause::Stop),
                ),
            ] {
                c.valid = valid;
                c.reason = reason;
                c.slurm_job_id = slurm;
                c.ended_by = ended;
                c.phases = Phase::ALL
                    .iter()
                    .enumerate()
                    .map(|(i, &phase)| PhaseStamp {
                        phase,
                        unix_ns: i as u64,
                    })
                    .collect();
                let ours: serde_json::Value = serde_json::from_str(&c.to_json()).unwrap();
                let theirs = serde_json::to_value(&c).unwrap();
                assert_eq!(ours, theirs);
            }
            c.phases.clear();
            let back: Capture = serde_json::from_str(&c.to_json()).unwrap();
            assert_eq!(back, c);
        }

        #[test]
        fn metadata_without_the_newer_fields_still_parses() {
            let mut c = sample_capture();
            c.dropped_shard_count = 0;
            c.max_shard_size = None;
            c.size_limited.clear();
            let mut v: serde_json::Value = serde_json::from_str(&c.to_json()).unwrap();
            let obj = v.as_object_mut().unwrap();
            c.warnings.clear();
            for k in [
                "dropped_shard_count",
                "max_shard_size",
                "size_limited",
                "warnings",
            ] {
                obj.remove(k).unwrap();
            }
            let back: Capture = serde_json::from_value(v).unwrap();
            assert_eq!(back, c);
        }

        #[test]
        fn enum_spellings_match_serde() {
            for p in Phase::ALL {
                assert_eq!(serde_json::to_string(&p).unwrap(), json_string(p.as_str()));
            }
            for e in [
                EndCause::Stop,
                EndCause::MaxCapture,
                EndCause::WorkerExit,
                EndCause::PerfFailure,
                EndCause::AttachFailure,
                EndCause::Shutdown,
                EndCause::Signal,
            ] {
                assert_eq!(serde_json::to_string(&e).unwrap(), json_string(e.as_str()));
            }
            for s in ["stopped", "exited", "killed", "size-limit", "failed"] {
                let p = ShardPhase::parse(s).unwrap();
                assert_eq!(serde_json::to_string(&p).unwrap(), json_string(s));
            }
        }
    }
}
