//! The marker a `jobprof-record` sidecar leaves in `PERF_ROOT/worker_N/`
//! while a capture runs: [`CAPTURING`] names the query and where its data
//! is staged, so that `jobprof process` can say "a capture is being
//! written" instead of "no captures found". Written atomically when the
//! capture starts, removed when it is published or given up (a sidecar
//! killed with SIGKILL leaves it; the next sidecar of the worker removes
//! it). One `key=value` line per field.

/// The marker's name in `PERF_ROOT/worker_N/` (hidden: never a capture).
pub const CAPTURING: &str = ".capturing";

/// The most bytes a reader takes of a marker.
pub const MAX_CAPTURING_BYTES: u64 = 16 * 1024;

/// A capture in progress.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capturing {
    /// The query id.
    pub query: String,
    /// Its staging directory (`STAGING/worker_N/Q`).
    pub staging: String,
    /// The node the sidecar runs on.
    pub host: String,
    /// The sidecar's pid.
    pub pid: u32,
    /// When the capture started (Unix ns).
    pub since_unix_ns: u64,
}

impl Capturing {
    /// The marker's text (a newline in a value becomes `?`).
    pub fn to_text(&self) -> String {
        let line = |s: &str| s.replace(['\n', '\r'], "?");
        format!(
            "query={}\nstaging={}\nhost={}\npid={}\nsince_unix_ns={}\n",
            line(&self.query),
            line(&self.staging),
            line(&self.host),
            self.pid,
            self.since_unix_ns
        )
    }

    /// Reads a marker's text; `None` without a query (not a marker). The
    /// other fields are empty or 0 when missing.
    pub fn parse(text: &str) -> Option<Capturing> {
        let mut c = Capturing {
            query: String::new(),
            staging: String::new(),
            host: String::new(),
            pid: 0,
            since_unix_ns: 0,
        };
        for line in text.lines() {
            let Some((k, v)) = line.split_once('=') else {
                continue;
            };
            match k {
                "query" => c.query = v.to_string(),
                "staging" => c.staging = v.to_string(),
                "host" => c.host = v.to_string(),
                "pid" => c.pid = v.parse().unwrap_or(0),
                "since_unix_ns" => c.since_unix_ns = v.parse().unwrap_or(0),
                _ => {}
            }
        }
        (!c.query.is_empty()).then_some(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_marker_round_trips() {
        let c = Capturing {
            query: "q03".into(),
            staging: "/tmp/jobprof-record.42/worker_0/q03".into(),
            host: "node1".into(),
            pid: 77,
            since_unix_ns: 1_800_000_000_000_000_000,
        };
        assert_eq!(Capturing::parse(&c.to_text()), Some(c));
        assert_eq!(Capturing::parse("garbage\n"), None);
    }
}
