//! `nsys-capture.json`: what `jobprof-record sidecar --tool nsys` writes
//! next to each per-query Nsight Systems report it publishes, and what
//! `jobprof process` and the job page read back (with the `serde` feature).
//! The hand-written writer and the derive use the same field names (tested
//! by a round trip).

use crate::json::{json_string, JsonObject};

/// Name of the manifest in every published per-query nsys directory.
pub const NSYS_CAPTURE_JSON: &str = "nsys-capture.json";

/// The directory beside a published report where `jobprof process`
/// writes the profile it read from it (flamegraphs, tables, summary).
pub const NSYS_PROFILE_DIR: &str = "jobprof";

/// The directory in a report's profile directory where `jobprof process
/// --slice-by` writes one profile per window (`slices/NAME/`).
pub const NSYS_SLICES_DIR: &str = "slices";
/// The version of `nsys-capture.json` this crate writes.
pub const NSYS_FORMAT_VERSION: u32 = 1;

/// Which file of the session was published.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(rename_all = "kebab-case")
)]
pub enum ReportKind {
    /// The finished `.nsys-rep`.
    NsysRep,
    /// The raw `.qdstrm` stream: no `.nsys-rep` appeared before
    /// `--report-timeout` (convert it with `QdstrmImporter`).
    Qdstrm,
}

impl ReportKind {
    /// `nsys-rep` or `qdstrm`, as in the JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            ReportKind::NsysRep => "nsys-rep",
            ReportKind::Qdstrm => "qdstrm",
        }
    }

    /// The file name extension, with its dot.
    pub fn extension(self) -> &'static str {
        match self {
            ReportKind::NsysRep => ".nsys-rep",
            ReportKind::Qdstrm => ".qdstrm",
        }
    }
}

/// One `nsys` command the sidecar ran: its argv, exit code (`None`: killed
/// or not run) and when it returned.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct NsysCall {
    /// The command line, program first.
    pub argv: Vec<String>,
    /// Its exit status.
    pub exit_code: Option<i32>,
    /// When it returned, nanoseconds since the Unix epoch.
    pub unix_ns: u64,
}

/// The metadata of one published per-query report.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct NsysCapture {
    /// [`NSYS_FORMAT_VERSION`].
    pub format_version: u32,
    /// The query id.
    pub query: String,
    /// The worker index.
    pub worker: u32,
    /// The node.
    pub host: String,
    /// `SLURM_JOB_ID` when set.
    pub slurm_job_id: Option<String>,
    /// `nsys start ...`.
    pub start: NsysCall,
    /// `nsys stop`.
    pub stop: NsysCall,
    /// The settle window, milliseconds (`--settle`).
    pub settle_ms: u64,
    /// The longest wait for a settled `.nsys-rep`, milliseconds
    /// (`--report-timeout`).
    pub report_timeout_ms: u64,
    /// When the report settled (`None`: published unsettled, see `reason`).
    pub settled_at_ns: Option<u64>,
    /// When it was published.
    pub published_at_ns: u64,
    /// The published file's name (in the same directory).
    pub file: String,
    /// Which file that is.
    pub kind: ReportKind,
    /// It was complete by the settling rule.
    pub settled: bool,
    /// Its size.
    pub bytes: u64,
    /// Its SHA-256, hex.
    pub sha256: String,
    /// Why it is not a settled `.nsys-rep`, when it is not.
    pub reason: Option<String>,
}

impl NsysCapture {
    /// Seconds from `nsys stop` to settled (or published), for views.
    pub fn wait_s(&self) -> f64 {
        let end = self.settled_at_ns.unwrap_or(self.published_at_ns);
        end.saturating_sub(self.stop.unix_ns) as f64 / 1e9
    }

    /// The JSON text, pretty-printed, with a trailing newline.
    pub fn to_json(&self) -> String {
        let mut w = JsonObject::new(0);
        w.num("format_version", self.format_version.into());
        w.str("query", &self.query);
        w.num("worker", self.worker.into());
        w.str("host", &self.host);
        w.opt_str("slurm_job_id", self.slurm_job_id.as_deref());
        w.raw("start", &call_json(&self.start));
        w.raw("stop", &call_json(&self.stop));
        w.num("settle_ms", self.settle_ms);
        w.num("report_timeout_ms", self.report_timeout_ms);
        w.opt_num("settled_at_ns", self.settled_at_ns);
        w.num("published_at_ns", self.published_at_ns);
        w.str("file", &self.file);
        w.str("kind", self.kind.as_str());
        w.raw("settled", if self.settled { "true" } else { "false" });
        w.num("bytes", self.bytes);
        w.str("sha256", &self.sha256);
        w.opt_str("reason", self.reason.as_deref());
        let mut out = w.finish();
        out.push('\n');
        out
    }
}

fn call_json(c: &NsysCall) -> String {
    let argv: Vec<String> = c.argv.iter().map(|a| json_string(a)).collect();
    let code = c.exit_code.map_or("null".to_string(), |c| c.to_string());
    format!(
        "{{\"argv\": [{}], \"exit_code\": {code}, \"unix_ns\": {}}}",
        argv.join(", "),
        c.unix_ns
    )
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn sample() -> NsysCapture {
        NsysCapture {
            format_version: NSYS_FORMAT_VERSION,
            query: "q01".into(),
            worker: 2,
            host: "gpu-node-7".into(),
            slurm_job_id: Some("4242".into()),
            start: NsysCall {
                argv: vec![
                    "nsys".into(),
                    "start".into(),
                    "-o".into(),
                    "/s/nsys_worker_w2_q01".into(),
                    "-f".into(),
                    "true".into(),
                ],
                exit_code: Some(0),
                unix_ns: 1_000_000_000,
            },
            stop: NsysCall {
                argv: vec!["nsys".into(), "stop".into()],
                exit_code: Some(0),
                unix_ns: 5_000_000_000,
            },
            settle_ms: 15_000,
            report_timeout_ms: 600_000,
            settled_at_ns: Some(25_000_000_000),
            published_at_ns: 25_100_000_000,
            file: "nsys_worker_w2_q01.nsys-rep".into(),
            kind: ReportKind::NsysRep,
            settled: true,
            bytes: 123,
            sha256: "ab".repeat(32),
            reason: None,
        }
    }

    #[test]
    fn wait_is_from_stop_to_settled() {
        assert_eq!(sample().wait_s(), 20.0);
        let mut s = sample();
        s.settled_at_ns = None;
        assert_eq!(s.wait_s(), 20.1);
    }

    #[cfg(feature = "serde")]
    #[test]
    fn hand_written_json_reads_back_with_serde() {
        let mut s = sample();
        let back: NsysCapture = serde_json::from_str(&s.to_json()).unwrap();
        assert_eq!(back, s);
        s.kind = ReportKind::Qdstrm;
        s.settled = false;
        s.settled_at_ns = None;
        s.start.exit_code = None;
        s.reason = Some("no .nsys-rep \"after\" 600 s".into());
        let back: NsysCapture = serde_json::from_str(&s.to_json()).unwrap();
        assert_eq!(back, s);
    }
}
