//! Symbolization: running `perf script` on a capture's shards, whole or in
//! time slices, and streaming what it prints.
//!
//! Every external call is built by a small argv builder
//! ([`script_argv`], [`header_argv`], [`time_scan_argv`]) so tests can check
//! the exact command line. [`run`] starts one `perf script` as a child
//! process and hands its stdout to a callback as it arrives (nothing is
//! buffered on disk); stderr is collected on the side so a failure can be
//! reported with perf's own words.
//!
//! A big single shard is split into time slices so that several
//! `perf script` processes work on it at once ([`plan_slices`]). The sample
//! time range comes from `perf report --header-only` (cheap: header only),
//! or, when the header does not have it, from a `perf script -F time` scan.
//! Slice edges are inclusive on both sides in perf (`--time A,B` keeps
//! `A <= t <= B`), so consecutive slices are `[b_k, b_{k+1} - 1ns]`, the
//! first open at its start and the last open at its end: every sample lands
//! in exactly one slice, whatever the header's rounding.
//!
//! This module does not fold, compress or decide which shards to run.

use std::ffi::OsString;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// Why perf is not usable, or could not give a shard's time range.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `perf --version` could not be started.
    #[error(
        "cannot run `{} --version`: {source} (install linux-perf, or pass --perf PATH)",
        program.display()
    )]
    Missing {
        /// The program tried.
        program: PathBuf,
        /// What went wrong.
        #[source]
        source: io::Error,
    },
    /// `perf --version` failed or printed no version.
    #[error("`{} --version` failed: {stderr}", program.display())]
    Broken {
        /// The program tried.
        program: PathBuf,
        /// The first line of its stderr.
        stderr: String,
    },
    /// A perf command (named) could not be started.
    #[error("cannot run {what}: {source}")]
    Run {
        /// `perf report` or `perf script`.
        what: &'static str,
        /// What went wrong.
        #[source]
        source: io::Error,
    },
    /// The `perf script -F time` scan failed.
    #[error("perf script -F time failed ({status}): {stderr}")]
    TimeScan {
        /// How it ended.
        status: ExitStatus,
        /// The first line of its stderr.
        stderr: String,
    },
    /// The scan found no sample.
    #[error("no samples")]
    NoSamples,
}

/// A usable `perf` executable and what `perf --version` said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PerfTool {
    /// The program to run (`perf`, resolved on `PATH`, or `--perf PATH`).
    pub program: PathBuf,
    /// `perf version 6.1.187`.
    pub version: String,
}

impl PerfTool {
    /// Finds perf: `explicit` when given, else `perf` on `PATH`. Runs
    /// `perf --version` to make sure it works (Debian's `/usr/bin/perf` is a
    /// wrapper that fails when no perf matches the running kernel). The
    /// error says what to install or pass.
    pub fn find(explicit: Option<&Path>) -> Result<PerfTool, Error> {
        let program = explicit
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("perf"));
        let out = Command::new(&program)
            .arg("--version")
            .stdin(Stdio::null())
            .output()
            .map_err(|source| Error::Missing {
                program: program.clone(),
                source,
            })?;
        let version = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if !out.status.success() || !version.starts_with("perf version") {
            return Err(Error::Broken {
                program,
                stderr: first_line(&String::from_utf8_lossy(&out.stderr)).to_string(),
            });
        }
        Ok(PerfTool { program, version })
    }

    /// A command for `perf` with `args`, stdin closed.
    pub fn command(&self, args: &[OsString]) -> Command {
        let mut c = Command::new(&self.program);
        c.args(args).stdin(Stdio::null());
        c
    }
}

/// perf found in the background: `perf --version` ([`PerfTool::find`])
/// runs on its own thread from [`PerfProbe::start`], and [`PerfProbe::get`]
/// waits for it only where perf or its version is needed, so a capture the
/// native symbolizer reads whole never waits for it.
#[derive(Debug)]
pub struct PerfProbe {
    program: PathBuf,
    probe: std::sync::Mutex<Option<std::thread::JoinHandle<Result<PerfTool, Error>>>>,
    found: std::sync::OnceLock<Result<PerfTool, Error>>,
}

impl PerfProbe {
    /// Starts looking for perf (`explicit`, else `perf` on `PATH`).
    pub fn start(explicit: Option<&Path>) -> PerfProbe {
        let program = explicit.map_or_else(|| PathBuf::from("perf"), Path::to_path_buf);
        let arg = explicit.map(Path::to_path_buf);
        let probe = std::thread::Builder::new()
            .name("perf-probe".into())
            .spawn(move || PerfTool::find(arg.as_deref()));
        match probe {
            Ok(h) => PerfProbe {
                program,
                probe: std::sync::Mutex::new(Some(h)),
                found: std::sync::OnceLock::new(),
            },
            // No thread to spare: look now.
            Err(_) => PerfProbe::ready(PerfTool::find(explicit)),
        }
    }

    /// A probe whose answer is known already.
    pub fn ready(found: Result<PerfTool, Error>) -> PerfProbe {
        let program = match &found {
            Ok(p) => p.program.clone(),
            Err(Error::Missing { program, .. } | Error::Broken { program, .. }) => program.clone(),
            Err(_) => PathBuf::from("perf"),
        };
        PerfProbe {
            program,
            probe: std::sync::Mutex::new(None),
            found: found.into(),
        }
    }

    /// The usable perf, or why there is none: waits for the probe the
    /// first time.
    pub fn get(&self) -> Result<&PerfTool, &Error> {
        self.found
            .get_or_init(|| {
                let probe = self.probe.lock().unwrap_or_else(|e| e.into_inner()).take();
                match probe.map(std::thread::JoinHandle::join) {
                    Some(Ok(found)) => found,
                    // A panicked probe, or none left (never: the cell is set
                    // once, under its own lock).
                    _ => Err(Error::Broken {
                        program: self.program.clone(),
                        stderr: "the perf probe did not finish".into(),
                    }),
                }
            })
            .as_ref()
    }
}

/// How `perf script` symbolizes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ScriptOptions {
    /// Expand inlined functions (`--inline`); off by default because it
    /// can be 100x slower on dwarf captures.
    pub inline: bool,
    /// The capture's `symfs/` (`--symfs`).
    pub symfs: Option<PathBuf>,
    /// The kernel symbol table (`--kallsyms`): with `--symfs`, perf reads
    /// no `/proc/kallsyms` of its own.
    pub kallsyms: Option<PathBuf>,
}

/// A time slice of a shard, in perf's clock (nanoseconds), both ends
/// inclusive; `None` is open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeSlice {
    /// First nanosecond included, or open.
    pub start_ns: Option<u64>,
    /// Last nanosecond included, or open.
    pub end_ns: Option<u64>,
}

impl TimeSlice {
    /// The `--time` argument: `START,END` in seconds with nanosecond
    /// precision, either side empty when open.
    pub fn to_arg(&self) -> String {
        let f = |t: Option<u64>| t.map(format_ns).unwrap_or_default();
        format!("{},{}", f(self.start_ns), f(self.end_ns))
    }
}

/// Seconds with 9 decimals, as `perf script --time` reads them.
pub fn format_ns(ns: u64) -> String {
    format!("{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000)
}

/// Parses `1614.741430` (any number of decimals up to 9) into nanoseconds.
pub fn parse_seconds(s: &str) -> Option<u64> {
    let s = s.trim().trim_end_matches(':');
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    if int.is_empty() || !int.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if frac.len() > 9 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let secs: u64 = int.parse().ok()?;
    let mut frac_ns: u64 = 0;
    for (i, b) in frac.bytes().enumerate() {
        frac_ns += u64::from(b - b'0') * 10u64.pow(8 - i as u32);
    }
    secs.checked_mul(1_000_000_000)?.checked_add(frac_ns)
}

/// `perf script` for one shard (or one time slice of it): default output
/// fields, `-f` so files owned by another user are read (shared result
/// directories), `--symfs` and `--kallsyms` when the capture has them,
/// `--no-inline` unless asked.
pub fn script_argv(data: &Path, opts: &ScriptOptions, slice: Option<&TimeSlice>) -> Vec<OsString> {
    let mut a: Vec<OsString> = vec!["script".into(), "-f".into(), "-i".into(), data.into()];
    if let Some(symfs) = &opts.symfs {
        a.push("--symfs".into());
        a.push(symfs.into());
    }
    if let Some(k) = &opts.kallsyms {
        a.push("--kallsyms".into());
        a.push(k.into());
    }
    a.push(
        if opts.inline {
            "--inline"
        } else {
            "--no-inline"
        }
        .into(),
    );
    if let Some(s) = slice {
        a.push("--time".into());
        a.push(s.to_arg().into());
    }
    a
}

/// `perf report --header-only`: prints the header, including the time of
/// the first and last sample, without reading the samples.
pub fn header_argv(data: &Path) -> Vec<OsString> {
    vec![
        "report".into(),
        "-f".into(),
        "--header-only".into(),
        "-i".into(),
        data.into(),
    ]
}

/// `perf script -F time --ns`: only the sample times (no symbolization), the
/// fallback when the header has no time range.
pub fn time_scan_argv(data: &Path) -> Vec<OsString> {
    vec![
        "script".into(),
        "-f".into(),
        "-i".into(),
        data.into(),
        "-F".into(),
        "time".into(),
        "--ns".into(),
    ]
}

/// The sample time range from `perf report --header-only` output
/// (`# time of first sample : 1614.741430`).
pub fn parse_header_time_range(text: &str) -> Option<(u64, u64)> {
    let find = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|rest| parse_seconds(rest.trim_start().trim_start_matches(':')))
    };
    let first = find("# time of first sample")?;
    let last = find("# time of last sample")?;
    (last >= first && last > 0).then_some((first, last))
}

/// The time range of `data`'s samples (nanoseconds, perf clock): from the
/// header when it has one, else by scanning sample times.
pub fn time_range(perf: &PerfTool, data: &Path) -> Result<(u64, u64), Error> {
    let out = perf
        .command(&header_argv(data))
        .stderr(Stdio::null())
        .output()
        .map_err(|source| Error::Run {
            what: "perf report",
            source,
        })?;
    if let Some(r) = parse_header_time_range(&String::from_utf8_lossy(&out.stdout)) {
        return Ok(r);
    }
    let out = perf
        .command(&time_scan_argv(data))
        .stderr(Stdio::piped())
        .output()
        .map_err(|source| Error::Run {
            what: "perf script",
            source,
        })?;
    if !out.status.success() {
        return Err(Error::TimeScan {
            status: out.status,
            stderr: first_line(&String::from_utf8_lossy(&out.stderr)).to_string(),
        });
    }
    let mut range: Option<(u64, u64)> = None;
    for t in String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(parse_seconds)
    {
        range = Some(match range {
            None => (t, t),
            Some((a, b)) => (a.min(t), b.max(t)),
        });
    }
    range.ok_or(Error::NoSamples)
}

/// Cuts `[first, last]` into `n` slices that cover every nanosecond exactly
/// once (first slice open at the start, last open at the end). Fewer
/// slices when the range is too short to cut.
pub fn plan_slices(first: u64, last: u64, n: usize) -> Vec<TimeSlice> {
    let span = last.saturating_sub(first);
    let n = (n.max(1) as u64).min(span.max(1)) as usize;
    if n <= 1 {
        return vec![TimeSlice {
            start_ns: None,
            end_ns: None,
        }];
    }
    let bounds: Vec<u64> = (1..n as u64)
        .map(|k| first + (u128::from(span) * u128::from(k) / n as u128) as u64)
        .collect();
    (0..n)
        .map(|k| TimeSlice {
            start_ns: (k > 0).then(|| bounds[k - 1]),
            end_ns: (k + 1 < n).then(|| bounds[k] - 1),
        })
        .collect()
}

/// How one `perf script` run ended.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    /// Bytes of text it printed.
    pub bytes: u64,
    /// Its exit status, `None` when it was killed by a signal or could not
    /// be waited for.
    pub exit_code: Option<i32>,
    /// The end of its stderr (at most 4 KiB), for messages.
    pub stderr_tail: String,
    /// Wall time.
    pub elapsed: Duration,
    /// Set when the consumer failed (the child was then killed).
    pub consumer_error: Option<String>,
}

impl RunOutcome {
    /// True when perf exited 0 and everything it printed was consumed.
    pub fn ok(&self) -> bool {
        self.exit_code == Some(0) && self.consumer_error.is_none()
    }

    /// One line saying why the run failed (perf's last stderr line).
    pub fn failure(&self) -> String {
        if let Some(e) = &self.consumer_error {
            return e.clone();
        }
        let status = match self.exit_code {
            Some(c) => format!("exit status {c}"),
            None => "killed by a signal".to_string(),
        };
        let said = last_line(&self.stderr_tail);
        if said.is_empty() {
            format!("perf script ended with {status}")
        } else {
            format!("perf script ended with {status}: {said}")
        }
    }
}

/// Runs `perf` with `args`, handing stdout to `consume` in pieces as it
/// arrives. If `consume` fails the child is killed and the error kept.
pub fn run(
    perf: &PerfTool,
    args: &[OsString],
    mut consume: impl FnMut(&[u8]) -> io::Result<()>,
) -> io::Result<RunOutcome> {
    let start = Instant::now();
    let mut child = perf
        .command(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let mut stdout = child.stdout.take().expect("piped stdout");
    let mut stderr = child.stderr.take().expect("piped stderr");
    let err_thread = std::thread::spawn(move || {
        // Keep only the tail: perf can warn once per sample.
        let mut tail: Vec<u8> = Vec::new();
        let mut buf = [0u8; 8192];
        while let Ok(n) = stderr.read(&mut buf) {
            if n == 0 {
                break;
            }
            tail.extend_from_slice(&buf[..n]);
            if tail.len() > 8192 {
                tail.drain(..tail.len() - 4096);
            }
        }
        String::from_utf8_lossy(&tail).into_owned()
    });
    let mut buf = vec![0u8; 1 << 20];
    let mut bytes = 0u64;
    let mut consumer_error = None;
    loop {
        match stdout.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                bytes += n as u64;
                if let Err(e) = consume(&buf[..n]) {
                    consumer_error = Some(e.to_string());
                    let _ = child.kill();
                    break;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                consumer_error = Some(format!("reading perf script's output: {e}"));
                let _ = child.kill();
                break;
            }
        }
    }
    drop(stdout);
    let status = child.wait()?;
    let mut stderr_tail = err_thread.join().unwrap_or_default();
    if stderr_tail.len() > 4096 {
        let cut = stderr_tail.len() - 4096;
        let cut = (cut..stderr_tail.len())
            .find(|&i| stderr_tail.is_char_boundary(i))
            .unwrap_or(stderr_tail.len());
        stderr_tail.drain(..cut);
    }
    Ok(RunOutcome {
        bytes,
        exit_code: status.code(),
        stderr_tail,
        elapsed: start.elapsed(),
        consumer_error,
    })
}

fn first_line(s: &str) -> &str {
    s.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("")
}

fn last_line(s: &str) -> &str {
    s.lines()
        .rev()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `perf` that takes `secs` to say its version.
    fn slow_perf(dir: &Path, secs: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let p = dir.join("perf");
        let script = format!("#!/bin/sh\nsleep {secs}\necho 'perf version 9.9'\n");
        std::fs::write(&p, script).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p
    }

    /// The probe runs in the background: starting it does not wait for
    /// `perf --version`, and only [`PerfProbe::get`] does, once.
    #[test]
    fn the_perf_probe_waits_only_when_asked() {
        let dir = tempfile::tempdir().unwrap();
        let perf = slow_perf(dir.path(), "0.5");
        let t = Instant::now();
        let probe = PerfProbe::start(Some(&perf));
        assert!(
            t.elapsed() < Duration::from_millis(300),
            "{:?}",
            t.elapsed()
        );
        let got = probe.get().unwrap();
        assert!(t.elapsed() >= Duration::from_millis(450));
        assert_eq!(
            (got.program.as_path(), got.version.as_str()),
            (perf.as_path(), "perf version 9.9")
        );
        assert!(std::ptr::eq(got, probe.get().unwrap()));
    }

    /// A perf that is not there is named when it is needed.
    #[test]
    fn a_missing_perf_is_named_when_needed() {
        let probe = PerfProbe::start(Some(Path::new("/nonexistent/perf")));
        let e = probe.get().unwrap_err().to_string();
        assert!(e.contains("/nonexistent/perf --version"), "{e}");
        assert!(e.contains("--perf PATH"), "{e}");
    }

    #[test]
    fn seconds_round_trip() {
        assert_eq!(parse_seconds("1614.741430"), Some(1_614_741_430_000));
        assert_eq!(parse_seconds(" 1615.482501598: "), Some(1_615_482_501_598));
        assert_eq!(parse_seconds("12"), Some(12_000_000_000));
        assert_eq!(parse_seconds("1.2345678901"), None);
        assert_eq!(parse_seconds("x.1"), None);
        assert_eq!(format_ns(1_615_482_501_598), "1615.482501598");
        assert_eq!(format_ns(5), "0.000000005");
    }

    #[test]
    fn header_time_range() {
        let text = "# captured on: x\n# time of first sample : 1614.741430\n\
                    # time of last sample : 1616.154067\n# sample duration :   1412.637 ms\n";
        assert_eq!(
            parse_header_time_range(text),
            Some((1_614_741_430_000, 1_616_154_067_000))
        );
        assert_eq!(parse_header_time_range("# nothing\n"), None);
    }

    #[test]
    fn slices_cover_every_nanosecond_once() {
        let s = plan_slices(1000, 2000, 3);
        assert_eq!(s.len(), 3);
        assert_eq!(s[0].start_ns, None);
        assert_eq!(s[2].end_ns, None);
        for w in s.windows(2) {
            assert_eq!(w[0].end_ns.unwrap() + 1, w[1].start_ns.unwrap());
        }
        assert_eq!(s[0].to_arg(), ",0.000001332");
        assert_eq!(s[1].to_arg(), "0.000001333,0.000001665");
        assert_eq!(s[2].to_arg(), "0.000001666,");
        assert_eq!(plan_slices(5, 5, 4).len(), 1);
        assert_eq!(plan_slices(5, 7, 4).len(), 2);
    }

    #[test]
    fn script_argv_flags() {
        let plain = script_argv(Path::new("d/perf.data"), &ScriptOptions::default(), None);
        assert_eq!(plain, ["script", "-f", "-i", "d/perf.data", "--no-inline"]);
        let opts = ScriptOptions {
            inline: true,
            symfs: Some("w/symfs".into()),
            kallsyms: Some("w/kallsyms".into()),
        };
        let slice = TimeSlice {
            start_ns: Some(1_500_000_000),
            end_ns: None,
        };
        assert_eq!(
            script_argv(Path::new("p"), &opts, Some(&slice)),
            [
                "script",
                "-f",
                "-i",
                "p",
                "--symfs",
                "w/symfs",
                "--kallsyms",
                "w/kallsyms",
                "--inline",
                "--time",
                "1.500000000,"
            ]
        );
    }
}
