//! The options of `jobprof-record sidecar --tool nsys` and their help
//! (parsed by `cli`, which hands the nsys flags to [`RawOpts::take`]).

use std::path::PathBuf;
use std::time::Duration;

use crate::fail::Fail;

/// Help for `jobprof-record sidecar --tool nsys`.
pub const SIDECAR_HELP: &str = "\
jobprof-record sidecar --tool nsys: serve per-query Nsight Systems collections of one worker

Usage:
  jobprof-record sidecar --tool nsys --token-dir DIR --worker N --out NSYS_ROOT
      [--nsys-bin PATH] [--session NAME] [--start-args 'ARGS'] [--start-arg ARG]...
      [--importer PATH] [--call-timeout SECS] [--settle SECS] [--report-timeout SECS]
      [--staging DIR]

A drop-in for the shell loop beside a worker started under
`nsys launch -t nvtx,cuda ...`: runs in the worker's container, writes the
`ready` token, then, for any query id, in any order, each once:
`.nsys_start_token_wN_Q` -> `nsys start -o STAGING/Q/nsys_worker_wN_Q -f true`
-> `.nsys_started_token_wN_Q` (or `.nsys_error_token_wN_Q` with the reason
when `nsys start` fails, and no `started`); `.nsys_stop_token_wN_Q` ->
`nsys stop`. The report nsys writes after `stop` is watched by a separate
thread (the next query starts meanwhile) until it is non-empty and its
bytes and modification time stayed the same for --settle, then moved
atomically into NSYS_ROOT/worker_N/Q/ with nsys-capture.json (argv and
exit codes of both nsys calls, times, bytes, sha256), and
`.nsys_finished_token_wN_Q` is written. When no settled .nsys-rep comes
within --report-timeout of `stop`, the .nsys-rep as it is, else the
.qdstrm, is published marked unsettled; with neither, the query gets an
error token. Ends on `jobprof-record shutdown --tool nsys` (or
SIGTERM/SIGINT): a running collection is stopped, and the sidecar exits
once every report is published or given up (0: all published; 1: some
could not be, the error token says which and where they stay).

Options:
  --token-dir DIR          directory shared with the driver (tokens)
  --worker N               worker index (digits)
  --out NSYS_ROOT          reports go to NSYS_ROOT/worker_N/Q/ (not the perf
                           sidecar's PERF_ROOT: e.g. RESULT/profiles/nsys)
  --nsys-bin PATH          the nsys to run (default: nsys on PATH), resolved
                           once at start; as root only one that root alone
                           can change (it and every directory above it
                           root's, writable by no one else), else exit 1
  --session NAME           the worker's session (`nsys launch --session-new=NAME`):
                           every start/stop passes --session=NAME (default: the
                           default session, whose stop can hang; name one)
  --start-args 'ARGS'      extra `nsys start` options, split at whitespace
                           (e.g. '--sample=cpu --backtrace=fp'); on nsys
                           2022.4, unless they choose sampling (-s, -b) or
                           context switches, every start first gets
                           '--sample=none --cpuctxsw=none' (its stop of
                           that collection can hang)
  --start-arg ARG          one extra `nsys start` option (repeatable)
  --importer PATH          QdstrmImporter, for a .qdstrm that `nsys stop` left
                           unconverted (default: on PATH, else under nsys's
                           install tree, e.g. host-linux-x64/); as root only
                           one that root alone can change
  --call-timeout SECS      longest nsys or importer call (default 120); a stop
                           that times out leaves the session stuck: reported
  --settle SECS            a report is complete once unchanged this long
                           (default 15; decimals allowed)
  --report-timeout SECS    longest wait for a settled .nsys-rep after
                           `nsys stop` (default 600)
  --staging DIR            where nsys writes the reports first (default
                           $SLURM_TMPDIR, $TMPDIR or /tmp, plus
                           jobprof-record.JOB/nsys_worker_N; private, mode 0700)
";

/// The options as parsed.
#[derive(Debug, Clone)]
pub struct NsysOpts {
    /// Token directory.
    pub token_dir: PathBuf,
    /// Worker index.
    pub worker: u32,
    /// NSYS_ROOT.
    pub out: PathBuf,
    /// Explicit staging root.
    pub staging: Option<PathBuf>,
    /// The nsys executable.
    pub nsys_bin: PathBuf,
    /// The settle window.
    pub settle: Duration,
    /// The longest wait for a settled `.nsys-rep` after `stop`.
    pub report_timeout: Duration,
    /// `--session NAME`: passed to every `start`/`stop`.
    pub session: Option<String>,
    /// Extra `nsys start` options.
    pub start_args: Vec<String>,
    /// `--importer PATH` (else searched at start).
    pub importer: Option<PathBuf>,
    /// The longest nsys (or importer) call.
    pub call_timeout: Duration,
}

/// The nsys flags as given, before the options are assembled.
#[derive(Debug, Default)]
pub struct RawOpts {
    nsys_bin: Option<PathBuf>,
    settle: Option<Duration>,
    report_timeout: Option<Duration>,
    session: Option<String>,
    start_args: Vec<String>,
    importer: Option<PathBuf>,
    call_timeout: Option<Duration>,
}

/// Seconds with up to three decimals (`15`, `0.5`): more than 0, at most
/// a day. Parsed by hand: a float parser would cost the binary 10 KB.
fn seconds(flag: &str, v: &str) -> Result<Duration, Fail> {
    let (whole, frac) = v.split_once('.').unwrap_or((v, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    let ms = (!whole.is_empty() && whole.len() <= 5 && frac.len() <= 3)
        .then_some(())
        .filter(|()| digits(whole) && digits(frac))
        .and_then(|()| {
            let w: u64 = whole.parse().ok()?;
            let f: u64 = format!("{frac:0<3}").parse().ok()?;
            Some(w * 1000 + f)
        });
    match ms {
        Some(ms) if ms > 0 && ms <= 86_400_000 => Ok(Duration::from_millis(ms)),
        _ => Err(Fail::usage(format!(
            "{flag}: `{v}` is not a number of seconds above 0 and at most 86400 (e.g. 15, 0.5)"
        ))),
    }
}

/// A session name as `nsys launch --session-new` takes it: letters,
/// digits, `_`, `-`, `.`, at most 64 bytes (it goes into every argv).
fn session_name(v: &str) -> Result<String, Fail> {
    let ok = !v.is_empty()
        && v.len() <= 64
        && !v.starts_with('-')
        && v.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-.".contains(&b));
    if ok {
        Ok(v.to_string())
    } else {
        Err(Fail::usage(format!(
            "--session: `{v}` is not a session name (letters, digits, _ - ., at most 64, \
             not starting with -; the NAME of `nsys launch --session-new=NAME`)"
        )))
    }
}

/// `nsys start` options that keep nsys 2022.4's agent from collecting
/// with Linux perf (CPU sampling, context switches): its `stop` of that
/// collection loses a wakeup now and then and hangs (docs/nsys.md).
pub const PERF_OFF: [&str; 2] = ["--sample=none", "--cpuctxsw=none"];

/// Whether [`PERF_OFF`] goes first in `nsys start`: the nsys is 2022.4
/// (`version`: its `--version` output) and `args` (the user's start
/// options) choose neither CPU sampling (`--sample`, `-s`, `--backtrace`,
/// `-b`) nor context switches (`--cpuctxsw`) themselves.
pub fn perf_off_by_default(version: &str, args: &[String]) -> bool {
    let chooses = |a: &str| {
        ["--sample", "--cpuctxsw", "--backtrace"]
            .iter()
            .any(|f| a == *f || a.starts_with(&format!("{f}=")))
            || ((a.starts_with("-s") || a.starts_with("-b")) && !a.starts_with("--"))
    };
    version.contains(" 2022.4.") && !args.iter().any(|a| chooses(a))
}

impl NsysOpts {
    /// `--session=NAME` for `start`/`stop`/`cancel`, when one is named.
    pub fn session_arg(&self) -> Option<String> {
        self.session.as_ref().map(|s| format!("--session={s}"))
    }
}

impl RawOpts {
    /// Reads `flag` when it is an nsys flag (its value from `value`).
    pub fn take(
        &mut self,
        flag: &str,
        value: impl FnOnce() -> Result<String, Fail>,
    ) -> Result<bool, Fail> {
        match flag {
            "--nsys-bin" => self.nsys_bin = Some(PathBuf::from(value()?)),
            "--settle" => self.settle = Some(seconds(flag, &value()?)?),
            "--report-timeout" => self.report_timeout = Some(seconds(flag, &value()?)?),
            "--call-timeout" => self.call_timeout = Some(seconds(flag, &value()?)?),
            "--session" => self.session = Some(session_name(&value()?)?),
            "--start-args" => self
                .start_args
                .extend(value()?.split_whitespace().map(str::to_string)),
            "--start-arg" => self.start_args.push(value()?),
            "--importer" => self.importer = Some(PathBuf::from(value()?)),
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Whether any nsys flag was given.
    pub fn given(&self) -> bool {
        self.nsys_bin.is_some()
            || self.settle.is_some()
            || self.report_timeout.is_some()
            || self.call_timeout.is_some()
            || self.session.is_some()
            || !self.start_args.is_empty()
            || self.importer.is_some()
    }

    /// The options, with the defaults.
    pub fn finish(
        self,
        token_dir: PathBuf,
        worker: u32,
        out: PathBuf,
        staging: Option<PathBuf>,
    ) -> NsysOpts {
        NsysOpts {
            token_dir,
            worker,
            out,
            staging,
            nsys_bin: self.nsys_bin.unwrap_or_else(|| PathBuf::from("nsys")),
            settle: self.settle.unwrap_or(Duration::from_secs(15)),
            report_timeout: self.report_timeout.unwrap_or(Duration::from_secs(600)),
            session: self.session,
            start_args: self.start_args,
            importer: self.importer,
            call_timeout: self.call_timeout.unwrap_or(Duration::from_secs(120)),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::cli::{parse, Command};
    use std::ffi::OsString;
    use std::time::Duration;

    fn args(s: &str) -> Vec<OsString> {
        s.split_whitespace().map(OsString::from).collect()
    }

    #[test]
    fn nsys_sidecar_options_and_defaults() {
        let c = parse(args(
            "sidecar --tool nsys --token-dir /t --worker 3 --out /o",
        ))
        .unwrap();
        let Command::NsysSidecar(o) = c else { panic!() };
        assert_eq!((o.worker, o.settle), (3, Duration::from_secs(15)));
        assert_eq!(o.report_timeout, Duration::from_secs(600));
        assert_eq!(o.nsys_bin.to_str(), Some("nsys"));
        let c = parse(args(
            "sidecar --tool=nsys --token-dir /t --worker 0 --out /o --settle 0.5 \
             --report-timeout 30 --nsys-bin /opt/nsys/bin/nsys --staging /s",
        ))
        .unwrap();
        let Command::NsysSidecar(o) = c else { panic!() };
        assert_eq!(o.settle, Duration::from_millis(500));
        assert_eq!(o.report_timeout, Duration::from_secs(30));
        for (v, ms) in [
            ("2", 2000),
            ("0.25", 250),
            ("1.5", 1500),
            ("86400", 86_400_000),
        ] {
            assert_eq!(
                super::seconds("--settle", v).unwrap().as_millis(),
                ms,
                "{v}"
            );
        }
        for bad in ["", ".5", "0", "0.000", "-1", "1e3", "0.0001", "86401", "x"] {
            assert!(super::seconds("--settle", bad).is_err(), "{bad:?}");
        }
        assert_eq!(o.staging.unwrap().to_str(), Some("/s"));
    }

    /// Issue 48: nsys 2022.4 gets `--sample=none --cpuctxsw=none` unless
    /// the user's start options choose sampling, backtraces or context
    /// switches; other versions keep nsys's defaults.
    #[test]
    fn perf_collection_is_off_by_default_on_nsys_2022_4_only() {
        use super::perf_off_by_default as off;
        let v = "NVIDIA Nsight Systems version 2022.4.2.1-df9881f";
        let a = |s: &str| s.split_whitespace().map(String::from).collect::<Vec<_>>();
        assert!(off(v, &[]));
        assert!(off(
            v,
            &a("-t osrt --stats=false --samples-per-backtrace 1")
        ));
        for chosen in [
            "--sample=cpu",
            "--sample cpu",
            "-s cpu",
            "-scpu",
            "--cpuctxsw=process-tree",
            "--backtrace=fp",
            "-b dwarf",
        ] {
            assert!(!off(v, &a(chosen)), "{chosen}");
        }
        assert!(!off(
            "NVIDIA Nsight Systems version 2023.4.1.97-234133557503v0",
            &[]
        ));
        assert!(!off(
            "NVIDIA Nsight Systems version 2022.5.1.82-32078057v0",
            &[]
        ));
    }

    #[test]
    fn session_start_options_importer_and_call_timeout() {
        let mut a = args("sidecar --tool nsys --token-dir /t --worker 0 --out /o --session w0.a");
        a.extend(
            [
                "--start-args",
                "--sample=cpu  --backtrace=fp",
                "--start-arg",
                "-s",
            ]
            .map(OsString::from),
        );
        a.extend(args(
            "--start-arg cpu --importer /opt/QdstrmImporter --call-timeout 30",
        ));
        let Command::NsysSidecar(o) = parse(a).unwrap() else {
            panic!()
        };
        assert_eq!(o.session_arg().as_deref(), Some("--session=w0.a"));
        assert_eq!(
            o.start_args,
            ["--sample=cpu", "--backtrace=fp", "-s", "cpu"]
        );
        assert_eq!(o.importer.unwrap().to_str(), Some("/opt/QdstrmImporter"));
        assert_eq!(o.call_timeout, Duration::from_secs(30));
        let o = parse(args(
            "sidecar --tool nsys --token-dir /t --worker 0 --out /o",
        ))
        .unwrap();
        let Command::NsysSidecar(o) = o else { panic!() };
        assert_eq!(
            (o.session_arg(), o.call_timeout),
            (None, Duration::from_secs(120))
        );
        for bad in ["-x", "a b", "a/b", ""] {
            let mut a = args("sidecar --tool nsys --token-dir /t --worker 0 --out /o --session");
            a.push(bad.into());
            let e = parse(a).unwrap_err();
            assert!(
                e.message.contains("is not a session name"),
                "{bad:?}: {}",
                e.message
            );
        }
    }

    #[test]
    fn nsys_flags_are_checked() {
        for (bad, needle) in [
            (
                "sidecar --tool nsys --token-dir /t --worker 0 --out /o --pid 4",
                "not for --tool nsys",
            ),
            (
                "sidecar --tool nsys --token-dir /t --worker 0 --out /o --settle 0",
                "--settle: `0`",
            ),
            (
                "sidecar --token-dir /t --worker 0 --out /o --pid 4 --settle 3",
                "are for --tool nsys",
            ),
            (
                "sidecar --tool gpu --token-dir /t --worker 0",
                "--tool: `gpu`",
            ),
            (
                "sidecar --tool nsys --token-dir /t --worker 0",
                "--out is required",
            ),
        ] {
            let e = parse(args(bad)).unwrap_err();
            assert_eq!(e.code, 2, "{bad}");
            assert!(e.message.contains(needle), "{bad}: {}", e.message);
        }
        let Ok(Command::Help(h)) = parse(args("sidecar --tool nsys --help")) else {
            panic!()
        };
        assert!(h.contains("--report-timeout"));
        let Ok(Command::Shutdown(s)) =
            parse(args("shutdown --tool nsys --token-dir /t --worker 1"))
        else {
            panic!()
        };
        assert_eq!(s.timeout, 900);
    }
}
