//! `capture.json`: the phases a capture went through with their times, how
//! it ended, and the metadata [`Capture`] with its hand-written writer
//! (the same field names as the `serde` derive; tested by round trips).

use std::fmt;

use crate::json::{json_string, JsonObject};

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
    /// The worker's effective uid (the second `Uid:` field of
    /// `/proc/PID/status`) when the capture was set up: the user whose
    /// mmaps the capture's DSO paths are, so `jobprof process` opens this
    /// host's files at those paths with that user's rights, whoever owns
    /// the published files (the root sidecar). `None` when it could not
    /// be read, and in captures made before it was recorded.
    #[cfg_attr(feature = "serde", serde(default))]
    pub worker_uid: Option<u32>,
    /// The worker's effective gid (the second `Gid:` field), read with
    /// `worker_uid`.
    #[cfg_attr(feature = "serde", serde(default))]
    pub worker_gid: Option<u32>,
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
        w.opt_num("worker_uid", self.worker_uid.map(u64::from));
        w.opt_num("worker_gid", self.worker_gid.map(u64::from));
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FORMAT_VERSION;

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
            worker_uid: Some(4_294_967_294),
            worker_gid: Some(1000),
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

    #[cfg(feature = "serde")]
    mod serde_round_trip {
        use super::*;
        use crate::ShardPhase;

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
        fn worker_ids_round_trip_and_older_json_without_them_reads_as_unknown() {
            let mut c = sample_capture();
            let v: serde_json::Value = serde_json::from_str(&c.to_json()).unwrap();
            assert_eq!(v["worker_uid"], 4_294_967_294u32);
            assert_eq!(v["worker_gid"], 1000);
            assert_eq!(serde_json::from_value::<Capture>(v.clone()).unwrap(), c);
            // Captures made before the ids were recorded.
            let mut old = v;
            let obj = old.as_object_mut().unwrap();
            obj.remove("worker_uid").unwrap();
            obj.remove("worker_gid").unwrap();
            let back: Capture = serde_json::from_value(old).unwrap();
            c.worker_uid = None;
            c.worker_gid = None;
            assert_eq!(back, c);
            // Written as null when unknown, and read back so.
            let json = c.to_json();
            assert!(json.contains("\"worker_uid\": null"), "{json}");
            assert_eq!(serde_json::from_str::<Capture>(&json).unwrap(), c);
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
