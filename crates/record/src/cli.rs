//! Argument parsing with lexopt (no clap: the binary must stay tiny and
//! static; lexopt has no dependencies) and the help text of every
//! subcommand.
//!
//! Accepts `--flag VALUE` and `--flag=VALUE`; every subcommand understands
//! `-h`/`--help`. Arguments are taken as the OS gives them, so one that is
//! not UTF-8 is a usage error (exit 2) naming the flag, never a panic.
//! Parsing only checks syntax and numbers; what the values mean (does the
//! PID exist, is the directory writable) is checked later.

use std::ffi::{OsStr, OsString};
use std::path::PathBuf;

use crate::fail::Fail;
use crate::nsys::NsysOpts;
use crate::preflight::{PidSource, TargetOpts};
use crate::tokens::{validate_query, validate_worker, Tool};

/// Help for the whole binary.
pub const MAIN_HELP: &str = "\
jobprof-record: capture perf profiles of one benchmark worker, one query at a time

Usage:
  jobprof-record sidecar   --token-dir DIR --worker N --out PERF_ROOT (--pid PID | --pid-file FILE) [options]
  jobprof-record sidecar   --tool nsys --token-dir DIR --worker N --out NSYS_ROOT [options]
  jobprof-record start     --token-dir DIR --worker N --query Q [--timeout SECS]
  jobprof-record stop      --token-dir DIR --worker N --query Q [--timeout SECS]
  jobprof-record shutdown  [--tool nsys] --token-dir DIR --worker N [--timeout SECS]
  jobprof-record wait-ready [--tool nsys] --token-dir DIR --worker N [--timeout SECS]
  jobprof-record preflight (--pid PID | --pid-file FILE) [--exe-name NAME] [--require-symbols] [--off-cpu]
  jobprof-record completions bash|zsh|fish
  jobprof-record man-pages DIR

The sidecar runs next to the worker during the job (e.g. `srun --overlap`),
attaches perf disabled, samples exactly between the driver's `start` and
`stop`, and publishes each capture into PERF_ROOT/worker_N/Q/ as soon as its
`stop` is acknowledged. With --tool nsys it serves the Nsight Systems token
loop instead (`nsys start`/`nsys stop` per query, reports settled and
published into NSYS_ROOT/worker_N/Q/). `jobprof-record COMMAND --help`
explains each command.

Exit status: 0 success; 1 failure (the message says which check, shard or
file, and what to do); 2 bad usage or bad query id/worker index; 3 timeout;
4 no live sidecar for the worker (never started, killed, or shut down);
5 `stop`: the capture ended but is invalid (data kept, marked invalid).
";

/// Help for `completions`.
pub const COMPLETIONS_HELP: &str = "\
jobprof-record completions: print a shell completion script on stdout

Usage:
  jobprof-record completions bash|zsh|fish

Examples:
  jobprof-record completions bash > ~/.local/share/bash-completion/completions/jobprof-record
  jobprof-record completions zsh > ~/.zfunc/_jobprof-record
  jobprof-record completions fish > ~/.config/fish/completions/jobprof-record.fish

Exit status: 0 written; 2 bad usage (an unknown shell).
";

/// Help for `man-pages`.
pub const MAN_HELP: &str = "\
jobprof-record man-pages: write the man page jobprof-record.1 into DIR

Usage:
  jobprof-record man-pages DIR

The page holds this help and every command's, one section each. DIR is
created when missing; the page is replaced atomically and its path printed.

Examples:
  jobprof-record man-pages ~/.local/share/man/man1 && man jobprof-record

Exit status: 0 written; 1 the page could not be written; 2 bad usage.
";

pub const SIDECAR_HELP: &str = "\
jobprof-record sidecar: serve query-bounded perf captures of one worker

Usage:
  jobprof-record sidecar --token-dir DIR --worker N --out PERF_ROOT (--pid PID | --pid-file FILE)
      [--exe-name NAME] [--event cpu-clock] [--frequency 99] [--call-graph fp|dwarf[,SIZE]]
      [--user-regs REGS] [--threads-per-shard 128] [--start-timeout SECS] [--stop-timeout SECS]
      [--max-capture SECS] [--max-shard-size SIZE] [--staging DIR] [--symfs-limit BYTES]
      [--require-symbols] [--no-prearm] [--jit-maps auto|off] [--off-cpu]

Runs the preflight checks, snapshots the worker's executable mappings and
their separate debug info into symfs/ and the kernel's kallsyms next to it,
writes the `ready` token, then serves any number of queries until the
`shutdown` token (or SIGTERM/SIGINT, or the worker exits): on `start` for
query Q it enables one disabled `perf record` per shard of at most
--threads-per-shard threads and writes `started`; on `stop` it stops them,
publishes the capture atomically into PERF_ROOT/worker_N/Q/ and writes
`finished`. The shards are attached ahead of time (pre-armed): when the
sidecar is ready and again right after each capture ends, so that `start`
only attaches threads perf does not follow yet and switches sampling on. At shutdown whatever is left is published, then the
`done` token is written. The `ready`, `error` and `done` tokens and the lock
file name this sidecar (pid, host, boot id, start time), so drivers tell a
live sidecar from the tokens of a dead one.

Options:
  --token-dir DIR          directory shared with the benchmark driver (tokens)
  --worker N               worker index (digits)
  --out PERF_ROOT          result directory; captures go to PERF_ROOT/worker_N/
  --pid PID                the worker's PID
  --pid-file FILE          file holding the worker's PID (waited for up to --start-timeout)
  --exe-name NAME          the worker's executable must have this name (or path)
  --event EVENT            perf event (default cpu-clock; no hardware PMU needed)
  --frequency HZ           sampling frequency (default 99)
  --call-graph MODE        fp (default) or dwarf[,SIZE]
  --user-regs REGS         perf record --user-regs (comma-separated registers); on aarch64,
                           dwarf with cpu-clock/task-clock gets x0,...,x28,x29,lr,sp,pc
                           by default (perf's own mask holds SVE's VG, which software
                           events reject: EOPNOTSUPP on Grace)
  --threads-per-shard N    most threads per perf process (default 128)
  --start-timeout SECS     wait for the PID file, and per attempt for a perf
                           shard to answer ping (default 180)
  --stop-timeout SECS      after stop, SIGTERM to perf after this long, SIGKILL
                           10 s later (default 120)
  --max-capture SECS       end a capture whose stop never comes (default 3600; 0 = never)
  --max-shard-size SIZE    most bytes one shard's perf.data may hold (perf --max-size;
                           K/M/G suffixes); a shard reaching it stops cleanly and its
                           shorter window is recorded (default: no limit)
  --staging DIR            node-local staging directory, created mode 0700 (default
                           $SLURM_TMPDIR, $TMPDIR or /tmp, plus jobprof-record.JOB);
                           refused when it is a symlink, another user's, or writable
                           by others
  --symfs-limit BYTES      most bytes copied into symfs/ and kallsyms (default 4G; K/M/G suffixes)
  --require-symbols        fail when the worker's binary has no .symtab/.debug_info
  --no-prearm              attach the shards at `start` instead of ahead of time
                           (in parallel, as many at once as there are cores)
  --jit-maps auto|off      at each stop, copy the worker's perf map (/tmp/perf-PID.map)
                           and jitdump into the capture's jit/, asking a HotSpot JVM
                           to write its map (jcmd PID Compiler.perfmap) when it has
                           none (default auto)
  --off-cpu                also record every switch-out (sched:sched_switch, with the
                           same call chains) and switch events, for off-CPU and
                           wall-clock profiles (needs tracefs; docs/off-cpu.md)
";

pub const START_HELP: &str = "\
jobprof-record start: begin sampling one query (driver side)

Usage:
  jobprof-record start [--tool perf|nsys] --token-dir DIR --worker N --query Q [--timeout SECS]

Clears stale tokens of query Q, waits for the sidecar's `ready` token, writes
`start` and waits until the sidecar says `started` (every perf shard enabled).
Fails with the sidecar's own message when it reports an error, and with a
timeout message after SECS (default 120), counted again from each shard the
sidecar attaches while it does (its `attaching` token). Fails (exit 4) within 5 s when no
live sidecar holds the worker's lock. Q must match ^[A-Za-z0-9_.-]+$, must not
start with `.` and is at most 128 bytes long (exit 2 otherwise, before
anything is written).
";

pub const STOP_HELP: &str = "\
jobprof-record stop: end sampling of one query (driver side)

Usage:
  jobprof-record stop [--tool perf|nsys] --token-dir DIR --worker N --query Q [--timeout SECS]

Writes `stop` and waits until the sidecar says `finished` (perf stopped, the
capture published into PERF_ROOT/worker_N/Q/). Exits 5 when the capture is
invalid (a shard killed or failed; the reason is printed), 1 when the sidecar
reports another error for the query, 4 when no live sidecar holds the
worker's lock (for 5 s), 3 after SECS (default 600).
";

pub const SHUTDOWN_HELP: &str = "\
jobprof-record shutdown: ask the sidecar to publish every capture and exit

Usage:
  jobprof-record shutdown [--tool perf|nsys] --token-dir DIR --worker N [--timeout SECS]

Writes the `shutdown` token and waits for `done` (default 600 s; 900 s with
--tool nsys, whose sidecar first waits for the reports still being written). Fails with
the sidecar's message when publishing failed (the raw data stays in staging),
with exit 4 when no live sidecar holds the worker's lock (for 5 s).
";

pub const WAIT_HELP: &str = "\
jobprof-record wait-ready: wait until the sidecar of a worker is ready

Usage:
  jobprof-record wait-ready [--tool perf|nsys] --token-dir DIR --worker N [--timeout SECS]

For batch scripts, between launching the sidecars and the first `start`:
waits (default 180 s, exit 3) until a live sidecar holding the worker's lock
has written its own `ready` token; while the sidecar arms its first capture,
SECS count again from each shard it attaches (its `attaching` token), so
only an arming stuck for SECS fails. Tokens left by a dead sidecar (a requeued
job) do not count. Fails with the sidecar's message (exit 1) when it reports
an error, with exit 4 when a sidecar that was starting died.
";

pub const PREFLIGHT_HELP: &str = "\
jobprof-record preflight: check that a worker can be profiled, print a report

Usage:
  jobprof-record preflight (--pid PID | --pid-file FILE) [--exe-name NAME] [--require-symbols] [--off-cpu]
  jobprof-record completions bash|zsh|fish
  jobprof-record man-pages DIR
      [--event cpu-clock] [--frequency 99] [--call-graph fp|dwarf[,SIZE]] [--user-regs REGS]
      [--staging DIR]

Checks: perf is present and supports --control and --delay; perf_event_paranoid
and whether we are root; the open-files limit (soft raised to hard, warning
under 65536); the staging directory is writable; /proc/PID/exe matches
--exe-name; same uid (or root); the binary has .symtab or .debug_info (a
failure with --require-symbols, a warning otherwise); a 0.2 s test
`perf record` on the worker with the capture's event, call graph and user
registers succeeds (the report says which --user-regs applies). Exit 1 names each failed check and its fix.
";

/// Which subcommand was asked for, with its parsed options.
#[derive(Debug)]
pub enum Command {
    /// `sidecar`.
    Sidecar(SidecarOpts),
    /// `sidecar --tool nsys`.
    NsysSidecar(NsysOpts),
    /// `start` or `stop`.
    Driver(DriverOpts),
    /// `shutdown`.
    Shutdown(ShutdownOpts),
    /// `wait-ready`.
    WaitReady(WaitOpts),
    /// `preflight`.
    Preflight(PreflightOpts),
    /// Help was asked for: print this and exit 0.
    Help(&'static str),
    /// `completions SHELL`.
    Completions(String),
    /// `man-pages DIR`.
    ManPages(PathBuf),
}

/// `sidecar` options.
#[derive(Debug, Clone)]
pub struct SidecarOpts {
    /// Token directory.
    pub token_dir: PathBuf,
    /// Worker index.
    pub worker: u32,
    /// PERF_ROOT.
    pub out: PathBuf,
    /// Target, event and preflight options.
    pub target: TargetOpts,
    /// `fp` or `dwarf[,SIZE]`.
    pub call_graph: String,
    /// Most threads per shard.
    pub threads_per_shard: usize,
    /// Seconds before the stop watchdog sends SIGTERM.
    pub stop_timeout: u64,
    /// Seconds after which a capture without `stop` is ended (0 = never).
    pub max_capture: u64,
    /// Most bytes per shard's data file (`perf record --max-size`).
    pub max_shard_size: Option<u64>,
    /// Most bytes copied into symfs/.
    pub symfs_limit: u64,
    /// Attach the next capture's shards ahead of its `start`.
    pub prearm: bool,
    /// Snapshot JIT perf maps at each stop (and ask a JVM for one).
    pub jit_maps: bool,
}

/// `start`/`stop` options.
#[derive(Debug, Clone)]
pub struct DriverOpts {
    /// Whose tokens (`--tool`, default perf).
    pub tool: Tool,
    /// True for `start`, false for `stop`.
    pub start: bool,
    /// Token directory.
    pub token_dir: PathBuf,
    /// Worker index.
    pub worker: u32,
    /// Query id.
    pub query: String,
    /// Seconds to wait.
    pub timeout: u64,
}

/// `shutdown` options.
#[derive(Debug, Clone)]
pub struct ShutdownOpts {
    /// Whose sidecar (`--tool`, default perf).
    pub tool: Tool,
    /// Token directory.
    pub token_dir: PathBuf,
    /// Worker index.
    pub worker: u32,
    /// Seconds to wait for `done`.
    pub timeout: u64,
}

/// `wait-ready` options.
#[derive(Debug, Clone)]
pub struct WaitOpts {
    /// Whose sidecar (`--tool`, default perf).
    pub tool: Tool,
    /// Token directory.
    pub token_dir: PathBuf,
    /// Worker index.
    pub worker: u32,
    /// Seconds to wait.
    pub timeout: u64,
}

/// `preflight` options.
#[derive(Debug, Clone)]
pub struct PreflightOpts {
    /// Target, event and check options.
    pub target: TargetOpts,
}

/// The subcommand being parsed: decides which flags it accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sub {
    Sidecar,
    Start,
    Stop,
    Shutdown,
    WaitReady,
    Preflight,
}

impl Sub {
    fn sidecar(self) -> bool {
        self == Sub::Sidecar
    }

    fn preflight(self) -> bool {
        self == Sub::Preflight
    }

    /// `start` or `stop`.
    fn driver(self) -> bool {
        matches!(self, Sub::Start | Sub::Stop)
    }

    /// The sidecar or preflight: the subcommands that look at the worker.
    fn target(self) -> bool {
        self.sidecar() || self.preflight()
    }
}

/// Every flag's value as given (or its default), before the subcommand's
/// options are assembled from them.
struct Raw {
    token_dir: Option<PathBuf>,
    worker: Option<u32>,
    out: Option<PathBuf>,
    pid: Option<PidSource>,
    query: Option<String>,
    timeout: Option<u64>,
    exe_name: Option<String>,
    event: String,
    frequency: u32,
    call_graph: String,
    threads_per_shard: usize,
    start_timeout: u64,
    stop_timeout: u64,
    max_capture: u64,
    max_shard_size: Option<u64>,
    staging: Option<PathBuf>,
    symfs_limit: u64,
    require_symbols: bool,
    prearm: bool,
    jit_maps: bool,
    user_regs: Option<String>,
    off_cpu: bool,
    tool: Tool,
    nsys: crate::nsys::RawOpts,
}

impl Default for Raw {
    fn default() -> Self {
        Raw {
            token_dir: None,
            worker: None,
            out: None,
            pid: None,
            query: None,
            timeout: None,
            exe_name: None,
            event: "cpu-clock".to_string(),
            frequency: 99,
            call_graph: "fp".to_string(),
            threads_per_shard: 128,
            start_timeout: 180,
            stop_timeout: 120,
            max_capture: 3600,
            max_shard_size: None,
            staging: None,
            symfs_limit: 4 << 30,
            require_symbols: false,
            prearm: true,
            jit_maps: true,
            user_regs: None,
            off_cpu: false,
            tool: Tool::Perf,
            nsys: Default::default(),
        }
    }
}

/// The lexer over the arguments after the subcommand, with the help text
/// that usage errors end with.
struct Args {
    lexer: lexopt::Parser,
    help: &'static str,
}

impl Args {
    /// The next flag (`--name`), or the usage error for anything else.
    fn next_flag(&mut self) -> Result<Option<String>, Fail> {
        // lexopt takes a bare `--` as the end of the options; no subcommand
        // has operands, so it is an unknown argument like any other.
        if let Some(raw) = self.lexer.try_raw_args() {
            if raw.peek() == Some(OsStr::new("--")) {
                return Err(self.unknown("--"));
            }
        }
        let arg = match self.lexer.next() {
            Ok(Some(arg)) => arg,
            Ok(None) => return Ok(None),
            Err(lexopt::Error::UnexpectedValue { option, .. }) => {
                return Err(Fail::usage(format!(
                    "{option} takes no value\n\n{}",
                    self.help
                )))
            }
            Err(e) => return Err(Fail::usage(format!("{e}\n\n{}", self.help))),
        };
        match arg {
            lexopt::Arg::Long(name) => Ok(Some(format!("--{name}"))),
            lexopt::Arg::Short(c) => Err(self.unknown(&format!("-{c}"))),
            lexopt::Arg::Value(v) => Err(self.unknown(&v.to_string_lossy())),
        }
    }

    /// The value of `flag` (`--flag=VALUE` or `--flag VALUE`), which must be
    /// UTF-8: it names files, events and ids that end up in text files.
    fn value(&mut self, flag: &str) -> Result<String, Fail> {
        let v = self
            .lexer
            .value()
            .map_err(|_| Fail::usage(format!("{flag} needs a value\n\n{}", self.help)))?;
        v.into_string().map_err(|v| {
            Fail::usage(format!(
                "{flag}: `{}` is not valid UTF-8; jobprof-record takes UTF-8 paths, names \
                 and numbers only",
                v.to_string_lossy()
            ))
        })
    }

    fn path(&mut self, flag: &str) -> Result<PathBuf, Fail> {
        self.value(flag).map(PathBuf::from)
    }

    fn number<T: std::str::FromStr>(&mut self, flag: &str) -> Result<T, Fail> {
        let v = self.value(flag)?;
        v.parse()
            .map_err(|_| Fail::usage(format!("{flag}: `{v}` is not a valid number")))
    }

    /// A number of at least 1.
    fn positive<T: std::str::FromStr + Default + PartialEq>(
        &mut self,
        flag: &str,
    ) -> Result<T, Fail> {
        let n = self.number(flag)?;
        if n == T::default() {
            return Err(Fail::usage(format!("{flag} must be at least 1")));
        }
        Ok(n)
    }

    fn unknown(&self, flag: &str) -> Fail {
        Fail::usage(format!("unknown argument `{flag}`\n\n{}", self.help))
    }
}

fn missing(flag: &str, help: &str) -> Fail {
    Fail::usage(format!("{flag} is required\n\n{help}"))
}

/// Parses a size in bytes with an optional K, M, G or T suffix (powers of 1024).
pub fn parse_bytes(s: &str) -> Option<u64> {
    let s = s.trim();
    let (digits, mult) = match s.chars().last()?.to_ascii_uppercase() {
        'K' => (&s[..s.len() - 1], 1u64 << 10),
        'M' => (&s[..s.len() - 1], 1 << 20),
        'G' => (&s[..s.len() - 1], 1 << 30),
        'T' => (&s[..s.len() - 1], 1 << 40),
        _ => (s, 1),
    };
    digits.parse::<u64>().ok()?.checked_mul(mult)
}

/// Checks `--call-graph`: `fp`, `dwarf` or `dwarf,SIZE`.
fn parse_call_graph(v: &str) -> Result<String, Fail> {
    let ok = v == "fp"
        || v == "dwarf"
        || v.strip_prefix("dwarf,")
            .is_some_and(|n| n.parse::<u32>().is_ok_and(|n| n > 0));
    if ok {
        Ok(v.to_string())
    } else {
        Err(Fail::usage(format!(
            "--call-graph: `{v}` is not fp, dwarf or dwarf,SIZE (e.g. dwarf,8192)"
        )))
    }
}

/// Parses the whole command line (without the program name).
pub fn parse(argv: impl IntoIterator<Item = OsString>) -> Result<Command, Fail> {
    let mut argv = argv.into_iter();
    let Some(first) = argv.next() else {
        return Err(Fail::usage(format!("no command given\n\n{MAIN_HELP}")));
    };
    let (sub, help) = match first.to_str().unwrap_or("") {
        "-h" | "--help" | "help" => return Ok(Command::Help(MAIN_HELP)),
        "-V" | "--version" => {
            return Ok(Command::Help(concat!(
                "jobprof-record ",
                env!("CARGO_PKG_VERSION"),
                "\n"
            )))
        }
        "sidecar" => (Sub::Sidecar, SIDECAR_HELP),
        "start" => (Sub::Start, START_HELP),
        "stop" => (Sub::Stop, STOP_HELP),
        "shutdown" => (Sub::Shutdown, SHUTDOWN_HELP),
        "wait-ready" => (Sub::WaitReady, WAIT_HELP),
        "preflight" => (Sub::Preflight, PREFLIGHT_HELP),
        "completions" | "man-pages" => return generate(&first, argv.collect()),
        _ => {
            return Err(Fail::usage(format!(
                "unknown command `{}`\n\n{MAIN_HELP}",
                first.to_string_lossy()
            )))
        }
    };
    let rest: Vec<OsString> = argv.collect();
    if rest
        .iter()
        .any(|s| s == OsStr::new("-h") || s == OsStr::new("--help"))
    {
        let nsys = rest.windows(2).any(|w| w[0] == "--tool" && w[1] == "nsys")
            || rest.iter().any(|s| s == "--tool=nsys");
        if sub == Sub::Sidecar && nsys {
            return Ok(Command::Help(crate::nsys::SIDECAR_HELP));
        }
        return Ok(Command::Help(help));
    }
    let mut args = Args {
        lexer: lexopt::Parser::from_args(rest),
        help,
    };
    let mut raw = Raw::default();
    while let Some(flag) = args.next_flag()? {
        if !raw.take(sub, &flag, &mut args)? {
            return Err(args.unknown(&flag));
        }
    }
    raw.into_command(sub, help)
}

/// `completions SHELL` or `man-pages DIR`: one argument, or `--help`.
fn generate(sub: &OsStr, rest: Vec<OsString>) -> Result<Command, Fail> {
    let completions = sub == "completions";
    let help = if completions {
        COMPLETIONS_HELP
    } else {
        MAN_HELP
    };
    match &rest[..] {
        [h] if h == "-h" || h == "--help" => Ok(Command::Help(help)),
        [a] if !a.to_string_lossy().starts_with('-') => Ok(if completions {
            Command::Completions(a.to_string_lossy().into_owned())
        } else {
            Command::ManPages(PathBuf::from(a))
        }),
        _ => Err(Fail::usage(format!(
            "{}: give one argument\n\n{help}",
            sub.to_string_lossy()
        ))),
    }
}

impl Raw {
    /// Reads `flag` (and its value) when `sub` accepts it; false when it
    /// does not.
    fn take(&mut self, sub: Sub, flag: &str, a: &mut Args) -> Result<bool, Fail> {
        match flag {
            "--token-dir" if !sub.preflight() => self.token_dir = Some(a.path(flag)?),
            "--worker" if !sub.preflight() => self.worker = Some(validate_worker(&a.value(flag)?)?),
            "--query" if sub.driver() => {
                let v = a.value(flag)?;
                validate_query(&v)?;
                self.query = Some(v);
            }
            "--timeout" if !sub.target() => self.timeout = Some(a.number(flag)?),
            "--out" if sub.sidecar() => self.out = Some(a.path(flag)?),
            "--tool" if !sub.preflight() => {
                let v = a.value(flag)?;
                self.tool = Tool::parse(&v).ok_or_else(|| {
                    Fail::usage(format!("--tool: `{v}` is neither perf nor nsys"))
                })?;
            }
            _ if sub.sidecar() && self.nsys.take(flag, || a.value(flag))? => {}
            _ if sub.target() && self.take_target(flag, a)? => {}
            _ if sub.sidecar() => return self.take_sidecar(flag, a),
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// The flags of the sidecar and preflight (the worker, event, checks).
    fn take_target(&mut self, flag: &str, a: &mut Args) -> Result<bool, Fail> {
        match flag {
            "--pid" => {
                let v: u32 = a.number(flag)?;
                if v == 0 {
                    return Err(Fail::usage("--pid: 0 is not a process id".into()));
                }
                self.pid = Some(PidSource::Pid(v));
            }
            "--pid-file" => self.pid = Some(PidSource::File(a.path(flag)?)),
            "--exe-name" => self.exe_name = Some(a.value(flag)?),
            "--event" => self.event = a.value(flag)?,
            "--frequency" => self.frequency = a.positive(flag)?,
            "--staging" => self.staging = Some(a.path(flag)?),
            "--require-symbols" => self.require_symbols = true,
            "--call-graph" => self.call_graph = parse_call_graph(&a.value(flag)?)?,
            "--user-regs" => {
                let v = a.value(flag)?;
                self.user_regs = Some(crate::regs::parse(&v).map_err(Fail::usage)?);
            }
            "--off-cpu" => self.off_cpu = true,
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// The flags only the sidecar takes (shards, timeouts, limits).
    fn take_sidecar(&mut self, flag: &str, a: &mut Args) -> Result<bool, Fail> {
        match flag {
            "--no-prearm" => self.prearm = false,
            "--jit-maps" => {
                self.jit_maps = match a.value(flag)?.as_str() {
                    "auto" => true,
                    "off" => false,
                    v => {
                        return Err(Fail::usage(format!(
                            "--jit-maps: `{v}` is neither auto nor off"
                        )))
                    }
                }
            }
            "--threads-per-shard" => self.threads_per_shard = a.positive(flag)?,
            "--start-timeout" => self.start_timeout = a.number(flag)?,
            "--stop-timeout" => self.stop_timeout = a.number(flag)?,
            "--max-capture" => self.max_capture = a.number(flag)?,
            "--max-shard-size" => {
                let v = a.value(flag)?;
                let n = parse_bytes(&v).filter(|&n| n >= 4096).ok_or_else(|| {
                    Fail::usage(format!(
                        "--max-shard-size: `{v}` is not a size of at least 4K (e.g. 2G, 500M)"
                    ))
                })?;
                self.max_shard_size = Some(n);
            }
            "--symfs-limit" => {
                let v = a.value(flag)?;
                self.symfs_limit = parse_bytes(&v).ok_or_else(|| {
                    Fail::usage(format!(
                        "--symfs-limit: `{v}` is not a size (e.g. 2G, 500M, 123456)"
                    ))
                })?;
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// The worker, event and check options, or the usage error for a
    /// missing `--pid`/`--pid-file`.
    fn target(&mut self, help: &str) -> Result<TargetOpts, Fail> {
        Ok(TargetOpts {
            pid: self
                .pid
                .take()
                .ok_or_else(|| missing("--pid or --pid-file", help))?,
            exe_name: self.exe_name.take(),
            event: std::mem::take(&mut self.event),
            frequency: self.frequency,
            require_symbols: self.require_symbols,
            off_cpu: self.off_cpu,
            staging: self.staging.take(),
            start_timeout: self.start_timeout,
            call_graph: self.call_graph.clone(),
            explicit_user_regs: self.user_regs.take(),
        })
    }

    /// The token directory and worker index every subcommand but preflight needs.
    fn worker(&mut self, help: &str) -> Result<(PathBuf, u32), Fail> {
        let dir = self
            .token_dir
            .take()
            .ok_or_else(|| missing("--token-dir", help))?;
        let worker = self.worker.ok_or_else(|| missing("--worker", help))?;
        Ok((dir, worker))
    }

    /// Assembles `sub`'s options; fails when a required flag is missing.
    fn into_command(mut self, sub: Sub, help: &str) -> Result<Command, Fail> {
        if sub.preflight() {
            let target = self.target(help)?;
            return Ok(Command::Preflight(PreflightOpts { target }));
        }
        let (token_dir, worker) = self.worker(help)?;
        let tool = self.tool;
        if sub.sidecar() && tool == Tool::Nsys {
            let given = [
                ("--pid or --pid-file", self.pid.is_some()),
                ("--exe-name", self.exe_name.is_some()),
            ];
            if let Some((flag, _)) = given.iter().find(|(_, g)| *g) {
                return Err(Fail::usage(format!(
                    "{flag}: not for --tool nsys (the worker is the `nsys launch` session \
                     the sidecar shares its container with)"
                )));
            }
            let out = self.out.take().ok_or_else(|| missing("--out", help))?;
            let staging = self.staging.take();
            return Ok(Command::NsysSidecar(
                self.nsys.finish(token_dir, worker, out, staging),
            ));
        }
        if sub.sidecar() && self.nsys.given() {
            return Err(Fail::usage(
                "--nsys-bin, --settle and --report-timeout are for --tool nsys".into(),
            ));
        }
        Ok(match sub {
            Sub::Sidecar => Command::Sidecar(SidecarOpts {
                token_dir,
                worker,
                out: self.out.take().ok_or_else(|| missing("--out", help))?,
                target: self.target(help)?,
                call_graph: self.call_graph,
                threads_per_shard: self.threads_per_shard,
                stop_timeout: self.stop_timeout,
                max_capture: self.max_capture,
                max_shard_size: self.max_shard_size,
                symfs_limit: self.symfs_limit,
                prearm: self.prearm,
                jit_maps: self.jit_maps,
            }),
            Sub::Start | Sub::Stop => Command::Driver(DriverOpts {
                tool,
                start: sub == Sub::Start,
                token_dir,
                worker,
                query: self.query.ok_or_else(|| missing("--query", help))?,
                timeout: self
                    .timeout
                    .unwrap_or(if sub == Sub::Start { 120 } else { 600 }),
            }),
            Sub::Shutdown => Command::Shutdown(ShutdownOpts {
                tool,
                token_dir,
                worker,
                // nsys: a report still written at shutdown may take up to
                // the sidecar's --report-timeout (600 s) after its stop.
                timeout: self
                    .timeout
                    .unwrap_or(if tool == Tool::Nsys { 900 } else { 600 }),
            }),
            // wait-ready (preflight returned above).
            _ => Command::WaitReady(WaitOpts {
                tool,
                token_dir,
                worker,
                timeout: self.timeout.unwrap_or(180),
            }),
        })
    }
}

#[cfg(test)]
#[path = "cli_tests.rs"]
mod tests;
